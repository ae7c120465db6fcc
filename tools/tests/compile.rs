//! `tlc compile` and `tlc run --device` through the binary, as users run them: every example
//! compiles for both targets, ptxas assembles the output, the manifest reads back, the dumps
//! and `--emit=tir` are valid input, and errors are rendered with exit code 1.
//!
//! ptxas is found as in `ptxas.rs` (`TLC_PTXAS`, `.tools/`, `PATH`); when it is nowhere the
//! tests that need it fail and say how to install it.

use crate::common;

use common::{ptxas_log, root, text, tlc};
use std::path::{Path, PathBuf};
use tlc_passes::{default_pipeline, Target};
use tlc_runtime::manifest::Manifest;

const TARGETS: [Target; 2] = [Target::Sm80, Target::Sm90a];

/// A fresh scratch folder for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("compile")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

/// The examples (the SIMT ones and the tensor-core gemm).
fn examples() -> Vec<String> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(root().join("examples"))
        .expect("examples/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "tir"))
        .collect();
    paths.sort();
    let all: Vec<String> = paths
        .iter()
        .map(|p| {
            format!(
                "examples/{}",
                p.file_name().unwrap_or_default().to_string_lossy()
            )
        })
        .collect();
    assert!(all.len() >= 4, "the examples are missing: {all:?}");
    all
}

fn stem(example: &str) -> String {
    Path::new(example)
        .file_stem()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned()
}

fn pass_names(target: Target) -> Vec<&'static str> {
    default_pipeline(target).iter().map(|p| p.name()).collect()
}

fn assemble(ptx: &Path, arch: &str) {
    if let Err(e) = ptxas_log(ptx, arch) {
        panic!("{e}");
    }
}

/// The one target a file marked `# requires: TARGET` compiles for (fp8 GEMMs: sm_90a's
/// wgmma is the only fp8 tensor-core math), if it is marked.
fn required_target(path: &str) -> Option<Target> {
    let text = std::fs::read_to_string(root().join(path)).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("# requires: "))
        .and_then(|t| TARGETS.into_iter().find(|x| x.name() == t.trim()))
}

#[test]
fn every_example_compiles_for_its_targets_and_ptxas_accepts_it() {
    let dir = scratch("examples");
    for example in &examples() {
        let required = required_target(example);
        for target in TARGETS {
            if required.is_some_and(|r| r != target) {
                // Refused with a located error at the construct the target lacks.
                let out = tlc(&["compile", example, "--target", target.name(), "-o", "-"]);
                let err = text(&out.stderr);
                assert_eq!(out.status.code(), Some(1), "{example} on {target}: {err}");
                assert!(
                    err.starts_with(&format!("{example}:")) && err.contains(": error: "),
                    "{example} on {target}: not a located error:\n{err}"
                );
                assert!(err.contains('^'), "{example} on {target}: no caret:\n{err}");
                continue;
            }
            let out_path = dir.join(format!("{}.{}.ptx", stem(example), target.name()));
            let out = tlc(&[
                "compile",
                example,
                "-o",
                out_path.to_str().unwrap_or_default(),
                "--target",
                target.name(),
            ]);
            assert!(
                out.status.success(),
                "tlc compile {example} --target {}:\n{}",
                target.name(),
                text(&out.stderr)
            );
            assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
            let ptx = std::fs::read_to_string(&out_path).expect("the output file");
            assert!(ptx.starts_with("// tlc-manifest: {"), "{ptx}");
            assert!(
                ptx.contains(&format!("\n.target {}\n", target.name())),
                "{ptx}"
            );
            let manifest = Manifest::from_ptx(&ptx).expect("the manifest reads back");
            manifest.validate().expect("the manifest is valid");
            assert_eq!(manifest.target.name(), target.name());
            for k in &manifest.kernels {
                assert!(ptx.contains(&format!(".entry {}(", k.entry)), "{ptx}");
            }
            assemble(&out_path, target.name());
        }
    }
}

#[test]
fn output_to_stdout_is_the_same_as_to_a_file() {
    let dir = scratch("stdout");
    let file = dir.join("add.ptx");
    let to_file = tlc(&[
        "compile",
        "examples/elementwise_add.tir",
        "-o",
        file.to_str().unwrap_or_default(),
    ]);
    assert!(to_file.status.success(), "{}", text(&to_file.stderr));
    let to_stdout = tlc(&["compile", "examples/elementwise_add.tir", "-o", "-"]);
    assert!(to_stdout.status.success(), "{}", text(&to_stdout.stderr));
    assert_eq!(
        text(&to_stdout.stdout),
        std::fs::read_to_string(&file).unwrap_or_default()
    );
    // `-D` binds a dim: it disappears from the manifest.
    let bound = tlc(&[
        "compile",
        "examples/elementwise_add.tir",
        "-o",
        "-",
        "-D",
        "N=1000",
    ]);
    assert!(bound.status.success(), "{}", text(&bound.stderr));
    let manifest = Manifest::from_ptx(&text(&bound.stdout)).expect("manifest");
    assert!(manifest.dims.iter().all(|d| d.name != "N"), "{manifest:?}");
}

#[test]
fn dump_dir_holds_every_stage_then_the_ptx() {
    let example = "examples/transpose.tir";
    let dir = scratch("dump");
    let dumps = dir.join("stages");
    let out_path = dir.join("transpose.ptx");
    let out = tlc(&[
        "compile",
        example,
        "-o",
        out_path.to_str().unwrap_or_default(),
        "--dump-dir",
        dumps.to_str().unwrap_or_default(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let passes = pass_names(Target::Sm80);
    let mut expected = vec!["00-input.tir".to_string()];
    for (i, p) in passes.iter().enumerate() {
        expected.push(format!("{:02}-{p}.tir", i + 1));
    }
    expected.push(format!("{:02}-ptx.ptx", passes.len() + 1));
    let mut found: Vec<String> = std::fs::read_dir(&dumps)
        .expect("the dump dir")
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect();
    found.sort();
    assert_eq!(found, expected);
    // Every IR stage is valid input, and the last dump is the output file.
    for name in &expected[..expected.len() - 1] {
        let path = dumps.join(name);
        let check = tlc(&["check", path.to_str().unwrap_or_default()]);
        assert!(check.status.success(), "{name}: {}", text(&check.stderr));
    }
    assert_eq!(
        std::fs::read_to_string(dumps.join(&expected[expected.len() - 1])).unwrap_or_default(),
        std::fs::read_to_string(&out_path).unwrap_or_default()
    );
}

#[test]
fn emit_tir_writes_the_final_ir_and_stop_after_stops_there() {
    let example = "examples/scale_cast.tir";
    let dir = scratch("emit");
    let dumps = dir.join("stages");
    let out = tlc(&[
        "compile",
        example,
        "-o",
        "-",
        "--emit=tir",
        "--dump-dir",
        dumps.to_str().unwrap_or_default(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let ir = text(&out.stdout);
    let passes = pass_names(Target::Sm80);
    let last = dumps.join(format!(
        "{:02}-{}.tir",
        passes.len(),
        passes.last().unwrap_or(&"")
    ));
    assert_eq!(ir, std::fs::read_to_string(&last).unwrap_or_default());
    // No PTX is written for --emit=tir.
    assert!(!dumps
        .join(format!("{:02}-ptx.ptx", passes.len() + 1))
        .exists());
    let path = dir.join("final.tir");
    std::fs::write(&path, &ir).expect("write");
    let check = tlc(&["check", path.to_str().unwrap_or_default()]);
    assert!(check.status.success(), "{}", text(&check.stderr));

    // --stop-after=<first pass>: the IR after it, even without --emit=tir.
    let first = passes.first().copied().unwrap_or("");
    let stopped = tlc(&[
        "compile",
        example,
        "-o",
        "-",
        &format!("--stop-after={first}"),
    ]);
    assert!(stopped.status.success(), "{}", text(&stopped.stderr));
    let opt = tlc(&["opt", example, &format!("--passes={first}")]);
    assert!(opt.status.success(), "{}", text(&opt.stderr));
    assert_eq!(text(&stopped.stdout), text(&opt.stdout));
}

#[test]
fn notes_survive_every_pass_and_become_ptx_comments() {
    let case = "tests/cases/valid/notes.tir";
    let input = std::fs::read_to_string(root().join(case)).expect("read the case");
    // The notes as the printer writes them (the case is in canonical form).
    let notes: Vec<&str> = input
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("T.note("))
        .collect();
    assert_eq!(notes.len(), 12, "{notes:?}");
    let dir = scratch("notes");
    for target in TARGETS {
        let ptx = dir.join(format!("notes.{}.ptx", target.name()));
        let out = tlc(&[
            "compile",
            case,
            "-o",
            ptx.to_str().unwrap_or_default(),
            "--target",
            target.name(),
            "--print-ir-after-all",
        ]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let dumps = text(&out.stderr);
        let stages: Vec<&str> = dumps.split("# -----// IR after ").skip(1).collect();
        assert_eq!(stages.len(), pass_names(target).len(), "{dumps}");
        for stage in &stages {
            let pass = stage.split(' ').next().unwrap_or_default();
            for note in &notes {
                assert!(
                    stage.contains(note),
                    "{target}: {note} is gone after {pass}\n{stage}"
                );
            }
        }
        // In the PTX: comment lines of ASCII (ptxas rejects any other byte), which ptxas
        // assembles; notes outside the kernels and in a vector access are not written.
        assemble(&ptx, target.name());
        let code = std::fs::read_to_string(&ptx).unwrap_or_default();
        let comments: Vec<&str> = code
            .lines()
            .filter_map(|l| l.trim().strip_prefix("// note: "))
            .collect();
        for want in [
            "tile level: \\\"quoted\\\", a backslash \\\\, a tab\\tand\\na second line",
            "A_shared: TMA not used, the row stride of A (K \\u{00d7} 2 bytes) is not provably a multiple of 16 bytes; cp.async instead",
            "in an unrolled loop",
            "then",
            "else, in a serial loop",
        ] {
            let n = comments.iter().filter(|c| **c == want).count();
            assert!((1..=2).contains(&n), "{target}: {want:?} written {n} times in\n{comments:#?}");
        }
        assert!(code.is_ascii(), "{target}: the PTX is not ASCII");
    }
}

#[test]
fn time_passes_lists_every_pass_codegen_and_printing() {
    let out = tlc(&[
        "compile",
        "examples/elementwise_add.tir",
        "-o",
        "-",
        "--time-passes",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let log = text(&out.stderr);
    let rows: Vec<&str> = log
        .lines()
        .skip_while(|l| !l.starts_with("# pass timing"))
        .skip(1)
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    let mut expected: Vec<&str> = pass_names(Target::Sm80);
    expected.extend(["codegen", "print-ptx", "(verify-each)", "total"]);
    assert_eq!(rows, expected, "{log}");
    // The total is the sum of the rows (to the printed precision).
    let numbers: Vec<f64> = log
        .lines()
        .skip_while(|l| !l.starts_with("# pass timing"))
        .skip(1)
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect();
    let (total, parts) = numbers.split_last().expect("rows");
    let sum: f64 = parts.iter().sum();
    assert!((sum - total).abs() < 0.01, "{log}");
}

#[test]
fn bad_flags_and_files_are_errors_with_exit_1() {
    let cases: [(&[&str], &str); 5] = [
        (
            &[
                "compile",
                "examples/transpose.tir",
                "-o",
                "-",
                "--target",
                "sm_70",
            ],
            "unknown target",
        ),
        (
            &[
                "compile",
                "examples/transpose.tir",
                "-o",
                "-",
                "--stop-after=simplfy",
            ],
            "did you mean `simplify`",
        ),
        (
            &[
                "compile",
                "examples/transpose.tir",
                "-o",
                "-",
                "--print-ir-after=nope",
            ],
            "unknown pass `nope`",
        ),
        (
            &["compile", "examples/missing.tir", "-o", "-"],
            "cannot read file",
        ),
        (
            &["compile", "examples/transpose.tir", "-o", "-", "-D", "Q=4"],
            "Q",
        ),
    ];
    for (args, needle) in cases {
        let out = tlc(args);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{args:?}: {}",
            text(&out.stderr)
        );
        let err = text(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    // A broken kernel: the verifier's located error, nothing written.
    let dir = scratch("bad");
    let bad = dir.join("bad.tir");
    std::fs::write(
        &bad,
        "@T.prim_func\ndef f(A: T.Tensor((4,), \"float32\")):\n    with T.Kernel(1, threads=32) as bx:\n        A[0] = y\n",
    )
    .expect("write");
    let out_path = dir.join("bad.ptx");
    let out = tlc(&[
        "compile",
        bad.to_str().unwrap_or_default(),
        "-o",
        out_path.to_str().unwrap_or_default(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("bad.tir:4:16: error:"),
        "{}",
        text(&out.stderr)
    );
    assert!(!out_path.exists());
}

#[test]
fn run_needs_exactly_one_of_interp_and_device() {
    let both = tlc(&["run", "examples/transpose.tir", "--interp", "--device"]);
    assert_eq!(both.status.code(), Some(2), "{}", text(&both.stderr));
    let neither = tlc(&["run", "examples/transpose.tir"]);
    assert_eq!(neither.status.code(), Some(2), "{}", text(&neither.stderr));
    let target_without_device = tlc(&[
        "run",
        "examples/transpose.tir",
        "--interp",
        "--target",
        "sm_80",
    ]);
    assert_eq!(target_without_device.status.code(), Some(2));
}

/// Without a driver: a clear error. On a GPU machine: the ragged elementwise add runs and
/// matches the interpreter.
#[test]
fn run_device_runs_on_the_gpu_or_says_there_is_none() {
    let dir = scratch("device");
    let out = tlc(&[
        "run",
        "examples/elementwise_add.tir",
        "--device",
        "-D",
        "N=1000",
        "--save-dir",
        dir.to_str().unwrap_or_default(),
    ]);
    if tlc_runtime::driver_available() && tlc_runtime::Gpu::count() > 0 {
        assert!(out.status.success(), "{}", text(&out.stderr));
        let report = text(&out.stdout);
        assert!(report.contains("C: float32 (1000,)"), "{report}");
        assert!(report.contains("every parameter matches"), "{report}");
        assert!(dir.join("C.npy").exists());
    } else {
        assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
        let err = text(&out.stderr);
        assert!(err.contains("`--device` needs a GPU"), "{err}");
        assert!(err.contains("--interp"), "{err}");
    }
}

/// Past 2^31 elements, index math is 64-bit where it must be and nowhere else: the flat
/// index of a 3·10^9-element vector and its bound compare are `.s64` (no `.s32` compare with
/// an immediate that does not fit), and a 50000 × 50000 transpose — every subscript fits
/// int32 — flattens its subscripts into a 64-bit address. Both assemble (and carry no
/// immediate outside its type: `ptxas_log` checks).
#[test]
fn indices_past_two_to_the_31_are_computed_in_64_bits() {
    let dir = scratch("index64");
    for (example, defines, wide) in [
        (
            "examples/elementwise_add.tir",
            &["N=3000000000"][..],
            "setp.lt.s64",
        ),
        (
            "examples/transpose.tir",
            &["M=50000", "N=50000"][..],
            "mad.lo.s64",
        ),
    ] {
        let out_path = dir.join(format!("{}.ptx", stem(example)));
        let mut args = vec!["compile", example, "-o", out_path.to_str().unwrap_or("")];
        for d in defines {
            args.extend(["-D", d]);
        }
        let out = tlc(&args);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let ptx = std::fs::read_to_string(&out_path).unwrap_or_default();
        assert!(ptx.contains(wide), "{example}: no `{wide}`\n{ptx}");
        assert!(
            !ptx.lines()
                .any(|l| l.contains("setp") && l.contains(".s32") && l.contains("000000")),
            "{example}: a 32-bit compare with a large bound\n{ptx}"
        );
        assemble(&out_path, "sm_80");
    }
}

/// The valid cases whose local arrays are indexed at run time (issue 12) compile for both
/// targets into a `.local` array, ptxas assembles them without spills, and on a GPU machine
/// `tlc run --device` matches the interpreter (without one, the interpreter runs them).
#[test]
fn runtime_indexed_local_arrays_compile_and_match_the_interpreter() {
    let dir = scratch("local_arrays");
    for case in ["control_flow", "unroll_nest"] {
        let file = format!("tests/cases/valid/{case}.tir");
        for target in TARGETS {
            let out_path = dir.join(format!("{case}.{}.ptx", target.name()));
            let out = tlc(&[
                "compile",
                &file,
                "-o",
                out_path.to_str().unwrap_or_default(),
                "--target",
                target.name(),
            ]);
            assert!(out.status.success(), "{file}: {}", text(&out.stderr));
            let ptx = std::fs::read_to_string(&out_path).expect("the output file");
            assert!(
                ptx.contains(".local .align 4 .b8 \t__local_acc[16];"),
                "{ptx}"
            );
            assert!(
                ptx.contains("ld.local.f32") && ptx.contains("st.local.f32"),
                "{ptx}"
            );
            let log = ptxas_log(&out_path, target.name()).unwrap_or_else(|e| panic!("{e}"));
            assert!(
                log.contains("0 bytes spill stores") && log.contains("0 bytes spill loads"),
                "{file} spills on {}:\n{log}",
                target.name()
            );
        }
        let gpu = tlc_runtime::driver_available() && tlc_runtime::Gpu::count() > 0;
        let mode = if gpu { "--device" } else { "--interp" };
        let run = tlc(&["run", &file, mode, "--seed", "1"]);
        assert!(run.status.success(), "{file} {mode}: {}", text(&run.stderr));
        if gpu {
            let report = text(&run.stdout);
            assert!(report.contains("every parameter matches"), "{report}");
        }
    }
}

/// Partial tiles from `-D` (issue 14): a dim bound below a tile (`-D M=64` for 128-row
/// tiles) checks, compiles for both targets (ptxas accepts the output; on sm_90a the GEMMs'
/// loads are TMA boxes larger than the tensor), and computes what the symbolic kernel
/// computes at that size: `tlc run -D` and `tlc run` with the same inputs (the dims read off
/// their shapes) save the same outputs, and so does the compiled IR (`--emit=tir`) under the
/// interpreter — bit for bit for the copy, within rounding for the GEMMs, whose K sums
/// the compiled IR splits differently.
#[test]
fn partial_tiles_bound_with_d_compile_and_match_the_symbolic_kernel() {
    let dir = scratch("partial_tiles");
    /// The parameters to compare, with their dtypes.
    type Params = &'static [(&'static str, tlc_ir::DType)];
    let cases: [(&str, &[&str], Params, bool); 3] = [
        (
            "examples/scale_cast.tir",
            &["M=50", "N=30"],
            &[("X", tlc_ir::DType::Float32), ("Y", tlc_ir::DType::Float16)],
            false,
        ),
        (
            "bench/gemm_128x128x32_t128_s3_masked.tir",
            &["M=64", "N=64", "K=32"],
            &[
                ("A", tlc_ir::DType::Float16),
                ("B", tlc_ir::DType::Float16),
                ("C", tlc_ir::DType::Float16),
            ],
            true,
        ),
        (
            "bench/gemm_128x128x64_t128_s3.tir",
            &["M=50", "N=40", "K=72"],
            &[
                ("A", tlc_ir::DType::Float16),
                ("B", tlc_ir::DType::Float16),
                ("C", tlc_ir::DType::Float16),
            ],
            true,
        ),
    ];
    for (n, (file, defines, params, gemm)) in cases.into_iter().enumerate() {
        let with_defines = |args: &[&str]| -> Vec<String> {
            let mut v: Vec<String> = args.iter().map(|a| a.to_string()).collect();
            for d in defines {
                v.push("-D".into());
                v.push(d.to_string());
            }
            v
        };
        let run_tlc = |args: Vec<String>| {
            let refs: Vec<&str> = args.iter().map(String::as_str).collect();
            let out = tlc(&refs);
            assert!(
                out.status.success(),
                "tlc {}:\n{}",
                args.join(" "),
                text(&out.stderr)
            );
            out
        };
        let path = |name: &str| dir.join(format!("{n}.{name}"));
        let p = |name: &str| path(name).to_string_lossy().into_owned();
        run_tlc(with_defines(&["check", file]));
        // The bound kernel under the interpreter, then the symbolic one on its inputs.
        run_tlc(with_defines(&[
            "run",
            file,
            "--interp",
            "--seed",
            "3",
            "--save-dir",
            &p("bound"),
        ]));
        let mut symbolic = vec!["run".to_string(), file.to_string(), "--interp".into()];
        for (param, _) in params {
            symbolic.push("--input".into());
            symbolic.push(format!(
                "{param}={}",
                path("bound").join(format!("{param}.npy")).display()
            ));
        }
        symbolic.extend(["--save-dir".to_string(), p("symbolic")]);
        run_tlc(symbolic);
        for (param, _) in params {
            let read = |d: &str| std::fs::read(path(d).join(format!("{param}.npy"))).expect("npy");
            assert!(
                read("bound") == read("symbolic"),
                "{file} {defines:?}: `{param}` of the bound kernel differs from the symbolic one's"
            );
        }
        for target in TARGETS {
            let t = target.name();
            let ptx = path(&format!("{t}.ptx"));
            run_tlc(with_defines(&[
                "compile",
                file,
                "--target",
                t,
                "-o",
                &ptx.to_string_lossy(),
            ]));
            assemble(&ptx, t);
            let text_ptx = std::fs::read_to_string(&ptx).expect("the output file");
            if gemm && target == Target::Sm90a && file.contains("128x128x64") {
                assert!(
                    text_ptx.contains("cp.async.bulk.tensor"),
                    "{file} {defines:?}: the loads are not on TMA"
                );
            }
            // The compiled IR under the interpreter, on the same (seeded) inputs.
            let tir = path(&format!("{t}.tir"));
            run_tlc(with_defines(&[
                "compile",
                file,
                "--target",
                t,
                "--emit=tir",
                "-o",
                &tir.to_string_lossy(),
            ]));
            let saved = format!("{t}.out");
            run_tlc(vec![
                "run".into(),
                tir.to_string_lossy().into_owned(),
                "--interp".into(),
                "--seed".into(),
                "3".into(),
                "--save-dir".into(),
                p(&saved),
            ]);
            for (param, dtype) in params {
                let read = |d: &str| {
                    tlc_ir::interp::read_npy_file(&path(d).join(format!("{param}.npy")), *dtype)
                        .unwrap_or_else(|e| panic!("{param}: {e}"))
                        .to_f64()
                };
                let (want, got) = (read("bound"), read(&saved));
                assert_eq!(want.len(), got.len(), "{file} on {t}: `{param}`");
                let tol = if gemm { 2e-3 } else { 0.0 };
                for (i, (w, g)) in want.iter().zip(&got).enumerate() {
                    assert!(
                        (w - g).abs() <= tol * (w.abs() + 1.0),
                        "{file} {defines:?} on {t}: `{param}`[{i}] = {g}, the symbolic kernel's {w}"
                    );
                }
            }
        }
    }
}
