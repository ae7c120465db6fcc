//! The thread level: all threads of a block run a `threadIdx.*` binding loop's body in
//! LOCKSTEP, with an active mask.
//!
//! - Each statement runs for every active thread, in thread order (linear index, x fastest),
//!   before the next statement starts.
//! - `if` splits the mask: the then-body runs for the threads whose condition holds, then the
//!   else-body for the others.
//! - A loop evaluates its bounds per thread and iterates while any thread still has
//!   iterations, masking out the threads that are done.
//! - A nested `threadIdx.*` loop binds its variable to each thread's index on its axis
//!   (`start + index`); threads whose index is not below its extent sit it out.
//! - Lets, loop variables and local / fragment buffers are per thread; shared buffers (and
//!   globals) are the block's.
//! - `T.sync_threads()` needs every thread of the block active: reaching it in divergent code
//!   is an error. It starts a new race epoch in shared memory (`shared.rs`).
//! - `T.cp_async` issues per thread into the thread's open group; commit / wait act on the
//!   thread's groups (`ops/intrinsics.rs`). `T.ldmatrix` and `T.mma_sync` run once per warp
//!   (linear thread index / 32), which must have all 32 lanes active; the `T.wgmma*` and
//!   `T.setmaxnreg` collectives once per warpgroup (128 threads, all active), whose wgmma
//!   groups and register guards (in-flight accumulators, the fence rule) are kept here.
//! - The end of a thread loop entered from block level acts as a barrier too: all threads
//!   finished it before anything after it runs. Consecutive thread loops (the SIMT regions
//!   that `lower-tile-ops` emits) are therefore ordered like regions separated by
//!   `T.sync_threads()`.
//!
//! Per-thread state is kept here and swapped into the block's `Frame` while one thread runs
//! one statement, so every op and expression is evaluated by the same code as at the tile
//! level.

use crate::interp::compile::{BufRef, CCall, CExpr, CIntrinsic, CStmt, CStmtKind, CWgmma};
use crate::interp::eval::{fault, Frame, Res};
use crate::interp::memory::{Buffer, RegGuard};
use crate::interp::ops::hopper::WGMMA_M;
use crate::interp::ops::intrinsics::{mma_m16n8k16, partial_group, AsyncGroups};
use crate::interp::scalar::Scalar;
use crate::interp::tensor::MAX_ELEMENTS;
use crate::intrinsic::Collective;
use crate::span::Span;
use crate::target::{WARPGROUP_SIZE, WARP_SIZE};
use std::collections::{HashMap, HashSet, VecDeque};

/// The threads of a warpgroup.
const WARPGROUP: usize = WARPGROUP_SIZE as usize;

/// The threads of one block: their registers (scalar slots and private buffers).
pub(crate) struct ThreadState {
    /// Block shape, x first.
    shape: [usize; 3],
    /// How many dimensions the kernel declares, for thread names in messages.
    dims: usize,
    n: usize,
    /// Each thread's scalar slots.
    vars: Vec<Vec<Scalar>>,
    /// The `Memory::locals` slots that are per thread (local and fragment allocations).
    slots: Vec<usize>,
    /// `private[t][k]`: thread `t`'s copy of the buffer in slot `slots[k]`.
    private: Vec<Vec<Buffer>>,
    /// Each thread's `T.cp_async` groups (`ops/intrinsics.rs`).
    pub asyncs: Vec<AsyncGroups>,
    /// Each thread's register guards (`T.wgmma`), swapped into the memory while it runs.
    regs: Vec<RegGuard>,
    /// Each warpgroup's `T.wgmma` groups (by warpgroup index).
    wgmma: Vec<WgmmaGroups>,
    /// The shared byte addresses each in-flight `T.wgmma` (by id) reads.
    wgmma_reads: HashMap<u64, Vec<usize>>,
    next_wgmma: u64,
}

/// One warpgroup's `T.wgmma`s: the open group and the committed ones, oldest first.
#[derive(Clone, Debug, Default)]
struct WgmmaGroups {
    open: Vec<u64>,
    committed: VecDeque<Vec<u64>>,
}

impl ThreadState {
    /// `shape.iter().product()` threads, each with never-written copies of the buffers in
    /// `slots` of `locals`.
    pub fn new(
        shape: [usize; 3],
        dims: usize,
        slots: Vec<usize>,
        locals: &[Buffer],
    ) -> Res<ThreadState> {
        let n: usize = shape.iter().product();
        let fresh: Vec<Buffer> = slots
            .iter()
            .filter_map(|&s| locals.get(s))
            .map(|b| Buffer::fresh(&b.name, b.dtype, b.shape.clone()))
            .collect();
        let per_thread: usize = fresh.iter().map(|b| b.data.len()).sum();
        if per_thread.saturating_mul(n) > MAX_ELEMENTS {
            return fault(
                Span::DUMMY,
                format!(
                    "the block's {n} threads need {per_thread} local elements each, more than the \
                     interpreter holds"
                ),
            );
        }
        Ok(ThreadState {
            shape,
            dims,
            n,
            vars: vec![Vec::new(); n],
            slots,
            private: vec![fresh; n],
            asyncs: vec![AsyncGroups::default(); n],
            regs: vec![RegGuard::default(); n],
            wgmma: Vec::new(),
            wgmma_reads: HashMap::new(),
            next_wgmma: 0,
        })
    }

    /// Thread `t`'s index along `axis`.
    fn coord(&self, t: usize, axis: usize) -> usize {
        let [x, y, _] = self.shape;
        let c = match axis {
            0 => t,
            1 => t / x.max(1),
            _ => t / (x * y).max(1),
        };
        c % self.shape.get(axis).copied().unwrap_or(1).max(1)
    }

    /// `5`, or `(5, 1)` for a 2-D block.
    fn name(&self, t: usize) -> String {
        if self.dims <= 1 {
            return t.to_string();
        }
        let parts: Vec<String> = (0..self.dims)
            .map(|a| self.coord(t, a).to_string())
            .collect();
        format!("({})", parts.join(", "))
    }
}

impl Frame<'_> {
    /// A `threadIdx.*` loop met in block-level code: every thread of the block starts with the
    /// block's variables and runs the loop.
    pub(crate) fn enter_threads(&mut self, stmt: &CStmt) -> Res<()> {
        let Some(mut st) = self.threads.take() else {
            return fault(stmt.span, "a thread loop outside a thread-level kernel");
        };
        for vars in &mut st.vars {
            vars.clone_from(&self.vars);
        }
        let all: Vec<usize> = (0..st.n).collect();
        let result = Lockstep {
            frame: self,
            st: &mut st,
        }
        .exec_one(stmt, &all);
        self.threads = Some(st);
        // A thread loop entered from block level runs every thread to completion before the
        // next statement, so its end orders memory like a barrier: a later loop reading what
        // this one wrote is not a race (the SIMT regions of `lower-tile-ops` rely on this).
        if let Some(shared) = &mut self.mem.shared {
            shared.barrier();
        }
        result
    }
}

struct Lockstep<'a, 'g> {
    frame: &'a mut Frame<'g>,
    st: &'a mut ThreadState,
}

impl Lockstep<'_, '_> {
    fn exec(&mut self, stmts: &[CStmt], active: &[usize]) -> Res<()> {
        for stmt in stmts {
            self.exec_one(stmt, active)?;
        }
        Ok(())
    }

    fn exec_one(&mut self, stmt: &CStmt, active: &[usize]) -> Res<()> {
        match &stmt.kind {
            CStmtKind::Loop {
                var,
                start,
                stop,
                body,
                thread_axis: Some(axis),
            } => self.thread_loop(*var, *axis, (start, stop), body, stmt.span, active),
            CStmtKind::Loop {
                var,
                start,
                stop,
                body,
                thread_axis: None,
            } => self.serial_loop(*var, (start, stop), body, stmt.span, active),
            CStmtKind::If {
                cond,
                then_body,
                else_body,
            } => {
                let (mut taken, mut not_taken) = (Vec::new(), Vec::new());
                for &t in active {
                    if self.on_thread(t, stmt.span, |f| f.eval(cond))?.as_bool() {
                        taken.push(t);
                    } else {
                        not_taken.push(t);
                    }
                }
                if !taken.is_empty() {
                    self.exec(then_body, &taken)?;
                }
                if !not_taken.is_empty() {
                    self.exec(else_body, &not_taken)?;
                }
                Ok(())
            }
            CStmtKind::Barrier => {
                if active.len() != self.st.n {
                    return fault(
                        stmt.span,
                        format!(
                            "barrier reached by {} of {} threads",
                            active.len(),
                            self.st.n
                        ),
                    );
                }
                if let Some(shared) = &mut self.frame.mem.shared {
                    shared.barrier();
                }
                Ok(())
            }
            CStmtKind::Intrinsic(i) => self.intrinsic(i, stmt.span, active),
            _ => {
                for &t in active {
                    self.on_thread(t, stmt.span, |f| f.exec_one(stmt))?;
                }
                Ok(())
            }
        }
    }

    /// A thread-level intrinsic for the active threads: per thread, or per group of
    /// threads that run it together (a warp, a warpgroup: every one of them must be active).
    fn intrinsic(&mut self, i: &CIntrinsic, span: Span, active: &[usize]) -> Res<()> {
        let width = match i.def.collective {
            Collective::Thread => {
                for &t in active {
                    self.thread_intrinsic(i, t, span)?;
                }
                return Ok(());
            }
            Collective::Warp => WARP_SIZE,
            Collective::Warpgroup => WARPGROUP_SIZE,
        };
        let width = usize::try_from(width).unwrap_or(1).max(1);
        let mut rest = active;
        while let Some(&first) = rest.first() {
            let group = first / width;
            let lanes = rest.iter().take_while(|&&t| t / width == group).count();
            let in_block = self.st.n.saturating_sub(group * width).min(width);
            if lanes != width {
                return fault(span, partial_group(i.def, group, lanes, in_block, width));
            }
            self.collective(i, group * width, span)?;
            rest = rest.get(lanes..).unwrap_or(&[]);
        }
        Ok(())
    }

    /// A per-thread intrinsic for thread `t`.
    fn thread_intrinsic(&mut self, i: &CIntrinsic, t: usize, span: Span) -> Res<()> {
        match &i.call {
            CCall::CpAsync {
                dst,
                src,
                bytes,
                pred,
            } => {
                let copy = self.on_thread(t, span, |f| {
                    f.cp_async_issue((dst, src), *bytes, pred.as_ref(), span)
                })?;
                if let (Some(copy), Some(groups)) = (copy, self.st.asyncs.get_mut(t)) {
                    groups.issue(copy);
                }
                Ok(())
            }
            CCall::Commit => {
                if let Some(groups) = self.st.asyncs.get_mut(t) {
                    groups.commit();
                }
                Ok(())
            }
            CCall::Wait(n) => {
                let landing = match self.st.asyncs.get_mut(t) {
                    Some(groups) => groups.retire(*n),
                    None => return Ok(()),
                };
                if landing.is_empty() {
                    return Ok(());
                }
                self.on_thread(t, span, |f| {
                    for c in &landing {
                        f.cp_async_land(c);
                    }
                    Ok(())
                })
            }
            CCall::MbarrierInit { bar, count } => {
                self.on_thread(t, span, |f| f.mbarrier_init(bar, *count, span))
            }
            CCall::MbarrierArrive { bar, tx } => {
                self.on_thread(t, span, |f| f.mbarrier_arrive(bar, *tx, span))
            }
            CCall::MbarrierWait { bar, parity } => {
                self.on_thread(t, span, |f| f.mbarrier_wait(bar, parity, span))
            }
            CCall::TmaLoad {
                dst,
                src,
                bar,
                box_dims,
                swizzle,
            } => self.on_thread(t, span, |f| {
                f.tma_load((dst, src, bar), box_dims, *swizzle, span)
            }),
            // The interpreter's async proxy sees every write at once.
            CCall::FenceProxyAsync => Ok(()),
            _ => fault(
                span,
                format!(
                    "internal error: `{}` is not a per-thread intrinsic",
                    i.def.name
                ),
            ),
        }
    }

    /// A warp collective (`T.ldmatrix`, `T.mma_sync`) for the warp of threads
    /// `base..base + 32`.
    fn collective(&mut self, i: &CIntrinsic, base: usize, span: Span) -> Res<()> {
        match &i.call {
            CCall::Ldmatrix {
                dst,
                src,
                num,
                trans,
            } => {
                let mut rows = Vec::with_capacity(8 * num);
                for lane in 0..8 * num {
                    rows.push(self.on_thread(base + lane, span, |f| f.ldmatrix_row(src, span))?);
                }
                for lane in 0..32 {
                    self.on_thread(base + lane, span, |f| {
                        f.ldmatrix_store(dst, &rows, (lane, *num, *trans), span)
                    })?;
                }
                Ok(())
            }
            CCall::Mma { acc, a, b } => {
                let mut lanes = Vec::with_capacity(32);
                for lane in 0..32 {
                    lanes.push(
                        self.on_thread(base + lane, span, |f| f.mma_operands((acc, a, b), span))?,
                    );
                }
                let d = mma_m16n8k16(&lanes);
                for (lane, (l, d)) in lanes.iter().zip(d).enumerate() {
                    self.on_thread(base + lane, span, |f| {
                        f.mma_store(acc, l.acc_flat, d);
                        Ok(())
                    })?;
                }
                Ok(())
            }
            CCall::Wgmma(w) => self.wgmma(w, base, span),
            CCall::WgmmaFence => {
                for t in base..base + WARPGROUP {
                    if let Some(r) = self.st.regs.get_mut(t) {
                        r.dirty = Some(HashSet::new());
                    }
                }
                Ok(())
            }
            CCall::WgmmaCommit => {
                let g = self.wgmma_groups(base);
                let open = std::mem::take(&mut g.open);
                g.committed.push_back(open);
                Ok(())
            }
            CCall::WgmmaWait(n) => {
                let g = self.wgmma_groups(base);
                let mut retired: Vec<u64> = Vec::new();
                while g.committed.len() > *n {
                    retired.extend(g.committed.pop_front().unwrap_or_default());
                }
                for t in base..base + WARPGROUP {
                    if let Some(r) = self.st.regs.get_mut(t) {
                        r.inflight.retain(|(_, _, id)| !retired.contains(id));
                    }
                }
                for id in retired {
                    let addrs = self.st.wgmma_reads.remove(&id).unwrap_or_default();
                    if let Some(arena) = &mut self.frame.mem.shared {
                        for a in addrs {
                            arena.hold_reads(a, 2, false);
                        }
                    }
                }
                Ok(())
            }
            // A register-allocation hint: nothing the interpreter models.
            CCall::SetMaxNReg => Ok(()),
            _ => fault(
                span,
                format!("internal error: `{}` is not a collective", i.def.name),
            ),
        }
    }

    /// The `T.wgmma` groups of the warpgroup starting at thread `base`.
    fn wgmma_groups(&mut self, base: usize) -> &mut WgmmaGroups {
        let wg = base / WARPGROUP;
        if self.st.wgmma.len() <= wg {
            self.st.wgmma.resize_with(wg + 1, WgmmaGroups::default);
        }
        &mut self.st.wgmma[wg]
    }

    /// `T.wgmma` for the warpgroup of threads `base..base + 128` (`ops/hopper.rs`).
    fn wgmma(&mut self, w: &CWgmma, base: usize, span: Span) -> Res<()> {
        let BufRef::Local(slot) = w.acc.buf else {
            return fault(span, "`T.wgmma`: the accumulator is not a local buffer");
        };
        let half = w.n / 2;
        // PTX: a `wgmma.fence` must order the accumulators' register writes before it.
        for t in base..base + WARPGROUP {
            let start =
                self.on_thread(t, span, |f| f.run_start(&w.acc, half, span, "`T.wgmma`"))?;
            let regs = self.st.regs.get(t);
            let missing = match regs.and_then(|r| r.dirty.as_ref()) {
                None => Some("with no `T.wgmma_fence` of its warpgroup before it".to_string()),
                Some(d) => (start..start + half)
                    .find(|&e| d.contains(&(slot, e)))
                    .map(|e| {
                        let name = self.frame.mem.locals.get(slot);
                        let what = name.map_or_else(String::new, |b| b.element_text(e));
                        format!(
                        "reading {what}, which this thread wrote after the last `T.wgmma_fence`"
                    )
                    }),
            };
            if let Some(why) = missing {
                return fault(
                    span,
                    format!(
                        "`T.wgmma` of thread {} {why}: missing `T.wgmma_fence`",
                        self.st.name(t)
                    ),
                );
            }
        }
        let (a, a_addrs) = self.on_thread(base, span, |f| {
            f.wgmma_operand(&w.a, &w.a_layout, WGMMA_M, span, "A operand")
        })?;
        let (b, b_addrs) = self.on_thread(base, span, |f| {
            f.wgmma_operand(&w.b, &w.b_layout, w.n, span, "B operand")
        })?;
        let id = self.st.next_wgmma;
        self.st.next_wgmma += 1;
        for t in base..base + WARPGROUP {
            // The op's own accesses pass its guards (a chain of wgmmas on one accumulator
            // needs no wait in between) and are not ordinary writes.
            let (inflight, dirty) = match self.st.regs.get_mut(t) {
                Some(r) => (std::mem::take(&mut r.inflight), r.dirty.take()),
                None => (Vec::new(), None),
            };
            let result = self.on_thread(t, span, |f| f.wgmma_thread(w, t - base, (&a, &b), span));
            if let Some(r) = self.st.regs.get_mut(t) {
                r.inflight = inflight;
                r.dirty = dirty;
                if let Ok(start) = &result {
                    r.inflight.push((slot, *start..*start + half, id));
                }
            }
            result?;
        }
        let mut addrs = a_addrs;
        addrs.extend(b_addrs);
        if let Some(arena) = &mut self.frame.mem.shared {
            for &at in &addrs {
                arena.hold_reads(at, 2, true);
            }
        }
        self.st.wgmma_reads.insert(id, addrs);
        self.wgmma_groups(base).open.push(id);
        Ok(())
    }

    /// Runs `f` as thread `t`: its registers are swapped into the frame for the call. A data
    /// race the call made is reported at `span`; every fault names the thread.
    fn on_thread<T>(
        &mut self,
        t: usize,
        span: Span,
        f: impl FnOnce(&mut Frame) -> Res<T>,
    ) -> Res<T> {
        self.swap(t);
        self.frame.mem.thread = u32::try_from(t).ok();
        let result = f(self.frame);
        self.frame.mem.thread = None;
        self.swap(t);
        let result = match (result, self.frame.mem.take_race()) {
            (Ok(_), Some(race)) => fault(span, race),
            (r, _) => r,
        };
        result.map_err(|mut e| {
            if e.thread.is_none() {
                e.thread = Some(self.st.name(t));
            }
            e
        })
    }

    /// Exchanges thread `t`'s registers with the frame's (its own inverse).
    fn swap(&mut self, t: usize) {
        if let Some(regs) = self.st.regs.get_mut(t) {
            std::mem::swap(&mut self.frame.mem.regs, regs);
        }
        if let Some(vars) = self.st.vars.get_mut(t) {
            std::mem::swap(&mut self.frame.vars, vars);
        }
        if let Some(private) = self.st.private.get_mut(t) {
            for (&slot, buf) in self.st.slots.iter().zip(private.iter_mut()) {
                if let Some(shared) = self.frame.mem.locals.get_mut(slot) {
                    std::mem::swap(shared, buf);
                }
            }
        }
    }

    fn set_var(&mut self, t: usize, var: usize, value: i64) {
        if let Some(slot) = self.st.vars.get_mut(t).and_then(|v| v.get_mut(var)) {
            *slot = Scalar::Int(value);
        }
    }

    /// Per-thread bounds of a loop.
    fn bounds(&mut self, t: usize, (start, stop): (&CExpr, &CExpr), span: Span) -> Res<(i64, i64)> {
        self.on_thread(t, span, |f| Ok((f.eval_int(start)?, f.eval_int(stop)?)))
    }

    /// A serial (unrolled, vectorized, pipelined, parallel) loop: iteration `k` runs for the
    /// threads that have more than `k` iterations.
    fn serial_loop(
        &mut self,
        var: usize,
        range: (&CExpr, &CExpr),
        body: &[CStmt],
        span: Span,
        active: &[usize],
    ) -> Res<()> {
        let mut threads: Vec<(usize, i64, i64)> = Vec::with_capacity(active.len());
        for &t in active {
            let (start, stop) = self.bounds(t, range, span)?;
            threads.push((t, start, stop.saturating_sub(start)));
        }
        let mut k = 0i64;
        loop {
            threads.retain(|&(_, _, n)| k < n);
            if threads.is_empty() {
                return Ok(());
            }
            let now: Vec<usize> = threads.iter().map(|&(t, _, _)| t).collect();
            for &(t, start, _) in &threads {
                self.set_var(t, var, start + k);
            }
            self.exec(body, &now)?;
            k += 1;
        }
    }

    /// A `threadIdx.*` loop: each thread takes the iteration of its own index on `axis`.
    fn thread_loop(
        &mut self,
        var: usize,
        axis: usize,
        range: (&CExpr, &CExpr),
        body: &[CStmt],
        span: Span,
        active: &[usize],
    ) -> Res<()> {
        let dim = self.st.shape.get(axis).copied().unwrap_or(1);
        let mut now = Vec::with_capacity(active.len());
        for &t in active {
            let (start, stop) = self.bounds(t, range, span)?;
            let extent = stop.saturating_sub(start);
            if extent > dim as i64 {
                let axis_name = ["x", "y", "z"].get(axis).copied().unwrap_or("?");
                return fault(
                    span,
                    format!(
                        "thread loop has {extent} iterations but the block has {dim} threads \
                         along {axis_name}"
                    ),
                );
            }
            let c = self.st.coord(t, axis) as i64;
            if c < extent {
                self.set_var(t, var, start + c);
                now.push(t);
            }
        }
        if now.is_empty() {
            return Ok(());
        }
        self.exec(body, &now)
    }
}
