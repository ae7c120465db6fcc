//! Integer facts about index expressions: the values an expression may take (its
//! [`Interval`] under what is known of its variables), whether it is a multiple of a
//! constant for every value of its variables, whether it mentions a variable, and the
//! offset of an index `offset + lane`. **One definition of each**, used by the passes and by
//! code generation: when `lower-tile-ops` or `inject-cp-async` decides that an access is
//! aligned and contiguous, codegen's vector check proves the same thing with the same rule.
//!
//! What is known about variables is an [`Env`]: a map from names to intervals
//! ([`Ranges`]), or codegen's own bindings (unrolled loop variables are constants).

use tlc_ir::affine::constant_difference;
use tlc_ir::interval::Interval;
pub use tlc_ir::interval::{decide, interval, Env, Ranges, Unknown};
pub use tlc_ir::visit::mentions;
use tlc_ir::visit::{for_each_subexpr, map_expr};
use tlc_ir::{BinOp, Expr, ExprKind, For, Kernel, PrimFunc, UnOp};

/// The ranges of a function's symbolic dims: every one is at least 1 (a dim of 0 leaves
/// nothing to run) and at most its `Dim::max` (checked at launch).
pub fn dim_ranges(func: &PrimFunc) -> Ranges {
    let ranges: Ranges = func
        .dims
        .iter()
        .map(|d| (d.name.clone(), Interval::new(1, d.max())))
        .collect();
    func.dims
        .iter()
        .fold(ranges, |r, d| r.with_multiple(&d.name, d.multiple_of))
}

/// Adds what entering kernel `k` tells: each block variable lies in `[0, grid)`.
pub fn enter_kernel(ranges: &mut Ranges, k: &Kernel) {
    for (v, g) in k.block_vars.iter().zip(&k.grid) {
        let hi = interval(g, ranges).hi;
        ranges.insert(v.name.clone(), Interval::new(0, hi.saturating_sub(1)));
    }
}

/// Adds what entering loop `f` tells: its variable lies in `[start, stop)` (at least its
/// start, for a loop that may run no iteration).
pub fn enter_loop(ranges: &mut Ranges, f: &For) {
    let lo = interval(&f.start, ranges).lo;
    // An unknown stop leaves the variable's top unknown (not a finite 2^63 - 2).
    let hi = match interval(&f.stop, ranges).hi {
        i64::MAX => i64::MAX,
        hi => hi - 1,
    };
    ranges.insert(f.var.name.clone(), Interval::new(lo, hi.max(lo)));
}

/// What taking one side of `if cond` tells about the variables in `ranges`: for each
/// comparison of a known variable with a constant — every conjunct of `cond` on the `then`
/// side (`taken`), `cond` itself negated on the `else` side — the variable's interval
/// narrowed by it. A side that cannot run (an empty interval) narrows nothing.
pub fn narrowed(cond: &Expr, taken: bool, ranges: &Ranges) -> Vec<(String, Interval)> {
    use BinOp::{Eq, Ge, Gt, Le, Lt, Ne};
    let tests: Vec<&Expr> = if taken { conjuncts(cond) } else { vec![cond] };
    let mut out: Vec<(String, Interval)> = Vec::new();
    for t in tests {
        let ExprKind::Binary(op, a, b) = &t.kind else {
            continue;
        };
        // `v op c`, or `c op v` read as `v op' c`.
        let (v, op, c) = match (&a.kind, &b.kind) {
            (ExprKind::Var(v), _) => (v, *op, constant(b, ranges)),
            (_, ExprKind::Var(v)) => {
                let mirrored = match op {
                    Lt => Gt,
                    Le => Ge,
                    Gt => Lt,
                    Ge => Le,
                    other => *other,
                };
                (v, mirrored, constant(a, ranges))
            }
            _ => continue,
        };
        let (Some(c), Some(known)) = (c, ranges.get(v.as_str()).copied()) else {
            continue;
        };
        let op = if taken {
            op
        } else {
            match op {
                Lt => Ge,
                Le => Gt,
                Gt => Le,
                Ge => Lt,
                Eq => Ne,
                Ne => Eq,
                _ => continue,
            }
        };
        let current = out.iter().find(|(n, _)| n == v).map_or(known, |(_, r)| *r);
        let (lo, hi) = match op {
            Lt => (current.lo, current.hi.min(c.saturating_sub(1))),
            Le => (current.lo, current.hi.min(c)),
            Gt => (current.lo.max(c.saturating_add(1)), current.hi),
            Ge => (current.lo.max(c), current.hi),
            Eq => (current.lo.max(c), current.hi.min(c)),
            _ => continue,
        };
        if lo > hi {
            return Vec::new();
        }
        out.retain(|(n, _)| n != v);
        out.push((v.clone(), Interval::new(lo, hi)));
    }
    out
}

/// The value of `e` when it is a constant under `env`.
pub fn constant(e: &Expr, env: &dyn Env) -> Option<i64> {
    interval(e, env).constant()
}

/// The greatest common divisor (non-negative).
pub fn gcd(a: i64, b: i64) -> i64 {
    if b == 0 {
        a.abs()
    } else {
        gcd(b, a % b)
    }
}

/// Whether `e` is a multiple of `k` for every value of its variables: a constant that is;
/// sums and differences of multiples; a product whose constant factor `c` leaves the other
/// factor to be a multiple of `k / gcd(c, k)`, or one of whose factors is a multiple;
/// `a % m` with `a` and `m` multiples (`a % m = a - m · (a // m)`: swizzled columns spell
/// `c * 8 % 8`); a variable whose known divisor (`Env::multiple`: a dim's `multiple_of`)
/// is.
pub fn multiple_of(e: &Expr, k: i64, env: &dyn Env) -> bool {
    if k <= 1 {
        return true;
    }
    if let Some(c) = constant(e, env) {
        return c % k == 0;
    }
    match &e.kind {
        ExprKind::Unary(UnOp::Neg, a) => multiple_of(a, k, env),
        ExprKind::Binary(BinOp::Add | BinOp::Sub, a, b) => {
            multiple_of(a, k, env) && multiple_of(b, k, env)
        }
        ExprKind::Binary(BinOp::Mul, a, b) => {
            if let Some(c) = constant(a, env) {
                return multiple_of(b, k / gcd(c, k).max(1), env);
            }
            if let Some(c) = constant(b, env) {
                return multiple_of(a, k / gcd(c, k).max(1), env);
            }
            multiple_of(a, k, env) || multiple_of(b, k, env)
        }
        ExprKind::Binary(BinOp::FloorMod, a, m) => {
            constant(m, env).is_some_and(|c| c % k == 0) && multiple_of(a, k, env)
        }
        ExprKind::Var(n) => env.multiple(n) % k == 0,
        _ => false,
    }
}

/// Whether the rows of `buf` keep `v`-element alignment: its innermost extent is positive
/// and a multiple of `v` — a constant, or a dim declared `multiple_of` (`Env::multiple`).
pub fn rows_aligned(buf: &tlc_ir::BufferDecl, v: i64, env: &dyn Env) -> bool {
    buf.shape
        .last()
        .is_some_and(|n| interval(n, env).lo > 0 && multiple_of(n, v, env))
}

/// Whether `e` mentions any variable of `vars`.
pub fn mentions_any(e: &Expr, vars: &std::collections::HashSet<String>) -> bool {
    let mut found = false;
    for_each_subexpr(e, &mut |x| {
        if let ExprKind::Var(n) = &x.kind {
            found |= vars.contains(n);
        }
    });
    found
}

/// `e` with variable `var` replaced by `value`, literal arithmetic folded (`Expr::binary`).
pub fn substitute(e: &Expr, var: &str, value: &Expr) -> Expr {
    // Nodes by value: a binary node's rebuilt operands move, not cloned at every level.
    map_expr(e, &mut |x| match x.kind {
        ExprKind::Var(n) if n == var => {
            let mut v = value.clone();
            v.span = x.span;
            v
        }
        ExprKind::Binary(op, a, b) => tlc_ir::build::bin_at(op, *a, *b, x.span),
        kind => Expr::new(kind, x.span),
    })
}

/// For an index that steps by exactly 1 with `var` — `offset + var`, `var + offset`, `var`,
/// or any affine form with coefficient 1 — its offset (`var = 0`), free of `var`. The
/// syntactic forms give the offset as written.
pub fn unit_offset(index: &Expr, var: &str) -> Option<Expr> {
    let is_var = |e: &Expr| matches!(&e.kind, ExprKind::Var(n) if n == var);
    match &index.kind {
        _ if is_var(index) => return Some(Expr::int(0)),
        ExprKind::Binary(BinOp::Add, a, b) if is_var(b) && !mentions(a, var) => {
            return Some((**a).clone())
        }
        ExprKind::Binary(BinOp::Add, a, b) if is_var(a) && !mentions(b, var) => {
            return Some((**b).clone())
        }
        _ => {}
    }
    let at0 = substitute(index, var, &Expr::int(0));
    let at1 = substitute(index, var, &Expr::int(1));
    (constant_difference(&at1, &at0) == Some(1) && !mentions(&at0, var)).then_some(at0)
}

/// Whether `e` is never negative.
pub fn non_negative(e: &Expr, env: &dyn Env) -> bool {
    interval(e, env).lo >= 0
}

/// The conjuncts of `a and b and …`.
pub fn conjuncts(e: &Expr) -> Vec<&Expr> {
    let mut out = Vec::new();
    fn walk<'a>(e: &'a Expr, out: &mut Vec<&'a Expr>) {
        match &e.kind {
            ExprKind::Binary(BinOp::And, a, b) => {
                walk(a, out);
                walk(b, out);
            }
            _ => out.push(e),
        }
    }
    walk(e, &mut out);
    out
}

/// Whether `cond` holds for all values of its variables (`tlc_ir::interval::decide`).
pub fn provably_true(cond: &Expr, env: &dyn Env) -> bool {
    decide(cond, env) == Some(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::test_expr as parse_expr;

    fn ranges(pairs: &[(&str, i64, i64)]) -> Ranges {
        pairs
            .iter()
            .map(|&(n, lo, hi)| (n.to_string(), Interval::new(lo, hi)))
            .collect()
    }

    #[test]
    fn multiples() {
        let none = Unknown;
        assert!(multiple_of(&parse_expr("bx * 64 + 32"), 4, &none));
        assert!(!multiple_of(&parse_expr("bx * 64 + 2"), 4, &none));
        assert!(!multiple_of(&parse_expr("bx + 4"), 4, &none));
        // A constant factor leaves the rest to supply what it lacks.
        assert!(multiple_of(&parse_expr("bx * 4 * 2"), 8, &none));
        assert!(!multiple_of(&parse_expr("bx * 2 * 2"), 8, &none));
        assert!(multiple_of(&parse_expr("bx * 8 % 8"), 8, &none));
        assert!(multiple_of(&parse_expr("-(bx * 16)"), 16, &none));
        // A variable known to be a constant.
        let env = ranges(&[("i", 3, 3)]);
        assert!(multiple_of(&parse_expr("i * 4 + 4"), 16, &env));
        assert!(!multiple_of(&parse_expr("i * 4"), 8, &env));
        // A dim declared `multiple_of=8`: `K * 2` bytes are a multiple of 16, `K` itself
        // of 8 and 4 but not of 16.
        let dims = Ranges::new().with_multiple("K", 8);
        assert!(multiple_of(&parse_expr("K * 2"), 16, &dims));
        assert!(multiple_of(&parse_expr("K"), 4, &dims));
        assert!(!multiple_of(&parse_expr("K"), 16, &dims));
        assert!(!multiple_of(&parse_expr("K * 2"), 16, &Ranges::new()));
        // Kept by every copy of the map a walk extends.
        let mut inner = dims.clone();
        inner.insert("i".to_string(), Interval::new(0, 3));
        assert!(multiple_of(&parse_expr("i * 64 + K"), 8, &inner));
    }

    #[test]
    fn offsets() {
        let off = |e: &str| unit_offset(&parse_expr(e), "i").map(|e| e.to_string());
        assert_eq!(off("bx * 64 + i"), Some("bx * 64".to_string()));
        assert_eq!(off("i + bx"), Some("bx".to_string()));
        assert_eq!(off("i"), Some("0".to_string()));
        assert_eq!(off("bx * 64 + i + 8"), Some("bx * 64 + 8".to_string()));
        assert_eq!(off("i * 2"), None);
        assert_eq!(off("i + i"), None);
        assert_eq!(off("i // 2"), None);
        assert!(mentions(&parse_expr("bx + i"), "i"));
        assert!(!mentions(&parse_expr("bx + 1"), "i"));
    }

    #[test]
    fn a_branch_narrows_the_variables_it_compares() {
        let env = ranges(&[("tx", 0, 383), ("k", 0, 9)]);
        let side = |c: &str, taken: bool| {
            let mut n = narrowed(&parse_expr(c), taken, &env);
            n.sort_by(|a, b| a.0.cmp(&b.0));
            n.into_iter()
                .map(|(v, r)| format!("{v}:{}:{}", r.lo, r.hi))
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(side("tx < 256", true), "tx:0:255");
        assert_eq!(side("tx < 256", false), "tx:256:383");
        assert_eq!(side("256 <= tx", true), "tx:256:383");
        assert_eq!(side("tx == 256", true), "tx:256:256");
        assert_eq!(side("tx != 256", true), "");
        assert_eq!(
            side("tx >= 128 and tx < 256 and k > 2", true),
            "k:3:9 tx:128:255"
        );
        // Negating a conjunction tells nothing about either side of it.
        assert_eq!(side("tx >= 128 and tx < 256", false), "");
        // A side that cannot run narrows nothing; an unknown variable is left alone.
        assert_eq!(side("tx < 0", true), "");
        assert_eq!(side("q < 4", true), "");
        assert_eq!(side("tx < k", true), "");
    }

    #[test]
    fn intervals_and_truth() {
        let env = ranges(&[("i", 0, 3), ("bx", 0, 3)]);
        assert_eq!(
            interval(&parse_expr("i * 128 + bx"), &env),
            Interval::new(0, 387)
        );
        assert_eq!(
            interval(&parse_expr("(i + 2) % 3"), &env),
            Interval::new(0, 2)
        );
        assert!(provably_true(&parse_expr("(i + 2) % 3 < 3"), &env));
        assert!(provably_true(&parse_expr("i < 4 and 0 <= bx"), &env));
        assert!(!provably_true(&parse_expr("i < 3"), &env));
        assert!(!provably_true(&parse_expr("i < 3"), &Unknown));
        assert_eq!(constant(&parse_expr("i * 0 + 5"), &env), Some(5));
        assert_eq!(
            conjuncts(&parse_expr("i < 1 and bx < 2 and i > 0")).len(),
            3
        );
    }
}
