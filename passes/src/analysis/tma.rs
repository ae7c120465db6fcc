//! When a global → shared tile copy can run on TMA (`cp.async.bulk.tensor`, sm_90a), and the
//! boxes it becomes: ONE place for the facts `lower-tile-ops` decides by (and names in its
//! fallback notes).
//!
//! A copy takes TMA when the target has bulk tensor copies; the source is a global tensor of
//! rank ≤ 5 whose row strides are provably multiples of 16 bytes (TMA's rule; a stride over
//! a symbolic dim is not provable unless the dim is) and whose dims provably stay within
//! `MAX_TMA_DIM` (box coordinates are 32-bit); the destination is a shared buffer
//! laid out `T.make_wgmma_swizzled_layout(X, bytes=B)` (the swizzle TMA writes and wgmma
//! reads), written whole in its last two dimensions (one slice of its leading ones: a
//! pipeline stage); both have one dtype (a TMA does not convert) and the source region's
//! non-unit extents are the tile's `rows × cols`, in order. It becomes one box of
//! `rows × B / sizeof` per column panel of the layout (a box's inner extent is at most the
//! swizzle span), each written at its panel's start; rows ≤ 256. Out-of-bounds elements
//! read as zero, as `T.copy` defines them — also where a box is larger than the whole
//! tensor (a tile over a small constant-shaped tensor, `-D M=50` under 128-row tiles): the
//! driver bounds a box dim by 256, not by the tensor's dim.
//!
//! A destination without a layout may take one unswizzled box instead (`plain`, allowed by
//! the caller only in a loop that also loads wgmma operands: per-stage scales): the
//! destination's last dimension (or last two, written whole) in one box whose inner extent
//! is a multiple of 16 bytes and at most 256 elements, each stage a multiple of the 128
//! bytes an unswizzled destination is aligned to.
//!
//! The hand-written copy `for i, j in T.Parallel(R, C): S[s, i, j] = G[a + i, b + j]` is
//! the same copy ([`parallel_copy`]).

use crate::analysis::int::{interval, mentions, multiple_of, unit_offset, Env};
use crate::analysis::wgmma::Panels;
use tlc_ir::affine::constant_difference;
use tlc_ir::intrinsic::{MAX_BOX_DIM, MAX_TMA_DIM};
use tlc_ir::target::AsyncCopy;
use tlc_ir::verifier::const_int;
use tlc_ir::visit::take_notes;
use tlc_ir::wgmma::Swizzle;
use tlc_ir::{
    BinOp, BufferDecl, DType, Expr, ExprKind, For, ForKind, Ident, Layout, Range, Region, Scope,
    Stmt, StmtKind, Target,
};

/// TMA's rule for the row strides of a global tensor (and its base address).
pub const STRIDE_ALIGN: i64 = 16;
/// The most dimensions a tensor map describes.
pub const MAX_RANK: usize = 5;
/// The most stages a pipeline the Hopper schedule passes take apart may have: their checks
/// (`fills_in_order`, the waits' parities) evaluate two periods of the loop, and
/// `T.Pipelined` asks for a handful.
pub const MAX_STAGES: i64 = 32;

/// One `T.tma_load` of a copy.
#[derive(Clone, Debug, PartialEq)]
pub struct BoxLoad {
    /// The destination element where the box starts (logical indices; the layout maps it).
    pub dst: Vec<Expr>,
    /// The box's origin in the source tensor.
    pub origin: Vec<Expr>,
    /// One extent per source dimension, outermost first.
    pub box_dims: Vec<i64>,
    /// The swizzle span in bytes.
    pub swizzle: i64,
}

/// A copy on TMA: its loads and the bytes they complete on their mbarrier (zeros included).
#[derive(Clone, Debug, PartialEq)]
pub struct TmaCopy {
    pub loads: Vec<BoxLoad>,
    pub bytes: i64,
}

/// The TMA plan of `T.copy(src, dst)` (buffers `sb`, `db`; `layout` is `db`'s), or why it
/// stays on the thread copy path. `plain`: a destination without a layout may take an
/// unswizzled box (see [`Tile::plain`]); the caller allows it only next to swizzled copies.
pub fn plan_copy(
    src: &Region,
    dst: &Region,
    (sb, db): (&BufferDecl, &BufferDecl),
    layout: Option<Layout>,
    plain: bool,
    target: Target,
    env: &dyn Env,
) -> Result<TmaCopy, String> {
    if !target.has_async_copy(AsyncCopy::BulkTensor) {
        return Err(format!("{} has no TMA", target.name()));
    }
    if sb.scope != Scope::Global || db.scope != Scope::Shared {
        return Err("not a global → shared copy".into());
    }
    if sb.dtype != db.dtype || sb.dtype == DType::Bool {
        return Err(format!(
            "it converts {} to {} (TMA moves bytes)",
            sb.dtype.name(),
            db.dtype.name()
        ));
    }
    let tile = match layout {
        Some(Layout::WgmmaSwizzle { bytes }) => Tile::swizzled(dst, db, bytes)?,
        None if plain => Tile::plain(dst, db)?,
        _ => {
            return Err(format!(
                "`{}` has no TMA layout (`T.make_wgmma_swizzled_layout`)",
                db.name.name
            ))
        }
    };
    let rank = src.ranges.len();
    if rank > MAX_RANK || rank != sb.shape.len() {
        return Err(format!(
            "`{}` has {} dimensions (a tensor map takes at most {MAX_RANK})",
            sb.name.name,
            sb.shape.len()
        ));
    }
    let extents: Option<Vec<i64>> = src.ranges.iter().map(|r| const_int(&r.extent)).collect();
    let Some(extents) = extents else {
        return Err("the source region's extents are not constants".into());
    };
    let kept: Vec<usize> = (0..rank).filter(|&d| extents[d] != 1).collect();
    let (row_dim, col_dim) = match kept.as_slice() {
        [r, c] if extents[*r] == tile.rows && extents[*c] == tile.cols => (*r, *c),
        [c] if tile.rows == 1 && extents[*c] == tile.cols => (*c, *c),
        _ => {
            return Err(format!(
                "the source region is not a {} x {} tile",
                tile.rows, tile.cols
            ))
        }
    };
    if tile.rows > MAX_BOX_DIM {
        return Err(format!(
            "{} rows exceed a TMA box ({MAX_BOX_DIM})",
            tile.rows
        ));
    }
    if let Some(d) = unaligned_stride(sb, env) {
        return Err(format!(
            "the stride of dimension {d} of `{}` is not provably a multiple of {STRIDE_ALIGN} bytes",
            sb.name.name
        ));
    }
    if let Some(d) = (0..rank).find(|&d| interval(&sb.shape[d], env).hi > MAX_TMA_DIM) {
        return Err(format!(
            "dimension {d} of `{}` may exceed {MAX_TMA_DIM} elements (TMA's box coordinates are 32-bit)",
            sb.name.name
        ));
    }
    let n = dst.ranges.len();
    let loads = (0..tile.cols / tile.width)
        .map(|p| {
            let mut dst_at: Vec<Expr> = dst.ranges.iter().map(|r| r.start.clone()).collect();
            dst_at[n - 1] = Expr::int(p * tile.width);
            let mut origin: Vec<Expr> = src.ranges.iter().map(|r| r.start.clone()).collect();
            origin[col_dim] = add(origin[col_dim].clone(), p * tile.width);
            let box_dims = (0..rank)
                .map(|d| match d {
                    _ if d == col_dim => tile.width,
                    _ if d == row_dim => tile.rows,
                    _ => 1,
                })
                .collect();
            BoxLoad {
                dst: dst_at,
                origin,
                box_dims,
                swizzle: tile.swizzle,
            }
        })
        .collect();
    Ok(TmaCopy {
        loads,
        bytes: tile.rows * tile.cols * tile.elem_bytes,
    })
}

/// The shared tile one copy fills, and how boxes cover it.
struct Tile {
    rows: i64,
    cols: i64,
    /// Columns per box.
    width: i64,
    /// The swizzle span in bytes (0: none).
    swizzle: i64,
    elem_bytes: i64,
}

impl Tile {
    /// A wgmma operand laid out `T.make_wgmma_swizzled_layout(X, bytes)`: one box of
    /// `rows × bytes / sizeof` per column panel, written whole in its last two dimensions
    /// (one slice of the leading ones: a stage).
    fn swizzled(dst: &Region, db: &BufferDecl, bytes: i64) -> Result<Tile, String> {
        let panels = Panels::of(db, bytes)
            .ok_or_else(|| format!("`{}` does not fit its swizzled layout", db.name.name))?;
        let n = dst.ranges.len();
        if n < 2 || n != db.shape.len() {
            return Err("the destination is not a region of the whole buffer rank".into());
        }
        let leading_unit = dst.ranges[..n - 2]
            .iter()
            .all(|r| const_int(&r.extent) == Some(1));
        let whole_tile = dst.ranges[n - 2..]
            .iter()
            .zip([panels.rows, panels.cols])
            .all(|(r, full)| const_int(&r.start) == Some(0) && const_int(&r.extent) == Some(full));
        if !leading_unit || !whole_tile {
            return Err(format!(
                "the copy does not write whole {} x {} tiles of `{}`",
                panels.rows, panels.cols, db.name.name
            ));
        }
        Ok(Tile {
            rows: panels.rows,
            cols: panels.cols,
            width: panels.width(),
            swizzle: bytes,
            elem_bytes: panels.elem_bytes,
        })
    }

    /// A row-major buffer without a layout (per-stage scales next to the operands): one
    /// unswizzled box of its last dimension, or of its last two when the copy writes both
    /// whole; every leading dimension a unit slice. TMA's rules for such a box: its inner
    /// extent a multiple of 16 bytes and at most `MAX_BOX_DIM` elements, and each tile
    /// (a stage) a multiple of 128 bytes, the alignment an unswizzled destination needs.
    fn plain(dst: &Region, db: &BufferDecl) -> Result<Tile, String> {
        let n = dst.ranges.len();
        let shape: Option<Vec<i64>> = db.shape.iter().map(const_int).collect();
        let (Some(shape), true) = (shape, n >= 1 && n == db.shape.len()) else {
            return Err("the destination is not a region of the whole buffer rank".into());
        };
        let whole = |d: usize| {
            const_int(&dst.ranges[d].start) == Some(0)
                && const_int(&dst.ranges[d].extent) == Some(shape[d])
        };
        let unit = |d: usize| const_int(&dst.ranges[d].extent) == Some(1);
        let rows_whole = n >= 2 && whole(n - 2) && shape[n - 2] > 1;
        let lead = if rows_whole { n - 2 } else { n - 1 };
        if !whole(n - 1) || !(0..lead).all(unit) {
            return Err(format!(
                "the copy does not write whole rows of `{}`",
                db.name.name
            ));
        }
        let rows = if rows_whole { shape[n - 2] } else { 1 };
        let cols = shape[n - 1];
        let elem_bytes = i64::from(db.dtype.bytes());
        let row_bytes = cols * elem_bytes;
        if row_bytes % STRIDE_ALIGN != 0 || cols > MAX_BOX_DIM {
            return Err(format!(
                "a row of `{}` is {cols} elements ({row_bytes} bytes): an unswizzled TMA box \
                 takes a multiple of {STRIDE_ALIGN} bytes, at most {MAX_BOX_DIM} elements",
                db.name.name
            ));
        }
        let align = Swizzle::None.tma_alignment();
        if (rows * row_bytes) % align != 0 {
            return Err(format!(
                "a tile of `{}` is {} bytes, not a multiple of the {align} an unswizzled TMA \
                 destination is aligned to",
                db.name.name,
                rows * row_bytes
            ));
        }
        Ok(Tile {
            rows,
            cols,
            width: cols,
            swizzle: 0,
            elem_bytes,
        })
    }
}

/// The first dimension (outermost first) of `b` whose stride — the product of the later
/// extents times the element size — is not provably a multiple of 16 bytes.
fn unaligned_stride(b: &BufferDecl, env: &dyn Env) -> Option<usize> {
    let n = b.shape.len();
    let mut stride = Expr::int(i64::from(b.dtype.bytes()));
    for d in (0..n.saturating_sub(1)).rev() {
        stride = Expr::binary(BinOp::Mul, stride, b.shape[d + 1].clone(), b.span);
        if !multiple_of(&stride, STRIDE_ALIGN, env) {
            return Some(d);
        }
    }
    None
}

fn add(e: Expr, k: i64) -> Expr {
    tlc_ir::build::bin(BinOp::Add, e, Expr::int(k))
}

fn add_expr(a: Expr, b: Expr) -> Expr {
    tlc_ir::build::bin(BinOp::Add, a, b)
}

/// A nest of `T.Parallel` loops that is a plain tile copy — one store
/// `dst[.., i, j] = src[..]` of a load of the same dtype, the destination's last indices the
/// nest's variables in order (every loop from 0), each variable in exactly one source index
/// as `offset + var`, in the same order — as the regions of the equivalent `T.copy`. Notes
/// inside the nest do not count.
pub fn parallel_copy(
    outer: &For,
    buffers: &dyn Fn(&str) -> Option<DType>,
) -> Option<(Region, Region)> {
    // Notes say nothing about the copy (`T.note`).
    let mut quiet = outer.clone();
    let _ = take_notes(&mut quiet.body);
    let mut vars = Vec::new();
    let mut extents = Vec::new();
    // Walk the directly nested parallel loops.
    let mut f = &quiet;
    loop {
        if f.kind != ForKind::Parallel || const_int(&f.start) != Some(0) {
            return None;
        }
        vars.push(f.var.name.clone());
        extents.push(f.stop.clone());
        match f.body.as_slice() {
            [Stmt {
                kind: StmtKind::For(inner),
                ..
            }] if inner.kind == ForKind::Parallel => f = inner,
            _ => break,
        }
    }
    let [Stmt {
        kind:
            StmtKind::Store {
                buffer,
                indices,
                value,
            },
        span,
    }] = f.body.as_slice()
    else {
        return None;
    };
    let ExprKind::Load {
        buffer: src_name,
        indices: src_indices,
    } = &value.kind
    else {
        return None;
    };
    if buffers(&buffer.name)? != buffers(src_name)? {
        return None;
    }
    let k = vars.len();
    if indices.len() < k {
        return None;
    }
    let (lead, tail) = indices.split_at(indices.len() - k);
    let is_var = |e: &Expr, v: &str| matches!(&e.kind, ExprKind::Var(n) if n == v);
    if !tail.iter().zip(&vars).all(|(e, v)| is_var(e, v))
        || lead.iter().any(|e| vars.iter().any(|v| mentions(e, v)))
    {
        return None;
    }
    // Each source index: free of the variables, or `offset + var` for the next variable.
    let mut next = 0;
    let mut src_ranges = Vec::with_capacity(src_indices.len());
    for e in src_indices {
        let uses: Vec<usize> = (0..k).filter(|&i| mentions(e, &vars[i])).collect();
        match uses.as_slice() {
            [] => src_ranges.push(Range {
                start: e.clone(),
                extent: Expr::int(1),
            }),
            [i] if *i == next => {
                let start = unit_offset(e, &vars[*i])?;
                src_ranges.push(Range {
                    start,
                    extent: extents[*i].clone(),
                });
                next += 1;
            }
            _ => return None,
        }
    }
    if next != k {
        return None;
    }
    let mut dst_ranges: Vec<Range> = lead
        .iter()
        .map(|e| Range {
            start: e.clone(),
            extent: Expr::int(1),
        })
        .collect();
    dst_ranges.extend(extents.iter().map(|x| Range {
        start: Expr::int(0),
        extent: x.clone(),
    }));
    Some((
        Region {
            buffer: Ident::new(src_name, *span),
            ranges: src_ranges,
            span: *span,
        },
        Region {
            buffer: buffer.clone(),
            ranges: dst_ranges,
            span: *span,
        },
    ))
}

/// The buffers the TMA loads of `body` write.
pub fn tma_destinations(body: &[Stmt]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    tlc_ir::visit::for_each_stmt(body, &mut |s| {
        if let StmtKind::Intrinsic(tlc_ir::Intrinsic::TmaLoad { dst, .. }) = &s.kind {
            if !out.contains(&dst.buffer.name) {
                out.push(dst.buffer.name.clone());
            }
        }
    });
    out
}

/// Whether `stage` (over loop variable `var`) is `fill % stages` for every value the
/// pipeline gives `var`, `fill` being the fill number as an expression of `var` (the
/// prologue's `start + s`, the look-ahead's `ko + S - 1`). Proven for any loop start when
/// `stage` is `x % stages` with `x - fill` a constant multiple of `stages` (the form
/// `inject-software-pipeline` writes); otherwise, when the start is a constant, by
/// evaluation over `values` (the prologue's iterations; two periods of the loop's).
pub fn stage_of_fill(
    stage: &Expr,
    var: &str,
    fill: &Expr,
    values: Option<Values>,
    stages: i64,
) -> bool {
    if stages <= 0 {
        return false;
    }
    if let ExprKind::Binary(BinOp::FloorMod, x, m) = &stage.kind {
        let period = m.as_int() == Some(stages);
        if period && constant_difference(x, fill).is_some_and(|d| d.rem_euclid(stages) == 0) {
            return true;
        }
    }
    let Some(values) = values else {
        return false;
    };
    values.into_iter().all(|v| {
        let env: crate::analysis::int::Ranges =
            [(var.to_string(), tlc_ir::interval::Interval::point(v))]
                .into_iter()
                .collect();
        let at = |e: &Expr| crate::analysis::int::constant(e, &env);
        matches!((at(stage), at(fill)), (Some(s), Some(f)) if s == f.rem_euclid(stages))
    })
}

/// Values of a loop variable.
pub type Values = std::ops::Range<i64>;

/// The values over which [`stage_of_fill`] evaluates a pipeline's fills when its loop
/// starts at the constant `start`: the prologue's `s` in `0..S - 1`, the loop's `ko` over
/// two periods from the start. `None` for a start that is not a constant (or too large to
/// count from), which only the symbolic proof serves.
pub fn fill_values(start: &Expr, stages: i64) -> (Option<Values>, Option<Values>) {
    let start = const_int(start).filter(|v| v.unsigned_abs() <= 1 << 40);
    match start {
        Some(a) if (1..=1 << 20).contains(&stages) => {
            (Some(0..stages - 1), Some(a..a + 2 * stages))
        }
        _ => (None, None),
    }
}

/// Why the loop of a pipeline on mbarriers may not start at `start` (not a constant): the
/// waits' parities `(ko - start) // S % 2` evaluate it again in every iteration — and
/// `warp-specialize`'s producer on a thread of its own — so it must read nothing the loop
/// (`bodies`: its prologue and body) writes and have one value in every thread of the
/// block (`uniform`). `None` when it may.
pub fn unstable_start(
    start: &Expr,
    bodies: &[&[Stmt]],
    uniform: &dyn Fn(&Expr) -> bool,
) -> Option<String> {
    if const_int(start).is_some() {
        return None;
    }
    let written: std::collections::BTreeSet<String> = bodies
        .iter()
        .flat_map(|b| crate::analysis::access::Access::of_body(b).writes)
        .collect();
    let mut clash = None;
    tlc_ir::visit::for_each_subexpr(start, &mut |e| {
        if let ExprKind::Load { buffer, .. } = &e.kind {
            if written.contains(buffer) && clash.is_none() {
                clash = Some(buffer.clone());
            }
        }
    });
    if let Some(b) = clash {
        return Some(format!(
            "the pipelined loop's start `{start}` reads `{b}`, which the loop writes"
        ));
    }
    (!uniform(start)).then(|| {
        format!("the pipelined loop's start `{start}` may differ between the block's threads")
    })
}

/// `Ok` when the fills of a TMA pipeline on mbarriers `bars` of `S` stages (the prologue
/// `p` with its issuing thread's code, the loop `m` with its fills) are the ones its waits
/// assume: fill `k` into stage `k % S` —
/// the prologue's `s` fills `start + s`, the loop's `ko` fills `ko + S - 1` under `if ko +
/// S - 1 < stop` — and each TMA load writes the stage its barrier counts ([`stage_of_fill`]:
/// symbolically, or by evaluation over the prologue and two periods of the loop when the
/// loop starts at a constant). A start that is not a constant must be stable
/// ([`unstable_start`], the caller's to check).
pub fn fills_in_order(
    (bars, s): (&str, i64),
    (p, first): (&For, &[Stmt]),
    (m, ahead): (&For, &[Stmt]),
) -> Result<(), String> {
    if !(1..=1 << 20).contains(&s) {
        return Err(format!("{s} stages"));
    }
    let guard = tlc_ir::build::bin(
        BinOp::Lt,
        tlc_ir::build::bin(BinOp::Add, Expr::var(&m.var.name), Expr::int(s - 1)),
        m.stop.clone(),
    );
    let guarded = ahead.iter().all(|st| match &st.kind {
        StmtKind::Note(_) => true,
        StmtKind::If {
            cond, else_body, ..
        } => *cond == guard && else_body.is_empty(),
        _ => false,
    });
    if !guarded {
        return Err("a stage fill of the loop is not under its look-ahead guard".into());
    }
    let (prologue_values, loop_values) = fill_values(&m.start, s);
    let prologue_fill = add_expr(m.start.clone(), Expr::var(&p.var.name));
    let ahead_fill = add(Expr::var(&m.var.name), s - 1);
    for (code, var, fill, values) in [
        (first, &p.var.name, &prologue_fill, prologue_values),
        (ahead, &m.var.name, &ahead_fill, loop_values),
    ] {
        let mut ok = true;
        tlc_ir::visit::for_each_stmt(code, &mut |st| {
            let StmtKind::Intrinsic(i) = &st.kind else {
                return;
            };
            let (bar, dst) = match i {
                tlc_ir::Intrinsic::MbarrierArriveExpectTx { bar, .. } => (bar, None),
                tlc_ir::Intrinsic::TmaLoad { dst, bar, .. } => (bar, Some(dst)),
                _ => return,
            };
            let in_order = |e: &tlc_ir::ElemRef| {
                e.indices
                    .first()
                    .is_some_and(|stage| stage_of_fill(stage, var, fill, values.clone(), s))
            };
            ok &= bar.buffer.name == bars
                && bar.indices.len() == 1
                && in_order(bar)
                && dst.is_none_or(in_order);
        });
        if !ok {
            return Err("a stage fill is not in the order the waits assume".into());
        }
    }
    Ok(())
}

/// The region in which thread 0 initializes every stage's mbarrier of each `(array,
/// arrival count)` and fences the inits for the async proxy, over thread variable `tx` and
/// stage variable `s`: `for tx …: if tx == 0: for s in T.unroll(S): T.mbarrier_init(…);
/// T.fence_proxy_async()` — the form `warp-specialize` and `persistent-tiles` look for.
pub fn init_region(
    arrays: &[(&str, i64)],
    stages: i64,
    block: &crate::analysis::block::Block,
    (tx, s): (&str, &str),
    span: tlc_ir::Span,
    names: &mut crate::names::NameSet,
) -> Stmt {
    use tlc_ir::build::{bin, elem, for_loop, if_then, intrinsic};
    let inits = arrays
        .iter()
        .map(|&(bars, count)| {
            intrinsic(
                tlc_ir::Intrinsic::MbarrierInit {
                    bar: elem(bars, vec![Expr::var(s)], span),
                    count,
                },
                span,
            )
        })
        .collect();
    let guarded = if_then(
        bin(BinOp::Eq, Expr::var(tx), Expr::int(0)),
        vec![
            for_loop(s, Expr::int(stages), ForKind::Unroll, inits, span),
            intrinsic(tlc_ir::Intrinsic::FenceProxyAsync, span),
        ],
        span,
    );
    block.fresh_region(tx, vec![guarded], span, names)
}

/// `T.alloc_shared((stages,), "int64")` named `name`: one mbarrier per stage.
pub fn barrier_array(name: &str, stages: i64, span: tlc_ir::Span) -> BufferDecl {
    BufferDecl {
        name: Ident::new(name, span),
        dtype: DType::Int64,
        shape: vec![Expr::int(stages)],
        scope: Scope::Shared,
        span,
    }
}
