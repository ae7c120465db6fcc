//! `pack-int4`: an int4 gemm kernel becomes one of int8 bytes (declarations, copies halved,
//! `packed_int4=True`), element loads select their nibble, and the interpreter gives the
//! same outputs before (int4 inputs) and after (the same values as packed bytes).

use crate::common;

use std::collections::HashMap;
use tlc_ir::interp::npy::pack_int4;
use tlc_ir::interp::{run, RunOptions, Tensor};
use tlc_ir::printer::print_func;
use tlc_ir::{parse, DType, PrimFunc};
use tlc_passes::pack_int4::PackInt4;
use tlc_passes::Pass;

/// C = A @ B^T on int4 (K = 128 over two pipelined tiles, M symbolic and ragged), plus
/// `D[i, j] = A[i, j]` through element loads of the int4 shared tile.
const GEMM: &str = "M = T.symbolic(\"M\")\n\n@T.prim_func\ndef g(A: T.Tensor((M, 128), \"int4\"), \
    B: T.Tensor((24, 128), \"int4\"), C: T.Tensor((M, 24), \"int32\"), \
    D: T.Tensor((M, 64), \"int32\")):\n    \
    with T.Kernel(1, T.ceildiv(M, 32), threads=128) as (bx, by):\n        \
    As = T.alloc_shared((32, 64), \"int4\")\n        \
    Bs = T.alloc_shared((24, 64), \"int4\")\n        \
    Cf = T.alloc_fragment((32, 24), \"int32\")\n        \
    T.clear(Cf)\n        \
    for ko in T.Pipelined(2, num_stages=2):\n            \
    T.copy(A[by * 32, ko * 64], As)\n            \
    T.copy(B[0, ko * 64], Bs)\n            \
    T.gemm(As, Bs, Cf, transpose_B=True)\n        \
    T.copy(Cf, C[by * 32, 0])\n        \
    for i, j in T.Parallel(32, 64):\n            \
    if by * 32 + i < M:\n                \
    D[by * 32 + i, j] = As[i, j]\n";

fn packed(src: &str) -> (PrimFunc, PrimFunc) {
    let f = parse(src).unwrap_or_else(|d| panic!("{d:#?}"));
    tlc_ir::verifier::verify(&f).unwrap_or_else(|d| panic!("{d:#?}"));
    let out = PackInt4.run(f.clone(), &common::cx()).expect("pack-int4");
    tlc_ir::verifier::verify(&out).unwrap_or_else(|d| panic!("{d:#?}\n{}", print_func(&out)));
    (f, out)
}

#[test]
fn int4_buffers_become_their_bytes() {
    let (_, out) = packed(GEMM);
    let text = print_func(&out);
    assert!(!text.contains("int4\""), "{text}");
    for want in [
        "A: T.Tensor((M, 64), \"int8\")",
        "B: T.Tensor((24, 64), \"int8\")",
        "T.alloc_shared((32, 32), \"int8\")",
        "T.alloc_shared((24, 32), \"int8\")",
        "T.copy(A[by * 32, ko * 32], As)",
        "D[by * 32 + i, j] = (T.cast(As[i, j // 2], \"int32\") >> j % 2 * 4 & 15) << 28 >> 28",
        "packed_int4=True",
        "<< 28 >> 28",
    ] {
        assert!(text.contains(want), "missing `{want}` in\n{text}");
    }
    // The printed result parses back to itself.
    let again = parse(&text).unwrap_or_else(|d| panic!("{d:#?}\n{text}"));
    assert_eq!(print_func(&again), text);
}

#[test]
fn packed_kernel_computes_what_the_int4_kernel_does() {
    let (before, after) = packed(GEMM);
    let m = 40usize;
    // Every int4 value, in an order that mixes rows and nibbles.
    let a: Vec<i64> = (0..m * 128).map(|i| (i * 7 % 16) as i64 - 8).collect();
    let b: Vec<i64> = (0..24 * 128).map(|i| (i * 5 % 16) as i64 - 8).collect();
    let dims: HashMap<String, i64> = [("M".to_string(), m as i64)].into();
    let int4 = |v: &[i64], rows: usize| Tensor::from_i64(DType::Int4, &[rows, 128], v).unwrap();
    let bytes = |v: &[i64], rows: usize| pack_int4(&int4(v, rows)).expect("pack");
    let run_with = |f: &PrimFunc, a: Tensor, b: Tensor| {
        let inputs: HashMap<String, Tensor> = [("A".to_string(), a), ("B".to_string(), b)].into();
        run(f, &dims, inputs, &RunOptions::default()).unwrap_or_else(|e| panic!("{e:?}"))
    };
    let want = run_with(&before, int4(&a, m), int4(&b, 24));
    let got = run_with(&after, bytes(&a, m), bytes(&b, 24));
    for name in ["C", "D"] {
        assert_eq!(got[name].to_f64(), want[name].to_f64(), "{name}");
    }
    // And the int4 kernel is the integer product (so the comparison is not of two zeros).
    let c = want["C"].to_f64();
    let row0: i64 = (0..128).map(|l| a[l] * b[l]).sum();
    assert_eq!(c[0], row0 as f64);
    assert_eq!(want["D"].to_f64()[1], a[1] as f64);
}

#[test]
fn a_symbolic_innermost_extent_asks_for_its_value() {
    let src = GEMM
        .replace(
            "M = T.symbolic(\"M\")",
            "M = T.symbolic(\"M\")\nK = T.symbolic(\"K\")",
        )
        .replace(
            "A: T.Tensor((M, 128), \"int4\")",
            "A: T.Tensor((M, K), \"int4\")",
        );
    let f = parse(&src).unwrap_or_else(|d| panic!("{d:#?}"));
    let errs = PackInt4.run(f, &common::cx()).expect_err("refused");
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert!(
        errs[0].message.contains("give its value with -D"),
        "{errs:#?}"
    );
    assert_eq!(&src[errs[0].span.start..errs[0].span.end], "K");
}
