//! Software-pipelined loops on TMA (sm_90a): when every stage copy of a loop that
//! `inject-software-pipeline` made can run on TMA (`analysis::tma`), the copies become
//! `T.tma_load`s issued by one thread and the cp.async commit / wait protocol becomes one
//! mbarrier per stage:
//!
//! ```python
//! bars = T.alloc_shared((S,), "int64")                 # one mbarrier per stage
//! for tx in T.thread_binding(128, thread="threadIdx.x"):
//!     if tx == 0:
//!         for s in T.unroll(S):
//!             T.mbarrier_init(bars[s], C)              # C = copies per stage
//!         T.fence_proxy_async()
//! for s in T.unroll(S - 1):                            # prologue
//!     for tx in T.thread_binding(128, thread="threadIdx.x"):
//!         if tx == 0:                                  # per copy:
//!             T.mbarrier_arrive_expect_tx(bars[s], BYTES)
//!             T.tma_load(A_shared[s, 0, 0], A[by * 128, s * 32], bars[s], box=(128, 32), swizzle=64)
//! for ko in T.serial(start, stop):
//!     for tx in T.thread_binding(128, thread="threadIdx.x"):
//!         T.mbarrier_wait(bars[ko % S], (ko - start) // S % 2)
//!     if ko + (S - 1) < stop:
//!         <the copies into stage (ko + S - 1) % S, as above>
//!     <last-stage statements, reading stage ko % S>
//! ```
//!
//! - Why the parity: stage `k % S` is filled for every `k` in `[start, stop)` in order, so
//!   the fill of iteration `ko` is the `(ko - start) // S`-th of its barrier's phases. Each
//!   phase is waited before the stage is filled again (the refill of iteration `ko + 1`
//!   comes after the block barrier that orders the reads of iteration `ko`), so a parity
//!   names the phase exactly.
//! - Each copy arrives once with its own byte count (`arrive.expect_tx`), so a phase
//!   completes when all `C` copies of the stage have arrived and all their bytes landed.
//! - That is the one-warpgroup form, and the form the `warp-specialize` pass
//!   (`passes/src/warp_specialize/`) takes apart to give the loads to a producer warpgroup:
//!   keep it exactly (the init region, the prologue of one-thread fill regions, the loop
//!   whose first statement is the wait region).
//! - Copies into plain shared buffers (no wgmma layout) join the TMA loads of a loop that
//!   loads wgmma operands, as unswizzled boxes (`analysis::tma`); a loop of plain copies
//!   only keeps cp.async.
//! - The loop may start at any block-uniform value the loop does not write (a causal lower
//!   bound): the fill order is proven symbolically (`analysis::tma::stage_of_fill`).
//! - A box origin the variables' ranges do not keep within `.s32` (one computed from a
//!   loaded page-table entry) is clamped to `[-box, dim]`: wholly outside stays wholly
//!   outside (zeros), inside is unchanged.
//! - A loop with any stage copy TMA cannot take keeps cp.async for all of them, with a
//!   `T.note` before it giving `analysis::tma::plan_copy`'s reason (targets without TMA get
//!   no note).

use super::region::thread_region;
use super::Ctx;
use crate::analysis::int::{self, Ranges};
use crate::analysis::tma::{
    barrier_array, fill_values, init_region, parallel_copy, plan_copy, stage_of_fill,
    unstable_start, TmaCopy,
};
use crate::names::NameSet;
use tlc_ir::build::{bin, elem, intrinsic, note};
use tlc_ir::intrinsic::MAX_BOX_DIM;
use tlc_ir::target::AsyncCopy;
use tlc_ir::verifier::const_int;
use tlc_ir::visit::take_notes;
use tlc_ir::{BinOp, Expr, ExprKind, For, ForKind, Intrinsic, Region, Scope, Span, Stmt, StmtKind};

/// Rewrites the pipelined loops of `body` (recursively) whose copies all take TMA; a
/// `T.note` before each other one says why it does not. `body` is the kernel's.
pub(crate) fn rewrite(body: Vec<Stmt>, ctx: &Ctx, names: &mut NameSet) -> Vec<Stmt> {
    if !ctx.target.has_async_copy(AsyncCopy::BulkTensor) {
        return body;
    }
    let mut env = ctx.bounds.borrow().clone();
    rewrite_list(body, ctx, names, &mut env)
}

/// [`rewrite`] of one statement list; `env`: the ranges of the variables in scope (dims,
/// block indices, enclosing loops, the lets before), which say where a box origin needs no
/// clamp ([`issue`]).
fn rewrite_list(body: Vec<Stmt>, ctx: &Ctx, names: &mut NameSet, env: &mut Ranges) -> Vec<Stmt> {
    let mut out: Vec<Stmt> = Vec::with_capacity(body.len());
    let mut rest: std::collections::VecDeque<Stmt> = body.into();
    while let Some(mut stmt) = rest.pop_front() {
        let stages = rest.front().and_then(|next| pipeline_shape(&stmt, next));
        if let Some(stages) = stages {
            let span = stmt.span;
            let next = rest.pop_front();
            if let (
                StmtKind::For(p),
                Some(Stmt {
                    kind: StmtKind::For(m),
                    span: m_span,
                }),
            ) = (stmt.kind, next)
            {
                match copies_per_stage(&p, &m, stages, ctx) {
                    Ok(copies) => {
                        let mut done = on_tma(p, m, (stages, copies), span, ctx, names, env);
                        out.append(&mut done);
                    }
                    Err(why) => {
                        // Said where the user reads the IR (`--print-ir-after`), and in the PTX.
                        out.push(note(format!("{why}; this pipeline keeps cp.async"), span));
                        out.push(Stmt::new(StmtKind::For(p), span));
                        out.push(Stmt::new(StmtKind::For(m), m_span));
                    }
                }
            }
            continue;
        }
        let looped = match &stmt.kind {
            StmtKind::For(f) => {
                int::enter_loop(env, f);
                Some(f.var.name.clone())
            }
            _ => None,
        };
        for child in tlc_ir::visit::child_bodies_mut(&mut stmt) {
            *child = rewrite_list(std::mem::take(child), ctx, names, env);
        }
        if let Some(v) = looped {
            env.remove(&v);
        }
        // Names are unique: a let's range holds for the rest of the list.
        if let StmtKind::Let { var, value, .. } = &stmt.kind {
            let range = int::interval(value, &*env);
            env.insert(var.name.clone(), range);
        }
        out.push(stmt);
    }
    out
}

/// `S` when `prologue`, `main` are the two loops of a software pipeline of `S` stages:
/// `for s in T.unroll(S - 1)` ending with a commit, then a serial loop starting with
/// `T.cp_async_wait(S - 2)`.
fn pipeline_shape(prologue: &Stmt, main: &Stmt) -> Option<i64> {
    let (StmtKind::For(p), StmtKind::For(m)) = (&prologue.kind, &main.kind) else {
        return None;
    };
    let ahead = const_int(&p.stop)?;
    let ok = p.kind == ForKind::Unroll
        && const_int(&p.start) == Some(0)
        && ahead >= 1
        && matches!(
            p.body.last().map(|s| &s.kind),
            Some(StmtKind::Intrinsic(Intrinsic::CommitGroup))
        )
        && m.kind == ForKind::Serial
        && matches!(m.body.first().map(|s| &s.kind), Some(StmtKind::Intrinsic(Intrinsic::WaitGroup { n })) if *n == ahead - 1);
    // Lazily and checked: a constant stop of 2^63 - 1 (no pipeline) must not overflow.
    ok.then(|| ahead.checked_add(1)).flatten()
}

/// How many copies fill one stage of the pipeline (prologue `p`, loop `m`) when all of
/// them can take TMA; why not otherwise.
fn copies_per_stage(p: &For, m: &For, stages: i64, ctx: &Ctx) -> Result<usize, String> {
    // First with swizzled destinations only; then, if that fails, letting plain buffers
    // ride along in a pipeline that loads wgmma operands (a stage's scales): TMA serves
    // wgmma pipelines, and a loop of plain copies keeps cp.async and its note.
    let strict = plans_of(&p.body, stages, false, ctx)
        .and_then(|first| Ok((first, plans_of(&m.body, stages, false, ctx)?)));
    let (first, ahead) = match strict {
        Ok(plans) => plans,
        // Plain copies only: not a wgmma pipeline, the strict reason stands.
        Err(why) if !loads_wgmma_operand(&m.body, ctx) => return Err(why),
        Err(_) => {
            let first = plans_of(&p.body, stages, true, ctx)?;
            (first, plans_of(&m.body, stages, true, ctx)?)
        }
    };
    // The barriers and parities assume fill `k` lands in stage `k % S`: the prologue's
    // `s` fills `start + s`, the loop's look-ahead `ko + S - 1`. Checked, not assumed (a
    // hand-written protocol may index its stages otherwise): symbolically, which serves a
    // loop from a block-level let (a causal or varlen lower bound), or by evaluation from a
    // constant start.
    if let Some(why) = unstable_start(&m.start, &[&p.body, &m.body], &|e| ctx.uniformity.holds(e)) {
        return Err(why);
    }
    let (prologue_values, loop_values) = fill_values(&m.start, stages);
    let prologue_fill = bin(BinOp::Add, m.start.clone(), Expr::var(&p.var.name));
    let ahead_fill = bin(BinOp::Add, Expr::var(&m.var.name), Expr::int(stages - 1));
    for (plans, var, fill, values) in [
        (&first, &p.var.name, &prologue_fill, prologue_values),
        (&ahead, &m.var.name, &ahead_fill, loop_values),
    ] {
        for (_, stage) in plans.iter() {
            if !stage_of_fill(stage, var, fill, values.clone(), stages) {
                return Err(format!(
                    "stage index `{}` is not the pipeline's fill order",
                    stage
                ));
            }
        }
    }
    if first.is_empty() || first.len() != ahead.len() {
        return Err(format!(
            "the prologue issues {} copies per stage, the loop {}",
            first.len(),
            ahead.len()
        ));
    }
    Ok(first.len())
}

/// The pipeline (prologue `p`, loop `m`) on TMA, `copies` per stage: one warpgroup
/// waiting on its own loads (the module doc's form).
fn on_tma(
    mut p: For,
    mut m: For,
    (stages, copies): (i64, usize),
    span: Span,
    ctx: &Ctx,
    names: &mut NameSet,
    env: &Ranges,
) -> Vec<Stmt> {
    let bars = names.fresh("tma_bars");
    ctx.new_allocs
        .borrow_mut()
        .push(barrier_array(&bars, stages, span));
    let b = Barriers {
        name: &bars,
        stages,
    };
    for f in [&mut p, &mut m] {
        let mut inside = env.clone();
        int::enter_loop(&mut inside, f);
        f.body = lower_copies(std::mem::take(&mut f.body), &b, ctx, names, &mut inside);
    }
    // The wait of iteration `ko`: the `(ko - start) // S`-th phase of `bars[ko % S]`.
    let ko = Expr::var(&m.var.name);
    let fill = bin(BinOp::Sub, ko.clone(), m.start.clone());
    let parity = bin(
        BinOp::FloorMod,
        bin(BinOp::FloorDiv, fill, Expr::int(stages)),
        Expr::int(2),
    );
    let slot = bin(BinOp::FloorMod, ko, Expr::int(stages));
    let wait = intrinsic(
        Intrinsic::MbarrierWait {
            bar: elem(&bars, vec![slot], span),
            parity,
        },
        span,
    );
    if let Some(first) = m.body.first_mut() {
        *first = every_thread(vec![wait], ctx, span, names);
    }
    vec![
        init_barriers(&[(&bars, copies as i64)], stages, ctx, span, names),
        Stmt::new(StmtKind::For(p), span),
        Stmt::new(StmtKind::For(m), span),
    ]
}

/// Thread 0 initializes every stage's barrier of each `(array, arrival count)`, then fences
/// the inits for the async proxy (`analysis::tma::init_region`).
fn init_barriers(
    arrays: &[(&str, i64)],
    stages: i64,
    ctx: &Ctx,
    span: Span,
    names: &mut NameSet,
) -> Stmt {
    let s = names.fresh("s");
    let tx = names.fresh(ctx.block.index_base());
    init_region(arrays, stages, &ctx.block, (&tx, &s), span, names)
}

/// The mbarriers of one pipeline.
struct Barriers<'a> {
    name: &'a str,
    stages: i64,
}

/// The stage copies of a pipeline body (at its top level or under `if`s): their TMA plans
/// and destination stages, or why one cannot take TMA.
fn plans_of(
    body: &[Stmt],
    stages: i64,
    plain: bool,
    ctx: &Ctx,
) -> Result<Vec<(TmaCopy, Expr)>, String> {
    let mut found = Vec::new();
    for s in body {
        match &s.kind {
            StmtKind::If {
                then_body,
                else_body,
                ..
            } => {
                found.extend(plans_of(then_body, stages, plain, ctx)?);
                found.extend(plans_of(else_body, stages, plain, ctx)?);
            }
            _ => {
                if let Some(plan) = plan_stmt(s, stages, plain, ctx) {
                    found.push(plan?);
                } else if contains_async_copy(std::slice::from_ref(s), ctx) {
                    // Its copies would stay cp.async without their commits and waits.
                    return Err("a global → shared copy is nested in another statement".into());
                }
            }
        }
    }
    Ok(found)
}

/// Whether `body` has a statement the cp.async protocol covers: a `T.copy` from global to
/// shared memory, or a `T.Parallel` nest storing global loads into shared memory.
fn contains_async_copy(body: &[Stmt], ctx: &Ctx) -> bool {
    let mut found = false;
    tlc_ir::visit::for_each_stmt(body, &mut |s| found |= is_async_copy(s, ctx));
    found
}

/// Whether a global → shared copy in `body` fills a buffer laid out for wgmma (the
/// pipelines TMA serves, which plain copies may join).
fn loads_wgmma_operand(body: &[Stmt], ctx: &Ctx) -> bool {
    let mut found = false;
    tlc_ir::visit::for_each_stmt(body, &mut |s| {
        if is_async_copy(s, ctx) {
            if let Some((_, dst)) = copy_regions(s, ctx) {
                found |= matches!(
                    ctx.layout(&dst.buffer.name),
                    Some(tlc_ir::Layout::WgmmaSwizzle { .. })
                );
            }
        }
    });
    found
}

fn is_async_copy(s: &Stmt, ctx: &Ctx) -> bool {
    let scope = |name: &str| ctx.buffer(name).map(|b| b.scope);
    match &s.kind {
        StmtKind::Copy { src, dst } => {
            scope(&src.buffer.name) == Some(Scope::Global)
                && scope(&dst.buffer.name) == Some(Scope::Shared)
        }
        StmtKind::For(f) if f.kind == ForKind::Parallel => {
            let mut found = false;
            tlc_ir::visit::for_each_stmt(&f.body, &mut |s| {
                if let StmtKind::Store { buffer, value, .. } = &s.kind {
                    if scope(&buffer.name) == Some(Scope::Shared) {
                        tlc_ir::visit::for_each_subexpr(value, &mut |x| {
                            if let ExprKind::Load { buffer, .. } = &x.kind {
                                found |= scope(buffer) == Some(Scope::Global);
                            }
                        });
                    }
                }
            });
            found
        }
        _ => false,
    }
}

/// The regions of a copy statement (`T.copy` or a parallel nest written as one).
fn copy_regions(s: &Stmt, ctx: &Ctx) -> Option<(Region, Region)> {
    match &s.kind {
        StmtKind::Copy { src, dst } => Some((src.clone(), dst.clone())),
        StmtKind::For(f) if f.kind == ForKind::Parallel => {
            parallel_copy(f, &|name| ctx.buffer(name).map(|b| b.dtype))
        }
        _ => None,
    }
}

/// The TMA plan of a copy into a stage buffer and its stage; `None` for other statements.
fn plan_stmt(
    s: &Stmt,
    stages: i64,
    plain: bool,
    ctx: &Ctx,
) -> Option<Result<(TmaCopy, Expr), String>> {
    // Other statements (a shared → fragment copy, arithmetic on fragments) are not part of
    // the asynchronous protocol.
    if !is_async_copy(s, ctx) {
        return None;
    }
    let Some((src, dst)) = copy_regions(s, ctx) else {
        // A parallel nest loading global memory that is not a plain copy.
        return Some(Err("a stage statement is not a plain tile copy".into()));
    };
    let (Some(sb), Some(db)) = (ctx.buffer(&src.buffer.name), ctx.buffer(&dst.buffer.name)) else {
        return Some(Err("a copy of an unknown buffer".into()));
    };
    let staged = db.shape.first().and_then(const_int) == Some(stages) && db.shape.len() >= 2;
    let Some(stage) = dst
        .ranges
        .first()
        .filter(|_| staged)
        .map(|r| r.start.clone())
    else {
        return Some(Err(format!(
            "`{}` is not a stage buffer of this pipeline",
            db.name.name
        )));
    };
    let bounds = ctx.bounds.borrow();
    Some(
        plan_copy(
            &src,
            &dst,
            (sb, db),
            ctx.layout(&db.name.name),
            plain,
            ctx.target,
            &*bounds,
        )
        .map(|plan| (plan, stage))
        .map_err(|why| format!("TMA not used for `{}`: {why}", db.name.name)),
    )
}

/// `body` with its stage copies issued on TMA and its commits dropped; `env`: the ranges
/// of the variables in scope (the lets of the body join as they come).
fn lower_copies(
    body: Vec<Stmt>,
    b: &Barriers,
    ctx: &Ctx,
    names: &mut NameSet,
    env: &mut Ranges,
) -> Vec<Stmt> {
    let mut out = Vec::with_capacity(body.len());
    for mut s in body {
        if matches!(s.kind, StmtKind::Intrinsic(Intrinsic::CommitGroup)) {
            continue;
        }
        // The loop is on TMA (`copies_per_stage`): plain destinations ride along.
        if let Some(Ok((plan, stage))) = plan_stmt(&s, b.stages, true, ctx) {
            let Some((src, dst)) = copy_regions(&s, ctx) else {
                continue;
            };
            // A parallel copy's notes stand before the code it becomes.
            if let StmtKind::For(f) = &mut s.kind {
                out.extend(take_notes(&mut f.body));
            }
            let src_decl = ctx.buffer(&src.buffer.name);
            let shape = src_decl.map_or(&[][..], |d| d.shape.as_slice());
            let loads = issue(&plan, &stage, (&src, &dst, shape), b, s.span, env);
            // Thread 0 issues them, in a region of its own.
            out.push(one_thread(loads, ctx, s.span, names));
            continue;
        }
        if let StmtKind::If {
            then_body,
            else_body,
            ..
        } = &mut s.kind
        {
            *then_body = lower_copies(std::mem::take(then_body), b, ctx, names, env);
            *else_body = lower_copies(std::mem::take(else_body), b, ctx, names, env);
        }
        if let StmtKind::Let { var, value, .. } = &s.kind {
            let range = int::interval(value, &*env);
            env.insert(var.name.clone(), range);
        }
        out.push(s);
    }
    out
}

/// The issuing thread arrives on the stage's barrier with the copy's bytes and issues its
/// boxes (`shape`: the source's).
fn issue(
    plan: &TmaCopy,
    stage: &Expr,
    (src, dst, shape): (&Region, &Region, &[Expr]),
    b: &Barriers,
    span: Span,
    env: &Ranges,
) -> Vec<Stmt> {
    let bar = || elem(b.name, vec![stage.clone()], span);
    let mut body = vec![intrinsic(
        Intrinsic::MbarrierArriveExpectTx {
            bar: bar(),
            bytes: plan.bytes,
        },
        span,
    )];
    for load in &plan.loads {
        let origin = load
            .origin
            .iter()
            .zip(&load.box_dims)
            .enumerate()
            .map(|(d, (o, &extent))| s32_origin(o, extent, shape.get(d), env))
            .collect();
        body.push(intrinsic(
            Intrinsic::TmaLoad {
                dst: elem(&dst.buffer.name, load.dst.clone(), span),
                src: elem(&src.buffer.name, origin, span),
                bar: bar(),
                box_dims: load.box_dims.clone(),
                swizzle: load.swizzle,
                multicast: 0,
            },
            span,
        ));
    }
    body
}

/// A box origin that is a `.s32` coordinate with the meaning of `origin`. TMA takes 32-bit
/// coordinates; an origin the variables' ranges do not keep within them — one computed
/// from a loaded value, a page table's entry times the page size — is clamped to
/// `[-extent, dim]`, which reads the same zeros where the box lies wholly outside the tensor
/// and changes nothing inside (`dim`, the tensor's, is at most `MAX_TMA_DIM`).
fn s32_origin(origin: &Expr, extent: i64, dim: Option<&Expr>, env: &Ranges) -> Expr {
    let range = int::interval(origin, env);
    let fits = range.lo >= i64::from(i32::MIN) && range.hi <= i64::from(i32::MAX) - MAX_BOX_DIM;
    match dim {
        Some(dim) if !fits => bin(
            BinOp::Max,
            bin(BinOp::Min, origin.clone(), dim.clone()),
            Expr::int(-extent),
        ),
        _ => origin.clone(),
    }
}

/// A region in which thread 0 alone runs `body`.
fn one_thread(body: Vec<Stmt>, ctx: &Ctx, span: Span, names: &mut NameSet) -> Stmt {
    let tx = names.fresh(ctx.block.index_base());
    let guarded = Stmt::new(
        StmtKind::If {
            cond: bin(BinOp::Eq, Expr::var(&tx), Expr::int(0)),
            then_body: body,
            else_body: Vec::new(),
        },
        span,
    );
    thread_region(&ctx.block, &tx, vec![guarded], span, names)
}

/// A region in which every thread runs `body`.
fn every_thread(body: Vec<Stmt>, ctx: &Ctx, span: Span, names: &mut NameSet) -> Stmt {
    let tx = names.fresh(ctx.block.index_base());
    thread_region(&ctx.block, &tx, body, span, names)
}
