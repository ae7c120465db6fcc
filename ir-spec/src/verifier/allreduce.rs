//! Rules of `T.thread_allreduce` (R1–R6): where it may stand, what it reduces over, and the
//! forms it lowers exactly (`ir.rs`, `AllReduce`, gives the meaning).

use super::Checker;
use crate::diagnostic::Diagnostic;
use crate::dtype::DType;
use crate::ir::{allreduce_steps, AllReduce, Scope};
use crate::span::Span;

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
        self.allreduce_threads(r, span, decl.map(|d| d.dtype));
    }

    /// R4, R6: the reduced thread variables are those of enclosing thread loops, each once,
    /// on axes whose extents are powers of two; steps that are not shuffles need a `scratch`
    /// buffer.
    fn allreduce_threads(&mut self, r: &AllReduce, span: Span, dtype: Option<DType>) {
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
        let Some(block) = self.block.clone() else {
            return;
        };
        let Some(steps) = allreduce_steps(&block, &axes) else {
            let extents: Vec<String> = axes
                .iter()
                .map(|&a| block.get(a).copied().unwrap_or(1).to_string())
                .collect();
            self.push(
                Diagnostic::error(
                    self.at(span),
                    format!(
                        "`T.thread_allreduce` over thread axes of extents {}: each reduced axis's extent must be a power of two (the butterfly pairs thread t with t xor o)",
                        extents.join(" × ")
                    ),
                )
                .with_note("pad the block's axis to a power of two, or reduce through a shared buffer"),
            );
            return;
        };
        // (R5 is in `allreduce_steps`: a block of more than 32 threads that is not whole
        // warps takes no shuffle step, so no shuffle names a lane the block lacks.)
        let total: i64 = block.iter().product();
        // R6: the steps between warps go through `scratch`.
        let needs_scratch = steps.iter().any(|s| s.lane_xor.is_none());
        match (&r.scratch, needs_scratch) {
            (None, true) if self.requirements.level >= super::Level::Planned => self.push(
                Diagnostic::error(
                    self.at(span),
                    format!(
                        "this `T.thread_allreduce` exchanges values between warps, which needs a shared `scratch=` buffer of {total} elements"
                    ),
                )
                .with_note("`plan-allreduce-scratch` adds it; compiled IR carries it"),
            ),
            (Some(s), _) => {
                let Some(decl) = self.resolve_buffer(&s.name, s.span) else {
                    return;
                };
                let elems = decl
                    .shape
                    .iter()
                    .map(crate::verifier::const_int)
                    .try_fold(1i64, |acc, e| e.and_then(|e| acc.checked_mul(e)));
                if decl.scope != Scope::Shared
                    || dtype.is_some_and(|d| d != decl.dtype)
                    || elems.is_none_or(|n| n < total)
                {
                    self.error(
                        s.span,
                        format!(
                            "an all-reduce's scratch is a shared buffer of the result's dtype with at least one element per thread of the block ({total}); `{}` is {} {} of {}",
                            s.name,
                            decl.scope.name(),
                            decl.dtype,
                            elems.map_or("a non-constant number".to_string(), |n| n.to_string())
                        ),
                    );
                }
            }
            _ => {}
        }
    }
}
