//! Times a tlc-compiled kernel against a device-to-device copy of the same traffic, in one
//! process: `bench_ptx KERNEL.ptx [NAME=VALUE]...` (values bind the manifest's symbolic dims).
//!
//! Every parameter is filled with random data (floats uniform in [-1, 1), never zeros), the
//! kernel is timed with CUDA events (10 warm-up runs, median of 100), and the bytes it moves
//! are counted as every parameter read or written once. The copy moves the largest
//! parameter's bytes (read + write), timed the same way; the report gives both in GB/s and
//! their ratio.

use std::process::ExitCode;
use tlc_runtime::timing::time_ms;
use tlc_runtime::{median, DType, DeviceTensor, Dims, Gpu, RuntimeError};

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench_ptx: error: {e}");
            ExitCode::from(1)
        }
    }
}

fn run() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .ok_or("usage: bench_ptx KERNEL.ptx [NAME=VALUE]...")?;
    let mut pairs = Vec::new();
    for a in args {
        let (k, v) = a
            .split_once('=')
            .ok_or(format!("`{a}`: expected NAME=VALUE"))?;
        let v: i64 = v.parse().map_err(|_| format!("`{a}`: not an integer"))?;
        pairs.push((k.to_string(), v));
    }
    let ptx = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
    let gpu = Gpu::new(0).map_err(|e| e.to_string())?;
    let kernel = gpu.load(&ptx).map_err(|e| e.to_string())?;
    let dims = Dims::from_pairs(pairs);
    let mut tensors = Vec::new();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for param in &kernel.manifest().params {
        let shape = param
            .shape
            .iter()
            .map(|d| dims.eval(d).map(|v| v as usize))
            .collect::<Result<Vec<usize>, RuntimeError>>()
            .map_err(|e| format!("parameter `{}`: {e}", param.name))?;
        tensors
            .push(random_tensor(&gpu, param.dtype, &shape, &mut seed).map_err(|e| e.to_string())?);
    }
    let args: Vec<&DeviceTensor> = tensors.iter().collect();
    let times = kernel.time(&args, 10, 100).map_err(|e| e.to_string())?;
    let ms = median(&times).unwrap_or(f32::NAN);
    let bytes: usize = tensors.iter().map(DeviceTensor::num_bytes).sum();
    let gbs = bytes as f64 / (f64::from(ms) * 1e-3) / 1e9;

    let largest = tensors
        .iter()
        .max_by_key(|t| t.num_bytes())
        .ok_or("the kernel has no parameters")?;
    let mut dst =
        DeviceTensor::zeros(&gpu, largest.dtype(), largest.shape()).map_err(|e| e.to_string())?;
    let copy_times =
        time_ms(&gpu, 10, 100, || dst.copy_from(largest)).map_err(|e| e.to_string())?;
    let copy_ms = median(&copy_times).unwrap_or(f32::NAN);
    let copy_gbs = 2.0 * largest.num_bytes() as f64 / (f64::from(copy_ms) * 1e-3) / 1e9;
    println!(
        "{}: {} on {}: median {ms:.4} ms, {gbs:.0} GB/s; d2d copy {copy_gbs:.0} GB/s; ratio {:.2}",
        kernel.manifest().entries(),
        path,
        gpu.name(),
        gbs / copy_gbs
    );
    Ok(())
}

/// Random contents: floats uniform in [-1, 1), integers and bools from random bytes.
fn random_tensor(
    gpu: &Gpu,
    dtype: DType,
    shape: &[usize],
    seed: &mut u64,
) -> Result<DeviceTensor, RuntimeError> {
    let n: usize = shape.iter().product();
    let mut unit = || {
        *seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((*seed >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    };
    match dtype {
        DType::Float32 => {
            DeviceTensor::from_slice(gpu, shape, &(0..n).map(|_| unit()).collect::<Vec<f32>>())
        }
        DType::Float16 => DeviceTensor::from_slice(
            gpu,
            shape,
            &(0..n)
                .map(|_| half::f16::from_f32(unit()))
                .collect::<Vec<half::f16>>(),
        ),
        DType::BFloat16 => DeviceTensor::from_slice(
            gpu,
            shape,
            &(0..n)
                .map(|_| half::bf16::from_f32(unit()))
                .collect::<Vec<half::bf16>>(),
        ),
        _ => {
            let bytes = (0..n * dtype.bytes() as usize)
                .map(|_| (unit() * 127.0) as i8 as u8 & 1)
                .collect::<Vec<u8>>();
            DeviceTensor::from_bytes(gpu, dtype, shape, &bytes)
        }
    }
}
