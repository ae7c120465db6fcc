//! The launch manifest: what the runtime needs to launch a tlc kernel without its source
//! (target, parameters with dtype and symbolic shape, and per `.entry` — one per `T.Kernel`,
//! launched in order — grid / block / dynamic shared memory as dim expressions). It travels
//! as ONE comment line at the top of the `.ptx` (`// tlc-manifest: {json}`), so a single file
//! is the whole kernel: it cannot be separated from its description or paired with a stale
//! sidecar. The format is in `docs/manifest.md`; its JSON shapes are in `wire.rs`, its TMA
//! tensor maps in `tensor_map.rs`.

mod tensor_map;
mod wire;

pub use tensor_map::{
    tma_supports, OobFill, Swizzle, TensorMapDesc, MAX_BOX, MAX_TMA_RANK, TMA_GRANULE,
};

use crate::error::{Result, RuntimeError};
use crate::expr::DimExpr;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use tlc_ir::{DType, Target};

/// The newest manifest format version this crate reads and writes: version 1 describes one
/// entry (`entry`, `grid`, `block`, `shared_bytes` at the top level), version 2 a `kernels`
/// list, version 3 a `kernels` list plus `tensor_maps`. Each file is written with the lowest
/// version that describes it (`Manifest::version`), so existing files and their readers are
/// unchanged, while an older reader refuses a file it cannot launch correctly (several
/// kernels, or kernels that take tensor maps) instead of launching it wrong.
pub const MANIFEST_VERSION: u32 = 3;

/// The prefix of the manifest line.
pub const HEADER_PREFIX: &str = "// tlc-manifest: ";

/// Dynamic shared memory a kernel may use without opting in (`cuFuncSetAttribute`).
pub const DEFAULT_SHARED_LIMIT: u32 = 48 * 1024;

/// How a kernel uses a tensor parameter (`tlc run --device` compares the written ones).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Access {
    Read,
    Write,
    ReadWrite,
}

/// A tensor parameter: passed to the kernel as a 64-bit global pointer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Param {
    pub name: String,
    #[serde(with = "dtype_text")]
    pub dtype: DType,
    /// One expression per dim, outermost first (row-major, contiguous).
    pub shape: Vec<DimExpr>,
    pub access: Access,
}

/// A symbolic dim: bound from the argument shapes and passed to the kernel as a scalar
/// parameter after the tensor parameters, in declaration order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DimDecl {
    pub name: String,
    /// `int32` (a `.u32`/`.s32` PTX parameter) or `int64` (`.u64`/`.s64`).
    #[serde(with = "dtype_text")]
    pub dtype: DType,
    /// A scalar parameter of the function (`n: T.int32`): its position in the caller's
    /// argument list (tensors and scalars as written). The caller gives its value by name;
    /// no shape needs to hold it. Absent for dims read off shapes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arg: Option<usize>,
    /// Every value must be a multiple of this (`T.symbolic(..., multiple_of=M)`); checked
    /// at launch. Absent: any value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multiple_of: Option<i64>,
}

/// One `.entry` of the module and how to launch it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Launch {
    /// The `.entry` name in the PTX.
    pub entry: String,
    /// 1 to 3 expressions: x, y, z.
    pub grid: Vec<DimExpr>,
    /// 1 to 3 constants: x, y, z.
    pub block: Vec<u32>,
    /// Dynamic shared memory in bytes.
    pub shared_bytes: DimExpr,
    /// Blocks per thread-block cluster, x first (1 to 3 constants; empty: no cluster). The
    /// PTX entry declares it (`.reqnctapercluster`), so a plain launch is a cluster launch;
    /// the grid must be a whole number of clusters along each axis (checked at launch).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster: Vec<u32>,
    /// The kernel synchronizes its whole grid (`T.sync_grid()`): it is launched
    /// cooperatively (`cuLaunchCooperativeKernel`), and only when every block of its grid
    /// can be resident on the GPU at once (checked at launch). Absent: false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cooperative: bool,
}

/// The launch manifest of a compiled prim_func: its parameters and dims, shared by every
/// entry, and its kernels in launch order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "wire::Wire", into = "wire::Wire")]
pub struct Manifest {
    pub target: Target,
    pub params: Vec<Param>,
    /// The function's own global tensors (`T.alloc_global`): the runtime allocates each for
    /// a launch, zero-filled, with its shape over the bound dims; every entry takes their
    /// addresses after those of `params`. Empty for most kernels.
    pub scratch: Vec<Param>,
    pub dims: Vec<DimDecl>,
    /// At least one. Launched in this order on one stream, each a full grid, so kernel
    /// `i + 1` sees everything kernel `i` wrote. Every entry takes the same parameter list.
    pub kernels: Vec<Launch>,
    /// TMA tensor maps, in kernel parameter order: every entry takes one 128-byte map per
    /// element after the dims. Empty for kernels without TMA (versions 1 and 2).
    pub tensor_maps: Vec<TensorMapDesc>,
}

/// Values of the symbolic dims, in the manifest's declaration order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Dims(Vec<(String, i64)>);

impl Dims {
    /// Dims from (name, value) pairs, e.g. for evaluating a plan by hand.
    pub fn from_pairs<S: Into<String>>(pairs: impl IntoIterator<Item = (S, i64)>) -> Dims {
        Dims(pairs.into_iter().map(|(n, v)| (n.into(), v)).collect())
    }

    pub fn get(&self, name: &str) -> Option<i64> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, v)| *v)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, i64)> {
        self.0.iter().map(|(n, v)| (n.as_str(), *v))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Evaluates an expression over these dims.
    pub fn eval(&self, e: &DimExpr) -> Result<i64> {
        e.eval(&|name| self.get(name))
    }
}

impl fmt::Display for Dims {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (n, v)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{n} = {v}")?;
        }
        Ok(())
    }
}

impl Manifest {
    /// The format version this manifest is written with: 3 with tensor maps, otherwise 1
    /// for one kernel and 2 for several.
    pub fn version(&self) -> u32 {
        if !self.tensor_maps.is_empty() {
            3
        } else if self.kernels.len() == 1 {
            1
        } else {
            2
        }
    }

    /// `named`'s values in the order of the parameters (a launch's argument order), matched
    /// by parameter name; a parameter `named` lacks is left out, so the launch's count check
    /// reports it.
    pub fn in_param_order<'t, T>(&self, named: &[(&str, &'t T)]) -> Vec<&'t T> {
        self.params
            .iter()
            .filter_map(|p| named.iter().find(|(n, _)| *n == p.name).map(|&(_, t)| t))
            .collect()
    }

    /// The entry names, for messages: `f`, or `f_k0, f_k1`.
    pub fn entries(&self) -> String {
        let names: Vec<&str> = self.kernels.iter().map(|k| k.entry.as_str()).collect();
        names.join(", ")
    }

    /// The single header line (with its newline) that starts the PTX file.
    pub fn to_ptx_header(&self) -> String {
        // Serializing plain structs, strings and integers cannot fail, and serde_json escapes
        // every control character, so the JSON is one line.
        let json = serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"));
        format!("{HEADER_PREFIX}{json}\n")
    }

    /// The manifest line followed by the PTX body: the file `tlc compile` writes.
    pub fn prepend_to(&self, ptx_body: &str) -> String {
        let mut out = self.to_ptx_header();
        out.push_str(ptx_body);
        out
    }

    /// Reads and validates the manifest from the PTX's leading comment lines.
    pub fn from_ptx(ptx: &str) -> Result<Manifest> {
        let mut found = None;
        for line in ptx.lines() {
            let line = line.trim_start();
            if line.is_empty() {
                continue;
            }
            if !line.starts_with("//") {
                break; // the header is over: the manifest must sit above the first directive
            }
            if let Some(json) = line.strip_prefix(HEADER_PREFIX.trim_end()) {
                if found.is_some() {
                    return Err(RuntimeError::BadManifest(
                        "the PTX has two `// tlc-manifest:` lines".into(),
                    ));
                }
                found = Some(json.trim());
            }
        }
        Manifest::from_json(found.ok_or(RuntimeError::MissingManifest)?)
    }

    /// Parses and validates the JSON object of a manifest line.
    pub fn from_json(json: &str) -> Result<Manifest> {
        let m: Manifest = serde_json::from_str(json).map_err(|e| {
            RuntimeError::BadManifest(format!("{e} (in the `// tlc-manifest:` JSON)"))
        })?;
        m.validate()?;
        Ok(m)
    }

    /// Checks what JSON parsing alone cannot: at least one kernel, unique names, declared
    /// and bindable dims, 1–3 grid and block dims, a block of at most 1024 threads, and
    /// tensor maps that TMA can encode for some argument (see `tensor_map.rs`). An error
    /// about one of several kernels names it.
    pub fn validate(&self) -> Result<()> {
        let bad = |msg: String| Err(RuntimeError::BadManifest(msg));
        if self.kernels.is_empty() {
            return bad("`kernels` is empty; a manifest describes at least one kernel".into());
        }
        let mut entries = BTreeSet::new();
        for k in &self.kernels {
            if !is_ptx_identifier(&k.entry) {
                return bad(format!("entry `{}` is not a PTX identifier", k.entry));
            }
            if !entries.insert(k.entry.as_str()) {
                return bad(format!("entry `{}` is repeated", k.entry));
            }
        }
        let mut names = BTreeSet::new();
        for p in self.params.iter().chain(&self.scratch) {
            if p.name.is_empty() || !names.insert(p.name.as_str()) {
                return bad(format!("parameter name `{}` is empty or repeated", p.name));
            }
        }
        let mut dim_names = BTreeSet::new();
        for d in &self.dims {
            if d.name.is_empty() || !dim_names.insert(d.name.as_str()) {
                return bad(format!("dim name `{}` is empty or repeated", d.name));
            }
            if !matches!(d.dtype, DType::Int32 | DType::Int64) {
                return bad(format!(
                    "dim `{}` has dtype {}; dims are int32 or int64",
                    d.name, d.dtype
                ));
            }
        }
        // Every expression may only mention declared dims.
        let several = self.kernels.len() > 1;
        let mut exprs: Vec<(String, &DimExpr)> = Vec::new();
        for p in self.params.iter().chain(&self.scratch) {
            for (i, e) in p.shape.iter().enumerate() {
                exprs.push((format!("shape of `{}` (dim {i})", p.name), e));
            }
        }
        for k in &self.kernels {
            let of = if several {
                format!(" of `{}`", k.entry)
            } else {
                String::new()
            };
            for (i, e) in k.grid.iter().enumerate() {
                exprs.push((format!("grid.{}{of}", axis(i)), e));
            }
            exprs.push((format!("shared_bytes{of}"), &k.shared_bytes));
        }
        for (place, e) in exprs {
            let mut used = BTreeSet::new();
            e.dims(&mut used);
            if let Some(u) = used.iter().find(|u| !dim_names.contains(u.as_str())) {
                return bad(format!(
                    "{place} uses dim `{u}`, which `dims` does not declare"
                ));
            }
        }
        // Every dim must be readable off some argument's shape, or be a scalar argument.
        for d in self.dims.iter().filter(|d| d.arg.is_none()) {
            let bindable = self.params.iter().any(|p| {
                p.shape
                    .iter()
                    .any(|e| e.solvable().is_some_and(|(v, _, _)| v == d.name))
            });
            if !bindable {
                return bad(format!(
                    "dim `{}` is not the size of any parameter dimension, so it cannot be \
                     inferred from the arguments",
                    d.name
                ));
            }
        }
        for k in &self.kernels {
            if let Err(msg) = k.check_shape() {
                return bad(if several {
                    format!("kernel `{}`: {msg}", k.entry)
                } else {
                    msg
                });
            }
        }
        let tensors: Vec<Param> = self.params.iter().chain(&self.scratch).cloned().collect();
        tensor_map::check(self.target, &tensors, &self.tensor_maps)
            .map_err(RuntimeError::BadManifest)
    }

    /// Infers the symbolic dims from the shapes of the given arguments (one per parameter, in
    /// order) and checks every argument's rank and every dimension against them.
    pub fn bind_dims(&self, shapes: &[&[usize]]) -> Result<Dims> {
        let shapes: Vec<Option<&[usize]>> = shapes.iter().map(|&s| Some(s)).collect();
        self.bind_dims_with(&shapes, &[])
    }

    /// [`Manifest::bind_dims`] where some arguments are missing (`None`: an output the
    /// caller will allocate from the bound dims, see [`Manifest::shape_of`]) and some dims
    /// are given by name. A given dim must be one of the kernel's and agree with every shape
    /// that binds it; a dim no shape binds must be given.
    pub fn bind_dims_with(
        &self,
        shapes: &[Option<&[usize]>],
        given: &[(&str, i64)],
    ) -> Result<Dims> {
        if shapes.len() != self.params.len() {
            return Err(RuntimeError::ArgCount {
                entry: self.entries(),
                expected: self.params.len(),
                found: shapes.len(),
            });
        }
        for (p, s) in self.params.iter().zip(shapes) {
            let Some(s) = s else { continue };
            if p.shape.len() != s.len() {
                return Err(RuntimeError::ArgRank {
                    param: p.name.clone(),
                    expected: p.shape.len(),
                    found: s.len(),
                });
            }
        }
        // Where each dim's value comes from: a parameter's shape, or the caller by name.
        #[derive(Clone, Copy)]
        enum Origin<'a> {
            Param(&'a str),
            Given,
        }
        let mut bound: BTreeMap<&str, (i64, Origin)> = BTreeMap::new();
        for &(name, value) in given {
            let Some(decl) = self.dims.iter().find(|d| d.name == name) else {
                let names: Vec<&str> = self.dims.iter().map(|d| d.name.as_str()).collect();
                return Err(RuntimeError::Dim(format!(
                    "the kernel has no symbolic dim `{name}` (its dims: {})",
                    if names.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(", ")
                    }
                )));
            };
            if let Some(prev) = bound.insert(decl.name.as_str(), (value, Origin::Given)) {
                if prev.0 != value {
                    return Err(RuntimeError::Dim(format!(
                        "dim `{name}` is given twice, as {} and {value}",
                        prev.0
                    )));
                }
            }
        }
        // Pass 1: a dimension whose expression is a bare dim binds (or must agree with) it.
        for (p, s) in self.params.iter().zip(shapes) {
            let Some(s) = s else { continue };
            for (i, (e, &size)) in p.shape.iter().zip(s.iter()).enumerate() {
                let DimExpr::Dim(name) = e else { continue };
                let value = size_as_i64(&p.name, i, size)?;
                match bound.get(name.as_str()) {
                    Some(&(prev, from)) if prev != value => {
                        let source = match from {
                            Origin::Param(param) => format!("from `{param}`"),
                            Origin::Given => "was given".to_string(),
                        };
                        return Err(RuntimeError::ArgShape {
                            param: p.name.clone(),
                            message: format!("dim {i} is {value} but {name} = {prev} {source}"),
                        });
                    }
                    Some(_) => {}
                    None => {
                        bound.insert(name, (value, Origin::Param(&p.name)));
                    }
                }
            }
        }
        // Pass 1b: a dim still unbound from an extent it solves for (`batch + 1`); pass 2
        // checks every such extent against the bound value.
        for (p, s) in self.params.iter().zip(shapes) {
            let Some(s) = s else { continue };
            for (i, (e, &size)) in p.shape.iter().zip(s.iter()).enumerate() {
                let Some((name, factor, offset)) = e.solvable() else {
                    continue;
                };
                if bound.contains_key(name) {
                    continue;
                }
                let size = size_as_i64(&p.name, i, size)?;
                let value = tlc_ir::solve_extent(factor, offset, size).map_err(|why| {
                    RuntimeError::ArgShape {
                        param: p.name.clone(),
                        message: format!("dim {i} is {size} where the kernel declares {e}: {why}"),
                    }
                })?;
                bound.insert(name, (value, Origin::Param(&p.name)));
            }
        }
        let mut dims = Vec::with_capacity(self.dims.len());
        for d in &self.dims {
            let Some(&(value, from)) = bound.get(d.name.as_str()) else {
                return Err(self.unbound(&d.name, shapes));
            };
            if let Some(why) =
                tlc_ir::dim_range_error(&d.name, d.dtype, d.multiple_of.unwrap_or(1), value)
            {
                return Err(match from {
                    Origin::Param(param) => RuntimeError::ArgShape {
                        param: param.to_string(),
                        message: format!("sets {} = {value}, {why}", d.name),
                    },
                    Origin::Given => {
                        RuntimeError::Dim(format!("{} = {value} was given, {why}", d.name))
                    }
                });
            }
            dims.push((d.name.clone(), value));
        }
        let dims = Dims(dims);
        // Pass 2: every other dimension must equal its expression's value.
        for (p, s) in self.params.iter().zip(shapes) {
            let Some(s) = s else { continue };
            for (i, (e, &size)) in p.shape.iter().zip(s.iter()).enumerate() {
                if matches!(e, DimExpr::Dim(_)) {
                    continue;
                }
                let want = dims.eval(e)?;
                let value = size_as_i64(&p.name, i, size)?;
                if want != value {
                    let why = match e {
                        DimExpr::Int(_) => format!("the kernel needs {want}"),
                        _ => format!("the kernel needs {e} = {want} with {dims}"),
                    };
                    return Err(RuntimeError::ArgShape {
                        param: p.name.clone(),
                        message: format!("dim {i} is {value} but {why}"),
                    });
                }
            }
        }
        Ok(dims)
    }

    /// Why dim `name` has no value: no argument binds it. With every argument given the
    /// manifest is at fault (the compiler makes every dim appear, bare or solvable, in some
    /// shape); else
    /// only the missing outputs bind it and the caller must give it.
    fn unbound(&self, name: &str, shapes: &[Option<&[usize]>]) -> RuntimeError {
        let missing: Vec<&str> = self
            .params
            .iter()
            .zip(shapes)
            .filter(|(_, s)| s.is_none())
            .map(|(p, _)| p.name.as_str())
            .collect();
        if missing.is_empty() {
            return RuntimeError::BadManifest(format!("dim `{name}` is not bound by any argument"));
        }
        RuntimeError::Dim(format!(
            "dim `{name}` is set only by the shape of {} to allocate; give it by name \
             ({name}=...) or pass the output",
            missing
                .iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ))
    }

    /// The shape of parameter `index` for bound dims: what an output the caller allocates
    /// must be. A dimension that evaluates below zero is an error naming the parameter.
    pub fn shape_of(&self, index: usize, dims: &Dims) -> Result<Vec<usize>> {
        let Some(p) = self.params.get(index) else {
            return Err(RuntimeError::BadManifest(format!("no parameter {index}")));
        };
        p.shape
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let v = dims.eval(e)?;
                usize::try_from(v).map_err(|_| RuntimeError::ArgShape {
                    param: p.name.clone(),
                    message: format!(
                        "would have dim {i} = {e} = {v} with {dims}; it must be at least 0"
                    ),
                })
            })
            .collect()
    }
}

impl Launch {
    /// 1–3 grid and block entries, and a block of 1 to 1024 threads.
    fn check_shape(&self) -> std::result::Result<(), String> {
        if !(1..=3).contains(&self.grid.len()) {
            return Err(format!(
                "grid has {} entries; 1 to 3 expected",
                self.grid.len()
            ));
        }
        if !(1..=3).contains(&self.block.len()) {
            return Err(format!(
                "block has {} entries; 1 to 3 expected",
                self.block.len()
            ));
        }
        match positive_product(&self.block) {
            Some(t) if t <= 1024 => {}
            Some(t) => return Err(format!("block has {t} threads; at most 1024 are allowed")),
            None => return Err("block has a zero entry".into()),
        }
        if self.cooperative && !self.cluster.is_empty() {
            return Err("a cooperative kernel has no cluster".into());
        }
        if self.cluster.len() > 3 || self.cluster.len() > self.grid.len() {
            return Err(format!(
                "cluster has {} entries; at most 3, and no more than the grid's",
                self.cluster.len()
            ));
        }
        match positive_product(&self.cluster) {
            Some(b) if b <= tlc_ir::target::MAX_CLUSTER_SIZE as u64 => Ok(()),
            Some(b) => Err(format!(
                "cluster has {b} blocks; at most {} are allowed",
                tlc_ir::target::MAX_CLUSTER_SIZE
            )),
            None => Err("cluster has a zero entry".into()),
        }
    }
}

/// The product of `extents`, `None` when one is 0.
fn positive_product(extents: &[u32]) -> Option<u64> {
    extents
        .iter()
        .try_fold(1u64, |acc, &e| (e > 0).then(|| acc * u64::from(e)))
}

fn size_as_i64(param: &str, dim: usize, size: usize) -> Result<i64> {
    i64::try_from(size).map_err(|_| RuntimeError::ArgShape {
        param: param.to_string(),
        message: format!("dim {dim} is {size}, beyond int64"),
    })
}

/// `x`, `y`, `z` for axis 0, 1, 2.
pub fn axis(i: usize) -> &'static str {
    ["x", "y", "z"].get(i).copied().unwrap_or("?")
}

/// PTX identifiers: `[a-zA-Z_$%][a-zA-Z0-9_$]*` (`%` only leading), which also keeps the
/// name free of NUL bytes for `cuModuleGetFunction`.
fn is_ptx_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphabetic() || matches!(c, '_' | '$' | '%') => {}
        _ => return false,
    }
    chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '$'))
}

/// dtypes are written with the IR's spelling (`"float16"`, `"float8_e4m3"`, …).
mod target_text {
    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serializer};
    use tlc_ir::Target;

    pub fn serialize<S: Serializer>(t: &Target, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(t.name())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Target, D::Error> {
        let text = String::deserialize(d)?;
        Target::parse(&text).ok_or_else(|| {
            D::Error::custom(format!(
                "unknown target \"{text}\" (expected one of {})",
                Target::names()
            ))
        })
    }
}

mod dtype_text {
    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serializer};
    use tlc_ir::DType;

    pub fn serialize<S: Serializer>(d: &DType, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(d.name())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<DType, D::Error> {
        let text = String::deserialize(d)?;
        DType::parse(&text).ok_or_else(|| {
            let all: Vec<&str> = DType::ALL.iter().map(|t| t.name()).collect();
            D::Error::custom(format!(
                "unknown dtype \"{text}\" (expected one of {})",
                all.join(", ")
            ))
        })
    }
}
