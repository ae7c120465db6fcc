//! The cuBLAS reference GEMMs: row-major `C = A·B` with f16 inputs and f32 accumulation
//! (`cublasGemmEx`), and its timing, so tlc's kernels are measured against cuBLAS in the same
//! process; and row-major `C = A·Bᵀ` all in float32 (`CUBLAS_COMPUTE_32F_PEDANTIC`: no TF32,
//! no reduced-precision shortcuts), the reference of the FP8 bench's dequantized operands.
//!
//! cuBLAS is column-major. A row-major M×N matrix is the column-major N×M matrix of its
//! transpose, so row-major `C = A·B` is column-major `Cᵀ = Bᵀ·Aᵀ`: call the column-major GEMM
//! with the operands swapped, dimensions (n, m, k), and leading dimensions n, k, n.

use crate::buffer::DeviceTensor;
use crate::device::Gpu;
use crate::driver::cublas_available;
use crate::error::{Result, RuntimeError};
use crate::timing::time_ms;
use cudarc::cublas::result as blas;
use cudarc::cublas::sys::{self as blas_sys, cublasComputeType_t, cublasOperation_t, cudaDataType};
use std::ffi::c_void;
use tlc_ir::DType;

/// A cuBLAS handle bound to a GPU's default stream; destroyed on drop.
#[derive(Debug)]
pub struct Cublas {
    gpu: Gpu,
    handle: blas_sys::cublasHandle_t,
}

impl Drop for Cublas {
    fn drop(&mut self) {
        if self.gpu.bind().is_ok() {
            // SAFETY: created in `Cublas::new`, destroyed only here.
            let _ = unsafe { blas::destroy_handle(self.handle) };
        }
    }
}

fn cublas_err(call: &str) -> impl Fn(blas::CublasError) -> RuntimeError + '_ {
    move |e| RuntimeError::Cublas(format!("{call} failed: {:?}", e.0))
}

/// Checks the operands of `C[m,n] = A[m,k]·B[k,n]`: A and B float16, C float16 or float32,
/// shapes as stated, every size in 1..=i32::MAX.
pub fn check_gemm_operands(
    a: (DType, &[usize]),
    b: (DType, &[usize]),
    c: (DType, &[usize]),
    m: usize,
    n: usize,
    k: usize,
) -> Result<()> {
    for (what, v) in [("m", m), ("n", n), ("k", k)] {
        if v == 0 || i32::try_from(v).is_err() {
            return Err(RuntimeError::Cublas(format!(
                "{what} = {v} must lie in 1..={}",
                i32::MAX
            )));
        }
    }
    let operands = [
        ("A", a, [m, k], &[DType::Float16][..]),
        ("B", b, [k, n], &[DType::Float16][..]),
        ("C", c, [m, n], &[DType::Float16, DType::Float32][..]),
    ];
    for (name, (dtype, shape), want, dtypes) in operands {
        if !dtypes.contains(&dtype) {
            let names: Vec<&str> = dtypes.iter().map(|d| d.name()).collect();
            return Err(RuntimeError::Cublas(format!(
                "{name} is {dtype}; expected {}",
                names.join(" or ")
            )));
        }
        if shape != want {
            return Err(RuntimeError::Cublas(format!(
                "{name} has shape {shape:?}; expected {want:?}"
            )));
        }
    }
    Ok(())
}

impl Cublas {
    /// Creates a handle on `gpu`'s default stream. Without libcublas: `RuntimeError::NoCublas`.
    pub fn new(gpu: &Gpu) -> Result<Cublas> {
        if !cublas_available() {
            return Err(RuntimeError::NoCublas);
        }
        gpu.bind()?;
        let handle = std::panic::catch_unwind(blas::create_handle)
            .map_err(|_| RuntimeError::NoCublas)?
            .map_err(cublas_err("cublasCreate"))?;
        let cublas = Cublas {
            gpu: gpu.clone(),
            handle,
        };
        // SAFETY: the handle is live and the stream belongs to the current context.
        unsafe { blas::set_stream(handle, gpu.stream().cu_stream() as _) }
            .map_err(cublas_err("cublasSetStream"))?;
        Ok(cublas)
    }

    /// Operands must live in the handle's GPU context.
    fn on_this_gpu(&self, tensors: &[&DeviceTensor]) -> Result<()> {
        if tensors.iter().all(|t| t.gpu().same_context(&self.gpu)) {
            Ok(())
        } else {
            Err(RuntimeError::Cublas(
                "operands live on a different GPU than the cuBLAS handle".into(),
            ))
        }
    }

    /// Row-major `C[m,n] = A[m,k]·B[k,n]`, f16 inputs, f32 accumulation, C in f16 or f32.
    pub fn gemm_f16(
        &self,
        a: &DeviceTensor,
        b: &DeviceTensor,
        c: &DeviceTensor,
        m: usize,
        n: usize,
        k: usize,
    ) -> Result<()> {
        check_gemm_operands(
            (a.dtype(), a.shape()),
            (b.dtype(), b.shape()),
            (c.dtype(), c.shape()),
            m,
            n,
            k,
        )?;
        self.on_this_gpu(&[a, b, c])?;
        // check_gemm_operands bounded m, n, k by i32::MAX.
        let (m, n, k) = (m as i32, n as i32, k as i32);
        let c_type = if c.dtype() == DType::Float32 {
            cudaDataType::CUDA_R_32F
        } else {
            cudaDataType::CUDA_R_16F
        };
        self.gemm_ex(
            (cublasOperation_t::CUBLAS_OP_N, cudaDataType::CUDA_R_16F),
            (a, b, c, c_type),
            (m, n, k),
            (n, k, n),
            cublasComputeType_t::CUBLAS_COMPUTE_32F,
        )
    }

    /// Times `gemm_f16` like `Kernel::time`: milliseconds of each timed run.
    pub fn time_gemm_f16(
        &self,
        a: &DeviceTensor,
        b: &DeviceTensor,
        c: &DeviceTensor,
        (m, n, k): (usize, usize, usize),
        warmup: usize,
        iters: usize,
    ) -> Result<Vec<f32>> {
        time_ms(&self.gpu, warmup, iters, || self.gemm_f16(a, b, c, m, n, k))
    }
}

/// Checks the operands of the float32 `C[m,n] = A[m,k]·B[n,k]ᵀ`: all three float32, shapes
/// as stated, every size in 1..=i32::MAX.
pub fn check_gemm_nt_f32_operands(
    a: (DType, &[usize]),
    b: (DType, &[usize]),
    c: (DType, &[usize]),
    m: usize,
    n: usize,
    k: usize,
) -> Result<()> {
    for (what, v) in [("m", m), ("n", n), ("k", k)] {
        if v == 0 || i32::try_from(v).is_err() {
            return Err(RuntimeError::Cublas(format!(
                "{what} = {v} must lie in 1..={}",
                i32::MAX
            )));
        }
    }
    for (name, (dtype, shape), want) in [("A", a, [m, k]), ("B", b, [n, k]), ("C", c, [m, n])] {
        if dtype != DType::Float32 {
            return Err(RuntimeError::Cublas(format!(
                "{name} is {dtype}; expected float32"
            )));
        }
        if shape != want {
            return Err(RuntimeError::Cublas(format!(
                "{name} has shape {shape:?}; expected {want:?}"
            )));
        }
    }
    Ok(())
}

impl Cublas {
    /// Row-major float32 `C[m,n] = A[m,k]·B[n,k]ᵀ` (B stored N×K, "NT"), computed in float32
    /// only (`CUBLAS_COMPUTE_32F_PEDANTIC`). Column-major that is `Cᵀ (n×m) = Bᵀ·A` with B
    /// read as the column-major k×n matrix (transposed) and A as the k×m one.
    pub fn gemm_nt_f32(
        &self,
        a: &DeviceTensor,
        b: &DeviceTensor,
        c: &DeviceTensor,
        m: usize,
        n: usize,
        k: usize,
    ) -> Result<()> {
        check_gemm_nt_f32_operands(
            (a.dtype(), a.shape()),
            (b.dtype(), b.shape()),
            (c.dtype(), c.shape()),
            m,
            n,
            k,
        )?;
        self.on_this_gpu(&[a, b, c])?;
        // The check bounded m, n, k by i32::MAX.
        let (m, n, k) = (m as i32, n as i32, k as i32);
        self.gemm_ex(
            (cublasOperation_t::CUBLAS_OP_T, cudaDataType::CUDA_R_32F),
            (a, b, c, cudaDataType::CUDA_R_32F),
            (m, n, k),
            (k, k, n),
            cublasComputeType_t::CUBLAS_COMPUTE_32F_PEDANTIC,
        )
    }

    /// Row-major `C = A·op(B)` as column-major `Cᵀ = op(B)ᵀ·Aᵀ` (module doc): one
    /// `cublasGemmEx` with B first (`op_b`, `ab_type` for A and B), dims `(n, m, k)`, leading
    /// dimensions `(ldb, lda, ldc)`, f32 alpha = 1 and beta = 0. The callers checked shapes,
    /// dtypes and the GPU, and bounded the sizes by i32::MAX.
    fn gemm_ex(
        &self,
        (op_b, ab_type): (cublasOperation_t, cudaDataType),
        (a, b, c, c_type): (&DeviceTensor, &DeviceTensor, &DeviceTensor, cudaDataType),
        (m, n, k): (i32, i32, i32),
        (ldb, lda, ldc): (i32, i32, i32),
        compute: cublasComputeType_t,
    ) -> Result<()> {
        let alpha: f32 = 1.0;
        let beta: f32 = 0.0;
        self.gpu.bind()?;
        // SAFETY: the callers checked shapes and dtypes; the pointers are live allocations of
        // those sizes; alpha/beta are f32 as the 32F compute types require.
        unsafe {
            blas::gemm_ex(
                self.handle,
                op_b,
                cublasOperation_t::CUBLAS_OP_N,
                n,
                m,
                k,
                &alpha as *const f32 as *const c_void,
                b.device_ptr() as *const c_void,
                ab_type,
                ldb,
                a.device_ptr() as *const c_void,
                ab_type,
                lda,
                &beta as *const f32 as *const c_void,
                c.device_ptr() as *mut c_void,
                c_type,
                ldc,
                compute,
                blas_sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        }
        .map_err(cublas_err("cublasGemmEx"))
    }
}

/// One-shot row-major `C = A·B` (f16 in, f32 accumulation) through a fresh cuBLAS handle.
pub fn cublas_gemm_f16(
    gpu: &Gpu,
    a: &DeviceTensor,
    b: &DeviceTensor,
    c: &DeviceTensor,
    m: usize,
    n: usize,
    k: usize,
) -> Result<()> {
    Cublas::new(gpu)?.gemm_f16(a, b, c, m, n, k)
}

/// TFLOP/s of an `m×n×k` GEMM that took `ms` milliseconds (2·m·n·k flops).
pub fn gemm_tflops(m: usize, n: usize, k: usize, ms: f32) -> f64 {
    2.0 * m as f64 * n as f64 * k as f64 / (f64::from(ms) * 1e-3) / 1e12
}
