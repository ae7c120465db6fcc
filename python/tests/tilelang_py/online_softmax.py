# Source: tile-ai/tilelang examples/online_softmax/online_softmax.py, commit a35008a4
# (a35008a42531c62b976ae4cec3855d4383db0f3c), function `softmax_kernel`,
# copied verbatim (a test input for tlc.language, like tests/tilelang/*.tir). Edits:
# - `import tilelang.language as T` -> `import tlc.language as T`; the other imports of
#   the original file that these functions do not use are dropped.
# - the `@tilelang.jit(...)` decorator dropped (tlc.compile takes its place);
# - eager form: the test builds it with `T.eager(fn, **python_arguments)`. M and N are module-level names (8192) the original defines after the function
#   and the script code that follows (torch, benchmarks) is not copied: the test passes M, N.
"""TileLang example, run through tlc.language (python/tests/test_tilelang_py.py)."""

import tlc.language as T


def softmax_kernel(X, BLOCK_M=1, BLOCK_N=8192, dtype: T.dtype = T.float16):
    X: T.Tensor([M, N], dtype)
    Y = T.empty([M, N], dtype)

    accum_dtype = T.float32

    scale = 1.44269504  # log2(e)

    with T.Kernel(T.ceildiv(M, BLOCK_M), threads=128) as (i_m):
        x = T.alloc_fragment([BLOCK_M, BLOCK_N], dtype)
        y = T.alloc_fragment([BLOCK_M, BLOCK_N], dtype)
        lse = T.alloc_fragment([BLOCK_M], accum_dtype)
        max_x = T.alloc_fragment([BLOCK_M], dtype)
        exp_x = T.alloc_fragment([BLOCK_M, BLOCK_N], accum_dtype)
        sum_exp_x = T.alloc_fragment([BLOCK_M], accum_dtype)
        T.fill(lse, -T.infinity(accum_dtype))

        for i_n in T.Pipelined(T.ceildiv(N, BLOCK_N)):
            T.copy(X[i_m * BLOCK_M, i_n * BLOCK_N], x)
            T.reduce_max(x, max_x, dim=1, clear=True)

            for i, j in T.Parallel(BLOCK_M, BLOCK_N):
                exp_x[i, j] = T.exp2(x[i, j] * scale - max_x[i] * scale)

            T.reduce_sum(exp_x, sum_exp_x, dim=1, clear=True)

            for i in T.Parallel(BLOCK_M):
                lse[i] = max_x[i] * scale + T.log2(T.exp2(lse[i] - max_x[i] * scale) + sum_exp_x[i])

        for i_n in T.Pipelined(T.ceildiv(N, BLOCK_N)):
            T.copy(X[i_m * BLOCK_M, i_n * BLOCK_N], x)

            for i, j in T.Parallel(BLOCK_M, BLOCK_N):
                y[i, j] = T.exp2(x[i, j] * scale - lse[i])

            T.copy(y, Y[i_m * BLOCK_M, i_n * BLOCK_N])

    return Y
