//! Property test: mutating valid kernels (deleting, duplicating and swapping tokens and
//! lines) never makes the front end panic, and whatever still parses prints to text that
//! parses back to the same IR.

use proptest::prelude::*;
use std::sync::LazyLock;
use tlc_ir::parse::parse;
use tlc_ir::printer::print_func;

static CORPUS: LazyLock<Vec<String>> = LazyLock::new(|| {
    tlc_tests::valid_cases()
        .iter()
        .map(|p| std::fs::read_to_string(p).expect("read case"))
        .collect()
});

#[derive(Clone, Debug)]
enum Edit {
    DeleteLine(usize),
    DuplicateLine(usize),
    SwapLines(usize, usize),
    DeleteToken(usize),
    DuplicateToken(usize),
    SwapTokens(usize, usize),
    InsertChar(usize, char),
}

fn edit() -> impl Strategy<Value = Edit> {
    let idx = 0usize..10_000;
    prop_oneof![
        idx.clone().prop_map(Edit::DeleteLine),
        idx.clone().prop_map(Edit::DuplicateLine),
        (idx.clone(), idx.clone()).prop_map(|(a, b)| Edit::SwapLines(a, b)),
        idx.clone().prop_map(Edit::DeleteToken),
        idx.clone().prop_map(Edit::DuplicateToken),
        (idx.clone(), idx.clone()).prop_map(|(a, b)| Edit::SwapTokens(a, b)),
        (
            idx,
            prop::sample::select(vec![
                '(', ')', ':', '\t', ' ', '\n', '[', ',', '=', '#', '"', 'T', '.', '0'
            ])
        )
            .prop_map(|(a, c)| Edit::InsertChar(a, c)),
    ]
}

/// Whitespace-separated tokens keep their separators so that a swap stays local.
fn apply(text: &str, edit: &Edit) -> String {
    let mut lines: Vec<&str> = text.lines().collect();
    let mut tokens: Vec<&str> = text.split_inclusive([' ', '\n', '(', ')', ',']).collect();
    let n_lines = lines.len().max(1);
    let n_tokens = tokens.len().max(1);
    match *edit {
        Edit::DeleteLine(i) if !lines.is_empty() => {
            lines.remove(i % n_lines);
        }
        Edit::DuplicateLine(i) if !lines.is_empty() => {
            lines.insert(i % n_lines, lines[i % n_lines])
        }
        Edit::SwapLines(a, b) if !lines.is_empty() => lines.swap(a % n_lines, b % n_lines),
        Edit::DeleteToken(i) if !tokens.is_empty() => {
            tokens.remove(i % n_tokens);
            return tokens.concat();
        }
        Edit::DuplicateToken(i) if !tokens.is_empty() => {
            tokens.insert(i % n_tokens, tokens[i % n_tokens]);
            return tokens.concat();
        }
        Edit::SwapTokens(a, b) if !tokens.is_empty() => {
            tokens.swap(a % n_tokens, b % n_tokens);
            return tokens.concat();
        }
        Edit::InsertChar(i, c) => {
            let mut s = text.to_string();
            let mut at = i % (s.len() + 1);
            while !s.is_char_boundary(at) {
                at -= 1;
            }
            s.insert(at, c);
            return s;
        }
        _ => {}
    }
    lines.join("\n")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, failure_persistence: None, rng_seed: proptest::test_runner::RngSeed::Fixed(0x7c1c), ..ProptestConfig::default() })]

    #[test]
    fn mutated_kernels_never_panic(case in 0usize..64, edits in prop::collection::vec(edit(), 1..4)) {
        let mut text = CORPUS[case % CORPUS.len()].clone();
        for e in &edits {
            text = apply(&text, e);
        }
        if let Ok(func) = parse(&text) {
            let _ = tlc_ir::verifier::verify(&func);
            let printed = print_func(&func);
            let again = parse(&printed);
            prop_assert!(again.is_ok(), "printed text does not parse:\n{}", printed);
            prop_assert_eq!(Some(func), again.ok());
        }
    }
}
