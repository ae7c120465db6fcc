//! Warp specialization of a TMA pipeline (sm_90a): the block gets one more warpgroup, the
//! PRODUCER, whose first thread issues every stage's TMA loads; the user's threads become
//! the CONSUMERS, which only wait for stages, compute on them and hand them back. The two
//! sides run concurrently and talk through two mbarrier rings, so the loop has no block
//! barrier at all:
//!
//! ```python
//! # T user threads (C = T / 128 consumer warpgroups), block of T + 128
//! for tx in T.thread_binding(T + 128, thread="threadIdx.x"):
//!     if tx >= T:                                    # the producer warpgroup
//!         T.setmaxnreg(40, inc=False)
//!         if tx == T:
//!             <prologue: fills start .. start + S - 2>
//!             for kp in T.serial(start, stop):
//!                 if kp > start and kp + S - 1 < stop:   # refilling a used stage
//!                     T.mbarrier_wait(empty[(kp + S - 1) % S], (kp - start - 1) // S % 2)
//!                 <the loop's fill of kp + S - 1 into stage (kp + S - 1) % S>
//!     else:                                          # the consumer warpgroups
//!         T.setmaxnreg(R, inc=True)
//!         for ko in T.serial(start, stop):
//!             T.mbarrier_wait(full[ko % S], (ko - start) // S % 2)
//!             <the loop's compute on stage ko % S, lowered, inlined, up to its last
//!              read of the stage and the T.wgmma_wait(0) that retires it>
//!             if tx % 32 == 0:
//!                 T.mbarrier_arrive(empty[ko % S])      # one arrival per consumer warp
//!             <the rest of the compute: register work only (a promotion, a softmax)>
//! ```
//!
//! - Why the empty parity: fill `f` of stage `f % S` is its `j = (f - start) // S`-th; for
//!   `j >= 1` the consumers released the stage's previous fill in the `(j - 1)`-th phase of
//!   `empty[f % S]`, whose parity is `(j - 1) % 2 = (kp - start - 1) // S % 2` with
//!   `f = kp + S - 1`. `full` keeps the parities of the plain TMA pipeline (`tma.rs`).
//! - Why the consumers' arrival is safe: every lowered `T.gemm` ends with
//!   `T.wgmma_wait(0)`, so a warp arrives after its reads of the stage have retired. Each
//!   warp arrives (count `T / 32`), so the stage is free only when all consumer warps are
//!   done with it. The arrival comes right after the last statement that reads the stage
//!   (and the wait retiring the wgmmas issued up to it: `release_point`), not at the end
//!   of the compute: what follows touches registers and global memory only, and the
//!   producer refills the stage meanwhile (DeepGEMM releases before its promotion too).
//!   `sink-wgmma-wait` later moves the wait and this arrival together.
//! - One group in flight: with `OVERLAP_MIN_STAGES` stages or more, and a compute that is
//!   the gemm's wgmma code alone, that wait becomes `T.wgmma_wait(1)`: it retires the
//!   previous k-tile's group, so the arrival releases the previous stage (`(ko - 1) % S`,
//!   from the second k-tile on; the producer never waits for the last stage's release), and
//!   a `T.wgmma_wait(0)` after the loop retires the last group before the epilogue.
//! - Deferred second gemm (`deferred_gemm.rs`): when the compute is two gemms with
//!   register work between them (attention), the second gemm of k-tile `k - 1` is issued
//!   right after the first of `k` and runs during `k`'s register work; the stage buffers
//!   only it reads get their own `full` / `empty` rings (`LateRing`), released one k-tile
//!   later. With two consumer warpgroups or more they then take turns issuing their
//!   wgmmas (`ping_pong`: one copy of the loop per warpgroup, a ring of named barriers
//!   from `PING_PONG_FIRST_BARRIER`), so one's softmax runs while the other's gemms use the
//!   tensor cores (FlashAttention-3's ping-pong).
//! - When: the compute of the loop, once lowered, issues `T.wgmma` and writes nothing but
//!   registers (no shared or global stores, no barriers, no other asynchronous copies), so
//!   the consumers need no block barrier inside the loop; the block is 1-D with a multiple
//!   of 128 threads, at most 1024 - 128; one consumer warpgroup also needs two blocks per
//!   SM or a group in flight (`roles`). Otherwise the pipeline stays on the one-warpgroup
//!   TMA protocol of `lower_tile_ops/tma.rs`, with a `T.note` saying why.
//! - Persistent: with more tiles than blocks the GPU holds, the `persistent-tiles` pass
//!   then makes each role loop over its block's tiles, the rings running on across them.
//! - Registers: the producer gives its registers away (`setmaxnreg` 40) and the consumers
//!   take them, within the 64K of an SM shared by the blocks per SM the kernel is compiled
//!   for (`T.min_blocks_per_sm`, which codegen turns into `.minnctapersm` to pin the
//!   budget at entry).

use super::deferred_gemm::{self, Deferred};
use super::Facts;
use crate::analysis::access::Access;
use crate::analysis::block::Block;
use crate::names::NameSet;
use tlc_ir::build::{bin, elem, if_then, intrinsic};
use tlc_ir::target::{MAX_THREADS_PER_BLOCK, REGISTERS_PER_SM, WARPGROUP_SIZE};
use tlc_ir::verifier::const_int;
use tlc_ir::visit::map_body_exprs;
use tlc_ir::{
    BinOp, Expr, ExprKind, For, ForKind, Intrinsic, Scope, Span, Stmt, StmtKind, Target, ThreadTag,
};

/// The registers a producer warpgroup keeps (CUTLASS's choice: enough for the TMA
/// coordinates and the loop).
const PRODUCER_REGISTERS: i64 = 40;

/// The fewest registers `setmaxnreg` takes.
const MIN_SETMAXNREG: i64 = 24;

/// The most registers a consumer thread asks for (TileLang's default).
const CONSUMER_REGISTERS: i64 = 240;

/// Blocks per SM a warp-specialized kernel with ONE consumer warpgroup is compiled for when
/// its shared memory fits that often. Measured on an H100 (docs/perf.md, 2026-11-25): with 3
/// stages (each k-tile's wgmma group waited for before its stage is released) such a kernel
/// ran the seed GEMM at 0.74x the unspecialized TMA pipeline at one block per SM (that
/// pipeline runs two to three blocks per SM, whose interleaving hides each block's waits),
/// and 1.04x at two blocks per SM. With `OVERLAP_MIN_STAGES` stages the consumers keep a
/// group in flight and one block per SM pays too (1.25x for 128x128x64, 4 stages). Two or
/// more consumer warpgroups keep the tensor cores busy from one block.
const ONE_CONSUMER_BLOCKS_PER_SM: i64 = 2;

/// The fewest stages for which the consumers keep one k-tile's wgmma group in flight
/// (releasing each stage one k-tile later): the in-flight group holds a stage, so with
/// fewer stages the producer has too few to fill ahead (measured slower with 3, docs/perf.md).
const OVERLAP_MIN_STAGES: i64 = 4;

/// The parts of a software pipeline on TMA that warp specialization rebuilds.
pub(crate) struct Pipeline<'a> {
    /// The prologue's fills (the issuing thread's code: arrive.expect_tx + TMA loads, per
    /// stage).
    pub prologue: For,
    /// The loop (its variable, bounds); its body is not used.
    pub main: &'a For,
    /// The loop's fills of iteration `ko + S - 1` (the issuing thread's code, under their
    /// guards).
    pub fills: Vec<Stmt>,
    /// The loop's other statements (thread code: the block's regions), reading stage
    /// `ko % S`.
    pub compute: Vec<Stmt>,
    /// Thread code the consumers run before and after their loop (`private_code`).
    pub head: Vec<Stmt>,
    pub tail: Vec<Stmt>,
    pub stages: i64,
    /// The `full` mbarriers (`lower_tile_ops/tma.rs` allocated them) and the arrivals each
    /// stage's fill makes on one.
    pub full: &'a str,
    pub copies: i64,
}

/// A warp-specialized pipeline: its region and its `empty` ring (to allocate).
pub(crate) struct Built {
    pub region: Stmt,
    pub empty: String,
    /// The rings of a deferred second gemm's stage buffers (`deferred_gemm.rs`), when it
    /// has any: then the first ring counts only the early arrivals.
    pub late: Option<LateRing>,
}

/// The `full` / `empty` rings of the stage buffers only a deferred second gemm reads, and
/// the producer's code with their fills moved onto them.
pub(crate) struct LateRing {
    pub full: String,
    pub empty: String,
    /// Arrivals per stage on `full`, and those left on the first ring.
    pub copies: i64,
    pub early_copies: i64,
    pub fills: Vec<Stmt>,
    pub prologue: Vec<Stmt>,
}

/// The note on a consumer loop with a deferred second gemm (it reaches the PTX).
pub const DEFERRED_NOTE: &str =
    "deferred second gemm: the previous k-tile's product runs during this k-tile's register work";

/// The late rings of `d` (none when its second gemm reads no stage buffer), the producer's
/// `fills` and `prologue` (one stage's fill each, `copies` arrivals on ring `full`) moved to
/// them; `None` when they cannot be split off (`deferred_gemm::retarget`) or the first ring
/// would be left without arrivals.
fn late_ring(
    d: &Deferred,
    (fills, prologue): (&[Stmt], &[Stmt]),
    (ring, copies): (&str, i64),
    names: &mut NameSet,
) -> Option<Option<LateRing>> {
    let Some(first) = d.late.first() else {
        return Some(None);
    };
    let full = names.fresh(&format!("{first}_full"));
    let (mut fills, mut prologue) = (fills.to_vec(), prologue.to_vec());
    let counts = deferred_gemm::retarget(&mut fills, &d.late, (ring, &full)).ok()?;
    let prologue_counts = deferred_gemm::retarget(&mut prologue, &d.late, (ring, &full)).ok()?;
    let (moved, kept) = counts;
    if moved == 0 || kept == 0 || moved + kept != copies || prologue_counts != counts {
        return None;
    }
    Some(Some(LateRing {
        full,
        empty: names.fresh(&format!("{first}_empty")),
        copies: moved,
        early_copies: kept,
        fills,
        prologue,
    }))
}

/// How a warp-specialized block uses an SM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Roles {
    /// The user's warpgroups.
    pub consumers: i64,
    /// Blocks the kernel is compiled to fit on one SM (`T.min_blocks_per_sm`).
    pub blocks_per_sm: i64,
    /// What each consumer thread raises its registers to (`T.setmaxnreg`), a multiple of 8:
    /// the SM's registers shared by `blocks_per_sm` blocks, the producer keeping
    /// `PRODUCER_REGISTERS`.
    pub consumer_registers: i64,
}

/// How the block runs with a producer warpgroup, or why it cannot take one. `shared`:
/// an upper bound of the block's shared memory (`analysis::footprint`), `None` when unknown;
/// `stages`: the pipeline's; `requested`: the blocks per SM the user asked for
/// (`T.min_blocks_per_sm`), kept as given.
pub(crate) fn roles(
    block: &Block,
    shared: Option<i64>,
    stages: i64,
    requested: Option<i64>,
    target: Target,
) -> Result<Roles, String> {
    let threads = block.threads();
    if !block.is_flat() {
        return Err("the block is multi-dimensional".into());
    }
    if threads % WARPGROUP_SIZE != 0 {
        return Err(format!(
            "{threads} threads are not whole warpgroups of {WARPGROUP_SIZE}"
        ));
    }
    if threads + WARPGROUP_SIZE > MAX_THREADS_PER_BLOCK {
        return Err(format!(
            "{threads} threads leave no room for a producer warpgroup ({MAX_THREADS_PER_BLOCK} at most)"
        ));
    }
    let consumers = threads / WARPGROUP_SIZE;
    let fit = shared.map_or(1, |s| target.blocks_per_sm_by_shared(s));
    let blocks_per_sm = match requested {
        Some(b) => b.max(1),
        None if consumers == 1 && fit >= ONE_CONSUMER_BLOCKS_PER_SM => ONE_CONSUMER_BLOCKS_PER_SM,
        None => 1,
    };
    if consumers == 1 && blocks_per_sm == 1 && stages < OVERLAP_MIN_STAGES {
        return Err(format!(
            "one consumer warpgroup with {stages} stages pays only at \
             {ONE_CONSUMER_BLOCKS_PER_SM} blocks per SM (docs/perf.md), and {} of shared \
             memory fit once on an SM",
            shared.map_or("an unknown amount".to_string(), |s| format!("{s} bytes"))
        ));
    }
    let per_thread = REGISTERS_PER_SM / blocks_per_sm / WARPGROUP_SIZE;
    let consumer_registers =
        ((per_thread - PRODUCER_REGISTERS) / consumers / 8 * 8).min(CONSUMER_REGISTERS);
    // Each thread starts with the block's share of the SM; the producer must be able to
    // lower its count to PRODUCER_REGISTERS, the consumers need at least what `setmaxnreg`
    // accepts.
    let at_entry = REGISTERS_PER_SM / blocks_per_sm / (threads + WARPGROUP_SIZE);
    if at_entry < PRODUCER_REGISTERS || consumer_registers < MIN_SETMAXNREG {
        return Err(format!(
            "{blocks_per_sm} blocks per SM leave {at_entry} registers per thread, too few for \
             a producer warpgroup ({PRODUCER_REGISTERS}) and its consumers"
        ));
    }
    Ok(Roles {
        consumers,
        blocks_per_sm,
        consumer_registers,
    })
}

/// The pipeline as one warp-specialized region over `T + 128` threads; why not when the
/// compute does not fit (see the module doc).
pub(crate) fn build(
    pipe: Pipeline,
    roles: Roles,
    facts: &Facts,
    names: &mut NameSet,
    span: Span,
) -> Result<Built, String> {
    let threads = facts.block.threads();
    let stages = pipe.stages;
    let m = pipe.main;
    consumer_only(&pipe.compute, facts)?;
    let tx = names.fresh(facts.block.index_base());
    let compute = inline_regions(pipe.compute, &tx, threads)?;

    let empty = names.fresh("tma_empty");
    let ko = Expr::var(&m.var.name);
    let slot = |e: Expr| bin(BinOp::FloorMod, e, Expr::int(stages));
    // The fill that k-tile `k` waits for (`persistent-tiles` counts it from the tile's
    // first fill).
    let fill_of = |k: Expr| bin(BinOp::Sub, k, m.start.clone());
    // Consumers: wait for the stage, compute, release it warp by warp.
    let full_wait_on = |ring: &str, k: Expr| {
        intrinsic(
            Intrinsic::MbarrierWait {
                bar: elem(ring, vec![slot(k.clone())], span),
                parity: bin(
                    BinOp::FloorMod,
                    bin(BinOp::FloorDiv, fill_of(k), Expr::int(stages)),
                    Expr::int(2),
                ),
            },
            span,
        )
    };
    let full_wait_at = |k: Expr| full_wait_on(pipe.full, k);
    let full_wait = full_wait_at(ko.clone());
    // One arrival per consumer warp on the stage's `empty` barrier.
    let release_on = |ring: &str, stage: Expr| {
        if_then(
            bin(
                BinOp::Eq,
                bin(
                    BinOp::FloorMod,
                    Expr::var(&tx),
                    Expr::int(facts.target.warp_size()),
                ),
                Expr::int(0),
            ),
            vec![intrinsic(
                Intrinsic::MbarrierArrive {
                    bar: elem(ring, vec![stage], span),
                },
                span,
            )],
            span,
        )
    };
    let release_of = |stage: Expr| release_on(&empty, stage);
    let head = inline_regions(pipe.head, &tx, threads)?;
    let tail = inline_regions(pipe.tail, &tx, threads)?;
    let mut compute = compute;
    let overlap = stages >= OVERLAP_MIN_STAGES && keep_group_in_flight(&mut compute);
    if roles.consumers == 1 && roles.blocks_per_sm == 1 && !overlap {
        return Err(format!(
            "one consumer warpgroup at one block per SM pays only with a wgmma group in \
             flight (docs/perf.md), and this loop's compute {}",
            if stages < OVERLAP_MIN_STAGES {
                format!("has {stages} stages (fewer than {OVERLAP_MIN_STAGES})")
            } else {
                "is more than the gemm's wgmma code".to_string()
            }
        ));
    }
    // The buffers indexed by stage.
    let staged = crate::analysis::tma::tma_destinations(&pipe.fills);
    // The deferred second gemm (`deferred_gemm.rs`): its late stage buffers on a ring of
    // their own, the producer's fills of them moved to it.
    let deferred = if overlap || stages < 2 {
        None
    } else {
        deferred_gemm::deferred(&compute, &staged).and_then(|d| {
            let code = (pipe.fills.as_slice(), pipe.prologue.body.as_slice());
            late_ring(&d, code, (pipe.full, pipe.copies), names).map(|late| (d, late))
        })
    };
    let mut consumer_body = vec![full_wait];
    // Where in `consumer_body` each consumer warpgroup waits for its turn to issue its
    // wgmmas and where it hands the turn on (ping-pong).
    let mut turns: Option<(usize, usize)> = None;
    // Issued before and after the consumers' loop (deferred: the first k-tile, the last
    // one's second gemm).
    let mut first_issue: Vec<Stmt> = Vec::new();
    let mut last_steps: Vec<Stmt> = Vec::new();
    // The deferred schedule guards its first k-tile, its loop and its last steps with one
    // `if start < stop` (when that is not known at compile time): values the first k-tile
    // leaves in registers then reach the loop on one path only. Guarded apiece, they met
    // the path that skipped the first k-tile at the loop's head, and ptxas spilled the
    // block-dependent causal loop (320 bytes), which then ran slower than without the
    // deferral (docs/perf.md).
    let mut guard_all: Option<Expr> = None;
    let loop_var = m.var.clone();
    let (mut loop_start, loop_stop) = (m.start.clone(), m.stop.clone());
    if let Some((d, late)) = &deferred {
        // The previous k-tile's second gemm runs during this k-tile's register work
        // (module doc of `deferred_gemm.rs`): the first k-tile without it before the loop,
        // the last one's after.
        let var = m.var.name.clone();
        let at = |code: &[Stmt], k: &Expr, names: &mut NameSet| {
            crate::names::instantiate(code, &var, k, names)
        };
        let wait = |n: i64| intrinsic(Intrinsic::WgmmaWait { n }, span);
        let late_wait = |k: &Expr| late.as_ref().map(|r| full_wait_on(&r.full, k.clone()));
        let late_release = |k: &Expr| late.as_ref().map(|r| release_on(&r.empty, slot(k.clone())));
        let nonempty = bin(BinOp::Lt, m.start.clone(), m.stop.clone());
        let mid: Vec<Stmt> = d.mid_free.iter().chain(&d.mid_bound).cloned().collect();
        let mut first = vec![full_wait_at(m.start.clone())];
        first.extend(at(&d.head, &m.start, names));
        first.push(wait(0));
        first.push(release_of(slot(m.start.clone())));
        first.extend(at(&mid, &m.start, names));
        first_issue.extend(first);
        let prev = bin(BinOp::Sub, ko.clone(), Expr::int(1));
        let mut body = vec![full_wait_at(ko.clone())];
        body.extend(d.head[..d.issue].iter().cloned());
        let sync_at = body.len() + 1;
        body.extend(d.head[d.issue..].iter().cloned());
        body.extend(late_wait(&prev));
        body.extend(at(&d.last, &prev, names));
        let arrive_at = body.len() + 1;
        // Two consumer warpgroups or more take turns issuing (module doc: ping-pong).
        if roles.consumers >= 2 {
            turns = Some((sync_at, arrive_at));
        }
        body.push(wait(1));
        body.push(release_of(slot(ko.clone())));
        body.extend(d.mid_free.iter().cloned());
        body.push(wait(0));
        body.extend(late_release(&prev));
        body.extend(d.mid_bound.iter().cloned());
        consumer_body = vec![tlc_ir::build::note(DEFERRED_NOTE.to_string(), span)];
        consumer_body.extend(body);
        loop_start = bin(BinOp::Add, m.start.clone(), Expr::int(1));
        let last_k = bin(BinOp::Sub, m.stop.clone(), Expr::int(1));
        let mut end: Vec<Stmt> = late_wait(&last_k).into_iter().collect();
        end.extend(at(&d.last, &last_k, names));
        end.push(wait(0));
        end.extend(late_release(&last_k));
        last_steps.extend(end);
        guard_all = Some(nonempty);
    } else if overlap {
        // The wait left this k-tile's group in flight and retired the previous one: the
        // previous stage is free.
        consumer_body.extend(compute);
        let previous = bin(BinOp::Sub, ko.clone(), Expr::int(1));
        consumer_body.push(if_then(
            bin(BinOp::Gt, ko.clone(), m.start.clone()),
            vec![release_of(slot(previous))],
            span,
        ));
    } else {
        // The stage is free as soon as its last read has retired: the producer refills it
        // while the consumers finish the k-tile's register work (a promotion, a softmax).
        let at = release_point(&compute, &staged);
        let rest = compute.split_off(at);
        consumer_body.extend(compute);
        consumer_body.push(release_of(slot(ko.clone())));
        consumer_body.extend(rest);
    }
    // No pairs at all (two k-tiles or fewer, known at compile time): no loop, since a loop
    // of no iterations is not IR.
    let no_pairs = matches!(
        (const_int(&loop_start), const_int(&loop_stop)),
        (Some(a), Some(b)) if b <= a
    );
    let consumer_loop: Vec<Stmt> = if no_pairs {
        Vec::new()
    } else {
        let (start, stop) = (loop_start.clone(), loop_stop.clone());
        let the_loop = |body: Vec<Stmt>| {
            Stmt::new(
                StmtKind::For(For {
                    var: loop_var.clone(),
                    start: loop_start.clone(),
                    stop: loop_stop.clone(),
                    kind: ForKind::Serial,
                    body,
                }),
                span,
            )
        };
        match turns {
            Some(at) => vec![ping_pong(
                consumer_body,
                at,
                (&loop_var.name, &start, &stop),
                (&tx, roles.consumers),
                names,
                &the_loop,
                span,
            )],
            None => vec![the_loop(consumer_body)],
        }
    };
    // After the loop: the last k-tile's group, still in flight, retires before the tail
    // reads the accumulators (the statement right after the loop: `persistent-tiles`
    // releases the last stage there).
    let mut after_loop = Vec::new();
    if overlap {
        after_loop.push(intrinsic(Intrinsic::WgmmaWait { n: 0 }, span));
    }

    // Producer: the prologue as it is, then the loop's fills after their stage is free.
    let kp = names.fresh(&m.var.name);
    let kpe = Expr::var(&kp);
    let (mut fills, mut prologue) = (pipe.fills, pipe.prologue);
    let late = deferred.and_then(|(_, late)| late);
    if let Some(r) = &late {
        fills = r.fills.clone();
        prologue.body = r.prologue.clone();
    }
    map_body_exprs(&mut fills, &mut |e| match &e.kind {
        ExprKind::Var(n) if *n == m.var.name => {
            let mut v = kpe.clone();
            v.span = e.span;
            v
        }
        _ => e,
    });
    let refill = bin(BinOp::Add, kpe.clone(), Expr::int(stages - 1));
    let empty_wait_on = |ring: &str| {
        if_then(
            bin(
                BinOp::And,
                bin(BinOp::Gt, kpe.clone(), m.start.clone()),
                bin(BinOp::Lt, refill.clone(), m.stop.clone()),
            ),
            vec![intrinsic(
                Intrinsic::MbarrierWait {
                    bar: elem(ring, vec![slot(refill.clone())], span),
                    parity: bin(
                        BinOp::FloorMod,
                        bin(
                            BinOp::FloorDiv,
                            bin(BinOp::Sub, fill_of(kpe.clone()), Expr::int(1)),
                            Expr::int(stages),
                        ),
                        Expr::int(2),
                    ),
                },
                span,
            )],
            span,
        )
    };
    let empty_wait = empty_wait_on(&empty);
    // A late ring's stage is waited for right before its fill: the early fills go ahead.
    if let Some(r) = &late {
        if !deferred_gemm::wait_before_first_arrival(&mut fills, &r.full, &empty_wait_on(&r.empty))
        {
            return Err("the late ring's fills are not in the loop".into());
        }
    }
    // (The first statement of the loop: `persistent-tiles` replaces it.)
    let mut producer_loop_body = vec![empty_wait];
    producer_loop_body.extend(fills);
    let producer_loop = Stmt::new(
        StmtKind::For(For {
            var: tlc_ir::Ident::new(&kp, span),
            start: m.start.clone(),
            stop: m.stop.clone(),
            kind: ForKind::Serial,
            body: producer_loop_body,
        }),
        span,
    );
    let producer = vec![Stmt::new(StmtKind::For(prologue), span), producer_loop];
    let issued: Vec<Stmt> = first_issue
        .into_iter()
        .chain(consumer_loop)
        .chain(last_steps)
        .collect();
    let issued = match guard_all {
        Some(runs) if tlc_ir::verifier::const_bool(&runs) != Some(true) => {
            vec![if_then(runs, issued, span)]
        }
        _ => issued,
    };
    let consumer: Vec<Stmt> = head
        .into_iter()
        .chain(issued)
        .chain(after_loop)
        .chain(tail)
        .collect();
    let issuer = if_then(
        bin(BinOp::Eq, Expr::var(&tx), Expr::int(threads)),
        producer,
        span,
    );
    let roles = Stmt::new(
        StmtKind::If {
            cond: bin(BinOp::Ge, Expr::var(&tx), Expr::int(threads)),
            then_body: vec![
                intrinsic(
                    Intrinsic::SetMaxNReg {
                        n: PRODUCER_REGISTERS,
                        inc: false,
                    },
                    span,
                ),
                issuer,
            ],
            else_body: vec![intrinsic(
                Intrinsic::SetMaxNReg {
                    n: roles.consumer_registers,
                    inc: true,
                },
                span,
            )]
            .into_iter()
            .chain(consumer)
            .collect(),
        },
        span,
    );
    let wide = Block::flat(threads + WARPGROUP_SIZE);
    let region = wide.fresh_region(&tx, vec![roles], span, names);
    Ok(Built {
        region,
        empty,
        late: late.map(|r| LateRing {
            fills: Vec::new(),
            prologue: Vec::new(),
            ..r
        }),
    })
}

/// The consumer loop with body `body`, once per consumer warpgroup (`tx // 128`), each
/// copy taking its turn to issue its wgmmas: before statement `sync_at` warpgroup `w`
/// syncs on named barrier `PING_PONG_FIRST_BARRIER + w`, before `arrive_at` it arrives on
/// the next warpgroup's (`w + 1`, the last on the first's, except in its last iteration:
/// no one waits for that turn). Each barrier counts 256 threads: its owner syncing and the
/// previous warpgroup arriving. The first warpgroup arrives on its own barrier once before
/// its loop (when the loop runs: `start < stop`), so it starts; every arrival then has its
/// sync, so no phase is left open. The copies are the branches of one `if` chain: the interpreter
/// runs them as tasks, and on the GPU each warpgroup runs its own.
fn ping_pong(
    body: Vec<Stmt>,
    (sync_at, arrive_at): (usize, usize),
    (var, start, stop): (&str, &Expr, &Expr),
    (tx, consumers): (&str, i64),
    names: &mut NameSet,
    the_loop: &dyn Fn(Vec<Stmt>) -> Stmt,
    span: Span,
) -> Stmt {
    let barrier = |w: i64| PING_PONG_FIRST_BARRIER + w;
    let count = 2 * WARPGROUP_SIZE;
    let mut branches: Vec<(i64, Vec<Stmt>)> = Vec::new();
    for w in 0..consumers {
        let mut b = body.clone();
        let next = (w + 1) % consumers;
        let mut arrive = intrinsic(
            Intrinsic::BarArrive {
                id: barrier(next),
                count,
            },
            span,
        );
        if next == 0 {
            let more = bin(
                BinOp::Lt,
                bin(BinOp::Add, Expr::var(var), Expr::int(1)),
                stop.clone(),
            );
            arrive = if_then(more, vec![arrive], span);
        }
        b.insert(arrive_at, arrive);
        b.insert(
            sync_at,
            intrinsic(
                Intrinsic::BarSync {
                    id: barrier(w),
                    count,
                },
                span,
            ),
        );
        let mut code = vec![the_loop(b)];
        if w > 0 {
            // One scope: the copies bind names of their own.
            crate::names::freshen(&mut code, names);
        } else {
            // Only when the loop runs: an unmatched arrival would complete a phase of its
            // own the next time the region runs (an outer loop's next iteration).
            let first_turn = intrinsic(
                Intrinsic::BarArrive {
                    id: barrier(0),
                    count,
                },
                span,
            );
            let always = matches!((const_int(start), const_int(stop)), (Some(a), Some(b)) if a < b);
            let runs = bin(BinOp::Lt, start.clone(), stop.clone());
            code.insert(
                0,
                if always {
                    first_turn
                } else {
                    if_then(runs, vec![first_turn], span)
                },
            );
        }
        branches.push((w, code));
    }
    // if wg == 0: … elif wg == 1: … else: … (the last)
    let wg = bin(BinOp::FloorDiv, Expr::var(tx), Expr::int(WARPGROUP_SIZE));
    let mut chain: Option<Vec<Stmt>> = None;
    for (w, code) in branches.into_iter().rev() {
        chain = Some(match chain {
            None => code,
            Some(rest) => vec![Stmt::new(
                StmtKind::If {
                    cond: bin(BinOp::Eq, wg.clone(), Expr::int(w)),
                    then_body: code,
                    else_body: rest,
                },
                span,
            )],
        });
    }
    chain
        .and_then(|mut c| (c.len() == 1).then(|| c.remove(0)))
        .unwrap_or_else(|| the_loop(body))
}

/// The first named barrier of the consumers' ping-pong (`ping_pong`): one per consumer
/// warpgroup from here on (at most 7 of them: ids up to 8 of the 15).
pub(crate) const PING_PONG_FIRST_BARRIER: i64 = EPILOGUE_BARRIER + 1;

/// Where in the lowered compute `body` (top-level statements) the consumers may release
/// their stage: after the last statement that reads a `staged` buffer or issues a
/// `T.wgmma` (which reads its operands asynchronously), and, when wgmmas were issued, after
/// the `T.wgmma_wait(0)` that follows them and retires their reads. The end of the body
/// when no such wait follows (nothing is released early without proof).
fn release_point(body: &[Stmt], staged: &[String]) -> usize {
    let issues_wgmma = |s: &Stmt| {
        let mut found = false;
        tlc_ir::visit::for_each_stmt(std::slice::from_ref(s), &mut |t| {
            found |= matches!(&t.kind, StmtKind::Intrinsic(i) if i.wgmma_accumulator().is_some());
        });
        found
    };
    let reads_stage = |s: &Stmt| {
        let access = Access::of_body(std::slice::from_ref(s));
        access.reads.iter().any(|b| staged.contains(b))
    };
    let after_reads = body.iter().rposition(reads_stage).map_or(0, |i| i + 1);
    let Some(last_wgmma) = body.iter().rposition(issues_wgmma) else {
        return after_reads;
    };
    let retired = body
        .iter()
        .enumerate()
        .skip(last_wgmma + 1)
        .find(|(_, s)| matches!(s.kind, StmtKind::Intrinsic(Intrinsic::WgmmaWait { n: 0 })))
        .map(|(i, _)| i + 1);
    match retired {
        Some(at) => at.max(after_reads),
        None => body.len(),
    }
}

/// Turns the final `T.wgmma_wait(0)` of the lowered compute `body` into `T.wgmma_wait(1)`
/// when the body is one `T.gemm`'s wgmma code and nothing else (notes aside): the k-tile's
/// group then stays in flight while the consumers wait for the next stage, and the wait
/// retires the previous k-tile's group — whose stage the caller releases instead of this
/// one. Anything else in the loop (a clear of the accumulator, fragment arithmetic) could
/// touch registers a group in flight still writes, so it keeps the wait for all — and so
/// does a `T.wgmma_rs`: the next k-tile's would read its register A while the group that
/// reads it too is in flight, which PTX leaves undefined. Whether it did.
fn keep_group_in_flight(body: &mut [Stmt]) -> bool {
    let mut waits = 0;
    let mut only_wgmma = true;
    tlc_ir::visit::for_each_stmt(body, &mut |s| match &s.kind {
        StmtKind::Intrinsic(Intrinsic::WgmmaWait { .. }) => waits += 1,
        StmtKind::Intrinsic(
            Intrinsic::Wgmma { .. } | Intrinsic::WgmmaFence | Intrinsic::WgmmaCommit,
        )
        | StmtKind::Note(_) => {}
        StmtKind::For(f) if f.kind == ForKind::Unroll => {}
        _ => only_wgmma = false,
    });
    let last = body
        .iter_mut()
        .rev()
        .find(|s| !matches!(s.kind, StmtKind::Note(_)));
    match last {
        Some(Stmt {
            kind: StmtKind::Intrinsic(wait @ Intrinsic::WgmmaWait { n: 0 }),
            ..
        }) if waits == 1 && only_wgmma => {
            *wait = Intrinsic::WgmmaWait { n: 1 };
            true
        }
        _ => false,
    }
}

/// `Ok` when the lowered compute `body` can run on the consumers alone, between their
/// stage waits and releases: it issues `T.wgmma`, and writes registers only (warp shuffles
/// included: an online softmax between two gemms is consumer work).
fn consumer_only(body: &[Stmt], facts: &Facts) -> Result<(), String> {
    let private = |name: &str| {
        facts
            .buffer(name)
            .is_some_and(|b| matches!(b.scope, Scope::Local | Scope::Fragment))
    };
    let mut why: Option<String> = None;
    let mut wgmma = false;
    tlc_ir::visit::for_each_stmt(body, &mut |s| {
        if why.is_some() {
            return;
        }
        match &s.kind {
            StmtKind::Store { buffer, .. } | StmtKind::AtomicAdd { buffer, .. }
                if !private(&buffer.name) =>
            {
                why = Some(format!("the loop's compute writes `{}`", buffer.name));
            }
            StmtKind::Barrier => why = Some("the loop's compute needs block barriers".into()),
            StmtKind::Intrinsic(i) => {
                wgmma |= i.wgmma_accumulator().is_some();
                if matches!(
                    i,
                    Intrinsic::Wgmma { .. }
                        | Intrinsic::WgmmaRs { .. }
                        | Intrinsic::WgmmaFence
                        | Intrinsic::WgmmaCommit
                        | Intrinsic::WgmmaWait { .. }
                        | Intrinsic::Ldmatrix { .. }
                        | Intrinsic::Mma { .. }
                        // Register exchanges within a warp (a row reduction's butterfly):
                        // every consumer warp runs the compute whole, so all lanes take part.
                        | Intrinsic::ShflXor { .. }
                        | Intrinsic::ShflDown { .. }
                ) {
                    if let Some(a) = i
                        .accesses()
                        .into_iter()
                        .find(|a| a.effect.writes() && !private(&a.operand.buffer.name))
                    {
                        why = Some(format!(
                            "the loop's compute writes `{}`",
                            a.operand.buffer.name
                        ));
                    }
                } else {
                    why = Some(format!("the loop's compute issues `{}`", i.def().name));
                }
            }
            _ => {}
        }
    });
    if let Some(why) = why {
        return Err(why);
    }
    if !wgmma {
        return Err("the loop's compute issues no `T.wgmma`".into());
    }
    Ok(())
}

/// Where a tile op moves into the consumers' branch: before or after their loop.
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Side {
    Before,
    After,
}

/// Whether thread code `body` (a lowered tile op) can move into the consumers' branch on
/// `side` of their loop: it never touches shared memory (so no block barrier orders it),
/// issues no intrinsic, and writes registers — or global memory (stores, atomic adds) after
/// the loop, when the producer has finished reading (before it, the producer's loads could
/// race with the write: a kernel that writes a tensor it then loads through TMA).
pub(crate) fn private_code(body: &[Stmt], side: Side, facts: &Facts) -> bool {
    let scope = |name: &str| facts.buffer(name).map(|b| b.scope);
    let shared = |name: &str| scope(name).is_none_or(|s| s == Scope::Shared);
    let mut ok = true;
    tlc_ir::visit::for_each_stmt(body, &mut |s| {
        match &s.kind {
            StmtKind::Store { buffer, .. } => {
                ok &= !shared(&buffer.name)
                    && (side == Side::After || scope(&buffer.name) != Some(Scope::Global));
            }
            // A global atomic add (`red`, whose old value nobody reads) is a write like a
            // store: after the loop only. Into shared memory it is not private.
            StmtKind::AtomicAdd { buffer, .. } => {
                ok &= !shared(&buffer.name)
                    && (side == Side::After || scope(&buffer.name) != Some(Scope::Global));
            }
            StmtKind::Barrier | StmtKind::Intrinsic(_) => ok = false,
            _ => {}
        }
        for e in tlc_ir::visit::stmt_exprs(s) {
            tlc_ir::visit::for_each_subexpr(e, &mut |x| {
                if let ExprKind::Load { buffer, .. } = &x.kind {
                    ok &= !shared(buffer);
                }
            });
        }
    });
    ok
}

/// The named barrier (`T.bar_sync`) the consumers' epilogue synchronizes on: id 0 is
/// `T.sync_threads()`'s, which the producer warpgroup does not reach once it has left.
pub(crate) const EPILOGUE_BARRIER: i64 = 1;

/// Whether thread code `body` (a lowered tile op after the loop) can move into the
/// consumers' branch behind a `T.bar_sync` among them: it goes through shared memory (an
/// epilogue staged through a shared tile: registers → shared → global), touching none of
/// `producer`'s buffers (the stages and the mbarriers), issues no intrinsic and needs no
/// block barrier. The `T.bar_sync` before it orders it after every consumer's loop and
/// earlier epilogue code, as the block barrier `thread-binding` would put there did — the
/// producer warpgroup, done with its fills, takes no part.
pub(crate) fn shared_epilogue_code(body: &[Stmt], facts: &Facts, producer: &[String]) -> bool {
    let scope = |name: &str| facts.buffer(name).map(|b| b.scope);
    let mut ok = true;
    let mut shared = false;
    let mut touch = |name: &str, ok: &mut bool| match scope(name) {
        None => *ok = false,
        Some(Scope::Shared) => {
            shared = true;
            *ok &= !producer.iter().any(|p| p == name);
        }
        Some(_) => {}
    };
    tlc_ir::visit::for_each_stmt(body, &mut |s| {
        match &s.kind {
            StmtKind::Store { buffer, .. } | StmtKind::AtomicAdd { buffer, .. } => {
                touch(&buffer.name, &mut ok)
            }
            StmtKind::Barrier | StmtKind::Intrinsic(_) | StmtKind::Kernel(_) => ok = false,
            _ => {}
        }
        for e in tlc_ir::visit::stmt_exprs(s) {
            tlc_ir::visit::for_each_subexpr(e, &mut |x| {
                if let ExprKind::Load { buffer, .. } = &x.kind {
                    touch(buffer, &mut ok);
                }
            });
        }
    });
    ok && shared
}

/// `body` with each of its regions (a `threadIdx.x` loop over at most `threads` threads)
/// replaced by its body run by thread `tx` — the consumers are threads `0 .. threads`, so a
/// region over all of them is its body, a narrower one its body under `tx < extent`.
fn inline_regions(body: Vec<Stmt>, tx: &str, threads: i64) -> Result<Vec<Stmt>, String> {
    let mut out = Vec::with_capacity(body.len());
    for mut s in body {
        if let StmtKind::For(f) = &mut s.kind {
            if let ForKind::ThreadBinding(tag) = &f.kind {
                let extent = const_int(&f.stop).filter(|&e| e <= threads);
                let (true, Some(0), Some(extent)) =
                    (*tag == ThreadTag::ThreadX, const_int(&f.start), extent)
                else {
                    return Err(
                        "a region of the loop's compute is not over the block's threads".into(),
                    );
                };
                let var = f.var.name.clone();
                let mut inner = std::mem::take(&mut f.body);
                let to = Expr::var(tx);
                // The consumers are threads `0 .. threads`: `tx // c` is 0 and `tx % c` is
                // `tx` for `c >= threads` (a warpgroup index of one warpgroup).
                let is_tx = |e: &Expr| matches!(&e.kind, ExprKind::Var(n) if *n == var || n == tx);
                map_body_exprs(&mut inner, &mut |e| match &e.kind {
                    ExprKind::Var(n) if *n == var => {
                        let mut v = to.clone();
                        v.span = e.span;
                        v
                    }
                    ExprKind::Binary(op @ (BinOp::FloorDiv | BinOp::FloorMod), a, b)
                        if is_tx(a) && const_int(b).is_some_and(|c| c >= threads) =>
                    {
                        let mut v = if *op == BinOp::FloorDiv {
                            Expr::int(0)
                        } else {
                            to.clone()
                        };
                        v.span = e.span;
                        v
                    }
                    // Literals the replacement left side by side fold, as the parser
                    // folds them (so the printed IR reads back equal).
                    ExprKind::Binary(op, a, b) if a.as_int().is_some() && b.as_int().is_some() => {
                        Expr::binary(*op, (**a).clone(), (**b).clone(), e.span)
                    }
                    _ => e,
                });
                if extent < threads {
                    out.push(if_then(
                        bin(BinOp::Lt, Expr::var(tx), Expr::int(extent)),
                        inner,
                        s.span,
                    ));
                } else {
                    out.extend(inner);
                }
                continue;
            }
        }
        for child in tlc_ir::visit::child_bodies_mut(&mut s) {
            *child = inline_regions(std::mem::take(child), tx, threads)?;
        }
        out.push(s);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roles_of(threads: i64, shared: Option<i64>, stages: i64) -> Result<Roles, String> {
        roles(&Block::flat(threads), shared, stages, None, Target::Sm90a)
    }

    #[test]
    fn the_users_blocks_per_sm_are_kept() {
        let block = Block::flat(128);
        // Asked for one block: 3 stages then do not pay (as when the memory fits once).
        assert!(roles(&block, Some(50_176), 3, Some(1), Target::Sm90a).is_err());
        let one = roles(&block, Some(50_176), 4, Some(1), Target::Sm90a).expect("one");
        assert_eq!((one.blocks_per_sm, one.consumer_registers), (1, 240));
        // Three: 65536 / 3 / 128 = 170 per warpgroup thread, 130 -> 128 for the consumers.
        let three = roles(&block, Some(50_176), 3, Some(3), Target::Sm90a).expect("three");
        assert_eq!((three.blocks_per_sm, three.consumer_registers), (3, 128));
        // Five blocks of 384 threads: 34 registers each at entry, under the producer's 40.
        let five = roles(&Block::flat(256), Some(0), 4, Some(5), Target::Sm90a);
        assert!(five.expect_err("too few").contains("too few"));
    }

    #[test]
    fn registers_and_blocks_per_sm_by_consumer_count() {
        // Two consumers: one block per SM, (512 - 40) / 2 rounded down to a multiple of 8.
        let two = roles_of(256, Some(73_728), 3).expect("two consumers");
        assert_eq!((two.consumers, two.blocks_per_sm), (2, 1));
        assert_eq!(two.consumer_registers, 232);
        // Three consumers: (512 - 40) / 3 = 157 -> 152.
        assert_eq!(
            roles_of(384, Some(0), 3).map(|r| r.consumer_registers),
            Ok(152)
        );
        // One consumer whose shared memory fits twice: two blocks, 256 - 40 registers.
        let one = roles_of(128, Some(50_176), 3).expect("fits twice");
        assert_eq!((one.blocks_per_sm, one.consumer_registers), (2, 216));
        // 113 KiB fits twice (2 x (113 + 1) KiB = 228 KiB), 114 KiB once.
        assert_eq!(
            roles_of(128, Some(115_712), 3).map(|r| r.blocks_per_sm),
            Ok(2)
        );
        let once = roles_of(128, Some(116_736), 3).expect_err("3 stages, one block");
        assert!(once.contains("fit once"), "{once}");
        // ... unless the consumers keep a group in flight: one block, capped at 240.
        let deep = roles_of(128, Some(116_736), 4).expect("4 stages");
        assert_eq!((deep.blocks_per_sm, deep.consumer_registers), (1, 240));
        // Unknown shared memory counts as fitting once.
        assert!(roles_of(128, None, 3).is_err());
    }

    #[test]
    fn blocks_that_cannot_take_a_producer() {
        assert!(roles_of(96, Some(0), 3)
            .expect_err("not whole warpgroups")
            .contains("warpgroups"));
        assert!(roles_of(1024, Some(0), 3)
            .expect_err("no room")
            .contains("no room"));
    }
}
