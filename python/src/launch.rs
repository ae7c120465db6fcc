//! `Loaded`: a compiled kernel loaded on a GPU, launched on tensors another library owns
//! (PyTorch, CuPy), given by device address (`tlc_runtime::Kernel::launch_raw`, whose
//! checks name the parameter). Nothing here touches CUDA until a `Loaded` is made, so the
//! package imports and compiles on machines without a driver.

use crate::errors::launch_error;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use tlc_ir::DType;
use tlc_runtime::{check_raw_args, Dims, Gpu, Kernel, RawArg};

/// One tensor argument from Python: device address, dtype name, shape, element strides
/// (`None` when contiguous).
type PyArg = (u64, String, Vec<usize>, Option<Vec<i64>>);

/// A kernel loaded on one GPU (its module unloaded when this is collected).
#[pyclass(frozen, module = "tlc._tlc")]
pub struct Loaded {
    kernel: Kernel,
}

#[pymethods]
impl Loaded {
    /// Loads `ptx` (with its manifest line) on GPU `ordinal` (its primary context, the one
    /// PyTorch uses).
    #[new]
    fn new(py: Python<'_>, ptx: &str, ordinal: usize) -> PyResult<Loaded> {
        let kernel = py
            .detach(|| Gpu::new(ordinal).and_then(|gpu| gpu.load(ptx)))
            .map_err(launch_error)?;
        Ok(Loaded { kernel })
    }

    /// The GPU's name, e.g. "NVIDIA H100 80GB HBM3".
    #[getter]
    fn device_name(&self) -> String {
        self.kernel.gpu().name().to_string()
    }

    /// Launches every entry of the kernel on `args` (one per parameter, in order) on
    /// `stream` (a raw `CUstream`, e.g. `torch.cuda.current_stream().cuda_stream`), without
    /// waiting. `dims` given by name must equal what the shapes bind (checked before the
    /// launch). Returns the symbolic dims the shapes bound, as (name, value) pairs.
    fn launch(
        &self,
        args: Vec<PyArg>,
        stream: u64,
        dims: Vec<(String, i64)>,
    ) -> PyResult<Vec<(String, i64)>> {
        let params = &self.kernel.manifest().params;
        let mut dtypes = Vec::with_capacity(args.len());
        for (i, (_, name, _, _)) in args.iter().enumerate() {
            let dtype = DType::parse(name).ok_or_else(|| {
                let param = params.get(i).map_or("?", |p| p.name.as_str());
                PyValueError::new_err(format!(
                    "parameter `{param}`: tlc has no dtype `{name}` (argument {i})"
                ))
            })?;
            dtypes.push(dtype);
        }
        let raw: Vec<RawArg> = args
            .iter()
            .zip(&dtypes)
            .map(|((ptr, _, shape, strides), &dtype)| RawArg {
                ptr: *ptr,
                dtype,
                shape,
                strides: strides.as_deref(),
            })
            .collect();
        if !dims.is_empty() {
            let plan = check_raw_args(self.kernel.manifest(), &raw).map_err(launch_error)?;
            check_dims(&plan.dims, &dims)?;
        }
        let plan = self.kernel.launch_raw(&raw, stream).map_err(launch_error)?;
        Ok(plan.dims.iter().map(|(n, v)| (n.to_string(), v)).collect())
    }
}

/// Each dim given by name must be one the shapes bound, to the same value.
fn check_dims(bound: &Dims, given: &[(String, i64)]) -> PyResult<()> {
    for (name, value) in given {
        match bound.get(name) {
            Some(b) if b == *value => {}
            Some(b) => {
                return Err(PyValueError::new_err(format!(
                    "dim `{name}` = {value} was given but the tensors' shapes bind {name} = {b}"
                )))
            }
            None => {
                let names: Vec<&str> = bound.iter().map(|(n, _)| n).collect();
                return Err(PyValueError::new_err(format!(
                    "the kernel has no symbolic dim `{name}` (its dims: {})",
                    if names.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(", ")
                    }
                )));
            }
        }
    }
    Ok(())
}

/// Whether the CUDA driver library can be opened (no GPU is touched).
#[pyfunction]
pub fn driver_available() -> bool {
    tlc_runtime::driver_available()
}
