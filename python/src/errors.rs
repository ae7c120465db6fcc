//! The Python exceptions of the package and the conversions into them: a compiler error
//! keeps its rendered text (`FILE:LINE:COL: error: ...` with the caret) as the message; a
//! runtime error (an argument check, the driver) keeps the runtime's own words, which name
//! the parameter with the expected and found values.

use pyo3::exceptions::{PyException, PyRuntimeError};
use pyo3::PyErr;
use tlc::frontend::UserError;
use tlc_runtime::RuntimeError;

pyo3::create_exception!(
    tlc,
    CompileError,
    PyException,
    "A kernel the compiler refuses; the message is the rendered diagnostic."
);
pyo3::create_exception!(
    tlc,
    LaunchError,
    PyRuntimeError,
    "A launch refused by the runtime (an argument that does not fit the kernel) or failed in \
     the CUDA driver."
);

/// A compiler error as `tlc.CompileError`, its text without the final newline.
pub fn compile_error(e: UserError) -> PyErr {
    CompileError::new_err(e.0.trim_end().to_string())
}

/// A runtime error as `tlc.LaunchError`.
pub fn launch_error(e: RuntimeError) -> PyErr {
    LaunchError::new_err(e.to_string())
}
