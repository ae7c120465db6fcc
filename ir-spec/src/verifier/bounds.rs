//! The bounds rule (B2 in `docs/ir.md`): an element access — `B[i, j]` read or written —
//! that is provably outside its buffer is an error at the index. The first two rules below
//! apply only to accesses that run on every run of their kernel (no undecided `if`,
//! `T.if_then_else` arm or right operand of `and` / `or` around them: `if row < M:` may
//! never hold), the third to accesses under such conditions where they provably hold; each
//! is true of every run, so none refuses a kernel that could run correctly:
//!
//! - **always outside**: inside loops that all provably iterate, the index's interval
//!   (under the ranges of the loop, block and thread variables, the symbolic dims and the
//!   integer lets around it) lies entirely below 0 or at or past the largest extent the
//!   dimension can have. `B[ko * 32 + 2147483648, j]`.
//! - **reaches outside**: the extent is a constant (or the index goes below 0), and the
//!   extremes of the index are values it really takes: it is affine in block and loop
//!   variables whose range ends its coefficients pick are constants (`ko` of
//!   `T.Pipelined(T.ceildiv(K, 32))` is 0 on every run), or the variables it depends on —
//!   through integer lets and the bounds of inner loops (`for c in T.unroll(r)`) — have at
//!   most 2^16 combinations, each evaluated (a loop variable the index is linear in, and
//!   that no condition or other bound names, at its range's two ends only: `acc[c]` under
//!   `for r in T.unroll(1, 1000): for c in T.serial(r)`; a thread index only so). Then an
//!   extreme outside the dimension is an out-of-bounds access some block makes on every run.
//!
//! - **reaches outside under its conditions**: an access under an `if` (or a `while`, a
//!   `T.if_then_else` arm, the right operand of `and` / `or`) the ranges do not decide
//!   runs exactly where its conditions hold. When the conditions and the index depend only
//!   on variables the enumeration covers, every combination is evaluated, conditions
//!   first: a combination where they all hold and the index is outside is an access that
//!   runs on every run (`if k % 2 == 0: B[k * 40]` under `T.unroll(4)` is `B[80]` at
//!   `k = 2`). A condition that cannot be evaluated (it reads memory, it depends on a
//!   thread) proves nothing.
//!
//! Code that never runs (an `if` the ranges decide, a loop with no iteration) is skipped:
//! passes that unroll and fold leave such code behind, and it accesses nothing.
//!
//! Why in the verifier, at every level: a pass that substitutes a loop's values (`unroll`,
//! the pipeline's prologue) turns such an index into a constant, and `simplify` folds the
//! conditions it can decide (a buffer view's mask, an unrolled `k % 2 == 0`). Checking the same rule on
//! the source makes it the user's located error at `tlc check`, never a pass "producing
//! invalid IR" later; after every pass it checks that no pass introduced such an access.
//! (Thread indices are enumerated only at their two ends, where the index is linear in
//! them: every lowered access has one, and enumerating them value by value at every pass's
//! verification cost the seed kernel's compile 0.9 s.)

use super::consts::{eval_bool, eval_int};
use crate::diagnostic::Diagnostic;
use crate::interval::{decide, interval, Interval, Ranges};
use crate::ir::{BinOp, BufferDecl, Expr, ExprKind, ForKind, PrimFunc, Stmt, StmtKind};
use crate::span::Span;
use crate::visit::{expr_children, mentions, stmt_exprs};
use std::collections::HashMap;

/// Variable combinations the "reaches outside" rule evaluates one by one at most, for an
/// index that is not affine (`(i * i) % 7`).
const MAX_COMBINATIONS: i128 = 1 << 16;

/// Every access of `func` that is provably out of bounds, in program order.
pub(super) fn check(func: &PrimFunc) -> Vec<Diagnostic> {
    let mut w = Walk {
        buffers: func
            .params
            .iter()
            .map(|p| (p.name.name.as_str(), p))
            .collect(),
        ranges: func
            .dims
            .iter()
            .map(|d| (d.name.clone(), Interval::new(1, d.max())))
            .collect(),
        scope: Vec::new(),
        conds: Vec::new(),
        diags: Vec::new(),
    };
    w.body(&func.body, true);
    w.diags
}

struct Walk<'f> {
    buffers: HashMap<&'f str, &'f BufferDecl>,
    /// What is known of every integer variable in scope.
    ranges: Ranges,
    /// The block and loop variables and lets around the point of the walk, outermost
    /// first: what the "reaches outside" rule evaluates.
    scope: Vec<Binding<'f>>,
    /// The conditions around the point of the walk that the ranges do not decide, with
    /// the truth value under which it is reached: the accesses here run exactly where
    /// they all hold.
    conds: Vec<Cond<'f>>,
    diags: Vec<Diagnostic>,
}

/// A condition the code at the point of the walk is under.
#[derive(Clone, Copy)]
struct Cond<'f> {
    expr: &'f Expr,
    /// The value it has where the code runs (`false` in an `else` body).
    holds: bool,
}

/// A variable in scope and how it gets its values.
struct Binding<'f> {
    var: &'f str,
    def: Def<'f>,
}

enum Def<'f> {
    /// A block variable: every value in `0..grid`.
    Block {
        grid: Interval,
    },
    /// A loop variable: every value in `start..stop`. `iterates`: the range is provably
    /// never empty.
    Loop {
        start: &'f Expr,
        stop: &'f Expr,
        iterates: bool,
        /// A `threadIdx.*` binding loop: one value per thread, never enumerated.
        thread: bool,
    },
    Let {
        value: &'f Expr,
    },
}

impl<'f> Walk<'f> {
    /// `reached`: the statements run on every run of the kernel, for every value of the
    /// variables in scope.
    fn body(&mut self, body: &'f [Stmt], reached: bool) {
        let depth = self.scope.len();
        for s in body {
            self.stmt(s, reached);
        }
        self.scope.truncate(depth);
    }

    fn stmt(&mut self, s: &'f Stmt, reached: bool) {
        match &s.kind {
            StmtKind::Kernel(k) => {
                for e in stmt_exprs(s) {
                    self.expr(e, reached);
                }
                let depth = self.scope.len();
                for (v, g) in k.block_vars.iter().zip(&k.grid) {
                    let grid = interval(g, &self.ranges);
                    self.ranges.insert(
                        v.name.clone(),
                        Interval::new(0, grid.hi.saturating_sub(1).max(0)),
                    );
                    self.scope.push(Binding {
                        var: &v.name,
                        def: Def::Block { grid },
                    });
                }
                self.buffers
                    .extend(k.allocs.iter().map(|a| (a.name.name.as_str(), a)));
                self.body(&k.body, reached);
                self.scope.truncate(depth);
            }
            StmtKind::For(f) => {
                self.expr(&f.start, reached);
                self.expr(&f.stop, reached);
                let (start, stop) = (
                    interval(&f.start, &self.ranges),
                    interval(&f.stop, &self.ranges),
                );
                if known(stop.hi) && known(start.lo) && stop.hi <= start.lo {
                    return; // no iteration
                }
                let hi = stop.hi.saturating_sub(1).max(start.lo);
                self.ranges
                    .insert(f.var.name.clone(), Interval::new(start.lo, hi));
                let iterates = known(stop.lo) && known(start.hi) && stop.lo > start.hi;
                let depth = self.scope.len();
                self.scope.push(Binding {
                    var: &f.var.name,
                    def: Def::Loop {
                        start: &f.start,
                        stop: &f.stop,
                        iterates,
                        thread: matches!(f.kind, ForKind::ThreadBinding(_)),
                    },
                });
                // A loop that may not iterate leaves its body reached only through the
                // enumeration, which runs the loop's real range.
                let enumerable = self.enumerable(&f.start) && self.enumerable(&f.stop);
                self.body(&f.body, reached && (iterates || enumerable));
                self.scope.truncate(depth);
            }
            StmtKind::If {
                cond,
                then_body,
                else_body,
            } => {
                self.expr(cond, reached);
                match decide(cond, &self.ranges) {
                    Some(true) => self.body(then_body, reached),
                    Some(false) => self.body(else_body, reached),
                    None => {
                        self.under(cond, true, |w| w.body(then_body, reached));
                        self.under(cond, false, |w| w.body(else_body, reached));
                    }
                }
            }
            // The body runs (at least once) where the condition holds when the loop is
            // reached; scalar values do not change between iterations, so what the first
            // iteration evaluates, every iteration does (loads aside, which prove nothing).
            StmtKind::While { cond, body } => {
                self.expr(cond, reached);
                match decide(cond, &self.ranges) {
                    Some(true) => self.body(body, reached),
                    Some(false) => {}
                    None => self.under(cond, true, |w| w.body(body, reached)),
                }
            }
            StmtKind::Let { var, dtype, value } => {
                self.expr(value, reached);
                // A float let holds its value rounded: neither its interval nor evaluating
                // its value as an integer says what it is.
                if dtype.is_none_or(|d| d.is_int()) {
                    let r = interval(value, &self.ranges);
                    self.ranges.insert(var.name.clone(), r);
                    self.scope.push(Binding {
                        var: &var.name,
                        def: Def::Let { value },
                    });
                }
            }
            StmtKind::Store {
                buffer,
                indices,
                value,
            } => {
                for e in indices {
                    self.expr(e, reached);
                }
                self.expr(value, reached);
                let at = if buffer.span.is_dummy() {
                    s.span
                } else {
                    buffer.span
                };
                self.access(&buffer.name, indices, at, reached);
            }
            _ => {
                for e in stmt_exprs(s) {
                    self.expr(e, reached);
                }
            }
        }
    }

    /// Whether every variable of `e` is bound in scope (so enumeration can evaluate it).
    fn enumerable(&self, e: &Expr) -> bool {
        let mut vars = Vec::new();
        collect_vars(e, &mut vars);
        vars.iter().all(|v| self.scope.iter().any(|b| b.var == v))
    }

    /// Walks `f` under `cond` having the value `holds`.
    fn under(&mut self, cond: &'f Expr, holds: bool, f: impl FnOnce(&mut Self)) {
        self.conds.push(Cond { expr: cond, holds });
        f(self);
        self.conds.pop();
    }

    /// The loads inside `e`.
    fn expr(&mut self, e: &'f Expr, reached: bool) {
        match &e.kind {
            ExprKind::Load { buffer, indices } => {
                for i in indices {
                    self.expr(i, reached);
                }
                self.access(buffer, indices, e.span, reached);
            }
            // Only the arm the condition picks is evaluated.
            ExprKind::Select(c, a, b) => {
                self.expr(c, reached);
                match decide(c, &self.ranges) {
                    Some(true) => self.expr(a, reached),
                    Some(false) => self.expr(b, reached),
                    None => {
                        self.under(c, true, |w| w.expr(a, reached));
                        self.under(c, false, |w| w.expr(b, reached));
                    }
                }
            }
            // The right operand of `and` (`or`) is evaluated where the left one is true
            // (false).
            ExprKind::Binary(op @ (BinOp::And | BinOp::Or), a, b) => {
                self.expr(a, reached);
                self.under(a, *op == BinOp::And, |w| w.expr(b, reached));
            }
            _ => {
                for c in expr_children(e) {
                    self.expr(c, reached);
                }
            }
        }
    }

    fn access(&mut self, buffer: &str, indices: &'f [Expr], span: Span, reached: bool) {
        let Some(decl) = self.buffers.get(buffer).copied() else {
            return; // reported by the name rules
        };
        for (axis, (index, dim)) in indices.iter().zip(&decl.shape).enumerate() {
            let at = if index.span.is_dummy() {
                span
            } else {
                index.span
            };
            if let Some(d) = self.outside(index, dim, reached) {
                let extent = match eval_int(dim, &|_| None).filter(|&d| d > 0) {
                    Some(d) => format!(" (extent {d})"),
                    None => String::new(),
                };
                let name = &decl.name.name;
                let message = match eval_int(index, &|_| None) {
                    Some(i) => format!(
                        "index {i} is out of bounds for dimension {axis} of `{name}`{extent}"
                    ),
                    None => format!(
                        "index `{index}` is out of bounds for dimension {axis} of `{name}`{extent}: {}",
                        d.why
                    ),
                };
                let mut diag = Diagnostic::error(at, message);
                if let Some(note) = d.note {
                    diag = diag.with_note(note);
                }
                self.diags.push(diag);
            }
        }
    }

    /// Why `index` is provably outside `0..dim`, if it is.
    fn outside(&self, index: &Expr, dim: &Expr, reached: bool) -> Option<Outside> {
        // An access under a condition may never run (`if row < M:` with M = 1): even one
        // that is outside whenever it runs is then no error. Passes split accesses into
        // guarded copies (a T.Parallel's per-thread iterations), so flagging those would
        // also make a pass "produce" an error the source did not have.
        if !reached {
            return None;
        }
        let conditional = !self.conds.is_empty();
        let i = interval(index, &self.ranges);
        // A dimension ≤ 0 is reported at the declaration; only negative indices here.
        let extent = eval_int(dim, &|_| None);
        let largest = match extent {
            Some(d) if d <= 0 => None,
            Some(d) => Some(d),
            None => Some(interval(dim, &self.ranges).hi).filter(|&h| known(h)),
        };
        // Inside a loop that may not iterate, or under conditions, only the enumeration
        // (which runs loops over their real ranges, and evaluates the conditions) proves
        // anything.
        if self.all_iterate() && !conditional {
            if known(i.hi) && i.hi < 0 {
                return Some(Outside::always(format!("its largest value is {}", i.hi)));
            }
            if let Some(l) = largest {
                if known(i.lo) && i.lo >= l {
                    return Some(Outside::always(format!("its smallest value is {}", i.lo)));
                }
            }
        }
        // Below 0 needs no extent; past the end, a constant one.
        let below = || {
            (i.lo < 0)
                .then(|| self.extreme(index, false))
                .flatten()
                .filter(|(v, _)| *v < 0)
        };
        let past = || {
            let d = extent.filter(|&d| d > 0 && i.hi >= d)?;
            self.extreme(index, true).filter(|(v, _)| *v >= d)
        };
        let (value, at) = below().or_else(past)?;
        let when = at
            .iter()
            .map(|(v, x)| format!("{v} = {x}"))
            .collect::<Vec<_>>()
            .join(", ");
        let why = if when.is_empty() {
            format!("it is {value}")
        } else {
            format!("it is {value} when {when}")
        };
        let note = if conditional {
            "the conditions around this access hold for these values, which these variables \
             take on every run of the kernel: the access runs with them"
        } else {
            "this access runs on every run of the kernel, for every value of these \
             variables; guard it with an `if` if only some of them are in bounds"
        };
        Some(Outside {
            why,
            note: Some(note.into()),
        })
    }

    /// Whether every enclosing loop provably iterates (so what the ranges allow happens).
    fn all_iterate(&self) -> bool {
        self.scope.iter().all(|b| match b.def {
            Def::Loop { iterates, .. } => iterates,
            _ => true,
        })
    }

    /// The largest (`high`) or smallest value `index` really takes where it is, with the
    /// variable values that give it — when that is known exactly (see the module summary).
    fn extreme(&self, index: &Expr, high: bool) -> Option<Extreme> {
        self.corner(index, high)
            .or_else(|| self.enumerate(index, high))
    }

    /// The affine case: `c0 + Σ cᵢ·vᵢ` over block and loop variables, inside loops that all
    /// iterate, takes its extreme at the end of each `vᵢ`'s range that its coefficient picks
    /// — exactly, when that end is a constant (`ko` in `T.Pipelined(T.ceildiv(K, 32))`
    /// starts at 0 on every run, although its last value depends on K).
    fn corner(&self, index: &Expr, high: bool) -> Option<Extreme> {
        // Conditions may exclude the corner: only the enumeration evaluates them.
        if !self.all_iterate() || !self.conds.is_empty() {
            return None;
        }
        let form = affine(index, &self.ranges)?;
        let mut value = i128::from(form.constant);
        let mut at = Vec::new();
        for (v, c) in &form.terms {
            let b = self.scope.iter().rev().find(|b| b.var == v)?;
            let (lo, hi) = match &b.def {
                Def::Block { grid } => (
                    Some(0),
                    (grid.lo == grid.hi && known(grid.lo)).then(|| grid.lo - 1),
                ),
                Def::Loop { start, stop, .. } => (
                    eval_int(start, &|_| None),
                    eval_int(stop, &|_| None).map(|s| s - 1),
                ),
                Def::Let { .. } => return None,
            };
            let x = if (*c > 0) == high { hi? } else { lo? };
            value += i128::from(*c) * i128::from(x);
            at.push((v.clone(), x));
        }
        Some((i64::try_from(value).ok()?, at))
    }

    /// Any other index: every combination of the variables it depends on (through lets and
    /// loop bounds, and every enclosing loop that may not iterate) is evaluated, in scope
    /// order, at most [`MAX_COMBINATIONS`].
    fn enumerate(&self, index: &Expr, high: bool) -> Option<Extreme> {
        // The bindings that matter, closed under what their definitions mention. Work by
        // position: a definition's names are looked up among the bindings before it (a
        // name defined twice — an N2 error — must not send this round in circles).
        let mut needed = vec![false; self.scope.len()];
        let mut todo: Vec<usize> = Vec::new();
        let mut names = Vec::new();
        collect_vars(index, &mut names);
        for c in &self.conds {
            collect_vars(c.expr, &mut names);
        }
        for v in &names {
            todo.push(self.scope.iter().rposition(|b| b.var == v)?);
        }
        for (k, b) in self.scope.iter().enumerate() {
            if let Def::Loop {
                iterates: false, ..
            } = b.def
            {
                todo.push(k);
            }
        }
        while let Some(k) = todo.pop() {
            if needed[k] {
                continue;
            }
            needed[k] = true;
            let mut deps = Vec::new();
            match &self.scope[k].def {
                Def::Block { .. } => {}
                Def::Loop { start, stop, .. } => {
                    collect_vars(start, &mut deps);
                    collect_vars(stop, &mut deps);
                }
                Def::Let { value } => collect_vars(value, &mut deps),
            }
            for d in deps {
                todo.push(self.scope[..k].iter().rposition(|b| b.var == d)?);
            }
        }
        let order: Vec<&Binding> = self
            .scope
            .iter()
            .zip(&needed)
            .filter_map(|(b, n)| n.then_some(b))
            .collect();
        // A loop variable the index is linear in, which no condition and no other binding's
        // definition names, needs only its range's two ends: with the others fixed its range
        // is a fixed interval and the index `a · v + b` on it peaks at an end, so over all
        // such variables at once (a multilinear index over a box) at a corner. `acc[c]`
        // under `for r in T.unroll(1, 1000): for c in T.serial(r)` is 999 · 2 values, not
        // ~500 000.
        let named_by_others = |b: &Binding| {
            order.iter().any(|o| {
                !std::ptr::eq(*o, b)
                    && match &o.def {
                        Def::Block { .. } => false,
                        Def::Loop { start, stop, .. } => {
                            mentions(start, b.var) || mentions(stop, b.var)
                        }
                        Def::Let { value } => mentions(value, b.var),
                    }
            })
        };
        let ends_only: Vec<&str> = order
            .iter()
            .filter(|b| {
                matches!(b.def, Def::Loop { .. })
                    && linear_in(index, b.var)
                    && !self.conds.iter().any(|c| mentions(c.expr, b.var))
                    && !named_by_others(b)
            })
            .map(|b| b.var)
            .collect();
        // Thread indices appear in every lowered access and make the enumeration cost
        // what a whole block does, at every pass's verification: enumerated only at their
        // two ends (as above: `C[row, k * 64 * tx]`), never value by value.
        let threaded = order.iter().any(|b| {
            matches!(b.def, Def::Loop { thread: true, .. }) && !ends_only.contains(&b.var)
        });
        if threaded {
            return None;
        }
        let mut e = Enumeration {
            index,
            conds: &self.conds,
            high,
            ends_only: &ends_only,
            values: Vec::new(),
            best: None,
            budget: MAX_COMBINATIONS,
        };
        e.run(&order)?;
        let (value, values) = e.best?;
        let at = order
            .iter()
            .zip(values)
            .filter(|(b, _)| !matches!(b.def, Def::Let { .. }))
            .map(|(b, x)| (b.var.to_string(), x))
            .collect();
        Some((value, at))
    }
}

/// A walk over every combination of some bindings' values.
struct Enumeration<'a> {
    index: &'a Expr,
    /// Only the combinations where these hold run the access.
    conds: &'a [Cond<'a>],
    high: bool,
    /// The loop variables only the ends of whose ranges can give an extreme (see
    /// `enumerate`).
    ends_only: &'a [&'a str],
    /// The values of the bindings entered so far.
    values: Vec<(&'a str, i64)>,
    /// The extreme so far and the values that gave it.
    best: Option<(i64, Vec<i64>)>,
    budget: i128,
}

impl<'a> Enumeration<'a> {
    /// `None` when some value cannot be computed or the budget runs out.
    fn run(&mut self, rest: &[&'a Binding<'a>]) -> Option<()> {
        let eval = |values: &[(&str, i64)], e: &Expr| {
            eval_int(e, &|name| {
                values
                    .iter()
                    .rev()
                    .find(|(v, _)| *v == name)
                    .map(|(_, x)| *x)
            })
        };
        // Every value entered counts, so empty inner ranges cannot make it run long.
        self.budget -= 1;
        if self.budget < 0 {
            return None;
        }
        let Some((b, rest)) = rest.split_first() else {
            // Where a condition is false the access does not run; where one cannot be
            // evaluated, whether it runs is unknown: neither combination proves anything.
            let runs = self.conds.iter().all(|c| {
                let value = |name: &str| {
                    self.values
                        .iter()
                        .rev()
                        .find(|(v, _)| *v == name)
                        .map(|(_, x)| *x)
                };
                eval_bool(c.expr, &value) == Some(c.holds)
            });
            if !runs {
                return Some(());
            }
            let v = eval(&self.values, self.index)?;
            let better = match &self.best {
                None => true,
                Some((best, _)) => (v > *best) == self.high && v != *best,
            };
            if better {
                self.best = Some((v, self.values.iter().map(|(_, x)| *x).collect()));
            }
            return Some(());
        };
        let (lo, hi) = match &b.def {
            Def::Block { grid } if grid.lo == grid.hi && known(grid.lo) => (0, grid.lo - 1),
            Def::Block { .. } => return None,
            Def::Loop { start, stop, .. } => {
                (eval(&self.values, start)?, eval(&self.values, stop)? - 1)
            }
            Def::Let { value } => {
                let x = eval(&self.values, value)?;
                (x, x)
            }
        };
        let ends = self.ends_only.contains(&b.var) && hi > lo;
        let values: Box<dyn Iterator<Item = i64>> = if ends {
            Box::new([lo, hi].into_iter())
        } else {
            Box::new(lo..=hi)
        };
        for x in values {
            self.values.push((b.var, x));
            let done = self.run(rest);
            self.values.pop();
            done?;
        }
        Some(())
    }
}

/// One extreme of an index: its value and the variable values that give it.
type Extreme = (i64, Vec<(String, i64)>);

struct Outside {
    why: String,
    note: Option<String>,
}

impl Outside {
    fn always(why: String) -> Outside {
        Outside { why, note: None }
    }
}

/// Whether an interval end is a number (not ±∞).
fn known(v: i64) -> bool {
    v != i64::MIN && v != i64::MAX
}

fn collect_vars(e: &Expr, out: &mut Vec<String>) {
    if let ExprKind::Var(v) = &e.kind {
        if !out.contains(v) {
            out.push(v.clone());
        }
    }
    for c in expr_children(e) {
        collect_vars(c, out);
    }
}

/// Whether `e` is `a · var + b` with `a` and `b` free of `var`, whatever the other
/// variables are: over a range of `var` its extremes are then at the range's ends.
fn linear_in(e: &Expr, var: &str) -> bool {
    if !mentions(e, var) {
        return true;
    }
    match &e.kind {
        ExprKind::Var(v) => v == var,
        ExprKind::Unary(crate::ir::UnOp::Neg, a) => linear_in(a, var),
        ExprKind::Binary(BinOp::Add | BinOp::Sub, a, b) => linear_in(a, var) && linear_in(b, var),
        ExprKind::Binary(BinOp::Mul, a, b) => {
            (!mentions(a, var) && linear_in(b, var)) || (!mentions(b, var) && linear_in(a, var))
        }
        // Widening keeps the value.
        ExprKind::Cast(crate::dtype::DType::Int64, a) => linear_in(a, var),
        _ => false,
    }
}

/// `constant + Σ coefficient · variable`.
struct Affine {
    constant: i64,
    terms: Vec<(String, i64)>,
}

/// The affine form of `e` over its variables, if it has one.
fn affine(e: &Expr, env: &Ranges) -> Option<Affine> {
    fn add(into: &mut Affine, from: Affine, k: i64) -> Option<()> {
        into.constant = into.constant.checked_add(from.constant.checked_mul(k)?)?;
        for (v, c) in from.terms {
            let c = c.checked_mul(k)?;
            match into.terms.iter_mut().find(|(w, _)| *w == v) {
                Some((_, slot)) => *slot = slot.checked_add(c)?,
                None => into.terms.push((v, c)),
            }
        }
        into.terms.retain(|(_, c)| *c != 0);
        Some(())
    }
    let mut out = Affine {
        constant: 0,
        terms: Vec::new(),
    };
    match &e.kind {
        ExprKind::Int(v) => out.constant = *v,
        ExprKind::Var(v) => out.terms.push((v.clone(), 1)),
        ExprKind::Unary(crate::ir::UnOp::Neg, a) => add(&mut out, affine(a, env)?, -1)?,
        ExprKind::Binary(BinOp::Add, a, b) => {
            add(&mut out, affine(a, env)?, 1)?;
            add(&mut out, affine(b, env)?, 1)?;
        }
        ExprKind::Binary(BinOp::Sub, a, b) => {
            add(&mut out, affine(a, env)?, 1)?;
            add(&mut out, affine(b, env)?, -1)?;
        }
        ExprKind::Binary(BinOp::Mul, a, b) => {
            match (eval_int(a, &|_| None), eval_int(b, &|_| None)) {
                (Some(k), _) => add(&mut out, affine(b, env)?, k)?,
                (_, Some(k)) => add(&mut out, affine(a, env)?, k)?,
                _ => return None,
            }
        }
        // What the simplifier folds by the ranges is seen through here too, so that a
        // later pass's simplified index is never more exact than the source's:
        // `x // 1` is x, and `x % c` is x when 0 ≤ x < c.
        ExprKind::Binary(BinOp::FloorDiv, a, b) if eval_int(b, &|_| None) == Some(1) => {
            return affine(a, env)
        }
        ExprKind::Binary(BinOp::FloorMod, a, b) => {
            let c = eval_int(b, &|_| None)?;
            let r = interval(a, env);
            if r.lo >= 0 && r.hi < c {
                return affine(a, env);
            }
            return None;
        }
        // Widening keeps the value.
        ExprKind::Cast(crate::dtype::DType::Int64, a) => return affine(a, env),
        _ => return None,
    }
    Some(out)
}
