# Source: tile-ai/tilelang examples/convolution/example_convolution.py, commit a35008a4
# (a35008a42531c62b976ae4cec3855d4383db0f3c), function `convolution`,
# copied verbatim (a test input for tlc.language, like tests/tilelang/*.tir). Edits:
# - `import tilelang.language as T` -> `import tlc.language as T`; the other imports of
#   the original file that these functions do not use are dropped.
# - the `@tilelang.jit(...)` decorator dropped (tlc.compile takes its place);
# - eager form: the test builds it with `T.eager(fn, **python_arguments)`.
"""TileLang example, run through tlc.language (python/tests/test_tilelang_py.py)."""

import tlc.language as T


def convolution(data, kernel, S, D, P, block_M, block_N, block_K, num_stages, threads, dtype=T.float16, accum_dtype=T.float32):
    N, C, H, W, F, K = T.const("N, C, H, W, F, K")
    KH, KW = K, K
    OH = (H + 2 * P - D * (K - 1) - 1) // S + 1
    OW = (W + 2 * P - D * (K - 1) - 1) // S + 1
    dtype = T.float16
    accum_dtype = T.float32

    data: T.Tensor((N, H, W, C), dtype)
    kernel: T.Tensor((KH, KW, C, F), dtype)
    out = T.empty((N, OH, OW, F), dtype)

    with T.Kernel(T.ceildiv(F, block_N), T.ceildiv(N * OH * OW, block_M), threads=threads) as (bx, by):
        data_shared = T.alloc_shared((block_M, block_K), dtype)
        kernel_shared = T.alloc_shared((block_K, block_N), dtype)
        out_local = T.alloc_fragment((block_M, block_N), accum_dtype)
        out_shared = T.alloc_shared((block_M, block_N), dtype)

        kernel_flat = T.Tensor((KH * KW * C, F), dtype, kernel.data)
        out_flat = T.Tensor((N * OH * OW, F), dtype, out.data)

        T.clear(out_local)
        for k_iter in T.Pipelined(T.ceildiv(KH * KW * C, block_K), num_stages=num_stages):
            T.im2col(data, data_shared, by, k_iter, KH, S, D, P)
            T.copy(kernel_flat[k_iter * block_K, bx * block_N], kernel_shared)
            T.gemm(data_shared, kernel_shared, out_local)

        T.copy(out_local, out_shared)
        T.copy(out_shared, out_flat[by * block_M, bx * block_N])

    return out
