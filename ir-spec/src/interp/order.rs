//! What each thread of a block knows to have happened before its next access, beyond the
//! `T.sync_threads()` epochs of the race check (`shared.rs`): the ordering that the mbarriers
//! and the `T.wgmma` retirements give, which warp-specialized kernels rely on (a producer
//! and consumers that run concurrently and talk only through mbarriers; `tasks.rs`).
//!
//! A thread's [`Knowledge`] is a small vector clock over two kinds of events:
//! - per mbarrier (a *slot*: each `T.mbarrier_init` starts a new one), how many of its phases
//!   are known complete — the bytes of a `T.tma_load` completing in phase `p` may be touched
//!   by a thread that knows more than `p` phases;
//! - per warpgroup, the prefix of its `T.wgmma`s (numbered in issue order from 1) known
//!   retired by a `T.wgmma_wait` — the shared bytes such a wgmma read may be written only
//!   by a thread (or a thread's `T.tma_load`) that knows its retirement. A warpgroup's own
//!   threads know their retirements (the wait is their collective).
//!
//! Knowledge travels as the PTX memory model says: an arrival on an mbarrier releases the
//! arriving thread's knowledge into the barrier's current phase; a `T.mbarrier_wait` that
//! returns acquires what every completed phase of the barrier released, and that the barrier
//! completed those phases; `T.sync_threads()` (and the end of a thread loop entered from
//! block level) gives every thread what any thread knew (the block's *floor*); a
//! `T.bar_sync` gives each of its threads what any of them knew.

use crate::target::WARPGROUP_SIZE;

/// The threads of a warpgroup.
const WARPGROUP: usize = WARPGROUP_SIZE as usize;

/// What one thread (or one mbarrier phase) knows: see the module doc.
#[derive(Clone, Debug, Default)]
pub(crate) struct Knowledge {
    /// Per mbarrier slot: how many of its phases are known complete.
    phases: Vec<u64>,
    /// Per warpgroup: its `T.wgmma`s numbered up to this are known retired.
    retired: Vec<u64>,
}

impl Knowledge {
    fn join(&mut self, other: &Knowledge) {
        join_max(&mut self.phases, &other.phases);
        join_max(&mut self.retired, &other.retired);
    }

    fn is_empty(&self) -> bool {
        self.phases.is_empty() && self.retired.is_empty()
    }

    fn clear(&mut self) {
        self.phases.clear();
        self.retired.clear();
    }
}

/// `into[i] = max(into[i], from[i])`, growing `into` as needed.
fn join_max(into: &mut Vec<u64>, from: &[u64]) {
    if into.len() < from.len() {
        into.resize(from.len(), 0);
    }
    for (a, &b) in into.iter_mut().zip(from) {
        *a = (*a).max(b);
    }
}

/// `v[i] = max(v[i], x)`, growing `v` as needed.
fn raise(v: &mut Vec<u64>, i: usize, x: u64) {
    if v.len() <= i {
        v.resize(i + 1, 0);
    }
    if let Some(slot) = v.get_mut(i) {
        *slot = (*slot).max(x);
    }
}

/// One mbarrier's life (from its `T.mbarrier_init`).
#[derive(Clone, Debug, Default)]
struct Slot {
    /// Its byte address.
    addr: usize,
    /// How many phases have completed.
    phase: u64,
    /// What the arrivals of the current phase released.
    pending: Knowledge,
    /// What the arrivals of every completed phase released.
    released: Knowledge,
}

/// One warpgroup's `T.wgmma`s, and the shared bytes they read.
#[derive(Clone, Debug, Default)]
struct Warpgroup {
    /// Per arena byte: the number of the last of its wgmmas that read it (0: none).
    reads: Vec<u32>,
    /// Its wgmmas numbered up to this are retired.
    retired: u64,
}

/// Why a write may not touch a byte that a `T.wgmma` read.
pub(crate) enum WgmmaConflict {
    /// The wgmma has not been retired.
    InFlight,
    /// It has, but the writer does not know it (warpgroup `.0`).
    Unordered(usize),
}

/// The block's ordering state: see the module doc.
#[derive(Debug, Default)]
pub(crate) struct Order {
    slots: Vec<Slot>,
    /// Per thread: what it knows beyond `floor`.
    threads: Vec<Knowledge>,
    /// What every thread knows (as of the last barrier).
    floor: Knowledge,
    warpgroups: Vec<Warpgroup>,
    /// The arena's size (for the wgmma read maps).
    len: usize,
}

impl Order {
    pub fn new(len: usize) -> Order {
        Order {
            len,
            ..Order::default()
        }
    }

    /// A new mbarrier at `addr` (`T.mbarrier_init`): its slot.
    pub fn new_slot(&mut self, addr: usize) -> usize {
        self.slots.push(Slot {
            addr,
            ..Slot::default()
        });
        self.slots.len() - 1
    }

    /// The byte address of the mbarrier of `slot`.
    pub fn slot_addr(&self, slot: usize) -> usize {
        self.slots.get(slot).map_or(0, |s| s.addr)
    }

    /// How many phases of the mbarrier of `slot` have completed.
    pub fn slot_phase(&self, slot: usize) -> u64 {
        self.slots.get(slot).map_or(0, |s| s.phase)
    }

    /// Thread `t` arrives on the mbarrier of `slot`: its knowledge joins the current phase's.
    pub fn arrive(&mut self, t: u32, slot: usize) {
        let own = self.own_retired(t);
        let (Some(s), mine) = (self.slots.get_mut(slot), self.threads.get(t as usize)) else {
            return;
        };
        s.pending.join(&self.floor);
        if let Some(k) = mine {
            s.pending.join(k);
        }
        if let Some((g, r)) = own {
            raise(&mut s.pending.retired, g, r);
        }
    }

    /// The mbarrier of `slot` completed a phase (it has completed `phases` now).
    pub fn complete(&mut self, slot: usize, phases: u64) {
        if let Some(s) = self.slots.get_mut(slot) {
            s.phase = phases;
            let pending = std::mem::take(&mut s.pending);
            s.released.join(&pending);
        }
    }

    /// Thread `t`'s `T.mbarrier_wait` on the mbarrier of `slot` returned: it acquires what
    /// the completed phases released, and knows they completed.
    pub fn observe(&mut self, t: u32, slot: usize) {
        let Some(s) = self.slots.get(slot) else {
            return;
        };
        let t = t as usize;
        if self.threads.len() <= t {
            self.threads.resize_with(t + 1, Knowledge::default);
        }
        if let Some(k) = self.threads.get_mut(t) {
            k.join(&s.released);
            raise(&mut k.phases, slot, s.phase);
        }
    }

    /// How many phases of the mbarrier of `slot` thread `t` knows complete (`None`, block-level
    /// code: how many have).
    pub fn known_phases(&self, t: Option<u32>, slot: usize) -> u64 {
        let Some(t) = t else {
            return self.slot_phase(slot);
        };
        let mine = self
            .threads
            .get(t as usize)
            .and_then(|k| k.phases.get(slot))
            .copied()
            .unwrap_or(0);
        mine.max(self.floor.phases.get(slot).copied().unwrap_or(0))
    }

    /// A barrier: every thread knows what any thread knew, and every retirement so far.
    pub fn barrier(&mut self) {
        for k in &mut self.threads {
            if !k.is_empty() {
                self.floor.join(k);
                k.clear();
            }
        }
        for (g, w) in self.warpgroups.iter().enumerate() {
            raise(&mut self.floor.retired, g, w.retired);
        }
    }

    /// A named barrier among `threads` (`T.bar_sync`): each of them knows what any of them
    /// knew, and the retirements of their own warpgroups.
    pub fn barrier_among(&mut self, threads: &[u32]) {
        let mut joined = Knowledge::default();
        for &t in threads {
            if let Some(k) = self.threads.get(t as usize) {
                joined.join(k);
            }
            if let Some((g, r)) = self.own_retired(t) {
                raise(&mut joined.retired, g, r);
            }
        }
        if joined.is_empty() {
            return;
        }
        for &t in threads {
            let t = t as usize;
            if self.threads.len() <= t {
                self.threads.resize_with(t + 1, Knowledge::default);
            }
            if let Some(k) = self.threads.get_mut(t) {
                k.join(&joined);
            }
        }
    }

    /// Thread `t`'s warpgroup and the prefix of its wgmmas retired, if it has issued any.
    fn own_retired(&self, t: u32) -> Option<(usize, u64)> {
        let g = t as usize / WARPGROUP;
        self.warpgroups.get(g).map(|w| (g, w.retired))
    }

    /// The `T.wgmma` number `seq` of warpgroup `g` reads the bytes at `addrs` (every byte of
    /// its elements: 2 per f16 / bf16, 1 per fp8).
    pub fn wgmma_reads(&mut self, g: usize, seq: u64, addrs: &[usize]) {
        if self.warpgroups.len() <= g {
            self.warpgroups.resize_with(g + 1, Warpgroup::default);
        }
        let len = self.len;
        let Some(w) = self.warpgroups.get_mut(g) else {
            return;
        };
        if w.reads.is_empty() {
            w.reads = vec![0; len];
        }
        let seq = u32::try_from(seq).unwrap_or(u32::MAX);
        for &a in addrs {
            if let Some(cell) = w.reads.get_mut(a) {
                *cell = seq;
            }
        }
    }

    /// Warpgroup `g`'s wgmmas numbered up to `upto` are retired.
    pub fn wgmma_retired(&mut self, g: usize, upto: u64) {
        if let Some(w) = self.warpgroups.get_mut(g) {
            w.retired = w.retired.max(upto);
        }
    }

    /// Whether a write of bytes `offset..offset + len` by `t` (`None`: block-level code,
    /// ordered after every retirement) conflicts with a wgmma's read: the first conflict.
    pub fn wgmma_conflict(
        &self,
        offset: usize,
        len: usize,
        t: Option<u32>,
    ) -> Option<WgmmaConflict> {
        let end = offset.checked_add(len)?;
        for (g, w) in self.warpgroups.iter().enumerate() {
            let Some(cells) = w.reads.get(offset..end) else {
                continue;
            };
            let last = u64::from(cells.iter().copied().max().unwrap_or(0));
            if last == 0 {
                continue;
            }
            if last > w.retired {
                return Some(WgmmaConflict::InFlight);
            }
            let known = match t {
                None => w.retired,
                Some(t) if t as usize / WARPGROUP == g => w.retired,
                Some(t) => {
                    let mine = self
                        .threads
                        .get(t as usize)
                        .and_then(|k| k.retired.get(g))
                        .copied()
                        .unwrap_or(0);
                    mine.max(self.floor.retired.get(g).copied().unwrap_or(0))
                }
            };
            if last > known {
                return Some(WgmmaConflict::Unordered(g));
            }
        }
        None
    }

    /// Whether any `T.wgmma` has read shared memory (so writes need checking).
    pub fn any_wgmma(&self) -> bool {
        !self.warpgroups.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn knowledge_travels_through_arrive_and_wait() {
        let mut o = Order::new(64);
        let (full, empty) = (o.new_slot(0), o.new_slot(8));
        // Consumer thread 0 (warpgroup 0) reads bytes 16..18 with wgmma 1.
        o.wgmma_reads(0, 1, &[16, 17]);
        // Only those bytes: the next one is free to write.
        assert!(o.wgmma_conflict(18, 1, Some(128)).is_none());
        // In flight: nobody may write them.
        assert!(matches!(
            o.wgmma_conflict(16, 2, Some(128)),
            Some(WgmmaConflict::InFlight)
        ));
        o.wgmma_retired(0, 1);
        // Retired, but thread 128 (warpgroup 1) does not know it.
        assert!(matches!(
            o.wgmma_conflict(16, 2, Some(128)),
            Some(WgmmaConflict::Unordered(0))
        ));
        assert!(o.wgmma_conflict(16, 2, Some(5)).is_none());
        // Thread 0 observed `full`'s first phase, then arrives on `empty`; when its phase
        // completes, thread 128's wait acquires both facts.
        o.complete(full, 1);
        o.observe(0, full);
        assert_eq!(o.known_phases(Some(0), full), 1);
        assert_eq!(o.known_phases(Some(128), full), 0);
        o.arrive(0, empty);
        o.complete(empty, 1);
        o.observe(128, empty);
        assert_eq!(o.known_phases(Some(128), full), 1);
        assert_eq!(o.known_phases(Some(128), empty), 1);
        assert!(o.wgmma_conflict(16, 2, Some(128)).is_none());
        // A barrier tells everyone.
        assert_eq!(o.known_phases(Some(7), full), 0);
        o.barrier();
        assert_eq!(o.known_phases(Some(7), full), 1);
        assert!(o.wgmma_conflict(16, 2, Some(300)).is_none());
    }
}
