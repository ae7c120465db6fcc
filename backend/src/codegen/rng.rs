//! The random-number intrinsics → PTX, instruction for instruction the generator of
//! `tlc_ir::intrinsic::rng` (curand's Philox4x32-10), on the seven uint32 registers of the
//! thread's state array (counter 4, key 2, the next word's place):
//!
//! - `T.philox_init(state, seed, seq, offset)`: the three values as 64-bit integers (C's
//!   `unsigned long long`: an int32 sign-extends, a uint32 zero-extends); `key = (seed lo,
//!   seed hi)`, `ctr = (lo(offset / 4), hi(offset / 4), seq lo, seq hi)`, `place = offset &
//!   3` — curand's `curand_init` from a zero counter, where no addition carries.
//! - a draw: the ten rounds (`mul.hi.u32` / `mul.lo.u32` by the two multipliers, `xor`
//!   with the other words and the key, the key bumped by `add.u32` between rounds), the
//!   word at `place` chosen by `selp`, then `place + 1`, wrapped to 0 after 3 with the
//!   128-bit counter stepped by one (curand's carry: each word on only when the one below
//!   wrapped to 0). `T.philox_uniform` converts the word `cvt.rn.f32.u32` and takes
//!   `fma.rn.f32 x, 2^-32, 2^-33` (the product is exact, so this is curand's `x * 2^-32 +
//!   2^-33`).
//!
//! The state must live in registers (constant indices everywhere, as the front end's
//! `rng_state[0]` has); `local_run` refuses it otherwise, with its located error.

use super::Cg;
use crate::ptx::{Cmp, IntOp, MulMode, Op, Operand, Reg, Type};
use tlc_ir::intrinsic::rng::{
    PHILOX_M0, PHILOX_M1, PHILOX_ROUNDS, PHILOX_W0, PHILOX_W1, STATE_WORDS, UNIFORM_OFFSET,
    UNIFORM_SCALE,
};
use tlc_ir::{DType, ElemRef, Expr};

/// The state's length in registers.
const WORDS: usize = STATE_WORDS as usize;

impl Cg {
    /// `T.philox_init(state, seed, seq, offset)`.
    pub(super) fn philox_init(
        &mut self,
        state: &ElemRef,
        (seed, seq, offset): (&Expr, &Expr, &Expr),
    ) {
        let Some(regs) = self.state_regs(state) else {
            return;
        };
        let (Some(seed), Some(seq), Some(offset)) = (
            self.expr_as(seed, DType::Int64),
            self.expr_as(seq, DType::Int64),
            self.expr_as(offset, DType::Int64),
        ) else {
            return;
        };
        // In registers: PTX takes no immediate as the source of `shr` or `cvt`.
        let seed: Operand = self.in_reg(seed, Type::S64).into();
        let seq: Operand = self.in_reg(seq, Type::S64).into();
        let offset: Operand = self.in_reg(offset, Type::S64).into();
        let blocks = self.b.int(IntOp::Shr, Type::U64, offset.clone(), 2);
        let place = self.b.int(IntOp::And, Type::B64, offset, 3);
        let words = [
            self.low(blocks.into()),
            self.high(blocks.into()),
            self.low(seq.clone()),
            self.high(seq),
            self.low(seed.clone()),
            self.high(seed),
            self.low(place.into()),
        ];
        for (r, w) in regs.iter().zip(words) {
            self.set(*r, w.into());
        }
    }

    /// `T.philox_rand(dst, state)` (`uniform` false) or `T.philox_uniform(dst, state)`.
    pub(super) fn philox_draw(&mut self, dst: &ElemRef, state: &ElemRef, uniform: bool) {
        let Some(regs) = self.state_regs(state) else {
            return;
        };
        let what = if uniform {
            "the destination of T.philox_uniform"
        } else {
            "the destination of T.philox_rand"
        };
        let Some((_, d)) = self.local_run(dst, 1, what) else {
            return;
        };
        let Some(&d) = d.first() else {
            return;
        };
        let (ctr, key, place) = (
            [regs[0], regs[1], regs[2], regs[3]],
            [regs[4], regs[5]],
            regs[6],
        );
        let out = self.philox_rounds(ctr, key);
        // The word at `place` (0..=3).
        let mut x = out[0];
        for (k, &o) in out.iter().enumerate().skip(1) {
            let here = self.b.setp(Cmp::Eq, Type::U32, place, k as i64);
            x = self.b.selp(Type::B32, o, x, here);
        }
        // One draw on: the next place, the counter stepped when the block is used up.
        let next = self.b.add(Type::U32, place, 1);
        let wrapped = self.b.setp(Cmp::Eq, Type::U32, next, 4);
        let next = self.b.selp(Type::B32, 0, next, wrapped);
        self.set(place, next.into());
        let mut carry = self.b.selp(Type::B32, 1, 0, wrapped);
        for (k, &c) in ctr.iter().enumerate() {
            let stepped = self.b.add(Type::U32, c, carry);
            self.set(c, stepped.into());
            if k + 1 < ctr.len() {
                // The next word steps only when this one stepped and wrapped to 0.
                let zero = self.b.setp(Cmp::Eq, Type::U32, stepped, 0);
                let z = self.b.selp(Type::B32, 1, 0, zero);
                carry = self.b.int(IntOp::And, Type::B32, carry, z);
            }
        }
        let value = if uniform {
            let f = self.b.cvt(Type::F32, Type::U32, x);
            self.b.fma(Type::F32, f, UNIFORM_SCALE, UNIFORM_OFFSET)
        } else {
            x
        };
        let ty = if uniform { Type::F32 } else { Type::B32 };
        self.forget_packed(d);
        self.b.emit(Op::Mov {
            ty,
            dst: d,
            src: value.into(),
        });
    }

    /// Philox4x32-10 of the counter under the key, in fresh registers.
    fn philox_rounds(&mut self, ctr: [Reg; 4], key: [Reg; 2]) -> [Reg; 4] {
        let mut c: [Operand; 4] = ctr.map(Operand::from);
        let mut k: [Operand; 2] = key.map(Operand::from);
        for r in 0..PHILOX_ROUNDS {
            if r > 0 {
                k = [
                    self.b.add(Type::U32, k[0].clone(), PHILOX_W0).into(),
                    self.b.add(Type::U32, k[1].clone(), PHILOX_W1).into(),
                ];
            }
            let mul = |cg: &mut Self, mode: MulMode, m: u32, x: &Operand| -> Reg {
                cg.b.int(IntOp::Mul(mode), Type::U32, x.clone(), m)
            };
            let hi0 = mul(self, MulMode::Hi, PHILOX_M0, &c[0]);
            let lo0 = mul(self, MulMode::Lo, PHILOX_M0, &c[0]);
            let hi1 = mul(self, MulMode::Hi, PHILOX_M1, &c[2]);
            let lo1 = mul(self, MulMode::Lo, PHILOX_M1, &c[2]);
            let a = self.b.int(IntOp::Xor, Type::B32, hi1, c[1].clone());
            let a = self.b.int(IntOp::Xor, Type::B32, a, k[0].clone());
            let b = self.b.int(IntOp::Xor, Type::B32, hi0, c[3].clone());
            let b = self.b.int(IntOp::Xor, Type::B32, b, k[1].clone());
            c = [a.into(), lo1.into(), b.into(), lo0.into()];
        }
        c.map(|o| match o {
            Operand::Reg(r) => r,
            // Every round writes registers.
            other => self.b.mov(Type::B32, other),
        })
    }

    /// The seven registers of a state operand.
    fn state_regs(&mut self, state: &ElemRef) -> Option<Vec<Reg>> {
        let (_, regs) = self.local_run(state, WORDS, "a Philox generator state")?;
        (regs.len() >= WORDS).then_some(regs)
    }

    /// The low 32 bits of a 64-bit value.
    fn low(&mut self, v: Operand) -> Reg {
        self.b.cvt(Type::U32, Type::U64, v)
    }

    /// The high 32 bits of a 64-bit value.
    fn high(&mut self, v: Operand) -> Reg {
        let h = self.b.int(IntOp::Shr, Type::U64, v, 32);
        self.b.cvt(Type::U32, Type::U64, h)
    }

    /// `r = v` (a 32-bit word of the state).
    fn set(&mut self, r: Reg, v: Operand) {
        self.forget_packed(r);
        self.b.emit(Op::Mov {
            ty: Type::B32,
            dst: r,
            src: v,
        });
    }
}
