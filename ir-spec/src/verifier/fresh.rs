//! Rules F1–F3 of `T.fresh` (docs/ir.md, "`T.fresh`"): it names shared allocations of its
//! kernel, each once, and sits where iterations run one after another.

use super::Checker;
use crate::diagnostic::Diagnostic;
use crate::ir::{Ident, Scope};
use crate::span::Span;

impl<'f> Checker<'f> {
    pub(super) fn fresh(&mut self, bufs: &'f [Ident], span: Span) {
        if self.kernel.is_none() {
            self.error(span, "`T.fresh` outside a kernel");
        }
        // F3: inside these loops the iterations overlap (or run in another order than
        // written), so "before this statement" has no one meaning.
        if let Some((at, kind)) = self.overlapped {
            self.push(
                Diagnostic::error(self.at(span), format!("`T.fresh` inside a {kind} loop"))
                    .with_note_at(at, "the loop")
                    .with_note(
                        "its iterations do not run one after another as written; put `T.fresh` at \
                     the head of a serial or `while` loop around it",
                    ),
            );
        }
        for (i, b) in bufs.iter().enumerate() {
            // F2: each buffer once.
            if bufs[..i].iter().any(|o| o.name == b.name) {
                self.error(b.span, format!("`{}` is named twice in `T.fresh`", b.name));
                continue;
            }
            // F1: a shared allocation.
            let Some(decl) = self.resolve_buffer(&b.name, b.span) else {
                continue;
            };
            if decl.scope != Scope::Shared {
                let what = if decl.scope == Scope::Global {
                    "a global parameter".to_string()
                } else {
                    format!("a {} buffer", decl.scope.name())
                };
                self.push(
                    Diagnostic::error(
                        self.at(b.span),
                        format!("`T.fresh` discards shared buffers; `{}` is {what}", b.name),
                    )
                    .with_note(
                        "only shared memory is planned, so only shared buffers can give their \
                         bytes away",
                    ),
                );
            }
        }
    }
}
