//! The boundary to cudarc: whether the driver library exists, and turning `DriverError`s into
//! `RuntimeError`s that name the failed call.
//!
//! cudarc 0.19 with `dynamic-loading` opens `libcuda.so` lazily on the first driver call and
//! PANICS when it cannot ("Unable to dynamically load the \"cuda\" shared library"); a symbol
//! missing from an old driver panics too. So the runtime asks
//! `cudarc::driver::sys::is_culib_present()` before its first call and returns
//! `RuntimeError::NoDriver` instead.

use crate::error::RuntimeError;
use cudarc::driver::result::DriverError;
use cudarc::driver::sys;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once the host process has begun to exit (`process_exiting`).
static EXITING: AtomicBool = AtomicBool::new(false);

/// Marks the process as exiting: from now on, dropping a module or a device buffer leaves
/// it to the driver's own teardown at process exit instead of unloading / freeing it. The
/// libraries beside tlc in the process may already have torn down by the time the host
/// language destroys tlc's objects: with torch's profiler (CUPTI) active, a module unloaded
/// then corrupted the heap (`double free or corruption` at exit, H200, 2026-12-01). The
/// Python package calls this from an exit hook.
pub fn process_exiting() {
    EXITING.store(true, Ordering::SeqCst);
}

/// Whether [`process_exiting`] was called.
pub fn is_exiting() -> bool {
    EXITING.load(Ordering::SeqCst)
}

/// Whether the CUDA driver library (`libcuda.so`) can be opened on this machine.
pub fn driver_available() -> bool {
    // SAFETY: only tries to dlopen the library names cudarc knows; no CUDA call is made.
    unsafe { sys::is_culib_present() }
}

/// Whether the cuBLAS library (`libcublas.so`) can be opened.
pub fn cublas_available() -> bool {
    // SAFETY: as above, a dlopen attempt only.
    unsafe { cudarc::cublas::sys::is_culib_present() }
}

/// Whether the cuBLASLt library (`libcublasLt.so`) can be opened.
pub fn cublaslt_available() -> bool {
    // SAFETY: as above, a dlopen attempt only.
    unsafe { cudarc::cublaslt::sys::is_culib_present() }
}

/// `CUDA_ERROR_...` name of a driver error.
pub(crate) fn error_name(e: &DriverError) -> String {
    e.error_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|_| format!("{:?}", e.0))
}

/// Maps a failed driver call to a `RuntimeError` naming the call.
pub(crate) fn driver_err(call: &'static str) -> impl Fn(DriverError) -> RuntimeError {
    move |e| RuntimeError::Driver {
        call,
        code: error_name(&e),
        message: e
            .error_string()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|_| "no description".to_string()),
    }
}
