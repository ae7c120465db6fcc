"""`tlc.interpret`: the reference interpreter on NumPy arrays, checked against NumPy."""

import numpy as np
import pytest

import tlc


def test_elementwise_add_matches_numpy(repo):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(3000, dtype=np.float32)
    b = rng.standard_normal(3000, dtype=np.float32)
    c = np.zeros(3000, np.float32)
    a_out, b_out, c_out = tlc.interpret(repo / "examples/elementwise_add.tir", a, b, c)
    np.testing.assert_array_equal(c_out, a + b)
    np.testing.assert_array_equal(a_out, a)
    # Outputs are written into the arrays given, as a launch writes them.
    np.testing.assert_array_equal(c, a + b)


def test_a_compiled_kernel_interprets_with_its_bound_dims(repo):
    k = tlc.compile(repo / "examples/scale_cast.tir", target="sm_80", M=100)
    x = np.linspace(-4, 4, 100 * 70, dtype=np.float32).reshape(100, 70)
    _, y = k.interpret(x, None)
    assert y.dtype == np.float16 and y.shape == (100, 70)
    np.testing.assert_array_equal(y, (x * 0.5).astype(np.float16))


def test_float16_gemm_matches_numpy(repo):
    src = """
@T.prim_func
def gemm(A: T.Tensor((64, 32), "float16"), B: T.Tensor((32, 64), "float16"),
         C: T.Tensor((64, 64), "float32")):
    with T.Kernel(1, 1, threads=128) as (bx, by):
        A_s = T.alloc_shared((64, 32), "float16")
        B_s = T.alloc_shared((32, 64), "float16")
        C_l = T.alloc_fragment((64, 64), "float")
        T.clear(C_l)
        T.copy(A[0, 0], A_s)
        T.copy(B[0, 0], B_s)
        T.gemm(A_s, B_s, C_l)
        T.copy(C_l, C[0, 0])
"""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((64, 32)).astype(np.float16)
    b = rng.standard_normal((32, 64)).astype(np.float16)
    _, _, c = tlc.interpret(src, a, b)
    want = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-4)


def test_bfloat16_is_uint16_bits():
    src = """
@T.prim_func
def widen(X: T.Tensor((8,), "bfloat16"), Y: T.Tensor((8,), "float32")):
    with T.Kernel(1, threads=8) as bx:
        for i in T.Parallel(8):
            Y[i] = T.cast(X[i], "float32") * 2.0
"""
    values = np.array([1.0, -2.5, 0.15625, 3.0, 0.0, -0.0, 100.0, 1e-3], np.float32)
    # bfloat16 bits: the top half of the float32 bits (these values round exactly or
    # truncate; the kernel sees the truncated value either way).
    bits = (values.view(np.uint32) >> 16).astype(np.uint16)
    x, y = tlc.interpret(src, bits)
    assert x.dtype == np.uint16
    widened = (bits.astype(np.uint32) << 16).view(np.float32)
    np.testing.assert_array_equal(y, widened * 2)


def test_int32_kernel_and_dims_from_keywords():
    src = """
N = T.symbolic("N")

@T.prim_func
def iota(Y: T.Tensor((N,), "int32")):
    with T.Kernel(T.ceildiv(N, 32), threads=32) as bx:
        for i in T.Parallel(32):
            if bx * 32 + i < N:
                Y[bx * 32 + i] = (bx * 32 + i) * 3
"""
    (y,) = tlc.interpret(src, N=50)
    np.testing.assert_array_equal(y, np.arange(50, dtype=np.int32) * 3)


def test_a_wrong_dtype_names_the_parameter(repo):
    a = np.zeros(16, np.float64)
    with pytest.raises(tlc.CompileError) as e:
        tlc.interpret(repo / "examples/elementwise_add.tir", a)
    assert "parameter `A`" in str(e.value) and "float32" in str(e.value)


def test_a_fault_in_the_run_is_located(repo):
    path = repo / "tests/cases/runtime_errors/load_out_of_bounds.tir"
    a = np.zeros((64, 64), np.float32)
    with pytest.raises(tlc.CompileError) as e:
        tlc.interpret(path, a)
    first = str(e.value).splitlines()[0]
    assert first.startswith(f"{path}:12:") and ": error: " in first, first


def test_too_many_arrays_is_a_type_error(repo):
    z = np.zeros(4, np.float32)
    with pytest.raises(TypeError, match="takes 3 arrays"):
        tlc.interpret(repo / "examples/elementwise_add.tir", z, z, z, z)


def _e4m3(bits):
    """OCP E4M3FN bits → float32 (bias 7, no infinities, S.1111.111 is NaN)."""
    bits = bits.astype(np.int32)
    sign = np.where(bits & 0x80, -1.0, 1.0)
    exp, man = (bits >> 3) & 0xF, bits & 0x7
    normal = (1 + man / 8.0) * np.exp2(exp - 7.0)
    sub = (man / 8.0) * np.exp2(-6.0)
    value = sign * np.where(exp == 0, sub, normal)
    return np.where((exp == 15) & (man == 7), np.nan, value).astype(np.float32)


def _e5m2(bits):
    """OCP E5M2 bits are the top byte of float16 bits."""
    return (bits.astype(np.uint16) << 8).view(np.float16).astype(np.float32)


def test_fp8_comes_back_as_raw_bytes(repo):
    path = repo / "tests/cases/valid/fp8_cast.tir"
    x = np.linspace(-1.0, 1.0, 300, dtype=np.float32)
    h = np.linspace(-500, 500, 300).astype(np.float16)
    _, _, y, z, w, _, q = tlc.interpret(path, x, h)
    assert y.dtype == np.uint8 and z.dtype == np.uint8 and q.dtype == np.uint8
    # W reads Y and Z back in float32 and adds them: the bytes decode to what the kernel saw.
    np.testing.assert_array_equal(w, _e4m3(y) + _e5m2(z))
    # Y = X * 600 in e4m3: saturated at 448, else within half a step (2^-4 relative).
    want = np.clip(x * 600, -448, 448)
    np.testing.assert_allclose(_e4m3(y), want, rtol=2**-4, atol=2**-9)


def test_scalar_parameters_interpret_by_name(repo):
    x = np.random.default_rng(3).uniform(-1, 1, (37, 64)).astype(np.float32)
    y0 = np.full((37, 64), 5.0, np.float32)
    _, y = tlc.interpret(repo / "tests/cases/valid/scalar_params.tir", x, y0, limit=20, scale=3)
    want = np.where(np.arange(37)[:, None] < 20, x * np.float32(3), np.float32(0))
    np.testing.assert_array_equal(y, want)


def test_a_kernel_interprets_with_its_scalars_in_place(repo):
    k = tlc.compile(repo / "tests/cases/valid/scalar_params.tir", target="sm_80")
    x = np.random.default_rng(4).uniform(-1, 1, (37, 64)).astype(np.float32)
    _, y = k.interpret(x, 20, np.zeros_like(x), 3)
    want = np.where(np.arange(37)[:, None] < 20, x * np.float32(3), np.float32(0))
    np.testing.assert_array_equal(y, want)
