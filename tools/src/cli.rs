//! The command line, as clap types. See `docs/cli.md` for the user guide.

use crate::tunables::{TuneTarget, Tuning};
use clap::{ArgGroup, Args, Parser, Subcommand, ValueEnum};
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
        /// Say on stderr where each tunable's value comes from (`check` has no target, so
        /// the tunables `-D` leaves open take their defaults).
        #[arg(short = 'v', long)]
        verbose: bool,
    },
    /// Compile the kernel to PTX (with its launch manifest on the first line).
    Compile {
        /// The kernel source (`.tir`).
        file: PathBuf,
        /// Where to write the PTX (or the IR with `--emit=tir`); `-` for stdout.
        #[arg(short = 'o', value_name = "OUT.ptx")]
        output: PathBuf,
        /// The GPU target.
        #[arg(long, value_name = "sm_80|sm_90a", default_value = "sm_80")]
        target: String,
        /// Bind a symbolic dimension to a constant, e.g. `-D M=4096` (repeatable).
        #[arg(short = 'D', value_name = "NAME=VALUE")]
        define: Vec<String>,
        /// What to write: PTX, or the IR after the pipeline.
        #[arg(long, value_enum, default_value_t = EmitFlag::Ptx)]
        emit: EmitFlag,
        /// The SMs of the GPU the kernel will run on, which persistent kernels launch one
        /// block per (per `T.min_blocks_per_sm`); default: the target's usual count (132 for
        /// sm_90a). A GPU with other counts runs the kernel correctly.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(i64).range(1..=4096))]
        sms: Option<i64>,
        #[command(flatten)]
        instrument: InstrumentFlags,
        #[command(flatten)]
        tuning: TuningFlags,
    },
    /// Run the kernel: `--interp` on the CPU with the reference interpreter, or `--device` on
    /// the GPU, compared with the interpreter.
    #[command(group(ArgGroup::new("mode").required(true).args(["interp", "device"])))]
    Run {
        /// The kernel source (`.tir`).
        file: PathBuf,
        /// Run in the reference interpreter.
        #[arg(long)]
        interp: bool,
        /// Compile, run on GPU 0 and compare every parameter with the interpreter.
        #[arg(long)]
        device: bool,
        /// With `--device`: the target to compile for (default: sm_90a on a compute
        /// capability 9.0 GPU, else sm_80).
        #[arg(long, value_name = "sm_80|sm_90a", conflicts_with = "interp")]
        target: Option<String>,
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
        #[command(flatten)]
        tuning: TuningFlags,
        /// With `--device`: widen the absolute tolerance of float outputs to at least X (for
        /// kernels whose float16 intermediates or float32 atomics the GPU rounds or orders
        /// otherwise than the interpreter; docs/cli.md).
        #[arg(long, value_name = "X", conflicts_with = "interp", value_parser = nonnegative_float)]
        atol: Option<f64>,
        /// With `--device`: widen the relative tolerance of float outputs to at least X.
        #[arg(long, value_name = "X", conflicts_with = "interp", value_parser = nonnegative_float)]
        rtol: Option<f64>,
    },
    /// Run chosen passes on a kernel (any level's text) and print the resulting IR.
    Opt {
        /// The kernel source (`.tir`).
        file: PathBuf,
        /// Bind a symbolic dimension to a constant, e.g. `-D M=4096` (repeatable).
        #[arg(short = 'D', value_name = "NAME=VALUE")]
        define: Vec<String>,
        /// The passes to run, in order, e.g. `--passes=rasterize,simplify` (see `tlc passes`).
        #[arg(long, value_name = "P1,P2,...", default_value = "")]
        passes: String,
        /// The GPU target the passes compile for (its limits and capabilities).
        #[arg(long, value_name = "sm_80|sm_90a", default_value = "sm_80")]
        target: String,
        /// The SMs of the GPU the kernel will run on (what `warp-specialize` makes a
        /// persistent grid of); default: the target's usual count (132 for sm_90a).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(i64).range(1..=4096))]
        sms: Option<i64>,
        #[command(flatten)]
        instrument: InstrumentFlags,
        #[command(flatten)]
        tuning: TuningFlags,
    },
    /// List the passes with their descriptions; with `--target`, that target's default
    /// pipeline in order.
    Passes {
        /// Print the default pipeline of this target (what `tlc compile --target` runs).
        #[arg(long, value_name = "sm_80|sm_90a")]
        target: Option<String>,
    },
    /// Benchmark a kernel on GPU 0: a GEMM against cuBLAS (check, TFLOP/s, ratio), or any
    /// kernel against a device-to-device copy (GB/s, ratio).
    Bench {
        /// The kernel source (`.tir`). `--vs cublas`: a GEMM with parameters A (M, K)
        /// float16, B (K, N) float16, C (M, N) float16 or float32. `--vs copy`: any kernel.
        file: PathBuf,
        /// Bind a symbolic dimension to a constant, e.g. `-D M=4096` (repeatable; with
        /// `--vs copy` a name given several times is swept over its values).
        #[arg(short = 'D', value_name = "NAME=VALUE")]
        define: Vec<String>,
        /// The reference to compare with and time against.
        #[arg(long = "vs", value_enum, default_value_t = Baseline::Cublas)]
        baseline: Baseline,
        /// `--vs cublas`: shapes to run, `M,N,K;M,N,K;...`, bound to the kernel's symbolic
        /// dims (default: the kernel's own constant shape).
        #[arg(long, value_name = "M,N,K;...")]
        sweep: Option<String>,
        /// `--vs copy`: shapes to run, `NAME=VALUE,...;NAME=VALUE,...`, each combined with
        /// the `-D` bindings.
        #[arg(long, value_name = "NAME=VALUE,...;...")]
        shapes: Option<String>,
        /// `--vs cublas`: compile each shape with its sizes as constants (as `-D` would)
        /// instead of binding them at launch.
        #[arg(long)]
        specialize: bool,
        /// Untimed runs before the timed ones.
        #[arg(long, value_name = "N", default_value_t = 10)]
        warmup: usize,
        /// Timed runs; the median is reported.
        #[arg(long, value_name = "N", default_value_t = 50)]
        iters: usize,
        /// The target to compile for (default: sm_90a on a compute capability 9.0 GPU, else
        /// sm_80).
        #[arg(long, value_name = "sm_80|sm_90a")]
        target: Option<String>,
        /// Print CSV (a header, then one line per shape) instead of a table.
        #[arg(long)]
        csv: bool,
        /// Seed of the random inputs.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        #[command(flatten)]
        tuning: TuningFlags,
    },
    /// Time a kernel's tuning space on every visible GPU (planned, compiled on every core, checked as
    /// `tlc bench` checks: f16 GEMMs against cuBLAS, FP8 block-scaled GEMMs against the
    /// dequantized float32 reference, any other kernel against its default config) and store
    /// the fastest config in the tuning cache.
    Tune {
        /// The kernel source (`.tir`) with a tuning space: a GEMM (as `tlc bench` takes: f16,
        /// or FP8 with block scales) or any other kernel.
        file: PathBuf,
        /// Bind a symbolic dimension (every one must be), or fix a tunable, e.g. `-D M=4096`;
        /// a name given several times tunes each of its values (each shape on its own).
        #[arg(short = 'D', value_name = "NAME=VALUE")]
        define: Vec<String>,
        /// Shapes to tune, `NAME=VALUE,...;NAME=VALUE,...`, each combined with the `-D`
        /// values (as `tlc bench --vs copy --shapes`); each shape's winner is stored for it.
        #[arg(long, value_name = "SHAPES")]
        shapes: Option<String>,
        /// Time only the N configs `tlc plan` ranks best.
        #[arg(long, value_name = "N")]
        top: Option<usize>,
        /// Untimed runs before the timed ones, per config.
        #[arg(long, value_name = "N", default_value_t = 5)]
        warmup: usize,
        /// Timed runs per config; the median is reported.
        #[arg(long, value_name = "N", default_value_t = 20)]
        iters: usize,
        /// The target to compile for (default: sm_90a on a compute capability 9.0 GPU, else
        /// sm_80).
        #[arg(long, value_name = "sm_80|sm_90a")]
        target: Option<String>,
        /// Seed of the random inputs.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// A parameter's data instead of seeded random values, e.g. `--input idx=idx.npy`
        /// (repeatable; its dtype and shape must match the parameter at every tuned shape):
        /// index tensors and other inputs random data would make invalid. Kernels checked
        /// against their default config only (the GEMM kinds make their own inputs).
        #[arg(long = "input", value_name = "NAME=X.npy")]
        inputs: Vec<String>,
        /// Do not store the winner in the tuning cache.
        #[arg(long)]
        no_cache: bool,
        /// Plan, compile and assemble the configs and list them; no GPU (the target is
        /// `--target`, default sm_90a, on its usual SM count).
        #[arg(long)]
        dry_run: bool,
        /// Print each shape's result as one line of JSON instead of the table.
        #[arg(long)]
        json: bool,
    },
    /// Choose a kernel's configuration without running anything: `FILE -D …` ranks the
    /// kernel's tuning space by waves over the SMs; `--deepgemm M N K` prints DeepGEMM's
    /// heuristic for its FP8 GEMM as JSON.
    Plan(PlanArgs),
}

/// `tlc plan`'s arguments. Exactly one mode is required: a kernel FILE, or `--deepgemm`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("mode").required(true).args(["file", "deepgemm"])))]
pub struct PlanArgs {
    /// The kernel source (`.tir`) whose tuning space to rank.
    pub file: Option<PathBuf>,
    /// Bind a symbolic dimension (every one must be), or fix a tunable, e.g. `-D M=4096`.
    #[arg(short = 'D', value_name = "NAME=VALUE", requires = "file")]
    pub define: Vec<String>,
    /// With FILE: the GPU target whose limits and pipeline apply.
    #[arg(
        long,
        value_name = "sm_80|sm_90a",
        default_value = "sm_90a",
        requires = "file"
    )]
    pub target: String,
    /// With FILE: print the ranking as JSON instead of a table.
    #[arg(long, requires = "file")]
    pub json: bool,
    /// DeepGEMM's configuration of its normal FP8 GEMM (seed 004's `get_best_configs`) for
    /// an M×K by K×N product: block sizes, stages, TMA multicast, SMs, shared memory.
    #[arg(
        long,
        num_args = 3,
        value_names = ["M", "N", "K"],
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub deepgemm: Option<Vec<u32>>,
    /// The SMs of the GPU (default: the target's usual count; sm_90a's, 132 — an H100 SXM
    /// or H200 — with `--deepgemm`).
    #[arg(long, value_name = "S", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub sms: Option<u32>,
    /// With `--deepgemm`: the number of GEMMs of that shape (the seed's `num_groups`).
    #[arg(
        long,
        value_name = "G",
        default_value_t = 1,
        requires = "deepgemm",
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub groups: u32,
}

/// What `tlc bench` compares with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Baseline {
    /// cuBLAS `cublasGemmEx`, float16 inputs, float32 accumulation.
    #[default]
    Cublas,
    /// A device-to-device copy moving as many bytes as the kernel: GB/s of any kernel.
    Copy,
}

/// What `tlc compile` writes (`--emit`): the driver's `tlc::driver::Emit`, as a flag.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum EmitFlag {
    /// PTX text with the launch manifest line.
    #[default]
    Ptx,
    /// The IR text after the pipeline.
    Tir,
}

impl From<EmitFlag> for tlc::driver::Emit {
    fn from(flag: EmitFlag) -> Self {
        match flag {
            EmitFlag::Ptx => tlc::driver::Emit::Ptx,
            EmitFlag::Tir => tlc::driver::Emit::Tir,
        }
    }
}

/// How the tunables `-D` leaves open are chosen (docs/cli.md, "Tunables and the tuning
/// cache"): the tuning cache's config for the kernel, its dims, the GPU and the target, else
/// the defaults.
#[derive(Debug, Default, Args)]
pub struct TuningFlags {
    /// Say on stderr where each tunable's value comes from (`-D`, the tuning cache, the
    /// defaults) and why.
    #[arg(short = 'v', long)]
    pub verbose: bool,
    /// Do not look in the tuning cache: the tunables `-D` leaves open take their defaults.
    #[arg(long)]
    pub no_cache: bool,
}

impl TuningFlags {
    /// The choice for a command compiling for `target`.
    pub fn tuning(&self, target: TuneTarget) -> Tuning {
        Tuning {
            cache: !self.no_cache,
            target,
            verbose: self.verbose,
        }
    }
}

/// The pass-pipeline instrumentation flags, shared by `tlc opt` and `tlc compile`.
#[derive(Debug, Default, Args)]
pub struct InstrumentFlags {
    /// Print the IR before pass P (repeatable or comma-separated).
    #[arg(long, value_name = "P", value_delimiter = ',')]
    pub print_ir_before: Vec<String>,
    /// Print the IR after pass P (repeatable or comma-separated).
    #[arg(long, value_name = "P", value_delimiter = ',')]
    pub print_ir_after: Vec<String>,
    /// Print the IR after every pass.
    #[arg(long)]
    pub print_ir_after_all: bool,
    /// Print the IR after a pass only when the pass changed it.
    #[arg(long)]
    pub print_ir_after_change: bool,
    /// Write every stage to DIR: `00-input.tir`, `01-<pass>.tir`, … (`tlc compile`: then
    /// `NN-ptx.ptx`)
    #[arg(long, value_name = "DIR")]
    pub dump_dir: Option<PathBuf>,
    /// Stop after pass P.
    #[arg(long, value_name = "P")]
    pub stop_after: Option<String>,
    /// Print a table of milliseconds per pass to stderr.
    #[arg(long)]
    pub time_passes: bool,
    /// Do not run the verifier after every pass.
    #[arg(long)]
    pub no_verify_each: bool,
}

impl InstrumentFlags {
    pub fn options(&self) -> tlc_passes::Instrumentation {
        tlc_passes::Instrumentation {
            print_ir_before: self.print_ir_before.clone(),
            print_ir_after: self.print_ir_after.clone(),
            print_ir_after_all: self.print_ir_after_all,
            print_ir_after_change: self.print_ir_after_change,
            dump_dir: self.dump_dir.clone(),
            stop_after: self.stop_after.clone(),
            time_passes: self.time_passes,
            verify_each: !self.no_verify_each,
        }
    }
}

/// A finite, non-negative float (`--atol`, `--rtol`).
fn nonnegative_float(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("`{s}` is not a finite non-negative number")),
    }
}
