//! The thread-level intrinsics in the interpreter: `T.cp_async` with its commit / wait
//! groups and pending bytes, `T.ldmatrix` and `T.mma_sync` as warp collectives in the PTX
//! layouts, checked against results computed directly here; and a whole tensor-core GEMM
//! (cp.async pipeline, ldmatrix, mma) on 128 threads, which must also be fast.

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

fn run_on(
    src: &str,
    inputs: HashMap<String, Tensor>,
    threads: usize,
) -> Result<HashMap<String, Tensor>, Diagnostic> {
    let opts = RunOptions { seed: 7, threads };
    run(&func(src), &HashMap::new(), inputs, &opts)
}

fn outputs(src: &str, inputs: HashMap<String, Tensor>) -> HashMap<String, Tensor> {
    run_on(src, inputs, 0).unwrap_or_else(|d| panic!("run failed: {d:#?}"))
}

fn get(out: &HashMap<String, Tensor>, name: &str) -> Vec<f64> {
    out.get(name)
        .unwrap_or_else(|| panic!("no output `{name}`"))
        .to_f64()
}

/// The run's error, the same with one host thread and with several.
fn error(src: &str) -> Diagnostic {
    let one = run_on(src, HashMap::new(), 1).expect_err("the run should fail");
    let many = run_on(src, HashMap::new(), 4).expect_err("the run should fail");
    assert_eq!(one.message, many.message);
    one
}

/// `kernel.tir:LINE:COL: error: MESSAGE`, the source line and a caret under the span (on
/// its first line): the shape in which `tlc` shows a diagnostic.
fn render(src: &str, d: &Diagnostic) -> String {
    let start = d.span.start.min(src.len());
    let line_start = src
        .get(..start)
        .and_then(|s| s.rfind('\n'))
        .map_or(0, |i| i + 1);
    let line_end = src
        .get(start..)
        .and_then(|s| s.find('\n'))
        .map_or(src.len(), |i| start + i);
    let line = src.get(line_start..line_end).unwrap_or("");
    let row = src.get(..start).map_or(0, |s| s.matches('\n').count()) + 1;
    let col = start - line_start + 1;
    let width = d.span.end.min(line_end).saturating_sub(start).max(1);
    format!(
        "kernel.tir:{row}:{col}: error: {}\n  {line}\n  {}{}\n",
        d.message,
        " ".repeat(col - 1),
        "^".repeat(width)
    )
}

/// A tensor of `dtype` with values `f(flat index)` (exactly representable ones).
fn tensor(dtype: DType, shape: &[usize], f: impl Fn(usize) -> f64) -> Tensor {
    let n: usize = shape.iter().product();
    let values: Vec<f64> = (0..n).map(f).collect();
    Tensor::from_f64(dtype, shape, &values).unwrap_or_else(|e| panic!("{e}"))
}

fn inputs(list: Vec<(&str, Tensor)>) -> HashMap<String, Tensor> {
    list.into_iter().map(|(n, t)| (n.to_string(), t)).collect()
}

// ---- shfl_xor ----

/// Two warps: every lane shuffles its float32 value and its float16 value with the lane
/// `offset` away, and a butterfly over all five offsets sums the warp into every lane.
const SHFL: &str = r#"@T.prim_func
def k(X: T.Tensor((64,), "float32"), H: T.Tensor((64,), "float16"), O: T.Tensor((64,), "float32"), P: T.Tensor((64,), "float16"), S: T.Tensor((64,), "float32")):
    with T.Kernel(1, threads=64) as bx:
        v = T.alloc_local((1,), "float32")
        h = T.alloc_local((1,), "float16")
        t = T.alloc_local((1,), "float32")
        u = T.alloc_local((1,), "float16")
        for tx in T.thread_binding(64, thread="threadIdx.x"):
            v[0] = X[tx]
            h[0] = H[tx]
            T.shfl_xor(t[0], v[0], offset=4)
            T.shfl_xor(u[0], h[0], offset=16)
            O[tx] = t[0]
            P[tx] = u[0]
            T.shfl_xor(t[0], v[0], offset=16)
            v[0] = v[0] + t[0]
            T.shfl_xor(t[0], v[0], offset=8)
            v[0] = v[0] + t[0]
            T.shfl_xor(t[0], v[0], offset=4)
            v[0] = v[0] + t[0]
            T.shfl_xor(t[0], v[0], offset=2)
            v[0] = v[0] + t[0]
            T.shfl_xor(v[0], v[0], offset=1)
            S[tx] = v[0]
"#;

#[test]
fn shfl_xor_exchanges_lanes_within_each_warp() {
    let x = tensor(DType::Float32, &[64], |i| (i * i) as f64);
    let h = tensor(DType::Float16, &[64], |i| i as f64 - 20.0);
    let out = outputs(SHFL, inputs(vec![("X", x), ("H", h)]));
    let (o, p, sum) = (get(&out, "O"), get(&out, "P"), get(&out, "S"));
    for l in 0..64 {
        let (w, lane) = (l / 32, l % 32);
        let from4 = 32 * w + (lane ^ 4);
        let from16 = 32 * w + (lane ^ 16);
        assert_eq!(o[l], (from4 * from4) as f64, "f32 lane {l}");
        assert_eq!(p[l], from16 as f64 - 20.0, "f16 lane {l}");
    }
    // Four butterfly steps leave every lane with the sum of its pair of lanes `l`, `l ^ 1`;
    // the last shuffle writes into its own source (every lane reads before any writes), so
    // lane `l` ends with lane `l ^ 1`'s value — computed directly here.
    for l in 0..64 {
        let base = 32 * (l / 32);
        let mut v: Vec<f64> = (0..32).map(|i| ((base + i) * (base + i)) as f64).collect();
        for off in [16, 8, 4, 2] {
            v = (0..32).map(|i| v[i] + v[i ^ off]).collect();
        }
        let last: Vec<f64> = (0..32).map(|i| v[i ^ 1]).collect();
        assert_eq!(sum[l], last[l % 32], "butterfly lane {l}");
    }
}

#[test]
fn shfl_xor_needs_the_whole_warp_and_one_dtype() {
    let partial = SHFL.replace(
        "            T.shfl_xor(t[0], v[0], offset=4)\n",
        "            if tx % 32 < 31:\n                T.shfl_xor(t[0], v[0], offset=4)\n",
    );
    let d = error(&partial);
    assert_eq!(
        d.message,
        "`T.shfl_xor` is a warp collective: 31 of the 32 lanes of warp 0 execute it; every lane \
         must (block 0)"
    );
    // Mixed dtypes and a bad offset are verifier errors.
    let mixed = SHFL.replace(
        "T.shfl_xor(u[0], h[0], offset=16)",
        "T.shfl_xor(u[0], v[0], offset=16)",
    );
    let f = parse(&mixed).expect("parses");
    assert!(tlc_ir::verifier::verify(&f).is_err(), "mixed dtypes verify");
    let odd = SHFL.replace(
        "offset=16)\n            O[tx]",
        "offset=3)\n            O[tx]",
    );
    let f = parse(&odd).expect("parses");
    let errs = tlc_ir::verifier::verify(&f).expect_err("offset 3 verifies");
    assert!(
        errs.iter().any(|e| e.message.contains("1, 2, 4, 8 or 16")),
        "{errs:?}"
    );
}

// ---- ldmatrix ----

/// Every lane supplies row `tx` of `S` (32 x 8: four stacked 8 x 8 matrices) and stores
/// what it receives, for the four forms of ldmatrix.
const LDMATRIX: &str = r#"@T.prim_func
def ldm(
    A: T.Tensor((32, 8), "float16"),
    O4: T.Tensor((32, 8), "float16"),
    T4: T.Tensor((32, 8), "float16"),
    O2: T.Tensor((32, 4), "float16"),
    O1: T.Tensor((32, 2), "float16"),
):
    with T.Kernel(1, threads=32) as bx:
        S = T.alloc_shared((32, 8), "float16")
        F = T.alloc_local((8,), "float16")
        G = T.alloc_local((8,), "float16")
        H = T.alloc_local((4,), "float16")
        K = T.alloc_local((2,), "float16")
        for tx in T.thread_binding(32, thread="threadIdx.x"):
            for j in T.serial(8):
                S[tx, j] = A[tx, j]
            T.sync_threads()
            T.ldmatrix(F[0], S[tx, 0], num=4, trans=False)
            T.ldmatrix(G[0], S[tx, 0], num=4, trans=True)
            T.ldmatrix(H[0], S[tx, 0], num=2, trans=False)
            T.ldmatrix(K[0], S[tx, 0], num=1, trans=True)
            for j in T.serial(8):
                O4[tx, j] = F[j]
                T4[tx, j] = G[j]
            for j in T.serial(4):
                O2[tx, j] = H[j]
            for j in T.serial(2):
                O1[tx, j] = K[j]
"#;

#[test]
fn ldmatrix_distributes_rows_as_ptx_says() {
    let a = tensor(DType::Float16, &[32, 8], |i| i as f64);
    let out = outputs(LDMATRIX, inputs(vec![("A", a)]));
    // Element (r, c) of matrix m is A[8m + r, c] = 8 (8m + r) + c.
    let elem = |m: usize, r: usize, c: usize| (8 * (8 * m + r) + c) as f64;
    let (o4, t4, o2, o1) = (
        get(&out, "O4"),
        get(&out, "T4"),
        get(&out, "O2"),
        get(&out, "O1"),
    );
    for l in 0..32 {
        let (g, c) = (l / 4, l % 4);
        for m in 0..4 {
            for e in 0..2 {
                assert_eq!(o4[l * 8 + 2 * m + e], elem(m, g, 2 * c + e), "x4 lane {l}");
                assert_eq!(
                    t4[l * 8 + 2 * m + e],
                    elem(m, 2 * c + e, g),
                    "x4.trans lane {l}"
                );
                if m < 2 {
                    assert_eq!(o2[l * 4 + 2 * m + e], elem(m, g, 2 * c + e), "x2 lane {l}");
                }
                if m < 1 {
                    assert_eq!(o1[l * 2 + e], elem(m, 2 * c + e, g), "x1.trans lane {l}");
                }
            }
        }
    }
}

#[test]
fn ldmatrix_needs_the_whole_warp_and_aligned_rows() {
    let partial = LDMATRIX.replace(
        "            T.ldmatrix(F[0], S[tx, 0], num=4, trans=False)\n",
        "            if tx < 16:\n                T.ldmatrix(F[0], S[tx, 0], num=4, trans=False)\n",
    );
    let d = error(&partial);
    assert_eq!(
        d.message,
        "`T.ldmatrix` is a warp collective: 16 of the 32 lanes of warp 0 execute it; every lane \
         must (block 0)"
    );
    let at = partial.find("T.ldmatrix(F[0]").unwrap_or(0);
    assert_eq!(d.span.start, at);

    // Rows must start on 16 bytes: S[tx, 1] is 2 bytes off.
    let src = LDMATRIX.replace(
        "T.ldmatrix(G[0], S[tx, 0]",
        "T.ldmatrix(G[0], S[tx % 31, 1]",
    );
    let d = error(&src);
    assert_eq!(
        d.message,
        "`T.ldmatrix` row at `S[0, 1]` (shared address 2) is not 16-byte aligned (thread 0, \
         block 0)"
    );
    // A row outside the buffer (lane 31 supplies row 32).
    let src = LDMATRIX.replace("T.ldmatrix(F[0], S[tx, 0]", "T.ldmatrix(F[0], S[tx + 1, 0]");
    let d = error(&src);
    assert_eq!(
        d.message,
        "index [32, 0] is out of bounds for `S` with shape (32, 8) (thread 31, block 0)"
    );
}

#[test]
fn ldmatrix_reads_are_shared_reads() {
    // A row read belongs to the lane that supplies its address: with no barrier, lane 0
    // reading row 0, which thread 31 wrote, is a race.
    let src = LDMATRIX.replace(
        "            for j in T.serial(8):\n                S[tx, j] = A[tx, j]\n            T.sync_threads()\n",
        "            for j in T.serial(8):\n                S[31 - tx, j] = A[tx, j]\n",
    );
    let d = error(&src);
    assert_eq!(
        d.message,
        "data race on shared memory: this thread reads `S[0, 0]`, which thread 31 wrote with no \
         `T.sync_threads()` in between (thread 0, block 0)"
    );
    // A row never written.
    let src = LDMATRIX.replace(
        "            for j in T.serial(8):\n                S[tx, j] = A[tx, j]\n",
        "            for j in T.serial(7):\n                S[tx, j] = A[tx, j]\n",
    );
    let d = error(&src);
    assert_eq!(
        d.message,
        "`T.ldmatrix` reads `S[0, 7]`, which was never written (thread 0, block 0)"
    );
}

// ---- mma.sync ----

/// One warp: ldmatrix A (16 x 16) and B (16 x 8, transposed load), load C into the
/// accumulators, one mma, store D.
const MMA: &str = r#"@T.prim_func
def mma(
    A: T.Tensor((16, 16), "DT"),
    B: T.Tensor((16, 8), "DT"),
    C: T.Tensor((16, 8), "float32"),
    D: T.Tensor((16, 8), "float32"),
):
    with T.Kernel(1, threads=32) as bx:
        A_s = T.alloc_shared((16, 16), "DT")
        B_s = T.alloc_shared((16, 8), "DT")
        A_f = T.alloc_local((8,), "DT")
        B_f = T.alloc_local((4,), "DT")
        acc = T.alloc_local((4,), "float32")
        for tx in T.thread_binding(32, thread="threadIdx.x"):
            for i in T.serial(8):
                A_s[tx // 2, tx % 2 * 8 + i] = A[tx // 2, tx % 2 * 8 + i]
            for i in T.serial(4):
                B_s[tx // 2, tx % 2 * 4 + i] = B[tx // 2, tx % 2 * 4 + i]
            T.sync_threads()
            T.ldmatrix(A_f[0], A_s[tx % 16, tx // 16 * 8], num=4, trans=False)
            T.ldmatrix(B_f[0], B_s[tx % 16, 0], num=2, trans=True)
            for q in T.serial(4):
                acc[q] = C[tx // 4 + q // 2 * 8, tx % 4 * 2 + q % 2]
            T.mma_sync(acc[0], A_f[0], B_f[0])
            for q in T.serial(4):
                D[tx // 4 + q // 2 * 8, tx % 4 * 2 + q % 2] = acc[q]
"#;

/// `D = (Σ_k A[i][k] B[k][j]) + C[i][j]` in f32, k in order: the documented rounding.
fn mma_reference(a: &[f64], b: &[f64], c: &[f64]) -> Vec<f64> {
    let mut d = Vec::with_capacity(128);
    for i in 0..16 {
        for j in 0..8 {
            let mut sum = 0f32;
            for k in 0..16 {
                sum += a[i * 16 + k] as f32 * b[k * 8 + j] as f32;
            }
            d.push(f64::from(sum + c[i * 8 + j] as f32));
        }
    }
    d
}

#[test]
fn mma_sync_matches_a_direct_16x8x16_product() {
    for dt in ["float16", "bfloat16"] {
        let src = MMA.replace("\"DT\"", &format!("\"{dt}\""));
        // Random inputs (seeded): A, B of the dtype, C float32.
        let out = outputs(&src, HashMap::new());
        let (a, b, c, d) = (
            get(&out, "A"),
            get(&out, "B"),
            get(&out, "C"),
            get(&out, "D"),
        );
        assert_eq!(d, mma_reference(&a, &b, &c), "{dt}");
        // And close to the exact product (the inputs are small random numbers).
        for i in 0..16 {
            for j in 0..8 {
                let exact: f64 =
                    (0..16).map(|k| a[i * 16 + k] * b[k * 8 + j]).sum::<f64>() + c[i * 8 + j];
                let got = d[i * 8 + j];
                assert!(
                    (got - exact).abs() <= 1e-4 * (1.0 + exact.abs()),
                    "{dt} D[{i}][{j}]"
                );
            }
        }
    }
    // Integers: the layouts place every element where it belongs.
    let src = MMA.replace("\"DT\"", "\"float16\"");
    let a = tensor(DType::Float16, &[16, 16], |x| ((x * 7) % 11) as f64 - 5.0);
    let b = tensor(DType::Float16, &[16, 8], |x| ((x * 5) % 13) as f64 - 6.0);
    let c = tensor(DType::Float32, &[16, 8], |x| x as f64);
    let out = outputs(&src, inputs(vec![("A", a), ("B", b), ("C", c)]));
    let (a, b, d) = (get(&out, "A"), get(&out, "B"), get(&out, "D"));
    for i in 0..16 {
        for j in 0..8 {
            let want: f64 =
                (0..16).map(|k| a[i * 16 + k] * b[k * 8 + j]).sum::<f64>() + (i * 8 + j) as f64;
            assert_eq!(d[i * 8 + j], want, "D[{i}][{j}]");
        }
    }
}

#[test]
fn mma_sync_errors() {
    let src = MMA.replace("\"DT\"", "\"float16\"");
    // An accumulator never written.
    let no_c = src.replace(
        "            for q in T.serial(4):\n                acc[q] = C[",
        "            for q in T.serial(3):\n                acc[q] = C[",
    );
    let d = error(&no_c);
    assert_eq!(
        d.message,
        "`T.mma_sync` reads `acc[3]`, which was never written (thread 0, block 0)"
    );
    // A block of 48 threads: the second warp has 16.
    let src48 = r#"@T.prim_func
def f(D: T.Tensor((48, 4), "float32")):
    with T.Kernel(1, threads=48) as bx:
        A_f = T.alloc_local((8,), "float16")
        B_f = T.alloc_local((4,), "float16")
        acc = T.alloc_local((4,), "float32")
        for tx in T.thread_binding(48, thread="threadIdx.x"):
            for i in T.serial(8):
                A_f[i] = 1.0
            for i in T.serial(4):
                B_f[i] = 2.0
                acc[i] = 0.5
            T.mma_sync(acc[0], A_f[0], B_f[0])
            for i in T.serial(4):
                D[tx, i] = acc[i]
"#;
    let d = error(src48);
    assert_eq!(
        d.message,
        "`T.mma_sync` is a warp collective, but warp 1 has only 16 threads (the block size is not \
         a multiple of 32) (block 0)"
    );
    // With 32 threads it runs: every D is 16 * 1 * 2 + 0.5.
    let src32 = src48.replace("48", "32");
    let out = outputs(&src32, HashMap::new());
    assert!(get(&out, "D").iter().all(|&v| v == 32.5));
}

// ---- cp.async ----

const HEAD: &str = r#"@T.prim_func
def copy(A: T.Tensor((32, 8), "float16"), O: T.Tensor((32, 8), "float16")):
    with T.Kernel(1, threads=32) as bx:
        S = T.alloc_shared((32, 8), "float16")
        S2 = T.alloc_shared((32, 8), "float16")
        for tx in T.thread_binding(32, thread="threadIdx.x"):
"#;

/// A kernel whose thread loop body is `body` (written at 12 spaces).
fn copy_kernel(body: &str) -> String {
    let mut s = HEAD.to_string();
    for line in body.lines() {
        s.push_str("            ");
        s.push_str(line);
        s.push('\n');
    }
    s
}

fn a_rows() -> HashMap<String, Tensor> {
    inputs(vec![("A", tensor(DType::Float16, &[32, 8], |i| i as f64))])
}

#[test]
fn cp_async_then_wait_and_barrier_delivers_the_data() {
    // Each thread copies its row; after the wait and a barrier, thread t reads row 31 - t.
    let src = copy_kernel(
        "T.cp_async(S[tx, 0], A[tx, 0], 16)\nT.cp_async_commit()\nT.cp_async_wait(0)\nT.sync_threads()\nfor j in T.serial(8):\n    O[tx, j] = S[31 - tx, j]",
    );
    let out = outputs(&src, a_rows());
    let o = get(&out, "O");
    for t in 0..32 {
        for j in 0..8 {
            assert_eq!(o[t * 8 + j], ((31 - t) * 8 + j) as f64);
        }
    }
    // Copies of 8 and 4 bytes, two per row.
    let src = copy_kernel(
        "T.cp_async(S[tx, 0], A[tx, 0], 8)\nT.cp_async(S[tx, 4], A[tx, 4], 8)\nT.cp_async_commit()\nT.cp_async_wait(0)\nfor j in T.serial(8):\n    O[tx, j] = S[tx, j]",
    );
    assert_eq!(
        get(&outputs(&src, a_rows()), "O"),
        (0..256).map(f64::from).collect::<Vec<_>>()
    );
}

/// A `T.cp_async` whose predicate is constant false reads nothing (it zero-fills): its
/// source may name an element outside the buffer — an unrolled pipeline's last guarded
/// prefetch, `A[k + 1]` under `k + 1 < n`, is one. The verifier accepts it there, the
/// interpreter fills zeros; without the predicate the same source is refused.
#[test]
fn a_cp_async_that_reads_nothing_may_name_an_element_past_the_end() {
    let src = copy_kernel(
        "T.cp_async(S[tx, 0], A[32, 0], 16, 3 < 3)\nT.cp_async_commit()\nT.cp_async_wait(0)\nfor j in T.serial(8):\n    O[tx, j] = S[tx, j]",
    );
    assert!(get(&outputs(&src, a_rows()), "O").iter().all(|v| *v == 0.0));
    let src =
        copy_kernel("T.cp_async(S[tx, 0], A[32, 0], 16)\nT.cp_async_commit()\nT.cp_async_wait(0)");
    let f = tlc_ir::parse(&src).expect("parses");
    let errs = tlc_ir::verifier::verify(&f).err().unwrap_or_default();
    assert!(
        errs.iter().any(|e| e.message.contains("out of bounds")),
        "{errs:#?}"
    );
}

#[test]
fn reading_before_the_wait_is_an_error() {
    let src = copy_kernel(
        "T.cp_async(S[tx, 0], A[tx, 0], 16)\nT.cp_async_commit()\nfor j in T.serial(8):\n    O[tx, j] = S[tx, j]",
    );
    let d = error(&src);
    insta::assert_snapshot!(render(&src, &d), @r"
    kernel.tir:10:28: error: this thread reads `S[0, 0]`, shared memory that a cp.async of thread 0 has not landed yet; missing `T.cp_async_wait` (thread 0, block 0)
                      O[tx, j] = S[tx, j]
                                 ^^^^^^^^
    ");
    // Writing it is an error too.
    let src = copy_kernel(
        "T.cp_async(S[tx, 0], A[tx, 0], 16)\nS[tx, 3] = 1.0\nT.cp_async_commit()\nT.cp_async_wait(0)",
    );
    assert_eq!(
        error(&src).message,
        "this thread writes `S[0, 3]`, shared memory that a cp.async of thread 0 has not landed \
         yet; missing `T.cp_async_wait` (thread 0, block 0)"
    );
    // So is a second cp.async onto the same bytes.
    let src = copy_kernel(
        "T.cp_async(S[tx, 0], A[tx, 0], 16)\nT.cp_async(S[tx, 0], A[tx, 0], 16)\nT.cp_async_commit()\nT.cp_async_wait(0)",
    );
    assert!(error(&src)
        .message
        .starts_with("this thread writes `S[0, 0]`, shared memory"));
}

#[test]
fn a_wait_without_a_barrier_leaves_a_race_for_other_threads() {
    let src = copy_kernel(
        "T.cp_async(S[tx, 0], A[tx, 0], 16)\nT.cp_async_commit()\nT.cp_async_wait(0)\nfor j in T.serial(8):\n    O[tx, j] = S[31 - tx, j]",
    );
    assert_eq!(
        error(&src).message,
        "data race on shared memory: this thread reads `S[31, 0]`, which thread 31 wrote with no \
         `T.sync_threads()` in between (thread 0, block 0)"
    );
}

#[test]
fn a_false_predicate_reads_nothing_and_fills_zeros() {
    // Rows 16.. are out of `A` (16 rows): with the predicate false they are not read.
    let src = r#"@T.prim_func
def copy(A: T.Tensor((16, 8), "float16"), O: T.Tensor((32, 8), "float16")):
    with T.Kernel(1, threads=32) as bx:
        S = T.alloc_shared((32, 8), "float16")
        for tx in T.thread_binding(32, thread="threadIdx.x"):
            T.cp_async(S[tx, 0], A[tx, 0], 16, tx < 16)
            T.cp_async_commit()
            T.cp_async_wait(0)
            for j in T.serial(8):
                O[tx, j] = S[tx, j]
"#;
    let a = tensor(DType::Float16, &[16, 8], |i| i as f64 + 1.0);
    let o = get(&outputs(src, inputs(vec![("A", a)])), "O");
    for t in 0..32 {
        for j in 0..8 {
            let want = if t < 16 {
                (t * 8 + j) as f64 + 1.0
            } else {
                0.0
            };
            assert_eq!(o[t * 8 + j], want, "O[{t}, {j}]");
        }
    }
    // With the predicate true, the same source is out of bounds: a located error.
    let bad = src.replace(", tx < 16)", ", tx < 17)");
    let d = error(&bad);
    assert_eq!(
        d.message,
        "index [16, 0] is out of bounds for `A` with shape (16, 8) (thread 16, block 0)"
    );
    let at = bad.find("T.cp_async(").unwrap_or(0);
    assert_eq!(d.span.start, at);
}

#[test]
fn wait_retires_only_the_oldest_groups() {
    // Two groups; wait(1) lands the first only.
    let two = "T.cp_async(S[tx, 0], A[tx, 0], 16)\nT.cp_async_commit()\nT.cp_async(S2[tx, 0], A[31 - tx, 0], 16)\nT.cp_async_commit()\nT.cp_async_wait(1)\nT.sync_threads()\n";
    let src = copy_kernel(&format!(
        "{two}for j in T.serial(8):\n    O[tx, j] = S[31 - tx, j]"
    ));
    let o = get(&outputs(&src, a_rows()), "O");
    assert_eq!(o[0], (31 * 8) as f64);
    let src = copy_kernel(&format!("{two}O[tx, 0] = S2[tx, 0]"));
    assert!(
        error(&src)
            .message
            .starts_with("this thread reads `S2[0, 0]`, shared memory that a cp.async"),
        "{}",
        error(&src).message
    );
    // A copy not yet committed is not retired by a wait.
    let src =
        copy_kernel("T.cp_async(S[tx, 0], A[tx, 0], 16)\nT.cp_async_wait(0)\nO[tx, 0] = S[tx, 0]");
    assert!(error(&src).message.contains("has not landed yet"));
    // wait(0) after both lands both.
    let src = copy_kernel(&format!(
        "{}T.cp_async_wait(0)\nT.sync_threads()\nO[tx, 0] = S2[tx, 0]",
        two.replace("T.sync_threads()\n", "")
    ));
    let o = get(&outputs(&src, a_rows()), "O");
    assert_eq!(o[0], (31 * 8) as f64);
}

#[test]
fn cp_async_addresses_must_be_aligned() {
    let src = copy_kernel("T.cp_async(S[tx, 4], A[tx, 0], 16)\nT.cp_async_commit()");
    assert_eq!(
        error(&src).message,
        "`T.cp_async` of 16 bytes to `S[0, 4]` at shared address 8, which is not a multiple of 16 \
         (thread 0, block 0)"
    );
    let src = copy_kernel("T.cp_async(S[tx, 0], A[tx, 4], 16)\nT.cp_async_commit()");
    assert_eq!(
        error(&src).message,
        "`T.cp_async` of 16 bytes from `A[0, 4]` at byte 8 of `A`, which is not a multiple of 16 \
         (thread 0, block 0)"
    );
}

#[test]
fn block_level_commit_and_wait_act_for_every_thread() {
    // The wait is outside the thread loops: what it lands is visible to all threads.
    let src = r#"@T.prim_func
def copy(A: T.Tensor((32, 8), "float16"), O: T.Tensor((32, 8), "float16")):
    with T.Kernel(1, threads=32) as bx:
        S = T.alloc_shared((32, 8), "float16")
        for tx in T.thread_binding(32, thread="threadIdx.x"):
            T.cp_async(S[tx, 0], A[tx, 0], 16)
        T.cp_async_commit()
        T.cp_async_wait(0)
        for tx2 in T.thread_binding(32, thread="threadIdx.x"):
            for j in T.serial(8):
                O[tx2, j] = S[31 - tx2, j]
"#;
    let o = get(&outputs(src, a_rows()), "O");
    assert_eq!(o[8], (30 * 8) as f64);
    // Without the wait, the second loop reads pending bytes.
    let bad = src.replace("        T.cp_async_wait(0)\n", "");
    assert!(error(&bad).message.contains("has not landed yet"));
}

#[test]
fn commit_and_wait_are_no_ops_at_the_tile_level() {
    let src = r#"@T.prim_func
def f(A: T.Tensor((32, 8), "float16"), O: T.Tensor((32, 8), "float16")):
    with T.Kernel(1, threads=32) as bx:
        S = T.alloc_shared((32, 8), "float16")
        T.copy(A, S)
        T.cp_async_commit()
        T.cp_async_wait(0)
        T.copy(S, O)
"#;
    let out = outputs(src, a_rows());
    assert_eq!(get(&out, "O"), get(&out, "A"));
}

// ---- a whole GEMM ----

/// C = A @ B for A 256x128, B 128x256 (f16), C f32: 2x2 blocks of 128 threads, 128x128x32
/// tiles, 2x2 warps of 64x64, a 3-stage cp.async pipeline, ldmatrix (B transposed) and
/// m16n8k16 mma. One barrier per iteration, after the wait.
fn gemm_src() -> String {
    let loads = |stage: &str, k: &str| {
        format!(
            "for i in T.serial(4):
    T.cp_async(A_s[{stage}, (tx + i * 128) // 4, (tx + i * 128) % 4 * 8], A[by * 128 + (tx + i * 128) // 4, ({k}) * 32 + (tx + i * 128) % 4 * 8], 16)
for i in T.serial(4):
    T.cp_async(B_s[{stage}, (tx + i * 128) // 16, (tx + i * 128) % 16 * 8], B[({k}) * 32 + (tx + i * 128) // 16, bx * 128 + (tx + i * 128) % 16 * 8], 16)
"
        )
    };
    let indent = |text: &str, n: usize| -> String {
        text.lines()
            .map(|l| format!("{}{l}\n", " ".repeat(n)))
            .collect()
    };
    format!(
        r#"@T.prim_func
def gemm(
    A: T.Tensor((256, 128), "float16"),
    B: T.Tensor((128, 256), "float16"),
    C: T.Tensor((256, 256), "float32"),
):
    with T.Kernel(2, 2, threads=128) as (bx, by):
        A_s = T.alloc_shared((3, 128, 32), "float16")
        B_s = T.alloc_shared((3, 32, 128), "float16")
        A_f = T.alloc_local((32,), "float16")
        B_f = T.alloc_local((32,), "float16")
        acc = T.alloc_local((128,), "float32")
        for tx in T.thread_binding(128, thread="threadIdx.x"):
            for i in T.serial(128):
                acc[i] = 0.0
            for s in T.serial(2):
{prologue}                T.cp_async_commit()
            for ko in T.serial(4):
                T.cp_async_wait(1)
                T.sync_threads()
                if ko + 2 < 4:
{steady}                T.cp_async_commit()
                for kk in T.serial(2):
                    for mi in T.serial(4):
                        T.ldmatrix(A_f[mi * 8], A_s[ko % 3, tx // 32 % 2 * 64 + mi * 16 + tx % 16, kk * 16 + tx % 32 // 16 * 8], num=4, trans=False)
                    for nj in T.serial(4):
                        T.ldmatrix(B_f[nj * 8], B_s[ko % 3, kk * 16 + tx % 16, tx // 64 * 64 + nj * 16 + tx % 32 // 16 * 8], num=4, trans=True)
                    for mi in T.serial(4):
                        for ni in T.serial(8):
                            T.mma_sync(acc[(mi * 8 + ni) * 4], A_f[mi * 8], B_f[ni * 4])
            for mi in T.serial(4):
                for ni in T.serial(8):
                    for q in T.serial(4):
                        C[by * 128 + tx // 32 % 2 * 64 + mi * 16 + tx % 32 // 4 + q // 2 * 8, bx * 128 + tx // 64 * 64 + ni * 8 + tx % 4 * 2 + q % 2] = acc[(mi * 8 + ni) * 4 + q]
"#,
        prologue = indent(&loads("s", "s"), 16),
        steady = indent(&loads("(ko + 2) % 3", "ko + 2"), 20),
    )
}

/// The GEMM's result with the interpreter's rounding: per 16-wide K step, the f32 sum of
/// the products is added to the accumulator.
fn gemm_reference(a: &[f64], b: &[f64]) -> Vec<f64> {
    let mut c = vec![0f32; 256 * 256];
    for i in 0..256 {
        for j in 0..256 {
            let mut acc = 0f32;
            for step in 0..8 {
                let mut sum = 0f32;
                for k in step * 16..step * 16 + 16 {
                    sum += a[i * 128 + k] as f32 * b[k * 256 + j] as f32;
                }
                acc += sum; // f32 addition commutes exactly
            }
            c[i * 256 + j] = acc;
        }
    }
    c.into_iter().map(f64::from).collect()
}

#[test]
fn tensor_core_gemm_is_exact() {
    let src = gemm_src();
    let f = func(&src);
    let out = run(
        &f,
        &HashMap::new(),
        HashMap::new(),
        &RunOptions {
            seed: 3,
            threads: 1,
        },
    )
    .unwrap_or_else(|d| panic!("{}", render(&src, &d)));
    let (a, b, c) = (get(&out, "A"), get(&out, "B"), get(&out, "C"));
    // Timing is not asserted (it takes about 0.25 s on the dev box, see docs/perf.md).
    assert_eq!(c, gemm_reference(&a, &b));
}
