//! An independent model of curand's Philox4x32-10 stream for the tests' references,
//! written from Random123's definition of the rounds and curand's documented stream
//! layout, sharing no code with tlc's generator (`tlc_ir::intrinsic::rng`, the state
//! machine the interpreter runs and code generation mirrors).
//!
//! curand's `curand_init(seed, seq, offset)` followed by draws returns elements
//! `offset, offset + 1, …` of subsequence `seq`: element `n` is word `n % 4` of
//! Philox4x32-10 of the counter `(n / 4 as two words, seq as two words)` under the key
//! `(seed lo, seed hi)`. Triton's `tl.randint4x(seed, offset)` is the four words of
//! subsequence 0's block `offset`.

/// Philox4x32-10 of counter `c` under key `k`: each round multiplies words 0 and 2 (64-bit
/// products, split into high and low halves) and mixes in the key, which a Weyl sequence
/// bumps before every round but the first.
pub fn philox4x32_10(mut c: [u32; 4], k: [u32; 2]) -> [u32; 4] {
    const M: [u64; 2] = [0xD251_1F53, 0xCD9E_8D57];
    const W: [u32; 2] = [0x9E37_79B9, 0xBB67_AE85];
    for round in 0..10u32 {
        let key = [
            k[0].wrapping_add(W[0].wrapping_mul(round)),
            k[1].wrapping_add(W[1].wrapping_mul(round)),
        ];
        let p0 = M[0] * u64::from(c[0]);
        let p1 = M[1] * u64::from(c[2]);
        c = [
            (p1 >> 32) as u32 ^ c[1] ^ key[0],
            p1 as u32,
            (p0 >> 32) as u32 ^ c[3] ^ key[1],
            p0 as u32,
        ];
    }
    c
}

/// Element `n` of subsequence `seq` of the stream of `seed` (for `n / 4 < 2^64`).
pub fn element(seed: u64, seq: u64, n: u64) -> u32 {
    let q = n / 4;
    let block = philox4x32_10(
        [q as u32, (q >> 32) as u32, seq as u32, (seq >> 32) as u32],
        [seed as u32, (seed >> 32) as u32],
    );
    block[(n % 4) as usize]
}

/// curand's `curand_uniform` of a draw `x`: `x * 2^-32 + 2^-32 / 2` in float32.
pub fn uniform(x: u32) -> f32 {
    let scale = 2f32.powi(-32);
    (x as f32) * scale + scale / 2.0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random123's published known-answer vectors for Philox4x32-10 (`kat_vectors`).
    #[test]
    fn matches_random123_known_answers() {
        assert_eq!(
            philox4x32_10([0; 4], [0; 2]),
            [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8]
        );
        assert_eq!(
            philox4x32_10([u32::MAX; 4], [u32::MAX; 2]),
            [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd]
        );
        assert_eq!(
            philox4x32_10(
                [0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344],
                [0xa409_3822, 0x299f_31d0]
            ),
            [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1]
        );
    }

    #[test]
    fn element_layout() {
        let b = philox4x32_10([5, 0, 7, 0], [9, 1]);
        let seed = 9 | 1 << 32;
        assert_eq!((20..24).map(|n| element(seed, 7, n)).collect::<Vec<_>>(), b);
        assert_eq!(uniform(0), 2f32.powi(-33));
        assert_eq!(uniform(u32::MAX), 1.0);
    }
}
