//! ptxas on the PTX the AST prints: every kernel in `ptx_cases` is built for `sm_80` and
//! `sm_90a`, its text (manifest line included) is snapshotted, and ptxas must assemble it for
//! both architectures with `-v`, without spills and within 255 registers.
//!
//! ptxas is found through `TLC_PTXAS`, then `.tools/` (where `scripts/install-ptxas.sh` puts
//! it), then `PATH`. When it is nowhere the tests FAIL and say how to install it: a missing
//! assembler must never turn into silently skipped checks.

use crate::common;
use crate::ptx_cases;

use common::ptxas_log;
use ptx_cases::{Case, CASES};
use std::path::Path;
use tlc::ptx::*;
use tlc_abi::manifest::Manifest;

/// What `ptxas -v` reports for one entry.
#[derive(Debug)]
struct Report {
    registers: u32,
    spill_stores: u32,
    spill_loads: u32,
}

/// The number right before `suffix` in `log` (`"Used 12 registers"` → 12).
fn number_before(log: &str, suffix: &str) -> Option<u32> {
    let at = log.find(suffix)?;
    log[..at].split_whitespace().last()?.parse().ok()
}

/// Assembles `ptx` for `arch`; `Err` holds ptxas's diagnostics and the file's path.
fn assemble(ptx: &str, name: &str, arch: &str) -> Result<Report, String> {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ptxas");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let file = dir.join(format!("{name}.{arch}.ptx"));
    std::fs::write(&file, ptx).map_err(|e| format!("{}: {e}", file.display()))?;
    let log = ptxas_log(&file, arch)?;
    let field = |suffix: &str| {
        number_before(&log, suffix)
            .ok_or_else(|| format!("no `{suffix}` in ptxas -v output:\n{log}"))
    };
    Ok(Report {
        registers: field(" registers")?,
        spill_stores: field(" bytes spill stores")?,
        spill_loads: field(" bytes spill loads")?,
    })
}

fn check_case(name: &str) {
    let Some(case) = CASES.iter().find(|c: &&Case| c.name == name) else {
        panic!("no case {name}");
    };
    let (man80, m80) = (case.build)(Target::Sm80);
    let (man90, m90) = (case.build)(Target::Sm90a);
    for (man, m) in [(&man80, &m80), (&man90, &m90)] {
        if let Err(e) = check_manifest(m, man) {
            panic!("{name}: parameters disagree with the manifest: {e}");
        }
    }
    let text80 = print_with_manifest(&m80, &man80);
    let text90 = print_with_manifest(&m90, &man90);
    insta::assert_snapshot!(name, text80);
    // The targets differ in the `.target` line and the manifest's target only.
    assert_eq!(
        text90,
        text80
            .replace(".target sm_80\n", ".target sm_90a\n")
            .replace("\"target\":\"sm_80\"", "\"target\":\"sm_90a\"")
    );
    // The runtime reads the manifest back from the printed file.
    match Manifest::from_ptx(&text80) {
        Ok(read) => assert_eq!(read, man80),
        Err(e) => panic!("{name}: the runtime cannot read the manifest back: {e}"),
    }
    for (arch, text) in [("sm_80", &text80), ("sm_90a", &text90)] {
        let report = match assemble(text, name, arch) {
            Ok(r) => r,
            Err(e) => panic!("{name}: ptxas rejected the PTX\n{e}"),
        };
        assert_eq!(
            (report.spill_stores, report.spill_loads),
            (0, 0),
            "{name} spills on {arch}: {report:?}"
        );
        assert!(report.registers <= 255, "{name} on {arch}: {report:?}");
    }
}

macro_rules! ptxas_cases {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                check_case(stringify!($name));
            }
        )*

        #[test]
        fn every_case_has_a_test() {
            let tested = [$(stringify!($name)),*];
            for c in CASES {
                assert!(tested.contains(&c.name), "case {} has no #[test]", c.name);
            }
        }
    };
}

ptxas_cases!(
    vadd_f32_tail,
    saxpy_grid_stride,
    transpose_smem,
    scale_v4,
    cast_f16_bf16,
    index64,
    mma_ldmatrix_cp_async,
);

/// The harness must be able to fail: a kernel with a type error is rejected, and the error
/// carries ptxas's message.
#[test]
fn ptxas_rejects_an_ill_typed_kernel() {
    let mut k = KernelBuilder::new("bad");
    let x = k.mov(Type::U64, 1i64);
    // A 64-bit register where add.s32 needs a 32-bit one.
    let r = k.new_reg(Type::S32);
    k.emit(Op::Int {
        op: IntOp::Add,
        ty: Type::S32,
        dst: r,
        a: x.into(),
        b: 1i64.into(),
    });
    k.ret();
    let text = print_module(&Module::new(Target::Sm80).with_kernel(k.finish()));
    match assemble(&text, "bad", "sm_80") {
        Ok(r) => panic!("ptxas accepted an ill-typed kernel: {r:?}\n{text}"),
        Err(e) => assert!(e.contains("error"), "{e}"),
    }
}

/// A dim parameter ahead of a tensor parameter breaks the launch contract.
#[test]
fn check_manifest_catches_parameter_order() {
    let (man, _) = ptx_cases::vadd_f32_tail(Target::Sm80);
    let mut k = KernelBuilder::new("vadd");
    k.param("N", Type::U32);
    for p in ["A", "B", "C"] {
        k.param(p, Type::U64);
    }
    k.ret();
    let m = Module::new(Target::Sm80).with_kernel(k.finish());
    let err = check_manifest(&m, &man).err().unwrap_or_default();
    assert!(
        err.contains(
            "parameter 0 (`vadd_param_N`) is .u32 but the manifest's tensor `A` needs .u64"
        ),
        "{err}"
    );
    let m90 = Module::new(Target::Sm90a);
    let err = check_manifest(&m90, &man).err().unwrap_or_default();
    assert!(err.contains("targets sm_90a"), "{err}");
}
