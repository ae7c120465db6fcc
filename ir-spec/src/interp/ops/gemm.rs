//! `T.gemm(A, B, C, transpose_A, transpose_B, clear_accum)`: `C (+)= op(A) @ op(B)`.
//!
//! Semantics: `op(A)` is M×K (`A` is stored K×M when `transpose_A`), `op(B)` is K×N (`B` is
//! stored N×K when `transpose_B`), `C` is M×N; operands are the last two dimensions of their
//! regions (leading extents must be 1) and must lie inside their buffers. For each `(i, j)`:
//! the products `op(A)[i, k] * op(B)[k, j]` are summed in f32 in K order (k = 0, 1, 2, …,
//! each product rounded to f32, no fused multiply-add), then the sum is added, in f32, to
//! `C[i, j]` converted to f32 (or to 0 with `clear_accum`), and the result is rounded to
//! `C`'s dtype. Exceptions: a float64 `C` computes all of this in f64, an integer `C` in
//! wrapping i64 (int8 × int8 → int32 gemms are exact), and a float16 `C` is updated in
//! steps of 16 along K as `mma.sync`'s f16 accumulator is: for k0 = 0, 16, 32, …, the
//! products of k0 … k0+15 (fewer in a last short step) are summed in f32 in K order from
//! 0, that sum is added in f32 to `C[i, j]` converted to f32, and the result is rounded to
//! f16 — which is `C[i, j]` for the next step (so a lowered gemm gives exactly this). All
//! elements read must have been written.
//!
//! `packed_int4`: `A` (M×K/2, not transposed) and `B` (N×K/2, transposed) are int8 bytes
//! that each hold two int4 elements along K, low nibble first, each sign-extended: byte
//! column `q` is K indices `2q` (low) and `2q + 1` (high). The product is then the int4
//! gemm's, exactly (what `mma.sync`'s `.s4` form computes on the same bytes).

use crate::dtype::DType;
use crate::interp::compile::CGemm;
use crate::interp::eval::{fault, Frame, Res};
use crate::interp::ops::Rect;
use crate::interp::scalar::{convert, Scalar};
use crate::span::Span;

pub(crate) fn gemm(frame: &mut Frame, g: &CGemm, span: Span) -> Res<()> {
    let a = frame.eval_region(&g.a)?;
    let b = frame.eval_region(&g.b)?;
    let c = frame.eval_region(&g.c)?;
    for r in [&a, &b, &c] {
        if !r.in_bounds(frame.mem.buffer(r.buf)) {
            return r.out_of_bounds(frame, "T.gemm");
        }
    }
    let (ar, ac) = matrix(&a, "A", frame)?;
    let (br, bc) = matrix(&b, "B", frame)?;
    let (m, n) = matrix(&c, "C", frame)?;
    let (am, k) = if g.trans_a { (ac, ar) } else { (ar, ac) };
    let (bk, bn) = if g.trans_b { (bc, br) } else { (br, bc) };
    if am != m || bk != k || bn != n {
        return fault(
            span,
            format!(
                "T.gemm: shapes do not agree: op(A) is {am}x{k}, op(B) is {bk}x{bn}, C is {m}x{n}"
            ),
        );
    }
    let mut av = gather(frame, &a, m, k, g.trans_a)?;
    let mut bv = gather(frame, &b, k, n, g.trans_b)?;
    let k = if g.packed_int4 {
        // The verifier's rule holds the layout fixed: A row-major, B transposed, so K is
        // the innermost (byte) dimension of both.
        av = unpack_rows(&av, m, k);
        bv = unpack_k_rows(&bv, k, n);
        2 * k
    } else {
        k
    };
    let c_dtype = frame.mem.buffer(c.buf).dtype;
    let c_old = if g.clear_accum {
        vec![Scalar::zero(c_dtype); m * n]
    } else {
        gather(frame, &c, m, n, false)?
    };
    let result = if c_dtype.is_int() {
        product_i64(&av, &bv, &c_old, m, n, k)
    } else if c_dtype == DType::Float64 {
        product_f64(&av, &bv, &c_old, m, n, k)
    } else if c_dtype == DType::Float16 {
        product_f16_steps(&av, &bv, &c_old, m, n, k)
    } else {
        product_f32(&av, &bv, &c_old, m, n, k)
    };
    let (base, rs, cs) = layout(&c, frame);
    for i in 0..m {
        for j in 0..n {
            let v = convert(result[i * n + j], c_dtype);
            frame.mem.write(c.buf, base + i * rs + j * cs, v);
        }
    }
    Ok(())
}

/// The int4 element `half` (0: low nibble, 1: high) of a byte, sign-extended (the one
/// definition, also `T.mma_sync`'s packed int4 form's).
pub(crate) fn nibble(byte: Scalar, half: usize) -> Scalar {
    let b = byte.as_i64() as u8;
    let v = if half == 0 { b << 4 } else { b & 0xf0 };
    Scalar::Int(i64::from((v as i8) >> 4))
}

/// A `rows × kb` matrix of packed bytes as `rows × 2kb` int4 values (K innermost).
fn unpack_rows(v: &[Scalar], rows: usize, kb: usize) -> Vec<Scalar> {
    let mut out = Vec::with_capacity(rows * kb * 2);
    for i in 0..rows {
        for q in 0..kb {
            out.push(nibble(v[i * kb + q], 0));
            out.push(nibble(v[i * kb + q], 1));
        }
    }
    out
}

/// A `kb × cols` matrix of packed bytes (K outermost) as `2kb × cols` int4 values.
fn unpack_k_rows(v: &[Scalar], kb: usize, cols: usize) -> Vec<Scalar> {
    let mut out = Vec::with_capacity(kb * cols * 2);
    for q in 0..kb {
        for half in 0..2 {
            out.extend(v[q * cols..(q + 1) * cols].iter().map(|&x| nibble(x, half)));
        }
    }
    out
}

/// The (rows, cols) of an operand: its last two extents, the others being 1.
fn matrix(r: &Rect, what: &str, frame: &Frame) -> Res<(usize, usize)> {
    match r.extents.as_slice() {
        [lead @ .., rows, cols] if lead.iter().all(|&e| e == 1) => Ok((*rows, *cols)),
        _ => fault(
            r.span,
            format!(
                "T.gemm: operand {what} ({}) must be a matrix: two dimensions, any others of extent 1",
                r.text(frame.mem.buffer(r.buf))
            ),
        ),
    }
}

/// Flat position of the region's first element and the strides of its last two dims.
fn layout(r: &Rect, frame: &Frame) -> (usize, usize, usize) {
    let strides = frame.mem.buffer(r.buf).strides();
    // In bounds (checked), so every start is a valid non-negative coordinate.
    let base = r
        .starts
        .iter()
        .zip(&strides)
        .map(|(&s, &st)| s.max(0) as usize * st)
        .sum();
    let rank = strides.len();
    (base, strides[rank - 2], strides[rank - 1])
}

/// The operand as a `rows × cols` row-major matrix of its logical (possibly transposed)
/// orientation.
fn gather(frame: &Frame, r: &Rect, rows: usize, cols: usize, trans: bool) -> Res<Vec<Scalar>> {
    let (base, rs, cs) = layout(r, frame);
    let mut out = Vec::with_capacity(rows * cols);
    for i in 0..rows {
        for j in 0..cols {
            let (sr, sc) = if trans { (j, i) } else { (i, j) };
            let flat = base + sr * rs + sc * cs;
            match frame.mem.read(r.buf, flat) {
                Some(v) => out.push(v),
                None => {
                    let mut coords = r.starts.clone();
                    let rank = coords.len();
                    coords[rank - 2] += sr as i64;
                    coords[rank - 1] += sc as i64;
                    return fault(r.span, frame.unwritten_at(r.buf, flat, &coords, "T.gemm"));
                }
            }
        }
    }
    Ok(out)
}

fn product_f32(
    a: &[Scalar],
    b: &[Scalar],
    c: &[Scalar],
    m: usize,
    n: usize,
    k: usize,
) -> Vec<Scalar> {
    let a: Vec<f32> = a.iter().map(|v| v.as_f64() as f32).collect();
    let b: Vec<f32> = b.iter().map(|v| v.as_f64() as f32).collect();
    let mut out = Vec::with_capacity(m * n);
    let mut acc = vec![0f32; n];
    for i in 0..m {
        acc.fill(0.0);
        // k outermost keeps each acc[j]'s sum in K order while the j loop vectorizes.
        for kk in 0..k {
            let x = a[i * k + kk];
            let row = &b[kk * n..(kk + 1) * n];
            for (s, &y) in acc.iter_mut().zip(row) {
                *s += x * y;
            }
        }
        for (j, &s) in acc.iter().enumerate() {
            let old = c[i * n + j].as_f64() as f32;
            out.push(Scalar::Float(f64::from(old + s)));
        }
    }
    out
}

/// The K step of an f16 accumulator: `mma.sync.m16n8k16`'s k.
const F16_STEP: usize = 16;

/// A float16 `C`: each step of 16 along K summed in f32 from 0, added to `C` in f32,
/// rounded to f16 (see the module summary).
fn product_f16_steps(
    a: &[Scalar],
    b: &[Scalar],
    c: &[Scalar],
    m: usize,
    n: usize,
    k: usize,
) -> Vec<Scalar> {
    let a: Vec<f32> = a.iter().map(|v| v.as_f64() as f32).collect();
    let b: Vec<f32> = b.iter().map(|v| v.as_f64() as f32).collect();
    let mut out = Vec::with_capacity(m * n);
    let mut acc = vec![0f32; n];
    for i in 0..m {
        let mut cur: Vec<Scalar> = c[i * n..(i + 1) * n].to_vec();
        for k0 in (0..k).step_by(F16_STEP) {
            acc.fill(0.0);
            for kk in k0..(k0 + F16_STEP).min(k) {
                let x = a[i * k + kk];
                let row = &b[kk * n..(kk + 1) * n];
                for (s, &y) in acc.iter_mut().zip(row) {
                    *s += x * y;
                }
            }
            for (old, &s) in cur.iter_mut().zip(&acc) {
                let sum = old.as_f64() as f32 + s;
                *old = convert(Scalar::Float(f64::from(sum)), DType::Float16);
            }
        }
        out.extend(cur);
    }
    out
}

fn product_f64(
    a: &[Scalar],
    b: &[Scalar],
    c: &[Scalar],
    m: usize,
    n: usize,
    k: usize,
) -> Vec<Scalar> {
    let mut out = Vec::with_capacity(m * n);
    let mut acc = vec![0f64; n];
    for i in 0..m {
        acc.fill(0.0);
        for kk in 0..k {
            let x = a[i * k + kk].as_f64();
            for (j, s) in acc.iter_mut().enumerate() {
                *s += x * b[kk * n + j].as_f64();
            }
        }
        for (j, &s) in acc.iter().enumerate() {
            out.push(Scalar::Float(c[i * n + j].as_f64() + s));
        }
    }
    out
}

fn product_i64(
    a: &[Scalar],
    b: &[Scalar],
    c: &[Scalar],
    m: usize,
    n: usize,
    k: usize,
) -> Vec<Scalar> {
    let mut out = Vec::with_capacity(m * n);
    for i in 0..m {
        for j in 0..n {
            let mut s = 0i64;
            for kk in 0..k {
                s = s.wrapping_add(a[i * k + kk].as_i64().wrapping_mul(b[kk * n + j].as_i64()));
            }
            out.push(Scalar::Int(c[i * n + j].as_i64().wrapping_add(s)));
        }
    }
    out
}
