"""``tilelang.jit`` and ``tilelang.compile`` on tlc.

``@jit`` (or ``@jit(out_idx=..., pass_configs=..., target=...)``) takes TileLang's two
styles of kernel function, told apart by reading the function (never by running it):

- a **factory** (lazy style): the body builds an ``@T.prim_func`` and returns it. Calling
  the decorated function with the factory's arguments compiles the kernel once per
  distinct arguments and returns the ``JITKernel``: ``kernel = matmul(M, N, K, 128, 128,
  32)``, then ``kernel(a, b)``.
- an **eager** function: its body is the kernel (``M, N = T.const("M, N")``, ``A:
  T.Tensor((M, N), dtype)``, ``C = T.empty(...)``, ``return C``; ``tlc.language.eager``).
  Calling it with tensors and the Python values — ``gemm(a, b, 128, 128, 32)`` — compiles
  once per distinct Python values and ``T.const`` sizes (read off the tensors' shapes and
  bound as constants, as TileLang specializes them), launches, and returns what the body
  returns. ``gemm.compile(M=1024, N=1024, K=1024, block_M=128, ...)`` compiles without
  tensors (a ``T.const`` not given stays a symbolic dim: any size at launch).

``jit`` and ``compile`` take TileLang's options: ``out_idx``; ``pass_configs`` (each key
honored or refused by name: ``pass_configs.py``); ``target`` (``"auto"`` / ``"cuda"`` /
``None``: GPU 0's, else ``sm_80``; an ``arch`` of 9.0 is ``sm_90a``, 8.x and later others
``sm_80``, whose PTX any GPU from 8.0 on runs; other kinds are refused);
``execution_backend`` (any of TileLang's launchers of a CUDA kernel: tlc has one, the CUDA
driver's ``cuLaunchKernel``; ``cutedsl`` — another code generator — is refused);
``verbose``; ``compile_flags`` and ``target_host``, which tlc has nothing to apply to, are
refused when given.
"""

from __future__ import annotations

import ast
import functools
import inspect
import os
import sys
import textwrap
import warnings
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple, Union

from .. import compile as _tlc_compile
from ..language import PrimFunc, Symbolic, eager
from . import pass_configs as _pass_configs
from .kernel import JITKernel

OutIdx = Union[int, Sequence[int], None]

#: Eager calls remembered per function before the memory is emptied (a shape sweep).
_MAX_CALLS = 256

#: TileLang's launchers of a compiled CUDA kernel; all are tlc's one launcher.
_LAUNCHERS = {"auto", "tvm_ffi", "cython", "nvrtc", "ctypes", "dlpack"}


def _target(target: Any) -> Optional[str]:
    """TileLang's target as tlc's: ``None`` (tlc's default), ``"sm_80"`` or ``"sm_90a"``;
    ``ValueError`` naming a target tlc does not compile for."""
    if target is None:
        return None
    if isinstance(target, dict):
        kind, arch = str(target.get("kind", "cuda")), target.get("arch")
    else:
        words = str(target).split()
        kind = words[0] if words else "auto"
        arch = next((w.split("=", 1)[1] for w in words[1:] if w.startswith(("-arch=", "-mcpu="))), None)
        if kind.startswith("sm_"):
            kind, arch = "cuda", kind
    if kind not in ("auto", "cuda", "nvidia"):
        raise ValueError(
            f"target {target!r}: tlc compiles for NVIDIA GPUs only (sm_80, sm_90a); use "
            "\"auto\", \"cuda\" or an arch"
        )
    if arch is None:
        return None
    digits = str(arch).removeprefix("sm_").rstrip("a")
    if not digits.isdigit():
        raise ValueError(f"target {target!r}: unknown arch {arch!r}")
    if int(digits) == 90:
        return "sm_90a"
    if int(digits) >= 80:
        return "sm_80"
    raise ValueError(f"target {target!r}: tlc compiles for compute capability 8.0 and later")


def _check_options(
    execution_backend: Optional[str], target_host: Any, compile_flags: Any
) -> None:
    if execution_backend is not None and execution_backend not in _LAUNCHERS:
        raise ValueError(
            f"execution_backend {execution_backend!r}: tlc launches its PTX through the CUDA "
            f"driver; it accepts TileLang's launchers {sorted(_LAUNCHERS)} (all the same here)"
        )
    if target_host is not None:
        raise ValueError("target_host: tlc compiles no host code; drop it")
    if compile_flags:
        raise ValueError(
            f"compile_flags {compile_flags!r}: tlc runs no nvcc (it writes PTX itself); drop them"
        )


def compile(
    func: Any = None,
    out_idx: OutIdx = None,
    execution_backend: Optional[str] = None,
    target: Any = None,
    target_host: Any = None,
    verbose: Optional[bool] = None,
    pass_configs: Optional[Dict[Any, Any]] = None,
    compile_flags: Any = None,
) -> JITKernel:
    """TileLang's ``tilelang.compile``: compiles a ``T.prim_func`` kernel (or tlc source: a
    ``.tir`` path or text) and returns a ``JITKernel``. An eager kernel's ``T.empty``
    outputs are its ``out_idx``; giving ``out_idx`` too is a ``ValueError`` (TileLang's
    rule). Options: see the module's documentation."""
    return _compile(func, {}, out_idx, execution_backend, target, target_host, verbose, pass_configs, compile_flags)


def _compile(
    func: Any,
    dims: Dict[str, int],
    out_idx: OutIdx,
    execution_backend: Optional[str],
    target: Any,
    target_host: Any,
    verbose: Optional[bool],
    pass_configs: Optional[Dict[Any, Any]],
    compile_flags: Any,
) -> JITKernel:
    """``compile`` with dims bound (``-D``: an eager kernel's ``T.const`` sizes)."""
    _check_options(execution_backend, target_host, compile_flags)
    settings = _pass_configs.resolve(pass_configs)
    source = func
    if isinstance(func, PrimFunc):
        if out_idx is not None and func.out_idx:
            raise ValueError(
                "out_idx is given, but the kernel returns its `T.empty` tensors, which are its "
                "outputs already: drop out_idx"
            )
        source = _pass_configs.apply(settings, func)
    elif settings.disable_tma:
        raise ValueError(
            "pass_configs: disabling TMA is applied to kernels written in Python "
            "(T.prim_func); for tlc source, write `disable_tma=True` on its copies"
        )
    elif func is None or not isinstance(func, (str, os.PathLike)):
        raise TypeError(f"compile: expected a T.prim_func kernel, not {type(func).__name__}")
    kernel = _tlc_compile(source, target=_target(target), out_idx=out_idx, **dims)
    if verbose:
        name = func.name if isinstance(func, PrimFunc) else str(func)
        print(f"tlc: compiled `{name}` for {kernel.target}" + (f" with {dims}" if dims else ""), file=sys.stderr)
    # The kernel's prim_func is what was compiled: the pass configs' edits applied.
    compiled = source if isinstance(source, PrimFunc) else None
    return JITKernel(kernel, compiled, _pass_configs.describe(pass_configs))


def _freeze(value: Any) -> Any:
    """A hashable key for the arguments a kernel is built from (lists and dicts by value);
    ``TypeError`` for a value that has no such key."""
    if isinstance(value, dict):
        return (dict, tuple(sorted(((repr(k), _freeze(v)) for k, v in value.items()))))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_freeze(v) for v in value))
    if isinstance(value, set):
        return (set, tuple(sorted((_freeze(v) for v in value), key=repr)))
    hash(value)
    return value


class _Style:
    """What reading the decorated function's source says about it."""

    def __init__(self, func: Callable[..., Any]) -> None:
        self.eager = False
        self.tensors: List[str] = []
        """Parameters declared tensors by ``A: T.Tensor(...)`` statements (eager style)."""
        self.consts: Set[str] = set()
        """The ``T.const`` names (eager style)."""
        try:
            text = textwrap.dedent(inspect.getsource(func))
        except (OSError, TypeError):
            return  # no source: only a factory can be called to see what it makes
        tree = ast.parse(text)
        fn = next((n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
        if fn is None:
            return
        params = [a.arg for a in fn.args.args]
        for stmt in fn.body:
            if isinstance(stmt, ast.AnnAssign) and stmt.value is None and isinstance(stmt.target, ast.Name):
                if stmt.target.id in params:
                    self.eager = True
                    self.tensors.append(stmt.target.id)
            elif isinstance(stmt, ast.Assign) and _attr_call(stmt.value) in ("const", "empty"):
                self.eager = True
                if _attr_call(stmt.value) == "const":
                    for t in stmt.targets:
                        elts = t.elts if isinstance(t, ast.Tuple) else [t]
                        self.consts.update(e.id for e in elts if isinstance(e, ast.Name))
        # In the signature's order (the kernel's parameter order).
        self.tensors = [p for p in params if p in self.tensors]


def _attr_call(node: Optional[ast.expr]) -> Optional[str]:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.attr
    return None


class JITImpl:
    """A function decorated with ``@jit``: a factory or an eager kernel (module docs)."""

    def __init__(
        self,
        func: Callable[..., Any],
        out_idx: OutIdx = None,
        target: Any = None,
        target_host: Any = None,
        execution_backend: Optional[str] = None,
        verbose: Optional[bool] = None,
        pass_configs: Optional[Dict[Any, Any]] = None,
        debug_root_path: Optional[str] = None,
        compile_flags: Any = None,
    ) -> None:
        self.func = func
        self.out_idx = out_idx
        self.target = target
        self.target_host = target_host
        self.execution_backend = execution_backend
        self.verbose = verbose
        self.pass_configs = pass_configs
        self.debug_root_path = debug_root_path
        self.compile_flags = compile_flags
        self.signature = inspect.signature(func)
        self._style = _Style(func)
        self.mode = "eager" if self._style.eager else "lazy"
        if self.mode == "eager" and out_idx is not None:
            raise ValueError(
                f"`{func.__name__}`: out_idx is for kernel factories; an eager kernel's "
                "outputs are its `T.empty` tensors"
            )
        self._kernels: Dict[Any, JITKernel] = {}
        self._prim_funcs: Dict[Any, PrimFunc] = {}
        # Eager calls seen before, by what decides their kernel (the Python values, the
        # tensors' shapes and dtypes): the kernel and where its tensors are in the call.
        self._calls: Dict[Any, Tuple[JITKernel, Tuple[Union[int, str], ...]]] = {}
        names = list(self.signature.parameters)
        self._names = names
        self._positions = {n: i for i, n in enumerate(names)}
        functools.update_wrapper(self, func)  # type: ignore[arg-type]

    # --- building -------------------------------------------------------------------

    def _compile_func(self, func: PrimFunc, dims: Dict[str, int]) -> JITKernel:
        kernel = _compile(
            func, dims, self.out_idx, self.execution_backend, self.target, self.target_host,
            self.verbose, self.pass_configs, self.compile_flags,
        )
        if self.debug_root_path:
            os.makedirs(self.debug_root_path, exist_ok=True)
            stem = os.path.join(self.debug_root_path, f"tlc_jit_kernel_{func.name}")
            with open(stem + ".ptx", "w", encoding="utf-8") as f:
                f.write(kernel.get_kernel_source())
            with open(stem + ".py", "w", encoding="utf-8") as f:
                f.write(func.source)
        return kernel

    def get_tir(self, *args: Any, **kwargs: Any) -> PrimFunc:
        """The kernel source (a ``tlc.language.PrimFunc``) these arguments make."""
        if self.mode == "lazy":
            made = self.func(*args, **kwargs)
            if not isinstance(made, PrimFunc):
                raise TypeError(
                    f"`{self.func.__name__}` returned {type(made).__name__}, not a "
                    "@T.prim_func kernel (a @tilelang.jit factory returns its kernel)"
                )
            return made
        _, values = self._bind(args, kwargs)
        return self._eager_prim_func(values)[1]

    def compile(self, *args: Any, **kwargs: Any) -> JITKernel:
        """The compiled kernel for these arguments (cached). For an eager kernel, tensors
        may be left out; ``T.const`` sizes are given by name (``M=1024``), read off the
        tensors given, or else stay symbolic dims."""
        if self.mode == "lazy":
            try:
                key: Any = _freeze((args, kwargs))
            except TypeError:
                return self._compile_func(self.get_tir(*args, **kwargs), {})
            kernel = self._kernels.get(key)
            if kernel is None:
                kernel = self._kernels[key] = self._compile_func(self.get_tir(*args, **kwargs), {})
            return kernel
        tensors, values = self._bind(args, kwargs)
        return self._eager_kernel(tensors, values)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """A factory: the compiled kernel. An eager kernel: compiled (or cached), launched
        on the tensors given, and what its body returns."""
        if self.mode == "lazy":
            return self.compile(*args, **kwargs)
        key = self._call_key(args, kwargs)
        seen = self._calls.get(key) if key is not None else None
        if seen is not None:
            # A call like an earlier one: its kernel, launched on this call's tensors.
            kernel, where = seen
            return kernel.kernel(*[args[w] if isinstance(w, int) else kwargs[w] for w in where])
        tensors, values = self._bind(args, kwargs)
        missing = [t for t in self._style.tensors if t not in tensors]
        if missing:
            raise TypeError(
                f"`{self.func.__name__}` needs the tensor(s) {missing} to launch; to compile "
                f"without launching, call `{self.func.__name__}.compile(...)`"
            )
        kernel = self._eager_kernel(tensors, values)
        if key is not None:
            if len(self._calls) >= _MAX_CALLS:
                self._calls.clear()
            where = tuple(
                self._positions[t] if self._positions[t] < len(args) else t for t in self._style.tensors
            )
            self._calls[key] = (kernel, where)
        return kernel(*(tensors[t] for t in self._style.tensors))

    def _call_key(self, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
        """What decides an eager call's kernel, cheaply: each tensor argument's shape and
        dtype, every other argument's value; ``None`` when a value is not hashable as it is
        (the call then takes the full path)."""
        tensors = self._style.tensors
        names = self._names
        parts: List[Any] = []
        try:
            for i, a in enumerate(args):
                if i < len(names) and names[i] in tensors:
                    parts.append((type(a), tuple(getattr(a, "shape", ())), getattr(a, "dtype", None)))
                else:
                    hash(a)
                    parts.append((type(a), a))
            for k in sorted(kwargs):
                a = kwargs[k]
                if k in tensors:
                    parts.append((k, type(a), tuple(getattr(a, "shape", ())), getattr(a, "dtype", None)))
                else:
                    hash(a)
                    parts.append((k, type(a), a))
        except TypeError:
            return None
        return tuple(parts)

    def get_kernel_source(self, *args: Any, **kwargs: Any) -> str:
        """The PTX these arguments compile to."""
        return self.compile(*args, **kwargs).get_kernel_source()

    def par_compile(
        self, configs: Sequence[Any], num_workers: Optional[int] = None, ignore_error: bool = False
    ) -> List[Optional[JITKernel]]:
        """Compiles each config (a dict of keyword arguments or a tuple of positional ones),
        one after the other; with ``ignore_error`` a config that fails is ``None`` and a
        warning."""
        out: List[Optional[JITKernel]] = []
        for cfg in configs:
            try:
                if isinstance(cfg, dict):
                    out.append(self.compile(**cfg))
                elif isinstance(cfg, tuple):
                    out.append(self.compile(*cfg))
                else:
                    raise TypeError(f"par_compile: a config is a dict or a tuple, not {cfg!r}")
            except Exception as e:
                if not ignore_error:
                    raise
                warnings.warn(f"par_compile: config {cfg!r} failed: {e}", stacklevel=2)
                out.append(None)
        return out

    # --- eager kernels --------------------------------------------------------------

    def _bind(self, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
        """(tensors, Python values) of a call of an eager kernel: the declared tensor
        parameters apart, every other argument (and ``T.const`` sizes by name) a value."""
        names = list(self.signature.parameters)
        if len(args) > len(names):
            raise TypeError(
                f"`{self.func.__name__}` takes at most {len(names)} arguments, {len(args)} given"
            )
        given: Dict[str, Any] = dict(zip(names, args))
        for k, v in kwargs.items():
            if k in given:
                raise TypeError(f"`{self.func.__name__}` got two values for `{k}`")
            if k not in self.signature.parameters and k not in self._style.consts:
                raise TypeError(
                    f"`{self.func.__name__}` has no parameter or T.const size `{k}`"
                )
            given[k] = v
        tensors = {k: v for k, v in given.items() if k in self._style.tensors}
        values = {k: v for k, v in given.items() if k not in self._style.tensors}
        for name, p in self.signature.parameters.items():
            if name not in given and name not in self._style.tensors and p.default is inspect.Parameter.empty:
                raise TypeError(f"`{self.func.__name__}` is missing the argument `{name}`")
        return tensors, values

    def _eager_prim_func(self, values: Dict[str, Any]) -> Tuple[Any, PrimFunc]:
        try:
            key: Any = _freeze(values)
        except TypeError:
            return None, eager(self.func, **values)
        made = self._prim_funcs.get(key)
        if made is None:
            made = self._prim_funcs[key] = eager(self.func, **values)
        return key, made

    def _eager_kernel(self, tensors: Dict[str, Any], values: Dict[str, Any]) -> JITKernel:
        key, func = self._eager_prim_func(values)
        dims = _const_sizes(func, tensors)
        if key is None:
            return self._compile_func(func, dims)
        full = (key, tuple(sorted(dims.items())))
        kernel = self._kernels.get(full)
        if kernel is None:
            kernel = self._kernels[full] = self._compile_func(func, dims)
        return kernel

    def __repr__(self) -> str:
        return f"<tlc.tilelang.jit {self.mode} {self.func.__name__}>"


def _const_sizes(func: PrimFunc, tensors: Dict[str, Any]) -> Dict[str, int]:
    """The eager kernel's ``T.const`` sizes read off the tensors' shapes (dims the
    declarations spell as a bare ``T.const`` name); ``ValueError`` when two tensors
    disagree on one."""
    sizes: Dict[str, int] = {}
    source: Dict[str, str] = {}
    for name, declared in func.shapes.items():
        t = tensors.get(name)
        if t is None or declared is None:
            continue
        actual = tuple(getattr(t, "shape", ()))
        if len(actual) != len(declared):
            continue  # the launch reports the rank, naming the parameter
        for d, n in zip(declared, actual):
            if isinstance(d, Symbolic) and d.name in func.consts:
                if d.name in sizes and sizes[d.name] != int(n):
                    raise ValueError(
                        f"`{d.name}` is {sizes[d.name]} from the shape of `{source[d.name]}` but "
                        f"{int(n)} from the shape of `{name}`"
                    )
                sizes[d.name], source[d.name] = int(n), name
    return sizes


def jit(
    func: Optional[Callable[..., Any]] = None,
    *,
    out_idx: OutIdx = None,
    target: Any = None,
    target_host: Any = None,
    execution_backend: Optional[str] = None,
    verbose: Optional[bool] = None,
    pass_configs: Optional[Dict[Any, Any]] = None,
    debug_root_path: Optional[str] = None,
    compile_flags: Any = None,
) -> Any:
    """TileLang's ``@tilelang.jit`` / ``@tilelang.jit(...)`` (module documentation)."""
    options = dict(
        out_idx=out_idx, target=target, target_host=target_host,
        execution_backend=execution_backend, verbose=verbose, pass_configs=pass_configs,
        debug_root_path=debug_root_path, compile_flags=compile_flags,
    )
    if func is not None:
        if isinstance(func, PrimFunc):
            raise TypeError("@jit decorates a function; compile a T.prim_func kernel with compile()")
        return JITImpl(func, **options)  # type: ignore[arg-type]
    return lambda f: JITImpl(f, **options)  # type: ignore[arg-type]
