//! Codegen of local arrays indexed at run time (`codegen/local.rs`): they live in a
//! per-thread `.local` array, read and written with `ld.local` / `st.local` of the element
//! type; indices the analysis cannot prove in bounds are clamped (`min.u32`), those it can
//! are not; arrays indexed only by constants stay in registers. Each kernel is compiled for
//! `sm_80` and `sm_90a`, checked against its manifest and assembled by ptxas for both with
//! `-v`: no spills (the local array itself is ptxas's "stack frame"), at most 255 registers.

use crate::common;

use common::emit::{compile_both, errors};

/// Compiles `src` for both targets and assembles both; returns the sm_80 text.
fn compile(name: &str, src: &str) -> String {
    compile_both("codegen_local", name, src).0.swap_remove(0)
}

/// The lines of `ptx` holding `needle`.
fn lines_with<'a>(ptx: &'a str, needle: &str) -> Vec<&'a str> {
    ptx.lines().filter(|l| l.contains(needle)).collect()
}

/// `acc` is indexed by a serial loop variable (in bounds), by a loaded value (clamped) and
/// by constants; `keep`, indexed only by constants once unrolled, stays in registers.
const HISTOGRAM: &str = r#"
@T.prim_func
def histogram(
    I: T.Tensor((128, 16), "int32"),
    O: T.Tensor((128, 8), "float32"),
):
    with T.Kernel(1, threads=128) as bx:
        acc = T.alloc_local((8,), "float32")
        keep = T.alloc_local((2,), "float32")
        for tx in T.thread_binding(128, thread="threadIdx.x"):
            for i in T.serial(8):
                acc[i] = 0.0
            for u in T.unroll(2):
                keep[u] = 1.0
            for k in T.serial(16):
                acc[I[tx, k]] = acc[I[tx, k]] + keep[0]
            acc[3] = acc[3] + keep[1]
            for j in T.serial(8):
                O[tx, j] = acc[j]
"#;

#[test]
fn runtime_indexed_array_lives_in_local_memory() {
    let ptx = compile("histogram", HISTOGRAM);
    insta::assert_snapshot!("histogram", ptx);
    // One .local array, of the float32 array only: 8 elements of 4 bytes.
    assert_eq!(
        lines_with(&ptx, ".local .align"),
        vec!["\t.local .align 4 .b8 \t__local_acc[32];"],
        "{ptx}"
    );
    assert!(ptx.contains("mov.u32 \t%r"), "{ptx}");
    assert!(
        ptx.contains("ld.local.f32") && ptx.contains("st.local.f32"),
        "{ptx}"
    );
    // The constant element is addressed through the symbol.
    assert!(ptx.contains("[__local_acc+12]"), "{ptx}");
    // `acc[I[tx, k]]` is clamped to the last element, at its load and at its store (an
    // index that loads is re-read at each access); `acc[i]` and `acc[j]` (serial loops
    // over 0..8) are not clamped.
    let clamps = lines_with(&ptx, "min.u32");
    assert_eq!(clamps.len(), 2, "{ptx}");
    assert!(clamps.iter().all(|l| l.ends_with(", 7;")), "{ptx}");
    // `keep` stays in registers (no local access names it).
    assert!(!ptx.contains("__local_keep"), "{ptx}");
}

/// Every dtype a local array may have: the element size sets the alignment, the array's
/// bytes and the access type.
#[test]
fn every_local_dtype_is_loaded_and_stored_with_its_type() {
    for (dtype, size, access) in [
        ("int32", 4, "s32"),
        ("uint32", 4, "u32"),
        ("int64", 8, "s64"),
        ("float32", 4, "f32"),
        ("float16", 2, "b16"),
        ("bfloat16", 2, "b16"),
    ] {
        let src = format!(
            r#"
@T.prim_func
def local_{dtype}(
    I: T.Tensor((64,), "int32"),
    O: T.Tensor((64,), "{dtype}"),
):
    with T.Kernel(1, threads=64) as bx:
        a = T.alloc_local((5,), "{dtype}")
        for tx in T.thread_binding(64, thread="threadIdx.x"):
            for i in T.serial(5):
                a[i] = O[(tx + i) % 64]
            O[tx] = a[I[tx]]
"#
        );
        let ptx = compile(&format!("local_{dtype}"), &src);
        let decl = format!("\t.local .align {size} .b8 \t__local_a[{}];", 5 * size);
        assert_eq!(
            lines_with(&ptx, ".local .align"),
            vec![decl.as_str()],
            "{ptx}"
        );
        assert!(
            ptx.contains(&format!("st.local.{access}")),
            "{dtype}: {ptx}"
        );
        assert!(
            ptx.contains(&format!("ld.local.{access}")),
            "{dtype}: {ptx}"
        );
        assert!(
            lines_with(&ptx, "min.u32")
                .iter()
                .any(|l| l.ends_with(", 4;")),
            "{dtype}: {ptx}"
        );
        // Addresses scale by the element size.
        assert!(ptx.contains(&format!(", {size}, %r")), "{dtype}: {ptx}");
    }
}

/// A 2-D array: the flat index is clamped as a whole, so no index combination reaches
/// outside the array's 6 elements; an index the analysis proves in bounds (`t % 3` with a
/// row of `t // 64`, both within their extents) is not clamped.
const TWO_D: &str = r#"
@T.prim_func
def two_d(
    I: T.Tensor((128,), "int32"),
    O: T.Tensor((128,), "float32"),
):
    with T.Kernel(1, threads=128) as bx:
        m = T.alloc_local((2, 3), "float32")
        for tx in T.thread_binding(128, thread="threadIdx.x"):
            m[tx // 64, tx % 3] = 1.0
            O[tx] = m[1, I[tx]]
"#;

#[test]
fn unproven_indices_are_clamped_to_the_whole_array() {
    let ptx = compile("two_d", TWO_D);
    let clamps = lines_with(&ptx, "min.u32");
    assert_eq!(clamps.len(), 1, "{ptx}");
    assert!(clamps[0].ends_with(", 5;"), "{ptx}");
    assert!(ptx.contains(".b8 \t__local_m[24];"), "{ptx}");
}

/// `T.if_then_else` reading a run-time indexed local array needs no branch: the read cannot
/// fault (it is in bounds or clamped), so both arms may run.
#[test]
fn selects_over_local_memory_need_no_branch() {
    let src = r#"
@T.prim_func
def select_local(
    I: T.Tensor((32,), "int32"),
    O: T.Tensor((32,), "float32"),
):
    with T.Kernel(1, threads=32) as bx:
        a = T.alloc_local((4,), "float32")
        for tx in T.thread_binding(32, thread="threadIdx.x"):
            for i in T.serial(4):
                a[i] = T.cast(i, "float32")
            O[tx] = T.if_then_else(tx % 7 < 4, a[tx % 7], 0.0) + T.cast(I[tx], "float32")
"#;
    let ptx = compile("select_local", src);
    // The only branches are the serial loop's two; `a[tx % 7]` is clamped to 3.
    assert_eq!(lines_with(&ptx, "bra").len(), 2, "{ptx}");
    assert!(lines_with(&ptx, "min.u32")[0].ends_with(", 3;"), "{ptx}");
    assert!(
        ptx.contains("selp.f32") || ptx.contains("selp.b32"),
        "{ptx}"
    );
}

/// More local memory than a thread has is a located error at the allocation.
#[test]
fn too_much_local_memory_is_a_located_error() {
    let src = r#"
@T.prim_func
def huge(I: T.Tensor((32,), "int32"), O: T.Tensor((32,), "float32")):
    with T.Kernel(1, threads=32) as bx:
        big = T.alloc_local((200000,), "float32")
        for tx in T.thread_binding(32, thread="threadIdx.x"):
            big[I[tx]] = 1.0
            O[tx] = big[I[tx]]
"#;
    let errs = errors(src);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(errs[0].message.contains("800000 bytes"), "{errs:?}");
    assert_eq!(&src[errs[0].span.start..][..3], "big");
}

/// Intrinsic operands need register arrays: an array indexed at run time elsewhere is a
/// located error at the operand (`T.ldmatrix` writes fixed registers).
#[test]
fn intrinsic_operands_in_local_memory_are_located_errors() {
    let src = r#"
@T.prim_func
def frag(A: T.Tensor((16, 16), "float16"), C: T.Tensor((32, 4), "float16")):
    with T.Kernel(1, threads=32) as bx:
        A_s = T.alloc_shared((16, 16), "float16")
        A_f = T.alloc_local((16,), "float16")
        T.shared_arena(bytes=512, offsets={A_s: 0})
        for tx in T.thread_binding(32, thread="threadIdx.x"):
            T.ldmatrix(A_f[0], A_s[tx % 16, tx // 16 * 8], num=4, trans=False)
            C[tx, 0] = A_f[tx % 16]
"#;
    let errs = errors(src);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0]
            .message
            .contains("the destination of T.ldmatrix needs `A_f` in registers"),
        "{errs:?}"
    );
    assert!(errs[0].message.contains("indexed at run time"), "{errs:?}");
    assert_eq!(&src[errs[0].span.start..][..3], "A_f");
}

/// P's (even, odd) pairs, stored from float32 values and read by a `T.wgmma_rs` as A, are
/// converted together and kept packed (`store_half`, `words`) — but a pair whose halves are
/// stored in the two arms of one `if` is not: the else-arm's threads never ran the
/// then-arm's conversion. 4 pairs from the unrolled loop, none from the branch.
const SPLIT_PAIR: &str = r#"
@T.prim_func
def split_pair(O: T.Tensor((128, 64), "float32")):
    with T.Kernel(1, threads=128) as bx:
        V_shared = T.alloc_shared((16, 64), "float16")
        S = T.alloc_local((8,), "float32")
        P = T.alloc_local((8,), "float16")
        acc = T.alloc_local((32,), "float32")
        T.annotate_layout({V_shared: T.make_wgmma_swizzled_layout(V_shared, bytes=128)})
        T.shared_arena(bytes=2048, offsets={V_shared: 0})
        for tx in T.thread_binding(128, thread="threadIdx.x"):
            for i in T.unroll(8):
                S[i] = T.cast(tx + i, "float32")
            for i in T.unroll(8):
                P[i] = S[i]
            if tx % 2 == 0:
                P[0] = S[0] * 2.0
            else:
                P[1] = S[1] * 3.0
            for i in T.unroll(32):
                acc[i] = T.cast(0, "float32")
            T.wgmma_fence()
            T.wgmma_rs(acc[0], P[0], V_shared[0, 0], n=64, trans_b=True, b_swizzle=128, b_lbo=2048, b_sbo=1024)
            T.wgmma_commit()
            T.wgmma_wait(0)
            for i in T.unroll(32):
                O[tx, i] = acc[i]
"#;

#[test]
fn packed_pairs_are_not_carried_from_one_arm_of_an_if_to_the_other() {
    let func = common::emit::parse(SPLIT_PAIR);
    let (module, man) = common::emit::emit(&func, tlc_ir::Target::Sm90a)
        .unwrap_or_else(|e| panic!("split_pair: {e:?}"));
    let ptx = tlc::ptx::print_with_manifest(&module, &man);
    common::emit::assemble("codegen_local", &ptx, "split_pair", "sm_90a");
    assert_eq!(lines_with(&ptx, "cvt.rn.f16x2.f32").len(), 4, "{ptx}");
    // Each arm's single store repacks its pair's word from the two halves instead.
    assert!(lines_with(&ptx, "mov.b32 \t%r").len() >= 2, "{ptx}");
}
