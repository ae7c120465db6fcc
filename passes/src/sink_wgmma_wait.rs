//! `sink-wgmma-wait`: each `T.wgmma_wait(n)` moves down past the statements after it that
//! cannot observe the wgmma groups still in flight, so their work — loads of scales, index
//! math, register arithmetic on other fragments — is issued while the tensor cores run,
//! instead of after the groups retire. A warp issues in order: code written after a `T.gemm`
//! (which `lower-tile-ops` closes with a wait for all groups) would otherwise start only when
//! the product is done.
//!
//! A statement can be passed when it and everything nested in it
//! - accesses no buffer that a `T.wgmma` of the function accumulates into (the registers the
//!   groups in flight still write; reading them early would see partial sums) or that a
//!   `T.wgmma_rs` takes A from (registers the groups in flight still read),
//! - writes no shared memory (the bytes the groups may still read),
//! - issues no intrinsic (mbarrier arrivals release stages to a producer that refills them,
//!   fences and commits order wgmma groups, copies have their own protocol) and no barrier,
//! - and launches no kernel.
//!
//! A stage release right after the wait (`if …: T.mbarrier_arrive(…)` only, which
//! warp specialization puts there: the wait retires the stage's last reads) moves with it,
//! after it as before; a release only ever comes later, which delays the producer and
//! never lets it refill a stage still read.
//!
//! The wait stops at the first statement that fails; everything else keeps its order, and a
//! `T.note` stays before the statement it precedes (the wait passes notes only together
//! with the statement after them). A wait is moved within its own statement list, never
//! into or out of a loop or branch. The
//! groups' results are the same whenever the wait retires them before their accumulators
//! or operands are next touched, so meaning is unchanged (the interpreter reports any access
//! to an in-flight accumulator or operand, which is how the tests check it). Only sm_90a
//! code has waits; elsewhere the pass changes nothing.

use crate::analysis::access::Access;
use crate::context::PassContext;
use crate::pass::Pass;
use std::collections::HashSet;
use tlc_ir::visit::{child_bodies_mut, for_each_stmt};
use tlc_ir::{Diagnostic, Intrinsic, PrimFunc, Scope, Stmt, StmtKind};

pub struct SinkWgmmaWait;

impl Pass for SinkWgmmaWait {
    fn name(&self) -> &'static str {
        "sink-wgmma-wait"
    }

    fn description(&self) -> &'static str {
        "T.wgmma_wait -> after the following code that touches no accumulator, shared store or intrinsic (overlaps it with the tensor cores)"
    }

    fn run(&self, mut func: PrimFunc, _cx: &PassContext) -> Result<PrimFunc, Vec<Diagnostic>> {
        let facts = Facts::of(&func.body);
        if !facts.accumulators.is_empty() {
            sink_in(&mut func.body, &facts);
        }
        Ok(func)
    }
}

/// What decides whether a statement may run before a wait: the wgmma accumulators and the
/// shared buffers of the function.
struct Facts {
    accumulators: HashSet<String>,
    shared: HashSet<String>,
}

impl Facts {
    fn of(body: &[Stmt]) -> Facts {
        let mut accumulators = HashSet::new();
        let mut shared = HashSet::new();
        for_each_stmt(body, &mut |s| match &s.kind {
            StmtKind::Intrinsic(Intrinsic::Wgmma { acc, .. }) => {
                accumulators.insert(acc.buffer.name.clone());
            }
            // A register A is read by the groups in flight: it is held like an accumulator.
            StmtKind::Intrinsic(Intrinsic::WgmmaRs { acc, a, .. }) => {
                accumulators.insert(acc.buffer.name.clone());
                accumulators.insert(a.buffer.name.clone());
            }
            StmtKind::Kernel(k) => {
                for b in k.allocs.iter().filter(|b| b.scope == Scope::Shared) {
                    shared.insert(b.name.name.clone());
                }
            }
            _ => {}
        });
        Facts {
            accumulators,
            shared,
        }
    }

    /// Whether `stmt` (with everything nested in it) may run while wgmma groups are in
    /// flight (module doc).
    fn independent(&self, stmt: &Stmt) -> bool {
        let mut ordered = false;
        for_each_stmt(std::slice::from_ref(stmt), &mut |s| {
            ordered |= matches!(
                s.kind,
                StmtKind::Intrinsic(_) | StmtKind::Barrier | StmtKind::Kernel(_)
            );
        });
        if ordered {
            return false;
        }
        let access = Access::of_body(std::slice::from_ref(stmt));
        let touches_acc = access
            .reads
            .iter()
            .chain(&access.writes)
            .any(|b| self.accumulators.contains(b));
        let writes_shared = access.writes.iter().any(|b| self.shared.contains(b));
        !touches_acc && !writes_shared
    }
}

fn is_wait(s: &Stmt) -> bool {
    matches!(s.kind, StmtKind::Intrinsic(Intrinsic::WgmmaWait { .. }))
}

/// Whether `s` only arrives on mbarriers (under conditions): a stage release, which must
/// stay after the wait that retires the stage's reads and so travels with it.
fn is_release(s: &Stmt) -> bool {
    let mut arrives = false;
    let mut other = false;
    for_each_stmt(std::slice::from_ref(s), &mut |t| match &t.kind {
        StmtKind::Intrinsic(Intrinsic::MbarrierArrive { .. }) => arrives = true,
        StmtKind::If { .. } | StmtKind::Note(_) => {}
        _ => other = true,
    });
    arrives && !other
}

/// Sinks the waits of `body` and, first, of every body nested in it.
fn sink_in(body: &mut [Stmt], facts: &Facts) {
    for s in body.iter_mut() {
        for inner in child_bodies_mut(s) {
            sink_in(inner, facts);
        }
    }
    let mut i = 0;
    while i < body.len() {
        if !is_wait(&body[i]) {
            i += 1;
            continue;
        }
        // The wait moves with the releases right after it: a unit of `len` statements at
        // `j`, which passes the next statement with the notes before it (a note stays
        // before the statement it precedes), or stops.
        let len = 1 + body[i + 1..].iter().take_while(|s| is_release(s)).count();
        let mut j = i;
        loop {
            let notes = body[j + len..]
                .iter()
                .take_while(|s| matches!(s.kind, StmtKind::Note(_)))
                .count();
            let next = j + len + notes;
            match body.get(next) {
                Some(s) if !is_wait(s) && facts.independent(s) => {
                    body[j..=next].rotate_left(len);
                    j = next + 1 - len;
                }
                _ => break,
            }
        }
        i = j + len;
    }
}
