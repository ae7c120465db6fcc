//! Thread regions in tile-level kernels.
//!
//! TileLang kernels may mix tile ops with per-thread statements indexed by a thread
//! variable (`tx = T.get_thread_binding()`, `T.launch_thread("threadIdx.x", …)`): a
//! dequantizing GEMM, for instance, copies packed weights with `T.copy`, lets every thread
//! decode its slice of them into shared memory, and multiplies with `T.gemm`. In tlc's IR
//! per-thread code lives in `threadIdx` binding loops (docs/ir.md, "Thread regions"), so the
//! front end wraps each maximal run of per-thread statements of a statement list in one such
//! loop, at the outermost level where the run holds no tile-level construct.
//!
//! A statement is *per-thread* when it holds no tile-level construct (a tile op, a
//! `T.Parallel` loop, a fragment) and names a thread variable, a local buffer that other
//! per-thread statements use, or a variable a per-thread `let` defines — found as a fixed
//! point, because each thread has its own copy of such buffers and values. A tile-level
//! statement that contains per-thread code is entered when it is a serial loop, a `while`
//! or an `if` whose own expressions are the same for every thread; anything else (a tile
//! op or loop bound that depends on the thread, per-thread code inside `T.Parallel`, a
//! fragment or a per-thread buffer in a tile op) is a located error that says what to
//! write instead.

use crate::diagnostic::Diagnostic;
use crate::ir::{Expr, ExprKind, For, ForKind, Ident, Intrinsic, Scope, Stmt, StmtKind, ThreadTag};
use crate::span::Span;
use crate::visit;
use std::collections::BTreeSet;

/// What the wrapping needs to know about a kernel.
pub(super) struct Regions<'a> {
    /// The kernel's thread variables with their axes (0 = x).
    vars: &'a [(Ident, usize)],
    threads: &'a [Expr],
    fragments: BTreeSet<&'a str>,
    locals: BTreeSet<&'a str>,
    /// Thread variables and the `let` variables of per-thread statements.
    thread_names: BTreeSet<String>,
    /// Local buffers per-thread statements name.
    thread_locals: BTreeSet<String>,
}

impl<'a> Regions<'a> {
    pub fn new(
        vars: &'a [(Ident, usize)],
        allocs: &'a [crate::ir::BufferDecl],
        threads: &'a [Expr],
    ) -> Self {
        let of = |scope: Scope| {
            allocs
                .iter()
                .filter(move |a| a.scope == scope)
                .map(|a| a.name.name.as_str())
                .collect()
        };
        Regions {
            vars,
            threads,
            fragments: of(Scope::Fragment),
            locals: of(Scope::Local),
            thread_names: vars.iter().map(|(v, _)| v.name.clone()).collect(),
            thread_locals: BTreeSet::new(),
        }
    }

    /// `body` with its per-thread statements wrapped in thread regions, or the errors.
    pub fn wrap(mut self, body: Vec<Stmt>) -> Result<Vec<Stmt>, Vec<Diagnostic>> {
        while self.mark(&body) {}
        let mut errors = Vec::new();
        let body = self.wrap_list(body, &mut errors);
        if errors.is_empty() {
            Ok(body)
        } else {
            Err(errors)
        }
    }

    /// One round of the fixed point: records the buffers and `let`s of the per-thread
    /// statements of `body`; whether anything new was found.
    fn mark(&mut self, body: &[Stmt]) -> bool {
        let mut changed = false;
        for stmt in body {
            if self.is_tile(stmt) {
                for child in visit::child_bodies(stmt) {
                    changed |= self.mark(child);
                }
            } else if self.first_thread_use(stmt).is_some() {
                visit::for_each_stmt(std::slice::from_ref(stmt), &mut |s| {
                    for (name, _) in visit::stmt_buffer_uses(s) {
                        if self.locals.contains(name) {
                            changed |= self.thread_locals.insert(name.to_string());
                        }
                    }
                    if let StmtKind::Let { var, .. } = &s.kind {
                        changed |= self.thread_names.insert(var.name.clone());
                    }
                });
            }
        }
        changed
    }

    fn wrap_list(&self, body: Vec<Stmt>, errors: &mut Vec<Diagnostic>) -> Vec<Stmt> {
        let mut out = Vec::with_capacity(body.len());
        let mut run: Vec<Stmt> = Vec::new();
        for mut stmt in body {
            let per_thread = self.first_thread_use(&stmt).is_some();
            if per_thread && !self.is_tile(&stmt) {
                run.push(stmt);
                continue;
            }
            if !run.is_empty() {
                out.extend(self.region(std::mem::take(&mut run)));
            }
            if per_thread {
                self.enter(&mut stmt, errors);
            }
            out.push(stmt);
        }
        if !run.is_empty() {
            out.extend(self.region(run));
        }
        out
    }

    /// A tile-level statement that holds per-thread code: its nested lists are wrapped when
    /// the statement itself is the same for every thread.
    fn enter(&self, stmt: &mut Stmt, errors: &mut Vec<Diagnostic>) {
        let enterable = match &stmt.kind {
            StmtKind::For(f) => !matches!(f.kind, ForKind::Parallel | ForKind::ThreadBinding(_)),
            StmtKind::While { .. } | StmtKind::If { .. } => true,
            _ => false,
        };
        if let Some((name, at)) = self.thread_use_in(stmt) {
            errors.push(self.dependent(stmt, &name, at));
            return;
        }
        if !enterable {
            let (name, at) = self
                .first_thread_use(stmt)
                .unwrap_or_else(|| (String::new(), stmt.span));
            let what = match &stmt.kind {
                StmtKind::For(f) if f.kind == ForKind::Parallel => "a `T.Parallel` loop",
                _ => "this statement",
            };
            let at = if at.is_dummy() { stmt.span } else { at };
            let mut d = Diagnostic::error(
                at,
                format!("per-thread code (it names `{name}`) inside {what}"),
            );
            d = d.with_note_at(stmt.span, format!("{what} runs on the whole block"));
            errors.push(d.with_note(
                "`T.Parallel` spreads its iterations over the block's threads: index its body \
                 with its loop variables, or move the per-thread code out of it",
            ));
            return;
        }
        for child in visit::child_bodies_mut(stmt) {
            *child = self.wrap_list(std::mem::take(child), errors);
        }
    }

    /// The error for a tile-level statement whose own expressions or operands depend on the
    /// thread (`name`, used at `at`).
    fn dependent(&self, stmt: &Stmt, name: &str, at: Span) -> Diagnostic {
        if let Some(f) = self.fragment_named(stmt) {
            return Diagnostic::error(
                at,
                format!("fragment `{f}` in per-thread code (it names `{name}`)"),
            )
            .with_note(
                "a fragment's elements are spread over the block's threads by layout \
                 inference; access it in a `T.Parallel` loop, or use a `T.alloc_local` buffer \
                 in per-thread code",
            );
        }
        let what = match &stmt.kind {
            StmtKind::For(_) | StmtKind::While { .. } => "a loop whose body holds tile ops",
            StmtKind::If { .. } => "a condition whose branches hold tile ops",
            _ => "a tile op",
        };
        Diagnostic::error(at, format!("`{name}` differs between threads, in {what}"))
            .with_note_at(
                stmt.span,
                "this runs on the whole block, once for all threads",
            )
            .with_note(
                "tile ops and the loops and conditions around them must be the same for every \
                 thread; index tile-level code with `T.Parallel` loop variables",
            )
    }

    /// Whether `stmt` (at any depth) holds a tile op, a `T.Parallel` loop or a fragment.
    fn is_tile(&self, stmt: &Stmt) -> bool {
        holds_tile(stmt, &self.fragments)
    }

    /// A fragment `stmt` names (at any depth).
    fn fragment_named(&self, stmt: &Stmt) -> Option<String> {
        let mut found = None;
        visit::for_each_stmt(std::slice::from_ref(stmt), &mut |s| {
            for (name, _) in visit::stmt_buffer_uses(s) {
                if found.is_none() && self.fragments.contains(name) {
                    found = Some(name.to_string());
                }
            }
        });
        found
    }

    /// The first thread-dependent name in `stmt` (at any depth): a thread variable, a
    /// per-thread `let` or a per-thread local buffer, with where.
    fn first_thread_use(&self, stmt: &Stmt) -> Option<(String, Span)> {
        let mut found = None;
        visit::for_each_stmt(std::slice::from_ref(stmt), &mut |s| {
            if found.is_none() {
                found = self.thread_use_in(s);
            }
        });
        found
    }

    /// A thread-dependent name in `s`'s own expressions and operands (not its nested
    /// statements).
    fn thread_use_in(&self, s: &Stmt) -> Option<(String, Span)> {
        // A barrier and an mbarrier's init, arrival or wait are thread-level statements that
        // every thread runs for itself (hand-written warp specialization, `syntax::lower_ws`):
        // per-thread code, though they name no thread.
        let thread_level = matches!(
            &s.kind,
            StmtKind::Barrier
                | StmtKind::Intrinsic(
                    Intrinsic::MbarrierInit { .. }
                        | Intrinsic::MbarrierArrive { .. }
                        | Intrinsic::MbarrierWait { .. }
                        | Intrinsic::PhiloxInit { .. }
                        | Intrinsic::PhiloxRand { .. }
                        | Intrinsic::PhiloxUniform { .. }
                )
        );
        if let (true, Some((v, _))) = (thread_level, self.vars.first()) {
            return Some((v.name.clone(), s.span));
        }
        for (name, at) in visit::stmt_buffer_uses(s) {
            if self.thread_locals.contains(name) {
                return Some((name.to_string(), at));
            }
        }
        let mut found = None;
        for e in visit::stmt_exprs(s) {
            visit::for_each_subexpr(e, &mut |x| {
                if let ExprKind::Var(n) = &x.kind {
                    if found.is_none() && self.thread_names.contains(n) {
                        found = Some((n.clone(), x.span));
                    }
                }
            });
        }
        found
    }

    /// `run` inside one `threadIdx` loop per axis its statements use (every declared axis
    /// when they use none, e.g. a run that only updates per-thread buffers), x outermost.
    fn region(&self, run: Vec<Stmt>) -> Vec<Stmt> {
        let span = run.first().map_or(Span::DUMMY, |s| s.span);
        let mut used: Vec<&(Ident, usize)> = self
            .vars
            .iter()
            .filter(|(v, _)| {
                let mut uses = false;
                visit::for_each_stmt(&run, &mut |s| {
                    for e in visit::stmt_exprs(s) {
                        visit::for_each_subexpr(e, &mut |x| {
                            uses |= matches!(&x.kind, ExprKind::Var(n) if *n == v.name);
                        });
                    }
                });
                uses
            })
            .collect();
        if used.is_empty() {
            used = self.vars.iter().collect();
        }
        // One loop per axis (the first variable of each), innermost built first.
        used.sort_by_key(|(_, axis)| std::cmp::Reverse(*axis));
        used.dedup_by_key(|(_, axis)| *axis);
        let mut body = run;
        for (var, axis) in used {
            let extent = self
                .threads
                .get(*axis)
                .cloned()
                .unwrap_or_else(|| Expr::int(1));
            body = vec![Stmt::new(
                StmtKind::For(For {
                    var: var.clone(),
                    start: Expr::new(ExprKind::Int(0), span),
                    stop: Expr::new(extent.kind, span),
                    kind: ForKind::ThreadBinding(thread_tag(*axis)),
                    body,
                }),
                span,
            )];
        }
        body
    }
}

/// Whether `stmt` (at any depth) holds a tile op, a `T.Parallel` loop or one of `fragments`.
pub(super) fn holds_tile<S: std::borrow::Borrow<str> + Ord>(
    stmt: &Stmt,
    fragments: &BTreeSet<S>,
) -> bool {
    let mut tile = false;
    visit::for_each_stmt(std::slice::from_ref(stmt), &mut |s| {
        tile |= match &s.kind {
            StmtKind::Copy { .. }
            | StmtKind::Fill { .. }
            | StmtKind::Gemm(_)
            | StmtKind::Reduce(_)
            | StmtKind::Kernel(_) => true,
            StmtKind::For(f) => f.kind == ForKind::Parallel,
            _ => false,
        };
        for (name, _) in visit::stmt_buffer_uses(s) {
            tile |= fragments.contains(name);
        }
    });
    tile
}

pub(super) fn thread_tag(axis: usize) -> ThreadTag {
    match axis {
        1 => ThreadTag::ThreadY,
        2 => ThreadTag::ThreadZ,
        _ => ThreadTag::ThreadX,
    }
}
