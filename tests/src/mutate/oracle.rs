//! [`examine`]: one source through every oracle of the campaign.

use super::differential::{self, Reference, Skip};
use super::{Finding, Oracle};
use std::cell::{Cell, RefCell};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};
use tlc::diagnostics::SourceFile;
use tlc::driver::{compile_source, Road, RoadArgs, Verdict};
use tlc::frontend;
use tlc_ir::{Diagnostic, Target};
use tlc_passes::Instrumentation;
use tlc_tools::commands::fmt;

/// The name mutants are read under (their errors say `mutant.tir:LINE:COL`).
pub const NAME: &str = "mutant.tir";

/// The stages [`Options::progress`] is told of, but `fmt`: compiling for a target (the
/// target follows), interpreting the tile level (and its reversal), interpreting a
/// target's compiled IR (the target follows).
pub const STAGE_COMPILE: &str = "compile";
pub const STAGE_TILE: &str = "tile level";
pub const STAGE_COMPILED: &str = "compiled IR";

/// What to run.
#[derive(Clone, Debug)]
pub struct Options {
    pub targets: Vec<Target>,
    /// Run the differential on kernels under the budget.
    pub differential: bool,
    /// The differential's budget, in [`super::estimate::work`]'s element operations.
    pub max_work: f64,
    /// Told each stage as it starts (`fmt`, `compile sm_80`, `tile level`, `compiled IR
    /// sm_80`, …): a worker process prints them, so the process that kills it at its time
    /// limit knows where it was.
    pub progress: Option<fn(&str)>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            targets: Target::ALL.to_vec(),
            differential: true,
            max_work: 2e6,
            progress: None,
        }
    }
}

/// What the oracles said about one source.
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub findings: Vec<Finding>,
    /// What happened, for the campaign's counts (`check accepted`, `compiled sm_80`,
    /// `differential compared sm_90a`, `differential skipped large`, …).
    pub events: Vec<String>,
    pub elapsed: Duration,
}

impl Report {
    fn event(&mut self, what: impl Into<String>) {
        self.events.push(what.into());
    }

    fn find(&mut self, oracle: Oracle, target: Option<Target>, message: impl Into<String>) {
        self.findings.push(Finding::new(oracle, target, message));
    }
}

/// Runs `text` through every oracle: `fmt` (idempotent, parses back equal), `check`
/// (errors located), `compile` for each target (what check accepts compiles or is refused
/// with located errors), the `--emit=tir` round trip (the compiled IR prints to text that
/// parses back equal and that the front end takes), and the differential. A panic anywhere
/// is a finding of its own, and the stages after it on that road are skipped.
pub fn examine(text: &str, opts: &Options) -> Report {
    let start = Instant::now();
    let mut report = Report::default();
    let file = SourceFile::new(NAME, text);
    let stage = |what: &str| {
        if let Some(tell) = opts.progress {
            tell(what);
        }
    };
    stage("fmt");
    formatting(&file, &mut report);
    let instrument = Instrumentation::default();
    let mut reference: Option<Result<Reference, Skip>> = None;
    for &target in &opts.targets {
        let args = RoadArgs::plain(target, &instrument);
        stage(&format!("{STAGE_COMPILE} {target}"));
        let result = match catch(|| compile_source(&file, &args, &mut std::io::sink())) {
            Ok(r) => r,
            Err(p) => {
                report.find(
                    Oracle::Panic,
                    Some(target),
                    format!("panic in compile: {p}"),
                );
                continue;
            }
        };
        let verdict = Verdict::of(&result);
        match &verdict {
            Verdict::Invalid => {
                if let Err(tlc::driver::Stop::Check(e)) = &result {
                    check_refusal(&file, &e.0, &mut report);
                }
                report.event("check refused");
                // The front end does not depend on the target.
                break;
            }
            Verdict::Compiled => report.event(format!("compiled {target}")),
            Verdict::Refused(diags) => {
                report.event(format!("refused {target}"));
                if let Some(d) = outside(diags, text) {
                    report.find(Oracle::Unlocated, Some(target), d);
                }
            }
            Verdict::CompilerBug(what) => {
                let oracle = match what.contains("an error with no location") {
                    true => Oracle::Unlocated,
                    false => Oracle::Internal,
                };
                report.find(oracle, Some(target), what.clone());
            }
        }
        if target == opts.targets[0] && !matches!(verdict, Verdict::Invalid) {
            report.event("check accepted");
        }
        let Ok(road) = result else { continue };
        round_trip(&road, target, &mut report);
        if !opts.differential {
            continue;
        }
        let reference = reference.get_or_insert_with(|| {
            // FNV-1a: the differential's dims and inputs are a function of the text.
            let pick = tlc_ir::hash::fnv1a(&code(text));
            stage(STAGE_TILE);
            match catch(|| differential::reference(&road.tile, pick, pick >> 32, opts.max_work)) {
                Ok(r) => r,
                Err(p) => {
                    report.find(
                        Oracle::Panic,
                        None,
                        format!("panic in the tile-level interpreter: {p}"),
                    );
                    Err(Skip::Large)
                }
            }
        });
        match reference {
            Err(skip) => {
                report.event(format!("differential skipped {}", skip.name()));
                continue;
            }
            Ok(r) if r.failed() => {
                report.event(format!("differential tile-error {target}"));
                continue;
            }
            Ok(_) => {}
        }
        let Ok(reference) = reference else { continue };
        // The IR code generation translates: what the PTX means.
        stage(&format!("{STAGE_COMPILED} {target}"));
        match catch(|| differential::check(reference, &road.planned, target)) {
            Ok(Some(f)) => report.findings.push(f),
            Ok(None) => report.event(format!("differential compared {target}")),
            Err(p) => report.find(
                Oracle::Panic,
                Some(target),
                format!("panic in the interpreter on the compiled IR: {p}"),
            ),
        }
    }
    dedup_events(&mut report);
    report.elapsed = start.elapsed();
    report
}

/// `tlc fmt`: its output formats to itself and parses to the IR the source parses to;
/// a parse error is located inside the text.
fn formatting(file: &SourceFile, report: &mut Report) {
    let text = file.text.as_str();
    let parsed = match catch(|| tlc_ir::parse(text)) {
        Ok(p) => p,
        Err(p) => return report.find(Oracle::Panic, None, format!("panic in the parser: {p}")),
    };
    let func = match parsed {
        Ok(f) => f,
        Err(diags) => {
            if let Some(d) = outside(&diags, text) {
                report.find(Oracle::Unlocated, None, d);
            }
            return;
        }
    };
    report.event("parsed");
    let once = match catch(|| fmt::format(file, &[])) {
        Ok(Ok(t)) => t,
        Ok(Err(e)) => {
            return report.find(
                Oracle::Fmt,
                None,
                format!("`tlc fmt` refuses what parses: {}", e.0),
            )
        }
        Err(p) => return report.find(Oracle::Panic, None, format!("panic in fmt: {p}")),
    };
    let again = catch(|| {
        let printed = SourceFile::new(NAME, once.as_str());
        (tlc_ir::parse(&once), fmt::format(&printed, &[]))
    });
    let (reparsed, twice) = match again {
        Ok(r) => r,
        Err(p) => return report.find(Oracle::Panic, None, format!("panic in fmt of fmt: {p}")),
    };
    match reparsed {
        Ok(f) if f == func => {}
        Ok(f) => report.find(
            Oracle::Fmt,
            None,
            format!(
                "`tlc fmt`'s output parses to other IR\n{}",
                first_difference(&once, &tlc_ir::printer::print_func(&f))
            ),
        ),
        Err(d) => report.find(
            Oracle::Fmt,
            None,
            format!("`tlc fmt`'s output does not parse: {}", first_message(&d)),
        ),
    }
    match twice {
        Ok(t) if t == once => report.event("fmt idempotent"),
        Ok(t) => report.find(
            Oracle::Fmt,
            None,
            format!(
                "`tlc fmt` is not idempotent\n{}",
                first_difference(&once, &t)
            ),
        ),
        Err(e) => report.find(
            Oracle::Fmt,
            None,
            format!("`tlc fmt` refuses its own output: {}", e.0),
        ),
    }
}

/// `check`'s errors, rendered: each names the file and a line.
fn check_refusal(file: &SourceFile, rendered: &str, report: &mut Report) {
    let prefix = format!("{}:", file.name);
    let unlocated = rendered
        .lines()
        .find(|l| l.starts_with("error:") || (l.contains(": error: ") && !l.starts_with(&prefix)));
    if let Some(line) = unlocated {
        report.find(Oracle::Unlocated, None, format!("`check`: {line}"));
    }
}

/// The first diagnostic whose span is not a place in `text`, described.
fn outside(diags: &[Diagnostic], text: &str) -> Option<String> {
    let bad = diags.iter().find(|d| {
        let s = d.span;
        s.start > s.end
            || s.end > text.len()
            || !text.is_char_boundary(s.start)
            || !text.is_char_boundary(s.end)
    })?;
    Some(format!(
        "an error's span {}..{} is outside the text ({} bytes): {}",
        bad.span.start,
        bad.span.end,
        text.len(),
        bad.message
    ))
}

/// The `--emit=tir` text of the compiled IR parses back equal, and the front end (as `tlc
/// run --interp` reads it) takes it, changed at most by barriers: `--emit=tir` output is
/// valid input for every command, and means what the PTX does.
fn round_trip(road: &Road, target: Target, report: &mut Report) {
    let result = catch(|| {
        let printed = tlc_ir::printer::print_func(&road.planned);
        let file = SourceFile::new("compiled.tir", printed.as_str());
        let parsed = match tlc_ir::parse(&printed) {
            Ok(p) => p,
            Err(d) => {
                return Err(format!(
                    "the --emit=tir text does not parse: {}",
                    first_message(&d)
                ))
            }
        };
        if parsed != road.planned {
            let again = tlc_ir::printer::print_func(&parsed);
            return Err(format!(
                "the --emit=tir text parses to other IR\n{}",
                first_difference(&printed, &again)
            ));
        }
        let read = match frontend::prepare(&file, &parsed, &[]) {
            Ok((read, _)) => read,
            // A known imprecision, counted, not a finding: thread-sync reads hand-written
            // per-thread code, and on the compiled form it cannot see what made the code
            // race-free (a binding to part of the block, now an `if tx < n` guard; unrolled
            // accesses at disjoint constant offsets), so it asks for a barrier under a
            // thread-dependent condition. The PTX is the same either way.
            Err(e) if e.0.contains("would need a `T.sync_threads()` there") => {
                return Ok(Trip::RefusedBySync)
            }
            Err(e) => {
                return Err(format!(
                    "the front end refuses the --emit=tir text: {}",
                    e.0
                ))
            }
        };
        if read == road.planned {
            return Ok(Trip::Same);
        }
        // thread-sync, part of the front end, may add barriers to per-thread code it
        // cannot prove race-free: they only order what the PTX leaves unordered.
        if without_barriers(&read) == without_barriers(&road.planned) {
            return Ok(Trip::AddsBarriers);
        }
        Err(format!(
            "the front end changes the --emit=tir text beyond barriers (`tlc run --interp` would run another kernel than the PTX's)\n{}",
            first_difference(&printed, &tlc_ir::printer::print_func(&read))
        ))
    });
    match result {
        Ok(Ok(trip)) => {
            report.event(format!("round-trip {target}"));
            match trip {
                Trip::Same => {}
                Trip::AddsBarriers => report.event(format!("round-trip adds barriers {target}")),
                Trip::RefusedBySync => {
                    report.event(format!("round-trip refused by thread-sync {target}"))
                }
            }
        }
        Ok(Err(what)) => report.find(Oracle::Roundtrip, Some(target), what),
        Err(p) => report.find(
            Oracle::Panic,
            Some(target),
            format!("panic in the --emit=tir round trip: {p}"),
        ),
    }
}

/// How the front end took the `--emit=tir` text.
enum Trip {
    /// Unchanged.
    Same,
    /// With barriers thread-sync added.
    AddsBarriers,
    /// Refused by thread-sync for want of a barrier under a thread-dependent condition
    /// (see `round_trip`).
    RefusedBySync,
}

/// `func` with every `T.sync_threads()` dropped.
fn without_barriers(func: &tlc_ir::PrimFunc) -> tlc_ir::PrimFunc {
    fn strip(body: &mut Vec<tlc_ir::Stmt>) {
        body.retain(|s| !matches!(s.kind, tlc_ir::StmtKind::Barrier));
        for s in body.iter_mut() {
            for child in tlc_ir::visit::child_bodies_mut(s) {
                strip(child);
            }
        }
    }
    let mut out = func.clone();
    strip(&mut out.body);
    out
}

fn first_message(diags: &[Diagnostic]) -> String {
    diags.first().map_or(String::new(), |d| d.message.clone())
}

/// The first line where `a` and `b` differ, both versions.
fn first_difference(a: &str, b: &str) -> String {
    let mut la = a.lines();
    let mut lb = b.lines();
    for n in 1.. {
        match (la.next(), lb.next()) {
            (None, None) => break,
            (x, y) if x == y => continue,
            (x, y) => {
                return format!(
                    "first difference at line {n}:\n  {}\n  {}",
                    x.unwrap_or("(end)"),
                    y.unwrap_or("(end)")
                )
            }
        }
    }
    "(the texts are equal)".to_string()
}

/// Events once each, in order.
fn dedup_events(report: &mut Report) {
    let mut seen = std::collections::HashSet::new();
    report.events.retain(|e| seen.insert(e.clone()));
}

/// `text` without its comment lines: the differential's dims and inputs depend on the
/// code only, so a finding's file (the mutant under a header of comments) runs as the
/// mutant did.
fn code(text: &str) -> Vec<u8> {
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .flat_map(|l| l.bytes().chain([b'\n']))
        .collect()
}

thread_local! {
    /// Inside [`catch`]: the panic hook records instead of printing.
    static CATCHING: Cell<bool> = const { Cell::new(false) };
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

static HOOK: std::sync::Once = std::sync::Once::new();

/// Runs `f`; a panic comes back as its message and place.
pub fn catch<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if CATCHING.with(Cell::get) {
                LAST_PANIC.with(|l| *l.borrow_mut() = Some(info.to_string()));
            } else {
                previous(info);
            }
        }));
    });
    let was = CATCHING.with(|c| c.replace(true));
    let result = catch_unwind(AssertUnwindSafe(f));
    CATCHING.with(|c| c.set(was));
    result.map_err(|payload| {
        LAST_PANIC
            .with(|l| l.borrow_mut().take())
            .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic".to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_caught_panic_says_what_and_where() {
        let r: Result<(), String> = catch(|| panic!("boom {}", 7));
        let m = r.expect_err("panicked");
        assert!(m.contains("boom 7") && m.contains("oracle.rs"), "{m}");
    }

    #[test]
    fn a_valid_kernel_passes_every_oracle() {
        let text = std::fs::read_to_string(crate::root().join("examples/elementwise_add.tir"))
            .expect("example");
        let r = examine(&text, &Options::default());
        assert!(r.findings.is_empty(), "{:?}", r.findings);
        for e in [
            "parsed",
            "fmt idempotent",
            "check accepted",
            "compiled sm_80",
            "round-trip sm_90a",
            "differential compared sm_80",
            "differential compared sm_90a",
        ] {
            assert!(
                r.events.iter().any(|x| x == e),
                "no `{e}` in {:?}",
                r.events
            );
        }
    }

    /// Found by the campaign: a row stores what it reads while the other rows read it.
    /// Both orders compute the same, but the iterations race (the compiled IR's threads
    /// did): the tile level stops at the conflict, and nothing is compared.
    #[test]
    fn a_nest_whose_iterations_race_is_no_finding() {
        let text = "@T.prim_func\ndef f(A: T.Tensor((16, 64), \"float32\")):\n    with T.Kernel(1, threads=128) as bx:\n        S = T.alloc_shared((16, 64), \"float32\")\n        T.copy(A, S)\n        for f in T.Parallel(1024):\n            S[f // 64, f % 64] = S[f // 1024, f % 64]\n        T.copy(S, A)\n";
        let r = examine(text, &Options::default());
        assert!(r.findings.is_empty(), "{:?}", r.findings);
        assert!(
            r.events
                .iter()
                .any(|e| e == "differential tile-error sm_80"),
            "{:?}",
            r.events
        );
    }

    #[test]
    fn a_wrong_compiled_kernel_is_a_differential_finding() {
        let tile = tlc_ir::parse(
            "@T.prim_func\ndef f(A: T.Tensor((4,), \"int32\"), B: T.Tensor((4,), \"int32\")):\n    with T.Kernel(1, threads=4) as (bx):\n        for i in T.Parallel(4):\n            B[i] = A[i] + 1\n",
        )
        .expect("parses");
        let mut wrong = tile.clone();
        tlc_ir::visit::map_body_exprs(&mut wrong.body, &mut |e| match e.kind {
            tlc_ir::ExprKind::Int(1) => tlc_ir::Expr::int(2),
            _ => e,
        });
        let r = differential::reference(&tile, 1, 1, 1e6).expect("reference");
        assert!(differential::check(&r, &tile, Target::Sm80).is_none());
        let f = differential::check(&r, &wrong, Target::Sm80).expect("differs");
        assert!(
            f.message.starts_with("the outputs differ\n`B`"),
            "{}",
            f.message
        );
    }
}
