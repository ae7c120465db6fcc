//! `mutate`: the long mutation campaign (issue 33). Each mutant (`tlc_tests::mutate`) is
//! examined by a worker process of this binary under a time and a memory limit, so a hang
//! or a crash is a finding too; each new class of finding is minimized and written to the
//! findings directory as `NNN_<oracle>.tir`. fuzz/README.md has the how-to.
//!
//! ```text
//! mutate [--count N] [--seed S] [--start I] [--workers W] [--timeout SECS] [--mem-mb MB]
//!        [--findings DIR] [--per-class K] [--minimize-secs SECS] [--max-work OPS]
//!        [--no-differential] [--root CHECKOUT] [--duration SECS]
//! mutate --show I [--seed S]     the mutant, and what the oracles say of it (in process)
//! mutate --file PATH             what the oracles say of a file (in process)
//! ```

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tlc_tests::mutate::{self, examine, finding, oracle, Finding, Options, Oracle, Report, Source};

struct Args {
    count: u64,
    seed: u64,
    start: u64,
    workers: usize,
    timeout: Duration,
    mem_mb: u64,
    findings: PathBuf,
    per_class: usize,
    minimize: Duration,
    opts: Options,
    show: Option<u64>,
    file: Option<PathBuf>,
    /// The checkout whose corpus is mutated (default: the one this binary was built in).
    root: Option<PathBuf>,
    /// Take no new mutant after this long (the summary then covers what ran).
    duration: Option<Duration>,
    worker: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        count: 1000,
        seed: 1,
        start: 0,
        workers: 1,
        timeout: Duration::from_secs(60),
        mem_mb: 4096,
        findings: PathBuf::from("findings"),
        per_class: 3,
        minimize: Duration::from_secs(180),
        opts: Options::default(),
        show: None,
        file: None,
        root: None,
        duration: None,
        worker: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("`{name}` needs a value"));
        let number = |name: &str, v: String| -> Result<u64, String> {
            v.parse()
                .map_err(|_| format!("`{name} {v}`: expected a non-negative integer"))
        };
        match flag.as_str() {
            "--count" => a.count = number(&flag, value(&flag)?)?,
            "--seed" => a.seed = number(&flag, value(&flag)?)?,
            "--start" => a.start = number(&flag, value(&flag)?)?,
            "--workers" => a.workers = number(&flag, value(&flag)?)?.clamp(1, 256) as usize,
            "--timeout" => a.timeout = Duration::from_secs(number(&flag, value(&flag)?)?.max(1)),
            "--mem-mb" => a.mem_mb = number(&flag, value(&flag)?)?.max(64),
            "--findings" => a.findings = PathBuf::from(value(&flag)?),
            "--per-class" => a.per_class = number(&flag, value(&flag)?)? as usize,
            "--minimize-secs" => a.minimize = Duration::from_secs(number(&flag, value(&flag)?)?),
            "--max-work" => a.opts.max_work = number(&flag, value(&flag)?)? as f64,
            "--no-differential" => a.opts.differential = false,
            "--show" => a.show = Some(number(&flag, value(&flag)?)?),
            "--file" => a.file = Some(PathBuf::from(value(&flag)?)),
            "--root" => a.root = Some(PathBuf::from(value(&flag)?)),
            "--duration" => a.duration = Some(Duration::from_secs(number(&flag, value(&flag)?)?)),
            "--worker" => a.worker = true,
            "-h" | "--help" => {
                return Err(
                    "usage: see the top of tests/src/bin/mutate.rs or fuzz/README.md".into(),
                )
            }
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    Ok(a)
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    if args.worker {
        return worker(&args.opts);
    }
    if let Some(path) = &args.file {
        return match std::fs::read(path) {
            Ok(bytes) => show(&String::from_utf8_lossy(&bytes), &args.opts),
            Err(e) => {
                eprintln!("error: {}: {e}", path.display());
                ExitCode::from(2)
            }
        };
    }
    let root = args.root.clone().unwrap_or_else(tlc_tests::root);
    let corpus = match mutate::corpus::corpus_at(&root) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    if let Some(index) = args.show {
        let m = mutate::mutant(&corpus, args.seed, index);
        println!("# {}\n{}", m.describe(), m.text);
        return show(&m.text, &args.opts);
    }
    campaign(&args, corpus)
}

/// Examines one text in this process and prints the report.
fn show(text: &str, opts: &Options) -> ExitCode {
    let r = examine(text, opts);
    println!(
        "# {:.2} s; events: {}",
        r.elapsed.as_secs_f64(),
        r.events.join(", ")
    );
    for f in &r.findings {
        println!("# FINDING {}\n{}\n", f.class(), f.message);
    }
    match r.findings.is_empty() {
        true => ExitCode::SUCCESS,
        false => ExitCode::FAILURE,
    }
}

/// Worker mode: the text on stdin, the report on stdout (`event …`, `finding …`, `done`).
fn worker(opts: &Options) -> ExitCode {
    let mut bytes = Vec::new();
    if std::io::stdin().read_to_end(&mut bytes).is_err() {
        return ExitCode::from(2);
    }
    let text = String::from_utf8_lossy(&bytes);
    let opts = Options {
        progress: Some(|stage| {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "stage {stage}").and_then(|_| out.flush());
        }),
        ..opts.clone()
    };
    let r = examine(&text, &opts);
    let mut out = String::new();
    for e in &r.events {
        out.push_str(&format!("event {e}\n"));
    }
    for f in &r.findings {
        out.push_str(&format!("finding {}\n", f.to_line()));
    }
    out.push_str(&format!("elapsed {}\ndone\n", r.elapsed.as_millis()));
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(out.as_bytes())
        .and_then(|_| stdout.flush())
    {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::from(2),
    }
}

/// Runs `text` in a worker process under the limits: its report, or a hang or crash
/// finding.
fn in_worker(args: &Args, text: &str) -> Report {
    let start = Instant::now();
    let mut report = Report::default();
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            report
                .findings
                .push(Finding::new(Oracle::Crash, None, format!("no worker: {e}")));
            return report;
        }
    };
    // `ulimit -v` bounds the worker's address space: running out is a crash, not the
    // machine's problem.
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(format!(
            "ulimit -v {} && exec \"$0\" \"$@\"",
            args.mem_mb * 1024
        ))
        .arg(&exe)
        .arg("--worker")
        .arg("--max-work")
        .arg(format!("{}", args.opts.max_work as u64));
    if !args.opts.differential {
        cmd.arg("--no-differential");
    }
    let child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            report
                .findings
                .push(Finding::new(Oracle::Crash, None, format!("no worker: {e}")));
            return report;
        }
    };
    let input = text.as_bytes().to_vec();
    let stdin = child.stdin.take();
    let feeder = std::thread::spawn(move || {
        if let Some(mut s) = stdin {
            let _ = s.write_all(&input);
        }
    });
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut buf);
            }
            String::from_utf8_lossy(&buf).into_owned()
        })
    };
    let out = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            // The limit is on the worker's CPU time, so a loaded machine (the campaign
            // runs at the lowest priority) does not make hangs; the wall clock stops a
            // worker blocked without using any at ten times the limit.
            Ok(None)
                if cpu_time(child.id()).is_some_and(|t| t > args.timeout)
                    || start.elapsed() > args.timeout * 10 =>
            {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(_) => break None,
        }
    };
    let _ = feeder.join();
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    report.elapsed = start.elapsed();
    let Some(status) = status else {
        let stage = stdout
            .lines()
            .rev()
            .find_map(|l| l.strip_prefix("stage "))
            .unwrap_or("start");
        // The differential's reference is the oracle's own cost (a kernel that loops for
        // long, as a `while` whose condition nothing changes): a skip, not a finding.
        if stage == oracle::STAGE_TILE {
            report.events.push("differential skipped slow".to_string());
            return report;
        }
        report.findings.push(Finding::new(
            Oracle::Hang,
            None,
            format!(
                "{stage}: ran past the limit of {} s of CPU time",
                args.timeout.as_secs()
            ),
        ));
        return report;
    };
    let mut done = false;
    for line in stdout.lines() {
        if let Some(e) = line.strip_prefix("event ") {
            report.events.push(e.to_string());
        } else if let Some(f) = line.strip_prefix("finding ") {
            if let Some(f) = Finding::from_line(f) {
                report.findings.push(f);
            }
        } else if line == "done" {
            done = true;
        }
    }
    if !done || !status.success() {
        let tail: Vec<&str> = stderr.lines().rev().take(12).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        let what = match stderr.contains("memory allocation of") {
            true => format!("ran out of its {} MB of memory", args.mem_mb),
            false => format!("the worker died ({status})"),
        };
        report.findings.push(Finding::new(
            Oracle::Crash,
            None,
            format!("{what}\n{}", tail.join("\n")),
        ));
    }
    report
}

/// The CPU time process `pid` has used (`/proc/PID/stat`'s user and system times, in the
/// kernel's 100 Hz ticks); `None` where there is no such file.
fn cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the parenthesized command name: state is the 3rd field, utime the
    // 14th and stime the 15th.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

/// What the campaign has seen so far.
#[derive(Default)]
struct Tally {
    mutants: u64,
    events: BTreeMap<String, u64>,
    /// Per edit: mutants made with it, and how many of those `check` accepted.
    edits: BTreeMap<String, (u64, u64)>,
    per_oracle: BTreeMap<&'static str, u64>,
    /// Class → (findings, files written).
    classes: BTreeMap<String, (u64, Vec<String>)>,
    /// (class, mutant) of every finding file: a campaign run again with the same seed into
    /// the same directory does not write the same finding twice.
    written: std::collections::HashSet<(String, String)>,
    slowest: (Duration, String),
    next_file: usize,
}

fn campaign(args: &Args, corpus: Vec<Source>) -> ExitCode {
    if let Err(e) = std::fs::create_dir_all(&args.findings) {
        eprintln!("error: cannot create {}: {e}", args.findings.display());
        return ExitCode::from(2);
    }
    let tally = Arc::new(Mutex::new(Tally {
        next_file: next_number(&args.findings),
        classes: known_classes(&args.findings),
        written: written_findings(&args.findings),
        ..Tally::default()
    }));
    let next = AtomicU64::new(args.start);
    let end = args.start.saturating_add(args.count);
    let began = Instant::now();
    let last_report = Mutex::new(Instant::now());
    std::thread::scope(|scope| {
        for _ in 0..args.workers {
            scope.spawn(|| loop {
                if args.duration.is_some_and(|d| began.elapsed() > d) {
                    break;
                }
                let index = next.fetch_add(1, Ordering::SeqCst);
                if index >= end {
                    break;
                }
                let m = mutate::mutant(&corpus, args.seed, index);
                let report = in_worker(args, &m.text);
                let mut fresh = Vec::new();
                {
                    let mut t = tally.lock().unwrap_or_else(|p| p.into_inner());
                    t.mutants += 1;
                    for e in &report.events {
                        *t.events.entry(e.clone()).or_default() += 1;
                    }
                    let accepted = report.events.iter().any(|e| e == "check accepted");
                    for e in &m.edits {
                        let entry = t.edits.entry(e.name().to_string()).or_default();
                        entry.0 += 1;
                        entry.1 += u64::from(accepted);
                    }
                    if report.elapsed > t.slowest.0 {
                        t.slowest = (report.elapsed, m.describe());
                    }
                    for f in &report.findings {
                        *t.per_oracle.entry(f.oracle.name()).or_default() += 1;
                        let entry = t.classes.entry(f.class()).or_default();
                        entry.0 += 1;
                        let room = entry.0 as usize <= args.per_class;
                        if room && t.written.insert((f.class(), m.describe())) {
                            let n = t.next_file;
                            t.next_file += 1;
                            fresh.push((n, f.clone()));
                        }
                    }
                }
                for (n, f) in fresh {
                    let text = shrink(args, &m.text, &f);
                    match finding::write(&args.findings, n, &f, &m.describe(), &text) {
                        Ok(path) => {
                            println!("finding {}: {}", path.display(), f.class());
                            let mut t = tally.lock().unwrap_or_else(|p| p.into_inner());
                            if let Some(c) = t.classes.get_mut(&f.class()) {
                                c.1.push(path.display().to_string());
                            }
                        }
                        Err(e) => eprintln!("error: cannot write finding {n}: {e}"),
                    }
                }
                let mut last = last_report.lock().unwrap_or_else(|p| p.into_inner());
                if last.elapsed() > Duration::from_secs(60) {
                    *last = Instant::now();
                    let t = tally.lock().unwrap_or_else(|p| p.into_inner());
                    let text = summary(args, &t, began.elapsed());
                    let _ = std::fs::write(args.findings.join("summary.txt"), &text);
                    println!(
                        "{} mutants, {} findings, {:.0} s",
                        t.mutants,
                        t.per_oracle.values().sum::<u64>(),
                        began.elapsed().as_secs_f64()
                    );
                }
            });
        }
    });
    let t = tally.lock().unwrap_or_else(|p| p.into_inner());
    let text = summary(args, &t, began.elapsed());
    let _ = std::fs::write(args.findings.join("summary.txt"), &text);
    print!("{text}");
    match t.classes.is_empty() {
        true => ExitCode::SUCCESS,
        false => ExitCode::FAILURE,
    }
}

/// The mutant shrunk while a finding of `f`'s class persists (in worker processes).
fn shrink(args: &Args, text: &str, f: &Finding) -> String {
    let class = f.class();
    let deadline = Instant::now() + args.minimize;
    // A hang costs the whole time limit per try: a few tries at most.
    let attempts = match f.oracle {
        Oracle::Hang => 4,
        _ => 2000,
    };
    mutate::minimize::minimize(
        text,
        &mut |candidate| {
            in_worker(args, candidate)
                .findings
                .iter()
                .any(|g| g.class() == class)
        },
        attempts,
        deadline,
    )
}

/// The classes of the findings already in `dir` (its files' `# class:` lines), each
/// counted once: a campaign run again into the same directory writes no class twice.
fn known_classes(dir: &Path) -> BTreeMap<String, (u64, Vec<String>)> {
    let mut classes: BTreeMap<String, (u64, Vec<String>)> = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return classes;
    };
    for path in entries.flatten().map(|e| e.path()) {
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        if let Some(class) = text.lines().find_map(|l| l.strip_prefix("# class: ")) {
            let entry = classes.entry(class.to_string()).or_default();
            entry.0 += 1;
            entry.1.push(path.display().to_string());
        }
    }
    classes
}

/// (class, mutant) of each finding file in `dir` (its `# class:` and `# from:` lines).
fn written_findings(dir: &Path) -> std::collections::HashSet<(String, String)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Default::default();
    };
    entries
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .filter_map(|text| {
            let class = text.lines().find_map(|l| l.strip_prefix("# class: "))?;
            let from = text.lines().find_map(|l| l.strip_prefix("# from: "))?;
            Some((class.to_string(), from.to_string()))
        })
        .collect()
}

/// The number after the highest `NNN_…` file in `dir` (a restarted campaign adds to it).
fn next_number(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    name.split('_').next()?.parse::<usize>().ok()
                })
                .max()
                .map_or(1, |n| n + 1)
        })
        .unwrap_or(1)
}

fn summary(args: &Args, t: &Tally, took: Duration) -> String {
    let mut s = format!(
        "mutation campaign: seed {}, mutants {}..{} ({} run) in {:.0} s, {} worker(s), differential {}\n",
        args.seed,
        args.start,
        args.start + args.count,
        t.mutants,
        took.as_secs_f64(),
        args.workers,
        if args.opts.differential { "on" } else { "off" },
    );
    s.push_str(&format!(
        "slowest: {:.1} s, {}\n",
        t.slowest.0.as_secs_f64(),
        t.slowest.1
    ));
    s.push_str("edits (mutants made with each; of those, accepted by check):\n");
    for (k, (made, accepted)) in &t.edits {
        s.push_str(&format!("  {made:8} {k} ({accepted} accepted)\n"));
    }
    s.push_str("oracles (events):\n");
    for (k, v) in &t.events {
        s.push_str(&format!("  {v:8} {k}\n"));
    }
    s.push_str("findings per oracle:\n");
    for o in Oracle::ALL {
        let n = t.per_oracle.get(o.name()).copied().unwrap_or(0);
        s.push_str(&format!("  {n:8} {}\n", o.name()));
    }
    s.push_str(&format!("finding classes ({}):\n", t.classes.len()));
    let mut classes: Vec<(&String, &(u64, Vec<String>))> = t.classes.iter().collect();
    classes.sort_by_key(|c| std::cmp::Reverse(c.1 .0));
    for (class, (n, files)) in classes {
        s.push_str(&format!("  {n:8} {class}  [{}]\n", files.join(", ")));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_counts_work_not_sleep() {
        let me = std::process::id();
        let before = cpu_time(me).expect("/proc");
        std::thread::sleep(Duration::from_millis(300));
        let slept = cpu_time(me).expect("/proc");
        assert!(
            slept - before < Duration::from_millis(150),
            "{before:?} {slept:?}"
        );
        // Work until the clock shows 100 ms more; on a loaded machine that takes longer than
        // 100 ms of wall time, but a clock that ignores work never gets there.
        let start = Instant::now();
        let mut x = 0u64;
        let mut worked = slept;
        while worked - slept < Duration::from_millis(100)
            && start.elapsed() < Duration::from_secs(60)
        {
            for _ in 0..100_000 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
            }
            worked = cpu_time(me).expect("/proc");
        }
        assert!(
            worked - slept >= Duration::from_millis(100),
            "{slept:?} {worked:?} after {:?} of work",
            start.elapsed()
        );
    }

    #[test]
    fn known_classes_are_read_back_from_the_files() {
        let dir = std::env::temp_dir().join(format!("mutate-classes-{}", std::process::id()));
        let f = Finding::new(Oracle::Fmt, None, "`tlc fmt` is not idempotent");
        finding::write(&dir, 7, &f, "test", "x = 1\n").expect("write");
        let known = known_classes(&dir);
        assert_eq!(known.get(&f.class()).map(|c| c.0), Some(1));
        assert_eq!(next_number(&dir), 8);
        assert!(written_findings(&dir).contains(&(f.class(), "test".to_string())));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
