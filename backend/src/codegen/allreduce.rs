//! `T.thread_allreduce` → the butterfly of `ir.rs`'s `AllReduce`, step by step as
//! `tlc_ir::allreduce_steps` orders them: a step whose partner is a lane of the same warp is
//! one `shfl.sync.bfly.b32`; a step between warps (or one a lane xor cannot reach) goes
//! through the all-reduce's shared `scratch` (barrier, store at the thread's linear index,
//! barrier, load the partner's), with a barrier after the last such step. Each step then
//! combines with the language's own `+` / `T.max` / `T.min` in the result dtype (f16 / bf16
//! through f32 and rounded back, as the interpreter does), so every thread ends with the
//! interpreter's bits. 16-bit values travel in the low half of a 32-bit word.

use super::{ptx_type, Bind, Cg, Mem};
use crate::codegen::expr::Place;
use crate::ptx::{
    AddrBase, Address, IntOp, MulMode, Op, Operand, Reg, ShflMode, Space, SpecialReg, Type,
};
use tlc_ir::{allreduce_steps, AllReduce, AllReduceStep, DType, Expr, ExprKind, Span};

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
        let mut axes = Vec::new();
        for t in &r.threads {
            match self.thread_axes.get(&t.name) {
                Some(&axis) => axes.push(axis),
                None => {
                    self.err(
                        t.span,
                        format!("`{}` is not a thread variable here", t.name),
                    );
                    return;
                }
            }
        }
        let shape: Vec<i64> = self.threads.iter().map(|&t| i64::from(t)).collect();
        let total: i64 = shape.iter().product();
        let Some(steps) = allreduce_steps(&shape, &axes) else {
            self.err(
                span,
                "an all-reduce over a thread axis whose extent is not a power of two is not lowered",
            );
            return;
        };
        // The steps between warps exchange through the scratch (`plan-allreduce-scratch`).
        let scratch = match &r.scratch {
            Some(s) => match self.bufs.get(&s.name).map(|b| (&b.mem, b.dtype)) {
                Some((&Mem::Shared(off), sd)) if sd == d => Some(off),
                _ => {
                    self.err(
                        s.span,
                        format!("`{}` is not a shared buffer of {d}", s.name),
                    );
                    return;
                }
            },
            None => None,
        };
        if scratch.is_none() && steps.iter().any(|s| s.lane_xor.is_none()) {
            self.err(
                span,
                "an all-reduce between warps needs its `scratch=` buffer (plan-allreduce-scratch)",
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
        let mut through_scratch = false;
        for step in &steps {
            let theirs = match (step.lane_xor, scratch) {
                (Some(lane), _) => {
                    let c = i64::from(ShflMode::Bfly.clamp());
                    let how = (
                        ShflMode::Bfly,
                        Operand::Imm(i64::from(lane)),
                        Operand::Imm(c),
                    );
                    self.shuffle(mine, ty, how, Operand::Imm(i64::from(member_mask)))
                }
                (None, Some(off)) => {
                    through_scratch = true;
                    let Some(theirs) = self.exchange_in_scratch(mine, d, off, step) else {
                        return;
                    };
                    theirs
                }
                (None, None) => return,
            };
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
        }
        // No thread may write the scratch's bytes again (another all-reduce, a buffer the
        // plan lets share them) before every partner has read it.
        if through_scratch {
            self.b.bar_sync();
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

    /// One butterfly step through shared memory: every thread stores `mine` at its linear
    /// index `l` of the scratch (at arena offset `off`), then reads its partner's, the thread
    /// whose index on `step.axis` differs in `step.bit`: `l + ((i ^ 2^bit) - i) * stride`
    /// (u32 arithmetic wraps, so the negative difference is exact). A barrier before the
    /// store (earlier readers of these bytes are done) and between store and load.
    fn exchange_in_scratch(
        &mut self,
        mine: Reg,
        d: DType,
        off: i64,
        step: &AllReduceStep,
    ) -> Option<Reg> {
        let size = i64::from(d.bytes());
        let stride: i64 = self
            .threads
            .iter()
            .take(step.axis)
            .map(|&t| i64::from(t))
            .product();
        let l = self.linear_thread_index();
        let index = self.b.special(match step.axis {
            0 => SpecialReg::TidX,
            1 => SpecialReg::TidY,
            _ => SpecialReg::TidZ,
        });
        let flipped = self
            .b
            .int(IntOp::Xor, Type::B32, index, Operand::Imm(1i64 << step.bit));
        let delta = self.b.int(IntOp::Sub, Type::U32, flipped, index);
        let partner = self
            .b
            .mad(MulMode::Lo, Type::U32, delta, Operand::Imm(stride), l);
        let base = self.smem_base();
        let at = |cg: &mut Cg, i: Reg| {
            let a =
                cg.b.mad(MulMode::Lo, Type::U32, i, Operand::Imm(size), base);
            Address {
                base: AddrBase::Reg(a),
                offset: off,
            }
        };
        self.b.bar_sync();
        let mine_at = at(self, l);
        self.store_elem(Space::Shared, mine_at, d, mine.into());
        self.b.bar_sync();
        let theirs_at = at(self, partner);
        self.load_elem(Space::Shared, theirs_at, d)
    }
}
