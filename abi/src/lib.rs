//! `tlc-abi`: the contract between the compiler and the runtime, and nothing that needs a
//! GPU. The launch manifest `tlc compile` writes on the PTX's first line (`docs/manifest.md`),
//! the dim expressions in it, and `RuntimeError`, in which checking a launch against a
//! manifest reports. The compiler depends on this crate, not on `tlc-runtime` (which
//! re-exports all three modules), so it never links the CUDA driver or cuBLAS.

pub mod error;
pub mod expr;
pub mod manifest;
