//! `tlc-runtime`: loads the PTX `tlc compile` writes and launches it through the CUDA driver
//! (cudarc, loaded at run time), checking every argument against the kernel's launch
//! manifest first. On a machine without a driver or GPU every entry point returns a
//! `RuntimeError`; the CPU-side logic (manifest, dim expressions, argument checks) is pure and
//! tested without a GPU. See `docs/runtime.md` and `docs/manifest.md`.
//!
//! ```no_run
//! use tlc_runtime::{DeviceTensor, Gpu};
//! # fn main() -> Result<(), tlc_runtime::RuntimeError> {
//! let gpu = Gpu::new(0)?;
//! let kernel = gpu.load(include_str!("../examples/vadd.ptx"))?;
//! let a = DeviceTensor::from_slice(&gpu, &[3], &[1.0f32, 2.0, 3.0])?;
//! let b = DeviceTensor::from_slice(&gpu, &[3], &[10.0f32, 20.0, 30.0])?;
//! let c = DeviceTensor::zeros(&gpu, tlc_ir::DType::Float32, &[3])?;
//! kernel.launch(&[&a, &b, &c])?;
//! assert_eq!(c.to_vec::<f32>()?, vec![11.0, 22.0, 33.0]);
//! # Ok(()) }
//! ```

pub mod buffer;
pub mod check;
mod cooperative;
pub mod cublas;
pub mod cublaslt;
pub mod device;
pub mod driver;
pub mod kernel;
pub mod tensor_map;
pub mod timing;

// The manifest, its dim expressions and the error type live in `tlc-abi`, which the
// compiler shares without linking the driver; their paths here are unchanged.
pub use tlc_abi::{error, expr, manifest};

pub use buffer::{DeviceTensor, Element};
pub use check::{
    check_args, check_raw_args, prepare_launch, ArgSpec, KernelPlan, LaunchPlan, PreparedLaunch,
    RawArg,
};
pub use cublas::{cublas_gemm_f16, Cublas};
pub use cublaslt::{CublasLt, Fp8Gemm};
pub use device::{DeviceInfo, Gpu};
pub use driver::{
    cublas_available, cublaslt_available, driver_available, is_exiting, process_exiting,
};
pub use error::RuntimeError;
pub use expr::{DimExpr, Op};
pub use kernel::Kernel;
pub use manifest::{
    Access, DimDecl, Dims, Launch, Manifest, OobFill, Param, Swizzle, TensorMapDesc,
};
pub use tensor_map::{encode_args, map_args, EncodeArgs, TensorMap, TensorMapCache};
pub use timing::median;
pub use tlc_ir::{DType, Target};
