//! Helpers called from the grammar's actions: node construction with the depth limit,
//! literal folding of unary minus and of `**`, and the chained-comparison error.

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

/// `a ** b`: Python evaluates it while TileLang traces the kernel (`T.fill(m, -(2**30))`),
/// so both sides must be number literals, and the result is one. An integer to a
/// non-negative integer power is an integer (an error past `i64`); any other combination
/// is a float, as in Python (`2 ** -1` is `0.5`). Anything else is a located error.
pub fn power(a: Expr, b: Expr, l: usize, r: usize) -> Result<Expr, PErr> {
    let span = Span::new(l, r);
    let err = |msg: String, note: &str| ParseError::User {
        error: Diagnostic::error(span, msg).with_note(note.to_string()),
    };
    let as_float = |e: &Expr| match e.kind {
        ExprKind::Int(v) => Some(v as f64),
        ExprKind::Float(v) => Some(v),
        _ => None,
    };
    match (&a.kind, &b.kind) {
        (ExprKind::Int(x), ExprKind::Int(y)) if *y >= 0 => {
            let value = u32::try_from(*y)
                .ok()
                .and_then(|y| i64::try_from(*x).ok()?.checked_pow(y));
            match value {
                Some(v) => node(ExprKind::Int(i128::from(v)), l, r),
                None => Err(err(
                    "this power does not fit in a 64-bit integer".to_string(),
                    "write a smaller constant",
                )),
            }
        }
        _ => match (as_float(&a), as_float(&b)) {
            (Some(x), Some(y)) => {
                let v = x.powf(y);
                if v.is_finite() {
                    node(ExprKind::Float(v), l, r)
                } else {
                    Err(err(
                        format!("`**` gives {v} here"),
                        "write a finite constant",
                    ))
                }
            }
            _ => Err(err(
                "`**` is evaluated while the kernel is traced: both sides must be number literals"
                    .to_string(),
                "write the constant, or `T.pow(x, y)` for a power computed by the kernel",
            )),
        },
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
