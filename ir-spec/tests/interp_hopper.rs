//! The Hopper intrinsics in the interpreter: a TMA load of a (64, 64) float16 box with the
//! 128-byte swizzle from a tensor whose bounds cut the box (zero fill), completing on an
//! mbarrier that every thread waits on, then 128 threads running `T.wgmma` over the box in
//! four k-steps, checked element by element against a product computed here; and each
//! reported error (read before the wait, a wait that deadlocks, a tx underflow, a missing
//! `T.wgmma_fence`, reading the accumulator before `T.wgmma_wait`). `T.wgmma_rs` the same
//! way, with each thread's A registers loaded from global memory by the register-A map.

use std::collections::HashMap;
use tlc_ir::interp::{run, RunOptions, Tensor};
use tlc_ir::{parse, DType, Diagnostic, PrimFunc};

fn func(src: &str) -> PrimFunc {
    let f = parse(src).unwrap_or_else(|d| panic!("does not parse: {d:#?}\n{src}"));
    if let Err(d) = tlc_ir::verifier::verify(&f) {
        panic!("does not verify: {d:#?}\n{src}");
    }
    f
}

/// `A`: 100 rows of 64 float16, `B`: (64, 64) float16 — small values whose products and
/// sums are exact in f32, so the result is exact.
fn a_val(i: usize, k: usize) -> f64 {
    ((i * 7 + k * 3) % 11) as f64 - 5.0
}

fn b_val(n: usize, k: usize) -> f64 {
    (((n * 5 + k) % 7) as f64 - 3.0) * 0.5
}

fn inputs() -> HashMap<String, Tensor> {
    let a: Vec<f64> = (0..100 * 64).map(|x| a_val(x / 64, x % 64)).collect();
    let b: Vec<f64> = (0..64 * 64).map(|x| b_val(x / 64, x % 64)).collect();
    let mut m = HashMap::new();
    m.insert(
        "A".to_string(),
        Tensor::from_f64(DType::Float16, &[100, 64], &a).unwrap_or_else(|e| panic!("{e}")),
    );
    m.insert(
        "B".to_string(),
        Tensor::from_f64(DType::Float16, &[64, 64], &b).unwrap_or_else(|e| panic!("{e}")),
    );
    m
}

/// The kernel with the TMA part `load`, the wait `wait` and the MMA part `mma` (each a
/// block of lines inside the thread loop).
fn kernel(load: &str, wait: &str, mma: &str) -> String {
    let indent = |s: &str| -> String {
        s.lines()
            .map(|l| format!("            {l}\n"))
            .collect::<String>()
    };
    format!(
        "@T.prim_func
def hopper(A: T.Tensor((100, 64), \"float16\"), B: T.Tensor((64, 64), \"float16\"), C: T.Tensor((64, 64), \"float32\")):
    with T.Kernel(1, threads=128) as bx:
        SA = T.alloc_shared((64, 64), \"float16\")
        SB = T.alloc_shared((64, 64), \"float16\")
        bars = T.alloc_shared((1,), \"int64\")
        acc = T.alloc_local((32,), \"float32\")
        ra = T.alloc_local((32,), \"float16\")
        for tx in T.thread_binding(128, thread=\"threadIdx.x\"):
{}{}{}",
        indent(load),
        indent(wait),
        indent(mma)
    )
}

/// Thread 0 inits the barrier, announces both boxes' bytes and issues the two loads: A's
/// rows 60..124 (rows from 100 on lie outside `A`: zeros).
const LOAD: &str = "\
if tx == 0:
    T.mbarrier_init(bars[0], 1)
    T.mbarrier_arrive_expect_tx(bars[0], 16384)
    T.tma_load(SA[0, 0], A[60, 0], bars[0], box=(64, 64), swizzle=128)
    T.tma_load(SB[0, 0], B[0, 0], bars[0], box=(64, 64), swizzle=128)";

const WAIT: &str = "T.mbarrier_wait(bars[0], 0)";

/// Four k-steps of 16 over the swizzled K-major tiles (a k-step starts 32 bytes further),
/// then each thread stores its accumulators in the wgmma D layout.
const MMA: &str = "\
T.wgmma_fence()
for j in T.serial(4):
    T.wgmma(acc[0], SA[0, j * 16], SB[0, j * 16], n=64, a_swizzle=128, a_lbo=0, a_sbo=1024, b_swizzle=128, b_lbo=0, b_sbo=1024, accumulate=j > 0)
T.wgmma_commit()
T.wgmma_wait(0)
for i in T.serial(32):
    C[16 * (tx // 32) + tx % 32 // 4 + 8 * (i // 2 % 2), 8 * (i // 4) + 2 * (tx % 4) + i % 2] = acc[i]";

fn run_kernel(src: &str) -> Result<HashMap<String, Tensor>, Diagnostic> {
    let opts = RunOptions {
        seed: 7,
        threads: 1,
    };
    run(&func(src), &HashMap::new(), inputs(), &opts)
}

#[test]
fn tma_and_wgmma_compute_the_product() {
    let out = run_kernel(&kernel(LOAD, WAIT, MMA)).unwrap_or_else(|d| panic!("{d:#?}"));
    let c = out.get("C").map(Tensor::to_f64).unwrap_or_default();
    assert_eq!(c.len(), 64 * 64);
    let mut zero_rows = 0;
    for m in 0..64 {
        let row = 60 + m;
        if row >= 100 {
            zero_rows += 1;
        }
        for n in 0..64 {
            let want: f64 = (0..64)
                .map(|k| {
                    if row < 100 {
                        a_val(row, k) * b_val(n, k)
                    } else {
                        0.0
                    }
                })
                .sum();
            assert_eq!(c[m * 64 + n], want, "C[{m}, {n}]");
        }
    }
    assert_eq!(zero_rows, 24, "the box is cut by the tensor's end");
}

fn error(src: &str) -> String {
    run_kernel(src).expect_err("the run should fail").message
}

#[test]
fn reading_a_tma_destination_before_the_wait_is_an_error() {
    let m = error(&kernel(
        LOAD,
        "",
        "C[0, tx % 64] = T.cast(SA[1, tx % 64], \"float32\")",
    ));
    assert!(m.contains("which a `T.tma_load` writes"), "{m}");
    assert!(m.contains("missing `T.mbarrier_wait`"), "{m}");
}

#[test]
fn a_wait_on_an_incomplete_phase_deadlocks() {
    // Twice the bytes the loads bring: the phase never completes.
    let load = LOAD.replace("16384", "32768");
    let m = error(&kernel(&load, WAIT, MMA));
    assert!(
        m.starts_with(
            "deadlock: `T.mbarrier_wait` waits for the phase of parity 0 of the mbarrier `bars[0]`"
        ),
        "{m}"
    );
    assert!(
        m.contains("in phase 0 with 0 of its 1 arrivals and 16384 transaction bytes pending"),
        "{m}"
    );
    // Waiting for parity 1 on a fresh barrier returns at once (the producer's first wait).
    let init = "if tx == 0:\n    T.mbarrier_init(bars[0], 1)";
    let fresh = kernel(init, "T.mbarrier_wait(bars[0], 1)", "");
    if let Err(d) = run_kernel(&fresh) {
        panic!("{d:#?}");
    }
    // Once phase 0 has completed, waiting for parity 1 (phase 1) deadlocks.
    let m = error(&kernel(LOAD, "T.mbarrier_wait(bars[0], 1)", ""));
    assert!(
        m.contains("which is in phase 1 with 1 of its 1 arrivals"),
        "{m}"
    );
}

#[test]
fn a_negative_transaction_count_is_an_error() {
    // The count may dip below zero while the barrier's arrival is pending (a cluster's
    // multicast may land before the block announces its bytes): here the second box lands
    // in the next phase, which the wait does not cover — its bytes are read unobserved.
    let load = LOAD.replace("16384", "8192");
    let m = error(&kernel(&load, WAIT, MMA));
    assert!(
        m.contains("completes in phase 1 of the mbarrier at shared byte 16384, which this thread has not observed"),
        "{m}"
    );
    // With every arrival in, a count below zero is an error: the copies completed more
    // bytes than were announced.
    let late = "\
if tx == 0:
    T.mbarrier_init(bars[0], 1)
    T.tma_load(SA[0, 0], A[60, 0], bars[0], box=(64, 64), swizzle=128)
    T.tma_load(SB[0, 0], B[0, 0], bars[0], box=(64, 64), swizzle=128)
    T.mbarrier_arrive_expect_tx(bars[0], 8192)";
    let m = error(&kernel(late, WAIT, MMA));
    assert!(
        m.contains("has a negative transaction count (-8192) in phase 0 with all its arrivals in"),
        "{m}"
    );
    // Announced after its copies landed, the right count completes the phase.
    let announced_late = late.replace("8192)", "16384)");
    if let Err(d) = run_kernel(&kernel(&announced_late, WAIT, MMA)) {
        panic!("{d:#?}");
    }
}

#[test]
fn a_barrier_used_before_init_is_an_error() {
    let load = LOAD.replace("    T.mbarrier_init(bars[0], 1)\n", "");
    let m = error(&kernel(&load, WAIT, MMA));
    assert!(
        m.starts_with("the mbarrier `bars[0]` is used before `T.mbarrier_init`"),
        "{m}"
    );
}

#[test]
fn a_wgmma_needs_a_fence_after_ordinary_accumulator_writes() {
    let no_fence = MMA.replace("T.wgmma_fence()\n", "");
    let m = error(&kernel(LOAD, WAIT, &no_fence));
    assert!(
        m.contains("with no `T.wgmma_fence` of its warpgroup before it"),
        "{m}"
    );
    let write_after = MMA.replace("T.wgmma_fence()\n", "T.wgmma_fence()\nacc[3] = 0.0\n");
    let m = error(&kernel(LOAD, WAIT, &write_after));
    assert!(
        m.contains("reading `acc[3]`, which this thread wrote after the last `T.wgmma_fence`"),
        "{m}"
    );
}

#[test]
fn reading_the_accumulator_before_the_wait_is_an_error() {
    let early = MMA.replace("T.wgmma_wait(0)\n", "C[0, 0] = acc[5]\nT.wgmma_wait(0)\n");
    let m = error(&kernel(LOAD, WAIT, &early));
    assert!(
        m.starts_with(
            "this thread reads `acc[5]`, an operand register (accumulator or register A) of an \
             in-flight `T.wgmma` (missing `T.wgmma_wait`)"
        ),
        "{m}"
    );
    // Writing a tile the wgmma still reads is an error too.
    let overwrite = MMA.replace(
        "T.wgmma_wait(0)\n",
        "SB[0, tx % 64] = T.float16(0)\nT.wgmma_wait(0)\n",
    );
    let m = error(&kernel(LOAD, WAIT, &overwrite));
    assert!(
        m.contains("which an in-flight `T.wgmma` reads (missing `T.wgmma_wait`)"),
        "{m}"
    );
}

#[test]
fn a_wgmma_reading_another_threads_store_needs_a_barrier() {
    // Thread 5 overwrites an element of the A tile with an ordinary store; the wgmma (as the
    // warpgroup's first thread) reads it with no `T.sync_threads()` in between.
    let store = "if tx == 5:\n    SA[0, 0] = T.float16(1)\n";
    let m = error(&kernel(LOAD, WAIT, &format!("{store}{MMA}")));
    assert!(
        m.contains(
            "`T.wgmma` reads element (0, 0) of its A operand: shared byte 0, which thread 5 \
             wrote with no `T.sync_threads()` in between (a data race)"
        ),
        "{m}"
    );
    let synced = format!("{store}T.sync_threads()\n{MMA}");
    if let Err(d) = run_kernel(&kernel(LOAD, WAIT, &synced)) {
        panic!("{d:#?}");
    }
}

/// `T.wgmma_rs`: each thread loads its A registers for the four k-steps (8 per step) from
/// `A`'s rows 0..64 by register A's map, fences, and multiplies with the TMA-loaded B tile.
const MMA_RS: &str = "\
for j in T.serial(4):
    for e in T.serial(8):
        ra[8 * j + e] = A[16 * (tx // 32) + tx % 32 // 4 + 8 * (e // 2 % 2), 16 * j + 8 * (e // 4) + 2 * (tx % 4) + e % 2]
T.wgmma_fence()
for j in T.serial(4):
    T.wgmma_rs(acc[0], ra[8 * j], SB[0, j * 16], n=64, b_swizzle=128, b_lbo=0, b_sbo=1024, accumulate=j > 0)
T.wgmma_commit()
T.wgmma_wait(0)
for i in T.serial(32):
    C[16 * (tx // 32) + tx % 32 // 4 + 8 * (i // 2 % 2), 8 * (i // 4) + 2 * (tx % 4) + i % 2] = acc[i]";

#[test]
fn wgmma_rs_takes_a_from_registers() {
    let out = run_kernel(&kernel(LOAD, WAIT, MMA_RS)).unwrap_or_else(|d| panic!("{d:#?}"));
    let c = out.get("C").map(Tensor::to_f64).unwrap_or_default();
    assert_eq!(c.len(), 64 * 64);
    for m in 0..64 {
        for n in 0..64 {
            let want: f64 = (0..64).map(|k| a_val(m, k) * b_val(n, k)).sum();
            assert_eq!(c[m * 64 + n], want, "C[{m}, {n}]");
        }
    }
}

#[test]
fn wgmma_rs_registers_are_fenced_and_held_until_the_wait() {
    // A register A written after the fence: the wgmma may read the old value.
    let late = MMA_RS.replace(
        "T.wgmma_fence()\n",
        "T.wgmma_fence()\nra[9] = T.float16(1)\n",
    );
    let m = error(&kernel(LOAD, WAIT, &late));
    assert!(
        m.contains("reading `ra[9]`, which this thread wrote after the last `T.wgmma_fence`"),
        "{m}"
    );
    // Overwriting register A before the wait retires the op.
    let early = MMA_RS.replace(
        "T.wgmma_wait(0)\n",
        "ra[3] = T.float16(0)\nT.wgmma_wait(0)\n",
    );
    let m = error(&kernel(LOAD, WAIT, &early));
    assert!(
        m.starts_with(
            "this thread writes `ra[3]`, an operand register (accumulator or register A)"
        ),
        "{m}"
    );
}

#[test]
fn wgmma_rs_of_one_group_may_share_register_a() {
    // N split into two wgmmas of 32 columns that read the same register A in one group:
    // the same product as one of 64 (as PTX allows several wgmmas to read one A).
    let split = MMA_RS.replace(
        "    T.wgmma_rs(acc[0], ra[8 * j], SB[0, j * 16], n=64, b_swizzle=128, b_lbo=0, b_sbo=1024, accumulate=j > 0)",
        "    T.wgmma_rs(acc[0], ra[8 * j], SB[0, j * 16], n=32, b_swizzle=128, b_lbo=0, b_sbo=1024, accumulate=j > 0)\n    T.wgmma_rs(acc[16], ra[8 * j], SB[32, j * 16], n=32, b_swizzle=128, b_lbo=0, b_sbo=1024, accumulate=j > 0)",
    );
    assert_ne!(split, MMA_RS);
    let out = run_kernel(&kernel(LOAD, WAIT, &split)).unwrap_or_else(|d| panic!("{d:#?}"));
    let c = out.get("C").map(Tensor::to_f64).unwrap_or_default();
    for m in 0..64 {
        for n in 0..64 {
            let want: f64 = (0..64).map(|k| a_val(m, k) * b_val(n, k)).sum();
            assert_eq!(c[m * 64 + n], want, "C[{m}, {n}]");
        }
    }
}
