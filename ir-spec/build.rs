//! Generates the parser from `src/syntax/grammar.lalrpop` into `OUT_DIR/syntax/grammar.rs`.

fn main() {
    if let Err(e) = lalrpop::Configuration::new()
        .set_in_dir("src")
        .emit_rerun_directives(true)
        .process()
    {
        eprintln!("lalrpop failed: {e}");
        std::process::exit(1);
    }
}
