//! Shared helpers of the end-to-end tests: where the cases live, and how to run the
//! front end on one of them the way the `tlc` binary does.

use std::path::{Path, PathBuf};

/// The workspace root (the parent of this crate).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

fn tir_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "tir"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no .tir files in {}", dir.display());
    files
}

/// Kernels that must parse, verify and round-trip: `tests/cases/valid/` and `examples/`.
pub fn valid_cases() -> Vec<PathBuf> {
    let mut all = tir_files(&root().join("tests/cases/valid"));
    all.extend(tir_files(&root().join("examples")));
    all
}

/// Inputs that must be rejected with a rendered error.
pub fn malformed_cases() -> Vec<PathBuf> {
    tir_files(&root().join("tests/cases/malformed"))
}

/// The file's stem, used to name its snapshots.
pub fn stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The path as the user would type it from the workspace root, so rendered diagnostics do not
/// depend on where the checkout lives.
pub fn relative(path: &Path) -> PathBuf {
    path.strip_prefix(root())
        .map(Path::to_path_buf)
        .unwrap_or_else(|_| path.to_path_buf())
}
