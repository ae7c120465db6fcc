//! Codegen of the thread-level intrinsics (`T.cp_async`, commit / wait groups, `T.ldmatrix`,
//! `T.mma_sync`): hand-written thread-level kernels compiled for `sm_80` and `sm_90a`, checked
//! against their manifests and assembled by ptxas for both targets with `-v`, without spills;
//! the PTX must hold the instructions, and the small one-warp case is snapshotted.

use crate::common;

use common::emit::{compile_both, errors};
use common::root;
use tlc_abi::manifest::Manifest;

/// Compiles `src` for both targets, assembles both; returns the sm_80 text and manifest.
fn compile(name: &str, src: &str) -> (String, Manifest) {
    let (mut texts, manifest) = compile_both("codegen_intrinsics", name, src);
    (texts.swap_remove(0), manifest)
}

/// One warp, one m16n8k16 tile: A and B land in shared memory by cp.async (B by half the
/// lanes), ldmatrix.x4 for A, ldmatrix.x2.trans for the K-major B, one mma, C stored.
const MMA_TILE: &str = r#"
@T.prim_func
def mma_tile(
    A: T.Tensor((16, 16), "DT"),
    B: T.Tensor((16, 8), "DT"),
    C: T.Tensor((16, 8), "float32"),
):
    with T.Kernel(1, threads=32) as bx:
        A_s = T.alloc_shared((16, 16), "DT")
        B_s = T.alloc_shared((16, 8), "DT")
        A_f = T.alloc_local((8,), "DT")
        B_f = T.alloc_local((4,), "DT")
        C_f = T.alloc_local((4,), "float32")
        T.shared_arena(bytes=768, offsets={A_s: 0, B_s: 512})
        for tx in T.thread_binding(32, thread="threadIdx.x"):
            T.cp_async(A_s[tx // 2, tx % 2 * 8], A[tx // 2, tx % 2 * 8], 16)
            if tx < 16:
                T.cp_async(B_s[tx, 0], B[tx, 0], 16)
            T.cp_async_commit()
            T.cp_async_wait(0)
            T.sync_threads()
            T.ldmatrix(A_f[0], A_s[tx % 16, tx // 16 * 8], num=4, trans=False)
            T.ldmatrix(B_f[0], B_s[tx % 16, 0], num=2, trans=True)
            for i in T.unroll(4):
                C_f[i] = 0.0
            T.mma_sync(C_f[0], A_f[0], B_f[0])
            for v in T.unroll(2):
                C[tx // 4, tx % 4 * 2 + v] = C_f[v]
                C[tx // 4 + 8, tx % 4 * 2 + v] = C_f[2 + v]
"#;

#[test]
fn mma_tile_f16() {
    let (ptx, man) = compile("mma_tile_f16", &MMA_TILE.replace("DT", "float16"));
    insta::assert_snapshot!("mma_tile_f16", ptx);
    assert_eq!(
        man.kernels[0].shared_bytes,
        tlc_abi::expr::DimExpr::int(768)
    );
    assert!(ptx.contains("cp.async.cg.shared.global"), "{ptx}");
    assert!(ptx.contains("cp.async.commit_group;") && ptx.contains("cp.async.wait_group \t0;"));
    assert!(ptx.contains("ldmatrix.sync.aligned.m8n8.x4.shared.b16"));
    assert!(ptx.contains("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16"));
    assert!(ptx.contains("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"));
    // No predicate: the plain form, without a source size.
    assert!(!ptx.contains("selp"), "{ptx}");
    // The mma accumulates in place: d and c are the same four registers.
    let mma = ptx
        .lines()
        .find(|l| l.contains("mma.sync"))
        .unwrap_or_default();
    let groups: Vec<&str> = mma.split(['{', '}']).collect();
    assert_eq!(groups.get(1), groups.get(7), "{mma}");
}

#[test]
fn mma_tile_bf16() {
    let (ptx, _) = compile("mma_tile_bf16", &MMA_TILE.replace("DT", "bfloat16"));
    assert!(ptx.contains("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"));
    assert!(ptx.contains("ldmatrix.sync.aligned.m8n8.x4.shared.b16"));
    assert!(!ptx.contains(".f16.f16"));
}

/// One warp, one int8 m16n8k32 tile: A (16 x 32) and B stored N x K (8 x 32, K-major) land
/// by cp.async, ldmatrix.x4 / .x2 (untransposed: 16-byte rows of 16 int8), one
/// `mma.sync…m16n8k32.row.col.s32.s8.s8.s32`, the int32 C stored.
const MMA_TILE_S8: &str = r#"
@T.prim_func
def mma_tile_s8(
    A: T.Tensor((16, 32), "int8"),
    B: T.Tensor((8, 32), "int8"),
    C: T.Tensor((16, 8), "int32"),
):
    with T.Kernel(1, threads=32) as bx:
        A_s = T.alloc_shared((16, 32), "int8")
        B_s = T.alloc_shared((8, 32), "int8")
        A_f = T.alloc_local((16,), "int8")
        B_f = T.alloc_local((8,), "int8")
        C_f = T.alloc_local((4,), "int32")
        T.shared_arena(bytes=768, offsets={A_s: 0, B_s: 512})
        for tx in T.thread_binding(32, thread="threadIdx.x"):
            T.cp_async(A_s[tx // 2, tx % 2 * 16], A[tx // 2, tx % 2 * 16], 16)
            if tx < 16:
                T.cp_async(B_s[tx // 2, tx % 2 * 16], B[tx // 2, tx % 2 * 16], 16)
            T.cp_async_commit()
            T.cp_async_wait(0)
            T.sync_threads()
            T.ldmatrix(A_f[0], A_s[tx % 16, tx // 16 * 16], num=4, trans=False)
            T.ldmatrix(B_f[0], B_s[tx % 8, tx // 8 % 2 * 16], num=2, trans=False)
            for i in T.unroll(4):
                C_f[i] = 0
            T.mma_sync(C_f[0], A_f[0], B_f[0])
            for v in T.unroll(2):
                C[tx // 4, tx % 4 * 2 + v] = C_f[v]
                C[tx // 4 + 8, tx % 4 * 2 + v] = C_f[2 + v]
"#;

#[test]
fn mma_tile_s8() {
    let (ptx, _) = compile("mma_tile_s8", MMA_TILE_S8);
    assert!(
        ptx.contains("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"),
        "{ptx}"
    );
    assert!(ptx.contains("ldmatrix.sync.aligned.m8n8.x4.shared.b16"));
    assert!(ptx.contains("ldmatrix.sync.aligned.m8n8.x2.shared.b16"));
    // The mma takes the words ldmatrix loaded (`packed_bytes`): nothing is re-packed.
    assert!(!ptx.contains("bfi.b32"), "{ptx}");
    let mma = ptx
        .lines()
        .find(|l| l.contains("mma.sync"))
        .unwrap_or_default();
    let groups: Vec<&str> = mma.split(['{', '}']).collect();
    // d and c the same four registers; A four words, B two.
    assert_eq!(groups.get(1), groups.get(7), "{mma}");
    assert_eq!(
        groups.get(3).map(|g| g.split(',').count()),
        Some(4),
        "{mma}"
    );
    assert_eq!(
        groups.get(5).map(|g| g.split(',').count()),
        Some(2),
        "{mma}"
    );
}

/// [`MMA_TILE_S8`]'s bytes as packed int4 (two to a byte along K, low nibble first): the
/// same loads, `T.mma_sync(..., packed_int4=True)`, a 16 x 64 by 64 x 8 int4 product.
fn mma_tile_s4_source() -> String {
    MMA_TILE_S8
        .replace("def mma_tile_s8(", "def mma_tile_s4(")
        .replace(
            "T.mma_sync(C_f[0], A_f[0], B_f[0])",
            "T.mma_sync(C_f[0], A_f[0], B_f[0], packed_int4=True)",
        )
}

#[test]
fn mma_tile_s4() {
    let (ptx, _) = compile("mma_tile_s4", &mma_tile_s4_source());
    let mma: Vec<&str> = ptx.lines().filter(|l| l.contains("mma.sync")).collect();
    assert_eq!(mma.len(), 1, "{ptx}");
    assert!(
        mma[0].contains("mma.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32"),
        "{ptx}"
    );
    // The bytes ldmatrix loaded, as they are: nothing re-packed.
    assert!(!ptx.contains("bfi.b32"), "{ptx}");
}

/// The interpreter's packed-int4 `T.mma_sync` (docs/ir.md: byte column `q` holds K indices
/// `2q`, low nibble, and `2q + 1`) gives C = A @ B^T of the int4 values exactly, over the
/// whole int4 range; computed here from the nibbles directly.
#[test]
fn mma_tile_s4_interprets_to_the_int4_product() {
    use std::collections::HashMap;
    use tlc_ir::dtype::DType;
    use tlc_ir::interp::{self, RunOptions, Tensor};
    let func = tlc_ir::parse::parse(&mma_tile_s4_source()).expect("parse");
    // int4 values -8..=7, two to a byte: byte = (hi << 4) | (lo & 15), as an int8.
    let int4 = |n: usize, salt: u64| -> Vec<i64> {
        (0..n)
            .map(|i| (tlc_ir::hash::SplitMix64::mix(salt ^ i as u64) % 16) as i64 - 8)
            .collect()
    };
    let (mut a, mut b) = (int4(16 * 64, 5), int4(8 * 64, 6));
    // The extremes: a row of -8s times a column of -8s.
    a[..64].fill(-8);
    b[..64].fill(-8);
    let bytes = |v: &[i64]| -> Vec<f64> {
        v.chunks(2)
            .map(|p| f64::from((((p[1] << 4) | (p[0] & 15)) as u8) as i8))
            .collect()
    };
    let inputs = HashMap::from([
        (
            "A".to_string(),
            Tensor::from_f64(DType::Int8, &[16, 32], &bytes(&a)).expect("A"),
        ),
        (
            "B".to_string(),
            Tensor::from_f64(DType::Int8, &[8, 32], &bytes(&b)).expect("B"),
        ),
    ]);
    let opts = RunOptions {
        seed: 1,
        threads: 0,
    };
    let out = interp::run(&func, &HashMap::new(), inputs, &opts).expect("interpreter");
    let c = out["C"].to_f64();
    for i in 0..16 {
        for j in 0..8 {
            let want: i64 = (0..64).map(|k| a[i * 64 + k] * b[j * 64 + k]).sum();
            assert_eq!(c[i * 8 + j], want as f64, "C[{i}, {j}]");
        }
    }
    assert_eq!(c[0], 64.0 * 64.0, "the extremes");
}

/// The interpreter's `T.ldmatrix` / `T.mma_sync` on int8 (docs/ir.md's lane layouts) give
/// C = A @ B^T exactly, over the whole int8 range (|sums| up to 32 · 2^14).
#[test]
fn mma_tile_s8_interprets_to_the_integer_product() {
    use std::collections::HashMap;
    use tlc_ir::dtype::DType;
    use tlc_ir::interp::{self, RunOptions, Tensor};
    let func = tlc_ir::parse::parse(MMA_TILE_S8).expect("parse");
    let vals = |n: usize, salt: u64| -> Vec<f64> {
        (0..n)
            .map(|i| (tlc_ir::hash::SplitMix64::mix(salt ^ i as u64) % 256) as f64 - 128.0)
            .collect()
    };
    let (mut a, mut b) = (vals(16 * 32, 3), vals(8 * 32, 4));
    // The extremes too: a row of -128s times a column of -128s is 32 · 2^14.
    a[..32].fill(-128.0);
    b[..32].fill(-128.0);
    let inputs = HashMap::from([
        (
            "A".to_string(),
            Tensor::from_f64(DType::Int8, &[16, 32], &a).expect("A"),
        ),
        (
            "B".to_string(),
            Tensor::from_f64(DType::Int8, &[8, 32], &b).expect("B"),
        ),
    ]);
    let opts = RunOptions {
        seed: 1,
        threads: 0,
    };
    let out = interp::run(&func, &HashMap::new(), inputs, &opts).expect("interpreter");
    let c = out["C"].to_f64();
    for i in 0..16 {
        for j in 0..8 {
            let want: f64 = (0..32).map(|k| a[i * 32 + k] * b[j * 32 + k]).sum();
            assert_eq!(c[i * 8 + j], want, "C[{i}, {j}]");
        }
    }
    assert_eq!(c[0], 32.0 * 16384.0);
}

/// The 2-stage cp.async ring of a 64x64x32 tensor-core GEMM (4 warps, zero-fill past the
/// ragged edges), the kernel `tlc bench` runs on a GPU.
#[test]
fn gemm_pipeline() {
    let path = root().join("tools/tests/bench/gemm_mma.tir");
    let src = std::fs::read_to_string(&path).expect("gemm_mma.tir");
    let (ptx, man) = compile("gemm_mma", &src);
    assert_eq!(man.kernels[0].block, vec![128]);
    assert_eq!(man.dims.len(), 3);
    // Each stage's copies are predicated: src-size 16 or 0.
    assert!(ptx.contains("selp.u32"), "{ptx}");
    let count = |s: &str| ptx.matches(s).count();
    // 4 copies in the prologue and 4 in the loop (both unrolled twice).
    assert_eq!(count("cp.async.cg.shared.global"), 8);
    assert_eq!(count("cp.async.commit_group"), 2);
    assert_eq!(count("cp.async.wait_group \t1;"), 1);
    // Per k16 step: 2 ldmatrix for A, 2 (.trans) for B, 8 mma; the step is unrolled twice.
    assert_eq!(count("ldmatrix.sync.aligned.m8n8.x4.shared.b16"), 4);
    assert_eq!(count("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"), 4);
    assert_eq!(count("mma.sync.aligned.m16n8k16"), 16);
    assert_eq!(count("bar.sync"), 2);
}

/// 4- and 8-byte copies use `.ca`; a predicate that reads memory is evaluated under a
/// branch, and the zero-fill form reads nothing when it is false.
const SMALL_COPIES: &str = r#"
N = T.symbolic("N")

@T.prim_func
def small_copies(
    X: T.Tensor((N,), "float32"),
    Y: T.Tensor((N,), "float32"),
    F: T.Tensor((256,), "int32"),
):
    with T.Kernel(T.ceildiv(N, 256), threads=128) as bx:
        S = T.alloc_shared((256,), "float32")
        T.shared_arena(bytes=1024, offsets={S: 0})
        for tx in T.thread_binding(128, thread="threadIdx.x"):
            T.cp_async(S[tx * 2], X[bx * 256 + tx * 2], 8, bx * 256 + tx * 2 < N)
            T.cp_async_commit()
            T.cp_async(S[tx], X[bx * 256 + tx], 4, F[tx] > 0 and bx * 256 + tx < N)
            T.cp_async_commit()
            T.cp_async_wait(1)
            T.cp_async_wait(0)
            T.sync_threads()
            if bx * 256 + tx < N:
                Y[bx * 256 + tx] = S[255 - tx]
"#;

#[test]
fn small_copies_use_ca() {
    let (ptx, _) = compile("small_copies", SMALL_COPIES);
    assert!(ptx.contains("cp.async.ca.shared.global"), "{ptx}");
    assert!(!ptx.contains("cp.async.cg"), "{ptx}");
    let copies: Vec<&str> = ptx.lines().filter(|l| l.contains("cp.async.ca")).collect();
    assert_eq!(copies.len(), 2, "{ptx}");
    assert!(copies[0].contains(", 8, %r"), "{}", copies[0]);
    assert!(copies[1].contains(", 4, %r"), "{}", copies[1]);
    assert!(
        ptx.contains("selp.u32 \t%r") && ptx.contains(", 8, 0, %p"),
        "{ptx}"
    );
    // `F[tx] > 0 and ...` reads memory on the left only: no short-circuit branch.
    assert!(!ptx.contains("$L__sc_end"), "{ptx}");
    assert!(ptx.contains("cp.async.wait_group \t1;") && ptx.contains("cp.async.wait_group \t0;"));
}

#[test]
fn non_constant_fragment_index_is_a_spanned_error() {
    let src = r#"
@T.prim_func
def bad(A: T.Tensor((16, 16), "float16"), C: T.Tensor((32, 4), "float32")):
    with T.Kernel(1, threads=32) as bx:
        A_s = T.alloc_shared((16, 16), "float16")
        A_f = T.alloc_local((16,), "float16")
        C_f = T.alloc_local((4,), "float32")
        T.shared_arena(bytes=512, offsets={A_s: 0})
        for tx in T.thread_binding(32, thread="threadIdx.x"):
            for k in T.serial(2):
                T.ldmatrix(A_f[k * 8], A_s[tx % 16, tx // 16 * 8], num=4, trans=False)
            for i in T.unroll(4):
                C_f[i] = 0.0
            T.mma_sync(C_f[0], A_f[0], A_f[8])
            C[tx, 0] = C_f[0]
"#;
    let errs = errors(src);
    assert!(errs[0].message.contains("not a constant"), "{errs:?}");
    assert_eq!(&src[errs[0].span.start..][..5], "k * 8");
}
