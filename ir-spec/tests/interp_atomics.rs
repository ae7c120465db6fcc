//! `T.atomic_add` in the interpreter: every block's and every thread's contribution counts
//! (global adds are merged after the grid, in block order, onto the plain writes), shared
//! atomics by many threads between two barriers are no race while a plain access of an
//! atomically updated element by another thread is, and the front end's forms and errors.

use std::collections::HashMap;
use tlc_ir::interp::{self, RunOptions, Tensor};
use tlc_ir::{parse, printer::print_func, DType};

fn ok(src: &str) -> tlc_ir::PrimFunc {
    let f = parse(src).unwrap_or_else(|e| panic!("{e:?}\n{src}"));
    tlc_ir::verifier::verify(&f).unwrap_or_else(|e| panic!("{e:?}\n{src}"));
    f
}

fn run(
    src: &str,
    dims: &[(&str, i64)],
    inputs: Vec<(&str, Tensor)>,
) -> Result<HashMap<String, Tensor>, String> {
    let f = ok(src);
    let dims = dims.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    let inputs = inputs
        .into_iter()
        .map(|(k, t)| (k.to_string(), t))
        .collect();
    for threads in [1, 4] {
        let out = interp::run(
            &f,
            &dims,
            inputs_clone(&inputs),
            &RunOptions { seed: 3, threads },
        )
        .map_err(|e| e.to_string())?;
        if threads == 4 {
            return Ok(out);
        }
    }
    unreachable!()
}

fn inputs_clone(i: &HashMap<String, Tensor>) -> HashMap<String, Tensor> {
    i.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// Every block adds its tile's column sums into `S` (float32) and counts its elements into
/// `C` (int32, exact): the result is the sum over all blocks, whatever the host threads do.
const COLUMN_SUMS: &str = r#"M = T.symbolic("M")

@T.prim_func
def colsum(X: T.Tensor((M, 48), "float32"), S: T.Tensor((48,), "float32"), C: T.Tensor((48,), "int32")):
    with T.Kernel(T.ceildiv(M, 8), threads=64) as bx:
        x = T.alloc_fragment((8, 48), "float32")
        T.copy(X[bx * 8, 0], x)
        for i, j in T.Parallel(8, 48):
            if bx * 8 + i < M:
                T.atomic_add(S[j], x[i, j])
                T.atomic_add(C[j], 1)
"#;

#[test]
fn global_atomic_adds_of_every_block_count() {
    let m = 70;
    let xs: Vec<f64> = (0..m * 48)
        .map(|k| ((k * 37) % 101) as f64 / 8.0 - 6.0)
        .collect();
    let x = Tensor::from_f64(DType::Float32, &[m, 48], &xs).expect("X");
    let s0 = Tensor::from_f64(DType::Float32, &[48], &[0.5; 48]).expect("S");
    let c0 = Tensor::from_f64(DType::Int32, &[48], &[3.0; 48]).expect("C");
    let out = run(
        COLUMN_SUMS,
        &[("M", m as i64)],
        vec![("X", x), ("S", s0), ("C", c0)],
    )
    .expect("runs");
    let (s, c) = (out["S"].to_f64(), out["C"].to_f64());
    for j in 0..48 {
        assert_eq!(c[j], 3.0 + m as f64, "C[{j}]");
        // Multiples of 1/8 below 2^10: every partial sum is exact in float32.
        let want: f64 = 0.5 + (0..m).map(|i| xs[i * 48 + j]).sum::<f64>();
        assert_eq!(s[j], want, "S[{j}]");
    }
}

/// Tile form: `T.atomic_add(C[r, c], tile)` adds a fragment into a global tile, masked at
/// the tensor's edge.
#[test]
fn the_tile_form_adds_a_fragment_into_a_masked_global_tile() {
    let src = r#"M = T.symbolic("M")

@T.prim_func
def k(X: T.Tensor((M, 16), "float32"), Y: T.Tensor((M, 16), "float32")):
    with T.Kernel(T.ceildiv(M, 8), 2, threads=32) as (bx, r):
        x = T.alloc_fragment((8, 16), "float32")
        T.copy(X[bx * 8, 0], x)
        T.atomic_add(Y[bx * 8, 0], x)
"#;
    let f = ok(src);
    let text = print_func(&f);
    assert!(
        text.contains("T.atomic_add(Y[bx * 8 + atomic_i0, atomic_i1], x[atomic_i0, atomic_i1])"),
        "{text}"
    );
    assert!(text.contains("if bx * 8 + atomic_i0 < M:"), "{text}");
    assert_eq!(parse(&text).expect("reparses"), f);
    let m = 13;
    let xs: Vec<f64> = (0..m * 16).map(|k| k as f64).collect();
    let out = run(
        src,
        &[("M", m as i64)],
        vec![
            (
                "X",
                Tensor::from_f64(DType::Float32, &[m, 16], &xs).expect("X"),
            ),
            (
                "Y",
                Tensor::from_f64(DType::Float32, &[m, 16], &vec![1.0; m * 16]).expect("Y"),
            ),
        ],
    )
    .expect("runs");
    // Two blocks (`r` = 0, 1) add each row once.
    for (k, y) in out["Y"].to_f64().iter().enumerate() {
        assert_eq!(*y, 1.0 + 2.0 * xs[k], "Y flat {k}");
    }
}

/// 128 threads add into 8 shared counters between two barriers: no race; the counts are
/// exact; a plain read by other threads after a barrier sees them.
const SHARED_COUNTERS: &str = r#"@T.prim_func
def k(Y: T.Tensor((8,), "int32")):
    with T.Kernel(1, threads=128) as bx:
        cnt = T.alloc_shared((8,), "int32")
        for tx in T.thread_binding(128, thread="threadIdx.x"):
            if tx < 8:
                cnt[tx] = 0
            T.sync_threads()
            T.atomic_add(cnt[tx % 8], tx)
            T.sync_threads()
            if tx < 8:
                Y[tx] = cnt[tx]
"#;

#[test]
fn shared_atomics_of_many_threads_are_no_race() {
    let out = run(SHARED_COUNTERS, &[], vec![]).expect("runs");
    let y = out["Y"].to_f64();
    for (k, v) in y.iter().enumerate() {
        let want: usize = (0..128).filter(|t| t % 8 == k).sum();
        assert_eq!(*v, want as f64, "Y[{k}]");
    }
}

#[test]
fn a_plain_read_of_an_atomically_updated_element_without_a_barrier_is_a_race() {
    let racy = SHARED_COUNTERS.replacen(
        "            T.sync_threads()\n            if tx < 8:\n                Y",
        "            if tx < 8:\n                Y",
        1,
    );
    assert_ne!(racy, SHARED_COUNTERS);
    let err = run(&racy, &[], vec![]).expect_err("a race");
    assert!(err.contains("atomically updated"), "{err}");
    // An atomic add to an element nobody wrote is reported like any read of it.
    let unwritten = SHARED_COUNTERS.replacen(
        "            if tx < 8:\n                cnt[tx] = 0\n",
        "",
        1,
    );
    let err = run(&unwritten, &[], vec![]).expect_err("unwritten");
    assert!(
        err.contains("never written") || err.contains("not written"),
        "{err}"
    );
}

#[test]
fn atomic_add_errors_are_located() {
    let wrap = |body: &str| {
        format!(
            "@T.prim_func\ndef k(G: T.Tensor((8,), \"float32\"), B: T.Tensor((8,), \"bool\")):\n    with T.Kernel(1, threads=8) as bx:\n        L = T.alloc_fragment((8,), \"float32\")\n        for i in T.Parallel(8):\n            {body}\n"
        )
    };
    let errors = |body: &str| -> String {
        match parse(&wrap(body)) {
            Ok(f) => match tlc_ir::verifier::verify(&f) {
                Ok(_) => String::new(),
                Err(e) => e
                    .iter()
                    .map(|d| d.message.clone())
                    .collect::<Vec<_>>()
                    .join("\n"),
            },
            Err(e) => e
                .iter()
                .map(|d| d.message.clone())
                .collect::<Vec<_>>()
                .join("\n"),
        }
    };
    assert_eq!(errors("T.atomic_add(G[i], 1.0)"), "");
    assert!(errors("T.atomic_add(L[i], 1.0)").contains("works on global and shared buffers"));
    assert!(errors("T.atomic_add(B[i], True)").contains("has no bool form"));
    assert!(
        errors("T.atomic_add(G[i], 1.0, memory_order=\"seq_cst\")").contains("is not supported")
    );
    assert!(errors("T.atomic_add(G[0:4], 1.0)").contains("takes a buffer as its value"));
}

/// Within a block, plain writes and atomic adds to one element follow program order: a
/// write then adds leaves write + adds, adds then a write leave the write (a review found
/// the merge dropping the block's own write).
#[test]
fn a_blocks_plain_writes_and_atomic_adds_follow_program_order() {
    let src = r#"@T.prim_func
def k(C: T.Tensor((4,), "float32"), D: T.Tensor((4,), "int32")):
    with T.Kernel(1, threads=32) as bx:
        C[0] = 5.0
        T.atomic_add(C[0], 1.0)
        T.atomic_add(C[1], 1.0)
        C[1] = 7.0
        D[0] = 3
        T.atomic_add(D[0], 2.5)
"#;
    let out = run(
        src,
        &[],
        vec![
            (
                "C",
                Tensor::from_f64(DType::Float32, &[4], &[100.0; 4]).expect("C"),
            ),
            (
                "D",
                Tensor::from_f64(DType::Int32, &[4], &[100.0; 4]).expect("D"),
            ),
        ],
    )
    .expect("runs");
    assert_eq!(out["C"].to_f64(), [6.0, 7.0, 100.0, 100.0]);
    assert_eq!(out["D"].to_f64(), [5.0, 100.0, 100.0, 100.0]);
}
