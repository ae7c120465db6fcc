//! Warp shuffles → `shfl.sync.{mode}.b32`:
//!
//! - `Cg::shuffle`, the one place a register crosses lanes (`T.shfl_xor`, `T.shfl_down`,
//!   `T.thread_allreduce`, `T.shfl_sync_*`): PTX moves 32-bit words, so a 32-bit register
//!   moves as it is; a 16-bit one (f16, bf16, fp8 bits) travels in the low half of a word
//!   (packed with itself, unpacked on arrival); a 64-bit one as its two words, each
//!   shuffled from the same lane, then joined. 8- and 16-bit integers already live in
//!   32-bit registers, sign- or zero-extended, and arrive so.
//! - `T.shfl_sync_{idx|bfly|down|up}(dst, src, lane, width=W, mask=M)`: the source
//!   element loaded like any load (a register, or local memory for an array indexed at run
//!   time), the lane operand as an int32 (its low five bits are what PTX reads), `c` from
//!   the segment width (`ShuffleMode::c_operand`, the interpreter's own rule; computed at run
//!   time for a run-time width), the mask's low 32 bits as the member mask (an immediate or
//!   a register), and the result stored into `dst` like a store.

use super::expr::{mov_type, Place};
use super::Cg;
use crate::ptx::{Op, Operand, Reg, ShflMode, Type};
use tlc_ir::intrinsic::{Shuffle, ShuffleMode};
use tlc_ir::{BinOp, DType, Expr, ExprKind, Span};

impl Cg {
    /// One shuffle of register `src` (register type `ty`): the value of the lane `mode`
    /// picks with `lane` and `c` among `member_mask`'s lanes (module doc for the widths).
    pub(super) fn shuffle(
        &mut self,
        src: Reg,
        ty: Type,
        (mode, lane, c): (ShflMode, Operand, Operand),
        member_mask: Operand,
    ) -> Reg {
        let word = |cg: &mut Cg, w: Reg, wty: Type| {
            let got = cg.b.new_reg(wty);
            cg.b.emit(Op::Shfl {
                mode,
                dst: got,
                src: w,
                lane: lane.clone(),
                c: c.clone(),
                member_mask: member_mask.clone(),
            });
            got
        };
        match ty.bytes() {
            8 => {
                let halves = self.b.unpack(Type::B64, Type::B32, 2, src);
                let moved: Vec<Operand> = halves
                    .into_iter()
                    .map(|h| word(self, h, Type::B32).into())
                    .collect();
                let joined = self.b.pack(Type::B64, moved);
                let out = self.b.new_reg(ty);
                self.b.emit(Op::Mov {
                    ty: Type::B64,
                    dst: out,
                    src: joined.into(),
                });
                out
            }
            2 => {
                let w = self.b.pack(Type::B32, vec![src.into(), src.into()]);
                let got = word(self, w, Type::B32);
                let lanes = self.b.unpack(Type::B32, ty, 2, got);
                lanes.first().copied().unwrap_or(got)
            }
            _ => word(self, src, ty),
        }
    }

    /// `T.shfl_sync_*` (module doc).
    pub(super) fn shfl_sync(&mut self, s: &Shuffle<'_>, span: Span) {
        let name = &s.src.buffer.name;
        let Some(d) = self.bufs.get(name).map(|b| b.dtype) else {
            self.err(s.src.buffer.span, format!("undefined buffer `{name}`"));
            return;
        };
        let Some(ty) = self.ty(d, span) else {
            return;
        };
        let load = Expr::new(
            ExprKind::Load {
                buffer: name.clone(),
                indices: s.src.indices.clone(),
            },
            s.src.buffer.span,
        );
        let Some(v) = self.expr(&load, d) else {
            return;
        };
        let v = self.in_reg(v, ty);
        let Some(lane) = self.expr_as(s.lane, DType::Int32) else {
            return;
        };
        // `c` from the width: an immediate for a constant one (the verifier holds it a
        // power of two in 1..=32), else computed as the interpreter's rule does.
        let c = match self.const_eval(s.width).and_then(|w| u32::try_from(w).ok()) {
            Some(w) => Some(Operand::Imm(i64::from(s.mode.c_operand(w)))),
            None => self.expr_as(&c_operand_expr(s.mode, s.width), DType::Int32),
        };
        let Some(c) = c else {
            return;
        };
        let Some(member_mask) = self.expr_as(s.mask, DType::UInt32) else {
            return;
        };
        let mode = match s.mode {
            ShuffleMode::Idx => ShflMode::Idx,
            ShuffleMode::Bfly => ShflMode::Bfly,
            ShuffleMode::Down => ShflMode::Down,
            ShuffleMode::Up => ShflMode::Up,
        };
        let got = self.shuffle(v, ty, (mode, lane, c), member_mask);
        match self.address(&s.dst.buffer.name, &s.dst.indices, span) {
            Some(Place::Reg(r)) => {
                self.forget_packed(r);
                self.b.emit(Op::Mov {
                    ty: mov_type(ty),
                    dst: r,
                    src: got.into(),
                });
                self.refresh_word(&s.dst.buffer.name, &s.dst.indices);
            }
            Some(Place::Mem(space, addr)) => self.store_elem(space, addr, d, got.into()),
            None => {}
        }
    }
}

/// `c` for a run-time width `w`, as `ShuffleMode::c_operand` computes it: `((32 - w) << 8) |
/// 31` (`up`: without the 31).
fn c_operand_expr(mode: ShuffleMode, w: &Expr) -> Expr {
    let span = w.span;
    let seg = Expr::binary(BinOp::Sub, Expr::int(32), w.clone(), span);
    let seg = Expr::binary(BinOp::Shl, seg, Expr::int(8), span);
    match mode {
        ShuffleMode::Up => seg,
        _ => Expr::binary(BinOp::BitOr, seg, Expr::int(31), span),
    }
}
