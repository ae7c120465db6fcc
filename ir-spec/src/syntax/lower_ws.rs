//! TileLang's hand-written warp specialization, written as IR the rest of tlc knows
//! (docs/ir.md, "Hand-written warp specialization"):
//!
//! - `B = T.alloc_barrier(128)` / `T.alloc_barrier([128, 128])` / `arrive_count=`: a shared
//!   `int64` buffer, one mbarrier per count, and where it stands `if tid == 0:
//!   T.mbarrier_init(B[i], count_i)` — a thread region, whose end is a block barrier (in a
//!   kernel written wholly per thread, an explicit `T.sync_threads()` follows), so every
//!   thread sees the barriers initialized, as TileLang's own initialization guarantees.
//! - `with T.ws(g, ...):` — TileLang runs the body on warp groups `g` (threads
//!   `[128 g, 128 (g + 1))` of the linear thread index; no extra warp group is added to
//!   `threads=`). Its per-thread statements (mbarrier waits and arrivals, intrinsics, code
//!   naming the thread) keep that condition: `if tid < 128:`. Its tile ops run on the whole
//!   block: tlc's tile ops have no form that runs on part of a block, and a tile op's result
//!   does not depend on which threads compute it; the block barriers around tile ops order
//!   the groups' per-thread code by program order, which a `T.note` says.
//! - `T.mbarrier_wait_parity(mbarrier=B[i], parity=p)`, `T.barrier_wait(B, p)`:
//!   `T.mbarrier_wait`; `T.mbarrier_arrive(mbarrier=B[i])`, `T.barrier_arrive(B)`:
//!   `T.mbarrier_arrive` (a barrier buffer named alone is its element 0).
//! - `T.tma_copy(src, dst, barrier=B[i])`: TileLang issues `expect_tx(bytes)` and the TMA
//!   load from one thread, the bytes completing on `B[i]` (the arrivals are the user's
//!   `T.barrier_arrive`s). tlc writes it as the block's `T.copy(src, dst)`, which has
//!   landed when it ends: the expected bytes and the completed bytes cancel in the same
//!   phase, so the barrier's phases complete on the arrivals alone, exactly when TileLang's
//!   would once its bytes land.
//! - A kernel with `T.ws`, `T.alloc_barrier` or the barrier calls runs its `T.Pipelined`
//!   loops as serial loops, with a note: the schedule is the user's, and tlc's own
//!   pipelining (or its TMA pipelines, and the warp specialization built on them) would
//!   reorder the hand-written protocol.

use crate::diagnostic::Diagnostic;
use crate::dtype::DType;
use crate::intrinsic::ElemRef;
use crate::ir::{BinOp, Expr, ExprKind, ForKind, Ident, Intrinsic, Scope, Stmt, StmtKind};
use crate::span::Span;
use crate::syntax::ast;
use crate::syntax::lower::Lowerer;
use crate::syntax::thread_regions::holds_tile;
use std::collections::BTreeSet;

/// TileLang's warp group: 128 threads of the linear thread index (`warpgroup.py`).
const WARP_GROUP: i64 = 128;

/// What a kernel with hand-written warp specialization needs at its end.
#[derive(Default)]
pub struct WsState {
    /// The thread variable the forms' conditions name (axis 0).
    pub tid: Option<String>,
    /// The barrier buffers of `T.alloc_barrier`.
    pub barriers: Vec<String>,
    /// Whether the note on tile ops in `T.ws` was written.
    pub noted: bool,
}

impl Lowerer {
    /// The thread variable of axis 0 (made up when the kernel has none) and the block's
    /// constant one-dimensional thread count, for `what`.
    fn ws_thread(&mut self, span: Span, what: &str) -> Option<(String, i64)> {
        let made = self.generated_name("ws_tid");
        let k = self.open_kernel(span, what)?;
        let threads = match k.threads.as_deref() {
            Some([e]) => match e.kind {
                ExprKind::Int(n) => Some(n),
                _ => None,
            },
            _ => None,
        };
        let Some(threads) = threads else {
            return self.fail(
                Diagnostic::error(
                    span,
                    format!("{what} needs a one-dimensional block of a constant thread count"),
                )
                .with_note(
                    "TileLang's warp groups are 128 threads of the linear thread index: write \
                     `threads=256` (a constant, one dimension)",
                ),
            );
        };
        if let Some(t) = &k.ws.tid {
            return Some((t.clone(), threads));
        }
        let name = match k.thread_vars.iter().find(|(_, axis)| *axis == 0) {
            Some((v, _)) => v.name.clone(),
            None => {
                k.thread_vars.push((Ident::new(made.clone(), span), 0));
                made
            }
        };
        k.ws.tid = Some(name.clone());
        Some((name, threads))
    }

    /// `B = T.alloc_barrier(counts)`: the buffer, and the statement that initializes it.
    pub fn alloc_barrier(
        &mut self,
        ident: &ast::Ident,
        call_span: Span,
        args: &[ast::Arg],
        stmt_span: Span,
    ) -> Option<Stmt> {
        let a = self.bind("T.alloc_barrier", call_span, args, &["arrive_count"], 1)?;
        let arg = a[0]?;
        let items: Vec<&ast::Expr> = match &arg.kind {
            ast::ExprKind::List(items) | ast::ExprKind::Tuple(items) => items.iter().collect(),
            _ => vec![arg],
        };
        if items.is_empty() {
            return self.fail(Diagnostic::error(
                arg.span,
                "`T.alloc_barrier` needs at least one arrival count",
            ));
        }
        let mut counts = Vec::with_capacity(items.len());
        for e in &items {
            let c = self.const_int(e, "an arrival count of `T.alloc_barrier`")?;
            if !(1..=1024).contains(&c) {
                return self.fail(
                    Diagnostic::error(
                        e.span,
                        format!("an mbarrier's arrival count is 1..=1024, found {c}"),
                    )
                    .with_note("it counts the threads that arrive on the barrier in one phase"),
                );
            }
            counts.push(c);
        }
        let (tid, _) = self.ws_thread(call_span, "`T.alloc_barrier`")?;
        let decl = self.declare(
            ident,
            vec![Expr::int(counts.len() as i64)],
            DType::Int64,
            Scope::Shared,
            stmt_span,
        )?;
        let k = self.kernels.last_mut()?;
        k.allocs.push(decl);
        k.ws.barriers.push(ident.name.clone());
        let inits = counts
            .iter()
            .enumerate()
            .map(|(i, &count)| {
                let bar = ElemRef {
                    buffer: Ident::new(ident.name.clone(), ident.span),
                    indices: vec![Expr::int(i as i64)],
                };
                Stmt::new(
                    StmtKind::Intrinsic(Intrinsic::MbarrierInit { bar, count }),
                    call_span,
                )
            })
            .collect();
        let first = Expr::binary(
            BinOp::Eq,
            Expr::new(ExprKind::Var(tid), call_span),
            Expr::int(0),
            call_span,
        );
        Some(crate::build::if_then(first, inits, stmt_span))
    }

    /// `with T.ws(g, ...): body`.
    pub fn warp_specialize(
        &mut self,
        item_span: Span,
        args: &[ast::Arg],
        target: Option<&ast::Expr>,
        body: &[ast::Stmt],
        span: Span,
        out: &mut Vec<Stmt>,
    ) {
        if let Some(t) = target {
            self.error(Diagnostic::error(t.span, "`T.ws` binds no name"));
            return;
        }
        let Some((tid, threads)) = self.ws_thread(item_span, "`T.ws`") else {
            return;
        };
        if args.is_empty() {
            self.error(Diagnostic::error(
                item_span,
                "`T.ws` needs at least one warp group index: `T.ws(0)`",
            ));
            return;
        }
        let mut groups = BTreeSet::new();
        for arg in args {
            if let Some(kw) = &arg.name {
                self.error(Diagnostic::error(
                    kw.span,
                    "`T.ws` takes warp group indices only, no keyword arguments",
                ));
                return;
            }
            let Some(g) = self.const_int(&arg.value, "a warp group index of `T.ws`") else {
                return;
            };
            if g < 0 || (g + 1) * WARP_GROUP > threads {
                let held = match threads / WARP_GROUP {
                    0 => "no whole warp group".to_string(),
                    1 => "warp group 0 only".to_string(),
                    n => format!("warp groups 0 to {}", n - 1),
                };
                self.error(
                    Diagnostic::error(
                        arg.value.span,
                        format!(
                            "warp group {g} is not in the block: {threads} threads hold {held}"
                        ),
                    )
                    .with_note(
                        "a warp group is 128 threads of the linear thread index; TileLang adds \
                         no threads for `T.ws`",
                    ),
                );
                return;
            }
            groups.insert(g);
        }
        let cond = group_condition(&tid, &groups, threads, item_span);
        let Some(lowered) = self.nested(1, span, |lw| lw.block(body)) else {
            return;
        };
        let fragments: BTreeSet<String> = self
            .kernels
            .last()
            .map(|k| {
                k.allocs
                    .iter()
                    .filter(|a| a.scope == Scope::Fragment)
                    .map(|a| a.name.name.clone())
                    .collect()
            })
            .unwrap_or_default();
        let mut tile = false;
        let wrapped = guard_per_thread(lowered, &cond, &fragments, &mut tile);
        if tile {
            if let Some(k) = self.kernels.last_mut() {
                if !k.ws.noted {
                    k.ws.noted = true;
                    out.push(crate::build::note(
                        "T.ws: tile ops run on the whole block (tlc has no tile op on part of a \
                         block; their results are the same); each warp group's per-thread \
                         statements keep its condition, ordered by the block barriers around \
                         the tile ops",
                        item_span,
                    ));
                }
            }
        }
        out.extend(wrapped);
    }

    /// `T.mbarrier_wait_parity`, `T.barrier_wait`, `T.mbarrier_arrive` (TileLang's
    /// keyword `mbarrier=` or a barrier buffer named alone) and `T.barrier_arrive`.
    pub fn barrier_call(&mut self, name: &str, span: Span, args: &[ast::Arg]) -> Option<Stmt> {
        let (params, waits): (&[&str], bool) = match name {
            "T.mbarrier_wait_parity" => (&["mbarrier", "parity"], true),
            "T.barrier_wait" => (&["barrier_id", "parity"], true),
            "T.mbarrier_arrive" => (&["mbarrier"], false),
            _ => (&["barrier_id"], false),
        };
        let a = self.bind(name, span, args, params, params.len())?;
        let bar = self.barrier_ref(a[0]?, name)?;
        // The kernel's schedule is hand-written from here on (its pipelines run serially).
        self.ws_thread(span, &format!("`{name}`"))?;
        let call = if waits {
            let parity = self.expr(a[1]?)?;
            Intrinsic::MbarrierWait { bar, parity }
        } else {
            Intrinsic::MbarrierArrive { bar }
        };
        Some(Stmt::new(StmtKind::Intrinsic(call), span))
    }

    /// Whether `T.mbarrier_arrive(args)` is TileLang's spelling (keyword `mbarrier=`, or a
    /// buffer named alone) rather than tlc's `T.mbarrier_arrive(bar)`.
    pub fn tilelang_arrive(args: &[ast::Arg]) -> bool {
        args.iter().any(|a| {
            a.name.as_ref().is_some_and(|n| n.name == "mbarrier")
                || matches!(a.value.kind, ast::ExprKind::Name(_))
        })
    }

    /// A barrier operand: `B[i]`, or `B` for its element 0.
    fn barrier_ref(&mut self, e: &ast::Expr, what: &str) -> Option<ElemRef> {
        if let ast::ExprKind::Name(n) = &e.kind {
            return Some(ElemRef {
                buffer: Ident::new(n.clone(), e.span),
                indices: vec![Expr::int(0)],
            });
        }
        self.elem_ref(e, what)
    }

    /// `T.tma_copy(src, dst, barrier=B[i])`: the block's `T.copy(src, dst)` (see the module
    /// comment); the barrier is checked to be an operand and otherwise unused.
    pub fn tma_copy(&mut self, span: Span, args: &[ast::Arg]) -> Option<Stmt> {
        let mut copy_args = Vec::with_capacity(args.len());
        let mut barrier = None;
        for a in args {
            match a.name.as_ref().map(|n| n.name.as_str()) {
                Some("barrier") => barrier = Some(&a.value),
                Some("eviction_policy" | "leader_scope_threads" | "annotations") => {}
                _ => copy_args.push(a.clone()),
            }
        }
        if let Some(b) = barrier {
            self.barrier_ref(b, "T.tma_copy")?;
        } else {
            return self.fail(
                Diagnostic::error(span, "`T.tma_copy` needs `barrier=` for a load")
                    .with_note("TileLang's loads complete on an mbarrier of `T.alloc_barrier`"),
            );
        }
        self.copy(span, &copy_args)
    }

    /// The end of a kernel with hand-written warp specialization (before its thread
    /// variables are bound): `T.Pipelined` loops run serially, and every barrier
    /// initialization is followed by `T.sync_threads()` (per-thread code: a thread region's,
    /// or the whole per-thread body's), so no thread uses a barrier before it is initialized.
    pub fn finish_ws(body: &mut Vec<Stmt>, barriers: &[String]) {
        serialize_pipelines(body);
        sync_after_inits(body, barriers);
    }
}

/// `T.sync_threads()` after each of `T.alloc_barrier`'s initializations in `body`.
fn sync_after_inits(body: &mut Vec<Stmt>, barriers: &[String]) {
    let mut out = Vec::with_capacity(body.len());
    for mut s in std::mem::take(body) {
        for child in crate::visit::child_bodies_mut(&mut s) {
            sync_after_inits(child, barriers);
        }
        let init = is_barrier_init(&s, barriers);
        let span = s.span;
        out.push(s);
        if init {
            out.push(Stmt::new(StmtKind::Barrier, span));
        }
    }
    *body = out;
}

/// `tid` in the warp groups `groups` (contiguous groups merged; a range that reaches the end
/// of the block has no upper test).
fn group_condition(tid: &str, groups: &BTreeSet<i64>, threads: i64, span: Span) -> Expr {
    let mut ranges: Vec<(i64, i64)> = Vec::new();
    for &g in groups {
        let (lo, hi) = (g * WARP_GROUP, (g + 1) * WARP_GROUP);
        match ranges.last_mut() {
            Some(r) if r.1 == lo => r.1 = hi,
            _ => ranges.push((lo, hi)),
        }
    }
    let var = || Expr::new(ExprKind::Var(tid.to_string()), span);
    let mut cond: Option<Expr> = None;
    for (lo, hi) in ranges {
        let mut tests = Vec::new();
        if lo > 0 {
            tests.push(Expr::binary(BinOp::Ge, var(), Expr::int(lo), span));
        }
        if hi < threads {
            tests.push(Expr::binary(BinOp::Lt, var(), Expr::int(hi), span));
        }
        let range = tests
            .into_iter()
            .reduce(|a, b| Expr::binary(BinOp::And, a, b, span))
            .unwrap_or_else(|| Expr::new(ExprKind::Bool(true), span));
        cond = Some(match cond {
            None => range,
            Some(c) => Expr::binary(BinOp::Or, c, range, span),
        });
    }
    cond.unwrap_or_else(|| Expr::new(ExprKind::Bool(true), span))
}

/// `body` with each maximal run of per-thread statements under `if cond:`; tile-level
/// statements stay for the whole block (a loop, `while` or `if` holding tile ops is entered);
/// `let`s and notes stay outside (lets are the same for every thread, and later tile ops
/// of the body may name them).
fn guard_per_thread(
    body: Vec<Stmt>,
    cond: &Expr,
    fragments: &BTreeSet<String>,
    tile: &mut bool,
) -> Vec<Stmt> {
    let mut out = Vec::with_capacity(body.len());
    let mut run: Vec<Stmt> = Vec::new();
    let flush = |run: &mut Vec<Stmt>, out: &mut Vec<Stmt>| {
        if !run.is_empty() {
            let at = run[0].span;
            out.push(crate::build::if_then(cond.clone(), std::mem::take(run), at));
        }
    };
    for mut stmt in body {
        let uniform = matches!(stmt.kind, StmtKind::Let { .. } | StmtKind::Note(_));
        let frags: BTreeSet<&str> = fragments.iter().map(String::as_str).collect();
        if !uniform && !holds_tile(&stmt, &frags) {
            run.push(stmt);
            continue;
        }
        flush(&mut run, &mut out);
        if !uniform {
            *tile = true;
            let enter = match &stmt.kind {
                StmtKind::For(f) => {
                    !matches!(f.kind, ForKind::Parallel | ForKind::ThreadBinding(_))
                }
                StmtKind::While { .. } | StmtKind::If { .. } => true,
                _ => false,
            };
            if enter {
                for child in crate::visit::child_bodies_mut(&mut stmt) {
                    let inner = std::mem::take(child);
                    *child = guard_per_thread(inner, cond, fragments, tile);
                }
            }
        }
        out.push(stmt);
    }
    flush(&mut run, &mut out);
    out
}

/// Every `T.Pipelined` loop of `body` (at any depth) as a serial loop, with a note.
fn serialize_pipelines(body: &mut Vec<Stmt>) {
    let mut out = Vec::with_capacity(body.len());
    for mut s in std::mem::take(body) {
        for child in crate::visit::child_bodies_mut(&mut s) {
            serialize_pipelines(child);
        }
        if let StmtKind::For(f) = &mut s.kind {
            if matches!(f.kind, ForKind::Pipelined { .. }) {
                f.kind = ForKind::Serial;
                out.push(crate::build::note(
                    "T.Pipelined runs as a serial loop: this kernel's schedule is written by \
                     hand (T.ws / T.alloc_barrier), and tlc's pipelining would reorder it",
                    s.span,
                ));
            }
        }
        out.push(s);
    }
    *body = out;
}

/// Whether `s` is the initialization `T.alloc_barrier` wrote for one of `barriers`.
fn is_barrier_init(s: &Stmt, barriers: &[String]) -> bool {
    let StmtKind::If { then_body, .. } = &s.kind else {
        return false;
    };
    then_body.iter().all(|t| {
        matches!(&t.kind, StmtKind::Intrinsic(Intrinsic::MbarrierInit { bar, .. })
            if barriers.contains(&bar.buffer.name))
    }) && !then_body.is_empty()
}
