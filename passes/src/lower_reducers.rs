//! `lower-reducers`: TileLang's v1 reducers (`T.alloc_reducer` / `T.finalize_reducer`)
//! become plain fragments and explicit reductions, which `lower-reductions` lowers.
//!
//! An update `R[idx] = R[idx] op e` in a `T.Parallel` nest whose variables `idx` leaves some
//! out combines `e` over those variables. For each such update the pass
//!
//! 1. stores `e` into a new fragment `P` of the whole nest's shape (`P[i, j, …] = e`, in the
//!    update's place, so the nest's other statements stay as they are);
//! 2. after the nest, reduces `P` along the left-out dimensions, the last one first: into new
//!    fragments (`clear=True`) and, for the last, into `R` itself with `clear=False`, so the
//!    partial results combine with what `R` held (`T.reduce_sum` for `"sum"`, `_max`,
//!    `_min`).
//!
//! Updates whose `idx` is the nest's variables in order (element for element) and updates
//! outside a `T.Parallel` nest stay as they are. `T.finalize_reducer(R)` is dropped: once
//! every nest's contribution is folded by its own reduction, nothing is left to combine at
//! that point (the verifier's RD3 kept every read of `R` after it). The kernel's reducer
//! records are cleared, so `R` is an ordinary fragment from here on.
//!
//! `replication=` does not change the lowering. Not lowered yet (located errors): an update
//! under a condition or an inner loop of the nest, and `idx` other than a subsequence of the
//! nest's variables in nest order covering `R`'s shape.

use crate::analysis::kernels::for_each_kernel;
use crate::context::PassContext;
use crate::names::NameSet;
use crate::pass::Pass;
use tlc_ir::verifier::{const_int, reducer_update};
use tlc_ir::visit::{child_bodies, child_bodies_mut, for_each_stmt};
use tlc_ir::{
    BufferDecl, Diagnostic, Expr, ExprKind, For, ForKind, Ident, PrimFunc, Reduce, Reducer, Scope,
    Span, Stmt, StmtKind,
};

pub struct LowerReducers;

impl Pass for LowerReducers {
    fn name(&self) -> &'static str {
        "lower-reducers"
    }

    fn description(&self) -> &'static str {
        "T.alloc_reducer updates in T.Parallel nests -> a fragment of the nest's shape and T.reduce_* into the reducer"
    }

    fn run(&self, mut func: PrimFunc, _cx: &PassContext) -> Result<PrimFunc, Vec<Diagnostic>> {
        let mut names = NameSet::of(&func);
        let mut errors = Vec::new();
        for_each_kernel(&mut func.body, &mut |k, _| {
            if k.reducers.is_empty() {
                return;
            }
            let mut cx = Lowering {
                reducers: std::mem::take(&mut k.reducers),
                allocs: k.allocs.clone(),
                names: &mut names,
                new_allocs: Vec::new(),
                errors: &mut errors,
            };
            cx.body(&mut k.body);
            k.allocs.extend(cx.new_allocs);
        });
        if errors.is_empty() {
            Ok(func)
        } else {
            Err(errors)
        }
    }
}

struct Lowering<'a> {
    reducers: Vec<Reducer>,
    allocs: Vec<BufferDecl>,
    names: &'a mut NameSet,
    new_allocs: Vec<BufferDecl>,
    errors: &'a mut Vec<Diagnostic>,
}

impl Lowering<'_> {
    fn reducer(&self, name: &str) -> Option<&Reducer> {
        self.reducers.iter().find(|r| r.buffer.name == name)
    }

    fn body(&mut self, body: &mut Vec<Stmt>) {
        let old = std::mem::take(body);
        for mut stmt in old {
            match &mut stmt.kind {
                StmtKind::FinalizeReducer(_) => continue,
                StmtKind::For(f) if f.kind == ForKind::Parallel => {
                    let after = self.nest(f);
                    body.push(stmt);
                    body.extend(after);
                    continue;
                }
                _ => {}
            }
            for child in child_bodies_mut(&mut stmt) {
                self.body(child);
            }
            body.push(stmt);
        }
    }

    /// Rewrites the reducer updates of the nest `outer`; returns the reductions that go
    /// after it.
    fn nest(&mut self, outer: &mut For) -> Vec<Stmt> {
        let (vars, extents) = nest_shape(outer);
        let mut after = Vec::new();
        innermost(outer, &mut |inner| match &extents {
            Some(extents) => self.innermost(inner, &vars, extents, &mut after),
            None => self.refuse_all(inner, "a T.Parallel nest with a non-constant extent"),
        });
        after
    }

    /// Rewrites the reducer updates of `inner`, the innermost body of a nest with `vars` and
    /// `extents`, pushing the reductions that go after the nest onto `after`.
    fn innermost(
        &mut self,
        inner: &mut [Stmt],
        vars: &[String],
        extents: &[i64],
        after: &mut Vec<Stmt>,
    ) {
        // Updates deeper than the innermost level of the nest.
        for s in inner.iter() {
            for child in child_bodies(s) {
                let mut found = Vec::new();
                for_each_stmt(child, &mut |x| {
                    if let StmtKind::Store { buffer, .. } = &x.kind {
                        if self.reducer(&buffer.name).is_some() {
                            found.push(x.span);
                        }
                    }
                });
                for span in found {
                    self.errors.push(Diagnostic::error(
                        span,
                        "a reducer update under a condition or an inner loop of a T.Parallel nest is not lowered yet",
                    ).with_note("write the update directly in the innermost `T.Parallel` body"));
                }
            }
        }
        for s in inner.iter_mut() {
            let StmtKind::Store {
                buffer,
                indices,
                value,
            } = &s.kind
            else {
                continue;
            };
            let Some(r) = self.reducer(&buffer.name).cloned() else {
                continue;
            };
            let Some(e) = reducer_update(&r, indices, value).cloned() else {
                continue;
            };
            let Some(kept) = kept_positions(indices, vars) else {
                self.errors.push(
                    Diagnostic::error(
                        s.span,
                        format!(
                            "this update indexes reducer `{}` with other than the nest's variables in nest order, which is not lowered yet",
                            r.buffer.name
                        ),
                    )
                    .with_note(format!("index it with a subsequence of ({})", vars.join(", "))),
                );
                continue;
            };
            if kept.len() == vars.len() {
                continue; // element for element: an ordinary fragment store
            }
            let Some(decl) = self
                .allocs
                .iter()
                .find(|a| a.name.name == r.buffer.name)
                .cloned()
            else {
                continue;
            };
            let shape: Option<Vec<i64>> = decl.shape.iter().map(const_int).collect();
            let want: Vec<i64> = kept.iter().map(|&p| extents[p]).collect();
            if shape.as_deref() != Some(want.as_slice()) {
                self.errors.push(Diagnostic::error(
                    s.span,
                    format!(
                        "reducer `{}` has shape ({}) but this update covers ({}) of it, which is not lowered yet",
                        r.buffer.name,
                        decl.shape.iter().map(|e| e.to_string()).collect::<Vec<_>>().join(", "),
                        want.iter().map(|e| e.to_string()).collect::<Vec<_>>().join(", "),
                    ),
                ));
                continue;
            }
            let span = s.span;
            let part = self.fragment(&format!("{}_part", r.buffer.name), extents, &decl, span);
            s.kind = StmtKind::Store {
                buffer: Ident::new(part.clone(), buffer.span),
                indices: vars.iter().map(|v| Expr::var(v.clone())).collect(),
                value: e,
            };
            // Reduce the left-out positions, highest first, so lower positions keep their
            // numbers.
            let missing: Vec<usize> = (0..vars.len())
                .rev()
                .filter(|p| !kept.contains(p))
                .collect();
            let mut src = part;
            let mut shape_now = extents.to_vec();
            for (i, &p) in missing.iter().enumerate() {
                shape_now.remove(p);
                let last = i + 1 == missing.len();
                let dst = if last {
                    r.buffer.name.clone()
                } else {
                    self.fragment(&format!("{}_part", r.buffer.name), &shape_now, &decl, span)
                };
                after.push(Stmt::new(
                    StmtKind::Reduce(Reduce {
                        kind: r.op.reduce_kind(),
                        src: Ident::new(src, span),
                        dst: Ident::new(dst.clone(), span),
                        dim: p as i64,
                        clear: !last,
                    }),
                    span,
                ));
                src = dst;
            }
        }
    }

    /// A new fragment of `shape` with `like`'s dtype.
    fn fragment(&mut self, base: &str, shape: &[i64], like: &BufferDecl, span: Span) -> String {
        let name = self.names.fresh(base);
        self.new_allocs.push(BufferDecl {
            name: Ident::new(name.clone(), span),
            dtype: like.dtype,
            shape: shape.iter().map(|&n| Expr::int(n)).collect(),
            scope: Scope::Fragment,
            span: like.span,
        });
        name
    }

    fn refuse_all(&mut self, body: &[Stmt], what: &str) {
        let mut found = Vec::new();
        for_each_stmt(body, &mut |x| {
            if let StmtKind::Store { buffer, .. } = &x.kind {
                if self.reducer(&buffer.name).is_some() {
                    found.push(x.span);
                }
            }
        });
        for span in found {
            self.errors.push(Diagnostic::error(
                span,
                format!("a reducer update in {what} is not lowered yet"),
            ));
        }
    }
}

/// The variables of the directly nested parallel loops from `outer` and their constant
/// extents (`None` if one is not constant).
fn nest_shape(outer: &For) -> (Vec<String>, Option<Vec<i64>>) {
    let mut vars = Vec::new();
    let mut extents = Some(Vec::new());
    let mut f = outer;
    loop {
        vars.push(f.var.name.clone());
        match (const_int(&f.start), const_int(&f.stop), extents.as_mut()) {
            (Some(a), Some(b), Some(x)) => x.push(b - a),
            _ => extents = None,
        }
        match f.body.as_slice() {
            [Stmt {
                kind: StmtKind::For(inner),
                ..
            }] if inner.kind == ForKind::Parallel => f = inner,
            _ => break,
        }
    }
    (vars, extents)
}

/// Runs `g` on the innermost body of the directly nested parallel loops from `f`.
fn innermost(f: &mut For, g: &mut dyn FnMut(&mut Vec<Stmt>)) {
    if let [Stmt {
        kind: StmtKind::For(inner),
        ..
    }] = f.body.as_mut_slice()
    {
        if inner.kind == ForKind::Parallel {
            innermost(inner, g);
            return;
        }
    }
    g(&mut f.body)
}

/// The positions in `vars` of `indices` when each index is a distinct nest variable and they
/// come in nest order.
fn kept_positions(indices: &[Expr], vars: &[String]) -> Option<Vec<usize>> {
    let mut out: Vec<usize> = Vec::new();
    for i in indices {
        let ExprKind::Var(v) = &i.kind else {
            return None;
        };
        let p = vars.iter().position(|x| x == v)?;
        if out.last().is_some_and(|&q| q >= p) {
            return None;
        }
        out.push(p);
    }
    Some(out)
}
