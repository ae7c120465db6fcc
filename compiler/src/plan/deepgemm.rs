//! DeepGEMM's configuration heuristic for its normal FP8 GEMM, exactly: what
//! `get_best_configs(m, n, k, num_groups, num_sms)` in `deep_gemm/jit_kernels/gemm.py`
//! (seed 004, DeepGEMM as of 2025-05-14) returns when the GEMM is neither grouped
//! (contiguous or masked), nor fp32-out, nor a weight gradient. It runs nothing: every choice
//! follows from the shape and the SM count.
//!
//! The kernel: FP8 A (M×K) and B (N×K) with 1×128 and 128×128 scales, BF16 D (M×N); a block
//! computes a `block_m × block_n` tile of D over `block_k = 128` slices of K in a pipeline
//! of `num_stages` shared-memory stages, and a cluster of `num_tma_multicast` blocks may
//! share one TMA load of A or of B. The rules, in the seed's order:
//!
//! 1. **Block sizes** (`best_blocks`). Candidates: `block_m` ∈ {64, 128, 256} (outer loop),
//!    `block_n` ∈ {16, 24, …, 128, 144, 160} (inner loop), except that a 256-row block
//!    takes only `block_n ≤ 128` ("at least one dim less than 128"). With
//!    `tiles = ⌈m/block_m⌉·⌈n/block_n⌉·num_groups`, a candidate has `waves =
//!    ⌈tiles/num_sms⌉` and last-wave utilisation `util = tiles mod num_sms`, or `num_sms`
//!    when that is 0 (a full last wave). In loop order a candidate replaces the best so far
//!    when it has fewer waves; or as many waves and a higher `util`; or as many waves, the
//!    same `util`, and one of: the same `block_m` and a smaller `block_n`, the same
//!    `block_n` and a smaller `block_m` (both: the same tile count with less waste), or both
//!    sizes different and a larger `block_n`.
//! 2. **Stages** (`best_stages`). The most stages, from 8 down to 1, but no more than
//!    `max(k / 128, 1)` (integer division: no deeper than there are full K slices), whose
//!    shared memory fits sm_90's 232448 bytes (`Target::Sm90a`'s `max_shared_bytes`: the
//!    same number, 227 KiB, the opt-in maximum per block). For `block_n` 96 and 160 (the
//!    candidates with `128 mod block_n ≠ 0` and `128 / gcd(128, block_n) ≤ 4`) the
//!    candidates stop at 4 (the seed: unrolling both the stages and the B-scale iterations
//!    makes the code too large). When not even one stage fits (a K so long that its B
//!    scales fill shared memory) the seed asserts; this module returns
//!    [`PlanError::NoStageFits`].
//! 3. **Shared memory** (`smem_config`, the seed's `get_smem_config`): the D tile
//!    `block_m·(block_n + padding)·2` bytes (BF16), per stage A `block_m·128`, A's scales
//!    `block_m·4`, B `block_n·128` bytes, all of B's scales for the K loop
//!    `⌈k/128⌉·4` bytes (twice that when `block_n` does not divide 128: a tile then straddles
//!    two scale blocks), rounded up to 8, and two 8-byte barriers per stage. The D tile's
//!    TMA store swizzle is the largest of 128, 64, 32 bytes that divides a row
//!    (`block_n·2` bytes; 0 when none does); only without a swizzle is the row padded, by
//!    the seed's bank-conflict formula `((4 − block_n·2/4) mod 8)·4/2` elements. (For every
//!    `block_n` candidate here that padding is 0: a row without a swizzle has `block_n ≡ 8
//!    (mod 16)`, so `block_n·2/4 ≡ 4 (mod 8)`.)
//! 4. **TMA multicast** (`multicast`): none (`(1, on A)`) unless `m ≥ 512` and a
//!    multicast of 2 is legal; then 2, on A when `block_m > block_n` (the larger block side
//!    first), else on B. The seed's legality test is `num_sms mod 2 = 0`, plus a
//!    divisibility of the tile count along the side that only grouped masked GEMMs require:
//!    for this GEMM both sides are legal exactly when the SM count is even, whatever the
//!    tile counts.
//! 5. **SMs** (`num_sms` of [`Config`]): the fewest that keep the same number of waves,
//!    `⌈tiles/waves⌉`, rounded up to a multiple of the multicast (the seed: less L2 use and
//!    less frequency drop). It never exceeds the given SM count (the seed asserts that;
//!    [`PlanError::TooFewSms`] if it did).

use super::waves::Waves;
use std::num::NonZeroU128;
use tlc_ir::Target;

/// The K extent of one pipeline stage (the seed's `block_k`, asserted to be 128).
const BLOCK_K: u64 = 128;

/// The `block_m` candidates, in the seed's order.
const BLOCK_MS: [u32; 3] = [64, 128, 256];

/// The `block_n` candidates, in the seed's order: 16 to 128 by 8, then 144 and 160.
fn block_ns() -> impl Iterator<Item = u32> {
    (16..=128).step_by(8).chain([144, 160])
}

/// The stage candidates, most first, before the `max(k / 128, 1)` cap.
const STAGES: [u32; 8] = [8, 7, 6, 5, 4, 3, 2, 1];
/// The stage candidates for a `block_n` of 96 or 160 (rule 2).
const FEW_STAGES: [u32; 4] = [4, 3, 2, 1];

/// Multicast is tried only from this many rows of A on.
const MULTICAST_MIN_M: u32 = 512;

/// One GEMM to plan: `num_groups` GEMMs of `m × n × k` (the seed's normal GEMM has one)
/// on a GPU of `num_sms` SMs. Every field must be positive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Problem {
    pub m: u32,
    pub n: u32,
    pub k: u32,
    pub num_groups: u32,
    pub num_sms: u32,
}

/// What the heuristic chooses: the seed's `(num_min_sms, block_m, block_n, num_stages,
/// (num_tma_multicast, multicast_on_a), (smem_size, swizzle_mode, block_n_padding))`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    pub block_m: u32,
    pub block_n: u32,
    pub num_stages: u32,
    /// Blocks per cluster sharing one TMA load: 1 or 2.
    pub num_tma_multicast: u32,
    /// Which operand the multicast shares (true: A). `true` also when there is no
    /// multicast, as the seed's default `(1, True)` has it.
    pub multicast_on_a: bool,
    /// The SMs to launch on (the seed's `num_min_sms`).
    pub num_sms: u32,
    /// Dynamic shared memory per block, in bytes.
    pub smem_size: u64,
    /// The D tile's TMA swizzle in bytes: 128, 64, 32, or 0 for none.
    pub swizzle_mode: u32,
    /// Elements of padding per D row in shared memory (only without a swizzle).
    pub block_n_padding: u32,
}

impl Config {
    /// One JSON object with the nine fields, in declaration order, on one line (the
    /// output of `tlc plan --deepgemm`).
    pub fn to_json(&self) -> String {
        format!(
            "{{\"block_m\": {}, \"block_n\": {}, \"num_stages\": {}, \"num_tma_multicast\": {}, \
             \"multicast_on_a\": {}, \"num_sms\": {}, \"smem_size\": {}, \"swizzle_mode\": {}, \
             \"block_n_padding\": {}}}",
            self.block_m,
            self.block_n,
            self.num_stages,
            self.num_tma_multicast,
            self.multicast_on_a,
            self.num_sms,
            self.smem_size,
            self.swizzle_mode,
            self.block_n_padding,
        )
    }
}

/// Where the seed would `assert` (or divide by zero).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlanError {
    /// A field of the [`Problem`] is 0.
    Zero { field: &'static str },
    /// Not even one pipeline stage fits in shared memory.
    NoStageFits {
        block_m: u32,
        block_n: u32,
        k: u32,
        /// The shared memory one stage needs.
        smem_size: u64,
        capacity: u64,
    },
    /// The SMs needed exceed the SMs given (cannot happen: see rule 5; kept so that the
    /// seed's assertion is an error here too, never a wrong answer).
    TooFewSms { needed: u128, num_sms: u32 },
}

impl std::fmt::Display for PlanError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PlanError::Zero { field } => write!(f, "`{field}` must be at least 1"),
            PlanError::NoStageFits {
                block_m,
                block_n,
                k,
                smem_size,
                capacity,
            } => write!(
                f,
                "no pipeline stage fits in shared memory: the {block_m}x{block_n} block with \
                 K = {k} needs {smem_size} bytes with one stage (B's scales for the whole K \
                 loop included), over the {capacity} bytes of sm_90a"
            ),
            PlanError::TooFewSms { needed, num_sms } => write!(
                f,
                "the chosen configuration needs {needed} SMs, more than the {num_sms} given"
            ),
        }
    }
}

/// DeepGEMM's `get_best_configs` for the normal FP8 GEMM (the module's rules 1 to 5).
pub fn best_config(p: &Problem) -> Result<Config, PlanError> {
    for (field, value) in [
        ("m", p.m),
        ("n", p.n),
        ("k", p.k),
        ("num_groups", p.num_groups),
        ("num_sms", p.num_sms),
    ] {
        if value == 0 {
            return Err(PlanError::Zero { field });
        }
    }
    let (block_m, block_n) = best_blocks(p);
    let (num_stages, smem) = best_stages(p.k, block_m, block_n)?;
    let (num_tma_multicast, multicast_on_a) = multicast(p, block_m, block_n);
    let waves = waves_of(p, block_m, block_n);
    let multicast_sms = u128::from(num_tma_multicast);
    let needed = waves.blocks.div_ceil(waves.waves).div_ceil(multicast_sms) * multicast_sms;
    let num_sms = u32::try_from(needed)
        .ok()
        .filter(|&s| s <= p.num_sms)
        .ok_or(PlanError::TooFewSms {
            needed,
            num_sms: p.num_sms,
        })?;
    Ok(Config {
        block_m,
        block_n,
        num_stages,
        num_tma_multicast,
        multicast_on_a,
        num_sms,
        smem_size: smem.size,
        swizzle_mode: smem.swizzle_mode,
        block_n_padding: smem.block_n_padding,
    })
}

/// A candidate block's tiles and waves on the problem's SMs (rule 1; the arithmetic is
/// `super::waves`). Every field of a [`Problem`] is checked positive before this is used.
fn waves_of(p: &Problem, block_m: u32, block_n: u32) -> Waves {
    let tiles = u128::from(p.m.div_ceil(block_m))
        * u128::from(p.n.div_ceil(block_n))
        * u128::from(p.num_groups);
    // `best_config` refused `num_sms = 0` first; the fallback is never taken.
    let sms = NonZeroU128::new(u128::from(p.num_sms)).unwrap_or(NonZeroU128::MIN);
    Waves::of(tiles, sms)
}

/// Rule 1: the block sizes with the fewest waves, then the best last wave, then the seed's
/// tie-breaks, visiting candidates in the seed's order.
fn best_blocks(p: &Problem) -> (u32, u32) {
    let candidates = BLOCK_MS.iter().flat_map(|&block_m| {
        block_ns()
            .filter(move |&block_n| block_m <= 128 || block_n <= 128)
            .map(move |block_n| (block_m, block_n))
    });
    let mut best = (BLOCK_MS[0], 16);
    for (block_m, block_n) in candidates {
        let (best_m, best_n) = best;
        let (new, old) = (waves_of(p, block_m, block_n), waves_of(p, best_m, best_n));
        let better = if new.waves != old.waves {
            new.waves < old.waves
        } else if new.last_wave_util != old.last_wave_util {
            new.last_wave_util > old.last_wave_util
        } else {
            (block_m == best_m && block_n < best_n)
                || (block_n == best_n && block_m < best_m)
                || (block_m != best_m && block_n > best_n)
        };
        if better {
            best = (block_m, block_n);
        }
    }
    best
}

/// Rule 2: the most stages that fit, with their shared-memory configuration.
fn best_stages(k: u32, block_m: u32, block_n: u32) -> Result<(u32, SmemConfig), PlanError> {
    let cap = (k / 128).max(1);
    let candidates: &[u32] = if 128 % block_n != 0 && 128 / gcd(128, block_n) <= 4 {
        &FEW_STAGES
    } else {
        &STAGES
    };
    // The seed's `sm90_capacity`: the opt-in shared memory of one sm_90 block. A positive
    // constant, so the cast is exact.
    let capacity = Target::Sm90a.max_shared_bytes() as u64;
    for &num_stages in candidates.iter().filter(|&&s| s <= cap) {
        let smem = smem_config(num_stages, k, block_m, block_n);
        if smem.size <= capacity {
            return Ok((num_stages, smem));
        }
    }
    Err(PlanError::NoStageFits {
        block_m,
        block_n,
        k,
        smem_size: smem_config(1, k, block_m, block_n).size,
        capacity,
    })
}

/// The seed's `get_smem_config` result: bytes, D's swizzle, D's row padding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct SmemConfig {
    size: u64,
    swizzle_mode: u32,
    block_n_padding: u32,
}

/// Rule 3: shared memory of the normal FP8 GEMM (BF16 D, no per-stage B scales).
fn smem_config(num_stages: u32, k: u32, block_m: u32, block_n: u32) -> SmemConfig {
    let swizzle_mode = swizzle_mode(block_n);
    let block_n_padding = if swizzle_mode == 0 {
        block_n_padding(block_n)
    } else {
        0
    };
    let (stages, bm, bn) = (
        u64::from(num_stages),
        u64::from(block_m),
        u64::from(block_n),
    );
    let smem_d = bm * (bn + u64::from(block_n_padding)) * 2;
    let per_stage_a = bm * BLOCK_K;
    let per_stage_scales_a = bm * 4;
    let per_stage_b = bn * BLOCK_K;
    let scales_b = u64::from(k).div_ceil(BLOCK_K) * 4;
    let scales_b_copies = if BLOCK_K.is_multiple_of(bn) { 1 } else { 2 };
    let barriers = stages * 8 * 2;
    let size = smem_d
        + stages * (per_stage_a + per_stage_scales_a + per_stage_b)
        + (scales_b * scales_b_copies).div_ceil(8) * 8
        + barriers;
    SmemConfig {
        size,
        swizzle_mode,
        block_n_padding,
    }
}

/// The largest of 128, 64, 32 bytes that divides a BF16 row of `block_n`; 0 for none.
fn swizzle_mode(block_n: u32) -> u32 {
    let row_bytes = block_n * 2;
    [128, 64, 32]
        .into_iter()
        .find(|&mode| row_bytes.is_multiple_of(mode))
        .unwrap_or(0)
}

/// The seed's bank-conflict padding of an unswizzled D row, in elements: the row's stride in
/// 4-byte banks brought to 4 modulo 8.
fn block_n_padding(block_n: u32) -> u32 {
    let bank_stride = i64::from(block_n) * 2 / 4;
    // Python's `%` with a positive divisor is never negative: `rem_euclid`. (The seed's
    // `if padding < 0` branch is therefore dead.)
    let padding = (4 - bank_stride).rem_euclid(8);
    // 0 ≤ padding < 8, so the element count is below 16.
    (padding as u32) * 4 / 2
}

/// Rule 4: `(num_tma_multicast, multicast_on_a)`.
fn multicast(p: &Problem, block_m: u32, block_n: u32) -> (u32, bool) {
    // The seed's `is_tma_multicast_legal(_, _, 2, num_sms)` without `require_divisible`
    // (only grouped masked GEMMs pass it), the same for both sides.
    let legal = p.num_sms.is_multiple_of(2);
    if p.m >= MULTICAST_MIN_M && legal {
        (2, block_m > block_n)
    } else {
        (1, true)
    }
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

#[cfg(test)]
mod tests {
    //! Rows checked by hand against the module's rules (the integration test
    //! `tools/tests/plan_deepgemm.rs` compares many more with a Python transcription of
    //! the seed).
    use super::*;

    fn plan(m: u32, n: u32, k: u32, num_groups: u32, num_sms: u32) -> Result<Config, PlanError> {
        best_config(&Problem {
            m,
            n,
            k,
            num_groups,
            num_sms,
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn config(
        block_m: u32,
        block_n: u32,
        num_stages: u32,
        num_tma_multicast: u32,
        multicast_on_a: bool,
        num_sms: u32,
        smem_size: u64,
        swizzle_mode: u32,
    ) -> Config {
        Config {
            block_m,
            block_n,
            num_stages,
            num_tma_multicast,
            multicast_on_a,
            num_sms,
            smem_size,
            swizzle_mode,
            block_n_padding: 0,
        }
    }

    /// M = N = 4096, K = 7168 on 132 SMs.
    /// 1. Tiles: 256×128 gives 16·32 = 512 tiles, ⌈512/132⌉ = 4 waves. Four waves hold at
    ///    most 528 tiles; every other candidate has more (256×120: 16·35 = 560; 128×160:
    ///    32·26 = 832), so 256×128 alone has the fewest waves.
    /// 2. Stages: 128 mod 128 = 0, so 8 down to 1, capped at 7168/128 = 56. Shared bytes:
    ///    D 256·128·2 = 65536, B scales ⌈7168/128⌉·4 = 224, and per stage A 256·128 = 32768,
    ///    A scales 256·4 = 1024, B 128·128 = 16384 and barriers 16, 50192 in all: 65760 +
    ///    50192·s, which is 216336 at s = 3 (≤ 232448) and 266528 at s = 4.
    /// 3. Swizzle: a row is 256 bytes, a multiple of 128.
    /// 4. M ≥ 512 and 132 is even: multicast 2, on A since 256 > 128.
    /// 5. SMs: ⌈512/4⌉ = 128, already a multiple of 2.
    #[test]
    fn square_4096_with_k_7168() {
        assert_eq!(
            plan(4096, 4096, 7168, 1, 132),
            Ok(config(256, 128, 3, 2, true, 128, 216_336, 128))
        );
    }

    /// The same on 131 SMs: 512 tiles are still ⌈512/131⌉ = 4 waves (524 ≥ 512) and no
    /// other candidate fits in 4, but an odd SM count forbids multicast: (1, on A).
    #[test]
    fn an_odd_sm_count_forbids_multicast() {
        assert_eq!(
            plan(4096, 4096, 7168, 1, 131),
            Ok(config(256, 128, 3, 1, true, 128, 216_336, 128))
        );
    }

    /// M = 512, N = 1536, K = 7168 on 132 SMs.
    /// 1. One wave holds 132 tiles. 64×96: 8·16 = 128 tiles (util 128). No candidate has 129
    ///    to 132 tiles (8·17 is too many; 4·33 needs `block_n` = 47; 2·65 and 2·66 need
    ///    ⌈1536/`block_n`⌉ of 65 or 66, which no multiple of 8 gives: 24 gives 64), so 128
    ///    is the best util. Its later ties — 128×48 (4·32)
    ///    and 256×24 (2·64) — change both sizes and have a smaller `block_n`: 64×96 stays.
    /// 2. 128 mod 96 ≠ 0 and 128/gcd(128, 96) = 4 ≤ 4: stages 4 down to 1. At 4: D 64·96·2 =
    ///    12288, per stage 8192 + 256 + 12288 = 20736 (·4 = 82944), B scales 56·4 = 224 twice
    ///    (96 does not divide 128) = 448, barriers 64: 95744.
    /// 3. A row is 192 bytes: not a multiple of 128, a multiple of 64.
    /// 4. M = 512 ≥ 512, 132 even: multicast 2, on B since 64 ≤ 96.
    /// 5. SMs: 128 tiles in one wave.
    #[test]
    fn block_n_96_caps_stages_at_4_and_multicasts_on_b() {
        assert_eq!(
            plan(512, 1536, 7168, 1, 132),
            Ok(config(64, 96, 4, 2, false, 128, 95_744, 64))
        );
    }

    /// M = 64, N = 2112 = 132·16: 64×16 fills exactly one wave (util 132); the later ties
    /// (128×16, 256×16) differ only in a larger `block_m`. K = 7168 allows 8 stages: 2048 +
    /// 224 + 8·(8192 + 256 + 2048 + 16) = 86368. M < 512: no multicast.
    #[test]
    fn small_m_fills_one_wave_with_narrow_blocks() {
        assert_eq!(
            plan(64, 2112, 7168, 1, 132),
            Ok(config(64, 16, 8, 1, true, 132, 86_368, 32))
        );
    }

    /// K < 128: `max(64/128, 1)` = 1 stage. 100×100 is 64×16 (2·7 = 14 tiles, one wave):
    /// 2048 + 8 (one B scale, rounded to 8) + 8192 + 256 + 2048 + 16 = 12568.
    #[test]
    fn k_below_128_has_one_stage() {
        assert_eq!(
            plan(100, 100, 64, 1, 132),
            Ok(config(64, 16, 1, 1, true, 14, 12_568, 32))
        );
    }

    /// K = 8·10⁶: B's scales alone are 62500·4 = 250000 bytes.
    #[test]
    fn a_k_too_long_for_one_stage_is_an_error() {
        assert_eq!(
            plan(64, 64, 8_000_000, 1, 132),
            Err(PlanError::NoStageFits {
                block_m: 64,
                block_n: 16,
                k: 8_000_000,
                smem_size: 262_560,
                capacity: 232_448,
            })
        );
        assert_eq!(plan(0, 64, 64, 1, 132), Err(PlanError::Zero { field: "m" }));
        assert_eq!(
            plan(64, 64, 64, 1, 0),
            Err(PlanError::Zero { field: "num_sms" })
        );
    }

    #[test]
    fn swizzle_and_padding() {
        assert_eq!(
            [16, 24, 32, 96, 128, 144, 160].map(swizzle_mode),
            [32, 0, 64, 64, 128, 32, 64]
        );
        // Python's `%`: (4 − 8) mod 8 = 4 banks → 8 elements; (4 − 4) mod 8 = 0.
        assert_eq!([16, 8, 32, 24].map(block_n_padding), [8, 0, 8, 0]);
        // Only unswizzled rows are padded, and every unswizzled candidate needs none.
        for block_n in block_ns() {
            assert_eq!(smem_config(1, 128, 64, block_n).block_n_padding, 0);
        }
    }
}
