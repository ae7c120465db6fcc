//! `M = T.dynamic("m")`: a symbolic dimension whose Python name differs from its own name.
//! TileLang binds the Python name `M` to a TIR variable called `m`; the kernel's size
//! parameter is `m` (what `-D m=…` binds, what the manifest and errors name), and only `M`
//! is in scope in the function, as in Python.
//!
//! Lowering declares the dim under its Python name (so scoping, `uniquify` and every
//! lowering rule see the names as written), then [`rename_dims`] gives each such dim its
//! own name once binders are unique: a local binder that happens to be called `m` (the
//! dynamic example's `for k in T.Pipelined(T.ceildiv(K, 32))` next to `K =
//! T.dynamic("k")`) takes a fresh name with its uses, and every use of `M` becomes `m`.
//! The printed IR declares `m = T.symbolic("m")`, which parses back to the same IR.

use crate::diagnostic::Diagnostic;
use crate::ir::{Expr, ExprKind, PrimFunc, Stmt, StmtKind};
use crate::span::Span;
use crate::uniquify::{rename_bound_uses, Names};
use crate::visit::{child_bodies_mut, for_each_stmt, for_each_subexpr, map_body_exprs, map_expr};

/// One dim declared as `python = T.dynamic("own")`, `python != own`.
#[derive(Clone, Debug)]
pub struct DimAlias {
    pub python: String,
    pub own: String,
    /// The `T.dynamic(...)` call.
    pub span: Span,
}

/// Gives each aliased dim of `func` its own name (see the module comment). `func`'s binders
/// must be unique (`uniquify`).
pub fn rename_dims(func: &mut PrimFunc, aliases: &[DimAlias]) -> Result<(), Vec<Diagnostic>> {
    let mut errors = Vec::new();
    for alias in aliases {
        if let Err(d) = rename_dim(func, alias) {
            errors.push(d);
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

fn rename_dim(func: &mut PrimFunc, alias: &DimAlias) -> Result<(), Diagnostic> {
    let own = alias.own.as_str();
    // Two dims of one name would be one launch parameter (`-D` could bind only one).
    if let Some(d) = func.dims.iter().find(|d| d.name == own) {
        return Err(Diagnostic::error(
            alias.span,
            format!("the symbolic dimension `{own}` is declared twice"),
        )
        .with_note_at(d.span, format!("`{own}` is declared here")));
    }
    let buffer_named_own = func.params.iter().map(|p| &p.name).chain(
        func.body
            .iter()
            .flat_map(kernels)
            .flat_map(|k| k.allocs.iter().map(|a| &a.name)),
    );
    if let Some(b) = buffer_named_own.into_iter().find(|b| b.name == own) {
        return Err(Diagnostic::error(
            alias.span,
            format!(
                "the symbolic dimension `{}` is named \"{own}\", which is also the name of a buffer",
                alias.python
            ),
        )
        .with_note_at(b.span, format!("buffer `{own}` is declared here")));
    }
    let mut names = Names::of(func);
    rename_binders(&mut func.body, own, &mut names);
    // What still says `own` is not bound by anything: in Python that name is undefined.
    if let Some(span) = first_use(func, own) {
        return Err(Diagnostic::error(
            span,
            format!(
                "`{own}` is not defined here: the symbolic dimension named \"{own}\" is `{}` in this file",
                alias.python
            ),
        )
        .with_note_at(alias.span, "declared here"));
    }
    let mut to_own = |e: Expr| match &e.kind {
        ExprKind::Var(n) if *n == alias.python => Expr::new(ExprKind::Var(own.to_string()), e.span),
        _ => e,
    };
    for p in &mut func.params {
        for d in &mut p.shape {
            *d = map_expr(d, &mut to_own);
        }
    }
    for c in &mut func.space.constraints {
        *c = map_expr(c, &mut to_own);
    }
    map_body_exprs(&mut func.body, &mut to_own);
    for d in &mut func.dims {
        if d.name == alias.python {
            d.name = own.to_string();
        }
    }
    Ok(())
}

/// The kernels among `stmt` and its nested statements.
fn kernels(stmt: &Stmt) -> Vec<&crate::ir::Kernel> {
    let mut out = Vec::new();
    for_each_stmt(std::slice::from_ref(stmt), &mut |s| {
        if let StmtKind::Kernel(k) = &s.kind {
            out.push(k);
        }
    });
    out
}

/// Renames every binder of `body` called `name` (lets, loop and block variables) to a
/// fresh name, with the uses it binds.
fn rename_binders(body: &mut [Stmt], name: &str, names: &mut Names) {
    for i in 0..body.len() {
        let (head, rest) = body.split_at_mut(i + 1);
        let stmt = &mut head[i];
        match &mut stmt.kind {
            StmtKind::Let { var, .. } if var.name == name => {
                let fresh = names.suffixed(name);
                rename_bound_uses(rest, name, &fresh);
                var.name = fresh;
            }
            StmtKind::For(f) if f.var.name == name => {
                let fresh = names.suffixed(name);
                rename_bound_uses(&mut f.body, name, &fresh);
                f.var.name = fresh;
            }
            StmtKind::Kernel(k) => {
                for v in &mut k.block_vars {
                    if v.name == name {
                        let fresh = names.suffixed(name);
                        rename_bound_uses(&mut k.body, name, &fresh);
                        v.name = fresh;
                    }
                }
            }
            _ => {}
        }
        for child in child_bodies_mut(stmt) {
            rename_binders(child, name, names);
        }
    }
}

/// The first use of the scalar `name` in `func`'s shapes, constraints and body.
fn first_use(func: &PrimFunc, name: &str) -> Option<Span> {
    let mut found = None;
    let mut look = |e: &Expr| {
        if found.is_none() && matches!(&e.kind, ExprKind::Var(n) if n == name) {
            found = Some(e.span);
        }
    };
    for e in func
        .params
        .iter()
        .flat_map(|p| &p.shape)
        .chain(&func.space.constraints)
    {
        for_each_subexpr(e, &mut look);
    }
    for_each_stmt(&func.body, &mut |s| {
        for e in crate::visit::stmt_exprs(s) {
            for_each_subexpr(e, &mut look);
        }
    });
    found
}

impl crate::syntax::lower::Lowerer {
    /// Records `python = T.dynamic("own")` (`span`: the call). `own` must lex as one name:
    /// it is written as one in the printed IR.
    pub fn dim_alias(&mut self, python: &str, own: &str, span: Span) -> Option<()> {
        let (tokens, errors) = crate::syntax::lexer::lex(own);
        let one_name = errors.is_empty()
            && matches!(tokens.as_slice(), [(_, crate::syntax::lexer::Tok::Name(n), _)] if n == own);
        if !one_name {
            return self.fail(
                Diagnostic::error(
                    span,
                    format!("the name of symbolic dimension `{python}`, \"{own}\", is not an identifier"),
                )
                .with_note(format!("write `{python} = T.dynamic(\"{python}\")`")),
            );
        }
        self.dim_aliases.push(DimAlias {
            python: python.to_string(),
            own: own.to_string(),
            span,
        });
        Some(())
    }
}
