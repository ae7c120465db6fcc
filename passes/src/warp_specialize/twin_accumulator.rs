//! The double-buffered wgmma accumulator of warp-specialized consumers (`schedule.rs`
//! builds the loop): which lowered computes can alternate between an accumulator and its
//! twin (a `clear_accum` gemm followed by register work reading it), whether the twin fits
//! the consumers' registers, and the copies of the compute for one k-tile on one of the
//! two accumulators. Why: the next k-tile's wgmma group then runs on the tensor cores
//! while this one's result is promoted (docs/passes.md, docs/perf.md).

use super::Facts;
use crate::analysis::access::Access;
use crate::names::NameSet;
use tlc_ir::verifier::const_int;
use tlc_ir::visit::map_body_exprs;
use tlc_ir::{BinOp, Expr, ExprKind, ForKind, Intrinsic, Stmt, StmtKind};

/// A lowered compute whose wgmma accumulator can alternate between two register sets: the
/// notes before it, one gemm's wgmma code (fence … commit) whose every `T.wgmma` starts
/// its k-steps overwriting the accumulator (`clear_accum`: `accumulate=kk != 0` over an
/// unrolled `kk` from 0), its `T.wgmma_wait(0)`, then code that reads the accumulator but
/// neither writes it nor issues wgmma (the promotion).
pub(super) struct Buffered {
    pub notes: Vec<Stmt>,
    pub gemm: Vec<Stmt>,
    pub rest: Vec<Stmt>,
    pub acc: String,
}

pub(super) fn double_buffered(compute: &[Stmt]) -> Option<Buffered> {
    let is_wgmma_op = |s: &Stmt| {
        let mut found = false;
        tlc_ir::visit::for_each_stmt(std::slice::from_ref(s), &mut |t| {
            found |= matches!(
                t.kind,
                StmtKind::Intrinsic(
                    Intrinsic::Wgmma { .. }
                        | Intrinsic::WgmmaRs { .. }
                        | Intrinsic::WgmmaFence
                        | Intrinsic::WgmmaCommit
                        | Intrinsic::WgmmaWait { .. }
                )
            );
        });
        found
    };
    let first = compute
        .iter()
        .position(|s| !matches!(s.kind, StmtKind::Note(_)))?;
    let wait = compute
        .iter()
        .position(|s| matches!(s.kind, StmtKind::Intrinsic(Intrinsic::WgmmaWait { n: 0 })))?;
    let (gemm, rest) = (&compute[first..wait], &compute[wait + 1..]);
    if gemm.is_empty() || rest.iter().any(is_wgmma_op) {
        return None;
    }
    // The gemm: wgmma code only, one accumulator, each wgmma overwriting at its first step.
    let mut zero_based = Vec::new();
    let mut accs = std::collections::BTreeSet::new();
    let mut plain = true;
    let mut overwrites = true;
    tlc_ir::visit::for_each_stmt(gemm, &mut |s| match &s.kind {
        StmtKind::For(f) if f.kind == ForKind::Unroll => {
            if const_int(&f.start) == Some(0) {
                zero_based.push(f.var.name.clone());
            }
        }
        StmtKind::Intrinsic(Intrinsic::Wgmma {
            acc, accumulate, ..
        }) => {
            accs.insert(acc.buffer.name.clone());
            overwrites &= matches!(
                accumulate.as_ref().map(|e| &e.kind),
                Some(ExprKind::Binary(BinOp::Ne, lhs, rhs))
                    if matches!(&rhs.kind, ExprKind::Int(0))
                        && matches!(&lhs.kind, ExprKind::Var(v) if zero_based.contains(v))
            );
        }
        StmtKind::Intrinsic(Intrinsic::WgmmaFence | Intrinsic::WgmmaCommit) | StmtKind::Note(_) => {
        }
        _ => plain = false,
    });
    let [acc] = <[String; 1]>::try_from(accs.into_iter().collect::<Vec<_>>()).ok()?;
    let writes_acc = Access::of_body(rest).writes.contains(&acc);
    (plain && overwrites && !writes_acc).then(|| Buffered {
        notes: compute[..first].to_vec(),
        gemm: gemm.to_vec(),
        rest: rest.to_vec(),
        acc,
    })
}

/// The note on a double-buffered consumer loop (it reaches the PTX as a comment): ptxas
/// reports C7514 for such loops (it cannot tell which group's registers the promotion
/// reads) and the kernel is faster all the same (docs/perf.md); the tests that read
/// ptxas's warnings accept C7514 only from PTX that carries this note.
pub const DOUBLE_BUFFERED_NOTE: &str =
    "double-buffered wgmma accumulator: the next k-tile's group runs during this promotion (ptxas reports C7514 here; measured faster, docs/perf.md)";

/// Registers a consumer thread keeps beside its fragments (addresses, indices, loop
/// counters, scales): what a second accumulator must leave free.
const TWIN_RESERVE: i64 = 32;

/// Whether a second copy of accumulator `acc` fits a consumer thread's `registers` with
/// every register array of the kernel (`TWIN_RESERVE` to spare): past that, ptxas spills.
pub(super) fn fits_twin(acc: &str, registers: i64, facts: &Facts) -> bool {
    let slots = |b: &tlc_ir::BufferDecl| -> i64 {
        b.shape
            .iter()
            .map(|e| const_int(e).unwrap_or(i64::MAX / 4))
            .fold(1i64, |a, d| a.saturating_mul(d))
    };
    let held = facts
        .local_arrays()
        .map(slots)
        .fold(0i64, i64::saturating_add);
    let twin = facts.buffer(acc).map_or(i64::MAX / 4, slots);
    held.saturating_add(twin).saturating_add(TWIN_RESERVE) <= registers
}

/// Whether `body` reads or writes buffer `name`.
pub(super) fn mentions(body: &[Stmt], name: &str) -> bool {
    let access = Access::of_body(body);
    access.reads.contains(name) || access.writes.contains(name)
}

/// A copy of `code` for k-tile `k` (the loop variable `var` replaced by it), with
/// `rename = Some((acc, buf))` on accumulator `buf` instead of `acc`, its binders renamed
/// (copies share a scope) and its constant subexpressions folded (`0 % 4`, as the parser
/// folds them: the printed IR parses back).
pub(super) fn copy_for(
    code: &[Stmt],
    (var, k): (&str, &Expr),
    rename: Option<(&str, &str)>,
    names: &mut NameSet,
) -> Vec<Stmt> {
    let mut out = code.to_vec();
    let mut renames = std::collections::HashMap::new();
    crate::names::rename_binders(&mut out, names, &mut renames);
    map_body_exprs(&mut out, &mut |e| match &e.kind {
        ExprKind::Var(n) if n == var => {
            let mut v = k.clone();
            v.span = e.span;
            v
        }
        ExprKind::Var(n) => match renames.get(n) {
            Some(fresh) => Expr::new(ExprKind::Var(fresh.clone()), e.span),
            None => e,
        },
        ExprKind::Binary(op, l, r) => Expr::binary(*op, (**l).clone(), (**r).clone(), e.span),
        _ => e,
    });
    if let Some((acc, buf)) = rename.filter(|(acc, buf)| acc != buf) {
        tlc_ir::uniquify::rename_buffer_uses(&mut out, acc, buf);
    }
    out
}
