//! `unroll`: every `T.unroll` loop with constant bounds becomes one copy of its body per
//! iteration, in order, with the loop variable replaced by its value (integer subexpressions
//! fold again). Names are identities, so every let and loop variable bound inside a copy
//! gets a fresh name of its own (`x`, `x_1`, …). Loops nested in an unrolled body are
//! handled after the substitution, so an inner `T.unroll(i)` whose bound was the outer
//! variable unrolls too. A `T.unroll` loop whose bounds are not constant is left alone.

use crate::context::PassContext;
use crate::names::{rename_binders, NameSet};
use crate::pass::Pass;
use std::collections::HashMap;
use tlc_ir::verifier::const_int;
use tlc_ir::visit::{child_bodies_mut, map_body_exprs};
use tlc_ir::{Diagnostic, Expr, ExprKind, ForKind, PrimFunc, Stmt, StmtKind};

/// The most statements-copies one loop may produce (trip count × body length): beyond it
/// the pass reports an error instead of growing the IR without bound.
pub const MAX_UNROLLED_STMTS: i64 = 65_536;

pub struct Unroll;

impl Pass for Unroll {
    fn name(&self) -> &'static str {
        "unroll"
    }

    fn description(&self) -> &'static str {
        "T.unroll loops with constant bounds -> one renamed copy of the body per iteration"
    }

    fn run(&self, mut func: PrimFunc, _cx: &PassContext) -> Result<PrimFunc, Vec<Diagnostic>> {
        let mut names = NameSet::of(&func);
        let mut errors = Vec::new();
        func.body = unroll_body(std::mem::take(&mut func.body), &mut names, &mut errors);
        if errors.is_empty() {
            Ok(func)
        } else {
            Err(errors)
        }
    }
}

fn unroll_body(body: Vec<Stmt>, names: &mut NameSet, errors: &mut Vec<Diagnostic>) -> Vec<Stmt> {
    let mut out = Vec::with_capacity(body.len());
    for mut stmt in body {
        let bounds = match &stmt.kind {
            StmtKind::For(f) if f.kind == ForKind::Unroll => {
                const_int(&f.start).zip(const_int(&f.stop))
            }
            _ => None,
        };
        match (bounds, stmt.kind) {
            (Some((start, stop)), StmtKind::For(f)) => {
                let trips = stop.saturating_sub(start).max(0);
                let size = trips.saturating_mul(f.body.len() as i64);
                if size > MAX_UNROLLED_STMTS {
                    errors.push(
                        Diagnostic::error(
                            stmt.span,
                            format!(
                                "unrolling this loop would make {size} statements \
                             (limit {MAX_UNROLLED_STMTS})"
                            ),
                        )
                        .with_note("use `T.serial` for long loops"),
                    );
                    continue;
                }
                for value in start..stop {
                    let copy = instantiate(&f.body, &f.var.name, value, names);
                    out.extend(unroll_body(copy, names, errors));
                }
            }
            (_, kind) => {
                stmt.kind = kind;
                for child in child_bodies_mut(&mut stmt) {
                    *child = unroll_body(std::mem::take(child), names, errors);
                }
                out.push(stmt);
            }
        }
    }
    out
}

/// A copy of `body` with `var` = `value` and fresh names for its binders.
fn instantiate(body: &[Stmt], var: &str, value: i64, names: &mut NameSet) -> Vec<Stmt> {
    let mut copy = body.to_vec();
    let mut renames: HashMap<String, String> = HashMap::new();
    rename_binders(&mut copy, names, &mut renames);
    map_body_exprs(&mut copy, &mut |e| match &e.kind {
        ExprKind::Var(n) if n == var => Expr::new(ExprKind::Int(value), e.span),
        ExprKind::Var(n) => match renames.get(n) {
            Some(fresh) => Expr::new(ExprKind::Var(fresh.clone()), e.span),
            None => e,
        },
        // Rebuild binaries so that literal operands fold, as in the parser.
        ExprKind::Binary(op, a, b) => Expr::binary(*op, (**a).clone(), (**b).clone(), e.span),
        _ => e,
    });
    copy
}
