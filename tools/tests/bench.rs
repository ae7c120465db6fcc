//! `tlc bench` through the binary. Everything before the GPU is touched (flags, `--sweep`,
//! `--shapes`, the GEMM signature, shapes, unbound dims) is checked on any machine; without a
//! driver or GPU the command must fail with a clear error and exit 1, never panic. On a GPU
//! machine the naive GEMM runs against cuBLAS and must pass the check, and `--vs copy` runs
//! its kernels.

use crate::common;

use common::{text, tlc};
use std::process::Output;

const NAIVE: &str = "tools/tests/bench/gemm_naive.tir";
const RMS: &str = "tests/tilelang/norm_rms.tir";

fn has_gpu() -> bool {
    tlc_runtime::driver_available() && tlc_runtime::Gpu::count() > 0
}

fn fails_with(out: &Output, says: &str) {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(says), "expected `{says}` in:\n{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn bench_runs_or_says_there_is_no_gpu() {
    let out = tlc(&[
        "bench",
        NAIVE,
        "--vs",
        "cublas",
        "--sweep",
        "64,48,32; 100,37,129",
        "--warmup",
        "1",
        "--iters",
        "3",
        "--csv",
    ]);
    if has_gpu() {
        assert!(out.status.success(), "{}", text(&out.stderr));
        let csv = text(&out.stdout);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 3, "{csv}");
        assert!(lines[0].starts_with("m,n,k,rel_err"), "{csv}");
        assert!(lines[1].starts_with("64,48,32,") && lines[1].contains(",ok,"));
        assert!(lines[2].starts_with("100,37,129,") && lines[2].contains(",ok,"));
    } else {
        fails_with(&out, "`tlc bench` needs a GPU");
        assert!(text(&out.stdout).is_empty());
    }
}

#[test]
fn bad_flags_are_reported_before_the_gpu() {
    let cases: &[(&[&str], &str)] = &[
        (&["--sweep", "64,64"], "expected three sizes `M,N,K`"),
        (&["--sweep", "64,0,64"], "N = `0`"),
        (&["--sweep", "64,64,64;;"], "shape 2 is ``"),
        (
            &["--sweep", "64,64,64", "--iters", "0"],
            "`--iters` must be at least 1",
        ),
        (
            &["--sweep", "64,64,64", "--target", "sm_70"],
            "unknown target",
        ),
        // No sweep and symbolic dims: nothing to run.
        (&[], "the shape of `A` is not constant"),
        (&["-D", "M=64"], "the shape of `A` is not constant"),
        // A sweep that contradicts a `-D` binding.
        (
            &["-D", "K=16", "--sweep", "64,64,64"],
            "shape 64x64x64: this extent of `A` is 16, not 64",
        ),
        (&["-D", "Q=1", "--sweep", "64,64,64"], "Q"),
    ];
    for (flags, says) in cases {
        let mut args = vec!["bench", NAIVE];
        args.extend_from_slice(flags);
        fails_with(&tlc(&args), says);
    }
    // Clap's own usage errors: exit 2.
    for flags in [
        &["--vs", "cutlass"][..],
        &["--warmup", "-1"],
        &["--iters", "x"],
    ] {
        let mut args = vec!["bench", NAIVE];
        args.extend_from_slice(flags);
        let out = tlc(&args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{flags:?}: {}",
            text(&out.stderr)
        );
    }
}

#[test]
fn only_gemms_are_benchmarked() {
    let out = tlc(&["bench", "examples/elementwise_add.tir", "-D", "N=64"]);
    fails_with(&out, "`tlc bench` runs GEMMs C = A @ B: parameter 1 (`A`)");
    // The error points at the parameter.
    assert!(text(&out.stderr).contains("examples/elementwise_add.tir:7:5"));
    let out = tlc(&[
        "bench",
        "examples/transpose.tir",
        "-D",
        "M=64",
        "-D",
        "N=64",
    ]);
    fails_with(&out, "must take three matrices");
}

/// A kernel with constant shapes runs its own shape; `--specialize` compiles one kernel per
/// shape. Without a GPU both stop at the GPU check, after the shape checks passed.
#[test]
fn constant_and_specialized_shapes() {
    for args in [
        &["bench", NAIVE, "-D", "M=64", "-D", "N=32", "-D", "K=16"][..],
        &["bench", NAIVE, "--specialize", "--sweep", "64,32,16;17,9,5"],
    ] {
        let out = tlc(args);
        if has_gpu() {
            assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
            let table = text(&out.stdout);
            assert!(table.contains("vs cuBLAS"), "{table}");
            assert!(table.contains("TFLOP/s"), "{table}");
        } else {
            fails_with(&out, "`tlc bench` needs a GPU");
        }
    }
}

/// `--vs copy`: any kernel, each shape compiled with its dims bound; repeated `-D` sweeps.
#[test]
fn bandwidth_runs_or_says_there_is_no_gpu() {
    let out = tlc(&[
        "bench", RMS, "--vs", "copy", "-D", "M=64", "-D", "M=100", "--warmup", "1", "--iters", "3",
        "--csv",
    ]);
    if has_gpu() {
        assert!(out.status.success(), "{}", text(&out.stderr));
        let csv = text(&out.stdout);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 3, "{csv}");
        assert!(lines[0].starts_with("M,bytes,tlc_ms,"), "{csv}");
        // A and B: M x 1024 float32 each.
        assert!(lines[1].starts_with("64,524288,"), "{csv}");
        assert!(lines[2].starts_with("100,819200,"), "{csv}");
    } else {
        fails_with(&out, "`tlc bench` needs a GPU");
        assert!(text(&out.stdout).is_empty());
    }
    // Not only GEMMs; and a GEMM is benchmarked as any other kernel. `--shapes` gives shapes.
    for args in [
        &[
            "bench",
            "examples/elementwise_add.tir",
            "--vs",
            "copy",
            "--shapes",
            "N=1000; N=4096",
        ][..],
        &[
            "bench", NAIVE, "--vs", "copy", "-D", "M=64", "-D", "N=32", "-D", "K=16",
        ],
        &[
            "bench",
            NAIVE,
            "--vs",
            "copy",
            "--shapes",
            "M=64,N=32;M=17,N=9",
            "-D",
            "K=5",
        ],
    ] {
        let mut args = args.to_vec();
        args.extend(["--warmup", "1", "--iters", "2"]);
        let out = tlc(&args);
        if has_gpu() {
            assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
            let table = text(&out.stdout);
            assert!(table.contains("vs device-to-device copy"), "{table}");
            assert!(table.contains("copy GB/s"), "{table}");
        } else {
            fails_with(&out, "`tlc bench` needs a GPU");
        }
    }
}

#[test]
fn bandwidth_flags_are_checked_before_the_gpu() {
    let cases: &[(&[&str], &str)] = &[
        (
            &[RMS],
            "`M` not bound: `--vs copy` compiles the kernel with every dim bound",
        ),
        (
            &[NAIVE, "-D", "M=64", "-D", "M=32", "-D", "N=8"],
            "`K` not bound at shape M=64,N=8",
        ),
        (
            &[RMS, "-D", "Q=3"],
            "`Q` names no symbolic dimension or tunable of `rms_norm`",
        ),
        (
            &[RMS, "--shapes", "M=8;N=8"],
            "`N` names no symbolic dimension or tunable of `rms_norm`",
        ),
        (&[RMS, "--shapes", "M=8;;M=9"], "shape 2 is empty"),
        (&[RMS, "--shapes", "M=x"], "`x` is not an integer"),
        (
            &[RMS, "--shapes", "M=8", "-D", "M=9"],
            "`M` is bound both by `-D` and by `--shapes`",
        ),
        (&[RMS, "-D", "M"], "expected NAME=VALUE"),
        (&[RMS, "-D", "M=0"], "must be positive, found 0"),
        (
            &[RMS, "-D", "M=8", "--iters", "0"],
            "`--iters` must be at least 1",
        ),
        (
            &[RMS, "-D", "M=8", "--sweep", "1,1,1"],
            "`--sweep` is for `--vs cublas`",
        ),
        (
            &[RMS, "-D", "M=8", "--specialize"],
            "`--specialize` is for `--vs cublas`",
        ),
        (&[RMS, "-D", "M=8", "--target", "sm_70"], "unknown target"),
    ];
    for (flags, says) in cases {
        let mut args = vec!["bench", "--vs", "copy"];
        args.extend_from_slice(flags);
        let out = tlc(&args);
        fails_with(&out, says);
        assert!(text(&out.stdout).is_empty(), "{flags:?}");
    }
    // Errors point into the file.
    let out = tlc(&["bench", RMS, "--vs", "copy"]);
    assert!(text(&out.stderr).contains("tests/tilelang/norm_rms.tir:16:1"));
    // `--shapes` belongs to `--vs copy`.
    fails_with(
        &tlc(&["bench", NAIVE, "--sweep", "64,64,64", "--shapes", "M=64"]),
        "`--shapes` is for `--vs copy`",
    );
}

const FP8_WRONG: &str = "tools/tests/bench/fp8_wrong.tir";

/// An FP8 block-scaled GEMM (float8 operands, five parameters) goes to the FP8 bench: its
/// shapes are checked before the GPU (the derived scale extents included). On a GPU the
/// deliberately wrong kernel (one element per tile) must fail the check against the
/// dequantized reference, with its NaN count in the row, cuBLASLt timed or said not to be.
#[test]
fn fp8_kernels_are_checked_against_the_dequantized_reference() {
    fails_with(
        &tlc(&["bench", FP8_WRONG]),
        "the shape of `A` is not constant",
    );
    let out = tlc(&["bench", FP8_WRONG, "-D", "K=100", "--sweep", "256,256,512"]);
    fails_with(
        &out,
        "shape 256x256x512: this extent of `A` is 100, not 512",
    );
    assert!(text(&out.stderr).contains("fp8_wrong.tir:10:21"));
    let out = tlc(&[
        "bench",
        FP8_WRONG,
        "--sweep",
        "256,384,512; 200,136,7000",
        "--warmup",
        "1",
        "--iters",
        "3",
    ]);
    if has_gpu() {
        fails_with(&out, "differs from the dequantized float32 reference");
        let table = text(&out.stdout);
        assert!(
            table.contains("bench FP8 block-scaled GEMM `gemm_fp8_wrong`"),
            "{table}"
        );
        // 256x384 has 6 tiles: 98298 of its elements stay NaN.
        assert!(table.contains("98298 NaN  FAIL"), "{table}");
        assert!(
            table.contains("peer: cuBLASLt") || table.contains("no cuBLASLt: not timed"),
            "{table}"
        );
    } else {
        fails_with(&out, "`tlc bench` needs a GPU");
    }
}

/// A float8 parameter in the wrong place is a located refusal naming the expected role.
#[test]
fn fp8_signatures_are_refused_where_they_are_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let source = std::fs::read_to_string(common::root().join(FP8_WRONG)).unwrap();
    let path = dir.path().join("fp8_f16_out.tir");
    std::fs::write(
        &path,
        source.replace(
            "C: T.Tensor((M, N), \"bfloat16\")",
            "C: T.Tensor((M, N), \"float16\")",
        ),
    )
    .unwrap();
    let out = tlc(&["bench", path.to_str().unwrap(), "--sweep", "128,128,128"]);
    fails_with(
        &out,
        "parameter 3 (`C`) must be the bfloat16 matrix C (M, N); it is float16 of rank 2",
    );
    assert!(
        text(&out.stderr).contains("fp8_f16_out.tir:12:5"),
        "{}",
        text(&out.stderr)
    );
}
