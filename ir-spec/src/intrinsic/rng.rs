//! The random-number intrinsics (TileLang's `T.rng_init` / `T.rng_rand` /
//! `T.rng_rand_float`, lowered by `syntax/lower_rng.rs`): `T.philox_init(state[0], seed,
//! seq, offset)`, `T.philox_rand(dst[0], state[0])` and `T.philox_uniform(dst[0],
//! state[0])`, with curand's Philox4x32-10 generator (`curandStatePhilox4_32_10_t`)
//! bit-exact, and the one definition of its arithmetic ([`philox4x32_10`], [`PhiloxState`])
//! that the interpreter runs and code generation mirrors instruction by instruction.
//!
//! curand (`curand_kernel.h`, `curand_philox4x32_x.h`), for `curand_init(seed, subsequence,
//! offset, &s)`: `ctr = (0, 0, 0, 0)`, `key = (seed lo, seed hi)`, `STATE = 0`; then
//! `skipahead_sequence(subsequence)` adds `subsequence` to the counter's high 64 bits
//! (`ctr.z`, `ctr.w`), and `skipahead(offset)` moves `offset` draws on: `STATE += offset & 3`
//! (a carry past 3 is one block more), the counter's low 64 bits (`ctr.x`, `ctr.y`, carrying
//! into `ctr.z`, `ctr.w`) by `offset / 4` blocks. `curand(&s)` returns word `STATE` of
//! `philox(ctr, key)` and steps `STATE`; after word 3 the counter steps by one block.
//! `curand_uniform(&s)` is `x * 2^-32 + 2^-33` in float32 of the next `curand(&s)` (`x`
//! rounded to float32 to nearest first), in (0, 1].
//!
//! The state is seven uint32 words of a per-thread local array (registers on the GPU):
//! the counter (4), the key (2) and `STATE` (the word of the block the next draw takes).
//! curand also caches the block's output; tlc recomputes it at each draw (the same value).

use super::{
    Collective, Count, Effect, IntrinsicDef, IntrinsicOp, Needs, Param, ParamKind, RefParam,
};
use crate::dtype::DType;
use crate::ir::Scope;

/// The words of a generator's state: counter (4), key (2), the next word's place.
pub const STATE_WORDS: i64 = 7;

/// The Philox4x32 round multipliers and key increments (Random123's and curand's).
pub const PHILOX_M0: u32 = 0xD251_1F53;
pub const PHILOX_M1: u32 = 0xCD9E_8D57;
pub const PHILOX_W0: u32 = 0x9E37_79B9;
pub const PHILOX_W1: u32 = 0xBB67_AE85;
/// Philox4x32-10: ten rounds.
pub const PHILOX_ROUNDS: usize = 10;

/// `curand_uniform`'s scale and offset: 2^-32 and 2^-33 (CURAND_2POW32_INV, exactly
/// 2^-32 as a float32, and its half).
pub const UNIFORM_SCALE: f32 = 2.328_306_4e-10;
pub const UNIFORM_OFFSET: f32 = UNIFORM_SCALE / 2.0;

/// One Philox4x32 round: `(hi(M1·c2) ^ c1 ^ k0, lo(M1·c2), hi(M0·c0) ^ c3 ^ k1, lo(M0·c0))`.
pub fn philox_round(c: [u32; 4], k: [u32; 2]) -> [u32; 4] {
    let p0 = u64::from(PHILOX_M0) * u64::from(c[0]);
    let p1 = u64::from(PHILOX_M1) * u64::from(c[2]);
    let (hi0, lo0) = ((p0 >> 32) as u32, p0 as u32);
    let (hi1, lo1) = ((p1 >> 32) as u32, p1 as u32);
    [hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0]
}

/// Philox4x32-10 of counter `c` under key `k` (the key bumped by the Weyl increments
/// between rounds).
pub fn philox4x32_10(mut c: [u32; 4], mut k: [u32; 2]) -> [u32; 4] {
    for r in 0..PHILOX_ROUNDS {
        if r > 0 {
            k = [k[0].wrapping_add(PHILOX_W0), k[1].wrapping_add(PHILOX_W1)];
        }
        c = philox_round(c, k);
    }
    c
}

/// `curand_uniform` of one draw.
pub fn uniform(x: u32) -> f32 {
    // `x as f32` rounds to nearest even (PTX `cvt.rn.f32.u32`); the product is exact.
    (x as f32) * UNIFORM_SCALE + UNIFORM_OFFSET
}

/// A generator's state (the seven words of [`STATE_WORDS`], in that order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PhiloxState {
    pub ctr: [u32; 4],
    pub key: [u32; 2],
    /// The word of the current block the next draw returns (0..=3).
    pub pos: u32,
}

impl PhiloxState {
    /// `curand_init(seed, seq, offset)`; the arguments as the 64-bit unsigned integers C
    /// converts them to (a negative `int` sign-extends).
    pub fn init(seed: u64, seq: u64, offset: u64) -> PhiloxState {
        let mut s = PhiloxState {
            ctr: [0; 4],
            key: [seed as u32, (seed >> 32) as u32],
            pos: 0,
        };
        // skipahead_sequence: the counter's high half.
        let (lo, mut hi) = (seq as u32, (seq >> 32) as u32);
        s.ctr[2] = s.ctr[2].wrapping_add(lo);
        if s.ctr[2] < lo {
            hi = hi.wrapping_add(1);
        }
        s.ctr[3] = s.ctr[3].wrapping_add(hi);
        // skipahead: words, then blocks.
        let mut blocks = offset / 4;
        s.pos += (offset & 3) as u32;
        if s.pos > 3 {
            blocks += 1;
            s.pos -= 4;
        }
        s.advance(blocks);
        s
    }

    /// curand's `Philox_State_Incr(s, n)`: the counter's low 64 bits plus `n`, the carry
    /// into `ctr.z` and on into `ctr.w` (curand's exact carry rule).
    fn advance(&mut self, n: u64) {
        let (lo, mut hi) = (n as u32, (n >> 32) as u32);
        self.ctr[0] = self.ctr[0].wrapping_add(lo);
        if self.ctr[0] < lo {
            hi = hi.wrapping_add(1);
        }
        self.ctr[1] = self.ctr[1].wrapping_add(hi);
        if hi <= self.ctr[1] {
            return;
        }
        self.ctr[2] = self.ctr[2].wrapping_add(1);
        if self.ctr[2] != 0 {
            return;
        }
        self.ctr[3] = self.ctr[3].wrapping_add(1);
    }

    /// `curand(&s)`: the next word, and the state one draw on.
    pub fn draw(&mut self) -> u32 {
        let out = philox4x32_10(self.ctr, self.key);
        let x = out[(self.pos & 3) as usize];
        self.pos += 1;
        if self.pos >= 4 {
            self.pos = 0;
            self.advance(1);
        }
        x
    }

    /// The seven words, in the state array's order.
    pub fn words(&self) -> [u32; 7] {
        let [c0, c1, c2, c3] = self.ctr;
        [c0, c1, c2, c3, self.key[0], self.key[1], self.pos]
    }

    /// The state from its seven words.
    pub fn from_words(w: [u32; 7]) -> PhiloxState {
        PhiloxState {
            ctr: [w[0], w[1], w[2], w[3]],
            key: [w[4], w[5]],
            pos: w[6],
        }
    }
}

const STATE: Param = Param {
    name: "state",
    role: "generator state",
    kind: ParamKind::Ref(RefParam {
        scopes: &[Scope::Local],
        dtypes: &[DType::UInt32],
        count: Count::Elems(STATE_WORDS),
        effect: Effect::ReadWrite,
    }),
    keyword: false,
};

/// A draw's destination: one register element of `dtype`.
const fn draw_dst(dtype: &'static [DType]) -> Param {
    Param {
        name: "dst",
        role: "destination",
        kind: ParamKind::Ref(RefParam {
            scopes: &[Scope::Local],
            dtypes: dtype,
            count: Count::Elems(1),
            effect: Effect::Write,
        }),
        keyword: false,
    }
}

/// A run-time integer argument of `T.philox_init`.
const fn value(name: &'static str, role: &'static str) -> Param {
    Param {
        name,
        role,
        kind: ParamKind::Value { default: None },
        keyword: false,
    }
}

pub(super) static PHILOX_INIT: IntrinsicDef = IntrinsicDef {
    op: IntrinsicOp::PhiloxInit,
    name: "T.philox_init",
    params: &[
        Param {
            kind: ParamKind::Ref(RefParam {
                scopes: &[Scope::Local],
                dtypes: &[DType::UInt32],
                count: Count::Elems(STATE_WORDS),
                effect: Effect::Write,
            }),
            ..STATE
        },
        value("seed", "seed"),
        value("seq", "subsequence"),
        value("offset", "offset"),
    ],
    collective: Collective::Thread,
    block_level: false,
    same_dtype: &[],
    needs: Needs::Nothing,
};

pub(super) static PHILOX_RAND: IntrinsicDef = IntrinsicDef {
    op: IntrinsicOp::PhiloxRand,
    name: "T.philox_rand",
    params: &[draw_dst(&[DType::UInt32]), STATE],
    collective: Collective::Thread,
    block_level: false,
    same_dtype: &[],
    needs: Needs::Nothing,
};

pub(super) static PHILOX_UNIFORM: IntrinsicDef = IntrinsicDef {
    op: IntrinsicOp::PhiloxUniform,
    name: "T.philox_uniform",
    params: &[draw_dst(&[DType::Float32]), STATE],
    collective: Collective::Thread,
    block_level: false,
    same_dtype: &[],
    needs: Needs::Nothing,
};

#[cfg(test)]
mod tests {
    use super::*;

    /// Random123's known-answer vectors for Philox4x32-10 (its `kat_vectors`).
    #[test]
    fn known_answers() {
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

    /// The stream: an offset of n draws is the stream from n on; the subsequence is the
    /// counter's high half; a block's four words come in order.
    #[test]
    fn stream_and_skips() {
        let mut a = PhiloxState::init(42, 0, 0);
        let first: Vec<u32> = (0..12).map(|_| a.draw()).collect();
        assert_eq!(&first[..4], &philox4x32_10([0; 4], [42, 0])[..]);
        assert_eq!(&first[4..8], &philox4x32_10([1, 0, 0, 0], [42, 0])[..]);
        for off in 0..8 {
            let mut b = PhiloxState::init(42, 0, off);
            assert_eq!(b.draw(), first[off as usize], "offset {off}");
        }
        let mut s = PhiloxState::init(1 << 40 | 7, 3 | 5 << 32, 0);
        assert_eq!(s.key, [7, 256]);
        assert_eq!(s.draw(), philox4x32_10([0, 0, 3, 5], [7, 256])[0]);
        // The largest offset: 2^62 - 1 blocks and 3 words.
        let far = PhiloxState::init(0, 0, u64::MAX);
        assert_eq!((far.ctr, far.pos), ([u32::MAX, 0x3FFF_FFFF, 0, 0], 3));
        // A carry out of the counter's low 64 bits reaches ctr.z.
        let mut c = PhiloxState::from_words([u32::MAX, u32::MAX, 0, 0, 1, 2, 3]);
        c.draw();
        assert_eq!((c.ctr, c.pos), ([0, 0, 1, 0], 0));
        assert_eq!(PhiloxState::from_words(c.words()), c);
    }

    #[test]
    fn uniform_is_curands() {
        assert_eq!(UNIFORM_SCALE, 2f32.powi(-32));
        assert_eq!(UNIFORM_OFFSET.to_bits(), 0x2F00_0000);
        assert_eq!(uniform(0), 2f32.powi(-33));
        // The largest draws round to 1.0: curand_uniform's range includes it.
        assert_eq!(uniform(u32::MAX), 1.0);
        // 0.5 + 2^-33 rounds back to 0.5.
        assert_eq!(uniform(1 << 31), 0.5);
    }
}
