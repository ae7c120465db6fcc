"""TileLang's example scripts of row-wise kernels (tilelang_scripts/, only their imports
changed) on the CPU: the grouped per-token FP8 cast, online softmax (a script that runs at
its top level), top-k and layer norm forward and backward (an autograd.Function). Each
kernel function is called as the script calls it, at small sizes, compiled for both
targets and interpreted against NumPy; the scripts themselves run on a GPU
(scripts/gpu-scripts.sh)."""

import numpy as np

from script_harness import bf16, compiled_for_both, e4m3, f64, import_scripts, rand, to_bf16

LAUNCHES = []  # what online_softmax.py's top level launches while it is imported
S = import_scripts([
    "example_group_per_split_token_cast_to_fp8", "online_softmax", "example_topk", "layernorm",
], launches=LAUNCHES)


def test_grouped_per_split_token_cast_to_fp8():
    m = S["example_group_per_split_token_cast_to_fp8"]
    assert m.dtype == "bfloat16"  # the script's module-level choice (`dtype = T.bfloat16`)
    sizes = [8, 20]  # rows of each group; M_max rounds the largest up to 128 as main() does
    M, N, BG, M_max = sum(sizes), 256, len(sizes), m.ceil_div(max(sizes), 128) * 128
    k = m.group_per_split_token_cast_to_fp8.compile(M=M, N=N, BG=BG, M_max=M_max, blk_m=8)
    assert k.out_idx == [2, 3]
    x = rand(M, N) * 4
    x_bits = to_bf16(x)
    _, _, q, amax = k.interpret(x_bits, np.array(sizes, np.int32), None, None)
    start = 0
    for g, rows in enumerate(sizes):
        groups = bf16(x_bits[start:start + rows]).reshape(rows, N // 128, 128)
        scale = np.maximum(np.abs(groups).max(axis=2), 1e-4) / 448.0
        np.testing.assert_allclose(amax[g, :rows], scale, rtol=1e-6)
        assert not amax[g, rows:].any() and not q[g, rows:].any()  # padding rows: zeros
        deq = e4m3(q[g, :rows]).reshape(rows, N // 128, 128) * scale[:, :, None]
        np.testing.assert_allclose(deq, groups, rtol=0.07, atol=1e-3)
        start += rows
    compiled_for_both(m.group_per_split_token_cast_to_fp8, M=8192, N=8192, BG=2, M_max=6144, blk_m=8)


def test_online_softmax_at_its_top_level_and_small():
    m = S["online_softmax"]
    # The script's top level compiled and launched its kernel on its 8192 x 8192 X.
    kernel, args = LAUNCHES[0]
    assert [p["shape"] for p in kernel.manifest["params"]] == [[{"int": 8192}, {"int": 8192}]] * 2
    assert len(args) == 1 and args[0] is m.X
    # The same kernel at a size the interpreter runs (its M, N are the module's globals).
    m.M, m.N = 4, 512
    k = m.softmax_kernel.compile(BLOCK_N=128)
    x = rand(4, 512, dtype=np.float16) * 4
    y = k.interpret(x, None)[1]
    e = np.exp(f64(x) - f64(x).max(axis=1, keepdims=True))
    np.testing.assert_allclose(f64(y), e / e.sum(axis=1, keepdims=True), rtol=1e-2, atol=1e-3)
    compiled_for_both(m.softmax_kernel, BLOCK_N=128)


def test_top_k_with_blk_m_given_is_not_tuned():
    m = S["example_topk"]
    k = m.tl_topk.compile(M=64, N=128, topk=6, blk_m=64)  # main(): blk_m given, threads default
    assert k.config is None and k.out_idx == [1, 2]
    logits = np.random.default_rng(3).permutation(64 * 128).reshape(64, 128).astype(np.float32) / 8192
    _, gates, idx = k.interpret(logits, None, None)
    order = np.argsort(-logits, axis=1)[:, :6]
    np.testing.assert_array_equal(idx, order)
    np.testing.assert_array_equal(gates, np.take_along_axis(logits, order, axis=1))
    compiled_for_both(m.tl_topk.jit_impl, M=320, N=128, topk=6, blk_m=64, threads=128)


def test_layer_norm_forward_and_backward():
    m = S["layernorm"]
    N, D, eps = 64, 256, 1e-5
    fwd = m._layernorm_fwd(N, D, eps=eps, in_dtype="float16", out_dtype="float16")
    assert fwd.out_idx == [3, 4, 5]
    x, g, b = rand(N, D, dtype=np.float16) * 2, rand(D, dtype=np.float16), rand(D, dtype=np.float16)
    _, _, _, y, mean, rstd = fwd.interpret(x, g, b, None, None, None)
    xf = f64(x)
    mu, var = xf.mean(axis=1), xf.var(axis=1)
    np.testing.assert_allclose(mean, mu, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(rstd, 1 / np.sqrt(var + eps), rtol=1e-4)
    xhat = (xf - mu[:, None]) / np.sqrt(var[:, None] + eps)
    np.testing.assert_allclose(f64(y), xhat * f64(g) + f64(b), rtol=1e-2, atol=1e-2)
    bwd = m._layernorm_bwd(N, D, in_dtype="float16")
    assert bwd.out_idx == [5]
    dy = rand(N, D, dtype=np.float16)
    zeros = np.zeros(D, np.float32)
    out = bwd.interpret(dy, x, g, mean, rstd, None, zeros.copy(), zeros.copy())
    dx, dgamma, dbeta = out[5], out[6], out[7]
    dxhat = f64(dy) * f64(g)
    r = (1 / np.sqrt(var + eps))[:, None]
    ref_dx = r * (dxhat - dxhat.mean(axis=1, keepdims=True) - xhat * (dxhat * xhat).mean(axis=1, keepdims=True))
    np.testing.assert_allclose(f64(dx), ref_dx, rtol=2e-2, atol=2e-2)
    np.testing.assert_allclose(dgamma, (f64(dy) * xhat).sum(axis=0), rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(dbeta, f64(dy).sum(axis=0), rtol=1e-3, atol=1e-3)
    # main()'s sizes and dtype (bfloat16).
    compiled_for_both(m._layernorm_fwd, 4096, 8192, eps=eps, in_dtype="bfloat16", out_dtype="bfloat16")
    compiled_for_both(m._layernorm_bwd, 4096, 8192, in_dtype="bfloat16")
