//! GPU check of TMA tensor maps (needs an sm_90 GPU), no arguments: loads the hand-written
//! `tma_copy.ptx` (a version 3 manifest with one tensor map), copies a 50 × 64 float16
//! tensor into a 64 × 64 one box by box through `cp.async.bulk.tensor`, and checks every
//! element (rows past 50 must be the map's zero fill), that a relaunch reuses the cached
//! map, and that a tensor TMA cannot describe is refused with a message naming it.
//! Prints `result PASS` (exit 0) or `result FAIL` (exit 1).
//!
//! Build: `cargo build --example tma_smoke -p tlc-runtime`

use half::f16;
use std::process::ExitCode;
use tlc_runtime::{encode_args, DType, DeviceTensor, Gpu, RuntimeError};

const PTX: &str = include_str!("tma_copy.ptx");

fn main() -> ExitCode {
    match run() {
        Ok(true) => {
            println!("result PASS");
            ExitCode::SUCCESS
        }
        Ok(false) => {
            println!("result FAIL");
            ExitCode::FAILURE
        }
        Err(e) => {
            println!("result FAIL ({e})");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<bool, RuntimeError> {
    let gpu = Gpu::new(0)?;
    println!("device  {} {:?}", gpu.name(), gpu.capability());
    let kernel = gpu.load(PTX)?;
    let host_a: Vec<f16> = (0..50 * 64)
        .map(|i| f16::from_f32(i as f32 * 0.25))
        .collect();
    let a = DeviceTensor::from_slice(&gpu, &[50, 64], &host_a)?;
    let b = DeviceTensor::from_slice(&gpu, &[64, 64], &vec![f16::NAN; 64 * 64])?;
    let mut ok = true;
    for launch in 0..2 {
        kernel.launch(&[&a, &b])?;
        let out: Vec<f16> = b.to_vec()?;
        let bad = (0..64 * 64)
            .filter(|&i| {
                let want = host_a.get(i).copied().unwrap_or(f16::ZERO);
                out.get(i).map(|o| o.to_bits()) != Some(want.to_bits())
            })
            .count();
        println!("launch {launch}  {bad} of 4096 elements differ");
        ok &= bad == 0;
    }
    let encodes = kernel.tensor_map_cache().encodes();
    println!("encodes {encodes} (two launches, one map)");
    ok &= encodes == 1;
    // A (1000, 1023) float16 tensor has 2046-byte rows: not encodable.
    let refused = encode_args(
        &kernel.manifest().tensor_maps[0],
        DType::Float16,
        &[1000, 1023],
        a.device_ptr(),
    );
    println!("refused {refused:?}");
    ok &= matches!(refused, Err(RuntimeError::TensorMap { .. }));
    Ok(ok)
}
