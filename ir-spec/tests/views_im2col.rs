//! Buffer views (`T.Tensor(shape, dtype, p.data)` in a kernel) and `T.im2col`, both written
//! out by the front end (docs/ir.md): what they parse to, that the result prints and parses
//! back equal, their located errors, and the interpreter's results against the same kernel
//! written without them and against formulas computed here.

use crate::interp_support;

use interp_support::run_with;
use tlc_ir::interp::{random_tensor, Tensor};
use tlc_ir::{parse, printer::print_func, DType, PrimFunc};

fn ok(src: &str) -> PrimFunc {
    match parse(src) {
        Ok(f) => f,
        Err(e) => panic!("failed to parse:\n{src}\n{e:?}"),
    }
}

/// The first error's message and the text its span covers.
fn err(src: &str) -> (String, String) {
    match parse(src) {
        Ok(f) => panic!("expected an error for:\n{src}\ngot {f:?}"),
        Err(e) => {
            let d = &e[0];
            let text = src.get(d.span.start..d.span.end).unwrap_or("<bad span>");
            (d.message.clone(), text.to_string())
        }
    }
}

fn round_trips(f: &PrimFunc) {
    let text = print_func(f);
    assert_eq!(&ok(&text), f, "printed:\n{text}");
}

/// A (M, 4, 8) float16 input, B (M * 4, 8) its copy, through a (M * 4, 8) view of A.
fn view_kernel(body: &str) -> String {
    let mut s = String::from(
        "M = T.symbolic(\"M\")\n\n@T.prim_func\ndef f(\n    A: T.Tensor((M, 4, 8), T.float16),\n    B: T.Tensor((M * 4, 8), T.float16),\n):\n    with T.Kernel(T.ceildiv(M * 4, 16), threads=128) as bx:\n        S = T.alloc_shared((16, 8), T.float16)\n",
    );
    for line in body.lines() {
        s.push_str("        ");
        s.push_str(line);
        s.push('\n');
    }
    s
}

const VIEW_COPY: &str = "A_flat = T.Tensor((M * 4, 8), T.float16, A.data)\nT.copy(A_flat[bx * 16, 0], S)\nT.copy(S, B[bx * 16, 0])";

/// The same kernel written on A itself, as docs/ir.md says the view copy is written.
const UNVIEWED: &str = "for view_i0, view_i1 in T.Parallel(16, 8):\n    S[view_i0, view_i1] = T.if_then_else(bx * 16 + view_i0 >= 0 and bx * 16 + view_i0 < M * 4 and view_i1 >= 0 and view_i1 < 8, A[(bx * 16 + view_i0) // 4, (bx * 16 + view_i0) % 4, view_i1], T.cast(0, \"float16\"))\nT.copy(S, B[bx * 16, 0])";

#[test]
fn a_view_copy_is_the_masked_parallel_copy_of_the_parameter() {
    let viewed = ok(&view_kernel(VIEW_COPY));
    assert_eq!(viewed, ok(&view_kernel(UNVIEWED)));
    round_trips(&viewed);
    // 5 * 4 = 20 rows: the second block's tile is ragged (reads past the view are 0,
    // and the T.copy into B drops them).
    let a = random_tensor("A", DType::Float16, &[5, 4, 8], 3).unwrap();
    let b = Tensor::zeros(DType::Float16, &[20, 8]).unwrap();
    let run = |f: &PrimFunc| run_with(f, &[], vec![("A", a.clone()), ("B", b.clone())], 2);
    let out = run(&viewed);
    assert_eq!(out["B"].to_f64(), a.to_f64(), "B is A reshaped");
    assert_eq!(
        out["B"].to_f64(),
        run(&ok(&view_kernel(UNVIEWED)))["B"].to_f64()
    );
}

#[test]
fn view_element_accesses_are_parameter_accesses() {
    let viewed = ok(&view_kernel(
        "A_flat = T.Tensor((M * 4, 8), T.float16, A.data)\nfor i in T.Parallel(8):\n    B[bx, i] = A_flat[bx, i] + A_flat[bx + 1, i]\n    A_flat[bx, i] = T.float16(0)",
    ));
    // Each access is guarded by the view's shape (M * 4, 8): one past a row of the view is
    // inside A (docs/ir.md, "Buffer views").
    let direct = ok(&view_kernel(
        "for i in T.Parallel(8):\n    B[bx, i] = T.if_then_else(bx >= 0 and bx < M * 4 and i >= 0 and i < 8, A[bx // 4, bx % 4, i], T.cast(0, T.float16)) + T.if_then_else(bx + 1 >= 0 and bx + 1 < M * 4 and i >= 0 and i < 8, A[(bx + 1) // 4, (bx + 1) % 4, i], T.cast(0, T.float16))\n    if bx >= 0 and bx < M * 4 and i >= 0 and i < 8:\n        A[bx // 4, bx % 4, i] = T.float16(0)",
    ));
    assert_eq!(viewed, direct);
    round_trips(&viewed);
    // A constant index inside a constant extent needs no test.
    assert_eq!(
        ok(&view_kernel(
            "A_flat = T.Tensor((M * 4, 8), T.float16, A.data)\nT.atomic_add(A_flat[bx, 1], T.float16(1))"
        )),
        ok(&view_kernel(
            "if bx >= 0 and bx < M * 4:\n    T.atomic_add(A[bx // 4, bx % 4, 1], T.float16(1))"
        )),
    );
}

#[test]
fn a_fully_reshaped_view_linearizes_and_delinearizes() {
    // (M * 32,) over (M, 4, 8): no common trailing extent.
    let viewed = ok(&view_kernel(
        "A_lin = T.Buffer((M * 32,), T.float16, A.data)\nfor i in T.Parallel(8):\n    B[bx, i] = A_lin[bx * 8 + i]",
    ));
    let direct = ok(&view_kernel(
        "for i in T.Parallel(8):\n    B[bx, i] = T.if_then_else(bx * 8 + i >= 0 and bx * 8 + i < M * 32, A[(bx * 8 + i) // (4 * 8), (bx * 8 + i) // 8 % 4, (bx * 8 + i) % 8], T.cast(0, T.float16))",
    ));
    assert_eq!(viewed, direct);
}

#[test]
fn views_refuse_other_counts_dtypes_and_sources() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "V = T.Tensor((M * 4, 16), T.float16, A.data)",
            "element count differs",
            "(M * 4, 16)",
        ),
        (
            "V = T.Tensor((M * 4, 8), T.float32, A.data)",
            "view dtype float32 differs",
            "T.float32",
        ),
        (
            "V = T.Tensor((16, 8), T.float16, S.data)",
            "not a parameter",
            "S.data",
        ),
        (
            "V = T.Tensor((M * 4, 8), T.float16, A)",
            "a parameter's `.data`",
            "A",
        ),
        (
            "V = T.Tensor((M * 4, 8), T.float16, A.data)\nT.fill(V, 0)",
            "buffer view `V` cannot be used here",
            "V",
        ),
        (
            "V = T.Tensor((M * 4, 8), T.float16, A.data)\nx = V[0]",
            "view `V` has 2 dimensions but 1 indices",
            "V",
        ),
        (
            "V = T.Tensor((M * 4, 8), T.float16, A.data)\nT.copy(V[0:16, 0:4], S)",
            "same shape",
            "T.copy(V[0:16, 0:4], S)",
        ),
    ];
    for (body, msg, at) in cases {
        let (m, text) = err(&view_kernel(body));
        assert!(m.contains(msg), "{body}: got {m:?}");
        assert_eq!(&text, at, "{body}: {m}");
    }
}

/// An NHWC image (N, H, W, C) and one 16 x 8 tile of its im2col matrix per block.
fn im2col_kernel(call: &str) -> String {
    format!(
        "N = T.symbolic(\"N\")\nC = T.symbolic(\"C\")\nH = T.symbolic(\"H\")\nW = T.symbolic(\"W\")\n\n@T.prim_func\ndef f(\n    img: T.Tensor((N, H, W, C), T.float16),\n    out: T.Tensor((T.ceildiv(N * H * W, 16) * 16, T.ceildiv(9 * C, 8) * 8), T.float16),\n):\n    with T.Kernel(T.ceildiv(9 * C, 8), T.ceildiv(N * H * W, 16), threads=128) as (bx, by):\n        col = T.alloc_shared((16, 8), T.float16)\n        {call}\n        T.copy(col, out[by * 16, bx * 8])\n"
    )
}

/// im2col[m, k] by the docs/ir.md formula, for kernel 3, stride 2, dilation 2, pad 2.
fn im2col_ref(img: &[f64], [n, h, w, c]: [usize; 4], m: usize, k: usize) -> f64 {
    let (kk, s, d, p) = (3i64, 2i64, 2i64, 2i64);
    let oh_n = (h as i64 + 2 * p - d * (kk - 1) - 1) / s + 1;
    let ow_n = (w as i64 + 2 * p - d * (kk - 1) - 1) / s + 1;
    let (m, k, c_) = (m as i64, k as i64, c as i64);
    let b = m / (oh_n * ow_n);
    let (oh, ow) = ((m % (oh_n * ow_n)) / ow_n, m % ow_n);
    let (kh, kw, ci) = (k / (kk * c_), (k / c_) % kk, k % c_);
    let (y, x) = (oh * s + kh * d - p, ow * s + kw * d - p);
    if b >= n as i64 || y < 0 || x < 0 || y >= h as i64 || x >= w as i64 {
        return 0.0;
    }
    img[(((b * h as i64 + y) * w as i64 + x) * c_ + ci) as usize]
}

#[test]
fn im2col_gathers_taps_with_zero_padding() {
    let f = ok(&im2col_kernel("T.im2col(img, col, by, bx, 3, 2, 2, 2)"));
    round_trips(&f);
    // OH = (5 + 4 - 4 - 1) // 2 + 1 = 3, OW = (6 + 4 - 5) // 2 + 1 = 3: 2 * 3 * 3 = 18 rows
    // (a ragged second row tile), 9 * 3 = 27 taps (a ragged last k-tile).
    let shape = [2usize, 5, 6, 3];
    let img = random_tensor("img", DType::Float16, &shape, 5).unwrap();
    // `out` is sized by N * H * W = 60 (64 rows: rows past the 18 of the matrix read 0)
    // and 9 * C = 27 (32 columns).
    let out = Tensor::zeros(DType::Float16, &[64, 32]).unwrap();
    let got = run_with(&f, &[], vec![("img", img.clone()), ("out", out)], 2);
    let iv = img.to_f64();
    let g = got["out"].to_f64();
    let (gr, gc) = (got["out"].shape()[0], got["out"].shape()[1]);
    for m in 0..gr {
        for k in 0..gc {
            assert_eq!(
                g[m * gc + k],
                im2col_ref(&iv, shape, m, k),
                "im2col[{m}, {k}]"
            );
        }
    }
}

#[test]
fn im2col_refuses_bad_operands() {
    let cases: &[(&str, &str, &str)] = &[
        ("T.im2col(col, col, by, bx, 3, 1, 1, 1)", "not one", "col"),
        (
            "T.im2col(img, out, by, bx, 3, 1, 1, 1)",
            "is a parameter",
            "out",
        ),
        (
            "T.im2col(img, col, by, bx, bx, 1, 1, 1)",
            "`kernel` must be an integer literal",
            "bx",
        ),
        (
            "T.im2col(img, col, by, bx, 3, 0, 1, 1)",
            "`stride` must be",
            "0",
        ),
        (
            "T.im2col(img, col, by, bx, 3, 1, 1, -1)",
            "`pad` must be",
            "-1",
        ),
    ];
    for (call, msg, at) in cases {
        let (m, text) = err(&im2col_kernel(call));
        assert!(m.contains(msg), "{call}: got {m:?}");
        assert_eq!(&text, at, "{call}: {m}");
    }
}
