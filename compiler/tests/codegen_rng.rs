//! TileLang's random numbers in PTX (`T.philox_init`, `T.philox_rand`, `T.philox_uniform`,
//! `backend/src/codegen/rng.rs`): each draw is the ten Philox4x32 rounds — two
//! `mul.hi.u32` and two `mul.lo.u32` by the round multipliers and four `xor.b32` a round —
//! on the state's registers (never local memory), a uniform draw `cvt.rn.f32.u32` then
//! `fma.rn.f32 x, 2^-32, 2^-33`; ptxas assembles it for both targets.
//! The GPU runs, bit-exact against the interpreter, are `scripts/gpu-check.sh`
//! (`tests/tilelang/rand_uint.tir`, `tests/cases/valid/rand_per_thread.tir`).

use crate::common;

use common::emit::assemble;
use tlc::driver::source_to_ptx;
use tlc_ir::intrinsic::rng::{PHILOX_M0, PHILOX_M1, PHILOX_ROUNDS};
use tlc_ir::Target;

/// Per-thread generators with a uint32 draw site and a float32 one.
const SRC: &str = r#"@T.prim_func
def k(U: T.Tensor((64, 5), "uint32"), F: T.Tensor((64, 3), "float32")):
    with T.Kernel(2, threads=32) as bx:
        tx = T.get_thread_binding()
        g = bx * 32 + tx
        T.rng_init(bx - 7, g, g * 3)
        for j in T.serial(5):
            U[g, j] = T.rng_rand()
        for j in T.serial(3):
            F[g, j] = T.rng_rand_float()
"#;

/// The instructions of `ptx` whose opcode is `op`, as their operand lists.
fn operands<'a>(ptx: &'a str, op: &str) -> Vec<&'a str> {
    ptx.lines()
        .map(str::trim)
        .filter_map(|l| l.split_once(char::is_whitespace))
        .filter(|(o, _)| *o == op)
        .map(|(_, rest)| rest.trim())
        .collect()
}

#[test]
fn philox_draws_are_mul_hi_lo_xor_rounds_on_registers() {
    let draws = 2;
    for target in [Target::Sm80, Target::Sm90a] {
        let ptx = source_to_ptx("rng.tir", SRC, target).unwrap_or_else(|e| panic!("{}", e.0));
        for op in ["mul.hi.u32", "mul.lo.u32"] {
            let uses = operands(&ptx, op);
            assert_eq!(uses.len(), 2 * PHILOX_ROUNDS * draws, "{op} on {target}");
            for m in [PHILOX_M0, PHILOX_M1] {
                let by_m = uses
                    .iter()
                    .filter(|u| u.ends_with(&format!(", {m};")))
                    .count();
                assert_eq!(by_m, PHILOX_ROUNDS * draws, "{op} by {m} on {target}");
            }
        }
        assert_eq!(
            operands(&ptx, "xor.b32").len(),
            4 * PHILOX_ROUNDS * draws,
            "{target}"
        );
        assert_eq!(operands(&ptx, "cvt.rn.f32.u32").len(), 1, "{target}");
        let fma = operands(&ptx, "fma.rn.f32");
        assert_eq!(fma.len(), 1, "{target}");
        assert!(fma[0].ends_with("0f2F800000, 0f2F000000;"), "{}", fma[0]);
        // The state stays in registers.
        assert!(
            !ptx.contains("ld.local") && !ptx.contains("st.local"),
            "{target}"
        );
        assemble("codegen_rng", &ptx, "rng", target.name());
    }
}
