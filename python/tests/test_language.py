"""Kernels written in Python (`import tlc.language as T`): the factory's values substituted
into the source, symbolic dims kept, names the function binds left alone, diagnostics at
the .py line. Compiled and interpreted on the CPU."""

import inspect

import numpy as np
import pytest

import tlc
import tlc.language as T

BLOCK = 32  # a module-level constant the kernels read


def matmul(M, N, K, block_M, block_N, block_K, dtype="float16", accum_dtype="float"):
    @T.prim_func
    def main(
        A: T.Tensor((M, K), dtype),
        B: T.Tensor((K, N), dtype),
        C: T.Tensor((M, N), accum_dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[ko * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


def scale(n, k, factor):
    # `k` is also the kernel's loop variable: the loop's, not the factory's, inside it.
    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, BLOCK * 4), threads=BLOCK * 4) as bx:
            for k in T.Parallel(BLOCK * 4):
                if bx * (BLOCK * 4) + k < n:
                    Y[bx * (BLOCK * 4) + k] = X[bx * (BLOCK * 4) + k] * factor

    return main


def test_the_factorys_values_become_literals():
    f = matmul(256, 128, 64, 64, 64, 32)
    assert isinstance(f, T.PrimFunc) and f.name == "main" and f.filename == __file__
    text = str(f)
    assert 'A: T.Tensor((256, 64), "float16")' in text
    assert 'C_local = T.alloc_fragment((64, 64), "float")' in text
    assert "T.ceildiv(64, 32)" in text
    k = tlc.compile(f, target="sm_80")
    assert [p["shape"] for p in k.manifest["params"]] == [
        [{"int": 256}, {"int": 64}],
        [{"int": 64}, {"int": 128}],
        [{"int": 256}, {"int": 128}],
    ]


def test_a_python_gemm_interprets_like_numpy():
    k = tlc.compile(matmul(T.symbolic("M"), 64, 64, 32, 32, 32), target="sm_80")
    assert k.manifest["dims"] == [{"name": "M", "dtype": "int32"}]
    rng = np.random.default_rng(3)
    a = rng.integers(-4, 5, (96, 64)).astype(np.float16)
    b = rng.integers(-4, 5, (64, 64)).astype(np.float16)
    _, _, c = tlc.interpret(k, a, b, None)
    np.testing.assert_array_equal(c, a.astype(np.float32) @ b.astype(np.float32))


def test_names_the_function_binds_are_not_replaced():
    f = scale(1000, 7, 0.5)
    text = str(f)
    assert "for k in T.Parallel(32 * 4):" in text and "+ k < 1000" in text
    assert "* 0.5" in text
    x = np.linspace(-1, 1, 1000, dtype=np.float32)
    _, y = tlc.interpret(tlc.compile(f, target="sm_80"), x, None)
    np.testing.assert_array_equal(y, x * np.float32(0.5))


def test_diagnostics_point_at_the_python_line():
    def bad(n):
        @T.prim_func
        def main(A: T.Tensor((n,), "float32")):
            with T.Kernel(1, threads=128) as bx:
                A[bx] = T.frobnicate(n)

        return main

    line = inspect.getsourcelines(bad)[1] + 4
    with pytest.raises(tlc.CompileError) as e:
        tlc.compile(bad(5), target="sm_80")
    message = str(e.value)
    assert message.startswith(f"{__file__}:{line}:"), message
    assert "unknown TileLang construct `T.frobnicate`" in message
    assert "A[bx] = T.frobnicate(5)" in message


def test_a_value_that_is_no_literal_is_left_for_the_compiler_to_report():
    class Config:
        pass

    def kernel(cfg):
        @T.prim_func
        def main(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64) as bx:
                for i in T.Parallel(64):
                    A[i] = cfg

        return main

    f = kernel(Config())
    assert "A[i] = cfg" in str(f)
    with pytest.raises(tlc.CompileError, match="cfg"):
        tlc.compile(f, target="sm_80")


def test_literals_are_spelled_as_the_language_reads_them():
    from tlc.language import _literal

    assert _literal(-3) == "(-3)"
    assert _literal((1, 2)) == "(1, 2)" and _literal((1,)) == "(1,)"
    assert _literal([1, True, None]) == "[1, True, None]"
    assert _literal('a"b') == '"a\\"b"'
    assert _literal(object()) is None and _literal((1, object())) is None
    assert T.float16 == "float16" and T.symbolic("N", "int64") == T.Symbolic("N", "int64")


def sized(M, P):
    OM = (M + 2 * P - 3) // 1 + 1  # Python arithmetic on a symbolic dim

    @T.prim_func
    def main(X: T.Tensor((M,), "float32"), Y: T.Tensor((OM,), "float32")):
        with T.Kernel(T.ceildiv(OM, 32), threads=32) as bx:
            for i in T.Parallel(32):
                if bx * 32 + i < OM:
                    Y[bx * 32 + i] = X[bx * 32 + i]

    return main


def test_arithmetic_on_symbolic_dims_is_an_expression():
    text = str(sized(T.symbolic("M"), 1))
    assert 'M = T.symbolic("M")' in text
    assert "Y: T.Tensor((((((M + 2) - 3) // 1) + 1),)" in text
    assert T.ceildiv(T.symbolic("M"), 64).text == "T.ceildiv(M, 64)" and T.ceildiv(130, 64) == 3
    with pytest.raises(T.LanguageError, match="depends on a symbolic dim"):
        assert T.symbolic("M") - T.symbolic("N") >= 0
    with pytest.raises(T.LanguageError, match="depends on a symbolic dim"):
        assert T.symbolic("M") % 32 == 0


def test_datatype_bits():
    assert T.DataType(T.float16).bits == 16 and T.DataType("float").bits == 32
    assert T.DataType(T.float8_e4m3fn).bits == 8 and T.float == "float"


def branchy(causal, n):
    @T.prim_func
    def main(X: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(32):
                if causal:
                    X[i] = 1.0
                else:
                    X[i] = (2.0 if causal else 3.0)

    return main


def test_python_level_branches_are_resolved_on_their_lines():
    f = branchy(False, 32)
    lines = f.source.splitlines()
    first = inspect.getsourcelines(branchy)[1]
    assert lines[first + 8 - 1].strip() == "X[i] = ((3.0))"
    assert "causal" not in f.source and "if" not in f.source.split("T.Parallel")[1]
    (x,) = tlc.interpret(tlc.compile(f, target="sm_80"), None)
    np.testing.assert_array_equal(x, np.full(32, 3.0, np.float32))


def eager_add(A, B, block, dtype=T.float32):
    M, N = T.const("M, N")
    scale = 2.0

    A: T.Tensor((M, N), dtype)
    B: T.Tensor((M, N), dtype)
    C = T.empty((M, N), dtype)

    with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=128) as (bx, by):
        for i, j in T.Parallel(block, block):
            if by * block + i < M and bx * block + j < N:
                C[by * block + i, bx * block + j] = (
                    A[by * block + i, bx * block + j] + B[by * block + i, bx * block + j] * scale
                )

    return C


def test_an_eager_kernel_becomes_a_prim_func():
    f = T.eager(eager_add, block=32, N=40)
    assert f.out_idx == [2]
    assert 'M = T.symbolic("M")' in f.source and "N = T.symbolic" not in f.source
    first = inspect.getsourcelines(eager_add)[1]
    lines = f.source.splitlines()
    assert lines[first - 1].startswith("def eager_add(A: T.Tensor((M, 40), \"float32\")")
    assert "T.const" not in f.source and "return" not in f.source
    k = tlc.compile(f, target="sm_80")
    assert k.out_idx == [2]
    a, b = np.ones((33, 40), np.float32), np.full((33, 40), 0.5, np.float32)
    _, _, c = tlc.interpret(k, a, b, None)
    np.testing.assert_array_equal(c, a + 2.0 * b)


def test_an_eager_tensor_without_a_declaration_is_named():
    def broken(A, X, block):
        A: T.Tensor((128,), "float32")
        with T.Kernel(1, threads=32) as bx:
            pass

    with pytest.raises(T.LanguageError, match="parameter `X` has no value"):
        T.eager(broken, block=32)


def tunable_matmul(M, N, K):
    # The tile sizes are the kernel's tuning space: the names stay and the text declares
    # them, so `tlc.plan` ranks the space and `tlc.tune` times it.
    block_M = T.tunable([64, 128], default=128)
    block_N = T.tunable([64, 128])
    num_stages = T.tunable([2, 3], default=3)

    @T.prim_func
    def main(
        A: T.Tensor((M, K), "float16"),
        B: T.Tensor((K, N), "float16"),
        C: T.Tensor((M, N), "float"),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, 32), "float16")
            B_shared = T.alloc_shared((32, block_N), "float16")
            C_local = T.alloc_fragment((block_M, block_N), "float")
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, 32), num_stages=num_stages):
                T.copy(A[by * block_M, ko * 32], A_shared)
                T.copy(B[ko * 32, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


def test_tunables_of_a_python_kernel_are_its_space():
    f = tunable_matmul(256, 256, 128)
    text = str(f)
    assert "block_M = T.tunable([64, 128], default=128)\n" in text
    assert "block_N = T.tunable([64, 128], default=64)\n" in text
    assert "num_stages=num_stages" in text
    ranking = tlc.plan(f, target="sm_90a", sms=132)
    configs = [r["config"] for r in ranking["ranked"]] + [d["config"] for d in ranking["dropped"]]
    assert len(configs) == 8  # 2 x 2 x 2
    assert all(set(r["config"]) == {"block_M", "block_N", "num_stages"} for r in ranking["ranked"])
    # The names bind as a .tir file's tunables do: 128 x 64 tiles are a grid of 256 / 64
    # by 256 / 128 blocks, 64 x 128 tiles the other way round.
    k = tlc.compile(f, target="sm_80", block_M=128, block_N=64)
    assert k.manifest["grid"] == [{"int": 4}, {"int": 2}]
    k = tlc.compile(f, target="sm_80", block_M=64, block_N=128)
    assert k.manifest["grid"] == [{"int": 2}, {"int": 4}]
    with pytest.raises(T.LanguageError, match="not one of"):
        T.tunable([64, 128], default=96)
    with pytest.raises(T.LanguageError, match="non-empty list of integers"):
        T.tunable([])


def test_tune_takes_a_python_kernel_and_source_text():
    if tlc.driver_available():
        pytest.skip("a CUDA driver is present")
    # A PrimFunc (no TypeError): its space is read, and the GPU is what it lacks.
    with pytest.raises(tlc.CompileError, match="`tlc tune` needs a GPU"):
        tlc.tune(tunable_matmul(256, 256, 128))
    # Source text with an error: located in `<string>`, before any GPU work.
    with pytest.raises(tlc.CompileError, match="<string>:2:"):
        tlc.tune("@T.prim_func\ndef f(A: T.Tensor((4,), \"float32\"):\n    pass\n")
    # A kernel without a space says so.
    with pytest.raises(tlc.CompileError, match="declares no tuning space"):
        tlc.tune(scale(64, 1, 2.0))


def _keep(fn):
    # A decorator of the user's own, as eager functions in scripts often carry.
    return fn


@_keep
def decorated_eager_add(A, B, block, dtype=T.float32):
    M, N = T.const("M, N")
    A: T.Tensor((M, N), dtype)
    B: T.Tensor((M, N), dtype)
    C = T.empty((M, N), dtype)
    with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=128) as (bx, by):
        for i, j in T.Parallel(block, block):
            if by * block + i < M and bx * block + j < N:
                C[by * block + i, bx * block + j] = A[by * block + i, bx * block + j] + B[by * block + i, bx * block + j]


def test_an_eager_kernel_may_carry_decorators():
    f = T.eager(decorated_eager_add, block=32, N=40)
    def_line = inspect.getsourcelines(decorated_eager_add)[1] + 1  # after `@_keep`
    assert f.source.splitlines()[def_line - 1].startswith("def decorated_eager_add(")
    k = tlc.compile(f, target="sm_80")
    a, b = np.ones((33, 40), np.float32), np.full((33, 40), 0.5, np.float32)
    _, _, c = tlc.interpret(k, a, b, None)
    np.testing.assert_array_equal(c, a + b)


def test_an_unknown_decorator_is_a_located_error_not_a_placeholder():
    line = inspect.currentframe().f_lineno + 3
    with pytest.raises(T.LanguageError, match=rf"test_language.py:{line}: `T.jit` is not part of"):

        @T.jit
        def f(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                A[0] = 1.0

    # A name the compiler reads is a placeholder, but not a decorator.
    with pytest.raises(T.LanguageError, match="`T.Kernel` decorates `g`, but it is a construct"):

        @T.Kernel
        def g(x):
            return x

    # A placeholder never loops: iterating one is an error, and compile refuses one.
    with pytest.raises(T.LanguageError, match="Python cannot iterate it"):
        list(T.Tensor)
    with pytest.raises(TypeError, match="expected a path, source text or a tlc.language.PrimFunc"):
        tlc.compile(T.Tensor, target="sm_80")


CONFIGS = [
    {"block_M": 128, "block_N": 128, "num_stages": 3},
    {"block_M": 64, "block_N": 128, "num_stages": 2},
    {"block_M": 64, "block_N": 64, "num_stages": 2},
]


@tlc.autotune(configs=CONFIGS, top=2)
def autotuned_matmul(M, N, K, block_M=None, block_N=None, num_stages=None):
    bm = block_M  # held under another name: the text still says `block_M`

    @T.prim_func
    def main(
        A: T.Tensor((M, K), "float16"),
        B: T.Tensor((K, N), "float16"),
        C: T.Tensor((M, N), "float"),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_shared = T.alloc_shared((bm, 32), "float16")
            B_shared = T.alloc_shared((32, block_N), "float16")
            C_local = T.alloc_fragment((bm, block_N), "float")
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, 32), num_stages=num_stages):
                T.copy(A[by * bm, ko * 32], A_shared)
                T.copy(B[ko * 32, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * bm, bx * block_N])

    return main


def test_autotune_makes_the_configs_the_kernels_space():
    f = autotuned_matmul.prim_func(256, 256, 128)
    assert (
        "block_M, block_N, num_stages = T.tunable([(128, 128, 3), (64, 128, 2), (64, 64, 2)], "
        "default=(128, 128, 3))\n" in f.source
    )
    assert "T.ceildiv(256, block_M)" in f.source and "bm" not in f.source
    ranking = tlc.plan(f, target="sm_80", sms=108)
    configs = [r["config"] for r in ranking["ranked"]]
    assert len(configs) + len(ranking["dropped"]) == 3
    assert all(c in CONFIGS for c in configs)
    if not tlc.driver_available():
        # Nothing to time: a warning, and the plan's first config compiled.
        with pytest.warns(UserWarning, match="no GPU, nothing timed"):
            k = autotuned_matmul(256, 256, 128)
        assert k.tune_report is None
        a = np.ones((256, 128), np.float16)
        b = np.full((128, 256), 0.5, np.float16)
        _, _, c = tlc.interpret(k, a, b, None)
        np.testing.assert_array_equal(c, np.full((256, 256), 64.0, np.float32))


def test_autotune_refuses_what_it_cannot_tune():
    with pytest.raises(T.LanguageError, match="same keys"):
        tlc.autotune(configs=[{"a": 1}, {"b": 2}])
    with pytest.raises(T.LanguageError, match="integers"):
        tlc.autotune(configs=[{"a": True}])

    @tlc.autotune(configs=[{"block": 32}, {"block": 64}])
    def computes(n, block=None):
        half = block // 2  # Python arithmetic on a tunable: it has no value yet

        @T.prim_func
        def main(X: T.Tensor((n,), "float32")):
            with T.Kernel(1, threads=half) as bx:
                X[0] = 1.0

        return main

    with pytest.raises(T.LanguageError, match="is a tunable: it has a value only when"):
        computes.prim_func(64)
    with pytest.raises(TypeError, match="are tuned; do not pass them"):
        autotuned_matmul.prim_func(256, 256, 128, block_M=64)


SHARED = T.tunable([64, 128], default=128)


def test_a_tunable_never_becomes_a_silent_python_value():
    b = T.tunable([64, 128])
    with pytest.raises(T.LanguageError, match="is a tunable"):
        b == 128  # noqa: B015 - a comparison in a factory would be a silent False
    with pytest.raises(T.LanguageError, match="is a tunable"):
        T.ceildiv(1024, b)
    with pytest.raises(T.LanguageError, match="twice"):
        T.tunable([64, 64])
    with pytest.raises(T.LanguageError, match="default True is not one of"):
        T.tunable([0, 1], default=True)
    with pytest.raises(T.LanguageError, match="only in a .tir file"):
        T.tune_constraint("block_M * block_N <= 16384")

    def aliased(n):
        block_M = SHARED
        block_N = SHARED

        @T.prim_func
        def main(X: T.Tensor((n,), "float32")):
            with T.Kernel(T.ceildiv(n, block_M), threads=block_N) as bx:
                X[bx] = 1.0

        return main

    with pytest.raises(T.LanguageError, match="used as both"):
        aliased(256)

    def in_a_tuple(n):
        shape = (SHARED, 4)

        @T.prim_func
        def main(X: T.Tensor(shape, "float32")):
            with T.Kernel(1, threads=32) as bx:
                X[0, 0] = 1.0

        return main

    with pytest.raises(T.LanguageError, match="inside a tuple or list"):
        in_a_tuple(256)


def softmax_rows(M, N, scale):
    # TileLang's habit: the kernel's steps as @T.macro functions of the factory, closing
    # over its values (`N`, `scale`), one calling another, one called twice.
    @T.macro
    def row_max(src, dst):
        T.reduce_max(src, dst, dim=1, clear=True)

    @T.macro
    def exp_rows(buf, m):
        row_max(buf, m)
        for i, j in T.Parallel(16, N):
            buf[i, j] = T.exp((buf[i, j] - m[i]) * scale)

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, 16), threads=128) as bx:
            x = T.alloc_fragment((16, N), "float32")
            m = T.alloc_fragment((16,), "float32")
            s = T.alloc_fragment((16,), "float32")
            T.copy(X[bx * 16, 0], x)
            exp_rows(x, m)
            T.reduce_sum(x, s, dim=1)
            for i, j in T.Parallel(16, N):
                x[i, j] = x[i, j] / s[i]
            exp_rows(x, m)
            T.copy(x, Y[bx * 16, 0])

    return main


def test_macros_of_the_factory_expand_in_the_kernel():
    f = softmax_rows(T.symbolic("M"), 64, 0.5)
    text = str(f)
    assert "@T.macro\ndef row_max(src, dst):" in text
    assert "T.exp((buf[i, j] - m[i]) * 0.5)" in text
    assert text.count("@T.macro") == 2
    x = np.random.default_rng(5).uniform(-1, 1, (37, 64)).astype(np.float32)
    _, y = tlc.interpret(f, x, np.zeros_like(x))
    e = np.exp((x - x.max(axis=1, keepdims=True)) * 0.5)
    p = e / e.sum(axis=1, keepdims=True)
    want = np.exp((p - p.max(axis=1, keepdims=True)) * 0.5)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)
    tlc.compile(f, target="sm_80")
    with pytest.raises(T.LanguageError, match="expands inside a kernel"):
        T.macro(lambda a: None)(1)


def make_scaler(factor):
    @T.macro
    def step(A):
        for i in T.serial(4):
            A[i] = A[i] * factor

    return step


def test_two_macros_of_one_name_stay_two():
    # A macro factory called twice: two macros named `step`, each with its own value.
    s2, s3 = make_scaler(2.0), make_scaler(3.0)

    @T.prim_func
    def main(A: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            s2(A)
            s3(A)

    text = str(main)
    assert "def step(A):" in text and "def step_1(A):" in text
    a = np.arange(1, 5, dtype=np.float32)
    (out,) = tlc.interpret(main, a.copy())
    np.testing.assert_array_equal(out, a * 6)


def test_t_dynamic_makes_symbolic_dims():
    M, N = T.dynamic("M, N")
    total = T.dynamic("total", "int64")
    assert (M, N) == (T.symbolic("M"), T.symbolic("N"))
    assert total == T.symbolic("total", "int64")
    f = scale(M, 3, 2.0)
    assert 'M = T.symbolic("M")' in str(f)
    with pytest.raises(T.LanguageError, match="not a name"):
        T.dynamic("M N")
