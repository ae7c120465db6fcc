//! `T.reduce_*(F, V, dim=1)` into a row vector `V` (`rows.rs`; `lower-reductions` lowered
//! every other reduction to tile ops): one region in which each thread, for each of its
//! row slots `s`,
//!
//! 1. folds its own elements of that row of `F` into a register (`F`'s slots
//!    `RowsLayout::source_slots`, converted to `V`'s dtype, absolute for the `abs` kinds);
//! 2. combines the row's replicas within the warp with butterfly shuffles
//!    (`T.shfl_xor` over `RowsLayout::masks`: every lane ends with the same value);
//! 3. when several warps hold the row (`RowsLayout::cross`), the first lane of each writes
//!    its value to a shared `R x C` buffer and, in a second region, every replica folds the
//!    `C` values in order (the barrier between the regions is `thread-binding`'s);
//! 4. stores the result into its slot of `V` (`V op result` with `clear=False`).
//!
//! Every replica computes bit-identical values (each shuffle step combines the same two
//! values in every lane; the shared step folds in one order), so `V` is consistent across
//! the threads that hold it. The sum is reassociated like `lower-reductions`' (the bound in
//! docs/ir.md); `max` / `min` are exact.

use super::rows::Kind;
use super::Ctx;
use crate::names::NameSet;
use tlc_ir::build::if_then;
use tlc_ir::build::{bin, elem, intrinsic, load, reduce_identity, store};
use tlc_ir::{
    BinOp, BufferDecl, DType, Diagnostic, Expr, ExprKind, Ident, Intrinsic, MathFn, Reduce, Scope,
    Span, Stmt,
};

pub(crate) fn lower(
    r: &Reduce,
    span: Span,
    ctx: &Ctx,
    names: &mut NameSet,
) -> Result<Vec<Stmt>, Vec<Diagnostic>> {
    let op = r.kind.name();
    let (Some(src), Some(dst)) = (ctx.buffer(&r.src.name), ctx.buffer(&r.dst.name)) else {
        return Err(vec![Diagnostic::error(
            span,
            format!("`{op}` takes buffers allocated in this kernel"),
        )]);
    };
    let Some(layout) = ctx.fragments.rows(&dst.name.name) else {
        return Err(vec![Diagnostic::error(
            span,
            format!(
                "`{op}` into `{}` is lowered in registers only into a row vector",
                dst.name.name
            ),
        )
        .with_note(
            "run lower-reductions first: it lowers every other reduction",
        )]);
    };
    let cols = super::fragment::shape(src)
        .and_then(|s| <[i64; 2]>::try_from(s.as_slice()).ok())
        .map(|[_, n]| n);
    // The source's layout must be the one the rows follow.
    let tiles_n = match (layout.kind, ctx.fragments.mma(&src.name.name), cols) {
        (Kind::Flat { cols: c, .. }, None, Some(n)) if c == n => 1,
        (Kind::Acc(l), Some(m), _)
            if (l.warps_m, l.warps_n, l.wgmma) == (m.warps_m, m.warps_n, m.wgmma) =>
        {
            m.tiles_n()
        }
        _ => {
            return Err(vec![Diagnostic::error(
                span,
                format!(
                    "`{op}`: the layout of `{}` is not the one whose rows `{}` follows",
                    src.name.name, dst.name.name
                ),
            )])
        }
    };
    let d = dst.dtype;
    let red = alloc(
        ctx,
        names,
        &format!("{}_red", dst.name.name),
        &[layout.slots()],
        d,
        Scope::Local,
        span,
    );
    let tmp = alloc(
        ctx,
        names,
        &format!("{}_shfl", dst.name.name),
        &[1],
        d,
        Scope::Local,
        span,
    );
    let mut tx = names.fresh(ctx.block.index_base());
    let txe = Expr::var(&tx);
    let (cross, index) = layout.cross(&txe);
    let slot = |s: i64| vec![Expr::int(s)];
    let combine = |a: Expr, b: Expr| Expr::binary(r.kind.combine(), a, b, span);
    let guarded = |cond: bool, row: &Expr, body: Vec<Stmt>| -> Vec<Stmt> {
        if cond {
            vec![if_then(
                bin(BinOp::Lt, row.clone(), Expr::int(layout.rows)),
                body,
                span,
            )]
        } else {
            body
        }
    };
    let mut stmts = Vec::new();
    // 1 and 2: own elements, then the warp's replicas.
    for s in 0..layout.slots() {
        let row = layout.row(s, &txe);
        stmts.push(store(&red, slot(s), reduce_identity(r.kind, d), span));
        let mut folds = Vec::new();
        for sf in layout.source_slots(s, tiles_n) {
            let mut x = load(&src.name.name, vec![Expr::int(sf)], span);
            if src.dtype != d {
                x = Expr::new(ExprKind::Cast(d, Box::new(x)), span);
            }
            if r.kind.takes_abs() {
                x = Expr::new(ExprKind::Math(MathFn::Abs, vec![x]), span);
            }
            folds.push(store(
                &red,
                slot(s),
                combine(load(&red, slot(s), span), x),
                span,
            ));
        }
        stmts.extend(guarded(layout.ragged(), &row, folds));
        for m in layout.masks() {
            stmts.push(intrinsic(
                Intrinsic::ShflXor {
                    dst: elem(&tmp, vec![Expr::int(0)], span),
                    src: elem(&red, slot(s), span),
                    offset: m,
                },
                span,
            ));
            stmts.push(store(
                &red,
                slot(s),
                combine(
                    load(&red, slot(s), span),
                    load(&tmp, vec![Expr::int(0)], span),
                ),
                span,
            ));
        }
    }
    // 3: across warps, through shared memory: the reads are a region of their own, so that
    // thread-binding orders them after every warp's write.
    let mut regions = Vec::new();
    if cross > 1 {
        let xw = alloc(
            ctx,
            names,
            &format!("{}_warps", dst.name.name),
            &[layout.rows, cross],
            d,
            Scope::Shared,
            span,
        );
        let leader = layout.lane_leader(&txe);
        for s in 0..layout.slots() {
            let row = layout.row(s, &txe);
            let write = store(
                &xw,
                vec![row.clone(), index.clone()],
                load(&red, slot(s), span),
                span,
            );
            let mut cond = leader.clone();
            if layout.ragged() {
                cond = bin(
                    BinOp::And,
                    cond,
                    bin(BinOp::Lt, row.clone(), Expr::int(layout.rows)),
                );
            }
            stmts.push(if_then(cond, vec![write], span));
        }
        regions.push(super::region::thread_region(
            &ctx.block,
            &tx,
            std::mem::take(&mut stmts),
            span,
            names,
        ));
        // Region variables are names of their own.
        tx = names.fresh(ctx.block.index_base());
        let txe = Expr::var(&tx);
        for s in 0..layout.slots() {
            let row = layout.row(s, &txe);
            let total = (1..cross).fold(
                load(&xw, vec![row.clone(), Expr::int(0)], span),
                |acc, c| combine(acc, load(&xw, vec![row.clone(), Expr::int(c)], span)),
            );
            let gather = vec![store(&red, slot(s), total, span)];
            stmts.extend(guarded(layout.ragged(), &row, gather));
        }
    }
    // 4: into `V`.
    for s in 0..layout.slots() {
        let row = layout.row(s, &Expr::var(&tx));
        let result = load(&red, slot(s), span);
        let value = if r.clear {
            result
        } else {
            combine(load(&dst.name.name, slot(s), span), result)
        };
        let write = vec![store(&dst.name.name, slot(s), value, span)];
        stmts.extend(guarded(layout.ragged(), &row, write));
    }
    regions.push(super::region::thread_region(
        &ctx.block, &tx, stmts, span, names,
    ));
    Ok(regions)
}

/// A new allocation of the kernel named after `base`.
fn alloc(
    ctx: &Ctx,
    names: &mut NameSet,
    base: &str,
    shape: &[i64],
    dtype: DType,
    scope: Scope,
    span: Span,
) -> String {
    let name = names.fresh(base);
    ctx.new_allocs.borrow_mut().push(BufferDecl {
        name: Ident::new(name.clone(), span),
        dtype,
        shape: shape.iter().map(|&n| Expr::int(n)).collect(),
        scope,
        span,
    });
    name
}
