//! `legalize-safe-memory`: TileLang's `LegalizeSafeMemoryAccess` — part of what the
//! language means, so the front end runs it for every command (the interpreter included),
//! before the verifier; the pipeline then starts from its output. Inside a block-level loop
//! (`T.Parallel`, `T.serial`, `T.unroll`, `T.Pipelined`; not inside a thread binding: code
//! written per thread, and everything the pipeline lowers, is taken as written, so compiled
//! IR fed back to the front end is unchanged), an element access of a global tensor (a parameter or a `T.alloc_global`
//! scratch tensor) whose indices are not provably inside the tensor is guarded: a load
//! outside reads 0 (`T.if_then_else(in_bounds, A[i], 0)`), a store or an element
//! `T.atomic_add` outside is dropped (`if in_bounds:`). This is how TileLang kernels written
//! for whole tiles (`C[by * 64 + i, bx * 64 + j] = ...` in a `T.Parallel`) stay correct at
//! ragged sizes; without it the GPU would write past the tensor.
//!
//! An index needs no guard where it is proved in bounds: by intervals (the dims' ranges,
//! block, thread and loop variables, integer lets), or by the conditions the access runs
//! under — an enclosing `if`'s conjuncts (negated for the `else` side of one comparison), a
//! `T.if_then_else`'s, the left side of an `and`, a loop's own bounds — when one of them is
//! `y < m` (or `<=`, `>`, `>=`) with `x - y` and `n - m` constants that make `x < n` follow
//! (the user's own `if bx * 64 + i < N:` guard makes the access need none). Only conditions
//! of variables count (one that reads memory may stop holding under it), and only for
//! indices whose differences are exact (no load, cast or narrow let: int8 wraps); inside
//! one expression or statement an equal test proves an index read from memory. Loads in
//! tile operations' region starts and values are guarded too. Tile operations
//! (`T.copy`, `T.fill`, …) are not element accesses: `lower-tile-ops` masks their regions.
//! Accesses outside every loop are left as written (TileLang's rule too); the verifier's
//! bounds rule and the interpreter report those that fall outside. Idempotent: a guard it
//! placed proves its access.

use crate::analysis::int::{dim_ranges, enter_kernel, enter_loop, interval, Ranges};
use crate::context::PassContext;
use crate::pass::Pass;
use std::collections::HashMap;
use tlc_ir::affine::constant_difference;
use tlc_ir::interval::decide;
use tlc_ir::{
    BinOp, DType, Diagnostic, Expr, ExprKind, ForKind, PrimFunc, Scope, Span, Stmt, StmtKind,
};

pub struct LegalizeSafeMemory;

impl Pass for LegalizeSafeMemory {
    fn name(&self) -> &'static str {
        "legalize-safe-memory"
    }

    fn description(&self) -> &'static str {
        "global element accesses in loops not provably in bounds: loads read 0, stores are dropped (TileLang's LegalizeSafeMemoryAccess)"
    }

    fn run(&self, func: PrimFunc, _cx: &PassContext) -> Result<PrimFunc, Vec<Diagnostic>> {
        Ok(legalize_safe_memory(func))
    }
}

/// The function with every global element access in a loop that may fall outside its
/// tensor guarded (see the module's summary).
pub fn legalize_safe_memory(mut func: PrimFunc) -> PrimFunc {
    let globals: HashMap<String, (DType, Vec<Expr>)> = func
        .params
        .iter()
        .filter(|p| p.scope == Scope::Global)
        .map(|p| (p.name.name.clone(), (p.dtype, p.shape.clone())))
        .collect();
    if globals.is_empty() {
        return func;
    }
    let mut walk = Walk {
        globals,
        ranges: dim_ranges(&func),
        facts: Vec::new(),
        tests: Vec::new(),
        first_tests: Vec::new(),
        inexact: Default::default(),
        loops: 0,
    };
    let body = std::mem::take(&mut func.body);
    func.body = walk.body(body);
    func
}

/// What the walk knows at a point: the global tensors' shapes, the variables' ranges, the
/// conditions that hold there, and how many loops enclose it.
struct Walk {
    /// Each global tensor's element dtype and shape.
    globals: HashMap<String, (DType, Vec<Expr>)>,
    ranges: Ranges,
    /// Comparisons of variables that hold where the walk is (conjuncts of enclosing
    /// conditions, loop bounds), matched by constant differences.
    facts: Vec<Expr>,
    /// Conjuncts that hold where the walk is inside one expression or statement (a
    /// `T.if_then_else` arm, the right side of `and`, a store's value under its guard),
    /// memory reads included: nothing is stored between their test and the access, so an
    /// equal conjunct proves the access's (what makes the pass idempotent on guards it
    /// placed for indices read from memory).
    tests: Vec<Expr>,
    /// Conditions that read memory, of the `if` whose body is walked next: tests for its
    /// first statement only (`body`).
    first_tests: Vec<Expr>,
    /// Let variables whose values may wrap or come from memory (a narrow integer dtype, a
    /// cast, a load): a fact about them proves nothing by differences.
    inexact: std::collections::HashSet<String>,
    loops: usize,
}

impl Walk {
    fn body(&mut self, body: Vec<Stmt>) -> Vec<Stmt> {
        let facts = self.facts.len();
        let mut added: Vec<String> = Vec::new();
        // An `if`'s conditions that read memory hold for the first statement of its body
        // when that is an element write: nothing runs between the test and the write's own
        // reads (the guard this pass puts around a store is such a pair, so compiled IR read
        // again keeps its guards as they are).
        let first_tests = std::mem::take(&mut self.first_tests);
        let out = body
            .into_iter()
            .enumerate()
            .map(|(i, s)| {
                let tests = self.tests.len();
                if i == 0 && matches!(s.kind, StmtKind::Store { .. } | StmtKind::AtomicAdd { .. }) {
                    self.tests.extend(first_tests.iter().cloned());
                }
                if let StmtKind::Let { var, value, dtype } = &s.kind {
                    if !self.exact(value) || dtype.is_some_and(|d| d.is_int() && d.bits() < 32) {
                        self.inexact.insert(var.name.clone());
                    }
                    // An integer let's values bound the indices built from it.
                    let r = interval(value, &self.ranges);
                    if r.lo != i64::MIN || r.hi != i64::MAX {
                        self.ranges.insert(var.name.clone(), r);
                        added.push(var.name.clone());
                    }
                }
                let s = self.stmt(s);
                self.tests.truncate(tests);
                s
            })
            .collect();
        for name in added {
            self.ranges.remove(&name);
        }
        self.facts.truncate(facts);
        out
    }

    fn stmt(&mut self, mut s: Stmt) -> Stmt {
        let span = s.span;
        s.kind = match s.kind {
            StmtKind::Kernel(mut k) => {
                let saved = self.ranges.clone();
                enter_kernel(&mut self.ranges, &k);
                let facts = self.facts.len();
                for (v, g) in k.block_vars.iter().zip(&k.grid) {
                    let var = Expr::var(v.name.clone());
                    self.fact(Expr::binary(BinOp::Lt, var, g.clone(), span));
                }
                k.body = self.body(std::mem::take(&mut k.body));
                self.facts.truncate(facts);
                self.ranges = saved;
                StmtKind::Kernel(k)
            }
            StmtKind::For(mut f) => {
                f.start = self.expr(f.start);
                f.stop = self.expr(f.stop);
                let saved = self.ranges.clone();
                enter_loop(&mut self.ranges, &f);
                let facts = self.facts.len();
                let var = Expr::var(f.var.name.clone());
                self.fact(Expr::binary(BinOp::Ge, var.clone(), f.start.clone(), span));
                self.fact(Expr::binary(BinOp::Lt, var, f.stop.clone(), span));
                if matches!(f.kind, ForKind::ThreadBinding(_)) {
                    // Per-thread code (the user's `T.get_thread_binding` kernels, and
                    // everything the pipeline lowered): taken as written, so the front end
                    // leaves compiled IR unchanged (its `--emit=tir` text runs as is).
                    self.facts.truncate(facts);
                    self.ranges = saved;
                    return Stmt::new(StmtKind::For(f), span);
                }
                self.loops += 1;
                f.body = self.body(std::mem::take(&mut f.body));
                self.loops -= 1;
                self.facts.truncate(facts);
                self.ranges = saved;
                StmtKind::For(f)
            }
            StmtKind::While { cond, body } => {
                let cond = self.expr(cond);
                let (facts, tests) = (self.facts.len(), self.tests.len());
                self.assume(&cond, true);
                self.test_variables(&cond);
                let body = self.body(body);
                self.facts.truncate(facts);
                self.tests.truncate(tests);
                StmtKind::While { cond, body }
            }
            StmtKind::If {
                cond,
                then_body,
                else_body,
            } => {
                let cond = self.expr(cond);
                let (facts, tests) = (self.facts.len(), self.tests.len());
                self.assume(&cond, true);
                self.test_variables(&cond);
                self.first_tests = crate::analysis::int::conjuncts(&cond)
                    .into_iter()
                    .filter(|c| reads_memory(c))
                    .cloned()
                    .collect();
                let then_body = self.body(then_body);
                self.first_tests.clear();
                self.facts.truncate(facts);
                self.tests.truncate(tests);
                self.assume(&cond, false);
                let else_body = self.body(else_body);
                self.facts.truncate(facts);
                StmtKind::If {
                    cond,
                    then_body,
                    else_body,
                }
            }
            StmtKind::Let { var, dtype, value } => StmtKind::Let {
                var,
                dtype,
                value: self.expr(value),
            },
            StmtKind::Store {
                buffer,
                indices,
                value,
            } => {
                let store = |buffer, indices, value| StmtKind::Store {
                    buffer,
                    indices,
                    value,
                };
                return self.element_write(buffer, indices, value, span, store);
            }
            StmtKind::AtomicAdd {
                buffer,
                indices,
                value,
            } => {
                let add = |buffer, indices, value| StmtKind::AtomicAdd {
                    buffer,
                    indices,
                    value,
                };
                return self.element_write(buffer, indices, value, span, add);
            }
            // Loads in a tile operation's region starts and values (a paged copy's
            // `K[table[k], ...]`): TileLang lowers these to loops before guarding.
            StmtKind::Copy { src, dst } => StmtKind::Copy {
                src: self.region(src),
                dst: self.region(dst),
            },
            StmtKind::Fill { dst, value } => StmtKind::Fill {
                dst: self.region(dst),
                value: self.expr(value),
            },
            other => other,
        };
        s
    }

    /// A store or element atomic (`make` builds it) with its indices' and value's loads
    /// walked, under `if in_bounds:` when it needs a guard; its value is read under it.
    fn element_write(
        &mut self,
        buffer: tlc_ir::Ident,
        indices: Vec<Expr>,
        value: Expr,
        span: Span,
        make: impl FnOnce(tlc_ir::Ident, Vec<Expr>, Expr) -> StmtKind,
    ) -> Stmt {
        let indices: Vec<Expr> = indices.into_iter().map(|e| self.expr(e)).collect();
        let guard = self.guard(&buffer.name, &indices, span);
        let value = self.guarded_value(value, guard.as_ref());
        wrap(guard, Stmt::new(make(buffer, indices, value), span))
    }

    fn region(&mut self, mut r: tlc_ir::Region) -> tlc_ir::Region {
        for range in &mut r.ranges {
            let start = std::mem::replace(&mut range.start, Expr::int(0));
            range.start = self.expr(start);
        }
        r
    }

    /// Adds a fact when it is one of variables (a bound read from memory may change).
    fn fact(&mut self, f: Expr) {
        if !reads_memory(&f) {
            self.facts.push(f);
        }
    }

    /// Whether differences of `e` are exact: no load, no cast, no let that may wrap.
    fn exact(&self, e: &Expr) -> bool {
        let mut ok = true;
        tlc_ir::visit::for_each_subexpr(e, &mut |x| match &x.kind {
            ExprKind::Load { .. } | ExprKind::Cast(..) | ExprKind::Reinterpret(..) => ok = false,
            ExprKind::Var(n) => ok &= !self.inexact.contains(n),
            _ => {}
        });
        ok
    }

    /// A store's value, walked where the store's guard holds (its loads of the same
    /// element need no second guard).
    fn guarded_value(&mut self, value: Expr, guard: Option<&(Expr, Expr)>) -> Expr {
        let (facts, tests) = (self.facts.len(), self.tests.len());
        if let Some((cond, _)) = guard {
            self.assume(cond, true);
            self.test(cond);
        }
        let value = self.expr(value);
        self.facts.truncate(facts);
        self.tests.truncate(tests);
        value
    }

    /// Adds the conjuncts of `cond` that read no memory as tests holding under a statement:
    /// variables never change, so they hold in the whole body (a guard this pass placed, as
    /// compiled IR prints it, proves its access when the front end reads it again).
    fn test_variables(&mut self, cond: &Expr) {
        let pure = crate::analysis::int::conjuncts(cond)
            .into_iter()
            .filter(|c| !reads_memory(c))
            .cloned();
        self.tests.extend(pure);
    }

    /// Adds `cond`'s conjuncts as tests holding inside the current expression.
    fn test(&mut self, cond: &Expr) {
        self.tests
            .extend(crate::analysis::int::conjuncts(cond).into_iter().cloned());
    }

    /// `e` with its global loads in a loop guarded, inner ones first.
    fn expr(&mut self, e: Expr) -> Expr {
        let span = e.span;
        match e.kind {
            ExprKind::Load { buffer, indices } => {
                let indices: Vec<Expr> = indices.into_iter().map(|i| self.expr(i)).collect();
                let guard = self.guard(&buffer, &indices, span);
                let load = Expr::new(ExprKind::Load { buffer, indices }, span);
                match guard {
                    None => load,
                    Some((cond, zero)) => Expr::new(
                        ExprKind::Select(Box::new(cond), Box::new(load), Box::new(zero)),
                        span,
                    ),
                }
            }
            ExprKind::Select(c, a, b) => {
                let c = self.expr(*c);
                let (facts, tests) = (self.facts.len(), self.tests.len());
                self.assume(&c, true);
                self.test(&c);
                let a = self.expr(*a);
                self.facts.truncate(facts);
                self.tests.truncate(tests);
                self.assume(&c, false);
                let b = self.expr(*b);
                self.facts.truncate(facts);
                Expr::new(
                    ExprKind::Select(Box::new(c), Box::new(a), Box::new(b)),
                    span,
                )
            }
            ExprKind::Binary(op @ (BinOp::And | BinOp::Or), a, b) => {
                // The right side runs only where the left one decided nothing.
                let a = self.expr(*a);
                let (facts, tests) = (self.facts.len(), self.tests.len());
                self.assume(&a, op == BinOp::And);
                if op == BinOp::And {
                    self.test(&a);
                }
                let b = self.expr(*b);
                self.facts.truncate(facts);
                self.tests.truncate(tests);
                Expr::new(ExprKind::Binary(op, Box::new(a), Box::new(b)), span)
            }
            ExprKind::Binary(op, a, b) => {
                let a = self.expr(*a);
                let b = self.expr(*b);
                Expr::new(ExprKind::Binary(op, Box::new(a), Box::new(b)), span)
            }
            ExprKind::Unary(op, a) => Expr::new(ExprKind::Unary(op, Box::new(self.expr(*a))), span),
            ExprKind::Cast(d, a) => Expr::new(ExprKind::Cast(d, Box::new(self.expr(*a))), span),
            ExprKind::Reinterpret(d, a) => {
                Expr::new(ExprKind::Reinterpret(d, Box::new(self.expr(*a))), span)
            }
            ExprKind::Math(f, args) => Expr::new(
                ExprKind::Math(f, args.into_iter().map(|a| self.expr(a)).collect()),
                span,
            ),
            kind => Expr::new(kind, span),
        }
    }

    /// Adds what holds where `cond` is `taken` (true) or not: its conjuncts when taken, the
    /// negation of a single comparison when not.
    fn assume(&mut self, cond: &Expr, taken: bool) {
        if reads_memory(cond) {
            // A value in memory may change under the condition (`while k[0] < n: …;
            // k[0] += 1`): only facts of variables, which never change, are kept.
            if !taken {
                return;
            }
            let pure = crate::analysis::int::conjuncts(cond)
                .into_iter()
                .filter(|c| !reads_memory(c))
                .cloned();
            self.facts.extend(pure);
        } else if taken {
            self.facts
                .extend(crate::analysis::int::conjuncts(cond).into_iter().cloned());
        } else if let ExprKind::Binary(op, a, b) = &cond.kind {
            let negated = match op {
                BinOp::Lt => BinOp::Ge,
                BinOp::Le => BinOp::Gt,
                BinOp::Gt => BinOp::Le,
                BinOp::Ge => BinOp::Lt,
                _ => return,
            };
            self.facts.push(Expr::binary(
                negated,
                (**a).clone(),
                (**b).clone(),
                cond.span,
            ));
        }
    }

    /// The in-bounds condition an access of `buffer` at `indices` needs, with the value a
    /// guarded load reads instead (0 of the tensor's dtype): `None` when the buffer is not
    /// global, the access is outside every loop, or every index is proved in bounds.
    fn guard(&self, buffer: &str, indices: &[Expr], span: Span) -> Option<(Expr, Expr)> {
        if self.loops == 0 {
            return None;
        }
        let (dtype, shape) = self.globals.get(buffer)?;
        let mut conds: Vec<Expr> = Vec::new();
        for (x, n) in indices.iter().zip(shape) {
            // An index computed from memory may be of a narrow dtype (a uint8 `idx[i]`), in
            // which `256` would wrap: compared as int64.
            let exact = self.exact(x);
            let wide = || match !exact {
                true => Expr::new(ExprKind::Cast(DType::Int64, Box::new(x.clone())), span),
                false => x.clone(),
            };
            let lower = Expr::binary(BinOp::Ge, wide(), Expr::int(0), span);
            if !self.non_negative(x, exact) && !self.tested(&lower) {
                conds.push(lower);
            }
            let upper = Expr::binary(BinOp::Lt, wide(), n.clone(), span);
            if !self.below(x, n, exact) && !self.tested(&upper) {
                conds.push(upper);
            }
        }
        let cond = conds
            .into_iter()
            .reduce(|a, b| Expr::binary(BinOp::And, a, b, span))?;
        let zero = Expr::new(ExprKind::Cast(*dtype, Box::new(Expr::int(0))), span);
        Some((cond, zero))
    }

    /// Whether a test equal to `cond` holds here.
    fn tested(&self, cond: &Expr) -> bool {
        self.tests.iter().any(|t| t == cond)
    }

    /// `x >= 0` by intervals, or (for an `exact` `x`) by a fact `y >= c` (or `y > c`,
    /// `c <= y`, …) with `x - y` a constant `d` and `c + d >= 0`.
    fn non_negative(&self, x: &Expr, exact: bool) -> bool {
        interval(x, &self.ranges).lo >= 0
            || exact
                && self.facts.iter().any(|f| {
                    lower_bound(f).is_some_and(|(y, lo, strict)| {
                        let Some(d) = constant_difference(x, y) else {
                            return false;
                        };
                        let lo = interval(lo, &self.ranges).lo;
                        self.exact(y)
                            && lo != i64::MIN
                            && lo.saturating_add(d).saturating_add(i64::from(strict)) >= 0
                    })
                })
    }

    /// `x < n` by intervals, or (for an `exact` `x`) by a fact `y < m` (or `y <= m`,
    /// `m > y`, …) with `x - y` a constant `dx <= 0` and `n - m` a constant `dn` large
    /// enough.
    fn below(&self, x: &Expr, n: &Expr, exact: bool) -> bool {
        let lt = Expr::binary(BinOp::Lt, x.clone(), n.clone(), x.span);
        decide(&lt, &self.ranges) == Some(true)
            || exact
                && self.facts.iter().any(|f| {
                    upper_bound(f).is_some_and(|(y, m, inclusive)| {
                        // x = y + dx <= m + dx (+1 if `y < m`): below n when it is at most n - 1.
                        let (Some(dx), Some(dn)) =
                            (constant_difference(x, y), constant_difference(n, m))
                        else {
                            return false;
                        };
                        self.exact(y)
                            && dx
                                .checked_sub(dn)
                                .and_then(|v| v.checked_add(i64::from(inclusive)))
                                .is_some_and(|v| v <= 0)
                    })
                })
    }
}

/// Whether `e` loads from any buffer.
fn reads_memory(e: &Expr) -> bool {
    let mut found = false;
    tlc_ir::visit::for_each_subexpr(e, &mut |x| {
        found |= matches!(x.kind, ExprKind::Load { .. });
    });
    found
}

/// `y < m` (inclusive false) or `y <= m` (inclusive true) when `f` states one.
fn upper_bound(f: &Expr) -> Option<(&Expr, &Expr, bool)> {
    match &f.kind {
        ExprKind::Binary(BinOp::Lt, y, m) | ExprKind::Binary(BinOp::Gt, m, y) => {
            Some((y, m, false))
        }
        ExprKind::Binary(BinOp::Le, y, m) | ExprKind::Binary(BinOp::Ge, m, y) => Some((y, m, true)),
        _ => None,
    }
}

/// `y >= lo` (strict false) or `y > lo` (strict true) when `f` states one.
fn lower_bound(f: &Expr) -> Option<(&Expr, &Expr, bool)> {
    match &f.kind {
        ExprKind::Binary(BinOp::Ge, y, lo) | ExprKind::Binary(BinOp::Le, lo, y) => {
            Some((y, lo, false))
        }
        ExprKind::Binary(BinOp::Gt, y, lo) | ExprKind::Binary(BinOp::Lt, lo, y) => {
            Some((y, lo, true))
        }
        _ => None,
    }
}

/// `stmt`, under `if cond:` when a guard is needed.
fn wrap(guard: Option<(Expr, Expr)>, stmt: Stmt) -> Stmt {
    match guard {
        None => stmt,
        Some((cond, _)) => {
            let span = stmt.span;
            Stmt::new(
                StmtKind::If {
                    cond,
                    then_body: vec![stmt],
                    else_body: Vec::new(),
                },
                span,
            )
        }
    }
}
