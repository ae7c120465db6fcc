//! The launch manifest of a prim_func: parameters with dtype, symbolic shape and access (over
//! all its kernels), dims, and per `T.Kernel` its entry name (`entry_name`), grid (from the
//! kernel's extents), block (from `threads`) and its arena's size.

use tlc_ir::Target;
use tlc_ir::{visit, BinOp, DType, Expr, ExprKind, Kernel, PrimFunc, Span, StmtKind};
use tlc_ir::{Diagnostic, Stmt};
use tlc_runtime::expr::{DimExpr, Op};
use tlc_runtime::manifest::{Access, DimDecl, Launch, Manifest, Param};

/// A dim expression of the manifest from an IR expression over literals and symbolic dims.
pub(super) fn dim_expr(e: &Expr, errors: &mut Vec<Diagnostic>) -> Option<DimExpr> {
    let op = match &e.kind {
        ExprKind::Int(v) => return Some(DimExpr::int(*v)),
        ExprKind::Var(n) => return Some(DimExpr::dim(n)),
        ExprKind::Binary(op, _, _) => match op {
            BinOp::Add => Op::Add,
            BinOp::Sub => Op::Sub,
            BinOp::Mul => Op::Mul,
            BinOp::FloorDiv => Op::FloorDiv,
            BinOp::FloorMod => Op::FloorMod,
            BinOp::CeilDiv => Op::CeilDiv,
            BinOp::Min => Op::Min,
            BinOp::Max => Op::Max,
            _ => {
                errors.push(Diagnostic::error(
                    e.span,
                    "a launch dimension may only use + - * // % T.ceildiv T.min T.max",
                ));
                return None;
            }
        },
        _ => {
            errors.push(Diagnostic::error(
                e.span,
                "a launch dimension must be an expression over literals and symbolic dims",
            ));
            return None;
        }
    };
    let ExprKind::Binary(_, a, b) = &e.kind else {
        return None;
    };
    let a = dim_expr(a, errors)?;
    let b = dim_expr(b, errors)?;
    Some(DimExpr::op(op, a, b))
}

/// Which buffers the body reads and writes.
fn accesses(body: &[Stmt], read: &mut Vec<String>, written: &mut Vec<String>) {
    visit::for_each_stmt(body, &mut |s| {
        if let StmtKind::Store { buffer, .. } = &s.kind {
            written.push(buffer.name.clone());
        }
        for e in visit::stmt_exprs(s) {
            visit::for_each_subexpr(e, &mut |sub| {
                if let ExprKind::Load { buffer, .. } = &sub.kind {
                    read.push(buffer.clone());
                }
            });
        }
    });
}

/// The `.entry` name of kernel `index` of `count` in function `func`: the function's own
/// name when it has one kernel (so single-kernel PTX is unchanged), `<func>_k<index>`
/// (from 0, in program order) when it has several.
pub(super) fn entry_name(func: &str, index: usize, count: usize) -> String {
    if count == 1 {
        func.to_string()
    } else {
        format!("{func}_k{index}")
    }
}

/// The manifest of `func` whose top-level kernels are `kernels` (in program order).
pub(super) fn build(
    func: &PrimFunc,
    kernels: &[(&Kernel, Span)],
    target: Target,
    errors: &mut Vec<Diagnostic>,
) -> Option<Manifest> {
    let (mut read, mut written) = (Vec::new(), Vec::new());
    for (kernel, _) in kernels {
        accesses(&kernel.body, &mut read, &mut written);
    }
    let mut params = Vec::new();
    for p in &func.params {
        if super::ptx_type(p.dtype).is_none() || p.dtype == DType::Bool {
            errors.push(Diagnostic::error(
                p.span,
                format!("codegen does not support {} tensors yet", p.dtype),
            ));
            continue;
        }
        let shape: Option<Vec<DimExpr>> = p.shape.iter().map(|e| dim_expr(e, errors)).collect();
        let (r, w) = (read.contains(&p.name.name), written.contains(&p.name.name));
        let access = match (r, w) {
            (true, true) => Access::ReadWrite,
            (false, true) => Access::Write,
            _ => Access::Read,
        };
        params.push(Param {
            name: p.name.name.clone(),
            dtype: p.dtype,
            shape: shape?,
            access,
        });
    }
    let dims = func
        .dims
        .iter()
        .map(|d| DimDecl {
            name: d.name.clone(),
            dtype: d.dtype,
        })
        .collect();
    let mut launches = Vec::new();
    for (i, (kernel, kspan)) in kernels.iter().enumerate() {
        let entry = entry_name(&func.name.name, i, kernels.len());
        launches.push(launch(entry, kernel, *kspan, errors));
    }
    let m = Manifest {
        target,
        params,
        dims,
        kernels: launches.into_iter().collect::<Option<Vec<_>>>()?,
        tensor_maps: Vec::new(),
    };
    if let Err(e) = m.validate() {
        errors.push(Diagnostic::error(
            func.span,
            format!("bad launch manifest: {e}"),
        ));
        return None;
    }
    Some(m)
}

/// How to launch one kernel: grid, block, dynamic shared memory.
fn launch(
    entry: String,
    kernel: &Kernel,
    kspan: Span,
    errors: &mut Vec<Diagnostic>,
) -> Option<Launch> {
    let grid: Option<Vec<DimExpr>> = kernel.grid.iter().map(|e| dim_expr(e, errors)).collect();
    let mut block = Vec::new();
    for t in &kernel.threads {
        match t.as_int().and_then(|v| u32::try_from(v).ok()) {
            Some(v) if v > 0 => block.push(v),
            _ => errors.push(Diagnostic::error(
                t.span,
                "threads must be positive constants",
            )),
        }
    }
    if block.is_empty() {
        block.push(1);
    }
    let has_shared = kernel
        .allocs
        .iter()
        .any(|a| a.scope == tlc_ir::Scope::Shared);
    let shared_bytes = match &kernel.arena {
        Some(a) => a.bytes,
        // `emit` checked the level (planned shared memory).
        None if has_shared => {
            errors.push(Diagnostic::error(
                kspan,
                "the kernel's shared memory has no arena",
            ));
            0
        }
        None => 0,
    };
    Some(Launch {
        entry,
        grid: grid?,
        block,
        shared_bytes: DimExpr::int(shared_bytes),
    })
}
