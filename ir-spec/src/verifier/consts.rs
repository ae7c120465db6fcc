//! Compile-time integer values of expressions.

use crate::ir::{compare_int, fold_int, BinOp, Expr, ExprKind, UnOp};

/// The value of `e` when it is an integer constant after folding: literals, unary minus,
/// the integer operators (with the IR's floor / truncation semantics), `T.min`/`T.max`/
/// `T.ceildiv`, and casts to an integer type that hold the value. `None` for anything that
/// depends on a variable or a buffer, and for undefined results (division by zero, overflow).
pub fn const_int(e: &Expr) -> Option<i64> {
    eval_int(e, &|_| None)
}

/// [`const_int`] with values for some variables (`vars` answers `None` for the others).
pub fn eval_int(e: &Expr, vars: &dyn Fn(&str) -> Option<i64>) -> Option<i64> {
    match &e.kind {
        ExprKind::Int(v) => Some(*v),
        ExprKind::Var(name) => vars(name),
        ExprKind::Unary(UnOp::Neg, a) => eval_int(a, vars)?.checked_neg(),
        ExprKind::Binary(op, a, b) => fold_int(*op, eval_int(a, vars)?, eval_int(b, vars)?),
        ExprKind::Cast(dtype, a) => {
            let v = eval_int(a, vars)?;
            dtype.holds_int(v).then_some(v)
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
        ExprKind::Binary(op, a, b) => compare_int(*op, eval_int(a, vars)?, eval_int(b, vars)?),
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
