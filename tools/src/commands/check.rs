//! `tlc check FILE`: parse and verify, reporting every error found.

use crate::tunables::{self, Tuning};
use std::path::Path;
use tlc::frontend::UserError;

/// `verbose`: say where the tunables come from (their defaults: `check` has no target to
/// key the tuning cache with).
pub fn run(path: &Path, defines: &[String], verbose: bool) -> Result<(), UserError> {
    let tuning = Tuning {
        verbose,
        ..Tuning::DEFAULTS
    };
    tunables::load(path, defines, &tuning).map(|_| ())
}
