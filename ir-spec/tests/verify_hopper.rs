//! The verifier's rules on the Hopper intrinsics, each a located error: the target rule
//! (I7), a TMA destination's alignment (I6), the box and the descriptor constants (I4),
//! operand scopes and counts (I2–I3), and a TMA source that may lie out of bounds.

use tlc_ir::verifier::{verify, verify_with, Requirements};
use tlc_ir::{parse, Diagnostic, PrimFunc, Target};

fn kernel(body: &str) -> String {
    let text: String = body.lines().map(|l| format!("            {l}\n")).collect();
    format!(
        "@T.prim_func\ndef k(A: T.Tensor((100, 64), \"float16\")):\n    with T.Kernel(1, threads=128) as bx:\n        S = T.alloc_shared((64, 64), \"float16\")\n        bars = T.alloc_shared((2,), \"int64\")\n        acc = T.alloc_local((32,), \"float32\")\n        for tx in T.thread_binding(128, thread=\"threadIdx.x\"):\n{text}"
    )
}

fn parsed(src: &str) -> PrimFunc {
    parse(src).unwrap_or_else(|d| panic!("does not parse: {d:#?}\n{src}"))
}

/// The errors of `body` (message, the text the span covers).
fn errors(body: &str, target: Option<Target>) -> Vec<(String, String)> {
    let src = kernel(body);
    let req = Requirements {
        target,
        ..Requirements::default()
    };
    let diags: Vec<Diagnostic> = verify_with(&parsed(&src), &req).err().unwrap_or_default();
    diags
        .into_iter()
        .map(|d| {
            let at = src.get(d.span.start..d.span.end).unwrap_or("").to_string();
            (d.message, at)
        })
        .collect()
}

const TMA: &str = "T.tma_load(S[0, 0], A[-8, 0], bars[0], box=(64, 64), swizzle=128)";

#[test]
fn valid_calls_verify_and_the_source_may_lie_out_of_bounds() {
    let src = kernel(&format!(
        "T.mbarrier_init(bars[0], 1)\n{TMA}\nT.mbarrier_wait(bars[0], 0)\nT.wgmma_fence()\nT.wgmma(acc[0], S[0, 0], S[0, 16], n=64, a_swizzle=128, a_lbo=0, a_sbo=1024, b_swizzle=128, b_lbo=0, b_sbo=1024)"
    ));
    if let Err(d) = verify(&parsed(&src)) {
        panic!("{d:#?}");
    }
    assert_eq!(errors(TMA, Some(Target::Sm90a)), Vec::new());
}

#[test]
fn the_target_must_have_the_instructions() {
    let e = errors(&format!("{TMA}\nT.setmaxnreg(232)"), Some(Target::Sm80));
    assert_eq!(e.len(), 2, "{e:?}");
    assert_eq!(
        e[0].0,
        "`T.tma_load` needs a target with bulk tensor copies (TMA) with mbarriers and the async proxy"
    );
    assert_eq!(e[0].1, TMA);
    assert_eq!(
        e[1].0,
        "`T.setmaxnreg` needs a target with warpgroup MMA (`wgmma`)"
    );
}

#[test]
fn tma_rules() {
    let e = errors(
        "T.tma_load(S[1, 0], A[0, 0], bars[0], box=(8, 64), swizzle=128)",
        None,
    );
    assert_eq!(
        e,
        [(
            "the destination of `T.tma_load` must start 1024-byte aligned (swizzle 128): \
             `S[1, 0]` is at byte 128 of `S`"
                .to_string(),
            "S".to_string()
        )]
    );
    let e = errors("T.tma_load(S[0, 0], A[0, 0], bars[0], box=(64, 4))", None);
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(e[0].0.contains("must span a multiple of 16 bytes"), "{e:?}");
    assert_eq!(e[0].1, "S");
    let e = errors("T.tma_load(S[0, 0], A[0, 0], bars[0], box=(64,))", None);
    assert_eq!(
        e[0].0,
        "the box of `T.tma_load` (`box`) has 1 entries, one per dimension of `A`, which has 2"
    );
    assert_eq!(e[0].1, "A");
    // The destination covers the whole box, inside its buffer.
    let e = errors("T.tma_load(S[32, 0], A[0, 0], bars[0], box=(64, 64))", None);
    assert!(e[0].0.contains("covers 4096 elements"), "{e:?}");
}

#[test]
fn operand_and_constant_rules() {
    let e = errors("T.mbarrier_init(S[0, 0], 2000)", None);
    let messages: Vec<&str> = e.iter().map(|(m, _)| m.as_str()).collect();
    assert_eq!(
        messages,
        [
            "the arrival count of `T.mbarrier_init` (`count`) must be in 1..=1024, found 2000",
            "the mbarrier of `T.mbarrier_init` must be int64; `S` is float16"
        ]
    );
    let e = errors(
        "T.wgmma(acc[8], S[0, 0], S[0, 16], n=64, a_lbo=0, a_sbo=8, b_lbo=0, b_sbo=0)",
        None,
    );
    let messages: Vec<&str> = e.iter().map(|(m, _)| m.as_str()).collect();
    assert_eq!(
        messages,
        [
            "the accumulator of `T.wgmma` covers 32 elements from `acc[8]` (element 8), past the end of `acc` (32 elements)",
            "the A stride byte offset of `T.wgmma` (`a_sbo`) must be a multiple of 16 in 0..=262128, found 8"
        ]
    );
    let e = errors("T.mbarrier_wait(bars[0], tx > 0)", None);
    assert!(
        e[0].0.contains("the phase parity of `T.mbarrier_wait`"),
        "{e:?}"
    );
    let e = errors("T.wgmma_wait(9)", None);
    assert_eq!(
        e[0].0,
        "the group count of `T.wgmma_wait` (`n`) must be in 0..=7, found 9"
    );
}
