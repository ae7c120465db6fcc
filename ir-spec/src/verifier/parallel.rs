//! `T.Parallel` loops at the tile level: their iterations are spread over the block's
//! threads, so what a statement inside one means is one thread's work.
//!
//! - L8: no tile op (`T.copy`, `T.fill` / `T.clear`, `T.gemm`, `T.reduce_*`) inside a
//!   `T.Parallel` loop: a tile op is the whole block's work.
//! - L9: a local buffer stored inside a `T.Parallel` loop of block-level code is that loop
//!   nest's per-iteration temporary (each thread has its own copy, holding what the
//!   iterations it ran wrote): no statement outside the nest names it. (Inside, an iteration
//!   reading what another one wrote is a conflict the interpreter reports: `interp/parallel.rs`.)

use super::Checker;
use crate::diagnostic::Diagnostic;
use crate::ir::{ForKind, Kernel, Scope, Stmt, StmtKind, ThreadTag};
use crate::span::Span;
use crate::visit::{child_bodies, for_each_stmt, stmt_buffer_uses};
use std::collections::HashMap;

fn is_parallel(s: &Stmt) -> bool {
    matches!(&s.kind, StmtKind::For(f) if f.kind == ForKind::Parallel)
}

fn is_thread_region(s: &Stmt) -> bool {
    matches!(&s.kind, StmtKind::For(f) if matches!(f.kind,
        ForKind::ThreadBinding(ThreadTag::ThreadX | ThreadTag::ThreadY | ThreadTag::ThreadZ)))
}

impl<'f> Checker<'f> {
    /// L8, at tile op `op` (at `span`).
    pub(super) fn tile_op_in_parallel(&mut self, op: &str, span: Span) {
        let Some(parallel) = self.parallel else {
            return;
        };
        let diag = Diagnostic::error(self.at(span), format!("{op} inside a `T.Parallel` loop"))
            .with_note_at(
                parallel,
                "this loop spreads its iterations over the block's threads",
            )
            .with_note(
                "a tile op is the whole block's work: write it outside the `T.Parallel` loop \
                 (a serial loop around it may run it several times)",
            );
        self.push(diag);
    }

    /// L9 for kernel `k`.
    pub(super) fn parallel_locals(&mut self, k: &'f Kernel) {
        let locals: Vec<&str> = k
            .allocs
            .iter()
            .filter(|a| a.scope == Scope::Local)
            .map(|a| a.name.name.as_str())
            .collect();
        if locals.is_empty() {
            return;
        }
        // Per local: the outermost `T.Parallel` nest that stores it first (its index among
        // the nests, and the store's span).
        let mut nests: Vec<&Stmt> = Vec::new();
        let mut outside: Vec<(&str, Span)> = Vec::new();
        collect(&k.body, &mut nests, &mut outside);
        let mut stored: HashMap<&str, (usize, Span)> = HashMap::new();
        let mut named_in: Vec<(usize, &str, Span)> = Vec::new();
        for (n, nest) in nests.iter().enumerate() {
            for_each_stmt(std::slice::from_ref(*nest), &mut |s| {
                if let StmtKind::Store { buffer, .. } = &s.kind {
                    if locals.contains(&buffer.name.as_str()) {
                        stored
                            .entry(buffer.name.as_str())
                            .or_insert((n, buffer.span));
                    }
                }
                for (name, at) in stmt_buffer_uses(s) {
                    named_in.push((n, name, at));
                }
            });
        }
        let mut reported: Vec<&str> = Vec::new();
        let other_nest = named_in
            .iter()
            .filter(|(n, name, _)| stored.get(name).is_some_and(|(m, _)| m != n))
            .map(|&(_, name, at)| (name, at));
        let uses: Vec<(&str, Span)> = outside
            .iter()
            .copied()
            .filter(|(name, _)| stored.contains_key(name))
            .chain(other_nest)
            .collect();
        for (name, at) in uses {
            let Some(&(_, stored_at)) = stored.get(name) else {
                continue;
            };
            if reported.contains(&name) {
                continue;
            }
            reported.push(name);
            self.push(
                Diagnostic::error(
                    self.at(at),
                    format!(
                        "local buffer `{name}` is stored inside a `T.Parallel` loop and named \
                         outside it here"
                    ),
                )
                .with_note_at(
                    self.at(stored_at),
                    "stored by an iteration of a `T.Parallel` loop here",
                )
                .with_note(
                    "a local buffer has one copy per thread and the loop's iterations run on \
                     different threads, so outside the loop no thread holds every iteration's \
                     value: use a fragment (or shared memory) to keep values across loops",
                ),
            );
        }
    }
}

/// The outermost `T.Parallel` nests of block-level code in `body`, and the buffers named
/// outside them (thread regions are per-thread code, checked by K9 / K11, and skipped).
fn collect<'a>(body: &'a [Stmt], nests: &mut Vec<&'a Stmt>, outside: &mut Vec<(&'a str, Span)>) {
    for s in body {
        if is_thread_region(s) {
            continue;
        }
        if is_parallel(s) {
            nests.push(s);
            continue;
        }
        outside.extend(stmt_buffer_uses(s));
        for child in child_bodies(s) {
            collect(child, nests, outside);
        }
    }
}
