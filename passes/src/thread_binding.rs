//! `thread-binding`: merges the SIMT regions of each kernel (its `threadIdx.x` binding loops,
//! as `lower-tile-ops` leaves them) into ONE `for tx in T.thread_binding(T, thread=
//! "threadIdx.x")` loop around the whole kernel body, and inserts `T.sync_threads()` where the
//! regions communicate through memory.
//!
//! - Every region's variable becomes the kernel's one (the first region's name); a region
//!   narrower than the block runs under `if tx < extent:`.
//! - Scalar code between regions (lets, serial / pipelined loops, `if`s, notes) is replicated
//!   per thread: it only reads block-uniform values, so every thread computes the same. A
//!   block-level store is done by thread 0 alone (`if tx == 0:`), so it does not race —
//!   except a store to a local buffer, which every thread makes to its own copy (uniform
//!   local buffers, `analysis::uniform`, are block-uniform values, not per-thread ones). A note
//!   touches nothing: no guard, no barrier. A print (`T.print`, `T.print_elem`) is every
//!   thread's (the element's printing thread chooses itself): no guard; it reads what it
//!   prints, so it gets a barrier after another thread's write of it.
//! - Barriers: before a region (or a scalar statement reading memory) that reads a shared or
//!   global buffer written since the last barrier, or writes one read or written since
//!   then. Accesses are compared by buffer and *stage key*: the first index when it is the
//!   same for every thread (no thread index, no variable bound inside the region, no load);
//!   keys differing by a nonzero constant, or `e1 % m` / `e2 % m` with `e1 - e2` a constant
//!   not a multiple of `m`, are disjoint (`S[(ko + 2) % 3, ..]` and `S[ko % 3, ..]`). Local and
//!   fragment buffers are per thread (the same thread owns the same elements in every
//!   region): no barrier for them.
//! - `T.cp_async` writes its destination when issued (for ordering after earlier uses) and
//!   again at every later `T.cp_async_wait` (where it may land, so readers in other threads
//!   need a barrier after the wait); `T.ldmatrix` reads its source. Their keys count when
//!   the operand's run cannot leave its first-index slice. A `T.tma_load` writes its
//!   destination when issued only: readers observe the bytes through its mbarrier's wait.
//!   mbarrier operations order themselves (`Effect::Sync`): they only count as reads, so
//!   an `T.mbarrier_init` (a write) gets a barrier before the first use in another thread.
//! - Loops: the body is walked from the state before the loop joined with the state one
//!   iteration leaves the next (keys shifted `ko -> ko - 1`; after two rounds keys over `ko`
//!   stand for all earlier iterations), until stable, so barriers land where a later
//!   iteration needs them; a barrier at the end of the body instead is used when that needs
//!   no more barriers per iteration. A branch of an `if` that would start with a barrier
//!   gets it before the `if`. A software-pipelined loop gets one barrier per iteration,
//!   after its wait.
//! - Barriers only land at block-uniform points: an `if` or loop around a region must not
//!   depend on the thread (an error otherwise).
//! - Multi-dimensional blocks: regions are thread nests defining the linear index `t`
//!   (`analysis::block`); they merge into ONE nest (the first region's names) whose body
//!   starts with that let, and `t` plays the part of `tx` above (`if t == 0:`). A region
//!   that is not such a nest is an error; a kernel written by hand as one binding nest is
//!   left alone.
//! - A kernel with no region is left alone.
//! - A kernel that issues `T.wgmma` gets `T.fence_proxy_async()` before every barrier:
//!   generic-proxy shared writes must be fenced by their writer before the barrier that
//!   publishes them to wgmma's async-proxy reads.

use crate::analysis::block::Block;
use crate::analysis::int::mentions_any;
use crate::analysis::kernels::{contains_thread_region, for_each_kernel, is_thread_region};
use crate::analysis::sync::{self, push_new, LoopPolicy, State, Touch, Touches};
use crate::analysis::uniform::uniform_locals;
use crate::context::PassContext;
use crate::pass::Pass;
use std::collections::{HashMap, HashSet};
use tlc_ir::build::intrinsic;
use tlc_ir::intrinsic::Effect;
use tlc_ir::verifier::level::violation;
use tlc_ir::verifier::{const_int, Level};
use tlc_ir::visit::{
    child_bodies_mut, for_each_stmt, for_each_subexpr, map_body_exprs, stmt_exprs,
};
use tlc_ir::{
    BinOp, BufferDecl, Diagnostic, ElemRef, Expr, ExprKind, For, ForKind, Intrinsic, Kernel,
    PrimFunc, Scope, Span, Stmt, StmtKind, ThreadTag,
};

pub struct ThreadBinding;

impl Pass for ThreadBinding {
    fn name(&self) -> &'static str {
        "thread-binding"
    }

    fn description(&self) -> &'static str {
        "SIMT regions -> one threadIdx.x loop over the kernel body, with T.sync_threads() where regions share memory"
    }

    fn requires(&self) -> Level {
        Level::Thread
    }

    fn run(&self, func: PrimFunc, _cx: &PassContext) -> Result<PrimFunc, Vec<Diagnostic>> {
        bind_threads(func, true)
    }
}

/// The pass; with `insert_barriers == false` it merges without synchronizing (only for tests
/// that show the interpreter catching the races this produces).
pub fn bind_threads(
    mut func: PrimFunc,
    insert_barriers: bool,
) -> Result<PrimFunc, Vec<Diagnostic>> {
    let mut errors = Vec::new();
    let params = func.params.clone();
    for_each_kernel(&mut func.body, &mut |k, span| {
        bind_kernel(k, span, &params, insert_barriers, &mut errors);
        if insert_barriers && has_wgmma(&k.body) {
            fence_before_barriers(&mut k.body);
        }
    });
    if errors.is_empty() {
        Ok(func)
    } else {
        Err(errors)
    }
}

/// Whether `body` issues a `T.wgmma`.
fn has_wgmma(body: &[Stmt]) -> bool {
    let mut found = false;
    for_each_stmt(body, &mut |s| {
        found |= matches!(&s.kind, StmtKind::Intrinsic(i) if i.wgmma_accumulator().is_some());
    });
    found
}

/// `T.fence_proxy_async()` before every barrier (`T.sync_threads()` or a named
/// `T.bar_sync`): shared memory written through the generic proxy (stores, `cp.async`) is
/// visible to `wgmma`'s async-proxy reads in other threads only when the writing thread
/// fences before the barrier that publishes it.
fn fence_before_barriers(body: &mut Vec<Stmt>) {
    let mut i = 0;
    while i < body.len() {
        let barrier = matches!(
            body[i].kind,
            StmtKind::Barrier | StmtKind::GridSync | StmtKind::Intrinsic(Intrinsic::BarSync { .. })
        );
        if barrier {
            let fenced = i > 0
                && matches!(
                    body[i - 1].kind,
                    StmtKind::Intrinsic(Intrinsic::FenceProxyAsync)
                );
            if !fenced {
                let span = body[i].span;
                body.insert(i, intrinsic(Intrinsic::FenceProxyAsync, span));
                i += 1;
            }
        }
        for child in child_bodies_mut(&mut body[i]) {
            fence_before_barriers(child);
        }
        i += 1;
    }
}

/// A buffer whose accesses barriers order: its shape and element size.
struct Tracked {
    shape: Vec<Expr>,
    bytes: i64,
}

struct Cx<'a> {
    /// The kernel's thread variable (`threadIdx.x`, or the linear index of a
    /// multi-dimensional block) and thread count.
    tx: String,
    threads: i64,
    /// The block's shape.
    block: &'a Block,
    /// The axis variables of the merged thread nest (multi-dimensional blocks; a region's
    /// own axis variables are renamed to these).
    axes: &'a [String],
    /// Buffers whose accesses need ordering (shared allocations and parameters), with their
    /// shapes.
    tracked: &'a HashMap<String, Tracked>,
    /// Per-thread buffers (local, fragment): reading one makes a value thread-dependent.
    private: &'a HashSet<String>,
    /// Local buffers: every thread has its own copy, so a block-level store to one is made
    /// by every thread.
    locals: &'a HashSet<String>,
    /// Scalar variables whose value may differ between threads.
    divergent: HashSet<String>,
    insert_barriers: bool,
    errors: Vec<Diagnostic>,
    /// The innermost enclosing statement that has a source location (the kernel's at
    /// first): where an error about code an earlier pass made (with no location of its own)
    /// points.
    at: Span,
}

impl Cx<'_> {
    /// A copy for trial walks (its errors are dropped).
    fn dry(&self) -> Cx<'_> {
        Cx {
            tx: self.tx.clone(),
            threads: self.threads,
            block: self.block,
            axes: self.axes,
            tracked: self.tracked,
            private: self.private,
            locals: self.locals,
            divergent: self.divergent.clone(),
            insert_barriers: self.insert_barriers,
            errors: Vec::new(),
            at: self.at,
        }
    }

    /// `span`, or where the innermost located statement around it is when an earlier pass
    /// made it without a location.
    fn located(&self, span: Span) -> Span {
        if span.is_dummy() {
            self.at
        } else {
            span
        }
    }

    /// Records `d` at a source location, once (an earlier pass may have made several
    /// statements from one, each with the same fault).
    fn error(&mut self, mut d: Diagnostic) {
        d.span = self.located(d.span);
        if !self.errors.iter().any(|e| {
            (e.span.start, e.span.end) == (d.span.start, d.span.end) && e.message == d.message
        }) {
            self.errors.push(d);
        }
    }

    fn touch(&self, buffer: &str, key: Option<&Expr>, local: &HashSet<String>) -> Option<Touch> {
        if !self.tracked.contains_key(buffer) {
            return None;
        }
        // A key must be one value for every thread, fixed while the accesses it separates
        // happen: no thread-dependent or region-local variable, no load.
        let key = key
            .filter(|k| {
                let mut loads = false;
                for_each_subexpr(k, &mut |x| loads |= matches!(x.kind, ExprKind::Load { .. }));
                !loads && !mentions_any(k, local) && !self.thread_dependent(k)
            })
            .cloned();
        Some(Touch {
            buffer: buffer.to_string(),
            key,
            family: None,
            owner: None,
        })
    }

    /// The key of an intrinsic operand covering `count` consecutive elements: its first
    /// index, when every aligned run of `count` elements stays within one first-index slice
    /// (the product of the other dimensions is a constant multiple of `count`; cp.async and
    /// ldmatrix addresses are aligned to their size).
    fn run_key<'e>(&self, op: &'e ElemRef, count: i64) -> Option<&'e Expr> {
        let shape = &self.tracked.get(&op.buffer.name)?.shape;
        let slice = shape
            .iter()
            .skip(1)
            .map(const_int)
            .try_fold(1i64, |a, d| a.checked_mul(d?))?;
        (shape.len() > 1 && count > 0 && slice % count == 0)
            .then(|| op.indices.first())
            .flatten()
    }

    /// The tracked accesses of `body` (nested statements included); keys mentioning a
    /// variable of `local` (bound inside the code, or the thread index) are dropped. With
    /// `in_flight`, also the destinations of its `T.cp_async`s.
    fn touches(&self, body: &[Stmt], local: &HashSet<String>) -> (Touches, Touches) {
        let mut acc = Touches::default();
        let mut in_flight = Touches::default();
        for_each_stmt(body, &mut |s| {
            for e in stmt_exprs(s) {
                for_each_subexpr(e, &mut |x| {
                    if let ExprKind::Load { buffer, indices } = &x.kind {
                        if let Some(t) = self.touch(buffer, indices.first(), local) {
                            push_new(&mut acc.reads, t);
                        }
                    }
                });
            }
            let write = |acc: &mut Touches, b: &str, key: Option<&Expr>| {
                if let Some(t) = self.touch(b, key, local) {
                    push_new(&mut acc.writes, t);
                }
            };
            match &s.kind {
                StmtKind::Store {
                    buffer, indices, ..
                } => write(&mut acc, &buffer.name, indices.first()),
                // A read-modify-write.
                StmtKind::AtomicAdd {
                    buffer, indices, ..
                } => {
                    write(&mut acc, &buffer.name, indices.first());
                    if let Some(t) = self.touch(&buffer.name, indices.first(), local) {
                        push_new(&mut acc.reads, t);
                    }
                }
                StmtKind::Copy { src, dst } => {
                    if let Some(t) = self.touch(&src.buffer.name, None, local) {
                        push_new(&mut acc.reads, t);
                    }
                    write(&mut acc, &dst.buffer.name, None);
                }
                StmtKind::Fill { dst, .. } => write(&mut acc, &dst.buffer.name, None),
                StmtKind::Gemm(g) => {
                    for r in [&g.a, &g.b, &g.c] {
                        if let Some(t) = self.touch(&r.buffer.name, None, local) {
                            push_new(&mut acc.reads, t);
                        }
                    }
                    write(&mut acc, &g.c.buffer.name, None);
                }
                // Each operand with its effect; an asynchronous write is also in flight
                // until a wait lands it.
                StmtKind::Intrinsic(i) => {
                    for a in i.accesses() {
                        let name = &a.operand.buffer.name;
                        let count = self
                            .tracked
                            .get(name)
                            .and_then(|t| i.count(a.param, t.bytes))
                            .unwrap_or(0);
                        let key = self.run_key(a.operand, count);
                        let (reads, writes) = a.effect.ordered_by_barriers();
                        if reads {
                            if let Some(t) = self.touch(name, key, local) {
                                push_new(&mut acc.reads, t);
                            }
                        }
                        if writes {
                            write(&mut acc, name, key);
                        }
                        if a.effect == Effect::AsyncWrite {
                            write(&mut in_flight, name, key);
                        }
                    }
                }
                _ => {}
            }
        });
        (acc, in_flight)
    }

    /// The accesses a scalar statement makes itself (conditions, bounds, values).
    fn scalar_touches(&self, exprs: &[&Expr]) -> Touches {
        let mut acc = Touches::default();
        for e in exprs {
            for_each_subexpr(e, &mut |x| {
                if let ExprKind::Load { buffer, indices } = &x.kind {
                    if let Some(t) = self.touch(buffer, indices.first(), &HashSet::new()) {
                        push_new(&mut acc.reads, t);
                    }
                }
            });
        }
        acc
    }

    /// Pushes a barrier before code accessing `acc` when it conflicts with what is pending.
    fn order(&mut self, state: &mut State, acc: &Touches, span: Span, out: &mut Vec<Stmt>) {
        if self.insert_barriers && state.pending.conflicts(acc) {
            out.push(Stmt::new(StmtKind::Barrier, span));
            state.pending = Touches::default();
        }
        state.pending.union(acc);
    }

    fn thread_dependent(&self, e: &Expr) -> bool {
        let mut dep = false;
        for_each_subexpr(e, &mut |s| match &s.kind {
            ExprKind::Var(v) => {
                dep |= v == &self.tx || self.axes.contains(v) || self.divergent.contains(v)
            }
            ExprKind::Load { buffer, .. } => dep |= self.private.contains(buffer),
            _ => {}
        });
        dep
    }

    /// Regions under a thread-dependent condition could not be synchronized. The error
    /// points at the expression, or — for one an earlier pass made (the conditions of a
    /// software pipeline's stages) — at the thread-dependent value in it that came from the
    /// source, else at the statement.
    fn require_uniform(&mut self, e: &Expr, what: &str, body: &[Stmt]) {
        if !contains_thread_region(body) || !self.thread_dependent(e) {
            return;
        }
        let mut d = Diagnostic::error(
            e.span,
            format!(
                "this {what} depends on the thread, so the SIMT regions under it cannot be \
                 synchronized"
            ),
        );
        if e.span.is_dummy() {
            let mut source = None;
            for_each_subexpr(e, &mut |x| {
                if source.is_none() && !x.span.is_dummy() && self.thread_dependent(x) {
                    source = Some(x.span);
                }
            });
            d = match source {
                Some(at) => {
                    d.span = at;
                    d.with_note(format!(
                        "the {what} `{e}` was made by an earlier pass from this value"
                    ))
                }
                None => d.with_note(format!("the {what} `{e}` was made by an earlier pass")),
            };
        }
        self.error(d.with_note("barriers must be reached by every thread of the block"));
    }
}

fn bind_kernel(
    k: &mut Kernel,
    span: Span,
    params: &[BufferDecl],
    insert_barriers: bool,
    errors: &mut Vec<Diagnostic>,
) {
    if !contains_thread_region(&k.body) {
        return;
    }
    let block = match Block::of(k, span) {
        Ok(b) => b,
        Err(mut e) => {
            errors.append(&mut e);
            return;
        }
    };
    // The merged loop (nest) takes the first region's names, which are unique already.
    let mut first = None;
    for_each_stmt(&k.body, &mut |s| {
        if let (None, StmtKind::For(f)) = (&first, &s.kind) {
            if is_thread_region(s) {
                first = Some(match block.open(f) {
                    Some(nest) => (
                        nest.index.clone(),
                        nest.axes.iter().map(|a| a.name.clone()).collect(),
                        s.span,
                    ),
                    None => (f.var.clone(), Vec::new(), s.span),
                });
            }
        }
    });
    let Some((var, axes, first_span)) = first else {
        return;
    };
    if !block.is_flat() && axes.is_empty() {
        // Not a thread nest of the block: a multi-dimensional kernel written at the thread
        // level. Already one binding loop around everything: nothing to merge.
        if k.body.len() == 1 {
            return;
        }
        let at = if first_span.is_dummy() {
            span
        } else {
            first_span
        };
        errors.push(not_a_nest(at, &block));
        return;
    }
    let tracked: HashMap<String, Tracked> = params
        .iter()
        .chain(k.allocs.iter().filter(|a| a.scope == Scope::Shared))
        .map(|b| {
            (
                b.name.name.clone(),
                Tracked {
                    shape: b.shape.clone(),
                    bytes: i64::from(b.dtype.bytes()),
                },
            )
        })
        .collect();
    // Uniform local buffers (block-level scalar variables) are not per-thread values.
    let uniform = uniform_locals(k);
    let private: HashSet<String> = k
        .allocs
        .iter()
        .filter(|a| matches!(a.scope, Scope::Local | Scope::Fragment))
        .filter(|a| !uniform.contains(&a.name.name))
        .map(|a| a.name.name.clone())
        .collect();
    let locals: HashSet<String> = k
        .allocs
        .iter()
        .filter(|a| a.scope == Scope::Local)
        .map(|a| a.name.name.clone())
        .collect();
    let mut cx = Cx {
        tx: var.name.clone(),
        threads: block.threads(),
        block: &block,
        axes: &axes,
        tracked: &tracked,
        private: &private,
        locals: &locals,
        divergent: HashSet::new(),
        insert_barriers,
        errors: Vec::new(),
        at: span,
    };
    let body = walk(std::mem::take(&mut k.body), &mut State::default(), &mut cx);
    errors.append(&mut cx.errors);
    k.body = vec![block.region(&var.name, &axes, body, span)];
    // The merged loop keeps the first region's spelling of its variable.
    if let Some(StmtKind::For(f)) = k.body.first_mut().map(|s| &mut s.kind) {
        if block.is_flat() {
            f.var = var;
        }
    }
}

/// Rewrites scalar code `body` for the merged loop; `state` holds the accesses since the
/// last barrier and the copies in flight (in and out).
fn walk(body: Vec<Stmt>, state: &mut State, cx: &mut Cx) -> Vec<Stmt> {
    let mut out = Vec::with_capacity(body.len());
    for stmt in body {
        let span = stmt.span;
        let outer = cx.at;
        cx.at = cx.located(span);
        match stmt.kind {
            StmtKind::For(f) if matches!(f.kind, ForKind::ThreadBinding(_)) => {
                region(f, span, state, cx, &mut out);
            }
            StmtKind::For(f) if f.kind == ForKind::Parallel => {
                // Unreachable through the pass manager, which checks `requires()`.
                let stmt = Stmt::new(StmtKind::For(f), span);
                for d in violation(&stmt, Level::Thread) {
                    cx.error(d);
                }
            }
            StmtKind::For(f) => serial_loop(f, span, state, cx, &mut out),
            // Every thread runs it (its code is a block barrier on each side of the wait),
            // so nothing is pending after it.
            StmtKind::GridSync => {
                state.pending = Touches::default();
                out.push(Stmt::new(StmtKind::GridSync, span));
            }
            StmtKind::While { cond, body } => while_loop(cond, body, span, state, cx, &mut out),
            StmtKind::If {
                cond,
                then_body,
                else_body,
            } => {
                let acc = cx.scalar_touches(&[&cond]);
                cx.order(state, &acc, span, &mut out);
                cx.require_uniform(&cond, "condition", &then_body);
                cx.require_uniform(&cond, "condition", &else_body);
                // A branch that would start with a barrier gets it before the `if` instead
                // (the condition is block-uniform), where it also serves the other branch
                // and the code after.
                if cx.insert_barriers && !state.pending.is_empty() {
                    let starts_with_barrier = |body: &[Stmt], state: &State| {
                        let mut trial = state.clone();
                        let mut dry = cx.dry();
                        let walked = walk(body.to_vec(), &mut trial, &mut dry);
                        // (Notes and `T.fresh` before it do not count: they are not code.)
                        let mut code = walked
                            .iter()
                            .filter(|s| !matches!(s.kind, StmtKind::Note(_) | StmtKind::Fresh(_)));
                        matches!(code.next(), Some(s) if s.kind == StmtKind::Barrier)
                    };
                    if starts_with_barrier(&then_body, state)
                        || starts_with_barrier(&else_body, state)
                    {
                        out.push(Stmt::new(StmtKind::Barrier, span));
                        state.pending = Touches::default();
                    }
                }
                let mut other = state.clone();
                let local: HashSet<String> = sync::bound_vars(&then_body)
                    .into_iter()
                    .chain(sync::bound_vars(&else_body))
                    .collect();
                let then_body = walk(then_body, state, cx);
                let else_body = walk(else_body, &mut other, cx);
                state.union(&other);
                state.widen(&local);
                out.push(Stmt::new(
                    StmtKind::If {
                        cond,
                        then_body,
                        else_body,
                    },
                    span,
                ));
            }
            StmtKind::Let { var, dtype, value } => {
                let acc = cx.scalar_touches(&[&value]);
                cx.order(state, &acc, span, &mut out);
                if cx.thread_dependent(&value) {
                    cx.divergent.insert(var.name.clone());
                }
                out.push(Stmt::new(StmtKind::Let { var, dtype, value }, span));
            }
            StmtKind::Store {
                buffer,
                indices,
                value,
            } if cx.locals.contains(&buffer.name) => {
                // Every thread's own copy of a local buffer gets the block-level value.
                let stmt = Stmt::new(
                    StmtKind::Store {
                        buffer,
                        indices,
                        value,
                    },
                    span,
                );
                let (acc, _) = cx.touches(std::slice::from_ref(&stmt), &HashSet::new());
                cx.order(state, &acc, span, &mut out);
                out.push(stmt);
            }
            kind @ (StmtKind::Store { .. } | StmtKind::AtomicAdd { .. }) => {
                // Block-level code runs once per block: thread 0 does it.
                let stmt = Stmt::new(kind, span);
                let (acc, _) = cx.touches(std::slice::from_ref(&stmt), &HashSet::new());
                cx.order(state, &acc, span, &mut out);
                let cond = Expr::binary(BinOp::Eq, Expr::var(cx.tx.clone()), Expr::int(0), span);
                out.push(Stmt::new(
                    StmtKind::If {
                        cond,
                        then_body: vec![stmt],
                        else_body: Vec::new(),
                    },
                    span,
                ));
            }
            kind @ (StmtKind::Copy { .. } | StmtKind::Fill { .. } | StmtKind::Gemm(_)) => {
                // Unreachable through the pass manager, which checks `requires()`.
                for d in violation(&Stmt::new(kind, span), Level::Thread) {
                    cx.error(d);
                }
            }
            StmtKind::Intrinsic(Intrinsic::WaitGroup { n }) => {
                // The copies it lands are writes at this point (no barrier needed before:
                // whatever their bytes were used for before the copies were issued is
                // ordered by the issue).
                let landed = state.in_flight.clone();
                state.pending.union(&landed);
                if n == 0 {
                    state.in_flight = Touches::default();
                }
                out.push(Stmt::new(
                    StmtKind::Intrinsic(Intrinsic::WaitGroup { n }),
                    span,
                ));
            }
            // A print reads what it prints (its value's loads, a printed element): ordered
            // after the writes of other threads it reads, as any scalar read is.
            StmtKind::Intrinsic(
                i @ (Intrinsic::Print { .. }
                | Intrinsic::PrintMsg { .. }
                | Intrinsic::PrintElem { .. }),
            ) => {
                let stmt = Stmt::new(StmtKind::Intrinsic(i), span);
                let (acc, _) = cx.touches(std::slice::from_ref(&stmt), &HashSet::new());
                cx.order(state, &acc, span, &mut out);
                out.push(stmt);
            }
            // Commits, and what cannot appear in a kernel's scalar code (verifier rules).
            kind => out.push(Stmt::new(kind, span)),
        }
        cx.at = outer;
    }
    out
}

/// A serial (or unrolled, pipelined) loop of scalar code. The body is walked from the state
/// before the loop joined with what one iteration leaves for the next (keys shifted
/// `ko -> ko - 1`), iterated until that carried state is stable, so every barrier a later
/// iteration needs is placed where it needs it. The alternative — a barrier at the end of
/// the body, so that only the copies in flight carry over — is taken when it needs no more
/// barriers per iteration.
fn serial_loop(mut f: For, span: Span, state: &mut State, cx: &mut Cx, out: &mut Vec<Stmt>) {
    let acc = cx.scalar_touches(&[&f.start, &f.stop]);
    cx.order(state, &acc, span, out);
    cx.require_uniform(&f.start, "loop bound", &f.body);
    cx.require_uniform(&f.stop, "loop bound", &f.body);
    let entry = state.clone();
    let plan = loop_plan(Some(&f.var.name), &f.body, &entry, cx, false);
    let mut start = entry.clone();
    start.union(&plan.carried);
    f.body = walk(std::mem::take(&mut f.body), &mut start, cx);
    if plan.end_barrier {
        f.body.push(Stmt::new(StmtKind::Barrier, span));
        start.pending = Touches::default();
    }
    *state = sync::after_loop(start, &entry, Some(&f.var.name), &f.body);
    out.push(Stmt::new(StmtKind::For(f), span));
}

/// Where a loop's barriers go (the engine's rule, `sync::plan_loop`): the cheaper of a
/// barrier at the end of the body and the ones inside it, the end on a tie (or the end
/// barrier when `force_end`, if barriers are placed at all). `var`: the loop variable of a
/// `for` (`None` for a `while`, whose keys mention only values that stay the same across
/// iterations).
fn loop_plan(
    var: Option<&str>,
    body: &[Stmt],
    entry: &State,
    cx: &Cx,
    force_end: bool,
) -> sync::LoopPlan {
    let policy = LoopPolicy {
        place: cx.insert_barriers,
        may_hoist: false,
        force_end,
        ties_to_end: true,
    };
    sync::plan_loop(var, body, entry, policy, &mut |body, trial| {
        walk(body, trial, &mut cx.dry())
    })
}

/// A `while` loop of scalar code: as a serial loop, with no loop variable. Its condition is
/// evaluated before every iteration: it must be block-uniform when SIMT regions are under
/// it (barriers are reached by every thread), and when it reads memory that the body's
/// regions may write, the body ends with a barrier so that the next test sees the writes.
fn while_loop(
    cond: Expr,
    body: Vec<Stmt>,
    span: Span,
    state: &mut State,
    cx: &mut Cx,
    out: &mut Vec<Stmt>,
) {
    let acc = cx.scalar_touches(&[&cond]);
    cx.order(state, &acc, span, out);
    cx.require_uniform(&cond, "`while` condition", &body);
    let entry = state.clone();
    let reads_memory = !acc.reads.is_empty() && contains_thread_region(&body);
    let plan = loop_plan(None, &body, &entry, cx, reads_memory);
    let mut start = entry.clone();
    start.union(&plan.carried);
    let mut body = walk(body, &mut start, cx);
    if plan.end_barrier {
        body.push(Stmt::new(StmtKind::Barrier, span));
        start.pending = Touches::default();
    }
    *state = sync::after_loop(start, &entry, None, &body);
    out.push(Stmt::new(StmtKind::While { cond, body }, span));
}

/// Appends region `f`'s body, renamed to the kernel's thread variable, after a barrier when
/// needed.
fn region(f: For, span: Span, state: &mut State, cx: &mut Cx, out: &mut Vec<Stmt>) {
    if !cx.block.is_flat() {
        return nest_region(f, span, state, cx, out);
    }
    let (Some(start), Some(stop)) = (const_int(&f.start), const_int(&f.stop)) else {
        cx.error(Diagnostic::error(
            span,
            "a SIMT region needs constant thread bounds",
        ));
        return;
    };
    let extent = stop - start;
    if f.kind != ForKind::ThreadBinding(ThreadTag::ThreadX) || extent > cx.threads {
        cx.error(Diagnostic::error(
            span,
            format!(
                "this SIMT region does not fit the block's {} threads along threadIdx.x",
                cx.threads
            ),
        ));
        return;
    }
    let mut renames = HashMap::new();
    renames.insert(f.var.name.clone(), (cx.tx.clone(), start));
    let body = enter_region(f.body, &f.var.name, &renames, span, state, cx, out);
    if extent < cx.threads {
        let cond = Expr::binary(BinOp::Lt, Expr::var(cx.tx.clone()), Expr::int(extent), span);
        out.push(Stmt::new(
            StmtKind::If {
                cond,
                then_body: body,
                else_body: Vec::new(),
            },
            span,
        ));
    } else {
        out.extend(body);
    }
}

/// A region of a multi-dimensional block: a thread nest over the whole block (anything
/// else is an error). Its body joins the merged nest, its linear index and axis variables
/// renamed to the kernel's.
fn nest_region(f: For, span: Span, state: &mut State, cx: &mut Cx, out: &mut Vec<Stmt>) {
    let Some(nest) = cx.block.open(&f) else {
        let d = not_a_nest(span, cx.block);
        cx.error(d);
        return;
    };
    let mut renames = HashMap::new();
    renames.insert(nest.index.name.clone(), (cx.tx.clone(), 0));
    for (a, to) in nest.axes.iter().zip(cx.axes) {
        renames.insert(a.name.clone(), (to.clone(), 0));
    }
    let index = nest.index.name.clone();
    let body = nest.body.to_vec();
    let body = enter_region(body, &index, &renames, span, state, cx, out);
    out.extend(body);
}

/// What a region of a multi-dimensional block must be, to be merged.
fn not_a_nest(span: Span, block: &Block) -> Diagnostic {
    Diagnostic::error(
        span,
        format!(
            "this SIMT region is not a thread nest over the block's {} threads",
            block.shape_text()
        ),
    )
    .with_note(
        "a region of a multi-dimensional block binds threadIdx.x, .y (and .z) over their whole \
         extents, outermost first, and starts by defining the linear thread index \
         `t = tx + ty * X (+ tz * X * Y)`; thread-binding merges such regions only",
    )
}

/// The body of a region over thread variable `var` ready to join the merged loop: a
/// barrier before it when its accesses conflict with what is pending, its thread variables
/// renamed (`renames`: old name to the kernel's, plus the region's start).
fn enter_region(
    mut body: Vec<Stmt>,
    var: &str,
    renames: &HashMap<String, (String, i64)>,
    span: Span,
    state: &mut State,
    cx: &mut Cx,
    out: &mut Vec<Stmt>,
) -> Vec<Stmt> {
    let mut local = sync::bound_vars(&body);
    local.insert(var.to_string());
    local.extend(renames.keys().cloned());
    let (mut acc, in_flight) = cx.touches(&body, &local);
    let mut waits = false;
    for_each_stmt(&body, &mut |s| {
        waits |= matches!(s.kind, StmtKind::Intrinsic(Intrinsic::WaitGroup { .. }))
    });
    if waits {
        acc.union(&state.in_flight.clone());
    }
    cx.order(state, &acc, span, out);
    state.in_flight.union(&in_flight);
    map_body_exprs(&mut body, &mut |e| match &e.kind {
        ExprKind::Var(n) => match renames.get(n) {
            Some((to, start)) => {
                let v = Expr::new(ExprKind::Var(to.clone()), e.span);
                if *start == 0 {
                    v
                } else {
                    Expr::binary(BinOp::Add, v, Expr::int(*start), e.span)
                }
            }
            None => e,
        },
        _ => e,
    });
    body
}
