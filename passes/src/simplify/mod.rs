//! `simplify`: an egg e-graph simplifier for integer index expressions.
//!
//! Every maximal int32 arithmetic tree of the IR — indices, loop bounds, region starts and
//! extents, grid extents, shapes, let values, and the integer operands inside conditions and
//! float expressions — is put in an e-graph (`lang.rs`) whose analysis folds constants and
//! tracks intervals: symbolic dims are ≥ 1, block variables lie in `[0, grid)`, loop
//! variables in `[start, stop)`, int32 lets in their value's interval, and each side of an
//! `if` comparing a variable with a constant its side of it (`analysis::int::narrowed`). A
//! `T.if_then_else` whose condition the intervals decide becomes its side, and a let that
//! nothing reads any more goes. The named,
//! directional rules of `rules.rs` run under fixed limits (`LIMITS`), and the cheapest term
//! (fewest operators, then fewest divisions) replaces the original only when it has fewer
//! operators. Float arithmetic is never rewritten. int32 arithmetic is exact in the IR
//! (docs/ir.md), so every rule is an identity over the integers; `widen-indices`, after
//! this pass, gives 64 bits to whatever may leave int32. A loop whose bounds fold to an
//! empty range is removed (it never runs).
//!
//! Unrolled bodies repeat the same trees many times (the seed GEMM: 356 trees, 216
//! distinct), so each run's outcome is memoized by the term with its opaque parts as
//! `$k` symbols together with the interval of every symbol: the e-graph sees exactly
//! those, so a hit gives a term a fresh run would give (the same one, unless the run's time
//! limit is what stops it).

mod convert;
mod lang;
mod rules;

use crate::analysis::int;
use crate::context::PassContext;
use crate::pass::Pass;
use convert::{op_count, to_ir, Term};
use egg::{Extractor, Runner, Symbol};
use lang::{Bounds, OpCost};
use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt::Write;
use std::time::Duration;
use tlc_ir::interval::Interval;
use tlc_ir::verifier::{verify, FuncInfo};
use tlc_ir::visit::{expr_children, for_each_stmt, for_each_subexpr, stmt_exprs};
use tlc_ir::{BinOp, DType, Diagnostic, Expr, ExprKind, PrimFunc, Region, Stmt, StmtKind, UnOp};

pub use rules::rules;

/// The limits of one expression's e-graph run.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub nodes: usize,
    pub iterations: usize,
    pub time: Duration,
}

pub const LIMITS: Limits = Limits {
    nodes: 10_000,
    iterations: 30,
    // A last-resort guard only: the node and iteration limits bound the work, and they are
    // deterministic. A tight time limit made the output depend on the machine's load (a
    // busy CI core stopped the runner early and printed less simplified PTX).
    time: Duration::from_secs(10),
};

pub struct Simplify;

impl Pass for Simplify {
    fn name(&self) -> &'static str {
        "simplify"
    }

    fn description(&self) -> &'static str {
        "e-graph simplification of integer index expressions (floor semantics, bounds, constants)"
    }

    fn preserves_declarations(&self) -> bool {
        true
    }

    fn run(&self, func: PrimFunc, cx: &PassContext) -> Result<PrimFunc, Vec<Diagnostic>> {
        let info = cx.func_info(&func)?.into_owned();
        Ok(simplify_with(func, &info))
    }
}

/// Simplifies every integer expression of `func` (which must verify: the simplifier needs
/// the dtypes of its variables).
pub fn simplify_func(func: PrimFunc) -> Result<PrimFunc, Vec<Diagnostic>> {
    let info = verify(&func)?;
    Ok(simplify_with(func, &info))
}

/// [`simplify_func`] with the facts of `func` already known.
fn simplify_with(mut func: PrimFunc, info: &FuncInfo) -> PrimFunc {
    let rules = rules();
    let mut s = Simplifier {
        info,
        rules: &rules,
        env: int::Ranges::new(),
        memo: RefCell::new(HashMap::new()),
    };
    s.env = int::dim_ranges(&func);
    for param in &mut func.params {
        for d in &mut param.shape {
            *d = s.expr(d);
        }
    }
    s.body(&mut func.body);
    drop_dead_lets(&mut func.body);
    func
}

/// Removes every let whose variable nothing reads: a select the intervals decided may leave
/// the let it read unused (the FP8 GEMM's B scales of columns a tile never has), and its
/// load would still be issued. Values have no side effects, so a dead let changes nothing
/// (a load past the end it held was never needed). Names are unique (see `Simplifier`), so
/// one set of the names read serves the whole function; a round frees the lets that only
/// dead lets read, hence the loop (as many rounds as the longest chain of them).
fn drop_dead_lets(body: &mut Vec<Stmt>) {
    loop {
        let mut read: std::collections::HashSet<String> = std::collections::HashSet::new();
        for_each_stmt(body, &mut |st| {
            for e in stmt_exprs(st) {
                for_each_subexpr(e, &mut |x| {
                    if let ExprKind::Var(v) = &x.kind {
                        read.insert(v.clone());
                    }
                });
            }
        });
        let mut dropped = false;
        retain_lets(body, &mut |var| {
            let keep = read.contains(var);
            dropped |= !keep;
            keep
        });
        if !dropped {
            return;
        }
    }
}

/// Keeps, at every level of `body`, the lets whose variable `keep` accepts.
fn retain_lets(body: &mut Vec<Stmt>, keep: &mut dyn FnMut(&str) -> bool) {
    body.retain(|st| match &st.kind {
        StmtKind::Let { var, .. } => keep(&var.name),
        _ => true,
    });
    for st in body.iter_mut() {
        for child in tlc_ir::visit::child_bodies_mut(st) {
            retain_lets(child, keep);
        }
    }
}

struct Simplifier<'a> {
    info: &'a FuncInfo,
    rules: &'a [lang::Rewrite],
    /// Intervals of the int32 variables in scope (names are unique, so no scoping needed).
    env: int::Ranges,
    /// E-graph outcomes by `memo_key`: the cheapest term, or `None` when it was not smaller.
    memo: RefCell<HashMap<String, Option<egg::RecExpr<lang::Index>>>>,
}

/// The memo key of a run: the term, then every symbol's interval in symbol order.
fn memo_key(term: &egg::RecExpr<lang::Index>, bounds: &Bounds) -> String {
    let mut key = term.to_string();
    let mut symbols: Vec<_> = bounds.symbols.iter().collect();
    symbols.sort_by(|a, b| a.0.as_str().cmp(b.0.as_str()));
    for (s, r) in symbols {
        let _ = write!(key, " {s}:{}:{}", r.lo, r.hi);
    }
    key
}

impl Simplifier<'_> {
    fn body(&mut self, body: &mut Vec<Stmt>) {
        for stmt in body.iter_mut() {
            self.stmt(stmt);
        }
        // A loop whose bounds fold to an empty range never runs: it goes (the verifier
        // refuses a constant extent that is not positive, which the user never wrote: a
        // `-D` value made it so, e.g. a data-parallel phase of zero waves).
        body.retain(|s| match &s.kind {
            StmtKind::For(f) => !matches!(
                (f.start.as_int(), f.stop.as_int()),
                (Some(a), Some(b)) if b <= a
            ),
            _ => true,
        });
    }

    fn stmt(&mut self, stmt: &mut Stmt) {
        match &mut stmt.kind {
            StmtKind::Kernel(k) => {
                for g in &mut k.grid {
                    *g = self.expr(g);
                }
                int::enter_kernel(&mut self.env, k);
                for t in &mut k.threads {
                    *t = self.expr(t);
                }
                if let Some(sw) = &mut k.swizzle {
                    sw.panel_size = self.expr(&sw.panel_size);
                }
                if let Some(b) = &mut k.min_blocks_per_sm {
                    *b = self.expr(b);
                }
                for alloc in &mut k.allocs {
                    for d in &mut alloc.shape {
                        *d = self.expr(d);
                    }
                }
                self.body(&mut k.body);
            }
            StmtKind::For(f) => {
                f.start = self.expr(&f.start);
                f.stop = self.expr(&f.stop);
                int::enter_loop(&mut self.env, f);
                self.body(&mut f.body);
            }
            StmtKind::If {
                cond,
                then_body,
                else_body,
            } => {
                *cond = self.expr(cond);
                // Each side knows its side of a comparison of a variable with a constant
                // (a warp-specialized consumer's `tx < 256` makes its `tx // 256` zero).
                for (side, taken) in [(then_body, true), (else_body, false)] {
                    let narrowed = int::narrowed(cond, taken, &self.env);
                    let saved: Vec<(String, Option<Interval>)> = narrowed
                        .iter()
                        .map(|(v, _)| (v.clone(), self.env.get(v).copied()))
                        .collect();
                    self.env.extend(narrowed);
                    self.body(side);
                    for (v, r) in saved {
                        match r {
                            Some(r) => self.env.insert(v, r),
                            None => self.env.remove(&v),
                        };
                    }
                }
            }
            StmtKind::While { cond, body } => {
                *cond = self.expr(cond);
                self.body(body);
            }
            StmtKind::Let { var, dtype, value } => {
                *value = self.expr(value);
                let int32 = matches!(dtype, None | Some(DType::Int32)) && self.is_int32(value);
                if int32 {
                    let r = self.interval(value);
                    self.env.insert(var.name.clone(), r);
                }
            }
            StmtKind::Store { indices, value, .. } | StmtKind::AtomicAdd { indices, value, .. } => {
                for i in indices.iter_mut() {
                    *i = self.expr(i);
                }
                *value = self.expr(value);
            }
            StmtKind::AllReduce(r) => {
                for i in r.indices.iter_mut() {
                    *i = self.expr(i);
                }
                r.value = self.expr(&r.value);
            }
            StmtKind::Barrier
            | StmtKind::GridSync
            | StmtKind::Note(_)
            | StmtKind::Fresh(_)
            | StmtKind::FinalizeReducer(_) => {}
            StmtKind::Intrinsic(i) => {
                for e in i.exprs_mut() {
                    *e = self.expr(e);
                }
            }
            StmtKind::Copy { src, dst } => {
                self.region(src);
                self.region(dst);
            }
            StmtKind::Gemm(g) => {
                self.region(&mut g.a);
                self.region(&mut g.b);
                self.region(&mut g.c);
            }
            StmtKind::Fill { dst, value } => {
                self.region(dst);
                *value = self.expr(value);
            }
            StmtKind::Reduce(_) => {}
        }
    }

    fn region(&mut self, r: &mut Region) {
        for range in &mut r.ranges {
            range.start = self.expr(&range.start);
            range.extent = self.expr(&range.extent);
        }
    }

    fn is_int32(&self, e: &Expr) -> bool {
        self.info.expr_dtype(e) == Some(DType::Int32)
    }

    /// The simplified form of `e`.
    fn expr(&self, e: &Expr) -> Expr {
        let arithmetic = match &e.kind {
            ExprKind::Unary(UnOp::Neg, _) => true,
            ExprKind::Binary(op, _, _) => convert::is_index_op(*op),
            _ => false,
        };
        if arithmetic && self.is_int32(e) {
            self.tree(e)
        } else {
            self.children(e)
        }
    }

    /// `e` with each direct subexpression simplified.
    fn children(&self, e: &Expr) -> Expr {
        let mut kids = expr_children(e).map(|c| self.expr(c));
        let mut next = || kids.next().unwrap_or_else(|| Expr::int(0));
        let kind = match &e.kind {
            ExprKind::Int(_) | ExprKind::Float(_) | ExprKind::Bool(_) | ExprKind::Var(_) => {
                return e.clone()
            }
            ExprKind::Load { buffer, indices } => ExprKind::Load {
                buffer: buffer.clone(),
                indices: indices.iter().map(|_| next()).collect(),
            },
            ExprKind::Unary(op, _) => ExprKind::Unary(*op, Box::new(next())),
            ExprKind::Cast(dt, _) => ExprKind::Cast(*dt, Box::new(next())),
            ExprKind::Reinterpret(dt, _) => ExprKind::Reinterpret(*dt, Box::new(next())),
            ExprKind::Binary(op, _, _) => {
                let (a, b) = (next(), next());
                return Expr::binary(*op, a, b, e.span);
            }
            ExprKind::Select(..) => {
                let (c, a, b) = (next(), next(), next());
                // A condition the intervals decide picks its side (a column test that holds
                // for the whole tile: the FP8 GEMM's B scale at a block_N dividing 128) —
                // when it compares integers only: intervals read every operand as an exact
                // integer, which a float (`x % 6 < 6` fails for x = -1e-30) or a narrow
                // integer that wraps is not.
                let decided = if self.integer_condition(&c) {
                    int::decide(&c, &self.env)
                } else {
                    None
                };
                match decided {
                    Some(true) => return a,
                    Some(false) => return b,
                    None => ExprKind::Select(Box::new(c), Box::new(a), Box::new(b)),
                }
            }
            ExprKind::Math(f, args) => ExprKind::Math(*f, args.iter().map(|_| next()).collect()),
        };
        Expr::new(kind, e.span)
    }

    /// Whether condition `c` is literals, `not`, `and`, `or` and comparisons of int32 or
    /// int64 values (whose intervals are exact, or full where int64 may wrap).
    fn integer_condition(&self, c: &Expr) -> bool {
        match &c.kind {
            ExprKind::Bool(_) => true,
            ExprKind::Unary(UnOp::Not, a) => self.integer_condition(a),
            ExprKind::Binary(BinOp::And | BinOp::Or, a, b) => {
                self.integer_condition(a) && self.integer_condition(b)
            }
            ExprKind::Binary(
                BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::Eq | BinOp::Ne,
                a,
                b,
            ) => [a, b]
                .iter()
                .all(|x| matches!(self.info.expr_dtype(x), Some(DType::Int32 | DType::Int64))),
            _ => false,
        }
    }

    /// Simplifies the int32 arithmetic tree `e` in an e-graph.
    fn tree(&self, e: &Expr) -> Expr {
        let mut term = Term::default();
        let is_int32 = |x: &Expr| self.is_int32(x);
        term.add(e, &is_int32);
        // Opaque parts are simplified on their own.
        for atom in &mut term.atoms {
            *atom = self.children(atom);
        }
        let mut bounds = Bounds::default();
        for node in term.expr.as_ref() {
            if let lang::Index::Symbol(s) = node {
                if let Some(r) = self.env.get(s.as_str()) {
                    bounds.symbols.insert(*s, *r);
                }
            }
        }
        for (k, atom) in term.atoms.iter().enumerate() {
            let r = if self.is_int32(atom) {
                self.interval(atom)
            } else {
                Interval::FULL
            };
            bounds.symbols.insert(Symbol::from(format!("${k}")), r);
        }
        let key = memo_key(&term.expr, &bounds);
        let cached = self.memo.borrow().get(&key).cloned();
        let outcome = match cached {
            Some(outcome) => outcome,
            None => {
                let outcome = self.run_egraph(&term.expr, bounds);
                self.memo.borrow_mut().insert(key, outcome.clone());
                outcome
            }
        };
        let Some(best) = outcome else {
            // Not smaller: keep the original tree (and spans), opaque parts simplified.
            return self.keep(e);
        };
        match to_ir(&best, &term.atoms) {
            Some(mut out) => {
                out.span = e.span;
                out
            }
            None => e.clone(),
        }
    }

    /// The cheapest term equal to `expr` under `bounds`, if it has fewer operators.
    fn run_egraph(
        &self,
        expr: &egg::RecExpr<lang::Index>,
        bounds: Bounds,
    ) -> Option<egg::RecExpr<lang::Index>> {
        let before = op_count(expr);
        let runner = Runner::<lang::Index, Bounds>::new(bounds)
            .with_node_limit(LIMITS.nodes)
            .with_iter_limit(LIMITS.iterations)
            .with_time_limit(LIMITS.time)
            .with_expr(expr)
            .run(self.rules);
        let &root = runner.roots.first()?;
        let (_, best) = Extractor::new(&runner.egraph, OpCost).find_best(root);
        (op_count(&best) < before).then_some(best)
    }

    /// `e` as it is, except that its opaque parts (as `Term::add` sees them) are simplified.
    fn keep(&self, e: &Expr) -> Expr {
        if !self.is_int32(e) {
            return self.children(e);
        }
        let kind = match &e.kind {
            ExprKind::Unary(UnOp::Neg, a) => ExprKind::Unary(UnOp::Neg, Box::new(self.keep(a))),
            ExprKind::Binary(op, a, b) if convert::is_index_op(*op) => {
                ExprKind::Binary(*op, Box::new(self.keep(a)), Box::new(self.keep(b)))
            }
            _ => return self.children(e),
        };
        Expr::new(kind, e.span)
    }

    /// What the intervals say about `e` (an int32 expression).
    fn interval(&self, e: &Expr) -> Interval {
        int::interval(e, &self.env)
    }
}

/// Operators (`+ - * // % T.ceildiv T.min T.max`, unary `-`) in the integer expressions of
/// `func`: the size of its index math, before and after `simplify`.
pub fn index_op_count(func: &PrimFunc) -> usize {
    let Ok(info) = verify(func) else {
        return 0;
    };
    let mut count = 0;
    let mut visit = |e: &Expr| {
        for_each_subexpr(e, &mut |x| {
            let arith = matches!(
                &x.kind,
                ExprKind::Unary(UnOp::Neg, _) | ExprKind::Binary(_, _, _)
            ) && !matches!(&x.kind, ExprKind::Binary(op, _, _) if op.is_comparison() || op.is_logical());
            if arith && info.expr_dtype(x).is_some_and(DType::is_int) {
                count += 1;
            }
        });
    };
    for p in &func.params {
        p.shape.iter().for_each(&mut visit);
    }
    for_each_stmt(&func.body, &mut |stmt| {
        stmt_exprs(stmt).into_iter().for_each(&mut visit);
    });
    count
}

#[cfg(test)]
mod tests;
