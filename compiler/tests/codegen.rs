//! Codegen: every thread-level case (corpus files and the inline cases below) is compiled
//! for `sm_80` and `sm_90a`; the PTX (manifest line included) is snapshotted, its parameters
//! checked against the manifest, and ptxas must assemble it for both targets with `-v`,
//! without spills. Unsupported inputs give spanned errors, never panics.

use crate::common;

use common::emit::{compile_both, errors};
use common::root;
use tlc_abi::expr::DimExpr;
use tlc_abi::manifest::{Access, Manifest};

fn corpus(name: &str) -> String {
    let path = root().join(format!("tests/cases/valid/{name}.tir"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Compiles `src` for both targets, snapshots the sm_80 text, assembles both; returns the
/// sm_80 PTX text and manifest.
fn check(name: &str, src: &str) -> (String, Manifest) {
    let (mut texts, manifest) = compile_both("codegen", name, src);
    let text80 = texts.swap_remove(0);
    insta::assert_snapshot!(name, text80);
    (text80, manifest)
}

#[test]
fn thread_level() {
    let (ptx, man) = check("thread_level", &corpus("thread_level"));
    assert_eq!(man.kernels[0].grid, vec![DimExpr::int(8)]);
    assert_eq!(man.kernels[0].block, vec![128]);
    assert_eq!(man.params[0].access, Access::Read);
    assert_eq!(man.params[1].access, Access::Write);
    assert!(ptx.contains("%tid.x") && ptx.contains("%ctaid.x"));
    assert!(ptx.contains("ld.global.f32") && ptx.contains("st.global.f32"));
}

#[test]
fn thread_vectorized() {
    let (ptx, man) = check("thread_vectorized", &corpus("thread_vectorized"));
    assert_eq!(man.kernels[0].shared_bytes, DimExpr::int(49152));
    assert!(ptx.contains(".extern .shared .align 16 .b8 smem[];"));
    assert!(ptx.contains("bar.sync \t0;"));
    assert!(ptx.contains("cvt.f32.f16"));
    assert!(ptx.contains("ld.global.v4.b32") && ptx.contains("st.shared.v4.f32"));
    assert!(ptx.contains("ld.shared.v4.f32") && ptx.contains("st.global.v4.f32"));
}

#[test]
fn transpose_without_arena_is_an_error() {
    let errs = errors(&corpus("thread_transpose"));
    assert!(
        errs.iter()
            .any(|e| e.message.contains("run plan-shared-memory first")),
        "{errs:?}"
    );
}

const TRANSPOSE_PLANNED: &str = r#"
@T.prim_func
def transpose_planned(
    A: T.Tensor((256, 256), "float32"),
    B: T.Tensor((256, 256), "float32"),
):
    with T.Kernel(4, 4, threads=512) as (bx, by):
        S = T.alloc_shared((64, 65), "float32")
        T.shared_arena(bytes=16640, offsets={S: 0})
        for tx in T.thread_binding(512, thread="threadIdx.x"):
            for k in T.serial(8):
                S[(tx + k * 512) // 64, (tx + k * 512) % 64] = A[by * 64 + (tx + k * 512) // 64, bx * 64 + (tx + k * 512) % 64]
            T.sync_threads()
            for k in T.serial(8):
                B[bx * 64 + (tx + k * 512) // 64, by * 64 + (tx + k * 512) % 64] = S[(tx + k * 512) % 64, (tx + k * 512) // 64]
"#;

#[test]
fn transpose_planned() {
    let (ptx, man) = check("transpose_planned", TRANSPOSE_PLANNED);
    assert_eq!(man.kernels[0].grid, vec![DimExpr::int(4), DimExpr::int(4)]);
    assert!(ptx.contains("%ctaid.y"));
    assert!(ptx.contains("ld.shared.f32") && ptx.contains("st.shared.f32"));
    // `// 64` and `% 64` are a shift and a mask.
    assert!(ptx.contains("shr.s32") && ptx.contains("and.b32"));
}

const ELEMENTWISE_TAIL: &str = r#"
N = T.symbolic("N")

@T.prim_func
def add_tail(
    A: T.Tensor((N,), "float32"),
    B: T.Tensor((N,), "float32"),
    C: T.Tensor((N,), "float32"),
):
    with T.Kernel(T.ceildiv(N, 256), threads=256) as bx:
        for tx in T.thread_binding(256, thread="threadIdx.x"):
            if bx * 256 + tx < N:
                C[bx * 256 + tx] = A[bx * 256 + tx] + B[bx * 256 + tx]
"#;

#[test]
fn elementwise_tail_symbolic() {
    let (ptx, man) = check("add_tail", ELEMENTWISE_TAIL);
    assert_eq!(man.dims.len(), 1);
    assert_eq!(
        man.kernels[0].grid,
        vec![DimExpr::ceildiv(DimExpr::dim("N"), DimExpr::int(256))]
    );
    assert_eq!(man.params[0].shape, vec![DimExpr::dim("N")]);
    assert!(ptx.contains(".param .u32 add_tail_param_N"));
    assert!(ptx.contains("setp.lt.s32"));
    // The guarded statement's addresses (two loads, one store) are computed before the
    // guard; inside it only the memory accesses remain.
    let (before, inside) = ptx.split_once("bra").unwrap_or_default();
    assert_eq!(before.matches("mad.lo.s64").count(), 3, "{ptx}");
    assert_eq!(inside.matches("mad.lo.s64").count(), 0, "{ptx}");
}

const FLOOR_MATH: &str = r#"
@T.prim_func
def floor_math(
    A: T.Tensor((256,), "int32"),
    Q: T.Tensor((256,), "int32"),
    R: T.Tensor((256,), "int32"),
    S: T.Tensor((256,), "int32"),
):
    with T.Kernel(1, threads=256) as bx:
        for tx in T.thread_binding(256, thread="threadIdx.x"):
            x = A[tx] - 128
            Q[tx] = x // 7 + x // -3 + x // 8
            R[tx] = x % 7 + x % -3 + x % 8
            S[tx] = T.ceildiv(x, 5) + T.min(x, 3) * T.max(x, -2)
"#;

#[test]
fn floor_div_mod() {
    let (ptx, _) = check("floor_math", FLOOR_MATH);
    assert!(ptx.contains("div.s32") && ptx.contains("rem.s32"));
    assert!(ptx.contains("xor.b32"));
}

const CONVERSIONS: &str = r#"
@T.prim_func
def conversions(
    H: T.Tensor((128,), "float16"),
    G: T.Tensor((128,), "bfloat16"),
    F: T.Tensor((128,), "float32"),
    I: T.Tensor((128,), "int32"),
    H2: T.Tensor((128,), "float16"),
    G2: T.Tensor((128,), "bfloat16"),
):
    with T.Kernel(1, threads=128) as bx:
        for tx in T.thread_binding(128, thread="threadIdx.x"):
            H2[tx] = H[tx] * 2.0 + T.cast(G[tx], "float16")
            G2[tx] = T.cast(F[tx], "bfloat16") - G[tx]
            I[tx] = T.cast(F[tx] * 3.5, "int32") + T.cast(H[tx], "int32")
            F[tx] = T.if_then_else(tx < 64, T.cast(I[tx], "float32"), F[tx + 1])
"#;

#[test]
fn f16_bf16_conversions() {
    let (ptx, _) = check("conversions", CONVERSIONS);
    assert!(ptx.contains("cvt.rn.f16.f32") && ptx.contains("cvt.rn.bf16.f32"));
    assert!(ptx.contains("cvt.f32.bf16"));
    assert!(ptx.contains("cvt.rzi.sat.s32.f32"));
    // The select's arms load memory: a branch, not a selp.
    assert!(ptx.contains("$L__sel_else"));
}

const MASKED_COPY: &str = r#"
M = T.symbolic("M")

@T.prim_func
def masked_copy(
    X: T.Tensor((M, 64), "float16"),
    Y: T.Tensor((M, 64), "float16"),
):
    with T.Kernel(T.ceildiv(M, 16), threads=64) as bx:
        for tx in T.thread_binding(64, thread="threadIdx.x"):
            Y[bx * 16 + tx // 16, tx % 16 * 4] = T.if_then_else(bx * 16 + tx // 16 < M, X[bx * 16 + tx // 16, tx % 16 * 4], T.cast(0, "float16"))
            Y[bx * 16 + 4 + tx // 16, tx % 16 * 4] = T.if_then_else(bx * 16 + 4 + tx // 16 < M, X[bx * 16 + 4 + tx // 16, tx % 16 * 4], T.cast(0, "float16"))
            Y[bx * 16 + 8 + tx // 16, tx % 16 * 4] = T.if_then_else(bx * 16 + 8 + tx // 16 < M, X[bx * 16 + 8 + tx // 16, tx % 16 * 4], T.cast(0, "float16"))
"#;

#[test]
fn masked_loads_share_one_address() {
    let (ptx, _) = check("masked_copy", MASKED_COPY);
    // Each load stays behind its guard (a branch)...
    assert_eq!(ptx.matches("$L__sel_else").count() / 2, 3, "{ptx}");
    // ...but the address math runs before the guards, once: the three rows differ by
    // immediate offsets (4 rows of 64 halves = 512 bytes) from one register.
    let loads: Vec<&str> = ptx
        .lines()
        .filter(|l| l.contains("ld.global.b16"))
        .collect();
    assert_eq!(loads.len(), 3, "{ptx}");
    let base = |l: &str| {
        l.split('[')
            .nth(1)
            .and_then(|r| r.split(['+', ']']).next())
            .map(str::to_string)
    };
    assert!(loads.iter().all(|l| base(l) == base(loads[0])), "{loads:?}");
    assert!(
        loads[1].contains("+512]") && loads[2].contains("+1024]"),
        "{loads:?}"
    );
}

const STALE_INDEX: &str = r#"
@T.prim_func
def stale_index(
    A: T.Tensor((64,), "float32"),
    I: T.Tensor((64,), "int32"),
    B: T.Tensor((64,), "float32"),
):
    with T.Kernel(1, threads=32) as bx:
        S = T.alloc_shared((64,), "float32")
        L = T.alloc_local((1,), "int32")
        T.shared_arena(bytes=256, offsets={S: 0})
        for tx in T.thread_binding(32, thread="threadIdx.x"):
            S[tx] = A[tx]
            S[tx + 32] = A[tx + 32]
            T.sync_threads()
            L[0] = I[tx] % 64
            B[tx] = S[L[0]]
            L[0] = I[tx + 32] % 64
            B[tx + 32] = S[L[0]]
"#;

/// A local element used as an index is rewritten between two loads: the second address
/// must be computed from the new value, not reused from the first (value numbering keys
/// name registers, and a local element's register changes on a store).
#[test]
fn rewritten_local_index_gets_a_new_address() {
    let (ptx, _) = check("stale_index", STALE_INDEX);
    let addrs: Vec<&str> = ptx
        .lines()
        .filter(|l| l.contains("ld.shared.f32"))
        .filter_map(|l| l.split('[').nth(1))
        .collect();
    assert_eq!(addrs.len(), 2, "{ptx}");
    assert_ne!(addrs[0], addrs[1], "{ptx}");
}

const VECTOR_COPY: &str = r#"
@T.prim_func
def vector_copy(
    X: T.Tensor((64, 128), "float16"),
    Y: T.Tensor((64, 128), "float16"),
):
    with T.Kernel(1, threads=128) as bx:
        acc = T.alloc_local((4,), "float16")
        for tx in T.thread_binding(128, thread="threadIdx.x"):
            for it in T.serial(8):
                for v in T.vectorized(8):
                    Y[(it * 128 + tx) // 16, (it * 128 + tx) % 16 * 8 + v] = X[(it * 128 + tx) // 16, (it * 128 + tx) % 16 * 8 + v]
            for v in T.unroll(4):
                acc[v] = X[tx // 2, v]
            Y[0, tx] = acc[0] + acc[3]
"#;

#[test]
fn vectorized_copy() {
    let (ptx, _) = check("vector_copy", VECTOR_COPY);
    // 8 f16 = 16 bytes: one v4 of packed pairs each way.
    assert!(ptx.contains("ld.global.v4.b32") && ptx.contains("st.global.v4.b32"));
    // The unrolled loop into the local array reads scalars (X[tx // 2, v]).
    assert!(ptx.contains("ld.global.b16"));
}

#[test]
fn errors_are_spanned() {
    let tile = r#"
@T.prim_func
def tile(A: T.Tensor((128,), "float32")):
    with T.Kernel(1, threads=128) as bx:
        for i in T.Parallel(128):
            A[i] = 0.0
"#;
    let errs = errors(tile);
    assert!(
        errs[0].message.contains("run lower-tile-ops first"),
        "{errs:?}"
    );
    assert_eq!(&tile[errs[0].span.start..][..3], "for");

    // Two kernels compile (codegen_kernels.rs); a loop around a kernel would run on the host:
    // the verifier's K12 refuses it before code generation.
    let looped = r#"
@T.prim_func
def looped(A: T.Tensor((128,), "float32")):
    for r in T.serial(2):
        with T.Kernel(1, threads=128) as bx:
            for tx in T.thread_binding(128, thread="threadIdx.x"):
                A[tx] = 1.0
"#;
    let func = tlc_ir::parse(looped).expect("parses");
    let errs = tlc_ir::verifier::verify(&func).expect_err("K12");
    assert!(
        errs[0]
            .message
            .contains("outside a `T.Kernel` a function holds only kernels and lets"),
        "{errs:?}"
    );
    assert_eq!(&looped[errs[0].span.start..][..3], "for");

    let local = r#"
@T.prim_func
def local(A: T.Tensor((128,), "float32")):
    with T.Kernel(1, threads=128) as bx:
        acc = T.alloc_local((4,), "float32")
        for tx in T.thread_binding(128, thread="threadIdx.x"):
            for k in T.unroll(5):
                acc[k] = 1.0
            A[tx] = acc[0]
"#;
    // The verifier's bounds rule refuses it before code generation (whose own check of
    // constant local indices stays, for IR that reaches it unverified).
    let f = tlc_ir::parse(local).expect("parses");
    let errs = tlc_ir::verifier::verify(&f).expect_err("acc[4] is out of bounds");
    assert!(
        errs[0].message.contains(
            "index `k` is out of bounds for dimension 0 of `acc` (extent 4): it is 4 when k = 4"
        ),
        "{errs:?}"
    );
    assert_eq!(&local[errs[0].span.start..][..1], "k");

    let unroll = r#"
N = T.symbolic("N")

@T.prim_func
def unroll(A: T.Tensor((N,), "float32")):
    with T.Kernel(1, threads=128) as bx:
        for tx in T.thread_binding(128, thread="threadIdx.x"):
            for k in T.unroll(N):
                A[k] = 1.0
"#;
    let errs = errors(unroll);
    assert!(errs[0].message.contains("constant bounds"), "{errs:?}");
}

/// `T.min_blocks_per_sm(B)` becomes `.minnctapersm B` beside `.reqntid`, and ptxas budgets
/// the registers for it (both targets assemble it; `compile_both`).
#[test]
fn min_blocks_per_sm_is_minnctapersm() {
    let src = corpus("thread_level").replace(
        "    with T.Kernel(8, threads=128) as bx:\n",
        "    with T.Kernel(8, threads=128) as bx:\n        T.min_blocks_per_sm(4)\n",
    );
    assert!(src.contains("T.min_blocks_per_sm(4)"));
    let (texts, _) = compile_both("codegen", "min_blocks_per_sm", &src);
    for ptx in texts {
        assert!(
            ptx.contains(".reqntid 128, 1, 1\n.minnctapersm 4\n"),
            "{ptx}"
        );
    }
    // Without it, no directive.
    let (texts, _) = compile_both("codegen", "thread_level_plain", &corpus("thread_level"));
    assert!(texts.iter().all(|p| !p.contains(".minnctapersm")));
}

/// Every float32 `a * b ± c` the source writes is one `T.fma` (the parser contracts it,
/// docs/ir.md "Contraction") and one `fma.rn.f32` on the GPU — in a fast-form argument
/// (attention's `T.exp2(s * scale - m * scale)`: the left product fuses, the other stays a
/// rounded multiply), under a comparison, in an exact function's argument, as a plain
/// value. A literal addend is negated in place (no `neg` of an immediate); `c - a * b`
/// negates the product's factor. A product bound to a name first keeps its own rounding.
#[test]
fn multiply_adds_are_one_fma_and_a_named_product_rounds() {
    let src = r#"
@T.prim_func
def contract(
    S: T.Tensor((128,), "float32"),
    M: T.Tensor((128,), "float32"),
    O: T.Tensor((128, 7), "float32"),
):
    with T.Kernel(1, threads=128) as bx:
        for tx in T.thread_binding(128, thread="threadIdx.x"):
            O[tx, 4] = T.exp2(S[tx] * 0.25 - 1.0)
            O[tx, 5] = T.exp2(T.if_then_else(S[tx] * M[tx] - S[tx] > 0.0, 1.0, 0.0))
            O[tx, 0] = T.exp2(S[tx] * 0.125 - M[tx] * 0.125)
            O[tx, 1] = T.exp2(M[tx] - S[tx] * 0.5)
            O[tx, 2] = S[tx] * 0.125 - M[tx] * 0.125
            O[tx, 3] = T.sqrt(S[tx] * S[tx] + M[tx])
            p = S[tx] * M[tx]
            O[tx, 6] = p + 1.0
"#;
    let (ptx, _) = check("contract", src);
    let fmas: Vec<&str> = ptx.lines().filter(|l| l.contains("fma.rn.f32")).collect();
    assert_eq!(fmas.len(), 6, "one fma per multiply-add:\n{ptx}");
    assert!(
        fmas[0].ends_with("0f3E800000, 0fBF800000;"),
        "`S * 0.25 - 1.0`: the literal negated in place: {}",
        fmas[0]
    );
    assert!(ptx.contains("neg.f32"), "a subtraction negates:\n{ptx}");
    // The two right-hand products (`M * 0.125`) and the named product round on their own.
    let muls = ptx.lines().filter(|l| l.contains("mul.rn.f32")).count();
    assert_eq!(muls, 3, "{muls} rounded multiplies:\n{ptx}");
    assert!(ptx.contains("add.rn.f32"), "`p + 1.0` rounds:\n{ptx}");
}
