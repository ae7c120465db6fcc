//! The mma.sync m16n8k16 accumulator layout of a fragment (`T.mma_accumulator_layout`).
//!
//! A `M x N` fragment is split over a `WM x WN` grid of warps; warp `w` owns the warp tile
//! at `(w % WM, w / WM)` of `M / WM x N / WN` elements, itself a grid of `MT x NT` mma tiles
//! of 16 x 8. Lane `l` of the warp holds, of each mma tile, the four accumulators `c0..c3`
//! of the PTX ISA: `(l / 4, 2 * (l % 4) + q % 2)` plus 8 rows for `q >= 2`. So thread `tx`
//! holds `MT * NT * 4` floats; slot `s = 4 * (mt * NT + nt) + q`.
//!
//! Regions over such a fragment iterate the thread's slots in pairs: `it` over
//! `MT * NT * 2` pairs, lane `v` over the two adjacent columns of a pair, which is what
//! makes the epilogue's packed (half2) stores possible.

use super::region::{lane_last, thread_region, Mapping};
use crate::analysis::block::Block;
use crate::names::NameSet;
use tlc_ir::build::{bin, for_loop};
use tlc_ir::{BinOp, Expr, ForKind, Span, Stmt};

/// The accumulator layout of one fragment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MmaLayout {
    /// Fragment shape.
    pub m: i64,
    pub n: i64,
    pub warps_m: i64,
    pub warps_n: i64,
}

impl MmaLayout {
    /// Rows of one warp tile.
    pub fn warp_m(&self) -> i64 {
        self.m / self.warps_m
    }

    /// Columns of one warp tile.
    pub fn warp_n(&self) -> i64 {
        self.n / self.warps_n
    }

    /// mma tiles (16 x 8) per warp tile, along M and N.
    pub fn tiles_m(&self) -> i64 {
        self.warp_m() / 16
    }

    pub fn tiles_n(&self) -> i64 {
        self.warp_n() / 8
    }

    /// Accumulators per thread.
    pub fn slots(&self) -> i64 {
        self.tiles_m() * self.tiles_n() * 4
    }

    pub fn threads(&self) -> i64 {
        self.warps_m * self.warps_n * 32
    }

    /// Why this layout cannot describe its fragment, if it cannot.
    pub fn check(&self, threads: i64) -> Result<(), String> {
        if self.warps_m <= 0 || self.warps_n <= 0 {
            return Err("the warp grid must be positive".into());
        }
        if self.threads() != threads {
            return Err(format!(
                "{} x {} warps need {} threads, the block has {threads}",
                self.warps_m,
                self.warps_n,
                self.threads()
            ));
        }
        if self.m % (16 * self.warps_m) != 0 || self.n % (16 * self.warps_n) != 0 {
            return Err(format!(
                "a {} x {} tile does not split into {} x {} warp tiles of multiples of 16 x 16",
                self.m, self.n, self.warps_m, self.warps_n
            ));
        }
        Ok(())
    }

    /// The index of the warp along M and along N, for thread `tx`.
    pub fn warp_coords(&self, tx: &Expr) -> (Expr, Expr) {
        let warp = bin(BinOp::FloorDiv, tx.clone(), Expr::int(32));
        (
            bin(BinOp::FloorMod, warp.clone(), Expr::int(self.warps_m)),
            bin(BinOp::FloorDiv, warp, Expr::int(self.warps_m)),
        )
    }
}

/// The region over the whole fragment: `body` sees the fragment indices `[i, j]` of the
/// element and its slot. `vectorize` makes the pair loop `T.vectorized(2)` (the caller has
/// checked that the other side of the op can take 2-element vectors), else `T.unroll(2)`.
/// `block` is the kernel's (its thread count is the layout's, `check` made sure).
pub(crate) fn build(
    layout: &MmaLayout,
    block: &Block,
    vectorize: bool,
    span: Span,
    names: &mut NameSet,
    body: impl FnOnce(&Mapping) -> Vec<Stmt>,
) -> Stmt {
    let tx = names.fresh(block.index_base());
    let it = names.fresh("it");
    let v = names.fresh("v");
    let txe = Expr::var(&tx);
    let (wm, wn) = layout.warp_coords(&txe);
    let lane = bin(BinOp::FloorMod, txe.clone(), Expr::int(32));
    let tile = bin(BinOp::FloorDiv, Expr::var(&it), Expr::int(2));
    let half = bin(BinOp::FloorMod, Expr::var(&it), Expr::int(2));
    let tiles_n = Expr::int(layout.tiles_n());
    // i = wm * WM + (tile / NT) * 16 + lane / 4 + 8 * half
    let i = [
        bin(BinOp::Mul, wm, Expr::int(layout.warp_m())),
        bin(
            BinOp::Mul,
            bin(BinOp::FloorDiv, tile.clone(), tiles_n.clone()),
            Expr::int(16),
        ),
        bin(BinOp::FloorDiv, lane.clone(), Expr::int(4)),
        bin(BinOp::Mul, half, Expr::int(8)),
    ]
    .into_iter()
    .reduce(|a, b| bin(BinOp::Add, a, b))
    .unwrap_or_else(|| Expr::int(0));
    // j = wn * WN + (tile % NT) * 8 + 2 * (lane % 4) + v
    let j = [
        bin(BinOp::Mul, wn, Expr::int(layout.warp_n())),
        bin(
            BinOp::Mul,
            bin(BinOp::FloorMod, tile, tiles_n),
            Expr::int(8),
        ),
        bin(
            BinOp::Mul,
            bin(BinOp::FloorMod, lane, Expr::int(4)),
            Expr::int(2),
        ),
        Expr::var(&v),
    ]
    .into_iter()
    .reduce(|a, b| bin(BinOp::Add, a, b))
    .unwrap_or_else(|| Expr::int(0));
    let mapping = Mapping {
        indices: vec![i, j],
        slot: bin(
            BinOp::Add,
            bin(BinOp::Mul, Expr::var(&it), Expr::int(2)),
            Expr::var(&v),
        ),
    };
    let mut inner = body(&mapping);
    lane_last(&mut inner, &v);
    let kind = if vectorize {
        ForKind::Vectorized
    } else {
        ForKind::Unroll
    };
    let pair = for_loop(&v, Expr::int(2), kind, inner, span);
    // Register arrays take constant indices only: the slot loop unrolls.
    let serial = for_loop(
        &it,
        Expr::int(layout.slots() / 2),
        ForKind::Unroll,
        vec![pair],
        span,
    );
    thread_region(block, &tx, vec![serial], span, names)
}
