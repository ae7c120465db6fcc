//! Whether two runs of a kernel computed the same: integers and bools exactly, floats
//! within what a different order of float operations may change.
//!
//! The passes legitimately reorder float work (a reduction's tree, a gemm's k-steps of an
//! mma, a vector of atomics), so a float output `y` matches the reference `x` when
//! `|x − y| ≤ rtol · (|x| + s)`, with `s` the largest finite `|x|` of the tensor (at least
//! 1): the error of a reordered sum scales with its terms, not with its result, and the
//! tensor's scale stands for the terms. `rtol` is a few units of the output dtype's last
//! place (2^-12 for float32, 2^-8 float16, 2^-5 bfloat16, 2^-2 and 2^-1 for the fp8s, whose
//! one step is that large), and at least 32 unit roundoffs of the narrowest float dtype the
//! kernel computes in ([`floor`]): a sum folded in float16 and stored to float32 may differ
//! by many float16 steps once reassociated (docs/ir.md, Reductions: `(n − 1) · u · Σ|x|`).
//! Both NaN, or equal (infinities included), always match; an infinity matches a finite
//! value only beyond half the dtype's largest finite value (a sum that overflows in one
//! order may not in another).

use std::collections::HashMap;
use tlc_ir::interp::Tensor;
use tlc_ir::{DType, ExprKind, PrimFunc, StmtKind};

/// The relative tolerance of float outputs of `dtype` (`None`: compared exactly).
pub fn rtol(dtype: DType) -> Option<f64> {
    Some(match dtype {
        DType::Float64 | DType::Float32 => 2f64.powi(-12),
        DType::Float16 => 2f64.powi(-8),
        DType::BFloat16 => 2f64.powi(-5),
        DType::Float8E4M3 => 2f64.powi(-2),
        DType::Float8E5M2 => 2f64.powi(-1),
        _ => return None,
    })
}

/// The unit roundoff of a float dtype.
pub fn unit(dtype: DType) -> Option<f64> {
    Some(2f64.powi(match dtype {
        DType::Float64 => -53,
        DType::Float32 => -24,
        DType::Float16 => -11,
        DType::BFloat16 => -8,
        DType::Float8E4M3 => -4,
        DType::Float8E5M2 => -3,
        _ => return None,
    }))
}

/// The least relative tolerance of `func`'s float outputs: 32 unit roundoffs of the
/// narrowest float dtype among its buffers and casts (0 when it has none).
pub fn floor(func: &PrimFunc) -> f64 {
    let mut dtypes: Vec<DType> = func.params.iter().map(|p| p.dtype).collect();
    tlc_ir::visit::for_each_stmt(&func.body, &mut |s| {
        if let StmtKind::Kernel(k) = &s.kind {
            dtypes.extend(k.allocs.iter().map(|a| a.dtype));
        }
        if let StmtKind::Let { dtype: Some(d), .. } = &s.kind {
            dtypes.push(*d);
        }
        for e in tlc_ir::visit::stmt_exprs(s) {
            tlc_ir::visit::for_each_subexpr(e, &mut |x| {
                if let ExprKind::Cast(d, _) = &x.kind {
                    dtypes.push(*d);
                }
            });
        }
    });
    dtypes.into_iter().filter_map(unit).fold(0.0, f64::max) * 32.0
}

fn largest(dtype: DType) -> f64 {
    match dtype {
        DType::Float16 => 65504.0,
        DType::BFloat16 => 3.389_531_389_251_535_5e38,
        DType::Float8E4M3 => 448.0,
        DType::Float8E5M2 => 57344.0,
        DType::Float32 => f64::from(f32::MAX),
        _ => f64::MAX,
    }
}

/// The first difference between the reference `want` and `got`, described; `None` when
/// they match. `floor`: the least relative tolerance of float outputs ([`floor`]).
pub fn difference(
    want: &HashMap<String, Tensor>,
    got: &HashMap<String, Tensor>,
    floor: f64,
) -> Option<String> {
    let mut names: Vec<&String> = want.keys().chain(got.keys()).collect();
    names.sort();
    names.dedup();
    for name in names {
        let (Some(w), Some(g)) = (want.get(name), got.get(name)) else {
            return Some(format!("`{name}` is a parameter of one run only"));
        };
        if let Some(d) = tensor_difference(w, g, floor) {
            return Some(format!("`{name}` {d}"));
        }
    }
    None
}

fn tensor_difference(want: &Tensor, got: &Tensor, floor: f64) -> Option<String> {
    if want.dtype() != got.dtype() || want.shape() != got.shape() {
        return Some(format!(
            "is {} in one run, {} in the other",
            want.describe(),
            got.describe()
        ));
    }
    let (w, g) = (want.to_f64(), got.to_f64());
    let tol = rtol(want.dtype()).map(|t| t.max(floor));
    let scale = w
        .iter()
        .filter(|x| x.is_finite())
        .fold(1.0f64, |m, x| m.max(x.abs()));
    let big = largest(want.dtype()) / 2.0;
    let mut mismatches = 0usize;
    let mut first = None;
    for (i, (&x, &y)) in w.iter().zip(&g).enumerate() {
        let same = match tol {
            None => x == y || (x.is_nan() && y.is_nan()),
            Some(t) => {
                x == y
                    || (x.is_nan() && y.is_nan())
                    || (x.is_finite() && y.is_finite() && (x - y).abs() <= t * (x.abs() + scale))
                    || (x.is_infinite() && y.is_finite() && y.abs() >= big)
                    || (y.is_infinite() && x.is_finite() && x.abs() >= big)
            }
        };
        if !same {
            mismatches += 1;
            first.get_or_insert((i, x, y));
        }
    }
    let (i, x, y) = first?;
    Some(format!(
        "differs at {mismatches} of {} elements; the first at flat index {i} (shape {:?}): {x} (tile level) vs {y}",
        w.len(),
        want.shape()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(dtype: DType, values: &[f64]) -> HashMap<String, Tensor> {
        let t = Tensor::from_f64(dtype, &[values.len()], values).expect("tensor");
        HashMap::from([("C".to_string(), t)])
    }

    #[test]
    fn floats_match_within_their_dtype_and_ints_exactly() {
        let a = map(DType::Float32, &[1.0, 100.0, f64::NAN, f64::INFINITY]);
        let near = map(
            DType::Float32,
            &[1.0 + 1e-5, 100.0, f64::NAN, f64::INFINITY],
        );
        let far = map(DType::Float32, &[1.5, 100.0, f64::NAN, f64::INFINITY]);
        assert_eq!(difference(&a, &near, 0.0), None);
        let d = difference(&a, &far, 0.0).expect("differs");
        assert!(d.contains("flat index 0"), "{d}");
        let i = map(DType::Int32, &[3.0, 4.0]);
        assert!(difference(&i, &map(DType::Int32, &[3.0, 5.0]), 0.5).is_some());
        assert_eq!(difference(&i, &i.clone(), 0.0), None);
        // An overflow in one order only.
        let h = map(DType::Float16, &[f64::INFINITY]);
        assert_eq!(difference(&h, &map(DType::Float16, &[65504.0]), 0.0), None);
        assert!(difference(&h, &map(DType::Float16, &[1.0]), 0.0).is_some());
    }

    #[test]
    fn a_float16_intermediate_widens_a_float32_output_tolerance() {
        let func = tlc_ir::parse(
            "@T.prim_func\ndef f(X: T.Tensor((4, 96), \"float32\"), S: T.Tensor((4,), \"float32\")):\n    with T.Kernel(1, threads=128) as bx:\n        x = T.alloc_fragment((4, 96), \"float32\")\n        s = T.alloc_fragment((4,), \"float16\")\n        T.copy(X, x)\n        T.reduce_sum(x, s, dim=1)\n        T.copy(s, S)\n",
        )
        .expect("parses");
        let f = floor(&func);
        assert_eq!(f, 32.0 * 2f64.powi(-11));
        // Found by the campaign: a float16 sum of 96 terms reassociated, three float16
        // steps apart at 43.
        let a = map(DType::Float32, &[43.21875]);
        let b = map(DType::Float32, &[43.125]);
        assert!(difference(&a, &b, 0.0).is_some());
        assert_eq!(difference(&a, &b, f), None);
        // Still not everything: a tenth off is a difference.
        assert!(difference(&a, &map(DType::Float32, &[39.0]), f).is_some());
    }
}
