# Source: tile-ai/tilelang examples/blocksparse_gemm/example_blocksparse_gemm.py, commit a35008a4
# (a35008a42531c62b976ae4cec3855d4383db0f3c), function `blocksparse_matmul`,
# copied verbatim (a test input for tlc.language, like tests/tilelang/*.tir). Edits:
# - `import tilelang.language as T` -> `import tlc.language as T`; the other imports of
#   the original file that these functions do not use are dropped.
# - the `@tilelang.autotune(...)` and `@tilelang.jit` decorators dropped;
# - eager form: the test builds it with `T.eager(fn, **python_arguments)`.
"""TileLang example, run through tlc.language (python/tests/test_tilelang_py.py)."""

import tlc.language as T


def blocksparse_matmul(
    A, B, BlockMask, block_M, block_N, block_K, num_stages, thread_num, enable_rasteration, dtype=T.float16, accum_dtype=T.float32
):
    M, N, K = T.const("M, N, K")
    block_mask_shape = (M // block_M, N // block_N, K // block_K)

    A: T.Tensor((M, K), dtype)
    B: T.Tensor((K, N), dtype)
    BlockMask: T.Tensor(block_mask_shape, "bool")
    C = T.empty((M, N), dtype)

    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=thread_num) as (bx, by):
        A_shared = T.alloc_shared((block_M, block_K), dtype)
        B_shared = T.alloc_shared((block_K, block_N), dtype)
        C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
        C_shared = T.alloc_shared((block_M, block_N), dtype)

        T.use_swizzle(panel_size=10, enable=enable_rasteration)
        T.clear(C_local)

        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
            if BlockMask[by, bx, k]:
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)

        T.copy(C_local, C_shared)
        T.copy(C_shared, C[by * block_M, bx * block_N])

    return C
