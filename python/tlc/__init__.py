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

import functools
import json
import operator
import os
import sys
import warnings
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple, Union

from . import _arrays, _launch, _tensors
from ._tlc import CompileError, LaunchError
from ._tlc import compile as _compile
from ._tlc import driver_available
from ._tlc import interpret as _interpret
from ._tlc import param_names as _param_names
from ._tlc import plan as _plan
from ._tlc import tune as _tune
from .language import ConfigSpace, PrimFunc

__all__ = [
    "__version__",
    "CompileError",
    "Kernel",
    "LaunchError",
    "autotune",
    "compile",
    "driver_available",
    "interpret",
    "plan",
    "tune",
]

Source = Union[str, "os.PathLike[str]", PrimFunc]


def _version() -> str:
    """The installed distribution's version (the crate's, set by maturin)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tlc")
    except PackageNotFoundError:  # imported from the source tree, not installed
        return "0+unknown"


__version__: str = _version()


def _read_source(source_or_path: Source) -> Tuple[str, str]:
    """(name shown in diagnostics, text): a ``tlc.language.PrimFunc`` (a kernel written in
    Python) gives its file and text; a path (a ``PathLike``, or a one-line string naming an
    existing file or ending in ``.tir``) is read; any other string is the source itself,
    named ``<string>``."""
    if isinstance(source_or_path, PrimFunc):
        return source_or_path.filename, source_or_path.source
    if isinstance(source_or_path, os.PathLike):
        path = os.fspath(source_or_path)
    elif not isinstance(source_or_path, str):
        raise TypeError(
            "expected a path, source text or a tlc.language.PrimFunc, not "
            f"{type(source_or_path).__name__} ({source_or_path!r})"
        )
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


def _defines(dims: Dict[str, Any]) -> List[str]:
    """``**dims`` as the CLI's ``-D NAME=VALUE`` texts (dims and tunables alike); ``TypeError``
    naming one that is not an integer (``N=1.5`` must not compile as ``N=1``)."""
    return [f"{name}={value}" for name, value in _dim_values(dims)]


OutIdx = Union[int, Sequence[int], None]

#: Launch signatures cached per kernel before the cache is emptied (a shape sweep
#: compiles once and launches on many shapes; each signature costs a few hundred bytes).
_MAX_SIGNATURES = 256


class Kernel:
    """A compiled kernel: PTX, launch manifest and every stage of its pipeline. Call it on
    CUDA tensors to launch it (see ``__call__``)."""

    def __init__(self, compiled: Any, out_idx: OutIdx = None) -> None:
        self._compiled = compiled
        # Loaded modules by (device, PTX): the kernel's and its alignment variants'.
        self._loaded: Dict[Tuple[int, str], Any] = {}
        # Variants by the multiples they declare (None: the variant did not compile).
        self._variants: Dict[Tuple[Tuple[str, int], ...], Optional[str]] = {}
        self._signatures: Dict[Any, _launch.Signature] = {}
        self.manifest: Dict[str, Any] = json.loads(compiled.manifest_json)
        self.tune_report: Optional[str] = None
        """``tlc.autotune``'s report of the tune that chose this kernel's config."""
        """The launch manifest (docs/manifest.md) as a dict: params, dims, kernels."""
        # Read once: every launch matches its tensors to these names.
        self._params: List[str] = [p["name"] for p in self.manifest["params"]]
        self._ptx: str = str(compiled.ptx)
        self._out_idx: Tuple[int, ...] = _normalize_out_idx(out_idx, self._params)
        self._inputs: Tuple[int, ...] = tuple(
            i for i in range(len(self._params)) if i not in self._out_idx
        )
        self._all: Tuple[int, ...] = tuple(range(len(self._params)))
        # The symbolic dims a parameter's rows are measured in (its innermost extent):
        # their alignment decides whether copies can be 16-byte vectors or TMA.
        self._row_dims: Tuple[str, ...] = _row_dims(self.manifest)
        # Scalar parameters (`n: T.int32`): their places in the written signature.
        self._scalars: Dict[int, str] = {
            int(d["arg"]): str(d["name"]) for d in self.manifest.get("dims", []) if "arg" in d
        }

    @property
    def ptx(self) -> str:
        """The PTX text, the manifest on its first line (what ``tlc compile`` writes)."""
        return self._ptx

    @property
    def target(self) -> str:
        """The target compiled for: ``sm_80`` or ``sm_90a``."""
        return str(self._compiled.target)

    @property
    def params(self) -> List[str]:
        """The parameter names, in order."""
        return list(self._params)

    @property
    def out_idx(self) -> List[int]:
        """The parameters a call allocates and returns when they are not given (``out_idx``
        of ``compile``), as non-negative indices in the order they are returned."""
        return list(self._out_idx)

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

    def __call__(self, *tensors: Any, stream: Optional[int] = None, **dims: int) -> Any:
        """Launches the kernel on CUDA tensors without waiting.

        Give one tensor per parameter in order, or, when the kernel was compiled with
        ``out_idx``, only the others: the outputs are then allocated (``torch.empty``, or
        ``torch.zeros`` for an output the kernel also reads) on the inputs' GPU, their
        shapes from the dims the inputs bind and ``**dims``, and returned (one tensor, or a
        tuple in ``out_idx`` order). Without ``out_idx`` the call returns ``None``.

        Tensors are ``torch.Tensor`` s or objects with ``__cuda_array_interface__`` or
        ``__dlpack__``; each must be on the same GPU, C-contiguous, 16-byte aligned, of the
        parameter's dtype and of a shape that fits it (symbolic dims are read off the
        shapes; ``**dims`` given are checked against them). Outputs are written in place.
        The launch goes on ``stream`` (a raw ``CUstream`` handle) or, for torch tensors or
        allocated outputs, torch's current stream of their device (else the legacy default
        stream); outputs are allocated (and zeroed) on the stream the launch goes on. Raises ``TypeError`` for a wrong count or a dim that is not
        an int, ``ValueError`` or ``LaunchError`` naming the parameter.

        The checks run once per signature (dtypes, shapes, strides, devices, dims), which
        is then cached; later calls with the same signature only check the addresses.

        A kernel with scalar parameters (``n: T.int32``) takes their values where the
        signature has them, as ints (``kernel(a, 128, c)``), or all of them by name
        (``n=128``) with only the tensors in place."""
        if self._scalars:
            tensors, dims = self._split_scalars(tensors, dims)
        names = self._params
        n = len(tensors)
        if n == len(names):
            given = self._all
        elif self._out_idx and n == len(self._inputs):
            given = self._inputs
        else:
            raise TypeError(self._count_error(n))
        key_parts = []
        ptrs: List[int] = [0] * len(names)
        torch_tensor = _torch_tensor_type()
        for t, i in zip(tensors, given):
            if type(t) is torch_tensor:
                key_parts.append((t.dtype, t.shape, t.stride(), t.device))
                ptrs[i] = t.data_ptr()
            else:
                a = _tensors.describe(t, names[i])
                key_parts.append((a.dtype, a.shape, a.strides, a.device))
                ptrs[i] = a.ptr
        # Dims by value (`N=True` must not find the entry of `N=1`), checked as ints.
        key = (tuple(key_parts), given, _dim_values(dims) if dims else ())
        sig = self._signatures.get(key)
        if sig is None:
            sig = self._prepare(tensors, given, dims)
            if len(self._signatures) >= _MAX_SIGNATURES:
                self._signatures.clear()
            self._signatures[key] = sig
        device = sig.device
        if device is None:
            device = _tensors.current_device(names[sig.outputs[0][0]])
        allocated = _launch.allocate(sig, device, names, stream, ptrs) if sig.outputs else None
        if stream is None:
            # Outputs allocated here were allocated (and zeroed) on torch's current stream.
            stream = _launch.current_stream(device) if sig.torch or allocated else 0
        loaded = sig.loaded
        if loaded is None:
            loaded = self._loaded.get((device, sig.ptx))
            if loaded is None:
                from ._tlc import Loaded

                loaded = self._loaded[(device, sig.ptx)] = Loaded(sig.ptx, device)
                _launch.register_exit_hook()
            if sig.device is not None:
                sig.loaded = loaded
        loaded.run(sig.prepared, ptrs, stream)
        if not self._out_idx:
            return None
        if allocated is None:
            allocated = {}
        outs = tuple(allocated[i] if i in allocated else tensors[i] for i in self._out_idx)
        return outs[0] if len(outs) == 1 else outs

    def _split_scalars(
        self, args: Tuple[Any, ...], dims: Dict[str, Any]
    ) -> Tuple[Tuple[Any, ...], Dict[str, Any]]:
        """The tensors of a call and its dims, the scalar parameters' values taken from
        their places in ``args`` (all parameters, or all but the ``out_idx`` outputs)."""
        full = len(self._params) + len(self._scalars)
        if any(name in dims for name in self._scalars.values()):
            # Scalars by name: then all of them (the arguments are the tensors).
            return args, dims
        if len(args) == full:
            skip: Tuple[int, ...] = ()
        elif self._out_idx and len(args) == full - len(self._out_idx):
            skip = self._out_idx
        else:
            # Given by name (or a wrong count, which the tensor check reports).
            return args, dims
        tensors: List[Any] = []
        dims = dict(dims)
        rest = iter(args)
        tensor_index = 0
        for place in range(full):
            if place in self._scalars:
                dims[self._scalars[place]] = next(rest)
            else:
                if tensor_index not in skip:
                    tensors.append(next(rest))
                tensor_index += 1
        return tuple(tensors), dims

    def _count_error(self, found: int) -> str:
        names = self._params
        takes = f"{len(names)} tensors ({', '.join(names)})"
        if self._out_idx:
            inputs = ", ".join(names[i] for i in self._inputs)
            outputs = ", ".join(names[i] for i in self._out_idx)
            takes = (
                f"{len(self._inputs)} tensors ({inputs}; it allocates {outputs}) or {takes}"
            )
        return f"kernel takes {takes} but {found} were given"

    def _prepare(
        self, tensors: Tuple[Any, ...], given: Sequence[int], dims: Dict[str, Any]
    ) -> _Signature:
        """Checks a new signature: every given tensor described (the errors that name the
        parameter), all on one GPU, then the runtime's checks and the outputs' shapes."""
        from ._tlc import prepare

        names = self._params
        specs: List[Any] = [None] * len(names)
        device: Optional[int] = None
        first = ""
        for t, i in zip(tensors, given):
            a = _tensors.describe(t, names[i])
            if device is None:
                device, first = a.device, names[i]
            elif a.device != device:
                raise ValueError(
                    f"parameter `{names[i]}`: expected a tensor on cuda:{device} (as "
                    f"`{first}`), found one on cuda:{a.device}"
                )
            specs[i] = (a.dtype, list(a.shape), _list(a.strides))
        prepared = prepare(self._ptx, specs, list(_dim_values(dims)))
        ptx = self._aligned(dict(prepared.dims))
        if ptx is not self._ptx:
            prepared = prepare(ptx, specs, list(_dim_values(dims)))
        outputs = tuple(
            (i, tuple(shape), dtype, zeroed) for i, shape, dtype, zeroed in prepared.outputs
        )
        torch_tensor = _torch_tensor_type()
        uses_torch = any(isinstance(t, torch_tensor) for t in tensors)
        return _launch.Signature(prepared, ptx, device, outputs, uses_torch)

    def _aligned(self, dims: Dict[str, int]) -> str:
        """The PTX to launch for these dim values: the kernel compiled with each row dim
        declared a multiple of the power of two (at most 16) its value is, when that
        declares anything (``Compiled.variant``; compiled once per alignment, in
        milliseconds). With symbolic row lengths nothing proves rows 16-byte aligned, so
        the kernel as compiled copies element by element; the variant, whose multiples the
        runtime checks at every launch, gets vector copies and TMA. A variant that does not
        compile leaves the kernel as compiled, with a warning."""
        multiples = tuple(
            (name, min(16, value & -value))
            for name in self._row_dims
            if (value := dims.get(name, 0)) > 0 and value & 1 == 0
        )
        if not multiples:
            return self._ptx
        if multiples not in self._variants:
            try:
                self._variants[multiples] = str(self._compiled.variant(list(multiples)).ptx)
            except CompileError as e:
                warnings.warn(
                    f"tlc: the variant for {dict(multiples)} did not compile; launching the "
                    f"kernel as compiled (element-wise copies): {e}",
                    stacklevel=3,
                )
                self._variants[multiples] = None
        return self._variants[multiples] or self._ptx

    def interpret(self, *arrays: Any, seed: int = 0, **dims: int) -> Tuple[Any, ...]:
        """``tlc.interpret(self, *arrays, ...)``: see ``interpret``."""
        return interpret(self, *arrays, seed=seed, **dims)

    def __repr__(self) -> str:
        # One-kernel manifests (version 1) name their entry at the top.
        kernels = self.manifest.get("kernels") or [self.manifest]
        entries = ", ".join(str(k.get("entry")) for k in kernels)
        return f"<tlc.Kernel {entries} for {self.target}>"


def _row_dims(manifest: Dict[str, Any]) -> Tuple[str, ...]:
    """The symbolic dims (not scalar parameters) in any parameter's innermost extent, in
    the manifest's order of dims."""
    found: Set[str] = set()

    def walk(e: Any) -> None:
        if isinstance(e, dict):
            if "dim" in e:
                found.add(str(e["dim"]))
            for a in e.get("args", []):
                walk(a)

    for p in manifest.get("params", []):
        if p.get("shape"):
            walk(p["shape"][-1])
    return tuple(
        str(d["name"])
        for d in manifest.get("dims", [])
        if d["name"] in found and "arg" not in d
    )


def _normalize_out_idx(out_idx: OutIdx, names: List[str]) -> Tuple[int, ...]:
    """``out_idx`` as TileLang takes it (an index or a list; negative counts from the end)
    as non-negative indices, in the given order; ``ValueError`` for one out of range or
    repeated."""
    if out_idx is None:
        return ()
    given = list(out_idx) if isinstance(out_idx, (list, tuple)) else [out_idx]
    out: List[int] = []
    n = len(names)
    for i in given:
        if isinstance(i, bool) or not hasattr(type(i), "__index__"):
            raise TypeError(f"out_idx: expected parameter indices (int), found {i!r}")
        i = operator.index(i)
        if not -n <= i < n:
            raise ValueError(
                f"out_idx: {i} is out of range for a kernel of {n} parameters ({', '.join(names)})"
            )
        j = i % n
        if j in out:
            raise ValueError(f"out_idx: parameter `{names[j]}` ({i}) is named twice")
        out.append(j)
    return tuple(out)


def _dim_values(dims: Dict[str, Any]) -> Tuple[Tuple[str, int], ...]:
    """The dims given to a call as sorted (name, int) pairs; ``TypeError`` naming the dim
    for a value that is not an integer (a ``bool``, a ``float``, a string)."""
    out = []
    for name, value in sorted(dims.items()):
        if isinstance(value, bool) or not hasattr(type(value), "__index__"):
            raise TypeError(f"dim `{name}`: expected an int, found {value!r}")
        out.append((name, operator.index(value)))
    return tuple(out)


def _list(strides: Optional[Tuple[int, ...]]) -> Optional[List[int]]:
    return None if strides is None else list(strides)


def _torch_tensor_type() -> Any:
    """``torch.Tensor`` when torch is imported already (tlc never imports it for this), else
    a type nothing is: the launch's fast path then never applies."""
    torch = sys.modules.get("torch")
    return getattr(torch, "Tensor", _NoType) if torch is not None else _NoType


class _NoType:
    pass


def compile(
    source_or_path: Source, target: Optional[str] = None, out_idx: OutIdx = None, **dims: int
) -> Kernel:
    """Compiles a kernel (``.tir`` path or source text) to PTX.

    ``out_idx`` (as TileLang's): the index, or list of indices (negative counts from the
    end), of parameters a call may leave out: it then allocates and returns them.

    ``dims`` bind symbolic dims and tunables (as ``tlc compile -D NAME=VALUE``); open
    tunables are chosen as the CLI chooses them (tuning cache, then ``tlc plan``'s first
    config, then defaults). ``target`` is ``"sm_80"`` or ``"sm_90a"``; by default, GPU 0's
    when there is one, else ``sm_80``. Raises ``CompileError`` whose message is the rendered
    diagnostic (``FILE:LINE:COL: error: ...`` and the source line with a caret)."""
    name, text = _read_source(source_or_path)
    compiled = _compile(name, text, _defines(dims), target)
    if out_idx is None and isinstance(source_or_path, PrimFunc):
        out_idx = source_or_path.out_idx  # an eager kernel's `return`ed T.empty outputs
    return Kernel(compiled, out_idx)


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
    too. A compiled kernel's scalar parameters may also be given as ints at their places,
    as its call takes them. Raises ``CompileError`` (rendered) for a refused kernel or a
    fault in the run."""
    inputs: Dict[str, bytes] = {}
    if isinstance(kernel_or_source, Kernel) and kernel_or_source._scalars:
        arrays, dims = kernel_or_source._split_scalars(arrays, dims)
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
    source_or_path: Source,
    target: Optional[str] = None,
    top: Optional[int] = None,
    warmup: int = 10,
    iters: int = 50,
    seed: int = 0,
    store: bool = True,
    **dims: int,
) -> str:
    """Times a kernel's tuning space on every visible GPU and stores the fastest config in
    the tuning cache, which ``compile`` then reads (``tlc tune FILE``; ``top``: time only
    the N configs ``plan`` ranks best; ``store=False``: ``--no-cache``). The kernel is a
    path, source text, or a ``tlc.language.PrimFunc`` (its ``T.tunable`` names make the
    space), as ``compile`` takes it. Returns the report ``tlc tune`` prints. Needs a GPU;
    raises ``CompileError`` otherwise."""
    name, text = _read_source(source_or_path)
    return str(_tune(name, text, _defines(dims), target, top, warmup, iters, seed, store))


def autotune(
    configs: Sequence[Dict[str, int]], **tune_options: Any
) -> Any:
    """A decorator for a kernel factory (TileLang's ``@tilelang.autotune(configs=...)``): the
    factory's keyword arguments named by ``configs`` (a list of dicts with the same integer
    keys) become the kernel's tuning space, its candidates exactly these configs.

    Calling the decorated factory with its other arguments builds the kernel once, the
    config names kept in its text as one tuple tunable (so the factory may use them only
    inside the kernel), tunes it with ``tlc.tune`` (``tune_options``: ``top``, ``warmup``,
    ``iters``, ``seed``, ``target``, ``store``) on every visible GPU, which stores the
    winner in the tuning cache, and returns ``tlc.compile`` of it — the winner. The tune's
    report is the kernel's ``tune_report``. Without a GPU nothing is timed: a warning says
    so, and the kernel is the plan's first config. The decorated function's ``prim_func``
    builds the kernel without tuning (for ``tlc.plan``)."""
    space = ConfigSpace(configs)
    target = tune_options.get("target")

    def decorate(factory: Any) -> Any:
        def prim_func(*args: Any, **kwargs: Any) -> PrimFunc:
            clash = sorted(set(space.names) & set(kwargs))
            if clash:
                raise TypeError(f"autotune: {clash} are tuned; do not pass them")
            built = factory(*args, **kwargs, **space.members())
            if not isinstance(built, PrimFunc):
                raise TypeError(
                    f"autotune: `{getattr(factory, '__name__', factory)}` returned "
                    f"{type(built).__name__}, not a T.prim_func kernel"
                )
            return built

        @functools.wraps(factory)
        def build(*args: Any, **kwargs: Any) -> Kernel:
            kernel_func = prim_func(*args, **kwargs)
            report = None
            if driver_available():
                report = tune(kernel_func, **tune_options)
            else:
                warnings.warn(
                    "tlc.autotune: no GPU, nothing timed: the kernel is the plan's first config",
                    stacklevel=2,
                )
            kernel = compile(kernel_func, target=target)
            kernel.tune_report = report
            return kernel

        build.prim_func = prim_func  # type: ignore[attr-defined]
        build.space = space  # type: ignore[attr-defined]
        return build

    return decorate
