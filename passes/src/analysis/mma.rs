//! When a `T.gemm` runs on mma.sync: the warp grid of its accumulator, and whether it reads
//! a fragment A straight from registers.
//!
//! **Register A.** The m16n8k16 A fragment of lane `l` (`g = l / 4`, `c = l % 4`) is
//! `a0..a3 = A[g][2c..2c+2], A[g+8][2c..2c+2], A[g][2c+8..2c+10], A[g+8][2c+8..2c+10]` of
//! its 16 x 16 tile — the accumulator slots `c0..c3` of the two 16 x 8 mma tiles that make
//! the 16 x 16 tile up, in that order (`lower_tile_ops/mma_layout.rs`). So a float16 (or
//! bfloat16) fragment `P` laid out as an mma accumulator over `W x 1` warps (every warp
//! holds whole rows) *is* the A operand, register for register, of a gemm whose own
//! accumulator has the same rows over the same `W x 1` warps: k-step `kk` of row tile `mt`
//! is `P`'s slots `4 (mt NT + 2 kk) .. + 8` (`NT = K / 8`). Flash attention's `P`, the
//! float16 copy of the first gemm's float32 scores, is such a fragment when both gemms
//! split M only: the copy converts f32 pairs into f16 pairs in place and nothing moves
//! between threads, where staging `P` would cost a shared tile and two barriers.

use super::block::unit_grid;
use super::wgmma::{plan, register_a_candidate};
use tlc_ir::verifier::const_int;
use tlc_ir::{BufferDecl, DType, Gemm, Layout, Scope, Target, WarpPolicy};

/// The warp grid of a gemm with an `m x n` accumulator on mma.sync
/// (`layout-inference`'s summary): warp tiles of multiples of 16 x 16 where the policy
/// finds some (two n8 mma tiles per B `ldmatrix.x4`), else of 16 x 8 (the m16n8k16 tile
/// itself, TileLang's grain). Where `FullRow` / `FullCol` cannot put every warp along its
/// dimension, TileLang's `ComputeDefaultWarpPartition` takes the most warps along it that
/// fit and the rest along the other ([`one_dim_fallback`]): DeepSeek-V3.2's sparse MLA
/// splits its 64 x 64 scores `FullRow` over 8 warps as 4 x 2.
pub fn warp_partition(policy: WarpPolicy, warps: i64, m: i64, n: i64) -> Option<(i64, i64)> {
    let fits = |n_grain: i64| move |wm: i64, wn: i64| m % (16 * wm) == 0 && n % (n_grain * wn) == 0;
    [16, 8]
        .into_iter()
        .find_map(|n_grain| unit_grid(policy, warps, (m, n), fits(n_grain)))
        .or_else(|| one_dim_fallback(policy, warps, fits(8)))
}

/// TileLang's `FullRow` (`FullCol`) partition when not every warp fits along M (N): the
/// largest `WM` (`WN`) dividing `warps` whose grid `fits`, the other dimension taking the
/// rest. `None` for `Square`, which [`unit_grid`] already searches in full.
pub fn one_dim_fallback(
    policy: WarpPolicy,
    warps: i64,
    fits: impl Fn(i64, i64) -> bool,
) -> Option<(i64, i64)> {
    let along = (1..=warps).rev().filter(|u| warps % u == 0);
    match policy {
        WarpPolicy::FullRow => along
            .map(|wm| (wm, warps / wm))
            .find(|&(wm, wn)| fits(wm, wn)),
        WarpPolicy::FullCol => along
            .map(|wn| (warps / wn, wn))
            .find(|&(wm, wn)| fits(wm, wn)),
        WarpPolicy::Square => None,
    }
}

/// The `W x 1` warp grid of gemm `g` on mma.sync, if that is its grid: the accumulator
/// (2-D, constant, a float32 or float16 fragment) splits over its warps along M only, and
/// wgmma does not take it.
fn rows_only_grid(
    g: &Gemm,
    target: Target,
    threads: i64,
    buffer: &dyn Fn(&str) -> Option<BufferDecl>,
    layout: &dyn Fn(&str) -> Option<Layout>,
) -> Option<(i64, i64)> {
    let c = buffer(&g.c.buffer.name)?;
    if c.scope != Scope::Fragment || !matches!(c.dtype, DType::Float32 | DType::Float16) {
        return None;
    }
    let dims: Option<Vec<i64>> = c.shape.iter().map(const_int).collect();
    let [m, n] = <[i64; 2]>::try_from(dims?).ok()?;
    let warp = target.warp_size();
    if threads <= 0 || threads % warp != 0 {
        return None;
    }
    if plan(g, target, threads, (m, n), buffer, layout).is_ok() {
        return None;
    }
    let warps = threads / warp;
    (warp_partition(g.policy, warps, m, n)? == (warps, 1)).then_some((m, n))
}

/// Whether gemm `g` of a kernel of `threads` threads, on mma.sync, reads its fragment A from
/// registers (see the module summary): A is a whole 2-D float16 / bfloat16 fragment, not
/// transposed, `M x K` with `K` a multiple of 16; `g`'s accumulator splits over the warps
/// along M only; some other gemm of the kernel (`gemms`) accumulates into an `M x K`
/// fragment, and every such gemm splits M only as well (the fragment A is converted from is
/// one of them, and propagation gives A their layout); a layout the user gave A is that
/// one. What `stage-fragment-reads` asks before staging A, what `layout-inference` lays A
/// out by, and what `lower-tile-ops` checks again on the layouts it is given.
pub fn reads_a_from_registers(
    g: &Gemm,
    gemms: &[Gemm],
    target: Target,
    threads: i64,
    buffer: &dyn Fn(&str) -> Option<BufferDecl>,
    layout: &dyn Fn(&str) -> Option<Layout>,
) -> bool {
    let Some(a) = buffer(&g.a.buffer.name) else {
        return false;
    };
    if !register_a_candidate(g, &a) {
        return false;
    }
    let dims: Option<Vec<i64>> = a.shape.iter().map(const_int).collect();
    let Some([m, k]) = dims.and_then(|d| <[i64; 2]>::try_from(d).ok()) else {
        return false;
    };
    let Some((cm, _)) = rows_only_grid(g, target, threads, buffer, layout) else {
        return false;
    };
    let warps = threads / target.warp_size();
    let want = Layout::MmaAccumulator {
        warps_m: warps,
        warps_n: 1,
    };
    if cm != m || k % 16 != 0 || layout(&a.name.name).is_some_and(|l| l != want) {
        return false;
    }
    let shape_of =
        |name: &str| -> Option<Vec<i64>> { buffer(name)?.shape.iter().map(const_int).collect() };
    let producers: Vec<&Gemm> = gemms
        .iter()
        .filter(|o| o.c.buffer.name != g.c.buffer.name)
        .filter(|o| shape_of(&o.c.buffer.name) == Some(vec![m, k]))
        .collect();
    !producers.is_empty()
        && producers
            .iter()
            .all(|o| rows_only_grid(o, target, threads, buffer, layout).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_take_16_x_8_only_where_16_x_16_does_not_fit() {
        use WarpPolicy::*;
        // 16 x 16 multiples where they fit, as before.
        assert_eq!(warp_partition(Square, 4, 128, 128), Some((2, 2)));
        assert_eq!(warp_partition(FullCol, 8, 64, 512), Some((1, 8)));
        // MLA's scores: 64 columns over 8 warps side by side are 8 columns each.
        assert_eq!(warp_partition(FullCol, 8, 64, 64), Some((1, 8)));
        // Square keeps a 16 x 16 grid even where a squarer 16 x 8 one ((2, 2)) exists.
        assert_eq!(warp_partition(Square, 4, 64, 32), Some((4, 1)));
        assert_eq!(warp_partition(Square, 4, 16, 32), Some((1, 4)));
        // Not every warp fits along the policy's dimension: TileLang's fallback, the most
        // warps along it that fit (16 x 8 grain), the rest along the other.
        assert_eq!(warp_partition(FullCol, 8, 64, 32), Some((2, 4)));
        assert_eq!(warp_partition(FullRow, 8, 64, 64), Some((4, 2)));
        assert_eq!(warp_partition(FullRow, 8, 64, 512), Some((4, 2)));
        assert_eq!(warp_partition(FullRow, 4, 16, 16), None);
    }
}
