"""TileLang's GEMM-family example scripts (tilelang_scripts/, only their imports changed) on
the CPU: persistent and stream-K GEMMs, the block-sparse GEMM, the FP8 GEMM, split-K with a
tile atomic add. Each kernel function is called as the script's `main()` calls it (smaller
sizes where the interpreter runs it), compiled for both targets (sm_90a alone where sm_80
refuses it, which is checked too) and interpreted against NumPy. The scripts' own `main()`s
run on a GPU: scripts/gpu-scripts.sh."""

import numpy as np
import pytest

import tlc
from script_harness import compiled_for_both, e4m3, f64, import_scripts, rand
from tlc.tilelang.carver.arch import driver
from tlc.tilelang.language.fp8 import determine_fp8_type

S = import_scripts([
    "example_gemm_persistent", "example_tilelang_gemm_streamk", "example_blocksparse_gemm",
    "example_tilelang_gemm_fp8", "example_tilelang_gemm_splitk_vectorize_atomicadd",
])


def test_persistent_gemm_walks_its_tiles_over_the_gpus_sms(monkeypatch):
    m = S["example_gemm_persistent"]
    # The kernel is sized by the GPU's SM count (driver.get_num_sms(), read when the kernel
    # is built); 4 SMs make each block walk several of the 2 x 3 tiles.
    monkeypatch.setattr(driver, "get_num_sms", lambda device_id=0: 4)
    small = dict(block_M=64, block_N=64, block_K=32, threads=128, num_stages=2)
    k = m.matmul_persistent.compile(M=128, N=192, K=96, **small)
    kernels = k.manifest.get("kernels") or [k.manifest]
    assert [e["grid"] for e in kernels] == [[{"int": 4}]]
    a, b = rand(128, 96, dtype=np.float16), rand(96, 192, dtype=np.float16)
    np.testing.assert_allclose(f64(k.interpret(a, b, None)[2]), f64(a) @ f64(b), rtol=1e-2, atol=2e-2)
    k = m.matmul_non_persistent.compile(M=128, N=192, K=96, **small)
    np.testing.assert_allclose(f64(k.interpret(a, b, None)[2]), f64(a) @ f64(b), rtol=1e-2, atol=2e-2)
    # main()'s tiles (128 x 256 x 64, 3 stages, 256 threads) on an H100's 132 SMs.
    monkeypatch.setattr(driver, "get_num_sms", lambda device_id=0: 132)
    main_config = dict(block_M=128, block_N=256, block_K=64, threads=256, num_stages=3)
    compiled_for_both(m.matmul_persistent, M=256, N=512, K=128, **main_config)


def test_the_sm_count_needs_a_gpu():
    # Without torch's CUDA device the count is an error, never a guess.
    with pytest.raises(RuntimeError, match="device properties"):
        driver.get_num_sms()


def test_stream_k_at_the_scripts_own_module_level_sizes():
    m = S["example_tilelang_gemm_streamk"]
    # The script sizes everything at its top level (A: 256 x 512, B: 1024 x 512, 108 SMs).
    args = (m.streamk_tiles, m.BLOCK_SIZE_M, m.BLOCK_SIZE_N, m.BLOCK_SIZE_K, False, True)
    types = ("float16", "float32", "float32", 2, 64)
    c = np.zeros((m.m, m.n), np.float32)
    k = m.tl_matmul_streamk.compile(m.A, m.B, c, *args, *types)
    assert [p.shape for p in k.params] == [(256, 512), (1024, 512), (256, 1024)] and k.out_idx == []
    a, b = rand(256, 512, dtype=np.float16), rand(1024, 512, dtype=np.float16)
    out = k.interpret(a, b, c)[2]
    np.testing.assert_allclose(f64(out), f64(a) @ f64(b).T, rtol=1e-3, atol=2e-3)
    compiled_for_both(m.tl_matmul_streamk, m.A, m.B, c, *args, *types)


def test_block_sparse_gemm_with_its_default_config():
    m = S["example_blocksparse_gemm"]
    config = dict(block_M=64, block_N=64, block_K=32, num_stages=2, thread_num=128, enable_rasteration=True)
    k = m.blocksparse_matmul.compile(M=128, N=128, K=128, **config)
    assert k.out_idx == [3]
    a, b = rand(128, 128, dtype=np.float16), rand(128, 128, dtype=np.float16)
    mask = np.random.default_rng(5).uniform(size=(2, 2, 4)) > 0.5
    c = k.interpret(a, b, mask, None)[3]
    ref = np.zeros((128, 128))
    for i in range(2):
        for j in range(2):
            for kk in range(4):
                if mask[i, j, kk]:
                    rows, cols, ks = slice(64 * i, 64 * i + 64), slice(64 * j, 64 * j + 64), slice(32 * kk, 32 * kk + 32)
                    ref[rows, cols] += f64(a[rows, ks]) @ f64(b[ks, cols])
    np.testing.assert_allclose(f64(c), ref, rtol=1e-2, atol=2e-2)
    defaults = dict(block_M=m.DEFAULT_BLOCK_M, block_N=m.DEFAULT_BLOCK_N, block_K=m.DEFAULT_BLOCK_K,
                    num_stages=m.DEFAULT_NUM_STAGES, thread_num=m.DEFAULT_THREAD_NUM,
                    enable_rasteration=m.DEFAULT_ENABLE_RASTERIZATION)
    compiled_for_both(m.blocksparse_matmul.jit_impl, M=256, N=256, K=256, **defaults)


def test_fp8_gemm_both_formats_on_sm90a():
    m = S["example_tilelang_gemm_fp8"]
    rng = np.random.default_rng(8)
    for fmt in ("e4m3", "e5m2"):
        dtype = determine_fp8_type(fmt)
        assert dtype.as_torch  # T.dtype(dtype).as_torch() is how the script makes its tensors
        k90 = compiled_for_both(m.matmul, M=128, N=128, K=128, block_M=128, block_N=128, block_K=64, dtype=dtype, targets=("sm_90a",))
        with pytest.raises(tlc.CompileError, match=r"example_tilelang_gemm_fp8.py:\d+:\d+: error: a float8_e\dm\d T.gemm runs on sm_90a's wgmma only"):
            compiled_for_both(m.matmul, M=128, N=128, K=128, block_M=128, block_N=128, block_K=64, dtype=dtype, targets=("sm_80",))
        if fmt == "e4m3":
            # Operands: e4m3 bit patterns of small values; the result rounds to e4m3 too.
            a = rng.integers(0x20, 0x38, (128, 128)).astype(np.uint8) | (rng.integers(0, 2, (128, 128)) << 7).astype(np.uint8)
            b = rng.integers(0x20, 0x38, (128, 128)).astype(np.uint8)
            c = k90.interpret(a, b, None)[2]
            ref = e4m3(a) @ e4m3(b).T
            np.testing.assert_allclose(e4m3(c), ref, rtol=0.07, atol=0.02)


def test_split_k_with_a_tile_atomic_add_accumulates_in_place():
    m = S["example_tilelang_gemm_splitk_vectorize_atomicadd"]
    a, b = rand(128, 256, dtype=np.float16), rand(256, 128, dtype=np.float16)
    k = m.matmul.compile(a, b, np.zeros((128, 128), np.float32), block_M=64, block_N=64, block_K=32, split_k=4)
    assert k.out_idx == []
    c = k.interpret(a, b, np.zeros((128, 128), np.float32))[2]
    np.testing.assert_allclose(f64(c), f64(a) @ f64(b), rtol=1e-3, atol=2e-3)
    compiled_for_both(m.matmul, M=1024, N=1024, K=1024, block_M=128, block_N=128, block_K=32, split_k=4)
