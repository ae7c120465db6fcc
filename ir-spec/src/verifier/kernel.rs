//! Kernel and loop rules: grid and block shape, nesting, allocations, swizzle, layout
//! annotations, loop extents and loop-kind specific rules.

use super::consts::const_int;
use super::scope::DefKind;
use super::{Checker, KernelInfo};
use crate::diagnostic::Diagnostic;
use crate::dtype::DType;
use crate::ir::{Arena, BufferDecl, Expr, For, ForKind, Ident, Kernel, Scope, ThreadTag};
use crate::span::Span;
use crate::target::{
    Target, MAX_BLOCK_DIMS, MAX_GRID_DIMS, MAX_THREADS_PER_BLOCK, MAX_THREADS_PER_SM,
};
use std::collections::HashMap;

impl<'f> Checker<'f> {
    pub(super) fn kernel(&mut self, k: &'f Kernel, span: Span) {
        if let Some(outer) = self.kernel {
            let mut diag = Diagnostic::error(
                span,
                "`T.Kernel` cannot be nested inside another `T.Kernel`",
            );
            if !outer.is_dummy() {
                diag = diag.with_note_at(outer, "the enclosing kernel starts here");
            }
            self.push(diag);
        }
        let grid_span = k.grid.first().map_or(span, |g| self.at(g.span));
        if k.grid.is_empty() || k.grid.len() > 3 {
            self.error(
                grid_span,
                format!(
                    "a kernel has 1 to 3 grid dimensions, found {}",
                    k.grid.len()
                ),
            );
        }
        if k.block_vars.len() != k.grid.len() {
            let at = k.block_vars.first().map_or(span, |v| v.span);
            self.error(
                at,
                format!(
                    "the kernel has {} grid {} but binds {} block {}",
                    k.grid.len(),
                    super::exprs::plural(k.grid.len(), "dimension", "dimensions"),
                    k.block_vars.len(),
                    super::exprs::plural(k.block_vars.len(), "variable", "variables"),
                ),
            );
        }
        for (axis, g) in k.grid.iter().enumerate() {
            if self.expect_int(g, "a grid extent").is_some() {
                match (const_int(g), MAX_GRID_DIMS.get(axis)) {
                    // K3: an empty grid (a zero extent: a `-D` value or a tunable that makes a
                    // kernel unnecessary, e.g. the zeroing kernel of split-K at one slice)
                    // runs no block, as a symbolic extent that is zero at launch does.
                    (Some(v), _) if v < 0 => {
                        self.error(g.span, format!("a grid extent is at least 0, found {v}"))
                    }
                    // K3: CUDA's grid limits (a `-D` value makes a symbolic extent constant,
                    // so a binding past them is refused here too; an extent still symbolic
                    // is checked at launch, by the runtime and the interpreter).
                    (Some(v), Some(&max)) if v > max => {
                        let name = ["x", "y", "z"][axis];
                        self.push(
                            Diagnostic::error(
                                self.at(g.span),
                                format!(
                                    "a grid of {v} blocks along {name} is more than a launch can have"
                                ),
                            )
                            .with_note(format!(
                                "CUDA launches at most {max} blocks along {name} \
                                 (2^31 - 1 along x, 65535 along y and z)"
                            )),
                        );
                    }
                    _ => {}
                }
            }
        }
        let threads = self.threads(k, span);

        if let Some(s) = &k.swizzle {
            let at = if s.panel_size.span.is_dummy() {
                s.span
            } else {
                s.panel_size.span
            };
            match const_int(&s.panel_size) {
                Some(p) if p >= 0 => {}
                Some(p) => self.error(at, format!("`panel_size` must be ≥ 0, found {p}")),
                None => self.error(
                    at,
                    format!(
                        "`panel_size` must be an integer constant, found `{}`",
                        s.panel_size
                    ),
                ),
            }
        }

        if let Some(b) = &k.min_blocks_per_sm {
            self.min_blocks_per_sm(b, threads.as_deref(), span);
        }
        let cluster = self.cluster(k, threads.as_deref(), span);

        // The kernel's scope: its allocations (visible in the whole kernel, wherever they
        // were written), then its block variables.
        self.env.push();
        for alloc in &k.allocs {
            self.stmt_span = alloc.span;
            self.buffer_decl(alloc);
            if alloc.scope == Scope::Global {
                self.error(
                    alloc.name.span,
                    format!(
                        "`{}` is allocated in global memory; only parameters are global",
                        alloc.name.name
                    ),
                );
            }
            self.define_buffer(alloc, DefKind::Alloc);
        }
        self.stmt_span = span;
        for ann in &k.layouts {
            self.layout_annotation(ann);
        }
        if let Some(arena) = &k.arena {
            self.arena(k, arena, span);
        }
        for v in &k.block_vars {
            self.define_var(v, DefKind::BlockVar, Some(DType::Int32));
        }
        self.thread_regions(k);
        self.parallel_locals(k);
        self.reducers(k);
        self.grid_syncs(k);
        let outer = self.kernel.replace(span);
        let sums = k
            .reducers
            .iter()
            .filter(|r| r.op == crate::ir::ReducerOp::Sum)
            .cloned()
            .collect();
        let outer_sums = std::mem::replace(&mut self.sum_reducers, sums);
        // Thread-binding and vectorized loops of an enclosing kernel do not reach into this
        // (invalid, nested) one.
        let outer_threads = (self.thread_loop.take(), self.vectorized.take());
        let outer_block = std::mem::replace(&mut self.block, threads.clone());
        let outer_axes = std::mem::take(&mut self.thread_axes);
        let outer_cluster = std::mem::replace(
            &mut self.cluster_size,
            cluster.map_or(1, |c| c.iter().product()),
        );
        let outer_divergence = self.divergence.take();
        self.body(&k.body);
        (self.thread_loop, self.vectorized) = outer_threads;
        self.block = outer_block;
        self.thread_axes = outer_axes;
        self.cluster_size = outer_cluster;
        self.divergence = outer_divergence;
        self.kernel = outer;
        self.sum_reducers = outer_sums;
        self.env.pop();

        if let Some(threads) = threads {
            self.info.kernels.push(KernelInfo {
                grid: k.grid.clone(),
                block_vars: k.block_vars.iter().map(|v| v.name.clone()).collect(),
                num_threads: threads.iter().product(),
                threads,
                cluster: cluster.unwrap_or([1, 1, 1]),
                allocs: k.allocs.iter().map(|a| a.name.name.clone()).collect(),
                arena_bytes: k.arena.as_ref().map(|a| a.bytes),
                span,
            });
        }
    }

    /// K10: `T.min_blocks_per_sm(B)` is an integer constant ≥ 1 whose blocks' threads fit on
    /// one SM together.
    fn min_blocks_per_sm(&mut self, b: &Expr, threads: Option<&[i64]>, span: Span) {
        let at = if b.span.is_dummy() { span } else { b.span };
        match const_int(b) {
            Some(v) if v >= 1 => {
                let per_block: i64 = threads.map_or(1, |t| t.iter().product());
                if v.checked_mul(per_block)
                    .is_none_or(|n| n > MAX_THREADS_PER_SM)
                {
                    self.error(
                        at,
                        format!(
                            "{v} blocks of {per_block} threads do not fit on one SM \
                             ({MAX_THREADS_PER_SM} threads at most)"
                        ),
                    );
                }
            }
            Some(v) => self.error(at, format!("`T.min_blocks_per_sm` must be ≥ 1, found {v}")),
            None => self.error(
                at,
                format!("`T.min_blocks_per_sm` must be an integer constant, found `{b}`"),
            ),
        }
    }

    /// K14: `cluster_dims` are integer constants ≥ 1, as many as the grid has dimensions
    /// at most, their product within the target's cluster limit (1 on a target without
    /// clusters); a constant grid extent is a multiple of the cluster's along its axis
    /// (a symbolic one is checked at launch); the block is whole warps. The cluster's
    /// extents, x first, when valid.
    fn cluster(&mut self, k: &Kernel, threads: Option<&[i64]>, span: Span) -> Option<[i64; 3]> {
        if k.cluster.is_empty() {
            return Some([1, 1, 1]);
        }
        let at = |e: &Expr| if e.span.is_dummy() { span } else { e.span };
        let mut dims = [1i64; 3];
        let mut ok = true;
        if k.cluster.len() > 3 {
            self.error(
                at(&k.cluster[0]),
                "a thread-block cluster has 1 to 3 dimensions",
            );
            return None;
        }
        for (axis, e) in k.cluster.iter().enumerate() {
            match const_int(e) {
                Some(v) if v >= 1 => dims[axis] = v,
                Some(v) => {
                    self.error(at(e), format!("`cluster_dims` must be ≥ 1, found {v}"));
                    ok = false;
                }
                None => {
                    self.error(
                        at(e),
                        format!("`cluster_dims` must be integer constants, found `{e}`"),
                    );
                    ok = false;
                }
            }
        }
        if !ok {
            return None;
        }
        let size: i64 = dims.iter().product();
        let max = self
            .requirements
            .target
            .map_or(crate::target::MAX_CLUSTER_SIZE, |t| {
                t.desc().max_cluster_size
            });
        let first = at(&k.cluster[0]);
        if size > max {
            let mut d = Diagnostic::error(
                first,
                format!("a cluster of {size} blocks is more than the target allows ({max})"),
            );
            d = d.with_note(if max <= 1 {
                "thread-block clusters need sm_90a".to_string()
            } else {
                format!("CUDA's portable cluster limit is {max} blocks")
            });
            self.push(d);
            return None;
        }
        for (axis, &c) in dims.iter().enumerate() {
            if c == 1 {
                continue;
            }
            let name = ["x", "y", "z"][axis];
            match k.grid.get(axis) {
                None => {
                    self.error(
                        first,
                        format!(
                            "the cluster spans {c} blocks along {name}, but the grid has no {name} \
                             dimension"
                        ),
                    );
                    ok = false;
                }
                Some(g) => {
                    if let Some(v) = const_int(g).filter(|v| *v > 0 && v % c != 0) {
                        self.push(
                            Diagnostic::error(
                                self.at(g.span),
                                format!(
                                    "a grid of {v} blocks along {name} is not a whole number of \
                                     clusters of {c}"
                                ),
                            )
                            .with_note_at(first, "the cluster's shape is given here"),
                        );
                        ok = false;
                    }
                }
            }
        }
        if let Some(t) = threads {
            let n: i64 = t.iter().product();
            if n % crate::target::WARP_SIZE != 0 {
                self.error(
                    first,
                    format!("a block of a cluster is whole warps; this one has {n} threads"),
                );
                ok = false;
            }
        }
        ok.then_some(dims)
    }

    /// The block shape as constants, when it is valid.
    fn threads(&mut self, k: &Kernel, span: Span) -> Option<Vec<i64>> {
        if k.threads.is_empty() || k.threads.len() > 3 {
            self.error(
                span,
                format!(
                    "a thread block has 1 to 3 dimensions, found {}",
                    k.threads.len()
                ),
            );
            return None;
        }
        let mut dims = Vec::new();
        for t in &k.threads {
            match const_int(t) {
                Some(v) if v >= 1 => dims.push(v),
                Some(v) => self.error(t.span, format!("thread count must be ≥ 1, found {v}")),
                None => self.error(
                    t.span,
                    format!("thread counts must be integer constants, found `{t}`"),
                ),
            }
        }
        if dims.len() != k.threads.len() {
            return None;
        }
        let total = dims
            .iter()
            .try_fold(1i64, |acc, &d| acc.checked_mul(d))
            .unwrap_or(i64::MAX);
        if total > MAX_THREADS_PER_BLOCK {
            let at = k.threads.first().map_or(span, |t| t.span);
            let shown = if total == i64::MAX {
                "more than 2^63".to_string()
            } else {
                total.to_string()
            };
            self.error(
                at,
                format!(
                    "a thread block has at most {MAX_THREADS_PER_BLOCK} threads, found {shown}"
                ),
            );
            return None;
        }
        // Within the total, only `z` (at most 64) can exceed its own limit.
        for ((t, &v), (max, axis)) in k
            .threads
            .iter()
            .zip(&dims)
            .zip(MAX_BLOCK_DIMS.into_iter().zip(["x", "y", "z"]))
        {
            if v > max {
                self.error(
                    t.span,
                    format!("a thread block has at most {max} threads along {axis}, found {v}"),
                );
                return None;
            }
        }
        Some(dims)
    }

    pub(super) fn for_loop(&mut self, f: &'f For) {
        let start = self.expect_int(&f.start, "a loop bound");
        let stop = self.expect_int(&f.stop, "a loop bound");
        if start.is_some() && stop.is_some() {
            let extent = const_int(&f.stop)
                .zip(const_int(&f.start))
                .and_then(|(b, a)| b.checked_sub(a));
            if let Some(e) = extent.filter(|&e| e <= 0) {
                self.error(
                    f.stop.span,
                    format!(
                        "loop `{}` has extent {e}; extents must be positive",
                        f.var.name
                    ),
                );
            }
        }
        match &f.kind {
            ForKind::Parallel if const_int(&f.start) != Some(0) => self.error(
                f.start.span,
                format!(
                    "parallel loop `{}` starts at `{}`; parallel loops start at 0",
                    f.var.name, f.start
                ),
            ),
            ForKind::Pipelined {
                num_stages,
                order,
                stage,
            } => {
                match const_int(num_stages) {
                    Some(n) if n >= 1 => {}
                    Some(n) => self.error(
                        f.var.span,
                        format!("`num_stages` must be ≥ 1, found {n}"),
                    ),
                    None => self.error(
                        num_stages.span,
                        format!("`num_stages` is `{num_stages}`, not a constant: bind its tunables first"),
                    ),
                }
                if order.len() != stage.len() {
                    self.error(
                        f.var.span,
                        format!(
                            "pipelined loop `{}`: `order` has {} {} but `stage` has {}",
                            f.var.name,
                            order.len(),
                            super::exprs::plural(order.len(), "entry", "entries"),
                            stage.len()
                        ),
                    );
                }
            }
            ForKind::ThreadBinding(
                tag @ (ThreadTag::BlockX | ThreadTag::BlockY | ThreadTag::BlockZ),
            ) if self.kernel.is_some() => {
                let mut diag = Diagnostic::error(
                    self.at(f.var.span),
                    format!(
                        "loop `{}` is bound to `{}` inside a `T.Kernel`, whose grid already \
                         binds the block indices",
                        f.var.name,
                        tag.name()
                    ),
                );
                if let Some(k) = self.kernel.filter(|k| !k.is_dummy()) {
                    diag = diag.with_note_at(k, "the enclosing kernel starts here");
                }
                self.push(diag);
            }
            ForKind::Vectorized => self.vectorized_loop(f),
            _ => {}
        }
        let (outer_thread, outer_vec) = (self.thread_loop, self.vectorized);
        let outer_overlapped = self.overlapped;
        let overlapped = match f.kind {
            ForKind::Parallel => Some("`T.Parallel`"),
            ForKind::Pipelined { .. } => Some("`T.Pipelined`"),
            ForKind::Vectorized => Some("`T.vectorized`"),
            _ => None,
        };
        if let Some(kind) = overlapped {
            self.overlapped = Some((self.at(f.var.span), kind));
        }
        let outer_parallel = self.parallel;
        if f.kind == ForKind::Parallel && self.parallel.is_none() {
            self.parallel = Some(self.at(f.var.span));
        }
        let (outer_axes, outer_divergence) = (self.thread_axes.len(), self.divergence);
        let constant = |e: &Expr| const_int(e);
        match f.kind {
            ForKind::ThreadBinding(
                tag @ (ThreadTag::ThreadX | ThreadTag::ThreadY | ThreadTag::ThreadZ),
            ) if self.kernel.is_some() => {
                self.thread_loop = Some(self.at(f.var.span));
                let axis = match tag {
                    ThreadTag::ThreadX => 0,
                    ThreadTag::ThreadY => 1,
                    _ => 2,
                };
                // K13: a thread index is bound once on any path (each thread has one value).
                if let Some((outer, _)) = self.thread_axes.iter().find(|(_, a)| *a == axis) {
                    let msg = format!(
                        "loop `{}` binds `{}`, which the enclosing loop `{outer}` already binds",
                        f.var.name,
                        tag.name()
                    );
                    self.error(self.at(f.var.span), msg);
                }
                self.thread_axes.push((f.var.name.clone(), axis));
                let whole = self
                    .block
                    .as_ref()
                    .map(|b| b.get(axis).copied().unwrap_or(1));
                if constant(&f.start) != Some(0) || whole.is_none() || constant(&f.stop) != whole {
                    self.divergence = Some(self.at(f.var.span));
                }
            }
            ForKind::Vectorized => self.vectorized = Some(self.at(f.var.span)),
            _ => {}
        }
        let bounded = constant(&f.start).is_some() && constant(&f.stop).is_some();
        if !matches!(f.kind, ForKind::ThreadBinding(_)) && self.thread_loop.is_some() && !bounded {
            self.divergence = Some(self.at(f.var.span));
        }
        self.env.push();
        self.define_var(&f.var, DefKind::LoopVar, Some(DType::Int32));
        self.body(&f.body);
        self.env.pop();
        (self.thread_loop, self.vectorized) = (outer_thread, outer_vec);
        self.overlapped = outer_overlapped;
        self.parallel = outer_parallel;
        self.thread_axes.truncate(outer_axes);
        self.divergence = outer_divergence;
    }

    /// L6, L7: a vectorized loop starts at 0, has 1, 2, 4, 8 or 16 iterations, and runs
    /// inside a thread-binding loop (it is one thread's vector access).
    fn vectorized_loop(&mut self, f: &For) {
        if const_int(&f.start) != Some(0) {
            self.error(
                f.start.span,
                format!(
                    "vectorized loop `{}` starts at `{}`; vectorized loops start at 0",
                    f.var.name, f.start
                ),
            );
        } else {
            match const_int(&f.stop) {
                // Any constant count: the back end makes vector accesses of what it can
                // (1, 2, 4, 8 or 16 elements at a time) and unrolls the rest; as a loop it
                // means its iterations in order.
                Some(_) => {} // L1 reports a count that is not positive.
                None => self.error(
                    f.stop.span,
                    format!(
                        "vectorized loop `{}` has extent `{}`; it must be a constant",
                        f.var.name, f.stop
                    ),
                ),
            }
        }
        if self.thread_loop.is_none() {
            self.push(
                Diagnostic::error(
                    self.at(f.var.span),
                    format!(
                        "vectorized loop `{}` is not inside a thread-binding loop",
                        f.var.name
                    ),
                )
                .with_note(
                    "a vectorized loop is one thread's vector access; put it inside \
                     `for tx in T.thread_binding(n, thread=\"threadIdx.x\")`",
                ),
            );
        }
    }

    /// Y1: `T.sync_threads()` runs inside a kernel's thread-binding loop, and not inside a
    /// vectorized loop (which is one instruction).
    pub(super) fn barrier(&mut self, span: Span) {
        if self.kernel.is_none() || self.thread_loop.is_none() {
            self.push(
                Diagnostic::error(
                    self.at(span),
                    "`T.sync_threads()` outside a thread-binding loop",
                )
                .with_note(
                    "a barrier synchronizes the threads of a block; it belongs inside \
                     `for tx in T.thread_binding(n, thread=\"threadIdx.x\")` in a `T.Kernel`",
                ),
            );
        } else if let Some(v) = self.vectorized {
            self.push(
                Diagnostic::error(self.at(span), "`T.sync_threads()` inside a vectorized loop")
                    .with_note_at(v, "the vectorized loop is here"),
            );
        }
    }

    /// A1–A4: the shared arena places every shared allocation, aligned, inside its bytes,
    /// and fits the hardware.
    fn arena(&mut self, k: &Kernel, arena: &Arena, span: Span) {
        // The target's limit, or the largest of any target's when none is given.
        let target = self.requirements.target.unwrap_or_else(|| {
            Target::ALL
                .into_iter()
                .max_by_key(|t| t.max_shared_bytes())
                .unwrap_or(Target::Sm90a)
        });
        let max = target.max_shared_bytes();
        if arena.bytes < 0 || arena.bytes > max {
            self.push(
                Diagnostic::error(
                    span,
                    format!(
                        "the shared arena has {} bytes; a block can have 0 to {max} bytes of \
                         dynamic shared memory",
                        arena.bytes,
                    ),
                )
                .with_note(format!(
                    "{max} bytes ({} KiB) is {target}'s opt-in maximum per block",
                    max / 1024
                )),
            );
        }
        // By name, once: looking each offset's name up in the offsets before it and in the
        // allocations was quadratic in a kernel's buffers, and this runs after every pass.
        let mut decls: HashMap<&str, &BufferDecl> = HashMap::new();
        for a in &k.allocs {
            decls.entry(a.name.name.as_str()).or_insert(a);
        }
        let mut firsts: HashMap<&str, &Ident> = HashMap::new();
        for (name, offset) in &arena.offsets {
            let at = self.at(name.span);
            if let Some(first) = firsts.get(name.name.as_str()) {
                let mut d = Diagnostic::error(
                    at,
                    format!("`{}` has two offsets in the shared arena", name.name),
                );
                if !first.span.is_dummy() {
                    d = d.with_note_at(first.span, "the first one is here");
                }
                self.push(d);
                continue;
            }
            firsts.insert(&name.name, name);
            let Some(&decl) = decls.get(name.name.as_str()) else {
                self.error(
                    at,
                    format!(
                        "`{}` in the shared arena is not an allocation of this kernel",
                        name.name
                    ),
                );
                continue;
            };
            if decl.scope != Scope::Shared {
                self.error(
                    at,
                    format!(
                        "`{}` is a {} buffer; only shared buffers live in the shared arena",
                        name.name,
                        decl.scope.name()
                    ),
                );
                continue;
            }
            if *offset < 0 || offset % Arena::ALIGN != 0 {
                self.error(
                    at,
                    format!(
                        "`{}` is at byte offset {offset}; arena offsets are non-negative \
                         multiples of {}",
                        name.name,
                        Arena::ALIGN
                    ),
                );
                continue;
            }
            let size = decl
                .shape
                .iter()
                .try_fold(i64::from(decl.dtype.bytes()), |acc, d| {
                    const_int(d).and_then(|d| acc.checked_mul(d))
                });
            match size {
                None => self.error(
                    at,
                    format!(
                        "`{}` has a shape that is not constant; the shared arena needs the \
                         size of every buffer",
                        name.name
                    ),
                ),
                Some(size) if offset.saturating_add(size) > arena.bytes => self.error(
                    at,
                    format!(
                        "`{}` ({size} bytes at offset {offset}) ends at byte {}, past the end \
                         of the {}-byte shared arena",
                        name.name,
                        offset.saturating_add(size),
                        arena.bytes
                    ),
                ),
                Some(_) => {}
            }
        }
        for decl in k.allocs.iter().filter(|a| a.scope == Scope::Shared) {
            if !firsts.contains_key(decl.name.name.as_str()) {
                self.error(
                    decl.name.span,
                    format!(
                        "shared buffer `{}` has no offset in the kernel's shared arena",
                        decl.name.name
                    ),
                );
            }
        }
    }
}
