//! `plan(name, text, defines, target, sms)`: `tlc plan FILE --json` — the kernel's tuning
//! space ranked by the heuristic (`plan::space::rank`) for a target and SM count, without
//! a GPU.

use crate::errors::compile_error;
use pyo3::prelude::*;
use std::num::NonZeroU128;
use tlc::diagnostics::SourceFile;
use tlc::driver::parse_target;
use tlc::frontend::{self, UserError};
use tlc::plan::space::{self, Gpu};

/// The ranking as `tlc plan FILE --json` prints it. `sms` defaults to the target's usual
/// SM count.
#[pyfunction]
#[pyo3(signature = (name, text, defines, target, sms=None))]
pub fn plan(
    py: Python<'_>,
    name: &str,
    text: &str,
    defines: Vec<String>,
    target: &str,
    sms: Option<u32>,
) -> PyResult<String> {
    let work = || -> Result<String, UserError> {
        let target = parse_target(target)?;
        let sms = sms.map_or(target.desc().sm_count as u128, u128::from);
        let gpu = Gpu {
            target,
            sms: NonZeroU128::new(sms)
                .ok_or_else(|| UserError::plain("`sms` must be at least 1"))?,
        };
        let file = SourceFile::new(name, text);
        let func = frontend::parse(&file)?;
        let ranking = space::rank(&file, &func, &defines, gpu)?;
        Ok(ranking.to_json(gpu))
    };
    py.detach(work).map_err(compile_error)
}
