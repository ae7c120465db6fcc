//! Choosing a kernel's configuration without running it (`tlc plan`).
//!
//! `deepgemm`: DeepGEMM's heuristic for its FP8 GEMM, rule for rule (seed 004).

pub mod deepgemm;
