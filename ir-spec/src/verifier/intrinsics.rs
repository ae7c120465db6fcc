//! Intrinsic rules (I1–I6 of docs/ir.md): where each thread-level intrinsic may appear, its
//! operands (buffer, rank, integer indices, scopes, dtypes, extent inside the buffer) and its
//! constant arguments; and the layout rules K7–K8 of `T.annotate_layout`.

use super::consts::const_int;
use super::Checker;
use crate::diagnostic::Diagnostic;
use crate::dtype::DType;
use crate::ir::{BufferDecl, ElemRef, Expr, Intrinsic, Layout, LayoutAnnotation, Scope};
use crate::span::Span;

/// The byte counts one `cp.async` may copy.
pub const CP_ASYNC_BYTES: [i64; 3] = [4, 8, 16];
/// The matrix counts of `ldmatrix` (`.x1`, `.x2`, `.x4`).
pub const LDMATRIX_NUMS: [i64; 3] = [1, 2, 4];
/// The widths of `T.make_swizzled_layout(buf, bytes=B)`.
pub const SWIZZLE_BYTES: [i64; 3] = [32, 64, 128];

impl<'f> Checker<'f> {
    pub(super) fn intrinsic(&mut self, i: &Intrinsic, span: Span) {
        let name = intrinsic_name(i);
        self.intrinsic_place(i, name, span);
        match i {
            Intrinsic::CpAsync {
                dst,
                src,
                bytes,
                pred,
            } => self.cp_async(dst, src, *bytes, pred.as_ref(), span),
            Intrinsic::CommitGroup => {}
            Intrinsic::WaitGroup(n) => {
                if *n < 0 {
                    self.error(
                        span,
                        format!("`T.cp_async_wait({n})`: the group count must be ≥ 0"),
                    );
                }
            }
            Intrinsic::Ldmatrix {
                dst,
                src,
                num,
                trans: _,
            } => self.ldmatrix(dst, src, *num, span),
            Intrinsic::Mma { acc, a, b } => self.mma(acc, a, b, span),
        }
    }

    /// I1: every intrinsic is inside a kernel and not inside a vectorized loop; all but
    /// commit / wait (which are no-ops at the tile level) are inside a thread-binding loop.
    fn intrinsic_place(&mut self, i: &Intrinsic, name: &str, span: Span) {
        let tile_level_ok = matches!(i, Intrinsic::CommitGroup | Intrinsic::WaitGroup(_));
        if self.kernel.is_none() {
            self.error(span, format!("`{name}` must be inside a `T.Kernel`"));
        } else if !tile_level_ok && self.thread_loop.is_none() {
            self.push(
                Diagnostic::error(
                    self.at(span),
                    format!("`{name}` outside a thread-binding loop"),
                )
                .with_note(
                    "it is a thread-level instruction; it belongs inside \
                     `for tx in T.thread_binding(n, thread=\"threadIdx.x\")`",
                ),
            );
        }
        if let Some(v) = self.vectorized {
            self.push(
                Diagnostic::error(self.at(span), format!("`{name}` inside a vectorized loop"))
                    .with_note_at(v, "the vectorized loop is here"),
            );
        }
    }

    /// I2: an operand names a buffer in scope with one integer index per dimension, and its
    /// `count` elements from there lie inside the buffer when everything is constant.
    /// Returns the buffer when the operand is well-formed.
    fn elem_ref(&mut self, r: &ElemRef, count: i64, what: &str) -> Option<&'f BufferDecl> {
        let at = self.at(r.buffer.span);
        let decl = self.resolve_buffer(&r.buffer.name, at);
        let mut ok = true;
        for index in &r.indices {
            ok &= self.expect_int(index, "buffer index").is_some();
        }
        let decl = decl?;
        let before = self.diags.len();
        self.check_indices(decl, &r.indices, at);
        if !ok || self.diags.len() > before {
            return None;
        }
        if let Some((start, numel)) = flat_start(decl, &r.indices) {
            if start.saturating_add(count) > numel {
                self.error(
                    at,
                    format!(
                        "{what} covers {count} elements from `{}` (element {start}), past the \
                         end of `{}` ({numel} elements)",
                        show_ref(r),
                        decl.name.name
                    ),
                );
                return None;
            }
        }
        Some(decl)
    }

    /// An operand's scope must be `scope`.
    fn expect_scope(&mut self, decl: &BufferDecl, scope: Scope, what: &str, at: Span) -> bool {
        if decl.scope == scope {
            return true;
        }
        self.error(
            at,
            format!(
                "{what} must be a {} buffer, but `{}` is a {} buffer",
                scope.name(),
                decl.name.name,
                decl.scope.name()
            ),
        );
        false
    }

    /// I3.
    fn cp_async(
        &mut self,
        dst: &ElemRef,
        src: &ElemRef,
        bytes: i64,
        pred: Option<&Expr>,
        span: Span,
    ) {
        let bytes_ok = CP_ASYNC_BYTES.contains(&bytes);
        if !bytes_ok {
            self.error(
                span,
                format!("`T.cp_async` copies 4, 8 or 16 bytes, found {bytes}"),
            );
        }
        if let Some(p) = pred {
            self.expect_bool(p, "the predicate of `T.cp_async`");
        }
        // The element count needs the dtype; check the operands with it once known.
        let count = |d: Option<&BufferDecl>| {
            d.map(|d| i64::from(d.dtype.bytes()))
                .filter(|&e| bytes_ok && e > 0 && bytes % e == 0)
                .map_or(1, |e| bytes / e)
        };
        let dst_decl = self.env.buffer(&dst.buffer.name);
        let src_decl = self.env.buffer(&src.buffer.name);
        let d = self.elem_ref(dst, count(dst_decl), "the `T.cp_async` destination");
        let s = self.elem_ref(src, count(src_decl), "the `T.cp_async` source");
        if let Some(d) = d {
            let at = self.at(dst.buffer.span);
            self.expect_scope(d, Scope::Shared, "the destination of `T.cp_async`", at);
        }
        if let Some(s) = s {
            let at = self.at(src.buffer.span);
            self.expect_scope(s, Scope::Global, "the source of `T.cp_async`", at);
        }
        let (Some(d), Some(s)) = (d, s) else {
            return;
        };
        if d.dtype != s.dtype {
            self.error(
                span,
                format!(
                    "`T.cp_async` copies bytes between buffers of one dtype: `{}` is {}, `{}` is \
                     {}",
                    d.name.name, d.dtype, s.name.name, s.dtype
                ),
            );
        } else if bytes_ok && bytes % i64::from(d.dtype.bytes()) != 0 {
            self.error(
                span,
                format!(
                    "`T.cp_async` of {bytes} bytes is not a whole number of {} elements ({} \
                     bytes each)",
                    d.dtype,
                    d.dtype.bytes()
                ),
            );
        }
    }

    /// I4.
    fn ldmatrix(&mut self, dst: &ElemRef, src: &ElemRef, num: i64, span: Span) {
        let num_ok = LDMATRIX_NUMS.contains(&num);
        if !num_ok {
            self.error(
                span,
                format!("`T.ldmatrix` loads 1, 2 or 4 matrices (`num`), found {num}"),
            );
        }
        let per_lane = if num_ok { 2 * num } else { 2 };
        let d = self.elem_ref(dst, per_lane, "the `T.ldmatrix` destination");
        // Each lane's source address is one 8-element (16-byte) row.
        let s = self.elem_ref(src, 8, "the `T.ldmatrix` source row");
        if let Some(d) = d {
            let at = self.at(dst.buffer.span);
            self.expect_scope(d, Scope::Local, "the destination of `T.ldmatrix`", at);
        }
        if let Some(s) = s {
            let at = self.at(src.buffer.span);
            self.expect_scope(s, Scope::Shared, "the source of `T.ldmatrix`", at);
        }
        let (Some(d), Some(s)) = (d, s) else {
            return;
        };
        let sixteen = |t: DType| matches!(t, DType::Float16 | DType::BFloat16);
        if !sixteen(d.dtype) || !sixteen(s.dtype) || d.dtype != s.dtype {
            self.error(
                span,
                format!(
                    "`T.ldmatrix` moves 16-bit elements: both buffers must be float16 or both \
                     bfloat16; `{}` is {}, `{}` is {}",
                    d.name.name, d.dtype, s.name.name, s.dtype
                ),
            );
        }
    }

    /// I5.
    fn mma(&mut self, acc: &ElemRef, a: &ElemRef, b: &ElemRef, span: Span) {
        let c = self.elem_ref(acc, 4, "the `T.mma_sync` accumulator");
        let x = self.elem_ref(a, 8, "the `T.mma_sync` A operand");
        let y = self.elem_ref(b, 4, "the `T.mma_sync` B operand");
        for (decl, r, role) in [
            (c, acc, "accumulator"),
            (x, a, "A operand"),
            (y, b, "B operand"),
        ] {
            if let Some(decl) = decl {
                let at = self.at(r.buffer.span);
                self.expect_scope(
                    decl,
                    Scope::Local,
                    &format!("the {role} of `T.mma_sync`"),
                    at,
                );
            }
        }
        if let Some(c) = c {
            if c.dtype != DType::Float32 {
                self.error(
                    self.at(acc.buffer.span),
                    format!(
                        "the accumulator of `T.mma_sync` must be float32; `{}` is {}",
                        c.name.name, c.dtype
                    ),
                );
            }
        }
        if let (Some(x), Some(y)) = (x, y) {
            let input = |t: DType| matches!(t, DType::Float16 | DType::BFloat16);
            if !input(x.dtype) || x.dtype != y.dtype {
                self.error(
                    span,
                    format!(
                        "`T.mma_sync` multiplies float16 by float16 or bfloat16 by bfloat16; \
                         `{}` is {}, `{}` is {}",
                        x.name.name, x.dtype, y.name.name, y.dtype
                    ),
                );
            }
        }
    }

    /// K7, K8: a layout annotation names a buffer in scope of the right scope, with valid
    /// parameters.
    pub(super) fn layout_annotation(&mut self, ann: &LayoutAnnotation) {
        let at = if ann.buffer.span.is_dummy() {
            self.at(ann.span)
        } else {
            ann.buffer.span
        };
        let name = &ann.buffer.name;
        if let Some(decl) = self.resolve_buffer(name, at) {
            match ann.layout {
                Layout::Swizzled | Layout::Swizzle { .. } | Layout::Padded { .. } => {
                    if decl.scope != Scope::Shared {
                        let what = if matches!(ann.layout, Layout::Padded { .. }) {
                            "a padded"
                        } else {
                            "a swizzled"
                        };
                        self.error(
                            at,
                            format!(
                                "layout annotation on `{name}`, a {} buffer; only shared \
                                 buffers take {what} layout",
                                decl.scope.name()
                            ),
                        );
                    }
                }
                Layout::MmaAccumulator { .. } => {
                    // A fragment, or the local array `lower-tile-ops` made of one.
                    if !matches!(decl.scope, Scope::Fragment | Scope::Local) {
                        self.error(
                            at,
                            format!(
                                "`T.mma_accumulator_layout` on `{name}`, a {} buffer; it lays \
                                 out fragments",
                                decl.scope.name()
                            ),
                        );
                    }
                }
            }
        }
        match ann.layout {
            Layout::Swizzle { bytes } if !SWIZZLE_BYTES.contains(&bytes) => self.error(
                at,
                format!("the swizzle of `{name}` is 32, 64 or 128 bytes wide, found {bytes}"),
            ),
            Layout::Padded { pad } if pad <= 0 => self.error(
                at,
                format!("the padding of `{name}` must be positive, found {pad}"),
            ),
            Layout::MmaAccumulator { warps_m, warps_n } if warps_m <= 0 || warps_n <= 0 => self
                .error(
                    at,
                    format!(
                        "the warp grid of `{name}` must be positive, found warps_m={warps_m}, \
                         warps_n={warps_n}"
                    ),
                ),
            _ => {}
        }
    }
}

/// `T.cp_async`, … as written.
pub(super) fn intrinsic_name(i: &Intrinsic) -> &'static str {
    match i {
        Intrinsic::CpAsync { .. } => "T.cp_async",
        Intrinsic::CommitGroup => "T.cp_async_commit",
        Intrinsic::WaitGroup(_) => "T.cp_async_wait",
        Intrinsic::Ldmatrix { .. } => "T.ldmatrix",
        Intrinsic::Mma { .. } => "T.mma_sync",
    }
}

/// The row-major flat index of a constant reference and the buffer's element count, when
/// both are constant.
fn flat_start(decl: &BufferDecl, indices: &[Expr]) -> Option<(i64, i64)> {
    let mut flat: i64 = 0;
    let mut numel: i64 = 1;
    for (index, dim) in indices.iter().zip(&decl.shape) {
        let d = const_int(dim)?;
        flat = flat.checked_mul(d)?.checked_add(const_int(index)?)?;
        numel = numel.checked_mul(d)?;
    }
    Some((flat, numel))
}

fn show_ref(r: &ElemRef) -> String {
    let idx: Vec<String> = r.indices.iter().map(ToString::to_string).collect();
    format!("{}[{}]", r.buffer.name, idx.join(", "))
}
