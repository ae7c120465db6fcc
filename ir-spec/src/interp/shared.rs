//! A block's shared memory as ONE byte array, as on a GPU: every shared buffer reads and
//! writes its elements, encoded in its dtype (little-endian), at its byte offset. A plan that
//! overlaps two live buffers therefore really corrupts data. "Never written" is tracked per
//! byte.
//!
//! At the thread level it also detects data races: between two barriers (`T.sync_threads()`;
//! a named `T.bar_sync` orders only the threads that take part in it, and what is recorded
//! as "several threads" only when all threads that touched shared memory took part),
//! a byte written by one thread may not be read or written by another, and a byte read by one
//! thread may not be written by another — except that plain stores of the same bytes to the
//! same element (same offset, same size) by several threads are no race (PTX's memory
//! model: a uniform-size race of equal values; docs/ir.md, "Data races"). Accesses made
//! outside a thread (block-level code) are not tracked. The first race is kept and reported by the executor at the statement
//! that made it.
//!
//! Every write tags its bytes with the buffer written and its generation (how many
//! `T.fresh` of the buffer the writer had run: `Memory::tag_of`); a read of a buffer
//! expects the tag it would write. Bytes tagged otherwise hold a value from before the
//! reader's last `T.fresh` of the buffer, or one written through another buffer that shares
//! them in the arena — a plan that overlaps two live buffers: both are reported like races.
//!
//! Bytes a `T.cp_async` will write are *pending* from its issue until it lands
//! (`ops/intrinsics.rs`): reading or writing one is an error, reported like a race.
//!
//! The Hopper state lives here too, because ordinary accesses must be checked against it
//! (`ops/hopper.rs` gives the semantics): the mbarriers, in a side table keyed by their byte
//! address (an ordinary load or store of an initialized barrier's bytes is an error); what
//! each thread knows to have happened through mbarriers and barriers (`order.rs`: which
//! completed phases it has observed, which `T.wgmma`s it knows retired); the bytes a
//! `T.tma_load` wrote, which a thread may touch only once it knows the barrier phase the
//! copy completed in; and the bytes each `T.wgmma` read, which nobody may write before its
//! `T.wgmma_wait` — and, from another warpgroup, before knowing of that wait.
//!
//! A `T.tma_load` writes as the async proxy, by no thread, but it is checked like a write by
//! its issuing thread: it may not overwrite bytes that another thread read or wrote since the
//! last barrier (mbarriers do not order ordinary accesses in this model: see docs/ir.md), a
//! `T.wgmma`'s operand before its retirement is known, or the bytes of an earlier
//! `T.tma_load` whose phase the issuer does not know complete (two copies in flight).

use crate::dtype::DType;
use crate::interp::fp8;
use crate::interp::order::{Order, WgmmaConflict};
use crate::interp::scalar::Scalar;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};

/// The low half of a race cell: `thread + 1`, or [`MANY`] readers. The high half: the
/// barrier epoch of the access.
const MANY: u64 = 0xFFFF_FFFF;

pub(crate) struct SharedArena {
    bytes: Vec<u8>,
    written: Vec<bool>,
    /// Per byte: `(epoch << 32) | (thread + 1)` of its last write by a thread.
    writer: Vec<Cell<u64>>,
    /// Per byte: `(epoch << 32) | (thread + 1)` of its reader since the last barrier, or
    /// `MANY` when several threads read it.
    reader: Vec<Cell<u64>>,
    /// Per byte: `(epoch << 32) | (thread + 1)` of its `T.atomic_add`s since the last
    /// barrier, or `MANY` when several threads added to it. Atomic adds do not race with
    /// each other; a plain read or write of the byte by another thread does.
    atomic: Vec<Cell<u64>>,
    /// Per byte: the shape of its last write by a thread when that was a plain store of one
    /// element — `(byte's position in the element) << 4 | element size` — else 0. A plain
    /// store of the same bytes to the same element by another thread since the last barrier
    /// is no race (see [`SharedArena::write`]).
    store_shape: Vec<Cell<u8>>,
    /// Starts at 1 so that a zero cell means "never"; every barrier (`T.sync_threads()` or
    /// `T.bar_sync`) starts a new one.
    epoch: u64,
    /// The epoch the last `T.sync_threads()` started: accesses before it are ordered
    /// before everything after.
    last_full: u64,
    /// The thread sets of the `T.bar_sync`s since the last `T.sync_threads()`: each set
    /// once, with the epoch its last barrier started and whether every thread that had made
    /// an ordinary shared-memory access since the last `T.sync_threads()` took part in it.
    groups: Vec<SyncGroup>,
    /// Per barrier id, the threads of its `T.bar_sync`s since the last `T.sync_threads()`.
    named_sets: HashMap<i64, Vec<u32>>,
    /// Per thread: whether it made an ordinary (race-tracked) shared-memory access since the
    /// last `T.sync_threads()`; and the list of those threads.
    touched: RefCell<(Vec<bool>, Vec<u32>)>,
    race: RefCell<Option<String>>,
    /// Per byte: `thread + 1` of the `T.cp_async` that will write it, or 0.
    pending: Vec<u32>,
    /// How many bytes are pending (so that the common case checks nothing).
    n_pending: usize,
    /// Per byte: the tag of its last write (module doc), 0 before the first.
    tags: Vec<u64>,
    /// The initialized mbarriers, by byte address.
    barriers: BTreeMap<usize, Mbarrier>,
    /// Per byte: 1 + the index in `tma_regions` of the `T.tma_load` that wrote it last, or 0.
    tma_guard: Vec<u32>,
    /// Each `T.tma_load`: its barrier's slot (`order.rs`) and the phase it completes in.
    tma_regions: Vec<(usize, u64)>,
    /// What happens before what through mbarriers and `T.wgmma` retirements.
    order: Order,
    /// In a cluster's arena (the blocks of a cluster interpreted together): threads per
    /// block. A block's barrier then covers the threads of its block that touched shared
    /// memory; the others touched only their own blocks' bytes. 0: one block.
    block_threads: usize,
}

/// The state of one mbarrier (PTX ISA "mbarrier"): its phase (how many have completed),
/// the arrivals each phase expects, and what the current phase still waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Mbarrier {
    pub count: i64,
    pub phase: u64,
    pub arrivals: i64,
    pub tx: i64,
    /// This barrier's life in `order.rs` (each `T.mbarrier_init` starts a new one).
    pub slot: usize,
}

impl Mbarrier {
    /// Completes the current phase when nothing is pending any more; whether it did.
    fn settle(&mut self) -> bool {
        if self.arrivals == 0 && self.tx == 0 {
            self.phase += 1;
            self.arrivals = self.count;
            return true;
        }
        false
    }
}

/// The byte size of an mbarrier.
pub(crate) const MBARRIER_BYTES: usize = 8;

impl SharedArena {
    pub fn new(len: usize) -> SharedArena {
        SharedArena {
            bytes: vec![0; len],
            written: vec![false; len],
            writer: (0..len).map(|_| Cell::new(0)).collect(),
            reader: (0..len).map(|_| Cell::new(0)).collect(),
            atomic: (0..len).map(|_| Cell::new(0)).collect(),
            store_shape: (0..len).map(|_| Cell::new(0)).collect(),
            epoch: 1,
            last_full: 1,
            groups: Vec::new(),
            named_sets: HashMap::new(),
            touched: RefCell::new((Vec::new(), Vec::new())),
            race: RefCell::new(None),
            pending: vec![0; len],
            n_pending: 0,
            tags: vec![0; len],
            barriers: BTreeMap::new(),
            tma_guard: vec![0; len],
            tma_regions: Vec::new(),
            order: Order::new(len),
            block_threads: 0,
        }
    }

    /// The arena holds a cluster's blocks of `n` threads each (see `block_threads`).
    pub fn set_block_threads(&mut self, n: usize) {
        self.block_threads = n;
    }

    /// The arena's size in bytes.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// `T.mbarrier_init`: the barrier at `addr` starts phase 0 expecting `count` arrivals.
    pub fn init_mbarrier(&mut self, addr: usize, count: i64) {
        let slot = self.order.new_slot(addr);
        self.barriers.insert(
            addr,
            Mbarrier {
                count,
                phase: 0,
                arrivals: count,
                tx: 0,
                slot,
            },
        );
    }

    /// The barrier at `addr`, if initialized.
    pub fn mbarrier(&self, addr: usize) -> Option<Mbarrier> {
        self.barriers.get(&addr).copied()
    }

    /// An arrival (`arrive`, by `thread`: it releases what the thread knows) and / or `tx`
    /// transaction bytes expected (> 0) or completed (< 0) on the barrier at `addr`; then the
    /// phase completes if nothing is pending. The error says what went wrong (uninitialized,
    /// too many arrivals, a negative tx count).
    pub fn mbarrier_update(
        &mut self,
        addr: usize,
        arrive: bool,
        tx: i64,
        thread: Option<u32>,
    ) -> Result<(), String> {
        let Some(b) = self.barriers.get_mut(&addr) else {
            return Err("is used before `T.mbarrier_init`".to_string());
        };
        b.tx += tx;
        if arrive {
            if b.arrivals == 0 {
                return Err(format!(
                    "gets more than its {} arrivals in phase {}",
                    b.count, b.phase
                ));
            }
            b.arrivals -= 1;
        }
        // The count may dip below zero while an arrival is pending (PTX's tx-count is
        // signed: a block of a cluster may receive a multicast box before its own thread
        // announces the bytes); with every arrival in, the bytes completed outnumber those
        // announced.
        if b.tx < 0 && b.arrivals == 0 {
            return Err(format!(
                "has a negative transaction count ({}) in phase {} with all its arrivals in: \
                 `T.tma_load`s completed more bytes than `T.mbarrier_arrive_expect_tx` \
                 announced",
                b.tx, b.phase
            ));
        }
        let (slot, phase) = (b.slot, b.phase + 1);
        if let (true, Some(t)) = (arrive, thread) {
            self.order.arrive(t, slot);
        }
        if b.settle() {
            self.order.complete(slot, phase);
        }
        Ok(())
    }

    /// How many phases of the barrier at `addr` have completed, and how many times it was
    /// initialized: a wait blocked on it may pass once this changes.
    pub fn mbarrier_state(&self, addr: usize) -> Option<(usize, u64)> {
        self.barriers.get(&addr).map(|m| (m.slot, m.phase))
    }

    /// Thread `thread`'s `T.mbarrier_wait` on the barrier at `addr` returned: it has seen
    /// every completed phase, and knows what their arrivals knew (`order.rs`).
    pub fn observe(&mut self, thread: u32, addr: usize) {
        if let Some(m) = self.barriers.get(&addr) {
            self.order.observe(thread, m.slot);
        }
    }

    /// A `T.tma_load` completing on the barrier of `slot` in phase `phase`: the guard of the
    /// bytes it writes ([`SharedArena::tma_write`]).
    pub fn tma_region(&mut self, slot: usize, phase: u64) -> u32 {
        self.tma_regions.push((slot, phase));
        u32::try_from(self.tma_regions.len()).unwrap_or(u32::MAX)
    }

    /// Writes `data` at `offset` (inside the arena) for the TMA copy `region` issued by
    /// `thread`: by the async proxy, so by no thread for the race check afterwards; guarded
    /// until observed. Checked as a write by the issuer (module doc).
    pub fn tma_write(&mut self, offset: usize, data: &[u8], region: u32, thread: Option<u32>) {
        let Some(end) = offset
            .checked_add(data.len())
            .filter(|&e| e <= self.bytes.len())
        else {
            return;
        };
        let what = || format!("shared byte {offset}");
        if let Some(other) = self.pending(offset, data.len()) {
            self.report(pending_message(
                "writes",
                &format!("shared byte {offset} (by `T.tma_load`)"),
                None,
                other,
            ));
            return;
        }
        if let Some(why) = self.wgmma_guard(offset, data.len(), thread) {
            self.report(format!("`T.tma_load` writes {why}"));
            return;
        }
        if let Some(why) = self.tma_overwrite(offset, end, thread) {
            self.report(why);
            return;
        }
        if let Some(t) = thread {
            if self.async_write_race(offset, end, t, &what) {
                return;
            }
        }
        self.forget_writers(offset, end);
        self.put(offset, end, data);
        if let Some(g) = self.tma_guard.get_mut(offset..end) {
            g.fill(region);
        }
    }

    /// No thread wrote `offset..end` (an async-proxy or block-level write: no race tracking).
    fn forget_writers(&mut self, offset: usize, end: usize) {
        for b in offset..end {
            if let Some(w) = self.writer.get(b) {
                w.set(0);
            }
        }
    }

    /// Stores `data` at `offset..end` and marks the bytes written.
    fn put(&mut self, offset: usize, end: usize, data: &[u8]) {
        if let Some(dst) = self.bytes.get_mut(offset..end) {
            dst.copy_from_slice(data);
        }
        if let Some(w) = self.written.get_mut(offset..end) {
            w.fill(true);
        }
    }

    /// Why `thread` (`None`: block-level code, which sees what has completed) may not yet
    /// touch bytes `offset..offset + len`: a TMA copy's phase it has not observed, or an
    /// mbarrier's bytes. `None` when it may.
    fn hopper_guard(&self, offset: usize, len: usize, thread: Option<u32>) -> Option<String> {
        let end = offset.checked_add(len)?;
        if !self.barriers.is_empty() {
            let lo = offset.saturating_sub(MBARRIER_BYTES - 1);
            if let Some((&addr, _)) = self.barriers.range(lo..end).next() {
                return Some(format!(
                    "the mbarrier at shared byte {addr}, which only the `T.mbarrier_*` \
                     intrinsics may access"
                ));
            }
        }
        if self.tma_regions.is_empty() {
            return None;
        }
        let (b, bar, phase) = self.unobserved_tma(offset, end, thread)?;
        Some(format!(
            "shared byte {b}, which a `T.tma_load` writes; it completes in phase {phase} \
             of the mbarrier at shared byte {bar}, which this thread has not observed \
             (missing `T.mbarrier_wait`)"
        ))
    }

    /// The first byte of `offset..end` that a `T.tma_load` wrote in a phase `thread` does
    /// not know complete: (byte, barrier address, phase).
    fn unobserved_tma(
        &self,
        offset: usize,
        end: usize,
        thread: Option<u32>,
    ) -> Option<(usize, usize, u64)> {
        if self.tma_regions.is_empty() {
            return None;
        }
        for b in offset..end {
            let g = self.tma_guard.get(b).copied().unwrap_or(0);
            let Some(&(slot, phase)) = g
                .checked_sub(1)
                .and_then(|i| self.tma_regions.get(i as usize))
            else {
                continue;
            };
            if self.order.known_phases(thread, slot) <= phase {
                return Some((b, self.order.slot_addr(slot), phase));
            }
        }
        None
    }

    /// A `T.tma_load` of `thread` overwriting bytes of an earlier one whose completion the
    /// issuer does not know: both copies may be in flight at once.
    fn tma_overwrite(&self, offset: usize, end: usize, thread: Option<u32>) -> Option<String> {
        let (b, bar, phase) = self.unobserved_tma(offset, end, thread)?;
        Some(format!(
            "`T.tma_load` writes shared byte {b}, which an earlier `T.tma_load` writes too; that \
             one completes in phase {phase} of the mbarrier at shared byte {bar}, which this \
             thread does not know complete (missing `T.mbarrier_wait` before reusing the \
             buffer): both copies may be in flight at once"
        ))
    }

    /// Why bytes `offset..offset + len` that a `T.wgmma` reads may not be written by
    /// `thread` now, as "shared byte …, which …".
    fn wgmma_guard(&self, offset: usize, len: usize, thread: Option<u32>) -> Option<String> {
        if !self.order.any_wgmma() {
            return None;
        }
        match self.order.wgmma_conflict(offset, len, thread)? {
            WgmmaConflict::InFlight => Some(format!(
                "shared byte {offset}, which an in-flight `T.wgmma` reads (missing \
                 `T.wgmma_wait`)"
            )),
            WgmmaConflict::Unordered(g) => Some(format!(
                "shared byte {offset}, which a `T.wgmma` of warpgroup {g} reads: it may still \
                 be in flight, as its `T.wgmma_wait` does not happen before this write (no \
                 `T.sync_threads()`, and no mbarrier arrival made after that wait and waited \
                 for by this thread)"
            )),
        }
    }

    /// The race check of an async-proxy write (`T.tma_load`) issued by `thread`: another
    /// thread's read or write of these bytes since the last barrier is a race (mbarriers do
    /// not order ordinary accesses here). Reports it; whether it did.
    fn async_write_race(
        &self,
        offset: usize,
        end: usize,
        thread: u32,
        what: &dyn Fn() -> String,
    ) -> bool {
        let me = u64::from(thread) + 1;
        for b in offset..end {
            if let Some((verb, cell)) = self.other_access(b, me) {
                self.report(format!(
                    "data race on shared memory: a `T.tma_load` of this thread writes {}, which \
                     {} {verb} with no `T.sync_threads()` in between",
                    what(),
                    accessor(cell)
                ));
                return true;
            }
        }
        false
    }

    /// Whether another thread than `me` (`thread + 1`) wrote or read byte `b` since the last
    /// barrier: "wrote" / "read" and its race cell, the write first.
    fn other_access(&self, b: usize, me: u64) -> Option<(&'static str, u64)> {
        self.other_access_but(b, me, false)
    }

    /// [`Self::other_access`], not counting other threads' writes when `same_store`.
    fn other_access_but(&self, b: usize, me: u64, same_store: bool) -> Option<(&'static str, u64)> {
        let (w, r) = (self.writer.get(b)?.get(), self.reader.get(b)?.get());
        let a = self.atomic.get(b)?.get();
        if !same_store && self.concurrent(w, me) {
            Some(("wrote", w))
        } else if self.concurrent(a, me) {
            Some(("atomically updated", a))
        } else if self.concurrent(r, me) {
            Some(("read", r))
        } else {
            None
        }
    }

    /// `T.atomic_add` of `delta` to the element of `dtype` at `offset` by `thread`
    /// (`None`: block-level code): the new value, `add(old, delta)`, is written in place;
    /// `(old, new)`.
    /// Other threads' atomic adds since the last barrier are no race; their plain reads or
    /// writes are. `None` when the element was never written (or lies outside the arena).
    pub fn atomic_add(
        &mut self,
        offset: usize,
        dtype: DType,
        add: &dyn Fn(Scalar) -> Scalar,
        thread: Option<u32>,
        what: &dyn Fn() -> String,
    ) -> Option<(Scalar, Scalar)> {
        let n = dtype.bytes() as usize;
        let end = offset.checked_add(n).filter(|&e| e <= self.bytes.len())?;
        if !self.written.get(offset..end)?.iter().all(|&w| w) {
            return None;
        }
        if let Some(other) = self.pending(offset, n) {
            self.report(pending_message("adds to", &what(), thread, other));
            return None;
        }
        if let Some(t) = thread {
            let me = u64::from(t) + 1;
            self.touch(t);
            let now = self.epoch << 32;
            for b in offset..end {
                let (Some(w), Some(r), Some(a)) =
                    (self.writer.get(b), self.reader.get(b), self.atomic.get(b))
                else {
                    continue;
                };
                let (wv, rv) = (w.get(), r.get());
                let plain = if self.concurrent(wv, me) {
                    Some(("wrote", wv))
                } else if self.concurrent(rv, me) {
                    Some(("read", rv))
                } else {
                    None
                };
                if let Some((verb, cell)) = plain {
                    self.report(format!(
                        "data race on shared memory: this thread atomically adds to {}, which {} \
                         {verb} with no `T.sync_threads()` in between",
                        what(),
                        accessor(cell)
                    ));
                    break;
                }
                let seen = a.get();
                // An earlier adder ordered before this thread is replaced; one that is not
                // joins it (several adders).
                if self.concurrent(seen, me) {
                    a.set(now | MANY);
                } else {
                    a.set(now | me);
                }
            }
        }
        let old = decode(dtype, self.bytes.get(offset..end)?);
        let new = add(old);
        let encoded = encode(dtype, new);
        if let (Some(dst), Some(src)) = (self.bytes.get_mut(offset..end), encoded.get(..n)) {
            dst.copy_from_slice(src);
        }
        Some((old, new))
    }

    /// A raw read for the async proxy (`T.wgmma`'s operands) on behalf of `thread`: the
    /// element of `dtype` at `offset`, or why it cannot be read.
    pub fn async_read(
        &self,
        offset: usize,
        dtype: DType,
        thread: Option<u32>,
    ) -> Result<Scalar, String> {
        let n = dtype.bytes() as usize;
        let range = offset..offset.saturating_add(n);
        let Some(raw) = self.bytes.get(range.clone()) else {
            return Err(format!(
                "shared byte {offset} lies outside the {}-byte arena",
                self.bytes.len()
            ));
        };
        if let Some(other) = self.pending(offset, n) {
            return Err(format!(
                "shared byte {offset}, which a cp.async of thread {other} has not landed yet"
            ));
        }
        if let Some(why) = self.hopper_guard(offset, n, thread) {
            return Err(why);
        }
        if !self
            .written
            .get(range.clone())
            .is_some_and(|w| w.iter().all(|&w| w))
        {
            return Err(format!("shared byte {offset}, which was never written"));
        }
        // Another thread's ordinary store since the last barrier is a race: only
        // `T.sync_threads()` orders ordinary accesses (mbarriers order the async proxy's).
        if let Some(t) = thread {
            let me = u64::from(t) + 1;
            self.touch(t);
            for b in range {
                let w = self.writer.get(b).map_or(0, Cell::get);
                if self.concurrent(w, me) {
                    return Err(format!(
                        "shared byte {offset}, which thread {} wrote with no \
                         `T.sync_threads()` in between (a data race)",
                        (w & MANY) - 1
                    ));
                }
            }
        }
        Ok(decode(dtype, raw))
    }

    /// The `T.wgmma` number `seq` of warpgroup `g` read the 2-byte elements at `addrs`.
    pub fn wgmma_reads(&mut self, g: usize, seq: u64, addrs: &[usize]) {
        self.order.wgmma_reads(g, seq, addrs);
    }

    /// Warpgroup `g`'s `T.wgmma`s numbered up to `upto` are retired.
    pub fn wgmma_retired(&mut self, g: usize, upto: u64) {
        self.order.wgmma_retired(g, upto);
    }

    /// Why a write of bytes `offset..offset + len` by `thread` is not allowed now (beyond
    /// races and pending cp.asyncs).
    fn write_guard(&self, offset: usize, len: usize, thread: Option<u32>) -> Option<String> {
        self.wgmma_guard(offset, len, thread)
            .or_else(|| self.hopper_guard(offset, len, thread))
    }

    /// The thread whose `T.cp_async` will write one of bytes `offset..offset + len`, if one
    /// is pending.
    pub fn pending(&self, offset: usize, len: usize) -> Option<u32> {
        if self.n_pending == 0 {
            return None;
        }
        let end = offset.checked_add(len)?;
        self.pending
            .get(offset..end)?
            .iter()
            .find(|&&p| p != 0)
            .map(|&p| p - 1)
    }

    /// A `T.cp_async` of `thread` to bytes `offset..offset + len` (inside the arena) is
    /// issued: it counts as a write by `thread` now for the race check (so a read by another
    /// thread since the last barrier is a race), and the bytes are pending until it lands.
    pub fn start_async(
        &mut self,
        offset: usize,
        len: usize,
        thread: u32,
        what: &dyn Fn() -> String,
    ) {
        let Some(end) = offset.checked_add(len).filter(|&e| e <= self.bytes.len()) else {
            return;
        };
        if let Some(other) = self.pending(offset, len) {
            self.report(pending_message("writes", &what(), Some(thread), other));
            return;
        }
        self.track_write(offset, end, thread, what);
        if let Some(p) = self.pending.get_mut(offset..end) {
            p.fill(thread + 1);
        }
        self.n_pending += len;
    }

    /// A `T.cp_async` lands: its bytes are no longer pending and are written with `data`, as
    /// a write by `thread` at this moment; `None` (block-level code) makes them visible to
    /// every thread (no race tracking, as for any block-level access).
    pub fn land(
        &mut self,
        offset: usize,
        data: &[u8],
        thread: Option<u32>,
        what: &dyn Fn() -> String,
    ) {
        let Some(end) = offset
            .checked_add(data.len())
            .filter(|&e| e <= self.bytes.len())
        else {
            return;
        };
        if let Some(p) = self.pending.get_mut(offset..end) {
            let was = p.iter().filter(|&&x| x != 0).count();
            p.fill(0);
            self.n_pending = self.n_pending.saturating_sub(was);
        }
        match thread {
            Some(t) => self.track_write(offset, end, t, what),
            None => self.forget_writers(offset, end),
        }
        self.put(offset, end, data);
    }

    /// A barrier: every access before it happens before every access after it.
    pub fn barrier(&mut self) {
        self.epoch += 1;
        self.last_full = self.epoch;
        self.groups.clear();
        self.named_sets.clear();
        let mut touched = self.touched.borrow_mut();
        let (flags, list) = &mut *touched;
        for t in list.drain(..) {
            if let Some(f) = flags.get_mut(t as usize) {
                *f = false;
            }
        }
        drop(touched);
        self.order.barrier();
    }

    /// A named barrier `id` (`T.bar_sync`) among `threads` (sorted): every access of one of
    /// them before it happens before every access of one of them after it; other threads
    /// are not ordered by it. Between two `T.sync_threads()` every barrier of one id must
    /// have the same threads: otherwise the two sets' warps may arrive in one phase on the
    /// GPU (the count reached by threads of both), which orders neither set — refused here.
    /// (Phases completed from several places at once are `lockstep::named_arrive`'s and
    /// order nothing.)
    pub fn named_barrier(&mut self, id: i64, threads: &[u32]) -> Result<(), String> {
        match self.named_sets.get(&id) {
            Some(earlier) if earlier.as_slice() != threads => {
                return Err(format!(
                    "`T.bar_sync({id}, …)` is reached here by {} threads from thread {}, and by another set of threads earlier since the last `T.sync_threads()`: on the GPU the two sets' warps may arrive in one phase, so neither is ordered by it",
                    threads.len(),
                    threads.first().copied().unwrap_or(0)
                ))
            }
            Some(_) => {}
            None => {
                self.named_sets.insert(id, threads.to_vec());
            }
        }
        self.epoch += 1;
        let block = |t: u32| (t as usize).checked_div(self.block_threads);
        let own = threads.first().map(|&t| block(t));
        let covers = self
            .touched
            .borrow()
            .1
            .iter()
            .filter(|&&t| self.block_threads == 0 || Some(block(t)) == own)
            .all(|t| threads.binary_search(t).is_ok());
        match self.groups.iter_mut().find(|g| g.threads == threads) {
            Some(g) => {
                g.epoch = self.epoch;
                g.covers = covers;
            }
            None => self.groups.push(SyncGroup {
                threads: threads.to_vec(),
                epoch: self.epoch,
                covers,
            }),
        }
        self.order.barrier_among(threads);
        Ok(())
    }

    /// Thread `t` makes an ordinary shared-memory access (what a named barrier must cover
    /// to order accesses recorded as "several threads").
    fn touch(&self, t: u32) {
        let mut touched = self.touched.borrow_mut();
        let (flags, list) = &mut *touched;
        let i = t as usize;
        if flags.len() <= i {
            flags.resize(i + 1, false);
        }
        if let Some(f) = flags.get_mut(i) {
            if !*f {
                *f = true;
                list.push(t);
            }
        }
    }

    /// Whether the access recorded in race cell `cell` is unordered with an access by `me`
    /// (`thread + 1`) now: made by another thread (or several) since the last
    /// `T.sync_threads()`, and since then no `T.bar_sync` that both took part in — for
    /// several threads, one that `me` and every thread that had touched shared memory took
    /// part in.
    fn concurrent(&self, cell: u64, me: u64) -> bool {
        let who = cell & MANY;
        let epoch = cell >> 32;
        if cell == 0 || who == me || epoch < self.last_full {
            return false;
        }
        let member = |g: &SyncGroup, x: u64| {
            u32::try_from(x - 1).is_ok_and(|t| g.threads.binary_search(&t).is_ok())
        };
        !self.groups.iter().any(|g| {
            g.epoch > epoch
                && member(g, me)
                && if who == MANY {
                    g.covers
                } else {
                    member(g, who)
                }
        })
    }

    /// The first data race found since the last call.
    pub fn take_race(&self) -> Option<String> {
        self.race.borrow_mut().take()
    }

    /// Tags bytes `offset..offset + len` as written with `tag` (module doc).
    pub fn set_tags(&mut self, offset: usize, len: usize, tag: u64) {
        let end = offset.saturating_add(len).min(self.tags.len());
        if let Some(t) = self.tags.get_mut(offset..end) {
            t.fill(tag);
        }
    }

    /// The tag of the first byte of `offset..offset + len` that is tagged, but not `tag`.
    pub fn tag_mismatch(&self, offset: usize, len: usize, tag: u64) -> Option<u64> {
        let end = offset.saturating_add(len).min(self.tags.len());
        self.tags
            .get(offset..end)?
            .iter()
            .find(|&&t| t != 0 && t != tag)
            .copied()
    }

    /// Keeps `message` as the first error found since the last `take_race`.
    pub(crate) fn report(&self, message: String) {
        let mut race = self.race.borrow_mut();
        if race.is_none() {
            *race = Some(message);
        }
    }

    /// The element of `dtype` at byte `offset`; `None` when one of its bytes was never
    /// written (or it lies outside the arena, which the launcher rules out).
    /// `thread` is the reading thread, `what` names the element for a race report.
    pub fn read(
        &self,
        offset: usize,
        dtype: DType,
        thread: Option<u32>,
        what: &dyn Fn() -> String,
    ) -> Option<Scalar> {
        let range = offset..offset.checked_add(dtype.bytes() as usize)?;
        let raw = self.bytes.get(range.clone())?;
        if !self.written.get(range.clone())?.iter().all(|&w| w) {
            return None;
        }
        if self.pending(offset, range.len()).is_some() {
            return None;
        }
        if let Some(why) = self.hopper_guard(offset, range.len(), thread) {
            self.report(format!("{} reads {}: {why}", who(thread), what()));
        }
        if let Some(t) = thread {
            let me = u64::from(t) + 1;
            self.touch(t);
            let now = self.epoch << 32;
            for b in range {
                let (Some(w), Some(r)) = (self.writer.get(b), self.reader.get(b)) else {
                    continue;
                };
                let w = w.get();
                if self.concurrent(w, me) {
                    self.report(format!(
                        "data race on shared memory: this thread reads {}, which thread {} wrote \
                         with no `T.sync_threads()` in between",
                        what(),
                        (w & MANY) - 1
                    ));
                    break;
                }
                let a = self.atomic.get(b).map_or(0, Cell::get);
                if self.concurrent(a, me) {
                    self.report(format!(
                        "data race on shared memory: this thread reads {}, which {} atomically \
                         updated with no `T.sync_threads()` in between",
                        what(),
                        accessor(a)
                    ));
                    break;
                }
                let seen = r.get();
                // An earlier reader ordered before this thread is replaced (what is ordered
                // after this read is ordered after it too); one that is not joins it.
                if self.concurrent(seen, me) {
                    r.set(now | MANY);
                } else {
                    r.set(now | me);
                }
            }
        }
        Some(decode(dtype, raw))
    }

    /// Writes `value` (already of `dtype`) at byte `offset` (inside the arena). A write to a
    /// byte a `T.cp_async` has not landed yet is reported, and not done.
    pub fn write(
        &mut self,
        offset: usize,
        dtype: DType,
        value: Scalar,
        thread: Option<u32>,
        what: &dyn Fn() -> String,
    ) {
        let n = dtype.bytes() as usize;
        let Some(end) = offset.checked_add(n).filter(|&e| e <= self.bytes.len()) else {
            return;
        };
        if let Some(other) = self.pending(offset, n) {
            self.report(pending_message("writes", &what(), thread, other));
            return;
        }
        if let Some(why) = self.write_guard(offset, n, thread) {
            self.report(format!("{} writes {}: {why}", who(thread), what()));
            return;
        }
        let encoded = encode(dtype, value);
        if let Some(t) = thread {
            let same = self.same_store(offset, n, &encoded, t);
            self.track_write_as(offset, end, t, what, same);
            for (pos, b) in (offset..end).enumerate() {
                if let Some(c) = self.store_shape.get(b) {
                    // pos < 8 and n ≤ 8: fits in a byte.
                    c.set(((pos as u8) << 4) | n as u8);
                }
            }
        }
        if let (Some(dst), Some(src)) = (self.bytes.get_mut(offset..end), encoded.get(..n)) {
            dst.copy_from_slice(src);
        }
        if let Some(w) = self.written.get_mut(offset..end) {
            w.fill(true);
        }
    }

    /// Whether a plain store by `thread` of `data[..n]` to the element at `offset` repeats
    /// what another thread's plain store to the same element (same offset, same size) put
    /// there since the last barrier, byte for byte. PTX's memory model gives such a
    /// uniform-size race a meaning (every read sees one of the stores, and they are equal),
    /// so it is no race; stores of other values, other sizes or at other offsets are.
    fn same_store(&self, offset: usize, n: usize, data: &[u8], thread: u32) -> bool {
        let me = u64::from(thread) + 1;
        (offset..offset + n).enumerate().all(|(pos, b)| {
            let w = self.writer.get(b).map_or(0, Cell::get);
            self.concurrent(w, me)
                && self.store_shape.get(b).map(Cell::get) == Some(((pos as u8) << 4) | n as u8)
                && self.bytes.get(b) == data.get(pos)
        })
    }

    /// The race check of a write of bytes `offset..end` by `thread`, which becomes their
    /// last writer.
    fn track_write(&self, offset: usize, end: usize, thread: u32, what: &dyn Fn() -> String) {
        for b in offset..end {
            if let Some(c) = self.store_shape.get(b) {
                c.set(0);
            }
        }
        self.track_write_as(offset, end, thread, what, false);
    }

    /// [`Self::track_write`]; `same_store`: a plain store repeating another thread's
    /// ([`Self::same_store`]), whose earlier write is then no race.
    fn track_write_as(
        &self,
        offset: usize,
        end: usize,
        thread: u32,
        what: &dyn Fn() -> String,
        same_store: bool,
    ) {
        let me = u64::from(thread) + 1;
        let now = self.epoch << 32;
        self.touch(thread);
        for b in offset..end {
            // A plain store repeating another thread's value is no race with it, but both
            // are the byte's writers now: "several threads" unless they are ordered.
            let writer = self.writer.get(b).map_or(0, Cell::get);
            let shared_write = same_store && self.concurrent(writer, me);
            match self.other_access_but(b, me, same_store) {
                Some(("wrote", cell)) => {
                    self.report(format!(
                        "data race on shared memory: this thread writes {}, which {} also \
                         wrote with no `T.sync_threads()` in between",
                        what(),
                        accessor(cell)
                    ));
                    break;
                }
                Some((verb, cell)) => {
                    self.report(format!(
                        "data race on shared memory: this thread writes {}, which {} {verb} \
                         with no `T.sync_threads()` in between",
                        what(),
                        accessor(cell)
                    ));
                    break;
                }
                None => {}
            }
            if let Some(w) = self.writer.get(b) {
                w.set(now | if shared_write { MANY } else { me });
            }
        }
    }
}

/// The threads of a `T.bar_sync` (sorted), the epoch its last barrier started, and whether
/// it covered every thread that had touched shared memory since the last `T.sync_threads()`.
#[derive(Clone, Debug)]
struct SyncGroup {
    threads: Vec<u32>,
    epoch: u64,
    covers: bool,
}

/// The thread(s) of a race cell: "thread 5", or "other threads" for several readers.
fn accessor(cell: u64) -> String {
    if (cell & MANY) == MANY {
        "other threads".to_string()
    } else {
        format!("thread {}", (cell & MANY) - 1)
    }
}

/// "this thread reads `S[3]`, shared memory that a cp.async of thread 5 has not landed yet;
/// …": an access (`verb` "reads" / "writes") of a pending byte. `thread` is the accessing
/// thread (`None`: block-level code), `issuer` the thread of the cp.async.
/// Who accesses: "this thread" or "block-level code".
fn who(thread: Option<u32>) -> &'static str {
    if thread.is_some() {
        "this thread"
    } else {
        "block-level code"
    }
}

pub(crate) fn pending_message(verb: &str, what: &str, thread: Option<u32>, issuer: u32) -> String {
    let who = who(thread);
    format!(
        "{who} {verb} {what}, shared memory that a cp.async of thread {issuer} has not landed \
         yet; missing `T.cp_async_wait`"
    )
}

/// `value` (exactly representable in `dtype`) as `dtype.bytes()` little-endian bytes, in the
/// first bytes of the result.
pub fn encode(dtype: DType, value: Scalar) -> [u8; 8] {
    let mut out = [0u8; 8];
    let mut put = |b: &[u8]| {
        if let Some(dst) = out.get_mut(..b.len()) {
            dst.copy_from_slice(b);
        }
    };
    match dtype {
        DType::Float16 => put(&half::f16::from_f64(value.as_f64()).to_le_bytes()),
        DType::BFloat16 => put(&half::bf16::from_f64(value.as_f64()).to_le_bytes()),
        DType::Float32 => put(&(value.as_f64() as f32).to_le_bytes()),
        DType::Float64 => put(&value.as_f64().to_le_bytes()),
        DType::Float8E4M3 => put(&[fp8::bits(fp8::E4M3, value.as_f64())]),
        DType::Float8E5M2 => put(&[fp8::bits(fp8::E5M2, value.as_f64())]),
        // Integers are stored in range, so these casts are exact. The interpreter keeps an
        // int4 element in a byte of its own (its arena is not the device's layout for int4).
        DType::Int4 | DType::Int8 => put(&(value.as_i64() as i8).to_le_bytes()),
        DType::UInt8 => put(&(value.as_i64() as u8).to_le_bytes()),
        DType::Int16 => put(&(value.as_i64() as i16).to_le_bytes()),
        DType::UInt16 => put(&(value.as_i64() as u16).to_le_bytes()),
        DType::Int32 => put(&(value.as_i64() as i32).to_le_bytes()),
        DType::UInt32 => put(&(value.as_i64() as u32).to_le_bytes()),
        DType::Int64 => put(&value.as_i64().to_le_bytes()),
        DType::Bool => put(&[u8::from(value.as_bool())]),
    }
    out
}

/// The value of `dtype` whose little-endian bytes start `raw` (any bit pattern decodes).
pub fn decode(dtype: DType, raw: &[u8]) -> Scalar {
    let mut buf = [0u8; 8];
    if let Some(dst) = buf.get_mut(..raw.len().min(8)) {
        dst.copy_from_slice(raw.get(..dst.len()).unwrap_or(&[]));
    }
    let [b0, b1, b2, b3, ..] = buf;
    let two = [b0, b1];
    let four = [b0, b1, b2, b3];
    match dtype {
        DType::Float16 => Scalar::Float(half::f16::from_le_bytes(two).to_f64()),
        DType::BFloat16 => Scalar::Float(half::bf16::from_le_bytes(two).to_f64()),
        DType::Float32 => Scalar::Float(f64::from(f32::from_le_bytes(four))),
        DType::Float64 => Scalar::Float(f64::from_le_bytes(buf)),
        DType::Float8E4M3 => Scalar::Float(fp8::decode(fp8::E4M3, b0)),
        DType::Float8E5M2 => Scalar::Float(fp8::decode(fp8::E5M2, b0)),
        DType::Int4 => Scalar::Int(i64::from(((b0 << 4) as i8) >> 4)),
        DType::Int8 => Scalar::Int(i64::from(i8::from_le_bytes([b0]))),
        DType::UInt8 => Scalar::Int(i64::from(b0)),
        DType::Int16 => Scalar::Int(i64::from(i16::from_le_bytes(two))),
        DType::UInt16 => Scalar::Int(i64::from(u16::from_le_bytes(two))),
        DType::Int32 => Scalar::Int(i64::from(i32::from_le_bytes(four))),
        DType::UInt32 => Scalar::Int(i64::from(u32::from_le_bytes(four))),
        DType::Int64 => Scalar::Int(i64::from_le_bytes(buf)),
        DType::Bool => Scalar::Bool(b0 != 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_dtype_round_trips_through_its_bytes() {
        let cases = [
            (DType::Float16, Scalar::Float(-1.5)),
            (DType::BFloat16, Scalar::Float(3.0)),
            (DType::Float32, Scalar::Float(0.1f32 as f64)),
            (DType::Float64, Scalar::Float(0.1)),
            (DType::Float8E4M3, Scalar::Float(-448.0)),
            (DType::Float8E5M2, Scalar::Float(0.5)),
            (DType::Int8, Scalar::Int(-128)),
            (DType::UInt8, Scalar::Int(255)),
            (DType::Int32, Scalar::Int(-7)),
            (DType::UInt32, Scalar::Int(4_000_000_000)),
            (DType::Int64, Scalar::Int(i64::MIN)),
            (DType::Bool, Scalar::Bool(true)),
        ];
        for (dtype, v) in cases {
            assert_eq!(decode(dtype, &encode(dtype, v)), v, "{dtype}");
        }
        // f16 1.0 is 0x3C00, little-endian.
        assert_eq!(
            encode(DType::Float16, Scalar::Float(1.0))[..2],
            [0x00, 0x3C]
        );
    }

    #[test]
    fn bytes_are_tracked_and_races_found() {
        let mut a = SharedArena::new(16);
        let what = || "`S[0]`".to_string();
        assert_eq!(a.read(0, DType::Float32, None, &what), None);
        a.write(0, DType::Int8, Scalar::Int(1), Some(0), &what);
        // Three of the four bytes were never written.
        assert_eq!(a.read(0, DType::Float32, None, &what), None);
        assert_eq!(a.read(0, DType::Int8, Some(0), &what), Some(Scalar::Int(1)));
        assert!(a.take_race().is_none());
        assert_eq!(a.read(0, DType::Int8, Some(3), &what), Some(Scalar::Int(1)));
        let race = a.take_race().unwrap_or_default();
        assert!(race.contains("which thread 0 wrote"), "{race}");
        a.barrier();
        assert_eq!(a.read(0, DType::Int8, Some(3), &what), Some(Scalar::Int(1)));
        assert!(a.take_race().is_none());
        a.write(0, DType::Int8, Scalar::Int(2), Some(4), &what);
        let race = a.take_race().unwrap_or_default();
        assert!(race.contains("which thread 3 read"), "{race}");
    }

    #[test]
    fn pending_bytes_block_access_until_they_land() {
        let mut a = SharedArena::new(32);
        let what = || "`S[4]`".to_string();
        a.start_async(16, 8, 2, &what);
        assert_eq!(a.pending(16, 8), Some(2));
        assert_eq!(a.pending(0, 16), None);
        assert_eq!(a.pending(20, 2), Some(2));
        // Reads of pending bytes fail; writes are reported and not done.
        assert_eq!(a.read(16, DType::Int8, Some(2), &what), None);
        a.write(18, DType::Int8, Scalar::Int(9), Some(2), &what);
        let m = a.take_race().unwrap_or_default();
        assert!(
            m.starts_with("this thread writes `S[4]`, shared memory that a cp.async of thread 2"),
            "{m}"
        );
        // Landing by thread 2: it reads at once; another thread needs a barrier.
        a.land(16, &[1, 2, 3, 4, 5, 6, 7, 8], Some(2), &what);
        assert_eq!(a.pending(16, 8), None);
        assert_eq!(
            a.read(17, DType::Int8, Some(2), &what),
            Some(Scalar::Int(2))
        );
        assert!(a.take_race().is_none());
        assert_eq!(
            a.read(18, DType::Int8, Some(5), &what),
            Some(Scalar::Int(3))
        );
        assert!(a
            .take_race()
            .unwrap_or_default()
            .contains("which thread 2 wrote"));
        a.barrier();
        assert_eq!(
            a.read(18, DType::Int8, Some(5), &what),
            Some(Scalar::Int(3))
        );
        assert!(a.take_race().is_none());
        // Issuing onto bytes another thread read in this epoch is a race (write after read).
        a.start_async(16, 4, 1, &what);
        assert!(a
            .take_race()
            .unwrap_or_default()
            .contains("which thread 5 read"));
    }
}
