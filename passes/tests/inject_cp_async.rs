//! `inject-cp-async`: snapshot of a pipelined kernel's copies made asynchronous, meaning kept
//! under the interpreter's cp.async checks (bytes not landed yet are errors) before and
//! after `thread-binding` (races are errors), for 2 to 4 stages and trip counts 1, 2, 3, 8
//! with ragged edges; the copies that must stay synchronous; and the checks catching a
//! missing wait or barrier.

use crate::pipe;

use pipe::{
    assert_same, copy_kernel, count, dims, parse, run_error, run_passes, without, ASYNC, BOUND,
};
use tlc_ir::printer::print_func;
use tlc_ir::{ForKind, Intrinsic, PrimFunc, StmtKind};

fn cp_asyncs(f: &PrimFunc) -> Vec<i64> {
    let mut out = Vec::new();
    tlc_ir::visit::for_each_stmt(&f.body, &mut |s| {
        if let StmtKind::Intrinsic(Intrinsic::CpAsync { bytes, .. }) = &s.kind {
            out.push(*bytes);
        }
    });
    out
}

fn vector_loops(f: &PrimFunc) -> usize {
    count(
        f,
        &|k| matches!(k, StmtKind::For(l) if l.kind == ForKind::Vectorized),
    )
}

#[test]
fn snapshot_pipe_copy() {
    let out = run_passes(copy_kernel(64, 256, 3), &ASYNC);
    // The prologue's and the look-ahead's copies of A and B.
    assert_eq!(cp_asyncs(&out), [16, 16, 16, 16]);
    insta::assert_snapshot!(print_func(&out));
}

#[test]
fn keeps_meaning_with_asynchronous_copies_before_and_after_thread_binding() {
    let mut runs = 0;
    for stages in 2..=4 {
        for k in [32, 40, 72, 256] {
            let func = copy_kernel(50, k, stages);
            let name = format!("pipe_copy k={k} stages={stages}");
            let copies = run_passes(func.clone(), &ASYNC);
            assert_eq!(cp_asyncs(&copies).len(), 4, "{name}");
            runs += assert_same(&name, &func, &copies, &[dims(&[])]);
            let bound = run_passes(func.clone(), &BOUND);
            runs += assert_same(&name, &func, &bound, &[dims(&[])]);
        }
    }
    assert!(runs >= 48, "{runs}");
}

#[test]
fn the_interpreter_catches_a_missing_wait_or_barrier() {
    let func = copy_kernel(64, 128, 3);
    let copies = run_passes(func.clone(), &ASYNC);
    let no_wait = without(copies, &|k| {
        matches!(k, StmtKind::Intrinsic(Intrinsic::WaitGroup { .. }))
    });
    let e = run_error(&no_wait, &dims(&[])).expect("an error");
    assert!(e.contains("has not landed yet"), "{e}");
    let bound = run_passes(func, &BOUND);
    let no_barrier = without(bound, &|k| matches!(k, StmtKind::Barrier));
    let e = run_error(&no_barrier, &dims(&[])).expect("an error");
    assert!(
        e.contains("data race") || e.contains("has not landed yet"),
        "{e}"
    );
}

/// One kernel with a copy `copy` into S (64 x 32 float16) in a 64-thread block, then
/// `rest` (8 spaces of indent). `K` is declared when the source's shape uses it (a dim no
/// parameter's shape gives is refused, rule B5).
fn one_copy(src_shape: &str, dtype: &str, copy: &str, rest: &str) -> PrimFunc {
    let k = if src_shape.contains('K') {
        "K = T.symbolic(\"K\")\n\n"
    } else {
        ""
    };
    parse(&format!(
        r#"{k}@T.prim_func
def f(
    A: T.Tensor({src_shape}, "{dtype}"),
    O: T.Tensor((64, 32), "float16"),
):
    with T.Kernel(1, threads=64) as bx:
        S = T.alloc_shared((64, 32), "float16")
{copy}{rest}        T.copy(S, O)
"#
    ))
}

fn lowered_copies(func: PrimFunc) -> PrimFunc {
    run_passes(func, &["lower-tile-ops", "inject-cp-async"])
}

#[test]
fn only_copies_a_commit_closes_become_asynchronous() {
    let copy = "        T.copy(A[0, 0], S)\n";
    let wait = "        T.cp_async_wait(0)\n";
    // Closed by a commit: asynchronous, and the wait lands it before the read.
    let f = one_copy(
        "(64, 32)",
        "float16",
        copy,
        &format!("        T.cp_async_commit()\n{wait}"),
    );
    let out = lowered_copies(f.clone());
    assert_eq!(
        (cp_asyncs(&out), vector_loops(&out)),
        (vec![16], 1),
        "{}",
        print_func(&out)
    );
    assert_same("committed", &f, &out, &[dims(&[])]);
    // No commit: synchronous.
    let out = lowered_copies(one_copy("(64, 32)", "float16", copy, ""));
    assert!(cp_asyncs(&out).is_empty());
    // S is read before the commit.
    let read = "        for i, j in T.Parallel(64, 32):\n            O[i, j] = S[i, j]\n";
    let out = lowered_copies(one_copy(
        "(64, 32)",
        "float16",
        copy,
        &format!("{read}        T.cp_async_commit()\n{wait}"),
    ));
    assert!(cp_asyncs(&out).is_empty());
    // A dtype conversion, and a symbolic source row (no vectors): synchronous.
    let out = lowered_copies(one_copy(
        "(64, 32)",
        "float32",
        copy,
        &format!("        T.cp_async_commit()\n{wait}"),
    ));
    assert!(cp_asyncs(&out).is_empty());
    let out = lowered_copies(one_copy(
        "(64, K)",
        "float16",
        copy,
        &format!("        T.cp_async_commit()\n{wait}"),
    ));
    assert!(cp_asyncs(&out).is_empty());
}

#[test]
fn narrow_vectors_and_ragged_edges() {
    // A hand-written 4-lane float16 vector (8 bytes) whose rows past M are zero-filled.
    let f = parse(
        r#"M = T.symbolic("M")

@T.prim_func
def f(
    A: T.Tensor((M, 8), "float16"),
    O: T.Tensor((8, 8), "float16"),
):
    with T.Kernel(1, threads=32) as bx:
        S = T.alloc_shared((8, 8), "float16")
        for tx in T.thread_binding(32, thread="threadIdx.x"):
            if tx < 16:
                for v in T.vectorized(4):
                    S[tx // 2, tx % 2 * 4 + v] = T.if_then_else(tx // 2 + 2 < M, A[tx // 2 + 2, tx % 2 * 4 + v], T.cast(0, "float16"))
        T.cp_async_commit()
        T.cp_async_wait(0)
        for tx_1 in T.thread_binding(32, thread="threadIdx.x"):
            for i in T.serial(2):
                O[tx_1 // 4, tx_1 % 4 * 2 + i] = S[tx_1 // 4, tx_1 % 4 * 2 + i]
"#,
    );
    let out = run_passes(f.clone(), &["inject-cp-async"]);
    assert_eq!(cp_asyncs(&out), [8], "{}", print_func(&out));
    let text = print_func(&out);
    assert!(
        text.contains(
            "T.cp_async(S[tx // 2, tx % 2 * 4], A[tx // 2 + 2, tx % 2 * 4], 8, tx // 2 + 2 < M)"
        ),
        "{text}"
    );
    assert_same("narrow", &f, &out, &[dims(&[("M", 5)]), dims(&[("M", 12)])]);
    // A predicate that differs between the lanes: left alone.
    let g = parse(&print_func(&f).replace("tx // 2 + 2 < M, A", "tx % 2 * 4 + v < M, A"));
    assert!(cp_asyncs(&run_passes(g, &["inject-cp-async"])).is_empty());
    // float32: 4 per vector (16 bytes); a scalar float32 copy (no vector): 4 bytes.
    let f32 = |shape: &str, region: &str| {
        let n = if shape.contains('N') {
            "N = T.symbolic(\"N\")\n\n"
        } else {
            ""
        };
        parse(&format!(
            r#"{n}@T.prim_func
def f(
    A: T.Tensor({shape}, "float32"),
    O: T.Tensor((4, 8), "float32"),
):
    with T.Kernel(1, threads=32) as bx:
        S = T.alloc_shared((4, 8), "float32")
        T.copy({region}, S)
        T.cp_async_commit()
        T.cp_async_wait(0)
        T.copy(S, O)
"#
        ))
    };
    let f = f32("(4, 8)", "A");
    let out = lowered_copies(f.clone());
    assert_eq!(cp_asyncs(&out), [16]);
    assert_same("f32 vector", &f, &out, &[dims(&[])]);
    let f = f32("(4, N)", "A[0:4, 0:8]");
    let out = lowered_copies(f.clone());
    assert_eq!(cp_asyncs(&out), [4], "{}", print_func(&out));
    assert_same(
        "f32 scalar",
        &f,
        &out,
        &[dims(&[("N", 5)]), dims(&[("N", 9)])],
    );
}
