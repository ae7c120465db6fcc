//! The reference of DeepSeek-V4's block-wise fp8 activation quantization
//! (`tests/tilelang/act_quant_fp8.tir`): exact, as every step is (a float32 max, a float32
//! product, power-of-two scales, an exact division, one rounding to e4m3).

use super::{exact, Expected, Outputs};
use tlc_ir::interp::fp8;

/// The scale of a group whose largest magnitude is `amax` (float32): 2^ceil(log2(v)) for
/// the float32 product v = amax · float32(1 / 448), read off v's bits as the kernel does
/// (the exponent, plus one when any mantissa bit is set).
fn round_scale(amax: f32) -> f64 {
    let v = amax * (1.0f64 / 448.0) as f32;
    let bits = v.to_bits();
    let exponent = ((bits >> 23) & 0xff) as i32 - 127 + i32::from(bits & 0x7f_ffff != 0);
    2f64.powi(exponent)
}

/// `act_quant_fp8.tir`: per row and 128-wide group, s = [`round_scale`] of max(max |x|,
/// float32(1e-4)), quant = e4m3(clamp(x / s, ±448)), scale = s.
pub fn act_quant_fp8(o: &Outputs) -> Expected {
    let x = &o["x"];
    let (m, n) = (x.shape()[0], x.shape()[1]);
    let xv = x.to_f64();
    let groups = n.div_ceil(128);
    let mut quant = vec![exact(0.0); m * n];
    let mut scale = vec![exact(0.0); m * groups];
    for r in 0..m {
        for g in 0..groups {
            let cols = g * 128..((g + 1) * 128).min(n);
            let amax = cols
                .clone()
                .map(|c| xv[r * n + c].abs() as f32)
                .fold(1e-4f32, f32::max);
            let s = round_scale(amax);
            scale[r * groups + g] = exact(s);
            for c in cols {
                let y = (xv[r * n + c] / s).clamp(-448.0, 448.0);
                quant[r * n + c] = exact(fp8::decode(fp8::E4M3, fp8::encode(fp8::E4M3, y)));
            }
        }
    }
    vec![("quant", quant), ("scale", scale)]
}
