//! `plan-shared-memory`: places every shared allocation of a kernel in the block's one
//! dynamic shared-memory arena (`Kernel.arena`).
//!
//! - Offsets are multiples of 16 bytes (`Arena::ALIGN`), 128 for a buffer with a
//!   `T.annotate_layout` swizzle (its XOR pattern repeats every 8 rows of 16-byte chunks),
//!   1024 for a wgmma operand layout, and for the destination of a `T.tma_load` what TMA
//!   needs (`Swizzle::tma_alignment`: 128, or 256 / 512 / 1024 with a swizzle).
//! - Live ranges are intervals over the kernel's top-level statements, in order: the
//!   statements of the kernel body, or of its one `threadIdx` loop once `thread-binding` has
//!   merged the regions. A use anywhere inside a statement (a loop, an `if`) counts for the
//!   whole statement, so a loop keeps its buffers live for all its iterations.
//! - Buffers are placed first-fit in order of first use; one may reuse the bytes of a buffer
//!   whose live range ended before its own starts. Inside a thread loop that reuse needs a
//!   barrier between the last use of the old buffer and the first use of the new one (other
//!   threads may still read the old bytes): when there is none at the top level between them,
//!   one is inserted before the new buffer's first use. A buffer of mbarriers is live for the
//!   whole kernel: its bytes are never reused (the PTX never invalidates an mbarrier).
//! - **Within loop iterations** (merged form). A loop whose body a `T.fresh(X)` heads, with
//!   every use of `X` inside it, holds no value of `X` across iterations
//!   (`analysis::fresh`: `mark-fresh-buffers` proved it at the tile level, and the
//!   interpreter enforces it at every stage since). Two such buffers of one loop whose uses
//!   occupy disjoint stretches of its flattened body may share bytes, given on every path a
//!   barrier from the earlier one's last use to the later one's first (after
//!   `T.cp_async_wait(0)` / `T.wgmma_wait(0)` when copies into / wgmmas reading the old
//!   bytes may be in flight), and across the back edge from the later one's last use to the
//!   earlier one's first. Existing ones count where every path runs them; else one is
//!   inserted where every thread runs it (a block-uniform list), or the two keep separate
//!   bytes. Why it is decided this way — proved where it is easy, recorded in the IR, checked
//!   by the interpreter, reused here — is in docs/passes.md ("mark-fresh-buffers").
//! - **Within a role's branch** (merged form, `branch.rs`): inside one branch of a top-level
//!   `if` run by a fixed set of threads (warp-specialize's consumers), a buffer may take
//!   the bytes of one the branch is done with, across a named barrier of exactly those
//!   threads (the epilogue's `O_shared` over `Q_shared`).
//! - The plan with in-loop and in-branch reuse is taken only when its arena is smaller, so a
//!   kernel it does not help keeps its plan (and code) as before.
//! - `bytes` is the high-water mark; over the target's `max_shared_bytes` (sm_80: 163 KiB,
//!   sm_90a: 227 KiB) is an error on the kernel.
//!
//! Kernels without shared allocations are left alone.

mod branch;

use crate::analysis::access::Access;
use crate::analysis::footprint::byte_size;
use crate::analysis::fresh::{
    fresh_loops, list_at, list_at_mut, uniform_list, FreshLoop, ListPath, UnitKind,
};
use crate::analysis::kernels::{for_each_kernel, is_merged, merged_top_mut};
use crate::analysis::uniform::uniform_locals;
use crate::analysis::wgmma;
use crate::context::PassContext;
use crate::pass::Pass;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use tlc_ir::build::intrinsic;
use tlc_ir::intrinsic::Effect;
use tlc_ir::verifier::const_int;
use tlc_ir::wgmma::Swizzle;
use tlc_ir::{
    visit, Arena, BufferDecl, Diagnostic, ForKind, Intrinsic, Kernel, Layout, PrimFunc, Scope,
    Span, Stmt, StmtKind, Target,
};

pub struct PlanSharedMemory;

impl Pass for PlanSharedMemory {
    fn name(&self) -> &'static str {
        "plan-shared-memory"
    }

    fn description(&self) -> &'static str {
        "shared allocations -> offsets in one dynamic arena (aligned, reusing dead buffers' bytes)"
    }

    fn run(&self, mut func: PrimFunc, cx: &PassContext) -> Result<PrimFunc, Vec<Diagnostic>> {
        let mut errors = Vec::new();
        for_each_kernel(&mut func.body, &mut |k, span| {
            plan_kernel(k, span, cx.target(), &mut errors)
        });
        if errors.is_empty() {
            Ok(func)
        } else {
            Err(errors)
        }
    }
}

/// One shared buffer being placed.
struct Slot {
    name: String,
    size: i64,
    align: i64,
    /// First and last top-level statement using it; `None` when unused.
    live: Option<(usize, usize)>,
    offset: i64,
}

fn plan_kernel(k: &mut Kernel, span: Span, target: Target, errors: &mut Vec<Diagnostic>) {
    let shared: Vec<BufferDecl> = k
        .allocs
        .iter()
        .filter(|a| a.scope == Scope::Shared)
        .cloned()
        .collect();
    if shared.is_empty() {
        return;
    }
    // wgmma / TMA swizzles are computed from the absolute address: 1024-byte aligned.
    let atoms: BTreeSet<String> = k
        .layouts
        .iter()
        .filter(|l| matches!(l.layout, Layout::WgmmaSwizzle { .. }))
        .map(|l| l.buffer.name.clone())
        .collect();
    let swizzled: BTreeSet<String> = k
        .layouts
        .iter()
        .filter(|l| matches!(l.layout, Layout::Swizzled | Layout::Swizzle { .. }))
        .map(|l| l.buffer.name.clone())
        .collect();
    let tma = tma_destinations(&k.body);
    let mbarriers = mbarrier_buffers(&k.body);
    // The top-level statements: the body of the kernel's one thread loop (nest), else the
    // body.
    let merged = is_merged(&k.body);
    let depth = k.threads.len();
    let facts = merged.then(|| Facts::of(k, depth));
    let facts = facts.as_ref();
    let top: &mut Vec<Stmt> = if merged {
        match merged_top_mut(&mut k.body, depth) {
            Some(top) => top,
            None => return,
        }
    } else {
        &mut k.body
    };
    let uses: Vec<Access> = top
        .iter()
        .map(|s| Access::of_body(std::slice::from_ref(s)))
        .collect();
    // Per buffer, the top-level statements using it (one pass over the statements, not one
    // per buffer).
    let mut users: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, a) in uses.iter().enumerate() {
        for b in a.reads.union(&a.writes) {
            users.entry(b.as_str()).or_default().push(i);
        }
    }
    let mut slots = Vec::new();
    for buf in &shared {
        let name = buf.name.name.clone();
        let Some(size) = byte_size(buf) else {
            errors.push(Diagnostic::error(
                buf.span,
                format!(
                    "shared buffer `{name}` needs a constant shape to be placed in shared memory"
                ),
            ));
            continue;
        };
        let used: &[usize] = users.get(name.as_str()).map_or(&[], Vec::as_slice);
        // An mbarrier object lives from its init to the end of the kernel: the PTX never
        // invalidates it (`mbarrier.inval`), and a TMA or arrive still pending on it must find
        // it intact, so no other buffer ever takes its bytes.
        let live = if mbarriers.contains(&name) && !used.is_empty() {
            Some((0, uses.len().saturating_sub(1)))
        } else {
            used.first().copied().zip(used.last().copied())
        };
        let layout_align = if atoms.contains(&name) {
            wgmma::ALIGN
        } else if swizzled.contains(&name) {
            128
        } else {
            Arena::ALIGN
        };
        let align = layout_align.max(tma.get(&name).copied().unwrap_or(0));
        slots.push(Slot {
            name,
            size,
            align,
            live,
            offset: 0,
        });
    }
    if !errors.is_empty() {
        return;
    }
    // Place in order of first use (unused buffers last; stable: declaration order on ties).
    let mut order: Vec<usize> = (0..slots.len()).collect();
    order.sort_by_key(|&i| slots[i].live.map_or(usize::MAX, |(first, _)| first));
    let top_together = |i: usize, j: usize| live_together(slots[i].live, slots[j].live);
    let mut offsets = place(&slots, &order, &top_together);
    // Barriers among the first `i` top-level statements: whether one lies between two
    // statements is a difference, not a scan.
    let mut barriers_up_to = vec![0usize; top.len() + 1];
    for (i, s) in top.iter().enumerate() {
        barriers_up_to[i + 1] =
            barriers_up_to[i] + usize::from(matches!(s.kind, StmtKind::Barrier));
    }
    // Reuse within iterations of loops and within a branch run by a fixed set of threads
    // (merged form only: they rest on barriers), taken when it makes the arena smaller.
    if let Some(facts) = facts {
        let fresh = InLoop::of(top, &slots, facts);
        let top_users = |name: &str| users.get(name).cloned().unwrap_or_default();
        let in_branch = branch::InBranch::of(top, &slots, facts, &top_users, &barriers_up_to);
        let together = |i: usize, j: usize| {
            top_together(i, j) && !fresh.compatible(i, j) && !in_branch.compatible(i, j)
        };
        let reused = place(&slots, &order, &together);
        if high_water(&slots, &reused) < high_water(&slots, &offsets) {
            let mut inserts = Inserts::new();
            for (a, &i) in order.iter().enumerate() {
                for &j in &order[..a] {
                    if top_together(i, j)
                        && overlap(&slots, &reused, i, j)
                        && !in_branch.compatible(i, j)
                    {
                        fresh.pair(i, j, &mut inserts);
                    }
                }
            }
            offsets = reused;
            insert_syncs(top, inserts, facts);
        }
    }
    for (slot, &o) in slots.iter_mut().zip(&offsets) {
        slot.offset = o;
    }
    // Reused bytes between top-level statements: the old buffer's readers must be done
    // before the new one's writers.
    let mut barriers_before: BTreeSet<usize> = BTreeSet::new();
    for (a, &i) in order.iter().enumerate() {
        let me = &slots[i];
        let Some((first, _)) = me.live.filter(|_| merged) else {
            continue;
        };
        for &j in &order[..a] {
            let o = &slots[j];
            if let (true, Some((_, last))) = (overlap(&slots, &offsets, i, j), o.live) {
                let synced = last < first
                    && first <= top.len()
                    && barriers_up_to[first] > barriers_up_to[last + 1];
                if !synced && last < first {
                    barriers_before.insert(first);
                }
            }
        }
    }
    for &at in barriers_before.iter().rev() {
        let bspan = top.get(at).map_or(span, |s| s.span);
        top.insert(at, Stmt::new(StmtKind::Barrier, bspan));
    }
    let bytes = slots.iter().map(|s| s.offset + s.size).max().unwrap_or(0);
    let max = target.max_shared_bytes();
    if bytes > max {
        let mut d = Diagnostic::error(
            span,
            format!(
                "this kernel needs {bytes} bytes of shared memory, more than the {max} a block may have on {target}"
            ),
        );
        for s in &slots {
            d = d.with_note(format!(
                "`{}`: {} bytes at offset {}",
                s.name, s.size, s.offset
            ));
        }
        errors.push(d);
        return;
    }
    let offsets = shared
        .iter()
        .zip(&slots)
        .map(|(b, s)| (b.name.clone(), s.offset))
        .collect();
    k.arena = Some(Arena { bytes, offsets });
}

/// First-fit placement of `slots` in `order`: each at the lowest aligned offset where it
/// overlaps no earlier-placed slot it is `together` with.
fn place(slots: &[Slot], order: &[usize], together: &dyn Fn(usize, usize) -> bool) -> Vec<i64> {
    let mut offsets = vec![0i64; slots.len()];
    let mut placed: Vec<usize> = Vec::new();
    for &i in order {
        let me = &slots[i];
        let busy: Vec<(i64, i64)> = placed
            .iter()
            .filter(|&&j| together(i, j))
            .map(|&j| (offsets[j], offsets[j] + slots[j].size))
            .collect();
        let mut candidates: Vec<i64> = std::iter::once(0)
            .chain(busy.iter().map(|&(_, end)| end))
            .map(|o| round_up(o, me.align))
            .collect();
        candidates.sort_unstable();
        offsets[i] = candidates
            .into_iter()
            .find(|&o| busy.iter().all(|&(s, e)| o + me.size <= s || e <= o))
            .unwrap_or(0);
        placed.push(i);
    }
    offsets
}

/// The arena's size under `offsets`.
fn high_water(slots: &[Slot], offsets: &[i64]) -> i64 {
    slots
        .iter()
        .zip(offsets)
        .map(|(s, o)| o + s.size)
        .max()
        .unwrap_or(0)
}

/// Whether slots `i` and `j` share bytes under `offsets`.
fn overlap(slots: &[Slot], offsets: &[i64], i: usize, j: usize) -> bool {
    offsets[i] < offsets[j] + slots[j].size && offsets[j] < offsets[i] + slots[i].size
}

/// Whether two top-level live ranges intersect (an unused buffer is live nowhere).
fn live_together(a: Option<(usize, usize)>, b: Option<(usize, usize)>) -> bool {
    match (a, b) {
        (Some((a0, a1)), Some((b0, b1))) => a0 <= b1 && b0 <= a1,
        _ => false,
    }
}

/// What the in-loop reuse needs to know of a merged kernel besides its top level.
struct Facts {
    /// The thread variables (the merged loops').
    threads: HashSet<String>,
    /// The merged loops' variables and constant extents, outermost first (empty when an
    /// extent is not constant).
    thread_extents: Vec<(String, i64)>,
    /// Per-thread allocations, and the local ones holding block-uniform values.
    private: HashSet<String>,
    uniform: HashSet<String>,
    /// The kernel issues `T.wgmma`: its barriers are fenced (`thread-binding`'s rule).
    wgmma_kernel: bool,
    /// Shared buffers `T.cp_async` writes: their bytes are free for another buffer only
    /// once a `T.cp_async_wait(0)` has landed every copy.
    async_written: HashSet<String>,
    /// Shared buffers a `T.wgmma` reads (the async proxy): free only once a
    /// `T.wgmma_wait(0)` has retired every wgmma.
    wgmma_read: HashSet<String>,
    /// Shared buffers of mbarriers and `T.tma_load` destinations: their accesses complete
    /// on mbarriers, which this plan does not follow; they are never reused in a loop.
    mbarrier: HashSet<String>,
}

impl Facts {
    fn of(k: &Kernel, depth: usize) -> Facts {
        let mut threads = HashSet::new();
        let mut thread_extents = Vec::new();
        let mut all_constant = true;
        let mut at: &[Stmt] = &k.body;
        for _ in 0..depth {
            match at {
                [Stmt {
                    kind: StmtKind::For(f),
                    ..
                }] if matches!(f.kind, ForKind::ThreadBinding(_)) => {
                    threads.insert(f.var.name.clone());
                    match (const_int(&f.start), const_int(&f.stop)) {
                        (Some(0), Some(e)) if e > 0 => thread_extents.push((f.var.name.clone(), e)),
                        _ => all_constant = false,
                    }
                    at = &f.body;
                }
                _ => break,
            }
        }
        let private = k
            .allocs
            .iter()
            .filter(|a| matches!(a.scope, Scope::Local | Scope::Fragment))
            .map(|a| a.name.name.clone())
            .collect();
        let (mut async_written, mut wgmma_read, mut mbarrier) =
            (HashSet::new(), HashSet::new(), HashSet::new());
        let mut wgmma_kernel = false;
        visit::for_each_stmt(&k.body, &mut |s| {
            let StmtKind::Intrinsic(i) = &s.kind else {
                return;
            };
            let waits_on_mbarrier = matches!(
                i,
                Intrinsic::MbarrierInit { .. }
                    | Intrinsic::MbarrierArrive { .. }
                    | Intrinsic::MbarrierArriveExpectTx { .. }
                    | Intrinsic::MbarrierWait { .. }
                    | Intrinsic::TmaLoad { .. }
            );
            wgmma_kernel |= i.wgmma_accumulator().is_some();
            for a in i.accesses() {
                let name = a.operand.buffer.name.clone();
                if waits_on_mbarrier || matches!(a.effect, Effect::BulkWrite | Effect::Sync) {
                    mbarrier.insert(name);
                } else if a.effect == Effect::AsyncWrite {
                    async_written.insert(name);
                } else if i.wgmma_accumulator().is_some() && a.effect.reads() {
                    wgmma_read.insert(name);
                }
            }
        });
        if !all_constant {
            thread_extents.clear();
        }
        Facts {
            threads,
            thread_extents,
            private,
            uniform: uniform_locals(k),
            wgmma_kernel,
            async_written,
            wgmma_read,
            mbarrier,
        }
    }
}

/// A buffer fresh in a loop (`analysis::fresh`): the loop, and the stretch of its
/// flattened body its uses occupy.
#[derive(Clone, Debug)]
struct InLoopUse {
    lp: usize,
    first: usize,
    last: usize,
    /// The deepest list (from the loop's body) holding every use, wherever nested.
    common: ListPath,
}

/// What a reuse of bytes needs before the new buffer's first use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Need {
    cp_async: bool,
    wgmma: bool,
}

/// Synchronization to insert: per list (from the top level) and index, what goes there.
type Inserts = BTreeMap<(ListPath, usize), Need>;

/// Reuse within the iterations of loops whose buffers are fresh (`T.fresh`).
struct InLoop<'a> {
    facts: &'a Facts,
    top: &'a [Stmt],
    loops: Vec<FreshLoop>,
    /// Per slot, its name and its uses in each loop it is fresh in.
    names: Vec<String>,
    uses: Vec<Vec<InLoopUse>>,
    /// Per loop, whether its body runs for all threads alike, and its length.
    body_uniform: Vec<bool>,
    body_len: Vec<usize>,
}

impl<'a> InLoop<'a> {
    fn of(top: &'a [Stmt], slots: &[Slot], facts: &'a Facts) -> InLoop<'a> {
        let shared: HashSet<String> = slots.iter().map(|s| s.name.clone()).collect();
        let loops = fresh_loops(top, &shared);
        let uses = slots
            .iter()
            .map(|slot| {
                if facts.mbarrier.contains(&slot.name) {
                    return Vec::new();
                }
                loops
                    .iter()
                    .enumerate()
                    .filter(|(_, l)| l.buffers.contains(&slot.name))
                    .filter_map(|(lp, l)| {
                        let us = l.uses(&slot.name);
                        let (&first, &last) = (us.first()?, us.last()?);
                        let mut common = l.units[first].list.clone();
                        for &u in &us {
                            let list = &l.units[u].list;
                            let same = common.iter().zip(list).take_while(|(a, b)| a == b).count();
                            common.truncate(same);
                        }
                        Some(InLoopUse {
                            lp,
                            first,
                            last,
                            common,
                        })
                    })
                    .collect()
            })
            .collect();
        let body_uniform = loops
            .iter()
            .map(|l| self_uniform(top, &l.body_path(), facts))
            .collect();
        let body_len = loops
            .iter()
            .map(|l| list_at(top, &l.body_path()).map_or(0, <[Stmt]>::len))
            .collect();
        InLoop {
            facts,
            top,
            loops,
            names: slots.iter().map(|s| s.name.clone()).collect(),
            uses,
            body_uniform,
            body_len,
        }
    }

    /// Whether slots `i` and `j` may share bytes: fresh in one loop, their uses in disjoint
    /// stretches of its body, with the synchronization that needs present or insertable.
    fn compatible(&self, i: usize, j: usize) -> bool {
        self.pair(i, j, &mut Inserts::new())
    }

    /// [`InLoop::compatible`], adding to `inserts` the synchronization sharing bytes needs.
    fn pair(&self, i: usize, j: usize, inserts: &mut Inserts) -> bool {
        for a in &self.uses[i] {
            for b in self.uses[j].iter().filter(|b| b.lp == a.lp) {
                let (early, late, e, l) = if a.last < b.first {
                    (a, b, i, j)
                } else if b.last < a.first {
                    (b, a, j, i)
                } else {
                    continue;
                };
                let mut mine = Inserts::new();
                // In an iteration: `early`'s last use, then `late`'s first (the bytes pass
                // from `e` to `l`); across the back edge: `late`'s last use, then `early`'s
                // first in a later iteration (from `l` to `e`). When no iteration uses both
                // (one branch of an `if` each), the bytes pass from `e` to `l` across the
                // back edge too.
                let forward = if self.exclusive(early, late) {
                    self.back_edge(early, late, self.need(e), &mut mine)
                } else {
                    self.within(early, late, self.need(e), &mut mine)
                };
                if forward && self.back_edge(late, early, self.need(l), &mut mine) {
                    for (at, need) in mine {
                        let n = inserts.entry(at).or_default();
                        n.cp_async |= need.cp_async;
                        n.wgmma |= need.wgmma;
                    }
                    return true;
                }
            }
        }
        false
    }

    /// What must complete before another buffer writes the bytes of slot `old`.
    fn need(&self, old: usize) -> Need {
        let name = self.names[old].as_str();
        Need {
            cp_async: self.facts.async_written.contains(name),
            wgmma: self.facts.wgmma_read.contains(name),
        }
    }

    /// Whether all of `a`'s uses lie in one branch of an `if` and all of `b`'s in the
    /// other: no iteration runs both.
    fn exclusive(&self, a: &InLoopUse, b: &InLoopUse) -> bool {
        let n = common_len(&a.common, &b.common);
        matches!((a.common.get(n), b.common.get(n)), (Some(x), Some(y)) if x.0 == y.0)
    }

    /// In one iteration, from `old`'s last use to `new`'s first: a barrier (after the
    /// waits `need` asks for) that every path between them runs, or a place to put one.
    fn within(&self, old: &InLoopUse, new: &InLoopUse, need: Need, out: &mut Inserts) -> bool {
        let l = &self.loops[old.lp];
        let d = &old.common[..common_len(&old.common, &new.common)];
        let between = (old.last + 1..new.first).filter(|&w| d.starts_with(&l.units[w].list));
        if satisfied(between.map(|w| l.units[w].kind), need) {
            return true;
        }
        // Before the statement of `d` that holds `new`'s first use, when every use of `old`
        // lies in statements before it.
        let at = |u: usize| -> usize {
            let unit = &l.units[u];
            unit.list.get(d.len()).map_or(unit.index, |&(k, _)| k)
        };
        // (Flattened order follows the statements of `d`: the last use of `old` lies in
        // the latest of its statements, the first of `new` in the earliest.)
        let (old_end, new_start) = (at(old.last), at(new.first));
        let mut list = l.body_path();
        list.extend_from_slice(d);
        if old_end < new_start && self_uniform(self.top, &list, self.facts) {
            merge(out, (list, new_start), need);
            return true;
        }
        false
    }

    /// From `old`'s last use in one iteration to `new`'s first in the next: a barrier (after
    /// the waits `need` asks for) on every path — after `old`'s uses in a list holding all
    /// of them, or before `new`'s in a list holding all of them — or one at the end of the
    /// loop's body.
    fn back_edge(&self, old: &InLoopUse, new: &InLoopUse, need: Need, out: &mut Inserts) -> bool {
        let l = &self.loops[old.lp];
        let after =
            (old.last + 1..l.units.len()).filter(|&w| old.common.starts_with(&l.units[w].list));
        let before = (0..new.first).filter(|&w| new.common.starts_with(&l.units[w].list));
        if satisfied(after.chain(before).map(|w| l.units[w].kind), need) {
            return true;
        }
        if self.body_uniform[old.lp] {
            merge(out, (l.body_path(), self.body_len[old.lp]), need);
            return true;
        }
        false
    }
}

/// Inserts the synchronization: per place, the waits it needs, a fence in a kernel with
/// wgmma (`thread-binding` fences every barrier there), and a barrier. Deeper and later
/// places first, so that no insertion moves another's place.
fn insert_syncs(top: &mut Vec<Stmt>, inserts: Inserts, facts: &Facts) {
    let mut places: Vec<((ListPath, usize), Need)> = inserts.into_iter().collect();
    let key = |(list, index): &(ListPath, usize)| -> Vec<(usize, usize)> {
        list.iter()
            .map(|&(i, w)| (i, w + 1))
            .chain(std::iter::once((*index, 0)))
            .collect()
    };
    places.sort_by_key(|(at, _)| std::cmp::Reverse(key(at)));
    for ((list, index), need) in places {
        let Some(body) = list_at_mut(top, &list) else {
            continue;
        };
        let span = body
            .get(index)
            .or_else(|| body.last())
            .map_or(Span::DUMMY, |s| s.span);
        let mut sync = Vec::new();
        if need.cp_async {
            sync.push(intrinsic(Intrinsic::WaitGroup { n: 0 }, span));
        }
        if need.wgmma {
            sync.push(intrinsic(Intrinsic::WgmmaWait { n: 0 }, span));
        }
        if facts.wgmma_kernel {
            sync.push(intrinsic(Intrinsic::FenceProxyAsync, span));
        }
        sync.push(Stmt::new(StmtKind::Barrier, span));
        let at = index.min(body.len());
        body.splice(at..at, sync);
    }
}

/// The length of the longest common prefix of two list paths.
fn common_len(a: &[(usize, usize)], b: &[(usize, usize)]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Whether the list at `path` of the merged body `top` runs for all threads alike.
fn self_uniform(top: &[Stmt], path: &[(usize, usize)], facts: &Facts) -> bool {
    uniform_list(top, path, &facts.private, &facts.uniform, &facts.threads)
}

fn merge(out: &mut Inserts, at: (ListPath, usize), need: Need) {
    let n = out.entry(at).or_default();
    n.cp_async |= need.cp_async;
    n.wgmma |= need.wgmma;
}

/// Whether a sequence of units (run in this order on every path) holds a barrier preceded
/// by the waits `need` asks for.
fn satisfied(kinds: impl Iterator<Item = UnitKind>, need: Need) -> bool {
    let (mut cp, mut wg) = (!need.cp_async, !need.wgmma);
    for k in kinds {
        match k {
            UnitKind::CpAsyncWaitAll => cp = true,
            UnitKind::WgmmaWaitAll => wg = true,
            UnitKind::Barrier if cp && wg => return true,
            _ => {}
        }
    }
    false
}

/// The buffers `T.tma_load`s write, each with the largest alignment its loads need (the
/// box lands at the buffer's offset plus its index, and TMA swizzles absolute addresses).
fn tma_destinations(body: &[Stmt]) -> BTreeMap<String, i64> {
    let mut out: BTreeMap<String, i64> = BTreeMap::new();
    visit::for_each_stmt(body, &mut |s| {
        if let StmtKind::Intrinsic(Intrinsic::TmaLoad { dst, swizzle, .. }) = &s.kind {
            // The verifier allows only the four swizzles; the strictest stands for others.
            let align = Swizzle::from_bytes(*swizzle).map_or(wgmma::ALIGN, Swizzle::tma_alignment);
            let slot = out.entry(dst.buffer.name.clone()).or_insert(align);
            *slot = (*slot).max(align);
        }
    });
    out
}

/// Shared buffers that hold mbarrier objects: initialized by `T.mbarrier_init`, or the
/// barrier operand (`Effect::Sync`) of an mbarrier operation or a TMA copy.
fn mbarrier_buffers(body: &[Stmt]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    visit::for_each_stmt(body, &mut |s| {
        let StmtKind::Intrinsic(i) = &s.kind else {
            return;
        };
        let init = matches!(i, Intrinsic::MbarrierInit { .. });
        for a in i.accesses() {
            if init || a.effect == Effect::Sync {
                out.insert(a.operand.buffer.name.clone());
            }
        }
    });
    out
}

fn round_up(x: i64, align: i64) -> i64 {
    (x + align - 1) / align * align
}
