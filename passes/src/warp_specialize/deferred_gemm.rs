//! The deferred last gemm of warp-specialized consumers (`schedule.rs` builds the loop):
//! a k-tile's compute that is a first gemm, register work on its result, then a second
//! gemm reading what that work produced — attention's `S = Q·Kᵀ`, the online softmax,
//! `O += P·V` — runs the second gemm of k-tile `k - 1` on the tensor cores while the
//! register work of k-tile `k` runs (FlashAttention-3's intra-warpgroup overlap):
//!
//! ```python
//! <H(start)>; T.wgmma_wait(0); <M(start)>          # the first k-tile, without its G2
//! for ko in T.serial(start + 1, stop):
//!     <H(ko)>                  # up to the first gemm's commit: issued
//!     <G2(ko - 1)>             # the previous k-tile's second gemm: issued behind it
//!     T.wgmma_wait(1)          # retires H's gemm: its result is readable
//!     <Ma(ko)>                 # register work touching nothing of G2's
//!     T.wgmma_wait(0)          # retires G2(ko - 1)
//!     <Mb(ko)>                 # the rest (what writes G2's operands or accumulator)
//! <G2(stop - 1)>; T.wgmma_wait(0)
//! ```
//!
//! The groups in flight write different registers (the second gemm's accumulator, the
//! first's of the next k-tile), so no accumulator is added and the register cost is
//! nothing but the overlap. (A single gemm's promotion overlapped this way needs a second
//! accumulator, read while the other group is in flight across the loop's back edge:
//! ptxas then serializes every wgmma, C7514; tlc dropped that schedule, docs/perf.md.)
//!
//! Why meaning is kept: G2(ko - 1) moves past H(ko), which neither writes a buffer G2 touches
//! nor touches a buffer G2 writes; Ma(ko) runs while G2(ko - 1) is in flight and touches none
//! of its registers (the wgmma rules) and writes none of its shared operands; Mb(ko) runs
//! after the wait, as it did after G2. The stages: the buffers only H reads (`early`) are
//! released once the first gemm retires, those only G2 reads (`late`) one k-tile later, after
//! the wait that retires it — which is why the late buffers get their own mbarrier rings
//! (with one ring the producer could refill neither until the late ones are free). A stage
//! buffer read anywhere else, a top-level let (its scope would be split), or any other
//! shape keeps the plain schedule.

use crate::analysis::access::Access;
use std::collections::BTreeSet;
use tlc_ir::{Intrinsic, Stmt, StmtKind};

/// A k-tile's compute split for the deferred schedule (module doc).
pub(super) struct Deferred {
    /// Up to the first gemm's commit (its code before its `T.wgmma_wait(0)`); the first
    /// gemm's wgmma code starts at `issue` (its `T.wgmma_fence`).
    pub head: Vec<Stmt>,
    pub issue: usize,
    /// The register work after the first gemm's wait that touches nothing of G2's.
    pub mid_free: Vec<Stmt>,
    /// The rest of the register work before G2.
    pub mid_bound: Vec<Stmt>,
    /// The second gemm's wgmma code: fence … commit.
    pub last: Vec<Stmt>,
    /// The stage buffers only the second gemm reads (the others only the head reads).
    pub late: Vec<String>,
}

/// Whether the top-level statement `s` is the intrinsic `want` picks.
fn top(s: &Stmt, want: fn(&Intrinsic) -> bool) -> bool {
    matches!(&s.kind, StmtKind::Intrinsic(i) if want(i))
}

/// The split of `compute` (top-level statements of the lowered, inlined k-tile) for the
/// deferred schedule; `staged`: the buffers the producer fills. `None` when its shape is
/// not two gemms with register work between them, or when a rule of the module doc fails.
pub(super) fn deferred(compute: &[Stmt], staged: &[String]) -> Option<Deferred> {
    let fence = |i: &Intrinsic| matches!(i, Intrinsic::WgmmaFence);
    let commit = |i: &Intrinsic| matches!(i, Intrinsic::WgmmaCommit);
    let wait0 = |i: &Intrinsic| matches!(i, Intrinsic::WgmmaWait { n: 0 });
    let at = |want: fn(&Intrinsic) -> bool| -> Vec<usize> {
        (0..compute.len())
            .filter(|&i| top(&compute[i], want))
            .collect()
    };
    let [f1, f2] = <[usize; 2]>::try_from(at(fence)).ok()?;
    let [c1, c2] = <[usize; 2]>::try_from(at(commit)).ok()?;
    let [w1, w2] = <[usize; 2]>::try_from(at(wait0)).ok()?;
    let note = |s: &Stmt| matches!(s.kind, StmtKind::Note(_));
    let ordered = f1 < c1 && c1 < w1 && w1 < f2 && f2 < c2 && c2 < w2;
    let tail_is_wait = compute[c2 + 1..w2].iter().all(note) && compute[w2 + 1..].iter().all(note);
    if !ordered || !tail_is_wait {
        return None;
    }
    // Every other wgmma intrinsic sits inside the two groups; no top-level let.
    let mut stray = false;
    for (i, s) in compute.iter().enumerate() {
        let in_group = (f1..=c1).contains(&i) || (f2..=c2).contains(&i);
        stray |= matches!(s.kind, StmtKind::Let { .. });
        tlc_ir::visit::for_each_stmt(std::slice::from_ref(s), &mut |t| {
            if let StmtKind::Intrinsic(x) = &t.kind {
                let wgmma = matches!(
                    x,
                    Intrinsic::Wgmma { .. }
                        | Intrinsic::WgmmaRs { .. }
                        | Intrinsic::WgmmaFence
                        | Intrinsic::WgmmaCommit
                        | Intrinsic::WgmmaWait { .. }
                );
                stray |= wgmma && !in_group && i != w1 && i != w2;
            }
        });
    }
    if stray {
        return None;
    }
    let head = &compute[..w1];
    let mid = &compute[w1 + 1..f2];
    let last = &compute[f2..=c2];
    let (h, m, g) = (
        Access::of_body(head),
        Access::of_body(mid),
        Access::of_body(last),
    );
    let g_all: BTreeSet<&String> = g.reads.iter().chain(g.writes.iter()).collect();
    // G2 moves before H: neither writes what the other touches.
    let h_all: BTreeSet<&String> = h.reads.iter().chain(h.writes.iter()).collect();
    if h.writes.iter().any(|b| g_all.contains(b)) || g.writes.iter().any(|b| h_all.contains(b)) {
        return None;
    }
    // Ma: the longest prefix of the register work touching nothing G2 touches.
    let free = mid
        .iter()
        .position(|s| {
            let a = Access::of_body(std::slice::from_ref(s));
            a.reads
                .iter()
                .chain(a.writes.iter())
                .any(|b| g_all.contains(b))
        })
        .unwrap_or(mid.len());
    // The stage buffers: early ones read by the head only, late ones by G2 only.
    let mut late = Vec::new();
    for b in staged {
        match (
            h.reads.contains(b),
            m.reads.contains(b),
            g.reads.contains(b),
        ) {
            (_, true, _) | (true, _, true) => return None,
            (false, false, true) => late.push(b.clone()),
            (_, false, false) => {}
        }
    }
    Some(Deferred {
        head: head.to_vec(),
        issue: f1,
        mid_free: mid[..free].to_vec(),
        mid_bound: mid[free..].to_vec(),
        last: last.to_vec(),
        late,
    })
}

/// Whether `s` is an `T.mbarrier_arrive_expect_tx` on ring `ring`.
fn arrives_on(s: &Stmt, ring: &str) -> bool {
    matches!(&s.kind, StmtKind::Intrinsic(Intrinsic::MbarrierArriveExpectTx { bar, .. })
        if bar.buffer.name == ring)
}

/// Moves the fills of the `late` buffers in the producer's `code` (each
/// `T.mbarrier_arrive_expect_tx` on ring `from` and the TMA loads after it) to ring `to`:
/// how many arrivals moved and how many stayed, or why not (an arrival whose loads are
/// not all late or all early, or none follows it).
pub(super) fn retarget(
    code: &mut [Stmt],
    late: &[String],
    (from, to): (&str, &str),
) -> Result<(i64, i64), String> {
    let (mut moved, mut kept) = (0, 0);
    // Which arrivals of this list move: decided before anything is renamed.
    let mut moves = vec![false; code.len()];
    for i in 0..code.len() {
        if !arrives_on(&code[i], from) {
            continue;
        }
        let mut groups = code[i + 1..]
            .iter()
            .take_while(|s| !arrives_on(s, from))
            .filter_map(|s| match &s.kind {
                StmtKind::Intrinsic(Intrinsic::TmaLoad { dst, bar, .. })
                    if bar.buffer.name == from =>
                {
                    Some(late.contains(&dst.buffer.name))
                }
                _ => None,
            });
        let first = groups
            .next()
            .ok_or("a stage arrival has no TMA load after it")?;
        if groups.any(|g| g != first) {
            return Err("one stage arrival covers loads of two rings".into());
        }
        moves[i] = first;
    }
    for (s, move_it) in code.iter_mut().zip(moves) {
        match &mut s.kind {
            StmtKind::Intrinsic(Intrinsic::MbarrierArriveExpectTx { bar, .. })
                if bar.buffer.name == from =>
            {
                if move_it {
                    bar.buffer.name = to.to_string();
                    moved += 1;
                } else {
                    kept += 1;
                }
            }
            StmtKind::Intrinsic(Intrinsic::TmaLoad { dst, bar, .. })
                if bar.buffer.name == from && late.contains(&dst.buffer.name) =>
            {
                bar.buffer.name = to.to_string();
            }
            _ => {
                for child in tlc_ir::visit::child_bodies_mut(s) {
                    let (m, k) = retarget(child, late, (from, to))?;
                    moved += m;
                    kept += k;
                }
            }
        }
    }
    Ok((moved, kept))
}

/// Inserts `wait` before the first arrival on ring `ring` in `code` (nested bodies
/// included); whether there was one.
pub(super) fn wait_before_first_arrival(code: &mut Vec<Stmt>, ring: &str, wait: &Stmt) -> bool {
    for i in 0..code.len() {
        if arrives_on(&code[i], ring) {
            code.insert(i, wait.clone());
            return true;
        }
        for child in tlc_ir::visit::child_bodies_mut(&mut code[i]) {
            if wait_before_first_arrival(child, ring, wait) {
                return true;
            }
        }
    }
    false
}
