//! Seeded random inputs for parameters that were not given.
//!
//! The stream of a parameter depends only on the seed and the parameter's name (so adding a
//! parameter or giving another one from a file does not change it): SplitMix64 started at
//! `seed ^ fnv1a(name)` (`crate::hash`). Each element takes one 64-bit draw, in row-major order:
//! - float dtypes: `u = (draw >> 11) * 2^-53` in [0, 1), `x = 2u - 1` in [-1, 1), then
//!   rounded to the dtype (round to nearest even, so a value just below 1 may round to 1.0 in
//!   a narrow format);
//! - signed integers: uniform in [-8, 8); unsigned integers: uniform in [0, 16);
//! - bool: the lowest bit of the draw.

use crate::dtype::DType;
use crate::hash::{fnv1a, SplitMix64};
use crate::interp::scalar::Scalar;
use crate::interp::tensor::{checked_len, fmt_shape, Tensor, MAX_ELEMENTS};
use crate::ir::BufferDecl;

/// Random data for buffer `decl` with the given (resolved) shape; an error only for a shape
/// too large to hold (`tensor::MAX_ELEMENTS`).
pub fn random_input(decl: &BufferDecl, shape: &[usize], seed: u64) -> Result<Tensor, String> {
    random_tensor(&decl.name.name, decl.dtype, shape, seed)
}

/// Random data named `name` (see the module doc).
pub fn random_tensor(
    name: &str,
    dtype: DType,
    shape: &[usize],
    seed: u64,
) -> Result<Tensor, String> {
    let mut rng = SplitMix64(seed ^ fnv1a(name.as_bytes()));
    let len = checked_len(shape).ok_or_else(|| {
        format!(
            "shape {} has more than {MAX_ELEMENTS} elements",
            fmt_shape(shape)
        )
    })?;
    let values = (0..len).map(|_| {
        let draw = rng.next_u64();
        if dtype.is_float() {
            let u = (draw >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
            Scalar::Float(2.0 * u - 1.0)
        } else if dtype.is_bool() {
            Scalar::Bool(draw & 1 == 1)
        } else if dtype.is_unsigned() {
            Scalar::Int((draw >> 60) as i64)
        } else {
            Scalar::Int((draw >> 60) as i64 - 8)
        }
    });
    Tensor::from_scalars(dtype, shape, values)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_per_seed_and_name() {
        let a = random_tensor("A", DType::Float32, &[64], 7).unwrap();
        assert_eq!(a, random_tensor("A", DType::Float32, &[64], 7).unwrap());
        assert_ne!(a, random_tensor("B", DType::Float32, &[64], 7).unwrap());
        assert_ne!(a, random_tensor("A", DType::Float32, &[64], 8).unwrap());
        let v = a.to_f64();
        assert!(v.iter().all(|&x| (-1.0..1.0).contains(&x)));
        assert!(v.iter().any(|&x| x < -0.5) && v.iter().any(|&x| x > 0.5));
        let i = random_tensor("I", DType::Int32, &[256], 1)
            .unwrap()
            .to_f64();
        assert!(i.iter().all(|&x| (-8.0..8.0).contains(&x)));
        assert!(i.contains(&-8.0) && i.contains(&7.0));
    }
}
