//! The tuning space's spellings at module level (docs/ir.md, "Tuning space"):
//!
//! ```text
//! block_M, block_N = T.tunable([(128, 256), (64, 128)], default=(128, 256))
//! block_K = T.tunable([32, 64])                 # default: the first candidate
//! T.tune_constraint(block_M * block_N <= 32768)
//! ```
//!
//! Candidates are integer constants (folded expressions), one tuple per candidate with as
//! many values as names; the default is one of the candidates; names are new (not a symbolic
//! dimension, not declared twice). A constraint is a boolean expression of tunables and
//! symbolic dimensions. In the function a tunable is an `int32` name; the places that
//! need a number before the kernel is bound (`threads=`, `num_stages=`) take an expression
//! of tunables ([`Lowerer::tunable_int`]).

use crate::diagnostic::Diagnostic;
use crate::ir::{Dim, Expr, ExprKind, Ident};
use crate::syntax::ast;
use crate::syntax::lower::Lowerer;
use crate::tuning::Tunable;
use crate::visit::for_each_subexpr;

impl Lowerer {
    /// `names = T.tunable([...], default=...)`; `None` after reporting an error.
    pub fn tunable(
        &mut self,
        target: &ast::Expr,
        value: &ast::Expr,
        dims: &[Dim],
    ) -> Option<Tunable> {
        let ast::ExprKind::Call(_, args) = &value.kind else {
            return None;
        };
        let names: Vec<Ident> = match &target.kind {
            ast::ExprKind::Name(n) => vec![Ident::new(n.clone(), target.span)],
            ast::ExprKind::Tuple(items) => {
                let mut out = Vec::new();
                for item in items {
                    let ast::ExprKind::Name(n) = &item.kind else {
                        return self.fail(Diagnostic::error(item.span, "expected a name"));
                    };
                    out.push(Ident::new(n.clone(), item.span));
                }
                out
            }
            _ => {
                return self.fail(Diagnostic::error(
                    target.span,
                    "a tunable is bound to a name or a tuple of names",
                ))
            }
        };
        for (i, n) in names.iter().enumerate() {
            let twice =
                names[..i].iter().any(|m| m.name == n.name) || self.tunables.contains(&n.name);
            if twice || dims.iter().any(|d| d.name == n.name) {
                return self.fail(Diagnostic::error(
                    n.span,
                    format!("`{}` is already declared", n.name),
                ));
            }
        }
        let a = self.bind("T.tunable", value.span, args, &["candidates", "default"], 1)?;
        let list = a[0]?;
        let ast::ExprKind::List(items) = &list.kind else {
            return self.fail(
                Diagnostic::error(list.span, "the candidates of a tunable are a list")
                    .with_note("e.g. `T.tunable([64, 128], default=128)`"),
            );
        };
        if items.is_empty() {
            return self.fail(Diagnostic::error(list.span, "a tunable needs a candidate"));
        }
        let mut candidates = Vec::new();
        for item in items {
            let tuple = self.candidate(item, names.len())?;
            if candidates.contains(&tuple) {
                return self.fail(Diagnostic::error(
                    item.span,
                    "this candidate is listed twice",
                ));
            }
            candidates.push(tuple);
        }
        let default = match a[1] {
            Some(d) => {
                let tuple = self.candidate(d, names.len())?;
                if !candidates.contains(&tuple) {
                    return self.fail(
                        Diagnostic::error(d.span, "the default is not one of the candidates")
                            .with_note("the file must compile as written: list the default"),
                    );
                }
                tuple
            }
            None => candidates[0].clone(),
        };
        for n in &names {
            self.tunables.insert(n.name.clone());
        }
        Some(Tunable {
            names,
            candidates,
            default,
            span: target.span.to(value.span),
        })
    }

    /// One candidate: an integer for one name, a tuple of `arity` integers for several.
    fn candidate(&mut self, e: &ast::Expr, arity: usize) -> Option<Vec<i64>> {
        match (&e.kind, arity) {
            (ast::ExprKind::Tuple(items), n) if n > 1 => {
                if items.len() != n {
                    return self.fail(Diagnostic::error(
                        e.span,
                        format!("this candidate has {} values for {n} names", items.len()),
                    ));
                }
                items
                    .iter()
                    .map(|i| self.const_int(i, "a tunable's value"))
                    .collect()
            }
            (_, 1) => Some(vec![self.const_int(e, "a tunable's value")?]),
            _ => self.fail(Diagnostic::error(
                e.span,
                format!("expected a tuple of {arity} integers"),
            )),
        }
    }

    /// `T.tune_constraint(cond)`: a boolean expression of tunables and `dims`.
    pub fn tune_constraint(&mut self, call: &ast::Expr, dims: &[Dim]) -> Option<Expr> {
        let ast::ExprKind::Call(_, args) = &call.kind else {
            return None;
        };
        let a = self.bind("T.tune_constraint", call.span, args, &["cond"], 1)?;
        let cond = self.expr(a[0]?)?;
        let mut unknown = None;
        for_each_subexpr(&cond, &mut |x| {
            if let ExprKind::Var(n) = &x.kind {
                if unknown.is_none()
                    && !self.tunables.contains(n)
                    && !dims.iter().any(|d| &d.name == n)
                {
                    unknown = Some((n.clone(), x.span));
                }
            }
        });
        if let Some((n, at)) = unknown {
            return self.fail(
                Diagnostic::error(
                    at,
                    format!("`{n}` is neither a tunable nor a symbolic dimension"),
                )
                .with_note("a constraint speaks of the tuning space: declare the tunables first"),
            );
        }
        Some(cond)
    }

    /// An integer known once the tunables are bound: a constant, or an expression of
    /// tunables (`threads=threads`, `num_stages=stages`).
    pub fn tunable_int(&mut self, e: &ast::Expr, what: &str) -> Option<Expr> {
        let x = self.expr(e)?;
        if let Some(v) = crate::verifier::const_int(&x) {
            return Some(Expr::new(ExprKind::Int(v), x.span));
        }
        let mut only_tunables = true;
        for_each_subexpr(&x, &mut |s| match &s.kind {
            ExprKind::Var(n) => only_tunables &= self.tunables.contains(n),
            ExprKind::Load { .. } => only_tunables = false,
            _ => {}
        });
        if only_tunables {
            Some(x)
        } else {
            self.fail(
                Diagnostic::error(e.span, format!("{what} must be a constant integer")).with_note(
                    "or an expression of tunables (`T.tunable`), bound before compiling",
                ),
            )
        }
    }
}
