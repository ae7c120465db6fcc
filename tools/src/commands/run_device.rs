//! `tlc run FILE --device`: compiles the kernel in memory, runs it on GPU 0 through
//! `tlc-runtime`, runs the reference interpreter on the same inputs, and compares every
//! parameter (max abs and max rel error; exit 1 outside the tolerance of `docs/cli.md`).
//!
//! Inputs are built exactly as `--interp` builds them: `--input NAME=X.npy`, else the seeded
//! random data of `tlc_ir::interp::random_tensor` — outputs included, so that a kernel that
//! leaves an element unwritten is caught (the GPU keeps the random value, the interpreter
//! too, and both must agree).

use crate::commands::compile::{device_context, device_target};
use crate::commands::run::{load_inputs, save, RunArgs};
use crate::tunables;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::Write as _;
use tlc::driver::compile_func;
use tlc::driver::Emit;
use tlc::frontend::UserError;
use tlc_ir::interp::{self, RunOptions, Scalar, Tensor, TensorData};
use tlc_ir::DType;
use tlc_passes::{Instrumentation, Target};
use tlc_runtime::check::{KernelPlan, LaunchPlan};
use tlc_runtime::{DeviceTensor, Gpu};

/// `|gpu − interp| ≤ atol + rtol · |interp|`, per dtype (`docs/cli.md` explains the values).
/// `None`: the values must be identical.
pub fn tolerance(dtype: DType) -> Option<(f64, f64)> {
    match dtype {
        DType::Float64 => Some((1e-12, 1e-12)),
        DType::Float32 => Some((1e-5, 1e-5)),
        DType::Float16 => Some((1e-3, 1e-3)),
        DType::BFloat16 => Some((1e-2, 1e-2)),
        // One unit in the last place of the format (3 and 2 mantissa bits).
        DType::Float8E4M3 => Some((0.125, 0.125)),
        DType::Float8E5M2 => Some((0.25, 0.25)),
        _ => None,
    }
}

/// The normwise part of the tolerance of a function with a float8 `T.gemm`: the tensor
/// cores' fp8 accumulation keeps fewer bits than float32 (about 14; docs/ir.md, `T.gemm`),
/// so each element may differ from the interpreter's exact-product float32 sum by this much
/// of the output's largest magnitude (measured: 2^-10.7 over K = 320 unpromoted).
pub const FP8_GEMM_NORMWISE: f64 = 1.0 / 256.0;

/// [`tolerance`] for a float output of a function whose gemms accumulate fp8 products on
/// the tensor cores (`fp8_max_ref`: the reference's largest magnitude): the per-dtype bound
/// plus [`FP8_GEMM_NORMWISE`] of it.
pub fn tolerance_with_fp8_gemm(dtype: DType, fp8_max_ref: Option<f64>) -> Option<(f64, f64)> {
    let (atol, rtol) = tolerance(dtype)?;
    match fp8_max_ref {
        Some(m) if dtype.is_float() => Some((atol + FP8_GEMM_NORMWISE * m, rtol)),
        _ => Some((atol, rtol)),
    }
}

/// Whether `func` has a `T.gemm` on float8 operands (a parameter's or an allocation's).
pub fn has_fp8_gemm(func: &tlc_ir::PrimFunc) -> bool {
    let mut fp8 = std::collections::HashSet::new();
    let mut gemms = Vec::new();
    for p in &func.params {
        if p.dtype.is_fp8() {
            fp8.insert(p.name.name.clone());
        }
    }
    tlc_ir::visit::for_each_stmt(&func.body, &mut |st| match &st.kind {
        tlc_ir::StmtKind::Kernel(k) => {
            for b in &k.allocs {
                if b.dtype.is_fp8() {
                    fp8.insert(b.name.name.clone());
                }
            }
        }
        tlc_ir::StmtKind::Gemm(g) => {
            gemms.push((g.a.buffer.name.clone(), g.b.buffer.name.clone()));
        }
        _ => {}
    });
    gemms
        .iter()
        .any(|(a, b)| fp8.contains(a) || fp8.contains(b))
}

/// How one parameter compares.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    pub max_abs: f64,
    /// Over the elements whose reference is non-zero (0 when there is none).
    pub max_rel: f64,
    /// Elements outside the tolerance (NaN against a number counts).
    pub mismatches: usize,
    /// The first of them: flat index, GPU value, reference value.
    pub first: Option<(usize, f64, f64)>,
}

/// Compares `gpu` with `reference` element by element under `tolerance(dtype)`. NaN equals
/// NaN; infinities must match exactly.
pub fn compare(dtype: DType, gpu: &[f64], reference: &[f64]) -> Comparison {
    compare_within(tolerance(dtype), gpu, reference)
}

/// [`compare`] under the bound `tol` (`None`: identical values).
pub fn compare_within(tol: Option<(f64, f64)>, gpu: &[f64], reference: &[f64]) -> Comparison {
    let mut c = Comparison {
        max_abs: 0.0,
        max_rel: 0.0,
        mismatches: 0,
        first: None,
    };
    for (i, (&g, &r)) in gpu.iter().zip(reference).enumerate() {
        let same = g == r || (g.is_nan() && r.is_nan());
        let diff = if same { 0.0 } else { (g - r).abs() };
        // An infinity matches only itself: the relative bound of an infinite reference
        // would accept anything.
        let ok = same
            || !(g.is_infinite() || r.is_infinite())
                && match tol {
                    Some((atol, rtol)) => diff <= atol + rtol * r.abs(),
                    None => false,
                };
        // A NaN difference is a mismatch (counted below), not a magnitude.
        if !diff.is_nan() {
            c.max_abs = c.max_abs.max(diff);
            if r != 0.0 {
                c.max_rel = c.max_rel.max(diff / r.abs());
            }
        }
        if !ok {
            c.mismatches += 1;
            c.first.get_or_insert((i, g, r));
        }
    }
    if gpu.len() != reference.len() {
        c.mismatches += gpu.len().abs_diff(reference.len());
    }
    c
}

/// Runs `tlc run --device`. The report goes to stdout; outside the tolerance it is printed
/// and the command fails.
pub fn run(args: &RunArgs, target: Option<Target>) -> Result<String, UserError> {
    let (file, func, info) = tunables::load(args.file, args.defines, &args.tuning)?;
    let given = load_inputs(&file, &func, args.inputs)?;

    let gpu = Gpu::new(0).map_err(|e| {
        UserError::plain(format!(
            "`--device` needs a GPU: {e}\n(use `--interp` to run the kernel on the CPU)"
        ))
    })?;
    let target = device_target(&gpu, target)?;
    let compiled = compile_func(
        &file,
        func.clone(),
        device_context(&gpu, target).with_info(info),
        &Instrumentation::default(),
        Emit::Ptx,
        &mut std::io::sink(),
    )?;
    let kernel = gpu
        .load(compiled.text())
        .map_err(|e| UserError::plain(format!("cannot load the kernel on the GPU: {e}")))?;

    // The interpreter first: it resolves the dims and so every parameter's shape.
    let opts = RunOptions {
        seed: args.seed,
        threads: 0,
    };
    let reference = interp::run(&func, &HashMap::new(), given.clone(), &opts)
        .map_err(|d| UserError(file.render(&d)))?;
    // The caller's tensors; the function's own (`T.alloc_global`) live on the GPU only for
    // the launch (the runtime's), so they are neither uploaded nor compared.
    let mut initial: HashMap<String, Tensor> = HashMap::new();
    for param in func.inputs() {
        let name = &param.name.name;
        let tensor = match given.get(name) {
            Some(t) => t.clone(),
            None => {
                let shape = reference.get(name).map(|t| t.shape().to_vec());
                let shape = shape.ok_or_else(|| {
                    UserError::plain(format!("the interpreter returned no `{name}`"))
                })?;
                interp::random_tensor(name, param.dtype, &shape, args.seed)
                    .map_err(|e| UserError::plain(format!("`{name}`: {e}")))?
            }
        };
        initial.insert(name.clone(), tensor);
    }

    // Upload in the manifest's parameter order, launch, download. The compiled kernel takes
    // an int4 parameter as the int8 tensor of its bytes (`pack-int4`): packed on the way in,
    // unpacked on the way out.
    let manifest = kernel.manifest().clone();
    let compiled_dtype = |n: &str| {
        manifest
            .params
            .iter()
            .find(|p| p.name == n)
            .map(|p| p.dtype)
    };
    let initial = interp::packed_for(&compiled_dtype, initial).map_err(UserError::plain)?;
    let runtime_error = |what: &str| {
        let what = what.to_string();
        move |e: tlc_runtime::RuntimeError| UserError::plain(format!("{what}: {e}"))
    };
    let mut device: Vec<(String, DeviceTensor)> = Vec::new();
    for p in &manifest.params {
        let tensor = initial.get(&p.name).ok_or_else(|| {
            UserError::plain(format!(
                "the kernel's manifest names `{}`, which is not a parameter",
                p.name
            ))
        })?;
        let bytes = to_bytes(tensor);
        let t = DeviceTensor::from_bytes(&gpu, tensor.dtype(), tensor.shape(), &bytes)
            .map_err(runtime_error(&format!("cannot upload `{}`", p.name)))?;
        device.push((p.name.clone(), t));
    }
    let refs: Vec<&DeviceTensor> = device.iter().map(|(_, t)| t).collect();
    let plan = kernel.plan(&refs).map_err(runtime_error("cannot launch"))?;
    kernel
        .launch(&refs)
        .map_err(runtime_error("launch failed"))?;
    gpu.synchronize()
        .map_err(runtime_error("the kernel failed on the GPU"))?;
    let mut results: HashMap<String, Tensor> = HashMap::new();
    for (name, t) in &device {
        let bytes = t
            .to_bytes()
            .map_err(runtime_error(&format!("cannot download `{name}`")))?;
        let tensor = from_bytes(t.dtype(), t.shape(), &bytes)
            .map_err(|e| UserError::plain(format!("`{name}`: {e}")))?;
        results.insert(name.clone(), tensor);
    }
    let source_dtype = |n: &str| {
        func.params
            .iter()
            .find(|p| p.name.name == n)
            .map(|p| p.dtype)
    };
    let results = interp::unpacked_for(&source_dtype, results);
    let initial = interp::unpacked_for(&source_dtype, initial);

    let mut report = String::new();
    let (major, minor) = gpu.capability();
    let _ = write!(
        report,
        "ran {} on {} (sm_{major}{minor}) as {}",
        ran_what(&plan),
        gpu.name(),
        target,
    );
    match plan.kernels.as_slice() {
        [one] => {
            let _ = writeln!(report, ": {}", launch_config(one));
        }
        several => {
            let _ = writeln!(report, ", in order:");
            for k in several {
                let _ = writeln!(report, "  `{}`: {}", k.entry, launch_config(k));
            }
        }
    }
    let mut failed: Vec<String> = Vec::new();
    let fp8_gemm = has_fp8_gemm(&func);
    for param in func.inputs() {
        let name = &param.name.name;
        let (Some(gpu_t), Some(ref_t)) = (
            results.get(name).or_else(|| initial.get(name)),
            reference.get(name),
        ) else {
            continue;
        };
        let reference_values = ref_t.to_f64();
        let max_ref = reference_values
            .iter()
            .filter(|v| v.is_finite())
            .fold(0.0f64, |m, v| m.max(v.abs()));
        let mut bound = tolerance_with_fp8_gemm(param.dtype, fp8_gemm.then_some(max_ref));
        if let (Some((atol, rtol)), Some((wa, wr))) = (bound, args.widen) {
            if param.dtype.is_float() {
                bound = Some((atol.max(wa), rtol.max(wr)));
            }
        }
        let mut c = compare_within(bound, &gpu_t.to_f64(), &reference_values);
        // int64 values beyond 2^53 are not exact as f64: integers compare as stored too.
        if bound.is_none() && c.mismatches == 0 && gpu_t.data() != ref_t.data() {
            c.mismatches = 1;
        }
        let tol = match bound {
            Some((atol, rtol)) if fp8_gemm && param.dtype.is_float() => format!(
                "tolerance {atol:e} + {rtol:e}·|ref|, with 2^-8·max|ref| for fp8 tensor-core sums"
            ),
            Some((atol, rtol)) if args.widen.is_some() && param.dtype.is_float() => {
                format!("tolerance {atol:e} + {rtol:e}·|ref|, widened by --atol / --rtol")
            }
            Some((atol, rtol)) => format!("tolerance {atol:e} + {rtol:e}·|ref|"),
            None => "must be exact".to_string(),
        };
        let verdict = if c.mismatches == 0 {
            "ok".to_string()
        } else {
            failed.push(name.clone());
            let mut v = format!("MISMATCH at {} of {} elements", c.mismatches, ref_t.len());
            if let Some((i, g, r)) = c.first {
                let _ = write!(v, ", first at flat index {i}: gpu {g}, interpreter {r}");
            }
            v
        };
        let _ = writeln!(
            report,
            "  {name}: {}; max abs err {:.3e}, max rel err {:.3e} ({tol}): {verdict}",
            ref_t.describe(),
            c.max_abs,
            c.max_rel
        );
        if let Some(dir) = args.save_dir {
            let path = dir.join(format!("{name}.npy"));
            save(&path, gpu_t)?;
            let _ = writeln!(report, "    saved the GPU's {}", path.display());
        }
    }
    if failed.is_empty() {
        let _ = writeln!(report, "every parameter matches the interpreter");
        return Ok(report);
    }
    let _ = std::io::stdout().lock().write_all(report.as_bytes());
    Err(UserError::plain(format!(
        "the GPU's results differ from the interpreter's beyond the tolerance in: {}",
        failed.join(", ")
    )))
}

/// `` `f` `` for one kernel, `` 2 kernels `f_k0`, `f_k1` `` for several.
fn ran_what(plan: &LaunchPlan) -> String {
    let names: Vec<String> = plan
        .kernels
        .iter()
        .map(|k| format!("`{}`", k.entry))
        .collect();
    match names.as_slice() {
        [one] => one.clone(),
        all => format!("{} kernels {}", all.len(), all.join(", ")),
    }
}

fn launch_config(k: &KernelPlan) -> String {
    format!(
        "grid {:?}, block {:?}, {} B dynamic shared",
        k.grid, k.block, k.shared_bytes
    )
}

/// The device encoding of a tensor: little-endian elements of its dtype, row-major (bfloat16
/// and fp8 as their bits, bool as one byte) — the interpreter's element codec.
pub fn to_bytes(t: &Tensor) -> Vec<u8> {
    let dtype = t.dtype();
    if dtype == DType::Int4 {
        return int4_bytes(t);
    }
    let width = dtype.bytes() as usize;
    let mut out = Vec::with_capacity(t.len() * width);
    let mut put = |x: Scalar| out.extend_from_slice(&interp::encode_element(dtype, x)[..width]);
    match t.data() {
        TensorData::Float(v) => v.iter().for_each(|&x| put(Scalar::Float(x))),
        TensorData::Int(v) => v.iter().for_each(|&x| put(Scalar::Int(x))),
        TensorData::Bool(v) => v.iter().for_each(|&x| put(Scalar::Bool(x))),
    }
    out
}

/// The inverse of [`to_bytes`]. A bool byte other than 0 reads as true; decoded values are
/// values of the dtype, kept as they are (an e5m2 infinity included).
pub fn from_bytes(dtype: DType, shape: &[usize], bytes: &[u8]) -> Result<Tensor, String> {
    if dtype == DType::Int4 {
        // Two to a byte, low nibble first ([`int4_bytes`]); each nibble sign-extended.
        let values = bytes
            .iter()
            .flat_map(|&b| [i64::from((b << 4) as i8 >> 4), i64::from(b as i8 >> 4)])
            .take(shape.iter().product());
        return Tensor::from_stored(dtype, shape, TensorData::Int(values.collect()));
    }
    let width = dtype.bytes() as usize;
    let values = bytes
        .chunks_exact(width)
        .map(|c| interp::decode_element(dtype, c));
    let data = match dtype {
        DType::Bool => TensorData::Bool(values.map(|v| v.as_bool()).collect()),
        d if d.is_int() => TensorData::Int(values.map(|v| v.as_i64()).collect()),
        _ => TensorData::Float(values.map(|v| v.as_f64()).collect()),
    };
    Tensor::from_stored(dtype, shape, data)
}

/// An int4 tensor's device bytes: elements packed two to a byte in row-major order, low
/// nibble first (docs/ir.md, "int4"; rows are even, so each row starts a byte; an odd total
/// leaves the last high nibble 0).
fn int4_bytes(t: &Tensor) -> Vec<u8> {
    let vals: &[i64] = match t.data() {
        TensorData::Int(v) => v,
        _ => &[],
    };
    vals.chunks(2)
        .map(|p| {
            let hi = p.get(1).copied().unwrap_or(0);
            ((hi << 4) | (p[0] & 15)) as u8
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_round_trip_every_dtype() {
        for dtype in DType::ALL {
            let t = interp::random_tensor("X", dtype, &[3, 5], 11).unwrap();
            let bytes = to_bytes(&t);
            assert_eq!(bytes.len() as u64, dtype.packed_bytes(15), "{dtype}");
            assert_eq!(from_bytes(dtype, &[3, 5], &bytes).unwrap(), t, "{dtype}");
        }
        // int4 packs low nibble first: (1, -2, 7, -8) is 0xe1 0x87.
        let four = Tensor::from_i64(DType::Int4, &[4], &[1, -2, 7, -8]).unwrap();
        assert_eq!(to_bytes(&four), [0xe1, 0x87]);
        // Known encodings: f16 1.0 is 0x3c00, bf16 1.0 is 0x3f80, int32 -2 is fffffffe.
        let one = Tensor::from_f64(DType::Float16, &[1], &[1.0]).unwrap();
        assert_eq!(to_bytes(&one), [0x00, 0x3c]);
        let one = Tensor::from_f64(DType::BFloat16, &[1], &[1.0]).unwrap();
        assert_eq!(to_bytes(&one), [0x80, 0x3f]);
        let m2 = Tensor::from_i64(DType::Int32, &[1], &[-2]).unwrap();
        assert_eq!(to_bytes(&m2), [0xfe, 0xff, 0xff, 0xff]);
        assert!(from_bytes(DType::Int32, &[2], &[0; 4]).is_err());
        // An e5m2 infinity survives the round trip (a conversion would saturate it).
        let inf = from_bytes(DType::Float8E5M2, &[2], &[0x7C, 0xFC]).unwrap();
        assert_eq!(inf.to_f64(), [f64::INFINITY, f64::NEG_INFINITY]);
        assert_eq!(to_bytes(&inf), [0x7C, 0xFC]);
    }

    #[test]
    fn fp8_gemms_widen_float_outputs_normwise() {
        let gemm = |dtype: &str| {
            let src = format!(
                "@T.prim_func\ndef g(A: T.Tensor((64, 64), \"{dtype}\"), B: T.Tensor((64, 64), \
                 \"{dtype}\"), C: T.Tensor((64, 64), \"float32\")):\n    with T.Kernel(1, \
                 threads=128) as bx:\n        A_s = T.alloc_shared((64, 64), \"{dtype}\")\n        \
                 B_s = T.alloc_shared((64, 64), \"{dtype}\")\n        C_l = \
                 T.alloc_fragment((64, 64), \"float32\")\n        T.copy(A, A_s)\n        \
                 T.copy(B, B_s)\n        T.gemm(A_s, B_s, C_l, transpose_B=True, \
                 clear_accum=True)\n        T.copy(C_l, C)\n"
            );
            tlc_ir::parse(&src).expect("parse")
        };
        assert!(has_fp8_gemm(&gemm("float8_e4m3")));
        assert!(!has_fp8_gemm(&gemm("float16")));
        // 8.2395 against 8.2383 (1.2e-3) at max |ref| 20: within 2^-8 of 20, not of 1e-5.
        let bound = tolerance_with_fp8_gemm(DType::Float32, Some(20.0));
        assert_eq!(compare_within(bound, &[8.2383], &[8.2395]).mismatches, 0);
        assert_eq!(compare(DType::Float32, &[8.2383], &[8.2395]).mismatches, 1);
        // A garbage element still fails: 1 off at max |ref| 20 is beyond 20 / 256.
        assert_eq!(compare_within(bound, &[9.2395], &[8.2395]).mismatches, 1);
        // Integers stay exact.
        assert_eq!(tolerance_with_fp8_gemm(DType::Int32, Some(20.0)), None);
    }

    #[test]
    fn tolerance_per_dtype() {
        let c = compare(DType::Float32, &[1.0, 2.0 + 1e-5], &[1.0, 2.0]);
        assert_eq!(c.mismatches, 0);
        assert!((c.max_abs - 1e-5).abs() < 1e-9 && (c.max_rel - 5e-6).abs() < 1e-9);
        let c = compare(DType::Float32, &[0.0, 2.1], &[0.0, 2.0]);
        assert_eq!(c.mismatches, 1);
        assert_eq!(c.first.map(|f| f.0), Some(1));
        // f16: one unit in the last place passes; bf16 likewise at its own precision.
        assert_eq!(
            compare(DType::Float16, &[1.0 + 1.0 / 1024.0], &[1.0]).mismatches,
            0
        );
        assert_eq!(compare(DType::Float16, &[1.01], &[1.0]).mismatches, 1);
        assert_eq!(compare(DType::BFloat16, &[1.0078125], &[1.0]).mismatches, 0);
        // Integers are exact.
        assert_eq!(compare(DType::Int32, &[3.0], &[4.0]).mismatches, 1);
        assert_eq!(compare(DType::Int32, &[4.0], &[4.0]).mismatches, 0);
        // NaN matches NaN only.
        assert_eq!(
            compare(DType::Float32, &[f64::NAN], &[f64::NAN]).mismatches,
            0
        );
        assert_eq!(compare(DType::Float32, &[f64::NAN], &[1.0]).mismatches, 1);
        assert_eq!(compare(DType::Float32, &[1.0], &[f64::NAN]).mismatches, 1);
        assert_eq!(
            compare(DType::Float32, &[f64::INFINITY], &[f64::INFINITY]).mismatches,
            0
        );
        // An infinity matches only itself, on either side.
        assert_eq!(
            compare(DType::Float8E5M2, &[57344.0], &[f64::INFINITY]).mismatches,
            1
        );
        assert_eq!(
            compare(DType::Float32, &[f64::INFINITY], &[1e30]).mismatches,
            1
        );
    }
}
