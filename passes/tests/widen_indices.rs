//! `widen-indices`: meaning preserved on every case, small kernels untouched (the 32-bit
//! fast path), large ones widened, and the pass is idempotent. Expected outputs on real
//! cases: `filetests/widen_*.tir`.

use crate::common;

use common::{assert_same_meaning, corpus};
use tlc_ir::printer::print_func;
use tlc_ir::specialize::specialize;
use tlc_ir::PrimFunc;
use tlc_passes::widen_indices::WidenIndices;
use tlc_passes::{default_pipeline, Pass, Target};

/// `func` through the default sm_80 pipeline up to (not including) `widen-indices`; `None`
/// for a kernel a pass refuses (a known limit: those are tested where they are lifted).
fn lowered(func: &PrimFunc) -> Option<PrimFunc> {
    let mut cur = func.clone();
    for pass in default_pipeline(Target::Sm80) {
        if pass.name() == "widen-indices" {
            break;
        }
        cur = pass.run(cur, &common::cx()).ok()?;
    }
    Some(cur)
}

fn widened(func: PrimFunc) -> PrimFunc {
    let out = WidenIndices
        .run(func, &common::cx())
        .unwrap_or_else(|e| panic!("widen-indices: {e:#?}"));
    tlc_ir::verifier::verify(&out)
        .unwrap_or_else(|e| panic!("widen-indices output: {e:#?}\n{}", print_func(&out)));
    out
}

#[test]
fn every_case_keeps_its_meaning_and_a_second_run_changes_nothing() {
    let (mut lowered_cases, mut compared) = (0, 0);
    for (name, func) in corpus() {
        let Some(low) = lowered(&func) else { continue };
        lowered_cases += 1;
        let out = widened(low.clone());
        compared += assert_same_meaning(&name, &low, &out);
        assert_eq!(
            print_func(&widened(out.clone())),
            print_func(&out),
            "{name}: not idempotent"
        );
    }
    assert!(lowered_cases >= 10, "only {lowered_cases} cases lowered");
    assert!(compared >= 30, "only {compared} runs compared");
}

/// With every dim bound to a small constant, all index math is provably int32: the pass
/// must leave the kernel exactly as it is (the GEMMs' 32-bit index math does not get
/// slower).
#[test]
fn small_specialized_kernels_are_untouched() {
    let mut checked = 0;
    for (name, func) in corpus() {
        if name == "while_loops" || name == "gemm_streamk" {
            // Its index math reads scalar variables from memory (`it[0] + 2`; stream-K's
            // tile from `start[0]`), bounded only by int32: widened at any size.
            continue;
        }
        if name == "tma_int64_origin" {
            // Written with int64 index math on purpose (a TMA origin 2^32 past the tensor):
            // the pass computes its provably small int64 part (`bx * 32`) in int32.
            continue;
        }
        let dims: Vec<(String, i64)> = func.dims.iter().map(|d| (d.name.clone(), 256)).collect();
        let Ok(small) = specialize(&func, &dims) else {
            continue;
        };
        let Some(low) = lowered(&small) else { continue };
        assert_eq!(
            print_func(&widened(low.clone())),
            print_func(&low),
            "{name}: widened at small sizes"
        );
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} cases checked");
}

/// A flat index past 2^31 must be widened (and the result verify), or the GPU would wrap.
/// (A 2-D index whose every subscript fits int32 — a 70000 × 70000 transpose — needs no
/// widening: code generation flattens subscripts into 64-bit addresses, tested in
/// tools/tests/compile.rs.)
#[test]
fn kernels_past_two_to_the_31_are_widened() {
    let mut widened_cases = 0;
    for (name, dims) in [
        ("elementwise_add", vec![("N", 3_000_000_000i64)]),
        ("elementwise_add", vec![("N", (1 << 31) + 1)]),
    ] {
        let func = common::case(name);
        let dims: Vec<(String, i64)> = dims.iter().map(|(n, v)| (n.to_string(), *v)).collect();
        let big = specialize(&func, &dims).unwrap_or_else(|e| panic!("{name}: {e:?}"));
        let low = lowered(&big).unwrap_or_else(|| panic!("{name}: does not lower"));
        let out = widened(low.clone());
        assert!(
            print_func(&out).contains("\"int64\""),
            "{name}: nothing widened\n{}",
            print_func(&out)
        );
        widened_cases += 1;
    }
    assert_eq!(widened_cases, 2);
}

/// A bit operator reads its int32 operands' 32 bits (docs/ir.md): when an operand's
/// arithmetic is widened (it may pass 2^31), the operator gets it narrowed back, exactly
/// as the interpreter wraps it, and stays int32 itself; an operand that fits is untouched.
#[test]
fn bit_operators_keep_reading_32_bits_of_widened_operands() {
    let src = r#"N = T.symbolic("N")

@T.prim_func
def k(A: T.Tensor((N,), "int32")):
    with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
        for tx in T.thread_binding(128, thread="threadIdx.x"):
            if bx * 128 + tx < N:
                A[bx * 128 + tx] = (bx * 128 + tx) * 3 >> 2 ^ tx & 7
"#;
    widens_to(
        "bit operators",
        src,
        "A[bx * 128 + tx] = T.cast(T.cast(bx * 128 + tx, \"int64\") * 3, \"int32\") >> 2 ^ tx & 7",
    );
}

/// Widens `src`, checks that the result holds `expected` and means what `src` means.
fn widens_to(what: &str, src: &str, expected: &str) {
    let func = tlc_ir::parse(src).expect("parses");
    let out = widened(func.clone());
    let text = print_func(&out);
    assert!(text.contains(expected), "{what}: {text}");
    assert_same_meaning(what, &func, &out);
}

/// `T.reinterpret` of an int32 reads its 32 bits, as a bit operator does: arithmetic under
/// it that may pass 2^31 is widened, then narrowed back before the reinterpret (which must
/// keep a 32-bit operand: an int64 one is not the same width as its float32 result).
#[test]
fn reinterpret_keeps_reading_32_bits_of_widened_operands() {
    let src = r#"N = T.symbolic("N")

@T.prim_func
def k(A: T.Tensor((N,), "float32")):
    with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
        for tx in T.thread_binding(128, thread="threadIdx.x"):
            if bx * 128 + tx < N:
                A[bx * 128 + tx] = T.reinterpret("float32", (bx * 128 + tx) * 1000000)
"#;
    widens_to(
        "reinterpret",
        src,
        "T.reinterpret(\"float32\", T.cast(T.cast(bx * 128 + tx, \"int64\") * 1000000, \"int32\"))",
    );
}

/// A let declared `T.int32` converts its value (docs/ir.md, "Let"): where the value may
/// leave int32 the conversion wraps it, and the pass must keep that wrap — widening the
/// let to int64 made `S[r, c]` read row 2^34 (a campaign finding). Where the value
/// provably fits, the let may be widened (nothing wraps).
#[test]
fn a_declared_int32_let_keeps_its_wrap() {
    let src = r#"@T.prim_func
def k(A: T.Tensor((64,), "int32"), B: T.Tensor((64,), "int32")):
    with T.Kernel(1, threads=64) as bx:
        for tx in T.thread_binding(64, thread="threadIdx.x"):
            for i in T.serial(4):
                r: T.int32 = (i * 1099511627776 + tx) / 64
                B[tx] = B[tx] + r % 7 + A[(r % 64 + 64) % 64]
"#;
    let func = tlc_ir::parse(src).expect("parses");
    let out = widened(func.clone());
    let text = print_func(&out);
    assert!(text.contains("r: T.int32 = "), "{text}");
    assert_same_meaning("declared int32 let", &func, &out);
}
