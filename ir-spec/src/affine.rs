//! Polynomial forms of integer expressions: `Σ cᵢ·mᵢ + c₀`, where each monomial `mᵢ` is a
//! product of at most two *atoms* — a variable or any subexpression that is not a sum,
//! difference or product (compared by its printed text). Enough to see that
//! `(bx * 64 + 64) - (bx * 64 + 32)` is 32 and that `(k + 1) * block_N - k * block_N` is
//! `block_N` (a tunable's name until `-D` binds it), which the parser needs to turn a slice
//! `a:b` into an extent; the e-graph simplifier of the pass pipeline does the general job.
//! The identities used (distributivity, commutativity) hold in wrapping integer arithmetic
//! of one width too; index expressions that mix int32 and int64 terms are equal under the
//! verifier's rule that no index wraps.

use crate::ir::{BinOp, Expr, ExprKind, UnOp};
use crate::span::Span;
use std::collections::BTreeMap;

/// The most atoms a monomial multiplies (products of sums expand only that far).
const MAX_DEGREE: usize = 2;
/// The most monomials a product of two sums may expand into.
const MAX_TERMS: usize = 16;

/// `constant + Σ coefficient · monomial`, monomials as sorted lists of atom texts; `atoms`
/// keeps each atom's expression (to build the result back).
#[derive(Clone, Debug, Default)]
struct Poly {
    constant: i64,
    terms: BTreeMap<Vec<String>, i64>,
    atoms: BTreeMap<String, Expr>,
}

impl Poly {
    fn atom(e: &Expr) -> Poly {
        let text = e.to_string();
        Poly {
            constant: 0,
            terms: BTreeMap::from([(vec![text.clone()], 1)]),
            atoms: BTreeMap::from([(text, e.clone())]),
        }
    }

    fn scaled(mut self, k: i64) -> Option<Poly> {
        self.constant = self.constant.checked_mul(k)?;
        for c in self.terms.values_mut() {
            *c = c.checked_mul(k)?;
        }
        self.terms.retain(|_, c| *c != 0);
        Some(self)
    }

    fn plus(mut self, other: Poly) -> Option<Poly> {
        self.constant = self.constant.checked_add(other.constant)?;
        for (m, c) in other.terms {
            let slot = self.terms.entry(m).or_insert(0);
            *slot = slot.checked_add(c)?;
        }
        self.terms.retain(|_, c| *c != 0);
        self.atoms.extend(other.atoms);
        Some(self)
    }

    /// `self · other` expanded, or `None` past [`MAX_DEGREE`] / [`MAX_TERMS`] (the caller
    /// then keeps the product as an atom).
    fn times(&self, other: &Poly) -> Option<Poly> {
        let with_one = |p: &Poly| {
            let mut v: Vec<(Vec<String>, i64)> = p.terms.clone().into_iter().collect();
            if p.constant != 0 {
                v.push((Vec::new(), p.constant));
            }
            v
        };
        let (a, b) = (with_one(self), with_one(other));
        if a.len().saturating_mul(b.len()) > MAX_TERMS {
            return None;
        }
        let mut out = Poly {
            atoms: self.atoms.clone(),
            ..Poly::default()
        };
        out.atoms.extend(other.atoms.clone());
        for (ma, ca) in &a {
            for (mb, cb) in &b {
                let c = ca.checked_mul(*cb)?;
                let mut m: Vec<String> = ma.iter().chain(mb).cloned().collect();
                if m.len() > MAX_DEGREE {
                    return None;
                }
                m.sort();
                if m.is_empty() {
                    out.constant = out.constant.checked_add(c)?;
                } else {
                    let slot = out.terms.entry(m).or_insert(0);
                    *slot = slot.checked_add(c)?;
                }
            }
        }
        out.terms.retain(|_, c| *c != 0);
        Some(out)
    }

    fn of(e: &Expr) -> Option<Poly> {
        match &e.kind {
            ExprKind::Int(v) => Some(Poly {
                constant: *v,
                ..Poly::default()
            }),
            ExprKind::Unary(UnOp::Neg, a) => Poly::of(a)?.scaled(-1),
            ExprKind::Binary(BinOp::Add, a, b) => Poly::of(a)?.plus(Poly::of(b)?),
            ExprKind::Binary(BinOp::Sub, a, b) => Poly::of(a)?.plus(Poly::of(b)?.scaled(-1)?),
            ExprKind::Binary(BinOp::Mul, a, b) => match (a.as_int(), b.as_int()) {
                (Some(k), _) => Poly::of(b)?.scaled(k),
                (_, Some(k)) => Poly::of(a)?.scaled(k),
                _ => Some(
                    Poly::of(a)?
                        .times(&Poly::of(b)?)
                        .unwrap_or_else(|| Poly::atom(e)),
                ),
            },
            _ => Some(Poly::atom(e)),
        }
    }

    /// The polynomial as an expression, if it has at most one monomial:
    /// `c · a₁ · a₂ (+ c₀)`.
    fn single_term(&self, span: Span) -> Option<Expr> {
        let mut it = self.terms.iter();
        let Some((m, c)) = it.next() else {
            return Some(Expr::new(ExprKind::Int(self.constant), span));
        };
        if it.next().is_some() {
            return None;
        }
        let mut e: Option<Expr> = None;
        for text in m {
            let atom = self.atoms.get(text)?.clone();
            e = Some(match e {
                None => atom,
                Some(prev) => Expr::binary(BinOp::Mul, prev, atom, span),
            });
        }
        let mut e = e?;
        if *c != 1 {
            e = Expr::binary(BinOp::Mul, e, Expr::new(ExprKind::Int(*c), span), span);
        }
        if self.constant > 0 {
            e = Expr::binary(
                BinOp::Add,
                e,
                Expr::new(ExprKind::Int(self.constant), span),
                span,
            );
        } else if self.constant < 0 {
            let k = self.constant.checked_neg()?;
            e = Expr::binary(BinOp::Sub, e, Expr::new(ExprKind::Int(k), span), span);
        }
        Some(e)
    }
}

/// `a - b` when it is the same integer for every value of the variables.
pub fn constant_difference(a: &Expr, b: &Expr) -> Option<i64> {
    let diff = Poly::of(a)?.plus(Poly::of(b)?.scaled(-1)?)?;
    diff.terms.is_empty().then_some(diff.constant)
}

/// `a - b` as one term (`block_N`, `2 * n`, `n + 1`) when the difference reduces to one —
/// `(k + 1) * block_N - k * block_N` is `block_N` — else `None`.
pub fn difference(a: &Expr, b: &Expr, span: Span) -> Option<Expr> {
    Poly::of(a)?
        .plus(Poly::of(b)?.scaled(-1)?)?
        .single_term(span)
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn symbolic_differences_reduce_to_one_term() {
        let bn = Expr::var("block_N");
        let hi = bin(
            BinOp::Mul,
            bin(BinOp::Add, Expr::var("k"), Expr::int(1)),
            bn.clone(),
        );
        let lo = bin(BinOp::Mul, Expr::var("k"), bn);
        let d = difference(&hi, &lo, Span::DUMMY).map(|e| e.to_string());
        assert_eq!(d.as_deref(), Some("block_N"));
        assert_eq!(constant_difference(&hi, &lo), None);
        // (k + 2) * n - k * n = 2 n; (k + 1) * n + 3 - k * n = n + 3.
        let n = Expr::var("n");
        let two = bin(
            BinOp::Mul,
            bin(BinOp::Add, Expr::var("k"), Expr::int(2)),
            n.clone(),
        );
        let kn = bin(BinOp::Mul, Expr::var("k"), n.clone());
        let d = difference(&two, &kn, Span::DUMMY).map(|e| e.to_string());
        assert_eq!(d.as_deref(), Some("n * 2"));
        // A negative constant is a subtraction: `1:n` has extent `n - 1`.
        let d = difference(&n, &Expr::int(1), Span::DUMMY).map(|e| e.to_string());
        assert_eq!(d.as_deref(), Some("n - 1"));
        // Two monomials left: no single term.
        assert!(difference(&two, &Expr::var("m"), Span::DUMMY).is_none());
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
