//! A kernel's tuning space (docs/ir.md, "Tuning space"): named tunables with candidate
//! values and a default, grouped as tuples where values only make sense together, and
//! constraints over them.
//!
//! ```text
//! block_M, block_N = T.tunable([(128, 256), (128, 128), (64, 128)], default=(128, 256))
//! block_K = T.tunable([32, 64], default=32)
//! T.tune_constraint(block_M * block_N <= 128 * 256)
//! ```
//!
//! In the body a tunable is an `int32` name like a symbolic dimension; binding it
//! ([`bind`]) replaces it by its value everywhere, as `-D` binds a dim, so a bound kernel is
//! the IR the user would have written with the number in place. The space is enumerated
//! in declaration order ([`TuningSpace::configs`]): the product of the groups' candidates,
//! minus the configs that break a constraint.

use crate::diagnostic::Diagnostic;
use crate::ir::{Expr, ExprKind, ForKind, Ident, PrimFunc, Stmt, StmtKind};
use crate::span::Span;
use crate::visit::{child_bodies_mut, map_expr};

/// One group of tunables: `names` take the values of one candidate tuple together.
#[derive(Clone, Debug, PartialEq)]
pub struct Tunable {
    pub names: Vec<Ident>,
    /// Candidate tuples, each as long as `names`, in the order written.
    pub candidates: Vec<Vec<i64>>,
    /// The tuple used when nothing else chooses (as long as `names`).
    pub default: Vec<i64>,
    pub span: Span,
}

/// The tunables and constraints of a kernel; empty for a kernel without a tuning space.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TuningSpace {
    pub tunables: Vec<Tunable>,
    /// `T.tune_constraint(e)`: boolean expressions over tunables and symbolic dims that a
    /// config must satisfy.
    pub constraints: Vec<Expr>,
}

/// Values for tunables (and dims), by name.
pub type Config = Vec<(String, i64)>;

/// The most configs a space may have (the product of its groups' candidate counts).
pub const MAX_CONFIGS: usize = 1 << 16;

impl TuningSpace {
    pub fn is_empty(&self) -> bool {
        self.tunables.is_empty() && self.constraints.is_empty()
    }

    /// Every tunable's name, in declaration order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tunables
            .iter()
            .flat_map(|t| t.names.iter().map(|n| n.name.as_str()))
    }

    pub fn declares(&self, name: &str) -> bool {
        self.names().any(|n| n == name)
    }

    /// The defaults of every tunable.
    pub fn default_config(&self) -> Config {
        self.tunables
            .iter()
            .flat_map(|t| {
                t.names
                    .iter()
                    .zip(&t.default)
                    .map(|(n, v)| (n.name.clone(), *v))
            })
            .collect()
    }

    /// The number of configs before constraints.
    pub fn size(&self) -> usize {
        self.tunables
            .iter()
            .map(|t| t.candidates.len())
            .try_fold(1usize, |acc, n| acc.checked_mul(n))
            .unwrap_or(usize::MAX)
    }

    /// Every config of the space that satisfies the constraints, with `dims` (bound
    /// symbolic dims) for constraints that mention them: the product of the groups'
    /// candidates, the first group varying slowest. A space of more than [`MAX_CONFIGS`]
    /// is an error at the group whose candidates take the product past it; a constraint
    /// that cannot be evaluated, at the constraint.
    pub fn configs(&self, dims: &Config) -> Result<Vec<Config>, Diagnostic> {
        self.check_size()?;
        let size = self.size();
        let mut out = Vec::new();
        for index in 0..size {
            let mut rest = index;
            let mut config = Config::new();
            for t in self.tunables.iter().rev() {
                let pick = &t.candidates[rest % t.candidates.len()];
                rest /= t.candidates.len();
                for (n, v) in t.names.iter().zip(pick).rev() {
                    config.push((n.name.clone(), *v));
                }
            }
            config.reverse();
            if self.violated(&config, dims)?.is_none() {
                out.push(config);
            }
        }
        Ok(out)
    }

    /// Whether the space can be enumerated: at most [`MAX_CONFIGS`] configs before
    /// constraints. Otherwise an error at the group whose candidates take the product past
    /// the limit, with a note at the first group.
    pub fn check_size(&self) -> Result<(), Diagnostic> {
        let mut size = 1usize;
        for t in &self.tunables {
            size = size.saturating_mul(t.candidates.len());
            if size > MAX_CONFIGS {
                let mut diag = Diagnostic::error(
                    t.span,
                    format!(
                        "with this group the tuning space has more than {MAX_CONFIGS} configs, \
                         the most tlc enumerates",
                    ),
                )
                .with_note(format!(
                    "the space is the product of the groups' candidate counts: {}",
                    self.size_text()
                ));
                // (Spans compare equal whatever they are: compare the groups themselves.)
                if let Some(first) = self.tunables.first().filter(|f| !std::ptr::eq(*f, t)) {
                    diag = diag.with_note_at(first.span, "the tuning space starts here");
                }
                return Err(diag);
            }
        }
        Ok(())
    }

    /// `a × b × …` over the groups' candidate counts, for messages.
    fn size_text(&self) -> String {
        self.tunables
            .iter()
            .map(|t| t.candidates.len().to_string())
            .collect::<Vec<_>>()
            .join(" × ")
    }

    /// The first constraint `config` (with `dims`) breaks, or `None`. A constraint that
    /// names a dim `dims` does not bind is not checked (a compile without `-D` for it); one
    /// that cannot be evaluated otherwise (a division by zero) is an error at it.
    pub fn violated(&self, config: &Config, dims: &Config) -> Result<Option<&Expr>, Diagnostic> {
        for c in &self.constraints {
            let value = |n: &str| {
                config
                    .iter()
                    .chain(dims)
                    .find(|(k, _)| k == n)
                    .map(|(_, v)| *v)
            };
            let bound = map_expr(c, &mut |e: Expr| crate::specialize::refold(e, &value));
            let mut open = false;
            crate::visit::for_each_subexpr(&bound, &mut |x| {
                open |= matches!(x.kind, ExprKind::Var(_));
            });
            if open {
                continue;
            }
            match eval_bool(&bound) {
                Some(true) => {}
                Some(false) => return Ok(Some(c)),
                None => {
                    return Err(Diagnostic::error(
                        c.span,
                        format!(
                            "the constraint `{c}` cannot be evaluated with {}",
                            describe(config)
                        ),
                    ))
                }
            }
        }
        Ok(None)
    }
}

/// `name=value, ...`, for messages and tables.
pub fn describe(config: &Config) -> String {
    config
        .iter()
        .map(|(n, v)| format!("{n}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A constraint's truth value once every name is bound; `None` for what integer
/// arithmetic cannot evaluate (a division by zero, an overflow, a float).
fn eval_bool(e: &Expr) -> Option<bool> {
    eval(e).map(|v| v != 0)
}

/// Integer and boolean (0 / 1) evaluation of a bound constraint.
fn eval(e: &Expr) -> Option<i64> {
    use crate::ir::{BinOp as B, UnOp};
    match &e.kind {
        ExprKind::Int(v) => Some(*v),
        ExprKind::Bool(b) => Some(i64::from(*b)),
        ExprKind::Unary(UnOp::Neg, x) => eval(x)?.checked_neg(),
        ExprKind::Unary(UnOp::Not, x) => Some(i64::from(eval(x)? == 0)),
        ExprKind::Binary(op, a, b) => {
            let (x, y) = (eval(a)?, eval(b)?);
            let truth = |t: bool| Some(i64::from(t));
            match op {
                B::Lt => truth(x < y),
                B::Le => truth(x <= y),
                B::Gt => truth(x > y),
                B::Ge => truth(x >= y),
                B::Eq => truth(x == y),
                B::Ne => truth(x != y),
                B::And => truth(x != 0 && y != 0),
                B::Or => truth(x != 0 || y != 0),
                _ => crate::ir::fold_int(*op, x, y),
            }
        }
        _ => None,
    }
}

/// `func` with the tunables of `config` replaced by their values (a name `config` does not
/// bind keeps its default), the constraints checked, and the tuning space removed. A
/// `T.Pipelined` loop whose `num_stages` becomes 0 is a serial loop (TileLang's "not
/// pipelined").
pub fn bind(func: &PrimFunc, config: &Config, dims: &Config) -> Result<PrimFunc, Diagnostic> {
    let space = &func.space;
    let mut full = space.default_config();
    for (name, v) in config {
        match full.iter_mut().find(|(n, _)| n == name) {
            Some(slot) => slot.1 = *v,
            None => {
                return Err(Diagnostic::error(
                    func.name.span,
                    format!("`{name}` is not a tunable of `{}`", func.name.name),
                ))
            }
        }
    }
    match space.violated(&full, dims) {
        Ok(None) => {}
        Ok(Some(c)) => {
            return Err(Diagnostic::error(
                c.span,
                format!("the config {} breaks this constraint", describe(&full)),
            ))
        }
        Err(diag) => return Err(diag),
    }
    let mut out = func.clone();
    out.space = TuningSpace::default();
    let value = |n: &str| full.iter().find(|(k, _)| k == n).map(|(_, v)| *v);
    let mut subst = |e: Expr| crate::specialize::refold(e, &value);
    for param in &mut out.params {
        for dim in &mut param.shape {
            *dim = map_expr(dim, &mut subst);
        }
    }
    crate::visit::map_body_exprs(&mut out.body, &mut subst);
    unpipeline_zero_stages(&mut out.body);
    crate::specialize::fold_constant_branches(&mut out);
    Ok(out)
}

/// `T.Pipelined(n, num_stages=0)` is a serial loop (TileLang: no pipelining).
fn unpipeline_zero_stages(body: &mut [Stmt]) {
    for stmt in body {
        if let StmtKind::For(f) = &mut stmt.kind {
            if let ForKind::Pipelined {
                num_stages,
                order,
                stage,
            } = &f.kind
            {
                if num_stages.as_int() == Some(0) && order.is_empty() && stage.is_empty() {
                    f.kind = ForKind::Serial;
                }
            }
        }
        for child in child_bodies_mut(stmt) {
            unpipeline_zero_stages(child);
        }
    }
}
