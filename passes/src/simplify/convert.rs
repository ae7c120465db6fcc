//! Between IR expressions and e-graph terms. An int32 arithmetic tree becomes a `RecExpr`;
//! what the language cannot see into (loads, casts, selects, truncating `/`, other dtypes)
//! becomes an opaque symbol `$k` that is put back unchanged after extraction.

use super::lang::Index;
use egg::{Id, RecExpr, Symbol};
use tlc_ir::{BinOp, Expr, ExprKind, Span, UnOp};

/// The binary operators of the language.
pub fn is_index_op(op: BinOp) -> bool {
    matches!(
        op,
        BinOp::Add
            | BinOp::Sub
            | BinOp::Mul
            | BinOp::FloorDiv
            | BinOp::FloorMod
            | BinOp::CeilDiv
            | BinOp::Min
            | BinOp::Max
    )
}

/// A term under construction, with its opaque parts.
#[derive(Default)]
pub struct Term {
    pub expr: RecExpr<Index>,
    pub atoms: Vec<Expr>,
}

impl Term {
    /// Adds `e`; `is_int32(e)` says whether a subexpression is an int32 value the language
    /// may look into (everything else is opaque).
    pub fn add(&mut self, e: &Expr, is_int32: &dyn Fn(&Expr) -> bool) -> Id {
        let see_into = is_int32(e);
        let node = match &e.kind {
            ExprKind::Int(v) if i32::try_from(*v).is_ok() => Index::Num(*v),
            ExprKind::Var(name) if see_into => Index::Symbol(Symbol::from(name.as_str())),
            ExprKind::Unary(UnOp::Neg, a) if see_into => Index::Neg(self.add(a, is_int32)),
            ExprKind::Binary(op, a, b) if see_into => {
                let make: fn([Id; 2]) -> Index = match op {
                    BinOp::Add => Index::Add,
                    BinOp::Sub => Index::Sub,
                    BinOp::Mul => Index::Mul,
                    BinOp::FloorDiv => Index::Div,
                    BinOp::FloorMod => Index::Mod,
                    BinOp::CeilDiv => Index::CeilDiv,
                    BinOp::Min => Index::Min,
                    BinOp::Max => Index::Max,
                    _ => return self.atom(e),
                };
                let children = [self.add(a, is_int32), self.add(b, is_int32)];
                make(children)
            }
            _ => return self.atom(e),
        };
        self.expr.add(node)
    }

    fn atom(&mut self, e: &Expr) -> Id {
        let name = format!("${}", self.atoms.len());
        self.atoms.push(e.clone());
        self.expr.add(Index::Symbol(Symbol::from(name)))
    }
}

/// Number of operators in a term (for metrics and for "did it get smaller").
pub fn op_count(expr: &RecExpr<Index>) -> usize {
    expr.as_ref()
        .iter()
        .filter(|n| !matches!(n, Index::Num(_) | Index::Symbol(_)))
        .count()
}

/// The IR expression of the term rooted at the last node of `expr`, opaque symbols replaced
/// by `atoms`. `x + -c` prints as `x - c` and `x * -1` as `-x`.
pub fn to_ir(expr: &RecExpr<Index>, atoms: &[Expr]) -> Option<Expr> {
    let nodes = expr.as_ref();
    let mut built: Vec<Expr> = Vec::with_capacity(nodes.len());
    for node in nodes {
        let get = |id: &Id| built.get(usize::from(*id)).cloned();
        let e = match node {
            Index::Num(v) => Expr::int(*v),
            Index::Symbol(s) => match s.as_str().strip_prefix('$') {
                Some(k) => atoms.get(k.parse::<usize>().ok()?)?.clone(),
                None => Expr::var(s.as_str()),
            },
            Index::Neg(a) => neg(get(a)?),
            Index::Add([a, b]) => {
                let (a, b) = (get(a)?, get(b)?);
                match b.as_int() {
                    Some(c) if c < 0 && c != i64::MIN => bin(BinOp::Sub, a, Expr::int(-c)),
                    _ => match b.kind {
                        ExprKind::Unary(UnOp::Neg, inner) => bin(BinOp::Sub, a, *inner),
                        _ => bin(BinOp::Add, a, b),
                    },
                }
            }
            Index::Mul([a, b]) => {
                let (a, b) = (get(a)?, get(b)?);
                if b.as_int() == Some(-1) {
                    neg(a)
                } else {
                    bin(BinOp::Mul, a, b)
                }
            }
            Index::Sub([a, b]) => bin(BinOp::Sub, get(a)?, get(b)?),
            Index::Div([a, b]) => bin(BinOp::FloorDiv, get(a)?, get(b)?),
            Index::Mod([a, b]) => bin(BinOp::FloorMod, get(a)?, get(b)?),
            Index::CeilDiv([a, b]) => bin(BinOp::CeilDiv, get(a)?, get(b)?),
            Index::Min([a, b]) => bin(BinOp::Min, get(a)?, get(b)?),
            Index::Max([a, b]) => bin(BinOp::Max, get(a)?, get(b)?),
        };
        built.push(e);
    }
    built.pop()
}

fn bin(op: BinOp, a: Expr, b: Expr) -> Expr {
    Expr::binary(op, a, b, Span::DUMMY)
}

fn neg(a: Expr) -> Expr {
    match a.as_int().and_then(i64::checked_neg) {
        Some(v) => Expr::int(v),
        None => Expr::new(ExprKind::Unary(UnOp::Neg, Box::new(a)), Span::DUMMY),
    }
}
