//! Mutation test of the whole compile road: seeded edits of the examples and the valid cases
//! that keep them parseable often enough to matter — integer literals replaced by edge values
//! (0, -1, 2^31, …), variables swapped, operators, dtypes and loop kinds exchanged, lines
//! deleted or duplicated — each compiled for every target when `tlc check` accepts it. The
//! oracle is `tlc::commands::compile::verdict`: **what check accepts, compile compiles or
//! refuses with located errors**; no pass output fails the verifier, nothing panics.
//!
//! `TLC_MUTATIONS=N` runs N mutants instead of the default (100 in CI's debug build, 400
//! in release), `TLC_MUTATION_SEED=S`
//! another seed: a long campaign is `TLC_MUTATIONS=20000 cargo test --release -p tlc-tests --test
//! pipeline_mutations`. Every failure it finds becomes a case in `tests/cases/`.

use std::panic::{catch_unwind, AssertUnwindSafe};
use tlc::commands::compile::{verdict, Verdict};
use tlc_ir::Target;
use tlc_tests::mutate::{pieces, Rng};

fn corpus() -> Vec<(String, String)> {
    let out: Vec<(String, String)> = tlc_tests::valid_cases()
        .iter()
        .map(|p| {
            let text =
                std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (tlc_tests::relative(p).display().to_string(), text)
        })
        .collect();
    assert!(out.len() >= 10, "the corpus is too small: {}", out.len());
    out
}

const EDGE_INTS: &[i64] = &[
    0, 1, 2, 3, -1, 7, 31, 33, 64, 127, 129, 1000, 4096, 65536, 2147483647, 2147483648, 4294967296,
];
const OPERATORS: &[&str] = &["+", "-", "*", "//", "%"];
const DTYPES: &[&str] = &[
    "float16",
    "bfloat16",
    "float32",
    "float",
    "int32",
    "int64",
    "int8",
    "uint8",
    "bool",
    "float8_e4m3",
    "float8_e5m2",
];
const LOOPS: &[&str] = &["Parallel", "serial", "unroll", "vectorized", "Pipelined"];

/// One edit; `None` when the text has nothing it applies to.
fn mutate(src: &str, rng: &mut Rng) -> Option<String> {
    let mut p = pieces(src);
    let is_int = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let is_ident = |s: &str| {
        s.chars()
            .next()
            .is_some_and(|c| c.is_alphabetic() || c == '_')
            && !matches!(
                s,
                "T" | "def" | "with" | "as" | "for" | "in" | "if" | "else"
            )
    };
    let positions = |pred: &dyn Fn(&str) -> bool| -> Vec<usize> {
        (0..p.len()).filter(|&i| pred(&p[i])).collect()
    };
    match rng.below(8) {
        // An integer literal → an edge value, or a neighbour of itself.
        0 | 1 => {
            let at = positions(&|s| is_int(s));
            let i = *rng.pick(&at)?;
            let old: i64 = p[i].parse().unwrap_or(1);
            let new = match rng.below(3) {
                0 => *rng.pick(EDGE_INTS)?,
                1 => old.saturating_mul(2),
                _ => old + *rng.pick(&[-1, 1])?,
            };
            p[i] = new.to_string();
        }
        // A variable → another name of the text.
        2 => {
            let at = positions(&|s| is_ident(s));
            let (i, j) = (*rng.pick(&at)?, *rng.pick(&at)?);
            p[i] = p[j].clone();
        }
        // An arithmetic operator → another.
        3 => {
            let at: Vec<usize> = (0..p.len())
                .filter(|&i| matches!(p[i].as_str(), "+" | "-" | "*" | "%"))
                .collect();
            let i = *rng.pick(&at)?;
            p[i] = rng.pick(OPERATORS)?.to_string();
        }
        // A dtype → another.
        4 => {
            let at = positions(&|s| DTYPES.contains(&s));
            let i = *rng.pick(&at)?;
            p[i] = rng.pick(DTYPES)?.to_string();
        }
        // A loop kind → another.
        5 => {
            let at = positions(&|s| LOOPS.contains(&s));
            let i = *rng.pick(&at)?;
            p[i] = rng.pick(LOOPS)?.to_string();
        }
        // `x` → `x + k` for a variable used in an index.
        6 => {
            let at = positions(&|s| is_ident(s));
            let i = *rng.pick(&at)?;
            p[i] = format!("{} + {}", p[i], rng.pick(EDGE_INTS)?);
        }
        // A line deleted or duplicated.
        _ => {
            let mut lines: Vec<&str> = src.lines().collect();
            let i = rng.below(lines.len());
            if rng.below(2) == 0 {
                lines.remove(i);
            } else {
                let l = lines[i];
                lines.insert(i, l);
            }
            return Some(lines.join("\n") + "\n");
        }
    }
    Some(p.concat())
}

#[test]
fn mutated_kernels_compile_or_get_located_errors() {
    let count: usize = std::env::var("TLC_MUTATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        // Debug builds (CI's test command) compile several times slower.
        .unwrap_or(if cfg!(debug_assertions) { 100 } else { 400 });
    let seed: u64 = std::env::var("TLC_MUTATION_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x9e37_79b9_7f4a_7c15);
    // `TLC_MUTATION_TRACE=1` prints every mutant before compiling it (to find one that
    // hangs).
    let trace = std::env::var_os("TLC_MUTATION_TRACE").is_some();
    let mut slowest = (std::time::Duration::ZERO, String::new());
    let corpus = corpus();
    let mut rng = Rng(seed);
    let mut failures = Vec::new();
    let (mut checked, mut compiled, mut refused) = (0, 0, 0);
    for _ in 0..count {
        let Some((name, text)) = rng.pick(&corpus) else {
            continue;
        };
        let mut mutant = text.clone();
        for _ in 0..=rng.below(2) {
            if let Some(m) = mutate(&mutant, &mut rng) {
                mutant = m;
            }
        }
        if trace {
            eprintln!("--- mutant of {name} ---\n{mutant}");
        }
        for target in Target::ALL {
            let start = std::time::Instant::now();
            let result = catch_unwind(AssertUnwindSafe(|| verdict(&mutant, target)));
            let took = start.elapsed();
            if took > slowest.0 {
                slowest = (took, mutant.clone());
            }
            let bug = match result {
                Ok(Verdict::Invalid) => break,
                Ok(Verdict::Compiled) => {
                    compiled += 1;
                    None
                }
                Ok(Verdict::Refused(_)) => {
                    refused += 1;
                    None
                }
                Ok(Verdict::CompilerBug(what)) => Some(what),
                Err(_) => Some("panic".to_string()),
            };
            checked += 1;
            if let Some(what) = bug {
                failures.push(format!(
                    "{name} for {}: {what}\n--- mutant ---\n{mutant}",
                    target.name()
                ));
            }
        }
    }
    eprintln!(
        "slowest compile: {:.1} s:\n{}",
        slowest.0.as_secs_f64(),
        slowest.1
    );
    eprintln!(
        "{count} mutants: {checked} compiles of mutants that check accepts ({compiled} compiled, {refused} refused with located errors)"
    );
    assert!(
        failures.is_empty(),
        "{} compiler bugs:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    // The oracle saw real work: mutants that check accepts and the pipeline compiles.
    assert!(compiled > count / 20, "only {compiled} mutants compiled");
}

/// The mutants that once failed the oracle (`tests/cases/mutants/`) stay fixed.
#[test]
fn mutants_that_once_failed_stay_fixed() {
    let dir = tlc_tests::root().join("tests/cases/mutants");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir)
        .expect("list tests/cases/mutants")
        .flatten()
    {
        let path = entry.path();
        if path.extension().is_none_or(|x| x != "tir") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("read mutant");
        for target in Target::ALL {
            let v = verdict(&text, target);
            assert!(
                !matches!(v, Verdict::CompilerBug(_)),
                "{} for {}: {v:?}",
                path.display(),
                target.name()
            );
        }
        seen += 1;
    }
    assert!(seen >= 4, "only {seen} mutants");
}
