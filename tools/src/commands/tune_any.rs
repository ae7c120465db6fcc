//! `tlc tune` for a kernel that is no GEMM (attention, norms, casts, …): what a config is
//! checked and timed against when there is no library peer.
//!
//! - **Inputs**: every parameter gets the seeded random data `tlc bench --vs copy` and
//!   `tlc run` give it (floats uniform in [-1, 1), signed integers in [-8, 8), unsigned in
//!   [0, 16)), generated once; each config starts from a fresh upload of those bytes, so an
//!   output the kernel only partly writes, or a parameter it reads and writes, starts alike
//!   for every config.
//! - **Reference**: the kernel's default config (every tunable the `-D`s do not fix at its
//!   default) at the same shape, compiled and launched once on the GPU: its final contents
//!   of every parameter. Where that config does not compile or run at this shape (shared
//!   memory over the target's limit, …), the plan's first config that compiled is the
//!   reference instead, and the table's note says so.
//! - **Check**: each config's final contents of every parameter it writes (the manifest's
//!   access) against the reference's,
//!   element by element, within the dtype's tolerance ([`tolerance`]): configs change tile
//!   shapes and so the order of float sums, never the value beyond rounding. A NaN where the
//!   reference has none (or the other way round) fails; integers and booleans must be equal.
//!   A config that fails is marked FAIL and never stored.
//! - **Time**: the median of CUDA-event timings of the whole launch (after warm-up runs), as
//!   `tlc bench` times, on the checked launch's tensors (a kernel that reads what it wrote
//!   runs on its own results then: its time, not its values, is what counts there); the
//!   ratio column is the default config's time over the config's.

use crate::commands::bench::{self, summarize};
use crate::commands::bench_copy::{param_bytes, random_params, ParamBytes};
use crate::commands::run::load_inputs;
use crate::commands::run_device::{compare_within, from_bytes, to_bytes, Comparison};
use crate::tunables::{self, Tuning};
use tlc::diagnostics::SourceFile;
use tlc::frontend::UserError;
use tlc::plan::space::describe;
use tlc_abi::manifest::Access;
use tlc_ir::tuning::Config;
use tlc_ir::{DType, Diagnostic, PrimFunc};
use tlc_passes::Target;
use tlc_runtime::{DeviceTensor, Gpu, Kernel};

/// The relative tolerance of a config's values of `dtype` against the default config's:
/// eight units in the last place of the dtype's precision (a reordered float sum differs by
/// a few), 1e-4 for float32 (whose sums over thousands of terms reorder further), exact for
/// integers and booleans. Each element may differ by `tolerance · (|ref| + max |ref|)`: the
/// second term lets values near zero (cancellations) move as much as the tensor's scale.
pub fn tolerance(dtype: DType) -> f64 {
    match dtype {
        DType::Float64 => 1e-10,
        DType::Float32 => 1e-4,
        DType::Float16 => 8.0 * 2f64.powi(-10),
        DType::BFloat16 => 8.0 * 2f64.powi(-7),
        DType::Float8E4M3 => 2.0 * 2f64.powi(-3),
        DType::Float8E5M2 => 2.0 * 2f64.powi(-2),
        _ => 0.0,
    }
}

/// How one parameter's values compare with the reference's.
#[derive(Clone, Debug, PartialEq)]
pub struct Compared {
    /// The largest error relative to the reference's largest finite magnitude, `max |x −
    /// ref| / max |ref|` (normwise, as the GEMM kinds report it; 0 for an all-zero
    /// reference that is matched): an element near zero does not make it large.
    pub max_rel: f64,
    /// The first element that fails, as text (`None`: every element passes).
    pub first_bad: Option<String>,
}

/// Compares `got` with `want` for a parameter of `dtype` — `tlc run --device`'s element
/// check (`run_device::compare_within`: NaN matches NaN, an infinity only itself) under
/// `|x − ref| ≤ t · max |ref| + t · |ref|` with `t = tolerance(dtype)` (exact where `t` is
/// 0) — in one chunk per core.
pub fn compare(dtype: DType, got: &[f64], want: &[f64]) -> Compared {
    if got.len() != want.len() {
        return Compared {
            max_rel: f64::INFINITY,
            first_bad: Some(format!("{} elements, not {}", got.len(), want.len())),
        };
    }
    let t = tolerance(dtype);
    let scale = want
        .iter()
        .filter(|v| v.is_finite())
        .fold(0.0f64, |m, v| m.max(v.abs()));
    let tol = (t > 0.0).then_some((t * scale, t));
    let chunk = want.len().div_ceil(tlc::parallel::workers()).max(1);
    let mut parts: Vec<(usize, Option<Comparison>)> = (0..want.len())
        .step_by(chunk)
        .map(|start| (start, None))
        .collect();
    tlc::parallel::for_each(&mut parts, |(start, out)| {
        let end = (*start + chunk).min(want.len());
        *out = Some(compare_within(tol, &got[*start..end], &want[*start..end]));
    });
    let mut all = Compared {
        max_rel: 0.0,
        first_bad: None,
    };
    let mut max_abs = 0.0f64;
    for (start, c) in parts {
        let Some(c) = c else { continue };
        max_abs = max_abs.max(c.max_abs);
        if let (None, Some((i, g, r))) = (&all.first_bad, c.first) {
            all.first_bad = Some(format!(
                "element {}: {g} where the default config gives {r}",
                start + i
            ));
        }
    }
    all.max_rel = if max_abs == 0.0 {
        0.0
    } else if scale > 0.0 {
        max_abs / scale
    } else {
        f64::INFINITY
    };
    all
}

/// `bytes` holding elements of `dtype`, as numbers, decoded on every core.
fn decode(dtype: DType, bytes: &[u8]) -> Result<Vec<f64>, String> {
    let size = (dtype.bytes() as usize).max(1);
    let count = bytes.len() / size;
    let per = count.div_ceil(tlc::parallel::workers()).max(1) * size;
    type Part<'b> = (&'b [u8], Result<Vec<f64>, String>);
    let mut parts: Vec<Part> = bytes.chunks(per).map(|c| (c, Ok(Vec::new()))).collect();
    tlc::parallel::for_each(&mut parts, |(c, out)| {
        *out = from_bytes(dtype, &[c.len() / size], c).map(|t| t.to_f64());
    });
    let mut values = Vec::with_capacity(count);
    for (_, part) in parts {
        values.extend(part?);
    }
    Ok(values)
}

/// The final contents of the parameters a kernel writes, as numbers, by name.
type Outputs = Vec<(String, Vec<f64>)>;

/// Parameters' data given with `--input NAME=X.npy`, as the bytes uploaded, by name.
pub type Given = Vec<(String, Vec<u8>)>;

/// Reads `--input NAME=X.npy` files for the kernel `parsed` at the dims `defines` bind:
/// each names a parameter whose shape no tunable sets (one file serves every config), holds
/// exactly its dtype (`tlc run`'s reading: no casts) and has its shape at these dims, or it
/// is an error.
pub fn given_inputs(
    file: &SourceFile,
    parsed: &PrimFunc,
    defines: &[String],
    specs: &[String],
) -> Result<Given, UserError> {
    if specs.is_empty() {
        return Ok(Vec::new());
    }
    // A parameter whose shape depends on a tunable has another shape in other configs: one
    // file cannot be its data for all of them (a tunable `-D` fixes, or with one candidate,
    // is one value).
    let fixed = |t: &str| {
        defines
            .iter()
            .any(|d| d.split_once('=').is_some_and(|(n, _)| n == t))
            || parsed
                .space
                .tunables
                .iter()
                .any(|g| g.candidates.len() == 1 && g.names.iter().any(|n| n.name == t))
    };
    for spec in specs {
        let name = spec.split_once('=').map_or(spec.as_str(), |(n, _)| n);
        let Some(decl) = parsed.params.iter().find(|p| p.name.name == name) else {
            continue;
        };
        let tunable = decl.shape.iter().find_map(|d| {
            parsed
                .space
                .names()
                .find(|t| !fixed(t) && tlc_ir::visit::mentions(d, t))
        });
        if let Some(t) = tunable {
            let message = format!(
                "`--input {name}=…`: `{name}`'s shape depends on the tunable `{t}`, so it \
                 differs between configs; give it with `-D {t}=…` fixed, or let tune seed it"
            );
            return Err(UserError(
                file.render(&Diagnostic::error(decl.span, message)),
            ));
        }
    }
    let (func, _) = tunables::prepare(file, parsed, defines, &Tuning::DEFAULTS)?;
    let shapes = param_bytes(file, &func)?;
    let tensors = load_inputs(file, &func, specs)?;
    let mut given = Vec::with_capacity(tensors.len());
    for p in &shapes {
        let Some(t) = tensors.get(&p.name) else {
            continue;
        };
        if t.shape() != p.shape.as_slice() {
            let decl = func.params.iter().find(|d| d.name.name == p.name);
            let span = decl.map_or(func.name.span, |d| d.span);
            let message = format!(
                "input `{}` has shape {:?}, the parameter {:?} at {}",
                p.name,
                t.shape(),
                p.shape,
                defines.join(" ")
            );
            return Err(UserError(file.render(&Diagnostic::error(span, message))));
        }
        given.push((p.name.clone(), to_bytes(t)));
    }
    Ok(given)
}

/// The seeded inputs and the default config's results at one shape.
pub struct AnyInputs {
    params: Vec<ParamBytes>,
    data: Vec<Vec<u8>>,
    /// The default config's final contents of every parameter it writes, as numbers, by
    /// name.
    reference: Outputs,
    /// The reference config's median time.
    pub default_ms: f32,
    /// Which config the reference is, for the table's note.
    pub reference_text: String,
}

impl AnyInputs {
    /// Binds `defines` (every dim, and any tunable they fix) with the other tunables at
    /// their defaults, generates the inputs, runs that config once and times it; where it
    /// does not compile or run, `fallback` (the plan's first compiled config) instead.
    pub fn prepare(
        gpu: &Gpu,
        file: &SourceFile,
        parsed: &PrimFunc,
        (defines, target, fallback): (&[String], Target, Option<&Config>),
        (seed, given, warmup, iters): (u64, Given, usize, usize),
    ) -> Result<AnyInputs, UserError> {
        let default = Self::prepare_config(
            gpu,
            file,
            parsed,
            (defines, target),
            (seed, &given, warmup, iters),
        );
        let default_error = match default {
            Ok(mut inputs) => {
                inputs.reference_text = "the default config".to_string();
                return Ok(inputs);
            }
            Err(e) => e,
        };
        let first_line = |e: &str| e.lines().next().unwrap_or("").to_string();
        let Some(config) = fallback else {
            return Err(UserError::plain(format!(
                "the default config, the reference: {}",
                default_error
            )));
        };
        let mut with: Vec<String> = defines.to_vec();
        with.extend(config.iter().map(|(n, v)| format!("{n}={v}")));
        let mut inputs = Self::prepare_config(
            gpu,
            file,
            parsed,
            (&with, target),
            (seed, &given, warmup, iters),
        )
        .map_err(|e| {
            UserError::plain(format!(
                "the default config, the reference: {}\nthe plan's first config ({}), \
                         in its place: {e}",
                first_line(&default_error),
                describe(config)
            ))
        })?;
        inputs.reference_text = format!(
            "the plan's first config {} (the default config does not run here: {})",
            describe(config),
            first_line(&default_error)
        );
        Ok(inputs)
    }

    /// [`AnyInputs::prepare`] of the config `defines` bind (tunables not named at their
    /// defaults).
    fn prepare_config(
        gpu: &Gpu,
        file: &SourceFile,
        parsed: &PrimFunc,
        (defines, target): (&[String], Target),
        (seed, given, warmup, iters): (u64, &Given, usize, usize),
    ) -> Result<AnyInputs, String> {
        let (func, _) =
            tunables::prepare(file, parsed, defines, &Tuning::DEFAULTS).map_err(|e| e.0)?;
        let params = param_bytes(file, &func).map_err(|e| e.0)?;
        let mut data = random_params(&params, seed);
        for (p, bytes) in params.iter().zip(&mut data) {
            if let Some((_, g)) = given.iter().find(|(n, _)| *n == p.name) {
                bytes.clone_from(g);
            }
        }
        let kernel = bench::load_kernel(file, gpu, target, func).map_err(|e| e.0)?;
        let mut inputs = AnyInputs {
            params,
            data,
            reference: Vec::new(),
            default_ms: 0.0,
            reference_text: String::new(),
        };
        let (outputs, ms) = inputs.run(gpu, &kernel, warmup, iters)?;
        inputs.reference = outputs;
        inputs.default_ms = ms;
        Ok(inputs)
    }

    /// Uploads the inputs, launches `kernel` once (checked), downloads every parameter it
    /// writes, then times it on the same tensors: those contents by name, and the median ms.
    fn run(
        &self,
        gpu: &Gpu,
        kernel: &Kernel,
        warmup: usize,
        iters: usize,
    ) -> Result<(Outputs, f32), String> {
        let mut tensors = Vec::new();
        for mp in &kernel.manifest().params {
            let Some((p, bytes)) = self
                .params
                .iter()
                .zip(&self.data)
                .find(|(p, _)| p.name == mp.name)
            else {
                return Err(format!("the manifest names `{}`, no parameter", mp.name));
            };
            let t = DeviceTensor::from_bytes(gpu, p.dtype, &p.shape, bytes)
                .map_err(|e| format!("cannot upload `{}`: {e}", p.name))?;
            tensors.push(t);
        }
        let refs: Vec<&DeviceTensor> = tensors.iter().collect();
        kernel
            .launch(&refs)
            .map_err(|e| format!("cannot launch: {e}"))?;
        gpu.synchronize()
            .map_err(|e| format!("the kernel failed on the GPU: {e}"))?;
        let mut outputs = Vec::new();
        for (mp, t) in kernel.manifest().params.iter().zip(&tensors) {
            if mp.access == Access::Read {
                continue;
            }
            let bytes = t
                .to_bytes()
                .map_err(|e| format!("cannot download `{}`: {e}", mp.name))?;
            let values = decode(t.dtype(), &bytes).map_err(|e| format!("`{}`: {e}", mp.name))?;
            outputs.push((mp.name.clone(), values));
        }
        let times = kernel
            .time(&refs, warmup, iters)
            .map_err(|e| format!("timing: {e}"))?;
        let ms = summarize(&times)
            .ok_or("the CUDA events gave no usable timing")?
            .median_ms;
        Ok((outputs, ms))
    }

    /// Checks and times one config's loaded kernel: its median ms, the largest relative
    /// error of any parameter it writes, and the first failure.
    pub fn check_and_time(
        &self,
        gpu: &Gpu,
        kernel: &Kernel,
        warmup: usize,
        iters: usize,
    ) -> Result<(f32, Compared), String> {
        let (outputs, ms) = self.run(gpu, kernel, warmup, iters)?;
        let mut worst = Compared {
            max_rel: 0.0,
            first_bad: None,
        };
        for (name, want) in &self.reference {
            let dtype = self
                .params
                .iter()
                .find(|p| &p.name == name)
                .map_or(DType::Float32, |p| p.dtype);
            let got = outputs
                .iter()
                .find(|(n, _)| n == name)
                .map_or(&[][..], |(_, v)| v.as_slice());
            let c = compare(dtype, got, want);
            if let Some(bad) = c.first_bad {
                return Ok((
                    ms,
                    Compared {
                        max_rel: c.max_rel,
                        first_bad: Some(format!("`{name}` {bad}")),
                    },
                ));
            }
            worst.max_rel = worst.max_rel.max(c.max_rel);
        }
        Ok((ms, worst))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_within_the_dtype_tolerance_pass() {
        // float16: 8 ulps of the value plus the tensor's scale.
        let want = [1.0, -2.0, 0.0, 4.0];
        let c = compare(DType::Float16, &[1.001, -2.0, 0.01, 4.0], &want);
        assert_eq!(c.first_bad, None);
        assert!(c.max_rel > 0.0 && c.max_rel < 1e-2, "{c:?}");
        // 0.1 off a 1.0 in float16 is far past rounding.
        let c = compare(DType::Float16, &[1.1, -2.0, 0.0, 4.0], &want);
        assert!(c.first_bad.is_some_and(|b| b.contains("element 0")));
        // float32 is tighter.
        assert!(compare(DType::Float32, &[1.001, -2.0, 0.0, 4.0], &want)
            .first_bad
            .is_some());
        // Integers are exact.
        assert!(compare(DType::Int32, &[1.0, 2.0], &[1.0, 3.0])
            .first_bad
            .is_some());
        assert_eq!(
            compare(DType::Int32, &[1.0, 2.0], &[1.0, 2.0]),
            Compared {
                max_rel: 0.0,
                first_bad: None
            }
        );
    }

    #[test]
    fn a_long_parameter_is_compared_in_chunks_and_names_its_first_bad_element() {
        let want: Vec<f64> = (0..100_003).map(|i| f64::from(i % 97) - 48.0).collect();
        let mut got = want.clone();
        got[77_777] += 1.0;
        got[90_000] += 1.0;
        let c = compare(DType::Float16, &got, &want);
        assert!(
            c.first_bad
                .as_deref()
                .is_some_and(|b| b.starts_with("element 77777:")),
            "{c:?}"
        );
        assert_eq!(compare(DType::Float16, &want, &want).first_bad, None);
        assert_eq!(compare(DType::Float16, &want, &want).max_rel, 0.0);
        let bytes: Vec<u8> = want
            .iter()
            .flat_map(|v| (*v as f32).to_le_bytes())
            .collect();
        assert_eq!(decode(DType::Float32, &bytes).unwrap(), want);
    }

    #[test]
    fn nans_and_infinities_must_match() {
        let nan = f64::NAN;
        assert!(compare(DType::Float32, &[nan], &[nan]).first_bad.is_none());
        assert!(compare(DType::Float32, &[nan], &[1.0]).first_bad.is_some());
        assert!(compare(DType::Float32, &[1.0], &[nan]).first_bad.is_some());
        let inf = f64::INFINITY;
        assert!(compare(DType::Float16, &[inf], &[inf]).first_bad.is_none());
        assert!(compare(DType::Float16, &[-inf], &[inf]).first_bad.is_some());
        assert!(compare(DType::Float16, &[6e4], &[inf]).first_bad.is_some());
        assert!(compare(DType::Float32, &[1.0], &[1.0, 2.0])
            .first_bad
            .is_some());
    }
}
