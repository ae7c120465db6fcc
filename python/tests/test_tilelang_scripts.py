"""TileLang's example scripts (tilelang_scripts/: whole files, only their imports changed)
on the CPU: each is imported unchanged and its own kernel functions are called the way its
`main()` calls them, at small sizes — `@tilelang.jit` factories, eager kernels through
`.compile(...)`, `@autotune` with and without its config, `AutoTuner.from_kernel` — then
compiled for sm_80 and sm_90a and, where the interpreter is quick, run against NumPy.
Their `main()`s (torch, a GPU) run on the GPU machine: scripts/gpu-scripts.sh.

torch, einops and triton are not installed here: while the scripts are imported, stand-ins
take their place (script_stand_ins.py: a script's top level only imports them, makes
tensors of some shape and seeds torch's RNG); they are removed again, so nothing else sees
them, and no test reads what they compute."""

import sys

import numpy as np
import pytest

import tlc
from script_harness import HERE, attention, compiled_for_both, e4m3, f64, import_scripts, rand
from script_stand_ins import is_stand_in

S = import_scripts([
    "example_gemm", "example_gemm_autotune", "example_tilelang_gemm_splitk", "example_dynamic",
    "example_elementwise_add", "rms_norm", "example_per_token_cast_to_fp8",
    "example_mha_fwd_bshd", "example_gqa_fwd_bshd", "example_gemv", "example_convolution",
    "example_mha_inference", "example_gqa_decode",
])
T = S["example_gemm"].T  # the scripts' `tlc.tilelang.language`


def both_targets(jit_fn, *args, **kwargs):
    """The script function's kernel compiled for sm_80 and sm_90a; the sm_80 one."""
    return compiled_for_both(jit_fn, *args, **kwargs)


def test_the_scripts_import_unchanged_but_for_their_imports():
    for path in sorted(HERE.glob("*.py")):
        if path.name == "copy_script.py":
            continue
        text = path.read_text(encoding="utf-8")
        assert text.startswith("# Source: tile-ai/tilelang examples/"), path.name
        assert "(a35008a42531c62b976ae4cec3855d4383db0f3c)" in text, path.name
        body = [ln for ln in text.splitlines() if not ln.startswith("#")]
        for line in body:
            stripped = line.strip()
            if stripped.startswith(("import tilelang", "from tilelang", "from tvm")):
                pytest.fail(f"{path.name}: `{stripped}` is not rewritten")


def test_gemm_eager_compile_and_profiler():
    m = S["example_gemm"]
    k = m.matmul.compile(M=96, N=64, K=96, block_M=32, block_N=32, block_K=32)
    assert [p.shape for p in k.params] == [(96, 96), (96, 64), (96, 64)] and k.out_idx == [2]
    assert k.get_kernel_source().startswith("// tlc-manifest:")
    profiler = k.get_profiler()
    assert profiler.result_idx == [2] and [p.name for p in profiler._get_params()] == ["A", "B"]
    a, b = rand(96, 96, dtype=np.float16), rand(96, 64, dtype=np.float16)
    _, _, c = k.interpret(a, b, None)
    np.testing.assert_allclose(f64(c), f64(a) @ f64(b), rtol=1e-2, atol=2e-2)
    both_targets(m.matmul, M=96, N=64, K=96, block_M=32, block_N=32, block_K=32)


def test_gemm_autotune_factory_and_tuner():
    m = S["example_gemm_autotune"]
    k = m.matmul(128, 128, 64, block_M=64, block_N=64, block_K=32, num_stages=2, thread_num=128, enable_rasteration=True)
    assert k is m.matmul(128, 128, 64, block_M=64, block_N=64, block_K=32, num_stages=2, thread_num=128, enable_rasteration=True)
    a, b = rand(128, 64, dtype=np.float16), rand(128, 64, dtype=np.float16)
    _, _, c = k.interpret(a, b, None)
    np.testing.assert_allclose(f64(c), f64(a) @ f64(b).T, rtol=1e-2, atol=2e-2)
    both_targets(m.matmul, 128, 128, 64, block_M=64, block_N=64, block_K=32, num_stages=2, thread_num=128, enable_rasteration=True)
    # AutoTuner.from_kernel(...).run(): no GPU here, so the first config, with a warning.
    with pytest.warns(UserWarning, match="no GPU, nothing timed"):
        result = m.get_best_config(128, 128, 64)
    assert result.config == m.get_configs(128, 128, 64)[0] and result.latency is None
    assert result.kernel.config == result.config and result.kernel.out_idx == [2]
    with pytest.raises(NotImplementedError, match="carver"):
        m.get_best_config(128, 128, 64, with_roller=True)


def test_splitk_accumulates_into_the_given_output():
    m = S["example_tilelang_gemm_splitk"]
    k = m.matmul.compile(M=64, N=64, K=128, block_M=32, block_N=32, block_K=32, split_k=2)
    assert k.out_idx == []  # C is a parameter: the call writes it in place
    a, b = rand(64, 128, dtype=np.float16), rand(128, 64, dtype=np.float16)
    _, _, c = k.interpret(a, b, np.zeros((64, 64), np.float32))
    np.testing.assert_allclose(f64(c), f64(a) @ f64(b), rtol=1e-3, atol=1e-3)
    both_targets(m.matmul, M=64, N=64, K=128, block_M=32, block_N=32, block_K=32, split_k=2)


def test_dynamic_shapes_stay_symbolic():
    m = S["example_dynamic"]
    args = dict(block_M=64, block_N=64, block_K=32, trans_A=False, trans_B=True, in_dtype="float16",
                out_dtype="float16", accum_dtype="float32", num_stages=2, threads=128)
    k = m.matmul_dynamic_mnk.compile(**args)
    assert [p.shape for p in k.params] == [("m", "k"), ("n", "k"), ("m", "n")]
    a, b = rand(70, 50, dtype=np.float16), rand(90, 50, dtype=np.float16)
    _, _, c = k.interpret(a, b, None)
    np.testing.assert_allclose(f64(c), f64(a) @ f64(b).T, rtol=1e-2, atol=2e-2)
    both_targets(m.matmul_dynamic_mnk, **args)


def test_elementwise_add():
    m = S["example_elementwise_add"]
    args = dict(block_M=32, block_N=32, threads=128, in_dtype=T.float32, out_dtype=T.float32)
    k = m.elementwise_add.compile(M=64, N=96, **args)
    a, b = rand(64, 96), rand(64, 96)
    _, _, c = k.interpret(a, b, None)
    np.testing.assert_array_equal(c, a + b)
    both_targets(m.elementwise_add, M=64, N=96, **args)


def test_rms_norm_with_its_pass_configs():
    m = S["rms_norm"]
    assert m.rms_norm.pass_configs == {"tl.disable_tma_lower": True}
    a = rand(4, 1024)
    ref = f64(a) / np.sqrt((f64(a) ** 2).mean(axis=1, keepdims=True) + 1e-12)
    for fn, extra in ((m.rms_norm, {}), (m.rms_norm_splitk, {"blk_k": 512})):
        k = fn.compile(M=4, N=1024, blk_m=1, **extra)
        assert "disable_tma=True" in k.prim_func.source  # tl.disable_tma_lower, applied
        _, b = k.interpret(a, None)
        np.testing.assert_allclose(b, ref, rtol=1e-5, atol=1e-5)
        both_targets(fn, M=4, N=1024, blk_m=1, **extra)


def test_per_token_cast_to_fp8():
    m = S["example_per_token_cast_to_fp8"]
    k = m.per_token_cast_to_fp8.compile(M=16, N=256, blk_m=8)
    assert k.out_idx == [1, 2]
    x = rand(16, 256) * 3
    _, q, amax = k.interpret(x, None, None)
    groups = x.reshape(16, 2, 128)
    scale = np.maximum(np.abs(groups).max(axis=2), 1e-4) / 448.0
    np.testing.assert_allclose(amax, scale, rtol=1e-6)
    deq = e4m3(q).reshape(16, 2, 128) * scale[:, :, None]
    np.testing.assert_allclose(deq, groups, rtol=0.07, atol=1e-3)  # e4m3 keeps 3 mantissa bits
    both_targets(m.per_token_cast_to_fp8, M=16, N=256, blk_m=8)


def test_mha_forward_with_its_config_given():
    m = S["example_mha_fwd_bshd"]
    k = m.flashattn(1, 2, 128, 64, False, block_M=64, block_N=64, num_stages=1, threads=128)
    assert k.pass_configs == {"tl.enable_fast_math": True} and k.config is None
    q, kk, v = (rand(1, 128, 2, 64, dtype=np.float16) for _ in range(3))
    out = k.interpret(q, kk, v, None)[3]
    np.testing.assert_allclose(f64(out), attention(q, kk, v), rtol=2e-2, atol=2e-2)
    both_targets(m.flashattn.jit_impl, 1, 2, 128, 64, False, block_M=64, block_N=64, num_stages=1, threads=128)


def test_gqa_forward_tuned_and_not():
    m = S["example_gqa_fwd_bshd"]
    k = m.flashattn(1, 4, 128, 64, False, groups=2, block_M=64, block_N=64, num_stages=2, threads=128)
    q = rand(1, 128, 4, 64, dtype=np.float16)
    kk, v = rand(1, 128, 2, 64, dtype=np.float16), rand(1, 128, 2, 64, dtype=np.float16)
    out = k.interpret(q, kk, v, None)[3]
    np.testing.assert_allclose(f64(out), attention(q, kk, v, groups=2), rtol=2e-2, atol=2e-2)
    # main(tune=True)'s call: the configs tuned; without a GPU, the first one that compiles.
    with pytest.warns(UserWarning, match="no GPU"):
        tuned = m.flashattn(1, 4, 128, 64, False, groups=2)
    assert tuned.config == m.get_configs()[0] and tuned.latency is None and tuned.ref_latency is None


def test_gemv_kernels():
    m = S["example_gemv"]
    a, b = rand(256, dtype=np.float16), rand(128, 256, dtype=np.float16)
    ref = f64(b) @ f64(a)
    calls = [
        (m.naive_gemv, dict(BLOCK_N=128, BLOCK_K=128)),
        (m.naive_splitk_gemv, dict(BLOCK_N=32, BLOCK_K=32)),
        (m.splitk_gemv, dict(BLOCK_N=32, BLOCK_K=32, reduce_threads=32)),
        (m.splitk_gemv_vectorized, dict(BLOCK_N=2, reduce_threads=32)),
    ]
    for fn, args in calls:
        k = fn.compile(N=128, K=256, **args)
        _, _, c = k.interpret(a, b, None)
        np.testing.assert_allclose(f64(c), ref, rtol=1e-2, atol=2e-2, err_msg=fn.__name__)
    both_targets(m.naive_gemv, N=128, K=256, BLOCK_N=128, BLOCK_K=128)
    # @autotune with its config given compiles that config.
    k = m.gemv_alloc_reducer.compile(M=128, N=256, block_M=128, block_N=128)
    _, _, o = k.interpret(b, a, None)
    np.testing.assert_allclose(f64(o), ref, rtol=1e-2, atol=2e-2)
    # The thread all-reduce over the y threads (BLOCK_N lanes apart: across warps once
    # BLOCK_N * reduce_threads > 32, through a shared scratch), in the script's own kernel
    # and in its autotuned twin (without a GPU: the first config, which now compiles).
    for bn, rt in [(2, 32), (4, 8), (32, 4)]:
        k = m.splitk_gemv_vectorized_tvm.compile(N=128, K=256, BLOCK_N=bn, reduce_threads=rt)
        _, _, c = k.interpret(a, b, None)
        np.testing.assert_allclose(f64(c), ref, rtol=1e-2, atol=2e-2, err_msg=f"tvm {bn}x{rt}")
    both_targets(m.splitk_gemv_vectorized_tvm, N=128, K=256, BLOCK_N=2, reduce_threads=32)
    with pytest.warns(UserWarning, match="no GPU"):
        tuned = m.get_autotuned_kernel.compile(N=128, K=256)
    _, _, c = tuned.interpret(a, b, None)
    np.testing.assert_allclose(f64(c), ref, rtol=1e-2, atol=2e-2, err_msg="autotuned")


def test_convolution():
    m = S["example_convolution"]
    args = dict(S=1, D=1, P=1, block_M=64, block_N=64, block_K=32, num_stages=2, threads=128)
    k = m.convolution.compile(N=1, C=32, H=5, W=4, F=64, K=3, **args)
    data, w = rand(1, 5, 4, 32, dtype=np.float16), rand(3, 3, 32, 64, dtype=np.float16)
    out = k.interpret(data, w, None)[2]
    padded = np.pad(f64(data), ((0, 0), (1, 1), (1, 1), (0, 0)))
    ref = np.zeros((1, 5, 4, 64))
    for i in range(3):
        for j in range(3):
            ref += np.einsum("nhwc,cf->nhwf", padded[:, i:i + 5, j:j + 4, :], f64(w[i, j]))
    np.testing.assert_allclose(f64(out), ref, rtol=1e-2, atol=5e-2)
    both_targets(m.convolution, N=1, C=32, H=5, W=4, F=64, K=3, **args)


def test_flash_decoding_kernels_compile():
    both_targets(S["example_mha_inference"].flashattn, 1, 2, 64, 256, 64, False, 64, 64)
    m = S["example_gqa_decode"]
    assert m.flashattn.jit_impl.pass_configs  # TL_DISABLE_WARP_SPECIALIZED, honored
    both_targets(m.flashattn.jit_impl, 1, 8, 2, 256, 64, block_N=64, block_H=64, num_split=2, num_stages=2, threads=128)


def test_no_script_left_a_stand_in_behind():
    for name in ("torch", "torch.nn", "einops", "triton"):
        assert not is_stand_in(sys.modules.get(name))
