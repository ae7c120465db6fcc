//! The surface syntax tree: Python-subset statements and expressions exactly as written,
//! before any TileLang meaning is given to them (that is `lower*.rs`'s job).
//!
//! Every node keeps its span. Expressions record their depth, and the grammar rejects trees
//! deeper than [`MAX_EXPR_DEPTH`], so recursive walks over them cannot overflow the stack.

use crate::span::Span;

/// Deepest expression tree the grammar builds.
pub const MAX_EXPR_DEPTH: u32 = 200;

#[derive(Clone, Debug, PartialEq)]
pub struct Ident {
    pub name: String,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Stmt {
    pub kind: StmtKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum StmtKind {
    /// `@dec ... def name(params) -> ret: body`.
    FuncDef(FuncDef),
    /// `import …` / `from … import …` (content irrelevant to tlc).
    Import,
    /// `with item [as target]: body`.
    With {
        item: Expr,
        target: Option<Expr>,
        body: Vec<Stmt>,
    },
    /// `for a, b in iter: body`.
    For {
        targets: Vec<Ident>,
        iter: Expr,
        body: Vec<Stmt>,
    },
    /// `while cond: body`.
    While {
        cond: Expr,
        body: Vec<Stmt>,
    },
    /// `if c: … elif c: … else: …`, kept flat so that long `elif` chains do not nest.
    If {
        branches: Vec<(Expr, Vec<Stmt>)>,
        else_body: Option<Vec<Stmt>>,
    },
    /// `target = value`.
    Assign {
        target: Expr,
        value: Expr,
    },
    /// `target op= value` (`+=`, `-=`, …).
    AugAssign {
        target: Expr,
        op: BinaryOp,
        value: Expr,
    },
    /// `target: annotation [= value]`.
    AnnAssign {
        target: Expr,
        annotation: Expr,
        value: Option<Expr>,
    },
    Expr(Expr),
    Pass,
    Return(Option<Expr>),
}

#[derive(Clone, Debug, PartialEq)]
pub struct FuncDef {
    pub decorators: Vec<Expr>,
    pub name: Ident,
    pub params: Vec<Param>,
    pub returns: Option<Expr>,
    pub body: Vec<Stmt>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    pub name: Ident,
    pub annotation: Option<Expr>,
    pub default: Option<Expr>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
    /// 1 for a leaf, else 1 + the deepest child.
    pub depth: u32,
    /// Written inside parentheses (so `-(5)` is not folded into the literal `-5`).
    pub parens: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    FloorDiv,
    Mod,
    BitAnd,
    BitOr,
    BitXor,
    Shl,
    Shr,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmpOp {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BoolOp {
    And,
    Or,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnaryOp {
    Neg,
    Pos,
    Not,
    /// `~x`.
    Invert,
}

/// A call argument: positional, or `name=value`.
#[derive(Clone, Debug, PartialEq)]
pub struct Arg {
    pub name: Option<Ident>,
    pub value: Expr,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    Name(String),
    /// An integer literal; the sign is folded in, so the range is that of `i64` plus `2^63`
    /// (rejected when lowering).
    Int(i128),
    Float(f64),
    Str(String),
    Bool(bool),
    None,
    /// `value.attr`.
    Attr(Box<Expr>, Ident),
    /// `func(args)`.
    Call(Box<Expr>, Vec<Arg>),
    /// `value[i, j:k]`; slices appear only here, as `Slice` items.
    Subscript(Box<Expr>, Vec<Expr>),
    /// `lo:hi[:step]` inside a subscript.
    Slice(Option<Box<Expr>>, Option<Box<Expr>>, Option<Box<Expr>>),
    Tuple(Vec<Expr>),
    List(Vec<Expr>),
    Dict(Vec<(Expr, Expr)>),
    Unary(UnaryOp, Box<Expr>),
    Binary(BinaryOp, Box<Expr>, Box<Expr>),
    Compare(CmpOp, Box<Expr>, Box<Expr>),
    BoolOp(BoolOp, Box<Expr>, Box<Expr>),
    /// `lambda x, y: body`: parsed anywhere, accepted only as the combiner of
    /// `T.comm_reducer` (lowering refuses it elsewhere).
    Lambda(Vec<Ident>, Box<Expr>),
}

impl Expr {
    /// Builds a node and computes its depth from its direct children.
    pub fn new(kind: ExprKind, span: Span) -> Expr {
        let depth = 1 + kind.child_depth();
        Expr {
            kind,
            span,
            depth,
            parens: false,
        }
    }

    /// The dotted name `T.foo.bar` this expression spells, if it is one.
    pub fn dotted(&self) -> Option<String> {
        match &self.kind {
            ExprKind::Name(n) => Some(n.clone()),
            ExprKind::Attr(base, attr) => Some(format!("{}.{}", base.dotted()?, attr.name)),
            _ => None,
        }
    }
}

impl Expr {
    /// Calls `f` with every name this expression reads (the base names of attributes and
    /// calls included; a lambda's parameters too).
    pub fn for_each_name(&self, f: &mut dyn FnMut(&str)) {
        match &self.kind {
            ExprKind::Name(n) => f(n),
            ExprKind::Int(_)
            | ExprKind::Float(_)
            | ExprKind::Str(_)
            | ExprKind::Bool(_)
            | ExprKind::None => {}
            ExprKind::Attr(e, _) | ExprKind::Unary(_, e) | ExprKind::Lambda(_, e) => {
                e.for_each_name(f)
            }
            ExprKind::Call(func, args) => {
                func.for_each_name(f);
                args.iter().for_each(|a| a.value.for_each_name(f));
            }
            ExprKind::Subscript(e, items) => {
                e.for_each_name(f);
                items.iter().for_each(|i| i.for_each_name(f));
            }
            ExprKind::Slice(a, b, c) => [a, b, c]
                .into_iter()
                .flatten()
                .for_each(|e| e.for_each_name(f)),
            ExprKind::Tuple(items) | ExprKind::List(items) => {
                items.iter().for_each(|i| i.for_each_name(f))
            }
            ExprKind::Dict(items) => items.iter().for_each(|(k, v)| {
                k.for_each_name(f);
                v.for_each_name(f);
            }),
            ExprKind::Binary(_, a, b) | ExprKind::Compare(_, a, b) | ExprKind::BoolOp(_, a, b) => {
                a.for_each_name(f);
                b.for_each_name(f);
            }
        }
    }
}

impl ExprKind {
    fn child_depth(&self) -> u32 {
        fn max<'a>(it: impl Iterator<Item = &'a Expr>) -> u32 {
            it.map(|e| e.depth).max().unwrap_or(0)
        }
        match self {
            ExprKind::Name(_)
            | ExprKind::Int(_)
            | ExprKind::Float(_)
            | ExprKind::Str(_)
            | ExprKind::Bool(_)
            | ExprKind::None => 0,
            ExprKind::Attr(e, _) | ExprKind::Unary(_, e) | ExprKind::Lambda(_, e) => e.depth,
            ExprKind::Call(f, args) => f.depth.max(max(args.iter().map(|a| &a.value))),
            ExprKind::Subscript(e, items) => e.depth.max(max(items.iter())),
            ExprKind::Slice(a, b, c) => max([a, b, c].into_iter().flatten().map(|e| &**e)),
            ExprKind::Tuple(items) | ExprKind::List(items) => max(items.iter()),
            ExprKind::Dict(items) => max(items.iter().flat_map(|(k, v)| [k, v])),
            ExprKind::Binary(_, a, b) | ExprKind::Compare(_, a, b) | ExprKind::BoolOp(_, a, b) => {
                a.depth.max(b.depth)
            }
        }
    }
}
