//! The tile-level kernel with its unordered iterations run the other way round: every
//! `T.Parallel` loop and every grid dimension reversed.
//!
//! The tile-level interpreter runs a `T.Parallel` loop's iterations in order and applies
//! the blocks' writes in linear block order, so a kernel whose iterations or blocks write
//! one element twice (or read what another writes) has the result of that one order; the
//! GPU promises none. The differential compares the compiled IR only with kernels whose
//! result is the same under the reversed orders: a kernel that differs from its reversal
//! depends on an order nobody promised (`differential.rs`).

use tlc_ir::visit::map_body_exprs;
use tlc_ir::{BinOp, Expr, ExprKind, ForKind, PrimFunc, Span, Stmt, StmtKind};

/// `func` with every `T.Parallel` loop `for v in T.Parallel(a, b)` running `v = b − 1, …, a`
/// and every block index `bx` of a grid of `g` running `g − 1, …, 0`: each use of `v` in the
/// body becomes `a + b − 1 − v` (of `bx`, `g − 1 − bx`).
pub fn reversed(func: &PrimFunc) -> PrimFunc {
    let mut out = func.clone();
    reverse_body(&mut out.body);
    out
}

fn reverse_body(body: &mut [Stmt]) {
    for stmt in body.iter_mut() {
        match &mut stmt.kind {
            StmtKind::Kernel(k) => {
                reverse_body(&mut k.body);
                for (var, extent) in k.block_vars.iter().zip(&k.grid) {
                    let last = sub(extent.clone(), Expr::int(1));
                    substitute(&mut k.body, &var.name, &last);
                }
            }
            StmtKind::For(f) => {
                reverse_body(&mut f.body);
                if f.kind == ForKind::Parallel {
                    let last = sub(
                        Expr::binary(BinOp::Add, f.start.clone(), f.stop.clone(), Span::DUMMY),
                        Expr::int(1),
                    );
                    substitute(&mut f.body, &f.var.name, &last);
                }
            }
            StmtKind::While { body, .. } => reverse_body(body),
            StmtKind::If {
                then_body,
                else_body,
                ..
            } => {
                reverse_body(then_body);
                reverse_body(else_body);
            }
            _ => {}
        }
    }
}

fn sub(a: Expr, b: Expr) -> Expr {
    Expr::binary(BinOp::Sub, a, b, Span::DUMMY)
}

/// Every use of `var` in `body` → `last − var`.
fn substitute(body: &mut [Stmt], var: &str, last: &Expr) {
    map_body_exprs(body, &mut |e| match &e.kind {
        ExprKind::Var(n) if n == var => {
            sub(last.clone(), Expr::new(ExprKind::Var(n.clone()), e.span))
        }
        _ => e,
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use tlc_ir::interp::{run, RunOptions};

    fn run_b(func: &PrimFunc) -> Result<Vec<f64>, String> {
        let opts = RunOptions {
            seed: 1,
            threads: 1,
        };
        run(func, &HashMap::new(), HashMap::new(), &opts)
            .map(|t| t["B"].to_f64())
            .map_err(|d| d.message)
    }

    fn out(func: &PrimFunc) -> Vec<f64> {
        run_b(func).expect("runs")
    }

    #[test]
    fn reversal_keeps_independent_iterations_and_exposes_racy_ones() {
        let kernel = |store: &str| {
            format!(
                "@T.prim_func\ndef f(A: T.Tensor((8, 16), \"float32\"), B: T.Tensor((8, 16), \"float32\")):\n    with T.Kernel(2, threads=128) as (bx):\n        for i, j in T.Parallel(4, 16):\n            {store}\n"
            )
        };
        let clean =
            tlc_ir::parse(&kernel("B[bx * 4 + i, j] = A[bx * 4 + i, j] * 2.0")).expect("parses");
        assert_eq!(out(&clean), out(&reversed(&clean)));
        // Every iteration writes the same element: the tile level reports the conflict
        // either way (docs/ir.md, Parallel), so the reversal agrees that there is no result.
        let racy = tlc_ir::parse(&kernel("B[0, 0] = A[i, j]")).expect("parses");
        for f in [racy.clone(), reversed(&racy)] {
            let err = run_b(&f).expect_err("a conflict");
            assert!(
                err.contains("iterations of this `T.Parallel` loop conflict"),
                "{err}"
            );
        }
        // Every block writes the same row.
        let blocks = tlc_ir::parse(&kernel("B[i, j] = A[bx * 4 + i, j]")).expect("parses");
        assert_ne!(out(&blocks), out(&reversed(&blocks)));
    }
}
