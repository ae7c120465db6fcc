//! Every malformed input is rejected with `FILE:LINE:COL: error: …`, the source line and a
//! caret, exactly as `tlc check` prints it; the rendered text is a reviewed snapshot.

use tlc_tests::{malformed_cases, relative, stem};

#[test]
fn malformed_inputs_render_located_errors() {
    std::env::set_current_dir(tlc_tests::root()).expect("cd to the workspace root");
    for path in malformed_cases() {
        let rel = relative(&path);
        let err = match tlc_tools::commands::check::run(&rel, &[], false) {
            Ok(()) => panic!("{} was accepted", path.display()),
            Err(e) => e.0,
        };
        let header = err.lines().next().unwrap_or_default();
        let prefix = format!("{}:", rel.display());
        let located = header
            .strip_prefix(&prefix)
            .and_then(|rest| rest.split_once(": error: "))
            .map(|(loc, _)| {
                loc.split(':').all(|n| n.parse::<usize>().is_ok()) && loc.contains(':')
            });
        assert_eq!(
            located,
            Some(true),
            "{}: header is not FILE:LINE:COL: error: …\n{err}",
            path.display()
        );
        assert!(err.contains('^'), "{}: no caret\n{err}", path.display());
        // The deep-nesting input is 40 kB on one line; snapshot only its head.
        let shown: String = err.lines().map(|l| format!("{}\n", truncate(l))).collect();
        insta::assert_snapshot!(format!("diag__{}", stem(&path)), shown);
    }
}

fn truncate(line: &str) -> String {
    if line.chars().count() > 160 {
        let head: String = line.chars().take(160).collect();
        format!("{head}…")
    } else {
        line.to_string()
    }
}
