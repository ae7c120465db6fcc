//! The integration tests of `tlc-ir`, one module per file of `tests/`, linked into one test
//! binary (docs/ARCHITECTURE.md, "Tests"). A file of `tests/` that is not a module here is
//! not compiled: `tlc-tests`' `topology.rs` fails on one.

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
mod reshapes;
mod specialize_meaning;
mod tuning;
mod verify_bounds;
mod verify_hopper;
mod verify_int4;
mod views_im2col;
