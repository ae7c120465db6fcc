"""``do_bench``: the GPU time of a function, as TileLang's profiler measures it — an L2
flush (zeroing a 256 MiB buffer) before every timed run, warm-up and repeat counts from a
five-run estimate, and one of three timers:

- ``"event"``: a CUDA event pair around each run (the flush outside the pair);
- ``"cudagraph"``: the runs captured once into a CUDA graph of ``n_repeat`` calls, replayed
  ten times, each replay's events divided by ``n_repeat`` (no host launch cost in the time);
- ``"cupti"``: torch's profiler (CUPTI) summing the device time of every kernel the runs
  launched, the flushes excluded.

Times are milliseconds. torch is imported when ``do_bench`` runs."""

from __future__ import annotations

import os
import sys
from typing import Any, Callable, List, Optional, Sequence, Union

_FLUSH_LABEL = "tlc::l2_flush"


def do_bench(
    fn: Callable[[], Any],
    warmup: float = 25,
    rep: float = 100,
    _n_warmup: int = 0,
    _n_repeat: int = 0,
    quantiles: Optional[Sequence[float]] = None,
    fast_flush: bool = True,
    backend: str = "event",
    return_mode: str = "mean",
    device: Any = None,
    cache_size: int = 256,
    early_stop_baseline: Optional[float] = None,
) -> Union[float, List[float]]:
    """Milliseconds per call of ``fn`` (TileLang's ``tilelang.profiler.do_bench``).

    ``warmup`` / ``rep``: target milliseconds of warm-up and of timed runs, turned into
    counts with a five-run estimate; ``_n_warmup`` / ``_n_repeat`` (> 0) give the counts
    instead. ``backend``: ``"event"``, ``"cudagraph"`` or ``"cupti"`` (module docstring).
    ``return_mode``: ``"mean"``, ``"median"``, ``"min"`` or ``"max"`` of the runs, or the
    ``quantiles`` asked for (a list; one value alone when one is asked). ``device``: the CUDA
    device to time on (default: the current one). ``cache_size``: MiB zeroed to flush L2.
    ``early_stop_baseline``: when the estimate already exceeds it (ms), the estimate is
    returned without timing further."""
    if return_mode not in ("mean", "median", "min", "max"):
        raise ValueError(f"do_bench: return_mode is mean, median, min or max, not {return_mode!r}")
    if backend not in ("event", "cudagraph", "cupti"):
        raise ValueError(f"do_bench: backend is event, cudagraph or cupti, not {backend!r}")
    import torch  # type: ignore[import-not-found, unused-ignore]

    index = _device_index(torch, device)
    with torch.cuda.device(index):
        fn()
        torch.cuda.synchronize(index)
        numel = cache_size * 1024 * 1024 // (4 if fast_flush else 1)
        cache = torch.empty(numel, dtype=torch.int32 if fast_flush else torch.int8, device=f"cuda:{index}")
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(5):
            cache.zero_()
            fn()
        end.record()
        end.synchronize()
        estimate = max(start.elapsed_time(end) / 5, 1e-6)
        if early_stop_baseline is not None and estimate > early_stop_baseline:
            return [estimate] * len(quantiles) if quantiles is not None else estimate
        n_warmup = _n_warmup if _n_warmup > 0 else max(1, int(warmup / estimate))
        n_repeat = _n_repeat if _n_repeat > 0 else max(1, int(rep / estimate))
        for _ in range(n_warmup):
            fn()
        if backend == "cupti":
            return _cupti(torch, fn, cache, n_repeat)
        if backend == "cudagraph":
            times = _cudagraph(torch, fn, cache, n_repeat, index)
        else:
            times = _events(torch, fn, cache, n_repeat, index)
        return _summary(torch, times, quantiles, return_mode)


def _device_index(torch: Any, device: Any) -> int:
    if device is None:
        return int(torch.cuda.current_device())
    if isinstance(device, int) and not isinstance(device, bool):
        return device
    d = torch.device(device)
    if d.type != "cuda":
        raise ValueError(f"do_bench: device must be a CUDA device, not {d}")
    return int(torch.cuda.current_device() if d.index is None else d.index)


def _events(torch: Any, fn: Callable[[], Any], cache: Any, n: int, index: int) -> List[float]:
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    for s, e in zip(starts, ends):
        cache.zero_()
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize(index)
    return [s.elapsed_time(e) for s, e in zip(starts, ends)]


def _cudagraph(torch: Any, fn: Callable[[], Any], cache: Any, n: int, index: int) -> List[float]:
    # fn ran before (the estimate): its kernels are loaded, so capture records launches only.
    replays = 10
    stream = torch.cuda.Stream(device=index)
    with torch.cuda.stream(stream):
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            for _ in range(n):
                fn()
        torch.cuda.synchronize(index)
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(replays)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(replays)]
        for s, e in zip(starts, ends):
            cache.zero_()
            s.record()
            graph.replay()
            e.record()
        torch.cuda.synchronize(index)
    return [s.elapsed_time(e) / n for s, e in zip(starts, ends)]


def _cupti(torch: Any, fn: Callable[[], Any], cache: Any, n: int) -> float:
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    schedule = torch.profiler.schedule(wait=1, warmup=0, active=1, repeat=1)
    with _Quiet():
        with torch.profiler.profile(activities=activities, schedule=schedule) as prof:
            for _ in range(2):
                for _ in range(n):
                    with torch.profiler.record_function(_FLUSH_LABEL):
                        cache.zero_()
                    fn()
                prof.step()
    total = flush = 0.0
    for event in prof.events():
        if getattr(getattr(event, "device_type", None), "name", "") != "CUDA":
            continue
        if not event.is_user_annotation:
            total += event.self_device_time_total
        elif event.key == _FLUSH_LABEL:
            flush += event.self_device_time_total
    return (total - flush) / n * 1e-3  # µs to ms


def _summary(torch: Any, times: List[float], quantiles: Optional[Sequence[float]], mode: str) -> Union[float, List[float]]:
    t = torch.tensor(times, dtype=torch.float)
    if quantiles is not None:
        values = torch.quantile(t, torch.tensor(list(quantiles), dtype=torch.float)).tolist()
        return values[0] if len(values) == 1 else values
    return float(getattr(torch, mode)(t).item())


class _Quiet:
    """Silences the profiler's own printing (stdout and stderr, file descriptors too)."""

    def __enter__(self) -> "_Quiet":
        sys.stdout.flush()
        sys.stderr.flush()
        self._null = os.open(os.devnull, os.O_WRONLY)
        self._saved = [os.dup(1), os.dup(2)]
        os.dup2(self._null, 1)
        os.dup2(self._null, 2)
        return self

    def __exit__(self, *_: Any) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(self._saved[0], 1)
        os.dup2(self._saved[1], 2)
        for fd in (*self._saved, self._null):
            os.close(fd)
