//! `lower-tile-ops`: snapshots of the SIMT regions, meaning preserved under the lockstep
//! interpreter (random inputs, ragged symbolic dims), vectorized loops where the rule
//! allows them, and the errors for what is not lowered.

use crate::common;

use common::{assert_close_meaning, assert_same_meaning, case, corpus, with_region_barriers};
use tlc_ir::printer::print_func;
use tlc_ir::visit::for_each_stmt;
use tlc_ir::{ForKind, PrimFunc, Scope, StmtKind};
use tlc_passes::layout_inference::LayoutInference;
use tlc_passes::lower_reductions::LowerReductions;
use tlc_passes::lower_tile_ops::LowerTileOps;
use tlc_passes::pack_int4::PackInt4;
use tlc_passes::stage_fragment_reads::StageFragmentReads;
use tlc_passes::Pass;

fn lowered(func: PrimFunc) -> PrimFunc {
    let out = LowerTileOps
        .run(func, &common::cx())
        .expect("lower-tile-ops");
    tlc_ir::verifier::verify(&out).expect("lowered IR verifies");
    out
}

/// `assert_same_meaning` of the input and the output with its region barriers.
fn same_meaning(name: &str, before: &PrimFunc, after: &PrimFunc) -> usize {
    assert_same_meaning(name, before, &with_region_barriers(after.clone()))
}

fn parse(src: &str) -> PrimFunc {
    let func = tlc_ir::parse(src).expect("parse");
    tlc_ir::verifier::verify(&func).expect("verify");
    func
}

/// The extents of the vectorized loops, in order.
fn vector_loops(func: &PrimFunc) -> Vec<i64> {
    let mut out = Vec::new();
    for_each_stmt(&func.body, &mut |s| {
        if let StmtKind::For(f) = &s.kind {
            if f.kind == ForKind::Vectorized {
                out.push(f.stop.as_int().unwrap_or(-1));
            }
        }
    });
    out
}

/// No tile op and no parallel loop is left; every remaining op sits in a region.
fn assert_thread_level(name: &str, func: &PrimFunc) {
    for_each_stmt(&func.body, &mut |s| match &s.kind {
        StmtKind::Copy { .. } | StmtKind::Fill { .. } | StmtKind::Gemm(_) => {
            panic!("{name}: a tile op is left")
        }
        StmtKind::For(f) if f.kind == ForKind::Parallel => {
            panic!("{name}: a parallel loop is left")
        }
        _ => {}
    });
    for b in func.buffers() {
        assert_ne!(
            b.scope,
            Scope::Fragment,
            "{name}: fragment `{}` left",
            b.name.name
        );
    }
}

fn specialized(func: &PrimFunc, dims: &[(&str, i64)]) -> PrimFunc {
    let bindings: Vec<(String, i64)> = dims.iter().map(|(n, v)| (n.to_string(), *v)).collect();
    tlc_ir::specialize::specialize(func, &bindings).expect("specialize")
}

#[test]
fn snapshot_elementwise_add() {
    insta::assert_snapshot!(print_func(&lowered(case("elementwise_add"))));
}

#[test]
fn snapshot_scale_cast() {
    insta::assert_snapshot!(print_func(&lowered(case("scale_cast"))));
}

#[test]
fn snapshot_transpose() {
    insta::assert_snapshot!(print_func(&lowered(case("transpose"))));
}

#[test]
fn snapshot_copy_regions() {
    insta::assert_snapshot!(print_func(&lowered(case("copy_regions"))));
}

#[test]
fn snapshot_index_math() {
    insta::assert_snapshot!(print_func(&lowered(case("index_math"))));
}

const FRAGMENT: &str = "M = T.symbolic(\"M\")\n\n@T.prim_func\ndef frag(\n    A: T.Tensor((M, 48), \"float16\"),\n    C: T.Tensor((M, 48), \"float32\"),\n):\n    with T.Kernel(T.ceildiv(M, 16), threads=96) as bx:\n        A_shared = T.alloc_shared((16, 48), \"float16\")\n        C_local = T.alloc_fragment((16, 48), \"float32\")\n        T.fill(C_local, 1.5)\n        T.copy(A[bx * 16, 0], A_shared)\n        for i, j in T.Parallel(16, 48):\n            C_local[i, j] = C_local[i, j] + T.cast(A_shared[i, j], \"float32\")\n        T.copy(C_local, C[bx * 16, 0])\n";

#[test]
fn snapshot_fragment() {
    let func = parse(FRAGMENT);
    let out = lowered(func.clone());
    same_meaning("fragment", &func, &out);
    insta::assert_snapshot!(print_func(&out));
}

#[test]
fn lowering_keeps_meaning_on_the_corpus() {
    let mut compared = 0;
    let mut lowered_cases = 0;
    for (name, func) in corpus() {
        if name == "while_loops" {
            // Its scalar variables (local buffers) are read by block-level code, which the
            // interpreter runs only once thread-binding has merged the regions; its lowering
            // is compared after the whole pipeline (interp_cases at the tile level,
            // gemm_pipeline's and tilelang_examples' while-loop kernels after lowering).
            continue;
        }
        // Reductions and broadcasts are rewritten into tile ops first (tests/reductions.rs),
        // gemm kernels need their layouts (tests/gemm.rs checks them in detail).
        // (int4 buffers packed into bytes first, as the default pipeline does.)
        let tiles = PackInt4
            .run(func.clone(), &common::cx())
            .and_then(|f| LowerReductions.run(f, &common::cx()))
            .and_then(|f| StageFragmentReads.run(f, &common::cx()))
            .expect("pack-int4, lower-reductions, stage-fragment-reads");
        let rewritten = tiles != func;
        let input = LayoutInference
            .run(tiles.clone(), &common::cx())
            .expect("layout-inference");
        let has_gemm = input != tiles;
        match LowerTileOps.run(input, &common::cx()) {
            Ok(out) => {
                tlc_ir::verifier::verify(&out)
                    .unwrap_or_else(|d| panic!("{name}: lowered IR does not verify: {d:?}"));
                assert_thread_level(&name, &out);
                compared += if has_gemm || rewritten {
                    // mma.sync adds each 16-deep partial sum to the accumulator; a reduction
                    // sums in a tree.
                    assert_close_meaning(&name, &func, &with_region_barriers(out), 1e-3)
                } else {
                    same_meaning(&name, &func, &out)
                };
                lowered_cases += 1;
            }
            Err(errors) => panic!("{name}: {errors:?}"),
        }
    }
    assert!(lowered_cases >= 10, "only {lowered_cases} cases lowered");
    assert!(compared >= 50, "only {compared} runs compared");
}

#[test]
fn vectors_need_constant_aligned_rows() {
    // Symbolic N: the global rows of scale_cast are not known multiples of the vector
    // width, so only the shared-to-shared parallel loop is vectorized (4 x f32 wide).
    assert_eq!(vector_loops(&lowered(case("scale_cast"))), [4]);
    // With N = 128 every access is aligned: the f32 load copy (4), the parallel loop (4,
    // its widest dtype is f32) and the f16 store copy (8).
    let func = specialized(&case("scale_cast"), &[("M", 100), ("N", 128)]);
    let out = lowered(func.clone());
    assert_eq!(vector_loops(&out), [4, 4, 8]);
    same_meaning("scale_cast N=128", &func, &out);
    // N = 130: rows are not multiples of 4 elements; nothing touching X or Y vectorizes.
    let func = specialized(&case("scale_cast"), &[("M", 100), ("N", 130)]);
    let out = lowered(func.clone());
    assert_eq!(vector_loops(&out), [4]);
    same_meaning("scale_cast N=130", &func, &out);
    // float16 tiles: 8-wide copies; the transposing loop reads `tile[j, i]`: no vectors.
    let func = specialized(&case("transpose"), &[("M", 64), ("N", 96)]);
    let out = lowered(func.clone());
    assert_eq!(vector_loops(&out), [8, 8]);
    same_meaning("transpose", &func, &out);
}

/// The tile form of `T.atomic_add` from a shared tile into a float32 and a float16 tensor.
const ATOMIC_TILE: &str = "M = T.symbolic(\"M\")\nN = T.symbolic(\"N\")\n\n@T.prim_func\ndef k(\n    X: T.Tensor((M, N), \"float32\"),\n    C: T.Tensor((M, N), \"float32\"),\n    H: T.Tensor((M, N), \"float16\"),\n):\n    with T.Kernel(T.ceildiv(N, 64), T.ceildiv(M, 32), threads=128) as (bx, by):\n        S = T.alloc_shared((32, 64), \"float32\")\n        T.copy(X[by * 32, bx * 64], S)\n        T.atomic_add(C[by * 32, bx * 64], S)\n        T.atomic_add(H[by * 32, bx * 64], S)\n";

/// Each `T.vectorized` loop of atomic adds: (lanes, whether an `if` right around it tests
/// the guard once for the whole vector).
fn atomic_vectors(func: &PrimFunc) -> Vec<(i64, bool)> {
    let mut out = Vec::new();
    let is_atomic_loop = |s: &tlc_ir::Stmt| match &s.kind {
        StmtKind::For(f) if f.kind == ForKind::Vectorized => {
            matches!(f.body.as_slice(), [b] if matches!(b.kind, StmtKind::AtomicAdd { .. }))
                .then(|| f.stop.as_int().unwrap_or(-1))
        }
        _ => None,
    };
    let mut guarded = Vec::new();
    for_each_stmt(&func.body, &mut |s| {
        if let StmtKind::If { then_body, .. } = &s.kind {
            if let [inner] = then_body.as_slice() {
                guarded.extend(is_atomic_loop(inner).map(|_| inner.span));
            }
        }
    });
    for_each_stmt(&func.body, &mut |s| {
        if let Some(lanes) = is_atomic_loop(s) {
            out.push((lanes, guarded.contains(&s.span)));
        }
    });
    out
}

#[test]
fn atomic_tiles_add_whole_vectors_tested_once() {
    let func = parse(ATOMIC_TILE);
    // Symbolic N: rows not known to be multiples of a vector.
    let out = lowered(func.clone());
    assert_eq!(atomic_vectors(&out), []);
    same_meaning("atomic tile", &func, &out);
    // N = 1000, ragged: 4 floats / 8 halves per add (one loop per region; `unroll` expands
    // its trips later), each vector under the one guard its lane 0 passes (1000 is a
    // multiple of 8: no vector straddles the edge).
    let ragged = specialized(&func, &[("M", 100), ("N", 1000)]);
    let out = lowered(ragged.clone());
    assert_eq!(atomic_vectors(&out), [(4, true), (8, true)]);
    let text = print_func(&out);
    assert!(
        text.contains(
            "if by * 32 + (it_1 * 128 + tx_1) // 16 < 100 and bx * 64 + (it_1 * 128 + tx_1) % 16 * 4 < 1000:"
        ),
        "{text}"
    );
    same_meaning("atomic tile N=1000", &ragged, &out);
    // N = 1004: rows of 1004 floats are 16-byte aligned, of 1004 halves not 16-byte aligned
    // (8 lanes): float32 in vectors of 4, float16 element by element.
    let odd8 = specialized(&func, &[("M", 100), ("N", 1004)]);
    let out = lowered(odd8.clone());
    assert_eq!(atomic_vectors(&out), [(4, true)]);
    same_meaning("atomic tile N=1004", &odd8, &out);
    // Tile-aligned sizes: the guards hold everywhere and are left out.
    let aligned = specialized(&func, &[("M", 64), ("N", 128)]);
    let out = lowered(aligned.clone());
    assert_eq!(atomic_vectors(&out), [(4, false), (8, false)]);
    assert!(!print_func(&out).contains("if "), "{}", print_func(&out));
    same_meaning("atomic tile aligned", &aligned, &out);
}

#[test]
fn ragged_element_counts_get_a_guard() {
    // 1001 elements over 128 threads: 8 trips and `if it * 128 + tx < 1001`, no vectors (rows of 1001).
    let src = "@T.prim_func\ndef f(A: T.Tensor((1001,), \"float32\")):\n    with T.Kernel(1, threads=128) as bx:\n        for i in T.Parallel(1001):\n            A[i] = A[i] * 2.0\n";
    let func = parse(src);
    let out = lowered(func.clone());
    let text = print_func(&out);
    assert!(text.contains("for it in T.unroll(8):"), "{text}");
    assert!(text.contains("if it * 128 + tx < 1001:"), "{text}");
    same_meaning("ragged", &func, &out);
}

#[test]
fn unsupported_inputs_are_clear_errors() {
    // Run directly (the manager would first check `requires()`: see tests/manager.rs), a
    // gemm whose accumulator has no layout is refused, not guessed at.
    let errs = LowerTileOps
        .run(case("gemm_seed000"), &common::cx())
        .unwrap_err();
    assert!(
        errs[0].message.contains("has no mma layout"),
        "{}",
        errs[0].message
    );
    // A parallel loop over half a fragment.
    let src = FRAGMENT.replace(
        "for i, j in T.Parallel(16, 48)",
        "for i, j in T.Parallel(8, 48)",
    );
    let errs = LowerTileOps.run(parse(&src), &common::cx()).unwrap_err();
    assert!(
        errs[0].message.contains("part of fragment `C_local`"),
        "{}",
        errs[0].message
    );
    // A fragment read by a scalar statement (a let) is one value for the block: the front
    // end makes it a shared buffer (docs/ir.md "Allocations"), which lowers.
    let src = FRAGMENT.replace(
        "        T.copy(C_local, C[bx * 16, 0])\n",
        "        c = C_local[0, 0]\n        T.copy(C_local, C[bx * 16, 0])\n",
    );
    let func = parse(&src);
    let scope = |f: &tlc_ir::PrimFunc| {
        let mut out = None;
        tlc_ir::visit::for_each_stmt(&f.body, &mut |s| {
            if let tlc_ir::StmtKind::Kernel(k) = &s.kind {
                out = k
                    .allocs
                    .iter()
                    .find(|a| a.name.name == "C_local")
                    .map(|a| a.scope);
            }
        });
        out
    };
    assert_eq!(scope(&func), Some(tlc_ir::Scope::Shared));
    assert!(LowerTileOps.run(func, &common::cx()).is_ok());
}

#[test]
fn thread_level_kernels_are_left_alone() {
    for stem in ["thread_level", "thread_transpose", "thread_vectorized"] {
        let func = case(stem);
        assert_eq!(lowered(func.clone()), func, "{stem}");
    }
}

/// `layouts_and_fill` (a fill, a swizzled shared copy, a parallel loop over a fragment) with
/// its `threads=(32, 4)` replaced by `block`.
fn layouts_and_fill_on(block: &str) -> PrimFunc {
    let text = print_func(&case("layouts_and_fill"));
    assert!(text.contains("threads=(32, 4)"), "{text}");
    parse(&text.replace("threads=(32, 4)", &format!("threads={block}")))
}

/// The kernel's thread-binding loops: (thread tag, extent), outermost first.
fn bindings(func: &PrimFunc) -> Vec<(String, i64)> {
    let mut out = Vec::new();
    for_each_stmt(&func.body, &mut |s| {
        if let StmtKind::For(f) = &s.kind {
            if let ForKind::ThreadBinding(tag) = f.kind {
                out.push((tag.name().to_string(), f.stop.as_int().unwrap_or(-1)));
            }
        }
    });
    out
}

#[test]
fn multi_dimensional_blocks_lower_onto_the_linear_thread_index() {
    // The same 128 threads in four shapes: each region is a thread nest whose axes are the
    // block's, and every shape computes what the tile-level kernel does.
    for (block, axes) in [
        ("(32, 4)", &[("threadIdx.x", 32), ("threadIdx.y", 4)][..]),
        ("(16, 8)", &[("threadIdx.x", 16), ("threadIdx.y", 8)]),
        (
            "(32, 2, 2)",
            &[("threadIdx.x", 32), ("threadIdx.y", 2), ("threadIdx.z", 2)],
        ),
    ] {
        let func = layouts_and_fill_on(block);
        let out = lowered(func.clone());
        let found = bindings(&out);
        // fill, copy in, parallel loop, copy out: four regions.
        assert_eq!(found.len(), 4 * axes.len(), "{block}: {found:?}");
        for region in found.chunks(axes.len()) {
            let want: Vec<(String, i64)> = axes.iter().map(|(t, n)| (t.to_string(), *n)).collect();
            assert_eq!(region, want.as_slice(), "{block}");
        }
        assert!(print_func(&out).contains("t = tx + ty * "), "{block}");
        assert!(
            same_meaning(block, &func, &out) > 0,
            "{block}: nothing compared"
        );
    }
    // A one-entry tuple is the flat block: the very same lowering as `threads=128`.
    let tuple = lowered(layouts_and_fill_on("(128,)"));
    let flat = lowered(layouts_and_fill_on("128"));
    assert_eq!(print_func(&tuple), print_func(&flat));
    assert_eq!(bindings(&flat), vec![("threadIdx.x".to_string(), 128); 4]);
}

#[test]
fn thread_counts_that_are_not_positive_constants_are_located_errors() {
    // The verifier refuses these first; run directly, the pass names the entry itself.
    for (entry, at) in [
        (tlc_ir::Expr::var("bx"), 1),
        (tlc_ir::Expr::int(0), 1),
        (tlc_ir::Expr::int(-4), 0),
    ] {
        let mut func = layouts_and_fill_on("(32, 4)");
        let StmtKind::Kernel(k) = &mut func.body[0].kind else {
            panic!("no kernel")
        };
        let span = k.threads[at].span;
        assert!(!span.is_dummy());
        let mut entry = entry;
        entry.span = span;
        k.threads[at] = entry;
        let errs = LowerTileOps.run(func, &common::cx()).unwrap_err();
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert_eq!(
            errs[0].message,
            "the thread count must be a positive constant"
        );
        // Spans compare equal as IR metadata: compare the bytes.
        assert_eq!(
            (errs[0].span.start, errs[0].span.end),
            (span.start, span.end)
        );
    }
}
