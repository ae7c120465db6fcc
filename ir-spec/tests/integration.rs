//! The integration tests of `tlc-ir`, one module per file of `tests/`, linked into one test
//! binary (docs/ARCHITECTURE.md, "Tests"). A file of `tests/` that is not
//! a module here is not compiled: `every_test_file_is_a_module` fails on one.

mod interp_support;

mod allreduce;
mod fresh;
mod generated_names;
mod hopper_text;
mod interp_atomics;
mod interp_errors;
mod interp_gemm;
mod interp_hopper;
mod interp_intrinsics;
mod interp_npy;
mod interp_ops;
mod interp_threads;
mod interp_warp_specialized;
mod parse_constructs;
mod parse_errors;
mod parse_fixtures;
mod parse_kernels;
mod parse_literals;
mod parse_operators;
mod parse_tile_walks;
mod reducers;
mod tuning;
mod verify_bounds;
mod verify_hopper;
mod views_im2col;

/// Cargo no longer discovers `tests/*.rs` (`autotests = false`), so a test file left out
/// of the list above would silently never run.
#[test]
fn every_test_file_is_a_module() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let root = include_str!("integration.rs");
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("tests/ is readable") {
        let path = entry.expect("a directory entry").path();
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        let declared = root.lines().any(|l| l == format!("mod {stem};"));
        let is_rust = path.extension().is_some_and(|e| e == "rs");
        let is_module_dir = path.join("mod.rs").is_file();
        if ((is_rust && stem != "integration") || is_module_dir) && !declared {
            missing.push(stem.to_string());
        }
    }
    assert!(
        missing.is_empty(),
        "not declared in tests/integration.rs: {missing:?}"
    );
}
