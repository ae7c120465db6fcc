//! `T.thread_allreduce` → warp shuffles: the butterfly of `ir.rs`'s `AllReduce`, one
//! `shfl.sync.bfly.b32` and one combine per step (`o = G/2, …, 1`), the combine being the
//! language's own `+` / `T.max` / `T.min` in the result dtype (f16 / bf16 through f32 and
//! rounded back, as the interpreter does), so every lane ends with the interpreter's bits.
//! 16-bit values travel in the low half of a 32-bit word. The verifier restricted the group
//! to a power of two of at most 32 consecutive threads, so partners are in the same warp.

use super::{ptx_type, Bind, Cg};
use crate::codegen::expr::Place;
use crate::ptx::{Op, Operand, ShflMode};
use tlc_ir::{AllReduce, Expr, ExprKind, Span};

/// The names the combine reads its two operands through (not valid identifiers, so they
/// cannot clash with the kernel's).
const MINE: &str = "%allreduce.mine";
const THEIRS: &str = "%allreduce.theirs";

impl Cg {
    pub(super) fn allreduce(&mut self, r: &AllReduce, span: Span) {
        let Some(d) = self.bufs.get(&r.buffer.name).map(|b| b.dtype) else {
            self.err(
                r.buffer.span,
                format!("undefined buffer `{}`", r.buffer.name),
            );
            return;
        };
        let Some(ty) = ptx_type(d) else {
            self.err(span, format!("codegen does not support {d} all-reduces"));
            return;
        };
        let mut group: i64 = 1;
        for t in &r.threads {
            match self.thread_axes.get(&t.name) {
                Some(&axis) => group *= i64::from(self.threads.get(axis).copied().unwrap_or(1)),
                None => {
                    self.err(
                        t.span,
                        format!("`{}` is not a thread variable here", t.name),
                    );
                    return;
                }
            }
        }
        let total: i64 = self.threads.iter().map(|&t| i64::from(t)).product();
        if !(1..=32).contains(&group) || group & (group - 1) != 0 {
            self.err(
                span,
                format!("an all-reduce over {group} threads is not lowered"),
            );
            return;
        }
        // Every lane of a full warp takes part; a block smaller than a warp has lanes 0..n.
        let member_mask = if total >= 32 {
            u32::MAX
        } else {
            (1u32 << total) - 1
        };
        let Some(v) = self.expr_as(&r.value, d) else {
            return;
        };
        let mut mine = self.in_reg(v, ty);
        let mut off = group / 2;
        while off >= 1 {
            let lane = off;
            let c = i64::from(ShflMode::Bfly.clamp());
            let how = (ShflMode::Bfly, Operand::Imm(lane), Operand::Imm(c));
            let theirs = self.shuffle(mine, ty, how, Operand::Imm(i64::from(member_mask)));
            self.vars.insert(MINE.to_string(), Bind::Reg(mine, d));
            self.vars.insert(THEIRS.to_string(), Bind::Reg(theirs, d));
            let var = |n: &str| Expr::new(ExprKind::Var(n.to_string()), span);
            let combine = Expr::binary(r.op.bin_op(), var(MINE), var(THEIRS), span);
            let combined = self.expr_as(&combine, d);
            self.vars.remove(MINE);
            self.vars.remove(THEIRS);
            let Some(combined) = combined else {
                return;
            };
            mine = self.in_reg(combined, ty);
            off /= 2;
        }
        match self.address(&r.buffer.name, &r.indices, span) {
            Some(Place::Reg(dst)) => {
                self.forget_packed(dst);
                self.b.emit(Op::Mov {
                    ty: super::expr::mov_type(ty),
                    dst,
                    src: mine.into(),
                });
            }
            Some(Place::Mem(space, addr)) => self.store_elem(space, addr, d, mine.into()),
            None => {}
        }
    }
}
