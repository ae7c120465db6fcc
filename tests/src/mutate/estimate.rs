//! A bound on what the interpreter would do with a tile-level kernel, before running it:
//! the differential interprets only kernels under a budget, so a mutant with a loop of
//! 2^31 iterations is skipped, not run for hours.

use std::collections::HashMap;
use tlc_ir::interval::{interval, Interval, Ranges};
use tlc_ir::{PrimFunc, Region, Stmt, StmtKind};

/// How many times a `while` body is assumed to run (the interpreter stops one at 2^24
/// iterations; the kernels of the corpus loop over a few tiles).
const WHILE_TRIPS: f64 = 64.0;

/// Element operations the interpreter performs on `func` (its dims bound: a kernel whose
/// extents are not constants has no estimate), about: loop trip counts times the elements
/// each tile op touches, per block of each grid. `None` when a trip count or an extent
/// has no bound.
pub fn work(func: &PrimFunc) -> Option<f64> {
    let mut cx = Walk {
        ranges: Ranges::new(),
        shapes: HashMap::new(),
    };
    let mut total = 0.0;
    for stmt in &func.body {
        total += cx.stmt(stmt)?;
    }
    Some(total)
}

struct Walk {
    ranges: Ranges,
    /// Element counts of the allocations in scope.
    shapes: HashMap<String, f64>,
}

impl Walk {
    fn body(&mut self, body: &[Stmt]) -> Option<f64> {
        let mut total = 0.0;
        for s in body {
            total += self.stmt(s)?;
        }
        Some(total)
    }

    /// The largest value of an integer expression, at least 0.
    fn most(&self, e: &tlc_ir::Expr) -> Option<f64> {
        let r = interval(e, &self.ranges);
        (r.hi < i64::MAX / 2).then_some(r.hi.max(0) as f64)
    }

    fn elements(&self, r: &Region) -> Option<f64> {
        let mut n = 1.0;
        for range in &r.ranges {
            n *= self.most(&range.extent)?;
        }
        Some(n)
    }

    fn stmt(&mut self, stmt: &Stmt) -> Option<f64> {
        Some(match &stmt.kind {
            StmtKind::Kernel(k) => {
                let mut blocks = 1.0;
                for (var, extent) in k.block_vars.iter().zip(&k.grid) {
                    let g = self.most(extent)?;
                    blocks *= g;
                    let hi = (g as i64 - 1).max(0);
                    self.ranges.insert(var.name.clone(), Interval::new(0, hi));
                }
                for a in &k.allocs {
                    let mut n = 1.0;
                    for d in &a.shape {
                        n *= self.most(d)?;
                    }
                    self.shapes.insert(a.name.name.clone(), n);
                }
                let allocs: f64 = k
                    .allocs
                    .iter()
                    .filter_map(|a| self.shapes.get(&a.name.name))
                    .sum();
                blocks * (self.body(&k.body)? + allocs)
            }
            StmtKind::For(f) => {
                let lo = interval(&f.start, &self.ranges);
                let hi = interval(&f.stop, &self.ranges);
                if lo.lo == i64::MIN || hi.hi == i64::MAX {
                    return None;
                }
                let trips = (hi.hi as f64 - lo.lo as f64).max(0.0);
                let last = hi.hi.saturating_sub(1).max(lo.lo);
                self.ranges
                    .insert(f.var.name.clone(), Interval::new(lo.lo, last));
                1.0 + trips * (1.0 + self.body(&f.body)?)
            }
            StmtKind::While { body, .. } => WHILE_TRIPS * (1.0 + self.body(body)?),
            StmtKind::If {
                then_body,
                else_body,
                ..
            } => 1.0 + self.body(then_body)? + self.body(else_body)?,
            StmtKind::Copy { src, dst } => self.elements(src)?.max(self.elements(dst)?),
            StmtKind::Fill { dst, .. } => self.elements(dst)?,
            StmtKind::Gemm(g) => {
                // M·N·K = sqrt(MK · KN · MN).
                (self.elements(&g.a)? * self.elements(&g.b)? * self.elements(&g.c)?).sqrt()
            }
            StmtKind::Reduce(r) => *self.shapes.get(&r.src.name)?,
            StmtKind::AllReduce(_) => 32.0,
            _ => 1.0,
        })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn loops_multiply_and_unbounded_ones_have_no_estimate() {
        let kernel = |n: &str| {
            format!(
                "@T.prim_func\ndef f(A: T.Tensor((64, 64), \"float32\")):\n    with T.Kernel(4, threads=128) as (bx):\n        for k in T.serial({n}):\n            for i, j in T.Parallel(64, 64):\n                A[i, j] = A[i, j] + 1.0\n"
            )
        };
        let small = super::work(&tlc_ir::parse(&kernel("2")).expect("parses")).expect("bound");
        let big = super::work(&tlc_ir::parse(&kernel("2000")).expect("parses")).expect("bound");
        // 4 blocks × 2 iterations × a 64 × 64 nest (two statements an element).
        assert!((32_768.0..100_000.0).contains(&small), "{small}");
        assert!(big > 900.0 * small, "{big} vs {small}");
    }
}
