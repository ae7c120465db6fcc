//! When a region gets a `T.vectorized` loop. The vector is 16 bytes (`V = 16 / element
//! size`); a region is vectorized only when every vector provably covers `V` contiguous,
//! `V`-aligned elements of every buffer it touches: the innermost extent is a constant
//! multiple of `V`, every access's innermost index is `<offset> + lane` with the offset a
//! provable multiple of `V` (`analysis::int::multiple_of`, the rule codegen's vector check
//! uses too), and the innermost dimension of every buffer touched is a multiple of `V` — a
//! constant, or a dim declared `multiple_of` (`analysis::int::rows_aligned`; rows stay
//! aligned). Anything unproven gives `V = 1`, which is always correct.

pub(crate) use crate::analysis::int::rows_aligned;

/// Bytes per vector access (`ld.v4.b32`).
pub(crate) const VECTOR_BYTES: i64 = 16;

/// The vector width for elements of `bytes` bytes.
pub(crate) fn width(bytes: u32) -> i64 {
    (VECTOR_BYTES / i64::from(bytes.max(1))).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths() {
        assert_eq!(width(4), 4);
        assert_eq!(width(2), 8);
        assert_eq!(width(1), 16);
    }
}
