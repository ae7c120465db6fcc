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
