//! Local arrays indexed at run time (`tlc_passes::analysis::local_arrays` decides which, per
//! array, once): each lives in per-thread local memory, `.local .align S .b8
//! __local_NAME[N * S];` (S the element size), whose 32-bit address is taken once at the
//! kernel's top (`mov.u32 %r, __local_NAME`). Accesses are `ld.local` / `st.local` of the
//! element's type (`.b16` for f16 / bf16):
//! - all indices constant: `[__local_NAME+flat*S]`, checked in bounds like a register
//!   array's;
//! - indices the analysis proves in bounds: `base + flat * S` (`mad.lo.s32`), with the
//!   constant parts of the indices as an immediate offset, as for shared memory;
//! - any other: the flat index is **clamped**, `min.u32 flat, N-1` (a negative index is a
//!   huge unsigned one), then scaled. The GPU never reads or writes outside the array: an
//!   out-of-range index — an error in the interpreter — reaches some element of the same
//!   array instead. Clamped reads cannot fault, so they may run speculatively (a
//!   `T.if_then_else` arm reading one needs no branch).
//!
//! Local memory is not zeroed (reading a never-written element is an error in the
//! interpreter). Intrinsic operands (`T.ldmatrix`, `T.mma_sync`) need register arrays.

use super::expr::Place;
use super::{Buf, Cg, Mem};
use crate::ptx::{AddrBase, Address, IntOp, Operand, Space, Type};
use tlc_ir::{BufferDecl, Expr};

/// The most local memory a thread may use (CUDA's limit: 512 KiB per thread).
const MAX_LOCAL_BYTES: i64 = 512 * 1024;

impl Cg {
    /// Declares `alloc` (`n` elements, indexed at run time) in local memory.
    pub(super) fn declare_local_memory(&mut self, alloc: &BufferDecl, n: i64) -> Option<Mem> {
        let name = &alloc.name.name;
        let size = i64::from(alloc.dtype.bytes());
        let bytes = n.saturating_mul(size);
        self.local_bytes = self.local_bytes.saturating_add(bytes);
        let fits = u32::try_from(bytes)
            .ok()
            .filter(|_| self.local_bytes <= MAX_LOCAL_BYTES && n > 0);
        let Some(bytes32) = fits else {
            self.err(
                alloc.span,
                format!(
                    "local array `{name}` is indexed at run time, so it lives in local memory: \
                     it needs {bytes} bytes (a thread has {MAX_LOCAL_BYTES} in all, and an \
                     array needs at least one element)"
                ),
            );
            return None;
        };
        let plain = name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_');
        let symbol = if plain {
            format!("__local_{name}")
        } else {
            format!("__local_{}", self.bufs.len())
        };
        let symbol = self
            .b
            .local_array(&symbol, alloc.dtype.bytes().max(1), bytes32);
        let base = self.b.mov(Type::U32, Operand::Symbol(symbol.clone()));
        Some(Mem::LocalMemory {
            symbol,
            base,
            len: n,
        })
    }

    /// The address of `buffer[indices]`, an element of `buf` in local memory (see the
    /// module's summary).
    pub(super) fn local_memory_address(
        &mut self,
        buffer: &str,
        indices: &[Expr],
        buf: &Buf,
    ) -> Option<Place> {
        let Mem::LocalMemory { symbol, base, len } = &buf.mem else {
            return None;
        };
        let (base, len, shape) = (*base, *len, buf.shape.as_slice());
        let size = i64::from(buf.dtype.bytes());
        if indices.iter().all(|i| self.const_eval(i).is_some()) {
            let flat = i64::try_from(self.local_flat(buffer, indices, shape)?).ok()?;
            return Some(Place::Mem(
                Space::Local,
                Address {
                    base: AddrBase::Symbol(symbol.clone()),
                    offset: flat.checked_mul(size)?,
                },
            ));
        }
        let (flat, konst) = self.flat_index(indices, shape, Type::S32)?;
        if self.locals.in_bounds(buffer, indices) {
            let a = self.scaled_base(Type::S32, flat, size, base);
            return Some(Place::Mem(
                Space::Local,
                Address {
                    base: AddrBase::Reg(a),
                    offset: konst.checked_mul(size)?,
                },
            ));
        }
        let key = format!("clamp:{flat}+{konst}<{len}");
        let clamped = match self.memo_get(&key) {
            Some(r) => r,
            None => {
                let whole = if konst == 0 {
                    flat
                } else {
                    self.b.add(Type::S32, flat, Operand::Imm(konst))
                };
                let r = self
                    .b
                    .int(IntOp::Min, Type::U32, whole, Operand::Imm(len - 1));
                self.memo_put(key, r);
                r
            }
        };
        let a = self.scaled_base(Type::S32, clamped, size, base);
        Some(Place::Mem(
            Space::Local,
            Address {
                base: AddrBase::Reg(a),
                offset: 0,
            },
        ))
    }
}
