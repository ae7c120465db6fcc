//! Reuse of bytes inside one branch of a top-level `if` that a fixed set of threads runs —
//! the consumer warpgroups' branch of a warp-specialized kernel, where the epilogue's
//! staging buffer (`O_shared`) may take the bytes of a buffer the consumers are done with
//! (`Q_shared`) while the producer, in the other branch, never touches either.
//!
//! Buffer `old` gives its bytes to `new` when, for a top-level statement `s` that is an
//! `if` and one of its branches `B`:
//!
//! - `old`'s last top-level use and `new`'s first are `s`, and inside `s` both are used
//!   in `B` only (not in the condition, not in the other branch);
//! - `old`'s earlier top-level uses (a load before the split) end before a top-level
//!   `T.sync_threads()` that precedes `s`: every thread's access is ordered before `s`;
//! - in `B`'s statement list, a `T.bar_sync(id, n)` lies between `old`'s last use and
//!   `new`'s first, with `n` exactly the number of threads that run `B` (the condition is
//!   evaluated for every index of the block's one thread dimension, and must split it into
//!   whole warps) and `id` used by no barrier outside `B`: all of `B`'s threads meet there,
//!   and only they touch the two buffers;
//! - no wgmma may be in flight at that barrier (a may-be-in-flight dataflow over the
//!   top-level statements before `s` and `B`'s before the barrier: issued by `T.wgmma` /
//!   `T.wgmma_rs`, retired by `T.wgmma_wait(0)`), and in a kernel with wgmma a
//!   `T.fence_proxy_async()` comes right before it (`thread-binding`'s rule for barriers);
//! - neither buffer is written by `T.cp_async`, TMA or holds mbarriers (their completion is
//!   not followed here).
//!
//! Nothing is inserted: the barrier is the branch's own (warp-specialize's epilogue
//! barrier). The interpreter checks the reuse like any other: a read of the new buffer's
//! bytes ordered after nothing that wrote them is a reported race.

use super::{Facts, Slot};
use crate::analysis::access::Access;
use std::collections::HashSet;
use tlc_ir::verifier::eval_bool;
use tlc_ir::visit::{for_each_stmt, for_each_subexpr};
use tlc_ir::{ExprKind, Intrinsic, Stmt, StmtKind};

/// The pairs of slots (either order) that may share bytes inside a branch.
pub(super) struct InBranch {
    pairs: HashSet<(usize, usize)>,
}

impl InBranch {
    pub(super) fn compatible(&self, i: usize, j: usize) -> bool {
        self.pairs.contains(&(i.min(j), i.max(j)))
    }

    /// `top`: the merged kernel's top-level statements; `barriers_up_to[i]`: the
    /// `T.sync_threads()` among the first `i` of them.
    pub(super) fn of(
        top: &[Stmt],
        slots: &[Slot],
        facts: &Facts,
        users: &dyn Fn(&str) -> Vec<usize>,
        barriers_up_to: &[usize],
    ) -> InBranch {
        let mut pairs = HashSet::new();
        let candidates: Vec<usize> = (0..slots.len())
            .filter(|&i| {
                let n = slots[i].name.as_str();
                !facts.mbarrier.contains(n) && !facts.async_written.contains(n)
            })
            .collect();
        for (s, stmt) in top.iter().enumerate() {
            let StmtKind::If {
                cond,
                then_body,
                else_body,
            } = &stmt.kind
            else {
                continue;
            };
            let mut in_cond = HashSet::new();
            for_each_subexpr(cond, &mut |e| {
                if let ExprKind::Load { buffer, .. } = &e.kind {
                    in_cond.insert(buffer.clone());
                }
            });
            for (branch, other, taken) in
                [(then_body, else_body, true), (else_body, then_body, false)]
            {
                let Some(count) = threads_running(cond, taken, facts) else {
                    continue;
                };
                let other_access = Access::of_body(other);
                let mine: Vec<Access> = branch
                    .iter()
                    .map(|b| Access::of_body(std::slice::from_ref(b)))
                    .collect();
                // Per candidate slot used only in this branch of `s`: its first and last
                // statement there.
                let span_of = |i: usize| -> Option<(usize, usize)> {
                    let name = slots[i].name.as_str();
                    if in_cond.contains(name)
                        || other_access.reads.contains(name)
                        || other_access.writes.contains(name)
                    {
                        return None;
                    }
                    let at: Vec<usize> = (0..mine.len())
                        .filter(|&w| mine[w].reads.contains(name) || mine[w].writes.contains(name))
                        .collect();
                    Some((*at.first()?, *at.last()?))
                };
                for &old in &candidates {
                    let Some((_, old_last)) =
                        slots[old].live.filter(|l| l.1 == s).and(span_of(old))
                    else {
                        continue;
                    };
                    // Earlier top-level uses of `old` end before a block barrier ahead of `s`.
                    let earlier = users(&slots[old].name).into_iter().filter(|&u| u < s).max();
                    if earlier.is_some_and(|u| barriers_up_to[s] <= barriers_up_to[u + 1]) {
                        continue;
                    }
                    for &new in &candidates {
                        if new == old || slots[new].live.is_none_or(|l| l.0 != s) {
                            continue;
                        }
                        let Some((new_first, _)) = span_of(new) else {
                            continue;
                        };
                        if old_last < new_first
                            && meeting_between(top, s, branch, old_last, new_first, count, facts)
                        {
                            pairs.insert((old.min(new), old.max(new)));
                        }
                    }
                }
            }
        }
        InBranch { pairs }
    }
}

/// How many threads take the `taken` side of `cond`: `None` unless it depends on the
/// (one) thread index alone and splits the block into whole warps (a named barrier counts
/// warps).
fn threads_running(cond: &tlc_ir::Expr, taken: bool, facts: &Facts) -> Option<i64> {
    let [(name, extent)] = facts.thread_extents.as_slice() else {
        return None;
    };
    let mut count = 0;
    let mut in_warp = 0;
    for tx in 0..*extent {
        let lookup = |n: &str| (n == name).then_some(tx);
        if eval_bool(cond, &lookup)? == taken {
            count += 1;
            in_warp += 1;
        }
        if tx % 32 == 31 || tx + 1 == *extent {
            let warp = tx % 32 + 1;
            if in_warp != 0 && in_warp != warp {
                return None;
            }
            in_warp = 0;
        }
    }
    Some(count)
}

/// Whether statement `b` of `branch`, for some `b` in `(after, before)`, is a barrier all
/// `count` threads of the branch meet at, with no wgmma in flight and fenced in a wgmma
/// kernel.
fn meeting_between(
    top: &[Stmt],
    s: usize,
    branch: &[Stmt],
    after: usize,
    before: usize,
    count: i64,
    facts: &Facts,
) -> bool {
    let mut in_flight = top[..s].iter().fold(false, |f, st| wgmma_after(st, f));
    for (w, st) in branch.iter().enumerate().take(before) {
        if w > after {
            if let StmtKind::Intrinsic(Intrinsic::BarSync { id, count: n }) = &st.kind {
                let fenced = !facts.wgmma_kernel
                    || matches!(
                        w.checked_sub(1).map(|p| &branch[p].kind),
                        Some(StmtKind::Intrinsic(Intrinsic::FenceProxyAsync))
                    );
                if *n == count && !in_flight && fenced && id_only_in(top, branch, *id) {
                    return true;
                }
            }
        }
        in_flight = wgmma_after(st, in_flight);
    }
    false
}

/// Whether every `T.bar_sync` / `T.bar_arrive` on `id` in the kernel lies in `branch`.
fn id_only_in(top: &[Stmt], branch: &[Stmt], id: i64) -> bool {
    let on_id = |body: &[Stmt]| {
        let mut n = 0usize;
        for_each_stmt(body, &mut |st| {
            if let StmtKind::Intrinsic(
                Intrinsic::BarSync { id: i, .. } | Intrinsic::BarArrive { id: i, .. },
            ) = &st.kind
            {
                n += usize::from(*i == id);
            }
        });
        n
    };
    on_id(top) == on_id(branch)
}

/// Whether a wgmma may be in flight after `st`, given whether one may be before it.
fn wgmma_after(st: &Stmt, before: bool) -> bool {
    let list = |body: &[Stmt], f: bool| body.iter().fold(f, |f, s| wgmma_after(s, f));
    match &st.kind {
        StmtKind::Intrinsic(i) if i.wgmma_accumulator().is_some() => true,
        StmtKind::Intrinsic(Intrinsic::WgmmaWait { n: 0 }) => false,
        StmtKind::If {
            then_body,
            else_body,
            ..
        } => list(then_body, before) | list(else_body, before),
        StmtKind::For(f) => loop_after(&f.body, before),
        StmtKind::While { body, .. } => loop_after(body, before),
        _ => {
            // Anything else with a body (a kernel does not nest): its statements in order.
            let mut f = before;
            for child in tlc_ir::visit::child_bodies(st) {
                f = list(child, f);
            }
            f
        }
    }
}

/// A loop body run zero or more times: the states after 0, 1, 2 runs cover every count (a
/// map of booleans repeats with period at most 2).
fn loop_after(body: &[Stmt], before: bool) -> bool {
    let once = |f: bool| body.iter().fold(f, |f, s| wgmma_after(s, f));
    let one = once(before);
    before | one | once(one)
}
