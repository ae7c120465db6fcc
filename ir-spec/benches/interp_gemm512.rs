//! Benchmark: the seed gemm kernel (128×128×32 tiles, 3-stage pipelined loop, `T.copy` for A,
//! a `T.Parallel` store loop for B, `T.gemm`, `T.copy` out) at 512×512×512 float16,
//! interpreted on one host thread. Prints the median of several runs.
//!
//! Run: `cargo bench -p tlc-ir --bench interp_gemm512` (target: under 2 s).

#[path = "../tests/interp_support/mod.rs"]
mod interp_support;

use interp_support::{gemm_kernel, GemmCfg};
use std::collections::HashMap;
use std::time::Instant;
use tlc_ir::interp::{random_tensor, run, RunOptions};
use tlc_ir::DType;

fn main() {
    let runs: usize = std::env::var("RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(7);
    let f = gemm_kernel(&GemmCfg::seed(512, 512, 512));
    let opts = RunOptions {
        seed: 0,
        threads: 1,
    };
    let a = random_tensor("A", DType::Float16, &[512, 512], 0).unwrap();
    let b = random_tensor("B", DType::Float16, &[512, 512], 0).unwrap();
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let inputs = HashMap::from([("A".to_string(), a.clone()), ("B".to_string(), b.clone())]);
        let start = Instant::now();
        let out = run(&f, &HashMap::new(), inputs, &opts);
        times.push(start.elapsed().as_secs_f64());
        if let Err(d) = out {
            eprintln!("run failed: {d}");
            std::process::exit(1);
        }
    }
    times.sort_by(f64::total_cmp);
    let median = times[times.len() / 2];
    println!(
        "interp gemm 512x512x512 f16, 1 thread: median {:.3} s over {runs} runs (min {:.3}, max {:.3})",
        median,
        times[0],
        times[times.len() - 1]
    );
}
