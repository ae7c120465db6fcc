//! The SIMT-region inputs of `thread-binding` / `plan-shared-memory` (`passes/tests/cases/`,
//! written by hand in the form `lower-tile-ops` produces) and their references computed in
//! Rust.
//!
//! They live here rather than in `tests/cases/valid` because the interpreter does not yet
//! treat the end of a block-level `threadIdx` loop as a barrier (docs/ir.md, "Thread
//! regions", separates consecutive regions as if by one): the unmerged input reports a data race
//! between regions. So the pass OUTPUT is checked against the reference instead of against
//! the input.

#![allow(dead_code)]

use std::collections::HashMap;
use tlc_ir::interp::{run, RunOptions};
use tlc_ir::PrimFunc;

pub const CASES: [&str; 4] = [
    "simt_transpose",
    "simt_pipelined",
    "simt_two_buffers",
    "simt_uniform_if",
];

pub fn simt(stem: &str) -> PrimFunc {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/cases")
        .join(format!("{stem}.tir"));
    crate::common::load(&path)
}

/// The symbolic dims `func` runs with (N = 200: three full 64-element blocks and a tail).
pub fn dims(func: &PrimFunc) -> HashMap<String, i64> {
    func.dims.iter().map(|d| (d.name.clone(), 200)).collect()
}

/// Runs `func` (a compiled form of case `stem`) on random inputs of several seeds and checks
/// every output against the reference. Panics on an interpreter error (a race included).
pub fn check_reference(stem: &str, func: &PrimFunc) {
    for seed in [1u64, 2, 3] {
        let o = run(
            func,
            &dims(func),
            HashMap::new(),
            &RunOptions { seed, threads: 1 },
        )
        .unwrap_or_else(|e| panic!("{stem}: {e}"));
        let v = |name: &str| o[name].to_f64();
        match stem {
            "simt_transpose" => {
                let (a, b) = (v("A"), v("B"));
                for i in 0..64 {
                    for j in 0..64 {
                        assert_eq!(b[j * 64 + i], a[i * 64 + j], "{stem}: B[{j}, {i}]");
                    }
                }
            }
            "simt_pipelined" => {
                let (a, x, y) = (v("A"), v("x"), v("y"));
                for r in 0..128 {
                    // `acc[0] += A * x`: one float32 fma per step (docs/ir.md, "Contraction").
                    let mut acc = 0f32;
                    for k in 0..256 {
                        acc = (a[r * 256 + k] as f32).mul_add(x[k] as f32, acc);
                    }
                    assert_eq!(y[r], acc as f64, "{stem}: y[{r}]");
                }
            }
            "simt_two_buffers" => {
                let (a, b, c) = (v("A"), v("B"), v("C"));
                for blk in 0..4 {
                    for t in 0..64 {
                        let i = blk * 64 + t;
                        assert_eq!(b[i], a[blk * 64 + 63 - t], "{stem}: B[{i}]");
                        let want = (a[blk * 64 + (t + 1) % 64] as f32 * 2.0) as f64;
                        assert_eq!(c[i], want, "{stem}: C[{i}]");
                    }
                }
            }
            "simt_uniform_if" => {
                let (a, b) = (v("A"), v("B"));
                for i in 0..200 {
                    let (blk, t) = (i / 64, i % 64);
                    let want = if blk < 3 {
                        a[blk * 64 + 63 - t]
                    } else {
                        (a[i] as f32 * 2.0) as f64
                    };
                    assert_eq!(b[i], want, "{stem}: B[{i}]");
                }
            }
            other => panic!("no reference for {other}"),
        }
    }
}
