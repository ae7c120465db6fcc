//! Statement execution inside a block, and the launch of a kernel's grid.

use crate::diagnostic::Diagnostic;
use crate::interp::compile::{
    loop_cost, BufRef, CAlloc, CCall, CExpr, CIntrinsic, CKernel, CRef, CStmt, CStmtKind,
};
use crate::interp::eval::{fault, Fault, Frame, Res};
use crate::interp::lockstep::{ClusterThreads, ThreadState};
use crate::interp::memory::{BlockLog, Buffer, Memory, MAX_LOOP_ITERATIONS};
use crate::interp::ops;
use crate::interp::parallel::{ParallelLog, Sharing};
use crate::interp::scalar::Scalar;
use crate::interp::shared::SharedArena;
use crate::ir::Scope;
use crate::span::Span;
use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// The most blocks one grid may have (2^24): more would take days to interpret.
const MAX_BLOCKS: usize = 1 << 24;

/// Offsets of shared buffers packed by the interpreter (no `T.shared_arena`) are multiples of
/// this, as the arena's are.
const ARENA_ALIGN: usize = crate::ir::Arena::ALIGN as usize;

/// The largest shared memory per block the interpreter will model (1 GiB: far beyond any GPU,
/// small enough to allocate).
const MAX_SHARED_BYTES: usize = 1 << 30;

/// The most iterations one run of a `while` loop may take (2^24, per block at the tile
/// level, per thread at the thread level): past it the interpreter reports a loop that does
/// not end rather than running on.
pub(crate) const MAX_WHILE_ITERATIONS: u64 = 1 << 24;

/// The error for a `while` loop that ran [`MAX_WHILE_ITERATIONS`] times.
pub(crate) fn endless(span: Span) -> Res<()> {
    fault(
        span,
        format!(
            "this `while` loop ran {MAX_WHILE_ITERATIONS} iterations without its condition \
             becoming false (a loop that does not end?)"
        ),
    )
}

impl Frame<'_> {
    /// `T.atomic_add(buf[indices], value)`: see `Memory::atomic_add`.
    fn atomic_add(&mut self, buf: BufRef, indices: &[CExpr], value: &CExpr, span: Span) -> Res<()> {
        let flat = self.flat_index(buf, indices, span)?;
        let v = self.eval(value)?;
        if self.mem.atomic_add(buf, flat, v).is_none() {
            return fault(span, self.unwritten(buf, flat, indices));
        }
        Ok(())
    }

    /// `T.atomic_add_ret(old, dst, value)`: `dst`'s element gets `value` added as
    /// `T.atomic_add` adds (`Memory::atomic_add`: race-tracked as an atomic), and the
    /// thread's `old` the element's value before the add (same dtype, the verifier's rule).
    pub(crate) fn atomic_add_ret(
        &mut self,
        (old, dst, value): (&CRef, &CRef, &CRef),
        span: Span,
    ) -> Res<()> {
        const OP: &str = "`T.atomic_add_ret`";
        let v = self.shfl_read(value, span, OP)?;
        let flat = self.run_start(dst, 1, span, OP)?;
        let Some((before, _)) = self.mem.atomic_add(dst.buf, flat, v) else {
            return fault(span, self.unwritten(dst.buf, flat, &dst.indices));
        };
        self.shfl_write(old, before, span, OP)
    }

    /// Takes `n` iterations of a starting loop (and of the constant loops it holds: see
    /// `compile::loop_cost`) from the block's budget ([`MAX_LOOP_ITERATIONS`]); past it the
    /// run stops with an error at the loop.
    pub(crate) fn charge_loop(&mut self, n: u64, span: Span) -> Res<()> {
        match self.mem.loop_budget.checked_sub(n) {
            Some(left) => {
                self.mem.loop_budget = left;
                Ok(())
            }
            None => fault(
                span,
                format!(
                    "this loop nest would take the block past {MAX_LOOP_ITERATIONS} loop \
                     iterations (all loops together); the interpreter stops here rather than \
                     run for hours"
                ),
            ),
        }
    }

    /// A tile-level `T.Parallel` loop: its iterations run in order, each logged, and the run
    /// stops at the first conflict between two of them (`parallel.rs`).
    fn parallel_loop(
        &mut self,
        var: usize,
        name: &str,
        (start, stop): (i64, i64),
        body: &[CStmt],
        span: Span,
    ) -> Res<()> {
        let outermost = self.mem.parallel.is_none();
        if outermost {
            self.mem.parallel = Some(RefCell::new(ParallelLog::default()));
        }
        let result = self.parallel_iterations(var, name, (start, stop), body, span);
        if outermost {
            self.mem.parallel = None;
        }
        result
    }

    fn parallel_iterations(
        &mut self,
        var: usize,
        name: &str,
        (start, stop): (i64, i64),
        body: &[CStmt],
        span: Span,
    ) -> Res<()> {
        for i in start..stop {
            if let Some(log) = &self.mem.parallel {
                log.borrow_mut().enter(name, i);
            }
            self.vars[var] = Scalar::Int(i);
            self.exec(body)?;
            if let Some(log) = &self.mem.parallel {
                let mut log = log.borrow_mut();
                log.leave();
                if let Some(conflict) = log.take_conflict() {
                    return fault(span, conflict);
                }
            }
        }
        Ok(())
    }

    pub fn exec(&mut self, stmts: &[CStmt]) -> Res<()> {
        for stmt in stmts {
            self.exec_one(stmt)?;
        }
        Ok(())
    }

    /// One statement, at the tile level or (inside `lockstep.rs`) for one thread.
    pub(crate) fn exec_one(&mut self, stmt: &CStmt) -> Res<()> {
        match &stmt.kind {
            CStmtKind::Loop {
                thread_axis: Some(_),
                ..
            } if self.threads.is_some() => return self.enter_threads(stmt),
            CStmtKind::Loop {
                var,
                start,
                stop,
                body,
                parallel,
                cost,
                prepaid,
                ..
            } => {
                let (start, stop) = (self.eval_int(start)?, self.eval_int(stop)?);
                if !prepaid {
                    self.charge_loop(loop_cost(stop.saturating_sub(start), *cost), stmt.span)?;
                }
                match parallel {
                    Some(name) if self.threads.is_none() && self.mem.thread.is_none() => {
                        self.parallel_loop(*var, name, (start, stop), body, stmt.span)?
                    }
                    _ => {
                        for i in start..stop {
                            self.vars[*var] = Scalar::Int(i);
                            self.exec(body)?;
                        }
                    }
                }
            }
            CStmtKind::While { cond, body } => {
                let mut n = 0u64;
                while self.eval(cond)?.as_bool() {
                    if n == MAX_WHILE_ITERATIONS {
                        return endless(stmt.span);
                    }
                    n += 1;
                    self.exec(body)?;
                }
            }
            CStmtKind::If {
                cond,
                then_body,
                else_body,
            } => {
                if self.eval(cond)?.as_bool() {
                    self.exec(then_body)?;
                } else {
                    self.exec(else_body)?;
                }
            }
            CStmtKind::Let { var, value } => self.vars[*var] = self.eval(value)?,
            CStmtKind::Store {
                buf,
                indices,
                value,
            } => {
                let flat = self.flat_index(*buf, indices, stmt.span)?;
                let v = self.eval(value)?;
                self.mem.write(*buf, flat, v);
            }
            CStmtKind::AtomicAdd {
                buf,
                indices,
                value,
            } => self.atomic_add(*buf, indices, value, stmt.span)?,
            CStmtKind::Copy { src, dst } => ops::copy::copy(self, src, dst, stmt.span)?,
            CStmtKind::Gemm(g) => ops::gemm::gemm(self, g, stmt.span)?,
            CStmtKind::Fill { dst, value } => ops::fill::fill(self, dst, value)?,
            CStmtKind::Reduce(r) => ops::reduce::reduce(self, r, stmt.span)?,
            CStmtKind::Intrinsic(i) => self.block_intrinsic(i, stmt.span)?,
            CStmtKind::Fresh(bufs) => self.mem.discard(bufs),
            // The compiler rejects nested kernels, and barriers outside thread loops (which
            // `lockstep.rs` runs).
            CStmtKind::Kernel(_) => return fault(stmt.span, "`T.Kernel` inside a kernel"),
            CStmtKind::Barrier => {
                return fault(
                    stmt.span,
                    "`T.sync_threads()` outside a thread-binding loop",
                )
            }
            CStmtKind::AllReduce(_) => {
                return fault(
                    stmt.span,
                    "`T.thread_allreduce` outside a thread-binding loop",
                )
            }
            // The launch runs the kernel body in phases between its grid barriers
            // (`grid_sync.rs`); the verifier keeps them out of everything else (rule Y2).
            CStmtKind::GridSync => {
                return fault(stmt.span, "`T.sync_grid()` not directly in the kernel body")
            }
        }
        // Block-level accesses are not race-tracked, but one to shared memory a cp.async has
        // not landed yet is reported the same way.
        if self.mem.thread.is_none() {
            if let Some(message) = self.mem.take_race() {
                return fault(stmt.span, message);
            }
        }
        Ok(())
    }

    /// An intrinsic outside any thread loop: the block-level ones (commit / wait) are
    /// no-ops at the tile level and act for every thread in the block-level code of a
    /// thread-level kernel (what a wait lands there is visible to all threads). The compiler
    /// keeps the others in thread loops.
    fn block_intrinsic(&mut self, i: &CIntrinsic, span: Span) -> Res<()> {
        if !i.def.block_level {
            return fault(
                span,
                "a thread-level intrinsic outside a thread-binding loop",
            );
        }
        // Block-level code runs for every thread of the block: each prints.
        if let CCall::Print(p) = &i.call {
            return self.print_all_threads(p, span);
        }
        let Some(st) = self.threads.as_mut() else {
            return Ok(());
        };
        match &i.call {
            CCall::Commit => {
                st.asyncs.iter_mut().for_each(|g| g.commit());
                Ok(())
            }
            CCall::Wait(n) => {
                let landing: Vec<_> = st.asyncs.iter_mut().flat_map(|g| g.retire(*n)).collect();
                for c in &landing {
                    self.cp_async_land(c);
                }
                Ok(())
            }
            // The interpreter's async proxy sees every write at once.
            CCall::FenceProxyAsync => Ok(()),
            _ => fault(
                span,
                format!(
                    "internal error: `{}` has no block-level meaning",
                    i.def.name
                ),
            ),
        }
    }
}

/// Runs every block of `kernel`'s grid on `threads` host threads and applies their global
/// writes in block order. `vars` holds the values of the variables bound outside the kernel.
pub(crate) fn launch(
    kernel: &CKernel,
    span: crate::span::Span,
    vars: &[Scalar],
    globals: &mut [Buffer],
    threads: usize,
) -> Result<(), Diagnostic> {
    let host = Frame {
        vars: vars.to_vec(),
        mem: Memory::new(globals, Vec::new()),
        threads: None,
    };
    let mut grid = Vec::new();
    let mut n_blocks = 1usize;
    for (axis, e) in kernel.grid.iter().enumerate() {
        let g = host.eval_int(e).map_err(|f| to_diagnostic(*f, None))?;
        grid.push(grid_extent(g, axis, e.span)?);
        n_blocks = n_blocks.saturating_mul(grid[axis]);
    }
    // Each block is interpreted in turn: past this many the run would take days.
    if n_blocks > MAX_BLOCKS {
        let at = kernel.grid.first().map_or(span, |e| e.span);
        return Err(Diagnostic::error(
            at,
            format!(
                "a grid of {n_blocks} blocks is more than the interpreter runs (at most \
                 {MAX_BLOCKS})"
            ),
        ));
    }
    drop(host);
    // At the thread level the blocks of a cluster run together, as one unit; at the tile
    // level nothing reaches across blocks, and each runs alone.
    let cluster = if kernel.thread_level {
        kernel.cluster
    } else {
        [1, 1, 1]
    };
    let ranks: usize = cluster.iter().product();
    // A launch's rule (the runtime checks it too), whatever the level.
    for (axis, (&g, &c)) in grid.iter().zip(&kernel.cluster).enumerate() {
        if c > 1 && g % c != 0 {
            let at = kernel.grid.get(axis).map_or(span, |e| e.span);
            let name = ["x", "y", "z"].get(axis).copied().unwrap_or("?");
            return Err(Diagnostic::error(
                at,
                format!(
                    "a grid of {g} blocks along {name} is not a whole number of clusters of {c}"
                ),
            ));
        }
    }
    let units: Vec<usize> = grid
        .iter()
        .zip(cluster.iter().chain(std::iter::repeat(&1)))
        .map(|(&g, &c)| g / c.max(1))
        .collect();
    let shape = GridShape {
        cluster,
        ranks,
        n_units: n_blocks / ranks.max(1),
        units,
    };
    let phases = super::grid_sync::phases(&kernel.body);
    // Each block between two phases: its frame, over no globals while the grid's writes
    // are applied (`grid_sync.rs`).
    let waiting: Vec<Mutex<Option<Frame<'static>>>> = if phases.len() > 1 {
        (0..shape.n_units).map(|_| Mutex::new(None)).collect()
    } else {
        Vec::new()
    };
    for (phase, body) in phases.iter().enumerate() {
        let step = Phase {
            body,
            index: phase,
            last: phase + 1 == phases.len(),
            waiting: &waiting,
        };
        run_grid_phase(kernel, span, vars, globals, threads, &shape, &step)?;
    }
    Ok(())
}

/// How a grid's blocks are run: as units of one cluster's blocks (`ranks` of them, shaped
/// `cluster`), `units` of them along each axis, `n_units` in all.
struct GridShape {
    cluster: [usize; 3],
    ranks: usize,
    units: Vec<usize>,
    n_units: usize,
}

/// One phase of a kernel's body between grid barriers (the whole body when it has none),
/// and where each unit's frame waits between phases.
struct Phase<'b> {
    body: &'b [CStmt],
    index: usize,
    last: bool,
    waiting: &'b [Mutex<Option<Frame<'static>>>],
}

/// Runs `phase` for every unit of the grid on `threads` host threads and applies their
/// global writes in block order.
fn run_grid_phase(
    kernel: &CKernel,
    span: Span,
    vars: &[Scalar],
    globals: &mut [Buffer],
    threads: usize,
    shape: &GridShape,
    phase: &Phase,
) -> Result<(), Diagnostic> {
    let GridShape {
        cluster,
        ranks,
        units,
        n_units,
    } = shape;
    let (cluster, ranks, n_units) = (*cluster, *ranks, *n_units);
    // The blocks read the globals as the phase found them; their writes apply after.
    let results = {
        let globals: &[Buffer] = globals;
        let run_block = |index: usize| -> Result<(BlockLog, Vec<String>), Diagnostic> {
            let unit = block_coords(index, units);
            // Block `r` of the cluster: rank r = rx + cx * (ry + cy * rz).
            let blocks: Vec<Vec<i64>> = (0..ranks)
                .map(|r| {
                    let local = block_coords(r, &cluster[..unit.len().min(3)]);
                    unit.iter()
                        .zip(&cluster)
                        .zip(local.iter().chain(std::iter::repeat(&0)))
                        .map(|((&u, &c), &l)| u * c as i64 + l)
                        .collect()
                })
                .collect();
            let coords = blocks.first().cloned().unwrap_or_default();
            // What the block prints is kept with its result and published in block order.
            super::print::begin_block(&blocks, kernel.threads);
            let ran = run_block(kernel, vars, globals, &blocks, phase, index);
            let printed = super::print::end_block();
            ran.map(|log| (log, printed))
                .map_err(|f| to_diagnostic(*f, Some(&coords)))
                .map_err(|d| {
                    if d.span.is_dummy() {
                        Diagnostic { span, ..d }
                    } else {
                        d
                    }
                })
        };
        let results: Vec<Result<(BlockLog, Vec<String>), Diagnostic>> =
            if threads <= 1 || n_units <= 1 {
                let mut out = Vec::new();
                for index in 0..n_units {
                    let r = run_block(index);
                    let failed = r.is_err();
                    out.push(r);
                    if failed {
                        break;
                    }
                }
                out
            } else {
                run_parallel(n_units, threads, &run_block)
            };
        results
    };
    // The first failing block in linear order is the one reported, whatever the threads did.
    let mut logs = Vec::with_capacity(results.len());
    let mut printed = Vec::new();
    for r in results {
        match r {
            Ok((log, lines)) => {
                logs.push(log);
                printed.extend(lines);
            }
            Err(e) => {
                // What the blocks before the failing one printed still shows.
                super::print::publish(printed);
                return Err(e);
            }
        }
    }
    super::print::publish(printed);
    // Plain writes first, in block order (the last wins); then every atomic add, in block
    // order, onto what the writes left (docs/ir.md, `T.atomic_add`).
    let mut adds = Vec::new();
    for (overlays, atomics) in logs {
        for (g, (overlay, log)) in overlays.into_iter().zip(atomics).enumerate() {
            let Some(buf) = globals.get_mut(g) else {
                continue;
            };
            for (flat, v) in overlay {
                if !log.iter().any(|&(f, _)| f == flat) {
                    buf.data.set(flat, v);
                }
            }
            adds.push((g, log));
        }
    }
    for (g, log) in adds {
        let Some(buf) = globals.get_mut(g) else {
            continue;
        };
        for (flat, delta) in log {
            if let Some(old) = buf.data.get(flat) {
                let new =
                    crate::interp::scalar::arith(crate::ir::BinOp::Add, buf.dtype, old, delta)
                        .unwrap_or(old);
                buf.data.set(flat, new);
            }
        }
    }
    Ok(())
}

/// Runs blocks `0..n` on `threads` workers. Every block before the first failing one runs,
/// so the error reported is the same as in a serial run; blocks after it may be skipped.
fn run_parallel<T: Send>(
    n: usize,
    threads: usize,
    run_block: &(dyn Fn(usize) -> Result<T, Diagnostic> + Sync),
) -> Vec<Result<T, Diagnostic>> {
    let next = AtomicUsize::new(0);
    let first_failure = AtomicUsize::new(usize::MAX);
    let slots: Mutex<Vec<Option<Result<T, Diagnostic>>>> =
        Mutex::new((0..n).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..threads.min(n) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n || i > first_failure.load(Ordering::Relaxed) {
                    break;
                }
                let r = run_block(i);
                if r.is_err() {
                    first_failure.fetch_min(i, Ordering::Relaxed);
                }
                if let Ok(mut slots) = slots.lock() {
                    if let Some(slot) = slots.get_mut(i) {
                        *slot = Some(r);
                    }
                }
            });
        }
    });
    let slots = slots
        .into_inner()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    // Keep results up to and including the first failure; later ones may be missing.
    let mut out = Vec::with_capacity(n);
    for slot in slots {
        match slot {
            Some(r) => {
                let failed = r.is_err();
                out.push(r);
                if failed {
                    break;
                }
            }
            None => break,
        }
    }
    out
}

/// A grid extent as a launch takes it: not negative and within CUDA's limit along its axis
/// (`target::MAX_GRID_DIMS`), the same a GPU launch of the kernel is held to — the
/// verifier checks constant extents, this the ones the dims decide.
fn grid_extent(g: i64, axis: usize, at: Span) -> Result<usize, Diagnostic> {
    let name = ["x", "y", "z"].get(axis).copied().unwrap_or("?");
    let max = crate::target::MAX_GRID_DIMS
        .get(axis)
        .copied()
        .unwrap_or(i64::MAX);
    if g < 0 {
        return Err(Diagnostic::error(
            at,
            format!("grid extent {g} along {name} is negative"),
        ));
    }
    if g > max {
        return Err(Diagnostic::error(
            at,
            format!("a grid of {g} blocks along {name} is more than a launch can have"),
        )
        .with_note(format!(
            "CUDA launches at most {max} blocks along {name} (2^31 - 1 along x, 65535 along y \
             and z)"
        )));
    }
    // `g` is in 0..=2^31 - 1 here.
    Ok(usize::try_from(g).unwrap_or(usize::MAX))
}

/// Block `index` in linear order (x fastest) as grid coordinates.
fn block_coords(index: usize, grid: &[usize]) -> Vec<i64> {
    let mut rest = index;
    grid.iter()
        .map(|&g| {
            let c = rest.checked_rem(g).unwrap_or(0);
            rest = rest.checked_div(g).unwrap_or(0);
            c as i64
        })
        .collect()
}

/// Runs one phase of one block — or, at the thread level, of the blocks of one cluster
/// together (their coordinates in rank order): one frame whose arena holds each block's
/// shared memory. The first phase starts the frame; a later one takes it from where the
/// phase before left it waiting (unit `index` of `phase.waiting`).
fn run_block(
    kernel: &CKernel,
    vars: &[Scalar],
    globals: &[Buffer],
    blocks: &[Vec<i64>],
    phase: &Phase,
    index: usize,
) -> Res<BlockLog> {
    let slot = phase.waiting.get(index);
    let mut frame = if phase.index == 0 {
        block_frame(kernel, vars, globals, blocks)?
    } else {
        let waited = slot.and_then(|m| m.lock().ok().and_then(|mut f| f.take()));
        let Some(frame) = waited else {
            return fault(
                Span::DUMMY,
                "internal error: a block lost its state at a grid barrier",
            );
        };
        frame.rebind(globals)
    };
    if blocks.len() > 1 {
        cluster_body(&mut frame, phase.body)?;
    } else {
        frame.exec(phase.body)?;
    }
    let log = (
        std::mem::take(&mut frame.mem.overlays),
        std::mem::take(&mut frame.mem.atomics),
    );
    if !phase.last {
        if let Some(Ok(mut waiting)) = slot.map(Mutex::lock) {
            *waiting = Some(frame.rebind(&[]));
        }
    }
    Ok(log)
}

/// A fresh frame for one block (or the blocks of one cluster): its allocations, shared
/// arena and threads, before the first statement of its body.
fn block_frame<'g>(
    kernel: &CKernel,
    vars: &[Scalar],
    globals: &'g [Buffer],
    blocks: &[Vec<i64>],
) -> Res<Frame<'g>> {
    let mut frame = Frame {
        vars: vars.to_vec(),
        mem: Memory::new(globals, Vec::new()),
        threads: None,
    };
    let coords = blocks.first().map_or(&[][..], |c| c.as_slice());
    for (&slot, &c) in kernel.block_vars.iter().zip(coords) {
        frame.vars[slot] = Scalar::Int(c);
    }
    let ranks = blocks.len().max(1);
    if ranks > 1 {
        // The blocks share this frame: block-level code other than lets (evaluated per block,
        // `cluster_body`) would run once for all of them.
        if let Some(s) = kernel.body.iter().find(|s| {
            !matches!(
                s.kind,
                CStmtKind::Loop {
                    thread_axis: Some(_),
                    ..
                } | CStmtKind::Let { .. }
            )
        }) {
            return fault(
                s.span,
                "the interpreter runs a cluster's blocks together only when the kernel's body \
                 is thread-binding loops and lets",
            );
        }
    }
    // Shared buffers live in one byte arena when the kernel plans one, and at the thread
    // level (packed in declaration order then, so that races are tracked per byte).
    let byte_arena = kernel.arena.is_some() || kernel.thread_level;
    let mut packed = 0usize;
    // Fresh allocations for this block (their shapes may depend on dims).
    for (i, alloc) in kernel.allocs.iter().enumerate() {
        let shape = alloc_shape(&frame, alloc)?;
        let len: usize = shape.iter().product();
        if alloc.scope == Scope::Shared {
            shared_fits(alloc, len)?;
        }
        if alloc.scope != Scope::Shared || !byte_arena {
            frame
                .mem
                .locals
                .push(Buffer::fresh(&alloc.name, alloc.dtype, shape));
            continue;
        }
        let size = len.saturating_mul(alloc.dtype.bytes() as usize);
        let offset = match &kernel.arena {
            Some(arena) => {
                let offset = arena.offsets.get(i).copied().flatten().unwrap_or(0);
                if offset.saturating_add(size) > arena.bytes {
                    return fault(
                        Span::DUMMY,
                        format!(
                            "shared buffer `{}` ({size} bytes at offset {offset}) does not fit in \
                             the {}-byte shared arena",
                            alloc.name, arena.bytes
                        ),
                    );
                }
                offset
            }
            None => {
                let offset = packed;
                packed = packed.saturating_add(size).saturating_add(ARENA_ALIGN - 1) / ARENA_ALIGN
                    * ARENA_ALIGN;
                offset
            }
        };
        frame
            .mem
            .locals
            .push(Buffer::in_arena(&alloc.name, alloc.dtype, shape, offset));
    }
    // In a cluster each block's bytes start on a 1024-byte boundary (every swizzle pattern
    // repeats within 1024 bytes).
    let bytes = kernel.arena.as_ref().map_or(packed, |a| a.bytes);
    let stride = bytes.div_ceil(1024) * 1024;
    if byte_arena {
        if bytes > MAX_SHARED_BYTES {
            return fault(
                Span::DUMMY,
                format!("the block's shared memory ({bytes} bytes) is too large to interpret"),
            );
        }
        let total = if ranks > 1 { stride * ranks } else { bytes };
        let mut arena = SharedArena::new(total);
        if ranks > 1 {
            arena.set_block_threads(kernel.threads.iter().product());
        }
        frame.mem.shared = Some(arena);
    }
    frame.mem.sharing = kernel
        .allocs
        .iter()
        .map(|a| match a.scope {
            _ if a.reducer => Sharing::Combined,
            Scope::Local => Sharing::PerThread,
            _ => Sharing::Shared,
        })
        .collect();
    if kernel.thread_level {
        let private: Vec<usize> = kernel
            .allocs
            .iter()
            .enumerate()
            .filter(|(_, a)| a.per_thread)
            .map(|(i, _)| i)
            .collect();
        let cluster = (ranks > 1).then(|| ClusterThreads {
            ranks,
            block_bytes: bytes,
            stride,
            shared: frame
                .mem
                .locals
                .iter()
                .enumerate()
                .filter_map(|(i, b)| b.arena_offset.map(|o| (i, o)))
                .collect(),
            block_vars: blocks
                .iter()
                .map(|c| {
                    kernel
                        .block_vars
                        .iter()
                        .copied()
                        .zip(c.iter().map(|&v| Scalar::Int(v)))
                        .collect()
                })
                .collect(),
            current: 0,
        });
        frame.threads = Some(Box::new(ThreadState::new(
            kernel.threads,
            kernel.thread_dims,
            private,
            &frame.mem.locals,
            cluster,
        )?));
    }
    Ok(frame)
}

/// A cluster's body (thread loops and lets): each block-level let is evaluated once per
/// block of the cluster, with that block's variables, and its value joins the variables
/// the block's threads start with; the thread loops run every block's threads.
fn cluster_body(frame: &mut Frame, body: &[CStmt]) -> Res<()> {
    for stmt in body {
        let CStmtKind::Let { var, value } = &stmt.kind else {
            frame.exec_one(stmt)?;
            continue;
        };
        let mut st = frame.threads.take();
        let result = per_block_let(frame, st.as_deref_mut(), (*var, value), stmt.span);
        frame.threads = st;
        result?;
    }
    Ok(())
}

/// Evaluates the block-level let `var = value` for each block of the cluster `st` holds.
fn per_block_let(
    frame: &mut Frame,
    st: Option<&mut ThreadState>,
    (var, value): (usize, &CExpr),
    span: Span,
) -> Res<()> {
    let Some(c) = st.and_then(ThreadState::cluster_mut) else {
        return fault(span, "internal error: a cluster without its blocks");
    };
    for rank_vars in &mut c.block_vars {
        let saved = frame.vars.clone();
        for &(slot, v) in rank_vars.iter() {
            if let Some(x) = frame.vars.get_mut(slot) {
                *x = v;
            }
        }
        let v = frame.eval(value);
        frame.vars = saved;
        rank_vars.push((var, v?));
    }
    Ok(())
}

/// A shared buffer of `len` elements fits a block's shared memory on some target (the
/// verifier checks constant shapes; this the shapes the dims decide): a kernel no GPU
/// could launch does not run here either.
fn shared_fits(alloc: &CAlloc, len: usize) -> Res<()> {
    // The device's bytes (int4 packed two to a byte), not the interpreter's storage.
    let bytes = alloc.dtype.packed_bytes(len as u64);
    let max = crate::target::Target::ALL
        .iter()
        .map(|t| t.max_shared_bytes())
        .max()
        .unwrap_or(0);
    if i64::try_from(bytes).is_ok_and(|b| b <= max) {
        return Ok(());
    }
    let at = alloc.shape.first().map_or(Span::DUMMY, |e| e.span);
    fault(
        at,
        format!(
            "shared buffer `{}` needs {bytes} bytes, more than the {max} bytes of shared memory \
             a block may have on any target",
            alloc.name
        ),
    )
}

/// The shape of an allocation in this block, within the interpreter's size limit.
fn alloc_shape(frame: &Frame, alloc: &CAlloc) -> Res<Vec<usize>> {
    let mut shape = Vec::with_capacity(alloc.shape.len());
    let mut len = 1usize;
    for e in &alloc.shape {
        let d = frame.eval_int(e)?;
        let Ok(d) = usize::try_from(d) else {
            return fault(
                e.span,
                format!("cannot allocate `{}`: extent {d} is negative", alloc.name),
            );
        };
        shape.push(d);
        len = len.saturating_mul(d);
    }
    let max = crate::interp::tensor::MAX_ELEMENTS;
    if len > max {
        let at = alloc.shape.first().map_or(Span::DUMMY, |e| e.span);
        return fault(
            at,
            format!(
                "cannot allocate `{}`: its shape {} has more than the {max} elements the \
                 interpreter holds in one buffer",
                alloc.name,
                crate::interp::tensor::fmt_shape(&shape)
            ),
        );
    }
    Ok(shape)
}

/// Turns a fault into a diagnostic, naming the block it happened in.
pub(crate) fn to_diagnostic(f: Fault, block: Option<&[i64]>) -> Diagnostic {
    let block = match block {
        Some([one]) => Some(one.to_string()),
        Some(coords) => {
            let parts: Vec<String> = coords.iter().map(|c| c.to_string()).collect();
            Some(format!("({})", parts.join(", ")))
        }
        None => None,
    };
    let message = match (f.thread, block) {
        (Some(t), Some(b)) => format!("{} (thread {t}, block {b})", f.message),
        (Some(t), None) => format!("{} (thread {t})", f.message),
        (None, Some(b)) => format!("{} (block {b})", f.message),
        (None, None) => f.message,
    };
    f.notes
        .into_iter()
        .fold(Diagnostic::error(f.span, message), |d, (span, note)| {
            d.with_note_at(span, note)
        })
}
