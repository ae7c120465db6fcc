//! `plan-shared-memory`: the arena of the SIMT cases (with byte reuse), meaning preserved on
//! the corpus (the interpreter places shared buffers at the planned offsets, so a wrong reuse
//! corrupts data or races), alignment and the size limit.

use crate::common;
use crate::simt;

use common::{assert_same_meaning, corpus};
use simt::{check_reference, simt, CASES};
use std::collections::HashMap;
use tlc_ir::interp::{run, RunOptions};
use tlc_ir::printer::print_func;
use tlc_ir::{Arena, PrimFunc, StmtKind, Target};
use tlc_passes::plan_shared_memory::PlanSharedMemory;
use tlc_passes::thread_binding::ThreadBinding;
use tlc_passes::{Pass, PassContext};

fn planned(func: PrimFunc) -> PrimFunc {
    let out = PlanSharedMemory
        .run(func, &common::cx())
        .expect("plan-shared-memory");
    tlc_ir::verifier::verify(&out).expect("planned IR verifies");
    out
}

fn bound_and_planned(func: PrimFunc) -> PrimFunc {
    planned(
        ThreadBinding
            .run(func, &common::cx())
            .expect("thread-binding"),
    )
}

fn arena(func: &PrimFunc) -> Option<Arena> {
    func.body.iter().find_map(|s| match &s.kind {
        StmtKind::Kernel(k) => k.arena.clone(),
        _ => None,
    })
}

#[test]
fn snapshot_two_buffers_share_bytes() {
    // S2 takes S1's bytes once B is written; the barrier before S2's first store keeps it
    // from overwriting S1 while other threads still read it.
    let out = bound_and_planned(simt("simt_two_buffers"));
    let a = arena(&out).unwrap();
    assert_eq!(
        (a.bytes, a.offset("S1"), a.offset("S2")),
        (256, Some(0), Some(0))
    );
    insta::assert_snapshot!(print_func(&out));
}

#[test]
fn snapshot_simt_pipelined() {
    insta::assert_snapshot!(print_func(&bound_and_planned(simt("simt_pipelined"))));
}

#[test]
fn keeps_meaning_on_the_corpus() {
    let mut compared = 0;
    for (name, func) in corpus() {
        // Alone (tile-level kernels keep their form) and after thread-binding.
        let out = planned(func.clone());
        compared += assert_same_meaning(&name, &func, &out);
        if common::mixes_levels(&func) {
            continue; // thread-binding takes it once lower-tile-ops has lowered its tile ops
        }
        let out = bound_and_planned(func.clone());
        compared += assert_same_meaning(&name, &func, &out);
        if let Some(a) = arena(&out) {
            assert!(
                a.offsets.iter().all(|(_, o)| o % Arena::ALIGN == 0),
                "{name}"
            );
            assert_eq!(planned(out.clone()), out, "{name}: not idempotent");
        }
    }
    assert!(compared >= 120, "only {compared} runs compared");
}

#[test]
fn the_simt_cases_match_their_references() {
    for stem in CASES {
        let out = bound_and_planned(simt(stem));
        assert!(arena(&out).is_some(), "{stem}");
        check_reference(stem, &out);
    }
}

#[test]
fn the_reuse_barrier_is_needed() {
    // Without the barrier the plan inserted, S2's stores overwrite S1 while it is read.
    let out = bound_and_planned(simt("simt_two_buffers"));
    let mut text = print_func(&out);
    let third = text
        .match_indices("T.sync_threads()")
        .nth(1)
        .map(|(i, _)| i)
        .unwrap();
    text.replace_range(third..third + "T.sync_threads()\n            ".len(), "");
    let racy = tlc_ir::parse(&text).unwrap();
    let err = run(
        &racy,
        &HashMap::new(),
        HashMap::new(),
        &RunOptions {
            seed: 1,
            threads: 1,
        },
    )
    .err()
    .map(|e| e.to_string())
    .unwrap_or_default();
    assert!(err.contains("data race on shared memory"), "{err}\n{text}");
}

fn kernel(allocs: &str, body: &str) -> PrimFunc {
    tlc_ir::parse(&kernel_src(allocs, body)).unwrap()
}

fn kernel_src(allocs: &str, body: &str) -> String {
    format!("@T.prim_func\ndef f(A: T.Tensor((64,), \"float32\")):\n    with T.Kernel(1, threads=64) as bx:\n{allocs}        for tx in T.thread_binding(64, thread=\"threadIdx.x\"):\n{body}")
}

#[test]
fn swizzled_buffers_are_128_byte_aligned_and_live_buffers_do_not_overlap() {
    let func = kernel(
        "        P = T.alloc_shared((5,), \"float16\")\n        S = T.alloc_shared((8, 64), \"float16\")\n        T.annotate_layout({S: T.make_swizzled_layout(S)})\n",
        "            P[tx % 5] = T.cast(A[tx], \"float16\")\n            S[tx // 8, tx % 8] = P[0]\n",
    );
    let a = arena(&planned(func)).unwrap();
    assert_eq!(a.offsets.len(), 2);
    assert_eq!(a.offset("P"), Some(0));
    assert_eq!(a.offset("S"), Some(128));
    assert_eq!(a.bytes, 128 + 8 * 64 * 2);
}

#[test]
fn too_much_shared_memory_is_an_error_on_the_kernel() {
    let src = kernel_src(
        "        S = T.alloc_shared((60000,), \"float32\")\n",
        "            S[tx] = A[tx]\n",
    );
    let func = tlc_ir::parse(&src).unwrap();
    let sm90a = PassContext::new(Target::Sm90a);
    let errs = PlanSharedMemory.run(func, &sm90a).unwrap_err();
    assert_eq!(errs.len(), 1);
    assert!(
        errs[0].message.contains("240000 bytes"),
        "{}",
        errs[0].message
    );
    assert!(errs[0].message.contains("232448"), "{}", errs[0].message);
    assert_eq!(Some(errs[0].span.start), src.find("with T.Kernel"));
}

/// The limit is the target's: 200000 bytes fit an H100 block (227 KiB) but not an A100 one
/// (163 KiB), and the sm_80 error is located at the kernel and names the target.
#[test]
fn the_shared_memory_limit_is_the_targets() {
    let src = kernel_src(
        "        S = T.alloc_shared((50000,), \"float32\")\n",
        "            S[tx] = A[tx]\n",
    );
    let func = tlc_ir::parse(&src).unwrap();
    let planned = PlanSharedMemory
        .run(func.clone(), &PassContext::new(Target::Sm90a))
        .expect("fits sm_90a");
    assert!(tlc_ir::verifier::verify(&planned).is_ok());
    let errs = PlanSharedMemory
        .run(func, &PassContext::new(Target::Sm80))
        .unwrap_err();
    assert_eq!(errs.len(), 1);
    assert_eq!(
        errs[0].message,
        "this kernel needs 200000 bytes of shared memory, more than the 166912 a block may have on sm_80"
    );
    assert_eq!(Some(errs[0].span.start), src.find("with T.Kernel"));
    // The verifier holds an sm_80 pipeline to the same limit.
    let req = tlc_ir::verifier::Requirements {
        target: Some(Target::Sm80),
        ..Default::default()
    };
    let errs = tlc_ir::verifier::verify_with(&planned, &req).unwrap_err();
    assert!(errs[0].message.contains("0 to 166912 bytes"), "{errs:?}");
}

/// A `T.tma_load` destination is placed where TMA can write it: 1024-byte aligned for the
/// 128-byte swizzle, 128 without a swizzle (`Swizzle::tma_alignment`), whatever is placed
/// first. (The declaration order is the one the interpreter's own packing of the input
/// aligns, so the meaning check runs both.)
#[test]
fn tma_destinations_get_the_alignment_of_their_swizzle() {
    let src = "@T.prim_func
def f(A: T.Tensor((64, 64), \"float16\"), B: T.Tensor((64,), \"float16\")):
    with T.Kernel(1, threads=128) as bx:
        S = T.alloc_shared((8, 64), \"float16\")
        P = T.alloc_shared((8, 8), \"float16\")
        bars = T.alloc_shared((2,), \"int64\")
        for tx in T.thread_binding(128, thread=\"threadIdx.x\"):
            if tx == 0:
                T.mbarrier_init(bars[0], 1)
                T.mbarrier_init(bars[1], 1)
                T.mbarrier_arrive_expect_tx(bars[0], 1024)
                T.tma_load(S[0, 0], A[0, 0], bars[0], box=(8, 64), swizzle=128)
                T.mbarrier_arrive_expect_tx(bars[1], 128)
                T.tma_load(P[0, 0], A[8, 0], bars[1], box=(8, 8), swizzle=0)
            T.mbarrier_wait(bars[0], 0)
            T.mbarrier_wait(bars[1], 0)
            B[tx % 64] = S[tx // 64, tx % 64] + P[tx % 8, 0]
";
    let func = tlc_ir::parse(src).unwrap();
    let out = bound_and_planned(func.clone());
    let a = arena(&out).unwrap();
    // All three are first used by one statement (the `if`): declaration order, each
    // rounded up to its alignment.
    assert_eq!(a.offset("S"), Some(0));
    assert_eq!(a.offset("P"), Some(1024));
    assert_eq!(a.offset("bars"), Some(1152));
    // After a 16-byte buffer, the swizzled box moves to the next 1024.
    let first = out.clone();
    let text = print_func(&first).replace(
        "S = T.alloc_shared((8, 64), \"float16\")\n        P = T.alloc_shared((8, 8), \"float16\")\n        bars = T.alloc_shared((2,), \"int64\")",
        "bars = T.alloc_shared((2,), \"int64\")\n        P = T.alloc_shared((8, 8), \"float16\")\n        S = T.alloc_shared((8, 64), \"float16\")",
    );
    let text = text
        .lines()
        .filter(|l| !l.contains("T.shared_arena"))
        .collect::<Vec<_>>()
        .join("\n");
    let a = arena(&planned(tlc_ir::parse(&text).unwrap())).unwrap();
    assert_eq!(
        (a.offset("bars"), a.offset("P"), a.offset("S")),
        (Some(0), Some(128), Some(1024))
    );
    assert!(assert_same_meaning("tma", &func, &out) > 0);
}

/// `func` through the default pipeline of `target` up to and including `last`.
fn through(func: &PrimFunc, target: Target, last: &str) -> PrimFunc {
    let cx = PassContext::new(target);
    let mut cur = func.clone();
    for pass in tlc_passes::default_pipeline(target) {
        cur = pass
            .run(cur, &cx)
            .unwrap_or_else(|e| panic!("{}: {e:?}", pass.name()));
        if pass.name() == last {
            return cur;
        }
    }
    panic!("no pass {last}")
}

fn count(text: &str, what: &str) -> usize {
    text.matches(what).count()
}

/// TileLang's persistent GEMM: the pipeline stages of A and B (48 + 96 KiB) and the 64 KiB
/// epilogue tile C_shared are fresh in every iteration of the tile loop, and C_shared is
/// first written after the k-loop last reads the stages: it takes their bytes (147456 bytes
/// instead of 212992, which fits sm_80). One barrier goes before the epilogue — on sm_90a
/// after `T.wgmma_wait(0)` (the stages are wgmma operands) and fenced — and the back edge
/// is served by the barrier `thread-binding` put at the end of the tile loop's body.
#[test]
fn the_persistent_gemm_puts_its_epilogue_tile_in_the_stages_bytes() {
    let func = common::load(&common::root().join("tests/tilelang/gemm_persistent.tir"));
    for target in [Target::Sm80, Target::Sm90a] {
        let bound = through(&func, target, "thread-binding");
        let out = PlanSharedMemory
            .run(bound.clone(), &PassContext::new(target))
            .expect("plans");
        let a = arena(&out).unwrap();
        assert_eq!(
            (
                a.bytes,
                a.offset("A_shared"),
                a.offset("B_shared"),
                a.offset("C_shared")
            ),
            (147456, Some(0), Some(49152), Some(0)),
            "{target}"
        );
        let (before, after) = (print_func(&bound), print_func(&out));
        let barrier = "T.sync_threads()";
        assert_eq!(
            count(&after, barrier),
            count(&before, barrier) + 1,
            "{target}"
        );
        let wait = "T.wgmma_wait(0)";
        let wgmma = usize::from(target == Target::Sm90a);
        assert_eq!(
            count(&after, wait),
            count(&before, wait) + wgmma,
            "{target}"
        );
        // No copy is asynchronous here (symbolic row strides): no `T.cp_async_wait(0)`.
        assert_eq!(count(&after, "T.cp_async_wait(0)"), 0, "{target}");
        if target == Target::Sm80 {
            insta::assert_snapshot!("persistent_gemm_sm80", after);
        }
        // Without the marks the plan is the one before in-loop reuse: too big for sm_80.
        let unmarked: String = before
            .lines()
            .filter(|l| !l.contains("T.fresh("))
            .map(|l| format!("{l}\n"))
            .collect();
        let unmarked = tlc_ir::parse(&unmarked).expect("parses");
        match PlanSharedMemory.run(unmarked, &PassContext::new(target)) {
            Ok(f) => assert_eq!(arena(&f).map(|a| a.bytes), Some(212992), "{target}"),
            Err(e) => {
                assert_eq!(target, Target::Sm80);
                assert!(
                    e[0].message.starts_with("this kernel needs 212992 bytes"),
                    "{e:?}"
                );
            }
        }
    }
    // Bound to sizes whose rows are 16-byte multiples, sm_80's stages are cp.async
    // destinations: every copy must land before C_shared takes their bytes.
    let bound = common::bound_mnk(&func, 1800, 2600, 64);
    let out = through(&bound, Target::Sm80, "plan-shared-memory");
    let text = print_func(&out);
    let at = text
        .find("T.cp_async_wait(0)\n")
        .expect("a wait for every copy");
    assert!(
        text[at..]
            .trim_start_matches("T.cp_async_wait(0)")
            .trim_start()
            .starts_with("T.sync_threads()"),
        "{text}"
    );
    assert_eq!(arena(&out).map(|a| a.bytes), Some(147456));
}

/// The small persistent GEMM (several tiles per block at the corpus's ragged sizes): the
/// plan keeps its meaning with the stages' bytes reused, and the barrier it inserted is
/// needed — without it the interpreter stops at the epilogue's first store into bytes
/// another thread may still read.
#[test]
fn the_reused_stage_bytes_need_their_barrier() {
    let func = common::case("persistent_gemm_reuse");
    for target in [Target::Sm80, Target::Sm90a] {
        let bound = through(&func, target, "thread-binding");
        let out = PlanSharedMemory
            .run(bound.clone(), &PassContext::new(target))
            .expect("plans");
        assert_eq!(
            arena(&out).map(|a| (a.bytes, a.offset("C_shared"))),
            Some((18432, Some(0))),
            "{target}"
        );
        assert!(assert_same_meaning("persistent_gemm_reuse", &bound, &out) > 0);
        if target == Target::Sm90a {
            // One warpgroup: once its `T.wgmma_wait(0)` retired the reads, its own stores
            // need no barrier; the plan's is a conservative one.
            continue;
        }
        // The inserted barrier: the first statement the plan added (past the arena line).
        let before = print_func(&bound);
        let after = print_func(&out);
        let old: Vec<&str> = before.lines().collect();
        let mut lines: Vec<&str> = after.lines().collect();
        let kept: Vec<usize> = (0..lines.len())
            .filter(|&i| !lines[i].contains("T.shared_arena"))
            .collect();
        let first = (0..kept.len())
            .find(|&k| old.get(k) != Some(&lines[kept[k]]))
            .map(|k| kept[k])
            .expect("the plan inserted code");
        assert_eq!(lines[first].trim(), "T.sync_threads()", "{after}");
        lines.remove(first);
        let racy = tlc_ir::parse(&(lines.join("\n") + "\n")).expect("parses");
        // Four k-steps: the last reads stage 0 of A_shared, whose bytes C_shared takes.
        let dims = [("M", 70), ("N", 40), ("K", 100)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        let opts = RunOptions {
            seed: 1,
            threads: 1,
        };
        let err = run(&racy, &dims, HashMap::new(), &opts)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.contains("data race on shared memory") && err.contains("C_shared"),
            "{err}"
        );
    }
}

/// `acc` carries its value across the loop's iterations: it keeps bytes of its own, while
/// `tile` and `out` (fresh, used one after the other) share theirs — with no barrier to add:
/// `thread-binding`'s barriers already separate their uses, and end the body.
#[test]
fn a_carried_buffer_keeps_its_bytes() {
    let func = common::case("loop_carried_shared");
    let bound = through(&func, Target::Sm80, "thread-binding");
    let out = planned(bound.clone());
    let a = arena(&out).unwrap();
    assert_eq!(
        (a.bytes, a.offset("acc"), a.offset("tile"), a.offset("out")),
        (512, Some(0), Some(256), Some(256))
    );
    let barrier = "T.sync_threads()";
    assert_eq!(
        count(&print_func(&out), barrier),
        count(&print_func(&bound), barrier)
    );
    assert!(assert_same_meaning("loop_carried_shared", &func, &out) > 0);
    // Claiming that `acc` is fresh too is refused by the interpreter (here the plan stays
    // the same: `acc` is used with the two others in the same statements).
    let text = print_func(&bound).replace("T.fresh(tile, out)", "T.fresh(acc, tile, out)");
    let wrong = planned(tlc_ir::parse(&text).expect("parses"));
    assert_eq!(arena(&wrong).map(|a| a.bytes), Some(512));
    let err = run(
        &wrong,
        &HashMap::new(),
        HashMap::new(),
        &RunOptions {
            seed: 1,
            threads: 1,
        },
    )
    .err()
    .map(|e| e.to_string())
    .unwrap_or_default();
    assert!(
        err.contains("which holds a value written before the `T.fresh(acc)`"),
        "{err}"
    );
}
