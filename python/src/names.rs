//! The `T.*` names the compiler's front end reads, for `tlc.language`: Python evaluates a
//! kernel's annotations and its factory's code, and a `T.x` it does not know there must be
//! an error at that line (a placeholder object would let a misspelling run on), while the
//! names the compiler reads — or declines with its own located explanation, such as
//! `T.print` — stay placeholders whose meaning is the compiler's.

use pyo3::prelude::*;
use tlc_ir::syntax::lower_expr::{known_t_names, unknown_construct};
use tlc_ir::Span;

/// Every `T.name` the front end reads (constructs, intrinsics, math functions), without
/// the `T.` prefix.
#[pyfunction]
pub fn language_names() -> Vec<&'static str> {
    known_t_names()
}

/// Whether the front end declines `T.name` with an explanation of its own (a construct
/// tlc recognizes and does not support, e.g. `T.print`), as opposed to an unknown name.
#[pyfunction]
pub fn language_declines(name: &str) -> bool {
    // The front end's one description of a declined construct; an unknown name gets
    // "unknown TileLang construct" instead.
    unknown_construct(&format!("T.{name}"), Span::DUMMY)
        .message
        .ends_with("is not supported by tlc")
}
