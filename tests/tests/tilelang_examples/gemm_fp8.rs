//! References of the fp8 GEMMs with an fp8 result (`tests/tilelang/gemm_fp8.tir`,
//! `gemm_fp8_e5m2.tir`): a float32 sum of exact products, rounded once to the fp8 format.

use super::{exact, expect, Expected, Outputs};
use tlc_ir::interp::fp8::{self, Fp8Format};
use tlc_tests::bound::{Approx, Fp};

/// `x` rounded to `fmt` as the kernel's store does (nearest, ties to even, saturating).
fn to_fp8(fmt: Fp8Format, x: f64) -> f64 {
    fp8::decode(fmt, fp8::encode(fmt, x))
}

/// A value known to lie within `a.e` of `a.v`, rounded to `fmt`: rounding is monotone, so
/// the result lies between the roundings of the interval's ends — the bound is the farther
/// of the two from `a.v`.
fn rounded_to_fp8(fmt: Fp8Format, a: Approx) -> Approx {
    let (lo, hi) = (to_fp8(fmt, a.v - a.e), to_fp8(fmt, a.v + a.e));
    Approx {
        v: a.v,
        e: (lo - a.v).abs().max((hi - a.v).abs()),
    }
}

/// C = fp8(A @ B^T), A (M, K), B (N, K), C (M, N) in `fmt`: the fp8 products exact in
/// float32, summed in float32 in any order (the gemm's k-steps), one rounding to `fmt`.
fn gemm_fp8_nt(o: &Outputs, fmt: Fp8Format) -> Expected {
    let (a, b) = (&o["A"], &o["B"]);
    let (m, k, n) = (a.shape()[0], a.shape()[1], b.shape()[0]);
    let (av, bv) = (a.to_f64(), b.to_f64());
    let mut c = Vec::with_capacity(m * n);
    for i in 0..m {
        for j in 0..n {
            let products = (0..k).map(|l| av[i * k + l] * bv[j * k + l]);
            let sum = expect(
                products.clone().sum(),
                Approx::sum(products.map(exact), Fp::F32),
            );
            c.push(rounded_to_fp8(fmt, sum));
        }
    }
    vec![("C", c)]
}

/// `gemm_fp8.tir`: float8_e4m3fn operands and result.
pub fn gemm_fp8_e4m3(o: &Outputs) -> Expected {
    gemm_fp8_nt(o, fp8::E4M3)
}

/// `gemm_fp8_e5m2.tir`: float8_e5m2 operands and result.
pub fn gemm_fp8_e5m2(o: &Outputs) -> Expected {
    gemm_fp8_nt(o, fp8::E5M2)
}
