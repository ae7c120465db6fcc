//! Atomic-add nests (`T.atomic_add`'s tile form, which the parser writes as a `T.Parallel`
//! nest of guarded element adds): when their adds become vectors, and the guard facts that
//! make the epilogue as cheap as a `T.copy`'s.
//!
//! - Guards (every `T.Parallel` nest, atomic or not): a conjunct of a nest body's `if` that
//!   holds over the whole iteration space (the tile provably inside its destination along
//!   that dimension, once `-D` has bound the dims) is dropped, as `copy.rs` leaves out the
//!   guard of a region provably inside.
//! - Vectors of `V` lanes along the innermost loop variable `j`: the body is one add into a
//!   buffer outside the registers, maybe under an `if`; the add's innermost index is
//!   `<offset> + j` with the offset a provable multiple of `V` (`analysis::int`, the rule
//!   codegen's vector check uses), no other index mentions `j`, the destination's rows are
//!   a constant multiple of `V`, and the value reads nothing of the destination. Every
//!   conjunct of the guard that mentions `j` is `<offset> + j < bound` or
//!   `bound <= <offset> + j` with offset and bound multiples of `V`: a vector starts at a
//!   multiple of `V` (`j0 = V k`), so `a = <offset> + j0` is a multiple of `V` and
//!   `a < bound` ⇔ `a + V - 1 < bound` (likewise `bound <= a` ⇔ `bound <= a + l`, `l < V`):
//!   each vector lies wholly inside the guard or wholly outside it. The guard is then
//!   tested once per vector, at lane 0 (`hoist_lane_guards`), so codegen sees a bare
//!   `T.vectorized` loop of adds (`red.global.add.v2.f32` and the like where the target
//!   has them, one `red` per element or packed pair where it does not).

use super::vectorize::rows_aligned;
use super::Ctx;
use crate::analysis::int::{conjuncts, enter_loop, mentions, multiple_of, provably_true};
use crate::analysis::int::{substitute, unit_offset, Ranges};
use tlc_ir::build::bin;
use tlc_ir::verifier::const_int;
use tlc_ir::visit::{child_bodies_mut, for_each_subexpr};
use tlc_ir::{BinOp, Expr, ExprKind, For, ForKind, Stmt, StmtKind};

/// Drops the conjuncts of the body's top-level `if`s (without `else`) that hold for every
/// iteration of the nest (`loops`, with the context's `bounds`); an `if` left with none
/// becomes its body.
pub(crate) fn drop_proven_guards(body: Vec<Stmt>, loops: &[&For], bounds: &Ranges) -> Vec<Stmt> {
    let mut env = bounds.clone();
    for f in loops {
        enter_loop(&mut env, f);
    }
    let mut out = Vec::with_capacity(body.len());
    for s in body {
        match s.kind {
            StmtKind::If {
                cond,
                then_body,
                else_body,
            } if else_body.is_empty() => {
                let kept: Vec<Expr> = conjuncts(&cond)
                    .into_iter()
                    .filter(|c| !provably_true(c, &env))
                    .cloned()
                    .collect();
                match kept.into_iter().reduce(|a, b| bin(BinOp::And, a, b)) {
                    Some(cond) => out.push(Stmt::new(
                        StmtKind::If {
                            cond,
                            then_body,
                            else_body,
                        },
                        s.span,
                    )),
                    None => out.extend(then_body),
                }
            }
            kind => out.push(Stmt::new(kind, s.span)),
        }
    }
    out
}

/// The one atomic add of an atomic nest's body and its guard, if the body is
/// `T.atomic_add(...)` or `if cond: T.atomic_add(...)`.
fn atomic_body(body: &[Stmt]) -> Option<(&Stmt, Option<&Expr>)> {
    match body {
        [s @ Stmt {
            kind: StmtKind::AtomicAdd { .. },
            ..
        }] => Some((s, None)),
        [Stmt {
            kind:
                StmtKind::If {
                    cond,
                    then_body,
                    else_body,
                },
            ..
        }] if else_body.is_empty() => match then_body.as_slice() {
            [s @ Stmt {
                kind: StmtKind::AtomicAdd { .. },
                ..
            }] => Some((s, Some(cond))),
            _ => None,
        },
        _ => None,
    }
}

/// Whether the body is an atomic add nest's (see [`atomic_body`]).
pub(crate) fn is_atomic_body(body: &[Stmt]) -> bool {
    atomic_body(body).is_some()
}

/// The bytes of the destination's elements of an atomic nest's add.
pub(crate) fn destination_bytes(body: &[Stmt], ctx: &Ctx) -> Option<u32> {
    let (add, _) = atomic_body(body)?;
    let StmtKind::AtomicAdd { buffer, .. } = &add.kind else {
        return None;
    };
    ctx.buffer(&buffer.name).map(|b| b.dtype.bytes())
}

/// Whether the adds of the body (an atomic nest's, over innermost variable `j` starting at
/// `start`) may run as vectors of `lanes` elements (see the module summary).
pub(crate) fn vectors(body: &[Stmt], j: &str, start: &Expr, lanes: i64, ctx: &Ctx) -> bool {
    let Some((add, guard)) = atomic_body(body) else {
        return false;
    };
    let StmtKind::AtomicAdd {
        buffer,
        indices,
        value,
    } = &add.kind
    else {
        return false;
    };
    let bounds = ctx.bounds.borrow();
    let Some(dst) = ctx.buffer(&buffer.name) else {
        return false;
    };
    let Some((last, rest)) = indices.split_last() else {
        return false;
    };
    let mut reads_dst = false;
    for_each_subexpr(value, &mut |e| {
        reads_dst |= matches!(&e.kind, ExprKind::Load { buffer: b, .. } if *b == buffer.name);
    });
    let aligned = |offset: &Expr| multiple_of(offset, lanes, &*bounds);
    lanes > 1
        && const_int(start) == Some(0)
        && !ctx.fragments.contains(&buffer.name)
        && rows_aligned(dst, lanes, &*bounds)
        && !reads_dst
        && rest.iter().all(|i| !mentions(i, j))
        && unit_offset(last, j).is_some_and(|o| aligned(&o))
        && guard.is_none_or(|g| {
            conjuncts(g).into_iter().all(|c| {
                if !mentions(c, j) {
                    return true;
                }
                match &c.kind {
                    ExprKind::Binary(BinOp::Lt, a, bound) if !mentions(bound, j) => {
                        unit_offset(a, j).is_some_and(|o| aligned(&o)) && aligned(bound)
                    }
                    ExprKind::Binary(BinOp::Le, bound, a) if !mentions(bound, j) => {
                        unit_offset(a, j).is_some_and(|o| aligned(&o)) && aligned(bound)
                    }
                    _ => false,
                }
            })
        })
}

/// Every `for v in T.vectorized(V): if cond: body` of `s` becomes
/// `if cond[v := 0]: for v in T.vectorized(V): body` — for regions whose guards
/// [`vectors`] proved to hold for all of a vector's lanes or none.
pub(crate) fn hoist_lane_guards(mut s: Stmt) -> Stmt {
    if let StmtKind::For(f) = &mut s.kind {
        let guarded = matches!(
            f.body.as_slice(),
            [Stmt { kind: StmtKind::If { else_body, .. }, .. }] if else_body.is_empty()
        );
        if f.kind == ForKind::Vectorized && guarded {
            if let Some(Stmt {
                kind: StmtKind::If {
                    cond, then_body, ..
                },
                span,
            }) = f.body.pop()
            {
                let cond = substitute(&cond, &f.var.name, &Expr::int(0));
                f.body = then_body;
                return Stmt::new(
                    StmtKind::If {
                        cond,
                        then_body: vec![s],
                        else_body: Vec::new(),
                    },
                    span,
                );
            }
        }
    }
    for child in child_bodies_mut(&mut s) {
        *child = std::mem::take(child)
            .into_iter()
            .map(hoist_lane_guards)
            .collect();
    }
    s
}
