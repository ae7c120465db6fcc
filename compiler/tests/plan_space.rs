//! `tlc plan FILE -D …` (`compiler/src/plan/space.rs`): the ranking of a tuning space by
//! waves, last-wave fill, blocks along x, stages and shared bytes; dropped configs; kernels
//! without a space; bad `-D`.

mod common;

use common::{text, tlc};

const GEMM: &str = "bench/gemm_tunable.tir";
const COPY: &str = "compiler/tests/plan/copy_tunable.tir";

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

/// The first place at 4096³ on sm_90a, by hand. 128×128 tiles: 32·32 = 1024 blocks;
/// 64×128 or 128×64: 2048. Resident blocks per SM: the fragment `C_local` (128·128·4 bytes
/// = 16384 registers for 128×128, 8192 for the halves) allows 65536/16384 = 4 (or 8); the
/// planned kernel's 256 threads (a producer warpgroup added to 128, or 256 + 128 = 384)
/// allow 8 (or 5); shared memory, at most 41984 + 1024 bytes for block_K = 16 with 5 stages,
/// allows 233472/43008 = 5 and more. So 128×128 gets at most 4 per SM: 528 slots, 2 waves
/// with 1024 − 528 = 496 in the last (93.9%); 2048 blocks on 8·132 = 1056 slots are 2 waves
/// with 992 (93.9%, the same fraction, 496/528 = 992/1056). No config fits in one wave
/// (1024 > 8·132 would need 8 resident 128×128 blocks). Among the 2-wave, 93.9% configs the
/// 128×128 tiles have the fewest blocks along x (32), then most stages (5), then the most
/// shared bytes: block_K = 16 with 5 stages (41984 bytes; block_K = 32 with 5 stages is
/// 82944 bytes, 2 per SM: 264 slots, 4 waves), threads = 128 before 256 (the space's order).
#[test]
fn the_top_config_at_4096_cubed() {
    let json = plan(&[
        GEMM, "-D", "M=4096", "-D", "N=4096", "-D", "K=4096", "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    let first = &v["ranked"][0];
    assert_eq!(
        first["config"],
        serde_json::json!({"threads": 128, "block_M": 128, "block_N": 128, "block_K": 16,
                           "num_stages": 5})
    );
    assert_eq!(first["waves"], 2);
    assert_eq!(first["last_wave_blocks"], 496);
    assert_eq!(first["last_wave_slots"], 528);
    assert_eq!(first["resident_per_sm"], 4);
    assert_eq!(v["ranked"].as_array().map(Vec::len), Some(36));
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
            "dropped (1):\n  block=256: pass `plan-shared-memory`: 8:5: this kernel needs \
             262144 bytes of shared memory, more than the 166912 a block may have on sm_80\n"
        ),
        "{out}"
    );
    // ⌈100000/128⌉ = 782 blocks, 1 per SM: ⌈782/108⌉ = 8 waves, 26 in the last; 64 rows:
    // 1563 blocks, 2 per SM: 8 waves, 51/216 — a less full last wave.
    let rows: Vec<&str> = out.lines().filter(|l| l.contains("block=")).collect();
    assert!(
        rows[0].contains("block=128") && rows[0].contains("26/108"),
        "{out}"
    );
    assert!(
        rows[1].contains("block=64") && rows[1].contains("51/216"),
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
