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
//!
//! [`random_bytes`] gives the same elements as the device's bytes, for tensors of any size.

use crate::dtype::DType;
use crate::hash::{fnv1a, SplitMix64};
use crate::interp::scalar::Scalar;
use crate::interp::shared::encode;
use crate::interp::tensor::{checked_len, fmt_shape, Tensor, MAX_ELEMENTS};
use crate::ir::BufferDecl;
use std::ops::Range;

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
    let mut rng = stream(name, seed);
    let len = checked_len(shape).ok_or_else(|| {
        format!(
            "shape {} has more than {MAX_ELEMENTS} elements",
            fmt_shape(shape)
        )
    })?;
    let values = (0..len).map(|_| element(dtype, rng.next_u64()));
    Tensor::from_scalars(dtype, shape, values)
}

/// The generator of parameter `name`, before its first draw.
fn stream(name: &str, seed: u64) -> SplitMix64 {
    SplitMix64(seed ^ fnv1a(name.as_bytes()))
}

/// One element's value from its draw (the module doc's rules).
fn element(dtype: DType, draw: u64) -> Scalar {
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
}

/// Elements `range` of [`random_tensor`]`(name, dtype, shape, seed)` (row-major) as the device
/// stores them — little-endian, `int4` two to a byte, low nibble first — with no limit on
/// the tensor's size: a benchmark's inputs may be larger than the interpreter holds. SplitMix64
/// jumps straight to any element, so ranges can be drawn in parallel; an `int4` range must
/// start at an even element.
pub fn random_bytes(name: &str, dtype: DType, range: Range<usize>, seed: u64) -> Vec<u8> {
    let mut rng = stream(name, seed);
    rng.0 = rng
        .0
        .wrapping_add((range.start as u64).wrapping_mul(SplitMix64::INCREMENT));
    let width = dtype.bytes() as usize;
    let mut out = Vec::with_capacity(dtype.packed_bytes(range.len() as u64) as usize);
    let mut nibble: Option<u8> = None;
    for _ in range {
        let bytes = encode(dtype, element(dtype, rng.next_u64()));
        if dtype.is_sub_byte() {
            match nibble.take() {
                None => nibble = Some(bytes[0] & 15),
                Some(low) => out.push(low | (bytes[0] << 4)),
            }
        } else {
            out.extend_from_slice(&bytes[..width]);
        }
    }
    out.extend(nibble);
    out
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

    #[test]
    fn bytes_are_the_tensors_elements_from_any_start() {
        for dtype in [
            DType::Float16,
            DType::Float32,
            DType::Int8,
            DType::UInt16,
            DType::Int4,
        ] {
            let t = random_tensor("X", dtype, &[101], 3).unwrap();
            let whole = random_bytes("X", dtype, 0..101, 3);
            let want: Vec<u8> = if dtype == DType::Int4 {
                let v: Vec<u8> = t.to_f64().iter().map(|&x| (x as i64 & 15) as u8).collect();
                v.chunks(2)
                    .map(|p| p[0] | (p.get(1).copied().unwrap_or(0) << 4))
                    .collect()
            } else {
                let w = dtype.bytes() as usize;
                t.to_f64()
                    .iter()
                    .flat_map(|&x| {
                        let s = if dtype.is_float() {
                            Scalar::Float(x)
                        } else {
                            Scalar::Int(x as i64)
                        };
                        encode(dtype, s)[..w].to_vec()
                    })
                    .collect()
            };
            assert_eq!(whole, want, "{dtype}");
            let w = dtype.bytes() as usize;
            let tail = random_bytes("X", dtype, 40..101, 3);
            let at = if dtype == DType::Int4 { 20 } else { 40 * w };
            assert_eq!(tail, whole[at..], "{dtype} from element 40");
        }
    }
}
