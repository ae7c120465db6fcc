//! TileLang's safe memory access (`legalize-safe-memory`, run by the front end for every
//! command): kernels in `tests/cases/safe_memory/` touch global tensors outside their
//! bounds inside loops, which TileLang guards (loads read 0, stores are dropped). Each must
//! run in the interpreter through the front end, compile for both targets, and its
//! compiled IR must compute what the tile level computes (the mutation campaign's
//! differential); two cases check the guarded values themselves.

use std::collections::HashMap;
use tlc::diagnostics::SourceFile;
use tlc::driver::{compile_source, RoadArgs};
use tlc_ir::interp::{run, RunOptions, Tensor};
use tlc_ir::Target;
use tlc_passes::Instrumentation;
use tlc_tests::mutate::differential;
use tlc_tests::{relative, root, stem};

fn cases() -> Vec<std::path::PathBuf> {
    let dir = root().join("tests/cases/safe_memory");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .expect("list safe-memory cases")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "tir"))
        .collect();
    paths.sort();
    paths
}

/// The front end's kernel of `path` (guards placed) and, per target, its compiled IR.
fn compiled(path: &std::path::Path, target: Target) -> (tlc_ir::PrimFunc, tlc_ir::PrimFunc) {
    let text = std::fs::read_to_string(path).expect("read case");
    let file = SourceFile::new(relative(path).display().to_string(), text);
    let opts = Instrumentation::default();
    let road = RoadArgs::plain(target, &opts);
    match compile_source(&file, &road, &mut std::io::sink()) {
        Ok(r) => (r.tile, r.planned),
        Err(stop) => panic!("{}: {}", path.display(), stop.render(&file, target).0),
    }
}

#[test]
fn guarded_accesses_compile_and_keep_their_meaning_on_both_targets() {
    let paths = cases();
    assert!(paths.len() >= 5, "{paths:?}");
    let mut compared = 0;
    for path in &paths {
        for target in [Target::Sm80, Target::Sm90a] {
            let (tile, planned) = compiled(path, target);
            for seed in [1, 2] {
                let reference = match differential::reference(&tile, seed, seed, 2e7) {
                    Ok(r) => r,
                    // A loop bound read from memory has no work estimate: compiled only.
                    Err(differential::Skip::Large) if stem(path) == "loop_bound_from_memory" => {
                        continue
                    }
                    Err(s) => panic!("{}: no reference ({})", stem(path), s.name()),
                };
                compared += 1;
                assert!(!reference.failed(), "{}: the tile level failed", stem(path));
                if let Some(f) = differential::check(&reference, &planned, target) {
                    panic!("{} on {target:?}: {}", stem(path), f.message);
                }
            }
        }
    }
    assert!(compared >= 4 * (paths.len() - 1), "{compared} comparisons");
}

fn run_tile(name: &str, inputs: HashMap<String, Tensor>) -> HashMap<String, Tensor> {
    let path = root().join("tests/cases/safe_memory").join(name);
    let (tile, _) = compiled(&path, Target::Sm80);
    let opts = RunOptions {
        seed: 7,
        threads: 1,
    };
    run(&tile, &HashMap::new(), inputs, &opts).unwrap_or_else(|d| panic!("{name}: {}", d.message))
}

#[test]
fn a_partial_tile_reads_zeros_past_the_tensor_and_stores_only_inside() {
    // Rows 50..64 of the shared tile read 0; T.copy writes back rows 0..50: B == A.
    let out = run_tile("partial_tile_element_access.tir", HashMap::new());
    let (a, b) = (out["A"].to_f64(), out["B"].to_f64());
    assert_eq!(a.len(), 50 * 64);
    assert_eq!(a, b);
}

#[test]
fn a_store_outside_the_tensor_is_dropped() {
    // k = 0 writes B[0]; k = 2 would write B[80], past the 64 elements: dropped. The other
    // elements keep what the caller gave.
    let given = Tensor::from_f64(tlc_ir::DType::Float32, &[64], &[5.0; 64]).expect("B");
    let out = run_tile(
        "global_store_under_condition.tir",
        HashMap::from([("B".to_string(), given)]),
    );
    let b = out["B"].to_f64();
    assert_eq!(b[0], 1.0);
    assert!(b[1..].iter().all(|&x| x == 5.0), "{b:?}");
}

fn f32_tensor(shape: &[usize], data: &[f64]) -> Tensor {
    Tensor::from_f64(tlc_ir::DType::Float32, shape, data).expect("tensor")
}

#[test]
fn a_view_is_guarded_by_its_own_shape_not_the_parameters() {
    // V (8 x 4) over A (4 x 8): V[i, j] for j >= 4 reads 0, not V[i + 1, j - 4]; W[7 - i, j]
    // for j >= 4 is dropped, not written over W[8 - i, j - 4] (written one row earlier).
    let a: Vec<f64> = (0..32).map(|x| x as f64 + 1.0).collect();
    let out = run_tile(
        "view_logical_bounds.tir",
        HashMap::from([("A".to_string(), f32_tensor(&[4, 8], &a))]),
    );
    let (b, c) = (out["B"].to_f64(), out["C"].to_f64());
    for i in 0..8 {
        for j in 0..8 {
            let want = if j < 4 { a[i * 4 + j] } else { 0.0 };
            assert_eq!(b[i * 8 + j], want, "B[{i}, {j}]");
        }
        for j in 0..4 {
            assert_eq!(c[i * 4 + j], (10 * i + j) as f64, "W[{i}, {j}]");
        }
    }
}

#[test]
fn a_global_layout_is_guarded_by_the_declared_shape() {
    // Y and Z (4 x 8) stored transposed: rows 4 and 5 of the 6-row loop are past the shape.
    let y: Vec<f64> = (0..32).map(|x| x as f64 + 1.0).collect();
    let out = run_tile(
        "layout_logical_bounds.tir",
        HashMap::from([
            ("Y".to_string(), f32_tensor(&[4, 8], &y)),
            ("Z".to_string(), f32_tensor(&[4, 8], &[0.0; 32])),
        ]),
    );
    let (b, z) = (out["B"].to_f64(), out["Z"].to_f64());
    for i in 0..6 {
        for j in 0..8 {
            let want = if i < 4 { y[j * 4 + i] } else { 0.0 };
            assert_eq!(b[i * 8 + j], want, "B[{i}, {j}]");
        }
    }
    assert!(z.iter().all(|&x| x == 1.0), "{z:?}");
}
