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

/// Writes `src` to a fresh temporary file and returns its path.
fn temp_tir(name: &str, src: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("tlc-{name}-{}.tir", std::process::id()));
    std::fs::write(&path, src).expect("write temp file");
    path
}

#[test]
fn a_zero_size_allocation_is_one_located_error_in_every_command() {
    for alloc in [
        "S = T.alloc_shared((0, 32), \"float16\")\n        T.copy(A[0, 0], S)\n        T.copy(S, A[0:64, 0:32])",
        "S = T.alloc_fragment((0,), \"float32\")\n        T.fill(S, 0)\n        T.copy(S, B[0])",
        "S = T.alloc_local((0,), \"float32\")\n        S[0] = 1.0\n        B[0] = S[0]",
    ] {
        let src = format!(
            "@T.prim_func\ndef f(A: T.Tensor((64, 32), \"float16\"), B: T.Tensor((64,), \"float32\")):\n    with T.Kernel(1, threads=128) as bx:\n        {alloc}\n"
        );
        let path = temp_tir("zero-size", &src);
        let p = path.to_str().expect("utf-8 temp path");
        for args in [
            vec!["check", p],
            vec!["compile", p, "-o", "-"],
            vec!["run", p, "--interp"],
        ] {
            let out = tlc(&args);
            let stderr = text(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{args:?}\n{stderr}");
            assert_eq!(stderr.matches("error:").count(), 1, "{args:?}\n{stderr}");
            assert!(
                stderr.starts_with(&format!("{p}:4:29: error: dimension of `S` must be positive, found 0"))
                    || stderr.starts_with(&format!("{p}:4:31: error: dimension of `S` must be positive, found 0"))
                    || stderr.starts_with(&format!("{p}:4:28: error: dimension of `S` must be positive, found 0")),
                "{args:?}\n{stderr}"
            );
            assert!(stderr.contains('^'), "{stderr}");
            assert!(!stderr.contains("panicked"), "{stderr}");
        }
        let _ = std::fs::remove_file(&path);
    }
}

#[test]
fn non_finite_literals_format_check_and_compile() {
    let src = "@T.prim_func\ndef f(A: T.Tensor((64,), \"float32\"), H: T.Tensor((64,), \"float16\")):\n    with T.Kernel(1, threads=64) as bx:\n        for i in T.Parallel(64):\n            A[i] = T.max(A[i], -T.infinity(\"float32\")) + T.float32(\"nan\") * 0.0\n            H[i] = T.min(H[i], T.float16(\"inf\")) + float(\"-inf\")\n";
    let path = temp_tir("non-finite", src);
    let p = path.to_str().expect("utf-8 temp path");
    let out = tlc(&["fmt", p]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let printed = text(&out.stdout);
    assert!(
        printed.contains("A[i] = T.fma(float(\"nan\"), 0.0, T.max(A[i], float(\"-inf\")))"),
        "{printed}"
    );
    assert!(
        printed.contains("H[i] = T.min(H[i], float(\"inf\")) + float(\"-inf\")"),
        "{printed}"
    );
    let again_path = temp_tir("non-finite-fmt", &printed);
    let again = tlc(&["fmt", again_path.to_str().expect("utf-8 temp path")]);
    assert_eq!(text(&again.stdout), printed, "fmt is not idempotent");
    let out = tlc(&["check", p]);
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "{}",
        text(&out.stderr)
    );
    let out = tlc(&["compile", p, "-o", "-"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let ptx = text(&out.stdout);
    assert!(ptx.contains("0fFF800000"), "no -inf constant in\n{ptx}");
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(&again_path);
}

#[test]
fn tvmscript_typed_literals_format_like_the_dsl() {
    let tvm = "@T.prim_func\ndef f(X: T.Buffer((64,), \"float16\"), Y: T.Buffer((64,), \"float32\")):\n    bx = T.launch_thread(\"blockIdx.x\", 1)\n    tx = T.launch_thread(\"threadIdx.x\", 128)\n    with T.block(\"tilelang_root\"):\n        for i in T.parallel(64):\n            Y[i] = T.Cast(\"float32\", X[i]) * T.float32(0.5)\n";
    let dsl = "@T.prim_func\ndef f(X: T.Tensor((64,), \"float16\"), Y: T.Tensor((64,), \"float32\")):\n    with T.Kernel(1, threads=128) as bx:\n        for i in T.Parallel(64):\n            Y[i] = T.cast(X[i], \"float32\") * 0.5\n";
    let (a, b) = (temp_tir("typed-tvm", tvm), temp_tir("typed-dsl", dsl));
    let fa = tlc(&["fmt", a.to_str().expect("utf-8")]);
    let fb = tlc(&["fmt", b.to_str().expect("utf-8")]);
    assert!(fa.status.success(), "{}", text(&fa.stderr));
    assert_eq!(text(&fa.stdout), text(&fb.stdout));
    let ca = tlc(&["compile", a.to_str().expect("utf-8"), "-o", "-"]);
    let cb = tlc(&["compile", b.to_str().expect("utf-8"), "-o", "-"]);
    assert!(ca.status.success(), "{}", text(&ca.stderr));
    assert_eq!(text(&ca.stdout), text(&cb.stdout));
    let _ = std::fs::remove_file(&a);
    let _ = std::fs::remove_file(&b);
}

#[test]
fn tvmscript_thread_variables_compile_or_say_what_to_write() {
    let ok = "@T.prim_func\ndef f(A: T.Buffer((128,), \"float32\")):\n    bx = T.launch_thread(\"blockIdx.x\", 1)\n    tx = T.launch_thread(\"threadIdx.x\", 128)\n    with T.block(\"tilelang_root\"):\n        A[tx] = A[tx] * T.float32(2)\n";
    let path = temp_tir("thread-var", ok);
    let p = path.to_str().expect("utf-8");
    let out = tlc(&["fmt", p]);
    assert!(
        text(&out.stdout).contains("for tx in T.thread_binding(128, thread=\"threadIdx.x\"):\n            A[tx] = A[tx] * 2\n"),
        "{}",
        text(&out.stdout)
    );
    let out = tlc(&["compile", p, "-o", "-"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("%tid.x"),
        "{}",
        text(&out.stdout)
    );
    let _ = std::fs::remove_file(&path);
    let bad = "tests/cases/malformed/thread_var_with_tile_ops.tir";
    let out = tlc(&["check", bad]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stderr.matches("error:").count(), 1, "{stderr}");
    assert!(
        stderr.starts_with(&format!(
            "{bad}:11:45: error: per-thread code (it names `tx`) inside a `T.Parallel` loop"
        )),
        "{stderr}"
    );
    assert!(stderr.contains("index its body with its loop variables"));
}

/// `--sms N` sizes persistent kernels for a GPU of N SMs: the seed (512 tiles at two blocks
/// per SM) launches 2N blocks, and with an SM per tile keeps its grid.
#[test]
fn sms_sizes_persistent_kernels() {
    let grid = |sms: &str| {
        let out = tlc(&[
            "compile",
            "examples/gemm_seed000.tir",
            "--target",
            "sm_90a",
            "--sms",
            sms,
            "-o",
            "-",
        ]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let ptx = text(&out.stdout);
        let manifest = ptx.lines().next().unwrap_or_default().to_string();
        let at = manifest.find("\"grid\":").expect("a grid in the manifest");
        manifest[at..]
            .split(']')
            .next()
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(grid("114"), "\"grid\":[{\"int\":228}");
    assert_eq!(grid("1000"), "\"grid\":[{\"int\":16},{\"int\":32}");
    let zero = tlc(&[
        "compile",
        "examples/gemm_seed000.tir",
        "--sms",
        "0",
        "-o",
        "-",
    ]);
    assert!(!zero.status.success());
}
