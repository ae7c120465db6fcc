//! `prefetch-loads` (tile level): in a `T.Pipelined` loop, a fragment the body fills
//! element for element from global memory for its own iteration
//! (`for i in T.Parallel(M): s[i] = scales[row + i, k]`, the FP8 GEMM's row scales) is
//! loaded one iteration early into a twin fragment (`s_next`), so that the loads' latency
//! (an L2 round trip, about a microsecond under a GEMM's traffic) runs under a whole
//! iteration instead of stalling the first use (ncu: the FP8 promotion's first FMUL held
//! 23 % of the stall samples; docs/perf.md).
//!
//! ```text
//! if start < stop:  s_next[…] = value[k := start]          (before the loop; no `if`
//! for k in T.Pipelined(start, stop):                          when the dims prove it)
//!     …
//!     s[…] = s_next[…]                                      (where the fill was)
//!     s_next[…] = value[k := T.min(k + 1, stop - 1)]
//! ```
//!
//! The meaning is unchanged, bit for bit: the fill is a top-level statement of the body
//! (it runs in every iteration), its value loads only parameters no statement of the
//! function writes (so an early load reads what the late one would; parameters are
//! distinct memory, as every async copy of tlc already assumes) and reads no name bound
//! inside the loop but the loop variable and its own `T.Parallel` variables; the last
//! iteration's clamped refill reloads what that iteration loaded, so no address the
//! program did not read is read; the first load runs only when the loop does. A value
//! that does not read the loop variable is left alone (hoisting, not prefetching, is its
//! cure), and so is a loop with an explicit `order=` / `stage=` (one entry per statement)
//! or with bounds that read memory (the refill re-evaluates `stop` in the body). Lets
//! (`scale_b = scales_b[n, k]`) are not prefetched: a let's twin would be a block-level
//! store before the loop, which `warp-specialize` keeps outside its roles, and
//! `persistent-tiles` then leaves the kernel non-persistent (measured 9 % slower).

use crate::analysis::access::Access;
use crate::analysis::int::{dim_ranges, provably_true};
use crate::analysis::kernels::for_each_kernel;
use crate::analysis::rows::parallel_nest;
use crate::context::PassContext;
use crate::names::{freshen, NameSet};
use crate::pass::Pass;
use std::collections::BTreeSet;
use tlc_ir::interval::Ranges;
use tlc_ir::verifier::const_int;
use tlc_ir::visit::{child_bodies_mut, for_each_stmt, for_each_subexpr, has_load};
use tlc_ir::{
    BinOp, BufferDecl, Diagnostic, Expr, ExprKind, ForKind, Ident, PrimFunc, Scope, Stmt, StmtKind,
};

pub struct PrefetchLoads;

impl Pass for PrefetchLoads {
    fn name(&self) -> &'static str {
        "prefetch-loads"
    }

    fn description(&self) -> &'static str {
        "a pipelined loop's per-iteration fill of a fragment from read-only global memory -> loaded one iteration ahead into a twin fragment"
    }

    fn run(&self, mut func: PrimFunc, _cx: &PassContext) -> Result<PrimFunc, Vec<Diagnostic>> {
        // The parameters no statement of the function writes.
        let written = Access::of_body(&func.body).writes;
        let read_only: BTreeSet<String> = func
            .params
            .iter()
            .map(|p| p.name.name.clone())
            .filter(|n| !written.contains(n))
            .collect();
        let mut names = NameSet::of(&func);
        let ranges = dim_ranges(&func);
        for_each_kernel(&mut func.body, &mut |k, _| {
            let mut new_allocs = Vec::new();
            let cx = Rewrite {
                read_only: &read_only,
                allocs: &k.allocs,
                ranges: &ranges,
            };
            cx.body(&mut k.body, &mut names, &mut new_allocs);
            k.allocs.extend(new_allocs);
        });
        Ok(func)
    }
}

struct Rewrite<'a> {
    read_only: &'a BTreeSet<String>,
    allocs: &'a [BufferDecl],
    /// The dims' ranges (each at least 1): what proves a loop runs.
    ranges: &'a Ranges,
}

impl Rewrite<'_> {
    /// Rewrites every pipelined loop of `body` (not inside a `T.Parallel` nest).
    fn body(&self, body: &mut Vec<Stmt>, names: &mut NameSet, allocs: &mut Vec<BufferDecl>) {
        let mut i = 0;
        while i < body.len() {
            let pipelined = matches!(
                &body[i].kind,
                StmtKind::For(f) if matches!(f.kind, ForKind::Pipelined { .. })
            );
            if pipelined {
                let prologue = self.pipelined_loop(&mut body[i], names, allocs);
                let n = prologue.len();
                body.splice(i..i, prologue);
                i += n + 1;
                continue;
            }
            let parallel = matches!(&body[i].kind, StmtKind::For(f) if f.kind == ForKind::Parallel);
            if !parallel {
                for child in child_bodies_mut(&mut body[i]) {
                    self.body(child, names, allocs);
                }
            }
            i += 1;
        }
    }

    /// Prefetches the fills of one pipelined loop; returns the statements to put before it.
    fn pipelined_loop(
        &self,
        stmt: &mut Stmt,
        names: &mut NameSet,
        allocs: &mut Vec<BufferDecl>,
    ) -> Vec<Stmt> {
        let span = stmt.span;
        let StmtKind::For(f) = &mut stmt.kind else {
            return Vec::new();
        };
        // A loop whose statements carry an explicit `order=` / `stage=` (one entry per
        // statement) keeps its body; so does one whose bounds read memory (the refill
        // re-evaluates `stop` inside the body, where the body may have changed it).
        let explicit = matches!(
            &f.kind,
            ForKind::Pipelined { order, stage, .. } if !order.is_empty() || !stage.is_empty()
        );
        if explicit || has_load(&f.start) || has_load(&f.stop) {
            return Vec::new();
        }
        let (var, start, stop) = (f.var.name.clone(), f.start.clone(), f.stop.clone());
        // Names bound inside the loop (its variable aside): a fill may not read them.
        let mut inner = BTreeSet::new();
        for_each_stmt(&f.body, &mut |s| match &s.kind {
            StmtKind::Let { var, .. } => {
                inner.insert(var.name.clone());
            }
            StmtKind::For(l) => {
                inner.insert(l.var.name.clone());
            }
            _ => {}
        });
        let mut prologue = Vec::new();
        let mut index = 0;
        while index < f.body.len() {
            let Some(buffer) = self.fill(&f.body[index], &var, &inner) else {
                index += 1;
                continue;
            };
            let next_k = Expr::binary(
                BinOp::Min,
                Expr::binary(BinOp::Add, Expr::var(&var), Expr::int(1), span),
                Expr::binary(BinOp::Sub, stop.clone(), Expr::int(1), span),
                span,
            );
            let original = f.body[index].clone();
            let Some(decl) = self.allocs.iter().find(|d| d.name.name == buffer) else {
                index += 1;
                continue;
            };
            let twin = names.fresh(&format!("{buffer}_next"));
            allocs.push(BufferDecl {
                name: Ident::new(twin.clone(), decl.span),
                ..decl.clone()
            });
            // `buffer[…] = twin[…]` over the same nest; the refill and the prologue store
            // into the twin (each copy of the nest with its own variables).
            let copy = |take: bool, k: Option<&Expr>, names: &mut NameSet| {
                let mut s = original.clone();
                retarget(&mut s, &buffer, &twin, take);
                if let Some(k) = k {
                    substitute(&mut s, &var, k);
                }
                freshen(std::slice::from_mut(&mut s), names);
                s
            };
            let take = copy(true, None, names);
            let refill = copy(false, Some(&next_k), names);
            let first = copy(false, Some(&start), names);
            f.body.splice(index..=index, [take, refill]);
            index += 2;
            prologue.push(first);
        }
        if prologue.is_empty() {
            return prologue;
        }
        // The loads at `start` only when the loop runs (they are in bounds only then).
        // (No `if` where the dims prove it: `persistent-tiles` wants the consumers' code
        // around the pipeline straight.)
        let runs = Expr::binary(BinOp::Lt, start, stop, span);
        if provably_true(&runs, self.ranges) {
            prologue
        } else {
            vec![Stmt::new(
                StmtKind::If {
                    cond: runs,
                    then_body: prologue,
                    else_body: Vec::new(),
                },
                span,
            )]
        }
    }

    /// The fragment `stmt` fills, if a fill this pass moves ahead: a `T.Parallel` nest
    /// whose one store writes a fragment element for element with a value that loads only
    /// read-only parameters, reads the loop variable `var`, and reads no other name bound
    /// inside the loop but its own nest's.
    fn fill(&self, stmt: &Stmt, var: &str, inner: &BTreeSet<String>) -> Option<String> {
        let (vars, extents, store) = fill_nest(stmt)?;
        let StmtKind::Store {
            buffer,
            indices,
            value,
        } = &store.kind
        else {
            return None;
        };
        let decl = self.allocs.iter().find(|d| d.name.name == buffer.name)?;
        // Element for element: the nest's variables in order over the whole shape.
        let whole = decl.scope == Scope::Fragment
            && decl.shape.len() == vars.len()
            && indices.len() == vars.len()
            && decl
                .shape
                .iter()
                .zip(&extents)
                .all(|(d, e)| const_int(d) == Some(*e))
            && indices
                .iter()
                .zip(&vars)
                .all(|(i, v)| matches!(&i.kind, ExprKind::Var(n) if n == v));
        (whole && self.prefetchable(value, var, inner, &vars)).then(|| buffer.name.clone())
    }

    fn prefetchable(
        &self,
        value: &Expr,
        var: &str,
        inner: &BTreeSet<String>,
        own: &[String],
    ) -> bool {
        let mut loads = false;
        let mut reads_var = false;
        let mut ok = true;
        for_each_subexpr(value, &mut |e| match &e.kind {
            ExprKind::Load { buffer, .. } => {
                loads = true;
                ok &= self.read_only.contains(buffer);
            }
            ExprKind::Var(v) if v == var => reads_var = true,
            ExprKind::Var(v) => ok &= !inner.contains(v) || own.contains(v),
            _ => {}
        });
        ok && loads && reads_var
    }
}

/// A perfect `T.Parallel` nest from 0 with one statement inside: its variables, constant
/// extents and that statement (`analysis::rows::parallel_nest` walks it).
fn fill_nest(stmt: &Stmt) -> Option<(Vec<String>, Vec<i64>, &Stmt)> {
    let StmtKind::For(outer) = &stmt.kind else {
        return None;
    };
    let mut f = outer;
    loop {
        if f.kind != ForKind::Parallel || const_int(&f.start) != Some(0) {
            return None;
        }
        match f.body.as_slice() {
            [Stmt {
                kind: StmtKind::For(inner),
                ..
            }] => f = inner,
            _ => break,
        }
    }
    let (vars, extents, body) = parallel_nest(outer);
    match body {
        [only] if !vars.is_empty() => Some((vars, extents, only)),
        _ => None,
    }
}

/// In a fill nest: the store into `buffer` stores into `twin` (`take` false), or stores
/// `twin`'s element into `buffer` instead of the value (`take` true).
fn retarget(stmt: &mut Stmt, buffer: &str, twin: &str, take: bool) {
    if let StmtKind::Store {
        buffer: b,
        indices,
        value,
    } = &mut stmt.kind
    {
        if b.name == buffer {
            if take {
                *value = Expr::new(
                    ExprKind::Load {
                        buffer: twin.to_string(),
                        indices: indices.clone(),
                    },
                    value.span,
                );
            } else {
                b.name = twin.to_string();
            }
        }
        return;
    }
    for child in child_bodies_mut(stmt) {
        for s in child {
            retarget(s, buffer, twin, take);
        }
    }
}

/// `stmt` (and the statements in it) with the loop variable `var` replaced by `value`.
fn substitute(stmt: &mut Stmt, var: &str, value: &Expr) {
    tlc_ir::visit::map_body_exprs(std::slice::from_mut(stmt), &mut |n| match &n.kind {
        ExprKind::Var(v) if v == var => value.clone(),
        _ => n,
    });
}
