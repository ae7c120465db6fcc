//! The integration tests of `tlc`, one module per file of `tests/`, linked into one test
//! binary (docs/ARCHITECTURE.md, "Tests"). A file of `tests/` that is not a module here is
//! not compiled: `tlc-tests`' `topology.rs` fails on one.

mod common;
mod ptx_cases;

mod blocks;
mod codegen;
mod codegen_8bit;
mod codegen_allreduce;
mod codegen_atomics;
mod codegen_intrinsics;
mod codegen_local;
mod codegen_rng;
mod floors;
mod ptxas;
