//! The integration tests of `tlc-runtime`, one module per file of `tests/`, linked into one test
//! binary (docs/ARCHITECTURE.md, "Tests"). A file of `tests/` that is not a module here is
//! not compiled: `tlc-tests`' `topology.rs` fails on one.

mod check;
mod check_fp8;
mod expr;
mod manifest;
mod manifest_kernels;
mod manifest_tensor_maps;
mod no_gpu;
mod prepare;
mod tensor_map;
