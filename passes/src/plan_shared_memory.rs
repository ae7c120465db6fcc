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
//!   one is inserted before the new buffer's first use.
//! - `bytes` is the high-water mark; over the target's `max_shared_bytes` (sm_80: 163 KiB,
//!   sm_90a: 227 KiB) is an error on the kernel.
//!
//! Kernels without shared allocations are left alone.

use crate::analysis::access::Access;
use crate::analysis::footprint::byte_size;
use crate::analysis::kernels::{for_each_kernel, is_merged, merged_top_mut};
use crate::analysis::wgmma;
use crate::context::PassContext;
use crate::pass::Pass;
use std::collections::BTreeMap;
use std::collections::BTreeSet;
use tlc_ir::wgmma::Swizzle;
use tlc_ir::{
    visit, Arena, BufferDecl, Diagnostic, Intrinsic, Kernel, Layout, PrimFunc, Scope, Span, Stmt,
    StmtKind, Target,
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
    // The top-level statements: the body of the kernel's one thread loop (nest), else the
    // body.
    let merged = is_merged(&k.body);
    let depth = k.threads.len();
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
        let used: Vec<usize> = uses
            .iter()
            .enumerate()
            .filter(|(_, a)| a.reads.contains(&name) || a.writes.contains(&name))
            .map(|(i, _)| i)
            .collect();
        let live = used.first().copied().zip(used.last().copied());
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
    let mut placed: Vec<usize> = Vec::new();
    let mut barriers_before: BTreeSet<usize> = BTreeSet::new();
    for &i in &order {
        let me = &slots[i];
        let live_together = |o: &Slot| match (me.live, o.live) {
            (Some((a0, a1)), Some((b0, b1))) => a0 <= b1 && b0 <= a1,
            _ => false,
        };
        let busy: Vec<(i64, i64)> = placed
            .iter()
            .map(|&j| &slots[j])
            .filter(|o| live_together(o))
            .map(|o| (o.offset, o.offset + o.size))
            .collect();
        let mut candidates: Vec<i64> = std::iter::once(0)
            .chain(busy.iter().map(|&(_, end)| end))
            .map(|o| round_up(o, me.align))
            .collect();
        candidates.sort_unstable();
        let offset = candidates
            .into_iter()
            .find(|&o| busy.iter().all(|&(s, e)| o + me.size <= s || e <= o))
            .unwrap_or(0);
        // Reused bytes: the old buffer's readers must be done before the new one's writers.
        if let (true, Some((first, _))) = (merged, me.live) {
            for &j in &placed {
                let o = &slots[j];
                let overlap = offset < o.offset + o.size && o.offset < offset + me.size;
                if let (true, Some((_, last))) = (overlap, o.live) {
                    let synced = top.get(last + 1..first).is_some_and(|between| {
                        between.iter().any(|s| matches!(s.kind, StmtKind::Barrier))
                    });
                    if !synced && last < first {
                        barriers_before.insert(first);
                    }
                }
            }
        }
        slots[i].offset = offset;
        placed.push(i);
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

fn round_up(x: i64, align: i64) -> i64 {
    (x + align - 1) / align * align
}
