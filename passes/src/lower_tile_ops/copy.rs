//! `T.copy(src, dst)` → one region over the copy's element space (the destination's
//! extents other than 1, row-major). Each element is `dst[...] = src[...]` (the store
//! converts to the destination's dtype); a read outside the source buffer gives 0
//! (`T.if_then_else` guard) and a write outside the destination is dropped (`if` guard),
//! each guard left out where the region provably lies inside its buffer. Vectors: 16 bytes
//! of the destination's dtype when both innermost accesses are contiguous and aligned
//! (`vectorize.rs`); never for fragments.

use super::fragment::{is_whole, mismatch};
use super::mma_layout;
use super::region::{and, build, with_span, Mapping};
use super::vectorize::{rows_aligned, width};
use super::Ctx;
use crate::analysis::int::{interval, multiple_of, non_negative, Ranges};
use crate::names::NameSet;
use tlc_ir::build::bin;
use tlc_ir::verifier::const_int;
use tlc_ir::{BinOp, BufferDecl, Diagnostic, Expr, ExprKind, Ident, Region, Span, Stmt, StmtKind};

pub(crate) fn lower(
    src: &Region,
    dst: &Region,
    span: Span,
    ctx: &Ctx,
    names: &mut NameSet,
) -> Result<Stmt, Vec<Diagnostic>> {
    let (Some(sb), Some(db)) = (ctx.buffer(&src.buffer.name), ctx.buffer(&dst.buffer.name)) else {
        return Err(vec![Diagnostic::error(span, "T.copy of an unknown buffer")]);
    };
    let src_dims = kept_dims(src);
    let dst_dims = kept_dims(dst);
    if src_dims.len() != dst_dims.len() {
        return Err(vec![Diagnostic::error(
            span,
            "the two regions of this T.copy have different shapes",
        )]);
    }
    let mut extents: Vec<Expr> = dst_dims
        .iter()
        .filter_map(|&d| dst.ranges.get(d).map(|r| r.extent.clone()))
        .collect();
    if extents.is_empty() {
        extents.push(Expr::int(1));
    }
    let mut errors = Vec::new();
    let mut touches_fragment = false;
    for (r, b) in [(src, sb), (dst, db)] {
        if ctx.fragments.contains(&b.name.name) {
            touches_fragment = true;
            if !is_whole(r, b) {
                errors.push(mismatch(&b.name.name, span));
            }
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let bounds = ctx.bounds.borrow().clone();
    let v = width(db.dtype.bytes());
    let vectorize = !touches_fragment
        && v > 1
        && extents
            .last()
            .and_then(const_int)
            .is_some_and(|e| e % v == 0)
        && [(src, sb, &src_dims), (dst, db, &dst_dims)]
            .iter()
            .all(|(r, b, dims)| {
                dims.last().copied() == r.ranges.len().checked_sub(1)
                    && r.ranges
                        .last()
                        .is_some_and(|l| multiple_of(&l.start, v, &bounds))
                    && rows_aligned(b, v, &bounds)
            });
    let vec = if vectorize { v } else { 1 };
    let src_frag = ctx.fragments.contains(&sb.name.name);
    let dst_frag = ctx.fragments.contains(&db.name.name);
    let mma = match (
        ctx.fragments.mma(&sb.name.name),
        ctx.fragments.mma(&db.name.name),
    ) {
        (Some(a), Some(b)) if a != b => {
            return Err(vec![Diagnostic::error(
                span,
                "T.copy between fragments with different mma layouts is not lowered yet",
            )])
        }
        (Some(l), _) | (None, Some(l)) => Some(l),
        (None, None) => None,
    };
    let body = |m: &Mapping| {
        let (src_idx, read_guard) = access(src, sb, &src_dims, m, src_frag, &bounds);
        let (dst_idx, write_guard) = access(dst, db, &dst_dims, m, dst_frag, &bounds);
        let load = Expr::new(
            ExprKind::Load {
                buffer: sb.name.name.clone(),
                indices: src_idx,
            },
            span,
        );
        let value = match read_guard {
            Some(cond) => Expr::new(
                ExprKind::Select(
                    Box::new(cond),
                    Box::new(load),
                    Box::new(Expr::new(
                        ExprKind::Cast(sb.dtype, Box::new(Expr::int(0))),
                        span,
                    )),
                ),
                span,
            ),
            None => load,
        };
        let store = Stmt::new(
            StmtKind::Store {
                buffer: Ident::new(db.name.name.clone(), dst.span),
                indices: dst_idx,
                value,
            },
            span,
        );
        match write_guard {
            Some(cond) => vec![Stmt::new(
                StmtKind::If {
                    cond,
                    then_body: vec![store],
                    else_body: Vec::new(),
                },
                span,
            )],
            None => vec![store],
        }
    };
    // A row vector (`rows.rs`): each replica its rows; stores to memory by the primary one.
    let (src_rows, dst_rows) = (
        ctx.fragments.rows(&sb.name.name),
        ctx.fragments.rows(&db.name.name),
    );
    if let Some(rl) = src_rows.or(dst_rows) {
        if src_frag && dst_frag && src_rows != dst_rows {
            return Err(vec![Diagnostic::error(
                span,
                "T.copy between a row vector and a fragment laid out otherwise is not lowered yet",
            )]);
        }
        let is_register = |n: &str| ctx.fragments.contains(n);
        return super::rows::build(&rl, &ctx.block, span, names, &is_register, body);
    }
    Ok(match mma {
        Some(layout) => {
            // Pairs of adjacent columns become 2-element vectors when the other side is a
            // plain in-bounds, aligned access whose innermost index follows the fragment's.
            let other = if src_frag {
                (dst, db, &dst_dims)
            } else {
                (src, sb, &src_dims)
            };
            let pairs = !(src_frag && dst_frag)
                && provably_inside(other.0, other.1, &bounds)
                && other.2.last().copied() == other.0.ranges.len().checked_sub(1)
                && other.2.len() == 2
                && other
                    .0
                    .ranges
                    .last()
                    .is_some_and(|l| multiple_of(&l.start, 2, &bounds))
                && rows_aligned(other.1, 2, &bounds);
            mma_layout::build(&layout, &ctx.block, pairs, span, names, body)
        }
        None => build(
            &extents,
            &ctx.block,
            vec,
            touches_fragment,
            span,
            names,
            body,
        ),
    })
}

/// Whether every element of `r` provably lies inside `b` (constant bounds).
fn provably_inside(r: &Region, b: &BufferDecl, bounds: &Ranges) -> bool {
    r.ranges.len() == b.shape.len()
        && r.ranges
            .iter()
            .zip(&b.shape)
            .all(|(range, dim)| range_inside(range, dim, bounds))
}

/// Whether `start .. start + extent` provably lies inside `0 .. dim` (constant extent and
/// dimension, the start's interval from `bounds`).
fn range_inside(range: &tlc_ir::Range, dim: &Expr, bounds: &Ranges) -> bool {
    let start = interval(&range.start, bounds);
    match (const_int(&range.extent), const_int(dim)) {
        (Some(e), Some(n)) => start.lo >= 0 && start.hi.saturating_add(e) <= n,
        _ => false,
    }
}

/// The dimensions of `r` whose extent is not the literal 1, in order.
pub(crate) fn kept_dims(r: &Region) -> Vec<usize> {
    r.ranges
        .iter()
        .enumerate()
        .filter(|(_, range)| const_int(&range.extent) != Some(1))
        .map(|(d, _)| d)
        .collect()
}

/// The indices of one element of `r` and the condition for it to lie inside `b` (`None`
/// when provably always inside). A fragment is accessed at its slot.
fn access(
    r: &Region,
    b: &BufferDecl,
    kept: &[usize],
    m: &Mapping,
    fragment: bool,
    bounds: &Ranges,
) -> (Vec<Expr>, Option<Expr>) {
    if fragment {
        return (vec![m.slot.clone()], None);
    }
    let mut indices = Vec::with_capacity(r.ranges.len());
    let mut guard: Option<Expr> = None;
    for (d, range) in r.ranges.iter().enumerate() {
        let index = match kept.iter().position(|&k| k == d) {
            Some(p) => match m.indices.get(p) {
                Some(i) => bin(BinOp::Add, range.start.clone(), i.clone()),
                None => range.start.clone(),
            },
            None => range.start.clone(),
        };
        let dim = b.shape.get(d).cloned().unwrap_or_else(|| Expr::int(0));
        let inside = range_inside(range, &dim, bounds);
        if !inside {
            if !non_negative(&range.start, bounds) {
                guard = Some(and(guard, bin(BinOp::Le, Expr::int(0), index.clone())));
            }
            guard = Some(and(guard, bin(BinOp::Lt, index.clone(), dim)));
        }
        indices.push(with_span(index, r.span));
    }
    (indices, guard)
}
