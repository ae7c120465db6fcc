//! Scalar values and the arithmetic of every dtype: conversions (rounding, wrapping,
//! saturation) and the operators, in one place so that expressions, stores and tile ops all
//! agree.
//!
//! Representation: an integer of any width is an `i64` holding a value already wrapped into
//! its dtype's range; a float of any format is an `f64` holding a value exactly representable
//! in its dtype; a bool is a `bool`.

use crate::dtype::DType;
use crate::interp::fp8;
use crate::ir::{floor_div, floor_mod, BinOp, MathFn};
use half::{bf16, f16};

/// One value of some dtype (the dtype is known from context).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scalar {
    Int(i64),
    Float(f64),
    Bool(bool),
}

impl Scalar {
    /// The value as an `f64` (ints may round beyond 2^53; bools are 0 / 1).
    pub fn as_f64(self) -> f64 {
        match self {
            Scalar::Int(v) => v as f64,
            Scalar::Float(x) => x,
            Scalar::Bool(b) => f64::from(u8::from(b)),
        }
    }

    /// The value as an `i64` (floats truncate toward zero, saturating, NaN → 0).
    pub fn as_i64(self) -> i64 {
        match self {
            Scalar::Int(v) => v,
            Scalar::Float(x) => x as i64,
            Scalar::Bool(b) => i64::from(b),
        }
    }

    /// Truthiness: non-zero (NaN included) is true.
    pub fn as_bool(self) -> bool {
        match self {
            Scalar::Int(v) => v != 0,
            Scalar::Float(x) => x != 0.0,
            Scalar::Bool(b) => b,
        }
    }

    /// The zero of `dtype`.
    pub fn zero(dtype: DType) -> Scalar {
        convert(Scalar::Int(0), dtype)
    }
}

/// Converts a value to `to`:
/// - to a float: round to nearest even (fp8: saturating, see `fp8`); f16 / bf16 through `half`;
/// - to an integer: integers wrap to the width (two's complement), floats truncate toward
///   zero and saturate to the range, NaN → 0 (PTX `cvt.rzi.sat`);
/// - to bool: non-zero is true; from bool: 1 / 0.
pub fn convert(v: Scalar, to: DType) -> Scalar {
    if to.is_bool() {
        Scalar::Bool(v.as_bool())
    } else if to.is_int() {
        Scalar::Int(match v {
            Scalar::Int(i) => wrap_int(to, i),
            Scalar::Float(x) => float_to_int(to, x),
            Scalar::Bool(b) => i64::from(b),
        })
    } else {
        Scalar::Float(match v {
            // i64 → f32 directly, so that it is rounded once.
            Scalar::Int(i) if to == DType::Float32 => f64::from(i as f32),
            other => round_float(to, other.as_f64()),
        })
    }
}

/// Wraps an integer to the width and signedness of `to` (an integer dtype).
pub fn wrap_int(to: DType, v: i64) -> i64 {
    match to {
        // Sign-extends the low nibble.
        DType::Int4 => i64::from(((v as u8) << 4) as i8 >> 4),
        DType::Int8 => i64::from(v as i8),
        DType::Int16 => i64::from(v as i16),
        DType::Int32 => i64::from(v as i32),
        DType::UInt8 => i64::from(v as u8),
        DType::UInt16 => i64::from(v as u16),
        DType::UInt32 => i64::from(v as u32),
        _ => v,
    }
}

/// The result of int arithmetic in `d`: int32 (the index type) is exact — it wraps only
/// when converted (a cast from another dtype, a store) — every other integer dtype wraps to
/// its width. `widen-indices` and code generation compute int32 in 64 bits wherever the
/// value may leave int32, so the GPU agrees.
fn exact_or_wrap(d: DType, v: i64) -> i64 {
    if d == DType::Int32 {
        v
    } else {
        wrap_int(d, v)
    }
}

/// Float → integer: truncate toward zero, saturate, NaN → 0 (Rust `as` semantics).
fn float_to_int(to: DType, x: f64) -> i64 {
    match to {
        DType::Int4 => (x as i64).clamp(-8, 7),
        DType::Int8 => i64::from(x as i8),
        DType::Int16 => i64::from(x as i16),
        DType::Int32 => i64::from(x as i32),
        DType::UInt8 => i64::from(x as u8),
        DType::UInt16 => i64::from(x as u16),
        DType::UInt32 => i64::from(x as u32),
        _ => x as i64,
    }
}

/// Rounds `x` to the nearest value of float dtype `to`.
pub fn round_float(to: DType, x: f64) -> f64 {
    match to {
        DType::Float16 => f16::from_f64(x).to_f64(),
        DType::BFloat16 => bf16::from_f64(x).to_f64(),
        DType::Float32 => f64::from(x as f32),
        DType::Float8E4M3 => fp8::round(fp8::E4M3, x),
        DType::Float8E5M2 => fp8::round(fp8::E5M2, x),
        _ => x,
    }
}

/// Why an operator has no result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArithError {
    IntDivByZero,
}

/// `a op b` for an arithmetic operator, both operands and the result of dtype `d`.
///
/// Integers: computed on i64 with wrap-around, then wrapped to `d`'s width; `/` truncates,
/// `//` floors, `%` is the floor modulo; a zero divisor is an error. Floats: float64 in
/// f64; every other float dtype in f32, rounded back to `d` (IEEE: x / 0 is ±inf or NaN).
pub fn arith(op: BinOp, d: DType, a: Scalar, b: Scalar) -> Result<Scalar, ArithError> {
    if d.is_int() {
        let (x, y) = (a.as_i64(), b.as_i64());
        let r = match op {
            BinOp::Add => x.wrapping_add(y),
            BinOp::Sub => x.wrapping_sub(y),
            BinOp::Mul => x.wrapping_mul(y),
            BinOp::Div | BinOp::FloorDiv | BinOp::FloorMod | BinOp::CeilDiv if y == 0 => {
                return Err(ArithError::IntDivByZero)
            }
            // `y == -1` is the only overflow case (i64::MIN / -1): wrap like the hardware.
            BinOp::Div | BinOp::FloorDiv if y == -1 => x.wrapping_neg(),
            BinOp::CeilDiv if y == -1 => x.wrapping_neg(),
            BinOp::FloorMod if y == -1 => 0,
            BinOp::Div => x / y,
            BinOp::FloorDiv => floor_div(x, y).unwrap_or(0),
            BinOp::FloorMod => floor_mod(x, y).unwrap_or(0),
            // ceil(x / y) = -floor(-x / y).
            BinOp::CeilDiv => floor_div(x.wrapping_neg(), y).unwrap_or(0).wrapping_neg(),
            BinOp::Min => x.min(y),
            BinOp::Max => x.max(y),
            BinOp::BitAnd | BinOp::BitOr | BinOp::BitXor | BinOp::Shl | BinOp::Shr => {
                return Ok(Scalar::Int(bitwise(op, d, x, y)))
            }
            _ => 0,
        };
        return Ok(Scalar::Int(exact_or_wrap(d, r)));
    }
    let (x, y) = (a.as_f64(), b.as_f64());
    if d == DType::Float64 {
        return Ok(Scalar::Float(float_op(op, x, y)));
    }
    let r = f64::from(float_op(op, x as f32, y as f32));
    Ok(Scalar::Float(if d == DType::Float32 {
        r
    } else {
        round_float(d, r)
    }))
}

/// The float operators, generic over f32 / f64.
fn float_op<F: num_like::Float>(op: BinOp, x: F, y: F) -> F {
    match op {
        BinOp::Add => x + y,
        BinOp::Sub => x - y,
        BinOp::Mul => x * y,
        BinOp::Div => x / y,
        BinOp::FloorDiv => (x / y).floor(),
        // Python's float `%`: the result has the sign of the divisor.
        BinOp::FloorMod => x - (x / y).floor() * y,
        BinOp::Min => x.min(y),
        BinOp::Max => x.max(y),
        _ => x,
    }
}

/// `& | ^ << >>` on integers of dtype `d`, as the hardware computes them at the dtype's
/// width (int32 included, unlike `+`: a bit operation has no "exact" value beyond its width).
/// A shift count is read as unsigned and clamped to the width (PTX `shl` / `shr`): `x << n`
/// for `n` ≥ width is 0, `x >> n` the sign fill (0 for unsigned dtypes).
fn bitwise(op: BinOp, d: DType, x: i64, y: i64) -> i64 {
    let bits = i64::from(d.bits());
    let (x, y) = (wrap_int(d, x), wrap_int(d, y));
    let unsigned = d.is_unsigned();
    // The count as the hardware reads it: the operand's bits as an unsigned number.
    let count = if y < 0 { bits } else { y.min(bits) };
    let mask: u64 = if bits == 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    let r = match op {
        BinOp::BitAnd => x & y,
        BinOp::BitOr => x | y,
        BinOp::BitXor => x ^ y,
        BinOp::Shl if count >= bits => 0,
        BinOp::Shl => ((x as u64) << count) as i64,
        BinOp::Shr if unsigned => {
            let u = (x as u64) & mask;
            if count >= bits {
                0
            } else {
                (u >> count) as i64
            }
        }
        // Arithmetic: x is sign-extended in i64, so shifting it keeps the sign fill.
        _ => x >> count.min(63),
    };
    wrap_int(d, r)
}

/// `~a` on an integer of dtype `d`.
pub fn bit_not(d: DType, a: Scalar) -> Scalar {
    Scalar::Int(wrap_int(d, !wrap_int(d, a.as_i64())))
}

/// Math function `f` (`math.rs`) on `args` of dtype `d`: exact, rounded once to `d`.
/// float32's `fma` is computed in float32 (`f32::mul_add`, one rounding): its exact value
/// rounded through float64 first could round twice.
pub fn math(f: MathFn, d: DType, args: &[Scalar]) -> Scalar {
    let arg = |i: usize| args.get(i).copied().unwrap_or(Scalar::zero(d));
    if d.is_int() {
        return Scalar::Int(wrap_int(d, f.eval_int(arg(0).as_i64())));
    }
    if f == MathFn::Fma && d == DType::Float32 {
        let x = |i: usize| arg(i).as_f64() as f32;
        return Scalar::Float(f64::from(x(0).mul_add(x(1), x(2))));
    }
    let xs = [arg(0).as_f64(), arg(1).as_f64(), arg(2).as_f64()];
    Scalar::Float(round_float(d, f.eval(&xs[..args.len().min(3)])))
}

/// `-a` in dtype `d`.
pub fn neg(d: DType, a: Scalar) -> Scalar {
    match a {
        Scalar::Int(v) => Scalar::Int(exact_or_wrap(d, v.wrapping_neg())),
        Scalar::Float(x) => Scalar::Float(-x),
        Scalar::Bool(b) => Scalar::Bool(b),
    }
}

/// `a op b` for a comparison, both operands of dtype `d`.
pub fn compare(op: BinOp, d: DType, a: Scalar, b: Scalar) -> bool {
    let ord = if d.is_int() {
        a.as_i64().partial_cmp(&b.as_i64())
    } else {
        a.as_f64().partial_cmp(&b.as_f64())
    };
    use std::cmp::Ordering::*;
    match (op, ord) {
        // NaN compares unequal to everything and is neither less nor greater.
        (BinOp::Ne, None) => true,
        (_, None) => false,
        (BinOp::Lt, Some(o)) => o == Less,
        (BinOp::Le, Some(o)) => o != Greater,
        (BinOp::Gt, Some(o)) => o == Greater,
        (BinOp::Ge, Some(o)) => o != Less,
        (BinOp::Eq, Some(o)) => o == Equal,
        (BinOp::Ne, Some(o)) => o != Equal,
        _ => false,
    }
}

/// The few float operations `float_op` needs, for f32 and f64.
mod num_like {
    use std::ops::{Add, Div, Mul, Sub};

    pub trait Float:
        Copy + Add<Output = Self> + Sub<Output = Self> + Mul<Output = Self> + Div<Output = Self>
    {
        fn floor(self) -> Self;
        fn min(self, other: Self) -> Self;
        fn max(self, other: Self) -> Self;
    }

    macro_rules! impl_float {
        ($t:ty) => {
            impl Float for $t {
                fn floor(self) -> Self {
                    <$t>::floor(self)
                }
                fn min(self, other: Self) -> Self {
                    <$t>::min(self, other)
                }
                fn max(self, other: Self) -> Self {
                    <$t>::max(self, other)
                }
            }
        };
    }
    impl_float!(f32);
    impl_float!(f64);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions() {
        assert_eq!(convert(Scalar::Int(300), DType::Int8), Scalar::Int(44));
        assert_eq!(
            convert(Scalar::Int(-1), DType::UInt32),
            Scalar::Int(4294967295)
        );
        assert_eq!(convert(Scalar::Float(-3.7), DType::Int32), Scalar::Int(-3));
        assert_eq!(
            convert(Scalar::Float(1e20), DType::Int32),
            Scalar::Int(2147483647)
        );
        assert_eq!(
            convert(Scalar::Float(f64::NAN), DType::Int32),
            Scalar::Int(0)
        );
        assert_eq!(convert(Scalar::Float(-5.0), DType::UInt8), Scalar::Int(0));
        assert_eq!(
            convert(Scalar::Float(0.1), DType::Float16),
            Scalar::Float(0.0999755859375)
        );
        assert_eq!(
            convert(Scalar::Float(70000.0), DType::Float16),
            Scalar::Float(f64::INFINITY)
        );
        assert_eq!(
            convert(Scalar::Float(1.00390625), DType::BFloat16),
            Scalar::Float(1.0)
        );
        assert_eq!(convert(Scalar::Int(7), DType::Bool), Scalar::Bool(true));
        assert_eq!(
            convert(Scalar::Bool(true), DType::Float32),
            Scalar::Float(1.0)
        );
    }

    #[test]
    fn integer_operators() {
        let i = |v| Scalar::Int(v);
        let d = DType::Int32;
        assert_eq!(arith(BinOp::Div, d, i(-7), i(2)), Ok(i(-3)));
        assert_eq!(arith(BinOp::FloorDiv, d, i(-7), i(2)), Ok(i(-4)));
        assert_eq!(arith(BinOp::FloorMod, d, i(-7), i(2)), Ok(i(1)));
        assert_eq!(arith(BinOp::CeilDiv, d, i(7), i(2)), Ok(i(4)));
        assert_eq!(arith(BinOp::CeilDiv, d, i(-7), i(2)), Ok(i(-3)));
        // int32 arithmetic is exact (it wraps only when converted); other widths wrap.
        assert_eq!(
            arith(BinOp::Add, d, i(i32::MAX as i64), i(1)),
            Ok(i(i64::from(i32::MAX) + 1))
        );
        assert_eq!(
            arith(BinOp::Add, DType::Int8, i(i8::MAX as i64), i(1)),
            Ok(i(i8::MIN as i64))
        );
        assert_eq!(
            convert(i(i64::from(i32::MAX) + 1), DType::Int32),
            i(i32::MIN as i64)
        );
        assert_eq!(
            arith(BinOp::FloorMod, d, i(5), i(0)),
            Err(ArithError::IntDivByZero)
        );
        assert_eq!(
            arith(BinOp::Div, DType::Int64, i(i64::MIN), i(-1)),
            Ok(i(i64::MIN))
        );
    }

    #[test]
    fn bit_operators_work_at_the_dtype_width() {
        let i = |v| Scalar::Int(v);
        let d = DType::Int32;
        assert_eq!(
            arith(BinOp::Shl, d, i(1), i(31)),
            Ok(i(i64::from(i32::MIN)))
        );
        assert_eq!(arith(BinOp::Shl, d, i(1), i(32)), Ok(i(0)));
        assert_eq!(arith(BinOp::Shr, d, i(-8), i(1)), Ok(i(-4)));
        assert_eq!(arith(BinOp::Shr, d, i(-8), i(40)), Ok(i(-1)));
        assert_eq!(arith(BinOp::Shr, DType::UInt8, i(0xf0), i(4)), Ok(i(0x0f)));
        assert_eq!(
            arith(BinOp::Shr, DType::UInt32, i(0xffff_ffff), i(31)),
            Ok(i(1))
        );
        assert_eq!(arith(BinOp::BitAnd, d, i(0xff), i(0x0f)), Ok(i(0x0f)));
        assert_eq!(
            arith(BinOp::BitXor, DType::Int8, i(-1), i(0x0f)),
            Ok(i(-16))
        );
        assert_eq!(arith(BinOp::Shl, DType::Int8, i(1), i(7)), Ok(i(-128)));
        assert_eq!(bit_not(DType::UInt8, i(0x0f)), i(0xf0));
        assert_eq!(bit_not(d, i(0)), i(-1));
    }

    #[test]
    fn math_rounds_once_to_the_dtype() {
        let f = Scalar::Float;
        assert_eq!(math(MathFn::Exp2, DType::Float16, &[f(-1.0)]), f(0.5));
        let e = math(MathFn::Exp, DType::Float32, &[f(1.0)]);
        assert_eq!(e, f(f64::from(std::f32::consts::E)));
        assert_eq!(
            math(MathFn::Abs, DType::Int32, &[Scalar::Int(-3)]),
            Scalar::Int(3)
        );
        assert_eq!(
            math(MathFn::Sqrt, DType::Float64, &[f(2.0)]),
            f(2f64.sqrt())
        );
    }

    #[test]
    fn fma_rounds_once_in_float32() {
        let f = Scalar::Float;
        // (1 + 2^-12)^2 - 1 = 2^-11 + 2^-24: the product rounded to float32 first loses the
        // 2^-24 (a tie, to even); fused, it stays.
        let a = 1.0 + 2f64.powi(-12);
        let fused = math(MathFn::Fma, DType::Float32, &[f(a), f(a), f(-1.0)]);
        assert_eq!(fused, f(2f64.powi(-11) + 2f64.powi(-24)));
        let product = arith(BinOp::Mul, DType::Float32, f(a), f(a)).unwrap_or(f(0.0));
        let twice = arith(BinOp::Add, DType::Float32, product, f(-1.0)).unwrap_or(f(0.0));
        assert_eq!(twice, f(2f64.powi(-11)));
    }

    #[test]
    fn float_operators_round_to_the_dtype() {
        let f = Scalar::Float;
        // 2049 is not a float16: the f32 sum 2048 + 1 rounds to even (2048).
        assert_eq!(
            arith(BinOp::Add, DType::Float16, f(2048.0), f(1.0)),
            Ok(f(2048.0))
        );
        assert_eq!(
            arith(BinOp::Add, DType::Float32, f(2048.0), f(1.0)),
            Ok(f(2049.0))
        );
        assert_eq!(
            arith(BinOp::FloorMod, DType::Float32, f(-7.0), f(2.0)),
            Ok(f(1.0))
        );
        assert!(compare(BinOp::Ne, DType::Float32, f(f64::NAN), f(1.0)));
        assert!(!compare(
            BinOp::Eq,
            DType::Float32,
            f(f64::NAN),
            f(f64::NAN)
        ));
    }
}
