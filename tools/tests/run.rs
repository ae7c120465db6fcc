//! `tlc run --interp` as users run it: .npy files in and out, input checking, exit codes.

use crate::common;

use common::tlc;
use std::path::PathBuf;
use std::process::Output;
use tlc_ir::interp::{read_npy_file, write_npy_file, Tensor};
use tlc_ir::DType;

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tlc-run-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

fn stderr(out: &Output) -> String {
    common::text(&out.stderr)
}

#[test]
fn saves_every_parameter_and_reuses_inputs() {
    let dir = temp_dir("save");
    let d = dir.to_str().expect("utf-8 path");
    let out = tlc(&[
        "run",
        "examples/elementwise_add.tir",
        "--interp",
        "-D",
        "N=1000",
        "--seed",
        "3",
        "--save-dir",
        d,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let load =
        |n: &str| read_npy_file(&dir.join(format!("{n}.npy")), DType::Float32).expect("saved npy");
    let (a, b, c) = (load("A"), load("B"), load("C"));
    assert_eq!(c.shape(), &[1000]);
    for i in 0..1000 {
        assert_eq!(
            c.to_f64()[i],
            (a.to_f64()[i] as f32 + b.to_f64()[i] as f32) as f64
        );
    }
    // Given inputs are used as they are: A from a file of ones, B from the earlier run.
    let ones = Tensor::from_f64(DType::Float32, &[1000], &[1.0; 1000]).expect("tensor");
    let ones_path = dir.join("ones.npy");
    write_npy_file(&ones_path, &ones).expect("write npy");
    let a_arg = format!("A={}", ones_path.display());
    let b_arg = format!("B={}", dir.join("B.npy").display());
    let dir2 = temp_dir("save2");
    let out = tlc(&[
        "run",
        "examples/elementwise_add.tir",
        "--interp",
        "--input",
        &a_arg,
        "--input",
        &b_arg,
        "--save-dir",
        dir2.to_str().expect("utf-8"),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let c2 = read_npy_file(&dir2.join("C.npy"), DType::Float32).expect("saved npy");
    for i in 0..1000 {
        assert_eq!(c2.to_f64()[i], (1.0f32 + b.to_f64()[i] as f32) as f64);
    }
}

#[test]
fn bad_inputs_are_clear_errors() {
    let dir = temp_dir("bad");
    let f16_path = dir.join("a16.npy");
    write_npy_file(
        &f16_path,
        &Tensor::from_f64(DType::Float16, &[1000], &[0.5; 1000]).expect("t"),
    )
    .expect("w");
    let short_path = dir.join("short.npy");
    write_npy_file(
        &short_path,
        &Tensor::from_f64(DType::Float32, &[999], &[0.5; 999]).expect("t"),
    )
    .expect("w");
    let cases: [(&str, &str); 4] = [
        (&format!("A={}", f16_path.display()), "float32"),
        (&format!("Q={}", f16_path.display()), "not a parameter"),
        ("A=/no/such.npy", "cannot read `/no/such.npy`"),
        (&format!("A={}", short_path.display()), "`A`"),
    ];
    for (input, expected) in cases {
        let out = tlc(&[
            "run",
            "examples/elementwise_add.tir",
            "--interp",
            "-D",
            "N=1000",
            "--input",
            input,
        ]);
        assert_eq!(out.status.code(), Some(1), "{input}: {}", stderr(&out));
        assert!(stderr(&out).contains(expected), "{input}: {}", stderr(&out));
        assert!(!stderr(&out).contains("panicked"));
    }
}

#[test]
fn run_requires_a_mode() {
    let out = tlc(&["run", "examples/elementwise_add.tir"]);
    assert_eq!(out.status.code(), Some(2), "clap usage error expected");
}
