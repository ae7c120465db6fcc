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

/// Kernels `tlc check` accepts and `tlc compile` refuses (a pass or code generation), with
/// located errors: `tests/cases/refused/`.
pub fn refused_cases() -> Vec<PathBuf> {
    tir_files(&root().join("tests/cases/refused"))
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

/// Seeded text mutation, shared by the mutation tests (`parse_mutations.rs`, the front end;
/// `pipeline_mutations.rs`, the whole compile road).
pub mod mutate {
    /// xorshift64*: a small deterministic generator, so a failure reproduces from its seed.
    pub struct Rng(pub u64);

    impl Rng {
        pub fn next_u64(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }

        /// Uniform in `0..n` (0 when `n` is 0).
        pub fn below(&mut self, n: usize) -> usize {
            if n == 0 {
                0
            } else {
                (self.next_u64() % n as u64) as usize
            }
        }

        /// One of `items`; `None` when there are none.
        pub fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
            items.get(self.below(items.len()))
        }
    }

    /// Token-ish pieces: runs of word characters, and single other characters.
    pub fn pieces(src: &str) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for c in src.chars() {
            let word = c.is_alphanumeric() || c == '_';
            match out.last_mut() {
                Some(last) if word && last.chars().all(|l| l.is_alphanumeric() || l == '_') => {
                    last.push(c)
                }
                _ => out.push(c.to_string()),
            }
        }
        out
    }
}
