//! `thread-sync`: TileLang's automatic barriers (its `ThreadSync` pass) in per-thread code
//! written by the user — a kernel body that is a nest of `T.thread_binding` loops over the
//! whole block, as `tx = T.get_thread_binding(0)` makes it, or each thread region of a
//! tile-level kernel (docs/ir.md, "Thread regions"; entering and leaving one are barriers
//! already, so each is synchronized on its own). Every thread runs that code; where
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
use crate::analysis::sync::{self, push_new, LoopPolicy, State, Touch, Touches};
use crate::analysis::uniform::private_buffers;
use crate::context::PassContext;
use crate::pass::Pass;
use std::collections::{HashMap, HashSet};
use tlc_ir::affine::constant_difference;
use tlc_ir::verifier::const_int;
use tlc_ir::visit::{child_bodies_mut, for_each_stmt, for_each_subexpr, map_expr, stmt_exprs};
use tlc_ir::{
    BinOp, BufferDecl, Diagnostic, Expr, ExprKind, For, ForKind, Intrinsic, Kernel, PrimFunc,
    Scope, Span, Stmt, StmtKind, ThreadTag,
};

pub struct ThreadSync;

impl Pass for ThreadSync {
    fn name(&self) -> &'static str {
        "thread-sync"
    }

    fn description(&self) -> &'static str {
        "T.sync_threads() where per-thread code shares memory across threads (TileLang's ThreadSync)"
    }

    /// Passes its input on when the context says the front end placed the barriers already
    /// (`PassContext::barriers_placed`: the driver's road), so they are computed once.
    fn run(&self, func: PrimFunc, cx: &PassContext) -> Result<PrimFunc, Vec<Diagnostic>> {
        match cx.barriers_placed() {
            true => Ok(func),
            false => thread_sync(func),
        }
    }
}

/// The pass, for any target (the front end applies it too: the barriers are part of what
/// per-thread code means, so `check`, `run --interp` and `compile` see the same program).
pub fn thread_sync(mut func: PrimFunc) -> Result<PrimFunc, Vec<Diagnostic>> {
    {
        let mut errors = Vec::new();
        let params = func.params.clone();
        for_each_kernel(&mut func.body, &mut |k, _| {
            sync_kernel(k, &params, &mut errors)
        });
        if errors.is_empty() {
            Ok(func)
        } else {
            Err(errors)
        }
    }
}

/// The thread nest at the top of a kernel body statement: its variables with their extents
/// (outermost first) and its innermost body.
/// A thread nest's variables with their extents, outermost first.
type NestVars = Vec<(String, i64)>;

fn open_nest(stmt: &mut Stmt) -> Option<(NestVars, &mut Vec<Stmt>)> {
    let StmtKind::For(f) = &mut stmt.kind else {
        return None;
    };
    thread_axis(&f.kind)?;
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

/// Whether `body` synchronizes itself: a barrier or an intrinsic anywhere in it — other than
/// a warp shuffle, which exchanges registers and orders no memory access (Hadamard's
/// butterflies shuffle between exchanges through shared memory that need barriers), an
/// atomic add returning its old value (an atomic add, which `touches` sees as one), and the
/// random-number intrinsics (a thread's own registers only).
fn synchronizes_itself(body: &[Stmt]) -> bool {
    let mut found = false;
    for_each_stmt(body, &mut |s| {
        found |= match &s.kind {
            StmtKind::Barrier => true,
            StmtKind::Intrinsic(i) => {
                !(i.is_register_exchange()
                    || matches!(
                        i,
                        Intrinsic::AtomicAddRet { .. }
                            | Intrinsic::PhiloxInit { .. }
                            | Intrinsic::PhiloxRand { .. }
                            | Intrinsic::PhiloxUniform { .. }
                    ))
            }
            _ => false,
        };
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
    let shapes: HashMap<String, Vec<Option<i64>>> = params
        .iter()
        .chain(k.allocs.iter().filter(|a| a.scope == Scope::Shared))
        .map(|b| (b.name.name.clone(), b.shape.iter().map(const_int).collect()))
        .collect();
    let private = private_buffers(k);
    let shared = Shared {
        block: &block,
        threads,
        tracked: &tracked,
        shapes: &shapes,
        private: &private,
    };
    sync_regions(&mut k.body, &shared, errors);
}

/// What every thread nest of one kernel shares.
struct Shared<'a> {
    block: &'a [i64],
    threads: i64,
    tracked: &'a HashSet<String>,
    shapes: &'a HashMap<String, Vec<Option<i64>>>,
    private: &'a HashSet<String>,
}

/// Places the barriers of every thread nest in `body`: the kernel body's own nest, or the
/// thread regions of a tile-level kernel (docs/ir.md, "Thread regions"), each on its own —
/// the end of a region is a barrier already.
fn sync_regions(body: &mut [Stmt], sh: &Shared, errors: &mut Vec<Diagnostic>) {
    let (block, threads) = (sh.block, sh.threads);
    for stmt in body {
        if !is_nest(stmt) {
            for child in child_bodies_mut(stmt) {
                sync_regions(child, sh, errors);
            }
            continue;
        }
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
            tracked: sh.tracked,
            private: sh.private,
            divergent: HashSet::new(),
            bound: HashSet::new(),
            ranges: HashMap::new(),
            lets: HashMap::new(),
            shapes: sh.shapes,
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
    /// Variables bound so far in the per-thread code (loop variables, lets).
    bound: HashSet<String>,
    /// The enclosing loops' variables over constant `[0, n)`, with `n`.
    ranges: HashMap<String, i64>,
    /// The per-thread code's lets in scope, with their values.
    lets: HashMap<String, Expr>,
    /// The tracked buffers' constant shapes (`None`: a symbolic extent).
    shapes: &'a HashMap<String, Vec<Option<i64>>>,
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
            ranges: self.ranges.clone(),
            lets: self.lets.clone(),
            shapes: self.shapes,
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

    /// `e`'s coefficient on variable `v`: `e(v + 1) - e(v)` when that is a constant.
    fn coefficient(e: &Expr, v: &str) -> Option<i64> {
        let next = map_expr(e, &mut |x| match &x.kind {
            ExprKind::Var(n) if n == v => Expr::binary(BinOp::Add, x.clone(), Expr::int(1), x.span),
            _ => x,
        });
        constant_difference(&next, e)
    }

    /// `e` with the per-thread code's lets (and `lets`, those of the unit) substituted.
    fn expand(&self, e: &Expr, lets: &HashMap<String, Expr>) -> Expr {
        let mut e = e.clone();
        for _ in 0..8 {
            let mut changed = false;
            e = map_expr(&e, &mut |x| match &x.kind {
                ExprKind::Var(n) => match lets.get(n).or_else(|| self.lets.get(n)) {
                    Some(v) => {
                        changed = true;
                        v.clone()
                    }
                    None => x,
                },
                _ => x,
            });
            if !changed {
                break;
            }
        }
        e
    }

    /// The owner map of an access (`Touch::owner`): a component of its index that is an
    /// injective function of (thread, iteration) — one index, a pair `(e // c, e % c)` (an
    /// injective function of `e`), or the row-major flattening of every index — affine in
    /// the thread variables and in the loop variables of the code (each over a constant
    /// `[0, n)`: `ranges`, with those of the unit), with coefficients that keep them apart
    /// (sorted by size, each larger than what the smaller ones add up to), the thread
    /// variables with nonzero coefficients, the rest fixed for the kernel. Its text names
    /// the component, the thread coefficients, the loop (coefficient, extent) pairs and the
    /// rest: equal texts are the same map.
    fn owner(
        &self,
        buffer: &str,
        indices: &[Expr],
        lets: &HashMap<String, Expr>,
        ranges: &HashMap<String, i64>,
        local: &HashSet<String>,
    ) -> Option<String> {
        let idx: Vec<Expr> = indices.iter().map(|e| self.expand(e, lets)).collect();
        let mut candidates: Vec<(String, Expr)> = Vec::new();
        for (d, e) in idx.iter().enumerate() {
            candidates.push((format!("dim{d}"), e.clone()));
        }
        for (d, pair) in idx.windows(2).enumerate() {
            let (Some((x, div)), Some((y, rem))) = (
                self.offset_term(&pair[0], local),
                self.offset_term(&pair[1], local),
            ) else {
                continue;
            };
            if let (
                ExprKind::Binary(BinOp::FloorDiv, a, c1),
                ExprKind::Binary(BinOp::FloorMod, b, c2),
            ) = (&div.kind, &rem.kind)
            {
                if c1.as_int().is_some_and(|c| c > 0)
                    && c1.as_int() == c2.as_int()
                    && constant_difference(a, b) == Some(0)
                {
                    let c = c1.as_int().unwrap_or(0);
                    candidates.push((format!("pair{d}/{c}+({x}, {y})"), (**a).clone()));
                }
            }
        }
        if let Some(shape) = self.shapes.get(buffer) {
            let mut flat: Option<Expr> = None;
            let mut ok = shape.len() == idx.len();
            for (e, extent) in idx.iter().zip(shape) {
                let Some(extent) = extent else {
                    ok = false;
                    break;
                };
                flat = Some(match flat {
                    None => e.clone(),
                    Some(f) => Expr::binary(
                        BinOp::Add,
                        Expr::binary(BinOp::Mul, f, Expr::int(*extent), e.span),
                        e.clone(),
                        e.span,
                    ),
                });
            }
            if let (true, Some(f)) = (ok && idx.len() > 1, flat) {
                candidates.push(("flat".to_string(), f));
            }
        }
        candidates.into_iter().find_map(|(form, e)| {
            self.injective(&e, ranges, local)
                .map(|m| format!("{buffer}:{form}:{m}"))
        })
    }

    /// `e` as `fixed + term`: the one additive term that mentions a variable of the code,
    /// and the sum of the others (fixed for the kernel), printed.
    fn offset_term(&self, e: &Expr, local: &HashSet<String>) -> Option<(String, Expr)> {
        let mut terms = Vec::new();
        fn flatten<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>) {
            match &e.kind {
                ExprKind::Binary(BinOp::Add, a, b) => {
                    flatten(a, out);
                    flatten(b, out);
                }
                _ => out.push(e),
            }
        }
        flatten(e, &mut terms);
        let varying = |t: &Expr| {
            let mut v = false;
            for_each_subexpr(t, &mut |x| {
                if let ExprKind::Var(n) = &x.kind {
                    v |= self.is_thread_var(n)
                        || self.bound.contains(n)
                        || local.contains(n)
                        || self.divergent.contains(n);
                }
            });
            v
        };
        let (vary, fixed): (Vec<&Expr>, Vec<&Expr>) = terms.into_iter().partition(|t| varying(t));
        let [term] = vary.as_slice() else {
            return None;
        };
        let fixed: Vec<String> = fixed.iter().map(|t| t.to_string()).collect();
        Some((fixed.join(" + "), (*term).clone()))
    }

    /// The canonical text of `e` as an injective affine map of (thread, iteration), if it is
    /// one (see [`Self::owner`]).
    fn injective(
        &self,
        e: &Expr,
        ranges: &HashMap<String, i64>,
        local: &HashSet<String>,
    ) -> Option<String> {
        let mut loads = false;
        let mut vars = Vec::new();
        for_each_subexpr(e, &mut |x| match &x.kind {
            ExprKind::Load { .. } => loads = true,
            ExprKind::Var(v) if !vars.contains(v) => vars.push(v.clone()),
            _ => {}
        });
        if loads {
            return None;
        }
        // (coefficient, extent, is a thread axis) per variable of the code.
        let mut terms: Vec<(u64, u64, bool)> = Vec::new();
        let mut threads = Vec::new();
        for (v, extent) in &self.axes {
            let c = Self::coefficient(e, v)?;
            if *extent > 1 && c == 0 {
                return None;
            }
            threads.push(c);
            terms.push((c.unsigned_abs(), *extent as u64, true));
        }
        let mut loops = Vec::new();
        for v in &vars {
            if self.is_thread_var(v) {
                continue;
            }
            if self.divergent.contains(v) {
                return None;
            }
            let extent = match ranges.get(v).or_else(|| self.ranges.get(v)) {
                Some(n) => *n,
                None if self.bound.contains(v) || local.contains(v) => return None,
                // Fixed for the kernel (a block variable, a dim).
                None => continue,
            };
            let c = Self::coefficient(e, v)?;
            loops.push((c, extent));
            terms.push((c.unsigned_abs(), extent as u64, false));
        }
        terms.sort();
        let mut reach: u64 = 0;
        for (c, extent, _) in &terms {
            if *extent <= 1 {
                continue;
            }
            if *c <= reach {
                return None;
            }
            reach = c.checked_mul(extent - 1)?.checked_add(reach)?;
        }
        let zeroed = map_expr(e, &mut |x| match &x.kind {
            ExprKind::Var(n)
                if self.is_thread_var(n)
                    || ranges.contains_key(n)
                    || self.ranges.contains_key(n) =>
            {
                Expr::int(0)
            }
            _ => x,
        });
        loops.sort();
        Some(format!("{threads:?}:{loops:?}:{zeroed}"))
    }

    fn touch(
        &self,
        buffer: &str,
        indices: &[Expr],
        local: &HashSet<String>,
        lets: &HashMap<String, Expr>,
        ranges: &HashMap<String, i64>,
    ) -> Option<Touch> {
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
        let owner = self.owner(buffer, indices, lets, ranges, local);
        Some(Touch {
            buffer: buffer.to_string(),
            key,
            family: None,
            owner,
        })
    }

    fn loads(&self, e: &Expr, local: &HashSet<String>, acc: &mut Touches) {
        self.loads_in(e, local, &HashMap::new(), &HashMap::new(), acc);
    }

    fn loads_in(
        &self,
        e: &Expr,
        local: &HashSet<String>,
        lets: &HashMap<String, Expr>,
        ranges: &HashMap<String, i64>,
        acc: &mut Touches,
    ) {
        for_each_subexpr(e, &mut |x| {
            if let ExprKind::Load { buffer, indices } = &x.kind {
                if let Some(t) = self.touch(buffer, indices, local, lets, ranges) {
                    push_new(&mut acc.reads, t);
                }
            }
        });
    }

    /// The tracked accesses of `stmts` (nested ones included); `local`: variables bound
    /// inside them.
    fn touches(&self, stmts: &[Stmt]) -> Touches {
        let mut local = HashSet::new();
        let mut lets = HashMap::new();
        let mut ranges = HashMap::new();
        for_each_stmt(stmts, &mut |s| match &s.kind {
            StmtKind::Let { var, value, .. } => {
                local.insert(var.name.clone());
                lets.insert(var.name.clone(), value.clone());
            }
            StmtKind::For(f) => {
                local.insert(f.var.name.clone());
                if let (Some(0), Some(n)) = (const_int(&f.start), const_int(&f.stop)) {
                    ranges.insert(f.var.name.clone(), n);
                }
            }
            _ => {}
        });
        let mut acc = Touches::default();
        for_each_stmt(stmts, &mut |s| {
            for e in stmt_exprs(s) {
                self.loads_in(e, &local, &lets, &ranges, &mut acc);
            }
            match &s.kind {
                StmtKind::Store {
                    buffer, indices, ..
                } => {
                    if let Some(t) = self.touch(&buffer.name, indices, &local, &lets, &ranges) {
                        push_new(&mut acc.writes, t);
                    }
                }
                // A read-modify-write.
                StmtKind::AtomicAdd {
                    buffer, indices, ..
                } => {
                    if let Some(t) = self.touch(&buffer.name, indices, &local, &lets, &ranges) {
                        push_new(&mut acc.writes, t.clone());
                        push_new(&mut acc.reads, t);
                    }
                }
                StmtKind::Intrinsic(Intrinsic::AtomicAddRet { dst, .. }) => {
                    let (buffer, indices) = (&dst.buffer.name, &dst.indices);
                    if let Some(t) = self.touch(buffer, indices, &local, &lets, &ranges) {
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
            // A grid barrier is a block barrier too (its code starts and ends with one).
            StmtKind::GridSync => {
                state.pending = Touches::default();
                out.push(Stmt::new(StmtKind::GridSync, span));
            }
            // A `T.Pipelined` loop in per-thread code has no tile copies to run ahead: its
            // iterations run in order, as a serial loop's (DeepSeek-V3.2's `clean_logits_`
            // walks a row in `T.Pipelined` chunks).
            StmtKind::For(f)
                if matches!(
                    f.kind,
                    ForKind::Serial | ForKind::Unroll | ForKind::Pipelined { .. }
                ) && !cx.thread_dependent(&f.start)
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
                let mut acc = Touches::default();
                cx.loads(&value, &HashSet::new(), &mut acc);
                cx.order(state, &acc, span, &mut out);
                if cx.thread_dependent(&value) {
                    cx.divergent.insert(var.name.clone());
                }
                cx.bound.insert(var.name.clone());
                cx.lets.insert(var.name.clone(), value.clone());
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
    if let (Some(0), Some(n)) = (const_int(&f.start), const_int(&f.stop)) {
        cx.ranges.insert(f.var.name.clone(), n);
    }
    // The fewest barriers per iteration, then before the loop; ties keep them inside.
    let policy = LoopPolicy {
        place: true,
        may_hoist: true,
        force_end: false,
        ties_to_end: false,
    };
    let plan = {
        let shared: &Cx = cx;
        sync::plan_loop(
            Some(&f.var.name),
            &f.body,
            state,
            policy,
            &mut |body, trial| walk(body, trial, &mut shared.dry()),
        )
    };
    if plan.hoist {
        out.push(Stmt::new(StmtKind::Barrier, span));
        state.pending = Touches::default();
    }
    let entry = state.clone();
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
