"""GPU smoke test of the `tlc` package on PyTorch CUDA tensors (run by hand on a GPU
machine with torch; not collected by pytest):

    python python/tests/gpu_smoke.py

Checks launches against torch (vector add, a 2-D cast, the seed 000 GEMM vs torch.matmul,
a launch on a side stream), that bad arguments are refused naming the parameter, and that
1000 launches and 1000 compiles keep GPU and host memory flat; prints the launch overhead
and the seed 000 GEMM's time next to torch.matmul's.
Exits non-zero on the first failure."""

import resource
import statistics
import sys
import time
from pathlib import Path

import torch

import tlc

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"


def check(cond, what):
    if not cond:
        print(f"FAIL: {what}")
        sys.exit(1)
    print(f"ok: {what}")


def vector_add():
    k = tlc.compile(EXAMPLES / "elementwise_add.tir")
    print(f"compiled {k!r}")
    n = 1_000_003
    a = torch.randn(n, device="cuda")
    b = torch.randn(n, device="cuda")
    c = torch.empty(n, device="cuda")
    k(a, b, c)
    torch.cuda.synchronize()
    check(torch.equal(c, a + b), "elementwise_add == a + b")
    # On a side stream: torch's current stream is used.
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        c2 = torch.empty(n, device="cuda")
        k(a, b, c2, N=n)
    s.synchronize()
    check(torch.equal(c2, a + b), "launch on a side stream (torch.cuda.current_stream())")
    return k, a, b, c


def scale_cast():
    k = tlc.compile(EXAMPLES / "scale_cast.tir")
    x = torch.randn(300, 500, device="cuda")
    y = torch.empty(300, 500, device="cuda", dtype=torch.float16)
    k(x, y)
    torch.cuda.synchronize()
    check(torch.equal(y, (x * 0.5).half()), "scale_cast == (x * 0.5).half()")


def gemm():
    k = tlc.compile(EXAMPLES / "gemm_seed000.tir")
    a = torch.randn(4096, 1024, device="cuda", dtype=torch.float16)
    b = torch.randn(1024, 2048, device="cuda", dtype=torch.float16)
    c = torch.empty(4096, 2048, device="cuda", dtype=torch.float16)
    k(a, b, c)
    torch.cuda.synchronize()
    ref = torch.matmul(a, b)
    err = (c.float() - ref.float()).abs().max().item()
    check(torch.allclose(c, ref, rtol=1e-2, atol=1e-1), f"gemm_seed000 ~ torch.matmul (max |err| {err:.3g})")
    return k, a, b, c


def bench_seed000(k, a, b, c):
    """The seed 000 comparison from Python: tlc's GEMM vs torch.matmul, timed with
    triton.testing.do_bench when Triton is installed, else CUDA events (median of 100)."""
    try:
        from triton.testing import do_bench
    except ImportError:
        def do_bench(fn):
            fn()
            times = []
            for _ in range(100):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end))
            return statistics.median(times)
    flops = 2 * 4096 * 2048 * 1024
    ms_tlc = do_bench(lambda: k(a, b, c))
    ms_torch = do_bench(lambda: torch.matmul(a, b))
    print(f"seed 000 GEMM 4096x2048x1024 f16: tlc {ms_tlc:.4f} ms ({flops / ms_tlc / 1e9:.0f} "
          f"TFLOP/s), torch.matmul {ms_torch:.4f} ms ({flops / ms_torch / 1e9:.0f} TFLOP/s)")


def out_idx():
    """Outputs allocated by the call (TileLang's out_idx): the seed GEMM with symbolic dims
    on two shapes, and split-K, whose C the kernel also reads (so it must start zeroed)."""
    k = tlc.compile(REPO / "tests/cases/valid/seed000_dims.tir", out_idx=-1)
    for m, n, kk in [(4096, 2048, 1024), (1024, 384, 256)]:
        a = torch.randn(m, kk, device="cuda", dtype=torch.float16)
        b = torch.randn(kk, n, device="cuda", dtype=torch.float16)
        c = k(a, b)
        torch.cuda.synchronize()
        ref = torch.matmul(a, b)
        check(c.shape == (m, n) and c.dtype == torch.float16 and c.device == a.device,
              f"out_idx=-1 allocates C {tuple(c.shape)} {c.dtype} on {c.device}")
        check(torch.allclose(c, ref, rtol=1e-2, atol=1e-1), f"seed GEMM {m}x{n}x{kk} via k(a, b) ~ torch.matmul")
    given = torch.empty(1024, 384, device="cuda", dtype=torch.float16)
    same = k(a, b, given)
    torch.cuda.synchronize()
    check(same is given and torch.allclose(given, ref, rtol=1e-2, atol=1e-1),
          "out_idx kernel called with C given writes and returns it")
    split = tlc.compile(EXAMPLES / "gemm_splitk.tir", out_idx=-1, split_k=4)
    outs = [p for p in split.manifest["params"] if p["name"] == "C"]
    a = torch.randn(512, 4096, device="cuda", dtype=torch.float16)
    b = torch.randn(4096, 256, device="cuda", dtype=torch.float16)
    c = split(a, b)
    torch.cuda.synchronize()
    ref = torch.matmul(a, b)
    err = (c.float() - ref.float()).abs().max().item()
    check(torch.allclose(c, ref, rtol=2e-2, atol=2.5e-1),
          f"split-K (C access {outs[0]['access']}) via k(a, b) ~ torch.matmul (max |err| {err:.3g})")
    # On an explicit stream: C is zeroed on that stream, before the kernel.
    side = torch.cuda.Stream()
    c = split(a, b, stream=side.cuda_stream)
    side.synchronize()
    check(torch.allclose(c, ref, rtol=2e-2, atol=2.5e-1), "split-K with stream= (C zeroed on that stream)")


def refused(k, a, b, c):
    def raises(exc, text, *args, **dims):
        try:
            k(*args, **dims)
        except exc as e:
            check(text in str(e), f"refused with {exc.__name__}: {e}")
            return
        check(False, f"expected {exc.__name__} containing {text!r}")

    raises(tlc.LaunchError, "parameter `B` expects dtype float32", a, b.half(), c)
    strided = torch.randn(2 * a.numel(), device="cuda")[::2]
    raises(tlc.LaunchError, "parameter `A` needs a C-contiguous", strided, b, c)
    raises(tlc.LaunchError, "parameter `A` needs an address aligned to 16 bytes", a[1:], b[1:], c[1:])
    # Same dtype, shape and strides as a launch already made (its signature cached): only
    # the address differs, and it is still checked.
    shifted = torch.randn(a.numel() + 1, device="cuda")[1:]
    raises(tlc.LaunchError, "parameter `A` needs an address aligned to 16 bytes", shifted, b, c)
    raises(tlc.LaunchError, "parameter `B` dim 0", a, b[:-5], c)
    raises(ValueError, "expected a CUDA tensor, found one on cpu", a.cpu(), b, c)
    raises(tlc.LaunchError, "parameter `A` dim 0 is 1000003 but N = 7 was given", a, b, c, N=7)
    raises(TypeError, "kernel takes 3 tensors (A, B, C) but 2 were given", a, b)


def leak_and_overhead():
    k = tlc.compile(EXAMPLES / "elementwise_add.tir")
    a, b, c = (torch.randn(1024, device="cuda") for _ in range(3))
    for _ in range(50):
        k(a, b, c)
    torch.cuda.synchronize()
    free0, _ = torch.cuda.mem_get_info()
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    times = []
    for _ in range(1000):
        t = time.perf_counter()
        k(a, b, c)
        times.append(time.perf_counter() - t)
    torch.cuda.synchronize()
    torch_times = []
    for _ in range(1000):
        t = time.perf_counter()
        torch.add(a, b, out=c)
        torch_times.append(time.perf_counter() - t)
    torch.cuda.synchronize()
    alloc = tlc.compile(EXAMPLES / "elementwise_add.tir", out_idx=-1)
    alloc_times = []
    for _ in range(1000):
        t = time.perf_counter()
        alloc(a, b)
        alloc_times.append(time.perf_counter() - t)
    torch.cuda.synchronize()
    print(f"launch overhead: tlc {statistics.median(times) * 1e6:.1f} us/call, "
          f"tlc allocating C {statistics.median(alloc_times) * 1e6:.1f} us/call, "
          f"torch.add {statistics.median(torch_times) * 1e6:.1f} us/call (median of 1000)")
    for i in range(1000):
        kk = tlc.compile(EXAMPLES / "elementwise_add.tir")
        kk(a, b, c)
        del kk
    torch.cuda.synchronize()
    free1, _ = torch.cuda.mem_get_info()
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"after 1000 launches and 1000 compile+load+launch: GPU free {free0 - free1:+d} bytes "
          f"used, peak RSS {rss1 - rss0:+d} KiB")
    check(free0 - free1 < 16 << 20, "GPU memory flat (< 16 MiB drift)")
    check(rss1 - rss0 < 64 << 10, "host peak RSS flat (< 64 MiB growth)")


def main():
    check(torch.cuda.is_available(), "torch sees a CUDA GPU")
    check(tlc.driver_available(), "tlc finds the CUDA driver")
    vector_add()
    scale_cast()
    refused(*vector_add())
    bench_seed000(*gemm())
    out_idx()
    leak_and_overhead()
    print("gpu_smoke: all passed")


if __name__ == "__main__":
    main()
