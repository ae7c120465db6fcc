//! `tlc passes`: every registered pass with its one-line description.

pub fn run() -> String {
    let passes = tlc_passes::registry();
    let width = passes.iter().map(|p| p.name().len()).max().unwrap_or(0);
    passes
        .iter()
        .map(|p| format!("{:<width$}  {}\n", p.name(), p.description()))
        .collect()
}
