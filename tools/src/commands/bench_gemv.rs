//! `tlc bench FILE --vs cublas` for a GEMV: `y = W @ x` with `W (N, K)` float16 and `x (K,)`
//! float16, `y (N,)` float16 or float32 — three parameters, `W` the only matrix, `y` the
//! last vector (TileLang's examples put the output last), in any order otherwise. cuBLAS
//! computes the same product as a GEMM of one column (`cublasGemmEx` with `n = 1`, which
//! cuBLAS runs with its matrix-vector kernels), on the same random inputs in the same
//! process; the check and the timing are `bench.rs`'s, one row for the kernel's shape (its
//! dims bound with `-D`). GB/s count `W`, `x` and `y` once each.

use super::bench::{compare_parallel, download_f32, nan_bytes, random_f16, runtime, summarize};
use super::bench::{BenchArgs, MAX_REL_ERROR};
use crate::commands::compile::{device_context, device_target};
use std::io::Write as _;
use tlc::diagnostics::SourceFile;
use tlc::driver::compile_func;
use tlc::driver::Emit;
use tlc::frontend::UserError;
use tlc_ir::{BufferDecl, DType, Diagnostic, PrimFunc};
use tlc_passes::Instrumentation;
use tlc_runtime::{Cublas, DeviceTensor, Gpu};

/// Which parameters are `W`, `x`, `y`, when the kernel is a GEMV.
pub fn gemv_params(func: &PrimFunc) -> Option<[usize; 3]> {
    let p = &func.params;
    if p.len() != 3
        || p.iter()
            .any(|b| !matches!(b.dtype, DType::Float16 | DType::Float32))
    {
        return None;
    }
    let w = p.iter().position(|b| b.shape.len() == 2)?;
    let vectors: Vec<usize> = (0..3).filter(|&i| p[i].shape.len() == 1).collect();
    let [x, y] = vectors.as_slice() else {
        return None;
    };
    (p[w].dtype == DType::Float16 && p[*x].dtype == DType::Float16).then_some([w, *x, *y])
}

/// The constant extent of dimension `d` of `b`.
fn extent(file: &SourceFile, b: &BufferDecl, d: usize) -> Result<usize, UserError> {
    let e = &b.shape[d];
    e.as_int()
        .and_then(|v| usize::try_from(v).ok())
        .ok_or_else(|| {
            UserError(file.render(&Diagnostic::error(
                e.span,
                format!(
                    "the shape of `{}` is not constant: bind its dims with `-D NAME=VALUE`",
                    b.name.name
                ),
            )))
        })
}

pub fn run(
    args: &BenchArgs,
    file: &SourceFile,
    func: PrimFunc,
    [wi, xi, yi]: [usize; 3],
) -> Result<String, UserError> {
    if args.sweep.is_some() || args.specialize {
        return Err(UserError::plain(
            "a GEMV is benchmarked at its own shape: bind its dims with `-D` (no `--sweep`, \
             `--specialize`)",
        ));
    }
    let (w, x, y) = (&func.params[wi], &func.params[xi], &func.params[yi]);
    let (n, k) = (extent(file, w, 0)?, extent(file, w, 1)?);
    let (kx, ny) = (extent(file, x, 0)?, extent(file, y, 0)?);
    if (kx, ny) != (k, n) {
        return Err(UserError(file.render(&Diagnostic::error(
            y.span,
            format!(
                "the operands do not form a GEMV y = W @ x: W is ({n}, {k}), x is ({kx},), y is \
                 ({ny},)"
            ),
        ))));
    }
    let gpu = Gpu::new(0).map_err(|e| UserError::plain(format!("`tlc bench` needs a GPU: {e}")))?;
    let target = device_target(&gpu, args.target)?;
    let blas = Cublas::new(&gpu).map_err(runtime("cannot start cuBLAS".into()))?;
    let compiled = compile_func(
        file,
        func.clone(),
        device_context(&gpu, target),
        &Instrumentation::default(),
        Emit::Ptx,
        &mut std::io::sink(),
    )?;
    let kernel = gpu
        .load(compiled.text())
        .map_err(runtime("cannot load the kernel on the GPU".into()))?;

    let wv = random_f16(n * k, args.seed, 1);
    let xv = random_f16(k, args.seed, 2);
    let up = |shape: &[usize], v: &[half::f16]| {
        DeviceTensor::from_slice(&gpu, shape, v).map_err(runtime("uploading an operand".into()))
    };
    let (wd, xd, xcol) = (up(&[n, k], &wv)?, up(&[k], &xv)?, up(&[k, 1], &xv)?);
    let yd = DeviceTensor::from_bytes(&gpu, y.dtype, &[n], &nan_bytes(y.dtype, n))
        .map_err(runtime("allocating y".into()))?;
    let yref =
        DeviceTensor::zeros(&gpu, y.dtype, &[n, 1]).map_err(runtime("allocating y".into()))?;
    let mut by_index: Vec<(usize, &DeviceTensor)> = vec![(wi, &wd), (xi, &xd), (yi, &yd)];
    by_index.sort_by_key(|&(i, _)| i);
    let by_name: Vec<(&str, &DeviceTensor)> = by_index
        .iter()
        .map(|&(i, t)| (func.params[i].name.name.as_str(), t))
        .collect();
    let kargs: Vec<&DeviceTensor> = kernel.manifest().in_param_order(&by_name);
    kernel
        .launch(&kargs)
        .map_err(runtime("cannot launch".into()))?;
    gpu.synchronize()
        .map_err(runtime("the kernel failed on the GPU".into()))?;
    blas.gemm_f16(&wd, &xcol, &yref, n, 1, k)
        .map_err(runtime("cuBLAS failed".into()))?;
    let err = compare_parallel(
        &download_f32(&yd).map_err(runtime("downloading y".into()))?,
        &download_f32(&yref).map_err(runtime("downloading cuBLAS's y".into()))?,
    );
    let tlc_ms = kernel
        .time(&kargs, args.warmup, args.iters)
        .map_err(runtime("timing the kernel".into()))?;
    let blas_ms = blas
        .time_gemm_f16(&wd, &xcol, &yref, (n, 1, k), args.warmup, args.iters)
        .map_err(runtime("timing cuBLAS".into()))?;
    let bad = || UserError::plain("the CUDA events gave no usable timing");
    let (t, b) = (
        summarize(&tlc_ms).ok_or_else(bad)?,
        summarize(&blas_ms).ok_or_else(bad)?,
    );
    let bytes = (2 * (n * k + k) + n * y.dtype.bytes() as usize) as f64;
    let gbs = |ms: f32| bytes / (f64::from(ms) * 1e-3) / 1e9;
    let (major, minor) = gpu.capability();
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "bench GEMV `{}` as {} vs cuBLAS (GemmEx, n = 1) on {} (sm_{major}{minor}): {} warm-up \
         runs, median of {}\nGB/s: W, x and y once each; rel err = max|y_tlc - y_cublas| / \
         max|y_cublas|, limit {MAX_REL_ERROR:e}\n     N      K   rel err    tlc ms  tlc GB/s cuBLAS ms  cuBLAS GB/s  ratio",
        func.name.name,
        target.name(),
        gpu.name(),
        args.warmup,
        args.iters,
    );
    let _ = writeln!(
        out,
        "{n:>6} {k:>6} {:>9.2e} {:>9.4} {:>9.1} {:>9.4} {:>12.1} {:>6.3}",
        err.rel(),
        t.median_ms,
        gbs(t.median_ms),
        b.median_ms,
        gbs(b.median_ms),
        b.median_ms / t.median_ms,
    );
    if err.passes() {
        Ok(String::new())
    } else {
        Err(UserError::plain(format!(
            "tlc's y differs from cuBLAS's beyond rel err {MAX_REL_ERROR:e} (or has NaN / inf)"
        )))
    }
}
