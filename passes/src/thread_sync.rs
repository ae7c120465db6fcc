//! `thread-sync`: TileLang's automatic barriers (its `ThreadSync` pass) in per-thread code
//! written by the user — a kernel body that is a nest of `T.thread_binding` loops over the
//! whole block, as `tx = T.get_thread_binding(0)` makes it. Every thread runs that code; where
//! one thread's shared- or global-memory access may meet another thread's earlier one
//! (read after write, write after read, write after write) with no barrier in between, a
//! `T.sync_threads()` is placed at a block-uniform point before the later access, loop-carried
//! hazards included.
//!
//! - The dataflow is `analysis::sync`'s (the one `thread-binding` uses between SIMT regions):
//!   accesses since the last barrier, compared by buffer and stage key, loops iterated to a
//!   fixpoint with keys shifted one iteration back ([`sync::settle`]). Statements of the
//!   per-thread code play the part of regions: a store, an atomic add, a loop or `if` whose
//!   control depends on the thread, a `T.vectorized` loop, are one unit each; a serial loop
//!   or `if` whose control is block-uniform is walked into, so barriers land inside it.
//! - Same-owner accesses do not conflict: when some index of both accesses is the same
//!   expression `e` of the thread variables, injective over the block and fixed for the
//!   kernel (`B_shared[tn, k]` written and read by thread `tn`), each thread touches only its
//!   own elements (`Touch::owner`).
//! - A serial loop gets its barriers where the fewest run per iteration: inside the body, at
//!   its end, or once before the loop (when the conflict comes from the code before it).
//! - A barrier needed inside a unit whose control depends on the thread (or inside a
//!   `T.vectorized` loop) cannot be placed: a located error, never a deadlock.
//! - Code that synchronizes itself (a `T.sync_threads()`, or an intrinsic: mbarriers, async
//!   copies) is taken as written, as is a nest that does not cover the block: tlc trusts
//!   explicit synchronization; the interpreter reports any race left.
//! - The pass is idempotent (the barriers it placed make the code synchronize itself).

use crate::analysis::int::mentions_any;
use crate::analysis::kernels::for_each_kernel;
use crate::analysis::sync::{self, push_new, State, Touch, Touches};
use crate::context::PassContext;
use crate::pass::Pass;
use std::collections::HashSet;
use tlc_ir::affine::constant_difference;
use tlc_ir::verifier::const_int;
use tlc_ir::visit::{for_each_stmt, for_each_subexpr, map_expr, stmt_exprs};
use tlc_ir::{
    BinOp, BufferDecl, Diagnostic, Expr, ExprKind, For, ForKind, Kernel, PrimFunc, Scope, Span,
    Stmt, StmtKind, ThreadTag,
};

pub struct ThreadSync;

impl Pass for ThreadSync {
    fn name(&self) -> &'static str {
        "thread-sync"
    }

    fn description(&self) -> &'static str {
        "T.sync_threads() where per-thread code shares memory across threads (TileLang's ThreadSync)"
    }

    fn run(&self, func: PrimFunc, _cx: &PassContext) -> Result<PrimFunc, Vec<Diagnostic>> {
        thread_sync(func)
    }
}

/// The pass, for any target (the front end applies it too: the barriers are part of what
/// per-thread code means, so `check`, `run --interp` and `compile` see the same program).
pub fn thread_sync(mut func: PrimFunc) -> Result<PrimFunc, Vec<Diagnostic>> {
    {
        let mut errors = Vec::new();
        let params = func.params.clone();
        for_each_kernel(&mut func.body, &mut |k, _| sync_kernel(k, &params, &mut errors));
        if errors.is_empty() {
            Ok(func)
        } else {
            Err(errors)
        }
    }
}

/// The thread nest at the top of a kernel body statement: its variables with their extents
/// (outermost first) and its innermost body.
fn open_nest(stmt: &mut Stmt) -> Option<(Vec<(String, i64)>, &mut Vec<Stmt>)> {
    let StmtKind::For(f) = &mut stmt.kind else {
        return None;
    };
    if thread_axis(&f.kind).is_none() {
        return None;
    }
    let extent = const_int(&f.stop)? - const_int(&f.start)?;
    if const_int(&f.start)? != 0 {
        return None;
    }
    let var = f.var.name.clone();
    let mut vars = vec![(var, extent)];
    let body = &mut f.body;
    if body.len() == 1 && is_nest(&body[0]) {
        let (inner, body) = open_nest(&mut body[0])?;
        vars.extend(inner);
        return Some((vars, body));
    }
    Some((vars, body))
}

fn is_nest(stmt: &Stmt) -> bool {
    matches!(&stmt.kind, StmtKind::For(f) if thread_axis(&f.kind).is_some())
}

/// The axis of a `threadIdx.*` binding loop (0: x, 1: y, 2: z).
fn thread_axis(kind: &ForKind) -> Option<usize> {
    match kind {
        ForKind::ThreadBinding(ThreadTag::ThreadX) => Some(0),
        ForKind::ThreadBinding(ThreadTag::ThreadY) => Some(1),
        ForKind::ThreadBinding(ThreadTag::ThreadZ) => Some(2),
        _ => None,
    }
}

/// Whether `body` synchronizes itself: a barrier or an intrinsic anywhere in it.
fn synchronizes_itself(body: &[Stmt]) -> bool {
    let mut found = false;
    for_each_stmt(body, &mut |s| {
        found |= matches!(s.kind, StmtKind::Barrier | StmtKind::Intrinsic(_));
    });
    found
}

fn sync_kernel(k: &mut Kernel, params: &[BufferDecl], errors: &mut Vec<Diagnostic>) {
    let block: Option<Vec<i64>> = k.threads.iter().map(const_int).collect();
    let Some(block) = block else { return };
    let threads: i64 = block.iter().product();
    let tracked: HashSet<String> = params
        .iter()
        .chain(k.allocs.iter().filter(|a| a.scope == Scope::Shared))
        .map(|b| b.name.name.clone())
        .collect();
    let private: HashSet<String> = k
        .allocs
        .iter()
        .filter(|a| matches!(a.scope, Scope::Local | Scope::Fragment))
        .map(|a| a.name.name.clone())
        .collect();
    for stmt in &mut k.body {
        let span = stmt.span;
        let tags = nest_tags(stmt);
        let Some((vars, body)) = open_nest(stmt) else {
            continue;
        };
        let covers = vars.iter().map(|v| v.1).product::<i64>() == threads
            && tags.len() == vars.len()
            && tags
                .iter()
                .zip(&vars)
                .all(|(axis, v)| block.get(*axis).copied().unwrap_or(1) == v.1);
        if synchronizes_itself(body) || !covers {
            continue;
        }
        // Axis order: x first (the linear thread index is x + X * (y + Y * z)).
        let mut axes: Vec<(String, i64, usize)> = vars
            .iter()
            .zip(&tags)
            .map(|((v, e), a)| (v.clone(), *e, *a))
            .collect();
        axes.sort_by_key(|a| a.2);
        let mut cx = Cx {
            axes: axes.iter().map(|a| (a.0.clone(), a.1)).collect(),
            tracked: &tracked,
            private: &private,
            divergent: HashSet::new(),
            bound: HashSet::new(),
            errors: Vec::new(),
            at: span,
        };
        let old = std::mem::take(body);
        *body = walk(old, &mut State::default(), &mut cx);
        errors.append(&mut cx.errors);
    }
}

/// The axes (0: x, 1: y, 2: z) of the binding loops of the nest at `stmt`, outermost first.
fn nest_tags(stmt: &Stmt) -> Vec<usize> {
    let mut out = Vec::new();
    let mut at = stmt;
    while let StmtKind::For(f) = &at.kind {
        let Some(axis) = thread_axis(&f.kind) else {
            break;
        };
        out.push(axis);
        match f.body.as_slice() {
            [only] if is_nest(only) => at = only,
            _ => break,
        }
    }
    out
}

struct Cx<'a> {
    /// The thread variables with their extents, x first.
    axes: Vec<(String, i64)>,
    /// Buffers whose accesses barriers order (shared allocations and parameters).
    tracked: &'a HashSet<String>,
    /// Per-thread buffers (local, fragment): reading one makes a value thread-dependent.
    private: &'a HashSet<String>,
    /// Scalar variables whose value may differ between threads.
    divergent: HashSet<String>,
    /// Variables bound so far in the per-thread code (loop variables, lets): an owner
    /// expression must mention none (it must be fixed for the kernel).
    bound: HashSet<String>,
    errors: Vec<Diagnostic>,
    /// The innermost located statement (for code an earlier pass made).
    at: Span,
}

impl Cx<'_> {
    fn dry(&self) -> Cx<'_> {
        Cx {
            axes: self.axes.clone(),
            tracked: self.tracked,
            private: self.private,
            divergent: self.divergent.clone(),
            bound: self.bound.clone(),
            errors: Vec::new(),
            at: self.at,
        }
    }

    fn is_thread_var(&self, v: &str) -> bool {
        self.axes.iter().any(|(a, _)| a == v)
    }

    fn thread_dependent(&self, e: &Expr) -> bool {
        let mut dep = false;
        for_each_subexpr(e, &mut |s| match &s.kind {
            ExprKind::Var(v) => dep |= self.is_thread_var(v) || self.divergent.contains(v),
            ExprKind::Load { buffer, .. } => dep |= self.private.contains(buffer),
            _ => {}
        });
        dep
    }

    /// `e`'s coefficient on thread variable `v`: `e(v + 1) - e(v)` when that is a constant.
    fn coefficient(e: &Expr, v: &str) -> Option<i64> {
        let next = map_expr(e, &mut |x| match &x.kind {
            ExprKind::Var(n) if n == v => {
                Expr::binary(BinOp::Add, x.clone(), Expr::int(1), x.span)
            }
            _ => x,
        });
        constant_difference(&next, e)
    }

    /// Whether `e` is an owner expression: fixed for the kernel (no variable bound in the
    /// per-thread code, no load) and injective over the block's threads — affine in the
    /// thread variables with coefficients that keep the axes apart (sorted by size, each at
    /// least one more than what the smaller ones can add up to).
    fn is_owner(&self, e: &Expr) -> bool {
        let mut fixed = true;
        for_each_subexpr(e, &mut |x| match &x.kind {
            ExprKind::Var(v) => fixed &= !self.bound.contains(v) && !self.divergent.contains(v),
            ExprKind::Load { .. } => fixed = false,
            _ => {}
        });
        if !fixed {
            return false;
        }
        let mut coeffs = Vec::new();
        for (v, extent) in &self.axes {
            if *extent == 1 {
                continue;
            }
            match Self::coefficient(e, v) {
                Some(c) if c != 0 => coeffs.push((c.unsigned_abs(), *extent as u64)),
                _ => return false,
            }
        }
        coeffs.sort();
        let mut reach: u64 = 0;
        for (c, extent) in coeffs {
            if c <= reach {
                return false;
            }
            reach = match c.checked_mul(extent - 1).and_then(|r| r.checked_add(reach)) {
                Some(r) => r,
                None => return false,
            };
        }
        true
    }

    fn touch(&self, buffer: &str, indices: &[Expr], local: &HashSet<String>) -> Option<Touch> {
        if !self.tracked.contains(buffer) {
            return None;
        }
        let key = indices
            .first()
            .filter(|k| {
                let mut loads = false;
                for_each_subexpr(k, &mut |x| loads |= matches!(x.kind, ExprKind::Load { .. }));
                !loads && !mentions_any(k, local) && !self.thread_dependent(k)
            })
            .cloned();
        let owner = indices
            .iter()
            .enumerate()
            .find(|(_, e)| !mentions_any(e, local) && self.is_owner(e))
            .map(|(d, e)| (d, e.clone()));
        Some(Touch {
            buffer: buffer.to_string(),
            key,
            family: None,
            owner,
        })
    }

    fn loads(&self, e: &Expr, local: &HashSet<String>, acc: &mut Touches) {
        for_each_subexpr(e, &mut |x| {
            if let ExprKind::Load { buffer, indices } = &x.kind {
                if let Some(t) = self.touch(buffer, indices, local) {
                    push_new(&mut acc.reads, t);
                }
            }
        });
    }

    /// The tracked accesses of `stmts` (nested ones included); `local`: variables bound
    /// inside them.
    fn touches(&self, stmts: &[Stmt]) -> Touches {
        let mut local = HashSet::new();
        for_each_stmt(stmts, &mut |s| match &s.kind {
            StmtKind::Let { var, .. } => {
                local.insert(var.name.clone());
            }
            StmtKind::For(f) => {
                local.insert(f.var.name.clone());
            }
            _ => {}
        });
        let mut acc = Touches::default();
        for_each_stmt(stmts, &mut |s| {
            for e in stmt_exprs(s) {
                self.loads(e, &local, &mut acc);
            }
            match &s.kind {
                StmtKind::Store {
                    buffer, indices, ..
                } => {
                    if let Some(t) = self.touch(&buffer.name, indices, &local) {
                        push_new(&mut acc.writes, t);
                    }
                }
                // A read-modify-write.
                StmtKind::AtomicAdd {
                    buffer, indices, ..
                } => {
                    if let Some(t) = self.touch(&buffer.name, indices, &local) {
                        push_new(&mut acc.writes, t.clone());
                        push_new(&mut acc.reads, t);
                    }
                }
                _ => {}
            }
        });
        acc
    }

    /// A barrier before code accessing `acc` when it conflicts with what is pending.
    fn order(&mut self, state: &mut State, acc: &Touches, span: Span, out: &mut Vec<Stmt>) {
        if state.pending.conflicts(acc) {
            out.push(Stmt::new(StmtKind::Barrier, span));
            state.pending = Touches::default();
        }
        state.pending.union(acc);
    }

    fn located(&self, span: Span) -> Span {
        if span.is_dummy() {
            self.at
        } else {
            span
        }
    }

    /// A unit whose control depends on the thread (or a vectorized loop): its body must
    /// need no barrier of its own (walked as if uniform, from nothing pending).
    fn no_barrier_inside(&mut self, body: &[Stmt], at: Span, what: &str) {
        let mut dry = self.dry();
        let walked = walk(body.to_vec(), &mut State::default(), &mut dry);
        let mut inner = None;
        for_each_stmt(&walked, &mut |s| {
            if inner.is_none() && s.kind == StmtKind::Barrier {
                inner = Some(s.span);
            }
        });
        let Some(inner) = inner else { return };
        let at = self.located(at);
        self.errors.push(
            Diagnostic::error(
                at,
                format!(
                    "{what}, but threads share memory inside it and would need a \
                     `T.sync_threads()` there"
                ),
            )
            .with_note_at(inner, "the access that needs the barrier")
            .with_note(
                "barriers must be reached by every thread of the block: move the shared \
                 accesses out of the thread-dependent code, or split it at a block-uniform point",
            ),
        );
    }
}

/// The variables `body` binds (lets and loop variables, nested ones included).
fn bound_vars(body: &[Stmt]) -> HashSet<String> {
    let mut out = HashSet::new();
    for_each_stmt(body, &mut |s| match &s.kind {
        StmtKind::Let { var, .. } => {
            out.insert(var.name.clone());
        }
        StmtKind::For(f) => {
            out.insert(f.var.name.clone());
        }
        _ => {}
    });
    out
}

fn walk(body: Vec<Stmt>, state: &mut State, cx: &mut Cx) -> Vec<Stmt> {
    let mut out = Vec::with_capacity(body.len());
    for stmt in body {
        let span = stmt.span;
        let outer = cx.at;
        cx.at = cx.located(span);
        match stmt.kind {
            StmtKind::Barrier => {
                state.pending = Touches::default();
                out.push(Stmt::new(StmtKind::Barrier, span));
            }
            StmtKind::For(f)
                if matches!(f.kind, ForKind::Serial | ForKind::Unroll)
                    && !cx.thread_dependent(&f.start)
                    && !cx.thread_dependent(&f.stop) =>
            {
                serial_loop(f, span, state, cx, &mut out)
            }
            StmtKind::If {
                cond,
                then_body,
                else_body,
            } if !cx.thread_dependent(&cond) => {
                let mut acc = Touches::default();
                cx.loads(&cond, &HashSet::new(), &mut acc);
                cx.order(state, &acc, span, &mut out);
                // A branch that would start with a barrier gets it before the `if` (the
                // condition is block-uniform), where it serves both branches.
                if !state.pending.is_empty() {
                    let starts_with_barrier = |body: &[Stmt], state: &State, cx: &Cx| {
                        let walked = walk(body.to_vec(), &mut state.clone(), &mut cx.dry());
                        matches!(walked.first(), Some(s) if s.kind == StmtKind::Barrier)
                    };
                    if starts_with_barrier(&then_body, state, cx)
                        || starts_with_barrier(&else_body, state, cx)
                    {
                        out.push(Stmt::new(StmtKind::Barrier, span));
                        state.pending = Touches::default();
                    }
                }
                let mut other = state.clone();
                let local: HashSet<String> = bound_vars(&then_body)
                    .into_iter()
                    .chain(bound_vars(&else_body))
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
                let mut acc = Touches::default();
                cx.loads(&value, &HashSet::new(), &mut acc);
                cx.order(state, &acc, span, &mut out);
                if cx.thread_dependent(&value) {
                    cx.divergent.insert(var.name.clone());
                }
                cx.bound.insert(var.name.clone());
                out.push(Stmt::new(StmtKind::Let { var, dtype, value }, span));
            }
            kind => {
                // One unit: a store, an atomic add, or control flow the threads may take
                // differently (its body must need no barrier).
                let stmt = Stmt::new(kind, span);
                match &stmt.kind {
                    StmtKind::If {
                        cond,
                        then_body,
                        else_body,
                    } => {
                        let what = "this condition depends on the thread";
                        cx.no_barrier_inside(then_body, cond.span, what);
                        cx.no_barrier_inside(else_body, cond.span, what);
                    }
                    StmtKind::For(f) => {
                        let what = if f.kind == ForKind::Vectorized {
                            "this `T.vectorized` loop is one vector access per thread"
                        } else {
                            "this loop's bounds depend on the thread"
                        };
                        let mut inner = cx.dry();
                        inner.bound.insert(f.var.name.clone());
                        if f.kind != ForKind::Vectorized {
                            inner.divergent.insert(f.var.name.clone());
                        }
                        let at = if f.kind == ForKind::Vectorized {
                            span
                        } else {
                            f.stop.span
                        };
                        inner.no_barrier_inside(&f.body, at, what);
                        cx.errors.append(&mut inner.errors);
                    }
                    _ => {}
                }
                let acc = cx.touches(std::slice::from_ref(&stmt));
                cx.order(state, &acc, span, &mut out);
                out.push(stmt);
            }
        }
        cx.at = outer;
    }
    out
}

/// A block-uniform serial loop: barriers where the fewest run per iteration — placed by the
/// walk inside the body, at the end of the body, or once before the loop when what the body
/// conflicts with comes from before it.
fn serial_loop(mut f: For, span: Span, state: &mut State, cx: &mut Cx, out: &mut Vec<Stmt>) {
    let mut acc = Touches::default();
    cx.loads(&f.start, &HashSet::new(), &mut acc);
    cx.loads(&f.stop, &HashSet::new(), &mut acc);
    cx.order(state, &acc, span, out);
    cx.bound.insert(f.var.name.clone());
    let hoists: &[bool] = if state.pending.is_empty() {
        &[false]
    } else {
        &[false, true]
    };
    // (barriers per iteration, barriers before the loop), the fewest first.
    let mut best: Option<((usize, usize), bool, bool)> = None;
    for &hoist in hoists {
        let mut entry = state.clone();
        if hoist {
            entry.pending = Touches::default();
        }
        for end in [false, true] {
            let carried = settle(&f, &entry, cx, end);
            let mut start = entry.clone();
            start.union(&carried);
            let walked = walk(f.body.clone(), &mut start, &mut cx.dry());
            let mut n = usize::from(end);
            for_each_stmt(&walked, &mut |s| n += usize::from(s.kind == StmtKind::Barrier));
            let cost = (n, usize::from(hoist));
            if best.is_none_or(|(c, _, _)| cost < c) {
                best = Some((cost, hoist, end));
            }
        }
    }
    let (_, hoist, end) = best.unwrap_or(((0, 0), false, false));
    if hoist {
        out.push(Stmt::new(StmtKind::Barrier, span));
        state.pending = Touches::default();
    }
    let entry = state.clone();
    let carried = settle(&f, &entry, cx, end);
    let mut start = entry.clone();
    start.union(&carried);
    f.body = walk(std::mem::take(&mut f.body), &mut start, cx);
    if end {
        f.body.push(Stmt::new(StmtKind::Barrier, span));
        start.pending = Touches::default();
    }
    // After the loop: the last iteration's state, or the entry one (no iteration).
    *state = start;
    state.union(&entry);
    let mut all = bound_vars(&f.body);
    all.insert(f.var.name.clone());
    state.widen(&all);
    out.push(Stmt::new(StmtKind::For(f), span));
}

fn settle(f: &For, entry: &State, cx: &Cx, end_barrier: bool) -> State {
    let inner = bound_vars(&f.body);
    sync::settle(&f.var.name, &inner, entry, end_barrier, &mut |trial| {
        walk(f.body.clone(), trial, &mut cx.dry());
    })
}
