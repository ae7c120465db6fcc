"""TileLang's ``tilelang.utils.tensor``: the tensor supplies its profiler fills a kernel's
inputs with (``TensorSupplyType``), and ``torch_assert_close``, a comparison that allows a
ratio of mismatched elements. torch is imported when a tensor is made or compared, never
at import."""

from __future__ import annotations

from enum import Enum
from typing import Any, Callable

from ..param import KernelParam


class TensorSupplyType(Enum):
    """How the profiler fills a parameter (TileLang's names and meanings):

    - ``Integer``: random integers, -2..2 (0..2 unsigned, -128..127 as bits for fp8, 0 / 1
      for bool);
    - ``Uniform``: uniform in [-1, 1) (drawn in float32, then cast);
    - ``Normal``: normal with mean -1 and standard deviation 1 (TileLang's ``normal_(-1.0,
      1.0)``);
    - ``Randn``: standard normal;
    - ``Zero``, ``One``: zeros, ones;
    - ``Auto``: uniform in [-1, 1) for float16 / bfloat16 / float32, as ``Integer`` for
      every other dtype.

    ``Uniform`` and ``Normal`` give int8 parameters ones (as TileLang does)."""

    Integer = 1
    Uniform = 2
    Normal = 3
    Randn = 4
    Zero = 5
    One = 6
    Auto = 7


def _torch() -> Any:
    import torch  # type: ignore[import-not-found, unused-ignore]

    return torch


def get_tensor_supply(supply_type: TensorSupplyType = TensorSupplyType.Integer) -> Callable[[KernelParam], Any]:
    """A function making a tensor for a ``KernelParam`` on torch's current CUDA device,
    filled as ``supply_type`` says. A parameter whose shape has a dim known only at launch
    is a ``ValueError`` (give values: the profiler's ``dynamic_symbolic_constraints``)."""

    def supply(param: KernelParam) -> Any:
        torch = _torch()
        if not param.is_static():
            raise ValueError(
                f"parameter `{param.name}` has the shape {param.shape}, with a dim known only "
                "at launch: the profiler cannot make it; pass dynamic_symbolic_constraints "
                "(values for those dims) or input_tensors"
            )
        shape = [int(d) for d in param.shape]
        dtype = param.torch_dtype()
        device = torch.device("cuda", torch.cuda.current_device())
        kind = supply_type
        if kind is TensorSupplyType.Auto:
            if param.dtype in ("float16", "bfloat16", "float32"):
                return torch.empty(shape, device=device, dtype=dtype).uniform_(-1.0, 1.0)
            kind = TensorSupplyType.Integer
        if param.dtype == "int8" and kind in (TensorSupplyType.Uniform, TensorSupplyType.Normal):
            return torch.ones(shape, device=device, dtype=dtype)
        if kind is TensorSupplyType.Integer:
            if param.is_unsigned():
                return torch.randint(0, 3, shape, device=device, dtype=dtype)
            if param.is_float8():
                return torch.randint(-128, 128, shape, device=device, dtype=torch.int8).to(dtype)
            if param.is_boolean():
                return torch.randint(0, 2, shape, device=device, dtype=dtype)
            return torch.randint(-2, 3, shape, device=device, dtype=dtype)
        if kind is TensorSupplyType.Uniform:
            return torch.empty(shape, device=device, dtype=torch.float32).uniform_(-1.0, 1.0).to(dtype)
        if kind is TensorSupplyType.Normal:
            return torch.empty(shape, device=device, dtype=torch.float32).normal_(-1.0, 1.0).to(dtype)
        if kind is TensorSupplyType.Randn:
            return torch.randn(shape, device=device).to(dtype)
        if kind is TensorSupplyType.Zero:
            return torch.zeros(shape, device=device, dtype=dtype)
        if kind is TensorSupplyType.One:
            return torch.ones(shape, device=device, dtype=dtype)
        raise ValueError(f"unknown tensor supply type {supply_type!r}")

    return supply


def is_float8_dtype(dtype: Any) -> bool:
    """Whether a torch dtype is one of torch's float8 types."""
    return "float8" in str(dtype)


def torch_assert_close(
    tensor_a: Any,
    tensor_b: Any,
    rtol: float = 1e-2,
    atol: float = 1e-3,
    max_mismatched_ratio: float = 0.001,
    verbose: bool = False,
    equal_nan: bool = True,
    check_device: bool = True,
    check_dtype: bool = True,
    check_layout: bool = True,
    check_stride: bool = False,
    base_name: str = "LHS",
    ref_name: str = "RHS",
) -> None:
    """Asserts that two tensors are close (``|a - b| <= atol + rtol * |b|``) except for at
    most ``max_mismatched_ratio`` of their elements (TileLang's check). Shapes must match;
    dtypes and devices too unless ``check_dtype`` / ``check_device`` is off, in which case
    both are compared in their promoted dtype on the CPU."""
    torch = _torch()
    if tuple(tensor_a.shape) != tuple(tensor_b.shape):
        raise AssertionError(f"shapes differ: {base_name} {tuple(tensor_a.shape)}, {ref_name} {tuple(tensor_b.shape)}")
    if check_dtype and tensor_a.dtype != tensor_b.dtype:
        raise AssertionError(f"dtypes differ: {base_name} {tensor_a.dtype}, {ref_name} {tensor_b.dtype}")
    if check_device and tensor_a.device != tensor_b.device:
        raise AssertionError(f"devices differ: {base_name} {tensor_a.device}, {ref_name} {tensor_b.device}")
    if check_stride and tensor_a.stride() != tensor_b.stride():
        raise AssertionError(f"strides differ: {base_name} {tensor_a.stride()}, {ref_name} {tensor_b.stride()}")
    a, b = tensor_a, tensor_b
    if a.device != b.device:
        a, b = a.cpu(), b.cpu()
    if is_float8_dtype(a.dtype) or is_float8_dtype(b.dtype) or a.dtype != b.dtype:
        # float8 has no arithmetic in torch; other mixes compare in a common dtype.
        common = torch.promote_types(
            torch.float32 if is_float8_dtype(a.dtype) else a.dtype,
            torch.float32 if is_float8_dtype(b.dtype) else b.dtype,
        )
        a, b = a.to(common), b.to(common)
    mismatched = ~torch.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)
    count = int(mismatched.sum().item())
    total = a.numel()
    allowed = int(total * max_mismatched_ratio)
    if verbose:
        print(f"mismatched elements: {count} / {total} (allowed: {allowed})")
    if count > allowed:
        first = tuple(int(i) for i in mismatched.nonzero()[0].tolist())
        raise AssertionError(
            f"{base_name} and {ref_name} differ in {count} of {total} elements "
            f"({count / max(total, 1):.2%}, allowed {max_mismatched_ratio:.2%} at rtol={rtol}, "
            f"atol={atol}); first at {first}: {base_name} {a[first].item()!r}, "
            f"{ref_name} {b[first].item()!r}"
        )
