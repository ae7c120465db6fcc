//! Row vectors in registers (`Layout::Rows`, chosen by `layout-inference` for the classes
//! of `analysis::rows`): element `r` of an `R`-element fragment `V` is held, at one slot,
//! by every thread that holds part of row `r` of the 2-D fragments `V` follows.
//!
//! - **Flat rows** (`T.rows_layout(V, cols=N)`, `G` threads per row from
//!   `analysis::rows::rows_of_flat`, `K = T / G` rows per round): thread `tx` holds rows
//!   `s K + tx / G` at slot `s` (`G = T`: every row, slot `r`). A flat `R x N` fragment's
//!   slot `it` is then at row slot `it / (N / T)` (`G = T`) or `it` (`G < T`).
//! - **mma / wgmma rows**: thread `tx` holds rows `base + 16 mt (64 for wgmma) + lane / 4 +
//!   8 h` at slot `2 mt + h`, the rows of its accumulators (`mma_layout.rs`); an
//!   accumulator's slot `s = 4 (mt NT + nt) + q` is at row slot `2 (s / 4 NT) + (s % 4) / 2`.
//!
//! The threads holding a row are its *replicas*: lanes that differ in the bits of `masks`
//! (butterfly shuffles combine them) and, across warps, `cross` groups of warps (combined
//! through shared memory). Stores a row's replicas would all make to memory are made by
//! one of them, the *primary* (`primary`).

use super::mma_layout::MmaLayout;
use super::region::{thread_region, Mapping};
use crate::analysis::block::Block;
use crate::analysis::rows::rows_of_flat;
use crate::names::NameSet;
use tlc_ir::build::{bin, if_then};
// The mma.sync fragment's lanes: the instruction's layout is defined on a 32-lane warp.
use tlc_ir::target::WARP_SIZE;
use tlc_ir::{BinOp, Diagnostic, Expr, RowsOf, Span, Stmt, StmtKind};

/// The register layout of one row vector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RowsLayout {
    /// The vector's length `R`.
    pub rows: i64,
    pub threads: i64,
    pub kind: Kind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `G` threads per row, `cols` columns.
    Flat { group: i64, cols: i64 },
    /// The rows of an accumulator layout (`n` is not used).
    Acc(MmaLayout),
}

impl RowsLayout {
    /// The layout of a `rows`-element vector laid out as `of` in a block of `threads`
    /// threads; `None` when it does not fit (the message says why).
    pub fn new(of: RowsOf, rows: i64, threads: i64) -> Result<RowsLayout, String> {
        let kind = match of {
            RowsOf::Flat { cols } => match rows_of_flat(threads, cols) {
                Some(group) => Kind::Flat { group, cols },
                None => {
                    return Err(format!(
                        "rows of {cols} columns do not spread regularly over {threads} threads"
                    ))
                }
            },
            RowsOf::Mma { warps_m, warps_n } => {
                let l = MmaLayout {
                    m: rows,
                    n: 16 * warps_n,
                    warps_m,
                    warps_n,
                    wgmma: false,
                };
                if warps_m <= 0 || rows % (16 * warps_m) != 0 || l.threads() != threads {
                    return Err(format!(
                        "{rows} rows do not split over {warps_m} x {warps_n} warps of {threads} \
                         threads"
                    ));
                }
                Kind::Acc(l)
            }
            RowsOf::Wgmma {
                warpgroups_m,
                warpgroups_n,
            } => {
                let l = MmaLayout::wgmma(rows, 8 * warpgroups_n, warpgroups_m, warpgroups_n);
                if warpgroups_m <= 0 || rows % (64 * warpgroups_m) != 0 || l.threads() != threads {
                    return Err(format!(
                        "{rows} rows do not split over {warpgroups_m} x {warpgroups_n} \
                         warpgroups of {threads} threads"
                    ));
                }
                Kind::Acc(l)
            }
        };
        Ok(RowsLayout {
            rows,
            threads,
            kind,
        })
    }

    /// Rows per thread.
    pub fn slots(&self) -> i64 {
        match self.kind {
            Kind::Flat { group, .. } if group == self.threads => self.rows,
            Kind::Flat { group, .. } => {
                let k = self.threads / group;
                (self.rows + k - 1) / k
            }
            Kind::Acc(l) => 2 * l.tiles_m(),
        }
    }

    /// Whether some thread's slots run past the last row (flat rows, `R` not a multiple of
    /// `K`): those slots hold nothing.
    pub fn ragged(&self) -> bool {
        match self.kind {
            Kind::Flat { group, .. } if group < self.threads => {
                self.rows % (self.threads / group) != 0
            }
            _ => false,
        }
    }

    /// The row of slot `s` in thread `tx`.
    pub fn row(&self, s: i64, tx: &Expr) -> Expr {
        match self.kind {
            Kind::Flat { group, .. } if group == self.threads => Expr::int(s),
            Kind::Flat { group, .. } => bin(
                BinOp::Add,
                Expr::int(s * (self.threads / group)),
                bin(BinOp::FloorDiv, tx.clone(), Expr::int(group)),
            ),
            Kind::Acc(l) => {
                let (base, _, step) = l.bases(tx);
                let lane = bin(BinOp::FloorMod, tx.clone(), Expr::int(WARP_SIZE));
                [
                    base,
                    Expr::int((s / 2) * step + 8 * (s % 2)),
                    bin(BinOp::FloorDiv, lane, Expr::int(4)),
                ]
                .into_iter()
                .reduce(|a, b| bin(BinOp::Add, a, b))
                .unwrap_or_else(|| Expr::int(0))
            }
        }
    }

    /// The row slot of the element at slot `slot` of a 2-D fragment this vector follows:
    /// `tiles_n` is that fragment's `NT` when it has an accumulator layout.
    pub fn slot_of(&self, slot: &Expr, tiles_n: i64) -> Expr {
        match self.kind {
            Kind::Flat { group, cols } if group == self.threads => bin(
                BinOp::FloorDiv,
                slot.clone(),
                Expr::int(cols / self.threads),
            ),
            Kind::Flat { .. } => slot.clone(),
            Kind::Acc(_) => bin(
                BinOp::Add,
                bin(
                    BinOp::Mul,
                    bin(BinOp::FloorDiv, slot.clone(), Expr::int(4 * tiles_n)),
                    Expr::int(2),
                ),
                bin(
                    BinOp::FloorDiv,
                    bin(BinOp::FloorMod, slot.clone(), Expr::int(4)),
                    Expr::int(2),
                ),
            ),
        }
    }

    /// The slots of a 2-D fragment (`tiles_n` as for `slot_of`; `per_row` its elements per
    /// row and thread for flat rows) that hold row slot `s`.
    pub fn source_slots(&self, s: i64, tiles_n: i64) -> Vec<i64> {
        match self.kind {
            Kind::Flat { group, cols } if group == self.threads => {
                let m = cols / self.threads;
                (0..m).map(|k| s * m + k).collect()
            }
            Kind::Flat { .. } => vec![s],
            Kind::Acc(_) => {
                let (mt, h) = (s / 2, s % 2);
                (0..tiles_n)
                    .flat_map(|nt| (0..2).map(move |v| 4 * (mt * tiles_n + nt) + 2 * h + v))
                    .collect()
            }
        }
    }

    /// The lane offsets whose butterfly combines a row's replicas within a warp.
    pub fn masks(&self) -> Vec<i64> {
        let within = match self.kind {
            Kind::Flat { group, .. } => group.min(32),
            Kind::Acc(_) => 4,
        };
        let mut out = Vec::new();
        let mut m = within / 2;
        while m >= 1 {
            out.push(m);
            m /= 2;
        }
        out
    }

    /// How many warp groups hold each row (combined through shared memory), and which of
    /// them thread `tx`'s warp is.
    pub fn cross(&self, tx: &Expr) -> (i64, Expr) {
        let warp = bin(BinOp::FloorDiv, tx.clone(), Expr::int(WARP_SIZE));
        match self.kind {
            Kind::Flat { group, .. } if group > 32 => (
                group / WARP_SIZE,
                bin(
                    BinOp::FloorDiv,
                    bin(BinOp::FloorMod, tx.clone(), Expr::int(group)),
                    Expr::int(32),
                ),
            ),
            Kind::Flat { .. } => (1, Expr::int(0)),
            Kind::Acc(l) if l.wgmma => {
                let gm = l.warps_m / 4;
                (
                    l.warps_n,
                    bin(
                        BinOp::FloorDiv,
                        bin(BinOp::FloorDiv, warp, Expr::int(4)),
                        Expr::int(gm),
                    ),
                )
            }
            Kind::Acc(l) => (l.warps_n, bin(BinOp::FloorDiv, warp, Expr::int(l.warps_m))),
        }
    }

    /// Whether `tx` is the first lane of its replicas within its warp (the lane that writes
    /// the warp's value to shared memory).
    pub fn lane_leader(&self, tx: &Expr) -> Expr {
        let width = match self.kind {
            Kind::Flat { group, .. } => group.min(32),
            Kind::Acc(_) => 4,
        };
        bin(
            BinOp::Eq,
            bin(BinOp::FloorMod, tx.clone(), Expr::int(width)),
            Expr::int(0),
        )
    }

    /// Whether `tx` is the primary replica of its rows: the lane leader of the first warp
    /// group.
    pub fn primary(&self, tx: &Expr) -> Expr {
        let (count, index) = self.cross(tx);
        let lead = self.lane_leader(tx);
        if count == 1 {
            lead
        } else {
            bin(BinOp::And, lead, bin(BinOp::Eq, index, Expr::int(0)))
        }
    }
}

/// The region over a vector's rows: each thread runs `body` once per slot (unrolled), with
/// the row as the one index and the slot (`if row < R` where slots run past the end).
/// Every store `is_register` says is not to a register array is made by the primary
/// replica only — so a body that reads back a memory buffer it stores into is refused
/// (the other replicas would read the element before the primary's store lands: a race).
pub(crate) fn build(
    layout: &RowsLayout,
    block: &Block,
    span: Span,
    names: &mut NameSet,
    is_register: &dyn Fn(&str) -> bool,
    body: impl Fn(&Mapping) -> Vec<Stmt>,
) -> Result<Stmt, Vec<Diagnostic>> {
    let tx = names.fresh(block.index_base());
    let txe = Expr::var(&tx);
    let primary = layout.primary(&txe);
    let mut stmts = Vec::new();
    for s in 0..layout.slots() {
        let row = layout.row(s, &txe);
        let mut inner = body(&Mapping {
            indices: vec![row.clone()],
            slot: Expr::int(s),
        });
        // Every slot's copy shares the region's scope: a loop or let of the body (the
        // strided fold's `jj` of `lower-reductions`) is bound once per copy.
        if s > 0 {
            crate::names::freshen(&mut inner, names);
        }
        let replicated = !layout.masks().is_empty() || layout.cross(&txe).0 > 1;
        if let Some(b) = memory_read_back(&inner, is_register).filter(|_| replicated) {
            return Err(vec![Diagnostic::error(
                span,
                format!(
                    "this nest stores into `{b}` and reads it back, while its row vectors are held by several threads of which one stores: not lowered"
                ),
            )
            .with_note(format!(
                "the other threads would read `{b}` before that store lands; compute the value into a fragment and copy it to `{b}` in a statement of its own"
            ))]);
        }
        guard_stores(&mut inner, &primary, is_register, span);
        if layout.ragged() {
            inner = vec![if_then(
                bin(BinOp::Lt, row, Expr::int(layout.rows)),
                inner,
                span,
            )];
        }
        stmts.extend(inner);
    }
    Ok(thread_region(block, &tx, stmts, span, names))
}

/// A memory buffer (not a register array) that `body` both stores into and loads from.
fn memory_read_back(body: &[Stmt], is_register: &dyn Fn(&str) -> bool) -> Option<String> {
    let mut stored = std::collections::BTreeSet::new();
    tlc_ir::visit::for_each_stmt(body, &mut |s| {
        if let StmtKind::Store { buffer, .. } = &s.kind {
            if !is_register(&buffer.name) {
                stored.insert(buffer.name.clone());
            }
        }
    });
    let mut found = None;
    tlc_ir::visit::for_each_stmt(body, &mut |s| {
        for e in tlc_ir::visit::stmt_exprs(s) {
            tlc_ir::visit::for_each_subexpr(e, &mut |e| {
                if let tlc_ir::ExprKind::Load { buffer, .. } = &e.kind {
                    if found.is_none() && stored.contains(buffer) {
                        found = Some(buffer.clone());
                    }
                }
            });
        }
    });
    found
}

/// Puts every store to memory (not a register array) and every atomic under `primary`.
fn guard_stores(body: &mut [Stmt], primary: &Expr, is_register: &dyn Fn(&str) -> bool, span: Span) {
    for s in body.iter_mut() {
        let memory = match &s.kind {
            StmtKind::Store { buffer, .. } => !is_register(&buffer.name),
            StmtKind::AtomicAdd { .. } => true,
            _ => false,
        };
        if memory {
            let stmt = std::mem::replace(s, Stmt::new(StmtKind::Barrier, span));
            *s = if_then(primary.clone(), vec![stmt], span);
            continue;
        }
        for child in tlc_ir::visit::child_bodies_mut(s) {
            guard_stores(child, primary, is_register, span);
        }
    }
}
