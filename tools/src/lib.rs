//! `tlc-tools`: the `tlc` command line (`cli`, `commands`) and the tools around the compiler
//! that need a GPU, a disk or a clock: `bench`, `tune`, `run --device`, the tuning cache
//! (`cache`) and the choice of open tunables from it (`tunables`), the FP8 data generator.
//! Everything here compiles through `tlc::driver`; the compiler crate links none of this
//! (no CUDA driver, no cuBLAS).

pub mod cache;
pub mod cli;
pub mod commands;
pub mod tunables;
