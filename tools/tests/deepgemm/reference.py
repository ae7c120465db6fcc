"""The reference for `tlc plan --deepgemm`: DeepGEMM's config heuristic for its normal FP8
GEMM, transcribed line by line from seed 004 (`deep_gemm/jit_kernels/gemm.py`, DeepGEMM as
of 2025-05-14: `get_best_configs`, `get_smem_config`, `get_swizzle_mode`,
`get_block_n_padding_for_smem_d`, `is_tma_multicast_legal`), with the normal GEMM's flags
fixed (not grouped contiguous / masked, not fp32-out, not wgrad). Standard library only.

Reads one problem per stdin line, `M N K NUM_GROUPS NUM_SMS`, and prints one JSON object per
line: the nine fields `tlc plan --deepgemm` prints, or `{"error": ...}` where the seed's
code asserts. `tools/tests/plan_deepgemm.rs` runs it and compares.
"""

import json
import math
import sys


def ceil_div(x, y):
    return (x + y - 1) // y


def is_tma_multicast_legal(shape_dim, block_dim, num_tma_multicast, num_sms,
                           require_divisible=False):
    divisible = ceil_div(shape_dim, block_dim) % num_tma_multicast == 0 or not require_divisible
    return divisible and num_sms % num_tma_multicast == 0


def get_swizzle_mode(block_n):
    elem_size = 2
    for mode_bytes in (128, 64, 32):
        if (block_n * elem_size) % mode_bytes == 0:
            return mode_bytes
    return 0


def get_block_n_padding_for_smem_d(block_n):
    elem_size, requirement = 2, (4, 8)
    bank_stride = (block_n * elem_size) // 4
    padding = (requirement[0] - bank_stride) % requirement[1]
    return (((padding + requirement[1]) if padding < 0 else padding) * 4) // elem_size


def get_smem_config(num_stages, k, block_m, block_n, block_k=128):
    # The normal GEMM: BF16 output, B's scales for the whole K loop (not per stage).
    assert block_k == 128
    swizzle_mode = get_swizzle_mode(block_n)
    block_n_padding = get_block_n_padding_for_smem_d(block_n) if swizzle_mode == 0 else 0
    smem_d = block_m * (block_n + block_n_padding) * 2
    smem_a_per_stage = block_m * block_k
    smem_scales_a_per_stage = block_m * 4
    smem_b_per_stage = block_n * block_k
    smem_scales_b_per_stage = 0
    smem_scales_b = ceil_div(k, block_k) * 4
    smem_barrier = num_stages * 8 * 2
    smem_size = 0
    smem_size += smem_d
    smem_size += num_stages * smem_a_per_stage
    smem_size += num_stages * smem_scales_a_per_stage
    smem_size += num_stages * smem_b_per_stage
    smem_size += num_stages * smem_scales_b_per_stage
    smem_size += ceil_div(smem_scales_b * (1 if block_k % block_n == 0 else 2), 8) * 8
    smem_size += smem_barrier
    assert int(swizzle_mode > 0) + int(block_n_padding > 0) <= 1
    return smem_size, swizzle_mode, block_n_padding


def get_best_configs(m, n, k, num_groups, num_sms):
    block_ms = (64, 128, 256)
    block_ns = tuple(range(16, 129, 8)) + (144, 160)

    def num_waves(bm, bn):
        return ceil_div(ceil_div(m, bm) * ceil_div(n, bn) * num_groups, num_sms) if bm else None

    def last_wave_util(bm, bn):
        util = (ceil_div(m, bm) * ceil_div(n, bn) * num_groups) % num_sms
        return num_sms if util == 0 else util

    best_block_m, best_block_n = None, None
    for block_m in block_ms:
        for block_n in [bn for bn in block_ns if block_m <= 128 or bn <= 128]:
            success = False
            waves, best_waves = num_waves(block_m, block_n), num_waves(best_block_m, best_block_n)
            if best_block_m is None or best_block_n is None:
                success = True
            elif waves < best_waves:
                success = True
            elif waves == best_waves:
                util = last_wave_util(block_m, block_n)
                best_util = last_wave_util(best_block_m, best_block_n)
                success = util > best_util
                if util == best_util:
                    success |= block_m == best_block_m and block_n < best_block_n
                    success |= block_n == best_block_n and block_m < best_block_m
                    success |= block_m != best_block_m and block_n > best_block_n
            if success:
                best_block_m, best_block_n = block_m, block_n
    assert best_block_m is not None and best_block_n is not None

    best_num_stages, best_smem_config, sm90_capacity = None, None, 232448
    stages = (8, 7, 6, 5, 4, 3, 2, 1)
    if 128 % best_block_n != 0 and 128 // math.gcd(128, best_block_n) <= 4:
        stages = (4, 3, 2, 1)
    for num_stages in [s for s in stages if s <= max(k // 128, 1)]:
        best_smem_config = get_smem_config(num_stages, k, best_block_m, best_block_n)
        if best_smem_config[0] <= sm90_capacity:
            best_num_stages = num_stages
            break
    assert best_smem_config is not None
    assert best_num_stages is not None, "no stage fits"

    best_tma_multicast_config = (1, True)
    is_multicast_legal = {
        'A': is_tma_multicast_legal(n, best_block_n, 2, num_sms, False),
        'B': is_tma_multicast_legal(m, best_block_m, 2, num_sms),
    }
    for i in ('A', 'B') if best_block_m > best_block_n else ('B', 'A'):
        if m >= 512 and is_multicast_legal[i]:
            best_tma_multicast_config = (2, i == 'A')
            break

    waves = num_waves(best_block_m, best_block_n)
    num_min_sms = ceil_div(ceil_div(m, best_block_m) * ceil_div(n, best_block_n) * num_groups, waves)
    num_min_sms = ceil_div(num_min_sms, best_tma_multicast_config[0]) * best_tma_multicast_config[0]
    assert num_min_sms <= num_sms
    return num_min_sms, best_block_m, best_block_n, best_num_stages, best_tma_multicast_config, best_smem_config


def main():
    for line in sys.stdin:
        if not line.strip():
            continue
        m, n, k, num_groups, num_sms = (int(x) for x in line.split())
        try:
            sms, block_m, block_n, stages, (multicast, on_a), (smem, swizzle, padding) = \
                get_best_configs(m, n, k, num_groups, num_sms)
        except AssertionError as e:
            print(json.dumps({"error": str(e) or "assert"}))
            continue
        print(json.dumps({
            "block_m": block_m,
            "block_n": block_n,
            "num_stages": stages,
            "num_tma_multicast": multicast,
            "multicast_on_a": on_a,
            "num_sms": sms,
            "smem_size": smem,
            "swizzle_mode": swizzle,
            "block_n_padding": padding,
        }))


if __name__ == "__main__":
    main()
