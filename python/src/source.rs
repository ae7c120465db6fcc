//! A kernel given from Python: its source text with the name diagnostics show (a path, or
//! `<string>`), parsed and bound to the `**dims` (as `-D NAME=VALUE`) exactly as the CLI
//! binds a file (`frontend::prepare`).

use tlc::diagnostics::SourceFile;
use tlc::frontend::{self, TuneTarget, Tuning, UserError};
use tlc_ir::verifier::FuncInfo;
use tlc_ir::{PrimFunc, Target};

/// Parses and binds `text`; the open tunables are chosen as the CLI chooses them for
/// `target` (tuning cache, then `tlc plan`'s first config, then defaults).
pub fn load(
    name: &str,
    text: &str,
    defines: &[String],
    target: Option<Target>,
) -> Result<(SourceFile, PrimFunc, FuncInfo), UserError> {
    let file = SourceFile::new(name, text);
    let parsed = frontend::parse(&file)?;
    let tuning = Tuning {
        cache: true,
        target: target.map_or(TuneTarget::None, TuneTarget::Given),
        verbose: false,
    };
    let (func, info) = frontend::prepare(&file, &parsed, defines, &tuning)?;
    Ok((file, func, info))
}

/// The parameter names of kernel source `text`, in order (parsed, not verified): what
/// positional arrays are matched to.
#[pyo3::pyfunction]
pub fn param_names(name: &str, text: &str) -> pyo3::PyResult<Vec<String>> {
    let file = SourceFile::new(name, text);
    let func = frontend::parse(&file).map_err(crate::errors::compile_error)?;
    Ok(func.params.iter().map(|p| p.name.name.clone()).collect())
}
