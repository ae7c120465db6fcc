//! `warp-specialize` (sm_90a, thread level): every TMA pipeline that `lower-tile-ops` wrote
//! in its one-warpgroup form (`lower_tile_ops/tma.rs`: thread 0 initializes one mbarrier
//! per stage, the prologue's and the loop's fills are one-thread regions of
//! `T.mbarrier_arrive_expect_tx` + `T.tma_load`, each iteration starts with every thread
//! waiting for its stage) becomes a producer warpgroup that issues the loads and consumer
//! warpgroups that only compute, talking through `full` and `empty` mbarrier rings
//! (`schedule.rs`), and a second gemm after register work is deferred to run during the
//! next k-tile's (`deferred_gemm.rs`, with ping-pong between consumer warpgroups). A pipeline that cannot be specialized stays as it is, with a
//! `T.note` before it saying why. (`persistent-tiles` comes next: blocks that walk
//! several tiles.)
//!
//! Everything the schedule decides is written into the kernel: its `threads=` grows by
//! the producer warpgroup, `T.min_blocks_per_sm` holds the blocks per SM the registers
//! were budgeted for (a later pipeline of the kernel keeps it), and the `empty` rings are
//! allocations of the kernel.
//!
//! The consumers' own work right around a kernel-level pipeline (clearing the accumulator
//! before, the epilogue from registers after) moves into their branch when it is private
//! to them (`schedule::private_code`), past scalar lets that read no memory; an epilogue
//! staged through shared memory moves too, each shared step behind a named barrier among
//! the consumers (`schedule::shared_epilogue_code`, `T.bar_sync`).

mod deferred_gemm;
mod schedule;

use crate::analysis::block::Block;
use crate::analysis::footprint;
use crate::analysis::kernels::for_each_kernel;
use crate::analysis::tma::{
    self, barrier_array, fills_in_order, init_region, stage_of_fill, tma_destinations,
};
use crate::context::PassContext;
use crate::names::NameSet;
use crate::pass::Pass;
use schedule::Side;
use std::collections::{HashMap, VecDeque};
use tlc_ir::build::{bin, elem, intrinsic, note};
use tlc_ir::target::{AsyncCopy, WARPGROUP_SIZE};
use tlc_ir::verifier::{const_int, Level};
use tlc_ir::visit::child_bodies_mut;
use tlc_ir::{
    BinOp, BufferDecl, Diagnostic, Expr, ExprKind, For, ForKind, Intrinsic, Kernel, PrimFunc,
    Scope, Span, Stmt, StmtKind, Target, ThreadTag,
};

pub struct WarpSpecialize;

impl Pass for WarpSpecialize {
    fn name(&self) -> &'static str {
        "warp-specialize"
    }

    fn description(&self) -> &'static str {
        "TMA pipelines -> a producer warpgroup and consumer warpgroups on mbarrier rings"
    }

    fn requires(&self) -> Level {
        Level::Thread
    }

    fn run(&self, mut func: PrimFunc, cx: &PassContext) -> Result<PrimFunc, Vec<Diagnostic>> {
        if !cx.target().has_async_copy(AsyncCopy::BulkTensor) {
            return Ok(func);
        }
        let mut names = NameSet::of(&func);
        let params = func.params.clone();
        for_each_kernel(&mut func.body, &mut |k, span| {
            specialize_kernel(k, span, cx, &params, &mut names)
        });
        Ok(func)
    }
}

/// What the schedule reads of the kernel whose pipelines it rebuilds.
pub(crate) struct Facts<'a> {
    pub target: Target,
    /// The user's block (the consumers): the block before any producer warpgroup.
    pub block: Block,
    /// Parameters and allocations by name (the first of a name).
    pub decls: HashMap<&'a str, &'a BufferDecl>,
    /// Which values every thread of the block agrees on (a pipeline's loop start must).
    pub uniformity: crate::analysis::uniform::Uniformity,
}

impl Facts<'_> {
    pub fn buffer(&self, name: &str) -> Option<&BufferDecl> {
        self.decls.get(name).copied()
    }
}

/// What specializing a kernel's pipelines changed, applied to the kernel at the end.
#[derive(Default)]
struct Changes {
    /// The blocks per SM of the kernel's first specialized pipeline (the later ones keep
    /// them: their `setmaxnreg` counts must agree).
    blocks_per_sm: Option<i64>,
    /// `(full ring, its empty ring, stages)` of each specialized pipeline.
    empties: Vec<(String, String, i64)>,
}

/// Removes every `T.setmaxnreg` from `body`, at any depth.
fn drop_set_max_nreg(body: &mut Vec<Stmt>) {
    body.retain(|s| !matches!(&s.kind, StmtKind::Intrinsic(Intrinsic::SetMaxNReg { .. })));
    for s in body.iter_mut() {
        for child in tlc_ir::visit::child_bodies_mut(s) {
            drop_set_max_nreg(child);
        }
    }
}

fn specialize_kernel(
    k: &mut Kernel,
    span: Span,
    cx: &PassContext,
    params: &[BufferDecl],
    names: &mut NameSet,
) {
    let Ok(block) = Block::of(k, span) else {
        return;
    };
    // A grid barrier's code is whole-block barriers, which producer and consumer
    // warpgroups running apart would never reach together: such a kernel keeps its form.
    if !contains_pipeline(&k.body) || tlc_ir::verifier::grid_sync::has_grid_sync(&k.body) {
        return;
    }
    let allocs = k.allocs.clone();
    let facts = Facts {
        target: cx.target(),
        block,
        decls: {
            let mut by_name = HashMap::new();
            for b in params.iter().chain(allocs.iter()) {
                by_name.entry(b.name.name.as_str()).or_insert(b);
            }
            by_name
        },
        uniformity: crate::analysis::uniform::Uniformity::of(k),
    };
    let user_blocks_per_sm = k.min_blocks_per_sm.as_ref().and_then(const_int);
    let mut changes = Changes::default();
    let body = std::mem::take(&mut k.body);
    k.body = rewrite_list(body, true, &facts, user_blocks_per_sm, &mut changes, names);
    let Some(blocks_per_sm) = changes.blocks_per_sm else {
        return;
    };
    k.threads = vec![Expr::int(facts.block.threads() + WARPGROUP_SIZE)];
    k.min_blocks_per_sm = Some(Expr::int(blocks_per_sm));
    if k.no_set_max_nreg {
        // The user keeps every thread's registers as compiled: the schedule's rebalancing
        // goes (the roles are otherwise the same).
        drop_set_max_nreg(&mut k.body);
    }
    // Each `empty` ring right after its `full` ring (the shared-memory plan's order); a
    // deferred gemm's late `full` ring is new, after the kernel's other buffers.
    for (full, empty, stages) in changes.empties {
        if !k.allocs.iter().any(|b| b.name.name == full) {
            k.allocs.push(barrier_array(&full, stages, span));
        }
        let at = k
            .allocs
            .iter()
            .position(|b| b.name.name == full)
            .map_or(k.allocs.len(), |i| i + 1);
        k.allocs.insert(at, barrier_array(&empty, stages, span));
    }
}

/// Whether `body` issues a TMA load anywhere (a pipeline to look for).
fn contains_pipeline(body: &[Stmt]) -> bool {
    let mut found = false;
    tlc_ir::visit::for_each_stmt(body, &mut |s| {
        found |= matches!(s.kind, StmtKind::Intrinsic(Intrinsic::TmaLoad { .. }));
    });
    found
}

/// Rebuilds the one-warpgroup TMA pipelines of `body` (recursively); `top`: the kernel's
/// body, whose statements around a pipeline may move into its consumers' branch.
fn rewrite_list(
    body: Vec<Stmt>,
    top: bool,
    facts: &Facts,
    user_blocks_per_sm: Option<i64>,
    changes: &mut Changes,
    names: &mut NameSet,
) -> Vec<Stmt> {
    let mut out: Vec<Stmt> = Vec::with_capacity(body.len());
    let mut rest: VecDeque<Stmt> = body.into();
    while let Some(mut stmt) = rest.pop_front() {
        let found = match (rest.front(), rest.get(1)) {
            (Some(p), Some(m)) => one_warpgroup_pipeline(&stmt, p, m, &facts.block),
            _ => None,
        };
        if let Some(found) = found {
            if let (Some(p), Some(m)) = (rest.pop_front(), rest.pop_front()) {
                if let (StmtKind::For(pf), StmtKind::For(mf)) = (&p.kind, &m.kind) {
                    let around = top.then_some(Around {
                        before: &mut out,
                        after: &mut rest,
                    });
                    let span = p.span;
                    match specialize(
                        &found,
                        pf,
                        mf,
                        around,
                        span,
                        facts,
                        user_blocks_per_sm,
                        changes,
                        names,
                    ) {
                        Ok(mut stmts) => out.append(&mut stmts),
                        Err(why) => {
                            out.push(note(format!("warp specialization not used: {why}"), span));
                            out.extend([stmt, p, m]);
                        }
                    }
                    continue;
                }
                // (Matched as loops: never here.)
                out.extend([stmt, p, m]);
                continue;
            }
        }
        for child in child_bodies_mut(&mut stmt) {
            *child = rewrite_list(
                std::mem::take(child),
                false,
                facts,
                user_blocks_per_sm,
                changes,
                names,
            );
        }
        out.push(stmt);
    }
    out
}

/// A one-warpgroup TMA pipeline: its `full` mbarriers, stages, and loads per stage; the
/// thread and stage variables of its init region (the rings' init region reuses them).
struct Found {
    bars: String,
    stages: i64,
    copies: i64,
    init_vars: (String, String),
}

/// The pipeline `init`, `p`, `m` when they are the one-warpgroup form of `lower_tile_ops/
/// tma.rs`: a region in which thread 0 initializes `bars[s]` for `s < S` with one count and
/// fences; the prologue `for s in T.unroll(S - 1)`; the serial loop whose first statement
/// is a region waiting on `bars`.
fn one_warpgroup_pipeline(init: &Stmt, p: &Stmt, m: &Stmt, block: &Block) -> Option<Found> {
    let (StmtKind::For(pf), StmtKind::For(mf)) = (&p.kind, &m.kind) else {
        return None;
    };
    let body = one_thread_body(init, block)?;
    let [Stmt {
        kind: StmtKind::For(inits),
        ..
    }, Stmt {
        kind: StmtKind::Intrinsic(Intrinsic::FenceProxyAsync),
        ..
    }] = body
    else {
        return None;
    };
    let stages = const_int(&inits.stop).filter(|s| (2..=tma::MAX_STAGES).contains(s))?;
    let [Stmt {
        kind: StmtKind::Intrinsic(Intrinsic::MbarrierInit { bar, count }),
        ..
    }] = inits.body.as_slice()
    else {
        return None;
    };
    let by_stage = matches!(bar.indices.as_slice(), [Expr { kind: ExprKind::Var(v), .. }] if *v == inits.var.name);
    let prologue = pf.kind == ForKind::Unroll
        && const_int(&pf.start) == Some(0)
        && const_int(&pf.stop) == Some(stages - 1);
    // The wait of iteration `ko`: the `(ko - start) // S`-th phase of `bars[ko % S]`, as
    // `lower_tile_ops/tma.rs` writes it (the fills are checked against that order below).
    let ko = Expr::var(&mf.var.name);
    let wait = Intrinsic::MbarrierWait {
        bar: elem(
            &bar.buffer.name,
            vec![bin(BinOp::FloorMod, ko.clone(), Expr::int(stages))],
            m.span,
        ),
        parity: bin(
            BinOp::FloorMod,
            bin(
                BinOp::FloorDiv,
                bin(BinOp::Sub, ko, mf.start.clone()),
                Expr::int(stages),
            ),
            Expr::int(2),
        ),
    };
    let waits = mf.kind == ForKind::Serial
        && mf
            .body
            .first()
            .and_then(|s| region_body(s, block))
            .is_some_and(
                |b| matches!(b, [Stmt { kind: StmtKind::Intrinsic(w), .. }] if *w == wait),
            );
    (inits.kind == ForKind::Unroll
        && const_int(&inits.start) == Some(0)
        && by_stage
        && prologue
        && waits)
        .then(|| Found {
            bars: bar.buffer.name.clone(),
            stages,
            copies: *count,
            init_vars: (
                region_index(init, block).unwrap_or("tx").to_string(),
                inits.var.name.clone(),
            ),
        })
}

/// The body of a region of `block` (every thread runs it): a `threadIdx.x` loop over the
/// block, or its thread nest after the let of the linear index.
fn region_body<'a>(s: &'a Stmt, block: &Block) -> Option<&'a [Stmt]> {
    let StmtKind::For(f) = &s.kind else {
        return None;
    };
    if block.is_flat() {
        let whole = f.kind == ForKind::ThreadBinding(ThreadTag::ThreadX)
            && const_int(&f.start) == Some(0)
            && const_int(&f.stop) == Some(block.threads());
        return whole.then_some(f.body.as_slice());
    }
    block.open(f).map(|nest| nest.body)
}

/// The thread variable of a region of `block`.
fn region_index<'a>(s: &'a Stmt, block: &Block) -> Option<&'a str> {
    let StmtKind::For(f) = &s.kind else {
        return None;
    };
    if block.is_flat() {
        return Some(f.var.name.as_str());
    }
    block.open(f).map(|nest| nest.index.name.as_str())
}

/// The body thread 0 runs in a region `for tx …: if tx == 0: body`.
fn one_thread_body<'a>(s: &'a Stmt, block: &Block) -> Option<&'a [Stmt]> {
    let index = region_index(s, block)?;
    let [Stmt {
        kind:
            StmtKind::If {
                cond,
                then_body,
                else_body,
            },
        ..
    }] = region_body(s, block)?
    else {
        return None;
    };
    let first = matches!(&cond.kind, ExprKind::Binary(BinOp::Eq, a, b)
        if matches!(&a.kind, ExprKind::Var(v) if v == index) && b.as_int() == Some(0));
    (first && else_body.is_empty()).then_some(then_body.as_slice())
}

/// `body` (stage fills: one-thread regions of arrive + TMA loads, under `if`s, with notes
/// and lets)
/// as the code of the thread that issues them; `None` when it does anything else.
fn issue_code(body: &[Stmt], block: &Block) -> Option<Vec<Stmt>> {
    let mut out = Vec::with_capacity(body.len());
    for s in body {
        match &s.kind {
            // A let of the fill's own (the page of a paged copy, `inject-software-pipeline`
            // evaluates index lets with the fill): the issuing thread computes it
            // (`producer_can_issue` checks what it reads).
            StmtKind::Note(_) | StmtKind::Let { .. } => out.push(s.clone()),
            StmtKind::If {
                cond,
                then_body,
                else_body,
            } => out.push(Stmt::new(
                StmtKind::If {
                    cond: cond.clone(),
                    then_body: issue_code(then_body, block)?,
                    else_body: issue_code(else_body, block)?,
                },
                s.span,
            )),
            _ => {
                let issued = one_thread_body(s, block)?;
                // The issuing thread's code runs on another thread now: it may not read
                // the region's thread index.
                let index = region_index(s, block)?;
                if uses_var(issued, index) {
                    return None;
                }
                let loads = issued.iter().all(|s| {
                    matches!(
                        s.kind,
                        StmtKind::Intrinsic(
                            Intrinsic::MbarrierArriveExpectTx { .. } | Intrinsic::TmaLoad { .. }
                        )
                    )
                });
                if !loads {
                    return None;
                }
                out.extend(issued.iter().cloned());
            }
        }
    }
    Some(out)
}

/// Whether `body` reads variable `var`.
fn uses_var(body: &[Stmt], var: &str) -> bool {
    let mut found = false;
    tlc_ir::visit::for_each_stmt(body, &mut |s| {
        for e in tlc_ir::visit::stmt_exprs(s) {
            found |= crate::analysis::int::mentions(e, var);
        }
    });
    found
}

/// `Ok` when the producer's code `code` (the fills and the prologue) reads nothing only
/// the consumers hold: no register array (each thread has its own; the producer's copy
/// was never written) and no variable the loop body binds for the consumers (`lets`).
fn producer_can_issue(
    code: &[Stmt],
    lets: &std::collections::HashSet<String>,
    facts: &Facts,
) -> Result<(), String> {
    let mut why = None;
    tlc_ir::visit::for_each_stmt(code, &mut |s| {
        for e in tlc_ir::visit::stmt_exprs(s) {
            tlc_ir::visit::for_each_subexpr(e, &mut |x| match &x.kind {
                ExprKind::Load { buffer, .. }
                    if facts
                        .buffer(buffer)
                        .is_none_or(|b| matches!(b.scope, Scope::Local | Scope::Fragment)) =>
                {
                    why = Some(format!("a stage fill reads the register array `{buffer}`"));
                }
                ExprKind::Var(v) if lets.contains(v) => {
                    why = Some(format!("a stage fill reads `{v}`, which the loop computes"));
                }
                _ => {}
            });
        }
    });
    why.map_or(Ok(()), Err)
}

/// `Ok` when the loop's compute touches the stage buffers `staged` only at stage `ko % S`
/// (the stage its wait made ready and its release hands back; reads only): proven
/// symbolically (`analysis::tma::stage_of_fill`), or by evaluation over two periods of a
/// loop from a constant start.
fn reads_its_stage(compute: &[Stmt], staged: &[String], m: &For, s: i64) -> Result<(), String> {
    let (_, values) = tma::fill_values(&m.start, s);
    let ko = Expr::var(&m.var.name);
    let at_stage = |buffer: &str, indices: &[Expr]| -> bool {
        !staged.iter().any(|b| b == buffer)
            || indices
                .first()
                .is_some_and(|i| stage_of_fill(i, &m.var.name, &ko, values.clone(), s))
    };
    let mut ok = true;
    tlc_ir::visit::for_each_stmt(compute, &mut |st| {
        if let StmtKind::Intrinsic(i) = &st.kind {
            ok &= i.accesses().iter().all(|a| {
                !a.effect.writes() && at_stage(&a.operand.buffer.name, &a.operand.indices)
                    || !staged.contains(&a.operand.buffer.name)
            });
        }
        if let StmtKind::Store { buffer, .. } | StmtKind::AtomicAdd { buffer, .. } = &st.kind {
            ok &= !staged.contains(&buffer.name);
        }
        for e in tlc_ir::visit::stmt_exprs(st) {
            tlc_ir::visit::for_each_subexpr(e, &mut |x| {
                if let ExprKind::Load { buffer, indices } = &x.kind {
                    ok &= at_stage(buffer, indices);
                }
            });
        }
    });
    if ok {
        Ok(())
    } else {
        Err("the loop's compute touches a stage other than the one it waited for".into())
    }
}

/// The kernel-body statements around a pipeline: those already rewritten, and those after
/// it.
struct Around<'a> {
    before: &'a mut Vec<Stmt>,
    after: &'a mut VecDeque<Stmt>,
}

/// The warp-specialized pipeline (`found`, prologue `p`, loop `m`): the rings' setup, then
/// one region over the block and its producer warpgroup; why not when it cannot be.
#[allow(clippy::too_many_arguments)]
fn specialize(
    found: &Found,
    p: &For,
    m: &For,
    around: Option<Around>,
    span: Span,
    facts: &Facts,
    user_blocks_per_sm: Option<i64>,
    changes: &mut Changes,
    names: &mut NameSet,
) -> Result<Vec<Stmt>, String> {
    // The kernel's buffers, the `empty` rings already added and the one to come.
    let shared = {
        let added: Vec<BufferDecl> = changes
            .empties
            .iter()
            .map(|(_, e, s)| barrier_array(e, *s, span))
            .collect();
        footprint::shared_upper_bound(facts.decls.values().copied().chain(added.iter()))
            .and_then(|s| s.checked_add(crate::analysis::wgmma::ALIGN))
    };
    // One register budget per kernel: a later pipeline keeps the blocks per SM an earlier
    // one was specialized for.
    let requested = changes.blocks_per_sm.or(user_blocks_per_sm);
    let roles = schedule::roles(&facts.block, shared, found.stages, requested, facts.target)?;
    // The loop: its wait first, then fills (loads, maybe under guards) and compute.
    let mut fills = Vec::new();
    let mut compute = Vec::new();
    for s in m.body.iter().skip(1) {
        if contains_pipeline(std::slice::from_ref(s)) {
            let code = issue_code(std::slice::from_ref(s), &facts.block)
                .ok_or("a stage fill is mixed with other statements")?;
            fills.extend(code);
        } else {
            compute.push(s.clone());
        }
    }
    let mut prologue = p.clone();
    prologue.body =
        issue_code(&p.body, &facts.block).ok_or("the prologue does more than fill stages")?;
    fills_in_order(
        (&found.bars, found.stages),
        (p, &prologue.body),
        (m, &fills),
    )?;
    // The producer evaluates the loop's start on a thread of its own, in every iteration.
    if let Some(why) = tma::unstable_start(&m.start, &[&p.body, &m.body], &|e| {
        facts.uniformity.holds(e)
    }) {
        return Err(why);
    }
    let loop_lets = crate::analysis::sync::bound_vars(&compute);
    producer_can_issue(&fills, &loop_lets, facts)?;
    producer_can_issue(&prologue.body, &loop_lets, facts)?;
    reads_its_stage(&compute, &tma_destinations(&fills), m, found.stages)?;
    // The consumers' own work around the loop moves into their branch. Before the loop, a
    // region moves past the scalar lets between it and the loop (a split-K slice's bounds)
    // when they read no memory: it cannot name them, and they cannot see what it writes.
    let (mut head, mut tail) = (Vec::new(), Vec::new());
    let (mut taken_before, mut took_after) = (Vec::new(), 0);
    if let Some(around) = &around {
        for (i, s) in around.before.iter().enumerate().rev() {
            if pure_let(s) {
                continue;
            }
            if !movable(s, Side::Before, facts) {
                break;
            }
            head.insert(0, s.clone());
            taken_before.push(i);
        }
        // After the loop, an epilogue through shared memory moves too, each of its shared
        // steps behind a named barrier among the consumers: left after the roles, it would
        // keep the accumulators live where the producer's reduced registers rejoin.
        let mut producer_buffers = tma_destinations(&fills);
        producer_buffers.push(found.bars.clone());
        for s in around.after.iter() {
            if movable(s, Side::After, facts) {
                tail.push(s.clone());
            } else if over_consumers(s, facts)
                && schedule::shared_epilogue_code(std::slice::from_ref(s), facts, &producer_buffers)
            {
                tail.push(intrinsic(
                    Intrinsic::BarSync {
                        id: schedule::EPILOGUE_BARRIER,
                        count: facts.block.threads(),
                    },
                    s.span,
                ));
                tail.push(s.clone());
            } else {
                break;
            }
            took_after += 1;
        }
    }
    let pipe = schedule::Pipeline {
        prologue,
        main: m,
        fills,
        compute,
        head,
        tail,
        stages: found.stages,
        full: &found.bars,
        copies: found.copies,
    };
    let built = schedule::build(pipe, roles, facts, names, span)?;
    changes
        .empties
        .push((found.bars.clone(), built.empty.clone(), found.stages));
    if let Some(late) = &built.late {
        changes
            .empties
            .push((late.full.clone(), late.empty.clone(), found.stages));
    }
    changes.blocks_per_sm = Some(roles.blocks_per_sm);
    let consumer_warps = facts.block.threads() / facts.target.warp_size();
    if let Some(around) = around {
        // Indices in decreasing order: each removal leaves the next one's place.
        for i in taken_before {
            around.before.remove(i);
        }
        around.after.drain(..took_after);
    }
    let mut rings = vec![
        (found.bars.as_str(), found.copies),
        (&built.empty, consumer_warps),
    ];
    if let Some(late) = &built.late {
        rings[0].1 = late.early_copies;
        rings.extend([
            (late.full.as_str(), late.copies),
            (&late.empty, consumer_warps),
        ]);
    }
    Ok(vec![
        init_region(
            &rings,
            found.stages,
            &facts.block,
            (&found.init_vars.0, &found.init_vars.1),
            span,
            names,
        ),
        built.region,
    ])
}

/// Whether `s` is a scalar let whose value reads no memory (a region may move past it).
fn pure_let(s: &Stmt) -> bool {
    let StmtKind::Let { value, .. } = &s.kind else {
        return false;
    };
    let mut loads = false;
    tlc_ir::visit::for_each_subexpr(value, &mut |e| {
        loads |= matches!(e.kind, ExprKind::Load { .. });
    });
    !loads
}

/// Whether `s` can move into the consumers' branch on `side` of their loop: a note (it
/// does nothing), or a region of the block private to the consumers
/// (`schedule::private_code`).
fn movable(s: &Stmt, side: Side, facts: &Facts) -> bool {
    match &s.kind {
        StmtKind::Note(_) => true,
        _ => {
            over_consumers(s, facts) && schedule::private_code(std::slice::from_ref(s), side, facts)
        }
    }
}

/// Whether `s` is a region over (some of) the consumers: a `threadIdx.x` loop from 0 to at
/// most the user's block (`schedule::inline_regions` takes it apart).
fn over_consumers(s: &Stmt, facts: &Facts) -> bool {
    match &s.kind {
        StmtKind::For(f) if f.kind == ForKind::ThreadBinding(ThreadTag::ThreadX) => {
            const_int(&f.start) == Some(0)
                && const_int(&f.stop).is_some_and(|e| e <= facts.block.threads())
        }
        _ => false,
    }
}
