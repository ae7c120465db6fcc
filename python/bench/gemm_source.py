"""The seed 000 GEMM, written as the seed writes it: Python factories whose ``@T.prim_func``
closes over the shape, the tiles and the dtypes (``import tlc.language as T`` in place of
``import tilelang.language as T``; no torch, no GPU needed).

``kernel_matmul`` is the seed's factory of that name and ``kernel_matmul_no_l2_opt`` its
copy without ``T.use_swizzle`` (the seed's ``tilelang_ps_-10``): A (M, K) and B (K, N),
C (M, N), 128 threads, a 3-stage pipeline, A copied tile-wise and B element-wise.
``kernel_source`` picks one by ``panel_size`` (< 0: no swizzle). Each returns a
``tlc.language.PrimFunc``, which ``tlc.compile`` takes.

Run it to print one kernel's tlc source, e.g. to check it with the CLI:

    python3 python/bench/gemm_source.py 12288 12288 12288 --panel-size 10 > /tmp/k.tir
    cargo run --release --bin tlc -- compile /tmp/k.tir --target sm_90a > /tmp/k.ptx
"""

import argparse

import tlc.language as T

# The seed's tile shape: block_M, block_N, block_K = 128, 128, 32.
SEED_BLOCK = (128, 128, 32)


def kernel_matmul(M, N, K, block_M, block_N, block_K, dtype, accum_dtype, panel_size=10):
    @T.prim_func
    def gemm_schedule(
        A: T.Tensor((M, K), dtype),
        B: T.Tensor((K, N), dtype),
        C: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (
            bx,
            by,
        ):
            T.use_swizzle(panel_size=panel_size)
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                for k, j in T.Parallel(block_K, block_N):
                    B_shared[k, j] = B[ko * block_K + k, bx * block_N + j]
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return gemm_schedule


def kernel_matmul_no_l2_opt(M, N, K, block_M, block_N, block_K, dtype, accum_dtype, panel_size=10):
    @T.prim_func
    def gemm_schedule(
        A: T.Tensor((M, K), dtype),
        B: T.Tensor((K, N), dtype),
        C: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (
            bx,
            by,
        ):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                for k, j in T.Parallel(block_K, block_N):
                    B_shared[k, j] = B[ko * block_K + k, bx * block_N + j]
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return gemm_schedule


def kernel_source(M, N, K, block_M, block_N, block_K, panel_size=10):
    """The seed kernel for one shape, float16 in and out, float32 accumulation, as the seed's
    benchmark builds it: ``panel_size >= 0`` swizzles with that panel (0 keeps the line but
    rasterizes plainly, the seed's ``tilelang_ps_0``), ``panel_size < 0`` does not."""
    factory = kernel_matmul if panel_size >= 0 else kernel_matmul_no_l2_opt
    return factory(M, N, K, block_M, block_N, block_K, "float16", "float", panel_size)


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
