//! Shared helpers of the software-pipelining tests (`pipeline-planning`,
//! `inject-software-pipeline`, `inject-cp-async`, and `thread-binding` on their output):
//! the pipelined cases, pass chains run by name, and interpreter comparisons with chosen
//! bindings of the symbolic dims (trip counts 1, 2 — fewer than the stages — and more).

#![allow(dead_code)]

use std::collections::HashMap;
use tlc_ir::interp::{run, RunOptions};
use tlc_ir::visit::for_each_stmt;
use tlc_ir::{PrimFunc, StmtKind};

/// A case of `passes/tests/cases/`.
pub fn case(stem: &str) -> PrimFunc {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/cases")
        .join(format!("{stem}.tir"));
    crate::common::load(&path)
}

pub fn parse(src: &str) -> PrimFunc {
    let func = tlc_ir::parse(src).unwrap_or_else(|d| panic!("{d:?}\n{src}"));
    tlc_ir::verifier::verify(&func).unwrap_or_else(|d| panic!("{d:?}\n{src}"));
    func
}

/// Runs the passes named in `chain` (registry names), verifying after each and checking
/// that the printed IR parses back to the same IR.
pub fn run_passes(mut func: PrimFunc, chain: &[&str]) -> PrimFunc {
    for name in chain {
        let pass = tlc_passes::pipeline::lookup(name).unwrap_or_else(|| panic!("no pass {name}"));
        func = pass
            .run(func, &crate::common::cx())
            .unwrap_or_else(|e| panic!("{name} failed: {e:?}"));
        let text = tlc_ir::printer::print_func(&func);
        if let Err(e) = tlc_ir::verifier::verify(&func) {
            panic!("{name} produced invalid IR: {e:?}\n{text}");
        }
        // The printed IR is valid input for the next stage.
        let again = tlc_ir::parse(&text).unwrap_or_else(|e| panic!("{name}: {e:?}\n{text}"));
        assert!(
            again == func,
            "{name}: the print does not parse back to the IR\n{text}"
        );
    }
    func
}

/// The tile-level passes.
pub const TILE: [&str; 2] = ["pipeline-planning", "inject-software-pipeline"];
/// Down to the unmerged SIMT regions with asynchronous copies.
pub const ASYNC: [&str; 4] = [
    "pipeline-planning",
    "inject-software-pipeline",
    "lower-tile-ops",
    "inject-cp-async",
];
/// ... and merged, with barriers.
pub const BOUND: [&str; 5] = [
    "pipeline-planning",
    "inject-software-pipeline",
    "lower-tile-ops",
    "inject-cp-async",
    "thread-binding",
];

/// A pipelined copy-and-accumulate kernel with constant sizes: blocks of 32 rows of
/// `A[m, k]`, K tiles of 32 (so `ceil(k / 32)` iterations) of A and of `B[k, 64]` copied to
/// shared memory and summed elementwise into `C[m, 64]` (every element of both tiles is
/// read), with `num_stages` stages. `k` a multiple of 8 keeps the copies vectorizable.
pub fn copy_kernel(m: i64, k: i64, num_stages: i64) -> PrimFunc {
    parse(&format!(
        r#"@T.prim_func
def pipe_copy(
    A: T.Tensor(({m}, {k}), "float16"),
    B: T.Tensor(({k}, 64), "float16"),
    C: T.Tensor(({m}, 64), "float32"),
):
    with T.Kernel(T.ceildiv({m}, 32), threads=128) as bx:
        A_shared = T.alloc_shared((32, 32), "float16")
        B_shared = T.alloc_shared((32, 64), "float16")
        C_local = T.alloc_fragment((32, 64), "float32")
        T.clear(C_local)
        for ko in T.Pipelined(T.ceildiv({k}, 32), num_stages={num_stages}):
            T.copy(A[bx * 32, ko * 32], A_shared)
            T.copy(B[ko * 32, 0], B_shared)
            for i, j in T.Parallel(32, 64):
                C_local[i, j] = C_local[i, j] + T.cast(A_shared[i, j % 32], "float32") * T.cast(B_shared[i, j], "float32")
        T.copy(C_local, C[bx * 32, 0])
"#
    ))
}

pub fn dims(pairs: &[(&str, i64)]) -> HashMap<String, i64> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

/// Runs `before` and `after` on the same random inputs (2 seeds per binding) and requires
/// identical outputs; the interpreter's checks (races, cp.async bytes not landed, reads of
/// unwritten memory, out-of-bounds) make any of them fail. Returns the runs compared.
pub fn assert_same(
    name: &str,
    before: &PrimFunc,
    after: &PrimFunc,
    bindings: &[HashMap<String, i64>],
) -> usize {
    let mut runs = 0;
    for d in bindings {
        for seed in [1u64, 2] {
            let opts = RunOptions { seed, threads: 1 };
            let want = run(before, d, HashMap::new(), &opts)
                .unwrap_or_else(|e| panic!("{name}: the input does not run ({d:?}): {e}"));
            let got = run(after, d, HashMap::new(), &opts).unwrap_or_else(|e| {
                panic!(
                    "{name}: the output does not run ({d:?}): {e}\n{}",
                    tlc_ir::printer::print_func(after)
                )
            });
            for (param, w) in &want {
                assert!(
                    got.get(param) == Some(w),
                    "{name}: `{param}` differs (dims {d:?}, seed {seed})"
                );
            }
            runs += 1;
        }
    }
    runs
}

/// The error the interpreter reports for `func` (seed 1), if any.
pub fn run_error(func: &PrimFunc, d: &HashMap<String, i64>) -> Option<String> {
    run(
        func,
        d,
        HashMap::new(),
        &RunOptions {
            seed: 1,
            threads: 1,
        },
    )
    .err()
    .map(|e| e.to_string())
}

pub fn count(func: &PrimFunc, pred: &dyn Fn(&StmtKind) -> bool) -> usize {
    let mut n = 0;
    for_each_stmt(&func.body, &mut |s| n += usize::from(pred(&s.kind)));
    n
}

/// `func` without the statements `drop` selects (anywhere).
pub fn without(mut func: PrimFunc, drop: &dyn Fn(&StmtKind) -> bool) -> PrimFunc {
    fn walk(body: &mut Vec<tlc_ir::Stmt>, drop: &dyn Fn(&StmtKind) -> bool) {
        body.retain(|s| !drop(&s.kind));
        for s in body {
            for child in tlc_ir::visit::child_bodies_mut(s) {
                walk(child, drop);
            }
        }
    }
    walk(&mut func.body, drop);
    func
}
