//! The mutation campaign in CI (issue 33): a fixed-seed run of `tlc_tests::mutate` over
//! every case and example — each mutant through `fmt`, `check`, `compile` for every target,
//! the `--emit=tir` round trip and the differential (tile-level interpreter against the
//! interpreter on each target's compiled IR). **No oracle may find anything.**
//!
//! `TLC_MUTATIONS=N` runs N mutants instead of the default (sized for about a minute of a
//! debug build on two cores), `TLC_MUTATION_SEED=S` another seed. Long campaigns, with
//! hang and crash detection, minimization and a findings directory, are the `mutate`
//! binary's (fuzz/README.md). Every finding either makes becomes a case in `tests/cases/`.

use std::collections::BTreeMap;
use tlc_tests::mutate::{self, examine, Options};

#[test]
fn a_short_campaign_finds_nothing() {
    let count: u64 = std::env::var("TLC_MUTATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if cfg!(debug_assertions) { 200 } else { 800 });
    let seed: u64 = std::env::var("TLC_MUTATION_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x9e37_79b9);
    let corpus = mutate::corpus().expect("the corpus");
    let opts = Options::default();
    let mut events: BTreeMap<String, u64> = BTreeMap::new();
    let mut failures = Vec::new();
    let mut slowest = (std::time::Duration::ZERO, String::new());
    for index in 0..count {
        let m = mutate::mutant(&corpus, seed, index);
        let r = examine(&m.text, &opts);
        for e in r.events {
            *events.entry(e).or_default() += 1;
        }
        if r.elapsed > slowest.0 {
            slowest = (r.elapsed, m.describe());
        }
        for f in r.findings {
            failures.push(format!(
                "{}: {}\n{}\n--- mutant ---\n{}",
                m.describe(),
                f.class(),
                f.message,
                m.text
            ));
        }
    }
    eprintln!(
        "{count} mutants (seed {seed}); slowest {:.1} s: {}",
        slowest.0.as_secs_f64(),
        slowest.1
    );
    for (e, n) in &events {
        eprintln!("  {n:6} {e}");
    }
    assert!(
        failures.is_empty(),
        "{} findings:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    // The oracles saw real work.
    let seen = |e: &str| events.get(e).copied().unwrap_or(0);
    assert!(seen("compiled sm_80") > count / 10, "{events:?}");
    assert!(seen("compiled sm_90a") > count / 10, "{events:?}");
    assert!(
        seen("differential compared sm_80") > count / 20,
        "{events:?}"
    );
    assert!(
        seen("differential compared sm_90a") > count / 20,
        "{events:?}"
    );
}

/// The mutants that once made an oracle fail (`tests/cases/mutants/`) pass every oracle.
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
        let r = examine(&text, &Options::default());
        assert!(
            r.findings.is_empty(),
            "{}: {:?}",
            path.display(),
            r.findings
        );
        seen += 1;
    }
    assert!(seen >= 4, "only {seen} mutants");
}
