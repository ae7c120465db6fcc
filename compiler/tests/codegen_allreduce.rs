//! `T.thread_allreduce` in PTX: `log2 G` butterfly steps, each one `shfl.sync.bfly.b32` at
//! lane offsets G/2, …, 1 over the whole warp (lanes 0..n of a block smaller than a warp)
//! and one combine in the result dtype, assembled by ptxas for both targets. The values
//! agree with the interpreter on the GPU: `scripts/gpu-check.sh`
//! (`tests/tilelang/dequant_gemv_fp16xint4.tir`).

use crate::common;

use common::emit::compile_both;

fn kernel(dtype: &str, op: &str, block: (u32, u32)) -> String {
    let (x, y) = block;
    format!(
        r#"@T.prim_func
def k(A: T.Tensor(({y}, {x}), "{dtype}"), C: T.Tensor(({y}, {x}), "{dtype}")):
    with T.Kernel(1, threads=({x}, {y})) as bx:
        acc = T.alloc_local((1,), "{dtype}")
        tx = T.thread_binding(0, {x}, thread="threadIdx.x")
        ty = T.thread_binding(0, {y}, thread="threadIdx.y")
        T.thread_allreduce("{op}", A[ty, tx], acc[0], tx)
        C[ty, tx] = acc[0]
"#
    )
}

/// The `shfl` lines of `ptx`: (lane offset, member mask).
fn shuffles(ptx: &str) -> Vec<(String, String)> {
    ptx.lines()
        .map(str::trim)
        .filter(|l| l.starts_with("shfl.sync.bfly.b32"))
        .map(|l| {
            let args: Vec<&str> = l.trim_end_matches(';').split(',').map(str::trim).collect();
            (args[2].to_string(), args[4].to_string())
        })
        .collect()
}

#[test]
fn butterflies_assemble_for_every_dtype_and_op() {
    for (dtype, op) in [
        ("float32", "sum"),
        ("float32", "max"),
        ("float16", "sum"),
        ("bfloat16", "min"),
        ("int32", "max"),
        ("uint32", "sum"),
    ] {
        let name = format!("allreduce_{dtype}_{op}");
        let (texts, _) = compile_both("allreduce", &name, &kernel(dtype, op, (32, 4)));
        for text in &texts {
            let offsets: Vec<String> = shuffles(text)
                .into_iter()
                .map(|(o, m)| {
                    assert_eq!(m, "0xffffffff", "{name}");
                    o
                })
                .collect();
            assert_eq!(offsets, ["16", "8", "4", "2", "1"], "{name}");
        }
    }
}

#[test]
fn small_groups_and_small_blocks() {
    // 8 threads per group, 4 groups per warp: offsets 4, 2, 1 over the full warp.
    let (texts, _) = compile_both(
        "allreduce",
        "allreduce_g8",
        &kernel("float32", "sum", (8, 16)),
    );
    let want: Vec<(String, String)> = ["4", "2", "1"]
        .iter()
        .map(|o| (o.to_string(), "0xffffffff".to_string()))
        .collect();
    assert_eq!(shuffles(&texts[0]), want);
    // A 16-thread block: only lanes 0..16 exist.
    let (texts, _) = compile_both(
        "allreduce",
        "allreduce_b16",
        &kernel("int32", "min", (16, 1)),
    );
    let masks: Vec<String> = shuffles(&texts[1]).into_iter().map(|(_, m)| m).collect();
    assert_eq!(masks, vec!["0x0000ffff"; 4]);
}
