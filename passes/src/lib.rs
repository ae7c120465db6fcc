//! `tlc-passes`: the pass manager (`manager.rs`: pipeline text, instrumentation, verify-each)
//! and the passes, one file (or folder) each, every one registered in `pipeline.rs`
//! (`registry()`, `default_pipeline()`; `tlc passes` lists them). See `docs/passes.md`.

pub mod analysis;
pub mod context;
pub mod inject_cp_async;
pub mod inject_software_pipeline;
pub mod instrument;
pub mod layout_inference;
pub mod legalize_safe_memory;
pub mod longest_first;
pub mod lower_reducers;
pub mod lower_reductions;
pub mod lower_tile_ops;
pub mod manager;
pub mod mark_fresh_buffers;
pub mod names;
pub mod pack_int4;
pub mod pass;
pub mod persistent_tiles;
pub mod pipeline;
pub mod pipeline_planning;
pub mod plan_allreduce_scratch;
pub mod plan_shared_memory;
pub mod prefetch_loads;
pub mod rasterize;
pub mod simplify;
pub mod sink_wgmma_wait;
pub mod stage_fragment_reads;
pub mod thread_binding;
pub mod thread_sync;
pub mod tma_multicast;
pub mod unroll;
pub mod version_masks;
pub mod warp_specialize;
pub mod widen_indices;
pub mod widen_int4_gemm;

pub use context::PassContext;
pub use instrument::Instrumentation;
pub use manager::{PassManager, PipelineError};
pub use pass::Pass;
pub use pipeline::{default_pipeline, parse_pipeline, registry, Pipeline};
pub use tlc_ir::Target;
