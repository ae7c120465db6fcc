//! `tlc compile FILE -o OUT.ptx`: the open tunables resolved (`crate::tunables`), then the
//! driver (`tlc::driver`): source → verified IR → the target's default pass pipeline → PTX
//! with the launch manifest on its first line (`docs/manifest.md`).

use crate::cli::InstrumentFlags;
use crate::tunables::{self, Tuning};
use std::path::Path;
use tlc::driver::{compile_parsed, Emit, RoadArgs};
use tlc::frontend::{self, UserError};
use tlc_passes::{default_pipeline, PassContext, PassManager, Target};

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
    let parsed = frontend::parse(&file)?;
    // Every tunable bound before the driver: the `-D` texts plus the open ones' choices.
    let defines = tunables::resolve(&file, &parsed, args.defines, &args.tuning)?;
    let road = RoadArgs {
        defines: &defines,
        target: args.target,
        sms: args.sms,
        opts: &opts,
        emit: args.emit,
    };
    let mut stderr = std::io::stderr().lock();
    let compiled = compile_parsed(&file, &parsed, &road, &mut stderr)
        .map_err(|stop| stop.render(&file, args.target))?
        .compiled;
    if args.output == Path::new("-") {
        return Ok(compiled.text().to_string());
    }
    std::fs::write(args.output, compiled.text())
        .map_err(|e| UserError::plain(format!("cannot write {}: {e}", args.output.display())))?;
    Ok(String::new())
}
