//! Cooperative launches: a kernel with grid barriers (`T.sync_grid()`, the manifest's
//! `cooperative`) waits, at each barrier, for every block of its grid, so every block must
//! be resident on the GPU at once — a block that never got an SM would never arrive, and
//! the others would wait forever. Before launching, the grid is checked against what the
//! GPU holds at once (`cuOccupancyMaxActiveBlocksPerMultiprocessor` for the entry's block
//! and shared memory, times the SMs); then `cuLaunchCooperativeKernel` launches it (the
//! driver refuses, rather than hangs, a grid it cannot keep resident).

use crate::check::KernelPlan;
use crate::device::Gpu;
use crate::driver::{driver_err, error_name};
use crate::error::{Result, RuntimeError};
use cudarc::driver::result::DriverError;
use cudarc::driver::sys::{self, CUresult};
use std::ffi::c_void;

/// Refuses a launch of `k` (entry `func`) whose grid cannot be resident at once on `gpu`.
pub(crate) fn check_resident(gpu: &Gpu, func: sys::CUfunction, k: &KernelPlan) -> Result<()> {
    let threads: u32 = k.block.iter().product();
    let mut per_sm: std::ffi::c_int = 0;
    gpu.bind()?;
    // SAFETY: `func` belongs to a live module of this context (bound above); a plain
    // out-parameter call.
    let status = unsafe {
        sys::cuOccupancyMaxActiveBlocksPerMultiprocessor(
            &mut per_sm,
            func,
            i32::try_from(threads).unwrap_or(i32::MAX),
            k.shared_bytes as usize,
        )
    };
    if status != CUresult::CUDA_SUCCESS {
        return Err(driver_err("cuOccupancyMaxActiveBlocksPerMultiprocessor")(
            DriverError(status),
        ));
    }
    let per_sm = u64::try_from(per_sm).unwrap_or(0);
    let sms = u64::from(gpu.sm_count());
    let possible = per_sm * sms;
    let needed: u64 = k.grid.iter().map(|&g| u64::from(g)).product();
    if needed > possible {
        return Err(RuntimeError::LaunchConfig(format!(
            "kernel `{}` synchronizes its whole grid (`T.sync_grid()`), so its {needed} blocks \
             must be resident at once; {} holds at most {possible} ({per_sm} per SM with \
             {threads} threads and {} bytes of shared memory per block, {sms} SMs): give it \
             at most {possible} blocks",
            k.entry,
            gpu.name(),
            k.shared_bytes
        )));
    }
    Ok(())
}

/// `cuLaunchCooperativeKernel` of `k` on `stream` with the parameter pointers `params`.
///
/// # Safety
/// As `cuLaunchKernel`: `params` holds one valid pointer per parameter the entry declares,
/// each to a value of its size, alive for the call.
pub(crate) unsafe fn launch(
    func: sys::CUfunction,
    k: &KernelPlan,
    stream: sys::CUstream,
    params: &mut [*mut c_void],
) -> Result<()> {
    let [gx, gy, gz] = k.grid;
    let [bx, by, bz] = k.block;
    // SAFETY: the caller's promise on `params`; `func` and `stream` are live.
    let status = unsafe {
        sys::cuLaunchCooperativeKernel(
            func,
            gx,
            gy,
            gz,
            bx,
            by,
            bz,
            k.shared_bytes,
            stream,
            params.as_mut_ptr(),
        )
    };
    if status != CUresult::CUDA_SUCCESS {
        return Err(RuntimeError::Driver {
            call: "cuLaunchCooperativeKernel",
            code: error_name(&DriverError(status)),
            message: format!(
                "launching `{}` with grid {:?}, block {:?}, {} bytes of shared memory",
                k.entry, k.grid, k.block, k.shared_bytes
            ),
        });
    }
    Ok(())
}
