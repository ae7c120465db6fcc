//! The integration tests of `tlc-passes`, one module per file of `tests/`, linked into one test
//! binary (docs/ARCHITECTURE.md, "Tests"). A file of `tests/` that is not a module here is
//! not compiled: `tlc-tests`' `topology.rs` fails on one.

mod common;
mod pipe;
mod simt;

mod filetests;
mod floors;
mod gemm;
mod gemm_pipeline;
mod inject_cp_async;
mod inject_software_pipeline;
mod lower_tile_ops;
mod manager;
mod mark_fresh_buffers;
mod notes;
mod pack_int4;
mod pipeline_planning;
mod plan_shared_memory;
mod rasterize;
mod reducers;
mod reductions;
mod simplify;
mod thread_binding;
mod thread_sync;
mod tma;
mod unroll;
mod widen_indices;
