//! The `tlc` binary: parses the command line, runs one command, prints its output or its
//! rendered errors, and exits 0 on success and 1 on any user error.

use clap::Parser;
use std::io::Write;
use std::process::ExitCode;
use tlc::frontend::UserError;
use tlc_tools::cli::{Baseline, Cli, Command};
use tlc_tools::commands;
use tlc_tools::tunables::TuneTarget;

/// Expression trees are many small boxes, which mimalloc's size-class free lists serve
/// faster than glibc's malloc: compiles take 0.55–0.7 of the time (docs/perf.md, "Compile
/// time: the allocator").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Kernel texts are small, but the recursive stages (printer, verifier, interpreter) must
/// never overflow on the deepest input the parser admits; give them a roomy stack.
const STACK_BYTES: usize = 256 << 20;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let worker = std::thread::Builder::new()
        .stack_size(STACK_BYTES)
        .spawn(move || dispatch(cli));
    let result = match worker {
        Ok(handle) => match handle.join() {
            Ok(result) => result,
            Err(panic) => std::panic::resume_unwind(panic),
        },
        Err(e) => Err(UserError::plain(format!(
            "cannot start the compiler thread: {e}"
        ))),
    };
    match result {
        Ok(stdout) => {
            let mut out = std::io::stdout().lock();
            // A closed pipe (`tlc fmt x | head`) is not an error of ours.
            let _ = out.write_all(stdout.as_bytes());
            ExitCode::SUCCESS
        }
        Err(UserError(text)) => {
            let _ = std::io::stderr().lock().write_all(text.as_bytes());
            ExitCode::from(1)
        }
    }
}

fn dispatch(cli: Cli) -> Result<String, UserError> {
    match cli.command {
        Command::Fmt { file, define } => commands::fmt::run(&file, &define),
        Command::Check {
            file,
            define,
            verbose,
        } => commands::check::run(&file, &define, verbose).map(|()| String::new()),
        Command::Compile {
            file,
            output,
            target,
            define,
            emit,
            sms,
            instrument,
            tuning,
        } => {
            let target = tlc::driver::parse_target(&target)?;
            commands::compile::run(&commands::compile::CompileArgs {
                file: &file,
                output: &output,
                target,
                defines: &define,
                emit: emit.into(),
                sms,
                instrument: &instrument,
                tuning: tuning.tuning(TuneTarget::Given(target)),
            })
        }
        Command::Run {
            file,
            interp: _,
            device,
            target,
            seed,
            inputs,
            save_dir,
            define,
            tuning,
            atol,
            rtol,
        } => {
            let target = target
                .as_deref()
                .map(tlc::driver::parse_target)
                .transpose()?;
            // `--interp` compiles for no target: no cache lookup.
            let tune_target = match (device, target) {
                (false, _) => TuneTarget::None,
                (true, Some(t)) => TuneTarget::Given(t),
                (true, None) => TuneTarget::OfGpu,
            };
            let widen = (atol.is_some() || rtol.is_some())
                .then(|| (atol.unwrap_or(0.0), rtol.unwrap_or(0.0)));
            let args = commands::run::RunArgs {
                widen,
                file: &file,
                defines: &define,
                inputs: &inputs,
                seed,
                save_dir: save_dir.as_deref(),
                tuning: tuning.tuning(tune_target),
            };
            if device {
                commands::run_device::run(&args, target)
            } else {
                commands::run::run(&args)
            }
        }
        Command::Opt {
            file,
            define,
            passes,
            target,
            sms,
            instrument,
            tuning,
        } => {
            let target = tlc::driver::parse_target(&target)?;
            commands::opt::run(
                &file,
                &define,
                &passes,
                (target, sms),
                &instrument,
                &tuning.tuning(TuneTarget::Given(target)),
            )
        }
        Command::Passes { target } => {
            let target = target
                .as_deref()
                .map(tlc::driver::parse_target)
                .transpose()?;
            Ok(commands::passes::run(target))
        }
        Command::Plan(args) => commands::plan::run(&args),
        Command::Tune {
            file,
            define,
            shapes,
            top,
            warmup,
            iters,
            target,
            seed,
            inputs,
            no_cache,
            dry_run,
            json,
        } => {
            let target = target
                .as_deref()
                .map(tlc::driver::parse_target)
                .transpose()?;
            if iters == 0 || top == Some(0) {
                return Err(UserError::plain("`--iters` and `--top` must be at least 1"));
            }
            // Each shape is tuned on its own, its table printed as soon as it is done.
            let shapes = commands::tune::shapes(&file, &define, shapes.as_deref())?;
            commands::tune::check_inputs(&file, &shapes, &inputs)?;
            let several = shapes.len() > 1;
            let mut none_passed = Vec::new();
            for (i, defines) in shapes.iter().enumerate() {
                let (table, passed) = commands::tune::run(&commands::tune::TuneArgs {
                    file: &file,
                    source: None,
                    defines,
                    target,
                    top,
                    warmup,
                    iters,
                    seed,
                    inputs: &inputs,
                    store: !no_cache,
                    dry_run,
                    json,
                })
                .map_err(|e| match several {
                    true => UserError(format!(
                        "{}note: while tuning shape {}\n",
                        e.0,
                        defines.join(" ")
                    )),
                    false => e,
                })?;
                let mut out = std::io::stdout().lock();
                // Tables are separated by a blank line; JSON is one line per shape.
                if several && i > 0 && !json {
                    let _ = out.write_all(b"\n");
                }
                let _ = out.write_all(table.as_bytes());
                let _ = out.flush();
                if !passed {
                    none_passed.push(defines.join(" "));
                }
            }
            match (none_passed.is_empty(), dry_run) {
                (true, _) => Ok(String::new()),
                (false, true) => Err(UserError::plain(format!(
                    "no config compiled at {}: nothing would be timed",
                    none_passed.join("; ")
                ))),
                (false, false) => Err(UserError::plain(format!(
                    "no config passed the check at {}: nothing was stored",
                    none_passed.join("; ")
                ))),
            }
        }
        Command::Bench {
            file,
            define,
            baseline,
            sweep,
            shapes,
            specialize,
            warmup,
            iters,
            target,
            csv,
            seed,
            tuning,
        } => {
            let target = target
                .as_deref()
                .map(tlc::driver::parse_target)
                .transpose()?;
            let tuning = tuning.tuning(target.map_or(TuneTarget::OfGpu, TuneTarget::Given));
            match baseline {
                Baseline::Cublas => {
                    if shapes.is_some() {
                        return Err(commands::bench_copy::shapes_need_copy());
                    }
                    commands::bench::run(&commands::bench::BenchArgs {
                        file: &file,
                        defines: &define,
                        sweep: sweep.as_deref(),
                        warmup,
                        iters,
                        target,
                        csv,
                        specialize,
                        seed,
                        tuning,
                    })
                }
                Baseline::Copy => commands::bench_copy::run(&commands::bench_copy::CopyArgs {
                    file: &file,
                    defines: &define,
                    shapes: shapes.as_deref(),
                    sweep: sweep.as_deref(),
                    specialize,
                    warmup,
                    iters,
                    target,
                    csv,
                    seed,
                    tuning,
                }),
            }
        }
    }
}
