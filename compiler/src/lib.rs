//! `tlc`: the compiler as a library. [`driver`] is its one road from source text to PTX
//! (front end, the target's pass pipeline, code generation); it touches no GPU, no tuning
//! cache and no command line. The `tlc` binary and its tools (bench, tune, run on the
//! device) are the `tlc-tools` crate, which calls this one.

pub mod diagnostics;
pub mod driver;
pub mod frontend;
pub mod parallel;
pub mod plan;

// The back end (`tlc-backend`), under its old paths.
pub use tlc_backend::{codegen, ptx};
