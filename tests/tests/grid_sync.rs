//! Grid barriers (`T.sync_grid()`, docs/ir.md "Grid barrier"): the two valid cases, compiled
//! for both targets, compute at the thread level what they compute at the tile level (the
//! interpreter's phases carry each block's threads, lets and buffers across a barrier);
//! their manifest launches the kernel cooperatively with the compiler's counter, their PTX
//! arrives once per barrier, and it assembles.

use crate::tilelang_examples::emit;
use std::collections::HashMap;
use tlc::diagnostics::SourceFile;
use tlc::driver::{compile_source, RoadArgs};
use tlc_ir::interp::{self, RunOptions, Tensor};
use tlc_ir::PrimFunc;
use tlc_passes::{Instrumentation, Target};

fn run(func: &PrimFunc, threads: usize) -> HashMap<String, Tensor> {
    interp::run(
        func,
        &HashMap::new(),
        HashMap::new(),
        &RunOptions { seed: 5, threads },
    )
    .unwrap_or_else(|d| panic!("{}: {d}", func.name.name))
}

#[test]
fn lowered_grid_barriers_compute_what_the_tile_level_does() {
    // 7 blocks: every one reads what others wrote before a barrier.
    let defines = vec!["NB=7".to_string()];
    let opts = Instrumentation::default();
    for (stem, barriers) in [("grid_sync_partials", 1), ("grid_sync_ring", 2)] {
        let path = tlc_tests::root().join(format!("tests/cases/valid/{stem}.tir"));
        let text = std::fs::read_to_string(&path).expect("read the case");
        let file = SourceFile::new(format!("{stem}.tir"), &text);
        for target in [Target::Sm80, Target::Sm90a] {
            let args = RoadArgs {
                defines: &defines,
                ..RoadArgs::plain(target, &opts)
            };
            let road = compile_source(&file, &args, &mut std::io::sink())
                .unwrap_or_else(|e| panic!("{stem} on {target}: {e:?}"));
            // One host thread and several: the phases do not depend on how blocks are run.
            let tile = run(&road.tile, 1);
            for planned in [run(&road.planned, 1), run(&road.planned, 4)] {
                for (name, t) in &tile {
                    let (got, want) = (planned[name].to_f64(), t.to_f64());
                    // The lowered `T.reduce_sum` adds in a butterfly's order, the tile level
                    // in index order: partial sums may differ in their last bits.
                    let near = |(a, b): (&f64, &f64)| (a - b).abs() <= 1e-5 * (1.0 + b.abs());
                    let same = if stem == "grid_sync_ring" {
                        got == want
                    } else {
                        got.len() == want.len() && got.iter().zip(&want).all(near)
                    };
                    assert!(
                        same,
                        "{stem} on {target}: `{name}` differs after the pipeline:\n{got:?}\n{want:?}"
                    );
                }
                if stem == "grid_sync_partials" {
                    // Exactly: every block summed every block's partial, in block order.
                    let parts = planned["Part"].to_f64();
                    let sum = parts.iter().fold(0f32, |acc, &p| acc + p as f32);
                    for t in planned["Total"].to_f64() {
                        assert_eq!(t, f64::from(sum), "{stem} on {target}: Total");
                    }
                }
            }
            let ptx = road.compiled.text();
            assert!(ptx.contains(r#""cooperative":true"#), "{stem} on {target}");
            assert!(
                ptx.contains(
                    r#""scratch":[{"name":"tlc_grid_barrier","dtype":"uint32","shape":[{"int":1}]"#
                ),
                "{stem} on {target}: no counter in the manifest"
            );
            for inst in [
                "atom.release.gpu.global.add.u32",
                "ld.acquire.gpu.global.u32",
            ] {
                assert_eq!(
                    ptx.matches(inst).count(),
                    barriers,
                    "{stem} on {target}: {inst}"
                );
            }
            emit::assemble(stem, ptx, stem, target.name());
        }
    }
}

#[test]
fn a_parameter_named_as_the_counter_is_refused() {
    let text = "@T.prim_func\ndef f(tlc_grid_barrier: T.Tensor((4,), \"float32\")):\n    with T.Kernel(4, threads=32) as bx:\n        tlc_grid_barrier[bx] = 1.0\n        T.sync_grid()\n";
    let file = SourceFile::new("counter.tir", text);
    let opts = Instrumentation::default();
    let Err(stop) = compile_source(
        &file,
        &RoadArgs::plain(Target::Sm80, &opts),
        &mut std::io::sink(),
    ) else {
        panic!("a parameter named `tlc_grid_barrier` was accepted");
    };
    let shown = stop.render(&file, Target::Sm80).0;
    assert!(
        shown.starts_with("counter.tir:2:7: error: `tlc_grid_barrier` is the name of the counter"),
        "{shown}"
    );
}
