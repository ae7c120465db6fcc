//! `tlc._tlc`: the Rust half of the `tlc` Python package. Each module wraps one library
//! entry point of the compiler or the runtime and hands Python plain values (strings, bytes,
//! lists); `python/tlc/__init__.py` builds the documented API on top.

mod compile;
mod errors;
mod interpret;
mod launch;
mod names;
mod plan;
mod source;
mod tune;

use pyo3::prelude::*;

#[pymodule]
mod _tlc {
    #[pymodule_export]
    use crate::errors::{CompileError, LaunchError};

    #[pymodule_export]
    use crate::compile::{compile, Compiled};

    #[pymodule_export]
    use crate::interpret::interpret;

    #[pymodule_export]
    use crate::source::param_names;

    #[pymodule_export]
    use crate::names::{language_declines, language_names};

    #[pymodule_export]
    use crate::plan::plan;

    #[pymodule_export]
    use crate::tune::tune;

    #[pymodule_export]
    use crate::launch::{driver_available, prepare, process_exiting, Loaded, Prepared};
}
