//! `fresh` — shared buffers whose value never crosses a loop iteration: the one definition
//! of the fact `T.fresh` records (docs/ir.md, "`T.fresh`"), for `mark-fresh-buffers`
//! (which proves it at the tile level and writes it down) and `plan-shared-memory` (which
//! reads it back from the IR at the thread level and overlaps such buffers).
//!
//! **Proving it** ([`provably_fresh`], tile level). For a shared buffer `X`, the loop `L`
//! is the outermost `serial` / `unroll` / `while` loop whose body holds every use of `X`
//! (found through `if`s only; a `T.Parallel`, `T.Pipelined` or thread loop on the way ends
//! the search, and so does a loop bound or condition that reads `X`). `X` is fresh in `L`
//! when, walking one iteration of `L`'s body in order, `X` is *wholly written* before any
//! statement reads it:
//!
//! - whole writes: a `T.copy` / `T.fill` / `T.clear` whose destination region is all of
//!   `X` (out-of-range source elements are written as 0, so every element is written), a
//!   `T.gemm` into all of `X` with `clear_accum=True`, a reduction into `X` with
//!   `clear=True`, a `T.Parallel` nest storing `X[i, j, …]` element for element over `X`'s
//!   shape, unconditionally;
//! - an `if` has written `X` when both branches have; a nested loop never has (it may run
//!   no iteration), but its body is walked from the state before it, the weakest any of its
//!   iterations starts from; a `T.fresh(X)` forgets the write.
//!
//! Every other write (a store, an intrinsic, a region of part of `X`) is partial and counts
//! for nothing. Fresh in an inner loop holding every use implies fresh in every loop around
//! it, so the outermost loop is the one to ask about (and it survives the software
//! pipeline, which rewrites the inner `T.Pipelined` loop: the stages its prologue fills are
//! still written in the same iteration of `L` that reads them).
//!
//! **Reading it back** ([`fresh_loops`], any level). A loop `L` (`serial`, `unroll`,
//! `while`) whose body has, at its top level, a `T.fresh` naming `X` that no earlier
//! statement of the body touches, where no other statement of the kernel touches `X` (the
//! statements on the way from the kernel's top level to `L`, and `L`'s own bounds or
//! condition, do not): then `X` is dead at every iteration boundary of `L`, and before and
//! after `L`. [`FreshLoop::units`] is `L`'s body flattened (`if` branches inlined, every
//! other statement — nested loops included — one unit), in program order: within one
//! iteration, every execution visits units in that order, so two buffers whose uses occupy
//! disjoint stretches of it are never live together.

use crate::analysis::access::{element_for_element, Access};
use crate::analysis::rows::parallel_nest;
use crate::analysis::uniform::is_uniform;
use std::collections::{BTreeMap, HashMap, HashSet};
use tlc_ir::verifier::const_int;
use tlc_ir::visit::{for_each_subexpr, stmt_exprs};
use tlc_ir::{
    BufferDecl, Expr, ExprKind, ForKind, Intrinsic, Kernel, Region, Scope, Stmt, StmtKind,
};

/// Where a statement list is, from a body: per level, the index of the statement holding it
/// and which of its bodies (0: a loop's body or an `if`'s then-branch, 1: the else-branch).
pub type ListPath = Vec<(usize, usize)>;

/// Per statement list of a body (every nested one too), which of its statements touch each
/// buffer (read or write it, nested statements included) and which name it in a `T.fresh`
/// (nested too). Built once for the body: asking each buffer's questions of every statement
/// instead was quadratic in a kernel of many buffers. Lists are keyed by their address: the
/// body is borrowed, unchanged, for the index's life.
struct ListIndex {
    lists: HashMap<(usize, usize), ListUsers>,
}

#[derive(Default)]
struct ListUsers {
    touching: HashMap<String, Vec<usize>>,
    freshing: HashMap<String, Vec<usize>>,
}

impl ListIndex {
    fn of(body: &[Stmt]) -> ListIndex {
        let mut index = ListIndex {
            lists: HashMap::new(),
        };
        index.add(body);
        index
    }

    fn key(list: &[Stmt]) -> (usize, usize) {
        (list.as_ptr() as usize, list.len())
    }

    fn add(&mut self, list: &[Stmt]) {
        let mut users = ListUsers::default();
        for (i, s) in list.iter().enumerate() {
            let a = Access::of_body(std::slice::from_ref(s));
            for b in a.reads.union(&a.writes) {
                users.touching.entry(b.clone()).or_default().push(i);
            }
            let mut named: HashSet<&str> = HashSet::new();
            tlc_ir::visit::for_each_stmt(std::slice::from_ref(s), &mut |x| {
                if let StmtKind::Fresh(bufs) = &x.kind {
                    named.extend(bufs.iter().map(|b| b.name.as_str()));
                }
            });
            for b in named {
                users.freshing.entry(b.to_string()).or_default().push(i);
            }
            for child in children(s) {
                self.add(child);
            }
        }
        self.lists.insert(Self::key(list), users);
    }

    /// The statements of `list` (a list of the indexed body) that touch `x`, in order.
    fn touching(&self, list: &[Stmt], x: &str) -> &[usize] {
        self.lists
            .get(&Self::key(list))
            .and_then(|u| u.touching.get(x))
            .map_or(&[], Vec::as_slice)
    }

    /// The statements of `list` that touch `x` or name it in a `T.fresh`, in order.
    fn touching_or_freshing(&self, list: &[Stmt], x: &str) -> Vec<usize> {
        let Some(u) = self.lists.get(&Self::key(list)) else {
            return Vec::new();
        };
        let mut all: Vec<usize> = u
            .touching
            .get(x)
            .into_iter()
            .chain(u.freshing.get(x))
            .flatten()
            .copied()
            .collect();
        all.sort_unstable();
        all.dedup();
        all
    }
}

/// The statement lists directly inside `s`.
fn children(s: &Stmt) -> Vec<&[Stmt]> {
    match &s.kind {
        StmtKind::For(f) => vec![&f.body[..]],
        StmtKind::While { body, .. } => vec![&body[..]],
        StmtKind::If {
            then_body,
            else_body,
            ..
        } => vec![&then_body[..], &else_body[..]],
        StmtKind::Kernel(k) => vec![&k.body[..]],
        _ => Vec::new(),
    }
}

/// For every loop of `k`'s body that some shared allocation is provably fresh in (module
/// doc), the loop's place (the path of the list holding it and its index there) and the
/// buffers, in declaration order.
pub fn provably_fresh(k: &Kernel) -> BTreeMap<(ListPath, usize), Vec<String>> {
    let mut out: BTreeMap<(ListPath, usize), Vec<String>> = BTreeMap::new();
    let lists = ListIndex::of(&k.body);
    for decl in k.allocs.iter().filter(|a| a.scope == Scope::Shared) {
        let x = decl.name.name.as_str();
        let Some((path, index)) = outermost_loop(&k.body, x, Vec::new(), &lists) else {
            continue;
        };
        let Some(body) = list_at(&k.body, &path)
            .and_then(|l| l.get(index))
            .and_then(loop_body)
        else {
            continue;
        };
        let check = WholeWrites {
            x,
            decl,
            lists: &lists,
        };
        if check.body(body, false).is_ok() {
            out.entry((path, index)).or_default().push(x.to_string());
        }
    }
    out
}

/// The outermost loop holding every use of `x` in `body` (module doc): its list and index.
fn outermost_loop(
    body: &[Stmt],
    x: &str,
    path: ListPath,
    lists: &ListIndex,
) -> Option<(ListPath, usize)> {
    let [i] = lists.touching(body, x) else {
        return None;
    };
    let s = &body[*i];
    let header_reads = stmt_exprs(s).into_iter().any(|e| loads(e, x));
    if header_reads {
        return None;
    }
    match &s.kind {
        StmtKind::For(f) if matches!(f.kind, ForKind::Serial | ForKind::Unroll) => Some((path, *i)),
        StmtKind::While { .. } => Some((path, *i)),
        StmtKind::If {
            then_body,
            else_body,
            ..
        } => {
            let (in_then, in_else) = (
                !lists.touching(then_body, x).is_empty(),
                !lists.touching(else_body, x).is_empty(),
            );
            let mut deeper = path;
            match (in_then, in_else) {
                (true, false) => {
                    deeper.push((*i, 0));
                    outermost_loop(then_body, x, deeper, lists)
                }
                (false, true) => {
                    deeper.push((*i, 1));
                    outermost_loop(else_body, x, deeper, lists)
                }
                _ => None,
            }
        }
        _ => None,
    }
}

/// Whether `body` (nested statements included) reads or writes `x`.
pub fn touches(body: &[Stmt], x: &str) -> bool {
    let a = Access::of_body(body);
    a.reads.contains(x) || a.writes.contains(x)
}

/// Whether `e` loads from `x`.
fn loads(e: &Expr, x: &str) -> bool {
    let mut found = false;
    for_each_subexpr(e, &mut |s| {
        found |= matches!(&s.kind, ExprKind::Load { buffer, .. } if buffer == x);
    });
    found
}

/// The statement list at `path` from `body`.
pub fn list_at<'a>(body: &'a [Stmt], path: &[(usize, usize)]) -> Option<&'a [Stmt]> {
    let mut at = body;
    for &(i, which) in path {
        at = child(at.get(i)?, which)?;
    }
    Some(at)
}

/// The statement list at `path` from `body`, to change.
pub fn list_at_mut<'a>(
    body: &'a mut Vec<Stmt>,
    path: &[(usize, usize)],
) -> Option<&'a mut Vec<Stmt>> {
    let mut at = body;
    for &(i, which) in path {
        at = child_mut(at.get_mut(i)?, which)?;
    }
    Some(at)
}

fn child(s: &Stmt, which: usize) -> Option<&[Stmt]> {
    match (&s.kind, which) {
        (StmtKind::For(f), 0) => Some(&f.body),
        (StmtKind::While { body, .. }, 0) => Some(body),
        (StmtKind::If { then_body, .. }, 0) => Some(then_body),
        (StmtKind::If { else_body, .. }, 1) => Some(else_body),
        _ => None,
    }
}

fn child_mut(s: &mut Stmt, which: usize) -> Option<&mut Vec<Stmt>> {
    match (&mut s.kind, which) {
        (StmtKind::For(f), 0) => Some(&mut f.body),
        (StmtKind::While { body, .. }, 0) => Some(body),
        (StmtKind::If { then_body, .. }, 0) => Some(then_body),
        (StmtKind::If { else_body, .. }, 1) => Some(else_body),
        _ => None,
    }
}

/// The body of a `serial` / `unroll` / `while` loop.
fn loop_body(s: &Stmt) -> Option<&[Stmt]> {
    match &s.kind {
        StmtKind::For(f) if matches!(f.kind, ForKind::Serial | ForKind::Unroll) => Some(&f.body),
        StmtKind::While { body, .. } => Some(body),
        _ => None,
    }
}

/// A read of `x` before it was wholly written.
struct ReadFirst;

/// The walk of one iteration for one buffer (module doc).
struct WholeWrites<'a> {
    x: &'a str,
    decl: &'a BufferDecl,
    lists: &'a ListIndex,
}

impl WholeWrites<'_> {
    /// Walks `body` from `written` (whether `x` was wholly written in this iteration so far);
    /// whether it is afterwards. Only the statements that touch `x` or name it in a
    /// `T.fresh` are walked: any other leaves `written` as it is and reads nothing of `x`.
    fn body(&self, body: &[Stmt], mut written: bool) -> Result<bool, ReadFirst> {
        for i in self.lists.touching_or_freshing(body, self.x) {
            written = self.stmt(&body[i], written)?;
        }
        Ok(written)
    }

    fn read(&self, reads: bool, written: bool) -> Result<(), ReadFirst> {
        if reads && !written {
            Err(ReadFirst)
        } else {
            Ok(())
        }
    }

    fn whole(&self, r: &Region) -> bool {
        r.buffer.name == self.x
            && r.ranges.len() == self.decl.shape.len()
            && r.ranges.iter().zip(&self.decl.shape).all(|(range, dim)| {
                const_int(&range.start) == Some(0)
                    && (range.extent == *dim
                        || const_int(&range.extent).is_some_and(|e| Some(e) == const_int(dim)))
            })
    }

    fn stmt(&self, s: &Stmt, written: bool) -> Result<bool, ReadFirst> {
        let x = self.x;
        // Loads anywhere in the statement's own expressions (indices, values, bounds).
        self.read(stmt_exprs(s).into_iter().any(|e| loads(e, x)), written)?;
        Ok(match &s.kind {
            StmtKind::Copy { src, dst } => {
                self.read(src.buffer.name == x, written)?;
                written || self.whole(dst)
            }
            StmtKind::Fill { dst, .. } => written || self.whole(dst),
            StmtKind::Gemm(g) => {
                self.read(g.a.buffer.name == x || g.b.buffer.name == x, written)?;
                self.read(g.c.buffer.name == x && !g.clear_accum, written)?;
                written || (g.clear_accum && self.whole(&g.c))
            }
            StmtKind::Reduce(r) => {
                self.read(r.src.name == x || (r.dst.name == x && !r.clear), written)?;
                written || (r.dst.name == x && r.clear)
            }
            StmtKind::AtomicAdd { buffer, .. } => {
                self.read(buffer.name == x, written)?;
                written
            }
            StmtKind::Intrinsic(i) => {
                let reads = i
                    .accesses()
                    .iter()
                    .any(|a| a.operand.buffer.name == x && a.effect.reads());
                self.read(reads, written)?;
                written
            }
            StmtKind::If {
                then_body,
                else_body,
                ..
            } => {
                let t = self.body(then_body, written)?;
                let e = self.body(else_body, written)?;
                t && e
            }
            StmtKind::For(f) if f.kind == ForKind::Parallel => {
                self.body(&f.body, written)?;
                written || self.parallel_whole_write(f)
            }
            StmtKind::For(f) => {
                self.body(&f.body, written)?;
                written
            }
            StmtKind::While { body, .. } => {
                self.body(body, written)?;
                written
            }
            StmtKind::Fresh(bufs) if bufs.iter().any(|b| b.name == x) => false,
            StmtKind::Kernel(_)
            | StmtKind::Let { .. }
            | StmtKind::Store { .. }
            | StmtKind::Barrier
            | StmtKind::GridSync
            | StmtKind::FinalizeReducer(_)
            | StmtKind::Note(_)
            | StmtKind::Fresh(_)
            | StmtKind::AllReduce(_) => written,
        })
    }

    /// A `T.Parallel` nest whose innermost body stores `x` element for element over all of
    /// its shape, at its top level (no condition around the store).
    fn parallel_whole_write(&self, outer: &tlc_ir::For) -> bool {
        let (vars, extents, body) = parallel_nest(outer);
        let Some(shape) = self
            .decl
            .shape
            .iter()
            .map(const_int)
            .collect::<Option<Vec<i64>>>()
        else {
            return false;
        };
        let extents: Vec<Option<i64>> = extents.into_iter().map(Some).collect();
        body.iter().any(|s| {
            matches!(&s.kind, StmtKind::Store { buffer, indices, .. }
                if buffer.name == self.x && element_for_element(&shape, indices, &vars, &extents))
        })
    }
}

/// One statement of a fresh loop's flattened body ([`FreshLoop::units`]).
#[derive(Clone, Debug)]
pub struct Unit {
    /// The list holding it, from the loop's body.
    pub list: ListPath,
    /// Its index in that list.
    pub index: usize,
    /// The buffers it (and what is nested in it) reads or writes.
    pub touched: HashSet<String>,
    pub kind: UnitKind,
}

/// What a unit does for the synchronization a reuse of bytes needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnitKind {
    /// `T.sync_threads()`.
    Barrier,
    /// `T.cp_async_wait(0)`: every copy the thread issued has landed.
    CpAsyncWaitAll,
    /// `T.wgmma_wait(0)`: every wgmma the warpgroup issued has retired.
    WgmmaWaitAll,
    Other,
}

/// A loop some shared buffers are fresh in, as `T.fresh` says (module doc).
#[derive(Clone, Debug)]
pub struct FreshLoop {
    /// The list holding the loop (from the body searched) and its index there.
    pub at: (ListPath, usize),
    /// The buffers fresh in it.
    pub buffers: Vec<String>,
    /// Its body, flattened: `if` branches inlined (then before else), every other statement
    /// one unit, in program order.
    pub units: Vec<Unit>,
    /// Per buffer, the units touching it (what [`FreshLoop::uses`] answers, kept once
    /// rather than searched for each buffer).
    users: HashMap<String, Vec<usize>>,
}

impl FreshLoop {
    /// The path of the loop's body (from the body searched).
    pub fn body_path(&self) -> ListPath {
        let mut p = self.at.0.clone();
        p.push((self.at.1, 0));
        p
    }

    /// The units that touch `x`, by position in [`FreshLoop::units`].
    pub fn uses(&self, x: &str) -> Vec<usize> {
        self.users.get(x).cloned().unwrap_or_default()
    }
}

/// Every loop of `body` (a kernel's top-level statements) with buffers fresh in it, as the
/// `T.fresh` statements at the heads of loop bodies say (module doc). `shared`: the
/// kernel's shared allocations (only those count).
pub fn fresh_loops(body: &[Stmt], shared: &HashSet<String>) -> Vec<FreshLoop> {
    let mut out = Vec::new();
    let lists = ListIndex::of(body);
    find_loops(body, body, &mut Vec::new(), shared, &lists, &mut out);
    out
}

fn find_loops(
    top: &[Stmt],
    list: &[Stmt],
    path: &mut ListPath,
    shared: &HashSet<String>,
    lists: &ListIndex,
    out: &mut Vec<FreshLoop>,
) {
    for (i, s) in list.iter().enumerate() {
        if let Some(body) = loop_body(s) {
            let buffers = heads(body, shared)
                .into_iter()
                .filter(|x| only_inside(top, path, i, x, lists))
                .collect::<Vec<_>>();
            if !buffers.is_empty() {
                let mut units = Vec::new();
                flatten(body, &mut Vec::new(), &mut units);
                let mut users: HashMap<String, Vec<usize>> = HashMap::new();
                for (u, unit) in units.iter().enumerate() {
                    for b in &unit.touched {
                        users.entry(b.clone()).or_default().push(u);
                    }
                }
                out.push(FreshLoop {
                    at: (path.clone(), i),
                    buffers,
                    units,
                    users,
                });
            }
        }
        // Vectorized loops hold single accesses; kernels do not nest.
        let bodies: Vec<(usize, &[Stmt])> = match &s.kind {
            StmtKind::For(f) if f.kind != ForKind::Vectorized => vec![(0, &f.body[..])],
            StmtKind::While { body, .. } => vec![(0, &body[..])],
            StmtKind::If {
                then_body,
                else_body,
                ..
            } => vec![(0, &then_body[..]), (1, &else_body[..])],
            _ => Vec::new(),
        };
        for (which, b) in bodies {
            path.push((i, which));
            find_loops(top, b, path, shared, lists, out);
            path.pop();
        }
    }
}

/// The shared buffers a `T.fresh` at the top level of `body` names before any statement
/// of `body` touches them.
fn heads(body: &[Stmt], shared: &HashSet<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut taken: HashSet<&str> = HashSet::new();
    let mut seen = Access::default();
    for s in body {
        if let StmtKind::Fresh(bufs) = &s.kind {
            for b in bufs {
                let x = &b.name;
                let untouched = !seen.reads.contains(x) && !seen.writes.contains(x);
                if shared.contains(x) && untouched && taken.insert(x) {
                    out.push(x.clone());
                }
            }
        } else {
            let a = Access::of_body(std::slice::from_ref(s));
            seen.reads.extend(a.reads);
            seen.writes.extend(a.writes);
        }
    }
    out
}

/// Whether every use of `x` in `top` lies in the body of the loop at index `i` of the list
/// at `path`: no other statement on the way touches it, nor the loop's own header.
fn only_inside(
    top: &[Stmt],
    path: &[(usize, usize)],
    i: usize,
    x: &str,
    lists: &ListIndex,
) -> bool {
    let mut list = top;
    let steps = path.iter().map(|&(j, w)| (j, Some(w))).chain([(i, None)]);
    for (j, which) in steps {
        if lists.touching(list, x).iter().any(|&k| k != j) {
            return false;
        }
        let Some(s) = list.get(j) else {
            return false;
        };
        // The statement on the way: its own expressions (condition, bounds) and its other
        // branch must not touch `x`.
        if stmt_exprs(s).into_iter().any(|e| loads(e, x)) {
            return false;
        }
        match (which, &s.kind) {
            (Some(0), StmtKind::If { else_body, .. })
                if !lists.touching(else_body, x).is_empty() =>
            {
                return false
            }
            (Some(1), StmtKind::If { then_body, .. })
                if !lists.touching(then_body, x).is_empty() =>
            {
                return false
            }
            _ => {}
        }
        match which {
            Some(w) => match child(s, w) {
                Some(c) => list = c,
                None => return false,
            },
            None => return true,
        }
    }
    false
}

fn flatten(list: &[Stmt], path: &mut ListPath, out: &mut Vec<Unit>) {
    for (i, s) in list.iter().enumerate() {
        if let StmtKind::If {
            cond,
            then_body,
            else_body,
        } = &s.kind
        {
            // The condition is read first: a unit of its own, at the `if`.
            let mut cond_reads = HashSet::new();
            for_each_subexpr(cond, &mut |e| {
                if let ExprKind::Load { buffer, .. } = &e.kind {
                    cond_reads.insert(buffer.clone());
                }
            });
            out.push(Unit {
                list: path.clone(),
                index: i,
                touched: cond_reads,
                kind: UnitKind::Other,
            });
            for (which, b) in [(0, then_body), (1, else_body)] {
                path.push((i, which));
                flatten(b, path, out);
                path.pop();
            }
            continue;
        }
        let a = Access::of_body(std::slice::from_ref(s));
        let kind = match &s.kind {
            StmtKind::Barrier | StmtKind::GridSync => UnitKind::Barrier,
            StmtKind::Intrinsic(Intrinsic::WaitGroup { n: 0 }) => UnitKind::CpAsyncWaitAll,
            StmtKind::Intrinsic(Intrinsic::WgmmaWait { n: 0 }) => UnitKind::WgmmaWaitAll,
            _ => UnitKind::Other,
        };
        out.push(Unit {
            list: path.clone(),
            index: i,
            touched: a.reads.into_iter().chain(a.writes).collect(),
            kind,
        });
    }
}

/// Whether the statement list at `path` (from `top`, the merged thread loop's body) runs
/// for every thread of the block alike: every `if` condition and loop bound on the way is
/// block-uniform (`analysis::uniform`), given the thread-dependent variables `dependent`
/// (the thread loop's), the per-thread allocations `private` and the uniform local
/// buffers `uniform`. Lets before each step that bind thread-dependent values count.
pub fn uniform_list(
    top: &[Stmt],
    path: &[(usize, usize)],
    private: &HashSet<String>,
    uniform: &HashSet<String>,
    dependent: &HashSet<String>,
) -> bool {
    let mut dependent = dependent.clone();
    let mut list = top;
    for &(j, which) in path {
        for s in list.iter().take(j) {
            if let StmtKind::Let { var, value, .. } = &s.kind {
                if !is_uniform(value, private, uniform, &dependent) {
                    dependent.insert(var.name.clone());
                }
            }
        }
        let Some(s) = list.get(j) else {
            return false;
        };
        let ok = match &s.kind {
            StmtKind::For(f) => {
                matches!(f.kind, ForKind::Serial | ForKind::Unroll)
                    && is_uniform(&f.start, private, uniform, &dependent)
                    && is_uniform(&f.stop, private, uniform, &dependent)
            }
            StmtKind::While { cond, .. } | StmtKind::If { cond, .. } => {
                is_uniform(cond, private, uniform, &dependent)
            }
            _ => false,
        };
        if !ok {
            return false;
        }
        match child(s, which) {
            Some(c) => list = c,
            None => return false,
        }
    }
    true
}
