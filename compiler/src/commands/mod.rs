//! One module per subcommand.

pub mod check;
pub mod fmt;
pub mod opt;
pub mod passes;
pub mod run;
