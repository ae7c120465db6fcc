//! Rules H1-H5 of docs/ir.md ("int4"): where a buffer of the sub-byte `int4` dtype may live
//! and what may touch it. Two int4 elements share a byte, so a write of one element would
//! be a read-modify-write of a byte that another thread may be writing at the same time:
//! int4 data moves only in whole bytes (copies of even, even-aligned rows) and is consumed
//! by element loads and `T.gemm`.

use crate::diagnostic::Diagnostic;
use crate::dtype::DType;
use crate::ir::{BinOp, BufferDecl, Expr, ExprKind, PrimFunc, Region, Scope, Stmt, StmtKind};
use crate::verifier::level::Level;
use crate::visit::{for_each_stmt, for_each_subexpr, stmt_exprs};
use std::collections::HashSet;

/// Every H-rule diagnostic of `func` (H1-H5; H6 is a level rule, [`remaining`]), in
/// program order.
pub(super) fn check(func: &PrimFunc) -> Vec<Diagnostic> {
    let mut decls: Vec<&BufferDecl> = func.params.iter().collect();
    for_each_stmt(&func.body, &mut |s| {
        if let StmtKind::Kernel(k) = &s.kind {
            decls.extend(&k.allocs);
        }
    });
    let int4: HashSet<&str> = decls
        .iter()
        .filter(|d| d.dtype == DType::Int4)
        .map(|d| d.name.name.as_str())
        .collect();
    let mut diags = Vec::new();
    for d in decls.iter().filter(|d| d.dtype == DType::Int4) {
        declaration(d, &mut diags);
    }
    for_each_stmt(&func.body, &mut |s| {
        statement(s, &int4, &mut diags);
        for e in stmt_exprs(s) {
            for_each_subexpr(e, &mut |x| expression(x, &mut diags));
        }
    });
    diags
}

/// H6: laid-out IR (what layout-inference's successors and codegen take) has no int4
/// buffer — `pack-int4` turns each into the int8 buffer of its bytes, the first pass of the
/// default pipeline — so no later pass meets a sub-byte dtype. One error, at the first
/// int4 parameter or allocation.
pub(super) fn remaining(func: &PrimFunc, level: Level) -> Vec<Diagnostic> {
    if level < Level::LaidOut {
        return Vec::new();
    }
    let mut first = func.params.iter().find(|d| d.dtype == DType::Int4);
    for_each_stmt(&func.body, &mut |s| {
        if let (None, StmtKind::Kernel(k)) = (first, &s.kind) {
            first = k.allocs.iter().find(|d| d.dtype == DType::Int4);
        }
    });
    first
        .map(|d| {
            Diagnostic::error(
                d.span,
                format!(
                    "int4 buffer `{}` remains, and {level} IR has none: run pack-int4 first",
                    d.name.name
                ),
            )
        })
        .into_iter()
        .collect()
}

/// H1 and H2: an int4 buffer is global or shared, and its rows fill whole bytes.
fn declaration(d: &BufferDecl, diags: &mut Vec<Diagnostic>) {
    if !matches!(d.scope, Scope::Global | Scope::Shared) {
        diags.push(Diagnostic::error(
            d.span,
            format!(
                "int4 buffer `{}` is {}: int4 data lives only in global and shared memory (two \
                 elements to a byte); copy it to shared memory, or give the fragment a wider \
                 integer dtype",
                d.name.name,
                d.scope.name()
            ),
        ));
    }
    if let Some(n) = d.shape.last().and_then(Expr::as_int) {
        if n % 2 != 0 {
            diags.push(Diagnostic::error(
                d.span,
                format!(
                    "int4 buffer `{}` has an odd innermost extent ({n}): its rows must fill \
                     whole bytes (two int4 to a byte)",
                    d.name.name
                ),
            ));
        }
    }
}

/// H3 and H4: what a statement may do with an int4 buffer.
fn statement(s: &Stmt, int4: &HashSet<&str>, diags: &mut Vec<Diagnostic>) {
    let is4 = |name: &str| int4.contains(name);
    let refuse = |diags: &mut Vec<Diagnostic>, what: &str, name: &str| {
        diags.push(Diagnostic::error(
            s.span,
            format!(
                "{what} writes int4 buffer `{name}`: two int4 share a byte, so a write of one \
                 element is not safe against a thread writing the other; int4 data is written \
                 only by `T.copy` of whole bytes"
            ),
        ));
    };
    match &s.kind {
        StmtKind::Store { buffer, .. } if is4(&buffer.name) => {
            refuse(diags, "this store", &buffer.name)
        }
        StmtKind::AtomicAdd { buffer, .. } if is4(&buffer.name) => {
            refuse(diags, "`T.atomic_add`", &buffer.name)
        }
        StmtKind::Fill { dst, .. } if is4(&dst.buffer.name) => {
            refuse(diags, "`T.fill`", &dst.buffer.name)
        }
        StmtKind::Reduce(r) if is4(&r.dst.name) => refuse(diags, "this reduction", &r.dst.name),
        StmtKind::Reduce(r) if is4(&r.src.name) => diags.push(Diagnostic::error(
            s.span,
            format!(
                "int4 buffer `{}` is reduced: reductions read fragments, and int4 data lives \
                 only in global and shared memory",
                r.src.name
            ),
        )),
        StmtKind::AllReduce(r) if is4(&r.buffer.name) => {
            refuse(diags, "this all-reduce", &r.buffer.name)
        }
        StmtKind::Gemm(g) if is4(&g.c.buffer.name) => refuse(diags, "`T.gemm`", &g.c.buffer.name),
        StmtKind::Intrinsic(i) => {
            if let Some(r) = i.operands().into_iter().find(|r| is4(&r.buffer.name)) {
                diags.push(Diagnostic::error(
                    s.span,
                    format!(
                        "int4 buffer `{}` is an operand of an intrinsic: int4 moves only \
                         through `T.copy` and `T.gemm`",
                        r.buffer.name
                    ),
                ));
            }
        }
        StmtKind::Copy { src, dst } => {
            let (s4, d4) = (is4(&src.buffer.name), is4(&dst.buffer.name));
            if s4 != d4 {
                let (four, other) = if s4 { (src, dst) } else { (dst, src) };
                diags.push(Diagnostic::error(
                    s.span,
                    format!(
                        "`T.copy` between int4 buffer `{}` and `{}`, which is not int4: int4 \
                         data copies only to and from int4 buffers (whole bytes); read \
                         elements with loads to widen them",
                        four.buffer.name, other.buffer.name
                    ),
                ));
            } else if s4 {
                whole_bytes(src, s.span, diags);
                whole_bytes(dst, s.span, diags);
            }
        }
        _ => {}
    }
}

/// H4: a copied int4 region starts at an even innermost index and has an even innermost
/// extent, so that it is whole bytes (`provably_even`).
fn whole_bytes(r: &Region, span: crate::span::Span, diags: &mut Vec<Diagnostic>) {
    let Some(inner) = r.ranges.last() else {
        return;
    };
    for (what, e) in [("start", &inner.start), ("extent", &inner.extent)] {
        if !provably_even(e) {
            diags.push(Diagnostic::error(
                span,
                format!(
                    "`T.copy` of int4 buffer `{}`: the innermost {what} is not provably even, \
                     so the region may not be whole bytes (two int4 to a byte); write it as a \
                     multiple of 2",
                    r.buffer.name
                ),
            ));
        }
    }
}

/// Whether `e` is even for every value of its variables: an even constant, a product with
/// an even factor, or a sum or difference of such.
pub(crate) fn provably_even(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Int(v) => v % 2 == 0,
        ExprKind::Binary(BinOp::Mul, a, b) => provably_even(a) || provably_even(b),
        ExprKind::Binary(BinOp::Add | BinOp::Sub, a, b) => provably_even(a) && provably_even(b),
        _ => false,
    }
}

/// H5: no int4 scalar values — int4 is a storage dtype (a load widens to int32).
fn expression(e: &Expr, diags: &mut Vec<Diagnostic>) {
    if let ExprKind::Cast(DType::Int4, _) | ExprKind::Reinterpret(DType::Int4, _) = &e.kind {
        diags.push(Diagnostic::error(
            e.span,
            "a value cannot be converted to int4: int4 is a storage dtype of global and shared \
             buffers (a load of an int4 element gives an int32)",
        ));
    }
}
