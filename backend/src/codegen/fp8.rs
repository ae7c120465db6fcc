//! fp8 (`float8_e4m3`, `float8_e5m2`) conversions in PTX, bit for bit the interpreter's
//! (`tlc_ir::interp::fp8`): decoding is exact; encoding rounds to nearest, ties to even,
//! with subnormals, saturates beyond the largest finite value (infinities included) to
//! ± max finite, and keeps NaN a NaN (`S.1111111`, the sign kept).
//!
//! An fp8 value lives as its bits in the low byte of a `.b16` register (`mod.rs`,
//! `ptx_type`); every conversion goes through f32 (`expr.rs`, `convert`), which holds every
//! fp8 value exactly.
//!
//! - Targets with the fp8 `cvt` (`TargetDesc::fp8_convert`: sm_90a) use it:
//!   `cvt.rn.satfinite.{e4m3x2|e5m2x2}.f32 d, 0.0, x` (the value in the low byte, 0 in the
//!   high one) and `cvt.rn.f16x2.{e4m3x2|e5m2x2}` then `cvt.f32.f16` (exact: f16 holds every
//!   fp8 value). The hardware writes every NaN as `0x7F` (measured on an H200: the sign is
//!   dropped), so a NaN's byte is taken from the f32 instead: its top byte, `S.1111111`, is
//!   the interpreter's NaN (`setp.nan` + `selp`, four instructions).
//! - sm_80 has none: `encode_words` / `decode_words` are integer and f32 sequences on the
//!   value's 32 bits. Normal results round by integer addition (half an ulp minus one plus
//!   the kept part's lowest bit, which also carries into the exponent); subnormal results by
//!   one f32 addition of a power of two whose ulp is the fp8 subnormal step (the hardware
//!   rounds to nearest even exactly there); selects saturate and keep NaN. Decoding shifts
//!   the fields into f32 position and multiplies by a power of two (exact, subnormals
//!   included), then selects NaN (e4m3 `0x7F`) or infinity / NaN (e5m2 exponent all ones).
//!
//! The sequences are written once, generic over [`Words`]: codegen runs them on the PTX
//! builder (one instruction per step), the tests on `u32`s, so the tests check exactly the
//! emitted instructions — every fp8 code decoded, and every f32 whose bits matter encoded
//! (each exponent × the leading mantissa bits × sticky patterns, both signs, infinities and
//! NaNs) against `tlc_ir::interp::fp8`, plus every 1021st of all 2^32 bit patterns.

use super::expr::fp8_format;
use super::Cg;
use crate::ptx::{
    Cmp, FRound, FloatMode, FloatOp, Fp8Kind, IntOp, KernelBuilder, Op, Operand, Reg, Type,
};
use tlc_ir::interp::fp8::Fp8Format;
use tlc_ir::DType;

/// An operand of a step: a value computed earlier or a constant.
#[derive(Clone, Copy, Debug)]
pub(super) enum Arg<V> {
    Val(V),
    Imm(u32),
}

/// The unsigned comparisons a select is made by.
#[derive(Clone, Copy, Debug)]
pub(super) enum UCmp {
    Lt,
    Gt,
    Ge,
    Eq,
}

/// What the sequences are written in: 32-bit words, with the integer instructions PTX has
/// (wrapping `add`, logical shifts) and f32 arithmetic (round to nearest even, subnormals
/// kept) on a word's bits.
pub(super) trait Words {
    type V: Copy;
    /// `and.b32 d, a, m`.
    fn and(&mut self, a: Self::V, m: u32) -> Self::V;
    /// `or.b32 d, a, b`.
    fn or(&mut self, a: Self::V, b: Arg<Self::V>) -> Self::V;
    /// `shl.b32 d, a, k`.
    fn shl(&mut self, a: Self::V, k: u32) -> Self::V;
    /// `shr.u32 d, a, k`.
    fn shr(&mut self, a: Self::V, k: u32) -> Self::V;
    /// `add.u32 d, a, b` (wrapping).
    fn add(&mut self, a: Self::V, b: Arg<Self::V>) -> Self::V;
    /// `add.rn.f32` of `a`'s bits and `c`, as bits.
    fn fadd(&mut self, a: Self::V, c: f32) -> Self::V;
    /// `mul.rn.f32` of `a`'s bits and `c`, as bits.
    fn fmul(&mut self, a: Self::V, c: f32) -> Self::V;
    /// `setp.cmp.u32 p, a, b; selp.b32 d, then, els, p`.
    fn select(
        &mut self,
        cmp: UCmp,
        a: Self::V,
        b: u32,
        then: Arg<Self::V>,
        els: Self::V,
    ) -> Self::V;
}

/// The constants of the sequences for one format.
struct Consts {
    /// Mantissa bits of the format.
    m: u32,
    /// `127 - bias`: the f32 exponent of the format's exponent field 0.
    rebias: u32,
    /// `(127 + emin) << 23`: the bits of the smallest normal, 2^(1 - bias).
    min_normal: u32,
    /// The bits of the largest finite value as an f32.
    max_finite: u32,
    max_code: u32,
    /// 2^(emin - m + 23): its f32 ulp is the format's subnormal step.
    magic: f32,
    has_inf: bool,
}

impl Consts {
    fn of(f: Fp8Format) -> Consts {
        let m = f.man_bits();
        let bias = u32::try_from(f.bias()).unwrap_or(0);
        let emin = 1 - f.bias();
        Consts {
            m,
            rebias: 127 - bias,
            min_normal: ((127 + emin) as u32) << 23,
            max_finite: (f.max_finite() as f32).to_bits(),
            max_code: u32::from(f.max_bits()),
            magic: 2f32.powi(emin - m as i32 + 23),
            has_inf: f.has_inf(),
        }
    }
}

/// f32 bits `x` → the fp8 bits of format `f` (low byte; the other bits 0).
pub(super) fn encode_words<W: Words>(w: &mut W, f: Fp8Format, x: W::V) -> W::V {
    let c = Consts::of(f);
    let shift = 23 - c.m;
    let a = w.and(x, 0x7FFF_FFFF);
    let sign = w.shr(x, 24);
    let sign = w.and(sign, 0x80);
    // Normal results: keep the top m mantissa bits, rounding to nearest even (add half an
    // ulp minus one, plus the lowest kept bit; a carry moves into the exponent), and rebias
    // the exponent in the same addition.
    let odd = w.shr(a, shift);
    let odd = w.and(odd, 1);
    let half_minus_one = (1u32 << (shift - 1)) - 1;
    let t = w.add(a, Arg::Imm(half_minus_one.wrapping_sub(c.rebias << 23)));
    let t = w.add(t, Arg::Val(odd));
    let normal = w.shr(t, shift);
    // Subnormal results: |x| + 2^k in f32, whose ulp is the subnormal step, is |x| rounded
    // to nearest even by the hardware; the steps above 2^k are the code (the smallest
    // normal's, 1 << m, when |x| rounds up to it).
    let sum = w.fadd(a, c.magic);
    let sub = w.add(sum, Arg::Imm(c.magic.to_bits().wrapping_neg()));
    let code = w.select(UCmp::Lt, a, c.min_normal, Arg::Val(sub), normal);
    // Beyond the largest finite value, infinity included: ± max finite. NaN: 0x7F.
    let code = w.select(UCmp::Gt, a, c.max_finite, Arg::Imm(c.max_code), code);
    let code = w.select(UCmp::Gt, a, 0x7F80_0000, Arg::Imm(0x7F), code);
    w.or(code, Arg::Val(sign))
}

/// fp8 bits of format `f` (in the low byte; the other bits are ignored) → the f32 bits of
/// its value.
pub(super) fn decode_words<W: Words>(w: &mut W, f: Fp8Format, code: W::V) -> W::V {
    let c = Consts::of(f);
    let mag = w.and(code, 0x7F);
    let sign = w.and(code, 0x80);
    let sign = w.shl(sign, 24);
    // The exponent and mantissa fields in f32 position read as an f32 with bias 127 (a
    // subnormal code as an f32 subnormal); the multiplication rebiases, exactly.
    let fields = w.shl(mag, 23 - c.m);
    let value = w.fmul(fields, 2f32.powi(c.rebias as i32));
    let value = if c.has_inf {
        // Exponent all ones: infinity (mantissa 0) or NaN, with the mantissa kept.
        let exp_ones = (0x7F >> c.m) << c.m;
        let special = w.or(fields, Arg::Imm(0x7F80_0000 - ((0x7F >> c.m) << 23)));
        w.select(UCmp::Ge, mag, exp_ones, Arg::Val(special), value)
    } else {
        // e4m3: one NaN magnitude, no infinities.
        w.select(UCmp::Eq, mag, 0x7F, Arg::Imm(0x7FC0_0000), value)
    };
    w.or(value, Arg::Val(sign))
}

fn operand(a: Arg<Reg>) -> Operand {
    match a {
        Arg::Val(r) => r.into(),
        Arg::Imm(v) => Operand::Imm(i64::from(v)),
    }
}

/// The sequences as PTX: one instruction per step (f32 steps between `mov.b32`s).
impl Words for KernelBuilder {
    type V = Reg;

    fn and(&mut self, a: Reg, m: u32) -> Reg {
        self.int(IntOp::And, Type::B32, a, Operand::Imm(i64::from(m)))
    }

    fn or(&mut self, a: Reg, b: Arg<Reg>) -> Reg {
        self.int(IntOp::Or, Type::B32, a, operand(b))
    }

    fn shl(&mut self, a: Reg, k: u32) -> Reg {
        self.int(IntOp::Shl, Type::B32, a, Operand::Imm(i64::from(k)))
    }

    fn shr(&mut self, a: Reg, k: u32) -> Reg {
        self.int(IntOp::Shr, Type::U32, a, Operand::Imm(i64::from(k)))
    }

    fn add(&mut self, a: Reg, b: Arg<Reg>) -> Reg {
        self.int(IntOp::Add, Type::U32, a, operand(b))
    }

    fn fadd(&mut self, a: Reg, c: f32) -> Reg {
        self.f32_step(FloatOp::Add, a, c)
    }

    fn fmul(&mut self, a: Reg, c: f32) -> Reg {
        self.f32_step(FloatOp::Mul, a, c)
    }

    fn select(&mut self, cmp: UCmp, a: Reg, b: u32, then: Arg<Reg>, els: Reg) -> Reg {
        let cmp = match cmp {
            UCmp::Lt => Cmp::Lt,
            UCmp::Gt => Cmp::Gt,
            UCmp::Ge => Cmp::Ge,
            UCmp::Eq => Cmp::Eq,
        };
        let p = self.setp(cmp, Type::U32, a, Operand::Imm(i64::from(b)));
        self.selp(Type::B32, operand(then), els, p)
    }
}

impl KernelBuilder {
    /// `op.rn.f32` on the bits in `a` and the constant `c`, the result's bits in a `%r`.
    fn f32_step(&mut self, op: FloatOp, a: Reg, c: f32) -> Reg {
        let x = self.bits_to(Type::F32, a);
        let dst = self.new_reg(Type::F32);
        self.emit(Op::Float {
            op,
            mode: FloatMode::Round(FRound::Rn),
            ftz: false,
            ty: Type::F32,
            dst,
            a: x.into(),
            b: Operand::F32(c),
        });
        self.bits_to(Type::B32, dst)
    }

    /// `mov.b32` of `src`'s bits into a fresh register of `ty`'s class.
    fn bits_to(&mut self, ty: Type, src: Reg) -> Reg {
        let dst = self.new_reg(ty);
        self.emit(Op::Mov {
            ty: Type::B32,
            dst,
            src: src.into(),
        });
        dst
    }
}

fn kind(d: DType) -> Fp8Kind {
    if d == DType::Float8E5M2 {
        Fp8Kind::E5m2
    } else {
        Fp8Kind::E4m3
    }
}

impl Cg {
    /// The fp8 bits (a `.b16`, the value in the low byte, 0 above) of the f32 in `x`,
    /// rounded to `d` (`float8_e4m3` / `float8_e5m2`).
    pub(super) fn fp8_encode(&mut self, x: Reg, d: DType) -> Reg {
        let Some(format) = fp8_format(d) else {
            return x;
        };
        let dst = self.b.new_reg(Type::B16);
        if self.target.desc().fp8_convert {
            self.b.emit(Op::CvtToFp8x2 {
                kind: kind(d),
                dst,
                hi: Operand::F32(0.0),
                lo: x.into(),
            });
            // NaN: the f32's top byte (sign, then seven exponent bits, all ones).
            let bits = self.b.bits_to(Type::B32, x);
            let top = self.b.int(IntOp::Shr, Type::U32, bits, Operand::Imm(24));
            let nan_code = self.b.cvt(Type::U16, Type::U32, top);
            let nan = self.b.setp(Cmp::Nan, Type::F32, x, x);
            return self.b.selp(Type::B16, nan_code, dst, nan);
        }
        let bits = self.b.bits_to(Type::B32, x);
        let code = encode_words(&mut self.b, format, bits);
        self.b.cvt(Type::U16, Type::U32, code)
    }

    /// The f32 value of the fp8 bits in `v` (the low byte of a `.b16`) of dtype `d`.
    pub(super) fn fp8_decode(&mut self, v: Reg, d: DType) -> Reg {
        let Some(format) = fp8_format(d) else {
            return v;
        };
        if self.target.desc().fp8_convert {
            let pair = self.b.new_reg(Type::B32);
            self.b.emit(Op::CvtFromFp8x2 {
                kind: kind(d),
                dst: pair,
                src: v,
            });
            let halves = self.b.unpack(Type::B32, Type::F16, 2, pair);
            return self.b.cvt(Type::F32, Type::F16, halves[0]);
        }
        let code = self.b.cvt(Type::U32, Type::U16, v);
        let bits = decode_words(&mut self.b, format, code);
        self.b.bits_to(Type::F32, bits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tlc_ir::interp::fp8::{self, E4M3, E5M2};

    /// The sequences on `u32`s: each step as the PTX instruction computes it.
    struct Model;

    fn val(a: Arg<u32>) -> u32 {
        match a {
            Arg::Val(v) | Arg::Imm(v) => v,
        }
    }

    impl Words for Model {
        type V = u32;
        fn and(&mut self, a: u32, m: u32) -> u32 {
            a & m
        }
        fn or(&mut self, a: u32, b: Arg<u32>) -> u32 {
            a | val(b)
        }
        fn shl(&mut self, a: u32, k: u32) -> u32 {
            a << k
        }
        fn shr(&mut self, a: u32, k: u32) -> u32 {
            a >> k
        }
        fn add(&mut self, a: u32, b: Arg<u32>) -> u32 {
            a.wrapping_add(val(b))
        }
        fn fadd(&mut self, a: u32, c: f32) -> u32 {
            (f32::from_bits(a) + c).to_bits()
        }
        fn fmul(&mut self, a: u32, c: f32) -> u32 {
            (f32::from_bits(a) * c).to_bits()
        }
        fn select(&mut self, cmp: UCmp, a: u32, b: u32, then: Arg<u32>, els: u32) -> u32 {
            let p = match cmp {
                UCmp::Lt => a < b,
                UCmp::Gt => a > b,
                UCmp::Ge => a >= b,
                UCmp::Eq => a == b,
            };
            if p {
                val(then)
            } else {
                els
            }
        }
    }

    fn encode(f: Fp8Format, x: u32) -> u32 {
        encode_words(&mut Model, f, x)
    }

    fn check_encode(name: &str, f: Fp8Format, x: u32) {
        let want = fp8::encode(f, f64::from(f32::from_bits(x)));
        assert_eq!(
            encode(f, x),
            u32::from(want),
            "{name}: encode of {x:#010x} ({:e})",
            f32::from_bits(x)
        );
    }

    /// Every input whose bits can matter: each exponent (both signs) × the top 10 mantissa
    /// bits (the kept bits, the round bit and the bits a subnormal result shifts in) × the
    /// sticky bits below them (none, the lowest, the highest, all, one mixed pattern), plus
    /// every fp8 value and its f32 neighbours, the midpoints between fp8 values and theirs,
    /// infinities and NaNs.
    fn inputs() -> Vec<u32> {
        let mut xs = Vec::new();
        for sign in [0u32, 1 << 31] {
            for exp in 0..256u32 {
                for top in 0..1024u32 {
                    for sticky in [0u32, 1, 0x1000, 0x1FFF, 0x0A5A] {
                        xs.push(sign | exp << 23 | top << 13 | sticky);
                    }
                }
            }
        }
        for f in [E4M3, E5M2] {
            for code in 0..=255u8 {
                for next in [code.wrapping_add(1), code.wrapping_sub(1)] {
                    let (a, b) = (fp8::decode(f, code), fp8::decode(f, next));
                    for v in [a, (a + b) / 2.0] {
                        if v.is_finite() {
                            let bits = (v as f32).to_bits();
                            xs.extend([bits, bits.wrapping_add(1), bits.wrapping_sub(1)]);
                        }
                    }
                }
            }
        }
        xs.extend([
            0x7F80_0000,
            0xFF80_0000,
            0x7FC0_0000,
            0xFFC0_0000,
            0x7F80_0001,
        ]);
        xs
    }

    #[test]
    fn encode_matches_the_interpreter() {
        let xs = inputs();
        for (name, f) in [("e4m3", E4M3), ("e5m2", E5M2)] {
            for &x in &xs {
                check_encode(name, f, x);
            }
        }
    }

    #[test]
    fn encode_examples() {
        // 448 + half an ulp (16) saturates; a tie rounds to even; NaN keeps its sign.
        assert_eq!(encode(E4M3, 464f32.to_bits()), 0x7E);
        assert_eq!(encode(E4M3, 1.0625f32.to_bits()), 0x38);
        assert_eq!(encode(E4M3, (-f32::NAN).to_bits()), 0xFF);
        assert_eq!(encode(E4M3, f32::INFINITY.to_bits()), 0x7E);
        assert_eq!(encode(E5M2, f32::NEG_INFINITY.to_bits()), 0xFB);
        assert_eq!(encode(E4M3, 2f32.powi(-10).to_bits()), 0x00);
        assert_eq!(encode(E4M3, (1.5 * 2f32.powi(-10)).to_bits()), 0x01);
        assert_eq!(encode(E4M3, (-0.0f32).to_bits()), 0x80);
    }

    #[test]
    fn decode_matches_the_interpreter() {
        for (name, f) in [("e4m3", E4M3), ("e5m2", E5M2)] {
            for code in 0..=0xFFFFu32 {
                let got = f32::from_bits(decode_words(&mut Model, f, code));
                let want = fp8::decode(f, code as u8);
                if want.is_nan() {
                    assert!(got.is_nan(), "{name}: decode of {code:#06x} is {got}");
                    assert_eq!(got.is_sign_negative(), code & 0x80 != 0);
                } else {
                    // Bits, so that -0 is -0.
                    assert_eq!(
                        got.to_bits(),
                        (want as f32).to_bits(),
                        "{name}: decode of {code:#06x}"
                    );
                }
            }
        }
    }

    /// All 2^32 f32 inputs (a minute in release: `cargo test --release -p tlc -- --ignored
    /// every_f32`).
    #[test]
    fn a_stride_of_all_f32_encodes_like_the_interpreter() {
        // Every 1021st bit pattern (a prime stride, so every exponent and sign and a spread
        // of mantissas), on top of the targeted patterns above.
        for (name, f) in [("e4m3", E4M3), ("e5m2", E5M2)] {
            for x in (0..=u32::MAX).step_by(1021) {
                check_encode(name, f, x);
            }
        }
    }
}
