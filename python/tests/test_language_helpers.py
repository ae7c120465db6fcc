"""Plain Python helpers a kernel written in Python calls (TileLang runs them while it
traces, on the expressions they are given): a one-expression helper is written in place
of its call, any other helper of a value macro's shape becomes a macro; docstrings are
dropped; and an eager kernel's parameter is its tensor even when the module has a global
of its name. Compiled and interpreted on the CPU."""

import numpy as np
import pytest

import tlc
import tlc.language as T

OFFSET = 3.0  # a helper's own module-level literal


def shifted(x, by=2):
    return x + by + OFFSET


def clamp_to(lo, value, hi):
    """A helper with lets: a value macro."""
    low = T.max(value, lo)
    return T.min(low, hi)


def dq_layout(buf):
    # The one-expression form of flash attention's `make_dq_layout`.
    return T.Layout(buf.shape, lambda i, j: [j, i])


def python_only(*values):
    return sum(values)




def test_a_one_expression_helper_is_written_in_place():
    @T.prim_func
    def main(A: T.Tensor((32,), "float32"), B: T.Tensor((32,), "float32")):
        """Docstring."""
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(32):
                B[i] = shifted(A[i] * 2.0) + shifted(A[i], by=10)

    assert "shifted" not in main.source and "(A[i] * 2.0) + 2 + 3.0" in main.source
    a = np.arange(32, dtype=np.float32)
    _, b = tlc.interpret(main, a, None)
    np.testing.assert_array_equal(b, (a * 2 + 5) + (a + 13))


def test_a_helper_with_lets_is_a_macro():
    @T.prim_func
    def main(A: T.Tensor((32,), "float32"), B: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(32):
                B[i] = clamp_to(-1.0, A[i], 1.5)

    assert "@T.macro\ndef clamp_to(" in main.source
    a = np.linspace(-3, 3, 32).astype(np.float32)
    _, b = tlc.interpret(main, a, None)
    np.testing.assert_array_equal(b, np.clip(a, -1.0, 1.5))


def test_a_layout_helper_annotates_like_the_inline_layout():
    @T.prim_func
    def main(A: T.Tensor((4, 8), "float32"), B: T.Tensor((4, 8), "float32")):
        with T.Kernel(1, threads=32) as bx:
            T.annotate_layout({A: dq_layout(A)})
            for i, j in T.Parallel(4, 8):
                B[i, j] = A[i, j]

    assert "T.Layout(A.shape, lambda i, j: [j, i])" in main.source
    tlc.compile(main)


def test_a_helper_the_compiler_cannot_read_stays_a_located_call():
    @T.prim_func
    def main(A: T.Tensor((32,), "float32"), B: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(32):
                B[i] = python_only(A[i], 1.0)

    with pytest.raises(tlc.CompileError, match=r"test_language_helpers.py:\d+:\d+: error: unsupported call `python_only`"):
        tlc.compile(main)


X = object()  # a module global named like the eager kernel's tensor parameter


def test_an_eager_parameter_shadows_a_global_of_its_name():
    def double(X, block):
        N = T.const("N")
        X: T.Tensor((N,), "float32")
        Y = T.empty((N,), "float32")
        with T.Kernel(T.ceildiv(N, block), threads=32) as bx:
            for i in T.Parallel(block):
                if bx * block + i < N:
                    Y[bx * block + i] = X[bx * block + i] * 2.0
        return Y

    f = T.eager(double, block=32)
    assert f.source.count("X: T.Tensor((N,)") == 1
    k = tlc.compile(f, N=40)
    x = np.arange(40, dtype=np.float32)
    np.testing.assert_array_equal(tlc.interpret(k, x, None)[1], x * 2)
