//! FNV-1a, 64 bits: the tuning cache's key hash. Written out here because the key names a
//! file that must stay the same across Rust versions and platforms (std's `DefaultHasher`
//! promises neither).

const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const PRIME: u64 = 0x0000_0100_0000_01b3;

/// An FNV-1a hasher over bytes.
#[derive(Clone, Copy, Debug)]
pub struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Fnv1a(OFFSET)
    }
}

impl Fnv1a {
    pub fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(PRIME);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The published FNV-1a 64 test vectors (Fowler, Noll, Vo: `fnv_test.c`).
    #[test]
    fn matches_the_reference_vectors() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn fields_are_delimited() {
        let mut x = Fnv1a::default();
        x.field("ab");
        x.field("c");
        let mut y = Fnv1a::default();
        y.field("a");
        y.field("bc");
        assert_ne!(x.finish(), y.finish());
    }
}
