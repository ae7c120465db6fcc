"""Seed 000 benchmark: the blog post's matmul.py with tlc in place of TileLang.

    python python/bench/seed000.py [--quick] [--no-triton] [--out FILE.md]

Needs a CUDA GPU, torch and the tlc package (``pip install ./python``); Triton is optional
(its column is skipped with a note when it is not importable, or with --no-triton).

The kernels are the seed's own factories (``gemm_source.py``: ``@T.prim_func`` with
``import tlc.language as T``), compiled with ``tlc.compile(..., out_idx=-1)``.

1. ``test()``: compiles the seed kernel at M, N, K = 4096, 2048, 1024 with ``out_idx=-1``,
   calls it on ``torch.rand`` float16 tensors, prints the max difference to
   ``torch.matmul`` and exits 1 unless they are allclose (rtol = atol = 1e-2).
2. The sweep: M = N = K = 1024 * i for i in 12..20 (--quick: the first two), providers
   ``torch`` (torch.matmul), ``tlc_ps_-10`` (the kernel without ``T.use_swizzle``),
   ``tlc_ps_0``, ``tlc_ps_10``, ``tlc_ps_20`` (panel_size 0, 10, 20) and ``triton`` (a
   fixed-config Triton kernel, ``triton_matmul.py``), each timed with
   ``triton.testing.do_bench`` (CUDA-event median without Triton); TFLOP/s = 2MNK / time.
   Each tlc kernel is compiled for its shape (as the seed does) and dropped, with its
   tensors, after the shape. Every provider's result is checked against torch.matmul.
3. Memory: GPU memory in use (``torch.cuda.mem_get_info``, after ``empty_cache``) before
   and after the sweep, and the process's RSS and peak RSS. Exits 1 if the GPU memory in
   use grew by more than 64 MiB (the seed's TileLang version leaked) or a result was wrong.

Prints one line per measurement, then a markdown report (TFLOP/s per shape and provider,
each provider's ratio to torch, the memory numbers), also written to --out when given.
"""

import argparse
import gc
import resource
import statistics
import time

import torch

import tlc
from common import fail, load_triton, publish, versions
from gemm_source import SEED_BLOCK, kernel_source

TEST_SHAPE = (4096, 2048, 1024)
SWEEP = [1024 * i for i in range(12, 21)]
PANEL_SIZES = [-10, 0, 10, 20]  # -10: no T.use_swizzle line (the seed's "no L2 opt")
RTOL = ATOL = 1e-2  # f32 accumulation on both sides; f16 rounding of the output dominates
LEAK_LIMIT = 64 << 20  # bytes of GPU memory the sweep may leave behind
MiB = 1 << 20


def bench_function():
    """``triton.testing.do_bench`` (default warmup/rep, as the seed) when Triton is there,
    else a median of 100 CUDA-event timings; both return milliseconds."""
    try:
        from triton.testing import do_bench

        return do_bench
    except ImportError:
        pass

    def cuda_event_median(fn, runs=100):
        fn()
        times = []
        for _ in range(runs):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        return statistics.median(times)

    return cuda_event_median


def compile_seed(M, N, K, panel_size):
    """The seed kernel for one shape, compiled for GPU 0, returning C (``out_idx=-1``)."""
    return tlc.compile(kernel_source(M, N, K, *SEED_BLOCK, panel_size), out_idx=-1)


def rand_inputs(M, N, K):
    a = torch.rand([M, K], device="cuda", dtype=torch.float16)
    b = torch.rand([K, N], device="cuda", dtype=torch.float16)
    return a, b


def max_diff(c, ref):
    return (c.float() - ref.float()).abs().max().item()


def same_result(c, ref):
    """Whether ``c`` is a tensor like ``ref`` and allclose to it."""
    return (
        isinstance(c, torch.Tensor)
        and c.shape == ref.shape
        and c.dtype == ref.dtype
        and torch.allclose(c, ref, rtol=RTOL, atol=ATOL)
    )


def test():
    """The seed's test(): the kernel at 4096 x 2048 x 1024 against torch.matmul."""
    M, N, K = TEST_SHAPE
    kernel = compile_seed(M, N, K, panel_size=10)
    print(f"compiled {kernel!r} for M, N, K = {M}, {N}, {K}")
    a, b = rand_inputs(M, N, K)
    ref = torch.matmul(a, b)
    c = kernel(a, b)
    torch.cuda.synchronize()
    if not isinstance(c, torch.Tensor) or c.shape != ref.shape or c.dtype != ref.dtype:
        fail(f"k(a, b) with out_idx=-1 returned {type(c).__name__} "
             f"{getattr(c, 'shape', '')} {getattr(c, 'dtype', '')}, expected a "
             f"{tuple(ref.shape)} {ref.dtype} tensor")
    print(f"Maxdiff is {max_diff(c, ref)}")
    if not same_result(c, ref):
        fail(f"tlc result differs from torch.matmul beyond rtol={RTOL}, atol={ATOL}")
    print("ok: tlc matches torch.matmul")


def make_provider(name, a, b, triton_mod):
    """A no-argument callable computing A @ B with ``name``'s implementation. tlc kernels
    are compiled here, for this shape; the callable holds the only reference to them."""
    M, K = a.shape
    N = b.shape[1]
    if name == "torch":
        return lambda: torch.matmul(a, b)
    if name == "triton":
        return lambda: triton_mod.matmul(a, b)
    panel_size = int(name[len("tlc_ps_"):])
    kernel = compile_seed(M, N, K, panel_size)
    return lambda: kernel(a, b)


def providers(triton_mod):
    names = ["torch"] + [f"tlc_ps_{p}" for p in PANEL_SIZES]
    return names + (["triton"] if triton_mod is not None else [])


def tflops(M, N, K, ms):
    return 2 * M * N * K * 1e-12 / (ms * 1e-3)


def bench_shape(size, names, triton_mod, do_bench, wrong):
    """TFLOP/s of each provider at M = N = K = size. Everything allocated or compiled for
    the shape is dropped before returning. Wrong results are appended to ``wrong``."""
    M = N = K = size
    a, b = rand_inputs(M, N, K)
    ref = torch.matmul(a, b)
    row = {}
    for name in names:
        t0 = time.perf_counter()
        fn = make_provider(name, a, b, triton_mod)
        setup_s = time.perf_counter() - t0
        c = fn()
        torch.cuda.synchronize()
        if not same_result(c, ref):
            wrong.append(f"{name} at {size}: max |diff| {max_diff(c, ref)}")
        del c
        row[name] = tflops(M, N, K, do_bench(fn))
        print(f"  {size:>6} {name:<11} {row[name]:8.2f} TFLOP/s   (setup {setup_s:.2f} s)",
              flush=True)
        del fn
        gc.collect()
        torch.cuda.empty_cache()
    del a, b, ref
    gc.collect()
    torch.cuda.empty_cache()
    return row


def warm_up(names, triton_mod):
    """Runs every provider once at a small shape, so one-time costs (cuBLAS workspace,
    Triton's JIT, the tlc runtime's first load) land before the memory baseline."""
    a, b = rand_inputs(1024, 1024, 1024)
    for name in names:
        fn = make_provider(name, a, b, triton_mod)
        fn()
        del fn
    torch.cuda.synchronize()


def memory_snapshot():
    """GPU bytes in use on this device (all of them, not only torch's) after emptying
    torch's cache, torch's own reserved bytes, current and peak RSS of this process."""
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    free, total = torch.cuda.mem_get_info()
    with open("/proc/self/statm") as f:
        rss = int(f.read().split()[1]) * resource.getpagesize()
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    return {
        "gpu_used": total - free,
        "torch_reserved": torch.cuda.memory_reserved(),
        "rss": rss,
        "peak_rss": peak_rss,
    }


def markdown_report(rows, names, before, after, notes):
    lines = [f"# Seed 000 matmul, float16, TFLOP/s ({versions(torch)})", ""]
    lines += ["| M=N=K | " + " | ".join(names) + " |", "|---:|" + "---:|" * len(names)]
    for size, row in rows.items():
        lines.append(f"| {size} | " + " | ".join(f"{row[n]:.1f}" for n in names) + " |")
    others = [n for n in names if n != "torch"]
    lines += ["", "Ratio to torch:", ""]
    lines += ["| M=N=K | " + " | ".join(others) + " |", "|---:|" + "---:|" * len(others)]
    for size, row in rows.items():
        lines.append(f"| {size} | " + " | ".join(f"{row[n] / row['torch']:.2f}" for n in others)
                     + " |")
    lines += ["", "Memory (GPU in use after `torch.cuda.empty_cache()`; host RSS):", ""]
    lines += ["| | before sweep | after sweep | change |", "|---|---:|---:|---:|"]
    for key, label in [("gpu_used", "GPU in use"), ("torch_reserved", "torch reserved"),
                       ("rss", "RSS"), ("peak_rss", "peak RSS")]:
        b, a = before[key] / MiB, after[key] / MiB
        lines.append(f"| {label} | {b:.1f} MiB | {a:.1f} MiB | {a - b:+.1f} MiB |")
    lines += [""] + [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="only the first two shapes")
    p.add_argument("--no-triton", action="store_true", help="skip the Triton column")
    p.add_argument("--out", help="also write the markdown report to this file")
    args = p.parse_args()

    if not torch.cuda.is_available():
        fail("torch sees no CUDA GPU")
    torch.manual_seed(3407)  # the seed's
    triton_mod, note = load_triton(not args.no_triton, "column")
    notes = [note] if note else []
    if note:
        print(note)

    test()
    names = providers(triton_mod)
    do_bench = bench_function()
    warm_up(names, triton_mod)
    before = memory_snapshot()

    sizes = SWEEP[:2] if args.quick else SWEEP
    wrong = []
    rows = {}
    print("matmul-tflops:")
    for size in sizes:
        rows[size] = bench_shape(size, names, triton_mod, do_bench, wrong)

    after = memory_snapshot()
    grew = after["gpu_used"] - before["gpu_used"]
    notes.append(f"GPU memory in use grew by {grew / MiB:+.1f} MiB over {len(sizes)} shapes "
                 f"(limit {LEAK_LIMIT // MiB} MiB)")
    notes += [f"WRONG RESULT: {w}" for w in wrong]
    report = markdown_report(rows, names, before, after, notes)
    publish(report, args.out)

    if wrong:
        fail(f"{len(wrong)} result(s) differ from torch.matmul")
    if grew > LEAK_LIMIT:
        fail(f"GPU memory in use grew by {grew / MiB:.1f} MiB (> {LEAK_LIMIT // MiB} MiB)")
    print("seed000: all passed")


if __name__ == "__main__":
    main()
