//! `T.fill(dst, value)` and `T.clear(dst)` (= fill with 0).
//!
//! Semantics: `value` is evaluated once, converted to `dst`'s dtype and written to every
//! element of the region. The region must lie inside its buffer (unlike `T.copy`, a fill has
//! no partial-tile rule).

use crate::interp::compile::{CExpr, CRegion};
use crate::interp::eval::{Frame, Res};
use crate::interp::ops::Cursor;

pub(crate) fn fill(frame: &mut Frame, dst: &CRegion, value: &CExpr) -> Res<()> {
    let d = frame.eval_region(dst)?;
    // `value` was already converted to the buffer's dtype by the compiler.
    let v = frame.eval(value)?;
    let buf = frame.mem.buffer(d.buf);
    if !d.in_bounds(buf) {
        return d.out_of_bounds(frame, "T.fill");
    }
    let shape = buf.shape.clone();
    let mut cursor = Cursor::new(&d, &shape);
    for _ in 0..d.len() {
        if let Some(flat) = cursor.flat() {
            frame.mem.write(d.buf, flat, v);
        }
        cursor.advance();
    }
    Ok(())
}
