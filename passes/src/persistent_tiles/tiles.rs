//! The tiles of a persistent warp-specialized pipeline: instead of one block per output tile, the
//! grid is `P = SMs × blocks per SM` blocks and each walks the tiles `b, b + P, b + 2P, …`
//! (in the `T.use_swizzle` order), its producer and consumers each looping over them. The
//! two mbarrier rings run on across tiles: fill `f = i·nk + (k - start)` of the block's
//! `i`-th tile (`nk` k-tiles per tile) goes to stage `(f + start) % S` (k-tile `k`'s stage
//! index `E = k % S` becomes `(E + i·nk) % S`), so the producer fills the next tile's first
//! stages while the consumers still compute — or store — the last one:
//!
//! ```python
//! for i in T.serial((tiles - 1 - b) // P + 1):     # both roles
//!     t = b + i * P; bx, by = <tile t, rasterized>
//!     <the role's code, every stage index E of a stage buffer, `full` or `empty` read as
//!      (E + i * nk) % S, the parities f // S % 2; every fill first waits its stage's
//!      `empty` for phase (f - S) // S when f >= S>
//! ```
//!
//! - Why the parities: fill `f` is the `f // S`-th of its stage, as in `warp-specialize`'s
//!   schedule with `f` counted over the block's whole run instead of one tile.
//! - When: warp specialization applies, the pipeline and the code the consumers took around
//!   it are the whole kernel (nothing else reads the block indices), the k-loop's bounds do
//!   not depend on the tile (the same `nk` for every tile), the grid is constant and 1-D or
//!   2-D, and there are more tiles than `P` (else every block has one tile anyway).
//!   With a group in flight the consumers also release the tile's last stage after their
//!   loop, since the next tile's fills wait for it.

use crate::analysis::raster;
use crate::names::NameSet;
use tlc_ir::build::{bin, elem, intrinsic};
use tlc_ir::verifier::const_int;
use tlc_ir::visit::map_body_exprs;
use tlc_ir::{BinOp, Expr, ExprKind, For, ForKind, Ident, Intrinsic, RasterOrder, Span, Stmt};
use tlc_ir::{StmtKind, Swizzle};

/// The grid a persistent kernel walks.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Tiles {
    /// The original grid's extents (x, then y when 2-D) and block variables.
    pub grid: Vec<i64>,
    pub vars: Vec<String>,
    /// `T.use_swizzle`: panel size (> 0) and order, for a 2-D grid.
    pub raster: Option<(i64, RasterOrder)>,
    /// Blocks launched: `P`.
    pub blocks: i64,
    /// Blocks per cluster along x and y (`[1, 1]`: none). A cluster walks whole clusters'
    /// worth of tiles: the `(gx / cx) × (gy / cy)` grid of units is walked (and rasterized)
    /// by the `P / C` clusters, and block `r` of a cluster plays block `(r % cx, r / cx)` of
    /// its unit — so the blocks of a cluster always hold neighbouring tiles, as they would
    /// launched one tile each, and share what those share.
    pub cluster: [i64; 2],
}

impl Tiles {
    /// The persistent grid of a kernel with `grid` / `vars` / `swizzle`, at `per_sm`
    /// blocks per SM on `sms` SMs: `Ok(None)` when the grid is not a constant 1-D / 2-D one
    /// or has no more tiles than blocks (nothing to gain); `Err(why)` when it has more but
    /// the k-loop (`loop_bounds`) depends on the tile.
    pub fn plan(
        grid: &[Expr],
        vars: &[Ident],
        (swizzle, cluster): (Option<&Swizzle>, [i64; 3]),
        (sms, per_sm): (i64, i64),
        loop_bounds: [&Expr; 2],
    ) -> Result<Option<Tiles>, String> {
        let Some(extents) = grid.iter().map(const_int).collect::<Option<Vec<i64>>>() else {
            return Ok(None);
        };
        if extents.is_empty() || extents.len() > 2 || vars.len() != extents.len() {
            return Ok(None);
        }
        let [cx, cy, cz] = cluster;
        let c = cx * cy;
        let whole_units = extents
            .iter()
            .zip([cx, cy])
            .all(|(&g, c)| c >= 1 && g % c == 0);
        if cz != 1 || !whole_units || (extents.len() == 1 && cy != 1) {
            return Ok(None);
        }
        let (Some(tiles), Some(blocks)) = (
            extents.iter().try_fold(1i64, |a, &g| a.checked_mul(g)),
            sms.checked_mul(per_sm).map(|b| b / c * c),
        ) else {
            return Ok(None);
        };
        if tiles <= blocks || blocks < 1 {
            return Ok(None);
        }
        // Every tile must run the same k-loop: the fill count of a tile is `nk` for all.
        let per_tile = |e: &Expr| {
            let mut varies = false;
            tlc_ir::visit::for_each_subexpr(e, &mut |x| match &x.kind {
                ExprKind::Var(n) => varies |= vars.iter().any(|v| v.name == *n),
                ExprKind::Load { .. } => varies = true,
                _ => {}
            });
            varies
        };
        if loop_bounds.into_iter().any(per_tile) {
            return Err(format!(
                "more tiles ({tiles}) than blocks ({blocks}), but the k-loop's bounds depend \
                 on the tile"
            ));
        }
        let raster = swizzle
            .and_then(|s| const_int(&s.panel_size).map(|p| (p, s.order)))
            .filter(|(p, _)| *p > 0 && extents.len() == 2);
        Ok(Some(Tiles {
            grid: extents,
            vars: vars.iter().map(|v| v.name.clone()).collect(),
            raster,
            blocks,
            cluster: [cx, cy],
        }))
    }

    /// Blocks per cluster.
    pub fn cluster_size(&self) -> i64 {
        self.cluster[0] * self.cluster[1]
    }

    /// The units the clusters walk (tiles, without clusters), along x and y.
    fn units(&self) -> Vec<i64> {
        self.grid
            .iter()
            .zip(self.cluster)
            .map(|(&g, c)| g / c)
            .collect()
    }

    fn count(&self) -> i64 {
        self.units().iter().product()
    }

    /// `body` (one role's code for one tile, using the block variables) run for each of the
    /// block's tiles: `for i in T.serial(n): let t = …; <the tile's indices>; body`. `i`
    /// names the loop variable; the block's hardware index is the first block variable.
    pub fn tile_loop(&self, i: &str, mut body: Vec<Stmt>, names: &mut NameSet, span: Span) -> Stmt {
        let c = self.cluster_size();
        // The walker: the block, or its cluster (`b // C`, the same in all its blocks).
        let hw = Expr::var(&self.vars[0]);
        let b = if c > 1 {
            bin(BinOp::FloorDiv, hw.clone(), Expr::int(c))
        } else {
            hw.clone()
        };
        let walkers = self.blocks / c;
        let t = names.fresh("tile");
        let mut lets = vec![(
            t.clone(),
            bin(
                BinOp::Add,
                b.clone(),
                bin(BinOp::Mul, Expr::var(i), Expr::int(walkers)),
            ),
        )];
        let mut played: Vec<String> = Vec::new();
        let units = self.units();
        if let [gx, gy] = units[..] {
            let (x0, y0) = (names.fresh("tile_x"), names.fresh("tile_y"));
            lets.push((
                x0.clone(),
                bin(BinOp::FloorMod, Expr::var(&t), Expr::int(gx)),
            ));
            lets.push((
                y0.clone(),
                bin(BinOp::FloorDiv, Expr::var(&t), Expr::int(gx)),
            ));
            match self.raster {
                Some((panel, order)) => {
                    let r = raster::remap(
                        (&x0, &y0),
                        (&Expr::int(gx), &Expr::int(gy)),
                        panel,
                        order,
                        names,
                    );
                    lets.extend(r.lets);
                    played = vec![r.x, r.y];
                }
                None => played = vec![x0, y0],
            }
        } else {
            played.push(t.clone());
        }
        // Block `r` of the cluster plays block `(r % cx, r / cx)` of the unit.
        if c > 1 {
            let r = bin(BinOp::FloorMod, hw.clone(), Expr::int(c));
            let [cx, cy] = self.cluster;
            let within = [
                bin(BinOp::FloorMod, r.clone(), Expr::int(cx)),
                bin(BinOp::FloorDiv, r, Expr::int(cx)),
            ];
            for ((name, cl), offset) in played.iter_mut().zip([cx, cy]).zip(within) {
                if cl == 1 {
                    continue;
                }
                let block = names.fresh(&format!("{name}_block"));
                lets.push((
                    block.clone(),
                    bin(
                        BinOp::Add,
                        bin(BinOp::Mul, Expr::var(name.as_str()), Expr::int(cl)),
                        offset,
                    ),
                ));
                *name = block;
            }
        }
        let vars = self.vars.clone();
        map_body_exprs(&mut body, &mut |e| match &e.kind {
            ExprKind::Var(n) => match vars.iter().position(|v| v == n) {
                Some(k) => Expr::new(ExprKind::Var(played[k].clone()), e.span),
                None => e,
            },
            _ => e,
        });
        let mut inner: Vec<Stmt> = lets
            .into_iter()
            .map(|(name, value)| {
                Stmt::new(
                    StmtKind::Let {
                        var: Ident::new(name, span),
                        dtype: None,
                        value,
                    },
                    span,
                )
            })
            .collect();
        inner.append(&mut body);
        // (tiles - 1 - b) // P + 1 tiles for block b < P <= tiles (units and clusters).
        let n = bin(
            BinOp::Add,
            bin(
                BinOp::FloorDiv,
                bin(BinOp::Sub, Expr::int(self.count() - 1), b),
                Expr::int(walkers),
            ),
            Expr::int(1),
        );
        Stmt::new(
            StmtKind::For(For {
                var: Ident::new(i, span),
                start: Expr::int(0),
                stop: n,
                kind: ForKind::Serial,
                body: inner,
            }),
            span,
        )
    }
}

/// Every access of `body` to a buffer of `bufs` (stage buffers, the `full` and `empty`
/// rings, all with the stage first) reads stage `(E + base) % stages` instead of `E`.
pub(crate) fn offset_stages(body: &mut [Stmt], bufs: &[String], base: &Expr, stages: i64) {
    let shift = |first: &mut Expr| {
        *first = bin(
            BinOp::FloorMod,
            bin(BinOp::Add, first.clone(), base.clone()),
            Expr::int(stages),
        );
    };
    map_body_exprs(body, &mut |mut e| {
        if let ExprKind::Load { buffer, indices } = &mut e.kind {
            if bufs.contains(buffer) {
                if let Some(first) = indices.first_mut() {
                    shift(first);
                }
            }
        }
        e
    });
    for_each_intrinsic_mut(body, &mut |i| {
        for r in i.refs_mut() {
            if bufs.contains(&r.buffer.name) {
                if let Some(first) = r.indices.first_mut() {
                    shift(first);
                }
            }
        }
    });
}

/// Before every `T.mbarrier_arrive_expect_tx` of `body` (a stage's fill, `f = base + rel`
/// over the block's run, into the stage its `full` barrier names — stages already offset,
/// so `(f + start) % S`), the wait for that stage's release of fill `f - S`:
/// `if f >= S: T.mbarrier_wait(empty[stage], (f - S) // S % 2)`.
pub(crate) fn wait_before_fills(
    body: Vec<Stmt>,
    empty: &str,
    fill: &Expr,
    stages: i64,
    span: Span,
) -> Vec<Stmt> {
    let mut out = Vec::with_capacity(body.len());
    for mut s in body {
        if let StmtKind::Intrinsic(Intrinsic::MbarrierArriveExpectTx { bar, .. }) = &s.kind {
            // The stage this fill writes: the arrive's `full` barrier's index.
            let stage = bar
                .indices
                .first()
                .cloned()
                .unwrap_or_else(|| bin(BinOp::FloorMod, fill.clone(), Expr::int(stages)));
            let s_ = Expr::int(stages);
            out.push(Stmt::new(
                StmtKind::If {
                    cond: bin(BinOp::Ge, fill.clone(), s_.clone()),
                    then_body: vec![intrinsic(
                        Intrinsic::MbarrierWait {
                            bar: elem(empty, vec![stage], span),
                            parity: bin(
                                BinOp::FloorMod,
                                bin(
                                    BinOp::FloorDiv,
                                    bin(BinOp::Sub, fill.clone(), s_.clone()),
                                    s_,
                                ),
                                Expr::int(2),
                            ),
                        },
                        span,
                    )],
                    else_body: Vec::new(),
                },
                span,
            ));
        }
        for child in tlc_ir::visit::child_bodies_mut(&mut s) {
            *child = wait_before_fills(std::mem::take(child), empty, fill, stages, span);
        }
        out.push(s);
    }
    out
}

fn for_each_intrinsic_mut(body: &mut [Stmt], f: &mut dyn FnMut(&mut Intrinsic)) {
    for s in body {
        if let StmtKind::Intrinsic(i) = &mut s.kind {
            f(i);
        }
        for child in tlc_ir::visit::child_bodies_mut(s) {
            for_each_intrinsic_mut(child, f);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grid(g: &[i64]) -> (Vec<Expr>, Vec<Ident>) {
        let vars = ["bx", "by"][..g.len()]
            .iter()
            .map(|v| Ident::new(*v, Span::DUMMY))
            .collect();
        (g.iter().map(|&x| Expr::int(x)).collect(), vars)
    }

    #[test]
    fn persistent_only_with_more_tiles_than_blocks() {
        let (g, v) = grid(&[16, 32]);
        let (zero, k) = (Expr::int(0), Expr::int(32));
        let t = Tiles::plan(&g, &v, (None, [1, 1, 1]), (132, 2), [&zero, &k])
            .ok()
            .flatten()
            .expect("512 tiles, 264 blocks");
        assert_eq!((t.blocks, t.count()), (264, 512));
        // A k-loop whose length depends on the tile (a triangular GEMM) stays per tile.
        let by_plus_one = bin(BinOp::Add, Expr::var("by"), Expr::int(1));
        let refused = Tiles::plan(&g, &v, (None, [1, 1, 1]), (132, 2), [&zero, &by_plus_one]);
        assert!(refused
            .expect_err("tile-dependent")
            .contains("depend on the tile"));
        let (g, v) = grid(&[8, 8]);
        assert_eq!(
            Tiles::plan(&g, &v, (None, [1, 1, 1]), (132, 1), [&zero, &k]),
            Ok(None)
        );
        let (g, v) = grid(&[1000]);
        let one_d =
            Tiles::plan(&g, &v, (None, [1, 1, 1]), (4, 1), [&zero, &k]).map(|t| t.map(|t| t.grid));
        assert_eq!(one_d, Ok(Some(vec![1000])));
        let symbolic = vec![Expr::var("N")];
        assert_eq!(
            Tiles::plan(&symbolic, &v[..1], (None, [1, 1, 1]), (4, 1), [&zero, &k]),
            Ok(None)
        );
    }

    #[test]
    fn clusters_walk_whole_units() {
        let (g, v) = grid(&[16, 32]);
        let (zero, k) = (Expr::int(0), Expr::int(32));
        // Clusters of two along y: 16 x 16 units of two tiles, 131 SMs -> 130 blocks (65
        // clusters of two).
        let t = Tiles::plan(&g, &v, (None, [1, 2, 1]), (131, 1), [&zero, &k])
            .ok()
            .flatten()
            .expect("512 tiles, 130 blocks");
        assert_eq!((t.blocks, t.count(), t.cluster_size()), (130, 256, 2));
        // A grid that is not whole clusters, or a cluster along z, stays as it is.
        let (g15, v15) = grid(&[15, 32]);
        assert_eq!(
            Tiles::plan(&g15, &v15, (None, [2, 1, 1]), (132, 1), [&zero, &k]),
            Ok(None)
        );
        assert_eq!(
            Tiles::plan(&g, &v, (None, [1, 1, 2]), (132, 1), [&zero, &k]),
            Ok(None)
        );
        // Each cluster's blocks hold the two tiles of one unit: b // 2 walks, b % 2 is the row.
        let func = tlc_ir::parse("@T.prim_func\ndef f(A: T.Tensor((4,), \"float32\")):\n    with T.Kernel(1, threads=32) as bx:\n        A[0] = 1.0\n")
            .expect("parses");
        let loop_ = t.tile_loop("i", Vec::new(), &mut NameSet::of(&func), Span::DUMMY);
        let StmtKind::For(f) = &loop_.kind else {
            panic!("a loop")
        };
        let cluster = || bin(BinOp::FloorDiv, Expr::var("bx"), Expr::int(2));
        let trips = bin(
            BinOp::Add,
            bin(
                BinOp::FloorDiv,
                bin(BinOp::Sub, Expr::int(255), cluster()),
                Expr::int(65),
            ),
            Expr::int(1),
        );
        assert_eq!(f.stop, trips);
        let lets: Vec<(&str, &Expr)> = f
            .body
            .iter()
            .filter_map(|s| match &s.kind {
                StmtKind::Let { var, value, .. } => Some((var.name.as_str(), value)),
                _ => None,
            })
            .collect();
        let tile = bin(
            BinOp::Add,
            cluster(),
            bin(BinOp::Mul, Expr::var("i"), Expr::int(65)),
        );
        assert_eq!(lets.first().map(|l| l.1), Some(&tile));
        // Only y has two blocks per unit: the row is the unit's row times two plus the rank.
        let rows: Vec<&(&str, &Expr)> = lets.iter().filter(|l| l.0.ends_with("_block")).collect();
        assert_eq!(rows.len(), 1, "{lets:?}");
        let ExprKind::Binary(BinOp::Add, _, offset) = &rows[0].1.kind else {
            panic!("{rows:?}")
        };
        let rank = bin(BinOp::FloorMod, Expr::var("bx"), Expr::int(2));
        assert_eq!(**offset, bin(BinOp::FloorDiv, rank, Expr::int(1)));
    }
}
