//! The pass manager: pipelines, instrumentation, verify-each.

use crate::common;

use common::case;
use tlc_ir::printer::print_func;
use tlc_ir::{Diagnostic, Ident, PrimFunc, Span, Stmt, StmtKind};
use tlc_passes::{
    default_pipeline, parse_pipeline, Instrumentation, Pass, PassContext, PassManager,
    PipelineError, Target,
};

fn temp_dir(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("tlc-passes-test-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn run(
    pipeline: &str,
    opts: Instrumentation,
    func: PrimFunc,
) -> (Result<PrimFunc, PipelineError>, String) {
    let pm = PassManager::new(parse_pipeline(pipeline).unwrap(), opts).unwrap();
    let mut log = Vec::new();
    let out = pm.run(func, &mut common::cx(), &mut log);
    (out, String::from_utf8(log).unwrap())
}

#[test]
fn default_pipeline_snapshot() {
    let pm = PassManager::new(default_pipeline(Target::Sm80), Instrumentation::default()).unwrap();
    let out = pm
        .run(
            case("swizzle_panels"),
            &mut common::cx(),
            &mut std::io::sink(),
        )
        .unwrap();
    insta::assert_snapshot!(print_func(&out));
}

#[test]
fn a_pass_given_ir_below_its_level_is_stopped_before_it_runs() {
    // lower-tile-ops needs gemm accumulators laid out; thread-binding needs thread level.
    for (pipeline, level, wanted) in [
        (
            "lower-tile-ops",
            "laid-out tile-level",
            "run layout-inference first",
        ),
        (
            "layout-inference,thread-binding",
            "thread-level",
            "run lower-tile-ops first",
        ),
    ] {
        let (out, _) = run(pipeline, Instrumentation::default(), case("gemm_seed000"));
        let err = out.expect_err(pipeline);
        let shown = err.to_string();
        match err {
            PipelineError::NotAtLevel {
                level: l,
                diagnostics,
                ..
            } => {
                assert_eq!(l.name(), level);
                assert!(!diagnostics.is_empty());
                assert!(
                    diagnostics.iter().all(|d| !d.span.is_dummy()),
                    "{diagnostics:?}"
                );
                assert!(diagnostics[0].message.contains(wanted), "{shown}");
            }
            other => panic!("{pipeline}: {other}"),
        }
    }
    // In order, the same function passes every check.
    let (out, _) = run(
        "layout-inference,lower-tile-ops,thread-binding",
        Instrumentation::default(),
        case("gemm_seed000"),
    );
    assert!(out.is_ok());
}

#[test]
fn dump_dir_writes_one_numbered_file_per_stage() {
    let dir = temp_dir("dump");
    let opts = Instrumentation {
        dump_dir: Some(dir.clone()),
        ..Instrumentation::default()
    };
    let (out, log) = run("rasterize,unroll,simplify", opts, case("unroll_nest"));
    let out = out.unwrap();
    assert!(log.is_empty());
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(
        files,
        [
            "00-input.tir",
            "01-rasterize.tir",
            "02-unroll.tir",
            "03-simplify.tir"
        ]
    );
    let input = std::fs::read_to_string(dir.join("00-input.tir")).unwrap();
    assert_eq!(tlc_ir::parse(&input).unwrap(), case("unroll_nest"));
    let last = std::fs::read_to_string(dir.join("03-simplify.tir")).unwrap();
    assert_eq!(last, print_func(&out));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn print_ir_after_change_skips_passes_that_change_nothing() {
    let opts = Instrumentation {
        print_ir_after_change: true,
        ..Instrumentation::default()
    };
    // swizzle_panels has no T.unroll: `unroll` changes nothing.
    let (out, log) = run("rasterize,unroll,simplify", opts, case("swizzle_panels"));
    out.unwrap();
    assert!(
        log.contains("# -----// IR after rasterize //----- #"),
        "{log}"
    );
    assert!(!log.contains("after unroll"), "{log}");
    let banners = log.matches("# -----// IR").count();
    assert!(banners == 1 || banners == 2, "{log}");
}

#[test]
fn print_before_after_and_all() {
    let opts = Instrumentation {
        print_ir_before: vec!["unroll".into()],
        print_ir_after: vec!["simplify".into()],
        ..Instrumentation::default()
    };
    let (_, log) = run("unroll,simplify", opts, case("unroll_nest"));
    let heads: Vec<&str> = log.lines().filter(|l| l.starts_with("# -----//")).collect();
    assert_eq!(
        heads,
        [
            "# -----// IR before unroll //----- #",
            "# -----// IR after simplify //----- #"
        ]
    );
    // Each printed stage parses back (the banner is a comment).
    let after = log
        .split("# -----// IR after simplify //----- #")
        .nth(1)
        .unwrap();
    tlc_ir::parse(after).unwrap();
    let opts = Instrumentation {
        print_ir_after_all: true,
        ..Instrumentation::default()
    };
    let (_, log) = run("unroll,simplify", opts, case("unroll_nest"));
    assert_eq!(log.matches("# -----// IR after").count(), 2);
}

#[test]
fn stop_after_and_time_passes() {
    let opts = Instrumentation {
        stop_after: Some("unroll".into()),
        time_passes: true,
        ..Instrumentation::default()
    };
    let (out, log) = run("rasterize,unroll,simplify", opts, case("unroll_nest"));
    let expected = run(
        "rasterize,unroll",
        Instrumentation::default(),
        case("unroll_nest"),
    )
    .0;
    assert_eq!(out.unwrap(), expected.unwrap());
    let rows: Vec<&str> = log.lines().collect();
    assert_eq!(rows[0], "# pass timing (milliseconds)");
    let names: Vec<&str> = rows[1..]
        .iter()
        .map(|r| r.split_whitespace().nth(1).unwrap())
        .collect();
    assert_eq!(names, ["rasterize", "unroll", "(verify-each)", "total"]);
}

#[test]
fn bad_names_in_options_are_errors() {
    let opts = Instrumentation {
        print_ir_after: vec!["unrol".into()],
        ..Instrumentation::default()
    };
    let err = PassManager::new(parse_pipeline("unroll").unwrap(), opts).unwrap_err();
    assert_eq!(
        err.to_string(),
        "`--print-ir-after`: unknown pass `unrol`; did you mean `unroll`?"
    );
    let opts = Instrumentation {
        stop_after: Some("simplify".into()),
        ..Instrumentation::default()
    };
    let err = PassManager::new(parse_pipeline("unroll,rasterize").unwrap(), opts).unwrap_err();
    assert_eq!(
        err.to_string(),
        "`--stop-after=simplify`: the pipeline does not run `simplify` (it runs: unroll, rasterize)"
    );
}

/// A pass that breaks the IR: it defines the first block variable again as a let.
struct Breaker;

impl Pass for Breaker {
    fn name(&self) -> &'static str {
        "breaker"
    }
    fn description(&self) -> &'static str {
        "test pass that redefines a block variable"
    }
    fn run(&self, mut func: PrimFunc, _cx: &PassContext) -> Result<PrimFunc, Vec<Diagnostic>> {
        for s in &mut func.body {
            if let StmtKind::Kernel(k) = &mut s.kind {
                let name = k.block_vars[0].name.clone();
                k.body.insert(
                    0,
                    Stmt::new(
                        StmtKind::Let {
                            var: Ident::new(name, Span::DUMMY),
                            dtype: None,
                            value: tlc_ir::Expr::int(0),
                        },
                        Span::DUMMY,
                    ),
                );
            }
        }
        Ok(func)
    }
}

static BREAKER: Breaker = Breaker;

#[test]
fn verify_each_names_the_pass_and_dumps_its_input_and_output() {
    let dir = temp_dir("broken");
    let opts = Instrumentation {
        dump_dir: Some(dir.clone()),
        // A pass outside the registry can be named when the pipeline runs it.
        print_ir_before: vec!["breaker".into()],
        ..Instrumentation::default()
    };
    let mut pipeline = parse_pipeline("unroll").unwrap();
    pipeline.push(&BREAKER);
    let pm = PassManager::new(pipeline.clone(), opts).unwrap();
    let mut log = Vec::new();
    let err = pm
        .run(case("unroll_nest"), &mut common::cx(), &mut log)
        .unwrap_err();
    let log = String::from_utf8(log).unwrap();
    assert!(
        log.contains("# -----// IR before breaker //----- #"),
        "{log}"
    );
    let text = err.to_string();
    assert!(
        text.starts_with("pass `breaker` produced invalid IR (1 verifier error):"),
        "{text}"
    );
    assert!(
        text.contains("the name `bx` is defined more than once"),
        "{text}"
    );
    let given = dir.join("02-breaker.input.tir");
    let produced = dir.join("02-breaker.invalid.tir");
    assert!(text.contains(&given.display().to_string()), "{text}");
    assert!(text.contains(&produced.display().to_string()), "{text}");
    let given_ir = tlc_ir::parse(&std::fs::read_to_string(&given).unwrap()).unwrap();
    let unrolled = run("unroll", Instrumentation::default(), case("unroll_nest"))
        .0
        .unwrap();
    assert_eq!(given_ir, unrolled);
    assert!(std::fs::read_to_string(&produced)
        .unwrap()
        .contains("bx = 0"));
    let _ = std::fs::remove_dir_all(&dir);
    // With verify-each off the broken IR goes through.
    let opts = Instrumentation {
        verify_each: false,
        ..Instrumentation::default()
    };
    let pm = PassManager::new(pipeline, opts).unwrap();
    assert!(pm
        .run(case("unroll_nest"), &mut common::cx(), &mut std::io::sink())
        .is_ok());
}

#[test]
fn an_input_the_target_cannot_run_is_refused_before_the_first_pass() {
    // TMA and mbarriers exist on sm_90a only: for sm_80 the input is at fault, located at
    // each intrinsic, and no pass is named.
    let pm = PassManager::new(default_pipeline(Target::Sm80), Instrumentation::default()).unwrap();
    let err = pm
        .run(
            case("tma_tile_copy"),
            &mut common::cx(),
            &mut std::io::sink(),
        )
        .expect_err("sm_80 has no TMA");
    let shown = err.to_string();
    assert!(
        shown.starts_with("the input does not compile for sm_80"),
        "{shown}"
    );
    match err {
        PipelineError::TargetRules {
            target,
            diagnostics,
        } => {
            assert_eq!(target, Target::Sm80);
            // init, fence, arrive_expect_tx, tma_load, wait.
            assert_eq!(diagnostics.len(), 5, "{diagnostics:?}");
            assert!(diagnostics.iter().all(|d| !d.span.is_dummy()));
            assert!(diagnostics[0]
                .message
                .starts_with("`T.mbarrier_init` needs a target with bulk tensor copies (TMA)"));
        }
        other => panic!("{other}"),
    }
    let pm = PassManager::new(default_pipeline(Target::Sm90a), Instrumentation::default()).unwrap();
    let mut cx = PassContext::new(Target::Sm90a);
    assert!(pm
        .run(case("tma_tile_copy"), &mut cx, &mut std::io::sink())
        .is_ok());
}
