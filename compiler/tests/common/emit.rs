//! Compiling inline kernels in tests: parse + verify, code generation for both targets with
//! the manifest checked against the parameters and read back from the text, ptxas on each
//! (no spills, at most 255 registers), and codegen's errors for unsupported inputs.
//! Included by path from `tests/tests/tilelang_examples.rs` too (with `toolchain.rs` and
//! `immediates.rs`), so it names `super::ptxas_log` and crates only.

use super::ptxas_log;
use std::path::Path;
use tlc::ptx::{check_manifest, print_with_manifest, Module};
use tlc_abi::manifest::Manifest;
use tlc_ir::Target;
use tlc_ir::{Diagnostic, PrimFunc};

/// Code generation as the driver runs it: the verifier's facts about `func` first (its
/// errors, when it has any, are the result), then `tlc::codegen::emit` with them.
pub fn emit(func: &PrimFunc, target: Target) -> Result<(Module, Manifest), Vec<Diagnostic>> {
    let info = tlc_ir::verifier::verify(func)?;
    tlc::codegen::emit(func, &info, target)
}

/// `src` parsed and verified; panics otherwise.
pub fn parse(src: &str) -> PrimFunc {
    let func = match tlc_ir::parse(src) {
        Ok(f) => f,
        Err(e) => panic!("parse: {e:?}"),
    };
    if let Err(e) = tlc_ir::verifier::verify(&func) {
        panic!("verify: {e:?}");
    }
    func
}

/// Assembles `ptx` for `arch` (in the test's scratch folder `dir`) and returns ptxas's `-v`
/// log; panics on an error, a warning, a spill or more than 255 registers in any entry.
pub fn assemble(dir: &str, ptx: &str, name: &str, arch: &str) -> String {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(dir);
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let file = dir.join(format!("{name}.{arch}.ptx"));
    std::fs::write(&file, ptx).expect("write ptx");
    let log = ptxas_log(&file, arch).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert!(
        !log.contains("warning"),
        "{name}: ptxas warns on {arch}:\n{log}"
    );
    // One spill line per entry; a bare `contains("0 bytes spill")` would also match "80".
    let spills: Vec<&str> = log.lines().filter(|l| l.contains("spill")).collect();
    assert!(
        !spills.is_empty()
            && spills
                .iter()
                .all(|l| l.contains(", 0 bytes spill stores, 0 bytes spill loads")),
        "{name} spills on {arch}:\n{log}"
    );
    // One "Used N registers" line per entry: every entry of a multi-kernel module counts.
    let registers: Vec<Option<u32>> = log
        .split(" registers")
        .filter_map(|chunk| chunk.rsplit_once("Used "))
        .map(|(_, n)| n.trim().parse::<u32>().ok())
        .collect();
    assert!(
        !registers.is_empty() && registers.iter().all(|r| r.is_some_and(|r| r <= 255)),
        "{name} on {arch}:\n{log}"
    );
    log
}

/// Compiles `src` for sm_80 and sm_90a, checks each manifest and assembles each (in `dir`);
/// returns the texts (sm_80 first) and the sm_80 manifest.
pub fn compile_both(dir: &str, name: &str, src: &str) -> (Vec<String>, Manifest) {
    let func = parse(src);
    let mut texts = Vec::new();
    let mut manifest = None;
    for target in [Target::Sm80, Target::Sm90a] {
        let (module, man) = match emit(&func, target) {
            Ok(x) => x,
            Err(e) => panic!("{name}: codegen failed: {e:?}"),
        };
        if let Err(e) = check_manifest(&module, &man) {
            panic!("{name}: {e}");
        }
        let text = print_with_manifest(&module, &man);
        match Manifest::from_ptx(&text) {
            Ok(read) => assert_eq!(read, man),
            Err(e) => panic!("{name}: manifest not readable: {e}"),
        }
        assemble(dir, &text, name, target.name());
        texts.push(text);
        manifest.get_or_insert(man);
    }
    (texts, manifest.expect("two targets ran"))
}

/// Codegen's errors for `src` on sm_80; panics when it is accepted.
pub fn errors(src: &str) -> Vec<Diagnostic> {
    match emit(&parse(src), Target::Sm80) {
        Ok(_) => panic!("codegen accepted an unsupported input"),
        Err(e) => e,
    }
}
