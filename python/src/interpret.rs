//! The reference interpreter from Python, as `tlc run --interp` runs it: on kernel source
//! (`interpret`) or on a compiled kernel's bound IR (`Compiled.interpret`, so the tunables
//! are the ones its PTX was compiled with). Arrays cross as `.npy` bytes, the CLI's
//! `--input` format, so every dtype keeps the storage convention of `tlc_ir::interp::npy`
//! (bfloat16 as uint16 bits, fp8 as uint8 bytes).

use crate::errors::compile_error;
use crate::source;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::collections::HashMap;
use tlc::diagnostics::SourceFile;
use tlc::frontend::UserError;
use tlc_ir::interp::{self, RunOptions};
use tlc_ir::PrimFunc;

/// Every parameter after a run, in parameter order: (name, `.npy` bytes).
pub type Arrays<'py> = Vec<(String, Bound<'py, PyBytes>)>;

/// Runs kernel source `text` on `inputs` (parameter name → `.npy` bytes; the others drawn
/// from `seed`) with the `-D` bindings `defines`; raises `CompileError` for a kernel the
/// compiler refuses and for a fault in the run, rendered at its source location.
#[pyfunction]
#[pyo3(signature = (name, text, defines, inputs, seed=0))]
pub fn interpret<'py>(
    py: Python<'py>,
    name: &str,
    text: &str,
    defines: Vec<String>,
    inputs: HashMap<String, Vec<u8>>,
    seed: u64,
) -> PyResult<Arrays<'py>> {
    let out = py.detach(|| {
        let (file, func, _) = source::load(name, text, &defines, None)?;
        run(&file, &func, &inputs, &HashMap::new(), seed)
    });
    Ok(to_bytes(py, out.map_err(compile_error)?))
}

/// Runs `func` (bound and verified) on `inputs`; `dims` binds symbolic dims the shapes
/// leave open.
pub fn run(
    file: &SourceFile,
    func: &PrimFunc,
    inputs: &HashMap<String, Vec<u8>>,
    dims: &HashMap<String, i64>,
    seed: u64,
) -> Result<Vec<(String, Vec<u8>)>, UserError> {
    let mut given = HashMap::new();
    for (param_name, bytes) in inputs {
        let Some(param) = func.params.iter().find(|p| &p.name.name == param_name) else {
            let names: Vec<&str> = func.params.iter().map(|p| p.name.name.as_str()).collect();
            return Err(UserError::plain(format!(
                "`{param_name}` is not a parameter of `{}` (parameters: {})",
                func.name.name,
                names.join(", ")
            )));
        };
        let tensor = interp::read_npy(bytes, param.dtype)
            .map_err(|e| UserError::plain(format!("parameter `{param_name}`: {e}")))?;
        given.insert(param_name.clone(), tensor);
    }
    let opts = RunOptions { seed, threads: 0 };
    let mut outputs =
        interp::run(func, dims, given, &opts).map_err(|d| UserError(file.render(&d)))?;
    let mut result = Vec::with_capacity(func.params.len());
    for param in &func.params {
        let pname = &param.name.name;
        if let Some(tensor) = outputs.remove(pname) {
            let bytes = interp::write_npy(&tensor)
                .map_err(|e| UserError::plain(format!("parameter `{pname}`: {e}")))?;
            result.push((pname.clone(), bytes));
        }
    }
    Ok(result)
}

/// The arrays as Python `bytes`.
pub fn to_bytes(py: Python<'_>, arrays: Vec<(String, Vec<u8>)>) -> Arrays<'_> {
    arrays
        .into_iter()
        .map(|(n, b)| (n, PyBytes::new(py, &b)))
        .collect()
}
