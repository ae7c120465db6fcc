//! The reference of TileLang's persistent MLA decoding (`tests/tilelang/mla_decode_persistent.tir`):
//! two splits of the keys per 64-head block, then — after `T.sync_grid()` — their combine.

use super::{combine_splits, exact, online_softmax, split_partial, Expected, Outputs};
use std::f64::consts::LOG2_E;
use tlc_tests::bound::{Approx, Fp};

/// `mla_decode_persistent.tir`: per batch b and query head h (one KV head), with scores
/// d_s = Q[b, h]·KV[b, s] + Q_pe[b, h]·K_pe[b, s] over dims 512 + 64 and c = log2(e) /
/// sqrt(576): Output[b, h] = softmax(d / sqrt(576)) @ KV[b, :, 0, :]; split k of 2 takes keys
/// [k·n/2, (k+1)·n/2) in 64-key tiles: Output_partial[b, h, k] its softmax, glse[b, h, k]
/// log2 of its sum of exp2(d·c).
///
/// The model: per split, [`online_softmax`] (c the float32 literal 0.06011229333333333),
/// Output_partial = float16(float32(O / l)), glse = float16(float32(log2 l) + float32(m·c));
/// the combine in float32 as the kernel's second phase writes it: lse = log2(Σ_k exp2(glse_k
/// − max_k glse_k)) + max, scale_k = exp2(glse_k − lse), Output = float16(Σ_k partial_k ·
/// scale_k).
pub fn mla_decode_persistent(o: &Outputs) -> Expected {
    const SPLITS: usize = 2;
    const TILE: usize = 64;
    let (q, kv) = (&o["Q"], &o["KV"]);
    let (batch, heads, dim) = (q.shape()[0], q.shape()[1], q.shape()[2]);
    let (seq, pe) = (kv.shape()[1], o["Q_pe"].shape()[2]);
    let split = seq / SPLITS;
    assert!(
        seq % (SPLITS * TILE) == 0,
        "mla_decode_persistent covers its keys in whole 64-key tiles per split (its header)"
    );
    let [qv, qpe, kvv, kpe] = ["Q", "Q_pe", "KV", "K_pe"].map(|n| o[n].to_f64());
    let width = (dim + pe) as f64;
    let c = Approx::literal(0.06011229333333333, LOG2_E / width.sqrt(), Fp::F32);
    let v_at = |b: usize, s: usize, col: usize| kvv[(b * seq + s) * dim + col];
    let (mut out, mut partial, mut glse) = (Vec::new(), Vec::new(), Vec::new());
    for b in 0..batch {
        for h in 0..heads {
            let (qrow, perow) = (
                &qv[(b * heads + h) * dim..][..dim],
                &qpe[(b * heads + h) * pe..][..pe],
            );
            // (key, exact score, the score's model).
            let dots: Vec<(usize, f64, Approx)> = (0..seq)
                .map(|s| {
                    let content = qrow.iter().zip(&kvv[(b * seq + s) * dim..][..dim]);
                    let position = perow.iter().zip(&kpe[(b * seq + s) * pe..][..pe]);
                    let products: Vec<f64> = content.chain(position).map(|(x, y)| x * y).collect();
                    let model = Approx::sum(products.iter().map(|&x| exact(x)), Fp::F32);
                    (s, products.iter().sum::<f64>(), model)
                })
                .collect();
            // The reference: softmax in f64 over some keys, and its log2-sum-exp2 of d·c.
            let softmax = |keys: &[(usize, f64, Approx)]| {
                let scaled: Vec<f64> = keys.iter().map(|d| d.1 / width.sqrt()).collect();
                let top = scaled.iter().fold(f64::NEG_INFINITY, |m, &x| m.max(x));
                let w: Vec<f64> = scaled.iter().map(|x| (x - top).exp()).collect();
                let total: f64 = w.iter().sum();
                let o: Vec<f64> = (0..dim)
                    .map(|col| {
                        let terms = keys.iter().zip(&w).map(|(d, w)| w * v_at(b, d.0, col));
                        terms.sum::<f64>() / total
                    })
                    .collect();
                (o, (top + total.ln()) * LOG2_E)
            };
            let (mut po, mut lses) = (Vec::new(), Vec::new());
            for sid in 0..SPLITS {
                let keys = &dots[sid * split..(sid + 1) * split];
                let tiles: Vec<Vec<(usize, Approx)>> = keys
                    .chunks(TILE)
                    .map(|t| t.iter().map(|d| (d.0, d.2)).collect())
                    .collect();
                let (acc, l, m) = online_softmax(&tiles, |s, col| v_at(b, s, col), dim, c);
                let (o_k, lse_k) = split_partial(&acc, l, m, c, softmax(keys));
                lses.push(lse_k);
                po.push(o_k);
            }
            let (want, _) = softmax(&dots);
            out.extend(combine_splits(&po, &lses, &want));
            glse.extend(lses);
            partial.extend(po.into_iter().flatten());
        }
    }
    vec![("Output", out), ("glse", glse), ("Output_partial", partial)]
}
