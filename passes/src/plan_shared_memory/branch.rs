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
use std::collections::{HashMap, HashSet};
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
        let candidate = |i: usize| {
            let n = slots[i].name.as_str();
            !facts.mbarrier.contains(n) && !facts.async_written.contains(n)
        };
        // Whether a wgmma may be in flight before each top-level statement, and the
        // named-barrier statements on each id in the whole kernel: each found once.
        let mut in_flight_before = Vec::with_capacity(top.len());
        let mut f = false;
        for st in top {
            in_flight_before.push(f);
            f = wgmma_after(st, f);
        }
        let on_id_everywhere = barriers_by_id(top);
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
                let meetings =
                    meetings(branch, in_flight_before[s], count, facts, &on_id_everywhere);
                if meetings.is_empty() {
                    continue;
                }
                // Per buffer used in this branch: its first and last statement there.
                let mut spans: HashMap<String, (usize, usize)> = HashMap::new();
                for (w, st) in branch.iter().enumerate() {
                    let acc = Access::of_body(std::slice::from_ref(st));
                    for name in acc.reads.into_iter().chain(acc.writes) {
                        spans.entry(name).and_modify(|e| e.1 = w).or_insert((w, w));
                    }
                }
                let other_access = Access::of_body(other);
                let span_of = |i: usize| -> Option<(usize, usize)> {
                    let name = slots[i].name.as_str();
                    if !candidate(i)
                        || in_cond.contains(name)
                        || other_access.reads.contains(name)
                        || other_access.writes.contains(name)
                    {
                        return None;
                    }
                    spans.get(name).copied()
                };
                let olds: Vec<(usize, usize)> = (0..slots.len())
                    .filter(|&i| slots[i].live.is_some_and(|l| l.1 == s))
                    .filter_map(|i| span_of(i).map(|(_, last)| (i, last)))
                    // Earlier top-level uses end before a block barrier ahead of `s`.
                    .filter(|&(i, _)| {
                        let earlier = users(&slots[i].name).into_iter().filter(|&u| u < s).max();
                        earlier.is_none_or(|u| barriers_up_to[s] > barriers_up_to[u + 1])
                    })
                    .collect();
                let news: Vec<(usize, usize)> = (0..slots.len())
                    .filter(|&i| slots[i].live.is_some_and(|l| l.0 == s))
                    .filter_map(|i| span_of(i).map(|(first, _)| (i, first)))
                    .collect();
                for &(old, old_last) in &olds {
                    // The first meeting after `old`'s last use.
                    let Some(&meet) = meetings.get(meetings.partition_point(|&w| w <= old_last))
                    else {
                        continue;
                    };
                    for &(new, new_first) in &news {
                        if new != old && meet < new_first {
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

/// The statements of `branch` (in order) that are a barrier all `count` threads of the
/// branch meet at: `T.bar_sync(id, count)` on an id no barrier outside the branch uses, with
/// no wgmma in flight (`in_flight` at the branch's entry) and, in a wgmma kernel, right
/// after a `T.fence_proxy_async()`.
fn meetings(
    branch: &[Stmt],
    mut in_flight: bool,
    count: i64,
    facts: &Facts,
    on_id_everywhere: &HashMap<i64, usize>,
) -> Vec<usize> {
    let on_id_here = barriers_by_id(branch);
    let mut out = Vec::new();
    for (w, st) in branch.iter().enumerate() {
        if let StmtKind::Intrinsic(Intrinsic::BarSync { id, count: n }) = &st.kind {
            let fenced = !facts.wgmma_kernel
                || matches!(
                    w.checked_sub(1).map(|p| &branch[p].kind),
                    Some(StmtKind::Intrinsic(Intrinsic::FenceProxyAsync))
                );
            let only_here = on_id_here.get(id) == on_id_everywhere.get(id);
            if *n == count && !in_flight && fenced && only_here {
                out.push(w);
            }
        }
        in_flight = wgmma_after(st, in_flight);
    }
    out
}

/// How many `T.bar_sync` / `T.bar_arrive` statements `body` has on each barrier id.
fn barriers_by_id(body: &[Stmt]) -> HashMap<i64, usize> {
    let mut out = HashMap::new();
    for_each_stmt(body, &mut |st| {
        if let StmtKind::Intrinsic(
            Intrinsic::BarSync { id, .. } | Intrinsic::BarArrive { id, .. },
        ) = &st.kind
        {
            *out.entry(*id).or_insert(0) += 1;
        }
    });
    out
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
