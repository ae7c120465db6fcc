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
use crate::analysis::raster;
use crate::context::PassContext;
use crate::names::NameSet;
use crate::pass::Pass;
use tlc_ir::build::bin;
use tlc_ir::verifier::const_int;
use tlc_ir::visit::map_body_exprs;
use tlc_ir::{BinOp, Diagnostic, Expr, ExprKind, Ident, Kernel, PrimFunc, Stmt, StmtKind};

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
    // In clusters the clusters are rasterized and a block keeps its rank: cluster
    // `(bx // cx, by // cy)` of the `(gx / cx, gy / cy)` grid of clusters plays the
    // remapped cluster, and block `(bx, by)` its block `(bx % cx, by % cy)` of it — so the
    // blocks of a cluster stay neighbours and keep sharing their multicast boxes.
    let (cx, cy) = match k.cluster_dims() {
        Some([cx, cy, _]) => (cx, cy),
        None => {
            return Err(Diagnostic::error(
                swizzle.span,
                "the cluster shape must be constant to rasterize its clusters",
            ))
        }
    };
    let mut lets: Vec<(String, Expr)> = Vec::new();
    // Per axis: the index the raster walks (the block's, or its cluster's `b // c`) and the
    // grid of it; an axis of one block per cluster needs no indirection.
    let mut unit = |b: &str, g: &Expr, c: i64, lets: &mut Vec<(String, Expr)>| {
        if c == 1 {
            return (b.to_string(), g.clone());
        }
        let u = names.fresh(&format!("{b}_cluster"));
        lets.push((u.clone(), bin(BinOp::FloorDiv, Expr::var(b), Expr::int(c))));
        (u, bin(BinOp::FloorDiv, g.clone(), Expr::int(c)))
    };
    let (ux, gx) = unit(&bx, &k.grid[0], cx, &mut lets);
    let (uy, gy) = unit(&by, &k.grid[1], cy, &mut lets);
    let r = raster::remap((&ux, &uy), (&gx, &gy), panel, swizzle.order, names);
    lets.extend(r.lets);
    // The block plays its place `b % c` in the remapped cluster.
    let mut played = |raster: String, b: &str, c: i64, lets: &mut Vec<(String, Expr)>| {
        if c == 1 {
            return raster;
        }
        let p = names.fresh(&format!("{b}_played"));
        lets.push((
            p.clone(),
            bin(
                BinOp::Add,
                bin(BinOp::Mul, Expr::var(&raster), Expr::int(c)),
                bin(BinOp::FloorMod, Expr::var(b), Expr::int(c)),
            ),
        ));
        p
    };
    let px = played(r.x, &bx, cx, &mut lets);
    let py = played(r.y, &by, cy, &mut lets);
    map_body_exprs(&mut k.body, &mut |e| match &e.kind {
        ExprKind::Var(n) if *n == bx => Expr::new(ExprKind::Var(px.clone()), e.span),
        ExprKind::Var(n) if *n == by => Expr::new(ExprKind::Var(py.clone()), e.span),
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
