"""A warm launch is CUDA-graph friendly (docs/python.md, "Launch path"): once a call's
signature has been seen, `Kernel.__call__` — and the `tlc.tilelang` kernel and eager
calls over it — makes no host synchronization and allocates only through torch's
allocator, on the stream it launches on (torch's current one: the capture stream inside
`torch.cuda.graph`). Checked on the CPU with a strict stand-in for torch that records every
use and refuses what it does not list, and a recorder in place of the GPU launch."""

import sys
import types
from collections import namedtuple

import pytest

import tlc
import tlc.tilelang as tilelang
import tlc.tilelang.language as T
from tlc import _tlc

USED = []  # what of the stand-in torch a call used, in order
Device = namedtuple("Device", "type index")  # hashable, as torch.device is


class StrictTensor:
    """A torch tensor as a launch may read it; any other attribute is a failure."""

    _allowed = {"dtype", "shape", "stride", "device", "data_ptr", "is_cuda", "_shape", "_ptr"}

    def __init__(self, shape, ptr, device):
        object.__setattr__(self, "_shape", tuple(shape))
        object.__setattr__(self, "_ptr", ptr)
        object.__setattr__(self, "device", Device("cuda", device))
        object.__setattr__(self, "dtype", FLOAT32)
        object.__setattr__(self, "is_cuda", True)

    @property
    def shape(self):
        return self._shape

    def stride(self):
        strides, acc = [], 1
        for d in reversed(self._shape):
            strides.append(acc)
            acc *= d
        return tuple(reversed(strides))

    def data_ptr(self):
        return self._ptr

    def __getattr__(self, name):
        USED.append(("tensor", name))
        raise AttributeError(f"a launch read `{name}` of a tensor")


class _Dtype:
    def __str__(self):
        return "torch.float32"


FLOAT32 = _Dtype()


def strict_torch(stream):
    """torch: its current stream `stream` (the capture stream, say), allocation through
    `empty` / `zeros`; every other name is missing, and every use is recorded."""
    torch = types.ModuleType("torch")
    torch.__version__ = "0.0-strict"
    torch.float32 = FLOAT32
    torch.Tensor = StrictTensor

    def device(kind, index):
        USED.append(("device", index))
        return Device(kind, index)

    def make(zeroed):
        def alloc(shape, dtype, device):
            USED.append(("zeros" if zeroed else "empty", tuple(shape)))
            return StrictTensor(shape, 0x7F0000900000, device.index)

        return alloc

    def raw_stream(index):
        USED.append(("stream", index))
        return stream

    torch.device = device
    torch.empty, torch.zeros = make(False), make(True)
    torch._C = types.SimpleNamespace(_cuda_getCurrentRawStream=raw_stream)

    def current_device():
        USED.append(("current_device",))
        return 0

    torch.cuda = types.SimpleNamespace(current_device=current_device)
    return torch


class Loads:
    """Stands in for `tlc._tlc.Loaded`: counts module loads, records launches."""

    loaded = 0
    runs = []

    def __init__(self, ptx, device):
        Loads.loaded += 1

    def run(self, prepared, ptrs, stream):
        Loads.runs.append((list(ptrs), stream))


@pytest.fixture
def capture(monkeypatch):
    """torch as the strict stand-in whose current stream is 0xCA97 (a capture stream)."""
    Loads.loaded, Loads.runs = 0, []
    USED.clear()
    monkeypatch.setitem(sys.modules, "torch", strict_torch(0xCA97))
    monkeypatch.setattr(_tlc, "Loaded", Loads)
    return USED


def test_a_warm_kernel_call_only_allocates_and_launches_on_the_current_stream(repo, capture):
    k = tlc.compile(repo / "examples/elementwise_add.tir", target="sm_80", out_idx=-1)
    a, b = StrictTensor((1000,), 0x7F0000001000, 0), StrictTensor((1000,), 0x7F0000002000, 0)
    k(a, b)  # the first call: checks, loads the module (not captured in real use)
    capture.clear()
    c = k(a, b)  # warm
    assert capture == [("empty", (1000,)), ("stream", 0)]
    assert Loads.loaded == 1 and Loads.runs[-1] == ([0x7F0000001000, 0x7F0000002000, c.data_ptr()], 0xCA97)


def test_tilelang_kernels_and_eager_calls_add_nothing_to_the_launch(repo, capture, monkeypatch):
    kernel = tilelang.compile(str(repo / "examples/elementwise_add.tir"), out_idx=[2], target="sm_80")
    a, b = StrictTensor((1000,), 0x7F0000001000, 0), StrictTensor((1000,), 0x7F0000002000, 0)
    kernel(a, b)
    capture.clear()
    kernel(a, b)
    assert capture == [("empty", (1000,)), ("stream", 0)]

    @tilelang.jit
    def scale(X, factor):
        N = T.const("N")
        X: T.Tensor((N,), "float32")
        Y = T.empty((N,), "float32")
        with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
            for i in T.Parallel(128):
                if bx * 128 + i < N:
                    Y[bx * 128 + i] = X[bx * 128 + i] * factor
        return Y

    x = StrictTensor((1000,), 0x7F0000003000, 0)
    scale(x, 2.0)  # compiles for N = 1000 and factor 2.0
    # A call like it finds its kernel without binding the arguments again.
    monkeypatch.setattr(type(scale), "_bind", lambda *a: pytest.fail("the call was bound again"))
    capture.clear()
    y = scale(x, 2.0)
    assert capture == [("empty", (1000,)), ("stream", 0)]
    assert Loads.runs[-1] == ([0x7F0000003000, y.data_ptr()], 0xCA97)
    # Another value is another kernel (the slow path again, which binds).
    with pytest.raises(pytest.fail.Exception, match="bound again"):
        scale(x, 3.0)
