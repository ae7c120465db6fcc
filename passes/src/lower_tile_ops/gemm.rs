//! `T.gemm(A, B, C)` → one region of `ldmatrix.x4` + `mma.sync.m16n8k16` over the warp
//! partition of C's accumulator layout (`mma_layout.rs`), or — when C has the wgmma
//! accumulator layout (sm_90a, `analysis/wgmma.rs`) — of `wgmma`s straight from shared
//! memory (`emit_wgmma`).
//!
//! A and B come from shared memory (the innermost two dimensions of their regions are the
//! matrix; leading dimensions, such as a pipeline stage, have extent 1) — or A from
//! registers: a fragment laid out as an accumulator over the same `W x 1` warps
//! (`analysis::mma`) is the mma's A fragment as it is, no load. For each step of
//! 16 along K, each warp loads its `MT` A tiles (16 x 16, one `ldmatrix.x4` each; `.trans`
//! when A is stored K x M) and its `NT` B tiles (16 x 8, two per `ldmatrix.x4`, an odd last
//! one by an `ldmatrix.x2`; `.trans` when B is stored K x N, the usual case) into two
//! register arrays, then issues
//! `MT * NT` mma's. `clear_accum=True` zeroes C first. A float16 C takes the same
//! instructions (`T.mma_sync` with a float16 accumulator: the same 4 slots per tile) and
//! float16 operands only; it never takes wgmma (`analysis/wgmma.rs`). float8 operands run
//! on wgmma only (k = 32): on the mma.sync path they are refused (`fp8_refusal`). int8
//! operands with an int32 C take `mma.sync.m16n8k32.s32.s8.s8` where wgmma does not run
//! them: the same tiles in bytes (an ldmatrix row is 16 int8, k-steps of 32), A stored M x K
//! and B stored N x K only (ldmatrix's `.trans` moves 16-bit units, not bytes). A
//! `packed_int4=True` gemm (int8 bytes of two int4, `pack-int4`) is the same code with
//! `mma.sync.m16n8k64.s32.s4.s4`, whose fragments are those bytes (never wgmma: no `.s4`).
//!
//! Address of lane `l` (`mi = l / 8` the matrix it addresses, `r = l % 8` the row):
//! - A (M x K): row `l % 16`, column `8 * (l / 16)` of the 16 x 16 tile;
//!   A stored K x M: row (k) `8 * (mi / 2) + r`, column (m) `8 * (mi % 2)`.
//! - B stored K x N: row (k) `l % 16`, column (n) `8 * (l / 16)` of two n-tiles;
//!   B stored N x K: row (n) `8 * (mi / 2) + r`, column (k) `8 * (mi % 2)`.

use super::mma_layout::MmaLayout;
use super::region::thread_region;
use super::Ctx;
use crate::analysis::wgmma::{self as wgmma_plan, k_step, Panels, M_STEP, WARPGROUP};
use crate::names::NameSet;
use tlc_ir::build::{bin, elem, for_loop, intrinsic};
use tlc_ir::verifier::const_int;
use tlc_ir::wgmma::{self, Major, SmemOperand};
use tlc_ir::{
    BinOp, BufferDecl, DType, Diagnostic, Expr, ForKind, Gemm, Ident, Intrinsic, Layout, Region,
    Scope, Span, Stmt, StmtKind,
};

/// One shared operand: its buffer, the fixed leading indices, and the corner of the matrix.
struct Operand<'a> {
    buf: &'a BufferDecl,
    lead: Vec<Expr>,
    row0: Expr,
    col0: Expr,
    /// Extents of the matrix (rows, columns) as stored.
    rows: i64,
    cols: i64,
}

fn operand<'a>(
    r: &Region,
    what: &str,
    wgmma: bool,
    span: Span,
    ctx: &'a Ctx,
) -> Result<Operand<'a>, Diagnostic> {
    let buf = ctx
        .buffer(&r.buffer.name)
        .ok_or_else(|| Diagnostic::error(r.span, format!("unknown buffer `{}`", r.buffer.name)))?;
    // A fragment A that layout-inference laid out for register A (`analysis::wgmma`,
    // `analysis::mma`).
    let register_a = what == "A"
        && if wgmma {
            register_a_layout(buf, ctx).is_some()
        } else {
            mma_register_a_layout(buf, ctx).is_some()
        };
    if buf.scope != Scope::Shared && !register_a {
        return Err(Diagnostic::error(
            r.span,
            format!(
                "T.gemm operand {what} (`{}`) is in {} memory; only shared-memory operands are lowered so far",
                buf.name.name,
                buf.scope.name()
            ),
        )
        .with_note("copy it to a T.alloc_shared buffer first"));
    }
    let path_takes = if wgmma {
        wgmma::instruction_k(buf.dtype).is_some()
    } else {
        matches!(buf.dtype, DType::Float16 | DType::BFloat16 | DType::Int8)
    };
    if !path_takes {
        let (path, dtypes) = if wgmma {
            ("wgmma", "float16, bfloat16, float8 or int8")
        } else {
            ("mma.sync", "float16, bfloat16 or int8")
        };
        return Err(Diagnostic::error(
            r.span,
            format!(
                "T.gemm operand {what} is {}; the {path} path takes {dtypes}",
                buf.dtype
            ),
        ));
    }
    let n = r.ranges.len();
    if n < 2 {
        return Err(Diagnostic::error(
            r.span,
            format!("T.gemm operand {what} must be a matrix"),
        ));
    }
    let mut lead = Vec::new();
    for range in &r.ranges[..n - 2] {
        if const_int(&range.extent) != Some(1) {
            return Err(Diagnostic::error(
                r.span,
                format!("T.gemm operand {what}: dimensions before the last two must have extent 1"),
            ));
        }
        lead.push(range.start.clone());
    }
    let (Some(rows), Some(cols)) = (
        const_int(&r.ranges[n - 2].extent),
        const_int(&r.ranges[n - 1].extent),
    ) else {
        return Err(Diagnostic::error(
            span,
            format!("T.gemm operand {what} needs a constant tile shape"),
        ));
    };
    Ok(Operand {
        buf,
        lead,
        row0: r.ranges[n - 2].start.clone(),
        col0: r.ranges[n - 1].start.clone(),
        rows,
        cols,
    })
}

/// A gemm on float8 operands that reached the mma.sync path: sm_80's mma.sync has no fp8
/// form, so it is refused; nor does an int8 one with an operand stored M- or N-major
/// (layout-inference already refuses the ones wgmma cannot take; this is the guard of the
/// lowering itself).
fn fp8_refusal(g: &Gemm, span: Span, ctx: &Ctx) -> Option<Diagnostic> {
    let fp8 = wgmma_plan::fp8_operand(g, &|name| ctx.buffer(name).cloned())?;
    if fp8 == DType::Int8 && wgmma_plan::int8_mma_sync(g) {
        return None;
    }
    Some(wgmma_plan::fp8_refusal(
        span,
        fp8,
        (g.trans_a, g.trans_b),
        "its accumulator has no wgmma layout",
    ))
}

/// The k of one mma.sync of `dtype` operands: a 16 x k A tile is 4 8 x 16-byte matrices
/// (k = 16 of 16-bit elements, 32 of int8).
fn mma_k_step(dtype: DType) -> i64 {
    32 / i64::from(dtype.bytes().clamp(1, 2))
}

fn add(terms: Vec<Expr>) -> Expr {
    terms
        .into_iter()
        .reduce(|a, b| bin(BinOp::Add, a, b))
        .unwrap_or_else(|| Expr::int(0))
}

fn mul(a: Expr, k: i64) -> Expr {
    bin(BinOp::Mul, a, Expr::int(k))
}

fn div(a: Expr, k: i64) -> Expr {
    bin(BinOp::FloorDiv, a, Expr::int(k))
}

fn rem(a: Expr, k: i64) -> Expr {
    bin(BinOp::FloorMod, a, Expr::int(k))
}

pub(crate) fn lower(
    g: &Gemm,
    span: Span,
    ctx: &Ctx,
    names: &mut NameSet,
) -> Result<Stmt, Vec<Diagnostic>> {
    let cbuf = ctx
        .buffer(&g.c.buffer.name)
        .ok_or_else(|| vec![Diagnostic::error(g.c.span, "unknown accumulator buffer")])?;
    let wgmma_layout = ctx.fragments.mma(&cbuf.name.name).is_some_and(|l| l.wgmma);
    if !wgmma_layout {
        if let Some(e) = fp8_refusal(g, span, ctx) {
            return Err(vec![e]);
        }
    }
    let a = operand(&g.a, "A", wgmma_layout, span, ctx).map_err(|e| vec![e])?;
    let b = operand(&g.b, "B", wgmma_layout, span, ctx).map_err(|e| vec![e])?;
    let Some(layout) = ctx.fragments.mma(&cbuf.name.name) else {
        return Err(vec![Diagnostic::error(
            g.c.span,
            format!(
                "the accumulator `{}` has no mma layout: T.gemm accumulates into a float32 or float16 fragment",
                cbuf.name.name
            ),
        )]);
    };
    match (cbuf.dtype, a.buf.dtype) {
        (DType::Float32, _) | (DType::Float16, DType::Float16) => {}
        // int8: wgmma's `.s32.s8.s8`, or mma.sync's `m16n8k32` for K-major operands
        // (`fp8_refusal` stops the others).
        (DType::Int32, DType::Int8) => {}
        (DType::Float16, other) => {
            return Err(vec![Diagnostic::error(
                g.a.span,
                format!(
                    "the float16 accumulator `{}` takes float16 operands (mma.sync's \
                     .f16.f16.f16.f16 form); `{}` is {other}",
                    cbuf.name.name, a.buf.name.name
                ),
            )
            .with_note("accumulate in a float32 fragment")]);
        }
        (other, _) => {
            return Err(vec![Diagnostic::error(
                g.c.span,
                format!(
                    "the accumulator `{}` must be float32 or float16, not {other}",
                    cbuf.name.name
                ),
            )]);
        }
    }
    // A and B share one dtype (the verifier's gemm rule), or are e4m3 x e5m2, which only
    // the wgmma path admits.
    let (am, ak) = if g.trans_a {
        (a.cols, a.rows)
    } else {
        (a.rows, a.cols)
    };
    let (bk, bn) = if g.trans_b {
        (b.cols, b.rows)
    } else {
        (b.rows, b.cols)
    };
    if am != layout.m || bn != layout.n || ak != bk {
        return Err(vec![Diagnostic::error(
            span,
            format!(
                "T.gemm shapes do not agree: A is {am} x {ak}, B is {bk} x {bn}, C is {} x {}",
                layout.m, layout.n
            ),
        )]);
    }
    let mma_k = mma_k_step(a.buf.dtype);
    if !layout.wgmma && ak % mma_k != 0 {
        // A packed int4 gemm counts its K in int4, two to each operand byte.
        let (k, step, what) = match g.packed_int4 {
            true => (2 * ak, 2 * mma_k, " int4"),
            false => (ak, mma_k, ""),
        };
        return Err(vec![Diagnostic::error(
            span,
            format!("T.gemm: K = {k}{what} is not a multiple of {step} (the mma.sync k-step)"),
        )]);
    }
    if layout.wgmma && ak % 16 != 0 {
        return Err(vec![Diagnostic::error(
            span,
            format!("T.gemm: K = {ak} is not a multiple of 16 (the wgmma k-step)"),
        )]);
    }
    if layout.wgmma {
        return emit_wgmma(g, &a, &b, &cbuf.name.name, &layout, ak, span, ctx, names)
            .map_err(|e| vec![e]);
    }
    let a_regs = match mma_register_a_layout(a.buf, ctx) {
        None => None,
        // Each warp reads the A rows of its own accumulator rows, all of K, from the slots
        // it holds (`analysis::mma`): the warps split M only, alike in A and C.
        // (16-bit A only: the slots below count 8 per k-step of 16.)
        Some(al)
            if !g.trans_a
                && mma_k_step(a.buf.dtype) == 16
                && (al.m, al.n) == (am, ak)
                && (al.warps_m, al.warps_n) == (layout.warps_m, 1)
                && layout.warps_n == 1
                && [&a.row0, &a.col0].iter().all(|e| const_int(e) == Some(0)) =>
        {
            Some(al)
        }
        Some(al) => {
            return Err(vec![Diagnostic::error(
                span,
                format!(
                    "T.gemm: A (`{}`) is in registers over {} x {} warps, but the accumulator's \
                     warps ({} x {}) do not read it from there: each warp needs whole rows of A \
                     for its own accumulator rows",
                    a.buf.name.name, al.warps_m, al.warps_n, layout.warps_m, layout.warps_n
                ),
            )
            .with_note(
                "layout-inference lays such an A out over the accumulator's warps",
            )])
        }
    };
    Ok(emit(
        g,
        (&a, a_regs),
        &b,
        &cbuf.name.name,
        &layout,
        ak,
        span,
        ctx,
        names,
    ))
}

#[allow(clippy::too_many_arguments)]
fn emit(
    g: &Gemm,
    (a, a_regs): (&Operand, Option<MmaLayout>),
    b: &Operand,
    c: &str,
    layout: &MmaLayout,
    k: i64,
    span: Span,
    ctx: &Ctx,
    names: &mut NameSet,
) -> Stmt {
    let (tiles_m, tiles_n) = (layout.tiles_m(), layout.tiles_n());
    // Per lane and tile: A 16 bytes, B 8 bytes (8 and 4 16-bit elements, 16 and 8 int8);
    // an ldmatrix row is 16 bytes (`row` elements) and one mma covers `k_step` of K.
    let k_step = mma_k_step(a.buf.dtype);
    let (a_per, b_per, row) = (k_step / 2, k_step / 4, k_step / 2);
    let a_frag = names.fresh(&format!("{}_frag", a.buf.name.name));
    let b_frag = names.fresh(&format!("{}_frag", b.buf.name.name));
    {
        let mut allocs = ctx.new_allocs.borrow_mut();
        let frags = [
            (&a_frag, a.buf.dtype, tiles_m * a_per),
            (&b_frag, b.buf.dtype, tiles_n * b_per),
        ];
        // A register A has no fragment of its own to load.
        for (name, dtype, len) in frags.into_iter().skip(usize::from(a_regs.is_some())) {
            allocs.push(BufferDecl {
                name: Ident::new(name.clone(), span),
                dtype,
                shape: vec![Expr::int(len)],
                scope: Scope::Local,
                span,
            });
        }
    }
    let tx = names.fresh(ctx.block.index_base());
    let kk = names.fresh("kk");
    let mt = names.fresh("mt");
    let np = names.fresh("np");
    let mt2 = names.fresh("mt");
    let nt = names.fresh("nt");
    let txe = Expr::var(&tx);
    let lane = rem(txe.clone(), ctx.target.warp_size());
    let (wm, wn) = layout.warp_coords(&txe);
    let m_base = add(vec![mul(wm, layout.warp_m()), mul(Expr::var(&mt), 16)]);
    let n_base = |pair: Expr| add(vec![mul(wn.clone(), layout.warp_n()), mul(pair, 16)]);
    let k_base = mul(Expr::var(&kk), k_step);
    // Offsets inside a 16 x 16-byte block: "row l % 16, column `row` * (l / 16)" or its
    // transpose (an int8 gemm is K-major, `fp8_refusal`: its K runs along the 16-byte rows).
    let straight = (rem(lane.clone(), 16), mul(div(lane.clone(), 16), row));
    let transposed = (
        add(vec![mul(div(lane.clone(), 16), 8), rem(lane.clone(), 8)]),
        mul(rem(div(lane, 8), 2), row),
    );
    let (a_row, a_col) = if g.trans_a {
        (
            add(vec![k_base.clone(), transposed.0.clone()]),
            add(vec![m_base.clone(), transposed.1.clone()]),
        )
    } else {
        (
            add(vec![m_base, straight.0.clone()]),
            add(vec![k_base.clone(), straight.1.clone()]),
        )
    };
    // The B address of n-tile pair `pair`.
    let b_at = |pair: Expr| {
        if g.trans_b {
            (
                add(vec![n_base(pair), transposed.0.clone()]),
                add(vec![k_base.clone(), transposed.1.clone()]),
            )
        } else {
            (
                add(vec![k_base.clone(), straight.0.clone()]),
                add(vec![n_base(pair), straight.1.clone()]),
            )
        }
    };
    let at = |op: &Operand, row: Expr, col: Expr| {
        let mut idx = op.lead.clone();
        idx.push(bin(BinOp::Add, op.row0.clone(), row));
        idx.push(bin(BinOp::Add, op.col0.clone(), col));
        elem(&op.buf.name.name, idx, span)
    };
    let load_a = intrinsic(
        Intrinsic::Ldmatrix {
            dst: elem(&a_frag, vec![mul(Expr::var(&mt), a_per)], span),
            src: at(a, a_row, a_col),
            num: 4,
            trans: g.trans_a,
        },
        span,
    );
    // Pair `np` of n-tiles in one `ldmatrix.x4`; an odd last n-tile (warp tiles of 16 x 8
    // multiples, `layout_inference::warp_partition`) in an `ldmatrix.x2` of its own: lanes
    // 0..15 address it alone, as the x4's first two matrices.
    let load_b = |pair: Expr, num: i64| {
        let (b_row, b_col) = b_at(pair.clone());
        intrinsic(
            Intrinsic::Ldmatrix {
                dst: elem(&b_frag, vec![mul(pair, 2 * b_per)], span),
                src: at(b, b_row, b_col),
                num,
                trans: !g.trans_b,
            },
            span,
        )
    };
    let mma = intrinsic(
        Intrinsic::Mma {
            acc: elem(
                c,
                vec![mul(
                    add(vec![mul(Expr::var(&mt2), tiles_n), Expr::var(&nt)]),
                    4,
                )],
                span,
            ),
            a: match a_regs {
                // k-step `kk` of row tile `mt`: A's slots `4 (mt NT + 2 kk) .. + 8`.
                Some(al) => elem(
                    &a.buf.name.name,
                    vec![add(vec![
                        mul(Expr::var(&mt2), 4 * al.tiles_n()),
                        mul(Expr::var(&kk), 8),
                    ])],
                    span,
                ),
                None => elem(&a_frag, vec![mul(Expr::var(&mt2), a_per)], span),
            },
            b: elem(&b_frag, vec![mul(Expr::var(&nt), b_per)], span),
            packed_int4: g.packed_int4,
        },
        span,
    );
    let mut step = Vec::new();
    if a_regs.is_none() {
        step.push(for_loop(
            &mt,
            Expr::int(tiles_m),
            ForKind::Unroll,
            vec![load_a],
            span,
        ));
    }
    if tiles_n >= 2 {
        step.push(for_loop(
            &np,
            Expr::int(tiles_n / 2),
            ForKind::Unroll,
            vec![load_b(Expr::var(&np), 4)],
            span,
        ));
    }
    if tiles_n % 2 == 1 {
        step.push(load_b(Expr::int(tiles_n / 2), 2));
    }
    step.push(for_loop(
        &mt2,
        Expr::int(tiles_m),
        ForKind::Unroll,
        vec![for_loop(
            &nt,
            Expr::int(tiles_n),
            ForKind::Unroll,
            vec![mma],
            span,
        )],
        span,
    ));
    let mut body = Vec::new();
    if g.clear_accum {
        body.push(clear(c, ctx, layout, span, names));
    }
    body.push(for_loop(
        &kk,
        Expr::int(k / k_step),
        ForKind::Unroll,
        step,
        span,
    ));
    thread_region(&ctx.block, &tx, body, span, names)
}

/// `clear_accum=True`: every accumulator slot of the thread set to zero (of its dtype).
fn clear(c: &str, ctx: &Ctx, layout: &MmaLayout, span: Span, names: &mut NameSet) -> Stmt {
    let dtype = ctx.buffer(c).map_or(DType::Float32, |b| b.dtype);
    let s = names.fresh("s");
    for_loop(
        &s,
        Expr::int(layout.slots()),
        ForKind::Unroll,
        vec![Stmt::new(
            StmtKind::Store {
                buffer: Ident::new(c, span),
                indices: vec![Expr::var(&s)],
                value: Expr::new(tlc_ir::ExprKind::Cast(dtype, Box::new(Expr::int(0))), span),
            },
            span,
        )],
        span,
    )
}

/// The layout of a fragment A that wgmma reads from registers: the wgmma accumulator layout
/// over warpgroups that split M only (what `analysis::wgmma::plan` gives such an A).
fn register_a_layout(buf: &BufferDecl, ctx: &Ctx) -> Option<MmaLayout> {
    if buf.scope != Scope::Fragment {
        return None;
    }
    let l = ctx.fragments.mma(&buf.name.name)?;
    (l.wgmma && l.warps_n == 1).then_some(l)
}

/// The layout of a fragment A that mma.sync reads from registers: an mma accumulator layout
/// over warps that split M only (what `layout-inference` gives it, `analysis::mma`).
fn mma_register_a_layout(buf: &BufferDecl, ctx: &Ctx) -> Option<MmaLayout> {
    if buf.scope != Scope::Fragment {
        return None;
    }
    let l = ctx.fragments.mma(&buf.name.name)?;
    (!l.wgmma && l.warps_n == 1).then_some(l)
}

/// The descriptor layout of a wgmma operand from its buffer's layout annotation.
fn wgmma_operand(
    op: &Operand,
    k_major: bool,
    ctx: &Ctx,
    span: Span,
) -> Result<SmemOperand, Diagnostic> {
    let name = &op.buf.name.name;
    let operand = ctx
        .layout(name)
        .and_then(|l| match l {
            Layout::WgmmaSwizzle { bytes } => Panels::of(op.buf, bytes),
            _ => None,
        })
        .and_then(|p| p.operand(k_major));
    match operand {
        Some(d) => Ok(d),
        None => Err(Diagnostic::error(
            span,
            format!("the wgmma operand `{name}` is not laid out `T.make_wgmma_swizzled_layout`"),
        )
        .with_note("layout-inference chooses it with the accumulator's wgmma layout")),
    }
}

/// `T.gemm` on wgmma (sm_90a; the accumulator has the wgmma layout, `mma_layout.rs`): per
/// k-step (`k_step`: 16, or 32 for fp8) and per 64-row block of the warpgroup's tile, one
/// `wgmma.m64nNkK` whose descriptors start at the atom of that block (row `64 mt`, column
/// `K kk` of A; columns `gn N_w`, row `K kk` of B — always on an 8-row boundary, so the
/// swizzle leaves the start where it is; a K-step is 32 bytes, inside every swizzle span).
/// `clear_accum=True` makes the first k-step's wgmmas overwrite their accumulators. A `wgmma_fence` first (the accumulators may have
/// been written by ordinary code), a commit, and a wait for all groups at the end: the
/// accumulators are ordinary registers again after the op.
#[allow(clippy::too_many_arguments)]
fn emit_wgmma(
    g: &Gemm,
    a: &Operand,
    b: &Operand,
    c: &str,
    layout: &MmaLayout,
    k: i64,
    span: Span,
    ctx: &Ctx,
    names: &mut NameSet,
) -> Result<Stmt, Diagnostic> {
    let a_regs = match register_a_layout(a.buf, ctx) {
        // Each warpgroup reads the A rows of its own accumulator rows, all of K: the
        // accumulator's warpgroups split M only, as A's do.
        Some(al)
            if !g.trans_a
                && al.m == layout.m
                && al.warps_m == layout.warps_m
                && layout.warps_n == 1 =>
        {
            Some(al)
        }
        Some(_) => {
            return Err(Diagnostic::error(
                span,
                format!(
                    "T.gemm: A (`{}`) is in registers, but not laid out over the accumulator's warpgroups",
                    a.buf.name.name
                ),
            )
            .with_note("layout-inference lays such an A out with the accumulator's wgmma layout"))
        }
        None => None,
    };
    let da = match a_regs {
        Some(_) => None,
        None => Some(wgmma_operand(a, !g.trans_a, ctx, span)?),
    };
    let db = wgmma_operand(b, g.trans_b, ctx, span)?;
    let blocks = layout.tiles_m();
    let n_w = layout.warp_n();
    let tx = names.fresh(ctx.block.index_base());
    let kk = names.fresh("kk");
    let mt = names.fresh("mt");
    let txe = Expr::var(&tx);
    let group = div(txe, WARPGROUP);
    let gm = layout.warps_m / 4;
    let m0 = add(vec![
        mul(rem(group.clone(), gm), layout.m / gm),
        mul(Expr::var(&mt), M_STEP),
    ]);
    let n0 = mul(div(group, gm), n_w);
    let Some(k_step) = k_step(a.buf.dtype) else {
        return Err(Diagnostic::error(
            span,
            format!(
                "T.gemm on wgmma: {} operands have no wgmma form",
                a.buf.dtype
            ),
        ));
    };
    if k % k_step != 0 {
        return Err(Diagnostic::error(
            span,
            format!(
                "T.gemm: K = {k} is not a multiple of {k_step} (the wgmma k-step of {})",
                a.buf.dtype
            ),
        ));
    }
    let k0 = mul(Expr::var(&kk), k_step);
    let at = |op: &Operand, row: Expr, col: Expr| {
        let mut idx = op.lead.clone();
        idx.push(bin(BinOp::Add, op.row0.clone(), row));
        idx.push(bin(BinOp::Add, op.col0.clone(), col));
        elem(&op.buf.name.name, idx, span)
    };
    let a_ref = if g.trans_a {
        at(a, k0.clone(), m0)
    } else {
        at(a, m0, k0.clone())
    };
    let b_ref = if g.trans_b {
        at(b, n0, k0)
    } else {
        at(b, k0, n0)
    };
    // `clear_accum=True`: the first k-step overwrites (scale-d false) instead of zeroing
    // registers first — ordinary writes to a wgmma accumulator inside a pipelined loop make
    // ptxas serialize the wgmmas (its warning C7515).
    let accumulate = g
        .clear_accum
        .then(|| bin(BinOp::Ne, Expr::var(&kk), Expr::int(0)));
    let acc = elem(c, vec![mul(Expr::var(&mt), n_w / 2)], span);
    let mma = match (a_regs, da) {
        // Register A: the 8 elements of k-step `kk` of block `mt` are the A fragment's
        // accumulator registers `8 kk .. 8 kk + 8` of that block (`T.wgmma_rs`).
        (Some(al), _) => Intrinsic::WgmmaRs {
            acc,
            a: elem(
                &a.buf.name.name,
                vec![add(vec![
                    mul(Expr::var(&mt), al.warp_n() / 2),
                    mul(Expr::var(&kk), 8),
                ])],
                span,
            ),
            b: b_ref,
            n: n_w,
            trans_b: db.major == Major::MN,
            b_swizzle: db.swizzle.bytes(),
            b_lbo: db.lbo,
            b_sbo: db.sbo,
            accumulate,
        },
        (None, Some(da)) => Intrinsic::Wgmma {
            acc,
            a: a_ref,
            b: b_ref,
            n: n_w,
            trans_a: da.major == Major::MN,
            trans_b: db.major == Major::MN,
            a_swizzle: da.swizzle.bytes(),
            a_lbo: da.lbo,
            a_sbo: da.sbo,
            b_swizzle: db.swizzle.bytes(),
            b_lbo: db.lbo,
            b_sbo: db.sbo,
            accumulate,
        },
        (None, None) => {
            return Err(Diagnostic::error(
                span,
                "T.gemm: A has no wgmma operand layout",
            ))
        }
    };
    let mma = intrinsic(mma, span);
    let mut body = vec![intrinsic(Intrinsic::WgmmaFence, span)];
    body.push(for_loop(
        &kk,
        Expr::int(k / k_step),
        ForKind::Unroll,
        vec![for_loop(
            &mt,
            Expr::int(blocks),
            ForKind::Unroll,
            vec![mma],
            span,
        )],
        span,
    ));
    body.push(intrinsic(Intrinsic::WgmmaCommit, span));
    body.push(intrinsic(Intrinsic::WgmmaWait { n: 0 }, span));
    Ok(thread_region(&ctx.block, &tx, body, span, names))
}
