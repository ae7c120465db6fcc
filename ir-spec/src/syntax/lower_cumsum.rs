//! `T.cumsum(src, dst=None, dim=0, reverse=False)` (tile level): TileLang's inclusive prefix
//! sum along one dimension of a shared or fragment tile, written out here in the front end
//! as what it means — a copy into `dst` when there is one, then, for every index of the other
//! dimensions (a `T.Parallel` nest), a serial loop that adds each element's predecessor into
//! it (from the far end when `reverse`): `dst[.., t + 1, ..] += dst[.., t, ..]`. A fragment
//! (spread over the threads) is scanned in a shared copy, `<src>_scan`, and copied back. The passes
//! already lower both forms on both targets (docs/ir.md, `T.cumsum`). The sums are taken in
//! order along the dimension; TileLang's shared-memory scan may associate them differently,
//! so float results agree within rounding.

use crate::diagnostic::Diagnostic;
use crate::ir::{BinOp, Expr, ExprKind, For, ForKind, Ident, Range, Region, Scope, Stmt, StmtKind};
use crate::span::Span;
use crate::syntax::ast;
use crate::syntax::lower::Lowerer;

impl Lowerer {
    /// Appends the statements of `T.cumsum(...)` (call `e`) to `out`.
    pub fn cumsum(&mut self, e: &ast::Expr, out: &mut Vec<Stmt>) {
        let ast::ExprKind::Call(_, args) = &e.kind else {
            return;
        };
        let span = e.span;
        let Some(a) = self.bind("T.cumsum", span, args, &["src", "dst", "dim", "reverse"], 1)
        else {
            return;
        };
        let name = |lw: &mut Self, x: &ast::Expr| -> Option<Ident> {
            match &x.kind {
                ast::ExprKind::Name(n) if lw.buffers.contains_key(n) => {
                    lw.view_misuse(n, x.span)?;
                    Some(Ident::new(n.clone(), x.span))
                }
                _ => lw.fail(Diagnostic::error(
                    x.span,
                    "`T.cumsum` takes whole buffers by name (a shared or fragment tile)",
                )),
            }
        };
        let Some(src) = a[0].and_then(|x| name(self, x)) else {
            return;
        };
        let dst = match a[1] {
            None => None,
            Some(x) if matches!(x.kind, ast::ExprKind::None) => None,
            Some(x) => match name(self, x) {
                Some(d) => Some(d),
                None => return,
            },
        };
        let dim = match a[2] {
            Some(d) => match self.const_int(d, "`dim`") {
                Some(v) => v,
                None => return,
            },
            None => 0,
        };
        let reverse = match a[3] {
            Some(r) => match self.const_bool(r, "`reverse`") {
                Some(v) => v,
                None => return,
            },
            None => false,
        };
        let Some(shape) = self.buffers.get(&src.name).map(|b| b.shape.clone()) else {
            return;
        };
        let extents: Option<Vec<i64>> = shape.iter().map(Expr::as_int).collect();
        let Some(extents) = extents else {
            self.error(Diagnostic::error(
                src.span,
                format!(
                    "`T.cumsum` needs a tile of constant shape; `{}` has none",
                    src.name
                ),
            ));
            return;
        };
        let rank = extents.len() as i64;
        let axis = if dim < 0 { dim + rank } else { dim };
        let Some(axis) = usize::try_from(axis).ok().filter(|&d| d < extents.len()) else {
            let at = a[2].map_or(span, |d| d.span);
            self.error(Diagnostic::error(
                at,
                format!("`dim` is {dim}, but `{}` has {rank} dimensions", src.name),
            ));
            return;
        };
        if let Some(d) = &dst {
            let dshape: Option<Vec<i64>> = self
                .buffers
                .get(&d.name)
                .and_then(|b| b.shape.iter().map(Expr::as_int).collect());
            let ddtype = self.buffers.get(&d.name).map(|b| b.dtype);
            let sdtype = self.buffers.get(&src.name).map(|b| b.dtype);
            if ddtype != sdtype {
                self.error(Diagnostic::error(
                    d.span,
                    format!(
                        "`T.cumsum` sums in the tile's dtype: `{}` must have the dtype of `{}`",
                        d.name, src.name
                    ),
                ));
                return;
            }
            if dshape.as_ref() != Some(&extents) {
                self.error(Diagnostic::error(
                    d.span,
                    format!(
                        "`T.cumsum` writes into `{}`, which must have the shape of `{}`, {extents:?}",
                        d.name, src.name
                    ),
                ));
                return;
            }
        }
        let target = dst.clone().unwrap_or_else(|| src.clone());
        // A fragment is spread over the threads, so a scan along it runs in a shared copy.
        let fragment = |lw: &Self, b: &Ident| {
            lw.kernels.last().is_some_and(|k| {
                k.allocs
                    .iter()
                    .any(|a| a.name.name == b.name && a.scope == Scope::Fragment)
            })
        };
        let work = if fragment(self, &src) || fragment(self, &target) {
            let Some(dtype) = self.buffers.get(&src.name).map(|b| b.dtype) else {
                return;
            };
            // A name no source name and no buffer of the function has (a second scan of the
            // same fragment gets `<src>_scan_1`).
            let base = format!("{}_scan", src.name);
            let mut fresh = self.generated_name(&base);
            let mut n = 1;
            while self.buffers.contains_key(&fresh) {
                fresh = self.generated_name(&format!("{base}_{n}"));
                n += 1;
            }
            let name = ast::Ident { name: fresh, span };
            let Some(decl) = self.declare(&name, shape.clone(), dtype, Scope::Shared, span) else {
                return;
            };
            let ident = decl.name.clone();
            if let Some(k) = self.kernels.last_mut() {
                k.allocs.push(decl);
            }
            ident
        } else {
            target.clone()
        };
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
        let copy = |from: &Ident, to: &Ident| {
            Stmt::new(
                StmtKind::Copy {
                    src: whole(from),
                    dst: whole(to),
                },
                span,
            )
        };
        if work.name != src.name {
            out.push(copy(&src, &work));
        }
        let n = extents[axis];
        if n >= 2 {
            out.push(self.scan(&work, &extents, axis, reverse, span));
        }
        if work.name != target.name {
            out.push(copy(&work, &target));
        }
    }

    /// The in-place scan of tile `target` (of constant `extents`) along `axis`.
    fn scan(
        &mut self,
        target: &Ident,
        extents: &[i64],
        axis: usize,
        reverse: bool,
        span: Span,
    ) -> Stmt {
        let n = extents[axis];
        let vars: Vec<String> = (0..extents.len())
            .map(|d| self.generated_name(&format!("cumsum_i{d}")))
            .collect();
        // Element `t + 1` takes in element `t` (reverse: `n - 2 - t` takes `n - 1 - t`).
        let step = Expr::var(vars[axis].as_str());
        let (to, from) = if reverse {
            (
                Expr::binary(BinOp::Sub, Expr::int(n - 2), step.clone(), span),
                Expr::binary(BinOp::Sub, Expr::int(n - 1), step, span),
            )
        } else {
            (
                Expr::binary(BinOp::Add, step.clone(), Expr::int(1), span),
                step,
            )
        };
        let at = |along: Expr| -> Vec<Expr> {
            (0..extents.len())
                .map(|d| {
                    if d == axis {
                        along.clone()
                    } else {
                        Expr::var(vars[d].as_str())
                    }
                })
                .collect()
        };
        let load = |indices: Vec<Expr>| {
            Expr::new(
                ExprKind::Load {
                    buffer: target.name.clone(),
                    indices,
                },
                span,
            )
        };
        let sum = Expr::binary(BinOp::Add, load(at(to.clone())), load(at(from)), span);
        let mut body = Stmt::new(
            StmtKind::Store {
                buffer: target.clone(),
                indices: at(to),
                value: sum,
            },
            span,
        );
        body = wrap(body, &vars[axis], n - 1, ForKind::Serial, span);
        for d in (0..extents.len()).rev().filter(|&d| d != axis) {
            body = wrap(body, &vars[d], extents[d], ForKind::Parallel, span);
        }
        body
    }
}

/// `for var in KIND(stop): body`.
fn wrap(body: Stmt, var: &str, stop: i64, kind: ForKind, span: Span) -> Stmt {
    Stmt::new(
        StmtKind::For(For {
            var: Ident::new(var, span),
            start: Expr::int(0),
            stop: Expr::int(stop),
            kind,
            body: vec![body],
        }),
        span,
    )
}
