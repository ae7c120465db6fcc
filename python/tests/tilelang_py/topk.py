# Source: tile-ai/tilelang examples/topk/example_topk.py, commit a35008a4
# (a35008a42531c62b976ae4cec3855d4383db0f3c), function `tl_topk`,
# copied verbatim (a test input for tlc.language, like tests/tilelang/*.tir). Edits:
# - `import tilelang.language as T` -> `import tlc.language as T`; the other imports of
#   the original file that these functions do not use are dropped.
# - the `@tilelang.autotune(configs=...)` and `@tilelang.jit` decorators dropped;
# - eager form: the test builds it with `T.eager(fn, **python_arguments)`.
"""TileLang example, run through tlc.language (python/tests/test_tilelang_py.py)."""

import tlc.language as T


def tl_topk(logits, topk, blk_m, threads=128):
    M, N = T.const("M, N")
    dtype = T.float32

    logits: T.Tensor([M, N], dtype)
    topk_gates = T.empty([M, topk], dtype)
    topk_indices = T.empty([M, topk], T.int32)

    with T.Kernel(T.ceildiv(M, blk_m), threads=threads) as bx:
        logits_frag = T.alloc_fragment([blk_m, N], dtype=dtype)
        max_val = T.alloc_fragment([blk_m], dtype=dtype)
        expand_max_idx = T.alloc_fragment([blk_m, N], T.int32)
        max_idx = T.alloc_fragment([blk_m], T.int32)

        T.copy(logits[bx * blk_m, 0], logits_frag)

        for k in T.serial(topk):
            T.fill(expand_max_idx, -1)
            T.reduce_max(logits_frag, max_val, dim=1, clear=True)

            for i, j in T.Parallel(blk_m, N):
                expand_max_idx[i, j] = T.if_then_else(max_val[i] == logits_frag[i, j], j, expand_max_idx[i, j])

            T.reduce_max(expand_max_idx, max_idx, dim=1, clear=True)

            for i, j in T.Parallel(blk_m, N):
                logits_frag[i, j] = T.if_then_else(max_val[i] == logits_frag[i, j], -10000.0, logits_frag[i, j])

            for i in T.Parallel(blk_m):
                topk_gates[bx * blk_m + i, k] = max_val[i]
                topk_indices[bx * blk_m + i, k] = max_idx[i]

    return topk_gates, topk_indices
