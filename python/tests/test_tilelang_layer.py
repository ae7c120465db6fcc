"""`tlc.tilelang`, TileLang's Python layer, on the CPU: `jit` on factories and eager kernels
(call forms, caching, `T.const` sizes read off tensors), `compile`'s options, pass_configs
honored or refused by name, the profiler's inputs, `autotune` / `AutoTuner` without a GPU.
Launches need a GPU; where a test needs one to have happened, the launch is replaced by a
recorder of its arguments (`tlc.Kernel.__call__`), which is all the layer adds to it."""

import warnings

import numpy as np
import pytest

import tlc
import tlc.tilelang as tilelang
import tlc.tilelang.language as T
from tlc.tilelang import pass_configs
from tlc.tilelang.autotuner import AutoTuner, autotune
from tlc.tilelang.jit import _target
from tlc.tilelang.param import KernelParam
from tlc.tilelang.utils.tensor import TensorSupplyType, get_tensor_supply


@tilelang.jit(out_idx=[-1])
def scale(N, block, factor):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block), threads=32) as bx:
            for i in T.Parallel(block):
                if bx * block + i < N:
                    B[bx * block + i] = A[bx * block + i] * factor

    return main


@tilelang.jit
def add(A, B, block):
    M, N = T.const("M, N")
    A: T.Tensor((M, N), "float32")
    B: T.Tensor((M, N), "float32")
    C = T.empty((M, N), "float32")
    with T.Kernel(T.ceildiv(N, block), M, threads=32) as (bx, by):
        for j in T.Parallel(block):
            if bx * block + j < N:
                C[by, bx * block + j] = A[by, bx * block + j] + B[by, bx * block + j]
    return C


class FakeTensor:
    """What the layer reads of a tensor before launching: its shape."""

    def __init__(self, *shape):
        self.shape = shape


@pytest.fixture
def launches(monkeypatch):
    """Records each launch (the kernel and its arguments) instead of running it."""
    seen = []

    def record(kernel, *args, **kwargs):
        seen.append((kernel, args))
        return "outputs"

    monkeypatch.setattr(tlc.Kernel, "__call__", record)
    return seen


def test_a_factory_compiles_once_per_arguments():
    k = scale(100, 32, 2.0)
    assert isinstance(k, tilelang.JITKernel) and k.out_idx == [1]
    assert scale(100, 32, 2.0) is k and scale(100, 32, 3.0) is not k
    a = np.arange(100, dtype=np.float32)
    _, b = k.interpret(a, None)
    np.testing.assert_array_equal(b, a * 2)
    assert scale.mode == "lazy" and add.mode == "eager"


def test_an_eager_kernel_is_specialized_to_the_tensors_it_is_called_with(launches):
    a, b = FakeTensor(8, 40), FakeTensor(8, 40)
    assert add(a, b, 32) == "outputs"
    kernel, args = launches[-1]
    assert args == (a, b)  # the declared tensors, in the signature's order; C allocated
    first = add.compile(a, b, 32)
    assert [p.shape for p in first.params] == [(8, 40)] * 3 and first.out_idx == [2]
    add(FakeTensor(8, 40), FakeTensor(8, 40), 32)
    assert launches[-1][0] is kernel  # same sizes and values: the same compiled kernel
    add(FakeTensor(4, 72), FakeTensor(4, 72), block=32)
    assert launches[-1][0] is not kernel
    assert [p.shape for p in add.compile(FakeTensor(4, 72), FakeTensor(4, 72), 32).params][0] == (4, 72)


def test_an_eager_kernel_compiled_without_tensors():
    k = add.compile(M=3, N=50, block=32)
    assert [p.shape for p in k.params] == [(3, 50)] * 3
    a, b = np.ones((3, 50), np.float32), np.full((3, 50), 2.0, np.float32)
    np.testing.assert_array_equal(k.interpret(a, b, None)[2], a + b)
    # A size left out stays a symbolic dim: any size at launch.
    k = add.compile(block=32)
    assert [p.shape for p in k.params] == [("M", "N")] * 3


def test_eager_call_errors_name_what_is_wrong():
    with pytest.raises(ValueError, match="`N` is 40 from the shape of `A` but 41 from the shape of `B`"):
        add.compile(FakeTensor(8, 40), FakeTensor(8, 41), 32)
    with pytest.raises(TypeError, match=r"needs the tensor\(s\) \['B'\] to launch"):
        add(FakeTensor(8, 40), block=32)
    with pytest.raises(TypeError, match="no parameter or T.const size `blok`"):
        add.compile(blok=32)
    with pytest.raises(TypeError, match="missing the argument `block`"):
        add.compile(M=3, N=4)
    with pytest.raises(ValueError, match="out_idx is for kernel factories"):
        tilelang.jit(out_idx=[2])(add.func)


def test_compile_takes_tilelangs_options():
    f = scale.get_tir(64, 32, 1.5)
    assert tilelang.compile(f, out_idx=[1], target="cuda -arch=sm_90a").target == "sm_90a"
    assert tilelang.compile(f, target={"kind": "cuda", "arch": "sm_86"}).target == "sm_80"
    assert tilelang.compile(f, execution_backend="cython").out_idx == []
    assert _target(None) is None and _target("auto") is None and _target("sm_90") == "sm_90a"
    for bad in ("hip", "llvm", "cuda -arch=sm_75"):
        with pytest.raises(ValueError, match="target"):
            tilelang.compile(f, target=bad)
    with pytest.raises(ValueError, match="execution_backend 'cutedsl'"):
        tilelang.compile(f, execution_backend="cutedsl")
    with pytest.raises(ValueError, match="compile_flags"):
        tilelang.compile(f, compile_flags=["-O3"])
    with pytest.raises(ValueError, match="target_host"):
        tilelang.compile(f, target_host="llvm")
    with pytest.raises(ValueError, match="drop out_idx"):
        tilelang.compile(add.get_tir(block=32), out_idx=[2])


def test_pass_configs_are_honored_or_refused_by_name():
    ok = {
        tilelang.PassConfigKey.TL_ENABLE_FAST_MATH: True,
        "tl.disable_warp_specialized": True,
        "tl.disable_fast_math": False,
    }
    assert pass_configs.resolve(ok).disable_tma
    assert not pass_configs.resolve({"tl.disable_tma_lower": False}).disable_tma
    refused = [
        ({"tl.enable_fast_math": False}, "IEEE-accurate"),
        ({"tl.disable_fast_math": True}, "IEEE-accurate"),
        ({tilelang.PassConfigKey.TL_DISABLE_THREAD_STORAGE_SYNC: True}, "`tl.disable_thread_storage_sync` has no equivalent"),
        ({"tl.ptxas_register_usage_level": 10}, "`tl.ptxas_register_usage_level` has no equivalent"),
        ({"tl.disable_tma_lower": "maybe"}, "takes a bool"),
    ]
    f = scale.get_tir(64, 32, 1.5)
    for configs, message in refused:
        with pytest.raises(tilelang.PassConfigError, match=message):
            tilelang.compile(f, pass_configs=configs)


def test_disabling_tma_marks_every_copy():
    src = (
        "T.copy(A[0, 0], S)\n"
        "T.copy(\n    S,\n    B[0, 0],\n)\n"
        "T.copy(A[0, 0], S, disable_tma=False)\n"
        "x = T.copy(A[by * 64, k], S[0:64, 0:32], coalesced_width=8)  # T.copy(...)\n"
    )
    out = pass_configs.without_tma(src)
    assert out.splitlines() == [
        "T.copy(A[0, 0], S, disable_tma=True)",
        "T.copy(",
        "    S,",
        "    B[0, 0], disable_tma=True,",
        ")",
        "T.copy(A[0, 0], S, disable_tma=False)",
        "x = T.copy(A[by * 64, k], S[0:64, 0:32], coalesced_width=8, disable_tma=True)  # T.copy(...)",
    ]


def gemm_factory(M, N, K, block_M, block_N, block_K=32, threads=128):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), "float16")
            B_s = T.alloc_shared((block_K, block_N), "float16")
            C_l = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(C_l)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, ko * block_K], A_s)
                T.copy(B[ko * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * block_M, bx * block_N])

    return main


CONFIGS = [
    {"block_M": 64, "block_N": 64, "block_K": 24},  # K not a multiple of 16: tlc refuses it
    {"block_M": 64, "block_N": 64, "block_K": 32},
    {"block_M": 32, "block_N": 64, "block_K": 32},
]


def test_autotuner_without_a_gpu_takes_the_first_config_that_compiles():
    tuner = AutoTuner.from_kernel(
        kernel=lambda **c: gemm_factory(128, 128, 64, **c), configs=CONFIGS
    ).set_compile_args(out_idx=[-1], target="auto")
    with pytest.warns(UserWarning, match="no GPU"):
        result = tuner.set_profile_args(skip_check=True).run(warmup=3, rep=20)
    assert result.config == CONFIGS[1] and result.latency is None
    assert "K = 24 is not a multiple of 16" in str(tuner.skipped[0][1])
    assert result.kernel.config == CONFIGS[1] and result.kernel.out_idx == [2]
    a, b = np.ones((128, 64), np.float16), np.ones((64, 128), np.float16)
    np.testing.assert_array_equal(result.kernel.interpret(a, b, None)[2], np.full((128, 128), 64.0))


def test_autotune_decorator_tunes_only_what_is_left_out():
    calls = []

    @autotune(configs=lambda M, N, K, **given: (calls.append((M, N, K)) or CONFIGS[1:]), warmup=3, rep=5)
    @tilelang.jit(out_idx=[-1])
    def gemm(M, N, K, block_M=None, block_N=None, block_K=None):
        return gemm_factory(M, N, K, block_M, block_N, block_K)

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # given configs: no tuning, no warning
        k = gemm(128, 128, 64, block_M=32, block_N=64, block_K=32)
    assert k.config is None
    with pytest.warns(UserWarning, match="no GPU"):
        tuned = gemm(128, 128, 64)
    assert tuned.config == CONFIGS[1] and calls[-1] == (128, 128, 64)
    assert gemm(128, 128, 64) is tuned  # tuned once per arguments
    assert gemm.compile(128, 128, 64) is tuned
    with pytest.raises(ValueError, match="do_not_specialize"):
        autotune(configs=CONFIGS, do_not_specialize=["M"])


def test_the_profiler_makes_inputs_of_the_parameters(monkeypatch):
    made = []

    class FakeTorch:
        float16, float32, int8, uint8 = "f16", "f32", "i8", "u8"

        class cuda:
            @staticmethod
            def current_device():
                return 0

        @staticmethod
        def device(kind, index):
            return f"{kind}:{index}"

        class _T:
            def __init__(self, how):
                self.how = how

            def uniform_(self, lo, hi):
                made[-1] = made[-1] + (("uniform", lo, hi),)
                return self

            def to(self, dtype):
                return self

        @classmethod
        def empty(cls, shape, device, dtype):
            made.append(("empty", tuple(shape), dtype))
            return cls._T("empty")

        @classmethod
        def randint(cls, lo, hi, shape, device, dtype):
            made.append(("randint", lo, hi, tuple(shape), dtype))
            return cls._T("randint")

    import tlc._tensors as tensors

    monkeypatch.setattr(tensors, "_import_torch", lambda param: FakeTorch)
    monkeypatch.setattr("tlc.tilelang.utils.tensor._torch", lambda: FakeTorch)
    monkeypatch.setattr(tensors, "_torch_dtype", lambda torch, d: {"float16": "f16", "float32": "f32", "int8": "i8", "uint8": "u8"}[d])
    supply = get_tensor_supply(TensorSupplyType.Auto)
    supply(KernelParam("A", "float16", (4, 8)))
    supply(KernelParam("I", "int8", (3,)))
    supply(KernelParam("U", "uint8", (2,)))
    assert made == [
        ("empty", (4, 8), "f16", ("uniform", -1.0, 1.0)),
        ("randint", -2, 3, (3,), "i8"),
        ("randint", 0, 3, (2,), "u8"),
    ]
    # Outputs are not inputs; dims known only at launch need values.
    k = add.compile(block=32)
    profiler = k.get_profiler(TensorSupplyType.Integer)
    assert [p.name for p in profiler._get_params()] == ["A", "B"]
    with pytest.raises(ValueError, match="dim known only at launch"):
        profiler._get_inputs()
    made.clear()
    profiler._get_inputs(dynamic_symbolic_constraints={"M": 2, "N": 5})
    assert [m[3] for m in made] == [(2, 5), (2, 5)]
    with pytest.raises(ValueError, match="dim `N` is known only at launch"):
        profiler._get_inputs(dynamic_symbolic_constraints={"M": 2})
    with pytest.raises(TypeError, match="TensorSupplyType"):
        k.get_profiler("Auto")


def test_do_bench_refuses_unknown_modes_before_touching_a_gpu():
    with pytest.raises(ValueError, match="return_mode"):
        tilelang.profiler.do_bench(lambda: None, return_mode="p50")
    with pytest.raises(ValueError, match="backend"):
        tilelang.profiler.do_bench(lambda: None, backend="nsys")


def test_small_helpers():
    assert tilelang.cdiv(10, 3) == 4 and T.cdiv(9, 3) == 3
    assert str(tilelang.cdiv(T.symbolic("n"), 4).text) == "T.ceildiv(n, 4)"
    assert T.dtype("float16") == "float16" and T.float16 == "float16"
    k = scale(64, 32, 1.0)
    assert "ld.global" in k.get_kernel_source() and k.kernel_source == k.ptx
    with pytest.raises(T.UnknownName, match="`T.jit_compile` is not part"):
        T.jit_compile


class NumpyTorch:
    """The part of torch's API the profiler, do_bench and the autotuner call, on NumPy
    arrays and the host clock: enough to run their logic end to end on the CPU, with the
    kernel's launches done by the reference interpreter."""

    float16, float32, int32, int8 = np.float16, np.float32, np.int32, np.int8
    float = np.float32

    class Tensor:
        def __init__(self, a):
            self.a = a

        shape = property(lambda self: self.a.shape)
        dtype = property(lambda self: self.a.dtype.type)
        device = "cuda:0"

        def numel(self):
            return self.a.size

        def to(self, dtype):
            return NumpyTorch.Tensor(self.a.astype(dtype))

        def cpu(self):
            return self

        def sum(self):
            return NumpyTorch.Tensor(self.a.sum())

        def item(self):
            return self.a.item()

        def nonzero(self):
            return NumpyTorch.Tensor(np.argwhere(self.a))

        def __getitem__(self, i):
            return NumpyTorch.Tensor(self.a[i])

        def tolist(self):
            return self.a.tolist()

        def __invert__(self):
            return NumpyTorch.Tensor(~self.a)

        def zero_(self):
            return self

        def uniform_(self, lo, hi):
            self.a[...] = RNG_LAYER.uniform(lo, hi, self.a.shape)
            return self

    class cuda:
        @staticmethod
        def current_device():
            return 0

        @staticmethod
        def synchronize(*_):
            pass

        class device:
            def __init__(self, index):
                pass

            def __enter__(self):
                return self

            def __exit__(self, *_):
                return False

        class Event:
            def __init__(self, enable_timing):
                self.t = None

            def record(self):
                import time

                self.t = time.perf_counter()

            def synchronize(self):
                pass

            def elapsed_time(self, end):
                return (end.t - self.t) * 1e3

    @staticmethod
    def device(kind, index=None):
        return f"{kind}:{index}"

    @classmethod
    def empty(cls, shape, device=None, dtype=np.float32):
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        # The L2 flush buffer (256 MiB) is never read: a placeholder of its shape.
        return cls.Tensor(np.empty(shape if np.prod(shape) < 1 << 20 else (1,), dtype))

    @classmethod
    def tensor(cls, values, dtype=None):
        return cls.Tensor(np.asarray(values, dtype))

    @classmethod
    def mean(cls, t):
        return cls.Tensor(t.a.mean())

    @classmethod
    def isclose(cls, a, b, rtol, atol, equal_nan):
        return cls.Tensor(np.isclose(a.a, b.a, rtol=rtol, atol=atol, equal_nan=equal_nan))


RNG_LAYER = np.random.default_rng(7)


@pytest.fixture
def numpy_torch(monkeypatch):
    """torch as NumpyTorch, launches run by the interpreter on the arrays."""
    import sys

    import tlc._tensors as tensors

    monkeypatch.setitem(sys.modules, "torch", NumpyTorch)
    monkeypatch.setattr(tensors, "_import_torch", lambda param: NumpyTorch)
    monkeypatch.setattr(tensors, "_torch_dtype", lambda torch, d: {"float32": np.float32, "float16": np.float16}[d])
    launched = []

    def interpret(kernel, *tensors_):
        launched.append(kernel)
        arrays = [t.a for t in tensors_] + [None] * len(kernel.out_idx)
        out = tlc.interpret(kernel, *arrays)
        outs = tuple(NumpyTorch.Tensor(out[i]) for i in kernel.out_idx)
        return outs[0] if len(outs) == 1 else (outs or None)

    monkeypatch.setattr(tlc.Kernel, "__call__", interpret)
    return launched


def test_profiler_checks_and_times_through_torchs_api(numpy_torch):
    k = scale(100, 32, 2.0)
    profiler = k.get_profiler()
    profiler.assert_allclose(lambda a: NumpyTorch.Tensor(a.a * 2), rtol=0, atol=0)
    with pytest.raises(AssertionError, match="differ in 100 of 100 elements"):
        profiler.assert_allclose(lambda a: NumpyTorch.Tensor(a.a * 2 + 1))
    ms = profiler.do_bench(n_warmup=1, n_repeat=3)
    assert isinstance(ms, float) and ms > 0
    ref_ms = profiler.do_bench(lambda a: a, warmup=1, rep=1)
    assert ref_ms >= 0 and len(numpy_torch) >= 1 + 1 + 5 + 1 + 3


def test_autotune_on_a_gpu_checks_times_and_keeps_the_fastest(numpy_torch, monkeypatch):
    import tlc.tilelang.autotuner as tuner_module

    monkeypatch.setattr(tuner_module, "_gpu_present", lambda: True)
    times = {32: 2.0, 64: 1.0, 16: 3.0}
    monkeypatch.setattr(
        tlc.tilelang.profiler.Profiler, "do_bench",
        lambda self, func=None, **kw: 5.0 if func is not None else times[self._func.prim_func_block],
    )
    built = []

    def factory(block):
        built.append(block)
        return scale.func(100, block, 2.0)

    class Tuner(AutoTuner):
        def _build(self, config):
            k = super()._build(config)
            k.prim_func_block = config["block"]
            return k

    result = (
        Tuner.from_kernel(kernel=factory, configs=[{"block": b} for b in (32, 64, 16)])
        .set_compile_args(out_idx=[1])
        .set_profile_args(ref_prog=lambda a: NumpyTorch.Tensor(a.a * 2))
        .run(warmup=1, rep=1)
    )
    assert result.config == {"block": 64} and result.latency == 1.0 and result.ref_latency == 5.0
    assert result.kernel.latency == 1.0 and result.kernel.ref_latency == 5.0 and built == [32, 64, 16]
    # A config whose output differs from the reference is skipped.
    bad = Tuner.from_kernel(kernel=factory, configs=[{"block": 32}]).set_compile_args(out_idx=[1])
    with pytest.warns(UserWarning, match="differs from the reference"), pytest.raises(RuntimeError, match="no config"):
        bad.set_profile_args(ref_prog=lambda a: NumpyTorch.Tensor(a.a)).run()
