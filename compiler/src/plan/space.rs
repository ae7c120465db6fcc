//! A kernel's tuning space (docs/ir.md, "Tuning space") ranked without running anything:
//! seed 004's (DeepGEMM's) rules generalized from its one FP8 GEMM to any kernel
//! (`tlc plan FILE -D …`; `tlc tune --top N` times the first N).
//!
//! Every config of [`TuningSpace::configs`](tlc_ir::tuning::TuningSpace::configs) is bound
//! (`tuning::bind`, then the `-D` dims), verified, and run through the target's default
//! pipeline up to the planned IR, which says what the kernel occupies: its grid (blocks),
//! its threads per block, and its shared-memory arena (`plan-shared-memory`). A config that
//! the binding, the verifier or a pass refuses (a shared arena over the target's limit, a
//! layout that does not tile) is **dropped** with the first error as its reason, and so is
//! one whose fragments alone need more registers per thread than a thread may have (255,
//! or the consumers' `T.setmaxnreg` count): a certain spill. Code generation and ptxas are
//! not run: what only they refuse (the rest of the registers, spills) is for `tlc tune`,
//! which compiles.
//!
//! The rules, in order (each breaks the ties of the one before):
//!
//! 0. **The least estimated time** (`super::cost`): waves of the grid (as rule 1 counts
//!    them) times each block's pipelined steps, a step costing the larger of its tensor
//!    work times the blocks sharing the SM and its operands' latency over the stages in
//!    flight. Seed 004 has no such rule — its one kernel has one tile cost; a space that
//!    varies `block_K`, resident blocks and stages needs it (docs/perf.md, "Heuristic
//!    quality"). A kernel whose step it cannot measure (a trip count not constant) has no
//!    estimate and ranks after those that do, by the rules below.
//! 1. **Fewer threads per block**: more work per warp. At an equal estimate (one wave, an
//!    SM to itself) a block of one consumer warpgroup measured 1–10 % faster than two
//!    sharing the tile (docs/perf.md).
//! 2. **Fewest waves.** A block slot is an SM times the blocks resident on it, the fewest
//!    of: shared memory (`Target::blocks_per_sm_by_shared`: the arena plus the block's
//!    reserved KiB, against the SM's shared memory), threads (`MAX_THREADS_PER_SM` over the
//!    block's threads), `MAX_BLOCKS_PER_SM`, and registers: a warp-specialized kernel
//!    (`T.setmaxnreg`) is compiled for exactly its `T.min_blocks_per_sm` blocks per SM (its
//!    registers at entry are the SM's share for that many); otherwise `REGISTERS_PER_SM`
//!    over an estimate: the written kernel's fragments, which live in registers, one 32-bit
//!    register per 4 bytes — a lower bound, since the rest of a thread's registers is known
//!    only to ptxas (the seed, whose kernel runs one block per SM, has no such rule). The
//!    block's threads and shared bytes are the planned kernel's (warp specialization may
//!    add a producer warpgroup); its grid is the written one's (a persistent kernel loops
//!    over the written grid's tiles, in the same waves).
//!    `waves = ⌈blocks / (sms × resident)⌉` (`super::waves`, the arithmetic of the seed's
//!    rule 1 with its `num_sms` slots).
//! 3. **The fullest last wave**, as a fraction of the slots (the seed compares block counts
//!    over one slot count; slots differ between configs here, so the fractions are compared,
//!    exactly).
//! 4. **Larger tiles along N: fewer blocks along the grid's x.** The seed breaks remaining
//!    ties toward the larger `block_n`; in tlc's kernels (as in TileLang's) the grid's x
//!    runs over N (`T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M))`), so for a
//!    grid of the same waves and fill, fewer blocks along x is a larger tile along N. The
//!    seed's other tie-breaks (the same `block_m` and a smaller `block_n`: the same tile
//!    count with less padding) need to know which tunable tiles which dimension, which a
//!    general kernel does not say: they are not generalized.
//! 5. **Fewer pipeline stages**: the smallest largest-`num_stages` of the kernel's
//!    `T.Pipelined` loops once bound. The seed's rule 2 takes the most stages that fit: its
//!    kernel, alone on its SM, is latency-bound, and there rule 0 already prefers the
//!    stages that hide the latency. Stages rule 0 cannot tell apart hide nothing more and
//!    only add shared-memory traffic (at 8192³, 3 stages ran 12 % faster than 5).
//! 6. **Less shared memory** (the arena's bytes), for the same reason.
//! 7. **The space's order** ([`TuningSpace::configs`](tlc_ir::tuning::TuningSpace::configs)).
//!
//! A function with several `T.Kernel`s is launched kernel after kernel: its waves are their
//! sum, its last wave the least full of theirs, its blocks and blocks along x their sums, and
//! its threads and shared bytes the largest of theirs (resident: the fewest).

use super::cost;
use super::waves::Waves;
use crate::diagnostics::SourceFile;
use crate::frontend::UserError;
use std::cmp::Ordering;
use std::num::NonZeroU128;
use tlc_ir::specialize::{parse_defines, specialize};
use tlc_ir::target::{
    MAX_BLOCKS_PER_SM, MAX_REGISTERS_PER_THREAD, MAX_THREADS_PER_SM, REGISTERS_PER_SM,
};
use tlc_ir::tuning::{self, Config};
use tlc_ir::{Diagnostic, ForKind, Intrinsic, PrimFunc, Scope, StmtKind, Target};
use tlc_passes::{default_pipeline, Instrumentation, PassContext, PassManager, PipelineError};

/// The GPU to plan for.
#[derive(Clone, Copy, Debug)]
pub struct Gpu {
    pub target: Target,
    /// Its SMs (at least 1).
    pub sms: NonZeroU128,
}

/// What one config's compiled kernel occupies on the GPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Footprint {
    /// Blocks of the grid (summed over the function's kernels).
    pub blocks: u128,
    /// Blocks along the grid's x (summed over the kernels).
    pub grid_x: u128,
    /// Threads of one block (the largest kernel's).
    pub threads: i64,
    /// Bytes of one block's shared-memory arena (the largest kernel's).
    pub shared_bytes: i64,
    /// Blocks resident on one SM at once (the fewest of the kernels').
    pub resident: i64,
    /// Waves (summed over the kernels).
    pub waves: u128,
    /// The least full last wave of the kernels.
    pub last_wave: Waves,
    /// The largest `num_stages` of its `T.Pipelined` loops (`None`: no pipelined loop).
    pub stages: Option<i64>,
    /// The estimated time in nanoseconds (`super::cost`; summed over the kernels), `None`
    /// when a kernel's step is not constant.
    pub estimate_ns: Option<u64>,
}

/// A config the rules rank; `index` is its place in the space's order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ranked {
    pub index: usize,
    pub config: Config,
    pub footprint: Footprint,
}

/// A config that cannot be compiled, with the first reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dropped {
    pub index: usize,
    pub config: Config,
    pub reason: String,
}

/// The space ranked: best first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ranking {
    pub ranked: Vec<Ranked>,
    pub dropped: Vec<Dropped>,
    /// Whether the kernel declares a tuning space (without one, the single config is the
    /// kernel as written).
    pub has_space: bool,
}

/// Ranks the tuning space of `func` (parsed from `file`, not yet verified) with the
/// `-D NAME=VALUE` `defines`: every symbolic dim must be bound; a define that names a
/// tunable fixes it in every config.
pub fn rank(
    file: &SourceFile,
    func: &PrimFunc,
    defines: &[String],
    gpu: Gpu,
) -> Result<Ranking, UserError> {
    let (unique, dims) = space(file, func, defines)?;
    let manager = PassManager::new(default_pipeline(gpu.target), Instrumentation::default())
        .map_err(UserError::plain)?;
    let mut ranking = Ranking {
        ranked: Vec::new(),
        dropped: Vec::new(),
        has_space: !func.space.is_empty(),
    };
    let indexed: Vec<(usize, Config)> = unique.into_iter().enumerate().collect();
    for (index, config, result) in footprints(file, func, indexed, &dims, &manager, gpu) {
        match result {
            Ok(footprint) => ranking.ranked.push(Ranked {
                index,
                config,
                footprint,
            }),
            Err(reason) => ranking.dropped.push(Dropped {
                index,
                config,
                reason,
            }),
        }
    }
    ranking.ranked.sort_by(compare);
    Ok(ranking)
}

/// The first config of [`rank`]'s ranking, found without compiling every config.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Best {
    /// `rank(…).ranked.first()`: `None` when every config is dropped.
    pub first: Option<Ranked>,
    /// The configs of the space (after `-D` fixed tunables).
    pub configs: usize,
    /// The configs compiled to find it.
    pub compiled: usize,
}

/// [`rank`]'s first config, compiling only the configs that could rank first: each
/// config's estimate has a floor known without compiling (`estimate_floor`: the written
/// kernel's steps and grid, at the most favourable number of resident blocks), so configs
/// are compiled in the order of their floors, [`BEST_BATCH`] at a time, until the
/// best compiled estimate is below every floor left. Rule 0 ranks by the estimate first,
/// so no config left can rank first; configs without an estimate rank after every config
/// with one and are compiled only when no config with one survives. What `compile`,
/// `run` and `bench` do when they take the plan's choice (`tlc_tools::tunables::choose_tunables`):
/// with every dim bound, a space of a hundred configs at a small shape compiled every
/// config (12.9 s for `examples/gemm_splitk.tir`), though a handful can be first.
pub fn best(
    file: &SourceFile,
    func: &PrimFunc,
    defines: &[String],
    gpu: Gpu,
) -> Result<Best, UserError> {
    let (unique, dims) = space(file, func, defines)?;
    let manager = PassManager::new(default_pipeline(gpu.target), Instrumentation::default())
        .map_err(UserError::plain)?;
    let configs = unique.len();
    let mut queue: Vec<(Floor, usize, Config)> = unique
        .into_iter()
        .enumerate()
        .map(|(index, config)| (estimate_floor(func, &config, &dims, gpu), index, config))
        .collect();
    queue.sort_by_key(|(floor, index, _)| (*floor, *index));
    let mut queue = std::collections::VecDeque::from(queue);
    let mut first: Option<Ranked> = None;
    let mut compiled = 0;
    loop {
        // A config can rank first only if its floor is at most the best estimate so far
        // (an equal estimate ties, broken by the later rules).
        let open = |floor: &Floor| match first.as_ref().map(|f| f.footprint.estimate_ns) {
            Some(Some(best)) => match floor {
                Floor::Unknown => true,
                Floor::Estimate(ns) => *ns <= best,
                Floor::NoEstimate => false,
            },
            _ => true,
        };
        let mut batch: Vec<(usize, Config)> = Vec::new();
        while batch.len() < BEST_BATCH {
            match queue.pop_front() {
                Some((floor, index, config)) if open(&floor) => batch.push((index, config)),
                Some(_) => queue.clear(),
                None => break,
            }
        }
        if batch.is_empty() {
            break;
        }
        compiled += batch.len();
        for (index, config, result) in footprints(file, func, batch, &dims, &manager, gpu) {
            if let Ok(footprint) = result {
                let ranked = Ranked {
                    index,
                    config,
                    footprint,
                };
                if first.as_ref().is_none_or(|f| compare(&ranked, f).is_lt()) {
                    first = Some(ranked);
                }
            }
        }
    }
    Ok(Best {
        first,
        configs,
        compiled,
    })
}

/// How many configs [`best`] compiles at once (on every core): a constant, so that how
/// many it compiles (`-v` says) is the same on every machine.
const BEST_BATCH: usize = 4;

/// The configs of `func`'s space with the `-D` tunables of `defines` fixed (duplicates
/// dropped, the space's order kept) and the dims `defines` binds, which must be all of them.
fn space(
    file: &SourceFile,
    func: &PrimFunc,
    defines: &[String],
) -> Result<(Vec<Config>, Config), UserError> {
    let bindings = parse_defines(defines).map_err(UserError::plain)?;
    let (fixed, dims): (Vec<_>, Vec<_>) = bindings
        .into_iter()
        .partition(|(name, _)| func.space.declares(name));
    // Unknown names and missing dims are the user's error, located at the kernel.
    let specialized = specialize(func, &dims).map_err(|d| UserError(file.render(&d)))?;
    if !specialized.dims.is_empty() {
        let missing: Vec<String> = specialized
            .dims
            .iter()
            .map(|d| format!("-D {}=…", d.name))
            .collect();
        let diag = Diagnostic::error(
            func.name.span,
            format!(
                "`tlc plan` needs every symbolic dimension of `{}` bound: its grid depends on them",
                func.name.name
            ),
        )
        .with_note(format!("missing: {}", missing.join(" ")));
        return Err(UserError(file.render(&diag)));
    }
    let mut configs = func
        .space
        .configs(&dims)
        .map_err(|d| UserError(file.render(&d)))?;
    for config in &mut configs {
        for (name, value) in &fixed {
            if let Some(slot) = config.iter_mut().find(|(n, _)| n == name) {
                slot.1 = *value;
            }
        }
    }
    // Fixing a tunable makes configs that differed only in it equal: keep the first.
    let mut seen: std::collections::HashSet<Config> = std::collections::HashSet::new();
    let unique: Vec<Config> = configs
        .into_iter()
        .filter(|c| seen.insert(c.clone()))
        .collect();
    Ok((unique, dims))
}

/// Each config (with its index in the space) compiled and measured, on every core.
fn footprints(
    file: &SourceFile,
    func: &PrimFunc,
    configs: Vec<(usize, Config)>,
    dims: &Config,
    manager: &PassManager,
    gpu: Gpu,
) -> Vec<(usize, Config, Result<Footprint, String>)> {
    let mut results: Vec<(usize, Config, Result<Footprint, String>)> = configs
        .into_iter()
        .map(|(index, config)| (index, config, Err(String::new())))
        .collect();
    crate::parallel::for_each(&mut results, |(_, config, result)| {
        *result = footprint(file, func, config, dims, manager, gpu);
    });
    results
}

/// What a config's estimate is at least, known without compiling it; ordered as
/// [`best`] compiles (`Unknown` first: it is cheap to find out, usually a refusal).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Floor {
    /// The written kernel cannot be measured here (the binding fails, a grid or block
    /// extent is not constant): compiling says why it is dropped, or what it is.
    Unknown,
    /// At least this many nanoseconds.
    Estimate(u64),
    /// No estimate (a trip count not constant): it ranks after every config with one.
    NoEstimate,
}

/// The floor of `config`'s estimate: [`footprint`]'s sum over the kernels of
/// `Step::estimate_ns`, each at the number of resident blocks that makes it least (a
/// planned kernel's residency, 1 to `MAX_BLOCKS_PER_SM`, is known only once compiled;
/// the step, the grid and the SM count are the written kernel's, as there).
fn estimate_floor(func: &PrimFunc, config: &Config, dims: &Config, gpu: Gpu) -> Floor {
    let Ok(bound) = tuning::bind(func, config, dims).and_then(|b| specialize(&b, dims)) else {
        return Floor::Unknown;
    };
    let sms = gpu.sms.get();
    let mut total: Option<u64> = Some(0);
    for w in kernels_of(&bound.body) {
        let blocks = w.grid.iter().try_fold(1u128, |acc, e| {
            acc.checked_mul(u128::try_from(e.as_int()?).ok()?)
        });
        let Some(blocks) = blocks else {
            return Floor::Unknown;
        };
        if blocks == 0 {
            // Not launched, as `footprint` counts it.
            continue;
        }
        let least = cost::Step::of(w, &bound.params).map(|step| {
            (1..=MAX_BLOCKS_PER_SM)
                .map(|resident| {
                    let resident = u128::try_from(resident).unwrap_or(1);
                    let ns = step.estimate_ns(blocks, resident, sms);
                    // As `footprint` rounds each kernel's estimate.
                    ns.round().min(u64::MAX as f64) as u64
                })
                .min()
                .unwrap_or(0)
        });
        total = total.zip(least).map(|(a, b)| a.saturating_add(b));
    }
    match total {
        Some(ns) => Floor::Estimate(ns),
        None => Floor::NoEstimate,
    }
}

/// The module's rules 0 to 7: `Less` when `a` ranks before `b`.
pub fn compare(a: &Ranked, b: &Ranked) -> Ordering {
    let (x, y) = (&a.footprint, &b.footprint);
    // An estimate ranks before none (`None < Some` reversed).
    let estimate = |f: &Footprint| f.estimate_ns.map_or((1, 0), |ns| (0, ns));
    estimate(x)
        .cmp(&estimate(y))
        .then_with(|| x.threads.cmp(&y.threads))
        .then_with(|| x.waves.cmp(&y.waves))
        .then_with(|| y.last_wave.cmp_last_wave_fill(&x.last_wave))
        .then_with(|| x.grid_x.cmp(&y.grid_x))
        .then_with(|| x.stages.cmp(&y.stages))
        .then_with(|| x.shared_bytes.cmp(&y.shared_bytes))
        .then_with(|| a.index.cmp(&b.index))
}

/// Binds `config`, compiles to planned IR and measures it; `Err` is the reason to drop it.
fn footprint(
    file: &SourceFile,
    func: &PrimFunc,
    config: &Config,
    dims: &Config,
    manager: &PassManager,
    gpu: Gpu,
) -> Result<Footprint, String> {
    let first = |diags: &[Diagnostic]| match diags.first() {
        Some(d) => located(file, d),
        None => "refused without a message".to_string(),
    };
    let bound = crate::frontend::bind_config(func, config, dims).map_err(|d| located(file, &d))?;
    let mut stages = None;
    tlc_ir::visit::for_each_stmt(&bound.body, &mut |s| {
        if let StmtKind::For(f) = &s.kind {
            if let ForKind::Pipelined { .. } = f.kind {
                stages = stages.max(f.kind.num_stages());
            }
        }
    });
    // As the driver's front end does (`frontend::finish`): verified once, the barriers
    // placed once (the facts still hold: a barrier declares nothing).
    let info = tlc_ir::verifier::verify(&bound).map_err(|d| format!("verifier: {}", first(&d)))?;
    let bound_grid = bound.body.clone();
    let params = bound.params.clone();
    let synced = tlc_passes::thread_sync::thread_sync(bound).map_err(|d| first(&d))?;
    let sms = i64::try_from(gpu.sms.get()).unwrap_or(i64::MAX);
    let mut cx = PassContext::new(gpu.target)
        .with_info(info)
        .with_sms(sms)
        .with_barriers_placed();
    let planned = manager
        .run(synced, &mut cx, &mut std::io::sink())
        .map_err(|e| match e {
            PipelineError::PassFailed { pass, diagnostics } => {
                format!("pass `{pass}`: {}", first(&diagnostics))
            }
            PipelineError::TargetRules { diagnostics, .. } => first(&diagnostics),
            e => e.to_string(),
        })?;
    // The grid is the bound kernel's, as written: the pipeline may make a kernel persistent
    // (a grid of SMs × resident blocks looping over the written grid's tiles), which does
    // not change the waves of tiles the written grid describes. Threads and shared memory
    // are the planned kernel's (warp specialization may add a producer warpgroup).
    let written = kernels_of(&bound_grid);
    let planned = kernels_of(&planned.body);
    if written.len() != planned.len() {
        return Err(format!(
            "the pipeline made {} kernels of {}",
            planned.len(),
            written.len()
        ));
    }
    let mut total: Option<Footprint> = None;
    for (w, k) in written.into_iter().zip(planned) {
        let constant = |what: &str, exprs: &[tlc_ir::Expr]| {
            exprs.iter().try_fold(1u128, |acc, e| {
                e.as_int()
                    .and_then(|v| u128::try_from(v).ok())
                    .map(|v| acc * v)
                    .ok_or_else(|| format!("the {what} `{e}` is not a constant once bound"))
            })
        };
        let blocks = constant("grid extent", &w.grid)?;
        if blocks == 0 {
            // An empty grid is not launched (split-K's zeroing kernel at one slice): it
            // costs nothing and has no threads, blocks or waves to rank by.
            continue;
        }
        let grid_x = constant("grid extent", &w.grid[..1.min(w.grid.len())])?;
        let threads = i64::try_from(constant("block extent", &k.threads)?).unwrap_or(i64::MAX);
        let shared_bytes = k.arena.as_ref().map_or(0, |a| a.bytes);
        // The written kernel's threads hold its fragments: more registers per thread than a
        // thread may have (the consumers' `T.setmaxnreg` count when warp-specialized) is a
        // certain spill, so the config is dropped rather than ranked.
        let written_threads = constant("block extent", &w.threads)?;
        let per_thread = i64::try_from(
            u128::try_from(fragment_registers(w)).unwrap_or(0) / written_threads.max(1),
        )
        .unwrap_or(i64::MAX);
        let thread_registers = consumer_registers(k).unwrap_or(MAX_REGISTERS_PER_THREAD);
        if per_thread > thread_registers {
            return Err(format!(
                "its fragments need {per_thread} registers per thread, more than the \
                 {thread_registers} a thread has"
            ));
        }
        let resident = gpu
            .target
            .blocks_per_sm_by_shared(shared_bytes)
            .min(MAX_THREADS_PER_SM / threads.max(1))
            .min(MAX_BLOCKS_PER_SM)
            .min(match register_budget(k) {
                Some(blocks) => blocks,
                None => REGISTERS_PER_SM / fragment_registers(w).max(1),
            });
        let slots = u128::try_from(resident)
            .ok()
            .and_then(|r| NonZeroU128::new(r * gpu.sms.get()))
            .ok_or_else(|| {
                format!("no block fits on an SM ({threads} threads, {shared_bytes} shared bytes)")
            })?;
        let waves = Waves::of(blocks, slots);
        let estimate_ns = cost::Step::of(w, &params).map(|step| {
            let ns = step.estimate_ns(blocks, slots.get() / gpu.sms.get(), gpu.sms.get());
            // Finite and non-negative: a sum of products of non-negative constants.
            ns.round().min(u64::MAX as f64) as u64
        });
        let this = Footprint {
            blocks,
            grid_x,
            threads,
            shared_bytes,
            resident,
            waves: waves.waves,
            last_wave: waves,
            stages,
            estimate_ns,
        };
        total = Some(match total {
            None => this,
            Some(t) => Footprint {
                blocks: t.blocks + this.blocks,
                grid_x: t.grid_x + this.grid_x,
                threads: t.threads.max(this.threads),
                shared_bytes: t.shared_bytes.max(this.shared_bytes),
                resident: t.resident.min(this.resident),
                waves: t.waves + this.waves,
                last_wave: if this.last_wave.cmp_last_wave_fill(&t.last_wave).is_lt() {
                    this.last_wave
                } else {
                    t.last_wave
                },
                stages,
                estimate_ns: t
                    .estimate_ns
                    .zip(this.estimate_ns)
                    .map(|(a, b)| a.saturating_add(b)),
            },
        });
    }
    total.ok_or_else(|| "the function launches no kernel".to_string())
}

/// The blocks per SM a warp-specialized planned kernel `k` is compiled for: with
/// `T.setmaxnreg` its threads start with the SM's registers shared by exactly
/// `T.min_blocks_per_sm` blocks, so no more fit. `None` for other kernels.
fn register_budget(k: &tlc_ir::Kernel) -> Option<i64> {
    let mut sets_registers = false;
    tlc_ir::visit::for_each_stmt(&k.body, &mut |s| {
        if let StmtKind::Intrinsic(Intrinsic::SetMaxNReg { .. }) = &s.kind {
            sets_registers = true;
        }
    });
    let blocks = k.min_blocks_per_sm.as_ref().and_then(|e| e.as_int())?;
    sets_registers.then_some(blocks.max(1))
}

/// The registers a warp-specialized planned kernel's consumers raise themselves to (the
/// largest `T.setmaxnreg(n, inc=True)`); `None` for other kernels.
fn consumer_registers(k: &tlc_ir::Kernel) -> Option<i64> {
    let mut most = None;
    tlc_ir::visit::for_each_stmt(&k.body, &mut |s| {
        if let StmtKind::Intrinsic(Intrinsic::SetMaxNReg { n, inc: true }) = &s.kind {
            most = Some(most.map_or(*n, |m: i64| m.max(*n)));
        }
    });
    most
}

/// A lower bound of the registers one block of the written kernel `k` uses: its fragments
/// live in registers, one 32-bit register per 4 bytes (narrower elements packed).
fn fragment_registers(k: &tlc_ir::Kernel) -> i64 {
    k.allocs
        .iter()
        .filter(|b| b.scope == Scope::Fragment)
        .filter_map(tlc_passes::analysis::footprint::byte_size)
        .fold(0i64, |acc, bytes| acc.saturating_add((bytes + 3) / 4))
}

/// The kernels of `body`, in launch order.
fn kernels_of(body: &[tlc_ir::Stmt]) -> Vec<&tlc_ir::Kernel> {
    let mut kernels = Vec::new();
    tlc_ir::visit::for_each_stmt(body, &mut |s| {
        if let StmtKind::Kernel(k) = &s.kind {
            kernels.push(k);
        }
    });
    kernels
}

/// `LINE:COL: message` of a diagnostic in `file` (one line, for a table).
fn located(file: &SourceFile, d: &Diagnostic) -> String {
    if d.span.is_dummy() {
        return d.message.clone();
    }
    let (line, col) = file.line_col(d.span.start);
    format!("{line}:{col}: {}", d.message)
}

/// `name=value …`, or `(as written)` for the one config of a kernel without a space.
pub fn describe(config: &Config) -> String {
    if config.is_empty() {
        "(as written)".to_string()
    } else {
        tuning::describe(config)
    }
}

impl Ranking {
    /// The table `tlc plan FILE` prints: ranked configs best first, then the dropped ones.
    pub fn table(&self, gpu: Gpu) -> String {
        let mut rows = vec![[
            "rank",
            "config",
            "est. µs",
            "blocks",
            "resident/SM",
            "waves",
            "last-wave util",
            "shared bytes",
            "threads",
        ]
        .map(String::from)
        .to_vec()];
        for (i, r) in self.ranked.iter().enumerate() {
            let f = &r.footprint;
            let w = &f.last_wave;
            // A fill of at most 100%, in hundredths; `slots` is positive.
            let percent = w.last_wave_util * 100 / w.slots;
            rows.push(vec![
                (i + 1).to_string(),
                describe(&r.config),
                f.estimate_ns
                    .map_or("-".to_string(), |ns| format!("{:.1}", ns as f64 / 1e3)),
                f.blocks.to_string(),
                f.resident.to_string(),
                f.waves.to_string(),
                format!("{}/{} ({percent}%)", w.last_wave_util, w.slots),
                f.shared_bytes.to_string(),
                f.threads.to_string(),
            ]);
        }
        let mut widths = vec![0; rows[0].len()];
        for row in &rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let mut out = format!(
            "{} on {} SMs: least estimated time, then fewer threads, fewest waves, the fullest \
             last wave, fewest blocks along x, fewest stages, least shared memory\n",
            gpu.target, gpu.sms
        );
        if !self.has_space {
            out.push_str("the kernel has no tuning space: one config, as written\n");
        }
        for row in &rows {
            let cells: Vec<String> = row
                .iter()
                .zip(&widths)
                .enumerate()
                .map(|(i, (cell, w))| {
                    if i == 1 {
                        format!("{cell:<w$}")
                    } else {
                        format!("{cell:>w$}")
                    }
                })
                .collect();
            out.push_str(cells.join("  ").trim_end());
            out.push('\n');
        }
        if !self.dropped.is_empty() {
            out.push_str(&format!("dropped ({}):\n", self.dropped.len()));
            for d in &self.dropped {
                out.push_str(&format!("  {}: {}\n", describe(&d.config), d.reason));
            }
        }
        out
    }

    /// The ranking as one JSON object: `ranked` (best first) and `dropped` lists.
    pub fn to_json(&self, gpu: Gpu) -> String {
        use serde_json::{json, Map, Value};
        let config = |c: &Config| {
            Value::Object(
                c.iter()
                    .map(|(n, v)| (n.clone(), json!(v)))
                    .collect::<Map<_, _>>(),
            )
        };
        // u128 counts: JSON numbers through u64 (a grid has at most 2^31·2^16·2^16 blocks).
        let n = |v: u128| json!(u64::try_from(v).unwrap_or(u64::MAX));
        let ranked: Vec<Value> = self
            .ranked
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let f = &r.footprint;
                json!({
                    "rank": i + 1,
                    "config": config(&r.config),
                    "blocks": n(f.blocks),
                    "blocks_x": n(f.grid_x),
                    "resident_per_sm": f.resident,
                    "waves": n(f.waves),
                    "last_wave_blocks": n(f.last_wave.last_wave_util),
                    "last_wave_slots": n(f.last_wave.slots),
                    "shared_bytes": f.shared_bytes,
                    "threads": f.threads,
                    "stages": f.stages,
                    "estimate_ns": f.estimate_ns,
                })
            })
            .collect();
        let dropped: Vec<Value> = self
            .dropped
            .iter()
            .map(|d| json!({"config": config(&d.config), "reason": d.reason}))
            .collect();
        let sms = n(gpu.sms.get());
        json!({
            "target": gpu.target.name(),
            "sms": sms,
            "ranked": ranked,
            "dropped": dropped,
        })
        .to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnostics::SourceFile;

    fn load(path: &str) -> (SourceFile, PrimFunc) {
        let full = format!("{}/../{path}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{full}: {e}"));
        let file = SourceFile::new(path, text);
        let func = crate::frontend::parse(&file).unwrap_or_else(|e| panic!("{}", e.0));
        (file, func)
    }

    /// `best` (what `compile` takes when no `-D` or cache entry decides) is the first
    /// config of the whole ranking (what `tlc plan` prints), found compiling fewer configs
    /// where the floors allow: at the small split-K shape of issue 33 (its 108 configs,
    /// 12.9 s when all were compiled; here 36 of them, `num_stages` fixed as a `-D` does,
    /// to keep the test short), and at a large GEMM.
    #[test]
    fn best_is_the_first_of_the_ranking() {
        let sm90 = Gpu {
            target: Target::Sm90a,
            sms: NonZeroU128::new(132).unwrap_or(NonZeroU128::MIN),
        };
        let sm80 = Gpu {
            target: Target::Sm80,
            ..sm90
        };
        let splitk: &[&str] = &["M=70", "N=130", "K=200", "num_stages=4"];
        let gemm: &[&str] = &["M=4096", "N=4096", "K=4096"];
        let cases = [
            ("examples/gemm_splitk.tir", splitk, sm90),
            ("bench/gemm_tunable.tir", gemm, sm80),
        ];
        for (path, dims, gpu) in cases {
            let (file, func) = load(path);
            let defines: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
            let all = rank(&file, &func, &defines, gpu).unwrap_or_else(|e| panic!("{}", e.0));
            let best = best(&file, &func, &defines, gpu).unwrap_or_else(|e| panic!("{}", e.0));
            assert_eq!(best.first.as_ref(), all.ranked.first(), "{path} {dims:?}");
            assert_eq!(best.configs, all.ranked.len() + all.dropped.len());
            assert!(
                best.compiled < best.configs / 2,
                "{path} {dims:?}: {} of {} compiled",
                best.compiled,
                best.configs
            );
        }
    }
}
