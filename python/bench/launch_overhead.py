"""Launch overhead of a tiny GEMM from Python: tlc (its Kernel, TileLang's layer over it,
a CUDA graph of its launches) against torch and Triton, in one process.

    python python/bench/launch_overhead.py [--calls 2000] [--no-triton] [--out FILE.md]

Needs a CUDA GPU, torch and the tlc package; Triton is optional (its row is skipped with a
note when it is not importable, or with --no-triton).

The GEMM is the seed 000 kernel (``gemm_source.py``) at M, N, K = 128, 128, 32: one
128x128 tile of float16 C, one block, one step of K. The calls timed:

- ``tlc k(a, b, c)``: the kernel compiled without ``out_idx``, C given;
- ``tlc k(a, b)``: compiled with ``out_idx=-1``, C allocated by the call and returned;
- ``tilelang kernel(a, b)``: the same kernel through ``tlc.tilelang.compile`` (a
  ``JITKernel``, what TileLang's scripts call);
- ``tilelang eager gemm(a, b)``: an eager ``@tilelang.jit`` GEMM (``T.const`` sizes,
  ``T.empty`` output) called with the tensors: its kernel found per call, then launched;
- ``tlc k(a, b, c) in a CUDA graph``: the in-place launch captured ``GRAPH_CALLS`` times
  in a ``torch.cuda.graph`` (which a warm launch allows: no host sync, no allocation
  outside torch's allocator), replays timed per launch;
- ``torch.matmul(a, b)``, ``torch.matmul(a, b, out=c)`` and ``torch.add(a, a)``;
- ``triton kernel[grid](...)``: a Triton matmul's JIT launch, arguments prepared once.

Each result (tlc's, TileLang's layer's, the graph's, Triton's) is checked against
torch.matmul once first (exit 1 if one differs). Each call is then warmed up and timed two
ways: **per call**, ``time.perf_counter`` around each of --calls host-side calls (a
synchronize every 100 calls, outside the timed region, keeps the launch queue from
filling), reported as the median and 90th percentile in µs; and **throughput**, --calls
calls back to back then one synchronize, total / calls in µs (the larger of host launch
cost and GPU time per call). Prints a markdown table, also written to --out when given.
"""

import argparse
import statistics
import time

import torch

import tlc
import tlc.tilelang as tilelang
import tlc.tilelang.language as T
from common import fail, load_triton, publish, versions
from gemm_source import SEED_BLOCK, kernel_source

SHAPE = (128, 128, 32)  # M, N, K: one tile of the seed kernel
SYNC_EVERY = 100
WARMUP = 100
GRAPH_CALLS = 100  # launches captured in one CUDA graph


@tilelang.jit
def eager_gemm(A, B, block_M=128, block_N=128, block_K=32):
    """The seed's tiles in TileLang's eager form (sizes read off the tensors)."""
    M, N, K = T.const("M, N, K")
    A: T.Tensor((M, K), T.float16)
    B: T.Tensor((K, N), T.float16)
    C = T.empty((M, N), T.float16)
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
        A_shared = T.alloc_shared((block_M, block_K), T.float16)
        B_shared = T.alloc_shared((block_K, block_N), T.float16)
        C_local = T.alloc_fragment((block_M, block_N), T.float32)
        T.clear(C_local)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
            T.copy(A[by * block_M, k * block_K], A_shared)
            T.copy(B[k * block_K, bx * block_N], B_shared)
            T.gemm(A_shared, B_shared, C_local)
        T.copy(C_local, C[by * block_M, bx * block_N])
    return C


def graph_of(launch, c):
    """A replay callable of a CUDA graph of ``GRAPH_CALLS`` launches (warmed up on a side
    stream first, as torch asks), and a checkable run that zeroes ``c`` and replays."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            launch()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(GRAPH_CALLS):
            launch()

    def checked():
        c.zero_()
        graph.replay()
        return c

    return graph.replay, checked


def check(what, run, ref):
    """``run()``'s result against torch.matmul's ``ref`` (rtol = atol = 1e-2); exits 1 if
    it is not a tensor like ``ref`` or not close to it."""
    got = run()
    torch.cuda.synchronize()
    if not isinstance(got, torch.Tensor) or got.shape != ref.shape or got.dtype != ref.dtype:
        fail(f"{what}: expected a {tuple(ref.shape)} {ref.dtype} tensor, found "
             f"{type(got).__name__} {getattr(got, 'shape', '')} {getattr(got, 'dtype', '')}")
    diff = (got.float() - ref.float()).abs().max().item()
    if not torch.allclose(got, ref, rtol=1e-2, atol=1e-2):
        fail(f"{what} differs from torch.matmul (max |diff| {diff})")
    print(f"ok: {what} matches torch.matmul (max |diff| {diff})")


def run_into(c, launch):
    """A callable that zeroes ``c``, launches (writing ``c`` in place) and returns ``c``."""

    def run():
        c.zero_()
        launch()
        return c

    return run


def calls_to_time(a, b, c, triton_mod):
    """(label, no-argument callable) for every call measured."""
    M, K = a.shape
    N = b.shape[1]
    source = kernel_source(M, N, K, *SEED_BLOCK, panel_size=10)
    kernel_inplace = tlc.compile(source)
    kernel_alloc = tlc.compile(source, out_idx=-1)
    ref = torch.matmul(a, b)
    check("tlc k(a, b, c)", run_into(c, lambda: kernel_inplace(a, b, c)), ref)
    check("tlc k(a, b) with out_idx=-1", lambda: kernel_alloc(a, b), ref)
    calls = [
        ("tlc k(a, b, c)", lambda: kernel_inplace(a, b, c)),
        ("tlc k(a, b) (out_idx=-1)", lambda: kernel_alloc(a, b)),
        ("torch.matmul(a, b)", lambda: torch.matmul(a, b)),
        ("torch.matmul(a, b, out=c)", lambda: torch.matmul(a, b, out=c)),
        ("torch.add(a, a)", lambda: torch.add(a, a)),
    ]
    layer = tilelang.compile(source, out_idx=-1)
    check("tilelang kernel(a, b)", lambda: layer(a, b), ref)
    check("tilelang eager gemm(a, b)", lambda: eager_gemm(a, b), ref)
    calls += [
        ("tilelang kernel(a, b)", lambda: layer(a, b)),
        ("tilelang eager gemm(a, b)", lambda: eager_gemm(a, b)),
    ]
    c_graph = torch.empty_like(c)
    replay, checked = graph_of(lambda: kernel_inplace(a, b, c_graph), c_graph)
    check(f"tlc k(a, b, c) x {GRAPH_CALLS} in a CUDA graph", checked, ref)
    calls.append((f"CUDA graph of {GRAPH_CALLS} tlc launches (per launch)", replay))
    if triton_mod is not None:
        cfg = triton_mod.SMALL
        grid = triton_mod.grid(M, N, cfg)
        args = triton_mod.launch_args(a, b, c)
        kernel = triton_mod.matmul_kernel

        def launch():
            kernel[grid](*args, **cfg)

        check("triton kernel[grid](...)", run_into(c, launch), ref)
        calls.append(("triton kernel[grid](...)", launch))
    return calls


def per_call_us(fn, n):
    """Median and 90th percentile of the host time of one call, in µs."""
    times = []
    for i in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        if (i + 1) % SYNC_EVERY == 0:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    times.sort()
    return statistics.median(times) * 1e6, times[int(0.9 * (n - 1))] * 1e6


def throughput_us(fn, n):
    """Wall time of ``n`` back-to-back calls and one synchronize, per call, in µs."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / n * 1e6


def measure(fn, n):
    for _ in range(WARMUP):
        fn()
    torch.cuda.synchronize()
    median, p90 = per_call_us(fn, n)
    return median, p90, throughput_us(fn, n)


def markdown_report(results, n, notes):
    M, N, K = SHAPE
    lines = [
        f"# Launch overhead, float16 GEMM {M}x{N}x{K} ({versions(torch)})",
        "",
        f"Per call: host time of one call, median and p90 of {n} (synchronized every "
        f"{SYNC_EVERY}). Throughput: {n} calls back to back, then one synchronize, per call.",
        "",
        "| call | per call, median µs | per call, p90 µs | throughput µs/call |",
        "|---|---:|---:|---:|",
    ]
    for label, (median, p90, thr) in results:
        lines.append(f"| `{label}` | {median:.1f} | {p90:.1f} | {thr:.1f} |")
    lines += [""] + [f"- {note}" for note in notes]
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--calls", type=int, default=2000, help="calls per measurement")
    p.add_argument("--no-triton", action="store_true", help="skip the Triton row")
    p.add_argument("--out", help="also write the markdown table to this file")
    args = p.parse_args()

    if not torch.cuda.is_available():
        fail("torch sees no CUDA GPU")
    torch.manual_seed(0)
    triton_mod, note = load_triton(not args.no_triton, "row")
    notes = [note] if note else []
    M, N, K = SHAPE
    a = torch.rand([M, K], device="cuda", dtype=torch.float16)
    b = torch.rand([K, N], device="cuda", dtype=torch.float16)
    c = torch.empty([M, N], device="cuda", dtype=torch.float16)

    results = []
    for label, fn in calls_to_time(a, b, c, triton_mod):
        if label.startswith("CUDA graph"):
            # One replay is GRAPH_CALLS launches: fewer replays, each divided out.
            median, p90, thr = measure(fn, max(args.calls // GRAPH_CALLS, 20))
            results.append((label, (median / GRAPH_CALLS, p90 / GRAPH_CALLS, thr / GRAPH_CALLS)))
        else:
            results.append((label, measure(fn, args.calls)))
        median, p90, thr = results[-1][1]
        print(f"  {label:<28} {median:7.1f} µs median, {p90:7.1f} µs p90, "
              f"{thr:7.1f} µs/call back to back", flush=True)

    report = markdown_report(results, args.calls, notes)
    publish(report, args.out)


if __name__ == "__main__":
    main()
