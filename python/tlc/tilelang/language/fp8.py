"""``tilelang.language.fp8``: which FP8 dtypes a script's platform uses. tlc compiles for
NVIDIA GPUs only, whose FP8 dtypes are OCP E4M3FN and E5M2 (TileLang's CUDA answer; its
ROCm ones, the FNUZ variants, do not arise)."""

from __future__ import annotations

from typing import Any

from .dtypes import dtype


def determine_fp8_type(fp8_format: str = "e4m3") -> dtype:
    """``T.float8_e4m3fn`` for ``"e4m3"``, ``T.float8_e5m2`` for ``"e5m2"``."""
    if fp8_format == "e4m3":
        return dtype("float8_e4m3fn")
    if fp8_format == "e5m2":
        return dtype("float8_e5m2")
    raise ValueError(f"Unsupported FP8 format: {fp8_format}")


def determine_torch_fp8_type(fp8_format: str = "e4m3") -> Any:
    """torch's dtype of ``determine_fp8_type(fp8_format)``."""
    return determine_fp8_type(fp8_format).as_torch()
