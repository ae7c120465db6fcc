"""`tlc.language`'s names: an unknown `T.x` is a located error wherever Python evaluates it
(never a placeholder that runs on), names the compiler reads or declines stay for it to
judge; Python builtins on the factory's values are evaluated as TileLang's Python does;
a name the kernel binds never collides with a symbolic dim's."""

import inspect

import numpy as np
import pytest

import tlc
import tlc.language as T


def test_an_unknown_name_is_an_error_at_its_line_in_an_annotation():
    line = inspect.currentframe().f_lineno + 4
    with pytest.raises(T.UnknownName, match=rf"test_language_names.py:{line}: `T.Tensr` is not part"):

        def f(
            A: T.Tensr((4,), "float32"),
        ):
            pass


def test_an_unknown_name_is_an_error_in_factory_code():
    def factory():
        dtype = T.float17  # a typo TileLang would report too
        return dtype

    line = inspect.getsourcelines(factory)[1] + 1
    with pytest.raises(T.UnknownName, match=rf"test_language_names.py:{line}: `T.float17`"):
        factory()
    # Names that are not attributes stay AttributeErrors (hasattr, copy, pickle probe them).
    assert not hasattr(T, "_private")


def test_names_the_compiler_reads_or_declines_are_its_to_judge():
    # `T.import_source` is declined by the compiler with its own explanation, at the
    # kernel's line.
    @T.prim_func
    def main(A: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            T.import_source("kernel.cu")

    with pytest.raises(tlc.CompileError, match=r"`T.import_source` \(external CUDA source\) is not supported by tlc"):
        tlc.compile(main, target="sm_80")
    assert repr(T.Pipelined) and repr(T.exp2) and repr(T.atomic_add) and repr(T.sync_grid)


def test_an_eager_statement_with_an_unknown_name_is_left_for_the_compiler():
    def eager_fn(A):
        (N,) = T.const("N")
        A: T.Tensor((N,), "float32")
        x = T.not_a_thing(3)  # Python cannot evaluate it: the compiler reports it, located
        with T.Kernel(1, threads=32) as bx:
            A[0] = x

    f = T.eager(eager_fn)
    line = inspect.getsourcelines(eager_fn)[1] + 3
    with pytest.raises(tlc.CompileError, match=rf"test_language_names.py:{line}:\d+: error: unknown TileLang construct `T.not_a_thing`"):
        tlc.compile(f, target="sm_80")


def clipped_copy(N, block):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, min(block, N)), threads=max(32, block // 4)) as bx:
            for i in T.Parallel(min(block, N)):
                if bx * min(block, N) + i < N:
                    B[bx * min(block, N) + i] = A[bx * min(block, N) + i] + abs(-2)

    return main


def test_python_builtins_on_the_factorys_values_are_evaluated():
    f = clipped_copy(48, 64)
    assert "min(" not in f.source and "abs(" not in f.source
    assert "T.ceildiv(48, 48)" in f.source and "threads=32" in f.source
    a = np.arange(48, dtype=np.float32)
    _, b = tlc.interpret(tlc.compile(f, target="sm_80"), a, None)
    np.testing.assert_array_equal(b, a + 2)


def test_min_of_a_symbolic_dim_is_the_compilers_min():
    f = clipped_copy(T.symbolic("N"), 64)
    assert "T.min(64, N)" in f.source
    k = tlc.compile(f, target="sm_80")
    a = np.arange(40, dtype=np.float32)
    _, b = tlc.interpret(k, a, None)
    np.testing.assert_array_equal(b, a + 2)


def chunked_double(M, K, block_K):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float32"), B: T.Tensor((M, K), "float32")):
        with T.Kernel(M, threads=32) as bx:
            for k in T.serial(T.ceildiv(K, block_K)):
                for j in T.Parallel(block_K):
                    if k * block_K + j < K:
                        B[bx, k * block_K + j] = A[bx, k * block_K + j] * 2.0

    return main


def test_a_loop_variable_named_like_a_symbolic_dim_is_renamed():
    # TileLang's dynamic-shape GEMM: `K = T.dynamic("k")` beside `for k in T.Pipelined(...)`.
    f = chunked_double(8, T.symbolic("k"), 16)
    assert 'k = T.symbolic("k")' in f.source
    assert "for k_1 in T.serial(T.ceildiv(k, 16)):" in f.source
    assert "if k_1 * 16 + j < k:" in f.source
    kernel = tlc.compile(f, target="sm_80")
    a = np.random.default_rng(3).uniform(-1, 1, (8, 40)).astype(np.float32)
    _, b = tlc.interpret(kernel, a, None)
    np.testing.assert_array_equal(b, a * 2)


def test_a_parameter_named_like_a_symbolic_dim_is_refused():
    def f(n):
        @T.prim_func
        def main(n_: T.Tensor((n,), "float32"), k: T.Tensor((n,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                k[0] = n_[0]

        return main

    with pytest.raises(T.LanguageError, match="parameter `k` has the name of a symbolic dim"):
        f(T.symbolic("k"))
