//! The math functions (`T.exp(x)`, `T.sqrt(x)`, `T.pow(x, y)`, …): **one table**, read by
//! the front end (names, arity), the printer, the typing rules, the verifier (which dtypes
//! each takes), the interpreter (exact semantics) and codegen (which PTX form).
//!
//! Semantics (docs/ir.md, "Math functions"): the interpreter computes each function exactly
//! (f64 libm on the argument's value) and rounds the result once to the argument's dtype.
//! The GPU evaluates float16 / bfloat16 / float32 arguments in float32 through PTX's fast
//! forms (`ex2.approx.ftz.f32`, `lg2.approx.f32`, `rsqrt.approx.f32`,
//! `sin.approx`, `cos.approx`, `tanh.approx`), as TileLang does with its default fast math,
//! so its results differ from the interpreter's by the error bound `MathFn::f32_error`
//! states; `sqrt`, `abs`, `floor`, `ceil`, `trunc`, `nearbyint` are exact on both, and so
//! is `fma` (float32 only: the product unrounded, one rounding, `fma.rn.f32`; the front end
//! writes every float32 `a * b ± c` as one, `syntax/contract.rs`).

use crate::dtype::DType;

/// A math function of the IR.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MathFn {
    Exp,
    Exp2,
    Exp10,
    Log,
    Log2,
    Log10,
    Sqrt,
    Rsqrt,
    Abs,
    Floor,
    Ceil,
    Trunc,
    /// Round to the nearest integer, ties to even (`rint`; PTX `cvt.rni`).
    Nearbyint,
    Sin,
    Cos,
    Tan,
    Tanh,
    Sigmoid,
    /// `T.pow(x, y)`: `2^(y · log2 x)` — `x ** y` for x > 0, NaN for x < 0.
    Pow,
    /// `T.fma(a, b, c)`: `a · b + c` rounded once (float32).
    Fma,
}

impl MathFn {
    pub const ALL: [MathFn; 20] = [
        MathFn::Exp,
        MathFn::Exp2,
        MathFn::Exp10,
        MathFn::Log,
        MathFn::Log2,
        MathFn::Log10,
        MathFn::Sqrt,
        MathFn::Rsqrt,
        MathFn::Abs,
        MathFn::Floor,
        MathFn::Ceil,
        MathFn::Trunc,
        MathFn::Nearbyint,
        MathFn::Sin,
        MathFn::Cos,
        MathFn::Tan,
        MathFn::Tanh,
        MathFn::Sigmoid,
        MathFn::Pow,
        MathFn::Fma,
    ];

    /// The text name, without `T.`.
    pub fn name(self) -> &'static str {
        match self {
            MathFn::Exp => "exp",
            MathFn::Exp2 => "exp2",
            MathFn::Exp10 => "exp10",
            MathFn::Log => "log",
            MathFn::Log2 => "log2",
            MathFn::Log10 => "log10",
            MathFn::Sqrt => "sqrt",
            MathFn::Rsqrt => "rsqrt",
            MathFn::Abs => "abs",
            MathFn::Floor => "floor",
            MathFn::Ceil => "ceil",
            MathFn::Trunc => "trunc",
            MathFn::Nearbyint => "nearbyint",
            MathFn::Sin => "sin",
            MathFn::Cos => "cos",
            MathFn::Tan => "tan",
            MathFn::Tanh => "tanh",
            MathFn::Sigmoid => "sigmoid",
            MathFn::Pow => "pow",
            MathFn::Fma => "fma",
        }
    }

    /// The function called `T.{name}`.
    pub fn parse(name: &str) -> Option<MathFn> {
        MathFn::ALL.iter().copied().find(|f| f.name() == name)
    }

    /// How many arguments it takes.
    pub fn arity(self) -> usize {
        self.params().len()
    }

    /// The argument names, for keyword binding and messages.
    pub fn params(self) -> &'static [&'static str] {
        match self {
            MathFn::Pow => &["x", "y"],
            MathFn::Fma => &["a", "b", "c"],
            _ => &["x"],
        }
    }

    /// Whether the function takes arguments of `dtype` (the result has the same dtype).
    /// Integers: `abs` only. float64: the functions PTX computes exactly or has a float64
    /// form of (`sqrt.rn.f64`, `rsqrt.approx.f64`, `abs`, the `cvt` roundings); the
    /// transcendental functions have no float64 form in PTX. fp8: none (convert first).
    pub fn takes(self, dtype: DType) -> bool {
        if self == MathFn::Fma {
            // `fma.rn.f32`; the narrow floats' products are not fused (they round to their
            // dtype at every operation), float64's not written yet.
            return dtype == DType::Float32;
        }
        match dtype {
            DType::Float16 | DType::BFloat16 | DType::Float32 => true,
            DType::Float64 => self.exact_in_f64(),
            DType::Int8 | DType::Int16 | DType::Int32 | DType::Int64 => self == MathFn::Abs,
            _ => false,
        }
    }

    /// The functions with a float64 form.
    fn exact_in_f64(self) -> bool {
        matches!(
            self,
            MathFn::Sqrt
                | MathFn::Rsqrt
                | MathFn::Abs
                | MathFn::Floor
                | MathFn::Ceil
                | MathFn::Trunc
                | MathFn::Nearbyint
        )
    }

    /// The exact value (the interpreter's semantics, before rounding to the dtype) of the
    /// function at `args` (missing arguments read as 0). `fma` is exact here only for
    /// float64 values: the interpreter computes float32's in float32 (`interp::scalar::math`,
    /// one rounding), never as this value rounded again.
    pub fn eval(self, args: &[f64]) -> f64 {
        let arg = |i: usize| args.get(i).copied().unwrap_or(0.0);
        let (x, y) = (arg(0), arg(1));
        match self {
            MathFn::Exp => x.exp(),
            MathFn::Exp2 => x.exp2(),
            MathFn::Exp10 => 10f64.powf(x),
            MathFn::Log => x.ln(),
            MathFn::Log2 => x.log2(),
            MathFn::Log10 => x.log10(),
            MathFn::Sqrt => x.sqrt(),
            MathFn::Rsqrt => 1.0 / x.sqrt(),
            MathFn::Abs => x.abs(),
            MathFn::Floor => x.floor(),
            MathFn::Ceil => x.ceil(),
            MathFn::Trunc => x.trunc(),
            MathFn::Nearbyint => x.round_ties_even(),
            MathFn::Sin => x.sin(),
            MathFn::Cos => x.cos(),
            MathFn::Tan => x.tan(),
            MathFn::Tanh => x.tanh(),
            MathFn::Sigmoid => 1.0 / (1.0 + (-x).exp()),
            // Defined as 2^(y·log2 x) (CUDA's fast `__powf`, what the GPU computes): NaN
            // for x < 0 and for x = y = 0.
            MathFn::Pow => (y * x.log2()).exp2(),
            MathFn::Fma => x.mul_add(y, arg(2)),
        }
    }

    /// `T.abs` on an integer (wrapping at the dtype's minimum, like PTX `abs.s32`).
    pub fn eval_int(self, x: i64) -> i64 {
        x.wrapping_abs()
    }

    /// The GPU's error against the exact value for float32 evaluation, as a bound on
    /// `|gpu - exact|` of the form `abs + rel · |exact|` (PTX ISA's bounds for the fast
    /// forms on their full range, widened by the float32 rounding of the argument scalings
    /// `x · log2(e)`; the tests compare with these). `None`: exact (one rounding).
    pub fn f32_error(self) -> Option<(f64, f64)> {
        const ULP: f64 = 1.0 / (1u64 << 23) as f64;
        // float32's smallest normal number, 2^-126.
        const MIN_NORMAL: f64 = f32::MIN_POSITIVE as f64;
        Some(match self {
            MathFn::Sqrt
            | MathFn::Abs
            | MathFn::Floor
            | MathFn::Ceil
            | MathFn::Trunc
            | MathFn::Nearbyint
            | MathFn::Fma => return None,
            // ex2.approx.ftz: 2 ulp, and results below 2^-126 (subnormal) flushed to zero;
            // the scaling of x by log2(e) / log2(10) adds |x|·ulp·ln2 relative error,
            // bounded for |x| < 128 (larger |x| under- or overflows).
            MathFn::Exp2 => (MIN_NORMAL, 2.0 * ULP),
            MathFn::Exp | MathFn::Exp10 | MathFn::Sigmoid | MathFn::Pow => {
                (MIN_NORMAL, 128.0 * ULP)
            }
            // lg2.approx: 2^-22.6 absolute near 1, 2 ulp relative elsewhere.
            MathFn::Log | MathFn::Log2 | MathFn::Log10 => (1.0 / (1u64 << 22) as f64, 4.0 * ULP),
            MathFn::Rsqrt => (0.0, 2.0 * ULP),
            // sin / cos.approx: 2^-20.5 absolute in [-π, π] (larger arguments lose more).
            MathFn::Sin | MathFn::Cos => (1.0 / (1u64 << 20) as f64, 0.0),
            MathFn::Tan => (1.0 / (1u64 << 18) as f64, 1.0 / (1u64 << 18) as f64),
            // tanh.approx.f32: 2^-10.987 relative.
            MathFn::Tanh => (1.0 / (1u64 << 21) as f64, 1.0 / (1u64 << 10) as f64),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_arity() {
        for f in MathFn::ALL {
            assert_eq!(MathFn::parse(f.name()), Some(f));
            assert_eq!(f.params().len(), f.arity());
        }
        assert_eq!(MathFn::parse("erf"), None);
    }

    #[test]
    fn exact_values() {
        assert_eq!(MathFn::Exp2.eval(&[3.0, 0.0]), 8.0);
        assert_eq!(MathFn::Nearbyint.eval(&[2.5, 0.0]), 2.0);
        assert_eq!(MathFn::Nearbyint.eval(&[3.5, 0.0]), 4.0);
        assert_eq!(MathFn::Rsqrt.eval(&[4.0, 0.0]), 0.5);
        assert_eq!(MathFn::Pow.eval(&[2.0, 10.0]), 1024.0);
        assert!(MathFn::Pow.eval(&[-2.0, 2.0]).is_nan());
        assert_eq!(MathFn::Pow.eval(&[0.0, 3.0]), 0.0);
        assert_eq!(MathFn::Sigmoid.eval(&[0.0, 0.0]), 0.5);
        assert_eq!(MathFn::Abs.eval_int(i64::MIN), i64::MIN);
        assert!(MathFn::Log.eval(&[-1.0, 0.0]).is_nan());
        assert_eq!(MathFn::Fma.eval(&[3.0, 4.0, -5.0]), 7.0);
        assert_eq!(MathFn::Fma.arity(), 3);
    }

    #[test]
    fn dtypes() {
        assert!(MathFn::Exp.takes(DType::Float16));
        assert!(!MathFn::Exp.takes(DType::Float64));
        assert!(MathFn::Sqrt.takes(DType::Float64));
        assert!(MathFn::Abs.takes(DType::Int32));
        assert!(!MathFn::Exp.takes(DType::Int32));
        assert!(!MathFn::Abs.takes(DType::Float8E4M3));
    }
}
