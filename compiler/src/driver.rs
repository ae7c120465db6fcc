//! **The driver: the one road from source text to PTX** (docs/ARCHITECTURE.md). Pure: no
//! disk (except `--dump-dir`, which the caller asks for), no GPU, no tuning cache, no command
//! line. The front end exactly as `tlc check` runs it (parse, bind the `-D` texts with the
//! tunables they leave open at their defaults, verify once, thread-sync's barriers), then
//! the target's default pipeline (whose `thread-sync` then passes its input on), then code
//! generation.
//!
//! Tunables are the caller's to resolve, explicitly, before the driver: `tlc compile` and the
//! other commands (`tlc-tools`) choose the open ones from the tuning cache or the plan and
//! pass every choice as a `-D` text, so what the driver compiles depends on its arguments
//! only. `tlc compile`, the Python package, `bench`, `tune`, `plan`, the compile-latency
//! benchmark ([`source_to_ptx`]) and the mutation campaign's oracle ([`verdict`]) all take
//! [`compile_source`] or, for a kernel they bound themselves, [`compile_func`].

use crate::codegen;
use crate::diagnostics::SourceFile;
use crate::frontend::{self, UserError};
use crate::ptx::print_with_manifest;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};
use tlc_abi::manifest::Manifest;
use tlc_ir::PrimFunc;
use tlc_passes::manager::PassTiming;
use tlc_passes::{
    default_pipeline, Instrumentation, PassContext, PassManager, PipelineError, Target,
};

/// What a compile writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Emit {
    /// PTX text with the launch manifest line.
    #[default]
    Ptx,
    /// The IR text after the pipeline.
    Tir,
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
    /// `-D NAME=VALUE` texts: dims and tunables; a tunable none names takes its default.
    pub defines: &'a [String],
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
/// exactly as `tlc check` runs it (parse, bind the `-D` texts, verify, thread-sync's
/// barriers, verify), then [`compile_func`]'s pipeline and code generation.
pub fn compile_source(
    file: &SourceFile,
    args: &RoadArgs,
    log: &mut dyn Write,
) -> Result<Road, Stop> {
    let parsed = frontend::parse(file).map_err(Stop::Check)?;
    compile_parsed(file, &parsed, args, log)
}

/// [`compile_source`] for a source its caller has parsed already (`tlc compile` reads the
/// tuning space off it to resolve the open tunables).
pub fn compile_parsed(
    file: &SourceFile,
    parsed: &PrimFunc,
    args: &RoadArgs,
    log: &mut dyn Write,
) -> Result<Road, Stop> {
    let (tile, info) = frontend::prepare(file, parsed, args.defines).map_err(Stop::Check)?;
    // `prepare` placed the barriers (`frontend::finish`): the pipeline's `thread-sync` has
    // nothing left to do.
    let mut cx = PassContext::new(args.target)
        .with_info(info)
        .with_barriers_placed();
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
/// Its `thread-sync` places the barriers unless the context says they are placed: a tool
/// may hand over a kernel it bound without the front end.
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
        // The verifier's facts about the pipeline's output: the manager's last verification
        // (verify-each), or one now (`--no-verify-each` after a pass that changed
        // declarations). Output that does not verify is the pipeline's bug, caught here.
        let info = cx.func_info(&func).map_err(Stop::Codegen)?.into_owned();
        let emitted = codegen::emit(&func, &info, target);
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
