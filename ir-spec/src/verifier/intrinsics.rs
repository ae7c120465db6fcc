//! Intrinsic rules (I1–I7 and I10 of docs/ir.md), derived from each intrinsic's definition
//! (`crate::intrinsic`): where it may appear, its operands (buffer, rank, integer indices,
//! the run of elements inside the buffer), the definition's own rules (`intrinsic::check`:
//! constants, scopes, dtypes, TMA boxes), a TMA destination's alignment (I6) and the
//! target's instructions (I7); and the layout rules K7–K8 of `T.annotate_layout`.

use super::consts::const_int;
use super::Checker;
use crate::diagnostic::Diagnostic;
use crate::intrinsic::{self, Arg, Count, Effect, Needs, ParamKind};
use crate::ir::{BufferDecl, ElemRef, Expr, Intrinsic, Layout, LayoutAnnotation, RowsOf, Scope};
use crate::span::Span;
use crate::target::Target;
use crate::wgmma;

/// The widths of `T.make_swizzled_layout(buf, bytes=B)`.
pub const SWIZZLE_BYTES: [i64; 3] = [32, 64, 128];

impl<'f> Checker<'f> {
    /// Rule I10: a draw (`T.philox_rand`, `T.philox_uniform`) takes its state from a
    /// `T.philox_init` earlier in the function; a state nothing initialized would be read
    /// unwritten.
    fn philox_order(&mut self, i: &Intrinsic, span: Span) {
        match i {
            Intrinsic::PhiloxInit { state, .. } => {
                self.philox_states.insert(state.buffer.name.clone());
            }
            Intrinsic::PhiloxRand { state, .. } | Intrinsic::PhiloxUniform { state, .. }
                if !self.philox_states.contains(&state.buffer.name) =>
            {
                let d = Diagnostic::error(
                    self.at(span),
                    format!(
                        "`{}` draws from `{}`, which no earlier `T.philox_init` initializes",
                        i.def().name,
                        state.buffer.name
                    ),
                )
                .with_note(
                    "initialize the generator state first: `T.philox_init(state[0], seed, \
                         seq, offset)` (TileLang's `T.rng_init`)",
                );
                self.push(d);
            }
            _ => {}
        }
    }

    pub(super) fn intrinsic(&mut self, i: &'f Intrinsic, span: Span) {
        let def = i.def();
        self.intrinsic_place(def.name, def.block_level, span);
        self.philox_order(i, span);
        // A print inside `T.Parallel` would be printed by whichever thread the layout gives
        // the element, which the tile level does not know (rule I9).
        if let (
            Intrinsic::Print { .. } | Intrinsic::PrintMsg { .. } | Intrinsic::PrintElem { .. },
            Some(p),
        ) = (i, self.parallel)
        {
            self.push(
                Diagnostic::error(
                    self.at(span),
                    // `T.print_value` is what TileLang's `T.print(value)` reads as.
                    format!(
                        "`{}` inside a `T.Parallel` loop",
                        if def.name == "T.print_value" {
                            "T.print"
                        } else {
                            def.name
                        }
                    ),
                )
                .with_note_at(p, "the `T.Parallel` loop is here")
                .with_note(
                    "print from block-level code (every thread prints), from per-thread code \
                         (`tx = T.get_thread_binding()`), or print the whole tile: `T.print(buf)`",
                ),
            );
        }
        // I2: operands that are well-formed, then the definition's rules on those (a
        // malformed operand has been reported; its scope and dtype are not checked).
        let mut malformed: Vec<&str> = Vec::new();
        // A predicate that is constant false: the call reads nothing (`T.cp_async`'s
        // zero fill; an unrolled pipeline's last guarded prefetch `k + 1 < n` is one).
        let reads_nothing = i.pred().is_some_and(|p| {
            crate::interval::decide(p, &crate::interval::Ranges::new()) == Some(false)
        });
        for (param, arg) in def.params.iter().zip(i.args()) {
            match (param.kind, arg) {
                (ParamKind::Ref(rule), Arg::Ref(r)) => {
                    // A TMA source names coordinates, which may lie outside its buffer; a
                    // source that is not read may too.
                    let count = match rule.count {
                        Count::Box(_) => None,
                        _ if reads_nothing && rule.effect == Effect::Read => None,
                        _ => Some(
                            self.env
                                .buffer(&r.buffer.name)
                                .and_then(|d| i.count(param, i64::from(d.dtype.bytes())))
                                .unwrap_or(1),
                        ),
                    };
                    let what = format!("the {} of `{}`", param.role, def.name);
                    if self.elem_ref(r, count, &what).is_none() {
                        malformed.push(&r.buffer.name);
                    }
                }
                (ParamKind::Pred, Arg::Pred(Some(p))) => {
                    self.expect_bool(p, &format!("the {} of `{}`", param.role, def.name));
                }
                (ParamKind::Value { .. }, Arg::Value(v)) => {
                    self.expect_int(v, &format!("the {} of `{}`", param.role, def.name));
                }
                (ParamKind::Scalar, Arg::Value(v)) => {
                    self.check_expr(v);
                }
                _ => {}
            }
        }
        // A named barrier waits for `count` threads of the block: more than it has never
        // arrive (a hang on the GPU).
        if let (
            Intrinsic::BarSync { id, count } | Intrinsic::BarArrive { id, count },
            Some(block),
        ) = (i, &self.block)
        {
            let threads: i64 = block.iter().product();
            if *count > threads {
                self.push(Diagnostic::error(
                    self.at(span),
                    format!(
                        "`{}({id}, {count})` counts {count} threads, more than the block's \
                         {threads}: its phase would never complete",
                        def.name
                    ),
                ));
            }
        }
        // I8: a multicast reaches only blocks of the kernel's cluster; a constant rank of a
        // remote arrival is one of them.
        let ranks = self.cluster_size;
        match i {
            Intrinsic::TmaLoad { multicast, .. } if *multicast >> ranks.min(16) != 0 => {
                self.push(
                    Diagnostic::error(
                        self.at(span),
                        format!(
                            "`T.tma_load` multicasts to mask {multicast:#x}, but the kernel's \
                             cluster has {ranks} block{} (mask bits 0..{ranks})",
                            if ranks == 1 { "" } else { "s" }
                        ),
                    )
                    .with_note("give the kernel `cluster_dims=` on `T.Kernel`"),
                );
            }
            Intrinsic::MbarrierArriveCluster { rank, .. } => {
                if let Some(r) = const_int(rank).filter(|r| !(0..ranks).contains(r)) {
                    self.error(
                        rank.span,
                        format!(
                            "`T.mbarrier_arrive_cluster` to block {r}, but the kernel's cluster \
                             has {ranks} block{}",
                            if ranks == 1 { "" } else { "s" }
                        ),
                    );
                }
            }
            _ => {}
        }
        // I7: the target has the instruction.
        if let Some(target) = self.requirements.target {
            if !def.needs.met_by(target) {
                self.push(
                    Diagnostic::error(
                        self.at(span),
                        format!(
                            "`{}` needs a target with {}",
                            def.name,
                            def.needs.describe()
                        ),
                    )
                    .with_note(format!(
                        "the target is {}; {} has it",
                        target.name(),
                        supporting_targets(def.needs)
                    )),
                );
            }
        }
        if let Intrinsic::TmaLoad { dst, swizzle, .. } = i {
            self.tma_alignment(dst, *swizzle);
        }
        let env = &self.env;
        let violations = intrinsic::check(i, &|name| {
            env.buffer(name)
                .filter(|_| !malformed.contains(&name))
                .map(intrinsic::BufFacts::from)
        });
        for v in violations {
            let at = v.at.map_or(span, |r| self.at(r.buffer.span));
            self.error(at, v.message);
        }
    }

    /// I1: every intrinsic is inside a kernel and not inside a vectorized loop; all but the
    /// block-level ones (commit / wait, no-ops at the tile level) are inside a thread-binding
    /// loop.
    fn intrinsic_place(&mut self, name: &str, block_level: bool, span: Span) {
        if self.kernel.is_none() {
            self.error(span, format!("`{name}` must be inside a `T.Kernel`"));
        } else if !block_level && self.thread_loop.is_none() {
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

    /// I6: a TMA destination with a constant index starts at a byte offset of its buffer
    /// aligned as [`wgmma::Swizzle::tma_alignment`] requires (the buffer's base is aligned
    /// by the shared-memory plan; the interpreter checks the absolute address).
    fn tma_alignment(&mut self, dst: &ElemRef, swizzle: i64) {
        let Some(decl) = self.env.buffer(&dst.buffer.name) else {
            return;
        };
        let Some(sw) = wgmma::Swizzle::from_bytes(swizzle) else {
            return;
        };
        if let Some((start, _)) = flat_start(decl, &dst.indices) {
            let offset = start.saturating_mul(i64::from(decl.dtype.bytes()));
            let align = sw.tma_alignment();
            if offset % align != 0 {
                let at = self.at(dst.buffer.span);
                self.error(
                    at,
                    format!(
                        "the destination of `T.tma_load` must start {align}-byte aligned (swizzle \
                         {swizzle}): `{}` is at byte {offset} of `{}`",
                        show_ref(dst),
                        decl.name.name
                    ),
                );
            }
        }
    }

    /// I2: an operand names a buffer in scope with one integer index per dimension, and its
    /// `count` elements from there lie inside the buffer when everything is constant
    /// (`None`: the indices are coordinates, not checked against the buffer).
    /// Returns the buffer when the operand is well-formed.
    fn elem_ref(&mut self, r: &ElemRef, count: Option<i64>, what: &str) -> Option<&'f BufferDecl> {
        let at = self.at(r.buffer.span);
        let decl = self.resolve_buffer(&r.buffer.name, at);
        let mut ok = true;
        for index in &r.indices {
            ok &= self.expect_int(index, "buffer index").is_some();
        }
        let decl = decl?;
        let before = self.diags.len();
        if self.check_indices(decl, &r.indices, at) && count.is_some() {
            self.check_constant_indices(decl, &r.indices, at);
        }
        if !ok || self.diags.len() > before {
            return None;
        }
        let Some(count) = count else {
            return Some(decl);
        };
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
                Layout::Swizzled
                | Layout::Swizzle { .. }
                | Layout::Padded { .. }
                | Layout::WgmmaSwizzle { .. } => {
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
                    } else if let (
                        Layout::Swizzle { bytes } | Layout::WgmmaSwizzle { bytes },
                        Some(cols),
                    ) = (ann.layout, decl.shape.last().and_then(const_int))
                    {
                        // A swizzle moves 16-byte chunks within a group of `bytes`: a row
                        // narrower than that (or not a whole number of groups) would send
                        // chunks past its end, into the next row.
                        let row = cols.saturating_mul(i64::from(decl.dtype.bytes()));
                        if SWIZZLE_BYTES.contains(&bytes) && (row <= 0 || row % bytes != 0) {
                            self.error(
                                at,
                                format!(
                                    "the {bytes}-byte swizzle of `{name}` needs rows of a \
                                     multiple of {bytes} bytes; its rows are {row} bytes"
                                ),
                            );
                        }
                    }
                }
                Layout::MmaAccumulator { .. } | Layout::WgmmaAccumulator { .. } => {
                    // A fragment, or the local array `lower-tile-ops` made of one.
                    if !matches!(decl.scope, Scope::Fragment | Scope::Local) {
                        let what = if matches!(ann.layout, Layout::MmaAccumulator { .. }) {
                            "T.mma_accumulator_layout"
                        } else {
                            "T.wgmma_accumulator_layout"
                        };
                        self.error(
                            at,
                            format!(
                                "`{what}` on `{name}`, a {} buffer; it lays out fragments",
                                decl.scope.name()
                            ),
                        );
                    }
                }
                Layout::Rows(_) => {
                    // A 1-D fragment, or the local array `lower-tile-ops` made of one.
                    if decl.scope != Scope::Fragment && decl.scope != Scope::Local
                        || (decl.scope == Scope::Fragment && decl.shape.len() != 1)
                    {
                        self.error(
                            at,
                            format!(
                                "a rows layout on `{name}`, a {}-D {} buffer; it lays out \
                                 1-D fragments",
                                decl.shape.len(),
                                decl.scope.name()
                            ),
                        );
                    }
                }
            }
        }
        match ann.layout {
            Layout::Swizzle { bytes } | Layout::WgmmaSwizzle { bytes }
                if !SWIZZLE_BYTES.contains(&bytes) =>
            {
                self.error(
                    at,
                    format!("the swizzle of `{name}` is 32, 64 or 128 bytes wide, found {bytes}"),
                )
            }
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
            Layout::Rows(RowsOf::Flat { cols }) if cols <= 0 => self.error(
                at,
                format!("the row length of `{name}`'s rows layout must be positive, found {cols}"),
            ),
            Layout::Rows(RowsOf::Mma { warps_m, warps_n }) if warps_m <= 0 || warps_n <= 0 => self
                .error(
                    at,
                    format!(
                        "the warp grid of `{name}` must be positive, found warps_m={warps_m}, \
                         warps_n={warps_n}"
                    ),
                ),
            Layout::Rows(RowsOf::Wgmma {
                warpgroups_m,
                warpgroups_n,
            })
            | Layout::WgmmaAccumulator {
                warpgroups_m,
                warpgroups_n,
            } if warpgroups_m <= 0 || warpgroups_n <= 0 => self.error(
                at,
                format!(
                    "the warpgroup grid of `{name}` must be positive, found \
                     warpgroups_m={warpgroups_m}, warpgroups_n={warpgroups_n}"
                ),
            ),
            _ => {}
        }
    }
}

/// The row-major flat index of a constant reference and the buffer's element count, when
/// both are constant (and the shape valid: a dimension ≤ 0 is reported once, at the
/// allocation).
fn flat_start(decl: &BufferDecl, indices: &[Expr]) -> Option<(i64, i64)> {
    let mut flat: i64 = 0;
    let mut numel: i64 = 1;
    for (index, dim) in indices.iter().zip(&decl.shape) {
        let d = const_int(dim).filter(|&d| d > 0)?;
        flat = flat.checked_mul(d)?.checked_add(const_int(index)?)?;
        numel = numel.checked_mul(d)?;
    }
    Some((flat, numel))
}

/// The targets that have what `needs` names: `sm_90a`.
fn supporting_targets(needs: Needs) -> String {
    let names: Vec<&str> = Target::ALL
        .iter()
        .filter(|t| needs.met_by(**t))
        .map(|t| t.name())
        .collect();
    names.join(", ")
}

fn show_ref(r: &ElemRef) -> String {
    let idx: Vec<String> = r.indices.iter().map(ToString::to_string).collect();
    format!("{}[{}]", r.buffer.name, idx.join(", "))
}
