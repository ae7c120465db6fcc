//! The sm_90a intrinsics (`docs/ir.md`) → PTX:
//!
//! - `T.fence_proxy_async()` → `fence.proxy.async.shared::cta`;
//! - `T.wgmma_fence()`, `T.wgmma_commit()`, `T.wgmma_wait(n)` → `wgmma.fence.sync.aligned`,
//!   `wgmma.commit_group.sync.aligned`, `wgmma.wait_group.sync.aligned n`;
//! - `T.wgmma(C[i], A[..], B[..], n=N, …)` → `wgmma.mma_async.sync.aligned.m64nNk16.f32.AB.AB
//!   {C[i .. i + N/2]}, descA, descB, p, 1, 1, tA, tB`: each descriptor is the call's layout
//!   constants packed by `tlc_ir::wgmma::SmemOperand::descriptor` (the one definition the
//!   interpreter decodes) with the operand's shared address in its low 14 bits —
//!   `mov.b64 d, {(addr >> 4) | lo, hi}`, where `lo` / `hi` are the constant halves; the
//!   predicate `p` is the call's `accumulate` (scale-d), true when left out;
//! - `T.setmaxnreg(n, inc)` → `setmaxnreg.{inc|dec}.sync.aligned.u32 n`.
//!
//! mbarriers and TMA are not lowered yet: a located error says so.

use super::expr::Place;
use super::Cg;
use crate::ptx::{AddrBase, Address, Cmp, IntOp, Op, Operand, Reg, Space, Type};
use tlc_ir::wgmma::{Major, SmemOperand};
use tlc_ir::{DType, ElemRef, Expr, ExprKind, Intrinsic, Span};

impl Cg {
    /// Lowers a Hopper intrinsic; `false` when `i` is not one.
    pub(super) fn hopper_intrinsic(&mut self, i: &Intrinsic, span: Span) -> bool {
        match i {
            Intrinsic::FenceProxyAsync => self.b.emit(Op::FenceProxyAsync),
            Intrinsic::WgmmaFence => self.b.emit(Op::WgmmaFence),
            Intrinsic::WgmmaCommit => self.b.emit(Op::WgmmaCommit),
            Intrinsic::WgmmaWait(n) => match u32::try_from(*n) {
                Ok(pending) => self.b.emit(Op::WgmmaWait { pending }),
                Err(_) => self.err(span, format!("T.wgmma_wait({n}): a group count 0..=7")),
            },
            Intrinsic::SetMaxNReg { n, inc } => match u32::try_from(*n) {
                Ok(n) => self.b.emit(Op::SetMaxNReg { inc: *inc, n }),
                Err(_) => self.err(span, format!("T.setmaxnreg({n}): a count 24..=256")),
            },
            Intrinsic::Wgmma {
                acc,
                a,
                b,
                n,
                accumulate,
                ..
            } => match i.wgmma_layouts() {
                Some((da, db)) => self.wgmma(acc, (a, da), (b, db), *n, accumulate.as_ref(), span),
                None => self.err(span, "T.wgmma: a swizzle the verifier rejects"),
            },
            Intrinsic::MbarrierInit { .. }
            | Intrinsic::MbarrierArrive { .. }
            | Intrinsic::MbarrierArriveExpectTx { .. }
            | Intrinsic::MbarrierWait { .. }
            | Intrinsic::TmaLoad { .. } => self.err(
                span,
                format!(
                    "`{}` is not lowered to PTX yet (the TMA path of issue 13)",
                    i.name()
                ),
            ),
            _ => return false,
        }
        true
    }

    fn wgmma(
        &mut self,
        acc: &ElemRef,
        (a, da): (&ElemRef, SmemOperand),
        (b, db): (&ElemRef, SmemOperand),
        n: i64,
        accumulate: Option<&Expr>,
        span: Span,
    ) {
        let Ok(n32) = u32::try_from(n) else {
            self.err(span, format!("T.wgmma with n = {n}"));
            return;
        };
        let count = (n / 2) as usize;
        let Some((_, d)) = self.local_run(acc, count, "the accumulator of T.wgmma") else {
            return;
        };
        let Some((ab, Place::Mem(_, addr_a))) =
            self.mem_operand(a, Space::Shared, "the A operand of T.wgmma")
        else {
            return;
        };
        let Some((_, Place::Mem(_, addr_b))) =
            self.mem_operand(b, Space::Shared, "the B operand of T.wgmma")
        else {
            return;
        };
        let ab_ty = match ab {
            DType::Float16 => Type::F16,
            DType::BFloat16 => Type::Bf16,
            other => {
                self.err(a.buffer.span, format!("T.wgmma of {other} elements"));
                return;
            }
        };
        let scale_d = match accumulate {
            None => self.true_pred(),
            Some(e) if matches!(e.kind, ExprKind::Bool(true)) => self.true_pred(),
            Some(e) => {
                let Some(p) = self.expr(e, DType::Bool) else {
                    return;
                };
                self.in_reg(p, Type::Pred)
            }
        };
        let desc_a = self.descriptor(&addr_a, &da);
        let desc_b = self.descriptor(&addr_b, &db);
        for &r in &d {
            self.forget_packed(r);
        }
        self.b.emit(Op::Wgmma {
            n: n32,
            ab_ty,
            d,
            desc_a,
            desc_b,
            scale_d,
            trans_a: da.major == Major::MN,
            trans_b: db.major == Major::MN,
        });
    }

    /// A predicate register holding true.
    fn true_pred(&mut self) -> Reg {
        let one = self.b.mov(Type::U32, Operand::Imm(1));
        self.b.setp(Cmp::Ne, Type::U32, one, 0)
    }

    /// The 64-bit descriptor of the operand at shared address `addr` laid out `layout`.
    fn descriptor(&mut self, addr: &Address, layout: &SmemOperand) -> Reg {
        let bits = layout.descriptor(0);
        let (lo, hi) = (bits & 0xFFFF_FFFF, bits >> 32);
        let base = match &addr.base {
            AddrBase::Reg(r) => Operand::Reg(*r),
            AddrBase::Symbol(s) => Operand::Symbol(s.clone()),
        };
        let base = self.in_reg(base, Type::U32);
        let start = if addr.offset == 0 {
            base
        } else {
            self.b
                .int(IntOp::Add, Type::U32, base, Operand::Imm(addr.offset))
        };
        let field = self.b.int(IntOp::Shr, Type::U32, start, Operand::Imm(4));
        let low = self
            .b
            .int(IntOp::Or, Type::B32, field, Operand::Imm(lo as i64));
        let high = self.b.mov(Type::U32, Operand::Imm(hi as i64));
        self.b.pack(Type::B64, vec![low.into(), high.into()])
    }
}
