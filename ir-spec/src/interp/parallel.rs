//! Conflicts between the iterations of a tile-level `T.Parallel` nest.
//!
//! A `T.Parallel` loop's iterations are spread over the block's threads and run in any
//! order, so a program whose result depends on their order means nothing. The tile level
//! runs them in order, which would hide that; instead it logs, while a nest runs, which
//! iteration wrote and read each element, and stops the run at the first conflict:
//!
//! - an element of shared, fragment or global memory written by one iteration and written
//!   or read by another;
//! - an element of a local buffer (one copy per thread) read by an iteration other than the
//!   one that last wrote it in this nest.
//!
//! Iterations are nodes of a tree (an inner `T.Parallel` loop's iterations are children of
//! the outer one's): two accesses conflict only when neither iteration contains the other,
//! so statements between nested loops (`for i …: x[i] = …; for j …: … x[i] …`) are ordered
//! as written. `T.atomic_add` is not logged: its updates commute. Reads of elements no
//! iteration of the nest wrote see the value from before the nest and never conflict.

use crate::interp::compile::BufRef;
use std::collections::HashMap;

/// One iteration: its parent (the iteration of the enclosing `T.Parallel` loop of the same
/// nest, if any), and the loop variable with its value, for messages.
struct Node {
    parent: Option<u32>,
    var: Box<str>,
    value: i64,
}

/// Who touched one element during the nest.
#[derive(Default)]
struct Touch {
    /// The iteration that last wrote it.
    writer: Option<u32>,
    /// Iterations that read it (at most two unrelated ones are kept: enough to prove a
    /// conflict with any later writer).
    readers: [Option<u32>; 2],
}

/// The log of one running outermost `T.Parallel` nest.
#[derive(Default)]
pub(crate) struct ParallelLog {
    nodes: Vec<Node>,
    /// The iteration running now.
    current: Option<u32>,
    touched: HashMap<(BufRef, usize), Touch>,
    /// The first conflict found (message), reported by the loop that runs the nest.
    conflict: Option<String>,
}

/// How an access is judged: per-thread copies (local buffers), memory shared by the
/// iterations (shared, fragment, global), or a reducer, whose updates combine in any order
/// and are not logged.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sharing {
    PerThread,
    Shared,
    Combined,
}

impl ParallelLog {
    /// Starts an iteration of a `T.Parallel` loop (`var = value`) inside the current one.
    pub fn enter(&mut self, var: &str, value: i64) {
        let id = self.nodes.len() as u32;
        self.nodes.push(Node {
            parent: self.current,
            var: var.into(),
            value,
        });
        self.current = Some(id);
    }

    /// Ends the current iteration.
    pub fn leave(&mut self) {
        self.current = self
            .current
            .and_then(|c| self.nodes.get(c as usize))
            .and_then(|n| n.parent);
    }

    pub fn take_conflict(&mut self) -> Option<String> {
        self.conflict.take()
    }

    /// Whether one of the two iterations contains the other (or they are the same).
    fn related(&self, a: u32, b: u32) -> bool {
        self.contains(a, b) || self.contains(b, a)
    }

    fn contains(&self, outer: u32, mut inner: u32) -> bool {
        loop {
            if inner == outer {
                return true;
            }
            match self.nodes.get(inner as usize).and_then(|n| n.parent) {
                Some(p) => inner = p,
                None => return false,
            }
        }
    }

    /// `i = 3, j = 5`.
    fn describe(&self, id: u32) -> String {
        let mut parts = Vec::new();
        let mut at = Some(id);
        while let Some(n) = at.and_then(|i| self.nodes.get(i as usize)) {
            parts.push(format!("{} = {}", n.var, n.value));
            at = n.parent;
        }
        parts.reverse();
        format!("`{}`", parts.join(", "))
    }

    /// Records the first conflict: iteration `first` did `first_verb` to the element, and
    /// the current one now does `now_verb`.
    fn report(
        &mut self,
        first: u32,
        first_verb: &str,
        now_verb: &str,
        element: &dyn Fn() -> String,
    ) {
        if self.conflict.is_some() {
            return;
        }
        let Some(now) = self.current else { return };
        self.conflict = Some(format!(
            "iterations of this `T.Parallel` loop conflict: iteration {} {first_verb} {}, and \
             iteration {} {now_verb} it (the iterations run on different threads, in any order)",
            self.describe(first),
            element(),
            self.describe(now),
        ));
    }

    /// Logs a read of element `flat` of `buf` by the current iteration.
    pub fn read(
        &mut self,
        buf: BufRef,
        flat: usize,
        sharing: Sharing,
        element: &dyn Fn() -> String,
    ) {
        let Some(now) = self.current.filter(|_| sharing != Sharing::Combined) else {
            return;
        };
        let touch = self.touched.entry((buf, flat)).or_default();
        let writer = touch.writer;
        if sharing == Sharing::Shared {
            match touch.readers {
                [None, _] => touch.readers[0] = Some(now),
                [Some(r), None] if r != now => touch.readers[1] = Some(now),
                _ => {}
            }
        }
        if let Some(w) = writer.filter(|&w| !self.related(w, now)) {
            self.report(w, "writes", "reads", element);
        }
    }

    /// Logs a write of element `flat` of `buf` by the current iteration.
    pub fn write(
        &mut self,
        buf: BufRef,
        flat: usize,
        sharing: Sharing,
        element: &dyn Fn() -> String,
    ) {
        let Some(now) = self.current.filter(|_| sharing != Sharing::Combined) else {
            return;
        };
        let touch = self.touched.entry((buf, flat)).or_default();
        let (writer, readers) = (touch.writer, touch.readers);
        touch.writer = Some(now);
        if sharing == Sharing::PerThread {
            return;
        }
        if let Some(w) = writer.filter(|&w| !self.related(w, now)) {
            self.report(w, "writes", "writes", element);
            return;
        }
        if let Some(r) = readers
            .iter()
            .flatten()
            .copied()
            .find(|&r| !self.related(r, now))
        {
            self.report(r, "reads", "writes", element);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn element() -> String {
        "`acc[0]`".to_string()
    }

    #[test]
    fn an_iteration_reading_its_own_write_is_no_conflict() {
        let mut log = ParallelLog::default();
        for i in 0..4 {
            log.enter("i", i);
            log.write(BufRef::Local(0), i as usize, Sharing::Shared, &element);
            log.read(BufRef::Local(0), i as usize, Sharing::Shared, &element);
            log.leave();
        }
        assert!(log.take_conflict().is_none());
    }

    #[test]
    fn a_read_of_another_iterations_write_conflicts() {
        let mut log = ParallelLog::default();
        log.enter("j", 0);
        log.write(BufRef::Local(0), 0, Sharing::Shared, &element);
        log.leave();
        log.enter("j", 63);
        log.read(BufRef::Local(0), 0, Sharing::Shared, &element);
        log.leave();
        let msg = log.take_conflict().expect("a conflict");
        assert!(msg.contains("iteration `j = 0` writes `acc[0]`"), "{msg}");
        assert!(msg.contains("iteration `j = 63` reads it"), "{msg}");
    }

    #[test]
    fn a_write_after_another_iterations_read_conflicts() {
        let mut log = ParallelLog::default();
        log.enter("j", 0);
        log.read(BufRef::Global(1), 7, Sharing::Shared, &element);
        log.leave();
        log.enter("j", 1);
        log.write(BufRef::Global(1), 7, Sharing::Shared, &element);
        log.leave();
        let msg = log.take_conflict().expect("a conflict");
        assert!(msg.contains("`j = 0` reads"), "{msg}");
    }

    #[test]
    fn per_thread_copies_conflict_only_on_a_read_of_another_iterations_value() {
        let mut log = ParallelLog::default();
        for i in 0..3 {
            log.enter("i", i);
            log.write(BufRef::Local(2), 0, Sharing::PerThread, &element);
            log.read(BufRef::Local(2), 0, Sharing::PerThread, &element);
            log.leave();
        }
        assert!(log.take_conflict().is_none());
        log.enter("i", 3);
        log.read(BufRef::Local(2), 0, Sharing::PerThread, &element);
        log.leave();
        assert!(log.take_conflict().is_some());
    }

    #[test]
    fn an_outer_iteration_is_ordered_with_its_inner_ones() {
        let mut log = ParallelLog::default();
        log.enter("i", 0);
        log.write(BufRef::Local(0), 0, Sharing::Shared, &element);
        for j in 0..2 {
            log.enter("j", j);
            log.read(BufRef::Local(0), 0, Sharing::Shared, &element);
            log.leave();
        }
        log.leave();
        assert!(log.take_conflict().is_none());
        log.enter("i", 1);
        log.enter("j", 0);
        log.read(BufRef::Local(0), 0, Sharing::Shared, &element);
        assert!(log
            .take_conflict()
            .is_some_and(|m| m.contains("`i = 0` writes") && m.contains("`i = 1, j = 0`")));
    }
}
