//! Compile-time integer values of expressions.

use crate::dtype::DType;
use crate::ir::{compare_int, fold_int, BinOp, Expr, ExprKind, UnOp};

/// The value of `e` when it is an integer constant after folding: literals, unary minus,
/// the integer operators (with the IR's floor / truncation semantics), `T.min`/`T.max`/
/// `T.ceildiv`, and casts to an integer type that hold the value. `None` for anything that
/// depends on a variable or a buffer, and for undefined results (division by zero, overflow).
/// A cast to a narrower or unsigned integer is a constant alone (`T.uint32(1)`) but not as
/// an operand: arithmetic with it runs at its width (`T.cast(100, "int8") + 100` is -56, the
/// literal adopting int8), which the exact arithmetic here does not model.
pub fn const_int(e: &Expr) -> Option<i64> {
    eval_int(e, &|_| None)
}

/// [`const_int`] with values for some variables (`vars` answers `None` for the others; they
/// are int32 or int64 names).
pub fn eval_int(e: &Expr, vars: &dyn Fn(&str) -> Option<i64>) -> Option<i64> {
    eval_typed(e, vars).map(|(v, _)| v)
}

/// The value, and whether its dtype is narrower than int32 or unsigned (an operand that
/// exact arithmetic cannot take).
fn eval_typed(e: &Expr, vars: &dyn Fn(&str) -> Option<i64>) -> Option<(i64, bool)> {
    let wide = |e: &Expr| match eval_typed(e, vars)? {
        (v, false) => Some(v),
        (_, true) => None,
    };
    match &e.kind {
        ExprKind::Int(v) => Some((*v, false)),
        ExprKind::Var(name) => vars(name).map(|v| (v, false)),
        ExprKind::Unary(UnOp::Neg, a) => Some((wide(a)?.checked_neg()?, false)),
        ExprKind::Binary(op, a, b) => Some((fold_int(*op, wide(a)?, wide(b)?)?, false)),
        ExprKind::Cast(dtype, a) => {
            let (v, _) = eval_typed(a, vars)?;
            dtype
                .holds_int(v)
                .then_some((v, !matches!(dtype, DType::Int32 | DType::Int64)))
        }
        _ => None,
    }
}

/// The truth value of a condition with values for its variables, evaluated as the
/// interpreter does (`and` / `or` short-circuit); `None` for what integer evaluation
/// cannot say (a load, a float, a division by zero).
pub fn eval_bool(e: &Expr, vars: &dyn Fn(&str) -> Option<i64>) -> Option<bool> {
    match &e.kind {
        ExprKind::Bool(b) => Some(*b),
        ExprKind::Unary(UnOp::Not, a) => eval_bool(a, vars).map(|b| !b),
        ExprKind::Binary(BinOp::And, a, b) => match eval_bool(a, vars)? {
            false => Some(false),
            true => eval_bool(b, vars),
        },
        ExprKind::Binary(BinOp::Or, a, b) => match eval_bool(a, vars)? {
            true => Some(true),
            false => eval_bool(b, vars),
        },
        ExprKind::Binary(op, a, b) => {
            let wide = |e: &Expr| match eval_typed(e, vars)? {
                (v, false) => Some(v),
                (_, true) => None,
            };
            compare_int(*op, wide(a)?, wide(b)?)
        }
        _ => None,
    }
}

/// [`eval_bool`] of a condition on constants alone (`0 == 1`).
pub fn const_bool(e: &Expr) -> Option<bool> {
    eval_bool(e, &|_| None)
}

#[cfg(test)]
mod tests {
    use super::const_int;
    use crate::dtype::DType;
    use crate::ir::{BinOp, Expr, ExprKind, UnOp};
    use crate::span::Span;

    fn raw(op: BinOp, a: Expr, b: Expr) -> Expr {
        Expr::new(ExprKind::Binary(op, Box::new(a), Box::new(b)), Span::DUMMY)
    }

    #[test]
    fn folds_nested_integer_arithmetic() {
        let e = raw(
            BinOp::Add,
            raw(BinOp::FloorDiv, Expr::int(-7), Expr::int(2)),
            Expr::new(
                ExprKind::Unary(UnOp::Neg, Box::new(Expr::int(3))),
                Span::DUMMY,
            ),
        );
        assert_eq!(const_int(&e), Some(-7));
        let e = raw(BinOp::CeilDiv, Expr::int(1000), Expr::int(128));
        assert_eq!(const_int(&e), Some(8));
        let cast = Expr::new(
            ExprKind::Cast(DType::Int8, Box::new(Expr::int(300))),
            Span::DUMMY,
        );
        assert_eq!(const_int(&cast), None);
        let cast = Expr::new(
            ExprKind::Cast(DType::Int64, Box::new(Expr::int(300))),
            Span::DUMMY,
        );
        assert_eq!(const_int(&cast), Some(300));
        // int8 arithmetic wraps at 8 bits: not a constant of the exact arithmetic.
        let narrow = raw(
            BinOp::Add,
            Expr::new(
                ExprKind::Cast(DType::Int8, Box::new(Expr::int(100))),
                Span::DUMMY,
            ),
            Expr::int(100),
        );
        assert_eq!(const_int(&narrow), None);
        let alone = Expr::new(
            ExprKind::Cast(DType::UInt32, Box::new(Expr::int(1))),
            Span::DUMMY,
        );
        assert_eq!(const_int(&alone), Some(1));
        assert_eq!(
            super::const_bool(&raw(BinOp::Gt, narrow, Expr::int(150))),
            None
        );
    }

    #[test]
    fn variables_and_undefined_results_are_not_constant() {
        assert_eq!(
            const_int(&raw(BinOp::Add, Expr::var("n"), Expr::int(1))),
            None
        );
        assert_eq!(
            const_int(&raw(BinOp::FloorMod, Expr::int(1), Expr::int(0))),
            None
        );
        assert_eq!(
            const_int(&raw(BinOp::Mul, Expr::int(i64::MAX), Expr::int(2))),
            None
        );
        assert_eq!(
            const_int(&Expr::new(ExprKind::Float(2.0), Span::DUMMY)),
            None
        );
    }
}
