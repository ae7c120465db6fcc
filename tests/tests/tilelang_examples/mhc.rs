//! The reference of DeepSeek's manifold-constrained hyper-connection post step
//! (`tests/tilelang/mhc_post.tir`).

use super::{exact, expect, Expected, Outputs};
use tlc_tests::bound::{Approx, Fp};

/// `mhc_post.tir`: x[t, o, j] = c[t, o] · d[t, j] + Σ_{i < hc} a[t, i, o] · b[t, i, j].
///
/// The model, as the kernel's serial loop computes it in float32: f32(c · d), then for i =
/// 0 .. hc − 1 the float32 product a · b added with one float32 rounding each; one rounding
/// to bfloat16 at the store.
pub fn mhc_post(o: &Outputs) -> Expected {
    let (a, b, c, d) = (
        o["a"].to_f64(),
        o["b"].to_f64(),
        o["c"].to_f64(),
        o["d"].to_f64(),
    );
    let s = o["b"].shape().to_vec();
    let (n, hc, h) = (s[0], s[1], s[2]);
    let f32r = |x: Approx| x.round(Fp::F32);
    let mut out = Vec::with_capacity(n * hc * h);
    for t in 0..n {
        for oc in 0..hc {
            for j in 0..h {
                let cd = c[t * hc + oc] * d[t * h + j];
                let mut want = cd;
                let mut model = f32r(exact(cd));
                for i in 0..hc {
                    let ab = a[(t * hc + i) * hc + oc] * b[(t * hc + i) * h + j];
                    want += ab;
                    model = f32r(model + f32r(exact(ab)));
                }
                out.push(expect(want, model.round(Fp::Bf16)));
            }
        }
    }
    vec![("x", out)]
}
