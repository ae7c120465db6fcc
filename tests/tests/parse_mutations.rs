//! Randomized no-panic test: thousands of seeded mutations of the valid fixtures (delete,
//! duplicate and swap lines and tokens, insert stray characters) must each parse or give
//! diagnostics with in-bounds spans — never panic.

use tlc_ir::parse;
use tlc_tests::mutate::{pieces, Rng};

fn fixtures() -> Vec<String> {
    let out: Vec<String> = tlc_tests::valid_cases()
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .collect();
    assert!(out.len() >= 3);
    out
}

fn mutate(src: &str, rng: &mut Rng) -> String {
    const STRAY: &[&str] = &[
        "(",
        ")",
        "[",
        "]",
        "{",
        "}",
        ":",
        ",",
        "\t",
        "\n",
        "    ",
        "-",
        "T.",
        "=",
        "\"",
        "'",
        "#",
        "\\",
        "999999999999999999999",
        ".5",
        "1e",
        "@",
        "lambda",
        "elif",
        "é",
    ];
    let mut lines: Vec<String> = src.lines().map(str::to_string).collect();
    let mut toks = pieces(src);
    match rng.below(7) {
        0 if !lines.is_empty() => {
            let i = rng.below(lines.len());
            lines.remove(i);
            lines.join("\n")
        }
        1 if !lines.is_empty() => {
            let i = rng.below(lines.len());
            let l = lines[i].clone();
            lines.insert(i, l);
            lines.join("\n")
        }
        2 if !lines.is_empty() => {
            let (i, j) = (rng.below(lines.len()), rng.below(lines.len()));
            lines.swap(i, j);
            lines.join("\n")
        }
        3 if !toks.is_empty() => {
            let i = rng.below(toks.len());
            toks.remove(i);
            toks.concat()
        }
        4 if !toks.is_empty() => {
            let i = rng.below(toks.len());
            let t = toks[i].clone();
            toks.insert(i, t);
            toks.concat()
        }
        5 if !toks.is_empty() => {
            let (i, j) = (rng.below(toks.len()), rng.below(toks.len()));
            toks.swap(i, j);
            toks.concat()
        }
        _ => {
            let i = rng.below(toks.len() + 1);
            toks.insert(i, STRAY[rng.below(STRAY.len())].to_string());
            toks.concat()
        }
    }
}

#[test]
fn mutated_fixtures_never_panic() {
    let bases = fixtures();
    let mut rng = Rng(0x5eed_0000_0000_0001);
    let (mut accepted, mut rejected) = (0, 0);
    for case in 0..3000 {
        let base = &bases[case % bases.len()];
        // One to three stacked mutations.
        let mut text = base.clone();
        for _ in 0..=rng.below(3) {
            text = mutate(&text, &mut rng);
        }
        match parse(&text) {
            Ok(_) => accepted += 1,
            Err(errors) => {
                rejected += 1;
                assert!(!errors.is_empty(), "case {case}: no diagnostic\n{text}");
                for d in &errors {
                    assert!(
                        d.span.start <= d.span.end && d.span.end <= text.len(),
                        "case {case}: span out of bounds: {d}\n{text}"
                    );
                    assert!(
                        text.is_char_boundary(d.span.start) && text.is_char_boundary(d.span.end),
                        "case {case}: span splits a character: {d}"
                    );
                }
            }
        }
    }
    // The mutations exercise both paths.
    assert!(
        accepted > 50 && rejected > 1000,
        "{accepted} accepted, {rejected} rejected"
    );
}
