//! `tlc plan FILE -D …` (`compiler/src/plan/space.rs`): the ranking of a tuning space by
//! waves, last-wave fill, blocks along x, stages and shared bytes; dropped configs; kernels
//! without a space; bad `-D`.

use crate::common;

use common::{text, tlc};

const GEMM: &str = "bench/gemm_tunable.tir";
const COPY: &str = "tools/tests/plan/copy_tunable.tir";

fn plan(args: &[&str]) -> String {
    let mut all = vec!["plan"];
    all.extend_from_slice(args);
    let out = tlc(&all);
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
}

fn plan_error(args: &[&str]) -> String {
    let mut all = vec!["plan"];
    all.extend_from_slice(args);
    let out = tlc(&all);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    text(&out.stderr)
}

#[test]
fn gemm_4096_cubed() {
    insta::assert_snapshot!(plan(&[
        GEMM, "-D", "M=4096", "-D", "N=4096", "-D", "K=4096"
    ]));
}

#[test]
fn gemm_long_k() {
    insta::assert_snapshot!(plan(&[
        GEMM, "-D", "M=1024", "-D", "N=1024", "-D", "K=14336"
    ]));
}

#[test]
fn gemm_small_m() {
    insta::assert_snapshot!(plan(&[GEMM, "-D", "M=64", "-D", "N=4096", "-D", "K=4096"]));
}

/// The first place at 4096³ on sm_90a, by hand (the rules of `plan::space`, the constants
/// of `plan::cost`). Every config is warp-specialized: a producer warpgroup joins the 128
/// (or 256) threads, and one consumer warpgroup is compiled for `T.min_blocks_per_sm` 2
/// (two, 1), which with `setmaxnreg` is exactly what fits: 2 resident blocks per SM for
/// threads = 128, 1 for 256. 128×128×32 with 3 stages: a step's gemm is 2·128·128·32 =
/// 1048576 flops, work = 93.8 + 107.7 × 1.048576 = 206.73 ns; its copies bring
/// (128·32 + 32·128)·2 = 16384 bytes, latency = 163.5 + (51.3 + 11.2 × 16.384) / 2 =
/// 280.90 ns; two blocks share the SM: max(2 × 206.73, 280.90) = 413.46 ns per step, 128
/// steps plus 1558 ns a wave = 54481.3 ns. 1024 blocks on 264 slots: 3 full waves and
/// 232 blocks (still 2 on the busiest SM): 4 × 54481.3; the fill term adds 1024 × 128 ×
/// 16.384 KB / 82.6 KB/ns: 243924 ns in all. 4 and 5 stages only shorten the latency,
/// which the work already covers: the same estimate, and the fewest stages rank first.
#[test]
fn the_top_config_at_4096_cubed() {
    let json = plan(&[
        GEMM, "-D", "M=4096", "-D", "N=4096", "-D", "K=4096", "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    let ranked = v["ranked"].as_array().expect("a list");
    let first = &ranked[0];
    assert_eq!(
        first["config"],
        serde_json::json!({"threads": 128, "block_M": 128, "block_N": 128, "block_K": 32,
                           "num_stages": 3})
    );
    assert_eq!(first["estimate_ns"], 249201);
    assert_eq!(first["waves"], 4);
    assert_eq!(first["last_wave_blocks"], 232);
    assert_eq!(first["last_wave_slots"], 264);
    assert_eq!(first["resident_per_sm"], 2);
    for (rank, stages) in [(1, 4), (2, 5)] {
        assert_eq!(ranked[rank]["estimate_ns"], 249201);
        assert_eq!(ranked[rank]["config"]["num_stages"], stages);
    }
    // 256 threads: one block per SM (its registers are budgeted for one).
    assert!(ranked
        .iter()
        .filter(|r| r["config"]["threads"] == 256)
        .all(|r| r["resident_per_sm"] == 1));
    assert_eq!(ranked.len(), 36);
    assert_eq!(v["sms"], 132);
}

/// A 256×256 float32 tile needs 256 KiB of shared memory: over both targets' limits. The
/// 128×256 tile (128 KiB) fits on sm_80, one block per SM.
#[test]
fn a_config_over_shared_memory_is_dropped() {
    let out = plan(&[COPY, "-D", "N=100000", "--target", "sm_80"]);
    assert!(out.contains("sm_80 on 108 SMs"), "{out}");
    assert!(
        out.contains(
            "dropped (1):\n  block=256: verifier: 9:9: shared buffer `S` needs 262144 \
             bytes, more than the 232448 bytes of shared memory a block may have on any target\n"
        ),
        "{out}"
    );
    // ⌈100000/128⌉ = 782 blocks, 1 per SM: ⌈782/108⌉ = 8 waves, 26 in the last; 64 rows:
    // 1563 blocks, 2 per SM: 8 waves, 51/216. No pipelined loop: each block is one step
    // whose latency grows with the bytes it copies into shared memory (nothing in flight
    // to hide them), so the same 8 waves of half-size copies are estimated cheaper.
    let rows: Vec<&str> = out.lines().filter(|l| l.contains("block=")).collect();
    assert!(
        rows[0].contains("block=64") && rows[0].contains("51/216"),
        "{out}"
    );
    assert!(
        rows[1].contains("block=128") && rows[1].contains("26/108"),
        "{out}"
    );
    // `--sms` changes the slots.
    let out = plan(&[COPY, "-D", "N=100000", "--sms", "100", "--json"]);
    assert!(out.contains("\"sms\":100"), "{out}");
}

/// Without a tuning space, the ranking is one row: the kernel as written (exit 0).
#[test]
fn a_kernel_without_a_space_is_one_row() {
    let out = plan(&["tests/cases/valid/row_softmax.tir", "-D", "M=1000"]);
    assert!(
        out.contains("the kernel has no tuning space: one config, as written\n"),
        "{out}"
    );
    assert_eq!(
        out.lines().filter(|l| l.contains("(as written)")).count(),
        1
    );
}

#[test]
fn a_define_fixes_a_tunable() {
    let v: serde_json::Value = serde_json::from_str(&plan(&[
        GEMM,
        "-D",
        "M=4096",
        "-D",
        "N=4096",
        "-D",
        "K=4096",
        "-D",
        "block_K=32",
        "--json",
    ]))
    .expect("JSON");
    let ranked = v["ranked"].as_array().expect("a list");
    assert_eq!(ranked.len(), 18);
    assert!(ranked.iter().all(|r| r["config"]["block_K"] == 32));
}

#[test]
fn bad_defines_are_located_errors() {
    let err = plan_error(&[GEMM, "-D", "M=4096", "-D", "N=4096"]);
    assert!(
        err.starts_with("bench/gemm_tunable.tir:14:5: error: `tlc plan` needs every symbolic"),
        "{err}"
    );
    assert!(err.contains("missing: -D K=…"), "{err}");
    let err = plan_error(&[GEMM, "-D", "M=1", "-D", "N=1", "-D", "K=1", "-D", "Q=3"]);
    assert!(
        err.starts_with("bench/gemm_tunable.tir:14:5: error: `-D Q=…` names no symbolic dimension"),
        "{err}"
    );
    let err = plan_error(&[GEMM, "-D", "M=x"]);
    assert_eq!(err, "error: `-D M=x`: `x` is not an integer\n");
    let err = plan_error(&[GEMM, "-D", "M=1", "--target", "sm_70"]);
    assert!(err.contains("unknown target"), "{err}");
}

/// A split-K slice's trip count `T.min(steps, k_tiles - bz * steps)` depends on the block:
/// the estimate takes the most any block runs (`steps`), so every config has one. Stream-K's
/// run lengths are read from memory: no bound, no estimate (ranked by the wave rules).
#[test]
fn split_k_trip_counts_are_bounded_and_stream_k_has_none() {
    let dims = ["-D", "M=1024", "-D", "N=1024", "-D", "K=14336", "--json"];
    let mut args = vec!["examples/gemm_splitk.tir"];
    args.extend(dims);
    let v: serde_json::Value = serde_json::from_str(&plan(&args)).expect("JSON");
    let ranked = v["ranked"].as_array().expect("a list");
    assert_eq!(ranked.len(), 108);
    assert!(ranked.iter().all(|r| r["estimate_ns"].is_u64()), "{v}");
    // One slice of 448 k-tiles of 32 is all of K; eight slices of 56 run an eighth of the
    // steps each, over eight times the blocks: it must be estimated faster at this shape
    // (64 tiles of 128 x 128 for 132 SMs).
    let est = |split: i64, bk: i64| {
        ranked
            .iter()
            .find(|r| {
                r["config"]["split_k"] == split
                    && r["config"]["block_K"] == bk
                    && r["config"]["block_M"] == 128
                    && r["config"]["block_N"] == 128
                    && r["config"]["num_stages"] == 4
            })
            .and_then(|r| r["estimate_ns"].as_u64())
            .expect("the config")
    };
    assert!(est(8, 32) < est(1, 32));
    let mut args = vec!["examples/gemm_streamk.tir"];
    args.extend(dims);
    let v: serde_json::Value = serde_json::from_str(&plan(&args)).expect("JSON");
    let ranked = v["ranked"].as_array().expect("a list");
    assert!(ranked.iter().all(|r| r["estimate_ns"].is_null()), "{v}");
}

/// `examples/gemm.tir` serves prefill and decode shapes from one file: at 4096³ the plan's
/// first config is the two-consumer 128 x 256 tile with no K slices (the zeroing kernel's
/// grid empty: one launch); at a decode shape (16 x 4096 x 4096: 32 to 64 output tiles for
/// 132 SMs) it slices K, and its estimate counts the zeroing kernel's launch and the
/// slices' atomic adds (more slices estimated dearer from some point on, not free).
#[test]
fn the_gemm_example_slices_k_for_decode_and_not_for_prefill() {
    let first = |m: &str, n: &str, k: &str| -> serde_json::Value {
        let args = [
            "examples/gemm.tir",
            "--target",
            "sm_90a",
            "-D",
            m,
            "-D",
            n,
            "-D",
            k,
        ];
        let mut args = args.to_vec();
        args.push("--json");
        let v: serde_json::Value = serde_json::from_str(&plan(&args)).expect("JSON");
        v["ranked"][0]["config"].clone()
    };
    let prefill = first("M=4096", "N=4096", "K=4096");
    assert_eq!(prefill["split_k"], 1, "{prefill}");
    assert_eq!(
        (prefill["block_M"].as_i64(), prefill["block_N"].as_i64()),
        (Some(128), Some(256)),
        "{prefill}"
    );
    assert_eq!(prefill["threads"], 256, "{prefill}");
    let decode = first("M=16", "N=4096", "K=4096");
    assert!(decode["split_k"].as_i64() > Some(1), "{decode}");
    // The estimate of one config over its slice counts at a decode shape: 8 slices of a
    // 64 x 128 tile add 8 tiles per output tile, and pay for it.
    let args = [
        "examples/gemm.tir",
        "--target",
        "sm_90a",
        "-D",
        "M=16",
        "-D",
        "N=4096",
        "-D",
        "K=4096",
        "--json",
    ];
    let v: serde_json::Value = serde_json::from_str(&plan(&args)).expect("JSON");
    let est = |split: i64| {
        v["ranked"]
            .as_array()
            .and_then(|r| {
                r.iter().find(|r| {
                    let c = &r["config"];
                    c["split_k"] == split
                        && c["block_M"] == 64
                        && c["block_N"] == 128
                        && c["block_K"] == 64
                        && c["num_stages"] == 4
                })
            })
            .and_then(|r| r["estimate_ns"].as_u64())
            .expect("the config")
    };
    assert!(
        est(4) < est(1),
        "slices fill the GPU: {} vs {}",
        est(4),
        est(1)
    );
}

/// The flash-attention example's plan ranks a pipelined config (2 stages) first: with one
/// stage a block's loads and its work add up (TileLang's default, 1 stage, measured 1.8×
/// slower on an H200, docs/perf.md).
#[test]
fn the_attention_plan_pipelines() {
    let args = [
        "examples/flash_attention.tir",
        "--target",
        "sm_90a",
        "-D",
        "batch=8",
        "-D",
        "seq_len=4096",
        "-D",
        "heads=32",
        "-D",
        "kv_heads=32",
        "--json",
    ];
    let v: serde_json::Value = serde_json::from_str(&plan(&args)).expect("JSON");
    let top = &v["ranked"][0]["config"];
    assert_eq!(top["num_stages"], 2, "{top}");
}
