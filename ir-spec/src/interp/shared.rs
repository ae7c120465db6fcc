//! A block's shared memory as ONE byte array, as on a GPU: every shared buffer reads and
//! writes its elements, encoded in its dtype (little-endian), at its byte offset. A plan that
//! overlaps two live buffers therefore really corrupts data. "Never written" is tracked per
//! byte.
//!
//! At the thread level it also detects data races: between two barriers (`T.sync_threads()`),
//! a byte written by one thread may not be read or written by another, and a byte read by one
//! thread may not be written by another. Accesses made outside a thread (block-level code)
//! are not tracked. The first race is kept and reported by the executor at the statement
//! that made it.
//!
//! Bytes a `T.cp_async` will write are *pending* from its issue until it lands
//! (`ops/intrinsics.rs`): reading or writing one is an error, reported like a race.

use crate::dtype::DType;
use crate::interp::fp8;
use crate::interp::scalar::Scalar;
use std::cell::{Cell, RefCell};

/// The low half of a race cell: `thread + 1`, or [`MANY`] readers. The high half: the
/// barrier epoch of the access.
const MANY: u64 = 0xFFFF_FFFF;

pub(crate) struct SharedArena {
    bytes: Vec<u8>,
    written: Vec<bool>,
    /// Per byte: `(epoch << 32) | (thread + 1)` of its last write by a thread.
    writer: Vec<Cell<u64>>,
    /// Per byte: `(epoch << 32) | (thread + 1)` of its reader since the last barrier, or
    /// `MANY` when several threads read it.
    reader: Vec<Cell<u64>>,
    /// Starts at 1 so that a zero cell means "never".
    epoch: u64,
    race: RefCell<Option<String>>,
    /// Per byte: `thread + 1` of the `T.cp_async` that will write it, or 0.
    pending: Vec<u32>,
    /// How many bytes are pending (so that the common case checks nothing).
    n_pending: usize,
}

impl SharedArena {
    pub fn new(len: usize) -> SharedArena {
        SharedArena {
            bytes: vec![0; len],
            written: vec![false; len],
            writer: (0..len).map(|_| Cell::new(0)).collect(),
            reader: (0..len).map(|_| Cell::new(0)).collect(),
            epoch: 1,
            race: RefCell::new(None),
            pending: vec![0; len],
            n_pending: 0,
        }
    }

    /// The thread whose `T.cp_async` will write one of bytes `offset..offset + len`, if one
    /// is pending.
    pub fn pending(&self, offset: usize, len: usize) -> Option<u32> {
        if self.n_pending == 0 {
            return None;
        }
        let end = offset.checked_add(len)?;
        self.pending
            .get(offset..end)?
            .iter()
            .find(|&&p| p != 0)
            .map(|&p| p - 1)
    }

    /// A `T.cp_async` of `thread` to bytes `offset..offset + len` (inside the arena) is
    /// issued: it counts as a write by `thread` now for the race check (so a read by another
    /// thread since the last barrier is a race), and the bytes are pending until it lands.
    pub fn start_async(
        &mut self,
        offset: usize,
        len: usize,
        thread: u32,
        what: &dyn Fn() -> String,
    ) {
        let Some(end) = offset.checked_add(len).filter(|&e| e <= self.bytes.len()) else {
            return;
        };
        if let Some(other) = self.pending(offset, len) {
            self.report(pending_message("writes", &what(), Some(thread), other));
            return;
        }
        self.track_write(offset, end, thread, what);
        if let Some(p) = self.pending.get_mut(offset..end) {
            p.fill(thread + 1);
        }
        self.n_pending += len;
    }

    /// A `T.cp_async` lands: its bytes are no longer pending and are written with `data`, as
    /// a write by `thread` at this moment; `None` (block-level code) makes them visible to
    /// every thread (no race tracking, as for any block-level access).
    pub fn land(
        &mut self,
        offset: usize,
        data: &[u8],
        thread: Option<u32>,
        what: &dyn Fn() -> String,
    ) {
        let Some(end) = offset
            .checked_add(data.len())
            .filter(|&e| e <= self.bytes.len())
        else {
            return;
        };
        if let Some(p) = self.pending.get_mut(offset..end) {
            let was = p.iter().filter(|&&x| x != 0).count();
            p.fill(0);
            self.n_pending = self.n_pending.saturating_sub(was);
        }
        match thread {
            Some(t) => self.track_write(offset, end, t, what),
            None => {
                for b in offset..end {
                    if let Some(w) = self.writer.get(b) {
                        w.set(0);
                    }
                }
            }
        }
        if let Some(dst) = self.bytes.get_mut(offset..end) {
            dst.copy_from_slice(data);
        }
        if let Some(w) = self.written.get_mut(offset..end) {
            w.fill(true);
        }
    }

    /// A barrier: every access before it happens before every access after it.
    pub fn barrier(&mut self) {
        self.epoch += 1;
    }

    /// The first data race found since the last call.
    pub fn take_race(&self) -> Option<String> {
        self.race.borrow_mut().take()
    }

    fn report(&self, message: String) {
        let mut race = self.race.borrow_mut();
        if race.is_none() {
            *race = Some(message);
        }
    }

    /// The element of `dtype` at byte `offset`; `None` when one of its bytes was never
    /// written (or it lies outside the arena, which the launcher rules out).
    /// `thread` is the reading thread, `what` names the element for a race report.
    pub fn read(
        &self,
        offset: usize,
        dtype: DType,
        thread: Option<u32>,
        what: &dyn Fn() -> String,
    ) -> Option<Scalar> {
        let range = offset..offset.checked_add(dtype.bytes() as usize)?;
        let raw = self.bytes.get(range.clone())?;
        if !self.written.get(range.clone())?.iter().all(|&w| w) {
            return None;
        }
        if self.pending(offset, range.len()).is_some() {
            return None;
        }
        if let Some(t) = thread {
            let me = u64::from(t) + 1;
            let now = self.epoch << 32;
            for b in range {
                let (Some(w), Some(r)) = (self.writer.get(b), self.reader.get(b)) else {
                    continue;
                };
                let w = w.get();
                if (w & !MANY) == now && (w & MANY) != me {
                    self.report(format!(
                        "data race on shared memory: this thread reads {}, which thread {} wrote \
                         with no `T.sync_threads()` in between",
                        what(),
                        (w & MANY) - 1
                    ));
                    break;
                }
                let seen = r.get();
                if (seen & !MANY) != now {
                    r.set(now | me);
                } else if (seen & MANY) != me {
                    r.set(now | MANY);
                }
            }
        }
        Some(decode(dtype, raw))
    }

    /// Writes `value` (already of `dtype`) at byte `offset` (inside the arena). A write to a
    /// byte a `T.cp_async` has not landed yet is reported, and not done.
    pub fn write(
        &mut self,
        offset: usize,
        dtype: DType,
        value: Scalar,
        thread: Option<u32>,
        what: &dyn Fn() -> String,
    ) {
        let n = dtype.bytes() as usize;
        let Some(end) = offset.checked_add(n).filter(|&e| e <= self.bytes.len()) else {
            return;
        };
        if let Some(other) = self.pending(offset, n) {
            self.report(pending_message("writes", &what(), thread, other));
            return;
        }
        if let Some(t) = thread {
            self.track_write(offset, end, t, what);
        }
        let encoded = encode(dtype, value);
        if let (Some(dst), Some(src)) = (self.bytes.get_mut(offset..end), encoded.get(..n)) {
            dst.copy_from_slice(src);
        }
        if let Some(w) = self.written.get_mut(offset..end) {
            w.fill(true);
        }
    }

    /// The race check of a write of bytes `offset..end` by `thread`, which becomes their
    /// last writer.
    fn track_write(&self, offset: usize, end: usize, thread: u32, what: &dyn Fn() -> String) {
        let me = u64::from(thread) + 1;
        let now = self.epoch << 32;
        for b in offset..end {
            let (Some(w), Some(r)) = (self.writer.get(b), self.reader.get(b)) else {
                continue;
            };
            let (last_w, last_r) = (w.get(), r.get());
            if (last_w & !MANY) == now && (last_w & MANY) != me {
                self.report(format!(
                    "data race on shared memory: this thread writes {}, which thread {} also \
                     wrote with no `T.sync_threads()` in between",
                    what(),
                    (last_w & MANY) - 1
                ));
                break;
            }
            if (last_r & !MANY) == now && (last_r & MANY) != me {
                let who = if (last_r & MANY) == MANY {
                    "other threads".to_string()
                } else {
                    format!("thread {}", (last_r & MANY) - 1)
                };
                self.report(format!(
                    "data race on shared memory: this thread writes {}, which {who} read \
                     with no `T.sync_threads()` in between",
                    what()
                ));
                break;
            }
            w.set(now | me);
        }
    }
}

/// "this thread reads `S[3]`, shared memory that a cp.async of thread 5 has not landed yet;
/// …": an access (`verb` "reads" / "writes") of a pending byte. `thread` is the accessing
/// thread (`None`: block-level code), `issuer` the thread of the cp.async.
pub(crate) fn pending_message(verb: &str, what: &str, thread: Option<u32>, issuer: u32) -> String {
    let who = if thread.is_some() {
        "this thread"
    } else {
        "block-level code"
    };
    format!(
        "{who} {verb} {what}, shared memory that a cp.async of thread {issuer} has not landed \
         yet; missing `T.cp_async_wait`"
    )
}

/// `value` (exactly representable in `dtype`) as `dtype.bytes()` little-endian bytes, in the
/// first bytes of the result.
pub(crate) fn encode(dtype: DType, value: Scalar) -> [u8; 8] {
    let mut out = [0u8; 8];
    let mut put = |b: &[u8]| {
        if let Some(dst) = out.get_mut(..b.len()) {
            dst.copy_from_slice(b);
        }
    };
    match dtype {
        DType::Float16 => put(&half::f16::from_f64(value.as_f64()).to_le_bytes()),
        DType::BFloat16 => put(&half::bf16::from_f64(value.as_f64()).to_le_bytes()),
        DType::Float32 => put(&(value.as_f64() as f32).to_le_bytes()),
        DType::Float64 => put(&value.as_f64().to_le_bytes()),
        DType::Float8E4M3 => put(&[fp8::encode(fp8::E4M3, value.as_f64())]),
        DType::Float8E5M2 => put(&[fp8::encode(fp8::E5M2, value.as_f64())]),
        // Integers are stored in range, so these casts are exact.
        DType::Int8 => put(&(value.as_i64() as i8).to_le_bytes()),
        DType::UInt8 => put(&(value.as_i64() as u8).to_le_bytes()),
        DType::Int32 => put(&(value.as_i64() as i32).to_le_bytes()),
        DType::UInt32 => put(&(value.as_i64() as u32).to_le_bytes()),
        DType::Int64 => put(&value.as_i64().to_le_bytes()),
        DType::Bool => put(&[u8::from(value.as_bool())]),
    }
    out
}

/// The value of `dtype` whose little-endian bytes start `raw` (any bit pattern decodes).
pub(crate) fn decode(dtype: DType, raw: &[u8]) -> Scalar {
    let mut buf = [0u8; 8];
    if let Some(dst) = buf.get_mut(..raw.len().min(8)) {
        dst.copy_from_slice(raw.get(..dst.len()).unwrap_or(&[]));
    }
    let [b0, b1, b2, b3, ..] = buf;
    let two = [b0, b1];
    let four = [b0, b1, b2, b3];
    match dtype {
        DType::Float16 => Scalar::Float(half::f16::from_le_bytes(two).to_f64()),
        DType::BFloat16 => Scalar::Float(half::bf16::from_le_bytes(two).to_f64()),
        DType::Float32 => Scalar::Float(f64::from(f32::from_le_bytes(four))),
        DType::Float64 => Scalar::Float(f64::from_le_bytes(buf)),
        DType::Float8E4M3 => Scalar::Float(fp8::decode(fp8::E4M3, b0)),
        DType::Float8E5M2 => Scalar::Float(fp8::decode(fp8::E5M2, b0)),
        DType::Int8 => Scalar::Int(i64::from(i8::from_le_bytes([b0]))),
        DType::UInt8 => Scalar::Int(i64::from(b0)),
        DType::Int32 => Scalar::Int(i64::from(i32::from_le_bytes(four))),
        DType::UInt32 => Scalar::Int(i64::from(u32::from_le_bytes(four))),
        DType::Int64 => Scalar::Int(i64::from_le_bytes(buf)),
        DType::Bool => Scalar::Bool(b0 != 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_dtype_round_trips_through_its_bytes() {
        let cases = [
            (DType::Float16, Scalar::Float(-1.5)),
            (DType::BFloat16, Scalar::Float(3.0)),
            (DType::Float32, Scalar::Float(0.1f32 as f64)),
            (DType::Float64, Scalar::Float(0.1)),
            (DType::Float8E4M3, Scalar::Float(-448.0)),
            (DType::Float8E5M2, Scalar::Float(0.5)),
            (DType::Int8, Scalar::Int(-128)),
            (DType::UInt8, Scalar::Int(255)),
            (DType::Int32, Scalar::Int(-7)),
            (DType::UInt32, Scalar::Int(4_000_000_000)),
            (DType::Int64, Scalar::Int(i64::MIN)),
            (DType::Bool, Scalar::Bool(true)),
        ];
        for (dtype, v) in cases {
            assert_eq!(decode(dtype, &encode(dtype, v)), v, "{dtype}");
        }
        // f16 1.0 is 0x3C00, little-endian.
        assert_eq!(
            encode(DType::Float16, Scalar::Float(1.0))[..2],
            [0x00, 0x3C]
        );
    }

    #[test]
    fn bytes_are_tracked_and_races_found() {
        let mut a = SharedArena::new(16);
        let what = || "`S[0]`".to_string();
        assert_eq!(a.read(0, DType::Float32, None, &what), None);
        a.write(0, DType::Int8, Scalar::Int(1), Some(0), &what);
        // Three of the four bytes were never written.
        assert_eq!(a.read(0, DType::Float32, None, &what), None);
        assert_eq!(a.read(0, DType::Int8, Some(0), &what), Some(Scalar::Int(1)));
        assert!(a.take_race().is_none());
        assert_eq!(a.read(0, DType::Int8, Some(3), &what), Some(Scalar::Int(1)));
        let race = a.take_race().unwrap_or_default();
        assert!(race.contains("which thread 0 wrote"), "{race}");
        a.barrier();
        assert_eq!(a.read(0, DType::Int8, Some(3), &what), Some(Scalar::Int(1)));
        assert!(a.take_race().is_none());
        a.write(0, DType::Int8, Scalar::Int(2), Some(4), &what);
        let race = a.take_race().unwrap_or_default();
        assert!(race.contains("which thread 3 read"), "{race}");
    }

    #[test]
    fn pending_bytes_block_access_until_they_land() {
        let mut a = SharedArena::new(32);
        let what = || "`S[4]`".to_string();
        a.start_async(16, 8, 2, &what);
        assert_eq!(a.pending(16, 8), Some(2));
        assert_eq!(a.pending(0, 16), None);
        assert_eq!(a.pending(20, 2), Some(2));
        // Reads of pending bytes fail; writes are reported and not done.
        assert_eq!(a.read(16, DType::Int8, Some(2), &what), None);
        a.write(18, DType::Int8, Scalar::Int(9), Some(2), &what);
        let m = a.take_race().unwrap_or_default();
        assert!(
            m.starts_with("this thread writes `S[4]`, shared memory that a cp.async of thread 2"),
            "{m}"
        );
        // Landing by thread 2: it reads at once; another thread needs a barrier.
        a.land(16, &[1, 2, 3, 4, 5, 6, 7, 8], Some(2), &what);
        assert_eq!(a.pending(16, 8), None);
        assert_eq!(
            a.read(17, DType::Int8, Some(2), &what),
            Some(Scalar::Int(2))
        );
        assert!(a.take_race().is_none());
        assert_eq!(
            a.read(18, DType::Int8, Some(5), &what),
            Some(Scalar::Int(3))
        );
        assert!(a
            .take_race()
            .unwrap_or_default()
            .contains("which thread 2 wrote"));
        a.barrier();
        assert_eq!(
            a.read(18, DType::Int8, Some(5), &what),
            Some(Scalar::Int(3))
        );
        assert!(a.take_race().is_none());
        // Issuing onto bytes another thread read in this epoch is a race (write after read).
        a.start_async(16, 4, 1, &what);
        assert!(a
            .take_race()
            .unwrap_or_default()
            .contains("which thread 5 read"));
    }
}
