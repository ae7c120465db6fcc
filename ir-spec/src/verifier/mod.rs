//! The verifier: every static rule of `docs/ir.md`, checked in one walk that collects all
//! errors. On success it returns the facts later stages need (`FuncInfo`).
//!
//! `scope` tracks names, `exprs` checks expressions (names, ranks, constant indices, typing
//! through `crate::types`), `kernel` checks kernels and loops, `ops` checks regions and the
//! tile ops, `intrinsics` the thread-level intrinsics and layout annotations, `consts` folds
//! constant integers, `bounds` finds accesses provably outside their buffers, `limits`
//! what no launch can have (dims no argument gives, buffers too large). `level` checks what a stage may assume beyond the rules (thread level,
//! planned shared memory): the one place pipeline order is enforced.

mod allreduce;
mod bounds;
mod consts;
mod exprs;
mod fresh;
pub mod grid_sync;
mod int4;
mod intrinsics;
mod kernel;
pub mod level;
mod limits;
mod ops;
mod parallel;
mod reducer;
mod regions;
mod scope;

#[cfg(test)]
mod tests;

pub use consts::{const_bool, const_int, eval_bool, eval_int};
pub use level::{check_level, Level};
pub use reducer::reducer_update;

use crate::diagnostic::Diagnostic;
use crate::dtype::DType;
use crate::ir::{BinOp, BufferDecl, Expr, Ident, PrimFunc, Scope, Stmt, StmtKind};
use crate::span::Span;
use crate::target::Target;
use crate::types::{binary_result, infer, Typed};
use scope::{all_definitions, Def, DefKind, Env};
use std::collections::{BTreeMap, HashMap};

/// Facts about a verified function.
#[derive(Clone, Debug, PartialEq)]
pub struct FuncInfo {
    /// Every buffer (parameters and allocations) by name.
    pub buffers: BTreeMap<String, BufferDecl>,
    /// Every scalar variable (symbolic dims, block and loop variables, lets) with its dtype.
    pub vars: BTreeMap<String, DType>,
    /// The symbolic dimensions, in declaration order.
    pub dims: Vec<String>,
    /// The kernels, in program order.
    pub kernels: Vec<KernelInfo>,
}

/// Facts about one `T.Kernel`.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelInfo {
    /// Grid extents, x first (constants or expressions of the symbolic dims).
    pub grid: Vec<Expr>,
    /// The block variables, x first.
    pub block_vars: Vec<String>,
    /// Block shape, x first; every entry ≥ 1.
    pub threads: Vec<i64>,
    /// Threads per block: the product of `threads`, in `1..=1024`.
    pub num_threads: i64,
    /// Blocks per thread-block cluster along x, y, z (`[1, 1, 1]`: no cluster).
    pub cluster: [i64; 3],
    /// Names of the kernel's shared, fragment and local buffers, in declaration order.
    pub allocs: Vec<String>,
    /// The size in bytes of the kernel's dynamic shared-memory arena, when it has one
    /// (`T.shared_arena`): what the launch must reserve.
    pub arena_bytes: Option<i64>,
    pub span: Span,
}

impl FuncInfo {
    /// The declaration of buffer `name`.
    pub fn buffer(&self, name: &str) -> Option<&BufferDecl> {
        self.buffers.get(name)
    }

    /// The dtype of scalar variable `name`.
    pub fn var_dtype(&self, name: &str) -> Option<DType> {
        self.vars.get(name).copied()
    }

    /// The dtype of an expression of this function (after verification every expression
    /// type-checks; `None` only for expressions from elsewhere).
    pub fn expr_dtype(&self, expr: &Expr) -> Option<DType> {
        let var = |n: &str| self.var_dtype(n);
        let buf = |n: &str| self.buffer(n).map(|b| b.dtype);
        infer(expr, &var, &buf).ok().map(|t| t.dtype)
    }
}

/// What a verification requires beyond the rules every IR obeys.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Requirements {
    /// The target whose limits apply (shared memory per block); `None`: the largest limit
    /// of any target (a function valid for some target).
    pub target: Option<Target>,
    /// How far the function must be lowered ([`Level::Tile`]: no more than the rules).
    pub level: Level,
}

/// Checks `func` against every rule of the IR reference. All errors are returned, in program
/// order.
pub fn verify(func: &PrimFunc) -> Result<FuncInfo, Vec<Diagnostic>> {
    verify_with(func, &Requirements::default())
}

/// [`verify`] with `requirements` (a target's limits, a level).
pub fn verify_with(
    func: &PrimFunc,
    requirements: &Requirements,
) -> Result<FuncInfo, Vec<Diagnostic>> {
    // TU1: the IR the verifier and every stage after it see has its tunables bound.
    if let Some(t) = func.space.tunables.first() {
        return Err(vec![Diagnostic::error(
            t.span,
            "this kernel's tuning space is not bound",
        )
        .with_note(
            "bind its tunables first (`tlc_ir::tuning::bind`; tlc's commands do)",
        )]);
    }
    let mut checker = Checker::new(func, *requirements);
    checker.function(func);
    checker.diags.extend(bounds::check(func));
    checker.diags.extend(int4::check(func));
    checker
        .diags
        .extend(limits::check(func, requirements.target));
    checker.diags.extend(check_level(func, requirements.level));
    if checker.diags.is_empty() {
        Ok(checker.info)
    } else {
        Err(checker.diags)
    }
}

/// The state of one verification walk.
pub(crate) struct Checker<'f> {
    requirements: Requirements,
    diags: Vec<Diagnostic>,
    /// Every definition of the function, first per name (from a pre-pass).
    all_defs: HashMap<String, Def>,
    /// Definitions met so far in the walk, first per name.
    seen: HashMap<String, Def>,
    env: Env<'f>,
    /// The span of the innermost enclosing `T.Kernel`, if any.
    kernel: Option<Span>,
    /// The sum reducers of the innermost enclosing `T.Kernel`: their updates
    /// `r[idx] = r[idx] + value` keep the sum uncontracted (rule T6).
    sum_reducers: Vec<crate::ir::Reducer>,
    /// The variable of the innermost enclosing `threadIdx.*` binding loop of a kernel.
    thread_loop: Option<Span>,
    /// The variable of the innermost enclosing `T.vectorized` loop.
    vectorized: Option<Span>,
    /// The innermost enclosing loop whose iterations do not run one after another as the
    /// code is written (`T.Parallel`, `T.Pipelined`, `T.vectorized`), with its kind's name:
    /// `T.fresh` is not allowed inside one (rule F3).
    overlapped: Option<(Span, &'static str)>,
    /// The variable of the outermost enclosing `T.Parallel` loop: no tile op inside (L8).
    parallel: Option<Span>,
    /// The constant block shape of the enclosing kernel (x first).
    block: Option<Vec<i64>>,
    /// The variables of the enclosing `threadIdx.*` loops, with their axes.
    thread_axes: Vec<(String, usize)>,
    /// Blocks per cluster of the kernel being checked (1 without a cluster).
    cluster_size: i64,
    /// Inside thread loops: the innermost `if`, loop with non-constant bounds, or thread loop
    /// over part of the block, where threads may part ways (rule R1 of all-reduces).
    divergence: Option<Span>,
    /// The span of the statement being checked: the fallback for nodes with no span.
    stmt_span: Span,
    /// The spans (start, end) of the constant shape entries ≤ 0 already reported (rule B4).
    /// Lowering copies a shape into the regions it expands (`T.copy(A[0, 0], S)` takes its
    /// extents from `S`), so a region extent with one of these spans is the same mistake
    /// and is not reported again.
    empty_dims: Vec<(usize, usize)>,
    /// The generator states a `T.philox_init` met so far in the walk initializes (rule I10).
    philox_states: std::collections::HashSet<String>,
    info: FuncInfo,
}

impl<'f> Checker<'f> {
    fn new(func: &'f PrimFunc, requirements: Requirements) -> Checker<'f> {
        Checker {
            requirements,
            diags: Vec::new(),
            all_defs: all_definitions(func),
            seen: HashMap::new(),
            env: Env::default(),
            kernel: None,
            sum_reducers: Vec::new(),
            thread_loop: None,
            vectorized: None,
            overlapped: None,
            parallel: None,
            block: None,
            thread_axes: Vec::new(),
            cluster_size: 1,
            divergence: None,
            stmt_span: func.span,
            empty_dims: Vec::new(),
            philox_states: std::collections::HashSet::new(),
            info: FuncInfo {
                buffers: BTreeMap::new(),
                vars: BTreeMap::new(),
                dims: Vec::new(),
                kernels: Vec::new(),
            },
        }
    }

    /// `span`, or the current statement's span when `span` is a placeholder.
    fn at(&self, span: Span) -> Span {
        if span.is_dummy() {
            self.stmt_span
        } else {
            span
        }
    }

    fn error(&mut self, span: Span, message: impl Into<String>) {
        let span = self.at(span);
        self.diags.push(Diagnostic::error(span, message));
    }

    fn push(&mut self, diag: Diagnostic) {
        self.diags.push(diag);
    }

    /// Records a definition of `ident`; a second definition of any name is an error.
    fn define(&mut self, ident: &Ident, kind: DefKind) {
        if let Some(first) = self.seen.get(&ident.name).copied() {
            let mut diag = Diagnostic::error(
                self.at(ident.span),
                format!("the name `{}` is defined more than once", ident.name),
            );
            let note = format!(
                "`{}` was first defined here, as a {}",
                ident.name, first.kind
            );
            diag = if first.span.is_dummy() {
                diag.with_note(note)
            } else {
                diag.with_note_at(first.span, note)
            };
            self.push(diag.with_note(
                "a name cannot be redefined while it is in scope; pick another name for the \
                 inner one",
            ));
            return;
        }
        self.seen.insert(
            ident.name.clone(),
            Def {
                kind,
                span: ident.span,
            },
        );
    }

    /// Defines a scalar variable and brings it into scope.
    fn define_var(&mut self, ident: &Ident, kind: DefKind, dtype: Option<DType>) {
        self.define(ident, kind);
        self.env.bind_var(&ident.name, dtype);
        if let Some(dtype) = dtype {
            self.info.vars.entry(ident.name.clone()).or_insert(dtype);
        }
    }

    /// Defines a buffer and brings it into scope.
    fn define_buffer(&mut self, decl: &'f BufferDecl, kind: DefKind) {
        self.define(&decl.name, kind);
        self.env.bind_buffer(decl);
        self.info
            .buffers
            .entry(decl.name.name.clone())
            .or_insert_with(|| decl.clone());
    }

    fn function(&mut self, func: &'f PrimFunc) {
        self.env.push();
        for dim in &func.dims {
            self.define_var(&dim.ident(), DefKind::Dim, Some(dim.dtype));
            self.info.dims.push(dim.name.clone());
        }
        for param in &func.params {
            self.stmt_span = param.span;
            self.buffer_decl(param);
            if param.scope != Scope::Global {
                self.error(
                    param.name.span,
                    format!(
                        "parameter `{}` is in {} memory; parameters must be global",
                        param.name.name,
                        param.scope.name()
                    ),
                );
            }
            self.define_buffer(param, DefKind::Param);
        }
        self.body(&func.body);
        self.env.pop();
    }

    /// Checks a statement list in its own scope (lets end with it).
    fn body(&mut self, body: &'f [Stmt]) {
        self.env.push();
        for stmt in body {
            self.stmt(stmt);
        }
        self.env.pop();
    }

    fn stmt(&mut self, stmt: &'f Stmt) {
        self.stmt_span = stmt.span;
        // K12: code outside every kernel runs on no thread (the interpreter and the targets
        // run kernels); only lets (host-side values) and notes may stand there. Tile ops,
        // intrinsics, barriers and stores to on-chip memory have their own "inside a
        // `T.Kernel`" rules: this one names loops, conditionals and stores to global memory.
        let global_store = |b: &Ident| {
            self.env
                .buffer(&b.name)
                .is_none_or(|d| d.scope == Scope::Global)
        };
        let uncovered = match &stmt.kind {
            StmtKind::For(_) | StmtKind::If { .. } | StmtKind::While { .. } => true,
            StmtKind::Store { buffer, .. } | StmtKind::AtomicAdd { buffer, .. } => {
                global_store(buffer)
            }
            _ => false,
        };
        if self.kernel.is_none() && uncovered {
            self.error(
                stmt.span,
                "outside a `T.Kernel` a function holds only kernels and lets: this statement \
                 would run on no GPU thread (put it inside `with T.Kernel(…)`)",
            );
        }
        match &stmt.kind {
            StmtKind::Kernel(k) => self.kernel(k, stmt.span),
            StmtKind::For(f) => self.for_loop(f),
            StmtKind::If {
                cond,
                then_body,
                else_body,
            } => {
                self.expect_bool(cond, "`if` condition");
                let outer = self.divergence;
                if self.thread_loop.is_some() {
                    self.divergence = Some(self.at(stmt.span));
                }
                self.body(then_body);
                self.body(else_body);
                self.divergence = outer;
            }
            StmtKind::While { cond, body } => {
                self.expect_bool(cond, "`while` condition");
                self.body(body);
            }
            StmtKind::Let { var, dtype, value } => self.let_stmt(var, *dtype, value),
            StmtKind::Store {
                buffer,
                indices,
                value,
            } => self.store(buffer, indices, value),
            StmtKind::AtomicAdd {
                buffer,
                indices,
                value,
            } => self.atomic_add(buffer, indices, value),
            StmtKind::Copy { src, dst } => {
                self.tile_op_in_parallel("`T.copy`", stmt.span);
                self.copy(src, dst, stmt.span)
            }
            StmtKind::Gemm(g) => {
                self.tile_op_in_parallel("`T.gemm`", stmt.span);
                self.gemm(g, stmt.span)
            }
            StmtKind::Fill { dst, value } => {
                self.tile_op_in_parallel("`T.fill`", stmt.span);
                self.fill(dst, value, stmt.span)
            }
            StmtKind::Reduce(r) => {
                self.tile_op_in_parallel("a reduction", stmt.span);
                self.reduce(r, stmt.span)
            }
            StmtKind::Barrier => self.barrier(stmt.span),
            // Y2 (where in the kernel) is `grid_sync.rs`, from the kernel.
            StmtKind::GridSync => {
                if self.kernel.is_none() {
                    self.error(stmt.span, "`T.sync_grid()` outside a `T.Kernel`");
                }
            }
            // Allowed everywhere, at both levels; its one argument was a string literal (the
            // front end's rule M1; the IR holds only the text).
            StmtKind::Note(_) => {}
            // The reducer rules (`reducer.rs`) walk the kernel on their own.
            StmtKind::FinalizeReducer(r) => {
                if self.kernel.is_none() {
                    self.error(r.span, "`T.finalize_reducer` outside a kernel");
                }
            }
            StmtKind::Intrinsic(i) => self.intrinsic(i, stmt.span),
            StmtKind::AllReduce(r) => self.allreduce(r, stmt.span),
            StmtKind::Fresh(bufs) => self.fresh(bufs, stmt.span),
        }
    }

    fn let_stmt(&mut self, var: &Ident, declared: Option<DType>, value: &Expr) {
        let found = self.check_expr(value);
        if let (Some(declared), Some(found)) = (declared, found) {
            if declared.is_bool() != found.dtype.is_bool() {
                self.error(
                    value.span,
                    format!(
                        "mismatched types: `{}` is declared {declared} but its value is {}",
                        var.name, found.dtype
                    ),
                );
            }
        }
        let dtype = declared.or(found.map(|t: Typed| t.dtype));
        self.define_var(var, DefKind::Let, dtype);
    }

    fn store(&mut self, buffer: &Ident, indices: &[Expr], value: &Expr) {
        let decl = self.resolve_buffer(&buffer.name, buffer.span);
        for index in indices {
            self.expect_int(index, "buffer index");
        }
        // A sum reducer's update `r[idx] = r[idx] + v`: its sum is the reducer's combine,
        // never contracted (rule T6), so `v` types on its own beside `r`'s element.
        let update = self
            .sum_reducers
            .iter()
            .find(|r| r.buffer.name == buffer.name)
            .and_then(|r| reducer_update(r, indices, value));
        let value_type = match (update, decl) {
            (Some(v), Some(decl)) => self
                .check_expr(v)
                .and_then(|t| binary_result(BinOp::Add, Typed::strong(decl.dtype), t).ok()),
            _ => self.check_expr(value),
        };
        let Some(decl) = decl else {
            return;
        };
        if decl.scope != Scope::Global && self.kernel.is_none() {
            self.error(
                buffer.span,
                format!(
                    "store to {} buffer `{}` outside a `T.Kernel`",
                    decl.scope.name(),
                    buffer.name
                ),
            );
        }
        self.check_indices(decl, indices, buffer.span);
        if let Some(t) = value_type {
            self.check_value_fits(decl, t.dtype, value.span);
        }
    }

    /// Rules U1–U2 of `T.atomic_add` (docs/ir.md): a global or shared element of an
    /// additive dtype the targets have an atomic add for; the store rules otherwise.
    fn atomic_add(&mut self, buffer: &Ident, indices: &[Expr], value: &Expr) {
        self.store(buffer, indices, value);
        let Some(decl) = self.env.buffer(&buffer.name) else {
            return;
        };
        if !matches!(decl.scope, Scope::Global | Scope::Shared) {
            self.error(
                buffer.span,
                format!(
                    "`T.atomic_add` works on global and shared buffers; `{}` is {} (one thread \
                     owns each of its elements: add with `+=`)",
                    buffer.name,
                    decl.scope.name()
                ),
            );
        }
        if !crate::ir::atomic_add_dtype(decl.dtype) {
            self.error(
                buffer.span,
                format!(
                    "`T.atomic_add` has no {} form (float16, bfloat16, float32, float64, int32, \
                     uint32, int64 have one)",
                    decl.dtype
                ),
            );
        }
    }
}
