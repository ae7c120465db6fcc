//! Helpers of `tlc-tools`' integration tests: the compiler tests' (`compiler/tests/common`,
//! included by path) and running the `tlc` binary, which this crate builds.
#![allow(dead_code)]

#[path = "../../../compiler/tests/common/mod.rs"]
mod compiler_common;

pub use compiler_common::*;

use std::path::PathBuf;
use std::process::{Command, Output};

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
