//! `tlc bench FILE --vs cublas`: compiles a GEMM kernel (as `tlc compile` does), runs it and
//! cuBLAS on the same random float16 inputs in one process, checks tlc's `C` against
//! cuBLAS's, and times both with CUDA events (warm-up runs, then the median of many). One
//! row per shape: the relative error, milliseconds, TFLOP/s and the ratio tlc / cuBLAS.
//!
//! A GEMV (`y = W @ x`) is benchmarked by `bench_gemv.rs`, an FP8 GEMM with block scales
//! (DeepGEMM's `gemm_fp8_fp8_bf16_nt`: float8 operands) by `bench_fp8.rs`. Otherwise the
//! kernel must be a GEMM `C = A @ B`, row-major: three matrix parameters, in order
//! `A (M, K)` float16, `B (K, N)` float16, `C (M, N)` float16 or float32 (cuBLAS writes the
//! same dtype, accumulating in float32). Shapes come from the kernel (constant, or made
//! constant with `-D`) or from `--sweep "M,N,K;..."`, whose sizes bind the kernel's symbolic
//! dims through the tensor shapes at launch (or, with `--specialize`, are compiled in as
//! constants, one compile per shape).
//!
//! The check: `rel err = max |C_tlc − C_cublas| / max |C_cublas|` over all elements (a
//! normwise relative error, meaningful where individual entries are near zero); a shape
//! fails when it exceeds [`MAX_REL_ERROR`] or any element of tlc's `C` is not finite. tlc's
//! `C` is filled with NaN before the checked launch, so an element the kernel never writes
//! fails the check.

use crate::commands::compile::{device_context, device_target};
use crate::tunables::{self, Tuning};
use half::{bf16, f16};
use std::collections::HashMap;
use std::fmt;
use std::io::Write as _;
use std::path::Path;
use tlc::diagnostics::SourceFile;
use tlc::driver::compile_func;
use tlc::driver::Emit;
use tlc::frontend::{self, UserError};
use tlc_ir::{BufferDecl, DType, Diagnostic, ExprKind, PrimFunc};
use tlc_passes::{Instrumentation, Target};
use tlc_runtime::cublas::gemm_tflops;
use tlc_runtime::{Cublas, DeviceTensor, Gpu, Kernel, RuntimeError};

/// A shape fails the check above this relative error (`docs/cli.md`).
pub const MAX_REL_ERROR: f64 = 1e-2;

/// What `tlc bench` was asked to do.
pub struct BenchArgs<'a> {
    pub file: &'a Path,
    pub defines: &'a [String],
    /// `--sweep` text, `M,N,K;M,N,K;...`.
    pub sweep: Option<&'a str>,
    pub warmup: usize,
    pub iters: usize,
    /// `None`: sm_90a on a compute capability 9.0 GPU, else sm_80 (as `tlc run --device`).
    pub target: Option<Target>,
    pub csv: bool,
    /// Compile each shape with its sizes as constants instead of binding them at launch.
    pub specialize: bool,
    pub seed: u64,
    /// How the tunables `-D` leaves open are chosen (with `--specialize`, per shape: the
    /// cache is keyed by the shape's dims).
    pub tuning: Tuning,
}

/// `C[m, n] = A[m, k] @ B[k, n]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemmShape {
    pub m: usize,
    pub n: usize,
    pub k: usize,
}

impl fmt::Display for GemmShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}x{}", self.m, self.n, self.k)
    }
}

/// Parses `--sweep`: shapes `M,N,K` separated by `;` (spaces allowed, a trailing `;` too).
/// Every size must lie in 1..=2^31−1 (cuBLAS and the kernels' int32 dims).
pub fn parse_sweep(text: &str) -> Result<Vec<GemmShape>, String> {
    let mut shapes = Vec::new();
    let items: Vec<&str> = text.split(';').map(str::trim).collect();
    let last = items.len().saturating_sub(1);
    for (i, item) in items.iter().enumerate() {
        if item.is_empty() && i == last && i > 0 {
            continue;
        }
        let sizes: Vec<&str> = item.split(',').map(str::trim).collect();
        let [m, n, k] = sizes.as_slice() else {
            return Err(format!(
                "`--sweep`: shape {} is `{item}`; expected three sizes `M,N,K` (shapes are \
                 separated by `;`)",
                i + 1
            ));
        };
        let size = |what: &str, s: &str| -> Result<usize, String> {
            match s.parse::<u64>() {
                Ok(v) if (1..=i32::MAX as u64).contains(&v) => Ok(v as usize),
                _ => Err(format!(
                    "`--sweep`: {what} = `{s}` in shape {} (`{item}`) is not a size in 1..={}",
                    i + 1,
                    i32::MAX
                )),
            }
        };
        shapes.push(GemmShape {
            m: size("M", m)?,
            n: size("N", n)?,
            k: size("K", k)?,
        });
    }
    Ok(shapes)
}

/// The kernel's `A`, `B`, `C` parameters, checked to be a GEMM cuBLAS can compute.
fn gemm_params<'f>(
    file: &SourceFile,
    func: &'f PrimFunc,
) -> Result<[&'f BufferDecl; 3], UserError> {
    let [a, b, c] = func.params.as_slice() else {
        return Err(UserError(file.render(&Diagnostic::error(
            func.name.span,
            format!(
                "`tlc bench` runs GEMMs: the kernel must take three matrices A (M, K), B (K, N), \
                 C (M, N); `{}` takes {} parameters",
                func.name.name,
                func.params.len()
            ),
        ))));
    };
    let expect = [
        (a, "A (M, K)", &[DType::Float16][..]),
        (b, "B (K, N)", &[DType::Float16][..]),
        (c, "C (M, N)", &[DType::Float16, DType::Float32][..]),
    ];
    for (i, (p, role, dtypes)) in expect.into_iter().enumerate() {
        if p.shape.len() != 2 || !dtypes.contains(&p.dtype) {
            let names: Vec<&str> = dtypes.iter().map(|d| d.name()).collect();
            return Err(UserError(file.render(&Diagnostic::error(
                p.span,
                format!(
                    "`tlc bench` runs GEMMs C = A @ B: parameter {} (`{}`) must be the {} \
                     matrix {role}; it is {} of rank {}",
                    i + 1,
                    p.name.name,
                    names.join(" or "),
                    p.dtype,
                    p.shape.len()
                ),
            ))));
        }
    }
    Ok([a, b, c])
}

/// The one shape of a kernel whose operand shapes are constants.
fn kernel_shape(file: &SourceFile, [a, b, c]: [&BufferDecl; 3]) -> Result<GemmShape, UserError> {
    let mut sizes = Vec::new();
    for p in [a, b, c] {
        for d in &p.shape {
            match d.as_int().and_then(|v| usize::try_from(v).ok()) {
                Some(v) => sizes.push(v),
                None => {
                    return Err(UserError(file.render(&Diagnostic::error(
                        d.span,
                        format!(
                            "the shape of `{}` is not constant: bind its dims with `-D NAME=VALUE` \
                             or give shapes with `--sweep \"M,N,K;...\"`",
                            p.name.name
                        ),
                    ))))
                }
            }
        }
    }
    let &[m, k, k2, n, m2, n2] = sizes.as_slice() else {
        return Err(UserError::plain(
            "internal error: operands of rank 2 expected",
        ));
    };
    if (k2, m2, n2) != (k, m, n) {
        return Err(UserError(file.render(&Diagnostic::error(
            b.span,
            format!(
                "the operands do not form a GEMM: A is ({m}, {k}), B is ({k2}, {n}), C is ({m2}, \
                 {n2})"
            ),
        ))));
    }
    Ok(GemmShape { m, n, k })
}

/// `-D` texts binding the symbolic dims of the operand shapes to `shape` (for
/// `--specialize`). Constant extents must equal their size; with `strict` every other extent
/// must be a plain dim (otherwise it is left to the runtime, which binds dims at launch).
fn shape_defines(
    file: &SourceFile,
    [a, b, c]: [&BufferDecl; 3],
    shape: GemmShape,
    strict: bool,
) -> Result<Vec<String>, UserError> {
    let GemmShape { m, n, k } = shape;
    let want = [(a, vec![m, k]), (b, vec![k, n]), (c, vec![m, n])];
    operand_defines(file, &want, &shape, strict)
}

/// `-D` texts binding the symbolic dims of `want`'s parameters to the sizes given for them
/// (one per extent, `shape` names them in messages). An extent that is a plain dim binds it
/// (every extent naming the same dim must agree); a constant must equal its size; any other
/// extent (`T.ceildiv(K, 128)`) must equal its size once the plain dims are bound, and when
/// it mentions a dim no plain extent binds it is left to the runtime's check at launch —
/// or, with `strict` (the dims become constants), an error.
pub(crate) fn operand_defines(
    file: &SourceFile,
    want: &[(&BufferDecl, Vec<usize>)],
    shape: &dyn fmt::Display,
    strict: bool,
) -> Result<Vec<String>, UserError> {
    let mut bound: Vec<(String, usize)> = Vec::new();
    let clash = |p: &BufferDecl, d: &tlc_ir::Expr, have: String, size: usize| {
        UserError(file.render(&Diagnostic::error(
            d.span,
            format!(
                "shape {shape}: this extent of `{}` is {have}, not {size}",
                p.name.name
            ),
        )))
    };
    for (p, sizes) in want {
        for (d, &size) in p.shape.iter().zip(sizes) {
            match &d.kind {
                ExprKind::Int(v) if usize::try_from(*v).ok() == Some(size) => {}
                ExprKind::Int(v) => return Err(clash(p, d, v.to_string(), size)),
                ExprKind::Var(name) => match bound.iter().find(|(b, _)| b == name) {
                    Some((_, v)) if *v != size => {
                        return Err(clash(p, d, format!("{name} = {v}"), size))
                    }
                    Some(_) => {}
                    None => bound.push((name.clone(), size)),
                },
                _ => {}
            }
        }
    }
    // Derived extents, now that every plain dim has its value.
    let value = |name: &str| {
        bound
            .iter()
            .find(|(b, _)| b == name)
            .and_then(|(_, v)| i64::try_from(*v).ok())
    };
    for (p, sizes) in want {
        for (d, &size) in p.shape.iter().zip(sizes) {
            if matches!(d.kind, ExprKind::Int(_) | ExprKind::Var(_)) {
                continue;
            }
            match tlc_ir::verifier::eval_int(d, &value) {
                Some(v) if usize::try_from(v).ok() == Some(size) => {}
                Some(v) => return Err(clash(p, d, v.to_string(), size)),
                None if !strict => {}
                None => {
                    return Err(UserError(file.render(&Diagnostic::error(
                        d.span,
                        "`--specialize` needs every operand extent to be a symbolic dim, a \
                         constant, or computed from them",
                    ))))
                }
            }
        }
    }
    Ok(bound.into_iter().map(|(n, v)| format!("{n}={v}")).collect())
}

/// How tlc's `C` compares with cuBLAS's.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ErrorStats {
    /// max |tlc − cuBLAS| over the finite pairs.
    pub max_abs: f64,
    /// max |cuBLAS|.
    pub max_ref: f64,
    /// Elements where either value is NaN or infinite.
    pub non_finite: usize,
}

impl ErrorStats {
    /// `max_abs / max_ref` (`max_abs` itself when the reference is all zeros).
    pub fn rel(&self) -> f64 {
        if self.max_ref > 0.0 {
            self.max_abs / self.max_ref
        } else {
            self.max_abs
        }
    }

    pub fn passes(&self) -> bool {
        self.non_finite == 0 && self.rel() <= MAX_REL_ERROR
    }

    fn merge(self, o: ErrorStats) -> ErrorStats {
        ErrorStats {
            max_abs: self.max_abs.max(o.max_abs),
            max_ref: self.max_ref.max(o.max_ref),
            non_finite: self.non_finite + o.non_finite,
        }
    }
}

/// Compares `got` with `want` element by element (a length difference counts as
/// non-finite elements).
pub fn compare(got: &[f32], want: &[f32]) -> ErrorStats {
    let mut s = ErrorStats {
        non_finite: got.len().abs_diff(want.len()),
        ..ErrorStats::default()
    };
    for (&x, &y) in got.iter().zip(want) {
        if !x.is_finite() || !y.is_finite() {
            s.non_finite += 1;
            continue;
        }
        let (x, y) = (f64::from(x), f64::from(y));
        s.max_abs = s.max_abs.max((x - y).abs());
        s.max_ref = s.max_ref.max(y.abs());
    }
    s
}

/// [`compare`] on all cores.
pub(crate) fn compare_parallel(got: &[f32], want: &[f32]) -> ErrorStats {
    if got.len() != want.len() {
        return compare(got, want);
    }
    let chunk = got.len().div_ceil(threads()).max(1 << 16);
    std::thread::scope(|s| {
        let handles: Vec<_> = got
            .chunks(chunk)
            .zip(want.chunks(chunk))
            .map(|(g, w)| s.spawn(move || compare(g, w)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .fold(ErrorStats::default(), ErrorStats::merge)
    })
}

/// The summary of one side's timed runs, in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Timing {
    pub median_ms: f32,
    pub min_ms: f32,
    pub max_ms: f32,
}

/// Median, min and max of the timed runs (`None` when there are none or any is not a
/// positive finite number).
pub fn summarize(times: &[f32]) -> Option<Timing> {
    if times.iter().any(|t| !t.is_finite() || *t <= 0.0) {
        return None;
    }
    let median_ms = tlc_runtime::median(times)?;
    let min_ms = times.iter().copied().fold(f32::INFINITY, f32::min);
    let max_ms = times.iter().copied().fold(0.0, f32::max);
    Some(Timing {
        median_ms,
        min_ms,
        max_ms,
    })
}

/// One shape's result.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Row {
    pub shape: GemmShape,
    pub err: ErrorStats,
    pub tlc: Timing,
    pub cublas: Timing,
}

impl Row {
    pub fn tlc_tflops(&self) -> f64 {
        gemm_tflops(self.shape.m, self.shape.n, self.shape.k, self.tlc.median_ms)
    }

    pub fn cublas_tflops(&self) -> f64 {
        gemm_tflops(
            self.shape.m,
            self.shape.n,
            self.shape.k,
            self.cublas.median_ms,
        )
    }

    /// tlc's speed as a fraction of cuBLAS's (above 1: tlc is faster).
    pub fn ratio(&self) -> f64 {
        f64::from(self.cublas.median_ms) / f64::from(self.tlc.median_ms)
    }

    fn verdict(&self) -> &'static str {
        if self.err.passes() {
            "ok"
        } else {
            "FAIL"
        }
    }
}

pub fn table_header() -> String {
    format!(
        "{:>6} {:>6} {:>6} {:>9} {:>5} {:>9} {:>11} {:>10} {:>14} {:>6}\n",
        "M",
        "N",
        "K",
        "rel err",
        "check",
        "tlc ms",
        "tlc TFLOP/s",
        "cuBLAS ms",
        "cuBLAS TFLOP/s",
        "ratio"
    )
}

pub fn table_row(r: &Row) -> String {
    let mut rel = format!("{:.2e}", r.err.rel());
    if r.err.non_finite > 0 {
        rel = format!("{} NaN", r.err.non_finite);
    }
    format!(
        "{:>6} {:>6} {:>6} {:>9} {:>5} {:>9.3} {:>11.1} {:>10.3} {:>14.1} {:>6.3}\n",
        r.shape.m,
        r.shape.n,
        r.shape.k,
        rel,
        r.verdict(),
        r.tlc.median_ms,
        r.tlc_tflops(),
        r.cublas.median_ms,
        r.cublas_tflops(),
        r.ratio()
    )
}

pub const CSV_HEADER: &str = "m,n,k,rel_err,non_finite,check,tlc_ms,tlc_min_ms,tlc_max_ms,\
                              tlc_tflops,cublas_ms,cublas_min_ms,cublas_max_ms,cublas_tflops,ratio\n";

pub fn csv_row(r: &Row) -> String {
    format!(
        "{},{},{},{:e},{},{},{},{},{},{:.3},{},{},{},{:.3},{:.4}\n",
        r.shape.m,
        r.shape.n,
        r.shape.k,
        r.err.rel(),
        r.err.non_finite,
        r.verdict(),
        r.tlc.median_ms,
        r.tlc.min_ms,
        r.tlc.max_ms,
        r.tlc_tflops(),
        r.cublas.median_ms,
        r.cublas.min_ms,
        r.cublas.max_ms,
        r.cublas_tflops(),
        r.ratio()
    )
}

pub(crate) fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// One draw of SplitMix64 (`tlc_ir::hash`, the project's one generator) from `state`.
pub(crate) fn splitmix(state: &mut u64) -> u64 {
    let mut r = tlc_ir::hash::SplitMix64(*state);
    let x = r.next_u64();
    *state = r.0;
    x
}

/// Elements per independently seeded block of random data: the data depend on the seed and
/// the stream only, not on the number of threads.
pub(crate) const RANDOM_BLOCK: usize = 1 << 16;

/// `len` float16 values with random signs and magnitudes uniform in [1/8, 1) — never zero,
/// so a kernel that skips work cannot pass by accident — from `(seed, stream)`.
pub fn random_f16(len: usize, seed: u64, stream: u64) -> Vec<f16> {
    let mut out = vec![f16::ZERO; len];
    let per_thread = len.div_ceil(threads()).div_ceil(RANDOM_BLOCK).max(1) * RANDOM_BLOCK;
    std::thread::scope(|s| {
        for (t, part) in out.chunks_mut(per_thread).enumerate() {
            s.spawn(move || {
                for (b, block) in part.chunks_mut(RANDOM_BLOCK).enumerate() {
                    let index = (t * per_thread / RANDOM_BLOCK + b) as u64;
                    let mut state = seed ^ stream.wrapping_mul(0xA24B_AED4_963E_E407) ^ index;
                    let _ = splitmix(&mut state);
                    for x in block {
                        let r = splitmix(&mut state);
                        let u = (r >> 40) as f32 / (1u64 << 24) as f32;
                        let mag = 0.125 + 0.875 * u;
                        *x = f16::from_f32(if r & 1 == 1 { -mag } else { mag });
                    }
                }
            });
        }
    });
    out
}

/// The bytes of a `len`-element tensor of NaNs (float32, bfloat16, else float16).
pub(crate) fn nan_bytes(dtype: DType, len: usize) -> Vec<u8> {
    match dtype {
        DType::Float32 => f32::NAN.to_le_bytes().repeat(len),
        DType::BFloat16 => bf16::NAN.to_le_bytes().repeat(len),
        _ => f16::NAN.to_le_bytes().repeat(len),
    }
}

/// A float32, bfloat16 or float16 tensor's values as float32.
pub(crate) fn download_f32(t: &DeviceTensor) -> Result<Vec<f32>, RuntimeError> {
    match t.dtype() {
        DType::Float32 => t.to_vec::<f32>(),
        DType::BFloat16 => Ok(t.to_vec::<bf16>()?.iter().map(|h| h.to_f32()).collect()),
        _ => Ok(t.to_vec::<f16>()?.iter().map(|h| h.to_f32()).collect()),
    }
}

pub(crate) fn runtime(what: String) -> impl FnOnce(RuntimeError) -> UserError {
    move |e| UserError::plain(format!("{what}: {e}"))
}

/// Runs `tlc bench`. Rows are printed to stdout as each shape finishes; the returned text is
/// empty. Any failed check makes the command fail after the last shape.
pub fn run(args: &BenchArgs) -> Result<String, UserError> {
    if args.iters == 0 {
        return Err(UserError::plain("`--iters` must be at least 1"));
    }
    let sweep = args
        .sweep
        .map(parse_sweep)
        .transpose()
        .map_err(UserError::plain)?;
    let file = frontend::read_source(args.file)?;
    let parsed = frontend::parse(&file)?;
    // With `--specialize` each shape chooses its tunables below; this load only reads the
    // parameters.
    let first = match args.specialize {
        true => Tuning::DEFAULTS,
        false => args.tuning,
    };
    let (func, _) = tunables::prepare(&file, &parsed, args.defines, &first)?;
    if let Some(fp8) = super::bench_fp8::fp8_params(&file, &func) {
        fp8?;
        return super::bench_fp8::run(args, &file, &parsed, func, sweep);
    }
    let params = match gemm_params(&file, &func) {
        Ok(p) => p,
        Err(e) => match super::bench_gemv::gemv_params(&func) {
            Some(g) => return super::bench_gemv::run(args, &file, func, g),
            None => return Err(e),
        },
    };
    let shapes = match sweep {
        Some(s) => s,
        None => vec![kernel_shape(&file, params)?],
    };
    // Every shape is checked against the kernel's extents before the GPU is touched.
    for s in &shapes {
        shape_defines(&file, params, *s, args.specialize)?;
    }
    let c_dtype = params[2].dtype;

    let gpu = Gpu::new(0).map_err(|e| UserError::plain(format!("`tlc bench` needs a GPU: {e}")))?;
    let target = device_target(&gpu, args.target)?;
    let blas = Cublas::new(&gpu).map_err(runtime("cannot start cuBLAS".into()))?;
    let compile = |func: PrimFunc| load_kernel(&file, &gpu, target, func);
    let mut shared = None;
    if !args.specialize {
        shared = Some(compile(func.clone())?);
    }

    let mut out = std::io::stdout().lock();
    let (major, minor) = gpu.capability();
    if args.csv {
        let _ = out.write_all(CSV_HEADER.as_bytes());
    } else {
        let _ = writeln!(
            out,
            "bench `{}` as {} vs cuBLAS on {} (sm_{major}{minor}): {} warm-up runs, median of \
             {}\nrel err = max|C_tlc - C_cublas| / max|C_cublas|, limit {MAX_REL_ERROR:e}",
            func.name.name,
            target.name(),
            gpu.name(),
            args.warmup,
            args.iters,
        );
        let _ = out.write_all(table_header().as_bytes());
    }
    let _ = out.flush();
    let mut failed = Vec::new();
    for shape in shapes {
        let specialized;
        let kernel = match &shared {
            Some(k) => k,
            None => {
                let mut defines = args.defines.to_vec();
                defines.extend(shape_defines(&file, params, shape, true)?);
                let (func, _) = tunables::prepare(&file, &parsed, &defines, &args.tuning)?;
                specialized = compile(func)?;
                &specialized
            }
        };
        let row = bench_shape(&gpu, &blas, kernel, shape, c_dtype, args)?;
        if !row.err.passes() {
            failed.push(shape.to_string());
        }
        let line = if args.csv {
            csv_row(&row)
        } else {
            table_row(&row)
        };
        let _ = out.write_all(line.as_bytes());
        let _ = out.flush();
    }
    if failed.is_empty() {
        return Ok(String::new());
    }
    Err(UserError::plain(format!(
        "tlc's C differs from cuBLAS's beyond rel err {MAX_REL_ERROR:e} (or has NaN / inf) at: \
         {}",
        failed.join(", ")
    )))
}

/// Compiles `func` for `target` (as `tlc compile` does) and loads it on `gpu`.
pub(crate) fn load_kernel(
    file: &SourceFile,
    gpu: &Gpu,
    target: Target,
    func: PrimFunc,
) -> Result<Kernel, UserError> {
    let compiled = compile_func(
        file,
        func,
        device_context(gpu, target),
        &Instrumentation::default(),
        Emit::Ptx,
        &mut std::io::sink(),
    )?;
    gpu.load(compiled.text())
        .map_err(runtime("cannot load the kernel on the GPU".into()))
}

/// The GEMM shape of `parsed` with its dims bound to `dims` (for `tlc tune`).
pub(crate) fn gemm_shape(
    file: &SourceFile,
    parsed: &PrimFunc,
    dims: &tlc_ir::tuning::Config,
) -> Result<GemmShape, UserError> {
    let bound =
        tlc_ir::specialize::specialize(parsed, dims).map_err(|d| UserError(file.render(&d)))?;
    kernel_shape(file, gemm_params(file, &bound)?)
}

/// The dtype of a GEMM kernel's `C` (for `tlc tune`).
pub(crate) fn c_dtype(file: &SourceFile, parsed: &PrimFunc) -> Result<DType, UserError> {
    Ok(gemm_params(file, parsed)?[2].dtype)
}

/// Benchmarks `kernel` against cuBLAS at one shape (`F16Inputs`, made for this kernel).
pub(crate) fn bench_shape(
    gpu: &Gpu,
    blas: &Cublas,
    kernel: &Kernel,
    shape: GemmShape,
    c_dtype: DType,
    args: &BenchArgs,
) -> Result<Row, UserError> {
    F16Inputs::prepare(gpu, blas, shape, c_dtype, args)?.check_and_time(kernel, args)
}

/// One shape's f16 GEMM inputs, made once for any number of kernels (`tlc tune` checks
/// and times every config on them): seeded random A and B, cuBLAS's C downloaded, and
/// cuBLAS's timing.
pub(crate) struct F16Inputs {
    shape: GemmShape,
    a: DeviceTensor,
    b: DeviceTensor,
    /// The kernel's C, set to NaN from `nan` before each kernel's checked launch (an
    /// element it does not write stays NaN and fails the check).
    c: DeviceTensor,
    nan: DeviceTensor,
    want: Vec<f32>,
    cublas: Timing,
}

impl F16Inputs {
    pub(crate) fn prepare(
        gpu: &Gpu,
        blas: &Cublas,
        shape: GemmShape,
        c_dtype: DType,
        args: &BenchArgs,
    ) -> Result<F16Inputs, UserError> {
        let GemmShape { m, n, k } = shape;
        let at = |what: &str| format!("shape {shape}: {what}");
        let a = random_f16(m * k, args.seed, 1);
        let b = random_f16(k * n, args.seed, 2);
        let a = DeviceTensor::from_slice(gpu, &[m, k], &a).map_err(runtime(at("uploading A")))?;
        let b = DeviceTensor::from_slice(gpu, &[k, n], &b).map_err(runtime(at("uploading B")))?;
        let nan = DeviceTensor::from_bytes(gpu, c_dtype, &[m, n], &nan_bytes(c_dtype, m * n))
            .map_err(runtime(at("allocating C")))?;
        let c = DeviceTensor::zeros(gpu, c_dtype, &[m, n]).map_err(runtime(at("allocating C")))?;
        let c_ref =
            DeviceTensor::zeros(gpu, c_dtype, &[m, n]).map_err(runtime(at("allocating C")))?;
        blas.gemm_f16(&a, &b, &c_ref, m, n, k)
            .map_err(runtime(at("cuBLAS failed")))?;
        let want = download_f32(&c_ref).map_err(runtime(at("downloading cuBLAS's C")))?;
        let mut inputs = F16Inputs {
            shape,
            a,
            b,
            c: c_ref,
            nan,
            want,
            cublas: Timing {
                median_ms: f32::INFINITY,
                min_ms: f32::INFINITY,
                max_ms: f32::INFINITY,
            },
        };
        inputs.time_cublas(blas, args)?;
        inputs.c = c;
        Ok(inputs)
    }

    /// Times cuBLAS on these inputs (into C) and keeps the faster of this median and the
    /// ones before: a tuning run times it once before its configs and once after, so a
    /// GPU still raising its clocks at the start does not make every ratio look better.
    pub(crate) fn time_cublas(&mut self, blas: &Cublas, args: &BenchArgs) -> Result<(), UserError> {
        let GemmShape { m, n, k } = self.shape;
        let shape = self.shape;
        let at = |what: &str| format!("shape {shape}: {what}");
        let blas_ms = blas
            .time_gemm_f16(
                &self.a,
                &self.b,
                &self.c,
                (m, n, k),
                args.warmup,
                args.iters,
            )
            .map_err(runtime(at("timing cuBLAS")))?;
        let now = summarize(&blas_ms)
            .ok_or_else(|| UserError::plain(at("the CUDA events gave no usable timing")))?;
        if now.median_ms < self.cublas.median_ms {
            self.cublas = now;
        }
        Ok(())
    }

    /// cuBLAS's timing so far (the faster of the medians taken).
    pub(crate) fn cublas(&self) -> Timing {
        self.cublas
    }

    /// Launches `kernel` once into a NaN-filled C, compares C with cuBLAS's, then times it
    /// (on the same tensors).
    pub(crate) fn check_and_time(
        &mut self,
        kernel: &Kernel,
        args: &BenchArgs,
    ) -> Result<Row, UserError> {
        let shape = self.shape;
        let at = |what: &str| format!("shape {shape}: {what}");
        self.c
            .copy_from(&self.nan)
            .map_err(runtime(at("resetting C")))?;
        let (a, b, c) = (&self.a, &self.b, &self.c);
        // The kernel's parameters in its manifest's order (the same names as the function's).
        let manifest = kernel.manifest();
        let by_name: HashMap<&str, &DeviceTensor> = manifest
            .params
            .iter()
            .map(|p| p.name.as_str())
            .zip([a, b, c])
            .collect();
        let kargs: Vec<&DeviceTensor> = manifest
            .params
            .iter()
            .filter_map(|p| by_name.get(p.name.as_str()).copied())
            .collect();
        kernel
            .launch(&kargs)
            .map_err(runtime(at("cannot launch")))?;
        kernel
            .gpu()
            .synchronize()
            .map_err(runtime(at("the kernel failed on the GPU")))?;
        let got = download_f32(c).map_err(runtime(at("downloading C")))?;
        let err = compare_parallel(&got, &self.want);
        drop(got);
        let tlc_ms = kernel
            .time(&kargs, args.warmup, args.iters)
            .map_err(runtime(at("timing the kernel")))?;
        let bad = || UserError::plain(at("the CUDA events gave no usable timing"));
        Ok(Row {
            shape,
            err,
            tlc: summarize(&tlc_ms).ok_or_else(bad)?,
            cublas: self.cublas,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweep_parsing() {
        let s = parse_sweep("4096,4096,4096; 1000, 1000,1000 ;1,2,3;").unwrap();
        assert_eq!(
            s,
            vec![
                GemmShape {
                    m: 4096,
                    n: 4096,
                    k: 4096
                },
                GemmShape {
                    m: 1000,
                    n: 1000,
                    k: 1000
                },
                GemmShape { m: 1, n: 2, k: 3 },
            ]
        );
        assert_eq!(s[2].to_string(), "1x2x3");
        for (bad, says) in [
            ("", "shape 1 is ``"),
            ("1,2", "shape 1 is `1,2`"),
            ("1,2,3;;4,5,6", "shape 2 is ``"),
            ("1,2,3,4", "three sizes"),
            ("1,0,3", "N = `0`"),
            ("1,2,x", "K = `x`"),
            ("1,-2,3", "N = `-2`"),
            ("2147483648,1,1", "M = `2147483648`"),
        ] {
            match parse_sweep(bad) {
                Ok(s) => panic!("`{bad}` parsed as {s:?}"),
                Err(e) => assert!(e.contains(says), "`{bad}`: {e}"),
            }
        }
    }

    #[test]
    fn relative_error_is_normwise() {
        let e = compare(&[1.0, 2.0, -4.01], &[1.0, 2.0, -4.0]);
        assert_eq!(e.non_finite, 0);
        assert!((e.max_abs - 0.01).abs() < 1e-6, "{e:?}");
        assert_eq!(e.max_ref, 4.0);
        assert!((e.rel() - 0.0025).abs() < 1e-6);
        assert!(e.passes());
        // A small entry far off in relative terms still passes when it is small overall.
        assert!(compare(&[0.001, 10.0], &[0.002, 10.0]).passes());
        // 2% of the largest entry fails.
        assert!(!compare(&[10.2, 1.0], &[10.0, 1.0]).passes());
        // NaN or inf anywhere fails, and so does a length mismatch.
        let nan = compare(&[f32::NAN, 1.0], &[1.0, 1.0]);
        assert_eq!(nan.non_finite, 1);
        assert!(!nan.passes());
        assert!(!compare(&[1.0], &[f32::INFINITY]).passes());
        assert!(!compare(&[1.0], &[1.0, 1.0]).passes());
        // An all-zero reference: the absolute error.
        assert_eq!(compare(&[0.5], &[0.0]).rel(), 0.5);
        assert!(compare(&[0.0], &[0.0]).passes());
        // The parallel version agrees with the serial one.
        let got: Vec<f32> = (0..300_000).map(|i| (i % 97) as f32 * 0.5).collect();
        let mut want = got.clone();
        want[123_456] += 0.25;
        want[299_999] = f32::NAN;
        assert_eq!(compare_parallel(&got, &want), compare(&got, &want));
    }

    #[test]
    fn timing_summary() {
        let t = summarize(&[3.0, 1.0, 2.0, 10.0]).unwrap();
        assert_eq!(t.median_ms, 2.5);
        assert_eq!((t.min_ms, t.max_ms), (1.0, 10.0));
        assert_eq!(summarize(&[4.0]).unwrap().median_ms, 4.0);
        assert_eq!(summarize(&[]), None);
        assert_eq!(summarize(&[1.0, f32::NAN]), None);
        assert_eq!(summarize(&[0.0]), None);
    }

    #[test]
    fn rows_report_tflops_and_ratio() {
        let ms = |median_ms| Timing {
            median_ms,
            min_ms: median_ms,
            max_ms: median_ms,
        };
        // 4096^3: 2 * 2^36 flops = 137.4 GFLOP; at 0.5 ms 274.9 TFLOP/s.
        let row = Row {
            shape: GemmShape {
                m: 4096,
                n: 4096,
                k: 4096,
            },
            err: compare(&[1.0], &[1.0]),
            tlc: ms(0.5),
            cublas: ms(0.2),
        };
        assert!((row.tlc_tflops() - 274.877_906_944).abs() < 1e-3);
        assert!((row.cublas_tflops() / row.tlc_tflops() - 2.5).abs() < 1e-4);
        assert!((row.ratio() - 0.4).abs() < 1e-6);
        let line = table_row(&row);
        assert_eq!(
            line.split_whitespace().collect::<Vec<_>>(),
            ["4096", "4096", "4096", "0.00e0", "ok", "0.500", "274.9", "0.200", "687.2", "0.400"]
        );
        // The header's columns line up with the row's.
        assert_eq!(table_header().len(), line.len());
        let csv = csv_row(&row);
        assert_eq!(
            csv.trim_end().split(',').count(),
            CSV_HEADER.trim_end().split(',').count()
        );
        assert!(csv.starts_with("4096,4096,4096,0e0,0,ok,0.5,0.5,0.5,274.878,0.2,"));
        let bad = Row {
            err: compare(&[f32::NAN], &[1.0]),
            ..row
        };
        assert!(table_row(&bad).contains("1 NaN  FAIL"));
        assert!(csv_row(&bad).contains(",1,FAIL,"));
    }

    #[test]
    fn random_data_is_seeded_nonzero_and_thread_independent() {
        let a = random_f16(200_001, 7, 1);
        assert_eq!(a, random_f16(200_001, 7, 1));
        assert_ne!(a, random_f16(200_001, 7, 2));
        assert_ne!(a, random_f16(200_001, 8, 1));
        assert!(a.iter().all(|x| {
            let v = x.to_f32().abs();
            (0.125..=1.0).contains(&v)
        }));
        let negative = a.iter().filter(|x| x.to_f32() < 0.0).count();
        assert!((90_000..110_000).contains(&negative), "{negative}");
        // A prefix of a longer stream: blocks are seeded by position, not by thread.
        let longer = random_f16(1_000_000, 7, 1);
        assert_eq!(&longer[..RANDOM_BLOCK * 3], &a[..RANDOM_BLOCK * 3]);
    }

    #[test]
    fn nan_fill_encodings() {
        assert_eq!(nan_bytes(DType::Float16, 2), [0x00, 0x7e, 0x00, 0x7e]);
        assert_eq!(nan_bytes(DType::Float32, 1), f32::NAN.to_le_bytes());
        let b = nan_bytes(DType::BFloat16, 1);
        assert!(bf16::from_le_bytes([b[0], b[1]]).is_nan(), "{b:?}");
    }
}
