//! The buffers one block sees: the global parameters (read-only while blocks run, plus this
//! block's own writes in an overlay) and the block's fresh shared / fragment / local
//! allocations, which remember which elements were ever written.
//!
//! Shared buffers of a thread-level kernel, or of a kernel with a `T.shared_arena`, live in
//! one byte array per block instead (`shared.rs`).
//!
//! Blocks do not see each other's global writes (as on a GPU, where blocks are unordered):
//! each block reads the globals as they were at launch plus its own writes, and the writes
//! of all blocks are applied when the grid finishes, in linear block order (x fastest). So a
//! run gives the same result with any number of host threads.

use crate::dtype::DType;
use crate::interp::compile::BufRef;
use crate::interp::parallel::{ParallelLog, Sharing};
use crate::interp::scalar::Scalar;
use crate::interp::shared::SharedArena;
use crate::interp::tensor::{fmt_shape, TensorData};
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::ops::Range;

/// A buffer while the program runs.
#[derive(Clone, Debug)]
pub(crate) struct Buffer {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub data: TensorData,
    /// Per element: ever written? `None` for globals, which always hold data.
    pub written: Option<Vec<bool>>,
    /// A shared buffer in the block's byte arena (`shared.rs`): its byte offset there. Its
    /// `data` and `written` are then unused (empty).
    pub arena_offset: Option<usize>,
    /// A `T.fresh` discarded its contents at least once (for the message of a read of an
    /// element not written since).
    pub discarded: bool,
}

impl Buffer {
    /// A fresh, never-written allocation.
    pub fn fresh(name: &str, dtype: DType, shape: Vec<usize>) -> Buffer {
        let len = shape.iter().product();
        Buffer {
            name: name.to_string(),
            dtype,
            shape,
            data: TensorData::zeros(dtype, len),
            written: Some(vec![false; len]),
            arena_offset: None,
            discarded: false,
        }
    }

    /// A shared buffer whose elements live in the block's arena at byte `offset`.
    pub fn in_arena(name: &str, dtype: DType, shape: Vec<usize>, offset: usize) -> Buffer {
        Buffer {
            name: name.to_string(),
            dtype,
            shape,
            data: TensorData::zeros(dtype, 0),
            written: Some(Vec::new()),
            arena_offset: Some(offset),
            discarded: false,
        }
    }

    /// `S[3, 4]` for element `flat` (row-major), in backquotes.
    pub fn element_text(&self, flat: usize) -> String {
        let mut idx = vec![0usize; self.shape.len()];
        let mut rest = flat;
        for (slot, &n) in idx.iter_mut().zip(&self.shape).rev() {
            *slot = rest.checked_rem(n).unwrap_or(0);
            rest = rest.checked_div(n).unwrap_or(0);
        }
        let parts: Vec<String> = idx.iter().map(|i| i.to_string()).collect();
        format!("`{}[{}]`", self.name, parts.join(", "))
    }

    /// `(128, 32)`.
    pub fn shape_text(&self) -> String {
        fmt_shape(&self.shape)
    }

    /// Row-major strides.
    pub fn strides(&self) -> Vec<usize> {
        let mut s = vec![1usize; self.shape.len()];
        for d in (0..self.shape.len().saturating_sub(1)).rev() {
            s[d] = s[d + 1] * self.shape[d + 1];
        }
        s
    }
}

/// Where the running thread's block sits in its cluster's shared memory: the cluster's
/// blocks are interpreted as one frame whose arena holds each block's `block_bytes`, one
/// block every `stride` bytes (a multiple of 1024, so that every swizzle pattern is the
/// same in each) in rank order (`exec.rs`): block `r`'s byte `x` is arena byte
/// `r * stride + x`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ClusterPos {
    pub rank: usize,
    pub ranks: usize,
    pub stride: usize,
    pub block_bytes: usize,
}

impl ClusterPos {
    /// The arena address of the byte at `addr` of the running block in block `rank`.
    pub fn remote(&self, addr: usize, rank: usize) -> usize {
        // `addr` lies in the running block's bytes (at or past `rank * stride`).
        addr.saturating_sub(self.rank * self.stride) + rank * self.stride
    }
}

/// A global write log: flat index → value (the last write wins).
pub(crate) type Overlay = HashMap<usize, Scalar>;

/// A block's `T.atomic_add`s to one global: (flat index, added value), in program order.
pub(crate) type AtomicLog = Vec<(usize, Scalar)>;

/// What a block leaves in global memory: per global, its writes and its atomic adds.
pub(crate) type BlockLog = (Vec<Overlay>, Vec<AtomicLog>);

pub(crate) struct Memory<'g> {
    pub globals: &'g [Buffer],
    /// One per global: this block's writes.
    pub overlays: Vec<Overlay>,
    /// One per global: this block's atomic adds. When the grid finishes they are added to
    /// the element in block order (after every block's plain writes), so every block's
    /// contributions count whatever the host threads did.
    pub atomics: Vec<AtomicLog>,
    /// One per global: the elements this block wrote with a plain store. Its atomic adds
    /// to those are its own read-modify-writes (the overlay holds write + adds), not
    /// deltas for the merge; a plain write after adds supersedes them.
    plain: Vec<HashSet<usize>>,
    /// The running kernel's allocations (`BufRef::Local` indexes this).
    pub locals: Vec<Buffer>,
    /// The block's shared-memory bytes, when shared buffers live in an arena.
    pub shared: Option<SharedArena>,
    /// The thread running the current statement (thread level), for race detection.
    pub thread: Option<u32>,
    /// In a cluster (the blocks of a thread-block cluster interpreted together): the
    /// running thread's block and the cluster's shape of its arena (`ClusterPos`).
    pub cluster: Option<ClusterPos>,
    /// The running thread's register guards (`T.wgmma`), swapped in with its registers.
    pub regs: RegGuard,
    /// The first access that broke a register guard since the last `take_race`.
    reg_violation: RefCell<Option<String>>,
    /// How many `T.fresh` naming each allocation (by `locals` slot) block-level code ran.
    fresh_block: Vec<u32>,
    /// Per thread, how many `T.fresh` naming each allocation it ran itself (empty until
    /// one did).
    fresh_thread: Vec<Vec<u32>>,
    /// While a tile-level `T.Parallel` nest runs: who touched which element (`parallel.rs`).
    pub parallel: Option<RefCell<ParallelLog>>,
    /// Per allocation (`locals` slot): how `T.Parallel` iterations share it.
    pub sharing: Vec<Sharing>,
    /// Loop iterations this block (or, at the thread level, its lockstep walk) may still
    /// run before the interpreter stops it ([`MAX_LOOP_ITERATIONS`]).
    pub loop_budget: u64,
}

/// The most loop iterations (all `for` loops together, counted when each loop starts) one
/// block may run: 2^28, far past any real kernel's block, reached in seconds rather than the
/// hours a runaway nest would take.
pub(crate) const MAX_LOOP_ITERATIONS: u64 = 1 << 28;

/// One thread's register guards for `T.wgmma` (`ops/hopper.rs`).
#[derive(Clone, Debug, Default)]
pub(crate) struct RegGuard {
    /// Accumulator elements of in-flight `T.wgmma`s / `T.wgmma_rs`s: (local slot, flat
    /// range, wgmma id). Only a `T.wgmma_wait` that retires the op frees them.
    pub inflight: Vec<(usize, Range<usize>, u64)>,
    /// Register-A elements of in-flight `T.wgmma_rs`s, the same way — except that another
    /// `T.wgmma_rs` may read them (several wgmmas of a group share one A, as PTX allows).
    pub register_a: Vec<(usize, Range<usize>, u64)>,
    /// Local elements (slot, flat) written by ordinary code since the thread's warpgroup's
    /// last `T.wgmma_fence`; `None` before its first fence (nothing is tracked then).
    pub dirty: Option<HashSet<(usize, usize)>>,
}

impl RegGuard {
    fn inflight(&self, slot: usize, flat: usize) -> bool {
        self.inflight
            .iter()
            .chain(&self.register_a)
            .any(|(s, r, _)| *s == slot && r.contains(&flat))
    }

    /// Whether any register is held by an in-flight wgmma (the common case checks nothing).
    fn any(&self) -> bool {
        !self.inflight.is_empty() || !self.register_a.is_empty()
    }
}

impl<'g> Memory<'g> {
    pub fn new(globals: &'g [Buffer], locals: Vec<Buffer>) -> Memory<'g> {
        Memory {
            globals,
            overlays: vec![Overlay::new(); globals.len()],
            atomics: vec![AtomicLog::new(); globals.len()],
            plain: vec![HashSet::new(); globals.len()],
            locals,
            shared: None,
            thread: None,
            cluster: None,
            regs: RegGuard::default(),
            reg_violation: RefCell::new(None),
            fresh_block: Vec::new(),
            fresh_thread: Vec::new(),
            parallel: None,
            sharing: Vec::new(),
            loop_budget: MAX_LOOP_ITERATIONS,
        }
    }

    /// This block's state over `globals` (the grid's after a `T.sync_grid()`, or none while
    /// the block waits at one), with no global write logged: its own buffers, shared bytes
    /// and budget as they were.
    pub fn rebind<'h>(self, globals: &'h [Buffer]) -> Memory<'h> {
        Memory {
            globals,
            overlays: vec![Overlay::new(); globals.len()],
            atomics: vec![AtomicLog::new(); globals.len()],
            plain: vec![HashSet::new(); globals.len()],
            locals: self.locals,
            shared: self.shared,
            thread: self.thread,
            cluster: self.cluster,
            regs: self.regs,
            reg_violation: self.reg_violation,
            fresh_block: self.fresh_block,
            fresh_thread: self.fresh_thread,
            parallel: self.parallel,
            sharing: self.sharing,
            loop_budget: self.loop_budget,
        }
    }

    /// Logs an access of the running `T.Parallel` iteration, if one runs.
    fn log_parallel(&self, b: BufRef, flat: usize, write: bool) {
        let Some(log) = &self.parallel else { return };
        let sharing = match b {
            BufRef::Local(i) => self.sharing.get(i).copied().unwrap_or(Sharing::Shared),
            BufRef::Global(_) => Sharing::Shared,
        };
        let element = || self.buffer(b).element_text(flat);
        let mut log = log.borrow_mut();
        if write {
            log.write(b, flat, sharing, &element);
        } else {
            log.read(b, flat, sharing, &element);
        }
    }

    /// `T.fresh`: the buffers' contents are discarded for the running thread (`None`:
    /// block-level code, for the whole block). A shared buffer of its own (the tile level)
    /// forgets every element; one in the arena starts a new generation: its bytes then hold
    /// only what is written from here on ([`Memory::tag_of`]).
    pub fn discard(&mut self, bufs: &[BufRef]) {
        for &b in bufs {
            let BufRef::Local(i) = b else { continue };
            let slot = match self.thread {
                Some(t) => {
                    let t = t as usize;
                    if self.fresh_thread.len() <= t {
                        self.fresh_thread.resize(t + 1, Vec::new());
                    }
                    &mut self.fresh_thread[t]
                }
                None => &mut self.fresh_block,
            };
            if slot.len() <= i {
                slot.resize(i + 1, 0);
            }
            slot[i] = slot[i].wrapping_add(1);
            if let Some(buf) = self.locals.get_mut(i) {
                buf.discarded = true;
                if buf.arena_offset.is_none() {
                    if let Some(w) = &mut buf.written {
                        w.fill(false);
                    }
                }
            }
        }
    }

    /// The generation tag the running thread writes allocation `i`'s bytes with, and
    /// expects of the bytes it reads: the allocation, and how many `T.fresh` of it this
    /// thread (and the block-level code) has run. A read of bytes with another tag sees a
    /// value written before the reader's last `T.fresh` of the buffer, or through another
    /// buffer sharing its bytes: both errors (`shared.rs`, tags).
    pub fn tag_of(&self, i: usize) -> u64 {
        let block = self.fresh_block.get(i).copied().unwrap_or(0);
        let own = self
            .thread
            .and_then(|t| self.fresh_thread.get(t as usize))
            .and_then(|g| g.get(i))
            .copied()
            .unwrap_or(0);
        ((i as u64 + 1) << 32) | u64::from(block.wrapping_add(own))
    }

    /// Why the running thread may not read the `len` bytes at `at` as allocation `i`
    /// (element text `what`): their tag is not the one it expects ([`Memory::tag_of`]).
    pub fn stale(
        &self,
        i: usize,
        at: usize,
        len: usize,
        what: &dyn Fn() -> String,
    ) -> Option<String> {
        let arena = self.shared.as_ref()?;
        let found = arena.tag_mismatch(at, len, self.tag_of(i))?;
        let who = if self.thread.is_some() {
            "this thread"
        } else {
            "block-level code"
        };
        let name = self.locals.get(i).map_or("", |b| b.name.as_str());
        let writer = (found >> 32) as usize;
        if writer == i + 1 {
            return Some(format!(
                "{who} reads {}, which holds a value written before the `T.fresh({name})` it \
                 last ran: `T.fresh` discards a buffer's contents, so a value from before it \
                 (an earlier iteration of the loop it heads) may not be read",
                what()
            ));
        }
        let other = writer
            .checked_sub(1)
            .and_then(|j| self.locals.get(j))
            .map_or("", |b| b.name.as_str());
        Some(format!(
            "{who} reads {}, whose bytes were last written as `{other}`: the two shared buffers \
                 share bytes in the arena while `{name}` still holds a value that is read",
            what()
        ))
    }

    /// The first shared-memory data race (or broken register guard) found since the last
    /// call.
    pub fn take_race(&self) -> Option<String> {
        self.shared
            .as_ref()
            .and_then(SharedArena::take_race)
            .or_else(|| self.reg_violation.borrow_mut().take())
    }

    /// Records the access of element `flat` of local slot `i` that an in-flight `T.wgmma`
    /// owns (`verb`: "reads" / "writes").
    fn reg_guard_broken(&self, i: usize, flat: usize, verb: &str) {
        let mut v = self.reg_violation.borrow_mut();
        if v.is_none() {
            let what = self
                .locals
                .get(i)
                .map_or_else(String::new, |b| b.element_text(flat));
            *v = Some(format!(
                "this thread {verb} {what}, an operand register (accumulator or register A) of an \
                 in-flight `T.wgmma` (missing `T.wgmma_wait`)"
            ));
        }
    }

    // Slots come from the compiler, which numbers exactly the buffers this memory holds, so
    // indexing cannot fail on any input.
    #[inline]
    pub fn buffer(&self, b: BufRef) -> &Buffer {
        match b {
            BufRef::Global(i) => &self.globals[i],
            BufRef::Local(i) => &self.locals[i],
        }
    }

    /// The thread whose `T.cp_async` has not yet landed a byte of element `flat` of shared
    /// buffer `b`, if any.
    pub fn pending_of(&self, b: BufRef, flat: usize) -> Option<u32> {
        let BufRef::Local(i) = b else {
            return None;
        };
        let buf = self.locals.get(i)?;
        let (offset, arena) = (buf.arena_offset?, self.shared.as_ref()?);
        let size = buf.dtype.bytes() as usize;
        arena.pending(offset + flat * size, size)
    }

    /// Element `flat` (in bounds) of `b`; `None` if it was never written (or, in shared
    /// memory, a `T.cp_async` has not landed it yet: see `pending_of`).
    #[inline]
    pub fn read(&self, b: BufRef, flat: usize) -> Option<Scalar> {
        if self.parallel.is_some() {
            self.log_parallel(b, flat, false);
        }
        self.read_unlogged(b, flat)
    }

    fn read_unlogged(&self, b: BufRef, flat: usize) -> Option<Scalar> {
        match b {
            BufRef::Global(i) => {
                let overlay = &self.overlays[i];
                if !overlay.is_empty() {
                    if let Some(&v) = overlay.get(&flat) {
                        return Some(v);
                    }
                }
                self.globals[i].data.get(flat)
            }
            BufRef::Local(i) => {
                let buf = &self.locals[i];
                if let (Some(offset), Some(arena)) = (buf.arena_offset, &self.shared) {
                    let at = offset + flat * buf.dtype.bytes() as usize;
                    let what = || buf.element_text(flat);
                    let v = arena.read(at, buf.dtype, self.thread, &what)?;
                    if let Some(why) = self.stale(i, at, buf.dtype.bytes() as usize, &what) {
                        arena.report(why);
                    }
                    return Some(v);
                }
                if self.regs.any() && self.regs.inflight(i, flat) {
                    self.reg_guard_broken(i, flat, "reads");
                }
                match &buf.written {
                    Some(w) if !w.get(flat).copied().unwrap_or(false) => None,
                    _ => buf.data.get(flat),
                }
            }
        }
    }

    /// `T.atomic_add`: element `flat` (in bounds) of `b` becomes `old + delta` in the
    /// buffer's dtype; `(old, new)`, or `None` when the element was never written. Global
    /// adds are logged for the grid's merge; shared ones in an arena are race-tracked as
    /// atomics.
    pub fn atomic_add(
        &mut self,
        b: BufRef,
        flat: usize,
        delta: Scalar,
    ) -> Option<(Scalar, Scalar)> {
        let dtype = self.buffer(b).dtype;
        // The sum is stored: converted to the buffer's dtype, so an integer sum past its
        // range wraps (as the hardware's `atom.add` does) — the IR's exact int32 arithmetic
        // wraps only on conversion (docs/ir.md, "Integer semantics").
        let add = |old: Scalar| {
            let sum = crate::interp::scalar::arith(crate::ir::BinOp::Add, dtype, old, delta)
                .unwrap_or(old);
            crate::interp::scalar::convert(sum, dtype)
        };
        if let BufRef::Local(i) = b {
            let buf = &self.locals[i];
            if let Some(offset) = buf.arena_offset {
                let at = offset + flat * dtype.bytes() as usize;
                let n = dtype.bytes() as usize;
                let what = || buf.element_text(flat);
                let stale = self.stale(i, at, n, &what);
                let tag = self.tag_of(i);
                if let Some(arena) = &mut self.shared {
                    if let Some(why) = stale {
                        arena.report(why);
                    }
                    let new = arena.atomic_add(at, dtype, &add, self.thread, &what);
                    arena.set_tags(at, n, tag);
                    return new;
                }
            }
        }
        let old = self.read_unlogged(b, flat)?;
        let new = add(old);
        match b {
            BufRef::Global(i) => {
                self.overlays[i].insert(flat, new);
                if !self.plain[i].contains(&flat) {
                    self.atomics[i].push((flat, delta));
                }
            }
            BufRef::Local(_) => self.write_unlogged(b, flat, new),
        }
        Some((old, new))
    }

    /// Writes `value` (already of the buffer's dtype) to element `flat` (in bounds).
    #[inline]
    pub fn write(&mut self, b: BufRef, flat: usize, value: Scalar) {
        if self.parallel.is_some() {
            self.log_parallel(b, flat, true);
        }
        self.write_unlogged(b, flat, value);
    }

    fn write_unlogged(&mut self, b: BufRef, flat: usize, value: Scalar) {
        match b {
            BufRef::Global(i) => {
                self.overlays[i].insert(flat, value);
                if self.plain[i].insert(flat) {
                    self.atomics[i].retain(|&(f, _)| f != flat);
                }
            }
            BufRef::Local(i) => {
                if self.regs.any() && self.regs.inflight(i, flat) {
                    self.reg_guard_broken(i, flat, "writes");
                    return;
                }
                if let Some(dirty) = &mut self.regs.dirty {
                    if self.locals[i].arena_offset.is_none() {
                        dirty.insert((i, flat));
                    }
                }
                let tag = self.tag_of(i);
                let buf = &mut self.locals[i];
                if let (Some(offset), Some(arena)) = (buf.arena_offset, &mut self.shared) {
                    let at = offset + flat * buf.dtype.bytes() as usize;
                    let buf = &*buf;
                    arena.write(at, buf.dtype, value, self.thread, &|| {
                        buf.element_text(flat)
                    });
                    arena.set_tags(at, buf.dtype.bytes() as usize, tag);
                    return;
                }
                buf.data.set(flat, value);
                if let Some(w) = &mut buf.written {
                    if let Some(slot) = w.get_mut(flat) {
                        *slot = true;
                    }
                }
            }
        }
    }
}
