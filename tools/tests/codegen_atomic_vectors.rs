//! The tile form of `T.atomic_add` as cheap as a `T.copy` epilogue (issue 16's split-K
//! GEMM): no spills at 128 x 128 and 64 x 128 tiles on either target (ptxas -v), vector
//! `red`s where PTX has them (`red.global.add.v2.f32` / `.v4.f32` and `.v{2,4}.f16x2` on
//! sm_90a, PTX ISA 8.1; packed `.noftz.f16x2` on both targets, `.bf16x2` on sm_90a), one
//! guarded `red` per element where a ragged row of odd length rules vectors out, and the
//! guard tested once per vector where the row length is even. The GPU runs are
//! `scripts/gpu-check.sh` (`tests/cases/valid/gemm_splitk_atomic.tir`).

use crate::common;

use common::emit::assemble;
use common::{ptxas_log, root, text, tlc};
use std::path::PathBuf;

/// The split-K GEMM of `tests/cases/valid/gemm_splitk_atomic.tir` (from its `M = …` line
/// on) with a `block_m x block_n` tile and `c` as C's dtype (and the operands' dtype when
/// `c` is bfloat16); `splitk(128, 128, "float32")` is the valid case, which
/// `the_template_is_the_valid_case` checks.
fn splitk(block_m: i64, block_n: i64, c: &str) -> String {
    let ab = if c == "bfloat16" {
        "bfloat16"
    } else {
        "float16"
    };
    format!(
        r#"M = T.symbolic("M")
N = T.symbolic("N")
K = T.symbolic("K")

@T.prim_func
def gemm_splitk_atomic(
    A: T.Tensor((M, K), "{ab}"),
    B: T.Tensor((K, N), "{ab}"),
    C: T.Tensor((M, N), "{c}"),
):
    with T.Kernel(T.ceildiv(N, 256), M, threads=256) as (bx, by):
        for j in T.Parallel(256):
            if bx * 256 + j < N:
                C[by, bx * 256 + j] = 0
    with T.Kernel(T.ceildiv(N, {block_n}), T.ceildiv(M, {block_m}), 4, threads=128) as (bx, by, bz):
        A_shared = T.alloc_shared(({block_m}, 32), "{ab}")
        B_shared = T.alloc_shared((32, {block_n}), "{ab}")
        C_local = T.alloc_fragment(({block_m}, {block_n}), "float")
        T.clear(C_local)
        steps = T.ceildiv(T.ceildiv(K, 32), 4)
        first = bz * steps
        for ko in T.Pipelined(T.min(steps, T.ceildiv(K, 32) - first), num_stages=3):
            T.copy(A[by * {block_m}, (first + ko) * 32], A_shared)
            T.copy(B[(first + ko) * 32, bx * {block_n}], B_shared)
            T.gemm(A_shared, B_shared, C_local)
        T.atomic_add(C[by * {block_m}, bx * {block_n}], C_local)
"#
    )
}

/// A shared tile added into a float32 and a float16 tensor (vectors of 16 bytes of each).
/// The tile is filled, not copied: at an odd N an element-wise masked copy of the tile
/// holds 16 guards at once, more than sm_90a's predicate registers (ptxas spills them,
/// with or without the adds); `passes/tests/lower_tile_ops.rs` runs the copied form.
const SHARED_TILE: &str = r#"M = T.symbolic("M")
N = T.symbolic("N")

@T.prim_func
def shared_tile(
    C: T.Tensor((M, N), "float32"),
    H: T.Tensor((M, N), "float16"),
):
    with T.Kernel(T.ceildiv(N, 64), T.ceildiv(M, 32), threads=128) as (bx, by):
        S = T.alloc_shared((32, 64), "float32")
        T.fill(S, 1.5)
        T.atomic_add(C[by * 32, bx * 64], S)
        T.atomic_add(H[by * 32, bx * 64], S)
"#;

fn scratch() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("atomic_vectors");
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// `tlc compile` of `src` for `target` with `-D` bindings `dims` (`--emit` `emit`): the
/// output text, or the error text.
fn compile(
    name: &str,
    src: &str,
    target: &str,
    dims: &[&str],
    emit: &str,
) -> Result<String, String> {
    let dir = scratch();
    let file = dir.join(format!("{name}.tir"));
    std::fs::write(&file, src).expect("write the kernel");
    let out_path = dir.join(format!("{name}.{target}.{emit}"));
    let (file, out) = (file.display().to_string(), out_path.display().to_string());
    let mut args = vec![
        "compile", &file, "--target", target, "--emit", emit, "-o", &out,
    ];
    for d in dims {
        args.extend(["-D", d]);
    }
    let run = tlc(&args);
    if run.status.success() {
        Ok(std::fs::read_to_string(&out_path).expect("the output"))
    } else {
        Err(text(&run.stderr))
    }
}

/// The `red` instructions of `ptx` with how often each spelling occurs, sorted.
fn reds(ptx: &str) -> Vec<(String, usize)> {
    let mut out: Vec<(String, usize)> = Vec::new();
    for op in ptx
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|op| op.starts_with("red."))
    {
        match out.iter_mut().find(|(o, _)| o == op) {
            Some((_, n)) => *n += 1,
            None => out.push((op.to_string(), 1)),
        }
    }
    out.sort();
    out
}

fn red(op: &str, n: usize) -> (String, usize) {
    (op.to_string(), n)
}

/// The `.version` line's ISA.
fn version(ptx: &str) -> &str {
    ptx.lines()
        .find_map(|l| l.strip_prefix(".version "))
        .unwrap_or_default()
}

#[test]
fn the_template_is_the_valid_case() {
    let path = root().join("tests/cases/valid/gemm_splitk_atomic.tir");
    let case = std::fs::read_to_string(&path).expect("the valid case");
    let body = case
        .find("M = T.symbolic")
        .map(|at| &case[at..])
        .expect("the case's dims");
    assert_eq!(body, splitk(128, 128, "float32"));
}

/// Issue 16's shapes: the split-K GEMM at 128 x 128 and 64 x 128 tiles assembles without
/// spills on both targets (`assemble` refuses a spill, a warning or more than 255
/// registers), at the issue's tile-aligned size and a ragged one; the epilogue is one `red`
/// per accumulator pair (sm_90a: `.v2.f32`) or element (sm_80).
#[test]
fn split_k_epilogues_do_not_spill() {
    for (bm, bn) in [(128, 128), (64, 128)] {
        let src = splitk(bm, bn, "float32");
        // Accumulators per thread: the block's 128 consumer threads hold the whole tile.
        let per_thread = (bm * bn / 128) as usize;
        for dims in [
            &["M=1024", "N=1024", "K=14336"][..],
            &["M=1000", "N=1000", "K=4000"][..],
        ] {
            for target in ["sm_80", "sm_90a"] {
                let name = format!("splitk_{bm}x{bn}_{}", dims[0]);
                let ptx = compile(&name, &src, target, dims, "ptx")
                    .unwrap_or_else(|e| panic!("{name} {target}: {e}"));
                let log = assemble("atomic_vectors", &ptx, &name, target);
                eprintln!("{name} {target}: {log}");
                let want = if target == "sm_90a" {
                    assert_eq!(version(&ptx), "8.3", "{name}: TMA maps and vector reds");
                    vec![red("red.global.add.v2.f32", per_thread / 2)]
                } else {
                    vec![red("red.global.add.f32", per_thread)]
                };
                assert_eq!(reds(&ptx), want, "{name} {target}");
            }
        }
    }
}

/// Where N is odd a pair may straddle the ragged edge and rows are not 8-byte aligned: one
/// guarded add per element, scalar `red`s, on both targets. Where N is even and ragged,
/// each pair's guard is tested once (its lane 0), before the pair's one `red`.
#[test]
fn ragged_tiles_keep_their_guards() {
    let src = splitk(128, 128, "float32");
    for target in ["sm_80", "sm_90a"] {
        let odd = ["M=1000", "N=999", "K=4000"];
        let ir = compile("splitk_odd", &src, target, &odd, "tir").expect("compiles");
        let lines: Vec<&str> = ir.lines().collect();
        let adds: Vec<usize> = (0..lines.len())
            .filter(|&i| lines[i].contains("T.atomic_add("))
            .collect();
        assert_eq!(adds.len(), 128, "{target}:\n{ir}");
        for &i in &adds {
            let guard = lines[i - 1].trim();
            assert!(
                guard.starts_with("if ")
                    && guard.contains(" < 1000 and ")
                    && guard.ends_with(" < 999:"),
                "{target}: an unguarded add at the ragged edge: {guard}"
            );
            assert!(!lines[i].contains(" + v"), "{target}: {}", lines[i]);
        }
        let ptx = compile("splitk_odd", &src, target, &odd, "ptx").expect("compiles");
        assert_eq!(reds(&ptx), [red("red.global.add.f32", 128)], "{target}");
        assemble("atomic_vectors", &ptx, "splitk_odd", target);

        let even = ["M=1000", "N=1000", "K=4000"];
        let ir = compile("splitk_even", &src, target, &even, "tir").expect("compiles");
        let lines: Vec<&str> = ir.lines().collect();
        let pairs: Vec<usize> = (0..lines.len())
            .filter(|&i| {
                lines[i].trim().starts_with("for v") && lines[i].contains("T.vectorized(2)")
            })
            .filter(|&i| {
                lines
                    .get(i + 1)
                    .is_some_and(|l| l.contains("T.atomic_add("))
            })
            .collect();
        assert_eq!(pairs.len(), 64, "{target}:\n{ir}");
        for &i in &pairs {
            let guard = lines[i - 1].trim();
            assert!(
                guard.starts_with("if ") && guard.ends_with(" < 1000:") && !guard.contains(" + v"),
                "{target}: the pair's guard: {guard}"
            );
        }
    }
}

/// A float16 C adds packed pairs (`.noftz.f16x2`, the values rounded to f16 first) on both
/// targets; a bfloat16 one `.noftz.bf16x2` on sm_90a and, on sm_80 (no bfloat16 `red`),
/// the located error of one element's add.
#[test]
fn sixteen_bit_destinations_add_packed_pairs() {
    let dims = ["M=1000", "N=1000", "K=4000"];
    let half = splitk(128, 128, "float16");
    for target in ["sm_80", "sm_90a"] {
        let ptx = compile("splitk_f16", &half, target, &dims, "ptx").expect("compiles");
        assert_eq!(
            reds(&ptx),
            [red("red.global.add.noftz.f16x2", 64)],
            "{target}"
        );
        assert!(
            ptx.contains("cvt.rn.f16.f32"),
            "{target}: values rounded to f16"
        );
        assemble("atomic_vectors", &ptx, "splitk_f16", target);
    }
    let bf16 = splitk(128, 128, "bfloat16");
    let ptx = compile("splitk_bf16", &bf16, "sm_90a", &dims, "ptx").expect("compiles");
    assert_eq!(reds(&ptx), [red("red.global.add.noftz.bf16x2", 64)]);
    assemble("atomic_vectors", &ptx, "splitk_bf16", "sm_90a");
    let err = compile("splitk_bf16", &bf16, "sm_80", &dims, "ptx").expect_err("sm_80 refuses");
    assert!(
        err.contains("splitk_bf16.tir:26:9: error: a bfloat16 `T.atomic_add` needs sm_90a"),
        "{err}"
    );
}

/// A shared tile adds 16 bytes of the destination per vector: `.v4.f32` and `.v4.f16x2`
/// (8 halves) on sm_90a, whose module is PTX ISA 8.1 (vector `red`s); on sm_80 the same
/// vectors as scalar `.f32` and packed `.f16x2` `red`s (PTX ISA 8.0). A ragged even N keeps
/// the vectors (each tested once); an odd N adds element by element.
#[test]
fn shared_tiles_add_sixteen_byte_vectors() {
    for n in ["N=1024", "N=1000"] {
        let dims = ["M=100", n];
        let ptx = compile("shared_tile", SHARED_TILE, "sm_90a", &dims, "ptx").expect("compiles");
        assert_eq!(version(&ptx), "8.1");
        assert_eq!(
            reds(&ptx),
            [
                red("red.global.add.noftz.v4.f16x2", 2),
                red("red.global.add.v4.f32", 4)
            ],
            "{n}"
        );
        assemble("atomic_vectors", &ptx, "shared_tile", "sm_90a");
        let ptx = compile("shared_tile", SHARED_TILE, "sm_80", &dims, "ptx").expect("compiles");
        assert_eq!(version(&ptx), "8.0");
        assert_eq!(
            reds(&ptx),
            [
                red("red.global.add.f32", 16),
                red("red.global.add.noftz.f16x2", 8)
            ],
            "{n}"
        );
        assemble("atomic_vectors", &ptx, "shared_tile", "sm_80");
    }
    // Odd N: the adds are element by element, in two rolled loops of 16 trips (one guarded
    // `red` each). ptxas accepts them; on sm_90a it reports 8 bytes of spill stores at 80
    // registers for these two short loops, with no register limit in force (64 bytes at 48
    // registers before the adds' addresses were hoisted out of their guards) — decided
    // inside ptxas, not by the PTX's pressure, so only acceptance is checked here.
    for target in ["sm_80", "sm_90a"] {
        let dims = ["M=100", "N=999"];
        let ptx = compile("shared_tile_odd", SHARED_TILE, target, &dims, "ptx").expect("compiles");
        assert_eq!(version(&ptx), "8.0", "{target}");
        assert_eq!(
            reds(&ptx),
            [
                red("red.global.add.f32", 1),
                red("red.global.add.noftz.f16", 1)
            ],
            "{target}"
        );
        let file = scratch().join(format!("shared_tile_odd.{target}.ptx"));
        std::fs::write(&file, &ptx).expect("write the PTX");
        ptxas_log(&file, target).unwrap_or_else(|e| panic!("{target}: {e}"));
    }
}
