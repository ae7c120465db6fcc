//! L2 rasterization: the block a block *plays* when the grid is walked panel by panel, as
//! TileLang's `rasterization2DRow<P>` / `rasterization2DColumn<P>` compute it — the one
//! formula the `rasterize` pass (from the hardware block indices) and persistent kernels
//! (from a tile index) use. Row order, `gx × gy` grid, `b = bx + by·gx`:
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
//! Column order swaps the roles of x and y. With a symbolic grid three identities are
//! written out so that interval analysis sees the result inside the grid (`rasterize.rs`).

use crate::names::NameSet;
use tlc_ir::verifier::const_int;
use tlc_ir::{BinOp, Expr, ExprKind, RasterOrder, Span};

/// The lets that compute the played block (in order, each a fresh name) and the names
/// holding its x and y indices.
pub struct Remap {
    pub lets: Vec<(String, Expr)>,
    pub x: String,
    pub y: String,
}

/// The block that `(bx, by)` plays in a `(gx, gy)` grid rasterized in panels of `panel`
/// (> 0) rows (`order` row) or columns.
pub fn remap(
    (bx, by): (&str, &str),
    (gx, gy): (&Expr, &Expr),
    panel: i64,
    order: RasterOrder,
    names: &mut NameSet,
) -> Remap {
    let (gx, gy) = (gx.clone(), gy.clone());
    let (bx, by) = (bx.to_string(), by.to_string());
    // Column order is row order with x and y swapped.
    let (major, minor, g_major, g_minor) = match order {
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
    let lets = lets.into_iter().map(|(n, e)| (n.clone(), e)).collect();
    let (x, y) = match order {
        RasterOrder::Row => (n_major, n_minor),
        RasterOrder::Column => (n_minor, n_major),
    };
    Remap { lets, x, y }
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
