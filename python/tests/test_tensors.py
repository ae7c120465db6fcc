"""Reading launch arguments, on the CPU: the DLPack reader on NumPy's own capsules, and the
errors that name the parameter before any CUDA call."""

import numpy as np
import pytest

import tlc
from tlc import _tensors


def test_dlpack_capsules_are_read_without_copying():
    a = np.arange(12, dtype=np.float16).reshape(3, 4)
    arg = _tensors.dlpack_arg(a.__dlpack__(), "A")
    assert arg.ptr == a.ctypes.data
    assert arg.dtype == "float16" and arg.shape == (3, 4)
    assert arg.strides in (None, (4, 1))
    t = a.T
    arg = _tensors.dlpack_arg(t.__dlpack__(), "A")
    assert arg.shape == (4, 3) and arg.strides == (1, 4)


def test_host_arrays_are_refused_naming_the_parameter(repo):
    k = tlc.compile(repo / "examples/elementwise_add.tir", target="sm_80")
    a = np.zeros(8, np.float32)
    with pytest.raises(ValueError, match=r"parameter `A`: expected a CUDA tensor, found one on the CPU"):
        k(a, a, a)
    with pytest.raises(ValueError, match=r"parameter `A`: expected a CUDA tensor .* found list"):
        k([1.0], a, a)
    with pytest.raises(TypeError, match=r"takes 3 tensors \(A, B, C\) but 2 were given"):
        k(a, a)


class _FakeCuda:
    """An object with a `__cuda_array_interface__` (its address is never dereferenced)."""

    def __init__(self, typestr, shape, strides=None):
        self.__cuda_array_interface__ = {
            "data": (0x7F0000001000, False),
            "shape": shape,
            "typestr": typestr,
            "strides": strides,
            "version": 3,
        }


def test_cuda_array_interface_is_read():
    arg = _tensors.describe(_FakeCuda("<f4", (2, 3), (12, 4)), "A")
    assert arg == _tensors.Arg(0x7F0000001000, "float32", (2, 3), (3, 1), 0)
    with pytest.raises(ValueError, match="parameter `B`: tlc has no dtype for typestr '<c8'"):
        _tensors.describe(_FakeCuda("<c8", (2,)), "B")


GEMM = """
M = T.symbolic("M")
N = T.symbolic("N")
K = T.symbolic("K")

@T.prim_func
def mm(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
    with T.Kernel(T.ceildiv(N, 64), T.ceildiv(M, 64), threads=128) as (bx, by):
        A_s = T.alloc_shared((64, 32), "float16")
        B_s = T.alloc_shared((32, 64), "float16")
        C_l = T.alloc_fragment((64, 64), "float32")
        T.clear(C_l)
        for ko in T.Pipelined(T.ceildiv(K, 32), num_stages=2):
            T.copy(A[by * 64, ko * 32], A_s)
            T.copy(B[ko * 32, bx * 64], B_s)
            T.gemm(A_s, B_s, C_l)
        T.copy(C_l, C[by * 64, bx * 64])
"""


def test_out_idx_is_normalized_and_checked():
    k = tlc.compile(GEMM, target="sm_80", out_idx=-1)
    assert k.out_idx == [2]
    assert tlc.compile(GEMM, target="sm_80", out_idx=[2, 0]).out_idx == [2, 0]
    assert tlc.compile(GEMM, target="sm_80").out_idx == []
    with pytest.raises(ValueError, match=r"out_idx: 3 is out of range for a kernel of 3 parameters \(A, B, C\)"):
        tlc.compile(GEMM, target="sm_80", out_idx=3)
    with pytest.raises(ValueError, match=r"out_idx: parameter `C` \(-1\) is named twice"):
        tlc.compile(GEMM, target="sm_80", out_idx=[2, -1])
    with pytest.raises(TypeError, match=r"out_idx: expected parameter indices"):
        tlc.compile(GEMM, target="sm_80", out_idx=["C"])


def test_a_call_without_the_outputs_says_what_it_takes():
    k = tlc.compile(GEMM, target="sm_80", out_idx=-1)
    a = _FakeCuda("<f2", (300, 64))
    with pytest.raises(
        TypeError,
        match=r"kernel takes 2 tensors \(A, B; it allocates C\) or 3 tensors \(A, B, C\) but 1 were given",
    ):
        k(a)


def test_output_shapes_come_from_the_inputs_and_the_dims():
    k = tlc.compile(GEMM, target="sm_80", out_idx=-1)
    a, b = _FakeCuda("<f2", (300, 64)), _FakeCuda("<f2", (64, 200))
    sig = k._prepare((a, b), k._inputs, {})
    assert sig.outputs == ((2, (300, 200), "float32", False),)
    assert dict(sig.prepared.dims) == {"M": 300, "N": 200, "K": 64}
    # N is bound only by B and C: with B left out too (out_idx=[1, 2]) it must be given.
    k2 = tlc.compile(GEMM, target="sm_80", out_idx=[1, 2])
    with pytest.raises(tlc.LaunchError, match=r"dim `N` is set only by the shape of `B`, `C` to allocate"):
        k2._prepare((a,), k2._inputs, {})
    sig = k2._prepare((a,), k2._inputs, {"N": 8})
    assert [o[:2] for o in sig.outputs] == [(1, (64, 8)), (2, (300, 8))]
    with pytest.raises(tlc.LaunchError, match=r"parameter `B` dim 1 is 200 but N = 7 was given"):
        k._prepare((a, b), k._inputs, {"N": 7})
    with pytest.raises(tlc.LaunchError, match=r"parameter `A` expects dtype float16 but the argument is float32"):
        k._prepare((_FakeCuda("<f4", (300, 64)), b), k._inputs, {})


def test_dims_and_out_idx_must_be_integers():
    assert tlc.compile(GEMM, target="sm_80", out_idx=np.int64(-1)).out_idx == [2]
    with pytest.raises(TypeError, match=r"dim `M`: expected an int, found 1.5"):
        tlc.compile(GEMM, target="sm_80", M=1.5)
    k = tlc.compile(GEMM, target="sm_80", M=np.int32(64))
    assert k.manifest["params"][0]["shape"][0] == {"int": 64}
