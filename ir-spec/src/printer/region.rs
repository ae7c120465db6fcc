//! Region printing: the whole-buffer, corner and slice forms of docs/ir.md ("Regions").

use super::expr::{write_expr, write_list};
use crate::ir::{BinOp, BufferDecl, Expr, ExprKind, Range, Region};
use crate::span::Span;
use std::collections::HashMap;
use std::fmt::{self, Write};

/// Buffer declarations by name, for deciding whether a region is the whole buffer.
pub(crate) type Decls<'f> = HashMap<&'f str, &'f BufferDecl>;

/// True when `region` covers all of its buffer: every start is the literal 0 and the extents
/// are the declared shape.
pub(crate) fn is_whole(region: &Region, decls: &Decls<'_>) -> bool {
    let Some(decl) = decls.get(region.buffer.name.as_str()) else {
        return false;
    };
    decl.shape.len() == region.ranges.len()
        && region
            .ranges
            .iter()
            .zip(&decl.shape)
            .all(|(r, dim)| r.start.as_int() == Some(0) && r.extent == *dim)
}

/// The extents the parser derives for an operand printed in whole or slice form.
fn printed_extents<'a>(region: &'a Region, decls: &Decls<'a>) -> Vec<&'a Expr> {
    if is_whole(region, decls) {
        if let Some(decl) = decls.get(region.buffer.name.as_str()) {
            return decl.shape.iter().collect();
        }
    }
    region.ranges.iter().map(|r| &r.extent).collect()
}

/// True when the parser's CORNER RULE, applied to a point-indexed `region` opposite an operand
/// with extents `other`, gives back exactly `region`'s extents.
fn corner_fits(region: &Region, other: &[&Expr]) -> bool {
    let rank = region.ranges.len();
    if rank == 0 {
        return false;
    }
    let mine: Vec<&Expr> = region.ranges.iter().map(|r| &r.extent).collect();
    if other.len() >= rank {
        let (lead, tail) = other.split_at(other.len() - rank);
        lead.iter().all(|e| e.as_int() == Some(1)) && tail == mine.as_slice()
    } else {
        let pad = rank - other.len();
        mine[..pad].iter().all(|e| e.as_int() == Some(1)) && mine[pad..] == *other
    }
}

/// How each operand of a `T.copy` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Form {
    Whole,
    Corner,
    Slice,
}

/// Chooses the forms of `T.copy(src, dst)`. The source gets the corner form first when both
/// could take it (only one operand may be point-indexed).
pub(crate) fn copy_forms(src: &Region, dst: &Region, decls: &Decls<'_>) -> (Form, Form) {
    let base = |r: &Region| {
        if is_whole(r, decls) {
            Form::Whole
        } else {
            Form::Slice
        }
    };
    let (mut fs, mut fd) = (base(src), base(dst));
    if fs == Form::Slice && corner_fits(src, &printed_extents(dst, decls)) {
        fs = Form::Corner;
    } else if fd == Form::Slice && corner_fits(dst, &printed_extents(src, decls)) {
        fd = Form::Corner;
    }
    (fs, fd)
}

/// Writes `region` in `form`.
pub(crate) fn write_region(out: &mut dyn Write, region: &Region, form: Form) -> fmt::Result {
    out.write_str(&region.buffer.name)?;
    match form {
        Form::Whole => Ok(()),
        Form::Corner => {
            out.write_char('[')?;
            write_list(out, region.ranges.iter().map(|r| &r.start))?;
            out.write_char(']')
        }
        Form::Slice => {
            out.write_char('[')?;
            for (i, range) in region.ranges.iter().enumerate() {
                if i > 0 {
                    out.write_str(", ")?;
                }
                write_slice(out, range)?;
            }
            out.write_char(']')
        }
    }
}

/// Writes a region in whole or slice form (the forms outside `T.copy`).
pub(crate) fn write_plain_region(
    out: &mut dyn Write,
    region: &Region,
    decls: &Decls<'_>,
) -> fmt::Result {
    let form = if is_whole(region, decls) {
        Form::Whole
    } else {
        Form::Slice
    };
    write_region(out, region, form)
}

/// One dimension of the slice form: `0:e`, `s:t` for two literals, `x + c:x + (c + e)` for a
/// start ending in a literal and a literal extent (the parser sees the constant difference),
/// else `s:s + e` (which the parser's SLICE EXTENT RULE reads back as extent `e`).
fn write_slice(out: &mut dyn Write, range: &Range) -> fmt::Result {
    match (range.start.as_int(), range.extent.as_int()) {
        (Some(0), _) => {
            out.write_str("0:")?;
            write_expr(out, &range.extent)
        }
        (Some(s), Some(e)) if s.checked_add(e).is_some() => {
            write!(out, "{s}:{}", s + e)
        }
        (_, Some(e)) if folded_stop(&range.start, e).is_some() => {
            write_expr(out, &range.start)?;
            out.write_char(':')?;
            match folded_stop(&range.start, e) {
                Some(stop) => write_expr(out, &stop),
                None => Ok(()),
            }
        }
        _ => {
            write_expr(out, &range.start)?;
            out.write_char(':')?;
            // Built unfolded on purpose: the parser matches `s + E` structurally.
            let stop = Expr::new(
                ExprKind::Binary(
                    BinOp::Add,
                    Box::new(range.start.clone()),
                    Box::new(range.extent.clone()),
                ),
                Span::DUMMY,
            );
            write_expr(out, &stop)
        }
    }
}

/// For `start = x + c` and a literal extent `e`, the stop `x + (c + e)`.
fn folded_stop(start: &Expr, extent: i64) -> Option<Expr> {
    let ExprKind::Binary(BinOp::Add, x, c) = &start.kind else {
        return None;
    };
    let c = c.as_int()?.checked_add(extent)?;
    Some(Expr::new(
        ExprKind::Binary(BinOp::Add, x.clone(), Box::new(Expr::int(c))),
        Span::DUMMY,
    ))
}
