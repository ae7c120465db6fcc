//! Gives every scalar binder a name of its own, so that "names are identities" holds for
//! kernels that reuse a loop variable in sibling loops — `for i, j in T.Parallel(..)` twice in
//! one kernel is everyday TileLang.
//!
//! A loop variable, block variable or let whose name was bound *earlier* by a binder whose
//! scope has ended is renamed to a fresh `name_N`, together with its uses. A binder whose name
//! is still in scope is left alone: that is shadowing, which the verifier reports. Buffers are
//! not renamed.

use crate::ir::{Expr, ExprKind, PrimFunc, Stmt, StmtKind};
use crate::visit::{for_each_stmt, for_each_subexpr, map_body_exprs, stmt_exprs};
use std::collections::HashSet;

/// Renames reused scalar binders of `func` in place (see the module comment).
pub fn uniquify(func: &mut PrimFunc) {
    let mut state = State {
        taken: all_names(func),
        bound: HashSet::new(),
    };
    for dim in &func.dims {
        state.bound.insert(dim.name.clone());
    }
    let mut scope: Vec<String> = func.dims.iter().map(|d| d.name.clone()).collect();
    walk(&mut func.body, &mut scope, &mut state);
}

struct State {
    /// Every name that appears anywhere, so a fresh name collides with none.
    taken: HashSet<String>,
    /// Every scalar name bound so far in program order.
    bound: HashSet<String>,
}

impl State {
    /// Decides the name of a binder called `name`: `Some(fresh)` when it must be renamed.
    fn bind(&mut self, name: &str, scope: &[String]) -> Option<String> {
        let reused = self.bound.contains(name) && !scope.iter().any(|s| s == name);
        self.bound.insert(name.to_string());
        if !reused {
            return None;
        }
        let fresh = (1..)
            .map(|n| format!("{name}_{n}"))
            .find(|candidate| !self.taken.contains(candidate))
            .unwrap_or_else(|| format!("{name}_"));
        self.taken.insert(fresh.clone());
        self.bound.insert(fresh.clone());
        Some(fresh)
    }
}

fn walk(body: &mut [Stmt], scope: &mut Vec<String>, state: &mut State) {
    let depth = scope.len();
    for i in 0..body.len() {
        let (head, rest) = body.split_at_mut(i + 1);
        let stmt = &mut head[i];
        match &mut stmt.kind {
            StmtKind::Let { var, .. } => {
                if let Some(fresh) = state.bind(&var.name, scope) {
                    rename_uses(rest, &var.name, &fresh);
                    var.name = fresh;
                }
                scope.push(var.name.clone());
            }
            StmtKind::For(f) => {
                if let Some(fresh) = state.bind(&f.var.name, scope) {
                    rename_uses(&mut f.body, &f.var.name, &fresh);
                    f.var.name = fresh;
                }
                scope.push(f.var.name.clone());
                walk(&mut f.body, scope, state);
                scope.pop();
            }
            StmtKind::Kernel(k) => {
                let before = scope.len();
                for var in &mut k.block_vars {
                    if let Some(fresh) = state.bind(&var.name, scope) {
                        rename_uses(&mut k.body, &var.name, &fresh);
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
            StmtKind::Store { .. }
            | StmtKind::Copy { .. }
            | StmtKind::Gemm(_)
            | StmtKind::Fill { .. }
            | StmtKind::Barrier
            | StmtKind::Intrinsic(_) => {}
        }
    }
    scope.truncate(depth);
}

fn rename_uses(body: &mut [Stmt], from: &str, to: &str) {
    map_body_exprs(body, &mut |e: Expr| match &e.kind {
        ExprKind::Var(name) if name == from => Expr::new(ExprKind::Var(to.to_string()), e.span),
        _ => e,
    });
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
