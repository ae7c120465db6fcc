//! The all-reduce of one value over threads, in its two spellings:
//!
//! - tlc's `T.thread_allreduce("sum", value, dst[i], tx[, ty])` (what the printer writes);
//! - TVM's, as TileLang's per-thread examples write it:
//!   `with T.attr(T.comm_reducer(lambda x, y: x + y, [identity]), "reduce_scope",
//!   T.reinterpret(T.uint64(0), dtype="handle")):` around
//!   `T.evaluate(T.tvm_thread_allreduce(T.uint32(1), value, True, dst[i], tx, dtype="handle"))`.
//!
//! `lambda` is accepted only as the combiner of `T.comm_reducer`, and only in the forms the
//! all-reduce lowers exactly: `x + y`, `T.max(x, y)`, `T.min(x, y)` (either operand order),
//! with the combiner's identity (0; -inf / the int32 minimum; +inf / the int32 maximum).

use crate::diagnostic::Diagnostic;
use crate::ir::{AllReduce, AllReduceOp, Expr, ExprKind, Ident, Stmt, StmtKind, UnOp};
use crate::span::Span;
use crate::syntax::ast;
use crate::syntax::lower::Lowerer;

impl Lowerer {
    /// `T.thread_allreduce(op, value, dst[i], threads...)`.
    pub fn thread_allreduce(&mut self, span: Span, args: &[ast::Arg]) -> Option<Stmt> {
        // `scratch=buf` (what `plan-allreduce-scratch` adds and the printer writes) is the
        // one keyword, after the positional arguments.
        let (args, scratch) = match args.split_last() {
            Some((last, rest)) if last.name.as_ref().is_some_and(|k| k.name == "scratch") => {
                let ast::ExprKind::Name(n) = &last.value.kind else {
                    return self.fail(Diagnostic::error(
                        last.value.span,
                        "`scratch=` names a shared buffer",
                    ));
                };
                (rest, Some(Ident::new(n.clone(), last.value.span)))
            }
            _ => (args, None),
        };
        if let Some(kw) = args.iter().find_map(|a| a.name.as_ref()) {
            return self.fail(Diagnostic::error(
                kw.span,
                "`T.thread_allreduce` takes positional arguments: (\"sum\" | \"max\" | \"min\", value, dst[i], thread variables...[, scratch=buf])",
            ));
        }
        if args.len() < 4 {
            return self.fail(Diagnostic::error(
                span,
                "`T.thread_allreduce` needs an operation, a value, a destination element and at least one thread variable",
            ));
        }
        let op_text = self.string(&args[0].value, "the all-reduce operation")?;
        let Some(op) = AllReduceOp::parse(op_text) else {
            return self.fail(Diagnostic::error(
                args[0].value.span,
                format!("unknown all-reduce operation \"{op_text}\"; expected \"sum\", \"max\" or \"min\""),
            ));
        };
        let mut stmt = self.allreduce_stmt(op, &args[1].value, &args[2].value, &args[3..], span)?;
        if let StmtKind::AllReduce(r) = &mut stmt.kind {
            r.scratch = scratch;
        }
        Some(stmt)
    }

    /// The statement, once the combiner is known.
    fn allreduce_stmt(
        &mut self,
        op: AllReduceOp,
        value: &ast::Expr,
        dst: &ast::Expr,
        threads: &[ast::Arg],
        span: Span,
    ) -> Option<Stmt> {
        let ast::ExprKind::Subscript(base, items) = &dst.kind else {
            return self.fail(Diagnostic::error(
                dst.span,
                "the all-reduce's result goes to a buffer element `buf[i]`",
            ));
        };
        let ast::ExprKind::Name(buffer) = &base.kind else {
            return self.fail(Diagnostic::error(base.span, "expected a buffer name"));
        };
        if items
            .iter()
            .any(|i| matches!(i.kind, ast::ExprKind::Slice(..)))
        {
            return self.fail(Diagnostic::error(
                dst.span,
                "the all-reduce's result is one element, not a slice",
            ));
        }
        let mut vars = Vec::new();
        for t in threads {
            match (&t.name, &t.value.kind) {
                (None, ast::ExprKind::Name(n)) => vars.push(Ident::new(n.clone(), t.value.span)),
                _ => {
                    return self.fail(Diagnostic::error(
                        t.value.span,
                        "expected a thread variable (the name bound by `T.thread_binding` / `T.get_thread_binding`)",
                    ))
                }
            }
        }
        let indices = self.indices(items);
        let value = self.expr(value);
        Some(Stmt::new(
            StmtKind::AllReduce(AllReduce {
                op,
                value: value?,
                buffer: Ident::new(buffer.clone(), base.span),
                indices: indices?,
                threads: vars,
                scratch: None,
            }),
            span,
        ))
    }

    /// `with T.attr(T.comm_reducer(...), "reduce_scope", ...): T.evaluate(T.tvm_thread_allreduce(...))`:
    /// `reducer` is the `T.comm_reducer` call, `key` the attribute key.
    pub fn comm_reducer_scope(
        &mut self,
        reducer: &ast::Expr,
        key: Option<&ast::Expr>,
        body: &[ast::Stmt],
        span: Span,
    ) -> Option<Stmt> {
        if let Some(key) = key {
            let text = self.string(key, "the attribute key")?;
            if text != "reduce_scope" {
                return self.fail(Diagnostic::error(
                    key.span,
                    format!("a `T.comm_reducer` attribute has the key \"reduce_scope\", found \"{text}\""),
                ));
            }
        }
        let op = self.comm_reducer(reducer)?;
        let call = match body {
            [stmt] => match &stmt.kind {
                ast::StmtKind::Expr(e) => evaluate_arg(e),
                _ => None,
            },
            _ => None,
        };
        let Some((call_span, args)) = call else {
            return self.fail(Diagnostic::error(
                span,
                "a `T.comm_reducer` scope holds one `T.evaluate(T.tvm_thread_allreduce(...))`",
            ));
        };
        let positional: Vec<&ast::Arg> = args.iter().filter(|a| a.name.is_none()).collect();
        for kw in args.iter().filter_map(|a| a.name.as_ref()) {
            if kw.name != "dtype" {
                return self.fail(Diagnostic::error(
                    kw.span,
                    format!(
                        "unknown keyword argument `{}` for `T.tvm_thread_allreduce`",
                        kw.name
                    ),
                ));
            }
        }
        if positional.len() < 5 {
            return self.fail(Diagnostic::error(
                call_span,
                "`T.tvm_thread_allreduce` takes (size, value, condition, result, thread variables...)",
            ));
        }
        let size = positional[0];
        if self.const_int(&size.value, "the all-reduce size")? != 1 {
            return self.fail(Diagnostic::error(
                size.value.span,
                "tlc reduces one value per all-reduce (size 1); write one all-reduce per value",
            ));
        }
        let cond = positional[2];
        if !matches!(cond.value.kind, ast::ExprKind::Bool(true)) {
            return self.fail(Diagnostic::error(
                cond.value.span,
                "the all-reduce's condition must be `True` (every thread's value takes part); select the identity into the value instead",
            ));
        }
        let threads: Vec<ast::Arg> = positional[4..].iter().map(|a| (*a).clone()).collect();
        self.allreduce_stmt(
            op,
            &positional[1].value,
            &positional[3].value,
            &threads,
            span,
        )
    }

    /// `T.comm_reducer(lambda x, y: COMBINE, [identity])`: the operation.
    fn comm_reducer(&mut self, e: &ast::Expr) -> Option<AllReduceOp> {
        let ast::ExprKind::Call(_, args) = &e.kind else {
            return self.fail(Diagnostic::error(
                e.span,
                "expected `T.comm_reducer(lambda x, y: ..., [identity])`",
            ));
        };
        let a = self.bind(
            "T.comm_reducer",
            e.span,
            args,
            &["fcombine", "fidentity"],
            2,
        )?;
        let (f, identity) = (a[0]?, a[1]?);
        let ast::ExprKind::Lambda(params, body) = &f.kind else {
            return self.fail(Diagnostic::error(
                f.span,
                "the combiner is a `lambda x, y: ...`",
            ));
        };
        let [x, y] = params.as_slice() else {
            return self.fail(Diagnostic::error(
                f.span,
                format!(
                    "the combiner takes two values (one per side), found {}",
                    params.len()
                ),
            ));
        };
        let is_pair = |a: &ast::Expr, b: &ast::Expr| {
            let names = (name_of(a), name_of(b));
            names == (Some(&x.name), Some(&y.name)) || names == (Some(&y.name), Some(&x.name))
        };
        let op = match &body.kind {
            ast::ExprKind::Binary(ast::BinaryOp::Add, a, b) if is_pair(a, b) => {
                Some(AllReduceOp::Sum)
            }
            ast::ExprKind::Call(func, cargs)
                if cargs.len() == 2 && cargs.iter().all(|c| c.name.is_none()) =>
            {
                match func.dotted().as_deref() {
                    Some("T.max") if is_pair(&cargs[0].value, &cargs[1].value) => {
                        Some(AllReduceOp::Max)
                    }
                    Some("T.min") if is_pair(&cargs[0].value, &cargs[1].value) => {
                        Some(AllReduceOp::Min)
                    }
                    _ => None,
                }
            }
            _ => None,
        };
        let Some(op) = op else {
            return self.fail(
                Diagnostic::error(body.span, "tlc's all-reduce combines with `x + y`, `T.max(x, y)` or `T.min(x, y)` only")
                    .with_note("other combiners (products, multi-value reducers, non-commutative ones) are not lowered"),
            );
        };
        let items = match &identity.kind {
            ast::ExprKind::List(items) | ast::ExprKind::Tuple(items) => items,
            _ => {
                return self.fail(Diagnostic::error(
                    identity.span,
                    "the identity is a list of one value: `[0]`",
                ))
            }
        };
        let [id] = items.as_slice() else {
            return self.fail(Diagnostic::error(
                identity.span,
                "tlc's all-reduce has one value, so one identity",
            ));
        };
        let lowered = self.expr(id)?;
        let ok = match (op, number(&lowered)) {
            (AllReduceOp::Sum, Some(v)) => v == 0.0,
            (AllReduceOp::Max, Some(v)) => v == f64::NEG_INFINITY || v == f64::from(i32::MIN),
            (AllReduceOp::Min, Some(v)) => {
                v == f64::INFINITY || v == f64::from(i32::MAX) || v == f64::from(u32::MAX)
            }
            (_, None) => false,
        };
        if !ok {
            let want = match op {
                AllReduceOp::Sum => "0",
                AllReduceOp::Max => "-inf (or the int32 minimum)",
                AllReduceOp::Min => "+inf (or the int32 / uint32 maximum)",
            };
            return self.fail(Diagnostic::error(
                id.span,
                format!("the identity of a {} reduction is {want}", op.name()),
            ));
        }
        Some(op)
    }
}

/// `T.evaluate(CALL)` or a bare `CALL` of `T.tvm_thread_allreduce`: its span and arguments.
fn evaluate_arg(e: &ast::Expr) -> Option<(Span, &[ast::Arg])> {
    let ast::ExprKind::Call(func, args) = &e.kind else {
        return None;
    };
    match func.dotted().as_deref() {
        Some("T.evaluate") => match args.as_slice() {
            [a] if a.name.is_none() => evaluate_arg(&a.value),
            _ => None,
        },
        Some("T.tvm_thread_allreduce") => Some((e.span, args.as_slice())),
        _ => None,
    }
}

fn name_of(e: &ast::Expr) -> Option<&String> {
    match &e.kind {
        ast::ExprKind::Name(n) => Some(n),
        _ => None,
    }
}

/// The value of a constant literal, through casts and negation.
fn number(e: &Expr) -> Option<f64> {
    match &e.kind {
        ExprKind::Int(v) => Some(*v as f64),
        ExprKind::Float(v) => Some(*v),
        ExprKind::Cast(_, a) => number(a),
        ExprKind::Unary(UnOp::Neg, a) => number(a).map(|v| -v),
        _ => None,
    }
}
