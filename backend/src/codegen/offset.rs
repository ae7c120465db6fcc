//! Constant parts of index expressions become immediate address offsets: `A[r + 16, c + 8]`
//! is `[%rd + (16 * row + 8) * size]` on the register of `A[r, c]`, so the unrolled copies of
//! an access (the 64 epilogue stores of a gemm, the `mt` / `kk` ldmatrix tiles) share one
//! address register (value-numbered by `memo.rs`) instead of one each.
//!
//! The split is exact in integer arithmetic; it differs from evaluating `r + 16` in int32
//! only where that sum overflows, which no in-bounds access does.

use super::Cg;
use tlc_ir::{BinOp, Expr, ExprKind, UnOp};

impl Cg {
    /// `e = rest + c` with `c` constant: `(rest, c)`, `rest` `None` when it is 0. Splits
    /// through `+`, `-`, negation, products with a constant and floor division by a
    /// constant that divides `c`.
    pub(super) fn split_const(&self, e: &Expr) -> (Option<Expr>, i64) {
        if let Some(v) = self.const_eval(e) {
            return (None, v);
        }
        let whole = (Some(e.clone()), 0);
        let node = |kind| Expr::new(kind, e.span);
        match &e.kind {
            ExprKind::Binary(op @ (BinOp::Add | BinOp::Sub), a, b) => {
                let (va, ca) = self.split_const(a);
                let (vb, cb) = self.split_const(b);
                let c = if *op == BinOp::Add {
                    ca.checked_add(cb)
                } else {
                    ca.checked_sub(cb)
                };
                let Some(c) = c else { return whole };
                let v = match (va, vb) {
                    (va, None) => va,
                    (None, Some(vb)) if *op == BinOp::Add => Some(vb),
                    (None, Some(vb)) => Some(node(ExprKind::Unary(UnOp::Neg, Box::new(vb)))),
                    (Some(va), Some(vb)) => {
                        Some(node(ExprKind::Binary(*op, Box::new(va), Box::new(vb))))
                    }
                };
                (v, c)
            }
            ExprKind::Unary(UnOp::Neg, a) => {
                let (v, c) = self.split_const(a);
                match c.checked_neg() {
                    Some(c) => (v.map(|v| node(ExprKind::Unary(UnOp::Neg, Box::new(v)))), c),
                    None => whole,
                }
            }
            ExprKind::Binary(BinOp::Mul, a, b) => {
                let (x, k) = match (self.const_eval(a), self.const_eval(b)) {
                    (_, Some(k)) => (a, k),
                    (Some(k), _) => (b, k),
                    _ => return whole,
                };
                let (v, c) = self.split_const(x);
                let Some(c) = c.checked_mul(k) else {
                    return whole;
                };
                let v = v.map(|v| {
                    node(ExprKind::Binary(
                        BinOp::Mul,
                        Box::new(v),
                        Box::new(Expr::int(k)),
                    ))
                });
                (v, c)
            }
            ExprKind::Binary(BinOp::FloorDiv, a, b) => {
                let Some(k) = self.const_eval(b).filter(|k| *k > 0) else {
                    return whole;
                };
                match self.split_const(a) {
                    // floor((v + q k) / k) = floor(v / k) + q.
                    (Some(v), c) if c % k == 0 => (
                        Some(node(ExprKind::Binary(
                            BinOp::FloorDiv,
                            Box::new(v),
                            Box::new(Expr::int(k)),
                        ))),
                        c / k,
                    ),
                    _ => whole,
                }
            }
            _ => whole,
        }
    }
}
