//! Row vectors: which 1-D fragments can live in registers as the rows of a 2-D fragment
//! (`tlc_ir::Layout::Rows`), so that a `T.reduce_*` along the rows of that fragment
//! combines registers with warp shuffles and a `T.Parallel` nest reads `V[i]` from a
//! register — no shared round trip for either.
//!
//! A *class* is a set of 1-D fragments of one length `R` that are used together; its
//! *anchors* are the 2-D `R x N` fragments whose rows they follow. A class is a row-vector
//! class when **every** use of every member is one of:
//!
//! - `T.reduce_*(F, V, dim=1)` (or `dim=-1`) with `F` a 2-D `R x N` fragment (an anchor);
//! - a read `V[i]` in a `T.Parallel(R, N)` nest over `i, j` that touches an anchor
//!   element for element (`F[i, j]`) and does not write `V` (the broadcast), or that
//!   touches no fragment at all (it spreads over the threads like a flat `R x N` fragment:
//!   the class then needs flat anchors, so no gemm may accumulate into that shape);
//! - `V[i]` in a `T.Parallel(R)` nest whose fragments are all members (per-row scalars:
//!   every thread holding a row computes it, stores elsewhere are made by one of them);
//! - `T.fill` / `T.clear` of `V`, `T.copy` of the whole of `V` to or from a buffer that is
//!   not a fragment, or to or from the whole of another member;
//!
//! it is broadcast somewhere, all its anchors (and fragment-free nests) have one shape
//! `R x N` (or are gemm accumulators of `R` rows split by rows only, `FullRow`, of any
//! widths), its members have 16- or 32-bit dtypes (what a shuffle moves), the block is whole
//! warps, and either every anchor is a gemm accumulator or tied to one element for element
//! by a nest (both always get an accumulator layout, whose rows always serve: DeepGEMM's
//! `C_accum` of a 112-wide tile) or registers pay on the flat layout
//! (`worth_registers`: the rows spread regularly — `N` a multiple of the thread count `T`,
//! or a divisor of it that is a power of two up to 32 or a multiple of 32, `rows_of_flat` —
//! and no thread holds just one element of each of several block-wide rows). Everything else
//! keeps the shared-memory lowering (`lower-reductions`, `stage-fragment-reads`), which
//! works for any layout. `layout-inference` gives each class the rows layout of its
//! anchors' layout; `lower-tile-ops` lowers what `lower-reductions` and
//! `stage-fragment-reads` left for registers.

use super::access::element_for_element;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use tlc_ir::verifier::const_int;
use tlc_ir::visit::{child_bodies, for_each_stmt, for_each_subexpr, stmt_exprs};
use tlc_ir::{
    BufferDecl, Expr, ExprKind, For, ForKind, Kernel, Region, Scope, Stmt, StmtKind, WarpPolicy,
};

/// The row-vector classes of one kernel.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RowVectors {
    pub classes: Vec<RowClass>,
}

/// One class: its members, its anchors and their shape.
#[derive(Clone, Debug, PartialEq)]
pub struct RowClass {
    pub members: BTreeSet<String>,
    /// The fragments whose rows the members follow (possibly none, see `flat_nests`).
    pub anchors: BTreeSet<String>,
    /// Members are also broadcast in `T.Parallel(R, N)` nests that cover no fragment: those
    /// spread over the threads as a flat `R x N` fragment would, so the class needs the
    /// flat layout's rows.
    pub flat_nests: bool,
    pub rows: i64,
    pub cols: i64,
}

impl RowVectors {
    /// Whether fragment `name` is a member of a row-vector class.
    pub fn contains(&self, name: &str) -> bool {
        self.class_of(name).is_some()
    }

    /// The class of member `name`.
    pub fn class_of(&self, name: &str) -> Option<&RowClass> {
        self.classes.iter().find(|c| c.members.contains(name))
    }

    /// The row-vector classes of kernel `k` with `threads` threads in warps of `warp`
    /// (the target's, `Target::warp_size`; see the module summary).
    pub fn of(k: &Kernel, threads: i64, warp: i64) -> RowVectors {
        let mut by_name: HashMap<&str, &BufferDecl> = HashMap::new();
        for b in &k.allocs {
            by_name.entry(b.name.name.as_str()).or_insert(b);
        }
        let mut cx = Uses {
            allocs: by_name,
            parent: BTreeMap::new(),
            anchors: BTreeMap::new(),
            flat: BTreeMap::new(),
            ties: Vec::new(),
            bad: BTreeSet::new(),
        };
        for b in &k.allocs {
            if let Some(r) = cx.vector_len(&b.name.name) {
                let shuffled = matches!(b.dtype.bytes(), 2 | 4);
                if r > 0 && shuffled {
                    cx.parent.insert(b.name.name.clone(), b.name.name.clone());
                }
            }
        }
        if cx.parent.is_empty() || threads <= 0 || warp <= 0 || threads % warp != 0 {
            return RowVectors::default();
        }
        cx.body(&k.body);
        // Group by class root.
        let names: Vec<String> = cx.parent.keys().cloned().collect();
        let mut groups: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for n in names {
            let root = cx.find(&n);
            groups.entry(root).or_default().insert(n);
        }
        let accumulators = gemm_accumulators(k);
        let laid_out_like_one = laid_out_like_accumulators(&accumulators, &cx.ties);
        let mut classes = Vec::new();
        for members in groups.into_values() {
            if members.iter().any(|m| cx.bad.contains(m)) {
                continue;
            }
            let anchors: BTreeSet<String> = members
                .iter()
                .flat_map(|m| cx.anchors.get(m).cloned().unwrap_or_default())
                .collect();
            let flat: BTreeSet<[i64; 2]> = members
                .iter()
                .flat_map(|m| cx.flat.get(m).cloned().unwrap_or_default())
                .collect();
            let mut shapes: BTreeSet<[i64; 2]> =
                anchors.iter().filter_map(|a| cx.matrix(a)).collect();
            shapes.extend(flat.iter().copied());
            let shapes: Vec<[i64; 2]> = shapes.into_iter().collect();
            // Gemm accumulators split along one dimension only, all by the same policy:
            // `FullRow` (every warp, or warpgroup, holds whole rows) or `FullCol` (every
            // warp holds a column strip of every row) puts the units in a `U x 1` or
            // `1 x U` grid whatever the widths (`analysis::block::unit_grid`), so their
            // rows layouts are the same.
            let one_dim_policy =
                |p: &WarpPolicy| matches!(p, WarpPolicy::FullRow | WarpPolicy::FullCol);
            // ... as long as every warp fits along the policy's dimension (or wgmma, whose
            // partition has no fallback, may take the gemm). Where it does not, mma.sync's
            // partition falls back to a two-dimensional grid that depends on the width
            // (`analysis::mma::one_dim_fallback`, TileLang's): the anchors then share rows
            // only when they share that grid. (`layout-inference` refuses a class whose
            // anchors end up laid out differently, located.)
            let warps = threads / warp;
            let wgmma_may_take = |policy: WarpPolicy, [m, n]: [i64; 2]| {
                warps % 4 == 0
                    && super::wgmma::warpgroup_partition(policy, warps / 4, m, n).is_some()
            };
            let one_dim_grid = |a: &String| match (accumulators.get(a), cx.matrix(a)) {
                (Some(&p), Some(shape)) if wgmma_may_take(p, shape) => true,
                (Some(WarpPolicy::FullRow), Some([m, _])) => m % (16 * warps) == 0,
                (Some(WarpPolicy::FullCol), Some([_, n])) => n % (8 * warps) == 0,
                _ => false,
            };
            let fallback_grid = |a: &String| {
                let (policy, [m, n]) = (*accumulators.get(a)?, cx.matrix(a)?);
                match one_dim_grid(a) {
                    true => None,
                    false => super::mma::warp_partition(policy, warps, m, n),
                }
            };
            let grids: BTreeSet<Option<(i64, i64)>> = anchors.iter().map(fallback_grid).collect();
            let one_fallback_grid = grids.len() == 1 && grids.iter().all(Option::is_some);
            let mut policies: Vec<WarpPolicy> = anchors
                .iter()
                .filter_map(|a| accumulators.get(a).copied())
                .filter(one_dim_policy)
                .collect();
            policies.dedup();
            let all_accumulators = flat.is_empty()
                && anchors.iter().all(|a| {
                    accumulators.get(a).is_some_and(one_dim_policy)
                        && (one_dim_grid(a) || one_fallback_grid)
                        && policies.len() == 1
                        || laid_out_like_one.contains(a) && shapes.len() == 1
                });
            // One shape — or gemm accumulators of one row count split along one dimension
            // by one policy, whatever their widths (flash attention's scores and output at
            // a head dim other than the key tile's; MLA's column-split 64 x 64 scores and
            // 64 x 512 output), whose rows layouts are then the same.
            let same_rows = shapes.windows(2).all(|w| w[0][0] == w[1][0]);
            let Some(first) = members.first() else {
                continue;
            };
            let (rows, cols) = match shapes.as_slice() {
                [[rows, cols]] => (*rows, *cols),
                [[rows, cols], ..] if all_accumulators && same_rows => (*rows, *cols),
                _ => continue,
            };
            if cx.vector_len(first) != Some(rows) {
                continue;
            }
            // Anchors that are all gemm accumulators get an accumulator layout, whose rows
            // always serve; any other anchor may stay flat, whose rows must spread
            // regularly and pay. Flat nests need flat anchors: none may be laid out like a
            // gemm accumulator of that shape (`layout-inference` checks the layouts it ends
            // up with).
            if !all_accumulators && !worth_registers(threads, rows, cols) {
                continue;
            }
            let accumulator_shapes: BTreeSet<[i64; 2]> =
                accumulators.keys().filter_map(|a| cx.matrix(a)).collect();
            if !flat.is_empty() && accumulator_shapes.contains(&[rows, cols]) {
                continue;
            }
            classes.push(RowClass {
                members,
                anchors,
                flat_nests: !flat.is_empty(),
                rows,
                cols,
            });
        }
        RowVectors { classes }
    }
}

/// Whether rows of `cols` over `threads` threads spread regularly (`rows_of_flat`) and the
/// register path pays: when every thread holds one element of every one of several rows
/// (`cols = threads`, `rows > 1`), each row costs a whole-warp butterfly and a shared step
/// for a single element per thread, while the shared path gives each row its own threads
/// (measured: the per-token FP8 cast, 8 x 128 at 128 threads, ran at 0.79x of a copy in
/// registers and 0.93x through shared memory, docs/perf.md).
fn worth_registers(threads: i64, rows: i64, cols: i64) -> bool {
    match rows_of_flat(threads, cols) {
        Some(g) if g == threads => rows == 1 || cols / threads >= 2,
        Some(_) => true,
        None => false,
    }
}

/// The gemm accumulators and the fragments tied to one element for element by a parallel
/// nest (DeepGEMM's promotion `C_accum[i, j] += C_block[i, j] * s[i]`), transitively:
/// `layout-inference` joins the fragments of a nest, so each gets its accumulator's layout
/// (whose rows always serve) whatever its width — where the flat layout's rows of a width
/// like 112 would not spread regularly.
fn laid_out_like_accumulators(
    accumulators: &BTreeMap<String, WarpPolicy>,
    ties: &[BTreeSet<String>],
) -> BTreeSet<String> {
    // Union-find over the fragments the ties name: one pass, then the classes that hold
    // an accumulator.
    let mut parent: BTreeMap<&str, &str> = BTreeMap::new();
    fn root<'a>(parent: &BTreeMap<&'a str, &'a str>, mut n: &'a str) -> &'a str {
        while let Some(&p) = parent.get(n) {
            if p == n {
                break;
            }
            n = p;
        }
        n
    }
    for t in ties {
        let mut members = t.iter().map(String::as_str);
        let Some(first) = members.next() else {
            continue;
        };
        let r = root(&parent, first);
        parent.entry(r).or_insert(r);
        for m in members {
            let rm = root(&parent, m);
            if rm != r {
                parent.insert(rm, r);
            }
        }
    }
    let held: BTreeSet<&str> = accumulators
        .keys()
        .map(|a| root(&parent, a.as_str()))
        .collect();
    let mut like: BTreeSet<String> = accumulators.keys().cloned().collect();
    like.extend(
        parent
            .keys()
            .filter(|f| held.contains(root(&parent, f)))
            .map(|f| f.to_string()),
    );
    like
}

/// The kernel's gemm accumulators, each with its warp policy (`Square` when two gemms with
/// different policies accumulate into it: not split by rows only).
fn gemm_accumulators(k: &Kernel) -> BTreeMap<String, WarpPolicy> {
    let mut out = BTreeMap::new();
    for_each_stmt(&k.body, &mut |s| {
        if let StmtKind::Gemm(g) = &s.kind {
            let policy = out.entry(g.c.buffer.name.clone()).or_insert(g.policy);
            if *policy != g.policy {
                *policy = WarpPolicy::Square;
            }
        }
    });
    out
}

/// How the rows of a flat `R x N` fragment spread over `T` threads, when they do so
/// regularly: `Some(G)`, the number of threads holding each row (consecutive, aligned, and
/// within a warp or whole warps), where each holds `N / G` elements of it.
pub fn rows_of_flat(threads: i64, cols: i64) -> Option<i64> {
    if threads <= 0 || cols <= 0 {
        return None;
    }
    if cols % threads == 0 {
        return Some(threads);
    }
    let small = cols <= 32 && (cols as u64).is_power_of_two();
    (threads % cols == 0 && (small || cols % 32 == 0)).then_some(cols)
}

/// The variables and constant extents of the directly nested parallel loops from `outer`
/// (a non-constant extent ends the nest), and the body inside them.
pub fn parallel_nest(outer: &For) -> (Vec<String>, Vec<i64>, &[Stmt]) {
    let mut vars = Vec::new();
    let mut extents = Vec::new();
    let mut f = outer;
    loop {
        let (Some(start), Some(stop)) = (const_int(&f.start), const_int(&f.stop)) else {
            return (vars, extents, &f.body);
        };
        vars.push(f.var.name.clone());
        extents.push(stop - start);
        match f.body.as_slice() {
            [Stmt {
                kind: StmtKind::For(inner),
                ..
            }] if inner.kind == ForKind::Parallel => f = inner,
            _ => return (vars, extents, &f.body),
        }
    }
}

/// The uses seen so far: a union-find over the candidates, each one's anchors, and the
/// candidates with a use that rules their class out.
struct Uses<'a> {
    /// The kernel's allocations by name (the first of a name, as a search in order finds):
    /// asked at every use, a search of the list was quadratic in a kernel's buffers.
    allocs: HashMap<&'a str, &'a BufferDecl>,
    parent: BTreeMap<String, String>,
    anchors: BTreeMap<String, BTreeSet<String>>,
    /// The shapes of the fragment-free nests each candidate is broadcast in.
    flat: BTreeMap<String, BTreeSet<[i64; 2]>>,
    /// The 2-D fragments each `T.Parallel(R, N)` nest touches element for element:
    /// `layout-inference` gives them one layout.
    ties: Vec<BTreeSet<String>>,
    bad: BTreeSet<String>,
}

impl Uses<'_> {
    fn decl(&self, name: &str) -> Option<&BufferDecl> {
        self.allocs.get(name).copied()
    }

    fn shape(&self, name: &str) -> Option<Vec<i64>> {
        let b = self.decl(name)?;
        if b.scope != Scope::Fragment {
            return None;
        }
        b.shape.iter().map(const_int).collect()
    }

    /// The length of 1-D fragment `name`.
    fn vector_len(&self, name: &str) -> Option<i64> {
        match self.shape(name)?.as_slice() {
            [r] => Some(*r),
            _ => None,
        }
    }

    /// The shape of 2-D fragment `name`.
    fn matrix(&self, name: &str) -> Option<[i64; 2]> {
        <[i64; 2]>::try_from(self.shape(name)?.as_slice()).ok()
    }

    fn is_candidate(&self, name: &str) -> bool {
        self.parent.contains_key(name)
    }

    fn find(&mut self, name: &str) -> String {
        let mut n = name.to_string();
        while let Some(p) = self.parent.get(&n) {
            if *p == n {
                break;
            }
            n = p.clone();
        }
        n
    }

    fn union(&mut self, a: &str, b: &str) {
        let (ra, rb) = (self.find(a), self.find(b));
        if ra != rb {
            self.parent.insert(ra, rb);
        }
    }

    fn anchor(&mut self, v: &str, f: &str) {
        self.anchors
            .entry(v.to_string())
            .or_default()
            .insert(f.to_string());
    }

    /// Marks every candidate `stmt`'s own expressions (not its children's) touch.
    fn taint_exprs(&mut self, stmt: &Stmt) {
        let mut hit = Vec::new();
        if let StmtKind::Store { buffer, .. } = &stmt.kind {
            hit.push(buffer.name.clone());
        }
        for e in stmt_exprs(stmt) {
            for_each_subexpr(e, &mut |x| {
                if let ExprKind::Load { buffer, .. } = &x.kind {
                    hit.push(buffer.clone());
                }
            });
        }
        for n in hit {
            if self.is_candidate(&n) {
                self.bad.insert(n);
            }
        }
    }

    fn body(&mut self, body: &[Stmt]) {
        for s in body {
            self.stmt(s);
        }
    }

    fn stmt(&mut self, s: &Stmt) {
        match &s.kind {
            StmtKind::Reduce(r) => {
                let (src, dst) = (r.src.name.as_str(), r.dst.name.as_str());
                if self.is_candidate(src) {
                    self.bad.insert(src.to_string());
                }
                if self.is_candidate(dst) {
                    let fits = self.matrix(src).is_some_and(|[m, _]| {
                        Some(m) == self.vector_len(dst) && r.axis(2) == Some(1)
                    });
                    if fits {
                        self.anchor(dst, src);
                    } else {
                        self.bad.insert(dst.to_string());
                    }
                }
            }
            StmtKind::Fill { dst, .. } => {
                if self.is_candidate(&dst.buffer.name) && !self.whole(dst) {
                    self.bad.insert(dst.buffer.name.clone());
                }
                self.taint_exprs(s);
            }
            StmtKind::Copy { src, dst } => {
                let (a, b) = (&src.buffer.name, &dst.buffer.name);
                if self.is_candidate(a) && self.is_candidate(b) {
                    // One row vector copied into another: one class.
                    if self.whole(src)
                        && self.whole(dst)
                        && self.vector_len(a) == self.vector_len(b)
                    {
                        self.union(a, b);
                    } else {
                        self.bad.insert(a.clone());
                        self.bad.insert(b.clone());
                    }
                } else {
                    for (mine, other, region) in [(a, b, src), (b, a, dst)] {
                        let fragment = self.decl(other).is_some_and(|d| d.scope == Scope::Fragment);
                        if self.is_candidate(mine) && (fragment || !self.whole(region)) {
                            self.bad.insert(mine.clone());
                        }
                    }
                }
                self.taint_exprs(s);
            }
            StmtKind::For(f) if f.kind == ForKind::Parallel => self.nest(f),
            _ => {
                self.taint_exprs(s);
                for c in child_bodies(s) {
                    self.body(c);
                }
            }
        }
    }

    /// Whether `r` is the whole of its (1-D candidate) buffer.
    fn whole(&self, r: &Region) -> bool {
        let Some(n) = self.vector_len(&r.buffer.name) else {
            return false;
        };
        matches!(r.ranges.as_slice(), [range] if const_int(&range.start) == Some(0)
            && const_int(&range.extent) == Some(n))
    }

    fn nest(&mut self, outer: &For) {
        let (vars, extents, inner) = parallel_nest(outer);
        // Every fragment access of the nest, and which fragments it writes.
        let mut accesses: Vec<(String, Vec<Expr>)> = Vec::new();
        let mut written: BTreeSet<String> = BTreeSet::new();
        for_each_stmt(inner, &mut |s| {
            if let StmtKind::Store {
                buffer, indices, ..
            } = &s.kind
            {
                written.insert(buffer.name.clone());
                accesses.push((buffer.name.clone(), indices.clone()));
            }
            for e in stmt_exprs(s) {
                for_each_subexpr(e, &mut |x| {
                    if let ExprKind::Load { buffer, indices } = &x.kind {
                        accesses.push((buffer.clone(), indices.clone()));
                    }
                });
            }
        });
        // The 2-D fragments the nest touches element for element (its anchors).
        let tied: BTreeSet<String> = match extents.as_slice() {
            [r, n] => {
                let consts = [Some(*r), Some(*n)];
                accesses
                    .iter()
                    .filter(|(name, idx)| {
                        self.matrix(name) == Some([*r, *n])
                            && element_for_element(&[*r, *n], idx, &vars, &consts)
                    })
                    .map(|(name, _)| name.clone())
                    .collect()
            }
            _ => BTreeSet::new(),
        };
        if tied.len() > 1 {
            self.ties.push(tied.clone());
        }
        // A parallel loop's bounds that are not constants: nothing here is a row use.
        let candidates: BTreeSet<String> = accesses
            .iter()
            .map(|(n, _)| n.clone())
            .filter(|n| self.is_candidate(n))
            .collect();
        if candidates.is_empty() {
            return;
        }
        let row_index = |indices: &[Expr], rows: i64| -> bool {
            match indices {
                [i] => match &i.kind {
                    ExprKind::Var(v) => vars.first() == Some(v),
                    ExprKind::Int(0) => rows == 1,
                    _ => false,
                },
                _ => false,
            }
        };
        let ok = match extents.as_slice() {
            // The broadcast: V[i] read beside anchors F[i, j].
            [r, n] => {
                let anchors = tied;
                let uses_ok = accesses
                    .iter()
                    .filter(|(name, _)| candidates.contains(name))
                    .all(|(name, idx)| {
                        self.vector_len(name) == Some(*r)
                            && row_index(idx, *r)
                            && !written.contains(name)
                    });
                let other_fragment = accesses.iter().any(|(name, _)| {
                    !candidates.contains(name)
                        && self.decl(name).is_some_and(|d| d.scope == Scope::Fragment)
                });
                if uses_ok && !anchors.is_empty() {
                    for v in &candidates {
                        for a in &anchors {
                            self.anchor(v, a);
                        }
                    }
                    true
                } else if uses_ok && !other_fragment {
                    // No fragment: the nest spreads like a flat `r x n` fragment.
                    for v in &candidates {
                        self.flat.entry(v.clone()).or_default().insert([*r, *n]);
                    }
                    true
                } else {
                    false
                }
            }
            // Per-row scalars: every fragment of the nest is a member.
            [r] => accesses.iter().all(|(name, idx)| {
                let fragment = self.decl(name).is_some_and(|d| d.scope == Scope::Fragment);
                !fragment
                    || (self.is_candidate(name)
                        && self.vector_len(name) == Some(*r)
                        && row_index(idx, *r))
            }),
            _ => false,
        };
        let list: Vec<String> = candidates.into_iter().collect();
        if ok {
            for w in list.windows(2) {
                self.union(&w[0], &w[1]);
            }
        } else {
            self.bad.extend(list);
        }
    }
}
