//! Run-time errors of the interpreter (`tlc run --interp`) are located, rendered diagnostics:
//! one reviewed snapshot per error class.

use tlc_tests::{relative, root, stem};

#[test]
fn runtime_errors_render_located_diagnostics() {
    std::env::set_current_dir(root()).expect("cd to the workspace root");
    let dir = root().join("tests/cases/runtime_errors");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .expect("list runtime error cases")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    paths.sort();
    assert!(paths.len() >= 4);
    for path in paths {
        let rel = relative(&path);
        let args = tlc_tools::commands::run::RunArgs {
            widen: None,
            file: &rel,
            defines: &[],
            inputs: &[],
            seed: 0,
            save_dir: None,
            tuning: tlc_tools::tunables::Tuning::DEFAULTS,
        };
        let err = match tlc_tools::commands::run::run(&args) {
            Ok(report) => panic!("{} ran without error:\n{report}", path.display()),
            Err(e) => e.0,
        };
        assert!(err.starts_with(&format!("{}:", rel.display())), "{err}");
        assert!(err.contains('^'), "{err}");
        insta::assert_snapshot!(format!("run_error__{}", stem(&path)), err);
    }
}
