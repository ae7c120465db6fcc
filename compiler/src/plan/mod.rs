//! Choosing a kernel's configuration without running it (`tlc plan`).
//!
//! `cost`: the estimated time `space` ranks by first.
//! `deepgemm`: DeepGEMM's heuristic for its FP8 GEMM, rule for rule (seed 004).
//! `space`: any kernel's tuning space ranked by seed 004's rules, generalized.
//! `waves`: the wave arithmetic both use.

pub mod cost;
pub mod deepgemm;
pub mod space;
pub mod waves;
