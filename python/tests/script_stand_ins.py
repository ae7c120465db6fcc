"""Stand-ins for the modules TileLang's example scripts import that the CPU tests lack
(torch, einops, triton, and the example folders' own helpers that need them), so that a
script's top level runs: imports, module-level tensors (`A = torch.rand(m, k, ...) * 2 - 1`,
then `M, K = A.shape`), `torch.autograd.Function` subclasses, dtype names. Tensors are
NumPy arrays of the right shape; nothing here computes what torch would (the tests compare
the kernels against their own NumPy references, never against these).

`standing_in()` puts them in `sys.modules` only for the duration of a `with` block and
removes them again, so no other test sees them."""

import contextlib
import importlib.util
import sys
import types

import numpy as np


class Absent:
    """Whatever a script's top level touches that no test reads: calls, attributes,
    arithmetic, and a base class (`class F(torch.autograd.Function)`)."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return Absent()

    def __call__(self, *args, **kwargs):
        return Absent()

    def __mro_entries__(self, bases):
        return (object,)

    def _op(self, *_):
        return Absent()

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = _op
    __gt__ = __lt__ = __ge__ = __le__ = __getitem__ = _op

    def __iter__(self):
        # Not iterable (`__getitem__` alone would make Python iterate it forever).
        raise TypeError("a stand-in is not iterable")


class Dtype:
    """torch's dtype objects: a name (`str(torch.float16) == "torch.float16"`)."""

    __module__ = "torch"

    def __init__(self, name, numpy_dtype):
        self.name, self.numpy = name, numpy_dtype

    def __repr__(self):
        return f"torch.{self.name}"

    __str__ = __repr__


DTYPES = {
    "float16": np.float16, "half": np.float16, "bfloat16": np.float32, "float32": np.float32,
    "float": np.float32, "float64": np.float64, "int8": np.int8, "int16": np.int16,
    "int32": np.int32, "int64": np.int64, "uint8": np.uint8, "bool": np.bool_,
    "float8_e4m3fn": np.uint8, "float8_e5m2": np.uint8,
}


class FakeTensor:
    """A tensor of a script's top level: its shape and dtype (values are NumPy's, unused)."""

    def __init__(self, array, dtype=None):
        self.a = array
        self.dtype = dtype or Dtype("float32", np.float32)

    shape = property(lambda self: tuple(self.a.shape))

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[dim]

    def dim(self):
        return self.a.ndim

    def _same(self, *_, **__):
        return self

    cuda = half = float = contiguous = clone = detach = requires_grad_ = _same

    def to(self, *args, **kwargs):
        return self

    def _arith(self, other):
        return FakeTensor(self.a, self.dtype)

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = _arith

    def __gt__(self, other):
        return FakeTensor(self.a > 0, Dtype("bool", np.bool_))

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return Absent()


def _make(*shape, dtype=None, **_):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    np_dtype = dtype.numpy if isinstance(dtype, Dtype) else np.float32
    return FakeTensor(np.zeros(shape, np_dtype), dtype)


class FakeModule(types.ModuleType):
    """A module whose every other attribute is `Absent`."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return Absent()


def fake_torch():
    torch = FakeModule("torch")
    for name, np_dtype in DTYPES.items():
        setattr(torch, name, Dtype(name, np_dtype))
    for maker in ("rand", "randn", "zeros", "ones", "empty", "randint"):
        setattr(torch, maker, _make)
    torch.Tensor = FakeTensor
    torch.dtype = Dtype
    torch.autograd = FakeModule("torch.autograd")
    # `class F(torch.autograd.Function)` and the module-level `f = F.apply`.
    torch.autograd.Function = type("Function", (), {"apply": staticmethod(Absent())})
    torch.version = types.SimpleNamespace(hip=None, cuda="12.8")
    return torch


def _modules():
    torch = fake_torch()
    mods = {"torch": torch}
    for sub in ("nn", "nn.functional", "backends", "testing", "cuda", "random", "profiler"):
        m = FakeModule(f"torch.{sub}")
        mods[f"torch.{sub}"] = m
    torch.nn, torch.backends = mods["torch.nn"], mods["torch.backends"]
    for name in ("einops", "triton", "triton.language"):
        mods[name] = FakeModule(name)
    return mods


@contextlib.contextmanager
def standing_in():
    """The stand-ins in `sys.modules` for the modules not installed, then removed."""
    added = {
        name: mod
        for name, mod in _modules().items()
        if importlib.util.find_spec(name.split(".")[0]) is None
    }
    sys.modules.update(added)
    try:
        yield
    finally:
        for name, mod in added.items():
            if sys.modules.get(name) is mod:
                del sys.modules[name]


def is_stand_in(module):
    return isinstance(module, FakeModule)
