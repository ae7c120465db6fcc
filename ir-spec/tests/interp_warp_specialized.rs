//! Warp-specialized kernels in the thread-level interpreter (`interp/tasks.rs`): a producer
//! warpgroup and consumer warpgroups that run concurrently and talk only through mbarriers.
//!
//! The GEMMs of `data/ws_gemm_1c.tir` (one consumer warpgroup) and `data/ws_gemm_2c.tir`
//! (two) run on random inputs at ragged shapes and at trip counts of the K loop from 1 to
//! 10 around the 3 stages; each result is checked bit for bit against the documented wgmma
//! arithmetic (f32 sums over k-steps of 16 in order, the accumulator added last) and within
//! rounding against the tile-level GEMM (`data/ws_gemm_reference.tir`, which sums a block_K
//! of 32 at a time). Then the protocol's classic bugs, each reported with its facts — never
//! a hang, never a silent pass: a consumer that releases a stage before its `T.wgmma_wait`,
//! a producer that does not wait for the stage to be released, an `empty` barrier that
//! expects one arrival too many, a consumer that waits for the wrong parity.

use std::collections::HashMap;
use tlc_ir::interp::{random_tensor, run, RunOptions, Tensor};
use tlc_ir::{parse, DType, Diagnostic, PrimFunc};

const ONE: &str = include_str!("data/ws_gemm_1c.tir");
const TWO: &str = include_str!("data/ws_gemm_2c.tir");
const REFERENCE: &str = include_str!("data/ws_gemm_reference.tir");

fn func(src: &str) -> PrimFunc {
    let f = parse(src).unwrap_or_else(|d| panic!("does not parse: {d:#?}"));
    if let Err(d) = tlc_ir::verifier::verify(&f) {
        panic!("does not verify: {d:#?}");
    }
    f
}

/// Random float16 `A` (m × k) and `B` (k × n).
fn inputs((m, n, k): (usize, usize, usize), seed: u64) -> HashMap<String, Tensor> {
    let tensor = |name: &str, shape: [usize; 2]| {
        random_tensor(name, DType::Float16, &shape, seed).unwrap_or_else(|e| panic!("{e}"))
    };
    HashMap::from([
        ("A".to_string(), tensor("A", [m, k])),
        ("B".to_string(), tensor("B", [k, n])),
    ])
}

/// Runs `src` with M, N, K bound and `A`, `B` given; `C` comes back.
fn run_c(
    src: &str,
    (m, n, k): (usize, usize, usize),
    ins: &HashMap<String, Tensor>,
) -> Result<Vec<f64>, Diagnostic> {
    let dims = HashMap::from([
        ("M".to_string(), m as i64),
        ("N".to_string(), n as i64),
        ("K".to_string(), k as i64),
    ]);
    let opts = RunOptions {
        seed: 1,
        threads: 1,
    };
    let out = run(&func(src), &dims, ins.clone(), &opts)?;
    let c = out.get("C").expect("C is a parameter");
    assert_eq!(c.shape(), &[m, n]);
    Ok(c.to_f64())
}

/// C as the wgmmas compute it: per element, for each k-step of 16 (K padded with zeros to a
/// multiple of 32, as the TMA boxes are), the products summed in f32 in k order from 0,
/// then the accumulator added; rounded to float16 at the end.
fn wgmma_reference(a: &[f64], b: &[f64], (m, n, k): (usize, usize, usize)) -> Vec<f64> {
    let steps = k.div_ceil(32) * 2;
    let mut c = Vec::with_capacity(m * n);
    for i in 0..m {
        for j in 0..n {
            let mut acc = 0f32;
            for s in 0..steps {
                let mut sum = 0f32;
                for kk in s * 16..s * 16 + 16 {
                    let (x, y) = if kk < k {
                        (a[i * k + kk] as f32, b[kk * n + j] as f32)
                    } else {
                        (0.0, 0.0)
                    };
                    sum += x * y;
                }
                acc += sum;
            }
            c.push(half::f16::from_f32(acc).to_f64());
        }
    }
    c
}

/// Runs the warp-specialized kernel `src` at `shape` and checks it (module doc).
fn check(src: &str, shape: (usize, usize, usize)) {
    let (m, n, k) = shape;
    let ins = inputs(shape, 42 + (m * n * k) as u64);
    let got = run_c(src, shape, &ins).unwrap_or_else(|d| panic!("{shape:?}: {d}"));
    let a = ins["A"].to_f64();
    let b = ins["B"].to_f64();
    let exact = wgmma_reference(&a, &b, shape);
    let tile = run_c(REFERENCE, shape, &ins).unwrap_or_else(|d| panic!("{shape:?}: {d}"));
    for (e, ((&got, &want), &tile)) in got.iter().zip(&exact).zip(&tile).enumerate() {
        let (i, j) = (e / n, e % n);
        assert_eq!(
            got.to_bits(),
            want.to_bits(),
            "{shape:?}: C[{i}, {j}] = {got}, the wgmma order gives {want}"
        );
        // Both round each product and partial sum to f32 (in different orders) and the
        // result to float16.
        let s: f64 = (0..k).map(|kk| (a[i * k + kk] * b[kk * n + j]).abs()).sum();
        let tol = 2f64.powi(-22) * k as f64 * s + 2f64.powi(-10) * got.abs().max(tile.abs());
        assert!(
            (got - tile).abs() <= tol + 2f64.powi(-24),
            "{shape:?}: C[{i}, {j}] = {got}, the tile-level gemm gives {tile}"
        );
    }
}

#[test]
fn one_consumer_ragged_shape() {
    // K = 72: 3 k-tiles (= the stages), the last one ragged; M and N cut the tiles too.
    check(ONE, (200, 136, 72));
}

#[test]
fn one_consumer_trip_counts_around_the_stages() {
    // 1 k-tile (ragged), 2 (< stages), 3 (= stages), 10 (the ring wraps three times).
    for k in [24, 64, 96, 320] {
        check(ONE, (128, 128, k));
    }
}

#[test]
fn two_consumers_ragged_and_long() {
    check(TWO, (200, 136, 72));
    check(TWO, (264, 128, 320));
    check(TWO, (256, 120, 32));
}

/// `src` with `from` replaced by `to` (which must occur).
fn mutate(src: &str, from: &str, to: &str) -> String {
    assert!(src.contains(from), "the kernel has no `{from}`");
    src.replace(from, to)
}

/// The error of running `src` at `shape`.
fn error(src: &str, shape: (usize, usize, usize)) -> Diagnostic {
    let ins = inputs(shape, 3);
    match run_c(src, shape, &ins) {
        Ok(_) => panic!("the mutated kernel ran without an error"),
        Err(d) => d,
    }
}

/// The source line a span starts on, trimmed.
fn line_at(src: &str, at: usize) -> &str {
    let start = src[..at].rfind('\n').map_or(0, |i| i + 1);
    let end = src[at..].find('\n').map_or(src.len(), |i| at + i);
    src[start..end].trim()
}

const RELEASE_AFTER_WAIT: &str = "                    T.wgmma_wait(0)
                    if tx % 32 == 0:
                        T.mbarrier_arrive(empty[ko_1 % 3])
";

const RELEASE_BEFORE_WAIT: &str = "                    if tx % 32 == 0:
                        T.mbarrier_arrive(empty[ko_1 % 3])
                    T.wgmma_wait(0)
";

#[test]
fn releasing_a_stage_before_the_wgmma_wait_is_reported() {
    for src in [ONE, TWO] {
        let bad = mutate(src, RELEASE_AFTER_WAIT, RELEASE_BEFORE_WAIT);
        let d = error(&bad, (256, 128, 320));
        assert!(
            d.message.starts_with("`T.tma_load` writes shared byte")
                && d.message.contains(
                    "which a `T.wgmma` of warpgroup 0 reads: it may still be in flight, as its \
                     `T.wgmma_wait` does not happen before this write"
                ),
            "{d}"
        );
        assert!(
            line_at(&bad, d.span.start).starts_with("T.tma_load(A_shared"),
            "{d}"
        );
    }
}

#[test]
fn a_producer_that_does_not_wait_for_the_release_is_reported() {
    let no_wait = "                        if ko >= 3:
                            T.mbarrier_wait(empty[ko % 3], (ko // 3 + 1) % 2)
";
    for src in [ONE, TWO] {
        let bad = mutate(src, no_wait, "");
        let d = error(&bad, (128, 128, 320));
        assert!(
            d.message.contains(
                "which an earlier `T.tma_load` writes too; that one completes in phase 0 of the \
                 mbarrier at shared byte 0, which this thread does not know complete"
            ),
            "{d}"
        );
        assert!(
            line_at(&bad, d.span.start).starts_with("T.tma_load(A_shared"),
            "{d}"
        );
    }
}

#[test]
fn an_empty_barrier_expecting_too_many_arrivals_deadlocks() {
    let bad = mutate(
        ONE,
        "T.mbarrier_init(empty[0], 4)",
        "T.mbarrier_init(empty[0], 5)",
    );
    let d = error(&bad, (128, 128, 320));
    assert_eq!(
        d.message,
        "deadlock: `T.mbarrier_wait` waits for the phase of parity 0 of the mbarrier \
         `empty[0]`, which is in phase 0 with 1 of its 5 arrivals and 0 transaction bytes \
         pending; every unfinished thread is blocked: thread 128 waits here, and 128 more \
         threads in 1 other task (see the notes) (thread 128, block (0, 0))"
    );
    assert!(
        line_at(&bad, d.span.start).starts_with("T.mbarrier_wait(empty[ko % 3]"),
        "{d}"
    );
    assert_eq!(d.notes.len(), 1, "{d}");
    let note = &d.notes[0];
    assert_eq!(
        note.message,
        "threads 0-127 (128) wait here for the phase of parity 1 of the mbarrier `full[0]`, \
         which is in phase 1 with 1 of its 1 arrivals and 0 transaction bytes pending"
    );
    let at = note
        .span
        .expect("the note points at the consumers' wait")
        .start;
    assert!(line_at(&bad, at).starts_with("T.mbarrier_wait(full[ko_1 % 3]"));
}

#[test]
fn a_consumer_waiting_for_the_wrong_parity_deadlocks() {
    let wrong = "T.mbarrier_wait(full[ko_1 % 3], (ko_1 // 3 + 1) % 2)";
    let bad = mutate(ONE, "T.mbarrier_wait(full[ko_1 % 3], ko_1 // 3 % 2)", wrong);
    // The ring wraps: the producer waits for stage 0's release, which never comes.
    let d = error(&bad, (128, 128, 320));
    assert!(
        d.message.starts_with(
            "deadlock: `T.mbarrier_wait` waits for the phase of parity 0 of the mbarrier \
             `empty[0]`, which is in phase 0 with 4 of its 4 arrivals"
        ),
        "{d}"
    );
    assert_eq!(d.notes.len(), 1, "{d}");
    assert!(
        d.notes[0].message.starts_with(
            "threads 0-127 (128) wait here for the phase of parity 1 of the mbarrier `full[0]`"
        ),
        "{d}"
    );
    // One k-tile: the producer finishes, the consumers wait alone.
    let d = error(&bad, (128, 128, 32));
    assert_eq!(
        d.message,
        "deadlock: `T.mbarrier_wait` waits for the phase of parity 1 of the mbarrier \
         `full[0]`, which is in phase 1 with 1 of its 1 arrivals and 0 transaction bytes \
         pending; all 128 unfinished threads (threads 0-127) wait here, so none of them can \
         arrive (thread 0, block (0, 0))"
    );
    assert!(d.notes.is_empty(), "{d}");
    assert_eq!(line_at(&bad, d.span.start), wrong);
}

#[test]
fn two_consumers_both_release_each_stage() {
    // Only the first warpgroup's warps release a stage (`empty` expects their four
    // arrivals): the producer refills a stage whose wgmmas of the second warpgroup it knows
    // nothing about.
    let mut bad = mutate(TWO, "if tx % 32 == 0:", "if tx % 32 == 0 and tx < 128:");
    for s in 0..3 {
        bad = mutate(
            &bad,
            &format!("T.mbarrier_init(empty[{s}], 8)"),
            &format!("T.mbarrier_init(empty[{s}], 4)"),
        );
    }
    let d = error(&bad, (256, 128, 320));
    assert!(
        d.message.starts_with("`T.tma_load` writes shared byte")
            && d.message
                .contains("which a `T.wgmma` of warpgroup 1 reads: it may still be"),
        "{d}"
    );
    // Counting both warpgroups' arrivals on a barrier that expects four completes two phases
    // per stage: the producer's parity no longer matches (a hang on the GPU).
    let aliased = mutate(
        TWO,
        "T.mbarrier_init(empty[0], 8)",
        "T.mbarrier_init(empty[0], 4)",
    );
    let d = error(&aliased, (256, 128, 320));
    assert!(d.message.starts_with("deadlock: "), "{d}");
    assert!(
        d.notes.iter().any(|n| n.message
            == "thread 256 waits here for the phase of parity 0 of the mbarrier `empty[0]`, \
                which is in phase 2 with 4 of its 4 arrivals and 0 transaction bytes pending"),
        "{d}"
    );
}

/// A kernel of 256 threads whose thread-loop body is `body` (indented by 12).
fn small(body: &str) -> String {
    let body: String = body.lines().map(|l| format!("            {l}\n")).collect();
    format!(
        "@T.prim_func
def small(A: T.Tensor((256,), \"float32\")):
    with T.Kernel(1, threads=256) as bx:
        S = T.alloc_shared((256,), \"float32\")
        bars = T.alloc_shared((2,), \"int64\")
        for tx in T.thread_binding(256, thread=\"threadIdx.x\"):
{body}"
    )
}

fn run_small(src: &str) -> Result<Vec<f64>, Diagnostic> {
    let opts = RunOptions {
        seed: 1,
        threads: 1,
    };
    let out = run(&func(src), &HashMap::new(), HashMap::new(), &opts)?;
    Ok(out.get("A").map(Tensor::to_f64).unwrap_or_default())
}

#[test]
fn an_else_part_runs_while_the_then_part_waits() {
    // The then-threads wait for an arrival that only the else-threads make: lockstep alone
    // would deadlock; the scheduler runs the else-part, then the then-part, then both rejoin.
    let src = small(
        "if tx == 0:
    T.mbarrier_init(bars[0], 128)
T.sync_threads()
if tx < 128:
    T.mbarrier_wait(bars[0], 0)
    A[tx] = T.float32(1)
else:
    A[tx] = T.float32(2)
    T.mbarrier_arrive(bars[0])
A[tx] = A[tx] + T.float32(10)",
    );
    let a = run_small(&src).unwrap_or_else(|d| panic!("{d}"));
    for (t, &v) in a.iter().enumerate() {
        assert_eq!(v, if t < 128 { 11.0 } else { 12.0 }, "A[{t}]");
    }
}

#[test]
fn a_barrier_or_a_collective_in_a_divergent_task_is_an_error() {
    let src = small(
        "if tx == 0:
    T.mbarrier_init(bars[0], 1)
T.sync_threads()
if tx < 128:
    T.mbarrier_wait(bars[0], 0)
    T.sync_threads()
else:
    if tx == 128:
        T.mbarrier_arrive(bars[0])",
    );
    let d = run_small(&src).expect_err("a barrier in a task of 128 threads");
    assert!(
        d.message
            .starts_with("barrier reached by 128 of 256 threads"),
        "{d}"
    );
}

#[test]
fn ordinary_accesses_across_tasks_need_a_barrier() {
    // mbarriers order the async proxy's data (TMA, wgmma) in this model, not ordinary
    // loads and stores: a value handed over through `S` with only an mbarrier in between is
    // reported as a race.
    let src = small(
        "if tx == 0:
    T.mbarrier_init(bars[0], 1)
T.sync_threads()
if tx == 0:
    T.mbarrier_wait(bars[0], 0)
    A[0] = S[255]
else:
    if tx == 255:
        S[255] = T.float32(7)
        T.mbarrier_arrive(bars[0])",
    );
    let d = run_small(&src).expect_err("a race");
    assert!(
        d.message.starts_with(
            "data race on shared memory: this thread reads `S[255]`, which thread 255 wrote \
             with no `T.sync_threads()` in between"
        ),
        "{d}"
    );
}

const CLUSTER: &str = include_str!("data/ws_gemm_cluster.tir");

#[test]
fn a_cluster_pair_sharing_a_by_multicast() {
    // Two tiles along N (one cluster), the last ragged; then four (two clusters) with
    // ragged M and the ring wrapping three times; one k-tile.
    check(CLUSTER, (200, 200, 72));
    check(CLUSTER, (264, 456, 320));
    check(CLUSTER, (256, 256, 24));
}

#[test]
fn a_cluster_whose_consumers_release_only_their_own_block_is_reported() {
    // Each block's producer then overwrites the other block's stage while its consumers
    // may still read it.
    let own_only = mutate(
        &mutate(
            CLUSTER,
            "                        T.mbarrier_arrive_cluster(empty[ko_1 % 3], 0)
                        T.mbarrier_arrive_cluster(empty[ko_1 % 3], 1)
",
            "                        T.mbarrier_arrive(empty[ko_1 % 3])
",
        ),
        "], 16)",
        "], 8)",
    );
    let d = error(&own_only, (256, 256, 320));
    assert!(d.message.contains("wgmma"), "{d}");
    assert!(d.message.contains("of the cluster's block"), "{d}");
    assert!(
        line_at(&own_only, d.span.start).starts_with("T.tma_load(A_shared"),
        "{d}"
    );
}

#[test]
fn a_cluster_without_its_first_cluster_sync_is_reported() {
    // The first block's producer reaches the other block's barrier before that block has
    // initialized it.
    let bad = mutate(
        CLUSTER,
        "                T.fence_proxy_async()
            T.cluster_sync()",
        "                T.fence_proxy_async()
            T.sync_threads()",
    );
    let d = error(&bad, (256, 256, 64));
    assert!(
        d.message
            .contains("of the cluster's block 1 is used before `T.mbarrier_init`"),
        "{d}"
    );
}

#[test]
fn a_multicast_that_misses_a_block_deadlocks() {
    // Each half of A lands only in its loader's block: every `full` barrier waits for the
    // 8192 bytes of the other half forever.
    let bad = mutate(CLUSTER, "multicast=3", "multicast=0");
    let d = error(&bad, (256, 256, 64));
    assert!(d.message.contains("deadlock"), "{d}");
    assert!(d.message.contains("8192 transaction bytes pending"), "{d}");
}

#[test]
fn a_cluster_grid_of_a_partial_cluster_is_an_error() {
    // N = 300: three tiles along x, not a whole number of clusters of two.
    let d = error(CLUSTER, (256, 300, 64));
    assert!(
        d.message
            .contains("a grid of 3 blocks along x is not a whole number of clusters of 2"),
        "{d}"
    );
}
