//! The simplifier's rule table: named, directional rewrites, each sound for the IR's integer
//! semantics (floor `//` and `%`), most guarded by facts from the `Bounds` analysis. There is
//! no blanket commutativity or associativity: constants move right and outward, which is
//! what lets the division rules see `x + y·c` patterns. `docs/passes.md` lists every rule.

use super::lang::{EGraph, Rewrite};
use egg::{rewrite as rw, Id, Subst, Var};

fn var(name: &str) -> Var {
    // Rule texts are written below, not read from input: a bad name is a bug of this file,
    // caught by every test that builds the rule table.
    name.parse()
        .unwrap_or_else(|_| panic!("bad pattern variable {name}"))
}

fn constant(egraph: &EGraph, subst: &Subst, v: Var) -> Option<i64> {
    subst
        .get(v)
        .and_then(|id| egraph[*id].data.and_then(|f| f.constant()))
}

fn range(egraph: &EGraph, subst: &Subst, v: Var) -> Option<tlc_ir::interval::Interval> {
    subst
        .get(v)
        .and_then(|id| egraph[*id].data.map(|f| f.range))
}

/// `?v` is a constant.
fn is_const(v: &str) -> impl Fn(&mut EGraph, Id, &Subst) -> bool {
    let v = var(v);
    move |g, _, s| constant(g, s, v).is_some()
}

/// `?v` is not a constant.
fn not_const(v: &str) -> impl Fn(&mut EGraph, Id, &Subst) -> bool {
    let v = var(v);
    move |g, _, s| constant(g, s, v).is_none()
}

/// Both are constants and `test(a, b)` holds.
fn consts(
    a: &str,
    b: &str,
    test: fn(i64, i64) -> bool,
) -> impl Fn(&mut EGraph, Id, &Subst) -> bool {
    let (a, b) = (var(a), var(b));
    move |g, _, s| match (constant(g, s, a), constant(g, s, b)) {
        (Some(x), Some(y)) => test(x, y),
        _ => false,
    }
}

/// `?c` is a constant with `test(c)`.
fn const_is(c: &str, test: fn(i64) -> bool) -> impl Fn(&mut EGraph, Id, &Subst) -> bool {
    let c = var(c);
    move |g, _, s| constant(g, s, c).is_some_and(test)
}

/// `0 ≤ ?x < ?c` for constant `?c`.
fn in_range(x: &str, c: &str) -> impl Fn(&mut EGraph, Id, &Subst) -> bool {
    let (x, c) = (var(x), var(c));
    move |g, _, s| match (range(g, s, x), constant(g, s, c)) {
        (Some(r), Some(c)) => r.lo >= 0 && r.hi < c,
        _ => false,
    }
}

/// `?a ≤ ?b` for every value (from the intervals).
fn always_le(a: &str, b: &str) -> impl Fn(&mut EGraph, Id, &Subst) -> bool {
    let (a, b) = (var(a), var(b));
    move |g, _, s| match (range(g, s, a), range(g, s, b)) {
        (Some(x), Some(y)) => x.hi <= y.lo,
        _ => false,
    }
}

/// `b ≠ 0` and `b` divides `a`.
fn divides(b: i64, a: i64) -> bool {
    b != 0 && a % b == 0
}

/// The rule table.
#[rustfmt::skip]
pub fn rules() -> Vec<Rewrite> {
    vec![
        // Identities.
        rw!("add-zero";  "(+ ?a 0)" => "?a"),
        rw!("sub-zero";  "(- ?a 0)" => "?a"),
        rw!("sub-self";  "(- ?a ?a)" => "0"),
        rw!("mul-one";   "(* ?a 1)" => "?a"),
        rw!("mul-zero";  "(* ?a 0)" => "0"),
        rw!("div-one";   "(// ?a 1)" => "?a"),
        rw!("ceildiv-one"; "(ceildiv ?a 1)" => "?a"),
        rw!("mod-one";   "(% ?a 1)" => "0"),
        rw!("neg-neg";   "(neg (neg ?a))" => "?a"),
        rw!("min-self";  "(min ?a ?a)" => "?a"),
        rw!("max-self";  "(max ?a ?a)" => "?a"),
        // Canonical places for constants: right of + and *, and outermost in a sum.
        rw!("add-const-right"; "(+ ?c ?a)" => "(+ ?a ?c)" if is_const("?c") if not_const("?a")),
        rw!("mul-const-right"; "(* ?c ?a)" => "(* ?a ?c)" if is_const("?c") if not_const("?a")),
        rw!("sub-const";       "(- ?a ?c)" => "(+ ?a (neg ?c))" if is_const("?c")),
        rw!("add-const-out";   "(+ (+ ?a ?c) ?b)" => "(+ (+ ?a ?b) ?c)" if is_const("?c") if not_const("?b")),
        rw!("sub-const-out";   "(- (+ ?a ?c) ?b)" => "(+ (- ?a ?b) ?c)" if is_const("?c") if not_const("?b")),
        rw!("add-add-const";   "(+ (+ ?a ?c1) ?c2)" => "(+ ?a (+ ?c1 ?c2))" if is_const("?c1") if is_const("?c2")),
        rw!("mul-mul-const";   "(* (* ?a ?c1) ?c2)" => "(* ?a (* ?c1 ?c2))" if is_const("?c1") if is_const("?c2")),
        // Cancellation and like terms.
        rw!("add-sub-cancel";   "(- (+ ?a ?b) ?b)" => "?a"),
        rw!("add-sub-cancel-l"; "(- (+ ?a ?b) ?a)" => "?b"),
        rw!("sub-add-cancel";   "(+ (- ?a ?b) ?b)" => "?a"),
        rw!("add-self";         "(+ ?a ?a)" => "(* ?a 2)"),
        rw!("add-like-terms";   "(+ (* ?a ?c1) (* ?a ?c2))" => "(* ?a (+ ?c1 ?c2))" if is_const("?c1") if is_const("?c2")),
        rw!("add-like-term";    "(+ (* ?a ?c) ?a)" => "(* ?a (+ ?c 1))" if is_const("?c")),
        rw!("sub-like-terms";   "(- (* ?a ?c1) (* ?a ?c2))" => "(* ?a (- ?c1 ?c2))" if is_const("?c1") if is_const("?c2")),
        rw!("mul-distribute";   "(* (+ ?a ?b) ?c)" => "(+ (* ?a ?c) (* ?b ?c))" if is_const("?c")),
        rw!("mul-distribute-sub"; "(* (- ?a ?b) ?c)" => "(- (* ?a ?c) (* ?b ?c))" if is_const("?c")),
        // Floor division and modulo by constants (c ≠ 0; exact for floor semantics).
        rw!("div-mul-exact";  "(// (* ?a ?c1) ?c2)" => "(* ?a (// ?c1 ?c2))" if consts("?c2", "?c1", divides)),
        rw!("div-mul-reduce"; "(// (* ?a ?c1) ?c2)" => "(// ?a (// ?c2 ?c1))" if consts("?c1", "?c2", |a, b| a > 0 && b > 0 && b % a == 0)),
        rw!("mod-mul-zero";   "(% (* ?a ?c1) ?c2)" => "0" if consts("?c2", "?c1", divides)),
        rw!("mod-mul-reduce"; "(% (* ?a ?c1) ?c2)" => "(* (% ?a (// ?c2 ?c1)) ?c1)" if consts("?c1", "?c2", |a, b| a > 0 && b > 0 && b % a == 0)),
        rw!("div-add-multiple";   "(// (+ ?a (* ?b ?c1)) ?c2)" => "(+ (// ?a ?c2) (* ?b (// ?c1 ?c2)))" if consts("?c2", "?c1", divides)),
        rw!("div-add-multiple-l"; "(// (+ (* ?b ?c1) ?a) ?c2)" => "(+ (* ?b (// ?c1 ?c2)) (// ?a ?c2))" if consts("?c2", "?c1", divides)),
        rw!("div-add-const";      "(// (+ ?a ?c1) ?c2)" => "(+ (// ?a ?c2) (// ?c1 ?c2))" if consts("?c2", "?c1", divides)),
        rw!("mod-add-multiple";   "(% (+ ?a (* ?b ?c1)) ?c2)" => "(% ?a ?c2)" if consts("?c2", "?c1", divides)),
        rw!("mod-add-multiple-l"; "(% (+ (* ?b ?c1) ?a) ?c2)" => "(% ?a ?c2)" if consts("?c2", "?c1", divides)),
        rw!("mod-add-const";      "(% (+ ?a ?c1) ?c2)" => "(% ?a ?c2)" if consts("?c2", "?c1", divides)),
        rw!("mod-in-range";       "(% ?a ?c)" => "?a" if in_range("?a", "?c")),
        rw!("div-div";  "(// (// ?a ?c1) ?c2)" => "(// ?a (* ?c1 ?c2))" if consts("?c1", "?c2", |a, b| a > 0 && b > 0)),
        rw!("mod-mod";  "(% (% ?a ?c1) ?c2)" => "(% ?a ?c2)" if consts("?c2", "?c1", |b, a| b > 0 && a > 0 && a % b == 0)),
        rw!("div-mod-recombine"; "(+ (* (// ?a ?c) ?c) (% ?a ?c))" => "?a" if const_is("?c", |c| c != 0)),
        rw!("mod-div-recombine"; "(+ (% ?a ?c) (* (// ?a ?c) ?c))" => "?a" if const_is("?c", |c| c != 0)),
        rw!("ceildiv-exact";     "(ceildiv (* ?a ?c1) ?c2)" => "(* ?a (// ?c1 ?c2))" if consts("?c2", "?c1", |b, a| b > 0 && a % b == 0)),
        // min / max decided by the intervals.
        rw!("min-left";  "(min ?a ?b)" => "?a" if always_le("?a", "?b")),
        rw!("min-right"; "(min ?a ?b)" => "?b" if always_le("?b", "?a")),
        rw!("max-left";  "(max ?a ?b)" => "?a" if always_le("?b", "?a")),
        rw!("max-right"; "(max ?a ?b)" => "?b" if always_le("?a", "?b")),
    ]
}
