//! `DeviceTensor`: a dtype, a row-major shape and a device allocation, uploaded from host
//! bytes or typed slices, downloaded back, freed on drop.
//!
//! Allocation is the synchronous `cuMemAlloc` / `cuMemFree` pair, not the stream-ordered
//! pool: freed memory goes straight back to the driver, so `Gpu::free_memory` before and
//! after a workload shows leaks instead of a pool's cache.

use crate::device::Gpu;
use crate::driver::driver_err;
use crate::error::{Result, RuntimeError};
use cudarc::driver::{result, sys};
use tlc_ir::DType;

/// A host element type with a tlc dtype. fp8 and bool data go through the byte API.
pub trait Element: Copy + Default + 'static {
    const DTYPE: DType;
}

macro_rules! element {
    ($($t:ty => $d:ident),* $(,)?) => {
        $(impl Element for $t { const DTYPE: DType = DType::$d; })*
    };
}

element! {
    f32 => Float32,
    f64 => Float64,
    half::f16 => Float16,
    half::bf16 => BFloat16,
    i8 => Int8,
    i16 => Int16,
    i32 => Int32,
    i64 => Int64,
    u8 => UInt8,
    u16 => UInt16,
    u32 => UInt32,
}

/// A contiguous row-major tensor in device memory.
#[derive(Debug)]
pub struct DeviceTensor {
    gpu: Gpu,
    dtype: DType,
    shape: Vec<usize>,
    /// 0 for an empty tensor (the driver refuses zero-byte allocations).
    ptr: sys::CUdeviceptr,
    bytes: usize,
}

/// The element count and byte size of a shape, or an error on overflow.
pub fn tensor_bytes(dtype: DType, shape: &[usize]) -> Result<(usize, usize)> {
    let overflow = || {
        RuntimeError::HostBuffer(format!(
            "a {dtype} tensor of shape {shape:?} overflows usize"
        ))
    };
    let len = shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(overflow)?;
    let bytes = len
        .checked_mul(dtype.bytes() as usize)
        .ok_or_else(overflow)?;
    Ok((len, bytes))
}

impl DeviceTensor {
    /// Allocates a tensor filled with zero bytes.
    pub fn zeros(gpu: &Gpu, dtype: DType, shape: &[usize]) -> Result<DeviceTensor> {
        let t = DeviceTensor::alloc(gpu, dtype, shape)?;
        if t.bytes > 0 {
            // SAFETY: `ptr` is a live allocation of `bytes` bytes in this context.
            unsafe { result::memset_d8_sync(t.ptr, 0, t.bytes) }
                .map_err(driver_err("cuMemsetD8"))?;
        }
        Ok(t)
    }

    /// Uploads raw bytes (the element encoding of `dtype`, little-endian, row-major).
    pub fn from_bytes(
        gpu: &Gpu,
        dtype: DType,
        shape: &[usize],
        data: &[u8],
    ) -> Result<DeviceTensor> {
        let mut t = DeviceTensor::alloc(gpu, dtype, shape)?;
        t.upload_bytes(data)?;
        Ok(t)
    }

    /// Uploads a typed slice; its element type fixes the dtype.
    pub fn from_slice<T: Element>(gpu: &Gpu, shape: &[usize], data: &[T]) -> Result<DeviceTensor> {
        let mut t = DeviceTensor::alloc(gpu, T::DTYPE, shape)?;
        t.upload(data)?;
        Ok(t)
    }

    fn alloc(gpu: &Gpu, dtype: DType, shape: &[usize]) -> Result<DeviceTensor> {
        let (_, bytes) = tensor_bytes(dtype, shape)?;
        let ptr = if bytes == 0 {
            0
        } else {
            gpu.bind()?;
            // SAFETY: the context is current; the allocation is freed exactly once, in Drop.
            unsafe { result::malloc_sync(bytes) }.map_err(driver_err("cuMemAlloc"))?
        };
        Ok(DeviceTensor {
            gpu: gpu.clone(),
            dtype,
            shape: shape.to_vec(),
            ptr,
            bytes,
        })
    }

    /// Overwrites the tensor with a typed slice of exactly its size.
    pub fn upload<T: Element>(&mut self, data: &[T]) -> Result<()> {
        self.expect_dtype::<T>("upload")?;
        self.expect_len(data.len(), "upload")?;
        self.copy_in(data)
    }

    /// Overwrites the tensor with raw bytes of exactly its size.
    pub fn upload_bytes(&mut self, data: &[u8]) -> Result<()> {
        if data.len() != self.bytes {
            return Err(RuntimeError::HostBuffer(format!(
                "{} bytes given for a {} tensor of shape {:?}, which holds {} bytes",
                data.len(),
                self.dtype,
                self.shape,
                self.bytes
            )));
        }
        self.copy_in(data)
    }

    fn copy_in<T>(&mut self, data: &[T]) -> Result<()> {
        if self.bytes == 0 {
            return Ok(());
        }
        self.gpu.bind()?;
        // SAFETY: `data` holds exactly `bytes` bytes (checked by the callers) and `ptr` is a
        // live allocation of that size; the copy is synchronous.
        unsafe { result::memcpy_htod_sync(self.ptr, data) }.map_err(driver_err("cuMemcpyHtoD"))
    }

    /// Copies another tensor of the same dtype and shape into this one, on the GPU's default
    /// stream (asynchronous, like a launch). Also the bandwidth reference for kernels.
    pub fn copy_from(&mut self, src: &DeviceTensor) -> Result<()> {
        if src.dtype != self.dtype || src.shape != self.shape {
            return Err(RuntimeError::HostBuffer(format!(
                "cannot copy a {} tensor of shape {:?} into a {} tensor of shape {:?}",
                src.dtype, src.shape, self.dtype, self.shape
            )));
        }
        if !src.gpu.same_context(&self.gpu) {
            return Err(RuntimeError::HostBuffer(
                "device-to-device copy between different GPUs".into(),
            ));
        }
        if self.bytes == 0 {
            return Ok(());
        }
        self.gpu.bind()?;
        // SAFETY: both are live allocations of `bytes` bytes in the current context.
        unsafe {
            result::memcpy_dtod_async(self.ptr, src.ptr, self.bytes, self.gpu.stream().cu_stream())
        }
        .map_err(driver_err("cuMemcpyDtoDAsync"))
    }

    /// Downloads into a typed vector; the element type must match the dtype.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        self.expect_dtype::<T>("download")?;
        let mut out = vec![T::default(); self.len()];
        self.copy_out(&mut out)?;
        Ok(out)
    }

    /// Downloads the raw bytes.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut out = vec![0u8; self.bytes];
        self.copy_out(&mut out)?;
        Ok(out)
    }

    fn copy_out<T>(&self, out: &mut [T]) -> Result<()> {
        if self.bytes == 0 {
            return Ok(());
        }
        self.gpu.bind()?;
        // SAFETY: `out` spans exactly `bytes` bytes; the synchronous copy waits for the
        // kernels launched before it on the default stream.
        unsafe { result::memcpy_dtoh_sync(out, self.ptr) }.map_err(driver_err("cuMemcpyDtoH"))
    }

    fn expect_dtype<T: Element>(&self, what: &str) -> Result<()> {
        if T::DTYPE == self.dtype {
            Ok(())
        } else {
            Err(RuntimeError::HostBuffer(format!(
                "{what} with {} elements for a {} tensor",
                T::DTYPE,
                self.dtype
            )))
        }
    }

    fn expect_len(&self, len: usize, what: &str) -> Result<()> {
        if len == self.len() {
            Ok(())
        } else {
            Err(RuntimeError::HostBuffer(format!(
                "{what} of {len} elements for a tensor of shape {:?} ({} elements)",
                self.shape,
                self.len()
            )))
        }
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.bytes / self.dtype.bytes() as usize
    }

    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }

    pub fn num_bytes(&self) -> usize {
        self.bytes
    }

    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// The raw device address (0 when empty), for passing to other CUDA libraries.
    pub fn device_ptr(&self) -> u64 {
        self.ptr
    }
}

impl Drop for DeviceTensor {
    fn drop(&mut self) {
        // At process exit the driver frees it (`driver::process_exiting`).
        if self.ptr == 0 || crate::driver::is_exiting() {
            return;
        }
        // Errors cannot be returned from drop; a failed free leaves the memory to the
        // context's teardown. Kernels launched on the tensor may still run: wait for them.
        if self.gpu.bind().is_ok() {
            let _ = self.gpu.synchronize();
            // SAFETY: allocated by `malloc_sync` in this context and freed only here.
            let _ = unsafe { result::free_sync(self.ptr) };
        }
    }
}
