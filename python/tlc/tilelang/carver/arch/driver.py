"""``tilelang.carver.arch.driver``: the CUDA device's properties, which scripts read to
size persistent grids (``driver.get_num_sms()``). Read through torch (``torch.cuda``), as a
script that launches kernels has it; without torch or a GPU each raises ``RuntimeError``,
as TileLang's does when it cannot read the device."""

from __future__ import annotations

from typing import Any, Optional


def get_cuda_device_properties(device_id: int = 0) -> Optional[Any]:
    """torch's properties of CUDA device ``device_id`` (``None`` without torch or CUDA)."""
    try:
        import torch  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    return torch.cuda.get_device_properties(device_id)


def _properties(device_id: int) -> Any:
    prop = get_cuda_device_properties(device_id)
    if prop is None:
        raise RuntimeError("Failed to get device properties (no torch with a CUDA device).")
    return prop


def get_device_name(device_id: int = 0) -> Optional[str]:
    prop = get_cuda_device_properties(device_id)
    return None if prop is None else str(prop.name)


def get_num_sms(device_id: int = 0) -> int:
    """The number of streaming multiprocessors of the device."""
    return int(_properties(device_id).multi_processor_count)


def get_shared_memory_per_block(device_id: int = 0, format: str = "bytes") -> int:
    """Shared memory a block may use without opting in, in ``format``: bytes, kb or mb."""
    return _scaled(int(_properties(device_id).shared_memory_per_block), format)


def get_max_dynamic_shared_size_bytes(device_id: int = 0, format: str = "bytes") -> int:
    """Shared memory a block may opt in to, in ``format``: bytes, kb or mb."""
    return _scaled(int(_properties(device_id).shared_memory_per_block_optin), format)


def _scaled(value: int, format: str) -> int:
    scale = {"bytes": 1, "kb": 1024, "mb": 1024 * 1024}.get(format)
    if scale is None:
        raise ValueError("Invalid format. Must be one of: bytes, kb, mb")
    return value // scale
