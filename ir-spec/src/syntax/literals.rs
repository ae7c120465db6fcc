//! TVMScript's typed literals normalized to the DSL's plain literals.
//!
//! TileLang 0.1.15 prints every constant with its type: `X * T.float32(0.5)`, `T.int32(3)`,
//! `T.float16(1.0)`, where the DSL has `X * 0.5`. Lowering reads such a call as a cast of
//! the literal (`T.cast(0.5, "float32")`, exactly its meaning) and records its span; this
//! pass, run on the whole function once names are unique, replaces a recorded cast by the
//! bare literal wherever that gives the same value *and* the same type to every node:
//!
//! - an operand of an arithmetic or comparison operator, `T.min` / `T.max`, or a branch of
//!   `T.if_then_else`, whose other operand is a non-literal of the cast's dtype (a weak
//!   literal adopts that dtype and is rounded once from its exact value, as the cast is);
//! - a stored or filled value whose buffer has the cast's dtype, or a let value whose
//!   declared dtype is the cast's (the value is converted to that dtype either way);
//! - anywhere else (a let without a dtype, an index, a bound, an extent), only when the cast's
//!   dtype is the literal's own (`int32` for an integer that fits, `float32` for a float).
//!
//! Everywhere else the cast stays: `T.float16(0.5)` next to a `float32` value, `T.int64(3)`,
//! `T.float32(0.5) * 2` (two literals: the cast makes the product a non-literal). Casts written
//! as `T.cast(...)` / `T.Cast(...)` are never touched, so a printed IR (which spells every
//! cast `T.cast`) parses back to an equal IR.

use crate::dtype::DType;
use crate::ir::{BufferDecl, Expr, ExprKind, PrimFunc, Region, Stmt, StmtKind, UnOp};
use crate::types::{self, int_literal_dtype};
use std::collections::{HashMap, HashSet};

/// Replaces the typed literals of `func` whose spans are in `marks` (see the module doc). A
/// minus on a typed literal folds into it first (`-T.infinity("float32")` is
/// `T.float32("-inf")`).
pub fn normalize(func: &mut PrimFunc, marks: HashSet<(usize, usize)>) {
    if marks.is_empty() {
        return;
    }
    let mut n = Normalizer {
        marks,
        vars: HashMap::new(),
        buffers: HashMap::new(),
    };
    for d in &func.dims {
        n.vars.insert(d.name.clone(), DType::Int32);
    }
    for p in &func.params {
        n.buffer(p);
    }
    n.body(&mut func.body);
}

/// How a root expression's value is used.
#[derive(Clone, Copy)]
enum Use {
    /// Converted to this dtype (a store, a fill, a let with a dtype).
    ConvertedTo(DType),
    /// Used with its own type (a let without a dtype, an index, a bound, a condition).
    AsIs,
}

struct Normalizer {
    marks: HashSet<(usize, usize)>,
    vars: HashMap<String, DType>,
    buffers: HashMap<String, DType>,
}

impl Normalizer {
    fn buffer(&mut self, b: &BufferDecl) {
        self.buffers.insert(b.name.name.clone(), b.dtype);
    }

    fn body(&mut self, body: &mut [Stmt]) {
        for stmt in body {
            self.stmt(stmt);
        }
    }

    fn stmt(&mut self, stmt: &mut Stmt) {
        match &mut stmt.kind {
            StmtKind::Kernel(k) => {
                for alloc in &k.allocs {
                    self.buffer(alloc);
                }
                for v in &k.block_vars {
                    self.vars.insert(v.name.clone(), DType::Int32);
                }
                for e in k
                    .grid
                    .iter_mut()
                    .chain(k.threads.iter_mut())
                    .chain(k.cluster.iter_mut())
                {
                    self.root(e, Use::AsIs);
                }
                if let Some(s) = &mut k.swizzle {
                    self.root(&mut s.panel_size, Use::AsIs);
                }
                if let Some(b) = &mut k.min_blocks_per_sm {
                    self.root(b, Use::AsIs);
                }
                for alloc in &mut k.allocs {
                    for e in &mut alloc.shape {
                        self.root(e, Use::AsIs);
                    }
                }
                self.body(&mut k.body);
            }
            StmtKind::For(f) => {
                self.vars.insert(f.var.name.clone(), DType::Int32);
                self.root(&mut f.start, Use::AsIs);
                self.root(&mut f.stop, Use::AsIs);
                self.body(&mut f.body);
            }
            StmtKind::If {
                cond,
                then_body,
                else_body,
            } => {
                self.root(cond, Use::AsIs);
                self.body(then_body);
                self.body(else_body);
            }
            StmtKind::While { cond, body } => {
                self.root(cond, Use::AsIs);
                self.body(body);
            }
            StmtKind::Let { var, dtype, value } => {
                let how = dtype.map_or(Use::AsIs, Use::ConvertedTo);
                self.root(value, how);
                let dt = match dtype {
                    Some(d) => Some(*d),
                    None => self.infer(value).map(|t| t.dtype),
                };
                if let Some(dt) = dt {
                    self.vars.insert(var.name.clone(), dt);
                }
            }
            StmtKind::Store {
                buffer,
                indices,
                value,
            }
            | StmtKind::AtomicAdd {
                buffer,
                indices,
                value,
            } => {
                for e in indices {
                    self.root(e, Use::AsIs);
                }
                let how = self.converted_to(&buffer.name);
                self.root(value, how);
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
                let how = self.converted_to(&dst.buffer.name);
                self.root(value, how);
            }
            StmtKind::Barrier
            | StmtKind::GridSync
            | StmtKind::Note(_)
            | StmtKind::Fresh(_)
            | StmtKind::Reduce(_)
            | StmtKind::FinalizeReducer(_) => {}
            StmtKind::AllReduce(r) => {
                for e in &mut r.indices {
                    self.root(e, Use::AsIs);
                }
                let how = self.converted_to(&r.buffer.name);
                self.root(&mut r.value, how);
            }
            StmtKind::Intrinsic(i) => {
                for e in i.exprs_mut() {
                    self.root(e, Use::AsIs);
                }
            }
        }
    }

    fn converted_to(&self, buffer: &str) -> Use {
        self.buffers
            .get(buffer)
            .copied()
            .map_or(Use::AsIs, Use::ConvertedTo)
    }

    fn region(&mut self, r: &mut Region) {
        for range in &mut r.ranges {
            self.root(&mut range.start, Use::AsIs);
            self.root(&mut range.extent, Use::AsIs);
        }
    }

    /// A root expression used as `how` says.
    fn root(&mut self, e: &mut Expr, how: Use) {
        self.expr(e);
        let ok = match (how, typed_literal(e, &self.marks)) {
            (_, None) => false,
            (Use::ConvertedTo(to), Some((dt, lit))) => to == dt && adopts(lit, dt),
            (Use::AsIs, Some((dt, lit))) => own_dtype(lit) == Some(dt),
        };
        if ok {
            unwrap_cast(e);
        }
    }

    /// Normalizes the operands of `e` (children first).
    fn expr(&mut self, e: &mut Expr) {
        match &mut e.kind {
            ExprKind::Int(_) | ExprKind::Float(_) | ExprKind::Bool(_) | ExprKind::Var(_) => {}
            ExprKind::Load { indices, .. } => {
                for i in indices {
                    self.root(i, Use::AsIs);
                }
            }
            ExprKind::Unary(UnOp::Neg, a) => {
                self.expr(a);
                if let Some(folded) = negated(a, &self.marks) {
                    self.marks.insert((e.span.start, e.span.end));
                    *e = Expr::new(folded, e.span);
                }
            }
            ExprKind::Unary(_, a) | ExprKind::Cast(_, a) | ExprKind::Reinterpret(_, a) => {
                self.expr(a)
            }
            ExprKind::Binary(op, a, b) => {
                self.expr(a);
                self.expr(b);
                if !op.is_logical() {
                    self.operand_pair(a, b);
                }
            }
            ExprKind::Select(c, a, b) => {
                self.root(c, Use::AsIs);
                self.expr(a);
                self.expr(b);
                self.operand_pair(a, b);
            }
            ExprKind::Math(_, args) => match args.as_mut_slice() {
                [a, b] => {
                    self.expr(a);
                    self.expr(b);
                    self.operand_pair(a, b);
                }
                // `T.fma(a, b, c)`: its arguments convert to their common type, as a binary
                // operator's do — a typed literal next to a non-literal of its dtype.
                args if args.len() >= 3 => {
                    for a in args.iter_mut() {
                        self.expr(a);
                    }
                    for i in 0..args.len() {
                        let beside = (0..args.len())
                            .filter(|&j| j != i)
                            .any(|j| self.replaceable_next_to(&args[i], &args[j]));
                        if beside {
                            unwrap_cast(&mut args[i]);
                        }
                    }
                }
                args => {
                    for a in args {
                        self.root(a, Use::AsIs);
                    }
                }
            },
        }
    }

    /// Two operands that are converted to their common type: a typed literal next to a
    /// non-literal of its dtype becomes the bare literal.
    fn operand_pair(&self, a: &mut Expr, b: &mut Expr) {
        if self.replaceable_next_to(a, b) {
            unwrap_cast(a);
        } else if self.replaceable_next_to(b, a) {
            unwrap_cast(b);
        }
    }

    fn replaceable_next_to(&self, e: &Expr, other: &Expr) -> bool {
        let Some((dt, lit)) = typed_literal(e, &self.marks) else {
            return false;
        };
        adopts(lit, dt)
            && self
                .infer(other)
                .is_some_and(|t| !t.weak && t.dtype == dt && !matches!(t.dtype, DType::Bool))
    }

    fn infer(&self, e: &Expr) -> Option<types::Typed> {
        let var = |n: &str| self.vars.get(n).copied();
        let buffer = |n: &str| self.buffers.get(n).copied();
        types::infer(e, &var, &buffer).ok()
    }
}

/// `e` as a recorded typed literal: its dtype and the literal.
fn typed_literal<'e>(e: &'e Expr, marks: &HashSet<(usize, usize)>) -> Option<(DType, &'e Expr)> {
    match &e.kind {
        ExprKind::Cast(dt, lit)
            if matches!(lit.kind, ExprKind::Int(_) | ExprKind::Float(_))
                && marks.contains(&(e.span.start, e.span.end)) =>
        {
            Some((*dt, lit))
        }
        _ => None,
    }
}

/// `-T.float32(x)` (`-T.infinity(...)`) as the typed literal `T.float32(-x)`: negation is
/// exact and commutes with rounding to nearest and with integer wrap-around.
fn negated(e: &Expr, marks: &HashSet<(usize, usize)>) -> Option<ExprKind> {
    let (dt, lit) = typed_literal(e, marks)?;
    let lit = match lit.kind {
        ExprKind::Float(v) => ExprKind::Float(-v),
        ExprKind::Int(v) => ExprKind::Int(v.checked_neg()?),
        _ => return None,
    };
    Some(ExprKind::Cast(dt, Box::new(Expr::new(lit, e.span))))
}

/// Whether the bare literal, converted to `dt` where it meets a `dt` value, has the value the
/// cast gives: a float literal to a float dtype, an integer literal to a float dtype or to an
/// integer dtype that holds it.
fn adopts(lit: &Expr, dt: DType) -> bool {
    match lit.kind {
        ExprKind::Float(_) => dt.is_float(),
        ExprKind::Int(v) => dt.is_float() || dt.holds_int(v),
        _ => false,
    }
}

/// The dtype a bare literal has on its own.
fn own_dtype(lit: &Expr) -> Option<DType> {
    match lit.kind {
        ExprKind::Float(_) => Some(DType::Float32),
        ExprKind::Int(v) => Some(int_literal_dtype(v)),
        _ => None,
    }
}

/// Replaces the cast `e` by its literal, keeping the literal's span.
fn unwrap_cast(e: &mut Expr) {
    if let ExprKind::Cast(_, lit) = &mut e.kind {
        let lit = std::mem::replace(lit.as_mut(), Expr::int(0));
        *e = Expr::new(lit.kind, e.span);
    }
}
