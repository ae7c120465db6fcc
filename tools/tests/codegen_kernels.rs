//! Codegen of a prim_func with several `T.Kernel`s: one `.entry` per kernel (`<func>_k0`,
//! `<func>_k1`, … in program order), each with the whole parameter list and its own block
//! shape, the manifest (version 2) listing each kernel's grid, block and shared memory.
//! Compiled for `sm_80` and `sm_90a`, checked against the manifest and assembled by ptxas
//! for both, inline thread-level kernels and the tile-level corpus cases through `tlc
//! compile`'s whole pipeline. Statements outside the kernels are located errors.

use crate::common;

use common::emit::{assemble, compile_both, errors};
use common::{text, tlc};
use tlc_runtime::{Access, DimExpr, Manifest};

/// Kernel 0 stages A through 16 KiB of shared memory into B; kernel 1 reads B transposed
/// through 64 KiB (past the 48 KiB default) into C. Both kernels name their block index bx
/// and their thread index tx, and both shared buffers S (the parser renames the second
/// kernel's names).
const CHAIN: &str = r#"
N = T.symbolic("N")

@T.prim_func
def chain(
    A: T.Tensor((N, 64), "float32"),
    B: T.Tensor((N, 64), "float32"),
    C: T.Tensor((64, 256), "float32"),
):
    with T.Kernel(T.ceildiv(N, 64), threads=128) as bx:
        S = T.alloc_shared((64, 64), "float32")
        T.shared_arena(bytes=16384, offsets={S: 0})
        for tx in T.thread_binding(128, thread="threadIdx.x"):
            for k in T.serial(32):
                if bx * 64 + (tx + k * 128) // 64 < N:
                    S[(tx + k * 128) // 64, (tx + k * 128) % 64] = A[bx * 64 + (tx + k * 128) // 64, (tx + k * 128) % 64]
            T.sync_threads()
            for k in T.serial(32):
                if bx * 64 + (tx + k * 128) // 64 < N:
                    B[bx * 64 + (tx + k * 128) // 64, (tx + k * 128) % 64] = S[(tx + k * 128) // 64, (tx + k * 128) % 64] * 2.0
    with T.Kernel(1, 2, threads=(64, 4)) as (bx, by):
        S = T.alloc_shared((256, 64), "float32")
        T.shared_arena(bytes=65536, offsets={S: 0})
        for tx in T.thread_binding(64, thread="threadIdx.x"):
            for ty in T.thread_binding(4, thread="threadIdx.y"):
                for k in T.serial(64):
                    S[ty * 64 + k, tx] = B[T.min(ty * 64 + k, N - 1), tx]
                T.sync_threads()
                for k in T.serial(32):
                    C[tx, by * 128 + ty * 32 + k] = S[by * 128 + ty * 32 + k, tx]
"#;

fn entries(ptx: &str) -> Vec<&str> {
    ptx.lines()
        .filter_map(|l| l.strip_prefix(".visible .entry "))
        .map(|l| l.trim_end_matches('('))
        .collect()
}

#[test]
fn two_kernels_are_two_entries_in_one_module() {
    let (texts, man) = compile_both("codegen_kernels", "chain", CHAIN);
    for ptx in &texts {
        assert_eq!(entries(ptx), ["chain_k0", "chain_k1"]);
        // The same parameter list on every entry, named after it.
        for entry in ["chain_k0", "chain_k1"] {
            for p in ["A", "B", "C"] {
                assert!(ptx.contains(&format!(".param .u64 {entry}_param_{p}")));
            }
            assert!(ptx.contains(&format!(".param .u32 {entry}_param_N")));
        }
        assert!(ptx.contains(".reqntid 128, 1, 1") && ptx.contains(".reqntid 64, 4, 1"));
        // One dynamic arena declaration serves both entries.
        assert_eq!(
            ptx.matches(".extern .shared .align 16 .b8 smem[];").count(),
            1
        );
        // The manifest line is version 2 and lists both kernels.
        let first = ptx.lines().next().unwrap_or_default();
        assert!(
            first.starts_with("// tlc-manifest: {\"version\":2,"),
            "{first}"
        );
        let read = Manifest::from_ptx(ptx).map(|m| m.kernels);
        assert_eq!(read.as_ref(), Ok(&man.kernels));
    }
    assert_eq!(man.version(), 2);
    assert_eq!(man.kernels.len(), 2);
    let (k0, k1) = (&man.kernels[0], &man.kernels[1]);
    assert_eq!(k0.entry, "chain_k0");
    assert_eq!(
        k0.grid,
        vec![DimExpr::ceildiv(DimExpr::dim("N"), DimExpr::int(64))]
    );
    assert_eq!(k0.block, vec![128]);
    assert_eq!(k0.shared_bytes, DimExpr::int(16384));
    assert_eq!(k1.entry, "chain_k1");
    assert_eq!(k1.grid, vec![DimExpr::int(1), DimExpr::int(2)]);
    assert_eq!(k1.block, vec![64, 4]);
    assert_eq!(k1.shared_bytes, DimExpr::int(65536));
    // Accesses are over both kernels: B is written by one and read by the other.
    let access: Vec<Access> = man.params.iter().map(|p| p.access).collect();
    assert_eq!(access, [Access::Read, Access::ReadWrite, Access::Write]);
}

#[test]
fn one_kernel_keeps_the_function_name_and_version_1() {
    let one = CHAIN
        .split("    with T.Kernel(1, 2")
        .next()
        .unwrap_or_default();
    let (texts, man) = compile_both("codegen_kernels", "chain_one", one);
    assert_eq!(entries(&texts[0]), ["chain"]);
    assert_eq!(man.version(), 1);
    assert!(texts[0].starts_with("// tlc-manifest: {\"version\":1,\"entry\":\"chain\","));
}

#[test]
fn statements_outside_the_kernels_are_located_errors() {
    let let_outside = r#"
@T.prim_func
def f(A: T.Tensor((64,), "float32")):
    s = 3
    with T.Kernel(2, threads=32) as bx:
        for tx in T.thread_binding(32, thread="threadIdx.x"):
            A[bx * 32 + tx] = T.cast(s, "float32")
"#;
    let errs = errors(let_outside);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0]
            .message
            .contains("this statement is outside every one: move it into the kernels"),
        "{errs:?}"
    );
    // The error points at `s = 3` (line 4 of the source).
    let at = let_outside.get(errs[0].span.start..errs[0].span.end);
    assert_eq!(at, Some("s = 3"));
}

/// The corpus cases with several kernels, through the whole pipeline: two entries, a
/// version 2 manifest naming them, ptxas on both targets without warnings or spills.
#[test]
fn corpus_cases_with_two_kernels_compile_and_assemble() {
    let cases = [
        ("two_kernels_chain", [4096, 65536]),
        ("swizzle_panels", [0, 0]),
    ];
    for (case, shared) in cases {
        for target in ["sm_80", "sm_90a"] {
            let file = format!("tests/cases/valid/{case}.tir");
            let out = tlc(&["compile", &file, "--target", target, "-o", "-"]);
            assert!(out.status.success(), "{file}: {}", text(&out.stderr));
            let ptx = text(&out.stdout);
            let want = [format!("{case}_k0"), format!("{case}_k1")];
            assert_eq!(entries(&ptx), want, "{file} {target}");
            let man = Manifest::from_ptx(&ptx).unwrap_or_else(|e| panic!("{file}: {e}"));
            assert_eq!(man.version(), 2);
            let names: Vec<&str> = man.kernels.iter().map(|k| k.entry.as_str()).collect();
            assert_eq!(names, want);
            let bytes: Vec<DimExpr> = man.kernels.iter().map(|k| k.shared_bytes.clone()).collect();
            assert_eq!(bytes, shared.map(DimExpr::int), "{file} {target}");
            assemble("codegen_kernels", &ptx, case, target);
        }
    }
}
