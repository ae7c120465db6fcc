//! `widen-indices`: int32 index arithmetic that may leave the int32 range is rewritten to
//! int64, so no index ever wraps. The IR's int32 arithmetic is exact (docs/ir.md, "Integer
//! semantics": values wrap only when converted), and code generation computes an int32
//! expression in 32-bit registers: this pass makes the width explicit where 32 bits are not
//! enough, and leaves every provably small computation as it is (the GEMMs' index math
//! stays 32-bit).
//!
//! Bottom-up over each expression: an int32 arithmetic node (`+ - * // % ceildiv min max`,
//! `/`, unary `-`) whose value may leave int32 — its interval under the analysis floor's
//! facts (symbolic dims in `[1, 2^31 - 1]`, block variables below their grid, loop
//! variables in their bounds, lets in their value's range) reaches the int32 limits —
//! becomes the same operation on `T.cast(x, "int64")` operands (literals stay literals and
//! adopt int64). Its parents then type as int64 by the typing rules and compute in 64 bits;
//! a let whose value became int64 binds an int64 variable. The rewrite is exact: every
//! operand it casts is an int32 value that fits, and int64 arithmetic of int32-sized
//! operands does not overflow for the products and sums index math builds.
//!
//! Requires the thread level (it runs last, after `simplify`, so the simplifier never sees
//! the casts).

use crate::analysis::int::{self, enter_kernel, enter_loop, Ranges};
use crate::context::PassContext;
use crate::pass::Pass;
use std::collections::HashMap;
use tlc_ir::types::infer;
use tlc_ir::verifier::Level;
use tlc_ir::visit::map_expr;
use tlc_ir::{DType, Diagnostic, Expr, ExprKind, PrimFunc, Stmt, StmtKind, UnOp};

pub struct WidenIndices;

impl Pass for WidenIndices {
    fn name(&self) -> &'static str {
        "widen-indices"
    }

    fn description(&self) -> &'static str {
        "int32 index arithmetic that may leave int32 (large shapes, symbolic dims) -> int64; provably small math stays int32"
    }

    fn requires(&self) -> Level {
        Level::Thread
    }

    fn run(&self, mut func: PrimFunc, cx: &PassContext) -> Result<PrimFunc, Vec<Diagnostic>> {
        let info = cx.func_info(&func)?;
        let mut w = Widen {
            ranges: int::dim_ranges(&func),
            vars: info.vars.clone().into_iter().collect(),
            buffers: info
                .buffers
                .iter()
                .map(|(n, b)| (n.clone(), b.dtype))
                .collect(),
        };
        drop(info);
        w.body(&mut func.body);
        Ok(func)
    }
}

/// What the walk knows: the ranges of the variables in scope and every name's dtype (names
/// are unique, so no scoping is needed; a let that becomes int64 updates its entry).
struct Widen {
    ranges: Ranges,
    vars: HashMap<String, DType>,
    buffers: HashMap<String, DType>,
}

/// The walk's facts as an interval environment: the variables' ranges, and a load's values
/// within its buffer's dtype (`256 - A[i]` on an int8 `A` stays within int32).
struct Known<'a>(&'a Widen);

impl int::Env for Known<'_> {
    fn range(&self, name: &str) -> Option<tlc_ir::interval::Interval> {
        self.0.ranges.get(name).copied()
    }

    fn buffer_dtype(&self, name: &str) -> Option<DType> {
        self.0.buffers.get(name).copied()
    }
}

impl Widen {
    fn body(&mut self, body: &mut [Stmt]) {
        for stmt in body {
            self.stmt(stmt);
        }
    }

    fn stmt(&mut self, stmt: &mut Stmt) {
        match &mut stmt.kind {
            StmtKind::Kernel(k) => {
                enter_kernel(&mut self.ranges, k);
                self.body(&mut k.body);
            }
            StmtKind::For(f) => {
                f.start = self.expr(&f.start);
                f.stop = self.expr(&f.stop);
                enter_loop(&mut self.ranges, f);
                self.body(&mut f.body);
            }
            StmtKind::If {
                cond,
                then_body,
                else_body,
            } => {
                *cond = self.expr(cond);
                self.body(then_body);
                self.body(else_body);
            }
            StmtKind::While { cond, body } => {
                *cond = self.expr(cond);
                self.body(body);
            }
            StmtKind::Let { var, dtype, value } => {
                *value = self.expr(value);
                let d = self.dtype(value);
                let r = int::interval(value, &Known(self));
                // A let declared `T.int32` converts its value, wrapping one that leaves int32
                // (docs/ir.md, "Let"): it is widened only where the value provably fits, and
                // otherwise keeps its declared conversion of the (now exact int64) value.
                let keeps_wrap = *dtype == Some(DType::Int32) && !r.fits_i32();
                if d == Some(DType::Int64)
                    && self.vars.get(&var.name) == Some(&DType::Int32)
                    && !keeps_wrap
                {
                    // The value is exact in int64; an int32 let holds it without conversion.
                    self.vars.insert(var.name.clone(), DType::Int64);
                    if *dtype == Some(DType::Int32) {
                        *dtype = Some(DType::Int64);
                    }
                }
                if keeps_wrap {
                    self.ranges
                        .insert(var.name.clone(), tlc_ir::interval::Interval::INT32);
                } else if matches!(d, Some(DType::Int32 | DType::Int64)) {
                    self.ranges.insert(var.name.clone(), r);
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
            StmtKind::Intrinsic(i) => {
                for e in i.exprs_mut() {
                    *e = self.expr(e);
                }
            }
            // Thread level (`requires`): no tile ops.
            StmtKind::Copy { .. }
            | StmtKind::Fill { .. }
            | StmtKind::Gemm(_)
            | StmtKind::Reduce(_) => {}
            StmtKind::Barrier
            | StmtKind::GridSync
            | StmtKind::Note(_)
            | StmtKind::Fresh(_)
            | StmtKind::FinalizeReducer(_) => {}
        }
    }

    fn dtype(&self, e: &Expr) -> Option<DType> {
        let var = |n: &str| self.vars.get(n).copied();
        let buf = |n: &str| self.buffers.get(n).copied();
        infer(e, &var, &buf).ok().map(|t| t.dtype)
    }

    /// `e` with every int32 arithmetic node that may overflow computed in int64.
    ///
    /// Bit operators (`& | ^ << >>`) on int32 read their operands' 32 bits (docs/ir.md): an
    /// operand that is int32 arithmetic whose value may leave int32 gets an explicit
    /// `T.cast(…, "int32")` first, so that when it is widened below, the bit operator still
    /// sees the wrapped value (and stays int32).
    fn expr(&self, e: &Expr) -> Expr {
        let e = self.pin_bit_operands(e);
        map_expr(&e, &mut |node| {
            // A narrowing over a narrowing (a second run over its own output) is one.
            if let ExprKind::Cast(DType::Int32, inner) = &node.kind {
                if matches!(inner.kind, ExprKind::Cast(DType::Int32, _)) {
                    return (**inner).clone();
                }
            }
            if self.narrows(&node) {
                let span = node.span;
                return Expr::new(ExprKind::Cast(DType::Int32, Box::new(node)), span);
            }
            if !self.may_overflow(&node) {
                return node;
            }
            let span = node.span;
            let wide = |x: Expr| match x.kind {
                ExprKind::Int(_) => x,
                _ => {
                    let s = x.span;
                    Expr::new(ExprKind::Cast(DType::Int64, Box::new(x)), s)
                }
            };
            let kind = match node.kind {
                ExprKind::Binary(op, a, b) => {
                    ExprKind::Binary(op, Box::new(wide(*a)), Box::new(wide(*b)))
                }
                ExprKind::Unary(UnOp::Neg, a) => ExprKind::Unary(UnOp::Neg, Box::new(wide(*a))),
                other => other,
            };
            Expr::new(kind, span)
        })
    }

    /// Wraps the operands of int32 bit operators (and of `T.reinterpret` of an int32) whose
    /// value may leave int32 in `T.cast(…, "int32")`.
    fn pin_bit_operands(&self, e: &Expr) -> Expr {
        // Only arithmetic can be widened (loads, casts and bit operators keep their width).
        let widenable = |x: &Expr| match &x.kind {
            ExprKind::Binary(op, _, _) => {
                !op.is_comparison() && !op.is_logical() && !op.is_bitwise()
            }
            ExprKind::Unary(UnOp::Neg, _) => true,
            _ => false,
        };
        let pinned = |x: Box<Expr>| -> Box<Expr> {
            match x.kind {
                _ if !widenable(&x) || int::interval(&x, &Known(self)).fits_i32() => x,
                _ => {
                    let span = x.span;
                    Box::new(Expr::new(ExprKind::Cast(DType::Int32, x), span))
                }
            }
        };
        // `T.reinterpret` of an int32 reads its 32 bits too.
        let bit_int32 = |node: &Expr| match &node.kind {
            ExprKind::Binary(op, _, _) => op.is_bitwise() && self.dtype(node) == Some(DType::Int32),
            ExprKind::Unary(UnOp::BitNot, _) => self.dtype(node) == Some(DType::Int32),
            ExprKind::Reinterpret(_, a) => self.dtype(a) == Some(DType::Int32),
            _ => false,
        };
        map_expr(e, &mut |node| {
            if !bit_int32(&node) {
                return node;
            }
            let span = node.span;
            let kind = match node.kind {
                ExprKind::Binary(op, a, b) => ExprKind::Binary(op, pinned(a), pinned(b)),
                ExprKind::Unary(op, a) => ExprKind::Unary(op, pinned(a)),
                ExprKind::Reinterpret(d, a) => ExprKind::Reinterpret(d, pinned(a)),
                other => other,
            };
            Expr::new(kind, span)
        })
    }

    /// Whether `node` is int64 arithmetic over widened operands whose value provably fits
    /// int32 (`(bx + by * W) % P`: the sum needs 64 bits, the remainder does not): it is
    /// narrowed back, exactly, so the 64-bit math stays local.
    fn narrows(&self, node: &Expr) -> bool {
        let widened = |x: &Expr| matches!(x.kind, ExprKind::Cast(DType::Int64, _));
        let over_widened = match &node.kind {
            ExprKind::Binary(op, a, b)
                if !op.is_comparison() && !op.is_logical() && !op.is_bitwise() =>
            {
                widened(a) || widened(b) || self.dtype(a) == Some(DType::Int64)
            }
            _ => false,
        };
        if !over_widened || self.dtype(node) != Some(DType::Int64) {
            return false;
        }
        int::interval(node, &Known(self)).fits_i32()
    }

    /// Whether `node` is int32 arithmetic whose value may leave int32 (its children are
    /// already final: a child that was widened makes `node` int64, not int32).
    fn may_overflow(&self, node: &Expr) -> bool {
        // Bit operators' results always fit their dtype: never widened.
        let arithmetic = match &node.kind {
            ExprKind::Binary(op, _, _) => {
                !op.is_comparison() && !op.is_logical() && !op.is_bitwise()
            }
            ExprKind::Unary(UnOp::Neg, _) => true,
            _ => false,
        };
        if !arithmetic || self.dtype(node) != Some(DType::Int32) {
            return false;
        }
        // `/` (truncating) has no interval rule: FULL, so it is widened unless constant.
        !int::interval(node, &Known(self)).fits_i32()
    }
}
