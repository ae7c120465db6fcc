//! Builders for the IR that passes make: expressions with literal arithmetic and identities
//! folded (so generated indices stay readable: `i * 1 + 0` is `i`), loops, intrinsic
//! statements and their operands, notes.

use crate::dtype::DType;
use crate::intrinsic::{ElemRef, Intrinsic};
use crate::ir::{BinOp, Expr, ExprKind, For, ForKind, Ident, ReduceKind, Stmt, StmtKind};
use crate::span::Span;

/// `a op b` with no span of its own; see [`bin_at`].
pub fn bin(op: BinOp, a: Expr, b: Expr) -> Expr {
    bin_at(op, a, b, Span::DUMMY)
}

/// `a op b` at `span`: `x + 0`, `0 + x`, `x - 0`, `x * 1`, `1 * x` and `x // 1` are `x`, and
/// two integer literals fold (`Expr::binary`).
pub fn bin_at(op: BinOp, a: Expr, b: Expr, span: Span) -> Expr {
    match (op, a.as_int(), b.as_int()) {
        (BinOp::Add | BinOp::Sub, _, Some(0)) | (BinOp::Mul | BinOp::FloorDiv, _, Some(1)) => a,
        (BinOp::Add, Some(0), _) | (BinOp::Mul, Some(1), _) => b,
        _ => Expr::binary(op, a, b, span),
    }
}

/// `if cond: body` (no else).
pub fn if_then(cond: Expr, body: Vec<Stmt>, span: Span) -> Stmt {
    Stmt::new(
        StmtKind::If {
            cond,
            then_body: body,
            else_body: Vec::new(),
        },
        span,
    )
}

/// `for var in KIND(0, stop): body`.
pub fn for_loop(var: &str, stop: Expr, kind: ForKind, body: Vec<Stmt>, span: Span) -> Stmt {
    Stmt::new(
        StmtKind::For(For {
            var: Ident::new(var, span),
            start: Expr::int(0),
            stop,
            kind,
            body,
        }),
        span,
    )
}

/// An intrinsic call as a statement.
pub fn intrinsic(i: Intrinsic, span: Span) -> Stmt {
    Stmt::new(StmtKind::Intrinsic(i), span)
}

/// `T.note("text")`: a remark for whoever reads the printed IR (why a pass took a slower
/// path, say). It has no meaning; any text prints back exactly.
pub fn note(text: impl Into<String>, span: Span) -> Stmt {
    Stmt::new(StmtKind::Note(text.into()), span)
}

/// The operand `buf[indices]`.
pub fn elem(buf: &str, indices: Vec<Expr>, span: Span) -> ElemRef {
    ElemRef {
        buffer: Ident::new(buf, span),
        indices,
    }
}

/// The value every fold starts from: the identity of the kind's operator in `d`.
pub fn reduce_identity(kind: ReduceKind, d: DType) -> Expr {
    let float = d.is_float();
    let lit = match kind {
        ReduceKind::Sum | ReduceKind::AbsSum | ReduceKind::AbsMax => ExprKind::Int(0),
        ReduceKind::Max if float => ExprKind::Float(f64::NEG_INFINITY),
        ReduceKind::Min if float => ExprKind::Float(f64::INFINITY),
        ReduceKind::Max => ExprKind::Int(int_min(d)),
        ReduceKind::Min => ExprKind::Int(int_max(d)),
    };
    Expr::new(
        ExprKind::Cast(d, Box::new(Expr::new(lit, Span::DUMMY))),
        Span::DUMMY,
    )
}

fn int_min(d: DType) -> i64 {
    d.int_range().map_or(i64::MIN, |r| r.0)
}

fn int_max(d: DType) -> i64 {
    d.int_range().map_or(i64::MAX, |r| r.1)
}

/// `buffer[indices]` as an expression.
pub fn load(buffer: &str, indices: Vec<Expr>, span: Span) -> Expr {
    Expr::new(
        ExprKind::Load {
            buffer: buffer.to_string(),
            indices,
        },
        span,
    )
}

/// `buffer[indices] = value`.
pub fn store(buffer: &str, indices: Vec<Expr>, value: Expr, span: Span) -> Stmt {
    Stmt::new(
        StmtKind::Store {
            buffer: Ident::new(buffer, span),
            indices,
            value,
        },
        span,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_and_literals_fold() {
        let x = || Expr::var("x");
        for (op, lit) in [
            (BinOp::Add, 0),
            (BinOp::Sub, 0),
            (BinOp::Mul, 1),
            (BinOp::FloorDiv, 1),
        ] {
            assert_eq!(bin(op, x(), Expr::int(lit)), x());
        }
        assert_eq!(bin(BinOp::Add, Expr::int(0), x()), x());
        assert_eq!(bin(BinOp::Mul, Expr::int(1), x()), x());
        assert_eq!(bin(BinOp::Mul, Expr::int(6), Expr::int(7)), Expr::int(42));
        // `0 - x` and `1 // x` are not identities.
        assert!(matches!(
            bin(BinOp::Sub, Expr::int(0), x()).kind,
            crate::ir::ExprKind::Binary(BinOp::Sub, _, _)
        ));
        assert!(matches!(
            bin(BinOp::FloorDiv, Expr::int(1), x()).kind,
            crate::ir::ExprKind::Binary(BinOp::FloorDiv, _, _)
        ));
    }
}
