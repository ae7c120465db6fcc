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
//! - Barriers (conservative, by buffer): before a region (or a scalar statement reading memory)
//!   that reads a shared or global buffer written since the last barrier, or writes one read or
//!   written since then; and at the end of a loop body when the body's accesses at its end
//!   conflict with those its next iteration makes before its first barrier. Local and fragment
//!   buffers are per thread (the same thread owns the same elements in every region): no
//!   barrier for them.
//! - Barriers only land at block-uniform points: an `if` or loop around a region must not
//!   depend on the thread (an error otherwise).
//! - A kernel with no region is left alone.

use crate::pass::Pass;
use std::collections::{BTreeSet, HashSet};
use tlc_ir::verifier::const_int;
use tlc_ir::visit::{for_each_stmt, for_each_subexpr, map_body_exprs, stmt_exprs};
use tlc_ir::{
    BinOp, Diagnostic, Expr, ExprKind, For, ForKind, Kernel, PrimFunc, Region, Scope, Span, Stmt,
    StmtKind, ThreadTag,
};

pub struct ThreadBinding;

impl Pass for ThreadBinding {
    fn name(&self) -> &'static str {
        "thread-binding"
    }

    fn description(&self) -> &'static str {
        "SIMT regions -> one threadIdx.x loop over the kernel body, with T.sync_threads() where regions share memory"
    }

    fn run(&self, func: PrimFunc) -> Result<PrimFunc, Vec<Diagnostic>> {
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
    let params: HashSet<String> = func.params.iter().map(|p| p.name.name.clone()).collect();
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

/// Shared and global buffers read and written by some code (the ones barriers order).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Access {
    pub reads: BTreeSet<String>,
    pub writes: BTreeSet<String>,
}

impl Access {
    /// Whether `next` may touch what `self` wrote, or write what `self` read.
    fn conflicts(&self, next: &Access) -> bool {
        self.writes
            .iter()
            .any(|b| next.reads.contains(b) || next.writes.contains(b))
            || self.reads.iter().any(|b| next.writes.contains(b))
    }

    fn union(&mut self, other: &Access) {
        self.reads.extend(other.reads.iter().cloned());
        self.writes.extend(other.writes.iter().cloned());
    }

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
                for r in i.reads() {
                    self.reads.insert(r.buffer.name.clone());
                }
                if let Some(w) = i.writes() {
                    self.writes.insert(w.buffer.name.clone());
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

    /// Keeps only the buffers `keep` accepts.
    fn retain(mut self, keep: &dyn Fn(&str) -> bool) -> Access {
        self.reads.retain(|b| keep(b));
        self.writes.retain(|b| keep(b));
        self
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

struct Cx<'a> {
    /// The kernel's thread variable and thread count.
    tx: String,
    threads: i64,
    /// Buffers whose accesses need ordering: shared allocations and parameters.
    tracked: &'a dyn Fn(&str) -> bool,
    /// Per-thread buffers (local, fragment): reading one makes a value thread-dependent.
    private: &'a HashSet<String>,
    /// Scalar variables whose value may differ between threads.
    divergent: HashSet<String>,
    insert_barriers: bool,
    /// Barriers this walk inserted (the loop rule asks whether a second pass would).
    inserted: usize,
    errors: Vec<Diagnostic>,
}

impl Cx<'_> {
    fn access(&self, acc: Access) -> Access {
        acc.retain(self.tracked)
    }

    /// Pushes a barrier before code accessing `acc` when it conflicts with `pending`.
    fn order(&mut self, pending: &mut Access, acc: &Access, span: Span, out: &mut Vec<Stmt>) {
        if self.insert_barriers && pending.conflicts(acc) {
            out.push(Stmt::new(StmtKind::Barrier, span));
            self.inserted += 1;
            *pending = Access::default();
        }
        pending.union(acc);
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
    params: &HashSet<String>,
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
    let shared: HashSet<String> = k
        .allocs
        .iter()
        .filter(|a| a.scope == Scope::Shared)
        .map(|a| a.name.name.clone())
        .collect();
    let private: HashSet<String> = k
        .allocs
        .iter()
        .filter(|a| matches!(a.scope, Scope::Local | Scope::Fragment))
        .map(|a| a.name.name.clone())
        .collect();
    let tracked = |b: &str| shared.contains(b) || params.contains(b);
    let mut cx = Cx {
        tx: var.name.clone(),
        threads: t,
        tracked: &tracked,
        private: &private,
        divergent: HashSet::new(),
        insert_barriers,
        inserted: 0,
        errors: Vec::new(),
    };
    let body = walk(std::mem::take(&mut k.body), &mut Access::default(), &mut cx);
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

/// Rewrites scalar code `body` for the merged loop; `pending` holds the accesses since the
/// last barrier (in and out).
fn walk(body: Vec<Stmt>, pending: &mut Access, cx: &mut Cx) -> Vec<Stmt> {
    let mut out = Vec::with_capacity(body.len());
    for stmt in body {
        let span = stmt.span;
        match stmt.kind {
            StmtKind::For(f) if matches!(f.kind, ForKind::ThreadBinding(_)) => {
                region(f, span, pending, cx, &mut out);
            }
            StmtKind::For(f) if f.kind == ForKind::Parallel => cx.errors.push(Diagnostic::error(
                span,
                "a T.Parallel loop is left between SIMT regions: run lower-tile-ops before thread-binding",
            )),
            StmtKind::For(mut f) => {
                let mut acc = Access::default();
                acc.add_expr(&f.start);
                acc.add_expr(&f.stop);
                let acc = cx.access(acc);
                cx.order(pending, &acc, span, &mut out);
                cx.require_uniform(&f.start, "loop bound", &f.body);
                cx.require_uniform(&f.stop, "loop bound", &f.body);
                let original = f.body.clone();
                let entry = pending.clone();
                f.body = walk(std::mem::take(&mut f.body), pending, cx);
                // Would the next iteration, starting from what this one leaves pending,
                // need a barrier before its first one? Then synchronize at the end instead.
                let mut dry = Cx {
                    tx: cx.tx.clone(),
                    threads: cx.threads,
                    tracked: cx.tracked,
                    private: cx.private,
                    divergent: cx.divergent.clone(),
                    insert_barriers: cx.insert_barriers,
                    inserted: 0,
                    errors: Vec::new(),
                };
                let mut again = pending.clone();
                walk(original, &mut again, &mut dry);
                if dry.inserted > 0 {
                    f.body.push(Stmt::new(StmtKind::Barrier, span));
                    cx.inserted += 1;
                    *pending = entry;
                } else {
                    pending.union(&entry);
                }
                out.push(Stmt::new(StmtKind::For(f), span));
            }
            StmtKind::If {
                cond,
                then_body,
                else_body,
            } => {
                let mut acc = Access::default();
                acc.add_expr(&cond);
                let acc = cx.access(acc);
                cx.order(pending, &acc, span, &mut out);
                cx.require_uniform(&cond, "condition", &then_body);
                cx.require_uniform(&cond, "condition", &else_body);
                let mut other = pending.clone();
                let then_body = walk(then_body, pending, cx);
                let else_body = walk(else_body, &mut other, cx);
                pending.union(&other);
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
                let mut acc = Access::default();
                acc.add_expr(&value);
                let acc = cx.access(acc);
                cx.order(pending, &acc, span, &mut out);
                if cx.thread_dependent(&value) {
                    cx.divergent.insert(var.name.clone());
                }
                out.push(Stmt::new(StmtKind::Let { var, dtype, value }, span));
            }
            kind @ StmtKind::Store { .. } => {
                // Block-level code runs once per block: thread 0 does it.
                let stmt = Stmt::new(kind, span);
                let mut acc = Access::default();
                acc.add_stmt(&stmt);
                let acc = cx.access(acc);
                cx.order(pending, &acc, span, &mut out);
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
            // A barrier or a kernel cannot appear in a kernel's scalar code (verifier rules).
            kind => out.push(Stmt::new(kind, span)),
        }
    }
    out
}

/// Appends region `f`'s body, renamed to the kernel's thread variable, after a barrier when
/// needed.
fn region(mut f: For, span: Span, pending: &mut Access, cx: &mut Cx, out: &mut Vec<Stmt>) {
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
    let acc = cx.access(Access::of_body(&f.body));
    cx.order(pending, &acc, span, out);
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
