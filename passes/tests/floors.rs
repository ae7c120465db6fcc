//! The floors of `tlc-passes` (docs/ARCHITECTURE.md): analyses never use passes or the
//! pass manager, and a pass never uses another pass: passes share code through
//! `analysis/`, `names.rs`, `context.rs` and `tlc_ir`. Read from the sources, so a new `use`
//! that breaks a floor fails here with the file and the line.

use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(rust_files(&p));
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// The module of the crate a source file belongs to: `lower_tile_ops` for
/// `src/lower_tile_ops/copy.rs`, `unroll` for `src/unroll.rs`.
fn module_of(file: &Path) -> String {
    let rel = file.strip_prefix(src()).unwrap_or(file);
    let first = rel.components().next().map_or(String::new(), |c| {
        c.as_os_str().to_string_lossy().into_owned()
    });
    first.trim_end_matches(".rs").to_string()
}

/// The modules that hold a pass: those whose sources implement `Pass`.
fn pass_modules() -> Vec<String> {
    let mut out: Vec<String> = rust_files(&src())
        .iter()
        .filter(|f| std::fs::read_to_string(f).is_ok_and(|t| t.contains("impl Pass for ")))
        .map(|f| module_of(f))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// `(line number, module)` for every `crate::module` the file names.
fn crate_refs(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            let after = &rest[at + "crate::".len()..];
            let name: String = after
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            out.push((n + 1, name));
            rest = after;
        }
    }
    out
}

#[test]
fn every_registered_pass_lives_in_a_pass_module() {
    let modules = pass_modules();
    assert_eq!(
        modules.len(),
        tlc_passes::registry().len(),
        "pass modules: {modules:?}"
    );
    assert!(modules.iter().any(|m| m == "lower_tile_ops"));
    assert!(!modules.iter().any(|m| m == "analysis"));
}

#[test]
fn passes_never_use_passes_and_analyses_never_use_either() {
    let passes = pass_modules();
    let mut broken = Vec::new();
    for file in rust_files(&src()) {
        let own = module_of(&file);
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        for (line, used) in crate_refs(&text) {
            let other_pass = passes.contains(&used) && used != own;
            let analysis_breaks = own == "analysis"
                && (passes.contains(&used)
                    || ["manager", "pipeline", "instrument", "context"].contains(&used.as_str()));
            if (passes.contains(&own) && other_pass) || analysis_breaks {
                broken.push(format!(
                    "{}:{line}: `{own}` uses `crate::{used}`",
                    file.display()
                ));
            }
        }
    }
    assert!(broken.is_empty(), "floors broken:\n{}", broken.join("\n"));
}

#[test]
fn the_reference_finder_sees_every_use() {
    let refs = crate_refs("use crate::analysis::int; x = crate::unroll::f(crate::names::y)");
    let names: Vec<&str> = refs.iter().map(|(_, n)| n.as_str()).collect();
    assert_eq!(names, ["analysis", "unroll", "names"]);
}
