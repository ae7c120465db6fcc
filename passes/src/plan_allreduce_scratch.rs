//! `plan-allreduce-scratch`: an all-reduce whose butterfly pairs threads of different warps
//! (or threads a lane xor cannot reach: a reduced axis above a block axis whose extent is
//! not a power of two) exchanges those steps through shared memory. This pass gives each
//! such `T.thread_allreduce` its `scratch=` buffer: one shared allocation per kernel and
//! dtype, one element per thread of the block, named `allreduce_scratch` (fresh).
//!
//! Which steps need it is [`tlc_ir::allreduce_steps`]'s answer (the one definition the
//! verifier, the interpreter and code generation share). The meaning does not change: the
//! interpreter folds the same butterfly with or without the scratch, and with it runs the
//! barriers and writes the PTX makes, so the shared-memory plan that follows (which may let
//! the scratch share bytes with buffers dead at that point) is checked by the differential.
//! All-reduces that shuffle only, and those that already name a scratch, are left alone.

use crate::analysis::block::Block;
use crate::analysis::kernels::for_each_kernel;
use crate::context::PassContext;
use crate::names::NameSet;
use crate::pass::Pass;
use std::collections::HashMap;
use tlc_ir::visit::child_bodies_mut;
use tlc_ir::{
    allreduce_steps, BufferDecl, DType, Diagnostic, Expr, ForKind, Ident, PrimFunc, Scope, Stmt,
    StmtKind,
};

pub struct PlanAllreduceScratch;

impl Pass for PlanAllreduceScratch {
    fn name(&self) -> &'static str {
        "plan-allreduce-scratch"
    }

    fn description(&self) -> &'static str {
        "T.thread_allreduce steps between warps -> a shared scratch buffer (one element per thread)"
    }

    fn run(&self, mut func: PrimFunc, cx: &PassContext) -> Result<PrimFunc, Vec<Diagnostic>> {
        // The result buffers' dtypes (the verifier's R3 made the value's the same).
        let dtypes: HashMap<String, DType> = cx
            .func_info(&func)?
            .buffers
            .iter()
            .map(|(n, d)| (n.clone(), d.dtype))
            .collect();
        let mut names = NameSet::of(&func);
        let mut errors = Vec::new();
        for_each_kernel(&mut func.body, &mut |k, span| {
            if !has_allreduce(&k.body) {
                return;
            }
            let block = match Block::of(k, span) {
                Ok(b) => b,
                Err(e) => {
                    errors.extend(e);
                    return;
                }
            };
            let mut cx = Planner {
                shape: block.dims().to_vec(),
                threads: block.threads(),
                names: &mut names,
                dtypes: &dtypes,
                made: Vec::new(),
                axes: Vec::new(),
            };
            cx.body(&mut k.body);
            k.allocs.extend(cx.made.into_iter().map(|(_, decl)| decl));
        });
        if errors.is_empty() {
            Ok(func)
        } else {
            Err(errors)
        }
    }
}

fn has_allreduce(body: &[Stmt]) -> bool {
    let mut found = false;
    tlc_ir::visit::for_each_stmt(body, &mut |s| {
        found |= matches!(s.kind, StmtKind::AllReduce(_));
    });
    found
}

struct Planner<'a> {
    shape: Vec<i64>,
    threads: i64,
    names: &'a mut NameSet,
    dtypes: &'a HashMap<String, DType>,
    /// The scratch buffers made for this kernel, by dtype.
    made: Vec<(DType, BufferDecl)>,
    /// The enclosing thread-binding loops' variables and axes.
    axes: Vec<(String, usize)>,
}

impl Planner<'_> {
    fn body(&mut self, body: &mut [Stmt]) {
        for stmt in body {
            self.stmt(stmt);
        }
    }

    fn stmt(&mut self, stmt: &mut Stmt) {
        let bound = match &stmt.kind {
            StmtKind::For(f) => match f.kind {
                ForKind::ThreadBinding(tag) => {
                    tag.thread_axis().map(|axis| (f.var.name.clone(), axis))
                }
                _ => None,
            },
            _ => None,
        };
        let depth = self.axes.len();
        self.axes.extend(bound);
        if let StmtKind::AllReduce(r) = &mut stmt.kind {
            if r.scratch.is_none() {
                let axes: Vec<usize> = r
                    .threads
                    .iter()
                    .filter_map(|t| {
                        self.axes
                            .iter()
                            .rev()
                            .find(|(n, _)| *n == t.name)
                            .map(|&(_, a)| a)
                    })
                    .collect();
                let steps = allreduce_steps(&self.shape, &axes).unwrap_or_default();
                if steps.iter().any(|s| s.lane_xor.is_none()) {
                    if let Some(&dtype) = self.dtypes.get(&r.buffer.name) {
                        r.scratch = Some(self.scratch(dtype, stmt.span));
                    }
                }
            }
        }
        for child in child_bodies_mut(stmt) {
            self.body(child);
        }
        self.axes.truncate(depth);
    }

    /// The kernel's scratch of `dtype`, made on first use.
    fn scratch(&mut self, dtype: DType, span: tlc_ir::Span) -> Ident {
        if let Some((_, d)) = self.made.iter().find(|(t, _)| *t == dtype) {
            return Ident::new(d.name.name.clone(), span);
        }
        let name = self.names.fresh("allreduce_scratch");
        self.made.push((
            dtype,
            BufferDecl {
                name: Ident::new(name.clone(), span),
                dtype,
                shape: vec![Expr::int(self.threads)],
                scope: Scope::Shared,
                span,
            },
        ));
        Ident::new(name, span)
    }
}
