//! One module per subcommand.

pub mod bench;
pub mod check;
pub mod compile;
pub mod fmt;
pub mod opt;
pub mod passes;
pub mod run;
pub mod run_device;
