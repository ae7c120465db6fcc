//! `r = T.reshape(src, shape)` (TileLang's): `r` names `src`'s elements under another shape
//! of the same element count and dtype, row-major: `r[i, j, …]` is the element of `src` at
//! the same linear position. A front-end construct, like a buffer view: the IR has no
//! reshapes, so the passes, the interpreter and both back ends see ordinary accesses of
//! `src` (docs/ir.md, "`T.reshape`").
//!
//! - Of a parameter (or of a view of one) it *is* a buffer view (`lower_view`): element
//!   accesses, copies and bounds masks as a view's.
//! - Of an on-chip buffer (shared, fragment, local, or a reshape of one: then of its root),
//!   the kernel body is lowered with `r` standing for a buffer of its own shape, and
//!   [`Lowerer::resolve_reshapes`] writes it away when the kernel is complete, in three
//!   steps:
//!   1. tile ops: `T.fill` / `T.clear` of the whole of `r` fills the whole source, of part
//!      of it is the `T.Parallel` nest of element stores; a reduction reading `r` reads a shared buffer of `r`'s shape that an
//!      element nest fills first (what `lower-reductions` does with any fragment source), a
//!      reduction writing `r` writes such a buffer, copied back after (and in before, with
//!      `clear=False`); `T.copy` with `r` is already its element nest (`view_copy`); a gemm
//!      operand, an intrinsic operand and every other whole-buffer use is a located error;
//!   2. a `T.Parallel` nest over the whole of `r`, `r` a reshape of a fragment, that
//!      accesses `r[i, j, …]` with exactly the nest's variables iterates over the source's
//!      shape instead, so that access is `src[u, v, …]` — the fragment at its own slot,
//!      served from registers whatever its layout (TileLang's `Fragment::Reshape` gives the
//!      reshape the source's layout; here the loop takes the source's shape) — and the
//!      nest's old variables become the source position's `r` indices. Not when the nest
//!      writes another fragment (whose own exact access would break);
//!   3. every remaining element access `r[idx]` is `src[map(idx)]`, guarded by `r`'s bounds
//!      unless the enclosing loops prove them (a load outside reads 0, a store outside is
//!      dropped, as a view's): one past a row of `r` is another element of `src`.
//!
//! `map` ([`reshape_map`]) groups the two shapes into runs of equal extent products (equal
//! extents pass their index through), so `(256, 128)` as `(256, 4, 32)` is `s[i, 32 j +
//! k]`, and the nest of step 2 substitutes `j = u // 32`, `k = u % 32`.

use crate::diagnostic::Diagnostic;
use crate::dtype::DType;
use crate::ir::{
    BinOp, BufferDecl, Expr, ExprKind, For, ForKind, Ident, Reduce, Region, Scope, Stmt, StmtKind,
};
use crate::span::Span;
use crate::syntax::ast;
use crate::syntax::lower::{BufInfo, Lowerer};
use crate::syntax::lower_view::{arith, same_count, View};
use crate::visit::{
    child_bodies_mut, for_each_stmt, for_each_subexpr, map_body_exprs, map_stmt_exprs,
    stmt_buffer_uses, stmt_exprs,
};
use std::collections::HashMap;

/// A reshape of an on-chip buffer.
#[derive(Clone, Debug)]
pub struct Reshape {
    /// The allocation whose elements it names (the root, for a reshape of a reshape).
    pub source: String,
    pub source_shape: Vec<Expr>,
    pub shape: Vec<Expr>,
    pub dtype: DType,
    pub scope: Scope,
    pub span: Span,
}

impl Lowerer {
    /// `name = T.reshape(src, shape)`.
    pub fn reshape(&mut self, name: &ast::Ident, call_span: Span, args: &[ast::Arg]) {
        let Some(a) = self.bind("T.reshape", call_span, args, &["src", "shape"], 2) else {
            return;
        };
        let (Some(src_e), Some(shape_e)) = (a[0], a[1]) else {
            return;
        };
        let ast::ExprKind::Name(src) = &src_e.kind else {
            self.error(Diagnostic::error(
                src_e.span,
                "`T.reshape` takes a whole buffer by name",
            ));
            return;
        };
        let Some(shape) = self.shape(shape_e) else {
            return;
        };
        if self.buffers.contains_key(&name.name)
            || self.views.contains_key(&name.name)
            || self.is_var(&name.name)
        {
            self.error(Diagnostic::error(
                name.span,
                format!("`{}` is already a buffer", name.name),
            ));
            return;
        }
        // What `src` is: a view (of a parameter), a parameter, a reshape, an allocation.
        if let Some(v) = self.views.get(src).cloned() {
            if self.check_count(&shape, shape_e.span, src, &v.shape) {
                let view = View { shape, ..v };
                self.views.insert(name.name.clone(), view);
            }
            return;
        }
        if self.params.contains(src) {
            let Some(info) = self.buffers.get(src).cloned() else {
                self.error(Diagnostic::error(
                    src_e.span,
                    format!(
                        "`{src}` is a scalar parameter, not a buffer: it has no shape to reshape"
                    ),
                ));
                return;
            };
            if self.check_count(&shape, shape_e.span, src, &info.shape) {
                let view = View {
                    param: src.clone(),
                    shape,
                    dtype: info.dtype,
                };
                self.views.insert(name.name.clone(), view);
            }
            return;
        }
        let base = match self.reshapes.get(src) {
            Some(r) => Some(r.clone()),
            None => self.kernels.last().and_then(|k| {
                k.allocs
                    .iter()
                    .find(|d| d.name.name == *src)
                    .map(|d| Reshape {
                        source: src.clone(),
                        source_shape: d.shape.clone(),
                        shape: d.shape.clone(),
                        dtype: d.dtype,
                        scope: d.scope,
                        span: d.span,
                    })
            }),
        };
        let Some(base) = base.filter(|_| !self.is_var(src)) else {
            let msg = if self.is_var(src) {
                format!(
                    "`{src}` is a `T.alloc_var` variable, not a buffer: it has no shape to reshape"
                )
            } else {
                format!("`{src}` is not a buffer: neither a tensor parameter nor an allocation of this kernel")
            };
            self.error(Diagnostic::error(src_e.span, msg));
            return;
        };
        if !self.check_count(&shape, shape_e.span, src, &base.shape) {
            return;
        }
        self.buffers.insert(
            name.name.clone(),
            BufInfo {
                shape: shape.clone(),
                dtype: base.dtype,
            },
        );
        self.reshapes.insert(
            name.name.clone(),
            Reshape {
                shape,
                span: name.span,
                ..base
            },
        );
    }

    /// Whether `shape` has `src`'s element count (`src_shape`), else a located error.
    fn check_count(&mut self, shape: &[Expr], at: Span, src: &str, src_shape: &[Expr]) -> bool {
        if same_count(shape, src_shape) {
            return true;
        }
        let product = |s: &[Expr]| -> Option<i64> {
            s.iter()
                .try_fold(1i64, |p, e| e.as_int().and_then(|v| p.checked_mul(v)))
        };
        let msg = match (product(shape), product(src_shape)) {
            (Some(n), Some(m)) => format!(
                "this shape has {n} elements and `{src}` has {m}: a reshape keeps the element count"
            ),
            _ => format!(
                "this shape's element count differs from `{src}`'s (or is not provably equal)"
            ),
        };
        self.error(Diagnostic::error(at, msg).with_note(
            "the product of the extents must equal the source's, factor for factor (symbolic dims as written, literals multiplied out)",
        ));
        false
    }

    /// The on-chip reshape `name`, if it is one.
    pub fn onchip_reshape(&self, name: &str) -> Option<&Reshape> {
        self.reshapes.get(name)
    }

    /// Forgets the on-chip reshapes of the kernel being closed, and gives them.
    pub fn end_reshapes(&mut self) -> HashMap<String, Reshape> {
        let reshapes = std::mem::take(&mut self.reshapes);
        for name in reshapes.keys() {
            self.buffers.remove(name);
        }
        reshapes
    }

    /// Writes away the on-chip reshapes of the kernel whose `body` and `allocs` are
    /// complete (the module docs' three steps); shared buffers the reductions need are added
    /// to `allocs`. The kernel's reshapes end with it.
    pub fn resolve_reshapes(&mut self, allocs: &mut Vec<BufferDecl>, body: &mut Vec<Stmt>) {
        let reshapes = self.end_reshapes();
        if reshapes.is_empty() {
            return;
        }
        let mut cx = Resolve {
            reshapes: &reshapes,
            allocs,
            lw: self,
        };
        cx.tile_ops(body);
        cx.nests(body);
        let mut loops = Vec::new();
        let before = self.errors.len();
        let mut cx = Resolve {
            reshapes: &reshapes,
            allocs,
            lw: self,
        };
        cx.accesses(body, &mut loops);
        // An access already reported (a wrong rank) is not reported again as a misuse.
        if self.errors.len() > before {
            return;
        }
        let mut errors = Vec::new();
        for_each_stmt(body, &mut |s| {
            for (n, at) in stmt_buffer_uses(s) {
                if let Some(r) = reshapes.get(n) {
                    errors.push(misuse(n, r, at));
                }
            }
        });
        errors.dedup_by(|a, b| a.message == b.message);
        for e in errors {
            self.error(e);
        }
    }
}

/// The error for a reshape used where only element accesses, `T.copy`, `T.fill` and the
/// reductions take one.
pub(crate) fn misuse(name: &str, r: &Reshape, at: Span) -> Diagnostic {
    Diagnostic::error(
        at,
        format!("`{name}` (a reshape of `{}`) cannot be used here", r.source),
    )
    .with_note(
        "a reshaped buffer can be indexed, copied with `T.copy`, filled, and reduced from or into; \
         use its source, or copy it into a buffer of its shape",
    )
}

struct Resolve<'a> {
    reshapes: &'a HashMap<String, Reshape>,
    allocs: &'a mut Vec<BufferDecl>,
    lw: &'a mut Lowerer,
}

impl Resolve<'_> {
    /// Step 1: `T.fill` and the reductions on a reshape.
    fn tile_ops(&mut self, body: &mut Vec<Stmt>) {
        let old = std::mem::take(body);
        for mut stmt in old {
            for child in child_bodies_mut(&mut stmt) {
                self.tile_ops(child);
            }
            let span = stmt.span;
            match &stmt.kind {
                StmtKind::Fill { dst, value } if self.reshapes.contains_key(&dst.buffer.name) => {
                    let (dst, value) = (dst.clone(), value.clone());
                    body.push(self.fill(&dst, value, span));
                }
                StmtKind::Reduce(r)
                    if self.reshapes.contains_key(&r.src.name)
                        || self.reshapes.contains_key(&r.dst.name) =>
                {
                    let r = r.clone();
                    body.extend(self.reduce(r, span));
                }
                StmtKind::Gemm(g) => {
                    let r = [&g.a, &g.b, &g.c]
                        .into_iter()
                        .find_map(|o| self.reshapes.get_key_value(&o.buffer.name).map(|r| (r, o)));
                    match r {
                        Some(((n, r), o)) => self.lw.error(
                            Diagnostic::error(
                                o.buffer.span,
                                format!("`T.gemm` does not take a reshaped buffer (`{n}`, a reshape of `{}`)", r.source),
                            )
                            .with_note("the tensor-core lowerings lay their operands out themselves: give the gemm a buffer of the shape it uses (a `T.copy` of the reshape into one)"),
                        ),
                        None => body.push(stmt),
                    }
                }
                _ => body.push(stmt),
            }
        }
    }

    /// `T.fill(r[region], value)`: of the whole reshape, the fill of its whole source (so a
    /// local buffer's fill stays each thread's own); of part of it, the nest of element
    /// stores over the region.
    fn fill(&mut self, dst: &Region, value: Expr, span: Span) -> Stmt {
        let r = &self.reshapes[&dst.buffer.name];
        let whole = dst.ranges.len() == r.shape.len()
            && dst
                .ranges
                .iter()
                .zip(&r.shape)
                .all(|(rg, n)| rg.start.as_int() == Some(0) && rg.extent == *n);
        if whole {
            let region = Region {
                buffer: Ident::new(r.source.clone(), dst.buffer.span),
                ranges: r
                    .source_shape
                    .iter()
                    .map(|n| crate::ir::Range {
                        start: Expr::int(0),
                        extent: n.clone(),
                    })
                    .collect(),
                span: dst.span,
            };
            return Stmt::new(StmtKind::Fill { dst: region, value }, span);
        }
        let vars = self.vars(dst.ranges.len());
        let idx = dst
            .ranges
            .iter()
            .zip(&vars)
            .map(|(rg, v)| arith(BinOp::Add, rg.start.clone(), Expr::var(v.clone()), span))
            .collect();
        let store = Stmt::new(
            StmtKind::Store {
                buffer: dst.buffer.clone(),
                indices: idx,
                value,
            },
            span,
        );
        let extents: Vec<Expr> = dst.ranges.iter().map(|r| r.extent.clone()).collect();
        nest(&vars, &extents, vec![store], span)
    }

    /// A reduction from or into a reshape, through shared buffers of the reshape's shape.
    fn reduce(&mut self, r: Reduce, span: Span) -> Vec<Stmt> {
        let mut before = Vec::new();
        let mut after = Vec::new();
        let mut out = r.clone();
        if let Some(rs) = self.reshapes.get(&r.src.name).cloned() {
            let t = self.temp(&r.src.name, &rs, span);
            before.push(self.copy_nest(&r.src.name, &t, &rs.shape, span));
            out.src = Ident::new(t, r.src.span);
        }
        if let Some(rd) = self.reshapes.get(&r.dst.name).cloned() {
            let t = self.temp(&r.dst.name, &rd, span);
            if !r.clear {
                before.push(self.copy_nest(&r.dst.name, &t, &rd.shape, span));
            }
            after.push(self.copy_nest(&t, &r.dst.name, &rd.shape, span));
            out.dst = Ident::new(t, r.dst.span);
        }
        before.push(Stmt::new(StmtKind::Reduce(out), span));
        before.extend(after);
        before
    }

    /// A new shared buffer of reshape `name`'s shape and dtype.
    fn temp(&mut self, name: &str, r: &Reshape, span: Span) -> String {
        let base = self.lw.generated_name(&format!("{name}_shared"));
        let taken = |n: &str, allocs: &[BufferDecl], lw: &Lowerer| {
            allocs.iter().any(|d| d.name.name == n) || lw.buffers.contains_key(n)
        };
        let mut t = base.clone();
        let mut k = 1;
        while taken(&t, self.allocs, self.lw) {
            t = format!("{base}_{k}");
            k += 1;
        }
        self.allocs.push(BufferDecl {
            name: Ident::new(t.clone(), span),
            dtype: r.dtype,
            shape: r.shape.clone(),
            scope: Scope::Shared,
            span,
        });
        t
    }

    /// `for i… in T.Parallel(shape): dst[i…] = src[i…]`.
    fn copy_nest(&mut self, src: &str, dst: &str, shape: &[Expr], span: Span) -> Stmt {
        let vars = self.vars(shape.len());
        let idx: Vec<Expr> = vars.iter().map(|v| Expr::var(v.clone())).collect();
        let store = Stmt::new(
            StmtKind::Store {
                buffer: Ident::new(dst, span),
                indices: idx.clone(),
                value: Expr::new(
                    ExprKind::Load {
                        buffer: src.to_string(),
                        indices: idx,
                    },
                    span,
                ),
            },
            span,
        );
        nest(&vars, shape, vec![store], span)
    }

    fn vars(&self, n: usize) -> Vec<String> {
        (0..n)
            .map(|k| self.lw.generated_name(&format!("reshape_i{k}")))
            .collect()
    }

    /// Step 2: `T.Parallel` nests over the whole of a fragment's reshape.
    fn nests(&mut self, body: &mut [Stmt]) {
        for stmt in body.iter_mut() {
            if let StmtKind::For(f) = &stmt.kind {
                if f.kind == ForKind::Parallel {
                    if let Some(new) = self.reindex(f, stmt.span) {
                        *stmt = new;
                    }
                }
            }
            for child in child_bodies_mut(stmt) {
                self.nests(child);
            }
        }
    }

    /// The nest rooted at `outer` iterated over its fragment reshape's source, if it is one.
    fn reindex(&self, outer: &For, span: Span) -> Option<Stmt> {
        let mut vars = vec![outer.var.name.clone()];
        let mut extents = vec![outer.stop.clone()];
        let mut starts_zero = outer.start.as_int() == Some(0);
        let mut body = &outer.body;
        while let [Stmt {
            kind: StmtKind::For(inner),
            ..
        }] = body.as_slice()
        {
            if inner.kind != ForKind::Parallel {
                break;
            }
            vars.push(inner.var.name.clone());
            extents.push(inner.stop.clone());
            starts_zero &= inner.start.as_int() == Some(0);
            body = &inner.body;
        }
        if !starts_zero {
            return None;
        }
        let exact = |name: &str, idx: &[Expr]| -> Option<&Reshape> {
            let r = self.reshapes.get(name)?;
            let fits = r.scope == Scope::Fragment
                && r.shape == extents
                && idx.len() == vars.len()
                && idx
                    .iter()
                    .zip(&vars)
                    .all(|(i, v)| matches!(&i.kind, ExprKind::Var(n) if n == v));
            fits.then_some(r)
        };
        // The first exact access names the source.
        let mut source: Option<&Reshape> = None;
        for_each_stmt(body, &mut |s| {
            if let StmtKind::Store {
                buffer, indices, ..
            } = &s.kind
            {
                source = source.or_else(|| exact(&buffer.name, indices));
            }
            for e in stmt_exprs(s) {
                for_each_subexpr(e, &mut |x| {
                    if let ExprKind::Load { buffer, indices } = &x.kind {
                        source = source.or_else(|| exact(buffer, indices));
                    }
                });
            }
        });
        let r = source?;
        // Another fragment written here keeps the nest as it is.
        let mut other_write = false;
        for_each_stmt(body, &mut |s| {
            if let StmtKind::Store { buffer, .. } | StmtKind::AtomicAdd { buffer, .. } = &s.kind {
                let other_reshape = self
                    .reshapes
                    .get(&buffer.name)
                    .is_some_and(|x| x.source != r.source && x.scope == Scope::Fragment);
                let fragment = self
                    .allocs
                    .iter()
                    .any(|d| d.name.name == buffer.name && d.scope == Scope::Fragment);
                other_write |= fragment || other_reshape;
            }
        });
        if other_write {
            return None;
        }
        let new_vars: Vec<String> = (0..r.source_shape.len())
            .map(|k| self.lw.generated_name(&format!("{}_i{k}", r.source)))
            .collect();
        let u: Vec<Expr> = new_vars.iter().map(|v| Expr::var(v.clone())).collect();
        let mut body = body.clone();
        // Exact accesses of reshapes of the source: the source at its own position.
        let same =
            |name: &str, idx: &[Expr]| exact(name, idx).is_some_and(|x| x.source == r.source);
        rewrite_exact(&mut body, &same, &r.source, &u);
        // The old variables: the new position's indices in the reshape.
        let sub: HashMap<String, Expr> = vars
            .iter()
            .cloned()
            .zip(reshape_map(&u, &r.source_shape, &r.shape, span))
            .collect();
        map_body_exprs(&mut body, &mut |e| match &e.kind {
            ExprKind::Var(n) => sub.get(n).cloned().unwrap_or(e),
            _ => e,
        });
        Some(nest(&new_vars, &r.source_shape, body, span))
    }

    /// Step 3: every element access of a reshape, as its source's.
    fn accesses(&mut self, body: &mut Vec<Stmt>, loops: &mut Vec<(String, Expr, Expr)>) {
        let old = std::mem::take(body);
        for mut stmt in old {
            let mut errors = Vec::new();
            let reshapes = self.reshapes;
            map_stmt_exprs(&mut stmt, &mut |e| match &e.kind {
                ExprKind::Load { buffer, indices } if reshapes.contains_key(buffer) => {
                    let r = &reshapes[buffer];
                    match resolve(buffer, r, indices, loops, e.span) {
                        Ok((idx, cond)) => {
                            let load = Expr::new(
                                ExprKind::Load {
                                    buffer: r.source.clone(),
                                    indices: idx,
                                },
                                e.span,
                            );
                            match cond {
                                Some(c) => {
                                    let zero = Expr::new(
                                        ExprKind::Cast(r.dtype, Box::new(Expr::int(0))),
                                        e.span,
                                    );
                                    Expr::new(
                                        ExprKind::Select(
                                            Box::new(c),
                                            Box::new(load),
                                            Box::new(zero),
                                        ),
                                        e.span,
                                    )
                                }
                                None => load,
                            }
                        }
                        Err(d) => {
                            errors.push(d);
                            e
                        }
                    }
                }
                _ => e,
            });
            let mut guard = None;
            if let StmtKind::Store {
                buffer, indices, ..
            }
            | StmtKind::AtomicAdd {
                buffer, indices, ..
            } = &mut stmt.kind
            {
                if let Some(r) = reshapes.get(&buffer.name) {
                    match resolve(&buffer.name, r, indices, loops, buffer.span) {
                        Ok((idx, cond)) => {
                            buffer.name = r.source.clone();
                            *indices = idx;
                            guard = cond;
                        }
                        Err(d) => errors.push(d),
                    }
                }
            }
            for e in errors {
                self.lw.error(e);
            }
            let pushed = match &stmt.kind {
                StmtKind::For(f) => {
                    loops.push((f.var.name.clone(), f.start.clone(), f.stop.clone()));
                    true
                }
                _ => false,
            };
            for child in child_bodies_mut(&mut stmt) {
                self.accesses(child, loops);
            }
            if pushed {
                loops.pop();
            }
            let span = stmt.span;
            body.push(crate::syntax::lower_view::only_if(guard, stmt, span));
        }
    }
}

/// `r[idx]` as `(source indices, the bounds guard unless proven)`.
fn resolve(
    name: &str,
    r: &Reshape,
    idx: &[Expr],
    loops: &[(String, Expr, Expr)],
    span: Span,
) -> Result<(Vec<Expr>, Option<Expr>), Diagnostic> {
    if idx.len() != r.shape.len() {
        return Err(Diagnostic::error(
            span,
            format!(
                "`{name}` has {} dimensions but is indexed with {}",
                r.shape.len(),
                idx.len()
            ),
        ));
    }
    let mut cond: Option<Expr> = None;
    for (i, n) in idx.iter().zip(&r.shape) {
        if proven_inside(i, n, loops) {
            continue;
        }
        let lo = Expr::binary(BinOp::Ge, i.clone(), Expr::int(0), span);
        let hi = Expr::binary(BinOp::Lt, i.clone(), n.clone(), span);
        for c in [lo, hi] {
            cond = Some(match cond {
                None => c,
                Some(p) => Expr::binary(BinOp::And, p, c, span),
            });
        }
    }
    Ok((reshape_map(idx, &r.shape, &r.source_shape, span), cond))
}

/// Whether `0 <= i < n` holds by the form: a constant inside a constant extent, or the
/// variable of an enclosing loop from a constant `>= 0` up to `n` (or a constant `<= n`).
fn proven_inside(i: &Expr, n: &Expr, loops: &[(String, Expr, Expr)]) -> bool {
    match (&i.kind, n.as_int()) {
        (ExprKind::Int(c), Some(n)) => (0..n).contains(c),
        (ExprKind::Var(v), _) => loops
            .iter()
            .rev()
            .find(|(name, _, _)| name == v)
            .is_some_and(|(_, start, stop)| {
                start.as_int().is_some_and(|s| s >= 0)
                    && (stop == n
                        || matches!((stop.as_int(), n.as_int()), (Some(a), Some(b)) if a <= b))
            }),
        _ => false,
    }
}

/// Replaces every load and store `name[vars]` that `same` accepts by `source[u]`.
fn rewrite_exact(
    body: &mut [Stmt],
    same: &dyn Fn(&str, &[Expr]) -> bool,
    source: &str,
    u: &[Expr],
) {
    map_body_exprs(body, &mut |e| match &e.kind {
        ExprKind::Load { buffer, indices } if same(buffer, indices) => Expr::new(
            ExprKind::Load {
                buffer: source.to_string(),
                indices: u.to_vec(),
            },
            e.span,
        ),
        _ => e,
    });
    fn stores(body: &mut [Stmt], same: &dyn Fn(&str, &[Expr]) -> bool, source: &str, u: &[Expr]) {
        for s in body.iter_mut() {
            if let StmtKind::Store {
                buffer, indices, ..
            }
            | StmtKind::AtomicAdd {
                buffer, indices, ..
            } = &mut s.kind
            {
                if same(&buffer.name, indices) {
                    buffer.name = source.to_string();
                    *indices = u.to_vec();
                }
            }
            for child in child_bodies_mut(s) {
                stores(child, same, source, u);
            }
        }
    }
    stores(body, same, source, u);
}

/// Directly nested `T.Parallel` loops `vars` over `extents` around `body`.
fn nest(vars: &[String], extents: &[Expr], body: Vec<Stmt>, span: Span) -> Stmt {
    let mut body = body;
    for (v, e) in vars.iter().zip(extents).rev() {
        body = vec![Stmt::new(
            StmtKind::For(For {
                var: Ident::new(v.clone(), span),
                start: Expr::int(0),
                stop: e.clone(),
                kind: ForKind::Parallel,
                body,
            }),
            span,
        )];
    }
    // Shapes have one dimension at least, so `body` is the one outermost loop.
    body.pop()
        .unwrap_or_else(|| Stmt::new(StmtKind::Note(String::new()), span))
}

/// `idx`, indices of a `from`-shaped array, as indices of a `to`-shaped array at the same
/// row-major position (the two have the same element count). The shapes are cut into runs
/// of equal extent products, left to right: an extent equal on both sides passes its index
/// through; a run of constant extents is linearized with `from`'s extents and delinearized
/// with `to`'s (`(lin // stride) % extent`, the outermost without `%`, the innermost without
/// `//`); where a symbolic extent stops the runs, the rest is one run. Dimensions of extent
/// 1 left at the end of `to` get index 0.
pub fn reshape_map(idx: &[Expr], from: &[Expr], to: &[Expr], span: Span) -> Vec<Expr> {
    let eq = |a: &Expr, b: &Expr| {
        a == b || matches!((a.as_int(), b.as_int()), (Some(x), Some(y)) if x == y)
    };
    let (mut a, mut b) = (0, 0);
    let mut out = Vec::with_capacity(to.len());
    while a < from.len() && b < to.len() {
        if eq(&from[a], &to[b]) {
            out.push(idx[a].clone());
            a += 1;
            b += 1;
            continue;
        }
        let (a_end, b_end) = run(from, to, a, b).unwrap_or((from.len(), to.len()));
        out.extend(regroup(
            &idx[a..a_end],
            &from[a..a_end],
            &to[b..b_end],
            span,
        ));
        a = a_end;
        b = b_end;
    }
    while out.len() < to.len() {
        out.push(Expr::int(0));
    }
    out
}

/// The ends of the shortest run from `a` and `b` with equal constant products.
fn run(from: &[Expr], to: &[Expr], a: usize, b: usize) -> Option<(usize, usize)> {
    let (mut pa, mut pb) = (from[a].as_int()?, to[b].as_int()?);
    let (mut ae, mut be) = (a + 1, b + 1);
    while pa != pb {
        if pa < pb {
            pa = pa.checked_mul(from.get(ae)?.as_int()?)?;
            ae += 1;
        } else {
            pb = pb.checked_mul(to.get(be)?.as_int()?)?;
            be += 1;
        }
    }
    Some((ae, be))
}

/// One run: linearized with `from`, delinearized with `to`.
fn regroup(idx: &[Expr], from: &[Expr], to: &[Expr], span: Span) -> Vec<Expr> {
    let Some(first) = idx.first() else {
        return vec![Expr::int(0); to.len()];
    };
    let mut lin = first.clone();
    for d in 1..from.len() {
        lin = arith(BinOp::Mul, lin, from[d].clone(), span);
        lin = arith(BinOp::Add, lin, idx[d].clone(), span);
    }
    let mut out = Vec::with_capacity(to.len());
    for d in 0..to.len() {
        let mut stride: Option<Expr> = None;
        for e in &to[d + 1..] {
            stride = Some(match stride {
                None => e.clone(),
                Some(s) => Expr::binary(BinOp::Mul, s, e.clone(), span),
            });
        }
        let q = match stride {
            Some(s) => arith(BinOp::FloorDiv, lin.clone(), s, span),
            None => lin.clone(),
        };
        out.push(if d == 0 {
            q
        } else {
            Expr::binary(BinOp::FloorMod, q, to[d].clone(), span)
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ints(v: &[i64]) -> Vec<Expr> {
        v.iter().map(|&x| Expr::int(x)).collect()
    }

    /// The row-major position of `idx` in `shape`.
    fn linear(idx: &[i64], shape: &[i64]) -> i64 {
        idx.iter().zip(shape).fold(0, |acc, (i, n)| acc * n + i)
    }

    fn eval(e: &Expr) -> i64 {
        match &e.kind {
            ExprKind::Int(v) => *v,
            ExprKind::Binary(op, a, b) => {
                crate::ir::fold_int(*op, eval(a), eval(b)).expect("defined")
            }
            _ => panic!("not constant: {e}"),
        }
    }

    /// Every position of `from` maps to the element of `to` at the same linear position.
    #[test]
    fn maps_every_position_to_the_same_linear_one() {
        let shapes: &[(&[i64], &[i64])] = &[
            (&[256, 4, 32], &[256, 128]),
            (&[256, 128], &[256, 4, 32]),
            (&[6, 4], &[4, 6]),
            (&[2, 3, 4], &[4, 3, 2]),
            (&[4, 1], &[4]),
            (&[4], &[1, 4, 1]),
            (&[8], &[2, 2, 2]),
        ];
        for (from, to) in shapes {
            let n: i64 = from.iter().product();
            for lin in 0..n {
                let mut idx = vec![0; from.len()];
                let mut rest = lin;
                for d in (0..from.len()).rev() {
                    idx[d] = rest % from[d];
                    rest /= from[d];
                }
                let out = reshape_map(&ints(&idx), &ints(from), &ints(to), Span::DUMMY);
                let got: Vec<i64> = out.iter().map(eval).collect();
                assert_eq!(linear(&got, to), lin, "{from:?} -> {to:?} at {idx:?}");
                assert!(got.iter().zip(*to).all(|(g, n)| (0..*n).contains(g)));
            }
        }
    }

    /// Splitting the last dimension keeps the leading index and needs no division of it.
    #[test]
    fn a_split_keeps_the_matching_dimensions() {
        let idx = vec![Expr::var("i"), Expr::var("j"), Expr::var("k")];
        let out = reshape_map(&idx, &ints(&[256, 4, 32]), &ints(&[256, 128]), Span::DUMMY);
        assert_eq!(out[0], Expr::var("i"));
        assert_eq!(out[1].to_string(), "j * 32 + k");
    }
}
