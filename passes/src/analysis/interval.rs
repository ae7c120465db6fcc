//! Integer intervals: what is known about the value of an int32 expression, for the
//! simplifier's e-graph analysis, the integer facts of `analysis::int` and code generation.
//! Bounds are inclusive and kept inside the int32 range, which stands for "unbounded" at its
//! ends. Index arithmetic is int32 and assumed not to overflow (as TVM's `arith` does), so
//! clamping a bound to that range is sound.

use tlc_ir::{floor_div, floor_mod, BinOp};

/// `lo ≤ x ≤ hi`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interval {
    pub lo: i64,
    pub hi: i64,
}

const MIN: i64 = i32::MIN as i64;
const MAX: i64 = i32::MAX as i64;

impl Interval {
    /// Any int32.
    pub const FULL: Interval = Interval { lo: MIN, hi: MAX };

    /// `[lo, hi]` clamped to int32. An empty range, or one wholly outside int32 (a value
    /// no int32 holds: clamping it would invent a constant), is `FULL`: nothing is known.
    pub fn new(lo: i64, hi: i64) -> Interval {
        if lo > hi || lo > MAX || hi < MIN {
            return Interval::FULL;
        }
        Interval {
            lo: lo.clamp(MIN, MAX),
            hi: hi.clamp(MIN, MAX),
        }
    }

    pub fn point(v: i64) -> Interval {
        Interval::new(v, v)
    }

    /// The single value, if the interval has one.
    pub fn constant(self) -> Option<i64> {
        (self.lo == self.hi).then_some(self.lo)
    }

    /// Both facts at once (for two descriptions of one value); `None` when they contradict.
    pub fn intersect(self, other: Interval) -> Option<Interval> {
        let (lo, hi) = (self.lo.max(other.lo), self.hi.min(other.hi));
        (lo <= hi).then_some(Interval { lo, hi })
    }

    fn hull(values: [Option<i64>; 4]) -> Interval {
        let known: Vec<i64> = values.iter().flatten().copied().collect();
        if known.len() < 4 {
            return Interval::FULL;
        }
        let lo = known.iter().copied().min().unwrap_or(MIN);
        let hi = known.iter().copied().max().unwrap_or(MAX);
        Interval::new(lo, hi)
    }

    fn corners(self, b: Interval, f: impl Fn(i64, i64) -> Option<i64>) -> Interval {
        Interval::hull([
            f(self.lo, b.lo),
            f(self.lo, b.hi),
            f(self.hi, b.lo),
            f(self.hi, b.hi),
        ])
    }

    pub fn plus(self, b: Interval) -> Interval {
        Interval::new(self.lo + b.lo, self.hi + b.hi)
    }

    pub fn minus(self, b: Interval) -> Interval {
        Interval::new(self.lo - b.hi, self.hi - b.lo)
    }

    pub fn negated(self) -> Interval {
        Interval::new(-self.hi, -self.lo)
    }

    pub fn times(self, b: Interval) -> Interval {
        self.corners(b, |x, y| x.checked_mul(y))
    }

    /// Floor division; for a divisor that does not contain 0, `x // y` is monotone in each
    /// argument, so the extremes are at the corners.
    pub fn floor_div(self, b: Interval) -> Interval {
        if b.lo <= 0 && b.hi >= 0 {
            return Interval::FULL;
        }
        self.corners(b, floor_div)
    }

    pub fn ceil_div(self, b: Interval) -> Interval {
        if b.lo <= 0 {
            return Interval::FULL;
        }
        self.corners(b, |x, y| tlc_ir::fold_int(tlc_ir::BinOp::CeilDiv, x, y))
    }

    pub fn floor_mod(self, b: Interval) -> Interval {
        if b.lo > 0 {
            if let Some(c) = b.constant() {
                // One period: the remainders run from lo % c to hi % c.
                if floor_div(self.lo, c) == floor_div(self.hi, c) {
                    if let (Some(lo), Some(hi)) = (floor_mod(self.lo, c), floor_mod(self.hi, c)) {
                        return Interval::new(lo, hi);
                    }
                }
            }
            if self.lo >= 0 && self.hi < b.lo {
                return self;
            }
            let hi = if self.lo >= 0 {
                self.hi.min(b.hi - 1)
            } else {
                b.hi - 1
            };
            return Interval::new(0, hi);
        }
        if b.hi < 0 {
            return Interval::new(b.lo + 1, 0);
        }
        Interval::FULL
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
            if let Some(v) = tlc_ir::fold_int(op, x, y).filter(|v| i32::try_from(*v).is_ok()) {
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

#[cfg(test)]
mod tests {
    use super::*;

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
        let ops: [Op; 7] = [
            (Interval::plus, |x, y| Some(x + y)),
            (Interval::minus, |x, y| Some(x - y)),
            (Interval::times, |x, y| Some(x * y)),
            (Interval::floor_div, floor_div),
            (Interval::floor_mod, floor_mod),
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
        // A value no int32 holds is not a constant.
        assert_eq!(Interval::point(1 << 40), Interval::FULL);
        let big = Interval::point(i64::from(i32::MAX));
        assert_eq!(big.plus(big).constant(), None);
        assert_eq!(
            Interval::binary(tlc_ir::BinOp::Mul, big, big).constant(),
            None
        );
    }
}
