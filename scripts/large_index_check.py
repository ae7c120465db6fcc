#!/usr/bin/env python3
"""Kernels past 2^31 elements on the GPU, checked without the interpreter.

    python3 scripts/large_index_check.py [TLC_BINARY]      (default: target/release/tlc)

The reference interpreter cannot walk 3·10^9 elements, so this checks against PyTorch on
the same GPU: tlc compiles each kernel (`tlc compile ... -D ...`), this script loads the
PTX through the CUDA driver (ctypes, the launch contract of the manifest line: one pointer
per tensor, then one value per symbolic dim), launches it on PyTorch's tensors, and compares
the whole output bit for bit with PyTorch's result of the same operation (`A + B` and
`A.t()` are exact, so equality is the right test). It also checks that the inputs were not
written (a wrapped index would store outside C) and times the kernel against PyTorch's own
device copy in the same process. Needs ~50 GB of GPU memory (an 80 GB H100).
"""
import ctypes
import json
import os
import subprocess
import sys

import torch

TLC = sys.argv[1] if len(sys.argv) > 1 else "target/release/tlc"
cuda = ctypes.CDLL("libcuda.so.1")


def check(rc, what):
    if rc != 0:
        name = ctypes.c_char_p()
        cuda.cuGetErrorName(rc, ctypes.byref(name))
        raise RuntimeError(f"{what}: {name.value.decode() if name.value else rc}")


def compile_kernel(path, defines):
    args = [TLC, "compile", path, "--target", "sm_80", "-o", "-"]
    for d in defines:
        args += ["-D", d]
    ptx = subprocess.run(args, check=True, capture_output=True).stdout
    first = ptx.split(b"\n", 1)[0].decode()
    manifest = json.loads(first.split("tlc-manifest:", 1)[1])
    module = ctypes.c_void_p()
    check(cuda.cuModuleLoadData(ctypes.byref(module), ctypes.c_char_p(ptx + b"\0")), "load")
    funcs = []
    for k in kernels(manifest):
        func = ctypes.c_void_p()
        check(
            cuda.cuModuleGetFunction(ctypes.byref(func), module, k["entry"].encode()),
            "function",
        )
        funcs.append(func)
    return funcs, manifest


def kernels(manifest):
    """The entries with their launch fields, in launch order (docs/manifest.md): version 1
    has one at the top level, version 2 a `kernels` list."""
    if manifest["version"] == 1:
        return [manifest]
    if manifest["version"] == 2:
        return manifest["kernels"]
    raise RuntimeError(f"manifest version {manifest['version']} is not supported")


def evaluate(e, dims):
    if "int" in e:
        return e["int"]
    if "dim" in e:
        return dims[e["dim"]]
    a = [evaluate(x, dims) for x in e["args"]]
    op = e["op"]
    if op == "ceildiv":
        return -(-a[0] // a[1])
    return {"add": a[0] + a[1], "sub": a[0] - a[1], "mul": a[0] * a[1]}[op]


def launch(funcs, manifest, tensors, dims):
    values = [ctypes.c_uint64(t.data_ptr()) for t in tensors]
    for d in manifest["dims"]:
        ty = ctypes.c_int64 if d["dtype"] == "int64" else ctypes.c_int32
        values.append(ty(dims[d["name"]]))
    params = (ctypes.c_void_p * len(values))(
        *[ctypes.cast(ctypes.byref(v), ctypes.c_void_p) for v in values]
    )
    # Every entry in order on the default stream, each seeing what the previous wrote.
    for func, k in zip(funcs, kernels(manifest)):
        grid = [evaluate(g, dims) for g in k["grid"]] + [1, 1]
        block = k["block"] + [1, 1]
        smem = evaluate(k["shared_bytes"], dims)
        check(
            cuda.cuLaunchKernel(
                func, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                smem, None, params, None,
            ),
            "launch",
        )


def timed(fn, reps=5):
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e))
    times.sort()
    return times[len(times) // 2]


def report(name, ok, ms, bytes_moved, ref_ms, ref_bytes):
    gbs = bytes_moved / ms / 1e6
    ref = ref_bytes / ref_ms / 1e6
    print(
        f"{'ok  ' if ok else 'FAIL'} {name}: {ms:.2f} ms, {gbs:.0f} GB/s; "
        f"torch device copy {ref_ms:.2f} ms, {ref:.0f} GB/s; ratio {gbs / ref:.2f}",
        flush=True,
    )
    return ok


def fingerprint(t):
    return t.view(torch.int32 if t.element_size() == 4 else torch.int16).sum(dtype=torch.int64).item()


def elementwise(path, defines, n, dims):
    funcs, m = compile_kernel(path, defines)
    a = torch.rand(n, device="cuda")
    b = torch.rand(n, device="cuda")
    c = torch.full((n,), float("nan"), device="cuda")
    fa, fb = fingerprint(a), fingerprint(b)
    ms = timed(lambda: launch(funcs, m, [a, b, c], dims))
    ok = torch.equal(c, torch.add(a, b)) and fingerprint(a) == fa and fingerprint(b) == fb
    ref_ms = timed(lambda: c.copy_(a))
    del a, b, c
    torch.cuda.empty_cache()
    return report(f"elementwise_add {' '.join(defines) or ''} N={n}", ok, ms, 12 * n, ref_ms, 8 * n)


def transpose(rows, cols):
    funcs, m = compile_kernel("examples/transpose.tir", [f"M={rows}", f"N={cols}"])
    a = torch.rand(rows, cols, device="cuda").half()
    b = torch.full((cols, rows), float("nan"), device="cuda").half()
    fa = fingerprint(a)
    ms = timed(lambda: launch(funcs, m, [a, b], {}))
    ok = torch.equal(b, a.t()) and fingerprint(a) == fa
    ref_ms = timed(lambda: b.copy_(a.t()))
    del a, b
    torch.cuda.empty_cache()
    return report(f"transpose M={rows} N={cols}", ok, ms, 4 * rows * cols, ref_ms, 4 * rows * cols)


def main():
    torch.cuda.init()
    torch.zeros(1, device="cuda")
    print(torch.cuda.get_device_name(), flush=True)
    n = 3_000_000_000
    results = [
        elementwise("examples/elementwise_add.tir", [f"N={n}"], n, {}),
        elementwise(os.path.join(os.path.dirname(__file__), "..", "tests/cases/valid/elementwise_int64_dim.tir"), [], n, {"N": n}),
        transpose(50_000, 50_000),
        transpose(46_341, 46_349),
    ]
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
