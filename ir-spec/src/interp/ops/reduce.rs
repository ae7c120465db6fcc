//! `T.reduce_sum(src, dst, dim=D, clear=True)` and its siblings (`_max`, `_min`,
//! `_abssum`, `_absmax`).
//!
//! Semantics: for every element of `dst` (the index of `src` without dimension `D`), the
//! running value starts at the kind's identity (`clear=True`: 0 for the sums and `absmax`,
//! −∞ / +∞ for `max` / `min`, the dtype's extreme for integers) or at `dst`'s value
//! (`clear=False`), and each element of the line of `src` along `D` — converted to `dst`'s
//! dtype, made absolute for the `abs` kinds — is folded in **in index order**, each step
//! rounded to `dst`'s dtype (float32 arithmetic for 16-bit floats, as every operator). A
//! lowering may reassociate the sum (a tree over threads): floats then differ by at most
//! `(n − 1) · u · Σ|x|` (`u` the unit roundoff of `dst`'s dtype); `max` / `min` are exact.

use crate::dtype::DType;
use crate::interp::compile::BufRef;
use crate::interp::eval::{fault, Frame, Res};
use crate::interp::scalar::{arith, convert, Scalar};
use crate::ir::{MathFn, ReduceKind};
use crate::span::Span;

#[derive(Clone, Debug)]
pub(crate) struct CReduce {
    pub kind: ReduceKind,
    pub src: BufRef,
    pub dst: BufRef,
    pub axis: usize,
    pub clear: bool,
}

/// The identity of `kind` in `d`.
fn identity(kind: ReduceKind, d: DType) -> Scalar {
    let float = d.is_float();
    match kind {
        ReduceKind::Sum | ReduceKind::AbsSum | ReduceKind::AbsMax => convert(Scalar::Int(0), d),
        ReduceKind::Max if float => Scalar::Float(f64::NEG_INFINITY),
        ReduceKind::Min if float => Scalar::Float(f64::INFINITY),
        ReduceKind::Max => Scalar::Int(int_range(d).0),
        ReduceKind::Min => Scalar::Int(int_range(d).1),
    }
}

/// The smallest and largest value of integer dtype `d`.
fn int_range(d: DType) -> (i64, i64) {
    d.int_range().unwrap_or((i64::MIN, i64::MAX))
}

pub(crate) fn reduce(frame: &mut Frame, r: &CReduce, span: Span) -> Res<()> {
    let src_shape = frame.mem.buffer(r.src).shape.clone();
    let d = frame.mem.buffer(r.dst).dtype;
    let n = src_shape.get(r.axis).copied().unwrap_or(1);
    let outer: usize = src_shape.iter().take(r.axis).product();
    let inner: usize = src_shape.iter().skip(r.axis + 1).product();
    let name = |frame: &Frame, b: BufRef| frame.mem.buffer(b).name.clone();
    for o in 0..outer {
        for i in 0..inner {
            // dst's flat index is (o, i) row-major: the src index without the axis.
            let out = o * inner + i;
            let mut acc = if r.clear {
                identity(r.kind, d)
            } else {
                match frame.mem.read(r.dst, out) {
                    Some(v) => v,
                    None => {
                        let dst = name(frame, r.dst);
                        return fault(span, format!(
                            "`{}` with clear=False reads `{dst}`, whose element {out} was never written",
                            r.kind.name()
                        ));
                    }
                }
            };
            for j in 0..n {
                let flat = (o * n + j) * inner + i;
                let Some(x) = frame.mem.read(r.src, flat) else {
                    let src = name(frame, r.src);
                    return fault(
                        span,
                        format!(
                            "`{}` reads element {flat} of `{src}`, which was never written",
                            r.kind.name()
                        ),
                    );
                };
                let mut x = convert(x, d);
                if r.kind.takes_abs() {
                    x = crate::interp::scalar::math(MathFn::Abs, d, &[x]);
                }
                acc = arith(r.kind.combine(), d, acc, x).unwrap_or(acc);
            }
            frame.mem.write(r.dst, out, acc);
        }
    }
    Ok(())
}
