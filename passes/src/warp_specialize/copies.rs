//! Copies of a consumer's code for one k-tile (the deferred schedule issues k-tile
//! `k - 1`'s second gemm beside k-tile `k`'s first, `deferred_gemm.rs`).

use crate::names::NameSet;
use tlc_ir::visit::map_body_exprs;
use tlc_ir::{Expr, ExprKind, Stmt};

/// A copy of `code` for k-tile `k` (the loop variable `var` replaced by it), its binders
/// renamed (copies share a scope) and its constant subexpressions folded (`0 % 4`, as the
/// parser folds them: the printed IR parses back).
pub(super) fn copy_for(code: &[Stmt], (var, k): (&str, &Expr), names: &mut NameSet) -> Vec<Stmt> {
    let mut out = code.to_vec();
    let mut renames = std::collections::HashMap::new();
    crate::names::rename_binders(&mut out, names, &mut renames);
    map_body_exprs(&mut out, &mut |e| match &e.kind {
        ExprKind::Var(n) if n == var => {
            let mut v = k.clone();
            v.span = e.span;
            v
        }
        ExprKind::Var(n) => match renames.get(n) {
            Some(fresh) => Expr::new(ExprKind::Var(fresh.clone()), e.span),
            None => e,
        },
        ExprKind::Binary(op, l, r) => Expr::binary(*op, (**l).clone(), (**r).clone(), e.span),
        _ => e,
    });
    out
}
