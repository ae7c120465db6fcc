//! The two 8-bit float formats: OCP `E4M3FN` (`float8_e4m3`) and `E5M2` (`float8_e5m2`).
//!
//! | format | bias | max finite | infinities | NaN |
//! |---|---|---|---|---|
//! | e4m3 | 7 | 448 (`0x7E`) | none | `S.1111.111` (`0x7F` / `0xFF`) |
//! | e5m2 | 15 | 57344 (`0x7B`) | `S.11111.00` | `S.11111.xx`, xx ≠ 0 (`0x7F` / `0xFF` written) |
//!
//! **Conversion to fp8** (from any wider value) rounds to nearest, ties to even, with
//! subnormals. Magnitudes beyond the largest finite value — infinities included — saturate to
//! ± max finite, and NaN stays NaN (sign kept): this is PTX `cvt.rn.satfinite`, the only
//! rounding mode the hardware offers for f32 → fp8, so the interpreter and the GPU agree.
//! Decoding is exact.

/// The parameters of one 8-bit float format.
#[derive(Clone, Copy, Debug)]
pub struct Fp8Format {
    /// Mantissa (fraction) bits.
    man_bits: u32,
    bias: i32,
    /// Largest finite magnitude and its bits.
    max_finite: f64,
    max_bits: u8,
    /// Whether exponent-all-ones with a zero mantissa is infinity (IEEE style).
    has_inf: bool,
}

/// OCP E4M3FN.
pub const E4M3: Fp8Format = Fp8Format {
    man_bits: 3,
    bias: 7,
    max_finite: 448.0,
    max_bits: 0x7E,
    has_inf: false,
};

/// OCP E5M2.
pub const E5M2: Fp8Format = Fp8Format {
    man_bits: 2,
    bias: 15,
    max_finite: 57344.0,
    max_bits: 0x7B,
    has_inf: true,
};

impl Fp8Format {
    /// Mantissa (fraction) bits: 3 for e4m3, 2 for e5m2.
    pub fn man_bits(self) -> u32 {
        self.man_bits
    }

    /// The exponent bias: 7 for e4m3, 15 for e5m2.
    pub fn bias(self) -> i32 {
        self.bias
    }

    /// The largest finite magnitude (448, 57344).
    pub fn max_finite(self) -> f64 {
        self.max_finite
    }

    /// The bits of the largest finite magnitude (`0x7E`, `0x7B`).
    pub fn max_bits(self) -> u8 {
        self.max_bits
    }

    /// Whether exponent-all-ones with a zero mantissa is infinity (e5m2); e4m3 has no
    /// infinities and one NaN magnitude, `0x7F`.
    pub fn has_inf(self) -> bool {
        self.has_inf
    }
}

/// The NaN this module writes (sign bit aside): all exponent and mantissa bits set.
const NAN_BITS: u8 = 0x7F;

/// Encodes `x` (round to nearest even, saturating; see the module doc).
pub fn encode(fmt: Fp8Format, x: f64) -> u8 {
    let sign: u8 = if x.is_sign_negative() { 0x80 } else { 0 };
    if x.is_nan() {
        return sign | NAN_BITS;
    }
    let a = x.abs();
    if a > fmt.max_finite {
        return sign | fmt.max_bits;
    }
    let m = fmt.man_bits as i32;
    let emin = 1 - fmt.bias;
    // Half of the smallest subnormal and below round to zero (the tie goes to even = 0).
    if a <= pow2(emin - m - 1) {
        return sign;
    }
    // `a` is a normal f64 here, so its exponent field is meaningful.
    let exp = ((a.to_bits() >> 52) & 0x7ff) as i32 - 1023;
    let e = exp.max(emin);
    // Dividing by a power of two is exact; the rounding happens only in `round_ties_even`.
    let r = (a / pow2(e - m)).round_ties_even() as u32;
    let (e, r) = if r >= 1 << (m + 1) {
        (e + 1, r / 2)
    } else {
        (e, r)
    };
    let bits = if r < 1 << m {
        r // subnormal: exponent field 0
    } else {
        (((e + fmt.bias) as u32) << m) | (r - (1 << m))
    };
    sign | (bits as u8).min(fmt.max_bits)
}

/// The bits that hold `x` in memory: exact for every value of the format, e5m2's
/// infinities included (`0x7C` / `0xFC`); any other value is converted as by [`encode`]
/// (a NaN becomes `S.1111111`). Storage — shared memory, `.npy` files, device uploads —
/// uses this, so an fp8 value read from memory and stored unchanged keeps its bits, as
/// the GPU's byte copies do; conversions (`encode`) saturate infinities.
pub fn bits(fmt: Fp8Format, x: f64) -> u8 {
    if x.is_infinite() && fmt.has_inf {
        let sign: u8 = if x < 0.0 { 0x80 } else { 0 };
        return sign | (0x7F >> fmt.man_bits << fmt.man_bits);
    }
    encode(fmt, x)
}

/// Decodes fp8 bits to their exact value.
pub fn decode(fmt: Fp8Format, bits: u8) -> f64 {
    let m = fmt.man_bits;
    let exp_mask = (0x7Fu8 >> m) as i32;
    let e = ((bits & 0x7F) >> m) as i32;
    let f = (bits & ((1u8 << m) - 1)) as i32;
    let magnitude = if e == exp_mask && (fmt.has_inf || f == (1 << m) - 1) {
        if fmt.has_inf && f == 0 {
            f64::INFINITY
        } else {
            f64::NAN
        }
    } else if e == 0 {
        f as f64 * pow2(1 - fmt.bias - m as i32)
    } else {
        (1.0 + f as f64 / (1u32 << m) as f64) * pow2(e - fmt.bias)
    };
    if bits & 0x80 != 0 {
        -magnitude
    } else {
        magnitude
    }
}

/// Rounds `x` to the nearest value of the format (the value, not the bits).
pub fn round(fmt: Fp8Format, x: f64) -> f64 {
    decode(fmt, encode(fmt, x))
}

fn pow2(e: i32) -> f64 {
    2f64.powi(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e4m3_known_encodings() {
        let table: &[(f64, u8)] = &[
            (0.0, 0x00),
            (-0.0, 0x80),
            (1.0, 0x38),
            (-2.0, 0xC0),
            (448.0, 0x7E),
            (-448.0, 0xFE),
            (500.0, 0x7E),                 // saturates
            (f64::INFINITY, 0x7E),         // saturates
            (2f64.powi(-9), 0x01),         // smallest subnormal
            (2f64.powi(-10), 0x00),        // tie with 0 goes to even
            (0.875 * 2f64.powi(-6), 0x07), // largest subnormal
            (2f64.powi(-6), 0x08),         // smallest normal
            (1.0625, 0x38),                // tie between 1.0 and 1.125 → even
            (1.1875, 0x3A),                // tie between 1.125 and 1.25 → even
            (0.3, 0x2A),                   // 0.3 ≈ 1.25 * 2^-2 = 0.3125 (0x2A)
        ];
        for &(x, bits) in table {
            assert_eq!(encode(E4M3, x), bits, "encode {x}");
        }
        assert_eq!(encode(E4M3, f64::NAN) & 0x7F, 0x7F);
        assert!(decode(E4M3, 0x7F).is_nan());
        assert!(decode(E4M3, 0xFF).is_nan());
        assert_eq!(decode(E4M3, 0x7E), 448.0);
        assert_eq!(decode(E4M3, 0x01), 2f64.powi(-9));
        assert_eq!(decode(E4M3, 0x78), 256.0);
    }

    #[test]
    fn e5m2_known_encodings() {
        let table: &[(f64, u8)] = &[
            (1.0, 0x3C),
            (-0.5, 0xB8),
            (57344.0, 0x7B),
            (1e9, 0x7B),
            (f64::NEG_INFINITY, 0xFB),
            (2f64.powi(-16), 0x01),
            (2f64.powi(-14), 0x04),
            (1.125, 0x3C), // tie between 1.0 and 1.25 → even
            (1.375, 0x3E), // tie between 1.25 and 1.5 → even
        ];
        for &(x, bits) in table {
            assert_eq!(encode(E5M2, x), bits, "encode {x}");
        }
        assert_eq!(decode(E5M2, 0x7C), f64::INFINITY);
        assert_eq!(decode(E5M2, 0xFC), f64::NEG_INFINITY);
        assert!(decode(E5M2, 0x7D).is_nan());
        assert!(decode(E5M2, 0x7F).is_nan());
    }

    #[test]
    fn storage_keeps_every_code() {
        for fmt in [E4M3, E5M2] {
            for code in 0..=255u8 {
                let v = decode(fmt, code);
                if !v.is_nan() {
                    assert_eq!(bits(fmt, v), code, "{fmt:?} code {code:#04x}");
                }
            }
        }
        assert_eq!(bits(E5M2, f64::INFINITY), 0x7C);
        assert_eq!(bits(E5M2, f64::NEG_INFINITY), 0xFC);
        assert_eq!(bits(E4M3, f64::INFINITY), 0x7E);
        assert_eq!(encode(E5M2, f64::INFINITY), 0x7B);
    }

    #[test]
    fn every_finite_code_round_trips() {
        for fmt in [E4M3, E5M2] {
            for bits in 0..=255u8 {
                let v = decode(fmt, bits);
                if v.is_finite() {
                    let back = encode(fmt, v);
                    // ±0 keep their sign bit; everything else is unique.
                    assert_eq!(back, bits, "{fmt:?} code {bits:#04x} value {v}");
                }
            }
        }
    }
}
