//! From a file name to a verified `PrimFunc`: read, parse, bind `-D` dims and tunables (a
//! tunable no `-D` names takes its default: choosing one from the tuning cache or the plan
//! is the caller's business, `tlc-tools`' `tunables`), verify. Pure: reads only the source
//! file. Every failure comes back as rendered text, ready for stderr.

use crate::diagnostics::SourceFile;
use std::path::Path;
use tlc_ir::specialize::{parse_defines, specialize};
use tlc_ir::tuning::Config;
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

/// The largest kernel source read (64 MiB): far beyond any real kernel, and it keeps a
/// device file or a runaway generator (`tlc check /dev/zero`) from being read forever.
pub const MAX_SOURCE_BYTES: u64 = 64 << 20;

/// Reads `path` as UTF-8 text, at most [`MAX_SOURCE_BYTES`]. A non-UTF-8 file is reported
/// at its first bad byte.
pub fn read_source(path: &Path) -> Result<SourceFile, UserError> {
    use std::io::Read as _;
    let name = path.display().to_string();
    let cannot = |e: std::io::Error| UserError(format!("{name}: error: cannot read file: {e}\n"));
    // Read one byte past the cap through `take`, so that neither the file's reported size
    // (0 for `/dev/zero`) nor its real one decides how much is read.
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_SOURCE_BYTES + 1).read_to_end(&mut bytes))
        .map_err(cannot)?;
    if bytes.len() as u64 > MAX_SOURCE_BYTES {
        return Err(UserError(format!(
            "{name}: error: source is larger than {} MiB\n",
            MAX_SOURCE_BYTES >> 20
        )));
    }
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

/// Parses, binds `defines` (`NAME=VALUE` texts: dims and tunables, the tunables they leave
/// open at their defaults) and verifies; the verifier's facts come back with the function.
pub fn load(
    path: &Path,
    defines: &[String],
) -> Result<(SourceFile, PrimFunc, FuncInfo), UserError> {
    let file = read_source(path)?;
    let parsed = parse(&file)?;
    let (func, info) = prepare(&file, &parsed, defines)?;
    Ok((file, func, info))
}

/// [`load`] after the parse: bind, then [`finish`].
pub fn prepare(
    file: &SourceFile,
    parsed: &PrimFunc,
    defines: &[String],
) -> Result<(PrimFunc, FuncInfo), UserError> {
    let defines = split_defines(parsed, defines)?;
    let func = match parsed.space.is_empty() {
        true => specialize_dims(file, parsed, &defines.dims)?,
        false => bind_config(parsed, &defines.tunables, &defines.dims)
            .map_err(|d| UserError(file.render(&d)))?,
    };
    finish(file, func)
}

/// A bound kernel made ready for every command: global accesses in loops that may fall
/// outside their tensor guarded (`legalize-safe-memory`, TileLang's semantics: loads read
/// 0, stores are dropped), verified (once), then thread-sync's barriers. The verifier's facts describe the result too: a barrier declares nothing (no
/// buffer, variable or kernel), and the pipeline's first verification (the target's rules,
/// `PassManager::run_timed`) checks the synchronized function whole.
pub fn finish(file: &SourceFile, func: PrimFunc) -> Result<(PrimFunc, FuncInfo), UserError> {
    let func = tlc_passes::legalize_safe_memory::legalize_safe_memory(func);
    let info = verify(file, &func)?;
    let func = sync(file, func)?;
    Ok((func, info))
}

/// TileLang's automatic barriers in per-thread code (`thread-sync`, docs/passes.md): part of
/// what such code means, so every command sees them (the interpreter included).
pub fn sync(file: &SourceFile, func: PrimFunc) -> Result<PrimFunc, UserError> {
    tlc_passes::thread_sync::thread_sync(func).map_err(|diags| UserError(file.render_all(&diags)))
}

/// `-D` bindings, split by what they name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Defines {
    /// Tunables of the kernel's tuning space.
    pub tunables: Config,
    /// Everything else: symbolic dims (a name that is neither is `specialize`'s error).
    pub dims: Config,
}

/// Parses `-D NAME=VALUE` texts and splits them into tunables of `func` and dims.
pub fn split_defines(func: &PrimFunc, defines: &[String]) -> Result<Defines, UserError> {
    let bindings = parse_defines(defines).map_err(UserError::plain)?;
    let (tunables, dims) = bindings
        .into_iter()
        .partition(|(name, _)| func.space.declares(name));
    Ok(Defines { tunables, dims })
}

/// Binds `dims` only (a tuning space stays as written): `fmt` without a tunable in `-D`.
pub fn specialize_dims(
    file: &SourceFile,
    func: &PrimFunc,
    dims: &Config,
) -> Result<PrimFunc, UserError> {
    specialize(func, dims).map_err(|d| UserError(file.render(&d)))
}

/// `func` with the tunables of `config` (the others at their defaults) and the dims bound.
pub fn bind_config(
    func: &PrimFunc,
    config: &Config,
    dims: &Config,
) -> Result<PrimFunc, Diagnostic> {
    let func = tlc_ir::tuning::bind(func, config, dims)?;
    specialize(&func, dims)
}

/// Runs the verifier, rendering all its errors.
pub fn verify(file: &SourceFile, func: &PrimFunc) -> Result<FuncInfo, UserError> {
    tlc_ir::verifier::verify(func).map_err(|mut diags| {
        // One error per place: legalize-safe-memory's guards repeat an access's indices,
        // so an error in an index (an undefined name) would otherwise come three times.
        let mut seen = std::collections::HashSet::new();
        diags.retain(|d| seen.insert((d.span.start, d.span.end, d.message.clone())));
        UserError(file.render_all(&diags))
    })
}
