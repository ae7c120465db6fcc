//! Lowering of loops: `T.serial`, `range`, `T.unroll`, `T.Parallel` / `T.parallel`,
//! `T.Pipelined` (and TVMScript's `T.serial(n, annotations={"num_stages": k})`),
//! `T.thread_binding` and `T.vectorized`.

use crate::diagnostic::Diagnostic;
use crate::ir::{BinOp, Expr, ExprKind, For, ForKind, Ident, Stmt, StmtKind, ThreadTag};
use crate::span::Span;
use crate::syntax::ast;
use crate::syntax::lower::Lowerer;
use crate::syntax::lower_expr::unknown_construct;

impl Lowerer {
    /// `for ... in KIND(...)`.
    pub fn for_loop(
        &mut self,
        targets: &[ast::Ident],
        iter: &ast::Expr,
        body: &[ast::Stmt],
        span: Span,
    ) -> Option<Stmt> {
        let ast::ExprKind::Call(func, args) = &iter.kind else {
            return self.fail(loop_error(iter.span, None, targets));
        };
        let kind_name = func.dotted().unwrap_or_default();
        if kind_name == "T.thread_binding" && self.kernels.is_empty() {
            if let Some(k) = self.thread_binding_kernel(targets, iter, body, span) {
                return k;
            }
        }
        if kind_name == "T.Parallel" {
            return self.parallel(targets, iter.span, args, body, span);
        }
        if kind_name == "T.Persistent" {
            return self.persistent(targets, iter.span, args, body, span);
        }
        let [var] = targets else {
            return self.fail(loop_error(span, Some(&kind_name), targets));
        };
        let (start, stop, kind) = self.loop_kind(&kind_name, func, iter.span, args)?;
        let body = self.nested(1, span, |lw| lw.block(body))?;
        Some(Stmt::new(
            StmtKind::For(For {
                var: Ident::new(var.name.clone(), var.span),
                start,
                stop,
                kind,
                body,
            }),
            span,
        ))
    }

    /// The range and kind of a loop iterator `KIND(args)`. Kept out of `for_loop` so that
    /// its many locals are not on the stack of every nesting level.
    #[inline(never)]
    fn loop_kind(
        &mut self,
        kind_name: &str,
        func: &ast::Expr,
        iter_span: Span,
        args: &[ast::Arg],
    ) -> Option<(Expr, Expr, ForKind)> {
        let (start, stop, kind) = match kind_name {
            "T.serial" | "T.Serial" => {
                let a = self.bind(
                    kind_name,
                    iter_span,
                    args,
                    &["start", "stop", "annotations"],
                    1,
                )?;
                let (start, stop) = self.loop_range(a[0]?, a[1])?;
                let kind = match a[2] {
                    Some(ann) => self.serial_annotations(ann)?,
                    None => ForKind::Serial,
                };
                (start, stop, kind)
            }
            "range" => {
                let a = self.bind("range", iter_span, args, &["start", "stop", "step"], 1)?;
                if let Some(step) = a[2] {
                    return self.fail(Diagnostic::error(step.span, "a loop step is not supported"));
                }
                let (start, stop) = self.loop_range(a[0]?, a[1])?;
                (start, stop, ForKind::Serial)
            }
            "T.unroll" => {
                let a = self.bind(kind_name, iter_span, args, &["start", "stop"], 1)?;
                let (start, stop) = self.loop_range(a[0]?, a[1])?;
                (start, stop, ForKind::Unroll)
            }
            "T.vectorized" => {
                let a = self.bind(kind_name, iter_span, args, &["start", "stop"], 1)?;
                let (start, stop) = self.loop_range(a[0]?, a[1])?;
                (start, stop, ForKind::Vectorized)
            }
            "T.parallel" => {
                let a = self.bind(kind_name, iter_span, args, &["start", "stop"], 1)?;
                let (start, stop) = self.loop_range(a[0]?, a[1])?;
                if start.as_int() != Some(0) {
                    return self.fail(Diagnostic::error(iter_span, "parallel loops start at 0"));
                }
                (start, stop, ForKind::Parallel)
            }
            "T.Pipelined" => {
                let a = self.bind(
                    kind_name,
                    iter_span,
                    args,
                    &["start", "stop", "num_stages", "order", "stage"],
                    1,
                )?;
                let (start, stop) = self.loop_range(a[0]?, a[1])?;
                // An omitted `num_stages` is one stage (no copy overlap); TileLang's
                // `num_stages=0` means "not pipelined": a serial loop.
                let num_stages = match a[2] {
                    Some(n) => self.tunable_int(n, "`num_stages`")?,
                    None => Expr::int(1),
                };
                if num_stages.as_int() == Some(0) && a[3].is_none() && a[4].is_none() {
                    return Some((start, stop, ForKind::Serial));
                }
                let order = match a[3] {
                    Some(o) => self.const_int_list(o, "`order`")?,
                    None => Vec::new(),
                };
                let stage = match a[4] {
                    Some(s) => self.const_int_list(s, "`stage`")?,
                    None => Vec::new(),
                };
                (
                    start,
                    stop,
                    ForKind::Pipelined {
                        num_stages,
                        order,
                        stage,
                    },
                )
            }
            "T.thread_binding" => {
                let a = self.bind(kind_name, iter_span, args, &["start", "stop", "thread"], 1)?;
                // `T.thread_binding(n, "threadIdx.x")` puts the tag second.
                let (stop_arg, thread_arg) = match (a[1], a[2]) {
                    (Some(s), None) if matches!(s.kind, ast::ExprKind::Str(_)) => (None, Some(s)),
                    other => other,
                };
                let Some(thread_arg) = thread_arg else {
                    return self.fail(Diagnostic::error(
                        iter_span,
                        "`T.thread_binding` needs `thread=\"threadIdx.x\"` (or another tag)",
                    ));
                };
                let tag = self.thread_tag(thread_arg)?;
                let (start, stop) = self.loop_range(a[0]?, stop_arg)?;
                (start, stop, ForKind::ThreadBinding(tag))
            }
            _ => {
                let d = if kind_name.starts_with("T.") {
                    unknown_construct(kind_name, func.span)
                } else {
                    Diagnostic::error(
                        func.span,
                        "expected a loop kind such as `T.serial(n)`, `T.Parallel(n)` or `range(n)`",
                    )
                };
                return self.fail(d);
            }
        };
        Some((start, stop, kind))
    }

    /// `(n)` → `0..n`; `(a, b)` or `((a, b))` → `a..b`.
    fn loop_range(
        &mut self,
        first: &ast::Expr,
        second: Option<&ast::Expr>,
    ) -> Option<(Expr, Expr)> {
        // `T.Pipelined((start, stop), ...)` is also TileLang.
        if let (ast::ExprKind::Tuple(pair), None) = (&first.kind, second) {
            if let [start, stop] = pair.as_slice() {
                return self.loop_range(start, Some(stop));
            }
        }
        match second {
            None => Some((Expr::int(0), self.expr(first)?)),
            Some(stop) => {
                let (a, b) = (self.expr(first), self.expr(stop));
                Some((a?, b?))
            }
        }
    }

    /// `T.serial(n, annotations={"num_stages": 3})` is TVMScript's pipelined loop.
    fn serial_annotations(&mut self, ann: &ast::Expr) -> Option<ForKind> {
        let ast::ExprKind::Dict(entries) = &ann.kind else {
            return self.fail(Diagnostic::error(ann.span, "`annotations` must be a dict"));
        };
        if entries.is_empty() {
            return Some(ForKind::Serial);
        }
        let (mut num_stages, mut order, mut stage) = (None, Vec::new(), Vec::new());
        for (k, v) in entries {
            let key = self.string(k, "an annotation key")?;
            match key {
                "num_stages" => num_stages = Some(self.tunable_int(v, "`num_stages`")?),
                "tl_pipeline_order" | "software_pipeline_order" => {
                    order = self.const_int_list(v, "the pipeline order")?
                }
                "tl_pipeline_stage" | "software_pipeline_stage" => {
                    stage = self.const_int_list(v, "the pipeline stages")?
                }
                other => {
                    return self.fail(Diagnostic::error(
                        k.span,
                        format!("unsupported loop annotation \"{other}\""),
                    ))
                }
            }
        }
        let Some(num_stages) = num_stages else {
            return self.fail(Diagnostic::error(
                ann.span,
                "a pipelined loop needs a \"num_stages\" annotation",
            ));
        };
        Some(ForKind::Pipelined {
            num_stages,
            order,
            stage,
        })
    }

    /// `for i, j in T.Parallel(a, b)`: directly nested parallel loops from 0.
    fn parallel(
        &mut self,
        targets: &[ast::Ident],
        iter_span: Span,
        args: &[ast::Arg],
        body: &[ast::Stmt],
        span: Span,
    ) -> Option<Stmt> {
        if let Some(kw) = args.iter().find_map(|a| a.name.as_ref()) {
            return self.fail(Diagnostic::error(
                kw.span,
                format!("unknown keyword argument `{}` for `T.Parallel`", kw.name),
            ));
        }
        if args.len() != targets.len() || args.is_empty() {
            return self.fail(Diagnostic::error(
                iter_span,
                format!(
                    "`T.Parallel` has {} extent{} but the loop has {} variable{}",
                    args.len(),
                    if args.len() == 1 { "" } else { "s" },
                    targets.len(),
                    if targets.len() == 1 { "" } else { "s" }
                ),
            ));
        }
        let mut extents = Vec::with_capacity(args.len());
        for a in args {
            extents.push(self.expr(&a.value));
        }
        let body = self.nested(targets.len(), span, |lw| lw.block(body))?;
        let mut inner = body;
        for (var, extent) in targets.iter().zip(extents).rev() {
            let stmt = Stmt::new(
                StmtKind::For(For {
                    var: Ident::new(var.name.clone(), var.span),
                    start: Expr::int(0),
                    stop: extent?,
                    kind: ForKind::Parallel,
                    body: inner,
                }),
                span,
            );
            inner = vec![stmt];
        }
        let mut outer = inner.pop()?;
        self.rng_in_parallel(&mut outer, span)?;
        Some(outer)
    }

    /// `for bx, by in T.Persistent([Mb, Nb], wave, index, group_size=8):` — TileLang's
    /// persistent tile walk, written out: block `index` of a `wave`-block grid takes tile
    /// `r = w * wave + index` in wave `w`, for as many waves as cover the domain padded to
    /// a multiple of `g = max(1, min(group_size, Nb))` columns; `r = (i0 * Mb + i1) * g + i2`
    /// is tile `(bx, by) = (i1, i0 * g + i2)` (groups of `g` column tiles walked down the
    /// rows, for L2 reuse), run when `by < Nb`. A 1-D domain `[D]` walks `bx = r < D`.
    fn persistent(
        &mut self,
        targets: &[ast::Ident],
        iter_span: Span,
        args: &[ast::Arg],
        body: &[ast::Stmt],
        span: Span,
    ) -> Option<Stmt> {
        let a = self.bind(
            "T.Persistent",
            iter_span,
            args,
            &["domain", "wave_size", "index", "group_size"],
            3,
        )?;
        let domain_arg = a[0]?;
        let dims: Vec<&ast::Expr> = match &domain_arg.kind {
            ast::ExprKind::List(items) | ast::ExprKind::Tuple(items) => items.iter().collect(),
            _ => {
                return self.fail(Diagnostic::error(
                    domain_arg.span,
                    "`T.Persistent` takes its domain as a list: `[Mb, Nb]`",
                ))
            }
        };
        if dims.len() != targets.len() || !(1..=2).contains(&dims.len()) {
            return self.fail(Diagnostic::error(
                domain_arg.span,
                format!(
                    "`T.Persistent` walks a 1-D or 2-D domain with one variable per dimension; \
                     found {} dimension(s) and {} variable(s)",
                    dims.len(),
                    targets.len()
                ),
            ));
        }
        let mut extents = Vec::new();
        for d in &dims {
            extents.push(self.expr(d)?);
        }
        let wave = self.expr(a[1]?)?;
        let index = self.expr(a[2]?)?;
        let group = match a[3] {
            Some(g) => self.expr(g)?,
            None => Expr::int(8),
        };
        let body = self.nested(2, span, |lw| lw.block(body))?;
        let b = |op: BinOp, x: Expr, y: Expr| Expr::binary(op, x, y, span);
        let var = |name: &str| Expr::new(ExprKind::Var(name.to_string()), span);
        let first = &targets[0];
        let w = self.generated_name(&format!("{}_wave", first.name));
        let r = self.generated_name(&format!("{}_tile", first.name));
        let let_ = |name: &str, value: Expr, at: Span| {
            Stmt::new(
                StmtKind::Let {
                    var: Ident::new(name, at),
                    dtype: None,
                    value,
                },
                at,
            )
        };
        let tile = let_(
            &r,
            b(BinOp::Add, b(BinOp::Mul, var(&w), wave.clone()), index),
            span,
        );
        let (total, binds, cond) = match (targets, extents.as_slice()) {
            ([bx], [d0]) => (
                d0.clone(),
                vec![let_(&bx.name, var(&r), bx.span)],
                b(BinOp::Lt, var(&bx.name), d0.clone()),
            ),
            ([bx, by], [mb, nb]) => {
                // The group width, a pure expression of the domain (written where used).
                let g = || {
                    b(
                        BinOp::Max,
                        Expr::int(1),
                        b(BinOp::Min, group.clone(), nb.clone()),
                    )
                };
                let groups = b(BinOp::CeilDiv, nb.clone(), g());
                let total = b(BinOp::Mul, b(BinOp::Mul, groups, mb.clone()), g());
                let q = b(BinOp::FloorDiv, var(&r), g());
                let row = b(BinOp::FloorMod, q.clone(), mb.clone());
                let col = b(
                    BinOp::Add,
                    b(BinOp::Mul, b(BinOp::FloorDiv, q, mb.clone()), g()),
                    b(BinOp::FloorMod, var(&r), g()),
                );
                (
                    total,
                    vec![let_(&bx.name, row, bx.span), let_(&by.name, col, by.span)],
                    b(BinOp::Lt, var(&by.name), nb.clone()),
                )
            }
            _ => return None,
        };
        let mut inner = vec![tile];
        inner.extend(binds);
        inner.push(Stmt::new(
            StmtKind::If {
                cond,
                then_body: body,
                else_body: Vec::new(),
            },
            span,
        ));
        let waves = b(BinOp::CeilDiv, total, wave);
        Some(Stmt::new(
            StmtKind::For(For {
                var: Ident::new(w, span),
                start: Expr::int(0),
                stop: waves,
                kind: ForKind::Serial,
                body: inner,
            }),
            span,
        ))
    }

    /// A thread tag string such as "threadIdx.x".
    pub fn thread_tag(&mut self, e: &ast::Expr) -> Option<ThreadTag> {
        let text = self.string(e, "the thread tag")?;
        match ThreadTag::parse(text) {
            Some(t) => Some(t),
            None => {
                let names: Vec<&str> = ThreadTag::ALL.iter().map(|t| t.name()).collect();
                self.fail(
                    Diagnostic::error(e.span, format!("unknown thread tag \"{text}\""))
                        .with_note(format!("expected one of {}", names.join(", "))),
                )
            }
        }
    }
}

/// A loop whose iterator is not a call (`kind` is `None`), or a non-`T.Parallel` loop with
/// several variables.
#[cold]
#[inline(never)]
fn loop_error(span: Span, kind: Option<&str>, targets: &[ast::Ident]) -> Diagnostic {
    match kind {
        None => Diagnostic::error(
            span,
            "expected a loop kind such as `T.serial(n)`, `T.Parallel(n)` or `range(n)`",
        ),
        Some(kind) => Diagnostic::error(
            targets.get(1).map_or(span, |t| t.span),
            format!("only `T.Parallel` loops take several variables, not `{kind}`"),
        ),
    }
}
