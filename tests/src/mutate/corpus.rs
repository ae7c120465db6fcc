//! What the campaign mutates: every kernel text of the project.

use std::path::{Path, PathBuf};

/// The directories mutated (relative to the workspace root); `tests/cases` with all its
/// kinds (valid, malformed, refused, runtime errors, former mutants).
pub const DIRS: &[&str] = &["tests/cases", "examples", "bench", "tests/tilelang"];

/// One text of the corpus.
#[derive(Clone, Debug)]
pub struct Source {
    /// The path from the workspace root (`examples/gemm_splitk.tir`).
    pub name: String,
    pub text: String,
    /// A case `check` refuses as it is (`tests/cases/malformed/`): drawn less often, since
    /// its mutants rarely reach the pipeline.
    pub malformed: bool,
}

/// Every `.tir` file under [`DIRS`] of the workspace at `root`, sorted by path (so a seed
/// names the same mutants on every machine with the same checkout).
pub fn corpus_at(root: &Path) -> Result<Vec<Source>, String> {
    let mut paths = Vec::new();
    for dir in DIRS {
        collect(&root.join(dir), &mut paths)?;
    }
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            // Not every case is UTF-8 (`binary_garbage.tir`); its mutants are text with
            // the bad bytes replaced.
            let bytes = std::fs::read(&p).map_err(|e| format!("{}: {e}", p.display()))?;
            let text = String::from_utf8_lossy(&bytes).into_owned();
            let name = p
                .strip_prefix(root)
                .unwrap_or(&p)
                .to_string_lossy()
                .into_owned();
            let malformed = name.starts_with("tests/cases/malformed/");
            Ok(Source {
                name,
                text,
                malformed,
            })
        })
        .collect()
}

/// [`corpus_at`] of this checkout.
pub fn corpus() -> Result<Vec<Source>, String> {
    corpus_at(&crate::root())
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for entry in entries {
        let path = entry.map_err(|e| format!("{}: {e}", dir.display()))?.path();
        if path.is_dir() {
            collect(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "tir") {
            out.push(path);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_corpus_holds_every_kind_of_kernel() {
        let all = super::corpus().expect("corpus");
        for dir in super::DIRS {
            assert!(
                all.iter().any(|s| s.name.starts_with(dir)),
                "nothing from {dir}"
            );
        }
        for kind in ["valid", "malformed", "refused", "runtime_errors", "mutants"] {
            let prefix = format!("tests/cases/{kind}/");
            assert!(all.iter().any(|s| s.name.starts_with(&prefix)), "no {kind}");
        }
    }
}
