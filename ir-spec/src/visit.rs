//! Generic walks over the IR, so that passes, the verifier and the interpreter do not each
//! re-implement the recursion.

use crate::ir::{Expr, ExprKind, ForKind, Ident, Region, Stmt, StmtKind};
use crate::span::Span;

/// The statement lists nested directly inside `stmt`.
pub fn child_bodies(stmt: &Stmt) -> Vec<&Vec<Stmt>> {
    match &stmt.kind {
        StmtKind::Kernel(k) => vec![&k.body],
        StmtKind::For(f) => vec![&f.body],
        StmtKind::While { body, .. } => vec![body],
        StmtKind::If {
            then_body,
            else_body,
            ..
        } => vec![then_body, else_body],
        _ => Vec::new(),
    }
}

/// Mutable version of [`child_bodies`].
pub fn child_bodies_mut(stmt: &mut Stmt) -> Vec<&mut Vec<Stmt>> {
    match &mut stmt.kind {
        StmtKind::Kernel(k) => vec![&mut k.body],
        StmtKind::For(f) => vec![&mut f.body],
        StmtKind::While { body, .. } => vec![body],
        StmtKind::If {
            then_body,
            else_body,
            ..
        } => vec![then_body, else_body],
        _ => Vec::new(),
    }
}

/// Removes every `T.note` from `body` and the statement lists nested in it, and returns
/// them in program order. Passes that repeat a statement list (unrolling) keep a note in
/// the first copy only; passes that replace a loop by other code put its notes before it.
pub fn take_notes(body: &mut Vec<Stmt>) -> Vec<Stmt> {
    let mut notes = Vec::new();
    take_notes_into(body, &mut notes);
    notes
}

fn take_notes_into(body: &mut Vec<Stmt>, notes: &mut Vec<Stmt>) {
    let mut kept = Vec::with_capacity(body.len());
    for mut stmt in body.drain(..) {
        if matches!(stmt.kind, StmtKind::Note(_)) {
            notes.push(stmt);
            continue;
        }
        for child in child_bodies_mut(&mut stmt) {
            take_notes_into(child, notes);
        }
        kept.push(stmt);
    }
    *body = kept;
}

/// Calls `f` on every statement, parents before children.
pub fn for_each_stmt<'a>(body: &'a [Stmt], f: &mut dyn FnMut(&'a Stmt)) {
    for stmt in body {
        f(stmt);
        for child in child_bodies(stmt) {
            for_each_stmt(child, f);
        }
    }
}

/// The buffers a statement names as whole operands, outside its expressions: store and
/// atomic targets, tile-op operands, a reduction's source and destination, an all-reduce's
/// or a finalized reducer's buffer, intrinsic operands. Loads are in [`stmt_exprs`].
pub fn stmt_buffer_idents(stmt: &Stmt) -> Vec<&Ident> {
    match &stmt.kind {
        StmtKind::Store { buffer, .. } | StmtKind::AtomicAdd { buffer, .. } => vec![buffer],
        StmtKind::AllReduce(r) => std::iter::once(&r.buffer).chain(&r.scratch).collect(),
        StmtKind::Copy { src, dst } => vec![&src.buffer, &dst.buffer],
        StmtKind::Gemm(g) => vec![&g.a.buffer, &g.b.buffer, &g.c.buffer],
        StmtKind::Fill { dst, .. } => vec![&dst.buffer],
        StmtKind::FinalizeReducer(r) => vec![r],
        StmtKind::Fresh(buffers) => buffers.iter().collect(),
        StmtKind::Reduce(r) => vec![&r.src, &r.dst],
        StmtKind::Intrinsic(i) => i.operands().into_iter().map(|r| &r.buffer).collect(),
        _ => Vec::new(),
    }
}

/// Every buffer `stmt` names itself (operands and loads in its own expressions, not those
/// of nested statements), with where.
pub fn stmt_buffer_uses(stmt: &Stmt) -> Vec<(&str, Span)> {
    let mut out: Vec<(&str, Span)> = stmt_buffer_idents(stmt)
        .into_iter()
        .map(|i| (i.name.as_str(), i.span))
        .collect();
    for e in stmt_exprs(stmt) {
        for_each_subexpr(e, &mut |x| {
            if let ExprKind::Load { buffer, .. } = &x.kind {
                out.push((buffer.as_str(), x.span));
            }
        });
    }
    out
}

/// The expressions a statement holds directly (not those of nested statements), including
/// region bounds, loop bounds, kernel extents and allocation shapes. (A kernel's arena holds
/// plain integers, no expressions; a barrier and a note hold none.)
pub fn stmt_exprs(stmt: &Stmt) -> Vec<&Expr> {
    fn region<'a>(r: &'a Region, out: &mut Vec<&'a Expr>) {
        for range in &r.ranges {
            out.push(&range.start);
            out.push(&range.extent);
        }
    }
    let mut out = Vec::new();
    match &stmt.kind {
        StmtKind::Kernel(k) => {
            out.extend(k.grid.iter());
            out.extend(k.threads.iter());
            out.extend(k.cluster.iter());
            if let Some(s) = &k.swizzle {
                out.push(&s.panel_size);
            }
            out.extend(k.min_blocks_per_sm.iter());
            for alloc in &k.allocs {
                out.extend(alloc.shape.iter());
            }
        }
        StmtKind::For(f) => {
            out.push(&f.start);
            out.push(&f.stop);
            if let ForKind::Pipelined { num_stages, .. } = &f.kind {
                out.push(num_stages);
            }
        }
        StmtKind::If { cond, .. } | StmtKind::While { cond, .. } => out.push(cond),
        StmtKind::Let { value, .. } => out.push(value),
        StmtKind::Store { indices, value, .. } | StmtKind::AtomicAdd { indices, value, .. } => {
            out.extend(indices.iter());
            out.push(value);
        }
        StmtKind::Copy { src, dst } => {
            region(src, &mut out);
            region(dst, &mut out);
        }
        StmtKind::Gemm(g) => {
            region(&g.a, &mut out);
            region(&g.b, &mut out);
            region(&g.c, &mut out);
        }
        StmtKind::Fill { dst, value } => {
            region(dst, &mut out);
            out.push(value);
        }
        StmtKind::Barrier
        | StmtKind::GridSync
        | StmtKind::Note(_)
        | StmtKind::Fresh(_)
        | StmtKind::Reduce(_)
        | StmtKind::FinalizeReducer(_) => {}
        StmtKind::Intrinsic(i) => out.extend(i.exprs()),
        StmtKind::AllReduce(r) => {
            out.extend(r.indices.iter());
            out.push(&r.value);
        }
    }
    out
}

/// The direct sub-expressions of `expr`, in order. An iterator, not a vector: every walk
/// of every pass visits each node through here, and a vector per node was a measurable
/// share of a compile's allocations.
pub fn expr_children(expr: &Expr) -> impl Iterator<Item = &Expr> {
    let (fixed, list): ([Option<&Expr>; 3], &[Expr]) = match &expr.kind {
        ExprKind::Int(_) | ExprKind::Float(_) | ExprKind::Bool(_) | ExprKind::Var(_) => {
            ([None; 3], &[])
        }
        ExprKind::Load { indices, .. } => ([None; 3], indices),
        ExprKind::Unary(_, a) | ExprKind::Cast(_, a) | ExprKind::Reinterpret(_, a) => {
            ([Some(a), None, None], &[])
        }
        ExprKind::Binary(_, a, b) => ([Some(a), Some(b), None], &[]),
        ExprKind::Select(c, a, b) => ([Some(c), Some(a), Some(b)], &[]),
        ExprKind::Math(_, args) => ([None; 3], args),
    };
    fixed.into_iter().flatten().chain(list)
}

/// Calls `f` on `expr` and every sub-expression, parents first.
pub fn for_each_subexpr<'a>(expr: &'a Expr, f: &mut dyn FnMut(&'a Expr)) {
    f(expr);
    for child in expr_children(expr) {
        for_each_subexpr(child, f);
    }
}

/// Whether `expr` loads from any buffer (local arrays included).
pub fn has_load(expr: &Expr) -> bool {
    let mut found = false;
    for_each_subexpr(expr, &mut |x| {
        found |= matches!(x.kind, ExprKind::Load { .. })
    });
    found
}

/// Whether `expr` mentions the scalar name `var` (the one definition: the verifier, binding
/// and the passes' analyses use it).
pub fn mentions(expr: &Expr, var: &str) -> bool {
    let mut found = false;
    for_each_subexpr(expr, &mut |x| {
        found |= matches!(&x.kind, ExprKind::Var(n) if n == var)
    });
    found
}

/// Rebuilds `expr` bottom-up: `f` sees each node after its children were rewritten.
pub fn map_expr(expr: &Expr, f: &mut dyn FnMut(Expr) -> Expr) -> Expr {
    let kind = match &expr.kind {
        ExprKind::Int(_) | ExprKind::Float(_) | ExprKind::Bool(_) | ExprKind::Var(_) => {
            expr.kind.clone()
        }
        ExprKind::Load { buffer, indices } => ExprKind::Load {
            buffer: buffer.clone(),
            indices: indices.iter().map(|i| map_expr(i, f)).collect(),
        },
        ExprKind::Unary(op, a) => ExprKind::Unary(*op, Box::new(map_expr(a, f))),
        ExprKind::Cast(dt, a) => ExprKind::Cast(*dt, Box::new(map_expr(a, f))),
        ExprKind::Reinterpret(dt, a) => ExprKind::Reinterpret(*dt, Box::new(map_expr(a, f))),
        ExprKind::Binary(op, a, b) => {
            ExprKind::Binary(*op, Box::new(map_expr(a, f)), Box::new(map_expr(b, f)))
        }
        ExprKind::Select(c, a, b) => ExprKind::Select(
            Box::new(map_expr(c, f)),
            Box::new(map_expr(a, f)),
            Box::new(map_expr(b, f)),
        ),
        ExprKind::Math(func, args) => {
            ExprKind::Math(*func, args.iter().map(|a| map_expr(a, f)).collect())
        }
    };
    f(Expr::new(kind, expr.span))
}

/// [`map_expr`] of an expression the caller owns: the nodes are rewritten where they are
/// (`f` still sees each one by value, its children rewritten first), so no node is
/// allocated again unless `f` makes a new one.
pub fn map_expr_owned(mut expr: Expr, f: &mut dyn FnMut(Expr) -> Expr) -> Expr {
    fn go(slot: &mut Expr, f: &mut dyn FnMut(Expr) -> Expr) {
        *slot = map_expr_owned(take(slot), f);
    }
    match &mut expr.kind {
        ExprKind::Int(_) | ExprKind::Float(_) | ExprKind::Bool(_) | ExprKind::Var(_) => {}
        ExprKind::Load { indices, .. } => indices.iter_mut().for_each(|i| go(i, f)),
        ExprKind::Unary(_, a) | ExprKind::Cast(_, a) | ExprKind::Reinterpret(_, a) => go(a, f),
        ExprKind::Binary(_, a, b) => {
            go(a, f);
            go(b, f);
        }
        ExprKind::Select(c, a, b) => {
            go(c, f);
            go(a, f);
            go(b, f);
        }
        ExprKind::Math(_, args) => args.iter_mut().for_each(|a| go(a, f)),
    }
    f(expr)
}

/// `e`'s expression, a placeholder left in its place.
fn take(e: &mut Expr) -> Expr {
    let placeholder = Expr::new(ExprKind::Bool(false), e.span);
    std::mem::replace(e, placeholder)
}

/// Rewrites, in place, every expression held by the statements of `body` (recursively, and
/// including region bounds, loop bounds, kernel extents, allocation shapes) with `f`, applied
/// bottom-up as in [`map_expr`].
pub fn map_body_exprs(body: &mut [Stmt], f: &mut dyn FnMut(Expr) -> Expr) {
    for stmt in body.iter_mut() {
        map_stmt_exprs(stmt, f);
        for child in child_bodies_mut(stmt) {
            map_body_exprs(child, f);
        }
    }
}

/// Rewrites, in place, the expressions `stmt` holds directly (those [`stmt_exprs`] lists, not
/// those of nested statements) with `f`, applied bottom-up as in [`map_expr`].
pub fn map_stmt_exprs(stmt: &mut Stmt, f: &mut dyn FnMut(Expr) -> Expr) {
    fn region(r: &mut Region, f: &mut dyn FnMut(Expr) -> Expr) {
        for range in &mut r.ranges {
            range.start = map_expr_owned(take(&mut range.start), f);
            range.extent = map_expr_owned(take(&mut range.extent), f);
        }
    }
    fn all(list: &mut [Expr], f: &mut dyn FnMut(Expr) -> Expr) {
        for e in list {
            *e = map_expr_owned(take(e), f);
        }
    }
    match &mut stmt.kind {
        StmtKind::Kernel(k) => {
            all(&mut k.grid, f);
            all(&mut k.threads, f);
            all(&mut k.cluster, f);
            if let Some(s) = &mut k.swizzle {
                s.panel_size = map_expr_owned(take(&mut s.panel_size), f);
            }
            if let Some(b) = &mut k.min_blocks_per_sm {
                *b = map_expr_owned(take(b), f);
            }
            for alloc in &mut k.allocs {
                all(&mut alloc.shape, f);
            }
        }
        StmtKind::For(l) => {
            l.start = map_expr_owned(take(&mut l.start), f);
            l.stop = map_expr_owned(take(&mut l.stop), f);
            if let ForKind::Pipelined { num_stages, .. } = &mut l.kind {
                *num_stages = map_expr_owned(take(num_stages), f);
            }
        }
        StmtKind::If { cond, .. } | StmtKind::While { cond, .. } => {
            *cond = map_expr_owned(take(cond), f)
        }
        StmtKind::Let { value, .. } => *value = map_expr_owned(take(value), f),
        StmtKind::Store { indices, value, .. } | StmtKind::AtomicAdd { indices, value, .. } => {
            all(indices, f);
            *value = map_expr_owned(take(value), f);
        }
        StmtKind::Copy { src, dst } => {
            region(src, f);
            region(dst, f);
        }
        StmtKind::Gemm(g) => {
            region(&mut g.a, f);
            region(&mut g.b, f);
            region(&mut g.c, f);
        }
        StmtKind::Fill { dst, value } => {
            region(dst, f);
            *value = map_expr_owned(take(value), f);
        }
        StmtKind::Barrier
        | StmtKind::GridSync
        | StmtKind::Note(_)
        | StmtKind::Fresh(_)
        | StmtKind::Reduce(_)
        | StmtKind::FinalizeReducer(_) => {}
        StmtKind::AllReduce(r) => {
            all(&mut r.indices, f);
            r.value = map_expr_owned(take(&mut r.value), f);
        }
        StmtKind::Intrinsic(i) => {
            for e in i.exprs_mut() {
                *e = map_expr_owned(take(e), f);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::BinOp;
    use crate::span::Span;

    #[test]
    fn map_expr_rewrites_bottom_up() {
        let e = Expr::new(
            ExprKind::Binary(BinOp::Add, Box::new(Expr::var("x")), Box::new(Expr::int(2))),
            Span::DUMMY,
        );
        let out = map_expr(&e, &mut |e| match e.kind {
            ExprKind::Var(_) => Expr::int(5),
            ExprKind::Binary(op, a, b) => Expr::binary(op, *a, *b, e.span),
            _ => e,
        });
        assert_eq!(out, Expr::int(7));
        // The owned form rewrites the same nodes in the same order, to the same result.
        let mut seen = Vec::new();
        let owned = map_expr_owned(e.clone(), &mut |e| {
            seen.push(e.clone());
            match e.kind {
                ExprKind::Var(_) => Expr::int(5),
                ExprKind::Binary(op, a, b) => Expr::binary(op, *a, *b, e.span),
                _ => e,
            }
        });
        assert_eq!(owned, Expr::int(7));
        assert_eq!(seen.len(), 3);
        assert_eq!(seen[0], Expr::var("x"));
        let mut count = 0;
        for_each_subexpr(&e, &mut |_| count += 1);
        assert_eq!(count, 3);
    }
}
