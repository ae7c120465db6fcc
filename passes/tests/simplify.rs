//! `simplify` on the corpus: snapshots where it matters, meaning preserved on every case,
//! the operator-count metric, and idempotence.

use crate::common;

use common::{assert_same_meaning, case, corpus};
use tlc_ir::printer::print_func;
use tlc_passes::simplify::{index_op_count, simplify_func};

fn simplified(stem: &str) -> String {
    let func = case(stem);
    print_func(&simplify_func(func).expect("simplify"))
}

#[test]
fn snapshot_index_math() {
    insta::assert_snapshot!(simplified("index_math"));
}

/// Nothing to simplify: the text (even `(base % 3 - 1)`, which has another form of the same
/// size) stays exactly as it was.
#[test]
fn no_gain_means_no_change() {
    for stem in ["control_flow", "gemm_seed000", "elementwise_add"] {
        assert_eq!(simplified(stem), print_func(&case(stem)), "{stem}");
    }
}

#[test]
fn simplify_keeps_meaning_on_every_case() {
    let mut compared = 0;
    for (name, func) in corpus() {
        let out = simplify_func(func.clone()).unwrap_or_else(|d| panic!("{name}: {d:?}"));
        tlc_ir::verifier::verify(&out).unwrap_or_else(|d| panic!("{name}: {d:?}"));
        compared += assert_same_meaning(&name, &func, &out);
    }
    assert!(compared >= 60, "only {compared} runs compared");
}

#[test]
fn simplify_is_idempotent_and_its_output_round_trips() {
    for (name, func) in corpus() {
        let once = simplify_func(func).unwrap();
        let twice = simplify_func(once.clone()).unwrap();
        assert_eq!(print_func(&once), print_func(&twice), "{name}");
        let text = print_func(&once);
        assert_eq!(tlc_ir::parse(&text).unwrap(), once, "{name}");
    }
}

/// The simplifier's effect, in operators of integer expressions: never more, and the
/// redundant case loses most of its index math.
#[test]
fn operator_counts_before_and_after() {
    let mut table = String::new();
    let (mut total_before, mut total_after) = (0, 0);
    for (name, func) in corpus() {
        let before = index_op_count(&func);
        let after = index_op_count(&simplify_func(func).unwrap());
        assert!(after <= before, "{name}: {before} -> {after}");
        total_before += before;
        total_after += after;
        table.push_str(&format!("{name:<28} {before:>4} -> {after:>4}\n"));
    }
    table.push_str(&format!(
        "{:<28} {total_before:>4} -> {total_after:>4}\n",
        "total"
    ));
    insta::assert_snapshot!(table);
    let before = index_op_count(&case("index_math"));
    let after = index_op_count(&simplify_func(case("index_math")).unwrap());
    assert!(after * 2 < before, "index_math: {before} -> {after}");
}
