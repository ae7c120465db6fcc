//! Shared helpers of the end-to-end tests: where the cases live, and how to run the
//! front end on one of them the way the `tlc` binary does.

pub mod philox;

use std::path::{Path, PathBuf};

/// The workspace root (the parent of this crate).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

fn tir_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "tir"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no .tir files in {}", dir.display());
    files
}

/// Kernels that must parse, verify and round-trip: `tests/cases/valid/` and `examples/`.
pub fn valid_cases() -> Vec<PathBuf> {
    let mut all = tir_files(&root().join("tests/cases/valid"));
    all.extend(tir_files(&root().join("examples")));
    all
}

/// Inputs that must be rejected with a rendered error.
pub fn malformed_cases() -> Vec<PathBuf> {
    tir_files(&root().join("tests/cases/malformed"))
}

/// Kernels `tlc check` accepts and `tlc compile` refuses (a pass or code generation), with
/// located errors: `tests/cases/refused/`.
pub fn refused_cases() -> Vec<PathBuf> {
    tir_files(&root().join("tests/cases/refused"))
}

/// The file's stem, used to name its snapshots.
pub fn stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The path as the user would type it from the workspace root, so rendered diagnostics do not
/// depend on where the checkout lives.
pub fn relative(path: &Path) -> PathBuf {
    path.strip_prefix(root())
        .map(Path::to_path_buf)
        .unwrap_or_else(|_| path.to_path_buf())
}

pub mod mutate;

/// Error-bounded reference arithmetic for float kernels (`tests/tests/tilelang_examples.rs`).
///
/// An [`Approx`] is a real number `v` — what exact arithmetic gives — and a bound `e` on how
/// far a kernel that computes the same expression in narrower floats may be from it. Each
/// operation propagates the bound exactly (no first-order dropping):
///
/// - `a ± b`: `ea + eb`; `a · b`: `|a|·eb + |b|·ea + ea·eb`;
///   `a / b`: `(ea + |a/b|·eb) / (|b| − eb)` (needs `|b| > eb`);
/// - `exp2(a)`: `2^a · (2^ea − 1)`; `exp(a)`: `e^a · (e^ea − 1)`; `log2(a)`: `−log2(1 − ea/a)` (needs `a > ea`);
///   `rsqrt(a)`: `a^-1/2 · ((1 − ea/a)^-1/2 − 1)` (needs `a > ea`); `max(a, b)`: `max(ea, eb)`;
/// - a rounding to a format ([`Approx::round`]): `+ u·(|v| + e) + tiny`, where `u` is the
///   format's unit roundoff and `tiny` half its smallest subnormal. float16 and bfloat16
///   arithmetic rounds twice in tlc's interpreter (computed in float32, rounded back, docs/ir.md
///   "Floats"), so their `u` is `2^-11 + 2^-24` and `2^-8 + 2^-24`; float32's is `2^-24`.
/// - a sum of `n` terms in any order ([`Approx::sum`]: sequential, strided partials then a
///   tree, an mma's k-steps): at most `n − 1` roundings, each of a partial sum no larger than
///   `Σ(|vi| + ei)`, so `Σ ei + (n − 1)·u·Σ(|vi| + ei)·(1 + n·u) + (n − 1)·tiny`.
///
/// The math functions are exact in the interpreter (the value at the argument, rounded once
/// to its dtype, docs/ir.md "Math functions"), so a chain of these models what the
/// interpreter computes at any evaluation order of its sums; a reference compares a kernel's
/// output `x` with an independently computed exact value `r` by `|x − r| ≤ e` ([`Approx::admits`]).
pub mod bound {
    use half::{bf16, f16};
    use std::ops::{Add, Div, Mul, Sub};

    /// A float format a kernel rounds to.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Fp {
        F32,
        F16,
        Bf16,
    }

    impl Fp {
        /// The relative error bound of one rounding to this format as tlc's interpreter does it.
        pub fn unit(self) -> f64 {
            let u32 = 2f64.powi(-24);
            match self {
                Fp::F32 => u32,
                Fp::F16 => 2f64.powi(-11) + u32,
                Fp::Bf16 => 2f64.powi(-8) + u32,
            }
        }

        /// Half the smallest subnormal: the absolute error bound of a rounding near zero.
        pub fn tiny(self) -> f64 {
            match self {
                Fp::F32 => 2f64.powi(-150),
                Fp::F16 => 2f64.powi(-25),
                Fp::Bf16 => 2f64.powi(-134),
            }
        }

        /// `x` rounded to the nearest value of this format (ties to even).
        pub fn round(self, x: f64) -> f64 {
            match self {
                Fp::F32 => f64::from(x as f32),
                Fp::F16 => f16::from_f64(x).to_f64(),
                Fp::Bf16 => bf16::from_f64(x).to_f64(),
            }
        }
    }

    /// An exact value and a bound on a computed value's distance from it.
    #[derive(Clone, Copy, Debug, PartialEq)]
    pub struct Approx {
        pub v: f64,
        pub e: f64,
    }

    impl Approx {
        /// A value the kernel holds exactly (an input, a product exact in float32).
        pub fn exact(v: f64) -> Approx {
            Approx { v, e: 0.0 }
        }

        /// A literal written as `written` in a kernel whose operand has format `fp`, standing
        /// for the real `meant` (`1.44269504` for log2 e): its error is the literal's rounding
        /// plus the difference between what is written and what is meant.
        pub fn literal(written: f64, meant: f64, fp: Fp) -> Approx {
            Approx {
                v: meant,
                e: (fp.round(written) - meant).abs(),
            }
        }

        /// The computed value rounded to `fp`.
        pub fn round(self, fp: Fp) -> Approx {
            Approx {
                v: self.v,
                e: self.e + fp.unit() * (self.v.abs() + self.e) + fp.tiny(),
            }
        }

        pub fn exp2(self) -> Approx {
            let v = self.v.exp2();
            Approx {
                v,
                e: v * (self.e.exp2() - 1.0),
            }
        }

        /// `e^a`, the interpreter's `T.exp` (exact, then rounded once by the caller):
        /// `e^a · (e^ea − 1)`.
        pub fn exp(self) -> Approx {
            let v = self.v.exp();
            Approx {
                v,
                e: v * self.e.exp_m1(),
            }
        }

        pub fn log2(self) -> Approx {
            assert!(self.v > self.e, "log2 of {self:?}: the bound reaches 0");
            Approx {
                v: self.v.log2(),
                e: -(1.0 - self.e / self.v).log2(),
            }
        }

        pub fn rsqrt(self) -> Approx {
            assert!(self.v > self.e, "rsqrt of {self:?}: the bound reaches 0");
            let v = 1.0 / self.v.sqrt();
            Approx {
                v,
                e: v * (1.0 / (1.0 - self.e / self.v).sqrt() - 1.0),
            }
        }

        pub fn max(self, other: Approx) -> Approx {
            Approx {
                v: self.v.max(other.v),
                e: self.e.max(other.e),
            }
        }

        /// The sum of `terms` computed in `fp` in any order (module doc).
        pub fn sum(terms: impl IntoIterator<Item = Approx>, fp: Fp) -> Approx {
            let (mut v, mut e, mut mag, mut n) = (0.0, 0.0, 0.0, 0usize);
            for t in terms {
                v += t.v;
                e += t.e;
                mag += t.v.abs() + t.e;
                n += 1;
            }
            let roundings = n.saturating_sub(1) as f64;
            let u = fp.unit();
            Approx {
                v,
                e: e + roundings * u * mag * (1.0 + n as f64 * u) + roundings * fp.tiny(),
            }
        }

        /// Whether `got` may be this value as computed: `|got − v| ≤ e`, with a margin of
        /// 2^-40 relative for the bound's own f64 evaluation. An infinite `v` (an exact −∞
        /// a kernel writes, as a mask) admits only itself.
        pub fn admits(&self, got: f64) -> bool {
            if self.v.is_infinite() {
                return got == self.v;
            }
            (got - self.v).abs() <= self.e * (1.0 + 2f64.powi(-40)) + self.v.abs() * 2f64.powi(-50)
        }
    }

    impl Add for Approx {
        type Output = Approx;
        fn add(self, o: Approx) -> Approx {
            Approx {
                v: self.v + o.v,
                e: self.e + o.e,
            }
        }
    }

    impl Sub for Approx {
        type Output = Approx;
        fn sub(self, o: Approx) -> Approx {
            Approx {
                v: self.v - o.v,
                e: self.e + o.e,
            }
        }
    }

    impl Mul for Approx {
        type Output = Approx;
        fn mul(self, o: Approx) -> Approx {
            Approx {
                v: self.v * o.v,
                e: self.v.abs() * o.e + o.v.abs() * self.e + self.e * o.e,
            }
        }
    }

    impl Div for Approx {
        type Output = Approx;
        fn div(self, o: Approx) -> Approx {
            assert!(o.v.abs() > o.e, "division by {o:?}: the bound reaches 0");
            let v = self.v / o.v;
            Approx {
                v,
                e: (self.e + v.abs() * o.e) / (o.v.abs() - o.e),
            }
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use crate::mutate::Rng;

        /// log2 e as TileLang's examples write it.
        #[allow(clippy::approx_constant)]
        const LOG2_E_WRITTEN: f64 = 1.44269504;

        fn uniform(rng: &mut Rng) -> f64 {
            (rng.next_u64() >> 11) as f64 * 2f64.powi(-53) * 2.0 - 1.0
        }

        /// The bounds hold for float32 / float16 evaluations in orders that differ, and are
        /// not vacuous: a computation off by more than rounding is outside them.
        #[test]
        fn the_bounds_hold_for_float_evaluations_and_bind() {
            let mut rng = Rng(0x5eed);
            for round in 0..50 {
                let n = 1 + rng.below(3000);
                let xs: Vec<f32> = (0..n).map(|_| uniform(&mut rng) as f32).collect();
                // A sum of squares, forward and as a tree, then rsqrt and a product.
                let sq: Vec<f32> = xs.iter().map(|x| x * x).collect();
                let fwd: f32 = sq.iter().sum();
                let tree = |v: &[f32]| -> f32 {
                    let mut v = v.to_vec();
                    while v.len() > 1 {
                        v = v.chunks(2).map(|c| c.iter().sum()).collect();
                    }
                    v[0]
                };
                let terms = xs.iter().map(|&x| {
                    let a = Approx::exact(f64::from(x));
                    (a * a).round(Fp::F32)
                });
                let s = Approx::sum(terms, Fp::F32);
                assert!(
                    s.admits(f64::from(fwd)) && s.admits(f64::from(tree(&sq))),
                    "{round}"
                );
                let r = (s / Approx::exact(n as f64))
                    .round(Fp::F32)
                    .rsqrt()
                    .round(Fp::F32);
                let got = (1.0 / (f64::from(fwd / n as f32)).sqrt()) as f32;
                assert!(r.admits(f64::from(got)), "{round}: {r:?} {got}");
                // float16: exp2 of a difference of float16 products, summed in float32.
                let scale = Approx::literal(LOG2_E_WRITTEN, std::f64::consts::LOG2_E, Fp::F16);
                let h = |x: f64| f16::from_f64(x);
                let s16 = h(LOG2_E_WRITTEN);
                let (mut sum, mut terms) = (0f32, Vec::new());
                for &x in &xs {
                    let xs16 = h(f64::from(x)) * s16;
                    let d = h((xs16 - s16).to_f64());
                    let p = h(d.to_f64().exp2());
                    sum += p.to_f32();
                    let a = Approx::exact(h(f64::from(x)).to_f64());
                    let t = ((a * scale).round(Fp::F16) - scale.round(Fp::F16)).round(Fp::F16);
                    terms.push(t.exp2().round(Fp::F16));
                }
                let b = Approx::sum(terms, Fp::F32);
                assert!(b.admits(f64::from(sum)), "{round}: {b:?} {sum}");
                // Not vacuous: 1 % off (float16 terms) or 0.1 % off (float32) is outside.
                assert!(!b.admits(f64::from(sum) * 1.01), "{round}: {b:?}");
                assert!(!s.admits(f64::from(fwd) * 1.001), "{round}: {s:?}");
            }
        }

        #[test]
        fn literals_carry_what_their_format_and_spelling_lose() {
            let l = Approx::literal(LOG2_E_WRITTEN, std::f64::consts::LOG2_E, Fp::F16);
            assert_eq!(l.v, std::f64::consts::LOG2_E);
            assert_eq!(l.e, (1.4423828125 - std::f64::consts::LOG2_E).abs());
            assert_eq!(Approx::literal(0.5, 0.5, Fp::Bf16).e, 0.0);
        }
    }
}
