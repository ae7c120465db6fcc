//! `tlc opt` and `tlc passes` as users run them.

use crate::common;

use common::{text, tlc};

#[test]
fn passes_lists_every_pass_with_a_description() {
    let out = tlc(&["passes"]);
    assert!(out.status.success());
    let listing = text(&out.stdout);
    let names: Vec<&str> = listing
        .lines()
        .map(|l| l.split_whitespace().next().unwrap_or(""))
        .collect();
    assert_eq!(
        names,
        [
            "legalize-safe-memory",
            "widen-int4-gemm",
            "pack-int4",
            "thread-sync",
            "lower-reducers",
            "lower-reductions",
            "stage-fragment-reads",
            "longest-first",
            "version-masks",
            "prefetch-loads",
            "mark-fresh-buffers",
            "layout-inference",
            "pipeline-planning",
            "inject-software-pipeline",
            "lower-tile-ops",
            "warp-specialize",
            "persistent-tiles",
            "tma-multicast",
            "inject-cp-async",
            "rasterize",
            "thread-binding",
            "sink-wgmma-wait",
            "plan-allreduce-scratch",
            "plan-shared-memory",
            "unroll",
            "simplify",
            "widen-indices"
        ]
    );
    assert!(listing.lines().all(|l| l.split_whitespace().count() > 3));
}

#[test]
fn passes_with_a_target_prints_its_default_pipeline() {
    for target in tlc_ir::Target::ALL {
        let out = tlc(&["passes", "--target", target.name()]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let names: Vec<String> = text(&out.stdout)
            .lines()
            .map(|l| l.split_whitespace().next().unwrap_or("").to_string())
            .collect();
        let want: Vec<&str> = tlc_passes::default_pipeline(target)
            .iter()
            .map(|p| p.name())
            .collect();
        assert_eq!(names, want, "{target}");
        // sm_90a widens int4 gemms to int8 ones before the packing.
        let first = match target {
            tlc_ir::Target::Sm80 => "pack-int4",
            tlc_ir::Target::Sm90a => "widen-int4-gemm",
        };
        assert_eq!(names.first().map(String::as_str), Some(first));
        assert_eq!(names.last().map(String::as_str), Some("widen-indices"));
        // The Hopper schedule is sm_90a's alone, right after the lowering.
        let schedule = names.iter().position(|n| n == "warp-specialize");
        match target {
            tlc_ir::Target::Sm80 => {
                assert_eq!(schedule, None, "{names:?}");
                assert!(!names.iter().any(|n| n == "persistent-tiles"), "{names:?}");
            }
            tlc_ir::Target::Sm90a => {
                let lowering = names.iter().position(|n| n == "lower-tile-ops");
                assert_eq!(schedule, lowering.map(|i| i + 1), "{names:?}");
                let persistent = names.iter().position(|n| n == "persistent-tiles");
                assert_eq!(persistent, schedule.map(|i| i + 1), "{names:?}");
                let multicast = names.iter().position(|n| n == "tma-multicast");
                assert_eq!(multicast, schedule.map(|i| i + 2), "{names:?}");
            }
        }
    }
    let out = tlc(&["passes", "--target", "sm_75"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "error: `--target sm_75`: unknown target (known targets: sm_80, sm_90a)\n"
    );
}

#[test]
fn opt_prints_the_ir_after_the_passes_and_the_output_is_valid_input() {
    let out = tlc(&[
        "opt",
        "tests/cases/valid/index_math.tir",
        "--passes=simplify",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let ir = text(&out.stdout);
    assert!(ir.contains("B[row, j] = S[i, j]"), "{ir}");
    assert!(out.stderr.is_empty());
    // Feed the output back in: any level's text is input.
    let dir = std::env::temp_dir().join(format!("tlc-opt-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("simplified.tir");
    std::fs::write(&path, &ir).unwrap();
    let again = tlc(&["opt", path.to_str().unwrap(), "--passes=simplify"]);
    assert_eq!(text(&again.stdout), ir);
    // No passes: the canonical text, like `tlc fmt`.
    let none = tlc(&["opt", "tests/cases/valid/index_math.tir"]);
    let fmt = tlc(&["fmt", "tests/cases/valid/index_math.tir"]);
    assert_eq!(none.stdout, fmt.stdout);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn opt_binds_dims_and_takes_the_instrumentation_flags() {
    let dir = std::env::temp_dir().join(format!("tlc-opt-dump-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = tlc(&[
        "opt",
        "examples/elementwise_add.tir",
        "-D",
        "N=4096",
        "--passes=rasterize,unroll,simplify",
        "--print-ir-after=rasterize",
        "--time-passes",
        "--stop-after=unroll",
        "--dump-dir",
        dir.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("T.Kernel(4, threads=256)"));
    let err = text(&out.stderr);
    assert!(
        err.contains("# -----// IR after rasterize //----- #"),
        "{err}"
    );
    assert!(err.contains("# pass timing (milliseconds)"), "{err}");
    assert!(!err.contains("simplify"), "{err}");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(files, ["00-input.tir", "01-rasterize.tir", "02-unroll.tir"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn unknown_pass_names_are_errors_with_a_suggestion() {
    let out = tlc(&[
        "opt",
        "examples/transpose.tir",
        "--passes=simplify,rasterise",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "error: `--passes`: unknown pass `rasterise`; did you mean `rasterize`?\n"
    );
    assert!(out.stdout.is_empty());
    let out = tlc(&[
        "opt",
        "examples/transpose.tir",
        "--passes=simplify",
        "--stop-after=unroll",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("the pipeline does not run `unroll`"));
    let out = tlc(&["opt", "examples/transpose.tir", "--print-ir-before=simplfy"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("did you mean `simplify`?"));
}

#[test]
fn opt_reports_source_errors_like_check() {
    let out = tlc(&[
        "opt",
        "tests/cases/malformed/bad_dtype.tir",
        "--passes=simplify",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).starts_with("tests/cases/malformed/bad_dtype.tir:"));
}

#[test]
fn passes_out_of_order_are_located_errors_naming_the_missing_pass() {
    let out = tlc(&[
        "opt",
        "tests/cases/valid/copy_regions.tir",
        "--passes=layout-inference,thread-binding",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.starts_with("tests/cases/valid/copy_regions.tir:12:9: error: a tile op remains"),
        "{err}"
    );
    assert!(err.contains("run lower-tile-ops first"), "{err}");
    assert!(
        err.contains("note: pass `thread-binding` needs thread-level IR"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
}
