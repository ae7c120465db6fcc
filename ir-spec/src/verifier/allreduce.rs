//! Rules of `T.thread_allreduce` (R1–R5): where it may stand, what it reduces over, and the
//! forms it lowers exactly (`ir.rs`, `AllReduce`, gives the meaning).

use super::Checker;
use crate::diagnostic::Diagnostic;
use crate::dtype::DType;
use crate::ir::{AllReduce, Scope};
use crate::span::Span;
use crate::target::WARP_SIZE;

/// The dtypes an all-reduce combines: those one 32-bit `shfl.sync` carries.
pub const ALLREDUCE_DTYPES: [DType; 5] = [
    DType::Float16,
    DType::BFloat16,
    DType::Float32,
    DType::Int32,
    DType::UInt32,
];

impl Checker<'_> {
    pub(super) fn allreduce(&mut self, r: &AllReduce, span: Span) {
        let value = self.check_expr(&r.value);
        for index in &r.indices {
            self.expect_int(index, "buffer index");
        }
        let decl = self.resolve_buffer(&r.buffer.name, r.buffer.span);
        // R1: inside a kernel's thread loops, not vectorized, reached by every thread.
        if self.kernel.is_none() || self.thread_loop.is_none() {
            self.push(
                Diagnostic::error(self.at(span), "`T.thread_allreduce` outside a thread-binding loop")
                    .with_note("it combines values of the threads of a block; it belongs inside the kernel's `threadIdx` loops"),
            );
            return;
        }
        if let Some(v) = self.vectorized {
            self.push(
                Diagnostic::error(
                    self.at(span),
                    "`T.thread_allreduce` inside a vectorized loop",
                )
                .with_note_at(v, "the vectorized loop is here"),
            );
        }
        if let Some(d) = self.divergence {
            self.push(
                Diagnostic::error(
                    self.at(span),
                    "`T.thread_allreduce` where not every thread of the block may arrive",
                )
                .with_note_at(d, "threads may take different paths here (a condition, a loop with non-constant bounds, or a thread loop over part of the block)")
                .with_note("every thread of the reduced group exchanges values with the others; compute the value under the condition and reduce outside it"),
            );
        }
        // R2: the result is one element of a local buffer; the value converts to its dtype.
        if let Some(decl) = decl {
            if decl.scope != Scope::Local {
                self.error(
                    r.buffer.span,
                    format!(
                        "`T.thread_allreduce` writes its result to a local buffer (`T.alloc_local`); `{}` is {}",
                        r.buffer.name,
                        decl.scope.name()
                    ),
                );
            }
            if decl.shape.len() != r.indices.len() {
                self.error(
                    r.buffer.span,
                    format!(
                        "`{}` has {} dimensions but is indexed with {}",
                        r.buffer.name,
                        decl.shape.len(),
                        r.indices.len()
                    ),
                );
            }
            // R3: a dtype one shuffle carries.
            if !ALLREDUCE_DTYPES.contains(&decl.dtype) {
                let names: Vec<&str> = ALLREDUCE_DTYPES.iter().map(|d| d.name()).collect();
                self.error(
                    r.buffer.span,
                    format!(
                        "`T.thread_allreduce` reduces {} values, not {}",
                        names.join(", "),
                        decl.dtype
                    ),
                );
            }
        }
        if value.is_some_and(|t| t.dtype.is_bool()) {
            self.error(
                r.value.span,
                "`T.thread_allreduce` reduces numbers, not booleans",
            );
        }
        self.allreduce_threads(r, span);
    }

    /// R4, R5: the reduced thread variables are those of enclosing thread loops, the innermost
    /// axes of the block (x; x and y; x, y and z), and their threads (a power of two) fit in
    /// a warp.
    fn allreduce_threads(&mut self, r: &AllReduce, span: Span) {
        if r.threads.is_empty() {
            self.error(
                span,
                "`T.thread_allreduce` needs the thread variables it reduces over",
            );
            return;
        }
        let mut axes = Vec::new();
        for t in &r.threads {
            match self
                .thread_axes
                .iter()
                .rev()
                .find(|(name, _)| *name == t.name)
            {
                Some(&(_, axis)) if axes.contains(&axis) => {
                    self.error(t.span, format!("thread variable `{}` given twice", t.name));
                    return;
                }
                Some(&(_, axis)) => axes.push(axis),
                None => {
                    self.error(
                        t.span,
                        format!(
                            "`{}` is not the variable of an enclosing `threadIdx` loop",
                            t.name
                        ),
                    );
                    return;
                }
            }
        }
        axes.sort_unstable();
        if axes.iter().enumerate().any(|(i, &a)| i != a) {
            self.error(
                span,
                "`T.thread_allreduce` reduces over the innermost thread axes (x; x and y; x, y and z), whose threads are consecutive",
            );
            return;
        }
        let Some(block) = self.block.clone() else {
            return;
        };
        let group: i64 = axes
            .iter()
            .map(|&a| block.get(a).copied().unwrap_or(1))
            .product();
        let total: i64 = block.iter().product();
        let warp = WARP_SIZE;
        if group > warp || group & (group - 1) != 0 {
            self.push(
                Diagnostic::error(
                    self.at(span),
                    format!(
                        "`T.thread_allreduce` over {group} threads: tlc lowers all-reduces over a power of two of at most {warp} threads (one warp's shuffles); reducing across warps is not supported yet"
                    ),
                )
                .with_note("reduce within each warp, then combine the warps' results through a shared buffer and `T.sync_threads()`"),
            );
            return;
        }
        if total > warp && total % warp != 0 {
            self.error(
                span,
                format!("`T.thread_allreduce` needs a block of whole warps; this one has {total} threads"),
            );
        }
    }
}
