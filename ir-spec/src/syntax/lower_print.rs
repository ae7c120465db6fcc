//! TileLang's `T.print(obj=None, msg="", warp_group_id=0, warp_id=0)`, written out as the
//! print intrinsics (`crate::intrinsic`, `print.rs`) the way TileLang's macro expands it:
//!
//! - an expression: `T.print_value(value, msg=…)`, every thread that runs it printing (the
//!   default message `expr<…>` is the expression's text);
//! - nothing but `msg=…`: `T.print_msg(msg=…)`;
//! - a shared buffer: a serial loop over its elements in row-major order, each printed by one
//!   thread, `warp_group_id * 128 + warp_id * 32` (default 0), with its flat index
//!   (`T.print_elem`); a fragment is first copied into a shared tile `<name>_print` (TileLang
//!   copies it too); a global buffer is printed by every thread (TileLang's condition there
//!   is true). The default message is `buffer<NAME, DTYPE>`.
//!
//! A buffer of per-thread registers (`T.alloc_local`, `T.alloc_var`) is refused, located:
//! print its elements one by one. The printed IR spells the intrinsics by their own names,
//! which read back unchanged.

use crate::diagnostic::Diagnostic;
use crate::intrinsic::{Intrinsic, EVERY_LANE};
use crate::ir::{BinOp, ElemRef, Expr, For, ForKind, Ident, Range, Region, Scope, Stmt, StmtKind};
use crate::span::Span;
use crate::syntax::ast;
use crate::syntax::lower::Lowerer;

impl Lowerer {
    /// Appends the statements of the call `T.print(...)` (`e`) to `out`.
    pub fn print(&mut self, e: &ast::Expr, out: &mut Vec<Stmt>) {
        let ast::ExprKind::Call(_, args) = &e.kind else {
            return;
        };
        let span = e.span;
        let names = ["obj", "msg", "warp_group_id", "warp_id"];
        let Some(a) = self.bind("T.print", span, args, &names, 0) else {
            return;
        };
        let msg = match a[1] {
            Some(m) => match self.string(m, "the message of `T.print`") {
                Some(m) => Some(m.to_string()),
                None => return,
            },
            None => None,
        };
        let lane_part = |lw: &mut Self, x: Option<&ast::Expr>, what: &str| match x {
            Some(x) => lw.const_int(x, what),
            None => Some(0),
        };
        let Some(group) = lane_part(self, a[2], "`warp_group_id`") else {
            return;
        };
        let Some(warp) = lane_part(self, a[3], "`warp_id`") else {
            return;
        };
        let obj = a[0].filter(|x| !matches!(x.kind, ast::ExprKind::None));
        let Some(obj) = obj else {
            match msg.filter(|m| !m.is_empty()) {
                Some(msg) => out.push(intrinsic(Intrinsic::PrintMsg { msg }, span)),
                None => self.error(Diagnostic::error(
                    span,
                    "`T.print` with nothing to print: give a value, a buffer or `msg=\"…\"`",
                )),
            }
            return;
        };
        if let ast::ExprKind::Name(n) = &obj.kind {
            if self.buffers.contains_key(n) && !self.vars.contains(n) {
                let lane = group
                    .saturating_mul(128)
                    .saturating_add(warp.saturating_mul(32));
                self.print_buffer(&Ident::new(n.clone(), obj.span), msg, lane, span, out);
                return;
            }
        }
        let Some(value) = self.expr(obj) else {
            return;
        };
        let msg = msg.unwrap_or_else(|| format!("expr<{}>", crate::printer::expr_text(&value)));
        out.push(intrinsic(Intrinsic::Print { value, msg }, span));
    }

    /// `T.print(buf)`: every element of `buf`, by one thread (`lane`) for shared memory (a
    /// fragment through a shared copy), by every thread for a global buffer.
    fn print_buffer(
        &mut self,
        buf: &Ident,
        msg: Option<String>,
        lane: i64,
        span: Span,
        out: &mut Vec<Stmt>,
    ) {
        let Some(info) = self.buffers.get(&buf.name) else {
            return;
        };
        let (shape, dtype) = (info.shape.clone(), info.dtype);
        let extents: Option<Vec<i64>> = shape.iter().map(Expr::as_int).collect();
        let Some(extents) = extents else {
            self.error(Diagnostic::error(
                buf.span,
                format!(
                    "`T.print` prints a buffer of constant shape; `{}` has none",
                    buf.name
                ),
            ));
            return;
        };
        let msg = msg.unwrap_or_else(|| format!("buffer<{}, {dtype}>", buf.name));
        let scope = self.print_scope(&buf.name);
        let (printed, lane) = match scope {
            Scope::Shared => (buf.clone(), lane),
            Scope::Global => (buf.clone(), EVERY_LANE),
            Scope::Fragment => {
                // Spread over the threads: one thread prints it from a shared copy.
                let base = format!("{}_print", buf.name);
                let mut fresh = self.generated_name(&base);
                let mut n = 1;
                while self.buffers.contains_key(&fresh) {
                    fresh = self.generated_name(&format!("{base}_{n}"));
                    n += 1;
                }
                let name = ast::Ident { name: fresh, span };
                let Some(decl) = self.declare(&name, shape.clone(), dtype, Scope::Shared, span)
                else {
                    return;
                };
                let copy = decl.name.clone();
                if let Some(k) = self.kernels.last_mut() {
                    k.allocs.push(decl);
                }
                let whole = |b: &Ident| Region {
                    buffer: b.clone(),
                    ranges: extents
                        .iter()
                        .map(|&n| Range {
                            start: Expr::int(0),
                            extent: Expr::int(n),
                        })
                        .collect(),
                    span: b.span,
                };
                out.push(Stmt::new(
                    StmtKind::Copy {
                        src: whole(buf),
                        dst: whole(&copy),
                    },
                    span,
                ));
                (copy, lane)
            }
            Scope::Local => {
                self.error(
                    Diagnostic::error(
                        buf.span,
                        format!(
                            "`T.print` of `{}`, a buffer of per-thread registers, is not supported",
                            buf.name
                        ),
                    )
                    .with_note("print its elements: `T.print(buf[i])`"),
                );
                return;
            }
        };
        let total: i64 = extents.iter().product();
        if total == 0 {
            return;
        }
        // i -> (i // stride_k) % extent_k, row-major (no division by the last stride, 1; no
        // remainder of the first, which i < total keeps in range).
        let var = self.generated_name("print_i");
        let flat = Expr::var(var.as_str());
        let mut indices = Vec::with_capacity(extents.len());
        let mut stride = total;
        for (k, &n) in extents.iter().enumerate() {
            stride /= n.max(1);
            let q = if stride == 1 {
                flat.clone()
            } else {
                Expr::binary(BinOp::FloorDiv, flat.clone(), Expr::int(stride), span)
            };
            indices.push(if k == 0 {
                q
            } else {
                Expr::binary(BinOp::FloorMod, q, Expr::int(n), span)
            });
        }
        let elem = ElemRef {
            buffer: printed,
            indices,
        };
        let print = intrinsic(
            Intrinsic::PrintElem {
                elem,
                index: flat,
                msg,
                lane,
            },
            span,
        );
        out.push(Stmt::new(
            StmtKind::For(For {
                var: Ident::new(var, span),
                start: Expr::int(0),
                stop: Expr::int(total),
                kind: ForKind::Serial,
                body: vec![print],
            }),
            span,
        ));
    }

    /// The scope of a buffer the function knows: a kernel's allocation, else a parameter or
    /// a function-level tensor (global).
    fn print_scope(&self, name: &str) -> Scope {
        self.kernels
            .iter()
            .rev()
            .flat_map(|k| k.allocs.iter())
            .find(|a| a.name.name == name)
            .map_or(Scope::Global, |a| a.scope)
    }
}

fn intrinsic(call: Intrinsic, span: Span) -> Stmt {
    Stmt::new(StmtKind::Intrinsic(call), span)
}
