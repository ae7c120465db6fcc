#!/usr/bin/env bash
# Runs every example and test case on the GPU with `tlc run --device`, which compares the
# device's outputs with the reference interpreter's (docs/cli.md). CI has no GPU: run this
# on a machine with one after any change to generated code, and record the result.
#
#   scripts/gpu-check.sh [TLC_BINARY]      (default: target/release/tlc)
#   PART=2/3 scripts/gpu-check.sh          (every third `run` from the second: the whole
#                                           check in three calls, each within a time limit;
#                                           the print and scripts checks run in the last part)
#   ONLY='int4|reshape' scripts/gpu-check.sh (only the runs whose file and arguments match
#                                           the extended regex: a change's own lines)
#
# Symbolic kernels get small bindings: some ragged, some tile-aligned (kernels that do not
# mask their edges), some of each copy path (cp.async where rows are 16-byte aligned,
# synchronous masked loads where they are not). Each runs for sm_90a and for sm_80, except
# kernels written with sm_90a's own intrinsics (TMA, mbarriers, wgmma: `tma_tile_copy`),
# which have no sm_80 form and run for sm_90a only, as do files marked `# requires: sm_90a`
# (fp8 GEMMs: wgmma only), and those run with TARGETS=sm_90a (a config that needs more
# shared memory than sm_80 has).
set -u
cd "$(dirname "$0")/.."
TLC=${1:-target/release/tlc}
fail=0
part=${PART:-1/1}
part_k=${part%/*}
part_n=${part#*/}
runs=0
run() {
    local file=$1
    shift
    runs=$((runs + 1))
    [ $(((runs - 1) % part_n + 1)) -eq "$part_k" ] || return 0
    if [ -n "${ONLY:-}" ] && ! echo "$file $*" | grep -qE -- "$ONLY"; then
        return 0
    fi
    local out targets=${TARGETS:-"sm_90a sm_80"}
    if grep -qE 'T\.(tma_load|mbarrier_|wgmma|setmaxnreg|fence_proxy_async)|^# requires: sm_90a' "$file"; then
        targets=sm_90a
    fi
    for target in $targets; do
        if out=$("$TLC" run "$file" --device --target $target --seed 1 "$@" 2>&1); then
            echo "ok    $target $file $*"
        else
            echo "FAIL  $target $file $*"
            echo "$out" | sed 's/^/      /' | tail -20
            fail=1
        fi
    done
}
# A launch the runtime must refuse, with an error containing $1 (the rest as for `run`).
refuse() {
    local want=$1 file=$2
    shift 2
    runs=$((runs + 1))
    [ $(((runs - 1) % part_n + 1)) -eq "$part_k" ] || return 0
    if [ -n "${ONLY:-}" ] && ! echo "$file $*" | grep -qE -- "$ONLY"; then
        return 0
    fi
    local out
    for target in ${TARGETS:-sm_90a sm_80}; do
        if out=$("$TLC" run "$file" --device --target $target --seed 1 "$@" 2>&1); then
            echo "FAIL  $target $file $*: ran, but must be refused ($want)"
            fail=1
        elif echo "$out" | grep -qF -- "$want"; then
            echo "ok    $target $file $* (refused: $want)"
        else
            echo "FAIL  $target $file $*: refused otherwise than \"$want\""
            echo "$out" | sed 's/^/      /' | tail -20
            fail=1
        fi
    done
}
for f in tests/cases/valid/*.tir passes/tests/cases/simt_*.tir examples/gemm_seed000.tir; do
    # atomic_add_prev's slots (P, F, L) are one serialization of its atomics: the GPU picks
    # another order than the interpreter's thread order, so an element-wise comparison
    # cannot hold (H200, 2026-11-30: C, the counts, exact on both targets; P / F / L
    # differ as orders do). Its order-free properties are checked by the interpreter tests.
    case "$f" in *atomic_add_prev.tir) continue ;; esac
    grep -q 'T.symbolic' "$f" || run "$f"
done
# TileLang's safe memory access (tests/cases/safe_memory): guarded global accesses, views'
# and layouts' logical bounds.
for f in tests/cases/safe_memory/*.tir; do
    grep -q 'T.symbolic' "$f" || run "$f"
done
run examples/elementwise_add.tir -D N=1000
run tests/cases/valid/math_and_bits.tir -D N=1000
run tests/cases/valid/fp8_cast.tir -D N=1000
run tests/cases/valid/row_softmax.tir -D M=1000
run tests/cases/valid/macros.tir -D M=1000
run tests/cases/valid/scalar_params.tir -D M=1000 -D limit=600 -D scale=3
run tests/cases/valid/break_continue.tir -D M=1000
run tests/cases/valid/atomic_colsum.tir -D M=200 -D N=1000
run tests/cases/valid/while_loops.tir -D M=1000
run tests/cases/valid/thread_regions.tir -D M=1001
run tests/cases/valid/elementwise_int64_dim.tir -D N=1000
run tests/cases/valid/dim_typed_uses.tir -D M=1000
run tests/cases/valid/dim_typed_uses.tir -D M=200
run tests/cases/valid/tilelang_spellings.tir -D BH=7
run tests/cases/valid/tilelang_spellings.tir -D BH=300
run tests/cases/valid/cumsum.tir -D M=13
run tests/cases/valid/cumsum.tir -D M=1000
run tests/cases/valid/split_combine_scratch.tir -D M=45
run tests/cases/valid/split_combine_scratch.tir -D M=1000
# Grid barriers (T.sync_grid, cooperative launches): 2 and 8 blocks per SM of an H100 /
# H200's 132; then a grid no GPU holds at once, which the runtime must refuse.
run tests/cases/valid/grid_sync_partials.tir -D NB=264
run tests/cases/valid/grid_sync_partials.tir -D NB=1056
run tests/cases/valid/grid_sync_ring.tir -D NB=264
run tests/cases/valid/grid_sync_ring.tir -D NB=1056
refuse "must be resident at once" tests/cases/valid/grid_sync_ring.tir -D NB=20000
run tests/cases/valid/global_layout.tir -D M=44
run tests/cases/valid/global_layout.tir -D M=1000
run examples/scale_cast.tir -D M=100 -D N=130
run examples/transpose.tir -D M=100 -D N=130
run tests/cases/valid/index_math.tir -D M=77
run passes/tests/cases/simt_uniform_if.tir -D N=1000
run tests/cases/valid/seed000_dims.tir -D M=256 -D N=256 -D K=128
run tests/cases/valid/seed000_dims.tir -D M=384 -D N=256 -D K=96
run tests/cases/valid/gemm_bf16_transposed.tir -D M=200 -D N=136 -D K=72
run tests/cases/valid/gemm_bf16_transposed.tir -D M=129 -D N=67 -D K=45
# Split-K with atomic adds: C zeroed, then 4 K slices added. Ragged M / N with 2 K tiles
# (slices 2 and 3 run 0 and -1 tiles; on sm_90a TMA, warp-specialized, `red.v2.f32` pairs
# under guards), an odd N (one guarded `red` per element), a tile-aligned shape (no guards).
run tests/cases/valid/gemm_splitk_atomic.tir -D M=200 -D N=136 -D K=40
run tests/cases/valid/gemm_splitk_atomic.tir -D M=130 -D N=97 -D K=200
run tests/cases/valid/gemm_splitk_atomic.tir -D M=256 -D N=256 -D K=1000
# 5 x 5 tiles over 2 persistent blocks, ragged: sm_80 puts C_shared in the bytes of the
# cp.async pipeline stages (after `T.cp_async_wait(0)`), sm_90a takes TMA and keeps them apart.
run tests/cases/valid/persistent_gemm_reuse.tir -D M=270 -D N=152 -D K=96
# A float16 accumulator: the tensor core's rounding inside an f16 accumulate is not the
# interpreter's documented step-of-16 model (PTX leaves it unspecified), and the device
# comparison's float16 tolerance is relative to the result, not to the partial sums — with
# random data an element whose sum cancels can differ by half an ulp of its partial sums
# (seen: 1 of 27200 at 200 x 136 x 72, docs/perf.md). So these run on small integers, whose
# every partial sum float16 holds exactly: GPU and interpreter must then agree exactly,
# which checks the layout, masking and pipeline of the lowering.
ints=$(mktemp -d)
if python3 - "$ints" <<'PY'
import sys
import numpy as np
rng = np.random.default_rng(1)
for m, n, k in [(200, 136, 72), (129, 67, 45)]:
    np.save(f"{sys.argv[1]}/A_{m}_{k}.npy", rng.integers(-2, 3, (m, k)).astype(np.float16))
    np.save(f"{sys.argv[1]}/B_{n}_{k}.npy", rng.integers(-2, 3, (n, k)).astype(np.float16))
# dequant_gemm_fine_grained (256^3, f16 accumulator): nibbles in 0..3 and A in -2..2, so
# every partial sum (|.| <= 2 * 3 * 256) is an integer float16 holds.
np.save(f"{sys.argv[1]}/dq_A.npy", rng.integers(-2, 3, (256, 256)).astype(np.float16))
lo, hi = rng.integers(0, 4, (256, 128)), rng.integers(0, 4, (256, 128))
np.save(f"{sys.argv[1]}/dq_B.npy", (lo | (hi << 4)).astype(np.int8))
# examples/gemm_splitk.tir (float16 C, atomics in any order) and its float32-C variant:
# entries in -1..1 and K = 2000, so every partial sum and every add is an integer of
# magnitude <= 2000, exact in float16 whatever the order: GPU and interpreter must agree
# exactly.
np.save(f"{sys.argv[1]}/sk_A.npy", rng.integers(-1, 2, (200, 2000)).astype(np.float16))
np.save(f"{sys.argv[1]}/sk_B.npy", rng.integers(-1, 2, (2000, 300)).astype(np.float16))
# blocksparse_attn_fwd: about half the 64 x 64 blocks, always column 0 (every row sees key 0).
for name, shape in [("bsa_mask1", (1, 2, 4, 4)), ("bsa_mask2", (2, 4, 4, 4))]:
    m = rng.random(shape) < 0.5
    m[..., 0] = True
    np.save(f"{sys.argv[1]}/{name}.npy", m)
# flash_attn_fwd_varlen_causal: sequence offsets (batch_size is read off their extent).
for name, v in [("vl_q1", [0, 50, 150, 157]), ("vl_k1", [0, 60, 160, 163]),
                ("vl_q2", [0, 492, 1004, 1504, 2016]), ("vl_k2", [0, 500, 1000, 1512, 2016])]:
    np.save(f"{sys.argv[1]}/{name}.npy", np.array(v, np.int32))
import math
# sparse GQA decode: block indices / masks and cache lengths (as their EXAMPLES `given`).
d = sys.argv[1]
def sg_chosen(lens, b, g):
    valid = math.ceil(lens[b] / 32)
    return [i for i in range(valid) if (g % 2 == 0 and i + 1 == valid) or ((b * 8 + g) * 31 + i * 17) % 7 < 3]
def sg_splits(n, s):
    per, rem = n // s, n % s
    return [(per * k + min(k, rem), per + (k < rem)) for k in range(s)]
for name, lens, width, blocks, nsplit in [("a", [200], 5, 8, 2), ("b", [512, 77], 4, 16, 3)]:
    B = len(lens)
    np.save(f"{d}/sg_{name}_cs.npy", np.array(lens, np.int32))
    bi = np.full((B, 8, width), -1, np.int32); mask = np.zeros((B, 8, blocks), bool)
    for b in range(B):
        valid = math.ceil(lens[b] / 32)
        for g in range(8):
            c = sg_chosen(lens, b, g)
            lst = sorted(c, reverse=True)[:width]; bi[b, g, :len(lst)] = lst
            mask[b, g, c] = True
            for start, n in sg_splits(blocks, nsplit):
                if start < valid and not mask[b, g, start:start + n].any():
                    mask[b, g, start] = True
    np.save(f"{d}/sg_{name}_bi.npy", bi); np.save(f"{d}/sg_{name}_mask.npy", mask)
# Index inputs of the TileLang translations that read tables (the same values as their
# EXAMPLES `given` inputs in tests/tests/tilelang_examples.rs, plus larger ones).
def save(name, a): np.save(f"{d}/{name}.npy", a)
# grouped_gemm_fwd: batch_sizes_list (5, 9, 13) is compiled in.
save("gg_bs", np.array([5, 9, 13], np.int32))
save("gg_bo", np.array([0, 5, 14], np.int32))
save("gg_bp", np.array([0, 64, 128], np.int32))
# fusedmoe_routed: 256 rows in 8 experts, 10 blocks.
sizes = [130, 0, 30, 16, 20, 10, 50, 0]
off = np.concatenate([[0], np.cumsum(sizes)[:-1]])
pad = [0]
for i in range(1, 8): pad.append(pad[-1] + math.ceil((sizes[i - 1] + 1) / 128) * 128)
gib = [max(i for i in range(8) if bx * 128 >= pad[i]) for bx in range(10)]
for n, v in [("moe_gs", sizes), ("moe_go", off), ("moe_gp", pad), ("moe_gib", gib)]:
    save(n, np.array(v, np.int32))
# mla_decode_paged: batch 1 (130 keys) and batch 2 (256 and 64 keys), max_seqlen_pad 256.
save("mlap_bt1", np.array([[2, 0, 3, 1]], np.int32)); save("mlap_cs1", np.array([130], np.int32))
save("mlap_bt2", np.array([[5, 7, 1, 0], [6, 2, 4, 3]], np.int32)); save("mlap_cs2", np.array([256, 64], np.int32))
# pipe_paged_gemm: every page of its table inside `B_pages` (8 pages of 32 rows).
save("pg_table", np.array([3, 0, 7, 5, 2], np.int32))
# nsa_fwd: a block among 0 .. max(1, t // 32) - 1 per token and KV head.
rng = np.random.default_rng(3)
for name, (B, T, H) in {"nsa_bi_a": (2, 64, 1), "nsa_bi_b": (1, 100, 2), "nsa_bi_c": (2, 1024, 2)}.items():
    bi = np.zeros((B, T, H, 1), np.int32)
    for b in range(B):
        for t in range(T):
            for h in range(H):
                bi[b, t, h, 0] = rng.integers(0, max(1, t // 32))
    save(name, bi)
# nsa_decode: one whole block of 32 keys per (batch, KV head) (the EXAMPLES input's rule).
save("nsad_bi_a", np.array([[[[1], [0]]], [[[1], [0]]]], np.int32))
save("nsad_bi_b", np.array([[[[5], [2]]], [[[7], [0]]]], np.int32))
# seer_block_sparse_attn: int8 masks, about half the blocks, always column 0.
for name, shape in [("seer_mask1", (1, 2, 4, 4)), ("seer_mask2", (4, 2, 4, 4))]:
    m = (rng.random(shape) < 0.5).astype(np.int8)
    m[..., 0] = 1
    save(name, m)
# flash_attn_gqa_fwd_varlen: sequence offsets (the test's first size, then the original
# test's 4 x ~512).
for name, v in [("gvl_q1", [0, 50, 170, 177]), ("gvl_k1", [0, 60, 190, 193]),
                ("gvl_q2", [0, 492, 1004, 1504, 2016]), ("gvl_k2", [0, 500, 1000, 1512, 2016])]:
    save(name, np.array(v, np.int32))
# flash_decoding_gqa_varlen_logits: sequences of more than 384 keys (S's 4 columns written),
# small sinks.
save("gdl_cu1", np.array([0, 400, 900], np.int32)); save("gdl_cu2", np.array([0, 512, 897, 1409], np.int32))
save("gdl_sink", (np.arange(32) % 7 * 0.03 - 0.09).astype(np.float32))
# grouped_gemm_bwd: groups whose steps stay inside them but for the last one's.
save("ggb_bs1", np.array([64, 40, 100], np.int32)); save("ggb_bo1", np.array([0, 64, 104], np.int32))
save("ggb_bs2", np.array([64, 128], np.int32)); save("ggb_bo2", np.array([0, 64], np.int32))
# gemm_splitk*: integer entries in -1..1 with K = 1024 (a multiple of 4 * 32): every
# partial sum exact in float32 whatever the atomics' order.
save("sk2_A", rng.integers(-1, 2, (200, 1024)).astype(np.float16))
save("sk2_B", rng.integers(-1, 2, (1024, 136)).astype(np.float16))
# fp8_lighting_indexer: per query a key window [ks, ke) whose block of 4 queries' window
# stays inside seq_len_kv (the original's accesses are unguarded): the test's first size,
# then 64 queries over 4096 keys, causal-like windows [0, 64 (t + 1)).
save("li_ks1", np.array([0, 10, 5, 100, 256, 300, 256, 260], np.int32))
save("li_ke1", np.array([300, 256, 5, 200, 512, 400, 257, 511], np.int32))
save("li_ks2", np.zeros(64, np.int32))
save("li_ke2", (64 * (np.arange(64) + 1)).astype(np.int32))
# sparse_mla_fwd: per query 128 distinct keys of seq_len_kv, key 0 among them (the EXAMPLES
# input's construction; keys past the query are masked by the kernel).
for name, (B, S, SKV) in {"smla_a": (1, 3, 130), "smla_b": (2, 64, 512)}.items():
    idx = np.zeros((B, S, 1, 128), np.int32)
    for b in range(B):
        for t in range(S):
            keys = rng.permutation(SKV)[:128]
            if 0 not in keys: keys[rng.integers(0, 128)] = 0
            idx[b, t, 0, :] = keys
    save(name, idx)
PY
then
    run tests/cases/valid/gemm_f16_acc.tir -D M=200 -D N=136 -D K=72 --input A=$ints/A_200_72.npy --input B=$ints/B_136_72.npy
    run tests/cases/valid/gemm_f16_acc.tir -D M=129 -D N=67 -D K=45 --input A=$ints/A_129_45.npy --input B=$ints/B_67_45.npy
    run examples/gemm_splitk.tir -D M=200 -D N=300 -D K=2000 -D split_k=6 --input A=$ints/sk_A.npy --input B=$ints/sk_B.npy
    run examples/gemm.tir -D M=200 -D N=300 -D K=2000 -D split_k=8 -D block_M=64 -D block_N=128 -D threads=128 --input A=$ints/sk_A.npy --input B=$ints/sk_B.npy
    run examples/gemm.tir -D M=200 -D N=300 -D K=2000 -D split_k=3 -D block_M=64 -D block_N=128 -D threads=128 -D block_K=32 --input A=$ints/sk_A.npy --input B=$ints/sk_B.npy
    run examples/gemm.tir -D M=200 -D N=300 -D K=2000 -D split_k=1 --input A=$ints/sk_A.npy --input B=$ints/sk_B.npy
    run bench/gemm_splitk_f32.tir -D M=200 -D N=300 -D K=2000 -D split_k=6 --input A=$ints/sk_A.npy --input B=$ints/sk_B.npy
else
    echo "FAIL  gemm_f16_acc: python3 with numpy is needed to write its integer inputs"
    fail=1
fi
run passes/tests/cases/gemm_ragged_tn.tir -D M=130 -D N=70 -D K=50
run passes/tests/cases/gemm_ragged_tn.tir -D M=136 -D N=72 -D K=40
run passes/tests/cases/gemm_ragged_tn.tir -D M=64 -D N=64 -D K=32
run passes/tests/cases/gemm_fullcol_epilogue.tir -D M=96 -D N=128 -D K=48
run passes/tests/cases/pipe_simt_gemm.tir -D M=100 -D N=70 -D K=50
# Pipelines from a block-level let (the blocks run 7, 5, 3, 1 and no k-tile) and a GEMM
# through a page table (issue 38): on sm_90a TMA with a producer warpgroup (the page entry
# loaded by the producer thread, the box origin clamped to the rows), on sm_80 cp.async at
# addresses from the entry. The random table (entries -8 .. 7) puts some pages outside the
# tensor (zeros); pg_table none.
run passes/tests/cases/pipe_from_let.tir
run passes/tests/cases/pipe_paged_gemm.tir
run passes/tests/cases/pipe_paged_gemm.tir --input table=$ints/pg_table.npy
run bench/gemm_128x256x32_t256_s3.tir -D M=256 -D N=512 -D K=128
run bench/gemm_128x128x64_t128_s3.tir -D M=256 -D N=256 -D K=256
# Dims bound below a tile (partial tiles, issue 14): masked copies, and on sm_90a TMA boxes
# larger than the tensor.
run examples/scale_cast.tir -D M=50 -D N=30
run bench/gemm_128x128x32_t128_s3_masked.tir -D M=64 -D N=64 -D K=32
run bench/gemm_128x128x64_t128_s3.tir -D M=50 -D N=40 -D K=72
run bench/gemm_128x128x64_t128_s3.tir -D M=8 -D N=8 -D K=200
# Warp-specialized with one wgmma group in flight (4 stages): one consumer warpgroup (a block
# per SM), two; ragged, fewer k-tiles than stages, many. The 128x256x64 config needs more
# shared memory than sm_80 gives a block, so it runs for sm_90a only.
run bench/gemm_128x128x64_t128_s4.tir -D M=200 -D N=264 -D K=328
run bench/gemm_128x128x64_t128_s4.tir -D M=1000 -D N=1032 -D K=1000
TARGETS=sm_90a run bench/gemm_128x256x64_t256_s4.tir -D M=200 -D N=264 -D K=136
TARGETS=sm_90a run bench/gemm_128x256x64_t256_s4.tir -D M=384 -D N=512 -D K=4096
# Thread-block clusters (sm_90a): a warp-specialized GEMM written with the cluster
# intrinsics (clusters of two sharing A by multicast), and the bench config in clusters of
# two along y (`tma-multicast` shares B): one tile per block, then persistent (160 tiles:
# 80 units of two over 66 clusters). `cluster_multicast.tir` runs with the valid cases.
run ir-spec/tests/data/ws_gemm_cluster.tir -D M=264 -D N=456 -D K=320
run bench/gemm_128x256x64_t256_s4_cluster.tir -D M=512 -D N=264 -D K=136
run bench/gemm_128x256x64_t256_s4_cluster.tir -D M=2560 -D N=2048 -D K=64
# FP8 GEMMs on wgmma's fp8 form (sm_90a only): ragged M and N, a ragged last K block, both
# warpgroup configs of the block-scaled example, DeepGEMM's N = 2112, TileLang's example
# (its scales_a loads are unmasked: M a multiple of 128).
run tests/cases/valid/gemm_fp8_nt.tir -D M=200 -D N=136 -D K=320
# int8 x int8 -> int32: wgmma's integer form on sm_90a, mma.sync m16n8k32 on sm_80: ragged,
# then whole tiles.
run tests/cases/valid/gemm_int8.tir -D M=100 -D N=150 -D K=300
run tests/cases/valid/gemm_int8.tir -D M=512 -D N=384 -D K=1024
# TileLang's w4a8 GEMM (int4 weights decoded to int8, mma.sync m16n8k32 on both targets):
# ragged M and N, then the original's 128 x 256 x 256.
run tests/tilelang/dequant_gemm_w4a8.tir -D M=100 -D N=72 -D K=256
run tests/tilelang/dequant_gemm_w4a8.tir -D M=128 -D N=256 -D K=256
# int4 x int4 -> int32: sm_80 on mma.sync's m16n8k64 .s4 (pack-int4), sm_90a as int8 wgmmas of the
# widened tiles (widen-int4-gemm): ragged, then whole tiles.
run tests/tilelang/gemm_int4.tir -D M=100 -D N=72 -D K=192
run tests/tilelang/gemm_int4.tir -D M=512 -D N=384 -D K=1024
run tests/cases/valid/gemm_int4.tir -D M=100 -D N=150
# T.reshape of fragments, shared buffers and a parameter (ragged: 3 blocks, the last of 5).
run tests/cases/valid/reshape_tiles.tir -D M=37
run tests/cases/valid/reshape_tiles.tir -D M=1000
# TileLang's Philox random numbers (curand's stream, bit-exact against the interpreter):
# rand_uint's one-thread blocks (ragged: 1000 = 7 * 128 + 104), then whole blocks; 32
# generators per block, own subsequences and offsets, uint32 and float32 draws (the last
# block with 8).
run tests/tilelang/rand_uint.tir -D M=1000
run tests/tilelang/rand_uint.tir -D M=1024
run tests/cases/valid/rand_per_thread.tir -D M=200
run examples/gemm_fp8_blockscaled.tir -D M=200 -D N=192 -D K=384
run examples/gemm_fp8_blockscaled.tir -D M=300 -D N=130 -D K=320 -D block_M=64 -D threads=128 -D block_N=64
run examples/gemm_fp8_blockscaled.tir -D M=256 -D N=2112 -D K=1024
run examples/gemm_fp8_blockscaled.tir -D M=70 -D N=100 -D K=256 -D block_M=64 -D threads=128 -D block_N=16
run examples/gemm_fp8_blockscaled.tir -D M=300 -D N=100 -D K=384 -D block_M=256 -D threads=256 -D block_N=32
# DeepGEMM's widths: tiles that straddle two (112, 144) or three (200) of B's scale blocks.
run examples/gemm_fp8_blockscaled.tir -D M=200 -D N=450 -D K=384 -D block_M=128 -D threads=256 -D block_N=112 -D num_stages=3
run examples/gemm_fp8_blockscaled.tir -D M=70 -D N=450 -D K=256 -D block_M=64 -D threads=128 -D block_N=144 -D num_stages=4
run examples/gemm_fp8_blockscaled.tir -D M=70 -D N=450 -D K=256 -D block_M=64 -D threads=128 -D block_N=200 -D num_stages=2
run tests/cases/valid/gemm_fp8_scales_staged.tir -D M=200 -D N=192 -D K=384
run tests/cases/valid/gemm_fp8_scales_staged.tir -D M=300 -D N=130 -D K=320 -D block_M=64 -D threads=128 -D block_N=64
run tests/cases/valid/gemm_fp8_scales_staged.tir -D M=250 -D N=130 -D K=320
run tests/tilelang/gemm_deepgemm_fp8_2xacc.tir -D M=256 -D N=130 -D K=384
# TileLang's example kernels that tlc compiles (tests/tilelang; references in
# tests/tests/tilelang_examples.rs): that test's ragged sizes, then the originals' where the
# interpreter's side of the comparison stays quick. softmax_online is exact only for N a
# multiple of 8192, topk_topk for M a multiple of 64, norm_layernorm_bwd for N a multiple of 32,
# cast_per_token_fp8 for M a multiple of 8, gemm_blocksparse for M, N, K multiples of 128,
# 128, 32 (gemm_streamk's sizes are constants; cast_group_per_split_token_fp8 with random
# batch_sizes: every access stays in bounds whatever they are, and the interpreter sees the
# same ones); gemm_persistent at M = 1800, N = 2600: 165 tiles, two waves of the 132 blocks
# (C_shared in the pipeline stages' bytes: 147456 bytes of shared memory, which sm_80 has).
# gemv_naive (N, K multiples of 128) and gemv_splitk_vectorized (N a multiple of 2, K of
# 256) run with thread-sync's automatic barriers.
run tests/tilelang/elementwise_add.tir -D M=70 -D N=45
run tests/tilelang/elementwise_add.tir -D M=1024 -D N=1024
run tests/tilelang/norm_rms.tir -D M=3
run tests/tilelang/norm_rms.tir -D M=1024
run tests/tilelang/norm_rms_splitk.tir -D M=3 -D N=1100
run tests/tilelang/norm_rms_splitk.tir -D M=64 -D N=8192
run tests/tilelang/norm_layernorm_fwd.tir -D N=2
run tests/tilelang/norm_layernorm_fwd.tir -D N=64
run tests/tilelang/softmax_online.tir -D M=3 -D N=16384
run tests/tilelang/topk_topk.tir -D M=64
run tests/tilelang/topk_topk.tir -D M=320
run tests/tilelang/flash_attn_fwd_bshd.tir -D batch=1 -D heads=1 -D seq_len=160
run tests/tilelang/flash_attn_fwd_bshd.tir -D batch=1 -D heads=32 -D seq_len=256
run tests/tilelang/flash_attn_fwd_bhsd_causal.tir -D batch=1 -D heads=1 -D seq_q=100 -D seq_kv=130
run tests/tilelang/flash_attn_fwd_bhsd_causal.tir -D batch=1 -D heads=1 -D seq_q=256 -D seq_kv=256
run tests/tilelang/norm_layernorm_bwd.tir -D N=32
run tests/tilelang/norm_layernorm_bwd.tir -D N=256
run tests/tilelang/gemm_persistent.tir -D M=200 -D N=300 -D K=64
run tests/tilelang/gemm_persistent.tir -D M=1800 -D N=2600 -D K=64
run tests/tilelang/cast_per_token_fp8.tir -D M=16 -D N=300
run tests/tilelang/cast_per_token_fp8.tir -D M=2048 -D N=512
run tests/tilelang/gemm_blocksparse.tir -D M=128 -D N=256 -D K=128
run tests/tilelang/gemm_blocksparse.tir -D M=256 -D N=256 -D K=128
run tests/tilelang/gemv_naive.tir -D N=256 -D K=384
run tests/tilelang/gemv_naive.tir -D N=1024 -D K=1024
run tests/tilelang/gemv_splitk_vectorized.tir -D N=6 -D K=768
run tests/tilelang/gemv_splitk_vectorized.tir -D N=1024 -D K=1024
run tests/tilelang/gemv_alloc_reducer.tir -D M=130 -D N=200
run tests/tilelang/gemv_alloc_reducer.tir -D M=1024 -D N=1024
run tests/tilelang/dequant_gemv_fp16xint4.tir
run tests/tilelang/cast_group_per_split_token_fp8.tir -D M=9 -D N=300 -D BG=2 -D M_max=8
run tests/tilelang/cast_group_per_split_token_fp8.tir -D M=1024 -D N=1024 -D BG=2 -D M_max=896
run tests/tilelang/gemm_streamk.tir
# The fine-grained dequantizing GEMM accumulates in float16: on the integer inputs written
# above (the original's test uses integer data too), GPU and interpreter agree exactly.
run tests/tilelang/dequant_gemm_fine_grained.tir --input A=$ints/dq_A.npy --input B=$ints/dq_B.npy
# tlc's split-K and stream-K examples (C zeroed by their first kernel, then atomics): the
# test sizes of tests/tests/tilelang_examples.rs, then a ragged long-K shape with a real GPU's
# program count.
run examples/gemm_splitk.tir -D M=70 -D N=130 -D K=200 -D block_M=64 -D block_N=128 -D split_k=3 -D num_stages=3
run examples/gemm_splitk.tir -D M=128 -D N=128 -D K=40 -D split_k=4 -D num_stages=3
# examples/gemm.tir: its default two-consumer 128 x 256 tile and the 256 x 128 one at ragged
# shapes, one slice (its K-sliced configs run above on integer inputs: on random ones the
# GPU's float16 atomic adds of the slices, in any order, differ from the interpreter's
# order by float16 roundings of the partial sums — 60 of 9100 elements past `run
# --device`'s 1e-3 at 70 x 130 x 200 over 3 slices, exact on integers).
run examples/gemm.tir -D M=130 -D N=300 -D K=100
run examples/gemm.tir -D M=300 -D N=200 -D K=136 -D block_M=256 -D block_N=128 -D threads=256
# (Random inputs at a long K: the GPU adds the slices in another order than the interpreter,
# and the sums differ by their reassociation — a few float16 ulps, or ~1e-4 of a float32 sum
# that cancels to ~1 — beyond `run --device`'s fixed tolerances: the long-K checks are the
# integer ones above, exact in any order.)
run examples/gemm_streamk.tir -D M=130 -D N=200 -D K=300 -D programs=4 -D block_M=64 -D block_N=128
run examples/gemm_streamk.tir -D M=100 -D N=250 -D K=40 -D programs=4
run examples/gemm_streamk.tir -D M=300 -D N=500 -D K=1000 -D programs=132
# conv_im2col: ragged rows, taps and filters, then a whole 64-row multiple (the original's
# rows-multiple-of-64 shape) with a 32-multiple of taps.
run tests/tilelang/conv_im2col.tir -D N=1 -D C=5 -D H=5 -D W=7 -D F=100
run tests/tilelang/conv_im2col.tir -D N=2 -D C=32 -D H=16 -D W=16 -D F=128
# Attention decoding and the linear-attention family: the test's ragged (or smallest) sizes,
# then the originals' where the interpreter keeps up. flash_decoding_gqa covers every key
# for seqlen_kv a multiple of 8 with seqlen_kv / 8 at most 128 or a multiple of 128 (256:
# masked 32-key splits; 8192: the original's); linear_attn_fwd and retention_fwd need S a
# multiple of 64 (the original test's B = 1, H = 16, S = 512; main()'s S = 4096 over 4
# heads); mamba_chunk_scan a chunk_size multiple of 64 and dstate at most 128 (the
# originals' chunk_size, headdim, dstate and seqlen, over 8 heads of one batch).
run tests/tilelang/flash_decoding_gqa.tir -D batch=1 -D seqlen_kv=256
run tests/tilelang/flash_decoding_gqa.tir -D batch=1 -D seqlen_kv=8192
run tests/tilelang/flash_attn_bwd_preprocess.tir -D batch=2 -D seq_len=100 -D heads=3
run tests/tilelang/flash_attn_bwd_preprocess.tir -D batch=1 -D seq_len=512 -D heads=16
# MLA decode's two stages need 224 KiB of shared memory: sm_90a only (as TileLang's).
TARGETS=sm_90a run tests/tilelang/mla_decode.tir -D batch=1 -D seqlen_kv=128
TARGETS=sm_90a run tests/tilelang/mla_decode.tir -D batch=2 -D seqlen_kv=2048
# The persistent form: 132 blocks, T.sync_grid() between the splits and the combine (a
# cooperative launch); whole 64-key tiles per split.
TARGETS=sm_90a run tests/tilelang/mla_decode_persistent.tir -D batch=1 -D seqlen_kv=256
TARGETS=sm_90a run tests/tilelang/mla_decode_persistent.tir -D batch=3 -D seqlen_kv=1024
# Attention with a sink: on sm_80 too since its second gemm reads P from registers (163840
# bytes of shared memory; issue 38), as do the 16 x 8 warp tiles and register-A pass cases.
run tests/tilelang/attn_sink_mha_fwd_bhsd.tir -D batch=1 -D heads=2 -D seq_q=100 -D seq_kv=130
run tests/tilelang/attn_sink_mha_fwd_bhsd.tir -D batch=1 -D heads=8 -D seq_q=256 -D seq_kv=256
run passes/tests/cases/gemm_warp16x8.tir -D M=100 -D N=130 -D K=200
run passes/tests/cases/gemm_warp16x8_nt.tir -D M=100 -D N=130 -D K=200
run passes/tests/cases/flash_register_a.tir -D seq=200
TARGETS=sm_90a run tests/tilelang/mla_decode_paged.tir -D batch=1 --input block_table=$ints/mlap_bt1.npy --input cache_seqlens=$ints/mlap_cs1.npy
TARGETS=sm_90a run tests/tilelang/mla_decode_paged.tir -D batch=2 --input block_table=$ints/mlap_bt2.npy --input cache_seqlens=$ints/mlap_cs2.npy
run tests/tilelang/blocksparse_attn_fwd.tir -D batch=1 -D heads=2 -D seq_len=200 --input BlockSparseMask=$ints/bsa_mask1.npy
run tests/tilelang/blocksparse_attn_fwd.tir -D batch=2 -D heads=4 -D seq_len=256 --input BlockSparseMask=$ints/bsa_mask2.npy
run tests/tilelang/flash_attn_fwd_varlen_causal.tir -D UQ=157 -D UKV=163 -D heads=2 -D max_seqlen_q=100 --input cu_seqlens_q=$ints/vl_q1.npy --input cu_seqlens_k=$ints/vl_k1.npy
run tests/tilelang/flash_attn_fwd_varlen_causal.tir -D UQ=2016 -D UKV=2016 -D heads=16 -D max_seqlen_q=512 --input cu_seqlens_q=$ints/vl_q2.npy --input cu_seqlens_k=$ints/vl_k2.npy
# Sparse GQA decode: the float32 split results (Output_partial) come through the GPU's
# approximate exp2 (H200, 2026-11-30: 19 of 8192 off by up to 1.3e-5 at values ~0.04, past
# the default float32 bound of 1e-5 + 1e-5·|ref|; the combined float16 Output exact within
# its default).
run tests/tilelang/sparse_gqa_decode_varlen_indice.tir -D batch=1 -D num_split=2 -D max_cache_seqlen=256 -D max_selected_blocks=5 --input block_indices=$ints/sg_a_bi.npy --input cache_seqlens=$ints/sg_a_cs.npy --atol 1e-4
run tests/tilelang/sparse_gqa_decode_varlen_indice.tir -D batch=2 -D num_split=3 -D max_cache_seqlen=512 -D max_selected_blocks=4 --input block_indices=$ints/sg_b_bi.npy --input cache_seqlens=$ints/sg_b_cs.npy --atol 1e-4
run tests/tilelang/sparse_gqa_decode_varlen_mask.tir -D batch=1 -D num_split=2 -D max_cache_seqlen=256 -D num_blocks=8 --input block_mask=$ints/sg_a_mask.npy --input cache_seqlens=$ints/sg_a_cs.npy --atol 1e-4
run tests/tilelang/sparse_gqa_decode_varlen_mask.tir -D batch=2 -D num_split=3 -D max_cache_seqlen=512 -D num_blocks=16 --input block_mask=$ints/sg_b_mask.npy --input cache_seqlens=$ints/sg_b_cs.npy --atol 1e-4
run tests/tilelang/flash_decoding_mha_inference.tir -D batch=1 -D heads=2 -D seqlen_q=100 -D seqlen_kv=256
run tests/tilelang/flash_decoding_mha_inference.tir -D batch=2 -D heads=4 -D seqlen_q=130 -D seqlen_kv=2048
run tests/tilelang/dequant_gemm_fp4_hopper.tir -D M=100 -D N=130 -D K=256
run tests/tilelang/dequant_gemm_fp4_hopper.tir -D M=1024 -D N=1024 -D K=1024
run tests/tilelang/block_causal_attn_fwd.tir -D batch=1 -D seq_len=128 -D heads=2
run tests/tilelang/block_causal_attn_fwd.tir -D batch=2 -D seq_len=256 -D heads=2
run tests/tilelang/nsa_fwd.tir -D batch=1 -D seq_len=100 -D heads=32 --input BlockIndices=$ints/nsa_bi_b.npy
run tests/tilelang/nsa_fwd.tir -D batch=2 -D seq_len=1024 -D heads=32 --input BlockIndices=$ints/nsa_bi_c.npy
# TileLang's GEMM examples: plain, dynamic-shape (dims named m, n, k), split-K (integer
# inputs: the float32 atomics exact in any order), fp8 with an fp8 result (wgmma: sm_90a).
run tests/tilelang/gemm.tir -D M=200 -D N=136 -D K=200
run tests/tilelang/gemm.tir -D M=1024 -D N=1024 -D K=1024
run tests/tilelang/gemm_dynamic.tir -D m=200 -D n=136 -D k=200
run tests/tilelang/gemm_dynamic.tir -D m=1024 -D n=1024 -D k=1024
run tests/tilelang/gemm_splitk.tir -D M=200 -D N=136 -D K=1024 --input A=$ints/sk2_A.npy --input B=$ints/sk2_B.npy
run tests/tilelang/gemm_splitk_vectorize_atomicadd.tir -D M=200 -D N=136 -D K=1024 --input A=$ints/sk2_A.npy --input B=$ints/sk2_B.npy
TARGETS=sm_90a run tests/tilelang/gemm_fp8.tir -D M=200 -D N=136 -D K=200
TARGETS=sm_90a run tests/tilelang/gemm_fp8.tir -D M=1024 -D N=1024 -D K=1024
TARGETS=sm_90a run tests/tilelang/gemm_fp8_e5m2.tir -D M=200 -D N=136 -D K=200
run tests/tilelang/grouped_gemm_bwd.tir -D batch_sum=204 -D batch_count=3 -D M=100 -D N=136 --input batch_sizes=$ints/ggb_bs1.npy --input batch_offsets=$ints/ggb_bo1.npy
run tests/tilelang/grouped_gemm_bwd.tir -D batch_sum=192 -D batch_count=2 -D M=1024 -D N=1024 --input batch_sizes=$ints/ggb_bs2.npy --input batch_offsets=$ints/ggb_bo2.npy
# NSA decoding, SeerAttention, varlen GQA, the GDN's K K^T, DeepSeek-V4's fp8 activation
# quantization and mHC's post step: the test's
# ragged sizes, then larger ones.
run tests/tilelang/nsa_decode.tir -D batch=2 -D seq_len=80 -D heads=32 --input BlockIndices=$ints/nsad_bi_a.npy
run tests/tilelang/nsa_decode.tir -D batch=2 -D seq_len=256 -D heads=32 --input BlockIndices=$ints/nsad_bi_b.npy
run tests/tilelang/seer_block_sparse_attn.tir -D batch=1 -D heads=2 -D seq_q=100 -D seq_kv=200 --input BlockSparseMask=$ints/seer_mask1.npy
run tests/tilelang/seer_block_sparse_attn.tir -D batch=4 -D heads=2 -D seq_q=256 -D seq_kv=256 --input BlockSparseMask=$ints/seer_mask2.npy
run tests/tilelang/flash_attn_gqa_fwd_varlen.tir -D UQ=177 -D UKV=193 -D heads=32 -D max_seqlen_q=120 --input cu_seqlens_q=$ints/gvl_q1.npy --input cu_seqlens_k=$ints/gvl_k1.npy
run tests/tilelang/flash_attn_gqa_fwd_varlen.tir -D UQ=2016 -D UKV=2016 -D heads=16 -D max_seqlen_q=512 --input cu_seqlens_q=$ints/gvl_q2.npy --input cu_seqlens_k=$ints/gvl_k2.npy
run tests/tilelang/gdn_chunk_scaled_dot_kkt.tir -D B=1 -D S=150 -D H=3 -D DK=100
run tests/tilelang/gdn_chunk_scaled_dot_kkt.tir -D B=1 -D S=1024 -D H=4 -D DK=128
run tests/tilelang/flash_decoding_gqa_varlen_logits.tir -D batch=2 -D total_seqlen_k=900 --input cu_seqlens_k=$ints/gdl_cu1.npy --input s_aux=$ints/gdl_sink.npy
run tests/tilelang/flash_decoding_gqa_varlen_logits.tir -D batch=3 -D total_seqlen_k=1409 --input cu_seqlens_k=$ints/gdl_cu2.npy --input s_aux=$ints/gdl_sink.npy
run tests/tilelang/kda_chunk_o.tir -D B=1 -D S=150 -D H=2
run tests/tilelang/kda_chunk_o.tir -D B=1 -D S=1024 -D H=4
run tests/tilelang/act_quant_fp8.tir -D M=70 -D N=300
run tests/tilelang/act_quant_fp8.tir -D M=256 -D N=1024
run tests/tilelang/mhc_post.tir -D num_tokens=3
run tests/tilelang/mhc_post.tir -D num_tokens=256
run tests/tilelang/grouped_gemm_fwd.tir -D K=100 -D N=64 --input batch_sizes=$ints/gg_bs.npy --input batch_offsets=$ints/gg_bo.npy --input batch_padded_offsets=$ints/gg_bp.npy
run tests/tilelang/grouped_gemm_fwd.tir -D K=1024 -D N=512 --input batch_sizes=$ints/gg_bs.npy --input batch_offsets=$ints/gg_bo.npy --input batch_padded_offsets=$ints/gg_bp.npy
run tests/tilelang/flash_attn_bwd_bhsd_fwd.tir -D batch=1 -D heads=2 -D seq_len=100
run tests/tilelang/flash_attn_bwd_bhsd_fwd.tir -D batch=2 -D heads=16 -D seq_len=512
run tests/tilelang/flash_attn_bwd_bhsd_preprocess.tir -D batch=2 -D heads=3 -D seq_len=100
run tests/tilelang/flash_attn_bwd_bhsd_preprocess.tir -D batch=1 -D heads=16 -D seq_len=512
run tests/tilelang/flash_attn_bwd_bhsd_postprocess.tir -D batch=1 -D heads=3 -D seq_len=104
run tests/tilelang/flash_attn_bwd_bhsd_postprocess.tir -D batch=2 -D heads=3 -D seq_len=512
run tests/tilelang/flash_attn_gqa_bwd_fwd.tir -D batch=1 -D seq_len=100 -D heads=32
run tests/tilelang/flash_attn_gqa_bwd_fwd.tir -D batch=1 -D seq_len=256 -D heads=32
run tests/tilelang/flash_attn_gqa_bwd_preprocess.tir -D batch=2 -D seq_len=100 -D heads=3
run tests/tilelang/flash_attn_gqa_bwd_preprocess.tir -D batch=1 -D seq_len=256 -D heads=32
run tests/tilelang/flash_attn_gqa_bwd_postprocess.tir -D batch=1 -D seq_len=104 -D heads=3
run tests/tilelang/flash_attn_gqa_bwd_postprocess.tir -D batch=1 -D seq_len=256 -D heads=32
run tests/tilelang/attn_sink_mha_bwd_bhsd_fwd.tir -D batch=1 -D heads=2 -D seq_len=100
run tests/tilelang/attn_sink_mha_bwd_bhsd_fwd.tir -D batch=1 -D heads=4 -D seq_len=512
run tests/tilelang/attn_sink_mha_bwd_bhsd_preprocess.tir -D batch=2 -D heads=3 -D seq_len=100
run tests/tilelang/attn_sink_mha_bwd_bhsd_preprocess.tir -D batch=1 -D heads=4 -D seq_len=512
run tests/tilelang/attn_sink_mha_bwd_bhsd_postprocess.tir -D batch=1 -D heads=3 -D seq_len=104
run tests/tilelang/attn_sink_mha_bwd_bhsd_postprocess.tir -D batch=1 -D heads=4 -D seq_len=512
run tests/tilelang/attn_sink_mha_bwd_bhsd_dsink.tir -D batch=2 -D heads=3 -D seq_len=200
run tests/tilelang/attn_sink_mha_bwd_bhsd_dsink.tir -D batch=1 -D heads=4 -D seq_len=512
run tests/tilelang/flash_attn_bwd_postprocess.tir -D batch=1 -D seq_len=104 -D heads=3
run tests/tilelang/flash_attn_bwd_postprocess.tir -D batch=2 -D seq_len=512 -D heads=3
# Widened tolerances (docs/cli.md, "--atol / --rtol"), measured on an H200 (2026-11-30):
# linear attention adds float32 tile atomics into O in the GPU's order and carries its
# state h between chunks in float16, so a reassociated sum can flip an h rounding (O off by
# up to 1.6e-3 where the default float32 bound is 1e-5); retention's and the chunk state's
# float16 intermediates come from the GPU's approximate exp2 and flip roundings in long
# float16-fed sums (retention at S = 4096: 5 of 4M outputs off by up to 3.9e-3, all near
# zero after cancellation; chunk state: 1 of 1M just past 1e-3 + 1e-3·|ref|). The CPU test
# bounds the interpreter against float64 (tests/tests/tilelang_examples.rs); a wrong or
# unwritten element moves by O(1) and still fails.
# flash-attention backward: dQ is float32 atomics from every key block in the GPU's order,
# and the float16 roundings of P and dS follow the GPU's approximate exp2 (measured on an
# H200, 2026-11-30, random lse / Delta: dQ off by up to 1.0e-3, dV at 3 of 16k / 8 of 196k
# elements by an f16 flip of P, ~2e-3).
run tests/tilelang/flash_attn_bwd.tir -D batch=1 -D seq_len=128 -D heads=2 --atol 4e-3 --rtol 4e-3
run tests/tilelang/flash_attn_bwd.tir -D batch=2 -D seq_len=512 -D heads=3 --atol 4e-3 --rtol 4e-3
run tests/tilelang/flash_attn_bwd_bhsd.tir -D batch=1 -D heads=2 -D seq_len=128 --atol 4e-3 --rtol 4e-3
run tests/tilelang/flash_attn_bwd_bhsd.tir -D batch=2 -D heads=3 -D seq_len=512 --atol 4e-3 --rtol 4e-3
run tests/tilelang/flash_attn_gqa_bwd.tir -D batch=1 -D seq_len=32 -D heads=16 --atol 4e-3 --rtol 4e-3
run tests/tilelang/flash_attn_gqa_bwd.tir -D batch=1 -D seq_len=256 -D heads=32 --atol 4e-3 --rtol 4e-3
run tests/tilelang/flash_attn_gqa_bwd_split.tir -D batch=1 -D seq_len=32 -D heads=16 --atol 4e-3 --rtol 4e-3
run tests/tilelang/flash_attn_gqa_bwd_split.tir -D batch=1 -D seq_len=256 -D heads=32 --atol 4e-3 --rtol 4e-3
run tests/tilelang/attn_sink_mha_bwd_bhsd.tir -D batch=1 -D heads=2 -D seq_len=136 --atol 4e-3 --rtol 4e-3
run tests/tilelang/attn_sink_mha_bwd_bhsd.tir -D batch=1 -D heads=4 -D seq_len=512 --atol 4e-3 --rtol 4e-3
# The fused MoE kernels keep silu(gate) * up in float16 (up_logits) and sum 200-256 such
# terms times the weights into float16 outputs of up to ~10^3: the GPU's approximate exp in
# silu and its summation order flip float16 roundings of up_logits (7.8e-3 there), which
# the down projection carries into the output (H200, 2026-11-30: 13 of 19500 outputs off by
# up to 0.125 at dhidden 130, 2154 of 262144 by up to 1.0 at 1024, all within 2e-2
# relative of outputs of magnitude >= 10). A wrong element moves by O(|output|).
run tests/tilelang/fusedmoe_shared.tir -D dhidden=130 -D dexpert=200 -D num_tokens=150 --atol 0.25 --rtol 2e-2
run tests/tilelang/fusedmoe_shared.tir -D dhidden=1024 -D dexpert=256 -D num_tokens=1024 --atol 0.5 --rtol 2e-2
run tests/tilelang/fusedmoe_routed.tir -D dhidden=128 -D dexpert=256 -D n_routed_experts=8 --input group_sizes=$ints/moe_gs.npy --input group_offsets=$ints/moe_go.npy --input group_padded_offsets=$ints/moe_gp.npy --input group_idx_for_bx=$ints/moe_gib.npy --atol 0.25 --rtol 2e-2
run tests/tilelang/fusedmoe_routed.tir -D dhidden=1024 -D dexpert=256 -D n_routed_experts=8 --input group_sizes=$ints/moe_gs.npy --input group_offsets=$ints/moe_go.npy --input group_padded_offsets=$ints/moe_gp.npy --input group_idx_for_bx=$ints/moe_gib.npy --atol 0.5 --rtol 2e-2
run tests/tilelang/linear_attn_fwd.tir -D B=1 -D H=2 -D S=256 --atol 4e-3
run tests/tilelang/linear_attn_fwd.tir -D B=1 -D H=16 -D S=512 --atol 4e-3
run tests/tilelang/retention_fwd.tir -D B=1 -D H=2 -D S=256
# Issue 38's corpus additions. The gated delta net kernels store bfloat16 (a flipped
# rounding is 2^-8 relative): chunk_o and wy_fast ragged (S = 100) and whole; delta_h
# (S a multiple of 64) carries its state over the chunks. linear_attn_bwd's float32
# gradients are sums of float16 products over S positions.
run tests/tilelang/gdn_chunk_o.tir -D B=1 -D S=100 -D H=2 --atol 1e-2 --rtol 1e-2
run tests/tilelang/gdn_chunk_o.tir -D B=1 -D S=1024 -D H=4 --atol 1e-2 --rtol 1e-2
run tests/tilelang/gdn_wy_fast.tir -D B=1 -D S=100 -D H=2 --atol 1e-2 --rtol 1e-2
run tests/tilelang/gdn_wy_fast.tir -D B=1 -D S=1024 -D H=4 --atol 1e-2 --rtol 1e-2
# delta_h runs one chunk: with `--seed`'s random gates G (positive as often as negative; the
# model's are decaying log-sigmoid cumsums) the state grows about exp(gl) per chunk, and a
# bfloat16 rounding flipped by the GPU's approximate exp2 is amplified chunk after chunk
# (H200, 2026-12-01: S = 64 within 1.5e-5 at seeds 1 and 2; S = 128 8 of 32768 final-state
# elements off at seed 1, none at seed 2; S = 512 states of 1e7-1e8 that differ at 694 —
# identical on sm_80's and sm_90a's code, as a layout error would not be).
run tests/tilelang/gdn_chunk_delta_h_init.tir -D B=1 -D S=64 -D H=2 --atol 1e-2 --rtol 1e-2
run tests/tilelang/gdn_chunk_delta_h_init.tir -D B=2 -D S=64 -D H=4 --atol 1e-2 --rtol 1e-2
run tests/tilelang/linear_attn_bwd.tir -D B=1 -D H=2 -D S=128 --atol 4e-3
run tests/tilelang/linear_attn_bwd.tir -D B=1 -D H=4 -D S=1024 --atol 4e-3
run tests/tilelang/fp8_lighting_indexer_clean.tir -D seq_len=3 -D seq_len_kv=4096
# The indexer's logits (T.reshape of the fp8 gemm's accumulator; sm_90a: fp8 is wgmma's).
TARGETS=sm_90a run tests/tilelang/fp8_lighting_indexer.tir -D seq_len=8 -D seq_len_kv=512 --input CuSeqLenKS=$ints/li_ks1.npy --input CuSeqLenKE=$ints/li_ke1.npy
TARGETS=sm_90a run tests/tilelang/fp8_lighting_indexer.tir -D seq_len=64 -D seq_len_kv=4096 --input CuSeqLenKS=$ints/li_ks2.npy --input CuSeqLenKE=$ints/li_ke2.npy
run tests/tilelang/fp8_lighting_indexer_clean.tir -D seq_len=100 -D seq_len_kv=8192
# sparse_mla_fwd needs 230464 bytes of shared memory: sm_90a only (as the original).
TARGETS=sm_90a run tests/tilelang/sparse_mla_fwd.tir -D batch=1 -D seq_len=3 -D seq_len_kv=130 --input Indices=$ints/smla_a.npy --atol 1e-2 --rtol 1e-2
TARGETS=sm_90a run tests/tilelang/sparse_mla_fwd.tir -D batch=2 -D seq_len=64 -D seq_len_kv=512 --input Indices=$ints/smla_b.npy --atol 1e-2 --rtol 1e-2
run tests/tilelang/retention_fwd.tir -D B=1 -D H=4 -D S=4096 --atol 8e-3
run tests/tilelang/mamba_chunk_state.tir -D batch=1 -D seqlen=200 -D chunk_size=128 -D ngroups=2 -D nheads=4 -D headdim=80 -D dstate=100
run tests/tilelang/mamba_chunk_state.tir -D batch=1 -D seqlen=4096 -D chunk_size=256 -D ngroups=1 -D nheads=8 -D headdim=64 -D dstate=128 --rtol 4e-3
run tests/tilelang/mamba_chunk_scan.tir -D batch=1 -D seqlen=200 -D chunk_size=128 -D ngroups=2 -D nheads=4 -D headdim=80 -D dstate=100
run tests/tilelang/mamba_chunk_scan.tir -D batch=1 -D seqlen=4096 -D chunk_size=256 -D ngroups=1 -D nheads=8 -D headdim=64 -D dstate=128
# TileLang's Hadamard transform (warp shuffles from a lane computed at run time): each
# configuration of its tunable group, for 3 rows and for the original's batch of 64. At
# n = 64 a block of 8 threads shuffles in segments of 8 lanes under a full mask (PTX waits
# only for the lanes the block has), at 16384 through two exchange rounds.
H64="-D n=64 -D threads=8 -D thread_elem=8 -D thread_round=3 -D warps=1 -D warp_round=3 -D warp_size=8 -D block_round=0 -D exchange_round=1 -D thread_elem_in_smem=8"
H256="-D n=256 -D threads=32 -D thread_elem=8 -D thread_round=3 -D warps=1 -D warp_round=5 -D warp_size=32 -D block_round=0 -D exchange_round=1 -D thread_elem_in_smem=8"
H2048="-D n=2048 -D threads=256 -D thread_elem=8 -D thread_round=3 -D warps=8 -D warp_round=5 -D warp_size=32 -D block_round=3 -D exchange_round=1 -D thread_elem_in_smem=8"
H16384="-D n=16384 -D threads=256 -D thread_elem=64 -D thread_round=6 -D warps=8 -D warp_round=5 -D warp_size=32 -D block_round=3 -D exchange_round=2 -D thread_elem_in_smem=32"
for h in "$H64" "$H256" "$H2048" "" "$H16384"; do
    # shellcheck disable=SC2086 # each configuration is several -D arguments
    run tests/tilelang/hadamard.tir -D b=3 $h
    # shellcheck disable=SC2086
    run tests/tilelang/hadamard.tir -D b=64 $h
done
# TileLang's hand-written warp specialization (docs/ir.md, "Hand-written warp
# specialization"; references in tests/tests/tilelang_examples.rs): the four with mbarriers
# on sm_90a only (sm_80 refuses them: rule I7), copy_gemm_0_1 on both; the test's ragged
# size (four k-steps), then whole tiles.
for ws in barrierpipe_stage2 copy_0_gemm_1 copy_1_gemm_0 softpipe_stage2; do
    TARGETS=sm_90a run tests/tilelang/ws_gemm_$ws.tir -D M=200 -D N=136 -D K=200
    TARGETS=sm_90a run tests/tilelang/ws_gemm_$ws.tir -D M=512 -D N=512 -D K=512
done
run tests/tilelang/ws_gemm_copy_gemm_0_1.tir -D M=200 -D N=136 -D K=200
run tests/tilelang/ws_gemm_copy_gemm_0_1.tir -D M=512 -D N=512 -D K=512
# T.print (docs/ir.md, "Printing"): the device's vprintf lines are the interpreter's.
# `run --device` runs both in one process, so each of the case's 226 lines (all distinct)
# shows exactly twice, whatever order the GPU's threads print in.
[ "$part_k" -eq "$part_n" ] && [ -z "${ONLY:-}" ] || exit $fail
for target in sm_90a sm_80; do
    out=$("$TLC" run tests/cases/valid/print.tir --device --target $target --seed 1 2>&1)
    rc=$?
    odd=$(echo "$out" | grep "^msg=" | sort | uniq -c | awk '$1 != 2' | head -5)
    lines=$(echo "$out" | grep -c "^msg=")
    if [ $rc -eq 0 ] && [ -z "$odd" ] && [ "$lines" -eq 452 ]; then
        echo "ok    $target print.tir: the GPU's printf lines are the interpreter's"
    else
        echo "FAIL  $target print.tir: $lines lines, not each twice:"
        echo "$odd" | sed 's/^/      /'
        fail=1
    fi
done
# TileLang's example scripts, their own main() through the tlc wheel's tlc.tilelang (needs
# python3 with the wheel and torch; minutes): run when they are installed.
if python3 -c "import tlc.tilelang, torch" 2>/dev/null; then
    scripts/gpu-scripts.sh python3 || fail=1
else
    echo "skip  scripts/gpu-scripts.sh: python3 lacks the tlc wheel or torch"
fi
exit $fail
