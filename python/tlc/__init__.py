"""tlc from Python: compile TileLang-style tile kernels to PTX, read any stage of the
pipeline, run them in the reference interpreter on NumPy arrays, rank their tuning space,
and launch them on CUDA tensors (PyTorch, or anything with DLPack or
``__cuda_array_interface__``).

Importing the package and everything but launching need no GPU and no CUDA.

>>> import tlc
>>> k = tlc.compile("examples/elementwise_add.tir")            # doctest: +SKIP
>>> a, b, c = tlc.interpret(k, a, b, c)                        # doctest: +SKIP
>>> k(a_cuda, b_cuda, c_cuda)                                  # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional, Tuple, Union

from . import _arrays, _tensors
from ._tlc import CompileError, LaunchError
from ._tlc import compile as _compile
from ._tlc import driver_available
from ._tlc import interpret as _interpret
from ._tlc import param_names as _param_names
from ._tlc import plan as _plan
from ._tlc import tune as _tune

__all__ = [
    "CompileError",
    "Kernel",
    "LaunchError",
    "compile",
    "driver_available",
    "interpret",
    "plan",
    "tune",
]

Source = Union[str, "os.PathLike[str]"]


def _read_source(source_or_path: Source) -> Tuple[str, str]:
    """(name shown in diagnostics, text): a path (a ``PathLike``, or a one-line string naming
    an existing file or ending in ``.tir``) is read; any other string is the source itself,
    named ``<string>``."""
    if isinstance(source_or_path, os.PathLike):
        path = os.fspath(source_or_path)
    elif "\n" not in source_or_path and (
        source_or_path.endswith(".tir") or os.path.isfile(source_or_path)
    ):
        path = source_or_path
    else:
        return "<string>", source_or_path
    try:
        with open(path, encoding="utf-8") as f:
            return path, f.read()
    except OSError as e:
        raise CompileError(f"{path}: error: cannot read file: {e.strerror}") from None


def _defines(dims: Dict[str, int]) -> List[str]:
    """``**dims`` as the CLI's ``-D NAME=VALUE`` texts (dims and tunables alike)."""
    return [f"{name}={int(value)}" for name, value in dims.items()]


class Kernel:
    """A compiled kernel: PTX, launch manifest and every stage of its pipeline. Call it on
    CUDA tensors to launch it (see ``__call__``)."""

    def __init__(self, compiled: Any) -> None:
        self._compiled = compiled
        self._loaded: Dict[int, Any] = {}
        self.manifest: Dict[str, Any] = json.loads(compiled.manifest_json)
        """The launch manifest (docs/manifest.md) as a dict: params, dims, kernels."""
        # Read once: every launch matches its tensors to these names.
        self._params: List[str] = [p["name"] for p in self.manifest["params"]]

    @property
    def ptx(self) -> str:
        """The PTX text, the manifest on its first line (what ``tlc compile`` writes)."""
        return str(self._compiled.ptx)

    @property
    def target(self) -> str:
        """The target compiled for: ``sm_80`` or ``sm_90a``."""
        return str(self._compiled.target)

    @property
    def params(self) -> List[str]:
        """The parameter names, in order."""
        return list(self._params)

    @property
    def stages(self) -> List[str]:
        """The names ``ir`` accepts, in pipeline order: ``input``, each pass, ``ptx``."""
        return list(self._compiled.stages())

    def ir(self, stage: str) -> str:
        """The text of one stage of the pipeline: ``input`` (the kernel as the pipeline gets
        it, dims and tunables bound), a pass name (the IR after it, as ``tlc compile
        --stop-after=PASS --emit=tir`` prints it) or ``ptx``. ``ValueError`` lists the
        stages when ``stage`` is none of them."""
        return str(self._compiled.ir(stage))

    def __call__(self, *tensors: Any, stream: Optional[int] = None, **dims: int) -> None:
        """Launches the kernel on CUDA tensors, one per parameter in order, without waiting.

        Tensors are ``torch.Tensor`` s or objects with ``__cuda_array_interface__`` or
        ``__dlpack__``; each must be on the same GPU, C-contiguous, 16-byte aligned, of the
        parameter's dtype and of a shape that fits it (symbolic dims are read off the
        shapes; ``**dims`` given are checked against them). Outputs are written in place.
        The launch goes on ``stream`` (a raw ``CUstream`` handle) or, for torch tensors,
        torch's current stream of their device (else the legacy default stream).
        Raises ``ValueError`` or ``LaunchError`` naming the parameter."""
        names = self._params
        if len(tensors) != len(names):
            raise TypeError(
                f"kernel takes {len(names)} tensors ({', '.join(names)}) but "
                f"{len(tensors)} were given"
            )
        args = [_tensors.describe(t, n) for t, n in zip(tensors, names)]
        device = args[0].device if args else 0
        for a, n in zip(args, names):
            if a.device != device:
                raise ValueError(
                    f"parameter `{n}`: expected a tensor on cuda:{device} (as `{names[0]}`), "
                    f"found one on cuda:{a.device}"
                )
        if stream is None:
            stream = _torch_stream(tensors, device)
        loaded = self._loaded.get(device)
        if loaded is None:
            from ._tlc import Loaded

            loaded = self._loaded[device] = Loaded(self.ptx, device)
        raw = [(a.ptr, a.dtype, list(a.shape), _list(a.strides)) for a in args]
        loaded.launch(raw, int(stream), sorted((k, int(v)) for k, v in dims.items()))

    def interpret(self, *arrays: Any, seed: int = 0, **dims: int) -> Tuple[Any, ...]:
        """``tlc.interpret(self, *arrays, ...)``: see ``interpret``."""
        return interpret(self, *arrays, seed=seed, **dims)

    def __repr__(self) -> str:
        # One-kernel manifests (version 1) name their entry at the top.
        kernels = self.manifest.get("kernels") or [self.manifest]
        entries = ", ".join(str(k.get("entry")) for k in kernels)
        return f"<tlc.Kernel {entries} for {self.target}>"


def _list(strides: Optional[Tuple[int, ...]]) -> Optional[List[int]]:
    return None if strides is None else list(strides)


def _torch_stream(tensors: Tuple[Any, ...], device: int) -> int:
    """torch's current stream on ``device`` when the arguments are torch tensors, else 0."""
    if tensors and type(tensors[0]).__module__.split(".")[0] == "torch":
        import torch  # type: ignore[import-not-found, unused-ignore]

        return int(torch.cuda.current_stream(device).cuda_stream)
    return 0


def compile(source_or_path: Source, target: Optional[str] = None, **dims: int) -> Kernel:
    """Compiles a kernel (``.tir`` path or source text) to PTX.

    ``dims`` bind symbolic dims and tunables (as ``tlc compile -D NAME=VALUE``); open
    tunables are chosen as the CLI chooses them (tuning cache, then ``tlc plan``'s first
    config, then defaults). ``target`` is ``"sm_80"`` or ``"sm_90a"``; by default, GPU 0's
    when there is one, else ``sm_80``. Raises ``CompileError`` whose message is the rendered
    diagnostic (``FILE:LINE:COL: error: ...`` and the source line with a caret)."""
    name, text = _read_source(source_or_path)
    return Kernel(_compile(name, text, _defines(dims), target))


def interpret(
    kernel_or_source: Union[Kernel, Source], *arrays: Any, seed: int = 0, **dims: int
) -> Tuple[Any, ...]:
    """Runs a kernel on the CPU in the reference interpreter (``tlc run --interp``).

    ``arrays`` are NumPy arrays, one per parameter in order (``None``, or fewer arrays, lets
    the interpreter draw that parameter uniformly from [-1, 1) with ``seed``). Returns
    every parameter after the run, in order; results are also copied into the writable
    arrays given. dtypes are NumPy's, except **bfloat16**: ``uint16`` raw bits, and
    **float8_e4m3 / float8_e5m2**: ``uint8`` raw bits (``ml_dtypes`` arrays are viewed as
    those). ``dims`` bind symbolic dims (others come from the shapes); for source, tunables
    too. Raises ``CompileError`` (rendered) for a refused kernel or a fault in the run."""
    inputs: Dict[str, bytes] = {}
    if isinstance(kernel_or_source, Kernel):
        _given(inputs, kernel_or_source.params, arrays)
        bound = {k: int(v) for k, v in dims.items()}
        out = kernel_or_source._compiled.interpret(inputs, bound, seed)
    else:
        name, text = _read_source(kernel_or_source)
        _given(inputs, list(_param_names(name, text)), arrays)
        out = _interpret(name, text, _defines(dims), inputs, seed)
    results = tuple(_arrays.from_npy(data) for _, data in out)
    for given, result in zip(arrays, results):
        _copy_back(given, result)
    return results


def _given(inputs: Dict[str, bytes], names: List[str], arrays: Tuple[Any, ...]) -> None:
    if len(arrays) > len(names):
        raise TypeError(
            f"kernel takes {len(names)} arrays ({', '.join(names)}) but {len(arrays)} were given"
        )
    for n, a in zip(names, arrays):
        if a is not None:
            inputs[n] = _arrays.to_npy(a)


def _copy_back(given: Any, result: Any) -> None:
    """Writes ``result`` into the caller's array, as a launch writes outputs in place."""
    import numpy as np

    if isinstance(given, np.ndarray) and given.flags.writeable and given.shape == result.shape:
        view = given.view(result.dtype) if given.dtype.itemsize == result.dtype.itemsize else None
        if view is not None:
            np.copyto(view, result)


def plan(
    source_or_path: Source, target: str = "sm_90a", sms: Optional[int] = None, **dims: int
) -> Dict[str, Any]:
    """Ranks a kernel's tuning space by the heuristic, without a GPU (``tlc plan FILE
    --json``): the configs in order, each with its estimate, and the dropped ones with why.
    ``sms`` defaults to the target's usual SM count."""
    name, text = _read_source(source_or_path)
    return dict(json.loads(_plan(name, text, _defines(dims), target, sms)))


def tune(
    path: "Union[str, os.PathLike[str]]",
    target: Optional[str] = None,
    top: Optional[int] = None,
    warmup: int = 10,
    iters: int = 50,
    seed: int = 0,
    store: bool = True,
    **dims: int,
) -> str:
    """Times a kernel's tuning space on GPU 0 and stores the fastest config in the tuning
    cache, which ``compile`` then reads (``tlc tune FILE``; ``top``: time only the N
    configs ``plan`` ranks best; ``store=False``: ``--no-cache``). Returns the report
    ``tlc tune`` prints. Needs a GPU; raises ``CompileError`` otherwise."""
    return str(
        _tune(os.fspath(path), _defines(dims), target, top, warmup, iters, seed, store)
    )
