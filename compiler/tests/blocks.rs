//! Multi-dimensional thread blocks through the whole compiler: tile-level kernels on
//! `threads=(32, 4)`, `(16, 8)` and `(32, 2, 2)` (the same 128 threads; regions map onto the
//! linear thread index, docs/passes.md) compile through the default pipeline for sm_80 and
//! sm_90a; the manifest's block is the kernel's shape, the PTX reads the thread index of
//! every axis, and ptxas accepts it without spills. A one-entry tuple is the flat block.

use crate::common;

use common::emit::{assemble, emit, parse};
use common::root;
use tlc::ptx::{check_manifest, print_with_manifest};
use tlc_abi::manifest::Manifest;
use tlc_ir::PrimFunc;
use tlc_passes::{default_pipeline, Instrumentation, PassContext, PassManager, Target};

fn case(path: &str) -> String {
    let path = root().join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `src` with its `threads=(32, 4)` written as `block`.
fn reshaped(src: &str, block: &str) -> String {
    assert!(src.contains("threads=(32, 4)"), "{src}");
    src.replace("threads=(32, 4)", &format!("threads={block}"))
}

/// The default pipeline of `target` on `func` (verified after every pass).
fn lowered(name: &str, func: PrimFunc, target: Target) -> PrimFunc {
    let manager = PassManager::new(default_pipeline(target), Instrumentation::default())
        .unwrap_or_else(|e| panic!("{e}"));
    manager
        .run(func, &mut PassContext::new(target), &mut std::io::sink())
        .unwrap_or_else(|e| panic!("{name} on {}: {e:?}", target.name()))
}

/// Compiles `src` for both targets, assembles each; returns the PTX texts (sm_80 first) and
/// the manifests.
fn compile(name: &str, src: &str) -> Vec<(String, Manifest)> {
    let func = parse(src);
    [Target::Sm80, Target::Sm90a]
        .into_iter()
        .map(|target| {
            let planned = lowered(name, func.clone(), target);
            let (module, manifest) =
                emit(&planned, target).unwrap_or_else(|e| panic!("{name}: codegen: {e:?}"));
            check_manifest(&module, &manifest).unwrap_or_else(|e| panic!("{name}: {e}"));
            let text = print_with_manifest(&module, &manifest);
            assemble("blocks", &text, name, target.name());
            (text, manifest)
        })
        .collect()
}

const SHAPES: [(&str, &[u32], &[&str]); 3] = [
    ("(32, 4)", &[32, 4], &["%tid.x", "%tid.y"]),
    ("(16, 8)", &[16, 8], &["%tid.x", "%tid.y"]),
    ("(32, 2, 2)", &[32, 2, 2], &["%tid.x", "%tid.y", "%tid.z"]),
];

#[test]
fn tile_kernels_on_multi_dimensional_blocks_compile_for_both_targets() {
    for (file, gemm) in [
        ("tests/cases/valid/layouts_and_fill.tir", false),
        ("tests/cases/valid/gemm_threads_2d.tir", true),
    ] {
        let src = case(file);
        for (block, dims, regs) in SHAPES {
            let name = format!(
                "{}_{}",
                file.rsplit('/')
                    .next()
                    .unwrap_or(file)
                    .trim_end_matches(".tir"),
                dims.iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join("x")
            );
            for (ptx, manifest) in compile(&name, &reshaped(&src, block)) {
                assert_eq!(manifest.kernels.len(), 1, "{name}");
                assert_eq!(manifest.kernels[0].block, dims, "{name}");
                for reg in regs {
                    assert!(ptx.contains(reg), "{name}: no {reg}");
                }
                let mut xyz = [1u32; 3];
                xyz[..dims.len()].copy_from_slice(dims);
                let [x, y, z] = xyz;
                assert!(ptx.contains(&format!(".reqntid {x}, {y}, {z}")), "{name}");
                if gemm {
                    // 128 threads on sm_90a: one warpgroup, the wgmma path, its constant
                    // shapes' loads on TMA.
                    let needles = if ptx.contains(".target sm_90a") {
                        [
                            "wgmma.mma_async.sync.aligned",
                            "wgmma.wait_group.sync.aligned",
                            "cp.async.bulk.tensor.2d",
                        ]
                    } else {
                        [
                            "mma.sync.aligned.m16n8k16",
                            "ldmatrix.sync.aligned",
                            "cp.async.cg.shared.global",
                        ]
                    };
                    for needle in needles {
                        assert!(ptx.contains(needle), "{name}: no {needle}");
                    }
                }
            }
        }
    }
}

#[test]
fn a_one_entry_block_is_the_flat_block() {
    let src = case("tests/cases/valid/layouts_and_fill.tir");
    let tuple = compile("tuple_128", &reshaped(&src, "(128,)"));
    let flat = compile("flat_128", &reshaped(&src, "128"));
    for ((a, ma), (b, mb)) in tuple.iter().zip(&flat) {
        assert_eq!(ma, mb);
        assert_eq!(a, b);
        assert!(!a.contains("%tid.y"));
    }
}
