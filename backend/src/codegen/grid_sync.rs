//! `T.sync_grid()` as a counter barrier on global memory.
//!
//! The kernel is launched cooperatively (the manifest's `cooperative`: every block of the
//! grid is resident at once, so a block that waits never keeps another from running). Its
//! `k`-th grid barrier (k = 1, 2, … in program order; every block reaches each one, rule
//! Y2) is
//!
//! ```text
//!   bar.sync 0                                  // the block's writes are done
//!   if thread (0, 0, 0):
//!     fence.acq_rel.gpu
//!     atom.release.gpu.global.add.u32 _, [c], 1 // arrive, publishing them
//!     wait: ld.acquire.gpu.global.u32 n, [c]    // until every block has arrived
//!           if n < k * gridsize: goto wait
//!     fence.acq_rel.gpu
//!   bar.sync 0                                  // the block goes on together
//! ```
//!
//! on this kernel's element `c` of the scratch counter (`manifest::GRID_BARRIER`), which the
//! runtime zeroes per launch: after the `k`-th barrier it holds `k * gridsize`. The release
//! of each arrival and the acquire that reads the final count make every block's writes
//! before the barrier visible to the thread that waited; its `bar.sync` passes them on to
//! the block (PTX's memory model: causality order through the barrier). The fences are
//! cooperative groups' (`grid.sync()` brackets its arrival and wait with
//! `__threadfence()`), so the block's plain accesses of either side are ordered at GPU
//! scope whatever the hardware caches.

use super::Cg;
use crate::ptx::{Address, Cmp, Guard, IntOp, MulMode, Op, Operand, SpecialReg, Type};
use tlc_ir::Span;

impl Cg {
    pub(super) fn grid_sync(&mut self, span: Span) {
        let Some((counter, slot)) = self.grid_barrier else {
            self.err(
                span,
                "internal error: a grid barrier in a kernel without its counter",
            );
            return;
        };
        self.grid_syncs += 1;
        let k = i64::from(self.grid_syncs);
        self.b.bar_sync();
        let tid = [SpecialReg::TidX, SpecialReg::TidY, SpecialReg::TidZ].map(|s| self.b.special(s));
        let t = self.b.int(IntOp::Add, Type::U32, tid[0], tid[1]);
        let t = self.b.int(IntOp::Add, Type::U32, t, tid[2]);
        let others = self.b.setp(Cmp::Ne, Type::U32, t, Operand::Imm(0));
        let done = self.b.label("grid_sync_done");
        self.b.bra_if(Guard::when(others), &done);
        let n = [
            SpecialReg::NctaidX,
            SpecialReg::NctaidY,
            SpecialReg::NctaidZ,
        ]
        .map(|s| self.b.special(s));
        let blocks = self.b.int(IntOp::Mul(MulMode::Lo), Type::U32, n[0], n[1]);
        let blocks = self.b.int(IntOp::Mul(MulMode::Lo), Type::U32, blocks, n[2]);
        let goal = self
            .b
            .int(IntOp::Mul(MulMode::Lo), Type::U32, blocks, Operand::Imm(k));
        let addr = Address {
            base: crate::ptx::AddrBase::Reg(counter),
            offset: 4 * i64::from(slot),
        };
        let old = self.b.new_reg(Type::U32);
        self.b.emit(Op::FenceAcqRelGpu);
        self.b.emit(Op::AtomAddRelease {
            dst: old,
            addr: addr.clone(),
            src: Operand::Imm(1),
        });
        let wait = self.b.label("grid_sync_wait");
        self.b.place(&wait);
        let seen = self.b.new_reg(Type::U32);
        self.b.emit(Op::LdAcquire { dst: seen, addr });
        let early = self.b.setp(Cmp::Lt, Type::U32, seen, goal);
        self.b.bra_if(Guard::when(early), &wait);
        self.b.emit(Op::FenceAcqRelGpu);
        self.b.place(&done);
        self.b.bar_sync();
    }
}
