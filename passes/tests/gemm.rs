//! The tensor-core gemm path: `layout-inference` then `lower-tile-ops` on every gemm case
//! (the corpus's and `passes/tests/cases/gemm_*.tir`): snapshots of the layouts and of the
//! ldmatrix / mma_sync region, the meaning kept under the lockstep interpreter (ragged
//! sizes where the kernel masks its edges), and the errors when no layout fits.

use crate::common;

use common::{assert_close_meaning, case, load, root, with_region_barriers};
use tlc_ir::printer::print_func;
use tlc_ir::visit::for_each_stmt;
use tlc_ir::{Intrinsic, Layout, PrimFunc, StmtKind};
use tlc_passes::layout_inference::{warp_partition, LayoutInference};
use tlc_passes::lower_tile_ops::LowerTileOps;
use tlc_passes::Pass;

fn infer(func: PrimFunc) -> PrimFunc {
    let out = LayoutInference
        .run(func, &common::cx())
        .expect("layout-inference");
    tlc_ir::verifier::verify(&out).expect("inferred IR verifies");
    out
}

fn lowered(func: PrimFunc) -> PrimFunc {
    let out = LowerTileOps
        .run(infer(func), &common::cx())
        .expect("lower-tile-ops");
    tlc_ir::verifier::verify(&out).expect("lowered IR verifies");
    out
}

fn parse(src: &str) -> PrimFunc {
    let func = tlc_ir::parse(src).expect("parse");
    tlc_ir::verifier::verify(&func).expect("verify");
    func
}

fn local_case(stem: &str) -> PrimFunc {
    load(&root().join(format!("passes/tests/cases/{stem}.tir")))
}

/// Every gemm kernel the tests know, with its name.
fn gemm_cases() -> Vec<(String, PrimFunc)> {
    let mut out: Vec<(String, PrimFunc)> =
        ["seed000_dims", "gemm_bf16_transposed", "gemm_threads_2d"]
            .iter()
            .map(|s| (s.to_string(), case(s)))
            .collect();
    for s in [
        "gemm_ragged_tn",
        "gemm_fullcol_epilogue",
        "gemm_warp16x8",
        "gemm_warp16x8_nt",
        "flash_register_a",
    ] {
        out.push((s.to_string(), local_case(s)));
    }
    out
}

fn intrinsic_counts(func: &PrimFunc) -> (usize, usize) {
    let (mut ld, mut mma) = (0, 0);
    for_each_stmt(&func.body, &mut |s| match &s.kind {
        StmtKind::Intrinsic(Intrinsic::Ldmatrix { .. }) => ld += 1,
        StmtKind::Intrinsic(Intrinsic::Mma { .. }) => mma += 1,
        _ => {}
    });
    (ld, mma)
}

#[test]
fn warp_partitions_follow_the_policy() {
    use tlc_ir::WarpPolicy::*;
    assert_eq!(warp_partition(Square, 4, 128, 128), Some((2, 2)));
    assert_eq!(warp_partition(Square, 8, 128, 256), Some((2, 4)));
    assert_eq!(warp_partition(Square, 8, 256, 128), Some((4, 2)));
    assert_eq!(warp_partition(Square, 4, 64, 64), Some((2, 2)));
    assert_eq!(warp_partition(Square, 1, 16, 16), Some((1, 1)));
    assert_eq!(warp_partition(FullRow, 4, 64, 64), Some((4, 1)));
    assert_eq!(warp_partition(FullCol, 2, 32, 64), Some((1, 2)));
    // 4 warps cannot split 32 x 32 into warp tiles of 16-row multiples in a row: TileLang's
    // fallback puts the most warps along M that fit, the rest along N (issue 38).
    assert_eq!(warp_partition(FullRow, 4, 32, 32), Some((2, 2)));
    assert_eq!(warp_partition(Square, 4, 16, 40), None);
    // Warp tiles of 16 x 8 multiples only where no 16 x 16 grid fits (issue 38).
    assert_eq!(warp_partition(FullCol, 8, 64, 64), Some((1, 8)));
    assert_eq!(warp_partition(FullCol, 2, 32, 48), Some((1, 2)));
    assert_eq!(warp_partition(FullCol, 8, 64, 32), Some((2, 4)));
    // Nothing fits at all: still no partition (a located error in layout-inference).
    assert_eq!(warp_partition(FullRow, 4, 16, 16), None);
}

/// Warp tiles of 16 x 8 multiples: an odd number of n8 tiles per warp loads its last B
/// tile with an `ldmatrix.x2` (32 x 24 per warp: one x4 and one x2; 32 x 8: one x2).
#[test]
fn odd_n_tiles_load_their_last_b_tile_with_x2() {
    let nums = |func: &PrimFunc| {
        let mut out = Vec::new();
        for_each_stmt(&func.body, &mut |s| {
            if let StmtKind::Intrinsic(Intrinsic::Ldmatrix { num, .. }) = &s.kind {
                out.push(*num);
            }
        });
        out
    };
    let out = lowered(local_case("gemm_warp16x8"));
    // A: one x4 (in a loop over the 2 row tiles); B: the pair loop's x4, then the x2.
    assert_eq!(nums(&out), [4, 4, 2]);
    let out = lowered(local_case("gemm_warp16x8_nt"));
    assert_eq!(nums(&out), [4, 2]);
}

/// Register A on mma.sync: the second gemm of `flash_register_a` reads `P` from its
/// registers — no staged copy, no ldmatrix for it, and its mma's A is `P`'s local array.
#[test]
fn a_fragment_laid_out_as_the_scores_is_read_from_registers() {
    let func = local_case("flash_register_a");
    let out = infer(func);
    let layout = |name: &str| {
        let mut got = None;
        for_each_stmt(&out.body, &mut |s| {
            if let StmtKind::Kernel(k) = &s.kind {
                got = k
                    .layouts
                    .iter()
                    .find(|a| a.buffer.name == name)
                    .map(|a| a.layout);
            }
        });
        got
    };
    let rows_only = Some(Layout::MmaAccumulator {
        warps_m: 2,
        warps_n: 1,
    });
    assert_eq!(layout("P"), rows_only);
    assert_eq!(layout("S"), rows_only);
    let low = lowered(local_case("flash_register_a"));
    let mut a_operands = Vec::new();
    for_each_stmt(&low.body, &mut |s| {
        if let StmtKind::Intrinsic(Intrinsic::Mma { a, .. }) = &s.kind {
            a_operands.push(a.buffer.name.clone());
        }
    });
    assert_eq!(a_operands.len(), 2, "two gemms, one mma loop each");
    assert!(a_operands.iter().any(|a| a == "P"), "{a_operands:?}");
    let printed = print_func(&low);
    assert!(!printed.contains("P_shared"), "P was staged:\n{printed}");
}

#[test]
fn snapshot_seed_layouts() {
    let out = infer(case("seed000_dsl"));
    let k = out.body.iter().find_map(|s| match &s.kind {
        StmtKind::Kernel(k) => Some(k),
        _ => None,
    });
    let layouts: Vec<(String, Layout)> = k
        .map(|k| {
            k.layouts
                .iter()
                .map(|a| (a.buffer.name.clone(), a.layout))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        layouts,
        [
            (
                "C_local".to_string(),
                Layout::MmaAccumulator {
                    warps_m: 2,
                    warps_n: 2
                }
            ),
            ("A_shared".to_string(), Layout::Swizzle { bytes: 64 }),
            ("B_shared".to_string(), Layout::Swizzle { bytes: 128 }),
        ]
    );
    insta::assert_snapshot!(print_func(&out));
}

#[test]
fn snapshot_seed_lowered() {
    let out = lowered(case("seed000_dsl"));
    // 128x128 over 2x2 warps of 64x64: per k-step of 16, 4 A tiles + 4 B pairs, 4x8 mma's.
    assert_eq!(intrinsic_counts(&out), (2, 1));
    insta::assert_snapshot!(print_func(&out));
}

#[test]
fn snapshot_transposed_lowered() {
    insta::assert_snapshot!(print_func(&lowered(local_case("gemm_ragged_tn"))));
}

#[test]
fn lowering_keeps_meaning_on_every_gemm_case() {
    let mut compared = 0;
    for (name, func) in gemm_cases() {
        let out = with_region_barriers(lowered(func.clone()));
        compared += assert_close_meaning(&name, &func, &out, 1e-3);
    }
    assert!(compared >= 12, "only {compared} runs compared");
}

#[test]
fn layout_errors_name_the_buffer() {
    let base = "M = T.symbolic(\"M\")\n\n@T.prim_func\ndef f(A: T.Tensor((M, 16), \"float16\"), C: T.Tensor((M, 16), \"float32\")):\n    with T.Kernel(1, threads=THREADS) as bx:\n        A_shared = T.alloc_shared((16, ACOLS), \"float16\")\n        B_shared = T.alloc_shared((ACOLS, 16), \"float16\")\n        C_local = T.alloc_fragment((16, 16), \"CDT\")\n        T.clear(C_local)\n        T.copy(A[0, 0], A_shared[0:16, 0:ACOLS])\n        T.copy(A[0, 0], B_shared[0:ACOLS, 0:16])\n        T.gemm(A_shared, B_shared, C_local)\n        T.copy(C_local, C[0, 0])\n";
    let src = |threads: &str, acols: &str, cdt: &str| {
        base.replace("THREADS", threads)
            .replace("ACOLS", acols)
            .replace("CDT", cdt)
    };
    // The baseline infers fine.
    infer(parse(&src("32", "16", "float32")));
    let err = |s: String| {
        let errs = LayoutInference.run(parse(&s), &common::cx()).unwrap_err();
        errs.iter()
            .map(|e| e.message.clone())
            .collect::<Vec<_>>()
            .join("\n")
    };
    let msg = err(src("128", "16", "float32"));
    assert!(
        msg.contains("no layout fits accumulator `C_local`"),
        "{msg}"
    );
    let msg = err(src("48", "16", "float32"));
    assert!(msg.contains("whole warps"), "{msg}");
    // A float16 fragment is an accumulator (mma.sync's f16 form); a local C is not: the
    // verifier already refuses it as `T.clear`'s and `T.copy`'s operand (rule S5).
    let local =
        src("32", "16", "float32").replace("T.alloc_fragment((16, 16)", "T.alloc_local((16, 16)");
    let errs = tlc_ir::verifier::verify(&tlc_ir::parse(&local).expect("parse")).unwrap_err();
    assert!(
        errs.iter()
            .any(|e| e.message == "`T.fill` on local buffer `C_local`"),
        "{errs:?}"
    );
    // Rows of 4 float16 (8 bytes) are too narrow for ldmatrix.
    let msg = err(src("32", "4", "float32"));
    assert!(
        msg.contains("no shared layout fits gemm operand `A_shared`"),
        "{msg}"
    );
}

#[test]
fn a_conflicting_annotation_is_an_error() {
    let src = std::fs::read_to_string(root().join("tests/cases/valid/seed000_dsl.tir"))
        .expect("read")
        .replace(
            "        T.clear(C_local)\n",
            "        T.annotate_layout({C_local: T.mma_accumulator_layout(C_local, warps_m=4, warps_n=1)})\n        T.clear(C_local)\n",
        );
    let errs = LayoutInference.run(parse(&src), &common::cx()).unwrap_err();
    assert!(
        errs[0]
            .message
            .contains("conflicting layouts for `C_local`"),
        "{}",
        errs[0].message
    );
}

#[test]
fn layouts_propagate_to_fragments_fed_by_the_accumulator() {
    let src = std::fs::read_to_string(root().join("tests/cases/valid/seed000_dsl.tir"))
        .expect("read")
        .replace(
            "        T.copy(C_local, C[by * 128, bx * 128])\n",
            "        for i, j in T.Parallel(128, 128):\n            D_local[i, j] = C_local[i, j] * 2.0\n        T.copy(D_local, C[by * 128, bx * 128])\n",
        )
        .replace(
            "        T.clear(C_local)\n",
            "        D_local = T.alloc_fragment((128, 128), \"float\")\n        T.clear(C_local)\n",
        );
    let out = infer(parse(&src));
    let text = print_func(&out);
    assert!(
        text.contains("D_local: T.mma_accumulator_layout(D_local, warps_m=2, warps_n=2)"),
        "{text}"
    );
}
