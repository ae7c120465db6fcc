//! The analysis floor: facts about the IR that passes (and code generation) ask for, each
//! computed in one place. **Analyses never change the IR, and passes import analyses, never
//! other passes**: the floors are `tlc_ir` → `analysis` → passes → codegen.
//!
//! - `kernels` — every kernel (one `for_each_kernel`) and the shape of a body (SIMT regions,
//!   the merged thread loop, pipelined loops, tile ops);
//! - `block` — a kernel's thread block (shape, thread count) and the thread nest that
//!   regions of a multi-dimensional block are written as (the linear thread index), and
//!   the warp / warpgroup grid a `T.GemmWarpPolicy` picks (`unit_grid`);
//! - `access` — which buffers statements read and write, use counts, element accesses;
//! - `footprint` — the bytes a buffer takes, and a bound of a block's shared memory before
//!   it is planned;
//! - `int` — integer facts (over `tlc_ir::interval`): intervals, `multiple_of`, `unit_offset`, `mentions`,
//!   `provably_true`, under what is known of the variables (`int::Env`);
//! - `sync` — the barrier dataflow of thread-level code (accesses since the last barrier,
//!   asynchronous copies in flight);
//! - `schedule` — the dependency graph and stage plan of a `T.Pipelined` loop;
//! - `mma` — a `T.gemm` on mma.sync: its warp grid (`warp_partition`), and whether it
//!   reads a fragment A from registers (flash attention's `P`, laid out as the scores);
//! - `wgmma` — when a `T.gemm` runs on wgmma (sm_90a): its warpgroup grid, its operands'
//!   layouts and shared-memory descriptors;
//! - `raster` — the block a block plays under L2 rasterization (`T.use_swizzle`);
//! - `rows` — which 1-D fragments are row vectors of a 2-D fragment (`Layout::Rows`): their
//!   reductions and broadcasts stay in registers;
//! - `uniform` — which local buffers hold block-uniform values (scalar variables written
//!   only by block-level code), so that they may drive block-level control flow;
//! - `fresh` — which shared buffers carry no value from one loop iteration to the next
//!   (proved at the tile level, recorded as `T.fresh`, read back by the shared-memory plan);
//! - `local_arrays` — which local arrays are indexed at run time (they live in local
//!   memory, the others in registers) and which of their accesses are provably in bounds;
//! - `monotone` — which way an integer expression moves as one variable grows (a block's
//!   work as a function of its block index).

pub mod access;
pub mod block;
pub mod footprint;
pub mod fresh;
pub mod int;
pub mod kernels;
pub mod local_arrays;
pub mod mma;
pub mod monotone;
pub mod raster;
pub mod rows;
pub mod schedule;
pub mod sync;
pub mod tma;
pub mod uniform;
pub mod wgmma;

/// The expression `text` as the analyses' unit tests meet it: the value stored by
/// `A[0] = text` inside a loop over `i`, in a kernel over `bx` (other names stay free).
#[cfg(test)]
pub(crate) fn test_expr(text: &str) -> tlc_ir::Expr {
    let src = format!(
        "@T.prim_func\ndef f(A: T.Tensor((8,), \"int32\")):\n    with T.Kernel(4, threads=1) as bx:\n        for i in T.serial(4):\n            A[0] = {text}\n"
    );
    let func = tlc_ir::parse(&src).unwrap_or_else(|d| panic!("{d:?}"));
    let mut out = None;
    tlc_ir::visit::for_each_stmt(&func.body, &mut |s| {
        if let tlc_ir::StmtKind::Store { value, .. } = &s.kind {
            out = Some(value.clone());
        }
    });
    out.unwrap_or_else(|| tlc_ir::Expr::int(0))
}
