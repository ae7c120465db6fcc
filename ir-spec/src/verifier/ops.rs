//! Tile-op rules: regions (rank, bounds), `T.copy` (sizes, dtypes), `T.gemm` (shapes,
//! scopes, dtypes) and `T.fill` / `T.clear`.

use super::consts::const_int;
use super::Checker;
use crate::diagnostic::Diagnostic;
use crate::dtype::DType;
use crate::ir::{BufferDecl, Expr, Gemm, Reduce, ReduceKind, Region, Scope};
use crate::span::Span;

impl<'f> Checker<'f> {
    /// Tile ops run on a thread block, so they need an enclosing kernel.
    fn require_kernel(&mut self, op: &str, span: Span) {
        if self.kernel.is_none() {
            self.error(span, format!("`{op}` must be inside a `T.Kernel`"));
        }
    }

    /// Checks a region: its buffer, rank, integer bounds, positive extents, and that it is not
    /// statically outside the buffer. Returns the buffer when the region is well-formed.
    ///
    /// `partial`: the op masks its edges (`T.copy`), so a region of a global tensor may reach
    /// past the tensor's end — a partial tile, exactly what a symbolic dim gives at run time,
    /// so binding the dim with `-D` must not turn it into an error. Such a region must still
    /// start inside the tensor: one that lies wholly past its end moves nothing.
    fn region(&mut self, r: &Region, partial: bool) -> Option<&'f BufferDecl> {
        let span = self.at(r.span);
        let name_span = if r.buffer.span.is_dummy() {
            span
        } else {
            r.buffer.span
        };
        let decl = self.resolve_buffer(&r.buffer.name, name_span);
        let mut ok = decl.is_some();
        for range in &r.ranges {
            ok &= self.expect_int(&range.start, "a region start").is_some();
            ok &= self.expect_int(&range.extent, "a region extent").is_some();
        }
        let decl = decl?;
        let partial = partial && decl.scope == Scope::Global;
        let name = &r.buffer.name;
        if r.ranges.len() != decl.shape.len() {
            self.error(
                span,
                format!(
                    "buffer `{name}` has rank {} but the region has {} {}",
                    decl.shape.len(),
                    r.ranges.len(),
                    super::exprs::plural(r.ranges.len(), "dimension", "dimensions")
                ),
            );
            return None;
        }
        for (axis, (range, dim)) in r.ranges.iter().zip(&decl.shape).enumerate() {
            let start = const_int(&range.start);
            let extent = const_int(&range.extent);
            let dim = const_int(dim);
            let at = |e: &Expr| if e.span.is_dummy() { span } else { e.span };
            if let Some(e) = extent.filter(|&e| e <= 0) {
                ok = false;
                if self.is_empty_dim(&range.extent) {
                    continue;
                }
                self.error(
                    at(&range.extent),
                    format!(
                        "region extent must be positive, found {e} (dimension {axis} of `{name}`)"
                    ),
                );
                continue;
            }
            if let Some(s) = start.filter(|&s| s < 0) {
                self.error(
                    at(&range.start),
                    format!(
                        "region of `{name}` starts at {s} in dimension {axis}, outside the buffer"
                    ),
                );
                ok = false;
                continue;
            }
            // B7: the indices a region covers are computed in int64 (start + offset); a
            // region reaching past 2^63 would wrap to negative indices, which a mask
            // `index < extent` lets through.
            if let (Some(s), Some(e)) = (start, extent) {
                if s.checked_add(e).is_none() {
                    self.error(
                        at(&range.start),
                        format!(
                            "region of `{name}` starts at {s} with extent {e} in dimension \
                             {axis}: its indices pass 2^63 - 1, past any tensor"
                        ),
                    );
                    ok = false;
                    continue;
                }
            }
            // A dimension ≤ 0 was reported at the declaration.
            let Some(d) = dim.filter(|&d| d > 0) else {
                ok &= dim.is_none();
                continue;
            };
            match (start, extent) {
                (Some(s), _) if partial && s >= d => {
                    self.push(
                        Diagnostic::error(
                            span,
                            format!(
                                "region of `{name}` starts at {s} in dimension {axis}, past its end \
                                 (extent {d}): the copy moves nothing"
                            ),
                        )
                        .with_note(
                            "a region may reach past the end of a global tensor (a partial \
                             tile: the copy masks it), but it must start inside it",
                        ),
                    );
                    ok = false;
                }
                _ if partial => {}
                (Some(s), Some(e)) if s.saturating_add(e) > d => {
                    self.error(
                        span,
                        format!(
                            "region {s}..{} of dimension {axis} of `{name}` is outside the buffer \
                             (extent {d})",
                            s.saturating_add(e)
                        ),
                    );
                    ok = false;
                }
                (_, Some(e)) if e > d => {
                    self.error(
                        span,
                        format!(
                            "region extent {e} exceeds dimension {axis} of `{name}` (extent {d})"
                        ),
                    );
                    ok = false;
                }
                _ => {}
            }
        }
        ok.then_some(decl)
    }

    /// Whether `e` is a shape entry ≤ 0 already reported at its declaration.
    fn is_empty_dim(&self, e: &Expr) -> bool {
        !e.span.is_dummy() && self.empty_dims.contains(&(e.span.start, e.span.end))
    }

    pub(super) fn copy(&mut self, src: &Region, dst: &Region, span: Span) {
        self.require_kernel("T.copy", span);
        let s = self.region(src, true);
        let d = self.region(dst, true);
        let (Some(s), Some(d)) = (s, d) else {
            return;
        };
        self.no_local_operand("`T.copy`", s, src, span);
        self.no_local_operand("`T.copy`", d, dst, span);
        if s.dtype.is_bool() != d.dtype.is_bool() {
            self.error(
                span,
                format!(
                    "`T.copy` from `{}` ({}) to `{}` ({}): bool buffers copy only to and from \
                     bool buffers",
                    s.name.name, s.dtype, d.name.name, d.dtype
                ),
            );
        }
        let ext_s = non_unit_extents(src);
        let ext_d = non_unit_extents(dst);
        let cs: Vec<Option<i64>> = ext_s.iter().map(|e| const_int(e)).collect();
        let cd: Vec<Option<i64>> = ext_d.iter().map(|e| const_int(e)).collect();
        let all_const = cs.iter().chain(&cd).all(Option::is_some);
        // A symbolic extent may turn out to be 1, so only constant extents can be compared
        // position by position, and only all-constant shapes by length.
        let mismatch = if ext_s.len() != ext_d.len() {
            all_const
        } else {
            cs.iter()
                .zip(&cd)
                .any(|(a, b)| matches!((a, b), (Some(a), Some(b)) if a != b))
        };
        if mismatch {
            self.push(
                Diagnostic::error(
                    span,
                    format!(
                        "`T.copy` regions have different shapes: `{}` is {}, `{}` is {}",
                        src.buffer.name,
                        shape_text(src),
                        dst.buffer.name,
                        shape_text(dst),
                    ),
                )
                .with_note(
                    "the shapes must agree once extent-1 dimensions are dropped \
                     (1x128 matches 128); elements pair up in row-major order",
                ),
            );
        }
    }

    pub(super) fn gemm(&mut self, g: &Gemm, span: Span) {
        self.require_kernel("T.gemm", span);
        let a = self.region(&g.a, false);
        let b = self.region(&g.b, false);
        let c = self.region(&g.c, false);
        let operands = [("A", &g.a, a), ("B", &g.b, b), ("C", &g.c, c)];
        let mut ranks_ok = true;
        for (role, region, decl) in operands {
            let Some(decl) = decl else {
                ranks_ok = false;
                continue;
            };
            let at = self.at(region.span);
            // A pipeline stage `A_shared[ko % 3, 0:128, 0:32]` is a matrix too: the operand
            // is the last two dimensions, any leading ones must have the constant extent 1.
            let rank = region.ranges.len();
            let lead = &region.ranges[..rank.saturating_sub(2)];
            if rank < 2 || lead.iter().any(|r| const_int(&r.extent) != Some(1)) {
                self.error(
                    at,
                    format!(
                        "gemm operand {role} (`{}`) must be a matrix (rank 2, leading \
                         dimensions of extent 1), found rank {rank}",
                        decl.name.name,
                    ),
                );
                ranks_ok = false;
            }
            let scope_ok = match role {
                "C" => matches!(decl.scope, Scope::Fragment | Scope::Local),
                _ => matches!(decl.scope, Scope::Shared | Scope::Fragment),
            };
            if !scope_ok {
                let allowed = if role == "C" {
                    "fragment or local"
                } else {
                    "shared or fragment"
                };
                self.error(
                    at,
                    format!(
                        "gemm operand {role} (`{}`) must be a {allowed} buffer, found {}",
                        decl.name.name,
                        decl.scope.name()
                    ),
                );
            }
        }
        if let (Some(a), Some(b), Some(c)) = (a, b, c) {
            self.gemm_dtypes(a, b, c, span);
            if g.packed_int4 {
                self.gemm_packed_int4(g, a, b, span);
            }
        }
        if ranks_ok {
            self.gemm_shapes(g, span);
        }
    }

    fn gemm_dtypes(&mut self, a: &BufferDecl, b: &BufferDecl, c: &BufferDecl, span: Span) {
        let input_ok = |d: DType| {
            matches!(
                d,
                DType::Float16
                    | DType::BFloat16
                    | DType::Float8E4M3
                    | DType::Float8E5M2
                    | DType::Int8
                    | DType::Int4
            )
        };
        let fp8 = |d: DType| matches!(d, DType::Float8E4M3 | DType::Float8E5M2);
        for d in [a, b] {
            if !input_ok(d.dtype) {
                self.error(
                    span,
                    format!(
                        "gemm inputs must be float16, bfloat16, float8_e4m3, float8_e5m2, int8 or \
                         int4; `{}` is {}",
                        d.name.name, d.dtype
                    ),
                );
                return;
            }
        }
        if a.dtype != b.dtype && !(fp8(a.dtype) && fp8(b.dtype)) {
            self.error(
                span,
                format!(
                    "gemm inputs must have the same dtype (fp8 may mix e4m3 and e5m2): `{}` is {}, \
                     `{}` is {}",
                    a.name.name, a.dtype, b.name.name, b.dtype
                ),
            );
            return;
        }
        let c_ok = match c.dtype {
            DType::Float32 => !a.dtype.is_int(),
            DType::Float16 => a.dtype == DType::Float16,
            DType::Int32 => a.dtype.is_int(),
            _ => false,
        };
        if !c_ok {
            let allowed = match a.dtype {
                DType::Int8 | DType::Int4 => "int32",
                DType::Float16 => "float32 or float16",
                _ => "float32",
            };
            self.error(
                span,
                format!(
                    "gemm accumulator `{}` is {}, but {} inputs accumulate in {allowed}",
                    c.name.name, c.dtype, a.dtype
                ),
            );
        }
    }

    /// H7: a `packed_int4` gemm reads two int4 elements from each byte of int8 operands
    /// along K, which must be the innermost dimension of both (A not transposed, B
    /// transposed: mma.sync's `.s4` form is row.col only).
    fn gemm_packed_int4(&mut self, g: &Gemm, a: &BufferDecl, b: &BufferDecl, span: Span) {
        for d in [a, b] {
            if d.dtype != DType::Int8 {
                self.error(
                    span,
                    format!(
                        "a `packed_int4=True` gemm takes int8 operands holding two int4 to a                          byte; `{}` is {} (docs/ir.md, rule H7)",
                        d.name.name, d.dtype
                    ),
                );
            }
        }
        if g.trans_a || !g.trans_b {
            self.error(
                span,
                "a `packed_int4=True` gemm packs K, which must be innermost in both operands:                  it needs transpose_A=False and transpose_B=True (docs/ir.md, rule H7)",
            );
        }
    }

    /// M, N and K agree between A (MxK, or KxM with transpose_A), B (KxN, or NxK with
    /// transpose_B) and C (MxN), wherever both sides are constants.
    fn gemm_shapes(&mut self, g: &Gemm, span: Span) {
        // Dimension `i` of the operand's matrix: the last two dimensions of its region.
        let ext = |r: &Region, i: usize| {
            let lead = r.ranges.len().saturating_sub(2);
            r.ranges.get(lead + i).and_then(|x| const_int(&x.extent))
        };
        let (am, ak) = if g.trans_a { (1, 0) } else { (0, 1) };
        let (bk, bn) = if g.trans_b { (1, 0) } else { (0, 1) };
        let checks = [
            ("K", "A", ext(&g.a, ak), "B", ext(&g.b, bk)),
            ("M", "A", ext(&g.a, am), "C", ext(&g.c, 0)),
            ("N", "B", ext(&g.b, bn), "C", ext(&g.c, 1)),
        ];
        for (dim, x, vx, y, vy) in checks {
            if let (Some(vx), Some(vy)) = (vx, vy) {
                if vx != vy {
                    self.push(
                        Diagnostic::error(
                            span,
                            format!("gemm {dim} mismatch: {x} gives {dim} = {vx} but {y} gives {dim} = {vy}"),
                        )
                        .with_note(
                            "A is MxK (KxM with transpose_A=True), B is KxN (NxK with \
                             transpose_B=True), C is MxN",
                        ),
                    );
                }
            }
        }
    }

    /// S5: a tile op spreads its elements over the block's threads, and a local buffer has
    /// one copy per thread: no layout says which thread holds which element, so a tile op
    /// never takes one (a fragment is the tile ops' register buffer).
    fn no_local_operand(&mut self, op: &str, decl: &BufferDecl, r: &Region, span: Span) {
        if decl.scope != Scope::Local {
            return;
        }
        let at = if r.buffer.span.is_dummy() {
            span
        } else {
            r.buffer.span
        };
        self.push(
            Diagnostic::error(
                self.at(at),
                format!("{op} on local buffer `{}`", decl.name.name),
            )
            .with_note(
                "a tile op spreads its elements over the block's threads, and a local buffer \
                 has one copy per thread: use a fragment (`T.alloc_fragment`), or write the \
                 loop over its elements yourself",
            ),
        );
    }

    pub(super) fn fill(&mut self, dst: &Region, value: &Expr, span: Span) {
        self.require_kernel("T.fill", span);
        let decl = self.region(dst, false);
        if let Some(decl) = decl {
            self.no_local_operand("`T.fill`", decl, dst, span);
        }
        let t = self.check_expr(value);
        if let (Some(decl), Some(t)) = (decl, t) {
            self.check_value_fits(
                decl,
                t.dtype,
                if value.span.is_dummy() {
                    span
                } else {
                    value.span
                },
            );
        }
    }
}

impl<'f> Checker<'f> {
    /// Rules D1–D5 of a reduction (docs/ir.md, "`T.reduce_*`").
    pub(super) fn reduce(&mut self, r: &Reduce, span: Span) {
        let op = r.kind.name();
        self.require_kernel(op, span);
        let at = |i: &crate::ir::Ident| if i.span.is_dummy() { span } else { i.span };
        let src = self.resolve_buffer(&r.src.name, at(&r.src));
        let dst = self.resolve_buffer(&r.dst.name, at(&r.dst));
        let (Some(src), Some(dst)) = (src, dst) else {
            return;
        };
        for (b, id) in [(src, &r.src), (dst, &r.dst)] {
            if !matches!(b.scope, Scope::Fragment | Scope::Shared) {
                self.error(
                    at(id),
                    format!(
                        "`{op}` works on fragments and shared buffers; `{}` is {}",
                        b.name.name,
                        b.scope.name()
                    ),
                );
            }
            if b.dtype == DType::Bool
                || (r.kind.takes_abs()
                    && !b.dtype.is_float()
                    && !matches!(b.dtype, DType::Int8 | DType::Int32 | DType::Int64))
            {
                self.error(at(id), format!("`{op}` does not take {} buffers", b.dtype));
            }
        }
        let Some(axis) = r.axis(src.shape.len()) else {
            self.error(
                span,
                format!(
                    "`dim={}` is not a dimension of `{}`, which has rank {}",
                    r.dim,
                    src.name.name,
                    src.shape.len()
                ),
            );
            return;
        };
        let want: Vec<Option<i64>> = src
            .shape
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != axis)
            .map(|(_, e)| const_int(e))
            .collect();
        let found: Vec<Option<i64>> = dst.shape.iter().map(const_int).collect();
        // A reduction to a scalar writes a one-element buffer.
        let scalar = want.is_empty() && found == [Some(1)];
        if !scalar && (want != found || want.iter().any(Option::is_none)) {
            let text = |v: &[Option<i64>]| {
                let parts: Vec<String> = v
                    .iter()
                    .map(|x| x.map_or("?".into(), |n| n.to_string()))
                    .collect();
                format!("({})", parts.join(", "))
            };
            self.error(
                at(&r.dst),
                format!(
                    "`{op}` of `{}` along dimension {axis} gives shape {}, but `{}` has shape {}",
                    src.name.name,
                    text(&want),
                    dst.name.name,
                    text(&found)
                ),
            );
        }
        if r.kind == ReduceKind::Sum && src.dtype.is_float() != dst.dtype.is_float() {
            self.error(
                at(&r.dst),
                format!(
                    "`{op}` mixes {} and {} buffers; give both a float (or both an integer) dtype",
                    src.dtype, dst.dtype
                ),
            );
        }
    }
}

/// The extents of `r` without those that are the constant 1.
fn non_unit_extents(r: &Region) -> Vec<&Expr> {
    r.ranges
        .iter()
        .map(|x| &x.extent)
        .filter(|e| const_int(e) != Some(1))
        .collect()
}

/// `(128, 32)`: the region's extents as written.
fn shape_text(r: &Region) -> String {
    let parts: Vec<String> = r.ranges.iter().map(|x| x.extent.to_string()).collect();
    format!("({})", parts.join(", "))
}
