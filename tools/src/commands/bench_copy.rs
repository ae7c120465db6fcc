//! `tlc bench FILE --vs copy`: the bandwidth of any kernel, against a device-to-device copy
//! timed in the same process. Each shape (a value for every symbolic dim, from `-D` and
//! `--shapes`) is compiled with its dims bound as constants; every parameter gets seeded random
//! data (that of `tlc run --seed`); the kernel and the copy are timed with CUDA events (warm-up
//! runs, then the median of many, as `--vs cublas` times).
//!
//! The bytes model: the kernel moves the sum of its parameters' sizes, each read or written
//! once. It is exact for a kernel that reads each input once and writes each output once
//! (norms, softmax, casts, elementwise ops); a kernel that reads a tensor twice, writes only
//! part of an output or reads and writes the same parameter is not counted exactly
//! (`docs/cli.md`). The copy moves as many bytes: `cuMemcpyDtoDAsync` of half of them, each
//! copied byte read once and written once, so both touch the same amount of memory.

use crate::commands::bench::{summarize, Timing};
use crate::commands::compile::{device_context, device_target};
use crate::tunables::{self, Tuning};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;
use tlc::diagnostics::SourceFile;
use tlc::driver::compile_func;
use tlc::driver::Emit;
use tlc::frontend::{self, UserError};
use tlc_ir::specialize::parse_define;
use tlc_ir::{interp, DType, Diagnostic, PrimFunc};
use tlc_passes::{Instrumentation, Target};
use tlc_runtime::timing::time_ms;
use tlc_runtime::{DeviceTensor, Gpu, RuntimeError};

/// What `tlc bench --vs copy` was asked to do.
pub struct CopyArgs<'a> {
    pub file: &'a Path,
    /// `-D NAME=VALUE` texts; a name given several times is swept over its values.
    pub defines: &'a [String],
    /// `--shapes` text, `NAME=VALUE,...;NAME=VALUE,...`.
    pub shapes: Option<&'a str>,
    /// `--sweep` and `--specialize` belong to `--vs cublas`: refused here.
    pub sweep: Option<&'a str>,
    pub specialize: bool,
    pub warmup: usize,
    pub iters: usize,
    /// `None`: sm_90a on a compute capability 9.0 GPU, else sm_80 (as `tlc run --device`).
    pub target: Option<Target>,
    pub csv: bool,
    pub seed: u64,
    /// How each shape's tunables are chosen (the cache is keyed by the shape's dims).
    pub tuning: Tuning,
}

/// The error for `--shapes` given to `--vs cublas`.
pub fn shapes_need_copy() -> UserError {
    UserError::plain(
        "`--shapes` is for `--vs copy`; `--vs cublas` takes GEMM shapes with `--sweep \
         \"M,N,K;...\"`",
    )
}

/// One shape: a value for each bound dim, in the order they were given.
pub type Binding = Vec<(String, i64)>;

/// `M=8192,N=1024` (empty for a kernel without dims).
pub fn binding_text(b: &Binding) -> String {
    let parts: Vec<String> = b.iter().map(|(n, v)| format!("{n}={v}")).collect();
    parts.join(",")
}

/// Parses `--shapes`: shapes separated by `;` (a trailing `;` allowed), each a list of
/// `NAME=VALUE` separated by `,`; spaces are ignored. A name may appear once per shape.
pub fn parse_shapes(text: &str) -> Result<Vec<Binding>, String> {
    let items: Vec<&str> = text.split(';').map(str::trim).collect();
    let last = items.len().saturating_sub(1);
    let mut shapes = Vec::new();
    for (i, item) in items.iter().enumerate() {
        if item.is_empty() && i == last && i > 0 {
            continue;
        }
        if item.is_empty() {
            return Err(format!(
                "`--shapes`: shape {} is empty; expected `NAME=VALUE,...` (shapes are \
                 separated by `;`)",
                i + 1
            ));
        }
        let mut shape: Binding = Vec::new();
        for part in item.split(',').map(str::trim) {
            let (name, value) = parse_define(part)
                .map_err(|e| format!("`--shapes`: shape {} (`{item}`): {e}", i + 1))?;
            if shape.iter().any(|(n, _)| *n == name) {
                return Err(format!(
                    "`--shapes`: shape {} (`{item}`) binds `{name}` twice",
                    i + 1
                ));
            }
            shape.push((name, value));
        }
        shapes.push(shape);
    }
    Ok(shapes)
}

/// The shapes to run: every `--shapes` entry (one empty entry without `--shapes`) combined
/// with every combination of the `-D` values, a name given several times taking each of its
/// values in turn (the first name varies slowest). A name may not be bound both by `-D` and by
/// `--shapes`.
pub fn expand_bindings(defines: &[String], shapes: Option<&str>) -> Result<Vec<Binding>, String> {
    let mut groups: Vec<(String, Vec<i64>)> = Vec::new();
    for d in defines {
        let (name, value) = parse_define(d)?;
        match groups.iter_mut().find(|(n, _)| *n == name) {
            Some((_, values)) => values.push(value),
            None => groups.push((name, vec![value])),
        }
    }
    let entries = match shapes {
        Some(text) => parse_shapes(text)?,
        None => vec![Vec::new()],
    };
    for entry in &entries {
        if let Some((name, _)) = entry.iter().find(|(n, _)| groups.iter().any(|g| g.0 == *n)) {
            return Err(format!(
                "`{name}` is bound both by `-D` and by `--shapes`; give it in one place"
            ));
        }
    }
    let mut combos: Vec<Binding> = vec![Vec::new()];
    for (name, values) in &groups {
        combos = combos
            .iter()
            .flat_map(|c| {
                values.iter().map(move |v| {
                    let mut c = c.clone();
                    c.push((name.clone(), *v));
                    c
                })
            })
            .collect();
    }
    Ok(entries
        .iter()
        .flat_map(|e| {
            combos.iter().map(move |c| {
                let mut b = e.clone();
                b.extend(c.iter().cloned());
                b
            })
        })
        .collect())
}

/// One parameter's share of the traffic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamBytes {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub bytes: u64,
}

/// Every parameter the caller passes (not the function's own `T.alloc_global` tensors,
/// which the runtime allocates) of a kernel whose dims are all bound, with its size in
/// bytes: the bytes model counts each once. A parameter whose shape is not constant, or
/// negative, is an error at its extent.
pub fn param_bytes(file: &SourceFile, func: &PrimFunc) -> Result<Vec<ParamBytes>, UserError> {
    let mut out = Vec::new();
    for p in func.inputs() {
        let mut shape = Vec::new();
        for d in &p.shape {
            match d.as_int().and_then(|v| usize::try_from(v).ok()) {
                Some(v) => shape.push(v),
                None => {
                    return Err(UserError(file.render(&Diagnostic::error(
                        d.span,
                        format!(
                            "this extent of `{}` is not a constant size: bind every dim with \
                             `-D NAME=VALUE` or `--shapes`",
                            p.name.name
                        ),
                    ))))
                }
            }
        }
        let bytes = shape
            .iter()
            .try_fold(u64::from(p.dtype.bytes()), |acc, &d| {
                acc.checked_mul(d as u64)
            })
            .ok_or_else(|| {
                UserError(file.render(&Diagnostic::error(
                    p.span,
                    format!("`{}` has more bytes than fit in 64 bits", p.name.name),
                )))
            })?;
        out.push(ParamBytes {
            name: p.name.name.clone(),
            dtype: p.dtype,
            shape,
            bytes,
        });
    }
    Ok(out)
}

/// The bytes a kernel moves: every parameter once.
pub fn kernel_bytes(params: &[ParamBytes]) -> u64 {
    params.iter().map(|p| p.bytes).sum()
}

/// The size of the copy whose traffic matches `kernel_bytes`: half of it is read and the
/// other half written (rounded up, so an odd count moves one byte more).
pub fn copy_size(kernel_bytes: u64) -> u64 {
    kernel_bytes.div_ceil(2)
}

/// GB/s (10^9 bytes per second) of `bytes` moved in `ms` milliseconds.
pub fn gbs(bytes: u64, ms: f32) -> f64 {
    bytes as f64 / (f64::from(ms) * 1e-3) / 1e9
}

/// One shape, checked and bound, before anything runs.
pub struct Planned {
    pub binding: Binding,
    pub func: PrimFunc,
    pub params: Vec<ParamBytes>,
}

/// Everything before the GPU: flags, the file, every shape's binding (unknown names, dims
/// left unbound), verification of each bound kernel and its bytes. Returns the source, the
/// kernel's dim names (the table's first columns) and the shapes.
pub fn plan(args: &CopyArgs) -> Result<(SourceFile, PrimFunc, Vec<Planned>), UserError> {
    if args.sweep.is_some() {
        return Err(UserError::plain(
            "`--sweep` is for `--vs cublas`; with `--vs copy` give shapes with `--shapes \
             \"NAME=VALUE,...;...\"` or repeat `-D NAME=VALUE`",
        ));
    }
    if args.specialize {
        return Err(UserError::plain(
            "`--specialize` is for `--vs cublas`; `--vs copy` always compiles each shape \
             with its dims bound",
        ));
    }
    if args.iters == 0 {
        return Err(UserError::plain("`--iters` must be at least 1"));
    }
    let bindings = expand_bindings(args.defines, args.shapes).map_err(UserError::plain)?;
    let file = frontend::read_source(args.file)?;
    let func = frontend::parse(&file)?;
    // A tunable given with `-D` (or in `--shapes`) is fixed for every shape: one value per
    // run (`tlc tune` compares configs).
    let tunable = |n: &str| func.space.names().any(|t| t == n);
    let mut fixed: Vec<(String, i64)> = Vec::new();
    for (name, value) in bindings.iter().flatten().filter(|(n, _)| tunable(n)) {
        match fixed.iter().find(|(n, _)| n == name) {
            Some((_, v)) if v != value => {
                return Err(UserError::plain(format!(
                    "`{name}` is a tunable of `{}`: `--vs copy` takes one value of it per \
                     run ({v} and {value} given); `tlc tune` compares configs",
                    func.name.name
                )));
            }
            Some(_) => {}
            None => fixed.push((name.clone(), *value)),
        }
    }
    for (name, _) in bindings.iter().flatten() {
        if !func.dims.iter().any(|d| d.name == *name) && !tunable(name) {
            let known: Vec<&str> = func.dims.iter().map(|d| d.name.as_str()).collect();
            let tunables: Vec<&str> = func.space.names().collect();
            let mut note = if known.is_empty() {
                "the kernel declares no symbolic dimensions".to_string()
            } else {
                format!("symbolic dimensions: {}", known.join(", "))
            };
            if !tunables.is_empty() {
                note.push_str(&format!("; tunables: {}", tunables.join(", ")));
            }
            return Err(UserError(
                file.render(
                    &Diagnostic::error(
                        func.name.span,
                        format!(
                            "`{name}` names no symbolic dimension or tunable of `{}`",
                            func.name.name
                        ),
                    )
                    .with_note(note),
                ),
            ));
        }
    }
    let mut planned = Vec::new();
    for binding in bindings {
        // The kernel's dim order, so every row lists them alike.
        let binding: Binding = func
            .dims
            .iter()
            .filter_map(|d| binding.iter().find(|(n, _)| *n == d.name).cloned())
            .collect();
        let defines: Vec<String> = binding
            .iter()
            .chain(&fixed)
            .map(|(n, v)| format!("{n}={v}"))
            .collect();
        let bound = tunables::bind(&file, &func, &defines, &args.tuning)?;
        if let Some(d) = bound.dims.first() {
            let unbound: Vec<String> = bound.dims.iter().map(|d| format!("`{}`", d.name)).collect();
            let at = match binding.is_empty() {
                true => String::new(),
                false => format!(" at shape {}", binding_text(&binding)),
            };
            return Err(UserError(file.render(&Diagnostic::error(
                d.span,
                format!(
                    "{} not bound{at}: `--vs copy` compiles the kernel with every dim bound; \
                     give {} with `-D {}=VALUE` (repeat it to sweep) or `--shapes \
                     \"{}=VALUE;...\"`",
                    unbound.join(", "),
                    if unbound.len() == 1 { "it" } else { "each" },
                    d.name,
                    d.name
                ),
            ))));
        }
        frontend::verify(&file, &bound)?;
        let params = param_bytes(&file, &bound)?;
        if kernel_bytes(&params) == 0 {
            return Err(UserError::plain(format!(
                "the parameters of `{}` hold no bytes{}: there is no traffic to measure",
                func.name.name,
                match binding.is_empty() {
                    true => String::new(),
                    false => format!(" at shape {}", binding_text(&binding)),
                }
            )));
        }
        planned.push(Planned {
            binding,
            func: bound,
            params,
        });
    }
    Ok((file, func, planned))
}

/// One shape's result.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub binding: Binding,
    /// What the kernel moves (the bytes model).
    pub bytes: u64,
    pub tlc: Timing,
    /// What the copy moves: twice its size.
    pub copy_bytes: u64,
    pub copy: Timing,
}

impl Row {
    pub fn tlc_gbs(&self) -> f64 {
        gbs(self.bytes, self.tlc.median_ms)
    }

    pub fn copy_gbs(&self) -> f64 {
        gbs(self.copy_bytes, self.copy.median_ms)
    }

    /// The kernel's bandwidth as a fraction of the copy's.
    pub fn ratio(&self) -> f64 {
        self.tlc_gbs() / self.copy_gbs()
    }
}

/// The table's layout: one column per dim (as wide as its widest value), then the numbers.
pub struct Table {
    dims: Vec<(String, usize)>,
}

impl Table {
    pub fn new(func: &PrimFunc, shapes: &[Binding]) -> Table {
        let dims = func
            .dims
            .iter()
            .map(|d| {
                let widest = shapes
                    .iter()
                    .flatten()
                    .filter(|(n, _)| *n == d.name)
                    .map(|(_, v)| v.to_string().len())
                    .max()
                    .unwrap_or(0);
                (d.name.clone(), widest.max(d.name.len()))
            })
            .collect();
        Table { dims }
    }

    pub fn header(&self) -> String {
        let mut s = String::new();
        for (name, w) in &self.dims {
            let _ = write!(s, "{name:>w$} ");
        }
        let _ = writeln!(
            s,
            "{:>10} {:>9} {:>9} {:>9} {:>9} {:>6}",
            "MB", "tlc ms", "tlc GB/s", "copy ms", "copy GB/s", "ratio"
        );
        s
    }

    pub fn row(&self, r: &Row) -> String {
        let mut s = String::new();
        for (name, w) in &self.dims {
            let v = r.binding.iter().find(|(n, _)| n == name);
            let v = v.map_or("-".to_string(), |(_, v)| v.to_string());
            let _ = write!(s, "{v:>w$} ");
        }
        let _ = writeln!(
            s,
            "{:>10.1} {:>9.4} {:>9.1} {:>9.4} {:>9.1} {:>6.3}",
            r.bytes as f64 / 1e6,
            r.tlc.median_ms,
            r.tlc_gbs(),
            r.copy.median_ms,
            r.copy_gbs(),
            r.ratio()
        );
        s
    }

    /// The CSV header: the dim names, then the fixed columns.
    pub fn csv_header(&self) -> String {
        let mut s = String::new();
        for (name, _) in &self.dims {
            let _ = write!(s, "{name},");
        }
        s.push_str(
            "bytes,tlc_ms,tlc_min_ms,tlc_max_ms,tlc_gbs,copy_bytes,copy_ms,copy_min_ms,\
             copy_max_ms,copy_gbs,ratio\n",
        );
        s
    }

    pub fn csv_row(&self, r: &Row) -> String {
        let mut s = String::new();
        for (name, _) in &self.dims {
            if let Some((_, v)) = r.binding.iter().find(|(n, _)| n == name) {
                let _ = write!(s, "{v}");
            }
            s.push(',');
        }
        let _ = writeln!(
            s,
            "{},{},{},{},{:.2},{},{},{},{},{:.2},{:.4}",
            r.bytes,
            r.tlc.median_ms,
            r.tlc.min_ms,
            r.tlc.max_ms,
            r.tlc_gbs(),
            r.copy_bytes,
            r.copy.median_ms,
            r.copy.min_ms,
            r.copy.max_ms,
            r.copy_gbs(),
            r.ratio()
        );
        s
    }
}

fn runtime(what: String) -> impl FnOnce(RuntimeError) -> UserError {
    move |e| UserError::plain(format!("{what}: {e}"))
}

/// Runs `tlc bench --vs copy`. Rows are printed to stdout as each shape finishes; the
/// returned text is empty.
pub fn run(args: &CopyArgs) -> Result<String, UserError> {
    let (file, func, planned) = plan(args)?;
    let shapes: Vec<Binding> = planned.iter().map(|p| p.binding.clone()).collect();
    let table = Table::new(&func, &shapes);

    let gpu = Gpu::new(0).map_err(|e| UserError::plain(format!("`tlc bench` needs a GPU: {e}")))?;
    let target = device_target(&gpu, args.target)?;
    // Every shape compiles before anything is printed: a kernel codegen refuses fails alone.
    let mut compiled = Vec::new();
    for p in planned {
        let ptx = compile_func(
            &file,
            p.func,
            device_context(&gpu, target),
            &Instrumentation::default(),
            Emit::Ptx,
            &mut std::io::sink(),
        )?;
        compiled.push((p.binding, p.params, ptx.text().to_string()));
    }

    let mut out = std::io::stdout().lock();
    let (major, minor) = gpu.capability();
    if args.csv {
        let _ = out.write_all(table.csv_header().as_bytes());
    } else {
        let _ = writeln!(
            out,
            "bench `{}` as {} vs device-to-device copy on {} (sm_{major}{minor}): {} warm-up \
             runs, median of {}\nbytes: every parameter once; the copy moves as many (half \
             read, half written); ratio = tlc GB/s / copy GB/s",
            func.name.name,
            target.name(),
            gpu.name(),
            args.warmup,
            args.iters,
        );
        let _ = out.write_all(table.header().as_bytes());
    }
    let _ = out.flush();
    for (binding, params, ptx) in compiled {
        let row = bench_shape(&gpu, binding, &params, &ptx, args)?;
        let line = if args.csv {
            table.csv_row(&row)
        } else {
            table.row(&row)
        };
        let _ = out.write_all(line.as_bytes());
        let _ = out.flush();
    }
    Ok(String::new())
}

/// Seeded random bytes for every parameter (`tlc run`'s data: floats uniform in [-1, 1),
/// signed integers in [-8, 8), unsigned in [0, 16)), drawn on all cores in pieces. Any size:
/// a benchmark's tensors may be larger than the interpreter holds (MLA decode's KV cache at
/// batch 128 and 32k keys is 2^31 elements).
pub(crate) fn random_params(params: &[ParamBytes], seed: u64) -> Vec<Vec<u8>> {
    /// Elements per piece: even (an `int4` piece starts on a byte).
    const PIECE: usize = 1 << 22;
    let threads = crate::commands::bench::threads();
    params
        .iter()
        .map(|p| {
            let len: usize = p.shape.iter().product();
            let pieces: Vec<_> = (0..len).step_by(PIECE).collect();
            let mut parts: Vec<Vec<u8>> = Vec::with_capacity(pieces.len());
            for batch in pieces.chunks(threads.max(1)) {
                std::thread::scope(|s| {
                    let handles: Vec<_> = batch
                        .iter()
                        .map(|&start| {
                            let range = start..(start + PIECE).min(len);
                            s.spawn(move || interp::random_bytes(&p.name, p.dtype, range, seed))
                        })
                        .collect();
                    // A piece's thread does not panic (it only draws and encodes); an empty
                    // piece in its place would fail the size check at upload.
                    parts.extend(handles.into_iter().map(|h| h.join().unwrap_or_default()));
                });
            }
            parts.concat()
        })
        .collect()
}

/// The dtype and shape parameter `q` of the source has on the device, where the compiled
/// kernel declares it `compiled`: `pack-int4` made an int4 parameter the int8 tensor of its
/// bytes, two elements to a byte along the row (what [`random_params`] draws).
fn device_form(q: &ParamBytes, compiled: DType) -> (DType, Vec<usize>) {
    match (q.dtype, compiled, q.shape.split_last()) {
        (DType::Int4, DType::Int8, Some((&n, outer))) => {
            (DType::Int8, [outer, &[n.div_ceil(2)]].concat())
        }
        _ => (q.dtype, q.shape.clone()),
    }
}

/// Times one shape's compiled kernel, then the copy.
fn bench_shape(
    gpu: &Gpu,
    binding: Binding,
    params: &[ParamBytes],
    ptx: &str,
    args: &CopyArgs,
) -> Result<Row, UserError> {
    let shape = binding_text(&binding);
    let at = |what: &str| match shape.is_empty() {
        true => what.to_string(),
        false => format!("shape {shape}: {what}"),
    };
    let kernel = gpu
        .load(ptx)
        .map_err(runtime(at("cannot load the kernel on the GPU")))?;
    let bytes = kernel_bytes(params);

    let data = random_params(params, args.seed);
    let mut tensors: Vec<DeviceTensor> = Vec::new();
    for mp in &kernel.manifest().params {
        let Some((q, bytes)) = params.iter().zip(&data).find(|(q, _)| q.name == mp.name) else {
            return Err(UserError::plain(format!(
                "the kernel's manifest names `{}`, which is not a parameter",
                mp.name
            )));
        };
        let (dtype, shape) = device_form(q, mp.dtype);
        let t = DeviceTensor::from_bytes(gpu, dtype, &shape, bytes)
            .map_err(runtime(at(&format!("cannot upload `{}`", q.name))))?;
        tensors.push(t);
    }
    drop(data);
    let refs: Vec<&DeviceTensor> = tensors.iter().collect();
    // One checked launch first, so a kernel that faults says so before any timing.
    kernel.launch(&refs).map_err(runtime(at("cannot launch")))?;
    gpu.synchronize()
        .map_err(runtime(at("the kernel failed on the GPU")))?;
    let tlc_ms = kernel
        .time(&refs, args.warmup, args.iters)
        .map_err(runtime(at("timing the kernel")))?;
    drop(refs);
    drop(tensors);
    drop(kernel);

    // The copy: as many bytes moved as the kernel's, in the memory the kernel's tensors held.
    let size = usize::try_from(copy_size(bytes))
        .map_err(|_| UserError::plain(at("the copy does not fit this host's address space")))?;
    let src = DeviceTensor::zeros(gpu, DType::UInt8, &[size])
        .map_err(runtime(at("allocating the copy's source")))?;
    let mut dst = DeviceTensor::zeros(gpu, DType::UInt8, &[size])
        .map_err(runtime(at("allocating the copy's destination")))?;
    let copy_ms = time_ms(gpu, args.warmup, args.iters, || dst.copy_from(&src))
        .map_err(runtime(at("timing the copy")))?;

    let bad = || UserError::plain(at("the CUDA events gave no usable timing"));
    Ok(Row {
        binding,
        bytes,
        tlc: summarize(&tlc_ms).ok_or_else(bad)?,
        copy_bytes: 2 * size as u64,
        copy: summarize(&copy_ms).ok_or_else(bad)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(pairs: &[(&str, i64)]) -> Binding {
        pairs.iter().map(|(n, v)| (n.to_string(), *v)).collect()
    }

    fn defines(texts: &[&str]) -> Vec<String> {
        texts.iter().map(|t| t.to_string()).collect()
    }

    #[test]
    fn int4_parameters_travel_as_their_packed_bytes() {
        let q = |dtype, shape: &[usize]| ParamBytes {
            name: "A".into(),
            dtype,
            shape: shape.to_vec(),
            bytes: 0,
        };
        let a = q(DType::Int4, &[64, 320]);
        assert_eq!(device_form(&a, DType::Int8), (DType::Int8, vec![64, 160]));
        let data = random_params(&[a], 1);
        assert_eq!(data[0].len(), 64 * 160, "two int4 elements to a byte");
        let h = q(DType::Float16, &[3, 5]);
        assert_eq!(
            device_form(&h, DType::Float16),
            (DType::Float16, vec![3, 5])
        );
        assert_eq!(random_params(&[h], 1)[0].len(), 30);
    }

    #[test]
    fn shapes_parsing() {
        assert_eq!(
            parse_shapes(" M=8192, N=8192 ;M=4096,N = 4096;").unwrap(),
            vec![
                b(&[("M", 8192), ("N", 8192)]),
                b(&[("M", 4096), ("N", 4096)])
            ]
        );
        assert_eq!(parse_shapes("M=1").unwrap(), vec![b(&[("M", 1)])]);
        for (bad, says) in [
            ("", "shape 1 is empty"),
            ("M=1;;M=2", "shape 2 is empty"),
            ("M", "shape 1 (`M`): `-D M`: expected NAME=VALUE"),
            ("M=1,N=x", "`x` is not an integer"),
            ("M=1,M=2", "binds `M` twice"),
            ("M=1,", "shape 1 (`M=1,`)"),
        ] {
            match parse_shapes(bad) {
                Ok(s) => panic!("`{bad}` parsed as {s:?}"),
                Err(e) => assert!(e.contains(says), "`{bad}`: {e}"),
            }
        }
    }

    #[test]
    fn bindings_combine_defines_and_shapes() {
        // No binding at all: one shape, the kernel's own.
        assert_eq!(expand_bindings(&[], None).unwrap(), vec![b(&[])]);
        // One `-D` per name: one shape.
        assert_eq!(
            expand_bindings(&defines(&["M=4", "N=5"]), None).unwrap(),
            vec![b(&[("M", 4), ("N", 5)])]
        );
        // Repeated names sweep; the first name varies slowest.
        assert_eq!(
            expand_bindings(&defines(&["M=1", "N=7", "M=2", "N=8"]), None).unwrap(),
            vec![
                b(&[("M", 1), ("N", 7)]),
                b(&[("M", 1), ("N", 8)]),
                b(&[("M", 2), ("N", 7)]),
                b(&[("M", 2), ("N", 8)]),
            ]
        );
        // `--shapes` entries, each with every `-D` combination.
        assert_eq!(
            expand_bindings(&defines(&["K=3", "K=4"]), Some("M=1,N=2;M=5,N=6")).unwrap(),
            vec![
                b(&[("M", 1), ("N", 2), ("K", 3)]),
                b(&[("M", 1), ("N", 2), ("K", 4)]),
                b(&[("M", 5), ("N", 6), ("K", 3)]),
                b(&[("M", 5), ("N", 6), ("K", 4)]),
            ]
        );
        let e = expand_bindings(&defines(&["M=1"]), Some("M=2")).unwrap_err();
        assert!(
            e.contains("`M` is bound both by `-D` and by `--shapes`"),
            "{e}"
        );
        let e = expand_bindings(&defines(&["M"]), None).unwrap_err();
        assert!(e.contains("expected NAME=VALUE"), "{e}");
        assert_eq!(binding_text(&b(&[("M", 1), ("N", 2)])), "M=1,N=2");
        assert_eq!(binding_text(&b(&[])), "");
    }

    const KERNEL: &str = "\
M = T.symbolic(\"M\")
N = T.symbolic(\"N\")

@T.prim_func
def f(
    A: T.Tensor((M, N), \"float16\"),
    S: T.Tensor((M,), \"float32\"),
    Q: T.Tensor((M, N), \"float8_e4m3\"),
):
    with T.Kernel(M, threads=32) as bx:
        for j in T.Parallel(N):
            Q[bx, j] = A[bx, j]
        S[bx] = 1.0
";

    fn args<'a>(defines: &'a [String], shapes: Option<&'a str>) -> CopyArgs<'a> {
        CopyArgs {
            file: Path::new("unused"),
            defines,
            shapes,
            sweep: None,
            specialize: false,
            warmup: 1,
            iters: 1,
            target: None,
            csv: false,
            seed: 0,
            tuning: Tuning::DEFAULTS,
        }
    }

    #[test]
    fn bytes_model_counts_every_parameter_once() {
        let file = SourceFile::new("k.tir", KERNEL);
        let func = frontend::parse(&file).unwrap();
        let bound =
            tunables::bind(&file, &func, &defines(&["M=3", "N=5"]), &Tuning::DEFAULTS).unwrap();
        let params = param_bytes(&file, &bound).unwrap();
        let sizes: Vec<(&str, u64)> = params.iter().map(|p| (p.name.as_str(), p.bytes)).collect();
        // A: 3·5 float16, S: 3 float32, Q: 3·5 fp8.
        assert_eq!(sizes, [("A", 30), ("S", 12), ("Q", 15)]);
        assert_eq!(params[0].shape, [3, 5]);
        assert_eq!(kernel_bytes(&params), 57);
        // The copy moves as many bytes (one more for an odd count): half read, half written.
        assert_eq!(copy_size(57), 29);
        assert_eq!(copy_size(58), 29);
        // An unbound dim leaves a shape that is not constant: an error at the extent.
        let half = tunables::bind(&file, &func, &defines(&["M=3"]), &Tuning::DEFAULTS).unwrap();
        let e = param_bytes(&file, &half).unwrap_err().0;
        assert!(
            e.contains("k.tir:6:21: error: this extent of `A` is not a constant"),
            "{e}"
        );
        // 10^9 bytes in 1 ms: 1000 GB/s.
        assert!((gbs(1_000_000_000, 1.0) - 1000.0).abs() < 1e-9);
    }

    #[test]
    fn planning_checks_every_shape_before_the_gpu() {
        let dir = std::env::temp_dir().join(format!("tlc-bench-copy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("k.tir");
        std::fs::write(&path, KERNEL).unwrap();
        let run = |d: &[&str], shapes: Option<&str>| {
            let d = defines(d);
            let mut a = args(&d, shapes);
            a.file = &path;
            plan(&a).map(|(_, _, p)| {
                p.iter()
                    .map(|p| (binding_text(&p.binding), kernel_bytes(&p.params)))
                    .collect::<Vec<_>>()
            })
        };
        // Bindings are listed in the kernel's dim order, whatever order they came in.
        assert_eq!(
            run(&["N=4", "M=2", "M=3"], None).unwrap(),
            [
                ("M=2,N=4".to_string(), 2 * 4 * 3 + 8),
                ("M=3,N=4".into(), 3 * 4 * 3 + 12)
            ]
        );
        assert_eq!(
            run(&["N=1"], Some("M=1;M=2")).unwrap(),
            [("M=1,N=1".to_string(), 7), ("M=2,N=1".into(), 14)]
        );
        let fails = |d: &[&str], shapes: Option<&str>, says: &str| {
            let e = run(d, shapes).unwrap_err().0;
            assert!(e.contains(says), "{d:?} {shapes:?}: {e}");
        };
        fails(&["M=2"], None, "`N` not bound at shape M=2");
        fails(&[], None, "`M`, `N` not bound: `--vs copy` compiles");
        fails(
            &["N=2"],
            Some("M=1;K=2"),
            "`K` names no symbolic dimension or tunable of `f`",
        );
        fails(&["M=0", "N=2"], None, "must be positive, found 0");
        let d = defines(&["M=1", "N=1"]);
        let mut a = args(&d, None);
        a.file = &path;
        a.sweep = Some("1,1,1");
        assert!(plan(&a)
            .err()
            .unwrap()
            .0
            .contains("`--sweep` is for `--vs cublas`"));
        a.sweep = None;
        a.specialize = true;
        assert!(plan(&a).err().unwrap().0.contains("`--specialize` is for"));
        a.specialize = false;
        a.iters = 0;
        assert!(plan(&a)
            .err()
            .unwrap()
            .0
            .contains("`--iters` must be at least 1"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A kernel with a tuning space: its tunables take `-D` like its dims, one value per run.
    const TUNABLE: &str = "\
M = T.symbolic(\"M\")

@T.prim_func
def t(A: T.Tensor((M,), \"float32\"), B: T.Tensor((M,), \"float32\")):
    with T.Kernel(T.ceildiv(M, block), threads=block) as bx:
        for i in T.Parallel(block):
            if bx * block + i < M:
                B[bx * block + i] = A[bx * block + i]
block = T.tunable([64, 128], default=64)
";

    #[test]
    fn tunables_take_one_value_from_d() {
        let dir = std::env::temp_dir().join(format!("tlc-bench-tunable-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.tir");
        std::fs::write(&path, TUNABLE).unwrap();
        let run = |d: &[&str]| {
            let d = defines(d);
            let mut a = args(&d, None);
            a.file = &path;
            plan(&a).map(|(_, _, p)| {
                p.iter()
                    .map(|p| binding_text(&p.binding))
                    .collect::<Vec<_>>()
            })
        };
        // The rows list the dims only; the tunable is bound in each.
        let planned = {
            let d = defines(&["M=1000", "block=128", "M=2000"]);
            let mut a = args(&d, None);
            a.file = &path;
            plan(&a).unwrap().2
        };
        let rows: Vec<String> = planned.iter().map(|p| binding_text(&p.binding)).collect();
        assert_eq!(rows, ["M=1000", "M=2000"]);
        for p in &planned {
            let text = tlc_ir::printer::print_func(&p.func);
            assert!(text.contains("threads=128"), "{text}");
        }
        // Two values of a tunable in one run are refused.
        let e = run(&["M=1000", "block=64", "block=128"]).unwrap_err().0;
        assert!(
            e.contains("`block` is a tunable of `t`: `--vs copy` takes one value of it per run"),
            "{e}"
        );
        // An unknown name lists the tunables too.
        let e = run(&["M=1000", "blk=64"]).unwrap_err().0;
        assert!(e.contains("tunables: block"), "{e}");
    }

    #[test]
    fn table_and_csv_rows() {
        let file = SourceFile::new("k.tir", KERNEL);
        let func = frontend::parse(&file).unwrap();
        let ms = |median_ms, min_ms, max_ms| Timing {
            median_ms,
            min_ms,
            max_ms,
        };
        // 8192 x 8192 float32 in and out: 536.9 MB.
        let bytes = 2 * 4 * 8192 * 8192;
        let row = Row {
            binding: b(&[("M", 8192), ("N", 8192)]),
            bytes,
            tlc: ms(0.25, 0.2, 0.5),
            copy_bytes: 2 * copy_size(bytes),
            copy: ms(0.2, 0.2, 0.3),
        };
        assert!((row.tlc_gbs() / 2_147.483_648 - 1.0).abs() < 1e-6);
        assert!((row.copy_gbs() / 2_684.354_56 - 1.0).abs() < 1e-6);
        assert!((row.ratio() - 0.8).abs() < 1e-6);
        let shapes = [row.binding.clone(), b(&[("M", 1), ("N", 1)])];
        let table = Table::new(&func, &shapes);
        let line = table.row(&row);
        assert_eq!(
            line.split_whitespace().collect::<Vec<_>>(),
            ["8192", "8192", "536.9", "0.2500", "2147.5", "0.2000", "2684.4", "0.800"]
        );
        assert_eq!(
            table.header().split_whitespace().collect::<Vec<_>>(),
            ["M", "N", "MB", "tlc", "ms", "tlc", "GB/s", "copy", "ms", "copy", "GB/s", "ratio"]
        );
        // The header's columns line up with the rows'.
        assert_eq!(table.header().len(), line.len());
        let small = Row {
            binding: shapes[1].clone(),
            ..row.clone()
        };
        assert_eq!(table.row(&small).len(), line.len());
        assert_eq!(
            table.csv_header(),
            "M,N,bytes,tlc_ms,tlc_min_ms,tlc_max_ms,tlc_gbs,copy_bytes,copy_ms,copy_min_ms,\
             copy_max_ms,copy_gbs,ratio\n"
        );
        assert_eq!(
            table.csv_row(&row),
            "8192,8192,536870912,0.25,0.2,0.5,2147.48,536870912,0.2,0.2,0.3,2684.35,0.8000\n"
        );
        // A kernel without dims: no dim columns.
        let plain = SourceFile::new(
            "p.tir",
            "@T.prim_func\ndef g(A: T.Tensor((4,), \"float32\")):\n    with T.Kernel(1, \
             threads=4) as bx:\n        for i in T.Parallel(4):\n            A[i] = 0.0\n",
        );
        let g = frontend::parse(&plain).unwrap();
        let table = Table::new(&g, &[b(&[])]);
        let r = Row {
            binding: b(&[]),
            ..row
        };
        assert!(table.csv_header().starts_with("bytes,"));
        assert!(table.csv_row(&r).starts_with("536870912,"));
        assert_eq!(table.header().len(), table.row(&r).len());
    }
}
