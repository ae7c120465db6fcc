//! A nest of directly nested `T.Parallel` loops → one region over the nest's iteration
//! space; the body moves inside it with the loop variables replaced by their indices
//! (`i` → `(it * 128 + tx) // 64`, …; `simplify` tidies them). Vectors: 16 bytes of the
//! widest dtype the body accesses, when the body is only stores and every access's
//! innermost index is `<multiple of V> + j` (`j` the innermost loop variable, mentioned by
//! no other index). A fragment may only be accessed as `F[i, j]` with the nest's variables
//! in order over its whole shape; it is then accessed at its slot.

use super::atomic;
use super::fragment::{mismatch, shape};
use super::region::build;
use super::rows::{Kind as RowsKind, RowsLayout};
use super::vectorize::{rows_aligned, width};
use super::Ctx;
use crate::analysis::access::{element_accesses, element_for_element};
use crate::analysis::int::{mentions, multiple_of, unit_offset};
use crate::names::NameSet;
use std::collections::HashMap;
use tlc_ir::build::bin;
use tlc_ir::verifier::const_int;
use tlc_ir::visit::{for_each_stmt, map_body_exprs};
use tlc_ir::{BinOp, Diagnostic, Expr, ExprKind, For, ForKind, Span, Stmt, StmtKind};

pub(crate) fn lower(
    outer: &For,
    span: Span,
    ctx: &Ctx,
    names: &mut NameSet,
) -> Result<Stmt, Vec<Diagnostic>> {
    // The directly nested parallel loops.
    let mut loops = vec![outer];
    let mut vars = vec![outer.var.name.clone()];
    let mut starts = vec![outer.start.clone()];
    let mut extents = vec![extent(outer)];
    let mut body = &outer.body;
    while let [Stmt {
        kind: StmtKind::For(inner),
        ..
    }] = body.as_slice()
    {
        if inner.kind != ForKind::Parallel {
            break;
        }
        loops.push(inner);
        vars.push(inner.var.name.clone());
        starts.push(inner.start.clone());
        extents.push(extent(inner));
        body = &inner.body;
    }
    let body = atomic::drop_proven_guards(body.clone(), &loops, &ctx.bounds.borrow());
    let mut errors = Vec::new();
    for_each_stmt(&body, &mut |s| {
        match &s.kind {
        StmtKind::For(f) if f.kind == ForKind::Parallel => errors.push(Diagnostic::error(
            s.span,
            "a T.Parallel loop nested below other statements of a T.Parallel body is not lowered yet",
        )),
        StmtKind::Copy { .. } | StmtKind::Fill { .. } | StmtKind::Gemm(_) => {
            errors.push(Diagnostic::error(s.span, "a tile op inside a T.Parallel loop"))
        }
        _ => {}
    }
    });
    let accesses = element_accesses(&body);
    let mut touches_fragment = false;
    // Row vectors (`rows.rs`) read as `V[i]` in a 2-D nest, or the fragments of a 1-D nest
    // over their rows.
    let mut row_reads = false;
    let mut row_nest: Option<RowsLayout> = None;
    let consts: Vec<Option<i64>> = extents.iter().map(const_int).collect();
    for (name, indices) in &accesses {
        if !ctx.fragments.contains(name) {
            continue;
        }
        touches_fragment = true;
        if let Some(rl) = ctx.fragments.rows(name) {
            let row_index = |v: &str| match indices.as_slice() {
                [i] => match &i.kind {
                    ExprKind::Var(n) => n == v,
                    ExprKind::Int(0) => rl.rows == 1,
                    _ => false,
                },
                _ => false,
            };
            let ok = match (vars.as_slice(), consts.as_slice()) {
                ([i, _], [Some(r), Some(_)]) => {
                    *r == rl.rows && row_index(i) && {
                        row_reads = true;
                        !written(&body, name)
                    }
                }
                ([i], [Some(r)]) => {
                    *r == rl.rows && row_index(i) && {
                        row_nest = Some(rl);
                        true
                    }
                }
                _ => false,
            };
            if !ok {
                errors.push(mismatch(name, span));
            }
            continue;
        }
        let fshape = ctx.buffer(name).and_then(shape);
        let ok = match (&fshape, ctx.fragments.mma(name)) {
            // An accumulator layout maps exactly the nest's two dimensions.
            (Some(s), Some(_)) => {
                s.iter().map(|&n| Some(n)).eq(consts.iter().copied())
                    && indices.len() == vars.len()
                    && indices
                        .iter()
                        .zip(&vars)
                        .all(|(i, v)| matches!(&i.kind, ExprKind::Var(n) if n == v))
            }
            (Some(s), None) => element_for_element(s, indices, &vars, &consts),
            (None, _) => false,
        };
        if !ok {
            errors.push(mismatch(name, span));
        }
    }
    // A 1-D nest over row vectors touches nothing else held in registers.
    if row_nest.is_some()
        && accesses
            .iter()
            .any(|(n, _)| ctx.fragments.contains(n) && ctx.fragments.rows(n).is_none())
    {
        errors.push(Diagnostic::error(
            span,
            "a T.Parallel nest over row vectors that also touches other fragments is not lowered yet",
        ));
    }
    errors.dedup_by(|a, b| a.message == b.message);
    if !errors.is_empty() {
        return Err(errors);
    }
    let vec = vector_width(
        &body,
        &accesses,
        &vars,
        &starts,
        &extents,
        ctx,
        touches_fragment,
    );
    // An atomic nest's vectors (`atomic.rs`): pairs of an accumulator's adjacent columns, or
    // the region's vectors; either way its guard is tested once per vector.
    let atomic = atomic::is_atomic_body(&body);
    let pairs = atomic
        && match (vars.last(), starts.last()) {
            (Some(j), Some(start)) => atomic::vectors(&body, j, start, 2, ctx),
            _ => false,
        };
    // Fragments first (their indices are still the loop variables), then the variables.
    let fragments = ctx.fragments;
    let mut layouts: Vec<_> = accesses
        .iter()
        .filter_map(|(name, _)| fragments.mma(name))
        .collect();
    layouts.dedup();
    if layouts.len() > 1 {
        return Err(vec![Diagnostic::error(
            span,
            "a T.Parallel loop over fragments with different mma layouts is not lowered yet",
        )]);
    }
    let mma = layouts.first().copied();
    // The driving fragment's column tiles, for the row slot of its elements.
    let tiles_n = mma.map_or(1, |l| l.tiles_n());
    if row_reads {
        let n = consts.get(1).copied().flatten().unwrap_or(0);
        let fits = accesses
            .iter()
            .filter_map(|(name, _)| ctx.fragments.rows(name))
            .all(|rl| match (rl.kind, mma) {
                (RowsKind::Flat { cols, .. }, None) => cols == n,
                (RowsKind::Acc(l), Some(m)) => {
                    (l.warps_m, l.warps_n, l.wgmma) == (m.warps_m, m.warps_n, m.wgmma)
                }
                _ => false,
            });
        if !fits {
            return Err(vec![Diagnostic::error(
                span,
                "this T.Parallel nest reads a row vector laid out for other fragments than the ones it covers",
            )]);
        }
    }
    let lower_body = |m: &super::region::Mapping| {
        let mut body = body.clone();
        let slot = m.slot.clone();
        rewrite_fragment_stores(&mut body, &|n| fragments.contains(n), &slot);
        // Parallel loops start at 0 (docs/ir.md); a start is added all the same.
        let subst: HashMap<&str, Expr> = vars
            .iter()
            .map(String::as_str)
            .zip(
                starts
                    .iter()
                    .zip(&m.indices)
                    .map(|(s, i)| bin(BinOp::Add, s.clone(), i.clone())),
            )
            .collect();
        map_body_exprs(&mut body, &mut |e| match &e.kind {
            ExprKind::Load { buffer, .. } if fragments.contains(buffer) => {
                let at = match fragments.rows(buffer) {
                    Some(rl) if row_nest.is_none() => rl.slot_of(&slot, tiles_n),
                    _ => slot.clone(),
                };
                Expr::new(
                    ExprKind::Load {
                        buffer: buffer.clone(),
                        indices: vec![at],
                    },
                    e.span,
                )
            }
            ExprKind::Var(n) => match subst.get(n.as_str()) {
                Some(value) => value.clone(),
                None => e,
            },
            // A variable replaced by a literal (an extent-1 dimension's index is 0) leaves
            // literal arithmetic, folded as the parser would fold it (so the printed IR
            // parses back equal).
            ExprKind::Binary(op, a, b) if a.as_int().is_some() && b.as_int().is_some() => {
                Expr::binary(*op, (**a).clone(), (**b).clone(), e.span)
            }
            _ => e,
        });
        body
    };
    let region = match (mma, row_nest) {
        (_, Some(rl)) => super::rows::build(
            &rl,
            &ctx.block,
            span,
            names,
            &|n| fragments.contains(n),
            lower_body,
        )?,
        (Some(layout), None) => {
            super::mma_layout::build(&layout, &ctx.block, pairs, span, names, lower_body)
        }
        (None, None) => build(
            &extents,
            &ctx.block,
            vec,
            touches_fragment,
            span,
            names,
            lower_body,
        ),
    };
    Ok(if atomic && (pairs || vec > 1) {
        atomic::hoist_lane_guards(region)
    } else {
        region
    })
}

/// Whether `body` stores into `name`.
fn written(body: &[Stmt], name: &str) -> bool {
    let mut found = false;
    for_each_stmt(body, &mut |s| {
        found |= matches!(&s.kind, StmtKind::Store { buffer, .. } if buffer.name == name);
    });
    found
}

fn extent(f: &For) -> Expr {
    match const_int(&f.start) {
        Some(0) => f.stop.clone(),
        _ => bin(BinOp::Sub, f.stop.clone(), f.start.clone()),
    }
}

fn rewrite_fragment_stores(body: &mut [Stmt], is_fragment: &dyn Fn(&str) -> bool, slot: &Expr) {
    for s in body {
        if let StmtKind::Store {
            buffer, indices, ..
        } = &mut s.kind
        {
            if is_fragment(&buffer.name) {
                *indices = vec![slot.clone()];
            }
        }
        for child in tlc_ir::visit::child_bodies_mut(s) {
            rewrite_fragment_stores(child, is_fragment, slot);
        }
    }
}

/// The vector width of the region (1: no vectors); see the module summary.
fn vector_width(
    body: &[Stmt],
    accesses: &[(String, Vec<Expr>)],
    vars: &[String],
    starts: &[Expr],
    extents: &[Expr],
    ctx: &Ctx,
    touches_fragment: bool,
) -> i64 {
    let (Some(j), Some(inner)) = (vars.last(), extents.last().and_then(const_int)) else {
        return 1;
    };
    // An atomic nest: 16 bytes of the destination, when `atomic.rs` allows its vectors.
    if !touches_fragment && atomic::is_atomic_body(body) {
        let v = atomic::destination_bytes(body, ctx).map_or(1, width);
        let ok = inner % v == 0
            && starts
                .last()
                .is_some_and(|start| atomic::vectors(body, j, start, v, ctx));
        return if ok { v } else { 1 };
    }
    if touches_fragment
        || accesses.is_empty()
        || !body
            .iter()
            .all(|s| matches!(s.kind, StmtKind::Store { .. }))
    {
        return 1;
    }
    let mut v = i64::MAX;
    for (name, _) in accesses {
        match ctx.buffer(name) {
            Some(b) => v = v.min(width(b.dtype.bytes())),
            None => return 1,
        }
    }
    if v <= 1 || inner % v != 0 {
        return 1;
    }
    let ok = accesses.iter().all(|(name, indices)| {
        let Some((last, rest)) = indices.split_last() else {
            return false;
        };
        ctx.buffer(name)
            .is_some_and(|b| rows_aligned(b, v, &*ctx.bounds.borrow()))
            && rest.iter().all(|i| !mentions(i, j))
            && unit_offset(last, j).is_some_and(|off| multiple_of(&off, v, &*ctx.bounds.borrow()))
    });
    if ok {
        v
    } else {
        1
    }
}
