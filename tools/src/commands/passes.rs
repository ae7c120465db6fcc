//! `tlc passes`: every registered pass with its one-line description; `tlc passes --target
//! T`: the default pipeline of target `T`, in the order `tlc compile --target T` runs it.

use tlc_ir::Target;

pub fn run(target: Option<Target>) -> String {
    let passes = match target {
        Some(t) => tlc_passes::default_pipeline(t),
        None => tlc_passes::registry().to_vec(),
    };
    let width = passes.iter().map(|p| p.name().len()).max().unwrap_or(0);
    passes
        .iter()
        .map(|p| format!("{:<width$}  {}\n", p.name(), p.description()))
        .collect()
}
