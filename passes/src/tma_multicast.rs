//! `tma-multicast` (sm_90a schedule, after `warp-specialize`): in a kernel launched in
//! thread-block clusters of `C` blocks along one grid axis (`cluster_dims`), the boxes that
//! every block of a cluster loads alike are loaded once per cluster: each block loads `1/C`
//! of the box and multicasts it into the shared memory of all `C` (`T.tma_load(…,
//! multicast=2^C - 1)`), halving (for `C = 2`) what the cluster reads from L2 for that
//! operand — the blocks along x of a GEMM share their tile of A, those along y their tile
//! of B.
//!
//! **Which boxes.** A `T.tma_load` whose source coordinates do not depend on the block
//! index of the cluster's axis (through lets and loop variables alike) reads the same box
//! in every block of a cluster. It is split along its outermost dimension when `C` divides
//! that extent and each part starts where TMA may write (128 bytes, or the swizzle's 8 ×
//! span): block `r` (its rank, `b % C` for block index `b` of the axis) loads rows
//! `r·R/C ..` of the box into the same rows of its stage, and the copy lands in every
//! block. Each block's `full` barrier still expects the whole stage's bytes: its own part
//! and the others' arrive on it (`multicast` completes them on each destination's barrier).
//!
//! **The protocol.** A block's producer now writes into the other blocks' stages, so a
//! stage may be refilled only when the consumers of every block have released it: each
//! `empty` barrier (one the producer role waits on, arrived on by plain arrivals only)
//! counts `C` times the arrivals, and
//! every consumer arrival on it becomes one arrival on that barrier in each block of the
//! cluster (`T.mbarrier_arrive_cluster(bar, r)` for `r` in `0..C`). A `T.cluster_sync()`
//! after the barriers are initialized makes every block's barriers exist before another
//! block's copy or arrival reaches them, and one at the end keeps every block resident
//! until the others are done with its shared memory.
//!
//! **When.** Only where all blocks of a cluster run the same barrier protocol: no loop
//! bound, no `while`, and no `if` around a barrier, TMA or wgmma operation may depend on the
//! cluster axis's block index (causal attention's trip counts do), the loads sit in a role
//! branch of a warp-specialized kernel whose producer waits on `empty` barriers, and the
//! kernel's thread loops span the block (so every thread reaches the cluster barriers).
//! Anything else keeps its plain loads (the kernel is still launched in clusters). The pass
//! checks nothing it cannot see: the interpreter runs the clustered blocks together and
//! reports a refill of a stage another block still reads (the runner's check).

use crate::analysis::kernels::for_each_kernel;
use crate::context::PassContext;
use crate::pass::Pass;
use std::collections::HashSet;
use tlc_ir::build::{bin, intrinsic};
use tlc_ir::verifier::const_int;
use tlc_ir::visit::{child_bodies, child_bodies_mut, expr_children, for_each_stmt};
use tlc_ir::wgmma::Swizzle;
use tlc_ir::{
    BinOp, Diagnostic, ElemRef, Expr, ExprKind, ForKind, Intrinsic, Kernel, PrimFunc, Span, Stmt,
    StmtKind,
};

pub struct TmaMulticast;

impl Pass for TmaMulticast {
    fn name(&self) -> &'static str {
        "tma-multicast"
    }

    fn description(&self) -> &'static str {
        "in thread-block clusters, TMA boxes every block of a cluster loads alike -> each block loads its share and multicasts it; empty barriers count every block's consumers"
    }

    fn run(&self, mut func: PrimFunc, _cx: &PassContext) -> Result<PrimFunc, Vec<Diagnostic>> {
        for_each_kernel(&mut func.body, &mut |k, _| multicast(k));
        Ok(func)
    }
}

fn multicast(k: &mut Kernel) {
    let Some(dims) = k.cluster_dims() else {
        return;
    };
    // One axis with several blocks.
    let axes: Vec<usize> = (0..3).filter(|&a| dims[a] > 1).collect();
    let [axis] = axes.as_slice() else {
        return;
    };
    let (Some(var), Ok(c)) = (k.block_vars.get(*axis), usize::try_from(dims[*axis])) else {
        return;
    };
    let axis = ClusterAxis::new(&var.name, c);
    let tainted = tainted_by(&k.body, &axis);
    if !uniform_protocol(&k.body, &tainted, &axis) || !thread_loops_only(k) {
        return;
    }
    let threads = k.threads.first().and_then(const_int);
    let rank = bin(BinOp::FloorMod, Expr::var(&var.name), Expr::int(c as i64));
    // Rewritten on a copy: the kernel keeps its plain loads unless every step applies.
    let mut body = k.body.clone();
    // The roles' branches (an `if` on the thread index directly inside a thread loop).
    let mut empties: HashSet<String> = HashSet::new();
    let mut split_any = false;
    for stmt in body.iter_mut() {
        let StmtKind::For(f) = &mut stmt.kind else {
            continue;
        };
        if !matches!(f.kind, ForKind::ThreadBinding(_)) {
            continue;
        }
        for role in f.body.iter_mut() {
            let StmtKind::If {
                then_body,
                else_body,
                ..
            } = &mut role.kind
            else {
                continue;
            };
            for branch in [then_body, else_body] {
                let waits = waited_barriers(branch);
                let mut full = HashSet::new();
                let n = split_loads(
                    branch,
                    &SplitCx {
                        allocs: &k.allocs,
                        tainted: &tainted,
                        axis: &axis,
                        rank: &rank,
                        c,
                    },
                    &mut full,
                );
                if n > 0 {
                    split_any = true;
                    empties.extend(waits.difference(&full).cloned());
                }
            }
        }
    }
    if !split_any || empties.is_empty() || !plain_releases(&body, &empties) {
        return;
    }
    release_everywhere(&mut body, &empties, c);
    if add_cluster_syncs(&mut body, threads) {
        k.body = body;
    }
}

/// The block index of the cluster's axis and the cluster's size: `v // m` with `C | m` is
/// the same in every block of a cluster (which holds `C` consecutive indices) — the
/// cluster index `persistent-tiles` walks tiles by.
struct ClusterAxis<'a> {
    var: &'a str,
    c: i64,
}

impl<'a> ClusterAxis<'a> {
    fn new(var: &'a str, c: usize) -> Self {
        ClusterAxis {
            var,
            c: i64::try_from(c).unwrap_or(1),
        }
    }
}

/// The names whose value may differ between the blocks of a cluster: the axis's block
/// index, and every let and loop variable whose value or bounds read one (except through
/// `v // m`, `C | m`).
fn tainted_by(body: &[Stmt], rank: &ClusterAxis) -> HashSet<String> {
    let mut out: HashSet<String> = HashSet::from([rank.var.to_string()]);
    // Program order binds before use, but a loop's body may be visited before a later let
    // it does not see; iterate to a fixed point (each round adds a name or stops).
    loop {
        let before = out.len();
        for_each_stmt(body, &mut |s| match &s.kind {
            StmtKind::Let { var, value, .. } if varies(value, &out, rank) => {
                out.insert(var.name.clone());
            }
            StmtKind::For(f) if varies(&f.start, &out, rank) || varies(&f.stop, &out, rank) => {
                out.insert(f.var.name.clone());
            }
            _ => {}
        });
        if out.len() == before {
            return out;
        }
    }
}

/// Whether `e` may differ between the blocks of a cluster: it reads one of `names` other
/// than as the cluster index `v // m`.
fn varies(e: &Expr, names: &HashSet<String>, rank: &ClusterAxis) -> bool {
    match &e.kind {
        ExprKind::Var(n) => names.contains(n),
        ExprKind::Binary(BinOp::FloorDiv, a, b)
            if matches!(&a.kind, ExprKind::Var(n) if n == rank.var)
                && const_int(b).is_some_and(|m| m > 0 && m % rank.c == 0) =>
        {
            false
        }
        _ => expr_children(e).any(|x| varies(x, names, rank)),
    }
}

/// The operations whose order the blocks of a cluster must share.
fn synchronizes(i: &Intrinsic) -> bool {
    matches!(
        i,
        Intrinsic::MbarrierInit { .. }
            | Intrinsic::MbarrierArrive { .. }
            | Intrinsic::MbarrierArriveExpectTx { .. }
            | Intrinsic::MbarrierWait { .. }
            | Intrinsic::MbarrierArriveCluster { .. }
            | Intrinsic::TmaLoad { .. }
            | Intrinsic::ClusterSync
            | Intrinsic::Wgmma { .. }
            | Intrinsic::WgmmaRs { .. }
            | Intrinsic::WgmmaCommit
            | Intrinsic::WgmmaWait { .. }
    )
}

fn holds_sync(body: &[Stmt]) -> bool {
    let mut hit = false;
    for_each_stmt(body, &mut |s| {
        if let StmtKind::Intrinsic(i) = &s.kind {
            hit |= synchronizes(i);
        }
    });
    hit
}

/// Every block of a cluster runs the same barrier protocol: no loop bound depends on the
/// cluster axis's index, no `if` or `while` around a barrier, copy or wgmma does, and no
/// mbarrier operand's index does (a multicast completes, and a remote arrival arrives on,
/// the barrier at the same offset in every block: it must be the same barrier there).
fn uniform_protocol(body: &[Stmt], tainted: &HashSet<String>, rank: &ClusterAxis) -> bool {
    let mut ok = true;
    for_each_stmt(body, &mut |s| match &s.kind {
        StmtKind::Intrinsic(i) => {
            let bar = match i {
                Intrinsic::MbarrierInit { bar, .. }
                | Intrinsic::MbarrierArrive { bar }
                | Intrinsic::MbarrierArriveExpectTx { bar, .. }
                | Intrinsic::MbarrierWait { bar, .. }
                | Intrinsic::MbarrierArriveCluster { bar, .. }
                | Intrinsic::TmaLoad { bar, .. } => Some(bar),
                _ => None,
            };
            ok &= !bar.is_some_and(|b| b.indices.iter().any(|e| varies(e, tainted, rank)));
        }
        StmtKind::For(f) => {
            ok &= !varies(&f.start, tainted, rank) && !varies(&f.stop, tainted, rank)
        }
        StmtKind::If { cond, .. } => {
            ok &= !varies(cond, tainted, rank) || !child_bodies(s).iter().any(|b| holds_sync(b));
        }
        StmtKind::While { .. } => ok &= !child_bodies(s).iter().any(|b| holds_sync(b)),
        _ => {}
    });
    ok
}

/// Every top-level statement is a thread loop (or a let or note): the clustered blocks'
/// code is per thread, and a block is one-dimensional.
fn thread_loops_only(k: &Kernel) -> bool {
    k.threads.len() == 1
        && k.body.iter().all(|s| match &s.kind {
            StmtKind::For(f) => matches!(f.kind, ForKind::ThreadBinding(_)),
            StmtKind::Let { .. } | StmtKind::Note(_) => true,
            _ => false,
        })
}

/// Whether thread loop `s` runs every one of the block's `threads` (so a
/// `T.cluster_sync()` in its body is reached by all of them).
fn spans_block(s: &Stmt, threads: Option<i64>) -> bool {
    match &s.kind {
        StmtKind::For(f) => {
            threads.is_some() && const_int(&f.start) == Some(0) && const_int(&f.stop) == threads
        }
        _ => false,
    }
}

/// The mbarrier buffers `T.mbarrier_wait` waits on in `body`.
fn waited_barriers(body: &[Stmt]) -> HashSet<String> {
    let mut out = HashSet::new();
    for_each_stmt(body, &mut |s| {
        if let StmtKind::Intrinsic(Intrinsic::MbarrierWait { bar, .. }) = &s.kind {
            out.insert(bar.buffer.name.clone());
        }
    });
    out
}

struct SplitCx<'a> {
    allocs: &'a [tlc_ir::BufferDecl],
    tainted: &'a HashSet<String>,
    axis: &'a ClusterAxis<'a>,
    rank: &'a Expr,
    c: usize,
}

/// Splits the shareable `T.tma_load`s of `body` among the cluster's blocks; the barriers
/// they complete on go to `full`. Returns how many it split.
fn split_loads(body: &mut [Stmt], cx: &SplitCx, full: &mut HashSet<String>) -> usize {
    let mut n = 0;
    for s in body.iter_mut() {
        if let StmtKind::Intrinsic(i) = &mut s.kind {
            if let Some(split) = split(i, cx) {
                if let Intrinsic::TmaLoad { bar, .. } = &split {
                    full.insert(bar.buffer.name.clone());
                }
                *i = split;
                n += 1;
            }
            continue;
        }
        for b in child_bodies_mut(s) {
            n += split_loads(b, cx, full);
        }
    }
    n
}

/// `T.tma_load` of a box the cluster's blocks load alike, as each block's share of it.
fn split(i: &Intrinsic, cx: &SplitCx) -> Option<Intrinsic> {
    let Intrinsic::TmaLoad {
        dst,
        src,
        bar,
        box_dims,
        swizzle,
        multicast: 0,
    } = i
    else {
        return None;
    };
    if src.indices.iter().any(|e| varies(e, cx.tainted, cx.axis))
        || dst.indices.iter().any(|e| varies(e, cx.tainted, cx.axis))
        || box_dims.len() < 2
    {
        return None;
    }
    let c = i64::try_from(cx.c).ok()?;
    let rows = *box_dims.first()?;
    if rows % c != 0 {
        return None;
    }
    let part = rows / c;
    let unit: i64 = part * box_dims.iter().skip(1).product::<i64>();
    let decl = cx.allocs.iter().find(|d| d.name.name == dst.buffer.name)?;
    let dims: Vec<i64> = decl.shape.iter().map(const_int).collect::<Option<_>>()?;
    let align = Swizzle::from_bytes(*swizzle)?.tma_alignment();
    if (unit * i64::from(decl.dtype.bytes())) % align != 0 {
        return None;
    }
    // The destination dimension whose index moves by a whole number per part: the
    // outermost `d` whose trailing product divides the part, with constant indices from
    // `d` on and room for the last block's part.
    let d = (0..dims.len()).find(|&d| {
        let trailing: i64 = dims[d + 1..].iter().product();
        trailing > 0
            && unit % trailing == 0
            && dst.indices[d..].iter().all(|e| const_int(e).is_some())
            && const_int(&dst.indices[d])
                .is_some_and(|at| at + (c - 1) * (unit / trailing) < dims[d])
    })?;
    let step = unit / dims[d + 1..].iter().product::<i64>();
    let shifted = |e: &Expr, by: i64| {
        bin(
            BinOp::Add,
            e.clone(),
            bin(BinOp::Mul, cx.rank.clone(), Expr::int(by)),
        )
    };
    let mut dst_idx = dst.indices.clone();
    dst_idx[d] = shifted(&dst.indices[d], step);
    let mut src_idx = src.indices.clone();
    src_idx[0] = shifted(&src.indices[0], part);
    let mut box_new = box_dims.clone();
    box_new[0] = part;
    Some(Intrinsic::TmaLoad {
        dst: ElemRef {
            buffer: dst.buffer.clone(),
            indices: dst_idx,
        },
        src: ElemRef {
            buffer: src.buffer.clone(),
            indices: src_idx,
        },
        bar: bar.clone(),
        box_dims: box_new,
        swizzle: *swizzle,
        multicast: (1i64 << c) - 1,
    })
}

/// Whether every barrier of `empties` is a release barrier: arrived on only by plain
/// `T.mbarrier_arrive`s (which `release_everywhere` multiplies), never announcing bytes or
/// completed by a copy — else its count times `C` would never be reached.
fn plain_releases(body: &[Stmt], empties: &HashSet<String>) -> bool {
    let mut ok = true;
    for_each_stmt(body, &mut |s| {
        let StmtKind::Intrinsic(i) = &s.kind else {
            return;
        };
        let bar = match i {
            Intrinsic::MbarrierArriveExpectTx { bar, .. }
            | Intrinsic::MbarrierArriveCluster { bar, .. }
            | Intrinsic::TmaLoad { bar, .. } => bar,
            _ => return,
        };
        ok &= !empties.contains(&bar.buffer.name);
    });
    ok
}

/// Every arrival on an `empty` barrier becomes one on that barrier of each block of the
/// cluster, and each such barrier expects `c` times the arrivals.
fn release_everywhere(body: &mut Vec<Stmt>, empties: &HashSet<String>, c: usize) {
    let mut out = Vec::with_capacity(body.len());
    for mut s in std::mem::take(body) {
        match &mut s.kind {
            StmtKind::Intrinsic(Intrinsic::MbarrierArrive { bar })
                if empties.contains(&bar.buffer.name) =>
            {
                for r in 0..c {
                    out.push(intrinsic(
                        Intrinsic::MbarrierArriveCluster {
                            bar: bar.clone(),
                            rank: Expr::int(r as i64),
                        },
                        s.span,
                    ));
                }
                continue;
            }
            StmtKind::Intrinsic(Intrinsic::MbarrierInit { bar, count })
                if empties.contains(&bar.buffer.name) =>
            {
                *count *= c as i64;
            }
            _ => {
                for b in child_bodies_mut(&mut s) {
                    release_everywhere(b, empties, c);
                }
            }
        }
        out.push(s);
    }
    *body = out;
}

/// `T.cluster_sync()` after the barriers' initialization (right after the statement of its
/// thread loop that initializes them, or at the head of the next thread loop) and at the end
/// of the last thread loop; whether it found the place after the initialization.
fn add_cluster_syncs(body: &mut [Stmt], threads: Option<i64>) -> bool {
    let sync = |span: Span| intrinsic(Intrinsic::ClusterSync, span);
    let loops: Vec<usize> = body
        .iter()
        .enumerate()
        .filter(|(_, s)| matches!(&s.kind, StmtKind::For(f) if matches!(f.kind, ForKind::ThreadBinding(_))))
        .map(|(i, _)| i)
        .collect();
    let inits = |s: &Stmt| {
        let mut hit = false;
        for_each_stmt(std::slice::from_ref(s), &mut |x| {
            hit |= matches!(&x.kind, StmtKind::Intrinsic(Intrinsic::MbarrierInit { .. }));
        });
        hit
    };
    // The thread loop holding the inits and the statement of its body that does.
    let mut placed = false;
    for (n, &li) in loops.iter().enumerate() {
        let StmtKind::For(f) = &mut body[li].kind else {
            continue;
        };
        let Some(last_init) = f.body.iter().rposition(inits) else {
            continue;
        };
        if last_init + 1 < f.body.len() {
            if spans_block(&body[li], threads) {
                if let StmtKind::For(f) = &mut body[li].kind {
                    let span = f.body[last_init].span;
                    f.body.insert(last_init + 1, sync(span));
                    placed = true;
                }
            }
        } else if let Some(&next) = loops.get(n + 1) {
            if spans_block(&body[next], threads) {
                if let StmtKind::For(g) = &mut body[next].kind {
                    let span = g.body.first().map_or(Span::DUMMY, |s| s.span);
                    g.body.insert(0, sync(span));
                    placed = true;
                }
            }
        }
        break;
    }
    let Some(&last) = loops.last() else {
        return false;
    };
    if !placed || !spans_block(&body[last], threads) {
        return false;
    }
    if let StmtKind::For(f) = &mut body[last].kind {
        let span = f.body.last().map_or(Span::DUMMY, |s| s.span);
        f.body.push(sync(span));
    }
    true
}
