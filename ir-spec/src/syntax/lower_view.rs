//! Buffer views, `v = T.Tensor(shape, dtype, p.data)` in a kernel: a contiguous row-major
//! reinterpretation of parameter `p`'s memory under another shape (same dtype, same element
//! count). Views exist only here, in the front end: every element access `v[i, j]` becomes
//! an access of `p` at the same linear position (linearized with the view's shape,
//! delinearized with `p`'s), and a `T.copy` with a view operand becomes the `T.Parallel` nest
//! of element copies it means, masked by the view's extents (TileLang's partial-tile rule:
//! reads outside the view are 0, writes outside it are dropped). So the IR, the passes and
//! the back ends never see a view; a view used any other way is a located error.

use crate::diagnostic::Diagnostic;
use crate::dtype::DType;
use crate::ir::{BinOp, Expr, ExprKind, For, ForKind, Ident, Region, Stmt, StmtKind};
use crate::span::Span;
use crate::syntax::ast;
use crate::syntax::lower::Lowerer;

/// A declared view: its shape and dtype, and the parameter whose memory it reads.
#[derive(Clone, Debug)]
pub struct View {
    pub param: String,
    pub shape: Vec<Expr>,
    pub dtype: DType,
}

impl Lowerer {
    /// `name = T.Tensor(shape, dtype, p.data)` (or `T.Buffer`).
    pub fn view(&mut self, name: &ast::Ident, callee: &str, call_span: Span, args: &[ast::Arg]) {
        let Some(a) = self.bind(callee, call_span, args, &["shape", "dtype", "data"], 3) else {
            return;
        };
        let (Some(shape_e), Some(dtype_e), Some(data_e)) = (a[0], a[1], a[2]) else {
            return;
        };
        let param = match &data_e.kind {
            ast::ExprKind::Attr(base, attr) if attr.name == "data" => match &base.kind {
                ast::ExprKind::Name(p) => Some(p.clone()),
                _ => None,
            },
            _ => None,
        };
        let Some(param) = param else {
            self.error(Diagnostic::error(
                data_e.span,
                "a buffer view's data must be a parameter's `.data`, e.g. `A.data`",
            ));
            return;
        };
        if !self.params.contains(&param) {
            let msg = if self.views.contains_key(&param) {
                format!("`{param}` is a view; a view must be of a parameter itself")
            } else {
                format!("`{param}` is not a parameter of the function; only a parameter's memory can be viewed")
            };
            self.error(Diagnostic::error(data_e.span, msg));
            return;
        }
        let (Some(shape), Some(dtype)) = (self.shape(shape_e), self.dtype(dtype_e)) else {
            return;
        };
        let Some(info) = self.buffers.get(&param).cloned() else {
            return;
        };
        if dtype != info.dtype {
            self.error(Diagnostic::error(
                dtype_e.span,
                format!(
                    "view dtype {} differs from `{param}`'s {}: a view reinterprets the shape, not the element type",
                    dtype.name(),
                    info.dtype.name()
                ),
            ));
            return;
        }
        if !same_count(&shape, &info.shape) {
            self.error(
                Diagnostic::error(
                    shape_e.span,
                    format!("this view's element count differs from `{param}`'s (or is not provably equal)"),
                )
                .with_note("the product of the view's extents must equal the parameter's, factor for factor (symbolic dims as written, literals multiplied out)"),
            );
            return;
        }
        if self.buffers.contains_key(&name.name) || self.views.contains_key(&name.name) {
            self.error(Diagnostic::error(
                name.span,
                format!("`{}` is already a buffer", name.name),
            ));
            return;
        }
        self.views.insert(
            name.name.clone(),
            View {
                param,
                shape,
                dtype,
            },
        );
    }

    /// The buffer and indices an element access `name[indices]` reaches: the parameter's
    /// for a view (`view_access`), else the access as written. Loads, stores and atomic adds
    /// all go through here.
    pub fn element_target(
        &mut self,
        name: &str,
        indices: Vec<Expr>,
        span: Span,
    ) -> Option<(String, Vec<Expr>)> {
        self.touch(name);
        if self.views.contains_key(name) {
            self.view_access(name, indices, span)
        } else if let Some(layout) = self.global_layout_of(name) {
            if indices.len() != layout.rank() {
                return self.fail(Diagnostic::error(
                    span,
                    format!(
                        "`{name}` has {} dimensions but is indexed with {}",
                        layout.rank(),
                        indices.len()
                    ),
                ));
            }
            Some((name.to_string(), layout.access(&indices, span)))
        } else {
            Some((name.to_string(), indices))
        }
    }

    /// [`Lowerer::element_target`] for an element access the user wrote, with the condition
    /// under which its indices lie inside the declared shape of a view or of a tensor with a
    /// layout. Those indices are logical: one past a view's row (or past a dimension of a
    /// layout's shape) lands on another element of the parameter, inside the parameter, so
    /// `legalize-safe-memory` (which sees only the parameter) cannot tell. The caller guards
    /// the access with it, as that pass does: a load outside reads 0, a store or an atomic
    /// add outside is dropped. `None`: a plain access, or every index a constant inside.
    pub fn logical_element_target(
        &mut self,
        name: &str,
        indices: Vec<Expr>,
        span: Span,
    ) -> Option<(String, Vec<Expr>, Option<Expr>)> {
        let logical = self.views.contains_key(name) || self.global_layout_of(name).is_some();
        let cond = match logical {
            true => self.in_bounds(name, &indices, span)?,
            false => None,
        };
        let (buffer, indices) = self.element_target(name, indices, span)?;
        Some((buffer, indices, cond))
    }

    /// The parameter access that `view[indices]` means, if `name` is a view.
    pub fn view_access(
        &mut self,
        name: &str,
        indices: Vec<Expr>,
        span: Span,
    ) -> Option<(String, Vec<Expr>)> {
        let view = self.views.get(name)?.clone();
        if indices.len() != view.shape.len() {
            return self.fail(Diagnostic::error(
                span,
                format!(
                    "view `{name}` has {} dimensions but {} indices are given",
                    view.shape.len(),
                    indices.len()
                ),
            ));
        }
        let pshape = self.buffers.get(&view.param)?.shape.clone();
        Some((
            view.param.clone(),
            remap(&indices, &view.shape, &pshape, span),
        ))
    }

    /// The error for a view used where only element accesses and `T.copy` take one.
    pub fn view_misuse(&mut self, name: &str, span: Span) -> Option<()> {
        self.touch(name);
        if let Some(r) = self.reshapes.get(name) {
            let d = crate::syntax::lower_reshape::misuse(name, r, span);
            return self.fail(d);
        }
        if self.global_layout_of(name).is_some() {
            return self.fail(
                Diagnostic::error(
                    span,
                    format!("`{name}` has a layout in this kernel and cannot be used here"),
                )
                .with_note(
                    "a global tensor with a layout can be indexed, copied from or to with \
                     `T.copy`, and added to with `T.atomic_add`",
                ),
            );
        }
        if self.views.contains_key(name) {
            return self.fail(
                Diagnostic::error(span, format!("buffer view `{name}` cannot be used here"))
                    .with_note(
                        "a view can be indexed (`v[i, j]`) and copied from or to with `T.copy`",
                    ),
            );
        }
        Some(())
    }

    /// The declared shape of view `name`.
    pub fn view_shape(&self, name: &str) -> Option<Vec<Expr>> {
        self.views.get(name).map(|v| v.shape.clone())
    }

    /// `T.copy(src, dst)` where either is a region of a view: a `T.Parallel` nest over the
    /// regions' common shape (extent-1 dimensions dropped) of masked element copies.
    pub fn view_copy(&mut self, src: Region, dst: Region, span: Span) -> Option<Stmt> {
        let live = |r: &Region| -> Vec<usize> {
            (0..r.ranges.len())
                .filter(|&d| r.ranges[d].extent.as_int() != Some(1))
                .collect()
        };
        let (sl, dl) = (live(&src), live(&dst));
        let same = sl.len() == dl.len()
            && sl
                .iter()
                .zip(&dl)
                .all(|(&a, &b)| src.ranges[a].extent == dst.ranges[b].extent);
        if !same {
            return self.fail(
                Diagnostic::error(span, "a `T.copy` with a buffer view or a reshape needs regions of the same shape (after dropping extent-1 dimensions)")
                    .with_note("write both regions as slices of equal extents"),
            );
        }
        let vars: Vec<String> = (0..sl.len())
            .map(|k| self.generated_name(&format!("view_i{k}")))
            .collect();
        let point = |r: &Region, live: &[usize]| -> Vec<Expr> {
            r.ranges
                .iter()
                .enumerate()
                .map(|(d, rg)| match live.iter().position(|&x| x == d) {
                    Some(k) => arith(
                        BinOp::Add,
                        rg.start.clone(),
                        Expr::var(vars[k].clone()),
                        span,
                    ),
                    None => rg.start.clone(),
                })
                .collect()
        };
        let (sp, dp) = (point(&src, &sl), point(&dst, &dl));
        let src_buf = src.buffer.name.clone();
        let dst_buf = dst.buffer.name.clone();
        let src_dtype = self.elem_dtype(&src_buf)?;
        // Read: the view's bounds mask it (0 outside, the partial-tile rule), else the
        // parameter's or the buffer's own (a copy from a parameter may reach past it too).
        let in_src = self.in_bounds(&src_buf, &sp, span)?;
        let (sb, si) = self.resolve(&src_buf, sp, span)?;
        let load = Expr::new(
            ExprKind::Load {
                buffer: sb,
                indices: si,
            },
            span,
        );
        let zero = Expr::new(ExprKind::Cast(src_dtype, Box::new(Expr::int(0))), span);
        let value = match in_src {
            Some(c) => Expr::new(
                ExprKind::Select(Box::new(c), Box::new(load), Box::new(zero)),
                span,
            ),
            None => load,
        };
        let in_dst = self.in_bounds(&dst_buf, &dp, span)?;
        let (db, di) = self.resolve(&dst_buf, dp, span)?;
        let store = Stmt::new(
            StmtKind::Store {
                buffer: Ident::new(db, dst.buffer.span),
                indices: di,
                value,
            },
            span,
        );
        let mut body = vec![match in_dst {
            Some(c) => Stmt::new(
                StmtKind::If {
                    cond: c,
                    then_body: vec![store],
                    else_body: vec![],
                },
                span,
            ),
            None => store,
        }];
        for (k, &d) in sl.iter().enumerate().rev() {
            body = vec![Stmt::new(
                StmtKind::For(For {
                    var: Ident::new(vars[k].clone(), span),
                    start: Expr::int(0),
                    stop: src.ranges[d].extent.clone(),
                    kind: ForKind::Parallel,
                    body,
                }),
                span,
            )];
        }
        if body.len() != 1 || sl.is_empty() {
            return self.fail(Diagnostic::error(
                span,
                "a `T.copy` with a buffer view or a reshape must copy at least two elements",
            ));
        }
        body.pop()
    }

    pub(crate) fn elem_dtype(&mut self, name: &str) -> Option<DType> {
        if let Some(v) = self.views.get(name) {
            return Some(v.dtype);
        }
        self.buffers.get(name).map(|b| b.dtype)
    }

    /// `buf[idx]` resolved through a view or a global layout.
    fn resolve(&mut self, name: &str, idx: Vec<Expr>, span: Span) -> Option<(String, Vec<Expr>)> {
        self.element_target(name, idx, span)
    }

    /// `0 <= idx < shape` per dimension for a global buffer or view (`None`: always in,
    /// for on-chip buffers, whose regions the verifier keeps inside them).
    fn in_bounds(&mut self, name: &str, idx: &[Expr], span: Span) -> Option<Option<Expr>> {
        let shape = match self.views.get(name) {
            Some(v) => v.shape.clone(),
            None if self.params.contains(name) => self.buffers.get(name)?.shape.clone(),
            None => return Some(None),
        };
        let mut cond: Option<Expr> = None;
        for (i, n) in idx.iter().zip(shape) {
            // A constant index inside a constant extent needs no test.
            if let (Some(i), Some(n)) = (i.as_int(), n.as_int()) {
                if (0..n).contains(&i) {
                    continue;
                }
            }
            let lo = Expr::binary(BinOp::Ge, i.clone(), Expr::int(0), span);
            let hi = Expr::binary(BinOp::Lt, i.clone(), n, span);
            for c in [lo, hi] {
                cond = Some(match cond {
                    None => c,
                    Some(p) => Expr::binary(BinOp::And, p, c, span),
                });
            }
        }
        Some(cond)
    }
}

/// `stmt`, under `if cond:` when there is a condition.
pub fn only_if(cond: Option<Expr>, stmt: Stmt, span: Span) -> Stmt {
    match cond {
        Some(cond) => Stmt::new(
            StmtKind::If {
                cond,
                then_body: vec![stmt],
                else_body: vec![],
            },
            span,
        ),
        None => stmt,
    }
}

/// `a op b` with the identities `x + 0`, `0 + x`, `x - 0`, `x * 1`, `1 * x`, `x // 1`
/// applied, so the written-out index math reads like the hand-written form.
pub fn arith(op: BinOp, a: Expr, b: Expr, span: Span) -> Expr {
    match (op, a.as_int(), b.as_int()) {
        (BinOp::Add | BinOp::Sub, _, Some(0)) | (BinOp::Mul | BinOp::FloorDiv, _, Some(1)) => a,
        (BinOp::Add, Some(0), _) | (BinOp::Mul, Some(1), _) => b,
        (BinOp::Add, _, Some(v)) if v < 0 => Expr::binary(BinOp::Sub, a, Expr::int(-v), span),
        _ => Expr::binary(op, a, b, span),
    }
}

/// `indices` of a `vshape` array, as indices of a `pshape` array at the same row-major
/// position. A common suffix of structurally equal extents keeps its indices; the rest is
/// linearized and delinearized (`(lin // stride) % extent`, the outermost without `%`).
pub(crate) fn remap(indices: &[Expr], vshape: &[Expr], pshape: &[Expr], span: Span) -> Vec<Expr> {
    let mut common = 0;
    while common < vshape.len().min(pshape.len()).saturating_sub(1)
        && vshape[vshape.len() - 1 - common] == pshape[pshape.len() - 1 - common]
    {
        common += 1;
    }
    let (vhead, phead) = (vshape.len() - common, pshape.len() - common);
    let mut lin = indices[0].clone();
    for d in 1..vhead {
        lin = Expr::binary(BinOp::Mul, lin, vshape[d].clone(), span);
        lin = Expr::binary(BinOp::Add, lin, indices[d].clone(), span);
    }
    let mut out = Vec::with_capacity(pshape.len());
    for d in 0..phead {
        let mut stride: Option<Expr> = None;
        for e in &pshape[d + 1..phead] {
            stride = Some(match stride {
                None => e.clone(),
                Some(s) => Expr::binary(BinOp::Mul, s, e.clone(), span),
            });
        }
        let q = match stride {
            Some(s) => Expr::binary(BinOp::FloorDiv, lin.clone(), s, span),
            None => lin.clone(),
        };
        out.push(if d == 0 {
            q
        } else {
            Expr::binary(BinOp::FloorMod, q, pshape[d].clone(), span)
        });
    }
    out.extend(indices[vhead..].iter().cloned());
    out
}

/// Whether two shapes provably have the same element count: equal products of their
/// literal factors and equal multisets of their other factors (as printed).
pub(crate) fn same_count(a: &[Expr], b: &[Expr]) -> bool {
    fn factors(e: &Expr, lit: &mut i128, syms: &mut Vec<String>) {
        match &e.kind {
            ExprKind::Int(v) => *lit = lit.saturating_mul(*v as i128),
            ExprKind::Binary(BinOp::Mul, x, y) => {
                factors(x, lit, syms);
                factors(y, lit, syms);
            }
            _ => syms.push(e.to_string()),
        }
    }
    let norm = |s: &[Expr]| {
        let (mut lit, mut syms) = (1i128, Vec::new());
        for e in s {
            factors(e, &mut lit, &mut syms);
        }
        syms.sort();
        (lit, syms)
    };
    norm(a) == norm(b)
}
