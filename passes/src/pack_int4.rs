//! `pack-int4` (tile level): rewrites every int4 buffer to the int8 buffer of its bytes, so
//! that no later pass or codegen sees a sub-byte dtype. Two int4 share a byte (low nibble
//! first), so the buffer keeps its shape but for the innermost extent, halved; a `T.copy`
//! of int4 moves whole bytes (rule H4: its innermost starts and extents are provably even),
//! so its innermost start and extent are halved exactly; an element load `A[.., j]` becomes
//! the byte `A[.., j // 2]` widened to int32 and its nibble `j % 2` sign-extended
//! (`(v >> j % 2 * 4 & 15) << 28 >> 28`, TileLang's decoding); a gemm of int4 operands takes
//! the bytes with `packed_int4=True`, whose K is twice the byte extent (docs/ir.md, "int4").
//!
//! The function's interface changes with it: an int4 parameter of shape `(…, n)` becomes an
//! int8 one of shape `(…, n / 2)`, which is what the host side passes a kernel anyway (an
//! int4 tensor's device bytes, `interp::pack_int4`). A symbolic innermost extent cannot be
//! halved in a declaration: the pass asks for its value (`-D`).

use crate::analysis::kernels::for_each_kernel;
use crate::context::PassContext;
use crate::pass::Pass;
use std::collections::HashSet;
use tlc_ir::visit::{child_bodies_mut, map_body_exprs};
use tlc_ir::{
    BinOp, BufferDecl, DType, Diagnostic, Expr, ExprKind, PrimFunc, Region, Stmt, StmtKind,
};

pub struct PackInt4;

impl Pass for PackInt4 {
    fn name(&self) -> &'static str {
        "pack-int4"
    }

    fn description(&self) -> &'static str {
        "int4 buffers -> int8 buffers of their bytes (copies halved, loads select a nibble, gemms `packed_int4=True`)"
    }

    fn run(&self, mut func: PrimFunc, _cx: &PassContext) -> Result<PrimFunc, Vec<Diagnostic>> {
        let mut names = HashSet::new();
        let mut diags = Vec::new();
        for d in &mut func.params {
            pack_decl(d, &mut names, &mut diags);
        }
        for_each_kernel(&mut func.body, &mut |k, _| {
            for d in &mut k.allocs {
                pack_decl(d, &mut names, &mut diags);
            }
        });
        if !diags.is_empty() {
            return Err(diags);
        }
        if names.is_empty() {
            return Ok(func);
        }
        // Regions first (they name the buffer), then every load of an element.
        rewrite_regions(&mut func.body, &names);
        map_body_exprs(&mut func.body, &mut |e| unpack_load(e, &names));
        Ok(func)
    }
}

/// An int4 declaration becomes int8 with its innermost extent halved (H2: even).
fn pack_decl(d: &mut BufferDecl, names: &mut HashSet<String>, diags: &mut Vec<Diagnostic>) {
    if d.dtype != DType::Int4 {
        return;
    }
    let Some(last) = d.shape.last_mut() else {
        return;
    };
    match last.as_int() {
        Some(n) => *last = Expr::new(ExprKind::Int(n / 2), last.span),
        None => {
            diags.push(Diagnostic::error(
                last.span,
                format!(
                    "int4 buffer `{}`: its innermost extent is symbolic, and the int8 buffer of \
                     its bytes needs half of it as a declared extent; give its value with -D \
                     (e.g. -D K=256)",
                    d.name.name
                ),
            ));
            return;
        }
    }
    d.dtype = DType::Int8;
    names.insert(d.name.name.clone());
}

fn rewrite_regions(body: &mut [Stmt], names: &HashSet<String>) {
    for s in body.iter_mut() {
        match &mut s.kind {
            StmtKind::Copy { src, dst } => {
                halve_region(src, names);
                halve_region(dst, names);
            }
            StmtKind::Gemm(g) => {
                if names.contains(&g.a.buffer.name) {
                    g.packed_int4 = true;
                }
                halve_region(&mut g.a, names);
                halve_region(&mut g.b, names);
            }
            _ => {}
        }
        for child in child_bodies_mut(s) {
            rewrite_regions(child, names);
        }
    }
}

/// An int4 region's innermost start and extent, in bytes.
fn halve_region(r: &mut Region, names: &HashSet<String>) {
    if !names.contains(&r.buffer.name) {
        return;
    }
    if let Some(range) = r.ranges.last_mut() {
        range.start = half(&range.start);
        range.extent = half(&range.extent);
    }
}

/// `e / 2` for an `e` H4 proved even: exact on the forms it accepts (even constants,
/// products with an even factor, sums and differences of such), `e // 2` otherwise.
fn half(e: &Expr) -> Expr {
    let even = |x: &Expr| x.as_int().filter(|c| c % 2 == 0);
    match &e.kind {
        ExprKind::Int(c) if c % 2 == 0 => Expr::new(ExprKind::Int(c / 2), e.span),
        ExprKind::Binary(BinOp::Mul, a, b) if even(b).is_some() => {
            let c = even(b).unwrap_or(0);
            Expr::binary(BinOp::Mul, (**a).clone(), Expr::int(c / 2), e.span)
        }
        ExprKind::Binary(BinOp::Mul, a, b) if even(a).is_some() => {
            let c = even(a).unwrap_or(0);
            Expr::binary(BinOp::Mul, Expr::int(c / 2), (**b).clone(), e.span)
        }
        ExprKind::Binary(op @ (BinOp::Add | BinOp::Sub), a, b) => {
            Expr::binary(*op, half(a), half(b), e.span)
        }
        _ => Expr::binary(BinOp::FloorDiv, e.clone(), Expr::int(2), e.span),
    }
}

/// `A[.., j]` of an int4 `A` (now its bytes): `(int32(A[.., j // 2]) >> j % 2 * 4 & 15) <<
/// 28 >> 28`, the element sign-extended to the int32 a load of int4 is (H5).
fn unpack_load(e: Expr, names: &HashSet<String>) -> Expr {
    let ExprKind::Load { buffer, indices } = &e.kind else {
        return e;
    };
    if !names.contains(buffer) {
        return e;
    }
    let sp = e.span;
    let Some((j, outer)) = indices.split_last() else {
        return e;
    };
    let mut byte_at = outer.to_vec();
    byte_at.push(Expr::binary(BinOp::FloorDiv, j.clone(), Expr::int(2), sp));
    let byte = Expr::new(
        ExprKind::Load {
            buffer: buffer.clone(),
            indices: byte_at,
        },
        sp,
    );
    let v = Expr::new(ExprKind::Cast(DType::Int32, Box::new(byte)), sp);
    let shift = Expr::binary(
        BinOp::Mul,
        Expr::binary(BinOp::FloorMod, j.clone(), Expr::int(2), sp),
        Expr::int(4),
        sp,
    );
    let nib = Expr::binary(
        BinOp::BitAnd,
        Expr::binary(BinOp::Shr, v, shift, sp),
        Expr::int(15),
        sp,
    );
    let up = Expr::binary(BinOp::Shl, nib, Expr::int(28), sp);
    Expr::binary(BinOp::Shr, up, Expr::int(28), sp)
}
