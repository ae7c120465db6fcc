//! Fuzz target: any bytes through the front end. Parsing, verifying, printing, reparsing and
//! rendering the diagnostics must never panic, and whatever parses must print to text that
//! parses back to the same IR.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tlc::diagnostics::SourceFile;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let file = SourceFile::new("fuzz.tir", text.as_ref());
    match tlc_ir::parse::parse(&text) {
        Ok(func) => {
            if let Err(diags) = tlc_ir::verifier::verify(&func) {
                let _ = file.render_all(&diags);
            }
            let printed = tlc_ir::printer::print_func(&func);
            let again = tlc_ir::parse::parse(&printed).expect("printed IR must parse");
            assert_eq!(func, again, "print/parse changed the IR:\n{printed}");
        }
        Err(diags) => {
            let _ = file.render_all(&diags);
        }
    }
});
