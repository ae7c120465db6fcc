//! The command line's limits on what it is given: the source's size, `-D` bindings that
//! contradict each other, `.npy` inputs that do not fit their parameter, tuning spaces too
//! large to enumerate — each an error that says what is wrong, located where there is a
//! place to point at (`FILE:LINE:COL: error: …`), exit 1, never a hang.

use crate::common;

use common::{text, tlc};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Writes `contents` to a fresh file under the temporary directory.
fn temp_file(name: &str, contents: &[u8]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tlc-cli-limits-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join(name);
    std::fs::write(&path, contents).expect("write temp file");
    path
}

#[test]
fn an_endless_source_is_refused_at_the_cap() {
    let start = Instant::now();
    let out = tlc(&["check", "/dev/zero"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stderr),
        "/dev/zero: error: source is larger than 64 MiB\n"
    );
    assert!(start.elapsed() < Duration::from_secs(30), "read too long");
}

#[test]
fn conflicting_defines_are_refused() {
    let out = tlc(&[
        "check",
        "examples/elementwise_add.tir",
        "-D",
        "N=64",
        "-D",
        "N=128",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "error: `-D N=128` conflicts with `-D N=64`: `N` is bound twice\n"
    );
    // The same value twice says nothing new, and is no conflict.
    let out = tlc(&[
        "check",
        "examples/elementwise_add.tir",
        "-D",
        "N=64",
        "-D",
        "N=64",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

/// Every way an `--input` can be wrong is an error at the parameter's declaration, the
/// way a wrong shape always was.
#[test]
fn input_errors_are_located_at_the_parameter() {
    use tlc_ir::interp::{write_npy, Tensor};
    use tlc_ir::DType;
    let f16 =
        write_npy(&Tensor::from_f64(DType::Float16, &[64], &[0.5; 64]).expect("t")).expect("npy");
    let f32_short =
        write_npy(&Tensor::from_f64(DType::Float32, &[63], &[0.5; 63]).expect("t")).expect("npy");
    let good =
        write_npy(&Tensor::from_f64(DType::Float32, &[64], &[0.5; 64]).expect("t")).expect("npy");
    let truncated = &good[..good.len() - 5];
    let cases: Vec<(PathBuf, &str)> = vec![
        (
            temp_file("f16.npy", &f16),
            "expected dtype `<f4` (float32), found `<f2`",
        ),
        (
            temp_file("short.npy", &f32_short),
            "input `A` has shape (63,), expected (64,)",
        ),
        (
            temp_file("truncated.npy", truncated),
            "the header says shape (64,) (256 bytes of data) but the file holds 251 bytes",
        ),
        (
            temp_file("garbage.npy", b"garbage"),
            "not a valid .npy file",
        ),
        (
            PathBuf::from("/no/such/file.npy"),
            "cannot read `/no/such/file.npy`",
        ),
    ];
    for (path, expected) in cases {
        let arg = format!("A={}", path.display());
        let out = tlc(&[
            "run",
            "examples/elementwise_add.tir",
            "--interp",
            "-D",
            "N=64",
            "--input",
            &arg,
        ]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{arg}: {stderr}");
        let header = stderr.lines().next().unwrap_or_default();
        // `A: T.Tensor((N,), "float32")`, the first parameter of the example.
        assert!(
            header.starts_with("examples/elementwise_add.tir:") && header.contains(": error: "),
            "{arg}: not located\n{stderr}"
        );
        assert!(stderr.contains(expected), "{arg}: {stderr}");
        assert!(stderr.contains('^'), "{arg}: no caret\n{stderr}");
    }
    let good = temp_file("good.npy", &good);
    let arg = format!("A={}", good.display());
    let out = tlc(&[
        "run",
        "examples/elementwise_add.tir",
        "--interp",
        "--input",
        &arg,
        "--input",
        &arg,
    ]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.starts_with("examples/elementwise_add.tir:")
            && stderr.contains("error: `--input A=…` is given twice"),
        "{stderr}"
    );
    let same_place = |s: &str| {
        s.lines()
            .next()
            .unwrap_or_default()
            .split(": error")
            .next()
            .map(str::to_string)
    };
    let wrong_shape = tlc(&[
        "run",
        "examples/elementwise_add.tir",
        "--interp",
        "-D",
        "N=65",
        "--input",
        &arg,
    ]);
    assert_eq!(same_place(&stderr), same_place(&text(&wrong_shape.stderr)));
}

#[test]
fn a_tuning_space_too_large_to_enumerate_is_located() {
    let candidates = |n: i64, step: i64| {
        (1..=n)
            .map(|i| (i * step).to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    // 40 × 40 × 41 = 65600 configs: the third group takes it past 65536.
    let src = format!(
        "N = T.symbolic(\"N\")\na = T.tunable([{}], default=1)\nb = T.tunable([{}], default=1)\nc = T.tunable([{}], default=1)\n\n@T.prim_func\ndef f(A: T.Tensor((N,), \"float32\")):\n    with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:\n        for i in T.Parallel(128):\n            if bx * 128 + i < N:\n                A[bx * 128 + i] = A[bx * 128 + i] + a + b + c\n",
        candidates(40, 1),
        candidates(40, 1),
        candidates(41, 1)
    );
    let path = temp_file("huge_space.tir", src.as_bytes());
    let p = path.to_str().expect("utf-8 path");
    let out = tlc(&["plan", p, "-D", "N=4096"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.starts_with(&format!(
            "{p}:4:1: error: with this group the tuning space has more than 65536 configs, the most tlc enumerates"
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains("the product of the groups' candidate counts: 40 × 40 × 41"),
        "{stderr}"
    );
    // `check` binds the defaults and has nothing to enumerate.
    let out = tlc(&["check", p]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

/// A `-D` value makes a grid or a shape constant: past CUDA's limits it is the verifier's
/// located error (K3, B6), in every command, not a launch failure later.
#[test]
fn a_binding_past_cudas_limits_is_located_at_the_kernel() {
    // 2^41 elements: a grid of 2^31 blocks of 1024, one past the limit along x.
    for command in ["check", "compile"] {
        let mut args = vec![
            command,
            "examples/elementwise_add.tir",
            "-D",
            "N=2199023255552",
        ];
        if command == "compile" {
            args.extend(["-o", "-"]);
        }
        let out = tlc(&args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{command}: {stderr}");
        assert!(
            stderr.starts_with(
                "examples/elementwise_add.tir:11:19: error: a grid of 2147483648 blocks along x is more than a launch can have"
            ),
            "{command}: {stderr}"
        );
        assert_eq!(stderr.matches("error:").count(), 1, "{stderr}");
    }
    // 2^47 float32 elements: 2^49 bytes per tensor.
    let out = tlc(&[
        "check",
        "examples/elementwise_add.tir",
        "-D",
        "N=140737488355328",
    ]);
    let stderr = text(&out.stderr);
    assert!(
        stderr.starts_with(
            "examples/elementwise_add.tir:7:5: error: `A` has 140737488355328 elements (562949953421312 bytes), more than a buffer can hold"
        ),
        "{stderr}"
    );
}
