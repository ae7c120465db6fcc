//! `tlc compile FILE -o OUT.ptx`: source → verified IR → the target's default pass pipeline
//! → PTX with the launch manifest on its first line (`docs/manifest.md`).
//!
//! The same road serves `tlc run --device` (which compiles in memory) and the compile-latency
//! benchmark (`compiler/benches/compile_latency.rs`): [`compile_func`] is the one
//! implementation, [`source_to_ptx`] its instrumentation-free front.

use crate::cli::{Emit, InstrumentFlags};
use crate::codegen;
use crate::diagnostics::SourceFile;
use crate::frontend::{self, Tuning, UserError};
use crate::ptx::print_with_manifest;
use std::io::Write;
use std::path::{Path, PathBuf};
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
    let (file, func, info) = frontend::load(args.file, args.defines, &args.tuning)?;
    let mut cx = PassContext::new(args.target).with_info(info);
    if let Some(sms) = args.sms {
        cx = cx.with_sms(sms);
    }
    let mut stderr = std::io::stderr().lock();
    let compiled = compile_func(&file, func, cx, &opts, args.emit, &mut stderr)?;
    if args.output == Path::new("-") {
        return Ok(compiled.text().to_string());
    }
    std::fs::write(args.output, compiled.text())
        .map_err(|e| UserError::plain(format!("cannot write {}: {e}", args.output.display())))?;
    Ok(String::new())
}

/// Source text → PTX text with the default pipeline and no instrumentation (the verifier
/// still runs after every pass, as in `tlc compile`). What the compile-latency benchmark
/// times.
pub fn source_to_ptx(name: &str, text: &str, target: Target) -> Result<String, UserError> {
    let file = SourceFile::new(name, text);
    let func = frontend::parse(&file)?;
    let info = frontend::verify(&file, &func)?;
    let compiled = compile_func(
        &file,
        func,
        PassContext::new(target).with_info(info),
        &Instrumentation::default(),
        Emit::Ptx,
        &mut std::io::sink(),
    )?;
    Ok(compiled.text().to_string())
}

/// What the whole road does with one source text: the oracle of the pipeline fuzz target
/// (`fuzz/fuzz_targets/compile.rs`) and of the mutation test over the examples and cases
/// (`tests/tests/pipeline_mutations.rs`). **What `check` accepts, `compile` compiles or
/// refuses with located errors**: a pass whose output fails the verifier, or an error with
/// no source location, is a compiler bug.
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

/// Runs `text` through parse, verify, the default pipeline of `target` (verifying after
/// every pass) and code generation; see [`Verdict`].
pub fn verdict(text: &str, target: Target) -> Verdict {
    let Ok(func) = tlc_ir::parse(text) else {
        return Verdict::Invalid;
    };
    let Ok(info) = tlc_ir::verifier::verify(&func) else {
        return Verdict::Invalid;
    };
    let refused = |diags: Vec<tlc_ir::Diagnostic>, by: &str| match diags
        .iter()
        .find(|d| d.span.is_dummy())
    {
        Some(d) => Verdict::CompilerBug(format!("{by}: an error with no location: {}", d.message)),
        None => Verdict::Refused(diags),
    };
    let manager = match PassManager::new(default_pipeline(target), Instrumentation::default()) {
        Ok(m) => m,
        Err(e) => return Verdict::CompilerBug(e.to_string()),
    };
    let mut cx = PassContext::new(target).with_info(info);
    let func = match manager.run(func, &mut cx, &mut std::io::sink()) {
        Ok(f) => f,
        Err(PipelineError::PassFailed { pass, diagnostics }) => {
            return refused(diagnostics, &format!("pass `{pass}`"))
        }
        Err(PipelineError::TargetRules { diagnostics, .. }) => {
            return refused(diagnostics, "the target's rules")
        }
        Err(e) => return Verdict::CompilerBug(e.to_string()),
    };
    match codegen::emit(&func, target) {
        Ok(_) => Verdict::Compiled,
        Err(diags) => refused(diags, "code generation"),
    }
}

/// A verified function → the default pipeline of the context's target → codegen → text.
/// IR prints and the timing table go to `log`; dumps to `opts.dump_dir` (the PTX as the last
/// numbered stage).
pub fn compile_func(
    file: &SourceFile,
    func: PrimFunc,
    mut cx: PassContext,
    opts: &Instrumentation,
    emit: Emit,
    log: &mut dyn Write,
) -> Result<Compiled, UserError> {
    let target = cx.target();
    let pipeline = default_pipeline(target);
    let stages = pipeline.len();
    let manager = PassManager::new(pipeline, opts.clone()).map_err(UserError::plain)?;
    let (func, mut timings) = manager
        .run_timed(func, &mut cx, log)
        .map_err(|e| pipeline_error(file, e))?;
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
        let (module, manifest) = emitted.map_err(|diags| {
            let note = format!("reported by code generation for {}", target.name());
            UserError(file.render_all(&with_note(diags, &note)))
        })?;
        let start = Instant::now();
        let text = print_with_manifest(&module, &manifest);
        rows.push(timing("print-ptx", start.elapsed()));
        if let Some(dir) = &opts.dump_dir {
            let path = dir.join(format!("{:02}-ptx.ptx", stages + 1));
            write_dump(&path, &text)?;
        }
        Compiled::Ptx { text, manifest }
    };
    if opts.time_passes {
        let _ = log.write_all(timings.table().as_bytes());
    }
    Ok(compiled)
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

fn write_dump(path: &PathBuf, text: &str) -> Result<(), UserError> {
    std::fs::write(path, text)
        .map_err(|e| UserError::plain(format!("cannot write {}: {e}", path.display())))
}
