//! `unroll`: snapshots, meaning preserved, fresh names in every copy.

mod common;

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
        errs[0].message.contains("100000 statements"),
        "{}",
        errs[0].message
    );
}
