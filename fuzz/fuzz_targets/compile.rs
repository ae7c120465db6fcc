//! Fuzz target: any bytes through the whole compile road. Whatever `tlc check` accepts must
//! compile, or be refused with errors at source locations, for every target: no pass may
//! produce IR that fails the verifier, nothing may panic (`tlc::driver::verdict`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tlc::driver::{verdict, Verdict};
use tlc_ir::Target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for target in Target::ALL {
        match verdict(&text, target) {
            Verdict::Invalid => return,
            Verdict::Compiled | Verdict::Refused(_) => {}
            Verdict::CompilerBug(what) => panic!("{what}\n--- input ---\n{text}"),
        }
    }
});
