//! Which buffers code reads and writes: by name for whole statements (`Access`, the
//! dependence graph of `pipeline-planning`, live ranges of `plan-shared-memory`), the number
//! of places each buffer is used (`count_sites`), and every element access with its indices
//! (`element_accesses`). Intrinsics count through their definitions' effects
//! (`tlc_ir::intrinsic`): `T.cp_async` writes its destination and reads its source, …

use std::collections::{BTreeSet, HashMap};
use tlc_ir::visit::{for_each_stmt, for_each_subexpr, stmt_exprs};
use tlc_ir::{Expr, ExprKind, Region, Stmt, StmtKind};

/// Whether `F[indices]`, `F` of constant `shape`, inside a `T.Parallel` nest of `vars` over
/// `extents` (constants where known) touches element for element the nest's iteration:
/// its indices are the nest's variables in order, after dropping the dimensions of extent 1
/// on both sides (a unit dimension of `F` is indexed by `0` or by a unit variable). Then the
/// flat index of the iteration is the flat index of the element, which is what lets
/// `lower-tile-ops` serve the access from the thread's own registers (`F[j]` in a
/// `T.Parallel(1, N)` nest over an `(N,)` fragment included); `stage-fragment-reads` stages
/// every other fragment read.
pub fn element_for_element(
    shape: &[i64],
    indices: &[Expr],
    vars: &[String],
    extents: &[Option<i64>],
) -> bool {
    if shape.len() != indices.len() || vars.len() != extents.len() {
        return false;
    }
    let unit_var = |name: &str| {
        vars.iter()
            .zip(extents)
            .any(|(v, e)| v == name && *e == Some(1))
    };
    let mut own: Vec<&str> = Vec::new();
    let mut own_shape: Vec<i64> = Vec::new();
    for (&d, i) in shape.iter().zip(indices) {
        match (&i.kind, d) {
            (ExprKind::Var(v), _) if d != 1 => {
                own.push(v);
                own_shape.push(d);
            }
            (ExprKind::Int(0), 1) => {}
            (ExprKind::Var(v), 1) if unit_var(v) => {}
            _ => return false,
        }
    }
    let nest: Vec<(&str, i64)> = vars
        .iter()
        .zip(extents)
        .filter(|(_, e)| **e != Some(1))
        .map(|(v, e)| (v.as_str(), e.unwrap_or(-1)))
        .collect();
    nest.len() == own.len()
        && nest
            .iter()
            .zip(own.iter().zip(&own_shape))
            .all(|((v, e), (w, d))| v == w && e == d)
}

/// The buffers some code reads and writes, by name (nested statements included; intrinsics
/// count: `T.cp_async` writes its destination and reads its source, `T.ldmatrix` reads its
/// source, `T.mma_sync` reads and writes its accumulator).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Access {
    pub reads: BTreeSet<String>,
    pub writes: BTreeSet<String>,
}

impl Access {
    fn add_expr(&mut self, e: &Expr) {
        for_each_subexpr(e, &mut |s| {
            if let ExprKind::Load { buffer, .. } = &s.kind {
                self.reads.insert(buffer.clone());
            }
        });
    }

    fn add_region_read(&mut self, r: &Region) {
        self.reads.insert(r.buffer.name.clone());
    }

    /// The accesses `stmt` makes itself (nested statements excluded).
    pub fn add_stmt(&mut self, stmt: &Stmt) {
        for e in stmt_exprs(stmt) {
            self.add_expr(e);
        }
        match &stmt.kind {
            StmtKind::Store { buffer, .. } => {
                self.writes.insert(buffer.name.clone());
            }
            StmtKind::AllReduce(r) => {
                self.writes.insert(r.buffer.name.clone());
                // The steps between warps write and read the scratch.
                if let Some(s) = &r.scratch {
                    self.reads.insert(s.name.clone());
                    self.writes.insert(s.name.clone());
                }
            }
            // A read-modify-write of the element.
            StmtKind::AtomicAdd { buffer, .. } => {
                self.reads.insert(buffer.name.clone());
                self.writes.insert(buffer.name.clone());
            }
            StmtKind::Reduce(r) => {
                self.reads.insert(r.src.name.clone());
                // `clear=False` folds into what `dst` holds.
                if !r.clear {
                    self.reads.insert(r.dst.name.clone());
                }
                self.writes.insert(r.dst.name.clone());
            }
            StmtKind::Copy { src, dst } => {
                self.add_region_read(src);
                self.writes.insert(dst.buffer.name.clone());
            }
            StmtKind::Fill { dst, .. } => {
                self.writes.insert(dst.buffer.name.clone());
            }
            StmtKind::Gemm(g) => {
                self.add_region_read(&g.a);
                self.add_region_read(&g.b);
                self.add_region_read(&g.c);
                self.writes.insert(g.c.buffer.name.clone());
            }
            StmtKind::Intrinsic(i) => {
                for a in i.accesses() {
                    let name = &a.operand.buffer.name;
                    if a.effect.reads() {
                        self.reads.insert(name.clone());
                    }
                    if a.effect.writes() {
                        self.writes.insert(name.clone());
                    }
                }
            }
            _ => {}
        }
    }

    /// Every access of `body`, nested statements included.
    pub fn of_body(body: &[Stmt]) -> Access {
        let mut acc = Access::default();
        for_each_stmt(body, &mut |s| acc.add_stmt(s));
        acc
    }
}

/// Per buffer, the number of places in `body` that access it (loads, stores, regions,
/// intrinsic operands).
pub fn count_sites(body: &[Stmt]) -> HashMap<String, usize> {
    let mut sites: HashMap<String, usize> = HashMap::new();
    let mut add = |b: &str| *sites.entry(b.to_string()).or_insert(0) += 1;
    for_each_stmt(body, &mut |s| {
        for e in stmt_exprs(s) {
            for_each_subexpr(e, &mut |x| {
                if let ExprKind::Load { buffer, .. } = &x.kind {
                    add(buffer);
                }
            });
        }
        match &s.kind {
            StmtKind::Store { buffer, .. } | StmtKind::AtomicAdd { buffer, .. } => {
                add(&buffer.name)
            }
            StmtKind::AllReduce(r) => {
                add(&r.buffer.name);
                if let Some(s) = &r.scratch {
                    add(&s.name);
                }
            }
            StmtKind::Reduce(r) => {
                add(&r.src.name);
                add(&r.dst.name);
            }
            StmtKind::Copy { src, dst } => {
                add(&src.buffer.name);
                add(&dst.buffer.name);
            }
            StmtKind::Fill { dst, .. } => add(&dst.buffer.name),
            StmtKind::Gemm(g) => {
                for r in [&g.a, &g.b, &g.c] {
                    add(&r.buffer.name);
                }
            }
            StmtKind::Intrinsic(i) => {
                for op in i.operands() {
                    add(&op.buffer.name);
                }
            }
            _ => {}
        }
    });
    sites
}

/// Per buffer, the access sites ([`count_sites`]) of a statement list from the statement at
/// hand on: counted once for the list and moved past one statement at a time, so a pass
/// that asks at every statement of a list does linear work, not the rest of the list at
/// each statement.
pub struct SitesFrom {
    sites: HashMap<String, usize>,
}

impl SitesFrom {
    /// At the first statement of `list`.
    pub fn new(list: &[Stmt]) -> SitesFrom {
        SitesFrom {
            sites: count_sites(list),
        }
    }

    /// The sites from the statement at hand to the end of the list.
    pub fn sites(&self) -> &HashMap<String, usize> {
        &self.sites
    }

    /// Moves past the statement at hand, whose sites are `here` (`count_sites` of it as the
    /// list had it).
    pub fn pass(&mut self, here: &HashMap<String, usize>) {
        for (b, c) in here {
            if let Some(n) = self.sites.get_mut(b) {
                *n = n.saturating_sub(*c);
                if *n == 0 {
                    self.sites.remove(b);
                }
            }
        }
    }
}

/// Every element access of `body` (stores, then the loads of each statement, in order):
/// buffer name and indices.
pub fn element_accesses(body: &[Stmt]) -> Vec<(String, Vec<Expr>)> {
    let mut out = Vec::new();
    for_each_stmt(body, &mut |s| {
        if let StmtKind::Store {
            buffer, indices, ..
        } = &s.kind
        {
            out.push((buffer.name.clone(), indices.clone()));
        }
        for e in stmt_exprs(s) {
            for_each_subexpr(e, &mut |x| {
                if let ExprKind::Load { buffer, indices } = &x.kind {
                    out.push((buffer.clone(), indices.clone()));
                }
            });
        }
    });
    out
}
