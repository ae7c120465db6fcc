//! The mma.sync m16n8k16 accumulator layout of a fragment (`T.mma_accumulator_layout`).
//!
//! A `M x N` fragment is split over a `WM x WN` grid of warps; warp `w` owns the warp tile
//! at `(w % WM, w / WM)` of `M / WM x N / WN` elements, itself a grid of `MT x NT` mma tiles
//! of 16 x 8. Lane `l` of the warp holds, of each mma tile, the four accumulators `c0..c3`
//! of the PTX ISA: `(l / 4, 2 * (l % 4) + q % 2)` plus 8 rows for `q >= 2`. So thread `tx`
//! holds `MT * NT * 4` floats; slot `s = 4 * (mt * NT + nt) + q`.
//!
//! The wgmma accumulator layout (`T.wgmma_accumulator_layout`, sm_90a) is the same map with
//! another placement of the warps: over a `GM x GN` grid of warpgroups, warpgroup `g` owns
//! the `M / GM x N / GN` tile at `(g % GM, g / GM)`; its warp `w` (of 4) holds rows
//! `16 w .. 16 w + 16` of every 64-row block of it, all its columns. As an `MmaLayout` it is
//! `warps_m = 4 GM`, `warps_n = GN` with row tiles 64 apart instead of 16: thread `t` holds
//! `(M / GM / 64) * (N / GN / 8) * 4` floats, slot `s = 4 * (mt * NT + nt) + q` at row
//! `gm * M / GM + 64 * mt + 16 * w + l / 4 + 8 * (q / 2)`, column
//! `gn * N / GN + 8 * nt + 2 * (l % 4) + q % 2` — which is the PTX ISA's m64nNk16 D
//! fragment of each 64-row block (`i = 4 nt + q` of its `N / 2` registers).
//!
//! Regions over such a fragment iterate the thread's slots in pairs: `it` over
//! `MT * NT * 2` pairs, lane `v` over the two adjacent columns of a pair, which is what
//! makes the epilogue's packed (half2) stores possible.

use super::region::{lane_last, thread_region, Mapping};
use crate::analysis::block::Block;
use crate::names::NameSet;
use tlc_ir::build::{bin, for_loop};
// The mma.sync fragment's lanes: the instruction's layout is defined on a 32-lane warp.
use tlc_ir::target::WARP_SIZE;
use tlc_ir::{BinOp, Expr, ForKind, Span, Stmt};

/// The accumulator layout of one fragment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MmaLayout {
    /// Fragment shape.
    pub m: i64,
    pub n: i64,
    pub warps_m: i64,
    pub warps_n: i64,
    /// The wgmma placement (see the module summary): `warps_m` is 4 per warpgroup row.
    pub wgmma: bool,
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
        self.warps_m * self.warps_n * WARP_SIZE
    }

    /// The layout of `T.wgmma_accumulator_layout(buf, warpgroups_m=gm, warpgroups_n=gn)` on
    /// an `m x n` fragment.
    pub fn wgmma(m: i64, n: i64, gm: i64, gn: i64) -> MmaLayout {
        MmaLayout {
            m,
            n,
            warps_m: gm.saturating_mul(4),
            warps_n: gn,
            wgmma: true,
        }
    }

    /// Why this layout cannot describe its fragment, if it cannot.
    pub fn check(&self, threads: i64) -> Result<(), String> {
        if self.warps_m <= 0 || self.warps_n <= 0 {
            return Err("the warp grid must be positive".into());
        }
        if self.wgmma {
            let (gm, gn) = (self.warps_m / 4, self.warps_n);
            if self.threads() != threads {
                return Err(format!(
                    "{gm} x {gn} warpgroups need {} threads, the block has {threads}",
                    self.threads()
                ));
            }
            if self.m % (64 * gm) != 0 || self.n % gn != 0 || (self.n / gn) % 8 != 0 {
                return Err(format!(
                    "a {} x {} tile does not split into {gm} x {gn} warpgroup tiles of 64-row \
                     blocks and a multiple of 8 columns",
                    self.m, self.n
                ));
            }
            return Ok(());
        }
        if self.threads() != threads {
            return Err(format!(
                "{} x {} warps need {} threads, the block has {threads}",
                self.warps_m,
                self.warps_n,
                self.threads()
            ));
        }
        // Whole m16n8 tiles per warp (`gemm.rs` loads an odd last n-tile with `ldmatrix.x2`).
        if self.m % (16 * self.warps_m) != 0 || self.n % (8 * self.warps_n) != 0 {
            return Err(format!(
                "a {} x {} tile does not split into {} x {} warp tiles of multiples of 16 x 8",
                self.m, self.n, self.warps_m, self.warps_n
            ));
        }
        Ok(())
    }

    /// The first row and column of thread `tx`'s elements, and the distance between its row
    /// tiles.
    pub fn bases(&self, tx: &Expr) -> (Expr, Expr, i64) {
        if !self.wgmma {
            let (wm, wn) = self.warp_coords(tx);
            return (
                bin(BinOp::Mul, wm, Expr::int(self.warp_m())),
                bin(BinOp::Mul, wn, Expr::int(self.warp_n())),
                16,
            );
        }
        let warp = bin(BinOp::FloorDiv, tx.clone(), Expr::int(WARP_SIZE));
        let group = bin(BinOp::FloorDiv, warp.clone(), Expr::int(4));
        let gm = self.warps_m / 4;
        let row = bin(
            BinOp::Add,
            bin(
                BinOp::Mul,
                bin(BinOp::FloorMod, group.clone(), Expr::int(gm)),
                Expr::int(self.m / gm),
            ),
            bin(
                BinOp::Mul,
                bin(BinOp::FloorMod, warp, Expr::int(4)),
                Expr::int(16),
            ),
        );
        let col = bin(
            BinOp::Mul,
            bin(BinOp::FloorDiv, group, Expr::int(gm)),
            Expr::int(self.warp_n()),
        );
        (row, col, 64)
    }

    /// The index of the warp along M and along N, for thread `tx` (mma.sync placement).
    pub fn warp_coords(&self, tx: &Expr) -> (Expr, Expr) {
        let warp = bin(BinOp::FloorDiv, tx.clone(), Expr::int(WARP_SIZE));
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
    let (row_base, col_base, row_step) = layout.bases(&txe);
    let lane = bin(BinOp::FloorMod, txe.clone(), Expr::int(WARP_SIZE));
    let tile = bin(BinOp::FloorDiv, Expr::var(&it), Expr::int(2));
    let half = bin(BinOp::FloorMod, Expr::var(&it), Expr::int(2));
    let tiles_n = Expr::int(layout.tiles_n());
    // i = row base + (tile / NT) * row step + lane / 4 + 8 * half
    let i = [
        row_base,
        bin(
            BinOp::Mul,
            bin(BinOp::FloorDiv, tile.clone(), tiles_n.clone()),
            Expr::int(row_step),
        ),
        bin(BinOp::FloorDiv, lane.clone(), Expr::int(4)),
        bin(BinOp::Mul, half, Expr::int(8)),
    ]
    .into_iter()
    .reduce(|a, b| bin(BinOp::Add, a, b))
    .unwrap_or_else(|| Expr::int(0));
    // j = column base + (tile % NT) * 8 + 2 * (lane % 4) + v
    let j = [
        col_base,
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
