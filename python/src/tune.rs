//! `tune(path, defines, ...)`: `tlc tune FILE` — times a kernel's tuning space on GPU 0 and
//! stores the fastest config in the tuning cache that `compile` then reads
//! (`commands::tune::run`). Returns the report `tlc tune` prints.

use crate::errors::compile_error;
use pyo3::prelude::*;
use std::path::Path;
use tlc::driver::parse_target;
use tlc::frontend::UserError;
use tlc_tools::commands::tune::{run as run_tune, TuneArgs};

/// Tunes the kernel in file `path` with the `-D` bindings `defines`; raises `CompileError`
/// (the CLI's words) without a GPU or for a kernel with no tuning space.
#[pyfunction]
#[pyo3(signature = (path, defines, target=None, top=None, warmup=10, iters=50, seed=0, store=true))]
#[allow(clippy::too_many_arguments)] // one per `tlc tune` flag
pub fn tune(
    py: Python<'_>,
    path: &str,
    defines: Vec<String>,
    target: Option<&str>,
    top: Option<usize>,
    warmup: usize,
    iters: usize,
    seed: u64,
    store: bool,
) -> PyResult<String> {
    let work = || -> Result<String, UserError> {
        let target = target.map(parse_target).transpose()?;
        if iters == 0 || top == Some(0) {
            return Err(UserError::plain("`iters` and `top` must be at least 1"));
        }
        run_tune(&TuneArgs {
            file: Path::new(path),
            defines: &defines,
            target,
            top,
            warmup,
            iters,
            seed,
            store,
            dry_run: false,
        })
    };
    py.detach(work).map_err(compile_error)
}
