//! The canonical print (`tlc fmt`) of every valid case and example, as reviewed snapshots.

use tlc_tests::{relative, stem, valid_cases};

#[test]
fn canonical_print_of_every_case() {
    std::env::set_current_dir(tlc_tests::root()).expect("cd to the workspace root");
    for path in valid_cases() {
        let text = tlc_tools::commands::fmt::run(&relative(&path), &[])
            .unwrap_or_else(|e| panic!("{} does not format:\n{}", path.display(), e.0));
        let dir = path
            .parent()
            .and_then(|p| p.file_name())
            .map(|s| s.to_string_lossy().into_owned());
        let name = format!("fmt__{}__{}", dir.unwrap_or_default(), stem(&path));
        insta::assert_snapshot!(name, text);
    }
}
