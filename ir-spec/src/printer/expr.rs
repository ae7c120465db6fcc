//! Expression printing: Python precedence, minimal parentheses, left associativity.
//!
//! Every expression form has a precedence level; an operand gets parentheses exactly when its
//! level is too low for its position (docs/ir.md). The same code backs
//! `impl Display for Expr`, so an expression prints the same alone and inside a function.

use crate::ir::{BinOp, Expr, ExprKind, UnOp};
use std::fmt::{self, Write};

/// Precedence levels, lowest first. Comparisons are never chained, so a comparison operand
/// of a comparison is parenthesized on both sides.
const OR: u8 = 1;
const AND: u8 = 2;
const NOT: u8 = 3;
const CMP: u8 = 4;
const BIT_OR: u8 = 5;
const BIT_XOR: u8 = 6;
const BIT_AND: u8 = 7;
const SHIFT: u8 = 8;
const ADD: u8 = 9;
const MUL: u8 = 10;
/// Unary minus and `~`, and negative literals (Python reads `-5` as a unary minus on `5`).
const NEG: u8 = 11;
const ATOM: u8 = 12;

/// The precedence of the outermost form of `expr`.
fn precedence(expr: &Expr) -> u8 {
    match &expr.kind {
        ExprKind::Int(v) if *v < 0 => NEG,
        ExprKind::Float(v) if v.is_sign_negative() && v.is_finite() => NEG,
        ExprKind::Unary(UnOp::Neg | UnOp::BitNot, _) => NEG,
        ExprKind::Unary(UnOp::Not, _) => NOT,
        ExprKind::Binary(op, _, _) => match binary_infix(*op) {
            Some((_, level)) => level,
            None => ATOM,
        },
        _ => ATOM,
    }
}

/// The infix spelling and level of `op`, or `None` for the operators printed as calls.
fn binary_infix(op: BinOp) -> Option<(&'static str, u8)> {
    Some(match op {
        BinOp::Or => ("or", OR),
        BinOp::And => ("and", AND),
        BinOp::Lt => ("<", CMP),
        BinOp::Le => ("<=", CMP),
        BinOp::Gt => (">", CMP),
        BinOp::Ge => (">=", CMP),
        BinOp::Eq => ("==", CMP),
        BinOp::Ne => ("!=", CMP),
        BinOp::Add => ("+", ADD),
        BinOp::Sub => ("-", ADD),
        BinOp::Mul => ("*", MUL),
        BinOp::Div => ("/", MUL),
        BinOp::FloorDiv => ("//", MUL),
        BinOp::FloorMod => ("%", MUL),
        BinOp::BitOr => ("|", BIT_OR),
        BinOp::BitXor => ("^", BIT_XOR),
        BinOp::BitAnd => ("&", BIT_AND),
        BinOp::Shl => ("<<", SHIFT),
        BinOp::Shr => (">>", SHIFT),
        BinOp::CeilDiv | BinOp::Min | BinOp::Max => return None,
    })
}

/// The `T.` function name of the operators printed as calls.
fn binary_call(op: BinOp) -> &'static str {
    match op {
        BinOp::CeilDiv => "T.ceildiv",
        BinOp::Min => "T.min",
        BinOp::Max => "T.max",
        // Only reached for infix operators if a caller forgot to check `binary_infix`;
        // printing the Rust name keeps the output readable rather than panicking.
        _ => "T.unknown_op",
    }
}

/// A float literal: Rust's `{:?}` of the f64 (it always has a `.` or an `e`, so it reads
/// back as a float), or Python's `float("inf")` / `float("-inf")` / `float("nan")` for the
/// values that have no literal.
fn write_float(out: &mut dyn Write, v: f64) -> fmt::Result {
    if v.is_nan() {
        out.write_str("float(\"nan\")")
    } else if v.is_infinite() {
        let sign = if v < 0.0 { "-" } else { "" };
        write!(out, "float(\"{sign}inf\")")
    } else {
        write!(out, "{v:?}")
    }
}

/// A literal whose text has no sign: a minus written before it would fold into it.
fn is_unsigned_literal(e: &Expr) -> bool {
    match e.kind {
        ExprKind::Int(v) => v >= 0,
        ExprKind::Float(v) => v.is_finite() && !v.is_sign_negative(),
        _ => false,
    }
}

/// Writes `expr` in canonical spelling.
pub(crate) fn write_expr(out: &mut dyn Write, expr: &Expr) -> fmt::Result {
    match &expr.kind {
        ExprKind::Int(v) => write!(out, "{v}"),
        ExprKind::Float(v) => write_float(out, *v),
        ExprKind::Bool(true) => out.write_str("True"),
        ExprKind::Bool(false) => out.write_str("False"),
        ExprKind::Var(name) => out.write_str(name),
        ExprKind::Load { buffer, indices } => {
            out.write_str(buffer)?;
            out.write_char('[')?;
            write_list(out, indices)?;
            out.write_char(']')
        }
        ExprKind::Unary(UnOp::Neg, a) => {
            out.write_char('-')?;
            // `-5` reads back as the literal -5, not as a minus on the literal 5 (TileLang's
            // `-(2**30)`): a minus on a non-negative literal keeps its parentheses.
            if is_unsigned_literal(a) {
                out.write_char('(')?;
                write_expr(out, a)?;
                return out.write_char(')');
            }
            write_operand(out, a, NEG)
        }
        ExprKind::Unary(UnOp::Not, a) => {
            out.write_str("not ")?;
            write_operand(out, a, NOT)
        }
        ExprKind::Unary(UnOp::BitNot, a) => {
            out.write_char('~')?;
            write_operand(out, a, NEG)
        }
        ExprKind::Binary(op, a, b) => match binary_infix(*op) {
            Some((spelling, level)) => {
                // Left associative: the left operand may share the level, the right one may
                // not. Comparisons do not chain, so neither side may be a comparison.
                let left_min = if level == CMP { CMP + 1 } else { level };
                write_operand(out, a, left_min)?;
                write!(out, " {spelling} ")?;
                write_operand(out, b, level + 1)
            }
            None => {
                write!(out, "{}(", binary_call(*op))?;
                write_expr(out, a)?;
                out.write_str(", ")?;
                write_expr(out, b)?;
                out.write_char(')')
            }
        },
        ExprKind::Cast(dtype, a) => {
            out.write_str("T.cast(")?;
            write_expr(out, a)?;
            write!(out, ", \"{dtype}\")")
        }
        ExprKind::Reinterpret(dtype, a) => {
            write!(out, "T.reinterpret(\"{dtype}\", ")?;
            write_expr(out, a)?;
            out.write_char(')')
        }
        ExprKind::Select(c, a, b) => {
            out.write_str("T.if_then_else(")?;
            write_list(out, [c.as_ref(), a.as_ref(), b.as_ref()])?;
            out.write_char(')')
        }
        ExprKind::Math(f, args) => {
            write!(out, "T.{}(", f.name())?;
            write_list(out, args)?;
            out.write_char(')')
        }
    }
}

/// Writes `expr`, parenthesized when its level is below `min_level`.
fn write_operand(out: &mut dyn Write, expr: &Expr, min_level: u8) -> fmt::Result {
    if precedence(expr) < min_level {
        out.write_char('(')?;
        write_expr(out, expr)?;
        out.write_char(')')
    } else {
        write_expr(out, expr)
    }
}

/// Writes `a, b, c`.
pub(crate) fn write_list<'e>(
    out: &mut dyn Write,
    exprs: impl IntoIterator<Item = &'e Expr>,
) -> fmt::Result {
    for (i, e) in exprs.into_iter().enumerate() {
        if i > 0 {
            out.write_str(", ")?;
        }
        write_expr(out, e)?;
    }
    Ok(())
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_expr(f, self)
    }
}

#[cfg(test)]
mod tests {
    use crate::dtype::DType;
    use crate::ir::{BinOp, Expr, ExprKind, UnOp};
    use crate::span::Span;

    fn v(name: &str) -> Expr {
        Expr::var(name)
    }
    /// A binary node that is never folded, so tests control the exact tree.
    fn bin(op: BinOp, a: Expr, b: Expr) -> Expr {
        Expr::new(ExprKind::Binary(op, Box::new(a), Box::new(b)), Span::DUMMY)
    }
    fn un(op: UnOp, a: Expr) -> Expr {
        Expr::new(ExprKind::Unary(op, Box::new(a)), Span::DUMMY)
    }
    fn p(e: &Expr) -> String {
        e.to_string()
    }

    #[test]
    fn subtraction_is_left_associative() {
        let abc = bin(BinOp::Sub, v("a"), bin(BinOp::Sub, v("b"), v("c")));
        assert_eq!(p(&abc), "a - (b - c)");
        let abc = bin(BinOp::Sub, bin(BinOp::Sub, v("a"), v("b")), v("c"));
        assert_eq!(p(&abc), "a - b - c");
        let mixed = bin(BinOp::Add, v("a"), bin(BinOp::Sub, v("b"), v("c")));
        assert_eq!(p(&mixed), "a + (b - c)");
    }

    #[test]
    fn multiplication_binds_tighter_than_addition() {
        let e = bin(BinOp::Mul, bin(BinOp::Add, v("a"), v("b")), v("c"));
        assert_eq!(p(&e), "(a + b) * c");
        let e = bin(BinOp::Add, v("a"), bin(BinOp::Mul, v("b"), v("c")));
        assert_eq!(p(&e), "a + b * c");
    }

    #[test]
    fn floor_division_chains() {
        let e = bin(BinOp::Mul, bin(BinOp::FloorDiv, v("a"), v("b")), v("c"));
        assert_eq!(p(&e), "a // b * c");
        let e = bin(BinOp::FloorDiv, v("a"), bin(BinOp::Mul, v("b"), v("c")));
        assert_eq!(p(&e), "a // (b * c)");
        let e = bin(BinOp::FloorMod, v("a"), bin(BinOp::Div, v("b"), v("c")));
        assert_eq!(p(&e), "a % (b / c)");
    }

    #[test]
    fn unary_operators() {
        let e = un(UnOp::Neg, bin(BinOp::Add, v("a"), v("b")));
        assert_eq!(p(&e), "-(a + b)");
        let e = un(UnOp::Not, bin(BinOp::And, v("a"), v("b")));
        assert_eq!(p(&e), "not (a and b)");
        let e = un(UnOp::Not, bin(BinOp::Lt, v("a"), v("b")));
        assert_eq!(p(&e), "not a < b");
        let e = bin(BinOp::And, un(UnOp::Not, v("a")), v("b"));
        assert_eq!(p(&e), "not a and b");
        let e = bin(BinOp::Mul, un(UnOp::Neg, v("a")), v("b"));
        assert_eq!(p(&e), "-a * b");
        let e = un(UnOp::Neg, bin(BinOp::Mul, v("a"), v("b")));
        assert_eq!(p(&e), "-(a * b)");
        let e = un(UnOp::Neg, un(UnOp::Neg, v("a")));
        assert_eq!(p(&e), "--a");
    }

    #[test]
    fn comparisons_never_chain() {
        let e = bin(BinOp::Eq, bin(BinOp::Lt, v("a"), v("b")), v("c"));
        assert_eq!(p(&e), "(a < b) == c");
        let e = bin(BinOp::Eq, v("c"), bin(BinOp::Lt, v("a"), v("b")));
        assert_eq!(p(&e), "c == (a < b)");
        let e = bin(BinOp::Lt, bin(BinOp::Add, v("a"), v("b")), v("c"));
        assert_eq!(p(&e), "a + b < c");
    }

    #[test]
    fn logical_operators() {
        let e = bin(BinOp::Or, v("a"), bin(BinOp::And, v("b"), v("c")));
        assert_eq!(p(&e), "a or b and c");
        let e = bin(BinOp::And, bin(BinOp::Or, v("a"), v("b")), v("c"));
        assert_eq!(p(&e), "(a or b) and c");
        let e = bin(BinOp::Or, v("a"), bin(BinOp::Or, v("b"), v("c")));
        assert_eq!(p(&e), "a or (b or c)");
        let e = bin(
            BinOp::And,
            bin(BinOp::Lt, v("i"), v("n")),
            bin(BinOp::Ge, v("j"), Expr::int(0)),
        );
        assert_eq!(p(&e), "i < n and j >= 0");
    }

    /// TileLang's `-(2**30)` (sparse MLA's running-max start) prints so that it parses back
    /// to the same IR, as `-5` and `--5` do.
    #[test]
    fn a_minus_on_a_literal_parses_back_equal() {
        let src = "@T.prim_func\ndef f(A: T.Tensor((4,), \"float32\")):\n    \
                   with T.Kernel(1, threads=4) as bx:\n        for i in T.Parallel(4):\n            \
                   A[i] = A[i] * -(2**30) - -(5) + -0.5 * --5\n";
        let parsed = |text: &str| match crate::parse(text) {
            Ok(f) => f,
            Err(d) => panic!("{text}: {d:?}"),
        };
        let f = parsed(src);
        let text = crate::printer::print_func(&f);
        assert!(text.contains("-(1073741824)"), "{text}");
        assert_eq!(parsed(&text), f, "{text}");
    }

    #[test]
    fn negative_literals() {
        let e = bin(BinOp::Sub, v("a"), Expr::int(-5));
        assert_eq!(p(&e), "a - -5");
        let e = bin(BinOp::FloorDiv, Expr::int(-5), Expr::int(2));
        assert_eq!(p(&e), "-5 // 2");
        let e = bin(
            BinOp::Mul,
            v("a"),
            Expr::new(ExprKind::Float(-0.5), Span::DUMMY),
        );
        assert_eq!(p(&e), "a * -0.5");
        let e = un(UnOp::Neg, Expr::int(-5));
        assert_eq!(p(&e), "--5");
        // A minus on a non-negative literal (`-(2**30)` as TileLang writes it) is not the
        // negative literal `-1073741824`, which is what `-1073741824` reads back as.
        let e = un(UnOp::Neg, Expr::int(1 << 30));
        assert_eq!(p(&e), "-(1073741824)");
        let e = bin(BinOp::Sub, v("a"), un(UnOp::Neg, Expr::int(5)));
        assert_eq!(p(&e), "a - -(5)");
        let half = Expr::new(ExprKind::Float(0.5), Span::DUMMY);
        assert_eq!(p(&un(UnOp::Neg, half)), "-(0.5)");
    }

    #[test]
    fn literals() {
        let f = |x: f64| p(&Expr::new(ExprKind::Float(x), Span::DUMMY));
        assert_eq!(f(1.0), "1.0");
        assert_eq!(f(0.125), "0.125");
        assert_eq!(f(1e20), "1e20");
        assert_eq!(f(1.5e-7), "1.5e-7");
        assert_eq!(f(f64::INFINITY), "float(\"inf\")");
        assert_eq!(f(f64::NEG_INFINITY), "float(\"-inf\")");
        assert_eq!(f(f64::NAN), "float(\"nan\")");
        assert_eq!(f(-f64::NAN), "float(\"nan\")");
        assert_eq!(f(-0.0), "-0.0");
        // A non-finite literal is a call, an atom: no parentheses as an operand.
        let neg_inf = Expr::new(ExprKind::Float(f64::NEG_INFINITY), Span::DUMMY);
        assert_eq!(p(&bin(BinOp::Sub, v("a"), neg_inf)), "a - float(\"-inf\")");
        assert_eq!(p(&Expr::new(ExprKind::Bool(true), Span::DUMMY)), "True");
        assert_eq!(p(&Expr::new(ExprKind::Bool(false), Span::DUMMY)), "False");
        assert_eq!(p(&Expr::int(9_000_000_000)), "9000000000");
    }

    #[test]
    fn calls_and_loads() {
        let load = Expr::new(
            ExprKind::Load {
                buffer: "A".into(),
                indices: vec![bin(BinOp::Add, v("i"), Expr::int(1)), v("j")],
            },
            Span::DUMMY,
        );
        assert_eq!(p(&load), "A[i + 1, j]");
        let e = bin(
            BinOp::Mul,
            bin(BinOp::Min, bin(BinOp::Add, v("a"), v("b")), v("c")),
            bin(BinOp::CeilDiv, v("n"), Expr::int(128)),
        );
        assert_eq!(p(&e), "T.min(a + b, c) * T.ceildiv(n, 128)");
        let e = bin(BinOp::Max, v("a"), v("b"));
        assert_eq!(p(&e), "T.max(a, b)");
        let cast = Expr::new(ExprKind::Cast(DType::Float16, Box::new(load)), Span::DUMMY);
        assert_eq!(p(&cast), "T.cast(A[i + 1, j], \"float16\")");
        let sel = Expr::new(
            ExprKind::Select(
                Box::new(bin(BinOp::Lt, v("i"), v("n"))),
                Box::new(cast),
                Box::new(Expr::new(ExprKind::Float(0.0), Span::DUMMY)),
            ),
            Span::DUMMY,
        );
        assert_eq!(
            p(&sel),
            "T.if_then_else(i < n, T.cast(A[i + 1, j], \"float16\"), 0.0)"
        );
        // A call is an atom: it needs no parentheses as an operand.
        let e = un(UnOp::Neg, sel);
        assert!(p(&e).starts_with("-T.if_then_else("));
    }
}
