//! Replacing scalar names by constants without changing any value: binding a symbolic dim
//! (`-D M=4096`) and dropping a unit grid axis (its block variable becomes 0).
//!
//! A name is typed and a bare literal is not (docs/ir.md, "Typing"): `M - A[i]` subtracts in
//! int32 with the int32 dim `M` and in A's dtype with `4` — an int8 `A[i] = -128` gives 132
//! and -124. So each statement is checked: where every expression it holds types alike both
//! ways ([`literals_keep_meaning`]) the names become literals and the arithmetic folds (the
//! kernel reads as if written with the numbers in place); elsewhere they become typed
//! constants, `T.cast(4, "int32")`, which mean what the names meant.
//!
//! "Alike" is checked node by node with the typing rules of `types.rs`, the names typed as
//! declared on one side and as untyped literals on the other. Two dtypes agree when they are
//! equal or both are int32 / int64 — the IR's int32 arithmetic is exact, so such nodes
//! compute the same numbers — except where the width shows: under a bitwise operator or a
//! math function, beside a uint32 (`int32 + uint32` is int32, `int64 + uint32` int64), at
//! the value of a let without a declared dtype (it sets the let's type), and at an
//! intrinsic's operand (equal dtype and weakness). Folding is modelled: a folded
//! node is a literal typed by its value (`65536 * 65536` is an int64 literal, rule T1, where
//! `M * M` is int32). A value the name's dtype cannot hold (`-D N=3000000000` on an int32
//! dim) becomes an int64 constant where it cannot be a literal.

use crate::dtype::DType;
use crate::ir::{fold_int, BufferDecl, Expr, ExprKind, Kernel, PrimFunc, Stmt, StmtKind, UnOp};
use crate::types::{self, Typed};
use crate::visit::{child_bodies_mut, map_stmt_exprs, mentions, stmt_exprs};

/// The scalar names and buffers in scope with their types, as a walk meets them. An unknown
/// name (a let whose value cannot be typed) is absent, and nothing about it is proven.
#[derive(Clone, Debug, Default)]
pub struct Scope {
    vars: Vec<(String, Typed)>,
    buffers: Vec<(String, DType)>,
}

impl Scope {
    /// The function-level scope: its dims, its parameters, and its tunables not bound yet
    /// (untyped literals once bound).
    pub fn of(func: &PrimFunc) -> Scope {
        let mut scope = Scope::default();
        for d in &func.dims {
            scope.vars.push((d.name.clone(), Typed::strong(d.dtype)));
        }
        for name in func.space.names() {
            let weak = Typed {
                dtype: DType::Int32,
                weak: true,
            };
            scope.vars.push((name.to_string(), weak));
        }
        scope.declare(&func.params);
        scope
    }

    fn var(&self, name: &str) -> Option<Typed> {
        self.vars.iter().rev().find(|(n, _)| n == name).map(|v| v.1)
    }

    fn buffer(&self, name: &str) -> Option<DType> {
        self.buffers
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|b| b.1)
    }

    fn declare(&mut self, decls: &[BufferDecl]) {
        self.buffers
            .extend(decls.iter().map(|d| (d.name.name.clone(), d.dtype)));
    }

    pub(crate) fn mark(&self) -> (usize, usize) {
        (self.vars.len(), self.buffers.len())
    }

    pub(crate) fn restore(&mut self, (vars, buffers): (usize, usize)) {
        self.vars.truncate(vars);
        self.buffers.truncate(buffers);
    }

    /// Puts in scope a kernel's block variables and allocations.
    pub fn enter_kernel(&mut self, k: &Kernel) {
        for v in &k.block_vars {
            self.vars
                .push((v.name.clone(), Typed::strong(DType::Int32)));
        }
        self.declare(&k.allocs);
    }

    /// Puts in scope what `stmt` binds for its bodies and the statements after it: a
    /// kernel's block variables and allocations, a loop variable, a let.
    pub fn enter(&mut self, stmt: &Stmt) {
        let int32 = Typed::strong(DType::Int32);
        match &stmt.kind {
            StmtKind::Kernel(k) => self.enter_kernel(k),
            StmtKind::For(f) => self.vars.push((f.var.name.clone(), int32)),
            StmtKind::Let { var, dtype, value } => {
                let t = match dtype {
                    Some(d) => Some(Typed::strong(*d)),
                    None => typed_pair(value, &[], self).map(|(t, _, _)| Typed::strong(t.dtype)),
                };
                if let Some(t) = t {
                    self.vars.push((var.name.clone(), t));
                }
            }
            _ => {}
        }
    }
}

/// Replaces the names of `values` in `body` (and its nested bodies): by untyped literals,
/// folding again, in each statement whose expressions mean the same with them; by typed
/// constants (`T.cast(value, dtype)`) in the others. `scope` is the scope `body` starts in.
pub fn substitute(body: &mut [Stmt], values: &[(String, i64)], scope: &mut Scope) {
    let mark = scope.mark();
    for s in body.iter_mut() {
        let named: Vec<(&str, i64)> = values
            .iter()
            .filter(|(n, _)| stmt_exprs(s).iter().any(|e| mentions(e, n)))
            .map(|(n, v)| (n.as_str(), *v))
            .collect();
        if !named.is_empty() {
            let literal = literals_keep_meaning(s, &named, scope);
            let mut typed: Vec<(&str, i64, DType)> = Vec::new();
            if !literal {
                for &(n, v) in &named {
                    // The name's dtype; a value it cannot hold (`-D N=3000000000` on an
                    // int32 dim: any size is allowed) is an int64, exact as the IR's int32
                    // arithmetic is.
                    let dtype = match scope.var(n) {
                        Some(t) if !t.weak && t.dtype.holds_int(v) => t.dtype,
                        _ => DType::Int64,
                    };
                    typed.push((n, v, dtype));
                }
            }
            map_stmt_exprs(s, &mut |e| replace_node(e, &named, &typed));
        }
        scope.enter(s);
        for child in child_bodies_mut(s) {
            substitute(child, values, scope);
        }
    }
    scope.restore(mark);
}

/// One node, rebuilt bottom-up: a name of `typed` becomes `T.cast(value, dtype)`, any other
/// name of `named` its literal, and integer arithmetic on literals folds.
fn replace_node(e: Expr, named: &[(&str, i64)], typed: &[(&str, i64, DType)]) -> Expr {
    if let ExprKind::Var(n) = &e.kind {
        if let Some(&(_, v, dtype)) = typed.iter().find(|t| t.0 == n) {
            let value = Expr::new(ExprKind::Int(v), e.span);
            return Expr::new(ExprKind::Cast(dtype, Box::new(value)), e.span);
        }
    }
    let literal = |n: &str| {
        named
            .iter()
            .find(|(m, _)| *m == n && !typed.iter().any(|t| t.0 == n))
            .map(|(_, v)| *v)
    };
    crate::specialize::refold(e, &literal)
}

/// Whether every expression `stmt` holds directly types alike with the `named` names as
/// untyped literals, folded (see the module's summary).
pub fn literals_keep_meaning(stmt: &Stmt, named: &[(&str, i64)], scope: &Scope) -> bool {
    let root = match &stmt.kind {
        StmtKind::Intrinsic(_) => Root::Operand,
        StmtKind::Let { dtype: None, .. } => Root::LetValue,
        _ => Root::Converted,
    };
    stmt_exprs(stmt).into_iter().all(|e| {
        if !named.iter().any(|(n, _)| mentions(e, n)) {
            return true;
        }
        let Some((written, literal, _)) = typed_pair(e, named, scope) else {
            return false;
        };
        match root {
            Root::Converted => true,
            Root::LetValue => written.dtype == literal.dtype,
            Root::Operand => written == literal,
        }
    })
}

/// Where an expression's value goes, which decides how much of its root type matters.
#[derive(Clone, Copy)]
enum Root {
    /// An index, a bound, a size, a condition, a value converted to a buffer's or a
    /// declared let's dtype: only the value.
    Converted,
    /// The value of a let without a declared dtype: its dtype too.
    LetValue,
    /// An intrinsic's operand: its dtype and whether it is a literal.
    Operand,
}

/// The types of `e` as written and with the `named` names as untyped literals, when every
/// node agrees (module summary; `None` where one does not, or a name or buffer is unknown,
/// or `e` does not type), with the value the literal side folds to where it is a constant.
/// Folding is modelled as `refold` does it (`Expr::binary` folds integer arithmetic on two
/// literals): a folded node is a new literal, typed by its value (`65536 * 65536` is an
/// int64 literal, where `M * M` is int32).
fn typed_pair(
    e: &Expr,
    named: &[(&str, i64)],
    scope: &Scope,
) -> Option<(Typed, Typed, Option<i64>)> {
    let literal_of = |v: i64| Typed {
        dtype: types::int_literal_dtype(v),
        weak: true,
    };
    let both = |t: Typed| Some((t, t, None));
    let sub = |x: &Expr| typed_pair(x, named, scope);
    let triple = match &e.kind {
        ExprKind::Int(v) => Some((literal_of(*v), literal_of(*v), Some(*v))),
        ExprKind::Float(_) => both(Typed {
            dtype: DType::Float32,
            weak: true,
        }),
        ExprKind::Bool(_) => both(Typed::strong(DType::Bool)),
        ExprKind::Var(n) => {
            let written = scope.var(n)?;
            match named.iter().find(|(m, _)| m == n) {
                Some(&(_, v)) => Some((written, literal_of(v), Some(v))),
                None => both(written),
            }
        }
        ExprKind::Load { buffer, indices } => {
            for i in indices {
                sub(i)?;
            }
            both(Typed::strong(scope.buffer(buffer)?))
        }
        ExprKind::Unary(op, a) => {
            let (x, y, v) = sub(a)?;
            if *op == UnOp::BitNot && x.dtype != y.dtype {
                return None;
            }
            let written = types::unary_result(*op, x).ok()?;
            // `refold` folds a negated literal (the parser reads `-4` as one literal).
            match v.filter(|_| *op == UnOp::Neg).and_then(i64::checked_neg) {
                Some(v) => Some((written, literal_of(v), Some(v))),
                None => Some((written, types::unary_result(*op, y).ok()?, None)),
            }
        }
        ExprKind::Binary(op, a, b) => {
            let (xa, ya, va) = sub(a)?;
            let (xb, yb, vb) = sub(b)?;
            if op.is_bitwise() && (xa.dtype != ya.dtype || xb.dtype != yb.dtype) {
                return None;
            }
            if widths_show(&[(xa, ya), (xb, yb)]) {
                return None;
            }
            // A comparison's operands are converted to their common dtype first: that must
            // agree too (`A[i] < bz + 200` compares in int32; `A[i] < 200` in int8).
            if op.is_comparison() {
                let x = types::comparison_dtype(xa, xb).ok()?;
                let y = types::comparison_dtype(ya, yb).ok()?;
                if !agree(x, y) {
                    return None;
                }
            }
            let written = types::binary_result(*op, xa, xb).ok()?;
            match va.zip(vb).and_then(|(x, y)| fold_int(*op, x, y)) {
                Some(v) => Some((written, literal_of(v), Some(v))),
                None => Some((written, types::binary_result(*op, ya, yb).ok()?, None)),
            }
        }
        ExprKind::Cast(dtype, a) => {
            sub(a)?;
            both(Typed::strong(*dtype))
        }
        // The bits of the operand: its dtype must not change with the literal.
        ExprKind::Reinterpret(dtype, a) => {
            let (x, y, _) = sub(a)?;
            if x.dtype != y.dtype {
                return None;
            }
            both(Typed::strong(*dtype))
        }
        ExprKind::Select(c, a, b) => {
            sub(c)?;
            let (xa, ya, _) = sub(a)?;
            let (xb, yb, _) = sub(b)?;
            if widths_show(&[(xa, ya), (xb, yb)]) {
                return None;
            }
            let side = |p: Typed, q: Typed| match p.dtype.is_bool() && q.dtype.is_bool() {
                true => Some(Typed::strong(DType::Bool)),
                false => types::unify(p, q).ok(),
            };
            Some((side(xa, xb)?, side(ya, yb)?, None))
        }
        ExprKind::Math(f, args) => {
            let mut written = Vec::with_capacity(args.len());
            let mut literal = Vec::with_capacity(args.len());
            for a in args {
                let (x, y, _) = sub(a)?;
                if x.dtype != y.dtype {
                    return None;
                }
                written.push(x);
                literal.push(y);
            }
            Some((
                types::math_result(*f, &written).ok()?,
                types::math_result(*f, &literal).ok()?,
                None,
            ))
        }
    }?;
    agree(triple.0.dtype, triple.1.dtype).then_some(triple)
}

/// Whether an operator over these operands (each as written and with literals) shows the
/// width of an int32 / int64 difference: an unsigned operand as wide as int32 takes the
/// signed one of equal width (`int32 + uint32` is int32, wrapping a uint32 past 2^31) but
/// not the wider (`int64 + uint32` keeps it).
fn widths_show(operands: &[(Typed, Typed)]) -> bool {
    let differ = operands.iter().any(|(x, y)| x.dtype != y.dtype);
    let unsigned = operands
        .iter()
        .any(|(x, y)| x.dtype == DType::UInt32 || y.dtype == DType::UInt32);
    differ && unsigned
}

/// Whether two dtypes of one node compute the same values: equal, or int32 and int64 (the
/// IR's int32 arithmetic is exact; where the width shows, the callers ask for equality).
fn agree(a: DType, b: DType) -> bool {
    a == b
        || matches!(
            (a, b),
            (DType::Int32, DType::Int64) | (DType::Int64, DType::Int32)
        )
}

#[cfg(test)]
mod tests {
    use super::agree;
    use crate::dtype::DType;

    #[test]
    fn only_int32_and_int64_agree_across_dtypes() {
        assert!(agree(DType::Int32, DType::Int64));
        assert!(agree(DType::Float16, DType::Float16));
        assert!(!agree(DType::Int32, DType::Int8));
        assert!(!agree(DType::Float32, DType::Float16));
        assert!(!agree(DType::Int32, DType::UInt32));
    }
}
