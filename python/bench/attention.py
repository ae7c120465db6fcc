"""Flash attention forward: tlc's examples/flash_attention.tir against torch SDPA (cuDNN and
FlashAttention backends), checked and timed in one process.

    python python/bench/attention.py [--shapes SPEC] [--tir FILE] [-D NAME=VALUE]...
        [--tir-causal 0|1] [--open-tunables] [--symbolic-dims] [--target sm_80|sm_90a]
        [--warmup N] [--iters N] [--json OUT.json] [--out FILE.md] [--dry-run]

Needs a CUDA GPU, torch (2.5 or later: ``enable_gqa``, ``torch.nn.attention.sdpa_kernel``) and
the tlc package (``pip install ./python``). ``--help`` and ``--dry-run`` (the configs and the
``-D`` bindings each would compile with) need neither torch nor a GPU.

For each config (B, H, H_kv, S, D, causal) — tensors Q (B, S, H, D), K and V (B, S, H_kv, D),
float16, BSHD, random normal:

1. tlc: the kernel compiled with the config's ``-D`` values (``batch``, ``seq_len``,
   ``heads``, ``kv_heads``, ``dim``, ``is_causal``: those the file declares; with
   ``--symbolic-dims`` the sizes are left to the launch and one kernel serves every shape of
   a (D, causal, tunables) set), and for the example the tunables of ``DEFAULT_TUNABLES``
   (TileLang's tuned setting where the target takes it; ``--open-tunables``, and any other
   ``--tir`` file, leave them to tlc: tuning cache, ``tlc plan``'s first config when every
   dim is bound, defaults; ``-D`` overrides either). Its output is filled
   with NaN first, so an element it never writes fails the check. A config tlc refuses is
   reported with the compiler's first error line.
2. The check: the output against a float32 reference (softmax(Q K^T / sqrt(D)) V with the
   causal mask, K/V head h // (H / H_kv), computed with torch in float32, TF32 off) on
   every (batch, head) of a small problem and on the first and last of a large one, and the
   whole output against torch SDPA in float16 (default backend choice); an element passes
   when |x - ref| <= 1e-2 + 1e-2 |ref| (TileLang's assert_allclose tolerance) and all are
   finite. The SDPA backends' own results are checked the same way.
3. The timing: tlc's kernel and ``torch.nn.functional.scaled_dot_product_attention`` on
   ``.transpose(1, 2)`` views of the same BSHD tensors (no copy) under
   ``sdpa_kernel(SDPBackend.CUDNN_ATTENTION)`` and ``sdpa_kernel(SDPBackend.FLASH_ATTENTION)``,
   ``enable_gqa=True`` when H_kv < H (a backend that refuses GQA is retried on K/V
   repeat_interleave'd to H heads outside the timed region, and the row says so). Each:
   --warmup runs, then --iters runs with a CUDA event pair around each, back to back on the
   current stream; the median is reported (min and max in the JSON). A backend that refuses
   the config (``No available kernel``, with torch's warnings as the reason) is reported as
   refused, never timed.

FLOPs = 4 * B * H * S^2 * D (two GEMMs), halved for causal; TFLOP/s = FLOPs / median time;
``vs cuDNN`` = tlc TFLOP/s / cuDNN TFLOP/s (above 1: tlc is faster). A wrong result is never
a number: the row shows WRONG (with the error) instead of a time, and the script exits 1
after all rows if any tlc result was wrong, refused, or failed to launch (SDPA backends that
refuse a config do not fail the run; an SDPA backend's wrong result does).

Shapes (``--shapes``, items separated by ``;``):
- ``NAME=VALUE,...`` with names B, H, Hkv, S, D, causal (defaults B=8, H=32, Hkv=H, S=4096,
  D=128, causal=0): ``--shapes "S=8192,causal=1; B=2,H=16,Hkv=4,S=1000,D=64"``;
- ``default``: B 8, H 32, S 4096, D 128, non-causal and causal (TileLang's example's main());
- ``fa3``: the FlashAttention-3 paper's forward sweep: 16k tokens (B = 16384 / S) for
  S = 512 .. 16384, hidden size 2048 (H = 2048 / D) with D = 64, 128, 256, non-causal and
  causal;
- ``gqa``: the same 16k-token sweep with H 32, H_kv 8, D 128, non-causal and causal.
Without ``--shapes``: ``default``.

``--tir FILE`` times another kernel with the same signature (Q, K, V, Output; BSHD):
``tests/tilelang/flash_attn_fwd_bshd.tir`` for instance, whose K/V have ``heads`` heads and
whose dim (128) and mode (non-causal) are fixed. Names the file does not declare are not
passed: a config whose H_kv differs from H needs a ``kv_heads`` dim, one whose D differs
from the file's fixed head dim is skipped (the manifest says which it is), and a file
without an ``is_causal`` tunable computes the mode ``--tir-causal`` names (default 0): rows
of the other mode are skipped with a note. ``-D NAME=VALUE`` (repeatable) is passed to
every compile (tunables such as ``block_N=64``, ``num_stages=1``); the sizes themselves come
from ``--shapes``.
"""

import argparse
import json
import math
import os
import re
import statistics
import sys
import time
import warnings

from common import fail, publish

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DEFAULT_TIR = os.path.join(ROOT, "examples", "flash_attention.tir")

RTOL = ATOL = 1e-2  # TileLang's assert_allclose for this example
#: float32 scores of at most this many elements are computed per reference chunk.
REF_CHUNK_ELEMS = 1 << 27
#: problems of at most this many score elements (B * H * S * S) are checked on every
#: (batch, head); larger ones on the first and last (batch, head) only.
FULL_CHECK_ELEMS = 1 << 30

#: The tunables the bench compiles examples/flash_attention.tir with, by (target, D):
#: TileLang's tuned setting for the example (128 x 128 tiles, 2 stages, 256 threads) where
#: tlc accepts it, else `tlc plan`'s first config for B 8, H 32, S 4096 (the file's header
#: lists what each target refuses). Another --tir file's tunables are left to tlc.
DEFAULT_TUNABLES = {
    ("sm_90a", 64): dict(block_M=128, block_N=128, num_stages=2, threads=256),
    ("sm_90a", 128): dict(block_M=128, block_N=128, num_stages=2, threads=256),
    ("sm_90a", 256): dict(block_M=128, block_N=64, num_stages=2, threads=256),
    ("sm_80", 64): dict(block_M=128, block_N=128, num_stages=1, threads=256),
    ("sm_80", 128): dict(block_M=128, block_N=128, num_stages=1, threads=256),
    ("sm_80", 256): dict(block_M=128, block_N=32, num_stages=1, threads=256),
}

#: The names a shape binds (the example's dims and problem constants).
SHAPE_NAMES = ("batch", "seq_len", "heads", "kv_heads", "dim", "is_causal")

FA3_SEQLENS = (512, 1024, 2048, 4096, 8192, 16384)
TOKENS = 16384


# ---------------------------------------------------------------------------------------
# Configs and arguments (no torch, no GPU).


class Config:
    """One attention problem: Q (B, S, H, D), K/V (B, S, Hkv, D), causal or not."""

    def __init__(self, B, H, Hkv, S, D, causal):
        self.B, self.H, self.Hkv, self.S, self.D, self.causal = B, H, Hkv, S, D, causal

    def key(self):
        return (self.B, self.H, self.Hkv, self.S, self.D, self.causal)

    def flops(self):
        """4 * B * H * S^2 * D, halved for causal (TileLang's and FlashAttention's count)."""
        f = 4 * self.B * self.H * self.S * self.S * self.D
        return f // 2 if self.causal else f

    def label(self):
        gqa = f"/{self.Hkv}" if self.Hkv != self.H else ""
        return (f"B{self.B} H{self.H}{gqa} S{self.S} D{self.D}"
                f"{' causal' if self.causal else ''}")

    def as_dict(self):
        return {"B": self.B, "H": self.H, "H_kv": self.Hkv, "S": self.S, "D": self.D,
                "causal": bool(self.causal)}


def preset(name):
    """The configs of a named shape set, or None for an unknown name."""
    if name == "default":
        return [Config(8, 32, 32, 4096, 128, c) for c in (0, 1)]
    if name == "fa3":
        return [Config(TOKENS // s, 2048 // d, 2048 // d, s, d, c)
                for d in (64, 128, 256) for c in (0, 1) for s in FA3_SEQLENS]
    if name == "gqa":
        return [Config(TOKENS // s, 32, 8, s, 128, c) for c in (0, 1) for s in FA3_SEQLENS]
    return None


def parse_shapes(spec):
    """``--shapes``: items separated by ``;``, each a preset name or ``NAME=VALUE,...``.
    Raises ValueError naming the item at fault."""
    configs = []
    for item in spec.split(";"):
        item = item.strip()
        if not item:
            continue
        named = preset(item)
        if named is not None:
            configs += named
            continue
        values = {"B": 8, "H": 32, "S": 4096, "D": 128, "causal": 0}
        given = set()
        for pair in item.split(","):
            name, eq, value = (s.strip() for s in pair.partition("="))
            if not eq:
                raise ValueError(f"`{item}`: `{pair.strip()}` is neither a preset "
                                 f"(default, fa3, gqa) nor NAME=VALUE")
            if name not in ("B", "H", "Hkv", "S", "D", "causal"):
                raise ValueError(f"`{item}`: unknown name `{name}` (B, H, Hkv, S, D, causal)")
            if name in given:
                raise ValueError(f"`{item}`: `{name}` given twice")
            given.add(name)
            try:
                values[name] = int(value)
            except ValueError:
                raise ValueError(f"`{item}`: `{name}={value}` is not an integer") from None
        values.setdefault("Hkv", values["H"])
        c = Config(values["B"], values["H"], values["Hkv"], values["S"], values["D"],
                   values["causal"])
        if min(c.B, c.H, c.Hkv, c.S, c.D) <= 0:
            raise ValueError(f"`{item}`: sizes must be positive")
        if c.causal not in (0, 1):
            raise ValueError(f"`{item}`: causal is 0 or 1")
        if c.H % c.Hkv:
            raise ValueError(f"`{item}`: H = {c.H} is not a multiple of Hkv = {c.Hkv}")
        configs.append(c)
    if not configs:
        raise ValueError("no shapes given")
    seen, unique = set(), []
    for c in configs:
        if c.key() not in seen:
            seen.add(c.key())
            unique.append(c)
    return unique


def parse_define(text):
    """``NAME=VALUE`` (an int) as a pair; ArgumentTypeError otherwise."""
    name, eq, value = text.partition("=")
    if not eq or not re.fullmatch(r"[A-Za-z_]\w*", name.strip()):
        raise argparse.ArgumentTypeError(f"`{text}` is not NAME=VALUE")
    try:
        return name.strip(), int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"`{text}`: the value is not an integer") from None


def declared_names(text):
    """(symbolic dims, tunables) a kernel file declares, read off its declaration lines
    (``NAME = T.symbolic("NAME")``, ``A, B = T.tunable([...])``)."""
    dims, tunables = set(), set()
    for line in text.splitlines():
        m = re.match(r"\s*(\w+)\s*=\s*T\.symbolic\(", line)
        if m:
            dims.add(m.group(1))
        m = re.match(r"\s*([\w\s,()]+?)\s*=\s*T\.tunable\(", line)
        if m:
            tunables.update(n for n in re.split(r"[\s,()]+", m.group(1)) if n)
    return dims, tunables


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="See the module docstring (python/bench/attention.py) for the details.")
    p.add_argument("--shapes", default="default",
                   help="configs: presets default, fa3, gqa and/or "
                        "'B=..,H=..,Hkv=..,S=..,D=..,causal=..' items, ';'-separated")
    p.add_argument("--tir", default=DEFAULT_TIR,
                   help="the kernel to time (default: examples/flash_attention.tir)")
    p.add_argument("-D", dest="defines", action="append", default=[], type=parse_define,
                   metavar="NAME=VALUE", help="passed to every compile (tunables)")
    p.add_argument("--tir-causal", type=int, choices=(0, 1), default=0,
                   help="the mode a --tir file without an is_causal tunable computes")
    p.add_argument("--open-tunables", action="store_true",
                   help="leave the tunables -D does not give to tlc (cache, plan, defaults)")
    p.add_argument("--symbolic-dims", action="store_true",
                   help="do not bind batch/seq_len/heads/kv_heads: one kernel for all shapes")
    p.add_argument("--target", choices=("sm_80", "sm_90a"),
                   help="tlc's target (default: GPU 0's)")
    p.add_argument("--warmup", type=int, default=10, help="untimed runs (default 10)")
    p.add_argument("--iters", type=int, default=30, help="timed runs (default 30)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", metavar="OUT", help="write the rows as JSON to OUT")
    p.add_argument("--out", help="also write the markdown report to this file")
    p.add_argument("--dry-run", action="store_true",
                   help="print each config's -D bindings and exit (no torch, no GPU)")
    args = p.parse_args(argv)
    try:
        args.configs = parse_shapes(args.shapes)
    except ValueError as e:
        p.error(f"--shapes: {e}")
    for name, _ in args.defines:
        if name in SHAPE_NAMES:
            p.error(f"-D {name}: the sizes and the mode come from --shapes")
    seen = {}
    for name, value in args.defines:
        if seen.setdefault(name, value) != value:
            p.error(f"-D {name} given twice with different values")
    args.defines = dict(args.defines)
    if args.warmup < 0 or args.iters < 1:
        p.error("--warmup must be >= 0 and --iters >= 1")
    try:
        with open(args.tir, encoding="utf-8") as f:
            args.tir_text = f.read()
    except OSError as e:
        p.error(f"--tir {args.tir}: {e.strerror}")
    args.dims, args.tunables = declared_names(args.tir_text)
    unknown = sorted(set(args.defines) - args.tunables - args.dims)
    if unknown:
        p.error(f"-D {', '.join(unknown)}: not declared by {args.tir} "
                f"(its tunables: {', '.join(sorted(args.tunables)) or 'none'})")
    return args


def plan_row(config, args, target):
    """(the -D bindings for tlc, None) for a config, or (None, why it is skipped) when the
    kernel file cannot compute it."""
    dims, tunables = args.dims, args.tunables
    c = config
    if c.Hkv != c.H and "kv_heads" not in dims:
        return None, f"{os.path.basename(args.tir)} has no kv_heads dim: GQA not computed"
    if "is_causal" not in tunables and "is_causal" not in dims and c.causal != args.tir_causal:
        mode = "causal" if args.tir_causal else "non-causal"
        return None, f"{os.path.basename(args.tir)} computes {mode} attention only (--tir-causal)"
    if "dim" not in tunables and "dim" not in dims:
        fixed = fixed_head_dim(args.tir_text)
        if fixed is not None and fixed != c.D:
            return None, f"{os.path.basename(args.tir)} has head dim {fixed} fixed"
    defines = {}
    if not args.symbolic_dims:
        for name, value in (("batch", c.B), ("seq_len", c.S), ("heads", c.H),
                            ("kv_heads", c.Hkv)):
            if name in dims:
                defines[name] = value
    for name, value in (("dim", c.D), ("is_causal", c.causal)):
        if name in tunables or name in dims:
            defines[name] = value
    if not args.open_tunables and os.path.samefile(args.tir, DEFAULT_TIR):
        for name, value in DEFAULT_TUNABLES.get((target, c.D), {}).items():
            if name in tunables:
                defines[name] = value
    defines.update(args.defines)
    return defines, None


def fixed_head_dim(text):
    """The last extent of Q's declaration when it is a literal (``Q: T.Tensor([batch,
    seq_len, heads, 128], ...)``), else None."""
    m = re.search(r"\bQ\s*:\s*T\.Tensor\(\s*[\[(]([^\])]*)[\])]", text)
    if not m:
        return None
    last = m.group(1).split(",")[-1].strip()
    return int(last) if last.isdigit() else None


# ---------------------------------------------------------------------------------------
# The measurement (torch and a GPU).


def time_ms(torch, fn, warmup, iters):
    """(median, min, max) milliseconds of ``fn()`` over ``iters`` runs, each between two
    CUDA events on the current stream, enqueued back to back after ``warmup`` runs."""
    for _ in range(warmup):
        fn()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    for s, e in zip(starts, ends):
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    times = [s.elapsed_time(e) for s, e in zip(starts, ends)]
    return statistics.median(times), min(times), max(times)


def reference_heads(torch, q, k, v, b, h0, h1, causal):
    """float32 attention of batch ``b``, query heads h0..h1-1: (h1 - h0, S, D), from BSHD
    float16 tensors; K/V head h // (H / H_kv)."""
    H, Hkv = q.shape[2], k.shape[2]
    g = H // Hkv
    D = q.shape[3]
    qh = q[b, :, h0:h1].float().transpose(0, 1)  # (h, S, D)
    kv_idx = torch.arange(h0, h1, device=q.device) // g
    kh = k[b].float().index_select(1, kv_idx).transpose(0, 1)
    vh = v[b].float().index_select(1, kv_idx).transpose(0, 1)
    scores = torch.matmul(qh, kh.transpose(1, 2)) / math.sqrt(D)
    if causal:
        S = q.shape[1]
        mask = torch.ones(S, S, dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.matmul(torch.softmax(scores, dim=-1), vh)


def check_against_reference(torch, out, q, k, v, causal):
    """(ok, max |err|, where): ``out`` (BSHD) against the float32 reference, on every
    (batch, head) of a small problem, on the first and last of a large one."""
    B, S, H, _ = q.shape
    if B * H * S * S <= FULL_CHECK_ELEMS:
        pairs = [(b, h) for b in range(B) for h in range(H)]
    else:
        pairs = sorted({(0, 0), (B - 1, H - 1)})
    chunk = max(1, REF_CHUNK_ELEMS // (S * S))
    worst, where, ok = 0.0, None, True
    by_batch = {}
    for b, h in pairs:
        by_batch.setdefault(b, []).append(h)
    for b, heads in by_batch.items():
        heads = sorted(heads)
        runs, start = [], heads[0]  # consecutive heads in chunks
        for i in range(1, len(heads) + 1):
            if i == len(heads) or heads[i] != heads[i - 1] + 1 or heads[i] - start >= chunk:
                runs.append((start, heads[i - 1] + 1))
                if i < len(heads):
                    start = heads[i]
        for h0, h1 in runs:
            ref = reference_heads(torch, q, k, v, b, h0, h1, causal)
            got = out[b, :, h0:h1].float().transpose(0, 1)
            err = (got - ref).abs()
            bad = ~(err <= ATOL + RTOL * ref.abs())  # NaN counts as bad
            if bad.any():
                ok = False
            e = err.nan_to_num(nan=float("inf")).max().item()
            if e > worst or where is None:
                worst, where = e, f"batch {b}, heads {h0}..{h1 - 1}"
    return ok, worst, where


def compare(torch, out, ref):
    """(ok, max |err|) of two BSHD float16 results (rtol = atol = 1e-2, all finite)."""
    err = (out.float() - ref.float()).abs()
    ok = bool(torch.isfinite(out).all()) and bool((err <= ATOL + RTOL * ref.float().abs()).all())
    return ok, err.nan_to_num(nan=float("inf")).max().item()


def sdpa_runner(torch, backend, q, k, v, causal):
    """(run, note) for one SDPA backend on (B, H, S, D) views of the BSHD tensors: ``run()``
    returns the BSHD output and must be called under ``sdpa_kernel(backend)`` (entered once
    around a timing loop, not per call); ``note`` says how GQA was given. Raises
    RuntimeError with torch's reason when the backend refuses the config."""
    from torch.nn.attention import sdpa_kernel
    import torch.nn.functional as F

    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
    gqa = k.shape[2] != q.shape[2]

    def attempt(kk, vv, enable_gqa):
        def run():
            o = F.scaled_dot_product_attention(qt, kk, vv, is_causal=bool(causal),
                                               enable_gqa=enable_gqa)
            return o.transpose(1, 2)

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                with sdpa_kernel(backend):
                    run()
                torch.cuda.synchronize()
                return run, None
            except RuntimeError as e:
                reasons = [str(w.message).strip() for w in caught]
                return None, "; ".join([str(e).strip().splitlines()[0]] + reasons)

    run, why = attempt(kt, vt, gqa)
    if run is not None:
        return run, ("enable_gqa=True" if gqa else None)
    if not gqa:
        raise RuntimeError(why)
    g = q.shape[2] // k.shape[2]
    kr = kt.repeat_interleave(g, dim=1)
    vr = vt.repeat_interleave(g, dim=1)
    run2, why2 = attempt(kr, vr, False)
    if run2 is None:
        raise RuntimeError(f"{why} (and on K/V repeated: {why2})")
    return run2, f"enable_gqa=True refused ({short(why, 200)}): K/V repeat_interleave'd"


def short(message, n=160):
    line = " ".join(str(message).split())
    return line if len(line) <= n else line[: n - 3] + "..."


def tflops(flops, ms):
    return flops / (ms * 1e-3) / 1e12


def bench_config(torch, tlc, config, args, target, kernels):
    """One row: the tlc result checked and timed, and the SDPA backends'."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    c = config
    row = {"config": c.as_dict(), "flops": c.flops(), "target": target,
           "tlc": None, "cudnn": None, "flash": None, "notes": []}
    defines, skip = plan_row(c, args, target)
    gen = torch.Generator(device="cuda").manual_seed(args.seed)
    q = torch.randn(c.B, c.S, c.H, c.D, device="cuda", dtype=torch.float16, generator=gen)
    k = torch.randn(c.B, c.S, c.Hkv, c.D, device="cuda", dtype=torch.float16, generator=gen)
    v = torch.randn(c.B, c.S, c.Hkv, c.D, device="cuda", dtype=torch.float16, generator=gen)

    # The float16 SDPA result every output is also compared with (default dispatch).
    import torch.nn.functional as F
    sdpa_ref = F.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=bool(c.causal),
        enable_gqa=c.Hkv != c.H).transpose(1, 2)

    def checked(out):
        ok_ref, err_ref, where = check_against_reference(torch, out, q, k, v, c.causal)
        ok_sdpa, err_sdpa = compare(torch, out, sdpa_ref)
        return {"ok": ok_ref and ok_sdpa, "max_err_f32_ref": err_ref, "worst_at": where,
                "max_err_vs_sdpa": err_sdpa}

    # tlc
    if skip:
        row["tlc"] = {"status": "skipped", "message": skip}
    else:
        row["defines"] = defines
        result = {"status": None}
        row["tlc"] = result
        key = tuple(sorted(defines.items()))
        try:
            if key not in kernels:
                t0 = time.perf_counter()
                kernels[key] = tlc.compile(args.tir, target=args.target, **defines)
                result["compile_s"] = time.perf_counter() - t0
            kernel = kernels[key]
            if kernel.target != target:
                row["notes"].append(f"compiled for {kernel.target}, not {target}: the "
                                    f"tunables of DEFAULT_TUNABLES[{target!r}] were used")
            out = torch.full_like(q, float("nan"))
            kernel(q, k, v, out)
            torch.cuda.synchronize()
            check = checked(out)
            result.update(check)
            if not check["ok"]:
                result["status"] = "wrong"
            else:
                ms = time_ms(torch, lambda: kernel(q, k, v, out), args.warmup, args.iters)
                result.update(status="ok", ms=ms[0], min_ms=ms[1], max_ms=ms[2],
                              tflops=tflops(c.flops(), ms[0]))
        except tlc.CompileError as e:
            result.update(status="refused", message=str(e))
        except (tlc.LaunchError, ValueError, TypeError, RuntimeError) as e:
            result.update(status="error", message=f"{type(e).__name__}: {e}")
        if args.symbolic_dims and result["status"] != "ok":
            kernels.pop(key, None)

    # SDPA backends
    for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION),
                          ("flash", SDPBackend.FLASH_ATTENTION)):
        result = {"status": None}
        row[name] = result
        try:
            run, note = sdpa_runner(torch, backend, q, k, v, c.causal)
        except RuntimeError as e:
            result.update(status="refused", message=str(e))
            continue
        if note:
            result["note"] = note
        with sdpa_kernel(backend):
            check = checked(run())
        result.update(check)
        if not check["ok"]:
            result["status"] = "wrong"
            continue
        with sdpa_kernel(backend):
            ms = time_ms(torch, run, args.warmup, args.iters)
        result.update(status="ok", ms=ms[0], min_ms=ms[1], max_ms=ms[2],
                      tflops=tflops(c.flops(), ms[0]))

    t, cu = row["tlc"], row["cudnn"]
    row["tlc_vs_cudnn"] = (t["tflops"] / cu["tflops"]
                           if t.get("status") == "ok" and cu.get("status") == "ok" else None)
    return row


def cell(result):
    """A table cell: ``ms / TFLOP/s`` for a good result, else what happened (never a number
    for a wrong one)."""
    s = result.get("status")
    if s == "ok":
        return f"{result['ms']:.3f} ms / {result['tflops']:.1f}"
    if s == "wrong":
        return f"WRONG (max err {result['max_err_f32_ref']:.3g})"
    if s in ("refused", "error", "skipped"):
        return f"{s}"
    return "-"


def markdown(rows, title, notes):
    lines = [f"# {title}", "",
             "Time: median of the timed runs; TFLOP/s = 4·B·H·S²·D (/2 causal) / time. "
             "vs cuDNN: tlc TFLOP/s / cuDNN TFLOP/s.", "",
             "| config | tlc ms / TFLOP/s | cuDNN ms / TFLOP/s | FA ms / TFLOP/s | vs cuDNN |",
             "|---|---:|---:|---:|---:|"]
    for r in rows:
        c = r["config"]
        cfg = Config(c["B"], c["H"], c["H_kv"], c["S"], c["D"], int(c["causal"]))
        ratio = f"{r['tlc_vs_cudnn']:.2f}" if r["tlc_vs_cudnn"] is not None else "-"
        lines.append(f"| {cfg.label()} | {cell(r['tlc'])} | {cell(r['cudnn'])} | "
                     f"{cell(r['flash'])} | {ratio} |")
    details = []
    for r in rows:
        c = r["config"]
        cfg = Config(c["B"], c["H"], c["H_kv"], c["S"], c["D"], int(c["causal"]))
        details += [f"- {cfg.label()}: {n}" for n in r["notes"]]
        if r.get("defines"):
            details.append(f"- {cfg.label()}, tlc compiled with "
                           + " ".join(f"-D {n}={v}" for n, v in r["defines"].items()))
        for name in ("tlc", "cudnn", "flash"):
            res = r[name]
            if res.get("message"):
                details.append(f"- {cfg.label()}, {name} {res['status']}: "
                               f"{short(res['message'], 400)}")
            elif res.get("status") == "wrong":
                details.append(f"- {cfg.label()}, {name} WRONG: max |err| "
                               f"{res['max_err_f32_ref']:.3g} vs the float32 reference "
                               f"(worst at {res['worst_at']}), "
                               f"{res['max_err_vs_sdpa']:.3g} vs SDPA")
            if res.get("note"):
                details.append(f"- {cfg.label()}, {name}: {res['note']}")
    if details or notes:
        lines += [""] + [f"- {n}" for n in notes] + details
    return "\n".join(lines) + "\n"


def print_row(r):
    c = r["config"]
    cfg = Config(c["B"], c["H"], c["H_kv"], c["S"], c["D"], int(c["causal"]))
    parts = [f"{cfg.label():<28}"]
    for name in ("tlc", "cudnn", "flash"):
        res = r[name]
        text = cell(res)
        if res.get("status") in ("refused", "error", "skipped") and res.get("message"):
            text += f" ({short(res['message'], 100)})"
        parts.append(f"{name}: {text}")
    if r["tlc_vs_cudnn"] is not None:
        parts.append(f"vs cuDNN {r['tlc_vs_cudnn']:.2f}")
    print("  ".join(parts), flush=True)


def dry_run(args):
    target = args.target or "sm_90a"
    print(f"{args.tir}: dims {sorted(args.dims)}, tunables {sorted(args.tunables)}; "
          f"target {target}{'' if args.target else ' (assumed: the GPU decides)'}")
    for c in args.configs:
        defines, skip = plan_row(c, args, target)
        what = f"skipped: {skip}" if skip else " ".join(f"-D {n}={v}" for n, v in defines.items())
        print(f"  {c.label():<28} {c.flops() / 1e12:8.3f} TFLOP  {what}")


def main(argv=None):
    args = parse_args(argv)
    if args.dry_run:
        dry_run(args)
        return 0

    import torch
    import tlc

    if not torch.cuda.is_available():
        fail("torch sees no CUDA GPU")
    torch.backends.cuda.matmul.allow_tf32 = False  # the float32 reference stays float32
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: F401
    except ImportError as e:
        fail(f"torch {torch.__version__} has no torch.nn.attention.sdpa_kernel ({e})")
    target = args.target or gpu_target(torch)
    import importlib.metadata as md

    def version(pkg):
        try:
            return md.version(pkg)
        except md.PackageNotFoundError:
            return "not installed"

    title = (f"Flash attention forward, float16, BSHD: {os.path.relpath(args.tir, ROOT)} "
             f"({target}) vs torch SDPA ({torch.cuda.get_device_name()}; torch "
             f"{torch.__version__}, cuDNN {cudnn_version(torch)}, triton "
             f"{version('triton')}, tlc {version('tlc')})")
    print(title)
    rows, kernels = [], {}
    for c in args.configs:
        row = bench_config(torch, tlc, c, args, target, kernels)
        if not args.symbolic_dims:
            kernels.clear()
        rows.append(row)
        print_row(row)
        torch.cuda.empty_cache()

    notes = [f"{args.warmup} warm-up and {args.iters} timed runs per measurement; "
             f"check: |x - ref| <= {ATOL} + {RTOL}·|ref| against a float32 reference and "
             f"float16 SDPA"]
    publish(markdown(rows, title, notes), args.out)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"title": title, "tir": args.tir, "target": target, "rows": rows}, f,
                      indent=1)
        print(f"wrote {args.json}")

    bad = [r for r in rows if r["tlc"]["status"] in ("wrong", "refused", "error")]
    bad += [r for r in rows for n in ("cudnn", "flash") if r[n]["status"] == "wrong"]
    if bad:
        fail(f"{len(bad)} result(s) wrong, refused or failed (see above)")
    print("attention: all checked results passed")
    return 0


def cudnn_version(torch):
    """torch's cuDNN version, or why it is not known."""
    try:
        return torch.backends.cudnn.version()
    except Exception as e:  # a report's title must not stop the run
        return f"unknown ({type(e).__name__})"


def gpu_target(torch):
    """The target tlc compiles for on GPU 0 (sm_90a on compute capability 9.0, else sm_80),
    as tlc.compile chooses it without ``target``."""
    major, minor = torch.cuda.get_device_capability(0)
    return "sm_90a" if (major, minor) == (9, 0) else "sm_80"


if __name__ == "__main__":
    sys.exit(main())
