//! Kernels `tlc check` accepts but `tlc compile` refuses — a pass or code generation finds
//! what cannot be compiled — are refused with located errors: `FILE:LINE:COL: error: …`,
//! the source line and a caret, at the statement or value the error is about (never at
//! line 1, column 1 for want of a location: an error about code an earlier pass made points
//! at the source it was made from). Both targets refuse alike; the rendered text is a
//! reviewed snapshot.

use tlc::driver::{source_to_ptx, verdict, Verdict};
use tlc_ir::Target;
use tlc_tests::{refused_cases, relative, stem};

#[test]
fn refused_kernels_render_located_errors() {
    std::env::set_current_dir(tlc_tests::root()).expect("cd to the workspace root");
    for path in refused_cases() {
        let rel = relative(&path);
        let name = rel.display().to_string();
        let text = std::fs::read_to_string(&path).expect("read case");
        if let Err(e) = tlc_tools::commands::check::run(&rel, &[], false) {
            panic!("{name}: `tlc check` refuses it:\n{}", e.0);
        }
        let mut rendered = Vec::new();
        for target in [Target::Sm80, Target::Sm90a] {
            // The compile road's oracle: refused, every error at a location.
            match verdict(&text, target) {
                Verdict::Refused(_) => {}
                other => panic!("{name} on {target}: {other:?}"),
            }
            let err = match source_to_ptx(&name, &text, target) {
                Ok(_) => panic!("{name} compiled for {target}"),
                Err(e) => e.0,
            };
            let headers: Vec<&str> = err
                .lines()
                .filter(|l| l.starts_with(&format!("{name}:")))
                .collect();
            assert!(!headers.is_empty(), "{name} on {target}: no header\n{err}");
            for h in &headers {
                let loc = h
                    .strip_prefix(&format!("{name}:"))
                    .and_then(|rest| rest.split_once(": error: "))
                    .map(|(loc, _)| loc.to_string());
                let Some(loc) = loc else {
                    panic!("{name}: `{h}` is not FILE:LINE:COL: error: …");
                };
                assert!(
                    loc.split(':').all(|n| n.parse::<usize>().is_ok()) && loc.contains(':'),
                    "{name}: `{h}` is not FILE:LINE:COL: error: …"
                );
                assert_ne!(
                    loc, "1:1",
                    "{name} on {target}: an error with no location\n{err}"
                );
            }
            assert!(err.contains('^'), "{name}: no caret\n{err}");
            rendered.push(err);
        }
        assert_eq!(
            rendered[0], rendered[1],
            "{name}: sm_80 and sm_90a refuse it differently"
        );
        insta::assert_snapshot!(stem(&path), rendered[0]);
    }
}
