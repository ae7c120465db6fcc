//! The `Pass` trait: one named, described transformation of a `PrimFunc`.

use crate::context::PassContext;
use tlc_ir::verifier::Level;
use tlc_ir::{Diagnostic, PrimFunc};

/// A transformation of the IR. A pass takes the function by value and returns the new one,
/// or the diagnostics that explain why it cannot (an input it does not support, a limit).
/// It must keep the program's meaning (the interpreter gives the same outputs) and produce
/// IR the verifier accepts; the pass manager checks the latter after every pass.
pub trait Pass: Sync {
    /// The kebab-case name used in pipeline text (`--passes=simplify,unroll`).
    fn name(&self) -> &'static str;
    /// One line for `tlc passes`.
    fn description(&self) -> &'static str;
    /// Whether the pass leaves every declaration of the function — buffers (their shapes
    /// included), dims, and the variables every binder introduces — as it found them, so
    /// facts cached in the context stay true. Passes that only rewrite expressions say yes.
    fn preserves_declarations(&self) -> bool {
        false
    }
    /// How far its input must be lowered. The pass manager checks it before running the
    /// pass (`tlc_ir::verifier::check_level`), so a pass never re-checks pipeline order.
    fn requires(&self) -> Level {
        Level::Tile
    }
    fn run(&self, func: PrimFunc, cx: &PassContext) -> Result<PrimFunc, Vec<Diagnostic>>;
}

impl std::fmt::Debug for dyn Pass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
