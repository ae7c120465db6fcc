//! The integration tests of `tlc-tests`, one module per file of `tests/`, linked into one test
//! binary (docs/ARCHITECTURE.md, "Tests"). A file of `tests/` that is not a module here is
//! not compiled: `tlc-tests`' `topology.rs` fails on one.

mod diagnostics;
mod fmt_snapshots;
mod grid_sync;
mod interp_cases;
mod mutations;
mod parse_mutations;
mod pipeline_mutations;
mod print;
mod refused;
mod roundtrip;
mod run_errors;
mod safe_memory;
mod tilelang_examples;
mod topology;
