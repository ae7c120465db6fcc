//! The Hopper (sm_90a) intrinsics (docs/ir.md, "Hopper intrinsics"):
//!
//! - mbarriers live in the shared arena's side table (`shared.rs`), keyed by the byte address
//!   of their int64 element. `T.mbarrier_init` sets {phase 0, `count` arrivals pending, no
//!   transaction bytes}; an arrival and a transaction count reaching zero together complete
//!   the phase (phase + 1, arrivals reset). `T.mbarrier_wait(bar, parity)` passes when the
//!   barrier's phase parity differs from `parity` and records that the thread has seen the
//!   barrier's completed phases (and acquires what their arrivals knew: `order.rs`);
//!   otherwise it is pending: the thread's task blocks until the barrier changes, and when
//!   every task is blocked that is a deadlock (`tasks.rs`).
//! - `T.tma_load` runs at issue: the box is read from global memory (zeros outside the
//!   tensor), written row-major into shared memory through `wgmma::swizzle_address`, and its
//!   bytes complete on the barrier. Those bytes are guarded until the reading thread knows
//!   that phase complete (the arena reports an access before). The write itself is checked
//!   as one by the issuing thread (`shared.rs`): against in-flight or unordered wgmma reads,
//!   an earlier copy to the same bytes whose phase it does not know complete, and other
//!   threads' accesses since the last barrier.
//! - `T.wgmma` computes at issue, once per warpgroup, but its accumulators stay owned by the
//!   op until a `T.wgmma_wait` retires its group (the thread's `RegGuard` reports other
//!   accesses), and the shared bytes it read may not be written until then — by another
//!   warpgroup's thread (or its `T.tma_load`) only once that thread knows of the retirement
//!   through a barrier or an mbarrier (`order.rs`). Its operands are
//!   read through the descriptors' layouts (`wgmma::SmemOperand`) at the addresses the
//!   warpgroup's first thread gives, as the async proxy: pending, unobserved or
//!   never-written bytes are errors, and so are bytes another thread stored since the last
//!   barrier (a race: mbarriers do not order ordinary stores in this model). An accumulator written by ordinary code
//!   since the warpgroup's last `T.wgmma_fence` (or with no fence yet) is an error.
//! - `T.fence_proxy_async` and `T.setmaxnreg` change nothing the interpreter models: the
//!   async proxy here sees every write at once, and register allocation is a hint.

use crate::interp::compile::{BufRef, CExpr, CRef, CWgmma};
use crate::interp::eval::{fault, Frame, Res};
use crate::interp::memory::ClusterPos;
use crate::interp::scalar::Scalar;
use crate::interp::shared::{encode, SharedArena, MBARRIER_BYTES};
use crate::span::Span;
use crate::wgmma::{swizzle_address, SmemOperand, Swizzle};

/// What `T.mbarrier_wait` found for one thread.
pub(crate) enum WaitPoll {
    /// The phase has completed: the thread may pass (the barrier's address).
    Ready(usize),
    /// It has not.
    Pending(PendingWait),
}

/// A wait that cannot pass yet: the barrier's address and name, the parity waited for.
#[derive(Clone, Debug)]
pub(crate) struct PendingWait {
    pub addr: usize,
    pub name: String,
    pub parity: i64,
}

/// The rows of A (M) of one `T.wgmma`; its k is the operands' (`CWgmma::k`).
pub(crate) const WGMMA_M: usize = 64;
/// Each thread's A elements of one `T.wgmma_rs` (a 64 x 16 tile over 128 threads).
pub(crate) const WGMMA_A_REGS: usize = 8;

impl Frame<'_> {
    /// The arena, or the fault of an intrinsic that needs one.
    fn arena(&mut self, span: Span, op: &str) -> Res<&mut SharedArena> {
        match &mut self.mem.shared {
            Some(a) => Ok(a),
            None => fault(
                span,
                format!("{op} outside a thread-level kernel's shared memory"),
            ),
        }
    }

    /// The byte address of the mbarrier `bar` and its name for messages.
    fn mbarrier_at(&self, bar: &CRef, span: Span, op: &str) -> Res<(usize, String)> {
        let flat = self.run_start(bar, 1, span, op)?;
        let b = self.mem.buffer(bar.buf);
        if b.arena_offset.is_none() {
            return fault(span, format!("{op}: `{}` is not in shared memory", b.name));
        }
        let addr = self.byte_address(bar.buf, flat);
        if !addr.is_multiple_of(MBARRIER_BYTES) {
            return fault(
                span,
                format!("{op}: the mbarrier at shared byte {addr} is not 8-byte aligned"),
            );
        }
        Ok((addr, b.element_text(flat)))
    }

    /// `T.mbarrier_init(bar, count)`.
    pub(crate) fn mbarrier_init(&mut self, bar: &CRef, count: i64, span: Span) -> Res<()> {
        let (addr, _) = self.mbarrier_at(bar, span, "`T.mbarrier_init`")?;
        self.arena(span, "`T.mbarrier_init`")?
            .init_mbarrier(addr, count);
        Ok(())
    }

    /// `T.mbarrier_arrive(bar)` (`tx` 0) and `T.mbarrier_arrive_expect_tx(bar, tx)`.
    pub(crate) fn mbarrier_arrive(&mut self, bar: &CRef, tx: i64, span: Span) -> Res<()> {
        const OP: &str = "`T.mbarrier_arrive`";
        let (addr, name) = self.mbarrier_at(bar, span, OP)?;
        let thread = self.mem.thread;
        match self
            .arena(span, OP)?
            .mbarrier_update(addr, true, tx, thread)
        {
            Ok(()) => Ok(()),
            Err(why) => fault(span, format!("the mbarrier {name} {why}")),
        }
    }

    /// `T.mbarrier_wait(bar, parity)` for the running thread: whether the phase it waits for
    /// has completed. It records nothing: the caller makes the thread observe the barrier
    /// (`SharedArena::observe`) once every thread of its task may pass.
    pub(crate) fn mbarrier_poll(
        &mut self,
        bar: &CRef,
        parity: &CExpr,
        span: Span,
    ) -> Res<WaitPoll> {
        const OP: &str = "`T.mbarrier_wait`";
        let (addr, name) = self.mbarrier_at(bar, span, OP)?;
        let parity = self.eval(parity)?.as_i64() & 1;
        let arena = self.arena(span, OP)?;
        let Some(m) = arena.mbarrier(addr) else {
            return fault(
                span,
                format!("the mbarrier {name} is used before `T.mbarrier_init`"),
            );
        };
        // The phase of parity `parity` that the wait is for has completed when the current
        // phase has the other parity.
        if (m.phase & 1) as i64 != parity {
            return Ok(WaitPoll::Ready(addr));
        }
        Ok(WaitPoll::Pending(PendingWait { addr, name, parity }))
    }

    /// `T.mbarrier_arrive_cluster(bar, rank)`: an arrival on the barrier at `bar`'s place
    /// in block `rank` of the running thread's cluster.
    pub(crate) fn mbarrier_arrive_cluster(
        &mut self,
        bar: &CRef,
        rank: &CExpr,
        span: Span,
    ) -> Res<()> {
        const OP: &str = "`T.mbarrier_arrive_cluster`";
        let (addr, name) = self.mbarrier_at(bar, span, OP)?;
        let r = self.eval(rank)?.as_i64();
        let pos = self.cluster_pos();
        let Some(r) = usize::try_from(r).ok().filter(|&r| r < pos.ranks) else {
            return fault(
                span,
                format!(
                    "{OP} to block {r} of a cluster of {} block{}",
                    pos.ranks,
                    if pos.ranks == 1 { "" } else { "s" }
                ),
            );
        };
        let addr = pos.remote(addr, r);
        let thread = self.mem.thread;
        match self.arena(span, OP)?.mbarrier_update(addr, true, 0, thread) {
            Ok(()) => Ok(()),
            Err(why) => fault(
                span,
                format!("the mbarrier {name} of the cluster's block {r} {why}"),
            ),
        }
    }

    /// The running thread's place in its cluster (a block alone is a cluster of one).
    fn cluster_pos(&self) -> ClusterPos {
        let bytes = self.mem.shared.as_ref().map_or(0, SharedArena::len);
        self.mem.cluster.unwrap_or(ClusterPos {
            rank: 0,
            ranks: 1,
            stride: bytes,
            block_bytes: bytes,
        })
    }

    /// `T.tma_load(dst, src, bar, box, swizzle, multicast)` issued by the running thread.
    pub(crate) fn tma_load(
        &mut self,
        (dst, src, bar): (&CRef, &CRef, &CRef),
        box_dims: &[usize],
        (swizzle, multicast): (Swizzle, u32),
        span: Span,
    ) -> Res<()> {
        const OP: &str = "`T.tma_load`";
        let count: usize = box_dims.iter().product();
        let dflat = self.run_start(dst, count, span, OP)?;
        let dbuf = self.mem.buffer(dst.buf);
        if dbuf.arena_offset.is_none() {
            return fault(
                span,
                format!("{OP}: `{}` is not in shared memory", dbuf.name),
            );
        }
        let dtype = dbuf.dtype;
        let esz = dtype.bytes() as usize;
        let daddr = self.byte_address(dst.buf, dflat);
        let align = usize::try_from(swizzle.tma_alignment()).unwrap_or(128);
        if !daddr.is_multiple_of(align) {
            return fault(
                span,
                format!(
                    "{OP} to {} at shared byte {daddr}, which is not a multiple of {align} \
                     (swizzle {})",
                    dbuf.element_text(dflat),
                    swizzle.bytes()
                ),
            );
        }
        let (baddr, bname) = self.mbarrier_at(bar, span, OP)?;
        // The box's origin: coordinates, which may lie outside the tensor.
        let origin = src
            .indices
            .iter()
            .map(|e| self.eval(e).map(Scalar::as_i64))
            .collect::<Res<Vec<i64>>>()?;
        let shape = self.mem.buffer(src.buf).shape.clone();
        let strides = self.mem.buffer(src.buf).strides();
        let mut data = Vec::with_capacity(count);
        let mut idx = vec![0usize; box_dims.len()];
        for _ in 0..count {
            let mut flat = Some(0usize);
            for (((&o, &i), &n), &s) in origin.iter().zip(&idx).zip(&shape).zip(&strides) {
                let c = o
                    .checked_add(i as i64)
                    .and_then(|c| usize::try_from(c).ok());
                flat = match (flat, c) {
                    (Some(f), Some(c)) if c < n => Some(f + c * s),
                    _ => None,
                };
            }
            let v = match flat {
                Some(f) => self.read_elem(src.buf, f, span, OP)?,
                None => Scalar::zero(dtype),
            };
            // Bytes move unchanged: the source has the destination's dtype (rule I4).
            data.push(encode(dtype, v));
            // The next box position, innermost dimension fastest.
            for (i, &n) in idx.iter_mut().zip(box_dims).rev() {
                *i += 1;
                if *i < n {
                    break;
                }
                *i = 0;
            }
        }
        let thread = self.mem.thread;
        let tag = match dst.buf {
            BufRef::Local(i) => self.mem.tag_of(i),
            BufRef::Global(_) => 0,
        };
        // The blocks the box lands in: the issuer's, or each block of the mask.
        let pos = self.cluster_pos();
        let targets: Vec<usize> = if multicast == 0 {
            vec![pos.rank]
        } else {
            let past = (0..32).find(|&b| multicast >> b & 1 == 1 && b >= pos.ranks);
            if let Some(b) = past {
                return fault(
                    span,
                    format!(
                        "{OP} multicasts to block {b} of a cluster of {} block{} (mask {multicast:#x})",
                        pos.ranks,
                        if pos.ranks == 1 { "" } else { "s" }
                    ),
                );
            }
            (0..pos.ranks)
                .filter(|&r| multicast >> r & 1 == 1)
                .collect()
        };
        let block_end = pos.rank * pos.stride + pos.block_bytes;
        let arena = self.arena(span, OP)?;
        for r in targets {
            let baddr_r = pos.remote(baddr, r);
            let Some(m) = arena.mbarrier(baddr_r) else {
                return fault(
                    span,
                    format!(
                        "the mbarrier {bname}{} is used before `T.mbarrier_init`",
                        if r == pos.rank {
                            String::new()
                        } else {
                            format!(" of the cluster's block {r}")
                        }
                    ),
                );
            };
            let region = arena.tma_region(m.slot, m.phase);
            for (k, bytes) in data.iter().enumerate() {
                let at = swizzle_address((daddr + k * esz) as u64, swizzle) as usize;
                if at.saturating_add(esz) > block_end {
                    return fault(
                        span,
                        format!(
                            "{OP} writes shared byte {}, past the {}-byte arena",
                            at - pos.rank * pos.stride,
                            pos.block_bytes
                        ),
                    );
                }
                let at = pos.remote(at, r);
                arena.tma_write(at, bytes.get(..esz).unwrap_or(&[]), region, thread);
                arena.set_tags(at, esz, tag);
            }
            let total = i64::try_from(count * esz).unwrap_or(i64::MAX);
            if let Err(why) = arena.mbarrier_update(baddr_r, false, -total, None) {
                return fault(span, format!("the mbarrier {bname} {why}"));
            }
        }
        Ok(())
    }

    /// The shared start address of a `T.wgmma` operand (16-byte aligned) and its dtype size.
    fn wgmma_start(&self, r: &CRef, span: Span, what: &str) -> Res<(usize, usize)> {
        let flat = self.run_start(r, 1, span, "`T.wgmma`")?;
        let b = self.mem.buffer(r.buf);
        let addr = self.byte_address(r.buf, flat);
        if b.arena_offset.is_none() || !addr.is_multiple_of(16) {
            return fault(
                span,
                format!(
                    "`T.wgmma`: the {what} descriptor starts at {} (shared byte {addr}), which \
                     is not a 16-byte aligned shared address",
                    b.element_text(flat)
                ),
            );
        }
        Ok((addr, b.dtype.bytes() as usize))
    }

    /// Reads a `T.wgmma` operand of `rows` × `k` (`mn`, `k`) through its layout from
    /// `start`, for the warpgroup's first thread; also returns the byte addresses read (every
    /// byte of every element).
    pub(crate) fn wgmma_operand(
        &self,
        r: &CRef,
        layout: &SmemOperand,
        (rows, wgmma_k): (usize, usize),
        span: Span,
        what: &str,
    ) -> Res<(Vec<f32>, Vec<usize>)> {
        let (start, esz) = self.wgmma_start(r, span, what)?;
        let dtype = self.mem.buffer(r.buf).dtype;
        let Some(arena) = &self.mem.shared else {
            return fault(
                span,
                "`T.wgmma` outside a thread-level kernel's shared memory",
            );
        };
        let mut vals = Vec::with_capacity(rows * wgmma_k);
        let mut addrs = Vec::with_capacity(rows * wgmma_k);
        for mn in 0..rows {
            for k in 0..wgmma_k {
                let at = layout
                    .address(start as u64, esz as i64, mn as i64, k as i64)
                    .and_then(|a| usize::try_from(a).ok())
                    .unwrap_or(usize::MAX);
                match arena.async_read(at, dtype, self.mem.thread) {
                    // f16 / bf16 / fp8 convert to f32 exactly.
                    Ok(v) => vals.push(v.as_f64() as f32),
                    Err(why) => {
                        return fault(
                            span,
                            format!("`T.wgmma` reads element ({mn}, {k}) of its {what}: {why}"),
                        )
                    }
                }
                let slot = match r.buf {
                    BufRef::Local(i) => Some(i),
                    BufRef::Global(_) => None,
                };
                let element = || format!("element ({mn}, {k}) of its {what}");
                if let Some(why) = slot.and_then(|i| self.mem.stale(i, at, esz, &element)) {
                    return fault(span, format!("`T.wgmma`: {why}"));
                }
                // Every byte of the element: the write guards are per byte, and an
                // element's size depends on the dtype.
                addrs.extend(at..at.saturating_add(esz));
            }
        }
        Ok((vals, addrs))
    }

    /// One thread's accumulator part of a `T.wgmma` (thread `t` of its warpgroup): reads its
    /// `n / 2` elements (unless `accumulate` is false), adds its rows and columns of A·B,
    /// writes them back. `a` is 64 × k and `b` N × k, row-major in (mn, k).
    pub(crate) fn wgmma_thread(
        &mut self,
        w: &CWgmma,
        t: usize,
        (a, b): (&[f32], &[f32]),
        span: Span,
    ) -> Res<usize> {
        const OP: &str = "`T.wgmma`";
        let half = w.n / 2;
        let flat = self.run_start(&w.acc, half, span, OP)?;
        let accumulate = match &w.accumulate {
            Some(p) => self.eval(p)?.as_bool(),
            None => true,
        };
        let (warp, lane) = (t / 32, t % 32);
        for i in 0..half {
            let row = 16 * warp + lane / 4 + 8 * ((i >> 1) & 1);
            let col = 8 * (i >> 2) + 2 * (lane % 4) + (i & 1);
            // As `T.mma_sync`: products and partial sums rounded to f32, k in order from 0,
            // the old accumulator added last. (f16 / bf16 / fp8 products are exact in f32.
            // The hardware adds in another order and, for fp8, keeps fewer bits than f32 in
            // its sums — about 14 per DeepSeek-V3's measurement; docs/ir.md says how tests
            // bound the difference.)
            let wk = w.k;
            if self.mem.buffer(w.acc.buf).dtype == crate::dtype::DType::Int32 {
                // int8 inputs, int32 accumulator: exact products and sums, wrapping modulo
                // 2^32 like the hardware's `.s32` form (the operands hold int8 values, exact
                // in f32).
                let mut sum = 0i64;
                for k in 0..wk {
                    let x = a.get(row * wk + k).copied().unwrap_or(0.0) as i64;
                    let y = b.get(col * wk + k).copied().unwrap_or(0.0) as i64;
                    sum += x * y;
                }
                let d = if accumulate {
                    let c = self.read_elem(w.acc.buf, flat + i, span, OP)?.as_i64();
                    sum.wrapping_add(c)
                } else {
                    sum
                };
                self.mem
                    .write(w.acc.buf, flat + i, Scalar::Int(i64::from(d as i32)));
                continue;
            }
            let mut sum = 0f32;
            for k in 0..wk {
                let x = a.get(row * wk + k).copied().unwrap_or(0.0);
                let y = b.get(col * wk + k).copied().unwrap_or(0.0);
                sum += x * y;
            }
            let d = if accumulate {
                sum + self.read_elem(w.acc.buf, flat + i, span, OP)?.as_f64() as f32
            } else {
                sum
            };
            self.mem
                .write(w.acc.buf, flat + i, Scalar::Float(f64::from(d)));
        }
        Ok(flat)
    }
}
