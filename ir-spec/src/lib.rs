//! `tlc-ir`: the IR shared by every part of tlc — its data model, its text form (lexer,
//! parser, printer), its verifier, the `Diagnostic` type, and the reference interpreter that
//! gives every op its meaning.

pub mod affine;
pub mod build;
pub mod diagnostic;
pub mod dtype;
pub mod hash;
pub mod interp;
pub mod interval;
pub mod intrinsic;
pub mod ir;
pub mod math;
pub mod parse;
pub mod printer;
pub mod span;
pub mod specialize;
pub mod substitute;
pub mod syntax;
pub mod target;
pub mod tuning;
pub mod types;
pub mod uniquify;
pub mod verifier;
pub mod visit;
pub mod wgmma;

pub use diagnostic::{Diagnostic, Diagnostics, Note};
pub use dtype::DType;
pub use ir::*;
pub use parse::parse;
pub use span::Span;
pub use target::Target;
