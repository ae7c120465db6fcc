//! `T.fill(dst, value)` / `T.clear(dst)` → one region over the region's extents storing
//! `T.cast(value, dtype)` into each element. A fill's region lies inside its buffer (a
//! run-time rule of the op), so there are no bounds guards. Vectors as for copies.

use super::fragment::{is_whole, mismatch};
use super::region::{build, with_span};
use super::vectorize::{rows_aligned, width};
use super::Ctx;
use crate::analysis::int::multiple_of;
use crate::names::NameSet;
use tlc_ir::build::bin;
use tlc_ir::verifier::const_int;
use tlc_ir::{BinOp, Diagnostic, Expr, ExprKind, Ident, Region, Span, Stmt, StmtKind};

pub(crate) fn lower(
    dst: &Region,
    value: &Expr,
    span: Span,
    ctx: &Ctx,
    names: &mut NameSet,
) -> Result<Stmt, Vec<Diagnostic>> {
    let Some(db) = ctx.buffer(&dst.buffer.name) else {
        return Err(vec![Diagnostic::error(span, "T.fill of an unknown buffer")]);
    };
    let fragment = ctx.fragments.contains(&db.name.name);
    if fragment && !is_whole(dst, db) {
        return Err(vec![mismatch(&db.name.name, span)]);
    }
    let mut extents: Vec<Expr> = dst.ranges.iter().map(|r| r.extent.clone()).collect();
    if extents.is_empty() {
        extents.push(Expr::int(1));
    }
    let v = width(db.dtype.bytes());
    let vectorize = !fragment
        && v > 1
        && dst.ranges.last().is_some_and(|l| {
            const_int(&l.extent).is_some_and(|e| e % v == 0)
                && multiple_of(&l.start, v, &*ctx.bounds.borrow())
        })
        && rows_aligned(db, v, &*ctx.bounds.borrow());
    let vec = if vectorize { v } else { 1 };
    let converted = Expr::new(
        ExprKind::Cast(db.dtype, Box::new(value.clone())),
        value.span,
    );
    let store = |m: &super::region::Mapping| {
        let indices = if fragment {
            vec![m.slot.clone()]
        } else {
            dst.ranges
                .iter()
                .zip(&m.indices)
                .map(|(r, i)| with_span(bin(BinOp::Add, r.start.clone(), i.clone()), dst.span))
                .collect()
        };
        vec![Stmt::new(
            StmtKind::Store {
                buffer: Ident::new(db.name.name.clone(), dst.span),
                indices,
                value: converted.clone(),
            },
            span,
        )]
    };
    if let Some(rl) = ctx.fragments.rows(&db.name.name) {
        let is_register = |n: &str| ctx.fragments.contains(n);
        return super::rows::build(&rl, &ctx.block, span, names, &is_register, store);
    }
    Ok(build(
        &extents, &ctx.block, vec, fragment, span, names, store,
    ))
}
