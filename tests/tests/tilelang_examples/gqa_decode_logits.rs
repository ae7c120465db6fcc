//! The reference of TileLang's varlen GQA decoding with sinks and pooled attention weights
//! (`tests/tilelang/flash_decoding_gqa_varlen_logits.tir`).

use super::{exact, expect, flash_softmax, Expected, Outputs};
use std::f64::consts::LOG2_E;
use tlc_tests::bound::{Approx, Fp};

/// `flash_decoding_gqa_varlen_logits.tir`: per batch b and query head h (KV head h / 4),
/// over the keys of sequence b in 128-key tiles t, with d_j = Q[b, h] · K[j, h / 4], c =
/// log2(e) / sqrt(128), m_t the tile's largest d_j and m the last tile's: O = Σ_j 2^{(d_j −
/// m)c} V[j], l = Σ_j 2^{(d_j − m)c} + s_aux[h], Output = O / l, S[b, h, t] = 2^{(m_t −
/// m)c} / l.
///
/// The model: [`flash_softmax`] without a running max (the header) for O and l, c the
/// float32 literal 0.1275174307460247; l + s_aux, the quotients and exp2 in float32;
/// Output and S rounded to float16.
pub fn gqa_decode_logits(o: &Outputs) -> Expected {
    const TILE: usize = 128;
    let (q, k) = (&o["Q"], &o["K"]);
    let (batch, heads, dim) = (q.shape()[0], q.shape()[1], q.shape()[2]);
    let kv_heads = k.shape()[1];
    let group = heads / kv_heads;
    let columns = o["S"].shape()[2];
    let [qv, kv, vv] = ["Q", "K", "V"].map(|n| o[n].to_f64());
    let (cu, sink) = (o["cu_seqlens_k"].to_f64(), o["s_aux"].to_f64());
    let c = Approx::literal(0.1275174307460247, LOG2_E / (dim as f64).sqrt(), Fp::F32);
    let f32r = |a: Approx| a.round(Fp::F32);
    let (mut out, mut s_out) = (Vec::new(), Vec::new());
    for b in 0..batch {
        let (start, end) = (cu[b] as usize, cu[b + 1] as usize);
        for h in 0..heads {
            let kv_at = |j: usize| ((start + j) * kv_heads + h / group) * dim;
            let qrow = &qv[(b * heads + h) * dim..][..dim];
            let dots: Vec<(usize, f64, Approx)> = (0..end - start)
                .map(|j| {
                    let products: Vec<f64> = qrow
                        .iter()
                        .zip(&kv[kv_at(j)..][..dim])
                        .map(|(x, y)| x * y)
                        .collect();
                    let model = Approx::sum(products.iter().map(|&p| exact(p)), Fp::F32);
                    (j, products.iter().sum::<f64>(), model)
                })
                .collect();
            let tiles: Vec<Vec<(usize, Approx)>> = dots
                .chunks(TILE)
                .map(|t| t.iter().map(|d| (d.0, d.2)).collect())
                .collect();
            assert_eq!(
                tiles.len(),
                columns,
                "every column of S written (the header)"
            );
            let v_at = |j: usize, col: usize| vv[kv_at(j) + col];
            let (acc, l, m) = flash_softmax(&tiles, v_at, dim, c, false);
            let c_exact = LOG2_E / (dim as f64).sqrt();
            let weight = |d: f64| ((d - m.v) * c_exact).exp2();
            let l_want = dots.iter().map(|d| weight(d.1)).sum::<f64>() + sink[h];
            let l_sink = f32r(l + exact(sink[h]));
            for (col, slot) in acc.iter().enumerate() {
                let o_want = dots
                    .iter()
                    .map(|d| weight(d.1) * v_at(d.0, col))
                    .sum::<f64>();
                out.push(expect(o_want / l_want, f32r(*slot / l_sink).round(Fp::F16)));
            }
            for tile in &tiles {
                let m_t = tile.iter().map(|d| d.1).reduce(Approx::max).expect("a key");
                let p = f32r(f32r(f32r(m_t - m) * c).exp2());
                s_out.push(expect(
                    weight(m_t.v) / l_want,
                    f32r(p / l_sink).round(Fp::F16),
                ));
            }
        }
    }
    vec![("Output", out), ("S", s_out)]
}
