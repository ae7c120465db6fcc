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
//!   one block's step (its `T.gemm` flops), and `latency = LATENCY_NS + (FILL_NS +
//!   FILL_NS_PER_KB × KB) / (stages − 1)` is the wait for a step's operands (its `T.copy`s
//!   into shared memory, KB), hidden over the stages in flight.
//!
//! - Added to that, the time the whole GPU takes to fill shared memory with every block's
//!   every step (`FILL_KB_PER_NS`): smaller tiles read the same operands more often.
//!
//! The constants were fitted (least squares on log time) to `tlc tune`'s timings of seed
//! 002's 36 configs at four shapes of different regimes on an H100 (sm_90a; 4096³,
//! 1024×1024×14336, 128×4096×4096, 6144×6144×2048) and checked on all 26 shapes timed
//! (docs/perf.md, "Heuristic quality"). They
//! describe tlc's own code on that GPU: another GPU or target gets the same constants, an
//! estimate to rank by, not a prediction of milliseconds. The model knows nothing of
//! registers beyond the resident count and nothing of bank conflicts or L2 reuse.

use tlc_ir::verifier::const_int;
use tlc_ir::{BufferDecl, ForKind, Kernel, Region, Scope, Stmt, StmtKind};
use tlc_passes::analysis::int::{self, Ranges};

/// What a step of the block costs besides its flops (issue, barriers, bookkeeping).
const WORK_NS: f64 = 93.8;
/// The SM's cost of one MFLOP of a block's `T.gemm`s (about 9.3 TFLOP/s per SM).
const WORK_NS_PER_MFLOP: f64 = 107.7;
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
    /// Bytes the step's `T.copy`s write into shared memory.
    pub shared_bytes_in: f64,
}

impl Step {
    /// The step of the bound, tile-level kernel `k`; `None` when a trip count or an
    /// extent is not a constant (the kernel is then ranked by the wave rules alone).
    pub fn of(k: &Kernel) -> Option<Step> {
        let mut env = Ranges::new();
        int::enter_kernel(&mut env, k);
        match outermost_pipelined(&k.body, &mut env) {
            Some((trip, stages, body)) => {
                let (flops, bytes) = work(body, &k.allocs)?;
                Some(Step {
                    steps: trip?,
                    stages,
                    flops,
                    shared_bytes_in: bytes,
                })
            }
            None => {
                let (flops, bytes) = work(&k.body, &k.allocs)?;
                Some(Step {
                    steps: 1,
                    stages: 1,
                    flops,
                    shared_bytes_in: bytes,
                })
            }
        }
    }

    /// The estimated nanoseconds of a grid of `blocks` blocks, `resident` per SM on `sms`
    /// SMs (both at least 1).
    pub fn estimate_ns(&self, blocks: u128, resident: u128, sms: u128) -> f64 {
        let work = WORK_NS + WORK_NS_PER_MFLOP * self.flops / 1e6;
        let in_flight = (self.stages - 1).max(1) as f64;
        let latency =
            LATENCY_NS + (FILL_NS + FILL_NS_PER_KB * self.shared_bytes_in / 1e3) / in_flight;
        let steps = self.steps as f64;
        let wave = |sharing: u128| steps * (sharing as f64 * work).max(latency) + PER_WAVE_NS;
        let slots = (sms * resident).max(1);
        let full = blocks / slots;
        let rest = blocks % slots;
        let mut ns = full as f64 * wave(resident);
        if rest > 0 {
            // A partial last wave: the busiest SM holds ⌈rest / sms⌉ blocks.
            ns += wave(rest.div_ceil(sms.max(1)));
        }
        let fill_kb = blocks as f64 * steps * self.shared_bytes_in / 1e3;
        ns + fill_kb / FILL_KB_PER_NS
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

/// Flops of the `T.gemm`s and bytes of the `T.copy`s into shared memory in `body` (nested
/// loops counted once per iteration); `None` when an extent is not a constant.
fn work(body: &[Stmt], allocs: &[BufferDecl]) -> Option<(f64, f64)> {
    let mut flops = 0.0;
    let mut bytes = 0.0;
    for s in body {
        match &s.kind {
            StmtKind::Gemm(g) => {
                let m = matrix_dim(&g.c, 0)?;
                let n = matrix_dim(&g.c, 1)?;
                let k = matrix_dim(&g.a, usize::from(!g.trans_a))?;
                flops += 2.0 * (m * n * k) as f64;
            }
            StmtKind::Copy { dst, .. } => {
                if let Some(decl) = allocs.iter().find(|b| b.name.name == dst.buffer.name) {
                    if decl.scope == Scope::Shared {
                        let elems = dst
                            .ranges
                            .iter()
                            .try_fold(1i64, |acc, r| Some(acc * const_int(&r.extent)?))?;
                        bytes += (elems * i64::from(decl.dtype.bytes())) as f64;
                    }
                }
            }
            StmtKind::For(f) => {
                let trip = const_int(&f.stop)? - const_int(&f.start)?;
                let (fl, by) = work(&f.body, allocs)?;
                flops += fl * trip.max(0) as f64;
                bytes += by * trip.max(0) as f64;
            }
            StmtKind::If {
                then_body,
                else_body,
                ..
            } => {
                // The costlier branch.
                let (a, b) = (work(then_body, allocs)?, work(else_body, allocs)?);
                flops += a.0.max(b.0);
                bytes += a.1.max(b.1);
            }
            _ => {}
        }
    }
    Some((flops, bytes))
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
            shared_bytes_in: kb * 1e3,
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
}
