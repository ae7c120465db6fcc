//! Lowering of kernels in their three spellings, and of the kernel-wide facts written
//! inside them (allocations, rasterization, layout annotations, thread counts):
//!
//! - DSL: `with T.Kernel(gx, gy, threads=N) as (bx, by):`;
//! - TileLang 0.1.x: `bx = T.launch_thread("blockIdx.x", n)` lines, the rest of the block
//!   being the kernel body;
//! - TileLang 0.1.15: nested `for bx in T.thread_binding(n, thread="blockIdx.x")` loops
//!   around `T.launch_thread_idx` lets and a `T.sblock` with `T.sblock_attr`.

use crate::diagnostic::Diagnostic;
use crate::ir::{
    Arena, Expr, ExprKind, Ident, Kernel, LayoutAnnotation, RasterOrder, Reducer, ReducerOp,
    Replication, Scope, Stmt, StmtKind, Swizzle, ThreadTag,
};
use crate::span::Span;
use crate::syntax::ast;
use crate::syntax::lower::Lowerer;
use crate::syntax::lower_expr::suggest;
use crate::visit;

/// What the statements of an open kernel contribute to it.
#[derive(Default)]
pub struct KernelState {
    pub allocs: Vec<crate::ir::BufferDecl>,
    pub swizzle: Option<Swizzle>,
    /// `T.min_blocks_per_sm(B)`, with the span of its call (for "given twice").
    pub min_blocks_per_sm: Option<(Expr, Span)>,
    /// `T.no_set_max_nreg()`.
    pub no_set_max_nreg: bool,
    pub layouts: Vec<LayoutAnnotation>,
    pub reducers: Vec<crate::ir::Reducer>,
    /// `T.shared_arena(...)`, with the span of its call (for "given twice").
    pub arena: Option<Arena>,
    pub arena_span: Option<Span>,
    /// The block shape, once known (TVMScript 0.1.15 gives it inside the body).
    pub threads: Option<Vec<Expr>>,
    /// Thread variables (`tx = T.launch_thread("threadIdx.x", 128)` in TVMScript,
    /// `tx = T.get_thread_binding(0)` in the DSL) with their axis (0: x, 1: y, 2: z). Unused
    /// ones are dropped; if the body uses some, it becomes per-thread code (see
    /// `bind_thread_vars`).
    pub thread_vars: Vec<(Ident, usize)>,
    /// The generator state of its random numbers, once a `T.rng_init` declared it
    /// (`syntax::lower_rng`).
    pub rng_state: Option<String>,
    /// Layouts of global tensors (`syntax::lower_global_layout`), by parameter.
    pub global_layouts:
        std::collections::HashMap<String, crate::syntax::lower_global_layout::GlobalLayout>,
    /// The parameters the kernel has used so far (a layout must come before them).
    pub touched: std::collections::HashSet<String>,
    /// Hand-written warp specialization (`syntax::lower_ws`).
    pub ws: crate::syntax::lower_ws::WsState,
}

impl Lowerer {
    /// `with T.Kernel(gx[, gy[, gz]], threads=...) as bx / as (bx, by):`.
    pub fn dsl_kernel(
        &mut self,
        call_span: Span,
        args: &[ast::Arg],
        target: Option<&ast::Expr>,
        body: &[ast::Stmt],
        span: Span,
    ) -> Option<Stmt> {
        let mut grid = Vec::new();
        let mut threads = None;
        let mut cluster = Some(Vec::new());
        let mut keyword_seen = false;
        let mut ok = true;
        for arg in args {
            match &arg.name {
                None if keyword_seen => {
                    self.error(Diagnostic::error(
                        arg.value.span,
                        "positional argument after a keyword argument",
                    ));
                    ok = false;
                }
                None => grid.push(self.expr(&arg.value)),
                Some(kw) if kw.name == "threads" => {
                    keyword_seen = true;
                    threads = Some(self.threads(&arg.value));
                }
                Some(kw) if kw.name == "cluster_dims" => {
                    keyword_seen = true;
                    cluster = self.cluster_dims(&arg.value);
                }
                Some(kw) => {
                    keyword_seen = true;
                    let mut d = Diagnostic::error(
                        kw.span,
                        format!("unknown keyword argument `{}` for `T.Kernel`", kw.name),
                    );
                    if let Some(near) = suggest(&kw.name, &["threads", "cluster_dims"]) {
                        d = d.with_note(format!("did you mean `{near}`?"));
                    }
                    self.error(d);
                    ok = false;
                }
            }
        }
        if grid.is_empty() || grid.len() > 3 {
            return self.fail(Diagnostic::error(
                call_span,
                format!("`T.Kernel` takes 1 to 3 grid extents, found {}", grid.len()),
            ));
        }
        let block_vars = match target {
            None => {
                return self.fail(Diagnostic::error(
                    call_span,
                    "`T.Kernel` needs block variables: `with T.Kernel(...) as (bx, by):`",
                ))
            }
            Some(t) => self.block_vars(t)?,
        };
        if block_vars.len() != grid.len() {
            return self.fail(Diagnostic::error(
                target.map_or(call_span, |t| t.span),
                format!(
                    "`T.Kernel` has {} grid extent{} but {} block variable{}",
                    grid.len(),
                    if grid.len() == 1 { "" } else { "s" },
                    block_vars.len(),
                    if block_vars.len() == 1 { "" } else { "s" }
                ),
            ));
        }
        // TileLang's default block is 128 threads.
        let threads = threads.unwrap_or_else(|| Some(vec![Expr::int(128)]));
        let grid: Option<Vec<Expr>> = grid.into_iter().collect();
        let (grid, threads, cluster) = (grid?, threads?, cluster?);
        if !ok {
            return None;
        }
        self.kernel(grid, block_vars, Some(threads), span, |lw| lw.block(body))
            .map(|mut stmt| {
                if let StmtKind::Kernel(k) = &mut stmt.kind {
                    k.cluster = cluster;
                }
                stmt
            })
    }

    /// `as bx` or `as (bx, by)`.
    fn block_vars(&mut self, t: &ast::Expr) -> Option<Vec<Ident>> {
        let items = match &t.kind {
            ast::ExprKind::Name(n) => return Some(vec![Ident::new(n.clone(), t.span)]),
            ast::ExprKind::Tuple(items) | ast::ExprKind::List(items) => items,
            _ => return self.fail(Diagnostic::error(t.span, "expected block variable names")),
        };
        let mut out = Vec::new();
        for item in items {
            match &item.kind {
                ast::ExprKind::Name(n) => out.push(Ident::new(n.clone(), item.span)),
                _ => return self.fail(Diagnostic::error(item.span, "expected a name")),
            }
        }
        Some(out)
    }

    /// `threads=128` or `threads=(32, 4)`: constants, trailing 1s dropped.
    fn threads(&mut self, e: &ast::Expr) -> Option<Vec<Expr>> {
        // `threads=threads` with a tunable: one dimension, bound before compiling.
        if matches!(&e.kind, ast::ExprKind::Name(n) if self.tunables.contains(n))
            || matches!(&e.kind, ast::ExprKind::Binary(..))
        {
            let x = self.tunable_int(e, "the thread count")?;
            if x.as_int().is_none() {
                return Some(vec![x]);
            }
        }
        let values = match &e.kind {
            ast::ExprKind::Tuple(_) | ast::ExprKind::List(_) => {
                self.const_int_list(e, "the thread count")?
            }
            _ => vec![self.const_int(e, "the thread count")?],
        };
        self.block_shape(values, e.span)
    }

    /// `cluster_dims=2` or `cluster_dims=(2, 1, 1)`, x first: each entry a constant or an
    /// expression of tunables (bound before compiling); trailing constant 1s are dropped and
    /// all ones is no cluster (empty).
    fn cluster_dims(&mut self, e: &ast::Expr) -> Option<Vec<Expr>> {
        let items: Vec<&ast::Expr> = match &e.kind {
            ast::ExprKind::Tuple(items) | ast::ExprKind::List(items) => items.iter().collect(),
            _ => vec![e],
        };
        if items.is_empty() || items.len() > 3 {
            return self.fail(Diagnostic::error(
                e.span,
                "a thread-block cluster has 1 to 3 dimensions",
            ));
        }
        let mut dims = Vec::with_capacity(items.len());
        for item in items {
            dims.push(self.tunable_int(item, "an extent of the cluster shape")?);
        }
        while dims.len() > 1 && dims.last().and_then(Expr::as_int) == Some(1) {
            dims.pop();
        }
        if dims.iter().all(|d| d.as_int() == Some(1)) {
            return Some(Vec::new());
        }
        Some(dims)
    }

    /// A block shape from constant extents, x first; trailing 1s are dropped.
    fn block_shape(&mut self, mut values: Vec<i64>, span: Span) -> Option<Vec<Expr>> {
        if values.is_empty() || values.len() > 3 {
            return self.fail(Diagnostic::error(
                span,
                "a thread block has 1 to 3 dimensions",
            ));
        }
        while values.len() > 1 && values.last() == Some(&1) {
            values.pop();
        }
        Some(
            values
                .into_iter()
                .map(|v| Expr::new(ExprKind::Int(v), span))
                .collect(),
        )
    }

    /// Opens a kernel, lowers its body with `body`, and assembles the `Kernel` statement.
    fn kernel(
        &mut self,
        grid: Vec<Expr>,
        block_vars: Vec<Ident>,
        threads: Option<Vec<Expr>>,
        span: Span,
        body: impl FnOnce(&mut Self) -> Vec<Stmt>,
    ) -> Option<Stmt> {
        self.kernels.push(KernelState {
            threads,
            ..KernelState::default()
        });
        let body = self.nested(1, span, body);
        let mut state = self.kernels.pop().unwrap_or_default();
        let Some(mut body) = body else {
            // The kernel's reshapes end with it, lowered or not.
            self.end_reshapes();
            return None;
        };
        self.resolve_reshapes(&mut state.allocs, &mut body);
        if state.ws.tid.is_some() {
            Self::finish_ws(&mut body, &state.ws.barriers);
        }
        let Some(threads) = state.threads else {
            return self.fail(
                Diagnostic::error(span, "this kernel never says how many threads a block has")
                    .with_note("add `T.sblock_attr({\"tl.launch_threads\": [128, 1, 1]})`"),
            );
        };
        let mut body = self.bind_thread_vars(&state.thread_vars, &state.allocs, &threads, body)?;
        self.wrap_fragment_stores(&state.allocs, &mut body);
        let mut allocs = state.allocs;
        shared_if_read_uniformly(&mut allocs, &body);
        Some(Stmt::new(
            StmtKind::Kernel(Kernel {
                grid,
                block_vars,
                threads,
                swizzle: state.swizzle,
                min_blocks_per_sm: state.min_blocks_per_sm.map(|(e, _)| e),
                no_set_max_nreg: state.no_set_max_nreg,
                cluster: Vec::new(),
                layouts: state.layouts,
                reducers: state.reducers,
                allocs,
                arena: state.arena,
                body,
            }),
            span,
        ))
    }

    /// Fragment accesses at block level that are not whole-fragment tile ops become
    /// `T.Parallel` nests, so layout inference and lowering see ordinary nests:
    /// - a store into or from a fragment element outside any `T.Parallel` or thread loop
    ///   (`D_local[0] = D[bz]`, TileLang's Mamba kernels; `Out[bx] = r[0]`) is the block
    ///   writing that one element, and an element `T.atomic_add` there is the block adding
    ///   once: a one-iteration nest around it;
    /// - a `T.copy` of part of a fragment to or from an on-chip buffer (`T.copy(acc_o[:4,
    ///   :], O_shared)`, TileLang's flash decoding) is the element-wise copy it means: a nest
    ///   over the copied extents (on-chip regions stay inside their buffers, R3 / R4, so no
    ///   partial-tile masking is needed).
    fn wrap_fragment_stores(&self, allocs: &[crate::ir::BufferDecl], body: &mut [Stmt]) {
        use crate::ir::{ForKind, Scope};
        let fragment = |name: &str| {
            allocs
                .iter()
                .any(|a| a.name.name == name && a.scope == Scope::Fragment)
        };
        for stmt in body.iter_mut() {
            if let StmtKind::Copy { src, dst } = &stmt.kind {
                if let Some(nest) = self.partial_fragment_copy(allocs, src, dst, stmt.span) {
                    *stmt = nest;
                    continue;
                }
            }
            let touches_fragment = |st: &Stmt| match &st.kind {
                StmtKind::Store { buffer, .. } => {
                    fragment(&buffer.name)
                        || visit::stmt_exprs(st).into_iter().any(|e| {
                            let mut found = false;
                            visit::for_each_subexpr(e, &mut |x| {
                                if let ExprKind::Load { buffer, .. } = &x.kind {
                                    found |= fragment(buffer);
                                }
                            });
                            found
                        })
                }
                _ => false,
            };
            // An atomic add at block level is the block adding once: every thread running
            // it would add once per thread.
            let wrap = touches_fragment(stmt) || matches!(stmt.kind, StmtKind::AtomicAdd { .. });
            match &mut stmt.kind {
                StmtKind::Store { .. } | StmtKind::AtomicAdd { .. } if wrap => {
                    let span = stmt.span;
                    let store = std::mem::replace(stmt, Stmt::new(StmtKind::Barrier, span));
                    *stmt = Stmt::new(
                        StmtKind::For(crate::ir::For {
                            var: Ident::new(self.generated_name("i"), span),
                            start: Expr::new(ExprKind::Int(0), span),
                            stop: Expr::new(ExprKind::Int(1), span),
                            kind: ForKind::Parallel,
                            body: vec![store],
                        }),
                        span,
                    );
                }
                StmtKind::For(f)
                    if matches!(
                        f.kind,
                        ForKind::Serial | ForKind::Unroll | ForKind::Pipelined { .. }
                    ) =>
                {
                    self.wrap_fragment_stores(allocs, &mut f.body)
                }
                StmtKind::If {
                    then_body,
                    else_body,
                    ..
                } => {
                    self.wrap_fragment_stores(allocs, then_body);
                    self.wrap_fragment_stores(allocs, else_body);
                }
                StmtKind::While { body, .. } => self.wrap_fragment_stores(allocs, body),
                _ => {}
            }
        }
    }

    /// The `T.Parallel` nest of a copy between on-chip buffers that covers part of a
    /// fragment (see [`Self::wrap_fragment_stores`]), or `None` when the copy is not one
    /// (a whole fragment, a global operand, extents not constant or not matching).
    fn partial_fragment_copy(
        &self,
        allocs: &[crate::ir::BufferDecl],
        src: &crate::ir::Region,
        dst: &crate::ir::Region,
        span: Span,
    ) -> Option<Stmt> {
        use crate::ir::{ForKind, Scope};
        let decl = |r: &crate::ir::Region| allocs.iter().find(|a| a.name.name == r.buffer.name);
        let (s, d) = (decl(src)?, decl(dst)?);
        let whole = |r: &crate::ir::Region, b: &crate::ir::BufferDecl| {
            r.ranges.len() == b.shape.len()
                && r.ranges.iter().zip(&b.shape).all(|(range, dim)| {
                    range.start.as_int() == Some(0) && range.extent.as_int() == dim.as_int()
                })
        };
        let partial = |r, b: &crate::ir::BufferDecl| b.scope == Scope::Fragment && !whole(r, b);
        if !(partial(src, s) || partial(dst, d)) {
            return None;
        }
        // The extents that are not 1, per side: the copy pairs them in order.
        let extents = |r: &crate::ir::Region| -> Option<Vec<i64>> {
            let all: Option<Vec<i64>> = r.ranges.iter().map(|x| x.extent.as_int()).collect();
            Some(all?.into_iter().filter(|&e| e != 1).collect())
        };
        let shape = extents(src)?;
        if shape != extents(dst)? || shape.is_empty() {
            return None;
        }
        let vars: Vec<String> = (0..shape.len())
            .map(|k| self.generated_name(&format!("i{k}")))
            .collect();
        let indices = |r: &crate::ir::Region| -> Vec<Expr> {
            let mut k = 0;
            r.ranges
                .iter()
                .map(|x| {
                    if x.extent.as_int() == Some(1) {
                        return x.start.clone();
                    }
                    let v = Expr::new(ExprKind::Var(vars[k].clone()), span);
                    k += 1;
                    match x.start.as_int() {
                        Some(0) => v,
                        _ => Expr::binary(crate::ir::BinOp::Add, x.start.clone(), v, span),
                    }
                })
                .collect()
        };
        let value = Expr::new(
            ExprKind::Load {
                buffer: src.buffer.name.clone(),
                indices: indices(src),
            },
            span,
        );
        let mut nest = Stmt::new(
            StmtKind::Store {
                buffer: dst.buffer.clone(),
                indices: indices(dst),
                value,
            },
            span,
        );
        for (var, extent) in vars.iter().zip(&shape).rev() {
            nest = Stmt::new(
                StmtKind::For(crate::ir::For {
                    var: Ident::new(var.clone(), span),
                    start: Expr::new(ExprKind::Int(0), span),
                    stop: Expr::new(ExprKind::Int(*extent), span),
                    kind: ForKind::Parallel,
                    body: vec![nest],
                }),
                span,
            );
        }
        Some(nest)
    }

    /// Thread variables used in a kernel body make it per-thread code, as in TileLang where
    /// every thread runs the statements of a kernel: the body becomes
    /// `for tx in T.thread_binding(128, thread="threadIdx.x"):` (one loop per used axis, x
    /// outermost), the thread level. That needs a body with no tile-level construct (tile
    /// ops and `T.Parallel` run on the whole block, fragments are spread over it); with one,
    /// a use of a thread variable is an error that says what to write instead.
    fn bind_thread_vars(
        &mut self,
        vars: &[(Ident, usize)],
        allocs: &[crate::ir::BufferDecl],
        threads: &[Expr],
        body: Vec<Stmt>,
    ) -> Option<Vec<Stmt>> {
        let used = thread_var_uses(vars, &body);
        if used.is_empty() {
            return Some(body);
        }
        // In per-thread code, `T.clear(acc)` / `T.fill(acc, v)` of a whole per-thread
        // (`T.alloc_local`) buffer is each thread's own loop over its elements.
        let mut body = body;
        per_thread_fills(allocs, &mut body, &|base| self.generated_name(base));
        // Fills of shared memory that are the only tile-level code left: the block's
        // threads' strided loops (TileLang's top-k selector zeroes its histogram so between
        // explicit barriers).
        if let (Some((tx, 0, _)), [block]) = (used.iter().find(|u| u.1 == 0), threads) {
            let names: Vec<&str> = used.iter().map(|u| u.0.name.as_str()).collect();
            if only_shared_fills(allocs, &body, &names) {
                let threads = block.clone();
                shared_fills_per_thread(allocs, (&tx.name, &threads), &mut body, &|base| {
                    self.generated_name(base)
                });
            }
        }
        if tile_construct(allocs, &body).is_some() {
            let vars: Vec<(Ident, usize)> = used.iter().map(|(v, a, _)| (v.clone(), *a)).collect();
            return match super::thread_regions::Regions::new(&vars, allocs, threads).wrap(body) {
                Ok(body) => Some(body),
                Err(errors) => {
                    for e in errors {
                        self.error(e);
                    }
                    None
                }
            };
        }
        let mut axes: Vec<&(Ident, usize, Span)> = used.iter().collect();
        axes.sort_by_key(|u| std::cmp::Reverse(u.1));
        for (var, axis, _) in axes {
            let extent = threads.get(*axis).cloned().unwrap_or_else(|| Expr::int(1));
            let span = var.span;
            body = vec![Stmt::new(
                StmtKind::For(crate::ir::For {
                    var: var.clone(),
                    start: Expr::new(ExprKind::Int(0), span),
                    stop: Expr::new(extent.kind, span),
                    kind: crate::ir::ForKind::ThreadBinding(super::thread_regions::thread_tag(
                        *axis,
                    )),
                    body,
                }),
                span,
            )];
        }
        Some(body)
    }

    /// Whether `stmt` is `x = T.launch_thread(...)`.
    pub fn is_launch_thread(&self, stmt: &ast::Stmt) -> bool {
        launch_thread_call(stmt).is_some()
    }

    /// TileLang 0.1.x: the run of `T.launch_thread` lines at the start of `stmts` gives the
    /// grid and block; the statements after it are the kernel body.
    pub fn launch_thread_kernel(&mut self, stmts: &[&ast::Stmt]) -> Option<Stmt> {
        let mut blocks: Vec<(ThreadTag, Ident, Expr)> = Vec::new();
        let mut threads: Vec<(ThreadTag, Ident, i64)> = Vec::new();
        let mut n = 0;
        let mut ok = true;
        for stmt in stmts {
            let Some((target, call_span, args)) = launch_thread_call(stmt) else {
                break;
            };
            n += 1;
            let Some(a) = self.bind("T.launch_thread", call_span, args, &["thread", "extent"], 2)
            else {
                ok = false;
                continue;
            };
            let (Some(tag_arg), Some(ext_arg)) = (a[0], a[1]) else {
                ok = false;
                continue;
            };
            let ast::ExprKind::Name(var) = &target.kind else {
                self.error(Diagnostic::error(target.span, "expected a name"));
                ok = false;
                continue;
            };
            let ident = Ident::new(var.clone(), target.span);
            let Some(tag) = self.thread_tag(tag_arg) else {
                ok = false;
                continue;
            };
            if blocks.iter().any(|b| b.0 == tag) || threads.iter().any(|t| t.0 == tag) {
                self.error(Diagnostic::error(
                    tag_arg.span,
                    format!("\"{}\" is launched twice", tag.name()),
                ));
                ok = false;
                continue;
            }
            if is_block_tag(tag) {
                match self.expr(ext_arg) {
                    Some(e) => blocks.push((tag, ident, e)),
                    None => ok = false,
                }
            } else {
                match self.const_int(ext_arg, "a thread extent") {
                    Some(v) => threads.push((tag, ident, v)),
                    None => ok = false,
                }
            }
        }
        let first = stmts.first().map_or(Span::DUMMY, |s| s.span);
        let span = first.to(stmts.last().map_or(first, |s| s.span));
        blocks.sort_by_key(|b| b.0 as u8);
        let order = [ThreadTag::BlockX, ThreadTag::BlockY, ThreadTag::BlockZ];
        if blocks.is_empty() || blocks.iter().zip(order).any(|(b, want)| b.0 != want) {
            return self.fail(Diagnostic::error(
                first,
                "a kernel launches blockIdx.x first, then optionally blockIdx.y and blockIdx.z",
            ));
        }
        if threads.is_empty() {
            return self.fail(Diagnostic::error(
                first,
                "a kernel launched with `T.launch_thread` needs a \"threadIdx.x\" launch",
            ));
        }
        let mut shape = vec![1i64; 3];
        for (tag, _, v) in &threads {
            let i = match tag {
                ThreadTag::ThreadX => 0,
                ThreadTag::ThreadY => 1,
                _ => 2,
            };
            if let Some(slot) = shape.get_mut(i) {
                *slot = *v;
            }
        }
        let block_shape = self.block_shape(shape, first)?;
        if !ok {
            return None;
        }
        let thread_vars: Vec<(Ident, usize)> = threads
            .into_iter()
            .map(|(tag, var, _)| (var, thread_axis(tag)))
            .collect();
        let (block_vars, grid): (Vec<Ident>, Vec<Expr>) =
            blocks.into_iter().map(|(_, v, e)| (v, e)).unzip();
        let rest = stmts.get(n..).unwrap_or(&[]);
        self.kernel(grid, block_vars, Some(block_shape), span, |lw| {
            if let Some(state) = lw.kernels.last_mut() {
                state.thread_vars = thread_vars;
            }
            lw.block_refs(rest)
        })
    }

    /// TileLang 0.1.15: `for bx in T.thread_binding(n, thread="blockIdx.x"):` loops (nested,
    /// x outermost) around a body that launches threads. Returns `None` when the loop is not
    /// shaped like that (it is then an ordinary thread-bound loop).
    pub fn thread_binding_kernel(
        &mut self,
        targets: &[ast::Ident],
        iter: &ast::Expr,
        body: &[ast::Stmt],
        span: Span,
    ) -> Option<Option<Stmt>> {
        // Peel the chain of directly nested blockIdx loops.
        let mut chain: Vec<(&ast::Ident, &ast::Expr)> = Vec::new();
        let (mut targets, mut iter, mut body) = (targets, iter, body);
        while let ([var], Some(_)) = (targets, block_binding_tag(iter)) {
            chain.push((var, iter));
            match body {
                [ast::Stmt {
                    kind:
                        ast::StmtKind::For {
                            targets: t,
                            iter: i,
                            body: b,
                        },
                    ..
                }] if t.len() == 1 && block_binding_tag(i).is_some() => {
                    targets = t;
                    iter = i;
                    body = b;
                }
                _ => break,
            }
        }
        if chain.is_empty() || !launches_threads(body) {
            return None;
        }
        let mut grid = Vec::new();
        let mut vars = Vec::new();
        let order = [ThreadTag::BlockX, ThreadTag::BlockY, ThreadTag::BlockZ];
        for (k, (var, it)) in chain.iter().enumerate() {
            let ast::ExprKind::Call(_, args) = &it.kind else {
                return None;
            };
            let Some(a) = self.bind(
                "T.thread_binding",
                it.span,
                args,
                &["start", "stop", "thread"],
                1,
            ) else {
                return Some(None);
            };
            let tag = a[2].and_then(|t| match &t.kind {
                ast::ExprKind::Str(s) => ThreadTag::parse(s),
                _ => None,
            });
            if tag != order.get(k).copied() {
                return Some(self.fail(Diagnostic::error(
                    it.span,
                    "kernel loops bind blockIdx.x first, then blockIdx.y, then blockIdx.z",
                )));
            }
            let extent = match (a[0], a[1]) {
                (Some(n), None) => self.expr(n),
                (Some(start), Some(stop)) => {
                    let s = self.expr(start);
                    if s.as_ref().and_then(Expr::as_int) != Some(0) {
                        return Some(self.fail(Diagnostic::error(
                            start.span,
                            "a kernel's block loop starts at 0",
                        )));
                    }
                    self.expr(stop)
                }
                _ => None,
            };
            let Some(extent) = extent else {
                return Some(None);
            };
            grid.push(extent);
            vars.push(Ident::new(var.name.clone(), var.span));
        }
        let body_refs: Vec<&ast::Stmt> = body.iter().collect();
        Some(self.kernel(grid, vars, None, span, |lw| lw.block_refs(&body_refs)))
    }

    /// `tx: T.int32 = T.launch_thread_idx(0)` (TVMScript 0.1.15) or
    /// `tx = T.get_thread_binding(0)` (DSL; the axis defaults to 0): a thread variable of the
    /// open kernel (see `bind_thread_vars`).
    pub fn thread_var(
        &mut self,
        ident: &ast::Ident,
        callee: &str,
        call_span: Span,
        args: &[ast::Arg],
    ) -> Option<Stmt> {
        let required = usize::from(callee == "T.launch_thread_idx");
        let a = self.bind(callee, call_span, args, &["dim"], required)?;
        let axis = match a[0] {
            None => 0,
            Some(dim) => match self.const_int(dim, "the thread dimension")? {
                d @ 0..=2 => d as usize,
                d => {
                    return self.fail(Diagnostic::error(
                        dim.span,
                        format!("the thread dimension is 0, 1 or 2 (x, y, z), found {d}"),
                    ))
                }
            },
        };
        let Some(k) = self.kernels.last_mut() else {
            return self.fail(Diagnostic::error(
                call_span,
                format!("`{callee}` outside a kernel"),
            ));
        };
        // The axis asked for again (a macro's own `tx = T.get_thread_binding(0)`): the same
        // thread index as the first variable of the axis, which its loop binds.
        if let Some((first, _)) = k.thread_vars.iter().find(|(_, a)| *a == axis) {
            let value = Expr::new(ExprKind::Var(first.name.clone()), call_span);
            return Some(Stmt::new(
                StmtKind::Let {
                    var: Ident::new(ident.name.clone(), ident.span),
                    dtype: None,
                    value,
                },
                ident.span.to(call_span),
            ));
        }
        k.thread_vars
            .push((Ident::new(ident.name.clone(), ident.span), axis));
        None
    }

    /// `tx = T.thread_binding(0, 32, thread="threadIdx.x")` inside `T.Kernel` (TileLang's
    /// per-thread spelling; also `T.thread_binding(32, thread=...)`): the same thread variable
    /// as `T.get_thread_binding(axis)`. The range must be the block's whole extent on that
    /// axis (a binding to part of it would need a guard TileLang does not write).
    pub fn thread_binding_var(&mut self, ident: &ast::Ident, call_span: Span, args: &[ast::Arg]) {
        let callee = "T.thread_binding";
        let Some(a) = self.bind(callee, call_span, args, &["start", "stop", "thread"], 1) else {
            return;
        };
        let (start, stop, thread) = match (a[0], a[1], a[2]) {
            (Some(n), Some(t), None) if matches!(t.kind, ast::ExprKind::Str(_)) => {
                (None, Some(n), Some(t))
            }
            (Some(n), None, t) => (None, Some(n), t),
            (s, n, t) => (s, n, t),
        };
        let Some(thread) = thread else {
            self.error(Diagnostic::error(
                call_span,
                "`T.thread_binding` needs `thread=\"threadIdx.x\"` (or another tag)",
            ));
            return;
        };
        let Some(tag) = self.thread_tag(thread) else {
            return;
        };
        let axis = match tag {
            ThreadTag::ThreadX => 0,
            ThreadTag::ThreadY => 1,
            ThreadTag::ThreadZ => 2,
            _ => {
                self.error(Diagnostic::error(
                    thread.span,
                    "inside `T.Kernel`, `T.thread_binding` binds a thread index (`threadIdx.x`, `.y` or `.z`); the block indices are the kernel's `as` names",
                ));
                return;
            }
        };
        if let Some(s) = start {
            match self.const_int(s, "the start of a thread binding") {
                Some(0) => {}
                Some(v) => {
                    self.error(Diagnostic::error(
                        s.span,
                        format!("a thread binding starts at 0, found {v}"),
                    ));
                    return;
                }
                None => return,
            }
        }
        let Some(stop) = stop.and_then(|e| self.const_int(e, "the extent of a thread binding"))
        else {
            return;
        };
        let block = self
            .kernels
            .last()
            .and_then(|k| k.threads.as_ref())
            .map(|t| t.get(axis).and_then(Expr::as_int).unwrap_or(1));
        match block {
            Some(have) if have != stop => {
                self.error(Diagnostic::error(
                    call_span,
                    format!(
                        "`{}` binds {stop} threads, but the block has {have} along {}",
                        ident.name,
                        tag.name()
                    ),
                ));
                return;
            }
            None if !self.kernels.is_empty() => {
                self.error(Diagnostic::error(
                    call_span,
                    "`T.thread_binding` as a statement needs the block shape first (`T.Kernel(..., threads=...)`)",
                ));
                return;
            }
            _ => {}
        }
        match self.kernels.last_mut() {
            Some(k) => k
                .thread_vars
                .push((Ident::new(ident.name.clone(), ident.span), axis)),
            None => self.error(Diagnostic::error(
                call_span,
                format!("`{callee}` as a statement is only allowed inside `T.Kernel`"),
            )),
        }
    }

    /// The innermost open kernel, or an error saying `what` needs one.
    pub(crate) fn open_kernel(&mut self, span: Span, what: &str) -> Option<&mut KernelState> {
        if self.kernels.is_empty() {
            self.error(Diagnostic::error(
                span,
                format!("{what} is only allowed inside `T.Kernel`"),
            ));
            return None;
        }
        self.kernels.last_mut()
    }

    /// `X = T.alloc_shared(shape, dtype)` and its relatives: hoisted into the kernel.
    pub fn alloc(
        &mut self,
        ident: &ast::Ident,
        callee: &str,
        call_span: Span,
        args: &[ast::Arg],
        stmt_span: Span,
    ) {
        let Some(a) = self.bind(callee, call_span, args, &["shape", "dtype", "scope"], 1) else {
            return;
        };
        let default_scope = match callee {
            "T.alloc_shared" => Some(Scope::Shared),
            "T.alloc_fragment" => Some(Scope::Fragment),
            "T.alloc_local" => Some(Scope::Local),
            _ => None,
        };
        let scope = match a[2] {
            Some(s) => self.scope(s),
            None => match default_scope {
                Some(s) => Some(s),
                None => {
                    self.error(Diagnostic::error(
                        call_span,
                        format!("`{callee}` needs `scope=\"shared.dyn\"` (or \"local.fragment\", \"local\")"),
                    ));
                    None
                }
            },
        };
        let shape = a[0].and_then(|s| self.shape(s));
        let dtype = match a[1] {
            Some(d) => self.dtype(d),
            None => Some(crate::dtype::DType::Float32),
        };
        let (Some(scope), Some(shape), Some(dtype)) = (scope, shape, dtype) else {
            return;
        };
        if self.open_kernel(call_span, "an allocation").is_none() {
            return;
        }
        if let Some(decl) = self.declare(ident, shape, dtype, scope, stmt_span) {
            if let Some(k) = self.kernels.last_mut() {
                k.allocs.push(decl);
            }
        }
    }

    /// `R = T.alloc_reducer(shape, dtype, op="sum", replication="all")`: a fragment
    /// allocation, recorded as a reducer of the kernel. Only TileLang's v1 reducer (with
    /// `replication=`) is read: the v2 form (no `replication=`) is updated through
    /// `T.reducer_update` and finalized into a separate fragment, which tlc does not read.
    pub fn alloc_reducer(
        &mut self,
        ident: &ast::Ident,
        call_span: Span,
        args: &[ast::Arg],
        stmt_span: Span,
    ) {
        let Some(a) = self.bind(
            "T.alloc_reducer",
            call_span,
            args,
            &["shape", "dtype", "op", "replication"],
            2,
        ) else {
            return;
        };
        let op = match a[2] {
            None => Some(ReducerOp::Sum),
            Some(e) => self.string(e, "the reducer op").and_then(|text| {
                ReducerOp::parse(text).or_else(|| {
                    self.fail(
                        Diagnostic::error(e.span, format!("unsupported reducer op \"{text}\""))
                            .with_note(
                                "tlc reads \"sum\", \"max\" and \"min\" (TileLang's bitwise ops \
                                 belong to its v2 reducer)",
                            ),
                    )
                })
            }),
        };
        let replication = match a[3] {
            None => self.fail(
                Diagnostic::error(call_span, "`T.alloc_reducer` without `replication=` is TileLang's v2 reducer, which tlc does not read yet")
                    .with_note("tlc reads the v1 reducer: `T.alloc_reducer(shape, dtype, op=..., replication=\"all\" or \"none\")`, updated with `R[i] += ...` in `T.Parallel` and closed by `T.finalize_reducer(R)`"),
            ),
            Some(e) => self.string(e, "the replication").and_then(|text| {
                Replication::parse(text).or_else(|| {
                    self.fail(
                        Diagnostic::error(e.span, format!("unsupported replication \"{text}\""))
                            .with_note("expected \"all\" or \"none\""),
                    )
                })
            }),
        };
        let shape = a[0].and_then(|s| self.shape(s));
        let dtype = a[1].and_then(|d| self.dtype(d));
        let (Some(op), Some(replication), Some(shape), Some(dtype)) =
            (op, replication, shape, dtype)
        else {
            return;
        };
        if self.open_kernel(call_span, "an allocation").is_none() {
            return;
        }
        if let Some(decl) = self.declare(ident, shape, dtype, Scope::Fragment, stmt_span) {
            if let Some(k) = self.kernels.last_mut() {
                k.reducers.push(Reducer {
                    buffer: decl.name.clone(),
                    op,
                    replication,
                    span: call_span,
                });
                k.allocs.push(decl);
            }
        }
    }

    /// `T.finalize_reducer(R)`: TileLang's v1 in-place form only.
    pub fn finalize_reducer(&mut self, span: Span, args: &[ast::Arg]) -> Option<Stmt> {
        let a = self.bind("T.finalize_reducer", span, args, &["reducer", "dst"], 1)?;
        if let Some(dst) = a[1] {
            return self.fail(
                Diagnostic::error(
                    dst.span,
                    "`T.finalize_reducer(R, dst)` (TileLang's v2 reducer) is not read yet",
                )
                .with_note("finalize a v1 reducer in place: `T.finalize_reducer(R)`"),
            );
        }
        let r = a[0]?;
        let ast::ExprKind::Name(name) = &r.kind else {
            return self.fail(Diagnostic::error(r.span, "expected the reducer's name"));
        };
        Some(Stmt::new(
            StmtKind::FinalizeReducer(Ident::new(name.clone(), r.span)),
            span,
        ))
    }

    fn scope(&mut self, e: &ast::Expr) -> Option<Scope> {
        let text = self.string(e, "the scope")?;
        match text {
            "shared" | "shared.dyn" => Some(Scope::Shared),
            "local.fragment" => Some(Scope::Fragment),
            "local" => Some(Scope::Local),
            other => self.fail(
                Diagnostic::error(e.span, format!("unsupported scope \"{other}\"")).with_note(
                    "expected \"shared.dyn\", \"shared\", \"local.fragment\" or \"local\"",
                ),
            ),
        }
    }

    /// Sets the kernel's rasterization, once.
    fn set_swizzle(&mut self, swizzle: Swizzle) {
        let span = swizzle.span;
        let Some(k) = self.open_kernel(span, "rasterization") else {
            return;
        };
        if let Some(prev) = &k.swizzle {
            let prev = prev.span;
            self.error(
                Diagnostic::error(span, "a kernel is rasterized only once")
                    .with_note_at(prev, "rasterization was already set here"),
            );
        } else {
            k.swizzle = Some(swizzle);
        }
    }

    /// `T.no_set_max_nreg()` (TileLang's warp-specialized kernels): no `setmaxnreg` in
    /// this kernel's schedule. `name` is how it was written: TileLang's
    /// `T.disable_warp_group_reg_alloc()` is the same call (its builtin returns
    /// `no_set_max_nreg()`).
    pub fn no_set_max_nreg(&mut self, name: &str, span: Span, args: &[ast::Arg]) {
        if self.bind(name, span, args, &[], 0).is_none() {
            return;
        }
        if let Some(kernel) = self.open_kernel(span, &format!("`{name}`")) {
            kernel.no_set_max_nreg = true;
        }
    }

    /// `T.min_blocks_per_sm(2)`: how many blocks the kernel is compiled to fit on one SM
    /// (CUDA's `__launch_bounds__(threads, B)`); the verifier checks the value (K10).
    pub fn min_blocks_per_sm(&mut self, span: Span, args: &[ast::Arg]) {
        let Some(a) = self.bind("T.min_blocks_per_sm", span, args, &["blocks"], 1) else {
            return;
        };
        let Some(blocks) = a[0].and_then(|b| self.expr(b)) else {
            return;
        };
        let Some(kernel) = self.open_kernel(span, "`T.min_blocks_per_sm`") else {
            return;
        };
        if let Some((_, prev)) = &kernel.min_blocks_per_sm {
            let prev = *prev;
            self.error(
                Diagnostic::error(span, "a kernel gives `T.min_blocks_per_sm` once")
                    .with_note_at(prev, "it was already given here"),
            );
            return;
        }
        kernel.min_blocks_per_sm = Some((blocks, span));
    }

    /// `T.use_swizzle(panel_size=10, order="row")`.
    pub fn use_swizzle(&mut self, span: Span, args: &[ast::Arg]) {
        let Some(a) = self.bind(
            "T.use_swizzle",
            span,
            args,
            &["panel_size", "order", "enable"],
            1,
        ) else {
            return;
        };
        let panel = a[0].and_then(|p| self.expr(p));
        let order = match a[1] {
            None => Some(RasterOrder::Row),
            Some(o) => match self.string(o, "the rasterization order") {
                Some("row") => Some(RasterOrder::Row),
                Some("column") | Some("col") => Some(RasterOrder::Column),
                Some(other) => {
                    self.error(Diagnostic::error(
                        o.span,
                        format!("unknown rasterization order \"{other}\"; expected \"row\" or \"column\""),
                    ));
                    None
                }
                None => None,
            },
        };
        let enable = match a[2] {
            Some(e) => self.const_bool(e, "`enable`"),
            None => Some(true),
        };
        if let (Some(panel_size), Some(order), Some(true)) = (panel, order, enable) {
            self.set_swizzle(Swizzle {
                panel_size,
                order,
                span,
            });
        }
    }

    /// `T.attr(None, "threadblock_swizzle_pattern", "tl::rasterization2DRow<10>")` or
    /// `... T.tvm_tuple("rasterization2DRow", 10))`.
    pub fn attr(&mut self, span: Span, args: &[ast::Arg]) {
        let Some(a) = self.bind("T.attr", span, args, &["node", "attr_key", "value"], 3) else {
            return;
        };
        let (Some(key_arg), Some(value)) = (a[1], a[2]) else {
            return;
        };
        let Some(key) = self.string(key_arg, "the attribute key") else {
            return;
        };
        if key != "threadblock_swizzle_pattern" {
            self.error(Diagnostic::error(
                key_arg.span,
                format!("unsupported attribute \"{key}\""),
            ));
            return;
        }
        let parsed = match &value.kind {
            ast::ExprKind::Str(s) => parse_raster_template(s).map(|(o, n)| (o, Expr::int(n))),
            ast::ExprKind::Call(f, targs) if f.dotted().as_deref() == Some("T.tvm_tuple") => {
                match targs.as_slice() {
                    [ast::Arg {
                        name: None,
                        value: fname,
                    }, ast::Arg {
                        name: None,
                        value: panel,
                    }] => {
                        let order = match &fname.kind {
                            ast::ExprKind::Str(s) => raster_order(s),
                            _ => None,
                        };
                        match (order, self.expr(panel)) {
                            (Some(o), Some(p)) => Some((o, p)),
                            _ => None,
                        }
                    }
                    _ => None,
                }
            }
            _ => None,
        };
        match parsed {
            Some((order, panel_size)) => self.set_swizzle(Swizzle {
                panel_size,
                order,
                span,
            }),
            None => self.error(
                Diagnostic::error(value.span, "unsupported threadblock swizzle pattern")
                    .with_note("expected \"tl::rasterization2DRow<P>\" or T.tvm_tuple(\"rasterization2DColumn\", P)"),
            ),
        }
    }

    /// `T.sblock_attr({"tl.launch_threads": [128, 1, 1]})`.
    pub fn sblock_attr(&mut self, span: Span, args: &[ast::Arg]) {
        let Some(a) = self.bind("T.sblock_attr", span, args, &["attrs"], 1) else {
            return;
        };
        let Some(dict) = a[0] else { return };
        let ast::ExprKind::Dict(entries) = &dict.kind else {
            self.error(Diagnostic::error(
                dict.span,
                "expected a dict of block attributes",
            ));
            return;
        };
        for (k, v) in entries {
            match self.string(k, "a block attribute key") {
                Some("tl.launch_threads") => {
                    let Some(values) = self.const_int_list(v, "the thread count") else {
                        continue;
                    };
                    let Some(shape) = self.block_shape(values, v.span) else {
                        continue;
                    };
                    if let Some(kernel) = self.open_kernel(span, "`T.sblock_attr`") {
                        kernel.threads = Some(shape);
                    }
                }
                Some(other) => self.error(Diagnostic::error(
                    k.span,
                    format!("unsupported block attribute \"{other}\""),
                )),
                None => {}
            }
        }
    }

    /// `T.shared_arena(bytes=N, offsets={A_shared: 0, B_shared: 8192})`: the kernel's one
    /// dynamic shared-memory arena (thread level), hoisted into the kernel like the
    /// allocations. Offsets are checked by the verifier, not here.
    pub fn shared_arena(&mut self, span: Span, args: &[ast::Arg]) {
        let Some(a) = self.bind("T.shared_arena", span, args, &["bytes", "offsets"], 2) else {
            return;
        };
        let (Some(bytes_arg), Some(map)) = (a[0], a[1]) else {
            return;
        };
        let bytes = self.const_int(bytes_arg, "the arena size");
        let ast::ExprKind::Dict(entries) = &map.kind else {
            self.error(Diagnostic::error(
                map.span,
                "expected a dict `{buffer: byte_offset}`",
            ));
            return;
        };
        let mut offsets = Vec::with_capacity(entries.len());
        let mut ok = true;
        for (k, v) in entries {
            let ast::ExprKind::Name(buf) = &k.kind else {
                self.error(Diagnostic::error(k.span, "expected a buffer name"));
                ok = false;
                continue;
            };
            match self.const_int(v, "a byte offset") {
                Some(o) => offsets.push((Ident::new(buf.clone(), k.span), o)),
                None => ok = false,
            }
        }
        let (Some(bytes), true) = (bytes, ok) else {
            return;
        };
        let Some(kernel) = self.open_kernel(span, "`T.shared_arena`") else {
            return;
        };
        if let Some(prev) = kernel.arena_span {
            self.error(
                Diagnostic::error(span, "a kernel has one shared arena")
                    .with_note_at(prev, "the arena was already given here"),
            );
            return;
        }
        kernel.arena = Some(Arena { bytes, offsets });
        kernel.arena_span = Some(span);
    }

    /// `T.annotate_layout({A_shared: T.make_swizzled_layout(A_shared), …})`; the layouts
    /// are lowered by `Lowerer::layout` (`lower_intrinsic.rs`).
    pub fn annotate_layout(&mut self, span: Span, args: &[ast::Arg]) {
        let Some(a) = self.bind("T.annotate_layout", span, args, &["layout_map"], 1) else {
            return;
        };
        let Some(map) = a[0] else { return };
        let ast::ExprKind::Dict(entries) = &map.kind else {
            self.error(Diagnostic::error(
                map.span,
                "expected a dict `{buffer: T.make_swizzled_layout(buffer), ...}`",
            ));
            return;
        };
        let mut annotations = Vec::new();
        for (k, v) in entries {
            let ast::ExprKind::Name(buf) = &k.kind else {
                self.error(Diagnostic::error(k.span, "expected a buffer name"));
                continue;
            };
            let is_layout_call = matches!(&v.kind, ast::ExprKind::Call(f, _)
                if matches!(f.dotted().as_deref(), Some("T.Layout" | "T.layout.Layout")));
            if is_layout_call && self.params.contains(buf) {
                self.global_layout(buf, v, k.span.to(v.span));
                continue;
            }
            let Some(layout) = self.layout(buf, v) else {
                continue;
            };
            annotations.push(LayoutAnnotation {
                buffer: Ident::new(buf.clone(), k.span),
                layout,
                span: k.span.to(v.span),
            });
        }
        if let Some(kernel) = self.open_kernel(span, "`T.annotate_layout`") {
            kernel.layouts.extend(annotations);
        }
    }
}

fn is_block_tag(tag: ThreadTag) -> bool {
    matches!(
        tag,
        ThreadTag::BlockX | ThreadTag::BlockY | ThreadTag::BlockZ
    )
}

/// `x = T.launch_thread(...)`: target, call span, arguments.
fn launch_thread_call(stmt: &ast::Stmt) -> Option<(&ast::Expr, Span, &[ast::Arg])> {
    let ast::StmtKind::Assign { target, value } = &stmt.kind else {
        return None;
    };
    let ast::ExprKind::Call(func, args) = &value.kind else {
        return None;
    };
    (func.dotted().as_deref() == Some("T.launch_thread")).then_some((target, value.span, args))
}

/// The blockIdx tag of a `T.thread_binding(..., thread="blockIdx.*")` loop iterator.
fn block_binding_tag(iter: &ast::Expr) -> Option<ThreadTag> {
    let ast::ExprKind::Call(func, args) = &iter.kind else {
        return None;
    };
    if func.dotted().as_deref() != Some("T.thread_binding") {
        return None;
    }
    args.iter()
        .filter(|a| a.name.as_ref().is_none_or(|n| n.name == "thread"))
        .find_map(|a| match &a.value.kind {
            ast::ExprKind::Str(s) => ThreadTag::parse(s).filter(|t| is_block_tag(*t)),
            _ => None,
        })
}

/// Whether a body launches threads the TileLang 0.1.15 way (so the loops around it are a
/// kernel grid rather than ordinary thread-bound loops).
fn launches_threads(body: &[ast::Stmt]) -> bool {
    body.iter().any(|s| match &s.kind {
        ast::StmtKind::AnnAssign {
            value: Some(v), ..
        }
        | ast::StmtKind::Assign { value: v, .. } => {
            matches!(&v.kind, ast::ExprKind::Call(f, _) if f.dotted().as_deref() == Some("T.launch_thread_idx"))
        }
        ast::StmtKind::With { item, .. } => {
            matches!(&item.kind, ast::ExprKind::Call(f, _) if f.dotted().as_deref() == Some("T.sblock"))
        }
        _ => false,
    })
}

fn raster_order(name: &str) -> Option<RasterOrder> {
    match name {
        "rasterization2DRow" => Some(RasterOrder::Row),
        "rasterization2DColumn" => Some(RasterOrder::Column),
        _ => None,
    }
}

/// `"tl::rasterization2DRow<10>"` → (Row, 10).
fn parse_raster_template(s: &str) -> Option<(RasterOrder, i64)> {
    let rest = s.strip_prefix("tl::")?;
    let (name, tail) = rest.split_once('<')?;
    let panel = tail.strip_suffix('>')?.trim().parse::<i64>().ok()?;
    Some((raster_order(name)?, panel))
}

/// The axis (0: x, 1: y, 2: z) of a `threadIdx.*` tag.
fn thread_axis(tag: ThreadTag) -> usize {
    match tag {
        ThreadTag::ThreadY => 1,
        ThreadTag::ThreadZ => 2,
        _ => 0,
    }
}

/// The thread variables `body` uses, each with its axis and first use, in `vars` order.
fn thread_var_uses(vars: &[(Ident, usize)], body: &[Stmt]) -> Vec<(Ident, usize, Span)> {
    let mut first: Vec<Option<Span>> = vec![None; vars.len()];
    visit::for_each_stmt(body, &mut |stmt| {
        for e in visit::stmt_exprs(stmt) {
            visit::for_each_subexpr(e, &mut |sub| {
                if let ExprKind::Var(n) = &sub.kind {
                    if let Some(i) = vars.iter().position(|(v, _)| &v.name == n) {
                        if let Some(slot) = first.get_mut(i) {
                            slot.get_or_insert(sub.span);
                        }
                    }
                }
            });
        }
    });
    vars.iter()
        .zip(first)
        .filter_map(|((v, axis), at)| at.map(|at| (v.clone(), *axis, at)))
        .collect()
}

/// Rewrites each `T.fill` of a whole local buffer of constant shape in `body` into
/// `for k in T.serial(n): buf[k] = value` (one loop per dimension).
/// `name` makes the loop variables up (`syntax::generated_names`).
fn per_thread_fills(
    allocs: &[crate::ir::BufferDecl],
    body: &mut [Stmt],
    name: &dyn Fn(&str) -> String,
) {
    for stmt in body.iter_mut() {
        if let StmtKind::Fill { dst, value } = &stmt.kind {
            let local = allocs
                .iter()
                .find(|a| a.name.name == dst.buffer.name && a.scope == Scope::Local);
            let whole = local.is_some_and(|a| {
                a.shape.len() == dst.ranges.len()
                    && a.shape.iter().zip(&dst.ranges).all(|(d, r)| {
                        r.start.as_int() == Some(0)
                            && d.as_int().is_some()
                            && r.extent.as_int() == d.as_int()
                    })
            });
            if whole {
                let span = stmt.span;
                let vars: Vec<String> = (0..dst.ranges.len())
                    .map(|d| name(&format!("{}_fill{d}", dst.buffer.name)))
                    .collect();
                let mut inner = vec![Stmt::new(
                    StmtKind::Store {
                        buffer: dst.buffer.clone(),
                        indices: vars
                            .iter()
                            .map(|v| Expr::new(ExprKind::Var(v.clone()), span))
                            .collect(),
                        value: value.clone(),
                    },
                    span,
                )];
                for (v, r) in vars.iter().zip(&dst.ranges).rev() {
                    inner = vec![Stmt::new(
                        StmtKind::For(crate::ir::For {
                            var: Ident::new(v.clone(), span),
                            start: Expr::int(0),
                            stop: r.extent.clone(),
                            kind: crate::ir::ForKind::Serial,
                            body: inner,
                        }),
                        span,
                    )];
                }
                if let Some(s) = inner.pop() {
                    *stmt = s;
                }
                continue;
            }
        }
        for child in visit::child_bodies_mut(stmt) {
            per_thread_fills(allocs, child, name);
        }
    }
}

/// Whether the only tile-level constructs of `body` ([`tile_construct`]) are fills of shared
/// buffers over regions of constant extents, none under an `if`, loop or `while` whose own
/// condition or bounds name a thread variable of `thread_vars` (`if tx < 64: T.clear(S)`
/// stays a tile op, refused as one: a tile op runs on the whole block).
fn only_shared_fills(
    allocs: &[crate::ir::BufferDecl],
    body: &[Stmt],
    thread_vars: &[&str],
) -> bool {
    fn walk(
        allocs: &[crate::ir::BufferDecl],
        body: &[Stmt],
        thread_vars: &[&str],
        (under_thread, fills): (bool, &mut usize),
    ) -> bool {
        let names_thread = |s: &Stmt| {
            visit::stmt_exprs(s).into_iter().any(|e| {
                let mut hit = false;
                visit::for_each_subexpr(e, &mut |x| {
                    hit |= matches!(&x.kind, ExprKind::Var(n) if thread_vars.contains(&n.as_str()));
                });
                hit
            })
        };
        for stmt in body {
            match &stmt.kind {
                StmtKind::Fill { dst, .. } => {
                    let shared = allocs
                        .iter()
                        .any(|a| a.name.name == dst.buffer.name && a.scope == Scope::Shared);
                    let constant = dst.ranges.iter().all(|r| r.extent.as_int().is_some());
                    if !shared || !constant || under_thread {
                        return false;
                    }
                    *fills += 1;
                }
                StmtKind::Copy { .. } | StmtKind::Gemm(_) => return false,
                StmtKind::For(f) if f.kind == crate::ir::ForKind::Parallel => return false,
                _ => {
                    let here = under_thread || names_thread(stmt);
                    for child in visit::child_bodies(stmt) {
                        if !walk(allocs, child, thread_vars, (here, &mut *fills)) {
                            return false;
                        }
                    }
                }
            }
        }
        true
    }
    if allocs.iter().any(|a| a.scope == Scope::Fragment) {
        return false;
    }
    let mut fills = 0;
    walk(allocs, body, thread_vars, (false, &mut fills)) && fills > 0
}

/// Rewrites each `T.fill(S[region], v)` of a shared buffer in `body` into the block's
/// threads' share of it, as TileLang lowers a fill — element `e` of the region's `n`
/// (row-major) by thread `e % threads`, with no barrier of its own:
/// `for k in T.serial(ceildiv(n, threads)): if k * threads + tx < n: S[start + unflat] = v`.
/// `(tx, threads)`: the x thread variable and the block's (one-dimensional) size.
fn shared_fills_per_thread(
    allocs: &[crate::ir::BufferDecl],
    (tx, threads): (&str, &Expr),
    body: &mut [Stmt],
    name: &dyn Fn(&str) -> String,
) {
    use crate::ir::BinOp;
    for stmt in body.iter_mut() {
        if let StmtKind::Fill { dst, value } = &stmt.kind {
            let shared = allocs
                .iter()
                .any(|a| a.name.name == dst.buffer.name && a.scope == Scope::Shared);
            let extents: Option<Vec<i64>> = dst.ranges.iter().map(|r| r.extent.as_int()).collect();
            if let (true, Some(extents)) = (shared, extents) {
                let span = stmt.span;
                let n: i64 = extents.iter().product();
                let k = name(&format!("{}_fill", dst.buffer.name));
                let var = |v: &str| Expr::new(ExprKind::Var(v.to_string()), span);
                let e = Expr::binary(
                    BinOp::Add,
                    Expr::binary(BinOp::Mul, var(&k), threads.clone(), span),
                    var(tx),
                    span,
                );
                // Row-major: the last dimension varies fastest; `e < n` keeps the first in
                // its extent without a `%`.
                let mut indices = Vec::with_capacity(extents.len());
                let mut inner: i64 = 1;
                for (d, (r, &ext)) in dst.ranges.iter().zip(&extents).enumerate().rev() {
                    let mut at = e.clone();
                    if inner > 1 {
                        at = Expr::binary(BinOp::FloorDiv, at, Expr::int(inner), span);
                    }
                    if d > 0 {
                        at = Expr::binary(BinOp::FloorMod, at, Expr::int(ext), span);
                    }
                    indices.push(match r.start.as_int() {
                        Some(0) => at,
                        _ => Expr::binary(BinOp::Add, r.start.clone(), at, span),
                    });
                    inner *= ext;
                }
                indices.reverse();
                let store = Stmt::new(
                    StmtKind::Store {
                        buffer: dst.buffer.clone(),
                        indices,
                        value: value.clone(),
                    },
                    span,
                );
                let guard = Stmt::new(
                    StmtKind::If {
                        cond: Expr::binary(BinOp::Lt, e, Expr::int(n), span),
                        then_body: vec![store],
                        else_body: Vec::new(),
                    },
                    span,
                );
                let trips = Expr::binary(BinOp::CeilDiv, Expr::int(n), threads.clone(), span);
                *stmt = Stmt::new(
                    StmtKind::For(crate::ir::For {
                        var: Ident::new(k, span),
                        start: Expr::int(0),
                        stop: trips,
                        kind: crate::ir::ForKind::Serial,
                        body: vec![guard],
                    }),
                    span,
                );
                continue;
            }
        }
        for child in visit::child_bodies_mut(stmt) {
            shared_fills_per_thread(allocs, (tx, threads), child, name);
        }
    }
}

/// The first tile-level construct of a kernel, named, with its span: a fragment, a tile op,
/// a `T.Parallel` loop.
fn tile_construct(allocs: &[crate::ir::BufferDecl], body: &[Stmt]) -> Option<(String, Span)> {
    if let Some(f) = allocs.iter().find(|a| a.scope == Scope::Fragment) {
        return Some((format!("the fragment `{}`", f.name.name), f.span));
    }
    let mut found = None;
    visit::for_each_stmt(body, &mut |stmt| {
        if found.is_some() {
            return;
        }
        let what = match &stmt.kind {
            StmtKind::Copy { .. } => "`T.copy`",
            StmtKind::Gemm(_) => "`T.gemm`",
            StmtKind::Fill { .. } => "`T.fill`",
            StmtKind::For(f) if f.kind == crate::ir::ForKind::Parallel => "a `T.Parallel` loop",
            _ => return,
        };
        found = Some((what.to_string(), stmt.span));
    });
    found
}

/// Fragments whose elements the block reads as one value — in an `if` or `while`
/// condition, a serial loop's bounds or a block-level `let` (TileLang's block-sparse
/// attention: `T.copy(BlockSparseMask[b, h, q, :], block_mask)`, then `if block_mask[k]:`
/// around the loop's tile ops) — are shared buffers: every thread must see every element,
/// which a fragment, spread over the threads, does not give. The scope changes nothing the
/// tile ops mean (the tile-level interpreter holds both alike); a gemm accumulator keeps
/// its scope (it must be a fragment: `lower-tile-ops` reports the read).
fn shared_if_read_uniformly(allocs: &mut [crate::ir::BufferDecl], body: &[Stmt]) {
    use crate::ir::{ForKind, Scope};
    fn reads(e: &Expr, out: &mut Vec<String>) {
        visit::for_each_subexpr(e, &mut |x| {
            if let ExprKind::Load { buffer, .. } = &x.kind {
                out.push(buffer.clone());
            }
        });
    }
    fn walk(stmts: &[Stmt], out: &mut Vec<String>, accumulators: &mut Vec<String>) {
        for s in stmts {
            match &s.kind {
                StmtKind::If {
                    cond,
                    then_body,
                    else_body,
                } => {
                    reads(cond, out);
                    walk(then_body, out, accumulators);
                    walk(else_body, out, accumulators);
                }
                StmtKind::While { cond, body } => {
                    reads(cond, out);
                    walk(body, out, accumulators);
                }
                StmtKind::For(f)
                    if matches!(
                        f.kind,
                        ForKind::Serial | ForKind::Unroll | ForKind::Pipelined { .. }
                    ) =>
                {
                    reads(&f.start, out);
                    reads(&f.stop, out);
                    walk(&f.body, out, accumulators);
                }
                StmtKind::Let { value, .. } => reads(value, out),
                StmtKind::Gemm(g) => accumulators.push(g.c.buffer.name.clone()),
                _ => {}
            }
        }
    }
    let (mut read, mut accumulators) = (Vec::new(), Vec::new());
    walk(body, &mut read, &mut accumulators);
    for a in allocs.iter_mut() {
        if a.scope == Scope::Fragment
            && read.contains(&a.name.name)
            && !accumulators.contains(&a.name.name)
        {
            a.scope = Scope::Shared;
        }
    }
}
