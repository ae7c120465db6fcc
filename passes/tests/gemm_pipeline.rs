//! The whole sm_80 pipeline on the tensor-core GEMM cases, pass by pass: after every pass
//! the IR verifies, prints and parses back to itself, and the interpreter gives the input's
//! results on random data (exactly before `lower-tile-ops`; within 1e-3 after it, where the
//! K loop is summed in mma.sync steps of 16). Symbolic cases run at small ragged sizes, or
//! tile-aligned ones for kernels that do not mask their edges (the seed's hand-written B
//! loop), including trip counts below `num_stages`. Every stage of the seed kernel is
//! snapshotted: that is what a user debugging it reads.

use crate::common;

use common::{
    assert_bound_matches_symbolic, assert_close_meaning, bound_mnk, case, check_against, load,
    load_bound, root, with_region_barriers, Reference,
};
use tlc_ir::printer::print_func;
use tlc_ir::PrimFunc;
use tlc_passes::{PassContext, Target};

fn local_case(stem: &str) -> PrimFunc {
    load(&root().join(format!("passes/tests/cases/{stem}.tir")))
}

/// `func` with its `threads=(32, 4)` block reshaped to `block` (the same 128 threads).
fn with_block(func: &PrimFunc, block: &str) -> PrimFunc {
    let text = print_func(func);
    assert!(text.contains("threads=(32, 4)"), "{text}");
    let func = tlc_ir::parse(&text.replace("threads=(32, 4)", &format!("threads={block}")))
        .expect("parses");
    tlc_ir::verifier::verify(&func).expect("verifies");
    func
}

/// The stages without the tile-level rewrites that changed nothing (the seed has no
/// per-thread code, no reduction, no indirect fragment read and no loop around its
/// pipeline: `thread-sync`, `lower-reductions`, `stage-fragment-reads` and
/// `mark-fresh-buffers` leave it as it is, and its snapshots start at the layouts).
fn changing(
    func: &PrimFunc,
    stages: Vec<(&'static str, PrimFunc)>,
) -> Vec<(&'static str, PrimFunc)> {
    let mut prev = func.clone();
    let mut out = Vec::new();
    for (pass, f) in stages {
        let rewrite = matches!(
            pass,
            "widen-int4-gemm"
                | "pack-int4"
                | "thread-sync"
                | "lower-reducers"
                | "lower-reductions"
                | "stage-fragment-reads"
                | "longest-first"
                | "version-masks"
                | "prefetch-loads"
                | "mark-fresh-buffers"
                | "tma-multicast"
        );
        if !(rewrite && f == prev) {
            out.push((pass, f.clone()));
        }
        prev = f;
    }
    out
}

/// Every stage of the default sm_80 pipeline: (pass name, its output).
fn stages(func: &PrimFunc) -> Vec<(&'static str, PrimFunc)> {
    stages_for(func, Target::Sm80)
}

/// Every stage of the default pipeline of `target`, each verified and round-tripped.
fn stages_for(func: &PrimFunc, target: Target) -> Vec<(&'static str, PrimFunc)> {
    stages_in(func, &PassContext::new(target))
}

/// [`stages_for`] in the context `cx` (its target, its SM count).
fn stages_in(func: &PrimFunc, cx: &PassContext) -> Vec<(&'static str, PrimFunc)> {
    common::pipeline_stages(func, cx)
}

/// The GEMM cases every pass must keep the meaning of.
fn gemm_cases() -> Vec<(&'static str, PrimFunc)> {
    vec![
        ("seed000_dims", case("seed000_dims")),
        ("gemm_bf16_transposed", case("gemm_bf16_transposed")),
        // A persistent tile loop (`T.fresh`: C_shared in the stages' bytes once planned).
        ("persistent_gemm_reuse", case("persistent_gemm_reuse")),
        ("gemm_ragged_tn", local_case("gemm_ragged_tn")),
        ("gemm_fullcol_epilogue", local_case("gemm_fullcol_epilogue")),
        // Warp tiles of 16 x 8 multiples (an odd n8 tile per warp: `ldmatrix.x2`).
        ("gemm_warp16x8", local_case("gemm_warp16x8")),
        ("gemm_warp16x8_nt", local_case("gemm_warp16x8_nt")),
        // The second gemm's A read from registers (no staging).
        ("flash_register_a", local_case("flash_register_a")),
        (
            "gemm_128x128x32_t128_s3_masked",
            load(&root().join("bench/gemm_128x128x32_t128_s3_masked.tir")),
        ),
        // Two- and three-dimensional blocks: regions are thread nests over the linear index.
        ("gemm_threads_2d", case("gemm_threads_2d")),
        (
            "gemm_threads_16x8",
            with_block(&case("gemm_threads_2d"), "(16, 8)"),
        ),
        (
            "gemm_threads_32x2x2",
            with_block(&case("gemm_threads_2d"), "(32, 2, 2)"),
        ),
    ]
}

#[test]
fn every_pass_keeps_the_meaning_of_every_gemm_case() {
    keeps_meaning(Target::Sm80);
}

/// sm_90a: the same cases through the wgmma path (those of whole warpgroups) under the
/// interpreter's wgmma semantics.
#[test]
fn every_sm90a_pass_keeps_the_meaning_of_every_gemm_case() {
    keeps_meaning(Target::Sm90a);
}

/// The fp8 GEMMs (sm_90a only: wgmma's k = 32 form), with constant dims so that the
/// pipelines run on TMA with warp specialization: the plain NT gemm, the block-scaled
/// example (per-K-block promotion with row scales) on two consumer warpgroups and on one,
/// and its variant whose row scales ride the pipeline in shared memory.
fn fp8_cases() -> Vec<(&'static str, PrimFunc)> {
    let path = root().join("examples/gemm_fp8_blockscaled.tir");
    let blockscaled = load(&path);
    let text = std::fs::read_to_string(&path).expect("read the example");
    let written = tlc_ir::parse(&text).expect("parse the example");
    let one_group = tlc_ir::tuning::bind(
        &written,
        &vec![
            ("block_M".to_string(), 64),
            ("threads".to_string(), 128),
            ("block_N".to_string(), 64),
        ],
        &Vec::new(),
    )
    .expect("bind the one-warpgroup config");
    vec![
        (
            "gemm_fp8_nt",
            bound_mnk(
                &load(&root().join("tests/cases/valid/gemm_fp8_nt.tir")),
                200,
                136,
                320,
            ),
        ),
        (
            "gemm_fp8_blockscaled",
            bound_mnk(&blockscaled, 200, 192, 384),
        ),
        (
            "gemm_fp8_blockscaled_64x64",
            bound_mnk(&one_group, 130, 70, 320),
        ),
        (
            "gemm_fp8_scales_staged",
            bound_mnk(
                &load(&root().join("tests/cases/valid/gemm_fp8_scales_staged.tir")),
                200,
                192,
                // 4 k-tiles.
                512,
            ),
        ),
    ]
}

#[test]
fn every_sm90a_pass_keeps_the_meaning_of_the_fp8_gemms() {
    for (name, func) in fp8_cases() {
        let (compared, texts) = compare_every_stage(name, &func, Target::Sm90a);
        assert!(compared >= 20, "{name}: only {compared} runs compared");
        let has = |what: &str| texts.iter().any(|t| t.contains(what));
        assert_eq!(
            (has("T.wgmma("), has("T.tma_load("), has("T.setmaxnreg(")),
            (true, true, true),
            "{name}: (wgmma, TMA, warp specialization)"
        );
    }
    // sm_80 has no fp8 tensor-core form: refused at the gemm, never lowered another way.
    let cx = PassContext::new(Target::Sm80);
    let refused = tlc_passes::default_pipeline(Target::Sm80)
        .iter()
        .try_fold(fp8_cases()[0].1.clone(), |f, pass| pass.run(f, &cx));
    let errors = refused.expect_err("sm_80 refuses an fp8 gemm");
    assert!(
        errors
            .iter()
            .any(|d| d.message.contains("runs on sm_90a's wgmma only") && !d.span.is_dummy()),
        "{errors:?}"
    );
}

/// The last stage checked: a stage whose function equals it (IR equality: the same program)
/// in the same phase of the pipeline — so checked the same way, against the same reference
/// — has the outputs that check compared, and is not run again.
#[derive(Default)]
struct SameAsBefore {
    last: Option<(PrimFunc, (bool, bool), usize)>,
}

impl SameAsBefore {
    /// The runs the previous check compared, when `func` in `phase` is what it checked.
    fn runs_of(&self, func: &PrimFunc, phase: (bool, bool)) -> Option<usize> {
        match &self.last {
            Some((f, p, runs)) if *p == phase && f == func => Some(*runs),
            _ => None,
        }
    }

    fn remember(&mut self, func: PrimFunc, phase: (bool, bool), runs: usize) {
        self.last = Some((func, phase, runs));
    }
}

/// Every stage of `target`'s default pipeline on `func` keeps its meaning (exactly before
/// the lowering; within 1e-3 after it, where the tensor-core sums are reassociated): the
/// interpreter runs compared, and each stage's printed IR.
fn compare_every_stage(name: &str, func: &PrimFunc, target: Target) -> (usize, Vec<String>) {
    check_stages(name, func, stages_for(func, target))
}

/// [`compare_every_stage`] over given stages (`(pass, output)` in pipeline order).
fn check_stages(
    name: &str,
    func: &PrimFunc,
    stages: Vec<(&'static str, PrimFunc)>,
) -> (usize, Vec<String>) {
    let (mut lowered, mut bound) = (false, false);
    let mut compared = 0;
    let mut texts = Vec::new();
    // The input's outputs, once for all stages.
    let reference = Reference::of(name, func);
    let mut previous = SameAsBefore::default();
    for (pass, out) in stages {
        lowered |= pass == "lower-tile-ops";
        bound |= pass == "thread-binding";
        texts.push(print_func(&out));
        let what = format!("{name} after {pass}");
        let phase = (lowered, bound);
        compared += match previous.runs_of(&out, phase) {
            Some(runs) => runs,
            None => {
                let runs = if !lowered {
                    check_against(&what, &reference, &out, None)
                } else if !bound {
                    let barriers = with_region_barriers(out.clone());
                    check_against(&what, &reference, &barriers, Some(1e-3))
                } else {
                    check_against(&what, &reference, &out, Some(1e-3))
                };
                previous.remember(out, phase, runs);
                runs
            }
        };
    }
    (compared, texts)
}

fn keeps_meaning(target: Target) {
    for (name, func) in gemm_cases() {
        let (compared, texts) = compare_every_stage(name, &func, target);
        let wgmma = texts.iter().any(|t| t.contains("T.wgmma("));
        assert!(compared >= 60, "{name}: only {compared} runs compared");
        // Every case of whole warpgroups takes the wgmma path on sm_90a; the 64-thread ones
        // and the one of 32 rows (no 64-row wgmma block) keep mma.sync, as sm_80 does
        // everywhere.
        let mma_only = [
            "gemm_fullcol_epilogue",
            "gemm_warp16x8",
            "gemm_warp16x8_nt",
            "flash_register_a",
        ];
        let expected = target == Target::Sm90a && !mma_only.contains(&name);
        assert_eq!(
            wgmma, expected,
            "{name} on {target}: wgmma path taken = {wgmma}"
        );
    }
}

/// Inside a block-uniform `while` over a `T.alloc_var`, a pipeline per iteration with a
/// run-time trip count of -1, 0, 1 (block column 0) or 0, 1 (column 1): the prologue and the
/// barriers' phases for short and empty runs, run after run, on TMA. Only the pipeline's
/// output is compared (between `lower-tile-ops` and `thread-binding` the variable is read
/// outside the SIMT regions, which the interpreter runs only once they are merged).
#[test]
fn tma_pipelines_inside_a_while_loop_keep_their_meaning() {
    let func = tlc_ir::parse(WHILE_PIPELINES).expect("parse");
    let stages = stages_for(&func, Target::Sm90a);
    let (_, last) = stages.last().expect("stages");
    assert!(
        stages
            .iter()
            .any(|(_, f)| print_func(f).contains("T.tma_load(")),
        "the TMA path was not taken"
    );
    assert!(assert_close_meaning("pipelines in a while loop", &func, last, 1e-3) > 0);
}

const WHILE_PIPELINES: &str = "@T.prim_func
def g(
    A: T.Tensor((256, 256), \"float16\"),
    B: T.Tensor((256, 256), \"float16\"),
    C: T.Tensor((256, 256), \"float32\"),
):
    with T.Kernel(2, 2, threads=128) as (bx, by):
        A_shared = T.alloc_shared((128, 32), \"float16\")
        B_shared = T.alloc_shared((32, 128), \"float16\")
        C_local = T.alloc_fragment((128, 128), \"float\")
        kb = T.alloc_var(T.int32, bx)
        T.clear(C_local)
        while kb < 3:
            for ko in T.Pipelined(kb - 1, num_stages=3):
                T.copy(A[by * 128, ko * 32], A_shared)
                T.copy(B[ko * 32, bx * 128], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            kb += 1
        T.copy(C_local, C[by * 128, bx * 128])
";

/// sm_90a with the dims bound (row strides provably multiples of 16 bytes): the pipelines
/// run on TMA — ragged M and N, a ragged last K tile (the boxes' zero fill; the seed's own
/// B copy is unmasked, so its K and N stay whole), fewer K tiles
/// than stages, both majors of both operands.
#[test]
fn every_sm90a_pass_keeps_the_meaning_of_tma_pipelines() {
    let bound = bound_mnk;
    let cases = [
        (
            "seed000_dims 200x256x96",
            bound(&case("seed000_dims"), 200, 256, 96),
        ),
        (
            "seed000_dims 136x128x32",
            bound(&case("seed000_dims"), 136, 128, 32),
        ),
        (
            "gemm_bf16_transposed 72x136x40",
            bound(&case("gemm_bf16_transposed"), 72, 136, 40),
        ),
        (
            "gemm_ragged_tn 136x72x56",
            bound(&local_case("gemm_ragged_tn"), 136, 72, 56),
        ),
        (
            "gemm_128x128x32_t128_s3_masked 136x200x72",
            bound(
                &load(&root().join("bench/gemm_128x128x32_t128_s3_masked.tir")),
                136,
                200,
                72,
            ),
        ),
        ("gemm_threads_2d", case("gemm_threads_2d")),
        // A loop from 1: the barriers' phases count from the loop's start.
        ("seed000_dims from ko = 1, 136x128x160", {
            let text = std::fs::read_to_string(root().join("tests/cases/valid/seed000_dims.tir"))
                .expect("seed000_dims");
            let from_one = text.replace(
                "T.Pipelined(T.ceildiv(K, 32)",
                "T.Pipelined(1, T.ceildiv(K, 32)",
            );
            assert_ne!(text, from_one, "the loop header moved");
            bound(&tlc_ir::parse(&from_one).expect("parse"), 136, 128, 160)
        }),
    ];
    for (name, func) in cases {
        let printed = sm90a_stages_keep_meaning(name, &func);
        assert!(
            printed.iter().any(|ir| ir.contains("T.tma_load(")),
            "{name}: the TMA path was not taken"
        );
    }
}

/// Pipelines past a constant start and plain addresses (issue 38): a loop from a
/// block-level let (stages and mbarrier phases counted from it; the blocks run 7, 5, 3, 1
/// and no k-tile), and copies whose origin is read from a page table (each page's entry
/// loaded with its copy, ahead of the loop; the random entries, -8 .. 7 over 8 pages, put
/// some boxes outside the tensor, which read zeros). Every pass of both targets keeps
/// their meaning: on sm_80 on cp.async, on sm_90a on TMA with a producer warpgroup — and
/// with one SM, the paged GEMM's block walking both its tiles.
#[test]
fn every_pass_keeps_the_meaning_of_pipelines_from_lets_and_through_page_tables() {
    for stem in ["pipe_from_let", "pipe_paged_gemm"] {
        let func = local_case(stem);
        let (compared, texts) = compare_every_stage(stem, &func, Target::Sm80);
        assert!(compared > 0, "{stem}: nothing compared");
        let last = texts.last().expect("stages");
        assert!(
            last.contains("T.cp_async(B_shared"),
            "{stem} on sm_80:\n{last}"
        );
        let printed = sm90a_stages_keep_meaning(stem, &func);
        let last = printed.last().expect("stages");
        for form in ["T.tma_load(B_shared", "T.setmaxnreg("] {
            assert!(last.contains(form), "{stem} on sm_90a: no `{form}`\n{last}");
        }
    }
    let one_sm = PassContext::new(Target::Sm90a).with_sms(1);
    let printed = sm90a_stages_keep_meaning_in(
        "pipe_paged_gemm on one SM",
        &local_case("pipe_paged_gemm"),
        &one_sm,
    );
    let last = printed.last().expect("stages");
    assert!(last.contains("for tile_i in"), "not persistent:\n{last}");
}

/// `examples/flash_attention.tir` causal with a sliding window: each query block's key loop
/// starts at the key tile before its diagonal, `T.max(0, bx * 2 - 1)` (64-key tiles, 128
/// query rows). At 256 threads and 2 stages the pipeline is warp-specialized with the
/// deferred second gemm and ping-pong: its first k-tile, its waits and the producer's all
/// count from that start. Every sm_90a pass keeps the meaning (200 keys: block 1 runs
/// tiles 1 .. 3, block 0 tiles 0 .. 1).
#[test]
fn every_sm90a_pass_keeps_the_meaning_of_an_attention_window_from_a_let() {
    let path = root().join("examples/flash_attention.tir");
    let text = std::fs::read_to_string(&path).expect("read the example");
    let from = "        for k in T.Pipelined(loop_range, num_stages=num_stages):\n";
    let windowed = text.replace(
        from,
        "        lo = T.max(0, bx * 2 - 1)\n        for k in T.Pipelined(lo, loop_range, num_stages=num_stages):\n",
    );
    assert_ne!(windowed, text, "the loop header moved");
    let written = tlc_ir::parse(&windowed).expect("parse the window");
    let config = tlc_ir::tuning::bind(
        &written,
        &vec![
            ("is_causal".to_string(), 1),
            ("block_N".to_string(), 64),
            ("num_stages".to_string(), 2),
            ("threads".to_string(), 256),
        ],
        &Vec::new(),
    )
    .expect("bind the window's config");
    let dims = [
        ("batch", 1),
        ("seq_len", 200),
        ("heads", 2),
        ("kv_heads", 1),
    ]
    .map(|(n, v)| (n.to_string(), v));
    let bound = tlc_ir::specialize::specialize(&config, &dims).expect("bind the dims");
    tlc_ir::verifier::verify(&bound).expect("the window verifies");
    let bound = tlc_passes::thread_sync::thread_sync(bound).expect("thread-sync");
    let printed = sm90a_stages_keep_meaning("attention window from a let", &bound);
    let last = printed.last().expect("stages");
    for form in ["T.tma_load(", "T.bar_sync(", "for k in T.serial(lo + 1, "] {
        assert!(last.contains(form), "no `{form}`:\n{last}");
    }
}

/// Partial tiles from `-D` (issue 14): dims bound below a tile (`-D M=64` for a 128-row
/// tile) verify, every pass of both targets' pipelines keeps them valid, and what the
/// pipeline makes of the bound kernel computes what the symbolic kernel computes at those
/// sizes — the copies' masks, and on sm_90a TMA boxes larger than the tensor (their
/// out-of-bounds zero fill; `cuTensorMapEncodeTiled`'s documented requirements bound a box
/// dim by 256, not by the tensor's dim; `scripts/gpu-check.sh` runs these on the GPU).
#[test]
fn partial_tiles_bound_by_d_compute_what_the_symbolic_kernel_computes() {
    /// The `-D` bindings of a case.
    type Dims = &'static [(&'static str, i64)];
    let cases: [(&str, Dims, f64); 5] = [
        ("examples/scale_cast.tir", &[("M", 50), ("N", 30)], 0.0),
        (
            "bench/gemm_128x128x32_t128_s3_masked.tir",
            &[("M", 64), ("N", 64), ("K", 32)],
            1e-3,
        ),
        // TMA on sm_90a: boxes of 128 x 64 rows / columns over a 50 x 40 result.
        (
            "bench/gemm_128x128x64_t128_s3.tir",
            &[("M", 50), ("N", 40), ("K", 64)],
            1e-3,
        ),
        (
            "bench/gemm_128x128x64_t128_s3.tir",
            &[("M", 8), ("N", 8), ("K", 200)],
            1e-3,
        ),
        (
            "passes/tests/cases/gemm_ragged_tn.tir",
            &[("M", 40), ("N", 24), ("K", 16)],
            1e-3,
        ),
    ];
    for (file, dims, tol) in cases {
        let symbolic = load(&root().join(file));
        let bindings: Vec<(String, i64)> = dims.iter().map(|(n, v)| (n.to_string(), *v)).collect();
        let bound = tlc_ir::specialize::specialize(&symbolic, &bindings).expect("specialize");
        let name = format!("{file} {dims:?}");
        tlc_ir::verifier::verify(&bound).unwrap_or_else(|e| panic!("{name}: {e:#?}"));
        assert_bound_matches_symbolic(&name, &symbolic, dims, &bound, 0.0);
        for target in [Target::Sm80, Target::Sm90a] {
            let stages = stages_for(&bound, target);
            let (_, out) = stages.last().expect("a pipeline");
            let what = format!("{name} on {target}");
            assert_bound_matches_symbolic(&what, &symbolic, dims, out, tol);
            if target == Target::Sm90a && file.contains("128x128x64") {
                assert!(
                    print_func(out).contains("T.tma_load("),
                    "{what}: the TMA path was not taken"
                );
            }
        }
    }
}

/// Checks that every pass of the sm_90a pipeline keeps `func`'s meaning under the
/// interpreter (exact before `lower-tile-ops`, within rounding after); the printed stages.
fn sm90a_stages_keep_meaning(name: &str, func: &PrimFunc) -> Vec<String> {
    sm90a_stages_keep_meaning_in(name, func, &PassContext::new(Target::Sm90a))
}

/// [`sm90a_stages_keep_meaning`] in the context `cx`.
fn sm90a_stages_keep_meaning_in(name: &str, func: &PrimFunc, cx: &PassContext) -> Vec<String> {
    check_stages(name, func, stages_in(func, cx)).1
}

/// Two consumer warpgroups (256 user threads) take the warp-specialized pipeline: the
/// producer warpgroup and the consumers run concurrently in the interpreter, talking only
/// through the full / empty mbarrier rings.
#[test]
fn every_sm90a_pass_keeps_the_meaning_of_warp_specialized_pipelines() {
    let wide = load(&root().join("bench/gemm_128x256x32_t256_s3.tir"));
    let bound = |m: i64, n: i64, k: i64| bound_mnk(&wide, m, n, k);
    let cases = [
        ("ragged 200x264x72", bound(200, 264, 72)),
        ("one k-tile 136x256x32", bound(136, 256, 32)),
        (
            "two k-tiles, fewer than the stages, 128x256x40",
            bound(128, 256, 40),
        ),
        ("more k-tiles than stages 128x256x224", bound(128, 256, 224)),
    ];
    for (name, func) in cases {
        let printed = sm90a_stages_keep_meaning(name, &func);
        assert!(
            printed.iter().any(|ir| ir.contains("T.setmaxnreg(")),
            "{name}: the pipeline was not warp-specialized"
        );
    }
}

/// Four stages: the consumers keep each k-tile's wgmma group in flight and release the
/// previous stage (`T.wgmma_wait(1)`); two consumer warpgroups, and one alone (a block per
/// SM: its shared memory fits once). Around the ring: fewer k-tiles than stages, exactly
/// as many, and more, ragged.
#[test]
fn every_sm90a_pass_keeps_the_meaning_of_pipelines_with_a_group_in_flight() {
    let bound = load_bound;
    let wide = "bench/gemm_128x256x64_t256_s4.tir";
    let one = "bench/gemm_128x128x64_t128_s4.tir";
    let cases = [
        (
            "two consumers, one k-tile 128x256x64",
            bound(wide, 128, 256, 64),
        ),
        (
            "two consumers, 4 k-tiles 136x264x256",
            bound(wide, 136, 264, 256),
        ),
        (
            "two consumers, 6 k-tiles ragged 200x256x328",
            bound(wide, 200, 256, 328),
        ),
        (
            "one consumer, 3 k-tiles 130x136x136",
            bound(one, 130, 136, 136),
        ),
        (
            "one consumer, 5 k-tiles 128x128x320",
            bound(one, 128, 128, 320),
        ),
    ];
    for (name, func) in cases {
        let printed = sm90a_stages_keep_meaning(name, &func);
        assert!(
            printed.iter().any(|ir| ir.contains("T.wgmma_wait(1)")),
            "{name}: no wgmma group kept in flight"
        );
    }
}

/// The split-K GEMM (`gemm_splitk_atomic`: C zeroed, then each K slice's 128 x 128 partial
/// tile atomically added): both pipelines keep its meaning after `lower-tile-ops` and at
/// their end (every stage verifies and round-trips; each run interprets four 128 x 128
/// GEMM blocks, so not every stage is run) at a ragged N of
/// 16-byte rows (the epilogue adds pairs, each under one guard), an odd N (one guarded add
/// per element; no TMA on sm_90a) and an aligned shape (no guard left) — with K slices that
/// run 1, 0 and -1 k-tiles. Where the sm_90a pipeline is warp-specialized, the consumers
/// take both the accumulator's clear (past the slice's lets) and the atomic epilogue.
#[test]
fn every_pass_keeps_the_meaning_of_split_k_atomic_epilogues() {
    let splitk = case("gemm_splitk_atomic");
    // (name, kernel, pairs, guarded, warp-specialized on sm_90a)
    let cases = [
        (
            "ragged 100x136x40",
            bound_mnk(&splitk, 100, 136, 40),
            true,
            true,
            true,
        ),
        (
            "odd N 100x99x40",
            bound_mnk(&splitk, 100, 99, 40),
            false,
            true,
            false,
        ),
        (
            "aligned 128x128x64",
            bound_mnk(&splitk, 128, 128, 64),
            true,
            false,
            true,
        ),
    ];
    for (name, func, pairs, guarded, specialized) in cases {
        for target in [Target::Sm80, Target::Sm90a] {
            let what = format!("{name} on {target}");
            let stages = stages_for(&func, target);
            for (pass, out) in &stages {
                if *pass == "lower-tile-ops" {
                    let lowered = with_region_barriers(out.clone());
                    assert_close_meaning(&format!("{what} after {pass}"), &func, &lowered, 1e-3);
                }
            }
            let (_, out) = stages.last().expect("a pipeline");
            assert_close_meaning(&what, &func, out, 1e-3);
            let last = &print_func(out);
            // The epilogue's adds: pairs of a vectorized loop, or single guarded elements.
            let adds: Vec<&str> = last
                .lines()
                .filter(|l| l.contains("T.atomic_add("))
                .collect();
            assert_eq!(
                adds.iter()
                    .all(|l| l.contains("C_local[") && l.contains(" + v")),
                pairs,
                "{what}:\n{last}"
            );
            let guards = last
                .lines()
                .zip(last.lines().skip(1))
                .filter(|(a, b)| {
                    a.trim_start().starts_with("if ")
                        && (b.contains("T.atomic_add(") || b.contains("T.vectorized(2)"))
                })
                .count();
            let expected = if guarded { adds.len() } else { 0 };
            assert_eq!(guards, expected, "{what}: guards\n{last}");
            if target == Target::Sm90a && specialized {
                let consumer = last
                    .split("T.setmaxnreg(216, inc=True)")
                    .nth(1)
                    .unwrap_or_else(|| panic!("{what}: not warp-specialized\n{last}"));
                assert!(
                    consumer.contains("C_local[0] = T.cast(0, \"float32\")")
                        && consumer.contains("T.atomic_add("),
                    "{what}: the clear and the epilogue belong to the consumers\n{last}"
                );
            }
        }
    }
}

#[test]
fn the_seed_kernel_at_256x256x128_keeps_its_meaning_through_the_pipeline() {
    let dims = [
        ("M".to_string(), 256),
        ("N".to_string(), 256),
        ("K".to_string(), 128),
    ];
    let func = tlc_ir::specialize::specialize(&case("seed000_dims"), &dims).expect("specialize");
    let last = stages(&func).pop().expect("a pipeline");
    assert_close_meaning("seed 256x256x128", &func, &last.1, 1e-3);
}

#[test]
fn snapshot_every_stage_of_the_seed_kernel() {
    let func = load(&root().join("examples/gemm_seed000.tir"));
    for (i, (pass, out)) in changing(&func, stages(&func)).into_iter().enumerate() {
        insta::assert_snapshot!(format!("seed_stage_{:02}_{pass}", i + 1), print_func(&out));
    }
}

/// sm_90a: the same source through the wgmma path (layouts, the wgmma region, the proxy
/// fences before barriers).
#[test]
fn snapshot_every_stage_of_the_seed_kernel_for_sm90a() {
    let func = load(&root().join("examples/gemm_seed000.tir"));
    let out = changing(&func, stages_for(&func, Target::Sm90a));
    let laid_out = print_func(&out[0].1);
    assert_eq!(out[0].0, "layout-inference");
    assert!(
        laid_out.contains("T.wgmma_accumulator_layout(C_local, warpgroups_m=1, warpgroups_n=1)")
    );
    assert!(laid_out.contains("T.make_wgmma_swizzled_layout(B_shared, bytes=128)"));
    assert!(laid_out.contains("T.make_wgmma_swizzled_layout(A_shared, bytes=64)"));
    for (i, (pass, out)) in out.into_iter().enumerate() {
        insta::assert_snapshot!(
            format!("seed_sm90a_stage_{:02}_{pass}", i + 1),
            print_func(&out)
        );
    }
}

/// Persistent blocks (compiled for a GPU of one SM, so that one or two blocks walk every
/// tile): the rings run on across tiles — stage and parity from the fills of the block's
/// earlier tiles, every fill waiting for its stage's release — with two consumer warpgroups
/// and a group in flight, one consumer at one block per SM, and the seed's one consumer at
/// two blocks per SM (no group in flight); tiles with fewer k-tiles than stages, one
/// k-tile, ragged edges, the rasterized tile order.
#[test]
fn every_sm90a_pass_keeps_the_meaning_of_persistent_pipelines() {
    let one_sm = PassContext::new(Target::Sm90a).with_sms(1);
    let at = load_bound;
    let wide = "bench/gemm_128x256x64_t256_s4.tir";
    let one = "bench/gemm_128x128x64_t128_s4.tir";
    let seed = "tests/cases/valid/seed000_dims.tir";
    let cases = [
        (
            "two consumers, 2 tiles of 4 ragged k-tiles",
            at(wide, 136, 256, 200),
            1,
        ),
        (
            "two consumers, 3 tiles of 1 k-tile",
            at(wide, 384, 256, 64),
            1,
        ),
        (
            "one consumer, 4 tiles of 3 k-tiles",
            at(one, 256, 256, 136),
            1,
        ),
        ("seed, 6 tiles on 2 blocks", at(seed, 384, 256, 96), 2),
        (
            "A transposed, 9 ragged tiles on 2 blocks",
            at("passes/tests/cases/gemm_ragged_tn.tir", 136, 136, 72),
            2,
        ),
        (
            "bf16, B transposed, 2 stages, 6 ragged tiles on 2 blocks",
            at("tests/cases/valid/gemm_bf16_transposed.tir", 130, 72, 72),
            2,
        ),
        (
            "a 1-D grid, 5 ragged tiles on 2 blocks",
            at("passes/tests/cases/persistent_1d_grid.tir", 520, 128, 64),
            2,
        ),
        (
            "a k-loop from 1, 4 tiles of 5 k-tiles",
            at("passes/tests/cases/persistent_start1.tir", 256, 256, 384),
            1,
        ),
    ];
    for (name, func, blocks) in cases {
        let printed = sm90a_stages_keep_meaning_in(name, &func, &one_sm);
        // The stage after `warp-specialize`'s: `persistent-tiles`'.
        let lowered = printed
            .iter()
            .filter(|ir| ir.contains("T.setmaxnreg("))
            .nth(1)
            .expect(name);
        assert!(
            lowered.contains(&format!("with T.Kernel({blocks}, threads=")),
            "{name}: not persistent\n{lowered}"
        );
        assert!(
            lowered.contains("tile_i"),
            "{name}: no tile loop\n{lowered}"
        );
    }
}

/// The FP8 example's pipeline walking tiles: two tiles on one block, five k-tiles each —
/// not a multiple of the 4 stages, so every wait must count from each tile's first fill
/// (`persistent-tiles`' `fill_of_wait`) — with its row scales a k-tile ahead
/// (`prefetch-loads`): each tile's first scales are loaded in that tile, before its loop.
#[test]
fn the_fp8_pipeline_walks_its_tiles_with_its_scales_ahead() {
    let one_sm = PassContext::new(Target::Sm90a).with_sms(1);
    let fp8 = load_bound("examples/gemm_fp8_blockscaled.tir", 128, 256, 640);
    let printed = sm90a_stages_keep_meaning_in("fp8, 2 tiles", &fp8, &one_sm);
    let walked = printed
        .iter()
        .filter(|ir| ir.contains("T.setmaxnreg("))
        .nth(1)
        .expect("warp-specialized");
    assert!(
        walked.contains("with T.Kernel(1, threads=384)") && walked.contains("tile_i"),
        "{walked}"
    );
    assert!(walked.contains("row_scale_next"), "{walked}");
}

/// `prefetch-loads`' fills through the whole pipeline of each target, every stage against
/// the tile-level interpreter (exact before `lower-tile-ops`): the unguarded first load
/// (K >= 1), and the guarded one of a loop from 2, which at K = 3 runs once (its refill
/// reloads that k-tile). (A constant K = 2 would be an empty loop, which the verifier
/// refuses; a symbolic one keeps the guard, as the filetest shows.)
#[test]
fn prefetched_fills_keep_their_meaning_on_both_targets() {
    let symbolic = load(&root().join("passes/tests/filetests/prefetch_loads.tir"));
    for k in [3, 5] {
        let bound =
            tlc_ir::specialize::specialize(&symbolic, &[("K".to_string(), k)]).expect("specialize");
        for target in [Target::Sm80, Target::Sm90a] {
            let stages = stages_for(&bound, target);
            let prefetched = stages
                .iter()
                .find(|(pass, _)| *pass == "prefetch-loads")
                .map(|(_, f)| print_func(f))
                .expect("the pass ran");
            assert!(
                prefetched.contains("s_next"),
                "K = {k} on {target}:\n{prefetched}"
            );
            check_stages(&format!("prefetch K = {k} on {target}"), &bound, stages);
        }
    }
}

/// A k-loop whose trip count depends on the tile (triangular): the fills before a tile are
/// not `tile_i * nk`, so the kernel keeps one tile per block — and its meaning — even on a
/// GPU of one SM.
#[test]
fn a_tile_dependent_k_loop_stays_one_tile_per_block() {
    let one_sm = PassContext::new(Target::Sm90a).with_sms(1);
    let tri = load_bound(
        "passes/tests/cases/persistent_triangular.tir",
        512,
        256,
        512,
    );
    let printed = sm90a_stages_keep_meaning_in("triangular", &tri, &one_sm);
    // The stage after `warp-specialize`'s: `persistent-tiles`'.
    let lowered = printed
        .iter()
        .filter(|ir| ir.contains("T.setmaxnreg("))
        .nth(1)
        .expect("warp-specialized");
    assert!(
        lowered.contains("with T.Kernel(2, 4, threads=256)"),
        "{lowered}"
    );
    assert!(!lowered.contains("tile_i"), "{lowered}");
    assert!(
        lowered.contains("T.note(\"persistent blocks not used: more tiles (8) than blocks (1), but the k-loop's bounds depend on the tile\")"),
        "{lowered}"
    );
}

/// A float16 accumulator (`tests/cases/valid/gemm_f16_acc.tir`, TileLang's fine-grained
/// dequantizing GEMM's accumulation): on both targets every pass keeps the meaning
/// EXACTLY — the tile-level `T.gemm` rounds a float16 `C` to f16 after each step of 16
/// along K, as `T.mma_sync`'s f16 accumulator does — symbolic at ragged sizes and bound
/// (sm_90a's TMA candidates), and the gemm stays on `mma.sync` (wgmma declines an f16
/// accumulator).
#[test]
fn every_pass_keeps_the_exact_meaning_of_an_f16_accumulator() {
    let func = case("gemm_f16_acc");
    for target in [Target::Sm80, Target::Sm90a] {
        for (name, func) in [
            ("gemm_f16_acc", func.clone()),
            ("gemm_f16_acc 136x72x80", bound_mnk(&func, 136, 72, 80)),
        ] {
            let mut lowered = false;
            let mut bound = false;
            let mut compared = 0;
            let mut mma = false;
            let reference = Reference::of(name, &func);
            for (pass, out) in stages_for(&func, target) {
                lowered |= pass == "lower-tile-ops";
                bound |= pass == "thread-binding";
                let text = print_func(&out);
                assert!(
                    !text.contains("T.wgmma("),
                    "{name} on {target}: wgmma\n{text}"
                );
                mma |= text.contains("T.mma_sync(");
                let what = format!("{name} on {target} after {pass}");
                compared += if lowered && !bound {
                    check_against(&what, &reference, &with_region_barriers(out), None)
                } else {
                    check_against(&what, &reference, &out, None)
                };
            }
            assert!(mma, "{name} on {target}: no T.mma_sync");
            assert!(
                compared >= 30,
                "{name} on {target}: only {compared} runs compared"
            );
        }
    }
}

/// A loop-invariant register A (`T.wgmma_rs`, P loaded once before the loop) in a pipeline
/// whose compute is the gemm alone: warp specialization keeps no group in flight across
/// k-tiles (the next k-tile's `T.wgmma_rs` would read registers the in-flight group still
/// reads, which PTX leaves undefined), and every sm_90a stage keeps the meaning.
#[test]
fn a_register_a_is_never_read_by_two_groups_in_flight() {
    let src = r#"@T.prim_func
def rs_inflight(
    Pg: T.Tensor((64, 16), "float16"),
    V: T.Tensor((128, 64), "float16"),
    O: T.Tensor((64, 64), "float32"),
):
    with T.Kernel(1, threads=128) as bx:
        P = T.alloc_fragment((64, 16), "float16")
        V_shared = T.alloc_shared((16, 64), "float16")
        acc = T.alloc_fragment((64, 64), "float32")
        T.copy(Pg[0, 0], P)
        T.clear(acc)
        for ko in T.Pipelined(8, num_stages=4):
            T.copy(V[ko * 16, 0], V_shared)
            T.gemm(P, V_shared, acc)
        T.copy(acc, O[0, 0])
"#;
    let func = tlc_ir::parse(src).expect("parse");
    let printed = sm90a_stages_keep_meaning("rs_inflight", &func);
    let last = printed.last().expect("stages");
    assert!(
        last.contains("T.wgmma_rs("),
        "the register-A path was not taken"
    );
    assert!(
        !printed.iter().any(|ir| ir.contains("T.wgmma_wait(1)")),
        "a group reading register A was kept in flight"
    );
}

/// `T.no_set_max_nreg()` (TileLang's warp-specialized kernels): the same warp-specialized
/// schedule, its meaning kept at every stage, without `setmaxnreg`.
#[test]
fn no_set_max_nreg_keeps_the_schedule_without_setmaxnreg() {
    let wide = load(&root().join("bench/gemm_128x256x32_t256_s3.tir"));
    let text = tlc_ir::printer::print_func(&wide);
    let marked = text.replacen(
        "threads=256) as (bx, by):\n",
        "threads=256) as (bx, by):\n        T.no_set_max_nreg()\n",
        1,
    );
    assert_ne!(marked, text, "the kernel header moved: {text}");
    let func = bound_mnk(&common::load_text("marked", &marked), 200, 264, 72);
    let printed = sm90a_stages_keep_meaning("no setmaxnreg 200x264x72", &func);
    let last = printed.last().expect("stages");
    assert!(
        last.contains("T.mbarrier_wait"),
        "not warp-specialized:\n{last}"
    );
    assert!(!last.contains("T.setmaxnreg("), "{last}");
    assert!(last.contains("T.no_set_max_nreg()"), "{last}");
}
