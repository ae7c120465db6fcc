"""A Triton float16 matmul (Triton's tutorial kernel, grouped tile order) with fixed configs,
for the benchmarks in this folder. Importing it needs Triton; the benchmarks import it only
when Triton is importable.

No autotuning: device time is scarce, so each shape class gets one sensible config.
``HOPPER`` is the tutorial's first fp16 config (128x256x64 tiles, 8 warps, 3 stages,
GROUP_M 8); ``SMALL`` is for the one-tile launch-overhead shape.
"""

import torch
import triton
import triton.language as tl

# BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M as constexprs; num_warps and num_stages as launch options.
HOPPER = dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=3)
SMALL = dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, GROUP_M=8, num_warps=4, num_stages=2)


@triton.jit
def matmul_kernel(
    a_ptr, b_ptr, c_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    """C = A @ B, one BLOCK_M x BLOCK_N tile of C per program, float32 accumulation."""
    # Grouped order: GROUP_M rows of tiles share each column of B (better L2 reuse).
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    # Rows / columns past the edge wrap (% M, % N): loads stay in bounds, the store masks.
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        acc += tl.dot(a, b)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, acc.to(tl.float16), mask=c_mask)


def grid(M, N, config):
    """The launch grid: one program per tile of C."""
    return (triton.cdiv(M, config["BLOCK_M"]) * triton.cdiv(N, config["BLOCK_N"]),)


def launch_args(a, b, c):
    """The kernel's positional arguments for C = A @ B."""
    M, K = a.shape
    N = b.shape[1]
    return (a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
            c.stride(0), c.stride(1))


def matmul(a, b, c=None, config=HOPPER):
    """C = A @ B for float16 A (M, K) and B (K, N); allocates C unless given."""
    M, K = a.shape
    if b.shape[0] != K:
        raise ValueError(f"inner dims differ: A is {tuple(a.shape)}, B is {tuple(b.shape)}")
    if c is None:
        c = torch.empty((M, b.shape[1]), device=a.device, dtype=torch.float16)
    matmul_kernel[grid(M, b.shape[1], config)](*launch_args(a, b, c), **config)
    return c
