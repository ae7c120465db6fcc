//! Thread regions in tile-level kernels (docs/ir.md, "Thread regions"): a kernel may mix
//! tile ops, which describe the whole block's work and are lowered onto its threads, with
//! `threadIdx` binding loops written by hand, which already are per-thread code.
//!
//! - K9: in a kernel with tile ops (`T.copy`, `T.fill`, `T.gemm`, `T.reduce_*`,
//!   `T.Parallel`) or fragments, a thread region (an outermost `threadIdx` loop) holds no tile op and
//!   names no fragment (whose elements layout inference spreads over the threads), and no
//!   thread region sits inside a `T.Parallel` loop.
//! - K11: a local buffer named inside a thread region is per thread; block-level code of the
//!   same kernel does not name it (one copy per thread has no block-level meaning).

use super::Checker;
use crate::diagnostic::Diagnostic;
use crate::ir::{ForKind, Kernel, Scope, Stmt, StmtKind, ThreadTag};
use crate::span::Span;
use crate::visit::{child_bodies, for_each_stmt, stmt_buffer_uses};

fn is_region(s: &Stmt) -> bool {
    matches!(&s.kind, StmtKind::For(f) if matches!(f.kind,
        ForKind::ThreadBinding(ThreadTag::ThreadX | ThreadTag::ThreadY | ThreadTag::ThreadZ)))
}

/// A tile op's name, for messages.
fn tile_op(s: &Stmt) -> Option<&'static str> {
    Some(match &s.kind {
        StmtKind::Copy { .. } => "`T.copy`",
        StmtKind::Fill { .. } => "`T.fill`",
        StmtKind::Gemm(_) => "`T.gemm`",
        StmtKind::Reduce(_) => "a reduction",
        StmtKind::For(f) if f.kind == ForKind::Parallel => "a `T.Parallel` loop",
        _ => return None,
    })
}

impl<'f> Checker<'f> {
    pub(super) fn thread_regions(&mut self, k: &'f Kernel) {
        // A fragment makes a kernel tile level too: layout inference spreads its elements
        // over the threads, whether or not a tile op names it.
        let mut has_tile_op = k.allocs.iter().any(|a| a.scope == Scope::Fragment);
        for_each_stmt(&k.body, &mut |s| has_tile_op |= tile_op(s).is_some());
        if !has_tile_op {
            return;
        }
        let kind = |name: &str| {
            k.allocs
                .iter()
                .find(|a| a.name.name == name)
                .map(|a| a.scope)
        };
        let mut regions: Vec<(&Stmt, Span)> = Vec::new();
        let mut outside: Vec<(&str, Span)> = Vec::new();
        collect(&k.body, false, &mut regions, &mut outside);
        let mut per_thread: Vec<(&str, Span)> = Vec::new();
        for (region, at) in &regions {
            let region_at = self.at(*at);
            let mut errors: Vec<Diagnostic> = Vec::new();
            for_each_stmt(std::slice::from_ref(*region), &mut |s| {
                if let Some(op) = tile_op(s) {
                    errors.push(
                        Diagnostic::error(self.at(s.span), format!("{op} inside a thread region"))
                            .with_note_at(region_at, "this loop makes its body per-thread code")
                            .with_note(
                                "tile ops run on the whole block: write them outside the \
                                 `T.thread_binding` loop",
                            ),
                    );
                }
                for (name, use_at) in stmt_buffer_uses(s) {
                    match kind(name) {
                        Some(Scope::Fragment) => errors.push(
                            Diagnostic::error(
                                self.at(use_at),
                                format!("fragment `{name}` in a thread region"),
                            )
                            .with_note_at(region_at, "this loop makes its body per-thread code")
                            .with_note(
                                "a fragment's elements are spread over the threads by layout \
                                 inference; access it in a `T.Parallel` loop",
                            ),
                        ),
                        Some(Scope::Local) => per_thread.push((name, use_at)),
                        _ => {}
                    }
                }
            });
            for e in errors {
                self.push(e);
            }
        }
        for_each_stmt(&k.body, &mut |s| {
            if matches!(&s.kind, StmtKind::For(f) if f.kind == ForKind::Parallel) {
                let mut inner = None;
                for_each_stmt(std::slice::from_ref(s), &mut |x| {
                    if inner.is_none() && is_region(x) {
                        inner = Some(x.span);
                    }
                });
                if let Some(r) = inner {
                    self.push(
                        Diagnostic::error(self.at(r), "a thread region inside a `T.Parallel` loop")
                            .with_note_at(
                                self.at(s.span),
                                "the loop spreads its iterations over the threads",
                            ),
                    );
                }
            }
        });
        let mut reported: Vec<&str> = Vec::new();
        for (name, at) in outside {
            let Some((_, inside_at)) = per_thread.iter().find(|(n, _)| *n == name) else {
                continue;
            };
            if reported.contains(&name) {
                continue;
            }
            reported.push(name);
            self.push(
                Diagnostic::error(
                    self.at(at),
                    format!("local buffer `{name}` is per-thread in a thread region and used by block-level code here"),
                )
                .with_note_at(self.at(*inside_at), "named inside a thread region here")
                .with_note("move this use into a thread region, or use separate buffers"),
            );
        }
    }
}

/// The outermost thread regions of `body` (with the span of their loop variable's binding)
/// and the buffers named outside every region.
fn collect<'a>(
    body: &'a [Stmt],
    in_region: bool,
    regions: &mut Vec<(&'a Stmt, Span)>,
    outside: &mut Vec<(&'a str, Span)>,
) {
    for s in body {
        if is_region(s) {
            if let StmtKind::For(f) = &s.kind {
                regions.push((s, f.var.span));
            }
            continue;
        }
        if !in_region {
            outside.extend(stmt_buffer_uses(s));
        }
        for child in child_bodies(s) {
            collect(child, in_region, regions, outside);
        }
    }
}
