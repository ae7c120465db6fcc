//! `tune(name, text, defines, ...)`: `tlc tune FILE` — times a kernel's tuning space on every visible
//! GPU (one model) and stores the fastest config in the tuning cache that `compile` then reads
//! (`commands::tune::run`). Returns the report `tlc tune` prints.

use crate::errors::compile_error;
use pyo3::prelude::*;
use std::path::Path;
use tlc::driver::parse_target;
use tlc::frontend::UserError;
use tlc_tools::commands::tune::{run as run_tune, TuneArgs};

/// Tunes the kernel source `text` (named `name` in diagnostics: its file, or `<string>`) with
/// the `-D` bindings `defines`; raises `CompileError`
/// (the CLI's words) without a GPU, for a kernel with no tuning space, or when no config
/// passed the check (the message holds the table).
#[pyfunction]
#[pyo3(signature = (name, text, defines, target=None, top=None, warmup=10, iters=50, seed=0, store=true))]
#[allow(clippy::too_many_arguments)] // one per `tlc tune` flag
pub fn tune(
    py: Python<'_>,
    name: &str,
    text: &str,
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
        let (table, passed) = run_tune(&TuneArgs {
            file: Path::new(name),
            source: Some((name, text)),
            defines: &defines,
            target,
            top,
            warmup,
            iters,
            seed,
            inputs: &[],
            store,
            dry_run: false,
            json: false,
        })?;
        // As `tlc tune` exits 1: a tune where no config passed the check is an error, its
        // table the message.
        match passed {
            true => Ok(table),
            false => Err(UserError(format!(
                "{table}error: no config passed the check: nothing was stored\n"
            ))),
        }
    };
    py.detach(work).map_err(compile_error)
}
