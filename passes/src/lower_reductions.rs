//! `lower-reductions`: every `T.reduce_*(src, dst, dim=D, clear=…)` becomes tile-level ops
//! the rest of the pipeline already lowers, so a reduction works on any fragment layout
//! (a gemm accumulator included) and on both targets:
//!
//! 1. a fragment `src` is staged into a shared buffer `S` of its shape (`T.copy`; a shared
//!    `src` is read in place);
//! 2. `P` threads per output element (`P` the largest power of two with `R · P ≤ threads`
//!    and `P ≤ n`, for `R` output elements and `n` along `D`) each fold a strided part of
//!    the line — elements `p, p + P, …` — into a register fragment `Acc` (`R × P`, the
//!    kind's identity first), converting each to `dst`'s dtype (absolute for the `abs`
//!    kinds);
//! 3. with `P > 1`, `Acc` is copied to a shared buffer `W` and halved `log2 P` times
//!    (`W[o, q] = W[o, q] op W[o, q + s]`, `s = P/2 … 1`);
//! 4. `dst[o] = W[o, 0]` (`Acc[o]` when `P = 1`), or `dst[o] op …` with `clear=False`.
//!
//! Barriers between the steps are `thread-binding`'s (shared-memory dependences), as for
//! any tile op. The sum is reassociated (strided partials, then a tree): floats differ
//! from the interpreter's in-order fold by at most `(n − 1) · u · Σ|x|` (docs/ir.md);
//! `max` / `min` are exact.
//!
//! A reduction into a row vector (`analysis::rows`: a 1-D fragment that follows the rows of
//! its 2-D source) is left as it is: `lower-tile-ops` reduces it in registers, with warp
//! shuffles, once `layout-inference` has laid both out.

use crate::analysis::block::Block;
use crate::analysis::footprint::past_shared_memory;
use crate::analysis::kernels::for_each_kernel;
use crate::analysis::rows::RowVectors;
use crate::context::PassContext;
use crate::names::NameSet;
use crate::pass::Pass;
use tlc_ir::build::{bin, for_loop, load, reduce_identity as identity, store};
use tlc_ir::verifier::const_int;
use tlc_ir::visit::child_bodies_mut;
use tlc_ir::{
    BinOp, BufferDecl, DType, Diagnostic, Expr, ExprKind, ForKind, Ident, Kernel, MathFn, PrimFunc,
    Range, Reduce, ReduceKind, Region, Scope, Span, Stmt, StmtKind,
};

pub struct LowerReductions;

impl Pass for LowerReductions {
    fn name(&self) -> &'static str {
        "lower-reductions"
    }

    fn description(&self) -> &'static str {
        "T.reduce_* -> staged copy, strided per-thread folds and a shared-memory tree (tile ops)"
    }

    fn run(&self, mut func: PrimFunc, cx: &PassContext) -> Result<PrimFunc, Vec<Diagnostic>> {
        let target = cx.target();
        let mut names = NameSet::of(&func);
        let mut errors = Vec::new();
        for_each_kernel(&mut func.body, &mut |k, span| {
            let threads = match Block::of(k, span) {
                Ok(b) => b.threads(),
                Err(e) => {
                    if contains_reduce(&k.body) {
                        errors.extend(e);
                    }
                    return;
                }
            };
            let rows = RowVectors::of(k, threads, target.warp_size());
            let mut cx = Lowering {
                threads,
                target,
                rows,
                staged: Default::default(),
                names: &mut names,
                allocs: k.allocs.clone(),
                new_allocs: Vec::new(),
                errors: &mut errors,
            };
            cx.body(&mut k.body);
            let new = std::mem::take(&mut cx.new_allocs);
            push_allocs(k, new);
        });
        if errors.is_empty() {
            Ok(func)
        } else {
            Err(errors)
        }
    }
}

fn push_allocs(k: &mut Kernel, new: Vec<BufferDecl>) {
    k.allocs.extend(new);
}

fn contains_reduce(body: &[Stmt]) -> bool {
    let mut found = false;
    tlc_ir::visit::for_each_stmt(body, &mut |s| {
        found |= matches!(s.kind, StmtKind::Reduce(_));
    });
    found
}

struct Lowering<'a> {
    threads: i64,
    /// Bounds the shared staging copies (a block's shared memory).
    target: tlc_ir::Target,
    /// Row vectors: a reduction into one stays for `lower-tile-ops` (warp shuffles).
    rows: RowVectors,
    /// The shared copy of each fragment source staged so far (one per fragment and kernel:
    /// every reduction writes it afresh).
    staged: std::collections::HashMap<String, String>,
    names: &'a mut NameSet,
    allocs: Vec<BufferDecl>,
    new_allocs: Vec<BufferDecl>,
    errors: &'a mut Vec<Diagnostic>,
}

impl Lowering<'_> {
    fn body(&mut self, body: &mut Vec<Stmt>) {
        let old = std::mem::take(body);
        for mut stmt in old {
            if let StmtKind::Reduce(r) = &stmt.kind {
                if self.rows.contains(&r.dst.name) {
                    body.push(stmt);
                    continue;
                }
                match self.reduce(r, stmt.span) {
                    Ok(stmts) => body.extend(stmts),
                    Err(e) => {
                        self.errors.push(e);
                        body.push(stmt);
                    }
                }
                continue;
            }
            for child in child_bodies_mut(&mut stmt) {
                self.body(child);
            }
            body.push(stmt);
        }
    }

    fn decl(&self, id: &Ident) -> Option<&BufferDecl> {
        self.allocs.iter().find(|b| b.name.name == id.name)
    }

    /// A new allocation of the kernel, named after `base`.
    fn alloc(
        &mut self,
        base: &str,
        shape: &[i64],
        dtype: DType,
        scope: Scope,
        span: Span,
    ) -> String {
        let name = self.names.fresh(base);
        self.new_allocs.push(BufferDecl {
            name: Ident::new(name.clone(), span),
            dtype,
            shape: shape.iter().map(|&n| Expr::int(n)).collect(),
            scope,
            span,
        });
        name
    }

    fn reduce(&mut self, r: &Reduce, span: Span) -> Result<Vec<Stmt>, Diagnostic> {
        let op = r.kind.name();
        let (Some(src), Some(dst)) = (self.decl(&r.src).cloned(), self.decl(&r.dst).cloned())
        else {
            return Err(Diagnostic::error(
                span,
                format!("`{op}` takes buffers allocated in this kernel"),
            ));
        };
        let shape: Option<Vec<i64>> = src.shape.iter().map(const_int).collect();
        let Some(shape) = shape else {
            return Err(Diagnostic::error(
                src.span,
                format!("`{op}` needs `{}` to have a constant shape", src.name.name),
            ));
        };
        let Some(axis) = r.axis(shape.len()) else {
            return Err(Diagnostic::error(
                span,
                format!("`dim={}` is out of range", r.dim),
            ));
        };
        let n = shape[axis];
        // The output's index space (a 1-D source reduces to the one element of `dst`).
        let mut out: Vec<i64> = shape
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != axis)
            .map(|(_, &e)| e)
            .collect();
        let scalar = out.is_empty();
        if scalar {
            out.push(1);
        }
        let outputs: i64 = out.iter().product();
        let per_output = if outputs >= self.threads {
            1
        } else {
            pow2_floor((self.threads / outputs).min(n))
        };
        let d = dst.dtype;
        let mut stmts = Vec::new();

        // 1. The source in shared memory.
        let staged = if src.scope == Scope::Shared {
            src.name.name.clone()
        } else {
            // The staging copy is the user's tile in shared memory: one past what a block
            // may have is refused here, at the reduction, not left to the verifier.
            if let Some(why) = past_shared_memory(&src, self.target) {
                return Err(Diagnostic::error(
                    span,
                    format!(
                        "`{op}` stages fragment `{}` in shared memory: {why}",
                        src.name.name
                    ),
                )
                .with_note(
                    "a fragment is reduced through a shared copy of it; reduce a smaller \
                     tile (or a shared buffer, which is read in place)",
                ));
            }
            let s = match self.staged.get(&src.name.name) {
                Some(s) => s.clone(),
                None => {
                    let base = format!("{}_red", src.name.name);
                    let s = self.alloc(&base, &shape, src.dtype, Scope::Shared, span);
                    self.staged.insert(src.name.name.clone(), s.clone());
                    s
                }
            };
            stmts.push(Stmt::new(
                StmtKind::Copy {
                    src: whole(&src.name.name, &shape, span),
                    dst: whole(&s, &shape, span),
                },
                span,
            ));
            s
        };

        // 2. Strided folds into registers (every nest binds fresh variables: names are
        // identities).
        let vars = self.fresh_vars(out.len());
        let p_var = self.names.fresh("p");
        let jj = self.names.fresh("jj");
        let mut acc_shape = out.clone();
        let mut acc_index = vars_of(&vars);
        if per_output > 1 {
            acc_shape.push(per_output);
            acc_index.push(Expr::var(&p_var));
        }
        let acc = self.alloc(
            &format!("{}_part", dst.name.name),
            &acc_shape,
            d,
            Scope::Fragment,
            span,
        );
        let lane = if per_output > 1 {
            Expr::var(&p_var)
        } else {
            Expr::int(0)
        };
        let j = bin(
            BinOp::Add,
            lane,
            bin(BinOp::Mul, Expr::var(&jj), Expr::int(per_output)),
        );
        // The source index: the output index with `j` put back at the axis.
        let mut src_index = if scalar { Vec::new() } else { vars_of(&vars) };
        src_index.insert(axis, j.clone());
        let mut x = load(&staged, src_index, span);
        // `|x|` in `dst`'s dtype, or — where `T.abs` does not take it (float8) — in the
        // source's or float32: for floats, negation commutes with every rounding, so the
        // absolute value taken before or after the conversion is the same number.
        let abs_in = if !r.kind.takes_abs() || MathFn::Abs.takes(d) || !d.is_float() {
            d
        } else if MathFn::Abs.takes(src.dtype) {
            src.dtype
        } else {
            DType::Float32
        };
        if src.dtype != abs_in {
            x = Expr::new(ExprKind::Cast(abs_in, Box::new(x)), span);
        }
        if r.kind.takes_abs() {
            x = Expr::new(ExprKind::Math(MathFn::Abs, vec![x]), span);
        }
        if abs_in != d {
            x = Expr::new(ExprKind::Cast(d, Box::new(x)), span);
        }
        let folded = combine(r.kind, load(&acc, acc_index.clone(), span), x, span);
        let fold = store(&acc, acc_index.clone(), folded, span);
        let fold = if n % per_output == 0 {
            fold
        } else {
            Stmt::new(
                StmtKind::If {
                    cond: bin(BinOp::Lt, j, Expr::int(n)),
                    then_body: vec![fold],
                    else_body: Vec::new(),
                },
                span,
            )
        };
        let trips = (n + per_output - 1) / per_output;
        let body = vec![
            store(&acc, acc_index, identity(r.kind, d), span),
            for_loop(&jj, Expr::int(trips), ForKind::Serial, vec![fold], span),
        ];
        let mut loop_vars = vars;
        let mut extents = out.clone();
        if per_output > 1 {
            loop_vars.push(p_var);
            extents.push(per_output);
        }
        stmts.push(parallel(&loop_vars, &extents, body, span));

        // 3. The tree over the partials, in shared memory.
        let vars = self.fresh_vars(out.len());
        let result = if per_output > 1 {
            let w = self.alloc(
                &format!("{}_tree", dst.name.name),
                &acc_shape,
                d,
                Scope::Shared,
                span,
            );
            stmts.push(Stmt::new(
                StmtKind::Copy {
                    src: whole(&acc, &acc_shape, span),
                    dst: whole(&w, &acc_shape, span),
                },
                span,
            ));
            let mut s = per_output / 2;
            while s >= 1 {
                let mut lv = self.fresh_vars(out.len());
                let q = self.names.fresh("q");
                let at = |off: i64| {
                    let mut idx = vars_of(&lv);
                    idx.push(bin(BinOp::Add, Expr::var(&q), Expr::int(off)));
                    idx
                };
                let halved = combine(r.kind, load(&w, at(0), span), load(&w, at(s), span), span);
                let step = store(&w, at(0), halved, span);
                lv.push(q);
                let mut ext = out.clone();
                ext.push(s);
                stmts.push(parallel(&lv, &ext, vec![step], span));
                s /= 2;
            }
            let mut idx = vars_of(&vars);
            idx.push(Expr::int(0));
            load(&w, idx, span)
        } else {
            load(&acc, vars_of(&vars), span)
        };

        // 4. Into `dst`.
        // A scalar `dst` (shape `(1,)`) is indexed by the one output variable too, so the
        // store covers the fragment element for element.
        let dst_index = vars_of(&vars);
        let value = if r.clear {
            result
        } else {
            combine(
                r.kind,
                load(&dst.name.name, dst_index.clone(), span),
                result,
                span,
            )
        };
        let fin = store(&dst.name.name, dst_index, value, span);
        stmts.push(parallel(&vars, &out, vec![fin], span));
        Ok(stmts)
    }

    /// `count` fresh loop variables `r0, r1, …`.
    fn fresh_vars(&mut self, count: usize) -> Vec<String> {
        (0..count)
            .map(|i| self.names.fresh(&format!("r{i}")))
            .collect()
    }
}

fn vars_of(vars: &[String]) -> Vec<Expr> {
    vars.iter().map(Expr::var).collect()
}

/// The largest power of two ≤ `v` (1 for `v` < 2).
fn pow2_floor(v: i64) -> i64 {
    if v < 2 {
        1
    } else {
        1 << (63 - v.leading_zeros())
    }
}

fn combine(kind: ReduceKind, a: Expr, b: Expr, span: Span) -> Expr {
    Expr::binary(kind.combine(), a, b, span)
}

fn whole(buffer: &str, shape: &[i64], span: Span) -> Region {
    Region {
        buffer: Ident::new(buffer, span),
        ranges: shape
            .iter()
            .map(|&n| Range {
                start: Expr::int(0),
                extent: Expr::int(n),
            })
            .collect(),
        span,
    }
}

/// `for v0, v1, … in T.Parallel(e0, e1, …): body`.
fn parallel(vars: &[String], extents: &[i64], body: Vec<Stmt>, span: Span) -> Stmt {
    let mut stmt_body = body;
    for (v, &e) in vars.iter().zip(extents).rev() {
        stmt_body = vec![for_loop(
            v,
            Expr::int(e),
            ForKind::Parallel,
            stmt_body,
            span,
        )];
    }
    stmt_body
        .pop()
        .unwrap_or_else(|| Stmt::new(StmtKind::Note(String::new()), span))
}
