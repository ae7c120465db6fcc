//! `T.copy(src, dst)`.
//!
//! Semantics: `src` and `dst` must have the same shape once unit dimensions are dropped
//! (`(1, 128)` matches `(128,)`); element `n` of `src` (row-major) goes to element `n` of
//! `dst`, converted to `dst`'s dtype. Regions may reach past their buffers (partial tiles
//! at the edges): an element read from outside `src` is zero, an element written outside
//! `dst` is dropped — TileLang's rule, which makes ragged edges correct without masks in the
//! program. Reading a never-written element of a shared / fragment / local buffer is an error.

use crate::interp::compile::CRegion;
use crate::interp::eval::{fault, Frame, Res};
use crate::interp::ops::{shape_text, Cursor};
use crate::interp::scalar::{convert, Scalar};
use crate::span::Span;

pub(crate) fn copy(frame: &mut Frame, src: &CRegion, dst: &CRegion, span: Span) -> Res<()> {
    let s = frame.eval_region(src)?;
    let d = frame.eval_region(dst)?;
    if s.squeezed() != d.squeezed() {
        return fault(
            span,
            format!(
                "T.copy: the source region has shape {} but the destination has shape {}",
                shape_text(&s.extents),
                shape_text(&d.extents)
            ),
        );
    }
    let src_buf = frame.mem.buffer(s.buf);
    let dst_dtype = frame.mem.buffer(d.buf).dtype;
    // A copy within one dtype moves values unchanged (converting an e5m2 infinity to e5m2
    // would saturate it; a copy keeps it, as the GPU's byte copies do).
    let same_dtype = src_buf.dtype == dst_dtype;
    let src_shape = src_buf.shape.clone();
    let dst_shape = frame.mem.buffer(d.buf).shape.clone();
    let zero = Scalar::zero(dst_dtype);
    let mut from = Cursor::new(&s, &src_shape);
    let mut to = Cursor::new(&d, &dst_shape);
    for _ in 0..s.len() {
        if let Some(dst_flat) = to.flat() {
            let value = match from.flat() {
                Some(f) => match frame.mem.read(s.buf, f) {
                    Some(v) if same_dtype => v,
                    Some(v) => convert(v, dst_dtype),
                    None => {
                        return fault(span, frame.unwritten_at(s.buf, f, &from.coords, "T.copy"))
                    }
                },
                None => zero,
            };
            frame.mem.write(d.buf, dst_flat, value);
        }
        from.advance();
        to.advance();
    }
    Ok(())
}
