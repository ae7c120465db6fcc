//! The command line, as clap types. See `docs/cli.md` for the user guide.

use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(
    name = "tlc",
    version,
    about = "A compiler for GPU tile kernels written in TileLang's language",
    long_about = "tlc reads TileLang-style `@T.prim_func` kernels (the DSL, or the TVMScript \
                  that TileLang prints), checks them, interprets them on the CPU, and lowers \
                  them to PTX."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the kernel in canonical form to stdout.
    Fmt {
        /// The kernel source (`.tir`).
        file: PathBuf,
        /// Bind a symbolic dimension to a constant, e.g. `-D M=4096` (repeatable).
        #[arg(short = 'D', value_name = "NAME=VALUE")]
        define: Vec<String>,
    },
    /// Parse and verify the kernel; print nothing on success.
    Check {
        /// The kernel source (`.tir`).
        file: PathBuf,
        /// Bind a symbolic dimension to a constant, e.g. `-D M=4096` (repeatable).
        #[arg(short = 'D', value_name = "NAME=VALUE")]
        define: Vec<String>,
    },
    /// Run the kernel: `--interp` on the CPU with the reference interpreter.
    Run {
        /// The kernel source (`.tir`).
        file: PathBuf,
        /// Run in the reference interpreter (required: `--device` arrives with the PTX back end).
        #[arg(long, required = true)]
        interp: bool,
        /// Seed of the random data for parameters not given with `--input`.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// A parameter's data, e.g. `--input A=a.npy` (repeatable); its dtype and shape must
        /// match the parameter.
        #[arg(long = "input", value_name = "NAME=X.npy")]
        inputs: Vec<String>,
        /// Write every parameter to DIR/NAME.npy after the run.
        #[arg(long, value_name = "DIR")]
        save_dir: Option<PathBuf>,
        /// Bind a symbolic dimension to a constant, e.g. `-D M=4096` (repeatable).
        #[arg(short = 'D', value_name = "NAME=VALUE")]
        define: Vec<String>,
    },
}
