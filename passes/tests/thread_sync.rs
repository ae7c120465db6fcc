//! `thread-sync`: where TileLang's automatic barriers land in per-thread code (TileLang's
//! GEMV examples and small cases), the interpreter's view of the code before (a data race)
//! and after (the exact result), a case that needs no barrier and gets none, the error
//! for a barrier under a thread-dependent condition, and idempotence.

use crate::common;

use std::collections::HashMap;
use tlc_ir::interp::{run, RunOptions, Tensor};
use tlc_ir::printer::print_func;
use tlc_ir::PrimFunc;
use tlc_passes::thread_sync::ThreadSync;
use tlc_passes::Pass;

fn parse(src: &str) -> PrimFunc {
    let f = tlc_ir::parse(src).unwrap_or_else(|d| panic!("does not parse: {d:#?}"));
    tlc_ir::verifier::verify(&f).unwrap_or_else(|d| panic!("does not verify: {d:#?}"));
    f
}

fn synced(func: &PrimFunc) -> PrimFunc {
    let out = ThreadSync
        .run(func.clone(), &common::cx())
        .unwrap_or_else(|d| panic!("thread-sync: {d:#?}"));
    tlc_ir::verifier::verify(&out).expect("thread-sync's output verifies");
    // Printed, it parses back to itself; run again, the pass changes nothing.
    assert_eq!(parse(&print_func(&out)), out, "round trip");
    let again = ThreadSync.run(out.clone(), &common::cx()).expect("again");
    assert_eq!(again, out, "thread-sync is idempotent");
    out
}

fn tilelang(stem: &str) -> PrimFunc {
    let path = common::root().join(format!("tests/tilelang/{stem}.tir"));
    common::load(&path)
}

fn interp(
    func: &PrimFunc,
    dims: &[(&str, i64)],
    seed: u64,
) -> Result<HashMap<String, Tensor>, tlc_ir::Diagnostic> {
    let dims = dims.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    run(
        func,
        &dims,
        HashMap::new(),
        &RunOptions { seed, threads: 0 },
    )
}

/// The kernel body (from the thread nest on) of a printed function.
fn nest(func: &PrimFunc) -> String {
    let text = print_func(func);
    let at = text.find("        for ").expect("a thread nest");
    text[at..].to_string()
}

#[test]
fn naive_gemv_gets_a_barrier_before_the_stores_and_one_before_the_loads() {
    let out = synced(&tilelang("gemv_naive"));
    assert_eq!(
        nest(&out),
        r#"        for tn in T.thread_binding(128, thread="threadIdx.x"):
            for C_reg_fill0 in T.serial(1):
                C_reg[C_reg_fill0] = 0
            for bk in T.serial(T.ceildiv(K, 128)):
                T.sync_threads()
                for tk in T.serial(128):
                    A_shared[tk] = A[bk * 128 + tk]
                    B_shared[tn, tk] = B[bn * 128 + tn, bk * 128 + tk]
                T.sync_threads()
                for tk_1 in T.serial(128):
                    C_reg[0] = T.fma(T.cast(A_shared[tk_1], "float32"), T.cast(B_shared[tn, tk_1], "float32"), C_reg[0])
            C[bn * 128 + tn] = C_reg[0]
"#
    );
}

#[test]
fn splitk_gemv_gets_barriers_around_the_atomic_adds() {
    let out = synced(&tilelang("gemv_splitk_vectorized"));
    let text = nest(&out);
    let tail = r#"                T.sync_threads()
                T.atomic_add(C_shared[tn], C_accum[0])
                T.sync_threads()
                C[bn * 2 + tn] = C_shared[tn]
"#;
    assert!(text.ends_with(tail), "{text}");
    assert_eq!(text.matches("T.sync_threads()").count(), 2, "{text}");
}

/// On the driver's road the front end placed the barriers already: the pipeline's pass
/// then hands its input on (`PassContext::barriers_placed`) — what it is given, whatever
/// that is — and the front end's run is the one that placed them.
#[test]
fn with_the_barriers_placed_the_pass_hands_its_input_on() {
    // As parsed: `common::load` runs the front end, which places the barriers.
    let path = common::root().join("tests/tilelang/gemv_splitk_vectorized.tir");
    let input = parse(&std::fs::read_to_string(path).expect("the example"));
    let placed = common::cx().with_barriers_placed();
    let passed_on = ThreadSync.run(input.clone(), &placed).expect("passed on");
    assert_eq!(passed_on, input);
    let front_end = synced(&input);
    assert_ne!(front_end, input, "the input needs barriers");
    let after = ThreadSync
        .run(front_end.clone(), &placed)
        .expect("passed on");
    assert_eq!(after, front_end);
}

const BROADCAST: &str = r#"@T.prim_func
def broadcast(
    A: T.Tensor((64,), "float32"),
    B: T.Tensor((32, 64), "float32"),
    C: T.Tensor((32,), "float32"),
):
    with T.Kernel(1, threads=32) as bx:
        tn = T.get_thread_binding(0)
        S = T.alloc_shared((16,), "float32")
        acc = T.alloc_local((1,), "float32")
        acc[0] = 0.0
        for c in T.serial(4):
            if tn < 16:
                S[tn] = A[c * 16 + tn]
            for k in T.serial(16):
                acc[0] = T.fma(S[k], B[tn, c * 16 + k], acc[0])
        C[tn] = acc[0]
"#;

/// A loop-carried write-after-read (the next chunk's stores over the reads) and a
/// read-after-write (the reads of what other threads stored): two barriers per chunk, the
/// first hoisted before the thread-dependent store.
#[test]
fn loop_carried_hazards_get_barriers_at_block_uniform_points() {
    let func = parse(BROADCAST);
    let out = synced(&func);
    assert_eq!(
        nest(&out),
        r#"        for tn in T.thread_binding(32, thread="threadIdx.x"):
            acc[0] = 0.0
            for c in T.serial(4):
                T.sync_threads()
                if tn < 16:
                    S[tn] = A[c * 16 + tn]
                T.sync_threads()
                for k in T.serial(16):
                    acc[0] = T.fma(S[k], B[tn, c * 16 + k], acc[0])
            C[tn] = acc[0]
"#
    );
    // Before: a race. After: C[n] = Σ_c Σ_k A[16c + k] · B[n, 16c + k], float32 products and
    // sums in that order, exactly, on several random inputs.
    for seed in [1u64, 2, 3] {
        let err = interp(&func, &[], seed).expect_err("the unsynchronized code races");
        assert!(
            err.message.contains("data race on shared memory"),
            "{}",
            err.message
        );
        let o = interp(&out, &[], seed).unwrap_or_else(|d| panic!("{d:#?}"));
        let (a, b, c) = (o["A"].to_f64(), o["B"].to_f64(), o["C"].to_f64());
        for (n, got) in c.iter().enumerate() {
            let mut acc = 0f32;
            for k in 0..64 {
                acc = (a[k] as f32).mul_add(b[n * 64 + k] as f32, acc);
            }
            assert_eq!(*got, f64::from(acc), "C[{n}] (seed {seed})");
        }
    }
}

/// Each thread stores and loads only the elements the (thread, iteration) map gives it —
/// `S[f // 64, f % 64]` with `f = i * 64 + tx` both times: no barrier, and no race.
#[test]
fn accesses_each_thread_owns_need_no_barrier() {
    let func = parse(
        r#"@T.prim_func
def owned(
    A: T.Tensor((1024,), "float32"),
    B: T.Tensor((1024,), "float32"),
):
    with T.Kernel(2, threads=64) as bx:
        tx = T.get_thread_binding(0)
        S = T.alloc_shared((8, 64), "float32")
        for i in T.serial(8):
            f = i * 64 + tx
            S[f // 64, f % 64] = A[bx * 512 + f]
        for j in T.serial(8):
            g = j * 64 + tx
            B[bx * 512 + g] = S[g // 64, g % 64] * 2.0
"#,
    );
    let out = synced(&func);
    assert_eq!(out, func, "no barrier");
    let runs = common::assert_same_meaning("owned", &func, &out);
    assert!(runs > 0);
    // Read through another thread's map: a barrier between the loops, and a race without it.
    let shifted = print_func(&func).replace("S[g // 64, g % 64]", "S[g // 64, (g + 1) % 64]");
    let shifted = parse(&shifted);
    let out = synced(&shifted);
    assert_eq!(
        nest(&out).matches("T.sync_threads()").count(),
        1,
        "{}",
        nest(&out)
    );
    let err = interp(&shifted, &[], 1).expect_err("a race");
    assert!(
        err.message.contains("data race on shared memory"),
        "{}",
        err.message
    );
    interp(&out, &[], 1).unwrap_or_else(|d| panic!("{d:#?}"));
}

/// A barrier needed inside a thread-dependent `if` would deadlock: a located error at the
/// condition, pointing at the access.
#[test]
fn a_barrier_under_a_thread_dependent_condition_is_an_error() {
    let src = r#"@T.prim_func
def divergent(
    A: T.Tensor((64,), "float32"),
    B: T.Tensor((64,), "float32"),
):
    with T.Kernel(1, threads=64) as bx:
        tx = T.get_thread_binding(0)
        S = T.alloc_shared((32,), "float32")
        if tx < 32:
            S[tx] = A[tx]
            B[tx] = S[31 - tx]
"#;
    let errs = ThreadSync
        .run(parse(src), &common::cx())
        .expect_err("no barrier can be placed");
    assert_eq!(errs.len(), 1, "{errs:#?}");
    let d = &errs[0];
    assert_eq!(&src[d.span.start..d.span.end], "tx < 32");
    assert!(
        d.message
            .starts_with("this condition depends on the thread, but threads share memory"),
        "{}",
        d.message
    );
}

/// No valid case or example has a hazard left for the pass: it changes none of them (code
/// that synchronizes itself, such as the thread-level cases, is taken as written).
#[test]
fn the_corpus_needs_no_barrier_from_it() {
    let mut nests = 0;
    for (stem, func) in common::corpus() {
        nests += usize::from(print_func(&func).contains("T.thread_binding("));
        let out = ThreadSync.run(func.clone(), &common::cx()).expect(&stem);
        assert_eq!(out, func, "{stem}");
    }
    assert!(nests > 0);
}
