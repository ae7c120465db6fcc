//! Reducers (`T.alloc_reducer` / `T.finalize_reducer`) through the whole pipeline of both
//! targets, pass by pass: every stage verifies, prints and parses back to itself, and the
//! interpreter gives the input's results on random data — within the reassociation bound
//! for float sums (the tile level folds a reducer's updates in iteration order;
//! `lower-reducers` turns them into reductions that `lower-reductions` reassociates), exactly
//! for `max` / `min`. Cases: a row sum (the gemv shape), a column max (the kept variable is
//! the inner one), a min over two left-out variables of a 3-D nest, an element-for-element
//! update (left as a store), a nest with another store beside the update, and
//! `replication="none"`. The text of `lower-reducers`' output is a snapshot; the forms it
//! does not lower are located errors.

use crate::common;

use common::{assert_close_meaning, with_region_barriers};
use tlc_ir::printer::print_func;
use tlc_ir::PrimFunc;
use tlc_passes::pipeline::lookup;
use tlc_passes::{PassContext, Target};

fn parse(text: &str) -> PrimFunc {
    let f = tlc_ir::parse(text).unwrap_or_else(|e| panic!("{e:?}\n{text}"));
    tlc_ir::verifier::verify(&f).unwrap_or_else(|e| panic!("{e:?}\n{text}"));
    f
}

/// y[m] = Σ_n a[m, n] * x[n] over 32 x 64 tiles: the gemv of TileLang's example.
const ROW_SUM: &str = r#"M = T.symbolic("M")
N = T.symbolic("N")

@T.prim_func
def k(A: T.Tensor((M, N), "float16"), X: T.Tensor((N,), "float16"), Y: T.Tensor((M,), "float32")):
    with T.Kernel(T.ceildiv(M, 32), threads=128) as bm:
        r = T.alloc_reducer((32,), "float32", replication="all")
        a = T.alloc_fragment((32, 64), "float16")
        x = T.alloc_fragment((64,), "float16")
        T.clear(r)
        for kn in T.serial(T.ceildiv(N, 64)):
            T.copy(A[bm * 32, kn * 64], a)
            T.copy(X[kn * 64], x)
            for i, j in T.Parallel(32, 64):
                r[i] += a[i, j] * x[j]
        T.finalize_reducer(r)
        T.copy(r, Y[bm * 32])
"#;

/// y[n] = max(0.5, max_m a[m, n]): the kept variable is the inner one; the reducer starts
/// from a fill.
const COLUMN_MAX: &str = r#"N = T.symbolic("N")

@T.prim_func
def k(A: T.Tensor((48, N), "float32"), Y: T.Tensor((N,), "float32")):
    with T.Kernel(T.ceildiv(N, 16), threads=64) as bn:
        r = T.alloc_reducer((16,), "float32", op="max", replication="none")
        a = T.alloc_fragment((48, 16), "float32")
        T.fill(r, 0.5)
        T.copy(A[0, bn * 16], a)
        for i, j in T.Parallel(48, 16):
            r[j] = T.max(r[j], a[i, j])
        T.finalize_reducer(r)
        T.copy(r, Y[bn * 16])
"#;

/// y[j] = min over (i, l) of a[i, j, l], with an element-for-element reducer beside it and
/// another store in the nest.
const MIN_3D: &str = r#"@T.prim_func
def k(A: T.Tensor((4, 8, 16), "float32"), Y: T.Tensor((8,), "float32"), Z: T.Tensor((4, 8, 16), "float32"), W: T.Tensor((4, 8, 16), "float32")):
    with T.Kernel(1, threads=128) as b:
        r = T.alloc_reducer((8,), "float32", op="min", replication="all")
        e = T.alloc_reducer((4, 8, 16), "float32", op="sum", replication="all")
        a = T.alloc_fragment((4, 8, 16), "float32")
        z = T.alloc_fragment((4, 8, 16), "float32")
        T.fill(r, 2.0)
        T.clear(e)
        T.copy(A, a)
        for i, j, l in T.Parallel(4, 8, 16):
            r[j] = T.min(a[i, j, l], r[j])
            z[i, j, l] = a[i, j, l] * 2.0
            e[i, j, l] += a[i, j, l]
        T.finalize_reducer(r)
        T.finalize_reducer(e)
        T.copy(r, Y)
        T.copy(z, Z)
        T.copy(e, W)
"#;

fn cases() -> Vec<(&'static str, &'static str)> {
    vec![
        ("row_sum", ROW_SUM),
        ("column_max", COLUMN_MAX),
        ("min_3d", MIN_3D),
    ]
}

const CHECKED: [&str; 5] = [
    "lower-reducers",
    "lower-reductions",
    "lower-tile-ops",
    "thread-binding",
    "widen-indices",
];

#[test]
fn every_pass_keeps_the_meaning_of_every_reducer() {
    for target in [Target::Sm80, Target::Sm90a] {
        for (name, text) in cases() {
            let func = parse(text);
            let (mut lowered, mut bound, mut compared) = (false, false, 0);
            for (pass, out) in common::pipeline_stages(&func, &PassContext::new(target)) {
                lowered |= pass == "lower-tile-ops";
                bound |= pass == "thread-binding";
                if !CHECKED.contains(&pass) {
                    continue;
                }
                let what = format!("{name} on {target} after {pass}");
                let out = if lowered && !bound {
                    with_region_barriers(out)
                } else {
                    out
                };
                compared += assert_close_meaning(&what, &func, &out, 1e-5);
            }
            assert!(compared >= 5, "{name}: only {compared} runs compared");
        }
    }
}

#[test]
fn max_and_min_reducers_are_exact_after_lowering() {
    for (name, text) in [("column_max", COLUMN_MAX), ("min_3d", MIN_3D)] {
        let func = parse(text);
        let out = common::pipeline_stages(&func, &PassContext::new(Target::Sm80))
            .pop()
            .expect("stages")
            .1;
        common::assert_same_meaning(name, &func, &out);
    }
}

#[test]
fn lower_reducers_output_reads_as_documented() {
    let cx = PassContext::new(Target::Sm80);
    let pass = lookup("lower-reducers").expect("registered");
    let mut text = String::new();
    for (name, src) in cases() {
        let out = pass.run(parse(src), &cx).expect("runs");
        text.push_str(&format!("# {name}\n{}\n", print_func(&out)));
    }
    insta::assert_snapshot!(text);
}

/// `lower-reducers`' refusal of `text`: one located error containing `want`.
fn refused(text: &str, want: &str, line: usize) {
    let func = parse(text);
    let cx = PassContext::new(Target::Sm80);
    let errs = lookup("lower-reducers")
        .expect("registered")
        .run(func, &cx)
        .expect_err("refused");
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(errs[0].message.contains(want), "{errs:?}");
    let at = text[..errs[0].span.start].lines().count();
    assert_eq!(at, line, "{errs:?}");
}

#[test]
fn forms_not_lowered_are_located_errors() {
    let under_if = ROW_SUM.replace(
        "                r[i] += a[i, j] * x[j]",
        "                if j < 40:\n                    r[i] += a[i, j] * x[j]",
    );
    refused(&under_if, "under a condition", 16);
    // An index that is not a nest variable.
    let shifted = ROW_SUM.replace("r[i] += a[i, j] * x[j]", "r[31 - i] += a[i, j] * x[j]");
    refused(&shifted, "other than the nest's variables", 15);
}

#[test]
fn a_reducer_left_for_layout_inference_is_a_located_level_error() {
    let func = parse(ROW_SUM);
    let errors = tlc_ir::verifier::check_level(&func, tlc_ir::verifier::Level::LaidOut);
    let text: Vec<String> = errors.iter().map(|e| e.message.clone()).collect();
    assert!(
        text.iter()
            .any(|m| m.contains("reducer `r` remains") && m.contains("lower-reducers")),
        "{text:?}"
    );
}
