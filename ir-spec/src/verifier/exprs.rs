//! Expression checks: name resolution, buffer ranks and constant indices of loads, typing
//! (through `crate::types::infer`, the one source of the typing rules), and buffer shapes.

use super::consts::const_int;
use super::scope::{DefKind, VarEntry};
use super::Checker;
use crate::diagnostic::Diagnostic;
use crate::dtype::DType;
use crate::ir::{BufferDecl, Expr, ExprKind};
use crate::span::Span;
use crate::types::{infer, Typed};
use crate::visit::for_each_subexpr;

/// Which namespace a lookup wanted.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Wanted {
    Value,
    Buffer,
}

fn is_buffer_kind(kind: DefKind) -> bool {
    matches!(kind, DefKind::Param | DefKind::Alloc)
}

impl<'f> Checker<'f> {
    /// The scalar variable `name`, or an error at `span` explaining why it is not available.
    pub(super) fn resolve_var(&mut self, name: &str, span: Span) -> Option<VarEntry> {
        if let Some(entry) = self.env.var(name) {
            return Some(entry);
        }
        self.unresolved(name, span, Wanted::Value);
        None
    }

    /// The buffer `name`, or an error at `span` explaining why it is not available.
    pub(super) fn resolve_buffer(&mut self, name: &str, span: Span) -> Option<&'f BufferDecl> {
        if let Some(decl) = self.env.buffer(name) {
            return Some(decl);
        }
        self.unresolved(name, span, Wanted::Buffer);
        None
    }

    fn unresolved(&mut self, name: &str, span: Span, wanted: Wanted) {
        let span = self.at(span);
        let what = match wanted {
            Wanted::Value => "value",
            Wanted::Buffer => "buffer",
        };
        // The name exists in scope, but in the other namespace.
        let in_other = match wanted {
            Wanted::Value => self.env.buffer(name).map(|_| "a buffer".to_string()),
            Wanted::Buffer => self.env.var(name).map(|_| "a scalar variable".to_string()),
        };
        if let Some(other) = in_other {
            let expected = match wanted {
                Wanted::Value => "a scalar value",
                Wanted::Buffer => "a buffer",
            };
            self.push(Diagnostic::error(
                span,
                format!("expected {expected}, found `{name}`, which is {other}"),
            ));
            return;
        }
        let Some(def) = self.all_defs.get(name).copied() else {
            self.push(Diagnostic::error(
                span,
                format!("cannot find {what} `{name}` in this scope"),
            ));
            return;
        };
        let already_seen = self.seen.contains_key(name);
        let mut diag = if is_buffer_kind(def.kind) != (wanted == Wanted::Buffer) {
            Diagnostic::error(span, format!("cannot find {what} `{name}` in this scope"))
        } else if !already_seen && def.kind == DefKind::Let {
            Diagnostic::error(span, format!("use of `{name}` before its definition"))
        } else {
            Diagnostic::error(span, format!("`{name}` is not in scope here"))
        };
        let note = if already_seen {
            format!(
                "`{name}` is defined here, as a {}, in a scope that does not enclose this use",
                def.kind
            )
        } else {
            format!("`{name}` is defined later, here, as a {}", def.kind)
        };
        diag = if def.span.is_dummy() {
            diag.with_note(note)
        } else {
            diag.with_note_at(def.span, note)
        };
        self.push(diag);
    }

    /// Checks names, loads and types of `expr`; its type when everything is known.
    pub(super) fn check_expr(&mut self, expr: &Expr) -> Option<Typed> {
        let mut nodes: Vec<&Expr> = Vec::new();
        for_each_subexpr(expr, &mut |e| nodes.push(e));
        let errors_before = self.diags.len();
        let mut unknown_type = false;
        for node in nodes {
            match &node.kind {
                ExprKind::Var(name) => match self.resolve_var(name, node.span) {
                    Some(VarEntry { dtype: None }) => unknown_type = true,
                    Some(_) => {}
                    None => unknown_type = true,
                },
                ExprKind::Load { buffer, indices } => {
                    if let Some(decl) = self.resolve_buffer(buffer, node.span) {
                        self.check_indices(decl, indices, node.span);
                    }
                }
                _ => {}
            }
        }
        if unknown_type || self.diags.len() > errors_before {
            return None;
        }
        let env = &self.env;
        let var = |n: &str| env.var(n).and_then(|v| v.dtype);
        let buf = |n: &str| env.buffer(n).map(|b| b.dtype);
        match infer(expr, &var, &buf) {
            Ok(t) => Some(t),
            Err((sub, message)) => {
                let span = self.at(sub.span);
                self.push(Diagnostic::error(span, message));
                None
            }
        }
    }

    /// Checks `expr` and that it is an integer; `what` names its role in the message.
    pub(super) fn expect_int(&mut self, expr: &Expr, what: &str) -> Option<Typed> {
        let t = self.check_expr(expr)?;
        if t.dtype.is_int() {
            Some(t)
        } else {
            self.error(
                expr.span,
                format!(
                    "mismatched types: {what} must be an integer, found {}",
                    t.dtype
                ),
            );
            None
        }
    }

    /// Checks `expr` and that it is a bool; `what` names its role in the message.
    pub(super) fn expect_bool(&mut self, expr: &Expr, what: &str) {
        if let Some(t) = self.check_expr(expr) {
            if !t.dtype.is_bool() {
                self.error(
                    expr.span,
                    format!("mismatched types: {what} must be bool, found {}", t.dtype),
                );
            }
        }
    }

    /// Rank of an index list. (Whether the indices are inside the buffer is the bounds
    /// rule, `bounds.rs`, for loads and stores; [`Self::check_constant_indices`] for the
    /// operands of intrinsics.)
    pub(super) fn check_indices(
        &mut self,
        decl: &BufferDecl,
        indices: &[Expr],
        span: Span,
    ) -> bool {
        let name = &decl.name.name;
        if indices.len() != decl.shape.len() {
            self.error(
                span,
                format!(
                    "buffer `{name}` has rank {} but is indexed with {} {}",
                    decl.shape.len(),
                    indices.len(),
                    plural(indices.len(), "index", "indices")
                ),
            );
            return false;
        }
        true
    }

    /// Constant indices of an intrinsic's operand inside the buffer.
    pub(super) fn check_constant_indices(
        &mut self,
        decl: &BufferDecl,
        indices: &[Expr],
        span: Span,
    ) {
        let name = &decl.name.name;
        for (axis, (index, dim)) in indices.iter().zip(&decl.shape).enumerate() {
            let Some(i) = const_int(index) else {
                continue;
            };
            // A dimension ≤ 0 is reported once, at the declaration; indexing such a buffer
            // is not a second error.
            let dim = const_int(dim).filter(|&d| d > 0);
            let outside = i < 0 || dim.is_some_and(|d| i >= d);
            if outside {
                let extent = dim.map(|d| format!(" (extent {d})")).unwrap_or_default();
                self.error(
                    if index.span.is_dummy() {
                        span
                    } else {
                        index.span
                    },
                    format!("index {i} is out of bounds for dimension {axis} of `{name}`{extent}"),
                );
            }
        }
    }

    /// A value of `found` dtype stored into `decl`: numeric values convert to the buffer's
    /// dtype; bool goes only with bool.
    pub(super) fn check_value_fits(&mut self, decl: &BufferDecl, found: DType, span: Span) {
        if decl.dtype.is_bool() != found.is_bool() {
            self.error(
                span,
                format!(
                    "mismatched types: `{}` holds {} but the value is {found}",
                    decl.name.name, decl.dtype
                ),
            );
        }
    }

    /// The shape of a parameter or allocation: at least one dimension, each an integer
    /// expression of constants and symbolic dims, constants positive.
    pub(super) fn buffer_decl(&mut self, decl: &BufferDecl) {
        let name = &decl.name.name;
        if decl.shape.is_empty() {
            self.error(
                decl.name.span,
                format!("buffer `{name}` must have at least one dimension"),
            );
        }
        let mut reported_empty = false;
        for dim in &decl.shape {
            let mut foreign: Vec<&Expr> = Vec::new();
            for_each_subexpr(dim, &mut |e| match &e.kind {
                ExprKind::Load { .. } => foreign.push(e),
                ExprKind::Var(v)
                    if !self.info.dims.contains(v)
                        && (self.env.var(v).is_some() || self.all_defs.contains_key(v)) =>
                {
                    foreign.push(e)
                }
                _ => {}
            });
            if let Some(e) = foreign.first() {
                self.error(
                    e.span,
                    format!(
                        "the shape of `{name}` may only use constants and symbolic dimensions, \
                         found `{e}`"
                    ),
                );
                continue;
            }
            if self.expect_int(dim, "a buffer dimension").is_none() {
                continue;
            }
            if let Some(d) = const_int(dim).filter(|&d| d <= 0) {
                // One error per buffer: the regions and indices that use this shape say
                // nothing more (see `Checker::empty_dims`).
                self.empty_dims.push((dim.span.start, dim.span.end));
                if !reported_empty {
                    reported_empty = true;
                    let mut diag = Diagnostic::error(
                        self.at(dim.span),
                        format!("dimension of `{name}` must be positive, found {d}"),
                    );
                    if d == 0 {
                        diag = diag.with_note("a buffer cannot be empty");
                    }
                    self.push(diag);
                }
            }
        }
    }
}

pub(super) fn plural<'a>(n: usize, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 {
        one
    } else {
        many
    }
}
