//! `unroll`: every `T.unroll` loop with constant bounds becomes one copy of its body per
//! iteration, in order, with the loop variable replaced by its value (integer subexpressions
//! fold again). Names are identities, so every let and loop variable bound inside a copy
//! gets a fresh name of its own (`x`, `x_1`, …). Loops nested in an unrolled body are
//! handled after the substitution, so an inner `T.unroll(i)` whose bound was the outer
//! variable unrolls too. A `T.unroll` loop whose bounds are not constant is left alone.
//! The notes (`T.note`) of the body are kept in the first copy only.
//! The copies of a function are bounded ([`MAX_UNROLLED_STMTS`]), counted before any is made.

use crate::context::PassContext;
use crate::names::{instantiate, NameSet};
use crate::pass::Pass;
use tlc_ir::verifier::{const_int, eval_int};
use tlc_ir::visit::{child_bodies_mut, take_notes};
use tlc_ir::{Diagnostic, Expr, ForKind, PrimFunc, Stmt, StmtKind};

/// The most statement copies the pass may make in one function (trip counts × body
/// lengths, nested unrolled loops included): beyond it the pass reports an error at the
/// loop where the budget ran out instead of growing the IR without bound (an inner
/// `T.unroll(r)` under `T.unroll(1, 1000)` makes ~500 000 copies).
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
        let mut budget = MAX_UNROLLED_STMTS;
        func.body = unroll_body(
            std::mem::take(&mut func.body),
            &mut names,
            &mut budget,
            &mut errors,
        );
        if errors.is_empty() {
            Ok(func)
        } else {
            Err(errors)
        }
    }
}

/// `budget`: the statement copies still allowed (negative once the error is reported).
fn unroll_body(
    body: Vec<Stmt>,
    names: &mut NameSet,
    budget: &mut i64,
    errors: &mut Vec<Diagnostic>,
) -> Vec<Stmt> {
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
                if *budget < 0 {
                    continue; // reported
                }
                // Counted before copying anything: the copies (with fresh names) are the
                // expensive part, so a loop nest over the budget costs nothing to refuse.
                let mut values = vec![(f.var.name.as_str(), 0)];
                let fits = (start..stop)
                    .try_fold(0i64, |acc, v| {
                        values[0].1 = v;
                        let n = copies(&f.body, &mut values, *budget - acc)?;
                        Some(acc + n).filter(|&t| t <= *budget)
                    })
                    .is_some();
                if !fits {
                    let made = MAX_UNROLLED_STMTS - *budget;
                    let after = if made > 0 {
                        format!(", after the {made} that earlier unrolled loops made")
                    } else {
                        String::new()
                    };
                    errors.push(
                        Diagnostic::error(
                            stmt.span,
                            format!(
                                "unrolling this loop (with the unrolled loops inside it) would \
                                 make more than {budget} statements{after} (limit \
                                 {MAX_UNROLLED_STMTS} in all)",
                                budget = *budget
                            ),
                        )
                        .with_note("use `T.serial` for long loops"),
                    );
                    *budget = -1;
                    continue;
                }
                // This loop's copies; the unrolled loops inside them charge theirs when they
                // unroll (within the count just made).
                *budget -= f.body.len() as i64 * stop.saturating_sub(start).max(0);
                for value in start..stop {
                    let mut copy = instantiate(&f.body, &f.var.name, &Expr::int(value), names);
                    if value > start {
                        // A note is said once, in the first copy.
                        take_notes(&mut copy);
                    }
                    out.extend(unroll_body(copy, names, budget, errors));
                }
            }
            (_, kind) => {
                stmt.kind = kind;
                for child in child_bodies_mut(&mut stmt) {
                    *child = unroll_body(std::mem::take(child), names, budget, errors);
                }
                out.push(stmt);
            }
        }
    }
    out
}

/// How many statements unrolling `body` makes, with the values of the unrolled loop
/// variables around it; `None` past `limit`. Inner `T.unroll` loops count once per value
/// of their bounds under `values` (`T.unroll(r)` under `r`).
fn copies<'a>(body: &'a [Stmt], values: &mut Vec<(&'a str, i64)>, limit: i64) -> Option<i64> {
    let mut n = 0i64;
    for s in body {
        n += match &s.kind {
            StmtKind::For(f) if f.kind == ForKind::Unroll => {
                let lookup = |vals: &[(&str, i64)], e: &Expr| {
                    eval_int(e, &|name| {
                        vals.iter().rev().find(|(v, _)| *v == name).map(|p| p.1)
                    })
                };
                match (lookup(values, &f.start), lookup(values, &f.stop)) {
                    (Some(a), Some(b)) => {
                        let mut inner = 0i64;
                        for v in a..b {
                            values.push((f.var.name.as_str(), v));
                            let c = copies(&f.body, values, limit - n - inner);
                            values.pop();
                            inner += c?;
                            if n + inner > limit {
                                return None;
                            }
                        }
                        inner
                    }
                    _ => 1 + copies(&f.body, values, limit - n)?,
                }
            }
            _ => {
                let mut k = 1;
                for child in tlc_ir::visit::child_bodies(s) {
                    k += copies(child, values, limit - n - k)?;
                }
                k
            }
        };
        if n > limit {
            return None;
        }
    }
    Some(n)
}
