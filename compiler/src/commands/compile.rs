//! `tlc compile FILE -o OUT.ptx`: source → verified IR → the target's default pass pipeline
//! → PTX with the launch manifest on its first line (`docs/manifest.md`).
//!
//! [`compile_source`] is the one road from source text: `tlc compile`, [`source_to_ptx`]
//! (the compile-latency benchmark, `compiler/benches/compile_latency.rs`) and [`verdict`]
//! (the mutation campaign's oracle) take it. Commands that bind a kernel themselves
//! (`tlc run --device`, `bench`, `tune`) enter it after the front end, at [`compile_func`].

use crate::cli::{Emit, InstrumentFlags};
use crate::codegen;
use crate::diagnostics::SourceFile;
use crate::frontend::{self, Tuning, UserError};
use crate::ptx::print_with_manifest;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};
use tlc_ir::PrimFunc;
use tlc_passes::manager::PassTiming;
use tlc_passes::{
    default_pipeline, Instrumentation, PassContext, PassManager, PipelineError, Target,
};
use tlc_runtime::manifest::Manifest;

/// What `tlc compile` was asked to do.
pub struct CompileArgs<'a> {
    pub file: &'a Path,
    /// `-` writes to stdout.
    pub output: &'a Path,
    pub target: Target,
    pub defines: &'a [String],
    pub emit: Emit,
    /// `--sms N`: the SM count persistent kernels are sized for.
    pub sms: Option<i64>,
    pub instrument: &'a InstrumentFlags,
    /// How the tunables `-D` leaves open are chosen.
    pub tuning: Tuning,
}

/// The result of a compile: PTX with its manifest, or IR text (`--emit=tir`, or a pipeline
/// stopped by `--stop-after`).
#[derive(Debug)]
pub enum Compiled {
    Ptx { text: String, manifest: Manifest },
    Tir { text: String },
}

impl Compiled {
    pub fn text(&self) -> &str {
        match self {
            Compiled::Ptx { text, .. } | Compiled::Tir { text } => text,
        }
    }
}

/// Parses a `--target` value.
pub fn parse_target(text: &str) -> Result<Target, UserError> {
    Target::parse(text).ok_or_else(|| {
        UserError::plain(format!(
            "`--target {text}`: unknown target (known targets: {})",
            Target::names()
        ))
    })
}

/// The target to compile for on `gpu`: `given` (`--target`), else the newest target that
/// runs on its compute capability (`Target::for_capability`). Used by every command that
/// compiles for the GPU it runs on (`tlc run --device`, `tlc bench`).
pub fn device_target(gpu: &tlc_runtime::Gpu, given: Option<Target>) -> Result<Target, UserError> {
    if let Some(t) = given {
        return Ok(t);
    }
    let (major, minor) = gpu.capability();
    Target::for_capability((major, minor)).ok_or_else(|| {
        UserError::plain(format!(
            "the GPU ({}) has compute capability {major}.{minor}; tlc targets {} (8.0 or later)",
            gpu.name(),
            Target::names()
        ))
    })
}

/// The pass context for compiling to run on `gpu`: persistent kernels sized for its SMs
/// (the target's usual count when the driver does not say).
pub fn device_context(gpu: &tlc_runtime::Gpu, target: Target) -> PassContext {
    let cx = PassContext::new(target);
    match gpu.sm_count() {
        0 => cx,
        sms => cx.with_sms(i64::from(sms)),
    }
}

/// Runs `tlc compile`; returns what goes to stdout (the output itself for `-o -`).
pub fn run(args: &CompileArgs) -> Result<String, UserError> {
    let opts = args.instrument.options();
    // Flag errors (an unknown pass, `--stop-after` outside the pipeline) come before any
    // work on the file, as in `tlc opt`.
    PassManager::new(default_pipeline(args.target), opts.clone()).map_err(UserError::plain)?;
    let file = frontend::read_source(args.file)?;
    let road = RoadArgs {
        defines: args.defines,
        tuning: args.tuning,
        target: args.target,
        sms: args.sms,
        opts: &opts,
        emit: args.emit,
    };
    let mut stderr = std::io::stderr().lock();
    let compiled = compile_source(&file, &road, &mut stderr)
        .map_err(|stop| stop.render(&file, args.target))?
        .compiled;
    if args.output == Path::new("-") {
        return Ok(compiled.text().to_string());
    }
    std::fs::write(args.output, compiled.text())
        .map_err(|e| UserError::plain(format!("cannot write {}: {e}", args.output.display())))?;
    Ok(String::new())
}

/// Source text → PTX text with the default pipeline, the tunables at their defaults and no
/// instrumentation (the verifier still runs after every pass, as in `tlc compile`). What the
/// compile-latency benchmark times.
pub fn source_to_ptx(name: &str, text: &str, target: Target) -> Result<String, UserError> {
    let file = SourceFile::new(name, text);
    let opts = Instrumentation::default();
    let road = RoadArgs::plain(target, &opts);
    match compile_source(&file, &road, &mut std::io::sink()) {
        Ok(r) => Ok(r.compiled.text().to_string()),
        Err(stop) => Err(stop.render(&file, target)),
    }
}

/// What compile's road is asked to do with a source, besides reading it.
pub struct RoadArgs<'a> {
    /// `-D NAME=VALUE` texts.
    pub defines: &'a [String],
    /// How the tunables `-D` leaves open are chosen.
    pub tuning: Tuning,
    pub target: Target,
    /// `--sms N`.
    pub sms: Option<i64>,
    pub opts: &'a Instrumentation,
    pub emit: Emit,
}

impl<'a> RoadArgs<'a> {
    /// No `-D`, the tunables at their defaults (as `tlc check` binds them), PTX.
    pub fn plain(target: Target, opts: &'a Instrumentation) -> RoadArgs<'a> {
        RoadArgs {
            defines: &[],
            tuning: Tuning::DEFAULTS,
            target,
            sms: None,
            opts,
            emit: Emit::Ptx,
        }
    }
}

/// What compile's road made of a source.
#[derive(Debug)]
pub struct Road {
    /// The kernel as the front end hands it to the pipeline (what `tlc check` verified).
    pub tile: PrimFunc,
    /// The kernel after the pipeline: what `--emit=tir` prints.
    pub planned: PrimFunc,
    pub compiled: Compiled,
}

/// Where compile's road stopped.
#[derive(Debug)]
pub enum Stop {
    /// The front end refused the source: `tlc check`'s errors, rendered.
    Check(UserError),
    /// The pass pipeline failed.
    Pipeline(PipelineError),
    /// Code generation refused the pipeline's output.
    Codegen(Vec<tlc_ir::Diagnostic>),
}

impl Stop {
    /// The error as `tlc compile` prints it.
    pub fn render(self, file: &SourceFile, target: Target) -> UserError {
        match self {
            Stop::Check(e) => e,
            Stop::Pipeline(e) => pipeline_error(file, e),
            Stop::Codegen(diags) => {
                let note = format!("reported by code generation for {}", target.name());
                UserError(file.render_all(&with_note(diags, &note)))
            }
        }
    }
}

/// **One source through compile's road**, the one implementation `tlc compile`,
/// [`source_to_ptx`] and [`verdict`] (the mutation campaign's oracle) share: the front end
/// exactly as `tlc check` runs it (parse, bind `-D` and the tunables, verify, thread-sync's
/// barriers, verify), then [`compile_func`]'s pipeline and code generation.
pub fn compile_source(
    file: &SourceFile,
    args: &RoadArgs,
    log: &mut dyn Write,
) -> Result<Road, Stop> {
    let parsed = frontend::parse(file).map_err(Stop::Check)?;
    let (tile, info) =
        frontend::prepare(file, &parsed, args.defines, &args.tuning).map_err(Stop::Check)?;
    let mut cx = PassContext::new(args.target).with_info(info);
    if let Some(sms) = args.sms {
        cx = cx.with_sms(sms);
    }
    let (planned, compiled) = lower(tile.clone(), cx, args.opts, args.emit, log)?;
    Ok(Road {
        tile,
        planned,
        compiled,
    })
}

/// What the whole road does with one source text: the oracle of the pipeline fuzz target
/// (`fuzz/fuzz_targets/compile.rs`) and of the mutation campaign over every case and
/// example (`tlc_tests::mutate`). **What `check` accepts, `compile` compiles or refuses
/// with located errors**: a pass whose output fails the verifier, or an error with no
/// source location, is a compiler bug.
#[derive(Debug)]
pub enum Verdict {
    /// `tlc check` refuses it (parse or verifier errors): not the pipeline's business.
    Invalid,
    Compiled,
    /// Refused by a pass or by code generation, every error at a source location.
    Refused(Vec<tlc_ir::Diagnostic>),
    /// What should never happen, described.
    CompilerBug(String),
}

impl Verdict {
    /// The verdict on what [`compile_source`] returned.
    pub fn of(result: &Result<Road, Stop>) -> Verdict {
        let refused =
            |diags: &[tlc_ir::Diagnostic], by: &str| match diags.iter().find(|d| d.span.is_dummy())
            {
                Some(d) => {
                    Verdict::CompilerBug(format!("{by}: an error with no location: {}", d.message))
                }
                None => Verdict::Refused(diags.to_vec()),
            };
        match result {
            Ok(_) => Verdict::Compiled,
            Err(Stop::Check(_)) => Verdict::Invalid,
            Err(Stop::Pipeline(PipelineError::PassFailed { pass, diagnostics })) => {
                refused(diagnostics, &format!("pass `{pass}`"))
            }
            Err(Stop::Pipeline(PipelineError::TargetRules { diagnostics, .. })) => {
                refused(diagnostics, "the target's rules")
            }
            Err(Stop::Pipeline(e)) => Verdict::CompilerBug(e.to_string()),
            Err(Stop::Codegen(diags)) => refused(diags, "code generation"),
        }
    }
}

/// Runs `text` through [`compile_source`] for `target` (no `-D`, the tunables at their
/// defaults, verifying after every pass) and judges the result; see [`Verdict`].
pub fn verdict(text: &str, target: Target) -> Verdict {
    let file = SourceFile::new("input.tir", text);
    let opts = Instrumentation::default();
    let road = RoadArgs::plain(target, &opts);
    Verdict::of(&compile_source(&file, &road, &mut std::io::sink()))
}

/// A verified function → the default pipeline of the context's target → codegen → text.
/// IR prints and the timing table go to `log`; dumps to `opts.dump_dir` (the PTX as the last
/// numbered stage).
pub fn compile_func(
    file: &SourceFile,
    func: PrimFunc,
    cx: PassContext,
    opts: &Instrumentation,
    emit: Emit,
    log: &mut dyn Write,
) -> Result<Compiled, UserError> {
    let target = cx.target();
    match lower(func, cx, opts, emit, log) {
        Ok((_, compiled)) => Ok(compiled),
        Err(stop) => Err(stop.render(file, target)),
    }
}

/// [`compile_func`] with its errors unrendered and the pipeline's output kept.
fn lower(
    func: PrimFunc,
    mut cx: PassContext,
    opts: &Instrumentation,
    emit: Emit,
    log: &mut dyn Write,
) -> Result<(PrimFunc, Compiled), Stop> {
    let target = cx.target();
    let pipeline = default_pipeline(target);
    let stages = pipeline.len();
    let manager = PassManager::new(pipeline, opts.clone()).map_err(Stop::Pipeline)?;
    let (func, mut timings) = manager
        .run_timed(func, &mut cx, log)
        .map_err(Stop::Pipeline)?;
    let rows = &mut timings.passes;
    let compiled = if emit == Emit::Tir || opts.stop_after.is_some() {
        let start = Instant::now();
        let text = tlc_ir::printer::print_func(&func);
        rows.push(timing("print-tir", start.elapsed()));
        Compiled::Tir { text }
    } else {
        let start = Instant::now();
        let emitted = codegen::emit(&func, target);
        rows.push(timing("codegen", start.elapsed()));
        let (module, manifest) = emitted.map_err(Stop::Codegen)?;
        let start = Instant::now();
        let text = print_with_manifest(&module, &manifest);
        rows.push(timing("print-ptx", start.elapsed()));
        if let Some(dir) = &opts.dump_dir {
            let path = dir.join(format!("{:02}-ptx.ptx", stages + 1));
            write_dump(&path, &text)
                .map_err(|e| Stop::Pipeline(PipelineError::Io { path, error: e }))?;
        }
        Compiled::Ptx { text, manifest }
    };
    if opts.time_passes {
        let _ = log.write_all(timings.table().as_bytes());
    }
    Ok((func, compiled))
}

/// A pipeline failure as the user sees it: a pass's own diagnostics point into the source
/// (located first, as every tlc error), each noting the pass that reported it.
pub fn pipeline_error(file: &SourceFile, e: PipelineError) -> UserError {
    match e {
        PipelineError::PassFailed { pass, diagnostics } => {
            let note = format!("reported by pass `{pass}`");
            UserError(file.render_all(&with_note(diagnostics, &note)))
        }
        PipelineError::NotAtLevel {
            pass,
            level,
            diagnostics,
        } => {
            let note = format!("pass `{pass}` needs {level} IR");
            UserError(file.render_all(&with_note(diagnostics, &note)))
        }
        // Each names the target already.
        PipelineError::TargetRules { diagnostics, .. } => UserError(file.render_all(&diagnostics)),
        e => UserError::plain(e),
    }
}

fn with_note(diags: Vec<tlc_ir::Diagnostic>, note: &str) -> Vec<tlc_ir::Diagnostic> {
    diags.into_iter().map(|d| d.with_note(note)).collect()
}

fn timing(pass: &'static str, elapsed: Duration) -> PassTiming {
    PassTiming { pass, elapsed }
}

fn write_dump(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| e.to_string())
}
