//! Lowering of tile-op operands to regions, and of the tile ops themselves (`T.copy`,
//! `T.gemm`, `T.fill`, `T.clear`) in their DSL and TVMScript spellings.
//!
//! Region spellings: a bare buffer (the whole buffer), `buf[i, j]` (a *corner*, whose
//! extents come from the other `T.copy` operand — the corner form of docs/ir.md, "Regions"),
//! `buf[a:b, c]` (slices; a point dimension has extent 1), `T.region(buf[i, j], mode, e0,
//! e1)`, and `T.tvm_access_ptr(...)` over a whole buffer.

use crate::diagnostic::Diagnostic;
use crate::ir::{
    BinOp, Expr, ExprKind, Gemm, Ident, Range, Reduce, ReduceKind, Region, Stmt, StmtKind,
    WarpPolicy,
};
use crate::span::Span;
use crate::syntax::ast;
use crate::syntax::lower::Lowerer;
use crate::syntax::lower_expr::unknown_construct;

/// A lowered operand: a complete region, or a corner still waiting for its extents.
enum Operand {
    Full(Region),
    Corner {
        buffer: Ident,
        starts: Vec<Expr>,
        span: Span,
    },
}

impl Lowerer {
    /// The declared shape of `name`, or an error at `span`.
    fn buffer_shape(&mut self, name: &str, span: Span) -> Option<Vec<Expr>> {
        // A reshape of an on-chip buffer is a region like a buffer's until the kernel
        // resolves it (`syntax::lower_reshape`).
        if let Some(r) = self.onchip_reshape(name) {
            return Some(r.shape.clone());
        }
        if self.view_regions {
            if let Some(shape) = self.view_shape(name) {
                return Some(shape);
            }
            if self.global_layout_of(name).is_some() {
                return self.buffers.get(name).map(|b| b.shape.clone());
            }
        }
        self.view_misuse(name, span)?;
        match self.buffers.get(name) {
            Some(b) => Some(b.shape.clone()),
            None => self.fail(Diagnostic::error(span, format!("unknown buffer `{name}`"))),
        }
    }

    fn whole(&mut self, name: &str, span: Span) -> Option<Region> {
        let shape = self.buffer_shape(name, span)?;
        Some(Region {
            buffer: Ident::new(name, span),
            ranges: shape
                .into_iter()
                .map(|extent| Range {
                    start: Expr::int(0),
                    extent,
                })
                .collect(),
            span,
        })
    }

    fn operand(&mut self, e: &ast::Expr) -> Option<Operand> {
        match &e.kind {
            ast::ExprKind::Name(n) => Some(Operand::Full(self.whole(n, e.span)?)),
            ast::ExprKind::Subscript(base, items) => {
                let ast::ExprKind::Name(n) = &base.kind else {
                    return self.fail(Diagnostic::error(base.span, "expected a buffer name"));
                };
                if !items
                    .iter()
                    .any(|i| matches!(i.kind, ast::ExprKind::Slice(..)))
                {
                    let starts = self.indices(items)?;
                    // Resolve the buffer now so an unknown one is reported here.
                    self.buffer_shape(n, base.span)?;
                    return Some(Operand::Corner {
                        buffer: Ident::new(n.clone(), base.span),
                        starts,
                        span: e.span,
                    });
                }
                Some(Operand::Full(self.sliced(n, base.span, items, e.span)?))
            }
            ast::ExprKind::Call(func, args) => {
                let name = func.dotted().unwrap_or_default();
                match name.as_str() {
                    "T.region" => Some(Operand::Full(self.tvm_region(e.span, args)?)),
                    "T.tvm_access_ptr" => Some(Operand::Full(self.access_ptr(e.span, args)?)),
                    n if n.starts_with("T.")
                        && !crate::syntax::lower_expr::is_known_t_name(
                            n.get(2..).unwrap_or(""),
                        ) =>
                    {
                        self.fail(unknown_construct(n, func.span))
                    }
                    _ => self.fail(Diagnostic::error(e.span, "expected a buffer region")),
                }
            }
            _ => self.fail(Diagnostic::error(e.span, "expected a buffer region")),
        }
    }

    /// An operand outside `T.copy`: a corner there is a single element.
    fn region(&mut self, e: &ast::Expr) -> Option<Region> {
        match self.operand(e)? {
            Operand::Full(r) => Some(r),
            Operand::Corner {
                buffer,
                starts,
                span,
            } => Some(Region {
                buffer,
                ranges: starts
                    .into_iter()
                    .map(|start| Range {
                        start,
                        extent: Expr::int(1),
                    })
                    .collect(),
                span,
            }),
        }
    }

    /// `buf[a:b, i, :]`, by the SLICE EXTENT RULE.
    fn sliced(
        &mut self,
        name: &str,
        name_span: Span,
        items: &[ast::Expr],
        span: Span,
    ) -> Option<Region> {
        // Every region form resolves its buffer, so that whatever parses also prints to a
        // form that parses (the printer may choose the corner form, which needs it).
        self.buffer_shape(name, name_span)?;
        let mut ranges = Vec::with_capacity(items.len());
        let mut ok = true;
        for (d, item) in items.iter().enumerate() {
            let range = match &item.kind {
                ast::ExprKind::Slice(lo, hi, step) => self.slice_range(
                    name,
                    name_span,
                    d,
                    lo.as_deref(),
                    hi.as_deref(),
                    step.as_deref(),
                ),
                _ => self.expr(item).map(|start| Range {
                    start,
                    extent: Expr::int(1),
                }),
            };
            match range {
                Some(r) => ranges.push(r),
                None => ok = false,
            }
        }
        ok.then(|| Region {
            buffer: Ident::new(name, name_span),
            ranges,
            span,
        })
    }

    fn slice_range(
        &mut self,
        name: &str,
        name_span: Span,
        dim: usize,
        lo: Option<&ast::Expr>,
        hi: Option<&ast::Expr>,
        step: Option<&ast::Expr>,
    ) -> Option<Range> {
        if let Some(step) = step {
            return self.fail(Diagnostic::error(
                step.span,
                "a slice step is not supported",
            ));
        }
        let start = match lo {
            Some(lo) => self.expr(lo)?,
            None => Expr::int(0),
        };
        let stop = match hi {
            Some(hi) => self.expr(hi)?,
            None => {
                let shape = self.buffer_shape(name, name_span)?;
                match shape.get(dim) {
                    Some(e) => e.clone(),
                    None => {
                        return self.fail(Diagnostic::error(
                            name_span,
                            format!("`{name}` has no dimension {dim}"),
                        ))
                    }
                }
            }
        };
        let extent = slice_extent(&start, stop);
        Some(Range { start, extent })
    }

    /// `T.region(buf[i, j], mode, e0, e1)`.
    fn tvm_region(&mut self, span: Span, args: &[ast::Arg]) -> Option<Region> {
        if let Some(kw) = args.iter().find_map(|a| a.name.as_ref()) {
            return self.fail(Diagnostic::error(
                kw.span,
                "`T.region` takes positional arguments only",
            ));
        }
        let [first, _mode, extents @ ..] = args else {
            return self.fail(Diagnostic::error(
                span,
                "`T.region` takes a buffer element, an access mode and the extents",
            ));
        };
        let ast::ExprKind::Subscript(base, items) = &first.value.kind else {
            return self.fail(Diagnostic::error(
                first.value.span,
                "expected the region's first element, `buf[i, j]`",
            ));
        };
        let ast::ExprKind::Name(name) = &base.kind else {
            return self.fail(Diagnostic::error(base.span, "expected a buffer name"));
        };
        self.buffer_shape(name, base.span)?;
        let starts = self.indices(items)?;
        if extents.len() != starts.len() {
            return self.fail(Diagnostic::error(
                span,
                format!(
                    "`T.region` of a {}-index element needs {} extents, found {}",
                    starts.len(),
                    starts.len(),
                    extents.len()
                ),
            ));
        }
        let mut ranges = Vec::with_capacity(starts.len());
        for (start, e) in starts.into_iter().zip(extents) {
            ranges.push(Range {
                start,
                extent: self.expr(&e.value)?,
            });
        }
        self.buffer_shape(name, base.span)?;
        Some(Region {
            buffer: Ident::new(name.clone(), base.span),
            ranges,
            span,
        })
    }

    /// `T.tvm_access_ptr(T.type_annotation(dt), buf.data, offset, extent, rw)`: a flat
    /// range, which must cover the whole buffer to be a region.
    fn access_ptr(&mut self, span: Span, args: &[ast::Arg]) -> Option<Region> {
        let a = self.bind(
            "T.tvm_access_ptr",
            span,
            args,
            &["ptype", "data", "offset", "extent", "rw_mask"],
            5,
        )?;
        let data = a[1]?;
        let name = match &data.kind {
            ast::ExprKind::Attr(base, attr) if attr.name == "data" => match &base.kind {
                ast::ExprKind::Name(n) => Some((n.clone(), base.span)),
                _ => None,
            },
            _ => None,
        };
        let Some((name, name_span)) = name else {
            return self.fail(Diagnostic::error(data.span, "expected `buffer.data`"));
        };
        let whole = self.whole(&name, name_span)?;
        let ptype = a[0]?;
        if let ast::ExprKind::Call(f, targs) = &ptype.kind {
            if f.dotted().as_deref() == Some("T.type_annotation") {
                if let [ast::Arg { name: None, value }] = targs.as_slice() {
                    let dt = self.dtype(value)?;
                    let declared = self.buffers.get(&name).map(|b| b.dtype);
                    if declared.is_some_and(|d| d != dt) {
                        return self.fail(Diagnostic::error(
                            value.span,
                            format!(
                                "`{name}` holds {}, not {dt}",
                                declared.map_or("?", |d| d.name())
                            ),
                        ));
                    }
                }
            }
        }
        let offset = self.expr(a[2]?)?;
        let extent = self.expr(a[3]?)?;
        let size = whole.ranges.iter().fold(Expr::int(1), |acc, r| {
            Expr::binary(BinOp::Mul, acc, r.extent.clone(), Span::DUMMY)
        });
        if offset.as_int() != Some(0) || extent != size {
            return self.fail(
                Diagnostic::error(
                    span,
                    "`T.tvm_access_ptr` over part of a buffer is not supported",
                )
                .with_note(
                    "tlc needs a rectangular region; write `T.region(buf[i, j], mode, e0, e1)`",
                ),
            );
        }
        Some(whole)
    }

    /// `T.copy(src, dst[, disable_tma=B])`.
    pub fn copy(&mut self, span: Span, args: &[ast::Arg]) -> Option<Stmt> {
        // `disable_tma` is keyword-only (TileLang's third positional is `coalesced_width`).
        let (flags, args): (Vec<&ast::Arg>, Vec<&ast::Arg>) = args
            .iter()
            .partition(|a| a.name.as_ref().is_some_and(|n| n.name == "disable_tma"));
        let args: Vec<ast::Arg> = args.into_iter().cloned().collect();
        let a = self.bind("T.copy", span, &args, &["src", "dst"], 2)?;
        let (src_e, dst_e) = (a[0]?, a[1]?);
        let mut no_tma = false;
        for f in flags {
            no_tma = self.const_bool(&f.value, "`disable_tma`")?;
        }
        self.view_regions = true;
        let (src, dst) = (self.operand(src_e), self.operand(dst_e));
        self.view_regions = false;
        let (src, dst) = (src?, dst?);
        let (src, dst) = match (src, dst) {
            (Operand::Full(s), Operand::Full(d)) => (s, d),
            (Operand::Corner { span: cs, .. }, Operand::Corner { .. }) => {
                return self.fail(
                    Diagnostic::error(cs, "both operands of `T.copy` are single elements")
                        .with_note(
                            "write one of them as a slice `buf[a:b, c:d]` or a whole buffer",
                        ),
                )
            }
            (corner @ Operand::Corner { .. }, Operand::Full(d)) => {
                let s = self.corner(corner, &d)?;
                (s, d)
            }
            (Operand::Full(s), corner @ Operand::Corner { .. }) => {
                let d = self.corner(corner, &s)?;
                (s, d)
            }
        };
        let remapped = |lw: &Self, n: &str| {
            lw.views.contains_key(n)
                || lw.global_layout_of(n).is_some()
                || lw.onchip_reshape(n).is_some()
        };
        if remapped(self, &src.buffer.name) || remapped(self, &dst.buffer.name) {
            return self.view_copy(src, dst, span);
        }
        // `disable_tma=True` on a copy with global memory: the element nest it means, which
        // the pipeline never turns into TMA (it may still use cp.async).
        let global = |lw: &Self, n: &str| lw.params.contains(n);
        if no_tma && (global(self, &src.buffer.name) || global(self, &dst.buffer.name)) {
            return self.view_copy(src, dst, span);
        }
        self.touch(&src.buffer.name);
        self.touch(&dst.buffer.name);
        Some(Stmt::new(StmtKind::Copy { src, dst }, span))
    }

    /// The CORNER RULE: a corner takes the trailing extents of the other operand.
    fn corner(&mut self, corner: Operand, other: &Region) -> Option<Region> {
        let Operand::Corner {
            buffer,
            starts,
            span,
        } = corner
        else {
            return None;
        };
        let o: Vec<&Expr> = other.ranges.iter().map(|r| &r.extent).collect();
        let r = starts.len();
        let extents: Vec<Expr> = if o.len() >= r {
            let (lead, tail) = o.split_at(o.len() - r);
            if let Some(bad) = lead.iter().find(|e| e.as_int() != Some(1)) {
                let _ = bad;
                return self.fail(
                    Diagnostic::error(
                        span,
                        format!(
                            "cannot take a {r}-D corner of a {}-D region whose leading extents are not 1",
                            o.len()
                        ),
                    )
                    .with_note_at(other.span, "the other operand")
                    .with_note("write this operand as a slice `buf[a:b, ...]`"),
                );
            }
            tail.iter().map(|e| (*e).clone()).collect()
        } else {
            let mut v = vec![Expr::int(1); r - o.len()];
            v.extend(o.iter().map(|e| (*e).clone()));
            v
        };
        Some(Region {
            buffer,
            ranges: starts
                .into_iter()
                .zip(extents)
                .map(|(start, extent)| Range { start, extent })
                .collect(),
            span,
        })
    }

    /// `T.reduce_sum(src, dst, dim=-1, clear=True)` and its siblings (TileLang's defaults).
    pub fn reduce(&mut self, name: &str, span: Span, args: &[ast::Arg]) -> Option<Stmt> {
        let kind = ReduceKind::parse(name)?;
        let a = self.bind(name, span, args, &["buffer", "out", "dim", "clear"], 2)?;
        let buffer = |lw: &mut Self, e: &ast::Expr| -> Option<Ident> {
            match &e.kind {
                ast::ExprKind::Name(n) => Some(Ident::new(n.clone(), e.span)),
                _ => lw.fail(Diagnostic::error(
                    e.span,
                    format!("`{name}` takes whole buffers by name"),
                )),
            }
        };
        let src = buffer(self, a[0]?);
        let dst = buffer(self, a[1]?);
        let dim = match a[2] {
            Some(d) => self.const_int(d, "`dim`")?,
            None => -1,
        };
        let clear = match a[3] {
            Some(c) => self.const_bool(c, "`clear`")?,
            None => true,
        };
        Some(Stmt::new(
            StmtKind::Reduce(Reduce {
                kind,
                src: src?,
                dst: dst?,
                dim,
                clear,
            }),
            span,
        ))
    }

    /// `T.atomic_add(dst, value, memory_order="relaxed")`. Element form: `dst` is
    /// `buf[i, j]`, `value` a scalar. Tile form (TileLang's): `value` is a whole buffer
    /// (fragment or shared) and `dst` the corner (or the region) of the tile it adds into:
    /// written as a `T.Parallel` nest over `value`'s shape of element atomic adds, each
    /// guarded by `dst`'s bounds (a partial tile at the edge of a global tensor).
    pub fn atomic_add(&mut self, span: Span, args: &[ast::Arg]) -> Option<Stmt> {
        // `return_prev=True` as a statement: the old value is not used, the add is the same.
        let a = self.bind(
            "T.atomic_add",
            span,
            args,
            &["dst", "value", "memory_order", "return_prev"],
            2,
        )?;
        if let Some(order) = a[2] {
            self.relaxed_order(order)?;
        }
        if let Some(r) = a[3] {
            self.const_bool(r, "`return_prev`")?;
        }
        let (dst, value) = (a[0]?, a[1]?);
        if let ast::ExprKind::Name(src) = &value.kind {
            if self.buffers.contains_key(src) {
                return self.atomic_add_tile(dst, src, value.span, span);
            }
        }
        let ast::ExprKind::Subscript(base, items) = &dst.kind else {
            return self.fail(Diagnostic::error(
                dst.span,
                "`T.atomic_add` adds into a buffer element `buf[i, j]` (or a tile: `T.atomic_add(C[i0, j0], C_local)`)",
            ));
        };
        let ast::ExprKind::Name(buffer) = &base.kind else {
            return self.fail(Diagnostic::error(base.span, "expected a buffer name"));
        };
        if items
            .iter()
            .any(|i| matches!(i.kind, ast::ExprKind::Slice(..)))
        {
            // A sliced destination with a scalar value is not a form TileLang has.
            return self.fail(
                Diagnostic::error(
                    value.span,
                    "a tile `T.atomic_add` takes a buffer as its value (the tile to add)",
                )
                .with_note("for one element write `T.atomic_add(buf[i, j], v)`"),
            );
        }
        let indices = self.indices(items);
        let value = self.expr(value);
        let (buffer, indices, inside) = self.logical_element_target(buffer, indices?, base.span)?;
        let add = Stmt::new(
            StmtKind::AtomicAdd {
                buffer: Ident::new(buffer, base.span),
                indices,
                value: value?,
            },
            span,
        );
        Some(crate::syntax::lower_view::only_if(inside, add, span))
    }

    /// `memory_order=` of `T.atomic_add`: `"relaxed"`, the only order tlc's adds have.
    pub fn relaxed_order(&mut self, order: &ast::Expr) -> Option<()> {
        let text = self.string(order, "`memory_order`")?;
        if text != "relaxed" {
            return self.fail(
                Diagnostic::error(
                    order.span,
                    format!(
                        "`memory_order=\"{text}\"` is not supported; tlc's atomic adds are relaxed"
                    ),
                )
                .with_note(
                    "order other accesses around the adds with a barrier (`T.sync_threads()`) \
                     or by ending the kernel",
                ),
            );
        }
        Some(())
    }

    /// The tile form: `for i0, i1 in T.Parallel(shape of src): if in bounds:
    /// T.atomic_add(dst[s0 + i0, s1 + i1], src[i0, i1])`.
    fn atomic_add_tile(
        &mut self,
        dst: &ast::Expr,
        src: &str,
        src_span: Span,
        span: Span,
    ) -> Option<Stmt> {
        let shape = self.buffer_shape(src, src_span)?;
        // Per destination dimension: its start, and whether the tile spans it (else the tile
        // has extent 1 there). As in `T.copy`, dimensions of extent 1 are dropped before the
        // shapes are matched: `T.atomic_add(O[b, i*64:(i+1)*64, h, 0:64], o_shared)` adds a
        // 64 x 64 tile into a 4-D tensor; a corner destination of a higher rank takes the
        // tile in its last dimensions.
        // The destination may be a view or have a global layout: its elements are remapped.
        let saved = std::mem::replace(&mut self.view_regions, true);
        let operand = self.operand(dst);
        self.view_regions = saved;
        let (buffer, starts, spans, extents) = match operand? {
            Operand::Full(r) => {
                let spans = r
                    .ranges
                    .iter()
                    .map(|x| x.extent.as_int() != Some(1))
                    .collect();
                let extents: Vec<Option<i64>> =
                    r.ranges.iter().map(|x| x.extent.as_int()).collect();
                let starts = r.ranges.into_iter().map(|r| r.start).collect::<Vec<_>>();
                (r.buffer, starts, spans, extents)
            }
            Operand::Corner { buffer, starts, .. } => {
                let lead = starts.len().saturating_sub(shape.len());
                let spans = (0..starts.len()).map(|d| d >= lead).collect::<Vec<bool>>();
                let extents = vec![None; starts.len()];
                (buffer, starts, spans, extents)
            }
        };
        let tile_dims: Vec<usize> = (0..shape.len())
            .filter(|&d| starts.len() == shape.len() || shape[d].as_int() != Some(1))
            .collect();
        let spanned: Vec<usize> = (0..starts.len())
            .filter(|&d| starts.len() == shape.len() || spans[d])
            .collect();
        if spanned.len() != tile_dims.len() {
            return self.fail(Diagnostic::error(
                dst.span,
                format!(
                    "`T.atomic_add` of `{src}` (rank {}) into `{}`: the destination spans {} dimensions, the tile {} (dimensions of extent 1 aside)",
                    shape.len(),
                    buffer.name,
                    spanned.len(),
                    tile_dims.len()
                ),
            ));
        }
        // A region destination's constant extents must be the tile's.
        for (&d, &t) in spanned.iter().zip(&tile_dims) {
            if let (Some(Some(want)), Some(have)) = (extents.get(d), shape[t].as_int()) {
                if *want != have {
                    return self.fail(Diagnostic::error(
                        dst.span,
                        format!(
                            "`T.atomic_add` of `{src}` into `{}`: dimension {d} of the destination has extent {want}, the tile {have}",
                            buffer.name
                        ),
                    ));
                }
            }
        }
        let saved = std::mem::replace(&mut self.view_regions, true);
        let dims = self.buffer_shape(&buffer.name, buffer.span);
        self.view_regions = saved;
        let dims = dims?;
        let vars: Vec<String> = (0..shape.len())
            .map(|d| self.generated_name(&format!("atomic_i{d}")))
            .collect();
        // The tile's extent and loop variable along each destination dimension.
        let along: Vec<Option<(Expr, &String)>> = (0..starts.len())
            .map(|d| {
                let k = spanned.iter().position(|&x| x == d)?;
                let t = tile_dims[k];
                Some((shape[t].clone(), &vars[t]))
            })
            .collect();
        let at: Vec<Expr> = starts
            .iter()
            .zip(&along)
            .map(|(s, a)| match a {
                Some((_, v)) => {
                    crate::build::bin_at(BinOp::Add, s.clone(), Expr::var(v.as_str()), span)
                }
                None => s.clone(),
            })
            .collect();
        let extents: Vec<Expr> = along
            .iter()
            .map(|a| a.as_ref().map_or(Expr::int(1), |(n, _)| n.clone()))
            .collect();
        let mut guard: Option<Expr> = None;
        for (((e, d), s), n) in at.iter().zip(&dims).zip(&starts).zip(&extents) {
            // A dimension the tile provably fits needs no guard.
            if let (Some(s), Some(d), Some(n)) = (s.as_int(), d.as_int(), n.as_int()) {
                if s >= 0 && s + n <= d {
                    continue;
                }
            }
            let c = Expr::binary(BinOp::Lt, e.clone(), d.clone(), span);
            guard = Some(match guard {
                None => c,
                Some(g) => Expr::binary(BinOp::And, g, c, span),
            });
        }
        let (target, at) = self.element_target(&buffer.name, at, span)?;
        let add = Stmt::new(
            StmtKind::AtomicAdd {
                buffer: Ident::new(target, buffer.span),
                indices: at,
                value: Expr::new(
                    ExprKind::Load {
                        buffer: src.to_string(),
                        indices: vars.iter().map(Expr::var).collect(),
                    },
                    src_span,
                ),
            },
            span,
        );
        let mut body = vec![match guard {
            Some(cond) => Stmt::new(
                StmtKind::If {
                    cond,
                    then_body: vec![add],
                    else_body: Vec::new(),
                },
                span,
            ),
            None => add,
        }];
        for (v, extent) in vars.iter().zip(shape).rev() {
            body = vec![Stmt::new(
                StmtKind::For(crate::ir::For {
                    var: Ident::new(v.clone(), span),
                    start: Expr::int(0),
                    stop: extent,
                    kind: crate::ir::ForKind::Parallel,
                    body,
                }),
                span,
            )];
        }
        body.pop()
    }

    /// `T.fill(dst, value)` / `T.clear(dst)`.
    pub fn fill(&mut self, span: Span, args: &[ast::Arg], clear: bool) -> Option<Stmt> {
        let what = if clear { "T.clear" } else { "T.fill" };
        let names: &[&str] = if clear {
            &["buffer"]
        } else {
            &["buffer", "value"]
        };
        let a = self.bind(what, span, args, names, names.len())?;
        let value = match a.get(1).copied().flatten() {
            Some(v) => self.expr(v),
            None => Some(Expr::int(0)),
        };
        // On a `T.alloc_var` scalar (TileLang's combine kernels `T.clear(lse_logsum_local)`):
        // the assignment `x = value`.
        if let ast::ExprKind::Name(n) = &a[0]?.kind {
            if self.is_var(n) {
                let at = a[0].map_or(span, |e| e.span);
                return Some(crate::syntax::lower_var::element_store(n, at, value?, span));
            }
        }
        let dst = self.region(a[0]?);
        Some(Stmt::new(
            StmtKind::Fill {
                dst: dst?,
                value: value?,
            },
            span,
        ))
    }

    /// `T.gemm(A, B, C, ...)` in the DSL keyword form, or TVMScript's positional form
    /// (10 or more arguments).
    pub fn gemm(&mut self, span: Span, args: &[ast::Arg]) -> Option<Stmt> {
        let positional = args.iter().take_while(|a| a.name.is_none()).count();
        let gemm = if positional >= 10 {
            self.gemm_tvm(span, args)?
        } else {
            self.gemm_dsl(span, args)?
        };
        Some(Stmt::new(StmtKind::Gemm(gemm), span))
    }

    fn gemm_dsl(&mut self, span: Span, args: &[ast::Arg]) -> Option<Gemm> {
        let a = self.bind(
            "T.gemm",
            span,
            args,
            &[
                "A",
                "B",
                "C",
                "transpose_A",
                "transpose_B",
                "policy",
                "clear_accum",
                "k_pack",
                "wg_wait",
                "packed_int4",
            ],
            3,
        )?;
        let (ra, rb, rc) = (self.region(a[0]?), self.region(a[1]?), self.region(a[2]?));
        let flag = |lw: &mut Self, e: Option<&ast::Expr>, what: &str| match e {
            Some(e) => lw.const_bool(e, what),
            None => Some(false),
        };
        let trans_a = flag(self, a[3], "`transpose_A`");
        let trans_b = flag(self, a[4], "`transpose_B`");
        let policy = match a[5] {
            Some(p) => self.policy(p),
            None => Some(WarpPolicy::Square),
        };
        let clear_accum = flag(self, a[6], "`clear_accum`");
        let packed_int4 = flag(self, a[9], "`packed_int4`");
        // k_pack and wg_wait are tuning hints with no meaning in the IR.
        Some(Gemm {
            a: ra?,
            b: rb?,
            c: rc?,
            trans_a: trans_a?,
            trans_b: trans_b?,
            policy: policy?,
            clear_accum: clear_accum?,
            packed_int4: packed_int4?,
        })
    }

    /// `T.GemmWarpPolicy.FullRow`, or TileLang's integer code.
    fn policy(&mut self, e: &ast::Expr) -> Option<WarpPolicy> {
        if let Some(d) = e.dotted() {
            let last = d.rsplit('.').next().unwrap_or("");
            let prefix_ok = d.starts_with("T.GemmWarpPolicy.") || d.starts_with("GemmWarpPolicy.");
            let p = match last {
                "Square" => Some(WarpPolicy::Square),
                "FullRow" => Some(WarpPolicy::FullRow),
                "FullCol" => Some(WarpPolicy::FullCol),
                _ => None,
            };
            return match (prefix_ok, p) {
                (true, Some(p)) => Some(p),
                _ => self.fail(
                    Diagnostic::error(e.span, format!("unknown warp policy `{d}`"))
                        .with_note("expected T.GemmWarpPolicy.Square, .FullRow or .FullCol"),
                ),
            };
        }
        let v = self.const_int(e, "the warp policy")?;
        match WarpPolicy::from_index(v) {
            Some(p) => Some(p),
            None => self.fail(Diagnostic::error(
                e.span,
                format!("unknown warp policy {v}; expected 0 (Square), 1 (FullRow) or 2 (FullCol)"),
            )),
        }
    }

    /// `T.gemm(A, B, C, tA, tB, M, N, K, policy, clear_accum, ...)` as TVMScript prints it.
    fn gemm_tvm(&mut self, span: Span, args: &[ast::Arg]) -> Option<Gemm> {
        if let Some(kw) = args.iter().find_map(|a| a.name.as_ref()) {
            return self.fail(Diagnostic::error(
                kw.span,
                "keyword arguments cannot follow TVMScript's positional `T.gemm` arguments",
            ));
        }
        let v: Vec<&ast::Expr> = args.iter().map(|a| &a.value).collect();
        let [a, b, c, ta, tb, m, n, k, policy, clear, ..] = v.as_slice() else {
            return self.fail(Diagnostic::error(
                span,
                "TVMScript's `T.gemm` takes at least 10 arguments",
            ));
        };
        let (ra, rb, rc) = (self.region(a), self.region(b), self.region(c));
        let trans_a = self.const_bool(ta, "`transpose_A`");
        let trans_b = self.const_bool(tb, "`transpose_B`");
        let (em, en, ek) = (self.expr(m), self.expr(n), self.expr(k));
        let policy = self.policy(policy);
        let clear_accum = self.const_bool(clear, "`clear_accum`");
        let g = Gemm {
            a: ra?,
            b: rb?,
            c: rc?,
            trans_a: trans_a?,
            trans_b: trans_b?,
            policy: policy?,
            clear_accum: clear_accum?,
            packed_int4: false,
        };
        let (em, en, ek) = (em?, en?, ek?);
        // The sizes are redundant with the operands; they must agree.
        let (am, ak) = last_two(&g.a, g.trans_a);
        let (bk, bn) = last_two(&g.b, g.trans_b);
        let (cm, cn) = last_two(&g.c, false);
        let checks = [
            (m, &em, "M", [("C", cm), ("A", am)]),
            (n, &en, "N", [("C", cn), ("B", bn)]),
            (k, &ek, "K", [("A", ak), ("B", bk)]),
        ];
        let mut ok = true;
        for (arg, value, label, operands) in checks {
            for (op, extent) in operands {
                if let Some(extent) = extent {
                    if extent != value {
                        self.error(Diagnostic::error(
                            arg.span,
                            format!(
                                "`T.gemm` size {label} disagrees with operand {op}{}",
                                show(extent)
                            ),
                        ));
                        ok = false;
                        break;
                    }
                }
            }
        }
        ok.then_some(g)
    }
}

/// The (rows, cols) extents of a gemm operand as seen by the product (transposed if asked).
fn last_two(r: &Region, transposed: bool) -> (Option<&Expr>, Option<&Expr>) {
    let n = r.ranges.len();
    if n < 2 {
        return (None, None);
    }
    let rows = r.ranges.get(n - 2).map(|x| &x.extent);
    let cols = r.ranges.get(n - 1).map(|x| &x.extent);
    if transposed {
        (cols, rows)
    } else {
        (rows, cols)
    }
}

/// ", whose extent is 128" when the extent is a literal.
fn show(e: &Expr) -> String {
    e.as_int()
        .map_or(String::new(), |v| format!(", whose extent is {v}"))
}

/// The SLICE EXTENT RULE for `start:stop`.
fn slice_extent(start: &Expr, stop: Expr) -> Expr {
    if start.as_int() == Some(0) {
        return stop;
    }
    if let ExprKind::Binary(BinOp::Add, lhs, rhs) = &stop.kind {
        if **lhs == *start {
            return (**rhs).clone();
        }
    }
    if let Some(extent) = crate::affine::constant_difference(&stop, start) {
        return Expr::new(ExprKind::Int(extent), stop.span);
    }
    let span = stop.span;
    // `k * block_N:(k + 1) * block_N` (TileLang's spelling with a tunable): `block_N`, which
    // `-D` makes a constant (a constant extent is what TMA and the layouts need).
    if let Some(extent) = crate::affine::difference(&stop, start, span) {
        return extent;
    }
    Expr::binary(BinOp::Sub, stop, start.clone(), span)
}
