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

/// Runs the `tlc` binary with `args` from the workspace root, away from the user's tuning
/// cache (an empty cache directory), so that a tuned config on this machine cannot change
/// what a test sees.
pub fn tlc(args: &[&str]) -> Output {
    let dir = empty_cache_dir();
    tlc_with_env(args, &[("TLC_CACHE_DIR", dir.as_os_str())])
}

/// [`tlc`] with environment variables set (and `TLC_CACHE_DEVICE` unset unless given).
pub fn tlc_with_env(args: &[&str], env: &[(&str, &std::ffi::OsStr)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tlc"));
    command
        .args(args)
        .current_dir(root())
        .env_remove("TLC_CACHE_DEVICE");
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().expect("run tlc")
}

/// A cache directory nothing is stored in: lookups miss.
pub fn empty_cache_dir() -> PathBuf {
    std::env::temp_dir().join(format!("tlc-tests-empty-cache-{}", std::process::id()))
}

/// Lossy text of an output stream.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}
