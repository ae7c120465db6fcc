//! `Gpu`: one CUDA device (its primary context and default stream), the handle everything
//! else hangs off. Opening it on a machine without a driver or GPU returns an error.

use crate::driver::{driver_available, driver_err};
use crate::error::{Result, RuntimeError};
use crate::kernel::Kernel;
use cudarc::driver::sys::{CUdevice_attribute, CUresult};
use cudarc::driver::{result, CudaContext, CudaStream};
use std::sync::Arc;

/// A GPU. Cloning is cheap and shares the context; tensors and kernels keep it alive.
#[derive(Clone, Debug)]
pub struct Gpu {
    inner: Arc<GpuInner>,
}

#[derive(Debug)]
struct GpuInner {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    name: String,
    capability: (i32, i32),
    max_shared_optin: u32,
    sm_count: u32,
    driver_version: i32,
}

/// What a GPU is, as [`Gpu::info`] reads it without opening the GPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// E.g. "NVIDIA H100 80GB HBM3" (as [`Gpu::name`]).
    pub name: String,
    /// Compute capability (major, minor).
    pub capability: (i32, i32),
    /// Streaming multiprocessors (as [`Gpu::sm_count`]).
    pub sm_count: u32,
    /// The CUDA driver's version, as `cuDriverGetVersion` gives it (13000 for 13.0).
    pub driver_version: i32,
}

/// `cuDriverGetVersion` (the driver is initialized).
fn driver_version() -> Result<i32> {
    let mut version: std::ffi::c_int = 0;
    // SAFETY: a plain out-parameter call into the loaded driver.
    let status = unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut version) };
    if status != CUresult::CUDA_SUCCESS {
        return Err(driver_err("cuDriverGetVersion")(result::DriverError(
            status,
        )));
    }
    Ok(version)
}

/// Runs `f` (a driver call sequence) only when a driver is loadable, and turns cudarc's
/// panic on a driver that lacks a symbol it binds (one older than the `cuda-13000`
/// bindings) into an error. Never panics.
fn guarded<T>(f: impl FnOnce() -> Result<T> + std::panic::UnwindSafe) -> Result<T> {
    if !driver_available() {
        return Err(RuntimeError::NoDriver);
    }
    std::panic::catch_unwind(f).unwrap_or_else(|_| {
        Err(RuntimeError::Driver {
            call: "dlsym",
            code: "missing symbol".into(),
            message: "the CUDA driver lacks a function this runtime needs; it is probably older \
                      than CUDA 13.0"
                .into(),
        })
    })
}

/// `cuInit`, then checks that GPU `ordinal` exists; the number of GPUs.
fn init_with(ordinal: usize) -> Result<usize> {
    match result::init() {
        Ok(()) => {}
        Err(e) if e.0 == CUresult::CUDA_ERROR_NO_DEVICE => {
            return Err(RuntimeError::NoDevice { ordinal, count: 0 })
        }
        Err(e) => return Err(driver_err("cuInit")(e)),
    }
    let count = result::device::get_count().map_err(driver_err("cuDeviceGetCount"))?;
    let count = usize::try_from(count).unwrap_or(0);
    if ordinal >= count {
        return Err(RuntimeError::NoDevice { ordinal, count });
    }
    Ok(count)
}

impl Gpu {
    /// Opens GPU `ordinal`. Without a driver: `RuntimeError::NoDriver`; without that GPU:
    /// `RuntimeError::NoDevice`. Never panics.
    pub fn new(ordinal: usize) -> Result<Gpu> {
        guarded(|| Gpu::open(ordinal))
    }

    fn open(ordinal: usize) -> Result<Gpu> {
        init_with(ordinal)?;
        let ctx = CudaContext::new(ordinal).map_err(driver_err("cuDevicePrimaryCtxRetain"))?;
        let stream = ctx.default_stream();
        let name = ctx.name().map_err(driver_err("cuDeviceGetName"))?;
        let capability = ctx
            .compute_capability()
            .map_err(driver_err("cuDeviceGetAttribute"))?;
        let optin = ctx
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
            .map_err(driver_err("cuDeviceGetAttribute"))?;
        let sms = ctx
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(driver_err("cuDeviceGetAttribute"))?;
        Ok(Gpu {
            inner: Arc::new(GpuInner {
                ctx,
                stream,
                name,
                capability,
                max_shared_optin: u32::try_from(optin).unwrap_or(0),
                sm_count: u32::try_from(sms).unwrap_or(0),
                driver_version: driver_version()?,
            }),
        })
    }

    /// What GPU `ordinal` is (name, compute capability, SMs) without opening it: no context
    /// is created, so this costs the driver's initialization only. For callers that want to
    /// know the device before (or instead of) running on it, such as the tuning cache's key.
    /// Errors as [`Gpu::new`]'s; never panics.
    pub fn info(ordinal: usize) -> Result<DeviceInfo> {
        guarded(|| Gpu::query(ordinal))
    }

    fn query(ordinal: usize) -> Result<DeviceInfo> {
        let count = init_with(ordinal)?;
        let Some(index) = i32::try_from(ordinal).ok() else {
            return Err(RuntimeError::NoDevice { ordinal, count });
        };
        let dev = result::device::get(index).map_err(driver_err("cuDeviceGet"))?;
        let name = result::device::get_name(dev).map_err(driver_err("cuDeviceGetName"))?;
        let attribute = |a| {
            // SAFETY: `dev` came from `cuDeviceGet` above.
            unsafe { result::device::get_attribute(dev, a) }
                .map_err(driver_err("cuDeviceGetAttribute"))
        };
        let major = attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
        let minor = attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
        let sms = attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
        Ok(DeviceInfo {
            name,
            capability: (major, minor),
            sm_count: u32::try_from(sms).unwrap_or(0),
            driver_version: driver_version()?,
        })
    }

    /// The number of GPUs the driver sees (0 without a driver).
    pub fn count() -> usize {
        if !driver_available() {
            return 0;
        }
        std::panic::catch_unwind(|| {
            result::init()
                .and_then(|()| result::device::get_count())
                .map_or(0, |c| usize::try_from(c).unwrap_or(0))
        })
        .unwrap_or(0)
    }

    pub fn ordinal(&self) -> usize {
        self.inner.ctx.ordinal()
    }

    /// The device name, e.g. "NVIDIA H100 80GB HBM3".
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Compute capability (major, minor), e.g. (9, 0).
    pub fn capability(&self) -> (i32, i32) {
        self.inner.capability
    }

    /// Most dynamic shared memory one block may opt in to, in bytes.
    pub fn max_shared_optin(&self) -> u32 {
        self.inner.max_shared_optin
    }

    /// Streaming multiprocessors (132 on an H100 SXM).
    pub fn sm_count(&self) -> u32 {
        self.inner.sm_count
    }

    /// The CUDA driver's version (`cuDriverGetVersion`: 13000 for 13.0).
    pub fn driver_version(&self) -> i32 {
        self.inner.driver_version
    }

    /// Loads a tlc kernel (PTX with its `// tlc-manifest:` line) from memory.
    pub fn load(&self, ptx: &str) -> Result<Kernel> {
        Kernel::load(self, ptx)
    }

    /// Loads ptxas's `cubin` of a tlc kernel's `ptx` (`Kernel::load_assembled`).
    pub fn load_assembled(&self, ptx: &str, cubin: &[u8]) -> Result<Kernel> {
        Kernel::load_assembled(self, ptx, cubin)
    }

    /// (free, total) device memory in bytes (`cuMemGetInfo`).
    pub fn memory_info(&self) -> Result<(usize, usize)> {
        self.bind()?;
        result::mem_get_info().map_err(driver_err("cuMemGetInfo"))
    }

    /// Free device memory in bytes; compare before and after a workload to find leaks.
    pub fn free_memory(&self) -> Result<usize> {
        self.memory_info().map(|(free, _)| free)
    }

    /// Waits for all work on the GPU; reports errors of earlier asynchronous launches.
    pub fn synchronize(&self) -> Result<()> {
        self.inner
            .stream
            .synchronize()
            .map_err(driver_err("cuStreamSynchronize"))
    }

    /// Makes this GPU's context current on the calling thread (before raw driver calls).
    pub(crate) fn bind(&self) -> Result<()> {
        self.inner
            .ctx
            .bind_to_thread()
            .map_err(driver_err("cuCtxSetCurrent"))
    }

    pub(crate) fn context(&self) -> &Arc<CudaContext> {
        &self.inner.ctx
    }

    pub(crate) fn stream(&self) -> &Arc<CudaStream> {
        &self.inner.stream
    }

    /// Whether two handles share one context (tensors must live where the kernel runs).
    pub(crate) fn same_context(&self, other: &Gpu) -> bool {
        self.inner.ctx.cu_ctx() == other.inner.ctx.cu_ctx()
    }
}
