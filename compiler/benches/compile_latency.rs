//! Compile latency: source text → PTX text in-process (parse, verify, the target's default
//! pipeline with verify-each, codegen, printing) for every example and both targets; the
//! median of 200 runs after 5 warm-up runs, in milliseconds. An example that does not
//! compile is reported with its error and the benchmark goes on.
//!
//! `cargo bench -p tlc --bench compile_latency` (cargo passes `--bench`). Run by
//! `cargo test --all-targets` (no `--bench`), it makes 3 runs per kernel, as a smoke test.

use std::path::{Path, PathBuf};
use std::time::Instant;
use tlc::driver::source_to_ptx;
use tlc_passes::Target;

fn examples() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "tir"))
                .collect()
        })
        .unwrap_or_default();
    paths.sort();
    paths
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    match xs.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => xs[n / 2],
        n => (xs[n / 2 - 1] + xs[n / 2]) / 2.0,
    }
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (warmup, runs) = if full { (5, 200) } else { (0, 3) };
    println!("# compile latency: source -> PTX in-process, median of {runs} runs (ms)");
    println!(
        "{:<24} {:>7} {:>10} {:>10} {:>10}  note",
        "kernel", "target", "median", "min", "max"
    );
    for path in examples() {
        let name = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let Ok(text) = std::fs::read_to_string(&path) else {
            println!("{name:<24} cannot read {}", path.display());
            continue;
        };
        for target in [Target::Sm80, Target::Sm90a] {
            // One run first: an example that does not compile is reported, not timed.
            if let Err(e) = source_to_ptx(&name, &text, target) {
                // The located line says most (`FILE:L:C: error: ...`), else the first.
                let first =
                    e.0.lines()
                        .find(|l| l.contains(": error: "))
                        .or_else(|| e.0.lines().next())
                        .unwrap_or("");
                let first = first.rsplit("error: ").next().unwrap_or(first);
                println!(
                    "{name:<24} {:>7} {:>10} {:>10} {:>10}  error: {first}",
                    target.name(),
                    "-",
                    "-",
                    "-"
                );
                continue;
            }
            for _ in 0..warmup {
                let _ = source_to_ptx(&name, &text, target);
            }
            let mut ms = Vec::with_capacity(runs);
            let mut bytes = 0;
            for _ in 0..runs {
                let start = Instant::now();
                let ptx = source_to_ptx(&name, &text, target);
                ms.push(start.elapsed().as_secs_f64() * 1e3);
                bytes = ptx.map(|p| p.len()).unwrap_or(0);
            }
            let min = ms.iter().copied().fold(f64::INFINITY, f64::min);
            let max = ms.iter().copied().fold(0.0, f64::max);
            println!(
                "{name:<24} {:>7} {:>10.3} {min:>10.3} {max:>10.3}  {bytes} bytes of PTX",
                target.name(),
                median(ms)
            );
        }
    }
}
