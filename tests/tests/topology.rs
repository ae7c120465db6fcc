//! The workspace's test topology (docs/ARCHITECTURE.md, "Tests"): the integration tests of
//! each crate are one binary, whose `tests/integration.rs` declares every file and module
//! folder of the crate's `tests/` as a module. Cargo's discovery is off (`autotests =
//! false`), so a file left out would compile into nothing and never run: this fails on one,
//! naming it, in every member of the workspace.

use std::path::Path;
use tlc_tests::root;

/// The workspace members, from the root manifest's `members = [...]` line.
fn members(manifest: &str) -> Vec<String> {
    let Some(line) = manifest
        .lines()
        .find(|l| l.trim_start().starts_with("members"))
    else {
        return Vec::new();
    };
    line.split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// The files and module folders of `tests/` that `integration.rs` (`root_text`) does not
/// declare with a `mod NAME;` line.
fn undeclared(tests: &Path, root_text: &str) -> Vec<String> {
    let mut missing = Vec::new();
    let Ok(entries) = std::fs::read_dir(tests) else {
        return missing;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        let is_rust = path.extension().is_some_and(|e| e == "rs");
        let is_module_dir = path.join("mod.rs").is_file();
        let declared = root_text.lines().any(|l| l == format!("mod {stem};"));
        if ((is_rust && stem != "integration") || is_module_dir) && !declared {
            missing.push(stem.to_string());
        }
    }
    missing.sort();
    missing
}

#[test]
fn every_test_file_is_a_module_of_its_crates_one_binary() {
    let root = root();
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("the root manifest");
    let members = members(&manifest);
    assert!(members.len() >= 8, "members read: {members:?}");
    let mut problems = Vec::new();
    let mut checked = 0;
    for member in &members {
        let tests = root.join(member).join("tests");
        let has_rust = std::fs::read_dir(&tests).is_ok_and(|entries| {
            entries
                .flatten()
                .any(|e| e.path().extension().is_some_and(|x| x == "rs"))
        });
        if !has_rust {
            continue;
        }
        checked += 1;
        let Ok(root_text) = std::fs::read_to_string(tests.join("integration.rs")) else {
            problems.push(format!("{member}/tests has no integration.rs"));
            continue;
        };
        let cargo =
            std::fs::read_to_string(root.join(member).join("Cargo.toml")).unwrap_or_default();
        if !cargo.contains("autotests = false")
            || !cargo.contains("path = \"tests/integration.rs\"")
        {
            problems.push(format!(
                "{member}/Cargo.toml: not `autotests = false` with one [[test]] at tests/integration.rs"
            ));
        }
        for stem in undeclared(&tests, &root_text) {
            problems.push(format!(
                "{member}/tests/{stem}: not declared in integration.rs"
            ));
        }
    }
    assert!(
        checked >= 6,
        "only {checked} crates with integration tests found"
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_checker_finds_an_undeclared_file() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("topology-check");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("helpers")).expect("a scratch folder");
    for (name, text) in [
        ("integration.rs", "mod a;\n"),
        ("a.rs", ""),
        ("b.rs", ""),
        ("helpers/mod.rs", ""),
    ] {
        std::fs::write(dir.join(name), text).expect("a scratch file");
    }
    assert_eq!(undeclared(&dir, "mod a;\n"), ["b", "helpers"]);
    assert_eq!(
        members("[workspace]\nmembers = [\"ir-spec\", \"abi\"]\n"),
        ["ir-spec", "abi"]
    );
}
