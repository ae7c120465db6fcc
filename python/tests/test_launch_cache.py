"""`Kernel.__call__` on the CPU: the per-signature launch cache, the dims a call takes, and
which device and stream a launch goes to. `tlc._tlc.Loaded` (the GPU) is replaced by a
recorder, and torch, where a test needs it, by a small stand-in module."""

import sys
import types

import numpy as np
import pytest

import tlc
from tlc import _tensors, _tlc


class _Recorder:
    """Stands in for `tlc._tlc.Loaded`: records each launch instead of making it."""

    runs = []
    #: The PTX each launch ran, in launch order.
    ptxs = []

    def __init__(self, ptx, device):
        self.device = device
        self.ptx = ptx

    def run(self, prepared, ptrs, stream):
        _Recorder.runs.append((self.device, list(ptrs), stream, dict(prepared.dims)))
        _Recorder.ptxs.append(self.ptx)


@pytest.fixture
def launches(monkeypatch):
    """The launches made during the test, as (device, ptrs, stream, dims)."""
    _Recorder.runs = []
    _Recorder.ptxs = []
    monkeypatch.setattr(_tlc, "Loaded", _Recorder)
    return _Recorder.runs


@pytest.fixture
def prepares(monkeypatch):
    """How many signatures were checked (`tlc._tlc.prepare` calls) during the test."""
    calls = []
    real = _tlc.prepare

    def counting(*args):
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(_tlc, "prepare", counting)
    return calls


class _Cuda:
    """An object with a `__cuda_array_interface__` on CuPy's `device.id` (never read)."""

    def __init__(self, shape, ptr=0x7F0000001000, strides=None, device=0, typestr="<f4"):
        self.__cuda_array_interface__ = {
            "data": (ptr, False),
            "shape": shape,
            "typestr": typestr,
            "strides": strides,
            "version": 3,
        }
        self.device = types.SimpleNamespace(id=device)


def test_a_signature_is_checked_once_and_only_for_its_own_tensors(repo, launches, prepares):
    k = tlc.compile(repo / "examples/elementwise_add.tir", target="sm_80")
    a, b, c = (_Cuda((1000,), ptr=0x7F0000001000 + i * 0x1000) for i in range(3))
    k(a, b, c)
    checked = len(prepares)
    k(b, a, c)
    # N = 1000 is a multiple of 8: checked against the kernel, then against its variant
    # for that alignment (`Kernel._aligned`); the second call checks nothing.
    assert checked == 2 and len(prepares) == 2
    assert [r[1] for r in launches] == [
        [0x7F0000001000, 0x7F0000002000, 0x7F0000003000],
        [0x7F0000002000, 0x7F0000001000, 0x7F0000003000],
    ]
    assert launches[0][3] == {"N": 1000}
    # Same shape, other strides (a strided view): a new signature, refused naming C.
    with pytest.raises(tlc.LaunchError, match=r"parameter `C` needs a C-contiguous tensor"):
        k(a, b, _Cuda((1000,), strides=(8,)))
    # Same shape, another GPU: refused naming C, nothing launched.
    with pytest.raises(ValueError, match=r"parameter `C`: expected a tensor on cuda:0 \(as `A`\), found one on cuda:1"):
        k(a, b, _Cuda((1000,), device=1))
    # Another shape: checked again, not the cached N.
    with pytest.raises(tlc.LaunchError, match=r"parameter `C` dim 0 is 999 but N = 1000 from `A`"):
        k(a, b, _Cuda((999,)))
    assert len(launches) == 2
    # (A cached signature's addresses are checked in `Loaded.run`, which needs a GPU.)


def test_dims_given_to_a_call_must_be_ints(repo, launches, prepares):
    k = tlc.compile(repo / "examples/elementwise_add.tir", target="sm_80")
    a = _Cuda((1000,))
    for bad in (True, 1000.0, "1000"):
        with pytest.raises(TypeError, match=rf"dim `N`: expected an int, found {bad!r}"):
            k(a, a, a, N=bad)
    k(a, a, a, N=1000)
    k(a, a, a, N=np.int64(1000))
    assert len(launches) == 2 and len(prepares) == 2  # the kernel, then its aligned variant
    with pytest.raises(tlc.LaunchError, match=r"parameter `A` dim 0 is 1000 but N = 1 was given"):
        k(a, a, a, N=1)


def _manifest_dims(ptx):
    import json

    return {d["name"]: d.get("multiple_of", 1) for d in json.loads(ptx.split("\n")[0].split(": ", 1)[1])["dims"]}


def test_a_call_whose_rows_are_aligned_launches_the_variant_compiled_for_it(repo, launches, prepares):
    # examples/gemm.tir's M, N, K are symbolic: compiled once, nothing proves the rows of A
    # (K) and B, C (N) 16-byte aligned, so its copies are element-wise. A call whose K and N
    # are multiples of 8 runs a variant declaring that (checked at launch): TMA on sm_90a.
    k = tlc.compile(repo / "examples/gemm.tir", target="sm_90a")
    assert "cp.async.bulk.tensor" not in k.ptx

    def call(m, n, kk):
        f2 = "<f2"
        k(_Cuda((m, kk), typestr=f2), _Cuda((kk, n), typestr=f2), _Cuda((m, n), typestr=f2))
        return launches[-1][3], _Recorder.ptxs[-1]

    dims, ptx = call(100, 4096, 1000)
    assert dims == {"M": 100, "N": 4096, "K": 1000}
    assert _manifest_dims(ptx) == {"M": 1, "N": 16, "K": 8}
    assert "cp.async.bulk.tensor" in ptx
    # Odd K: the kernel as compiled (a variant for N alone proves no A row aligned).
    dims, ptx = call(100, 4096, 999)
    assert _manifest_dims(ptx) == {"M": 1, "N": 16, "K": 1}
    assert "cp.async.bulk.tensor" not in ptx
    dims, ptx = call(7, 7, 7)
    assert ptx == k.ptx
    # One variant per alignment, compiled once; signatures keep theirs.
    before = len(k._variants)
    call(300, 8192, 3000)  # N 16, K 8 again
    assert len(k._variants) == before


class _FakeTorchTensor:
    """Enough of a `torch.Tensor` for tlc to read; it also has the
    `__cuda_array_interface__` real CUDA tensors have (without `device.id`)."""

    def __init__(self, torch, shape, device, ptr=0x7F0000001000):
        self._shape, self._ptr = tuple(shape), ptr
        self.device = torch.device("cuda", device)
        self.dtype = torch.float32
        self.is_cuda = True
        self.__cuda_array_interface__ = {
            "data": (ptr, False),
            "shape": self._shape,
            "typestr": "<f4",
            "strides": None,
            "version": 2,
        }

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


@pytest.fixture
def fake_torch(monkeypatch):
    """A stand-in `torch` in `sys.modules`: tensors, devices, float32, the current device
    (1) and its current stream (0x5000 + device), `torch.zeros` / `torch.empty`."""
    torch = types.ModuleType("torch")
    torch.__version__ = "0.0-fake"

    class _Dtype:
        def __str__(self):
            return "torch.float32"

    class _Device(types.SimpleNamespace):
        pass

    torch.float32 = _Dtype()
    torch.device = lambda kind, index: _Device(type=kind, index=index)
    torch.made = []

    def make(zeroed):
        def alloc(shape, dtype, device):
            t = Tensor(torch, shape, device.index, ptr=0x7F0000100000 * (len(torch.made) + 1))
            torch.made.append((tuple(shape), zeroed, device.index))
            return t

        return alloc

    torch.zeros, torch.empty = make(True), make(False)
    torch.cuda = types.SimpleNamespace(current_device=lambda: 1)
    torch._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda device: 0x5000 + device)

    class Tensor(_FakeTorchTensor):
        pass

    torch.Tensor = Tensor
    monkeypatch.setitem(sys.modules, "torch", torch)
    return torch


def test_a_torch_subclass_is_read_as_torch_on_its_own_gpu(repo, launches, fake_torch):
    class Parameter(fake_torch.Tensor):  # a subclass from outside torch's modules
        pass

    a = Parameter(fake_torch, (1000,), device=1)
    assert _tensors.describe(a, "A").device == 1
    k = tlc.compile(repo / "examples/elementwise_add.tir", target="sm_80")
    k(a, a, a)
    device, _, stream, _ = launches[0]
    assert (device, stream) == (1, 0x5001)


def test_a_call_given_no_tensor_allocates_on_torchs_current_device(repo, launches, fake_torch):
    k = tlc.compile(repo / "examples/elementwise_add.tir", target="sm_80", out_idx=[0, 1, 2])
    a, b, c = k(N=1000)
    # A and B are read by the kernel: zeroed; C is only written.
    assert fake_torch.made == [((1000,), True, 1), ((1000,), True, 1), ((1000,), False, 1)]
    assert all(t.device.index == 1 for t in (a, b, c))
    device, ptrs, stream, dims = launches[0]
    assert (device, stream, dims) == (1, 0x5001, {"N": 1000})
    assert ptrs == [a.data_ptr(), b.data_ptr(), c.data_ptr()]


def test_the_exit_hook_is_registered_at_the_first_load(repo, launches, monkeypatch):
    # At the first module load the package registers its exit hook (`tlc._launch`), which
    # tells the extension the process is exiting (objects destroyed after it leave their
    # modules and buffers to the driver: an unload during teardown crashed the process with
    # torch's profiler active). Registered once, whatever the number of loads.
    from tlc import _launch

    registered = []
    monkeypatch.setattr(_launch, "_EXIT_HOOK", False)
    monkeypatch.setattr(_launch.atexit, "register", registered.append)
    k = tlc.compile(repo / "examples/elementwise_add.tir", target="sm_80")
    a, b, c = (_Cuda((1000,), ptr=0x7F0000001000 + i * 0x1000) for i in range(3))
    assert registered == []
    k(a, b, c)
    k(a, b, _Cuda((1000,), ptr=0x7F0000009000))
    k2 = tlc.compile(repo / "examples/elementwise_add.tir", target="sm_90a")
    k2(a, b, c)
    assert registered == [_launch._at_exit]
    assert callable(_tlc.process_exiting)
