//! `inject-cp-async` (thread level, after `lower-tile-ops`, before `thread-binding`): global
//! → shared copies that a `T.cp_async_commit()` closes become asynchronous `T.cp_async`s.
//!
//! A copy is the vector loop `lower-tile-ops` writes for one element run,
//!
//! ```python
//! for v in T.vectorized(8):
//!     S[s, r, c + v] = G[i, j + v]                                        # or
//!     S[s, r, c + v] = T.if_then_else(cond, G[i, j + v], T.cast(0, "float16"))
//! ```
//!
//! (`S` shared, `G` global, the same dtype), which becomes
//! `T.cp_async(S[s, r, c], G[i, j], 16)` / `T.cp_async(S[s, r, c], G[i, j], 16, cond)`
//! (predicate false: zero-fill, no read): one copy of the whole vector, which must be 16, 8
//! or 4 bytes; a plain 4-byte store (no vector loop) becomes a 4-byte copy.
//! Conditions:
//!
//! - the innermost indices are `offset + v` with offsets provably multiples of the vector
//!   width, and both buffers' innermost dimensions constant multiples of it (so every
//!   copy is aligned to its size);
//! - `cond` is the same for every element of the vector: parts not mentioning `v`, and
//!   bounds `offset + v < N` / `0 <= offset + v` with the offset and `N` multiples of the
//!   vector width (then `v = 0` decides for all);
//! - a write guard inside the vector loop (`if (ko + 2) % 3 < 3:`) must be provably true
//!   (`e % m` lies in `[0, m)`): a false predicate writes zeros, a false guard nothing;
//! - the statement holding it (a region, or a loop / `if` / region made only of such
//!   copies, lets and notes) is followed in its statement list — or, at the end of an `if` branch or a
//!   region, in the enclosing list — by a top-level `T.cp_async_commit()` before any other
//!   access of the destination buffer. The commit closes the group; the
//!   `T.cp_async_wait` that lands it is `inject-software-pipeline`'s (the interpreter reports
//!   any read of bytes not landed yet).
//!
//! Everything else is left as it is (synchronous stores are always correct). Notes beside
//! the store of a vector loop do not count; they go before its `T.cp_async`.

use crate::analysis::access::count_sites;
use crate::analysis::int::{
    conjuncts, mentions, multiple_of, provably_true, rows_aligned, substitute, unit_offset, Env,
    Ranges,
};
use crate::analysis::kernels::for_each_kernel;
use crate::context::PassContext;
use crate::pass::Pass;
use std::collections::{BTreeSet, HashMap};
use tlc_ir::interval::Interval;
use tlc_ir::verifier::const_int;
use tlc_ir::visit::{child_bodies_mut, for_each_stmt, has_load, take_notes};
use tlc_ir::{
    BinOp, BufferDecl, Diagnostic, ElemRef, Expr, ExprKind, For, ForKind, Ident, Intrinsic,
    PrimFunc, Scope, Stmt, StmtKind,
};

pub struct InjectCpAsync;

impl Pass for InjectCpAsync {
    fn name(&self) -> &'static str {
        "inject-cp-async"
    }

    fn description(&self) -> &'static str {
        "global->shared vector copies closed by T.cp_async_commit() -> T.cp_async (16/8/4 bytes, predicated zero-fill)"
    }

    fn run(&self, mut func: PrimFunc, _cx: &PassContext) -> Result<PrimFunc, Vec<Diagnostic>> {
        let params = func.params.clone();
        // The dims' ranges and declared multiples: a row `K` declared `multiple_of=8`
        // keeps 16-byte copies aligned.
        let dims = crate::analysis::int::dim_ranges(&func);
        for_each_kernel(&mut func.body, &mut |k, _| {
            let decls: HashMap<String, BufferDecl> = params
                .iter()
                .chain(k.allocs.iter())
                .map(|b| (b.name.name.clone(), b.clone()))
                .collect();
            let cx = Cx {
                decls: &decls,
                ranges: dims.clone(),
            };
            convert_list(&mut k.body, &|_| false, &cx);
        });
        Ok(func)
    }
}

/// What the walk knows: the kernel's declarations (borrowed: a loop's context copies only
/// the ranges, not a declaration per buffer) and the enclosing loops' ranges.
#[derive(Clone)]
struct Cx<'k> {
    decls: &'k HashMap<String, BufferDecl>,
    /// The dims' ranges and multiples, and the values of the enclosing loop variables
    /// with constant bounds.
    ranges: Ranges,
}

impl<'k> Cx<'k> {
    /// `self` inside loop `f`.
    fn inside(&self, f: &For) -> Cx<'k> {
        let mut cx = self.clone();
        if let (Some(a), Some(b)) = (const_int(&f.start), const_int(&f.stop)) {
            if a < b {
                cx.ranges
                    .insert(f.var.name.clone(), Interval::new(a, b - 1));
            }
        }
        cx
    }
}

/// Converts the copies of `list` that a commit closes; `tail(b)`: whether what follows the
/// list reaches a commit before accessing buffer `b`.
fn convert_list(list: &mut Vec<Stmt>, tail: &dyn Fn(&str) -> bool, cx: &Cx) {
    // Notes of vector loops that became one copy, to go before it.
    let mut lifted: Vec<(usize, Vec<Stmt>)> = Vec::new();
    // Counted before anything is converted; what follows a statement is converted after it.
    let follows = Follows::of(list);
    for (i, stmt) in list.iter_mut().enumerate() {
        let after = |b: &str| follows.scan(i + 1, b).unwrap_or_else(|| tail(b));
        if let Some(dsts) = copy_only(stmt, cx) {
            if !dsts.is_empty() && dsts.iter().all(|b| after(b)) {
                let notes = convert(stmt, cx);
                if !notes.is_empty() {
                    lifted.push((i, notes));
                }
                continue;
            }
        }
        match &mut stmt.kind {
            StmtKind::For(f) if matches!(f.kind, ForKind::ThreadBinding(_)) => {
                let inner = cx.inside(f);
                convert_list(&mut f.body, &after, &inner)
            }
            StmtKind::If {
                then_body,
                else_body,
                ..
            } => {
                convert_list(then_body, &after, cx);
                convert_list(else_body, &after, cx);
            }
            StmtKind::For(f) => {
                let inner = cx.inside(f);
                convert_list(&mut f.body, &|_| false, &inner);
            }
            _ => {
                for child in child_bodies_mut(stmt) {
                    convert_list(child, &|_| false, cx);
                }
            }
        }
    }
    for (i, notes) in lifted.into_iter().rev() {
        list.splice(i..i, notes);
    }
}

fn is_commit(s: &Stmt) -> bool {
    matches!(s.kind, StmtKind::Intrinsic(Intrinsic::CommitGroup))
}

/// What the statements of a list do, for asking from each statement on whether a commit
/// comes before an access of a buffer: counted once per list (scanning the rest of the list
/// from every copy was quadratic in a list of many copies).
struct Follows {
    /// From each place on, the first statement that commits (at the top level, or somewhere
    /// inside: then only on some paths); one entry past the end.
    next_commit: Vec<Option<usize>>,
    /// Per buffer, the statements accessing it, in list order.
    accesses: HashMap<String, Vec<usize>>,
    /// Which statements are top-level commits.
    commits: Vec<bool>,
}

impl Follows {
    fn of(list: &[Stmt]) -> Follows {
        let n = list.len();
        let mut next_commit = vec![None; n + 1];
        let mut accesses: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, s) in list.iter().enumerate() {
            for b in count_sites(std::slice::from_ref(s)).into_keys() {
                accesses.entry(b).or_default().push(i);
            }
        }
        for i in (0..n).rev() {
            let mut commits = false;
            for_each_stmt(std::slice::from_ref(&list[i]), &mut |x| {
                commits |= is_commit(x)
            });
            next_commit[i] = if commits { Some(i) } else { next_commit[i + 1] };
        }
        Follows {
            next_commit,
            accesses,
            commits: list.iter().map(is_commit).collect(),
        }
    }

    /// For the statements from `from` on: `Some(true)` when they commit before accessing
    /// `b`; `Some(false)` when they access `b` first (or commit only on some paths);
    /// `None`: neither.
    fn scan(&self, from: usize, b: &str) -> Option<bool> {
        let commit = self.next_commit.get(from).copied().flatten();
        let access = self.accesses.get(b).and_then(|at| {
            let k = at.partition_point(|&i| i < from);
            at.get(k).copied()
        });
        match (commit, access) {
            // A commit statement accesses nothing, so an access at `c` is inside a
            // statement that commits only on some paths.
            (Some(c), Some(a)) if a < c => Some(false),
            (Some(c), _) => Some(self.commits[c]),
            (None, Some(_)) => Some(false),
            (None, None) => None,
        }
    }
}

/// When `stmt` consists only of convertible copies (and lets, loops and `if`s around them
/// that read no memory), the buffers they write.
fn copy_only(stmt: &Stmt, cx: &Cx) -> Option<BTreeSet<String>> {
    match &stmt.kind {
        StmtKind::For(f) if f.kind == ForKind::Vectorized => {
            plan_vector(f, cx).map(|(dst, _)| BTreeSet::from([dst]))
        }
        StmtKind::Store { .. } => plan_scalar(stmt, cx).map(|(dst, _)| BTreeSet::from([dst])),
        StmtKind::For(f)
            if matches!(
                f.kind,
                ForKind::ThreadBinding(_) | ForKind::Serial | ForKind::Unroll
            ) && !has_load(&f.start)
                && !has_load(&f.stop) =>
        {
            all_copy_only(&f.body, &cx.inside(f))
        }
        StmtKind::If {
            cond,
            then_body,
            else_body,
        } if !has_load(cond) => {
            let mut out = all_copy_only(then_body, cx)?;
            out.extend(all_copy_only(else_body, cx)?);
            Some(out)
        }
        StmtKind::Let { value, .. } if !has_load(value) => Some(BTreeSet::new()),
        StmtKind::Note(_) => Some(BTreeSet::new()),
        _ => None,
    }
}

fn all_copy_only(body: &[Stmt], cx: &Cx) -> Option<BTreeSet<String>> {
    let mut out = BTreeSet::new();
    for s in body {
        out.extend(copy_only(s, cx)?);
    }
    Some(out)
}

/// Replaces the copies inside `stmt` (all convertible: `copy_only` said so). Returns the
/// notes of a vector loop `stmt` that became one copy, to go before it.
fn convert(stmt: &mut Stmt, cx: &Cx) -> Vec<Stmt> {
    let replacement = match &stmt.kind {
        StmtKind::For(f) if f.kind == ForKind::Vectorized => plan_vector(f, cx).map(|(_, s)| s),
        StmtKind::Store { .. } => plan_scalar(stmt, cx).map(|(_, s)| s),
        _ => None,
    };
    if let Some(cp) = replacement {
        let notes = match &mut stmt.kind {
            StmtKind::For(f) => take_notes(&mut f.body),
            _ => Vec::new(),
        };
        *stmt = cp;
        return notes;
    }
    let inner = match &stmt.kind {
        StmtKind::For(f) => cx.inside(f),
        _ => cx.clone(),
    };
    for child in child_bodies_mut(stmt) {
        for mut s in std::mem::take(child) {
            let notes = convert(&mut s, &inner);
            child.extend(notes);
            child.push(s);
        }
    }
    Vec::new()
}

/// The parts of a copy store: destination, source load, predicate.
struct CopyStore<'a> {
    dst: &'a Ident,
    dst_idx: &'a [Expr],
    src: &'a str,
    src_idx: &'a [Expr],
    pred: Option<&'a Expr>,
    span: tlc_ir::Span,
}

/// `S[..] = G[..]` or `S[..] = T.if_then_else(cond, G[..], 0)`, `S` shared, `G` global,
/// the same dtype.
fn copy_store<'a>(stmt: &'a Stmt, cx: &Cx) -> Option<CopyStore<'a>> {
    let StmtKind::Store {
        buffer,
        indices,
        value,
    } = &stmt.kind
    else {
        return None;
    };
    let (load, pred) = match &value.kind {
        ExprKind::Select(c, a, z) if is_zero(z) => (&**a, Some(&**c)),
        _ => (value, None),
    };
    let ExprKind::Load {
        buffer: src,
        indices: src_idx,
    } = &load.kind
    else {
        return None;
    };
    let (d, s) = (cx.decls.get(&buffer.name)?, cx.decls.get(src)?);
    if d.scope != Scope::Shared || s.scope != Scope::Global || d.dtype != s.dtype {
        return None;
    }
    if pred.is_some_and(has_load) || src_idx.iter().chain(indices).any(has_load) {
        return None;
    }
    Some(CopyStore {
        dst: buffer,
        dst_idx: indices,
        src,
        src_idx,
        pred,
        span: stmt.span,
    })
}

fn is_zero(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Int(0) => true,
        ExprKind::Float(f) => *f == 0.0,
        ExprKind::Cast(_, a) => is_zero(a),
        _ => false,
    }
}

/// A plain 4-byte copy store (no vector loop): one 4-byte `T.cp_async`.
fn plan_scalar(stmt: &Stmt, cx: &Cx) -> Option<(String, Stmt)> {
    let c = copy_store(stmt, cx)?;
    let bytes = i64::from(cx.decls.get(&c.dst.name)?.dtype.bytes());
    if bytes != 4 {
        return None;
    }
    let cp = Intrinsic::CpAsync {
        dst: ElemRef {
            buffer: c.dst.clone(),
            indices: c.dst_idx.to_vec(),
        },
        src: ElemRef {
            buffer: Ident::new(c.src, c.span),
            indices: c.src_idx.to_vec(),
        },
        bytes,
        pred: c.pred.cloned(),
    };
    Some((
        c.dst.name.clone(),
        Stmt::new(StmtKind::Intrinsic(cp), c.span),
    ))
}

/// A `T.vectorized` copy loop: its `T.cp_async`s.
fn plan_vector(f: &For, cx: &Cx) -> Option<(String, Stmt)> {
    let lanes = const_int(&f.stop).filter(|_| const_int(&f.start) == Some(0))?;
    let v = f.var.name.as_str();
    // Notes beside the store do not count (`convert` puts them before the copy).
    let body: Vec<&Stmt> = f
        .body
        .iter()
        .filter(|s| !matches!(s.kind, StmtKind::Note(_)))
        .collect();
    let store = match body.as_slice() {
        [s @ Stmt {
            kind: StmtKind::Store { .. },
            ..
        }] => s,
        [Stmt {
            kind:
                StmtKind::If {
                    cond,
                    then_body,
                    else_body,
                },
            ..
        }] if else_body.is_empty() && then_body.len() == 1 && provably_true(cond, &cx.ranges) => {
            &then_body[0]
        }
        _ => return None,
    };
    let c = copy_store(store, cx)?;
    let (d, s) = (cx.decls.get(&c.dst.name)?, cx.decls.get(c.src)?);
    let size = i64::from(d.dtype.bytes());
    let bytes = lanes * size;
    if ![4, 8, 16].contains(&bytes) {
        return None;
    }
    // Every index but the innermost is free of `v`; the innermost is `offset + v` with the
    // offset a multiple of the copy's elements, and rows keep that alignment.
    for (idx, decl) in [(c.dst_idx, d), (c.src_idx, s)] {
        let (last, outer) = idx.split_last()?;
        if outer.iter().any(|e| mentions(e, v)) {
            return None;
        }
        let off = unit_offset(last, v)?;
        if !rows_aligned(decl, lanes, &cx.ranges) || !multiple_of(&off, lanes, &cx.ranges) {
            return None;
        }
    }
    // The predicate must be the same for every lane.
    let pred = match c.pred {
        Some(p) => Some(lane_uniform(p, v, lanes, &cx.ranges)?),
        None => None,
    };
    let at = |e: &Expr| substitute(e, v, &Expr::int(0));
    let cp = Intrinsic::CpAsync {
        dst: ElemRef {
            buffer: c.dst.clone(),
            indices: c.dst_idx.iter().map(at).collect(),
        },
        src: ElemRef {
            buffer: Ident::new(c.src, c.span),
            indices: c.src_idx.iter().map(at).collect(),
        },
        bytes,
        pred,
    };
    Some((
        c.dst.name.clone(),
        Stmt::new(StmtKind::Intrinsic(cp), f.body[0].span),
    ))
}

/// `cond` with `var = 0`, when that gives every lane `0 .. lanes` the same value: each
/// conjunct either does not mention `var`, or bounds `offset + var` below by 0 or above by
/// a multiple of `lanes`, with `offset` a multiple of `lanes`.
fn lane_uniform(cond: &Expr, var: &str, lanes: i64, env: &dyn Env) -> Option<Expr> {
    for c in conjuncts(cond) {
        if !mentions(c, var) {
            continue;
        }
        let aligned = |x: &Expr| unit_offset(x, var).is_some_and(|o| multiple_of(&o, lanes, env));
        let bound = |n: &Expr| !mentions(n, var) && multiple_of(n, lanes, env);
        let ok = match &c.kind {
            ExprKind::Binary(BinOp::Lt, x, n) | ExprKind::Binary(BinOp::Gt, n, x) => {
                aligned(x) && bound(n)
            }
            ExprKind::Binary(BinOp::Le, z, x) | ExprKind::Binary(BinOp::Ge, x, z) => {
                z.as_int() == Some(0) && aligned(x)
            }
            _ => false,
        };
        if !ok {
            return None;
        }
    }
    Some(substitute(cond, var, &Expr::int(0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the rest of a list does before accessing `b`, statement by statement: the
    /// definition [`Follows::scan`] answers from its counts.
    fn scan_by_walking(rest: &[Stmt], b: &str) -> Option<bool> {
        for s in rest {
            if is_commit(s) {
                return Some(true);
            }
            let one = std::slice::from_ref(s);
            let mut nested_commit = false;
            for_each_stmt(one, &mut |x| nested_commit |= is_commit(x));
            if nested_commit || count_sites(one).contains_key(b) {
                return Some(false);
            }
        }
        None
    }

    /// `Follows`, counted once per list, answers every place and buffer as walking the rest
    /// of the list does: commits at the top level and nested in an `if`, accesses before,
    /// between, inside and after them, and buffers never accessed.
    #[test]
    fn follows_answers_as_walking_the_rest_does() {
        let func = tlc_ir::parse(
            r#"@T.prim_func
def f(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32"), C: T.Tensor((8,), "int32")):
    with T.Kernel(1, threads=1) as bx:
        S = T.alloc_shared((8,), "float32")
        S[0] = A[0]
        T.cp_async_commit()
        B[0] = S[1]
        S[2] = A[2]
        if C[0] > 0:
            T.cp_async_commit()
        A[3] = 1.0
        T.cp_async_commit()
        if C[1] > 0:
            B[4] = S[4]
        S[5] = A[5]
"#,
        )
        .unwrap_or_else(|d| panic!("{d:?}"));
        let list: &[Stmt] = func
            .body
            .iter()
            .find_map(|s| match &s.kind {
                StmtKind::Kernel(k) => Some(&k.body[..]),
                _ => None,
            })
            .unwrap_or_default();
        assert_eq!(list.len(), 9);
        let follows = Follows::of(list);
        for from in 0..=list.len() {
            for b in ["S", "A", "B", "C", "Z"] {
                assert_eq!(
                    follows.scan(from, b),
                    scan_by_walking(&list[from..], b),
                    "from {from}, buffer {b}"
                );
            }
        }
    }
}
