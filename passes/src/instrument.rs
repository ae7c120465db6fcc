//! The instrumentation options of a pipeline run, as a compiler engineer expects them from
//! `mlir-opt`. Shared by `tlc opt` and `tlc compile`.

use std::path::PathBuf;

/// What to print, dump, time and check while a pipeline runs. `Default` is "nothing extra,
/// verify after every pass".
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instrumentation {
    /// Print the IR before each pass with one of these names.
    pub print_ir_before: Vec<String>,
    /// Print the IR after each pass with one of these names.
    pub print_ir_after: Vec<String>,
    /// Print the IR after every pass.
    pub print_ir_after_all: bool,
    /// Print the IR after a pass only when its printed text changed.
    pub print_ir_after_change: bool,
    /// Write `00-input.tir`, `01-<pass>.tir`, … into this folder (created when missing).
    pub dump_dir: Option<PathBuf>,
    /// Stop after the first run of this pass.
    pub stop_after: Option<String>,
    /// Report the milliseconds each pass took.
    pub time_passes: bool,
    /// Run the verifier after every pass (on by default).
    pub verify_each: bool,
}

impl Default for Instrumentation {
    fn default() -> Instrumentation {
        Instrumentation {
            print_ir_before: Vec::new(),
            print_ir_after: Vec::new(),
            print_ir_after_all: false,
            print_ir_after_change: false,
            dump_dir: None,
            stop_after: None,
            time_passes: false,
            verify_each: true,
        }
    }
}

impl Instrumentation {
    pub(crate) fn print_before(&self, pass: &str) -> bool {
        self.print_ir_before.iter().any(|p| p == pass)
    }

    pub(crate) fn print_after(&self, pass: &str) -> bool {
        self.print_ir_after_all || self.print_ir_after.iter().any(|p| p == pass)
    }

    /// The pass names the options mention, each with the flag that mentions it.
    pub(crate) fn named_passes(&self) -> Vec<(&'static str, &str)> {
        let mut out: Vec<(&'static str, &str)> = Vec::new();
        out.extend(
            self.print_ir_before
                .iter()
                .map(|p| ("--print-ir-before", p.as_str())),
        );
        out.extend(
            self.print_ir_after
                .iter()
                .map(|p| ("--print-ir-after", p.as_str())),
        );
        out.extend(self.stop_after.iter().map(|p| ("--stop-after", p.as_str())));
        out
    }
}
