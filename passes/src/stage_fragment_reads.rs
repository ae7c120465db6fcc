//! `stage-fragment-reads`: a `T.Parallel` nest may read a fragment element another thread
//! holds — a row vector broadcast along a tile (`acc[i, j] *= scale[i]`), a fragment of
//! another shape, a transposed read. Such a read cannot be served from the reading
//! thread's registers, so before the nest the fragment is copied whole into a shared
//! buffer of its shape (`T.copy(F, F_shared)`), and those reads — only those — read the
//! copy. Reads `F[i, j, …]` with exactly the nest's variables, in order, over a fragment of
//! exactly the nest's extents stay register reads (`lower-tile-ops` serves them in place).
//!
//! A `T.gemm` operand `A` or `B` held in a fragment (flash attention's `P @ V`, whose `P`
//! is the softmax of the first gemm's accumulator) is staged the same way, right before the
//! gemm: the tensor-core lowerings read operands from shared memory — except an A that
//! wgmma reads from registers (`analysis::wgmma::reads_a_from_registers`: sm_90a, the
//! warpgroups split M only) or that mma.sync reads from registers
//! (`analysis::mma::reads_a_from_registers`: the warps split M only, and A is laid out as
//! the scores it is copied from), which stays where it is.
//!
//! A gemm operand fragment `F` that the same statement list filled whole from a shared
//! buffer `X` of its shape and dtype (`T.copy(X, F)`, TileLang's MLA and flash-decoding
//! `T.copy(acc_s, S_shared); T.copy(S_shared, acc_s_cast)`), with neither named by any
//! statement between, already has its copy: the gemm reads `X` and no buffer is added (the
//! bytes TileLang's own plan counts). Names are identities (views are resolved at the
//! front), so a statement that writes `F` or `X` names it.
//!
//! A copy per nest is a shared round trip and a barrier (`thread-binding` places it). Row
//! vectors (`analysis::rows`: 1-D fragments that follow the rows of the 2-D fragments they
//! are broadcast along) are not staged: `layout-inference` replicates them in the threads
//! that hold their rows, and `lower-tile-ops` reads them from registers. Writes are never
//! staged: a write to part of a fragment stays an error of `lower-tile-ops`.

use crate::analysis::access::element_for_element;
use crate::analysis::block::Block;
use crate::analysis::footprint::past_shared_memory;
use crate::analysis::kernels::for_each_kernel;
use crate::analysis::mma;
use crate::analysis::rows::{parallel_nest, RowVectors};
use crate::analysis::wgmma::reads_a_from_registers;
use crate::context::PassContext;
use crate::names::NameSet;
use crate::pass::Pass;
use std::collections::BTreeSet;
use tlc_ir::verifier::const_int;
use tlc_ir::visit::{
    child_bodies_mut, for_each_stmt, for_each_subexpr, map_body_exprs, stmt_buffer_uses, stmt_exprs,
};
use tlc_ir::{
    BufferDecl, Diagnostic, Expr, ExprKind, For, ForKind, Gemm, Ident, PrimFunc, Range, Region,
    Scope, Span, Stmt, StmtKind,
};

pub struct StageFragmentReads;

impl Pass for StageFragmentReads {
    fn name(&self) -> &'static str {
        "stage-fragment-reads"
    }

    fn description(&self) -> &'static str {
        "fragment reads a T.Parallel nest cannot serve from registers (broadcasts, other shapes) -> a staged shared copy"
    }

    fn run(&self, mut func: PrimFunc, cx: &PassContext) -> Result<PrimFunc, Vec<Diagnostic>> {
        let target = cx.target();
        let mut names = NameSet::of(&func);
        let mut errors = Vec::new();
        for_each_kernel(&mut func.body, &mut |k, span| {
            let rows = match Block::of(k, span) {
                Ok(b) => RowVectors::of(k, b.threads(), target.warp_size()),
                Err(_) => RowVectors::default(),
            };
            let threads = Block::of(k, span).ok().map(|b| b.threads());
            let allocs = k.allocs.clone();
            let annotated = k.layouts.clone();
            let mut gemms: Vec<Gemm> = Vec::new();
            for_each_stmt(&k.body, &mut |s| {
                if let StmtKind::Gemm(g) = &s.kind {
                    gemms.push(g.clone());
                }
            });
            let register_a = |g: &Gemm| {
                threads.is_some_and(|t| {
                    let buffer = |name: &str| allocs.iter().find(|b| b.name.name == name).cloned();
                    let layout = |name: &str| {
                        annotated
                            .iter()
                            .find(|a| a.buffer.name == name)
                            .map(|a| a.layout)
                    };
                    reads_a_from_registers(g, &gemms, target, t, &buffer, &layout)
                        || mma::reads_a_from_registers(g, &gemms, target, t, &buffer, &layout)
                })
            };
            let mut st = Staging {
                register_a: &register_a,
                fragments: k
                    .allocs
                    .iter()
                    .filter(|b| b.scope == Scope::Fragment && !rows.contains(&b.name.name))
                    .cloned()
                    .collect(),
                shared: k
                    .allocs
                    .iter()
                    .filter(|b| b.scope == Scope::Shared)
                    .cloned()
                    .collect(),
                names: &mut names,
                target,
                new_allocs: Vec::new(),
                staged: Default::default(),
                errors: Vec::new(),
            };
            st.body(&mut k.body);
            errors.extend(st.errors);
            k.allocs.extend(st.new_allocs);
        });
        if errors.is_empty() {
            Ok(func)
        } else {
            Err(errors)
        }
    }
}

struct Staging<'a> {
    /// Whether a gemm reads its A fragment from registers (not staged).
    register_a: &'a dyn Fn(&Gemm) -> bool,
    fragments: Vec<BufferDecl>,
    /// The kernel's shared allocations (a fragment copied whole from one mirrors it).
    shared: Vec<BufferDecl>,
    names: &'a mut NameSet,
    /// Bounds a staged copy (a block's shared memory).
    target: tlc_ir::Target,
    new_allocs: Vec<BufferDecl>,
    /// The shared copy of each fragment staged so far: one per fragment and kernel, written
    /// afresh before every use (the barriers between are `thread-binding`'s).
    staged: std::collections::HashMap<String, String>,
    errors: Vec<Diagnostic>,
}

impl Staging<'_> {
    fn fragment(&self, name: &str) -> Option<&BufferDecl> {
        self.fragments.iter().find(|b| b.name.name == name)
    }

    fn body(&mut self, body: &mut Vec<Stmt>) {
        let old = std::mem::take(body);
        // Fragment -> the shared buffer it was copied whole from, in this list, with neither
        // named since.
        let mut mirrors: Vec<(String, String)> = Vec::new();
        for mut stmt in old {
            if let StmtKind::Gemm(g) = &mut stmt.kind {
                let keep_a = (self.register_a)(g);
                for (i, r) in [&mut g.a, &mut g.b].into_iter().enumerate() {
                    if i == 0 && keep_a {
                        continue;
                    }
                    let Some(decl) = self.fragment(&r.buffer.name).cloned() else {
                        continue;
                    };
                    if let Some((_, x)) = mirrors.iter().find(|(f, _)| *f == decl.name.name) {
                        r.buffer.name = x.clone();
                        continue;
                    }
                    let staged = self.stage(&decl, stmt.span);
                    body.push(staged.1);
                    r.buffer.name = staged.0;
                }
                let c = g.c.buffer.name.clone();
                mirrors.retain(|(f, x)| *f != c && *x != c);
                body.push(stmt);
                continue;
            }
            let named = names_in(&stmt);
            mirrors.retain(|(f, x)| !named.contains(f) && !named.contains(x));
            if let Some(m) = self.mirror(&stmt) {
                mirrors.push(m);
            }
            if let StmtKind::For(f) = &mut stmt.kind {
                if f.kind == ForKind::Parallel {
                    let copies = self.nest(f, stmt.span);
                    body.extend(copies);
                    body.push(stmt);
                    continue;
                }
            }
            for child in child_bodies_mut(&mut stmt) {
                self.body(child);
            }
            body.push(stmt);
        }
    }

    /// Stages the indirect fragment reads of the nest `outer`; returns the copies that go
    /// before it.
    fn nest(&mut self, outer: &mut For, span: Span) -> Vec<Stmt> {
        let (vars, extents, _) = parallel_nest(outer);
        // Fragments read other than element for element.
        let mut indirect: BTreeSet<String> = BTreeSet::new();
        let consts: Vec<Option<i64>> = extents.iter().map(|&e| Some(e)).collect();
        let direct = |buf: &BufferDecl, indices: &[Expr]| -> bool {
            let shape: Option<Vec<i64>> = buf.shape.iter().map(const_int).collect();
            shape.is_some_and(|s| element_for_element(&s, indices, &vars, &consts))
        };
        for_each_stmt(&outer.body, &mut |s| {
            for e in stmt_exprs(s) {
                for_each_subexpr(e, &mut |x| {
                    if let ExprKind::Load { buffer, indices } = &x.kind {
                        if let Some(b) = self.fragment(buffer) {
                            if !direct(b, indices) {
                                indirect.insert(buffer.clone());
                            }
                        }
                    }
                });
            }
        });
        // A fragment the nest also writes cannot be served from a copy made before it: the
        // read may be of this iteration's own, just written, element in another spelling.
        let mut written: BTreeSet<String> = BTreeSet::new();
        for_each_stmt(&outer.body, &mut |s| {
            if let StmtKind::Store { buffer, .. } = &s.kind {
                if self.fragment(&buffer.name).is_some() {
                    written.insert(buffer.name.clone());
                }
            }
        });
        if let Some(name) = indirect.iter().find(|n| written.contains(*n)) {
            self.errors.push(
                Diagnostic::error(
                    span,
                    format!(
                        "this T.Parallel nest writes fragment `{name}` and reads it at another \
                         index than the element it writes, which is not lowered yet"
                    ),
                )
                .with_note(format!(
                    "read `{name}` with the nest's own variables (`{name}[i, j]`), or split the \
                     nest so the write finishes before the other read"
                )),
            );
            return Vec::new();
        }
        let mut copies = Vec::new();
        for name in indirect {
            let Some(decl) = self.fragment(&name).cloned() else {
                continue;
            };
            let (staged, copy) = self.stage(&decl, span);
            copies.push(copy);
            let is_direct = |indices: &[Expr]| direct(&decl, indices);
            map_body_exprs(&mut outer.body, &mut |e| match e.kind {
                ExprKind::Load { buffer, indices } if buffer == name && !is_direct(&indices) => {
                    Expr::new(
                        ExprKind::Load {
                            buffer: staged.clone(),
                            indices,
                        },
                        e.span,
                    )
                }
                kind => Expr::new(kind, e.span),
            });
        }
        copies
    }
}

impl Staging<'_> {
    /// `(F, X)` when `stmt` is `T.copy(X, F)` of a whole shared `X` into a whole fragment
    /// `F` of the same shape and dtype: afterwards `F` holds exactly `X`'s elements.
    fn mirror(&self, stmt: &Stmt) -> Option<(String, String)> {
        let StmtKind::Copy { src, dst } = &stmt.kind else {
            return None;
        };
        let f = self.fragment(&dst.buffer.name)?;
        let x = self
            .shared
            .iter()
            .find(|b| b.name.name == src.buffer.name)?;
        let same_shape = f.shape.len() == x.shape.len()
            && f.shape
                .iter()
                .zip(&x.shape)
                .all(|(a, b)| matches!((const_int(a), const_int(b)), (Some(p), Some(q)) if p == q));
        let covers = |r: &Region, shape: &[Expr]| {
            r.ranges.len() == shape.len() && r.ranges.iter().zip(shape).all(|(rg, n)| {
                const_int(&rg.start) == Some(0)
                    && matches!((const_int(&rg.extent), const_int(n)), (Some(p), Some(q)) if p == q)
            })
        };
        (f.dtype == x.dtype && same_shape && covers(src, &x.shape) && covers(dst, &f.shape))
            .then(|| (f.name.name.clone(), x.name.name.clone()))
    }

    /// A new shared buffer of `decl`'s shape and dtype, and the copy of `decl` into it.
    fn stage(&mut self, decl: &BufferDecl, span: Span) -> (String, Stmt) {
        let name = &decl.name.name;
        let staged = match self.staged.get(name) {
            Some(s) => s.clone(),
            None => {
                // The copy is the whole fragment in shared memory: one past what a block may
                // have is refused at the read that needs it (the pass then fails with it).
                if let Some(why) = past_shared_memory(decl, self.target) {
                    self.errors.push(
                        Diagnostic::error(
                            span,
                            format!(
                                "fragment `{name}` is read here from other threads' registers, \
                                 so it is staged in shared memory: {why}"
                            ),
                        )
                        .with_note(format!(
                            "read a fragment of the nest's extents with the nest's own variables (a register \
                             read), or make `{name}` smaller"
                        )),
                    );
                }
                let s = self.names.fresh(&format!("{name}_shared"));
                self.new_allocs.push(BufferDecl {
                    name: Ident::new(s.clone(), decl.span),
                    dtype: decl.dtype,
                    shape: decl.shape.clone(),
                    scope: Scope::Shared,
                    span: decl.span,
                });
                self.staged.insert(name.clone(), s.clone());
                s
            }
        };
        let copy = Stmt::new(
            StmtKind::Copy {
                src: whole(name, &decl.shape, span),
                dst: whole(&staged, &decl.shape, span),
            },
            span,
        );
        (staged, copy)
    }
}

/// Every buffer `stmt` or a statement nested in it names (operands, stores, loads).
fn names_in(stmt: &Stmt) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for_each_stmt(std::slice::from_ref(stmt), &mut |s| {
        out.extend(stmt_buffer_uses(s).into_iter().map(|(n, _)| n.to_string()));
    });
    out
}

fn whole(buffer: &str, shape: &[Expr], span: Span) -> Region {
    Region {
        buffer: Ident::new(buffer, span),
        ranges: shape
            .iter()
            .map(|n| Range {
                start: Expr::int(0),
                extent: n.clone(),
            })
            .collect(),
        span,
    }
}
