//! `tlc-backend`: **the one back end seam**. [`codegen::emit`] takes a planned thread-level
//! function with the verifier's facts about it (`FuncInfo`) and a target, and returns a PTX
//! module ([`ptx`]: an AST with virtual registers, its builder and printer) with the launch
//! manifest (`tlc_abi::manifest`). It knows nothing of the driver above it (no front end,
//! no pipeline, no tuning, no files): the crate boundary is the floor.

pub mod codegen;
pub mod ptx;
