//! `unroll`: snapshots, meaning preserved, fresh names in every copy.

use crate::common;

use common::{assert_same_meaning, case, corpus};
use tlc_ir::printer::print_func;
use tlc_ir::visit::for_each_stmt;
use tlc_ir::{ForKind, PrimFunc, StmtKind};
use tlc_passes::unroll::Unroll;
use tlc_passes::Pass;

fn unrolled(func: PrimFunc) -> PrimFunc {
    let out = Unroll.run(func, &common::cx()).expect("unroll");
    tlc_ir::verifier::verify(&out).expect("unrolled IR verifies");
    out
}

fn unroll_loops(func: &PrimFunc) -> usize {
    let mut n = 0;
    for_each_stmt(&func.body, &mut |s| {
        if matches!(&s.kind, StmtKind::For(f) if f.kind == ForKind::Unroll) {
            n += 1;
        }
    });
    n
}

#[test]
fn snapshot_unroll_nest() {
    insta::assert_snapshot!(print_func(&unrolled(case("unroll_nest"))));
}

#[test]
fn snapshot_control_flow() {
    insta::assert_snapshot!(print_func(&unrolled(case("control_flow"))));
}

#[test]
fn unroll_keeps_meaning_and_leaves_no_constant_unroll_loop() {
    let mut compared = 0;
    for (name, func) in corpus() {
        let out = unrolled(func.clone());
        assert_eq!(unroll_loops(&out), 0, "{name}");
        compared += assert_same_meaning(&name, &func, &out);
    }
    assert!(compared >= 60, "only {compared} runs compared");
}

#[test]
fn non_constant_bounds_stay_and_huge_loops_are_refused() {
    let src = "N = T.symbolic(\"N\")\n\n@T.prim_func\ndef f(A: T.Tensor((N,), \"float32\")):\n    with T.Kernel(1, threads=1) as bx:\n        for i in T.unroll(N):\n            A[i] = 0.0\n";
    let func = tlc_ir::parse(src).unwrap();
    assert_eq!(unrolled(func.clone()), func);
    let src = "@T.prim_func\ndef f(A: T.Tensor((100000,), \"float32\")):\n    with T.Kernel(1, threads=1) as bx:\n        for i in T.unroll(100000):\n            A[i] = 0.0\n";
    let errs = Unroll
        .run(tlc_ir::parse(src).unwrap(), &common::cx())
        .unwrap_err();
    assert!(
        errs[0].message.contains("more than 65536 statements"),
        "{}",
        errs[0].message
    );
}

#[test]
fn nested_unrolls_share_one_budget() {
    // Each loop alone is small; together ~500 000 copies (a mutant of unroll_nest that used
    // to make the compile run for minutes). Counted before any copy: one error, at the
    // outer loop.
    let src = "@T.prim_func\ndef f(A: T.Tensor((1000,), \"float32\")):\n    with T.Kernel(1, threads=1) as bx:\n        for r in T.unroll(1, 1000):\n            for c in T.unroll(r):\n                A[c] = 1.0\n";
    let errs = Unroll
        .run(tlc_ir::parse(src).unwrap(), &common::cx())
        .unwrap_err();
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert_eq!(
        errs[0].message,
        "unrolling this loop (with the unrolled loops inside it) would make more than 65536 \
         statements (limit 65536 in all)"
    );
    assert_eq!(&src[errs[0].span.start..][..9], "for r in ");
}
