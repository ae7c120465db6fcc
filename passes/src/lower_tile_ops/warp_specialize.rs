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
//!             <the loop's compute on stage ko % S, lowered, inlined>
//!             if tx % 32 == 0:
//!                 T.mbarrier_arrive(empty[ko % S])      # one arrival per consumer warp
//! ```
//!
//! - Why the empty parity: fill `f` of stage `f % S` is its `j = (f - start) // S`-th; for
//!   `j >= 1` the consumers released the stage's previous fill in the `(j - 1)`-th phase of
//!   `empty[f % S]`, whose parity is `(j - 1) % 2 = (kp - start - 1) // S % 2` with
//!   `f = kp + S - 1`. `full` keeps the parities of the plain TMA pipeline (`tma.rs`).
//! - Why the consumers' arrival is safe: every lowered `T.gemm` ends with
//!   `T.wgmma_wait(0)`, so a warp arrives after its reads of the stage have retired. Each
//!   warp arrives (count `T / 32`), so the stage is free only when all consumer warps are
//!   done with it.
//! - When: the compute of the loop, once lowered, issues `T.wgmma` and writes nothing but
//!   registers (no shared or global stores, no barriers, no other asynchronous copies), so
//!   the consumers need no block barrier inside the loop; the block is 1-D with a multiple
//!   of 128 threads, at most 1024 - 128. Otherwise the pipeline stays on the one-warpgroup
//!   TMA protocol of `tma.rs`, with a `T.note` saying why.
//! - Registers: the producer gives its registers away (`setmaxnreg` 40) and the consumers
//!   take them, within the 64K of an SM at one block per SM (codegen pins the budget).

use super::region::thread_region;
use super::Ctx;
use crate::analysis::block::Block;
use crate::names::NameSet;
use tlc_ir::build::{bin, elem, intrinsic};
use tlc_ir::target::WARPGROUP_SIZE;
use tlc_ir::verifier::const_int;
use tlc_ir::visit::map_body_exprs;
use tlc_ir::{
    BinOp, Diagnostic, Expr, ExprKind, For, ForKind, Intrinsic, Scope, Span, Stmt, StmtKind,
    ThreadTag,
};

/// The registers a producer warpgroup keeps (CUTLASS's choice: enough for the TMA
/// coordinates and the loop).
const PRODUCER_REGISTERS: i64 = 40;

/// The most registers a consumer thread asks for (TileLang's default).
const CONSUMER_REGISTERS: i64 = 240;

/// Registers of one SM, per thread of a warpgroup: 65536 / 128.
const SM_REGISTERS_PER_WARPGROUP_THREAD: i64 = 512;

/// Consumer warpgroups a block needs for warp specialization to pay: measured on an H100
/// (docs/perf.md, 2026-11-25), one consumer warpgroup plus the producer ran the seed GEMM at
/// 0.74x the speed of the one-warpgroup TMA pipeline (one block per SM instead of several);
/// two consumers ran 1.17x faster.
const MIN_CONSUMER_WARPGROUPS: i64 = 2;

/// The largest block (threads).
const MAX_BLOCK_THREADS: i64 = 1024;

/// The parts of a software pipeline on TMA that warp specialization rebuilds.
pub(crate) struct Pipeline<'a> {
    /// The prologue's fills (thread code: arrive.expect_tx + TMA loads, per stage).
    pub prologue: For,
    /// The loop (its variable, bounds); its body is not used.
    pub main: &'a For,
    /// The loop's fills of iteration `ko + S - 1` (thread code, under their guards).
    pub fills: Vec<Stmt>,
    /// The loop's other statements (tile level), reading stage `ko % S`.
    pub compute: Vec<Stmt>,
    /// Thread code the consumers run before and after their loop (`private_code`).
    pub head: Vec<Stmt>,
    pub tail: Vec<Stmt>,
    pub stages: i64,
    /// The `full` mbarriers (`tma.rs` allocated them).
    pub full: &'a str,
}

/// Lowers tile-level statements to thread code (`lower_tile_ops::lower_body`).
pub(crate) type Lower<'a> =
    dyn FnMut(Vec<Stmt>, &mut NameSet) -> Result<Vec<Stmt>, Vec<Diagnostic>> + 'a;

/// Why the block cannot take a producer warpgroup; `None` when it can.
pub(crate) fn block_refuses(block: &Block) -> Option<String> {
    let threads = block.threads();
    if !block.is_flat() {
        return Some("the block is multi-dimensional".into());
    }
    if threads % WARPGROUP_SIZE != 0 {
        return Some(format!(
            "{threads} threads are not whole warpgroups of {WARPGROUP_SIZE}"
        ));
    }
    if threads < MIN_CONSUMER_WARPGROUPS * WARPGROUP_SIZE {
        return Some(format!(
            "one consumer warpgroup ({threads} threads) ran slower with a producer warpgroup \
             than without (docs/perf.md)"
        ));
    }
    if threads + WARPGROUP_SIZE > MAX_BLOCK_THREADS {
        return Some(format!(
            "{threads} threads leave no room for a producer warpgroup ({MAX_BLOCK_THREADS} at most)"
        ));
    }
    None
}

/// The pipeline as one warp-specialized region over `T + 128` threads, and its `empty`
/// barriers' allocation count; why not when the compute does not fit (see the module doc).
/// `lower` lowers tile-level statements (the loop's compute) to thread code.
pub(crate) fn build(
    pipe: Pipeline,
    ctx: &Ctx,
    names: &mut NameSet,
    span: Span,
    lower: &mut Lower,
) -> Result<(Stmt, String), String> {
    let threads = ctx.block.threads();
    let consumers = threads / WARPGROUP_SIZE;
    let stages = pipe.stages;
    let m = pipe.main;
    // The compute, lowered inside its loop (so its variable is bounded there).
    let looped = Stmt::new(
        StmtKind::For(For {
            var: m.var.clone(),
            start: m.start.clone(),
            stop: m.stop.clone(),
            kind: ForKind::Serial,
            body: pipe.compute,
        }),
        span,
    );
    let lowered =
        lower(vec![looped], names).map_err(|_| "the loop's compute does not lower".to_string())?;
    let [Stmt {
        kind: StmtKind::For(lowered),
        ..
    }] = <[Stmt; 1]>::try_from(lowered)
        .map_err(|_| "the loop's compute lowers to several statements".to_string())?
    else {
        return Err("the loop's compute does not stay one loop".into());
    };
    consumer_only(&lowered.body, ctx)?;
    let tx = names.fresh(ctx.block.index_base());
    let compute = inline_regions(lowered.body, &tx, threads)?;

    let empty = names.fresh("tma_empty");
    let ko = Expr::var(&m.var.name);
    let slot = |e: Expr| bin(BinOp::FloorMod, e, Expr::int(stages));
    let fill_of = |k: Expr| bin(BinOp::Sub, k, m.start.clone());
    // Consumers: wait for the stage, compute, release it warp by warp.
    let full_wait = intrinsic(
        Intrinsic::MbarrierWait {
            bar: elem(pipe.full, vec![slot(ko.clone())], span),
            parity: bin(
                BinOp::FloorMod,
                bin(BinOp::FloorDiv, fill_of(ko.clone()), Expr::int(stages)),
                Expr::int(2),
            ),
        },
        span,
    );
    let release = if_then(
        bin(
            BinOp::Eq,
            bin(BinOp::FloorMod, Expr::var(&tx), Expr::int(32)),
            Expr::int(0),
        ),
        vec![intrinsic(
            Intrinsic::MbarrierArrive {
                bar: elem(&empty, vec![slot(ko.clone())], span),
            },
            span,
        )],
        span,
    );
    let head = inline_regions(pipe.head, &tx, threads)?;
    let tail = inline_regions(pipe.tail, &tx, threads)?;
    let mut consumer_body = vec![full_wait];
    consumer_body.extend(compute);
    consumer_body.push(release);
    let consumer_loop = Stmt::new(
        StmtKind::For(For {
            var: m.var.clone(),
            start: m.start.clone(),
            stop: m.stop.clone(),
            kind: ForKind::Serial,
            body: consumer_body,
        }),
        span,
    );

    // Producer: the prologue as it is, then the loop's fills after their stage is free.
    let kp = names.fresh(&m.var.name);
    let kpe = Expr::var(&kp);
    let mut fills = pipe.fills;
    map_body_exprs(&mut fills, &mut |e| match &e.kind {
        ExprKind::Var(n) if *n == m.var.name => {
            let mut v = kpe.clone();
            v.span = e.span;
            v
        }
        _ => e,
    });
    let refill = bin(BinOp::Add, kpe.clone(), Expr::int(stages - 1));
    let empty_wait = if_then(
        bin(
            BinOp::And,
            bin(BinOp::Gt, kpe.clone(), m.start.clone()),
            bin(BinOp::Lt, refill.clone(), m.stop.clone()),
        ),
        vec![intrinsic(
            Intrinsic::MbarrierWait {
                bar: elem(&empty, vec![slot(refill)], span),
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
    );
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
    let issuer = if_then(
        bin(BinOp::Eq, Expr::var(&tx), Expr::int(threads)),
        vec![Stmt::new(StmtKind::For(pipe.prologue), span), producer_loop],
        span,
    );
    let consumer_registers =
        (((SM_REGISTERS_PER_WARPGROUP_THREAD - PRODUCER_REGISTERS) / consumers) / 8 * 8)
            .min(CONSUMER_REGISTERS);
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
                    n: consumer_registers,
                    inc: true,
                },
                span,
            )]
            .into_iter()
            .chain(head)
            .chain([consumer_loop])
            .chain(tail)
            .collect(),
        },
        span,
    );
    let wide = Block::flat(threads + WARPGROUP_SIZE);
    let region = thread_region(&wide, &tx, vec![roles], span, names);
    Ok((region, empty))
}

fn if_then(cond: Expr, body: Vec<Stmt>, span: Span) -> Stmt {
    Stmt::new(
        StmtKind::If {
            cond,
            then_body: body,
            else_body: Vec::new(),
        },
        span,
    )
}

/// `Ok` when the lowered compute `body` can run on the consumers alone, between their
/// stage waits and releases: it issues `T.wgmma`, and writes registers only.
fn consumer_only(body: &[Stmt], ctx: &Ctx) -> Result<(), String> {
    let private = |name: &str| {
        ctx.buffer(name)
            .map(|b| b.scope)
            .or_else(|| {
                ctx.new_allocs
                    .borrow()
                    .iter()
                    .find(|b| b.name.name == name)
                    .map(|b| b.scope)
            })
            .is_some_and(|s| matches!(s, Scope::Local | Scope::Fragment))
    };
    let mut why: Option<String> = None;
    let mut wgmma = false;
    tlc_ir::visit::for_each_stmt(body, &mut |s| {
        if why.is_some() {
            return;
        }
        match &s.kind {
            StmtKind::Store { buffer, .. } if !private(&buffer.name) => {
                why = Some(format!("the loop's compute writes `{}`", buffer.name));
            }
            StmtKind::Barrier => why = Some("the loop's compute needs block barriers".into()),
            StmtKind::Intrinsic(i) => {
                wgmma |= matches!(i, Intrinsic::Wgmma { .. });
                if matches!(
                    i,
                    Intrinsic::Wgmma { .. }
                        | Intrinsic::WgmmaFence
                        | Intrinsic::WgmmaCommit
                        | Intrinsic::WgmmaWait(_)
                        | Intrinsic::Ldmatrix { .. }
                        | Intrinsic::Mma { .. }
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
/// issues no intrinsic, and writes registers — or global memory after the loop, when the
/// producer has finished reading (before it, the producer's loads could race with the
/// write: a kernel that writes a tensor it then loads through TMA).
pub(crate) fn private_code(body: &[Stmt], side: Side, ctx: &Ctx) -> bool {
    let scope = |name: &str| ctx.buffer(name).map(|b| b.scope);
    let shared = |name: &str| scope(name).is_none_or(|s| s == Scope::Shared);
    let mut ok = true;
    tlc_ir::visit::for_each_stmt(body, &mut |s| {
        match &s.kind {
            StmtKind::Store { buffer, .. } => {
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
