//! Helpers shared by the compiler's integration tests. Each test file uses a different
//! subset, hence the `dead_code` allowance.
#![allow(dead_code)]

pub mod emit;
pub mod immediates;
pub mod toolchain;

pub use toolchain::ptxas_log;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The workspace root: tests run `tlc` from there, as the README does.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// Runs the `tlc` binary with `args` from the workspace root.
pub fn tlc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tlc"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("run tlc")
}

/// Lossy text of an output stream.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}
