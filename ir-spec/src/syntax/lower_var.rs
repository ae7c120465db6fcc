//! `x = T.alloc_var(dtype, init)`: TileLang's scalar variable. As in TileLang (a one-element
//! buffer of scope `local.var`), it is a one-element `local` buffer: the allocation is
//! hoisted into the kernel like any other, `init` (if given) becomes the store `x[0] = init`
//! where the allocation is written, and afterwards the name stands for its element — a read
//! of `x` is `x[0]`, `x = e` is the store `x[0] = e`, `x += e` is `x[0] = x[0] + e`. The
//! printed IR therefore shows the buffer form, which parses back to the same IR.
//! Whether such a variable may drive block-level control flow is the uniformity analysis'
//! question (`verifier::uniform`), exactly as for any one-element local buffer.

use crate::diagnostic::Diagnostic;
use crate::ir::{Expr, ExprKind, Ident, Scope, Stmt, StmtKind};
use crate::span::Span;
use crate::syntax::ast;
use crate::syntax::lower::Lowerer;

impl Lowerer {
    /// `x = T.alloc_var(dtype, init=None, scope="local.var")` (TileLang also takes `init`
    /// as the second positional argument). Returns the initializing store, if any.
    pub fn alloc_var(
        &mut self,
        ident: &ast::Ident,
        call_span: Span,
        args: &[ast::Arg],
        stmt_span: Span,
    ) -> Option<Stmt> {
        let a = self.bind(
            "T.alloc_var",
            call_span,
            args,
            &["dtype", "init", "scope"],
            1,
        )?;
        // `T.alloc_var(dtype, "local.var")` puts the scope second.
        let (init, scope) = match (a[1], a[2]) {
            (Some(s), None) if matches!(s.kind, ast::ExprKind::Str(_)) => (None, Some(s)),
            other => other,
        };
        if let Some(s) = scope {
            let text = self.string(s, "the scope")?;
            if text != "local.var" && text != "local" {
                return self.fail(
                    Diagnostic::error(
                        s.span,
                        format!("unsupported scope \"{text}\" for `T.alloc_var`"),
                    )
                    .with_note("a variable lives in each thread's registers: \"local.var\""),
                );
            }
        }
        let dtype = self.dtype(a[0]?)?;
        let init = match init {
            Some(e) => Some(self.expr(e)?),
            None => None,
        };
        self.open_kernel(call_span, "an allocation")?;
        let decl = self.declare(ident, vec![Expr::int(1)], dtype, Scope::Local, stmt_span)?;
        if let Some(k) = self.kernels.last_mut() {
            k.allocs.push(decl);
        }
        self.vars.insert(ident.name.clone());
        init.map(|value| element_store(&ident.name, ident.span, value, stmt_span))
    }

    /// Whether `name` is a `T.alloc_var` variable (its reads and writes are of element 0).
    pub fn is_var(&self, name: &str) -> bool {
        self.vars.contains(name)
    }
}

/// `x[0]`, the element a variable's name stands for.
pub fn element_load(name: &str, span: Span) -> Expr {
    Expr::new(
        ExprKind::Load {
            buffer: name.to_string(),
            indices: vec![Expr::new(ExprKind::Int(0), span)],
        },
        span,
    )
}

/// `x[0] = value`.
pub fn element_store(name: &str, name_span: Span, value: Expr, span: Span) -> Stmt {
    Stmt::new(
        StmtKind::Store {
            buffer: Ident::new(name, name_span),
            indices: vec![Expr::new(ExprKind::Int(0), name_span)],
            value,
        },
        span,
    )
}
