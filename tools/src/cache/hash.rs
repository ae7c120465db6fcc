//! FNV-1a, 64 bits: the tuning cache's key hash — the project's one definition
//! (`tlc_ir::hash`), stable across Rust versions and platforms because the key names a file
//! (std's `DefaultHasher` promises neither). Reference vectors are tested there.

pub use tlc_ir::hash::{fnv1a, Fnv1a};
