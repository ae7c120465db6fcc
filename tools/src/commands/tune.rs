//! `tlc tune FILE -D NAME=VALUE…`: times a kernel's tuning space on GPU 0 and keeps the
//! fastest config in the tuning cache (docs/cli.md, "tlc tune").
//!
//! The kernel's signature decides what a config is checked and timed against, as it
//! decides `tlc bench`'s path ([`Gemm::of`]): a float16 GEMM `C = A @ B` against cuBLAS
//! (`bench.rs`), an FP8 GEMM with block scales (a float8 parameter, DeepGEMM's
//! `gemm_fp8_fp8_bf16_nt`) against the dequantized float32 reference and cuBLASLt's FP8
//! GEMM (`bench_fp8.rs`), and any other kernel (attention, norms, …) against its own
//! default config at the same shape (`tune_any.rs`). The signature and the shape are
//! checked before the GPU is touched.
//!
//! 1. **Plan** (`plan::space::rank`, no GPU): every config of the space at the bound dims,
//!    bound and run through the target's pipeline; configs the verifier or a pass refuses
//!    (shared memory over the target's limit, …) are dropped with the reason, the rest
//!    ranked by the cost model and waves. `--top N` keeps the N best-ranked.
//! 2. **Compile** the kept configs to PTX on every core (scoped threads, one config at a
//!    time each), then assemble each with ptxas (`TLC_PTXAS`, else `ptxas` on `PATH` or
//!    under `/usr/local/cuda/bin`) and drop the ones that spill or use more than 255
//!    registers; without ptxas that filter is skipped with a warning. `--dry-run` stops
//!    here and prints the candidates (no GPU needed).
//! 3. **Time** each survivor as `tlc bench` does, configs one after another on the same
//!    GPU: f16 — `bench::bench_shape` (random float16 inputs, C checked against cuBLAS in
//!    the same process, warm-up runs, median of CUDA event timings); FP8 — one set of
//!    quantized inputs and one reference for all configs (`bench_fp8::Fp8Inputs`), each
//!    config launched on them into a NaN-filled C, checked with `tlc bench`'s FP8 limit and
//!    timed (`bench_fp8::check_and_time`), cuBLASLt timed once (`bench_fp8::time_peer`);
//!    any other kernel — seeded inputs, every parameter's final contents checked against
//!    the default config's within the dtype's tolerance (`tune_any::AnyInputs`).
//! 4. Print the table sorted by time (TFLOP/s, the ratio to the peer, the check), the wall
//!    time of each phase, and store the fastest config that passed the check in the tuning
//!    cache for (kernel, dims, GPU, target), which `compile` / `run` / `bench` then use. A
//!    config that fails the check is marked FAIL and never stored.

use crate::cache::{self, DeviceId, Entry, Key};
use crate::commands::bench::{self, BenchArgs, F16Inputs, GemmShape};
use crate::commands::bench_fp8::{self, Fp8Inputs, Peer};
use crate::commands::compile::device_target;
use crate::commands::tune_any::{self, AnyInputs};
use crate::tunables::{self, Tuning};
use std::num::NonZeroU128;
use std::path::{Path, PathBuf};
use std::time::Instant;
use tlc::diagnostics::SourceFile;
use tlc::driver::compile_func;
use tlc::driver::Emit;
use tlc::frontend::{self, UserError};
use tlc::plan::space::{self, describe};
use tlc_ir::tuning::Config;
use tlc_ir::{DType, PrimFunc};
use tlc_passes::{Instrumentation, PassContext, Target};
use tlc_runtime::cublas::gemm_tflops;
use tlc_runtime::{Cublas, CublasLt, Gpu, Kernel};

/// What `tlc tune` was asked to do.
pub struct TuneArgs<'a> {
    pub file: &'a Path,
    /// The kernel's source already read (Python's `tlc.tune` of a `PrimFunc` or a string):
    /// `(name shown in diagnostics, text)`; `None` reads `file`.
    pub source: Option<(&'a str, &'a str)>,
    pub defines: &'a [String],
    pub target: Option<Target>,
    /// Time only the N configs the plan ranks best.
    pub top: Option<usize>,
    pub warmup: usize,
    pub iters: usize,
    pub seed: u64,
    /// `--input NAME=X.npy`: parameters' data instead of seeded random values (kernels
    /// checked against their default config).
    pub inputs: &'a [String],
    /// `--no-cache`: do not store the winner.
    pub store: bool,
    /// `--dry-run`: plan, compile and assemble only; no GPU.
    pub dry_run: bool,
    /// `--json`: one JSON object per shape instead of the table.
    pub json: bool,
}

/// The GEMM a kernel computes, by its signature: what its configs are checked against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gemm {
    /// `C = A @ B`, float16 operands, C float16 or float32: checked against cuBLAS.
    F16 { shape: GemmShape, c_dtype: DType },
    /// DeepGEMM's FP8 GEMM with block scales: checked against the dequantized float32
    /// reference, timed against cuBLASLt's FP8 GEMM.
    Fp8 { shape: GemmShape },
    /// Any other kernel: checked and timed against its default config (`tune_any.rs`).
    Any,
}

impl Gemm {
    /// Classifies `parsed` with its dims bound to `dims`, as `tlc bench` does: five
    /// parameters with a float8 one make it the FP8 GEMM (`bench_fp8::fp8_params`; a wrong
    /// detail of that signature or shape is a located error), the f16 GEMM signature an f16
    /// GEMM, anything else any kernel (float8 casts included). A kernel whose parameters
    /// are named `A`, `B`, `C` but that is no f16 GEMM gets a note saying why it is checked
    /// against its default config instead of cuBLAS.
    pub fn of(
        file: &SourceFile,
        parsed: &PrimFunc,
        dims: &Config,
    ) -> Result<(Gemm, Option<String>), UserError> {
        let bound =
            tlc_ir::specialize::specialize(parsed, dims).map_err(|d| UserError(file.render(&d)))?;
        if bench_fp8::meant_as_fp8_gemm(&bound) {
            if let Some(fp8) = bench_fp8::fp8_params(file, &bound) {
                fp8?;
                let shape = bench_fp8::kernel_shape(file, &bound)?;
                return Ok((Gemm::Fp8 { shape }, None));
            }
        }
        let gemm_like = {
            let names: Vec<&str> = parsed.params.iter().map(|p| p.name.name.as_str()).collect();
            names == ["A", "B", "C"]
        };
        match (
            bench::gemm_shape(file, parsed, dims),
            bench::c_dtype(file, parsed),
        ) {
            (Ok(shape), Ok(c_dtype)) => Ok((Gemm::F16 { shape, c_dtype }, None)),
            (Err(e), _) | (_, Err(e)) if gemm_like => {
                let why = e.0.lines().next().unwrap_or("").to_string();
                Ok((
                    Gemm::Any,
                    Some(format!(
                        "note: checked against its default config, not against cuBLAS: {why}"
                    )),
                ))
            }
            _ => Ok((Gemm::Any, None)),
        }
    }

    /// The GEMM's shape (`None` for any other kernel).
    pub fn shape(&self) -> Option<GemmShape> {
        match *self {
            Gemm::F16 { shape, .. } | Gemm::Fp8 { shape } => Some(shape),
            Gemm::Any => None,
        }
    }

    /// The peer's name in the table's ratio column.
    fn peer(&self) -> &'static str {
        match self {
            Gemm::F16 { .. } => "cuBLAS",
            Gemm::Fp8 { .. } => "cuBLASLt",
            Gemm::Any => "default",
        }
    }

    /// What a config's result is checked against, for the header.
    fn check_text(&self) -> String {
        match self {
            Gemm::F16 { .. } => format!(
                "float16 GEMM, checked against cuBLAS (rel err limit {:e})",
                bench::MAX_REL_ERROR
            ),
            Gemm::Fp8 { .. } => format!(
                "FP8 block-scaled GEMM, checked against the dequantized float32 reference \
                 (cuBLAS, rel err limit {:e}), timed against cuBLASLt's FP8 GEMM",
                bench_fp8::MAX_REL_ERROR_FP8
            ),
            Gemm::Any => "every parameter checked against the default config's (the dtype's \
                          tolerance), timed against it"
                .to_string(),
        }
    }
}

/// The shapes `tlc tune` is asked for, each as `-D` texts: the `-D`s and `--shapes`
/// combined as `tlc bench --vs copy` combines them (a name given several times sweeps), the
/// same shape once. Only dims may sweep: a tunable given several values is an error (its
/// shapes would share one cache entry, the last run's winner overwriting the others).
pub fn shapes(
    file: &Path,
    defines: &[String],
    shapes: Option<&str>,
) -> Result<Vec<Vec<String>>, UserError> {
    let bindings =
        crate::commands::bench_copy::expand_bindings(defines, shapes).map_err(UserError::plain)?;
    let source = frontend::read_source(file)?;
    let parsed = frontend::parse(&source)?;
    let mut out: Vec<Vec<String>> = Vec::new();
    for b in &bindings {
        let texts: Vec<String> = b.iter().map(|(n, v)| format!("{n}={v}")).collect();
        if !out.contains(&texts) {
            out.push(texts);
        }
    }
    for (name, value) in bindings.iter().flatten() {
        let other = bindings
            .iter()
            .flatten()
            .find(|(n, v)| n == name && v != value);
        if let (true, Some((_, v))) = (parsed.space.declares(name), other) {
            return Err(UserError::plain(format!(
                "`{name}` is a tunable of `{}` and is given two values ({value}, {v}): `tlc \
                 tune` compares its values itself; fix it with one `-D {name}=…` or leave it \
                 to the space",
                parsed.name.name
            )));
        }
    }
    Ok(out)
}

/// One config on its way through the phases.
pub struct Candidate {
    /// Its place in the plan's ranking (1: best).
    pub rank: usize,
    pub config: Config,
    /// Its PTX, or why it was dropped after the plan (compile or ptxas).
    pub ptx: Result<String, String>,
    /// ptxas's assembly of the PTX, loaded instead of the PTX (the driver does not
    /// assemble it again); `None` without ptxas.
    pub cubin: Option<Vec<u8>>,
}

impl Candidate {
    /// Loads the config on `gpu`: ptxas's cubin where there is one and the driver takes it,
    /// else the PTX — with the driver's reason for refusing the cubin.
    pub fn load(&self, gpu: &Gpu) -> Result<Option<(Kernel, Option<String>)>, UserError> {
        let Ok(ptx) = &self.ptx else {
            return Ok(None);
        };
        let refused = match &self.cubin {
            Some(cubin) => match gpu.load_assembled(ptx, cubin) {
                Ok(kernel) => return Ok(Some((kernel, None))),
                Err(e) => Some(e.to_string()),
            },
            None => None,
        };
        let kernel = gpu
            .load(ptx)
            .map_err(bench::runtime("cannot load a config on the GPU".into()))?;
        Ok(Some((kernel, refused)))
    }
}

/// Phases 1 and 2: the kept configs compiled (and assembled where ptxas is found).
pub struct Planned {
    /// Configs in the space (ranked and dropped by the plan).
    pub total: usize,
    /// The configs the plan ranked and `--top` kept, best first.
    pub candidates: Vec<Candidate>,
    /// The configs the plan dropped, with the reason.
    pub dropped: Vec<(String, String)>,
    /// Warnings (no ptxas).
    pub notes: Vec<String>,
    pub plan_s: f64,
    pub compile_s: f64,
}

/// Plans the space of `parsed` at `defines` for `target` on `sms` SMs, keeps the `top`
/// best (all without), and compiles and assembles them (no GPU).
pub fn plan_and_compile(
    file: &SourceFile,
    parsed: &PrimFunc,
    defines: &[String],
    target: Target,
    sms: u32,
    top: Option<usize>,
) -> Result<Planned, UserError> {
    let start = Instant::now();
    let plan_gpu = space::Gpu {
        target,
        sms: NonZeroU128::new(u128::from(sms)).unwrap_or(NonZeroU128::MIN),
    };
    let ranking = space::rank(file, parsed, defines, plan_gpu)?;
    let dims = frontend::split_defines(parsed, defines)?.dims;
    let keep = top.unwrap_or(usize::MAX).min(ranking.ranked.len());
    let plan_s = start.elapsed().as_secs_f64();

    // Compile on every core.
    let compile_start = Instant::now();
    let mut candidates: Vec<Candidate> = ranking.ranked[..keep]
        .iter()
        .enumerate()
        .map(|(i, r)| Candidate {
            rank: i + 1,
            config: r.config.clone(),
            ptx: Err(String::new()),
            cubin: None,
        })
        .collect();
    let dims_ref = &dims;
    let ptxas = find_ptxas();
    let ptxas_ref = ptxas.as_deref();
    // Each worker compiles a config and assembles it: ptxas takes most of the time.
    tlc::parallel::for_each(&mut candidates, |c| {
        c.ptx = compile_config(file, parsed, &c.config, dims_ref, target, sms);
        if let (Ok(ptx), Some(p)) = (&c.ptx, ptxas_ref) {
            match assemble(p, ptx, target) {
                Ok(cubin) => c.cubin = Some(cubin),
                Err(reason) => c.ptx = Err(reason),
            }
        }
    });
    let mut notes = Vec::new();
    if ptxas.is_none() {
        notes.push(
            "warning: no ptxas found (TLC_PTXAS, PATH, /usr/local/cuda/bin): spills and register \
             counts were not checked"
                .to_string(),
        );
    }
    Ok(Planned {
        total: ranking.ranked.len() + ranking.dropped.len(),
        candidates,
        dropped: ranking
            .dropped
            .iter()
            .map(|d| (describe(&d.config), d.reason.clone()))
            .collect(),
        notes,
        plan_s,
        compile_s: compile_start.elapsed().as_secs_f64(),
    })
}

/// Every visible GPU (`CUDA_VISIBLE_DEVICES` chooses), opened: `tlc tune` times one
/// config on each at a time. They must be one model (name and SM count), since their
/// timings are compared; another model is refused with the fix.
fn open_gpus() -> Result<Vec<Gpu>, UserError> {
    let first =
        Gpu::new(0).map_err(|e| UserError::plain(format!("`tlc tune` needs a GPU: {e}")))?;
    let mut gpus = vec![first];
    for i in 1..Gpu::count() {
        let g = Gpu::new(i)
            .map_err(|e| UserError::plain(format!("`tlc tune` cannot open GPU {i}: {e}")))?;
        if g.name() != gpus[0].name() || g.sm_count() != gpus[0].sm_count() {
            return Err(UserError::plain(format!(
                "`tlc tune` times configs on every visible GPU and compares their times, so \
                 they must be one model: GPU 0 is {} ({} SMs), GPU {i} is {} ({} SMs); set \
                 CUDA_VISIBLE_DEVICES to GPUs of one model",
                gpus[0].name(),
                gpus[0].sm_count(),
                g.name(),
                g.sm_count()
            )));
        }
        gpus.push(g);
    }
    Ok(gpus)
}

/// What one GPU's timing thread returns.
struct GpuRun<'c> {
    rows: Vec<Timed<'c>>,
    peer_note: Option<String>,
    /// (how many, the first reason): configs whose cubin the driver refused.
    cubins_refused: Option<(usize, String)>,
}

/// Checks and times configs from `queue` on `gpu` until none is left, with its own inputs,
/// reference and peer (`Timer`).
fn time_on<'c, I: Iterator<Item = &'c Candidate>>(
    gpu: &Gpu,
    queue: &std::sync::Mutex<I>,
    progress: &indicatif::ProgressBar,
    gemm: Gemm,
    context: (&SourceFile, &PrimFunc, Target, Option<&Candidate>),
    args: &TuneArgs,
) -> Result<GpuRun<'c>, UserError> {
    let blas = Cublas::new(gpu).map_err(bench::runtime("cannot start cuBLAS".into()))?;
    let mut timer = Timer::new(gpu, &blas, gemm, context, args)?;
    let mut run = GpuRun {
        rows: Vec::new(),
        peer_note: timer.peer_note(),
        cubins_refused: None,
    };
    loop {
        let next = match queue.lock() {
            Ok(mut q) => q.next(),
            Err(_) => None,
        };
        let Some(c) = next else { break };
        progress.set_message(describe(&c.config));
        let Some((kernel, refused)) = c.load(gpu)? else {
            continue;
        };
        if let Some(why) = refused {
            run.cubins_refused.get_or_insert((0, why)).0 += 1;
        }
        run.rows.push(timer.time(c, &kernel)?);
        progress.inc(1);
    }
    // cuBLAS again after the configs: the ratios use the faster of its two medians.
    if let Timer::F16 { inputs, bench } = &mut timer {
        inputs.time_cublas(&blas, bench)?;
        let peer = f64::from(inputs.cublas().median_ms);
        for r in &mut run.rows {
            r.ratio = Some(peer / f64::from(r.median_ms));
        }
    }
    Ok(run)
}

/// One timed config's result, whatever the GEMM.
struct Timed<'a> {
    candidate: &'a Candidate,
    median_ms: f32,
    /// `None` for a kernel with no FLOP count (not a GEMM).
    tflops: Option<f64>,
    /// The peer's time over this config's (`None`: the peer was not timed).
    ratio: Option<f64>,
    rel_err: String,
    passes: bool,
    /// Why the check failed, where the check says more than its number.
    why: Option<String>,
}

/// Checks `--input` files against every shape before any is tuned (a file that fits the
/// first shape but not a later one would otherwise be found out after the first shape's
/// GPU work and cache entry).
pub fn check_inputs(
    file: &Path,
    shapes: &[Vec<String>],
    inputs: &[String],
) -> Result<(), UserError> {
    if inputs.is_empty() {
        return Ok(());
    }
    let source = frontend::read_source(file)?;
    let parsed = frontend::parse(&source)?;
    for defines in shapes {
        let dims = frontend::split_defines(&parsed, defines)?.dims;
        inputs_allowed(Gemm::of(&source, &parsed, &dims)?.0, &parsed, inputs)?;
        tune_any::given_inputs(&source, &parsed, defines, inputs).map_err(|e| {
            match shapes.len() {
                1 => e,
                _ => UserError(format!(
                    "{}note: one `--input` file serves every shape; this is shape {}\n",
                    e.0,
                    defines.join(" ")
                )),
            }
        })?;
    }
    Ok(())
}

/// `--input` is for kernels checked against their default config: the GEMM kinds make their
/// own inputs.
fn inputs_allowed(gemm: Gemm, parsed: &PrimFunc, inputs: &[String]) -> Result<(), UserError> {
    if inputs.is_empty() || gemm == Gemm::Any {
        return Ok(());
    }
    Err(UserError::plain(format!(
        "`--input` gives data to kernels checked against their default config; `{}` is \
         checked against {} on inputs of its own",
        parsed.name.name,
        gemm.peer()
    )))
}

/// Tunes one shape: its table (for stdout), and whether a config passed the check (a tune
/// where none did is a failure: the command exits 1 after printing the table).
pub fn run(args: &TuneArgs) -> Result<(String, bool), UserError> {
    let start = Instant::now();
    let file = match args.source {
        Some((name, text)) => SourceFile::new(name, text),
        None => frontend::read_source(args.file)?,
    };
    let parsed = frontend::parse(&file)?;
    if parsed.space.is_empty() {
        return Err(UserError::plain(format!(
            "`{}` declares no tuning space: nothing to tune (docs/ir.md, \"Tuning space\")",
            parsed.name.name
        )));
    }
    let defines = frontend::split_defines(&parsed, args.defines)?;
    let (gemm, kind_note) = Gemm::of(&file, &parsed, &defines.dims)?;
    let dims_text = describe(&defines.dims);
    inputs_allowed(gemm, &parsed, args.inputs)?;
    // Read and checked before any GPU work (a dry run checks them too); each GPU's timer
    // reads them again for its own upload.
    tune_any::given_inputs(&file, &parsed, args.defines, args.inputs)?;
    if args.dry_run {
        let (mut out, ready) = dry_run(args, &file, &parsed, gemm, &dims_text)?;
        if let (Some(n), false) = (kind_note, args.json) {
            out += &format!("{n}\n");
        }
        // A dry run "passes" when some config would be timed.
        return Ok((out, ready > 0));
    }
    let gpus = open_gpus()?;
    let gpu = &gpus[0];
    let target = device_target(gpu, args.target)?;
    let sms = gpu.sm_count().max(1);
    let planned = plan_and_compile(&file, &parsed, args.defines, target, sms, args.top)?;

    // Time on every GPU at once: each takes the next config left, loads, checks and times
    // it against its own inputs and peer.
    let time_start = Instant::now();
    let mut dropped = planned.dropped.clone();
    let mut notes = planned.notes.clone();
    for c in &planned.candidates {
        if let Err(reason) = &c.ptx {
            dropped.push((describe(&c.config), reason.clone()));
        }
    }
    let timed_count = planned.candidates.iter().filter(|c| c.ptx.is_ok()).count();
    // Progress on a terminal only: indicatif draws nothing when stderr is not one.
    let progress = indicatif::ProgressBar::new(timed_count as u64).with_style(
        indicatif::ProgressStyle::with_template(
            "tlc tune: timing {pos}/{len} [{bar:30}] {elapsed} {msg}",
        )
        .map_err(|e| UserError::plain(format!("progress bar: {e}")))?
        .progress_chars("=> "),
    );
    notes.extend(kind_note);
    let reference = planned.candidates.iter().find(|c| c.ptx.is_ok());
    let queue = std::sync::Mutex::new(planned.candidates.iter().filter(|c| c.ptx.is_ok()));
    let context = (&file, &parsed, target, reference);
    // One GPU times on this thread; several, one thread each.
    let runs: Vec<Result<GpuRun, UserError>> = match gpus.len() {
        1 => vec![time_on(gpu, &queue, &progress, gemm, context, args)],
        _ => std::thread::scope(|scope| {
            let workers: Vec<_> = gpus
                .iter()
                .map(|g| {
                    let (queue, progress) = (&queue, &progress);
                    scope.spawn(move || time_on(g, queue, progress, gemm, context, args))
                })
                .collect();
            workers
                .into_iter()
                .map(|w| {
                    w.join().unwrap_or_else(|_| {
                        Err(UserError::plain(
                            "a GPU's timing thread panicked".to_string(),
                        ))
                    })
                })
                .collect()
        }),
    };
    progress.finish_and_clear();
    let mut rows = Vec::new();
    let mut cubins_refused: Option<(usize, String)> = None;
    let mut peer_notes: Vec<String> = Vec::new();
    for (i, run) in runs.into_iter().enumerate() {
        let run = run?;
        rows.extend(run.rows);
        // The peer's note once (every GPU is the same model); where it differs, per GPU.
        if let Some(note) = run.peer_note {
            if peer_notes.is_empty() {
                notes.push(note.clone());
            } else if !peer_notes.contains(&note) {
                notes.push(format!("GPU {i}: {note}"));
            }
            peer_notes.push(note);
        }
        if let Some((n, why)) = run.cubins_refused {
            cubins_refused.get_or_insert((0, why)).0 += n;
        }
    }
    if let Some((n, why)) = cubins_refused {
        notes.push(format!(
            "note: the driver refused ptxas's cubin of {n} configs (the first: {why}); their \
             PTX was loaded instead"
        ));
    }
    let time_s = time_start.elapsed().as_secs_f64();
    rows.sort_by(|a, b| a.median_ms.total_cmp(&b.median_ms));
    let best = rows.iter().find(|r| r.passes);
    // The winner in the tuning cache (unless `--no-cache`): its path, or why not.
    let stored = match best {
        Some(best) if args.store => {
            let key = Key::new(&parsed, &defines.dims, &DeviceId::of(gpu), target);
            let entry = Entry {
                config: best.candidate.config.clone(),
                time_ms: Some(f64::from(best.median_ms)),
                tflops: best.tflops,
            };
            Some(cache::store(&key, &entry).map_err(|e| e.to_string()))
        }
        _ => None,
    };
    let passed = best.is_some();
    let phases = Phases {
        total_s: start.elapsed().as_secs_f64(),
        plan_s: planned.plan_s,
        compile_s: planned.compile_s,
        time_s,
    };
    let report = Report {
        kernel: &parsed.name.name,
        dims_text: &dims_text,
        device: gpu.name(),
        gpus: gpus.len(),
        sms,
        target,
        gemm,
        total: planned.total,
        rows: &rows,
        dropped: &dropped,
        notes: &notes,
        phases,
        stored: &stored,
        args,
    };
    let out = match args.json {
        true => report.json(),
        false => report.text(),
    };
    Ok((out, passed))
}

/// Seconds of a tune's phases.
#[derive(Clone, Copy)]
struct Phases {
    total_s: f64,
    plan_s: f64,
    compile_s: f64,
    time_s: f64,
}

/// One shape's tune, for printing.
struct Report<'r, 'c> {
    kernel: &'r str,
    dims_text: &'r str,
    device: &'r str,
    gpus: usize,
    sms: u32,
    target: Target,
    gemm: Gemm,
    total: usize,
    /// Sorted by time, fastest first.
    rows: &'r [Timed<'c>],
    dropped: &'r [(String, String)],
    notes: &'r [String],
    phases: Phases,
    stored: &'r Option<Result<PathBuf, String>>,
    args: &'r TuneArgs<'r>,
}

impl Report<'_, '_> {
    /// The table `tlc tune` prints.
    fn text(&self) -> String {
        let mut out = String::new();
        let on = match self.gpus {
            1 => self.device.to_string(),
            n => format!("{n} × {} (each config on one of them)", self.device),
        };
        out += &format!(
            "tune `{}` at {} on {on} ({} SMs) as {}: {}; {} configs, {} timed (median of {} \
             after {} warm-up runs)\n",
            self.kernel,
            self.dims_text,
            self.sms,
            self.target.name(),
            self.gemm.check_text(),
            self.total,
            self.rows.len(),
            self.args.iters,
            self.args.warmup
        );
        let peer = format!("vs {}", self.gemm.peer());
        out += &format!(
            "{:>4}  {:>4}  {:<64} {:>9} {:>8} {:>11} {:>9}  check\n",
            "time", "plan", "config", "ms", "TFLOP/s", peer, "rel err"
        );
        for (i, r) in self.rows.iter().enumerate() {
            let ratio = r.ratio.map_or("-".to_string(), |x| format!("{x:.3}"));
            let tflops = r.tflops.map_or("-".to_string(), |x| format!("{x:.1}"));
            out += &format!(
                "{:>4}  {:>4}  {:<64} {:>9.4} {:>8} {:>11} {:>9}  {}\n",
                i + 1,
                r.candidate.rank,
                describe(&r.candidate.config),
                r.median_ms,
                tflops,
                ratio,
                r.rel_err,
                if r.passes { "ok" } else { "FAIL" }
            );
        }
        let failed: Vec<String> = self
            .rows
            .iter()
            .filter(|r| !r.passes)
            .map(|r| match &r.why {
                Some(why) => format!("{} ({why})", describe(&r.candidate.config)),
                None => describe(&r.candidate.config),
            })
            .collect();
        if !failed.is_empty() {
            out += &format!(
                "failed the check ({}; never stored): {}\n",
                failed.len(),
                failed.join("; ")
            );
        }
        out += &dropped_text(self.dropped);
        for n in self.notes {
            out += &format!("{n}\n");
        }
        let p = self.phases;
        out += &format!(
            "{:.2} s in all: plan {:.2} s, compile and ptxas {:.2} s ({} threads), timing \
             {:.2} s\n",
            p.total_s,
            p.plan_s,
            p.compile_s,
            tlc::parallel::workers(),
            p.time_s
        );
        match self.rows.iter().find(|r| r.passes) {
            None => out += "no config passed the check: nothing stored\n",
            Some(best) => {
                let ratio = best.ratio.map_or(String::new(), |x| {
                    format!(", {x:.3} of {}", self.gemm.peer())
                });
                let tflops = best
                    .tflops
                    .map_or(String::new(), |x| format!(", {x:.1} TFLOP/s"));
                out += &format!(
                    "best: {} ({:.4} ms{tflops}{ratio})\n",
                    describe(&best.candidate.config),
                    best.median_ms,
                );
            }
        }
        match self.stored {
            Some(Ok(path)) => out += &format!("stored in the tuning cache: {}\n", path.display()),
            Some(Err(e)) => out += &format!("warning: not stored in the tuning cache: {e}\n"),
            None => {}
        }
        out
    }

    /// `--json`: the same facts as one JSON object on one line (docs/cli.md).
    fn json(&self) -> String {
        let config = |c: &Config| -> serde_json::Value {
            c.iter()
                .map(|(n, v)| (n.clone(), serde_json::Value::from(*v)))
                .collect::<serde_json::Map<_, _>>()
                .into()
        };
        let finite = |x: f64| x.is_finite().then_some(x);
        let rows: Vec<serde_json::Value> = self
            .rows
            .iter()
            .enumerate()
            .map(|(i, r)| {
                serde_json::json!({
                    "time_rank": i + 1,
                    "plan_rank": r.candidate.rank,
                    "config": config(&r.candidate.config),
                    "ms": finite(f64::from(r.median_ms)),
                    "tflops": r.tflops.and_then(finite),
                    "ratio": r.ratio.and_then(finite),
                    "rel_err": r.rel_err,
                    "passes": r.passes,
                    "why": r.why,
                })
            })
            .collect();
        let best = self.rows.iter().find(|r| r.passes).map(|b| {
            serde_json::json!({
                "config": config(&b.candidate.config),
                "ms": finite(f64::from(b.median_ms)),
                "tflops": b.tflops.and_then(finite),
                "ratio": b.ratio.and_then(finite),
            })
        });
        let dropped: Vec<serde_json::Value> = self
            .dropped
            .iter()
            .map(|(c, why)| serde_json::json!({"config": c, "reason": why}))
            .collect();
        let (stored, store_error) = match self.stored {
            Some(Ok(path)) => (Some(path.display().to_string()), None),
            Some(Err(e)) => (None, Some(e.clone())),
            None => (None, None),
        };
        let p = self.phases;
        let v = serde_json::json!({
            "kernel": self.kernel,
            "dims": self.dims_text,
            "device": self.device,
            "gpus": self.gpus,
            "sms": self.sms,
            "target": self.target.name(),
            "check": self.gemm.check_text(),
            "peer": self.gemm.peer(),
            "configs": self.total,
            "warmup": self.args.warmup,
            "iters": self.args.iters,
            "rows": rows,
            "dropped": dropped,
            "notes": self.notes,
            "best": best,
            "stored": stored,
            "store_error": store_error,
            "seconds": {"total": p.total_s, "plan": p.plan_s, "compile": p.compile_s, "timing": p.time_s},
        });
        format!("{v}\n")
    }
}

/// `--dry-run`: phases 1 and 2 for `--target` (default sm_90a) on its usual SM count, and
/// the candidates listed; nothing runs.
fn dry_run(
    args: &TuneArgs,
    file: &SourceFile,
    parsed: &PrimFunc,
    gemm: Gemm,
    dims_text: &str,
) -> Result<(String, usize), UserError> {
    let target = args.target.unwrap_or(Target::Sm90a);
    // A target's usual SM count: a small positive constant.
    let sms = u32::try_from(target.desc().sm_count).unwrap_or(1).max(1);
    let planned = plan_and_compile(file, parsed, args.defines, target, sms, args.top)?;
    let ready_count = planned.candidates.iter().filter(|c| c.ptx.is_ok()).count();
    let shape = gemm
        .shape()
        .map_or(String::new(), |s| format!(" (shape {s})"));
    let mut out = format!(
        "dry run: tune `{}` at {dims_text}{shape} as {} on {sms} SMs: {}; {} configs, {} \
         planned and compiled, {ready_count} would be timed\n",
        parsed.name.name,
        target.name(),
        gemm.check_text(),
        planned.total,
        planned.candidates.len(),
    );
    out += &format!("{:>4}  {:<64} result\n", "plan", "config");
    let mut dropped = planned.dropped.clone();
    for c in &planned.candidates {
        match &c.ptx {
            Ok(ptx) => {
                out += &format!(
                    "{:>4}  {:<64} ok ({} lines of PTX)\n",
                    c.rank,
                    describe(&c.config),
                    ptx.lines().count()
                )
            }
            Err(reason) => dropped.push((describe(&c.config), reason.clone())),
        }
    }
    if args.json {
        let ready: Vec<serde_json::Value> = planned
            .candidates
            .iter()
            .filter_map(|c| {
                let ptx = c.ptx.as_ref().ok()?;
                let config: serde_json::Map<String, serde_json::Value> = c
                    .config
                    .iter()
                    .map(|(n, v)| (n.clone(), serde_json::Value::from(*v)))
                    .collect();
                Some(serde_json::json!({
                    "plan_rank": c.rank,
                    "config": config,
                    "ptx_lines": ptx.lines().count(),
                }))
            })
            .collect();
        let dropped: Vec<serde_json::Value> = dropped
            .iter()
            .map(|(c, why)| serde_json::json!({"config": c, "reason": why}))
            .collect();
        let v = serde_json::json!({
            "dry_run": true,
            "kernel": parsed.name.name,
            "dims": dims_text,
            "target": target.name(),
            "sms": sms,
            "check": gemm.check_text(),
            "configs": planned.total,
            "ready": ready,
            "dropped": dropped,
            "notes": planned.notes,
        });
        return Ok((format!("{v}\n"), ready_count));
    }
    out += &dropped_text(&dropped);
    for n in &planned.notes {
        out += &format!("{n}\n");
    }
    Ok((out, ready_count))
}

/// The dropped configs, each with the first line of its reason.
fn dropped_text(dropped: &[(String, String)]) -> String {
    if dropped.is_empty() {
        return String::new();
    }
    let mut out = format!("dropped ({}):\n", dropped.len());
    for (config, reason) in dropped {
        let first = reason.lines().next().unwrap_or("");
        out += &format!("  {config}: {first}\n");
    }
    out
}

/// Checks and times configs of one GEMM on the GPU, as `tlc bench` does for its kind.
enum Timer<'a> {
    /// One set of inputs and one cuBLAS product for every config; cuBLAS timed once.
    F16 {
        inputs: Box<F16Inputs>,
        bench: BenchArgs<'a>,
    },
    /// One set of inputs and one reference for every config; cuBLASLt timed once.
    Fp8 {
        gpu: &'a Gpu,
        inputs: Box<Fp8Inputs>,
        names: Vec<String>,
        peer: Peer,
        warmup: usize,
        iters: usize,
    },
    /// One set of inputs; the default config's results and time as the reference.
    Any {
        gpu: &'a Gpu,
        inputs: Box<AnyInputs>,
        warmup: usize,
        iters: usize,
    },
}

impl<'a> Timer<'a> {
    fn new(
        gpu: &'a Gpu,
        blas: &'a Cublas,
        gemm: Gemm,
        (file, parsed, target, fallback): (&SourceFile, &PrimFunc, Target, Option<&Candidate>),
        args: &'a TuneArgs,
    ) -> Result<Timer<'a>, UserError> {
        Ok(match gemm {
            Gemm::F16 { shape, c_dtype } => {
                let bench = BenchArgs {
                    file: args.file,
                    defines: args.defines,
                    sweep: None,
                    warmup: args.warmup,
                    iters: args.iters,
                    target: args.target,
                    csv: false,
                    specialize: true,
                    seed: args.seed,
                    tuning: Tuning::DEFAULTS,
                };
                let inputs = F16Inputs::prepare(gpu, blas, shape, c_dtype, &bench)?;
                Timer::F16 {
                    inputs: Box::new(inputs),
                    bench,
                }
            }
            Gemm::Fp8 { shape } => {
                let inputs = Fp8Inputs::prepare(gpu, blas, shape, args.seed)?;
                let peer = match CublasLt::new(gpu) {
                    Ok(lt) => {
                        let (warmup, iters) = (args.warmup, args.iters);
                        bench_fp8::time_peer(gpu, blas, Some(&lt), &inputs, warmup, iters)
                    }
                    Err(e) => Peer::NotTimed(format!("no cuBLASLt ({e})")),
                };
                Timer::Fp8 {
                    gpu,
                    inputs: Box::new(inputs),
                    names: parsed.params.iter().map(|p| p.name.name.clone()).collect(),
                    peer,
                    warmup: args.warmup,
                    iters: args.iters,
                }
            }
            Gemm::Any => {
                // The `-D`s bind the dims and fix tunables; the rest take their defaults —
                // or, where that config does not run here, the plan's first that compiled.
                let fallback = fallback.map(|c| c.config.clone());
                let given = tune_any::given_inputs(file, parsed, args.defines, args.inputs)?;
                let inputs = AnyInputs::prepare(
                    gpu,
                    file,
                    parsed,
                    (args.defines, target, fallback.as_ref()),
                    (args.seed, given, args.warmup, args.iters),
                )?;
                Timer::Any {
                    gpu,
                    inputs: Box::new(inputs),
                    warmup: args.warmup,
                    iters: args.iters,
                }
            }
        })
    }

    /// A line about the peer where it was not timed or computed a wrong product.
    fn peer_note(&self) -> Option<String> {
        if let Timer::Any { inputs, .. } = self {
            return Some(format!(
                "the reference, {}: {:.4} ms",
                inputs.reference_text, inputs.default_ms
            ));
        }
        let Timer::Fp8 { inputs, peer, .. } = self else {
            return None;
        };
        match peer {
            Peer::NotTimed(why) => Some(format!("note: cuBLASLt not timed: {why}")),
            Peer::Timed { .. } if !peer.passes() => Some(
                "warning: cuBLASLt's D differs from the float32 GEMM of the raw fp8 values: its \
                 timing is not of this product"
                    .to_string(),
            ),
            Peer::Timed { time, .. } => {
                let GemmShape { m, n, k } = inputs.shape;
                Some(format!(
                    "cuBLASLt FP8 GEMM (per-tensor scales = 1, same FLOPs): {:.4} ms, {:.1} \
                     TFLOP/s",
                    time.median_ms,
                    gemm_tflops(m, n, k, time.median_ms)
                ))
            }
        }
    }

    /// Checks and times one config's loaded kernel.
    fn time<'c>(&mut self, c: &'c Candidate, kernel: &Kernel) -> Result<Timed<'c>, UserError> {
        match self {
            Timer::F16 { inputs, bench } => {
                let row = inputs.check_and_time(kernel, bench)?;
                Ok(Timed {
                    candidate: c,
                    median_ms: row.tlc.median_ms,
                    tflops: Some(row.tlc_tflops()),
                    ratio: Some(row.ratio()),
                    rel_err: bench_fp8::rel_text(&row.err),
                    passes: row.err.passes(),
                    why: None,
                })
            }
            Timer::Fp8 {
                gpu,
                inputs,
                names,
                peer,
                warmup,
                iters,
            } => {
                let names: Vec<&str> = names.iter().map(String::as_str).collect();
                let (err, tlc) =
                    bench_fp8::check_and_time(gpu, kernel, &names, inputs, *warmup, *iters)?;
                let row = bench_fp8::Row {
                    shape: inputs.shape,
                    err,
                    tlc,
                    peer: peer.clone(),
                };
                Ok(Timed {
                    candidate: c,
                    median_ms: tlc.median_ms,
                    tflops: Some(row.tflops(&tlc)),
                    ratio: row.ratio(),
                    rel_err: bench_fp8::rel_text(&err),
                    passes: row.passes(),
                    why: None,
                })
            }
            Timer::Any {
                gpu,
                inputs,
                warmup,
                iters,
            } => {
                let (ms, compared) = inputs
                    .check_and_time(gpu, kernel, *warmup, *iters)
                    .map_err(|e| UserError::plain(format!("{}: {e}", describe(&c.config))))?;
                let passes = compared.first_bad.is_none();
                Ok(Timed {
                    candidate: c,
                    median_ms: ms,
                    tflops: None,
                    ratio: Some(f64::from(inputs.default_ms) / f64::from(ms)),
                    rel_err: format!("{:.2e}", compared.max_rel),
                    passes,
                    why: compared.first_bad,
                })
            }
        }
    }
}

/// Binds `config` and the dims, checks the kernel as every command does, and compiles it.
fn compile_config(
    file: &tlc::diagnostics::SourceFile,
    parsed: &tlc_ir::PrimFunc,
    config: &Config,
    dims: &Config,
    target: Target,
    sms: u32,
) -> Result<String, String> {
    let defines: Vec<String> = config
        .iter()
        .chain(dims)
        .map(|(n, v)| format!("{n}={v}"))
        .collect();
    let first_line = |e: UserError| e.0.lines().next().unwrap_or("").to_string();
    let (func, _) =
        tunables::prepare(file, parsed, &defines, &Tuning::DEFAULTS).map_err(first_line)?;
    let cx = PassContext::new(target).with_sms(i64::from(sms));
    let compiled = compile_func(
        file,
        func,
        cx,
        &Instrumentation::default(),
        Emit::Ptx,
        &mut std::io::sink(),
    )
    .map_err(first_line)?;
    Ok(compiled.text().to_string())
}

/// ptxas: `TLC_PTXAS`, else on `PATH`, else the CUDA toolkit's default place.
fn find_ptxas() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("TLC_PTXAS") {
        return Some(PathBuf::from(p));
    }
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("ptxas"))
            .find(|p| p.is_file())
    });
    on_path.or_else(|| {
        let p = PathBuf::from("/usr/local/cuda/bin/ptxas");
        p.is_file().then_some(p)
    })
}

/// Assembles `ptx` into a cubin; the reason a config is dropped when ptxas fails, spills,
/// or uses more than 255 registers (its `-v` report).
fn assemble(ptxas: &Path, ptx: &str, target: Target) -> Result<Vec<u8>, String> {
    let dir = tempfile::tempdir().map_err(|e| format!("ptxas: no temporary directory: {e}"))?;
    let input = dir.path().join("k.ptx");
    std::fs::write(&input, ptx).map_err(|e| format!("ptxas: {e}"))?;
    let out = std::process::Command::new(ptxas)
        .arg(format!("-arch={}", target.name()))
        .arg("-v")
        .arg(&input)
        .arg("-o")
        .arg(dir.path().join("k.cubin"))
        .output()
        .map_err(|e| format!("cannot run {}: {e}", ptxas.display()))?;
    let log = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(format!(
            "ptxas failed: {}",
            log.lines().next().unwrap_or("")
        ));
    }
    for line in log.lines() {
        if let Some(n) = number_before(line, " bytes spill stores") {
            if n > 0 {
                return Err(format!("ptxas: {n} bytes of spill stores"));
            }
        }
        if let Some(n) = number_before(line, " registers") {
            if n > 255 {
                return Err(format!("ptxas: {n} registers"));
            }
        }
    }
    std::fs::read(dir.path().join("k.cubin")).map_err(|e| format!("ptxas wrote no cubin: {e}"))
}

/// The integer just before `suffix` in `line` (`"Used 168 registers"` → 168).
fn number_before(line: &str, suffix: &str) -> Option<u64> {
    let at = line.find(suffix)?;
    line[..at].split_whitespace().last()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::{number_before, Gemm, GemmShape};
    use tlc::diagnostics::SourceFile;
    use tlc::frontend;
    use tlc_ir::DType;

    /// `Gemm::of` for `text` with `-D` `dims`.
    fn gemm_of(text: &str, dims: &[&str]) -> Result<Gemm, String> {
        let file = SourceFile::new("k.tir", text.to_string());
        let parsed = frontend::parse(&file).map_err(|e| e.0)?;
        let dims: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
        let defines = frontend::split_defines(&parsed, &dims).map_err(|e| e.0)?;
        Gemm::of(&file, &parsed, &defines.dims)
            .map(|(g, _)| g)
            .map_err(|e| e.0)
    }

    const FP8: &str = r#"M = T.symbolic("M")
N = T.symbolic("N")
K = T.symbolic("K")
block_N = T.tunable([128, 64], default=128)

@T.prim_func
def g(
    A: T.Tensor((M, K), "float8_e4m3"),
    B: T.Tensor((N, K), "float8_e4m3"),
    C: T.Tensor((M, N), "bfloat16"),
    scales_a: T.Tensor((M, T.ceildiv(K, 128)), "float32"),
    scales_b: T.Tensor((T.ceildiv(N, 128), T.ceildiv(K, 128)), "float32"),
):
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, 128), threads=128) as (bx, by):
        for i in T.serial(1):
            C[by, bx] = T.cast(scales_a[by, 0], "bfloat16")
"#;

    #[test]
    fn the_signature_decides_the_check() {
        let shape = GemmShape {
            m: 128,
            n: 2112,
            k: 7168,
        };
        let dims = ["M=128", "N=2112", "K=7168"];
        assert_eq!(gemm_of(FP8, &dims), Ok(Gemm::Fp8 { shape }));
        // The same signature in float16 with three matrices is cuBLAS's kind.
        let f16 = r#"M = T.symbolic("M")
N = T.symbolic("N")
K = T.symbolic("K")

@T.prim_func
def h(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
    with T.Kernel(1, 1, threads=128) as (bx, by):
        for i in T.serial(1):
            C[0, 0] = T.cast(A[0, 0], "float32")
"#;
        let c_dtype = DType::Float32;
        assert_eq!(gemm_of(f16, &dims), Ok(Gemm::F16 { shape, c_dtype }));
        // An unbound dim: located at the operand whose shape it leaves open.
        let e = gemm_of(FP8, &["M=128", "N=2112"]).unwrap_err();
        assert!(e.starts_with("k.tir:8:"), "{e}");
        assert!(e.contains("the shape of `A` is not constant"), "{e}");
        // A float8 kernel that is not the block-scaled GEMM is refused as one, located.
        let e5m2 = FP8.replacen(
            "B: T.Tensor((N, K), \"float8_e4m3\")",
            "B: T.Tensor((N, K), \"float8_e5m2\")",
            1,
        );
        let e = gemm_of(&e5m2, &dims).unwrap_err();
        assert!(e.starts_with("k.tir:9:5: error: "), "{e}");
        assert!(e.contains("parameter 2 (`B`)"), "{e}");
        // A float8 kernel of another arity (a cast) is any kernel.
        let cast = r#"M = T.symbolic("M")
block = T.tunable([64, 128], default=64)

@T.prim_func
def cast(X: T.Tensor((M,), "float16"), Y: T.Tensor((M,), "float8_e4m3")):
    with T.Kernel(T.ceildiv(M, block), threads=block) as bx:
        for i in T.Parallel(block):
            Y[T.min(bx * block + i, M - 1)] = T.cast(X[T.min(bx * block + i, M - 1)], "float8_e4m3")
"#;
        assert_eq!(gemm_of(cast, &["M=1000"]), Ok(Gemm::Any));
        // Named like a GEMM but not one: any kernel, with a note saying why.
        let not_gemm = f16.replace("B: T.Tensor((K, N)", "B: T.Tensor((N, K)");
        let file = SourceFile::new("k.tir", not_gemm.clone());
        let parsed = frontend::parse(&file).expect("parses");
        let dims: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
        let defines = frontend::split_defines(&parsed, &dims).expect("dims");
        let (kind, note) = Gemm::of(&file, &parsed, &defines.dims).expect("classified");
        assert_eq!(kind, Gemm::Any);
        assert!(
            note.as_deref().is_some_and(|n| n.starts_with(
                "note: checked against its default config, not against cuBLAS: k.tir:"
            )),
            "{note:?}"
        );
    }

    #[test]
    fn reads_ptxas_reports() {
        let regs = "ptxas info    : Used 168 registers, used 1 barriers, 64 bytes cmem[0]";
        assert_eq!(number_before(regs, " registers"), Some(168));
        let spill = "    0 bytes stack frame, 24 bytes spill stores, 24 bytes spill loads";
        assert_eq!(number_before(spill, " bytes spill stores"), Some(24));
        assert_eq!(number_before("no numbers here", " registers"), None);
    }
}
