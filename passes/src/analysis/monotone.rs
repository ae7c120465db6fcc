//! Which way an integer expression moves as one variable grows, every other variable held
//! fixed: the shape of a block's work as a function of its block index (`longest-first`
//! launches the heaviest blocks first when the work grows with the index).
//!
//! The answer is a [`Trend`] read off the syntax, no arithmetic: a variable rises with
//! itself; sums, `T.min` / `T.max` and the arms of a select whose condition does not move
//! combine their operands' trends; a difference, or a product with a negative constant,
//! flips one; floor, ceiling and truncating division by a positive constant and casts
//! keep it (each is monotone); anything else that mentions the variable is
//! [`Trend::Unknown`]. Values that may wrap are not modelled: a trend is a fact about the
//! exact integers, which is all a scheduling heuristic needs (no result depends on it).

use std::collections::HashMap;
use tlc_ir::verifier::{const_bool, const_int};
use tlc_ir::{BinOp, Expr, ExprKind, UnOp};

/// How a value moves as the variable grows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trend {
    /// Does not depend on it.
    Flat,
    /// Never decreases.
    Rising,
    /// Never increases.
    Falling,
    /// May do either.
    Unknown,
}

impl Trend {
    /// The trend of a sum (and of a min, a max, a choice between two values by a fixed
    /// condition) of values moving as `self` and `other`.
    pub fn join(self, other: Trend) -> Trend {
        use Trend::*;
        match (self, other) {
            (Flat, t) | (t, Flat) => t,
            (Rising, Rising) => Rising,
            (Falling, Falling) => Falling,
            _ => Unknown,
        }
    }

    /// The trend of the negated value.
    pub fn flip(self) -> Trend {
        match self {
            Trend::Rising => Trend::Falling,
            Trend::Falling => Trend::Rising,
            t => t,
        }
    }
}

/// How `e` moves as `var` grows. `lets` holds the trends of the let-bound variables `e`
/// may mention; every other variable is held fixed ([`Trend::Flat`]); a load is
/// [`Trend::Unknown`] (its value is data).
pub fn trend(e: &Expr, var: &str, lets: &HashMap<String, Trend>) -> Trend {
    use Trend::*;
    match &e.kind {
        ExprKind::Int(_) | ExprKind::Float(_) | ExprKind::Bool(_) => Flat,
        ExprKind::Var(name) if name == var => Rising,
        ExprKind::Var(name) => lets.get(name).copied().unwrap_or(Flat),
        ExprKind::Load { .. } => Unknown,
        ExprKind::Unary(UnOp::Neg, a) => trend(a, var, lets).flip(),
        ExprKind::Cast(_, a) => trend(a, var, lets),
        // Bits read as another dtype follow no order (a float's bits as an int, and back).
        ExprKind::Reinterpret(_, a) => match trend(a, var, lets) {
            Flat => Flat,
            _ => Unknown,
        },
        ExprKind::Select(c, a, b) => match const_bool(c) {
            Some(true) => trend(a, var, lets),
            Some(false) => trend(b, var, lets),
            None if trend(c, var, lets) == Flat => trend(a, var, lets).join(trend(b, var, lets)),
            None => Unknown,
        },
        ExprKind::Binary(op, a, b) => {
            let (ta, tb) = (trend(a, var, lets), trend(b, var, lets));
            match op {
                BinOp::Add | BinOp::Min | BinOp::Max => ta.join(tb),
                BinOp::Sub => ta.join(tb.flip()),
                BinOp::Mul => match (const_int(a), const_int(b)) {
                    (_, Some(c)) => scaled(ta, c),
                    (Some(c), _) => scaled(tb, c),
                    _ => flat_or_unknown(ta, tb),
                },
                BinOp::FloorDiv | BinOp::CeilDiv | BinOp::Div => match const_int(b) {
                    Some(c) if c > 0 => ta,
                    _ => flat_or_unknown(ta, tb),
                },
                _ => flat_or_unknown(ta, tb),
            }
        }
        ExprKind::Unary(_, a) => flat_or_unknown(trend(a, var, lets), Flat),
        ExprKind::Math(_, args) => args
            .iter()
            .map(|a| trend(a, var, lets))
            .fold(Flat, flat_or_unknown),
    }
}

/// `t` times the constant `c`.
fn scaled(t: Trend, c: i64) -> Trend {
    match c {
        0 => Trend::Flat,
        c if c > 0 => t,
        _ => t.flip(),
    }
}

/// A value built from operands by an operation not known to be monotone: flat when they
/// all are.
fn flat_or_unknown(a: Trend, b: Trend) -> Trend {
    if a == Trend::Flat && b == Trend::Flat {
        Trend::Flat
    } else {
        Trend::Unknown
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The trend in `bx` of `text`, with `up` a let that rises with it.
    fn of(text: &str) -> Trend {
        let lets = HashMap::from([("up".to_string(), Trend::Rising)]);
        trend(&crate::analysis::test_expr(text), "bx", &lets)
    }

    #[test]
    fn reads_the_causal_trip_count_and_its_neighbours() {
        use Trend::*;
        assert_eq!(of("T.min(32, T.ceildiv((bx + 1) * 128, 128))"), Rising);
        assert_eq!(
            of("T.min(T.ceildiv(seq_kv, 64), T.ceildiv((bx + 1) * 64 + (seq_kv - seq_q), 64))"),
            Rising
        );
        assert_eq!(
            of("T.if_then_else(1 == 1, T.min(32, T.ceildiv((bx + 1) * 128, 128)), 32)"),
            Rising
        );
        assert_eq!(
            of("T.if_then_else(0 == 1, T.min(32, T.ceildiv((bx + 1) * 128, 128)), 32)"),
            Flat
        );
        assert_eq!(
            of("T.if_then_else(c == 1, T.ceildiv(bx * 64, 128), 32)"),
            Rising
        );
        assert_eq!(of("32 - bx"), Falling);
        assert_eq!(of("up * 2 - bx * -3"), Rising);
        assert_eq!(of("T.ceildiv(n, 64) + by"), Flat);
        // Not monotone, or not known to be.
        assert_eq!(of("bx % 4"), Unknown);
        assert_eq!(of("bx * bx"), Unknown);
        assert_eq!(of("bx - up"), Unknown);
        assert_eq!(of("32 // bx"), Unknown);
        assert_eq!(of("T.if_then_else(bx < 4, 8, 1)"), Unknown);
        assert_eq!(of("A[bx]"), Unknown);
        assert_eq!(of("A[by]"), Unknown);
    }
}
