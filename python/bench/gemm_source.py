"""The seed 000 GEMM as tlc source text, specialized per shape (no torch, no GPU needed).

``kernel_source`` is the seed's ``kernel_matmul`` factory (and, for ``panel_size < 0``, its
``kernel_matmul_no_l2_opt``) written as TileLang DSL text for ``tlc.compile``: A (M, K) and
B (K, N) float16, C (M, N) float16, float32 accumulation, 128 threads, a 3-stage pipeline,
A copied tile-wise and B element-wise, as in the seed's matmul.py.

Run it to print one kernel, e.g. to check it with the CLI:

    python3 python/bench/gemm_source.py 12288 12288 12288 --panel-size 10 > /tmp/k.tir
    cargo run --release -p tlc -- compile /tmp/k.tir --target sm_90a > /tmp/k.ptx
"""

import argparse

# The seed's tile shape: block_M, block_N, block_K = 128, 128, 32.
SEED_BLOCK = (128, 128, 32)


def kernel_source(M, N, K, block_M, block_N, block_K, panel_size=10):
    """The seed kernel for one shape. ``panel_size >= 0`` adds
    ``T.use_swizzle(panel_size=panel_size)`` (0 keeps the line but rasterizes plainly, as in
    the seed's ``tilelang_ps_0``); ``panel_size < 0`` leaves the line out (the seed's
    ``kernel_matmul_no_l2_opt``, its ``tilelang_ps_-10``)."""
    swizzle = f"        T.use_swizzle(panel_size={panel_size})\n" if panel_size >= 0 else ""
    return f'''\
# The seed 000 GEMM at M, N, K = {M}, {N}, {K},
# block {block_M}x{block_N}x{block_K}, panel_size {panel_size}.
@T.prim_func
def gemm_schedule(
    A: T.Tensor(({M}, {K}), "float16"),
    B: T.Tensor(({K}, {N}), "float16"),
    C: T.Tensor(({M}, {N}), "float16"),
):
    with T.Kernel(T.ceildiv({N}, {block_N}), T.ceildiv({M}, {block_M}), threads=128) as (
        bx,
        by,
    ):
{swizzle}        A_shared = T.alloc_shared(({block_M}, {block_K}), "float16")
        B_shared = T.alloc_shared(({block_K}, {block_N}), "float16")
        C_local = T.alloc_fragment(({block_M}, {block_N}), "float")
        T.clear(C_local)
        for ko in T.Pipelined(T.ceildiv({K}, {block_K}), num_stages=3):
            T.copy(A[by * {block_M}, ko * {block_K}], A_shared)
            for k, j in T.Parallel({block_K}, {block_N}):
                B_shared[k, j] = B[ko * {block_K} + k, bx * {block_N} + j]
            T.gemm(A_shared, B_shared, C_local)
        T.copy(C_local, C[by * {block_M}, bx * {block_N}])
'''


def main():
    p = argparse.ArgumentParser(description="Print the seed 000 GEMM for one shape.")
    p.add_argument("M", type=int)
    p.add_argument("N", type=int)
    p.add_argument("K", type=int)
    p.add_argument("--block", type=int, nargs=3, default=SEED_BLOCK, metavar=("BM", "BN", "BK"))
    p.add_argument("--panel-size", type=int, default=10, help="< 0: no T.use_swizzle line")
    args = p.parse_args()
    print(kernel_source(args.M, args.N, args.K, *args.block, args.panel_size), end="")


if __name__ == "__main__":
    main()
