//! The sm_90a intrinsics (`docs/ir.md`) → PTX:
//!
//! - `T.fence_proxy_async()` → `fence.proxy.async.shared::cta`;
//! - `T.wgmma_fence()`, `T.wgmma_commit()`, `T.wgmma_wait(n)` → `wgmma.fence.sync.aligned`,
//!   `wgmma.commit_group.sync.aligned`, `wgmma.wait_group.sync.aligned n`;
//! - `T.wgmma(C[i], A[..], B[..], n=N, …)` → `wgmma.mma_async.sync.aligned.m64nNkK.f32.A.B
//!   {C[i .. i + N/2]}, descA, descB, p, 1, 1, tA, tB` (`K` 16 for f16 / bf16; 32 for
//!   e4m3 / e5m2, whose form has no `tA, tB`): each descriptor is the call's layout
//!   constants packed by `tlc_ir::wgmma::SmemOperand::descriptor` (the one definition the
//!   interpreter decodes) with the operand's shared address in its low 14 bits —
//!   `mov.b64 d, {(addr >> 4) | lo, hi}`, where `lo` / `hi` are the constant halves; the
//!   predicate `p` is the call's `accumulate` (scale-d), true when left out;
//! - `T.wgmma_rs(C[i], A[j], B[..], n=N, …)` → the register-A form
//!   `wgmma.mma_async.sync.aligned.m64nNk16.f32.A.B {C[i .. i + N/2]}, {a0, a1, a2, a3},
//!   descB, p, 1, 1, tB`: `A[j .. j + 8]`'s 16-bit registers packed two by two into `.b32`
//!   words (the lower element in the low half);
//! - `T.setmaxnreg(n, inc)` → `setmaxnreg.{inc|dec}.sync.aligned.u32 n`;
//! - `T.mbarrier_init(bar, count)` → `mbarrier.init.shared::cta.b64 [a], count`, where `a` is
//!   the shared address of the int64 element `bar`;
//! - `T.mbarrier_arrive(bar)` → `mbarrier.arrive.shared::cta.b64 _, [a]`;
//! - `T.mbarrier_arrive_expect_tx(bar, n)` → `mbarrier.arrive.expect_tx.shared::cta.b64 _,
//!   [a], n`;
//! - `T.mbarrier_wait(bar, parity)` → a loop on `mbarrier.try_wait.parity.shared::cta.b64 p,
//!   [a], q` (`q` = the parity's low bit, `.b32`) until `p` holds — `try_wait` may give up
//!   after a time-out, so the loop is the wait;
//! - `T.tma_load(dst, src, bar, box=…, swizzle=…)` →
//!   `cp.async.bulk.tensor.Nd.shared::cluster.global.tile.mbarrier::complete_tx::bytes
//!   [dst], [map, {cN-1, …, c0}], [bar]`: `map` the generic address of the kernel's tensor map
//!   parameter for (`src`'s tensor, box, swizzle) (`manifest::tensor_map`), the coordinates
//!   `src`'s indices as `.s32` registers, reversed (the IR lists them outermost first, the
//!   instruction innermost first).

use super::expr::Place;
use super::Cg;
use crate::ptx::{
    AddrBase, Address, Cmp, Guard, IntOp, Op, Operand, Reg, Space, Type, WgmmaA, WgmmaInput,
};
use tlc_ir::wgmma::{Major, SmemOperand, Swizzle};
use tlc_ir::{DType, ElemRef, Expr, ExprKind, Intrinsic, Span};

/// Where a `T.wgmma` / `T.wgmma_rs` takes A from.
pub(super) enum ASource<'a> {
    /// Shared memory, read through a descriptor of this layout.
    Shared(&'a ElemRef, SmemOperand),
    /// Each thread's 8 16-bit registers from this element on (`T.wgmma_rs`).
    Registers(&'a ElemRef),
}

impl Cg {
    pub(super) fn wgmma(
        &mut self,
        acc: &ElemRef,
        a: ASource<'_>,
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
        let (a_ref, a_dtype, a_operand, trans_a) = match a {
            ASource::Shared(a, da) => {
                let Some((a_dtype, Place::Mem(_, addr_a))) =
                    self.mem_operand(a, Space::Shared, "the A operand of T.wgmma")
                else {
                    return;
                };
                (a, a_dtype, Err((addr_a, da)), da.major == Major::MN)
            }
            ASource::Registers(a) => {
                let Some((a_dtype, halves)) = self.local_run(a, 8, "the A operand of T.wgmma_rs")
                else {
                    return;
                };
                let words = match self.kept_words(a) {
                    Some(words) => words,
                    None => self.pack_pairs(&halves),
                };
                let Ok(words) = <[Reg; 4]>::try_from(words) else {
                    self.err(a.buffer.span, "T.wgmma_rs: A is not 8 registers");
                    return;
                };
                (a, a_dtype, Ok(WgmmaA::Regs(words)), false)
            }
        };
        let Some((b_dtype, Place::Mem(_, addr_b))) =
            self.mem_operand(b, Space::Shared, "the B operand of T.wgmma")
        else {
            return;
        };
        let (Some(a_ty), Some(b_ty)) = (WgmmaInput::of(a_dtype), WgmmaInput::of(b_dtype)) else {
            self.err(
                a_ref.buffer.span,
                format!("T.wgmma of {a_dtype} x {b_dtype} elements"),
            );
            return;
        };
        // The verifier's rule (one dtype or two fp8s, fp8 K-major); checked again here
        // because the fp8 form has no transpose operand to carry a flag.
        let trans = (trans_a, db.major == Major::MN);
        if let Err(why) = tlc_ir::wgmma::operand_rule(
            (&a_ref.buffer.name, a_dtype),
            (&b.buffer.name, b_dtype),
            trans.0,
            trans.1,
        ) {
            self.err(a_ref.buffer.span, why);
            return;
        }
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
        // A's descriptor (shared A) before B's, as the instruction lists them.
        let a_operand = match a_operand {
            Ok(regs) => regs,
            Err((addr_a, da)) => WgmmaA::Desc(self.descriptor(&addr_a, &da)),
        };
        let desc_b = self.descriptor(&addr_b, &db);
        for &r in &d {
            self.forget_packed(r);
        }
        self.b.emit(Op::Wgmma {
            n: n32,
            a_ty,
            b_ty,
            d,
            a: a_operand,
            desc_b,
            scale_d,
            trans_a: trans.0,
            trans_b: trans.1,
        });
    }

    /// The shared address of the mbarrier `bar` (an int64 element of a shared buffer).
    pub(super) fn mbarrier(&mut self, bar: &ElemRef, what: &str) -> Option<Address> {
        match self.mem_operand(bar, Space::Shared, &format!("the mbarrier of {what}"))? {
            (_, Place::Mem(_, addr)) => Some(addr),
            // `mem_operand` checked that the buffer is shared: it has an address.
            (_, Place::Reg(_)) => {
                self.err(
                    bar.buffer.span,
                    format!("the mbarrier of {what} has no address"),
                );
                None
            }
        }
    }

    /// `T.mbarrier_wait(bar, parity)`: the address and the parity bit before the loop, then
    /// `L: try_wait p; @!p bra L`.
    pub(super) fn mbarrier_wait(&mut self, bar: &ElemRef, parity: &Expr) {
        let Some(addr) = self.mbarrier(bar, "T.mbarrier_wait") else {
            return;
        };
        // Only the low bit counts: a constant folds, a run-time value is masked (in 32 bits;
        // a wider integer is truncated first, which keeps its low bit).
        let parity = match self.const_eval(parity) {
            Some(v) => Operand::Imm(v & 1),
            None => {
                let Some(v) = self.expr_as(parity, DType::Int32) else {
                    return;
                };
                let v = self.in_reg(v, Type::S32);
                self.b.int(IntOp::And, Type::B32, v, Operand::Imm(1)).into()
            }
        };
        let top = self.b.label("mbar_wait");
        self.b.place(&top);
        let done = self.b.new_reg(Type::Pred);
        self.b.emit(Op::MbarrierTryWait {
            dst: done,
            addr,
            parity,
        });
        self.b.bra_if(Guard::unless(done), &top);
    }

    /// `T.tma_load`: the destination and mbarrier addresses, the box origin as `.s32`
    /// coordinates innermost first, and the tensor map the kernel's prologue addressed.
    pub(super) fn tma_load(
        &mut self,
        call: &Intrinsic,
        (dst, src, bar): (&ElemRef, &ElemRef, &ElemRef),
        (swizzle, multicast): (i64, i64),
        span: Span,
    ) {
        let Some((_, Place::Mem(_, daddr))) =
            self.mem_operand(dst, Space::Shared, "the destination of T.tma_load")
        else {
            return;
        };
        // The arena is aligned for TMA (`arena_alignment`) and plan-shared-memory aligns the
        // buffer; a hand-planned arena may not, and a constant index is known here.
        let align = Swizzle::from_bytes(swizzle).map_or(1024, Swizzle::tma_alignment);
        let constant = dst.indices.iter().all(|e| self.const_eval(e).is_some());
        if constant && daddr.offset % align != 0 {
            self.err(
                dst.buffer.span,
                format!(
                    "the destination of this `T.tma_load` lies at shared byte {} of the arena, \
                     not a multiple of {align} (what TMA needs with swizzle {swizzle}): align \
                     `{}` in `T.shared_arena`",
                    daddr.offset, dst.buffer.name
                ),
            );
            return;
        }
        let Some(bar_addr) = self.mbarrier(bar, "T.tma_load") else {
            return;
        };
        let tmap = super::manifest::tensor_map_desc(call).and_then(|desc| {
            self.tensor_maps
                .iter()
                .find(|(d, _)| *d == desc)
                .map(|(_, r)| *r)
        });
        let Some(tmap) = tmap else {
            self.err(
                span,
                "internal error: this `T.tma_load` has no tensor map parameter",
            );
            return;
        };
        let mut coords = Vec::with_capacity(src.indices.len());
        for index in src.indices.iter().rev() {
            let Some(c) = self.tma_coordinate(index) else {
                return;
            };
            coords.push(c);
        }
        // The verifier checked the mask (a 16-bit constant); 0 is no multicast.
        let multicast = (multicast != 0).then(|| self.b.mov(Type::B16, Operand::Imm(multicast)));
        self.b.emit(Op::TmaLoad {
            dst: daddr,
            tmap,
            coords,
            bar: bar_addr,
            multicast,
        });
    }

    /// A TMA box coordinate in an `.s32` register. A 64-bit index saturates (`cvt.sat`)
    /// instead of wrapping: a tensor dim is at most `MAX_TMA_DIM` (below `i32::MAX` by more
    /// than a box), so an origin past `.s32` stays wholly outside the tensor and the box
    /// reads the zeros the interpreter gives it; one inside `.s32` is unchanged.
    fn tma_coordinate(&mut self, index: &Expr) -> Option<Reg> {
        let wide = self.typed(index)?.dtype == DType::Int64 && index.as_int().is_none();
        if !wide {
            let v = self.expr_as(index, DType::Int32)?;
            return Some(self.in_reg(v, Type::S32));
        }
        let v = self.expr(index, DType::Int64)?;
        Some(self.b.cvt_with(None, true, Type::S32, Type::S64, v))
    }

    /// `T.mbarrier_arrive_cluster(bar, rank)`: the barrier's shared::cta address in a
    /// register, mapped into block `rank` (`mapa`), and a cluster-scope release arrival.
    pub(super) fn mbarrier_arrive_cluster(&mut self, bar: &ElemRef, rank: &Expr) {
        let Some(addr) = self.mbarrier(bar, "T.mbarrier_arrive_cluster") else {
            return;
        };
        let rank = match self.const_eval(rank) {
            Some(v) => Operand::Imm(v),
            None => {
                let Some(v) = self.expr_as(rank, DType::Int32) else {
                    return;
                };
                self.in_reg(v, Type::U32).into()
            }
        };
        let local = self.address_in_reg(&addr);
        let remote = self.b.new_reg(Type::U32);
        self.b.emit(Op::Mapa {
            dst: remote,
            addr: local,
            rank,
        });
        self.b.emit(Op::MbarrierArriveCluster { addr: remote });
    }

    /// The shared address `addr` (base + constant offset) as one `.u32` register.
    fn address_in_reg(&mut self, addr: &Address) -> Reg {
        let base = match &addr.base {
            AddrBase::Reg(r) => Operand::Reg(*r),
            AddrBase::Symbol(s) => Operand::Symbol(s.clone()),
        };
        let base = self.in_reg(base, Type::U32);
        if addr.offset == 0 {
            base
        } else {
            self.b
                .int(IntOp::Add, Type::U32, base, Operand::Imm(addr.offset))
        }
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
        let start = self.address_in_reg(addr);
        // The start address field is 14 bits of `(addr & 0x3FFFF) >> 4`. Outside clusters
        // shared addresses are below 2^18; in a cluster launch a block's shared::cta addresses
        // carry its rank above bit 23 (block 1's window starts at 0x1000000, measured on an
        // H200), which unmasked would spill into the leading-byte-offset field.
        let mut field = self.b.int(IntOp::Shr, Type::U32, start, Operand::Imm(4));
        if self.in_cluster {
            field = self
                .b
                .int(IntOp::And, Type::B32, field, Operand::Imm(0x3FFF));
        }
        let low = self
            .b
            .int(IntOp::Or, Type::B32, field, Operand::Imm(lo as i64));
        let high = self.b.mov(Type::U32, Operand::Imm(hi as i64));
        self.b.pack(Type::B64, vec![low.into(), high.into()])
    }
}
