//! Fresh names. Names are identities in the IR, so a pass that introduces a variable takes
//! a name no binder, use or buffer of the function has: `base`, else `base_1`, `base_2`, …
//! (`tlc_ir::uniquify::Names`).

use std::collections::HashMap;
use tlc_ir::visit::{child_bodies_mut, map_body_exprs};
use tlc_ir::{BinOp, Expr, ExprKind, Span, Stmt, StmtKind};

/// The names taken in one function, and a source of new ones (`base`, else `base_N`): the
/// IR crate's one definition, shared with the front end's `uniquify`.
pub use tlc_ir::uniquify::Names as NameSet;

/// Gives every let and loop variable bound in `body` a fresh name, recording old → new
/// (for passes that copy a body: `unroll`, `inject-software-pipeline`).
pub(crate) fn rename_binders(
    body: &mut [Stmt],
    names: &mut NameSet,
    renames: &mut HashMap<String, String>,
) {
    for stmt in body {
        match &mut stmt.kind {
            StmtKind::Let { var, .. } => {
                let fresh = names.fresh(base(&var.name));
                renames.insert(std::mem::replace(&mut var.name, fresh.clone()), fresh);
            }
            StmtKind::For(f) => {
                let fresh = names.fresh(base(&f.var.name));
                renames.insert(std::mem::replace(&mut f.var.name, fresh.clone()), fresh);
            }
            _ => {}
        }
        for child in child_bodies_mut(stmt) {
            rename_binders(child, names, renames);
        }
    }
}

/// Gives every let and loop variable bound in `body` a fresh name and renames its uses:
/// what a second copy of a body needs before it joins the first in one scope (names are
/// identities: a builder that instantiates a body once per register slot must not bind
/// the body's `jj` twice).
pub(crate) fn freshen(body: &mut [Stmt], names: &mut NameSet) {
    let mut renames = HashMap::new();
    rename_binders(body, names, &mut renames);
    if renames.is_empty() {
        return;
    }
    tlc_ir::visit::map_body_exprs(body, &mut |e| match &e.kind {
        ExprKind::Var(n) => match renames.get(n) {
            Some(fresh) => Expr::new(ExprKind::Var(fresh.clone()), e.span),
            None => e,
        },
        _ => e,
    });
}

/// `x` for `x_12`, so copies of copies are `x_1`, `x_2`, … rather than `x_1_1`.
fn base(name: &str) -> &str {
    match name.rsplit_once('_') {
        Some((stem, digits))
            if !stem.is_empty()
                && !digits.is_empty()
                && digits.bytes().all(|b| b.is_ascii_digit()) =>
        {
            stem
        }
        _ => name,
    }
}

/// A copy of `body` with the variable `var` replaced by `value` and fresh names for the
/// variables it binds (copies share a scope: an unrolled iteration, the k-tile a deferred
/// gemm is issued for). Binary operations are rebuilt so that literal operands fold
/// (`0 % 4`), as the parser folds them: the printed IR parses back.
pub fn instantiate(body: &[Stmt], var: &str, value: &Expr, names: &mut NameSet) -> Vec<Stmt> {
    instantiate_with(body, (var, value), names, Expr::binary)
}

/// [`instantiate`] with binary operations rebuilt by `rebuild` (inject-software-pipeline's
/// stage copies also drop `x + 0` and `x * 1`: `tlc_ir::build::bin_at`).
pub fn instantiate_with(
    body: &[Stmt],
    (var, value): (&str, &Expr),
    names: &mut NameSet,
    rebuild: fn(BinOp, Expr, Expr, Span) -> Expr,
) -> Vec<Stmt> {
    let mut copy = body.to_vec();
    let mut renames: HashMap<String, String> = HashMap::new();
    rename_binders(&mut copy, names, &mut renames);
    // Each node is taken by value (its children already rebuilt), so a binary node's
    // operands move into `rebuild` rather than being cloned at every level.
    map_body_exprs(&mut copy, &mut |e| match e.kind {
        ExprKind::Var(n) if n == var => {
            let mut v = value.clone();
            v.span = e.span;
            v
        }
        ExprKind::Var(n) => match renames.get(&n) {
            Some(fresh) => Expr::new(ExprKind::Var(fresh.clone()), e.span),
            None => Expr::new(ExprKind::Var(n), e.span),
        },
        ExprKind::Binary(op, a, b) => rebuild(op, *a, *b, e.span),
        kind => Expr::new(kind, e.span),
    });
    copy
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_names_avoid_everything_taken() {
        let func = tlc_ir::parse(
            "@T.prim_func\ndef f(A: T.Tensor((8,), \"float32\")):\n    with T.Kernel(1, threads=1) as bx:\n        for i in T.serial(8):\n            x = i + 1\n            A[i] = 0.0\n",
        )
        .unwrap();
        let mut names = NameSet::of(&func);
        assert_eq!(names.fresh("i"), "i_1");
        assert_eq!(names.fresh("i"), "i_2");
        assert_eq!(names.fresh("x"), "x_1");
        assert_eq!(names.fresh("A"), "A_1");
        assert_eq!(names.fresh("bx"), "bx_1");
        assert_eq!(names.fresh("y"), "y");
        assert_eq!(names.fresh("y"), "y_1");
    }

    #[test]
    fn freshen_renames_binders_and_their_uses_only() {
        let mut func = tlc_ir::parse(
            "@T.prim_func\ndef f(A: T.Tensor((8,), \"float32\")):\n    with T.Kernel(1, threads=1) as bx:\n        for jj in T.serial(8):\n            x = jj + bx\n            A[x % 8] = 0.0\n",
        )
        .unwrap();
        let mut names = NameSet::of(&func);
        let StmtKind::Kernel(k) = &mut func.body[0].kind else {
            panic!("a kernel");
        };
        // Two copies of the loop in one scope: verified only with the second freshened.
        let mut copy = k.body.clone();
        freshen(&mut copy, &mut names);
        k.body.extend(copy);
        let text = tlc_ir::printer::print_func(&func);
        assert!(text.contains("for jj_1 in T.serial(8):"), "{text}");
        assert!(text.contains("x_1 = jj_1 + bx"), "{text}");
        assert!(text.contains("A[x_1 % 8] = 0.0"), "{text}");
        assert!(tlc_ir::verifier::verify(&func).is_ok(), "{text}");
    }
}
