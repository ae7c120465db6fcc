//! The thread-level intrinsics (docs/ir.md, "Thread-level intrinsics"):
//!
//! - `T.cp_async(dst, src, bytes[, pred])`, per thread: at issue the source bytes are read
//!   (bounds-checked; none when `pred` is false: the data is zeros), both byte addresses must
//!   be multiples of `bytes`, and the destination bytes become *pending* in the block's
//!   shared arena (`shared.rs`): any access to them is an error until the copy lands. The
//!   copy joins the thread's open group.
//! - `T.cp_async_commit()` moves the open group to the thread's queue; `T.cp_async_wait(n)`
//!   lands the oldest committed groups until at most `n` remain (uncommitted copies stay in
//!   flight, as in PTX). Landing writes the bytes as a write by the issuing thread at that
//!   moment, so another thread needs a barrier before reading them. At the tile level both
//!   are no-ops; written at block level in a thread-level kernel they act for every thread,
//!   and what a block-level wait lands is visible to all threads. Copies still in flight
//!   when the block ends would land then, which nothing can observe: nothing is done.
//! - The Hopper intrinsics (mbarriers, TMA, wgmma) are in `hopper.rs`.
//! - `T.ldmatrix` and `T.mma_sync` are warp collectives (`lockstep.rs` calls them once per
//!   warp, with all 32 lanes active): every lane's operand addresses are evaluated in that
//!   lane's registers, then the data moves between lanes in the PTX ISA's layouts.
//!   `ldmatrix` reads its rows as shared reads of the lane that supplied the row address
//!   (race check, pending bytes, 16-byte alignment); `mma_sync` computes
//!   `D[i][j] = (Σ_k A[i][k] · B[k][j]) + C[i][j]` in f32: inputs converted exactly, every
//!   product and partial sum rounded to f32, k = 0 … 15 in order from 0, `C` added last;
//!   a float16 accumulator converts to f32 exactly and the f32 result is rounded once to
//!   f16 (round to nearest even) when stored.

use super::gemm::nibble;
use crate::dtype::DType;
use crate::interp::compile::{BufRef, CExpr, CRef};
use crate::interp::eval::{fault, Frame, Res};
use crate::interp::scalar::{convert, Scalar};
use crate::interp::shared::encode;
use crate::intrinsic::{Collective, IntrinsicDef};
use crate::span::Span;
use std::collections::VecDeque;

/// The widest cp.async.
const MAX_BYTES: usize = 16;

/// One `T.cp_async` in flight: the bytes it will write at `offset` of the arena, and the
/// element it starts at (for messages).
#[derive(Clone, Debug)]
pub(crate) struct AsyncCopy {
    offset: usize,
    data: [u8; MAX_BYTES],
    len: usize,
    buf: BufRef,
    flat: usize,
}

/// One thread's cp.async groups.
#[derive(Clone, Debug, Default)]
pub(crate) struct AsyncGroups {
    open: Vec<AsyncCopy>,
    committed: VecDeque<Vec<AsyncCopy>>,
}

impl AsyncGroups {
    /// `cp.async.commit_group`.
    pub fn commit(&mut self) {
        let group = std::mem::take(&mut self.open);
        self.committed.push_back(group);
    }

    /// `cp.async.wait_group n`: the copies of the oldest committed groups beyond `n`, in
    /// issue order, which land now.
    pub fn retire(&mut self, n: usize) -> Vec<AsyncCopy> {
        let mut out = Vec::new();
        while self.committed.len() > n {
            if let Some(group) = self.committed.pop_front() {
                out.extend(group);
            }
        }
        out
    }

    pub fn issue(&mut self, copy: AsyncCopy) {
        self.open.push(copy);
    }
}

/// The coordinates of element `flat` of a row-major `shape`.
fn coords_of(shape: &[usize], flat: usize) -> Vec<i64> {
    let mut out = vec![0i64; shape.len()];
    let mut rest = flat;
    for (slot, &n) in out.iter_mut().zip(shape).rev() {
        *slot = rest.checked_rem(n).unwrap_or(0) as i64;
        rest = rest.checked_div(n).unwrap_or(0);
    }
    out
}

impl Frame<'_> {
    /// Where operand `r` starts, checking that it and the `count - 1` elements after it lie
    /// inside its buffer.
    pub(crate) fn run_start(&self, r: &CRef, count: usize, span: Span, op: &str) -> Res<usize> {
        let flat = self.flat_index(r.buf, &r.indices, span)?;
        let b = self.mem.buffer(r.buf);
        let len: usize = b.shape.iter().product();
        if flat.saturating_add(count) > len {
            return fault(
                span,
                format!(
                    "{op}: the {count} elements from {} run past the end of `{}` with shape {}",
                    b.element_text(flat),
                    b.name,
                    b.shape_text()
                ),
            );
        }
        Ok(flat)
    }

    /// Element `flat` of `buf`, or the fault of a never-written or pending element.
    pub(crate) fn read_elem(&self, buf: BufRef, flat: usize, span: Span, op: &str) -> Res<Scalar> {
        match self.mem.read(buf, flat) {
            Some(v) => Ok(v),
            None => {
                let coords = coords_of(&self.mem.buffer(buf).shape, flat);
                fault(span, self.unwritten_at(buf, flat, &coords, op))
            }
        }
    }

    /// The byte address of element `flat` of a shared buffer in the arena (globals: from
    /// their start, which is aligned).
    pub(super) fn byte_address(&self, buf: BufRef, flat: usize) -> usize {
        let b = self.mem.buffer(buf);
        b.arena_offset.unwrap_or(0) + flat * b.dtype.bytes() as usize
    }

    /// Issues `T.cp_async` for the running thread (`self.mem.thread`); `None` when it copies
    /// nothing (there is no thread).
    pub(crate) fn cp_async_issue(
        &mut self,
        (dst, src): (&CRef, &CRef),
        bytes: usize,
        pred: Option<&CExpr>,
        span: Span,
    ) -> Res<Option<AsyncCopy>> {
        const OP: &str = "`T.cp_async`";
        let Some(thread) = self.mem.thread else {
            return fault(span, "`T.cp_async` outside a thread-binding loop");
        };
        let on = match pred {
            Some(p) => self.eval(p)?.as_bool(),
            None => true,
        };
        let dtype = self.mem.buffer(dst.buf).dtype;
        let size = dtype.bytes() as usize;
        let count = bytes / size.max(1);
        let dflat = self.run_start(dst, count, span, OP)?;
        let daddr = self.byte_address(dst.buf, dflat);
        if !daddr.is_multiple_of(bytes) {
            return fault(
                span,
                format!(
                    "{OP} of {bytes} bytes to {} at shared address {daddr}, which is not a \
                     multiple of {bytes}",
                    self.mem.buffer(dst.buf).element_text(dflat)
                ),
            );
        }
        let mut data = [0u8; MAX_BYTES];
        if on {
            let sflat = self.run_start(src, count, span, OP)?;
            let saddr = self.byte_address(src.buf, sflat);
            if !saddr.is_multiple_of(bytes) {
                return fault(
                    span,
                    format!(
                        "{OP} of {bytes} bytes from {} at byte {saddr} of `{}`, which is not a \
                         multiple of {bytes}",
                        self.mem.buffer(src.buf).element_text(sflat),
                        self.mem.buffer(src.buf).name
                    ),
                );
            }
            for k in 0..count {
                let v = self.read_elem(src.buf, sflat + k, span, OP)?;
                let enc = encode(dtype, v);
                if let (Some(out), Some(b)) =
                    (data.get_mut(k * size..(k + 1) * size), enc.get(..size))
                {
                    out.copy_from_slice(b);
                }
            }
        }
        let slot = match dst.buf {
            BufRef::Local(i) => i,
            BufRef::Global(_) => usize::MAX,
        };
        // The copy's value is the issuing thread's, of its generation now (`Memory::tag_of`).
        let tag = self.mem.tag_of(slot);
        let Some(shared) = &mut self.mem.shared else {
            return fault(span, "`T.cp_async` into a buffer outside shared memory");
        };
        let b = self.mem.locals.get(slot);
        let what = || b.map_or_else(String::new, |b| b.element_text(dflat));
        shared.start_async(daddr, bytes, thread, &what);
        shared.set_tags(daddr, bytes, tag);
        Ok(Some(AsyncCopy {
            offset: daddr,
            data,
            len: bytes,
            buf: dst.buf,
            flat: dflat,
        }))
    }

    /// A cp.async lands, as a write by `self.mem.thread` (`None`: visible to all threads).
    pub(crate) fn cp_async_land(&mut self, c: &AsyncCopy) {
        let thread = self.mem.thread;
        let b = match c.buf {
            BufRef::Local(i) => self.mem.locals.get(i),
            BufRef::Global(_) => None,
        };
        let what = || b.map_or_else(String::new, |b| b.element_text(c.flat));
        if let (Some(shared), Some(data)) = (&mut self.mem.shared, c.data.get(..c.len)) {
            shared.land(c.offset, data, thread, &what);
        }
    }

    /// One lane's `T.ldmatrix` row: the 16 bytes at its `src` (8 16-bit or 16 int8
    /// elements; a shared read by this lane).
    pub(crate) fn ldmatrix_row(&self, src: &CRef, span: Span) -> Res<Vec<Scalar>> {
        const OP: &str = "`T.ldmatrix`";
        let n = 16 / elem_bytes(self.mem.buffer(src.buf).dtype);
        let flat = self.run_start(src, n, span, OP)?;
        let addr = self.byte_address(src.buf, flat);
        if !addr.is_multiple_of(16) {
            return fault(
                span,
                format!(
                    "{OP} row at {} (shared address {addr}) is not 16-byte aligned",
                    self.mem.buffer(src.buf).element_text(flat)
                ),
            );
        }
        let mut row = Vec::with_capacity(n);
        for k in 0..n {
            row.push(self.read_elem(src.buf, flat + k, span, OP)?);
        }
        Ok(row)
    }

    /// One lane's `T.ldmatrix` result: lane `lane` takes 4 bytes of each of the `num`
    /// matrices (`rows[8 * m + r]` is row `r` of matrix `m`) into its `dst` — 2 16-bit
    /// elements, or 4 int8 ones (`[l / 4][4 (l % 4) + e]`: the b16 pairs the hardware moves
    /// are the byte pairs of the row, in order).
    pub(crate) fn ldmatrix_store(
        &mut self,
        dst: &CRef,
        rows: &[Vec<Scalar>],
        (lane, num, trans): (usize, usize, bool),
        span: Span,
    ) -> Res<()> {
        let per = 4 / elem_bytes(self.mem.buffer(dst.buf).dtype);
        if trans && per != 2 {
            // The verifier refuses it (`.trans` moves 16-bit units).
            return fault(span, "`T.ldmatrix` with trans=True on 8-bit elements");
        }
        let flat = self.run_start(dst, per * num, span, "`T.ldmatrix`")?;
        let (g, c) = (lane / 4, lane % 4);
        for m in 0..num {
            for e in 0..per {
                let (r, col) = if trans {
                    (2 * c + e, g)
                } else {
                    (g, per * c + e)
                };
                let v = rows
                    .get(8 * m + r)
                    .and_then(|row| row.get(col))
                    .copied()
                    .unwrap_or(Scalar::Float(0.0));
                self.mem.write(dst.buf, flat + per * m + e, v);
            }
        }
        Ok(())
    }

    /// One lane's source value of the shuffle `what` (`T.shfl_xor`, …).
    pub(crate) fn shfl_read(&self, src: &CRef, span: Span, what: &str) -> Res<Scalar> {
        let flat = self.run_start(src, 1, span, what)?;
        self.read_elem(src.buf, flat, span, what)
    }

    /// Writes the value the shuffle `what` brought (another lane's source) into one lane's
    /// `dst` (both operands have one dtype, the verifier's rule, so the value is stored
    /// unchanged).
    pub(crate) fn shfl_write(&mut self, dst: &CRef, v: Scalar, span: Span, what: &str) -> Res<()> {
        let flat = self.run_start(dst, 1, span, what)?;
        self.mem.write(dst.buf, flat, v);
        Ok(())
    }

    /// One lane's `T.mma_sync` operands: `a` (16 bytes: 8 16-bit or 16 int8 elements), `b`
    /// (8 bytes), `acc[0..4]`, and where `acc` starts.
    pub(crate) fn mma_operands(
        &self,
        (acc, a, b): (&CRef, &CRef, &CRef),
        span: Span,
    ) -> Res<MmaLane> {
        const OP: &str = "`T.mma_sync`";
        let int = self.mem.buffer(acc.buf).dtype == DType::Int32;
        let ab = elem_bytes(self.mem.buffer(a.buf).dtype);
        let (na, nb) = (16 / ab, 8 / ab);
        let af = self.run_start(a, na, span, OP)?;
        let bf = self.run_start(b, nb, span, OP)?;
        let cf = self.run_start(acc, 4, span, OP)?;
        // f16 / bf16 / f32 / int8 / int32 values are exact in f64.
        let read = |r: &CRef, from: usize, n: usize| -> Res<Vec<f64>> {
            (0..n)
                .map(|k| Ok(self.read_elem(r.buf, from + k, span, OP)?.as_f64()))
                .collect()
        };
        Ok(MmaLane {
            a: read(a, af, na)?,
            b: read(b, bf, nb)?,
            c: read(acc, cf, 4)?,
            int,
            acc_flat: cf,
        })
    }

    /// Writes one lane's 4 accumulators: float results rounded once more to the
    /// accumulator's dtype (nothing for float32; round-to-nearest-even for float16),
    /// integer ones as they are (already wrapped to int32).
    pub(crate) fn mma_store(&mut self, acc: &CRef, flat: usize, d: [Scalar; 4]) {
        let dtype = self.mem.buffer(acc.buf).dtype;
        for (k, v) in d.into_iter().enumerate() {
            self.mem.write(acc.buf, flat + k, convert(v, dtype));
        }
    }
}

/// The bytes of an element of `d` as a count (at least 1).
fn elem_bytes(d: DType) -> usize {
    usize::try_from(d.bytes()).unwrap_or(1).max(1)
}

/// One lane's part of an mma: its fragments of A, B and C, whether it is the integer form,
/// and where its `acc` starts.
pub(crate) struct MmaLane {
    a: Vec<f64>,
    b: Vec<f64>,
    c: Vec<f64>,
    int: bool,
    pub acc_flat: usize,
}

/// `T.mma_sync` on the 32 lanes' fragments: `m16n8k16` in f32 (16-bit float operands),
/// `m16n8k32` in integers (int8 operands, int32 accumulator) or, `packed_int4`,
/// `m16n8k64` (each int8 byte two int4); each lane's `d0..d3`.
pub(crate) fn mma_sync(lanes: &[MmaLane], packed_int4: bool) -> Vec<[Scalar; 4]> {
    if lanes.first().is_some_and(|l| l.int) {
        return mma_s32(lanes, packed_int4);
    }
    mma_m16n8k16(lanes)
        .into_iter()
        .map(|d| d.map(|v| Scalar::Float(f64::from(v))))
        .collect()
}

/// Lane `l`'s accumulators `d0..d3` of a 16 x 8 `d`: `(g, 2q + e)`, `(g + 8, 2q + e)`.
fn lane_d<T: Copy>(d: &[[T; 8]; 16], l: usize) -> [T; 4] {
    let (g, q) = (l / 4, l % 4);
    [
        d[g][2 * q],
        d[g][2 * q + 1],
        d[g + 8][2 * q],
        d[g + 8][2 * q + 1],
    ]
}

/// `mma.sync.aligned.m16n8k16.row.col` on the 32 lanes' fragments (PTX ISA layouts; lane
/// `l`, `g = l / 4`, `c = l % 4`): returns each lane's `d0..d3`.
fn mma_m16n8k16(lanes: &[MmaLane]) -> Vec<[f32; 4]> {
    let mut a = [[0f32; 16]; 16];
    let mut b = [[0f32; 8]; 16];
    let mut c = [[0f32; 8]; 16];
    for (l, lane) in lanes.iter().enumerate().take(32) {
        let (g, q) = (l / 4, l % 4);
        for (k, &v) in lane.a.iter().enumerate().take(8) {
            // a0,a1: (g, 2q+e); a2,a3: (g+8, 2q+e); a4,a5: (g, 2q+8+e); a6,a7: (g+8, 2q+8+e).
            let row = g + 8 * ((k / 2) % 2);
            let col = 2 * q + k % 2 + 8 * (k / 4);
            a[row][col] = v as f32;
        }
        for (k, &v) in lane.b.iter().enumerate().take(4) {
            // b0,b1: (2q+e, g); b2,b3: (2q+8+e, g).
            b[2 * q + k % 2 + 8 * (k / 2)][g] = v as f32;
        }
        for (k, &v) in lane.c.iter().enumerate().take(4) {
            // c0,c1: (g, 2q+e); c2,c3: (g+8, 2q+e).
            c[g + 8 * (k / 2)][2 * q + k % 2] = v as f32;
        }
    }
    let mut d = [[0f32; 8]; 16];
    for i in 0..16 {
        for j in 0..8 {
            let mut sum = 0f32;
            for (k, row) in b.iter().enumerate() {
                sum += a[i][k] * row[j];
            }
            d[i][j] = sum + c[i][j];
        }
    }
    (0..lanes.len().min(32)).map(|l| lane_d(&d, l)).collect()
}

/// `mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32` (PTX ISA layouts; lane `l`,
/// `g = l / 4`, `q = l % 4`): `d = a · b + c` in exact integers, wrapped to int32 as the
/// hardware's `.s32` form (without `.satfinite`) wraps. Each lane's `d0..d3`.
///
/// `packed_int4`: `m16n8k64.row.col.s32.s4.s4.s32`, whose fragments are the same bytes in
/// the same registers (PTX ISA: A element `i` of `m16n8k64` sits at `(g + 8 (i / 8 % 2),
/// 8q + i % 8 + 32 (i / 16))`, so byte `k` of the `m16n8k32` layout at column `c` holds
/// K indices `2c` (low nibble) and `2c + 1`; B alike along its rows).
fn mma_s32(lanes: &[MmaLane], packed_int4: bool) -> Vec<[Scalar; 4]> {
    let per = if packed_int4 { 2 } else { 1 };
    let kdim = 32 * per;
    let mut a = vec![vec![0i64; kdim]; 16];
    let mut b = vec![[0i64; 8]; kdim];
    let mut c = [[0i64; 8]; 16];
    // The values of byte `v`: itself, or its two nibbles.
    let values = |v: f64| -> Vec<i64> {
        let v = v as i64;
        if packed_int4 {
            (0..2).map(|h| nibble(Scalar::Int(v), h).as_i64()).collect()
        } else {
            vec![v]
        }
    };
    for (l, lane) in lanes.iter().enumerate().take(32) {
        let (g, q) = (l / 4, l % 4);
        for (k, &v) in lane.a.iter().enumerate().take(16) {
            // a0..a3: (g, 4q+e); a4..a7: (g+8, 4q+e); a8..a11: (g, 4q+16+e);
            // a12..a15: (g+8, 4q+16+e).
            let col = 4 * q + k % 4 + 16 * (k / 8);
            for (h, x) in values(v).into_iter().enumerate() {
                a[g + 8 * ((k / 4) % 2)][per * col + h] = x;
            }
        }
        for (k, &v) in lane.b.iter().enumerate().take(8) {
            // b0..b3: (4q+e, g); b4..b7: (4q+16+e, g).
            let row = 4 * q + k % 4 + 16 * (k / 4);
            for (h, x) in values(v).into_iter().enumerate() {
                b[per * row + h][g] = x;
            }
        }
        for (k, &v) in lane.c.iter().enumerate().take(4) {
            c[g + 8 * (k / 2)][2 * q + k % 2] = v as i64;
        }
    }
    let mut d = [[Scalar::Int(0); 8]; 16];
    for i in 0..16 {
        for j in 0..8 {
            // |sum| < 64 · 2^14: exact; the accumulator's add wraps modulo 2^32.
            let sum: i64 = (0..kdim).map(|k| a[i][k] * b[k][j]).sum();
            d[i][j] = Scalar::Int(i64::from((sum + c[i][j]) as i32));
        }
    }
    (0..lanes.len().min(32)).map(|l| lane_d(&d, l)).collect()
}

/// The message for a collective (`width` threads: a warp, a warpgroup) run by group
/// `group` with threads missing.
pub(crate) fn partial_group(
    def: &IntrinsicDef,
    group: usize,
    active: usize,
    in_block: usize,
    width: usize,
) -> String {
    let (op, unit, members, member) = match def.collective {
        Collective::Warpgroup => (def.name, "warpgroup", "threads", "thread"),
        _ => (def.name, "warp", "lanes", "lane"),
    };
    if in_block < width {
        format!(
            "`{op}` is a {unit} collective, but {unit} {group} has only {in_block} threads (the \
             block size is not a multiple of {width})"
        )
    } else {
        format!(
            "`{op}` is a {unit} collective: {active} of the {width} {members} of {unit} {group} \
             execute it; every {member} must"
        )
    }
}
