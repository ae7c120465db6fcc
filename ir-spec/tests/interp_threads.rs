//! The thread-level interpreter: lockstep threads with active masks, barriers, per-thread
//! registers, the shared byte arena and its race check. Thread-level kernels are compared
//! with the tile-level version of the same computation on random inputs.

use std::collections::HashMap;
use std::time::{Duration, Instant};
use tlc_ir::interp::{run, RunOptions, Scalar, Tensor};
use tlc_ir::{parse, Diagnostic, PrimFunc};

fn case(name: &str) -> String {
    let path = format!(
        "{}/../tests/cases/valid/{name}.tir",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn func(src: &str) -> PrimFunc {
    let f = parse(src).unwrap_or_else(|d| panic!("does not parse: {d:#?}\n{src}"));
    if let Err(d) = tlc_ir::verifier::verify(&f) {
        panic!("does not verify: {d:#?}\n{src}");
    }
    f
}

fn run_with(
    f: &PrimFunc,
    seed: u64,
    threads: usize,
) -> Result<HashMap<String, Tensor>, Diagnostic> {
    let opts = RunOptions { seed, threads };
    run(f, &HashMap::new(), HashMap::new(), &opts)
}

fn outputs(src: &str, seed: u64) -> HashMap<String, Tensor> {
    run_with(&func(src), seed, 0).unwrap_or_else(|d| panic!("run failed: {d:#?}"))
}

/// The error of a run, the same with one host thread and with several.
fn error(src: &str) -> Diagnostic {
    let f = func(src);
    let one = run_with(&f, 1, 1).expect_err("the run should fail");
    let many = run_with(&f, 1, 4).expect_err("the run should fail");
    assert_eq!(one.message, many.message);
    one
}

fn values(t: &Tensor) -> Vec<f64> {
    t.to_f64()
}

fn get<'a>(out: &'a HashMap<String, Tensor>, name: &str) -> &'a Tensor {
    out.get(name)
        .unwrap_or_else(|| panic!("no output `{name}`"))
}

#[test]
fn tvmscript_thread_variables_run_per_thread() {
    // `tx` / `ty` used in a TVMScript kernel body: every thread runs it with its own index.
    let src = "@T.prim_func\ndef g(A: T.Buffer((128,), \"float32\")):\n    bx = T.launch_thread(\"blockIdx.x\", 2)\n    tx = T.launch_thread(\"threadIdx.x\", 32)\n    ty = T.launch_thread(\"threadIdx.y\", 2)\n    with T.block(\"tilelang_root\"):\n        A[bx * 64 + ty * 32 + tx] = T.Cast(\"float32\", ty * 32 + tx) + T.float32(0.5)\n";
    let out = outputs(src, 3);
    let want: Vec<f64> = (0..128).map(|i| f64::from(i % 64) + 0.5).collect();
    assert_eq!(values(get(&out, "A")), want);
}

const TILE_TRANSPOSE: &str = r#"@T.prim_func
def tile_transpose(
    A: T.Tensor((256, 256), "float32"),
    B: T.Tensor((256, 256), "float32"),
):
    with T.Kernel(4, 4, threads=512) as (bx, by):
        S = T.alloc_shared((64, 64), "float32")
        T.copy(A[by * 64, bx * 64], S)
        for i, j in T.Parallel(64, 64):
            B[bx * 64 + i, by * 64 + j] = S[j, i]
"#;

#[test]
fn thread_transpose_matches_the_tile_level_and_is_fast() {
    let thread = func(&case("thread_transpose"));
    for seed in [1, 2] {
        let start = Instant::now();
        let out = run_with(&thread, seed, 1).unwrap_or_else(|d| panic!("{d:#?}"));
        let elapsed = start.elapsed();
        eprintln!("thread_transpose, 16 blocks of 512 threads, one host thread: {elapsed:?}");
        // 16 blocks of 512 threads: the bound is loose for a loaded debug build; a single
        // block takes a small fraction of it.
        assert!(elapsed < Duration::from_secs(8), "took {elapsed:?}");
        let tile = outputs(TILE_TRANSPOSE, seed);
        assert_eq!(values(get(&out, "B")), values(get(&tile, "B")));
        let (a, b) = (values(get(&out, "A")), values(get(&out, "B")));
        for (i, j) in [(0, 0), (3, 200), (255, 1), (70, 130)] {
            assert_eq!(b[i * 256 + j], a[j * 256 + i], "B[{i}, {j}]");
        }
    }
}

const TILE_VECTORIZED: &str = r#"@T.prim_func
def tile_scale(
    X: T.Tensor((1024, 64), "float16"),
    Y: T.Tensor((1024, 64), "float32"),
):
    with T.Kernel(8, threads=128) as bx:
        for i, j in T.Parallel(128, 64):
            Y[bx * 128 + i, j] = T.cast(X[bx * 128 + i, j], "float32") * 2.0 + 1.0
"#;

#[test]
fn thread_vectorized_matches_the_tile_level() {
    for seed in [3, 4] {
        let thread = outputs(&case("thread_vectorized"), seed);
        let tile = outputs(TILE_VECTORIZED, seed);
        assert_eq!(values(get(&thread, "Y")), values(get(&tile, "Y")));
        assert_eq!(values(get(&thread, "X")), values(get(&tile, "X")));
    }
}

#[test]
fn lockstep_masks_for_divergent_loops_and_ifs() {
    // Thread t sums 0..t%5 in a register, then writes it (odd threads negate it).
    let src = r#"@T.prim_func
def f(O: T.Tensor((64,), "int32")):
    with T.Kernel(1, threads=64) as bx:
        acc = T.alloc_local((1,), "int32")
        for tx in T.thread_binding(64, thread="threadIdx.x"):
            acc[0] = 0
            for k in T.serial(tx % 5):
                acc[0] = acc[0] + k
            n = acc[0]
            if tx % 2 == 1:
                O[tx] = -n
            else:
                O[tx] = n
"#;
    let out = outputs(src, 0);
    let want: Vec<f64> = (0..64i64)
        .map(|t| {
            let s: i64 = (0..t % 5).sum();
            (if t % 2 == 1 { -s } else { s }) as f64
        })
        .collect();
    assert_eq!(values(get(&out, "O")), want);
}

#[test]
fn two_dimensional_blocks_bind_each_axis() {
    let src = r#"@T.prim_func
def f(O: T.Tensor((2, 4, 32), "int32")):
    with T.Kernel(2, threads=(32, 4)) as bx:
        for ty in T.thread_binding(4, thread="threadIdx.y"):
            for tx in T.thread_binding(32, thread="threadIdx.x"):
                O[bx, ty, tx] = bx * 1000 + ty * 100 + tx
"#;
    let out = outputs(src, 0);
    let o = values(get(&out, "O"));
    for (b, y, x) in [(0, 0, 0), (1, 3, 31), (0, 2, 7), (1, 1, 16)] {
        assert_eq!(o[b * 128 + y * 32 + x], (b * 1000 + y * 100 + x) as f64);
    }
}

#[test]
fn local_buffers_are_per_thread_and_shared_ones_per_block() {
    // Every thread writes its own index to acc[0] and to S[tx]; after a barrier thread t reads
    // acc[0] (its own: t) and S[63 - t] (another thread's: 63 - t).
    let src = r#"@T.prim_func
def f(O: T.Tensor((64, 2), "int32")):
    with T.Kernel(1, threads=64) as bx:
        S = T.alloc_shared((64,), "int32")
        acc = T.alloc_local((1,), "int32")
        for tx in T.thread_binding(64, thread="threadIdx.x"):
            acc[0] = tx
            S[tx] = tx
            T.sync_threads()
            O[tx, 0] = acc[0]
            O[tx, 1] = S[63 - tx]
"#;
    let out = outputs(src, 0);
    let o = values(get(&out, "O"));
    for t in 0..64 {
        assert_eq!((o[2 * t], o[2 * t + 1]), (t as f64, (63 - t) as f64));
    }
}

#[test]
fn barrier_in_divergent_code_is_an_error() {
    let src = r#"@T.prim_func
def f(O: T.Tensor((128,), "float32")):
    with T.Kernel(2, 2, threads=128) as (bx, by):
        for tx in T.thread_binding(128, thread="threadIdx.x"):
            if tx < 64:
                T.sync_threads()
            O[tx] = 1.0
"#;
    let d = error(src);
    assert_eq!(
        d.message,
        "barrier reached by 64 of 128 threads (block (0, 0))"
    );
    let at = src.find("T.sync_threads()").unwrap_or(0);
    assert_eq!(
        (d.span.start, d.span.end),
        (at, at + "T.sync_threads()".len())
    );

    // A loop whose trip count differs between threads: the second iteration is divergent.
    let src = r#"@T.prim_func
def f(O: T.Tensor((32,), "float32")):
    with T.Kernel(1, threads=32) as bx:
        for tx in T.thread_binding(32, thread="threadIdx.x"):
            for k in T.serial(tx % 2 + 1):
                T.sync_threads()
            O[tx] = 1.0
"#;
    assert_eq!(
        error(src).message,
        "barrier reached by 16 of 32 threads (block 0)"
    );
}

#[test]
fn overlapping_arena_buffers_are_reported() {
    // S (f32) and R (f16) share bytes 0..256: writing R[0..128] overwrites S[0..64] while S
    // still holds values read later. The plan passes the verifier (lifetimes may overlap in
    // principle); the interpreter reports the read of a value written through another buffer
    // (on a GPU: garbage), at the read.
    let src = r#"@T.prim_func
def f(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
    with T.Kernel(1, threads=128) as bx:
        S = T.alloc_shared((128,), "float32")
        R = T.alloc_shared((128,), "float16")
        T.shared_arena(bytes=512, offsets={S: 0, R: 0})
        for tx in T.thread_binding(128, thread="threadIdx.x"):
            S[tx] = A[tx]
            T.sync_threads()
            R[tx] = 1.0
            T.sync_threads()
            B[tx] = S[tx]
"#;
    let e = error(src);
    assert_eq!(
        e.message,
        "this thread reads `S[0]`, whose bytes were last written as `R`: the two shared buffers \
         share bytes in the arena while `S` still holds a value that is read (thread 0, block 0)"
    );
    assert_eq!(&src[e.span.start..e.span.end], "B[tx] = S[tx]");
    // The same kernel with disjoint offsets copies A exactly.
    let fixed = src
        .replace("R: 0}", "R: 512}")
        .replace("bytes=512", "bytes=768");
    let out = outputs(&fixed, 5);
    assert_eq!(values(get(&out, "B")), values(get(&out, "A")));
    // S dead once R is written (its last read before R's writes): no error, and B holds R's
    // bytes read as R.
    let reuse = src.replace("B[tx] = S[tx]", "B[tx] = R[tx]");
    let out = outputs(&reuse, 5);
    assert!(values(get(&out, "B")).iter().all(|&v| v == 1.0));
}

#[test]
fn shared_reads_without_a_barrier_are_data_races() {
    let src = r#"@T.prim_func
def f(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
    with T.Kernel(1, threads=128) as bx:
        S = T.alloc_shared((128,), "float32")
        for tx in T.thread_binding(128, thread="threadIdx.x"):
            S[tx] = A[tx]
            B[tx] = S[127 - tx]
"#;
    let d = error(src);
    assert_eq!(
        d.message,
        "data race on shared memory: this thread reads `S[127]`, which thread 127 wrote with \
         no `T.sync_threads()` in between (thread 0, block 0)"
    );
    // Write after read: thread 127 reads S[0], then thread 0 overwrites it in the same epoch.
    let src = r#"@T.prim_func
def f(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
    with T.Kernel(1, threads=128) as bx:
        S = T.alloc_shared((128,), "float32")
        for tx in T.thread_binding(128, thread="threadIdx.x"):
            S[tx] = A[tx]
            T.sync_threads()
            B[tx] = S[(tx + 1) % 128]
            S[tx] = 0.0
"#;
    assert_eq!(
        error(src).message,
        "data race on shared memory: this thread writes `S[0]`, which thread 127 read with no \
         `T.sync_threads()` in between (thread 0, block 0)"
    );
}

/// Plain stores of the same bytes to the same element by several threads between two
/// barriers are no race (PTX's memory model: a uniform-size race of equal values); other
/// values, other sizes, or a read by another thread are.
#[test]
fn same_value_stores_of_many_threads_are_no_race_other_overlaps_are() {
    let src = r#"@T.prim_func
def f(A: T.Tensor((16,), "float16"), B: T.Tensor((128,), "float16")):
    with T.Kernel(1, threads=128) as bx:
        S = T.alloc_shared((16,), "float16")
        for tx in T.thread_binding(128, thread="threadIdx.x"):
            for k in T.serial(16):
                S[k] = A[k]
            T.sync_threads()
            B[tx] = S[tx % 16]
"#;
    let out = outputs(src, 3);
    let (a, b) = (values(get(&out, "A")), values(get(&out, "B")));
    for t in 0..128 {
        assert_eq!(b[t], a[t % 16], "B[{t}]");
    }
    // Different values: thread 1 overwrites thread 0's S[0].
    let different = src.replace("S[k] = A[k]", "S[k] = A[k] + T.cast(tx, \"float16\")");
    assert_eq!(
        error(&different).message,
        "data race on shared memory: this thread writes `S[0]`, which thread 0 also wrote with \
         no `T.sync_threads()` in between (thread 1, block 0)"
    );
    // The same value read back by another thread before a barrier is still a race.
    let read = src.replace("            T.sync_threads()\n", "");
    assert!(
        error(&read)
            .message
            .starts_with("data race on shared memory: this thread reads `S[0]`"),
        "{}",
        error(&read).message
    );
    // The same bytes at another element size: a 4-byte store over two 2-byte ones.
    let mixed = r#"@T.prim_func
def f(A: T.Tensor((2,), "float32"), B: T.Tensor((128,), "float32")):
    with T.Kernel(1, threads=128) as bx:
        S = T.alloc_shared((2,), "float32")
        H = T.alloc_shared((4,), "float16")
        T.shared_arena(bytes=16, offsets={S: 0, H: 0})
        for tx in T.thread_binding(128, thread="threadIdx.x"):
            if tx == 0:
                H[0] = T.float16(0)
                H[1] = T.float16(0)
            if tx == 1:
                S[0] = 0.0
            T.sync_threads()
            B[tx] = 1.0
"#;
    assert!(
        error(mixed)
            .message
            .starts_with("data race on shared memory: this thread writes"),
        "{}",
        error(mixed).message
    );
}

#[test]
fn reads_of_never_written_registers_and_shared_memory_are_errors() {
    let src = r#"@T.prim_func
def f(B: T.Tensor((128,), "float32")):
    with T.Kernel(1, threads=128) as bx:
        acc = T.alloc_local((4,), "float32")
        for tx in T.thread_binding(128, thread="threadIdx.x"):
            if tx == 0:
                acc[1] = 1.0
            B[tx] = acc[1]
"#;
    // Thread 0 wrote its own acc[1]; thread 1's copy was never written.
    assert_eq!(
        error(src).message,
        "`acc[1]` is read but was never written (thread 1, block 0)"
    );
    let src = r#"@T.prim_func
def f(B: T.Tensor((128,), "float32")):
    with T.Kernel(1, threads=128) as bx:
        S = T.alloc_shared((128,), "float16")
        T.shared_arena(bytes=256, offsets={S: 0})
        for tx in T.thread_binding(128, thread="threadIdx.x"):
            if tx < 127:
                S[tx] = 1.0
            T.sync_threads()
            B[tx] = S[127 - tx]
"#;
    assert_eq!(
        error(src).message,
        "`S[127]` is read but was never written (thread 0, block 0)"
    );
}

#[test]
fn thread_level_structure_errors() {
    // A local the block writes and the threads only read holds one value for the block
    // (what every thread's copy holds once thread-binding moves the write inside the loop).
    let src = r#"@T.prim_func
def f(B: T.Tensor((128,), "float32")):
    with T.Kernel(1, threads=128) as bx:
        acc = T.alloc_local((1,), "float32")
        acc[0] = 1.0
        for tx in T.thread_binding(128, thread="threadIdx.x"):
            B[tx] = acc[0]
"#;
    assert_eq!(values(get(&outputs(src, 1), "B")), vec![1.0; 128]);
    // A per-thread buffer (written by the threads) used by block-level code.
    let src = r#"@T.prim_func
def f(B: T.Tensor((128,), "float32")):
    with T.Kernel(1, threads=128) as bx:
        acc = T.alloc_local((1,), "float32")
        for tx in T.thread_binding(128, thread="threadIdx.x"):
            acc[0] = T.cast(tx, "float32")
        B[0] = acc[0]
"#;
    let d = error(src);
    assert!(
        d.message.contains("`acc` is a per-thread buffer"),
        "{}",
        d.message
    );
    // A thread loop wider than the block.
    let src = r#"@T.prim_func
def f(B: T.Tensor((256,), "float32")):
    with T.Kernel(1, threads=128) as bx:
        for tx in T.thread_binding(256, thread="threadIdx.x"):
            B[tx] = 1.0
"#;
    assert_eq!(
        error(src).message,
        "thread loop has 256 iterations but the block has 128 threads along x (block 0)"
    );
}

#[test]
fn a_narrower_thread_loop_masks_the_other_threads() {
    // 64 of the 128 threads run the body; B[64..] keeps its input values.
    let src = r#"@T.prim_func
def f(B: T.Tensor((128,), "int32")):
    with T.Kernel(1, threads=128) as bx:
        for tx in T.thread_binding(64, thread="threadIdx.x"):
            B[tx] = tx
"#;
    let f = func(src);
    let before = tlc_ir::interp::random_tensor("B", tlc_ir::DType::Int32, &[128], 9)
        .unwrap_or_else(|e| panic!("{e}"));
    let out = run(
        &f,
        &HashMap::new(),
        HashMap::from([("B".to_string(), before.clone())]),
        &RunOptions::default(),
    )
    .unwrap_or_else(|d| panic!("{d:#?}"));
    let b = get(&out, "B");
    for t in 0..128 {
        let want = if t < 64 {
            Scalar::Int(t as i64)
        } else {
            before.get(t).unwrap_or(Scalar::Int(0))
        };
        assert_eq!(b.get(t), Some(want), "B[{t}]");
    }
}

/// Two thread-level kernels: the second reads, mirrored across blocks, what the first wrote.
const TWO_KERNELS: &str = r#"@T.prim_func
def two_kernels(
    A: T.Tensor((128,), "float32"),
    B: T.Tensor((128,), "float32"),
    C: T.Tensor((128,), "float32"),
):
    with T.Kernel(2, threads=64) as bx:
        for tx in T.thread_binding(64, thread="threadIdx.x"):
            B[bx * 64 + tx] = A[bx * 64 + tx] * 2.0
    with T.Kernel(4, threads=32) as bx:
        for tx in T.thread_binding(32, thread="threadIdx.x"):
            C[bx * 32 + tx] = B[127 - bx * 32 - tx] + 1.0
"#;

#[test]
fn kernels_run_in_program_order() {
    for threads in [1, 4] {
        let out = run_with(&func(TWO_KERNELS), 5, threads)
            .unwrap_or_else(|d| panic!("run failed: {d:#?}"));
        let a = values(get(&out, "A"));
        let want_b: Vec<f64> = a.iter().map(|x| (*x as f32 * 2.0) as f64).collect();
        assert_eq!(values(get(&out, "B")), want_b);
        let want_c: Vec<f64> = (0..128)
            .map(|i| (want_b[127 - i] as f32 + 1.0) as f64)
            .collect();
        assert_eq!(values(get(&out, "C")), want_c, "{threads} host threads");
    }
}

#[test]
fn notes_mean_nothing_at_either_level() {
    // `notes.tir`: a tile-level gemm and a thread-level kernel with notes in every place a
    // statement may be (outside the kernels, in loops of every kind, in divergent code).
    let noted = func(&case("notes"));
    let mut plain = noted.clone();
    let removed = tlc_ir::visit::take_notes(&mut plain.body);
    assert_eq!(removed.len(), 12, "{removed:?}");
    assert!(!tlc_ir::printer::print_func(&plain).contains("T.note("));
    for seed in [1, 2] {
        let (a, b) = (
            run_with(&noted, seed, 0).unwrap_or_else(|d| panic!("{d:#?}")),
            run_with(&plain, seed, 0).unwrap_or_else(|d| panic!("{d:#?}")),
        );
        for name in ["C", "D"] {
            assert_eq!(values(get(&a, name)), values(get(&b, name)), "{name}");
        }
    }
}

/// A `while` whose condition differs per thread: each thread loops until its own condition
/// fails (a divergent loop), and a barrier after the loop joins them all again.
#[test]
fn a_divergent_while_loop_runs_each_thread_its_own_trip_count() {
    let src = "@T.prim_func\ndef w(A: T.Tensor((64,), \"int32\")):\n    with T.Kernel(1, threads=64) as bx:\n        S = T.alloc_shared((64,), \"int32\")\n        for tx in T.thread_binding(64, thread=\"threadIdx.x\"):\n            S[tx] = 0\n            while S[tx] * 3 < tx:\n                S[tx] = S[tx] + 1\n            T.sync_threads()\n            A[tx] = S[63 - tx]\n";
    let out = outputs(src, 1);
    let want: Vec<f64> = (0..64).map(|t: i64| ((63 - t + 2) / 3) as f64).collect();
    assert_eq!(values(get(&out, "A")), want);
}

/// A `while` that does not end is stopped with a located error, at the tile level and per
/// thread.
#[test]
fn a_while_loop_that_does_not_end_is_reported() {
    let tile = "@T.prim_func\ndef w(A: T.Tensor((4,), \"int32\")):\n    with T.Kernel(1, threads=32) as bx:\n        A[0] = 0\n        while A[0] >= 0:\n            A[1] = 1\n";
    let e = error(tile);
    assert!(
        e.message.contains("without its condition becoming false"),
        "{e:?}"
    );
    assert_eq!(&tile[e.span.start..e.span.start + 5], "while");
    let thread = "@T.prim_func\ndef w(A: T.Tensor((32,), \"int32\")):\n    with T.Kernel(1, threads=32) as bx:\n        for tx in T.thread_binding(32, thread=\"threadIdx.x\"):\n            A[tx] = 0\n            while A[tx] <= tx:\n                A[tx] = A[tx] + T.if_then_else(tx == 5, 0, 1)\n";
    let e = error(thread);
    assert!(
        e.message.contains("without its condition becoming false"),
        "{e:?}"
    );
    assert_eq!(&thread[e.span.start..e.span.start + 5], "while");
}

#[test]
fn a_named_barrier_orders_its_threads_only() {
    // The case: threads 0..256 exchange values through shared memory behind barrier 1.
    let src = case("named_barrier");
    let out = outputs(&src, 3);
    let (a, r) = (values(get(&out, "A")), values(get(&out, "R")));
    assert_eq!(r[0], a[255] * 2.0);
    // Without the barrier, the read of another thread's store is a race.
    let racy = src.replace("                T.bar_sync(1, 256)\n", "");
    assert!(
        error(&racy).message.contains("data race on shared memory"),
        "{}",
        error(&racy).message
    );
    // A thread outside the barrier is not ordered by it: the last warpgroup reading what
    // thread 0 stored (after its own barrier-free code) is a race.
    let outsider = src.replace(
        "B[tx - 256] = T.cast(tx, \"float32\")",
        "B[tx - 256] = S[0]",
    );
    let m = error(&outsider).message;
    assert!(m.contains("which thread 0 wrote"), "{m}");
    // More threads than the count reach it together.
    let short = src.replace("T.bar_sync(1, 256)", "T.bar_sync(1, 128)");
    assert_eq!(
        error(&short).message,
        "`T.bar_sync(1, 128)` reached together by 256 threads, more than its count 128 (block 0)"
    );
    // Not whole warps: 250 threads reach it.
    let ragged = src.replace("if tx < 256:", "if tx < 250:");
    assert_eq!(
        error(&ragged).message,
        "`T.bar_sync(1, 256)` reached together by 250 threads (not whole warps) (block 0)"
    );
    // Fewer than the count, and no other arrival: they wait forever.
    let alone = src.replace("T.bar_sync(1, 256)", "T.bar_sync(1, 288)");
    let m = error(&alone).message;
    assert!(
        m.starts_with(
            "deadlock: `T.bar_sync(1, 288)` waits for its phase to complete, which has 256 of its 288 arrivals"
        ),
        "{m}"
    );
}

/// Two warpgroups take turns through a ring of two named barriers (FlashAttention-3's
/// ping-pong): each syncs on its own barrier, works, and arrives on the other's; the first
/// pre-arrives on its own once. The barriers order the turns (each `R` row records the
/// turn it was written in, from a shared counter only the running warpgroup touches —
/// through global memory, which the race check does not model), not memory: a value
/// passed through shared memory on them is a race.
#[test]
fn named_barriers_ping_pong_between_branches() {
    let src = r#"@T.prim_func
def pingpong(R: T.Tensor((2, 4), "int32"), C: T.Tensor((1,), "int32")):
    with T.Kernel(1, threads=256) as bx:
        for tx in T.thread_binding(256, thread="threadIdx.x"):
            if tx == 0:
                C[0] = 0
            T.sync_threads()
            if tx < 128:
                T.bar_arrive(2, 256)
                for k in T.serial(4):
                    T.bar_sync(2, 256)
                    if tx == 0:
                        R[0, k] = C[0]
                        C[0] = C[0] + 1
                    T.bar_arrive(3, 256)
            else:
                for k in T.serial(4):
                    T.bar_sync(3, 256)
                    if tx == 128:
                        R[1, k] = C[0]
                        C[0] = C[0] + 1
                    if k < 3:
                        T.bar_arrive(2, 256)
"#;
    let out = outputs(src, 1);
    assert_eq!(
        values(get(&out, "R")),
        vec![0.0, 2.0, 4.0, 6.0, 1.0, 3.0, 5.0, 7.0]
    );
    // Without the first warpgroup's arrival on its own barrier, neither can start.
    let stuck = src.replacen("                T.bar_arrive(2, 256)\n", "", 1);
    let m = error(&stuck).message;
    assert!(
        m.starts_with(
            "deadlock: `T.bar_sync(2, 256)` waits for its phase to complete, which has 128 of its 256 arrivals"
        ),
        "{m}"
    );
    // One phase, one count.
    let mixed = src.replace(
        "                        T.bar_arrive(2, 256)",
        "                        T.bar_arrive(2, 128)",
    );
    assert_ne!(mixed, src);
    let m = error(&mixed).message;
    assert!(m.contains("one phase has one count"), "{m}");
    // The protocol inside an outer loop whose inner loop may not run (h = 0): the first
    // turn's arrival only when the loop runs, as warp-specialize writes it; unguarded, the
    // unmatched arrival completes a phase of its own at h = 1 and every turn after is off
    // by one.
    let nested = r#"@T.prim_func
def nested(R: T.Tensor((2, 8), "float32"), C: T.Tensor((1,), "float32")):
    with T.Kernel(1, threads=256) as bx:
        for tx in T.thread_binding(256, thread="threadIdx.x"):
            if tx == 0:
                C[0] = 0.0
            T.sync_threads()
            for h in T.serial(3):
                if tx < 128:
                    if 1 < h + 1:
                        T.bar_arrive(2, 256)
                    for k in T.serial(1, h + 1):
                        T.bar_sync(2, 256)
                        if tx == 0:
                            R[0, h * 2 + k] = C[0]
                            C[0] = C[0] + 1.0
                        T.bar_arrive(3, 256)
                else:
                    for k in T.serial(1, h + 1):
                        T.bar_sync(3, 256)
                        if tx == 128:
                            R[1, h * 2 + k] = C[0]
                            C[0] = C[0] + 1.0
                        if k + 1 < h + 1:
                            T.bar_arrive(2, 256)
"#;
    let out = outputs(nested, 1);
    let r = values(get(&out, "R"));
    // h = 1: one turn each (0, 1); h = 2: two each (2, 4 and 3, 5).
    assert_eq!((r[3], r[11]), (0.0, 1.0), "{r:?}");
    assert_eq!((r[5], r[6], r[13], r[14]), (2.0, 4.0, 3.0, 5.0), "{r:?}");
    let unguarded = nested.replace(
        "                    if 1 < h + 1:\n                        T.bar_arrive(2, 256)\n",
        "                    T.bar_arrive(2, 256)\n",
    );
    assert_ne!(unguarded, nested);
    assert!(error(&unguarded).message.starts_with("deadlock: "));
    // More arrivals than the phase has room for: on the GPU half of the syncing warps would
    // pass with it and the others wait for the next phase.
    let over = r#"@T.prim_func
def over(S: T.Tensor((256,), "float32"), O: T.Tensor((256,), "float32")):
    with T.Kernel(1, threads=256) as bx:
        A = T.alloc_shared((256,), "float32")
        for tx in T.thread_binding(256, thread="threadIdx.x"):
            if tx < 128:
                T.bar_arrive(2, 256)
            A[tx] = S[tx]
            T.bar_sync(2, 256)
            O[tx] = A[255 - tx]
"#;
    let m = error(over).message;
    assert!(
        m.starts_with(
            "`T.bar_sync(2, 256)` reached together by 256 threads while its phase has 128 of its 256 arrivals"
        ),
        "{m}"
    );
    // A value handed over through shared memory on these barriers is not ordered by them.
    let handover = r#"@T.prim_func
def handover(R: T.Tensor((128,), "float32")):
    with T.Kernel(1, threads=256) as bx:
        S = T.alloc_shared((1,), "float32")
        for tx in T.thread_binding(256, thread="threadIdx.x"):
            if tx < 128:
                if tx == 0:
                    S[0] = 1.0
                T.bar_arrive(2, 256)
            else:
                T.bar_sync(2, 256)
                R[tx - 128] = S[0]
"#;
    let m = error(handover).message;
    assert!(m.contains("data race on shared memory"), "{m}");
}

#[test]
fn named_barriers_order_exactly_their_threads() {
    // Arrivals split across branches (64 threads in each, the count each time): on the GPU
    // barrier 1 counts both, so a warp of either side may be released early; refused.
    let split = r#"@T.prim_func
def split(
    A: T.Tensor((64,), "float32"),
    R: T.Tensor((64,), "float32"),
):
    with T.Kernel(1, threads=128) as bx:
        S = T.alloc_shared((64,), "float32")
        for tx in T.thread_binding(128, thread="threadIdx.x"):
            if tx < 64:
                S[tx] = A[tx] * 2.0
                T.bar_sync(1, 64)
                R[tx] = S[63 - tx]
            else:
                T.bar_sync(1, 64)
"#;
    let m = error(split).message;
    assert!(
        m.contains("by another set of threads earlier since the last `T.sync_threads()`"),
        "{m}"
    );
    // Threads 0 and 32 store the same value (no race with each other), barrier 1 orders
    // threads 32..96 only: thread 64's store is unordered with thread 0's.
    let same = r#"@T.prim_func
def samestore(
    R: T.Tensor((1,), "float32"),
):
    with T.Kernel(1, threads=96) as bx:
        S = T.alloc_shared((1,), "float32")
        for tx in T.thread_binding(96, thread="threadIdx.x"):
            if tx == 0:
                S[0] = 1.0
            if tx == 32:
                S[0] = 1.0
            if tx >= 32:
                T.bar_sync(1, 64)
            if tx == 64:
                S[0] = 2.0
            T.sync_threads()
            if tx == 0:
                R[0] = S[0]
"#;
    let m = error(same).message;
    assert!(
        m.contains("this thread writes `S[0]`, which other threads also wrote"),
        "{m}"
    );
    // Every thread reads S[0] (several readers), then a barrier of every thread that
    // touched shared memory orders those reads before the writes after it: no race.
    let many = r#"@T.prim_func
def many(A: T.Tensor((64,), "float32"), R: T.Tensor((64,), "float32")):
    with T.Kernel(1, threads=64) as bx:
        S = T.alloc_shared((64,), "float32")
        for tx in T.thread_binding(64, thread="threadIdx.x"):
            S[tx] = A[tx]
            T.bar_sync(1, 64)
            R[tx] = S[0]
            T.bar_sync(1, 64)
            S[tx] = 2.0
"#;
    outputs(many, 1);
}
