"""``JITKernel``: what TileLang's ``tilelang.compile`` / ``@tilelang.jit`` give back, over a
``tlc.Kernel``. Calling it launches the kernel (``tlc.Kernel.__call__``: outputs in
``out_idx`` allocated and returned); ``get_kernel_source`` is its PTX; ``get_profiler``
checks and times it; ``config`` / ``latency`` / ``ref_latency`` are set by the autotuner."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from .. import Kernel, interpret
from ..language import PrimFunc
from .param import KernelParam, params_of
from .profiler import Profiler
from .utils.tensor import TensorSupplyType


class JITKernel:
    """A compiled kernel, as TileLang's scripts use one.

    ``kernel``: the ``tlc.Kernel`` (PTX, manifest, every pipeline stage: ``kernel.ir``);
    ``prim_func``: the source it was compiled from (a ``tlc.language.PrimFunc``, or
    ``None``); ``pass_configs``: as given."""

    def __init__(
        self,
        kernel: Kernel,
        prim_func: Optional[PrimFunc] = None,
        pass_configs: Optional[Dict[str, Any]] = None,
    ) -> None:
        self.kernel = kernel
        self.prim_func = prim_func
        self.pass_configs = dict(pass_configs or {})
        self.config: Optional[Dict[str, Any]] = None
        """The autotuner's chosen config (``None`` when the kernel was not tuned)."""
        self.latency: Optional[float] = None
        """The chosen config's time in ms, as the autotuner measured it."""
        self.ref_latency: Optional[float] = None
        """The reference program's time in ms, as the autotuner measured it."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Launches the kernel on CUDA tensors (see ``tlc.Kernel.__call__``): give the
        inputs and, for outputs not in ``out_idx``, those tensors too; returns the
        allocated outputs (one tensor or a tuple), or ``None`` without ``out_idx``."""
        return self.kernel(*args, **kwargs)

    @property
    def out_idx(self) -> List[int]:
        """The parameters a call allocates and returns."""
        return self.kernel.out_idx

    @property
    def params(self) -> List[KernelParam]:
        """The tensor parameters: name, dtype and shape (a dim known only at launch by
        name)."""
        return params_of(self.kernel.manifest, {})

    def get_kernel_source(self, kernel_only: bool = True) -> str:
        """The kernel's source as tlc generates it: **PTX** (tlc emits no CUDA C), its first
        line the launch manifest (docs/manifest.md). ``kernel_only`` is accepted for
        TileLang's signature; there is no host source."""
        return self.kernel.ptx

    @property
    def kernel_source(self) -> str:
        """``get_kernel_source()``."""
        return self.kernel.ptx

    def get_profiler(self, tensor_supply_type: TensorSupplyType = TensorSupplyType.Auto) -> Profiler:
        """A profiler for this kernel: inputs of its parameters' shapes and dtypes filled as
        ``tensor_supply_type`` says, ``assert_allclose`` against a reference program,
        ``do_bench``."""
        if not isinstance(tensor_supply_type, TensorSupplyType):
            raise TypeError(
                f"tensor_supply_type: expected a TensorSupplyType, not {tensor_supply_type!r}"
            )
        return Profiler(self.params, self.out_idx, tensor_supply_type, self)

    def run_once(self, func: Any = None) -> Any:
        """``func`` (default: the kernel) once on inputs the default profiler makes."""
        return self.get_profiler().run_once(func)

    def interpret(self, *arrays: Any, seed: int = 0, **dims: int) -> Any:
        """The kernel in tlc's reference interpreter on NumPy arrays, on the CPU (see
        ``tlc.interpret``; every parameter, outputs included, comes back)."""
        return interpret(self.kernel, *arrays, seed=seed, **dims)

    def update_tuner_result(self, latency: float, config: Dict[str, Any], ref_latency: Optional[float]) -> "JITKernel":
        """Records the autotuner's result on the kernel; returns it."""
        self.latency, self.config, self.ref_latency = latency, dict(config), ref_latency
        return self

    def get_tuner_result(self) -> Dict[str, Any]:
        """``latency``, ``config`` and ``ref_latency`` as a dict."""
        return {"latency": self.latency, "config": self.config, "ref_latency": self.ref_latency}

    def __getattr__(self, name: str) -> Any:
        # `ptx`, `manifest`, `ir`, `stages`, `target`, `params` of the tlc.Kernel.
        if name.startswith("_") or name == "kernel":
            raise AttributeError(name)
        return getattr(self.kernel, name)

    def __repr__(self) -> str:
        return f"<tlc.tilelang.JITKernel of {self.kernel!r}>"
