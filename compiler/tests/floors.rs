//! The crate floors of the workspace (docs/ARCHITECTURE.md, "Crates and floors"), read from
//! each crate's `Cargo.toml`: the compiler crates link no GPU code and no command line, the
//! back end knows nothing of the driver, the runtime compiles nothing. Cargo already refuses
//! a cycle; this refuses a new dependency that would break a floor, naming the crate, the
//! dependency and the floor.

use std::path::Path;

/// Each crate folder, the dependencies it must never have, and the floor that says so.
const FLOORS: &[(&str, &[&str], &str)] = &[
    (
        "ir-spec",
        &[
            "tlc-abi",
            "tlc-passes",
            "tlc-backend",
            "tlc",
            "tlc-runtime",
            "tlc-tools",
        ],
        "the IR is the lowest floor",
    ),
    (
        "abi",
        &[
            "tlc-passes",
            "tlc-backend",
            "tlc",
            "tlc-runtime",
            "tlc-tools",
            "cudarc",
            "clap",
        ],
        "the manifest is shared by compiler and runtime, and needs neither",
    ),
    (
        "passes",
        &[
            "tlc-backend",
            "tlc",
            "tlc-runtime",
            "tlc-tools",
            "cudarc",
            "clap",
        ],
        "passes lower IR; they know nothing of PTX, the driver or the GPU",
    ),
    (
        "backend",
        &["tlc", "tlc-runtime", "tlc-tools", "cudarc", "clap"],
        "the back end knows nothing of the driver (backend ← driver)",
    ),
    (
        "compiler",
        &[
            "tlc-runtime",
            "tlc-tools",
            "cudarc",
            "clap",
            "indicatif",
            "tempfile",
        ],
        "the driver is pure: no GPU, no command line, no tuning cache (driver ← tools)",
    ),
    (
        "runtime",
        &["tlc-passes", "tlc-backend", "tlc", "tlc-tools"],
        "the runtime loads and launches PTX; it compiles nothing",
    ),
];

/// The names in the `[dependencies]` table of a `Cargo.toml` text (`name = …` and
/// `name.workspace = true` lines).
fn dependencies(toml: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in toml.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            inside = line == "[dependencies]";
            continue;
        }
        if !inside || line.is_empty() || line.starts_with('#') {
            continue;
        }
        let name = line
            .split(|c: char| c == '=' || c == '.' || c.is_whitespace())
            .next()
            .unwrap_or("");
        if !name.is_empty() {
            out.push(name.to_string());
        }
    }
    out
}

#[test]
fn no_crate_depends_across_its_floor() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut broken = Vec::new();
    for (folder, never, floor) in FLOORS {
        let path = root.join(folder).join("Cargo.toml");
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let deps = dependencies(&text);
        assert!(!deps.is_empty(), "{folder}/Cargo.toml: no dependency read");
        for dep in deps.iter().filter(|d| never.contains(&d.as_str())) {
            broken.push(format!("{folder}/Cargo.toml depends on `{dep}`: {floor}"));
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

#[test]
fn the_dependency_reader_sees_both_forms_and_only_the_table() {
    let toml = "[package]\nname = \"x\"\n\n[dependencies]\ntlc-ir.workspace = true\n\
                # a comment\nserde = { version = \"1\" }\n\n[dev-dependencies]\ninsta = \"1\"\n";
    assert_eq!(dependencies(toml), ["tlc-ir", "serde"]);
}
