//! `thread-binding`: merges the SIMT regions of each kernel (its `threadIdx.x` binding loops,
//! as `lower-tile-ops` leaves them) into ONE `for tx in T.thread_binding(T, thread=
//! "threadIdx.x")` loop around the whole kernel body, and inserts `T.sync_threads()` where the
//! regions communicate through memory.
//!
//! - Every region's variable becomes the kernel's one (the first region's name); a region
//!   narrower than the block runs under `if tx < extent:`.
//! - Scalar code between regions (lets, serial / pipelined loops, `if`s) is replicated per
//!   thread: it only reads block-uniform values, so every thread computes the same. A
//!   block-level store is done by thread 0 alone (`if tx == 0:`), so it does not race.
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
//!   the operand's run cannot leave its first-index slice.
//! - Loops: the body is walked from the state before the loop joined with the state one
//!   iteration leaves the next (keys shifted `ko -> ko - 1`; after two rounds keys over `ko`
//!   stand for all earlier iterations), until stable, so barriers land where a later
//!   iteration needs them; a barrier at the end of the body instead is used when that needs
//!   no more barriers per iteration. A branch of an `if` that would start with a barrier
//!   gets it before the `if`. A software-pipelined loop gets one barrier per iteration,
//!   after its wait.
//! - Barriers only land at block-uniform points: an `if` or loop around a region must not
//!   depend on the thread (an error otherwise).
//! - A kernel with no region is left alone.

use crate::context::PassContext;
use crate::pass::Pass;
use std::collections::{BTreeSet, HashMap, HashSet};
use tlc_ir::affine::constant_difference;
use tlc_ir::intrinsic::Effect;
use tlc_ir::verifier::const_int;
use tlc_ir::visit::{for_each_stmt, for_each_subexpr, map_body_exprs, map_expr, stmt_exprs};
use tlc_ir::{
    BinOp, BufferDecl, Diagnostic, ElemRef, Expr, ExprKind, For, ForKind, Intrinsic, Kernel,
    PrimFunc, Region, Scope, Span, Stmt, StmtKind, ThreadTag,
};

pub struct ThreadBinding;

impl Pass for ThreadBinding {
    fn name(&self) -> &'static str {
        "thread-binding"
    }

    fn description(&self) -> &'static str {
        "SIMT regions -> one threadIdx.x loop over the kernel body, with T.sync_threads() where regions share memory"
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
    for stmt in &mut func.body {
        let span = stmt.span;
        if let StmtKind::Kernel(k) = &mut stmt.kind {
            bind_kernel(k, span, &params, insert_barriers, &mut errors);
        }
    }
    if errors.is_empty() {
        Ok(func)
    } else {
        Err(errors)
    }
}

/// The buffers some code reads and writes, by name (nested statements included; intrinsics
/// count: `T.cp_async` writes its destination and reads its source, `T.ldmatrix` reads its
/// source, `T.mma_sync` reads and writes its accumulator).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Access {
    pub reads: BTreeSet<String>,
    pub writes: BTreeSet<String>,
}

impl Access {
    fn add_expr(&mut self, e: &Expr) {
        for_each_subexpr(e, &mut |s| {
            if let ExprKind::Load { buffer, .. } = &s.kind {
                self.reads.insert(buffer.clone());
            }
        });
    }

    fn add_region_read(&mut self, r: &Region) {
        self.reads.insert(r.buffer.name.clone());
    }

    /// The accesses `stmt` makes itself (nested statements excluded).
    fn add_stmt(&mut self, stmt: &Stmt) {
        for e in stmt_exprs(stmt) {
            self.add_expr(e);
        }
        match &stmt.kind {
            StmtKind::Store { buffer, .. } => {
                self.writes.insert(buffer.name.clone());
            }
            StmtKind::Copy { src, dst } => {
                self.add_region_read(src);
                self.writes.insert(dst.buffer.name.clone());
            }
            StmtKind::Fill { dst, .. } => {
                self.writes.insert(dst.buffer.name.clone());
            }
            StmtKind::Gemm(g) => {
                self.add_region_read(&g.a);
                self.add_region_read(&g.b);
                self.add_region_read(&g.c);
                self.writes.insert(g.c.buffer.name.clone());
            }
            StmtKind::Intrinsic(i) => {
                for a in i.accesses() {
                    let name = &a.operand.buffer.name;
                    if a.effect.reads() {
                        self.reads.insert(name.clone());
                    }
                    if a.effect.writes() {
                        self.writes.insert(name.clone());
                    }
                }
            }
            _ => {}
        }
    }

    /// Every access of `body`, nested statements included.
    pub fn of_body(body: &[Stmt]) -> Access {
        let mut acc = Access::default();
        for_each_stmt(body, &mut |s| acc.add_stmt(s));
        acc
    }
}

/// One access of a tracked buffer: the buffer, and its *stage key* — the first index, when
/// it is the same for every thread (`None`: anywhere in the buffer). Accesses whose keys
/// differ by a nonzero constant, or are `e1 % m` and `e2 % m` with `e1 - e2` a constant
/// that is not a multiple of `m`, touch different elements. A *family* over loop variable
/// `v` stands for the key in every earlier iteration too (`key` with `v -> v - j`, `j ≥ 0`):
/// what a loop without barriers leaves pending from all its past iterations.
#[derive(Clone, Debug, PartialEq)]
struct Touch {
    buffer: String,
    key: Option<Expr>,
    family: Option<String>,
}

impl Touch {
    fn overlaps(&self, other: &Touch) -> bool {
        if self.buffer != other.buffer {
            return false;
        }
        let (Some(a), Some(b)) = (&self.key, &other.key) else {
            return true;
        };
        match (&self.family, &other.family) {
            (None, None) => !disjoint_keys(a, b),
            (Some(v), None) => family_meets(a, v, b),
            (None, Some(v)) => family_meets(b, v, a),
            (Some(_), Some(_)) => true,
        }
    }

    /// Whether every element `other` may touch is one `self` touches.
    fn covers(&self, other: &Touch) -> bool {
        if self.buffer != other.buffer {
            return false;
        }
        let Some(a) = &self.key else { return true };
        let Some(b) = &other.key else { return false };
        match (&self.family, &other.family) {
            (None, None) => a == b,
            (Some(v), None) => member(a, v, b) == Some(true),
            (Some(v), Some(w)) => v == w && member(a, v, b) == Some(true),
            (None, Some(_)) => false,
        }
    }
}

fn disjoint_keys(a: &Expr, b: &Expr) -> bool {
    if let Some(d) = constant_difference(a, b) {
        return d != 0;
    }
    match (modulo(a), modulo(b)) {
        (Some((x, m)), Some((y, m2))) if m == m2 => {
            constant_difference(x, y).is_some_and(|d| d.rem_euclid(m) != 0)
        }
        _ => false,
    }
}

/// `(x, m)` for `x % m` with a constant `m > 0`.
fn modulo(e: &Expr) -> Option<(&Expr, i64)> {
    match &e.kind {
        ExprKind::Binary(BinOp::FloorMod, x, m) => m.as_int().filter(|m| *m > 0).map(|m| (&**x, m)),
        _ => None,
    }
}

fn substitute(e: &Expr, var: &str, by: i64) -> Expr {
    map_expr(e, &mut |x| match &x.kind {
        ExprKind::Var(n) if n == var => Expr::binary(BinOp::Add, x.clone(), Expr::int(by), x.span),
        _ => x,
    })
}

/// The constant `c` with `e(var + 1) - e(var) = c`, when there is one and it is not 0.
fn step(e: &Expr, var: &str) -> Option<i64> {
    constant_difference(&substitute(e, var, 1), e).filter(|c| *c != 0)
}

fn gcd(a: i64, b: i64) -> i64 {
    if b == 0 {
        a.abs()
    } else {
        gcd(b, a % b)
    }
}

/// Whether the family `base` over `v` takes the value of the point key `key` for some
/// iteration `j ≥ 0` back, when that can be decided: `base - key = d` and the step `c` of
/// `base` give `d - c·j = 0`; for `x % m` against `y % m`, `d - c·j ≡ 0 (mod m)`.
fn member(base: &Expr, v: &str, key: &Expr) -> Option<bool> {
    if let (Some(c), Some(d)) = (step(base, v), constant_difference(base, key)) {
        return Some(d % c == 0 && d / c >= 0);
    }
    match (modulo(base), modulo(key)) {
        (Some((x, m)), Some((y, m2))) if m == m2 => {
            let (c, d) = (step(x, v)?, constant_difference(x, y)?);
            Some(d.rem_euclid(gcd(c, m)) == 0)
        }
        _ => None,
    }
}

/// Whether the family `base` over `v` may meet the point key `key`.
fn family_meets(base: &Expr, v: &str, key: &Expr) -> bool {
    member(base, v, key).unwrap_or(true)
}

/// Tracked accesses (shared buffers and parameters) since some point.
#[derive(Clone, Debug, Default, PartialEq)]
struct Touches {
    reads: Vec<Touch>,
    writes: Vec<Touch>,
}

/// Adds `t` unless something in `list` covers it; whether it was added.
fn push_new(list: &mut Vec<Touch>, t: Touch) -> bool {
    if list.iter().any(|x| x.covers(&t)) {
        false
    } else {
        list.retain(|x| !t.covers(x));
        list.push(t);
        true
    }
}

impl Touches {
    fn is_empty(&self) -> bool {
        self.reads.is_empty() && self.writes.is_empty()
    }

    /// Whether `next` may touch what `self` wrote, or write what `self` read.
    fn conflicts(&self, next: &Touches) -> bool {
        self.writes
            .iter()
            .any(|w| next.reads.iter().chain(&next.writes).any(|x| w.overlaps(x)))
            || self
                .reads
                .iter()
                .any(|r| next.writes.iter().any(|x| r.overlaps(x)))
    }

    /// Adds `other`; whether anything was new.
    fn union(&mut self, other: &Touches) -> bool {
        let mut changed = false;
        for t in &other.reads {
            changed |= push_new(&mut self.reads, t.clone());
        }
        for t in &other.writes {
            changed |= push_new(&mut self.writes, t.clone());
        }
        changed
    }

    /// Rewrites every touch with `f`.
    fn map(&mut self, f: &dyn Fn(Touch) -> Touch) {
        for list in [&mut self.reads, &mut self.writes] {
            for t in std::mem::take(list) {
                push_new(list, f(t));
            }
        }
    }

    /// Forgets the keys that mention one of `vars` (their values are not known here).
    fn widen(&mut self, vars: &HashSet<String>) {
        if vars.is_empty() {
            return;
        }
        self.map(&|t| match &t.key {
            Some(k) if mentions_any(k, vars) => Touch {
                key: None,
                family: None,
                ..t
            },
            _ => t,
        });
    }

    /// The accesses of one iteration of a loop over `var` seen from the next one:
    /// `var -> var - 1` in the keys.
    fn shift(&mut self, var: &str) {
        self.map(&|t| Touch {
            key: t.key.as_ref().map(|k| substitute(k, var, -1)),
            ..t
        });
    }

    /// Keys over `var` stand for all earlier iterations too (so the carried state of a loop
    /// without barriers stays finite); keys that do not step by a constant are forgotten.
    fn generalize(&mut self, var: &str) {
        let only = HashSet::from([var.to_string()]);
        self.map(&|t| match &t.key {
            Some(k) if t.family.is_none() && mentions_any(k, &only) => {
                let steps = step(k, var).is_some()
                    || modulo(k).is_some_and(|(x, _)| step(x, var).is_some());
                if steps {
                    Touch {
                        family: Some(var.to_string()),
                        ..t
                    }
                } else {
                    Touch {
                        key: None,
                        family: None,
                        ..t
                    }
                }
            }
            _ => t,
        });
    }
}

fn mentions_any(e: &Expr, vars: &HashSet<String>) -> bool {
    let mut found = false;
    for_each_subexpr(e, &mut |x| {
        if let ExprKind::Var(n) = &x.kind {
            found |= vars.contains(n);
        }
    });
    found
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

/// The walk's state at a program point: the accesses since the last barrier, and the
/// destinations of `T.cp_async`s that may still be in flight (a `T.cp_async_wait` may land
/// any of them: a write at that moment).
#[derive(Clone, Debug, Default, PartialEq)]
struct State {
    pending: Touches,
    in_flight: Touches,
}

impl State {
    fn union(&mut self, other: &State) -> bool {
        let a = self.pending.union(&other.pending);
        let b = self.in_flight.union(&other.in_flight);
        a || b
    }

    fn widen(&mut self, vars: &HashSet<String>) {
        self.pending.widen(vars);
        self.in_flight.widen(vars);
    }

    fn shift(&mut self, var: &str) {
        self.pending.shift(var);
        self.in_flight.shift(var);
    }

    fn generalize(&mut self, var: &str) {
        self.pending.generalize(var);
        self.in_flight.generalize(var);
    }
}

/// A SIMT region: a `threadIdx.*` binding loop met in scalar code.
fn is_region(stmt: &Stmt) -> bool {
    matches!(&stmt.kind, StmtKind::For(f) if matches!(f.kind,
        ForKind::ThreadBinding(ThreadTag::ThreadX | ThreadTag::ThreadY | ThreadTag::ThreadZ)))
}

fn contains_region(body: &[Stmt]) -> bool {
    let mut found = false;
    for_each_stmt(body, &mut |s| found |= is_region(s));
    found
}

/// A buffer whose accesses barriers order: its shape and element size.
struct Tracked {
    shape: Vec<Expr>,
    bytes: i64,
}

struct Cx<'a> {
    /// The kernel's thread variable and thread count.
    tx: String,
    threads: i64,
    /// Buffers whose accesses need ordering (shared allocations and parameters), with their
    /// shapes.
    tracked: &'a HashMap<String, Tracked>,
    /// Per-thread buffers (local, fragment): reading one makes a value thread-dependent.
    private: &'a HashSet<String>,
    /// Scalar variables whose value may differ between threads.
    divergent: HashSet<String>,
    insert_barriers: bool,
    errors: Vec<Diagnostic>,
}

impl Cx<'_> {
    /// A copy for trial walks (its errors are dropped).
    fn dry(&self) -> Cx<'_> {
        Cx {
            tx: self.tx.clone(),
            threads: self.threads,
            tracked: self.tracked,
            private: self.private,
            divergent: self.divergent.clone(),
            insert_barriers: self.insert_barriers,
            errors: Vec::new(),
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
                        if a.effect.reads() {
                            if let Some(t) = self.touch(name, key, local) {
                                push_new(&mut acc.reads, t);
                            }
                        }
                        if a.effect.writes() {
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
            ExprKind::Var(v) => dep |= v == &self.tx || self.divergent.contains(v),
            ExprKind::Load { buffer, .. } => dep |= self.private.contains(buffer),
            _ => {}
        });
        dep
    }

    /// Regions under a thread-dependent condition could not be synchronized.
    fn require_uniform(&mut self, e: &Expr, what: &str, body: &[Stmt]) {
        if contains_region(body) && self.thread_dependent(e) {
            self.errors.push(
                Diagnostic::error(
                    e.span,
                    format!("this {what} depends on the thread, so the SIMT regions under it cannot be synchronized"),
                )
                .with_note("barriers must be reached by every thread of the block"),
            );
        }
    }
}

fn bind_kernel(
    k: &mut Kernel,
    span: Span,
    params: &[BufferDecl],
    insert_barriers: bool,
    errors: &mut Vec<Diagnostic>,
) {
    if !contains_region(&k.body) {
        return;
    }
    let threads: Vec<Option<i64>> = k.threads.iter().map(const_int).collect();
    let t = match threads.as_slice() {
        [Some(t)] => *t,
        _ => {
            // Already one binding loop around everything (e.g. a 2-D thread-level kernel
            // written by hand): nothing to merge.
            if k.body.len() == 1 {
                return;
            }
            errors.push(Diagnostic::error(
                span,
                "thread-binding merges the SIMT regions of 1-D blocks only",
            ));
            return;
        }
    };
    let mut first = None;
    for_each_stmt(&k.body, &mut |s| {
        if let (None, StmtKind::For(f)) = (&first, &s.kind) {
            if is_region(s) {
                first = Some(f.var.clone());
            }
        }
    });
    // The first region's name is unique already: it names the merged loop.
    let Some(var) = first else { return };
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
    let private: HashSet<String> = k
        .allocs
        .iter()
        .filter(|a| matches!(a.scope, Scope::Local | Scope::Fragment))
        .map(|a| a.name.name.clone())
        .collect();
    let mut cx = Cx {
        tx: var.name.clone(),
        threads: t,
        tracked: &tracked,
        private: &private,
        divergent: HashSet::new(),
        insert_barriers,
        errors: Vec::new(),
    };
    let body = walk(std::mem::take(&mut k.body), &mut State::default(), &mut cx);
    errors.append(&mut cx.errors);
    k.body = vec![Stmt::new(
        StmtKind::For(For {
            var,
            start: Expr::int(0),
            stop: Expr::int(t),
            kind: ForKind::ThreadBinding(ThreadTag::ThreadX),
            body,
        }),
        span,
    )];
}

/// Trial walks of a loop body before the carried keys become families (so the fixpoint
/// ends).
const EXACT_ROUNDS: usize = 2;
/// Rounds after which the keys over the loop variable are dropped altogether.
const MAX_ROUNDS: usize = 12;

/// Rewrites scalar code `body` for the merged loop; `state` holds the accesses since the
/// last barrier and the copies in flight (in and out).
fn walk(body: Vec<Stmt>, state: &mut State, cx: &mut Cx) -> Vec<Stmt> {
    let mut out = Vec::with_capacity(body.len());
    for stmt in body {
        let span = stmt.span;
        match stmt.kind {
            StmtKind::For(f) if matches!(f.kind, ForKind::ThreadBinding(_)) => {
                region(f, span, state, cx, &mut out);
            }
            StmtKind::For(f) if f.kind == ForKind::Parallel => cx.errors.push(Diagnostic::error(
                span,
                "a T.Parallel loop is left between SIMT regions: run lower-tile-ops before thread-binding",
            )),
            StmtKind::For(f) => serial_loop(f, span, state, cx, &mut out),
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
                        matches!(walked.first(), Some(s) if s.kind == StmtKind::Barrier)
                    };
                    if starts_with_barrier(&then_body, state)
                        || starts_with_barrier(&else_body, state)
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
                let acc = cx.scalar_touches(&[&value]);
                cx.order(state, &acc, span, &mut out);
                if cx.thread_dependent(&value) {
                    cx.divergent.insert(var.name.clone());
                }
                out.push(Stmt::new(StmtKind::Let { var, dtype, value }, span));
            }
            kind @ StmtKind::Store { .. } => {
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
            StmtKind::Copy { .. } | StmtKind::Fill { .. } | StmtKind::Gemm(_) => {
                cx.errors.push(Diagnostic::error(
                    span,
                    "a tile op is left between SIMT regions: run lower-tile-ops before thread-binding",
                ))
            }
            StmtKind::Intrinsic(Intrinsic::WaitGroup(n)) => {
                // The copies it lands are writes at this point (no barrier needed before:
                // whatever their bytes were used for before the copies were issued is
                // ordered by the issue).
                let landed = state.in_flight.clone();
                state.pending.union(&landed);
                if n == 0 {
                    state.in_flight = Touches::default();
                }
                out.push(Stmt::new(
                    StmtKind::Intrinsic(Intrinsic::WaitGroup(n)),
                    span,
                ));
            }
            // Commits, and what cannot appear in a kernel's scalar code (verifier rules).
            kind => out.push(Stmt::new(kind, span)),
        }
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
    let mut end_barrier = false;
    let mut carried = settle(&f, &entry, cx, false);
    if cx.insert_barriers {
        let with_end = settle(&f, &entry, cx, true);
        let inner = barriers_in(&f, &entry, &carried, cx);
        let at_end = barriers_in(&f, &entry, &with_end, cx) + 1;
        if at_end <= inner {
            end_barrier = true;
            carried = with_end;
        }
    }
    let mut start = entry.clone();
    start.union(&carried);
    f.body = walk(std::mem::take(&mut f.body), &mut start, cx);
    if end_barrier {
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

/// The state one iteration of `f` hands the next (in the next iteration's terms), at the
/// fixpoint: walked from `entry` joined with it. `end_barrier`: the body ends with a barrier.
fn settle(f: &For, entry: &State, cx: &Cx, end_barrier: bool) -> State {
    let var = f.var.name.clone();
    let inner = bound_vars(&f.body);
    let mut carried = State::default();
    for round in 0.. {
        let mut trial = entry.clone();
        trial.union(&carried);
        let mut dry = cx.dry();
        walk(f.body.clone(), &mut trial, &mut dry);
        if end_barrier {
            trial.pending = Touches::default();
        }
        trial.widen(&inner);
        trial.shift(&var);
        if round >= EXACT_ROUNDS {
            trial.generalize(&var);
        }
        if round >= MAX_ROUNDS {
            // Never seen: families do not converge. Forget the keys over `var`.
            trial.widen(&HashSet::from([var.clone()]));
        }
        if !carried.union(&trial) {
            break;
        }
    }
    carried
}

/// How many barriers the body of `f` gets when walked from `entry` joined with `carried`.
fn barriers_in(f: &For, entry: &State, carried: &State, cx: &Cx) -> usize {
    let mut start = entry.clone();
    start.union(carried);
    let mut dry = cx.dry();
    let body = walk(f.body.clone(), &mut start, &mut dry);
    let mut n = 0;
    for_each_stmt(&body, &mut |s| {
        n += usize::from(s.kind == StmtKind::Barrier)
    });
    n
}

/// Appends region `f`'s body, renamed to the kernel's thread variable, after a barrier when
/// needed.
fn region(mut f: For, span: Span, state: &mut State, cx: &mut Cx, out: &mut Vec<Stmt>) {
    let (Some(start), Some(stop)) = (const_int(&f.start), const_int(&f.stop)) else {
        cx.errors.push(Diagnostic::error(
            span,
            "a SIMT region needs constant thread bounds",
        ));
        return;
    };
    let extent = stop - start;
    if f.kind != ForKind::ThreadBinding(ThreadTag::ThreadX) || extent > cx.threads {
        cx.errors.push(Diagnostic::error(
            span,
            format!(
                "this SIMT region does not fit the block's {} threads along threadIdx.x",
                cx.threads
            ),
        ));
        return;
    }
    let mut local = bound_vars(&f.body);
    local.insert(f.var.name.clone());
    let (mut acc, in_flight) = cx.touches(&f.body, &local);
    let mut waits = false;
    for_each_stmt(&f.body, &mut |s| {
        waits |= matches!(s.kind, StmtKind::Intrinsic(Intrinsic::WaitGroup(_)))
    });
    if waits {
        acc.union(&state.in_flight.clone());
    }
    cx.order(state, &acc, span, out);
    state.in_flight.union(&in_flight);
    let old = f.var.name.clone();
    let tx = cx.tx.clone();
    map_body_exprs(&mut f.body, &mut |e| match &e.kind {
        ExprKind::Var(n) if *n == old => {
            let v = Expr::new(ExprKind::Var(tx.clone()), e.span);
            if start == 0 {
                v
            } else {
                Expr::binary(BinOp::Add, v, Expr::int(start), e.span)
            }
        }
        _ => e,
    });
    if extent < cx.threads {
        let cond = Expr::binary(BinOp::Lt, Expr::var(tx), Expr::int(extent), span);
        out.push(Stmt::new(
            StmtKind::If {
                cond,
                then_body: f.body,
                else_body: Vec::new(),
            },
            span,
        ));
    } else {
        out.extend(f.body);
    }
}
