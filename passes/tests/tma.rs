//! When `lower-tile-ops` puts a software pipeline on TMA (sm_90a) and when it does not
//! (`analysis::tma`), and when `warp-specialize` then gives its loads to a producer
//! warpgroup (and `persistent-tiles` makes its blocks walk several tiles): the IR they
//! write, checked as text. The meaning of the TMA pipelines
//! through every pass is `gemm_pipeline.rs`'s `every_sm90a_pass_keeps_the_meaning_of_tma_pipelines`.

use crate::common;

use common::{bound_mnk, case, load, load_bound, load_text, root};
use tlc_ir::printer::print_func;
use tlc_ir::PrimFunc;
use tlc_passes::{default_pipeline, PassContext, Target};

/// The IR after `lower-tile-ops` and the Hopper schedule (`warp-specialize`,
/// `persistent-tiles` on sm_90a),
/// compiled for a GPU with an SM per tile of these tests' grids, so that each block computes one tile (the persistent form, where blocks walk
/// several tiles, is `persistent_blocks_walk_the_tiles`).
fn lowered(func: &PrimFunc, target: Target) -> String {
    lowered_in(func, &PassContext::new(target).with_sms(4096))
}

/// The IR after `lower-tile-ops` and the schedule passes after it in the context `cx`.
fn lowered_in(func: &PrimFunc, cx: &PassContext) -> String {
    let mut f = func.clone();
    let mut lowered = false;
    for pass in default_pipeline(cx.target()) {
        if lowered
            && !["warp-specialize", "persistent-tiles", "tma-multicast"].contains(&pass.name())
        {
            return print_func(&f);
        }
        f = pass
            .run(f, cx)
            .unwrap_or_else(|e| panic!("{}: {e:?}", pass.name()));
        lowered |= pass.name() == "lower-tile-ops";
    }
    panic!("no lower-tile-ops in the pipeline")
}

fn local_case(stem: &str) -> PrimFunc {
    load(&root().join(format!("passes/tests/cases/{stem}.tir")))
}

fn count(text: &str, what: &str) -> usize {
    text.matches(what).count()
}

/// The kernel of `file` (relative to the repository) with `from` replaced by `to`, parsed.
fn edited(file: &str, from: &str, to: &str) -> PrimFunc {
    let text = std::fs::read_to_string(root().join(file)).expect("the kernel file");
    assert!(text.contains(from), "{file} has no `{from}`");
    tlc_ir::parse(&text.replacen(from, to, 1)).expect("parse")
}

#[test]
fn the_seed_pipeline_runs_on_tma_with_one_barrier_per_stage() {
    let ir = lowered(
        &load(&root().join("examples/gemm_seed000.tir")),
        Target::Sm90a,
    );
    // A: one 128 x 32 box (64-byte swizzle); B: two 32 x 64 panels (128-byte swizzle); in
    // the prologue and in the look-ahead.
    assert_eq!(count(&ir, "T.tma_load(A_shared"), 2, "{ir}");
    assert_eq!(count(&ir, "T.tma_load(B_shared"), 4, "{ir}");
    assert!(ir.contains("box=(128, 32), swizzle=64"), "{ir}");
    assert!(
        ir.contains("B_shared[s, 16, 0], B[s * 32, bx * 128 + 64]"),
        "{ir}"
    );
    assert!(
        ir.contains("tma_bars = T.alloc_shared((3,), \"int64\")"),
        "{ir}"
    );
    // Two copies arrive per stage, each with its own bytes.
    assert!(ir.contains("T.mbarrier_init(tma_bars[s_1], 2)"), "{ir}");
    assert_eq!(count(&ir, "T.mbarrier_arrive_expect_tx("), 4, "{ir}");
    assert_eq!(count(&ir, ", 8192)"), 4, "{ir}");
    assert!(
        ir.contains("T.mbarrier_wait(tma_bars[ko % 3], ko // 3 % 2)"),
        "{ir}"
    );
    assert!(
        !ir.contains("T.cp_async_commit()") && !ir.contains("T.cp_async_wait("),
        "{ir}"
    );
}

#[test]
fn a_loop_that_does_not_start_at_zero_counts_its_phases_from_its_start() {
    let src = std::fs::read_to_string(root().join("examples/gemm_seed000.tir")).expect("seed");
    let shifted = src.replace(
        "T.Pipelined(T.ceildiv(1024, 32), num_stages=3)",
        "T.Pipelined(2, T.ceildiv(1024, 32), num_stages=3)",
    );
    assert_ne!(src, shifted, "the seed's loop header moved");
    let func = tlc_ir::parse(&shifted).expect("parse");
    let ir = lowered(&func, Target::Sm90a);
    assert!(
        ir.contains("T.mbarrier_wait(tma_bars[ko % 3], (ko - 2) // 3 % 2)"),
        "{ir}"
    );
}

#[test]
fn symbolic_strides_keep_the_thread_copies() {
    // K and N are symbolic: the row strides of A and B are not provably 16-byte multiples.
    let ir = lowered(&case("seed000_dims"), Target::Sm90a);
    assert!(!ir.contains("T.tma_load("), "{ir}");
    assert!(ir.contains("T.cp_async_wait(1)"), "{ir}");
    assert!(
        ir.contains("T.note(\"TMA not used for `A_shared`: the stride of dimension 0 of `A` is not provably a multiple of 16 bytes; this pipeline keeps cp.async\")"),
        "{ir}"
    );
    // Bound to 16-byte multiples, the same kernel takes TMA.
    let ir = lowered(
        &bound_mnk(&case("seed000_dims"), 256, 256, 128),
        Target::Sm90a,
    );
    assert!(ir.contains("T.tma_load("), "{ir}");
    // One stride not a multiple of 16 bytes (K = 100: 200-byte rows of A) keeps them all.
    let ir = lowered(
        &bound_mnk(&case("seed000_dims"), 256, 256, 100),
        Target::Sm90a,
    );
    assert!(!ir.contains("T.tma_load("), "{ir}");
}

#[test]
fn a_converting_copy_keeps_the_thread_copies() {
    let ir = lowered(&local_case("tma_converting_copy"), Target::Sm90a);
    assert!(ir.contains("T.wgmma("), "{ir}");
    assert!(!ir.contains("T.tma_load("), "{ir}");
    assert!(
        ir.contains("T.note(\"TMA not used for `A_shared`: it converts float32 to float16 (TMA moves bytes); this pipeline keeps cp.async\")"),
        "{ir}"
    );
}

#[test]
fn sm80_has_no_tma() {
    let ir = lowered(
        &load(&root().join("examples/gemm_seed000.tir")),
        Target::Sm80,
    );
    assert!(
        !ir.contains("T.tma_load(") && !ir.contains("T.mbarrier"),
        "{ir}"
    );
}

#[test]
fn a_hand_written_protocol_with_other_stage_indices_keeps_cp_async() {
    // The pipeline's own shape, written by hand, but filling stage `(s + 1) % 3` in the
    // prologue: the barriers' parities would not match, so TMA is not used.
    let src = std::fs::read_to_string(root().join("passes/tests/cases/tma_hand_pipeline.tir"))
        .expect("case");
    let func = tlc_ir::parse(&src).expect("parse");
    let ir = lowered(&func, Target::Sm90a);
    assert!(!ir.contains("T.tma_load("), "{ir}");
    assert!(
        ir.contains("is not the pipeline's fill order; this pipeline keeps cp.async"),
        "{ir}"
    );
    // The same file with the usual stage index takes TMA.
    let usual = src.replace("A_shared[(s + 1) % 3:(s + 1) % 3 + 1", "A_shared[s:s + 1");
    assert_ne!(usual, src);
    let ir = lowered(&tlc_ir::parse(&usual).expect("parse"), Target::Sm90a);
    assert!(ir.contains("T.tma_load("), "{ir}");
}

#[test]
fn a_stage_copy_nested_in_a_loop_keeps_the_whole_pipeline_on_cp_async() {
    let func = local_case("tma_nested_copy");
    let ir = lowered(&func, Target::Sm90a);
    assert!(!ir.contains("T.tma_load("), "{ir}");
    assert!(ir.contains("T.cp_async_wait(1)"), "{ir}");
    assert!(
        ir.contains(
            "a global → shared copy is nested in another statement; this pipeline keeps cp.async"
        ),
        "{ir}"
    );
}

/// Two consumer warpgroups: a producer warpgroup joins the block; the accumulator's clear
/// and the register epilogue run in the consumers' branch; the loop has no block barrier.
#[test]
fn two_warpgroups_get_a_producer_warpgroup() {
    let wide = load(&root().join("bench/gemm_128x256x32_t256_s3.tir"));
    let ir = lowered(&bound_mnk(&wide, 256, 512, 256), Target::Sm90a);
    insta::assert_snapshot!("warp_specialized_128x256", ir);
    assert!(ir.contains("threads=384"), "{ir}");
    assert!(ir.contains("T.setmaxnreg(40, inc=False)"), "{ir}");
    assert!(ir.contains("T.setmaxnreg(232, inc=True)"), "{ir}");
    // Every consumer warp releases the stage: 256 / 32 arrivals.
    assert!(ir.contains("T.mbarrier_init(tma_empty[s_1], 8)"), "{ir}");
    assert!(!ir.contains("T.sync_threads()"), "{ir}");
    let consumers = ir.find("T.setmaxnreg(232").expect("consumer branch");
    let clear = ir.find("T.cast(0, \"float32\")").expect("the clear");
    let epilogue = ir.rfind("C[").expect("the epilogue");
    assert!(consumers < clear && clear < epilogue, "{ir}");
    assert!(ir.contains("T.min_blocks_per_sm(1)"), "{ir}");
    // 3 stages: each k-tile's group is waited for before its stage is released.
    assert!(!ir.contains("T.wgmma_wait(1)"), "{ir}");
}

/// One consumer warpgroup whose shared memory fits twice on an SM: a producer joins it and
/// the kernel is compiled for two blocks per SM, the registers split accordingly
/// (65536 / 2 / 128 = 256 per warpgroup thread, 40 of them the producer's).
#[test]
fn one_warpgroup_is_specialized_at_two_blocks_per_sm() {
    let seed = lowered(
        &load(&root().join("examples/gemm_seed000.tir")),
        Target::Sm90a,
    );
    assert!(seed.contains("threads=256"), "{seed}");
    assert!(seed.contains("T.min_blocks_per_sm(2)"), "{seed}");
    assert!(seed.contains("T.setmaxnreg(40, inc=False)"), "{seed}");
    assert!(seed.contains("T.setmaxnreg(216, inc=True)"), "{seed}");
    assert!(
        seed.contains("T.mbarrier_init(tma_empty[s_1], 4)"),
        "{seed}"
    );
    assert!(!seed.contains("warp specialization not used"), "{seed}");
}

/// Four stages: the consumers keep each k-tile's wgmma group in flight (`T.wgmma_wait(1)`)
/// and release the previous k-tile's stage; the last group retires after the loop, before
/// the epilogue reads the accumulators.
#[test]
fn four_stages_keep_one_wgmma_group_in_flight() {
    let four = edited(
        "bench/gemm_128x256x32_t256_s3.tir",
        "num_stages=3",
        "num_stages=4",
    );
    let func = bound_mnk(&four, 256, 512, 256);
    let ir = lowered(&func, Target::Sm90a);
    insta::assert_snapshot!("warp_specialized_128x256_s4", ir);
    let in_flight = ir.find("T.wgmma_wait(1)").expect("one group in flight");
    let release = ir
        .find("if ko > 0:")
        .expect("the previous stage released from the second k-tile on");
    let drain = ir.find("T.wgmma_wait(0)").expect("the last group retired");
    let epilogue = ir.rfind("C[").expect("the epilogue");
    assert!(
        in_flight < release && release < drain && drain < epilogue,
        "{ir}"
    );
    assert!(
        ir.contains("T.mbarrier_arrive(tma_empty[(ko - 1) % 4])"),
        "{ir}"
    );
}

/// A global write right before the pipeline stays outside the consumers' branch (the
/// producer could be loading that tensor meanwhile); the epilogue after the loop moves in.
#[test]
fn a_global_write_before_the_pipeline_stays_before_the_producer() {
    let with_write = edited(
        "bench/gemm_128x256x32_t256_s3.tir",
        "        T.clear(C_local)\n",
        "        T.clear(C_local)\n        for i, j in T.Parallel(128, 256):\n            C[by * 128 + i, bx * 256 + j] = T.cast(0, \"float16\")\n",
    );
    let func = bound_mnk(&with_write, 256, 512, 256);
    let ir = lowered(&func, Target::Sm90a);
    let consumers = ir.find("T.setmaxnreg(232").expect("consumer branch");
    let zeroing = ir.find("] = T.cast(0, \"float16\")").expect("the write");
    assert!(zeroing < consumers, "{ir}");
}

/// Code besides the wgmma in the loop (here the accumulator cleared by every k-tile before
/// its gemm) could touch registers a group in flight still writes: those consumers wait for
/// every group, even with 4 stages.
#[test]
fn other_code_in_the_loop_keeps_the_wait_for_all_groups() {
    let clearing = edited(
        "bench/gemm_128x256x64_t256_s4.tir",
        "            T.gemm(A_shared, B_shared, C_local)",
        "            T.clear(C_local)\n            T.gemm(A_shared, B_shared, C_local)",
    );
    let ir = lowered(&bound_mnk(&clearing, 256, 512, 256), Target::Sm90a);
    assert!(ir.contains("T.setmaxnreg(232, inc=True)"), "{ir}");
    assert!(!ir.contains("T.wgmma_wait(1)"), "{ir}");
    assert!(ir.contains("T.mbarrier_arrive(tma_empty[ko % 4])"), "{ir}");
}

/// `clear_accum=True` on wgmma is the first k-step's scale-d, not a store of zeros: the
/// loop's compute is the wgmma code alone, so a group stays in flight (4 stages).
#[test]
fn clear_accum_overwrites_with_scale_d_and_keeps_a_group_in_flight() {
    let clearing = edited(
        "bench/gemm_128x256x64_t256_s4.tir",
        "T.gemm(A_shared, B_shared, C_local)",
        "T.gemm(A_shared, B_shared, C_local, clear_accum=True)",
    );
    let ir = lowered(&bound_mnk(&clearing, 256, 512, 256), Target::Sm90a);
    assert!(ir.contains("accumulate=kk != 0"), "{ir}");
    assert!(ir.contains("T.wgmma_wait(1)"), "{ir}");
}

/// A `T.min_blocks_per_sm` the user wrote is kept, however spelled: asked for one block
/// per SM, the seed's one consumer warpgroup with 3 stages stays unspecialized, saying why.
#[test]
fn the_users_blocks_per_sm_decide() {
    for spelling in ["1", "T.Cast(\"int32\", 1)"] {
        let asked = edited(
            "examples/gemm_seed000.tir",
            "T.use_swizzle(panel_size=10)",
            &format!("T.use_swizzle(panel_size=10)\n        T.min_blocks_per_sm({spelling})"),
        );
        let ir = lowered(&asked, Target::Sm90a);
        assert!(ir.contains("T.min_blocks_per_sm("), "{ir}");
        assert!(!ir.contains("T.min_blocks_per_sm(2)"), "{ir}");
        assert!(!ir.contains("T.setmaxnreg("), "{ir}");
        assert!(
            ir.contains("warp specialization not used: one consumer warpgroup with 3 stages"),
            "{ir}"
        );
    }
}

/// Two pipelines in one kernel share one register budget: the second keeps the blocks per
/// SM the first was specialized for, so every `T.setmaxnreg` of the kernel agrees with its
/// `T.min_blocks_per_sm`.
#[test]
fn two_pipelines_in_one_kernel_share_the_blocks_per_sm() {
    let pipeline = |stages: i64, a: &str, b: &str, acc: &str, out: &str| {
        format!(
            "        T.clear({acc})\n        for ko in T.Pipelined(32, num_stages={stages}):\n            T.copy(A[by * 64, ko * 32], {a})\n            T.copy(B[ko * 32, bx * 64], {b})\n            T.gemm({a}, {b}, {acc})\n        T.copy({acc}, {out}[by * 64, bx * 64])\n"
        )
    };
    let text = format!(
        "@T.prim_func\ndef two(\n    A: T.Tensor((1024, 1024), \"float16\"),\n    B: T.Tensor((1024, 1024), \"float16\"),\n    C: T.Tensor((1024, 1024), \"float16\"),\n    D: T.Tensor((1024, 1024), \"float16\"),\n):\n    with T.Kernel(16, 16, threads=128) as (bx, by):\n        A_shared = T.alloc_shared((64, 32), \"float16\")\n        B_shared = T.alloc_shared((32, 64), \"float16\")\n        A2_shared = T.alloc_shared((64, 32), \"float16\")\n        B2_shared = T.alloc_shared((32, 64), \"float16\")\n        X = T.alloc_shared((27648,), \"float16\")\n        C_local = T.alloc_fragment((64, 64), \"float\")\n        C2_local = T.alloc_fragment((64, 64), \"float\")\n{}{}",
        pipeline(3, "A_shared", "B_shared", "C_local", "C"),
        pipeline(4, "A2_shared", "B2_shared", "C2_local", "D"),
    );
    let ir = lowered(&tlc_ir::parse(&text).expect("parse"), Target::Sm90a);
    assert_eq!(count(&ir, "T.setmaxnreg(216, inc=True)"), 2, "{ir}");
    assert!(ir.contains("T.min_blocks_per_sm(2)"), "{ir}");
}

/// A shared allocation so large that its byte count overflows: the bound is unknown (as
/// if it fit once), never a panic; the 3-stage pipeline is not specialized.
#[test]
fn an_overflowing_shared_bound_is_unknown() {
    let huge = edited(
        "examples/gemm_seed000.tir",
        "T.use_swizzle(panel_size=10)",
        "T.use_swizzle(panel_size=10)\n        X = T.alloc_shared((4611686018427362304,), \"float16\")",
    );
    let ir = lowered(&huge, Target::Sm90a);
    assert!(ir.contains("warp specialization not used"), "{ir}");
}

/// On the GPU the target is sized for (132 SMs), the seed's 512 tiles (at two blocks per SM)
/// are walked by 264 persistent blocks: one tile loop per role, the tiles' indices
/// rasterized from the tile number, the stage indices and parities counted over the
/// block's run, every fill after the first ring waiting for its stage's release.
#[test]
fn persistent_blocks_walk_the_tiles() {
    let seed = load(&root().join("examples/gemm_seed000.tir"));
    let ir = lowered_in(&seed, &PassContext::new(Target::Sm90a));
    assert!(
        ir.contains("with T.Kernel(264, threads=256) as bx:"),
        "{ir}"
    );
    assert!(!ir.contains("T.use_swizzle("), "{ir}");
    assert_eq!(count(&ir, "T.serial((511 - bx) // 264 + 1)"), 2, "{ir}");
    assert!(ir.contains("tile = bx + tile_i * 264"), "{ir}");
    assert!(ir.contains("panel = (tile_x + tile_y * 16) // 160"), "{ir}");
    assert!(
        ir.contains("T.mbarrier_wait(tma_bars[(ko % 3 + tile_i_1 * 32) % 3], (tile_i_1 * 32 + ko) // 3 % 2)"),
        "{ir}"
    );
    assert!(
        ir.contains(
            "T.mbarrier_wait(tma_empty[(s + tile_i * 32) % 3], (tile_i * 32 + s - 3) // 3 % 2)"
        ),
        "{ir}"
    );
    // No group in flight (3 stages): each k-tile's stage is released in the loop.
    assert!(
        ir.contains("T.mbarrier_arrive(tma_empty[(ko % 3 + tile_i_1 * 32) % 3])"),
        "{ir}"
    );
    // A GPU with an SM per tile: one tile per block, the grid as written, no note.
    let per_tile = lowered(&seed, Target::Sm90a);
    assert!(
        per_tile.contains("with T.Kernel(16, 32, threads=256)"),
        "{per_tile}"
    );
    assert!(
        !per_tile.contains("persistent blocks not used"),
        "{per_tile}"
    );
    // A global write before the pipeline keeps one tile per block, saying why.
    let zeroing = edited(
        "examples/gemm_seed000.tir",
        "        T.clear(C_local)\n",
        "        T.clear(C_local)\n        for i, j in T.Parallel(128, 128):\n            C[by * 128 + i, bx * 128 + j] = T.cast(0, \"float16\")\n",
    );
    let kept = lowered_in(&zeroing, &PassContext::new(Target::Sm90a));
    assert!(
        kept.contains("with T.Kernel(16, 32, threads=256)"),
        "{kept}"
    );
    assert!(
        kept.contains(
            "T.note(\"persistent blocks not used: the kernel does more than this pipeline"
        ),
        "{kept}"
    );
}

#[test]
fn plain_buffers_ride_along_with_swizzled_operands() {
    // The staged scales: an unswizzled 1 x 128 box per stage next to A's and B's, counted
    // in the stage's barrier (3 copies), the consumers specialized as before.
    let staged = load_bound(
        "tests/cases/valid/gemm_fp8_scales_staged.tir",
        256,
        256,
        512,
    );
    let ir = lowered(&staged, Target::Sm90a);
    assert!(
        ir.contains("T.tma_load(sa_shared[") && ir.contains("box=(1, 128), swizzle=0)"),
        "{ir}"
    );
    assert!(
        ir.contains("T.mbarrier_arrive_expect_tx(tma_bars[") && ir.contains(", 512)"),
        "{ir}"
    );
    assert!(ir.contains("T.mbarrier_init(tma_bars[s_1], 3)"), "{ir}");
    assert!(ir.contains("T.setmaxnreg(40, inc=False)"), "{ir}");
    // M * 4 bytes not provably a multiple of 16: the scales cannot take TMA, and the whole
    // pipeline keeps cp.async with the reason.
    let ragged = load_bound(
        "tests/cases/valid/gemm_fp8_scales_staged.tir",
        250,
        256,
        512,
    );
    let ir = lowered(&ragged, Target::Sm90a);
    assert!(!ir.contains("T.tma_load("), "{ir}");
    assert!(
        ir.contains("TMA not used for `A_shared`")
            || ir.contains(
                "the stride of dimension 0 of `scales_a` is not provably a multiple of 16 bytes"
            ),
        "{ir}"
    );
}

#[test]
fn a_plain_box_tma_cannot_address_keeps_cp_async() {
    // 16 float32 scales per stage: 64 bytes, below the 128-byte alignment of an unswizzled
    // destination.
    let text = std::fs::read_to_string(root().join("tests/cases/valid/gemm_fp8_scales_staged.tir"))
        .expect("the case");
    let small = text
        .replace(
            "sa_shared = T.alloc_shared((1, block_M), \"float32\")",
            "sa_shared = T.alloc_shared((1, 16), \"float32\")",
        )
        .replace(
            "row_scale[i] = sa_shared[0, i]",
            "row_scale[i] = sa_shared[0, i % 16]",
        );
    assert_ne!(small, text);
    let func = bound_mnk(&load_text("edited staged scales", &small), 256, 256, 512);
    let ir = lowered(&func, Target::Sm90a);
    assert!(!ir.contains("T.tma_load("), "{ir}");
    assert!(
        ir.contains(
            "a tile of `sa_shared` is 64 bytes, not a multiple of the 128 an unswizzled TMA destination is aligned to"
        ),
        "{ir}"
    );
}

#[test]
fn a_promotion_waits_for_its_own_group_with_its_scales_loaded_ahead() {
    // The block-scaled example's consumers (clear_accum gemm, then a promotion reading
    // C_block): one accumulator, each k-tile's group retired by `T.wgmma_wait(0)` before
    // its promotion (a twin accumulator read across the loop's back edge made ptxas
    // serialize every wgmma: C7514, docs/perf.md), and the row scales a k-tile ahead
    // (`prefetch-loads`): the overlap comes from the other consumer warpgroup.
    let func = load_bound("examples/gemm_fp8_blockscaled.tir", 256, 256, 512);
    let ir = lowered(&func, Target::Sm90a);
    assert!(!ir.contains("C_block_next"), "{ir}");
    assert!(!ir.contains("T.wgmma_wait(1)"), "{ir}");
    assert!(ir.contains("T.wgmma_wait(0)"), "{ir}");
    assert!(ir.contains("row_scale_next"), "{ir}");
}

#[test]
fn a_loop_from_a_block_level_let_counts_its_stages_and_phases_from_it() {
    // `for ko in T.Pipelined(lo, 6)`, `lo` a let of the block index: the fills' stages are
    // proven `fill % S` symbolically (no constant start to evaluate from), the producer
    // and the consumers count their phases from `lo`.
    let ir = lowered(&local_case("pipe_from_let"), Target::Sm90a);
    for form in [
        "if s + lo < 6:",
        "T.tma_load(A_shared[(s + lo) % 3, 0, 0], A[by * 128, (s + lo) * 32]",
        "for ko_1 in T.serial(lo, 6):",
        "T.mbarrier_wait(tma_empty[(ko_1 + 2) % 3], (ko_1 - lo - 1) // 3 % 2)",
        "T.mbarrier_wait(tma_bars[ko % 3], (ko - lo) // 3 % 2)",
    ] {
        assert!(ir.contains(form), "no `{form}`:\n{ir}");
    }
    assert!(!ir.contains("T.cp_async"), "{ir}");
}

#[test]
fn a_start_the_loop_writes_or_that_differs_between_threads_keeps_cp_async() {
    // The waits' parities evaluate the start again in every iteration (and the producer on
    // a thread of its own): a start read from a variable the loop writes, or from one each
    // thread holds its own value of, keeps the thread copies, with the reason.
    let written = edited(
        "passes/tests/cases/pipe_from_let.tir",
        "        lo = by * 2 - 1\n        T.clear(C_local)\n        for ko in T.Pipelined(lo, 6, num_stages=3):\n",
        "        lo = T.alloc_var(T.int32, 0)\n        lo = by * 2 - 1\n        T.clear(C_local)\n        for ko in T.Pipelined(lo, 6, num_stages=3):\n            lo = lo + 0\n",
    );
    let ir = lowered(&written, Target::Sm90a);
    assert!(
        ir.contains("the pipelined loop's start `lo[0]` reads `lo`, which the loop writes; this pipeline keeps cp.async"),
        "{ir}"
    );
    assert!(!ir.contains("T.tma_load("), "{ir}");
    let per_thread = edited(
        "passes/tests/cases/pipe_from_let.tir",
        "        lo = by * 2 - 1\n",
        "        mine = T.alloc_local((1,), \"int32\")\n        for t in T.Parallel(256):\n            mine[0] = t % 2\n        lo = mine[0] + by * 2 - 1\n",
    );
    let ir = lowered(&per_thread, Target::Sm90a);
    assert!(
        ir.contains("the pipelined loop's start `lo` may differ between the block's threads; this pipeline keeps cp.async"),
        "{ir}"
    );
    assert!(!ir.contains("T.tma_load("), "{ir}");
}

#[test]
fn a_paged_copy_takes_its_page_with_its_fill() {
    // The page entry is loaded where the fill is issued — by the producer thread, in the
    // prologue and for iteration `ko + 2` — and the box origin computed from it is clamped
    // to the rows (a `.s32` coordinate; out of range it reads zeros either way). The A
    // copy's origin, bounded by the loop, is not clamped. On sm_80 the same lets feed the
    // thread copies' addresses (cp.async: `gemm_pipeline.rs`).
    let ir = lowered(&local_case("pipe_paged_gemm"), Target::Sm90a);
    for form in [
        "page_1 = table[s]",
        "T.tma_load(B_shared[s, 0, 0], B_pages[T.max(T.min(page_1 * 32, 256), -32), bx * 256]",
        "page_2 = table[ko_1 + 2]",
        "T.tma_load(A_shared[s, 0, 0], A[by * 128, s * 32]",
        "T.setmaxnreg(",
    ] {
        assert!(ir.contains(form), "no `{form}`:\n{ir}");
    }
    let ir = lowered(&local_case("pipe_paged_gemm"), Target::Sm80);
    assert!(ir.contains("page_2 = table[ko + 2]"), "{ir}");
}
