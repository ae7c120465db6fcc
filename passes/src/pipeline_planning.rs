//! `pipeline-planning` (tile level): fills `order=[…], stage=[…]` of every `T.Pipelined`
//! loop that has none, and checks the ones the user wrote.
//!
//! The body's statements form a dependency graph (`analysis::schedule`, petgraph): an edge
//! `i → j` (`i` before `j` in the body) when `j` reads a buffer `i` writes (RAW), writes one
//! `i` reads (WAR) or writes (WAW), or uses a variable `i` binds (a let). Plan:
//!
//! - **stage 0**: the global → shared copies — `T.copy(global, shared)`, and `T.Parallel`
//!   nests whose stores all go to shared buffers and whose loads all read global ones — that
//!   can run `num_stages - 1` iterations ahead: they depend on no later-stage statement of
//!   the same iteration, read nothing a later-stage statement writes (in any iteration), and
//!   write shared buffers that only stage-0 statements write and that nothing before the loop
//!   touches (`inject-software-pipeline` gives them one copy per stage);
//! - **stage `num_stages - 1`**: everything else;
//! - a *pure* let — its value reads no memory, or only global or shared buffers the loop
//!   never writes (an index tensor: a page table), so it is the same wherever in the loop it
//!   is evaluated — takes stage 0 when a stage-0 statement needs it
//!   (`inject-software-pipeline` evaluates pure lets wherever they are needed): a copy whose
//!   origin is loaded from a page table runs ahead with its entry;
//! - **order**: a topological order of the graph, stage-0 statements first where the
//!   dependencies allow, else in body order (`order[i]` is statement `i`'s position);
//! - a note (`T.note`) takes the stage of the statement it annotates (the next one that is
//!   not a note, else the one before it) and its place just before it (after it);
//! - a global → shared copy the plan keeps in the last stage (so `inject-software-pipeline`
//!   makes the loop serial) gets a `T.note` at the head of the body saying why — e.g. a
//!   shared buffer that a second pipelined loop also fills.
//!
//! A user-given `order` / `stage` must have one entry per body statement, stages in
//! `0..num_stages`, `order` a permutation, no statement in an earlier stage than a statement
//! of the same iteration it depends on, `order` consistent with the dependencies within a
//! stage, and the stage-0 statements must satisfy the conditions above; violations are
//! errors located at the statement.

use crate::analysis::access::{count_sites, SitesFrom};
use crate::analysis::kernels::for_each_kernel;
use crate::analysis::schedule::{KernelFacts, LoopGraph};
use crate::context::PassContext;
use crate::pass::Pass;
use std::collections::HashMap;
use tlc_ir::visit::child_bodies_mut;
use tlc_ir::{Diagnostic, ForKind, PrimFunc, Stmt, StmtKind, Target};

pub struct PipelinePlanning;

impl Pass for PipelinePlanning {
    fn name(&self) -> &'static str {
        "pipeline-planning"
    }

    fn description(&self) -> &'static str {
        "T.Pipelined loops: stage 0 for global->shared copies, the last stage for the rest, order from the body's dependency graph"
    }

    fn run(&self, mut func: PrimFunc, cx: &PassContext) -> Result<PrimFunc, Vec<Diagnostic>> {
        let mut errors = Vec::new();
        let params = func.params.clone();
        for_each_kernel(&mut func.body, &mut |k, _| {
            let facts = KernelFacts::of(k, &params);
            plan_list(&mut k.body, &facts, cx.target(), &mut errors);
        });
        if errors.is_empty() {
            Ok(func)
        } else {
            Err(errors)
        }
    }
}

/// Plans (or checks) every pipelined loop of `list`, recursively.
fn plan_list(list: &mut [Stmt], facts: &KernelFacts, target: Target, errors: &mut Vec<Diagnostic>) {
    let mut sites = SitesFrom::new(list);
    let mut here = HashMap::new();
    for stmt in list.iter_mut() {
        // Past the statement before (its sites counted before it was planned).
        sites.pass(&here);
        here = count_sites(std::slice::from_ref(stmt));
        let from_here = sites.sites();
        let span = stmt.span;
        if let StmtKind::For(f) = &mut stmt.kind {
            if let ForKind::Pipelined {
                num_stages,
                order,
                stage,
            } = &f.kind
            {
                let graph = LoopGraph::build(&f.body, facts, from_here);
                let Some(count) = num_stages.as_int() else {
                    errors.push(Diagnostic::error(
                        num_stages.span,
                        format!("`num_stages` is `{num_stages}`, not a constant: bind its tunables first"),
                    ));
                    continue;
                };
                if order.is_empty() && stage.is_empty() {
                    let (mut order, mut stage) = graph.plan(count);
                    let late = graph.copies_kept_late(&stage);
                    let num_stages = num_stages.clone();
                    if !late.is_empty() {
                        // Say why the loop will not be pipelined where it is read; the note
                        // joins the body, which is planned again around it.
                        let text = format!(
                            "T.Pipelined(num_stages={count}) runs as a serial loop: {}",
                            late.join("; ")
                        );
                        f.body.insert(0, Stmt::new(StmtKind::Note(text), span));
                        let graph = LoopGraph::build(&f.body, facts, from_here);
                        (order, stage) = graph.plan(count);
                        errors.extend(graph.ring_too_large(&num_stages, count, &stage, target));
                    } else {
                        errors.extend(graph.ring_too_large(&num_stages, count, &stage, target));
                    }
                    f.kind = ForKind::Pipelined {
                        num_stages,
                        order,
                        stage,
                    };
                } else {
                    let invalid = graph.validate(f, span, count, order, stage);
                    if invalid.is_empty() {
                        errors.extend(graph.ring_too_large(num_stages, count, stage, target));
                    }
                    errors.extend(invalid);
                }
            }
        }
        for child in child_bodies_mut(stmt) {
            plan_list(child, facts, target, errors);
        }
    }
}
