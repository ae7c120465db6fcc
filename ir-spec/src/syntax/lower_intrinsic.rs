//! Lowering of the thread-level target intrinsics (every call named in
//! `crate::intrinsic`, bound to its definition's parameters) and of the layouts of
//! `T.annotate_layout` (`T.make_swizzled_layout`, `T.make_padded_layout`,
//! `T.mma_accumulator_layout`).
//!
//! Only the shape of the call is checked here (arguments present, constants constant,
//! operands written `buf[i, j]`); the values (`bytes` in {4, 8, 16}, scopes, dtypes, …) are
//! the verifier's rules.

use crate::diagnostic::Diagnostic;
use crate::intrinsic::{self, ArgValue, ParamKind};
use crate::ir::{ElemRef, Ident, Intrinsic, Layout, RowsOf, Stmt, StmtKind};
use crate::span::Span;
use crate::syntax::ast;
use crate::syntax::lower::Lowerer;

impl Lowerer {
    /// A call of the intrinsic written `name`: each argument bound to its parameter by
    /// position or keyword, left-out parameters at their defaults.
    pub fn intrinsic(&mut self, name: &str, span: Span, args: &[ast::Arg]) -> Option<Stmt> {
        let def = intrinsic::lookup(name)?;
        let names: Vec<&str> = def.params.iter().map(|p| p.name).collect();
        let bound = self.bind(def.name, span, args, &names, def.required())?;
        let mut values = Vec::with_capacity(def.params.len());
        let mut ok = true;
        for (param, arg) in def.params.iter().zip(bound) {
            let what = format!("the {} of `{}`", param.role, def.name);
            let value = match (param.kind, arg) {
                (ParamKind::Ref(_), Some(e)) => self.elem_ref(e, def.name).map(ArgValue::Ref),
                (ParamKind::Int { .. } | ParamKind::IntRange { .. }, Some(e)) => {
                    self.const_int(e, &what).map(ArgValue::Int)
                }
                (ParamKind::Int { default, .. } | ParamKind::IntRange { default, .. }, None) => {
                    match default {
                        Some(v) => Some(ArgValue::Int(v)),
                        None => self.missing(def.name, param.name, span),
                    }
                }
                (ParamKind::IntTuple { .. }, Some(e)) => {
                    self.const_int_list(e, &what).map(ArgValue::Ints)
                }
                (ParamKind::Value { .. } | ParamKind::Scalar, Some(e)) => {
                    self.expr(e).map(ArgValue::Value)
                }
                (ParamKind::Value { default: Some(v) }, None) => {
                    Some(ArgValue::Value(crate::ir::Expr::int(v)))
                }
                (ParamKind::Text, Some(e)) => {
                    self.string(e, &what).map(|t| ArgValue::Text(t.to_string()))
                }
                (ParamKind::Text, None) => Some(ArgValue::Text(String::new())),
                (ParamKind::Bool { .. } | ParamKind::Flag, Some(e)) => {
                    self.const_bool(e, &what).map(ArgValue::Bool)
                }
                (ParamKind::Flag, None) => Some(ArgValue::Bool(false)),
                (ParamKind::Bool { default }, None) => match default {
                    Some(b) => Some(ArgValue::Bool(b)),
                    None => self.missing(def.name, param.name, span),
                },
                (ParamKind::Pred, Some(e)) => self.expr(e).map(|p| ArgValue::Pred(Some(p))),
                (ParamKind::Pred, None) => Some(ArgValue::Pred(None)),
                // A parameter after the first optional one may still be required
                // (`T.wgmma`'s `a_lbo`): `bind` checks only the leading ones.
                (
                    ParamKind::Ref(_)
                    | ParamKind::IntTuple { .. }
                    | ParamKind::Value { .. }
                    | ParamKind::Scalar,
                    None,
                ) => self.missing(def.name, param.name, span),
            };
            match value {
                Some(v) => values.push(v),
                None => ok = false,
            }
        }
        if !ok {
            return None;
        }
        match Intrinsic::from_args(def, values) {
            Some(call) => Some(Stmt::new(StmtKind::Intrinsic(call), span)),
            None => self.fail(Diagnostic::error(
                span,
                format!(
                    "internal error: the arguments of `{}` do not fit its definition",
                    def.name
                ),
            )),
        }
    }

    /// Reports that the call of `what` lacks its argument `name` (one without a default).
    fn missing<T>(&mut self, what: &str, name: &str, span: Span) -> Option<T> {
        self.fail(Diagnostic::error(
            span,
            format!("`{what}` is missing its argument `{name}`"),
        ))
    }

    /// An intrinsic operand `buf[i, j]`: where a run of consecutive elements starts.
    pub(crate) fn elem_ref(&mut self, e: &ast::Expr, what: &str) -> Option<ElemRef> {
        let ast::ExprKind::Subscript(base, items) = &e.kind else {
            let mut d = Diagnostic::error(
                e.span,
                format!("an operand of `{what}` is an element reference `buf[i, j]`"),
            );
            if let ast::ExprKind::Name(n) = &e.kind {
                d = d.with_note(format!(
                    "write `{n}[0]` (one index per dimension) for its start"
                ));
            }
            return self.fail(d);
        };
        let ast::ExprKind::Name(buffer) = &base.kind else {
            return self.fail(Diagnostic::error(base.span, "expected a buffer name"));
        };
        if let Some(s) = items
            .iter()
            .find(|i| matches!(i.kind, ast::ExprKind::Slice(..)))
        {
            return self.fail(
                Diagnostic::error(
                    s.span,
                    format!("an operand of `{what}` names one element; slices are not allowed"),
                )
                .with_note("the operand covers consecutive elements from that element on"),
            );
        }
        self.view_misuse(buffer, base.span)?;
        let indices = self.indices(items)?;
        Some(ElemRef {
            buffer: Ident::new(buffer.clone(), base.span),
            indices,
        })
    }

    /// The layout of one `T.annotate_layout` entry for buffer `buf`; `None` (after an
    /// error) when it is not one.
    pub fn layout(&mut self, buf: &str, v: &ast::Expr) -> Option<Layout> {
        let unsupported = |v: &ast::Expr| {
            Diagnostic::error(v.span, "unsupported layout").with_note(format!(
                "expected `T.make_swizzled_layout({buf})`, `T.make_swizzled_layout({buf}, \
                 bytes=B)`, `T.make_padded_layout({buf}, pad=P)`, \
                 `T.mma_accumulator_layout({buf}, warps_m=M, warps_n=N)`, \
                 `T.make_wgmma_swizzled_layout({buf}, bytes=B)`, \
                 `T.wgmma_accumulator_layout({buf}, warpgroups_m=M, warpgroups_n=N)`, \
                 `T.rows_layout({buf}, cols=N)`, \
                 `T.mma_rows_layout({buf}, warps_m=M, warps_n=N)` or \
                 `T.wgmma_rows_layout({buf}, warpgroups_m=M, warpgroups_n=N)`"
            ))
        };
        let ast::ExprKind::Call(f, largs) = &v.kind else {
            return self.fail(unsupported(v));
        };
        let name = f.dotted().unwrap_or_default();
        // The callee, its parameters, and how many are required.
        let (what, params, required): (&str, &[&str], usize) = match name.as_str() {
            "T.make_swizzled_layout"
            | "make_swizzled_layout"
            | "tilelang.layout.make_swizzled_layout" => {
                ("T.make_swizzled_layout", &["buffer", "bytes"], 1)
            }
            "T.make_padded_layout" => ("T.make_padded_layout", &["buffer", "pad"], 2),
            "T.mma_accumulator_layout" => (
                "T.mma_accumulator_layout",
                &["buffer", "warps_m", "warps_n"],
                3,
            ),
            "T.make_wgmma_swizzled_layout" => {
                ("T.make_wgmma_swizzled_layout", &["buffer", "bytes"], 2)
            }
            "T.wgmma_accumulator_layout" => (
                "T.wgmma_accumulator_layout",
                &["buffer", "warpgroups_m", "warpgroups_n"],
                3,
            ),
            "T.rows_layout" => ("T.rows_layout", &["buffer", "cols"], 2),
            "T.mma_rows_layout" => ("T.mma_rows_layout", &["buffer", "warps_m", "warps_n"], 3),
            "T.wgmma_rows_layout" => (
                "T.wgmma_rows_layout",
                &["buffer", "warpgroups_m", "warpgroups_n"],
                3,
            ),
            _ => return self.fail(unsupported(v)),
        };
        let a = self.bind(what, v.span, largs, params, required)?;
        let arg = a[0]?;
        if !matches!(&arg.kind, ast::ExprKind::Name(n) if n == buf) {
            return self.fail(Diagnostic::error(
                arg.span,
                format!("the layout of `{buf}` must be made from `{buf}` itself"),
            ));
        }
        match what {
            "T.make_swizzled_layout" => match a[1] {
                None => Some(Layout::Swizzled),
                Some(b) => Some(Layout::Swizzle {
                    bytes: self.const_int(b, "the swizzle width `bytes`")?,
                }),
            },
            "T.make_padded_layout" => Some(Layout::Padded {
                pad: self.const_int(a[1]?, "the padding `pad`")?,
            }),
            "T.make_wgmma_swizzled_layout" => Some(Layout::WgmmaSwizzle {
                bytes: self.const_int(a[1]?, "the swizzle width `bytes`")?,
            }),
            "T.rows_layout" => Some(Layout::Rows(RowsOf::Flat {
                cols: self.const_int(a[1]?, "the row length `cols`")?,
            })),
            "T.mma_rows_layout" => {
                let m = self.const_int(a[1]?, "`warps_m`");
                let n = self.const_int(a[2]?, "`warps_n`");
                Some(Layout::Rows(RowsOf::Mma {
                    warps_m: m?,
                    warps_n: n?,
                }))
            }
            "T.wgmma_rows_layout" => {
                let m = self.const_int(a[1]?, "`warpgroups_m`");
                let n = self.const_int(a[2]?, "`warpgroups_n`");
                Some(Layout::Rows(RowsOf::Wgmma {
                    warpgroups_m: m?,
                    warpgroups_n: n?,
                }))
            }
            "T.wgmma_accumulator_layout" => {
                let m = self.const_int(a[1]?, "`warpgroups_m`");
                let n = self.const_int(a[2]?, "`warpgroups_n`");
                Some(Layout::WgmmaAccumulator {
                    warpgroups_m: m?,
                    warpgroups_n: n?,
                })
            }
            _ => {
                let m = self.const_int(a[1]?, "`warps_m`");
                let n = self.const_int(a[2]?, "`warps_n`");
                Some(Layout::MmaAccumulator {
                    warps_m: m?,
                    warps_n: n?,
                })
            }
        }
    }
}
