//! Lowering of the thread-level target intrinsics (`T.cp_async`, `T.cp_async_commit`,
//! `T.cp_async_wait`, `T.ldmatrix`, `T.mma_sync`) and of the layouts of
//! `T.annotate_layout` (`T.make_swizzled_layout`, `T.make_padded_layout`,
//! `T.mma_accumulator_layout`).
//!
//! Only the shape of the call is checked here (arguments present, constants constant,
//! operands written `buf[i, j]`); the values (`bytes` in {4, 8, 16}, scopes, dtypes, …) are
//! the verifier's rules.

use crate::diagnostic::Diagnostic;
use crate::ir::{ElemRef, Ident, Intrinsic, Layout, Stmt, StmtKind};
use crate::span::Span;
use crate::syntax::ast;
use crate::syntax::lower::Lowerer;

impl Lowerer {
    /// `T.cp_async(dst, src, bytes[, pred])`.
    pub fn cp_async(&mut self, span: Span, args: &[ast::Arg]) -> Option<Stmt> {
        let a = self.bind(
            "T.cp_async",
            span,
            args,
            &["dst", "src", "bytes", "pred"],
            3,
        )?;
        let dst = self.elem_ref(a[0]?, "T.cp_async");
        let src = self.elem_ref(a[1]?, "T.cp_async");
        let bytes = self.const_int(a[2]?, "the byte count of `T.cp_async`");
        let pred = match a[3] {
            Some(p) => Some(self.expr(p)?),
            None => None,
        };
        let intrinsic = Intrinsic::CpAsync {
            dst: dst?,
            src: src?,
            bytes: bytes?,
            pred,
        };
        Some(Stmt::new(StmtKind::Intrinsic(intrinsic), span))
    }

    /// `T.cp_async_commit()`.
    pub fn cp_async_commit(&mut self, span: Span, args: &[ast::Arg]) -> Option<Stmt> {
        self.bind("T.cp_async_commit", span, args, &[], 0)?;
        Some(Stmt::new(StmtKind::Intrinsic(Intrinsic::CommitGroup), span))
    }

    /// `T.cp_async_wait(n)`.
    pub fn cp_async_wait(&mut self, span: Span, args: &[ast::Arg]) -> Option<Stmt> {
        let a = self.bind("T.cp_async_wait", span, args, &["n"], 1)?;
        let n = self.const_int(a[0]?, "the group count of `T.cp_async_wait`")?;
        Some(Stmt::new(
            StmtKind::Intrinsic(Intrinsic::WaitGroup(n)),
            span,
        ))
    }

    /// `T.ldmatrix(dst, src, num=4, trans=False)` (`num` and `trans` default to 4 and
    /// `False`; the printer always writes both).
    pub fn ldmatrix(&mut self, span: Span, args: &[ast::Arg]) -> Option<Stmt> {
        let a = self.bind("T.ldmatrix", span, args, &["dst", "src", "num", "trans"], 2)?;
        let dst = self.elem_ref(a[0]?, "T.ldmatrix");
        let src = self.elem_ref(a[1]?, "T.ldmatrix");
        let num = match a[2] {
            Some(n) => self.const_int(n, "`num` of `T.ldmatrix`"),
            None => Some(4),
        };
        let trans = match a[3] {
            Some(t) => self.const_bool(t, "`trans` of `T.ldmatrix`"),
            None => Some(false),
        };
        let intrinsic = Intrinsic::Ldmatrix {
            dst: dst?,
            src: src?,
            num: num?,
            trans: trans?,
        };
        Some(Stmt::new(StmtKind::Intrinsic(intrinsic), span))
    }

    /// `T.mma_sync(acc, a, b)`.
    pub fn mma_sync(&mut self, span: Span, args: &[ast::Arg]) -> Option<Stmt> {
        let a = self.bind("T.mma_sync", span, args, &["acc", "a", "b"], 3)?;
        let acc = self.elem_ref(a[0]?, "T.mma_sync");
        let x = self.elem_ref(a[1]?, "T.mma_sync");
        let y = self.elem_ref(a[2]?, "T.mma_sync");
        let intrinsic = Intrinsic::Mma {
            acc: acc?,
            a: x?,
            b: y?,
        };
        Some(Stmt::new(StmtKind::Intrinsic(intrinsic), span))
    }

    /// An intrinsic operand `buf[i, j]`: where a run of consecutive elements starts.
    fn elem_ref(&mut self, e: &ast::Expr, what: &str) -> Option<ElemRef> {
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
                 bytes=B)`, `T.make_padded_layout({buf}, pad=P)` or \
                 `T.mma_accumulator_layout({buf}, warps_m=M, warps_n=N)`"
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
