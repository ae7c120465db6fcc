//! `tlc-passes`: the pass manager (`manager.rs`: registry, pipeline text, instrumentation,
//! verify-each) and the passes, one file (or folder) each: `simplify`, `rasterize`,
//! `unroll`, `thread-binding`, `plan-shared-memory`. See `docs/passes.md`.

pub mod instrument;
pub mod manager;
pub mod names;
pub mod pass;
pub mod pipeline;
pub mod plan_shared_memory;
pub mod rasterize;
pub mod simplify;
pub mod thread_binding;
pub mod unroll;

pub use instrument::Instrumentation;
pub use manager::{PassManager, PipelineError};
pub use pass::Pass;
pub use pipeline::{default_pipeline, parse_pipeline, registry, Pipeline, Target};
