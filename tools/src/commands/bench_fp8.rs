//! `tlc bench FILE` for an FP8 GEMM with block scales — DeepGEMM's `gemm_fp8_fp8_bf16_nt`:
//! five parameters in TileLang's example order, `A (M, K)` and `B (N, K)` float8_e4m3 (B
//! stored N × K, "NT"), `C (M, N)` bfloat16, `scales_a (M, ⌈K/128⌉)` and `scales_b (⌈N/128⌉,
//! ⌈K/128⌉)` float32, computing `C[m, n] = bf16(Σ_kb (Σ_{k in kb} A[m,k]·B[n,k]) ·
//! scales_a[m, kb] · scales_b[n / 128, kb])`. A kernel with a float8 parameter is taken for
//! one; anything else about its signature is a located error.
//!
//! Per shape (`--sweep "M,N,K;..."` binds the dims at launch, or the kernel's constant
//! shape): random operands quantized as DeepGEMM's tests do (`fp8_data.rs`); tlc's `C`
//! filled with NaN, launched, and checked against the **reference**: the operands
//! dequantized on the host (fp8 value × block scale, in float32), uploaded, multiplied by
//! cuBLAS in float32 (`CUBLAS_COMPUTE_32F_PEDANTIC`, no TF32). The check is `bench.rs`'s
//! normwise relative error with the limit [`MAX_REL_ERROR_FP8`]. The **speed peer** is
//! cuBLASLt's FP8 GEMM (`tlc_runtime::cublaslt`) on the same fp8 operands with unit
//! per-tensor scales — the same FLOPs, no block scaling (cuBLASLt has none on Hopper) — its
//! own result checked against a float32 GEMM of the raw fp8 values so the timing is of the
//! right product. Without libcublasLt the check still runs and the row says "not timed".

use super::bench::{
    compare_parallel, download_f32, load_kernel, nan_bytes, operand_defines, runtime, summarize,
    BenchArgs, ErrorStats, GemmShape, Timing,
};
use super::fp8_data::{random_blocked, Quantized, BLOCK};
use crate::commands::compile::device_target;
use crate::tunables;
use std::io::Write as _;
use tlc::diagnostics::SourceFile;
use tlc::frontend::UserError;
use tlc_ir::{BufferDecl, DType, Diagnostic, PrimFunc};
use tlc_runtime::cublas::gemm_tflops;
use tlc_runtime::{Cublas, CublasLt, DeviceTensor, Gpu, Kernel};

/// A shape fails the check above this normwise relative error: 2^-7. Rounding the output to
/// bfloat16 (8 significant bits) moves each element by at most 2^-8 of itself, so at most
/// 2^-8 of max|ref| normwise; the other 2^-8 is the budget for accumulation: fp8 products
/// are exact in float32, the tensor cores' FP8 accumulation keeps ~14 bits within a
/// 128-wide K block (DeepGEMM promotes to float32 after each), and float32 across blocks —
/// orders of magnitude below 2^-8 for these data. A scale applied to the wrong block, a
/// block left out, or an unpromoted accumulation gone wrong lands far above it (the scales
/// vary 64×, `fp8_data.rs`).
pub const MAX_REL_ERROR_FP8: f64 = 1.0 / 128.0;

/// The roles of the five parameters, in order: what they must be.
const ROLES: [(&str, DType); 5] = [
    ("A (M, K)", DType::Float8E4M3),
    ("B (N, K)", DType::Float8E4M3),
    ("C (M, N)", DType::BFloat16),
    ("scales_a (M, ceildiv(K, 128))", DType::Float32),
    (
        "scales_b (ceildiv(N, 128), ceildiv(K, 128))",
        DType::Float32,
    ),
];

fn is_fp8(d: DType) -> bool {
    matches!(d, DType::Float8E4M3 | DType::Float8E5M2)
}

/// Whether `func` is an FP8 block-scaled GEMM: `None` when it has no float8 parameter (not
/// one of these: the other benches decide), else its signature checked — a located error
/// at the offending parameter (or the function's name for a wrong count).
/// Whether `func` has the FP8 GEMM's arity (five parameters) and a float8 one: what `tlc
/// tune` checks as that GEMM (refusing a wrong detail, located) rather than as any kernel.
pub fn meant_as_fp8_gemm(func: &PrimFunc) -> bool {
    func.params.len() == ROLES.len() && func.params.iter().any(|p| is_fp8(p.dtype))
}

pub fn fp8_params(file: &SourceFile, func: &PrimFunc) -> Option<Result<(), UserError>> {
    if !func.params.iter().any(|p| is_fp8(p.dtype)) {
        return None;
    }
    let signature = || {
        let roles: Vec<String> = ROLES.iter().map(|(r, d)| format!("{r} {d}")).collect();
        roles.join(", ")
    };
    if func.params.len() != ROLES.len() {
        return Some(Err(UserError(file.render(&Diagnostic::error(
            func.name.span,
            format!(
                "`tlc bench` runs an FP8 GEMM with block scales (a float8 parameter) as five \
                 parameters: {}; `{}` takes {}",
                signature(),
                func.name.name,
                func.params.len()
            ),
        )))));
    }
    for (i, (p, (role, dtype))) in func.params.iter().zip(ROLES).enumerate() {
        if p.shape.len() != 2 || p.dtype != dtype {
            return Some(Err(UserError(file.render(&Diagnostic::error(
                p.span,
                format!(
                    "`tlc bench` runs FP8 GEMMs with block scales: parameter {} (`{}`) must be \
                     the {dtype} matrix {role}; it is {} of rank {}",
                    i + 1,
                    p.name.name,
                    p.dtype,
                    p.shape.len()
                ),
            )))));
        }
    }
    Some(Ok(()))
}

/// The sizes of the five parameters at `shape`, in order.
pub fn operand_sizes(shape: GemmShape) -> [Vec<usize>; 5] {
    let GemmShape { m, n, k } = shape;
    let (nb, kb) = (n.div_ceil(BLOCK), k.div_ceil(BLOCK));
    [
        vec![m, k],
        vec![n, k],
        vec![m, n],
        vec![m, kb],
        vec![nb, kb],
    ]
}

/// `-D` texts for `shape` (see `bench::operand_defines`): every constant or derived extent
/// of the five parameters is checked against it, located.
pub fn shape_defines(
    file: &SourceFile,
    func: &PrimFunc,
    shape: GemmShape,
    strict: bool,
) -> Result<Vec<String>, UserError> {
    let want: Vec<(&BufferDecl, Vec<usize>)> =
        func.params.iter().zip(operand_sizes(shape)).collect();
    operand_defines(file, &want, &shape, strict)
}

/// The one shape of a kernel whose A and B extents are constants (after `-D`).
pub fn kernel_shape(file: &SourceFile, func: &PrimFunc) -> Result<GemmShape, UserError> {
    let extent = |p: usize, d: usize| -> Result<usize, UserError> {
        let b = &func.params[p];
        let e = &b.shape[d];
        tlc_ir::verifier::const_int(e)
            .and_then(|v| usize::try_from(v).ok())
            .ok_or_else(|| {
                UserError(file.render(&Diagnostic::error(
                    e.span,
                    format!(
                        "the shape of `{}` is not constant: bind its dims with `-D NAME=VALUE` \
                         or give shapes with `--sweep \"M,N,K;...\"`",
                        b.name.name
                    ),
                )))
            })
    };
    let shape = GemmShape {
        m: extent(0, 0)?,
        k: extent(0, 1)?,
        n: extent(1, 0)?,
    };
    shape_defines(file, func, shape, false)?;
    Ok(shape)
}

/// How cuBLASLt did on one shape.
#[derive(Clone, Debug, PartialEq)]
pub enum Peer {
    /// Its D against a float32 GEMM of the raw fp8 values, and its timing.
    Timed { err: ErrorStats, time: Timing },
    /// Why it was not timed (no library, no algorithm for the shape, a failed call).
    NotTimed(String),
}

impl Peer {
    /// Whether cuBLASLt computed the product it was timed on (true when not timed).
    pub fn passes(&self) -> bool {
        match self {
            Peer::Timed { err, .. } => err.non_finite == 0 && err.rel() <= MAX_REL_ERROR_FP8,
            Peer::NotTimed(_) => true,
        }
    }
}

/// One shape's result.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub shape: GemmShape,
    pub err: ErrorStats,
    pub tlc: Timing,
    pub peer: Peer,
}

impl Row {
    pub(crate) fn tflops(&self, t: &Timing) -> f64 {
        gemm_tflops(self.shape.m, self.shape.n, self.shape.k, t.median_ms)
    }

    pub fn passes(&self) -> bool {
        self.err.non_finite == 0 && self.err.rel() <= MAX_REL_ERROR_FP8
    }

    /// Whether cuBLASLt computed the product it was timed on (true when not timed).
    pub fn peer_passes(&self) -> bool {
        self.peer.passes()
    }

    /// cuBLASLt's time over tlc's (above 1: tlc is faster).
    pub fn ratio(&self) -> Option<f64> {
        match &self.peer {
            Peer::Timed { time, .. } => {
                Some(f64::from(time.median_ms) / f64::from(self.tlc.median_ms))
            }
            Peer::NotTimed(_) => None,
        }
    }
}

/// A relative error for a table (`N NaN` when any element is not finite).
pub(crate) fn rel_text(e: &ErrorStats) -> String {
    if e.non_finite > 0 {
        format!("{} NaN", e.non_finite)
    } else {
        format!("{:.2e}", e.rel())
    }
}

pub fn table_header() -> String {
    format!(
        "{:>6} {:>6} {:>6} {:>9} {:>5} {:>9} {:>11} {:>9} {:>9} {:>11} {:>6}\n",
        "M",
        "N",
        "K",
        "rel err",
        "check",
        "tlc ms",
        "tlc TFLOP/s",
        "Lt err",
        "Lt ms",
        "Lt TFLOP/s",
        "ratio"
    )
}

/// A table row; a shape cuBLASLt did not time gets `-` in its columns and a note line.
pub fn table_row(r: &Row) -> String {
    let check = if r.passes() { "ok" } else { "FAIL" };
    let (lt_err, lt_ms, lt_tflops, ratio, note) = match &r.peer {
        Peer::Timed { err, time } => (
            rel_text(err),
            format!("{:.3}", time.median_ms),
            format!("{:.1}", r.tflops(time)),
            format!("{:.3}", r.ratio().unwrap_or(0.0)),
            String::new(),
        ),
        Peer::NotTimed(why) => (
            "-".into(),
            "-".into(),
            "-".into(),
            "-".into(),
            format!("  (cuBLASLt not timed: {why})\n"),
        ),
    };
    format!(
        "{:>6} {:>6} {:>6} {:>9} {:>5} {:>9.3} {:>11.1} {:>9} {:>9} {:>11} {:>6}\n{note}",
        r.shape.m,
        r.shape.n,
        r.shape.k,
        rel_text(&r.err),
        check,
        r.tlc.median_ms,
        r.tflops(&r.tlc),
        lt_err,
        lt_ms,
        lt_tflops,
        ratio
    )
}

pub const CSV_HEADER: &str = "m,n,k,rel_err,non_finite,check,tlc_ms,tlc_min_ms,tlc_max_ms,\
                              tlc_tflops,lt_rel_err,lt_ms,lt_min_ms,lt_max_ms,lt_tflops,ratio\n";

/// A CSV line; the cuBLASLt fields are empty when it was not timed.
pub fn csv_row(r: &Row) -> String {
    let check = if r.passes() { "ok" } else { "FAIL" };
    let peer = match &r.peer {
        Peer::Timed { err, time } => format!(
            "{:e},{},{},{},{:.3},{:.4}",
            err.rel(),
            time.median_ms,
            time.min_ms,
            time.max_ms,
            r.tflops(time),
            r.ratio().unwrap_or(0.0)
        ),
        Peer::NotTimed(_) => ",,,,,".into(),
    };
    format!(
        "{},{},{},{:e},{},{check},{},{},{},{:.3},{peer}\n",
        r.shape.m,
        r.shape.n,
        r.shape.k,
        r.err.rel(),
        r.err.non_finite,
        r.tlc.median_ms,
        r.tlc.min_ms,
        r.tlc.max_ms,
        r.tflops(&r.tlc),
    )
}

/// Runs `tlc bench` on an FP8 block-scaled GEMM whose signature `fp8_params` accepted.
/// Rows go to stdout as each shape finishes; a failed check fails the command after the
/// last shape.
pub fn run(
    args: &BenchArgs,
    file: &SourceFile,
    parsed: &PrimFunc,
    func: PrimFunc,
    sweep: Option<Vec<GemmShape>>,
) -> Result<String, UserError> {
    let shapes = match sweep {
        Some(s) => s,
        None => vec![kernel_shape(file, &func)?],
    };
    // Every shape is checked against the kernel's extents before the GPU is touched.
    for s in &shapes {
        shape_defines(file, &func, *s, args.specialize)?;
    }
    let gpu = Gpu::new(0).map_err(|e| UserError::plain(format!("`tlc bench` needs a GPU: {e}")))?;
    let target = device_target(&gpu, args.target)?;
    let blas = Cublas::new(&gpu).map_err(runtime("cannot start cuBLAS".into()))?;
    let lt = CublasLt::new(&gpu).map_err(|e| e.to_string());
    let shared = match args.specialize {
        true => None,
        false => Some(load_kernel(file, &gpu, target, func.clone())?),
    };

    let mut out = std::io::stdout().lock();
    let (major, minor) = gpu.capability();
    if args.csv {
        let _ = out.write_all(CSV_HEADER.as_bytes());
    } else {
        let peer = match &lt {
            Ok(_) => "peer: cuBLASLt FP8 GEMM (e4m3 x e4m3 -> bf16, f32 accumulation, TN, \
                      per-tensor scales = 1: cuBLASLt has no 1x128/128x128 block scaling on \
                      Hopper; same FLOPs); Lt err = its D vs a float32 GEMM of the raw fp8 \
                      values"
                .to_string(),
            Err(e) => format!("no cuBLASLt: not timed ({e})"),
        };
        let _ = writeln!(
            out,
            "bench FP8 block-scaled GEMM `{}` as {} on {} (sm_{major}{minor}): {} warm-up \
             runs, median of {}\nreference: operands dequantized on the host (fp8 x block \
             scale), float32 GEMM in cuBLAS (pedantic, no TF32); rel err = max|C_tlc - ref| / \
             max|ref|, limit {MAX_REL_ERROR_FP8:e}\n{peer}",
            func.name.name,
            target.name(),
            gpu.name(),
            args.warmup,
            args.iters,
        );
        let _ = out.write_all(table_header().as_bytes());
    }
    let _ = out.flush();
    let names: Vec<&str> = func.params.iter().map(|p| p.name.name.as_str()).collect();
    let mut failed = Vec::new();
    let mut peer_failed = Vec::new();
    for shape in shapes {
        let specialized;
        let kernel = match &shared {
            Some(k) => k,
            None => {
                let mut defines = args.defines.to_vec();
                defines.extend(shape_defines(file, &func, shape, true)?);
                let (f, _) = tunables::prepare(file, parsed, &defines, &args.tuning)?;
                specialized = load_kernel(file, &gpu, target, f)?;
                &specialized
            }
        };
        let row = bench_shape(&gpu, &blas, lt.as_ref().ok(), kernel, &names, shape, args)?;
        if !row.passes() {
            failed.push(shape.to_string());
        }
        if !row.peer_passes() {
            peer_failed.push(shape.to_string());
        }
        let line = if args.csv {
            csv_row(&row)
        } else {
            table_row(&row)
        };
        let _ = out.write_all(line.as_bytes());
        let _ = out.flush();
    }
    let mut problems = Vec::new();
    if !failed.is_empty() {
        problems.push(format!(
            "tlc's C differs from the dequantized float32 reference beyond rel err \
             {MAX_REL_ERROR_FP8:e} (or has NaN / inf) at: {}",
            failed.join(", ")
        ));
    }
    if !peer_failed.is_empty() {
        problems.push(format!(
            "cuBLASLt's D differs from the float32 GEMM of the raw fp8 values (its timing is \
             not of this product) at: {}",
            peer_failed.join(", ")
        ));
    }
    match problems.is_empty() {
        true => Ok(String::new()),
        false => Err(UserError::plain(problems.join("\n"))),
    }
}

/// Checks and times one shape: the inputs and reference ([`Fp8Inputs::prepare`]), tlc's
/// kernel on them ([`check_and_time`]), then cuBLASLt ([`time_peer`]).
fn bench_shape(
    gpu: &Gpu,
    blas: &Cublas,
    lt: Option<&CublasLt>,
    kernel: &Kernel,
    names: &[&str],
    shape: GemmShape,
    args: &BenchArgs,
) -> Result<Row, UserError> {
    let inputs = Fp8Inputs::prepare(gpu, blas, shape, args.seed)?;
    let (err, tlc) = check_and_time(gpu, kernel, names, &inputs, args.warmup, args.iters)?;
    let peer = time_peer(gpu, blas, lt, &inputs, args.warmup, args.iters);
    Ok(Row {
        shape,
        err,
        tlc,
        peer,
    })
}

/// One shape's operands on the GPU and its reference on the host: what every kernel run on
/// the shape is checked against (`tlc bench` runs one kernel, `tlc tune` every config).
pub(crate) struct Fp8Inputs {
    pub shape: GemmShape,
    qa: Quantized,
    qb: Quantized,
    a: DeviceTensor,
    b: DeviceTensor,
    sa: DeviceTensor,
    sb: DeviceTensor,
    /// The reference C, row-major `M × N`.
    want: Vec<f32>,
}

impl Fp8Inputs {
    /// Random operands quantized as DeepGEMM's tests do (`fp8_data.rs`, from `seed`),
    /// uploaded, and the reference: the operands dequantized on the host, multiplied by
    /// cuBLAS in float32.
    pub(crate) fn prepare(
        gpu: &Gpu,
        blas: &Cublas,
        shape: GemmShape,
        seed: u64,
    ) -> Result<Fp8Inputs, UserError> {
        let GemmShape { m, n, k } = shape;
        let at = |what: &str| format!("shape {shape}: {what}");
        let qa = Quantized::quantize(&random_blocked(m, k, 1, seed, 1), m, k, 1);
        let qb = Quantized::quantize(&random_blocked(n, k, BLOCK, seed, 2), n, k, BLOCK);
        let up_fp8 = |q: &Quantized, what: &str| {
            DeviceTensor::from_bytes(gpu, DType::Float8E4M3, &[q.rows, q.cols], &q.values)
                .map_err(runtime(at(what)))
        };
        let a = up_fp8(&qa, "uploading A")?;
        let b = up_fp8(&qb, "uploading B")?;
        let sa = upload_f32(gpu, &qa.scale_shape(), &qa.scales, at("uploading scales_a"))?;
        let sb = upload_f32(gpu, &qb.scale_shape(), &qb.scales, at("uploading scales_b"))?;
        let want = {
            let a32 = upload_f32(
                gpu,
                &[m, k],
                &qa.dequantize(),
                at("uploading the dequantized A"),
            )?;
            let b32 = upload_f32(
                gpu,
                &[n, k],
                &qb.dequantize(),
                at("uploading the dequantized B"),
            )?;
            let c_ref = DeviceTensor::zeros(gpu, DType::Float32, &[m, n])
                .map_err(runtime(at("allocating the reference C")))?;
            blas.gemm_nt_f32(&a32, &b32, &c_ref, m, n, k)
                .map_err(runtime(at("the cuBLAS reference failed")))?;
            download_f32(&c_ref).map_err(runtime(at("downloading the reference")))?
        };
        Ok(Fp8Inputs {
            shape,
            qa,
            qb,
            a,
            b,
            sa,
            sb,
            want,
        })
    }
}

fn upload_f32(
    gpu: &Gpu,
    shape: &[usize],
    v: &[f32],
    what: String,
) -> Result<DeviceTensor, UserError> {
    DeviceTensor::from_slice(gpu, shape, v).map_err(runtime(what))
}

/// Launches `kernel` (parameter names `names`, in the function's order) on `inputs` into a
/// NaN-filled C, checks C against the reference, then times it: the error and the timing.
pub(crate) fn check_and_time(
    gpu: &Gpu,
    kernel: &Kernel,
    names: &[&str],
    inputs: &Fp8Inputs,
    warmup: usize,
    iters: usize,
) -> Result<(ErrorStats, Timing), UserError> {
    let shape = inputs.shape;
    let GemmShape { m, n, .. } = shape;
    let at = |what: &str| format!("shape {shape}: {what}");
    let c = DeviceTensor::from_bytes(
        gpu,
        DType::BFloat16,
        &[m, n],
        &nan_bytes(DType::BFloat16, m * n),
    )
    .map_err(runtime(at("allocating C")))?;
    // The kernel's parameters in its manifest's order (the names are the function's).
    let Fp8Inputs { a, b, sa, sb, .. } = inputs;
    let by_name: Vec<(&str, &DeviceTensor)> =
        names.iter().copied().zip([a, b, &c, sa, sb]).collect();
    let kargs: Vec<&DeviceTensor> = kernel.manifest().in_param_order(&by_name);
    kernel
        .launch(&kargs)
        .map_err(runtime(at("cannot launch")))?;
    gpu.synchronize()
        .map_err(runtime(at("the kernel failed on the GPU")))?;
    let got = download_f32(&c).map_err(runtime(at("downloading C")))?;
    let err = compare_parallel(&got, &inputs.want);
    drop(got);
    let tlc_ms = kernel
        .time(&kargs, warmup, iters)
        .map_err(runtime(at("timing the kernel")))?;
    let tlc = summarize(&tlc_ms)
        .ok_or_else(|| UserError::plain(at("the CUDA events gave no usable timing")))?;
    Ok((err, tlc))
}

/// cuBLASLt's FP8 GEMM on `inputs`' fp8 operands with unit scales: its D checked against a
/// float32 GEMM of the raw fp8 values (so the timing is of the right product), then timed.
pub(crate) fn time_peer(
    gpu: &Gpu,
    blas: &Cublas,
    lt: Option<&CublasLt>,
    inputs: &Fp8Inputs,
    warmup: usize,
    iters: usize,
) -> Peer {
    let Some(lt) = lt else {
        return Peer::NotTimed("no cuBLASLt".into());
    };
    let GemmShape { m, n, k } = inputs.shape;
    let checked = (|| {
        let d = DeviceTensor::zeros(gpu, DType::BFloat16, &[m, n])?;
        let g = lt.fp8_gemm(&inputs.a, &inputs.b, &d)?;
        g.run()?;
        // cuBLASLt's scales are 1: its reference is the raw fp8 values' product.
        let a32 = DeviceTensor::from_slice(gpu, &[m, k], &inputs.qa.decode())?;
        let b32 = DeviceTensor::from_slice(gpu, &[n, k], &inputs.qb.decode())?;
        let c_ref = DeviceTensor::zeros(gpu, DType::Float32, &[m, n])?;
        blas.gemm_nt_f32(&a32, &b32, &c_ref, m, n, k)?;
        let err = compare_parallel(&download_f32(&d)?, &download_f32(&c_ref)?);
        drop((a32, b32, c_ref));
        let times = g.time(warmup, iters)?;
        Ok::<_, tlc_runtime::RuntimeError>((err, times))
    })();
    match checked {
        Ok((err, times)) => match summarize(&times) {
            Some(time) => Peer::Timed { err, time },
            None => Peer::NotTimed("the CUDA events gave no usable timing".into()),
        },
        Err(e) => Peer::NotTimed(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tlc::frontend;
    use tlc_ir::verifier::const_int;

    const SIGNATURE: &str = r#"M = T.symbolic("M")
N = T.symbolic("N")
K = T.symbolic("K")

@T.prim_func
def gemm_fp8(
    A: T.Tensor((M, K), "float8_e4m3"),
    B: T.Tensor((N, K), "float8_e4m3"),
    C: T.Tensor((M, N), "bfloat16"),
    scales_a: T.Tensor((M, T.ceildiv(K, 128)), "float32"),
    scales_b: T.Tensor((T.ceildiv(N, 128), T.ceildiv(K, 128)), "float32"),
):
    with T.Kernel(T.ceildiv(N, 128), T.ceildiv(M, 128), threads=128) as (bx, by):
        for i in T.serial(1):
            C[by, bx] = T.cast(scales_a[by, 0], "bfloat16")
"#;

    fn parsed(text: &str) -> (SourceFile, PrimFunc) {
        let file = SourceFile::new("fp8.tir", text.to_string());
        let func = frontend::parse(&file).unwrap_or_else(|e| panic!("{}", e.0));
        (file, func)
    }

    fn refusal(text: &str) -> String {
        let (file, func) = parsed(text);
        match fp8_params(&file, &func) {
            Some(Err(e)) => e.0,
            other => panic!("not refused: {:?}", other.map(|r| r.is_ok())),
        }
    }

    #[test]
    fn the_deepgemm_signature_is_classified() {
        let (file, func) = parsed(SIGNATURE);
        assert!(matches!(fp8_params(&file, &func), Some(Ok(()))));
        // No float8 parameter: another bench's kernel.
        let f16 = SIGNATURE.replace("float8_e4m3", "float16");
        let (file, func) = parsed(&f16);
        assert!(fp8_params(&file, &func).is_none());
    }

    #[test]
    fn wrong_signatures_are_located_refusals() {
        // B as e5m2: the parameter's line and column, its role, its dtype.
        let e5m2 = SIGNATURE.replacen(
            "B: T.Tensor((N, K), \"float8_e4m3\")",
            "B: T.Tensor((N, K), \"float8_e5m2\")",
            1,
        );
        let msg = refusal(&e5m2);
        assert!(msg.starts_with("fp8.tir:8:5: error: "), "{msg}");
        assert!(
            msg.contains(
                "parameter 2 (`B`) must be the float8_e4m3 matrix B (N, K); it is float8_e5m2 \
                 of rank 2"
            ),
            "{msg}"
        );
        // C in float16.
        let msg = refusal(&SIGNATURE.replace("\"bfloat16\")", "\"float16\")"));
        assert!(msg.starts_with("fp8.tir:9:5: error: "), "{msg}");
        assert!(
            msg.contains("(`C`) must be the bfloat16 matrix C (M, N); it is float16"),
            "{msg}"
        );
        // scales_b of rank 1.
        let rank1 = SIGNATURE.replace(
            "(T.ceildiv(N, 128), T.ceildiv(K, 128)), \"float32\"",
            "(T.ceildiv(N, 128),), \"float32\"",
        );
        let msg = refusal(&rank1);
        assert!(msg.contains("parameter 5 (`scales_b`)"), "{msg}");
        assert!(msg.contains("it is float32 of rank 1"), "{msg}");
        // Four parameters: located at the function's name, the full signature spelled out.
        let four = SIGNATURE.replace(
            "    scales_b: T.Tensor((T.ceildiv(N, 128), T.ceildiv(K, 128)), \"float32\"),\n",
            "",
        );
        let msg = refusal(&four);
        assert!(msg.starts_with("fp8.tir:6:5: error: "), "{msg}");
        assert!(msg.contains("`gemm_fp8` takes 4"), "{msg}");
        assert!(
            msg.contains("scales_b (ceildiv(N, 128), ceildiv(K, 128)) float32"),
            "{msg}"
        );
    }

    #[test]
    fn shapes_bind_dims_and_derived_scale_extents_are_checked() {
        let (file, func) = parsed(SIGNATURE);
        let shape = GemmShape {
            m: 4096,
            n: 7168,
            k: 7000,
        };
        assert_eq!(
            operand_sizes(shape),
            [
                vec![4096, 7000],
                vec![7168, 7000],
                vec![4096, 7168],
                vec![4096, 55],
                vec![56, 55]
            ]
        );
        assert_eq!(
            shape_defines(&file, &func, shape, true).unwrap(),
            ["M=4096", "K=7000", "N=7168"]
        );
        // A scale extent the kernel computes differently (K / 128 floors: 54 at K = 7000).
        let floor = SIGNATURE.replace(
            "scales_a: T.Tensor((M, T.ceildiv(K, 128))",
            "scales_a: T.Tensor((M, K // 128)",
        );
        let (file, func) = parsed(&floor);
        let e = shape_defines(&file, &func, shape, false).unwrap_err().0;
        assert!(e.starts_with("fp8.tir:10:"), "{e}");
        assert!(
            e.contains("shape 4096x7168x7000: this extent of `scales_a` is 54, not 55"),
            "{e}"
        );
        // ... which agrees where K is a multiple of 128.
        let even = GemmShape { k: 7168, ..shape };
        assert!(shape_defines(&file, &func, even, false).is_ok());
    }

    #[test]
    fn the_kernel_shape_comes_from_constants() {
        let (file, func) = parsed(SIGNATURE);
        let e = kernel_shape(&file, &func).unwrap_err().0;
        assert!(e.contains("the shape of `A` is not constant"), "{e}");
        let bound = tlc_ir::specialize::specialize(
            &func,
            &[("M".into(), 64), ("N".into(), 2112), ("K".into(), 7168)],
        )
        .unwrap();
        assert_eq!(
            kernel_shape(&file, &bound).unwrap(),
            GemmShape {
                m: 64,
                n: 2112,
                k: 7168
            }
        );
        // The derived extents fold to constants with the dims bound.
        assert_eq!(const_int(&bound.params[4].shape[0]), Some(17));
    }

    fn timing(ms: f32) -> Timing {
        Timing {
            median_ms: ms,
            min_ms: ms,
            max_ms: ms,
        }
    }

    #[test]
    fn rows_report_the_peer_or_why_not() {
        let shape = GemmShape {
            m: 4096,
            n: 7168,
            k: 16384,
        };
        let ok = ErrorStats {
            max_abs: 0.004,
            max_ref: 1.0,
            non_finite: 0,
        };
        let row = Row {
            shape,
            err: ok,
            tlc: timing(0.8),
            peer: Peer::Timed {
                err: ErrorStats {
                    max_abs: 0.003,
                    ..ok
                },
                time: timing(1.0),
            },
        };
        assert!(row.passes() && row.peer_passes());
        assert!((row.ratio().unwrap() - 1.25).abs() < 1e-6);
        // 2 * 4096 * 7168 * 16384 flops in 0.8 ms: 1202.6 TFLOP/s.
        let line = table_row(&row);
        assert_eq!(
            line.split_whitespace().collect::<Vec<_>>(),
            [
                "4096", "7168", "16384", "4.00e-3", "ok", "0.800", "1202.6", "3.00e-3", "1.000",
                "962.1", "1.250"
            ]
        );
        assert_eq!(table_header().len(), line.len());
        let csv = csv_row(&row);
        assert_eq!(
            csv.trim_end().split(',').count(),
            CSV_HEADER.trim_end().split(',').count()
        );
        assert!(csv.ends_with(",1.2500\n"), "{csv}");
        // Not timed: dashes, a note, empty CSV fields; the check still decides.
        let alone = Row {
            peer: Peer::NotTimed("no cuBLASLt".into()),
            ..row.clone()
        };
        let text = table_row(&alone);
        assert!(text.contains("(cuBLASLt not timed: no cuBLASLt)"), "{text}");
        assert_eq!(alone.ratio(), None);
        assert!(alone.peer_passes());
        let csv = csv_row(&alone);
        assert!(csv.ends_with(",,,,,\n"), "{csv}");
        assert_eq!(
            csv.trim_end_matches('\n').split(',').count(),
            CSV_HEADER.trim_end().split(',').count()
        );
        // Past 2^-7, or any NaN, fails.
        let bad = Row {
            err: ErrorStats {
                max_abs: 0.008,
                ..ok
            },
            ..row.clone()
        };
        assert!(!bad.passes());
        assert!(table_row(&bad).contains(" FAIL "));
        let nan = Row {
            err: ErrorStats {
                non_finite: 3,
                ..ok
            },
            ..row
        };
        assert!(!nan.passes());
        assert!(table_row(&nan).contains("3 NaN"));
    }
}
