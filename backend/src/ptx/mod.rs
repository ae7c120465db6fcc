//! The PTX back end's bottom layer: a small PTX AST with virtual registers, its printer, and
//! the builder codegen writes kernels with.
//!
//! - `ast`: `Module` (`.version` per target — 8.0 for both `sm_80` and `sm_90a`, 8.1 for a
//!   module with a vector `red`, 8.3 for one with TMA tensor maps — `.target`,
//!   `.address_size 64`) of `Kernel`s (params —
//!   scalars, and 128-byte tensor maps as `.align 64 .b8` arrays — shared variables,
//!   `.reqntid`, a body of labels, comments and `Inst`s). An `Inst` is an optional guard
//!   (`@%p` / `@!%p`) plus a typed `Op`: integer and float arithmetic, `setp`/`selp`, `bra`,
//!   `ld`/`st` in every state space with `.v2`/`.v4`, `cvta`, `cvt` with roundings and
//!   `.sat`, packing (`mov.b32 {lo, hi}`, `cvt.rn.f16x2.f32`), `bar.sync`, the tensor-core
//!   path's `cp.async`, `ldmatrix` and `mma.sync`, and sm_90a's mbarriers,
//!   `cp.async.bulk.tensor`, fences, wgmma and `setmaxnreg`. Registers are `Reg { class, id }`, printed `%r12`, `%rd3`,
//!   `%f7`, `%h2`, `%p1`, `%fd1`; each instruction reports the registers it defines and uses.
//! - `builder`: `KernelBuilder` hands out registers and labels, declares parameters (in the
//!   launch manifest's order with `params_from_manifest`) and emits instructions.
//! - `printer`: PTX text in nvcc's layout; `print_with_manifest` puts the
//!   `// tlc-manifest: {json}` line first (`docs/manifest.md`).
//! - `manifest`: checks a kernel's parameters against its manifest.
//!
//! The AST does not re-check PTX's typing rules: ptxas does, in `compiler/tests/ptxas.rs`,
//! which assembles kernels for both targets (`scripts/install-ptxas.sh` provides ptxas).

pub mod ast;
pub mod builder;
pub mod manifest;
pub mod printer;

pub use ast::*;
pub use builder::{default_cvt_round, KernelBuilder, ParamRef};
pub use manifest::check_manifest;
pub use printer::{print_module, print_with_manifest};
