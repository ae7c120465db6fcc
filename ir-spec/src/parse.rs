//! The parser's public entry point: text in any accepted spelling → normalized IR.

use crate::diagnostic::Diagnostic;
use crate::ir::PrimFunc;

/// Parses one `@T.prim_func` (TileLang DSL, or TVMScript as TileLang 0.1.x or 0.1.15 print
/// it) into the IR. All spellings of one kernel give equal IR.
pub fn parse(src: &str) -> Result<PrimFunc, Vec<Diagnostic>> {
    let module = crate::syntax::parse_module(src)?;
    let lowered = crate::syntax::lower::lower_module(&module, src)?;
    let mut func = lowered.func;
    crate::uniquify::uniquify(&mut func);
    crate::syntax::dim_alias::rename_dims(&mut func, &lowered.dim_aliases)?;
    // Contraction first: it reads the typed literals' casts as written (their meaning),
    // and the normalizer types let values, which only contracted expressions do.
    crate::syntax::contract::contract(&mut func);
    crate::syntax::literals::normalize(&mut func, lowered.typed_literals);
    Ok(func)
}
