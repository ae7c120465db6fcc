"""TileLang's Python layer on tlc: a TileLang script runs with only its imports changed —
``import tilelang`` → ``import tlc.tilelang as tilelang``, ``import tilelang.language as
T`` → ``import tlc.tilelang.language as T``, ``from tilelang.x import y`` → ``from
tlc.tilelang.x import y``.

- ``jit`` (``@tilelang.jit``, ``@tilelang.jit(out_idx=..., pass_configs=...)``) on kernel
  factories and eager kernel functions, ``compile``: ``jit.py``;
- the ``JITKernel`` they give (``kernel(a, b)``, ``get_kernel_source()`` — PTX —,
  ``get_profiler()``): ``kernel.py``; the profiler and ``do_bench``: ``profiler/``;
- ``autotune`` / ``AutoTuner``: ``autotuner/``; ``PassConfigKey``: ``pass_configs.py``;
  ``TensorSupplyType``: ``utils/tensor.py``;
- ``cdiv``; ``language`` (``tlc.language`` and TileLang's Python-level names).

docs/python.md, "TileLang scripts (`tlc.tilelang`)", says what each piece does and what tlc
refuses. Importing needs neither torch nor a GPU; launching, profiling and tuning on a GPU
need torch.
"""

from __future__ import annotations

from typing import Any

from . import language, profiler
from .autotuner import AutoTuner, autotune
from .jit import JITImpl, compile, jit
from .kernel import JITKernel
from .pass_configs import PassConfigError, PassConfigKey
from .utils.tensor import TensorSupplyType

__all__ = [
    "AutoTuner",
    "JITImpl",
    "JITKernel",
    "PassConfigError",
    "PassConfigKey",
    "TensorSupplyType",
    "autotune",
    "cdiv",
    "compile",
    "jit",
    "language",
]


def cdiv(a: Any, b: Any) -> Any:
    """Ceiling division (``tilelang.cdiv``): an int for ints, an expression over symbolic
    dims for those (``T.ceildiv``'s Python meaning)."""
    return language.ceildiv(a, b)
