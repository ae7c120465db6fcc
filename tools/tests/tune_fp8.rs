//! `tlc tune` on an FP8 block-scaled GEMM (DeepGEMM's `gemm_fp8_fp8_bf16_nt`, issue 17)
//! without a GPU: the signature selects the FP8 check (as `tlc bench` does), `--dry-run`
//! plans, compiles and assembles the example's space at a DeepGEMM shape for sm_90a, and a
//! wrong signature is a located refusal before any GPU is looked for.

use crate::common;

use common::{text, tlc};

const FP8: &str = "examples/gemm_fp8_blockscaled.tir";
const DEEPGEMM_SHAPE: [&str; 6] = ["-D", "M=4096", "-D", "N=7168", "-D", "K=16384"];

/// `tlc tune ARGS…` with the DeepGEMM shape appended.
fn tune(args: &[&str]) -> std::process::Output {
    let mut all = vec!["tune"];
    all.extend_from_slice(args);
    all.extend_from_slice(&DEEPGEMM_SHAPE);
    tlc(&all)
}

/// The config rows of a dry run's table: `(plan rank, config)` of each `ok` line.
fn compiled(stdout: &str) -> Vec<(usize, String)> {
    stdout
        .lines()
        .filter(|l| l.contains(" ok ("))
        .map(|l| {
            let mut words = l.split_whitespace();
            let rank = words.next().and_then(|w| w.parse().ok()).unwrap_or(0);
            (
                rank,
                l.split(" ok (").next().unwrap_or("").trim().to_string(),
            )
        })
        .collect()
}

/// The number just before `suffix` in `text` (`"12 would be timed"` → 12).
fn count_before(text: &str, suffix: &str) -> Option<usize> {
    let at = text.find(suffix)?;
    text[..at].split_whitespace().last()?.parse().ok()
}

#[test]
fn the_fp8_space_plans_and_compiles_for_sm_90a_at_a_deepgemm_shape() {
    let out = tune(&[FP8, "--dry-run", "--target", "sm_90a"]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stderr}\n{stdout}");
    // The FP8 path, at the bound shape, for sm_90a on the H100's SM count.
    assert!(
        stdout.contains("tune `gemm_fp8_blockscaled` at M=4096 N=7168 K=16384 (shape 4096x7168x16384) as sm_90a on 132 SMs: FP8 block-scaled GEMM, checked against the dequantized float32 reference"),
        "{stdout}"
    );
    // 3 (block_M, threads) × 4 block_N × 4 num_stages.
    assert_eq!(count_before(&stdout, " configs, "), Some(48), "{stdout}");
    let rows = compiled(&stdout);
    assert_eq!(
        count_before(&stdout, " would be timed"),
        Some(rows.len()),
        "{stdout}"
    );
    // The plan's best configs compile (and assemble without spills, where ptxas is found):
    // the default tile among them.
    assert!(rows.len() >= 8, "{stdout}");
    assert_eq!(rows[0].0, 1, "{stdout}");
    assert!(
        rows.iter().any(|(_, c)| c.contains("block_M=128")
            && c.contains("block_N=128")
            && c.contains("threads=256")),
        "{stdout}"
    );
    // Everything else is accounted for as dropped, with a reason.
    let dropped = stdout
        .split_once("dropped (")
        .map_or(Some(0), |(_, rest)| rest.split(')').next()?.parse().ok());
    assert_eq!(dropped.map(|d| d + rows.len()), Some(48), "{stdout}");
}

#[test]
fn top_keeps_the_best_ranked_and_f16_gemms_keep_their_check() {
    let out = tune(&[FP8, "--dry-run", "--top", "2"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let rows = compiled(&stdout);
    assert!(count_before(&stdout, " planned and compiled").is_some_and(|n| n == 2));
    assert!(rows.iter().all(|(rank, _)| *rank <= 2), "{stdout}");
    // An f16 GEMM goes the cuBLAS way.
    let out = tune(&["bench/gemm_tunable.tir", "--dry-run", "--top", "1"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        stdout.contains("float16 GEMM, checked against cuBLAS (rel err limit 1e-2)"),
        "{stdout}"
    );
}

/// A copy of the example with `from` replaced by `to`, in a temporary file.
fn variant(from: &str, to: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let source = std::fs::read_to_string(common::root().join(FP8)).expect("the example");
    assert!(source.contains(from), "`{from}` is in the example");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("fp8.tir");
    std::fs::write(&path, source.replacen(from, to, 1)).expect("write the variant");
    (dir, path)
}

/// The 1-based line and column of `needle` in the variant's text.
fn position(path: &std::path::Path, needle: &str) -> (usize, usize) {
    let source = std::fs::read_to_string(path).expect("the variant");
    let (i, line) = source
        .lines()
        .enumerate()
        .find(|(_, l)| l.contains(needle))
        .expect("the needle is in the variant");
    (i + 1, line.find(needle).unwrap_or(0) + 1)
}

#[test]
fn a_wrong_fp8_signature_is_refused_located_before_the_gpu() {
    let (_dir, path) = variant(
        "C: T.Tensor((M, N), \"bfloat16\")",
        "C: T.Tensor((M, N), \"float16\")",
    );
    let (line, col) = position(&path, "C: T.Tensor");
    let file = path.to_string_lossy().into_owned();
    // With and without --dry-run: the same refusal, and no word of a GPU.
    for dry in [true, false] {
        let mut args = vec![file.as_str()];
        if dry {
            args.push("--dry-run");
        }
        let out = tune(&args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.starts_with(&format!("{file}:{line}:{col}: error: ")),
            "{stderr}"
        );
        assert!(
            stderr
                .contains("parameter 3 (`C`) must be the bfloat16 matrix C (M, N); it is float16"),
            "{stderr}"
        );
        assert!(!stderr.contains("GPU"), "{stderr}");
    }
    // A scale extent that disagrees with the bound shape (K / 128 floors, 16384 / 128 = 128
    // agrees; 7000 does not): located at the extent.
    let (_dir, path) = variant(
        "scales_a: T.Tensor((M, T.ceildiv(K, 128))",
        "scales_a: T.Tensor((M, K // 128)",
    );
    let file = path.to_string_lossy().into_owned();
    let out = tlc(&[
        "tune",
        &file,
        "--dry-run",
        "-D",
        "M=64",
        "-D",
        "N=2112",
        "-D",
        "K=7000",
    ]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let (line, _) = position(&path, "scales_a: T.Tensor");
    assert!(stderr.starts_with(&format!("{file}:{line}:")), "{stderr}");
    assert!(
        stderr.contains("this extent of `scales_a` is 54, not 55"),
        "{stderr}"
    );
}
