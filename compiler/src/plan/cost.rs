//! The estimated time of one config's kernel: the first rule of `tlc plan`'s ranking
//! (`space`), ahead of seed 004's wave rules, which break its ties.
//!
//! Seed 004's rules compare waves and last-wave fill only; they assume one block per SM and
//! one tile shape whose cost per k-step is fixed. A tuning space varies exactly what they
//! hold fixed: the k-step (`block_K` 16 or 32 halves or doubles the steps of one tile), the
//! blocks resident per SM (two blocks per SM share its tensor cores but hide each other's
//! waits), the pipeline depth. Ranked by waves alone, the seed 002 space's first choice was
//! within 5 % of the best at 6 of 20 shapes (docs/perf.md, "Heuristic quality"). The model:
//!
//! - A kernel runs its grid in waves of `slots = SMs × resident` blocks; every block of a
//!   wave runs `steps` iterations of its pipelined loop (one step: the loop's body) and one
//!   prologue/epilogue (`PER_WAVE_NS`).
//! - One step of a block costs `max(c × work, latency)`, where `c` is the blocks sharing
//!   the SM in that wave (`resident`, or fewer in a partial last wave), `work =
//!   WORK_NS + WORK_NS_PER_MFLOP × MFLOP` is what the SM's tensor cores and issue spend on
//!   one block's step (its `T.gemm` flops, counted at float16's tensor rate: an fp8 gemm's
//!   flops weigh [`tensor_speedup`] less), and `latency = LATENCY_NS + (FILL_NS +
//!   FILL_NS_PER_KB × KB) / (stages − 1)` is the wait for a step's operands (its `T.copy`s
//!   into shared memory, KB), hidden over the stages in flight.
//!
//! - Added to that, the time the whole GPU takes to fill shared memory with every block's
//!   every step (`FILL_KB_PER_NS`): smaller tiles read the same operands more often.
//! - With one stage (no pipelining) a block's wait for its operands and its work add up
//!   (`max(c × work, latency + work)`): only the other blocks on the SM fill the gap.
//! - Each launched kernel costs `LAUNCH_NS`, and the bytes a block adds into global memory
//!   with atomic adds (split-K's partial tiles) go at the GPU's rate `ATOMIC_KB_PER_NS`:
//!   a function of a zeroing kernel and K slices pays for both.
//! - Each wave pays a block's epilogue (`EPILOGUE_NS_PER_KB` per KB of the tile it stores
//!   with `T.copy`) divided by the blocks resident per SM, which hide it for each other.
//!
//! The constants were fitted (least squares on log time) to `tlc tune`'s timings of seed
//! 002's 36 configs at four shapes of different regimes on an H100 (sm_90a; 4096³,
//! 1024×1024×14336, 128×4096×4096, 6144×6144×2048) and checked on all 26 shapes timed
//! (docs/perf.md, "Heuristic quality"); `LAUNCH_NS` and `ATOMIC_KB_PER_NS` were chosen by
//! a grid search over the full tune tables of `examples/gemm.tir` (160 configs, split-K
//! included) at 12 shapes on an H200, `EPILOGUE_NS_PER_KB` on half of 30 shapes' tables
//! and checked on the other half (docs/perf.md, "The plan on examples/gemm.tir"). They
//! describe tlc's own code on that GPU: another GPU or target gets the same constants, an
//! estimate to rank by, not a prediction of milliseconds. The model knows nothing of
//! registers beyond the resident count and nothing of bank conflicts or L2 reuse.

use tlc_ir::verifier::const_int;
use tlc_ir::{BufferDecl, DType, ForKind, Kernel, Region, Scope, Stmt, StmtKind};
use tlc_passes::analysis::int::{self, Ranges};

/// What a step of the block costs besides its flops (issue, barriers, bookkeeping).
const WORK_NS: f64 = 93.8;
/// The SM's cost of one MFLOP of a block's float16 `T.gemm`s (about 9.3 TFLOP/s per SM).
const WORK_NS_PER_MFLOP: f64 = 107.7;
/// H100 SXM's dense tensor-core peaks (NVIDIA's H100 datasheet, without sparsity): 989
/// TFLOP/s for float16 / bfloat16 operands (the dtype the constants were fitted on), 1979
/// for float8 (e4m3, e5m2).
const F16_DENSE_TFLOPS: f64 = 989.0;
const FP8_DENSE_TFLOPS: f64 = 1979.0;
/// A step's wait that stages cannot hide.
const LATENCY_NS: f64 = 163.5;
/// The wait for a step's operands, spread over `stages - 1` steps in flight.
const FILL_NS: f64 = 51.3;
const FILL_NS_PER_KB: f64 = 11.2;
/// Each wave's prologue (filling the pipeline) and epilogue (the output tile's stores).
const PER_WAVE_NS: f64 = 1558.0;
/// The whole GPU's rate of filling shared memory (KB per ns, all SMs together): every
/// block's every step loads its operands, so smaller tiles load the same data more often.
const FILL_KB_PER_NS: f64 = 82.6;
/// One kernel launch that runs blocks (a kernel of an empty grid is not launched): a
/// function of two kernels (split-K's zeroing kernel, then the slices) pays two, and the
/// second waits for the first to drain.
const LAUNCH_NS: f64 = 2000.0;
/// The whole GPU's rate of atomic adds into global memory (KB per ns): split-K's slices
/// each add a whole output tile, so more slices add the same tiles more often.
const ATOMIC_KB_PER_NS: f64 = 0.5;
/// A block's epilogue per KB of output tile it stores, exposed once per wave divided by
/// the blocks resident on an SM (another block computes while one stores): a 128 × 256
/// tile alone on its SM pays it in full, short K loops cannot hide it.
const EPILOGUE_NS_PER_KB: f64 = 50.0;

/// One block's work per step: the iteration of its pipelined loop, or (without one) the
/// whole block body as a single step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Step {
    /// Iterations of the outermost `T.Pipelined` loop, once bound, in the block that runs
    /// the most (1 without one).
    pub steps: u128,
    /// The `num_stages` of that loop (1 without one).
    pub stages: i64,
    /// Flops of the step's `T.gemm`s (`2·M·N·K` each).
    pub flops: f64,
    /// The same flops at float16's tensor rate (each gemm's divided by the
    /// [`tensor_speedup`] of its operands): what the work term prices.
    pub f16_flops: f64,
    /// Bytes the step's `T.copy`s write into shared memory.
    pub shared_bytes_in: f64,
    /// Bytes one block adds into global memory with `T.atomic_add` over its whole run
    /// (split-K's partial tiles; loops without a constant trip count add none).
    pub atomic_bytes: f64,
    /// Bytes one block stores into global parameters with `T.copy` (its output tile: the
    /// epilogue).
    pub stored_bytes: f64,
}

impl Step {
    /// The step of the bound, tile-level kernel `k`; `None` when a trip count or an
    /// extent is not a constant (the kernel is then ranked by the wave rules alone).
    pub fn of(k: &Kernel, params: &[BufferDecl]) -> Option<Step> {
        let mut env = Ranges::new();
        int::enter_kernel(&mut env, k);
        let atomic_bytes = atomic_bytes(&k.body, params);
        let stored_bytes = stored_bytes(&k.body, params);
        match outermost_pipelined(&k.body, &mut env) {
            Some((trip, stages, body)) => {
                let w = work(body, &k.allocs)?;
                Some(Step {
                    steps: trip?,
                    stages,
                    flops: w.flops,
                    f16_flops: w.f16_flops,
                    shared_bytes_in: w.bytes,
                    atomic_bytes,
                    stored_bytes,
                })
            }
            None => {
                let w = work(&k.body, &k.allocs)?;
                Some(Step {
                    steps: 1,
                    stages: 1,
                    flops: w.flops,
                    f16_flops: w.f16_flops,
                    shared_bytes_in: w.bytes,
                    atomic_bytes,
                    stored_bytes,
                })
            }
        }
    }

    /// The estimated nanoseconds of a grid of `blocks` blocks, `resident` per SM on `sms`
    /// SMs (both at least 1).
    pub fn estimate_ns(&self, blocks: u128, resident: u128, sms: u128) -> f64 {
        let work = WORK_NS + WORK_NS_PER_MFLOP * self.f16_flops / 1e6;
        let in_flight = (self.stages - 1).max(1) as f64;
        let latency =
            LATENCY_NS + (FILL_NS + FILL_NS_PER_KB * self.shared_bytes_in / 1e3) / in_flight;
        let steps = self.steps as f64;
        // With one stage a block waits for each step's operands and then computes: its
        // own wait and work add up, and only the other blocks on the SM fill the gap.
        let step = |sharing: u128| {
            let busy = sharing as f64 * work;
            if self.stages <= 1 {
                busy.max(latency + work)
            } else {
                busy.max(latency)
            }
        };
        // A block's epilogue (storing its tile) stalls its SM's tensor cores unless another
        // block on the SM computes meanwhile: exposed in full when a block is alone on its
        // SM (one resident, or a partial last wave of one block per SM).
        let epilogue =
            |sharing: u128| EPILOGUE_NS_PER_KB * self.stored_bytes / 1e3 / sharing.max(1) as f64;
        let wave = |sharing: u128| steps * step(sharing) + PER_WAVE_NS + epilogue(sharing);
        let slots = (sms * resident).max(1);
        let full = blocks / slots;
        let rest = blocks % slots;
        let mut ns = full as f64 * wave(resident);
        if rest > 0 {
            // A partial last wave: the busiest SM holds ⌈rest / sms⌉ blocks.
            ns += wave(rest.div_ceil(sms.max(1)));
        }
        let fill_kb = blocks as f64 * steps * self.shared_bytes_in / 1e3;
        let atomic_kb = blocks as f64 * self.atomic_bytes / 1e3;
        let launch = if blocks > 0 { LAUNCH_NS } else { 0.0 };
        ns + fill_kb / FILL_KB_PER_NS + atomic_kb / ATOMIC_KB_PER_NS + launch
    }
}

/// The largest trip count, `num_stages` and body of the first `T.Pipelined` loop met in
/// `body`, outermost first. The trip count is the most any block runs (`analysis::int`
/// over the block variables, the enclosing loops and the int32 lets before it: a split-K
/// slice's `T.min(steps, k_tiles - bz * steps)` is at most `steps`); `None` when it has no
/// bound (it reads memory, as stream-K's run lengths do).
fn outermost_pipelined<'a>(
    body: &'a [Stmt],
    env: &mut Ranges,
) -> Option<(Option<u128>, i64, &'a [Stmt])> {
    for s in body {
        let found = match &s.kind {
            StmtKind::For(f) if matches!(f.kind, ForKind::Pipelined { .. }) => {
                let (start, stop) = (int::interval(&f.start, env), int::interval(&f.stop, env));
                let trip = Some(stop.hi.saturating_sub(start.lo))
                    .filter(|_| start.lo > i64::from(i32::MIN) && stop.hi < i64::from(i32::MAX))
                    .map(|t| u128::try_from(t).unwrap_or(0));
                let stages = f.kind.num_stages().unwrap_or(1).max(1);
                Some((trip, stages, f.body.as_slice()))
            }
            StmtKind::For(f) => {
                int::enter_loop(env, f);
                outermost_pipelined(&f.body, env)
            }
            StmtKind::While { body, .. } => outermost_pipelined(body, env),
            StmtKind::If {
                then_body,
                else_body,
                ..
            } => {
                outermost_pipelined(then_body, env).or_else(|| outermost_pipelined(else_body, env))
            }
            StmtKind::Let { var, value, .. } => {
                let range = int::interval(value, env);
                env.insert(var.name.clone(), range);
                None
            }
            _ => None,
        };
        if found.is_some() {
            return found;
        }
    }
    None
}

/// Bytes `body` copies into global parameters with `T.copy` (a tile's epilogue).
fn stored_bytes(body: &[Stmt], params: &[BufferDecl]) -> f64 {
    global_bytes(body, params, &|s, p| match &s.kind {
        StmtKind::Copy { dst, .. } if p.name.name == dst.buffer.name => dst
            .ranges
            .iter()
            .try_fold(1i64, |acc, r| Some(acc * const_int(&r.extent)?))
            .map_or(0.0, |n| (n * i64::from(p.dtype.bytes())) as f64),
        _ => 0.0,
    })
}

/// Bytes `body` adds into global parameters with atomic adds.
fn atomic_bytes(body: &[Stmt], params: &[BufferDecl]) -> f64 {
    global_bytes(body, params, &|s, p| match &s.kind {
        StmtKind::AtomicAdd { buffer, .. } if p.name.name == buffer.name => {
            f64::from(p.dtype.bytes())
        }
        _ => 0.0,
    })
}

/// The bytes `bytes` gives each statement of `body` writing a global parameter (it is
/// asked for each parameter), loops counted once per iteration where their trip count is a
/// constant (others add nothing), the larger side of an `if`.
fn global_bytes(
    body: &[Stmt],
    params: &[BufferDecl],
    bytes: &dyn Fn(&Stmt, &BufferDecl) -> f64,
) -> f64 {
    let mut total = 0.0;
    for s in body {
        match &s.kind {
            StmtKind::For(f) => {
                if let (Some(a), Some(b)) = (const_int(&f.start), const_int(&f.stop)) {
                    total += (b - a).max(0) as f64 * global_bytes(&f.body, params, bytes);
                }
            }
            StmtKind::If {
                then_body,
                else_body,
                ..
            } => {
                let (a, b) = (
                    global_bytes(then_body, params, bytes),
                    global_bytes(else_body, params, bytes),
                );
                total += a.max(b);
            }
            _ => {
                total += params.iter().map(|p| bytes(s, p)).sum::<f64>();
                for child in tlc_ir::visit::child_bodies(s) {
                    total += global_bytes(child, params, bytes);
                }
            }
        }
    }
    total
}

/// How many times float16's dense tensor-core rate a gemm on `dtype` operands runs: 2 for
/// float8 (1979 vs 989 TFLOP/s on H100), 1 for everything else (float16 and bfloat16 share
/// a rate; the model was fitted on float16).
pub fn tensor_speedup(dtype: DType) -> f64 {
    match dtype {
        DType::Float8E4M3 | DType::Float8E5M2 => FP8_DENSE_TFLOPS / F16_DENSE_TFLOPS,
        _ => 1.0,
    }
}

/// A body's tensor work and shared-memory fills.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Work {
    flops: f64,
    f16_flops: f64,
    bytes: f64,
}

impl Work {
    fn add(&mut self, other: Work, times: f64) {
        self.flops += other.flops * times;
        self.f16_flops += other.f16_flops * times;
        self.bytes += other.bytes * times;
    }
}

/// Flops of the `T.gemm`s (also at float16's rate) and bytes of the `T.copy`s into shared
/// memory in `body` (nested loops counted once per iteration); `None` when an extent is not
/// a constant.
fn work(body: &[Stmt], allocs: &[BufferDecl]) -> Option<Work> {
    let mut total = Work::default();
    for s in body {
        match &s.kind {
            StmtKind::Gemm(g) => {
                let m = matrix_dim(&g.c, 0)?;
                let n = matrix_dim(&g.c, 1)?;
                let k = matrix_dim(&g.a, usize::from(!g.trans_a))?;
                let flops = 2.0 * (m * n * k) as f64;
                // The A operand's dtype decides the instruction (both operands share it).
                let speedup = allocs
                    .iter()
                    .find(|b| b.name.name == g.a.buffer.name)
                    .map_or(1.0, |decl| tensor_speedup(decl.dtype));
                total.flops += flops;
                total.f16_flops += flops / speedup;
            }
            StmtKind::Copy { dst, .. } => {
                if let Some(decl) = allocs.iter().find(|b| b.name.name == dst.buffer.name) {
                    if decl.scope == Scope::Shared {
                        let elems = dst
                            .ranges
                            .iter()
                            .try_fold(1i64, |acc, r| Some(acc * const_int(&r.extent)?))?;
                        total.bytes += (elems * i64::from(decl.dtype.bytes())) as f64;
                    }
                }
            }
            StmtKind::For(f) => {
                let trip = const_int(&f.stop)? - const_int(&f.start)?;
                total.add(work(&f.body, allocs)?, trip.max(0) as f64);
            }
            StmtKind::If {
                then_body,
                else_body,
                ..
            } => {
                // The costlier branch.
                let (a, b) = (work(then_body, allocs)?, work(else_body, allocs)?);
                total.flops += a.flops.max(b.flops);
                total.f16_flops += a.f16_flops.max(b.f16_flops);
                total.bytes += a.bytes.max(b.bytes);
            }
            _ => {}
        }
    }
    Some(total)
}

/// Dimension `i` (0: rows, 1: columns) of the matrix a gemm operand's region holds: its
/// last two ranges.
fn matrix_dim(r: &Region, i: usize) -> Option<i64> {
    let lead = r.ranges.len().checked_sub(2)?;
    const_int(&r.ranges.get(lead + i)?.extent)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(steps: u128, stages: i64, mflop: f64, kb: f64) -> Step {
        Step {
            steps,
            stages,
            flops: mflop * 1e6,
            f16_flops: mflop * 1e6,
            shared_bytes_in: kb * 1e3,
            atomic_bytes: 0.0,
            stored_bytes: 0.0,
        }
    }

    #[test]
    fn more_steps_of_less_work_cost_more() {
        // 128×128×16 vs 128×128×32 over the same K: twice the steps at half the flops.
        let k16 = step(256, 4, 0.52, 8.2);
        let k32 = step(128, 4, 1.05, 16.4);
        assert!(k16.estimate_ns(1024, 2, 132) > k32.estimate_ns(1024, 2, 132));
    }

    #[test]
    fn a_partial_last_wave_costs_less_than_a_full_one() {
        let s = step(128, 4, 1.05, 16.4);
        let full = s.estimate_ns(264, 2, 132);
        let partial = s.estimate_ns(132, 2, 132);
        assert!(partial < full);
        // One wave more costs at least a wave's prologue.
        assert!(s.estimate_ns(265, 2, 132) >= full + PER_WAVE_NS);
    }

    #[test]
    fn stages_hide_latency_when_alone_on_the_sm() {
        let shallow = step(128, 3, 0.26, 12.3);
        let deep = step(128, 5, 0.26, 12.3);
        assert!(deep.estimate_ns(64, 2, 132) < shallow.estimate_ns(64, 2, 132));
    }

    /// A pipelined 128×128×128 gemm step on `dtype` shared operands.
    fn pipelined_gemm(dtype: &str) -> Step {
        let text = format!(
            r#"@T.prim_func
def g(A: T.Tensor((256, 1024), "{dtype}"), B: T.Tensor((256, 1024), "{dtype}"), C: T.Tensor((256, 256), "float32")):
    with T.Kernel(2, 2, threads=128) as (bx, by):
        A_s = T.alloc_shared((128, 128), "{dtype}")
        B_s = T.alloc_shared((128, 128), "{dtype}")
        C_f = T.alloc_fragment((128, 128), "float32")
        T.clear(C_f)
        for kb in T.Pipelined(8, num_stages=3):
            T.copy(A[by * 128, kb * 128], A_s)
            T.copy(B[bx * 128, kb * 128], B_s)
            T.gemm(A_s, B_s, C_f, transpose_B=True)
        T.copy(C_f, C[by * 128, bx * 128])
"#
        );
        let file = crate::diagnostics::SourceFile::new("g.tir", text);
        let func = crate::frontend::parse(&file).unwrap_or_else(|e| panic!("{}", e.0));
        let mut step = None;
        tlc_ir::visit::for_each_stmt(&func.body, &mut |s| {
            if let StmtKind::Kernel(k) = &s.kind {
                step = Step::of(k, &func.params);
            }
        });
        step.unwrap_or_else(|| panic!("no step in the {dtype} kernel"))
    }

    #[test]
    fn fp8_tensor_work_costs_half_of_f16() {
        assert_eq!(tensor_speedup(DType::Float16), 1.0);
        assert_eq!(tensor_speedup(DType::BFloat16), 1.0);
        let fp8 = tensor_speedup(DType::Float8E4M3);
        assert_eq!(fp8, tensor_speedup(DType::Float8E5M2));
        assert!((fp8 - 2.0).abs() < 0.01, "{fp8}");
        let (f16, e4m3) = (pipelined_gemm("float16"), pipelined_gemm("float8_e4m3"));
        // The same flops and steps; float16 prices them as they are, fp8 at half.
        assert_eq!(f16.steps, 8);
        assert_eq!(f16.flops, 2.0 * 128.0 * 128.0 * 128.0);
        assert_eq!((e4m3.flops, e4m3.steps), (f16.flops, f16.steps));
        assert_eq!(f16.f16_flops, f16.flops);
        assert_eq!(e4m3.f16_flops, e4m3.flops / fp8);
        // The estimate prices the halved work: the fp8 step priced as if it were float16
        // (same bytes, same steps) costs more where the work term decides (compute-bound:
        // two blocks share each SM over many waves).
        let as_f16 = Step {
            f16_flops: f16.flops,
            ..e4m3
        };
        let (blocks, resident, sms) = (4096, 2, 132);
        assert!(
            e4m3.estimate_ns(blocks, resident, sms) < as_f16.estimate_ns(blocks, resident, sms)
        );
    }

    #[test]
    fn one_stage_pays_its_wait_and_its_work() {
        let (one, two) = (step(64, 1, 1.05, 16.4), step(64, 2, 1.05, 16.4));
        // Alone on the SM: the unpipelined block waits, then computes.
        let latency = LATENCY_NS + FILL_NS + FILL_NS_PER_KB * 16.4;
        let work = WORK_NS + WORK_NS_PER_MFLOP * 1.05;
        let gap = one.estimate_ns(132, 1, 132) - two.estimate_ns(132, 1, 132);
        assert!(
            (gap - 64.0 * (latency + work - latency.max(work))).abs() < 1e-6,
            "{gap}"
        );
    }

    #[test]
    fn split_k_pays_its_atomic_adds_and_its_second_launch() {
        let text = r#"@T.prim_func
def g(A: T.Tensor((256, 1024), "float16"), B: T.Tensor((1024, 256), "float16"), C: T.Tensor((256, 256), "float16")):
    with T.Kernel(2, 2, 4, threads=128) as (bx, by, bz):
        A_s = T.alloc_shared((128, 64), "float16")
        B_s = T.alloc_shared((64, 128), "float16")
        C_f = T.alloc_fragment((128, 128), "float32")
        T.clear(C_f)
        for kb in T.Pipelined(4, num_stages=3):
            T.copy(A[by * 128, bz * 256 + kb * 64], A_s)
            T.copy(B[bz * 256 + kb * 64, bx * 128], B_s)
            T.gemm(A_s, B_s, C_f)
        T.atomic_add(C[by * 128, bx * 128], C_f)
"#;
        let file = crate::diagnostics::SourceFile::new("g.tir", text);
        let func = crate::frontend::parse(&file).unwrap_or_else(|e| panic!("{}", e.0));
        let mut found = None;
        tlc_ir::visit::for_each_stmt(&func.body, &mut |s| {
            if let StmtKind::Kernel(k) = &s.kind {
                found = Step::of(k, &func.params);
            }
        });
        let split = found.expect("a step");
        // Each block adds its 128 x 128 float16 tile once.
        assert_eq!(split.atomic_bytes, 128.0 * 128.0 * 2.0);
        // It stores nothing with T.copy (the atomic add is its epilogue).
        assert_eq!(split.stored_bytes, 0.0);
        let stored = Step {
            atomic_bytes: 0.0,
            ..split
        };
        let (blocks, resident, sms) = (16, 1, 132);
        let extra =
            split.estimate_ns(blocks, resident, sms) - stored.estimate_ns(blocks, resident, sms);
        let want = 16.0 * 128.0 * 128.0 * 2.0 / 1e3 / ATOMIC_KB_PER_NS;
        assert!((extra - want).abs() < 1e-6, "{extra} vs {want}");
        // A launch costs the same whatever the grid; an empty grid is not launched.
        assert_eq!(stored.estimate_ns(0, resident, sms), 0.0);
        assert!(stored.estimate_ns(1, resident, sms) >= LAUNCH_NS);
    }

    #[test]
    fn the_epilogue_is_exposed_by_one_block_per_sm_and_hidden_by_two() {
        let tile = Step {
            stored_bytes: 128.0 * 256.0 * 2.0,
            ..step(16, 4, 4.2, 49.2)
        };
        let bare = Step {
            stored_bytes: 0.0,
            ..tile
        };
        let exposed = EPILOGUE_NS_PER_KB * 128.0 * 256.0 * 2.0 / 1e3;
        // Four full waves: each pays the epilogue, in full at one block per SM, half at two.
        let one = tile.estimate_ns(528, 1, 132) - bare.estimate_ns(528, 1, 132);
        assert!((one - 4.0 * exposed).abs() < 1e-6, "{one}");
        let two = tile.estimate_ns(1056, 2, 132) - bare.estimate_ns(1056, 2, 132);
        assert!((two - 4.0 * exposed / 2.0).abs() < 1e-6, "{two}");
    }
}
