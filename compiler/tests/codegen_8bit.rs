//! Codegen of the 8-bit element types — int8, uint8, bool, float8_e4m3, float8_e5m2 — in
//! tensors, shared buffers and local arrays: byte loads and stores (`ld.s8` / `ld.u8` into
//! 32-bit registers, `st.u8` of the low byte; a bool byte is compared with 0 and stored as
//! 1 / 0), int8 / uint8 arithmetic wrapped to the width, fp8 conversions (sm_90a's `cvt`
//! forms, sm_80's integer sequences of `codegen/fp8.rs`, whose bit-exactness its unit tests
//! check), and vector accesses of 1-byte elements. Each kernel is compiled for `sm_80` and
//! `sm_90a`, checked against its manifest and assembled by ptxas for both.

use crate::common;

use common::emit::{compile_both, errors};

/// Compiles `src` for both targets and assembles both; returns (sm_80, sm_90a).
fn compile(name: &str, src: &str) -> (String, String) {
    let mut texts = compile_both("codegen_8bit", name, src).0;
    let sm90 = texts.pop().expect("sm_90a");
    let sm80 = texts.pop().expect("sm_80");
    (sm80, sm90)
}

fn count(ptx: &str, needle: &str) -> usize {
    ptx.matches(needle).count()
}

const BYTES: &str = r#"
@T.prim_func
def bytes_rw(
    A: T.Tensor((128,), "int8"),
    B: T.Tensor((128,), "uint8"),
    M: T.Tensor((128,), "bool"),
    C: T.Tensor((128,), "int8"),
    D: T.Tensor((128,), "uint8"),
    F: T.Tensor((128,), "bool"),
    G: T.Tensor((128,), "int8"),
    X: T.Tensor((128,), "float32"),
):
    with T.Kernel(1, threads=128) as bx:
        for tx in T.thread_binding(128, thread="threadIdx.x"):
            C[tx] = A[tx] * 3 + 1
            D[tx] = ~B[tx] + 250
            F[tx] = M[tx] and A[tx] < 0
            G[tx] = T.cast(X[tx], "int8") + T.cast(A[tx], "uint8")
"#;

#[test]
fn byte_loads_stores_and_wrapping() {
    let (ptx, _) = compile("bytes_rw", BYTES);
    // int8 sign-extends, uint8 and bool zero-extend, into 32-bit registers.
    assert!(ptx.contains("ld.global.s8 \t%r"), "{ptx}");
    assert!(ptx.contains("ld.global.u8 \t%r"), "{ptx}");
    assert_eq!(count(&ptx, "st.global.u8 \t"), 2, "{ptx}");
    assert_eq!(count(&ptx, "st.global.s8 \t"), 2, "{ptx}");
    // A loaded bool byte is true when non-zero; a stored one is 1 or 0.
    assert!(ptx.contains("setp.ne.u32"), "{ptx}");
    assert!(
        ptx.contains("selp.u32 \t%r") && ptx.contains(", 1, 0, %p"),
        "{ptx}"
    );
    // int8 arithmetic wraps; uint8's `~` and `+` wrap; the int8 → uint8 cast too.
    assert!(count(&ptx, "cvt.s32.s8") >= 2, "{ptx}");
    assert!(count(&ptx, "cvt.u32.u8") >= 3, "{ptx}");
    // A float → int8 cast truncates, saturates to 32 bits, then clamps to the byte.
    assert!(ptx.contains("cvt.rzi.sat.s32.f32"), "{ptx}");
    assert!(ptx.contains("max.s32") && ptx.contains(", -128;"), "{ptx}");
    assert!(ptx.contains("min.s32") && ptx.contains(", 127;"), "{ptx}");
}

const FP8: &str = r#"
@T.prim_func
def fp8_conv(
    X: T.Tensor((128,), "float32"),
    H: T.Tensor((128,), "float16"),
    Y: T.Tensor((128,), "float8_e4m3"),
    Z: T.Tensor((128,), "float8_e5m2"),
    W: T.Tensor((128,), "float32"),
    P: T.Tensor((128,), "float8_e4m3"),
):
    with T.Kernel(1, threads=128) as bx:
        for tx in T.thread_binding(128, thread="threadIdx.x"):
            Y[tx] = X[tx]
            Z[tx] = H[tx] * 2.0
            W[tx] = Y[tx] + Z[tx]
            P[tx] = -Y[tx] * 0.3
"#;

#[test]
fn fp8_conversions_per_target() {
    let (sm80, sm90) = compile("fp8_conv", FP8);
    // sm_90a: the hardware conversions, one per value.
    assert_eq!(count(&sm90, "cvt.rn.satfinite.e4m3x2.f32"), 3, "{sm90}");
    assert_eq!(count(&sm90, "cvt.rn.satfinite.e5m2x2.f32"), 1, "{sm90}");
    assert!(sm90.contains("cvt.rn.f16x2.e4m3x2"), "{sm90}");
    assert!(sm90.contains("cvt.rn.f16x2.e5m2x2"), "{sm90}");
    // sm_80 has none: the integer sequences, with the subnormal step's f32 additions
    // (2^14 for e4m3, 2^7 for e5m2) and the rebiasing products (2^120, 2^112).
    assert!(
        !sm80.contains("e4m3x2") && !sm80.contains("e5m2x2"),
        "{sm80}"
    );
    assert_eq!(count(&sm80, "0f46800000"), 3, "{sm80}");
    assert_eq!(count(&sm80, "0f43000000"), 1, "{sm80}");
    assert!(
        sm80.contains("0f7B800000") && sm80.contains("0f77800000"),
        "{sm80}"
    );
    // The fp8 bits are stored as bytes, from `.b16` registers.
    for ptx in [&sm80, &sm90] {
        assert_eq!(count(ptx, "st.global.u8 \t[%rd"), 3, "{ptx}");
        assert!(ptx.contains("ld.global.u8 \t%h"), "{ptx}");
    }
    // The literal 0.3 is an e4m3 (0.3125) in the product, as in the interpreter.
    assert!(
        sm80.contains("0f3EA00000") && !sm80.contains("0f3E99999A"),
        "{sm80}"
    );
}

const VECTORS: &str = r#"
@T.prim_func
def byte_vectors(
    A: T.Tensor((128, 16), "int8"),
    Q: T.Tensor((128, 16), "float8_e4m3"),
    M: T.Tensor((128, 8), "bool"),
    C: T.Tensor((128, 16), "int8"),
    R: T.Tensor((128, 16), "float8_e4m3"),
    N: T.Tensor((128, 8), "bool"),
):
    with T.Kernel(1, threads=128) as bx:
        S = T.alloc_shared((128, 16), "int8")
        T.shared_arena(bytes=2048, offsets={S: 0})
        for tx in T.thread_binding(128, thread="threadIdx.x"):
            for v in T.vectorized(16):
                S[tx, v] = A[tx, v]
            for v in T.vectorized(16):
                C[tx, v] = S[tx, v] + 1
            for v in T.vectorized(4):
                R[tx, v] = Q[tx, v] * 2.0
            for v in T.vectorized(8):
                N[tx, v] = not M[tx, v]
"#;

#[test]
fn byte_vectors_pack_four_to_a_word() {
    let (sm80, sm90) = compile("byte_vectors", VECTORS);
    for ptx in [&sm80, &sm90] {
        // The copy moves whole words; the sum takes them apart and puts them together.
        assert!(ptx.contains("ld.global.v4.b32"), "{ptx}");
        assert!(ptx.contains("st.shared.v4.b32"), "{ptx}");
        assert!(ptx.contains("ld.shared.v4.b32"), "{ptx}");
        assert!(ptx.contains("st.global.v4.b32"), "{ptx}");
        assert_eq!(count(ptx, "bfe.s32"), 16, "{ptx}");
        // 16 int8 lanes, 4 fp8 lanes and 8 bools: three bfi per word.
        assert_eq!(count(ptx, "bfi.b32"), 12 + 3 + 6, "{ptx}");
        // The fp8 quad and the bool pair are one word and two words.
        assert!(ptx.contains("ld.global.b32"), "{ptx}");
        assert!(ptx.contains("st.global.b32"), "{ptx}");
        assert!(ptx.contains("ld.global.v2.b32") && ptx.contains("st.global.v2.b32"));
        assert!(!ptx.contains(".u8"), "{ptx}");
    }
}

const LOCALS: &str = r#"
@T.prim_func
def byte_locals(
    A: T.Tensor((128, 8), "int8"),
    I: T.Tensor((128,), "int32"),
    M: T.Tensor((128, 8), "bool"),
    C: T.Tensor((128,), "int8"),
    F: T.Tensor((128,), "bool"),
    Y: T.Tensor((128,), "float8_e5m2"),
):
    with T.Kernel(1, threads=128) as bx:
        a = T.alloc_local((8,), "int8")
        m = T.alloc_local((8,), "bool")
        y = T.alloc_local((2,), "float8_e5m2")
        for tx in T.thread_binding(128, thread="threadIdx.x"):
            for k in T.serial(8):
                a[k] = A[tx, k]
            for u in T.unroll(8):
                m[u] = M[tx, u]
            y[0] = a[0]
            y[1] = a[7] * 3
            C[tx] = a[I[tx] % 8]
            F[tx] = m[3] or m[I[tx] % 4]
            Y[tx] = y[0] * y[1]
"#;

#[test]
fn byte_local_arrays() {
    let (sm80, _) = compile("byte_locals", LOCALS);
    // `a` is indexed at run time: one byte per element in local memory.
    assert!(
        sm80.contains(".local .align 1 .b8 \t__local_a[8];"),
        "{sm80}"
    );
    assert!(sm80.contains("st.local.u8"), "{sm80}");
    assert!(sm80.contains("ld.local.s8"), "{sm80}");
    // `m` too (`m[I[tx] % 4]`); `y` lives in registers.
    assert!(
        sm80.contains("__local_m[8]") && !sm80.contains("__local_y"),
        "{sm80}"
    );
}

#[test]
fn float64_tensors_are_still_refused() {
    let errs = errors(
        r#"
@T.prim_func
def f64(X: T.Tensor((128,), "float64")):
    with T.Kernel(1, threads=128) as bx:
        for tx in T.thread_binding(128, thread="threadIdx.x"):
            X[tx] = X[tx] * 2.0
"#,
    );
    assert!(
        errs.iter()
            .any(|e| e.message.contains("does not support float64 tensors")),
        "{errs:?}"
    );
}

#[test]
fn narrow_float_literals_round_to_the_operation_dtype() {
    // `x * 0.1` in float16: the interpreter multiplies by float16(0.1) = 0.0999755859375
    // (0x3DCCC000 as an f32), not by float32(0.1).
    let (ptx, _) = compile(
        "f16_literal",
        r#"
@T.prim_func
def f16_literal(X: T.Tensor((128,), "float16"), Y: T.Tensor((128,), "float16")):
    with T.Kernel(1, threads=128) as bx:
        for tx in T.thread_binding(128, thread="threadIdx.x"):
            Y[tx] = X[tx] * 0.1
"#,
    );
    assert!(
        ptx.contains("0f3DCCC000") && !ptx.contains("0f3DCCCCCD"),
        "{ptx}"
    );
}
