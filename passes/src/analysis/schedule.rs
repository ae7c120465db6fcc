//! The schedule of a `T.Pipelined` loop: the dependency graph of its body (petgraph; an
//! edge `i → j` when statement `j` reads what `i` writes, writes what `i` reads or writes, or
//! uses a variable `i` binds), the stage and order `pipeline-planning` assigns (global →
//! shared copies in stage 0, everything else in the last stage, a topological order; a
//! note takes the stage of the statement it annotates and sits beside it), and
//! the check of a given plan. `pipeline-planning` writes the plan into the IR;
//! `inject-software-pipeline` plans loops that have none and checks the plan either way.
//! docs/passes.md states the rules.

use super::access::{count_sites, Access};
use super::footprint::byte_size;
use super::int::{mentions_any, unit_offset};
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::EdgeRef;
use petgraph::Direction;
use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap, HashSet};
use tlc_ir::affine::constant_difference;
use tlc_ir::visit::{for_each_stmt, for_each_subexpr, stmt_exprs};
use tlc_ir::{
    BufferDecl, Diagnostic, Expr, ExprKind, For, ForKind, Kernel, Region, Scope, Span, Stmt,
    StmtKind, Target,
};

/// Facts about the kernel a pipelined loop is in.
pub struct KernelFacts {
    /// The global buffers (parameters).
    pub globals: HashSet<String>,
    /// Buffer declarations by name: parameters and the kernel's allocations.
    pub decls: HashMap<String, BufferDecl>,
    /// How many access sites each buffer has in the whole kernel.
    pub sites: HashMap<String, usize>,
}

impl KernelFacts {
    pub fn of(k: &Kernel, params: &[BufferDecl]) -> KernelFacts {
        KernelFacts {
            globals: params.iter().map(|p| p.name.name.clone()).collect(),
            decls: params
                .iter()
                .chain(k.allocs.iter())
                .map(|b| (b.name.name.clone(), b.clone()))
                .collect(),
            sites: count_sites(&k.body),
        }
    }

    pub fn is_shared(&self, b: &str) -> bool {
        self.decls.get(b).is_some_and(|d| d.scope == Scope::Shared)
    }

    pub fn scope_name(&self, b: &str) -> &'static str {
        self.decls.get(b).map_or("unknown", |d| d.scope.name())
    }
}

/// What one statement of a pipelined body touches.
#[derive(Clone, Debug, Default)]
pub struct StmtDeps {
    /// Buffers read and written (nested statements included).
    pub access: Access,
    /// The variable a let binds.
    pub defines: Option<String>,
    /// Scalar variables the statement uses.
    pub uses: BTreeSet<String>,
    /// A let that has the same value wherever in the loop it is evaluated: its value reads
    /// only global or shared buffers that no statement of the loop writes (an index
    /// tensor: a page table, a block list) and uses only outer variables and pure lets.
    /// `inject-software-pipeline` evaluates it wherever it is needed (the prologue, the
    /// look-ahead), so the copies whose addresses it computes can run ahead.
    pub pure_let: bool,
    /// For a let that is not pure: why it cannot be evaluated ahead.
    pub impure_because: Option<String>,
    /// A global → shared copy (a stage-0 candidate).
    pub copy: bool,
    /// A `T.Parallel` nest not proven to write each element at most once (its stores, made
    /// asynchronous copies in stage 0, could be in flight to one element twice).
    pub may_write_twice: bool,
    /// Shared buffers it writes that something outside the loop (other than the statements
    /// after it in the same list) also accesses.
    pub used_outside: Vec<String>,
}

/// Why statement `j` depends on statement `i`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Dep {
    Raw(String),
    War(String),
    Waw(String),
    Scalar(String),
}

impl std::fmt::Display for Dep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Dep::Raw(b) => write!(f, "it reads `{b}`, which the other writes"),
            Dep::War(b) => write!(f, "it writes `{b}`, which the other reads"),
            Dep::Waw(b) => write!(f, "both write `{b}`"),
            Dep::Scalar(v) => write!(f, "it uses `{v}`, which the other binds"),
        }
    }
}

/// The dependency graph of a pipelined loop's body: node `i` is statement `i`; an edge
/// `i → j` (`i < j`) is a dependency within one iteration.
///
/// Only the *nearest* dependencies are edges, so that the graph has as many edges as the
/// statements have accesses, not one per pair of statements: `j` reading buffer `b` depends
/// on the last statement before it that writes `b`; `j` writing `b` on that writer and on
/// every statement that read `b` since; `j` using a variable on the let binding it. Every
/// other dependency of the pairwise definition (RAW, WAR, WAW, scalar) follows by a path
/// of these (writers of a buffer form a chain), so the graph has the same reachability,
/// and every edge is a dependency of the pairwise definition (with the same reason). A
/// pure let's predecessors are pure lets too (it reads no memory the loop writes), so no
/// path between two other statements passes through one.
pub struct LoopGraph<'a> {
    pub body: &'a [Stmt],
    pub stmts: Vec<StmtDeps>,
    pub graph: DiGraph<usize, Dep>,
    facts: &'a KernelFacts,
    /// The statements writing each buffer, in body order (the pairwise questions, "which
    /// statements write what this one accesses", look here instead of at every statement).
    writers: HashMap<String, Vec<usize>>,
    /// The statements reading each buffer, in body order.
    readers: HashMap<String, Vec<usize>>,
    /// The lets binding each variable (one, names being unique).
    lets: HashMap<String, Vec<usize>>,
}

impl<'a> LoopGraph<'a> {
    /// `from_here`: the access sites of the loop and the statements after it in its list.
    pub fn build(
        body: &'a [Stmt],
        facts: &'a KernelFacts,
        from_here: &HashMap<String, usize>,
    ) -> LoopGraph<'a> {
        let defined: HashSet<String> = body
            .iter()
            .filter_map(|s| match &s.kind {
                StmtKind::Let { var, .. } => Some(var.name.clone()),
                _ => None,
            })
            .collect();
        // What the loop writes: a let reading none of it reads the same values in every
        // iteration (and ahead of it).
        let written = Access::of_body(body).writes;
        let mut pure: HashSet<String> = HashSet::new();
        let mut stmts = Vec::with_capacity(body.len());
        for s in body {
            let access = Access::of_body(std::slice::from_ref(s));
            let mut uses = BTreeSet::new();
            for_each_stmt(std::slice::from_ref(s), &mut |x| {
                for e in stmt_exprs(x) {
                    for_each_subexpr(e, &mut |e| {
                        if let ExprKind::Var(v) = &e.kind {
                            uses.insert(v.clone());
                        }
                    });
                }
            });
            let (defines, impure_because) = match &s.kind {
                StmtKind::Let { var, .. } => {
                    let why = impure_let(
                        &var.name,
                        &access,
                        &uses,
                        (&defined, &pure),
                        &written,
                        facts,
                    );
                    if why.is_none() {
                        pure.insert(var.name.clone());
                    }
                    (Some(var.name.clone()), why)
                }
                _ => (None, None),
            };
            let pure_let = defines.is_some() && impure_because.is_none();
            let used_outside = access
                .writes
                .iter()
                .filter(|b| {
                    facts.is_shared(b)
                        && facts.sites.get(*b).copied().unwrap_or(0)
                            > from_here.get(*b).copied().unwrap_or(0)
                })
                .cloned()
                .collect();
            stmts.push(StmtDeps {
                copy: is_global_to_shared_copy(s, facts),
                may_write_twice: matches!(&s.kind, StmtKind::For(f)
                    if f.kind == ForKind::Parallel && !writes_each_element_once(f)),
                access,
                defines,
                uses,
                pure_let,
                impure_because,
                used_outside,
            });
        }
        let mut writers: HashMap<String, Vec<usize>> = HashMap::new();
        let mut readers: HashMap<String, Vec<usize>> = HashMap::new();
        for (x, s) in stmts.iter().enumerate() {
            for b in &s.access.writes {
                writers.entry(b.clone()).or_default().push(x);
            }
            for b in &s.access.reads {
                readers.entry(b.clone()).or_default().push(x);
            }
        }
        let mut lets: HashMap<String, Vec<usize>> = HashMap::new();
        for (x, s) in stmts.iter().enumerate() {
            if let Some(v) = &s.defines {
                lets.entry(v.clone()).or_default().push(x);
            }
        }
        let graph = nearest_dependencies(&stmts);
        LoopGraph {
            body,
            stmts,
            graph,
            facts,
            writers,
            readers,
            lets,
        }
    }

    /// The statements other than `x` that write a buffer `x` writes, in body order.
    fn co_writers(&self, x: usize) -> Vec<usize> {
        self.writing(x, &self.stmts[x].access.writes)
    }

    /// The statements other than `x` that write one of `buffers`, in body order.
    fn writing<'b>(&self, x: usize, buffers: impl IntoIterator<Item = &'b String>) -> Vec<usize> {
        let mut ys: Vec<usize> = buffers
            .into_iter()
            .filter_map(|b| self.writers.get(b))
            .flatten()
            .copied()
            .filter(|&y| y != x)
            .collect();
        ys.sort_unstable();
        ys.dedup();
        ys
    }

    fn node(&self, i: usize) -> NodeIndex {
        NodeIndex::new(i)
    }

    /// The same-iteration predecessors of statement `j`, with the reason.
    fn preds(&self, j: usize) -> Vec<(usize, &Dep)> {
        self.graph
            .edges_directed(self.node(j), Direction::Incoming)
            .map(|e| (e.source().index(), e.weight()))
            .collect()
    }

    /// The stages and order the pass assigns (see the module docs).
    pub fn plan(&self, num_stages: i64) -> (Vec<i64>, Vec<i64>) {
        let n = self.stmts.len();
        let last = (num_stages - 1).max(0);
        let mut early = Candidates::new(self);
        loop {
            let mut changed = false;
            for x in 0..n {
                if early.is[x] && !self.can_run_early(x, &early) {
                    early.demote(self, x);
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        let mut early = early.is;
        // Pure lets: stage 0 when a stage-0 statement needs them (directly or through other
        // pure lets).
        let mut users: HashMap<&str, Vec<usize>> = HashMap::new();
        for (y, s) in self.stmts.iter().enumerate() {
            for u in &s.uses {
                users.entry(u).or_default().push(y);
            }
        }
        for x in (0..n).rev() {
            if let (true, Some(v)) = (self.stmts[x].pure_let, &self.stmts[x].defines) {
                early[x] = users
                    .get(v.as_str())
                    .is_some_and(|ys| ys.iter().any(|&y| y > x && early[y]));
            }
        }
        let mut stage: Vec<i64> = early.iter().map(|&e| if e { 0 } else { last }).collect();
        // A note goes with the statement it annotates: the next one that is not a note, else
        // the one before it.
        let anchors = self.note_anchors();
        for (x, anchor) in anchors.iter().enumerate() {
            if let Some(a) = *anchor {
                stage[x] = stage[a];
            }
        }
        let order = self.topological_order(&stage);
        (self.notes_beside_anchors(order, &anchors), stage)
    }

    /// For each statement: `None` for a statement that is not a note, else the statement
    /// the note annotates (`None` too when the body is only notes).
    fn note_anchors(&self) -> Vec<Option<usize>> {
        let n = self.body.len();
        let is_note = |x: usize| matches!(self.body[x].kind, StmtKind::Note(_));
        // The nearest statement that is not a note at or after / at or before each place.
        let mut next = vec![None; n + 1];
        for x in (0..n).rev() {
            next[x] = if is_note(x) { next[x + 1] } else { Some(x) };
        }
        let mut prev: Vec<Option<usize>> = Vec::with_capacity(n);
        for x in 0..n {
            let before = x.checked_sub(1).and_then(|w| prev[w]);
            prev.push(if is_note(x) { before } else { Some(x) });
        }
        (0..n)
            .map(|x| {
                if !is_note(x) {
                    return None;
                }
                next[x + 1].or_else(|| x.checked_sub(1).and_then(|w| prev[w]))
            })
            .collect()
    }

    /// `order` with every note moved next to its anchor: just before it when the note was
    /// before it in the body, just after it otherwise (notes keep their body order).
    fn notes_beside_anchors(&self, order: Vec<i64>, anchors: &[Option<usize>]) -> Vec<i64> {
        let n = order.len();
        let is_note = |x: usize| matches!(self.body[x].kind, StmtKind::Note(_));
        let mut stmts: Vec<usize> = (0..n).filter(|&x| !is_note(x)).collect();
        if stmts.is_empty() {
            return order;
        }
        stmts.sort_by_key(|&x| order[x]);
        // Each anchor's notes before and after it, in body order.
        let mut notes: HashMap<(usize, bool), Vec<usize>> = HashMap::new();
        for (x, anchor) in anchors.iter().enumerate() {
            if let Some(a) = *anchor {
                notes.entry((a, x < a)).or_default().push(x);
            }
        }
        let mut seq = Vec::with_capacity(n);
        for a in stmts {
            seq.extend(notes.get(&(a, true)).into_iter().flatten());
            seq.push(a);
            seq.extend(notes.get(&(a, false)).into_iter().flatten());
        }
        let mut out = vec![0i64; n];
        for (pos, &x) in seq.iter().enumerate() {
            out[x] = pos as i64;
        }
        out
    }

    /// Whether stage-0 candidate `x` may run ahead, given the current candidates `early`:
    /// it writes no bytes another candidate may write, depends on no late statement (a
    /// late predecessor through other statements makes those late first: edges go forward
    /// and the caller sweeps forward), no late statement writes what it accesses, and the
    /// lets it uses are pure.
    fn can_run_early(&self, x: usize, early: &Candidates) -> bool {
        let sx = &self.stmts[x];
        let late = |y: usize| !early.is[y] && !self.stmts[y].pure_let;
        sx.used_outside.is_empty()
            && sx
                .access
                .writes
                .iter()
                .filter_map(|b| early.writers.get(b))
                .flatten()
                .all(|&y| y == x || self.same_bytes_written(x, y).is_none())
            && self.preds(x).iter().all(|&(y, _)| !late(y))
            && sx
                .access
                .reads
                .union(&sx.access.writes)
                .all(|b| early.late_writers.get(b).is_none_or(|&c| c == 0))
            && sx.uses.iter().all(|u| {
                self.lets
                    .get(u)
                    .is_none_or(|ys| ys.iter().all(|&y| self.stmts[y].pure_let))
            })
    }

    /// A buffer that statements `x` and `y` both write, unless both are `T.copy`s into
    /// provably disjoint regions of it (then no byte is written twice).
    fn same_bytes_written(&self, x: usize, y: usize) -> Option<String> {
        let (sx, sy) = (&self.stmts[x], &self.stmts[y]);
        let disjoint = match (&self.body[x].kind, &self.body[y].kind) {
            (StmtKind::Copy { dst: a, .. }, StmtKind::Copy { dst: b, .. }) => {
                disjoint_regions(a, b)
            }
            _ => false,
        };
        if disjoint {
            return None;
        }
        sx.access
            .writes
            .iter()
            .find(|b| sy.access.writes.contains(*b))
            .cloned()
    }

    /// Why the global → shared copies a plan left in the last stage cannot run ahead, one
    /// line per copy (`stage`: the plan's stages).
    pub fn copies_kept_late(&self, stage: &[i64]) -> Vec<String> {
        let last = stage.iter().copied().max().unwrap_or(0);
        (0..self.stmts.len())
            .filter(|&x| self.stmts[x].copy && stage[x] == last && last > 0)
            .map(|x| {
                let sx = &self.stmts[x];
                let what: Vec<&str> = sx.access.writes.iter().map(String::as_str).collect();
                let what = what.join("`, `");
                let twin = self
                    .co_writers(x)
                    .into_iter()
                    .filter(|&y| self.stmts[y].copy)
                    .find_map(|y| Some((y, self.same_bytes_written(x, y)?)));
                let why = if sx.may_write_twice {
                    "its iterations are not proven to write each element once (each loop \
                     variable its own index dimension, `offset + var`); two asynchronous \
                     copies to one element would be in flight at once"
                        .to_string()
                } else if !sx.used_outside.is_empty() {
                    format!(
                        "shared `{}` is also used outside this loop (another loop or code \
                         before it; give each pipelined loop its own buffers)",
                        sx.used_outside.join("`, `")
                    )
                } else if let Some((y, b)) = twin {
                    format!(
                        "statement {} of the body may write the same bytes of `{b}` (two \
                         asynchronous copies to the same bytes would be in flight at once)",
                        y + 1
                    )
                } else if let Some((y, dep)) = self.last_late_dependency(x, stage, last) {
                    // A let it needs stays in place: say why it cannot move along.
                    let because = match (&dep, &self.stmts[y].impure_because) {
                        (Dep::Scalar(_), Some(why)) => format!("; {why}"),
                        _ => String::new(),
                    };
                    format!(
                        "it depends on statement {} of the body ({dep}{because})",
                        y + 1
                    )
                } else {
                    "a later-stage statement writes what it reads or writes".to_string()
                };
                format!("the copy into `{what}` is not filled ahead: {why}")
            })
            .collect()
    }

    /// The last statement before `x` in stage `last` (not a pure let) that `x` depends on
    /// by the pairwise definition, with the reason: the statements binding what `x` uses,
    /// writing what it accesses, reading what it writes.
    fn last_late_dependency(&self, x: usize, stage: &[i64], last: i64) -> Option<(usize, Dep)> {
        let sx = &self.stmts[x];
        let lists = sx
            .access
            .reads
            .union(&sx.access.writes)
            .filter_map(|b| self.writers.get(b))
            .chain(sx.access.writes.iter().filter_map(|b| self.readers.get(b)));
        let mut candidates: Vec<usize> = lists.flatten().copied().filter(|&y| y < x).collect();
        candidates.extend(sx.uses.iter().filter_map(|u| self.lets.get(u)).flatten());
        candidates.retain(|&y| y < x);
        candidates.sort_unstable();
        candidates.dedup();
        candidates
            .into_iter()
            .rev()
            .filter(|&y| stage[y] == last && !self.stmts[y].pure_let)
            .find_map(|y| Some((y, dependency(&self.stmts[y], sx)?)))
    }

    /// A located error at `num_stages` when `count` stages of the ring cannot fit in a
    /// block's shared memory on `target`: every shared buffer that a stage-0 statement of
    /// `stage` writes gets one copy per stage (`inject-software-pipeline`), all of them live
    /// through the loop, so their bytes times `count` is at least what the block needs.
    /// Asked before anything works stage by stage (the prologue's `S - 1` copies, TMA's
    /// per-stage barriers and checks), which would otherwise run `count` times whatever it
    /// is (`num_stages=2^31` never finished). `None` when it fits, when there is no ring
    /// (fewer than 2 stages, nothing in stage 0) or a size is not constant (then
    /// `plan-shared-memory` decides).
    pub fn ring_too_large(
        &self,
        num_stages: &Expr,
        count: i64,
        stage: &[i64],
        target: Target,
    ) -> Option<Diagnostic> {
        if count < 2 || stage.len() != self.stmts.len() {
            return None;
        }
        let ring: BTreeSet<&String> = (0..self.stmts.len())
            .filter(|&x| stage[x] == 0 && !self.stmts[x].pure_let)
            .flat_map(|x| &self.stmts[x].access.writes)
            .filter(|b| self.facts.is_shared(b))
            .collect();
        if ring.is_empty() {
            return None;
        }
        let per_stage = ring.iter().try_fold(0i64, |acc, b| {
            acc.checked_add(byte_size(self.facts.decls.get(b.as_str())?)?)
        })?;
        let max = target.max_shared_bytes();
        let total = per_stage.checked_mul(count);
        if total.is_some_and(|t| t <= max) {
            return None;
        }
        let names: Vec<&str> = ring.iter().map(|b| b.as_str()).collect();
        let total = total.map_or_else(|| "more than 2^63".to_string(), |t| t.to_string());
        Some(
            Diagnostic::error(
                num_stages.span,
                format!(
                    "`num_stages={count}` needs {total} bytes of shared memory for the \
                     pipeline's stages ({count} copies of `{}`: {per_stage} bytes a stage), \
                     more than the {max} a block may have on {target}",
                    names.join("`, `")
                ),
            )
            .with_note(format!(
                "at most {} stages fit (the rest of the kernel's shared memory aside)",
                max / per_stage.max(1)
            )),
        )
    }

    /// Kahn's algorithm, taking the lowest (stage, body index) of the ready statements.
    fn topological_order(&self, stage: &[i64]) -> Vec<i64> {
        let n = self.stmts.len();
        let mut indegree: Vec<usize> = (0..n)
            .map(|j| {
                self.graph
                    .neighbors_directed(self.node(j), Direction::Incoming)
                    .count()
            })
            .collect();
        let mut ready: BinaryHeap<Reverse<(i64, usize)>> = (0..n)
            .filter(|&j| indegree[j] == 0)
            .map(|j| Reverse((stage[j], j)))
            .collect();
        let mut order = vec![0i64; n];
        let mut pos = 0i64;
        while let Some(Reverse((_, j))) = ready.pop() {
            order[j] = pos;
            pos += 1;
            for k in self
                .graph
                .neighbors_directed(self.node(j), Direction::Outgoing)
            {
                let k = k.index();
                indegree[k] -= 1;
                if indegree[k] == 0 {
                    ready.push(Reverse((stage[k], k)));
                }
            }
        }
        order
    }

    /// Checks a loop's `order` / `stage` (user-given or planned).
    pub fn validate(
        &self,
        f: &For,
        span: Span,
        num_stages: i64,
        order: &[i64],
        stage: &[i64],
    ) -> Vec<Diagnostic> {
        let n = self.body.len();
        let name = &f.var.name;
        let mut errors = Vec::new();
        if order.len() != n || stage.len() != n {
            errors.push(
                Diagnostic::error(
                    span,
                    format!(
                        "pipelined loop `{name}`: `order` has {} and `stage` {} entries, but the body has {n} statements",
                        order.len(),
                        stage.len()
                    ),
                )
                .with_note("give one entry per statement of the loop body, in body order"),
            );
            return errors;
        }
        if let Some(&bad) = stage.iter().find(|&&s| s < 0 || s >= num_stages) {
            errors.push(Diagnostic::error(
                span,
                format!(
                    "pipelined loop `{name}`: stage {bad} is outside 0..{num_stages} (num_stages={num_stages})"
                ),
            ));
        }
        let mut seen = vec![false; n];
        for &o in order {
            match usize::try_from(o).ok().filter(|&o| o < n) {
                Some(o) if !seen[o] => seen[o] = true,
                _ => {
                    errors.push(
                        Diagnostic::error(
                            span,
                            format!(
                                "pipelined loop `{name}`: `order` must list each position 0..{} exactly once",
                                n.saturating_sub(1)
                            ),
                        )
                        .with_note(format!("found {order:?}")),
                    );
                    break;
                }
            }
        }
        if !errors.is_empty() {
            return errors;
        }
        for e in self.graph.edge_references() {
            let (i, j) = (e.source().index(), e.target().index());
            if self.stmts[i].pure_let {
                // Pure lets are evaluated wherever they are needed.
                continue;
            }
            if stage[i] > stage[j] {
                errors.push(
                    Diagnostic::error(
                        self.body[j].span,
                        format!(
                            "this stage-{} statement depends on a stage-{} statement of the same iteration: {}",
                            stage[j],
                            stage[i],
                            e.weight()
                        ),
                    )
                    .with_note_at(self.body[i].span, "the statement it depends on")
                    .with_note("a statement may not run in an earlier stage than what it depends on"),
                );
            } else if stage[i] == stage[j] && order[i] > order[j] {
                errors.push(
                    Diagnostic::error(
                        self.body[j].span,
                        format!(
                            "`order` runs this statement before one it depends on: {}",
                            e.weight()
                        ),
                    )
                    .with_note_at(self.body[i].span, "the statement it depends on"),
                );
            }
        }
        let last = num_stages - 1;
        if last > 0 {
            for x in 0..n {
                if stage[x] != 0 || self.stmts[x].pure_let {
                    continue;
                }
                errors.extend(self.check_early(x, stage));
            }
        }
        errors
    }

    /// The conditions for stage-0 statement `x` to run `num_stages - 1` iterations ahead.
    fn check_early(&self, x: usize, stage: &[i64]) -> Vec<Diagnostic> {
        let sx = &self.stmts[x];
        let span = self.body[x].span;
        let mut errors = Vec::new();
        // The later-stage statements writing what `x` accesses (the others cannot clash).
        let late: Vec<usize> = self
            .writing(x, sx.access.reads.union(&sx.access.writes))
            .into_iter()
            .filter(|&y| stage[y] > 0 && !self.stmts[y].pure_let)
            .collect();
        for b in &sx.access.writes {
            if !self.facts.is_shared(b) {
                errors.push(
                    Diagnostic::error(
                        span,
                        format!(
                            "a stage-0 statement may only write shared memory, but this one writes `{b}` ({})",
                            self.facts.scope_name(b)
                        ),
                    )
                    .with_note("stage-0 statements run num_stages - 1 iterations ahead; only shared buffers get one copy per stage"),
                );
            } else if sx.used_outside.contains(b) {
                errors.push(
                    Diagnostic::error(
                        span,
                        format!(
                            "shared buffer `{b}`, written in stage 0, is also used outside the pipelined loop (other than after it)"
                        ),
                    )
                    .with_note("a stage-0 buffer gets one copy per stage; only the statements after the loop can follow that"),
                );
            }
        }
        if sx.copy && sx.may_write_twice {
            errors.push(
                Diagnostic::error(
                    span,
                    "this stage-0 `T.Parallel` nest is not proven to write each element once",
                )
                .with_note("give each loop variable its own index dimension (`offset + var`): stage-0 stores are asynchronous copies, and two in flight to one element land in no defined order"),
            );
        }
        for y in (self.co_writers(x).into_iter()).filter(|&y| y < x && stage[y] == 0) {
            if let Some(b) = self.same_bytes_written(x, y) {
                errors.push(
                    Diagnostic::error(
                        span,
                        format!(
                            "this stage-0 statement may write the same bytes of `{b}` as another stage-0 statement"
                        ),
                    )
                    .with_note_at(self.body[y].span, "the other stage-0 statement")
                    .with_note("stage-0 writes are asynchronous copies: two in flight to the same bytes land in no defined order"),
                );
            }
        }
        for &y in &late {
            let sy = &self.stmts[y];
            if let Some(b) = sy
                .access
                .writes
                .iter()
                .find(|b| sx.access.reads.contains(*b) || sx.access.writes.contains(*b))
            {
                errors.push(
                    Diagnostic::error(
                        span,
                        format!(
                            "this stage-0 statement accesses `{b}`, which a later-stage statement writes"
                        ),
                    )
                    .with_note_at(self.body[y].span, "the later-stage statement")
                    .with_note("stage-0 statements run num_stages - 1 iterations ahead of it"),
                );
            }
        }
        errors
    }
}

/// The stage-0 candidates of [`LoopGraph::plan`]'s fixpoint, with what
/// [`LoopGraph::can_run_early`] asks of them kept per buffer (asking every statement would
/// make each question linear in the body, the fixpoint quadratic).
struct Candidates {
    is: Vec<bool>,
    /// Per buffer, the candidates writing it.
    writers: HashMap<String, BTreeSet<usize>>,
    /// Per buffer, how many late statements (neither candidates nor pure lets) write it.
    late_writers: HashMap<String, usize>,
}

impl Candidates {
    /// The global → shared copies, each proven to write an element once.
    fn new(g: &LoopGraph) -> Candidates {
        let is: Vec<bool> = g
            .stmts
            .iter()
            .map(|s| s.copy && !s.may_write_twice)
            .collect();
        let mut early = Candidates {
            is: vec![false; is.len()],
            writers: HashMap::new(),
            late_writers: HashMap::new(),
        };
        for (x, s) in g.stmts.iter().enumerate() {
            for b in &s.access.writes {
                if is[x] {
                    early.writers.entry(b.clone()).or_default().insert(x);
                } else if !s.pure_let {
                    *early.late_writers.entry(b.clone()).or_insert(0) += 1;
                }
            }
        }
        early.is = is;
        early
    }

    /// Makes candidate `x` late.
    fn demote(&mut self, g: &LoopGraph, x: usize) {
        self.is[x] = false;
        for b in &g.stmts[x].access.writes {
            if let Some(ys) = self.writers.get_mut(b) {
                ys.remove(&x);
            }
            if !g.stmts[x].pure_let {
                *self.late_writers.entry(b.clone()).or_insert(0) += 1;
            }
        }
    }
}

/// The graph of nearest dependencies (see [`LoopGraph`]): edges added target by target,
/// sources in body order, each with the reason the pairwise definition gives.
fn nearest_dependencies(stmts: &[StmtDeps]) -> DiGraph<usize, Dep> {
    let mut graph = DiGraph::new();
    let nodes: Vec<NodeIndex> = (0..stmts.len()).map(|i| graph.add_node(i)).collect();
    let mut last_writer: HashMap<&str, usize> = HashMap::new();
    // The statements that read a buffer since its last writer (a later writer waits for
    // them; a later reader does not).
    let mut read_since: HashMap<&str, Vec<usize>> = HashMap::new();
    let mut binders: HashMap<&str, Vec<usize>> = HashMap::new();
    for (j, s) in stmts.iter().enumerate() {
        let mut preds: Vec<usize> = Vec::new();
        for v in &s.uses {
            preds.extend(binders.get(v.as_str()).into_iter().flatten());
        }
        for b in &s.access.reads {
            preds.extend(last_writer.get(b.as_str()));
        }
        for b in &s.access.writes {
            preds.extend(last_writer.get(b.as_str()));
            preds.extend(read_since.get(b.as_str()).into_iter().flatten());
        }
        preds.sort_unstable();
        preds.dedup();
        for i in preds {
            if let Some(dep) = dependency(&stmts[i], s) {
                graph.add_edge(nodes[i], nodes[j], dep);
            }
        }
        for b in &s.access.writes {
            last_writer.insert(b, j);
            read_since.remove(b.as_str());
        }
        for b in s.access.reads.difference(&s.access.writes) {
            read_since.entry(b).or_default().push(j);
        }
        if let Some(v) = &s.defines {
            binders.entry(v).or_default().push(j);
        }
    }
    graph
}

/// The first dependency of `j` on `i` (`i` before `j`): the pairwise definition, of which
/// [`LoopGraph`] keeps the nearest.
pub fn dependency(i: &StmtDeps, j: &StmtDeps) -> Option<Dep> {
    if let Some(v) = &i.defines {
        if j.uses.contains(v) {
            return Some(Dep::Scalar(v.clone()));
        }
    }
    let (a, b) = (&i.access, &j.access);
    if let Some(x) = a.writes.iter().find(|x| b.reads.contains(*x)) {
        return Some(Dep::Raw(x.clone()));
    }
    if let Some(x) = a.reads.iter().find(|x| b.writes.contains(*x)) {
        return Some(Dep::War(x.clone()));
    }
    a.writes
        .iter()
        .find(|x| b.writes.contains(*x))
        .map(|x| Dep::Waw(x.clone()))
}

/// `T.copy(global, shared)`, or a `T.Parallel` nest that only stores into shared buffers and
/// only loads from global ones.
fn is_global_to_shared_copy(s: &Stmt, facts: &KernelFacts) -> bool {
    match &s.kind {
        StmtKind::Copy { src, dst } => {
            facts.globals.contains(&src.buffer.name) && facts.is_shared(&dst.buffer.name)
        }
        StmtKind::For(f) if f.kind == ForKind::Parallel => {
            let mut ok = true;
            let mut stores = 0;
            let mut loads = 0;
            for_each_stmt(std::slice::from_ref(s), &mut |x| {
                match &x.kind {
                    StmtKind::Store { buffer, .. } => {
                        stores += 1;
                        ok &= facts.is_shared(&buffer.name);
                    }
                    StmtKind::AtomicAdd { .. } => ok = false,
                    StmtKind::For(_)
                    | StmtKind::If { .. }
                    | StmtKind::Let { .. }
                    | StmtKind::Note(_) => {}
                    _ => ok = false,
                }
                for e in stmt_exprs(x) {
                    for_each_subexpr(e, &mut |e| {
                        if let ExprKind::Load { buffer, .. } = &e.kind {
                            loads += 1;
                            ok &= facts.globals.contains(buffer);
                        }
                    });
                }
            });
            ok && stores > 0 && loads > 0
        }
        _ => false,
    }
}

/// Why the let of `var` (its `access`es and the variables it `uses`) may not be evaluated
/// anywhere in the loop, with the value it has in place; `None` when it may (a pure let).
/// `defined`: the variables the body's lets bind, `pure` those found pure so far (lets
/// come in body order); `written`: the buffers the loop writes.
///
/// Its loads must read global or shared buffers (an index tensor; not per-thread storage,
/// which a producer thread would not hold) that the loop never writes: moved ahead of
/// statements of its iteration or into an earlier iteration, such a load reads the same
/// value. Loads the loop writes, or per-thread ones, keep the let (and what uses it) in
/// place.
fn impure_let(
    var: &str,
    access: &Access,
    uses: &BTreeSet<String>,
    (defined, pure): (&HashSet<String>, &HashSet<String>),
    written: &BTreeSet<String>,
    facts: &KernelFacts,
) -> Option<String> {
    if let Some(b) = access.reads.iter().find(|b| written.contains(*b)) {
        return Some(format!("`{var}` reads `{b}`, which the loop writes"));
    }
    if let Some(b) = access
        .reads
        .iter()
        .find(|b| !facts.globals.contains(*b) && !facts.is_shared(b))
    {
        return Some(format!(
            "`{var}` reads `{b}` ({}), not a global or shared index tensor",
            facts.scope_name(b)
        ));
    }
    uses.iter()
        .find(|u| defined.contains(*u) && !pure.contains(*u))
        .map(|u| format!("`{var}` uses `{u}`, which cannot be evaluated ahead either"))
}

/// Whether two regions of one buffer provably share no element: in some dimension their
/// starts differ by a constant at least the earlier one's (constant) extent.
fn disjoint_regions(a: &Region, b: &Region) -> bool {
    a.buffer.name == b.buffer.name
        && a.ranges.len() == b.ranges.len()
        && a.ranges.iter().zip(&b.ranges).any(|(ra, rb)| {
            match constant_difference(&rb.start, &ra.start) {
                Some(d) if d >= 0 => ra.extent.as_int().is_some_and(|e| d >= e),
                Some(d) => rb.extent.as_int().is_some_and(|e| -d >= e),
                None => false,
            }
        })
}

/// Whether the `T.Parallel` nest `f` writes each element at most once: one store per
/// buffer, whose indices determine every loop variable around it — each variable is, in
/// its own dimension, `offset + var` with an offset free of the nest's variables. Stage-0
/// stores become asynchronous copies, and two in flight to one element land in no defined
/// order (a nest that writes an element twice, or one that is not proven not to, stays in
/// the last stage).
fn writes_each_element_once(f: &For) -> bool {
    fn walk(body: &[Stmt], vars: &mut Vec<String>, seen: &mut HashSet<String>, ok: &mut bool) {
        for s in body {
            match &s.kind {
                StmtKind::For(f) => {
                    vars.push(f.var.name.clone());
                    walk(&f.body, vars, seen, ok);
                    vars.pop();
                }
                StmtKind::If {
                    then_body,
                    else_body,
                    ..
                } => {
                    walk(then_body, vars, seen, ok);
                    walk(else_body, vars, seen, ok);
                }
                StmtKind::Store {
                    buffer, indices, ..
                } => {
                    *ok &= seen.insert(buffer.name.clone()) && determines(indices, vars);
                }
                _ => {}
            }
        }
    }
    let mut vars = vec![f.var.name.clone()];
    let (mut seen, mut ok) = (HashSet::new(), true);
    walk(&f.body, &mut vars, &mut seen, &mut ok);
    ok
}

/// Whether `indices` determine every variable of `vars`: each has a dimension of its own
/// that is `offset + var` with an offset mentioning none of `vars`.
fn determines(indices: &[Expr], vars: &[String]) -> bool {
    let all: HashSet<String> = vars.iter().cloned().collect();
    let mut taken = vec![false; indices.len()];
    vars.iter().all(|v| {
        let dim = (0..indices.len()).find(|&d| {
            !taken[d] && unit_offset(&indices[d], v).is_some_and(|off| !mentions_any(&off, &all))
        });
        dim.map(|d| taken[d] = true).is_some()
    })
}
