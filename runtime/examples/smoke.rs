//! GPU smoke test of the runtime, no arguments: loads the hand-written `vadd.ptx`, checks a
//! ragged launch against the CPU, checks that bad arguments are refused before launching,
//! times the kernel (and a device-to-device copy for scale), runs 1000 load→launch→drop
//! cycles watching device free memory, and times cuBLAS at 4096³ f16. Prints a short report;
//! exits 1 on any failed check or error (no GPU included), 0 otherwise.
//!
//! Build: `cargo build --release --example smoke -p tlc-runtime`
//! Run:   `LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib target/release/examples/smoke`

use half::f16;
use std::process::ExitCode;
use std::time::Instant;
use tlc_runtime::cublas::gemm_tflops;
use tlc_runtime::timing::time_ms;
use tlc_runtime::{median, Cublas, DType, DeviceTensor, Gpu, Kernel, RuntimeError};

const VADD: &str = include_str!("vadd.ptx");
const RAGGED_N: usize = 1_000_003;
const BIG_N: usize = 1 << 28;
const LEAK_CYCLES: usize = 1000;
const GEMM: usize = 4096;

fn main() -> ExitCode {
    println!("tlc-runtime smoke test");
    let mut report = Report::default();
    if let Err(e) = run(&mut report) {
        report.fail("error", &e.to_string());
    }
    if report.failures.is_empty() {
        println!("result       PASS");
        ExitCode::SUCCESS
    } else {
        println!(
            "result       FAIL ({} failed: {})",
            report.failures.len(),
            report.failures.join(", ")
        );
        ExitCode::FAILURE
    }
}

#[derive(Default)]
struct Report {
    failures: Vec<String>,
}

impl Report {
    fn line(&self, what: &str, text: &str) {
        println!("{what:<12} {text}");
    }

    fn check(&mut self, what: &str, ok: bool, text: &str) {
        self.line(
            what,
            &format!("{} {text}", if ok { "ok  " } else { "FAIL" }),
        );
        if !ok {
            self.failures.push(what.to_string());
        }
    }

    fn fail(&mut self, what: &str, text: &str) {
        self.check(what, false, text);
    }
}

/// splitmix64: reproducible random data without a dependency.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [-1, 1).
    fn unit(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }

    fn vec(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.unit()).collect()
    }
}

fn run(report: &mut Report) -> Result<(), RuntimeError> {
    let gpu = Gpu::new(0)?;
    let (free, total) = gpu.memory_info()?;
    let (major, minor) = gpu.capability();
    report.line(
        "device",
        &format!(
            "{} (compute {major}.{minor}), {:.1} of {:.1} GiB free",
            gpu.name(),
            gib(free),
            gib(total)
        ),
    );
    let mut rng = Rng(0x7e1c_2024);

    let t0 = Instant::now();
    let kernel = gpu.load(VADD)?;
    report.line(
        "load",
        &format!("vadd.ptx in {:.2} ms", t0.elapsed().as_secs_f64() * 1e3),
    );

    vadd_correct(report, &gpu, &kernel, &mut rng, RAGGED_N)?;
    bad_arguments(report, &gpu, &kernel)?;
    vadd_timing(report, &gpu, &kernel, &mut rng)?;
    leak_check(report, &gpu)?;
    cublas_gemm(report, &gpu, &mut rng)?;
    Ok(())
}

/// Launches over `n` elements and compares every element with the CPU sum.
fn vadd_correct(
    report: &mut Report,
    gpu: &Gpu,
    kernel: &Kernel,
    rng: &mut Rng,
    n: usize,
) -> Result<(), RuntimeError> {
    let (a, b) = (rng.vec(n), rng.vec(n));
    let da = DeviceTensor::from_slice(gpu, &[n], &a)?;
    let db = DeviceTensor::from_slice(gpu, &[n], &b)?;
    // Garbage, not zeros, so an unwritten element cannot pass by accident.
    let dc = DeviceTensor::from_slice(gpu, &[n], &vec![f32::NAN; n])?;
    kernel.launch(&[&da, &db, &dc])?;
    let c = dc.to_vec::<f32>()?;
    let wrong = c
        .iter()
        .zip(a.iter().zip(&b))
        .filter(|(c, (a, b))| c.to_bits() != (*a + *b).to_bits())
        .count();
    let plan = kernel.plan(&[&da, &db, &dc])?;
    report.check(
        "vadd",
        wrong == 0 && c.len() == n,
        &format!(
            "n = {n}, grid {:?} block {:?}: {wrong} of {n} elements differ from the CPU",
            plan.kernels.first().map(|k| k.grid),
            plan.kernels.first().map(|k| k.block)
        ),
    );
    Ok(())
}

/// Wrong shapes, dtypes and counts must be refused before anything is launched.
fn bad_arguments(report: &mut Report, gpu: &Gpu, kernel: &Kernel) -> Result<(), RuntimeError> {
    let a = DeviceTensor::zeros(gpu, DType::Float32, &[1000])?;
    let b = DeviceTensor::zeros(gpu, DType::Float32, &[1024])?;
    let h = DeviceTensor::zeros(gpu, DType::Float16, &[1000])?;
    let cases = [
        (kernel.launch(&[&a, &b, &a]), "shape"),
        (kernel.launch(&[&a, &h, &a]), "dtype"),
        (kernel.launch(&[&a, &a]), "count"),
    ];
    let mut all = true;
    let mut first = String::new();
    for (result, what) in cases {
        let refused = matches!(
            (&result, what),
            (Err(RuntimeError::ArgShape { .. }), "shape")
                | (Err(RuntimeError::ArgDtype { .. }), "dtype")
                | (Err(RuntimeError::ArgCount { .. }), "count")
        );
        all &= refused;
        if first.is_empty() {
            if let Err(e) = result {
                first = e.to_string();
            }
        }
    }
    gpu.synchronize()?;
    report.check(
        "arg checks",
        all,
        &format!("bad shape, dtype and count refused before launch (e.g. \"{first}\")"),
    );
    Ok(())
}

fn vadd_timing(
    report: &mut Report,
    gpu: &Gpu,
    kernel: &Kernel,
    rng: &mut Rng,
) -> Result<(), RuntimeError> {
    for n in [RAGGED_N, BIG_N] {
        let da = DeviceTensor::from_slice(gpu, &[n], &rng.vec(n))?;
        let db = DeviceTensor::from_slice(gpu, &[n], &rng.vec(n))?;
        let dc = DeviceTensor::zeros(gpu, DType::Float32, &[n])?;
        let ms = median(&kernel.time(&[&da, &db, &dc], 10, 100)?).unwrap_or(f32::NAN);
        let gbs = 3.0 * 4.0 * n as f64 / (f64::from(ms) * 1e-3) / 1e9;
        let mut text = format!("n = {n}: median {ms:.4} ms, {gbs:.0} GB/s");
        if n == BIG_N {
            // Scale: a device-to-device copy of one operand moves 2·4·n bytes.
            let mut dst = DeviceTensor::zeros(gpu, DType::Float32, &[n])?;
            let copy = median(&time_ms(gpu, 10, 100, || dst.copy_from(&da))?).unwrap_or(f32::NAN);
            let copy_gbs = 2.0 * 4.0 * n as f64 / (f64::from(copy) * 1e-3) / 1e9;
            text += &format!(
                "; d2d copy {copy_gbs:.0} GB/s; vadd at {:.0}% of copy",
                100.0 * gbs / copy_gbs
            );
        }
        report.check("vadd time", ms.is_finite() && ms > 0.0, &text);
    }
    Ok(())
}

/// 1000 load → allocate → launch → free cycles must leave free memory where it was.
fn leak_check(report: &mut Report, gpu: &Gpu) -> Result<(), RuntimeError> {
    let cycle = || -> Result<(), RuntimeError> {
        let kernel = gpu.load(VADD)?;
        let n = 4099;
        let a = DeviceTensor::from_slice(gpu, &[n], &vec![1.0f32; n])?;
        let b = DeviceTensor::from_slice(gpu, &[n], &vec![2.0f32; n])?;
        let c = DeviceTensor::zeros(gpu, DType::Float32, &[n])?;
        kernel.launch(&[&a, &b, &c])?;
        gpu.synchronize()
    };
    cycle()?; // first-use costs (lazy driver state) are not leaks
    gpu.synchronize()?;
    let before = gpu.free_memory()?;
    let t0 = Instant::now();
    for _ in 0..LEAK_CYCLES {
        cycle()?;
    }
    gpu.synchronize()?;
    let after = gpu.free_memory()?;
    let diff = before as i64 - after as i64;
    report.check(
        "leak check",
        before == after,
        &format!(
            "{LEAK_CYCLES} load-launch-drop cycles in {:.2} s: free {before} B before, {after} B \
             after (lost {diff} B)",
            t0.elapsed().as_secs_f64()
        ),
    );
    Ok(())
}

fn cublas_gemm(report: &mut Report, gpu: &Gpu, rng: &mut Rng) -> Result<(), RuntimeError> {
    let (m, n, k) = (GEMM, GEMM, GEMM);
    let a: Vec<f16> = (0..m * k).map(|_| f16::from_f32(rng.unit())).collect();
    let b: Vec<f16> = (0..k * n).map(|_| f16::from_f32(rng.unit())).collect();
    let da = DeviceTensor::from_slice(gpu, &[m, k], &a)?;
    let db = DeviceTensor::from_slice(gpu, &[k, n], &b)?;
    let dc = DeviceTensor::zeros(gpu, DType::Float16, &[m, n])?;
    let blas = Cublas::new(gpu)?;
    blas.gemm_f16(&da, &db, &dc, m, n, k)?;
    let c = dc.to_vec::<f16>()?;
    // Spot-check entries against an f32 CPU dot product (row-major C = A·B).
    let mut worst = 0.0f32;
    let mut bad = 0;
    for _ in 0..64 {
        let i = (rng.next_u64() % m as u64) as usize;
        let j = (rng.next_u64() % n as u64) as usize;
        let want: f32 = (0..k)
            .map(|p| a[i * k + p].to_f32() * b[p * n + j].to_f32())
            .sum();
        let got = c[i * n + j].to_f32();
        let err = (got - want).abs();
        worst = worst.max(err);
        if err > 0.05 + 0.01 * want.abs() {
            bad += 1;
        }
    }
    report.check(
        "cublas check",
        bad == 0,
        &format!("{m}x{n}x{k} f16: 64 entries vs CPU, max |err| {worst:.4}"),
    );
    let times = blas.time_gemm_f16(&da, &db, &dc, (m, n, k), 10, 50)?;
    let ms = median(&times).unwrap_or(f32::NAN);
    report.check(
        "cublas time",
        ms.is_finite() && ms > 0.0,
        &format!(
            "{m}x{n}x{k} f16 (f32 accumulate): median {ms:.4} ms = {:.1} TFLOP/s",
            gemm_tflops(m, n, k, ms)
        ),
    );
    Ok(())
}

fn gib(bytes: usize) -> f64 {
    bytes as f64 / (1u64 << 30) as f64
}
