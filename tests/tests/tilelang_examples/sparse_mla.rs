//! The reference of `tests/tilelang/sparse_mla_fwd.tir` (DeepSeek-V3.2's sparse MLA
//! forward) and its inputs: an f64 masked softmax over each query's selected keys, checked
//! against a model of the kernel's online softmax (`tlc_tests::bound`).

use super::{exact, expect, Expected, Outputs};
use std::f64::consts::LOG2_E;
use tlc_ir::dtype::DType;
use tlc_ir::interp::Tensor;
use tlc_tests::bound::{Approx, Fp};

/// Heads, the value dim, the query / key dim (value + tail) and the selected keys per
/// query, as the file has them.
const HEADS: usize = 128;
const D: usize = 512;
const DQK: usize = 576;
const TOPK: usize = 128;
/// Keys per tile (block_I).
const BI: usize = 64;

/// `Indices` (batch, seq_len, 1, 128) for `seq_len_kv` keys: per query a pseudo-random
/// selection of distinct keys (seq_len_kv >= 128), always with key 0 (so every query sees
/// one key at least); keys past the query are selected too and masked by the kernel (the
/// test's padding, seq_len_kv itself, would be loaded out of bounds: header).
pub fn indices(batch: usize, seq: usize, seq_kv: usize) -> Tensor {
    assert!(seq_kv >= TOPK);
    let mut v = Vec::with_capacity(batch * seq * TOPK);
    for row in 0..batch * seq {
        let mut keys: Vec<i64> = (0..seq_kv as i64).collect();
        // A Fisher-Yates shuffle driven by a fixed LCG per row.
        let mut x = 0x9e37_79b9_u64.wrapping_mul(row as u64 + 1);
        for i in (1..keys.len()).rev() {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            keys.swap(i, ((x >> 33) % (i as u64 + 1)) as usize);
        }
        keys.truncate(TOPK);
        if !keys.contains(&0) {
            keys[(row * 37) % TOPK] = 0;
        }
        v.extend(keys);
    }
    Tensor::from_i64(DType::Int32, &[batch, seq, 1, TOPK], &v).expect("indices")
}

/// `sparse_mla_fwd.tir`: per query s and head r, over the selected keys k_j ≤ s,
/// Output = Σ_j P_j KV[k_j, :512] with P = softmax_j(Q · KV[k_j] / 24), Lse = log2 Σ_j
/// exp2(Q · KV[k_j] · log2(e) / 24).
///
/// The model, tile by tile of 64 indices (c = float32(0.06011229333333333)): scores d_j =
/// Σ of the 576 bfloat16 products (float32; masked keys −∞); m from −2^30, m' = max(m,
/// max_j d_j); α = exp2(float32(float32(m − m') · c)); p_j = exp2(float32(float32(d_j · c)
/// − float32(m' · c))) (0 for masked keys); l = float32(l · α) + Σ p_j; o = Σ(float32(o ·
/// α), bfloat16(p_j) · KV[k_j]) (float32 sums, any order); Output = bfloat16(float32(o / l)),
/// Lse = float32(log2 l) + float32(m · c). Every step rounds to float32.
pub fn sparse_mla_fwd(o: &Outputs) -> Expected {
    let (q, kv, idx) = (o["Q"].to_f64(), o["KV"].to_f64(), o["Indices"].to_f64());
    let s = o["Q"].shape().to_vec();
    let (batch, seq) = (s[0], s[1]);
    let seq_kv = o["KV"].shape()[1];
    let c = Approx::literal(0.06011229333333333, LOG2_E / 24.0, Fp::F32);
    let f32r = |a: Approx| a.round(Fp::F32);
    let mut out = vec![exact(0.0); batch * seq * HEADS * D];
    let mut lse = vec![exact(0.0); batch * seq * HEADS];
    for b in 0..batch {
        for t in 0..seq {
            let keys: Vec<usize> = (0..TOPK)
                .map(|j| idx[(b * seq + t) * TOPK + j] as usize)
                .collect();
            for r in 0..HEADS {
                let qrow = &q[((b * seq + t) * HEADS + r) * DQK..][..DQK];
                let krow = |k: usize| &kv[(b * seq_kv + k) * DQK..][..DQK];
                let dots: Vec<Option<(f64, Approx)>> = keys
                    .iter()
                    .map(|&k| {
                        (k <= t).then(|| {
                            let p = qrow.iter().zip(krow(k)).map(|(x, y)| x * y);
                            (p.clone().sum(), Approx::sum(p.map(exact), Fp::F32))
                        })
                    })
                    .collect();
                // The reference.
                let scaled: Vec<(usize, f64)> = dots
                    .iter()
                    .zip(&keys)
                    .filter_map(|(d, &k)| d.map(|(x, _)| (k, x / 24.0)))
                    .collect();
                let top = scaled.iter().fold(f64::NEG_INFINITY, |m, &(_, x)| m.max(x));
                let total: f64 = scaled.iter().map(|&(_, x)| (x - top).exp()).sum();
                // The model.
                let (mut m, mut l) = (exact(-(2f64.powi(30))), exact(0.0));
                let mut acc = vec![exact(0.0); D];
                for tile in 0..TOPK / BI {
                    let range = tile * BI..(tile + 1) * BI;
                    let m_new = dots[range.clone()]
                        .iter()
                        .flatten()
                        .fold(m, |a, &(_, d)| a.max(d));
                    let mc = f32r(m_new * c);
                    let alpha = f32r(f32r(f32r(m - m_new) * c).exp2());
                    let p: Vec<(usize, Approx)> = range
                        .filter_map(|j| {
                            dots[j].map(|(_, d)| (keys[j], f32r(f32r(f32r(d * c) - mc).exp2())))
                        })
                        .collect();
                    l = f32r(f32r(l * alpha) + Approx::sum(p.iter().map(|x| x.1), Fp::F32));
                    for (col, slot) in acc.iter_mut().enumerate() {
                        let pv = p
                            .iter()
                            .map(|&(k, pj)| pj.round(Fp::Bf16) * exact(krow(k)[col]));
                        *slot =
                            Approx::sum(std::iter::once(f32r(*slot * alpha)).chain(pv), Fp::F32);
                    }
                    m = m_new;
                }
                let base = (b * seq + t) * HEADS + r;
                for (col, slot) in acc.iter().enumerate() {
                    let want: f64 = scaled
                        .iter()
                        .map(|&(k, x)| (x - top).exp() * krow(k)[col])
                        .sum::<f64>()
                        / total;
                    out[base * D + col] = expect(want, f32r(*slot / l).round(Fp::Bf16));
                }
                let want = (total.ln() + top) / std::f64::consts::LN_2;
                lse[base] = expect(want, f32r(f32r(l.log2()) + f32r(m * c)));
            }
        }
    }
    vec![("Output", out), ("Lse", lse)]
}
