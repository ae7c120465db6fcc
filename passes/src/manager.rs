//! The pass manager: runs a pipeline over a `PrimFunc` with the instrumentation of
//! `Instrumentation` — IR printing before/after passes, numbered dumps, `stop-after`, a
//! timing table — and, unless turned off, the verifier after every pass (with the limits of
//! the context's target). A pass that breaks the IR is named in the error, with the
//! verifier's complaints and the paths of the IR it was given and the IR it produced. The
//! verifier's facts (`FuncInfo`) are handed to the next pass through the `PassContext`.
//! Before a pass runs, its input is checked at the level the pass requires
//! (`Pass::requires`): pipeline order is enforced here and nowhere else.

use crate::context::PassContext;
use crate::instrument::Instrumentation;
use crate::pipeline::{resolve, Pipeline, UnknownPass};
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tlc_ir::printer::print_func;
use tlc_ir::verifier::{check_level, verify_with, Level, Requirements};
use tlc_ir::{Diagnostic, PrimFunc, Target};

/// Why a pipeline did not finish.
#[derive(Debug)]
pub enum PipelineError {
    /// An instrumentation flag names a pass that does not exist.
    UnknownPass {
        flag: &'static str,
        error: UnknownPass,
    },
    /// `--stop-after` names a pass that the pipeline does not run.
    NotInPipeline { pass: String, pipeline: Vec<String> },
    /// A pass was given IR below the level it requires (an earlier pass is missing).
    NotAtLevel {
        pass: &'static str,
        level: Level,
        diagnostics: Vec<Diagnostic>,
    },
    /// The input breaks a rule of the target (an intrinsic the target lacks, such as TMA
    /// on sm_80): checked before the first pass, so no pass is blamed for it.
    TargetRules {
        target: Target,
        diagnostics: Vec<Diagnostic>,
    },
    /// A pass reported errors about its input.
    PassFailed {
        pass: &'static str,
        diagnostics: Vec<Diagnostic>,
    },
    /// A pass produced IR that the verifier rejects.
    BrokeIr {
        pass: &'static str,
        diagnostics: Vec<Diagnostic>,
        /// Where the IR the pass was given is written (`None` if that write failed).
        given: Option<PathBuf>,
        /// Where the IR the pass produced is written.
        produced: Option<PathBuf>,
    },
    /// A dump could not be written.
    Io { path: PathBuf, error: String },
}

impl fmt::Display for PipelineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PipelineError::UnknownPass { flag, error } => write!(f, "`{flag}`: {error}"),
            PipelineError::NotInPipeline { pass, pipeline } => write!(
                f,
                "`--stop-after={pass}`: the pipeline does not run `{pass}` (it runs: {})",
                if pipeline.is_empty() {
                    "nothing".to_string()
                } else {
                    pipeline.join(", ")
                }
            ),
            PipelineError::NotAtLevel {
                pass,
                level,
                diagnostics,
            } => {
                write!(f, "pass `{pass}` needs {level} IR")?;
                for d in diagnostics {
                    write!(f, "\n  {}", d.message)?;
                }
                Ok(())
            }
            PipelineError::TargetRules {
                target,
                diagnostics,
            } => {
                write!(f, "the input does not compile for {target}")?;
                for d in diagnostics {
                    write!(f, "\n  {}", d.message)?;
                }
                Ok(())
            }
            PipelineError::PassFailed { pass, diagnostics } => {
                write!(f, "pass `{pass}` failed")?;
                for d in diagnostics {
                    write!(f, "\n  {}", d.message)?;
                }
                Ok(())
            }
            PipelineError::BrokeIr {
                pass,
                diagnostics,
                given,
                produced,
            } => {
                let n = diagnostics.len();
                let s = if n == 1 { "" } else { "s" };
                write!(
                    f,
                    "pass `{pass}` produced invalid IR ({n} verifier error{s}):"
                )?;
                for d in diagnostics {
                    write!(f, "\n  - {}", d.message)?;
                    for note in &d.notes {
                        write!(f, "\n    note: {}", note.message)?;
                    }
                }
                if let Some(p) = given {
                    write!(f, "\nthe IR `{pass}` was given is in {}", p.display())?;
                }
                if let Some(p) = produced {
                    write!(f, "\nthe IR `{pass}` produced is in {}", p.display())?;
                }
                Ok(())
            }
            PipelineError::Io { path, error } => {
                write!(f, "cannot write {}: {error}", path.display())
            }
        }
    }
}

impl std::error::Error for PipelineError {}

/// A pipeline with its instrumentation, checked and ready to run.
#[derive(Debug)]
pub struct PassManager {
    pipeline: Pipeline,
    opts: Instrumentation,
}

/// The time one pass took, for `--time-passes`.
#[derive(Clone, Debug)]
pub struct PassTiming {
    pub pass: &'static str,
    pub elapsed: Duration,
}

impl PassManager {
    /// Checks that every pass named by the options exists and that `stop_after` is in the
    /// pipeline.
    pub fn new(pipeline: Pipeline, opts: Instrumentation) -> Result<PassManager, PipelineError> {
        for (flag, name) in opts.named_passes() {
            // A pass of this pipeline (which may hold passes from outside the registry), or
            // any registered pass.
            if !pipeline.iter().any(|p| p.name() == name) {
                resolve(name).map_err(|error| PipelineError::UnknownPass { flag, error })?;
            }
        }
        if let Some(stop) = &opts.stop_after {
            if !pipeline.iter().any(|p| p.name() == stop) {
                return Err(PipelineError::NotInPipeline {
                    pass: stop.clone(),
                    pipeline: pipeline.iter().map(|p| p.name().to_string()).collect(),
                });
            }
        }
        Ok(PassManager { pipeline, opts })
    }

    pub fn pipeline(&self) -> &Pipeline {
        &self.pipeline
    }

    /// Runs the pipeline on `func` (which should verify) in context `cx`, which holds the
    /// facts of the result afterwards. IR prints and the timing table go to `log` (the CLI
    /// passes stderr); a failed write to `log` is ignored.
    pub fn run(
        &self,
        func: PrimFunc,
        cx: &mut PassContext,
        log: &mut dyn Write,
    ) -> Result<PrimFunc, PipelineError> {
        let (func, timings) = self.run_timed(func, cx, log)?;
        if self.opts.time_passes {
            let _ = log.write_all(timings.table().as_bytes());
        }
        Ok(func)
    }

    /// Like [`PassManager::run`], but hands the timings back instead of printing them, so a
    /// driver that does more work after the pipeline (code generation) can report one table.
    pub fn run_timed(
        &self,
        func: PrimFunc,
        cx: &mut PassContext,
        log: &mut dyn Write,
    ) -> Result<(PrimFunc, Timings), PipelineError> {
        let requirements = Requirements {
            target: Some(cx.target()),
            level: Level::Tile,
        };
        // The input verified without a target (`tlc check`); the target's rules are checked
        // here, once, so that a pass is never blamed for what its input asked of the target.
        if let Err(diagnostics) = verify_with(&func, &requirements) {
            return Err(PipelineError::TargetRules {
                target: cx.target(),
                diagnostics,
            });
        }
        let opts = &self.opts;
        if let Some(dir) = &opts.dump_dir {
            std::fs::create_dir_all(dir).map_err(|e| io_error(dir, e))?;
            write_file(&dir.join("00-input.tir"), &print_func(&func))?;
        }
        let mut timings: Vec<PassTiming> = Vec::new();
        let mut verify_time = Duration::ZERO;
        let mut func = func;
        // The printed text of `func`, kept only when change detection needs it.
        let mut text: Option<String> = None;
        for (index, pass) in self.pipeline.iter().enumerate() {
            let name = pass.name();
            let stage = index + 1;
            if opts.print_before(name) {
                banner(log, "before", name, &print_func(&func));
            }
            if opts.print_ir_after_change && text.is_none() {
                text = Some(print_func(&func));
            }
            let level = pass.requires();
            let unready = check_level(&func, level);
            if !unready.is_empty() {
                return Err(PipelineError::NotAtLevel {
                    pass: name,
                    level,
                    diagnostics: unready,
                });
            }
            // Kept only to dump it if the pass breaks the IR.
            let input = opts.verify_each.then(|| func.clone());
            let start = Instant::now();
            let result = pass.run(func, cx);
            timings.push(PassTiming {
                pass: name,
                elapsed: start.elapsed(),
            });
            func = result.map_err(|diagnostics| PipelineError::PassFailed {
                pass: name,
                diagnostics,
            })?;
            if let Some(input) = input {
                let start = Instant::now();
                let verdict = verify_with(&func, &requirements);
                verify_time += start.elapsed();
                match verdict {
                    Ok(info) => cx.set_info(Some(info)),
                    Err(diagnostics) => {
                        return Err(self.broke_ir(stage, name, &input, &func, diagnostics))
                    }
                }
            } else if !pass.preserves_declarations() {
                cx.set_info(None);
            }
            let printed =
                (opts.print_after(name) || opts.print_ir_after_change || opts.dump_dir.is_some())
                    .then(|| print_func(&func));
            if let Some(printed) = &printed {
                let changed = text.as_deref() != Some(printed.as_str());
                if opts.print_after(name) || (opts.print_ir_after_change && changed) {
                    banner(log, "after", name, printed);
                }
                if let Some(dir) = &opts.dump_dir {
                    write_file(&dir.join(format!("{stage:02}-{name}.tir")), printed)?;
                }
            }
            text = printed.filter(|_| opts.print_ir_after_change);
            if opts.stop_after.as_deref() == Some(name) {
                break;
            }
        }
        let timings = Timings {
            passes: timings,
            verify: opts.verify_each.then_some(verify_time),
        };
        Ok((func, timings))
    }

    /// Dumps the IR around a pass that broke it and builds the error.
    fn broke_ir(
        &self,
        stage: usize,
        pass: &'static str,
        given: &PrimFunc,
        produced: &PrimFunc,
        diagnostics: Vec<Diagnostic>,
    ) -> PipelineError {
        let dir =
            self.opts.dump_dir.clone().unwrap_or_else(|| {
                std::env::temp_dir().join(format!("tlc-{}", std::process::id()))
            });
        let dump = |suffix: &str, f: &PrimFunc| -> Option<PathBuf> {
            std::fs::create_dir_all(&dir).ok()?;
            let path = dir.join(format!("{stage:02}-{pass}.{suffix}.tir"));
            write_file(&path, &print_func(f)).ok()?;
            Some(path)
        };
        PipelineError::BrokeIr {
            pass,
            diagnostics,
            given: dump("input", given),
            produced: dump("invalid", produced),
        }
    }
}

/// `# -----// IR after simplify //----- #` and the IR: the banner is a comment, so a
/// captured dump parses as it is.
fn banner(log: &mut dyn Write, when: &str, pass: &str, text: &str) {
    let _ = writeln!(log, "# -----// IR {when} {pass} //----- #");
    let _ = log.write_all(text.as_bytes());
    let _ = writeln!(log);
}

/// Where a pipeline run spent its time: each pass, then the verifier (when verify-each ran).
#[derive(Clone, Debug, Default)]
pub struct Timings {
    pub passes: Vec<PassTiming>,
    pub verify: Option<Duration>,
}

impl Timings {
    /// The `--time-passes` report.
    pub fn table(&self) -> String {
        timing_table(&self.passes, self.verify)
    }
}

/// The `--time-passes` report.
pub fn timing_table(timings: &[PassTiming], verify: Option<Duration>) -> String {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let mut total = Duration::ZERO;
    let mut out = String::from("# pass timing (milliseconds)\n");
    for t in timings {
        total += t.elapsed;
        out.push_str(&format!("{:>10.3}  {}\n", ms(t.elapsed), t.pass));
    }
    if let Some(v) = verify {
        total += v;
        out.push_str(&format!("{:>10.3}  (verify-each)\n", ms(v)));
    }
    out.push_str(&format!("{:>10.3}  total\n", ms(total)));
    out
}

fn write_file(path: &Path, text: &str) -> Result<(), PipelineError> {
    std::fs::write(path, text).map_err(|e| io_error(path, e))
}

fn io_error(path: &Path, e: std::io::Error) -> PipelineError {
    PipelineError::Io {
        path: path.to_path_buf(),
        error: e.to_string(),
    }
}
