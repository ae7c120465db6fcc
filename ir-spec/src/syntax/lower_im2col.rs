//! `T.im2col(img, col, nhw_step, c_step, kernel, stride, dilation, pad)` (tile level):
//! TileLang's im2col tile fetch (its SIMT lowering, `LowerIm2ColSIMT` in src/op/copy.cc),
//! written out here in the front end as the `T.Parallel` nest of masked element loads it
//! means, which the passes already lower on both targets (see docs/ir.md `T.im2col`).

use crate::diagnostic::Diagnostic;
use crate::ir::{BinOp, Expr, ExprKind, For, ForKind, Ident, Stmt, StmtKind};
use crate::span::Span;
use crate::syntax::ast;
use crate::syntax::lower::Lowerer;
use crate::syntax::lower_view::arith;

const NAMES: [&str; 8] = [
    "img", "col", "nhw_step", "c_step", "kernel", "stride", "dilation", "pad",
];

impl Lowerer {
    /// `col[i, j] = im2col[nhw_step * rows + i, c_step * cols + j]` for the `(rows, cols)`
    /// buffer `col`, with `img` an NHWC parameter.
    pub fn im2col(&mut self, span: Span, args: &[ast::Arg]) -> Option<Stmt> {
        let a = self.bind("T.im2col", span, args, &NAMES, 8)?;
        let name = |lw: &mut Self, e: &ast::Expr| -> Option<(String, Span)> {
            match &e.kind {
                ast::ExprKind::Name(n) => Some((n.clone(), e.span)),
                _ => lw.fail(Diagnostic::error(e.span, "expected a buffer name")),
            }
        };
        let (img, img_span) = name(self, a[0]?)?;
        let (col, col_span) = name(self, a[1]?)?;
        self.view_misuse(&img, img_span)?;
        self.view_misuse(&col, col_span)?;
        if !self.params.contains(&img) {
            return self.fail(Diagnostic::error(
                img_span,
                format!("`T.im2col` reads a parameter (an NHWC image); `{img}` is not one"),
            ));
        }
        if self.params.contains(&col) {
            return self.fail(Diagnostic::error(
                col_span,
                format!("`T.im2col` writes a shared or fragment tile; `{col}` is a parameter"),
            ));
        }
        let ishape = self.buffers.get(&img)?.shape.clone();
        let Some(cinfo) = self.buffers.get(&col).cloned() else {
            return self.fail(Diagnostic::error(
                col_span,
                format!("unknown buffer `{col}`"),
            ));
        };
        let img_dtype = self.buffers.get(&img)?.dtype;
        if ishape.len() != 4 {
            return self.fail(Diagnostic::error(
                img_span,
                format!(
                    "`T.im2col`'s image is 4-D (N, H, W, C); `{img}` has {} dimensions",
                    ishape.len()
                ),
            ));
        }
        if cinfo.shape.len() != 2 {
            return self.fail(Diagnostic::error(
                col_span,
                format!(
                    "`T.im2col`'s tile is 2-D (rows, cols); `{col}` has {} dimensions",
                    cinfo.shape.len()
                ),
            ));
        }
        let nhw_step = self.expr(a[2]?)?;
        let c_step = self.expr(a[3]?)?;
        // Kernel size, stride, dilation, padding: literals in range, or integer expressions
        // of dims (a `T.const` a launch binds: TileLang's eager `jit` passes the kernel
        // size so), which the verifier types.
        let mut args: Vec<Expr> = Vec::with_capacity(4);
        for k in 0..4 {
            let e = a[4 + k]?;
            let v = self.expr(e)?;
            let min = if k == 3 { 0 } else { 1 };
            match v.as_int() {
                Some(n) if !(min..=1 << 16).contains(&n) => {
                    return self.fail(Diagnostic::error(
                        e.span,
                        format!(
                            "`T.im2col`'s `{}` must lie in {min}..=65536 (it is {n})",
                            NAMES[4 + k]
                        ),
                    ))
                }
                _ => args.push(v),
            }
        }
        let [kk, s, d, p]: [Expr; 4] = match args.try_into() {
            Ok(a) => a,
            Err(_) => return None,
        };
        let b = |op, x: Expr, y: Expr| arith(op, x, y, span);
        let int = Expr::int;
        let (n_, h_, w_, c_) = (
            ishape[0].clone(),
            ishape[1].clone(),
            ishape[2].clone(),
            ishape[3].clone(),
        );
        // 2P - D(K-1): what a stride-1 output adds to the input's extent (a literal when
        // all four are).
        let grow = match (kk.as_int(), d.as_int(), p.as_int()) {
            (Some(kk), Some(d), Some(p)) => int(2 * p - d * (kk - 1)),
            _ => b(
                BinOp::Sub,
                b(BinOp::Mul, int(2), p.clone()),
                b(BinOp::Mul, d.clone(), b(BinOp::Sub, kk.clone(), int(1))),
            ),
        };
        let grow_less_1 = match grow.as_int() {
            Some(g) => int(g - 1),
            None => b(BinOp::Sub, grow.clone(), int(1)),
        };
        // OH = (H + 2P - D(K-1) - 1) // S + 1, and OW alike.
        let out_dim = |x: Expr| match s.as_int() {
            Some(1) => b(BinOp::Add, x, grow.clone()),
            _ => b(
                BinOp::Add,
                b(
                    BinOp::FloorDiv,
                    b(BinOp::Add, x, grow_less_1.clone()),
                    s.clone(),
                ),
                int(1),
            ),
        };
        let (oh_n, ow_n) = (out_dim(h_.clone()), out_dim(w_.clone()));
        let (rows, cols) = (cinfo.shape[0].clone(), cinfo.shape[1].clone());
        let (vi, vj) = (
            &self.generated_name("im2col_i"),
            &self.generated_name("im2col_j"),
        );
        let m = b(
            BinOp::Add,
            b(BinOp::Mul, nhw_step, rows.clone()),
            Expr::var(vi),
        );
        let k = b(
            BinOp::Add,
            b(BinOp::Mul, c_step, cols.clone()),
            Expr::var(vj),
        );
        let ohw = b(BinOp::Mul, oh_n, ow_n.clone());
        let n = b(BinOp::FloorDiv, m.clone(), ohw.clone());
        let oh = b(
            BinOp::FloorDiv,
            b(BinOp::FloorMod, m.clone(), ohw),
            ow_n.clone(),
        );
        let ow = b(BinOp::FloorMod, m, ow_n);
        let kh = b(
            BinOp::FloorDiv,
            k.clone(),
            b(BinOp::Mul, kk.clone(), c_.clone()),
        );
        let kw = b(
            BinOp::FloorMod,
            b(BinOp::FloorDiv, k.clone(), c_.clone()),
            kk,
        );
        let c = b(BinOp::FloorMod, k, c_);
        let tap = |o: Expr, t: Expr| {
            b(
                BinOp::Sub,
                b(
                    BinOp::Add,
                    b(BinOp::Mul, o, s.clone()),
                    b(BinOp::Mul, t, d.clone()),
                ),
                p.clone(),
            )
        };
        let (h, w) = (tap(oh, kh), tap(ow, kw));
        // In the image: 0 <= h < H, 0 <= w < W (zero padding), and n < N (rows past the
        // last image read 0; TileLang reads past the buffer there).
        let mut cond = b(BinOp::Lt, n.clone(), n_);
        for (x, ext) in [(&h, h_), (&w, w_)] {
            cond = b(BinOp::And, cond, b(BinOp::Ge, x.clone(), int(0)));
            cond = b(BinOp::And, cond, b(BinOp::Lt, x.clone(), ext));
        }
        let load = Expr::new(
            ExprKind::Load {
                buffer: img,
                indices: vec![n, h, w, c],
            },
            span,
        );
        let zero = Expr::new(ExprKind::Cast(img_dtype, Box::new(int(0))), span);
        let value = Expr::new(
            ExprKind::Select(Box::new(cond), Box::new(load), Box::new(zero)),
            span,
        );
        let store = Stmt::new(
            StmtKind::Store {
                buffer: Ident::new(col, col_span),
                indices: vec![Expr::var(vi), Expr::var(vj)],
                value,
            },
            span,
        );
        let par = |var: &str, stop: Expr, body: Vec<Stmt>| {
            Stmt::new(
                StmtKind::For(For {
                    var: Ident::new(var, span),
                    start: int(0),
                    stop,
                    kind: ForKind::Parallel,
                    body,
                }),
                span,
            )
        };
        Some(par(vi, rows, vec![par(vj, cols, vec![store])]))
    }
}
