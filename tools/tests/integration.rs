//! The integration tests of `tlc-tools`, one module per file of `tests/`, linked into one test
//! binary (docs/ARCHITECTURE.md, "Tests"). A file of `tests/` that is not a module here is
//! not compiled: `tlc-tests`' `topology.rs` fails on one.

mod common;

mod bench;
mod cli;
mod cli_limits;
mod codegen_atomic_vectors;
mod codegen_kernels;
mod codegen_tma;
mod compile;
mod gemm_compile;
mod opt;
mod plan_deepgemm;
mod plan_space;
mod ptx_identity;
mod run;
mod tune_fp8;
mod tuning_cache;
mod tuning_cli;
