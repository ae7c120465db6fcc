//! Every example and valid case runs in the reference interpreter and matches a reference
//! computed here, independently, in plain Rust (f64 loop nests for gemm, elementwise
//! formulas for the rest). A new case must add its reference to `check`, or this test fails.
//!
//! Tolerances: exact where the kernel's arithmetic is exact in its dtype (f32 adds of f16
//! values, copies, integer math); gemm within `2^-23·K·Σ|a·b| + u·|ref| + 2^-24` where `u` is
//! the output dtype's unit roundoff (2^-11 float16, 2^-8 bfloat16, 2^-24 float32) — f32 accumulation error
//! plus one rounding to the output type.

use half::{bf16, f16};
use std::collections::HashMap;
use tlc_ir::interp::{self, RunOptions, Tensor};
use tlc_ir::PrimFunc;

type Outputs = HashMap<String, Tensor>;

/// Symbolic dims for cases that have them: small and ragged.
fn dims_for(stem: &str) -> Vec<(&'static str, i64)> {
    match stem {
        "elementwise_add" | "elementwise_int64_dim" | "math_and_bits" | "fp8_cast" => {
            vec![("N", 1000)]
        }
        "index_math" => vec![("M", 40)],
        // 196 blocks, the last with 40 rows; M * M + i leaves int32 once shifted by 3.
        "dim_typed_uses" => vec![("M", 25_000)],
        // Rows 0..7: b = 0 or 1, h = 0..3.
        "tilelang_spellings" => vec![("BH", 7)],
        // Two blocks of 8 rows, the second ragged (rows past M read as zeros).
        "cumsum" => vec![("M", 13)],
        // Two blocks of the combine kernel, the second ragged.
        "split_combine_scratch" => vec![("M", 45)],
        // Grid barriers: 5 blocks, each reading the others' (or its neighbours') writes.
        "grid_sync_partials" | "grid_sync_ring" => vec![("NB", 5)],
        "row_softmax" => vec![("M", 37)],
        // 19 blocks of 2 rows, the last with one.
        "reshape_tiles" => vec![("M", 37)],
        // 7 blocks of 32 generators, the last with 8 (its other threads draw, unstored).
        "rand_per_thread" => vec![("M", 200)],
        // 3 blocks of 16 rows, the last with 5.
        "macros" => vec![("M", 37)],
        // The scalar parameters given by name, as dims are: a limit inside the second block.
        "scalar_params" => vec![("M", 37), ("limit", 20), ("scale", 3)],
        // Two blocks of 32 rows, the second with 13.
        "break_continue" => vec![("M", 45)],
        // 3 blocks of 16 rows, the last with 12 (M a multiple of 4, as Y's layout needs).
        "global_layout" => vec![("M", 44)],
        // 74 chunks over 3 blocks of 25: rows 12 and 37 split between two blocks.
        "while_loops" => vec![("M", 37)],
        // 10 blocks of 4 rows, the last with one row.
        "thread_regions" => vec![("M", 37)],
        "atomic_colsum" => vec![("M", 50), ("N", 70)],
        "scale_cast" | "transpose" => vec![("M", 100), ("N", 70)],
        "gemm_bf16_transposed" | "gemm_f16_acc" => vec![("M", 100), ("N", 90), ("K", 70)],
        // 2 K tiles of 32 (the last ragged) over 4 slices of 1: slices 2 and 3 run 0 and -1
        // iterations (they add zeros); ragged 128 x 128 tiles in M and N.
        "gemm_splitk_atomic" => vec![("M", 100), ("N", 90), ("K", 40)],
        // fp8 (tile level: no K alignment needed); the block-scaled one with a ragged last
        // 128-wide K block.
        "gemm_fp8_nt" => vec![("M", 100), ("N", 90), ("K", 70)],
        // Ragged in every dim: 2 x 2 blocks, 3 k-steps of 128 (the last with 44).
        "gemm_int8" => vec![("M", 100), ("N", 150), ("K", 300)],
        // Ragged: 2 x 2 blocks of 64 x 128 (K = 320 is the file's, its last tile ragged).
        "gemm_int4" => vec![("M", 100), ("N", 150)],
        "gemm_fp8_blockscaled" | "gemm_fp8_scales_staged" => {
            vec![("M", 100), ("N", 150), ("K", 300)]
        }
        // 4 x 3 tiles of 32 x 32 over 2 blocks: 6 tile iterations each, 3 k-steps (the last
        // ragged).
        "persistent_gemm_reuse" => vec![("M", 100), ("N", 90), ("K", 70)],
        // Defaults: 128 x 128 x 32 tiles; split-K's 3 k-steps over 4 slices (one empty);
        // stream-K's one tile, all stream-K: 3 iterations over 132 programs.
        "gemm_splitk" | "gemm_streamk" => vec![("M", 100), ("N", 90), ("K", 70)],
        // Its defaults: 128 x 256 x 64 tiles, no K slices (the zeroing kernel's grid is
        // empty); ragged in every dim.
        "gemm" => vec![("M", 100), ("N", 300), ("K", 70)],
        // The seed kernel loads B with an unmasked T.Parallel loop: valid for divisible shapes only.
        "seed000_dims" => vec![("M", 256), ("N", 384), ("K", 96)],
        // Its defaults (dim 128, not causal, 128 x 128 tiles): 200 = 128 + 72 keys (a masked
        // last key tile, a partial query tile), two query heads on one KV head.
        "flash_attention" => vec![
            ("batch", 1),
            ("seq_len", 200),
            ("heads", 2),
            ("kv_heads", 1),
        ],
        _ => vec![],
    }
}

#[test]
fn every_case_matches_its_reference() {
    let mut seen: Vec<PrimFunc> = Vec::new();
    for path in tlc_tests::valid_cases() {
        let stem = tlc_tests::stem(&path);
        let text = std::fs::read_to_string(&path).expect("read case");
        let func = tlc_ir::parse(&text).unwrap_or_else(|d| panic!("{stem}: {d:?}"));
        // A tuning space at its defaults (what `tlc check` and `run --interp` take).
        let func = tlc_ir::tuning::bind(&func, &Vec::new(), &Vec::new())
            .unwrap_or_else(|d| panic!("{stem}: {d:?}"));
        // What the front end runs: per-thread code with thread-sync's barriers.
        let func =
            tlc_passes::thread_sync::thread_sync(func).unwrap_or_else(|d| panic!("{stem}: {d:?}"));
        if seen.contains(&func) {
            // The TVMScript spellings of the seed kernel are the same IR (roundtrip.rs).
            continue;
        }
        let dims: HashMap<String, i64> = dims_for(&stem)
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        let seed = 7;
        let outs = interp::run(
            &func,
            &dims,
            HashMap::new(),
            &RunOptions { seed, threads: 0 },
        )
        .unwrap_or_else(|d| panic!("{stem}: {d}"));
        let initial = |name: &str| -> Vec<f64> {
            let decl = func
                .params
                .iter()
                .find(|p| p.name.name == name)
                .expect("param");
            let shape = outs[name].shape().to_vec();
            interp::random_input(decl, &shape, seed)
                .expect("random input")
                .to_f64()
        };
        check(&stem, &outs, &initial);
        seen.push(func);
    }
}

fn check(stem: &str, o: &Outputs, initial: &dyn Fn(&str) -> Vec<f64>) {
    match stem {
        "elementwise_add" | "elementwise_int64_dim" => {
            let (a, b, c) = (o["A"].to_f64(), o["B"].to_f64(), o["C"].to_f64());
            for i in 0..c.len() {
                assert_eq!(c[i], (a[i] as f32 + b[i] as f32) as f64, "{stem}: C[{i}]");
            }
        }
        "scale_cast" => {
            let (x, y) = (o["X"].to_f64(), o["Y"].to_f64());
            for i in 0..y.len() {
                let want = f16::from_f32(x[i] as f32 * 0.5).to_f64();
                assert_eq!(y[i], want, "{stem}: Y[{i}]");
            }
        }
        "transpose" | "thread_transpose" => {
            let (a, b) = (&o["A"], &o["B"]);
            let (m, n) = (a.shape()[0], a.shape()[1]);
            for i in 0..m {
                for j in 0..n {
                    assert_eq!(b.at(&[j, i]), a.at(&[i, j]), "{stem}: B[{j}, {i}]");
                }
            }
        }
        "tma_tile_copy" => {
            // A (100, 56) copied into B (128, 64) through 32 x 64 TMA boxes: zeros outside A.
            let (a, b) = (o["A"].to_f64(), o["B"].to_f64());
            assert_eq!(
                (o["A"].shape(), o["B"].shape()),
                (&[100, 56][..], &[128, 64][..])
            );
            for i in 0..128 {
                for j in 0..64 {
                    let want = if i < 100 && j < 56 {
                        a[i * 56 + j]
                    } else {
                        0.0
                    };
                    assert_eq!(b[i * 64 + j], want, "{stem}: B[{i}, {j}]");
                }
            }
        }
        "tma_int64_origin" => {
            // Rows 0..64 of B are A's (zeros past its 100 x 56); blocks 2 and 3 load a box
            // 2^32 rows past A: wholly outside, zeros (never A's rows 64.. by truncation).
            let (a, b) = (o["A"].to_f64(), o["B"].to_f64());
            for i in 0..128 {
                for j in 0..64 {
                    let want = if i < 64 && j < 56 { a[i * 56 + j] } else { 0.0 };
                    assert_eq!(b[i * 64 + j], want, "{stem}: B[{i}, {j}]");
                }
            }
        }
        "cluster_multicast" => {
            // Block bx stores the pair's tile: A rows 32 * (bx // 2).., zeros outside A.
            let (a, b) = (o["A"].to_f64(), o["B"].to_f64());
            assert_eq!(
                (o["A"].shape(), o["B"].shape()),
                (&[100, 56][..], &[256, 64][..])
            );
            for i in 0..256 {
                let src = (i / 64) * 32 + i % 32;
                for j in 0..64 {
                    let want = if src < 100 && j < 56 {
                        a[src * 56 + j]
                    } else {
                        0.0
                    };
                    assert_eq!(b[i * 64 + j], want, "{stem}: B[{i}, {j}]");
                }
            }
        }
        "thread_vectorized" => {
            let (x, y) = (o["X"].to_f64(), o["Y"].to_f64());
            for i in 0..y.len() {
                assert_eq!(y[i], (x[i] as f32 * 2.0 + 1.0) as f64, "{stem}: Y[{i}]");
            }
        }
        "thread_level" => {
            let (a, b) = (o["A"].to_f64(), o["B"].to_f64());
            for i in 0..b.len() {
                assert_eq!(b[i], (a[i] as f32 * 2.0 + 1.0) as f64, "{stem}: B[{i}]");
            }
        }
        "warp_shfl_down" => {
            // Each warp's tree sum in f32, the order the shuffles give lane 0; lane indices
            // shifted down by 5 (the last 5 lanes keep their own); lane 0 takes lane 31's
            // float16, the others keep theirs.
            let (a, s, l, h) = (
                o["A"].to_f64(),
                o["S"].to_f64(),
                o["L"].to_f64(),
                o["H"].to_f64(),
            );
            let down = |lane: usize, by: usize| if lane + by < 32 { lane + by } else { lane };
            for w in 0..8 {
                let mut acc: Vec<f32> = (0..32).map(|l| a[w * 32 + l] as f32).collect();
                for by in [16, 8, 4, 2, 1] {
                    acc = (0..32).map(|l| acc[l] + acc[down(l, by)]).collect();
                }
                assert_eq!(s[w], acc[0] as f64, "{stem}: S[{w}]");
                for lane in 0..32 {
                    let t = w * 32 + lane;
                    assert_eq!(l[t], down(lane, 5) as f64, "{stem}: L[{t}]");
                    let want = f16::from_f32(a[w * 32 + down(lane, 31)] as f32).to_f64();
                    assert_eq!(h[t], want, "{stem}: H[{t}]");
                }
            }
        }
        "atomic_add_prev" => {
            // Any order of the adds is a valid run (the interpreter's is thread order): each
            // bin's slots (P) are 0..count and the counts are the bins' sizes; F's old values
            // are 0.5 + 1.5 k, k = 0..64, once each; L's old values, sorted, are 5e9 plus
            // the prefix sums of the thread indices in the order their adds ran.
            let f = |n: &str| o[n].to_f64();
            let (a, p, c, fl, l) = (f("A"), f("P"), f("C"), f("F"), f("L"));
            for (bin, &count) in c.iter().enumerate() {
                let members: Vec<usize> = (0..64)
                    .filter(|&t| a[t].rem_euclid(4.0) as usize == bin)
                    .collect();
                let mut slots: Vec<i64> = members.iter().map(|&t| p[t] as i64).collect();
                slots.sort_unstable();
                let want: Vec<i64> = (0..members.len() as i64).collect();
                assert_eq!(slots, want, "{stem}: the slots of bin {bin}");
                assert_eq!(count, members.len() as f64, "{stem}: C[{bin}]");
            }
            let mut olds: Vec<f64> = fl.clone();
            olds.sort_by(f64::total_cmp);
            let want: Vec<f64> = (0..64).map(|k| 0.5 + 1.5 * k as f64).collect();
            assert_eq!(olds, want, "{stem}: F");
            // Thread t's old value plus t is the next add's old value, in the order they ran.
            let mut order: Vec<usize> = (0..64).collect();
            order.sort_by(|&x, &y| l[x].total_cmp(&l[y]));
            assert_eq!(l[order[0]], 5e9, "{stem}: the first add's old value");
            for w in order.windows(2) {
                assert_eq!(
                    l[w[1]],
                    l[w[0]] + w[0] as f64,
                    "{stem}: L after thread {}",
                    w[0]
                );
            }
        }
        "warp_shfl_sync" => {
            // CUDA's documented rules, lane by lane (the header's table): a segment is
            // `width` lanes; a source past the segment's end (before its start for `up`)
            // gives the lane its own value.
            let f = |n: &str| o[n].to_f64();
            let (a, h, i, b8, l64) = (f("A"), f("H"), f("I"), f("B8"), f("L64"));
            let seg = |l: usize, w: usize| l / w * w;
            for t in 0..96 {
                let (w, l) = (t / 32, t % 32);
                let at = |j: usize| w * 32 + j;
                assert_eq!(f("P")[t], a[at((5 * l + 3) % 32)], "{stem}: P[{t}]");
                let j = l ^ (l % 16);
                let j = if j < seg(l, 8) + 8 { j } else { l };
                let want = (a[at(j)] as f32 * 2.0) as f64;
                assert_eq!(f("X")[t], want, "{stem}: X[{t}]");
                let j = l + l % 5;
                let j = if j < seg(l, 16) + 16 { j } else { l };
                assert_eq!(f("D")[t], h[at(j)], "{stem}: D[{t}]");
                let j = if l > w { l - (w + 1) } else { l };
                assert_eq!(f("U")[t], i[at(j)], "{stem}: U[{t}]");
                assert_eq!(f("Q")[t], b8[at(l ^ 1)], "{stem}: Q[{t}]");
                assert_eq!(f("L")[t], l64[at(31 - l)], "{stem}: L[{t}]");
                let want = if l < 16 { a[at((l + 1) % 16)] } else { a[t] };
                assert_eq!(f("M")[t], want, "{stem}: M[{t}]");
            }
        }
        "warp_shfl_small_block" => {
            // 8 lanes: lane (t + 3) % 8 and lane t ^ 2, a float32 sum.
            let (a, s) = (o["A"].to_f64(), o["S"].to_f64());
            for t in 0..8 {
                let want = (a[(t + 3) % 8] as f32 + a[t ^ 2] as f32) as f64;
                assert_eq!(s[t], want, "{stem}: S[{t}]");
            }
        }
        "named_barrier" => {
            // R is A doubled and reversed (through shared memory, behind barrier 1); B the
            // last warpgroup's thread indices.
            let (a, r, b) = (o["A"].to_f64(), o["R"].to_f64(), o["B"].to_f64());
            for t in 0..256 {
                assert_eq!(r[t], a[255 - t] * 2.0, "{stem}: R[{t}]");
            }
            for (t, v) in b.iter().enumerate() {
                assert_eq!(*v, (t + 256) as f64, "{stem}: B[{t}]");
            }
        }
        "ping_pong_barriers" => {
            // The two warpgroups' turns alternate, the first first.
            assert_eq!(
                o["R"].to_f64(),
                vec![0.0, 2.0, 4.0, 6.0, 1.0, 3.0, 5.0, 7.0],
                "{stem}: R"
            );
        }
        "layouts_and_fill" => {
            let (a, c) = (o["A"].to_f64(), o["C"].to_f64());
            for i in 0..c.len() {
                assert_eq!(c[i], (1.5f32 + a[i] as f32) as f64, "{stem}: C[{i}]");
            }
        }
        "index_math" => {
            // Every index expression reduces to the plain (row, column): B = 2 * A.
            let (a, b) = (o["A"].to_f64(), o["B"].to_f64());
            for i in 0..b.len() {
                assert_eq!(b[i], (a[i] as f32 * 2.0) as f64, "{stem}: B[{i}]");
            }
        }
        "swizzle_panels" => {
            // Rasterization permutes blocks, never results: bx, by stay the logical indices.
            let (a, b, c) = (&o["A"], &o["B"], &o["C"]);
            for i in 0..28 {
                for j in 0..20 {
                    let want =
                        (a.to_f64()[i * 20 + j] as f32 + ((j / 4) * 10 + i / 4) as f32) as f64;
                    assert_eq!(b.to_f64()[i * 20 + j], want, "{stem}: B[{i}, {j}]");
                }
            }
            for r in 0..20 {
                for col in 0..24 {
                    let want = ((col / 4) * 100 + (r / 4) * 10 + r % 4 + col % 4) as f64;
                    assert_eq!(c.to_f64()[r * 24 + col], want, "{stem}: C[{r}, {col}]");
                }
            }
        }
        "two_kernels_chain" => {
            // The second kernel reads B as the first wrote it (B's random initial values
            // would show in C if the kernels ran out of order).
            let (a, b, c) = (o["A"].to_f64(), o["B"].to_f64(), o["C"].to_f64());
            assert_ne!(initial("B"), b, "{stem}: B was not written");
            for i in 0..128 {
                for j in 0..256 {
                    let want = (a[i * 256 + j] as f32 * 2.0 + 1.0) as f64;
                    assert_eq!(b[i * 256 + j], want, "{stem}: B[{i}, {j}]");
                    let want = (want as f32 + 1.0) as f64;
                    assert_eq!(c[j * 128 + i], want, "{stem}: C[{j}, {i}]");
                }
            }
        }
        "unroll_nest" => {
            let a = o["A"].to_f64();
            let mut want = initial("B");
            for bx in 0..2 {
                let mut acc = [0f32; 4];
                for r in 1..3 {
                    let scale = r as f32 * 0.5;
                    for (c, slot) in acc.iter_mut().enumerate().take(r) {
                        let row = bx * 4 + r + c;
                        *slot += a[row * 16 + r * 4 + c] as f32 * scale;
                    }
                }
                for (t, v) in acc.iter().enumerate() {
                    want[(bx * 4 + t) * 16] = *v as f64;
                }
            }
            assert_eq!(o["B"].to_f64(), want, "{stem}: B");
        }
        "math_and_bits" => check_math_and_bits(o),
        "fp8_cast" => check_fp8_cast(o),
        "int8_ops" => check_int8_ops(o),
        "dim_typed_uses" => check_dim_typed_uses(o),
        "tilelang_spellings" => check_tilelang_spellings(o, initial),
        "reinterpret_int16" => check_reinterpret_int16(o),
        "cumsum" => check_cumsum(o),
        "sync_threads_named" => check_sync_threads_named(o, initial),
        "split_combine_scratch" => check_split_combine_scratch(o),
        "grid_sync_partials" => check_grid_sync_partials(o),
        "grid_sync_ring" => check_grid_sync_ring(o),
        "row_softmax" => check_row_softmax(o),
        "reshape_tiles" => check_reshape_tiles(o),
        "rand_per_thread" => check_rand_per_thread(o),
        "macros" => check_macros(o),
        "scalar_params" => check_scalar_params(o),
        "break_continue" => check_break_continue(o, initial),
        "global_layout" => check_global_layout(o, initial),
        "atomic_colsum" => check_atomic_colsum(o, initial),
        "copy_regions" => check_copy_regions(o, initial),
        "control_flow" => check_control_flow(o, initial),
        "while_loops" => check_while_loops(o, initial),
        "thread_regions" => check_thread_regions(o),
        "gemm_seed000" | "seed000_dsl" | "seed000_dims" | "gemm" => {
            check_gemm(stem, o, false, Round::F16);
        }
        "gemm_bf16_transposed" => check_gemm(stem, o, true, Round::Bf16),
        "persistent_gemm_reuse" => check_gemm(stem, o, false, Round::F16),
        "loop_carried_shared" => check_loop_carried_shared(o),
        "gemm_f16_acc" => check_gemm_f16_acc(stem, o),
        // float32 atomics of float32 partial sums: one float32 sum in some association.
        "gemm_streamk" => check_gemm(stem, o, false, Round::F32),
        "gemm_splitk" => check_gemm_split_f16(stem, o, 4),
        // Partial tiles: the 50 x 40 result of 128 x 128 tiles, the masked rows not written.
        "gemm_partial_tile" => check_gemm(stem, o, false, Round::F16),
        "gemm_threads_2d" => check_gemm(stem, o, false, Round::F32),
        // C zeroed by the first kernel, then every K slice's partial tile atomically added:
        // C = A @ B within the f32 accumulation bound (which covers the adds' order too).
        "gemm_splitk_atomic" => check_gemm(stem, o, false, Round::F32),
        // fp8 products are exact in f32: the f16 gemm's bound holds.
        "gemm_fp8_nt" => check_gemm(stem, o, true, Round::F32),
        "gemm_int8" | "gemm_int4" => check_gemm_int8(o),
        "gemm_fp8_blockscaled" => check_blockscaled_fp8(stem, o, false),
        "gemm_fp8_scales_staged" => check_blockscaled_fp8(stem, o, true),
        "gemm_column_max_into_rows" => check_column_max_into_rows(stem, o),
        "flash_attention" => check_flash_attention(stem, o),
        "notes" => {
            // Notes mean nothing: C = A @ B, then D = C * 2 + 1.
            check_gemm(stem, o, false, Round::F32);
            let (c, d) = (o["C"].to_f64(), o["D"].to_f64());
            for i in 0..d.len() {
                assert_eq!(d[i], (c[i] as f32 * 2.0 + 1.0) as f64, "{stem}: D[{i}]");
            }
        }
        // Printing changes nothing: B is A doubled.
        "print" => {
            let (a, b) = (o["A"].to_f64(), o["B"].to_f64());
            for i in 0..b.len() {
                assert_eq!(b[i], (a[i] as f32 * 2.0) as f64, "{stem}: B[{i}]");
            }
        }
        "allreduce_across_warps" => {
            // SA: the sum over the 32 y threads of each of the 2 columns (float16 steps:
            // within the rounding of 5 float16 additions); SB: the max of all 128, exact;
            // SD: over the 8 y threads of each of the 3 columns, weights y + 1 (float32).
            let (a, sa) = (o["A"].to_f64(), o["SA"].to_f64());
            for l in 0..64 {
                let want: f64 = (0..32).map(|k| a[l % 2 + 2 * k]).sum();
                let scale: f64 = (0..32).map(|k| a[l % 2 + 2 * k].abs()).sum();
                assert!(
                    (sa[l] - want).abs() <= 5e-3 * scale + 1e-3,
                    "{stem}: SA[{l}] = {} vs {want}",
                    sa[l]
                );
            }
            let (b, sb) = (o["B"].to_f64(), o["SB"].to_f64());
            let max = b.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            assert!(
                sb.iter().all(|&v| v == max),
                "{stem}: SB is not max(B) = {max}"
            );
            let (d, sd) = (o["D"].to_f64(), o["SD"].to_f64());
            for l in 0..24 {
                let want: f64 = (0..8).map(|y| d[l % 3 + 3 * y] * (y + 1) as f64).sum();
                let scale: f64 = (0..8)
                    .map(|y| (d[l % 3 + 3 * y] * (y + 1) as f64).abs())
                    .sum();
                assert!(
                    (sd[l] - want).abs() <= 1e-6 * scale + 1e-6,
                    "{stem}: SD[{l}] = {} vs {want}",
                    sd[l]
                );
            }
        }
        other => panic!("no reference for case `{other}`: add one to tests/tests/interp_cases.rs"),
    }
}

/// `examples/flash_attention.tir` at its defaults (dim 128, not causal): Output[b, i, h, :] =
/// Σ_j w_j V[b, j, g, :] / Σ_j w_j, w_j = exp(Q[b, i, h] · K[b, j, g] / sqrt(dim) − max), with
/// KV head g = h / (heads / kv_heads), in f64. Tolerance 2^-10·(max|V| + |ref|): P rounded to
/// float16 for the second product (2^-11 of each term of a convex combination of V's values)
/// and the float16 output (2^-11·|ref|); the float32 work is orders of magnitude below.
fn check_flash_attention(stem: &str, o: &Outputs) {
    let (q, k, v) = (&o["Q"], &o["K"], &o["V"]);
    let (batch, seq, heads, dim) = (q.shape()[0], q.shape()[1], q.shape()[2], q.shape()[3]);
    let kv_heads = k.shape()[2];
    let (qv, kv, vv, out) = (q.to_f64(), k.to_f64(), v.to_f64(), o["Output"].to_f64());
    let vmax = vv.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    for b in 0..batch {
        for h in 0..heads {
            let g = h / (heads / kv_heads);
            for i in 0..seq {
                let qrow = &qv[((b * seq + i) * heads + h) * dim..][..dim];
                let scores: Vec<f64> = (0..seq)
                    .map(|j| {
                        let krow = &kv[((b * seq + j) * kv_heads + g) * dim..][..dim];
                        let dot: f64 = qrow.iter().zip(krow).map(|(x, y)| x * y).sum();
                        dot / (dim as f64).sqrt()
                    })
                    .collect();
                let top = scores.iter().fold(f64::NEG_INFINITY, |m, &s| m.max(s));
                let w: Vec<f64> = scores.iter().map(|s| (s - top).exp()).collect();
                let total: f64 = w.iter().sum();
                for c in 0..dim {
                    let want = (0..seq)
                        .map(|j| w[j] * vv[((b * seq + j) * kv_heads + g) * dim + c])
                        .sum::<f64>()
                        / total;
                    let got = out[((b * seq + i) * heads + h) * dim + c];
                    let tol = 2f64.powi(-10) * (vmax + want.abs());
                    assert!(
                        (got - want).abs() <= tol,
                        "{stem}: Output[{b}, {i}, {h}, {c}] = {got}, reference {want}, tol {tol}"
                    );
                }
            }
        }
    }
}

#[derive(Clone, Copy)]
enum Round {
    F16,
    Bf16,
    F32,
}

/// `gemm_int8.tir`, `gemm_int4.tir`: C = A @ B^T in integers, exactly (the sums stay
/// inside int32).
fn check_gemm_int8(o: &Outputs) {
    let (a, b, c) = (o["A"].to_f64(), o["B"].to_f64(), o["C"].to_f64());
    let (m, k) = (o["A"].shape()[0], o["A"].shape()[1]);
    let n = o["C"].shape()[1];
    assert!(a.iter().any(|&x| x != 0.0), "gemm_int8: A is all zeros");
    for i in 0..m {
        for j in 0..n {
            let want: i64 = (0..k)
                .map(|kk| a[i * k + kk] as i64 * b[j * k + kk] as i64)
                .sum();
            assert_eq!(c[i * n + j], want as f64, "gemm_int8: C[{i}, {j}]");
        }
    }
}

/// C = A @ B (or A @ B^T), checked on every element when small, else on a fixed sample.
fn check_gemm(stem: &str, o: &Outputs, b_transposed: bool, round: Round) {
    let (a, b, c) = (&o["A"], &o["B"], &o["C"]);
    let (m, k) = (a.shape()[0], a.shape()[1]);
    let n = c.shape()[1];
    let (av, bv, cv) = (a.to_f64(), b.to_f64(), c.to_f64());
    let b_at = |kk: usize, j: usize| {
        if b_transposed {
            bv[j * k + kk]
        } else {
            bv[kk * n + j]
        }
    };
    let u = match round {
        Round::F16 => 2f64.powi(-11),
        Round::Bf16 => 2f64.powi(-8),
        Round::F32 => 2f64.powi(-24),
    };
    let positions: Vec<(usize, usize)> = if m * n <= 40_000 {
        (0..m).flat_map(|i| (0..n).map(move |j| (i, j))).collect()
    } else {
        // A deterministic spread over the matrix, corners and edges included.
        let mut p = vec![(0, 0), (m - 1, n - 1), (0, n - 1), (m - 1, 0)];
        p.extend((0..400).map(|s| ((s * 7919) % m, (s * 104_729) % n)));
        p
    };
    for (i, j) in positions {
        let (mut sum, mut mag) = (0.0f64, 0.0f64);
        for kk in 0..k {
            let p = av[i * k + kk] * b_at(kk, j);
            sum += p;
            mag += p.abs();
        }
        let tol = 2f64.powi(-23) * k as f64 * mag + u * sum.abs() + 2f64.powi(-24);
        let got = cv[i * n + j];
        assert!(
            (got - sum).abs() <= tol,
            "{stem}: C[{i}, {j}] = {got}, reference {sum}, tol {tol}"
        );
    }
    // The rounding really is to the output type.
    let first = cv[0];
    let rounded = match round {
        Round::F16 => f16::from_f64(first).to_f64(),
        Round::Bf16 => bf16::from_f64(first).to_f64(),
        Round::F32 => f64::from(first as f32),
    };
    assert_eq!(first, rounded, "{stem}: C is not rounded to its dtype");
}

/// `gemm_column_max_into_rows`: per 128 x 128 tile (by, bx) of G = A @ B (float32),
/// `ColMax[by, bx·128 + j] = max_i G[i, j]` over the tile's rows, and
/// `C[i, j] = G[i, j] - colmax[i]` (the maximum of the tile's column numbered like the
/// row). Each G element is within the f32 accumulation bound of its f64 sum; a maximum is
/// within the largest bound of its column; the difference adds one f32 rounding.
fn check_column_max_into_rows(stem: &str, o: &Outputs) {
    let (a, b, c, colmax) = (&o["A"], &o["B"], &o["C"], &o["ColMax"]);
    let (m, k, n) = (a.shape()[0], a.shape()[1], b.shape()[1]);
    let (av, bv, cv, mv) = (a.to_f64(), b.to_f64(), c.to_f64(), colmax.to_f64());
    // The f64 product and its error bound.
    let mut g = vec![(0.0f64, 0.0f64); m * n];
    for i in 0..m {
        for j in 0..n {
            let (mut sum, mut mag) = (0.0f64, 0.0f64);
            for kk in 0..k {
                let p = av[i * k + kk] * bv[kk * n + j];
                sum += p;
                mag += p.abs();
            }
            g[i * n + j] = (sum, 2f64.powi(-23) * k as f64 * mag + 2f64.powi(-24));
        }
    }
    for by in 0..m / 128 {
        for bx in 0..n / 128 {
            // (max, its tolerance) of each of the tile's columns.
            let col: Vec<(f64, f64)> = (0..128)
                .map(|j| {
                    (0..128).fold((f64::NEG_INFINITY, 0.0f64), |(best, tol), i| {
                        let (v, t) = g[(by * 128 + i) * n + bx * 128 + j];
                        (best.max(v), tol.max(t))
                    })
                })
                .collect();
            for (j, &(want, tol)) in col.iter().enumerate() {
                let got = mv[by * n + bx * 128 + j];
                assert!(
                    (got - want).abs() <= tol,
                    "{stem}: ColMax[{by}, {}] = {got}, reference {want}, tol {tol}",
                    bx * 128 + j
                );
            }
            for i in 0..128 {
                for j in 0..128 {
                    let (r, (v, t)) = (by * 128 + i, g[(by * 128 + i) * n + bx * 128 + j]);
                    let want = v - col[i].0;
                    let tol = t + col[i].1 + 2f64.powi(-24) * (want.abs() + 1.0);
                    let got = cv[r * n + bx * 128 + j];
                    assert!(
                        (got - want).abs() <= tol,
                        "{stem}: C[{r}, {}] = {got}, reference {want}, tol {tol}",
                        bx * 128 + j
                    );
                }
            }
        }
    }
}

/// C = A @ B (float16) summed in `slices` float32 partial sums, each rounded to float16 and
/// added into the zeroed C in float16 (`examples/gemm_splitk.tir`): the float32 error of the
/// sums, plus at most one float16 rounding per slice and per add, each of a value no larger
/// than `Σ|a·b|` (plus the error so far).
/// C (bfloat16) = Σ_kb (Σ_{k in block kb} A·B) · sa[m, kb] · sb[n / 128, kb], A (M, K) and
/// B (N, K) fp8: each block's float32 sum within `2^-23·len·Σ|a·b|` times its scale, the
/// scale's and the scaled term's float32 roundings, the blocks' float32 sum, one rounding to
/// bfloat16. `m_major`: `scales_a` is (ceil(K / 128), M), DeepGEMM's M-major layout
/// (`gemm_fp8_scales_staged.tir`).
fn check_blockscaled_fp8(stem: &str, o: &Outputs, m_major: bool) {
    let (a, b, c) = (&o["A"], &o["B"], &o["C"]);
    let (m, k, n) = (a.shape()[0], a.shape()[1], b.shape()[0]);
    let blocks = k.div_ceil(128);
    let (av, bv, cv) = (a.to_f64(), b.to_f64(), c.to_f64());
    let (sa_all, sb) = (o["scales_a"].to_f64(), o["scales_b"].to_f64());
    let sa = |i: usize, kb: usize| {
        if m_major {
            sa_all[kb * m + i]
        } else {
            sa_all[i * blocks + kb]
        }
    };
    let (u32, u) = (2f64.powi(-24), 2f64.powi(-8));
    for i in 0..m {
        for j in 0..n {
            let (mut sum, mut tol, mut terms) = (0.0f64, 0.0f64, 0.0f64);
            for kb in 0..blocks {
                let ks = kb * 128..(kb * 128 + 128).min(k);
                let len = ks.len() as f64;
                let (mut block, mut mag) = (0.0f64, 0.0f64);
                for kk in ks {
                    let p = av[i * k + kk] * bv[j * k + kk];
                    block += p;
                    mag += p.abs();
                }
                let scale = (sa(i, kb) * sb[(j / 128) * blocks + kb]).abs();
                let term = block * sa(i, kb) * sb[(j / 128) * blocks + kb];
                sum += term;
                terms += term.abs();
                tol += 2.0 * u32 * len * mag * scale + 3.0 * u32 * term.abs();
            }
            tol += 2.0 * u32 * blocks as f64 * terms + u * (sum.abs() + tol) + 2f64.powi(-100);
            let got = cv[i * n + j];
            assert!(
                (got - sum).abs() <= tol,
                "{stem}: C[{i}, {j}] = {got}, reference {sum}, tol {tol}"
            );
        }
    }
}

fn check_gemm_split_f16(stem: &str, o: &Outputs, slices: usize) {
    let (a, b, c) = (&o["A"], &o["B"], &o["C"]);
    let (m, k, n) = (a.shape()[0], a.shape()[1], c.shape()[1]);
    let (av, bv, cv) = (a.to_f64(), b.to_f64(), c.to_f64());
    let u16 = 2f64.powi(-11);
    for i in 0..m {
        for j in 0..n {
            let (mut sum, mut mag) = (0.0f64, 0.0f64);
            for kk in 0..k {
                let p = av[i * k + kk] * bv[kk * n + j];
                sum += p;
                mag += p.abs();
            }
            let tol = 2f64.powi(-23) * k as f64 * mag
                + (2 * slices + 1) as f64 * u16 * mag * 1.01
                + 2f64.powi(-20);
            let got = cv[i * n + j];
            assert!(
                (got - sum).abs() <= tol,
                "{stem}: C[{i}, {j}] = {got}, reference {sum}, tol {tol}"
            );
            assert_eq!(got, f16::from_f64(got).to_f64(), "{stem}: C is float16");
        }
    }
}

/// C = A @ B^T accumulated in float16 (`gemm_f16_acc`): the f64 sum within the bound of
/// one f16 rounding per K step of 16 (`ceil(K/16) · 2^-11 · Σ|a·b|`, the running value
/// never exceeding `Σ|a·b|` by more than that) plus the f32 sums' error; and exactly the
/// documented semantics (docs/ir.md, `T.gemm`): per 32-wide K tile (zero-filled past K),
/// steps of 16 summed in f32 from 0, added to the f16 accumulator in f32, rounded to f16.
fn check_gemm_f16_acc(stem: &str, o: &Outputs) {
    let (a, b, c) = (&o["A"], &o["B"], &o["C"]);
    let (m, k) = (a.shape()[0], a.shape()[1]);
    let n = c.shape()[1];
    let (av, bv, cv) = (a.to_f64(), b.to_f64(), c.to_f64());
    let steps = k.div_ceil(16) as f64;
    for i in 0..m {
        for j in 0..n {
            let (mut sum, mut mag) = (0.0f64, 0.0f64);
            let mut acc = f16::from_f64(0.0);
            for k0 in (0..k).step_by(16) {
                let mut s = 0f32;
                for kk in k0..(k0 + 16).min(k) {
                    let p = av[i * k + kk] * bv[j * k + kk];
                    sum += p;
                    mag += p.abs();
                    s += av[i * k + kk] as f32 * bv[j * k + kk] as f32;
                }
                acc = f16::from_f32(acc.to_f32() + s);
            }
            let got = cv[i * n + j];
            let tol = 2f64.powi(-23) * k as f64 * mag
                + steps * 2f64.powi(-11) * mag * (1.0 + 2f64.powi(-10))
                + 2f64.powi(-24);
            assert!(
                (got - sum).abs() <= tol,
                "{stem}: C[{i}, {j}] = {got}, reference {sum}, tol {tol}"
            );
            assert_eq!(got, acc.to_f64(), "{stem}: C[{i}, {j}] (f16 steps)");
        }
    }
}

fn check_copy_regions(o: &Outputs, initial: &dyn Fn(&str) -> Vec<f64>) {
    let (a, v, out) = (o["A"].to_f64(), o["V"].to_f64(), o["O"].to_f64());
    let mut want = initial("O");
    for bx in 0..2usize {
        // S = A[bx*64 .. bx*64+64, :], with row 3 replaced by V[bx, :].
        let s = |i: usize, j: usize| {
            if i == 3 {
                v[bx * 128 + j]
            } else {
                a[(bx * 64 + i) * 128 + j]
            }
        };
        for i in 0..32 {
            for j in 0..64 {
                want[(bx * 64 + i) * 128 + j] = s(i, 64 + j);
                want[(bx * 64 + 32 + i) * 128 + 64 + j] = s(32 + i, j);
            }
        }
    }
    assert_eq!(out, want, "copy_regions: O");
}

fn check_control_flow(o: &Outputs, initial: &dyn Fn(&str) -> Vec<f64>) {
    let a = o["A"].to_f64();
    let mut want = initial("B");
    for bx in 0..2i64 {
        let mut acc = [0f32; 4];
        for r in 1..3 {
            for (u, slot) in acc.iter_mut().enumerate() {
                *slot += a[((bx * 32 + r) * 64) as usize + u] as f32 * -2.5;
            }
        }
        for j in 0..8i64 {
            let base = bx * 32 + j * 4;
            let half = base.div_euclid(2) - (base.rem_euclid(3) - 1);
            let value = if base < 16 && j != 3 {
                half.min(7)
            } else if base >= 40 || j != 5 {
                (-half).max((base + 4) / 5)
            } else {
                (if acc[0] > 0.001 { acc[1] } else { acc[2] }).trunc() as i64
            };
            want[base as usize] = value as f64;
        }
    }
    assert_eq!(o["B"].to_f64(), want, "control_flow: B");
}

/// `while_loops.tir`: S[r] gains the sum of row r of A (int32, exact in any order), and
/// D[b, j] is the least d >= 0 with d * d >= A[b, j] + 8.
fn check_while_loops(o: &Outputs, initial: &dyn Fn(&str) -> Vec<f64>) {
    let a = o["A"].to_f64();
    let mut want = initial("S");
    for (r, slot) in want.iter_mut().enumerate() {
        *slot += a[r * 64..(r + 1) * 64].iter().sum::<f64>();
    }
    assert_eq!(o["S"].to_f64(), want, "while_loops: S");
    let mut want_d = Vec::new();
    for b in 0..3 {
        for j in 0..32 {
            let target = a[b * 64 + j] + 8.0;
            want_d.push(
                (0..)
                    .map(f64::from)
                    .find(|d| d * d >= target)
                    .unwrap_or(0.0),
            );
        }
    }
    assert_eq!(o["D"].to_f64(), want_d, "while_loops: D");
}

/// `thread_regions.tir`: twice, every column of a row becomes its mirrored column times 0.5
/// plus itself, each operation rounded to float32.
fn check_thread_regions(o: &Outputs) {
    let r = |v: f64| f64::from(v as f32);
    let a = o["A"].to_f64();
    let mut want = Vec::with_capacity(a.len());
    for row in a.chunks(128) {
        let mut s = row.to_vec();
        for _ in 0..2 {
            let mirrored: Vec<f64> = (0..128).map(|j| r(s[127 - j] * 0.5)).collect();
            s = (0..128).map(|j| r(mirrored[j] + s[j])).collect();
        }
        want.extend(s);
    }
    assert_eq!(o["B"].to_f64(), want, "thread_regions: B");
}

/// `loop_carried_shared.tir`: acc[j] sums A[i, 63 - j] over the rows so far in float32, in
/// row order; B[i] is twice acc after row i, S is acc at the end.
fn check_loop_carried_shared(o: &Outputs) {
    let a = o["A"].to_f64();
    let mut acc = [0f32; 64];
    let mut want_b = Vec::with_capacity(8 * 64);
    for i in 0..8 {
        for (j, slot) in acc.iter_mut().enumerate() {
            *slot += a[i * 64 + 63 - j] as f32;
        }
        want_b.extend(acc.iter().map(|&v| f64::from(v * 2.0)));
    }
    assert_eq!(o["B"].to_f64(), want_b, "loop_carried_shared: B");
    let want_s: Vec<f64> = acc.iter().map(|&v| f64::from(v)).collect();
    assert_eq!(o["S"].to_f64(), want_s, "loop_carried_shared: S");
}

/// `math_and_bits.tir`: every float operation rounded to float32 (math functions exact,
/// then rounded once; a multiply-add is one `T.fma`, rounded once: docs/ir.md
/// "Contraction"), integer bit operations at 32 bits.
fn check_math_and_bits(o: &Outputs) {
    let r = |v: f64| f64::from(v as f32);
    let fma = |a: f64, b: f64, c: f64| f64::from((a as f32).mul_add(b as f32, c as f32));
    let (x, k) = (o["X"].to_f64(), o["K"].to_f64());
    let (y, z, w) = (o["Y"].to_f64(), o["Z"].to_f64(), o["W"].to_f64());
    for g in 0..y.len() {
        let xv = x[g];
        // `T.clamp` is `T.min(T.max(x, lo), hi)`: NaN-ignoring, unlike `f64::clamp`.
        #[allow(clippy::manual_clamp)]
        let clamped = xv.max(-1.0).min(1.0);
        let t = r(clamped * r(std::f64::consts::LOG2_E));
        let y1 = r(r(r(t.exp2()) + r(xv.abs().sqrt())) - r(1.0 / fma(xv, xv, 1.0).sqrt()));
        let log = r(r(xv.abs() + 1.0).ln());
        let frac = r(r(r(xv * 4.0).floor()) / 4.0);
        let y2 = r(y1 + fma(log, r(xv.tanh()), frac));
        assert_eq!(y[g], y2, "math_and_bits: Y[{g}]");
        let kv = k[g] as i32;
        let first = (kv.wrapping_shl(3) | ((kv >> 29) & 7)) ^ !(g as i32);
        let want_z = first ^ (kv >> ((g % 128) as i32 & 31));
        assert_eq!(z[g] as i32, want_z, "math_and_bits: Z[{g}]");
        let half = |v: f64| f16::from_f64(v).to_f64();
        let want_w = half(half(half(y2) * 0.5) * 0.5);
        assert_eq!(w[g], want_w, "math_and_bits: W[{g}]");
    }
}

/// `fp8_cast.tir`: float32 arithmetic rounded to the fp8 format of each result (round to
/// nearest even, saturating: `fp8::round`), literals rounded to the operation's dtype.
fn check_fp8_cast(o: &Outputs) {
    use tlc_ir::interp::fp8::{round, E4M3, E5M2};
    let r = |v: f64| f64::from(v as f32);
    let (x, h) = (o["X"].to_f64(), o["H"].to_f64());
    let (y, z, w) = (o["Y"].to_f64(), o["Z"].to_f64(), o["W"].to_f64());
    let (p, q) = (o["P"].to_f64(), o["Q"].to_f64());
    for g in 0..x.len() {
        let want_y = round(E4M3, r(x[g] * 600.0));
        assert_eq!(y[g], want_y, "fp8_cast: Y[{g}]");
        let want_z = round(E5M2, r(x[g] * 100000.0));
        assert_eq!(z[g], want_z, "fp8_cast: Z[{g}]");
        assert_eq!(w[g], r(want_y + want_z), "fp8_cast: W[{g}]");
        // 0.3 is 0.3125 in e4m3; y * 0.125 is exact.
        assert_eq!(round(E4M3, 0.3), 0.3125);
        let want_p = round(E4M3, r(round(E4M3, want_y * 0.125) - 0.3125)).max(-want_y);
        assert_eq!(p[g], want_p, "fp8_cast: P[{g}]");
        let thousandth = f16::from_f64(0.001).to_f64();
        let want_q = round(E5M2, f16::from_f64(r(h[g] * thousandth)).to_f64());
        assert_eq!(q[g], want_q, "fp8_cast: Q[{g}]");
    }
}

/// `int8_ops.tir`: int8 / uint8 arithmetic wraps to the width (so the whole expression
/// does, modulo 256), `>>` is arithmetic on int8 and logical on uint8, float → int8
/// truncates and saturates.
/// `dim_typed_uses.tir`: the dim `M` is an int32 name in every use (docs/ir.md, "Symbolic
/// dimensions"): `M - A` in int32, `M * 0.5` a float32 that the float16 `H` widens to, a
/// `T.if_then_else` side in int32, `(M * M + i) << 3` shifted at 32 bits.
fn check_dim_typed_uses(o: &Outputs) {
    let (a, h) = (o["A"].to_f64(), o["H"].to_f64());
    let m = a.len() as i64;
    for g in 0..a.len() {
        let (av, i) = (a[g] as i64, (g % 128) as i64);
        assert_eq!(
            o["C"].to_f64()[g],
            (m - av) as f64,
            "dim_typed_uses: C[{g}]"
        );
        let want_f = (m as f32 * 0.5) * h[g] as f32;
        assert_eq!(
            o["F"].to_f64()[g],
            f64::from(want_f),
            "dim_typed_uses: F[{g}]"
        );
        let want_s = if i < 64 { m } else { av };
        assert_eq!(o["S"].to_f64()[g], want_s as f64, "dim_typed_uses: S[{g}]");
        let want_x = ((m * m + i) as i32).wrapping_shl(3);
        assert_eq!(
            o["X"].to_f64()[g],
            f64::from(want_x),
            "dim_typed_uses: X[{g}]"
        );
    }
}

fn check_int8_ops(o: &Outputs) {
    let (a, b, m, x) = (
        o["A"].to_f64(),
        o["B"].to_f64(),
        o["M"].to_f64(),
        o["X"].to_f64(),
    );
    let (c, d, e, f, g) = (
        o["C"].to_f64(),
        o["D"].to_f64(),
        o["E"].to_f64(),
        o["F"].to_f64(),
        o["G"].to_f64(),
    );
    for n in 0..a.len() {
        let (av, bv, mv) = (a[n] as i64, b[n] as i64, m[n] != 0.0);
        let want_c = (av * 37 + bv - (av >> 1)) as i8;
        assert_eq!(c[n], f64::from(want_c), "int8_ops: C[{n}]");
        let bu = bv as u8;
        let want_d = ((bu << 5) | (bu >> 1)) ^ (!bu).wrapping_add(200);
        assert_eq!(d[n], f64::from(want_d), "int8_ops: D[{n}]");
        let want_e = ((bv >> 2 & 0xF) - 8) as f64 * 0.5;
        assert_eq!(e[n], want_e, "int8_ops: E[{n}]");
        let want_f = mv && av < 0 || !mv && bv > 10;
        assert_eq!(f[n] != 0.0, want_f, "int8_ops: F[{n}]");
        let sat = (x[n] as f32 * 200.0) as i8 as i64;
        let want_g = (sat.div_euclid(3) + i64::from((-av) as u8 % 7)) as i8;
        assert_eq!(g[n], f64::from(want_g), "int8_ops: G[{n}]");
    }
}

/// `tilelang_spellings.tir`: `i_b, i_h = r // 4, r % 4`; the inner `i` shadows the outer
/// one only in its body; `Mask != 0` reads the bool as 0 / 1; a partial fragment copy
/// copies rows 2 and 3, and a tile atomic adds them into a 4-D region. `x * s + b` is contracted to one fused multiply-add (docs/ir.md), so
/// the reference rounds once.
fn check_tilelang_spellings(o: &Outputs, initial: &dyn Fn(&str) -> Vec<f64>) {
    let (x, mask) = (o["X"].to_f64(), o["Mask"].to_f64());
    let (out, last) = (o["Out"].to_f64(), o["Last"].to_f64());
    let (rows, acc, acc0) = (o["Rows"].to_f64(), o["Acc"].to_f64(), initial("Acc"));
    assert_eq!(last.len(), 7);
    assert_eq!(
        o["Count"].to_f64()[0],
        initial("Count")[0] + 7.0,
        "tilelang_spellings: Count"
    );
    for (n, got) in o["Swap"].to_f64().iter().enumerate() {
        let (r, j) = (n / 2, n % 2);
        let want = if j == 0 { r % 4 } else { r / 4 };
        assert_eq!(*got, want as f64, "tilelang_spellings: Swap[{r}, {j}]");
    }
    assert_eq!(rows.len(), 7 * 128);
    for (n, got) in rows.iter().enumerate() {
        let (r, j, k) = (n / 128, n / 64 % 2, n % 64);
        let want = f64::from(x[r * 64 + k] as f32 * (j + 2) as f32);
        assert_eq!(*got, want, "tilelang_spellings: Rows[{r}, {j}, {k}]");
        // Acc (BH, 2, 1, 64) has the layout of Rows: one float32 add.
        let sum = f64::from(acc0[n] as f32 + want as f32);
        assert_eq!(acc[n], sum, "tilelang_spellings: Acc[{r}, {j}, 0, {k}]");
    }
    for (r, l) in last.iter().enumerate() {
        assert_eq!(*l, 3.0, "tilelang_spellings: Last[{r}]");
        let (b, h) = ((r / 4) as f32, (r % 4) as f32);
        for k in 0..64 {
            let n = r * 64 + k;
            let want = if mask[n] != 0.0 {
                f64::from((x[n] as f32).mul_add(h + 1.0, b))
            } else {
                0.0
            };
            assert_eq!(out[n], want, "tilelang_spellings: Out[{r}, {k}]");
        }
    }
}

/// `reinterpret_int16.tir`: 16-bit integers wrap to 16 bits; `T.reinterpret` reads bits
/// (float32 ↔ int32 / uint32, float16 ↔ int16, uint8 → int8 for int4 nibbles, uint8 →
/// float8_e4m3, decoded here from the OCP E4M3FN definition).
fn check_reinterpret_int16(o: &Outputs) {
    let e4m3 = |bits: u8| -> f64 {
        let sign = if bits & 0x80 != 0 { -1.0 } else { 1.0 };
        let (e, m) = (i32::from((bits >> 3) & 0xF), f64::from(bits & 7));
        match (e, m as u8) {
            (15, 7) => f64::NAN,
            (0, _) => sign * m / 8.0 * 2f64.powi(-6),
            _ => sign * (1.0 + m / 8.0) * 2f64.powi(e - 7),
        }
    };
    let get = |name: &str| o[name].to_f64();
    let (a_in, b_in, x, q_in, hf) = (get("A"), get("B"), get("X"), get("Q"), get("Hf"));
    for n in 0..256usize {
        let at = |name: &str| get(name)[n];
        let a = (n as i64 * 131 + a_in[n] as i64) as i16;
        let b = (n as i64 * 257 + b_in[n] as i64) as u16;
        let q = (n as i64 * 37 + q_in[n] as i64) as u8;
        let xf = x[n] as f32;
        assert_eq!(
            at("S"),
            f64::from((i64::from(a) * 5000 + 7) as i16),
            "S[{n}]"
        );
        assert_eq!(at("U"), f64::from((b << 11) ^ !b), "U[{n}]");
        let ab = ((i64::from(a) * 9) as i16).wrapping_abs();
        assert_eq!(at("Ab"), f64::from(ab), "Ab[{n}]");
        let t16 = (f64::from(xf * 40000.0).trunc()).clamp(-32768.0, 32767.0);
        assert_eq!(at("T16"), t16, "T16[{n}]");
        assert_eq!(at("Bits"), f64::from(xf.to_bits() as i32), "Bits[{n}]");
        assert_eq!(at("Flip"), f64::from(-xf), "Flip[{n}]");
        assert_eq!(at("Lo"), f64::from(((q << 4) as i8) >> 4), "Lo[{n}]");
        assert_eq!(at("Hi"), f64::from((q as i8) >> 4), "Hi[{n}]");
        let h = half::f16::from_f64(hf[n]).to_bits() as i16;
        assert_eq!(at("H16"), f64::from(h), "H16[{n}]");
        let back = half::f16::from_bits(h.wrapping_add(1) as u16).to_f64();
        let got = at("Back");
        assert!(got == back || (got.is_nan() && back.is_nan()), "Back[{n}]");
        let want = e4m3(q);
        let got = at("E8");
        assert!(
            got == want || (got.is_nan() && want.is_nan()),
            "E8[{n}]: {got} vs {want}"
        );
    }
}

/// `cumsum.tir`: prefix sums in float32, in order along the dimension, within each block's
/// 8-row tile (rows past M are zeros and not written).
fn check_cumsum(o: &Outputs) {
    let (x, y, z) = (o["X"].to_f64(), o["Y"].to_f64(), o["Z"].to_f64());
    let rows = x.len() / 32;
    assert_eq!(rows, 13);
    for i in 0..rows {
        for j in 0..32 {
            let tile = i / 8 * 8;
            let down = (tile..=i).fold(0f32, |acc, r| acc + x[r * 32 + j] as f32);
            assert_eq!(y[i * 32 + j], f64::from(down), "cumsum: Y[{i}, {j}]");
            let back = (j..32)
                .rev()
                .fold(0f32, |acc, k| acc + x[i * 32 + k] as f32);
            assert_eq!(z[i * 32 + j], f64::from(back), "cumsum: Z[{i}, {j}]");
        }
    }
}

/// `split_combine_scratch.tir`: the second kernel reads what the first wrote into the
/// function's own tensor; its unwritten column is zero. A row's half sums are float32 sums
/// in T.reduce_sum's order (docs/ir.md: the fold in index order), then added.
fn check_split_combine_scratch(o: &Outputs) {
    let (a, out, seen) = (o["A"].to_f64(), o["Out"].to_f64(), o["Seen"].to_f64());
    assert_eq!(out.len(), 45);
    for m in 0..45 {
        let half = |s: usize| (0..32).fold(0f32, |acc, k| acc + a[m * 64 + s * 32 + k] as f32);
        assert_eq!(
            out[m],
            f64::from(half(0) + half(1)),
            "split_combine_scratch: Out[{m}]"
        );
        assert_eq!(seen[m], 0.0, "split_combine_scratch: Seen[{m}]");
    }
    assert!(o["part"]
        .to_f64()
        .iter()
        .skip(2)
        .step_by(3)
        .all(|&x| x == 0.0));
}

/// `grid_sync_partials.tir`: each block's partial is its row's float32 sum in
/// T.reduce_sum's order; after the grid barrier every block sums all partials in block
/// order — which it can only do if it sees every other block's write.
fn check_grid_sync_partials(o: &Outputs) {
    let (a, part, total) = (o["A"].to_f64(), o["Part"].to_f64(), o["Total"].to_f64());
    let nb = part.len();
    assert_eq!(nb, 5);
    for b in 0..nb {
        let want = (0..64).fold(0f32, |acc, i| acc + a[b * 64 + i] as f32);
        assert_eq!(part[b], f64::from(want), "grid_sync_partials: Part[{b}]");
    }
    let sum = part.iter().fold(0f32, |acc, &p| acc + p as f32);
    for (b, &t) in total.iter().enumerate() {
        assert_eq!(t, f64::from(sum), "grid_sync_partials: Total[{b}]");
    }
}

/// `grid_sync_ring.tir`: X doubles A; after the first barrier Y is the right neighbour's X
/// plus 1; after the second Z is the left neighbour's Y plus the block's own shared copy of
/// A (kept across both barriers) — all float32.
fn check_grid_sync_ring(o: &Outputs) {
    let (a, x, y, z) = (
        o["A"].to_f64(),
        o["X"].to_f64(),
        o["Y"].to_f64(),
        o["Z"].to_f64(),
    );
    let nb = a.len() / 32;
    assert_eq!(nb, 5);
    let f = |v: f64| v as f32;
    for b in 0..nb {
        let (right, left) = ((b + 1) % nb, (b + nb - 1) % nb);
        for i in 0..32 {
            let at = b * 32 + i;
            assert_eq!(
                x[at],
                f64::from(f(a[at]) * 2.0),
                "grid_sync_ring: X[{b}, {i}]"
            );
            let want_y = f(x[right * 32 + i]) + 1.0;
            assert_eq!(y[at], f64::from(want_y), "grid_sync_ring: Y[{b}, {i}]");
            let want_z = f(y[left * 32 + i]) + f(a[at]);
            assert_eq!(z[at], f64::from(want_z), "grid_sync_ring: Z[{b}, {i}]");
        }
    }
}

/// `sync_threads_named.tir`: reversals across a named barrier of half the block and across
/// the block barrier; B's upper half keeps its initial values.
fn check_sync_threads_named(o: &Outputs, initial: &dyn Fn(&str) -> Vec<f64>) {
    let (a, b, c, b0) = (
        o["A"].to_f64(),
        o["B"].to_f64(),
        o["C"].to_f64(),
        initial("B"),
    );
    for i in 0..256 {
        assert_eq!(c[i], a[255 - i], "sync_threads_named: C[{i}]");
        let want = if i < 128 {
            f64::from(a[127 - i] as f32 * 2.0)
        } else {
            b0[i]
        };
        assert_eq!(b[i], want, "sync_threads_named: B[{i}]");
    }
}

/// `row_softmax.tir`: the tile-level semantics — reductions fold in index order in float32
/// (docs/ir.md), every operation rounded to float32, the output to float16.
fn check_row_softmax(o: &Outputs) {
    let r = |v: f64| f64::from(v as f32);
    let (x, y) = (o["X"].to_f64(), o["Y"].to_f64());
    let (rmax, rsum) = (o["RowMax"].to_f64(), o["RowSum"].to_f64());
    for row in 0..rmax.len() {
        let line = &x[row * 96..row * 96 + 96];
        let m = line.iter().fold(f64::NEG_INFINITY, |a, &v| a.max(v));
        assert_eq!(rmax[row], m, "row_softmax: RowMax[{row}]");
        let e: Vec<f64> = line
            .iter()
            .map(|&v| r(r(r(v - m) * r(std::f64::consts::LOG2_E)).exp2()))
            .collect();
        let s = e.iter().fold(0.0, |a, &v| r(a + v));
        assert_eq!(rsum[row], s, "row_softmax: RowSum[{row}]");
        for (j, &ev) in e.iter().enumerate() {
            let want = f16::from_f64(r(ev / s)).to_f64();
            assert_eq!(y[row * 96 + j], want, "row_softmax: Y[{row}, {j}]");
        }
    }
}

/// `reshape_tiles.tir`: Y = max(X, 0) · (c // 16 + 1), S and G its sums and maxima over
/// 16-column groups and across them, Z = 0.5 + Σ_k (Y + 1) per group (the last group of odd
/// rows filled with 2 instead of Y + 1), W = 2 X — every sum a
/// float32 fold in index order (the interpreter's), so exact.
fn check_reshape_tiles(o: &Outputs) {
    let r = |v: f64| f64::from(v as f32);
    let x = o["X"].to_f64();
    let m = x.len() / 64;
    let (y, s, g, z, w) = (
        o["Y"].to_f64(),
        o["S"].to_f64(),
        o["G"].to_f64(),
        o["Z"].to_f64(),
        o["W"].to_f64(),
    );
    for row in 0..m {
        let want_y: Vec<f64> = (0..64)
            .map(|c| r(x[row * 64 + c].max(0.0) * (c / 16 + 1) as f64))
            .collect();
        assert_eq!(
            &y[row * 64..row * 64 + 64],
            &want_y[..],
            "reshape_tiles: Y[{row}]"
        );
        for j in 0..4 {
            let group = &want_y[16 * j..16 * j + 16];
            let sum = group.iter().fold(0.0, |a, &v| r(a + v));
            assert_eq!(s[row * 4 + j], sum, "reshape_tiles: S[{row}, {j}]");
            let filled = row % 2 == 1 && j == 3;
            let plus = group.iter().fold(0.5, |a, &v| match filled {
                true => r(a + 2.0),
                false => r(a + r(v + 1.0)),
            });
            assert_eq!(z[row * 4 + j], plus, "reshape_tiles: Z[{}]", row * 4 + j);
        }
        for k in 0..16 {
            let most = (0..4)
                .map(|j| want_y[16 * j + k])
                .fold(f64::NEG_INFINITY, f64::max);
            assert_eq!(g[row * 16 + k], most, "reshape_tiles: G[{row}, {k}]");
        }
    }
    let twice: Vec<f64> = x.iter().map(|v| 2.0 * v).collect();
    assert_eq!(w, twice, "reshape_tiles: W");
}

/// `global_layout.tir`: Y's memory holds 2 X in the `[M // 4, 8, 4]` order, Z = 2 X + 1, and
/// W's memory (the transposed order) gained 2 X, then 1 (two float32 adds in kernel order).
fn check_global_layout(o: &Outputs, initial: &dyn Fn(&str) -> Vec<f64>) {
    let r32 = |v: f64| f64::from(v as f32);
    let x = o["X"].to_f64();
    let m = x.len() / 8;
    let (y, z, w, w0) = (
        o["Y"].to_f64(),
        o["Z"].to_f64(),
        o["W"].to_f64(),
        initial("W"),
    );
    for i in 0..m {
        for j in 0..8 {
            let twice = 2.0 * x[i * 8 + j];
            let at = ((i / 4) * 8 + j) * 4 + i % 4;
            assert_eq!(y[at], twice, "global_layout: Y({i}, {j}) at {at}");
            assert_eq!(z[i * 8 + j], r32(twice + 1.0), "global_layout: Z[{i}, {j}]");
            let wt = j * m + i;
            let want = r32(r32(w0[wt] + twice) + 1.0);
            assert_eq!(w[wt], want, "global_layout: W({i}, {j}) at {wt}");
        }
    }
}

/// `break_continue.tir`: Python's meaning of each loop, computed here with Rust's own
/// `break` / `continue` (float32 sums in order, as the kernel adds).
fn check_break_continue(o: &Outputs, initial: &dyn Fn(&str) -> Vec<f64>) {
    let r32 = |v: f64| f64::from(v as f32);
    let x = o["X"].to_f64();
    let (y, z, w) = (o["Y"].to_f64(), o["Z"].to_f64(), o["W"].to_f64());
    let w0 = initial("W");
    assert!(x.iter().any(|&v| v < 0.0) && x.iter().any(|&v| v > 0.5));
    for r in 0..y.len() {
        let mut acc = 0.0;
        for k in 0..8 {
            let v = x[r * 8 + k];
            if v < 0.0 {
                break;
            }
            if v > 0.5 {
                continue;
            }
            acc = r32(acc + v);
        }
        assert_eq!(y[r], acc, "break_continue: Y[{r}]");
        // One rounding: the parser contracts `x * 50.0 + 50.0` into a float32 fma.
        let bound = r32(x[r * 8] * 50.0 + 50.0);
        let first = (1..100).find(|&n| (n * n) as f64 > bound).unwrap_or(0);
        assert_eq!(z[r], first as f64, "break_continue: Z[{r}]");
        for c in 0..8 {
            let want = if c < 3 {
                r32(x[r * 8 + c] + 1.0)
            } else {
                w0[r * 8 + c]
            };
            assert_eq!(w[r * 8 + c], want, "break_continue: W[{r}, {c}]");
        }
        // Each T.Parallel row's own flag.
        let mut sum = 0.0;
        for &v in &x[r * 8..r * 8 + 8] {
            if v < -0.5 {
                break;
            }
            sum = r32(sum + v);
        }
        assert_eq!(o["V"].to_f64()[r], sum, "break_continue: V[{r}]");
    }
}

/// `scalar_params.tir`: rows below `limit` (20) of Y are X * `scale` (3) in float32, the rest
/// zeros.
fn check_scalar_params(o: &Outputs) {
    let (x, y) = (o["X"].to_f64(), o["Y"].to_f64());
    for (k, (&xv, &yv)) in x.iter().zip(&y).enumerate() {
        let want = if k / 64 < 20 {
            f64::from((xv * 3.0) as f32)
        } else {
            0.0
        };
        assert_eq!(yv, want, "scalar_params: Y[{}, {}]", k / 64, k % 64);
    }
}

/// `macros.tir`: Y = softmax(X), Z = softmax(X / 2) + 1, row-wise in float32, as its macros
/// expand: the row maximum, each `exp((x - m) * scale)` rounded, the sum in index order, then
/// the quotient plus the call count.
fn check_macros(o: &Outputs) {
    let r = |v: f64| f64::from(v as f32);
    let x = o["X"].to_f64();
    for (name, scale, bias) in [("Y", 1.0, 0.0), ("Z", 0.5, 1.0)] {
        let out = o[name].to_f64();
        for row in 0..x.len() / 64 {
            let line = &x[row * 64..row * 64 + 64];
            let m = line.iter().fold(f64::NEG_INFINITY, |a, &v| a.max(v));
            let e: Vec<f64> = line.iter().map(|&v| r(r(r(v - m) * scale).exp())).collect();
            let s = e.iter().fold(0.0, |a, &v| r(a + v));
            for (j, &ev) in e.iter().enumerate() {
                let want = r(r(ev / s) + bias);
                assert_eq!(out[row * 64 + j], want, "macros: {name}[{row}, {j}]");
            }
        }
    }
}

/// `atomic_colsum.tir`: the interpreter adds every block's atomic contributions onto the
/// initial values in block order (x fastest), each block's in program order — here, for a
/// column, rows in ascending order, each add rounded to float32; the counts are exact.
fn check_atomic_colsum(o: &Outputs, initial: &dyn Fn(&str) -> Vec<f64>) {
    let (m, n) = (50usize, 70usize);
    let x = o["X"].to_f64();
    let (s0, c0) = (initial("S"), initial("C"));
    let (s, c) = (o["S"].to_f64(), o["C"].to_f64());
    for j in 0..n {
        let want = (0..m).fold(s0[j], |acc, i| f64::from((acc + x[i * n + j]) as f32));
        assert_eq!(s[j], want, "atomic_colsum: S[{j}]");
    }
    let mut want_c = c0.clone();
    for by in 0..m.div_ceil(16) {
        for bx in 0..n.div_ceil(32) {
            for i in 0..16 {
                for j in 0..32 {
                    if by * 16 + i < m && bx * 32 + j < n {
                        want_c[(i * 32 + j) % 64] += 1.0;
                    }
                }
            }
        }
    }
    assert_eq!(c, want_c, "atomic_colsum: C");
}

/// `rand_per_thread.tir`: generator `g` is curand's `curand_init(1000 b - 1234, g, 3 g)`
/// (`b = g / 32`, the seed sign-extended to 64 bits); `U[g, k]` is element `3 g + k` of
/// subsequence `g`, `F[g, k]` the uniform float of element `3 g + 5 + k`
/// (`tlc_tests::philox`, the tests' own model of the stream).
fn check_rand_per_thread(o: &Outputs) {
    use tlc_tests::philox::{element, uniform};
    let (u, f) = (o["U"].to_f64(), o["F"].to_f64());
    let m = u.len() / 5;
    for g in 0..m {
        let seed = ((g / 32) as i64 * 1000 - 1234) as u64;
        let (seq, first) = (g as u64, 3 * g as u64);
        for k in 0..5 {
            let want = element(seed, seq, first + k as u64);
            assert_eq!(
                u[g * 5 + k],
                f64::from(want),
                "rand_per_thread: U[{g}, {k}]"
            );
        }
        for k in 0..3 {
            let want = uniform(element(seed, seq, first + 5 + k as u64));
            assert_eq!(
                f[g * 3 + k],
                f64::from(want),
                "rand_per_thread: F[{g}, {k}]"
            );
        }
    }
}
