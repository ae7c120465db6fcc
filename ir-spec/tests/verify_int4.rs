//! The int4 rules (docs/ir.md, "int4", rules H1-H7; `verifier/int4.rs`, H7 in `verifier/ops.rs`): where int4 buffers
//! live, that they are written only by whole-byte copies, that a load widens to int32, and
//! that compilation refuses int4 for now — each refusal located at what it is about. Also
//! the interpreter's exact int4 gemm through a whole kernel.

use std::collections::HashMap;
use tlc_ir::interp::{run, RunOptions, Tensor};
use tlc_ir::target::Target;
use tlc_ir::verifier::{check_level, verify, verify_with, Level, Requirements};
use tlc_ir::{parse, DType, PrimFunc};

/// A kernel with `A: (64, 32) int4`, `I: (64, 32) int32`, shared `S: (16, 32) int4`, a
/// fragment `F: (16, 32) int32`, and `body` at the kernel's level.
fn kernel(body: &str) -> String {
    let mut s = String::from(
        "@T.prim_func\ndef f(A: T.Tensor((64, 32), \"int4\"), I: T.Tensor((64, 32), \"int32\")):\n    \
         with T.Kernel(4, threads=128) as bx:\n        \
         S = T.alloc_shared((16, 32), \"int4\")\n        \
         F = T.alloc_fragment((16, 32), \"int32\")\n",
    );
    for line in body.lines() {
        s.push_str("        ");
        s.push_str(line);
        s.push('\n');
    }
    s
}

fn func(body: &str) -> (String, PrimFunc) {
    let src = kernel(body);
    let f = parse(&src).unwrap_or_else(|d| panic!("does not parse: {d:#?}\n{src}"));
    (src, f)
}

fn accepted(body: &str) {
    let (src, f) = func(body);
    if let Err(d) = verify(&f) {
        panic!("refused: {d:#?}\n{src}");
    }
}

/// `count` errors, each containing `message`, each at a span whose text starts with `at`.
#[track_caller]
fn refused_n(body: &str, count: usize, message: &str, at: &str) {
    let (src, f) = func(body);
    let errs = verify(&f).err().unwrap_or_default();
    assert_eq!(errs.len(), count, "{errs:#?}\n{src}");
    for e in &errs {
        assert!(e.message.contains(message), "{errs:#?}");
        let text = &src[e.span.start..e.span.end];
        assert!(text.starts_with(at), "located at `{text}`, not `{at}`");
    }
}

#[track_caller]
fn refused(body: &str, message: &str, at: &str) {
    refused_n(body, 1, message, at);
}

#[test]
fn whole_byte_copies_and_loads_are_accepted() {
    accepted(
        "T.copy(A[bx * 16, 0], S)\n\
         for i, j in T.Parallel(16, 32):\n    F[i, j] = S[i, j] + A[i, j] * 2\n\
         T.copy(F, I[bx * 16, 0])",
    );
    // Even starts that are sums and products of even terms; a sub-region of even extent.
    accepted("T.copy(A[bx * 16, bx * 4 + 2 : bx * 4 + 8], S[0, 10:16])");
}

#[test]
fn int4_lives_in_global_and_shared_memory_only() {
    refused(
        "L = T.alloc_fragment((16, 32), \"int4\")\nT.copy(S, L)",
        "int4 buffer `L` is fragment",
        "L = T.alloc_fragment",
    );
}

#[test]
fn rows_fill_whole_bytes() {
    refused(
        "O = T.alloc_shared((16, 31), \"int4\")",
        "odd innermost extent (31)",
        "O = T.alloc_shared",
    );
    refused(
        "T.copy(A[bx * 16 : bx * 16 + 16, bx : bx + 32], S)",
        "innermost start is not provably even",
        "T.copy",
    );
    // Both sides of the copy.
    refused_n(
        "T.copy(A[0, 0:3], S[0, 0:3])",
        2,
        "innermost extent is not provably even",
        "T.copy",
    );
}

#[test]
fn int4_is_written_only_by_copies_between_int4_buffers() {
    refused(
        "for i, j in T.Parallel(16, 32):\n    S[i, j] = 1",
        "this store writes int4 buffer `S`",
        "S[i, j] = 1",
    );
    refused("T.fill(S, 0)", "`T.fill` writes int4 buffer `S`", "T.fill");
    refused(
        "T.copy(S, F)",
        "`T.copy` between int4 buffer `S` and `F`, which is not int4",
        "T.copy",
    );
}

#[test]
fn a_load_widens_to_int32_and_nothing_converts_to_int4() {
    refused(
        "for i, j in T.Parallel(16, 32):\n    F[i, j] = T.cast(I[i, j], \"int4\")",
        "a value cannot be converted to int4",
        "T.cast",
    );
}

/// H6: a target's rules accept int4 (the default pipeline packs it first); laid-out IR,
/// what the lowering takes, has none — one error at the first int4 buffer.
#[test]
fn laid_out_ir_has_no_int4() {
    let (src, f) = func("T.copy(A[bx * 16, 0], S)");
    for target in [Target::Sm80, Target::Sm90a] {
        let req = Requirements {
            target: Some(target),
            ..Requirements::default()
        };
        assert!(verify_with(&f, &req).is_ok());
    }
    assert!(check_level(&f, Level::Tile).is_empty());
    // Laid out, the int4 error is the only one; below that, the first (the tile ops' and
    // fragments' follow).
    for level in [Level::LaidOut, Level::Thread, Level::Planned] {
        let errs = check_level(&f, level);
        let int4: Vec<_> = errs
            .iter()
            .filter(|e| e.message.contains("run pack-int4 first"))
            .collect();
        assert_eq!(int4.len(), 1, "{errs:#?}");
        assert_eq!(
            int4[0].message,
            format!("int4 buffer `A` remains, and {level} IR has none: run pack-int4 first")
        );
        assert!(src[int4[0].span.start..].starts_with("A: T.Tensor"));
        assert!(level > Level::LaidOut || errs.len() == 1, "{errs:#?}");
    }
}

/// C = A @ B^T on int4 through a pipelined kernel with ragged tiles, against an integer
/// loop nest; A and B hold every int4 value.
#[test]
fn int4_gemm_is_exact() {
    let src = "M = T.symbolic(\"M\")\n\n@T.prim_func\ndef g(A: T.Tensor((M, 128), \"int4\"), \
               B: T.Tensor((24, 128), \"int4\"), C: T.Tensor((M, 24), \"int32\")):\n    \
               with T.Kernel(1, T.ceildiv(M, 32), threads=128) as (bx, by):\n        \
               As = T.alloc_shared((32, 64), \"int4\")\n        \
               Bs = T.alloc_shared((24, 64), \"int4\")\n        \
               Cf = T.alloc_fragment((32, 24), \"int32\")\n        \
               T.clear(Cf)\n        \
               for ko in T.Pipelined(2, num_stages=2):\n            \
               T.copy(A[by * 32, ko * 64], As)\n            \
               T.copy(B[0, ko * 64], Bs)\n            \
               T.gemm(As, Bs, Cf, transpose_B=True)\n        \
               T.copy(Cf, C[by * 32, 0])\n";
    let f = parse(src).unwrap_or_else(|d| panic!("{d:#?}"));
    verify(&f).unwrap_or_else(|d| panic!("{d:#?}"));
    let m = 40usize;
    let a: Vec<i64> = (0..m * 128).map(|i| (i * 7 % 16) as i64 - 8).collect();
    let b: Vec<i64> = (0..24 * 128).map(|i| (i * 5 % 16) as i64 - 8).collect();
    let inputs: HashMap<String, Tensor> = [
        (
            "A".to_string(),
            Tensor::from_i64(DType::Int4, &[m, 128], &a).unwrap(),
        ),
        (
            "B".to_string(),
            Tensor::from_i64(DType::Int4, &[24, 128], &b).unwrap(),
        ),
    ]
    .into();
    let dims: HashMap<String, i64> = [("M".to_string(), m as i64)].into();
    let out = run(&f, &dims, inputs, &RunOptions::default()).unwrap_or_else(|e| panic!("{e:?}"));
    let c = out["C"].to_f64();
    for i in 0..m {
        for j in 0..24 {
            let want: i64 = (0..128).map(|l| a[i * 128 + l] * b[j * 128 + l]).sum();
            assert_eq!(c[i * 24 + j], want as f64, "C[{i}, {j}]");
        }
    }
}

/// `packed_int4=True` (what `pack-int4` writes): int8 operands holding two int4 to a byte
/// along K, low nibble first. The same A and B as `int4_gemm_is_exact`, packed by hand, give
/// the same exact products; the flag prints and parses back; compilation refuses it yet.
#[test]
fn packed_int4_gemm_reads_two_nibbles_per_byte() {
    let src = "M = T.symbolic(\"M\")\n\n@T.prim_func\ndef g(A: T.Tensor((M, 64), \"int8\"), \
               B: T.Tensor((24, 64), \"int8\"), C: T.Tensor((M, 24), \"int32\")):\n    \
               with T.Kernel(1, T.ceildiv(M, 32), threads=128) as (bx, by):\n        \
               As = T.alloc_shared((32, 32), \"int8\")\n        \
               Bs = T.alloc_shared((24, 32), \"int8\")\n        \
               Cf = T.alloc_fragment((32, 24), \"int32\")\n        \
               T.clear(Cf)\n        \
               for ko in T.Pipelined(2, num_stages=2):\n            \
               T.copy(A[by * 32, ko * 32], As)\n            \
               T.copy(B[0, ko * 32], Bs)\n            \
               T.gemm(As, Bs, Cf, transpose_B=True, packed_int4=True)\n        \
               T.copy(Cf, C[by * 32, 0])\n";
    let f = parse(src).unwrap_or_else(|d| panic!("{d:#?}"));
    verify(&f).unwrap_or_else(|d| panic!("{d:#?}"));
    let printed = tlc_ir::printer::print_func(&f);
    assert!(printed.contains("packed_int4=True"), "{printed}");
    let again = parse(&printed).unwrap_or_else(|d| panic!("{d:#?}"));
    assert_eq!(tlc_ir::printer::print_func(&again), printed);
    // Both targets take it (mma.sync's m16n8k64 .s4 form).
    for target in [Target::Sm80, Target::Sm90a] {
        let req = Requirements {
            target: Some(target),
            ..Requirements::default()
        };
        verify_with(&f, &req).unwrap_or_else(|d| panic!("{d:#?}"));
    }
    let m = 40usize;
    let a: Vec<i64> = (0..m * 128).map(|i| (i * 7 % 16) as i64 - 8).collect();
    let b: Vec<i64> = (0..24 * 128).map(|i| (i * 5 % 16) as i64 - 8).collect();
    let pack = |v: &[i64]| -> Vec<i64> {
        v.chunks(2)
            .map(|p| i64::from((((p[0] & 0xf) | (p[1] << 4)) as u8) as i8))
            .collect()
    };
    let inputs: HashMap<String, Tensor> = [
        (
            "A".to_string(),
            Tensor::from_i64(DType::Int8, &[m, 64], &pack(&a)).unwrap(),
        ),
        (
            "B".to_string(),
            Tensor::from_i64(DType::Int8, &[24, 64], &pack(&b)).unwrap(),
        ),
    ]
    .into();
    let dims: HashMap<String, i64> = [("M".to_string(), m as i64)].into();
    let out = run(&f, &dims, inputs, &RunOptions::default()).unwrap_or_else(|e| panic!("{e:?}"));
    let c = out["C"].to_f64();
    for i in 0..m {
        for j in 0..24 {
            let want: i64 = (0..128).map(|l| a[i * 128 + l] * b[j * 128 + l]).sum();
            assert_eq!(c[i * 24 + j], want as f64, "C[{i}, {j}]");
        }
    }
}

/// H7: a packed gemm takes int8 operands with K innermost in both.
#[test]
fn packed_int4_gemm_takes_int8_operands_with_k_innermost() {
    let head = "@T.prim_func\ndef g(C: T.Tensor((16, 16), \"int32\")):\n    \
                with T.Kernel(1, threads=128) as bx:\n        \
                As = T.alloc_shared((16, 16), \"DT\")\n        \
                Bs = T.alloc_shared((16, 16), \"DT\")\n        \
                Cf = T.alloc_fragment((16, 16), \"int32\")\n        \
                T.clear(Cf)\n        ";
    let cases = [
        (
            "int8",
            "T.gemm(As, Bs, Cf, packed_int4=True)",
            "transpose_B=True",
        ),
        (
            "int8",
            "T.gemm(As, Bs, Cf, transpose_A=True, transpose_B=True, packed_int4=True)",
            "transpose_B=True",
        ),
        (
            "int4",
            "T.gemm(As, Bs, Cf, transpose_B=True, packed_int4=True)",
            "takes int8 operands",
        ),
    ];
    for (dt, gemm, message) in cases {
        let src = format!("{}{gemm}\n", head.replace("DT", dt));
        let f = parse(&src).unwrap_or_else(|d| panic!("{d:#?}"));
        let errs = verify(&f).err().unwrap_or_default();
        let h7: Vec<_> = errs.iter().filter(|e| e.message.contains("H7")).collect();
        assert!(!h7.is_empty(), "{errs:#?}\n{src}");
        for e in &h7 {
            assert!(e.message.contains(message), "{errs:#?}");
            assert!(
                src[e.span.start..e.span.end].starts_with("T.gemm"),
                "{e:#?}"
            );
        }
    }
}
