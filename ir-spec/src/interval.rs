//! Integer intervals: what is known about the value of an integer expression, for the
//! verifier's bounds rule (`verifier::bounds`), the simplifier's e-graph analysis, the
//! integer facts of the passes' `analysis::int`, `widen-indices` and code generation.
//! Bounds are inclusive mathematical integers — the IR's int32 arithmetic is exact
//! (docs/ir.md, "Integer semantics"), so a bound is never clamped to int32: a sum that may
//! pass 2^31 says so, and `widen-indices` computes it in 64 bits. `i64::MIN` / `i64::MAX`
//! stand for -∞ / +∞ (nothing known on that side); the operations compute in i128 with the
//! infinities far outside i64, so no rule ever turns an unknown end into a false bound
//! (∞ // 10 is still ∞). **Arithmetic wraps at 64 bits** (the interpreter and the GPU
//! alike): a sum, difference or product that may leave int64 is `FULL` — after a wrap no
//! bound holds, so `k * 9223372036854775807 + j` is not proven non-negative and the masks
//! built from it keep both their checks.

use crate::dtype::DType;
use crate::ir::{BinOp, Expr, ExprKind, UnOp};
use std::collections::HashMap;

/// `lo ≤ x ≤ hi`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interval {
    pub lo: i64,
    pub hi: i64,
}

/// ±∞ inside the i128 computations: so large that dividing it by any i64 leaves it
/// outside i64 (it narrows back to ∞), and small enough that a sum of two does not wrap.
const BIG: i128 = 1 << 125;

fn wide(v: i64) -> i128 {
    match v {
        i64::MIN => -BIG,
        i64::MAX => BIG,
        _ => i128::from(v),
    }
}

fn narrow(v: i128) -> i64 {
    i64::try_from(v).unwrap_or(if v < 0 { i64::MIN } else { i64::MAX })
}

fn div_floor(x: i128, y: i128) -> i128 {
    let q = x / y;
    if (x % y != 0) && ((x < 0) != (y < 0)) {
        q - 1
    } else {
        q
    }
}

fn div_ceil(x: i128, y: i128) -> i128 {
    -div_floor(-x, y)
}

impl Interval {
    /// Nothing known.
    pub const FULL: Interval = Interval {
        lo: i64::MIN,
        hi: i64::MAX,
    };

    /// Every int32 (what an int32 value that may have wrapped holds).
    pub const INT32: Interval = Interval {
        lo: i32::MIN as i64,
        hi: i32::MAX as i64,
    };

    /// `[lo, hi]`; an empty range is `FULL` (nothing is known).
    pub fn new(lo: i64, hi: i64) -> Interval {
        if lo > hi {
            return Interval::FULL;
        }
        Interval { lo, hi }
    }

    fn of(lo: i128, hi: i128) -> Interval {
        Interval::new(narrow(lo), narrow(hi))
    }

    pub fn point(v: i64) -> Interval {
        Interval::new(v, v)
    }

    /// The single value, if the interval has one that an int32 holds (the simplifier
    /// folds int32 expressions into literals of their type).
    pub fn constant(self) -> Option<i64> {
        (self.lo == self.hi && self.fits_i32()).then_some(self.lo)
    }

    /// Whether every value fits int32: an int32 computation of it never leaves int32.
    pub fn fits_i32(self) -> bool {
        self.lo >= Interval::INT32.lo && self.hi <= Interval::INT32.hi
    }

    /// Both facts at once (for two descriptions of one value); `None` when they contradict.
    pub fn intersect(self, other: Interval) -> Option<Interval> {
        let (lo, hi) = (self.lo.max(other.lo), self.hi.min(other.hi));
        (lo <= hi).then_some(Interval { lo, hi })
    }

    /// The smallest interval holding both.
    pub fn hull(self, other: Interval) -> Interval {
        Interval::new(self.lo.min(other.lo), self.hi.max(other.hi))
    }

    fn corners(self, b: Interval, f: impl Fn(i128, i128) -> i128) -> Interval {
        let (al, ah, bl, bh) = (wide(self.lo), wide(self.hi), wide(b.lo), wide(b.hi));
        let v = [f(al, bl), f(al, bh), f(ah, bl), f(ah, bh)];
        let lo = v.iter().copied().min().unwrap_or(-BIG);
        let hi = v.iter().copied().max().unwrap_or(BIG);
        Interval::of(lo, hi)
    }

    /// The result of an operation that wraps at 64 bits (`+ - *`, negation): `[lo, hi]`
    /// when every value fits int64, else `FULL` — a value past int64 wraps around, so no
    /// bound on either side would hold (an unknown end of an operand counts as past int64).
    fn wrapping(lo: i128, hi: i128) -> Interval {
        let fits = |v: i128| v > i128::from(i64::MIN) && v < i128::from(i64::MAX);
        if fits(lo) && fits(hi) {
            Interval::of(lo, hi)
        } else {
            Interval::FULL
        }
    }

    pub fn plus(self, b: Interval) -> Interval {
        Interval::wrapping(wide(self.lo) + wide(b.lo), wide(self.hi) + wide(b.hi))
    }

    pub fn minus(self, b: Interval) -> Interval {
        Interval::wrapping(wide(self.lo) - wide(b.hi), wide(self.hi) - wide(b.lo))
    }

    pub fn negated(self) -> Interval {
        Interval::wrapping(-wide(self.hi), -wide(self.lo))
    }

    pub fn times(self, b: Interval) -> Interval {
        let (al, ah, bl, bh) = (wide(self.lo), wide(self.hi), wide(b.lo), wide(b.hi));
        let v = [(al, bl), (al, bh), (ah, bl), (ah, bh)].map(|(x, y)| x.saturating_mul(y));
        let lo = v.iter().copied().min().unwrap_or(-BIG);
        let hi = v.iter().copied().max().unwrap_or(BIG);
        Interval::wrapping(lo, hi)
    }

    /// Floor division; for a divisor that does not contain 0, `x // y` is monotone in each
    /// argument, so the extremes are at the corners.
    pub fn floor_div(self, b: Interval) -> Interval {
        if b.lo <= 0 && b.hi >= 0 {
            // A divisor that may be 0 (an error, not a value) or of either sign: every
            // quotient by an integer of magnitude >= 1 has magnitude <= |x|.
            let m = wide(self.lo).abs().max(wide(self.hi).abs());
            return Interval::of(-m, m);
        }
        self.corners(b, div_floor)
    }

    pub fn ceil_div(self, b: Interval) -> Interval {
        if b.lo <= 0 {
            return Interval::FULL;
        }
        self.corners(b, div_ceil)
    }

    pub fn floor_mod(self, b: Interval) -> Interval {
        if b.lo > 0 {
            if let Some(c) = (b.lo == b.hi && b.hi != i64::MAX).then_some(wide(b.lo)) {
                // One period: the remainders run from lo % c to hi % c.
                let (lo, hi) = (wide(self.lo), wide(self.hi));
                if self.lo != i64::MIN
                    && self.hi != i64::MAX
                    && div_floor(lo, c) == div_floor(hi, c)
                {
                    return Interval::of(lo - div_floor(lo, c) * c, hi - div_floor(hi, c) * c);
                }
            }
            if self.lo >= 0 && self.hi < b.lo {
                return self;
            }
            let hi = if self.lo >= 0 {
                wide(self.hi).min(wide(b.hi) - 1)
            } else {
                wide(b.hi) - 1
            };
            return Interval::of(0, hi);
        }
        if b.hi < 0 {
            return Interval::of(wide(b.lo) + 1, 0);
        }
        // A divisor of either sign: |x % y| < |y|.
        let m = wide(b.lo).abs().max(wide(b.hi).abs());
        Interval::of(-(m - 1), m - 1)
    }

    pub fn min(self, b: Interval) -> Interval {
        Interval::new(self.lo.min(b.lo), self.hi.min(b.hi))
    }

    pub fn max(self, b: Interval) -> Interval {
        Interval::new(self.lo.max(b.lo), self.hi.max(b.hi))
    }

    /// `a op b` for an arithmetic operator: the exact value when both are constants and the
    /// result is a defined int32, else the operator's interval rule (`FULL` for operators
    /// without one).
    pub fn binary(op: BinOp, a: Interval, b: Interval) -> Interval {
        if let (Some(x), Some(y)) = (a.constant(), b.constant()) {
            if let Some(v) = crate::fold_int(op, x, y).filter(|v| i32::try_from(*v).is_ok()) {
                return Interval::point(v);
            }
        }
        match op {
            BinOp::Add => a.plus(b),
            BinOp::Sub => a.minus(b),
            BinOp::Mul => a.times(b),
            BinOp::FloorDiv => a.floor_div(b),
            BinOp::FloorMod => a.floor_mod(b),
            BinOp::CeilDiv => a.ceil_div(b),
            BinOp::Min => a.min(b),
            BinOp::Max => a.max(b),
            // `x & m` with a side in [0, m]: in [0, m] (after any wrapping of the other).
            BinOp::BitAnd if a.lo >= 0 || b.lo >= 0 => {
                let hi = match (a.lo >= 0, b.lo >= 0) {
                    (true, true) => a.hi.min(b.hi),
                    (true, false) => a.hi,
                    _ => b.hi,
                };
                Interval::new(0, hi)
            }
            // `x >> k` by a constant 0 <= k < 32 of an x that fits int32 (no wrapping):
            // the floor shift is monotonic.
            BinOp::Shr if a.fits_i32() => match b.constant() {
                Some(k @ 0..=31) => Interval::new(a.lo >> k, a.hi >> k),
                _ => Interval::INT32,
            },
            _ => Interval::FULL,
        }
    }

    /// `-a`: the exact value of a constant, else the negated interval.
    pub fn negate(a: Interval) -> Interval {
        match a.constant().and_then(|v| 0i64.checked_sub(v)) {
            Some(v) if i32::try_from(v).is_ok() => Interval::point(v),
            _ => a.negated(),
        }
    }
}

/// What is known about the integer variables in scope.
pub trait Env {
    /// The values variable `name` may take; `None`: nothing is known.
    fn range(&self, name: &str) -> Option<Interval>;

    /// The dtype of buffer `name`'s elements, when known: a load of an integer dtype holds
    /// only that dtype's values.
    fn buffer_dtype(&self, _name: &str) -> Option<DType> {
        None
    }

    /// A number every value of variable `name` is a multiple of (1: nothing known). A
    /// symbolic dim's declared `multiple_of`: what lets a row stride `K * 2` be proved a
    /// multiple of 16 bytes when `K` is only known at launch.
    fn multiple(&self, _name: &str) -> i64 {
        1
    }
}

impl Interval {
    /// The values of integer dtype `d` (`None` for floats and bool).
    pub fn of_dtype(d: DType) -> Option<Interval> {
        d.int_range().map(|(lo, hi)| Interval::new(lo, hi))
    }
}

/// Known ranges by variable name (names are unique in a function, so no scoping is
/// needed; a walk adds a loop's variable on entry), and known divisors: the symbolic dims'
/// declared `multiple_of` (checked at launch), which every copy of the map keeps.
/// A map by `Deref`: `insert`, `get`, `iter` are `HashMap`'s.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ranges {
    intervals: HashMap<String, Interval>,
    multiples: std::sync::Arc<HashMap<String, i64>>,
}

impl Ranges {
    /// Nothing known.
    pub fn new() -> Ranges {
        Ranges::default()
    }

    /// These ranges, and every value of variable `name` a multiple of `m` (a dim's
    /// `multiple_of`): the caller guarantees it (the runtime checks dims at launch).
    pub fn with_multiple(mut self, name: &str, m: i64) -> Ranges {
        if m > 1 {
            std::sync::Arc::make_mut(&mut self.multiples).insert(name.to_string(), m);
        }
        self
    }
}

impl std::ops::Deref for Ranges {
    type Target = HashMap<String, Interval>;
    fn deref(&self) -> &Self::Target {
        &self.intervals
    }
}

impl std::ops::DerefMut for Ranges {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.intervals
    }
}

impl FromIterator<(String, Interval)> for Ranges {
    fn from_iter<I: IntoIterator<Item = (String, Interval)>>(iter: I) -> Ranges {
        Ranges {
            intervals: iter.into_iter().collect(),
            multiples: Default::default(),
        }
    }
}

impl<'a> IntoIterator for &'a Ranges {
    type Item = (&'a String, &'a Interval);
    type IntoIter = std::collections::hash_map::Iter<'a, String, Interval>;
    fn into_iter(self) -> Self::IntoIter {
        self.intervals.iter()
    }
}

impl Env for Ranges {
    fn range(&self, name: &str) -> Option<Interval> {
        self.get(name).copied()
    }

    fn multiple(&self, name: &str) -> i64 {
        self.multiples.get(name).copied().unwrap_or(1)
    }
}

/// Nothing is known about any variable.
pub struct Unknown;

impl Env for Unknown {
    fn range(&self, _: &str) -> Option<Interval> {
        None
    }
}

/// The values `e` (an integer expression) may take.
pub fn interval(e: &Expr, env: &dyn Env) -> Interval {
    match &e.kind {
        ExprKind::Int(v) => Interval::point(*v),
        ExprKind::Var(n) => env.range(n).unwrap_or(Interval::FULL),
        ExprKind::Unary(UnOp::Neg, a) => Interval::negate(interval(a, env)),
        ExprKind::Binary(op, a, b) => {
            let r = Interval::binary(*op, interval(a, env), interval(b, env));
            // `x * k % c` is a multiple of g = gcd(k, c): at most `c - g` (`bx * 64 % 128`
            // is 0 or 64, not anything up to 127) — when the product is exact: a product
            // that may wrap (its interval is not finite) is a multiple of g no longer
            // (`43 * 3` in int8 is -127, and -127 % 6 is 5).
            let exact = || {
                let p = interval(a, env);
                p.lo != i64::MIN && p.hi != i64::MAX
            };
            match (op, constant_factor(a), b.as_int()) {
                (BinOp::FloorMod, Some(k), Some(c)) if c > 0 && r.lo >= 0 && exact() => {
                    let g = gcd(k.unsigned_abs(), c.unsigned_abs());
                    match i64::try_from(g) {
                        Ok(g) if g > 1 => Interval::new(r.lo, r.hi.min(c - g)),
                        _ => r,
                    }
                }
                _ => r,
            }
        }
        // Widening keeps the value; narrowing keeps it when it fits (else it may wrap).
        ExprKind::Cast(DType::Int64, a) => interval(a, env),
        ExprKind::Cast(DType::Int32, a) => {
            let r = interval(a, env);
            if r.fits_i32() {
                r
            } else {
                Interval::INT32
            }
        }
        // Either arm: the hull of both.
        ExprKind::Select(_, a, b) => interval(a, env).hull(interval(b, env)),
        ExprKind::Load { buffer, .. } => env
            .buffer_dtype(buffer)
            .and_then(Interval::of_dtype)
            .unwrap_or(Interval::FULL),
        _ => Interval::FULL,
    }
}

/// The constant factor `k` of a product `x * k` or `k * x` (nonzero).
fn constant_factor(e: &Expr) -> Option<i64> {
    match &e.kind {
        ExprKind::Binary(BinOp::Mul, a, b) => b.as_int().or(a.as_int()).filter(|k| *k != 0),
        _ => None,
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Whether condition `cond` holds for every value of its variables (`Some(true)`), for none
/// (`Some(false)`), or may go either way (`None`): boolean literals, `not`, `and`, `or`,
/// and integer comparisons whose sides' intervals decide them.
pub fn decide(cond: &Expr, env: &dyn Env) -> Option<bool> {
    match &cond.kind {
        ExprKind::Bool(b) => Some(*b),
        ExprKind::Unary(UnOp::Not, a) => decide(a, env).map(|b| !b),
        ExprKind::Binary(BinOp::And, a, b) => match (decide(a, env), decide(b, env)) {
            (Some(false), _) | (_, Some(false)) => Some(false),
            (Some(true), Some(true)) => Some(true),
            _ => None,
        },
        ExprKind::Binary(BinOp::Or, a, b) => match (decide(a, env), decide(b, env)) {
            (Some(true), _) | (_, Some(true)) => Some(true),
            (Some(false), Some(false)) => Some(false),
            _ => None,
        },
        ExprKind::Binary(op, a, b) => {
            let (x, y) = (interval(a, env), interval(b, env));
            // Unknown ends are ±∞: they never decide a comparison.
            let known = |v: i64| v != i64::MIN && v != i64::MAX;
            let lt = |p: Interval, q: Interval| known(p.hi) && known(q.lo) && p.hi < q.lo;
            let le = |p: Interval, q: Interval| known(p.hi) && known(q.lo) && p.hi <= q.lo;
            let yes_no = |yes: bool, no: bool| {
                if yes {
                    Some(true)
                } else if no {
                    Some(false)
                } else {
                    None
                }
            };
            match op {
                BinOp::Lt => yes_no(lt(x, y), le(y, x)),
                BinOp::Le => yes_no(le(x, y), lt(y, x)),
                BinOp::Gt => yes_no(lt(y, x), le(x, y)),
                BinOp::Ge => yes_no(le(y, x), lt(x, y)),
                BinOp::Eq => {
                    let same = x.lo == x.hi && x == y && known(x.lo);
                    yes_no(same, lt(x, y) || lt(y, x))
                }
                BinOp::Ne => {
                    let same = x.lo == x.hi && x == y && known(x.lo);
                    yes_no(lt(x, y) || lt(y, x), same)
                }
                _ => None,
            }
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{floor_div, floor_mod};

    /// A load holds only its integer dtype's values where the environment knows the
    /// buffer's dtype; anything otherwise.
    #[test]
    fn a_load_is_within_its_dtype() {
        struct Int8Buffers;
        impl Env for Int8Buffers {
            fn range(&self, _: &str) -> Option<Interval> {
                None
            }
            fn buffer_dtype(&self, name: &str) -> Option<DType> {
                (name == "A").then_some(DType::Int8)
            }
        }
        let load = |b: &str| {
            Expr::new(
                ExprKind::Load {
                    buffer: b.to_string(),
                    indices: vec![Expr::int(0)],
                },
                crate::span::Span::DUMMY,
            )
        };
        let e = Expr::binary(
            BinOp::Sub,
            Expr::int(256),
            load("A"),
            crate::span::Span::DUMMY,
        );
        assert_eq!(interval(&e, &Int8Buffers), Interval::new(129, 384));
        assert_eq!(interval(&load("B"), &Int8Buffers), Interval::FULL);
        assert_eq!(interval(&load("A"), &Unknown), Interval::FULL);
        assert_eq!(
            Interval::of_dtype(DType::UInt32),
            Some(Interval::new(0, 4_294_967_295))
        );
        assert_eq!(Interval::of_dtype(DType::Float16), None);
    }

    /// The bit rules contain every result of the interpreter's bit operators (int32, whose
    /// operands wrap) on members.
    #[test]
    fn bit_rules_are_sound_on_small_ranges() {
        use crate::interp::scalar::{arith, Scalar};
        use crate::ir::BinOp;
        let ranges = [(-7, -2), (-3, 4), (0, 0), (0, 9), (2, 5), (3, 17), (0, 255)];
        for op in [BinOp::BitAnd, BinOp::Shr] {
            for &(alo, ahi) in &ranges {
                for &(blo, bhi) in &ranges {
                    let (a, b) = (Interval::new(alo, ahi), Interval::new(blo, bhi));
                    let r = Interval::binary(op, a, b);
                    for x in alo..=ahi {
                        for y in blo..=bhi {
                            let v = arith(op, crate::DType::Int32, Scalar::Int(x), Scalar::Int(y))
                                .map(|s| s.as_i64())
                                .unwrap_or(0);
                            assert!(
                                r.lo <= v && v <= r.hi,
                                "{op:?} {a:?} {b:?} -> {r:?} misses {v}"
                            );
                        }
                    }
                }
            }
        }
        assert_eq!(
            Interval::binary(BinOp::BitAnd, Interval::FULL, Interval::point(15)),
            Interval::new(0, 15)
        );
    }

    /// `x * k % c` is a multiple of gcd(k, c): its interval ends at `c - gcd`, and holds
    /// every value of members (brute force over small ranges, negative x and k included).
    #[test]
    fn a_multiple_modulo_ends_below_its_divisor() {
        use crate::ir::Expr;
        let mul = |k: i64| {
            Expr::binary(
                crate::ir::BinOp::Mul,
                Expr::var("x"),
                Expr::int(k),
                crate::Span::DUMMY,
            )
        };
        let modulo = |a: Expr, c: i64| {
            Expr::binary(
                crate::ir::BinOp::FloorMod,
                a,
                Expr::int(c),
                crate::Span::DUMMY,
            )
        };
        for (lo, hi) in [(0, 40), (-9, 9), (3, 3)] {
            let env: Ranges = [("x".to_string(), Interval::new(lo, hi))]
                .into_iter()
                .collect();
            for k in [-96, -6, 4, 6, 64, 112, 128] {
                for c in [8, 12, 128] {
                    let r = interval(&modulo(mul(k), c), &env);
                    for x in lo..=hi {
                        let v = floor_mod(x * k, c).unwrap_or(i64::MIN);
                        assert!(r.lo <= v && v <= r.hi, "x*{k}%{c} at {x}: {v} not in {r:?}");
                    }
                }
            }
        }
        let env: Ranges = [("x".to_string(), Interval::new(0, 1000))]
            .into_iter()
            .collect();
        assert_eq!(interval(&modulo(mul(64), 128), &env), Interval::new(0, 64));
        // A product that may wrap keeps the plain remainder interval.
        let unknown: Ranges = Ranges::new();
        assert_eq!(interval(&modulo(mul(3), 6), &unknown), Interval::new(0, 5));
        let huge: Ranges = [("x".to_string(), Interval::new(0, i64::MAX / 2))]
            .into_iter()
            .collect();
        assert_eq!(interval(&modulo(mul(6), 12), &huge), Interval::new(0, 11));
        assert_eq!(
            interval(&modulo(mul(112), 128), &env),
            Interval::new(0, 112)
        );
    }

    /// A sum, difference or product that may leave int64 wraps (the interpreter and the GPU
    /// compute in 64 bits), so its interval is `FULL`: every wrapped result of members lies
    /// in it, and no lower bound survives — the masked copy at `k * (2^63 - 1)` that once
    /// read out of bounds because `k * (2^63 - 1) + j >= 0` was "proven".
    #[test]
    fn results_that_may_leave_int64_are_full() {
        use crate::interp::scalar::{arith, Scalar};
        use crate::ir::BinOp;
        let k = Interval::new(0, 7);
        let big = Interval::point(i64::MAX);
        assert_eq!(k.times(big), Interval::FULL);
        assert_eq!(k.times(big).plus(Interval::new(0, 31)), Interval::FULL);
        assert_eq!(
            Interval::new(0, i64::MAX - 1).plus(Interval::point(5)),
            Interval::FULL
        );
        assert_eq!(
            Interval::point(i64::MIN + 1).minus(Interval::point(2)),
            Interval::FULL
        );
        // Far from the limits nothing changes, and an unknown end stays unknown.
        assert_eq!(
            Interval::new(0, 7).times(Interval::point(128)),
            Interval::new(0, 896)
        );
        assert_eq!(
            Interval::new(1, i64::MAX).floor_div(Interval::point(10)).lo,
            0
        );
        // The wrapped values the interpreter computes are members.
        for x in 0..8 {
            for y in 0..32 {
                let p = arith(
                    BinOp::Mul,
                    crate::DType::Int64,
                    Scalar::Int(x),
                    Scalar::Int(i64::MAX),
                )
                .map(|s| s.as_i64())
                .unwrap_or(0);
                let v = arith(
                    BinOp::Add,
                    crate::DType::Int64,
                    Scalar::Int(p),
                    Scalar::Int(y),
                )
                .map(|s| s.as_i64())
                .unwrap_or(0);
                let r = k.times(big).plus(Interval::new(0, 31));
                assert!(r.lo <= v && v <= r.hi);
            }
        }
    }

    /// Every interval operation contains every result of its operation on members.
    #[test]
    fn operations_are_sound_on_small_ranges() {
        let ranges = [
            (-7, -2),
            (-3, 4),
            (0, 0),
            (0, 9),
            (2, 5),
            (1, 1),
            (-4, -1),
            (3, 17),
        ];
        type Op = (
            fn(Interval, Interval) -> Interval,
            fn(i64, i64) -> Option<i64>,
        );
        let ops: [Op; 8] = [
            (Interval::plus, |x, y| Some(x + y)),
            (Interval::minus, |x, y| Some(x - y)),
            (Interval::times, |x, y| Some(x * y)),
            (Interval::floor_div, floor_div),
            (Interval::floor_mod, floor_mod),
            (Interval::ceil_div, |x, y| {
                crate::fold_int(crate::ir::BinOp::CeilDiv, x, y)
            }),
            (Interval::min, |x, y| Some(x.min(y))),
            (Interval::max, |x, y| Some(x.max(y))),
        ];
        for &(alo, ahi) in &ranges {
            for &(blo, bhi) in &ranges {
                let (a, b) = (Interval::new(alo, ahi), Interval::new(blo, bhi));
                for (iop, op) in &ops {
                    let r = iop(a, b);
                    for x in alo..=ahi {
                        for y in blo..=bhi {
                            if let Some(v) = op(x, y) {
                                assert!(r.lo <= v && v <= r.hi, "{a:?} {b:?} -> {r:?} misses {v}");
                            }
                        }
                    }
                }
            }
        }
        assert_eq!(
            Interval::new(0, 7).floor_mod(Interval::point(8)),
            Interval::new(0, 7)
        );
        assert_eq!(
            Interval::new(9, 12).floor_mod(Interval::point(8)),
            Interval::new(1, 4)
        );
        assert_eq!(
            Interval::new(0, 127).floor_div(Interval::point(32)),
            Interval::new(0, 3)
        );
        // A value no int32 holds is not a constant, but it is a bound.
        assert_eq!(Interval::point(1 << 40).constant(), None);
        assert!(!Interval::point(1 << 40).fits_i32());
        // An unknown end stays unknown through division: no false bound.
        let up = Interval::new(0, i64::MAX);
        assert_eq!(up.floor_div(Interval::point(10)).hi, i64::MAX);
        assert_eq!(up.times(Interval::point(0)), Interval::point(0));
        let huge = Interval::new(0, 1 << 46);
        assert!(!huge.floor_div(Interval::new(10, 1 << 26)).fits_i32());
        let big = Interval::point(i64::from(i32::MAX));
        assert_eq!(big.plus(big).constant(), None);
        assert_eq!(
            Interval::binary(crate::ir::BinOp::Mul, big, big).constant(),
            None
        );
    }

    /// `decide` is sound: a comparison (or a combination) it decides holds, or fails, for
    /// every pair of values in the variables' ranges.
    #[test]
    fn decide_is_sound_on_small_ranges() {
        use crate::ir::{BinOp, Expr, ExprKind, UnOp};
        use crate::span::Span;
        let ranges = [(-3, -1), (-2, 2), (0, 0), (0, 4), (1, 1), (2, 6), (4, 9)];
        let ops = [
            BinOp::Lt,
            BinOp::Le,
            BinOp::Gt,
            BinOp::Ge,
            BinOp::Eq,
            BinOp::Ne,
        ];
        let truth = |op: BinOp, x: i64, y: i64| match op {
            BinOp::Lt => x < y,
            BinOp::Le => x <= y,
            BinOp::Gt => x > y,
            BinOp::Ge => x >= y,
            BinOp::Eq => x == y,
            _ => x != y,
        };
        let cmp = |op| Expr::binary(op, Expr::var("x"), Expr::var("y"), Span::DUMMY);
        for &(xl, xh) in &ranges {
            for &(yl, yh) in &ranges {
                let env: Ranges = [
                    ("x".to_string(), Interval::new(xl, xh)),
                    ("y".to_string(), Interval::new(yl, yh)),
                ]
                .into_iter()
                .collect();
                for &op in &ops {
                    for &op2 in &ops {
                        // Each comparison, its negation, and its `and` / `or` with another.
                        let not =
                            Expr::new(ExprKind::Unary(UnOp::Not, Box::new(cmp(op))), Span::DUMMY);
                        let and = Expr::binary(BinOp::And, cmp(op), cmp(op2), Span::DUMMY);
                        let or = Expr::binary(BinOp::Or, cmp(op), cmp(op2), Span::DUMMY);
                        type Holds = Box<dyn Fn(i64, i64) -> bool>;
                        let cases: [(Expr, Holds); 4] = [
                            (cmp(op), Box::new(move |x, y| truth(op, x, y))),
                            (not, Box::new(move |x, y| !truth(op, x, y))),
                            (
                                and,
                                Box::new(move |x, y| truth(op, x, y) && truth(op2, x, y)),
                            ),
                            (
                                or,
                                Box::new(move |x, y| truth(op, x, y) || truth(op2, x, y)),
                            ),
                        ];
                        for (e, holds) in &cases {
                            if let Some(d) = decide(e, &env) {
                                for x in xl..=xh {
                                    for y in yl..=yh {
                                        assert_eq!(holds(x, y), d, "{e} at x={x}, y={y}, {env:?}");
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        // It decides what the ranges decide.
        let env: Ranges = [
            ("x".to_string(), Interval::new(0, 4)),
            ("y".to_string(), Interval::new(5, 9)),
        ]
        .into_iter()
        .collect();
        assert_eq!(decide(&cmp(BinOp::Lt), &env), Some(true));
        assert_eq!(decide(&cmp(BinOp::Eq), &env), Some(false));
    }
}
