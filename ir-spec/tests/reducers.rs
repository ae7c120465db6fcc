//! `T.alloc_reducer` / `T.finalize_reducer`: the front end's refusals, the printer's round
//! trip, and the verifier's reducer rules (RD1–RD4, `verifier/reducer.rs`), each a located
//! error.

use tlc_ir::printer::print_func;

const OK: &str = r#"N = T.symbolic("N")

@T.prim_func
def k(A: T.Tensor((16, N), "float32"), Y: T.Tensor((16,), "float32")):
    with T.Kernel(1, threads=64) as b:
        r = T.alloc_reducer((16,), "float32", op="sum", replication="all")
        a = T.alloc_fragment((16, 32), "float32")
        T.clear(r)
        for kn in T.serial(T.ceildiv(N, 32)):
            T.copy(A[0, kn * 32], a)
            for i, j in T.Parallel(16, 32):
                r[i] += a[i, j]
        T.finalize_reducer(r)
        T.copy(r, Y)
"#;

/// The errors (message, 1-based line) of parsing and verifying `text`.
fn errors(text: &str) -> Vec<(String, usize)> {
    let line = |start: usize| text[..start].lines().count().max(1);
    match tlc_ir::parse(text) {
        Err(e) => e
            .into_iter()
            .map(|d| (d.message, line(d.span.start)))
            .collect(),
        Ok(f) => match tlc_ir::verifier::verify(&f) {
            Ok(_) => Vec::new(),
            Err(e) => e
                .into_iter()
                .map(|d| (d.message, line(d.span.start)))
                .collect(),
        },
    }
}

fn assert_error(text: &str, want: &str, line: usize) {
    let errs = errors(text);
    assert!(
        errs.iter().any(|(m, l)| m.contains(want) && *l == line),
        "want `{want}` at line {line}, got {errs:?}"
    );
}

#[test]
fn a_reducer_kernel_prints_and_parses_back_equal() {
    assert!(errors(OK).is_empty(), "{:?}", errors(OK));
    let f = tlc_ir::parse(OK).expect("parses");
    let text = print_func(&f);
    assert!(
        text.contains("r = T.alloc_reducer((16,), \"float32\", op=\"sum\", replication=\"all\")")
    );
    assert!(text.contains("T.finalize_reducer(r)"));
    let back = tlc_ir::parse(&text).expect("printed text parses");
    assert_eq!(back, f);
    let none = OK.replace(
        "op=\"sum\", replication=\"all\"",
        "op=\"max\", replication=\"none\"",
    );
    let none = none.replace("r[i] += a[i, j]", "r[i] = T.max(r[i], a[i, j])");
    let f = tlc_ir::parse(&none).expect("parses");
    assert_eq!(tlc_ir::parse(&print_func(&f)).expect("parses"), f);
}

#[test]
fn the_front_end_reads_only_the_v1_reducer() {
    assert_error(
        &OK.replace(", op=\"sum\", replication=\"all\"", ""),
        "without `replication=` is TileLang's v2 reducer",
        6,
    );
    assert_error(
        &OK.replace("op=\"sum\"", "op=\"bitand\""),
        "unsupported reducer op \"bitand\"",
        6,
    );
    assert_error(
        &OK.replace("replication=\"all\"", "replication=\"some\""),
        "unsupported replication \"some\"",
        6,
    );
    assert_error(
        &OK.replace("T.finalize_reducer(r)", "T.finalize_reducer(r, a)"),
        "`T.finalize_reducer(R, dst)` (TileLang's v2 reducer) is not read yet",
        13,
    );
}

#[test]
fn rd2_finalize_names_a_reducer_once_directly_in_the_kernel_body() {
    assert_error(
        &OK.replace("T.finalize_reducer(r)", "T.finalize_reducer(a)"),
        "`a` is not a reducer of this kernel",
        13,
    );
    assert_error(
        &OK.replace(
            "        T.finalize_reducer(r)\n",
            "        T.finalize_reducer(r)\n        T.finalize_reducer(r)\n",
        ),
        "reducer `r` is finalized twice",
        14,
    );
    assert_error(
        &OK.replace(
            "                r[i] += a[i, j]\n        T.finalize_reducer(r)\n",
            "                r[i] += a[i, j]\n            T.finalize_reducer(r)\n",
        ),
        "must sit directly in the kernel body",
        13,
    );
}

#[test]
fn rd3_before_finalize_a_reducer_is_only_cleared_and_updated_with_its_op() {
    // Another op than declared.
    assert_error(
        &OK.replace("r[i] += a[i, j]", "r[i] = T.max(r[i], a[i, j])"),
        "reducer `r` (op=\"sum\") is updated only as `r[idx] = r[idx] + value`",
        12,
    );
    // A plain store.
    assert_error(
        &OK.replace("r[i] += a[i, j]", "r[i] = a[i, j]"),
        "is updated only as",
        12,
    );
    // A read inside the nest.
    assert_error(
        &OK.replace("r[i] += a[i, j]", "r[i] += a[i, j] * r[0]"),
        "reducer `r` is read before `T.finalize_reducer(r)`",
        12,
    );
    // A read by a tile op before the finalize, and with no finalize at all.
    let early = OK.replace(
        "        T.finalize_reducer(r)\n        T.copy(r, Y)\n",
        "        T.copy(r, Y)\n        T.finalize_reducer(r)\n",
    );
    assert_error(&early, "reducer `r` is read before", 13);
    assert_error(
        &OK.replace("        T.finalize_reducer(r)\n", ""),
        "reducer `r` is read before",
        13,
    );
}

#[test]
fn rd4_no_update_after_finalize_and_rd1_numbers_only() {
    assert_error(
        &OK.replace(
            "        T.copy(r, Y)\n",
            "        for i in T.Parallel(16):\n            r[i] += 1.0\n        T.copy(r, Y)\n",
        ),
        "reducer `r` is updated after `T.finalize_reducer(r)`",
        15,
    );
    assert_error(
        &OK.replace("(16,), \"float32\", op", "(16,), \"bool\", op"),
        "reducer `r` has dtype bool",
        6,
    );
}

#[test]
fn a_later_kernel_reusing_a_reducer_name_is_renamed_with_its_record_and_finalize() {
    let body = |out: &str| {
        format!(
            r#"    with T.Kernel(1, threads=64) as b:
        r = T.alloc_reducer((16,), "float32", op="sum", replication="all")
        T.clear(r)
        for i, j in T.Parallel(16, 32):
            r[i] += A[i, j]
        T.finalize_reducer(r)
        T.copy(r, {out})
"#
        )
    };
    let text = format!(
        "@T.prim_func\ndef k(A: T.Tensor((16, 32), \"float32\"), Y: T.Tensor((16,), \"float32\"), Z: T.Tensor((16,), \"float32\")):\n{}{}",
        body("Y"),
        body("Z")
    );
    assert!(errors(&text).is_empty(), "{:?}", errors(&text));
    let printed = print_func(&tlc_ir::parse(&text).expect("parses"));
    assert!(printed.contains("r_1 = T.alloc_reducer("), "{printed}");
    assert!(printed.contains("T.finalize_reducer(r_1)"), "{printed}");
}
