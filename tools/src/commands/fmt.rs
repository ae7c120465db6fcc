//! `tlc fmt FILE`: the canonical text of a kernel. Any spelling goes in (DSL, TVMScript
//! 0.1.x, 0.1.15); the DSL spelling comes out, and `fmt` of that output is the same text.

use crate::tunables::{self, Tuning};
use std::path::Path;
use tlc::diagnostics::SourceFile;
use tlc::frontend::{self, UserError};

pub fn run(path: &Path, defines: &[String]) -> Result<String, UserError> {
    format(&frontend::read_source(path)?, defines)
}

/// The canonical text of `file` with `defines` bound: what `tlc fmt` prints (also the
/// mutation campaign's idempotence oracle, `tlc_tests::mutate`).
pub fn format(file: &SourceFile, defines: &[String]) -> Result<String, UserError> {
    let func = frontend::parse(file)?;
    // Without a tunable in `-D` the tuning space stays as written; with one, the whole
    // space is bound, the rest at their defaults (`fmt` has no target to look them up for).
    let defines = frontend::split_defines(&func, defines)?;
    let func = match defines.tunables.is_empty() {
        true => frontend::specialize_dims(file, &func, &defines.dims)?,
        false => tunables::choose_tunables(file, &func, &defines, &Tuning::DEFAULTS)?,
    };
    Ok(tlc_ir::printer::print_func(&func))
}
