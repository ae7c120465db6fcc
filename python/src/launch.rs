//! Launching on tensors another library owns (PyTorch, CuPy), given by device address.
//! `prepare` checks a launch signature once, without a GPU (`tlc_runtime::prepare_launch`:
//! dtypes, shapes, strides, dims given by name; the shapes of outputs the caller will
//! allocate); `Loaded.run` then launches it on addresses, checking only their alignment.
//! The Python side caches one `Prepared` per signature, which keeps a launch cheap. Nothing
//! here touches CUDA until a `Loaded` is made, so the package imports and compiles on
//! machines without a driver.

use crate::errors::launch_error;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use tlc_ir::DType;
use tlc_runtime::{Access, ArgSpec, Gpu, Kernel, Manifest, PreparedLaunch};

/// One tensor argument's signature from Python: dtype name, shape, element strides (`None`
/// when contiguous); `None` for an output to allocate.
type PySpec = Option<(String, Vec<usize>, Option<Vec<i64>>)>;

/// A launch signature checked against the manifest.
#[pyclass(frozen, module = "tlc._tlc")]
pub struct Prepared {
    launch: PreparedLaunch,
    /// Which kernel it was checked for (`ptx_id`): `Loaded.run` refuses another's.
    kernel_id: u64,
    /// The outputs to allocate: parameter index, shape, dtype name, whether the kernel
    /// reads it (then it must start zeroed: the caller has no values to give it).
    outputs: Vec<(usize, Vec<usize>, String, bool)>,
}

#[pymethods]
impl Prepared {
    /// The outputs the caller allocates: (parameter index, shape, dtype name, zeroed).
    #[getter]
    fn outputs(&self) -> Vec<(usize, Vec<usize>, String, bool)> {
        self.outputs.clone()
    }

    /// The symbolic dims bound, as (name, value) pairs.
    #[getter]
    fn dims(&self) -> Vec<(String, i64)> {
        let dims = &self.launch.plan.dims;
        dims.iter().map(|(n, v)| (n.to_string(), v)).collect()
    }
}

/// Checks a launch signature of the kernel in `ptx` (its manifest line): one spec per
/// parameter, `None` for an output to allocate, and dims given by name. Raises
/// `LaunchError` naming the parameter, or `ValueError` for a dtype name tlc lacks.
#[pyfunction]
pub fn prepare(ptx: &str, specs: Vec<PySpec>, dims: Vec<(String, i64)>) -> PyResult<Prepared> {
    let manifest = Manifest::from_ptx(ptx).map_err(launch_error)?;
    let mut dtypes = Vec::with_capacity(specs.len());
    for (i, spec) in specs.iter().enumerate() {
        let Some((name, _, _)) = spec else {
            dtypes.push(None);
            continue;
        };
        let dtype = DType::parse(name).ok_or_else(|| {
            let param = manifest.params.get(i).map_or("?", |p| p.name.as_str());
            PyValueError::new_err(format!(
                "parameter `{param}`: tlc has no dtype `{name}` (argument {i})"
            ))
        })?;
        dtypes.push(Some(dtype));
    }
    let args: Vec<Option<ArgSpec>> = specs
        .iter()
        .zip(&dtypes)
        .map(|(spec, dtype)| match (spec, dtype) {
            (Some((_, shape, strides)), Some(dtype)) => Some(ArgSpec {
                dtype: *dtype,
                shape,
                strides: strides.as_deref(),
            }),
            _ => None,
        })
        .collect();
    let given: Vec<(&str, i64)> = dims.iter().map(|(n, v)| (n.as_str(), *v)).collect();
    let launch = tlc_runtime::prepare_launch(&manifest, &args, &given).map_err(launch_error)?;
    let outputs = launch
        .to_allocate
        .iter()
        .filter_map(|&i| {
            let p = manifest.params.get(i)?;
            let shape = launch.shapes.get(i)?.clone();
            let zeroed = p.access != Access::Write;
            Some((i, shape, p.dtype.name().to_string(), zeroed))
        })
        .collect();
    Ok(Prepared {
        launch,
        outputs,
        kernel_id: ptx_id(ptx),
    })
}

/// A kernel loaded on one GPU (its module unloaded when this is collected).
#[pyclass(frozen, module = "tlc._tlc")]
pub struct Loaded {
    kernel: Kernel,
    kernel_id: u64,
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
        Ok(Loaded {
            kernel,
            kernel_id: ptx_id(ptx),
        })
    }

    /// The GPU's name, e.g. "NVIDIA H100 80GB HBM3".
    #[getter]
    fn device_name(&self) -> String {
        self.kernel.gpu().name().to_string()
    }

    /// Launches every entry of the kernel, without waiting, on the tensors at `ptrs` (one
    /// per parameter, in order), which have the signature `prepared` was made for, on
    /// `stream` (a raw `CUstream`, e.g. `torch.cuda.current_stream().cuda_stream`).
    fn run(&self, prepared: &Prepared, ptrs: Vec<u64>, stream: u64) -> PyResult<()> {
        if prepared.kernel_id != self.kernel_id {
            return Err(PyValueError::new_err(
                "this launch signature was prepared for another kernel",
            ));
        }
        self.kernel
            .launch_prepared(&prepared.launch, &ptrs, stream)
            .map_err(launch_error)
    }
}

/// A kernel's identity: a hash of its PTX text (manifest line included), which fixes its
/// launch contract.
fn ptx_id(ptx: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    ptx.hash(&mut h);
    h.finish()
}

/// Whether the CUDA driver library can be opened (no GPU is touched).
#[pyfunction]
pub fn driver_available() -> bool {
    tlc_runtime::driver_available()
}

/// Called by the package's exit hook: modules and device buffers dropped from now on are
/// left to the driver's teardown (`tlc_runtime::process_exiting`).
#[pyfunction]
pub fn process_exiting() {
    tlc_runtime::process_exiting();
}
