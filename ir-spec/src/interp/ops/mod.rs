//! Tile ops: each op's semantics lives in its own file (`copy.rs`, `gemm.rs`, `fill.rs`);
//! this module holds what they share — regions evaluated to numbers, and walking them. The
//! thread-level intrinsics (`T.cp_async`, `T.ldmatrix`, `T.mma_sync`, …) are in
//! `intrinsics.rs`, the Hopper ones (mbarriers, TMA, wgmma) in `hopper.rs`.

pub(crate) mod copy;
pub(crate) mod fill;
pub(crate) mod gemm;
pub(crate) mod hopper;
pub(crate) mod intrinsics;
pub(crate) mod reduce;
pub(crate) mod rng;

use crate::interp::compile::{BufRef, CRegion};
use crate::interp::eval::{fault, Frame, Res};
use crate::interp::memory::Buffer;
use crate::interp::shared::pending_message;
use crate::interp::tensor::fmt_shape;
use crate::span::Span;

/// A region with its bounds evaluated.
pub(crate) struct Rect {
    pub buf: BufRef,
    pub starts: Vec<i64>,
    pub extents: Vec<usize>,
    pub span: Span,
}

impl Rect {
    /// Number of elements (fits: checked when evaluated).
    pub fn len(&self) -> usize {
        self.extents.iter().product()
    }

    /// The extents without unit dimensions: what must agree between the two sides of a copy.
    pub fn squeezed(&self) -> Vec<usize> {
        self.extents.iter().copied().filter(|&e| e != 1).collect()
    }

    /// Whether every element lies inside `buf`.
    pub fn in_bounds(&self, buf: &Buffer) -> bool {
        self.len() == 0
            || self
                .starts
                .iter()
                .zip(&self.extents)
                .zip(&buf.shape)
                .all(|((&s, &e), &n)| s >= 0 && (s as u128) + (e as u128) <= n as u128)
    }

    /// `A_shared[0:128, 32:64]`, for messages.
    pub fn text(&self, buf: &Buffer) -> String {
        let parts: Vec<String> = self
            .starts
            .iter()
            .zip(&self.extents)
            .map(|(&s, &e)| format!("{s}:{}", s.saturating_add(e as i64)))
            .collect();
        format!("`{}[{}]`", buf.name, parts.join(", "))
    }

    /// A fault for a region that must lie inside its buffer and does not.
    pub fn out_of_bounds<T>(&self, frame: &Frame, op: &str) -> Res<T> {
        let buf = frame.mem.buffer(self.buf);
        fault(
            self.span,
            format!(
                "{op}: region {} is out of bounds for `{}` with shape {}",
                self.text(buf),
                buf.name,
                buf.shape_text()
            ),
        )
    }
}

impl Frame<'_> {
    /// Evaluates a region's starts and extents (extents must be non-negative).
    pub fn eval_region(&self, r: &CRegion) -> Res<Rect> {
        let mut starts = Vec::with_capacity(r.starts.len());
        let mut extents = Vec::with_capacity(r.extents.len());
        let mut len = 1usize;
        for (s, e) in r.starts.iter().zip(&r.extents) {
            starts.push(self.eval_int(s)?);
            let extent = self.eval_int(e)?;
            match usize::try_from(extent)
                .ok()
                .and_then(|x| len.checked_mul(x).map(|l| (x, l)))
            {
                Some((x, l)) => {
                    extents.push(x);
                    len = l;
                }
                None => {
                    return fault(
                        e.span,
                        format!("region extent {extent} must be a non-negative size"),
                    )
                }
            }
        }
        Ok(Rect {
            buf: r.buf,
            starts,
            extents,
            span: r.span,
        })
    }

    /// The message for an element (`flat`, at `coords`) of a region that cannot be read:
    /// never written, or shared memory a `T.cp_async` has not landed yet.
    pub fn unwritten_at(&self, buf: BufRef, flat: usize, coords: &[i64], op: &str) -> String {
        let parts: Vec<String> = coords.iter().map(|c| c.to_string()).collect();
        let what = format!("`{}[{}]`", self.mem.buffer(buf).name, parts.join(", "));
        match self.mem.pending_of(buf, flat) {
            Some(issuer) => format!(
                "{op}: {}",
                pending_message("reads", &what, self.mem.thread, issuer)
            ),
            None if self.mem.buffer(buf).discarded => format!(
                "{op} reads {what}, which was not written since `T.fresh({})` discarded the \
                 buffer's contents",
                self.mem.buffer(buf).name
            ),
            None => format!("{op} reads {what}, which was never written"),
        }
    }
}

/// Walks the elements of a region in row-major order, giving each one's buffer coordinates
/// and, when they lie inside the buffer, its flat position.
pub(crate) struct Cursor<'a> {
    rect: &'a Rect,
    shape: &'a [usize],
    offset: Vec<usize>,
    pub coords: Vec<i64>,
}

impl<'a> Cursor<'a> {
    pub fn new(rect: &'a Rect, shape: &'a [usize]) -> Cursor<'a> {
        Cursor {
            rect,
            shape,
            offset: vec![0; rect.extents.len()],
            coords: rect.starts.clone(),
        }
    }

    /// The flat position of the current element, `None` if it lies outside the buffer.
    #[inline]
    pub fn flat(&self) -> Option<usize> {
        let mut flat = 0usize;
        for (&c, &n) in self.coords.iter().zip(self.shape) {
            let c = usize::try_from(c).ok().filter(|&c| c < n)?;
            flat = flat * n + c;
        }
        Some(flat)
    }

    /// Moves to the next element (row-major).
    #[inline]
    pub fn advance(&mut self) {
        for d in (0..self.offset.len()).rev() {
            self.offset[d] += 1;
            self.coords[d] = self.coords[d].saturating_add(1);
            if self.offset[d] < self.rect.extents[d] {
                return;
            }
            self.offset[d] = 0;
            self.coords[d] = self.rect.starts[d];
        }
    }
}

/// `(128, 32)`.
pub(crate) fn shape_text(extents: &[usize]) -> String {
    fmt_shape(extents)
}
