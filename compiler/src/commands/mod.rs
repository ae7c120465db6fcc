//! One module per subcommand.

pub mod check;
pub mod fmt;
pub mod run;
pub mod opt;
pub mod passes;
