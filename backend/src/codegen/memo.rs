//! Scoped value numbering of index math: a pure integer or boolean expression (no loads)
//! that was already computed into a register on a path that dominates this one is not
//! emitted again. The tile passes spell every address out in full (`ko % 3`, swizzle bits
//! of `tx`), so the same subexpressions recur dozens of times per loop body; ptxas does not
//! reliably merge them.
//!
//! Keys name registers, not variables, so a rebound name never hits a stale entry. An
//! entry lives until the end of the statement list (`Cg::body`) or the conditionally run
//! expression arm it was made in: every register it refers to is then still defined and
//! unchanged (loop counters change only after their body's scope has closed; lets get a
//! fresh register each).

use super::{Bind, Cg};
use crate::ptx::Reg;
use std::fmt::Write;
use tlc_ir::{DType, Expr, ExprKind};

impl Cg {
    /// Runs `f` in a scope of its own: entries it makes are forgotten afterwards.
    pub(super) fn scoped<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> T {
        let mark = self.memo_log.len();
        let out = f(self);
        let made: Vec<String> = self.memo_log.drain(mark..).collect();
        for key in made {
            self.memo.remove(&key);
        }
        out
    }

    /// The key of `e` evaluated as `d`, when `e` may be value-numbered: integer or boolean
    /// results of variables and literals, with no memory read.
    pub(super) fn memo_key(&self, e: &Expr, d: DType) -> Option<String> {
        if !(d.is_int() || d == DType::Bool) {
            return None;
        }
        let mut key = format!("{d}:");
        self.write_key(e, &mut key)?;
        Some(key)
    }

    fn write_key(&self, e: &Expr, out: &mut String) -> Option<()> {
        match &e.kind {
            ExprKind::Int(v) => write!(out, "{v}").ok()?,
            ExprKind::Bool(v) => write!(out, "{v}").ok()?,
            ExprKind::Float(v) => write!(out, "f{:x}", v.to_bits()).ok()?,
            ExprKind::Var(n) => match self.vars.get(n)? {
                Bind::Reg(r, d) => write!(out, "{r}:{d}").ok()?,
                Bind::Const(c) => write!(out, "{c}").ok()?,
            },
            ExprKind::Load { .. } => return None,
            ExprKind::Cast(d, a) => {
                write!(out, "cast<{d}>(").ok()?;
                self.write_key(a, out)?;
                out.push(')');
            }
            ExprKind::Reinterpret(d, a) => {
                write!(out, "bits<{d}>(").ok()?;
                self.write_key(a, out)?;
                out.push(')');
            }
            ExprKind::Unary(op, a) => {
                write!(out, "{op:?}(").ok()?;
                self.write_key(a, out)?;
                out.push(')');
            }
            ExprKind::Binary(op, a, b) => {
                write!(out, "{op:?}(").ok()?;
                self.write_key(a, out)?;
                out.push(',');
                self.write_key(b, out)?;
                out.push(')');
            }
            ExprKind::Math(f, args) => {
                write!(out, "{f:?}(").ok()?;
                for a in args {
                    self.write_key(a, out)?;
                    out.push(',');
                }
                out.push(')');
            }
            ExprKind::Select(c, a, b) => {
                out.push_str("sel(");
                self.write_key(c, out)?;
                out.push(',');
                self.write_key(a, out)?;
                out.push(',');
                self.write_key(b, out)?;
                out.push(')');
            }
        }
        Some(())
    }

    pub(super) fn memo_get(&self, key: &str) -> Option<Reg> {
        self.memo.get(key).copied()
    }

    pub(super) fn memo_put(&mut self, key: String, r: Reg) {
        if self.memo.insert(key.clone(), r).is_none() {
            self.memo_log.push(key);
        }
    }
}
