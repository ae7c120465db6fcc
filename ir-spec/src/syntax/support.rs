//! Helpers called from the grammar's actions: node construction with the depth limit,
//! literal folding of unary minus, and the chained-comparison error.

use crate::diagnostic::Diagnostic;
use crate::span::Span;
use crate::syntax::ast::{Expr, ExprKind, Stmt, StmtKind, UnaryOp, MAX_EXPR_DEPTH};
use crate::syntax::lexer::Tok;
use lalrpop_util::ParseError;

/// The error type of fallible grammar actions.
pub type PErr = ParseError<usize, Tok, Diagnostic>;

/// Builds an expression node, rejecting one nested deeper than [`MAX_EXPR_DEPTH`].
pub fn node(kind: ExprKind, l: usize, r: usize) -> Result<Expr, PErr> {
    let e = Expr::new(kind, Span::new(l, r));
    if e.depth > MAX_EXPR_DEPTH {
        return Err(ParseError::User {
            error: Diagnostic::error(e.span, "expression nested too deeply").with_note(format!(
                "at most {MAX_EXPR_DEPTH} levels of nesting are allowed; split it with `x = ...` lets"
            )),
        });
    }
    Ok(e)
}

/// `-a`: folds into a negative literal when `a` is an unparenthesized number.
pub fn negate(a: Expr, l: usize, r: usize) -> Result<Expr, PErr> {
    match a.kind {
        ExprKind::Int(v) if !a.parens => node(ExprKind::Int(-v), l, r),
        ExprKind::Float(v) if !a.parens => node(ExprKind::Float(-v), l, r),
        _ => node(ExprKind::Unary(UnaryOp::Neg, Box::new(a)), l, r),
    }
}

/// `(e)`: the same expression, marked as parenthesized.
pub fn paren(mut e: Expr) -> Expr {
    e.parens = true;
    e
}

/// The error for `a < b < c`.
pub fn chained(first: Expr, l: usize, r: usize) -> PErr {
    ParseError::User {
        error: Diagnostic::error(Span::new(l, r), "comparison operators cannot be chained")
            .with_note_at(first.span, "this is already a comparison")
            .with_note("write `a < b and b < c`, or parenthesize one side"),
    }
}

pub fn stmt(kind: StmtKind, l: usize, r: usize) -> Stmt {
    Stmt {
        kind,
        span: Span::new(l, r),
    }
}
