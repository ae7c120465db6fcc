//! Reducer rules (`T.alloc_reducer` / `T.finalize_reducer`, tile level; docs/ir.md,
//! "Reducers"):
//!
//! - RD1: a reducer names a fragment allocation of its kernel, once; its dtype is numeric.
//! - RD2: `T.finalize_reducer(R)` names a reducer of the enclosing kernel, sits directly in
//!   the kernel body (not in a loop or branch), once per reducer.
//! - RD3: before its finalize, a reducer is only cleared / filled (`T.clear(R)`,
//!   `T.fill(R, v)`) and updated with its own op: `R[idx] = R[idx] op e` (`op` is `+` for
//!   `"sum"`, `T.max` / `T.min` for `"max"` / `"min"`, either operand order), `e` not
//!   reading `R`. Every other access — a read, another store, a copy, a gemm, a reduction —
//!   is an error: the value is not combined yet.
//! - RD4: after its finalize, a reducer is an ordinary fragment and is not updated with
//!   `R[idx] = R[idx] op e` any more (an update after the combine point would be lost).

use super::Checker;
use crate::ir::{BinOp, Expr, ExprKind, Kernel, Reducer, Scope, Stmt, StmtKind};
use crate::visit::{for_each_stmt, for_each_subexpr, stmt_exprs};

impl<'f> Checker<'f> {
    pub(super) fn reducers(&mut self, k: &'f Kernel) {
        let mut valid: Vec<&Reducer> = Vec::new();
        for (i, r) in k.reducers.iter().enumerate() {
            if k.reducers[..i]
                .iter()
                .any(|p| p.buffer.name == r.buffer.name)
            {
                self.error(
                    r.span,
                    format!("`{}` is declared a reducer twice", r.buffer.name),
                );
                continue;
            }
            match k.allocs.iter().find(|a| a.name.name == r.buffer.name) {
                Some(a) if a.scope == Scope::Fragment => {
                    if !(a.dtype.is_float() || a.dtype.is_int()) {
                        self.error(
                            r.span,
                            format!(
                                "reducer `{}` has dtype {}; a reducer holds numbers",
                                r.buffer.name, a.dtype
                            ),
                        );
                    }
                    valid.push(r);
                }
                Some(a) => self.error(
                    r.span,
                    format!(
                        "reducer `{}` is a {} allocation; a reducer is a fragment",
                        r.buffer.name,
                        a.scope.name()
                    ),
                ),
                None => self.error(
                    r.span,
                    format!(
                        "reducer `{}` is not an allocation of this kernel",
                        r.buffer.name
                    ),
                ),
            }
        }
        // RD2: finalizes directly in the kernel body, once each, of reducers.
        let mut finalized: Vec<(&str, usize)> = Vec::new();
        for (i, stmt) in k.body.iter().enumerate() {
            let StmtKind::FinalizeReducer(name) = &stmt.kind else {
                continue;
            };
            if !valid.iter().any(|r| r.buffer.name == name.name) {
                self.error(
                    name.span,
                    format!(
                        "`{}` is not a reducer of this kernel (`T.alloc_reducer`)",
                        name.name
                    ),
                );
            } else if finalized.iter().any(|(n, _)| *n == name.name) {
                self.error(
                    stmt.span,
                    format!("reducer `{}` is finalized twice", name.name),
                );
            } else {
                finalized.push((&name.name, i));
            }
        }
        for stmt in &k.body {
            for child in crate::visit::child_bodies(stmt) {
                for_each_stmt(child, &mut |s| {
                    if let StmtKind::FinalizeReducer(name) = &s.kind {
                        self.error(
                            s.span,
                            format!(
                                "`T.finalize_reducer({})` must sit directly in the kernel body, not in a loop or branch",
                                name.name
                            ),
                        );
                    }
                });
            }
        }
        // RD3 / RD4, per reducer, by the top-level statement's position.
        for r in valid {
            let name = r.buffer.name.as_str();
            let at = finalized.iter().find(|(n, _)| *n == name).map(|&(_, i)| i);
            for (i, stmt) in k.body.iter().enumerate() {
                let open = at.is_none_or(|f| i < f);
                let mut errs: Vec<(crate::span::Span, String)> = Vec::new();
                for_each_stmt(std::slice::from_ref(stmt), &mut |s| {
                    reducer_access(s, r, open, &mut errs);
                });
                for (span, msg) in errs {
                    self.error(span, msg);
                }
            }
        }
    }
}

/// The RD3 / RD4 errors of statement `s` (not its children) for reducer `r`.
fn reducer_access(s: &Stmt, r: &Reducer, open: bool, errs: &mut Vec<(crate::span::Span, String)>) {
    let name = r.buffer.name.as_str();
    let read_before = |span| {
        (
            span,
            format!(
                "reducer `{name}` is read before `T.finalize_reducer({name})`: its updates are not combined yet"
            ),
        )
    };
    match &s.kind {
        StmtKind::Store {
            buffer,
            indices,
            value,
        } if buffer.name == name => {
            let update = reducer_update(r, indices, value);
            match (open, update) {
                (true, Some(e)) => {
                    for_each_subexpr(e, &mut |x| {
                        if matches!(&x.kind, ExprKind::Load { buffer, .. } if buffer == name) {
                            errs.push(read_before(x.span));
                        }
                    });
                    for i in indices {
                        loads_of(i, name, &mut |sp| errs.push(read_before(sp)));
                    }
                }
                (true, None) => errs.push((
                    s.span,
                    format!(
                        "reducer `{name}` (op=\"{}\") is updated only as `{name}[idx] = {}` before `T.finalize_reducer({name})`",
                        r.op.name(),
                        match r.op.combine() {
                            BinOp::Add => format!("{name}[idx] + value"),
                            BinOp::Max => format!("T.max({name}[idx], value)"),
                            _ => format!("T.min({name}[idx], value)"),
                        }
                    ),
                )),
                (false, Some(_)) => errs.push((
                    s.span,
                    format!(
                        "reducer `{name}` is updated after `T.finalize_reducer({name})`, where nothing combines it any more"
                    ),
                )),
                (false, None) => {}
            }
            return;
        }
        StmtKind::Fill { dst, .. } if dst.buffer.name == name => {}
        StmtKind::FinalizeReducer(_) => {}
        _ => {
            if open {
                for span in named_buffers(s, name) {
                    errs.push(read_before(span));
                }
            }
        }
    }
    if open {
        for e in stmt_exprs(s) {
            loads_of(e, name, &mut |sp| errs.push(read_before(sp)));
        }
    }
}

/// Where statement `s` names buffer `name` as a whole operand (regions, reductions, stores,
/// atomics); loads are found by `loads_of`.
fn named_buffers(s: &Stmt, name: &str) -> Vec<crate::span::Span> {
    let idents = crate::visit::stmt_buffer_idents(s);
    let spans: Vec<crate::span::Span> = idents
        .into_iter()
        .filter(|i| i.name == name)
        .map(|i| i.span)
        .collect();
    if spans.iter().any(|sp| sp.is_dummy()) {
        vec![s.span]
    } else {
        spans
    }
}

fn loads_of(e: &Expr, name: &str, f: &mut dyn FnMut(crate::span::Span)) {
    for_each_subexpr(e, &mut |x| {
        if matches!(&x.kind, ExprKind::Load { buffer, .. } if buffer == name) {
            f(x.span);
        }
    });
}

/// `e` when `value` is `R[indices] op e` or `e op R[indices]` with `r`'s op.
pub fn reducer_update<'e>(r: &Reducer, indices: &[Expr], value: &'e Expr) -> Option<&'e Expr> {
    let ExprKind::Binary(op, a, b) = &value.kind else {
        return None;
    };
    if *op != r.op.combine() {
        return None;
    }
    let is_self = |x: &Expr| {
        matches!(&x.kind, ExprKind::Load { buffer, indices: ix }
            if *buffer == r.buffer.name && ix.as_slice() == indices)
    };
    if is_self(a) {
        Some(b)
    } else if is_self(b) {
        Some(a)
    } else {
        None
    }
}
