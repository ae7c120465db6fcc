//! The thread level: the threads of a block run a `threadIdx.*` binding loop's body in
//! LOCKSTEP, with an active mask; `tasks.rs` schedules them as tasks (sets of threads in
//! lockstep) so that divergent threads can wait for each other on mbarriers. This file gives
//! what one statement does for one task's active threads.
//!
//! - Each statement runs for every active thread, in thread order (linear index, x fastest),
//!   before the next statement starts.
//! - `if` splits the mask: the then-body runs for the threads whose condition holds, then the
//!   else-body for the others, then they rejoin. While nothing blocks that is the whole
//!   story; when the then-threads block on an mbarrier, the else-threads run meanwhile as
//!   another task (`tasks.rs`).
//! - A loop evaluates its bounds per thread and iterates while any thread still has
//!   iterations, masking out the threads that are done.
//! - A nested `threadIdx.*` loop binds its variable to each thread's index on its axis
//!   (`start + index`); threads whose index is not below its extent sit it out.
//! - Lets, loop variables and local / fragment buffers are per thread; shared buffers (and
//!   globals) are the block's.
//! - `T.sync_threads()` needs every thread of the block active in the running task: reaching
//!   it in divergent code (or in a task that split off) is an error. It starts a new race
//!   epoch in shared memory (`shared.rs`).
//! - `T.mbarrier_wait` passes for the task only when the phase every active thread waits for
//!   has completed (then each thread observes its barrier); otherwise no thread passes and
//!   the task blocks (`tasks.rs` runs another one, or reports the deadlock).
//! - `T.cp_async` issues per thread into the thread's open group; commit / wait act on the
//!   thread's groups (`ops/intrinsics.rs`). `T.ldmatrix` and `T.mma_sync` run once per warp
//!   (linear thread index / 32), which must have all 32 lanes active in the task; the
//!   `T.wgmma*` and `T.setmaxnreg` collectives once per warpgroup (128 threads, all active),
//!   whose wgmma groups (numbered per warpgroup in issue order, so the retired ones are a
//!   prefix: `order.rs`) and register guards (in-flight accumulators, the fence rule) are
//!   kept here.
//! - The end of a thread loop entered from block level acts as a barrier too: all threads
//!   finished it (every task joined) before anything after it runs. Consecutive thread loops
//!   (the SIMT regions that `lower-tile-ops` emits) are therefore ordered like regions
//!   separated by `T.sync_threads()`.
//!
//! Per-thread state is kept here and swapped into the block's `Frame` while one thread runs
//! one statement, so every op and expression is evaluated by the same code as at the tile
//! level.

use crate::interp::compile::loop_cost;
use crate::interp::compile::{BufRef, CAllReduce, CCall, CExpr, CIntrinsic, CRef, CStmt, CWgmma};
use crate::interp::eval::{fault, Frame, Res};
use crate::interp::memory::{Buffer, RegGuard};
use crate::interp::ops::hopper::{PendingWait, WaitPoll, WGMMA_A_REGS as A_REGS, WGMMA_M};
use crate::interp::ops::intrinsics::{mma_sync, partial_group, AsyncGroups};
use crate::interp::scalar::{arith, Scalar};
use crate::interp::shared::Mbarrier;
use crate::interp::tasks;
use crate::interp::tensor::MAX_ELEMENTS;
use crate::intrinsic::Collective;
use crate::ir::allreduce_steps;
use crate::span::Span;
use crate::target::{WARPGROUP_SIZE, WARP_SIZE};
use std::collections::{HashMap, HashSet, VecDeque};

mod shuffle;

/// The threads of a warpgroup.
const WARPGROUP: usize = WARPGROUP_SIZE as usize;

/// The threads of one block — or of every block of a cluster, block after block in rank
/// order — : their registers (scalar slots and private buffers).
pub(crate) struct ThreadState {
    /// Block shape, x first.
    shape: [usize; 3],
    /// How many dimensions the kernel declares, for thread names in messages.
    dims: usize,
    /// All threads: `block_n` per block.
    n: usize,
    /// Threads per block.
    block_n: usize,
    /// The cluster the threads form, when they are several blocks'.
    cluster: Option<Box<ClusterThreads>>,
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
    /// The named barriers (`T.bar_sync` / `T.bar_arrive`) by id.
    named: HashMap<i64, NamedBarrier>,
}

/// The blocks of a cluster interpreted together (`exec.rs`): their arena holds each
/// block's `block_bytes` in rank order; each shared buffer is re-placed in the running
/// thread's block when a thread of another block runs.
pub(crate) struct ClusterThreads {
    pub ranks: usize,
    /// Each block's shared bytes, and the distance between two blocks' (`ClusterPos`).
    pub block_bytes: usize,
    pub stride: usize,
    /// (allocation slot, byte offset in a block) of each shared buffer in the arena.
    pub shared: Vec<(usize, usize)>,
    /// Per rank: (slot, value) of its block variables and of the block-level lets before
    /// the running thread loop (integers: a thread-level kernel's block-level lets compute
    /// indices).
    pub block_vars: Vec<Vec<(usize, Scalar)>>,
    /// The rank whose place the shared buffers have now.
    pub current: usize,
}

/// The key of `T.cluster_sync()`'s barrier among the named barriers (those of
/// `T.bar_sync(id, …)` are `id`, plus `NAMED_PER_BLOCK * rank` in a cluster).
pub(crate) const CLUSTER_SYNC_KEY: i64 = -1;

/// Named barrier ids per block (`bar.sync` takes 0..=15).
const NAMED_PER_BLOCK: i64 = 16;

/// A named barrier's state: the thread count of its current phase, the threads that have
/// arrived in it, and how many phases have completed.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct NamedBarrier {
    pub count: usize,
    pub arrived: usize,
    pub completed: u64,
}

/// One warpgroup's `T.wgmma`s, numbered from 1 in issue order: the open group and the
/// committed ones, oldest first. The retired ones are therefore always a prefix.
#[derive(Clone, Debug, Default)]
struct WgmmaGroups {
    open: Vec<u64>,
    committed: VecDeque<Vec<u64>>,
    /// How many it has issued.
    issued: u64,
}

impl WgmmaGroups {
    /// Its wgmmas numbered up to this are retired.
    fn retired(&self) -> u64 {
        let oldest = self
            .committed
            .iter()
            .flatten()
            .chain(&self.open)
            .copied()
            .min();
        oldest.map_or(self.issued, |o| o.saturating_sub(1))
    }
}

impl ThreadState {
    /// `shape.iter().product()` threads, each with never-written copies of the buffers in
    /// `slots` of `locals`.
    pub fn new(
        shape: [usize; 3],
        dims: usize,
        slots: Vec<usize>,
        locals: &[Buffer],
        cluster: Option<ClusterThreads>,
    ) -> Res<ThreadState> {
        let block_n: usize = shape.iter().product();
        let ranks = cluster.as_ref().map_or(1, |c| c.ranks.max(1));
        let n = block_n.saturating_mul(ranks);
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
            block_n,
            cluster: cluster.map(Box::new),
            vars: vec![Vec::new(); n],
            slots,
            private: vec![fresh; n],
            asyncs: vec![AsyncGroups::default(); n],
            regs: vec![RegGuard::default(); n],
            wgmma: Vec::new(),
            named: HashMap::new(),
        })
    }

    /// The cluster the threads form, if they are several blocks'.
    pub(crate) fn cluster_mut(&mut self) -> Option<&mut ClusterThreads> {
        self.cluster.as_deref_mut()
    }

    /// Thread `t`'s block in its cluster (0 outside clusters).
    fn rank(&self, t: usize) -> usize {
        t.checked_div(self.block_n).unwrap_or(0)
    }

    /// Thread `t`'s index along `axis` in its block.
    fn coord(&self, t: usize, axis: usize) -> usize {
        let t = t.checked_rem(self.block_n).unwrap_or(t);
        let [x, y, _] = self.shape;
        let c = match axis {
            0 => t,
            1 => t / x.max(1),
            _ => t / (x * y).max(1),
        };
        c % self.shape.get(axis).copied().unwrap_or(1).max(1)
    }

    /// `5`, or `(5, 1)` for a 2-D block; `5 of the cluster's block 1` in a cluster.
    fn name(&self, t: usize) -> String {
        let local = if self.dims <= 1 {
            t.checked_rem(self.block_n).unwrap_or(t).to_string()
        } else {
            let parts: Vec<String> = (0..self.dims)
                .map(|a| self.coord(t, a).to_string())
                .collect();
            format!("({})", parts.join(", "))
        };
        match &self.cluster {
            Some(_) => format!("{local} of the cluster's block {}", self.rank(t)),
            None => local,
        }
    }

    /// The threads of each block, for the scheduler's first tasks (one per block: the
    /// blocks of a cluster run concurrently and meet only at cluster barriers and
    /// mbarriers).
    fn blocks(&self) -> Vec<Vec<usize>> {
        (0..self.n)
            .step_by(self.block_n.max(1))
            .map(|b| (b..(b + self.block_n).min(self.n)).collect())
            .collect()
    }
}

impl Frame<'_> {
    /// A `threadIdx.*` loop met in block-level code: every thread of the block starts with the
    /// block's variables and runs the loop (`tasks.rs` schedules them).
    pub(crate) fn enter_threads(&mut self, stmt: &CStmt) -> Res<()> {
        let Some(mut st) = self.threads.take() else {
            return fault(stmt.span, "a thread loop outside a thread-level kernel");
        };
        // A loop resuming its threads across a grid barrier keeps their registers.
        let resume = matches!(
            stmt.kind,
            crate::interp::compile::CStmtKind::Loop { resume: true, .. }
        );
        for (t, vars) in st.vars.iter_mut().enumerate().filter(|_| !resume) {
            vars.clone_from(&self.vars);
            if let Some(c) = &st.cluster {
                let rank = t.checked_div(st.block_n).unwrap_or(0);
                for &(slot, v) in c.block_vars.get(rank).map_or(&[][..], |b| b.as_slice()) {
                    if let Some(x) = vars.get_mut(slot) {
                        *x = v;
                    }
                }
            }
        }
        let blocks = st.blocks();
        let mut lock = Lockstep {
            frame: self,
            st: &mut st,
            scratch: Vec::new(),
        };
        let result = tasks::run(&mut lock, stmt, blocks);
        // Block-level code sees the first block's shared buffers.
        lock.set_rank(0);
        // A thread loop entered from block level runs every thread to completion before the
        // next statement, so its end orders memory like a barrier: a later loop reading what
        // this one wrote is not a race (the SIMT regions of `lower-tile-ops` rely on this).
        // In a cluster, like each block's `T.sync_threads()`: the GPU orders nothing across
        // blocks there.
        let blocks = st.blocks();
        let clustered = st.cluster.is_some();
        self.threads = Some(st);
        if let Some(shared) = &mut self.mem.shared {
            if !clustered {
                shared.barrier();
            }
            for (rank, threads) in blocks.iter().enumerate().filter(|_| clustered) {
                let threads: Vec<u32> = threads
                    .iter()
                    .filter_map(|&t| u32::try_from(t).ok())
                    .collect();
                let key = -2 - i64::try_from(rank).unwrap_or(0);
                if let Err(why) = shared.named_barrier(key, &threads) {
                    return fault(stmt.span, why);
                }
            }
        }
        result
    }
}

/// The threads of a block and their registers, with the statement semantics the scheduler
/// (`tasks.rs`) applies to one task's active threads.
pub(crate) struct Lockstep<'a, 'g> {
    frame: &'a mut Frame<'g>,
    st: &'a mut ThreadState,
    /// Reused per statement: conditions of an `if`, barriers of a wait.
    scratch: Vec<usize>,
}

/// What an `if` does with the active threads.
pub(crate) enum Branch {
    /// Every one takes the then-body.
    Then,
    /// Every one takes the else-body.
    Else,
    /// They split: (then-threads, else-threads), both non-empty.
    Split(Vec<usize>, Vec<usize>),
}

impl Lockstep<'_, '_> {
    /// Thread `t`'s name in messages: `5`, or `(5, 1)` for a 2-D block.
    pub fn thread_name(&self, t: usize) -> String {
        self.st.name(t)
    }

    /// The block's mbarrier at `addr`, if initialized.
    pub fn mbarrier(&self, addr: usize) -> Option<Mbarrier> {
        self.frame.mem.shared.as_ref()?.mbarrier(addr)
    }

    /// The barrier at `addr`'s (life, completed phases): a blocked wait may pass once it
    /// changes.
    pub fn mbarrier_state(&self, addr: usize) -> Option<(usize, u64)> {
        self.frame.mem.shared.as_ref()?.mbarrier_state(addr)
    }

    /// A statement with no control flow of its own (let, store, copy, gemm, fill), run by
    /// every active thread in thread order.
    pub fn simple(&mut self, stmt: &CStmt, active: &[usize]) -> Res<()> {
        for &t in active {
            self.on_thread(t, stmt.span, |f| f.exec_one(stmt))?;
        }
        Ok(())
    }

    /// Evaluates an `if`'s condition for the active threads, in thread order.
    pub fn branch(&mut self, cond: &CExpr, span: Span, active: &[usize]) -> Res<Branch> {
        self.scratch.clear();
        for &t in active {
            if self.on_thread(t, span, |f| f.eval(cond))?.as_bool() {
                self.scratch.push(t);
            }
        }
        Ok(match self.scratch.len() {
            n if n == active.len() => Branch::Then,
            0 => Branch::Else,
            _ => {
                // Both lists are in thread order: `taken` is a subsequence of `active`.
                let taken = self.scratch.clone();
                let mut next = taken.iter().peekable();
                let mut not_taken = Vec::with_capacity(active.len() - taken.len());
                for &t in active {
                    if next.peek() == Some(&&t) {
                        next.next();
                    } else {
                        not_taken.push(t);
                    }
                }
                Branch::Split(taken, not_taken)
            }
        })
    }

    /// `T.sync_threads()`: every thread of the block must be active. In a cluster (whose
    /// tasks each hold one block's threads) it orders that block's threads only.
    pub fn barrier(&mut self, span: Span, active: &[usize]) -> Res<()> {
        if active.len() != self.st.block_n {
            return fault(
                span,
                format!(
                    "barrier reached by {} of {} threads",
                    active.len(),
                    self.st.block_n
                ),
            );
        }
        let Some(shared) = &mut self.frame.mem.shared else {
            return Ok(());
        };
        if self.st.cluster.is_none() {
            shared.barrier();
            return Ok(());
        }
        let rank = active.first().map_or(0, |&t| self.st.rank(t));
        let threads: Vec<u32> = active
            .iter()
            .filter_map(|&t| u32::try_from(t).ok())
            .collect();
        // Block `rank`'s `T.sync_threads()`: a barrier of its threads only, keyed apart from
        // every `T.bar_sync` id.
        let key = -2 - i64::try_from(rank).unwrap_or(0);
        shared
            .named_barrier(key, &threads)
            .or_else(|why| fault(span, why))
    }

    /// The active threads arrive on named barrier `id` over `count` threads (`T.bar_sync`
    /// when `sync`, else `T.bar_arrive`): whole warps, at most `count` of them. Returns the
    /// phase a syncing task must wait for to complete (`tasks.rs` blocks it) — `None` when
    /// it passes: its arrival completed the phase. Only a phase that all `count` threads
    /// complete together by `T.bar_sync` orders memory (`shared.rs`); one completed from
    /// several places (ping-pong, or a producer's `T.bar_arrive`) orders nothing.
    pub fn named_arrive(
        &mut self,
        (id, count): (i64, usize),
        sync: bool,
        span: Span,
        active: &[usize],
    ) -> Res<Option<(i64, u64)>> {
        let what = if id == CLUSTER_SYNC_KEY {
            "T.cluster_sync"
        } else if sync {
            "T.bar_sync"
        } else {
            "T.bar_arrive"
        };
        // A block's named barriers are its own: in a cluster, keyed by its rank.
        let key = match (&self.st.cluster, active.first()) {
            (Some(_), Some(&t)) if id != CLUSTER_SYNC_KEY => {
                id + NAMED_PER_BLOCK * i64::try_from(self.st.rank(t)).unwrap_or(0)
            }
            _ => id,
        };
        let warp = WARP_SIZE as usize;
        let whole_warps = active.chunks(warp).all(|w| {
            w.len() == warp
                && w.first().is_some_and(|&t| {
                    t % warp == 0 && w.iter().enumerate().all(|(i, &x)| x == t + i)
                })
        });
        if !whole_warps || active.len() > count {
            return fault(
                span,
                format!(
                    "`{what}({id}, {count})` reached together by {} threads{}",
                    active.len(),
                    if whole_warps {
                        format!(", more than its count {count}")
                    } else {
                        " (not whole warps)".to_string()
                    }
                ),
            );
        }
        let bar = self.st.named.entry(key).or_default();
        if bar.arrived > 0 && bar.count != count {
            return fault(
                span,
                format!(
                    "`{what}({id}, {count})` on a barrier whose phase counts {} threads ({} \
                     arrived): one phase has one count",
                    bar.count, bar.arrived
                ),
            );
        }
        if bar.arrived + active.len() > count {
            return fault(
                span,
                format!(
                    "`{what}({id}, {count})` reached together by {} threads while its phase has \
                     {} of its {count} arrivals: the phase would complete with some of their \
                     warps and the others would wait for the next one",
                    active.len(),
                    bar.arrived
                ),
            );
        }
        bar.count = count;
        bar.arrived += active.len();
        if bar.arrived < count {
            return Ok(sync.then_some((key, bar.completed)));
        }
        bar.arrived = 0;
        bar.completed += 1;
        if id == CLUSTER_SYNC_KEY {
            // Every thread of the cluster has arrived (release) and none has passed its
            // wait (acquire) yet: everything before it happens before everything after.
            if let Some(shared) = &mut self.frame.mem.shared {
                shared.barrier();
            }
            return Ok(None);
        }
        if sync && active.len() == count {
            let threads: Vec<u32> = active
                .iter()
                .filter_map(|&t| u32::try_from(t).ok())
                .collect();
            if let Some(shared) = &mut self.frame.mem.shared {
                if let Err(why) = shared.named_barrier(key, &threads) {
                    return fault(span, why);
                }
            }
        }
        Ok(None)
    }

    /// The state of the named barrier of key `key` (`named_arrive`'s; a blocked
    /// `T.bar_sync` passes once its phase completed).
    pub fn named_state(&self, key: i64) -> NamedBarrier {
        self.st.named.get(&key).copied().unwrap_or_default()
    }

    /// Every thread of the cluster (of the block outside clusters): `T.cluster_sync`'s
    /// count.
    pub fn cluster_threads(&self) -> usize {
        self.st.n
    }

    /// Places the shared buffers in block `rank` of the cluster (nothing outside clusters).
    pub(crate) fn set_rank(&mut self, rank: usize) {
        let Some(c) = self.st.cluster.as_deref_mut() else {
            return;
        };
        if c.current != rank {
            for &(slot, offset) in &c.shared {
                if let Some(b) = self.frame.mem.locals.get_mut(slot) {
                    b.arena_offset = Some(offset + rank * c.stride);
                }
            }
            c.current = rank;
        }
        self.frame.mem.cluster = Some(crate::interp::memory::ClusterPos {
            rank,
            ranks: c.ranks,
            stride: c.stride,
            block_bytes: c.block_bytes,
        });
    }

    /// `T.thread_allreduce`: every thread of the block must be active. Each group (the
    /// threads whose indices differ only on the reduced axes) folds by the butterfly of
    /// `ir.rs`'s `AllReduce`, step by step as [`allreduce_steps`] orders them, each step in
    /// the result dtype (the rounding of the exchange + combine). A step between warps goes
    /// through `scratch` as the PTX does: a barrier, every thread writes its value at its
    /// linear index, a barrier, the partner's value is read; a last barrier after the final
    /// such step — so a memory plan that lets other bytes overlap the scratch is checked.
    pub fn allreduce(&mut self, r: &CAllReduce, span: Span, active: &[usize]) -> Res<()> {
        if active.len() != self.st.block_n {
            return fault(
                span,
                format!(
                    "all-reduce reached by {} of {} threads (every thread of the block must reach it)",
                    active.len(),
                    self.st.block_n
                ),
            );
        }
        let shape: Vec<i64> = self
            .st
            .shape
            .iter()
            .map(|&e| i64::try_from(e).unwrap_or(i64::MAX))
            .collect();
        let Some(steps) = allreduce_steps(&shape, &r.axes) else {
            return fault(
                span,
                "an all-reduce over a thread axis whose extent is not a power of two",
            );
        };
        let mut vals = Vec::with_capacity(active.len());
        for &t in active {
            vals.push(self.on_thread(t, span, |f| f.eval(&r.value))?);
        }
        // A thread's position in `active` is its linear index in the block.
        let block_shape: Vec<usize> = self.st.shape.to_vec();
        let stride = |axis: usize| -> usize { block_shape.iter().take(axis).product() };
        let op = r.op.bin_op();
        let mut through_scratch = false;
        for step in &steps {
            let s = stride(step.axis);
            let extent = block_shape.get(step.axis).copied().unwrap_or(1);
            // Tile-level IR has no scratch yet: the butterfly alone.
            if let (None, Some(scratch)) = (step.lane_xor, r.scratch) {
                self.barrier(span, active)?;
                for (p, (&t, &v)) in active.iter().zip(&vals).enumerate() {
                    self.on_thread(t, span, |f| {
                        f.mem.write(scratch, p, v);
                        Ok(())
                    })?;
                }
                self.barrier(span, active)?;
                through_scratch = true;
            }
            let prev = vals.clone();
            for (p, v) in vals.iter_mut().enumerate() {
                let index = (p / s) % extent;
                let partner = p - index * s + (index ^ (1 << step.bit)) * s;
                let other = prev.get(partner).copied().unwrap_or(*v);
                *v = match arith(op, r.dtype, *v, other) {
                    Ok(x) => x,
                    Err(e) => return fault(span, format!("all-reduce: {e:?}")),
                };
            }
        }
        if through_scratch {
            self.barrier(span, active)?;
        }
        for (&t, &v) in active.iter().zip(&vals) {
            self.on_thread(t, span, |f| {
                let flat = f.flat_index(r.buf, &r.indices, span)?;
                f.mem.write(r.buf, flat, v);
                Ok(())
            })?;
        }
        Ok(())
    }

    /// `T.mbarrier_wait` for the active threads: `None` when every one of them may pass
    /// (each has then observed its barrier), else the first pending wait in thread order and
    /// the addresses of every barrier some thread waits on (none passes then).
    pub fn mbarrier_wait(
        &mut self,
        (bar, parity): (&CRef, &CExpr),
        span: Span,
        active: &[usize],
    ) -> Res<Option<(PendingWait, Vec<usize>)>> {
        self.scratch.clear();
        let mut pending: Option<(PendingWait, Vec<usize>)> = None;
        for &t in active {
            match self.on_thread(t, span, |f| f.mbarrier_poll(bar, parity, span))? {
                WaitPoll::Ready(addr) => self.scratch.push(addr),
                WaitPoll::Pending(w) => match &mut pending {
                    None => {
                        let addrs = vec![w.addr];
                        pending = Some((w, addrs));
                    }
                    Some((_, addrs)) => {
                        if !addrs.contains(&w.addr) {
                            addrs.push(w.addr);
                        }
                    }
                },
            }
        }
        if pending.is_some() {
            return Ok(pending);
        }
        if let Some(arena) = &mut self.frame.mem.shared {
            for (&t, &addr) in active.iter().zip(&self.scratch) {
                arena.observe(u32::try_from(t).unwrap_or(u32::MAX), addr);
            }
        }
        Ok(None)
    }

    /// A thread-level intrinsic for the active threads: per thread, or per group of
    /// threads that run it together (a warp, a warpgroup: every one of them must be active).
    pub fn intrinsic(&mut self, i: &CIntrinsic, span: Span, active: &[usize]) -> Res<()> {
        // The run-time shuffles take the lanes of their mask, which may be fewer than a
        // warp (`lockstep/shuffle.rs`).
        if let CCall::ShflSync {
            mode,
            dst,
            src,
            lane,
            width,
            mask,
        } = &i.call
        {
            let call = shuffle::ShuffleCall {
                name: i.def.name,
                mode: *mode,
                dst,
                src,
                lane,
                width,
                mask,
            };
            return self.shfl_sync(&call, span, active);
        }
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
            CCall::AtomicAddRet { old, dst, value } => {
                self.on_thread(t, span, |f| f.atomic_add_ret((old, dst, value), span))
            }
            CCall::MbarrierArrive { bar, tx } => {
                self.on_thread(t, span, |f| f.mbarrier_arrive(bar, *tx, span))
            }
            CCall::TmaLoad {
                dst,
                src,
                bar,
                box_dims,
                swizzle,
                multicast,
            } => self.on_thread(t, span, |f| {
                f.tma_load((dst, src, bar), box_dims, (*swizzle, *multicast), span)
            }),
            CCall::MbarrierArriveCluster { bar, rank } => {
                self.on_thread(t, span, |f| f.mbarrier_arrive_cluster(bar, rank, span))
            }
            // The interpreter's async proxy sees every write at once.
            CCall::FenceProxyAsync => Ok(()),
            CCall::Print(p) => self.on_thread(t, span, |f| f.print(p, &[t], span)),
            CCall::PhiloxInit {
                state,
                seed,
                seq,
                offset,
            } => self.on_thread(t, span, |f| f.philox_init(state, (seed, seq, offset), span)),
            CCall::PhiloxDraw {
                dst,
                state,
                uniform,
            } => self.on_thread(t, span, |f| f.philox_draw(dst, state, *uniform, span)),
            // Collectives (`collective`) and the mbarrier wait (the scheduler's, `tasks.rs`):
            // listed, not caught by `_`, so a new call must be placed here or there.
            CCall::Ldmatrix { .. }
            | CCall::ShflXor { .. }
            | CCall::ShflDown { .. }
            | CCall::ShflSync { .. }
            | CCall::Mma { .. }
            | CCall::MbarrierWait { .. }
            | CCall::Wgmma(_)
            | CCall::WgmmaFence
            | CCall::WgmmaCommit
            | CCall::WgmmaWait(_)
            | CCall::SetMaxNReg
            | CCall::BarSync { .. }
            | CCall::BarArrive { .. }
            | CCall::ClusterSync => fault(
                span,
                format!(
                    "internal error: `{}` is not a per-thread intrinsic",
                    i.def.name
                ),
            ),
        }
    }

    /// A shuffle over the warp of threads `base..base + 32`: lane `l` writes to `dst` the
    /// `src` of lane `from(l)`. Every lane reads before any lane writes (`dst` may be `src`).
    fn shuffle(
        &mut self,
        (dst, src): (&CRef, &CRef),
        base: usize,
        from: impl Fn(usize) -> usize,
        what: &str,
        span: Span,
    ) -> Res<()> {
        let what = format!("`{what}`");
        let mut values = Vec::with_capacity(32);
        for lane in 0..32 {
            values.push(self.on_thread(base + lane, span, |f| f.shfl_read(src, span, &what))?);
        }
        for lane in 0..32 {
            let v = values[from(lane) % 32];
            self.on_thread(base + lane, span, |f| f.shfl_write(dst, v, span, &what))?;
        }
        Ok(())
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
            CCall::ShflXor { dst, src, offset } => {
                self.shuffle((dst, src), base, |lane| lane ^ offset, i.def.name, span)
            }
            // Past the warp's last lane, a lane keeps its own value.
            CCall::ShflDown { dst, src, offset } => {
                let from = |lane: usize| Some(lane + offset).filter(|&j| j < 32).unwrap_or(lane);
                self.shuffle((dst, src), base, from, i.def.name, span)
            }
            CCall::Mma {
                acc,
                a,
                b,
                packed_int4,
            } => {
                let mut lanes = Vec::with_capacity(32);
                for lane in 0..32 {
                    lanes.push(
                        self.on_thread(base + lane, span, |f| f.mma_operands((acc, a, b), span))?,
                    );
                }
                let d = mma_sync(&lanes, *packed_int4);
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
                let upto = g.retired();
                for t in base..base + WARPGROUP {
                    if let Some(r) = self.st.regs.get_mut(t) {
                        r.inflight.retain(|(_, _, id)| !retired.contains(id));
                        r.register_a.retain(|(_, _, id)| !retired.contains(id));
                    }
                }
                if let Some(arena) = &mut self.frame.mem.shared {
                    arena.wgmma_retired(base / WARPGROUP, upto);
                }
                Ok(())
            }
            // A register-allocation hint: nothing the interpreter models.
            CCall::SetMaxNReg => Ok(()),
            // Over the lanes of a mask (`intrinsic` sends it to `shuffle.rs`).
            CCall::ShflSync { .. } => fault(
                span,
                "internal error: a run-time shuffle is run over its mask's lanes",
            ),
            // The scheduler's (`tasks.rs`: a sync may block), as a set of warps.
            CCall::BarSync { .. } | CCall::BarArrive { .. } | CCall::ClusterSync => fault(
                span,
                "internal error: a named barrier is run as a set of warps, not one warp",
            ),
            // Per-thread calls (`thread_intrinsic`) and the mbarrier wait (`tasks.rs`).
            CCall::CpAsync { .. }
            | CCall::AtomicAddRet { .. }
            | CCall::Commit
            | CCall::Wait(_)
            | CCall::MbarrierInit { .. }
            | CCall::MbarrierArrive { .. }
            | CCall::MbarrierArriveCluster { .. }
            | CCall::MbarrierWait { .. }
            | CCall::TmaLoad { .. }
            | CCall::FenceProxyAsync
            | CCall::Print(_)
            | CCall::PhiloxInit { .. }
            | CCall::PhiloxDraw { .. } => fault(
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

    /// `T.wgmma` / `T.wgmma_rs` for the warpgroup of threads `base..base + 128`
    /// (`ops/hopper.rs`). A register A (`T.wgmma_rs`) is each thread's 8 elements, gathered
    /// into the 64 x 16 tile by the accumulator's element-to-thread map.
    fn wgmma(&mut self, w: &CWgmma, base: usize, span: Span) -> Res<()> {
        let BufRef::Local(slot) = w.acc.buf else {
            return fault(span, "`T.wgmma`: the accumulator is not a local buffer");
        };
        let a_slot = match (&w.a_layout, w.a.buf) {
            (Some(_), _) => None,
            (None, BufRef::Local(s)) => Some(s),
            (None, BufRef::Global(_)) => {
                return fault(span, "`T.wgmma_rs`: the A operand is not a local buffer")
            }
        };
        let op = if a_slot.is_some() {
            "`T.wgmma_rs`"
        } else {
            "`T.wgmma`"
        };
        let half = w.n / 2;
        // PTX: a `wgmma.fence` must order the register writes of the accumulators (and of
        // a register A) before it.
        let mut a_starts = Vec::new();
        for t in base..base + WARPGROUP {
            let start = self.on_thread(t, span, |f| f.run_start(&w.acc, half, span, op))?;
            let a_start = match a_slot {
                Some(_) => Some(self.on_thread(t, span, |f| f.run_start(&w.a, A_REGS, span, op))?),
                None => None,
            };
            let mut ranges = vec![(slot, start..start + half)];
            if let (Some(s), Some(a0)) = (a_slot, a_start) {
                ranges.push((s, a0..a0 + A_REGS));
                a_starts.push(a0);
            }
            let regs = self.st.regs.get(t);
            let missing = match regs.and_then(|r| r.dirty.as_ref()) {
                None => Some("with no `T.wgmma_fence` of its warpgroup before it".to_string()),
                Some(d) => ranges
                    .iter()
                    .flat_map(|(s, r)| r.clone().map(move |e| (*s, e)))
                    .find(|e| d.contains(e))
                    .map(|(s, e)| {
                        let name = self.frame.mem.locals.get(s);
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
                        "{op} of thread {} {why}: missing `T.wgmma_fence`",
                        self.st.name(t)
                    ),
                );
            }
        }
        let (a, a_addrs) = match &w.a_layout {
            Some(layout) => self.on_thread(base, span, |f| {
                f.wgmma_operand(&w.a, layout, (WGMMA_M, w.k), span, "A operand")
            })?,
            None => (self.register_a(w, base, &a_starts, span)?, Vec::new()),
        };
        let (b, b_addrs) = self.on_thread(base, span, |f| {
            f.wgmma_operand(&w.b, &w.b_layout, (w.n, w.k), span, "B operand")
        })?;
        let id = self.wgmma_groups(base).issued + 1;
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
                // A register A may be neither read nor written until the op retires (but by
                // another `T.wgmma_rs`).
                if let (Some(s), Some(&a0)) = (a_slot, a_starts.get(t - base)) {
                    r.register_a.push((s, a0..a0 + A_REGS, id));
                }
            }
            result?;
        }
        if let Some(arena) = &mut self.frame.mem.shared {
            arena.wgmma_reads(base / WARPGROUP, id, &a_addrs);
            arena.wgmma_reads(base / WARPGROUP, id, &b_addrs);
        }
        let g = self.wgmma_groups(base);
        g.issued = id;
        g.open.push(id);
        Ok(())
    }

    /// The 64 x k A tile of a `T.wgmma_rs` (row-major), from the 8 registers each thread of
    /// the warpgroup holds from `starts[t]` on: element `j` of lane `l` of warp `w` is row
    /// `16 w + l / 4 + 8 ((j / 2) % 2)`, column `8 (j / 4) + 2 (l % 4) + j % 2`.
    fn register_a(
        &mut self,
        w: &CWgmma,
        base: usize,
        starts: &[usize],
        span: Span,
    ) -> Res<Vec<f32>> {
        let mut tile = vec![0f32; WGMMA_M * w.k];
        for (t, &a0) in starts.iter().enumerate() {
            // Another in-flight `T.wgmma_rs` may hold these registers as its A (a read they
            // share); an in-flight accumulator may not be read.
            let held = self
                .st
                .regs
                .get_mut(base + t)
                .map(|r| std::mem::take(&mut r.register_a));
            let vals = self.on_thread(base + t, span, |f| {
                (0..A_REGS)
                    .map(|j| f.read_elem(w.a.buf, a0 + j, span, "`T.wgmma_rs`"))
                    .collect::<Res<Vec<Scalar>>>()
            });
            if let (Some(r), Some(held)) = (self.st.regs.get_mut(base + t), held) {
                r.register_a = held;
            }
            let vals = vals?;
            let (warp, lane) = (t / 32, t % 32);
            for (j, v) in vals.iter().enumerate() {
                let row = 16 * warp + lane / 4 + 8 * ((j >> 1) & 1);
                let col = 8 * (j >> 2) + 2 * (lane % 4) + (j & 1);
                if let Some(slot) = tile.get_mut(row * w.k + col) {
                    // f16 / bf16 convert to f32 exactly.
                    *slot = v.as_f64() as f32;
                }
            }
        }
        Ok(tile)
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

    /// Exchanges thread `t`'s registers with the frame's (its own inverse), its block's
    /// shared buffers in place.
    fn swap(&mut self, t: usize) {
        self.set_rank(self.st.rank(t));
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

    /// A serial (unrolled, vectorized, pipelined, parallel) loop's bounds for the active
    /// threads: (thread, start, trip count). Iteration `k` runs for the threads that have
    /// more than `k` iterations (`tasks.rs`).
    /// `cost`: what one iteration costs against the block's loop budget, `None` when an
    /// enclosing loop paid already (`compile::loop_cost`).
    pub fn serial_bounds(
        &mut self,
        range: (&CExpr, &CExpr),
        cost: Option<u64>,
        span: Span,
        active: &[usize],
    ) -> Res<Vec<(usize, i64, i64)>> {
        let mut threads: Vec<(usize, i64, i64)> = Vec::with_capacity(active.len());
        for &t in active {
            let (start, stop) = self.bounds(t, range, span)?;
            threads.push((t, start, stop.saturating_sub(start)));
        }
        // The threads walk the loop in lockstep: its longest trip is what the walk costs.
        if let Some(cost) = cost {
            let longest = threads.iter().map(|&(_, _, n)| n).max().unwrap_or(0);
            self.frame.charge_loop(loop_cost(longest, cost), span)?;
        }
        Ok(threads)
    }

    /// Sets loop variable `var` of each of `threads` for iteration `k`.
    pub fn serial_iteration(&mut self, var: usize, threads: &[(usize, i64, i64)], k: i64) {
        for &(t, start, _) in threads {
            self.set_var(t, var, start + k);
        }
    }

    /// A `threadIdx.*` loop: each thread takes the iteration of its own index on `axis`; the
    /// threads that have one.
    pub fn thread_loop(
        &mut self,
        (var, axis): (usize, usize),
        range: (&CExpr, &CExpr),
        span: Span,
        active: &[usize],
    ) -> Res<Vec<usize>> {
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
        Ok(now)
    }
}
