"""What the tests of TileLang's example scripts (tilelang_scripts/) share: importing a
script unchanged (stand-ins for torch and the like, script_stand_ins.py), compiling a
kernel function's kernel for both targets, launches recorded instead of run while a
script's top level runs, and the NumPy references several scripts need."""

import contextlib
import importlib.util
import sys
from pathlib import Path

import numpy as np

import tlc
import tlc.tilelang as tilelang
import tlc.tilelang.profiler as profiler_module
from script_stand_ins import FakeTensor, Dtype, standing_in

HERE = Path(__file__).resolve().parent / "tilelang_scripts"
RNG = np.random.default_rng(39)


def import_scripts(names, launches=None):
    """The scripts' modules, imported with the stand-ins; with ``launches`` (a list), the
    launches their top levels make are recorded there (kernel, arguments) instead of run
    and ``do_bench`` times nothing."""
    with standing_in(), (recording(launches) if launches is not None else contextlib.nullcontext()):
        return {n: _load(n) for n in names}


def _load(name):
    # Under a name of its own: tilelang_py/ has modules of the same names (rms_norm).
    spec = importlib.util.spec_from_file_location(f"tilelang_scripts_{name}", HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def recording(launches):
    """``tlc.Kernel.__call__`` records (kernel, arguments) in ``launches`` and returns
    stand-in outputs of the shapes the kernel's manifest gives; ``do_bench`` returns 1 ms."""
    original_call, original_bench = tlc.Kernel.__call__, profiler_module.do_bench

    def record(kernel, *args, **kwargs):
        launches.append((kernel, args))
        outs = tuple(FakeTensor(np.zeros(0), Dtype("float32", np.float32)) for _ in kernel.out_idx)
        return None if not outs else outs[0] if len(outs) == 1 else outs

    tlc.Kernel.__call__ = record
    profiler_module.do_bench = lambda *a, **k: 1.0
    try:
        yield launches
    finally:
        tlc.Kernel.__call__ = original_call
        profiler_module.do_bench = original_bench


def compiled_for_both(jit_fn, *args, targets=("sm_80", "sm_90a"), **kwargs):
    """The kernel the script's function builds for these arguments, compiled for each
    target with the function's own pass_configs and out_idx; the first one is returned."""
    func = jit_fn.get_tir(*args, **kwargs)
    kernels = [
        tilelang.compile(func, target=t, pass_configs=jit_fn.pass_configs, out_idx=jit_fn.out_idx)
        for t in targets
    ]
    for t, k in zip(targets, kernels):
        assert k.target == t and ".entry" in k.get_kernel_source()
    return kernels[0]


def rand(*shape, dtype=np.float32):
    return RNG.uniform(-1, 1, shape).astype(dtype)


def f64(x):
    return np.asarray(x, dtype=np.float64)


def e4m3(bits):
    """float8_e4m3 (OCP E4M3FN) bit patterns as float64."""
    bits = np.asarray(bits, np.uint8).astype(np.int64)
    sign = np.where(bits & 0x80, -1.0, 1.0)
    exp, man = (bits >> 3) & 0xF, bits & 0x7
    normal = (1 + man / 8.0) * np.exp2(exp - 7.0)
    return sign * np.where(exp == 0, man / 8.0 * 2.0**-6, normal)


def bf16(bits):
    """bfloat16 bit patterns (uint16) as float64."""
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def to_bf16(x):
    """float values as bfloat16 bit patterns (rounded to nearest even)."""
    b = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


def attention(q, k, v, groups=1, causal=False, layout="bshd"):
    """softmax(q kᵀ / sqrt(d)) v per batch and head in float64; ``layout`` "bshd" or
    "bhsd"; causal masks keys after the query (aligned at the end, as TileLang's are)."""
    if layout == "bhsd":
        q, k, v = (np.swapaxes(x, 1, 2) for x in (q, k, v))
    k, v = np.repeat(f64(k), groups, axis=2), np.repeat(f64(v), groups, axis=2)
    s = np.einsum("bqhd,bkhd->bhqk", f64(q), k) / np.sqrt(q.shape[-1])
    if causal:
        sq, sk = s.shape[-2], s.shape[-1]
        s = np.where(np.arange(sk)[None, :] <= np.arange(sq)[:, None] + (sk - sq), s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    out = np.einsum("bhqk,bkhd->bqhd", p, v)
    return np.swapaxes(out, 1, 2) if layout == "bhsd" else out
