//! Math functions (`T.exp`, `T.sqrt`, … — `tlc_ir::math`) in PTX. float16, bfloat16, fp8
//! and float32 arguments are computed in float32 and rounded back to their dtype once, as
//! the interpreter does; the transcendental functions use PTX's fast forms (`ex2.approx.ftz`,
//! `lg2.approx`, `rsqrt.approx`, `sin/cos.approx`, `tanh.approx`), whose error bounds
//! `MathFn::f32_error` states. `sqrt`, `abs`, `floor`, `ceil`, `trunc` and `nearbyint` are
//! exact (`sqrt.rn`, `abs`, `cvt.rmi/rpi/rzi/rni`), and so is float32 `fma` (`fma.rn.f32`).
//! Integer `abs` is `abs.s32` / `abs.s64` (wrapped back for int8).

use super::expr::is_narrow_float;
use super::Cg;
use crate::ptx::{CvtRound, FRound, FloatFn, FloatMode, FloatOp, Operand, Reg, Type, UnOp};
use tlc_ir::{DType, Expr, MathFn, Span};

const LOG2_E: f32 = std::f32::consts::LOG2_E;
const LOG2_10: f32 = std::f32::consts::LOG2_10;
const LN_2: f32 = std::f32::consts::LN_2;
const LOG10_2: f32 = std::f32::consts::LOG10_2;

impl Cg {
    /// `f(args)` as a value of dtype `d` (the arguments' common dtype).
    pub(super) fn math(
        &mut self,
        f: MathFn,
        args: &[Expr],
        d: DType,
        span: Span,
    ) -> Option<Operand> {
        if !f.takes(d) || args.len() != f.arity() {
            self.err(span, format!("T.{} does not take {d}", f.name()));
            return None;
        }
        if d.is_int() {
            let ty = self.ty(d, span)?;
            let x = self.expr_as(args.first()?, d)?;
            let x = self.in_reg(x, ty);
            let r = self.b.unary(UnOp::Abs, ty, x);
            // abs(-128) leaves int8.
            return Some(self.wrap_byte(r, d).into());
        }
        if !(is_narrow_float(d) || d == DType::Float32) {
            self.err(
                span,
                format!("codegen does not support T.{} on {d}", f.name()),
            );
            return None;
        }
        if f == MathFn::Fma {
            return self.fma_f32(args, span);
        }
        let mut xs = Vec::with_capacity(args.len());
        for a in args {
            // Each argument in its dtype first (a literal rounds to it, as in the
            // interpreter), then exactly widened to float32.
            let v = self.expr_as(a, d)?;
            let v = self.convert(v, d, DType::Float32);
            xs.push(v);
        }
        let x = *xs.first()?;
        let r = match f {
            // Returned above.
            MathFn::Fma => return None,
            MathFn::Exp2 => self.approx(FloatFn::Ex2, x),
            MathFn::Exp => self.exp2_of_scaled(x, LOG2_E),
            MathFn::Exp10 => self.exp2_of_scaled(x, LOG2_10),
            MathFn::Log2 => self.approx(FloatFn::Lg2, x),
            MathFn::Log => {
                let l = self.approx(FloatFn::Lg2, x);
                self.mul(l, LN_2)
            }
            MathFn::Log10 => {
                let l = self.approx(FloatFn::Lg2, x);
                self.mul(l, LOG10_2)
            }
            MathFn::Sqrt => {
                self.b
                    .float_fn(FloatFn::Sqrt, FloatMode::Round(FRound::Rn), Type::F32, x)
            }
            MathFn::Rsqrt => self.approx(FloatFn::Rsqrt, x),
            MathFn::Abs => self.b.unary(UnOp::Abs, Type::F32, x),
            MathFn::Floor => self.round_to_int(CvtRound::Rmi, x),
            MathFn::Ceil => self.round_to_int(CvtRound::Rpi, x),
            MathFn::Trunc => self.round_to_int(CvtRound::Rzi, x),
            MathFn::Nearbyint => self.round_to_int(CvtRound::Rni, x),
            MathFn::Sin => self.approx(FloatFn::Sin, x),
            MathFn::Cos => self.approx(FloatFn::Cos, x),
            MathFn::Tan => {
                let s = self.approx(FloatFn::Sin, x);
                let c = self.approx(FloatFn::Cos, x);
                self.b.float(FloatOp::Div, Type::F32, s, c)
            }
            MathFn::Tanh => self.approx(FloatFn::Tanh, x),
            MathFn::Sigmoid => {
                // 1 / (1 + 2^(-x·log2 e)).
                let e = self.exp2_of_scaled(x, -LOG2_E);
                let one_plus = self.b.float(FloatOp::Add, Type::F32, e, Operand::F32(1.0));
                self.b
                    .float(FloatOp::Div, Type::F32, Operand::F32(1.0), one_plus)
            }
            MathFn::Pow => {
                // 2^(y · log2 x) (NaN for x < 0, as CUDA's fast `__powf`).
                let y = *xs.get(1)?;
                let l = self.approx(FloatFn::Lg2, x);
                let p = self.b.float(FloatOp::Mul, Type::F32, l, y);
                self.approx(FloatFn::Ex2, p)
            }
        };
        Some(self.convert(r.into(), DType::Float32, d).into())
    }

    /// `T.fma(a, b, c)` (float32 only, `MathFn::takes`): `fma.rn.f32`, literals as
    /// immediates (the product's first factor in a register).
    fn fma_f32(&mut self, args: &[Expr], span: Span) -> Option<Operand> {
        let [a, b, c] = args else {
            self.err(span, "T.fma takes 3 arguments");
            return None;
        };
        let x = self.expr_as(a, DType::Float32)?;
        let x = self.in_reg(x, Type::F32);
        let y = self.expr_as(b, DType::Float32)?;
        let z = self.expr_as(c, DType::Float32)?;
        Some(self.b.fma(Type::F32, x, y, z).into())
    }

    /// `func.approx.f32`; `ex2` in its `.ftz` form: without it ptxas wraps each MUFU.EX2 in
    /// a range test and two scalings (for subnormal results), four instructions instead of
    /// one, and a softmax issues one per element. The flushed results are below 2^-126
    /// (`MathFn::f32_error`'s absolute term).
    fn approx(&mut self, func: FloatFn, x: Reg) -> Reg {
        let mode = match func {
            FloatFn::Ex2 => FloatMode::ApproxFtz,
            _ => FloatMode::Approx,
        };
        self.b.float_fn(func, mode, Type::F32, x)
    }

    fn mul(&mut self, x: Reg, c: f32) -> Reg {
        self.b.float(FloatOp::Mul, Type::F32, x, Operand::F32(c))
    }

    /// `2^(x · c)`.
    fn exp2_of_scaled(&mut self, x: Reg, c: f32) -> Reg {
        let t = self.mul(x, c);
        self.approx(FloatFn::Ex2, t)
    }

    /// `cvt.{rmi,rpi,rzi,rni}.f32.f32`: rounding to an integral float, exact.
    fn round_to_int(&mut self, round: CvtRound, x: Reg) -> Reg {
        self.b.cvt_with(Some(round), false, Type::F32, Type::F32, x)
    }
}
