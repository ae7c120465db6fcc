//! Physical shared-memory layouts: after the ops are lowered, every access of a shared
//! buffer annotated `T.make_swizzled_layout(X, bytes=B)` is rewritten to the swizzled
//! address, and `T.make_padded_layout(X, pad=P)` widens the allocation's rows.
//!
//! The swizzle acts on the innermost two indices `(r, c)`: with `E` elements per 16-byte
//! chunk and `G = B / 16` chunks per group, chunk `q = c / E` moves to
//! `(q / G) * G + ((q % G) ^ ((r % 8) / (8 / G)))`; the element keeps its place in the
//! chunk. XOR is written with floordiv/floormod (`a ^ b = Σ ((a >> k) + (b >> k)) % 2 << k`)
//! so the simplifier and the interpreter see ordinary integer arithmetic.
//!
//! `T.make_wgmma_swizzled_layout(X, bytes=B)` is the same swizzle inside column panels `B`
//! bytes wide (`tlc_ir::Layout::WgmmaSwizzle`): with rows wider than `B` the row and the
//! column both move (`panel_position`); with rows exactly `B` wide it is the swizzle above.
//!
//! A vector access `c = base + v` (`v` a `T.vectorized` lane, `base` a multiple of the
//! vector width, which never exceeds a chunk) keeps its lanes adjacent: it becomes
//! `swizzle(r, base) + v`.

use crate::analysis::wgmma::Panels;
use std::collections::HashSet;
use tlc_ir::build::bin;
use tlc_ir::visit::{child_bodies_mut, map_expr};
use tlc_ir::{
    BinOp, BufferDecl, Expr, ExprKind, ForKind, Layout, LayoutAnnotation, Stmt, StmtKind,
};

/// Swizzle parameters of one buffer.
#[derive(Clone, Copy, Debug)]
struct Swz {
    /// Elements per 16-byte chunk.
    per_chunk: i64,
    /// Chunks per swizzle group (8, 4 or 2).
    group: i64,
    /// `T.make_wgmma_swizzled_layout` with rows wider than the span: the panels' geometry.
    panels: Option<Panels>,
}

fn swizzles(allocs: &[BufferDecl], layouts: &[LayoutAnnotation]) -> Vec<(String, Swz)> {
    layouts
        .iter()
        .filter_map(|ann| {
            let (Layout::Swizzle { bytes } | Layout::WgmmaSwizzle { bytes }) = ann.layout else {
                return None;
            };
            let b = allocs.iter().find(|b| b.name.name == ann.buffer.name)?;
            let size = i64::from(b.dtype.bytes());
            if size == 0 || b.shape.len() < 2 {
                return None;
            }
            // One panel is exactly the row-width XOR swizzle.
            let panels = match ann.layout {
                Layout::WgmmaSwizzle { .. } => Panels::of(b, bytes).filter(|p| p.cols != p.width()),
                _ => None,
            };
            Some((
                ann.buffer.name.clone(),
                Swz {
                    per_chunk: 16 / size,
                    group: bytes / 16,
                    panels,
                },
            ))
        })
        .collect()
}

/// `a ^ b` for values below `2^bits`.
fn xor(a: Expr, b: Expr, bits: u32) -> Expr {
    (0..bits)
        .map(|k| {
            let p = 1i64 << k;
            let bit = |e: &Expr| bin(BinOp::FloorDiv, e.clone(), Expr::int(p));
            bin(
                BinOp::Mul,
                bin(
                    BinOp::FloorMod,
                    bin(BinOp::Add, bit(&a), bit(&b)),
                    Expr::int(2),
                ),
                Expr::int(p),
            )
        })
        .reduce(|x, y| bin(BinOp::Add, x, y))
        .unwrap_or_else(|| Expr::int(0))
}

/// The physical column of element `(r, c)`.
fn column(s: Swz, r: &Expr, c: Expr) -> Expr {
    let bits = s.group.trailing_zeros();
    let chunk = bin(BinOp::FloorDiv, c.clone(), Expr::int(s.per_chunk));
    let within = bin(BinOp::FloorMod, c, Expr::int(s.per_chunk));
    let key = bin(
        BinOp::FloorDiv,
        bin(BinOp::FloorMod, r.clone(), Expr::int(8)),
        Expr::int(8 / s.group),
    );
    let moved = bin(
        BinOp::Add,
        bin(
            BinOp::Mul,
            bin(BinOp::FloorDiv, chunk.clone(), Expr::int(s.group)),
            Expr::int(s.group),
        ),
        xor(bin(BinOp::FloorMod, chunk, Expr::int(s.group)), key, bits),
    );
    bin(
        BinOp::Add,
        bin(BinOp::Mul, moved, Expr::int(s.per_chunk)),
        within,
    )
}

/// The physical `(row, column)` of element `(r, c)` of a panelled buffer: flat offset
/// `(c / W) R W + r W + column(r, c % W)` of the `R x C` slice (the layout's definition,
/// `tlc_ir::Layout::WgmmaSwizzle`).
fn panel_position(s: Swz, p: Panels, r: &Expr, c: Expr) -> (Expr, Expr) {
    let w = p.width();
    let flat = bin(
        BinOp::Add,
        bin(
            BinOp::Add,
            bin(
                BinOp::Mul,
                bin(BinOp::FloorDiv, c.clone(), Expr::int(w)),
                Expr::int(p.rows * w),
            ),
            bin(BinOp::Mul, r.clone(), Expr::int(w)),
        ),
        column(s, r, bin(BinOp::FloorMod, c, Expr::int(w))),
    );
    (
        bin(BinOp::FloorDiv, flat.clone(), Expr::int(p.cols)),
        bin(BinOp::FloorMod, flat, Expr::int(p.cols)),
    )
}

/// Rewrites the innermost two indices of one access.
fn physical(s: Swz, indices: &mut [Expr], lanes: &HashSet<String>) {
    let n = indices.len();
    if n < 2 {
        return;
    }
    let r = indices[n - 2].clone();
    let c = indices[n - 1].clone();
    // A vector access keeps its lanes adjacent: `c = base + v` moves as `base` does.
    let (base, lane) = match &c.kind {
        ExprKind::Binary(BinOp::Add, base, lane) if matches!(&lane.kind, ExprKind::Var(v) if lanes.contains(v)) => {
            ((**base).clone(), Some((**lane).clone()))
        }
        _ => (c, None),
    };
    let with_lane = |e: Expr| match &lane {
        Some(l) => bin(BinOp::Add, e, l.clone()),
        None => e,
    };
    match s.panels {
        None => indices[n - 1] = with_lane(column(s, &r, base)),
        Some(p) => {
            let (row, col) = panel_position(s, p, &r, base);
            indices[n - 2] = row;
            indices[n - 1] = with_lane(col);
        }
    }
}

/// Rewrites every access of a swizzled buffer in `body`.
pub(crate) fn apply(body: &mut [Stmt], allocs: &[BufferDecl], layouts: &[LayoutAnnotation]) {
    let table = swizzles(allocs, layouts);
    if table.is_empty() {
        return;
    }
    walk(body, &table, &mut HashSet::new());
}

fn lookup(table: &[(String, Swz)], name: &str) -> Option<Swz> {
    table.iter().find(|(n, _)| n == name).map(|&(_, s)| s)
}

fn rewrite_expr(e: &Expr, table: &[(String, Swz)], lanes: &HashSet<String>) -> Expr {
    map_expr(e, &mut |x| match x.kind {
        ExprKind::Load {
            buffer,
            mut indices,
        } => {
            if let Some(s) = lookup(table, &buffer) {
                physical(s, &mut indices, lanes);
            }
            Expr::new(ExprKind::Load { buffer, indices }, x.span)
        }
        kind => Expr::new(kind, x.span),
    })
}

fn walk(body: &mut [Stmt], table: &[(String, Swz)], lanes: &mut HashSet<String>) {
    for stmt in body {
        let mut added = None;
        match &mut stmt.kind {
            StmtKind::For(f) => {
                f.start = rewrite_expr(&f.start, table, lanes);
                f.stop = rewrite_expr(&f.stop, table, lanes);
                if f.kind == ForKind::Vectorized && lanes.insert(f.var.name.clone()) {
                    added = Some(f.var.name.clone());
                }
            }
            StmtKind::If { cond, .. } => *cond = rewrite_expr(cond, table, lanes),
            StmtKind::Let { value, .. } => *value = rewrite_expr(value, table, lanes),
            StmtKind::Store {
                buffer,
                indices,
                value,
            } => {
                *value = rewrite_expr(value, table, lanes);
                for i in indices.iter_mut() {
                    *i = rewrite_expr(i, table, lanes);
                }
                if let Some(s) = lookup(table, &buffer.name) {
                    physical(s, indices, lanes);
                }
            }
            StmtKind::Intrinsic(i) => {
                for e in i.exprs_mut() {
                    *e = rewrite_expr(e, table, lanes);
                }
                for op in i.operands_mut() {
                    if let Some(s) = lookup(table, &op.buffer.name) {
                        physical(s, &mut op.indices, lanes);
                    }
                }
            }
            // Tile ops and kernels do not survive lower-tile-ops; barriers hold no access.
            _ => {}
        }
        for child in child_bodies_mut(stmt) {
            walk(child, table, lanes);
        }
        if let Some(v) = added {
            lanes.remove(&v);
        }
    }
}

/// Widens the innermost dimension of each padded allocation.
pub(crate) fn pad_allocations(allocs: &mut [BufferDecl], layouts: &[LayoutAnnotation]) {
    for ann in layouts {
        let Layout::Padded { pad } = ann.layout else {
            continue;
        };
        if let Some(last) = allocs
            .iter_mut()
            .find(|b| b.name.name == ann.buffer.name)
            .and_then(|b| b.shape.last_mut())
        {
            *last = bin(BinOp::Add, last.clone(), Expr::int(pad));
        }
    }
}
