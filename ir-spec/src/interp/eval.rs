//! Expression evaluation, and the run-time faults it can raise.

use crate::interp::compile::{BufRef, CExpr, CKind};
use crate::interp::lockstep::ThreadState;
use crate::interp::memory::{Buffer, Memory};
use crate::interp::scalar::{arith, bit_not, compare, convert, math, neg, ArithError, Scalar};
use crate::interp::shared::pending_message;
use crate::span::Span;

/// A run-time error inside a block; the launcher adds the block index and turns it into a
/// `Diagnostic`.
#[derive(Debug)]
pub(crate) struct Fault {
    pub span: Span,
    pub message: String,
    /// The thread it happened in (thread level), as the message names it: `5`, `(5, 1)`.
    pub thread: Option<String>,
    /// Notes pointing at other places (a deadlock's other waits).
    pub notes: Vec<(Span, String)>,
}

/// Boxed so that the `Ok` path stays small.
pub(crate) type Res<T> = Result<T, Box<Fault>>;

pub(crate) fn fault<T>(span: Span, message: impl Into<String>) -> Res<T> {
    Err(Box::new(Fault {
        span,
        message: message.into(),
        thread: None,
        notes: Vec::new(),
    }))
}

/// The state of one running block: its scalar variables and its memory (at the thread level:
/// those of the thread running the current statement).
pub(crate) struct Frame<'g> {
    pub vars: Vec<Scalar>,
    pub mem: Memory<'g>,
    /// The per-thread state of a thread-level kernel's block (`lockstep.rs`); `None` at the
    /// tile level. While one thread runs a statement its registers are swapped into `vars`
    /// and `mem`.
    pub threads: Option<Box<ThreadState>>,
}

impl Frame<'_> {
    /// The same frame over other globals (`Memory::rebind`): a block waiting at, or going
    /// on past, a grid barrier.
    pub fn rebind<'h>(self, globals: &'h [Buffer]) -> Frame<'h> {
        Frame {
            vars: self.vars,
            mem: self.mem.rebind(globals),
            threads: self.threads,
        }
    }

    pub fn eval(&self, e: &CExpr) -> Res<Scalar> {
        Ok(match &e.kind {
            CKind::Const(v) => *v,
            // Slots come from the compiler and `vars` is sized from it.
            CKind::Var(slot) => self.vars[*slot],
            CKind::Load { buf, indices } => {
                let flat = self.flat_index(*buf, indices, e.span)?;
                match self.mem.read(*buf, flat) {
                    Some(v) => v,
                    None => return fault(e.span, self.unwritten(*buf, flat, indices)),
                }
            }
            CKind::Neg(a) => neg(e.dtype, self.eval(a)?),
            CKind::Not(a) => Scalar::Bool(!self.eval(a)?.as_bool()),
            CKind::BitNot(a) => bit_not(e.dtype, self.eval(a)?),
            CKind::Math(f, args) => {
                let mut xs = [Scalar::zero(e.dtype); 3];
                for (x, a) in xs.iter_mut().zip(args) {
                    *x = self.eval(a)?;
                }
                math(*f, e.dtype, &xs[..args.len().min(3)])
            }
            CKind::Arith(op, a, b) => {
                let (x, y) = (self.eval(a)?, self.eval(b)?);
                match arith(*op, e.dtype, x, y) {
                    Ok(v) => v,
                    Err(ArithError::IntDivByZero) => {
                        return fault(e.span, "integer division by zero")
                    }
                }
            }
            CKind::Compare(op, a, b) => {
                let (x, y) = (self.eval(a)?, self.eval(b)?);
                Scalar::Bool(compare(*op, a.dtype, x, y))
            }
            CKind::And(a, b) => Scalar::Bool(self.eval(a)?.as_bool() && self.eval(b)?.as_bool()),
            CKind::Or(a, b) => Scalar::Bool(self.eval(a)?.as_bool() || self.eval(b)?.as_bool()),
            CKind::Convert(a) => convert(self.eval(a)?, e.dtype),
            CKind::Reinterpret(a) => {
                let bits = super::shared::encode(a.dtype, self.eval(a)?);
                super::shared::decode(e.dtype, &bits)
            }
            CKind::Select(c, a, b) => {
                // Only the taken branch runs, so `T.if_then_else(i < n, A[i], 0)` is safe.
                if self.eval(c)?.as_bool() {
                    self.eval(a)?
                } else {
                    self.eval(b)?
                }
            }
        })
    }

    /// The value of an integer expression.
    pub fn eval_int(&self, e: &CExpr) -> Res<i64> {
        Ok(self.eval(e)?.as_i64())
    }

    /// The row-major position of `buf[indices]`, or an out-of-bounds fault at `span`.
    pub fn flat_index(&self, buf: BufRef, indices: &[CExpr], span: Span) -> Res<usize> {
        let shape = &self.mem.buffer(buf).shape;
        let mut flat = 0usize;
        for (index, &n) in indices.iter().zip(shape) {
            let i = self.eval_int(index)?;
            match usize::try_from(i) {
                // `flat * n + i` < the buffer's length, which fits in memory.
                Ok(i) if i < n => flat = flat * n + i,
                _ => {
                    let b = self.mem.buffer(buf);
                    return fault(
                        span,
                        format!(
                            "index {} is out of bounds for `{}` with shape {}",
                            self.index_text(indices),
                            b.name,
                            b.shape_text()
                        ),
                    );
                }
            }
        }
        Ok(flat)
    }

    /// `[130, 4]` (indices that fail to evaluate print as `?`).
    fn index_text(&self, indices: &[CExpr]) -> String {
        let parts: Vec<String> = indices
            .iter()
            .map(|i| match self.eval_int(i) {
                Ok(v) => v.to_string(),
                Err(_) => "?".to_string(),
            })
            .collect();
        format!("[{}]", parts.join(", "))
    }

    pub(crate) fn unwritten(&self, buf: BufRef, flat: usize, indices: &[CExpr]) -> String {
        let b = self.mem.buffer(buf);
        let what = format!("`{}{}`", b.name, self.index_text(indices));
        match self.mem.pending_of(buf, flat) {
            Some(issuer) => pending_message("reads", &what, self.mem.thread, issuer),
            None if b.discarded => format!(
                "{what} is read but was not written since `T.fresh({})` discarded the buffer's \
                 contents",
                b.name
            ),
            None => format!("{what} is read but was never written"),
        }
    }
}
