//! The reference of TileLang's `rand_uint` (`tests/tilelang/rand_uint.tir`): what the
//! original test compares with, triton's `tl.randint4x(seed, offset)` — Philox4x32-10 of
//! the counter `(offset, 0, 0, 0)` under the key `(seed, 0)`, whose four words are elements
//! `4 * offset .. 4 * offset + 4` — from the tests' own model (`tlc_tests::philox`,
//! checked against Random123's known answers), not tlc's generator.

use super::{exact, Expected, Outputs};
use tlc_tests::philox::philox4x32_10;

/// The seed `rand_uint.tir` hard-codes (the test's `test_rand_1d(1024, 42)`).
const SEED: u32 = 42;

/// `rand_uint.tir`: `A[i]` is word `i % 4` of Philox4x32-10 of counter `(i / 4, 0, 0, 0)`
/// under key `(42, 0)` (triton's stream, which curand's `curand_init(42, 0, 128 * bx)`
/// followed by 128 draws per block reproduces).
pub fn rand_uint(o: &Outputs) -> Expected {
    let m = o["A"].shape()[0];
    let a = (0..m)
        .map(|i| {
            let block = philox4x32_10([(i / 4) as u32, 0, 0, 0], [SEED, 0]);
            exact(f64::from(block[i % 4]))
        })
        .collect();
    vec![("A", a)]
}
