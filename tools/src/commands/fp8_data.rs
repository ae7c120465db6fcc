//! The FP8 bench's inputs and reference operands, on the host: random float32 matrices,
//! quantized to float8_e4m3 with one float32 scale per block as DeepGEMM's tests do
//! (`per_token_cast_to_fp8` for A's 1×128 blocks, `per_block_cast_to_fp8` for B's 128×128
//! blocks: `amax` = the block's largest magnitude, at least 1e-4; value = fp8(x · (448 /
//! amax)); scale = amax / 448), and dequantized back (fp8 value × its block's scale) for the
//! float32 reference GEMM.
//!
//! The data are normal (Box–Muller) times a per-block magnitude 2^e, e uniform in −3..=3:
//! the fp8 values a kernel sees are distributed exactly as DeepGEMM's `randn` data give, but
//! the scales vary by 64× from block to block, so a kernel that applies a neighbouring
//! block's scale (or none) fails the check instead of passing within its tolerance. Every
//! value depends on the seed, the stream and its position only, not on the thread count.

use super::bench::{splitmix, threads, RANDOM_BLOCK};
use tlc_ir::interp::fp8::{decode, encode, E4M3};

/// The width of a scale block along K (and its height along N for B).
pub const BLOCK: usize = 128;

/// The largest finite float8_e4m3 magnitude: a block's amax maps to it.
pub const E4M3_MAX: f32 = 448.0;

/// DeepGEMM's floor on a block's amax (an all-zero block gets scale 1e-4 / 448, not 0).
pub const MIN_AMAX: f32 = 1e-4;

/// A uniform f32 in [0, 1) from the top 24 bits.
fn unit(r: u64) -> f32 {
    (r >> 40) as f32 / (1u64 << 24) as f32
}

/// The per-block magnitude 2^e, e in −3..=3, of block `index` of `(seed, stream)`.
fn block_magnitude(seed: u64, stream: u64, index: u64) -> f32 {
    let mut state = seed ^ stream.wrapping_mul(0xD1B5_4A32_D192_ED03) ^ index.wrapping_mul(0x9E37);
    let _ = splitmix(&mut state);
    let e = (splitmix(&mut state) % 7) as i32 - 3;
    2f32.powi(e)
}

/// A `rows × cols` row-major float32 matrix: standard normal values, each scaled by the
/// magnitude of its block (`row_group` rows × [`BLOCK`] columns), from `(seed, stream)`.
pub fn random_blocked(
    rows: usize,
    cols: usize,
    row_group: usize,
    seed: u64,
    stream: u64,
) -> Vec<f32> {
    let len = rows * cols;
    let mut out = vec![0f32; len];
    let col_blocks = cols.div_ceil(BLOCK) as u64;
    let per_thread = len.div_ceil(threads()).div_ceil(RANDOM_BLOCK).max(1) * RANDOM_BLOCK;
    std::thread::scope(|s| {
        for (t, part) in out.chunks_mut(per_thread).enumerate() {
            s.spawn(move || {
                let start = t * per_thread;
                for (b, chunk) in part.chunks_mut(RANDOM_BLOCK).enumerate() {
                    let first = start + b * RANDOM_BLOCK;
                    let mut state = seed
                        ^ stream.wrapping_mul(0xA24B_AED4_963E_E407)
                        ^ (first / RANDOM_BLOCK) as u64;
                    let _ = splitmix(&mut state);
                    for (i, x) in chunk.iter_mut().enumerate() {
                        let (r, c) = ((first + i) / cols, (first + i) % cols);
                        // Box–Muller; 1 − u lies in (0, 1], so the logarithm is finite.
                        let bits = splitmix(&mut state);
                        let u1 = 1.0 - unit(bits);
                        let u2 = unit(bits << 24);
                        let z = (-2.0 * u1.ln()).sqrt() * (std::f32::consts::TAU * u2).cos();
                        let block = (r / row_group) as u64 * col_blocks + (c / BLOCK) as u64;
                        *x = z * block_magnitude(seed, stream, block);
                    }
                }
            });
        }
    });
    out
}

/// A row-major `rows × cols` float8_e4m3 matrix with one float32 scale per `row_group` ×
/// [`BLOCK`] block: the value of element (r, c) is `decode(values) · scales[r / row_group,
/// c / BLOCK]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Quantized {
    pub rows: usize,
    pub cols: usize,
    pub row_group: usize,
    /// The e4m3 bits, row-major.
    pub values: Vec<u8>,
    /// Row-major, [`Quantized::scale_shape`].
    pub scales: Vec<f32>,
}

impl Quantized {
    /// `(⌈rows / row_group⌉, ⌈cols / 128⌉)`.
    pub fn scale_shape(&self) -> [usize; 2] {
        [
            self.rows.div_ceil(self.row_group),
            self.cols.div_ceil(BLOCK),
        ]
    }

    /// Quantizes `x` (`rows × cols`, row-major) per `row_group × 128` block, as DeepGEMM's
    /// tests do (module doc). Ragged edge blocks take the amax of the elements they have.
    pub fn quantize(x: &[f32], rows: usize, cols: usize, row_group: usize) -> Quantized {
        assert_eq!(x.len(), rows * cols, "a {rows}x{cols} matrix");
        assert!(row_group > 0, "row_group must be positive");
        let kb = cols.div_ceil(BLOCK);
        let groups = rows.div_ceil(row_group);
        let mut values = vec![0u8; rows * cols];
        let mut scales = vec![0f32; groups * kb];
        // Threads take whole row groups, so each block is quantized by one thread.
        let groups_per_thread = groups.div_ceil(threads()).max(1);
        std::thread::scope(|s| {
            let chunks = values
                .chunks_mut(groups_per_thread * row_group * cols)
                .zip(scales.chunks_mut(groups_per_thread * kb))
                .zip(x.chunks(groups_per_thread * row_group * cols));
            for ((v, sc), x) in chunks {
                s.spawn(move || quantize_rows(x, v, sc, cols, row_group));
            }
        });
        Quantized {
            rows,
            cols,
            row_group,
            values,
            scales,
        }
    }

    /// The exact e4m3 values, without the scales (what cuBLASLt's unit-scaled GEMM sees).
    pub fn decode(&self) -> Vec<f32> {
        let table = decode_table();
        self.values.iter().map(|&b| table[b as usize]).collect()
    }

    /// The dequantized matrix: each value times its block's scale (rounded to float32).
    pub fn dequantize(&self) -> Vec<f32> {
        let table = decode_table();
        let kb = self.cols.div_ceil(BLOCK);
        let mut out = vec![0f32; self.values.len()];
        let rows_per_thread = self.rows.div_ceil(threads()).max(1);
        let cols = self.cols.max(1);
        std::thread::scope(|s| {
            for (t, (o, v)) in out
                .chunks_mut(rows_per_thread * cols)
                .zip(self.values.chunks(rows_per_thread * cols))
                .enumerate()
            {
                let table = &table;
                s.spawn(move || {
                    for (i, (o, &b)) in o.iter_mut().zip(v).enumerate() {
                        let (r, c) = (t * rows_per_thread + i / cols, i % cols);
                        let scale = self.scales[(r / self.row_group) * kb + c / BLOCK];
                        *o = table[b as usize] * scale;
                    }
                });
            }
        });
        out
    }
}

/// The 256 e4m3 values (NaN at 0x7F / 0xFF; quantization never writes them).
fn decode_table() -> [f32; 256] {
    std::array::from_fn(|b| decode(E4M3, b as u8) as f32)
}

/// Quantizes whole row groups: `x`, `values` rows × cols, `scales` groups × ⌈cols/128⌉.
fn quantize_rows(x: &[f32], values: &mut [u8], scales: &mut [f32], cols: usize, g: usize) {
    let kb = cols.div_ceil(BLOCK);
    let rows = x.len() / cols.max(1);
    for group in 0..rows.div_ceil(g) {
        let rows_in = group * g..((group + 1) * g).min(rows);
        for b in 0..kb {
            let cols_in = b * BLOCK..((b + 1) * BLOCK).min(cols);
            let mut amax = 0f32;
            for r in rows_in.clone() {
                for &v in &x[r * cols + cols_in.start..r * cols + cols_in.end] {
                    amax = amax.max(v.abs());
                }
            }
            let amax = amax.max(MIN_AMAX);
            // float32 as torch computes it: x * (448 / amax), then the cast to fp8.
            let inv = E4M3_MAX / amax;
            for r in rows_in.clone() {
                for c in cols_in.clone() {
                    values[r * cols + c] = encode(E4M3, f64::from(x[r * cols + c] * inv));
                }
            }
            scales[group * kb + b] = amax / E4M3_MAX;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel's formula, in f64: `Σ_kb (Σ_{k in kb} A[m,k]·B[n,k]) · sa[m,kb] ·
    /// sb[n/128,kb]` over the raw e4m3 values.
    fn block_scaled_gemm(a: &Quantized, b: &Quantized) -> Vec<f64> {
        let (m, n, k) = (a.rows, b.rows, a.cols);
        let kb = k.div_ceil(BLOCK);
        let mut out = vec![0f64; m * n];
        for i in 0..m {
            for j in 0..n {
                let mut acc = 0f64;
                for blk in 0..kb {
                    let mut partial = 0f64;
                    for kk in blk * BLOCK..((blk + 1) * BLOCK).min(k) {
                        partial +=
                            decode(E4M3, a.values[i * k + kk]) * decode(E4M3, b.values[j * k + kk]);
                    }
                    acc += partial
                        * f64::from(a.scales[i * kb + blk])
                        * f64::from(b.scales[(j / BLOCK) * kb + blk]);
                }
                out[i * n + j] = acc;
            }
        }
        out
    }

    #[test]
    fn random_data_is_seeded_normal_and_thread_independent() {
        let x = random_blocked(300, 1000, 1, 5, 1);
        assert_eq!(x, random_blocked(300, 1000, 1, 5, 1));
        assert_ne!(x, random_blocked(300, 1000, 1, 6, 1));
        assert!(x.iter().all(|v| v.is_finite()));
        // A prefix of a taller matrix: values depend on their position, not on how the
        // rows were split among threads (the two calls split them differently).
        let taller = random_blocked(700, 1000, 1, 5, 1);
        assert_eq!(&taller[..x.len()], &x[..]);
        // Normalized by each block's magnitude the data are standard normal: mean ≈ 0,
        // variance ≈ 1, about 68% within one sigma.
        let q = Quantized::quantize(&x, 300, 1000, 1);
        let kb = 1000usize.div_ceil(BLOCK);
        let mut magnitudes = std::collections::BTreeSet::new();
        for r in 0..300 {
            for b in 0..kb {
                let m = block_magnitude(5, 1, (r * kb + b) as u64);
                magnitudes.insert(m.to_bits());
                // The block's scale follows its magnitude (amax of ~128 normals is 2..5).
                let ratio = q.scales[r * kb + b] * E4M3_MAX / m;
                assert!((1.0..6.0).contains(&ratio), "block ({r}, {b}): {ratio}");
            }
        }
        assert_eq!(magnitudes.len(), 7, "2^-3 ..= 2^3 all occur");
        let z: Vec<f64> = x
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                let block = (i / 1000) * kb + (i % 1000) / BLOCK;
                f64::from(v / block_magnitude(5, 1, block as u64))
            })
            .collect();
        let mean = z.iter().sum::<f64>() / z.len() as f64;
        let var = z.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / z.len() as f64;
        let within = z.iter().filter(|v| v.abs() < 1.0).count() as f64 / z.len() as f64;
        assert!(mean.abs() < 0.01, "{mean}");
        assert!((var - 1.0).abs() < 0.02, "{var}");
        assert!((within - 0.6827).abs() < 0.01, "{within}");
    }

    #[test]
    fn quantization_round_trips_within_e4m3_precision() {
        // Ragged in both directions: 130 rows (two row groups of B, one partial), 300 columns
        // (three K blocks, the last 44 wide).
        for (rows, g) in [(7, 1), (130, 128)] {
            let x = random_blocked(rows, 300, g, 11, 2);
            let q = Quantized::quantize(&x, rows, 300, g);
            assert_eq!(q.scale_shape(), [rows.div_ceil(g), 3]);
            assert_eq!(q.scales.len(), rows.div_ceil(g) * 3);
            let back = q.dequantize();
            for (r, (&v, &w)) in x.iter().zip(&back).enumerate() {
                let (i, c) = (r / 300, r % 300);
                let scale = q.scales[(i / g) * 3 + c / BLOCK];
                // e4m3 keeps 3 fraction bits: relative error ≤ 2^-4 for normal values, and
                // an absolute 2^-10 (half the smallest subnormal step) in the scaled domain.
                let tol = v.abs() / 16.0 + scale * 2f32.powi(-10) * 1.001;
                assert!((v - w).abs() <= tol, "({i}, {c}): {v} -> {w}");
            }
            // Each block's largest magnitude maps to ±448 exactly (the scale is amax / 448).
            for (grp, scale) in q.scales.iter().enumerate() {
                let (gi, b) = (grp / 3, grp % 3);
                let mut top = 0u8;
                for r in gi * g..((gi + 1) * g).min(rows) {
                    for c in b * BLOCK..((b + 1) * BLOCK).min(300) {
                        top = top.max(q.values[r * 300 + c] & 0x7F);
                    }
                }
                assert_eq!(top, 0x7E, "block {grp} (scale {scale})");
            }
            // decode() is the scale-free part of dequantize().
            let raw = q.decode();
            assert!(raw.iter().all(|v| v.abs() <= E4M3_MAX));
        }
    }

    #[test]
    fn zero_blocks_get_the_amax_floor() {
        let mut x = vec![0f32; 2 * 256];
        x[256 + 130] = -3.5; // row 1, block 1
        let q = Quantized::quantize(&x, 2, 256, 1);
        assert_eq!(
            q.scales,
            vec![
                MIN_AMAX / 448.0,
                MIN_AMAX / 448.0,
                MIN_AMAX / 448.0,
                3.5 / 448.0
            ]
        );
        assert_eq!(q.values[256 + 130], 0xFE); // −448
        assert!(q
            .values
            .iter()
            .enumerate()
            .all(|(i, &v)| i == 256 + 130 || v == 0));
        assert_eq!(q.dequantize()[256 + 130], -3.5);
    }

    #[test]
    fn dequantized_gemm_equals_the_block_scaled_formula() {
        // What the GPU reference computes (a float32 GEMM of the dequantized operands) equals
        // the kernel's formula up to float rounding, at ragged M, N, K.
        let (m, n, k) = (5, 130, 300);
        let a = Quantized::quantize(&random_blocked(m, k, 1, 3, 1), m, k, 1);
        let b = Quantized::quantize(&random_blocked(n, k, BLOCK, 3, 2), n, k, BLOCK);
        assert_eq!(b.scale_shape(), [2, 3]);
        let want = block_scaled_gemm(&a, &b);
        let (da, db) = (a.dequantize(), b.dequantize());
        let mut max_ref = 0f64;
        let mut max_err = 0f64;
        for i in 0..m {
            for j in 0..n {
                let mut acc = 0f32;
                for kk in 0..k {
                    acc += da[i * k + kk] * db[j * k + kk];
                }
                let w = want[i * n + j];
                max_ref = max_ref.max(w.abs());
                max_err = max_err.max((f64::from(acc) - w).abs());
            }
        }
        assert!(max_ref > 0.0);
        // float32 accumulation of 300 terms: far below the bench's 2^-7.
        assert!(max_err / max_ref < 1e-5, "{max_err} / {max_ref}");
        // Even a 25% error in one block's scale shows: the bench's check would see it.
        let mut wrong = b.clone();
        wrong.scales[0] *= 1.25;
        let off = block_scaled_gemm(&a, &wrong);
        let err = want
            .iter()
            .zip(&off)
            .map(|(x, y)| (x - y).abs())
            .fold(0f64, f64::max);
        assert!(err / max_ref > 1.0 / 128.0, "{err} / {max_ref}");
    }
}
