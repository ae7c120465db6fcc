//! The launch manifest of a prim_func: parameters with dtype, symbolic shape and access (over
//! all its kernels), dims, per `T.Kernel` its entry name (`entry_name`), grid (from the
//! kernel's extents), block (from `threads`) and its arena's size, and the TMA tensor maps
//! its `T.tma_load`s read through (`tensor_map`: one per distinct source parameter, box and
//! swizzle, in order of first use over the kernels in program order).

use tlc_abi::expr::{DimExpr, Op};
use tlc_abi::manifest::{
    Access, DimDecl, Launch, Manifest, OobFill, Param, Swizzle, TensorMapDesc,
};
use tlc_ir::verifier::{FuncInfo, KernelInfo};
use tlc_ir::Target;
use tlc_ir::{visit, BinOp, Expr, ExprKind, Intrinsic, Kernel, PrimFunc, Span, StmtKind};
use tlc_ir::{Diagnostic, Stmt};

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

/// Which buffers the body reads and writes (intrinsic operands by their effect: a
/// `T.tma_load` or `T.cp_async` reads its source).
fn accesses(body: &[Stmt], read: &mut Vec<String>, written: &mut Vec<String>) {
    visit::for_each_stmt(body, &mut |s| {
        if let StmtKind::Store { buffer, .. } | StmtKind::AtomicAdd { buffer, .. } = &s.kind {
            written.push(buffer.name.clone());
        }
        if let StmtKind::AtomicAdd { buffer, .. } = &s.kind {
            read.push(buffer.name.clone());
        }
        if let StmtKind::Intrinsic(i) = &s.kind {
            for a in i.accesses() {
                let name = &a.operand.buffer.name;
                if a.effect.reads() {
                    read.push(name.clone());
                }
                if a.effect.writes() {
                    written.push(name.clone());
                }
            }
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

/// The manifest of `func` whose top-level kernels are `kernels` (in program order), with
/// the verifier's facts `info` about `func`.
pub(super) fn build(
    func: &PrimFunc,
    info: &FuncInfo,
    kernels: &[(&Kernel, Span)],
    target: Target,
    errors: &mut Vec<Diagnostic>,
) -> Option<Manifest> {
    let (mut read, mut written) = (Vec::new(), Vec::new());
    for (kernel, _) in kernels {
        accesses(&kernel.body, &mut read, &mut written);
    }
    let (mut params, mut scratch) = (Vec::new(), Vec::new());
    // Every entry takes the caller's tensors, then the scratch ones (`params_from_manifest`
    // declares them so, and code generation binds `func.params` to them in order).
    let trailing = func.params.len() - func.scratch.len().min(func.params.len());
    if func
        .params
        .iter()
        .enumerate()
        .any(|(i, p)| func.is_scratch(&p.name.name) != (i >= trailing))
    {
        errors.push(Diagnostic::error(
            func.span,
            "internal error: the function's own tensors (`T.alloc_global`) are not its last parameters",
        ));
        return None;
    }
    for p in &func.params {
        if super::ptx_type(p.dtype).is_none() {
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
        let list = if func.is_scratch(&p.name.name) {
            &mut scratch
        } else {
            &mut params
        };
        list.push(Param {
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
            arg: d.param,
            multiple_of: (d.multiple_of > 1).then_some(d.multiple_of),
        })
        .collect();
    // The verifier lists every kernel in program order, nested ones too; they are the
    // top-level ones unless a statement outside every kernel, already an error, holds some.
    if info.kernels.len() != kernels.len() {
        if errors.is_empty() {
            errors.push(Diagnostic::error(
                func.span,
                "internal error: the verifier's facts list other kernels than the function's",
            ));
        }
        return None;
    }
    let mut launches = Vec::new();
    for (i, ((kernel, kspan), facts)) in kernels.iter().zip(&info.kernels).enumerate() {
        let entry = entry_name(&func.name.name, i, kernels.len());
        launches.push(launch(entry, kernel, facts, *kspan, errors));
    }
    let mut tensor_maps: Vec<TensorMapDesc> = Vec::new();
    for (kernel, _) in kernels {
        visit::for_each_stmt(&kernel.body, &mut |s| {
            let StmtKind::Intrinsic(i) = &s.kind else {
                return;
            };
            match tensor_map(func, i, s.span) {
                Some(Ok(desc)) if !tensor_maps.contains(&desc) => tensor_maps.push(desc),
                Some(Err(e)) => errors.push(e),
                _ => {}
            }
        });
    }
    if kernels
        .iter()
        .any(|(k, _)| tlc_ir::verifier::grid_sync::has_grid_sync(&k.body))
    {
        if let Some(p) = func.params.iter().find(|p| p.name.name == GRID_BARRIER) {
            errors.push(Diagnostic::error(
                p.name.span,
                format!(
                    "`{GRID_BARRIER}` is the name of the counter tlc's grid barriers \
                     (`T.sync_grid()`) use: rename this parameter"
                ),
            ));
            return None;
        }
        scratch.push(Param {
            name: GRID_BARRIER.to_string(),
            dtype: tlc_ir::DType::UInt32,
            shape: vec![DimExpr::int(kernels.len() as i64)],
            access: Access::ReadWrite,
        });
    }
    let m = Manifest {
        target,
        params,
        scratch,
        dims,
        kernels: launches.into_iter().collect::<Option<Vec<_>>>()?,
        tensor_maps,
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

/// The tensor map a `T.tma_load` reads through (`tensor_map_desc`), or `None` for any other
/// intrinsic. A source that is not a tensor parameter is an error at the source: the
/// runtime builds tensor maps from kernel arguments.
pub(super) fn tensor_map(
    func: &PrimFunc,
    i: &Intrinsic,
    span: Span,
) -> Option<Result<TensorMapDesc, Diagnostic>> {
    let Intrinsic::TmaLoad { src, .. } = i else {
        return None;
    };
    let name = &src.buffer.name;
    if !func.params.iter().any(|p| &p.name.name == name) {
        return Some(Err(Diagnostic::error(
            src.buffer.span,
            format!(
                "`T.tma_load` reads `{name}` through a TMA tensor map, which the runtime builds \
                 for tensor parameters only; `{name}` is not a parameter of `{}`",
                func.name.name
            ),
        )));
    }
    Some(tensor_map_desc(i).ok_or_else(|| {
        Diagnostic::error(
            span,
            "`T.tma_load` with a box or swizzle the verifier rejects",
        )
    }))
}

/// The tensor map of a `T.tma_load`: its source buffer, its box (outermost first) and
/// swizzle, zeros outside the tensor; `None` for another intrinsic or constants the
/// verifier rejects (box entries 1..=256, swizzle 0 / 32 / 64 / 128).
pub(super) fn tensor_map_desc(i: &Intrinsic) -> Option<TensorMapDesc> {
    let Intrinsic::TmaLoad {
        src,
        box_dims,
        swizzle,
        ..
    } = i
    else {
        return None;
    };
    let box_dims: Option<Vec<u32>> = box_dims.iter().map(|&b| u32::try_from(b).ok()).collect();
    let swizzle = Swizzle::from_bytes(*swizzle)?;
    Some(TensorMapDesc {
        param: src.buffer.name.clone(),
        box_dims: box_dims?,
        swizzle,
        fill: OobFill::Zero,
    })
}

/// How to launch one kernel: grid, block, dynamic shared memory. The block shape and the
/// arena's size are the verifier's facts (`facts`: constants in 1..=1024 per axis).
fn launch(
    entry: String,
    kernel: &Kernel,
    facts: &KernelInfo,
    kspan: Span,
    errors: &mut Vec<Diagnostic>,
) -> Option<Launch> {
    let grid: Option<Vec<DimExpr>> = kernel.grid.iter().map(|e| dim_expr(e, errors)).collect();
    let mut block = Vec::new();
    for &t in &facts.threads {
        match u32::try_from(t) {
            Ok(v) if v > 0 => block.push(v),
            _ => errors.push(Diagnostic::error(
                kspan,
                format!("internal error: the verifier's block extent {t} is not positive"),
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
    let shared_bytes = match facts.arena_bytes {
        Some(bytes) => bytes,
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
    // The verifier checked it (K14): constants, trailing 1s dropped; a cluster of one
    // block is none.
    let cluster: Vec<u32> = match kernel.cluster_size() {
        Some(n) if n > 1 => kernel
            .cluster
            .iter()
            .map(|e| e.as_int().and_then(|v| u32::try_from(v).ok()).unwrap_or(1))
            .collect(),
        _ => Vec::new(),
    };
    Some(Launch {
        entry,
        grid: grid?,
        block,
        shared_bytes: DimExpr::int(shared_bytes),
        cluster,
        cooperative: tlc_ir::verifier::grid_sync::has_grid_sync(&kernel.body),
    })
}

/// The scratch tensor the grid barriers of a function count on (`grid_sync.rs`): uint32,
/// one element per kernel (kernel `i` counts on element `i`), zeroed by the runtime per
/// launch. Not a name the caller can give a tensor in PTX's symbols and the manifest: a
/// function parameter of this name is refused.
pub(super) const GRID_BARRIER: &str = "tlc_grid_barrier";
