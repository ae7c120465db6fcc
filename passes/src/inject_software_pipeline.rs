//! `inject-software-pipeline` (tile level, before `lower-tile-ops`): every `T.Pipelined`
//! loop becomes a prologue and a serial loop whose stage-0 statements (the global → shared
//! copies, see `pipeline-planning`) run `S - 1` iterations ahead (`S = num_stages`):
//!
//! ```python
//! for s in T.unroll(S - 1):                # prologue
//!     if s + start < stop:                 # left out when the trip count is a constant >= S - 1
//!         <stage-0 statements with ko = s + start, into stage s (start = 0) or (s + start) % S>
//!     T.cp_async_commit()
//! for ko in T.serial(start, stop):
//!     T.cp_async_wait(S - 2)
//!     if ko + (S - 1) < stop:
//!         <stage-0 statements with ko = ko + S - 1, into stage (ko + S - 1) % S>
//!     T.cp_async_commit()
//!     <last-stage statements, reading stage ko % S>
//! ```
//!
//! - Every shared buffer a stage-0 statement writes gets a leading dimension of `S` (its
//!   allocation shape changes). Accesses get the stage as first index: `A_shared[ko % 3, i, j]`;
//!   a region (`T.copy`, `T.gemm`, `T.fill`) a leading range of extent 1
//!   (`A_shared[(ko + 2) % 3:(ko + 2) % 3 + 1, 0:128, 0:32]`). The statements after the loop
//!   (in the same statement list) read stage `(stop - 1) % S`, the one the last iteration
//!   used; a stage-0 buffer may not be used anywhere else outside the loop.
//! - The prologue is a `T.unroll` loop rather than unrolled here: with a small constant trip
//!   count a substituted region could lie statically outside its buffer, which the verifier
//!   rejects (at run time it is masked); `unroll` expands it at the thread level.
//! - Statements keep their `order` within their stage. Pure lets (no memory read, or only
//!   index tensors the loop never writes: `analysis::schedule`) are evaluated wherever they
//!   are needed (copied into the prologue and the look-ahead with their `ko`, under their
//!   guards); in the last stage a let that loads keeps its place in `order`. Every let and
//!   loop variable bound inside a copy gets a fresh name.
//! - The commit / wait pairs are no-ops until `inject-cp-async` makes the copies
//!   asynchronous; with them, `T.cp_async_wait(S - 2)` at the top of iteration `ko` has
//!   retired the groups of iterations `0 .. ko` (`S - 1` prologue groups and one per
//!   iteration, empty ones included), so the data `ko` reads has landed. Correct for any
//!   trip count, 0, 1 and fewer than `S - 1` included.
//! - `num_stages = 1`, or a loop with no stage-0 or no later-stage statement, becomes a
//!   plain `T.serial` loop (no commit / wait).
//! - Loops without `order` / `stage` are planned first (as `pipeline-planning` does); the
//!   plan is checked either way. Stages strictly between 0 and `S - 1`, nested pipelined
//!   loops, and a shared buffer written in stage 0 of two loops are errors.

use crate::analysis::access::{count_sites, SitesFrom};
use crate::analysis::kernels::{contains_pipelined, for_each_kernel};
use crate::analysis::schedule::{KernelFacts, LoopGraph};
use crate::context::PassContext;
use crate::names::NameSet;
use crate::pass::Pass;
use std::collections::{BTreeSet, HashMap, HashSet};
use tlc_ir::verifier::const_int;
use tlc_ir::visit::{child_bodies_mut, map_body_exprs};
use tlc_ir::{
    BinOp, Diagnostic, Expr, ExprKind, For, ForKind, Ident, Intrinsic, PrimFunc, Range, Span, Stmt,
    StmtKind,
};

pub struct InjectSoftwarePipeline;

impl Pass for InjectSoftwarePipeline {
    fn name(&self) -> &'static str {
        "inject-software-pipeline"
    }

    fn description(&self) -> &'static str {
        "T.Pipelined loops -> prologue + loop with stage-0 copies num_stages-1 iterations ahead into per-stage shared buffers, cp.async commit/wait"
    }

    fn run(&self, mut func: PrimFunc, pass_cx: &PassContext) -> Result<PrimFunc, Vec<Diagnostic>> {
        let mut names = NameSet::of(&func);
        let mut errors = Vec::new();
        let params = func.params.clone();
        for_each_kernel(&mut func.body, &mut |k, _| {
            let facts = KernelFacts::of(k, &params);
            let mut versioned: HashMap<String, i64> = HashMap::new();
            let mut cx = Cx {
                facts: &facts,
                target: pass_cx.target(),
                names: &mut names,
                versioned: &mut versioned,
                errors: &mut errors,
            };
            inject_list(&mut k.body, &mut cx);
            for alloc in &mut k.allocs {
                if let Some(&s) = versioned.get(&alloc.name.name) {
                    alloc.shape.insert(0, Expr::int(s));
                }
            }
        });
        if errors.is_empty() {
            Ok(func)
        } else {
            Err(errors)
        }
    }
}

struct Cx<'a> {
    facts: &'a KernelFacts,
    target: tlc_ir::Target,
    names: &'a mut NameSet,
    /// Buffers given a stage dimension so far, with their number of stages.
    versioned: &'a mut HashMap<String, i64>,
    errors: &'a mut Vec<Diagnostic>,
}

fn inject_list(list: &mut Vec<Stmt>, cx: &mut Cx) {
    // The sites from the statement at hand on, and the stage index each buffer versioned
    // by an earlier loop of the list takes after it: both kept as the walk goes, so that a
    // list of many loops is walked once, not once from each loop on.
    let mut sites = SitesFrom::new(list);
    let mut after_loops: HashMap<String, Expr> = HashMap::new();
    let mut i = 0;
    while i < list.len() {
        if !after_loops.is_empty() {
            add_stage_indices(std::slice::from_mut(&mut list[i]), &|b| {
                after_loops.get(b).cloned()
            });
        }
        let here = count_sites(std::slice::from_ref(&list[i]));
        let pipelined = matches!(&list[i].kind,
            StmtKind::For(f) if matches!(f.kind, ForKind::Pipelined { .. }));
        if !pipelined {
            for child in child_bodies_mut(&mut list[i]) {
                inject_list(child, cx);
            }
            sites.pass(&here);
            i += 1;
            continue;
        }
        let span = list[i].span;
        let StmtKind::For(f) = &list[i].kind else {
            unreachable!("checked above")
        };
        match pipeline_loop(f, span, sites.sites(), cx) {
            Ok(Injected {
                stmts,
                buffers,
                after,
            }) => {
                after_loops.extend(buffers.into_iter().map(|b| (b, after.clone())));
                let n = stmts.len();
                list.splice(i..=i, stmts);
                i += n;
            }
            Err(mut e) => {
                cx.errors.append(&mut e);
                i += 1;
            }
        }
        sites.pass(&here);
    }
}

/// The statements replacing one pipelined loop.
struct Injected {
    stmts: Vec<Stmt>,
    /// The buffers given a stage dimension.
    buffers: HashSet<String>,
    /// Their stage index after the loop.
    after: Expr,
}

fn bin(op: BinOp, a: Expr, b: Expr) -> Expr {
    tlc_ir::build::bin(op, a, b)
}

fn serial(mut f: For, span: Span) -> Stmt {
    f.kind = ForKind::Serial;
    Stmt::new(StmtKind::For(f), span)
}

fn pipeline_loop(
    f: &For,
    span: Span,
    from_here: &HashMap<String, usize>,
    cx: &mut Cx,
) -> Result<Injected, Vec<Diagnostic>> {
    let ForKind::Pipelined {
        num_stages,
        order,
        stage,
    } = &f.kind
    else {
        unreachable!("called on pipelined loops")
    };
    let Some(s_count) = num_stages.as_int() else {
        return Err(vec![Diagnostic::error(
            num_stages.span,
            format!("`num_stages` is `{num_stages}`, not a constant: bind its tunables first"),
        )]);
    };
    if contains_pipelined(&f.body) {
        return Err(vec![Diagnostic::error(
            span,
            "nested T.Pipelined loops are not supported: make the inner one T.serial",
        )]);
    }
    let graph = LoopGraph::build(&f.body, cx.facts, from_here);
    let (order, stage) = if order.is_empty() && stage.is_empty() {
        graph.plan(s_count)
    } else {
        (order.clone(), stage.clone())
    };
    let errors = graph.validate(f, span, s_count, &order, &stage);
    if !errors.is_empty() {
        return Err(errors);
    }
    // Before the prologue's `S - 1` copies: a ring that cannot fit stops here.
    if let Some(e) = graph.ring_too_large(num_stages, s_count, &stage, cx.target) {
        return Err(vec![e]);
    }
    let last = s_count - 1;
    let keep = |f: &For| Injected {
        stmts: vec![serial(f.clone(), span)],
        buffers: HashSet::new(),
        after: Expr::int(0),
    };
    if s_count <= 1 {
        return Ok(keep(f));
    }
    let n = f.body.len();
    let mut early = Vec::new();
    let mut late = Vec::new();
    for (x, &st) in stage.iter().enumerate() {
        if graph.stmts[x].pure_let {
            continue;
        }
        match st {
            0 => early.push(x),
            s if s == last => late.push(x),
            s => {
                return Err(vec![Diagnostic::error(
                    f.body[x].span,
                    format!(
                        "stage {s} is between 0 and num_stages - 1 = {last}: inject-software-pipeline only runs stage-0 statements ahead"
                    ),
                )
                .with_note("give this statement stage 0 or the last stage")]);
            }
        }
    }
    let is_note = |x: &usize| matches!(f.body[*x].kind, StmtKind::Note(_));
    if early.iter().all(is_note) || late.iter().all(is_note) {
        return Ok(keep(f));
    }
    let buffers: BTreeSet<String> = early
        .iter()
        .flat_map(|&x| graph.stmts[x].access.writes.iter().cloned())
        .collect();
    let mut errors = Vec::new();
    for b in &buffers {
        if cx.versioned.contains_key(b) {
            errors.push(Diagnostic::error(
                span,
                format!("shared buffer `{b}` is written in stage 0 of two pipelined loops"),
            ));
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    for b in &buffers {
        cx.versioned.insert(b.clone(), s_count);
    }
    let buffers: HashSet<String> = buffers.into_iter().collect();
    let ko = f.var.name.clone();
    let body = &f.body;
    let stage_of = |e: Expr| bin(BinOp::FloorMod, e, Expr::int(s_count));

    // The statements of each stage, by `order`, after the pure lets they need.
    let by_order = |mut xs: Vec<usize>| {
        xs.sort_by_key(|&x| order[x]);
        xs
    };
    let group = |members: Vec<usize>, all_lets: bool| -> Vec<Stmt> {
        let mut needed: HashSet<String> = HashSet::new();
        for &m in &members {
            needed.extend(graph.stmts[m].uses.iter().cloned());
        }
        let mut lets = Vec::new();
        for x in (0..n).rev() {
            let st = &graph.stmts[x];
            if !st.pure_let {
                continue;
            }
            let used = st.defines.as_ref().is_some_and(|v| needed.contains(v));
            if used || all_lets {
                needed.extend(st.uses.iter().cloned());
                lets.push(x);
            }
        }
        lets.reverse();
        // The last stage keeps a let that loads (an index, a scale) where `order` puts it
        // among its statements, as the body had it; lets that only compute, and every let
        // of the stage-0 copies, come first.
        let (loads, first): (Vec<usize>, Vec<usize>) = lets
            .into_iter()
            .partition(|&x| all_lets && !graph.stmts[x].access.reads.is_empty());
        let mut rest = members;
        rest.extend(loads);
        first
            .iter()
            .chain(&by_order(rest))
            .map(|&x| body[x].clone())
            .collect()
    };
    let early_group = group(by_order(early), false);
    // Unused pure lets stay with the last stage.
    let mut late_group = group(by_order(late), true);
    add_stage_index(&mut late_group, &buffers, &stage_of(Expr::var(&ko)));

    // The prologue: a `T.unroll` loop (constant regions could be out of their buffer when
    // the trip count is small, which the verifier rejects; `unroll` expands it at the
    // thread level).
    let s = cx.names.fresh("s");
    let value = bin(BinOp::Add, Expr::var(&s), f.start.clone());
    let mut copy = instantiate(&early_group, &ko, &value, cx.names);
    let index = if f.start.as_int() == Some(0) {
        Expr::var(&s)
    } else {
        stage_of(value.clone())
    };
    add_stage_index(&mut copy, &buffers, &index);
    let trips = match (const_int(&f.start), const_int(&f.stop)) {
        (Some(a), Some(b)) => Some(b - a),
        _ => None,
    };
    let mut prologue = if trips.is_some_and(|n| n >= last) {
        copy
    } else {
        vec![Stmt::new(
            StmtKind::If {
                cond: bin(BinOp::Lt, value, f.stop.clone()),
                then_body: copy,
                else_body: Vec::new(),
            },
            span,
        )]
    };
    prologue.push(tlc_ir::build::intrinsic(Intrinsic::CommitGroup, span));
    let mut stmts = vec![Stmt::new(
        StmtKind::For(For {
            var: Ident::new(s, span),
            start: Expr::int(0),
            stop: Expr::int(last),
            kind: ForKind::Unroll,
            body: prologue,
        }),
        span,
    )];
    let ahead = bin(BinOp::Add, Expr::var(&ko), Expr::int(last));
    let mut look_ahead = instantiate(&early_group, &ko, &ahead, cx.names);
    add_stage_index(&mut look_ahead, &buffers, &stage_of(ahead.clone()));
    let mut loop_body = vec![tlc_ir::build::intrinsic(
        Intrinsic::WaitGroup { n: s_count - 2 },
        span,
    )];
    loop_body.push(Stmt::new(
        StmtKind::If {
            cond: bin(BinOp::Lt, ahead, f.stop.clone()),
            then_body: look_ahead,
            else_body: Vec::new(),
        },
        span,
    ));
    loop_body.push(tlc_ir::build::intrinsic(Intrinsic::CommitGroup, span));
    loop_body.extend(late_group);
    stmts.push(Stmt::new(
        StmtKind::For(For {
            var: f.var.clone(),
            start: f.start.clone(),
            stop: f.stop.clone(),
            kind: ForKind::Serial,
            body: loop_body,
        }),
        span,
    ));
    let after = bin(
        BinOp::FloorMod,
        bin(BinOp::Sub, f.stop.clone(), Expr::int(1)),
        Expr::int(s_count),
    );
    Ok(Injected {
        stmts,
        buffers,
        after,
    })
}

/// Gives every access of `buffers` in `body` the leading index `index` (a region: a leading
/// range `index` of extent 1).
fn add_stage_index(body: &mut [Stmt], buffers: &HashSet<String>, index: &Expr) {
    if buffers.is_empty() {
        return;
    }
    add_stage_indices(body, &|b| buffers.contains(b).then(|| index.clone()));
}

/// [`add_stage_index`] with each buffer's own index (`None`: not versioned).
fn add_stage_indices(body: &mut [Stmt], index_of: &dyn Fn(&str) -> Option<Expr>) {
    map_body_exprs(body, &mut |e| match e.kind {
        ExprKind::Load {
            buffer,
            mut indices,
        } => {
            if let Some(index) = index_of(&buffer) {
                indices.insert(0, index);
            }
            Expr::new(ExprKind::Load { buffer, indices }, e.span)
        }
        kind => Expr::new(kind, e.span),
    });
    add_stage_index_stmts(body, index_of);
}

fn add_stage_index_stmts(body: &mut [Stmt], index_of: &dyn Fn(&str) -> Option<Expr>) {
    let region = |r: &mut tlc_ir::Region| {
        if let Some(index) = index_of(&r.buffer.name) {
            r.ranges.insert(
                0,
                Range {
                    start: index,
                    extent: Expr::int(1),
                },
            );
        }
    };
    for stmt in body.iter_mut() {
        match &mut stmt.kind {
            StmtKind::Store {
                buffer, indices, ..
            } => {
                if let Some(index) = index_of(&buffer.name) {
                    indices.insert(0, index);
                }
            }
            StmtKind::Copy { src, dst } => {
                region(src);
                region(dst);
            }
            StmtKind::Fill { dst, .. } => region(dst),
            StmtKind::Gemm(g) => {
                region(&mut g.a);
                region(&mut g.b);
                region(&mut g.c);
            }
            StmtKind::Intrinsic(i) => {
                for op in i.operands_mut() {
                    if let Some(index) = index_of(&op.buffer.name) {
                        op.indices.insert(0, index);
                    }
                }
            }
            _ => {}
        }
        for child in child_bodies_mut(stmt) {
            add_stage_index_stmts(child, index_of);
        }
    }
}

/// A copy of `body` for iteration `value` of `var` (`names::instantiate_with`, identities
/// dropped as well as literals folded).
fn instantiate(body: &[Stmt], var: &str, value: &Expr, names: &mut NameSet) -> Vec<Stmt> {
    crate::names::instantiate_with(body, (var, value), names, tlc_ir::build::bin_at)
}
