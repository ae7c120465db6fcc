//! `T.vectorized(V)` loops as vector memory accesses. A loop qualifies when its body is one
//! store whose value has no select / `and` / `or` (guarded loops stay scalar), every global
//! or shared access (the store's target and each load) has the innermost index `base + v`
//! with `base` provably a multiple of V (`analysis::int`: the rule `lower-tile-ops` and
//! `inject-cp-async` vectorize by), `v` nowhere else, an innermost extent that is a
//! constant multiple of V, 1-, 2- or 4-byte elements and V·size a multiple of 4 bytes, and
//! no load reads the stored buffer. Such accesses become `ld`/`st` `.v2`/`.v4` of at most 16
//! bytes each (f16/bf16 pairs packed into b32 lanes; 1-byte elements four to a b32 word,
//! taken apart with `bfe` and put together with `bfi`); local arrays and arithmetic are done
//! lane by lane. Tensor base pointers are assumed 16-byte aligned (the runtime allocates
//! each tensor separately; cuMemAlloc aligns to 256) and arena offsets are multiples of 16.
//! Anything else is unrolled into scalar accesses by the caller.

use super::expr::{mov_type, Place};
use super::{elem_mem_type, ptx_type, Bind, Cg, Mem};
use crate::ptx::{Cmp, IntOp, Op, Operand, Reg, Type, VecWidth};
use tlc_ir::interval::Interval;
use tlc_ir::{BinOp, DType, Expr, ExprKind, For, Span, StmtKind};
use tlc_passes::analysis::int::{mentions, multiple_of, unit_offset, Env};

/// A vectorizable access: the buffer, its indices with the innermost replaced by `base`.
pub(super) struct Access {
    pub buffer: String,
    pub at_base: Vec<Expr>,
    pub bytes: u32,
}

/// What codegen knows of a variable: unrolled loop variables (and lets of constants) are
/// constants, and dims are multiples of their declared `multiple_of`, for the one
/// `multiple_of` of the analysis floor.
impl Env for Cg {
    fn range(&self, name: &str) -> Option<Interval> {
        match self.vars.get(name) {
            Some(Bind::Const(v)) => Some(Interval::point(*v)),
            _ => None,
        }
    }

    fn multiple(&self, name: &str) -> i64 {
        match self.vars.get(name) {
            Some(Bind::Const(_)) => 1,
            _ => self.dim_multiples.get(name).copied().unwrap_or(1),
        }
    }
}

impl Cg {
    pub(super) fn vector_access(
        &self,
        buffer: &str,
        indices: &[Expr],
        v: &str,
        lanes: i64,
    ) -> Option<Access> {
        let buf = self.bufs.get(buffer)?;
        match &buf.mem {
            Mem::Global(_) => {}
            Mem::Shared(off) if off % 16 == 0 => {}
            _ => return None,
        }
        let bytes = buf.dtype.bytes();
        // 16-bit integers live in 32-bit registers, which the 2-byte lanes (f16 / bf16
        // registers) do not take: accessed one element at a time.
        if matches!(buf.dtype, DType::Int16 | DType::UInt16) {
            return None;
        }
        if !matches!(bytes, 1 | 2 | 4) || (lanes * i64::from(bytes)) % 4 != 0 {
            return None;
        }
        let (last, outer) = indices.split_last()?;
        if outer.iter().any(|e| mentions(e, v)) {
            return None;
        }
        let base = unit_offset(last, v)?;
        if !multiple_of(&base, lanes, self) {
            return None;
        }
        let inner = buf.shape.last()?.as_int()?;
        if inner % lanes != 0 {
            return None;
        }
        let mut at_base = outer.to_vec();
        at_base.push(base);
        Some(Access {
            buffer: buffer.to_string(),
            at_base,
            bytes,
        })
    }

    /// The chunks of an access: (indices, elements) of at most 16 bytes each.
    fn chunks(acc: &Access, lanes: i64) -> Vec<(Vec<Expr>, i64)> {
        let per = (16 / i64::from(acc.bytes)).min(lanes);
        (0..lanes / per)
            .map(|c| {
                let mut idx = acc.at_base.clone();
                if let Some(last) = idx.pop() {
                    idx.push(Expr::binary(
                        BinOp::Add,
                        last,
                        Expr::int(c * per),
                        Span::DUMMY,
                    ));
                }
                (idx, per)
            })
            .collect()
    }

    /// Emits the loop with vector accesses; `false` (nothing emitted) when it does not qualify.
    pub(super) fn try_vectorize(&mut self, f: &For, lanes: i64) -> bool {
        let v = f.var.name.as_str();
        // One store; notes beside it mean nothing (a vector access writes no comment).
        let mut stmts = f
            .body
            .iter()
            .filter(|s| !matches!(s.kind, StmtKind::Note(_)));
        let (Some(stmt), None) = (stmts.next(), stmts.next()) else {
            return false;
        };
        let StmtKind::Store {
            buffer,
            indices,
            value,
        } = &stmt.kind
        else {
            return false;
        };
        if !matches!(lanes, 2 | 4 | 8 | 16) {
            return false;
        }
        let mut guarded = false;
        let mut loads = Vec::new();
        tlc_ir::visit::for_each_subexpr(value, &mut |s| match &s.kind {
            ExprKind::Select(..) | ExprKind::Binary(BinOp::And | BinOp::Or, ..) => guarded = true,
            ExprKind::Load { buffer, indices } => loads.push((buffer.clone(), indices.clone())),
            _ => {}
        });
        if guarded || loads.iter().any(|(b, _)| *b == buffer.name) {
            return false;
        }
        let is_local =
            |cg: &Cg, b: &str| matches!(cg.bufs.get(b).map(|x| &x.mem), Some(Mem::Local(_)));
        let mut vec_loads = Vec::new();
        for (b, idx) in &loads {
            if idx.iter().any(|e| {
                let mut nested = false;
                tlc_ir::visit::for_each_subexpr(e, &mut |s| {
                    nested |= matches!(s.kind, ExprKind::Load { .. })
                });
                nested
            }) {
                return false;
            }
            if is_local(self, b) {
                continue;
            }
            match self.vector_access(b, idx, v, lanes) {
                Some(a) => vec_loads.push((b.clone(), idx.clone(), a)),
                None => return false,
            }
        }
        let store_vec = if is_local(self, &buffer.name) {
            None
        } else {
            match self.vector_access(&buffer.name, indices, v, lanes) {
                Some(a) => Some(a),
                None => return false,
            }
        };
        if let (Some(dst), [(src_name, _, src)]) = (&store_vec, vec_loads.as_slice()) {
            if matches!(value.kind, ExprKind::Load { .. }) && self.byte_copy(src_name, src, dst) {
                self.word_copy(src, dst, lanes, stmt.span);
                return true;
            }
        }
        // Loads first (all lanes), then the per-lane values, then the store.
        let mut loaded = Vec::new();
        for (b, idx, acc) in &vec_loads {
            let Some(regs) = self.vector_load(acc, lanes) else {
                return true;
            };
            loaded.push((b.clone(), idx.clone(), regs));
        }
        let saved = std::mem::replace(&mut self.vec_loads, loaded);
        let Some(d) = self.bufs.get(&buffer.name).map(|b| b.dtype) else {
            return true;
        };
        let Some(ty) = ptx_type(d) else {
            return true;
        };
        let mut vals = Vec::new();
        for l in 0..lanes {
            self.vars.insert(v.to_string(), Bind::Const(l));
            self.lane = l as usize;
            let Some(x) = self.expr_as(value, d) else {
                break;
            };
            let x = self.in_reg(x, ty);
            if store_vec.is_none() {
                if let Some(Place::Reg(r)) = self.address(&buffer.name, indices, stmt.span) {
                    self.forget_packed(r);
                    self.b.emit(Op::Mov {
                        ty: mov_type(ty),
                        dst: r,
                        src: x.into(),
                    });
                }
            }
            vals.push(x);
        }
        self.vec_loads = saved;
        if let Some(acc) = store_vec {
            if vals.len() as i64 == lanes {
                self.vector_store(&acc, &vals, lanes, stmt.span);
            }
        }
        true
    }

    fn vector_load(&mut self, acc: &Access, lanes: i64) -> Option<Vec<Reg>> {
        let dtype = self.bufs.get(&acc.buffer)?.dtype;
        let mt = elem_mem_type(dtype)?;
        let mut out = Vec::new();
        for (idx, per) in Self::chunks(acc, lanes) {
            let Some(Place::Mem(space, addr)) = self.address(&acc.buffer, &idx, Span::DUMMY) else {
                return None;
            };
            let words = (per * i64::from(acc.bytes) / 4) as usize;
            let width = VecWidth::from_lanes(words)?;
            if acc.bytes == 4 {
                out.extend(self.b.ld_vec(space, mt, width, addr));
            } else if acc.bytes == 1 {
                for w in self.b.ld_vec(space, Type::B32, width, addr) {
                    for k in 0..4 {
                        out.push(self.byte_lane(w, 8 * k, dtype));
                    }
                }
            } else {
                for w in self.b.ld_vec(space, Type::B32, width, addr) {
                    out.extend(self.b.unpack(Type::B32, Type::B16, 2, w));
                }
            }
        }
        Some(out)
    }

    fn vector_store(&mut self, acc: &Access, vals: &[Reg], lanes: i64, span: Span) {
        let Some(dtype) = self.bufs.get(&acc.buffer).map(|b| b.dtype) else {
            return;
        };
        let mut rest = vals;
        for (idx, per) in Self::chunks(acc, lanes) {
            let Some(Place::Mem(space, addr)) = self.address(&acc.buffer, &idx, span) else {
                return;
            };
            let (chunk, tail) = rest.split_at((per as usize).min(rest.len()));
            rest = tail;
            if acc.bytes == 4 {
                let srcs = chunk.iter().map(|r| Operand::Reg(*r)).collect();
                let Some(mt) = elem_mem_type(dtype) else {
                    return;
                };
                self.b.st(space, mt, addr, srcs);
            } else if acc.bytes == 1 {
                let mut words = Vec::new();
                for quad in chunk.chunks(4) {
                    let mut word: Option<Reg> = None;
                    for (k, r) in (0u32..).zip(quad) {
                        let byte = self.byte_word(*r, dtype);
                        word = Some(match word {
                            None => byte,
                            Some(w) => self.b.bfi(byte, w, 8 * k, 8),
                        });
                    }
                    words.extend(word.map(Operand::Reg));
                }
                self.b.st(space, Type::B32, addr, words);
            } else {
                let srcs = chunk
                    .chunks(2)
                    .map(|p| {
                        let lanes = p.iter().map(|r| Operand::Reg(*r)).collect();
                        Operand::Reg(self.b.pack(Type::B32, lanes))
                    })
                    .collect();
                self.b.st(space, Type::B32, addr, srcs);
            }
        }
    }

    /// Whether storing the load `src` (of buffer `src_name`) to `dst` copies 1-byte values
    /// unchanged: one int8, uint8 or fp8 dtype on both sides (a bool is stored as 0 / 1,
    /// whatever non-zero byte it was read from, so bool copies go lane by lane).
    fn byte_copy(&self, src_name: &str, src: &Access, dst: &Access) -> bool {
        let dtype = |b: &str| self.bufs.get(b).map(|x| x.dtype);
        let (s, d) = (dtype(src_name), dtype(&dst.buffer));
        src.bytes == 1 && s == d && s.is_some_and(|d| d != DType::Bool)
    }

    /// A copy of 1-byte elements as whole words: `ld` then `st` `.v{1,2,4}.b32`.
    fn word_copy(&mut self, src: &Access, dst: &Access, lanes: i64, span: Span) {
        for ((sidx, per), (didx, _)) in Self::chunks(src, lanes)
            .into_iter()
            .zip(Self::chunks(dst, lanes))
        {
            let Some(Place::Mem(sspace, saddr)) = self.address(&src.buffer, &sidx, span) else {
                return;
            };
            let Some(Place::Mem(dspace, daddr)) = self.address(&dst.buffer, &didx, span) else {
                return;
            };
            let Some(width) = VecWidth::from_lanes((per / 4) as usize) else {
                return;
            };
            let words = self.b.ld_vec(sspace, Type::B32, width, saddr);
            let words = words.into_iter().map(Operand::Reg).collect();
            self.b.st(dspace, Type::B32, daddr, words);
        }
    }

    /// Byte `pos / 8` of the word `w` as a value of the 1-byte dtype `d`, in the register
    /// `load_elem` would have loaded it into.
    fn byte_lane(&mut self, w: Reg, pos: u32, d: DType) -> Reg {
        match d {
            DType::Int8 => self.b.bfe(Type::S32, w, pos, 8),
            DType::Bool => {
                let byte = self
                    .b
                    .int(IntOp::And, Type::B32, w, Operand::Imm(0xFF << pos));
                self.b.setp(Cmp::Ne, Type::U32, byte, Operand::Imm(0))
            }
            DType::UInt8 => self.b.bfe(Type::U32, w, pos, 8),
            // fp8: the bits, into the low byte of a `.b16`.
            _ => {
                let byte = self.b.bfe(Type::U32, w, pos, 8);
                self.b.cvt(Type::U16, Type::U32, byte)
            }
        }
    }

    /// A value of the 1-byte dtype `d` as a 32-bit word whose low byte is what memory holds
    /// (a bool as 1 / 0); the other bits are whatever they are.
    fn byte_word(&mut self, r: Reg, d: DType) -> Reg {
        match d {
            DType::Bool => self.b.selp(Type::U32, Operand::Imm(1), Operand::Imm(0), r),
            DType::Float8E4M3 | DType::Float8E5M2 => self.b.cvt(Type::U32, Type::U16, r),
            _ => r,
        }
    }
}
