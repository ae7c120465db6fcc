//! The thread mapping every SIMT region shares. An op's element space (extents
//! `e0 … ek`, row-major, flat size `E`) is split into vectors of `V` elements along the
//! innermost dimension (`V = 1`: no vectors); vector number `f = it * T + tx` is done by
//! thread `tx` (the linear thread index of a multi-dimensional block, see
//! `analysis::block`) in iteration `it` of a serial loop of `ceil(E / (T * V))` trips, under
//! `if f < E / V:` when `T * V` does not divide `E`. Each element-space index is `f`
//! decomposed row-major (`f // (e1 … ek) % e0 …`), the innermost one times `V` plus the
//! vector lane `v`.

use crate::analysis::block::Block;
use crate::names::NameSet;
use tlc_ir::build::{bin, for_loop};
use tlc_ir::verifier::const_int;
use tlc_ir::visit::has_load;
use tlc_ir::{BinOp, Expr, ForKind, Span, Stmt, StmtKind};

/// The per-element view of a region handed to the op that fills its body.
pub(crate) struct Mapping {
    /// One index per element-space dimension.
    pub indices: Vec<Expr>,
    /// The serial iteration variable `it` (the fragment slot when `V = 1`).
    pub slot: Expr,
}

pub(crate) fn with_span(mut e: Expr, span: Span) -> Expr {
    e.span = span;
    e
}

/// `a and b`, dropping `true` operands.
pub(crate) fn and(a: Option<Expr>, b: Expr) -> Expr {
    match a {
        Some(a) => bin(BinOp::And, a, b),
        None => b,
    }
}

/// Builds the region for element space `extents` with `threads` threads and vector width
/// `vec` (the caller has checked that `vec` divides the innermost extent), with the body
/// `body(mapping)` run for each element (each vector lane). `registers`: the region
/// indexes a per-thread register array by the slot, so its `it` loop is `T.unroll`
/// (register arrays take constant indices only).
pub(crate) fn build(
    extents: &[Expr],
    block: &Block,
    vec: i64,
    registers: bool,
    span: Span,
    names: &mut NameSet,
    body: impl FnOnce(&Mapping) -> Vec<Stmt>,
) -> Stmt {
    let threads = block.threads();
    let tx = names.fresh(block.index_base());
    let it = names.fresh("it");
    let lane = (vec > 1).then(|| names.fresh("v"));
    let flat = bin(
        BinOp::Add,
        bin(BinOp::Mul, Expr::var(&it), Expr::int(threads)),
        Expr::var(&tx),
    );
    // The space counted in vectors: the innermost extent divided by `vec`.
    let mut space: Vec<Expr> = extents.to_vec();
    if let Some(last) = space.last_mut() {
        if vec > 1 {
            *last = bin(BinOp::FloorDiv, last.clone(), Expr::int(vec));
        }
    }
    let total = space
        .iter()
        .cloned()
        .reduce(|a, b| bin(BinOp::Mul, a, b))
        .unwrap_or_else(|| Expr::int(1));
    let mut indices = decompose(&flat, &space);
    if let (Some(last), Some(lane)) = (indices.last_mut(), &lane) {
        *last = bin(
            BinOp::Add,
            bin(BinOp::Mul, last.clone(), Expr::int(vec)),
            Expr::var(lane),
        );
    }
    let mapping = Mapping {
        indices,
        slot: Expr::var(&it),
    };
    let mut inner = body(&mapping);
    if let Some(lane) = &lane {
        lane_last(&mut inner, lane);
    }
    if let Some(lane) = lane {
        inner = vec![for_loop(
            &lane,
            Expr::int(vec),
            ForKind::Vectorized,
            inner,
            span,
        )];
    }
    let divisible = const_int(&total).is_some_and(|e| e % threads == 0);
    if !divisible {
        inner = vec![Stmt::new(
            StmtKind::If {
                cond: bin(BinOp::Lt, flat, total.clone()),
                then_body: inner,
                else_body: Vec::new(),
            },
            span,
        )];
    }
    let trips = bin(BinOp::CeilDiv, total, Expr::int(threads));
    // Register slots must be unrolled (constant indices). Short loops are unrolled too, as
    // a kernel engineer would write them: no loop counter, and addresses of consecutive
    // trips differ by constants the assembler folds. Copies (one store of a loaded value,
    // by `T.copy` or a `T.Parallel` written as one) go up to `MAX_UNROLLED_COPY_TRIPS`: above
    // all, every trip's load is then in flight at once. A rolled loop of synchronous
    // element copies (the fallback for rows that are not 4-byte aligned) waits out one
    // global-memory latency per trip: 32 of them per operand and K step made the ragged
    // seed config 7-9x slower than cuBLAS at odd shapes (docs/perf.md). Other bodies keep
    // the short limit, so an arbitrary parallel body does not grow 32-fold.
    let limit = if is_copy(&inner) {
        MAX_UNROLLED_COPY_TRIPS
    } else {
        MAX_UNROLLED_TRIPS
    };
    let kind = if const_int(&trips).is_some_and(|t| registers || t <= limit) {
        ForKind::Unroll
    } else {
        ForKind::Serial
    };
    let serial = for_loop(&it, trips, kind, inner, span);
    thread_region(block, &tx, vec![serial], span, names)
}

/// The region of `block` running `body` on every thread, over thread variable `index`
/// (from `names.fresh(block.index_base())`): [`Block::fresh_region`].
pub(crate) fn thread_region(
    block: &Block,
    index: &str,
    body: Vec<Stmt>,
    span: Span,
    names: &mut NameSet,
) -> Stmt {
    block.fresh_region(index, body, span, names)
}

/// The longest trip loop that is unrolled.
const MAX_UNROLLED_TRIPS: i64 = 8;

/// The longest copy loop (trips per thread) that is unrolled: a 128 x 32 float16 tile over
/// 128 threads, element by element (32 loads in flight, one register each). 64 (a K tile
/// of 64) spills next to a 128 x 128 accumulator.
const MAX_UNROLLED_COPY_TRIPS: i64 = 32;

/// Whether a region's per-element body is a copy: one store whose value reads a buffer,
/// possibly under a bounds guard or in a vector-lane loop.
fn is_copy(body: &[Stmt]) -> bool {
    match body {
        [s] => match &s.kind {
            StmtKind::Store { value, .. } => has_load(value),
            StmtKind::If {
                then_body,
                else_body,
                ..
            } => else_body.is_empty() && is_copy(then_body),
            StmtKind::For(f) => is_copy(&f.body),
            _ => false,
        },
        _ => false,
    }
}

/// `flat` decomposed row-major over `extents`; an extent of 1 gives the index 0.
fn decompose(flat: &Expr, extents: &[Expr]) -> Vec<Expr> {
    let mut out = Vec::with_capacity(extents.len());
    let mut stride: Option<Expr> = None;
    for (d, extent) in extents.iter().enumerate().rev() {
        let index = if const_int(extent) == Some(1) {
            Expr::int(0)
        } else {
            let q = match &stride {
                Some(s) => bin(BinOp::FloorDiv, flat.clone(), s.clone()),
                None => flat.clone(),
            };
            if d == 0 {
                q
            } else {
                bin(BinOp::FloorMod, q, extent.clone())
            }
        };
        out.push(index);
        stride = Some(match stride {
            Some(s) => bin(BinOp::Mul, extent.clone(), s),
            None => extent.clone(),
        });
    }
    out.reverse();
    out
}

/// Rewrites `a + (b + lane)` to `(a + b) + lane` everywhere in `body`, so every vector
/// access's index ends in `+ lane` (the form the back end turns into one vector access).
pub(crate) fn lane_last(body: &mut [Stmt], lane: &str) {
    let is_lane = |e: &Expr| matches!(&e.kind, tlc_ir::ExprKind::Var(n) if n == lane);
    tlc_ir::visit::map_body_exprs(body, &mut |e| match e.kind {
        tlc_ir::ExprKind::Binary(BinOp::Add, a, b) => match b.kind {
            tlc_ir::ExprKind::Binary(BinOp::Add, x, y) if is_lane(&y) => {
                bin(BinOp::Add, bin(BinOp::Add, *a, *x), *y)
            }
            kind => Expr::binary(BinOp::Add, *a, Expr::new(kind, b.span), e.span),
        },
        kind => Expr::new(kind, e.span),
    });
}
