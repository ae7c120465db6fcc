//! Grid-barrier rules (`T.sync_grid()`; docs/ir.md, "Grid barrier"):
//!
//! - Y2: `T.sync_grid()` sits directly in its kernel's body — or, at the thread level,
//!   directly in the body of a `threadIdx.*` binding loop that itself sits there (a nest of
//!   such loops counts) — never in a serial or parallel loop, a `while` or an `if`: every
//!   block must reach it the same number of times, or the blocks that reach it wait forever
//!   for those that do not.
//! - Y3: a kernel with `T.sync_grid()` has no thread-block cluster (its launch is a
//!   cooperative one, which the runtime makes without clusters).

use super::Checker;
use crate::diagnostic::Diagnostic;
use crate::ir::{ForKind, Kernel, Stmt, StmtKind};
use crate::visit::{child_bodies, for_each_stmt};

/// Whether `body` holds a `T.sync_grid()` anywhere.
pub fn has_grid_sync(body: &[Stmt]) -> bool {
    let mut found = false;
    for_each_stmt(body, &mut |s| found |= matches!(s.kind, StmtKind::GridSync));
    found
}

impl<'f> Checker<'f> {
    pub(super) fn grid_syncs(&mut self, k: &'f Kernel) {
        let mut misplaced = Vec::new();
        let mut any = false;
        walk(&k.body, &mut any, &mut misplaced);
        for (at, why) in misplaced {
            let diag = Diagnostic::error(self.at(at), format!("`T.sync_grid()` inside {why}"))
                .with_note(
                    "a grid barrier waits for every block of the grid, so every block must reach \
                 it the same number of times: put it directly in the kernel body",
                );
            self.push(diag);
        }
        if any && k.cluster_size().is_some_and(|n| n > 1) {
            let at = k
                .cluster
                .first()
                .map_or(k.grid.first().map(|g| g.span), |c| Some(c.span));
            if let Some(at) = at {
                self.error(
                    at,
                    "a kernel with `T.sync_grid()` is launched cooperatively, without \
                     thread-block clusters: drop `cluster_dims`",
                );
            }
        }
    }
}

/// Walks a body where a grid barrier may sit (`any` records one), and collects the grid
/// barriers inside statements where none may, with what holds them.
fn walk(body: &[Stmt], any: &mut bool, misplaced: &mut Vec<(crate::span::Span, &'static str)>) {
    for s in body {
        match &s.kind {
            StmtKind::GridSync => *any = true,
            // A thread-binding loop is every thread of the block once: its body is still
            // reached once per block.
            StmtKind::For(f) if matches!(f.kind, ForKind::ThreadBinding(_)) => {
                walk(&f.body, any, misplaced)
            }
            _ => {
                let why = match &s.kind {
                    StmtKind::For(f) if f.kind == ForKind::Parallel => "a `T.Parallel` loop",
                    StmtKind::For(_) => "a loop",
                    StmtKind::While { .. } => "a `while` loop",
                    StmtKind::If { .. } => "an `if`",
                    _ => "a nested statement",
                };
                for child in child_bodies(s) {
                    for_each_stmt(child, &mut |x| {
                        if matches!(x.kind, StmtKind::GridSync) {
                            *any = true;
                            misplaced.push((x.span, why));
                        }
                    });
                }
            }
        }
    }
}
