//! One module per subcommand.

pub mod bench;
pub mod bench_copy;
pub mod bench_fp8;
pub mod bench_gemv;
pub mod check;
pub mod compile;
pub mod fmt;
pub mod fp8_data;
pub mod opt;
pub mod passes;
pub mod plan;
pub mod run;
pub mod run_device;
pub mod tune;
pub mod tune_any;
