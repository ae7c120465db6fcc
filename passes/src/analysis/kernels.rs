//! The kernels of a function and the shape of their bodies: one way to find every
//! `T.Kernel` (`for_each_kernel`, `kernels`), and the structural facts passes ask of a body
//! (SIMT regions, the merged thread loop, pipelined loops, tile ops left).

use tlc_ir::visit::{child_bodies, child_bodies_mut, for_each_stmt};
use tlc_ir::{ForKind, Kernel, Span, Stmt, StmtKind, ThreadTag};

/// Calls `f` on every kernel of `body` (wherever it is nested; kernels do not nest), with
/// the span of its statement.
pub fn for_each_kernel(body: &mut [Stmt], f: &mut dyn FnMut(&mut Kernel, Span)) {
    for stmt in body {
        let span = stmt.span;
        if let StmtKind::Kernel(k) = &mut stmt.kind {
            f(k, span);
        } else {
            for child in child_bodies_mut(stmt) {
                for_each_kernel(child, f);
            }
        }
    }
}

/// Every kernel of `body` with the span of its statement, in program order.
pub fn kernels(body: &[Stmt]) -> Vec<(&Kernel, Span)> {
    let mut out = Vec::new();
    for_each_stmt(body, &mut |s| {
        if let StmtKind::Kernel(k) = &s.kind {
            out.push((k, s.span));
        }
    });
    out
}

/// A SIMT region: a loop bound to a `threadIdx.*` index.
pub fn is_thread_region(stmt: &Stmt) -> bool {
    matches!(&stmt.kind, StmtKind::For(f) if matches!(f.kind,
        ForKind::ThreadBinding(ThreadTag::ThreadX | ThreadTag::ThreadY | ThreadTag::ThreadZ)))
}

/// Whether `body` holds a SIMT region.
pub fn contains_thread_region(body: &[Stmt]) -> bool {
    let mut found = false;
    for_each_stmt(body, &mut |s| found |= is_thread_region(s));
    found
}

/// Whether `body` holds a loop bound to any hardware index (written at the thread level).
pub fn contains_binding_loop(body: &[Stmt]) -> bool {
    let mut found = false;
    for_each_stmt(
        body,
        &mut |s| {
            found |=
                matches!(&s.kind, StmtKind::For(f) if matches!(f.kind, ForKind::ThreadBinding(_)))
        },
    );
    found
}

/// Whether `body` is one SIMT region: a kernel body after `thread-binding` merged its
/// regions, whose statements are then the kernel's top level.
pub fn is_merged(body: &[Stmt]) -> bool {
    matches!(body, [s] if is_thread_region(s))
}

/// The top-level statements of a merged kernel body: the body of its thread loop, or of
/// the innermost loop of its thread nest (up to `depth` binding loops, one per block
/// dimension; the nest's let of the linear index comes first). `None` when `body` is not
/// merged.
pub fn merged_top_mut(body: &mut Vec<Stmt>, depth: usize) -> Option<&mut Vec<Stmt>> {
    // How many loops to enter, found first (a mutable walk cannot stop halfway).
    let mut levels = 0;
    let mut at: &[Stmt] = body;
    while levels < depth && is_merged(at) {
        let Some(StmtKind::For(f)) = at.first().map(|s| &s.kind) else {
            break;
        };
        at = &f.body;
        levels += 1;
    }
    if levels == 0 {
        return None;
    }
    let mut top = Some(body);
    for _ in 0..levels {
        top = top.and_then(|b| match b.first_mut().map(|s| &mut s.kind) {
            Some(StmtKind::For(f)) => Some(&mut f.body),
            _ => None,
        });
    }
    top
}

/// Whether `body` holds a tile op or a `T.Parallel` loop (work for `lower-tile-ops`).
pub fn contains_tile_ops(body: &[Stmt]) -> bool {
    let mut found = false;
    for_each_stmt(body, &mut |s| match &s.kind {
        StmtKind::Copy { .. } | StmtKind::Fill { .. } | StmtKind::Gemm(_) | StmtKind::Reduce(_) => {
            found = true
        }
        StmtKind::For(f) if f.kind == ForKind::Parallel => found = true,
        _ => {}
    });
    found
}

/// Whether `body` contains a pipelined loop.
pub fn contains_pipelined(body: &[Stmt]) -> bool {
    body.iter().any(|s| {
        matches!(&s.kind, StmtKind::For(f) if matches!(f.kind, ForKind::Pipelined { .. }))
            || child_bodies(s).into_iter().any(|c| contains_pipelined(c))
    })
}
