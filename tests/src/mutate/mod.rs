//! The mutation campaign (issue 33): seeded edits of every case and example, each mutant
//! judged by every oracle of the compile road.
//!
//! - [`corpus`]: the texts mutated — every `.tir` of `tests/cases/**`, `examples/`,
//!   `bench/` and `tests/tilelang/`.
//! - [`edits`]: the edits (literals to edge values, dtypes, names, loop kinds, keywords,
//!   slices, operators, lines dropped or duplicated, random bytes); [`mutant`] draws one
//!   mutant from `(seed, index)` alone, so any mutant of any campaign reproduces by itself.
//! - [`oracle`]: [`examine`] runs one source through `fmt`, `check` and `compile` for every
//!   target and reports [`Finding`]s: a panic, an unlocated error, a compiler bug (what check
//!   accepts must compile or be refused with located errors), `fmt` not idempotent, the
//!   `--emit=tir` text not parsing back equal, and the [`differential`] (the tile-level
//!   interpreter against the interpreter on each target's compiled IR).
//! - [`minimize`]: deletes lines, then pieces, while a finding of the same class persists.
//!
//! `tests/tests/pipeline_mutations.rs` runs a short campaign in CI; the `mutate` binary
//! (`tests/src/bin/mutate.rs`) runs long ones in worker processes with time and memory
//! limits (`fuzz/README.md`).

pub mod compare;
pub mod corpus;
pub mod differential;
pub mod edits;
pub mod estimate;
pub mod finding;
pub mod minimize;
pub mod oracle;
pub mod reverse;

pub use corpus::{corpus, Source};
pub use edits::{mutant, Mutant};
pub use finding::{Finding, Oracle};
pub use oracle::{examine, Options, Report};

/// xorshift64*: a small deterministic generator, so a failure reproduces from its seed.
pub struct Rng(pub u64);

impl Rng {
    /// The generator of item `index` of a run seeded `seed`: SplitMix64's finalizer of both,
    /// so neighbouring indices get unrelated streams (and the state is never 0, which
    /// xorshift cannot leave).
    pub fn for_item(seed: u64, index: u64) -> Rng {
        use tlc_ir::hash::SplitMix64;
        let z = SplitMix64::mix(seed ^ index.wrapping_mul(SplitMix64::INCREMENT));
        Rng(if z == 0 { 1 } else { z })
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }

    /// One of `items`; `None` when there are none.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        items.get(self.below(items.len()))
    }
}

/// Token-ish pieces: runs of word characters, and single other characters.
pub fn pieces(src: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for c in src.chars() {
        let word = c.is_alphanumeric() || c == '_';
        match out.last_mut() {
            Some(last) if word && last.chars().all(|l| l.is_alphanumeric() || l == '_') => {
                last.push(c)
            }
            _ => out.push(c.to_string()),
        }
    }
    out
}
