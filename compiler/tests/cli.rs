//! The `tlc` binary as users run it: exit codes, output streams, error format, speed on bad
//! input.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

fn tlc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tlc"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("run tlc")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn every_malformed_input_exits_1_fast_with_a_located_error() {
    let dir = root().join("tests/cases/malformed");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("list malformed cases")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    paths.sort();
    assert!(
        paths.len() >= 30,
        "the malformed corpus shrank to {}",
        paths.len()
    );
    for path in paths {
        let rel = path
            .strip_prefix(root())
            .expect("inside the workspace")
            .to_string_lossy()
            .into_owned();
        let start = Instant::now();
        let out = tlc(&["check", &rel]);
        let took = start.elapsed();
        let stderr = text(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{rel}: exit status {:?}\n{stderr}",
            out.status
        );
        assert!(took < Duration::from_secs(1), "{rel}: took {took:?}");
        assert!(!stderr.contains("panicked"), "{rel}: panicked\n{stderr}");
        assert!(
            stderr.starts_with(&format!("{rel}:")),
            "{rel}: bad header\n{stderr}"
        );
        assert!(out.stdout.is_empty(), "{rel}: wrote to stdout");
    }
}

#[test]
fn fmt_prints_the_three_seed_spellings_identically_and_is_idempotent() {
    let outs: Vec<String> = [
        "seed000_dsl",
        "seed000_tvmscript_0_1_x",
        "seed000_tvmscript_0_1_15",
    ]
    .iter()
    .map(|n| {
        let out = tlc(&["fmt", &format!("tests/cases/valid/{n}.tir")]);
        assert!(out.status.success(), "{n}: {}", text(&out.stderr));
        text(&out.stdout)
    })
    .collect();
    assert_eq!(outs[0], outs[1]);
    assert_eq!(outs[0], outs[2]);
    let tmp = std::env::temp_dir().join(format!("tlc-fmt-{}.tir", std::process::id()));
    std::fs::write(&tmp, &outs[0]).expect("write temp file");
    let again = tlc(&["fmt", tmp.to_str().expect("utf-8 temp path")]);
    let _ = std::fs::remove_file(&tmp);
    assert_eq!(text(&again.stdout), outs[0], "fmt is not idempotent");
}

#[test]
fn check_accepts_examples_silently() {
    for example in ["examples/gemm_seed000.tir", "examples/elementwise_add.tir"] {
        let out = tlc(&["check", example]);
        assert!(out.status.success(), "{example}: {}", text(&out.stderr));
        assert!(out.stdout.is_empty() && out.stderr.is_empty());
    }
}

#[test]
fn defines_bind_dims_and_typos_are_errors() {
    let out = tlc(&["fmt", "examples/elementwise_add.tir", "-D", "N=1000"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("T.Tensor((1000,), \"float32\")"),
        "{}",
        text(&out.stdout)
    );
    let out = tlc(&["check", "examples/elementwise_add.tir", "-D", "Q=3"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("names no symbolic dimension"),
        "{}",
        text(&out.stderr)
    );
    let out = tlc(&["check", "examples/elementwise_add.tir", "-D", "N"]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn missing_file_and_help() {
    let out = tlc(&["check", "no/such/file.tir"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).starts_with("no/such/file.tir: error: cannot read file"));
    let out = tlc(&["--help"]);
    assert!(out.status.success());
    let help = text(&out.stdout);
    assert!(help.contains("fmt") && help.contains("check"), "{help}");
}
