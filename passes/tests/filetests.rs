//! Text-file tests for passes (Cranelift / LLVM style): each `filetests/*.tir` is a kernel
//! with a header naming the passes to run and, as comments after it, the IR they must
//! produce. The whole file is valid input (`tlc opt FILE --passes=...` reproduces it).
//!
//! ```text
//! # passes: lower-tile-ops, thread-binding
//! # target: sm_80                      (optional; sm_80 by default)
//! # sms: 2                             (optional; the target's SM count by default)
//! @T.prim_func
//! def f(...): ...
//! # expected:
//! # @T.prim_func
//! # def f(...): ...
//! ```
//!
//! The runner verifies the input, runs the passes through the pass manager (verify-each
//! with the target's limits, levels checked), compares the printed result with the
//! expected lines, and runs the interpreter before and after on random inputs (the outputs
//! must be identical). A pipeline that fails is expected as its error lines
//! (`# error: ...`). `TLC_BLESS=1 cargo test -p tlc-passes --test integration filetests` rewrites the
//! expected part of every file whose output changed.

use crate::common;

use std::path::{Path, PathBuf};
use tlc_ir::printer::print_func;
use tlc_passes::{
    parse_pipeline, Instrumentation, PassContext, PassManager, PipelineError, Target,
};

const EXPECTED: &str = "# expected:";

/// One test file: its header, its input text and its expected output.
struct FileTest {
    path: PathBuf,
    passes: String,
    target: Target,
    /// `# sms:` (`tlc opt --sms`): the SMs persistent kernels are planned for.
    sms: Option<i64>,
    /// Everything before the `# expected:` line.
    input: String,
    expected: Option<String>,
}

fn read(path: &Path) -> Result<FileTest, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let (input, expected) = match text.find(&format!("\n{EXPECTED}\n")) {
        Some(at) => {
            let tail = &text[at + EXPECTED.len() + 2..];
            let lines: Vec<&str> = tail
                .lines()
                .map(|l| {
                    l.strip_prefix("# ")
                        .unwrap_or(l.strip_prefix('#').unwrap_or(l))
                })
                .collect();
            (text[..at + 1].to_string(), Some(lines.join("\n") + "\n"))
        }
        None => (text.clone(), None),
    };
    let header = |key: &str| {
        input
            .lines()
            .take_while(|l| l.starts_with('#'))
            .find_map(|l| {
                l.strip_prefix(&format!("# {key}:"))
                    .map(|v| v.trim().to_string())
            })
    };
    let passes = header("passes").ok_or("no `# passes:` header line")?;
    let target = match header("target") {
        None => Target::Sm80,
        Some(name) => Target::parse(&name).ok_or(format!("unknown target `{name}`"))?,
    };
    let sms = match header("sms") {
        None => None,
        Some(n) => Some(n.parse::<i64>().map_err(|e| format!("`# sms: {n}`: {e}"))?),
    };
    Ok(FileTest {
        path: path.to_path_buf(),
        passes,
        target,
        sms,
        input,
        expected,
    })
}

/// The printed IR the passes produce, or the pipeline's error lines; with the function
/// before and after when the pipeline succeeded.
fn output(t: &FileTest) -> (String, Option<(tlc_ir::PrimFunc, tlc_ir::PrimFunc)>) {
    let func = match tlc_ir::parse(&t.input) {
        Ok(f) => f,
        Err(e) => panic!("{}: does not parse: {e:?}", t.path.display()),
    };
    let info = match tlc_ir::verifier::verify(&func) {
        Ok(info) => info,
        Err(e) => panic!("{}: does not verify: {e:?}", t.path.display()),
    };
    let pipeline = match parse_pipeline(&t.passes) {
        Ok(p) => p,
        Err(e) => panic!("{}: {e}", t.path.display()),
    };
    let manager = match PassManager::new(pipeline, Instrumentation::default()) {
        Ok(m) => m,
        Err(e) => panic!("{}: {e}", t.path.display()),
    };
    let mut cx = PassContext::new(t.target).with_info(info);
    if let Some(sms) = t.sms {
        cx = cx.with_sms(sms);
    }
    match manager.run(func.clone(), &mut cx, &mut std::io::sink()) {
        Ok(out) => (print_func(&out), Some((func, out))),
        Err(e) => (error_lines(&e, &t.input), None),
    }
}

/// A failed pipeline as expected text: the summary line, then each diagnostic at its
/// `LINE:COL` in the file.
fn error_lines(e: &PipelineError, src: &str) -> String {
    let at = |d: &tlc_ir::Diagnostic| {
        let before = &src[..d.span.start.min(src.len())];
        let line = before.matches('\n').count() + 1;
        let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
        format!("error: {line}:{col}: {}\n", d.message)
    };
    match e {
        PipelineError::NotAtLevel {
            pass,
            level,
            diagnostics,
        } => {
            let head = format!("error: pass `{pass}` needs {level} IR\n");
            head + &diagnostics.iter().map(at).collect::<String>()
        }
        PipelineError::PassFailed { pass, diagnostics } => {
            let head = format!("error: pass `{pass}` failed\n");
            head + &diagnostics.iter().map(at).collect::<String>()
        }
        other => format!("error: {other}\n"),
    }
}

fn bless(t: &FileTest, actual: &str) {
    let mut text = t.input.clone();
    text.push_str(EXPECTED);
    text.push('\n');
    for line in actual.lines() {
        if line.is_empty() {
            text.push_str("#\n");
        } else {
            text.push_str(&format!("# {line}\n"));
        }
    }
    if let Err(e) = std::fs::write(&t.path, text) {
        panic!("{}: {e}", t.path.display());
    }
}

#[test]
fn every_file_test_produces_its_expected_ir_and_keeps_meaning() {
    let dir = common::root().join("passes/tests/filetests");
    let mut paths: Vec<PathBuf> = match std::fs::read_dir(&dir) {
        Ok(entries) => entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "tir"))
            .collect(),
        Err(e) => panic!("{}: {e}", dir.display()),
    };
    paths.sort();
    assert!(paths.len() >= 3, "too few file tests in {}", dir.display());
    let blessing = std::env::var_os("TLC_BLESS").is_some();
    let mut failures = Vec::new();
    for path in &paths {
        let t = read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let (actual, funcs) = output(&t);
        if let Some((before, after)) = &funcs {
            let name = path.display().to_string();
            common::assert_same_meaning(&name, before, after);
        }
        if t.expected.as_deref() == Some(actual.as_str()) {
            continue;
        }
        if blessing {
            bless(&t, &actual);
        } else {
            failures.push(format!(
                "{}: the output differs (TLC_BLESS=1 re-blesses)\n--- expected\n{}\n--- actual\n{actual}",
                path.display(),
                t.expected.as_deref().unwrap_or("(none)")
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_file_without_a_header_is_refused() {
    let dir = std::env::temp_dir().join(format!("tlc-filetest-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join("bad.tir");
    std::fs::write(&path, "@T.prim_func\ndef f():\n    pass\n").expect("write");
    let err = read(&path).err().expect("no header");
    assert!(err.contains("# passes:"), "{err}");
}
