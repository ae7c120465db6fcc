//! `tlc bench` through the binary. Everything before the GPU is touched (flags, `--sweep`,
//! the GEMM signature, shapes) is checked on any machine; without a driver or GPU the command
//! must fail with a clear error and exit 1, never panic. On a GPU machine the naive GEMM runs
//! against cuBLAS and must pass the check.

mod common;

use common::{text, tlc};
use std::process::Output;

const NAIVE: &str = "compiler/tests/bench/gemm_naive.tir";

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
