//! The tuning space through the commands (docs/ir.md, "Tuning space"): `fmt` keeps it,
//! `check` / `compile` / `run` bind its defaults, `-D` binds any tunable, and a config that
//! breaks a constraint is a located error.

use crate::common;

use common::{text, tlc};

const FILE: &str = "bench/gemm_tunable.tir";

#[test]
fn fmt_keeps_the_space_and_defines_bind_it() {
    let out = tlc(&["fmt", FILE]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let printed = text(&out.stdout);
    assert!(printed.contains("num_stages = T.tunable([3, 4, 5], default=4)\n"));
    assert!(
        printed.contains("for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):")
    );
    // One tunable named binds the whole space (the others to their defaults).
    let out = tlc(&["fmt", FILE, "-D", "block_K=16"]);
    let bound = text(&out.stdout);
    assert!(!bound.contains("T.tunable"), "{bound}");
    assert!(
        bound.contains("T.alloc_shared((128, 16), \"float16\")"),
        "{bound}"
    );
    assert!(bound.contains("num_stages=4):"), "{bound}");
}

#[test]
fn compile_binds_the_defaults_or_the_defines() {
    let default = tlc(&["compile", FILE, "--target", "sm_90a", "-o", "-"]);
    assert!(default.status.success(), "{}", text(&default.stderr));
    let spelled = tlc(&[
        "compile",
        FILE,
        "--target",
        "sm_90a",
        "-o",
        "-",
        "-D",
        "threads=256",
        "-D",
        "block_M=128",
        "-D",
        "block_N=128",
        "-D",
        "block_K=32",
        "-D",
        "num_stages=4",
    ]);
    assert_eq!(
        text(&default.stdout),
        text(&spelled.stdout),
        "the defaults, spelled out"
    );
    let other = tlc(&[
        "compile",
        FILE,
        "--target",
        "sm_90a",
        "-o",
        "-",
        "-D",
        "num_stages=3",
    ]);
    assert!(other.status.success(), "{}", text(&other.stderr));
    assert_ne!(text(&default.stdout), text(&other.stdout));
}

#[test]
fn a_broken_constraint_is_a_located_error() {
    let dir = std::env::temp_dir().join(format!("tlc-tuning-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("constrained.tir");
    let source = std::fs::read_to_string(common::root().join(FILE)).expect("read");
    let source = source.replace(
        "num_stages = T.tunable([3, 4, 5], default=4)\n",
        "num_stages = T.tunable([3, 4, 5], default=4)\nT.tune_constraint(block_K * num_stages <= 128)\n",
    );
    std::fs::write(&path, source).expect("write");
    let p = path.to_str().expect("utf-8");
    let out = tlc(&["check", p, "-D", "block_K=32", "-D", "num_stages=5"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.starts_with(&format!(
            "{p}:12:19: error: the config threads=256 block_M=128 block_N=128 block_K=32 num_stages=5 breaks this constraint"
        )),
        "{stderr}"
    );
    assert!(stderr.contains("^^^^"), "{stderr}");
    let ok = tlc(&["check", p, "-D", "block_K=32", "-D", "num_stages=4"]);
    assert!(ok.status.success(), "{}", text(&ok.stderr));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `tlc tune` refuses what it cannot tune before it looks for a GPU (CI has none): a kernel
/// without a tuning space, `--top 0`. (Its GPU runs are recorded in docs/perf.md.)
#[test]
fn tune_refuses_kernels_without_a_space() {
    let out = tlc(&["tune", "tests/cases/valid/thread_regions.tir", "-D", "M=4"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("`thread_regions` declares no tuning space: nothing to tune"),
        "{}",
        text(&out.stderr)
    );
    let out = tlc(&["tune", FILE, "-D", "M=64", "--top", "0"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("`--top` must be at least 1"));
}

/// A kernel that is no GEMM (flash attention) is tuned against its own default config: the
/// dry run plans and compiles its space (no GPU), says what each config will be checked
/// against, and prints no GEMM shape.
#[test]
fn tune_takes_any_kernel_with_a_space() {
    let out = attention_dry_run(&["--target", "sm_90a", "--top", "3", "-D", "seq_len=256"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}\n{stdout}", text(&out.stderr));
    assert!(
        stdout.contains(
            "dry run: tune `flash_attention` at batch=1 heads=2 kv_heads=1 seq_len=256 as sm_90a"
        ) && stdout.contains("checked against the default config's")
            && !stdout.contains("(shape "),
        "{stdout}"
    );
    let planned = stdout
        .lines()
        .filter(|l| l.contains("block_M=") && l.contains("ok ("))
        .count();
    assert_eq!(planned, 3, "{stdout}");
}

/// Several shapes at once, as `tlc bench --vs copy` takes them: a repeated `-D` and
/// `--shapes`, each shape planned (and on a GPU timed and stored) on its own, in order.
#[test]
fn tune_takes_several_shapes() {
    let out = attention_dry_run(&["--top", "1", "--shapes", "seq_len=256;seq_len=512"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}\n{stdout}", text(&out.stderr));
    let heads: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("dry run: tune `flash_attention`"))
        .collect();
    assert_eq!(heads.len(), 2, "{stdout}");
    assert!(
        heads[0].contains("at seq_len=256 batch=1 heads=2 kv_heads=1"),
        "{}",
        heads[0]
    );
    assert!(heads[1].contains("seq_len=512"), "{}", heads[1]);
    // A name bound both ways is refused before any work.
    let out = attention_dry_run(&["-D", "seq_len=128", "--shapes", "seq_len=256"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("is bound both by `-D` and by `--shapes`"),
        "{}",
        text(&out.stderr)
    );
}

/// A tunable given two values is refused (its shapes would share one cache entry); the same
/// shape given twice is tuned once.
#[test]
fn tune_refuses_a_swept_tunable_and_tunes_a_shape_once() {
    let out = attention_dry_run(&[
        "-D",
        "seq_len=256",
        "-D",
        "threads=128",
        "-D",
        "threads=256",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr)
            .contains("`threads` is a tunable of `flash_attention` and is given two values"),
        "{}",
        text(&out.stderr)
    );
    let out = attention_dry_run(&["--top", "1", "--shapes", "seq_len=256;seq_len=256"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(stdout.matches("dry run: tune").count(), 1, "{stdout}");
}

/// `tlc tune examples/flash_attention.tir --dry-run -D batch=1 -D heads=2 -D kv_heads=1`
/// with `args` after.
fn attention_dry_run(args: &[&str]) -> std::process::Output {
    let mut all = vec![
        "tune",
        "examples/flash_attention.tir",
        "--dry-run",
        "-D",
        "batch=1",
        "-D",
        "heads=2",
        "-D",
        "kv_heads=1",
    ];
    all.extend_from_slice(args);
    tlc(&all)
}

/// `--json` prints one JSON object per shape: with `--dry-run`, the configs that compiled
/// (plan rank, config, PTX size) and the dropped ones with their reasons.
#[test]
fn tune_dry_run_prints_json() {
    let out = attention_dry_run(&[
        "--top",
        "2",
        "--json",
        "-D",
        "seq_len=256",
        "-D",
        "seq_len=512",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "one line per shape: {stdout}");
    for (line, len) in lines.iter().zip([256, 512]) {
        let v: serde_json::Value = serde_json::from_str(line).expect("JSON");
        assert_eq!(v["dry_run"], true);
        assert_eq!(v["kernel"], "flash_attention");
        assert!(
            v["dims"]
                .as_str()
                .is_some_and(|d| d.contains(&format!("seq_len={len}"))),
            "{v}"
        );
        let ready = v["ready"].as_array().expect("ready");
        assert!(!ready.is_empty() && ready.len() <= 2, "{v}");
        assert_eq!(ready[0]["plan_rank"], 1);
        assert!(ready[0]["config"]["block_M"].is_i64(), "{v}");
        assert!(ready[0]["ptx_lines"].as_u64() > Some(100), "{v}");
    }
}

/// A dry run in which no config compiles (every one needs more shared memory than the
/// target has) prints why each was dropped and exits 1: nothing would be timed.
#[test]
fn a_dry_run_with_nothing_to_time_fails() {
    let dir = std::env::temp_dir().join(format!("tlc-dry-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("too_big.tir");
    std::fs::write(
        &file,
        r#"N = T.symbolic("N")
block = T.tunable([512, 1024], default=512)

@T.prim_func
def too_big(A: T.Tensor((N, N), "float32"), B: T.Tensor((N, N), "float32")):
    with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
        S = T.alloc_shared((block, block), "float32")
        T.copy(A[bx * block, 0], S)
        T.copy(S, B[bx * block, 0])
"#,
    )
    .expect("write kernel");
    let path = file.to_str().expect("utf-8 path");
    let out = tlc(&[
        "tune",
        path,
        "-D",
        "N=2048",
        "--dry-run",
        "--target",
        "sm_90a",
    ]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert!(
        text(&out.stdout).contains("0 would be timed"),
        "{}",
        text(&out.stdout)
    );
    assert!(
        text(&out.stderr).contains("no config compiled at N=2048: nothing would be timed"),
        "{}",
        text(&out.stderr)
    );
}

/// `tlc tune --input NAME=X.npy` replaces a parameter's seeded data. The files are read and
/// checked before any GPU work (a dry run checks them): a name that is no parameter, or a
/// shape other than the parameter's at the tuned dims, is an error located at the kernel;
/// the GEMM kinds, which make their own inputs, refuse `--input`.
#[test]
fn tune_inputs_are_checked_before_the_gpu() {
    use tlc_ir::interp::{write_npy, Tensor};
    use tlc_ir::DType;
    let dir = std::env::temp_dir().join(format!("tlc-tune-input-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let npy = |name: &str, shape: &[usize]| {
        let n: usize = shape.iter().product();
        let t = Tensor::from_f64(DType::Float16, shape, &vec![0.25; n]).expect("tensor");
        let path = dir.join(name);
        std::fs::write(&path, write_npy(&t).expect("npy")).expect("write npy");
        path.to_str().expect("utf-8 path").to_string()
    };
    // Q at batch 1, seq_len 256, 2 heads, dim 128.
    let good = format!("Q={}", npy("q.npy", &[1, 256, 2, 128]));
    let short = format!("Q={}", npy("q_short.npy", &[1, 255, 2, 128]));
    let other = format!("X={}", npy("x.npy", &[4]));
    let base = ["--target", "sm_90a", "--top", "1", "-D", "seq_len=256"];
    let with = |input: &str| {
        let mut args = base.to_vec();
        args.extend(["--input", input]);
        attention_dry_run(&args)
    };
    let out = with(&good);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = with(&short);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains(
            "input `Q` has shape [1, 255, 2, 128], the parameter [1, 256, 2, 128] at batch=1 \
             heads=2 kv_heads=1 seq_len=256"
        ),
        "{}",
        text(&out.stderr)
    );
    let out = with(&other);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("`X` is not a parameter of `flash_attention`"),
        "{}",
        text(&out.stderr)
    );
    let out = tlc(&[
        "tune",
        FILE,
        "-D",
        "M=64",
        "-D",
        "N=64",
        "-D",
        "K=64",
        "--dry-run",
        "--input",
        &good,
    ]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains(
            "`--input` gives data to kernels checked against their default config; `gemm_tunable` \
             is checked against cuBLAS on inputs of its own"
        ),
        "{}",
        text(&out.stderr)
    );
}
