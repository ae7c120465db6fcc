//! TileLang's example kernels (`tests/tilelang/`, translations of tile-ai/tilelang's
//! `examples/`) that tlc compiles, and tlc's own `examples/` written in that style with a
//! tuning space (the split-K and stream-K GEMMs: a size binds its tunables too), checked end
//! to end against independent references:
//!
//! 1. `tlc check`'s road (parse, verify) accepts the file as written.
//! 2. The tile-level interpreter, on random inputs of a fixed seed (except those [`given`]
//!    fixes, such as group sizes) at two sizes (one ragged where the kernel masks its edges), matches a reference computed here in f64 from the
//!    same inputs by the math of the file's header — softmax, layer norm, rms norm, top-k,
//!    attention (with the causal mask), elementwise add — not by the kernel's algorithm.
//! 3. The default pipeline of each target lowers it (the refusals listed in [`REFUSED`] are
//!    located errors instead); the lowered kernel, interpreted at the first size on the same
//!    inputs, matches the same reference and the tile-level outputs.
//! 4. Its PTX passes ptxas for both targets (`compiler/tests/common`: no warning, no spill,
//!    at most 255 registers), except where [`PTXAS_EXPECTED`] documents why not.
//!
//! The other files of the folder are not supported yet: [`NOT_YET`] lists them, and each
//! must be refused by `check` or by `compile` (both targets) with located errors — never a
//! panic, never compiled: a file that starts compiling fails this test until it gets a
//! reference here.
//!
//! **Tolerances.** Exact where the arithmetic is exact (elementwise add: one float32 add;
//! top-k: maxima and indices). Elsewhere each output element is compared with its exact value
//! `r` by `|x − r| ≤ e`, where `e` comes from a model of the kernel's arithmetic as its header
//! states it, evaluated in `tlc_tests::bound::Approx`: every rounding (float32; float16 and
//! bfloat16 for the operations and stores in those types; the literals' own rounding, such as
//! `1.44269504` in float16), every sum bounded for *any* order of its terms (the interpreter
//! folds reductions in index order, `lower-reductions` reassociates them into strided partials
//! and a tree, the gemms sum in k-steps), and the math functions exact — as the interpreter
//! computes them (docs/ir.md "Math functions": `T.exp2`, `T.log2`, `T.rsqrt` are exact here;
//! on the GPU they are the fast approximations, whose bounds `scripts/gpu-check.sh` reads).
//! The bounds are worst cases; each check also reports how much of its bound was used. The
//! lowered kernel's outputs must be within `2e` of the tile level's (both are within `e` of
//! `r`), i.e. exactly equal where `e` is 0.

// Shared with `print.rs` (a file included as a module once).
#[path = "tilelang_examples/act_quant.rs"]
mod act_quant;
#[allow(dead_code)]
#[path = "../../compiler/tests/common/emit.rs"]
pub(crate) mod emit;
#[path = "tilelang_examples/gdn.rs"]
mod gdn;
#[path = "tilelang_examples/gemm_fp8.rs"]
mod gemm_fp8;
#[path = "tilelang_examples/gqa_decode_logits.rs"]
mod gqa_decode_logits;
#[allow(dead_code)]
#[path = "../../compiler/tests/common/immediates.rs"]
mod immediates;
#[path = "tilelang_examples/mhc.rs"]
mod mhc;
mod mla_persistent;
#[path = "tilelang_examples/rand.rs"]
mod rand;
#[path = "tilelang_examples/sparse_mla.rs"]
mod sparse_mla;
#[allow(dead_code)]
#[path = "../../compiler/tests/common/toolchain.rs"]
mod toolchain;

use std::collections::HashMap;
use std::f64::consts::LOG2_E;
use std::path::Path;
use tlc::diagnostics::SourceFile;
use tlc::driver::pipeline_error;
use tlc_ir::dtype::DType;
use tlc_ir::interp::{self, fp8, packed_for, unpacked_for, RunOptions, Tensor};
use tlc_ir::PrimFunc;
use tlc_passes::{default_pipeline, Instrumentation, PassContext, PassManager, Target};
use tlc_tests::bound::{Approx, Fp};
use toolchain::ptxas_log;

type Outputs = HashMap<String, Tensor>;

/// Per output parameter, per element in row-major order: the exact value `v` and the bound
/// `e` of a computed value's distance from it.
type Expected = Vec<(&'static str, Vec<Approx>)>;

/// log2 e as TileLang's examples write it, `1.44269504` (a float16 literal in the softmax
/// example, float32 in the Mamba ones).
#[allow(clippy::approx_constant)]
const LOG2_E_WRITTEN: f64 = 1.44269504;

/// The folder of the translations, relative to the workspace root.
const DIR: &str = "tests/tilelang";

/// The seed of the random inputs (`interp::random_input`: uniform in [-1, 1) for floats).
const SEED: u64 = 14;

/// A supported kernel: its file stem, two bindings of its symbolic dims (the first is also
/// interpreted after lowering), and its reference.
struct Example {
    /// The file's stem in `tests/tilelang/`, or a path from the root without `.tir`
    /// (`examples/gemm_splitk`).
    stem: &'static str,
    /// Dims, and the tunables of a kernel with a tuning space (the rest at their defaults).
    sizes: [&'static [(&'static str, i64)]; 2],
    reference: fn(&Outputs) -> Expected,
}

/// The Mamba-2 kernels' sizes (chunk state and chunk scan take the same): 200 positions
/// in chunks of 128 (the last chunk 72 rows), 4 heads in 2 groups, headdim 80 and dstate
/// 100 (partial tiles); then two batches of whole tiles, one group.
const MAMBA_SIZES: [&[(&str, i64)]; 2] = [
    &[
        ("batch", 1),
        ("seqlen", 200),
        ("chunk_size", 128),
        ("ngroups", 2),
        ("nheads", 4),
        ("headdim", 80),
        ("dstate", 100),
    ],
    &[
        ("batch", 2),
        ("seqlen", 256),
        ("chunk_size", 128),
        ("ngroups", 1),
        ("nheads", 2),
        ("headdim", 64),
        ("dstate", 128),
    ],
];

const EXAMPLES: &[Example] = &[
    // 32 x 32 tiles, masked by T.copy: ragged in both dims, then whole tiles.
    Example {
        stem: "elementwise_add",
        sizes: [&[("M", 70), ("N", 45)], &[("M", 64), ("N", 96)]],
        reference: elementwise_add,
    },
    // 64-position chunks along S: 150 = 2 * 64 + 22 (a ragged last chunk), then whole ones.
    Example {
        stem: "cumsum_chunk_local",
        sizes: [
            &[("B", 1), ("S", 150), ("H", 3)],
            &[("B", 2), ("S", 128), ("H", 2)],
        ],
        reference: chunk_local_cumsum,
    },
    // One row per block; N is the constant 1024.
    Example {
        stem: "norm_rms",
        sizes: [&[("M", 3)], &[("M", 5)]],
        reference: rms_norm,
    },
    // 512-wide chunks: 1100 = 2 * 512 + 76 (the last chunk masked), then two whole chunks.
    Example {
        stem: "norm_rms_splitk",
        sizes: [&[("M", 3), ("N", 1100)], &[("M", 2), ("N", 1024)]],
        reference: rms_norm,
    },
    // One row per block; D is the constant 8192.
    Example {
        stem: "norm_layernorm_fwd",
        sizes: [&[("N", 2)], &[("N", 3)]],
        reference: layer_norm,
    },
    // Correct only for N a multiple of its 8192-wide chunk (the header: padding would enter
    // the max and the sum): one chunk, then two (the running log-sum-exp across chunks).
    Example {
        stem: "softmax_online",
        sizes: [&[("M", 2), ("N", 8192)], &[("M", 3), ("N", 16384)]],
        reference: softmax,
    },
    // Unmasked stores: M a multiple of its 64-row block.
    Example {
        stem: "topk_topk",
        sizes: [&[("M", 64)], &[("M", 192)]],
        reference: topk,
    },
    // 128-row tiles: 160 = 128 + 32 (a masked key tile, a partial query tile), then a
    // single partial tile in two batches.
    Example {
        stem: "flash_attn_fwd_bshd",
        sizes: [
            &[("batch", 1), ("heads", 1), ("seq_len", 160)],
            &[("batch", 2), ("heads", 1), ("seq_len", 64)],
        ],
        reference: attention_bshd,
    },
    // 64-row tiles over 64 query heads in 4 KV groups: 100 (ragged), then 64 positions.
    Example {
        stem: "flash_attn_gqa_fwd_bshd",
        sizes: [
            &[("batch", 1), ("seq_len", 100)],
            &[("batch", 1), ("seq_len", 64)],
        ],
        reference: gqa_fwd_bshd,
    },
    // Split-K decoding: 8 splits of seqlen_kv / 8 keys in 128-key tiles, then the combine
    // kernel. 256 keys: splits of 32, one tile each, its last 96 columns masked (keys of the
    // next split, and past the end for the last split); then two batches of 2048 keys: two
    // whole tiles per split (the running max and rescaling across tiles), KV head 5's second
    // tiles wholly masked ([`given`]).
    Example {
        stem: "flash_decoding_gqa",
        sizes: [
            &[("batch", 1), ("seqlen_kv", 256)],
            &[("batch", 2), ("seqlen_kv", 2048)],
        ],
        reference: flash_decoding_gqa,
    },
    // DeepSeek MLA decoding, one KV head under 128 query heads in 64-head blocks, 64-key
    // tiles (the original leaves a ragged last tile unmasked: whole tiles only): two tiles
    // of one batch (the running max and rescaling), then two batches of one tile.
    Example {
        stem: "mla_decode",
        sizes: [
            &[("batch", 1), ("seqlen_kv", 128)],
            &[("batch", 2), ("seqlen_kv", 64)],
        ],
        reference: mla_decode,
    },
    // Persistent MLA decoding (132 blocks walking the tiles; `T.sync_grid()` between the
    // two splits' attention and their combine): one batch of 256 keys (two 64-key tiles per
    // split), then two batches of 128 (one tile per split). The original leaves a ragged
    // last tile unmasked: whole tiles only.
    Example {
        stem: "mla_decode_persistent",
        sizes: [
            &[("batch", 1), ("seqlen_kv", 256)],
            &[("batch", 2), ("seqlen_kv", 128)],
        ],
        reference: mla_persistent::mla_decode_persistent,
    },
    // Causal attention with a sink logit per head, 128-row tiles: 100 queries over 130 keys
    // (past_len 30: a masked second key tile, a partial query tile) in 2 heads, then two
    // batches of 128 queries over 300 keys (three key tiles, the last ragged).
    Example {
        stem: "attn_sink_mha_fwd_bhsd",
        sizes: [
            &[("batch", 1), ("heads", 2), ("seq_q", 100), ("seq_kv", 130)],
            &[("batch", 2), ("heads", 1), ("seq_q", 128), ("seq_kv", 300)],
        ],
        reference: attention_sink,
    },
    // Groups of 5, 9 and 13 rows ([`given`]: the offsets the caller computes), one 64-row
    // block each (rows of the next groups and past the end computed, not stored): K = 100
    // (a ragged last k-step, zero-filled), then two column tiles over two whole k-steps. N
    // stays a multiple of 64 (the header: the column store is unguarded).
    Example {
        stem: "grouped_gemm_fwd",
        sizes: [&[("K", 100), ("N", 64)], &[("K", 64), ("N", 128)]],
        reference: grouped_gemm,
    },
    // dLLM block-causal attention, 64-row tiles, dllm blocks of 16: the sequence is two
    // halves of whole tiles (the original asserts it), so its edges are the masks: the
    // noisy diagonal (qb = kb), the clean boundary tile (qb > kb, wholly masked for the
    // first dllm block: the first tile wiped by the next's alpha = 0) and the clean diagonal
    // (qb >= kb). One tile per half, two heads; then two batches of two tiles per half.
    Example {
        stem: "block_causal_attn_fwd",
        sizes: [
            &[("batch", 1), ("seq_len", 128), ("heads", 2)],
            &[("batch", 2), ("seq_len", 256), ("heads", 1)],
        ],
        reference: block_causal_attention,
    },
    // Native sparse attention, one selected 32-key block per token and KV head ([`given`]:
    // a block among 0..max(1, t / 32), as main() draws them), keys past the token masked:
    // main()'s shape (2 x 64 tokens, 16 query heads on one KV head: every token's block is
    // 0, the first 32 tokens' masked past the token), then 100 tokens over 2 KV heads
    // (tokens 64..99 pick among blocks 0..2).
    Example {
        stem: "nsa_fwd",
        sizes: [
            &[("batch", 2), ("seq_len", 64), ("heads", 16)],
            &[("batch", 1), ("seq_len", 100), ("heads", 32)],
        ],
        reference: nsa_fwd,
    },
    // The MoE's shared expert, 128 x 128 tiles: 150 tokens, dhidden 130 and dexpert 200
    // (every dim ragged: the copies mask both kernels' edges), then 64 tokens over whole
    // tiles in dhidden and dexpert.
    Example {
        stem: "fusedmoe_shared",
        sizes: [
            &[("dhidden", 130), ("dexpert", 200), ("num_tokens", 150)],
            &[("dhidden", 128), ("dexpert", 256), ("num_tokens", 64)],
        ],
        reference: fusedmoe_shared,
    },
    // The MoE's routed experts: 256 rows in 8 experts' groups of 130, 0, 30, 16, 20, 10, 50
    // and 0 rows ([`given`]: the caller's offsets and block table): expert 0 spans two
    // 128-row blocks (the second stores 2 rows), empty experts' blocks store nothing, each
    // block reads rows of the next groups (ragged groups). dhidden and dexpert multiples of
    // 128 (the header).
    Example {
        stem: "fusedmoe_routed",
        sizes: [
            &[("dhidden", 128), ("dexpert", 256), ("n_routed_experts", 8)],
            &[("dhidden", 256), ("dexpert", 128), ("n_routed_experts", 8)],
        ],
        reference: fusedmoe_routed,
    },
    // MLA decoding over a paged cache (pages of 64 rows, at most 4 per sequence:
    // max_seqlen_pad = 256), tiles in reverse order ([`given`]: permuted page tables and
    // the lengths): 130 keys (the first tile processed, the last, masked past key 130),
    // then two sequences of 256 and 64 keys (whole tiles).
    Example {
        stem: "mla_decode_paged",
        sizes: [&[("batch", 1)], &[("batch", 2)]],
        reference: mla_decode_paged,
    },
    // Sparse GQA decoding over selected 32-key blocks ([`given`]: block lists sorted in
    // descending order, -1 padded, and the lengths), 4 query heads per KV head, split over
    // the block list: 200 keys (the first block ragged, masked at the length; KV heads with
    // fewer blocks than splits: an empty split, glse 0), 5 list positions in 2 splits; then
    // two sequences of 512 and 77 keys, 4 positions in 3 splits.
    Example {
        stem: "sparse_gqa_decode_varlen_indice",
        sizes: [
            &[
                ("batch", 1),
                ("num_split", 2),
                ("max_cache_seqlen", 256),
                ("max_selected_blocks", 5),
            ],
            &[
                ("batch", 2),
                ("num_split", 3),
                ("max_cache_seqlen", 512),
                ("max_selected_blocks", 4),
            ],
        ],
        reference: sparse_gqa_decode_indice,
    },
    // The mask variant: split s walks its contiguous share of the blocks, the masked-out
    // ones skipped ([`given`]: every split up to the last nonempty one keeps a block, the
    // header's quirk), every block masked at the length: 200 keys in 8 blocks, 2 splits;
    // then 512 and 77 keys in 16 blocks, 3 splits (the short sequence's later splits empty).
    Example {
        stem: "sparse_gqa_decode_varlen_mask",
        sizes: [
            &[
                ("batch", 1),
                ("num_split", 2),
                ("max_cache_seqlen", 256),
                ("num_blocks", 8),
            ],
            &[
                ("batch", 2),
                ("num_split", 3),
                ("max_cache_seqlen", 512),
                ("num_blocks", 16),
            ],
        ],
        reference: sparse_gqa_decode_mask,
    },
    // MHA decoding-style inference, keys split in 4 (seqlen_kv a multiple of 256: the
    // split's 64-key tiles are unmasked, the header), 128-row query blocks: 100 queries (a
    // partial block: rows computed on zero-filled Q, not stored) over 256 keys in 2 heads,
    // then two batches of 130 queries (a second, 2-row block) over 512 keys (two tiles per
    // split: the running max and rescaling).
    Example {
        stem: "flash_decoding_mha_inference",
        sizes: [
            &[
                ("batch", 1),
                ("heads", 2),
                ("seqlen_q", 100),
                ("seqlen_kv", 256),
            ],
            &[
                ("batch", 2),
                ("heads", 1),
                ("seqlen_q", 130),
                ("seqlen_kv", 512),
            ],
        ],
        reference: flash_decoding_mha,
    },
    // The backward pass's row dot products, 32-row blocks: 100 = 3 * 32 + 4 rows (a masked
    // last block) over two batches of 3 heads, then two whole blocks.
    Example {
        stem: "flash_attn_bwd_preprocess",
        sizes: [
            &[("batch", 2), ("seq_len", 100), ("heads", 3)],
            &[("batch", 1), ("seq_len", 64), ("heads", 2)],
        ],
        reference: flash_bwd_preprocess,
    },
    // Varlen causal attention over packed sequences ([`given`]: the offsets): three
    // sequences of 50 / 100 / 7 queries over 60 / 100 / 3 keys (ragged tiles, a query
    // block past a short sequence), then two of 64 / 40 over 64 / 20 (20 rows of the second
    // see no key: 0). batch_size is read off the offsets' extent, batch_size + 1.
    Example {
        stem: "flash_attn_fwd_varlen_causal",
        sizes: [
            &[
                ("UQ", 157),
                ("UKV", 163),
                ("heads", 2),
                ("max_seqlen_q", 100),
            ],
            &[("UQ", 104), ("UKV", 84), ("heads", 1), ("max_seqlen_q", 64)],
        ],
        reference: varlen_attention,
    },
    // fp4 (e2m1) weights dequantized by a value macro, 128 x 128 x 128 tiles, K a multiple
    // of 128 (the loop has no tail): ragged M and N, then whole tiles.
    Example {
        stem: "dequant_gemm_fp4_hopper",
        sizes: [
            &[("M", 100), ("N", 130), ("K", 256)],
            &[("M", 128), ("N", 256), ("K", 128)],
        ],
        reference: dequant_gemm_fp4,
    },
    // Block-sparse causal attention, 64 x 64 blocks over a 4 x 4 block mask ([`given`]):
    // 200 positions (a ragged last block), then 256 over two batches.
    Example {
        stem: "blocksparse_attn_fwd",
        sizes: [
            &[("batch", 1), ("heads", 2), ("seq_len", 200)],
            &[("batch", 2), ("heads", 1), ("seq_len", 256)],
        ],
        reference: blocksparse_attention,
    },
    // The backward pass's main kernel (64 x 64 blocks, dQ added through its T.Layout): two
    // key blocks over two query blocks of 2 heads, then two batches of one block each.
    // seq_len a multiple of 64: the original's dQ atomics are unguarded.
    Example {
        stem: "flash_attn_bwd",
        sizes: [
            &[("batch", 1), ("seq_len", 128), ("heads", 2)],
            &[("batch", 2), ("seq_len", 64), ("heads", 1)],
        ],
        reference: flash_bwd,
    },
    // The post-process: dQ read through the layout (64-row blocks; seq_len a multiple of 8,
    // as the layout declares): a ragged last block, then whole ones.
    Example {
        stem: "flash_attn_bwd_postprocess",
        sizes: [
            &[("batch", 1), ("seq_len", 104), ("heads", 3)],
            &[("batch", 2), ("seq_len", 128), ("heads", 1)],
        ],
        reference: flash_bwd_postprocess,
    },
    // The BHSD backward's forward pass (64 x 64 tiles, Output and the base-2 lse): 100
    // positions (a masked last key tile, a partial query tile) over 2 heads, then two
    // batches of two whole tiles.
    Example {
        stem: "flash_attn_bwd_bhsd_fwd",
        sizes: [
            &[("batch", 1), ("heads", 2), ("seq_len", 100)],
            &[("batch", 2), ("heads", 1), ("seq_len", 128)],
        ],
        reference: attention_bhsd_lse,
    },
    // The BHSD pre-process, as flash_attn_bwd_preprocess: a masked last 32-row block, then
    // whole ones.
    Example {
        stem: "flash_attn_bwd_bhsd_preprocess",
        sizes: [
            &[("batch", 2), ("heads", 3), ("seq_len", 100)],
            &[("batch", 1), ("heads", 2), ("seq_len", 64)],
        ],
        reference: flash_bwd_preprocess_bhsd,
    },
    // The BHSD main kernel, as flash_attn_bwd (dQ's layout [b, h, l // 8, ...]).
    Example {
        stem: "flash_attn_bwd_bhsd",
        sizes: [
            &[("batch", 1), ("heads", 2), ("seq_len", 128)],
            &[("batch", 2), ("heads", 1), ("seq_len", 64)],
        ],
        reference: flash_bwd_bhsd,
    },
    // The BHSD post-process: a ragged last 64-row block, then whole ones.
    Example {
        stem: "flash_attn_bwd_bhsd_postprocess",
        sizes: [
            &[("batch", 1), ("heads", 3), ("seq_len", 104)],
            &[("batch", 2), ("heads", 1), ("seq_len", 128)],
        ],
        reference: flash_bwd_postprocess_bhsd,
    },
    // The GQA backward's forward pass (16 query heads per KV head, head dims 192 / 128,
    // 128 x 64 tiles): 64 positions of 16 heads (a partial query tile), then 100 positions
    // (a masked second key tile) of 32 heads over 2 KV heads.
    Example {
        stem: "flash_attn_gqa_bwd_fwd",
        sizes: [
            &[("batch", 1), ("seq_len", 64), ("heads", 16)],
            &[("batch", 1), ("seq_len", 100), ("heads", 32)],
        ],
        reference: gqa_bwd_fwd,
    },
    // The GQA pre-process (head dim 128: four 32-wide column blocks).
    Example {
        stem: "flash_attn_gqa_bwd_preprocess",
        sizes: [
            &[("batch", 2), ("seq_len", 100), ("heads", 3)],
            &[("batch", 1), ("seq_len", 64), ("heads", 2)],
        ],
        reference: flash_bwd_preprocess,
    },
    // The GQA main kernel with dK / dV tile atomics (128-key blocks, 32-row query blocks;
    // seq_len a multiple of 32, the dQ atomics being unguarded): 16 query heads adding into
    // one KV head, one query block in a key block of 32 keys (its other 96 rows past
    // seq_len: the tile atomics' mask); then 32 heads over 2 KV heads, two query blocks.
    Example {
        stem: "flash_attn_gqa_bwd",
        sizes: [
            &[("batch", 1), ("seq_len", 32), ("heads", 16)],
            &[("batch", 1), ("seq_len", 64), ("heads", 32)],
        ],
        reference: flash_bwd_gqa,
    },
    // The GQA main kernel's split form (per-query-head float16 dK / dV), same sizes.
    Example {
        stem: "flash_attn_gqa_bwd_split",
        sizes: [
            &[("batch", 1), ("seq_len", 32), ("heads", 16)],
            &[("batch", 1), ("seq_len", 64), ("heads", 32)],
        ],
        reference: flash_bwd_gqa_split,
    },
    // The attention-sink backward's forward pass (causal, 64 x 64 tiles, head dim 128,
    // Output and lse with the sink): 100 positions of 2 heads (ragged tiles), then two
    // batches of 128.
    Example {
        stem: "attn_sink_mha_bwd_bhsd_fwd",
        sizes: [
            &[("batch", 1), ("heads", 2), ("seq_len", 100)],
            &[("batch", 2), ("heads", 1), ("seq_len", 128)],
        ],
        reference: attention_sink_lse,
    },
    // Its pre-process (head dim 128).
    Example {
        stem: "attn_sink_mha_bwd_bhsd_preprocess",
        sizes: [
            &[("batch", 2), ("heads", 3), ("seq_len", 100)],
            &[("batch", 1), ("heads", 2), ("seq_len", 64)],
        ],
        reference: flash_bwd_preprocess_bhsd,
    },
    // Its causal main kernel (128-key blocks, 32-row query blocks from the block's
    // diagonal): 136 = 128 + 8 positions of 2 heads (a key block of 8 keys, a query block
    // of 8 rows: the causal mask and dQ's masked tile atomics), then two batches of two
    // whole key blocks.
    Example {
        stem: "attn_sink_mha_bwd_bhsd",
        sizes: [
            &[("batch", 1), ("heads", 2), ("seq_len", 136)],
            &[("batch", 2), ("heads", 1), ("seq_len", 256)],
        ],
        reference: attention_sink_bwd,
    },
    // Its post-process (head dim 128): a ragged last 64-row block, then whole ones.
    Example {
        stem: "attn_sink_mha_bwd_bhsd_postprocess",
        sizes: [
            &[("batch", 1), ("heads", 3), ("seq_len", 104)],
            &[("batch", 2), ("heads", 1), ("seq_len", 128)],
        ],
        reference: flash_bwd_postprocess_bhsd,
    },
    // The sinks' gradient per position, 128-position blocks: a ragged last block, then
    // one whole block.
    Example {
        stem: "attn_sink_mha_bwd_bhsd_dsink",
        sizes: [
            &[("batch", 2), ("heads", 3), ("seq_len", 200)],
            &[("batch", 1), ("heads", 2), ("seq_len", 128)],
        ],
        reference: attention_sink_dsink,
    },
    // The GQA post-process (head dim 192): a ragged last 64-row block, then whole ones.
    Example {
        stem: "flash_attn_gqa_bwd_postprocess",
        sizes: [
            &[("batch", 1), ("seq_len", 104), ("heads", 3)],
            &[("batch", 2), ("seq_len", 64), ("heads", 2)],
        ],
        reference: flash_bwd_postprocess,
    },
    // 64-row tiles: 100 queries over 130 keys (past_len 30, both ragged), then 128 over 128.
    Example {
        stem: "flash_attn_fwd_bhsd_causal",
        sizes: [
            &[("batch", 1), ("heads", 1), ("seq_q", 100), ("seq_kv", 130)],
            &[("batch", 1), ("heads", 1), ("seq_q", 128), ("seq_kv", 128)],
        ],
        reference: attention_bhsd_causal,
    },
    // 32-row blocks, unmasked (N a multiple of 32); D is the constant 8192. One block, then
    // two (the cross-block atomic adds into DGamma and DBeta).
    Example {
        stem: "norm_layernorm_bwd",
        sizes: [&[("N", 32)], &[("N", 64)]],
        reference: layer_norm_bwd,
    },
    // 128 x 256 x 64 tiles over a persistent grid of 132 blocks: ragged in M and N (a
    // 2 x 2 tile domain with masked edges), then one whole tile with two k-steps and a
    // masked third.
    Example {
        stem: "gemm_persistent",
        sizes: [
            &[("M", 200), ("N", 300), ("K", 64)],
            &[("M", 128), ("N", 256), ("K", 160)],
        ],
        reference: gemm_f16,
    },
    // 8 rows x 128 columns per block: 300 = 2 * 128 + 44 (the last group masked), then two
    // whole groups (M a multiple of 8: the X_amax stores are unmasked).
    Example {
        stem: "cast_per_token_fp8",
        sizes: [&[("M", 16), ("N", 300)], &[("M", 8), ("N", 256)]],
        reference: per_token_cast_fp8,
    },
    // 128 x 128 output tiles, 32-wide k-blocks under a random mask (M, N, K multiples of
    // 128, 128, 32: the mask's shape needs it).
    Example {
        stem: "gemm_blocksparse",
        sizes: [
            &[("M", 128), ("N", 256), ("K", 128)],
            &[("M", 256), ("N", 128), ("K", 64)],
        ],
        reference: gemm_blocksparse,
    },
    // Per-thread code with TileLang's automatic barriers (`thread-sync`): one 128-row block
    // and one 128-wide chunk, then two blocks over three chunks (the loop-carried barrier).
    // No masking: N and K multiples of 128.
    Example {
        stem: "gemv_naive",
        sizes: [&[("N", 128), ("K", 128)], &[("N", 256), ("K", 384)]],
        reference: gemv,
    },
    // Per-thread code on a 2 x 32 block, atomic adds into shared memory between automatic
    // barriers: one block and one 256-wide chunk, then three blocks over three chunks. No
    // masking: N a multiple of 2, K of 256.
    Example {
        stem: "gemv_splitk_vectorized",
        sizes: [&[("N", 2), ("K", 256)], &[("N", 6), ("K", 768)]],
        reference: gemv,
    },
    // 128 rows x 128 columns per step: 130 rows (a masked second block) over 200 columns (a
    // masked second step), then one block of two whole steps.
    Example {
        stem: "gemv_alloc_reducer",
        sizes: [&[("M", 130), ("N", 200)], &[("M", 128), ("N", 256)]],
        reference: gemv_reducer,
    },
    // M, N, K are constants of the file (1 x 1024 x 1024: the shapes are factory arguments,
    // B's is Python arithmetic on K), so both runs are that one size; N is a multiple of
    // the 4 rows a block covers and K of the 256-wide chunk (no masking in the original).
    Example {
        stem: "dequant_gemv_fp16xint4",
        sizes: [&[], &[]],
        reference: dequant_gemv,
    },
    // M = N = K = 256 are constants of the file (B's shape is Python arithmetic on K):
    // 2 x 2 blocks of 128 x 128, eight 32-wide k-steps through the 3-stage pipeline, each
    // decoding its 128 x 32 weights in the threads' own code between `T.copy` and `T.gemm`.
    Example {
        stem: "dequant_gemm_fine_grained",
        sizes: [&[], &[]],
        reference: dequant_gemm,
    },
    // 4 rows x 128 columns per block, groups of rows given by `batch_sizes` ([`given`]):
    // N = 300 = 2 * 128 + 44 (the last column group masked), the second group's last rows
    // past M (read as 0) and both groups shorter than M_max (padding rows zeroed); then
    // three groups, the middle one empty, N whole groups.
    Example {
        stem: "cast_group_per_split_token_fp8",
        sizes: [
            &[("M", 9), ("N", 300), ("BG", 2), ("M_max", 8)],
            &[("M", 12), ("N", 256), ("BG", 3), ("M_max", 8)],
        ],
        reference: group_per_split_token_cast_fp8,
    },
    // Sizes fixed by the file (256 x 1024 x 512, 108 programs): stream-K pieces of tiles
    // merged with atomics, then whole tiles. C zeroed ([`given`]); the second run on
    // small-integer inputs, where every partial sum is exact whatever the merge order.
    Example {
        stem: "gemm_streamk",
        sizes: [&[], &[]],
        reference: gemm_streamk,
    },
    // 64 x 128 x 32 tiles over the im2col matrix (N*H*W) x (9*C): 1*5*7 = 35 rows (one
    // partial row tile: tlc's im2col reads 0 past the last image), 9*5 = 45 taps (a partial
    // k-tile) and F = 100 (a partial column tile); then 2*4*8 = 64 rows, 9*8 = 72 taps over
    // three k-steps (the 3-stage pipeline), F = 128.
    Example {
        stem: "conv_im2col",
        sizes: [
            &[("N", 1), ("C", 5), ("H", 5), ("W", 7), ("F", 100)],
            &[("N", 2), ("C", 8), ("H", 4), ("W", 8), ("F", 128)],
        ],
        reference: conv_im2col,
    },
    // The same convolution with the kernel size a symbolic dim (T.im2col's kernel and pad
    // expressions of K): K = 3 as conv_im2col's first size, then K = 5 (pad 2, 25 taps of 8
    // channels over 7 k-steps).
    Example {
        stem: "conv_im2col_symbolic_k",
        sizes: [
            &[("N", 1), ("C", 5), ("H", 5), ("W", 7), ("F", 100), ("K", 3)],
            &[("N", 2), ("C", 8), ("H", 4), ("W", 8), ("F", 128), ("K", 5)],
        ],
        reference: conv_im2col,
    },
    // Chunked linear attention, chunks of 64 positions (S a multiple of 64: no masking): two
    // heads over 4 chunks, then two batches of one head over 8 (the original's S = 512). O
    // zeroed ([`given`]: the kernel adds into it).
    Example {
        stem: "linear_attn_fwd",
        sizes: [
            &[("B", 1), ("H", 2), ("S", 256)],
            &[("B", 2), ("H", 1), ("S", 512)],
        ],
        reference: linear_attn_fwd,
    },
    // Chunked retention, chunks of 64 positions (S a multiple of 64: no masking): two heads
    // (decays 1 - 2^-5 and 1 - 2^-6) over 4 chunks, then two batches of one head over 8.
    Example {
        stem: "retention_fwd",
        sizes: [
            &[("B", 1), ("H", 2), ("S", 256)],
            &[("B", 2), ("H", 1), ("S", 512)],
        ],
        reference: retention_fwd,
    },
    // The gated delta net's chunk output, chunks of 64 positions: 100 = 64 + 36 (a ragged
    // last chunk: Q, K, V rows load as 0, G through the guarded parallel load), two heads;
    // then two batches of whole chunks.
    Example {
        stem: "gdn_chunk_o",
        sizes: [
            &[("B", 1), ("S", 100), ("H", 2)],
            &[("B", 2), ("S", 128), ("H", 1)],
        ],
        reference: gdn::gdn_chunk_o,
    },
    // The gated delta net's WY representation, the same sizes (a ragged last chunk: K, V, A
    // rows load as 0, Beta and G through guarded parallel loads).
    Example {
        stem: "gdn_wy_fast",
        sizes: [
            &[("B", 1), ("S", 100), ("H", 2)],
            &[("B", 2), ("S", 128), ("H", 1)],
        ],
        reference: gdn::gdn_wy_fast,
    },
    // The gated delta rule's chunk states from an initial state (S a multiple of 64: h has
    // S // 64 chunks): two chunks over two heads, then three chunks over one.
    Example {
        stem: "gdn_chunk_delta_h_init",
        sizes: [
            &[("B", 1), ("S", 128), ("H", 2)],
            &[("B", 1), ("S", 192), ("H", 1)],
        ],
        reference: gdn::gdn_chunk_delta_h,
    },
    // Chunked linear attention's backward, chunks of 64 positions (S a multiple of 64, as
    // the original asserts): two heads over 2 chunks, then two batches of one head over 3.
    // dQ, dK, dV zeroed ([`given`]: the kernel adds into them).
    Example {
        stem: "linear_attn_bwd",
        sizes: [
            &[("B", 1), ("H", 2), ("S", 128)],
            &[("B", 2), ("H", 1), ("S", 192)],
        ],
        reference: gdn::linear_attn_bwd,
    },
    // DeepSeek-V3.2's sparse MLA forward: 3 queries over 130 keys (each selecting 128 of
    // them, the ones past the query masked: query 0 sees key 0 only), then 2 over 128
    // ([`given`]: the indices). Two thread blocks of 64 heads per query.
    Example {
        stem: "sparse_mla_fwd",
        sizes: [
            &[("batch", 1), ("seq_len", 3), ("seq_len_kv", 130)],
            &[("batch", 1), ("seq_len", 2), ("seq_len_kv", 128)],
        ],
        reference: sparse_mla::sparse_mla_fwd,
    },
    // DeepSeek-V3.2's logits clean-up, in place: 3 rows of 4096 keys, then 2 of 8192 (two
    // 4096-column chunks; seq_len_kv a multiple of 4096, header). [`given`]: the logits
    // and the windows (a whole row, an empty one, ragged ones).
    Example {
        stem: "fp8_lighting_indexer_clean",
        sizes: [
            &[("seq_len", 3), ("seq_len_kv", 4096)],
            &[("seq_len", 2), ("seq_len_kv", 8192)],
        ],
        reference: clean_logits,
    },
    // DeepSeek-V3.2's lightning indexer logits (`T.reshape` of the gemm accumulator): two
    // blocks of 4 queries over 512 keys (windows of two and one 256-key blocks), then three
    // over 768 keys (a window from key 37, an empty one, one ending at seq_len_kv).
    // [`given`]: the windows, and the logits the kernel leaves unwritten.
    Example {
        stem: "fp8_lighting_indexer",
        sizes: [
            &[("seq_len", 8), ("seq_len_kv", 512)],
            &[("seq_len", 12), ("seq_len_kv", 768)],
        ],
        reference: lighting_indexer_logits,
    },
    // Mamba-2 chunk states, 64 x 128 output tiles over 64-row k-steps: 200 positions in
    // chunks of 128 (the last chunk 72 rows: its x and B rows past seqlen read as 0), 4 heads
    // in 2 groups, headdim 80 and dstate 100 (partial tiles); then two batches of whole
    // tiles, one group.
    Example {
        stem: "mamba_chunk_state",
        sizes: MAMBA_SIZES,
        reference: mamba_chunk_state,
    },
    // Mamba-2 chunk scan, 64 x 64 output tiles: the same shapes as mamba_chunk_state (a
    // partial last chunk, whose rows past seqlen are not stored; headdim 80 and dstate 100
    // zero-filled past their ends), then two batches of whole tiles. chunk_size stays a
    // multiple of the 64-row tile and dstate at most 128 (the header).
    Example {
        stem: "mamba_chunk_scan",
        sizes: MAMBA_SIZES,
        reference: mamba_chunk_scan,
    },
    // tlc's split-K example: 64 x 128 x 32 tiles (ragged M and N); K = 200 is 7 k-steps in
    // 3 slices of 3, 3 and 1 (K not a multiple of a slice, a ragged last k-step); then more
    // slices than k-steps: K = 40 is 2 k-steps over 4 slices of 1 (the last two run 0 and
    // -1 steps and add zeros), 128 x 128 tiles, 3 stages.
    Example {
        stem: "examples/gemm_splitk",
        sizes: [
            &[
                ("M", 70),
                ("N", 130),
                ("K", 200),
                ("block_M", 64),
                ("block_N", 128),
                ("block_K", 32),
                ("split_k", 3),
                ("num_stages", 3),
            ],
            &[
                ("M", 128),
                ("N", 128),
                ("K", 40),
                ("block_M", 128),
                ("block_N", 128),
                ("block_K", 32),
                ("split_k", 4),
                ("num_stages", 3),
            ],
        ],
        reference: gemm_splitk,
    },
    // The GEMM a user starts from (examples/gemm.tir): K slices, 64 x 128 x 32 tiles
    // (ragged M and N), K = 200 in 3 slices of 3, 3 and 1 k-steps (the zeroing kernel, then
    // atomic adds); then its default schedule, 128 x 256 x 64 tiles over two consumer
    // warpgroups, one slice (the zeroing kernel's grid empty, the tile stored by T.copy),
    // ragged in every dim.
    Example {
        stem: "examples/gemm",
        sizes: [
            &[
                ("M", 70),
                ("N", 130),
                ("K", 200),
                ("block_M", 64),
                ("block_N", 128),
                ("threads", 128),
                ("block_K", 32),
                ("split_k", 3),
                ("num_stages", 3),
            ],
            &[("M", 130), ("N", 300), ("K", 100)],
        ],
        reference: gemm_splitk,
    },
    // tlc's stream-K example on 4 programs (a GPU of 4 SMs, as far as the schedule goes):
    // 64 x 128 tiles over 130 x 200 are 3 x 2 = 6 tiles of ceil(300 / 32) = 10 k-iterations;
    // 6 % 4 = 2 stream-K tiles (20 iterations, 5 per program: pieces that cross a tile's
    // end) and one wave of 4 data-parallel tiles. Then 128 x 128 tiles over 100 x 250: 2
    // tiles, both stream-K (no data-parallel wave: its loop folds away), 3 iterations over 4
    // programs (runs of 1, 1, 1 and 0).
    Example {
        stem: "examples/gemm_streamk",
        sizes: [
            &[
                ("M", 130),
                ("N", 200),
                ("K", 300),
                ("programs", 4),
                ("block_M", 64),
                ("block_N", 128),
                ("block_K", 32),
                ("num_stages", 3),
            ],
            &[
                ("M", 100),
                ("N", 250),
                ("K", 40),
                ("programs", 4),
                ("block_M", 128),
                ("block_N", 128),
                ("block_K", 32),
                ("num_stages", 3),
            ],
        ],
        reference: gemm_streamk_nn,
    },
    // TileLang's DeepGEMM-style FP8 GEMM (block_M = block_N = block_K = 128, 128 threads):
    // its `scales_a` loads are unmasked, so M is a multiple of 128; a ragged N, then a ragged
    // last K block (320 = 2.5 blocks, zero-filled by the copies).
    Example {
        stem: "gemm_deepgemm_fp8_2xacc",
        sizes: [
            &[("M", 256), ("N", 130), ("K", 384)],
            &[("M", 128), ("N", 256), ("K", 320)],
        ],
        reference: blockscaled_fp8,
    },
    // tlc's block-scaled FP8 GEMM: ragged M and N with two consumer warpgroups on tiles 112
    // wide (DeepGEMM's width: the second and third column tiles straddle B's 128-column
    // scale blocks, the third is ragged), then one warpgroup on 64 x 64 tiles with a ragged
    // N, a ragged last K block and edge-case scales ([`given`]).
    Example {
        stem: "examples/gemm_fp8_blockscaled",
        sizes: [
            &[
                ("M", 200),
                ("N", 300),
                ("K", 384),
                ("block_M", 128),
                ("threads", 256),
                ("block_N", 112),
                ("num_stages", 3),
            ],
            &[
                ("M", 64),
                ("N", 130),
                ("K", 320),
                ("block_M", 64),
                ("threads", 128),
                ("block_N", 64),
                ("num_stages", 4),
            ],
        ],
        reference: blockscaled_fp8,
    },
    // tlc's flash attention example (BSHD, grouped KV heads) in its causal mode, 64 x 32
    // tiles: two query heads on one KV head, dim 64, 2 stages; 100 = 3 * 32 + 4 keys (a
    // masked last key tile, a partial query tile, key tiles past the loop bound of the first
    // query tile). Then dim 128 in two batches of 4 query heads over 2 KV heads, 1 stage, one
    // query tile of two key tiles. The non-causal mode: [`flash_attention_example_without_
    // the_causal_mask_matches_its_reference`].
    Example {
        stem: "examples/flash_attention",
        sizes: [
            &[
                ("batch", 1),
                ("seq_len", 100),
                ("heads", 2),
                ("kv_heads", 1),
                ("dim", 64),
                ("is_causal", 1),
                ("block_M", 64),
                ("block_N", 32),
                ("num_stages", 2),
                ("threads", 128),
            ],
            &[
                ("batch", 2),
                ("seq_len", 64),
                ("heads", 4),
                ("kv_heads", 2),
                ("dim", 128),
                ("is_causal", 1),
                ("block_M", 64),
                ("block_N", 32),
                ("num_stages", 1),
                ("threads", 128),
            ],
        ],
        reference: flash_attention_causal,
    },
    // The Hadamard transform at its default n = 8192 (256 threads of 32 elements: 5 levels
    // in a thread, 5 over lanes by warp shuffles, 3 over warps through shared memory) for 3
    // rows, then n = 2048 (8 elements a thread) for 1. HADAMARD_MORE checks the other
    // configurations.
    Example {
        stem: "hadamard",
        sizes: [&[("b", 3)], HADAMARD_2048_B1],
        reference: hadamard,
    },
    // DeepSeek v3.2's top-k selector (1024 threads a row): two rows of 5000 with ragged
    // ranges, the top 300 (the threshold found in the float16 pass or the first tail
    // rounds); then one row of 4000 made of 7 repeated values, the top 1000 (a run of ties
    // through every tail round, the last one's `l_out_pos < topk` cut). `given` writes the
    // ranges and the ties; `canonical` compares the selected values.
    Example {
        stem: "topk_selector",
        sizes: [
            &[("batch", 2), ("seq_len", 5000), ("topk", 300)],
            &[("batch", 1), ("seq_len", 4000), ("topk", 1000)],
        ],
        reference: topk_selector,
    },
    // int8 x int4 -> int32 (w4a8): 32 x 32 x 128 tiles on mma.sync's m16n8k32 .s8 form;
    // M = 100 and N = 72 ragged (the copies mask them), then the original 128 x 256 x 256.
    // `given` fills A and B over their whole ranges (every nibble, both signs).
    Example {
        stem: "dequant_gemm_w4a8",
        sizes: [
            &[("M", 100), ("N", 72), ("K", 256)],
            &[("M", 128), ("N", 256), ("K", 256)],
        ],
        reference: dequant_gemm_w4a8,
    },
    // int4 x int4 -> int32 (issue 38): 128 x 128 x 64 tiles, 3 stages; M = 100, N = 72 and
    // K = 192 ragged in M and N (partial tiles), then whole tiles with K = 320 (five k-steps,
    // the three-stage ring turned over). Random int4 inputs cover -8..=7 (`random_tensor`).
    Example {
        stem: "gemm_int4",
        sizes: [
            &[("M", 100), ("N", 72), ("K", 192)],
            &[("M", 128), ("N", 256), ("K", 320)],
        ],
        reference: gemm_int4,
    },
    // TileLang's plain GEMM (128 x 128 x 32 tiles, 3 stages): ragged in M, N and K, then
    // whole tiles.
    Example {
        stem: "gemm",
        sizes: [
            &[("M", 200), ("N", 136), ("K", 200)],
            &[("M", 128), ("N", 256), ("K", 192)],
        ],
        reference: gemm_f16,
    },
    // DeepSeek-V4's fp8 activation quantization with power-of-two scales (its helpers as
    // value macros, docstrings kept): 70 x 300 (a ragged row tile and a 44-wide last
    // group), then whole tiles.
    Example {
        stem: "act_quant_fp8",
        sizes: [&[("M", 70), ("N", 300)], &[("M", 64), ("N", 256)]],
        reference: act_quant::act_quant_fp8,
    },
    // TileLang's Philox random numbers (curand's stream, compared as the original compares
    // with triton's): 1000 = 7 * 128 + 104 (the last block's draws stop at M), then whole
    // blocks.
    Example {
        stem: "rand_uint",
        sizes: [&[("M", 1000)], &[("M", 1024)]],
        reference: rand::rand_uint,
    },
    // example_dynamic.py's GEMM, its dims declared `M = T.dynamic("m")` (named m, n, k):
    // ragged, then whole tiles.
    Example {
        stem: "gemm_dynamic",
        sizes: [
            &[("m", 200), ("n", 136), ("k", 200)],
            &[("m", 128), ("n", 256), ("k", 192)],
        ],
        reference: gemm_f16,
    },
    // The grouped GEMM's weight gradient, per group A^T @ dO ([`given`]: groups of 64, 40
    // and a ragged last 100 rows, then 128 and 64): ragged M and N, then whole tiles.
    Example {
        stem: "grouped_gemm_bwd",
        sizes: [
            &[
                ("batch_sum", 204),
                ("batch_count", 3),
                ("M", 100),
                ("N", 136),
            ],
            &[
                ("batch_sum", 192),
                ("batch_count", 2),
                ("M", 64),
                ("N", 128),
            ],
        ],
        reference: grouped_gemm_bwd,
    },
    // DeepSeek's mHC post step, one block per token (`n = T.dynamic("num_tokens")`),
    // hidden 2560 in five 512-wide steps.
    Example {
        stem: "mhc_post",
        sizes: [&[("num_tokens", 3)], &[("num_tokens", 5)]],
        reference: mhc::mhc_post,
    },
    // Split-K (4 slices of K // 4, float32 atomics into the zeroed C, [`given`]): K a
    // multiple of 4 * 32 (the header), ragged M and N (the unguarded element atomics past
    // the edges dropped by legalize-safe-memory), two then four k-steps per slice.
    Example {
        stem: "gemm_splitk",
        sizes: [
            &[("M", 200), ("N", 136), ("K", 256)],
            &[("M", 128), ("N", 256), ("K", 512)],
        ],
        reference: gemm_splitk_f32,
    },
    // The same with one tile `T.atomic_add` (masked at C's edges).
    Example {
        stem: "gemm_splitk_vectorize_atomicadd",
        sizes: [
            &[("M", 200), ("N", 136), ("K", 256)],
            &[("M", 128), ("N", 256), ("K", 512)],
        ],
        reference: gemm_splitk_f32,
    },
    // fp8 operands and result (sm_90a's wgmma; REFUSED on sm_80): ragged in M, N and K
    // (K = 200: a last k-step of 8), then whole tiles.
    Example {
        stem: "gemm_fp8",
        sizes: [
            &[("M", 200), ("N", 136), ("K", 200)],
            &[("M", 128), ("N", 256), ("K", 192)],
        ],
        reference: gemm_fp8::gemm_fp8_e4m3,
    },
    Example {
        stem: "gemm_fp8_e5m2",
        sizes: [
            &[("M", 200), ("N", 136), ("K", 200)],
            &[("M", 128), ("N", 256), ("K", 192)],
        ],
        reference: gemm_fp8::gemm_fp8_e5m2,
    },
    // Varlen GQA decoding with sinks and pooled weights (max_seqlen_kv 512: 4 columns of
    // S, each written when a sequence has more than 384 keys, [`given`]): sequences of 400
    // and 500 keys (ragged last tiles), then one of 512.
    Example {
        stem: "flash_decoding_gqa_varlen_logits",
        sizes: [
            &[("batch", 2), ("total_seqlen_k", 900)],
            &[("batch", 1), ("total_seqlen_k", 512)],
        ],
        reference: gqa_decode_logits::gqa_decode_logits,
    },
    // NSA decoding: one query token, one selected block of 32 keys per KV head
    // ([`given`]: whole blocks before seq_len): two batches of two KV heads over 80 keys,
    // then one of one over 64.
    Example {
        stem: "nsa_decode",
        sizes: [
            &[("batch", 2), ("seq_len", 80), ("heads", 32)],
            &[("batch", 1), ("seq_len", 64), ("heads", 16)],
        ],
        reference: nsa_decode,
    },
    // SeerAttention's block-sparse attention ([`given`]: an int8 mask keeping column 0):
    // 100 queries over 200 keys (past_len 100, ragged query and key tiles), then 256 over
    // 256 in two batches.
    Example {
        stem: "seer_block_sparse_attn",
        sizes: [
            &[("batch", 1), ("heads", 2), ("seq_q", 100), ("seq_kv", 200)],
            &[("batch", 2), ("heads", 1), ("seq_q", 256), ("seq_kv", 256)],
        ],
        reference: seer_block_sparse_attention,
    },
    // Varlen causal GQA, 128 x 128 tiles over 256 threads, 16 query heads per KV head
    // ([`given`]: the offsets): three sequences of 50 / 120 / 7 queries over 60 / 130 / 3
    // keys, 32 heads (two KV heads); then 200 / 40 queries over 200 / 20 keys (two query
    // tiles for the first; 20 rows of the second see no key: 0), 16 heads.
    Example {
        stem: "flash_attn_gqa_fwd_varlen",
        sizes: [
            &[
                ("UQ", 177),
                ("UKV", 193),
                ("heads", 32),
                ("max_seqlen_q", 120),
            ],
            &[
                ("UQ", 240),
                ("UKV", 220),
                ("heads", 16),
                ("max_seqlen_q", 200),
            ],
        ],
        reference: gqa_varlen_attention,
    },
    // Kimi Delta Attention's chunk output (32 x 32 tiles of DK and DV): a ragged last chunk
    // (150 = 2 * 64 + 22, no state: the header), then whole chunks.
    Example {
        stem: "kda_chunk_o",
        sizes: [
            &[("B", 1), ("S", 150), ("H", 2)],
            &[("B", 2), ("S", 128), ("H", 1)],
        ],
        reference: gdn::kda_chunk_o,
    },
    // The gated delta net's scaled K K^T: a ragged last chunk (150 = 2 * 64 + 22) and a
    // ragged last DK step (100 = 64 + 36), then whole chunks and steps.
    Example {
        stem: "gdn_chunk_scaled_dot_kkt",
        sizes: [
            &[("B", 1), ("S", 150), ("H", 3), ("DK", 100)],
            &[("B", 2), ("S", 128), ("H", 2), ("DK", 128)],
        ],
        reference: gdn::gdn_chunk_scaled_dot_kkt,
    },
    // TileLang's hand-written warp specialization (T.ws, T.alloc_barrier, T.tma_copy): 128 x
    // 128 x 64 tiles, ragged in M, N and K with four k-steps (both stages of the two-stage
    // ring used twice, each parity of each barrier waited), then whole tiles with three.
    Example {
        stem: "ws_gemm_barrierpipe_stage2",
        sizes: [
            &[("M", 200), ("N", 136), ("K", 200)],
            &[("M", 128), ("N", 256), ("K", 192)],
        ],
        reference: gemm_f16,
    },
    Example {
        stem: "ws_gemm_copy_0_gemm_1",
        sizes: [
            &[("M", 200), ("N", 136), ("K", 200)],
            &[("M", 128), ("N", 256), ("K", 192)],
        ],
        reference: gemm_f16,
    },
    Example {
        stem: "ws_gemm_copy_1_gemm_0",
        sizes: [
            &[("M", 200), ("N", 136), ("K", 200)],
            &[("M", 128), ("N", 256), ("K", 192)],
        ],
        reference: gemm_f16,
    },
    Example {
        stem: "ws_gemm_copy_gemm_0_1",
        sizes: [
            &[("M", 200), ("N", 136), ("K", 200)],
            &[("M", 128), ("N", 256), ("K", 192)],
        ],
        reference: gemm_f16,
    },
    Example {
        stem: "ws_gemm_softpipe_stage2",
        sizes: [
            &[("M", 200), ("N", 136), ("K", 200)],
            &[("M", 128), ("N", 256), ("K", 192)],
        ],
        reference: gemm_f16,
    },
];

/// `hadamard.tir` at n = 2048 for one row: its tunable group as the factory computes it.
const HADAMARD_2048_B1: &[(&str, i64)] = &[
    ("b", 1),
    ("n", 2048),
    ("threads", 256),
    ("thread_elem", 8),
    ("thread_round", 3),
    ("warps", 8),
    ("warp_round", 5),
    ("warp_size", 32),
    ("block_round", 3),
    ("exchange_round", 1),
    ("thread_elem_in_smem", 8),
];

/// `hadamard.tir`'s other configurations, each pair checked as an [`Example`]'s sizes (the
/// first also lowered for both targets and assembled): n = 64 (8 threads of 8 elements, the
/// shuffles in segments of 8 lanes of a block of 8 threads) for 3 rows, then n = 256 (one
/// warp, 5 shuffle levels, no shared memory) for 1; n = 256 for 2 rows, then n = 64 for 1;
/// n = 16384 (64 elements a thread: 2 exchange rounds of 32 through the 32 KiB of shared
/// memory) for 1 row, then n = 2048 for 2.
const HADAMARD_MORE: [[&[(&str, i64)]; 2]; 3] = [
    [&hadamard_config(3, 64), &hadamard_config(1, 256)],
    [&hadamard_config(2, 256), &hadamard_config(1, 64)],
    [&hadamard_config(1, 16384), &hadamard_config(2, 2048)],
];

/// `hadamard.tir`'s binding for `rows` rows of `n`: the factory's Python arithmetic
/// (threads from its table by log2 n, the rest derived), which the file's tunable tuples
/// hold.
const fn hadamard_config(rows: i64, n: i64) -> [(&'static str, i64); 11] {
    const THREADS: [i64; 16] = [
        0, 1, 1, 1, 2, 4, 8, 16, 32, 32, 128, 256, 256, 256, 256, 256,
    ];
    let log_n = n.trailing_zeros() as usize;
    let threads = THREADS[log_n];
    let thread_elem = n / threads;
    let warps = if threads <= 32 { 1 } else { threads / 32 };
    let warp_size = threads / warps;
    // 32 KiB of float32 shared memory at most.
    let exchange_round = if n * 4 > 32768 { n * 4 / 32768 } else { 1 };
    [
        ("b", rows),
        ("n", n),
        ("threads", threads),
        ("thread_elem", thread_elem),
        ("thread_round", thread_elem.trailing_zeros() as i64),
        ("warps", warps),
        ("warp_round", warp_size.trailing_zeros() as i64),
        ("warp_size", warp_size),
        ("block_round", warps.trailing_zeros() as i64),
        ("exchange_round", exchange_round),
        ("thread_elem_in_smem", thread_elem / exchange_round),
    ]
}

/// Inputs a kernel needs to be meaningful (the others are random): per stem and size (the
/// index into [`Example::sizes`]).
fn given(stem: &str, size: usize) -> HashMap<String, Tensor> {
    let mut inputs = HashMap::new();
    if stem == "gemm_streamk" {
        // The caller zeroes C (the atomic adds of split tiles start from it).
        let c = Tensor::zeros(DType::Float32, &[256, 1024]).expect("C");
        inputs.insert("C".to_string(), c);
        if size == 1 {
            // Integers in [-4, 4]: products and every partial sum (|.| <= 512 * 16) exact.
            let ints = |shape: [usize; 2], salt: usize| {
                let v: Vec<f64> = (0..shape[0] * shape[1])
                    .map(|i| ((i * 7 + salt) % 9) as f64 - 4.0)
                    .collect();
                Tensor::from_f64(DType::Float16, &shape, &v).expect("integers")
            };
            inputs.insert("A".to_string(), ints([256, 512], 0));
            inputs.insert("B".to_string(), ints([1024, 512], 5));
        }
    }
    if stem == "examples/gemm_fp8_blockscaled" && size == 1 {
        // Scale edge cases (64 x 130 x 320: 3 K blocks, 2 blocks of B's rows): zero scales,
        // powers of two far from 1 either way (the products stay normal in float32), a
        // negative scale, a subnormal-adjacent tiny one; every row and block mixes them.
        let edge = [
            0.0,
            2f64.powi(-60),
            2f64.powi(40),
            -0.75,
            1.0,
            2f64.powi(-120),
            3.0,
        ];
        let (m, n, blocks) = (64usize, 130usize, 3usize);
        let pick = |i: usize| edge[i % edge.len()];
        let sa: Vec<f64> = (0..m * blocks).map(|i| pick(i * 5 + 1)).collect();
        let sb: Vec<f64> = (0..n.div_ceil(128) * blocks).map(pick).collect();
        let t = |shape: [usize; 2], v: &[f64]| {
            Tensor::from_f64(DType::Float32, &shape, v).expect("scales")
        };
        inputs.insert("scales_a".to_string(), t([m, blocks], &sa));
        inputs.insert("scales_b".to_string(), t([n.div_ceil(128), blocks], &sb));
    }
    if stem == "cast_group_per_split_token_fp8" {
        // Rows per group; each at most M_max, their sum at most M.
        let sizes: &[i64] = [&[3i64, 6][..], &[4, 0, 8][..]][size];
        let t = Tensor::from_i64(DType::Int32, &[sizes.len()], sizes).expect("batch sizes");
        inputs.insert("batch_sizes".to_string(), t);
    }
    if stem == "flash_attn_fwd_varlen_causal" {
        let (q, k): (&[i64], &[i64]) = match size {
            0 => (&[0, 50, 150, 157], &[0, 60, 160, 163]),
            _ => (&[0, 64, 104], &[0, 64, 84]),
        };
        for (name, v) in [("cu_seqlens_q", q), ("cu_seqlens_k", k)] {
            let t = Tensor::from_i64(DType::Int32, &[v.len()], v).expect("offsets");
            inputs.insert(name.to_string(), t);
        }
    }
    if stem == "gemm_splitk" || stem == "gemm_splitk_vectorize_atomicadd" {
        // The caller zeroes C: the four K slices add into it.
        let dim = |name| size_of(stem, size, name);
        let c = Tensor::zeros(DType::Float32, &[dim("M"), dim("N")]).expect("C");
        inputs.insert("C".to_string(), c);
    }
    if stem == "grouped_gemm_bwd" {
        // Groups whose every step but the last group's lies inside the group (the header):
        // 64 (one step), 40 (one masked step), a last 100 (its second step past batch_sum
        // reads 0); then 128 and 64.
        let sizes: &[i64] = [&[64i64, 40, 100][..], &[128, 64][..]][size];
        let offsets: Vec<i64> = sizes
            .iter()
            .scan(0, |acc, &n| {
                let start = *acc;
                *acc += n;
                Some(start)
            })
            .collect();
        for (name, v) in [("batch_sizes", sizes), ("batch_offsets", &offsets[..])] {
            let t = Tensor::from_i64(DType::Int32, &[v.len()], v).expect("groups");
            inputs.insert(name.to_string(), t);
        }
    }
    if stem == "flash_decoding_gqa_varlen_logits" {
        let cu: &[i64] = [&[0i64, 400, 900][..], &[0, 512][..]][size];
        let t = Tensor::from_i64(DType::Int32, &[cu.len()], cu).expect("offsets");
        inputs.insert("cu_seqlens_k".to_string(), t);
        // Small sinks, as the test's 0.1 * randn: the sum they are added to stays near its
        // own size.
        let sinks: Vec<f64> = (0..32).map(|i| f64::from(i % 7) * 0.03 - 0.09).collect();
        let t = Tensor::from_f64(DType::Float32, &[32], &sinks).expect("sinks");
        inputs.insert("s_aux".to_string(), t);
    }
    if stem == "nsa_decode" {
        // One selected block per (batch, KV head), a whole one before seq_len (a block
        // running past seq_len would count its zero-filled keys: the header), differing
        // between heads and batches.
        let dim = |name| size_of(stem, size, name);
        let (batch, kv_heads, blocks) = (dim("batch"), dim("heads") / 16, dim("seq_len") / 32);
        let values: Vec<i64> = (0..batch * kv_heads)
            .map(|i| ((i * 3 + 1) % blocks) as i64)
            .collect();
        let t = Tensor::from_i64(DType::Int32, &[batch, 1, kv_heads, 1], &values)
            .expect("block indices");
        inputs.insert("BlockIndices".to_string(), t);
    }
    if stem == "seer_block_sparse_attn" {
        // BlockSparseMask (batch, heads, 4, 4) int8: about half the blocks, pseudo-randomly,
        // but always column 0 (the original's tests keep it: every row sees key 0).
        let dim = |name| size_of(stem, size, name);
        let n = dim("batch") * dim("heads") * 16;
        let values: Vec<i64> = (0..n)
            .map(|i| i64::from(i % 4 == 0 || (i * 2_654_435_761) % 89 < 44))
            .collect();
        let t = Tensor::from_i64(DType::Int8, &[dim("batch"), dim("heads"), 4, 4], &values)
            .expect("mask");
        inputs.insert("BlockSparseMask".to_string(), t);
    }
    if stem == "flash_attn_gqa_fwd_varlen" {
        let (q, k): (&[i64], &[i64]) = match size {
            0 => (&[0, 50, 170, 177], &[0, 60, 190, 193]),
            _ => (&[0, 200, 240], &[0, 200, 220]),
        };
        for (name, v) in [("cu_seqlens_q", q), ("cu_seqlens_k", k)] {
            let t = Tensor::from_i64(DType::Int32, &[v.len()], v).expect("offsets");
            inputs.insert(name.to_string(), t);
        }
    }
    if stem == "blocksparse_attn_fwd" {
        // BlockSparseMask (batch, heads, 4, 4): about half the blocks, pseudo-randomly, but
        // always column 0 (the original's test keeps it: every row sees key 0).
        let dim = |name| size_of(stem, size, name);
        let n = dim("batch") * dim("heads") * 16;
        let values: Vec<i64> = (0..n)
            .map(|i| i64::from(i % 4 == 0 || (i * 2_654_435_761) % 97 < 48))
            .collect();
        let t = Tensor::from_i64(DType::Bool, &[dim("batch"), dim("heads"), 4, 4], &values)
            .expect("mask");
        inputs.insert("BlockSparseMask".to_string(), t);
    }
    if [
        "flash_attn_bwd",
        "flash_attn_bwd_bhsd",
        "attn_sink_mha_bwd_bhsd",
    ]
    .contains(&stem)
    {
        // The caller zeroes dQ (every key block adds its part into it).
        let dim = |name| size_of(stem, size, name);
        let (b, s, h) = (dim("batch"), dim("seq_len"), dim("heads"));
        let shape = match stem {
            "flash_attn_bwd" => [b, s, h, 64],
            "flash_attn_bwd_bhsd" => [b, h, s, 64],
            _ => [b, h, s, 128],
        };
        let dq = Tensor::zeros(DType::Float32, &shape).expect("dQ");
        inputs.insert("dQ".to_string(), dq);
    }
    if stem == "flash_attn_gqa_bwd" || stem == "flash_attn_gqa_bwd_split" {
        // The caller zeroes dQ, and for the atomic form dK and dV (heads / 16 KV heads,
        // head dims 192 and 128).
        let dim = |name| size_of(stem, size, name);
        let (b, s, h) = (dim("batch"), dim("seq_len"), dim("heads"));
        let mut zeros = vec![("dQ", [b, s, h, 192])];
        if stem == "flash_attn_gqa_bwd" {
            zeros.extend([("dK", [b, s, h / 16, 192]), ("dV", [b, s, h / 16, 128])]);
        }
        for (name, shape) in zeros {
            let t = Tensor::zeros(DType::Float32, &shape).expect("zeros");
            inputs.insert(name.to_string(), t);
        }
    }
    if stem == "grouped_gemm_fwd" {
        // The group sizes the kernel was built for, and the offsets construct_inputs derives
        // (padded to 64-row blocks).
        for (name, values) in [
            ("batch_sizes", [5, 9, 13]),
            ("batch_offsets", [0, 5, 14]),
            ("batch_padded_offsets", [0, 64, 128]),
        ] {
            let t = Tensor::from_i64(DType::Int32, &[3], &values).expect("offsets");
            inputs.insert(name.to_string(), t);
        }
    }
    if stem == "nsa_fwd" {
        // BlockIndices (batch, seq_len, heads / 16, 1): for token t a block among
        // 0..max(1, t / 32), pseudo-randomly (main() draws one with randperm).
        let dim = |name| size_of(stem, size, name);
        let (batch, seq, kv_heads) = (dim("batch"), dim("seq_len"), dim("heads") / 16);
        let values: Vec<i64> = (0..batch * seq * kv_heads)
            .map(|i| {
                let t = i / kv_heads % seq;
                ((i * 2_654_435_761) % 101 % (t / 32).max(1)) as i64
            })
            .collect();
        let t = Tensor::from_i64(DType::Int32, &[batch, seq, kv_heads, 1], &values)
            .expect("block indices");
        inputs.insert("BlockIndices".to_string(), t);
    }
    if stem == "fusedmoe_routed" {
        // 8 experts' groups of the 256 rows, and what the caller derives from them: the
        // offsets, the offsets padded to ceil((size + 1) / 128) * 128, and each of the 10
        // blocks' expert (the last whose padded offset is at most bx * 128).
        let sizes = [130i64, 0, 30, 16, 20, 10, 50, 0];
        let (mut offsets, mut padded) = (vec![0i64], vec![0i64]);
        for w in sizes.windows(2) {
            offsets.push(offsets.last().expect("an offset") + w[0]);
            padded.push(padded.last().expect("an offset") + (w[0] + 1 + 127) / 128 * 128);
        }
        let table: Vec<i64> = (0..10)
            .map(|bx| {
                padded
                    .iter()
                    .rposition(|&p| bx * 128 >= p)
                    .expect("expert 0") as i64
            })
            .collect();
        for (name, values) in [
            ("group_sizes", &sizes[..]),
            ("group_offsets", &offsets),
            ("group_padded_offsets", &padded),
            ("group_idx_for_bx", &table),
        ] {
            let t = Tensor::from_i64(DType::Int32, &[values.len()], values).expect("groups");
            inputs.insert(name.to_string(), t);
        }
    }
    if stem == "mla_decode_paged" {
        // Each sequence's 4 logical pages on a permutation of the batch's physical pages,
        // and its length.
        let (table, lens): (&[i64], &[i64]) = match size {
            0 => (&[2, 0, 3, 1], &[130]),
            _ => (&[5, 7, 1, 0, 6, 2, 4, 3], &[256, 64]),
        };
        let batch = lens.len();
        let t = Tensor::from_i64(DType::Int32, &[batch, 4], table).expect("block table");
        inputs.insert("block_table".to_string(), t);
        let t = Tensor::from_i64(DType::Int32, &[batch], lens).expect("lengths");
        inputs.insert("cache_seqlens".to_string(), t);
    }
    if stem == "fp8_lighting_indexer_clean" {
        let (rows, keys) = (
            size_of(stem, size, "seq_len"),
            size_of(stem, size, "seq_len_kv"),
        );
        let logits: Vec<f64> = (0..rows * keys).map(clean_logits_input).collect();
        let t = Tensor::from_f64(DType::Float32, &[rows, keys], &logits).expect("logits");
        inputs.insert("Logits".to_string(), t);
        let windows = [(0, keys), (5, 5), (17, keys - 300), (4095, 4097), (1, 2)];
        let (ks, ke): (Vec<i64>, Vec<i64>) = (0..rows)
            .map(|r| windows[(r + 2 * size) % windows.len()])
            .map(|(a, b)| (a as i64, b.min(keys) as i64))
            .unzip();
        for (name, v) in [("CuSeqLenKS", ks), ("CuSeqLenKE", ke)] {
            let t = Tensor::from_i64(DType::Int32, &[rows], &v).expect("window");
            inputs.insert(name.to_string(), t);
        }
    }
    if stem == "fp8_lighting_indexer" {
        let (rows, keys) = (
            size_of(stem, size, "seq_len"),
            size_of(stem, size, "seq_len_kv"),
        );
        let logits: Vec<f64> = (0..rows * keys).map(indexer_logits_input).collect();
        let t = Tensor::from_f64(DType::Float32, &[rows, keys], &logits).expect("logits");
        inputs.insert("Logits".to_string(), t);
        // Per block of 4 queries, (CuSeqLenKS, CuSeqLenKE) of each: every block's window
        // [min ks, min ks + 256 * ceil((max ke - min ks) / 256)) stays inside seq_len_kv (the
        // original's loads and stores are unguarded, header); empty and clamped windows too.
        let windows: &[[(i64, i64); 4]] = match size {
            0 => &[
                [(0, 300), (10, 256), (5, 5), (100, 200)],
                [(256, 512), (300, 400), (256, 257), (260, 511)],
            ],
            _ => &[
                [(37, 500), (40, 41), (100, 300), (37, 37)],
                [(500, 100), (600, 200), (450, 450), (700, 10)],
                [(512, 768), (600, 700), (520, 530), (768, 900)],
            ],
        };
        let (ks, ke): (Vec<i64>, Vec<i64>) = windows.iter().flatten().copied().unzip();
        assert_eq!(ks.len(), rows, "a window per query");
        for (name, v) in [("CuSeqLenKS", ks), ("CuSeqLenKE", ke)] {
            let t = Tensor::from_i64(DType::Int32, &[rows], &v).expect("window");
            inputs.insert(name.to_string(), t);
        }
    }
    if stem == "sparse_mla_fwd" {
        let dim = |name| size_of(stem, size, name);
        let t = sparse_mla::indices(dim("batch"), dim("seq_len"), dim("seq_len_kv"));
        inputs.insert("Indices".to_string(), t);
    }
    if stem == "linear_attn_bwd" {
        // The caller zeroes dQ, dK, dV (each key or value block adds its part into them).
        let dim = |name| size_of(stem, size, name);
        for name in ["dQ", "dK", "dV"] {
            let shape = [dim("B"), dim("S"), dim("H"), 128];
            let t = Tensor::zeros(DType::Float32, &shape).expect("gradient");
            inputs.insert(name.to_string(), t);
        }
    }
    if stem == "linear_attn_fwd" {
        // The caller zeroes O (both key blocks add their part into it).
        let dim = |name| size_of(stem, size, name);
        let o = Tensor::zeros(DType::Float32, &[dim("B"), dim("S"), dim("H"), 128]).expect("O");
        inputs.insert("O".to_string(), o);
    }
    if stem == "flash_decoding_gqa" {
        // mask (batch, seqlen_kv, 8): about a third of the keys hidden, pseudo-randomly, but
        // never a split's first key (a split whose first tile is wholly masked computes NaN,
        // as the original does); KV head 5 sees nothing of a split's keys 128 and on (a
        // wholly masked tile after the first, where there is one).
        let (batch, seq) = (
            size_of(stem, size, "batch"),
            size_of(stem, size, "seqlen_kv"),
        );
        let split = seq / 8;
        let values: Vec<i64> = (0..batch * seq * 8)
            .map(|i| {
                let (g, s) = (i % 8, i / 8 % seq);
                let hidden = (i * 2_654_435_761) % 97 < 32 || (g == 5 && s % split >= 128);
                i64::from(s % split == 0 || !hidden)
            })
            .collect();
        let t = Tensor::from_i64(DType::UInt8, &[batch, seq, 8], &values).expect("mask");
        inputs.insert("mask".to_string(), t);
    }
    if stem == "sparse_gqa_decode_varlen_indice" || stem == "sparse_gqa_decode_varlen_mask" {
        // Per sequence its length; per (sequence, KV head) a pseudo-random choice among the
        // blocks below the length, always the last (ragged) one for even KV heads: as a list
        // sorted in descending order with -1 padding (indice), or as a mask (mask) keeping
        // at least one block in each split up to the last split holding one.
        let lens: &[i64] = [&[200i64][..], &[512, 77][..]][size];
        let batch = lens.len();
        let t = Tensor::from_i64(DType::Int32, &[batch], lens).expect("lengths");
        inputs.insert("cache_seqlens".to_string(), t);
        let chosen = |b: usize, g: usize| -> Vec<i64> {
            let valid = (lens[b] as usize).div_ceil(32);
            (0..valid)
                .filter(|&i| {
                    (g.is_multiple_of(2) && i + 1 == valid) || ((b * 8 + g) * 31 + i * 17) % 7 < 3
                })
                .map(|i| i as i64)
                .collect()
        };
        if stem == "sparse_gqa_decode_varlen_indice" {
            let width = size_of(stem, size, "max_selected_blocks");
            let mut values = Vec::new();
            for b in 0..batch {
                for g in 0..8 {
                    let mut blocks = chosen(b, g);
                    blocks.reverse();
                    blocks.resize(width, -1);
                    values.extend(blocks);
                }
            }
            let t = Tensor::from_i64(DType::Int32, &[batch, 8, width], &values).expect("indices");
            inputs.insert("block_indices".to_string(), t);
        } else {
            let (blocks, splits) = (
                size_of(stem, size, "num_blocks"),
                size_of(stem, size, "num_split"),
            );
            let mut values = Vec::new();
            for (b, &len) in lens.iter().enumerate() {
                for g in 0..8 {
                    let mut keep = vec![0i64; blocks];
                    for i in chosen(b, g) {
                        keep[i as usize] = 1;
                    }
                    // The first block of each split below the length, where the split has
                    // none (the combine's quirk needs no empty split before a nonempty one).
                    let valid = (len as usize).div_ceil(32);
                    for (start, count) in split_ranges(blocks, splits) {
                        if start < valid && keep[start..start + count].iter().all(|&k| k == 0) {
                            keep[start] = 1;
                        }
                    }
                    values.extend(keep);
                }
            }
            let t = Tensor::from_i64(DType::Bool, &[batch, 8, blocks], &values).expect("mask");
            inputs.insert("block_mask".to_string(), t);
        }
    }
    if stem == "topk_selector" {
        // Each row's range [starts, ends) holds at least topk elements (the original returns
        // fewer otherwise, the rest of its row unwritten): ragged in the first size; the
        // second size's row is the whole input, of 7 values repeated, so the top 1000 take
        // part of a run of ties through all four tail rounds.
        let (starts, ends): (&[i64], &[i64]) = match size {
            0 => (&[0, 137], &[5000, 4870]),
            _ => (&[0], &[4000]),
        };
        let int = |v: &[i64]| Tensor::from_i64(DType::Int32, &[v.len()], v).expect("range");
        inputs.insert("starts".to_string(), int(starts));
        inputs.insert("ends".to_string(), int(ends));
        if size == 1 {
            let ties: Vec<f64> = (0..4000)
                .map(|i| ((i * 3) % 7) as f64 * 0.25 - 0.5)
                .collect();
            let t = Tensor::from_f64(DType::Float32, &[1, 4000], &ties).expect("ties");
            inputs.insert("input".to_string(), t);
        }
    }
    if stem == "dequant_gemm_w4a8" {
        // The random inputs are small integers (every B byte's high nibble 0): A over all of
        // int8 and B over all of uint8 instead, so both nibbles take every value.
        let (m, n, k) = [(100, 72, 256), (128, 256, 256)][size.min(1)];
        let fill = |dtype: DType, shape: [usize; 2], lo: i64, salt: u64| {
            let v: Vec<f64> = (0..shape[0] * shape[1])
                .map(|i| {
                    let h = tlc_ir::hash::SplitMix64::mix(salt ^ i as u64);
                    (lo + (h % 256) as i64) as f64
                })
                .collect();
            Tensor::from_f64(dtype, &shape, &v).expect("w4a8 input")
        };
        inputs.insert("A".to_string(), fill(DType::Int8, [m, k], -128, 1));
        inputs.insert("B".to_string(), fill(DType::UInt8, [n, k / 2], 0, 2));
    }
    inputs
}

/// Outputs whose order the kernel leaves open, put in a canonical form before they are
/// compared: `topk_selector`'s `index` rows hold the top k of a row in the order its
/// atomic slots were taken — each row becomes the selected input values sorted downwards
/// (the one multiset every valid selection has, ties or not), and an index out of the row's
/// range or chosen twice becomes NaN.
fn canonical(stem: &str, mut outs: Outputs) -> Outputs {
    if stem != "topk_selector" {
        return outs;
    }
    let (x, idx) = (&outs["input"], &outs["index"]);
    let (n, k) = (x.shape()[1], idx.shape()[1]);
    let (xv, iv) = (x.to_f64(), idx.to_f64());
    let (starts, ends) = (outs["starts"].to_f64(), outs["ends"].to_f64());
    let mut values = Vec::with_capacity(iv.len());
    for (r, row) in iv.chunks(k).enumerate() {
        let mut seen = std::collections::HashSet::new();
        let mut picked: Vec<f64> = row
            .iter()
            .map(|&i| {
                let ok = i >= starts[r] && i < ends[r] && seen.insert(i as i64);
                if ok {
                    xv[r * n + i as usize]
                } else {
                    f64::NAN
                }
            })
            .collect();
        picked.sort_by(|a, b| b.total_cmp(a));
        values.extend(picked);
    }
    let t = Tensor::from_f64(DType::Float32, idx.shape(), &values).expect("values");
    outs.insert("index".to_string(), t);
    outs
}

/// The binding of dim `name` in size `size` of the example `stem`.
fn size_of(stem: &str, size: usize, name: &str) -> usize {
    let example = EXAMPLES
        .iter()
        .find(|e| e.stem == stem)
        .expect("an example");
    let (_, v) = example.sizes[size]
        .iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("{stem}: no {name} in size {size}"));
    usize::try_from(*v).expect("a size")
}

/// Supported kernels a target refuses, with a fragment of the located error: fp8 GEMMs on
/// sm_80, whose mma.sync has no fp8 form. (gemm_persistent, refused on sm_80 for 212992
/// bytes of shared memory until its C_shared could take the pipeline stages' bytes within a
/// tile iteration (`T.fresh`), needs 147456.)
const REFUSED: &[(&str, Target, &str)] = &[
    // A Hopper example: its scores now split over 8 warps of 64 x 8 (issue 38: warp tiles
    // of 16 x 8 multiples where 16 x 16 ones do not fit, as TileLang's), but Q, O and two
    // stages of KV (64 x 512 float16 each) with the rest need 228 KiB of shared memory,
    // over sm_80's 163 KiB.
    (
        "mla_decode",
        Target::Sm80,
        "this kernel needs 233472 bytes of shared memory, more than the 166912 a block may have on sm_80",
    ),
    (
        "mla_decode_persistent",
        Target::Sm80,
        "this kernel needs 233472 bytes of shared memory, more than the 166912 a block may have on sm_80",
    ),
    (
        "mla_decode_paged",
        Target::Sm80,
        "this kernel needs 233472 bytes of shared memory, more than the 166912 a block may have on sm_80",
    ),
    // 64 heads of 576 dims, two stages of 64 gathered keys of 512 + 64 dims: 230464 bytes
    // of shared memory (the original's own tiles need 229376), over sm_80's.
    (
        "sparse_mla_fwd",
        Target::Sm80,
        "this kernel needs 230464 bytes of shared memory, more than the 166912 a block may have on sm_80",
    ),
    (
        "gemm_deepgemm_fp8_2xacc",
        Target::Sm80,
        "T.gemm runs on sm_90a's wgmma only",
    ),
    (
        "examples/gemm_fp8_blockscaled",
        Target::Sm80,
        "T.gemm runs on sm_90a's wgmma only",
    ),
    (
        "fp8_lighting_indexer",
        Target::Sm80,
        "T.gemm runs on sm_90a's wgmma only",
    ),
    // TileLang's fp8 GEMMs (e4m3 and e5m2): wgmma's fp8 forms only.
    ("gemm_fp8", Target::Sm80, "T.gemm runs on sm_90a's wgmma only"),
    ("gemm_fp8_e5m2", Target::Sm80, "T.gemm runs on sm_90a's wgmma only"),
    // Hand-written warp specialization: tlc's mbarriers are sm_90a's (rule I7), located at
    // the `T.alloc_barrier` that initializes them. (`ws_gemm_copy_gemm_0_1` has none: it
    // runs on both.)
    ("ws_gemm_barrierpipe_stage2", Target::Sm80, MBARRIERS_NEED_SM90),
    ("ws_gemm_copy_0_gemm_1", Target::Sm80, MBARRIERS_NEED_SM90),
    ("ws_gemm_copy_1_gemm_0", Target::Sm80, MBARRIERS_NEED_SM90),
    ("ws_gemm_softpipe_stage2", Target::Sm80, MBARRIERS_NEED_SM90),
];

/// [`REFUSED`]'s reason for the hand-written warp-specialized examples on sm_80.
const MBARRIERS_NEED_SM90: &str =
    "`T.mbarrier_init` needs a target with bulk tensor copies (TMA) with mbarriers";

/// Compiles whose ptxas log is not clean, with the warning codes it must give instead.
const PTXAS_EXPECTED: &[(&str, Target, &str)] = &[
    // 128 threads hold two 128 x 128 float32 accumulators (scores and output): 256 registers
    // per thread before anything else, over the 255 a thread has, so ptxas spills and
    // serializes the wgmmas. A property of the example's configuration (block_M = block_N =
    // dim = 128 at 128 threads), not of the lowering.
    ("flash_attn_fwd_bshd", Target::Sm90a, "C7512"),
    // The same two accumulators on sm_80 (mma.sync): ptxas assembles it, spilling.
    ("flash_attn_fwd_bshd", Target::Sm80, SPILLS),
    // Also two 128 x 128 float32 accumulators at 128 threads (the wgmma block sum and the
    // promoted sum): ptxas spills. tlc's own example splits such a tile over two consumer
    // warpgroups.
    ("gemm_deepgemm_fp8_2xacc", Target::Sm90a, SPILLS),
    // The MoE's gate / up kernels hold two 128 x 128 float32 accumulators and the 128 x 128
    // float16 A fragment at 256 threads (about 160 registers of tiles): on sm_90a ptxas
    // fits them (about 230 registers), on sm_80 (mma.sync) it spills — the shared expert's
    // kernel at 128 registers, ptxas's own choice (`--maxrregcount 255` changes nothing).
    ("fusedmoe_shared", Target::Sm80, SPILLS),
    // With the front end's safe-memory guards (what `tlc compile` builds; this test ran
    // without them before 2026-12-01): the GQA backward's dQ / dK / dV atomics and the
    // stream-K GEMM's partial-tile stores keep their bounds tests live, and sm_80's
    // mma.sync code spills 4 and 8 bytes (255 and 168 registers); sm_90a fits.
    ("flash_attn_gqa_bwd", Target::Sm80, SPILLS),
    ("examples/gemm_streamk", Target::Sm80, SPILLS),
    ("fusedmoe_routed", Target::Sm80, SPILLS),
    // TileLang's MHA inference at 128 threads: the combine kernel holds a 128 x 128 float32
    // accumulator and a 128 x 128 float16 partial tile per block (192 registers of tiles per
    // thread) and spills on both targets (72 to 144 bytes); the split kernel's 128 x 128
    // output and 128 x 64 score accumulators (192 registers) fit sm_90a's wgmma (250
    // registers) but spill on sm_80 (84 bytes).
    ("flash_decoding_mha_inference", Target::Sm80, SPILLS),
    ("flash_decoding_mha_inference", Target::Sm90a, SPILLS),
];

/// A [`PTXAS_EXPECTED`] entry for a kernel ptxas assembles without a warning but with
/// spills (its `-v` log reports nonzero spill stores).
const SPILLS: &str = "spill stores";

/// The files tlc does not compile yet (tests/tilelang/README.md says what each lacks).
const NOT_YET: &[&str] = &[];

/// A binding of a kernel's dims (and tunables).
type Size = &'static [(&'static str, i64)];

/// Files that translate a configuration whose original reads memory it never wrote: `check`
/// and `compile` accept them, and the tile-level interpreter must stop each, at one binding
/// of its dims, with a located error naming the buffer (the fragment of the message given
/// here). The defined configuration of the same kernel is an example of its own.
const UNINITIALIZED: &[(&str, Size, &str)] = &[
    // use_initial_state = False, as main() calls it: the first chunk stores and multiplies
    // by `b_h_shared` before anything writes it (gdn_chunk_delta_h_init takes the defined
    // branch).
    (
        "gdn_chunk_delta_h",
        &[("B", 1), ("S", 64), ("H", 1)],
        "reads `b_h_shared[0, 0]`, which was never written",
    ),
];

/// Examples whose per-thread code races on shared memory as written: they rely on
/// TileLang's thread-sync pass to insert the barriers between shared-memory stores and loads
/// (tlc's `thread-sync`, which `check`'s road applies). Without it, the tile-level
/// interpreter must stop each, at one binding of its dims, with a located data-race error on
/// shared memory — the barriers are what makes them correct.
const RACY: &[(&str, &[(&str, i64)])] = &[
    // Every thread writes all of A_shared (the same values) and its row of B_shared, then
    // reads them.
    ("gemv_naive", &[("N", 128), ("K", 128)]),
    // The tk == 0 thread zeroes C_shared[tn], the 32 threads of the row add to it
    // atomically and read it back.
    ("gemv_splitk_vectorized", &[("N", 2), ("K", 256)]),
    // Each thread writes its row of `shared` and reads the transposed thread's.
    ("hadamard", HADAMARD_2048_B1),
];

// ---------------------------------------------------------------------------------------
// The references.

/// The exact value `want` (computed directly from the math) with the bound of `model` (the
/// kernel's arithmetic). `model.v` is the same real number computed along the kernel's
/// steps; the two must agree to f64 accuracy, or the model describes other math.
fn expect(want: f64, model: Approx) -> Approx {
    let gap = (model.v - want).abs();
    assert!(
        gap <= 1e-9 * want.abs() + 1e-3 * model.e,
        "the error model computes {} where the reference is {want}",
        model.v
    );
    Approx {
        v: want,
        e: model.e + gap,
    }
}

fn exact(v: f64) -> Approx {
    Approx::exact(v)
}

/// `elementwise_add.tir`: C = A + B, one float32 add (exact: f64 holds the sum, rounded once).
fn elementwise_add(o: &Outputs) -> Expected {
    let (a, b) = (o["A"].to_f64(), o["B"].to_f64());
    let c = a
        .iter()
        .zip(&b)
        .map(|(x, y)| exact(Fp::F32.round(x + y)))
        .collect();
    vec![("C", c)]
}

/// The logits [`given`] to `fp8_lighting_indexer_clean.tir`: element `i` (row-major).
fn clean_logits_input(i: usize) -> f64 {
    (i % 97) as f64 - 48.0
}

/// `fp8_lighting_indexer_clean.tir`: Logits[t, n] = −∞ outside [CuSeqLenKS[t],
/// CuSeqLenKE[t]), the given value inside (exact).
fn clean_logits(o: &Outputs) -> Expected {
    let keys = o["Logits"].shape()[1];
    let (ks, ke) = (o["CuSeqLenKS"].to_f64(), o["CuSeqLenKE"].to_f64());
    let out = (0..o["Logits"].to_f64().len())
        .map(|i| {
            let (t, n) = (i / keys, (i % keys) as f64);
            match n < ks[t] || n >= ke[t] {
                true => exact(f64::NEG_INFINITY),
                false => exact(clean_logits_input(i)),
            }
        })
        .collect();
    vec![("Logits", out)]
}

/// The logits [`given`] to `fp8_lighting_indexer.tir` (element `i`, row-major): what the
/// kernel leaves unwritten keeps them.
fn indexer_logits_input(i: usize) -> f64 {
    -1000.0 - (i % 89) as f64
}

/// `fp8_lighting_indexer.tir`: for query t of block b = t / 4 and key n in the block's
/// window [ks_min, ks_min + 256 ceil((ke_max − ks_min) / 256)) (ks_min, ke_max over the
/// block's queries, clamped to seq_len_kv): Logits[t, n] = Σ_h max(q_{t,h} · k_n, 0) ·
/// W[t, h] · scale[n] — each dot product of 64 exact fp8 products summed in float32 (any
/// order, the wgmma k-steps), the two multiplies rounded to float32 in that order, the 32
/// heads summed in float32 in any order. Elsewhere Logits keeps its given value (exact).
fn lighting_indexer_logits(o: &Outputs) -> Expected {
    const HEADS: usize = 32;
    const DIM: usize = 64;
    let logits = &o["Logits"];
    let (rows, keys) = (logits.shape()[0], logits.shape()[1]);
    let (q, k) = (o["IndexQ"].to_f64(), o["IndexK"].to_f64());
    let (scale, w) = (o["IndexKScale"].to_f64(), o["Weights"].to_f64());
    let (ks, ke) = (o["CuSeqLenKS"].to_f64(), o["CuSeqLenKE"].to_f64());
    let mut out: Vec<Approx> = (0..rows * keys)
        .map(|i| exact(indexer_logits_input(i)))
        .collect();
    for block in 0..rows.div_ceil(4) {
        let queries = block * 4..(block * 4 + 4).min(rows);
        let clamp = |v: f64| v.min(keys as f64);
        let lo = queries
            .clone()
            .map(|t| clamp(ks[t]))
            .fold(f64::MAX, f64::min);
        let hi = queries
            .clone()
            .map(|t| clamp(ke[t]))
            .fold(f64::MIN, f64::max);
        if hi <= lo {
            continue;
        }
        let (lo, hi) = (lo as usize, hi as usize);
        let end = lo + 256 * (hi - lo).div_ceil(256);
        assert!(end <= keys, "block {block}'s window leaves seq_len_kv");
        for t in queries {
            for n in lo..end {
                let mut want = 0.0;
                let mut terms = Vec::with_capacity(HEADS);
                for h in 0..HEADS {
                    let row = (t * HEADS + h) * DIM;
                    let products: Vec<f64> =
                        (0..DIM).map(|d| q[row + d] * k[n * DIM + d]).collect();
                    let dot: f64 = products.iter().sum();
                    want += dot.max(0.0) * w[t * HEADS + h] * scale[n];
                    let s = Approx::sum(products.into_iter().map(exact), Fp::F32).max(exact(0.0));
                    let weighted = (s * exact(w[t * HEADS + h])).round(Fp::F32);
                    terms.push((weighted * exact(scale[n])).round(Fp::F32));
                }
                out[t * keys + n] = expect(want, Approx::sum(terms, Fp::F32));
            }
        }
    }
    vec![("Logits", out)]
}

/// `cumsum_chunk_local.tir`: per (b, h) and chunk of 64 positions along S, the reversed
/// cumulative sum G_new[b, t, h] = Σ_{t ≤ u < chunk end, u < S} G[b, u, h] (float32 sums).
fn chunk_local_cumsum(o: &Outputs) -> Expected {
    let g = &o["G"];
    let (batch, seq, heads) = (g.shape()[0], g.shape()[1], g.shape()[2]);
    let gv = g.to_f64();
    let mut out = Vec::with_capacity(gv.len());
    for b in 0..batch {
        for t in 0..seq {
            for h in 0..heads {
                let end = ((t / 64 + 1) * 64).min(seq);
                let terms = (t..end).map(|u| exact(gv[(b * seq + u) * heads + h]));
                out.push(Approx::sum(terms, Fp::F32));
            }
        }
    }
    vec![("G_new", out)]
}

/// `norm_rms.tir`, `norm_rms_splitk.tir`: B[r, j] = A[r, j] / sqrt(mean_j A[r, j]^2 + 1e-12),
/// all float32 (squares rounded, summed in any order, divided by N, plus the float32
/// literal 1e-12, rsqrt rounded, the product rounded).
fn rms_norm(o: &Outputs) -> Expected {
    let a = &o["A"];
    let (m, n) = (a.shape()[0], a.shape()[1]);
    let av = a.to_f64();
    let eps = Approx::literal(1e-12, 1e-12, Fp::F32);
    let mut b = Vec::with_capacity(m * n);
    for row in av.chunks(n) {
        let mean_sq = row.iter().map(|x| x * x).sum::<f64>() / n as f64;
        let want_s = 1.0 / (mean_sq + 1e-12).sqrt();
        let squares = row.iter().map(|&x| (exact(x) * exact(x)).round(Fp::F32));
        let sum = Approx::sum(squares, Fp::F32);
        let s = ((sum / exact(n as f64)).round(Fp::F32) + eps)
            .round(Fp::F32)
            .rsqrt()
            .round(Fp::F32);
        b.extend(
            row.iter()
                .map(|&x| expect(x * want_s, (exact(x) * s).round(Fp::F32))),
        );
    }
    vec![("B", b)]
}

/// `norm_layernorm_fwd.tir`: per row x (bfloat16 → float32), mean = Σx / D,
/// var = Σx² / D − mean², rstd = 1 / sqrt(var + 1e-5) (float32 literal), Y = bfloat16((x −
/// mean)·rstd·gamma + beta); Mean and Rstd float32. The model follows the header's float32
/// steps (the variance is E[x²] − E[x]², as the kernel computes it).
fn layer_norm(o: &Outputs) -> Expected {
    let x = &o["X"];
    let (rows, d) = (x.shape()[0], x.shape()[1]);
    let (xv, g, b) = (x.to_f64(), o["gamma"].to_f64(), o["beta"].to_f64());
    let f32r = |a: Approx| a.round(Fp::F32);
    let inv_d = f32r(exact(1.0) / exact(d as f64));
    let eps = Approx::literal(1e-5, 1e-5, Fp::F32);
    let (mut y, mut means, mut rstds) = (Vec::new(), Vec::new(), Vec::new());
    for row in xv.chunks(d).take(rows) {
        let mean_w = row.iter().sum::<f64>() / d as f64;
        let var_w = row.iter().map(|v| v * v).sum::<f64>() / d as f64 - mean_w * mean_w;
        let rstd_w = 1.0 / (var_w + 1e-5).sqrt();
        let sum = Approx::sum(row.iter().map(|&v| exact(v)), Fp::F32);
        let sumsq = Approx::sum(row.iter().map(|&v| f32r(exact(v) * exact(v))), Fp::F32);
        let mean = f32r(sum * inv_d);
        let var = f32r(f32r(f32r(sumsq * inv_d) - f32r(mean * mean)) + eps);
        let rstd = f32r(var.rsqrt());
        means.push(expect(mean_w, mean));
        rstds.push(expect(rstd_w, rstd));
        for (j, &v) in row.iter().enumerate() {
            let want = (v - mean_w) * rstd_w * g[j] + b[j];
            let norm = f32r(f32r(exact(v) - mean) * rstd);
            let model = f32r(f32r(norm * exact(g[j])) + exact(b[j])).round(Fp::Bf16);
            y.push(expect(want, model));
        }
    }
    vec![("Y", y), ("Mean", means), ("Rstd", rstds)]
}

/// `softmax_online.tir`: Y = softmax(X, axis=1), float16. The model follows the header: x·s
/// and max·s in float16 with s = float16(1.44269504) standing for log2 e; per 8192-wide
/// chunk, p = float16(exp2(float16(x·s − max·s))) summed in float32 and folded into the
/// float32 log-sum-exp; Y = float16(exp2(x·s − lse)) (float32 exp2).
fn softmax(o: &Outputs) -> Expected {
    const CHUNK: usize = 8192;
    let x = &o["X"];
    let n = x.shape()[1];
    assert_eq!(
        n % CHUNK,
        0,
        "softmax_online is exact only for whole chunks"
    );
    let scale = Approx::literal(LOG2_E_WRITTEN, LOG2_E, Fp::F16);
    let f32r = |a: Approx| a.round(Fp::F32);
    let f16r = |a: Approx| a.round(Fp::F16);
    let mut y = Vec::new();
    for row in x.to_f64().chunks(n) {
        let max = row.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v));
        let total: f64 = row.iter().map(|&v| (v - max).exp()).sum();
        let xs: Vec<Approx> = row.iter().map(|&v| f16r(exact(v) * scale)).collect();
        let mut lse: Option<Approx> = None;
        for (chunk, xs) in row.chunks(CHUNK).zip(xs.chunks(CHUNK)) {
            let m = chunk.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v));
            let ms = f16r(exact(m) * scale);
            let p = xs.iter().map(|&t| f16r(f16r(t - ms).exp2()));
            let sum = Approx::sum(p, Fp::F32);
            // The first chunk: exp2(-inf - m·s) = 0, so 0 + sum is exact.
            let inner = match lse {
                None => sum,
                Some(l) => f32r(f32r(f32r(l - ms).exp2()) + sum),
            };
            lse = Some(f32r(ms + f32r(inner.log2())));
        }
        let lse = lse.expect("a chunk");
        for (&v, &t) in row.iter().zip(&xs) {
            let model = f16r(f32r(f32r(t - lse).exp2()));
            y.push(expect((v - max).exp() / total, model));
        }
    }
    vec![("Y", y)]
}

/// `hadamard.tir`: per row x of A (b × n float32), B[r, k] = Σ_i x_i (−1)^popcount(i & k),
/// computed directly. The bound follows the kernel's float32 butterflies over the index
/// bits, lowest first: the first log2(n / threads) levels inside a thread as `s = a + b`
/// then `s − 2b` (each rounded; `2b` exact), the others `a + b` and `a − b` (the shuffle
/// levels and the exchanged ones alike), threads by the factory's table.
fn hadamard(o: &Outputs) -> Expected {
    const THREADS: [usize; 16] = [
        0, 1, 1, 1, 2, 4, 8, 16, 32, 32, 128, 256, 256, 256, 256, 256,
    ];
    let a = &o["A"];
    let n = a.shape()[1];
    let in_thread = (n / THREADS[n.trailing_zeros() as usize]).trailing_zeros();
    let av = a.to_f64();
    let mut out = Vec::with_capacity(av.len());
    for row in av.chunks(n) {
        let mut v: Vec<Approx> = row.iter().map(|&x| exact(x)).collect();
        let mut half = 1;
        let mut level = 0;
        while half < n {
            for base in (0..n).step_by(2 * half) {
                for k in base..base + half {
                    let (p, q) = (v[k], v[k + half]);
                    let (s, d) = if level < in_thread {
                        let s = (p + q).round(Fp::F32);
                        (s, (s - exact(2.0) * q).round(Fp::F32))
                    } else {
                        ((p + q).round(Fp::F32), (p - q).round(Fp::F32))
                    };
                    v[k] = s;
                    v[k + half] = d;
                }
            }
            half *= 2;
            level += 1;
        }
        for (k, model) in v.into_iter().enumerate() {
            let want: f64 = row
                .iter()
                .enumerate()
                .map(|(i, &x)| if (i & k).count_ones() % 2 == 0 { x } else { -x })
                .sum();
            out.push(expect(want, model));
        }
    }
    vec![("B", out)]
}

/// `topk_selector.tir` (outputs in `canonical`'s form): per row r, the topk largest values of
/// input[r, starts[r]:ends[r]], sorted downwards — what any valid selection of indices
/// reads, exactly.
fn topk_selector(o: &Outputs) -> Expected {
    let (x, idx) = (&o["input"], &o["index"]);
    let (n, k) = (x.shape()[1], idx.shape()[1]);
    let xv = x.to_f64();
    let (starts, ends) = (o["starts"].to_f64(), o["ends"].to_f64());
    let mut out = Vec::new();
    for r in 0..x.shape()[0] {
        let mut row: Vec<f64> = xv[r * n + starts[r] as usize..r * n + ends[r] as usize].to_vec();
        assert!(row.len() >= k, "topk_selector: a range shorter than topk");
        row.sort_by(|a, b| b.total_cmp(a));
        out.extend(row[..k].iter().map(|&v| exact(v)));
    }
    vec![("index", out)]
}

/// `topk_topk.tir`: per row, the 6 largest values in decreasing order and their column
/// indices (the largest index first among equal values; the header removes all copies of a
/// maximum at once, which only matters for ties, and the random rows have none among the
/// top 7). Exact: maxima of float32 values and integers.
fn topk(o: &Outputs) -> Expected {
    const K: usize = 6;
    let logits = &o["logits"];
    let n = logits.shape()[1];
    let (mut gates, mut indices) = (Vec::new(), Vec::new());
    for row in logits.to_f64().chunks(n) {
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|&a, &b| row[b].total_cmp(&row[a]).then(b.cmp(&a)));
        assert!(
            order.windows(2).take(K).all(|w| row[w[0]] > row[w[1]]),
            "topk: a tie among the largest values of a random row"
        );
        for &j in &order[..K] {
            gates.push(exact(row[j]));
            indices.push(exact(j as f64));
        }
    }
    vec![("topk_gates", gates), ("topk_indices", indices)]
}

/// `norm_layernorm_bwd.tir`: per row r (m = Mean[r], s = Rstd[r], inputs as given), float32:
/// x̂ = (x − m)·s, d = dy·γ, c1 = Σ d·x̂ · (1/D), c2 = Σ d · (1/D),
/// DX = bfloat16(s·((d − c2) − x̂·c1)); DGamma[j] and DBeta[j] add Σ_r dy·x̂ and Σ_r dy to
/// their initial values (the random inputs, redrawn here), in any order (each block's sum of
/// rounded products in row order, then the atomic adds).
fn layer_norm_bwd(o: &Outputs) -> Expected {
    let x = &o["X"];
    let (rows, d) = (x.shape()[0], x.shape()[1]);
    let (xv, dyv, g) = (x.to_f64(), o["DY"].to_f64(), o["gamma"].to_f64());
    let (mean, rstd) = (o["Mean"].to_f64(), o["Rstd"].to_f64());
    let initial = |name: &str| {
        interp::random_tensor(name, DType::Float32, &[d], SEED)
            .expect("a small tensor")
            .to_f64()
    };
    let (g0, b0) = (initial("DGamma"), initial("DBeta"));
    let f32r = |a: Approx| a.round(Fp::F32);
    let inv_d = f32r(exact(1.0) / exact(d as f64));
    let mut dx = Vec::with_capacity(rows * d);
    let mut dgamma_terms: Vec<Vec<Approx>> = g0.iter().map(|&v| vec![exact(v)]).collect();
    let mut dbeta_terms: Vec<Vec<Approx>> = b0.iter().map(|&v| vec![exact(v)]).collect();
    let (mut dgamma_w, mut dbeta_w) = (g0.clone(), b0.clone());
    for r in 0..rows {
        let (xr, dyr) = (&xv[r * d..][..d], &dyv[r * d..][..d]);
        let (m, s) = (mean[r], rstd[r]);
        let xh_w: Vec<f64> = xr.iter().map(|&v| (v - m) * s).collect();
        let dh_w: Vec<f64> = dyr.iter().zip(&g).map(|(dy, g)| dy * g).collect();
        let c1_w = dh_w.iter().zip(&xh_w).map(|(a, b)| a * b).sum::<f64>() / d as f64;
        let c2_w = dh_w.iter().sum::<f64>() / d as f64;
        let xh: Vec<Approx> = xr
            .iter()
            .map(|&v| f32r(f32r(exact(v) - exact(m)) * exact(s)))
            .collect();
        let dh: Vec<Approx> = dyr
            .iter()
            .zip(&g)
            .map(|(&dy, &g)| f32r(exact(dy) * exact(g)))
            .collect();
        let sum_dxx = Approx::sum(dh.iter().zip(&xh).map(|(&a, &b)| f32r(a * b)), Fp::F32);
        let sum_dx = Approx::sum(dh.iter().copied(), Fp::F32);
        let c1 = f32r(sum_dxx * inv_d);
        let c2 = f32r(sum_dx * inv_d);
        for j in 0..d {
            let want = s * (dh_w[j] - c2_w - xh_w[j] * c1_w);
            let model = f32r(exact(s) * f32r(f32r(dh[j] - c2) - f32r(xh[j] * c1)));
            dx.push(expect(want, model.round(Fp::Bf16)));
            dgamma_terms[j].push(f32r(exact(dyr[j]) * xh[j]));
            dbeta_terms[j].push(exact(dyr[j]));
            dgamma_w[j] += dyr[j] * xh_w[j];
            dbeta_w[j] += dyr[j];
        }
    }
    let total = |terms: Vec<Vec<Approx>>, want: Vec<f64>| -> Vec<Approx> {
        terms
            .into_iter()
            .zip(want)
            .map(|(t, w)| expect(w, Approx::sum(t, Fp::F32)))
            .collect()
    };
    vec![
        ("DX", dx),
        ("DGamma", total(dgamma_terms, dgamma_w)),
        ("DBeta", total(dbeta_terms, dbeta_w)),
    ]
}

/// `gemv_naive.tir`, `gemv_splitk_vectorized.tir`: C[n] = float16(Σ_k A[k]·B[n, k]), the
/// float16 products exact in float32 and summed in any order (one thread in k order, or 32
/// threads' partial sums combined by atomic adds in an unspecified order).
fn gemv(o: &Outputs) -> Expected {
    let (a, b) = (o["A"].to_f64(), &o["B"]);
    let (n, k) = (b.shape()[0], b.shape()[1]);
    let bv = b.to_f64();
    let c = (0..n)
        .map(|i| {
            let products = (0..k).map(|l| a[l] * bv[i * k + l]);
            let model = Approx::sum(products.clone().map(exact), Fp::F32).round(Fp::F16);
            expect(products.sum(), model)
        })
        .collect();
    vec![("C", c)]
}

/// `gemm_persistent.tir`: C = float16(A @ B), the float16 products exact in float32 and
/// summed in any order.
fn gemm_f16(o: &Outputs) -> Expected {
    let (a, b) = (&o["A"], &o["B"]);
    let (m, k, n) = (a.shape()[0], a.shape()[1], b.shape()[1]);
    let (av, bv) = (a.to_f64(), b.to_f64());
    let mut c = Vec::with_capacity(m * n);
    for i in 0..m {
        for j in 0..n {
            let products = (0..k).map(|l| av[i * k + l] * bv[l * n + j]);
            let model = Approx::sum(products.clone().map(exact), Fp::F32).round(Fp::F16);
            c.push(expect(products.sum(), model));
        }
    }
    vec![("C", c)]
}

/// `conv_im2col.tir`: out[n, oh, ow, f] = float16(Σ_{kh, kw, c} data[n, oh + kh - 1,
/// ow + kw - 1, c] * kernel[kh, kw, c, f]) (3 x 3 kernel, stride 1, dilation 1, padding 1;
/// out-of-image taps are 0), the float16 products exact in float32, summed in any order.
fn conv_im2col(o: &Outputs) -> Expected {
    let (d, k) = (&o["data"], &o["kernel"]);
    let [n, h, w, c] = [d.shape()[0], d.shape()[1], d.shape()[2], d.shape()[3]];
    let f = k.shape()[3];
    // An odd kernel size K with "same" padding (K - 1) / 2: conv_im2col.tir's K = 3,
    // conv_im2col_symbolic_k.tir's K bound by the sizes.
    let (ks, pad) = (k.shape()[0], (k.shape()[0] as i64 - 1) / 2);
    let (dv, kv) = (d.to_f64(), k.to_f64());
    let mut out = Vec::with_capacity(n * h * w * f);
    for (b, oh, ow) in (0..n).flat_map(|b| (0..h).flat_map(move |y| (0..w).map(move |x| (b, y, x))))
    {
        for j in 0..f {
            let mut products = Vec::new();
            for (kh, kw) in (0..ks).flat_map(|a| (0..ks).map(move |e| (a, e))) {
                let (y, x) = ((oh + kh) as i64 - pad, (ow + kw) as i64 - pad);
                if y < 0 || x < 0 || y >= h as i64 || x >= w as i64 {
                    continue;
                }
                let (y, x) = (y as usize, x as usize);
                for ci in 0..c {
                    let a = dv[((b * h + y) * w + x) * c + ci];
                    products.push(a * kv[((kh * ks + kw) * c + ci) * f + j]);
                }
            }
            let model = Approx::sum(products.iter().copied().map(exact), Fp::F32).round(Fp::F16);
            out.push(expect(products.iter().sum(), model));
        }
    }
    vec![("out", out)]
}

/// `gemm_blocksparse.tir`: each 128 x 128 tile of C is float16 of the sum, over the 32-wide
/// k-blocks whose mask bit is set, of A_blk @ B_blk (float16 products exact in float32,
/// summed in any order); 0 where no bit is set.
fn gemm_blocksparse(o: &Outputs) -> Expected {
    let (a, b, mask) = (&o["A"], &o["B"], &o["BlockMask"]);
    let (m, k, n) = (a.shape()[0], a.shape()[1], b.shape()[1]);
    let (av, bv, maskv) = (a.to_f64(), b.to_f64(), mask.to_f64());
    let (nb, kb) = (n / 128, k / 32);
    assert_eq!(mask.shape(), [m / 128, nb, kb], "the mask's shape");
    let mut c = Vec::with_capacity(m * n);
    for i in 0..m {
        for j in 0..n {
            let set = |l: &usize| maskv[((i / 128) * nb + j / 128) * kb + l / 32] != 0.0;
            let products = (0..k).filter(set).map(|l| av[i * k + l] * bv[l * n + j]);
            let model = Approx::sum(products.clone().map(exact), Fp::F32).round(Fp::F16);
            c.push(expect(products.sum(), model));
        }
    }
    vec![("C", c)]
}

/// `gemv_alloc_reducer.tir`: o[m] = float16(Σ_n float32(a[m, n] * x[n])), each product a
/// float16 multiply (rounded to float16), the sum in float32 in any order (the reducer's
/// combining order is unspecified).
fn gemv_reducer(o: &Outputs) -> Expected {
    let (a, x) = (&o["a"], &o["x"]);
    let (m, n) = (a.shape()[0], a.shape()[1]);
    let (av, xv) = (a.to_f64(), x.to_f64());
    let out = (0..m)
        .map(|i| {
            let row = &av[i * n..(i + 1) * n];
            let products = row.iter().zip(&xv).map(|(p, q)| p * q);
            let model = Approx::sum(
                row.iter()
                    .zip(&xv)
                    .map(|(&p, &q)| (exact(p) * exact(q)).round(Fp::F16)),
                Fp::F32,
            )
            .round(Fp::F16);
            expect(products.sum(), model)
        })
        .collect();
    vec![("o", out)]
}

/// `dequant_gemv_fp16xint4.tir`: C[m, n] = sum_k A[m, k] * w(n, k), w the signed nibble
/// `k % 2` of B[n, k // 2] (low nibble for even k; 8..15 stand for -8..-1). All float16: each
/// product (exact in float32) rounded to float16; thread `kr` sums its k = 256 ko + 8 kr + ki
/// in float16, then the all-reduce sums the 32 partials in float16 (a butterfly: any order).
fn dequant_gemv(o: &Outputs) -> Expected {
    let (a, b) = (&o["A"], &o["B"]);
    let (m, k, n) = (a.shape()[0], a.shape()[1], b.shape()[0]);
    assert_eq!(b.shape()[1] * 2, k, "B packs two 4-bit values per byte");
    let (av, bv) = (a.to_f64(), b.to_f64());
    let w = |j: usize, l: usize| {
        let byte = bv[j * (k / 2) + l / 2] as i64;
        let nibble = (byte >> (4 * (l % 2))) & 15;
        (if nibble >= 8 { nibble - 16 } else { nibble }) as f64
    };
    let mut c = Vec::with_capacity(m * n);
    for i in 0..m {
        for j in 0..n {
            let products: Vec<f64> = (0..k).map(|l| av[i * k + l] * w(j, l)).collect();
            let partial = |kr: usize| {
                let ks =
                    (0..k / 256).flat_map(move |ko| (0..8).map(move |ki| 256 * ko + 8 * kr + ki));
                Approx::sum(ks.map(|l| exact(products[l]).round(Fp::F16)), Fp::F16)
            };
            let model = Approx::sum((0..32).map(partial), Fp::F16);
            c.push(expect(products.iter().sum(), model));
        }
    }
    vec![("C", c)]
}

/// `dequant_gemm_fine_grained.tir`: C[m, n] = sum_k A[m, k] * w(n, k), w the unsigned
/// nibble `k % 2` of B[n, k // 2] (low nibble for even k; 0..15). T.gemm's float16
/// accumulator (docs/ir.md, `T.gemm`): per 16-wide k-step the products (exact in float32)
/// are summed in float32, added in float32 to the accumulator, and rounded to float16.
fn dequant_gemm(o: &Outputs) -> Expected {
    let (a, b) = (&o["A"], &o["B"]);
    let (m, k, n) = (a.shape()[0], a.shape()[1], b.shape()[0]);
    assert_eq!(b.shape()[1] * 2, k, "B packs two 4-bit values per byte");
    let (av, bv) = (a.to_f64(), b.to_f64());
    let w = |j: usize, l: usize| (((bv[j * (k / 2) + l / 2] as i64) >> (4 * (l % 2))) & 15) as f64;
    let mut c = Vec::with_capacity(m * n);
    for i in 0..m {
        for j in 0..n {
            let products: Vec<f64> = (0..k).map(|l| av[i * k + l] * w(j, l)).collect();
            let model = products.chunks(16).fold(exact(0.0), |acc, step| {
                let step = Approx::sum(step.iter().copied().map(exact), Fp::F32);
                (acc + step).round(Fp::F32).round(Fp::F16)
            });
            c.push(expect(products.iter().sum(), model));
        }
    }
    vec![("C", c)]
}

/// `dequant_gemm_w4a8.tir`: Ct[n, m] = sum_k w(n, k) * A[m, k], w the signed nibble `k % 2`
/// of B[n, k // 2] (low nibble for even k; 8..15 stand for -8..-1), in exact integers (the
/// int32 sums stay far inside int32: |sum| <= K * 1024).
fn dequant_gemm_w4a8(o: &Outputs) -> Expected {
    let (a, b) = (&o["A"], &o["B"]);
    let (m, k, n) = (a.shape()[0], a.shape()[1], b.shape()[0]);
    assert_eq!(b.shape()[1] * 2, k, "B packs two 4-bit values per byte");
    let (av, bv) = (a.to_f64(), b.to_f64());
    assert!(
        bv.iter().any(|&x| x >= 128.0) && av.iter().any(|&x| x < -64.0),
        "w4a8: the inputs do not cover the high nibbles and large negative A"
    );
    let w = |j: usize, l: usize| {
        let nibble = ((bv[j * (k / 2) + l / 2] as i64) >> (4 * (l % 2))) & 15;
        if nibble >= 8 {
            nibble - 16
        } else {
            nibble
        }
    };
    let mut ct = Vec::with_capacity(n * m);
    for j in 0..n {
        for i in 0..m {
            let sum: i64 = (0..k).map(|l| w(j, l) * av[i * k + l] as i64).sum();
            ct.push(exact(sum as f64));
        }
    }
    vec![("Ct", ct)]
}

/// `gemm_int4.tir`: C[m, n] = sum_k A[m, k] * B[n, k] on int4 values (-8..=7), in integers
/// wrapped to int32 as the tensor cores' s32 accumulator wraps (these sizes stay far from
/// it: |sum| <= 64 K). The inputs must cover both ends of the int4 range.
fn gemm_int4(o: &Outputs) -> Expected {
    let (a, b) = (&o["A"], &o["B"]);
    assert_eq!(a.dtype(), DType::Int4, "A is int4");
    let (m, k, n) = (a.shape()[0], a.shape()[1], b.shape()[0]);
    assert_eq!(b.shape()[1], k, "B is (N, K)");
    let (av, bv) = (a.to_f64(), b.to_f64());
    for v in [&av, &bv] {
        assert!(
            v.contains(&-8.0) && v.contains(&7.0) && v.iter().all(|x| (-8.0..=7.0).contains(x)),
            "gemm_int4: the inputs do not cover -8..=7 exactly"
        );
    }
    let mut c = Vec::with_capacity(m * n);
    for i in 0..m {
        for j in 0..n {
            let sum: i64 = (0..k)
                .map(|l| av[i * k + l] as i64 * bv[j * k + l] as i64)
                .sum();
            c.push(exact(f64::from(sum as i32)));
        }
    }
    vec![("C", c)]
}

/// `gemm_streamk.tir`: C = A @ B^T (float16 products exact in float32), summed in float32:
/// each tile's k-range is cut into pieces summed separately and merged into the zeroed C by
/// float32 atomic adds in an unspecified order — one float32 sum of the K products in some
/// association, which `Approx::sum` bounds for any.
fn gemm_streamk(o: &Outputs) -> Expected {
    float32_sum_gemm(o, true)
}

/// C = A @ B (or A @ B^T with `b_transposed`, B then (N, K)) as one float32 sum of the
/// float16 products (exact in float32) in any association.
fn float32_sum_gemm(o: &Outputs, b_transposed: bool) -> Expected {
    let (a, b) = (&o["A"], &o["B"]);
    let (m, k) = (a.shape()[0], a.shape()[1]);
    let n = if b_transposed {
        b.shape()[0]
    } else {
        b.shape()[1]
    };
    let (av, bv) = (a.to_f64(), b.to_f64());
    let b_at = |l: usize, j: usize| {
        if b_transposed {
            bv[j * k + l]
        } else {
            bv[l * n + j]
        }
    };
    let mut c = Vec::with_capacity(m * n);
    for i in 0..m {
        for j in 0..n {
            let products = (0..k).map(|l| av[i * k + l] * b_at(l, j));
            let model = Approx::sum(products.clone().map(exact), Fp::F32);
            c.push(expect(products.sum(), model));
        }
    }
    vec![("C", c)]
}

/// `gemm_splitk.tir`, `gemm_splitk_vectorize_atomicadd.tir`: C = A @ B (float16 products
/// exact in float32), C float32: each K slice's float32 sum added into the zeroed C by
/// float32 atomics in any order — one float32 sum of the K products in some association.
fn gemm_splitk_f32(o: &Outputs) -> Expected {
    float32_sum_gemm(o, false)
}

/// `grouped_gemm_bwd.tir`: C[g] = float16(A_g^T @ B_g) over the rows of group g (A (rows,
/// M), B (rows, N)); the float16 products exact in float32, summed in any order.
fn grouped_gemm_bwd(o: &Outputs) -> Expected {
    let (a, b) = (&o["A"], &o["B"]);
    let (m, n) = (a.shape()[1], b.shape()[1]);
    let (av, bv) = (a.to_f64(), b.to_f64());
    let sizes = o["batch_sizes"].to_f64();
    let offsets = o["batch_offsets"].to_f64();
    let mut c = Vec::with_capacity(sizes.len() * m * n);
    for (&size, &start) in sizes.iter().zip(&offsets) {
        let rows = start as usize..(start + size) as usize;
        for i in 0..m {
            for j in 0..n {
                let products = rows.clone().map(|r| av[r * m + i] * bv[r * n + j]);
                let model = Approx::sum(products.clone().map(exact), Fp::F32).round(Fp::F16);
                c.push(expect(products.sum(), model));
            }
        }
    }
    vec![("C", c)]
}

/// The most K slices a split-K size of [`EXAMPLES`] has (the reference's bound holds for any
/// number up to it).
const MAX_SPLIT_K: f64 = 4.0;

/// `examples/gemm_splitk.tir`: C = A @ B (float16 products exact in float32), C float16.
/// Each of at most [`MAX_SPLIT_K`] slices sums its products in float32 in any order, rounds
/// the sum to float16 and adds it into the zeroed C in float16 (`T.atomic_add` converts the
/// value to C's dtype; the adds in any order). Bound: the float32 sums' error (at most that of
/// one float32 sum of all products), the slices' roundings to float16 (each at most u16 of a
/// value no larger than Σ|products| plus its error), and the float16 adds (at most S
/// roundings of a partial sum of the same size).
fn gemm_splitk(o: &Outputs) -> Expected {
    let (a, b) = (&o["A"], &o["B"]);
    let (m, k, n) = (a.shape()[0], a.shape()[1], b.shape()[1]);
    let (av, bv) = (a.to_f64(), b.to_f64());
    let (u16, tiny16) = (Fp::F16.unit(), Fp::F16.tiny());
    let mut c = Vec::with_capacity(m * n);
    for i in 0..m {
        for j in 0..n {
            let products: Vec<f64> = (0..k).map(|l| av[i * k + l] * bv[l * n + j]).collect();
            let f32_sum = Approx::sum(products.iter().copied().map(exact), Fp::F32);
            let mag: f64 = products.iter().map(|p| p.abs()).sum::<f64>() + f32_sum.e;
            let e = f32_sum.e
                + (2.0 * MAX_SPLIT_K + 1.0) * u16 * mag * (1.0 + 4.0 * u16)
                + 2.0 * MAX_SPLIT_K * tiny16;
            c.push(Approx {
                v: products.iter().sum(),
                e,
            });
        }
    }
    vec![("C", c)]
}

/// `examples/gemm_streamk.tir`: C = A @ B (float16 products exact in float32), C float32:
/// every tile's k-range is summed in pieces merged into the zeroed C by float32 atomic adds
/// (or stored whole), in an unspecified order — one float32 sum of the K products in some
/// association, which `Approx::sum` bounds for any.
fn gemm_streamk_nn(o: &Outputs) -> Expected {
    float32_sum_gemm(o, false)
}

/// The block-scaled FP8 GEMMs (`gemm_deepgemm_fp8_2xacc.tir`, `examples/gemm_fp8_blockscaled
/// .tir`): A (M, K), B (N, K) fp8, scales_a (M, KB), scales_b (ceil(N / 128), KB), C (M, N)
/// bfloat16 = Σ_kb (Σ_{k in block kb} A·B) · sa[m, kb] · sb[n / 128, kb]. As the kernels
/// compute it: each block's sum of exact products in float32 in any order (the wgmma
/// k-steps), its scale `sa · sb` rounded to float32, their product rounded to float32, the
/// blocks' terms summed in float32 into the zeroed accumulator in any order, then one
/// rounding to bfloat16.
fn blockscaled_fp8(o: &Outputs) -> Expected {
    const GROUP: usize = 128;
    let (a, b) = (&o["A"], &o["B"]);
    let (m, k, n) = (a.shape()[0], a.shape()[1], b.shape()[0]);
    let blocks = k.div_ceil(GROUP);
    let (av, bv) = (a.to_f64(), b.to_f64());
    let (sa, sb) = (o["scales_a"].to_f64(), o["scales_b"].to_f64());
    let mut c = Vec::with_capacity(m * n);
    for i in 0..m {
        for j in 0..n {
            let mut want = 0.0;
            let mut terms = Vec::with_capacity(blocks);
            for kb in 0..blocks {
                let ks = kb * GROUP..(kb * GROUP + GROUP).min(k);
                let products: Vec<f64> = ks.map(|l| av[i * k + l] * bv[j * k + l]).collect();
                let (s_a, s_b) = (sa[i * blocks + kb], sb[(j / GROUP) * blocks + kb]);
                want += products.iter().sum::<f64>() * s_a * s_b;
                let block = Approx::sum(products.into_iter().map(exact), Fp::F32);
                let scale = (exact(s_a) * exact(s_b)).round(Fp::F32);
                terms.push((block * scale).round(Fp::F32));
            }
            let model = Approx::sum(terms, Fp::F32).round(Fp::Bf16);
            c.push(expect(want, model));
        }
    }
    vec![("C", c)]
}

/// `cast_group_per_split_token_fp8.tir`: group b's rows start at off_b = Σ_{i<b}
/// batch_sizes[i]; per row t < M_max and 128-wide column group g, v = X[off_b + t, g-th
/// columns] (rows past M and columns past N read as 0), amax = max(max |v|, 1e-4),
/// s = float32(amax / 448) if t < batch_sizes[b] else 0; X_amax = s, X_fp8 =
/// e4m3(clamp(float32(v / s), ±448)) for t < batch_sizes[b], else 0. Exact, as for
/// `per_token_cast_fp8`.
fn group_per_split_token_cast_fp8(o: &Outputs) -> Expected {
    const GROUP: usize = 128;
    let (x, sizes) = (&o["X"], o["batch_sizes"].to_f64());
    let (m, n) = (x.shape()[0], x.shape()[1]);
    let m_max = o["X_fp8"].shape()[1];
    let xv = x.to_f64();
    let floor = Fp::F32.round(1e-4);
    let (mut q, mut scales) = (Vec::new(), Vec::new());
    let mut offset = 0usize;
    for &rows in &sizes {
        let rows = rows as usize;
        for t in 0..m_max {
            let r = offset + t;
            let row: Vec<f64> = (0..n)
                .map(|j| if r < m { xv[r * n + j] } else { 0.0 })
                .collect();
            for group in row.chunks(GROUP) {
                let amax = group.iter().fold(floor, |a, &v| a.max(v.abs()));
                let s = if t < rows {
                    Fp::F32.round(amax / 448.0)
                } else {
                    0.0
                };
                scales.push(exact(s));
                q.extend(group.iter().map(|&v| {
                    if t >= rows {
                        return exact(0.0);
                    }
                    let y = Fp::F32.round(v / s).clamp(-448.0, 448.0);
                    exact(fp8::decode(fp8::E4M3, fp8::encode(fp8::E4M3, y)))
                }));
            }
        }
        offset += rows;
    }
    vec![("X_fp8", q), ("X_amax", scales)]
}

/// `cast_per_token_fp8.tir`: per row and 128-wide column group, amax = max(max |x|, 1e-4),
/// s = float32(amax / 448), X_amax = s, X_fp8 = e4m3(clamp(float32(x / s), ±448)) (round to
/// nearest even, saturating: `interp::fp8::encode`). Exact: one float32 rounding of each
/// quotient (f64 holds the quotient of two float32 values closely enough that rounding it
/// to float32 is the float32 division), then the fp8 rounding.
fn per_token_cast_fp8(o: &Outputs) -> Expected {
    const GROUP: usize = 128;
    let x = &o["X"];
    let n = x.shape()[1];
    let floor = Fp::F32.round(1e-4);
    let (mut q, mut scales) = (Vec::new(), Vec::new());
    for row in x.to_f64().chunks(n) {
        for group in row.chunks(GROUP) {
            let amax = group.iter().fold(floor, |m, &v| m.max(v.abs()));
            let s = Fp::F32.round(amax / 448.0);
            scales.push(exact(s));
            q.extend(group.iter().map(|&v| {
                let y = Fp::F32.round(v / s).clamp(-448.0, 448.0);
                exact(fp8::decode(fp8::E4M3, fp8::encode(fp8::E4M3, y)))
            }));
        }
    }
    vec![("X_fp8", q), ("X_amax", scales)]
}

#[derive(Clone, Copy)]
enum Layout {
    /// (batch, seq, heads, dim)
    Bshd,
    /// (batch, heads, seq, dim)
    Bhsd,
}

fn attention_bshd(o: &Outputs) -> Expected {
    attention(o, Layout::Bshd, false, 128, 0.1275174307460247)
}

/// `flash_attn_bwd_bhsd_fwd.tir`: non-causal BHSD attention with its lse, 64-key tiles.
fn attention_bhsd_lse(o: &Outputs) -> Expected {
    attention(o, Layout::Bhsd, false, 64, 0.18033688)
}

/// `flash_attn_gqa_bwd_fwd.tir`: [`attention`] with K and V expanded (16 query heads per KV
/// head; V's head dim 128, Q's 192), 64-key tiles, the literal scale of its header, and lse.
fn gqa_bwd_fwd(o: &Outputs) -> Expected {
    attention(
        &kv_expanded(o),
        Layout::Bshd,
        false,
        64,
        0.10411754621281724,
    )
}

fn attention_bhsd_causal(o: &Outputs) -> Expected {
    attention(o, Layout::Bhsd, true, 64, 0.18033688)
}

/// `examples/flash_attention.tir` (BSHD, `kv_heads` KV heads): [`attention`]'s model with K
/// and V expanded to the query heads (head h reads KV head h / (heads / kv_heads)), key tiles
/// of `block_n`, and the scale the kernel computes, float32(1.44269504 / sqrt(float32(dim))).
fn flash_attention_gqa(o: &Outputs, causal: bool, block_n: usize) -> Expected {
    let dim = o["Q"].shape()[3];
    let scale = LOG2_E_WRITTEN as f32 / (dim as f32).sqrt();
    attention(
        &kv_expanded(o),
        Layout::Bshd,
        causal,
        block_n,
        f64::from(scale),
    )
}

/// `flash_attn_gqa_fwd_bshd.tir` (TileLang's GQA example, 16 query heads per KV head, 64-key
/// tiles): [`attention`]'s model with K and V expanded, and the scale TileLang's Python
/// computes, the literal 0.1275174307460247.
fn gqa_fwd_bshd(o: &Outputs) -> Expected {
    attention(&kv_expanded(o), Layout::Bshd, false, 64, 0.1275174307460247)
}

/// `o` with K and V (BSHD, `kv_heads` heads, each of its own head dim) expanded to Q's
/// heads: head h reads KV head h / (heads / kv_heads).
fn kv_expanded(o: &Outputs) -> Outputs {
    let (q, k) = (&o["Q"], &o["K"]);
    let (batch, seq, heads) = (q.shape()[0], q.shape()[1], q.shape()[2]);
    let kv_heads = k.shape()[2];
    assert_eq!(heads % kv_heads, 0, "heads is a multiple of kv_heads");
    let group = heads / kv_heads;
    let expand = |name: &str| {
        let dim = o[name].shape()[3];
        let t = o[name].to_f64();
        let values: Vec<f64> = (0..batch * seq * heads * dim)
            .map(|i| {
                let (d, h, row) = (i % dim, i / dim % heads, i / dim / heads);
                t[(row * kv_heads + h / group) * dim + d]
            })
            .collect();
        Tensor::from_f64(DType::Float16, &[batch, seq, heads, dim], &values).expect("expanded")
    };
    let mut expanded = o.clone();
    expanded.insert("K".to_string(), expand("K"));
    expanded.insert("V".to_string(), expand("V"));
    expanded
}

/// `examples/flash_attention.tir` with `is_causal=1` and `block_N=32` (its [`EXAMPLES`] sizes).
fn flash_attention_causal(o: &Outputs) -> Expected {
    flash_attention_gqa(o, true, 32)
}

/// The flash attention files: Output[q, :] = Σ_k P[q, k]·V[k, :], P[q, :] = softmax_k(Q[q, :] ·
/// K[k, :] / sqrt(dim)) over every key (non-causal) or keys k ≤ q + seq_kv − seq_q (causal).
///
/// The model follows the headers, tile by tile of `block_n` keys (tiles with no key a row may
/// see change nothing, exactly: the scale is exp2(0) = 1 and P is 0): scores summed in
/// float32 (float16 products are exact), m = running max, P = exp2(S·c − m·c) in float32 with
/// c the float32 literal standing for log2(e) / sqrt(dim), l = l·alpha + Σ P,
/// O = O·alpha + float16(P) @ V (float32), alpha = exp2(m_old·c − m_new·c); Output =
/// float16(O / l). V's head dim may differ from Q's and K's (Output has V's). Where the
/// kernel also writes `lse` ((batch, heads, seq_q) float32: the backward's forward pass),
/// it is checked too: lse = log2 Σ_k exp2(Q_q · K_k · log2(e) / sqrt(dim)) over the keys the
/// row sees, computed as float32(float32(log2 l) + float32(m·c)).
fn attention(o: &Outputs, layout: Layout, causal: bool, block_n: usize, c: f64) -> Expected {
    let (q, k, v) = (&o["Q"], &o["K"], &o["V"]);
    let (qs, ks) = (q.shape(), k.shape());
    let (batch, heads, seq_q, dim, seq_kv) = match layout {
        Layout::Bshd => (qs[0], qs[2], qs[1], qs[3], ks[1]),
        Layout::Bhsd => (qs[0], qs[1], qs[2], qs[3], ks[2]),
    };
    let dim_v = v.shape()[3];
    let at_dim = |b: usize, h: usize, s: usize, seq: usize, dim: usize| match layout {
        Layout::Bshd => ((b * seq + s) * heads + h) * dim,
        Layout::Bhsd => ((b * heads + h) * seq + s) * dim,
    };
    let at = |b: usize, h: usize, s: usize, seq: usize| at_dim(b, h, s, seq, dim);
    let at_v = |b: usize, h: usize, s: usize, seq: usize| at_dim(b, h, s, seq, dim_v);
    let (qv, kv, vv) = (q.to_f64(), k.to_f64(), v.to_f64());
    let c = Approx::literal(c, LOG2_E / (dim as f64).sqrt(), Fp::F32);
    let f32r = |a: Approx| a.round(Fp::F32);
    let mut out = vec![exact(0.0); batch * heads * seq_q * dim_v];
    let mut lse = Vec::new();
    for b in 0..batch {
        for h in 0..heads {
            for i in 0..seq_q {
                let keys = if causal {
                    (i + seq_kv - seq_q + 1).min(seq_kv)
                } else {
                    seq_kv
                };
                let qrow = &qv[at(b, h, i, seq_q)..][..dim];
                let dots: Vec<(f64, Approx)> = (0..keys)
                    .map(|j| {
                        let krow = &kv[at(b, h, j, seq_kv)..][..dim];
                        let products = qrow.iter().zip(krow).map(|(x, y)| x * y);
                        let model = Approx::sum(products.clone().map(exact), Fp::F32);
                        (products.sum::<f64>(), model)
                    })
                    .collect();
                // The reference: a plain softmax in f64.
                let scaled: Vec<f64> = dots.iter().map(|(s, _)| s / (dim as f64).sqrt()).collect();
                let top = scaled.iter().fold(f64::NEG_INFINITY, |m, &s| m.max(s));
                let w: Vec<f64> = scaled.iter().map(|s| (s - top).exp()).collect();
                let total: f64 = w.iter().sum();
                // The model, tile by tile.
                let tiles: Vec<Vec<(usize, Approx)>> = dots
                    .chunks(block_n)
                    .enumerate()
                    .map(|(t, tile)| {
                        let keys = tile.iter().enumerate();
                        keys.map(|(j, d)| (t * block_n + j, d.1)).collect()
                    })
                    .collect();
                let (acc, l, m) =
                    online_softmax(&tiles, |j, col| vv[at_v(b, h, j, seq_kv) + col], dim_v, c);
                let base = at_v(b, h, i, seq_q);
                for (col, slot) in acc.iter().enumerate() {
                    let want: f64 = (0..keys)
                        .map(|j| w[j] * vv[at_v(b, h, j, seq_kv) + col])
                        .sum::<f64>()
                        / total;
                    out[base + col] = expect(want, f32r(*slot / l).round(Fp::F16));
                }
                let want = (total.ln() + top) / std::f64::consts::LN_2;
                lse.push(expect(want, f32r(f32r(l.log2()) + f32r(m * c))));
            }
        }
    }
    match o.contains_key("lse") {
        true => vec![("Output", out), ("lse", lse)],
        false => vec![("Output", out)],
    }
}

/// One query row of the flash attention loop as the headers state it, over key tiles (per
/// tile, its keys the row sees: the index `v_at` takes and the score's model; masked keys
/// are left out, their P being exactly 0): m = the running max (a tile with no key keeps
/// it), P = exp2(S·c − m·c) in float32, alpha = exp2(m_old·c − m_new·c), l = l·alpha + Σ P,
/// O = O·alpha + float16(P) @ V (float32). Returns O, l and the last m. The first tile must
/// have a key: a wholly masked first tile is NaN in the kernels.
fn online_softmax(
    tiles: &[Vec<(usize, Approx)>],
    v_at: impl Fn(usize, usize) -> f64,
    dim: usize,
    c: Approx,
) -> (Vec<Approx>, Approx, Approx) {
    flash_softmax(tiles, v_at, dim, c, true)
}

/// [`online_softmax`], or with `running` false the block-sparse example's variant: m is the
/// current tile's max only (its `T.reduce_max(..., clear=False)` follows a fill), so alpha =
/// exp2(m_prev·c − m·c) may exceed 1 — the same softmax, other roundings.
fn flash_softmax(
    tiles: &[Vec<(usize, Approx)>],
    v_at: impl Fn(usize, usize) -> f64,
    dim: usize,
    c: Approx,
    running: bool,
) -> (Vec<Approx>, Approx, Approx) {
    let f32r = |a: Approx| a.round(Fp::F32);
    let (mut m, mut l) = (None::<Approx>, exact(0.0));
    let mut acc = vec![exact(0.0); dim];
    for tile in tiles {
        let tile_max = tile.iter().map(|d| d.1).reduce(Approx::max);
        let m_new = match (m, tile_max) {
            (None, None) => panic!("a first key tile with no key (NaN in the kernel)"),
            (None, Some(t)) | (Some(t), None) => t,
            (Some(_), Some(t)) if !running => t,
            (Some(m), Some(t)) => m.max(t),
        };
        let mc = f32r(m_new * c);
        let p: Vec<Approx> = tile
            .iter()
            .map(|d| f32r(f32r(f32r(d.1 * c) - mc).exp2()))
            .collect();
        let alpha = m.map(|m| f32r(f32r(f32r(m * c) - mc).exp2()));
        let sum = Approx::sum(p.iter().copied(), Fp::F32);
        l = match alpha {
            None => sum,
            Some(a) => f32r(f32r(l * a) + sum),
        };
        for (col, slot) in acc.iter_mut().enumerate() {
            let pv = tile
                .iter()
                .zip(&p)
                .map(|(&(j, _), &pj)| pj.round(Fp::F16) * exact(v_at(j, col)));
            *slot = match alpha {
                None => Approx::sum(pv, Fp::F32),
                Some(a) => Approx::sum(std::iter::once(f32r(*slot * a)).chain(pv), Fp::F32),
            };
        }
        m = Some(m_new);
    }
    (acc, l, m.expect("a key tile"))
}

/// `flash_decoding_gqa.tir`: per query head h (of 32, over KV head g = h / 4), Output[b, h, :]
/// = Σ_s P[s]·V[b, s, g, :] with P = softmax_s(Q[b, h, :] · K[b, s, g, :] / sqrt(128)) over the
/// keys s < 8·(seqlen_kv / 8) with mask[b, s, g] ≠ 0. Also checked: the split kernel's
/// results in its `T.alloc_global` tensors, which the combine kernel reads: per split k (keys
/// k·L ≤ s < (k + 1)·L, L = seqlen_kv / 8), Output_partial[b, h, k, :] (that split's softmax
/// of the same form) and glse[b, h, k] = log2 Σ_s exp2(S[s]·c), c = log2(e) / sqrt(128).
///
/// The model follows the header: per split, [`online_softmax`] over its tiles of 128 keys
/// (L at most 128 or a multiple of it, the original's assumption), scores summed in float32
/// (float16 products exact), c the float32 literal 0.1275174307460247;
/// Output_partial = float16(O / l), glse = float16(log2(l) + m·c). The combine (float32):
/// lse_max = max_k glse, lse = log2(Σ_k exp2(glse_k − lse_max)) + lse_max,
/// Output = float16(Σ_k Output_partial_k · exp2(glse_k − lse)).
fn flash_decoding_gqa(o: &Outputs) -> Expected {
    const SPLITS: usize = 8;
    const TILE: usize = 128;
    let (q, k, v, mask) = (&o["Q"], &o["K"], &o["V"], o["mask"].to_f64());
    let (batch, heads, dim) = (q.shape()[0], q.shape()[1], q.shape()[2]);
    let (seq, kv_heads) = (k.shape()[1], k.shape()[2]);
    let (group, split) = (heads / kv_heads, seq / SPLITS);
    assert!(
        seq % SPLITS == 0 && (split <= TILE || split % TILE == 0),
        "flash_decoding_gqa covers every key only for these seqlen_kv (its header)"
    );
    let (qv, kv, vv) = (q.to_f64(), k.to_f64(), v.to_f64());
    let row = |b: usize, s: usize, g: usize| ((b * seq + s) * kv_heads + g) * dim;
    let c = Approx::literal(0.1275174307460247, LOG2_E / (dim as f64).sqrt(), Fp::F32);
    let (mut out, mut partial, mut glse) = (Vec::new(), Vec::new(), Vec::new());
    for b in 0..batch {
        for h in 0..heads {
            let g = h / group;
            let qrow = &qv[(b * heads + h) * dim..][..dim];
            // (key, exact score, the score's model) for the keys the head sees.
            let seen: Vec<(usize, f64, Approx)> = (0..seq)
                .filter(|&s| mask[(b * seq + s) * kv_heads + g] != 0.0)
                .map(|s| {
                    let products = qrow
                        .iter()
                        .zip(&kv[row(b, s, g)..][..dim])
                        .map(|(x, y)| x * y);
                    let model = Approx::sum(products.clone().map(exact), Fp::F32);
                    (s, products.sum::<f64>(), model)
                })
                .collect();
            // The reference: softmaxes in f64, over all keys and over each split's.
            let softmax = |keys: &[(usize, f64, Approx)]| {
                let scaled: Vec<f64> = keys.iter().map(|d| d.1 / (dim as f64).sqrt()).collect();
                let top = scaled.iter().fold(f64::NEG_INFINITY, |m, &x| m.max(x));
                let w: Vec<f64> = scaled.iter().map(|x| (x - top).exp()).collect();
                let total: f64 = w.iter().sum();
                let lse = (top + total.ln()) * LOG2_E;
                let o: Vec<f64> = (0..dim)
                    .map(|col| {
                        let terms = keys
                            .iter()
                            .zip(&w)
                            .map(|(d, w)| w * vv[row(b, d.0, g) + col]);
                        terms.sum::<f64>() / total
                    })
                    .collect();
                (o, lse)
            };
            // The model: each split, then the combine.
            let (mut po, mut lses) = (Vec::new(), Vec::new());
            for sid in 0..SPLITS {
                let keys: Vec<(usize, f64, Approx)> = seen
                    .iter()
                    .filter(|d| d.0 / split == sid)
                    .copied()
                    .collect();
                let tiles: Vec<Vec<(usize, Approx)>> = (0..split.div_ceil(TILE))
                    .map(|t| {
                        let in_tile = keys.iter().filter(|d| (d.0 % split) / TILE == t);
                        in_tile.map(|d| (d.0, d.2)).collect()
                    })
                    .collect();
                let (acc, l, m) = online_softmax(&tiles, |s, col| vv[row(b, s, g) + col], dim, c);
                let (o_k, lse_k) = split_partial(&acc, l, m, c, softmax(&keys));
                lses.push(lse_k);
                po.push(o_k);
            }
            let (want, _) = softmax(&seen);
            out.extend(combine_splits(&po, &lses, &want));
            glse.extend(lses);
            partial.extend(po.into_iter().flatten());
        }
    }
    vec![("Output", out), ("glse", glse), ("Output_partial", partial)]
}

/// One split of a split-KV attention row as the flash-decoding kernels store it, from its
/// [`online_softmax`] (O, l, m) and its float64 reference (softmax, log2-sum-exp2):
/// partial = float16(float32(O / l)), lse = float16(float32(log2 l) + float32(m·c)).
fn split_partial(
    acc: &[Approx],
    l: Approx,
    m: Approx,
    c: Approx,
    (want_o, want_lse): (Vec<f64>, f64),
) -> (Vec<Approx>, Approx) {
    let f32r = |a: Approx| a.round(Fp::F32);
    let o: Vec<Approx> = acc
        .iter()
        .zip(&want_o)
        .map(|(&a, &w)| expect(w, f32r(a / l).round(Fp::F16)))
        .collect();
    let lse = f32r(f32r(l.log2()) + f32r(m * c)).round(Fp::F16);
    (o, expect(want_lse, lse))
}

/// The flash-decoding combine of a row's splits (float32, as the kernels write it): lse =
/// log2(Σ_k exp2(lse_k − max)) + max, scale_k = exp2(lse_k − lse), out = float16(Σ_k
/// partial_k · scale_k), each column against its float64 value in `want`.
fn combine_splits(po: &[Vec<Approx>], lses: &[Approx], want: &[f64]) -> Vec<Approx> {
    let f32r = |a: Approx| a.round(Fp::F32);
    let lse_max = lses.iter().copied().reduce(Approx::max).expect("a split");
    let terms = lses.iter().map(|&x| f32r(f32r(x - lse_max).exp2()));
    let lse = f32r(f32r(Approx::sum(terms, Fp::F32).log2()) + lse_max);
    let scales: Vec<Approx> = lses.iter().map(|&x| f32r(f32r(x - lse).exp2())).collect();
    want.iter()
        .enumerate()
        .map(|(col, &w)| {
            let terms = po.iter().zip(&scales).map(|(p, &s)| f32r(p[col] * s));
            expect(w, Approx::sum(terms, Fp::F32).round(Fp::F16))
        })
        .collect()
}

/// The sparse GQA decode kernels' split of `n` list positions over `splits`: split s takes
/// n / splits of them, the first n % splits splits one more, contiguously: (start, count).
fn split_ranges(n: usize, splits: usize) -> Vec<(usize, usize)> {
    let (per, rem) = (n / splits, n % splits);
    (0..splits)
        .map(|s| (per * s + s.min(rem), per + usize::from(s < rem)))
        .collect()
}

fn sparse_gqa_decode_indice(o: &Outputs) -> Expected {
    sparse_gqa_decode(o, true)
}

fn sparse_gqa_decode_mask(o: &Outputs) -> Expected {
    sparse_gqa_decode(o, false)
}

/// `sparse_gqa_decode_varlen_indice.tir` (`indices`) and `_mask.tir`: per query head h (of
/// 32, over KV head g = h / 4), Output[b, h, :] = softmax(Q[b, h, :] K^T / sqrt(128)) V over
/// the keys s < cache_seqlens[b] of the selected 32-key blocks of (b, g); glse[b, h, k] and
/// Output_partial[b, h, k, :] the same over split k's blocks (log2 Σ exp2(S·c) and that
/// split's softmax), 0 for a split without a block. Split k walks its share
/// ([`split_ranges`]) of the block list (indice: block_indices[b, g, pos], -1 skipped, keys
/// masked at the length in the split's first block only; mask: block pos where
/// block_mask[b, g, pos], every block masked). The model: per split, [`online_softmax`] over
/// its blocks in order (c the float32 literal 0.1275174307460247), Output_partial = float32(O
/// / l), glse = float32(float32(log2 l) + float32(m·c)); the combine (float32) over the
/// splits up to the last nonempty one: lse_max = max glse, lse = log2(Σ exp2(glse_k −
/// lse_max)) + lse_max, Output = float16(Σ Output_partial_k · exp2(glse_k − lse)).
fn sparse_gqa_decode(o: &Outputs, indices: bool) -> Expected {
    const BLOCK: usize = 32;
    let (q, k) = (&o["Q"], &o["K"]);
    let (batch, heads, dim) = (q.shape()[0], q.shape()[1], q.shape()[2]);
    let (seq, kv_heads) = (k.shape()[1], k.shape()[2]);
    let group = heads / kv_heads;
    let splits = o["glse"].shape()[2];
    let [qv, kv, vv] = ["Q", "K", "V"].map(|n| o[n].to_f64());
    let lens = o["cache_seqlens"].to_f64();
    let (list, list_len) = match indices {
        true => (o["block_indices"].to_f64(), o["block_indices"].shape()[2]),
        false => (o["block_mask"].to_f64(), o["block_mask"].shape()[2]),
    };
    let row = |b: usize, s: usize, g: usize| ((b * seq + s) * kv_heads + g) * dim;
    let c = Approx::literal(0.1275174307460247, LOG2_E / (dim as f64).sqrt(), Fp::F32);
    let f32r = |a: Approx| a.round(Fp::F32);
    let (mut out, mut partial, mut glse) = (Vec::new(), Vec::new(), Vec::new());
    for b in 0..batch {
        let len = lens[b] as usize;
        for h in 0..heads {
            let g = h / group;
            let qrow = &qv[(b * heads + h) * dim..][..dim];
            let score = |s: usize| {
                let products = qrow
                    .iter()
                    .zip(&kv[row(b, s, g)..][..dim])
                    .map(|(x, y)| x * y);
                let model = Approx::sum(products.clone().map(exact), Fp::F32);
                (s, products.sum::<f64>(), model)
            };
            // Per split, its blocks' tiles: (key, exact score, the score's model).
            let split_tiles: Vec<Vec<Vec<(usize, f64, Approx)>>> = split_ranges(list_len, splits)
                .into_iter()
                .map(|(start, count)| {
                    (0..count)
                        .filter_map(|kk| {
                            let at = (b * kv_heads + g) * list_len + start + kk;
                            let (block, masked) = match indices {
                                true if list[at] < 0.0 => return None,
                                true => (list[at] as usize, kk == 0),
                                false if list[at] == 0.0 => return None,
                                false => (start + kk, true),
                            };
                            let keys = (block * BLOCK..(block + 1) * BLOCK)
                                .filter(|&s| !masked || s < len);
                            Some(keys.map(score).collect())
                        })
                        .collect()
                })
                .collect();
            // The reference: softmaxes in f64.
            let softmax = |keys: &[&(usize, f64, Approx)]| {
                let scaled: Vec<f64> = keys.iter().map(|d| d.1 / (dim as f64).sqrt()).collect();
                let top = scaled.iter().fold(f64::NEG_INFINITY, |m, &x| m.max(x));
                let w: Vec<f64> = scaled.iter().map(|x| (x - top).exp()).collect();
                let total: f64 = w.iter().sum();
                let o: Vec<f64> = (0..dim)
                    .map(|col| {
                        let terms = keys
                            .iter()
                            .zip(&w)
                            .map(|(d, w)| w * vv[row(b, d.0, g) + col]);
                        terms.sum::<f64>() / total
                    })
                    .collect();
                (o, (top + total.ln()) * LOG2_E)
            };
            let (mut po, mut lses) = (Vec::new(), Vec::new());
            for tiles in &split_tiles {
                if tiles.is_empty() {
                    po.push(vec![exact(0.0); dim]);
                    lses.push(None);
                    continue;
                }
                let model_tiles: Vec<Vec<(usize, Approx)>> = tiles
                    .iter()
                    .map(|t| t.iter().map(|d| (d.0, d.2)).collect())
                    .collect();
                let v_at = |s: usize, col: usize| vv[row(b, s, g) + col];
                let (acc, l, m) = online_softmax(&model_tiles, v_at, dim, c);
                let keys: Vec<&(usize, f64, Approx)> = tiles.iter().flatten().collect();
                let (want_o, want_lse) = softmax(&keys);
                po.push(
                    acc.iter()
                        .zip(&want_o)
                        .map(|(&a, &w)| expect(w, f32r(a / l)))
                        .collect(),
                );
                lses.push(Some(expect(want_lse, f32r(f32r(l.log2()) + f32r(m * c)))));
            }
            let last = lses
                .iter()
                .rposition(Option::is_some)
                .expect("a nonempty split");
            assert!(
                lses[..last].iter().all(Option::is_some),
                "an empty split before the last nonempty one (the header's quirk)"
            );
            let used: Vec<Approx> = lses[..=last].iter().map(|x| x.expect("nonempty")).collect();
            let lse_max = used.iter().copied().reduce(Approx::max).expect("a split");
            let terms = used.iter().map(|&x| f32r(f32r(x - lse_max).exp2()));
            let lse = f32r(f32r(Approx::sum(terms, Fp::F32).log2()) + lse_max);
            let scales: Vec<Approx> = used.iter().map(|&x| f32r(f32r(x - lse).exp2())).collect();
            // Every selected block's keys below the length, whatever split holds it.
            let selected = (0..list_len).filter_map(|pos| {
                let x = list[(b * kv_heads + g) * list_len + pos];
                match indices {
                    true => (x >= 0.0).then_some(x as usize),
                    false => (x != 0.0).then_some(pos),
                }
            });
            let every: Vec<(usize, f64, Approx)> = selected
                .flat_map(|i| (i * BLOCK..(i + 1) * BLOCK).filter(|&s| s < len))
                .map(score)
                .collect();
            let (want, _) = softmax(&every.iter().collect::<Vec<_>>());
            for (col, w) in want.into_iter().enumerate() {
                let terms = po.iter().zip(&scales).map(|(p, &s)| f32r(p[col] * s));
                out.push(expect(w, Approx::sum(terms, Fp::F32).round(Fp::F16)));
            }
            glse.extend(lses.into_iter().map(|x| x.unwrap_or(exact(0.0))));
            partial.extend(po.into_iter().flatten());
        }
    }
    vec![("Output", out), ("glse", glse), ("Output_partial", partial)]
}

/// `flash_decoding_mha_inference.tir`: Output[b, q, h, :] = softmax_k(Q[b, q, h, :] ·
/// K[b, k, h, :] / sqrt(128)) V[b, k, h, :] over every key (BSHD). Also checked: the split
/// kernel's `T.alloc_global` results, per split s (keys s·L ≤ k < (s + 1)·L, L = seqlen_kv /
/// 4): glse[b, h, s, q] = log2 Σ_k exp2(S·c) and Output_partial[b, q, h, s, :] (that
/// split's softmax). The model: per split, [`online_softmax`] over its 64-key tiles (c the
/// float32 literal 0.1275174307460247), Output_partial = float16(float32(O / l)), glse =
/// float16(log2(l) + m·c); the combine (float32): lse_max = max_s glse, lse = log2(Σ_s
/// exp2(glse_s − lse_max)) + lse_max, Output = float16(Σ_s Output_partial_s · exp2(glse_s −
/// lse)).
fn flash_decoding_mha(o: &Outputs) -> Expected {
    const SPLITS: usize = 4;
    const TILE: usize = 64;
    let (q, k) = (&o["Q"], &o["K"]);
    let (batch, seq_q, heads, dim) = (q.shape()[0], q.shape()[1], q.shape()[2], q.shape()[3]);
    let seq = k.shape()[1];
    let split = seq / SPLITS;
    assert!(
        split.is_multiple_of(TILE),
        "the splits' key tiles are unmasked: seqlen_kv a multiple of 256 (the header)"
    );
    let [qv, kv, vv] = ["Q", "K", "V"].map(|n| o[n].to_f64());
    let at = |b: usize, s: usize, h: usize, len: usize| ((b * len + s) * heads + h) * dim;
    let c = Approx::literal(0.1275174307460247, LOG2_E / (dim as f64).sqrt(), Fp::F32);
    let f32r = |a: Approx| a.round(Fp::F32);
    let mut out = vec![exact(0.0); batch * seq_q * heads * dim];
    let mut partial = vec![exact(0.0); batch * seq_q * heads * SPLITS * dim];
    let mut glse = vec![exact(0.0); batch * heads * SPLITS * seq_q];
    for b in 0..batch {
        for h in 0..heads {
            for i in 0..seq_q {
                let qrow = &qv[at(b, i, h, seq_q)..][..dim];
                let dots: Vec<(f64, Approx)> = (0..seq)
                    .map(|j| {
                        let products = qrow.iter().zip(&kv[at(b, j, h, seq)..][..dim]);
                        let products = products.map(|(x, y)| x * y);
                        let model = Approx::sum(products.clone().map(exact), Fp::F32);
                        (products.sum::<f64>(), model)
                    })
                    .collect();
                let v_at = |j: usize, col: usize| vv[at(b, j, h, seq) + col];
                // The reference: a softmax in f64 over keys `from..to`: (output, base-2 lse).
                let softmax = |from: usize, to: usize| {
                    let scaled: Vec<f64> = dots[from..to]
                        .iter()
                        .map(|d| d.0 / (dim as f64).sqrt())
                        .collect();
                    let top = scaled.iter().fold(f64::NEG_INFINITY, |m, &x| m.max(x));
                    let w: Vec<f64> = scaled.iter().map(|x| (x - top).exp()).collect();
                    let total: f64 = w.iter().sum();
                    let o: Vec<f64> = (0..dim)
                        .map(|col| {
                            let terms = w.iter().enumerate().map(|(j, w)| w * v_at(from + j, col));
                            terms.sum::<f64>() / total
                        })
                        .collect();
                    (o, (top + total.ln()) * LOG2_E)
                };
                let (mut po, mut lses) = (Vec::new(), Vec::new());
                for sid in 0..SPLITS {
                    let tiles: Vec<Vec<(usize, Approx)>> = (0..split / TILE)
                        .map(|t| {
                            let first = sid * split + t * TILE;
                            (first..first + TILE).map(|j| (j, dots[j].1)).collect()
                        })
                        .collect();
                    let (acc, l, m) = online_softmax(&tiles, v_at, dim, c);
                    let (want_o, want_lse) = softmax(sid * split, (sid + 1) * split);
                    let o_s: Vec<Approx> = acc
                        .iter()
                        .zip(&want_o)
                        .map(|(&a, &w)| expect(w, f32r(a / l).round(Fp::F16)))
                        .collect();
                    let lse_s = expect(want_lse, f32r(f32r(l.log2()) + f32r(m * c)).round(Fp::F16));
                    glse[((b * heads + h) * SPLITS + sid) * seq_q + i] = lse_s;
                    let base = (((b * seq_q + i) * heads + h) * SPLITS + sid) * dim;
                    partial[base..base + dim].copy_from_slice(&o_s);
                    lses.push(lse_s);
                    po.push(o_s);
                }
                let lse_max = lses.iter().copied().reduce(Approx::max).expect("4 splits");
                let terms = lses.iter().map(|&x| f32r(f32r(x - lse_max).exp2()));
                let lse = f32r(f32r(Approx::sum(terms, Fp::F32).log2()) + lse_max);
                let scales: Vec<Approx> =
                    lses.iter().map(|&x| f32r(f32r(x - lse).exp2())).collect();
                let (want, _) = softmax(0, seq);
                let base = at(b, i, h, seq_q);
                for (col, w) in want.into_iter().enumerate() {
                    let terms = po.iter().zip(&scales).map(|(p, &s)| f32r(p[col] * s));
                    out[base + col] = expect(w, Approx::sum(terms, Fp::F32).round(Fp::F16));
                }
            }
        }
    }
    vec![("Output", out), ("glse", glse), ("Output_partial", partial)]
}

/// `mla_decode.tir`: Output[b, h, :] = Σ_s P[s]·KV[b, s, 0, :] with P = softmax_s((Q[b, h, :] ·
/// KV[b, s, 0, :] + Q_pe[b, h, :] · K_pe[b, s, 0, :]) / sqrt(576)) over every key. The model
/// is [`online_softmax`]'s over 64-key tiles: each score the float32 sum of its 576 products
/// (the two gemms accumulate into one float32 fragment: one order among any), c the float32
/// literal 0.06011229333333333 for log2(e) / sqrt(576); Output = float16(O / l).
fn mla_decode(o: &Outputs) -> Expected {
    const TILE: usize = 64;
    let (q, kv) = (&o["Q"], &o["KV"]);
    let (batch, heads, dim) = (q.shape()[0], q.shape()[1], q.shape()[2]);
    let (seq, pe) = (kv.shape()[1], o["Q_pe"].shape()[2]);
    let (qv, qpe, kvv, kpe) = (
        q.to_f64(),
        o["Q_pe"].to_f64(),
        kv.to_f64(),
        o["K_pe"].to_f64(),
    );
    let width = (dim + pe) as f64;
    let c = Approx::literal(0.06011229333333333, LOG2_E / width.sqrt(), Fp::F32);
    let f32r = |a: Approx| a.round(Fp::F32);
    let mut out = Vec::new();
    for b in 0..batch {
        for h in 0..heads {
            let (qrow, perow) = (
                &qv[(b * heads + h) * dim..][..dim],
                &qpe[(b * heads + h) * pe..][..pe],
            );
            let dots: Vec<(f64, Approx)> = (0..seq)
                .map(|s| {
                    let content = qrow.iter().zip(&kvv[(b * seq + s) * dim..][..dim]);
                    let position = perow.iter().zip(&kpe[(b * seq + s) * pe..][..pe]);
                    let products: Vec<f64> = content.chain(position).map(|(x, y)| x * y).collect();
                    let model = Approx::sum(products.iter().map(|&x| exact(x)), Fp::F32);
                    (products.iter().sum::<f64>(), model)
                })
                .collect();
            let scaled: Vec<f64> = dots.iter().map(|d| d.0 / width.sqrt()).collect();
            let top = scaled.iter().fold(f64::NEG_INFINITY, |m, &x| m.max(x));
            let w: Vec<f64> = scaled.iter().map(|x| (x - top).exp()).collect();
            let total: f64 = w.iter().sum();
            let tiles: Vec<Vec<(usize, Approx)>> = dots
                .chunks(TILE)
                .enumerate()
                .map(|(t, tile)| {
                    tile.iter()
                        .enumerate()
                        .map(|(j, d)| (t * TILE + j, d.1))
                        .collect()
                })
                .collect();
            let v_at = |s: usize, col: usize| kvv[(b * seq + s) * dim + col];
            let (acc, l, _) = online_softmax(&tiles, v_at, dim, c);
            for (col, slot) in acc.iter().enumerate() {
                let want = (0..seq).map(|s| w[s] * v_at(s, col)).sum::<f64>() / total;
                out.push(expect(want, f32r(*slot / l).round(Fp::F16)));
            }
        }
    }
    vec![("Output", out)]
}

/// `attn_sink_mha_fwd_bhsd.tir`: causal attention (BHSD, keys k ≤ q + seq_kv − seq_q) with
/// one sink logit per head in the softmax's denominator: Output[b, h, q, :] = Σ_k w_k·V[k, :] /
/// (Σ_k w_k + exp(Sinks[h] − t)), w_k = exp(x_k − t), x_k = Q[q, :]·K[k, :] / sqrt(128), t any
/// shift. The model is [`online_softmax`]'s over 128-key tiles (c the float32 literal
/// 0.1275174307460247), then l += exp2(float16(sink·float16(1.44269504)) − m·c) (float32:
/// the product with the literal is a float16 multiply), Output = float16(O / l).
fn attention_sink(o: &Outputs) -> Expected {
    sink_attention(o, 128, 0.1275174307460247)
}

/// `attn_sink_mha_bwd_bhsd_fwd.tir`: [`attention_sink`]'s attention over 64-key tiles, and
/// its base-2 lse, log2(Σ_k 2^(x_k·log2 e) + 2^(sink·log2 e)), computed as
/// float32(float32(log2 l) + float32(m·c)), l with the sink's term.
fn attention_sink_lse(o: &Outputs) -> Expected {
    sink_attention(o, 64, 0.1275174307460247)
}

fn sink_attention(o: &Outputs, tile: usize, c: f64) -> Expected {
    let (q, k, v) = (&o["Q"], &o["K"], &o["V"]);
    let (batch, heads, seq_q, dim) = (q.shape()[0], q.shape()[1], q.shape()[2], q.shape()[3]);
    let seq_kv = k.shape()[2];
    let (qv, kv, vv, sinks) = (q.to_f64(), k.to_f64(), v.to_f64(), o["Sinks"].to_f64());
    let c = Approx::literal(c, LOG2_E / (dim as f64).sqrt(), Fp::F32);
    let log2e = Approx::literal(LOG2_E_WRITTEN, LOG2_E, Fp::F16);
    let f32r = |a: Approx| a.round(Fp::F32);
    let mut out = Vec::with_capacity(qv.len());
    let mut lse = Vec::new();
    for b in 0..batch {
        for (h, &sink) in sinks.iter().enumerate() {
            let row = |s: usize, seq: usize| ((b * heads + h) * seq + s) * dim;
            for i in 0..seq_q {
                let keys = (i + seq_kv - seq_q + 1).min(seq_kv);
                let qrow = &qv[row(i, seq_q)..][..dim];
                let dots: Vec<(f64, Approx)> = (0..keys)
                    .map(|j| {
                        let krow = &kv[row(j, seq_kv)..][..dim];
                        let products = qrow.iter().zip(krow).map(|(x, y)| x * y);
                        let model = Approx::sum(products.clone().map(exact), Fp::F32);
                        (products.sum::<f64>(), model)
                    })
                    .collect();
                // The reference: softmax in f64 with the sink in the denominator.
                let scaled: Vec<f64> = dots.iter().map(|d| d.0 / (dim as f64).sqrt()).collect();
                let top = scaled.iter().fold(sink, |m, &x| m.max(x));
                let w: Vec<f64> = scaled.iter().map(|x| (x - top).exp()).collect();
                let total = w.iter().sum::<f64>() + (sink - top).exp();
                // The model, tile by tile, then the sink's term.
                let tiles: Vec<Vec<(usize, Approx)>> = dots
                    .chunks(tile)
                    .enumerate()
                    .map(|(t, chunk)| {
                        let keys = chunk.iter().enumerate();
                        keys.map(|(j, d)| (t * tile + j, d.1)).collect()
                    })
                    .collect();
                let v_at = |j: usize, col: usize| vv[row(j, seq_kv) + col];
                let (acc, l, m) = online_softmax(&tiles, v_at, dim, c);
                let sink_term = (exact(sink) * log2e).round(Fp::F16);
                let l = f32r(l + f32r(f32r(sink_term - f32r(m * c)).exp2()));
                for (col, slot) in acc.iter().enumerate() {
                    let want = (0..keys).map(|j| w[j] * v_at(j, col)).sum::<f64>() / total;
                    out.push(expect(want, f32r(*slot / l).round(Fp::F16)));
                }
                let want = (total.ln() + top) / std::f64::consts::LN_2;
                lse.push(expect(want, f32r(f32r(l.log2()) + f32r(m * c))));
            }
        }
    }
    match o.contains_key("lse") {
        true => vec![("Output", out), ("lse", lse)],
        false => vec![("Output", out)],
    }
}

/// `attn_sink_mha_bwd_bhsd_dsink.tir`: dsinks[b, h, q] = −P_sink·Delta[b, h, q], P_sink =
/// exp2(Sinks[h]·log2 e − lse[b, h, q]) (lse as given). The model:
/// −float32(float32(exp2(float32(float16(sink·float16(1.44269504)) − lse))) · Delta) (the
/// sink a float16 scalar: its product with the literal a float16 multiply).
fn attention_sink_dsink(o: &Outputs) -> Expected {
    let (sinks, lse, delta) = (o["Sinks"].to_f64(), o["lse"].to_f64(), o["Delta"].to_f64());
    let s = o["dsinks"].shape();
    let (heads, seq) = (s[1], s[2]);
    let log2e = Approx::literal(LOG2_E_WRITTEN, LOG2_E, Fp::F16);
    let f32r = |a: Approx| a.round(Fp::F32);
    let out = (0..lse.len())
        .map(|i| {
            let sink = sinks[i / seq % heads];
            let want = -(sink * LOG2_E - lse[i]).exp2() * delta[i];
            let term = (exact(sink) * log2e).round(Fp::F16);
            let p = f32r(f32r(term - exact(lse[i])).exp2());
            expect(want, exact(0.0) - f32r(p * exact(delta[i])))
        })
        .collect();
    vec![("dsinks", out)]
}

/// `grouped_gemm_fwd.tir`: the groups (5, 9, 13) of A's 27 rows, each times its own B:
/// C[r, :] = float16(A[r, :] @ B[g, :, :]) for row r of group g (float16 products exact in
/// float32, summed in any order).
fn grouped_gemm(o: &Outputs) -> Expected {
    const GROUPS: [usize; 3] = [5, 9, 13];
    let (a, b) = (&o["A"], &o["B"]);
    let (k, n) = (a.shape()[1], b.shape()[2]);
    let (av, bv) = (a.to_f64(), b.to_f64());
    let group_of = |r: usize| {
        let mut end = 0;
        GROUPS.iter().position(|&s| {
            end += s;
            r < end
        })
    };
    let mut c = Vec::with_capacity(27 * n);
    for r in 0..GROUPS.iter().sum() {
        let g = group_of(r).expect("a group");
        for j in 0..n {
            let products = (0..k).map(|l| av[r * k + l] * bv[(g * k + l) * n + j]);
            let model = Approx::sum(products.clone().map(exact), Fp::F32).round(Fp::F16);
            c.push(expect(products.sum(), model));
        }
    }
    vec![("C", c)]
}

/// `block_causal_attn_fwd.tir` (dllm blocks of 16): the sequence's halves, noisy then clean,
/// positions local to their half in blocks of 16 (qb, kb); query q sees key k when both are
/// noisy and qb = kb, q noisy and k clean and qb > kb, or both clean and qb ≥ kb.
/// Output[b, q, h, :] = softmax over those keys of (Q·K · 0.125) applied to V;
/// LSE[b, h, q] = log2 Σ_k exp2(Q·K · 0.125 · log2 e).
///
/// The model is [`online_softmax`]'s over the 64-key tiles in the kernel's order (a noisy
/// query tile bx: clean key tiles 0..=bx, then its own noisy tile; a clean one c: clean key
/// tiles 0..=c), c the float32 literal 0.18033688011112042. Tiles where the row sees no key
/// before its first seen key are left out: there m is near -1e6 and the next tile's alpha,
/// exp2(about -1.8e5), is exactly 0, which zeroes what they summed (the header). Output =
/// float16(O / (l + 1e-30)), LSE = log2(l + 1e-30) + m·c (float32).
fn block_causal_attention(o: &Outputs) -> Expected {
    const TILE: usize = 64;
    const DLLM: usize = 16;
    let (q, k, v) = (&o["Q"], &o["K"], &o["V"]);
    let (batch, seq, heads, dim) = (q.shape()[0], q.shape()[1], q.shape()[2], q.shape()[3]);
    let half = seq / 2;
    assert_eq!(
        half % TILE,
        0,
        "block_causal_attn_fwd: seq_len a multiple of 128"
    );
    let (qv, kv, vv) = (q.to_f64(), k.to_f64(), v.to_f64());
    let row = |b: usize, s: usize, h: usize| ((b * seq + s) * heads + h) * dim;
    let sees = |q: usize, k: usize| {
        let (qc, kc) = (q >= half, k >= half);
        let (qb, kb) = ((q % half) / DLLM, (k % half) / DLLM);
        match (qc, kc) {
            (false, false) => qb == kb,
            (false, true) => qb > kb,
            (true, true) => qb >= kb,
            (true, false) => false,
        }
    };
    let scale = 0.125;
    let c = Approx::literal(0.18033688011112042, LOG2_E * scale, Fp::F32);
    let tiny = Approx::literal(1e-30, 0.0, Fp::F32);
    let f32r = |a: Approx| a.round(Fp::F32);
    let mut out = vec![exact(0.0); qv.len()];
    let mut lse = vec![exact(0.0); batch * heads * seq];
    for b in 0..batch {
        for h in 0..heads {
            for i in 0..seq {
                let bx = i / TILE;
                // The key tiles in the kernel's order.
                let key_tiles: Vec<usize> = match i < half {
                    true => (0..=bx).map(|s| half / TILE + s).chain([bx]).collect(),
                    false => (0..=bx - half / TILE).map(|s| half / TILE + s).collect(),
                };
                let qrow = &qv[row(b, i, h)..][..dim];
                let dot = |j: usize| {
                    let products = qrow
                        .iter()
                        .zip(&kv[row(b, j, h)..][..dim])
                        .map(|(x, y)| x * y);
                    let model = Approx::sum(products.clone().map(exact), Fp::F32);
                    (products.sum::<f64>(), model)
                };
                let mut tiles: Vec<Vec<(usize, Approx)>> = key_tiles
                    .iter()
                    .map(|&t| {
                        let keys = (t * TILE..(t + 1) * TILE).filter(|&j| sees(i, j));
                        keys.map(|j| (j, dot(j).1)).collect()
                    })
                    .collect();
                let first = tiles.iter().position(|t| !t.is_empty()).expect("a key");
                tiles.drain(..first);
                let seen: Vec<usize> = tiles.iter().flatten().map(|d| d.0).collect();
                // The reference: a plain softmax in f64.
                let scaled: Vec<f64> = seen.iter().map(|&j| dot(j).0 * scale).collect();
                let top = scaled.iter().fold(f64::NEG_INFINITY, |m, &x| m.max(x));
                let w: Vec<f64> = scaled.iter().map(|x| (x - top).exp()).collect();
                let total: f64 = w.iter().sum();
                let v_at = |j: usize, col: usize| vv[row(b, j, h) + col];
                let (acc, l, m) = online_softmax(&tiles, v_at, dim, c);
                let l_eps = f32r(l + tiny);
                for (col, slot) in acc.iter().enumerate() {
                    let want = seen
                        .iter()
                        .zip(&w)
                        .map(|(&j, w)| w * v_at(j, col))
                        .sum::<f64>()
                        / total;
                    out[row(b, i, h) + col] = expect(want, f32r(*slot / l_eps).round(Fp::F16));
                }
                let want_lse = (top + total.ln()) * LOG2_E;
                let model = f32r(f32r(l_eps.log2()) + f32r(m * c));
                lse[(b * heads + h) * seq + i] = expect(want_lse, model);
            }
        }
    }
    vec![("Output", out), ("LSE", lse)]
}

/// `nsa_fwd.tir` (one selected block of 32 keys, 16 query heads per KV head): for token t
/// and KV head g, the block i_s = 32·BlockIndices[b, t, g, 0] (within 0..=t):
/// Output[b, t, 16g + r, :] = softmax over the keys i_s ≤ k ≤ t of (0.1·Q·K) applied to V.
/// The model is [`online_softmax`]'s over that one tile, c the float32 literal 0.144269504
/// standing for 0.1·log2 e; Output = float16(O / l).
fn nsa_fwd(o: &Outputs) -> Expected {
    const BS: usize = 32;
    const G: usize = 16;
    let (q, k, v) = (&o["Q"], &o["K"], &o["V"]);
    let (batch, seq, heads, dim) = (q.shape()[0], q.shape()[1], q.shape()[2], q.shape()[3]);
    let kv_heads = heads / G;
    let (qv, kv, vv, bi) = (
        q.to_f64(),
        k.to_f64(),
        v.to_f64(),
        o["BlockIndices"].to_f64(),
    );
    let c = Approx::literal(0.144269504, 0.1 * LOG2_E, Fp::F32);
    let f32r = |a: Approx| a.round(Fp::F32);
    let mut out = Vec::with_capacity(qv.len());
    for b in 0..batch {
        for t in 0..seq {
            for h in 0..heads {
                let g = h / G;
                let start = bi[(b * seq + t) * kv_heads + g] as usize * BS;
                assert!(start <= t, "nsa_fwd: a skipped block is NaN (the header)");
                let kv_row = |s: usize| ((b * seq + s) * kv_heads + g) * dim;
                let qrow = &qv[((b * seq + t) * heads + h) * dim..][..dim];
                let keys: Vec<usize> = (start..(start + BS).min(t + 1)).collect();
                let dots: Vec<(f64, Approx)> = keys
                    .iter()
                    .map(|&s| {
                        let products = qrow.iter().zip(&kv[kv_row(s)..][..dim]).map(|(x, y)| x * y);
                        let model = Approx::sum(products.clone().map(exact), Fp::F32);
                        (products.sum::<f64>(), model)
                    })
                    .collect();
                let scaled: Vec<f64> = dots.iter().map(|d| 0.1 * d.0).collect();
                let top = scaled.iter().fold(f64::NEG_INFINITY, |m, &x| m.max(x));
                let w: Vec<f64> = scaled.iter().map(|x| (x - top).exp()).collect();
                let total: f64 = w.iter().sum();
                let tile: Vec<(usize, Approx)> =
                    keys.iter().zip(&dots).map(|(&s, d)| (s, d.1)).collect();
                let v_at = |s: usize, col: usize| vv[kv_row(s) + col];
                let (acc, l, _) = online_softmax(&[tile], v_at, dim, c);
                for (col, slot) in acc.iter().enumerate() {
                    let want = keys
                        .iter()
                        .zip(&w)
                        .map(|(&s, w)| w * v_at(s, col))
                        .sum::<f64>()
                        / total;
                    out.push(expect(want, f32r(*slot / l).round(Fp::F16)));
                }
            }
        }
    }
    vec![("Output", out)]
}

/// `nsa_decode.tir`: per batch b and query head h (KV head g = h / 16), the one query
/// token attends to the 32 keys of its selected block (start BlockIndices[b, 0, g, 0] · 32,
/// no causal mask): Output = softmax(Q K^T / 4) V over them. The model: [`online_softmax`]
/// over that one tile, c the float32 literal 0.36067376 for log2(e) / 4; Output =
/// float16(O / l).
fn nsa_decode(o: &Outputs) -> Expected {
    const BS: usize = 32;
    const G: usize = 16;
    let (q, k) = (&o["Q"], &o["K"]);
    let (batch, heads, dim) = (q.shape()[0], q.shape()[2], q.shape()[3]);
    let seq = k.shape()[1];
    let kv_heads = heads / G;
    let (qv, kv, vv, bi) = (
        q.to_f64(),
        k.to_f64(),
        o["V"].to_f64(),
        o["BlockIndices"].to_f64(),
    );
    let c = Approx::literal(0.36067376, 0.25 * LOG2_E, Fp::F32);
    let mut out = Vec::with_capacity(qv.len());
    for b in 0..batch {
        for h in 0..heads {
            let g = h / G;
            let start = bi[b * kv_heads + g] as usize * BS;
            assert!(
                start + BS <= seq,
                "nsa_decode: a block past the keys (the header)"
            );
            let kv_row = |s: usize| ((b * seq + s) * kv_heads + g) * dim;
            let qrow = &qv[(b * heads + h) * dim..][..dim];
            let keys: Vec<usize> = (start..start + BS).collect();
            let dots: Vec<(f64, Approx)> = keys
                .iter()
                .map(|&s| {
                    let products = qrow.iter().zip(&kv[kv_row(s)..][..dim]).map(|(x, y)| x * y);
                    let model = Approx::sum(products.clone().map(exact), Fp::F32);
                    (products.sum::<f64>(), model)
                })
                .collect();
            let scaled: Vec<f64> = dots.iter().map(|d| 0.25 * d.0).collect();
            let top = scaled.iter().fold(f64::NEG_INFINITY, |m, &x| m.max(x));
            let w: Vec<f64> = scaled.iter().map(|x| (x - top).exp()).collect();
            let total: f64 = w.iter().sum();
            let tile: Vec<(usize, Approx)> =
                keys.iter().zip(&dots).map(|(&s, d)| (s, d.1)).collect();
            let v_at = |s: usize, col: usize| vv[kv_row(s) + col];
            let (acc, l, _) = online_softmax(&[tile], v_at, dim, c);
            for (col, slot) in acc.iter().enumerate() {
                let want = keys
                    .iter()
                    .zip(&w)
                    .map(|(&s, w)| w * v_at(s, col))
                    .sum::<f64>()
                    / total;
                out.push(expect(want, (*slot / l).round(Fp::F32).round(Fp::F16)));
            }
        }
    }
    vec![("Output", out)]
}

/// The SwiGLU step of the MoE kernels (`fusedmoe_shared.tir`, `fusedmoe_routed.tir`) for one
/// row `x` (dhidden) and one expert's gate and up weights (dexpert rows of dhidden):
/// float16(u·g'), g = x·W_gate[j], u = x·W_up[j] (float16 products exact in float32,
/// summed in any order), g' = g·(1 / (1 + exp2(−g·1.44269504))) in float32 (the float32
/// literal standing for log2 e). Returns the exact values and their models.
fn swiglu_row(x: &[f64], gate: &[f64], up: &[f64], dhidden: usize) -> Vec<(f64, Approx)> {
    let f32r = |a: Approx| a.round(Fp::F32);
    let log2e = Approx::literal(LOG2_E_WRITTEN, LOG2_E, Fp::F32);
    let dot = |w: &[f64]| {
        let products = x.iter().zip(w).map(|(a, b)| a * b);
        let model = Approx::sum(products.clone().map(exact), Fp::F32);
        (products.sum::<f64>(), model)
    };
    gate.chunks(dhidden)
        .zip(up.chunks(dhidden))
        .map(|(wg, wu)| {
            let ((g, gm), (u, um)) = (dot(wg), dot(wu));
            let want = u * g / (1.0 + (-g).exp());
            let e = f32r(f32r(exact(0.0) - gm * log2e).exp2());
            let silu = f32r(gm * f32r(exact(1.0) / f32r(exact(1.0) + e)));
            (want, f32r(um * silu).round(Fp::F16))
        })
        .collect()
}

/// `fusedmoe_shared.tir`: up_logits = float16(SwiGLU(input)) ([`swiglu_row`]), output =
/// float16(up_logits @ W_down^T) (float32 sums in any order; up_logits as its model).
fn fusedmoe_shared(o: &Outputs) -> Expected {
    let x = &o["input"];
    let (tokens, dhidden) = (x.shape()[0], x.shape()[1]);
    let dexpert = o["shared_W_gate"].shape()[0];
    let (xv, wg, wu, wd) = (
        x.to_f64(),
        o["shared_W_gate"].to_f64(),
        o["shared_W_up"].to_f64(),
        o["shared_W_down"].to_f64(),
    );
    let (mut up, mut out) = (Vec::new(), Vec::new());
    for t in 0..tokens {
        let row = swiglu_row(&xv[t * dhidden..][..dhidden], &wg, &wu, dhidden);
        for wrow in wd.chunks(dexpert) {
            let want = row.iter().zip(wrow).map(|(u, w)| u.0 * w).sum::<f64>();
            let terms = row.iter().zip(wrow).map(|(u, &w)| u.1 * exact(w));
            out.push(expect(want, Approx::sum(terms, Fp::F32).round(Fp::F16)));
        }
        up.extend(row.into_iter().map(|(want, model)| expect(want, model)));
    }
    vec![("up_logits", up), ("output", out)]
}

/// `fusedmoe_routed.tir`: for row r of expert e (its rows given by group_sizes and
/// group_offsets), up_logits[r] = float16(SwiGLU(input[r])) with expert e's weights
/// ([`swiglu_row`]), output[r] = float16(float32(up_logits[r] @ W_down[e]^T) ·
/// weights[r]) (float32 sums in any order, the product in float32).
fn fusedmoe_routed(o: &Outputs) -> Expected {
    let x = &o["input"];
    let (rows, dhidden) = (x.shape()[0], x.shape()[1]);
    let dexpert = o["routed_expert_gate"].shape()[1];
    let (xv, wg, wu, wd, weights) = (
        x.to_f64(),
        o["routed_expert_gate"].to_f64(),
        o["routed_expert_up"].to_f64(),
        o["routed_expert_down"].to_f64(),
        o["routed_expert_weights"].to_f64(),
    );
    let (sizes, offsets) = (o["group_sizes"].to_f64(), o["group_offsets"].to_f64());
    let (mut up, mut out) = (
        vec![exact(0.0); rows * dexpert],
        vec![exact(0.0); rows * dhidden],
    );
    let mut covered = 0;
    for (e, (&size, &offset)) in sizes.iter().zip(&offsets).enumerate() {
        let (size, offset) = (size as usize, offset as usize);
        let size_e = dexpert * dhidden;
        fn part(w: &[f64], at: usize, len: usize) -> &[f64] {
            &w[at..][..len]
        }
        let expert = |w| part(w, e * size_e, size_e);
        for r in offset..offset + size {
            let row = swiglu_row(
                &xv[r * dhidden..][..dhidden],
                expert(&wg),
                expert(&wu),
                dhidden,
            );
            for (j, wrow) in expert(&wd).chunks(dexpert).enumerate() {
                let want = row.iter().zip(wrow).map(|(u, w)| u.0 * w).sum::<f64>() * weights[r];
                let terms = row.iter().zip(wrow).map(|(u, &w)| u.1 * exact(w));
                let model = (Approx::sum(terms, Fp::F32) * exact(weights[r])).round(Fp::F32);
                out[r * dhidden + j] = expect(want, model.round(Fp::F16));
            }
            for (j, (want, model)) in row.into_iter().enumerate() {
                up[r * dexpert + j] = expect(want, model);
            }
            covered += 1;
        }
    }
    assert_eq!(covered, rows, "fusedmoe_routed: the groups cover every row");
    vec![("up_logits", up), ("output", out)]
}

/// `mla_decode_paged.tir`: [`mla_decode`]'s attention over a paged cache: sequence b's key s
/// (s < cache_seqlens[b]) is row block_table[b, s / 64]·64 + s % 64 of KV and K_pe. The model
/// is [`online_softmax`]'s over the 64-key tiles in the kernel's order, the last (ragged,
/// masked) tile first; c the float32 literal 0.06011229333333333.
fn mla_decode_paged(o: &Outputs) -> Expected {
    const TILE: usize = 64;
    let (q, kv) = (&o["Q"], &o["KV"]);
    let (batch, heads, dim) = (q.shape()[0], q.shape()[1], q.shape()[2]);
    let pe = o["Q_pe"].shape()[2];
    let (qv, qpe, kvv, kpe) = (
        q.to_f64(),
        o["Q_pe"].to_f64(),
        kv.to_f64(),
        o["K_pe"].to_f64(),
    );
    let (table, lens) = (o["block_table"].to_f64(), o["cache_seqlens"].to_f64());
    let pages = o["block_table"].shape()[1];
    let width = (dim + pe) as f64;
    let c = Approx::literal(0.06011229333333333, LOG2_E / width.sqrt(), Fp::F32);
    let f32r = |a: Approx| a.round(Fp::F32);
    let mut out = Vec::new();
    for b in 0..batch {
        let len = lens[b] as usize;
        let row = |s: usize| table[b * pages + s / TILE] as usize * TILE + s % TILE;
        for h in 0..heads {
            let (qrow, perow) = (
                &qv[(b * heads + h) * dim..][..dim],
                &qpe[(b * heads + h) * pe..][..pe],
            );
            let dots: Vec<(f64, Approx)> = (0..len)
                .map(|s| {
                    let content = qrow.iter().zip(&kvv[row(s) * dim..][..dim]);
                    let position = perow.iter().zip(&kpe[row(s) * pe..][..pe]);
                    let products: Vec<f64> = content.chain(position).map(|(x, y)| x * y).collect();
                    let model = Approx::sum(products.iter().map(|&x| exact(x)), Fp::F32);
                    (products.iter().sum::<f64>(), model)
                })
                .collect();
            let scaled: Vec<f64> = dots.iter().map(|d| d.0 / width.sqrt()).collect();
            let top = scaled.iter().fold(f64::NEG_INFINITY, |m, &x| m.max(x));
            let w: Vec<f64> = scaled.iter().map(|x| (x - top).exp()).collect();
            let total: f64 = w.iter().sum();
            let tiles: Vec<Vec<(usize, Approx)>> = dots
                .chunks(TILE)
                .enumerate()
                .rev()
                .map(|(t, tile)| {
                    tile.iter()
                        .enumerate()
                        .map(|(j, d)| (t * TILE + j, d.1))
                        .collect()
                })
                .collect();
            let v_at = |s: usize, col: usize| kvv[row(s) * dim + col];
            let (acc, l, _) = online_softmax(&tiles, v_at, dim, c);
            for (col, slot) in acc.iter().enumerate() {
                let want = (0..len).map(|s| w[s] * v_at(s, col)).sum::<f64>() / total;
                out.push(expect(want, f32r(*slot / l).round(Fp::F16)));
            }
        }
    }
    vec![("Output", out)]
}

/// `flash_attn_bwd_preprocess.tir` (BSHD) and its BHSD and GQA (head dim 128) siblings:
/// Delta[b, h, q] = Σ_d O[b, q, h, d]·dO[b, q, h, d]. Each product is a float16 multiply
/// (two float16 operands: rounded to float16), the products of a row summed in float32 in
/// any order (one per 32-wide column block per accumulator element, then the row reduction).
fn flash_bwd_preprocess(o: &Outputs) -> Expected {
    bwd_preprocess(o, Layout::Bshd)
}

fn flash_bwd_preprocess_bhsd(o: &Outputs) -> Expected {
    bwd_preprocess(o, Layout::Bhsd)
}

fn bwd_preprocess(o: &Outputs, layout: Layout) -> Expected {
    let (out, grad) = (&o["O"], o["dO"].to_f64());
    let s = out.shape();
    let (batch, seq, heads, dim) = match layout {
        Layout::Bshd => (s[0], s[1], s[2], s[3]),
        Layout::Bhsd => (s[0], s[2], s[1], s[3]),
    };
    let ov = out.to_f64();
    let mut delta = Vec::with_capacity(batch * heads * seq);
    for b in 0..batch {
        for h in 0..heads {
            for t in 0..seq {
                let base = bwd_at(layout, b, t, h, seq, heads, dim);
                let products = (base..base + dim).map(|i| ov[i] * grad[i]);
                let rounded = products.clone().map(|p| exact(p).round(Fp::F16));
                delta.push(expect(products.sum(), Approx::sum(rounded, Fp::F32)));
            }
        }
    }
    vec![("Delta", delta)]
}

/// `flash_attn_fwd_varlen_causal.tir`: per sequence b (queries cu_seqlens_q[b] ..,
/// keys cu_seqlens_k[b] .., lengths lq, lk, offset = lk − lq) and head h, query row r sees
/// keys c <= r + offset: Output = softmax(Q K^T / 8) V over them, 0 for a row that sees
/// none. The model is [`online_softmax`] over 64-key tiles of the visible keys (a masked
/// key's P underflows to exactly 0, a tile without a visible key changes nothing), c the
/// float32 literal 0.18033688 for log2(e) / 8; Output = float16(O / l).
fn varlen_attention(o: &Outputs) -> Expected {
    varlen_attention_tiled(o, 64)
}

/// `flash_attn_gqa_fwd_varlen.tir`: [`varlen_attention`] with 128-key tiles, query head h
/// reading KV head h / (heads / kv_heads).
fn gqa_varlen_attention(o: &Outputs) -> Expected {
    varlen_attention_tiled(o, 128)
}

/// [`varlen_attention`]'s math and model over key tiles of `tile` rows; the KV heads are
/// K_unpad's (query head h reads KV head h / (heads / kv_heads)).
fn varlen_attention_tiled(o: &Outputs, tile: usize) -> Expected {
    let q = &o["Q_unpad"];
    let (heads, dim) = (q.shape()[1], q.shape()[2]);
    let kv_heads = o["K_unpad"].shape()[1];
    let group = heads / kv_heads;
    let [qv, kv, vv] = ["Q_unpad", "K_unpad", "V_unpad"].map(|n| o[n].to_f64());
    let offsets = |n: &str| -> Vec<usize> { o[n].to_f64().iter().map(|&x| x as usize).collect() };
    let (cq, ck) = (offsets("cu_seqlens_q"), offsets("cu_seqlens_k"));
    let at = |row: usize, h: usize| (row * heads + h) * dim;
    let kv_at = |row: usize, h: usize| (row * kv_heads + h / group) * dim;
    let c = Approx::literal(0.18033688, LOG2_E / (dim as f64).sqrt(), Fp::F32);
    let mut out = vec![exact(0.0); qv.len()];
    for b in 0..cq.len() - 1 {
        let (qs, ks) = (cq[b], ck[b]);
        let (lq, lk) = (cq[b + 1] - qs, ck[b + 1] - ks);
        for h in 0..heads {
            for r in 0..lq {
                let seen = (r + lk)
                    .checked_sub(lq)
                    .map_or(0, |last| (last + 1).min(lk));
                let qrow = &qv[at(qs + r, h)..][..dim];
                let dots: Vec<(usize, f64, Approx)> = (0..seen)
                    .map(|j| {
                        let products: Vec<f64> = qrow
                            .iter()
                            .zip(&kv[kv_at(ks + j, h)..][..dim])
                            .map(|(x, y)| x * y)
                            .collect();
                        let model = Approx::sum(products.iter().map(|&p| exact(p)), Fp::F32);
                        (j, products.iter().sum::<f64>(), model)
                    })
                    .collect();
                if dots.is_empty() {
                    continue;
                }
                let scaled: Vec<f64> = dots.iter().map(|d| d.1 / (dim as f64).sqrt()).collect();
                let top = scaled.iter().fold(f64::NEG_INFINITY, |m, &x| m.max(x));
                let w: Vec<f64> = scaled.iter().map(|x| (x - top).exp()).collect();
                let total: f64 = w.iter().sum();
                let tiles: Vec<Vec<(usize, Approx)>> = dots
                    .chunks(tile)
                    .map(|t| t.iter().map(|d| (d.0, d.2)).collect())
                    .collect();
                let v_at = |j: usize, col: usize| vv[kv_at(ks + j, h) + col];
                let (acc, l, _) = online_softmax(&tiles, v_at, dim, c);
                for (col, slot) in acc.iter().enumerate() {
                    let want = dots
                        .iter()
                        .zip(&w)
                        .map(|(d, w)| w * v_at(d.0, col))
                        .sum::<f64>()
                        / total;
                    out[at(qs + r, h) + col] =
                        expect(want, (*slot / l).round(Fp::F32).round(Fp::F16));
                }
            }
        }
    }
    vec![("Output_unpad", out)]
}

/// `dequant_gemm_fp4_hopper.tir`: Ct[j, i] = float16(Σ_l W[j, l] · A[i, l]) where W[j, l] is
/// the fp4 (e2m1) nibble l % 2 of B[j, l / 2] decoded as the header's float16 bits: sign s,
/// exponent ((f & 6) >> 1) + 14, mantissa bit f & 1 — (−1)^s · 2^(e − 15) · (1 + m / 2),
/// exact in float16, so every product is exact in float32; the sum is float32 in any order.
fn dequant_gemm_fp4(o: &Outputs) -> Expected {
    let (a, b) = (&o["A"], &o["B"]);
    let (m, k, n) = (a.shape()[0], a.shape()[1], b.shape()[0]);
    let (av, bv) = (a.to_f64(), b.to_f64());
    let w = |j: usize, l: usize| {
        let f = ((bv[j * (k / 2) + l / 2] as i64) >> (4 * (l % 2))) & 15;
        let (s, e, mant) = (f >> 3, ((f & 6) >> 1) + 14, f & 1);
        let v = 2f64.powi(e as i32 - 15) * (1.0 + mant as f64 / 2.0);
        if s == 1 {
            -v
        } else {
            v
        }
    };
    let mut c = Vec::with_capacity(m * n);
    for j in 0..n {
        for i in 0..m {
            let products: Vec<f64> = (0..k).map(|l| w(j, l) * av[i * k + l]).collect();
            let model = Approx::sum(products.iter().map(|&p| exact(p)), Fp::F32).round(Fp::F16);
            c.push(expect(products.iter().sum(), model));
        }
    }
    vec![("Ct", c)]
}

/// `blocksparse_attn_fwd.tir`: causal attention over the keys k <= q whose 64 x 64 block
/// BlockSparseMask[b, h, q / 64, k / 64] is set (BHSD, head dim 64). The model: per query
/// row, the key tiles its block's mask keeps, in order, through [`flash_softmax`] without a
/// running max (the original's), c the float32 literal 0.18033688 for log2(e) / 8.
fn blocksparse_attention(o: &Outputs) -> Expected {
    block_sparse_attention(o, false)
}

/// `seer_block_sparse_attn.tir`: [`blocksparse_attention`] with a running max and keys
/// longer than the queries: query q sits at position q + past (past = seq_kv − seq_q) and
/// sees the keys k <= q + past whose block BlockSparseMask[b, h, q / 64, k / 64] is set
/// (the mask row is the query block, not offset by past: the header).
fn seer_block_sparse_attention(o: &Outputs) -> Expected {
    block_sparse_attention(o, true)
}

/// Block-sparse causal attention over 64 x 64 blocks of a (batch, heads, 4, 4) mask, query
/// row i at key position i + past; `running`: [`flash_softmax`]'s running max or the
/// current tile's.
fn block_sparse_attention(o: &Outputs, running: bool) -> Expected {
    const TILE: usize = 64;
    let q = &o["Q"];
    let (batch, heads, seq, dim) = (q.shape()[0], q.shape()[1], q.shape()[2], q.shape()[3]);
    let seq_kv = o["K"].shape()[2];
    let past = seq_kv - seq;
    let [qv, kv, vv] = ["Q", "K", "V"].map(|n| o[n].to_f64());
    let mask = o["BlockSparseMask"].to_f64();
    let q_at = |b: usize, h: usize, s: usize| ((b * heads + h) * seq + s) * dim;
    let kv_at = |b: usize, h: usize, s: usize| ((b * heads + h) * seq_kv + s) * dim;
    let c = Approx::literal(0.18033688, LOG2_E / (dim as f64).sqrt(), Fp::F32);
    let mut out = Vec::new();
    for b in 0..batch {
        for h in 0..heads {
            for i in 0..seq {
                let kept = |t: usize| mask[((b * heads + h) * 4 + i / TILE) * 4 + t] != 0.0;
                let last = i + past;
                let keys: Vec<usize> = (0..=last).filter(|&j| kept(j / TILE)).collect();
                let qrow = &qv[q_at(b, h, i)..][..dim];
                let dots: Vec<(usize, f64, Approx)> = keys
                    .iter()
                    .map(|&j| {
                        let products: Vec<f64> = qrow
                            .iter()
                            .zip(&kv[kv_at(b, h, j)..][..dim])
                            .map(|(x, y)| x * y)
                            .collect();
                        let model = Approx::sum(products.iter().map(|&p| exact(p)), Fp::F32);
                        (j, products.iter().sum::<f64>(), model)
                    })
                    .collect();
                let scaled: Vec<f64> = dots.iter().map(|d| d.1 / (dim as f64).sqrt()).collect();
                let top = scaled.iter().fold(f64::NEG_INFINITY, |m, &x| m.max(x));
                let w: Vec<f64> = scaled.iter().map(|x| (x - top).exp()).collect();
                let total: f64 = w.iter().sum();
                let tiles: Vec<Vec<(usize, Approx)>> = (0..=last / TILE)
                    .filter(|&t| kept(t))
                    .map(|t| {
                        dots.iter()
                            .filter(|d| d.0 / TILE == t)
                            .map(|d| (d.0, d.2))
                            .collect()
                    })
                    .collect();
                let v_at = |j: usize, col: usize| vv[kv_at(b, h, j) + col];
                let (acc, l, _) = flash_softmax(&tiles, v_at, dim, c, running);
                for (col, slot) in acc.iter().enumerate() {
                    let want = dots
                        .iter()
                        .zip(&w)
                        .map(|(d, w)| w * v_at(d.0, col))
                        .sum::<f64>()
                        / total;
                    out.push(expect(want, (*slot / l).round(Fp::F32).round(Fp::F16)));
                }
            }
        }
    }
    vec![("Output", out)]
}

/// The offset of row (b, s, h) of a (batch, seq, heads, dim) tensor in `layout`.
fn bwd_at(
    layout: Layout,
    b: usize,
    s: usize,
    h: usize,
    seq: usize,
    heads: usize,
    dim: usize,
) -> usize {
    match layout {
        Layout::Bshd => ((b * seq + s) * heads + h) * dim,
        Layout::Bhsd => ((b * heads + h) * seq + s) * dim,
    }
}

/// Where `make_dq_layout` (the flash-attention backward's `T.Layout` of its float32 dQ)
/// stores element (b, l, h, d) (l the position, h the head, d < dim, a multiple of 8): the
/// row-major position of [b, l // 8, h, d // 8, d % 2, 4 (l % 8) + (d % 8) / 2] in the box
/// (batch, seq / 8, heads, dim / 8, 2, 32) for BSHD, of [b, h, l // 8, d // 8, ...] in
/// (batch, heads, seq / 8, dim / 8, 2, 32) for BHSD.
#[allow(clippy::too_many_arguments)]
fn dq_position(
    layout: Layout,
    b: usize,
    l: usize,
    h: usize,
    d: usize,
    seq: usize,
    heads: usize,
    dim: usize,
) -> usize {
    let outer = match layout {
        Layout::Bshd => (b * (seq / 8) + l / 8) * heads + h,
        Layout::Bhsd => (b * heads + h) * (seq / 8) + l / 8,
    };
    ((outer * (dim / 8) + d / 8) * 2 + d % 2) * 32 + 4 * (l % 8) + (d % 8) / 2
}

/// How a flash-attention backward kernel delivers dK and dV.
#[derive(Clone, Copy, PartialEq)]
enum KvGrads {
    /// float16 of the block's float32 accumulators, one block per KV head and key block
    /// (MHA).
    Float16,
    /// float32 tile atomics of each query head's accumulators into the caller's zeros (GQA:
    /// the group's query heads add into one KV head, in any order).
    Atomic,
    /// float16 of each query head's accumulators at [h % group, b, s, h / group, :] (GQA
    /// split: the caller sums the group).
    Split,
}

/// `flash_attn_bwd.tir` (BSHD, head dim 64) and its BHSD and GQA siblings.
fn flash_bwd(o: &Outputs) -> Expected {
    bwd(o, Layout::Bshd, (0.18033688, 0.125), KvGrads::Float16)
}

fn flash_bwd_bhsd(o: &Outputs) -> Expected {
    bwd(o, Layout::Bhsd, (0.18033688, 0.125), KvGrads::Float16)
}

/// `attn_sink_mha_bwd_bhsd.tir`: the causal BHSD backward at head dim 128 (the sink enters
/// through lse only).
fn attention_sink_bwd(o: &Outputs) -> Expected {
    let scales = (0.1275174307460247, 0.08838834764831845);
    bwd_masked(o, Layout::Bhsd, scales, KvGrads::Float16, true)
}

fn flash_bwd_gqa(o: &Outputs) -> Expected {
    bwd(
        o,
        Layout::Bshd,
        (0.10411754621281724, 0.07216878364870322),
        KvGrads::Atomic,
    )
}

fn flash_bwd_gqa_split(o: &Outputs) -> Expected {
    bwd(
        o,
        Layout::Bshd,
        (0.10411754621281724, 0.07216878364870322),
        KvGrads::Split,
    )
}

/// The flash-attention backward main pass on random inputs (lse and Delta as given, not the
/// forward's): per (b, query head h, with KV head g = h / group), key i, query j, with
/// (c, t) the float32 literals written for log2(e)/sqrt(dim) and 1/sqrt(dim) (`scales`),
/// P[i, j] = exp2(K_i · Q_j · c − lse[j]), dP[i, j] = V_i · dO_j,
/// dS[i, j] = P[i, j] (dP[i, j] − Delta[j]) · t; dV_i = Σ_j P[i, j] dO_j,
/// dK_i = Σ_j dS[i, j] Q_j, dQ_j = Σ_i dS[i, j] K_i (into the zeros, stored through the
/// layout: [`dq_position`]). The model: the dot products float32 sums of exact float16
/// products; P = float32(exp2(float32(float32(s·c) − lse))); dS = float16(float32(float32(P ·
/// float32(dP − Delta)) · t)); dV = Σ float16(P) dO and dK = Σ dS Q in float32 in any order,
/// delivered as [`KvGrads`] says (Atomic: one sum over the group's query heads too); dQ =
/// Σ dS K in float32 in any order (gemm k-steps, then float32 atomics across key blocks).
fn bwd(o: &Outputs, layout: Layout, scales: (f64, f64), grads: KvGrads) -> Expected {
    bwd_masked(o, layout, scales, grads, false)
}

/// [`bwd`], with `causal`: P[i, j] = 0 (exactly: the kernel's `T.if_then_else`) for key i
/// after query j.
fn bwd_masked(
    o: &Outputs,
    layout: Layout,
    scales: (f64, f64),
    grads: KvGrads,
    causal: bool,
) -> Expected {
    let (q, k, v, dq) = (&o["Q"], &o["K"], &o["V"], &o["dQ"]);
    let (qs, ks) = (q.shape(), k.shape());
    let (batch, seq, heads, kv_heads) = match layout {
        Layout::Bshd => (qs[0], qs[1], qs[2], ks[2]),
        Layout::Bhsd => (qs[0], qs[2], qs[1], ks[1]),
    };
    let (dim, dim_v) = (qs[3], v.shape()[3]);
    let group = heads / kv_heads;
    let [qv, kv, vv, dov] = ["Q", "K", "V", "dO"].map(|n| o[n].to_f64());
    let (lse, delta) = (o["lse"].to_f64(), o["Delta"].to_f64());
    let at =
        |b: usize, s: usize, h: usize, hs: usize, d: usize| bwd_at(layout, b, s, h, seq, hs, d);
    let row = |b: usize, h: usize, s: usize| (b * heads + h) * seq + s;
    let root = (dim as f64).sqrt();
    let c = Approx::literal(scales.0, LOG2_E / root, Fp::F32);
    let t = Approx::literal(scales.1, 1.0 / root, Fp::F32);
    let f32r = |a: Approx| a.round(Fp::F32);
    let dot = |x: &[f64], y: &[f64]| {
        let products: Vec<f64> = x.iter().zip(y).map(|(a, b)| a * b).collect();
        let model = Approx::sum(products.iter().map(|&p| exact(p)), Fp::F32);
        expect(products.iter().sum(), model)
    };
    // Per KV element, the terms of dK and dV from every query head that reads it.
    let mut dk_terms = vec![Vec::new(); batch * seq * kv_heads * dim];
    let mut dv_terms = vec![Vec::new(); batch * seq * kv_heads * dim_v];
    let (mut dk_split, mut dv_split) = (Vec::new(), Vec::new());
    if grads == KvGrads::Split {
        dk_split = vec![exact(0.0); group * dk_terms.len()];
        dv_split = vec![exact(0.0); group * dv_terms.len()];
    }
    let mut dq_out = vec![exact(0.0); dq.len()];
    for b in 0..batch {
        for h in 0..heads {
            let g = h / group;
            // P (with its float16 rounding, as the dV gemm reads it) and dS, per key i and
            // query j.
            let (mut p16, mut ds) = (Vec::new(), Vec::new());
            for i in 0..seq {
                for j in 0..seq {
                    let s = dot(
                        &kv[at(b, i, g, kv_heads, dim)..][..dim],
                        &qv[at(b, j, h, heads, dim)..][..dim],
                    );
                    let dp = dot(
                        &vv[at(b, i, g, kv_heads, dim_v)..][..dim_v],
                        &dov[at(b, j, h, heads, dim_v)..][..dim_v],
                    );
                    let l = exact(lse[row(b, h, j)]);
                    let p = match causal && i > j {
                        true => exact(0.0),
                        false => f32r(f32r(f32r(s * c) - l).exp2()),
                    };
                    let d = f32r(dp - exact(delta[row(b, h, j)]));
                    p16.push(p.round(Fp::F16));
                    ds.push(f32r(f32r(p * d) * t).round(Fp::F16));
                }
            }
            for i in 0..seq {
                for col in 0..dim_v {
                    let terms = (0..seq)
                        .map(|j| p16[i * seq + j] * exact(dov[at(b, j, h, heads, dim_v) + col]));
                    let slot = at(b, i, g, kv_heads, dim_v) + col;
                    match grads {
                        KvGrads::Split => {
                            let x = Approx::sum(terms, Fp::F32).round(Fp::F16);
                            dv_split[(h % group) * dv_terms.len() + slot] = x;
                        }
                        _ => dv_terms[slot].extend(terms),
                    }
                }
                for col in 0..dim {
                    let terms = (0..seq)
                        .map(|j| ds[i * seq + j] * exact(qv[at(b, j, h, heads, dim) + col]));
                    let slot = at(b, i, g, kv_heads, dim) + col;
                    match grads {
                        KvGrads::Split => {
                            let x = Approx::sum(terms, Fp::F32).round(Fp::F16);
                            dk_split[(h % group) * dk_terms.len() + slot] = x;
                        }
                        _ => dk_terms[slot].extend(terms),
                    }
                }
            }
            for j in 0..seq {
                for col in 0..dim {
                    let terms = (0..seq)
                        .map(|i| ds[i * seq + j] * exact(kv[at(b, i, g, kv_heads, dim) + col]));
                    dq_out[dq_position(layout, b, j, h, col, seq, heads, dim)] =
                        Approx::sum(terms, Fp::F32);
                }
            }
        }
    }
    let (dk, dv) = match grads {
        KvGrads::Split => (dk_split, dv_split),
        KvGrads::Float16 | KvGrads::Atomic => {
            let finish = |terms: Vec<Vec<Approx>>| -> Vec<Approx> {
                terms
                    .into_iter()
                    .map(|t| match grads {
                        KvGrads::Float16 => Approx::sum(t, Fp::F32).round(Fp::F16),
                        _ => Approx::sum(t, Fp::F32),
                    })
                    .collect()
            };
            (finish(dk_terms), finish(dv_terms))
        }
    };
    vec![("dQ", dq_out), ("dK", dk), ("dV", dv)]
}

/// `flash_attn_bwd_postprocess.tir` (BSHD) and its BHSD and GQA (head dim 192) siblings:
/// dQ_out[b, l, h, d] = float16 of the float32 stored at [`dq_position`] (b, l, h, d) of
/// dQ's memory — exact.
fn flash_bwd_postprocess(o: &Outputs) -> Expected {
    bwd_postprocess(o, Layout::Bshd)
}

fn flash_bwd_postprocess_bhsd(o: &Outputs) -> Expected {
    bwd_postprocess(o, Layout::Bhsd)
}

fn bwd_postprocess(o: &Outputs, layout: Layout) -> Expected {
    let out = &o["dQ_out"];
    let s = out.shape();
    let (batch, seq, heads, dim) = match layout {
        Layout::Bshd => (s[0], s[1], s[2], s[3]),
        Layout::Bhsd => (s[0], s[2], s[1], s[3]),
    };
    let dq = o["dQ"].to_f64();
    let mut want = vec![exact(0.0); out.len()];
    for b in 0..batch {
        for l in 0..seq {
            for h in 0..heads {
                for d in 0..dim {
                    let x = dq[dq_position(layout, b, l, h, d, seq, heads, dim)];
                    want[bwd_at(layout, b, l, h, seq, heads, dim) + d] = exact(Fp::F16.round(x));
                }
            }
        }
    }
    vec![("dQ_out", want)]
}

/// `linear_attn_fwd.tir`: with q = Q·scale (scale = 128^-1/2), per (b, h) the causal linear
/// attention O[t, :] = Σ_{s ≤ t} (q_t · K_s) V_s (O zeroed by the caller) and final_state =
/// Σ_s K_s^T V_s (128 x 128).
///
/// The model follows the header, per 64-wide block kb of the key dims and chunk n of 64
/// positions: q = float16(Q·float16(scale)); s = q @ k^T (float32), s_shared =
/// float16(tril(s)); o_kb = s_shared @ v + q @ float16(h) (float32, any order), h the
/// state before the chunk, then h += k^T @ v (float32); O = o_0 + o_1 (float32 atomic adds
/// into the zeros, either order); final_state = h. float16 products are exact in float32.
fn linear_attn_fwd(o: &Outputs) -> Expected {
    const CHUNK: usize = 64;
    let (q, kt, vt) = (&o["Q"], o["K"].to_f64(), o["V"].to_f64());
    let s = q.shape();
    let (batch, seq, heads, dim) = (s[0], s[1], s[2], s[3]);
    let qv = q.to_f64();
    let at = |b: usize, t: usize, h: usize| ((b * seq + t) * heads + h) * dim;
    let scale = (dim as f64).powf(-0.5);
    let scale16 = Approx::literal(0.08838834764831845, scale, Fp::F16);
    let mut out = vec![exact(0.0); batch * seq * heads * dim];
    let mut state = vec![exact(0.0); batch * heads * dim * dim];
    for b in 0..batch {
        for h in 0..heads {
            let (qr, kr, vr) = (
                |t: usize| &qv[at(b, t, h)..][..dim],
                |t: usize| &kt[at(b, t, h)..][..dim],
                |t: usize| &vt[at(b, t, h)..][..dim],
            );
            // The reference.
            let mut want = vec![0.0; seq * dim];
            for t in 0..seq {
                for u in 0..=t {
                    let a = scale * qr(t).iter().zip(kr(u)).map(|(x, y)| x * y).sum::<f64>();
                    for (w, &x) in want[t * dim..][..dim].iter_mut().zip(vr(u)) {
                        *w += a * x;
                    }
                }
            }
            // The model, per key block.
            let qm: Vec<Approx> = (0..seq * dim)
                .map(|i| (exact(qr(i / dim)[i % dim]) * scale16).round(Fp::F16))
                .collect();
            let mut parts = vec![Vec::new(); seq * dim];
            for kb in (0..dim).step_by(CHUNK) {
                let kd = kb..kb + CHUNK;
                // h[d - kb][col], all value columns at once.
                let mut hs = vec![exact(0.0); CHUNK * dim];
                for n in (0..seq).step_by(CHUNK) {
                    let h16: Vec<Approx> = hs.iter().map(|x| x.round(Fp::F16)).collect();
                    for t in n..n + CHUNK {
                        let s16: Vec<Approx> = (n..=t)
                            .map(|u| {
                                let p = kd.clone().map(|d| qm[t * dim + d] * exact(kr(u)[d]));
                                Approx::sum(p, Fp::F32).round(Fp::F16)
                            })
                            .collect();
                        for col in 0..dim {
                            let intra = (n..=t).map(|u| s16[u - n] * exact(vr(u)[col]));
                            let inter = kd
                                .clone()
                                .map(|d| qm[t * dim + d] * h16[(d - kb) * dim + col]);
                            parts[t * dim + col].push(Approx::sum(intra.chain(inter), Fp::F32));
                        }
                    }
                    for (i, slot) in hs.iter_mut().enumerate() {
                        let (d, col) = (kb + i / dim, i % dim);
                        let kv = (n..n + CHUNK).map(|u| exact(kr(u)[d] * vr(u)[col]));
                        *slot = Approx::sum(std::iter::once(*slot).chain(kv), Fp::F32);
                    }
                }
                for (i, &x) in hs.iter().enumerate() {
                    let (d, col) = (kb + i / dim, i % dim);
                    let w: f64 = (0..seq).map(|u| kr(u)[d] * vr(u)[col]).sum();
                    state[((b * heads + h) * dim + d) * dim + col] = expect(w, x);
                }
            }
            for t in 0..seq {
                for col in 0..dim {
                    let model = Approx::sum(parts[t * dim + col].iter().copied(), Fp::F32);
                    out[at(b, t, h) + col] = expect(want[t * dim + col], model);
                }
            }
        }
    }
    vec![("O", out), ("final_state", state)]
}

/// `retention_fwd.tir`: with q = Q·scale (scale = 128^-1/2) and head h's decay γ = 1 −
/// 2^(−5 − h), per (b, h) and 64-wide block kb of the key dims, O[kb, b, t, h, :] =
/// Σ_{s ≤ t} γ^(t − s) (q_t · K_s over kb's dims) V_s (the caller sums over kb).
///
/// The model follows the header, per chunk of 64 positions (rows r, columns c within it),
/// with ld = float32(log2 γ) and each decay exp2(float32(n·ld)) rounded to float32:
/// q = float16(Q·float16(scale)); s_shared[r, c] = float16(s[r, c]·exp2((r − c)·ld)) for
/// c ≤ r, s = q @ k^T (float32); o = exp2((r + 1)·ld)·(q @ float16(h)) + s_shared @ v (float32);
/// O = float16(o); then v = float16(v·exp2((63 − r)·ld)) and h = exp2(64·ld)·h + k^T @ v
/// (float32). float16 products are exact in float32.
fn retention_fwd(o: &Outputs) -> Expected {
    const CHUNK: usize = 64;
    let (q, kt, vt) = (&o["Q"], o["K"].to_f64(), o["V"].to_f64());
    let s = q.shape();
    let (batch, seq, heads, dim) = (s[0], s[1], s[2], s[3]);
    let qv = q.to_f64();
    let at = |b: usize, t: usize, h: usize| ((b * seq + t) * heads + h) * dim;
    let scale = (dim as f64).powf(-0.5);
    let scale16 = Approx::literal(0.08838834764831845, scale, Fp::F16);
    let f32r = |a: Approx| a.round(Fp::F32);
    let blocks = dim / CHUNK;
    let mut out = vec![exact(0.0); blocks * batch * seq * heads * dim];
    for b in 0..batch {
        for h in 0..heads {
            let (qr, kr, vr) = (
                |t: usize| &qv[at(b, t, h)..][..dim],
                |t: usize| &kt[at(b, t, h)..][..dim],
                |t: usize| &vt[at(b, t, h)..][..dim],
            );
            let gamma = 1.0 - 2f64.powi(-5 - h as i32);
            let ld = exact(gamma.log2()).round(Fp::F32);
            let decay = |n: f64| f32r(f32r(exact(n) * ld).exp2());
            let qm: Vec<Approx> = (0..seq * dim)
                .map(|i| (exact(qr(i / dim)[i % dim]) * scale16).round(Fp::F16))
                .collect();
            for kb in 0..blocks {
                let kd = kb * CHUNK..(kb + 1) * CHUNK;
                // The reference, by the recurrence S_t = γ·S_{t−1} + K_t^T V_t over kb's dims:
                // O_t = q_t · S_t = Σ_{s ≤ t} γ^(t − s) (q_t · K_s) V_s.
                let mut st = vec![0.0; CHUNK * dim];
                let mut want = vec![0.0; seq * dim];
                for t in 0..seq {
                    for (i, x) in st.iter_mut().enumerate() {
                        *x = gamma * *x + kr(t)[kb * CHUNK + i / dim] * vr(t)[i % dim];
                    }
                    for (i, w) in want[t * dim..][..dim].iter_mut().enumerate() {
                        let terms = kd.clone().map(|d| qr(t)[d] * st[(d - kd.start) * dim + i]);
                        *w = scale * terms.sum::<f64>();
                    }
                }
                // The model.
                let mut hs = vec![exact(0.0); CHUNK * dim];
                for n in (0..seq).step_by(CHUNK) {
                    let h16: Vec<Approx> = hs.iter().map(|x| x.round(Fp::F16)).collect();
                    for t in n..n + CHUNK {
                        let r = t - n;
                        let s16: Vec<Approx> = (n..=t)
                            .map(|u| {
                                let p = kd.clone().map(|d| qm[t * dim + d] * exact(kr(u)[d]));
                                let s = Approx::sum(p, Fp::F32);
                                f32r(s * decay((t - u) as f64)).round(Fp::F16)
                            })
                            .collect();
                        let row_decay = decay((r + 1) as f64);
                        for col in 0..dim {
                            let inter = kd
                                .clone()
                                .map(|d| qm[t * dim + d] * h16[(d - kd.start) * dim + col]);
                            let inter = f32r(row_decay * Approx::sum(inter, Fp::F32));
                            let intra = (n..=t).map(|u| s16[u - n] * exact(vr(u)[col]));
                            let model = Approx::sum(std::iter::once(inter).chain(intra), Fp::F32);
                            let i = (((kb * batch + b) * seq + t) * heads + h) * dim + col;
                            out[i] = expect(want[t * dim + col], model.round(Fp::F16));
                        }
                    }
                    let vdec: Vec<Approx> = (0..CHUNK * dim)
                        .map(|i| {
                            let (r, col) = (i / dim, i % dim);
                            let x = exact(vr(n + r)[col]) * decay((CHUNK - 1 - r) as f64);
                            f32r(x).round(Fp::F16)
                        })
                        .collect();
                    let chunk_decay = decay(CHUNK as f64);
                    for (i, slot) in hs.iter_mut().enumerate() {
                        let (d, col) = (kd.start + i / dim, i % dim);
                        let kv = (0..CHUNK).map(|r| exact(kr(n + r)[d]) * vdec[r * dim + col]);
                        let kept = f32r(chunk_decay * *slot);
                        *slot = Approx::sum(std::iter::once(kept).chain(kv), Fp::F32);
                    }
                }
            }
        }
    }
    vec![("O", out)]
}

/// `mamba_chunk_state.tir`: per batch b, chunk c, head h (group g = h / (nheads / ngroups)),
/// Output[b, c, h, p, n] = Σ_l B[b, c·cs + l, g, n]·exp(dA[cs − 1] − dA[l])·dt[l]·x[b, c·cs +
/// l, h, p] over the chunk's positions before seqlen (dA, dt: dA_cumsum[b, h, c, :],
/// dt[b, h, c, :]).
///
/// The model follows the header: with p = float32(1.44269504) standing for log2 e,
/// scale[l] = float32(exp2(dA[cs − 1]·p − dA[l]·p) · dt[l]) (float32 ops),
/// xt[p, l] = float16(x·scale[l]) (a float32 product stored in a float16 fragment), Output
/// = float16(Σ_l xt[p, l]·B[l, n]) (float32 gemm, float16 products exact).
fn mamba_chunk_state(o: &Outputs) -> Expected {
    let (bm, x, dt, da) = (&o["B"], &o["x"], o["dt"].to_f64(), o["dA_cumsum"].to_f64());
    let (batch, seqlen, ngroups, dstate) =
        (bm.shape()[0], bm.shape()[1], bm.shape()[2], bm.shape()[3]);
    let (nheads, headdim) = (x.shape()[2], x.shape()[3]);
    let (nchunks, cs) = (o["dt"].shape()[2], o["dt"].shape()[3]);
    let (bv, xv) = (bm.to_f64(), x.to_f64());
    let p = Approx::literal(LOG2_E_WRITTEN, LOG2_E, Fp::F32);
    let f32r = |a: Approx| a.round(Fp::F32);
    let mut out = Vec::with_capacity(batch * nchunks * nheads * headdim * dstate);
    for b in 0..batch {
        for c in 0..nchunks {
            for h in 0..nheads {
                let g = h / (nheads / ngroups);
                let at = ((b * nheads + h) * nchunks + c) * cs;
                let (dt, da) = (&dt[at..][..cs], &da[at..][..cs]);
                let rows: Vec<usize> = (0..cs).filter(|l| c * cs + l < seqlen).collect();
                let last = da[cs - 1];
                let xs =
                    |l: usize, q: usize| xv[((b * seqlen + c * cs + l) * nheads + h) * headdim + q];
                let bs =
                    |l: usize, n: usize| bv[((b * seqlen + c * cs + l) * ngroups + g) * dstate + n];
                let scale: Vec<Approx> = rows
                    .iter()
                    .map(|&l| {
                        let arg = f32r(exact(last) * p - f32r(exact(da[l]) * p));
                        f32r(f32r(arg.exp2()) * exact(dt[l]))
                    })
                    .collect();
                for q in 0..headdim {
                    let xt: Vec<Approx> = rows
                        .iter()
                        .zip(&scale)
                        .map(|(&l, &s)| f32r(exact(xs(l, q)) * s).round(Fp::F16))
                        .collect();
                    for n in 0..dstate {
                        let want: f64 = rows
                            .iter()
                            .map(|&l| bs(l, n) * (last - da[l]).exp() * dt[l] * xs(l, q))
                            .sum();
                        let terms = rows.iter().zip(&xt).map(|(&l, &t)| t * exact(bs(l, n)));
                        out.push(expect(want, Approx::sum(terms, Fp::F32).round(Fp::F16)));
                    }
                }
            }
        }
    }
    vec![("Output", out)]
}

/// `mamba_chunk_scan.tir`: per batch b, chunk c, head h (group g), position l of the chunk
/// (t = c·cs + l < seqlen) and p < headdim, with dA, dt the chunk's rows of dA_cumsum and dt:
/// Output[b, t, h, p] = Σ_{s ≤ l} cb[b, c, g, l, s]·exp(dA[l] − dA[s])·dt[s]·x[b, c·cs + s,
/// h, p] + exp(dA[l])·Σ_n C[b, t, g, n]·prev_states[b, c, h, p, n] + D[h]·x[b, t, h, p].
///
/// The model follows the header (p = float32(1.44269504) standing for log2 e): acc =
/// float32(exp2(dA[l]·p)) · (C @ prev_states^T) (float32 ops); the scores rounded to
/// float16 twice, float16(float16(cb·exp2(dA[l]·p − dA[s]·p))·dt[s]) (float32 products
/// stored in the float16 fragment), summed with acc in float32 against x (float16
/// products exact); then acc + x·D in one float32 rounding (`T.fma`); Output = float16.
fn mamba_chunk_scan(o: &Outputs) -> Expected {
    let (cb, x, cm) = (&o["cb"], &o["x"], &o["C"]);
    let (dt, da, d) = (o["dt"].to_f64(), o["dA_cumsum"].to_f64(), o["D"].to_f64());
    let (batch, nchunks, ngroups, cs) =
        (cb.shape()[0], cb.shape()[1], cb.shape()[2], cb.shape()[3]);
    let (seqlen, nheads, headdim) = (x.shape()[1], x.shape()[2], x.shape()[3]);
    let dstate = cm.shape()[3];
    assert!(
        cs % 64 == 0 && dstate <= 128,
        "mamba_chunk_scan: chunk_size a multiple of 64, dstate at most 128 (its header)"
    );
    let (cbv, xv, cv, pv) = (
        cb.to_f64(),
        x.to_f64(),
        cm.to_f64(),
        o["prev_states"].to_f64(),
    );
    let p = Approx::literal(LOG2_E_WRITTEN, LOG2_E, Fp::F32);
    let f32r = |a: Approx| a.round(Fp::F32);
    let mut out = vec![exact(0.0); batch * seqlen * nheads * headdim];
    for b in 0..batch {
        for c in 0..nchunks {
            for h in 0..nheads {
                let g = h / (nheads / ngroups);
                let at = ((b * nheads + h) * nchunks + c) * cs;
                let (dt, da) = (&dt[at..][..cs], &da[at..][..cs]);
                let xs =
                    |l: usize, q: usize| xv[((b * seqlen + c * cs + l) * nheads + h) * headdim + q];
                let prev = |q: usize, n: usize| {
                    pv[(((b * nchunks + c) * nheads + h) * headdim + q) * dstate + n]
                };
                for l in (0..cs).filter(|l| c * cs + l < seqlen) {
                    let cbs = |s: usize| cbv[(((b * nchunks + c) * ngroups + g) * cs + l) * cs + s];
                    let crow = &cv[((b * seqlen + c * cs + l) * ngroups + g) * dstate..][..dstate];
                    let dal = f32r(exact(da[l]) * p);
                    let scale_m = f32r(dal.exp2());
                    let scores: Vec<Approx> = (0..=l)
                        .map(|s| {
                            let arg = f32r(exact(da[l]) * p - f32r(exact(da[s]) * p));
                            let decayed = f32r(exact(cbs(s)) * f32r(arg.exp2())).round(Fp::F16);
                            f32r(decayed * exact(dt[s])).round(Fp::F16)
                        })
                        .collect();
                    for q in 0..headdim {
                        let want_prev: f64 = (0..dstate).map(|n| crow[n] * prev(q, n)).sum();
                        let want_intra: f64 = (0..=l)
                            .map(|s| cbs(s) * (da[l] - da[s]).exp() * dt[s] * xs(s, q))
                            .sum();
                        let want = want_intra + da[l].exp() * want_prev + d[h] * xs(l, q);
                        let inter = (0..dstate).map(|n| exact(crow[n] * prev(q, n)));
                        let acc = f32r(Approx::sum(inter, Fp::F32) * scale_m);
                        let intra = scores.iter().enumerate().map(|(s, &w)| w * exact(xs(s, q)));
                        let acc = Approx::sum(std::iter::once(acc).chain(intra), Fp::F32);
                        let model = f32r(acc + exact(xs(l, q) * d[h])).round(Fp::F16);
                        out[((b * seqlen + c * cs + l) * nheads + h) * headdim + q] =
                            expect(want, model);
                    }
                }
            }
        }
    }
    vec![("Output", out)]
}

// ---------------------------------------------------------------------------------------
// The checks.

fn dims_of(size: &[(&str, i64)]) -> HashMap<String, i64> {
    size.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

/// `func` with the tunables `size` names bound (the others at their defaults); the size's
/// other names stay dims, bound by the interpreter.
fn bind_tunables(func: &PrimFunc, size: &[(&str, i64)], what: &str) -> PrimFunc {
    if func.space.is_empty() {
        return func.clone();
    }
    let (tunables, dims): (Vec<_>, Vec<_>) = size
        .iter()
        .map(|(n, v)| (n.to_string(), *v))
        .partition(|(n, _)| func.space.declares(n));
    tlc_ir::tuning::bind(func, &tunables, &dims)
        .unwrap_or_else(|d| panic!("{what}: binding the tunables: {}", d.message))
}

fn run(
    func: &PrimFunc,
    size: &[(&str, i64)],
    inputs: HashMap<String, Tensor>,
    what: &str,
) -> Outputs {
    let opts = RunOptions {
        seed: SEED,
        threads: 0,
    };
    // The size's tunables were bound already: only dims go to the interpreter.
    let dims: HashMap<String, i64> = dims_of(size)
        .into_iter()
        .filter(|(n, _)| func.dims.iter().any(|d| &d.name == n))
        .collect();
    interp::run(func, &dims, inputs, &opts)
        .unwrap_or_else(|e| panic!("{what}: the interpreter stops: {e}"))
}

/// The multi-dimensional index of flat element `i` of `shape`.
fn unflatten(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for (slot, &extent) in idx.iter_mut().zip(shape).rev() {
        *slot = i % extent.max(1);
        i /= extent.max(1);
    }
    idx
}

/// Every expected element admits the output; returns the largest |x − v| / e (how much of
/// the bounds was used; 0 for exact outputs).
fn assert_matches(what: &str, outs: &Outputs, expected: &Expected) -> f64 {
    let mut used = 0.0f64;
    for (param, want) in expected {
        let t = &outs[*param];
        let got = t.to_f64();
        assert_eq!(got.len(), want.len(), "{what}: `{param}` has another size");
        let bad: Vec<usize> = (0..got.len())
            .filter(|&i| !want[i].admits(got[i]))
            .collect();
        if let Some(&i) = bad.first() {
            panic!(
                "{what}: `{param}` differs from the reference at {} of {} elements; first at \
                 {:?}: {} where the reference is {} ± {:e}",
                bad.len(),
                got.len(),
                unflatten(i, t.shape()),
                got[i],
                want[i].v,
                want[i].e
            );
        }
        for (g, w) in got.iter().zip(want) {
            if w.e > 0.0 {
                used = used.max((g - w.v).abs() / w.e);
            }
        }
    }
    used
}

/// The lowered kernel's outputs are within `2e` of the tile level's (exactly equal where `e`
/// is 0), and its inputs were the same.
fn assert_lowered_agrees(what: &str, tile: &Outputs, low: &Outputs, expected: &Expected) {
    for (param, t) in tile {
        let Some((_, want)) = expected.iter().find(|(p, _)| p == param) else {
            assert_eq!(Some(t), low.get(param), "{what}: input `{param}` differs");
            continue;
        };
        let (a, b) = (t.to_f64(), low[param].to_f64());
        for (i, w) in want.iter().enumerate() {
            assert!(
                a[i] == b[i] || (a[i] - b[i]).abs() <= 2.0 * w.e * (1.0 + 2f64.powi(-40)),
                "{what}: `{param}`{:?} is {} after lowering, {} at the tile level (bound {:e})",
                unflatten(i, t.shape()),
                b[i],
                a[i],
                w.e
            );
        }
    }
}

fn source(stem: &str) -> (String, String) {
    let name = match stem.contains('/') {
        true => format!("{stem}.tir"),
        false => format!("{DIR}/{stem}.tir"),
    };
    let text = std::fs::read_to_string(tlc_tests::root().join(&name))
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    (name, text)
}

/// Each `FILE:LINE:COL: error:` header of a rendered error, checked to be located.
fn assert_located(name: &str, rendered: &str) {
    let headers: Vec<&str> = rendered
        .lines()
        .filter(|l| l.contains(": error: "))
        .collect();
    assert!(
        !headers.is_empty(),
        "{name}: no error header in\n{rendered}"
    );
    for h in headers {
        let loc = h
            .strip_prefix(&format!("{name}:"))
            .and_then(|rest| rest.split_once(": error: "))
            .map(|(loc, _)| loc);
        let located = loc.is_some_and(|loc| {
            let parts: Vec<&str> = loc.split(':').collect();
            parts.len() == 2
                && parts
                    .iter()
                    .all(|p| p.parse::<usize>().is_ok_and(|n| n > 0))
        });
        assert!(located, "{name}: `{h}` is not {name}:LINE:COL: error: …");
        assert_ne!(
            loc,
            Some("1:1"),
            "{name}: an error with no location\n{rendered}"
        );
    }
}

/// Parse, bind the tunables `size` names (a kernel with a tuning space), verify and place
/// per-thread code's barriers as `tlc check` does; the rendered errors otherwise.
fn check(name: &str, text: &str, size: &[(&str, i64)]) -> Result<PrimFunc, String> {
    let file = SourceFile::new(name, text);
    let func = tlc::frontend::parse(&file).map_err(|e| e.0)?;
    let func = bind_tunables(&func, size, name);
    // The front end's safe memory access, as `tlc check` / `run` run it
    // (`tlc::frontend::finish`).
    let func = tlc_passes::legalize_safe_memory::legalize_safe_memory(func);
    tlc::frontend::verify(&file, &func).map_err(|e| e.0)?;
    let func = tlc::frontend::sync(&file, func).map_err(|e| e.0)?;
    tlc::frontend::verify(&file, &func).map_err(|e| e.0)?;
    Ok(func)
}

/// The default pipeline of `target`: the lowered function, or the rendered errors.
fn lower(name: &str, text: &str, func: &PrimFunc, target: Target) -> Result<PrimFunc, String> {
    let manager = PassManager::new(default_pipeline(target), Instrumentation::default())
        .expect("the default pipeline");
    let mut cx = PassContext::new(target);
    manager
        .run(func.clone(), &mut cx, &mut std::io::sink())
        .map_err(|e| pipeline_error(&SourceFile::new(name, text), e).0)
}

/// PTX of a lowered function, its manifest checked, assembled by ptxas.
fn assemble(stem: &str, lowered: &PrimFunc, target: Target) {
    let (module, manifest) = emit::emit(lowered, target)
        .unwrap_or_else(|e| panic!("{stem} on {target}: codegen: {e:?}"));
    if let Err(e) = tlc::ptx::check_manifest(&module, &manifest) {
        panic!("{stem} on {target}: {e}");
    }
    let ptx = tlc::ptx::print_with_manifest(&module, &manifest);
    let arch = target.name();
    let expected = PTXAS_EXPECTED
        .iter()
        .find(|(s, t, _)| *s == stem && *t == target);
    let Some((_, _, code)) = expected else {
        emit::assemble("tilelang", &ptx, &stem.replace('/', "_"), arch);
        return;
    };
    // The documented exception: ptxas assembles it, with exactly this warning.
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("tilelang");
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let file = dir.join(format!("{}.{arch}.ptx", stem.replace('/', "_")));
    std::fs::write(&file, &ptx).expect("write ptx");
    let cubin = file.with_extension(format!("{arch}.cubin"));
    let _ = std::fs::remove_file(&cubin);
    match ptxas_log(&file, arch) {
        Ok(log) if *code == SPILLS => assert!(
            log.lines()
                .any(|l| l.contains("bytes spill stores") && !l.contains(" 0 bytes spill stores")),
            "{stem} on {arch}: ptxas no longer spills: remove it from PTXAS_EXPECTED\n{log}"
        ),
        Ok(log) => panic!(
            "{stem} on {arch}: ptxas no longer warns ({code}): remove it from PTXAS_EXPECTED\n{log}"
        ),
        Err(e) => {
            let warnings: Vec<&str> = e.lines().filter(|l| l.contains("(C")).collect();
            assert!(
                !warnings.is_empty() && warnings.iter().all(|l| l.contains(code)),
                "{stem} on {arch}: ptxas gives other than {code}:\n{e}"
            );
        }
    }
    assert!(
        cubin.exists(),
        "{stem} on {arch}: ptxas did not assemble it"
    );
}

fn check_example(stem: &str) {
    let example = EXAMPLES
        .iter()
        .find(|e| e.stem == stem)
        .unwrap_or_else(|| panic!("no example {stem}"));
    check_example_at(example);
}

/// [`check_example`] for one example's sizes and reference.
fn check_example_at(example: &Example) {
    let start = std::time::Instant::now();
    let stem = example.stem;
    let (name, text) = source(stem);
    let checked = |size: &[(&str, i64)]| {
        check(&name, &text, size).unwrap_or_else(|e| panic!("`tlc check` refuses {name}:\n{e}"))
    };
    let mut report = Vec::new();
    let mut first = None;
    for (i, size) in example.sizes.iter().enumerate() {
        let what = format!("{stem} {size:?}");
        let outs = canonical(stem, run(&checked(size), size, given(stem, i), &what));
        let expected = (example.reference)(&outs);
        let used = assert_matches(&what, &outs, &expected);
        report.push(format!("{size:?}: {used:.3} of the bound"));
        first.get_or_insert((outs, expected));
    }
    let (tile, expected) = first.expect("two sizes");
    let size = example.sizes[0];
    let func = checked(size);
    // An int4 buffer of symbolic row length is packed into bytes only once its dims are
    // bound (`pack-int4` asks for `-D`): such a kernel is lowered as `tlc compile -D` does.
    let func = match symbolic_int4_rows(&func) {
        true => bind_dims(&func, size, &name),
        false => func,
    };
    for target in [Target::Sm80, Target::Sm90a] {
        let refusal = REFUSED.iter().find(|(s, t, _)| *s == stem && *t == target);
        let lowered = lower(&name, &text, &func, target);
        let lowered = match (lowered, refusal) {
            (Ok(f), None) => f,
            (Err(e), Some((_, _, why))) => {
                assert_located(&name, &e);
                assert!(
                    e.contains(why),
                    "{name} on {target}: refused otherwise:\n{e}"
                );
                report.push(format!("{target}: refused as documented"));
                continue;
            }
            (Ok(_), Some(_)) => {
                panic!("{name} compiles for {target} now: remove it from REFUSED")
            }
            (Err(e), None) => panic!("{name} on {target}:\n{e}"),
        };
        let what = format!("{stem} {size:?} lowered for {target}");
        let low = run(&lowered, size, lowered_inputs(stem, &lowered, &tile), &what);
        let low = canonical(stem, unpacked_for(&|n| int4_param(&func, n), low));
        let used = assert_matches(&what, &low, &expected);
        assert_lowered_agrees(&what, &tile, &low, &expected);
        report.push(format!("{target}: {used:.3} of the bound"));
        assemble(stem, &lowered, target);
    }
    eprintln!(
        "{stem}: {} ({:.1} s)",
        report.join("; "),
        start.elapsed().as_secs_f64()
    );
}

/// Whether `func` has an int4 buffer whose innermost extent is symbolic.
fn symbolic_int4_rows(func: &PrimFunc) -> bool {
    let mut decls: Vec<&tlc_ir::BufferDecl> = func.params.iter().collect();
    tlc_ir::visit::for_each_stmt(&func.body, &mut |s| {
        if let tlc_ir::StmtKind::Kernel(k) = &s.kind {
            decls.extend(&k.allocs);
        }
    });
    decls
        .iter()
        .any(|d| d.dtype == DType::Int4 && d.shape.last().is_some_and(|e| e.as_int().is_none()))
}

/// `func` with the dims of `size` bound (as `-D` binds them).
fn bind_dims(func: &PrimFunc, size: &[(&str, i64)], what: &str) -> PrimFunc {
    let dims: Vec<(String, i64)> = size
        .iter()
        .filter(|(n, _)| func.dims.iter().any(|d| d.name == *n))
        .map(|(n, v)| (n.to_string(), *v))
        .collect();
    tlc_ir::specialize::specialize(func, &dims)
        .unwrap_or_else(|e| panic!("{what}: binding the dims: {}", e.message))
}

/// `Some(Int4)` when parameter `name` of `func` is int4.
fn int4_param(func: &PrimFunc, name: &str) -> Option<DType> {
    let p = func.params.iter().find(|p| p.name.name == name)?;
    (p.dtype == DType::Int4).then_some(p.dtype)
}

/// The lowered kernel's inputs at the first size: the example's given ones, and the tile
/// level's int4 inputs (read-only in these examples) as the bytes `pack-int4` made of
/// them, so that both levels multiply the same values.
fn lowered_inputs(stem: &str, lowered: &PrimFunc, tile: &Outputs) -> HashMap<String, Tensor> {
    let mut inputs = given(stem, 0);
    for (name, t) in tile {
        if t.dtype() == DType::Int4 {
            inputs.insert(name.clone(), t.clone());
        }
    }
    let dtype_of = |n: &str| {
        let p = lowered.params.iter().find(|p| p.name.name == n);
        p.map(|p| p.dtype)
    };
    packed_for(&dtype_of, inputs).unwrap_or_else(|e| panic!("{stem}: packing int4: {e}"))
}

/// Size `which` of [`check_example`]'s with its dims bound (`-D`, as `tlc compile -D` binds
/// them) and lowered for sm_90a, where the binding makes the row strides provable and the
/// pipelines take TMA (`analysis::tma`): the lowered kernel must issue `T.tma_load`s,
/// match the reference and the tile level's outputs, and pass ptxas.
fn check_example_on_tma(stem: &str, which: usize) {
    let example = EXAMPLES
        .iter()
        .find(|e| e.stem == stem)
        .unwrap_or_else(|| panic!("no example {stem}"));
    let (name, text) = source(stem);
    let size = example.sizes[which];
    let func =
        check(&name, &text, size).unwrap_or_else(|e| panic!("`tlc check` refuses {name}:\n{e}"));
    let what = format!("{stem} {size:?}");
    let tile = run(&func, size, given(stem, which), &what);
    let expected = (example.reference)(&tile);
    assert_matches(&what, &tile, &expected);
    let dims: Vec<(String, i64)> = size
        .iter()
        .filter(|(n, _)| func.dims.iter().any(|d| d.name == *n))
        .map(|(n, v)| (n.to_string(), *v))
        .collect();
    let bound = tlc_ir::specialize::specialize(&func, &dims)
        .unwrap_or_else(|e| panic!("{what}: binding the dims: {}", e.message));
    let lowered = lower(&name, &text, &bound, Target::Sm90a)
        .unwrap_or_else(|e| panic!("{name} bound on sm_90a:\n{e}"));
    let printed = tlc_ir::printer::print_func(&lowered);
    assert!(
        printed.contains("T.tma_load("),
        "{what}: the bound kernel keeps cp.async:\n{printed}"
    );
    let what = format!("{what} bound and lowered for sm_90a");
    let low = run(&lowered, size, given(stem, which), &what);
    let used = assert_matches(&what, &low, &expected);
    assert_lowered_agrees(&what, &tile, &low, &expected);
    assemble(stem, &lowered, Target::Sm90a);
    eprintln!("{what}: {used:.3} of the bound");
}

/// The causal backward's key loop starts at the block's diagonal (`T.floordiv(by * 128,
/// 32)`): on TMA once the dims are bound (issue 38). Its whole-tile size: bound to the
/// ragged 136 positions, ptxas spills this kernel (255 registers) with TMA or without.
#[test]
fn attn_sink_mha_bwd_bhsd_bound_runs_on_tma() {
    check_example_on_tma("attn_sink_mha_bwd_bhsd", 1);
}

/// The paged MLA decode's copies read their rows through the page table: the entry is
/// loaded with each stage's TMA fill (issue 38).
#[test]
fn mla_decode_paged_bound_runs_on_tma() {
    check_example_on_tma("mla_decode_paged", 0);
}

#[test]
fn dequant_gemv_matches_its_reference() {
    check_example("dequant_gemv_fp16xint4");
}

#[test]
fn dequant_gemm_matches_its_reference() {
    check_example("dequant_gemm_fine_grained");
}

#[test]
fn rand_uint_matches_its_reference() {
    check_example("rand_uint");
}

#[test]
fn elementwise_add_matches_its_reference() {
    check_example("elementwise_add");
}

#[test]
fn chunk_local_cumsum_matches_its_reference() {
    check_example("cumsum_chunk_local");
}

#[test]
fn varlen_attention_matches_its_reference() {
    check_example("flash_attn_fwd_varlen_causal");
}

#[test]
fn dequant_gemm_fp4_matches_its_reference() {
    check_example("dequant_gemm_fp4_hopper");
}

#[test]
fn blocksparse_attn_fwd_matches_its_reference() {
    check_example("blocksparse_attn_fwd");
}

#[test]
fn flash_attn_bwd_matches_its_reference() {
    check_example("flash_attn_bwd");
}

#[test]
fn flash_attn_bwd_bhsd_fwd_matches_its_reference() {
    check_example("flash_attn_bwd_bhsd_fwd");
}

#[test]
fn flash_attn_bwd_bhsd_preprocess_matches_its_reference() {
    check_example("flash_attn_bwd_bhsd_preprocess");
}

#[test]
fn flash_attn_bwd_bhsd_matches_its_reference() {
    check_example("flash_attn_bwd_bhsd");
}

#[test]
fn flash_attn_bwd_bhsd_postprocess_matches_its_reference() {
    check_example("flash_attn_bwd_bhsd_postprocess");
}

#[test]
fn flash_attn_gqa_bwd_fwd_matches_its_reference() {
    check_example("flash_attn_gqa_bwd_fwd");
}

#[test]
fn flash_attn_gqa_bwd_preprocess_matches_its_reference() {
    check_example("flash_attn_gqa_bwd_preprocess");
}

#[test]
fn flash_attn_gqa_bwd_matches_its_reference() {
    check_example("flash_attn_gqa_bwd");
}

#[test]
fn flash_attn_gqa_bwd_split_matches_its_reference() {
    check_example("flash_attn_gqa_bwd_split");
}

#[test]
fn attn_sink_mha_bwd_bhsd_fwd_matches_its_reference() {
    check_example("attn_sink_mha_bwd_bhsd_fwd");
}

#[test]
fn attn_sink_mha_bwd_bhsd_preprocess_matches_its_reference() {
    check_example("attn_sink_mha_bwd_bhsd_preprocess");
}

#[test]
fn attn_sink_mha_bwd_bhsd_matches_its_reference() {
    check_example("attn_sink_mha_bwd_bhsd");
}

#[test]
fn attn_sink_mha_bwd_bhsd_postprocess_matches_its_reference() {
    check_example("attn_sink_mha_bwd_bhsd_postprocess");
}

#[test]
fn attn_sink_mha_bwd_bhsd_dsink_matches_its_reference() {
    check_example("attn_sink_mha_bwd_bhsd_dsink");
}

#[test]
fn flash_attn_gqa_bwd_postprocess_matches_its_reference() {
    check_example("flash_attn_gqa_bwd_postprocess");
}

#[test]
fn flash_attn_bwd_postprocess_matches_its_reference() {
    check_example("flash_attn_bwd_postprocess");
}

#[test]
fn sparse_gqa_decode_varlen_indice_matches_its_reference() {
    check_example("sparse_gqa_decode_varlen_indice");
}

#[test]
fn sparse_gqa_decode_varlen_mask_matches_its_reference() {
    check_example("sparse_gqa_decode_varlen_mask");
}

#[test]
fn flash_decoding_mha_inference_matches_its_reference() {
    check_example("flash_decoding_mha_inference");
}

#[test]
fn mla_decode_matches_its_reference() {
    check_example("mla_decode");
}

/// The persistent form: the split phase, the grid barrier, the combine (interpreted in
/// phases: every block's writes before the barrier are seen by every block after it).
#[test]
fn mla_decode_persistent_matches_its_reference() {
    check_example("mla_decode_persistent");
}

#[test]
fn gqa_fwd_bshd_matches_its_reference() {
    check_example("flash_attn_gqa_fwd_bshd");
}

#[test]
fn attention_sink_matches_its_reference() {
    check_example("attn_sink_mha_fwd_bhsd");
}

#[test]
fn grouped_gemm_matches_its_reference() {
    check_example("grouped_gemm_fwd");
}

#[test]
fn block_causal_attention_matches_its_reference() {
    check_example("block_causal_attn_fwd");
}

#[test]
fn nsa_fwd_matches_its_reference() {
    check_example("nsa_fwd");
}

#[test]
fn fusedmoe_shared_matches_its_reference() {
    check_example("fusedmoe_shared");
}

#[test]
fn fusedmoe_routed_matches_its_reference() {
    check_example("fusedmoe_routed");
}

#[test]
fn mla_decode_paged_matches_its_reference() {
    check_example("mla_decode_paged");
}

#[test]
fn rms_norm_matches_its_reference() {
    check_example("norm_rms");
}

#[test]
fn rms_norm_splitk_matches_its_reference() {
    check_example("norm_rms_splitk");
}

#[test]
fn layer_norm_matches_its_reference() {
    check_example("norm_layernorm_fwd");
}

#[test]
fn online_softmax_matches_its_reference() {
    check_example("softmax_online");
}

#[test]
fn topk_matches_its_reference() {
    check_example("topk_topk");
}

#[test]
fn flash_attention_matches_its_reference() {
    check_example("flash_attn_fwd_bshd");
}

#[test]
fn causal_flash_attention_matches_its_reference() {
    check_example("flash_attn_fwd_bhsd_causal");
}

#[test]
fn flash_attention_example_matches_its_reference() {
    check_example("examples/flash_attention");
}

/// `examples/flash_attention.tir` at more settings than its [`EXAMPLES`] entry (which checks
/// the causal mode at its defaults): at the tile level and lowered
/// for sm_90a, against [`flash_attention_gqa`], at sizes with ragged key ends — the last two
/// warp-specialized on two consumer warpgroups and two stages: without the mask with the
/// previous key tile's `P @ V` deferred behind the next `Q @ K^T` and the warpgroups taking
/// turns (ping-pong), causal (a key-tile count per block), and causal at dim 256 (its
/// epilogue staged in Q's bytes).
#[test]
fn flash_attention_example_at_ragged_sizes_matches_its_reference() {
    let stem = "examples/flash_attention";
    let (name, text) = source(stem);
    // (bindings, block_N, causal)
    type Size<'a> = (&'a [(&'a str, i64)], usize, bool);
    let sizes: [Size; 5] = [
        // The default tiles (128 x 128, 1 stage, 256 threads), dim 128, 4 query heads over 2
        // KV heads: 200 = 128 + 72 keys (a masked last key tile, a partial query tile).
        (
            &[
                ("batch", 1),
                ("seq_len", 200),
                ("heads", 4),
                ("kv_heads", 2),
                ("dim", 128),
            ],
            128,
            false,
        ),
        // dim 64, 64 x 64 tiles, 2 stages, 128 threads, two batches of 2 heads (one KV head
        // each): 130 = 2 * 64 + 2 keys.
        (
            &[
                ("batch", 2),
                ("seq_len", 130),
                ("heads", 2),
                ("kv_heads", 2),
                ("dim", 64),
                ("block_M", 64),
                ("block_N", 64),
                ("num_stages", 2),
                ("threads", 128),
            ],
            64,
            false,
        ),
        // TileLang's tuned setting (256 threads, 2 stages) over 3 key tiles, 300 = 2 * 128
        // + 44: the deferred gemm's prologue, one loop iteration, and its epilogue.
        (
            &[
                ("batch", 1),
                ("seq_len", 300),
                ("heads", 2),
                ("kv_heads", 1),
                ("dim", 64),
                ("num_stages", 2),
                ("threads", 256),
            ],
            128,
            false,
        ),
        (
            &[
                ("batch", 1),
                ("seq_len", 300),
                ("heads", 2),
                ("kv_heads", 1),
                ("dim", 64),
                ("num_stages", 2),
                ("threads", 256),
                ("is_causal", 1),
            ],
            128,
            true,
        ),
        // dim 256 at 128 x 64 tiles, 2 stages, 256 threads: warp-specialized, which fits
        // only because the epilogue's O_shared takes Q_shared's bytes in the consumers'
        // branch (plan-shared-memory); 130 = 2 * 64 + 2 keys, causal.
        (
            &[
                ("batch", 1),
                ("seq_len", 130),
                ("heads", 1),
                ("kv_heads", 1),
                ("dim", 256),
                ("block_N", 64),
                ("num_stages", 2),
                ("threads", 256),
                ("is_causal", 1),
            ],
            64,
            true,
        ),
    ];
    let mut report = Vec::new();
    for (size, block_n, causal) in sizes {
        let what = format!("{stem} {size:?}");
        let func = check(&name, &text, size)
            .unwrap_or_else(|e| panic!("`tlc check` refuses {name}:\n{e}"));
        let tile = run(&func, size, HashMap::new(), &what);
        let expected = flash_attention_gqa(&tile, causal, block_n);
        let used = assert_matches(&what, &tile, &expected);
        let lowered = lower(&name, &text, &func, Target::Sm90a)
            .unwrap_or_else(|e| panic!("{name} on sm_90a:\n{e}"));
        let what = format!("{what} lowered for sm_90a");
        let low = run(&lowered, size, HashMap::new(), &what);
        let used_low = assert_matches(&what, &low, &expected);
        assert_lowered_agrees(&what, &tile, &low, &expected);
        report.push(format!(
            "{size:?}: {used:.3}, lowered {used_low:.3} of the bound"
        ));
    }
    eprintln!("{stem}: {}", report.join("; "));
}

#[test]
fn layer_norm_backward_matches_its_reference() {
    check_example("norm_layernorm_bwd");
}

#[test]
fn persistent_gemm_matches_its_reference() {
    check_example("gemm_persistent");
}

#[test]
fn per_token_fp8_cast_matches_its_reference() {
    check_example("cast_per_token_fp8");
}

#[test]
fn blocksparse_gemm_matches_its_reference() {
    check_example("gemm_blocksparse");
}

#[test]
fn streamk_gemm_matches_its_reference() {
    check_example("gemm_streamk");
}

#[test]
fn splitk_gemm_example_matches_its_reference() {
    check_example("examples/gemm_splitk");
}

#[test]
fn the_gemm_example_matches_its_reference_sliced_and_whole() {
    check_example("examples/gemm");
}

#[test]
fn streamk_gemm_example_matches_its_reference() {
    check_example("examples/gemm_streamk");
}

#[test]
fn deepgemm_fp8_gemm_matches_its_reference() {
    check_example("gemm_deepgemm_fp8_2xacc");
}

#[test]
fn blockscaled_fp8_gemm_example_matches_its_reference() {
    check_example("examples/gemm_fp8_blockscaled");
}

/// The FP8 example takes any wgmma width, not only those dividing B's 128-column scale
/// blocks: 200-column tiles meet three of them (the second tile's columns 0..55, 56..183
/// and 184..199 — the last two clamped at the ragged edge of N = 450), 144-column tiles two
/// at every offset; tile level, against the reference.
#[test]
fn blockscaled_fp8_example_picks_b_scales_for_tiles_of_any_width() {
    let stem = "examples/gemm_fp8_blockscaled";
    let (name, text) = source(stem);
    for block_n in [200, 144] {
        let size: &[(&str, i64)] = &[
            ("M", 70),
            ("N", 450),
            ("K", 256),
            ("block_M", 64),
            ("threads", 128),
            ("block_N", block_n),
            ("num_stages", 2),
        ];
        let func = check(&name, &text, size).unwrap_or_else(|e| panic!("{name}: {e}"));
        let what = format!("{stem} {size:?}");
        let outs = run(&func, size, HashMap::new(), &what);
        assert_matches(&what, &outs, &blockscaled_fp8(&outs));
    }
}

#[test]
fn group_per_split_token_fp8_cast_matches_its_reference() {
    check_example("cast_group_per_split_token_fp8");
}

#[test]
fn gemv_alloc_reducer_matches_its_reference() {
    check_example("gemv_alloc_reducer");
}

#[test]
fn naive_gemv_matches_its_reference() {
    check_example("gemv_naive");
}

#[test]
fn conv_im2col_matches_its_reference() {
    check_example("conv_im2col");
}

#[test]
fn conv_im2col_symbolic_k_matches_its_reference() {
    check_example("conv_im2col_symbolic_k");
}

#[test]
fn splitk_gemv_matches_its_reference() {
    check_example("gemv_splitk_vectorized");
}

#[test]
fn flash_decoding_gqa_matches_its_reference() {
    check_example("flash_decoding_gqa");
}

#[test]
fn flash_attention_bwd_preprocess_matches_its_reference() {
    check_example("flash_attn_bwd_preprocess");
}

#[test]
fn linear_attention_matches_its_reference() {
    check_example("linear_attn_fwd");
}

#[test]
fn fp8_lighting_indexer_clean_matches_its_reference() {
    check_example("fp8_lighting_indexer_clean");
}

#[test]
fn fp8_lighting_indexer_matches_its_reference() {
    check_example("fp8_lighting_indexer");
}

#[test]
fn sparse_mla_fwd_matches_its_reference() {
    check_example("sparse_mla_fwd");
}

#[test]
fn gdn_chunk_o_matches_its_reference() {
    check_example("gdn_chunk_o");
}

#[test]
fn gdn_wy_fast_matches_its_reference() {
    check_example("gdn_wy_fast");
}

#[test]
fn gdn_chunk_delta_h_matches_its_reference() {
    check_example("gdn_chunk_delta_h_init");
}

#[test]
fn linear_attention_bwd_matches_its_reference() {
    check_example("linear_attn_bwd");
}

#[test]
fn retention_matches_its_reference() {
    check_example("retention_fwd");
}

#[test]
fn mamba_chunk_state_matches_its_reference() {
    check_example("mamba_chunk_state");
}

#[test]
fn mamba_chunk_scan_matches_its_reference() {
    check_example("mamba_chunk_scan");
}

/// The files of [`RACY`] parse and verify, and without `thread-sync` the tile-level
/// interpreter stops each with a located data-race error on shared memory (with it they are
/// checked in [`EXAMPLES`]).
#[test]
fn the_racy_examples_stop_at_a_data_race_without_thread_sync() {
    for (stem, size) in RACY {
        assert!(
            EXAMPLES.iter().any(|e| e.stem == *stem),
            "{stem}: RACY lists examples whose barriers thread-sync places; add it to EXAMPLES"
        );
        let (name, text) = source(stem);
        let file = SourceFile::new(&name, &text);
        let parsed = tlc::frontend::parse(&file)
            .unwrap_or_else(|e| panic!("{name} does not parse:\n{}", e.0));
        let func = bind_tunables(&parsed, size, &name);
        if let Err(e) = tlc::frontend::verify(&file, &func) {
            panic!("{name} does not verify:\n{}", e.0);
        }
        // The dims of the size (its tunables are bound above).
        let dims: Vec<(&str, i64)> = size
            .iter()
            .copied()
            .filter(|(n, _)| !parsed.space.declares(n))
            .collect();
        let opts = RunOptions {
            seed: SEED,
            threads: 0,
        };
        let err = match interp::run(&func, &dims_of(&dims), HashMap::new(), &opts) {
            Ok(_) => panic!(
                "{name} {size:?} runs without a data race and without thread-sync's barriers: \
                 remove it from RACY"
            ),
            Err(e) => file.render_all(&[e]),
        };
        assert_located(&name, &err);
        assert!(
            err.contains("data race") && err.contains("shared"),
            "{name} {size:?}: stopped by other than a data race on shared memory:\n{err}"
        );
    }
}

/// Every file of the folder is a checked example or listed as not yet supported, and those
/// are refused — by `check`, or by `compile` for both targets — with located errors.
#[test]
fn the_other_examples_are_refused_with_located_errors() {
    let dir = tlc_tests::root().join(DIR);
    let mut stems: Vec<String> = std::fs::read_dir(&dir)
        .expect("list tests/tilelang")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "tir"))
        .map(|p| tlc_tests::stem(&p))
        .collect();
    stems.sort();
    for stem in &stems {
        let lists = [
            EXAMPLES.iter().any(|e| e.stem == stem),
            NOT_YET.contains(&stem.as_str()),
            UNINITIALIZED.iter().any(|(s, _, _)| s == stem),
        ];
        assert!(
            lists.iter().filter(|&&l| l).count() == 1,
            "{DIR}/{stem}.tir: add it to exactly one of EXAMPLES (with a reference), NOT_YET \
             or UNINITIALIZED"
        );
    }
    for (stem, _) in RACY {
        assert!(
            stems.iter().any(|s| s == stem),
            "RACY lists a missing {stem}"
        );
    }
    for stem in NOT_YET {
        assert!(
            stems.iter().any(|s| s == stem),
            "NOT_YET lists a missing {stem}"
        );
        let (name, text) = source(stem);
        let func = match check(&name, &text, &[]) {
            Err(e) => {
                assert_located(&name, &e);
                continue;
            }
            Ok(f) => f,
        };
        for target in [Target::Sm80, Target::Sm90a] {
            let err = match lower(&name, &text, &func, target) {
                Err(e) => e,
                Ok(lowered) => match emit::emit(&lowered, target) {
                    Err(diags) => SourceFile::new(&name, &text).render_all(&diags),
                    Ok(_) => panic!(
                        "{name} compiles for {target} now: move it from NOT_YET to EXAMPLES \
                         with a reference"
                    ),
                },
            };
            assert_located(&name, &err);
        }
    }
}

/// The files of [`UNINITIALIZED`] check and compile for both targets, and the tile-level
/// interpreter stops each at its read of never-written memory, located.
#[test]
fn reads_of_never_written_memory_stop_the_interpreter() {
    for (stem, size, fragment) in UNINITIALIZED {
        let (name, text) = source(stem);
        let func = check(&name, &text, size)
            .unwrap_or_else(|e| panic!("`tlc check` refuses {name}:\n{e}"));
        for target in [Target::Sm80, Target::Sm90a] {
            if let Err(e) = lower(&name, &text, &func, target) {
                panic!("{name} on {target}:\n{e}");
            }
        }
        let dims: HashMap<String, i64> = dims_of(size).into_iter().collect();
        let opts = RunOptions {
            seed: SEED,
            threads: 0,
        };
        let err = match interp::run(&func, &dims, HashMap::new(), &opts) {
            Err(e) => SourceFile::new(&name, &text).render_all(&[e]),
            Ok(_) => panic!("{name} {size:?}: the interpreter ran it to the end"),
        };
        assert_located(&name, &err);
        assert!(
            err.contains(fragment),
            "{name} {size:?}: stopped otherwise:\n{err}"
        );
    }
}

#[test]
fn hadamard_matches_its_reference() {
    check_example("hadamard");
}

/// `hadamard.tir` at its other configurations ([`HADAMARD_MORE`]): segments of fewer lanes
/// than a warp, one warp, and two exchange rounds.
#[test]
fn hadamard_matches_its_reference_at_more_sizes() {
    for sizes in HADAMARD_MORE {
        check_example_at(&Example {
            stem: "hadamard",
            sizes,
            reference: hadamard,
        });
    }
}

#[test]
fn topk_selector_matches_its_reference() {
    check_example("topk_selector");
}

/// int4 x int4 -> int32 (issue 38): the tile level against the integer reference at a
/// ragged and a whole-tile size; lowered for both targets (dims bound: `pack-int4` halves
/// the rows) — sm_80 onto mma.sync's `m16n8k64.s32.s4.s4`, sm_90a as int8 wgmmas of the
/// widened operands (`widen-int4-gemm`) — exact.
#[test]
fn gemm_int4_matches_its_reference() {
    check_example("gemm_int4");
}

/// Which tensor-core form each target's lowering of the int4 GEMM takes: sm_90a's wgmma
/// over int8 operands widened in shared memory (Hopper has no int4 rate), sm_80's packed
/// int4 mma.sync.
#[test]
fn gemm_int4_takes_wgmma_on_sm90a_and_int4_mma_on_sm80() {
    let (name, text) = source("gemm_int4");
    let size: &[(&str, i64)] = &[("M", 128), ("N", 128), ("K", 256)];
    let func = check(&name, &text, size).unwrap_or_else(|e| panic!("{name}:\n{e}"));
    let func = bind_dims(&func, size, &name);
    let hopper = lower(&name, &text, &func, Target::Sm90a)
        .unwrap_or_else(|e| panic!("{name} on sm_90a:\n{e}"));
    let printed = tlc_ir::printer::print_func(&hopper);
    assert!(printed.contains("T.wgmma("), "{printed}");
    assert!(!printed.contains("packed_int4=True"), "{printed}");
    assert!(printed.contains("A_shared_int4"), "{printed}");
    let ampere = lower(&name, &text, &func, Target::Sm80)
        .unwrap_or_else(|e| panic!("{name} on sm_80:\n{e}"));
    let printed = tlc_ir::printer::print_func(&ampere);
    assert!(printed.contains("packed_int4=True"), "{printed}");
    assert!(!printed.contains("T.wgmma("), "{printed}");
}

#[test]
fn dequant_gemm_w4a8_matches_its_reference() {
    check_example("dequant_gemm_w4a8");
}

/// TileLang's hand-written warp specialization (docs/ir.md, "Hand-written warp
/// specialization"): each example against the float64 reference at both sizes, lowered for
/// both targets (sm_80: the documented refusal where it has mbarriers).
#[test]
fn warp_specialize_examples_match_their_reference() {
    for stem in [
        "ws_gemm_barrierpipe_stage2",
        "ws_gemm_copy_0_gemm_1",
        "ws_gemm_copy_1_gemm_0",
        "ws_gemm_copy_gemm_0_1",
        "ws_gemm_softpipe_stage2",
    ] {
        check_example(stem);
    }
}

/// The hand-written schedule is kept: the lowered kernel has the block TileLang's `threads=`
/// gave (no producer warp group of tlc's `warp-specialize`), its loop is no pipeline, and
/// the warp groups' waits keep their conditions on the thread index.
#[test]
fn warp_specialize_examples_keep_their_schedule() {
    let (name, text) = source("ws_gemm_barrierpipe_stage2");
    let size: &[(&str, i64)] = &[("M", 200), ("N", 136), ("K", 200)];
    let func = check(&name, &text, size).unwrap_or_else(|e| panic!("{name}:\n{e}"));
    let lowered = lower(&name, &text, &func, Target::Sm90a)
        .unwrap_or_else(|e| panic!("{name} on sm_90a:\n{e}"));
    let printed = tlc_ir::printer::print_func(&lowered);
    assert!(printed.contains("threads=256"), "{printed}");
    assert!(!printed.contains("T.tma_load("), "{printed}");
    assert!(!printed.contains("T.setmaxnreg("), "{printed}");
    assert!(!printed.contains("T.Pipelined("), "{printed}");
    assert!(printed.contains(">= 128:"), "{printed}");
    assert!(printed.contains("< 128:"), "{printed}");
    assert_eq!(printed.matches("T.mbarrier_init(").count(), 4, "{printed}");
}

/// TileLang's GEMM examples (tests/tilelang): plain, split-K (element and tile atomics),
/// fp8 with an fp8 result (e4m3, e5m2).
#[test]
fn tilelang_gemm_examples_match_their_reference() {
    for stem in [
        "gemm",
        "gemm_splitk",
        "gemm_splitk_vectorize_atomicadd",
        "gemm_fp8",
        "gemm_fp8_e5m2",
    ] {
        check_example(stem);
    }
}

/// TileLang's `T.dynamic` with a Python name of its own (`M = T.dynamic("m")`,
/// docs/ir.md "Symbolic dimensions"): the dynamic-shape GEMM and DeepSeek's mHC post step.
#[test]
fn dims_named_apart_from_their_python_names_match_their_reference() {
    for stem in ["gemm_dynamic", "mhc_post"] {
        check_example(stem);
    }
}

#[test]
fn act_quant_fp8_matches_its_reference() {
    check_example("act_quant_fp8");
}

#[test]
fn gqa_decode_varlen_logits_matches_its_reference() {
    check_example("flash_decoding_gqa_varlen_logits");
}

#[test]
fn kda_chunk_o_matches_its_reference() {
    check_example("kda_chunk_o");
}

#[test]
fn grouped_gemm_bwd_matches_its_reference() {
    check_example("grouped_gemm_bwd");
}

#[test]
fn nsa_decode_matches_its_reference() {
    check_example("nsa_decode");
}

#[test]
fn seer_block_sparse_attn_matches_its_reference() {
    check_example("seer_block_sparse_attn");
}

#[test]
fn gqa_fwd_varlen_matches_its_reference() {
    check_example("flash_attn_gqa_fwd_varlen");
}

#[test]
fn gdn_chunk_scaled_dot_kkt_matches_its_reference() {
    check_example("gdn_chunk_scaled_dot_kkt");
}
