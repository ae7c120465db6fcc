//! Gives every scalar binder a name of its own, so that "names are identities" holds for
//! kernels that reuse a loop variable in sibling loops — `for i, j in T.Parallel(..)` twice in
//! one kernel is everyday TileLang — and every kernel's buffers names of their own, so that
//! two kernels of one function may both allocate an `A_shared`.
//!
//! A loop variable, block variable or let whose name was bound *earlier* by a binder whose
//! scope has ended is renamed to a fresh `name_N`, together with its uses. A loop variable
//! whose name is still in scope shadows it for its body (TVMScript's scoping): it is renamed
//! too, with the uses it binds; so is a let that rebinds a let of its own statement list
//! (Python's `x = …` then `x = …` again). Any other binder whose name is still in scope is
//! left alone: that is shadowing, which the verifier reports. Likewise a
//! kernel's allocation whose name an earlier kernel allocated (that kernel has ended) is
//! renamed with every reference to it in its kernel; one that repeats a parameter's name or
//! another allocation of its own kernel is left for the verifier to report.

use crate::ir::{Expr, ExprKind, Kernel, PrimFunc, Stmt, StmtKind};
use crate::visit::{child_bodies_mut, for_each_stmt, for_each_subexpr, map_body_exprs, stmt_exprs};
use std::collections::{HashMap, HashSet};

/// Renames reused scalar binders of `func` in place (see the module comment).
pub fn uniquify(func: &mut PrimFunc) {
    let mut state = State {
        names: Names::of(func),
        bound: HashSet::new(),
        allocated: HashSet::new(),
    };
    for dim in &func.dims {
        state.bound.insert(dim.name.clone());
    }
    let mut scope: Vec<String> = func.dims.iter().map(|d| d.name.clone()).collect();
    walk(&mut func.body, &mut scope, &mut state);
}

/// The names taken in one function, and a source of new ones: the one definition of a
/// fresh name, used here and by every pass that introduces a variable or a buffer
/// (`tlc_passes::names`).
#[derive(Clone, Debug, Default)]
pub struct Names {
    /// Every name that appears anywhere, so a fresh name collides with none.
    taken: HashSet<String>,
    /// Per base, the `N` of the last `base_N` handed out: every smaller `N` is taken (names
    /// are only ever added), so the next search starts there — without it, the k-th copy
    /// of a binder (k sibling loops over `i`, `unroll` of a long loop) would try k names,
    /// quadratic over a kernel.
    next: HashMap<String, u64>,
}

impl Names {
    /// Every name `func` defines or mentions: its own, dims, buffers, binders, uses.
    pub fn of(func: &PrimFunc) -> Names {
        let mut taken = all_names(func);
        taken.insert(func.name.name.clone());
        Names {
            taken,
            next: HashMap::new(),
        }
    }

    /// A name not taken yet, now taken: `base` itself if free, else `base_N` with the
    /// smallest free N.
    pub fn fresh(&mut self, base: &str) -> String {
        if self.taken.insert(base.to_string()) {
            return base.to_string();
        }
        self.suffixed(base)
    }

    /// `base_N` with the smallest N not taken, now taken.
    pub fn suffixed(&mut self, base: &str) -> String {
        let start = self.next.get(base).copied().unwrap_or(1);
        let (n, fresh) = (start..)
            .map(|n| (n, format!("{base}_{n}")))
            .find(|(_, candidate)| !self.taken.contains(candidate))
            .unwrap_or_else(|| (start, format!("{base}_")));
        self.next.insert(base.to_string(), n);
        self.taken.insert(fresh.clone());
        fresh
    }
}

struct State {
    names: Names,
    /// Every scalar name bound so far in program order.
    bound: HashSet<String>,
    /// Every buffer name allocated by the kernels walked so far.
    allocated: HashSet<String>,
}

impl State {
    /// Decides the name of a binder called `name`: `Some(fresh)` when it must be renamed.
    fn bind(&mut self, name: &str, scope: &[String]) -> Option<String> {
        let reused = self.bound.contains(name) && !scope.iter().any(|s| s == name);
        self.bound.insert(name.to_string());
        if !reused {
            return None;
        }
        let fresh = self.fresh(name);
        self.bound.insert(fresh.clone());
        Some(fresh)
    }

    /// `name_N` with the smallest N no name of the function has, now taken.
    fn fresh(&mut self, name: &str) -> String {
        self.names.suffixed(name)
    }

    /// Renames the allocations of `k` that an earlier kernel also allocated.
    fn own_buffers(&mut self, k: &mut Kernel) {
        let names: Vec<String> = k.allocs.iter().map(|a| a.name.name.clone()).collect();
        let mut count: HashMap<&str, usize> = HashMap::new();
        for name in &names {
            *count.entry(name).or_insert(0) += 1;
        }
        let mut renames: HashMap<String, String> = HashMap::new();
        for name in &names {
            let repeated_here = count.get(name.as_str()).is_some_and(|&c| c > 1);
            if self.allocated.contains(name) && !repeated_here {
                let fresh = self.fresh(name);
                renames.insert(name.clone(), fresh.clone());
                self.allocated.insert(fresh);
            } else {
                self.allocated.insert(name.clone());
            }
        }
        // One walk of the kernel for all its renamed buffers, not one per buffer.
        if !renames.is_empty() {
            rename_buffers(k, &renames);
        }
    }
}

fn walk(body: &mut [Stmt], scope: &mut Vec<String>, state: &mut State) {
    let depth = scope.len();
    for i in 0..body.len() {
        let (head, rest) = body.split_at_mut(i + 1);
        let stmt = &mut head[i];
        match &mut stmt.kind {
            StmtKind::Let { var, .. } => {
                // `x = …` again in the same statement list (`waves = …` twice in a row, as
                // Python code rebinds a name): a new variable from here on, the earlier one
                // ending. Not so for a name bound outside this list (a let in a loop body
                // that names an outer variable reads as a mutation, which a let is not:
                // that is left for the verifier to report).
                let rebinding = scope[depth..].contains(&var.name);
                if rebinding {
                    let fresh = state.fresh(&var.name);
                    state.bound.insert(fresh.clone());
                    rename_bound_uses(rest, &var.name, &fresh);
                    var.name = fresh;
                } else if let Some(fresh) = state.bind(&var.name, scope) {
                    rename_bound_uses(rest, &var.name, &fresh);
                    var.name = fresh;
                }
                scope.push(var.name.clone());
            }
            StmtKind::For(f) => {
                // A loop variable that shadows one in scope (`for i in T.serial(..)` around
                // `for i, j in T.Parallel(..)`) is TVMScript's scoping: the inner one is a new
                // variable for its body, the outer one again after it. The inner one gets a
                // fresh name; only the uses it binds follow.
                if scope.contains(&f.var.name) {
                    let fresh = state.fresh(&f.var.name);
                    state.bound.insert(fresh.clone());
                    rename_bound_uses(&mut f.body, &f.var.name, &fresh);
                    f.var.name = fresh;
                } else if let Some(fresh) = state.bind(&f.var.name, scope) {
                    rename_bound_uses(&mut f.body, &f.var.name, &fresh);
                    f.var.name = fresh;
                }
                scope.push(f.var.name.clone());
                walk(&mut f.body, scope, state);
                scope.pop();
            }
            StmtKind::Kernel(k) => {
                state.own_buffers(k);
                let before = scope.len();
                for var in &mut k.block_vars {
                    if let Some(fresh) = state.bind(&var.name, scope) {
                        rename_bound_uses(&mut k.body, &var.name, &fresh);
                        var.name = fresh;
                    }
                    scope.push(var.name.clone());
                }
                walk(&mut k.body, scope, state);
                scope.truncate(before);
            }
            StmtKind::If {
                then_body,
                else_body,
                ..
            } => {
                walk(then_body, scope, state);
                walk(else_body, scope, state);
            }
            StmtKind::While { body, .. } => walk(body, scope, state),
            StmtKind::Store { .. }
            | StmtKind::AtomicAdd { .. }
            | StmtKind::Copy { .. }
            | StmtKind::Gemm(_)
            | StmtKind::Fill { .. }
            | StmtKind::Reduce(_)
            | StmtKind::Barrier
            | StmtKind::GridSync
            | StmtKind::Note(_)
            | StmtKind::Fresh(_)
            | StmtKind::FinalizeReducer(_)
            | StmtKind::Intrinsic(_)
            | StmtKind::AllReduce(_) => {}
        }
    }
    scope.truncate(depth);
}

/// Renames the uses of `from` in `body` that refer to the binder around it: not those under
/// a nested binder of the same name (a loop's body, the rest of a block after a let), which
/// refer to that one.
pub fn rename_bound_uses(body: &mut [Stmt], from: &str, to: &str) {
    let mut rename = |e: Expr| match &e.kind {
        ExprKind::Var(name) if name == from => Expr::new(ExprKind::Var(to.to_string()), e.span),
        _ => e,
    };
    for stmt in body.iter_mut() {
        crate::visit::map_stmt_exprs(stmt, &mut rename);
        if let StmtKind::AllReduce(r) = &mut stmt.kind {
            for t in &mut r.threads {
                if t.name == from {
                    t.name = to.to_string();
                }
            }
        }
        match &stmt.kind {
            StmtKind::For(f) if f.var.name == from => continue,
            StmtKind::Kernel(k) if k.block_vars.iter().any(|v| v.name == from) => continue,
            StmtKind::Let { var, .. } if var.name == from => return,
            _ => {}
        }
        for child in child_bodies_mut(stmt) {
            rename_bound_uses(child, from, to);
        }
    }
}

/// Renames each buffer of `renames` (old → new) in kernel `k`: its allocation, layout
/// annotation, reducer record and arena offset, and every store, load, region and intrinsic
/// operand of its body.
fn rename_buffers(k: &mut Kernel, renames: &HashMap<String, String>) {
    let fix = |name: &mut String| {
        if let Some(to) = renames.get(name.as_str()) {
            *name = to.clone();
        }
    };
    for a in &mut k.allocs {
        fix(&mut a.name.name);
    }
    for l in &mut k.layouts {
        fix(&mut l.buffer.name);
    }
    for r in &mut k.reducers {
        fix(&mut r.buffer.name);
    }
    if let Some(arena) = &mut k.arena {
        for (name, _) in &mut arena.offsets {
            fix(&mut name.name);
        }
    }
    rename_uses_of(&mut k.body, renames);
}

/// Renames buffer `from` to `to` in every load, store, region and intrinsic operand of
/// `body` (not in allocations): also for passes that copy code onto another buffer.
pub fn rename_buffer_uses(body: &mut [Stmt], from: &str, to: &str) {
    rename_uses_of(body, &HashMap::from([(from.to_string(), to.to_string())]));
}

/// [`rename_buffer_uses`] for several buffers (old → new) at once.
fn rename_uses_of(body: &mut [Stmt], renames: &HashMap<String, String>) {
    map_body_exprs(body, &mut |e: Expr| match e.kind {
        ExprKind::Load { buffer, indices } if renames.contains_key(&buffer) => Expr::new(
            ExprKind::Load {
                buffer: renames.get(&buffer).cloned().unwrap_or(buffer),
                indices,
            },
            e.span,
        ),
        kind => Expr::new(kind, e.span),
    });
    rename_buffer_refs(body, renames);
}

/// The buffer names statements hold outside expressions.
fn rename_buffer_refs(body: &mut [Stmt], renames: &HashMap<String, String>) {
    for stmt in body {
        let mut names: Vec<&mut String> = Vec::new();
        match &mut stmt.kind {
            StmtKind::Store { buffer, .. } | StmtKind::AtomicAdd { buffer, .. } => {
                names.push(&mut buffer.name)
            }
            StmtKind::AllReduce(r) => {
                names.push(&mut r.buffer.name);
                if let Some(s) = &mut r.scratch {
                    names.push(&mut s.name);
                }
            }
            StmtKind::Copy { src, dst } => {
                names.push(&mut src.buffer.name);
                names.push(&mut dst.buffer.name);
            }
            StmtKind::Gemm(g) => {
                names.push(&mut g.a.buffer.name);
                names.push(&mut g.b.buffer.name);
                names.push(&mut g.c.buffer.name);
            }
            StmtKind::Fill { dst, .. } => names.push(&mut dst.buffer.name),
            StmtKind::FinalizeReducer(r) => names.push(&mut r.name),
            StmtKind::Fresh(bufs) => names.extend(bufs.iter_mut().map(|b| &mut b.name)),
            StmtKind::Reduce(r) => {
                names.push(&mut r.src.name);
                names.push(&mut r.dst.name);
            }
            StmtKind::Intrinsic(i) => {
                names.extend(i.operands_mut().into_iter().map(|r| &mut r.buffer.name));
            }
            _ => {}
        }
        for name in names {
            if let Some(to) = renames.get(name.as_str()) {
                *name = to.clone();
            }
        }
        for child in child_bodies_mut(stmt) {
            rename_buffer_refs(child, renames);
        }
    }
}

fn all_names(func: &PrimFunc) -> HashSet<String> {
    let mut names: HashSet<String> = func.dims.iter().map(|d| d.name.clone()).collect();
    for buffer in func.buffers() {
        names.insert(buffer.name.name.clone());
    }
    let mut note = |e: &Expr| {
        if let ExprKind::Var(n) = &e.kind {
            names.insert(n.clone());
        }
    };
    for param in &func.params {
        for dim in &param.shape {
            for_each_subexpr(dim, &mut note);
        }
    }
    for_each_stmt(&func.body, &mut |stmt| {
        for e in stmt_exprs(stmt) {
            for_each_subexpr(e, &mut note);
        }
        match &stmt.kind {
            StmtKind::Let { var, .. } => {
                note(&Expr::var(var.name.clone()));
            }
            StmtKind::For(f) => note(&Expr::var(f.var.name.clone())),
            StmtKind::Kernel(k) => k
                .block_vars
                .iter()
                .for_each(|v| note(&Expr::var(v.name.clone()))),
            _ => {}
        }
    });
    names
}
