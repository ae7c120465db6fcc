//! From a file name to a verified `PrimFunc`: read, parse, bind `-D` dims, verify. Every
//! failure comes back as rendered text, ready for stderr.

use crate::diagnostics::SourceFile;
use std::path::Path;
use tlc_ir::specialize::{parse_define, specialize};
use tlc_ir::verifier::FuncInfo;
use tlc_ir::{Diagnostic, PrimFunc, Span};

/// A user error, already rendered for the terminal.
#[derive(Debug)]
pub struct UserError(pub String);

impl UserError {
    pub fn plain(message: impl std::fmt::Display) -> UserError {
        UserError(format!("error: {message}\n"))
    }
}

/// Reads `path` as UTF-8 text. A non-UTF-8 file is reported at its first bad byte.
pub fn read_source(path: &Path) -> Result<SourceFile, UserError> {
    let name = path.display().to_string();
    let bytes = std::fs::read(path)
        .map_err(|e| UserError(format!("{name}: error: cannot read file: {e}\n")))?;
    match String::from_utf8(bytes) {
        Ok(text) => Ok(SourceFile::new(name, text)),
        Err(e) => {
            let valid = e.utf8_error().valid_up_to();
            let text = String::from_utf8_lossy(e.as_bytes()).into_owned();
            let file = SourceFile::new(name, text);
            // The lossy text has the same bytes up to the first invalid one.
            let diag = Diagnostic::error(Span::new(valid, valid + 1), "file is not valid UTF-8");
            Err(UserError(file.render(&diag)))
        }
    }
}

/// Parses `file` without verifying it.
pub fn parse(file: &SourceFile) -> Result<PrimFunc, UserError> {
    tlc_ir::parse::parse(&file.text).map_err(|diags| UserError(file.render_all(&diags)))
}

/// Parses, specializes with `defines` (`NAME=VALUE` texts) and verifies; the verifier's
/// facts come back with the function.
pub fn load(
    path: &Path,
    defines: &[String],
) -> Result<(SourceFile, PrimFunc, FuncInfo), UserError> {
    let file = read_source(path)?;
    let func = parse(&file)?;
    let func = bind(&file, &func, defines)?;
    let func = choose_tunables(&file, &func)?;
    verify(&file, &func)?;
    let func = sync(&file, func)?;
    let info = verify(&file, &func)?;
    Ok((file, func, info))
}

/// TileLang's automatic barriers in per-thread code (`thread-sync`, docs/passes.md): part of
/// what such code means, so every command sees them (the interpreter included).
pub fn sync(file: &SourceFile, func: PrimFunc) -> Result<PrimFunc, UserError> {
    tlc_passes::thread_sync::thread_sync(func).map_err(|diags| UserError(file.render_all(&diags)))
}

/// Applies `-D NAME=VALUE` bindings: symbolic dims, and tunables (docs/ir.md, "Tuning
/// space"). When one names a tunable, the kernel's whole tuning space is bound, the other
/// tunables as [`choose_tunables`] would; without any, a tuning space stays as written.
pub fn bind(file: &SourceFile, func: &PrimFunc, defines: &[String]) -> Result<PrimFunc, UserError> {
    if defines.is_empty() {
        return Ok(func.clone());
    }
    let bindings = defines
        .iter()
        .map(|d| parse_define(d))
        .collect::<Result<Vec<_>, _>>()
        .map_err(UserError::plain)?;
    let (tunables, dims): (Vec<_>, Vec<_>) = bindings
        .into_iter()
        .partition(|(name, _)| func.space.declares(name));
    let func = if tunables.is_empty() {
        func.clone()
    } else {
        bind_tunables(file, func, &tunables, &dims)?
    };
    specialize(&func, &dims).map_err(|d| UserError(file.render(&d)))
}

/// Binds the tunables `-D` left open: each to its default.
pub fn choose_tunables(file: &SourceFile, func: &PrimFunc) -> Result<PrimFunc, UserError> {
    if func.space.is_empty() {
        return Ok(func.clone());
    }
    bind_tunables(file, func, &[], &[])
}

fn bind_tunables(
    file: &SourceFile,
    func: &PrimFunc,
    config: &[(String, i64)],
    dims: &[(String, i64)],
) -> Result<PrimFunc, UserError> {
    tlc_ir::tuning::bind(func, &config.to_vec(), &dims.to_vec())
        .map_err(|d| UserError(file.render(&d)))
}

/// Runs the verifier, rendering all its errors.
pub fn verify(file: &SourceFile, func: &PrimFunc) -> Result<FuncInfo, UserError> {
    tlc_ir::verifier::verify(func).map_err(|diags| UserError(file.render_all(&diags)))
}
