//! When a region gets a `T.vectorized` loop. The vector is 16 bytes (`V = 16 / element
//! size`); a region is vectorized only when every vector provably covers `V` contiguous,
//! `V`-aligned elements of every buffer it touches: the innermost extent is a constant
//! multiple of `V`, every access's innermost index is `<offset> + lane` with the offset a
//! provable multiple of `V` (`multiple_of`), and the innermost dimension of every buffer
//! touched is a constant multiple of `V` (so rows stay aligned). Anything unproven gives
//! `V = 1`, which is always correct.

use tlc_ir::verifier::const_int;
use tlc_ir::{BinOp, BufferDecl, Expr, ExprKind, UnOp};

/// Bytes per vector access (`ld.v4.b32`).
pub(crate) const VECTOR_BYTES: i64 = 16;

/// The vector width for elements of `bytes` bytes.
pub(crate) fn width(bytes: u32) -> i64 {
    (VECTOR_BYTES / i64::from(bytes.max(1))).max(1)
}

/// Whether `e` is a multiple of `k` for every value of its variables: literals that are,
/// sums and differences of such, products with a factor that is.
pub(crate) fn multiple_of(e: &Expr, k: i64) -> bool {
    if k <= 1 {
        return true;
    }
    match &e.kind {
        ExprKind::Int(v) => v % k == 0,
        ExprKind::Unary(UnOp::Neg, a) => multiple_of(a, k),
        ExprKind::Binary(BinOp::Add | BinOp::Sub, a, b) => multiple_of(a, k) && multiple_of(b, k),
        ExprKind::Binary(BinOp::Mul, a, b) => multiple_of(a, k) || multiple_of(b, k),
        _ => false,
    }
}

/// Whether the innermost dimension of `buf` is a constant multiple of `v`.
pub(crate) fn rows_aligned(buf: &BufferDecl, v: i64) -> bool {
    buf.shape
        .last()
        .and_then(const_int)
        .is_some_and(|n| n > 0 && n % v == 0)
}

/// Whether `e` mentions the variable `var`.
pub(crate) fn mentions(e: &Expr, var: &str) -> bool {
    let mut found = false;
    tlc_ir::visit::for_each_subexpr(e, &mut |x| {
        if matches!(&x.kind, ExprKind::Var(n) if n == var) {
            found = true;
        }
    });
    found
}

/// For an index `offset + var` (or `var + offset`, or `var`) with `offset` free of `var`,
/// the offset.
pub(crate) fn unit_offset(index: &Expr, var: &str) -> Option<Expr> {
    match &index.kind {
        ExprKind::Var(n) if n == var => Some(Expr::int(0)),
        ExprKind::Binary(BinOp::Add, a, b) => {
            if matches!(&b.kind, ExprKind::Var(n) if n == var) && !mentions(a, var) {
                Some((**a).clone())
            } else if matches!(&a.kind, ExprKind::Var(n) if n == var) && !mentions(b, var) {
                Some((**b).clone())
            } else {
                None
            }
        }
        _ => None,
    }
}

/// Whether `e` is provably non-negative: literals ≥ 0 and variables (block indices, loop
/// variables of loops from 0, sizes) combined with `+` and `*`.
pub(crate) fn non_negative(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Int(v) => *v >= 0,
        ExprKind::Var(_) => true,
        ExprKind::Binary(BinOp::Add | BinOp::Mul | BinOp::FloorDiv | BinOp::FloorMod, a, b) => {
            non_negative(a) && non_negative(b)
        }
        _ => false,
    }
}

/// Known value ranges of variables (inclusive): block indices and enclosing loop variables.
pub(crate) type Bounds = std::collections::HashMap<String, (i64, i64)>;

/// An inclusive range containing every value of `e`, when one follows from `bounds` and
/// the literals (`+`, `-`, `*`, floor division and modulo by positive constants).
pub(crate) fn range_of(e: &Expr, bounds: &Bounds) -> Option<(i64, i64)> {
    match &e.kind {
        ExprKind::Int(v) => Some((*v, *v)),
        ExprKind::Var(n) => bounds.get(n).copied(),
        ExprKind::Binary(op, a, b) => {
            let (al, ah) = range_of(a, bounds)?;
            let (bl, bh) = range_of(b, bounds)?;
            match op {
                BinOp::Add => Some((al.checked_add(bl)?, ah.checked_add(bh)?)),
                BinOp::Sub => Some((al.checked_sub(bh)?, ah.checked_sub(bl)?)),
                BinOp::Mul => {
                    let c = [
                        al.checked_mul(bl)?,
                        al.checked_mul(bh)?,
                        ah.checked_mul(bl)?,
                        ah.checked_mul(bh)?,
                    ];
                    Some((*c.iter().min()?, *c.iter().max()?))
                }
                BinOp::FloorDiv if bl == bh && bl > 0 => {
                    Some((tlc_ir::floor_div(al, bl)?, tlc_ir::floor_div(ah, bl)?))
                }
                BinOp::FloorMod if bl == bh && bl > 0 => {
                    if al >= 0 && ah < bl {
                        Some((al, ah))
                    } else {
                        Some((0, bl - 1))
                    }
                }
                _ => None,
            }
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_expr(text: &str) -> Expr {
        let src = format!(
            "@T.prim_func\ndef f(A: T.Tensor((8,), \"int32\")):\n    with T.Kernel(4, threads=1) as bx:\n        for i in T.serial(4):\n            A[0] = {text}\n"
        );
        let func = tlc_ir::parse(&src).unwrap();
        let mut out = None;
        tlc_ir::visit::for_each_stmt(&func.body, &mut |s| {
            if let tlc_ir::StmtKind::Store { value, .. } = &s.kind {
                out = Some(value.clone());
            }
        });
        out.unwrap()
    }

    #[test]
    fn multiples_and_offsets() {
        assert!(multiple_of(&parse_expr("bx * 64 + 32"), 4));
        assert!(!multiple_of(&parse_expr("bx * 64 + 2"), 4));
        assert!(!multiple_of(&parse_expr("bx + 4"), 4));
        assert_eq!(
            unit_offset(&parse_expr("bx * 64 + i"), "i").map(|e| e.to_string()),
            Some("bx * 64".to_string())
        );
        assert_eq!(unit_offset(&parse_expr("i * 2"), "i"), None);
        assert_eq!(unit_offset(&parse_expr("i + i"), "i"), None);
        assert!(non_negative(&parse_expr("bx * 64 + i")));
        assert!(!non_negative(&parse_expr("bx - 1")));
        assert_eq!(width(4), 4);
        assert_eq!(width(2), 8);
        assert_eq!(width(1), 16);
    }
}
