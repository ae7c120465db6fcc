"""Reading device tensors another library owns: PyTorch tensors, objects with
``__cuda_array_interface__`` (CuPy, Numba) and DLPack producers. Each becomes an ``Arg``:
device address, tlc dtype name, shape, element strides and CUDA device. Nothing here
imports torch or touches CUDA, except ``allocate`` (outputs a call allocates)."""

from __future__ import annotations

import ctypes
import sys
from typing import Any, NamedTuple, Optional, Tuple

# torch.<name> → tlc dtype name (torch spells fp8 with the `fn` suffix of OCP E4M3FN).
_TORCH_DTYPES = {
    "float16": "float16",
    "bfloat16": "bfloat16",
    "float32": "float32",
    "float64": "float64",
    "float8_e4m3fn": "float8_e4m3",
    "float8_e5m2": "float8_e5m2",
    "int8": "int8",
    "int16": "int16",
    "int32": "int32",
    "int64": "int64",
    "uint8": "uint8",
    "uint16": "uint16",
    "uint32": "uint32",
    "bool": "bool",
}

# `__cuda_array_interface__` typestr → tlc dtype name.
_TYPESTRS = {
    "<f2": "float16",
    "<f4": "float32",
    "<f8": "float64",
    "|i1": "int8",
    "<i2": "int16",
    "<i4": "int32",
    "<i8": "int64",
    "|u1": "uint8",
    "<u2": "uint16",
    "<u4": "uint32",
    "|b1": "bool",
}

# DLPack (type code, bits) → tlc dtype name; codes: 0 int, 1 uint, 2 float, 4 bfloat,
# 6 bool, 10 float8_e4m3fn, 13 float8_e5m2 (dlpack.h, v1.1).
_DLPACK_DTYPES = {
    (0, 8): "int8",
    (0, 16): "int16",
    (0, 32): "int32",
    (0, 64): "int64",
    (1, 8): "uint8",
    (1, 16): "uint16",
    (1, 32): "uint32",
    (2, 16): "float16",
    (2, 32): "float32",
    (2, 64): "float64",
    (4, 16): "bfloat16",
    (6, 8): "bool",
    (10, 8): "float8_e4m3",
    (13, 8): "float8_e5m2",
}

_DLPACK_CUDA = 2
_DLPACK_DEVICE_NAMES = {1: "the CPU", 2: "CUDA", 3: "pinned host memory", 13: "CUDA managed memory"}


def allocate(
    shape: Tuple[int, ...],
    dtype: str,
    device: int,
    zeroed: bool,
    param: str,
    stream: Optional[int] = None,
) -> Any:
    """A new torch tensor for output ``param`` on ``cuda:device``: ``torch.empty``, or
    ``torch.zeros`` when the kernel also reads it (``zeroed``), on torch's current stream or,
    when the launch goes on an explicit ``stream`` (a raw handle), on that one: the zeroing
    is then ordered before the kernel and torch's allocator ties the memory to the stream
    that uses it. Allocating needs torch; ``TypeError`` naming the parameter without it."""
    torch = _import_torch(param)
    torch_dtype = _torch_dtype(torch, dtype)
    make = torch.zeros if zeroed else torch.empty
    where = torch.device("cuda", device)
    if stream is None:
        return make(shape, dtype=torch_dtype, device=where)
    with torch.cuda.stream(torch.cuda.ExternalStream(stream, device=where)):
        return make(shape, dtype=torch_dtype, device=where)


def current_device(param: str) -> int:
    """torch's current CUDA device: where a call that is given no tensor allocates output
    ``param``; ``TypeError`` naming it without torch."""
    return int(_import_torch(param).cuda.current_device())


def _import_torch(param: str) -> Any:
    """torch, imported if it is not yet; ``TypeError`` naming output ``param`` without it."""
    torch = sys.modules.get("torch")
    if torch is not None:
        return torch
    try:
        import torch  # type: ignore[import-not-found, no-redef, unused-ignore]
    except ImportError:
        raise TypeError(
            f"parameter `{param}`: allocating an output needs torch; pass the output "
            f"tensor instead"
        ) from None
    return torch


def _torch_dtype(torch: Any, dtype: str) -> Any:
    """The torch dtype of a tlc dtype name (the inverse of ``_TORCH_DTYPES``)."""
    for name, ours in _TORCH_DTYPES.items():
        if ours == dtype and hasattr(torch, name):
            return getattr(torch, name)
    raise TypeError(f"torch {torch.__version__} has no dtype for tlc's {dtype}")


class Arg(NamedTuple):
    """One tensor argument as a launch needs it."""

    ptr: int
    dtype: str
    shape: Tuple[int, ...]
    #: Element strides; ``None`` when the producer says the tensor is C-contiguous.
    strides: Optional[Tuple[int, ...]]
    device: int


def describe(obj: Any, param: str) -> Arg:
    """The launch argument of ``obj`` for parameter ``param``; ``ValueError`` naming the
    parameter when ``obj`` is not a CUDA tensor tlc can pass."""
    torch = sys.modules.get("torch")
    # isinstance, not the type's module: a subclass defined elsewhere (a user's, a
    # library's) is a torch tensor too, whose device is `.device.index`.
    if torch is not None and isinstance(obj, torch.Tensor):
        return _torch(obj, param)
    if hasattr(obj, "__cuda_array_interface__"):
        return _cuda_array_interface(obj, param)
    if hasattr(obj, "__dlpack__"):
        return _dlpack(obj, param)
    raise ValueError(
        f"parameter `{param}`: expected a CUDA tensor (a torch.Tensor, or an object with "
        f"__cuda_array_interface__ or __dlpack__), found {type(obj).__name__}"
    )


def _torch(t: Any, param: str) -> Arg:
    if not t.is_cuda:
        raise ValueError(f"parameter `{param}`: expected a CUDA tensor, found one on {t.device}")
    name = str(t.dtype).replace("torch.", "")
    dtype = _TORCH_DTYPES.get(name)
    if dtype is None:
        raise ValueError(f"parameter `{param}`: tlc has no dtype for torch.{name}")
    return Arg(t.data_ptr(), dtype, tuple(t.shape), tuple(t.stride()), t.device.index or 0)


def _cuda_array_interface(obj: Any, param: str) -> Arg:
    cai = obj.__cuda_array_interface__
    typestr = cai["typestr"]
    dtype = _TYPESTRS.get(typestr)
    if dtype is None:
        raise ValueError(f"parameter `{param}`: tlc has no dtype for typestr {typestr!r}")
    shape = tuple(int(d) for d in cai["shape"])
    itemsize = int(typestr[2:])
    strides = None
    if cai.get("strides") is not None:
        byte_strides = tuple(int(s) for s in cai["strides"])
        if any(s % itemsize for s in byte_strides):
            raise ValueError(
                f"parameter `{param}`: byte strides {byte_strides} are not multiples of the "
                f"element size {itemsize}"
            )
        strides = tuple(s // itemsize for s in byte_strides)
    device = getattr(getattr(obj, "device", None), "id", 0)
    return Arg(int(cai["data"][0]), dtype, shape, strides, int(device or 0))


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


def _dlpack(obj: Any, param: str) -> Arg:
    """Reads the DLTensor of an unversioned ``dltensor`` capsule (it starts the
    DLManagedTensor). The capsule is not consumed: its destructor frees it, and ``obj``
    (which the caller holds) keeps the memory alive."""
    device_type, device_id = obj.__dlpack_device__()
    if device_type != _DLPACK_CUDA:
        where = _DLPACK_DEVICE_NAMES.get(device_type, f"DLPack device type {device_type}")
        raise ValueError(f"parameter `{param}`: expected a CUDA tensor, found one on {where}")
    return dlpack_arg(obj.__dlpack__(), param)


def dlpack_arg(capsule: Any, param: str) -> Arg:
    """The launch argument a ``dltensor`` capsule describes, whatever its device."""
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype = ctypes.c_void_p
    get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    address = get_pointer(capsule, b"dltensor")
    t = _DLTensor.from_address(address)
    code, bits, lanes = t.dtype.code, t.dtype.bits, t.dtype.lanes
    dtype = _DLPACK_DTYPES.get((code, bits)) if lanes == 1 else None
    if dtype is None:
        raise ValueError(
            f"parameter `{param}`: tlc has no dtype for DLPack type code {code}, {bits} bits, "
            f"{lanes} lanes"
        )
    shape = tuple(t.shape[i] for i in range(t.ndim))
    strides = tuple(t.strides[i] for i in range(t.ndim)) if t.strides else None
    return Arg((t.data or 0) + t.byte_offset, dtype, shape, strides, t.device.device_id)
