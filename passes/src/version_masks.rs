//! `version-masks` (tile level): a `T.Parallel` nest whose elements choose between values
//! by comparing their own indices with a block-uniform value — attention's key mask
//! `T.if_then_else(k * 128 + j >= seq_len, -inf, 0)`, the causal mask
//! `bx * 128 + i >= k * 128 + j`, a ragged tile's guarded load — is run in up to three
//! versions, chosen once per execution of the nest by a uniform `if`:
//!
//! ```text
//! if <the comparison holds for every element>:   nest with it replaced by True
//! elif <it holds for none>:                       nest with it replaced by False
//! else:                                           the nest as written
//! ```
//!
//! so the tiles away from an edge or a diagonal (all but one or two per row of tiles) run
//! without computing, comparing and selecting per element; FlashAttention's kernels split
//! their loops into full and boundary tiles by hand for the same reason.
//!
//! **The proof.** A comparison `a op b` (`<`, `<=`, `>`, `>=`) on int32 operands is
//! versioned when `a - b` is affine in the nest's variables with constant coefficients
//! (no product of two factors that both mention them; each one's step the same constant
//! at every value of the others — the polynomial form, `tlc_ir::affine`), its other
//! variables are defined outside the nest and block-uniform (a let bounds them only when
//! it is int32 and provably does not wrap), and it reads no buffer. int32 arithmetic is exact in the IR
//! (docs/ir.md, "Integer semantics"), so over the box of the nest's ranges `a - b` takes
//! its least value at each variable's end chosen by the sign of its coefficient, and its
//! greatest at the other end: the comparison holds for every element iff it holds at the
//! first corner, for none iff it fails at the second. Both tests are the comparison
//! itself with constants put in for the nest's variables. The versions are exact copies
//! with a value substituted that the test proved; the interpreter gives identical outputs.
//!
//! Only nests inside a block-level loop are versioned: one that runs once per block (a
//! GEMM's epilogue) spends a small part of the block's time on its comparisons, and the
//! copies would cost code size for nothing.
//!
//! `T.if_then_else` arms behind a constant condition (a bound tunable's `is_causal == 1`)
//! are dropped in the versions, so an atom in a dead arm is never versioned. A version the
//! integer facts of the kernel (constant dims, block and loop ranges) prove unreachable is
//! not written. At most [`MAX_ATOMS`] comparisons are versioned per nest (at most 3² copies),
//! one in a nest larger than [`SMALL_NEST`] expression nodes: code grows linearly.

use crate::analysis::int::{dim_ranges, enter_kernel, enter_loop, substitute, Ranges};
use crate::analysis::sync::bound_vars;
use crate::analysis::uniform::{is_uniform, private_buffers, uniform_locals};
use crate::context::PassContext;
use crate::names::{freshen, NameSet};
use crate::pass::Pass;
use std::collections::HashSet;
use tlc_ir::affine::constant_difference;
use tlc_ir::interval::{decide, interval};
use tlc_ir::verifier::{const_bool, const_int, FuncInfo};
use tlc_ir::visit::{child_bodies, for_each_subexpr, map_body_exprs, stmt_exprs};
use tlc_ir::{
    BinOp, DType, Diagnostic, Expr, ExprKind, For, ForKind, PrimFunc, Span, Stmt, StmtKind, UnOp,
};

/// The most comparisons versioned in one nest.
pub const MAX_ATOMS: usize = 2;
/// Nests of more expression nodes than this version one comparison only.
pub const SMALL_NEST: usize = 256;

pub struct VersionMasks;

impl Pass for VersionMasks {
    fn name(&self) -> &'static str {
        "version-masks"
    }

    fn description(&self) -> &'static str {
        "a T.Parallel nest selecting by an affine comparison of its indices with a uniform value -> versions where the comparison is all true / all false, chosen by a uniform if"
    }

    fn run(&self, mut func: PrimFunc, cx: &PassContext) -> Result<PrimFunc, Vec<Diagnostic>> {
        // The dtypes of the comparisons come from the verifier's facts; a function it
        // refuses (only a caller that runs passes unverified hands one over) is left as
        // it is, the safe path.
        let Ok(info) = cx.func_info(&func).map(|i| i.into_owned()) else {
            return Ok(func);
        };
        let mut names = NameSet::of(&func);
        let mut ranges = dim_ranges(&func);
        for stmt in &mut func.body {
            if let StmtKind::Kernel(k) = &mut stmt.kind {
                enter_kernel(&mut ranges, k);
                let private = private_buffers(k);
                let uniform = uniform_locals(k);
                let mut walk = Walk {
                    info: &info,
                    private: &private,
                    uniform: &uniform,
                    dependent: HashSet::new(),
                    ranges: ranges.clone(),
                    names: &mut names,
                    in_loop: false,
                };
                walk.body(&mut k.body);
            }
        }
        Ok(func)
    }
}

/// The block-level walk: what is known of the variables, and which ones may differ
/// between threads (lets of per-thread values).
struct Walk<'a> {
    info: &'a FuncInfo,
    private: &'a HashSet<String>,
    uniform: &'a HashSet<String>,
    dependent: HashSet<String>,
    ranges: Ranges,
    /// Every copy but the nest as written takes fresh names for its loop variables and lets.
    names: &'a mut NameSet,
    /// Inside a block-level loop: only nests that run again and again are versioned.
    in_loop: bool,
}

impl Walk<'_> {
    fn is_uniform(&self, e: &Expr) -> bool {
        is_uniform(e, self.private, self.uniform, &self.dependent)
    }

    fn body(&mut self, body: &mut [Stmt]) {
        for s in body.iter_mut() {
            self.stmt(s);
        }
    }

    fn stmt(&mut self, s: &mut Stmt) {
        let span = s.span;
        match &mut s.kind {
            StmtKind::For(f) if f.kind == ForKind::Parallel => {
                if !self.in_loop {
                    return;
                }
                if let Some(versions) = self.version(f, span) {
                    *s = versions;
                }
            }
            StmtKind::For(f) if matches!(f.kind, ForKind::ThreadBinding(_)) => {}
            StmtKind::For(f) => {
                if !(self.is_uniform(&f.start) && self.is_uniform(&f.stop)) {
                    return;
                }
                enter_loop(&mut self.ranges, f);
                let outer = std::mem::replace(&mut self.in_loop, true);
                self.body(&mut f.body);
                self.in_loop = outer;
            }
            StmtKind::If {
                cond,
                then_body,
                else_body,
            } if self.is_uniform(cond) => {
                self.body(then_body);
                self.body(else_body);
            }
            StmtKind::While { cond, body } if self.is_uniform(cond) => {
                let outer = std::mem::replace(&mut self.in_loop, true);
                self.body(body);
                self.in_loop = outer;
            }
            StmtKind::Let { var, dtype, value } => {
                if self.is_uniform(value) {
                    // A uniform int32 let's values bound what it bounds (`loop_range`) —
                    // when they fit int32: a conversion into a narrower let, or an int32
                    // one of a value past 2^31, wraps, and the interval would not hold.
                    let d = dtype.or_else(|| self.info.expr_dtype(value));
                    let r = interval(value, &self.ranges);
                    if d == Some(DType::Int32) && r.fits_i32() {
                        self.ranges.insert(var.name.clone(), r);
                    }
                } else {
                    self.dependent.insert(var.name.clone());
                }
            }
            _ => {}
        }
    }

    /// The versions of the nest headed by `f`, or `None` when no comparison qualifies.
    fn version(&mut self, f: &For, span: Span) -> Option<Stmt> {
        let nest = Nest::of(f)?;
        let mut atoms = Vec::new();
        let nest_stmt = Stmt::new(StmtKind::For(f.clone()), span);
        let inner = bound_vars(std::slice::from_ref(&nest_stmt));
        walk_live_exprs(std::slice::from_ref(&nest_stmt), &mut |e| {
            if atoms.len() < MAX_ATOMS
                && !atoms.iter().any(|a: &Atom| a.expr == *e)
                && self.qualifies(e, &nest, &inner)
            {
                atoms.push(Atom {
                    expr: e.clone(),
                    all_true: nest.corner(e, true),
                    all_false: nest.corner(e, false),
                });
            }
        });
        if atoms.is_empty() {
            return None;
        }
        if count_nodes(&nest_stmt) > SMALL_NEST {
            atoms.truncate(1);
        }
        Some(self.versions(fold_dead_arms(nest_stmt, self.info), &atoms, span))
    }

    /// `nest` versioned on `atoms` (those still present in it).
    fn versions(&mut self, nest: Stmt, atoms: &[Atom], span: Span) -> Stmt {
        let Some((atom, rest)) = atoms.split_first() else {
            return nest;
        };
        if !mentions_expr(&nest, &atom.expr) {
            return self.versions(nest, rest, span);
        }
        // Versions the kernel's integer facts decide are dropped or taken alone.
        let mut out = self.versions(nest.clone(), rest, span);
        for (cond, value) in [(&atom.all_false, false), (&atom.all_true, true)] {
            match decide(cond, &self.ranges) {
                Some(false) => {}
                Some(true) => out = self.with(&nest, atom, value, rest, span),
                None => {
                    let copy = self.with(&nest, atom, value, rest, span);
                    out = Stmt::new(
                        StmtKind::If {
                            cond: cond.clone(),
                            then_body: vec![copy],
                            else_body: vec![out],
                        },
                        span,
                    )
                }
            }
        }
        out
    }

    /// A copy of `nest` with `atom` replaced by `value`, versioned on `rest`, its binders
    /// renamed.
    fn with(&mut self, nest: &Stmt, atom: &Atom, value: bool, rest: &[Atom], span: Span) -> Stmt {
        let mut copy = vec![nest.clone()];
        map_body_exprs(&mut copy, &mut |x| {
            if x == atom.expr {
                Expr::new(ExprKind::Bool(value), x.span)
            } else {
                x
            }
        });
        let folded = copy.pop().map(|s| fold_dead_arms(s, self.info));
        let mut copy = vec![self.versions(folded.unwrap_or_else(|| nest.clone()), rest, span)];
        freshen(&mut copy, self.names);
        copy.pop().unwrap_or_else(|| nest.clone())
    }

    /// Whether comparison `e` may be versioned in `nest` (the module's rule).
    fn qualifies(&self, e: &Expr, nest: &Nest, inner: &HashSet<String>) -> bool {
        let ExprKind::Binary(op, a, b) = &e.kind else {
            return false;
        };
        if !matches!(op, BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge) {
            return false;
        }
        let int32 = |x: &Expr| self.info.expr_dtype(x) == Some(DType::Int32);
        if !(int32(a) && int32(b)) {
            return false;
        }
        // Integer arithmetic of literals and variables: the nest's own, and block-uniform
        // ones defined before it.
        // A product of two factors that both mention the nest's variables is refused: so
        // `a - b` is affine in them (`i * (i - 1) * (i - 2)` is not, though its steps at
        // 0, 1, 2 agree), and `Nest::linear` checks that the coefficients are constants.
        let is_own = |v: &str| nest.vars.iter().any(|(n, _, _)| n == v);
        let mentions_own = |x: &Expr| {
            let mut found = false;
            for_each_subexpr(x, &mut |y| {
                if let ExprKind::Var(v) = &y.kind {
                    found |= is_own(v);
                }
            });
            found
        };
        let (mut own, mut outer, mut plain) = (false, false, true);
        for side in [a, b] {
            for_each_subexpr(side, &mut |x| match &x.kind {
                ExprKind::Var(v) if is_own(v) => own = true,
                ExprKind::Var(v) => {
                    outer = true;
                    plain &= !inner.contains(v) && !self.dependent.contains(v);
                }
                ExprKind::Binary(BinOp::Mul, p, q) => {
                    plain &= !(mentions_own(p) && mentions_own(q))
                }
                ExprKind::Int(_)
                | ExprKind::Unary(UnOp::Neg, _)
                | ExprKind::Binary(BinOp::Add | BinOp::Sub, _, _) => {}
                _ => plain = false,
            });
        }
        own && outer && plain && nest.linear(a, b)
    }
}

/// A comparison to version on, with its two tests.
struct Atom {
    expr: Expr,
    all_true: Expr,
    all_false: Expr,
}

/// A chain of directly nested `T.Parallel` loops with constant bounds.
struct Nest {
    /// (variable, first value, last value), outermost first.
    vars: Vec<(String, i64, i64)>,
}

impl Nest {
    fn of(f: &For) -> Option<Nest> {
        let mut vars = Vec::new();
        let mut at = f;
        loop {
            let (lo, stop) = (const_int(&at.start)?, const_int(&at.stop)?);
            if stop <= lo {
                return None;
            }
            vars.push((at.var.name.clone(), lo, stop - 1));
            match at.body.as_slice() {
                [Stmt {
                    kind: StmtKind::For(g),
                    ..
                }] if g.kind == ForKind::Parallel => at = g,
                _ => return Some(Nest { vars }),
            }
        }
    }

    /// Whether `a - b` is affine in every nest variable with a constant coefficient.
    fn linear(&self, a: &Expr, b: &Expr) -> bool {
        let diff = Expr::binary(BinOp::Sub, a.clone(), b.clone(), a.span);
        self.vars.iter().all(|(v, _, _)| {
            let at = |k: i64| substitute(&diff, v, &Expr::int(k));
            let step = constant_difference(&at(1), &at(0));
            step.is_some() && step == constant_difference(&at(2), &at(1))
        })
    }

    /// The coefficient of `v` in `a - b` (known to be constant by [`Nest::linear`]).
    fn coefficient(a: &Expr, b: &Expr, v: &str) -> i64 {
        let diff = Expr::binary(BinOp::Sub, a.clone(), b.clone(), a.span);
        constant_difference(
            &substitute(&diff, v, &Expr::int(1)),
            &substitute(&diff, v, &Expr::int(0)),
        )
        .unwrap_or(0)
    }

    /// The test that comparison `e` (`a op b`) holds for every element (`all`) or for none:
    /// `e` at the corner where `a - b` is least (`>`, `>=`: every element; `<`, `<=`: none)
    /// or greatest, negated for "none".
    fn corner(&self, e: &Expr, all: bool) -> Expr {
        let ExprKind::Binary(op, a, b) = &e.kind else {
            return e.clone();
        };
        let greater = matches!(op, BinOp::Gt | BinOp::Ge);
        // Least `a - b` for "every element holds" of a `>`/`>=`, and for "none holds" of a
        // `<`/`<=`; greatest otherwise.
        let least = greater == all;
        let (mut a2, mut b2) = ((**a).clone(), (**b).clone());
        for (v, lo, hi) in &self.vars {
            let c = Nest::coefficient(a, b, v);
            let at = if (c > 0) == least { *lo } else { *hi };
            a2 = substitute(&a2, v, &Expr::int(at));
            b2 = substitute(&b2, v, &Expr::int(at));
        }
        let op = if all {
            *op
        } else {
            match op {
                BinOp::Lt => BinOp::Ge,
                BinOp::Le => BinOp::Gt,
                BinOp::Gt => BinOp::Le,
                _ => BinOp::Lt,
            }
        };
        Expr::binary(op, a2, b2, e.span)
    }
}

/// Calls `f` on every subexpression of `body` that can be evaluated: arms of
/// `T.if_then_else` and bodies of `if` behind a constant condition are skipped.
fn walk_live_exprs(body: &[Stmt], f: &mut dyn FnMut(&Expr)) {
    fn expr(e: &Expr, f: &mut dyn FnMut(&Expr)) {
        f(e);
        match &e.kind {
            ExprKind::Select(c, a, b) => match const_bool(c) {
                Some(true) => expr(a, f),
                Some(false) => expr(b, f),
                None => {
                    expr(c, f);
                    expr(a, f);
                    expr(b, f);
                }
            },
            _ => {
                for x in tlc_ir::visit::expr_children(e) {
                    expr(x, f);
                }
            }
        }
    }
    for s in body {
        for e in stmt_exprs(s) {
            expr(e, f);
        }
        match &s.kind {
            StmtKind::If {
                cond,
                then_body,
                else_body,
            } => match const_bool(cond) {
                Some(true) => walk_live_exprs(then_body, f),
                Some(false) => walk_live_exprs(else_body, f),
                None => {
                    walk_live_exprs(then_body, f);
                    walk_live_exprs(else_body, f);
                }
            },
            _ => {
                for child in child_bodies(s) {
                    walk_live_exprs(child, f);
                }
            }
        }
    }
}

/// `s` with every `T.if_then_else` of a constant condition replaced by its live arm, and
/// `and` / `or` / `not` of a constant folded where the interpreter's short-circuit
/// evaluation gives the same (`True and x` is `x`; `x and False` is `False` only when
/// evaluating `x` cannot stop the program). The live arm is converted to the select's
/// dtype (the common dtype of both arms: `T.if_then_else(True, I[i], 0.5)` is a float).
/// Names must be the function's (the dtypes come from `info`): fold before renaming.
fn fold_dead_arms(s: Stmt, info: &FuncInfo) -> Stmt {
    let mut body = vec![s];
    map_body_exprs(&mut body, &mut |x| {
        let lit = |v: bool| Expr::new(ExprKind::Bool(v), x.span);
        match &x.kind {
            ExprKind::Select(c, a, b) => {
                let live = match const_bool(c) {
                    Some(true) => a,
                    Some(false) => b,
                    None => return x,
                };
                match (info.expr_dtype(&x), info.expr_dtype(live)) {
                    (Some(want), Some(have)) if want == have => (**live).clone(),
                    // An integer literal a float32 holds exactly is that float literal.
                    (Some(DType::Float32), _)
                        if live.as_int().is_some_and(|v| v.abs() <= 1 << 24) =>
                    {
                        let v = live.as_int().unwrap_or(0);
                        Expr::new(ExprKind::Float(v as f64), x.span)
                    }
                    (Some(want), Some(_)) => Expr::new(ExprKind::Cast(want, live.clone()), x.span),
                    _ => x,
                }
            }
            ExprKind::Binary(op @ (BinOp::And | BinOp::Or), a, b) => {
                let and = *op == BinOp::And;
                match (const_bool(a), const_bool(b)) {
                    // `True and b`, `False or b`: b; `False and b`, `True or b`: a.
                    (Some(v), _) if v == and => (**b).clone(),
                    (Some(_), _) => lit(!and),
                    // `a and True`, `a or False`: a.
                    (None, Some(v)) if v == and => (**a).clone(),
                    // `a and False`, `a or True`: the literal, when evaluating `a` can
                    // never stop the program (no load, no division).
                    (None, Some(_)) if total(a) => lit(!and),
                    _ => x,
                }
            }
            ExprKind::Unary(UnOp::Not, a) => match const_bool(a) {
                Some(v) => lit(!v),
                None => x,
            },
            _ => x,
        }
    });
    body.remove(0)
}

/// Whether evaluating `e` always succeeds: no load (out of bounds), no division or modulo
/// (by zero).
fn total(e: &Expr) -> bool {
    let mut ok = true;
    for_each_subexpr(e, &mut |x| match &x.kind {
        ExprKind::Load { .. } => ok = false,
        ExprKind::Binary(op, _, _) => {
            ok &= !matches!(
                op,
                BinOp::Div | BinOp::FloorDiv | BinOp::FloorMod | BinOp::CeilDiv
            )
        }
        _ => {}
    });
    ok
}

/// Whether a statement holds the expression `target` anywhere.
fn mentions_expr(s: &Stmt, target: &Expr) -> bool {
    let mut found = false;
    walk_live_exprs(std::slice::from_ref(s), &mut |e| found |= e == target);
    found
}

/// The expression nodes of a statement and its nested statements.
fn count_nodes(s: &Stmt) -> usize {
    let mut n = 0usize;
    tlc_ir::visit::for_each_stmt(std::slice::from_ref(s), &mut |x| {
        for e in stmt_exprs(x) {
            for_each_subexpr(e, &mut |_| n += 1);
        }
    });
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmp(op: BinOp, a: Expr, b: Expr) -> Expr {
        Expr::binary(op, a, b, Span::DUMMY)
    }

    fn add(a: Expr, b: Expr) -> Expr {
        Expr::binary(BinOp::Add, a, b, Span::DUMMY)
    }

    fn mul(a: Expr, b: Expr) -> Expr {
        Expr::binary(BinOp::Mul, a, b, Span::DUMMY)
    }

    #[test]
    fn corners_of_the_key_and_causal_masks() {
        let nest = Nest {
            vars: vec![("i".into(), 0, 127), ("j".into(), 0, 63)],
        };
        // k * 64 + j >= seq_len: every element from j = 0, none up to j = 63.
        let key = cmp(
            BinOp::Ge,
            add(mul(Expr::var("k"), Expr::int(64)), Expr::var("j")),
            Expr::var("seq_len"),
        );
        assert!(nest.linear(
            match &key.kind {
                ExprKind::Binary(_, a, _) => a,
                _ => unreachable!(),
            },
            &Expr::var("seq_len")
        ));
        assert_eq!(nest.corner(&key, true).to_string(), "k * 64 >= seq_len");
        assert_eq!(
            nest.corner(&key, false).to_string(),
            "k * 64 + 63 < seq_len"
        );
        // bx * 128 + i >= k * 64 + j (causal): i least and j greatest for "every".
        let causal = cmp(
            BinOp::Ge,
            add(mul(Expr::var("bx"), Expr::int(128)), Expr::var("i")),
            add(mul(Expr::var("k"), Expr::int(64)), Expr::var("j")),
        );
        assert_eq!(
            nest.corner(&causal, true).to_string(),
            "bx * 128 >= k * 64 + 63"
        );
        assert_eq!(
            nest.corner(&causal, false).to_string(),
            "bx * 128 + 127 < k * 64"
        );
        // A `<` reverses the corners.
        let lt = cmp(BinOp::Lt, Expr::var("j"), Expr::var("n"));
        assert_eq!(nest.corner(&lt, true).to_string(), "63 < n");
        assert_eq!(nest.corner(&lt, false).to_string(), "0 >= n");
    }

    #[test]
    fn only_constant_coefficients_are_linear() {
        let nest = Nest {
            vars: vec![("i".into(), 0, 7), ("j".into(), 0, 7)],
        };
        let n = Expr::var("n");
        assert!(nest.linear(&add(mul(Expr::int(3), Expr::var("i")), Expr::var("k")), &n));
        assert!(!nest.linear(&mul(Expr::var("i"), Expr::var("k")), &n));
        assert!(!nest.linear(&mul(Expr::var("i"), Expr::var("i")), &n));
        assert!(!nest.linear(&mul(Expr::var("i"), Expr::var("j")), &n));
    }
}
