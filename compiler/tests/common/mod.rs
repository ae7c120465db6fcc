//! Helpers shared by the compiler's integration tests (and, by path, by `tlc-tools`' and
//! `tlc-tests`'). Each test file uses a different subset, hence the `dead_code` allowance.
#![allow(dead_code)]

pub mod emit;
pub mod immediates;
pub mod toolchain;

pub use toolchain::ptxas_log;

use std::path::{Path, PathBuf};

/// The workspace root: tests read cases and run `tlc` from there, as the README does.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// Lossy text of an output stream.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}
