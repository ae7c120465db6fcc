//! Lowers a `PrimFunc` once, before it runs, into a form that is fast to execute: every name
//! is resolved to a slot (scalar variables) or a `BufRef` (buffers), and every expression
//! carries its dtype with the implicit conversions of `crate::types` made explicit as
//! `Convert` nodes. Type errors and undefined names are reported here, with spans, before
//! any block runs.

use crate::diagnostic::Diagnostic;
use crate::dtype::DType;
use crate::interp::scalar::{convert, Scalar};
use crate::intrinsic;
use crate::ir::{
    BinOp, BufferDecl, ElemRef, Expr, ExprKind, ForKind, Gemm, Intrinsic, Kernel, PrimFunc, Region,
    Scope, Stmt, StmtKind, ThreadTag, UnOp,
};
use crate::span::Span;
use crate::types::{self, Typed};
use crate::verifier::const_int;
use crate::wgmma::{SmemOperand, Swizzle};

/// A buffer: a function parameter (global) or an allocation of the running kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum BufRef {
    Global(usize),
    Local(usize),
}

/// A typed expression.
#[derive(Clone, Debug)]
pub(crate) struct CExpr {
    pub kind: CKind,
    pub dtype: DType,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub(crate) enum CKind {
    /// A value of `dtype`. (Before `coerce`, a float literal holds its exact value.)
    Const(Scalar),
    Var(usize),
    Load {
        buf: BufRef,
        indices: Vec<CExpr>,
    },
    Neg(Box<CExpr>),
    Not(Box<CExpr>),
    /// `~a` on an integer of the node's dtype.
    BitNot(Box<CExpr>),
    /// A math function; the arguments already have the node's dtype.
    Math(crate::ir::MathFn, Vec<CExpr>),
    /// Arithmetic; both operands already have the node's dtype.
    Arith(BinOp, Box<CExpr>, Box<CExpr>),
    /// Comparison; both operands already have one common dtype.
    Compare(BinOp, Box<CExpr>, Box<CExpr>),
    And(Box<CExpr>, Box<CExpr>),
    Or(Box<CExpr>, Box<CExpr>),
    /// Conversion of the operand to the node's dtype (`T.cast` or implicit).
    Convert(Box<CExpr>),
    /// The operand's bits (its dtype's width) read as a value of the node's dtype.
    Reinterpret(Box<CExpr>),
    /// `T.if_then_else`; both branches already have the node's dtype.
    Select(Box<CExpr>, Box<CExpr>, Box<CExpr>),
}

/// A region with its bounds as expressions.
#[derive(Clone, Debug)]
pub(crate) struct CRegion {
    pub buf: BufRef,
    pub starts: Vec<CExpr>,
    pub extents: Vec<CExpr>,
    pub span: Span,
}

/// An intrinsic operand `buf[i, j]`: where a run of consecutive elements starts.
#[derive(Clone, Debug)]
pub(crate) struct CRef {
    pub buf: BufRef,
    pub indices: Vec<CExpr>,
}

/// A thread-level intrinsic: its definition (who runs it together, whether it may run at
/// block level) and its call (`ops/intrinsics.rs` gives their meaning).
#[derive(Clone, Debug)]
pub(crate) struct CIntrinsic {
    pub def: &'static intrinsic::IntrinsicDef,
    pub call: CCall,
}

/// The compiled arguments of an intrinsic call.
#[derive(Clone, Debug)]
pub(crate) enum CCall {
    CpAsync {
        dst: CRef,
        src: CRef,
        bytes: usize,
        pred: Option<CExpr>,
    },
    Commit,
    Wait(usize),
    Ldmatrix {
        dst: CRef,
        src: CRef,
        num: usize,
        trans: bool,
    },
    ShflXor {
        dst: CRef,
        src: CRef,
        offset: usize,
    },
    ShflDown {
        dst: CRef,
        src: CRef,
        offset: usize,
    },
    /// `T.shfl_sync_*`: the lanes of `mask` exchange `src` at the lane each computes from
    /// its `lane` operand and its segment `width` (`intrinsic::ShuffleMode::source`); the
    /// operands are evaluated by each lane.
    ShflSync {
        mode: intrinsic::ShuffleMode,
        dst: CRef,
        src: CRef,
        lane: CExpr,
        width: CExpr,
        mask: CExpr,
    },
    Mma {
        acc: CRef,
        a: CRef,
        b: CRef,
        /// Each int8 byte two int4 along K (`m16n8k64.s4`).
        packed_int4: bool,
    },
    /// `T.atomic_add_ret`: `dst += value` atomically, the old value into `old`.
    AtomicAddRet {
        old: CRef,
        dst: CRef,
        value: CRef,
    },
    MbarrierInit {
        bar: CRef,
        count: i64,
    },
    /// `T.mbarrier_arrive` (`tx` 0) and `T.mbarrier_arrive_expect_tx`.
    MbarrierArrive {
        bar: CRef,
        tx: i64,
    },
    MbarrierWait {
        bar: CRef,
        parity: CExpr,
    },
    FenceProxyAsync,
    TmaLoad {
        dst: CRef,
        src: CRef,
        bar: CRef,
        box_dims: Vec<usize>,
        swizzle: Swizzle,
        /// The cluster ranks the box lands in (`multicast=`); 0: the issuer's block only.
        multicast: u32,
    },
    /// `T.mbarrier_arrive_cluster(bar, rank)`.
    MbarrierArriveCluster {
        bar: CRef,
        rank: CExpr,
    },
    /// `T.cluster_sync()`: the scheduler's (`tasks.rs`), a barrier over every thread of
    /// the cluster.
    ClusterSync,
    WgmmaFence,
    WgmmaCommit,
    WgmmaWait(usize),
    Wgmma(Box<CWgmma>),
    SetMaxNReg,
    /// `T.bar_sync` / `T.bar_arrive`: the barrier's id and thread count.
    BarSync {
        id: i64,
        count: usize,
    },
    BarArrive {
        id: i64,
        count: usize,
    },
    /// `T.print`, `T.print_msg`, `T.print_elem` (`print.rs`).
    Print(Box<super::print::CPrint>),
    /// `T.philox_init(state, seed, seq, offset)` (`ops/rng.rs`).
    PhiloxInit {
        state: CRef,
        seed: CExpr,
        seq: CExpr,
        offset: CExpr,
    },
    /// `T.philox_rand` (`uniform` false) and `T.philox_uniform`: one draw into `dst`.
    PhiloxDraw {
        dst: CRef,
        state: CRef,
        uniform: bool,
    },
}

/// A `T.wgmma` or `T.wgmma_rs`: its operands, N, the descriptors' layouts (no A layout:
/// A is in each thread's registers, `T.wgmma_rs`) and the predicate.
#[derive(Clone, Debug)]
pub(crate) struct CWgmma {
    pub acc: CRef,
    pub a: CRef,
    pub b: CRef,
    pub n: usize,
    /// The instruction's k (`wgmma::instruction_k` of the operands' dtype).
    pub k: usize,
    pub a_layout: Option<SmemOperand>,
    pub b_layout: SmemOperand,
    pub accumulate: Option<CExpr>,
}

#[derive(Clone, Debug)]
pub(crate) struct CStmt {
    pub kind: CStmtKind,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub(crate) enum CStmtKind {
    Kernel(Box<CKernel>),
    /// Every loop kind runs serially (per thread at the thread level), except loops bound
    /// to a thread index (`thread_axis`: 0 for `threadIdx.x`, 1 for `.y`, 2 for `.z`), whose
    /// iterations are the threads of the block (`lockstep.rs`).
    Loop {
        var: usize,
        start: CExpr,
        stop: CExpr,
        body: Vec<CStmt>,
        thread_axis: Option<usize>,
        /// A `T.Parallel` loop: its variable's name. At the tile level its iterations are
        /// checked for conflicts (`parallel.rs`).
        parallel: Option<Box<str>>,
        /// What one iteration costs against the block's loop budget: the iterations of the
        /// constant loops directly in its body (1 when none), which it pays for when it
        /// starts, so a runaway nest stops at once ([`loop_cost`]).
        cost: u64,
        /// An enclosing loop paid for this one's iterations already.
        prepaid: bool,
        /// A thread loop that continues the one before it across a `T.sync_grid()`
        /// (`grid_sync.rs`): its threads keep the registers that one left them.
        resume: bool,
    },
    /// `while cond: body` (per thread at the thread level: a divergent loop).
    While {
        cond: CExpr,
        body: Vec<CStmt>,
    },
    /// `T.sync_threads()`.
    Barrier,
    /// `T.sync_grid()`: after compiling, only directly in a kernel's body, where it splits
    /// the body into phases (`grid_sync.rs`).
    GridSync,
    /// `T.thread_allreduce` (`lockstep.rs` runs it).
    AllReduce(Box<CAllReduce>),
    If {
        cond: CExpr,
        then_body: Vec<CStmt>,
        else_body: Vec<CStmt>,
    },
    Let {
        var: usize,
        value: CExpr,
    },
    Store {
        buf: BufRef,
        indices: Vec<CExpr>,
        /// Already converted to the buffer's dtype.
        value: CExpr,
    },
    /// `T.atomic_add`; the value is already converted to the buffer's dtype.
    AtomicAdd {
        buf: BufRef,
        indices: Vec<CExpr>,
        /// Already converted to the buffer's dtype.
        value: CExpr,
    },
    Copy {
        src: CRegion,
        dst: CRegion,
    },
    Gemm(Box<CGemm>),
    Fill {
        dst: CRegion,
        /// Already converted to the buffer's dtype.
        value: CExpr,
    },
    Reduce(Box<crate::interp::ops::reduce::CReduce>),
    Intrinsic(Box<CIntrinsic>),
    /// `T.fresh(...)`: the shared buffers (kernel allocations) whose contents are discarded.
    Fresh(Vec<BufRef>),
}

#[derive(Clone, Debug)]
pub(crate) struct CGemm {
    pub a: CRegion,
    pub b: CRegion,
    pub c: CRegion,
    pub trans_a: bool,
    pub trans_b: bool,
    pub clear_accum: bool,
    pub packed_int4: bool,
}

#[derive(Clone, Debug)]
pub(crate) struct CKernel {
    pub grid: Vec<CExpr>,
    pub block_vars: Vec<usize>,
    /// The block shape, x first, padded to 3 with 1s.
    pub threads: [usize; 3],
    /// Blocks per cluster along x, y, z (`[1, 1, 1]`: none). At the thread level the blocks
    /// of a cluster run together (`exec.rs`).
    pub cluster: [usize; 3],
    /// How many of `threads` the kernel declares (1 to 3), for messages.
    pub thread_dims: usize,
    /// The kernel has a `threadIdx.*` binding loop: its threads run in lockstep, local and
    /// fragment allocations are per thread.
    pub thread_level: bool,
    pub allocs: Vec<CAlloc>,
    /// `T.shared_arena`: the arena's bytes and, per allocation (same order as `allocs`), its
    /// byte offset (`None` for non-shared allocations).
    pub arena: Option<CArena>,
    pub body: Vec<CStmt>,
}

#[derive(Clone, Debug)]
pub(crate) struct CArena {
    pub bytes: usize,
    pub offsets: Vec<Option<usize>>,
}

#[derive(Clone, Debug)]
pub(crate) struct CAlloc {
    pub name: String,
    pub dtype: DType,
    pub scope: Scope,
    pub shape: Vec<CExpr>,
    /// One copy per thread (a local or fragment buffer named inside a `threadIdx` loop).
    pub per_thread: bool,
    /// A `T.alloc_reducer`: `T.Parallel` iterations combine their updates into it, in any
    /// order, which is no conflict (`parallel.rs`).
    pub reducer: bool,
}

/// A compiled function.
#[derive(Clone, Debug)]
pub(crate) struct CFunc {
    /// Number of scalar slots.
    pub n_vars: usize,
    /// Slot of each symbolic dim, in `PrimFunc::dims` order.
    pub dim_slots: Vec<usize>,
    pub body: Vec<CStmt>,
}

/// Compiles `func` (see the module doc).
pub(crate) fn compile(func: &PrimFunc) -> Result<CFunc, Diagnostic> {
    let mut c = Compiler {
        vars: Vec::new(),
        n_vars: 0,
        globals: func.params.iter().map(BufInfo::of).collect(),
        locals: Vec::new(),
        in_kernel: false,
        bound_axes: [false; 3],
        thread_vars: Vec::new(),
    };
    let dim_slots = func.dims.iter().map(|d| c.bind(&d.name, d.dtype)).collect();
    let body = c.body(&func.body)?;
    Ok(CFunc {
        n_vars: c.n_vars,
        dim_slots,
        body,
    })
}

/// A compiled `T.thread_allreduce`: the value is already converted to `dtype`, the result
/// buffer's.
#[derive(Clone, Debug)]
pub struct CAllReduce {
    pub op: crate::ir::AllReduceOp,
    pub dtype: DType,
    pub buf: BufRef,
    pub indices: Vec<CExpr>,
    pub value: CExpr,
    /// The reduced thread axes.
    pub axes: Vec<usize>,
    /// The shared buffer the steps between warps exchange through.
    pub scratch: Option<BufRef>,
}

struct BufInfo {
    name: String,
    dtype: DType,
    scope: Scope,
    rank: usize,
    /// A local or fragment buffer of a thread-level kernel: one copy per thread.
    per_thread: bool,
}

impl BufInfo {
    fn of(decl: &BufferDecl) -> BufInfo {
        BufInfo {
            name: decl.name.name.clone(),
            dtype: decl.dtype,
            scope: decl.scope,
            rank: decl.shape.len(),
            per_thread: false,
        }
    }
}

struct Compiler {
    /// Scalar variables in scope: name, slot, dtype (innermost last).
    vars: Vec<(String, usize, DType)>,
    n_vars: usize,
    globals: Vec<BufInfo>,
    /// Allocations of the kernel being compiled.
    locals: Vec<BufInfo>,
    in_kernel: bool,
    /// The thread axes bound by the enclosing `threadIdx.*` loops.
    bound_axes: [bool; 3],
    /// The variables of the enclosing `threadIdx.*` loops, with their axes.
    thread_vars: Vec<(String, usize)>,
}

type R<T> = Result<T, Diagnostic>;

impl Compiler {
    fn bind(&mut self, name: &str, dtype: DType) -> usize {
        let slot = self.n_vars;
        self.n_vars += 1;
        self.vars.push((name.to_string(), slot, dtype));
        slot
    }

    fn var(&self, name: &str) -> Option<(usize, DType)> {
        self.vars
            .iter()
            .rev()
            .find(|(n, _, _)| n == name)
            .map(|&(_, slot, dtype)| (slot, dtype))
    }

    fn buffer(&self, name: &str, span: Span) -> R<(BufRef, DType, usize)> {
        if let Some(i) = self.locals.iter().position(|b| b.name == name) {
            let b = &self.locals[i];
            if b.per_thread && !self.bound_axes.contains(&true) {
                return Err(Diagnostic::error(
                    span,
                    format!(
                        "`{name}` is a per-thread buffer of a thread-level kernel; it can only \
                         be used inside the kernel's `T.thread_binding` loop"
                    ),
                ));
            }
            return Ok((BufRef::Local(i), b.dtype, b.rank));
        }
        if let Some(i) = self.globals.iter().position(|b| b.name == name) {
            let b = &self.globals[i];
            return Ok((BufRef::Global(i), b.dtype, b.rank));
        }
        Err(Diagnostic::error(
            span,
            format!("undefined buffer `{name}`"),
        ))
    }

    /// Compiles a statement list; names it binds go out of scope at its end.
    fn body(&mut self, stmts: &[Stmt]) -> R<Vec<CStmt>> {
        let mark = self.vars.len();
        // A note means nothing: it is not compiled, wherever it is.
        let out = stmts
            .iter()
            // A note means nothing; a reducer's finalize has nothing left to do here: the
            // interpreter folds every update into the reducer as it runs it (docs/ir.md,
            // "Reducers").
            .filter(|s| !matches!(s.kind, StmtKind::Note(_) | StmtKind::FinalizeReducer(_)))
            .map(|s| self.stmt(s))
            .collect::<R<Vec<_>>>();
        self.vars.truncate(mark);
        out
    }

    fn stmt(&mut self, stmt: &Stmt) -> R<CStmt> {
        let span = stmt.span;
        if !self.in_kernel && !matches!(stmt.kind, StmtKind::Kernel(_) | StmtKind::Let { .. }) {
            return Err(Diagnostic::error(
                span,
                "the interpreter runs only `T.Kernel` blocks and lets outside a kernel",
            ));
        }
        let kind = match &stmt.kind {
            StmtKind::Kernel(k) => {
                if self.in_kernel {
                    return Err(Diagnostic::error(span, "`T.Kernel` inside a kernel"));
                }
                CStmtKind::Kernel(Box::new(self.kernel(k, span)?))
            }
            StmtKind::For(f) => {
                let start = self.int_expr(&f.start)?;
                let stop = self.int_expr(&f.stop)?;
                let thread_axis = match f.kind {
                    ForKind::ThreadBinding(tag) => thread_axis(tag),
                    _ => None,
                };
                let outer_axes = self.bound_axes;
                if let Some(axis) = thread_axis {
                    if self.bound_axes[axis] {
                        return Err(Diagnostic::error(
                            f.var.span,
                            format!(
                                "loop `{}` binds a thread index that an enclosing loop already binds",
                                f.var.name
                            ),
                        ));
                    }
                    self.bound_axes[axis] = true;
                }
                let outer_vars = self.thread_vars.len();
                if let Some(axis) = thread_axis {
                    self.thread_vars.push((f.var.name.clone(), axis));
                }
                let mark = self.vars.len();
                let var = self.bind(&f.var.name, DType::Int32);
                let body = self.body(&f.body);
                self.vars.truncate(mark);
                self.bound_axes = outer_axes;
                self.thread_vars.truncate(outer_vars);
                let mut body = body?;
                let cost = prepay(&mut body, thread_axis.is_none());
                CStmtKind::Loop {
                    var,
                    start,
                    stop,
                    body,
                    thread_axis,
                    parallel: (f.kind == ForKind::Parallel).then(|| f.var.name.as_str().into()),
                    cost,
                    prepaid: false,
                    resume: false,
                }
            }
            StmtKind::Intrinsic(i) => CStmtKind::Intrinsic(Box::new(self.intrinsic(i, span)?)),
            StmtKind::AllReduce(r) => {
                let (_, dtype, _) = self.buffer(&r.buffer.name, r.buffer.span)?;
                let (buf, indices, value) =
                    self.element_write(&r.buffer, &r.indices, &r.value, span)?;
                let mut axes = Vec::new();
                for t in &r.threads {
                    match self.thread_vars.iter().rev().find(|(n, _)| *n == t.name) {
                        Some(&(_, axis)) => axes.push(axis),
                        None => {
                            return Err(Diagnostic::error(
                                t.span,
                                format!(
                                    "`{}` is not the variable of an enclosing `threadIdx` loop",
                                    t.name
                                ),
                            ))
                        }
                    }
                }
                let scratch = match &r.scratch {
                    Some(s) => Some(self.buffer(&s.name, s.span)?.0),
                    None => None,
                };
                CStmtKind::AllReduce(Box::new(CAllReduce {
                    op: r.op,
                    dtype,
                    buf,
                    indices,
                    value,
                    axes,
                    scratch,
                }))
            }
            StmtKind::Barrier => {
                if !self.bound_axes.contains(&true) {
                    return Err(Diagnostic::error(
                        span,
                        "`T.sync_threads()` outside a thread-binding loop",
                    ));
                }
                CStmtKind::Barrier
            }
            StmtKind::GridSync => CStmtKind::GridSync,
            // `body` drops notes before they get here.
            StmtKind::Note(_) => {
                return Err(Diagnostic::error(span, "a `T.note` has nothing to run"))
            }
            StmtKind::FinalizeReducer(_) => {
                return Err(Diagnostic::error(
                    span,
                    "a `T.finalize_reducer` has nothing to run",
                ))
            }
            StmtKind::Fresh(bufs) => {
                let mut refs = Vec::with_capacity(bufs.len());
                for b in bufs {
                    match self.buffer(&b.name, b.span)? {
                        (r @ BufRef::Local(_), _, _) => refs.push(r),
                        (BufRef::Global(_), _, _) => {
                            return Err(Diagnostic::error(
                                b.span,
                                format!(
                                    "`T.fresh` discards shared buffers; `{}` is a parameter",
                                    b.name
                                ),
                            ))
                        }
                    }
                }
                CStmtKind::Fresh(refs)
            }
            StmtKind::If {
                cond,
                then_body,
                else_body,
            } => CStmtKind::If {
                cond: self.bool_expr(cond)?,
                then_body: self.body(then_body)?,
                else_body: self.body(else_body)?,
            },
            StmtKind::While { cond, body } => CStmtKind::While {
                cond: self.bool_expr(cond)?,
                body: self.body(body)?,
            },
            StmtKind::Let { var, dtype, value } => {
                let (v, t) = self.expr(value)?;
                let dtype = dtype.unwrap_or(t.dtype);
                let value = coerce(v, dtype);
                let var = self.bind(&var.name, dtype);
                CStmtKind::Let { var, value }
            }
            StmtKind::Store {
                buffer,
                indices,
                value,
            } => {
                let (buf, indices, value) = self.element_write(buffer, indices, value, span)?;
                CStmtKind::Store {
                    buf,
                    indices,
                    value,
                }
            }
            StmtKind::AtomicAdd {
                buffer,
                indices,
                value,
            } => {
                let (buf, indices, value) = self.element_write(buffer, indices, value, span)?;
                CStmtKind::AtomicAdd {
                    buf,
                    indices,
                    value,
                }
            }
            StmtKind::Copy { src, dst } => CStmtKind::Copy {
                src: self.region(src, span)?,
                dst: self.region(dst, span)?,
            },
            StmtKind::Gemm(g) => CStmtKind::Gemm(Box::new(self.gemm(g, span)?)),
            StmtKind::Fill { dst, value } => {
                let dst = self.region(dst, span)?;
                let dtype = self.region_dtype(dst.buf);
                let value = coerce(self.expr(value)?.0, dtype);
                CStmtKind::Fill { dst, value }
            }
            StmtKind::Reduce(r) => {
                let (src, _, rank) = self.buffer(&r.src.name, span)?;
                let (dst, _, _) = self.buffer(&r.dst.name, span)?;
                let axis = r.axis(rank).ok_or_else(|| {
                    Diagnostic::error(
                        span,
                        format!("`dim={}` is not a dimension of `{}`", r.dim, r.src.name),
                    )
                })?;
                CStmtKind::Reduce(Box::new(crate::interp::ops::reduce::CReduce {
                    kind: r.kind,
                    src,
                    dst,
                    axis,
                    clear: r.clear,
                }))
            }
        };
        Ok(CStmt { kind, span })
    }

    /// The operands of a write of one element (a store, an atomic add): the buffer, the
    /// compiled indices and the value converted to the buffer's dtype.
    fn element_write(
        &mut self,
        buffer: &crate::ir::Ident,
        indices: &[Expr],
        value: &Expr,
        span: Span,
    ) -> R<(BufRef, Vec<CExpr>, CExpr)> {
        let (buf, dtype, rank) = self.buffer(&buffer.name, buffer.span)?;
        if indices.len() != rank {
            return Err(rank_error(&buffer.name, rank, indices.len(), span));
        }
        let indices = indices.iter().map(|e| self.int_expr(e)).collect::<R<_>>()?;
        let value = coerce(self.expr(value)?.0, dtype);
        Ok((buf, indices, value))
    }

    fn kernel(&mut self, k: &Kernel, span: Span) -> R<CKernel> {
        let grid = k.grid.iter().map(|e| self.int_expr(e)).collect::<R<_>>()?;
        let mut threads = [1usize; 3];
        if k.threads.is_empty() || k.threads.len() > 3 {
            return Err(Diagnostic::error(
                span,
                "a thread block has 1 to 3 dimensions",
            ));
        }
        for (slot, t) in threads.iter_mut().zip(&k.threads) {
            match const_int(t).and_then(|v| usize::try_from(v).ok()) {
                Some(v) if (1..=1024).contains(&v) => *slot = v,
                _ => {
                    return Err(Diagnostic::error(
                        t.span,
                        format!("thread count `{t}` must be a constant from 1 to 1024"),
                    ))
                }
            }
        }
        if threads.iter().product::<usize>() > 1024 {
            return Err(Diagnostic::error(
                span,
                "a thread block has at most 1024 threads",
            ));
        }
        // Fragment buffers named inside a `threadIdx` loop are per thread, and so are local
        // buffers written there (or named as an operand); in a kernel that mixes tile ops
        // with thread regions (docs/ir.md, "Thread regions"), those the tile ops use stay
        // whole tiles. A local the regions only read — a `T.alloc_var` the block writes
        // outside them, as lower-tile-ops leaves `count = 0` — holds one value for the
        // whole block, the value every thread's copy has once thread-binding puts the
        // write inside the binding loop.
        let mut thread_level = false;
        let mut in_regions: Vec<&str> = Vec::new();
        let mut written_in_regions: Vec<&str> = Vec::new();
        crate::visit::for_each_stmt(&k.body, &mut |s| {
            if let StmtKind::For(f) = &s.kind {
                if let ForKind::ThreadBinding(tag) = f.kind {
                    if thread_axis(tag).is_some() {
                        thread_level = true;
                        crate::visit::for_each_stmt(&f.body, &mut |inner| {
                            in_regions
                                .extend(crate::visit::stmt_buffer_uses(inner).iter().map(|u| u.0));
                            written_in_regions.extend(
                                crate::visit::stmt_buffer_idents(inner)
                                    .iter()
                                    .map(|i| i.name.as_str()),
                            );
                        });
                    }
                }
            }
        });
        let arena = match &k.arena {
            None => None,
            Some(a) => {
                let bytes = usize::try_from(a.bytes).map_err(|_| {
                    Diagnostic::error(span, format!("the shared arena has {} bytes", a.bytes))
                })?;
                let mut offsets = Vec::with_capacity(k.allocs.len());
                for decl in &k.allocs {
                    if decl.scope != Scope::Shared {
                        offsets.push(None);
                        continue;
                    }
                    let name = &decl.name.name;
                    match a.offset(name).map(usize::try_from) {
                        Some(Ok(o)) => offsets.push(Some(o)),
                        Some(Err(_)) => {
                            return Err(Diagnostic::error(
                                decl.name.span,
                                format!("`{name}` has a negative offset in the shared arena"),
                            ))
                        }
                        None => {
                            return Err(Diagnostic::error(
                                decl.name.span,
                                format!("shared buffer `{name}` has no offset in the shared arena"),
                            ))
                        }
                    }
                }
                Some(CArena { bytes, offsets })
            }
        };
        let mark = self.vars.len();
        let block_vars = k
            .block_vars
            .iter()
            .map(|v| self.bind(&v.name, DType::Int32))
            .collect();
        let mut allocs = Vec::new();
        for decl in &k.allocs {
            let shape = decl
                .shape
                .iter()
                .map(|e| self.int_expr(e))
                .collect::<R<_>>()?;
            let name = decl.name.name.as_str();
            let per_thread = thread_level
                && match decl.scope {
                    Scope::Fragment => in_regions.contains(&name),
                    Scope::Local => written_in_regions.contains(&name),
                    _ => false,
                };
            allocs.push(CAlloc {
                name: decl.name.name.clone(),
                dtype: decl.dtype,
                scope: decl.scope,
                shape,
                per_thread,
                reducer: k.reducers.iter().any(|r| r.buffer.name == decl.name.name),
            });
            let mut info = BufInfo::of(decl);
            info.per_thread = per_thread;
            self.locals.push(info);
        }
        self.in_kernel = true;
        let body = self.body(&k.body);
        self.in_kernel = false;
        self.locals.clear();
        self.vars.truncate(mark);
        Ok(CKernel {
            grid,
            block_vars,
            threads,
            cluster: k
                .cluster_dims()
                .unwrap_or([1, 1, 1])
                .map(|c| usize::try_from(c).unwrap_or(1).max(1)),
            thread_dims: k.threads.len(),
            thread_level,
            allocs,
            arena,
            body: super::grid_sync::hoist(body?),
        })
    }

    /// An intrinsic, with the rules the interpreter relies on: where it may run (I1) and
    /// its definition's operand rules (`intrinsic::check`, as the verifier applies them).
    fn intrinsic(&mut self, i: &Intrinsic, span: Span) -> R<CIntrinsic> {
        let def = i.def();
        if !def.block_level && !self.bound_axes.contains(&true) {
            return Err(Diagnostic::error(
                span,
                format!("`{}` outside a thread-binding loop", def.name),
            ));
        }
        let lookup = |name: &str| {
            self.locals
                .iter()
                .chain(&self.globals)
                .find(|b| b.name == name)
                .map(|b| intrinsic::BufFacts {
                    name: &b.name,
                    scope: b.scope,
                    dtype: b.dtype,
                    rank: b.rank,
                })
        };
        if let Some(v) = intrinsic::check(i, &lookup).into_iter().next() {
            let at = match v.at {
                Some(r) if !r.buffer.span.is_dummy() => r.buffer.span,
                _ => span,
            };
            return Err(Diagnostic::error(at, v.message));
        }
        let call = match i {
            Intrinsic::CpAsync {
                dst,
                src,
                bytes,
                pred,
            } => CCall::CpAsync {
                dst: self.elem_ref(dst, span)?,
                src: self.elem_ref(src, span)?,
                bytes: usize::try_from(*bytes).unwrap_or(0),
                pred: pred.as_ref().map(|p| self.bool_expr(p)).transpose()?,
            },
            Intrinsic::CommitGroup => CCall::Commit,
            Intrinsic::WaitGroup { n } => CCall::Wait(usize::try_from(*n).unwrap_or(0)),
            Intrinsic::Ldmatrix {
                dst,
                src,
                num,
                trans,
            } => CCall::Ldmatrix {
                dst: self.elem_ref(dst, span)?,
                src: self.elem_ref(src, span)?,
                num: usize::try_from(*num).unwrap_or(0),
                trans: *trans,
            },
            Intrinsic::ShflXor { dst, src, offset } => CCall::ShflXor {
                dst: self.elem_ref(dst, span)?,
                src: self.elem_ref(src, span)?,
                // `check` above admitted it (1, 2, 4, 8 or 16).
                offset: usize::try_from(*offset).unwrap_or(0),
            },
            Intrinsic::ShflDown { dst, src, offset } => CCall::ShflDown {
                dst: self.elem_ref(dst, span)?,
                src: self.elem_ref(src, span)?,
                // `check` above admitted it (1..=31).
                offset: usize::try_from(*offset).unwrap_or(0),
            },
            Intrinsic::ShflSyncIdx { .. }
            | Intrinsic::ShflSyncBfly { .. }
            | Intrinsic::ShflSyncDown { .. }
            | Intrinsic::ShflSyncUp { .. } => {
                let Some(s) = i.shuffle() else {
                    return Err(Diagnostic::error(span, "internal error: not a shuffle"));
                };
                CCall::ShflSync {
                    mode: s.mode,
                    dst: self.elem_ref(s.dst, span)?,
                    src: self.elem_ref(s.src, span)?,
                    lane: self.int_expr(s.lane)?,
                    width: self.int_expr(s.width)?,
                    mask: self.int_expr(s.mask)?,
                }
            }
            Intrinsic::AtomicAddRet { old, dst, value } => CCall::AtomicAddRet {
                old: self.elem_ref(old, span)?,
                dst: self.elem_ref(dst, span)?,
                value: self.elem_ref(value, span)?,
            },
            Intrinsic::Mma {
                acc,
                a,
                b,
                packed_int4,
            } => CCall::Mma {
                acc: self.elem_ref(acc, span)?,
                a: self.elem_ref(a, span)?,
                b: self.elem_ref(b, span)?,
                packed_int4: *packed_int4,
            },
            Intrinsic::MbarrierInit { bar, count } => CCall::MbarrierInit {
                bar: self.elem_ref(bar, span)?,
                count: *count,
            },
            Intrinsic::MbarrierArrive { bar } => CCall::MbarrierArrive {
                bar: self.elem_ref(bar, span)?,
                tx: 0,
            },
            Intrinsic::MbarrierArriveExpectTx { bar, bytes } => CCall::MbarrierArrive {
                bar: self.elem_ref(bar, span)?,
                tx: *bytes,
            },
            Intrinsic::MbarrierWait { bar, parity } => CCall::MbarrierWait {
                bar: self.elem_ref(bar, span)?,
                parity: self.int_expr(parity)?,
            },
            Intrinsic::FenceProxyAsync => CCall::FenceProxyAsync,
            Intrinsic::TmaLoad {
                dst,
                src,
                bar,
                box_dims,
                swizzle,
                multicast,
            } => CCall::TmaLoad {
                dst: self.elem_ref(dst, span)?,
                src: self.elem_ref(src, span)?,
                bar: self.elem_ref(bar, span)?,
                // `check` above admitted every entry (1..=256) and the swizzle.
                box_dims: box_dims
                    .iter()
                    .map(|&d| usize::try_from(d).unwrap_or(1))
                    .collect(),
                swizzle: Swizzle::from_bytes(*swizzle).unwrap_or(Swizzle::None),
                multicast: u32::try_from(*multicast).unwrap_or(0),
            },
            Intrinsic::MbarrierArriveCluster { bar, rank } => CCall::MbarrierArriveCluster {
                bar: self.elem_ref(bar, span)?,
                rank: self.int_expr(rank)?,
            },
            Intrinsic::ClusterSync => CCall::ClusterSync,
            Intrinsic::WgmmaFence => CCall::WgmmaFence,
            Intrinsic::WgmmaCommit => CCall::WgmmaCommit,
            Intrinsic::WgmmaWait { n } => CCall::WgmmaWait(usize::try_from(*n).unwrap_or(0)),
            Intrinsic::Wgmma {
                acc,
                a,
                b,
                n,
                accumulate,
                ..
            }
            | Intrinsic::WgmmaRs {
                acc,
                a,
                b,
                n,
                accumulate,
                ..
            } => {
                let Some((a_layout, b_layout)) = i.wgmma_layouts() else {
                    return Err(Diagnostic::error(
                        span,
                        format!("`{}` with a swizzle the verifier rejects", def.name),
                    ));
                };
                let a = self.elem_ref(a, span)?;
                let Some(k) = crate::wgmma::instruction_k(self.region_dtype(a.buf))
                    .and_then(|k| usize::try_from(k).ok())
                else {
                    return Err(Diagnostic::error(
                        span,
                        format!("`{}` on an operand dtype the verifier rejects", def.name),
                    ));
                };
                CCall::Wgmma(Box::new(CWgmma {
                    acc: self.elem_ref(acc, span)?,
                    a,
                    b: self.elem_ref(b, span)?,
                    n: usize::try_from(*n).unwrap_or(8),
                    k,
                    a_layout,
                    b_layout,
                    accumulate: accumulate.as_ref().map(|p| self.bool_expr(p)).transpose()?,
                }))
            }
            Intrinsic::SetMaxNReg { .. } => CCall::SetMaxNReg,
            Intrinsic::BarSync { id, count } => CCall::BarSync {
                id: *id,
                count: usize::try_from(*count).unwrap_or(0),
            },
            Intrinsic::BarArrive { id, count } => CCall::BarArrive {
                id: *id,
                count: usize::try_from(*count).unwrap_or(0),
            },
            Intrinsic::Print { .. } | Intrinsic::PrintMsg { .. } | Intrinsic::PrintElem { .. } => {
                CCall::Print(Box::new(self.print(i)?))
            }
            Intrinsic::PhiloxInit {
                state,
                seed,
                seq,
                offset,
            } => CCall::PhiloxInit {
                state: self.elem_ref(state, span)?,
                seed: self.int_expr(seed)?,
                seq: self.int_expr(seq)?,
                offset: self.int_expr(offset)?,
            },
            Intrinsic::PhiloxRand { dst, state } | Intrinsic::PhiloxUniform { dst, state } => {
                CCall::PhiloxDraw {
                    dst: self.elem_ref(dst, span)?,
                    state: self.elem_ref(state, span)?,
                    uniform: matches!(i, Intrinsic::PhiloxUniform { .. }),
                }
            }
        };
        Ok(CIntrinsic { def, call })
    }

    /// A print call: its value typed (the dtype it is printed as), an element as a load.
    fn print(&mut self, i: &Intrinsic) -> R<super::print::CPrint> {
        use super::print::{CPrint, CPrinted};
        Ok(match i {
            Intrinsic::Print { value, msg } => {
                let (c, t) = self.expr(value)?;
                CPrint {
                    msg: msg.clone(),
                    what: CPrinted::Value(coerce(c, t.dtype), t.dtype),
                }
            }
            Intrinsic::PrintElem {
                elem,
                index,
                msg,
                lane,
            } => {
                let load = Expr::new(
                    ExprKind::Load {
                        buffer: elem.buffer.name.clone(),
                        indices: elem.indices.clone(),
                    },
                    elem.buffer.span,
                );
                let (value, t) = self.expr(&load)?;
                CPrint {
                    msg: msg.clone(),
                    what: CPrinted::Elem {
                        value,
                        buffer: elem.buffer.name.clone(),
                        dtype: t.dtype,
                        index: self.int_expr(index)?,
                        lane: *lane,
                    },
                }
            }
            _ => CPrint {
                msg: match i {
                    Intrinsic::PrintMsg { msg } => msg.clone(),
                    _ => String::new(),
                },
                what: CPrinted::Msg,
            },
        })
    }

    /// An intrinsic operand: a buffer indexed once per dimension with integers.
    fn elem_ref(&mut self, r: &ElemRef, at: Span) -> R<CRef> {
        let span = if r.buffer.span.is_dummy() {
            at
        } else {
            r.buffer.span
        };
        let (buf, _, rank) = self.buffer(&r.buffer.name, span)?;
        if r.indices.len() != rank {
            return Err(rank_error(&r.buffer.name, rank, r.indices.len(), span));
        }
        let indices = r
            .indices
            .iter()
            .map(|e| self.int_expr(e))
            .collect::<R<_>>()?;
        Ok(CRef { buf, indices })
    }

    fn gemm(&mut self, g: &Gemm, at: Span) -> R<CGemm> {
        Ok(CGemm {
            a: self.region(&g.a, at)?,
            b: self.region(&g.b, at)?,
            c: self.region(&g.c, at)?,
            trans_a: g.trans_a,
            trans_b: g.trans_b,
            clear_accum: g.clear_accum,
            packed_int4: g.packed_int4,
        })
    }

    fn region_dtype(&self, buf: BufRef) -> DType {
        match buf {
            BufRef::Global(i) => self.globals.get(i).map(|b| b.dtype),
            BufRef::Local(i) => self.locals.get(i).map(|b| b.dtype),
        }
        .unwrap_or(DType::Float32)
    }

    /// A region; one without a source span of its own points at its statement (`at`).
    fn region(&mut self, r: &Region, at: Span) -> R<CRegion> {
        let (buf, _, rank) = self.buffer(&r.buffer.name, r.buffer.span)?;
        if r.ranges.len() != rank {
            return Err(rank_error(&r.buffer.name, rank, r.ranges.len(), r.span));
        }
        let mut starts = Vec::new();
        let mut extents = Vec::new();
        for range in &r.ranges {
            starts.push(self.int_expr(&range.start)?);
            extents.push(self.int_expr(&range.extent)?);
        }
        Ok(CRegion {
            buf,
            starts,
            extents,
            span: if r.span.is_dummy() { at } else { r.span },
        })
    }

    /// An expression that must be an integer (index, bound, extent).
    fn int_expr(&mut self, e: &Expr) -> R<CExpr> {
        let (c, t) = self.expr(e)?;
        if !t.dtype.is_int() {
            return Err(Diagnostic::error(
                e.span,
                format!("expected an integer expression, found {}", t.dtype),
            ));
        }
        Ok(coerce(c, t.dtype))
    }

    /// An expression that must be a bool (condition).
    fn bool_expr(&mut self, e: &Expr) -> R<CExpr> {
        let (c, t) = self.expr(e)?;
        if !t.dtype.is_bool() {
            return Err(Diagnostic::error(
                e.span,
                format!("condition must be bool, found {}", t.dtype),
            ));
        }
        Ok(c)
    }

    /// Compiles an expression; also returns its static type (with literal weakness).
    fn expr(&mut self, e: &Expr) -> R<(CExpr, Typed)> {
        let span = e.span;
        let node = |kind, dtype| CExpr { kind, dtype, span };
        let err = |m: String| Diagnostic::error(span, m);
        Ok(match &e.kind {
            ExprKind::Int(v) => {
                let dtype = types::int_literal_dtype(*v);
                (node(CKind::Const(Scalar::Int(*v)), dtype), weak(dtype))
            }
            // Kept exact: a literal takes the dtype of what it meets and is rounded once.
            ExprKind::Float(x) => (
                node(CKind::Const(Scalar::Float(*x)), DType::Float32),
                weak(DType::Float32),
            ),
            ExprKind::Bool(b) => (
                node(CKind::Const(Scalar::Bool(*b)), DType::Bool),
                Typed::strong(DType::Bool),
            ),
            ExprKind::Var(name) => {
                let (slot, dtype) = self
                    .var(name)
                    .ok_or_else(|| err(format!("undefined name `{name}`")))?;
                (node(CKind::Var(slot), dtype), Typed::strong(dtype))
            }
            ExprKind::Load { buffer, indices } => {
                let (buf, dtype, rank) = self.buffer(buffer, span)?;
                if indices.len() != rank {
                    return Err(rank_error(buffer, rank, indices.len(), span));
                }
                let indices = indices.iter().map(|i| self.int_expr(i)).collect::<R<_>>()?;
                (
                    node(CKind::Load { buf, indices }, dtype),
                    Typed::strong(dtype),
                )
            }
            ExprKind::Unary(op, a) => {
                let (a, ta) = self.expr(a)?;
                let t = types::unary_result(*op, ta).map_err(err)?;
                let a = Box::new(coerce(a, t.dtype));
                let kind = match op {
                    UnOp::Neg => CKind::Neg(a),
                    UnOp::Not => CKind::Not(a),
                    UnOp::BitNot => CKind::BitNot(a),
                };
                (node(kind, t.dtype), t)
            }
            ExprKind::Binary(op, a, b) => {
                let (a, ta) = self.expr(a)?;
                let (b, tb) = self.expr(b)?;
                let t = types::binary_result(*op, ta, tb).map_err(err)?;
                let on_bools = t.dtype.is_bool() && op.is_bitwise();
                let kind = if op.is_logical() || (on_bools && *op != BinOp::BitXor) {
                    match op {
                        BinOp::And | BinOp::BitAnd => CKind::And(Box::new(a), Box::new(b)),
                        _ => CKind::Or(Box::new(a), Box::new(b)),
                    }
                } else if on_bools {
                    // `a ^ b` on bools: `a != b`.
                    CKind::Compare(BinOp::Ne, Box::new(a), Box::new(b))
                } else if op.is_comparison() {
                    let common = types::comparison_dtype(ta, tb).map_err(err)?;
                    CKind::Compare(
                        *op,
                        Box::new(coerce(a, common)),
                        Box::new(coerce(b, common)),
                    )
                } else {
                    CKind::Arith(
                        *op,
                        Box::new(coerce(a, t.dtype)),
                        Box::new(coerce(b, t.dtype)),
                    )
                };
                (node(kind, t.dtype), t)
            }
            ExprKind::Cast(dtype, a) => {
                let (a, _) = self.expr(a)?;
                (coerce(a, *dtype), Typed::strong(*dtype))
            }
            ExprKind::Reinterpret(dtype, a) => {
                let (a, ta) = self.expr(a)?;
                types::reinterpret_ok(ta.dtype, *dtype).map_err(err)?;
                // A literal operand is a value of its literal dtype (types.rs).
                let a = coerce(a, ta.dtype);
                (
                    node(CKind::Reinterpret(Box::new(a)), *dtype),
                    Typed::strong(*dtype),
                )
            }
            ExprKind::Select(c, a, b) => {
                let c = self.bool_expr(c)?;
                let (a, ta) = self.expr(a)?;
                let (b, tb) = self.expr(b)?;
                let t = if ta.dtype.is_bool() && tb.dtype.is_bool() {
                    Typed::strong(DType::Bool)
                } else {
                    types::unify(ta, tb).map_err(err)?
                };
                let kind = CKind::Select(
                    Box::new(c),
                    Box::new(coerce(a, t.dtype)),
                    Box::new(coerce(b, t.dtype)),
                );
                (node(kind, t.dtype), t)
            }
            ExprKind::Math(f, args) => {
                let mut compiled = Vec::with_capacity(args.len());
                let mut types = Vec::with_capacity(args.len());
                for a in args {
                    let (c, t) = self.expr(a)?;
                    compiled.push(c);
                    types.push(t);
                }
                let t = types::math_result(*f, &types).map_err(err)?;
                let args = compiled.into_iter().map(|c| coerce(c, t.dtype)).collect();
                (node(CKind::Math(*f, args), t.dtype), t)
            }
        })
    }
}

/// The thread axis a `threadIdx.*` tag binds (block tags bind none inside a kernel).
fn thread_axis(tag: ThreadTag) -> Option<usize> {
    match tag {
        ThreadTag::ThreadX => Some(0),
        ThreadTag::ThreadY => Some(1),
        ThreadTag::ThreadZ => Some(2),
        _ => None,
    }
}

fn weak(dtype: DType) -> Typed {
    Typed { dtype, weak: true }
}

fn rank_error(name: &str, rank: usize, found: usize, span: Span) -> Diagnostic {
    Diagnostic::error(
        span,
        format!("`{name}` has {rank} dimension(s) but {found} index(es) are given"),
    )
}

/// Converts `e` to `to`: constants fold (a literal is rounded once, from its exact value),
/// other expressions get a `Convert` node when the dtype differs.
pub(crate) fn coerce(e: CExpr, to: DType) -> CExpr {
    match e.kind {
        CKind::Const(v) => CExpr {
            kind: CKind::Const(convert(v, to)),
            dtype: to,
            span: e.span,
        },
        _ if e.dtype == to => e,
        _ => CExpr {
            span: e.span,
            kind: CKind::Convert(Box::new(e)),
            dtype: to,
        },
    }
}

/// The iterations of `body`'s loops with constant bounds that are statements of `body` itself
/// (their own nests counted the same way); at least 1. When `pays` (the enclosing loop is
/// not a thread loop, and so charges the block's budget), those loops are marked prepaid.
fn prepay(body: &mut [CStmt], pays: bool) -> u64 {
    let mut total = 0u64;
    for s in body {
        if let CStmtKind::Loop {
            start,
            stop,
            cost,
            prepaid,
            thread_axis: None,
            ..
        } = &mut s.kind
        {
            if let (CKind::Const(Scalar::Int(a)), CKind::Const(Scalar::Int(b))) =
                (&start.kind, &stop.kind)
            {
                let trips = u64::try_from(b.saturating_sub(*a)).unwrap_or(0);
                total = total.saturating_add(trips.saturating_mul(*cost));
                *prepaid = pays;
            }
        }
    }
    total.max(1)
}

/// What starting a loop of `trips` iterations costs against the block's loop budget.
pub(crate) fn loop_cost(trips: i64, cost: u64) -> u64 {
    u64::try_from(trips).unwrap_or(0).saturating_mul(cost)
}
