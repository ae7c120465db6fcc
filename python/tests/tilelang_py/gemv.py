# Source: tile-ai/tilelang examples/gemv/example_gemv.py, commit a35008a4
# (a35008a42531c62b976ae4cec3855d4383db0f3c), functions `naive_gemv`, `naive_splitk_gemv`, `splitk_gemv`, `splitk_gemv_vectorized`, `gemv_alloc_reducer`,
# copied verbatim (a test input for tlc.language, like tests/tilelang/*.tir). Edits:
# - `import tilelang.language as T` -> `import tlc.language as T`; the other imports of
#   the original file that these functions do not use are dropped.
# - `import tilelang as tl` / `import tilelang.language as T` -> `import tlc.language as T`;
#   `from tvm import DataType` -> `from tlc.language import DataType`; the `@tl.jit(...)`
#   and `@tl.autotune(...)` decorators dropped;
# - eager form: the test builds it with `T.eager(fn, **python_arguments)`.
"""TileLang example, run through tlc.language (python/tests/test_tilelang_py.py)."""

import tlc.language as T
from tlc.language import DataType


def naive_gemv(
    A,
    B,
    BLOCK_N: int,
    BLOCK_K: int,
    dtype: T.dtype = T.float16,
    accum_dtype: T.dtype = T.float,
):
    N, K = T.const("N, K")
    A: T.Tensor((K,), dtype)
    B: T.Tensor((N, K), dtype)
    C = T.empty((N,), dtype)

    with T.Kernel(T.ceildiv(N, BLOCK_N)) as bn:
        tn = T.get_thread_binding(0)  # tn = threadIdx.x
        A_shared = T.alloc_shared((BLOCK_K,), dtype)
        B_shared = T.alloc_shared((BLOCK_N, BLOCK_K), dtype)
        C_reg = T.alloc_local((1,), accum_dtype)
        T.clear(C_reg)
        for bk in T.serial(T.ceildiv(K, BLOCK_K)):
            for tk in T.serial(BLOCK_K):
                A_shared[tk] = A[bk * BLOCK_K + tk]
                B_shared[tn, tk] = B[bn * BLOCK_N + tn, bk * BLOCK_K + tk]
            for tk in T.serial(BLOCK_K):
                C_reg[0] += A_shared[tk].astype(accum_dtype) * B_shared[tn, tk].astype(accum_dtype)
        C[bn * BLOCK_N + tn] = C_reg[0]

    return C


def naive_splitk_gemv(
    A,
    B,
    BLOCK_N: int,
    BLOCK_K: int,
    dtype: T.dtype = T.float16,
    accum_dtype: T.dtype = T.float,
):
    N, K = T.const("N, K")
    A: T.Tensor((K,), dtype)
    B: T.Tensor((N, K), dtype)
    C = T.empty((N,), dtype)

    with T.Kernel(T.ceildiv(N, BLOCK_N), threads=(BLOCK_N, BLOCK_K)) as bn:
        tn = T.get_thread_binding(0)
        tk = T.get_thread_binding(1)
        A_local = T.alloc_local((1,), dtype)
        B_local = T.alloc_local((1,), dtype)
        C_accum = T.alloc_local((1,), accum_dtype)
        C_shared = T.alloc_shared((BLOCK_N,), accum_dtype)
        if tk == 0:
            C_shared[tn] = 0
        T.clear(C_accum)
        for bk in T.serial(T.ceildiv(K, BLOCK_K)):
            A_local[0] = A[bk * BLOCK_K + tk]
            B_local[0] = B[bn * BLOCK_N + tn, bk * BLOCK_K + tk]
            C_accum[0] += A_local[0].astype(accum_dtype) * B_local[0].astype(accum_dtype)
        T.atomic_add(C_shared[tn], C_accum[0])
        C[bn * BLOCK_N + tn] = C_shared[tn]

    return C


def splitk_gemv(
    A,
    B,
    BLOCK_N: int,
    BLOCK_K: int,
    reduce_threads: int,
    dtype: T.dtype = T.float16,
    accum_dtype: T.dtype = T.float,
):
    N, K = T.const("N, K")
    TILE_K = T.ceildiv(BLOCK_K, reduce_threads)

    A: T.Tensor((K,), dtype)
    B: T.Tensor((N, K), dtype)
    C = T.empty((N,), dtype)

    with T.Kernel(T.ceildiv(N, BLOCK_N), threads=(BLOCK_N, reduce_threads)) as bn:
        tn = T.get_thread_binding(0)
        tk = T.get_thread_binding(1)
        A_local = T.alloc_local((TILE_K,), dtype)
        B_local = T.alloc_local((TILE_K,), dtype)
        C_shared = T.alloc_shared((BLOCK_N,), accum_dtype)
        C_accum = T.alloc_local((1,), accum_dtype)
        if tk == 0:
            C_shared[tn] = 0
        T.clear(C_accum)
        for bk in T.serial(T.ceildiv(K, BLOCK_K)):
            for k in T.serial(TILE_K):
                A_local[k] = A[bk * BLOCK_K + tk * TILE_K + k]
                B_local[k] = B[bn * BLOCK_N + tn, bk * BLOCK_K + tk * TILE_K + k]
            for k in T.serial(TILE_K):
                C_accum[0] += A_local[k].astype(accum_dtype) * B_local[k].astype(accum_dtype)
        T.atomic_add(C_shared[tn], C_accum[0])
        C[bn * BLOCK_N + tn] = C_shared[tn]

    return C


def splitk_gemv_vectorized(
    A,
    B,
    BLOCK_N: int,
    reduce_threads: int,
    dtype: T.dtype = T.float16,
    accum_dtype: T.dtype = T.float,
):
    N, K = T.const("N, K")
    MAX_TRANSACTION_SIZE_IN_BITS = 128
    TILE_K = MAX_TRANSACTION_SIZE_IN_BITS // DataType(dtype).bits
    BLOCK_K = reduce_threads * TILE_K

    A: T.Tensor((K,), dtype)
    B: T.Tensor((N, K), dtype)
    C = T.empty((N,), dtype)

    with T.Kernel(T.ceildiv(N, BLOCK_N), threads=(BLOCK_N, reduce_threads)) as bn:
        tn = T.get_thread_binding(0)
        tk = T.get_thread_binding(1)
        A_local = T.alloc_local((TILE_K,), dtype)
        B_local = T.alloc_local((TILE_K,), dtype)
        C_shared = T.alloc_shared((BLOCK_N,), accum_dtype)
        C_accum = T.alloc_local((1,), accum_dtype)
        if tk == 0:
            C_shared[tn] = 0
        T.clear(C_accum)
        for bk in T.serial(T.ceildiv(K, BLOCK_K)):
            for k in T.vectorized(TILE_K):
                A_local[k] = A[bk * BLOCK_K + tk * TILE_K + k]
                B_local[k] = B[bn * BLOCK_N + tn, bk * BLOCK_K + tk * TILE_K + k]
            for k in T.serial(TILE_K):
                C_accum[0] += A_local[k].astype(accum_dtype) * B_local[k].astype(accum_dtype)
        T.atomic_add(C_shared[tn], C_accum[0])
        C[bn * BLOCK_N + tn] = C_shared[tn]

    return C


def gemv_alloc_reducer(
    a, x, block_M=128, block_N=128, num_stages=2, threads=256, dtype: T.dtype = T.float16, accum_dtype: T.dtype = T.float
):
    M, N = T.const("M, N")
    a: T.Tensor((M, N), dtype)
    x: T.Tensor((N,), dtype)
    o = T.empty((M,), dtype)

    with T.Kernel(T.ceildiv(M, block_M), threads=threads) as i0_m:
        o_reducer = T.alloc_reducer(block_M, accum_dtype, replication="all")
        T.clear(o_reducer)
        for i0_n in T.Pipelined(T.ceildiv(N, block_N), num_stages=num_stages):
            a_smem = T.alloc_shared((block_M, block_N), dtype)
            T.copy(a[i0_m * block_M, i0_n * block_N], a_smem)
            a_frag = T.alloc_fragment((block_M, block_N), dtype)
            T.copy(a_smem, a_frag)
            x_frag = T.alloc_fragment(block_N, dtype)
            T.copy(x[i0_n * block_N], x_frag)
            for i1_m, i1_n in T.Parallel(block_M, block_N):
                o_reducer[i1_m] += a_frag[i1_m, i1_n] * x_frag[i1_n]
        T.finalize_reducer(o_reducer)
        T.copy(o_reducer, o[i0_m * block_M])

    return o
