//! The project's one portable hash and one portable random generator, written out because
//! what they feed must be the same on every Rust release and platform (std's hashers and
//! `rand`'s generators promise neither): tuning-cache keys, the interpreter's random inputs
//! (`interp/random.rs`), benchmark data, the mutation campaign's seeds.
//!
//! - [`Fnv1a`] / [`fnv1a`]: FNV-1a, 64 bits (Fowler, Noll, Vo).
//! - [`SplitMix64`]: Steele, Lea and Flood's SplitMix64 (2014); [`SplitMix64::mix`] is its
//!   finalizer alone, a bijection of `u64` that spreads neighbouring inputs apart.

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// An FNV-1a hasher over bytes.
#[derive(Clone, Copy, Debug)]
pub struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Fnv1a(FNV_OFFSET)
    }
}

impl Fnv1a {
    pub fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(FNV_PRIME);
        }
    }

    /// One field of a composite key: its length first, so that no two different field
    /// lists feed the same bytes (`"ab", "c"` ≠ `"a", "bc"`).
    pub fn field(&mut self, text: &str) {
        self.write(&(text.len() as u64).to_le_bytes());
        self.write(text.as_bytes());
    }

    pub fn finish(&self) -> u64 {
        self.0
    }
}

/// FNV-1a of `bytes`.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h = Fnv1a::default();
    h.write(bytes);
    h.finish()
}

/// SplitMix64: the state advances by the golden-ratio increment; each output is the
/// finalizer of the new state.
#[derive(Clone, Copy, Debug)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    pub const INCREMENT: u64 = 0x9e37_79b9_7f4a_7c15;

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(Self::INCREMENT);
        Self::mix(self.0)
    }

    /// The finalizer: a bijection of `u64`.
    pub fn mix(mut z: u64) -> u64 {
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The published FNV-1a 64 test vectors (Fowler, Noll, Vo: `fnv_test.c`).
    #[test]
    fn fnv1a_matches_the_reference_vectors() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn fields_are_delimited() {
        let (mut x, mut y) = (Fnv1a::default(), Fnv1a::default());
        x.field("ab");
        x.field("c");
        y.field("a");
        y.field("bc");
        assert_ne!(x.finish(), y.finish());
    }

    /// The reference outputs of SplitMix64 seeded 0 (Vigna's `splitmix64.c`).
    #[test]
    fn splitmix64_matches_the_reference_sequence() {
        let mut r = SplitMix64(0);
        assert_eq!(r.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(r.next_u64(), 0x6e78_9e6a_a1b9_65f4);
        assert_eq!(r.next_u64(), 0x06c4_5d18_8009_454f);
    }
}
