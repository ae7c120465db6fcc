//! Text ↔ IR round trips: every printed IR parses back to an equal IR, `fmt` is idempotent,
//! every case verifies, and the three spellings of the seed kernel are one IR.

use tlc_ir::parse::parse;
use tlc_ir::printer::print_func;
use tlc_ir::verifier::verify;
use tlc_tests::{root, valid_cases};

fn load(path: &std::path::Path) -> tlc_ir::PrimFunc {
    let text = std::fs::read_to_string(path).expect("read case");
    parse(&text).unwrap_or_else(|d| panic!("{} does not parse: {d:?}", path.display()))
}

#[test]
fn printed_ir_parses_back_equal() {
    for path in valid_cases() {
        let func = load(&path);
        let printed = print_func(&func);
        let reparsed = parse(&printed).unwrap_or_else(|d| {
            panic!(
                "print of {} does not parse: {d:?}\n{printed}",
                path.display()
            )
        });
        assert_eq!(
            func,
            reparsed,
            "{}: print/parse changed the IR\n{printed}",
            path.display()
        );
        assert_eq!(
            printed,
            print_func(&reparsed),
            "{}: fmt is not idempotent",
            path.display()
        );
    }
}

#[test]
fn every_valid_case_verifies() {
    for path in valid_cases() {
        // A kernel with a tuning space verifies once its tunables are bound: the defaults.
        let func = tlc_ir::tuning::bind(&load(&path), &Vec::new(), &Vec::new())
            .unwrap_or_else(|d| panic!("{}: {d:?}", path.display()));
        if let Err(diags) = verify(&func) {
            panic!("{} fails verification: {diags:#?}", path.display());
        }
    }
}

#[test]
fn three_spellings_of_the_seed_kernel_are_one_ir() {
    let dir = root().join("tests/cases/valid");
    let dsl = load(&dir.join("seed000_dsl.tir"));
    for other in [
        "seed000_tvmscript_0_1_x.tir",
        "seed000_tvmscript_0_1_15.tir",
    ] {
        let func = load(&dir.join(other));
        assert_eq!(
            print_func(&dsl),
            print_func(&func),
            "{other} prints differently"
        );
        assert_eq!(dsl, func, "{other} normalizes to a different IR");
    }
}

#[test]
fn specialized_seed_kernel_equals_the_concrete_one() {
    let dir = root().join("tests/cases/valid");
    let symbolic = load(&dir.join("seed000_dims.tir"));
    let bound = tlc_ir::specialize::specialize(
        &symbolic,
        &[("M".into(), 4096), ("N".into(), 2048), ("K".into(), 1024)],
    )
    .expect("specialize");
    assert_eq!(
        print_func(&bound),
        print_func(&load(&dir.join("seed000_dsl.tir")))
    );
}
