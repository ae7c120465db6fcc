"""TileLang's autotuner on tlc: ``@autotune(configs=...)`` over a ``@jit`` function, and
``AutoTuner.from_kernel(kernel=..., configs=...).set_compile_args(...).set_profile_args(...)
.run(warmup=..., rep=...)``.

Each config (a dict of the function's keyword arguments) is compiled by tlc; a config tlc
refuses is skipped with a warning naming it. On a GPU each compiled kernel runs on inputs
the profiler makes (``supply_type``, or ``supply_prog(params)``), is checked against
``ref_prog`` (unless ``skip_check``; ``manual_check_prog`` instead of the comparison) —
a config that fails the check is skipped with a warning — and is timed with the profiler's
``do_bench`` (``warmup`` / ``rep`` ms, ``backend``); the fastest wins, and ``ref_prog`` is
timed once on the same inputs. This is TileLang's procedure; tlc's own ``tlc.tune`` /
``tlc.autotune`` (tunables of the kernel, timed natively and stored in the tuning cache)
remain the way to tune a kernel written with ``T.tunable``.

Without a GPU (no CUDA driver, or torch without CUDA) nothing is timed: a warning says so
and the first config tlc compiles is the result, its ``latency`` ``None`` (as
``tlc.autotune`` takes the plan's first config).
"""

from __future__ import annotations

import functools
import signal
import threading
import warnings
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ... import driver_available
from ..jit import JITImpl, _freeze
from ..jit import compile as _compile
from ..kernel import JITKernel
from ..utils.tensor import TensorSupplyType

__all__ = ["AutoTuner", "AutotuneResult", "autotune"]


class AutotuneResult:
    """The autotuner's answer: the best ``config``, its ``kernel`` and ``latency`` (ms),
    the reference program's ``ref_latency``, the kernel source (``func``) and its PTX
    (``libcode``)."""

    def __init__(
        self,
        latency: Optional[float],
        config: Optional[Dict[str, Any]],
        ref_latency: Optional[float],
        kernel: JITKernel,
    ) -> None:
        self.latency = latency
        self.config = config
        self.ref_latency = ref_latency
        self.kernel = kernel
        self.func = kernel.prim_func
        self.libcode = kernel.get_kernel_source()

    def __repr__(self) -> str:
        return f"AutotuneResult(latency={self.latency}, config={self.config}, ref_latency={self.ref_latency})"


def _gpu_present() -> bool:
    if not driver_available():
        return False
    try:
        import torch  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


class _Timeout(Exception):
    pass


def _with_timeout(seconds: Optional[float], fn: Callable[[], Any]) -> Any:
    """``fn()``, interrupted with ``_Timeout`` after ``seconds`` when Python can be (the
    main thread, a platform with ``SIGALRM``; a call blocked in CUDA is interrupted when it
    returns); otherwise without a limit."""
    usable = (
        seconds is not None and seconds > 0 and hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
    )
    if not usable:
        return fn()

    def expire(*_: Any) -> None:
        raise _Timeout()

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, float(seconds))  # type: ignore[arg-type]
    try:
        return fn()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class AutoTuner:
    """Tunes a kernel function over ``configs`` (module documentation).

    ``fn``: a factory returning a ``T.prim_func`` kernel for a config's keyword arguments,
    or a ``@jit`` function."""

    def __init__(self, fn: Callable[..., Any], configs: Any) -> None:
        self.fn = fn
        self.configs = configs
        self.compile_args: Dict[str, Any] = {}
        self.profile_args: Dict[str, Any] = dict(
            supply_type=TensorSupplyType.Auto, ref_prog=None, supply_prog=None, rtol=1e-2,
            atol=1e-2, max_mismatched_ratio=0.01, skip_check=False, manual_check_prog=None,
            cache_input_tensors=False, backend="event", warmup=25, rep=100, timeout=30,
        )
        self._call: Tuple[Tuple[Any, ...], Dict[str, Any]] = ((), {})
        self.skipped: List[Tuple[Dict[str, Any], str]] = []
        """The configs the last run skipped, each with why (its error)."""

    @classmethod
    def from_kernel(cls, kernel: Callable[..., Any], configs: Any) -> "AutoTuner":
        return cls(kernel, configs)

    def set_compile_args(
        self,
        out_idx: Any = None,
        target: Any = None,
        execution_backend: Optional[str] = None,
        target_host: Any = None,
        verbose: Optional[bool] = None,
        pass_configs: Optional[Dict[Any, Any]] = None,
    ) -> "AutoTuner":
        """How each config is compiled (``tilelang.compile``'s options)."""
        self.compile_args = dict(
            out_idx=out_idx, target=target, execution_backend=execution_backend,
            target_host=target_host, verbose=verbose, pass_configs=pass_configs,
        )
        return self

    def set_profile_args(
        self,
        warmup: int = 25,
        rep: int = 100,
        timeout: int = 30,
        supply_type: TensorSupplyType = TensorSupplyType.Auto,
        ref_prog: Optional[Callable[..., Any]] = None,
        supply_prog: Optional[Callable[..., Any]] = None,
        rtol: float = 1e-2,
        atol: float = 1e-2,
        max_mismatched_ratio: float = 0.01,
        skip_check: bool = False,
        manual_check_prog: Optional[Callable[..., Any]] = None,
        cache_input_tensors: bool = False,
        backend: str = "event",
    ) -> "AutoTuner":
        """How each compiled config is checked and timed."""
        self.profile_args = dict(
            warmup=warmup, rep=rep, timeout=timeout, supply_type=supply_type, ref_prog=ref_prog,
            supply_prog=supply_prog, rtol=rtol, atol=atol,
            max_mismatched_ratio=max_mismatched_ratio, skip_check=skip_check,
            manual_check_prog=manual_check_prog, cache_input_tensors=cache_input_tensors,
            backend=backend,
        )
        return self

    def _configs(self) -> List[Dict[str, Any]]:
        configs = self.configs
        if callable(configs):
            args, kwargs = self._call
            configs = configs(*args, **kwargs)
        configs = list(configs)
        if not configs or not all(isinstance(c, dict) for c in configs):
            raise ValueError("autotune: configs must be a non-empty list of dicts (or a function making one)")
        return configs

    def _build(self, config: Dict[str, Any]) -> JITKernel:
        args, kwargs = self._call
        if isinstance(self.fn, JITImpl):
            return self.fn.compile(*args, **{**kwargs, **config})
        made = self.fn(*args, **{**kwargs, **config})
        return _compile(made, **self.compile_args)

    def run(
        self,
        warmup: int = 25,
        rep: int = 100,
        timeout: int = 180,
        use_pipeline: bool = False,
        enable_grouped_compile: bool = False,
        group_compile_size: int = 2,
        benchmark_devices: Optional[List[int]] = None,
        benchmark_multi_gpu: bool = False,
        early_stop: bool = False,
        early_stop_factor: float = 2.0,
    ) -> AutotuneResult:
        """Compiles, checks and times every config; returns the fastest (module docs).
        TileLang's scheduling options (``use_pipeline``, ``enable_grouped_compile``,
        ``group_compile_size``, ``benchmark_devices``, ``benchmark_multi_gpu``,
        ``early_stop``, ``early_stop_factor``) only schedule the same measurements: here
        configs are compiled and timed one after the other on the current GPU."""
        configs = self._configs()
        self.skipped = []
        if not _gpu_present():
            return self._first_compiled(configs)
        p = self.profile_args
        best: Optional[Tuple[float, Dict[str, Any], JITKernel]] = None
        inputs: Dict[Any, List[Any]] = {}
        ref_latency: Optional[float] = None
        for config in configs:
            try:
                kernel = _with_timeout(timeout, functools.partial(self._build, config))
            except _Timeout:
                self._skip(config, f"took over {timeout} s to compile")
                continue
            except Exception as e:
                self._skip(config, f"does not compile: {e}")
                continue
            profiler = kernel.get_profiler(p["supply_type"])
            params = profiler._get_params()
            key = tuple((q.dtype, q.shape) for q in params)
            ins = inputs.get(key)
            if ins is None:
                ins = list(p["supply_prog"](params)) if p["supply_prog"] else profiler._get_inputs()
                inputs[key] = ins

            def measure() -> float:
                if p["ref_prog"] is not None and not p["skip_check"]:
                    if p["manual_check_prog"] is not None:
                        profiler.manual_assert_close(p["ref_prog"], ins, p["manual_check_prog"])
                    else:
                        profiler.assert_allclose(
                            p["ref_prog"], ins, atol=p["atol"], rtol=p["rtol"],
                            max_mismatched_ratio=p["max_mismatched_ratio"],
                        )
                return float(profiler.do_bench(warmup=warmup, rep=rep, input_tensors=ins, backend=p["backend"]))

            try:
                latency = _with_timeout(timeout, measure)
            except _Timeout:
                self._skip(config, f"took over {timeout} s to check and time")
                continue
            except AssertionError as e:
                self._skip(config, f"differs from the reference: {e}")
                continue
            if ref_latency is None and p["ref_prog"] is not None:
                ref_latency = float(profiler.do_bench(p["ref_prog"], warmup=warmup, rep=rep, input_tensors=ins, backend=p["backend"]))
            if best is None or latency < best[0]:
                best = (latency, config, kernel)
        if best is None:
            raise RuntimeError("autotune: no config compiled and passed its check")
        latency, config, kernel = best
        kernel.update_tuner_result(latency, config, ref_latency)
        return AutotuneResult(latency, dict(config), ref_latency, kernel)

    def _skip(self, config: Dict[str, Any], why: str) -> None:
        self.skipped.append((dict(config), why))
        warnings.warn(f"autotune: config {config} {why}; skipped", stacklevel=3)

    def _first_compiled(self, configs: Sequence[Dict[str, Any]]) -> AutotuneResult:
        warnings.warn(
            "tlc.tilelang.autotune: no GPU, nothing timed: the kernel is the first config tlc "
            "compiles",
            stacklevel=3,
        )
        errors = []
        for config in configs:
            try:
                kernel = self._build(config)
            except Exception as e:
                errors.append(f"{config}: {e}")
                self.skipped.append((dict(config), f"does not compile: {e}"))
                continue
            kernel.config = dict(config)
            return AutotuneResult(None, dict(config), None, kernel)
        raise RuntimeError("autotune: no config compiles:\n" + "\n".join(errors))

    def __call__(self) -> AutotuneResult:
        return self.run()


class AutoTuneImpl:
    """A ``@jit`` function under ``@autotune``: calling it with the config's arguments
    left out tunes them (once per distinct other arguments) and gives the best kernel —
    launched on the tensors given for an eager kernel; with them given, no tuning."""

    def __init__(self, jit_impl: JITImpl, configs: Any, warmup: int, rep: int, timeout: int, profile: Dict[str, Any]) -> None:
        self.jit_impl = jit_impl
        self.configs = configs
        self.warmup, self.rep, self.timeout = warmup, rep, timeout
        self.profile = profile
        self._tuned: Dict[Any, Tuple[JITKernel, Dict[str, Any]]] = {}
        # The configs' keys, when the configs are a list (a function of the call's
        # arguments makes them per call).
        self._keys: Optional[List[str]] = None
        if not callable(configs) and configs:
            first = list(configs)[0]
            if isinstance(first, dict):
                self._keys = list(first)
        functools.update_wrapper(self, jit_impl.func)  # type: ignore[arg-type]

    def _config_keys(self, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> List[str]:
        if self._keys is not None:
            return self._keys
        return list(self._tuner(args, kwargs)._configs()[0])

    def _tuner(self, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> AutoTuner:
        tuner = AutoTuner(self.jit_impl, self.configs).set_profile_args(
            warmup=self.warmup, rep=self.rep, timeout=self.timeout, **self.profile
        )
        tuner._call = (args, kwargs)
        return tuner

    def _given(self, args: Tuple[Any, ...], kwargs: Dict[str, Any], keys: Sequence[str]) -> bool:
        names = list(self.jit_impl.signature.parameters)
        return any(k in kwargs or (k in names and names.index(k) < len(args)) for k in keys)

    def _best(self, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Tuple[JITKernel, Dict[str, Any]]:
        tuner = self._tuner(args, kwargs)
        configs = tuner._configs()
        tensors, values = (
            self.jit_impl._bind(args, kwargs) if self.jit_impl.mode == "eager" else ({}, None)
        )
        try:
            key: Any = _freeze((values if values is not None else (args, kwargs),
                               tuple((k, tuple(getattr(t, "shape", ()))) for k, t in sorted(tensors.items()))))
        except TypeError:
            key = None
        found = self._tuned.get(key) if key is not None else None
        if found is None:
            tuner.configs = configs
            result = tuner.run(self.warmup, self.rep, self.timeout)
            found = (result.kernel, result.config or {})
            if key is not None:
                self._tuned[key] = found
        return found

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._given(args, kwargs, self._config_keys(args, kwargs)):
            return self.jit_impl(*args, **kwargs)
        kernel, config = self._best(args, kwargs)
        if self.jit_impl.mode == "lazy":
            return kernel
        tensors, _ = self.jit_impl._bind(args, {**kwargs, **config})
        return kernel(*(tensors[t] for t in self.jit_impl._style.tensors))

    def compile(self, *args: Any, **kwargs: Any) -> JITKernel:
        """The kernel for these arguments: tuned when the config's arguments are left out."""
        if self._given(args, kwargs, self._config_keys(args, kwargs)):
            return self.jit_impl.compile(*args, **kwargs)
        return self._best(args, kwargs)[0]


def autotune(
    func: Optional[Callable[..., Any]] = None,
    *,
    configs: Any = None,
    warmup: int = 25,
    rep: int = 100,
    timeout: int = 100,
    supply_type: TensorSupplyType = TensorSupplyType.Auto,
    ref_prog: Optional[Callable[..., Any]] = None,
    supply_prog: Optional[Callable[..., Any]] = None,
    rtol: float = 1e-2,
    atol: float = 1e-2,
    max_mismatched_ratio: float = 0.01,
    skip_check: bool = False,
    manual_check_prog: Optional[Callable[..., Any]] = None,
    cache_input_tensors: bool = False,
    do_not_specialize: Optional[Sequence[str]] = None,
    early_stop: bool = False,
    early_stop_factor: float = 2.0,
) -> Callable[[JITImpl], AutoTuneImpl]:
    """TileLang's ``@tilelang.autotune(configs=...)`` over a ``@tilelang.jit`` function
    (module documentation). ``configs``: a list of dicts of the function's keyword
    arguments, or a function of the call's arguments making one. ``early_stop`` /
    ``early_stop_factor`` only save time in TileLang and change no result: accepted, not
    used; ``do_not_specialize`` (arguments that would not start a new tune) is refused."""
    if do_not_specialize:
        raise ValueError(
            "autotune: do_not_specialize is not supported by tlc: every distinct argument "
            "value is tuned on its own"
        )
    if func is not None:
        raise ValueError("autotune takes its configs: write @autotune(configs=[...])")
    if configs is None:
        raise ValueError("autotune: configs are required")
    profile = dict(
        supply_type=supply_type, ref_prog=ref_prog, supply_prog=supply_prog, rtol=rtol,
        atol=atol, max_mismatched_ratio=max_mismatched_ratio, skip_check=skip_check,
        manual_check_prog=manual_check_prog, cache_input_tensors=cache_input_tensors,
    )

    def decorate(impl: JITImpl) -> AutoTuneImpl:
        if not isinstance(impl, JITImpl):
            raise TypeError("@autotune decorates a @tilelang.jit function: put @tilelang.jit below it")
        return AutoTuneImpl(impl, configs, warmup, rep, timeout, profile)

    return decorate
