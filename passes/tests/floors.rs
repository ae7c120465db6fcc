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

/// The module path of a source file: `["lower_tile_ops", "copy"]` for
/// `src/lower_tile_ops/copy.rs`, `["lower_tile_ops"]` for its `mod.rs`, `[]` for `lib.rs`.
fn module_path(file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src()).unwrap_or(file);
    let mut path: Vec<String> = rel
        .components()
        .map(|c| {
            c.as_os_str()
                .to_string_lossy()
                .trim_end_matches(".rs")
                .to_string()
        })
        .collect();
    if path.last().is_some_and(|l| l == "mod" || l == "lib") {
        path.pop();
    }
    path
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// `(line number, module)` for every top-level module of the crate that the text of the
/// file at `own` (its module path) names: `crate::m`, `crate::{m::X, n}` (groups over
/// lines too), `super::m` where the `super`s reach the crate root, `self::m` in `lib.rs`.
/// A path that stays inside the file's own top-level module names nothing else.
fn crate_refs(text: &str, own: &[String]) -> Vec<(usize, String)> {
    let line_of = |at: usize| text[..at].matches('\n').count() + 1;
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < text.len() {
        let rest = &text[i..];
        let boundary = i == 0 || !is_ident(char::from(bytes[i - 1]));
        let prefix = ["crate::", "super::", "self::"]
            .into_iter()
            .find(|p| boundary && rest.starts_with(p));
        let Some(prefix) = prefix else {
            i += rest.chars().next().map_or(1, char::len_utf8);
            continue;
        };
        // The module the path starts from, and where its next segment begins.
        let mut base: Vec<String> = match prefix {
            "crate::" => Vec::new(),
            _ => own.to_vec(),
        };
        let mut at = i + prefix.len();
        if prefix == "super::" {
            base.pop();
            while text[at..].starts_with("super::") {
                base.pop();
                at += "super::".len();
            }
        }
        i = at;
        if !base.is_empty() {
            continue; // still inside the file's own top-level module
        }
        // At the crate root: the next segment, or each first segment of a `{…}` group.
        if text[at..].starts_with('{') {
            let mut depth = 0;
            let mut expect_name = true;
            for (k, c) in text[at..].char_indices() {
                match c {
                    '{' => {
                        depth += 1;
                        expect_name = depth == 1;
                    }
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    ',' if depth == 1 => expect_name = true,
                    c if expect_name && depth == 1 && is_ident(c) => {
                        let name: String = text[at + k..]
                            .chars()
                            .take_while(|&c| is_ident(c))
                            .collect();
                        out.push((line_of(at + k), name));
                        expect_name = false;
                    }
                    c if expect_name && !c.is_whitespace() => expect_name = false,
                    _ => {}
                }
            }
        } else {
            let name: String = text[at..].chars().take_while(|&c| is_ident(c)).collect();
            if !name.is_empty() {
                out.push((line_of(at), name));
            }
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
        for (line, used) in crate_refs(&text, &module_path(&file)) {
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
    let names = |text: &str, own: &[&str]| -> Vec<String> {
        let own: Vec<String> = own.iter().map(|s| s.to_string()).collect();
        crate_refs(text, &own).into_iter().map(|(_, n)| n).collect()
    };
    assert_eq!(
        names(
            "use crate::analysis::int; x = crate::unroll::f(crate::names::y)",
            &["a"]
        ),
        ["analysis", "unroll", "names"]
    );
    // Groups, over lines, nested.
    assert_eq!(
        names(
            "use crate::{\n    thread_binding::X,\n    analysis::{int, rows},\n    names,\n};",
            &["a"]
        ),
        ["thread_binding", "analysis", "names"]
    );
    // `super::` from a top-level file reaches the root; from a folder's file, its folder.
    assert_eq!(names("use super::unroll::Y;", &["simplify"]), ["unroll"]);
    assert_eq!(
        names("use super::fragment::F;", &["lower_tile_ops", "copy"]),
        Vec::<String>::new()
    );
    assert_eq!(
        names(
            "use super::super::{unroll, names};",
            &["lower_tile_ops", "copy"]
        ),
        ["unroll", "names"]
    );
    // `self::` names the file's own module; at the root (`lib.rs`), a top-level one.
    assert_eq!(names("use self::x;", &["unroll"]), Vec::<String>::new());
    assert_eq!(names("pub use self::unroll::Unroll;", &[]), ["unroll"]);
    // Not a path: `Self::`, `myself::`, and a line on which the pattern is part of a name.
    assert_eq!(
        names("Self::new(); myself::x; notcrate::y", &["a"]),
        Vec::<String>::new()
    );
    assert_eq!(names("use super::*;", &["unroll"]), Vec::<String>::new());
}
