//! `thread-binding`: snapshots of the SIMT-region cases, meaning preserved with no race on
//! the whole corpus, the race a missing barrier causes, and the errors.

use crate::common;
use crate::simt;

use common::{assert_same_meaning, corpus};
use simt::{check_reference, simt, CASES};
use std::collections::HashMap;
use tlc_ir::interp::{run, RunOptions};
use tlc_ir::printer::print_func;
use tlc_ir::visit::for_each_stmt;
use tlc_ir::{ForKind, PrimFunc, StmtKind};
use tlc_passes::thread_binding::{bind_threads, ThreadBinding};
use tlc_passes::Pass;

fn bound(func: PrimFunc) -> PrimFunc {
    let out = ThreadBinding
        .run(func, &common::cx())
        .expect("thread-binding");
    tlc_ir::verifier::verify(&out).expect("bound IR verifies");
    out
}

fn count(func: &PrimFunc, pred: &dyn Fn(&StmtKind) -> bool) -> usize {
    let mut n = 0;
    for_each_stmt(&func.body, &mut |s| n += usize::from(pred(&s.kind)));
    n
}

fn thread_loops(func: &PrimFunc) -> usize {
    count(
        func,
        &|k| matches!(k, StmtKind::For(f) if matches!(f.kind, ForKind::ThreadBinding(_))),
    )
}

fn barriers(func: &PrimFunc) -> usize {
    count(func, &|k| matches!(k, StmtKind::Barrier))
}

#[test]
fn snapshot_simt_transpose() {
    insta::assert_snapshot!(print_func(&bound(simt("simt_transpose"))));
}

#[test]
fn snapshot_simt_pipelined() {
    // The narrow load region is guarded; the barrier after it orders xs for the compute
    // region, the one at the end of the loop body keeps the next load off xs until every
    // thread has read it.
    let out = bound(simt("simt_pipelined"));
    assert_eq!(barriers(&out), 2);
    insta::assert_snapshot!(print_func(&out));
}

#[test]
fn snapshot_simt_two_buffers() {
    insta::assert_snapshot!(print_func(&bound(simt("simt_two_buffers"))));
}

#[test]
fn snapshot_simt_uniform_if() {
    insta::assert_snapshot!(print_func(&bound(simt("simt_uniform_if"))));
}

#[test]
fn keeps_meaning_without_races_and_merges_every_region() {
    let mut compared = 0;
    let mut merged = 0;
    for (name, func) in corpus() {
        if common::mixes_levels(&func) {
            continue; // thread-binding takes it once lower-tile-ops has lowered its tile ops
        }
        let out = bound(func.clone());
        if thread_loops(&func) > 0 {
            // One region per kernel around its whole body: a nest of one loop per block
            // dimension.
            let nests: usize = tlc_passes::analysis::kernels::kernels(&out.body)
                .iter()
                .map(|(k, _)| k.threads.len())
                .sum();
            assert_eq!(thread_loops(&out), nests, "{name}");
            merged += 1;
        } else {
            assert_eq!(out, func, "{name}: a kernel without regions changed");
        }
        // A second run finds one region covering the body: nothing changes.
        assert_eq!(bound(out.clone()), out, "{name}: not idempotent");
        // The interpreter's race check runs on every output.
        compared += assert_same_meaning(&name, &func, &out);
    }
    assert!(merged >= 3, "only {merged} cases had regions");
    assert!(compared >= 60, "only {compared} runs compared");
}

fn run_err(func: &PrimFunc) -> Option<String> {
    run(
        func,
        &simt::dims(func),
        HashMap::new(),
        &RunOptions {
            seed: 1,
            threads: 1,
        },
    )
    .err()
    .map(|e| e.to_string())
}

#[test]
fn the_simt_cases_match_their_references_without_races() {
    for stem in CASES {
        let out = bound(simt(stem));
        assert_eq!(thread_loops(&out), 1, "{stem}");
        check_reference(stem, &out);
    }
}

#[test]
fn without_barriers_the_interpreter_reports_races() {
    for stem in [
        "simt_transpose",
        "simt_pipelined",
        "simt_two_buffers",
        "simt_uniform_if",
    ] {
        let func = simt(stem);
        let unsynced = bind_threads(func.clone(), false).expect("binds");
        assert_eq!(barriers(&unsynced), 0);
        let err = run_err(&unsynced).unwrap_or_else(|| panic!("{stem}: no race reported"));
        assert!(err.contains("data race on shared memory"), "{stem}: {err}");
        assert_eq!(run_err(&bound(func)), None, "{stem}: the pass output races");
    }
}

const HEAD: &str = "@T.prim_func\ndef f(A: T.Tensor((64,), \"float32\")):\n    with T.Kernel(1, threads=64) as bx:\n        S = T.alloc_shared((64,), \"float32\")\n        L = T.alloc_local((1,), \"float32\")\n";

fn errors(body: &str) -> Vec<String> {
    let func = tlc_ir::parse(&format!("{HEAD}{body}")).expect("parses");
    ThreadBinding
        .run(func, &common::cx())
        .err()
        .unwrap_or_default()
        .into_iter()
        .map(|d| d.message)
        .collect()
}

#[test]
fn regions_under_thread_dependent_code_and_leftover_tile_ops_are_errors() {
    let e = errors("        if L[0] > 0.0:\n            for tx in T.thread_binding(64, thread=\"threadIdx.x\"):\n                S[tx] = A[tx]\n");
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(e[0].contains("depends on the thread"), "{e:?}");
    let e = errors("        for tx in T.thread_binding(64, thread=\"threadIdx.x\"):\n            S[tx] = A[tx]\n        T.copy(S, A)\n");
    assert!(e[0].contains("run lower-tile-ops"), "{e:?}");
    let e = errors("        for tx in T.thread_binding(64, thread=\"threadIdx.x\"):\n            S[tx] = A[tx]\n        for i in T.Parallel(64):\n            A[i] = S[i]\n");
    assert!(e[0].contains("run lower-tile-ops"), "{e:?}");
}

/// A local buffer written only by block-level code from uniform values (a scalar variable,
/// `analysis::uniform`) may drive the control flow around regions; every thread stores its
/// own copy of it (no `tx == 0` guard), so every thread reads the value back.
#[test]
fn uniform_local_scalars_drive_block_level_control_flow() {
    let body = "        L[0] = 0.0
        for i in T.serial(3):
            L[0] = L[0] + A[i]
        if L[0] > -100.0:
            for tx in T.thread_binding(64, thread=\"threadIdx.x\"):
                S[tx] = A[tx] + L[0]
        for tx_1 in T.thread_binding(64, thread=\"threadIdx.x\"):
            A[tx_1] = S[63 - tx_1]
";
    assert_eq!(errors(body), Vec::<String>::new());
    let func = tlc_ir::parse(&format!("{HEAD}{body}")).unwrap();
    let out = bound(func.clone());
    let text = print_func(&out);
    assert!(!text.contains("tx == 0"), "{text}");
    let opts = RunOptions {
        seed: 1,
        threads: 1,
    };
    // A[i] = i: L = 0 + 1 + 2, and A[t] becomes A[63 - t] + L.
    let a: Vec<f64> = (0..64).map(f64::from).collect();
    let inputs = HashMap::from([(
        "A".to_string(),
        tlc_ir::interp::Tensor::from_f64(tlc_ir::dtype::DType::Float32, &[64], &a).unwrap(),
    )]);
    let got = run(&out, &simt::dims(&out), inputs, &opts).unwrap_or_else(|e| panic!("{e}"));
    let want: Vec<f64> = (0..64).map(|t| f64::from(63 - t) + 3.0).collect();
    assert_eq!(got["A"].to_f64(), want);
    // Written inside a region, the same buffer is per thread again.
    let e = errors("        for tx in T.thread_binding(64, thread=\"threadIdx.x\"):\n            L[0] = A[tx]\n        if L[0] > 0.0:\n            for tx_1 in T.thread_binding(64, thread=\"threadIdx.x\"):\n                S[tx_1] = A[tx_1]\n");
    assert!(
        e.len() == 1 && e[0].contains("depends on the thread"),
        "{e:?}"
    );
}

#[test]
fn block_level_stores_are_done_by_thread_zero() {
    let src = format!("{HEAD}        for tx in T.thread_binding(64, thread=\"threadIdx.x\"):\n            S[tx] = A[tx]\n        S[0] = 1.0\n        for tx_1 in T.thread_binding(64, thread=\"threadIdx.x\"):\n            A[tx_1] = S[63 - tx_1]\n");
    let func = tlc_ir::parse(&src).unwrap();
    let out = bound(func.clone());
    let text = print_func(&out);
    assert!(
        text.contains("if tx == 0:\n                S[0] = 1.0"),
        "{text}"
    );
    assert_eq!(barriers(&out), 2, "{text}");
    let o = run(
        &out,
        &simt::dims(&out),
        HashMap::new(),
        &RunOptions {
            seed: 1,
            threads: 1,
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(o["A"].to_f64()[63], 1.0);
}

use crate::pipe;

/// The body of the (only) loop over `var`.
fn loop_body<'a>(func: &'a PrimFunc, var: &str) -> &'a [tlc_ir::Stmt] {
    let mut out = None;
    for_each_stmt(&func.body, &mut |s| {
        if let StmtKind::For(f) = &s.kind {
            if f.var.name == var {
                out = Some(f.body.as_slice());
            }
        }
    });
    out.unwrap_or_else(|| panic!("no loop over {var}"))
}

#[test]
fn snapshot_pipelined_cp_async() {
    // The software-pipelined loop: exactly one barrier per iteration, right after the wait
    // (it lands this iteration's tiles for every thread, and keeps the look-ahead copy off
    // the stage the previous iteration read), none in the prologue.
    let func = pipe::copy_kernel(64, 256, 3);
    let out = pipe::run_passes(func.clone(), &pipe::BOUND);
    let body = loop_body(&out, "ko");
    let kinds: Vec<&StmtKind> = body.iter().map(|s| &s.kind).collect();
    assert!(matches!(
        kinds[0],
        StmtKind::Intrinsic(tlc_ir::Intrinsic::WaitGroup { n: 1 })
    ));
    assert_eq!(kinds[1], &StmtKind::Barrier);
    assert!(matches!(kinds[2], StmtKind::If { .. }));
    let barriers_in_body = body
        .iter()
        .map(|s| {
            let mut n = 0;
            for_each_stmt(std::slice::from_ref(s), &mut |x| {
                n += usize::from(x.kind == StmtKind::Barrier)
            });
            n
        })
        .sum::<usize>();
    assert_eq!(barriers_in_body, 1);
    assert_eq!(barriers(&out), 1, "{}", print_func(&out));
    pipe::assert_same("pipelined", &func, &out, &[pipe::dims(&[])]);
    insta::assert_snapshot!(print_func(&out));
}

#[test]
fn pipelined_synchronous_copies_get_one_barrier_per_iteration() {
    // Symbolic sizes: the copies stay synchronous stores, still one barrier per iteration.
    let func = pipe::case("pipe_simt_gemm");
    let out = pipe::run_passes(func.clone(), &pipe::BOUND);
    let body = loop_body(&out, "ko");
    assert_eq!(body[1].kind, StmtKind::Barrier, "{}", print_func(&out));
    assert_eq!(barriers(&out), 1, "{}", print_func(&out));
    let bindings: Vec<_> = [(37, 70, 20), (33, 20, 45), (40, 33, 130)]
        .iter()
        .map(|&(m, n, k)| pipe::dims(&[("M", m), ("N", n), ("K", k)]))
        .collect();
    pipe::assert_same("pipe_simt_gemm", &func, &out, &bindings);
}

#[test]
fn stage_keys_separate_buffers_of_a_manual_double_buffer() {
    // S[ko % 2] is written while S[(ko + 1) % 2] is read: one barrier per iteration (before
    // the write, ordering it after the previous iteration's read of the same half) —
    // without stage keys every access of S would conflict and need two.
    let src = r#"@T.prim_func
def f(
    A: T.Tensor((8, 64), "float32"),
    B: T.Tensor((8, 64), "float32"),
):
    with T.Kernel(1, threads=64) as bx:
        S = T.alloc_shared((2, 64), "float32")
        for tx in T.thread_binding(64, thread="threadIdx.x"):
            S[0, tx] = A[0, tx]
        for ko in T.serial(1, 8):
            for tx_1 in T.thread_binding(64, thread="threadIdx.x"):
                S[ko % 2, tx_1] = A[ko, tx_1]
            for tx_2 in T.thread_binding(64, thread="threadIdx.x"):
                B[ko - 1, tx_2] = S[(ko + 1) % 2, 63 - tx_2]
        for tx_3 in T.thread_binding(64, thread="threadIdx.x"):
            B[7, tx_3] = S[1, 63 - tx_3]
"#;
    let func = tlc_ir::parse(src).unwrap();
    let out = bound(func);
    let body = loop_body(&out, "ko");
    let inner = body.iter().filter(|s| s.kind == StmtKind::Barrier).count();
    assert_eq!(inner, 1, "{}", print_func(&out));
    let o = run(
        &out,
        &HashMap::new(),
        HashMap::new(),
        &RunOptions {
            seed: 1,
            threads: 1,
        },
    )
    .unwrap_or_else(|e| panic!("{e}\n{}", print_func(&out)));
    let (a, b) = (o["A"].to_f64(), o["B"].to_f64());
    for r in 0..8 {
        for t in 0..64 {
            assert_eq!(b[r * 64 + t], a[r * 64 + 63 - t], "B[{r}, {t}]");
        }
    }
}

const HEAD_2D: &str = "@T.prim_func\ndef f(A: T.Tensor((128,), \"float32\")):\n    with T.Kernel(1, threads=(32, 4)) as bx:\n        S = T.alloc_shared((128,), \"float32\")\n";

/// A thread nest of the (32, 4) block over `t` (named `tx`, `ty`, `t` plus `suffix`).
fn nest_2d(suffix: &str, body: &str) -> String {
    format!(
        "        for tx{suffix} in T.thread_binding(32, thread=\"threadIdx.x\"):\n            for ty{suffix} in T.thread_binding(4, thread=\"threadIdx.y\"):\n                t{suffix} = tx{suffix} + ty{suffix} * 32\n                {}\n",
        body.replace("@", &format!("t{suffix}"))
    )
}

#[test]
fn nests_of_a_2d_block_merge_and_keep_their_meaning() {
    // A scalar let between the regions is replicated per thread (in the nest); the block
    // level store goes to the thread with linear index 0.
    let src = format!(
        "{HEAD_2D}{}        k = bx * 2\n        S[k] = 3.0\n{}",
        nest_2d("", "S[@] = A[@]"),
        nest_2d("_1", "A[@] = S[(@ + 1) % 128] + S[k]"),
    );
    let func = tlc_ir::parse(&src).expect("parses");
    tlc_ir::verifier::verify(&func).expect("verifies");
    let out = bound(func.clone());
    let text = print_func(&out);
    assert_eq!(thread_loops(&out), 2, "{text}");
    assert!(text.contains("            for ty in T.thread_binding(4, thread=\"threadIdx.y\"):\n                t = tx + ty * 32\n"), "{text}");
    assert!(
        text.contains("if t == 0:\n                    S[k] = 3.0"),
        "{text}"
    );
    assert!(!text.contains("t_1"), "{text}");
    assert_eq!(barriers(&out), 2, "{text}");
    assert!(assert_same_meaning("nests_2d", &func, &out) > 0);
    // Without the barriers the interpreter sees the race the pass prevents.
    let unsynced = bind_threads(func, false).expect("binds");
    let err = run_err(&unsynced).expect("a race");
    assert!(err.contains("data race on shared memory"), "{err}");
    // Idempotent: the merged nest is one region.
    assert_eq!(bound(out.clone()), out);
}

#[test]
fn regions_of_a_2d_block_that_are_not_thread_nests_are_errors() {
    let errors_2d = |src: String| -> Vec<tlc_ir::Diagnostic> {
        let func = tlc_ir::parse(&src).expect("parses");
        ThreadBinding
            .run(func, &common::cx())
            .err()
            .unwrap_or_default()
    };
    // A threadIdx.x loop alone (no y loop, no linear index) next to other code.
    let flat = "        for tx in T.thread_binding(32, thread=\"threadIdx.x\"):\n            S[tx] = A[tx]\n        S[0] = 1.0\n";
    let e = errors_2d(format!("{HEAD_2D}{flat}"));
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(
        e[0].message
            .contains("this SIMT region is not a thread nest over the block's (32, 4) threads"),
        "{e:?}"
    );
    assert!(!e[0].span.is_dummy());
    // A second region whose let is not the linear index.
    let wrong = nest_2d("_1", "S[@] = A[@]").replace("tx_1 + ty_1 * 32", "ty_1 + tx_1 * 4");
    let e = errors_2d(format!("{HEAD_2D}{}{wrong}", nest_2d("", "S[@] = A[@]")));
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(e[0].message.contains("not a thread nest"), "{e:?}");
    // A kernel written by hand as one nest (no linear index) is left as it is.
    let hand = "        for tx in T.thread_binding(32, thread=\"threadIdx.x\"):\n            for ty in T.thread_binding(4, thread=\"threadIdx.y\"):\n                S[ty * 32 + tx] = A[ty * 32 + tx]\n";
    let func = tlc_ir::parse(&format!("{HEAD_2D}{hand}")).expect("parses");
    assert_eq!(bound(func.clone()), func);
}
