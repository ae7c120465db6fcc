//! `rasterize`: `T.use_swizzle(panel_size=P, order=…)` → remapped block indices, as
//! TileLang's `rasterization2DRow<P>` / `rasterization2DColumn<P>`
//! (`tl_templates/cuda/threadblock_swizzle.h`) compute them.
//!
//! The kernel keeps its grid. Fresh lets at the top of its body compute, from the hardware
//! block indices `bx, by`, the block this block *plays*; the rest of the body uses those.
//! Row order (gx × gy grid, `b = bx + by·gx` the linear launch index):
//!
//! ```text
//! panel        = b // (P·gx)            # which panel of P block rows
//! panel_offset = b % (P·gx)
//! panel_stride = T.min(P, gy - panel·P) # rows in this panel: P, fewer in the last one
//! bx_raster    = odd(panel) ? gx - 1 - panel_offset // panel_stride
//!                           : panel_offset // panel_stride        # snake on odd panels
//! by_raster    = panel_offset % panel_stride + panel·P
//! ```
//!
//! TileLang writes the stride as `panel + 1 < ceildiv(gx·gy, P·gx) ? P : (gx·gy - panel·P·gx)
//! / gx`, which is the same number (`ceildiv(gx·gy, P·gx) = ceildiv(gy, P)`), so the last,
//! partial panel walks its remaining rows column by column. Column order swaps the roles of
//! x and y.
//!
//! With a symbolic grid, three identities are written out: `panel_stride = T.max(1, …)`,
//! `step = T.min(panel_offset // panel_stride, gx - 1)` and `by_raster = T.min(…, gy - 1)`.
//! They never change a value (the stride is at least 1 and the remapped block lies in the
//! grid), but interval analysis cannot relate `panel` to `gy` on its own: without them the
//! remapped indices look unbounded and `widen-indices` would compute every index that uses
//! them in 64 bits. With a constant grid the intervals are already tight and the identities
//! are left out (no instruction spent). Every block of the grid plays exactly one block (tested for many grids), so
//! results never change. `P = 0` or a 1-D grid (where the mapping is the identity) only
//! drops the swizzle; `bz` is never remapped.

use crate::analysis::kernels::for_each_kernel;
use crate::context::PassContext;
use crate::names::NameSet;
use crate::pass::Pass;
use tlc_ir::verifier::const_int;
use tlc_ir::visit::map_body_exprs;
use tlc_ir::{
    BinOp, Diagnostic, Expr, ExprKind, Ident, Kernel, PrimFunc, RasterOrder, Span, Stmt, StmtKind,
};

pub struct Rasterize;

impl Pass for Rasterize {
    fn name(&self) -> &'static str {
        "rasterize"
    }

    fn description(&self) -> &'static str {
        "T.use_swizzle(panel_size=P) -> block indices remapped panel by panel (L2 rasterization)"
    }

    fn run(&self, mut func: PrimFunc, _cx: &PassContext) -> Result<PrimFunc, Vec<Diagnostic>> {
        let mut names = NameSet::of(&func);
        let mut errors = Vec::new();
        for_each_kernel(&mut func.body, &mut |k, _| {
            if let Err(e) = rasterize_kernel(k, &mut names) {
                errors.push(e);
            }
        });
        if errors.is_empty() {
            Ok(func)
        } else {
            Err(errors)
        }
    }
}

fn rasterize_kernel(k: &mut Kernel, names: &mut NameSet) -> Result<(), Diagnostic> {
    let Some(swizzle) = k.swizzle.take() else {
        return Ok(());
    };
    let panel = const_int(&swizzle.panel_size)
        .filter(|p| *p >= 0)
        .ok_or_else(|| {
            Diagnostic::error(
                swizzle.span,
                "`panel_size` must be an integer constant >= 0",
            )
        })?;
    if panel == 0 || k.grid.len() < 2 || k.block_vars.len() < 2 {
        return Ok(());
    }
    let (bx, by) = (k.block_vars[0].name.clone(), k.block_vars[1].name.clone());
    let (gx, gy) = (k.grid[0].clone(), k.grid[1].clone());
    // Column order is row order with x and y swapped.
    let (major, minor, g_major, g_minor) = match swizzle.order {
        RasterOrder::Row => (&bx, &by, &gx, &gy),
        RasterOrder::Column => (&by, &bx, &gy, &gx),
    };
    let p = Expr::int(panel);
    let linear = add(var(&bx), mul(var(&by), gx.clone()));
    let n_panel = names.fresh("panel");
    let n_offset = names.fresh("panel_offset");
    let n_stride = names.fresh("panel_stride");
    let n_major = names.fresh(&format!("{major}_raster"));
    let n_minor = names.fresh(&format!("{minor}_raster"));
    let panel_blocks = mul(p.clone(), g_major.clone());
    // The identities a symbolic grid needs (module doc).
    let symbolic = const_int(g_major).is_none() || const_int(g_minor).is_none();
    let at_least_one = |e: Expr| {
        if symbolic {
            bin(BinOp::Max, Expr::int(1), e)
        } else {
            e
        }
    };
    let below = |e: Expr, g: &Expr| {
        if symbolic {
            bin(BinOp::Min, e, sub(g.clone(), Expr::int(1)))
        } else {
            e
        }
    };
    let lets = [
        (
            &n_panel,
            bin(BinOp::FloorDiv, linear.clone(), panel_blocks.clone()),
        ),
        (&n_offset, bin(BinOp::FloorMod, linear, panel_blocks)),
        (
            &n_stride,
            at_least_one(bin(
                BinOp::Min,
                p.clone(),
                sub(g_minor.clone(), mul(var(&n_panel), p.clone())),
            )),
        ),
        (&n_major, {
            let step = below(
                bin(BinOp::FloorDiv, var(&n_offset), var(&n_stride)),
                g_major,
            );
            let odd = bin(
                BinOp::Eq,
                bin(BinOp::FloorMod, var(&n_panel), Expr::int(2)),
                Expr::int(1),
            );
            let back = sub(sub(g_major.clone(), Expr::int(1)), step.clone());
            Expr::new(
                ExprKind::Select(Box::new(odd), Box::new(back), Box::new(step)),
                Span::DUMMY,
            )
        }),
        (
            &n_minor,
            below(
                add(
                    bin(BinOp::FloorMod, var(&n_offset), var(&n_stride)),
                    mul(var(&n_panel), p),
                ),
                g_minor,
            ),
        ),
    ];
    let (major, minor) = (major.clone(), minor.clone());
    map_body_exprs(&mut k.body, &mut |e| match &e.kind {
        ExprKind::Var(n) if *n == major => Expr::new(ExprKind::Var(n_major.clone()), e.span),
        ExprKind::Var(n) if *n == minor => Expr::new(ExprKind::Var(n_minor.clone()), e.span),
        _ => e,
    });
    let mut body: Vec<Stmt> = lets
        .into_iter()
        .map(|(name, value)| {
            Stmt::new(
                StmtKind::Let {
                    var: Ident::new(name.clone(), swizzle.span),
                    dtype: None,
                    value,
                },
                swizzle.span,
            )
        })
        .collect();
    body.append(&mut k.body);
    k.body = body;
    Ok(())
}

fn var(name: &str) -> Expr {
    Expr::var(name)
}

fn bin(op: BinOp, a: Expr, b: Expr) -> Expr {
    Expr::binary(op, a, b, Span::DUMMY)
}

fn add(a: Expr, b: Expr) -> Expr {
    bin(BinOp::Add, a, b)
}

fn sub(a: Expr, b: Expr) -> Expr {
    bin(BinOp::Sub, a, b)
}

fn mul(a: Expr, b: Expr) -> Expr {
    bin(BinOp::Mul, a, b)
}
