//! A kernel given from Python: its source text with the name diagnostics show (a path, or
//! `<string>`), parsed and bound to the `**dims` (as `-D NAME=VALUE`) exactly as the CLI
//! binds a file (`tunables::prepare`, `tunables::resolve`).

use tlc::diagnostics::SourceFile;
use tlc::frontend::{self, UserError};
use tlc_ir::verifier::FuncInfo;
use tlc_ir::{PrimFunc, Target};
use tlc_tools::tunables::{self, TuneTarget, Tuning};

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
    let (func, info) = tunables::prepare(&file, &parsed, defines, &tuning)?;
    Ok((file, func, info))
}

/// Parses `text` and resolves its tunables as the CLI does for `target` (tuning cache, then
/// `tlc plan`'s first config, then defaults): the parsed kernel and `defines` with every
/// open tunable's choice added, what the driver (`tlc::driver::compile_parsed`) takes.
pub fn resolve(
    name: &str,
    text: &str,
    defines: &[String],
    target: Target,
) -> Result<(SourceFile, PrimFunc, Vec<String>), UserError> {
    let file = SourceFile::new(name, text);
    let parsed = frontend::parse(&file)?;
    let tuning = Tuning {
        cache: true,
        target: TuneTarget::Given(target),
        verbose: false,
    };
    let defines = tunables::resolve(&file, &parsed, defines, &tuning)?;
    Ok((file, parsed, defines))
}

/// The parameter names of kernel source `text`, in order (parsed, not verified): what
/// positional arrays are matched to.
#[pyo3::pyfunction]
pub fn param_names(name: &str, text: &str) -> pyo3::PyResult<Vec<String>> {
    let file = SourceFile::new(name, text);
    let func = frontend::parse(&file).map_err(crate::errors::compile_error)?;
    Ok(func.params.iter().map(|p| p.name.name.clone()).collect())
}
