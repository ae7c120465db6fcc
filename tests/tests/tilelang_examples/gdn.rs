//! References of the gated delta net (`tests/tilelang/gdn_*.tir`) and the linear attention
//! backward (`linear_attn_bwd.tir`) translations: each an f64 computation of the header's
//! math, checked against a model of the kernel's arithmetic (`tlc_tests::bound`) that
//! follows the header step by step.

use super::{exact, expect, Expected, Outputs};
use tlc_tests::bound::{Approx, Fp};

/// 1 / sqrt(128), the examples' `scale` for a head dim of 128 (written
/// `0.08838834764831845` in the files).
const SCALE_128: f64 = 0.08838834764831845;

/// A (B, S, H, D) tensor's row of position `t`: the offset of `[b, t, h, 0]`.
fn row(s: &[usize], b: usize, t: usize, h: usize) -> usize {
    ((b * s[1] + t) * s[2] + h) * s[3]
}

fn f32r(a: Approx) -> Approx {
    a.round(Fp::F32)
}

/// `gdn_chunk_o.tir`: per (b, h) and chunk c of 64 positions (rows i, j before S),
/// O[i, v] = scale · (e^{g_i} Σ_k Q[i, k] HIDDEN[c, k, v] + Σ_{j ≤ i, g_i ≤ g_j}
/// e^{g_i − g_j} (Q_i · K_j) V[j, v]).
///
/// The model: o = float32(float32(Q @ HIDDEN) · float32(e^{g_i})); a = float32(q_i · k_j) ·
/// float32(e^{float32(g_i − g_j)}) (float32) where g_i − g_j ≤ 0 and j ≤ i, else 0;
/// o += bfloat16(a) @ V (float32, any order); O = bfloat16(float32(o · float32(scale))).
/// bfloat16 products are exact in float32.
pub fn gdn_chunk_o(o: &Outputs) -> Expected {
    let (q, k, v, hid, g) = (
        o["Q"].to_f64(),
        o["K"].to_f64(),
        o["V"].to_f64(),
        o["HIDDEN"].to_f64(),
        o["G"].to_f64(),
    );
    let s = o["Q"].shape().to_vec();
    let (batch, seq, heads, dim) = (s[0], s[1], s[2], s[3]);
    let chunks = o["HIDDEN"].shape()[1];
    let scale = Approx::literal(SCALE_128, 1.0 / (dim as f64).sqrt(), Fp::F32);
    let gate = |b: usize, t: usize, h: usize| g[(b * seq + t) * heads + h];
    let mut out = vec![exact(0.0); q.len()];
    for b in 0..batch {
        for h in 0..heads {
            for c in 0..chunks {
                let rows: Vec<usize> = (c * 64..((c + 1) * 64).min(seq)).collect();
                let hid_at = |kk: usize, vv: usize| {
                    hid[((((b * chunks + c) * heads + h) * dim + kk) * dim) + vv]
                };
                for &i in &rows {
                    let qi = &q[row(&s, b, i, h)..][..dim];
                    let gi = gate(b, i, h);
                    let eg = f32r(exact(gi).exp());
                    // The gated scores of row i (j ≤ i with g_i − g_j ≤ 0).
                    let scores: Vec<(usize, f64, Approx)> = rows
                        .iter()
                        .filter(|&&j| j <= i && gi - gate(b, j, h) <= 0.0)
                        .map(|&j| {
                            let kj = &k[row(&s, b, j, h)..][..dim];
                            let dot: f64 = qi.iter().zip(kj).map(|(x, y)| x * y).sum();
                            let d = gi - gate(b, j, h);
                            let want = dot * d.exp();
                            let qk =
                                Approx::sum(qi.iter().zip(kj).map(|(x, y)| exact(x * y)), Fp::F32);
                            let e = f32r(f32r(exact(gi) - exact(gate(b, j, h))).exp());
                            (j, want, f32r(qk * e).round(Fp::Bf16))
                        })
                        .collect();
                    for col in 0..dim {
                        let inter_want: f64 = (0..dim).map(|kk| qi[kk] * hid_at(kk, col)).sum();
                        let inter = Approx::sum(
                            (0..dim).map(|kk| exact(qi[kk] * hid_at(kk, col))),
                            Fp::F32,
                        );
                        let inter = f32r(inter * eg);
                        let vj = |j: usize| v[row(&s, b, j, h) + col];
                        let intra_want: f64 = scores.iter().map(|&(j, w, _)| w * vj(j)).sum();
                        let intra = scores.iter().map(|&(j, _, a)| a * exact(vj(j)));
                        let acc = Approx::sum(std::iter::once(inter).chain(intra), Fp::F32);
                        let model = f32r(acc * scale).round(Fp::Bf16);
                        let want = (inter_want * gi.exp() + intra_want) / (dim as f64).sqrt();
                        out[row(&s, b, i, h) + col] = expect(want, model);
                    }
                }
            }
        }
    }
    vec![("O", out)]
}

/// `gdn_wy_fast.tir`: per (b, h) and chunk of 64 positions (rows i, j before S),
/// U[i, :] = Σ_j A[i, j] β_j V[j, :] and W[i, :] = Σ_j A[i, j] β_j e^{g_j} K[j, :].
///
/// The model: U = bfloat16(Σ_j A[i, j] · bfloat16(V[j] · β_j)) and W = bfloat16(Σ_j A[i, j]
/// · bfloat16(float32(bfloat16(K[j] · β_j) · float32(e^{g_j})))) (float32 sums, bfloat16
/// products exact).
pub fn gdn_wy_fast(o: &Outputs) -> Expected {
    let (k, v, beta, g, a) = (
        o["K"].to_f64(),
        o["V"].to_f64(),
        o["Beta"].to_f64(),
        o["G"].to_f64(),
        o["A"].to_f64(),
    );
    let s = o["K"].shape().to_vec();
    let (batch, seq, heads, dim) = (s[0], s[1], s[2], s[3]);
    let at3 = |b: usize, t: usize, h: usize| (b * seq + t) * heads + h;
    let mut w_out = vec![exact(0.0); k.len()];
    let mut u_out = vec![exact(0.0); v.len()];
    for b in 0..batch {
        for h in 0..heads {
            for c in (0..seq).step_by(64) {
                let rows: Vec<usize> = (c..(c + 64).min(seq)).collect();
                for &i in &rows {
                    let arow = |j: usize| a[at3(b, i, h) * 64 + (j - c)];
                    for col in 0..dim {
                        let vb = |j: usize| {
                            (exact(v[row(&s, b, j, h) + col]) * exact(beta[at3(b, j, h)]))
                                .round(Fp::Bf16)
                        };
                        let want: f64 = rows
                            .iter()
                            .map(|&j| arow(j) * beta[at3(b, j, h)] * v[row(&s, b, j, h) + col])
                            .sum();
                        let model =
                            Approx::sum(rows.iter().map(|&j| exact(arow(j)) * vb(j)), Fp::F32);
                        u_out[row(&s, b, i, h) + col] = expect(want, model.round(Fp::Bf16));
                        let kb = |j: usize| {
                            let kbeta = (exact(k[row(&s, b, j, h) + col])
                                * exact(beta[at3(b, j, h)]))
                            .round(Fp::Bf16);
                            f32r(kbeta * f32r(exact(g[at3(b, j, h)]).exp())).round(Fp::Bf16)
                        };
                        let want: f64 = rows
                            .iter()
                            .map(|&j| {
                                let x = beta[at3(b, j, h)] * g[at3(b, j, h)].exp();
                                arow(j) * x * k[row(&s, b, j, h) + col]
                            })
                            .sum();
                        let model =
                            Approx::sum(rows.iter().map(|&j| exact(arow(j)) * kb(j)), Fp::F32);
                        w_out[row(&s, b, i, h) + col] = expect(want, model.round(Fp::Bf16));
                    }
                }
            }
        }
    }
    vec![("W", w_out), ("U", u_out)]
}

/// `gdn_chunk_delta_h_init.tir`: per (b, h), the state s (128 x 128) from initial_state over
/// the chunks c of 64 positions (S a multiple of 64), with gl = g[63] of the chunk:
/// h[c] = s; v = U_c − W_c s (V_new[c] = v); v'[i] = v[i] e^{gl − g_i} where gl − g_i ≤ 0,
/// else 0; s ← e^{gl} s + K_c^T v'; final_state = s.
///
/// The model (per 32-wide value block, the same per column): h[c] = bfloat16(s);
/// v = float32(U − Σ_k W[i, k] bfloat16(s)[k]) (float32 sum); V_new = bfloat16(v);
/// v' = float32(v · float32(exp2(float32(float32(gl − g_i) · p)))) with p = float32(1.442695)
/// standing for log2 e; s ← Σ(float32(s · float32(exp2(float32(gl · p)))), K[t, k] ·
/// bfloat16(v'[t])) (float32, any order).
pub fn gdn_chunk_delta_h(o: &Outputs) -> Expected {
    let (k, w, u, g, init) = (
        o["K"].to_f64(),
        o["W"].to_f64(),
        o["U"].to_f64(),
        o["G"].to_f64(),
        o["initial_state"].to_f64(),
    );
    let s = o["K"].shape().to_vec();
    let (batch, seq, heads, dim) = (s[0], s[1], s[2], s[3]);
    let chunks = seq / 64;
    // The file's `1.442695` (not the constant: the original's digits) standing for log2 e.
    #[allow(clippy::approx_constant)]
    let p = Approx::literal(1.442695, std::f64::consts::LOG2_E, Fp::F32);
    let mut h_out = vec![exact(0.0); batch * chunks * heads * dim * dim];
    let mut final_out = vec![exact(0.0); batch * heads * dim * dim];
    let mut vnew_out = vec![exact(0.0); u.len()];
    for b in 0..batch {
        for h in 0..heads {
            let gate = |t: usize| g[(b * seq + t) * heads + h];
            // state[kk * dim + col]: the reference (f64) and the model.
            let base = (b * heads + h) * dim * dim;
            let mut want: Vec<f64> = init[base..base + dim * dim].to_vec();
            let mut model: Vec<Approx> = want.iter().map(|&x| exact(x)).collect();
            for c in 0..chunks {
                let h16: Vec<Approx> = model.iter().map(|x| x.round(Fp::Bf16)).collect();
                for i in 0..dim * dim {
                    h_out[(((b * chunks + c) * heads + h) * dim * dim) + i] =
                        expect(want[i], h16[i]);
                }
                let gl = gate(c * 64 + 63);
                let mut v_want = vec![0.0; 64 * dim];
                let mut v_model = vec![exact(0.0); 64 * dim];
                for r in 0..64 {
                    let t = c * 64 + r;
                    let wr = &w[row(&s, b, t, h)..][..dim];
                    for col in 0..dim {
                        let ws: f64 = (0..dim).map(|kk| wr[kk] * want[kk * dim + col]).sum();
                        let x = u[row(&s, b, t, h) + col] - ws;
                        let wm = Approx::sum(
                            (0..dim).map(|kk| exact(wr[kk]) * h16[kk * dim + col]),
                            Fp::F32,
                        );
                        let xm = f32r(exact(u[row(&s, b, t, h) + col]) - wm);
                        vnew_out[row(&s, b, t, h) + col] = expect(x, xm.round(Fp::Bf16));
                        let d = gl - gate(t);
                        if d <= 0.0 {
                            let dm = f32r(exact(gl) - exact(gate(t)));
                            let decay = f32r(f32r(dm * p).exp2());
                            v_want[r * dim + col] = x * d.exp();
                            v_model[r * dim + col] = f32r(xm * decay);
                        }
                    }
                }
                let decay_want = gl.exp();
                let decay = f32r(f32r(exact(gl) * p).exp2());
                for kk in 0..dim {
                    for col in 0..dim {
                        let i = kk * dim + col;
                        let kv: f64 = (0..64)
                            .map(|r| k[row(&s, b, c * 64 + r, h) + kk] * v_want[r * dim + col])
                            .sum();
                        want[i] = want[i] * decay_want + kv;
                        let terms = (0..64).map(|r| {
                            exact(k[row(&s, b, c * 64 + r, h) + kk])
                                * v_model[r * dim + col].round(Fp::Bf16)
                        });
                        let kept = f32r(model[i] * decay);
                        model[i] = expect(
                            want[i],
                            Approx::sum(std::iter::once(kept).chain(terms), Fp::F32),
                        );
                    }
                }
            }
            for i in 0..dim * dim {
                final_out[base + i] = expect(want[i], model[i]);
            }
        }
    }
    vec![
        ("h", h_out),
        ("final_state", final_out),
        ("V_new", vnew_out),
    ]
}

/// `linear_attn_bwd.tir`: with q = Q · scale, per (b, h), dQ_t = scale Σ_{s ≤ t} (dO_t ·
/// V_s) K_s, dK_s = Σ_{t ≥ s} (dO_t · V_s) q_t, dV_s = Σ_{t ≥ s} (q_t · K_s) dO_t (the
/// caller zeroes dQ, dK, dV).
///
/// The model follows the header per key block kb and value block vb (64 dims each), chunk
/// by chunk (S a multiple of 64): float16 products exact in float32, every gemm a float32
/// sum in any order together with what its accumulator held, the tril / triu scores rounded
/// to float16, the states to float16 where a gemm reads them; dQ = Σ_vb float32(dq ·
/// float32(scale)), dK = Σ_vb dk, dV = Σ_kb dv (the atomic adds into the zeros, any order).
pub fn linear_attn_bwd(o: &Outputs) -> Expected {
    const C: usize = 64;
    let (q, k, v, d_o) = (
        o["Q"].to_f64(),
        o["K"].to_f64(),
        o["V"].to_f64(),
        o["dO"].to_f64(),
    );
    let s = o["Q"].shape().to_vec();
    let (batch, seq, heads, dim) = (s[0], s[1], s[2], s[3]);
    let scale = 1.0 / (dim as f64).sqrt();
    let scale32 = Approx::literal(SCALE_128, scale, Fp::F32);
    let scale16 = Approx::literal(SCALE_128, scale, Fp::F16);
    let blocks = dim / C;
    let mut dq_parts = vec![Vec::new(); q.len()];
    let mut dk_parts = vec![Vec::new(); q.len()];
    let mut dv_parts = vec![Vec::new(); q.len()];
    for b in 0..batch {
        for h in 0..heads {
            let at = |t: usize| row(&s, b, t, h);
            let qm: Vec<Approx> = (0..seq * dim)
                .map(|i| (exact(q[at(i / dim) + i % dim]) * scale16).round(Fp::F16))
                .collect();
            for kb in 0..blocks {
                for vb in 0..blocks {
                    let (kd, vd) = (kb * C..(kb + 1) * C, vb * C..(vb + 1) * C);
                    // dQ: h[vv][kk] (value x key).
                    let mut st = vec![exact(0.0); C * C];
                    for n in (0..seq).step_by(C) {
                        let st16: Vec<Approx> = st.iter().map(|x| x.round(Fp::F16)).collect();
                        for t in n..n + C {
                            let ds16: Vec<Approx> = (n..=t)
                                .map(|u| {
                                    let p =
                                        vd.clone().map(|e| exact(d_o[at(t) + e] * v[at(u) + e]));
                                    Approx::sum(p, Fp::F32).round(Fp::F16)
                                })
                                .collect();
                            for kk in kd.clone() {
                                let intra = (n..=t).map(|u| ds16[u - n] * exact(k[at(u) + kk]));
                                let inter = vd.clone().map(|e| {
                                    exact(d_o[at(t) + e]) * st16[(e - vd.start) * C + kk - kd.start]
                                });
                                let dq = Approx::sum(intra.chain(inter), Fp::F32);
                                dq_parts[at(t) + kk].push(f32r(dq * scale32));
                            }
                        }
                        for (i, x) in st.iter_mut().enumerate() {
                            let (e, kk) = (vd.start + i / C, kd.start + i % C);
                            let terms = (n..n + C).map(|u| exact(v[at(u) + e] * k[at(u) + kk]));
                            *x = Approx::sum(std::iter::once(*x).chain(terms), Fp::F32);
                        }
                    }
                    // dK, dV, in reverse: dh[kk][vv] (key x value).
                    let mut dh = vec![exact(0.0); C * C];
                    for n in (0..seq).step_by(C).rev() {
                        let dh16: Vec<Approx> = dh.iter().map(|x| x.round(Fp::F16)).collect();
                        for r in n..n + C {
                            // s[r, c] = V_r . dO_c and K_r . q_c for c >= r.
                            let sv: Vec<Approx> = (r..n + C)
                                .map(|c| {
                                    let p =
                                        vd.clone().map(|e| exact(v[at(r) + e] * d_o[at(c) + e]));
                                    Approx::sum(p, Fp::F32).round(Fp::F16)
                                })
                                .collect();
                            let sk: Vec<Approx> = (r..n + C)
                                .map(|c| {
                                    let p = kd
                                        .clone()
                                        .map(|kk| exact(k[at(r) + kk]) * qm[c * dim + kk]);
                                    Approx::sum(p, Fp::F32).round(Fp::F16)
                                })
                                .collect();
                            for kk in kd.clone() {
                                let intra = (r..n + C).map(|c| sv[c - r] * qm[c * dim + kk]);
                                let inter = vd.clone().map(|e| {
                                    exact(v[at(r) + e]) * dh16[(kk - kd.start) * C + e - vd.start]
                                });
                                dk_parts[at(r) + kk].push(Approx::sum(intra.chain(inter), Fp::F32));
                            }
                            for e in vd.clone() {
                                let intra = (r..n + C).map(|c| sk[c - r] * exact(d_o[at(c) + e]));
                                let inter = kd.clone().map(|kk| {
                                    exact(k[at(r) + kk]) * dh16[(kk - kd.start) * C + e - vd.start]
                                });
                                dv_parts[at(r) + e].push(Approx::sum(intra.chain(inter), Fp::F32));
                            }
                        }
                        for (i, x) in dh.iter_mut().enumerate() {
                            let (kk, e) = (kd.start + i / C, vd.start + i % C);
                            let terms =
                                (n..n + C).map(|t| qm[t * dim + kk] * exact(d_o[at(t) + e]));
                            *x = Approx::sum(std::iter::once(*x).chain(terms), Fp::F32);
                        }
                    }
                }
            }
            // The references, from the dot products dO_t . V_u and Q_u . K_t.
            let dot = |x: &[f64], t: usize, y: &[f64], u: usize| {
                (0..dim).map(|e| x[at(t) + e] * y[at(u) + e]).sum::<f64>()
            };
            let dov: Vec<f64> = (0..seq * seq)
                .map(|i| dot(&d_o, i / seq, &v, i % seq))
                .collect();
            let qk: Vec<f64> = (0..seq * seq)
                .map(|i| dot(&q, i / seq, &k, i % seq))
                .collect();
            for t in 0..seq {
                for col in 0..dim {
                    let dq: f64 = (0..=t).map(|u| dov[t * seq + u] * k[at(u) + col]).sum();
                    let dk: f64 = (t..seq).map(|u| dov[u * seq + t] * q[at(u) + col]).sum();
                    let dv: f64 = (t..seq).map(|u| qk[u * seq + t] * d_o[at(u) + col]).sum();
                    let i = at(t) + col;
                    let sum = |p: &mut Vec<Approx>| Approx::sum(std::mem::take(p), Fp::F32);
                    dq_parts[i] = vec![expect(dq * scale, sum(&mut dq_parts[i]))];
                    dk_parts[i] = vec![expect(dk * scale, sum(&mut dk_parts[i]))];
                    dv_parts[i] = vec![expect(dv * scale, sum(&mut dv_parts[i]))];
                }
            }
        }
    }
    let flat = |p: Vec<Vec<Approx>>| p.into_iter().map(|x| x[0]).collect();
    vec![
        ("dQ", flat(dq_parts)),
        ("dK", flat(dk_parts)),
        ("dV", flat(dv_parts)),
    ]
}

/// `gdn_chunk_scaled_dot_kkt.tir`: per (b, h) and chunk of 64 positions (rows i, j before
/// S), A[i, j] = β_i (K_i · K_j) e^{g_i − g_j} where j < i and g_i − g_j ≤ 0, else 0 (the
/// 64 columns of every row).
///
/// The model: Σ_k bfloat16(K[i, k] · β_i) · K[j, k] in float32 (any order; bfloat16
/// products exact), times float32(e^{float32(g_i − g_j)}) in float32, rounded to bfloat16.
pub fn gdn_chunk_scaled_dot_kkt(o: &Outputs) -> Expected {
    let (k, beta, g) = (o["K"].to_f64(), o["Beta"].to_f64(), o["G"].to_f64());
    let s = o["K"].shape().to_vec();
    let (batch, seq, heads, dk) = (s[0], s[1], s[2], s[3]);
    let at3 = |b: usize, t: usize, h: usize| (b * seq + t) * heads + h;
    let mut out = Vec::with_capacity(batch * seq * heads * 64);
    for b in 0..batch {
        for i in 0..seq {
            for h in 0..heads {
                let (bi, gi) = (beta[at3(b, i, h)], g[at3(b, i, h)]);
                let ki = &k[row(&s, b, i, h)..][..dk];
                let chunk = i / 64 * 64;
                for jj in 0..64 {
                    let j = chunk + jj;
                    if j >= i || gi - g[at3(b, j, h)] > 0.0 {
                        out.push(exact(0.0));
                        continue;
                    }
                    let gj = g[at3(b, j, h)];
                    let kj = &k[row(&s, b, j, h)..][..dk];
                    let dot: f64 = ki.iter().zip(kj).map(|(x, y)| x * y).sum();
                    let terms = ki
                        .iter()
                        .zip(kj)
                        .map(|(x, y)| exact(x * bi).round(Fp::Bf16) * exact(*y));
                    let e = f32r(f32r(exact(gi) - exact(gj)).exp());
                    let model = f32r(Approx::sum(terms, Fp::F32) * e).round(Fp::Bf16);
                    out.push(expect(bi * dot * (gi - gj).exp(), model));
                }
            }
        }
    }
    vec![("A", out)]
}

/// `kda_chunk_o.tir` (Kimi Delta Attention): per (b, h) and chunk c of 64 positions (rows i
/// before S), O[i, v] = Σ_k scale · Q[i, k] · 2^{GK[i, k]} · HIDDEN[c, k, v] (0 for a ragged
/// last chunk, whose state is past HIDDEN's S / 64 chunks) + Σ_{j ≤ i} A[i, j] · V[j, v].
///
/// The model: q' = bfloat16(Q · bfloat16(scale)), g' = bfloat16(float32(q' · float32(2^GK))),
/// the products g' · HIDDEN and A · V exact in float32, all summed in float32 in any order,
/// one rounding to bfloat16.
pub fn kda_chunk_o(o: &Outputs) -> Expected {
    let (q, v, gk, a, hid) = (
        o["Q"].to_f64(),
        o["V"].to_f64(),
        o["GK"].to_f64(),
        o["A"].to_f64(),
        o["HIDDEN"].to_f64(),
    );
    let s = o["Q"].shape().to_vec();
    let (batch, seq, heads, dk) = (s[0], s[1], s[2], s[3]);
    let dv = o["V"].shape()[3];
    let chunks = o["HIDDEN"].shape()[1];
    let scale = Approx::literal(0.08838834764831843, 1.0 / (dk as f64).sqrt(), Fp::Bf16);
    let mut out = vec![exact(0.0); batch * seq * heads * dv];
    for b in 0..batch {
        for h in 0..heads {
            for i in 0..seq {
                let c = i / 64;
                let qi = &q[row(&s, b, i, h)..][..dk];
                let gi = &gk[row(&s, b, i, h)..][..dk];
                // q' and g' per k (their exact values, scale · q · 2^g, and models).
                let gq: Vec<(f64, Approx)> = qi
                    .iter()
                    .zip(gi)
                    .map(|(&x, &g)| {
                        let q1 = (exact(x) * scale).round(Fp::Bf16);
                        let model = f32r(q1 * f32r(exact(g).exp2())).round(Fp::Bf16);
                        (x * scale.v * g.exp2(), model)
                    })
                    .collect();
                let rows: Vec<usize> = (c * 64..=i).collect();
                for col in 0..dv {
                    let mut want = 0.0;
                    let mut terms = Vec::new();
                    if c < chunks {
                        for (kk, &(w, m)) in gq.iter().enumerate() {
                            let hv = hid[((((b * chunks + c) * heads + h) * dk + kk) * dv) + col];
                            want += w * hv;
                            terms.push(m * exact(hv));
                        }
                    }
                    for &j in &rows {
                        let av = a[row(&[batch, seq, heads, 64], b, i, h) + (j - c * 64)]
                            * v[row(&[batch, seq, heads, dv], b, j, h) + col];
                        want += av;
                        terms.push(exact(av));
                    }
                    let model = Approx::sum(terms, Fp::F32).round(Fp::Bf16);
                    out[row(&[batch, seq, heads, dv], b, i, h) + col] = expect(want, model);
                }
            }
        }
    }
    vec![("O", out)]
}
