//! Affine forms of integer expressions: `Σ cᵢ·atomᵢ + c₀`, where an atom is a variable or any
//! non-affine subexpression (compared by its printed text). Enough to see that
//! `(bx * 64 + 64) - (bx * 64 + 32)` is 32, which the parser needs to turn a slice `a:b` into
//! an extent; the e-graph simplifier of the pass pipeline does the general job.

use crate::ir::{BinOp, Expr, ExprKind, UnOp};
use std::collections::BTreeMap;

/// `constant + Σ coefficient · atom`, atoms keyed by their canonical text.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Affine {
    constant: i64,
    terms: BTreeMap<String, i64>,
}

impl Affine {
    fn atom(e: &Expr) -> Affine {
        Affine {
            constant: 0,
            terms: BTreeMap::from([(e.to_string(), 1)]),
        }
    }

    fn scaled(mut self, k: i64) -> Option<Affine> {
        self.constant = self.constant.checked_mul(k)?;
        for c in self.terms.values_mut() {
            *c = c.checked_mul(k)?;
        }
        Some(self)
    }

    fn plus(mut self, other: Affine) -> Option<Affine> {
        self.constant = self.constant.checked_add(other.constant)?;
        for (atom, c) in other.terms {
            let slot = self.terms.entry(atom).or_insert(0);
            *slot = slot.checked_add(c)?;
        }
        self.terms.retain(|_, c| *c != 0);
        Some(self)
    }

    fn of(e: &Expr) -> Option<Affine> {
        match &e.kind {
            ExprKind::Int(v) => Some(Affine {
                constant: *v,
                terms: BTreeMap::new(),
            }),
            ExprKind::Unary(UnOp::Neg, a) => Affine::of(a)?.scaled(-1),
            ExprKind::Binary(BinOp::Add, a, b) => Affine::of(a)?.plus(Affine::of(b)?),
            ExprKind::Binary(BinOp::Sub, a, b) => Affine::of(a)?.plus(Affine::of(b)?.scaled(-1)?),
            ExprKind::Binary(BinOp::Mul, a, b) => match (a.as_int(), b.as_int()) {
                (Some(k), _) => Affine::of(b)?.scaled(k),
                (_, Some(k)) => Affine::of(a)?.scaled(k),
                _ => Some(Affine::atom(e)),
            },
            _ => Some(Affine::atom(e)),
        }
    }
}

/// `a - b` when it is the same integer for every value of the variables.
pub fn constant_difference(a: &Expr, b: &Expr) -> Option<i64> {
    let diff = Affine::of(a)?.plus(Affine::of(b)?.scaled(-1)?)?;
    diff.terms.is_empty().then_some(diff.constant)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::span::Span;

    fn bin(op: BinOp, a: Expr, b: Expr) -> Expr {
        Expr::new(ExprKind::Binary(op, Box::new(a), Box::new(b)), Span::DUMMY)
    }

    #[test]
    fn cancels_common_terms() {
        let bx64 = bin(BinOp::Mul, Expr::var("bx"), Expr::int(64));
        let hi = bin(BinOp::Add, bx64.clone(), Expr::int(64));
        let lo = bin(BinOp::Add, bx64, Expr::int(32));
        assert_eq!(constant_difference(&hi, &lo), Some(32));
        let ko = bin(
            BinOp::Mul,
            Expr::int(2),
            bin(BinOp::Add, Expr::var("k"), Expr::int(3)),
        );
        let ko2 = bin(
            BinOp::Add,
            bin(BinOp::Mul, Expr::var("k"), Expr::int(2)),
            Expr::int(1),
        );
        assert_eq!(constant_difference(&ko, &ko2), Some(5));
    }

    #[test]
    fn non_constant_differences_are_none() {
        let a = bin(BinOp::Add, Expr::var("i"), Expr::int(4));
        assert_eq!(constant_difference(&a, &Expr::var("j")), None);
        let fd = bin(BinOp::FloorDiv, Expr::var("i"), Expr::int(2));
        let fd_plus = bin(BinOp::Add, fd.clone(), Expr::int(8));
        assert_eq!(constant_difference(&fd_plus, &fd), Some(8));
        let big = bin(BinOp::Mul, Expr::var("i"), Expr::int(i64::MAX));
        assert_eq!(
            constant_difference(&bin(BinOp::Mul, big, Expr::int(4)), &Expr::int(0)),
            None
        );
    }
}
