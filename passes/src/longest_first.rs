//! `longest-first` (tile level): a kernel whose blocks do more work the larger one of
//! their block indices — causal attention, where query block `bx` walks `bx + 1` key
//! tiles; any triangular loop nest — is launched heaviest first along that index: the
//! block launched as `bx` plays block `gx - 1 - bx`.
//!
//! The GPU starts blocks roughly in launch order (x fastest). In written order the last
//! blocks to start are the longest ones, and the grid ends with a few SMs finishing them
//! while the others idle; launched longest first, the short blocks fill the end
//! (FlashAttention-3 reverses its causal query blocks for the same reason; the
//! scheduling rule is "longest processing time first").
//!
//! **The test.** A block's work is read off the trip counts of its block-level loops
//! (`analysis::monotone`): the index is reversed when every trip count rises or stays
//! flat as it grows, and one rises — through lets (`loop_range`), `T.min`, `T.ceildiv`
//! and a select behind a constant (`is_causal == 1`) alike. A loop inside an `if` whose
//! condition moves with the index, a `while` whose condition does, or a trip count that
//! reads memory makes the work unknown, and the order is kept.
//!
//! **Why it is exact.** The remap is a bijection of the grid (`gx - 1 - bx` for `bx` in
//! `0 .. gx`), and blocks share nothing but global memory, so every block still computes
//! what it computed before. A kernel with `T.atomic_add` is left alone (the order of its
//! atomic sums would change, a result it could observe in the last bits), and so is one
//! with `T.use_swizzle` (`rasterize` owns its order). With a symbolic grid the remap is
//! written `T.max(gx - 1 - bx, 0)`: the same value, and interval analysis then bounds it
//! below by 0 (`widen-indices`, `version-masks` read those bounds).

use crate::analysis::kernels::for_each_kernel;
use crate::analysis::monotone::{trend, Trend};
use crate::context::PassContext;
use crate::pass::Pass;
use std::collections::HashMap;
use tlc_ir::build::bin;
use tlc_ir::verifier::const_int;
use tlc_ir::visit::{child_bodies, for_each_stmt, map_body_exprs};
use tlc_ir::{BinOp, Diagnostic, Expr, ExprKind, Kernel, PrimFunc, Stmt, StmtKind};

pub struct LongestFirst;

impl Pass for LongestFirst {
    fn name(&self) -> &'static str {
        "longest-first"
    }

    fn description(&self) -> &'static str {
        "blocks whose loop trip counts grow with a block index -> launched in reverse order of that index (heaviest first)"
    }

    fn run(&self, mut func: PrimFunc, _cx: &PassContext) -> Result<PrimFunc, Vec<Diagnostic>> {
        for_each_kernel(&mut func.body, &mut |k, _| reorder(k));
        Ok(func)
    }
}

fn reorder(k: &mut Kernel) {
    if k.swizzle.is_some() || has_atomics(&k.body) {
        return;
    }
    let mut remap: HashMap<String, Expr> = HashMap::new();
    for (v, extent) in k.block_vars.iter().zip(&k.grid) {
        if const_int(extent).is_some_and(|n| n <= 1) {
            continue;
        }
        if work(&k.body, &v.name, &mut HashMap::new()) != Trend::Rising {
            continue;
        }
        let span = v.span;
        let var = Expr::new(ExprKind::Var(v.name.clone()), span);
        let played = match const_int(extent) {
            Some(n) => bin(BinOp::Sub, Expr::int(n - 1), var),
            None => bin(
                BinOp::Max,
                bin(
                    BinOp::Sub,
                    bin(BinOp::Sub, extent.clone(), Expr::int(1)),
                    var,
                ),
                Expr::int(0),
            ),
        };
        remap.insert(v.name.clone(), played);
    }
    if remap.is_empty() {
        return;
    }
    // Bottom-up: a replacement is never visited again, so the `bx` inside it stays.
    map_body_exprs(&mut k.body, &mut |e| match &e.kind {
        ExprKind::Var(n) => match remap.get(n) {
            Some(r) => Expr::new(r.kind.clone(), e.span),
            None => e,
        },
        _ => e,
    });
}

fn has_atomics(body: &[Stmt]) -> bool {
    let mut found = false;
    for_each_stmt(body, &mut |s| {
        found |= matches!(s.kind, StmtKind::AtomicAdd { .. });
    });
    found
}

/// How the work of `body` moves as `var` grows: the trip counts of its loops (a nest's
/// work is the product of non-negative trip counts, a sequence's the sum; both rise when
/// each factor or term rises or stays flat). `lets` collects the trends of the lets seen.
fn work(body: &[Stmt], var: &str, lets: &mut HashMap<String, Trend>) -> Trend {
    let mut acc = Trend::Flat;
    for stmt in body {
        let t = match &stmt.kind {
            StmtKind::Let {
                var: name, value, ..
            } => {
                let t = trend(value, var, lets);
                lets.insert(name.name.clone(), t);
                Trend::Flat
            }
            StmtKind::For(f) => {
                let trip = trend(&f.stop, var, lets).join(trend(&f.start, var, lets).flip());
                trip.join(work(&f.body, var, lets))
            }
            StmtKind::While { cond, body } => match trend(cond, var, lets) {
                Trend::Flat => work(body, var, lets),
                _ => Trend::Unknown,
            },
            StmtKind::If {
                cond,
                then_body,
                else_body,
            } => {
                let arms = work(then_body, var, lets).join(work(else_body, var, lets));
                if trend(cond, var, lets) == Trend::Flat {
                    arms
                } else if has_loops(then_body) || has_loops(else_body) {
                    Trend::Unknown
                } else {
                    // A few statements more or less: no loop's worth of work.
                    Trend::Flat
                }
            }
            _ => child_bodies(stmt)
                .into_iter()
                .fold(Trend::Flat, |t, b| t.join(work(b, var, lets))),
        };
        acc = acc.join(t);
    }
    acc
}

fn has_loops(body: &[Stmt]) -> bool {
    let mut found = false;
    for_each_stmt(body, &mut |s| {
        found |= matches!(s.kind, StmtKind::For(_) | StmtKind::While { .. });
    });
    found
}
