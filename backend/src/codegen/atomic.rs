//! `T.atomic_add` as PTX `red` (an atomic add whose old value nobody reads), and
//! `T.atomic_add_ret` as `atom.shared.add` (the same add, returning the old value).
//!
//! - One element: `red.{global|shared}.add.T` (int64 as `.u64`, the same two's complement
//!   bits; float16 / bfloat16 with `.noftz`, bfloat16 only where the target has it).
//! - A `T.vectorized(V)` loop whose body is one add into a global buffer, at an innermost
//!   index `base + v` with `base` a provable multiple of `V` (the rule of `vector.rs`, which
//!   the passes vectorized by: `lower-tile-ops`' atomic nests): float32 as
//!   `red.global.add.v2.f32` / `.v4.f32` where the target has vector `red`s
//!   (`TargetDesc::vector_red`: sm_90a, PTX ISA 8.1), float16 / bfloat16 as packed pairs
//!   (`cvt` to the 16-bit type first, as one element's add does; two lanes in a `.b32`),
//!   `red.global.add.noftz.f16x2` / `.bf16x2` one word each, or `.v2` / `.v4` of words where
//!   the target has vector `red`s. A packed or vector `red` adds each element atomically on
//!   its own (PTX ISA, `red`): the same meaning as the lanes' scalar adds.
//! - Anything else (float32 without vector `red`s, other dtypes, shared destinations, an
//!   unaligned base) is unrolled by the caller into one `red` per lane, whose addresses share
//!   a register with immediate offsets (`offset.rs`).

use super::expr::Place;
use super::{ptx_type, Bind, Cg, Mem};
use crate::ptx::{Op, Operand, Reg, Space, Type};
use tlc_ir::{DType, ExprKind, For, Span, StmtKind};

/// The PTX type of a vector `red`'s elements for destination dtype `d`, and how many lanes
/// go into one of them (2 for the packed 16-bit pairs).
fn vector_type(d: DType, vector_red: bool, bf16: bool) -> Option<(Type, i64)> {
    match d {
        DType::Float32 if vector_red => Some((Type::F32, 1)),
        DType::Float16 => Some((Type::F16x2, 2)),
        DType::BFloat16 if bf16 => Some((Type::Bf16x2, 2)),
        _ => None,
    }
}

impl Cg {
    /// The `red` type of an element add into a buffer of dtype `d`; a located error where
    /// the target has none.
    fn red_type(&mut self, d: DType, span: Span) -> Option<Type> {
        Some(match d {
            DType::Float32 => Type::F32,
            DType::Float16 => Type::F16,
            DType::BFloat16 if self.target.desc().bf16_atomic_add => Type::Bf16,
            DType::BFloat16 => {
                self.err(
                    span,
                    format!(
                        "a bfloat16 `T.atomic_add` needs sm_90a (`red.add.bf16`); {} has none: \
                         accumulate in float32",
                        self.target.name()
                    ),
                );
                return None;
            }
            DType::Int32 => Type::S32,
            DType::UInt32 => Type::U32,
            DType::Int64 => Type::U64,
            _ => {
                self.err(span, format!("`T.atomic_add` has no {d} form"));
                return None;
            }
        })
    }

    /// `T.atomic_add(buf[i], v)`: one `red.{global|shared}.add.T`.
    pub(super) fn atomic_add(
        &mut self,
        buffer: &tlc_ir::Ident,
        indices: &[tlc_ir::Expr],
        value: &tlc_ir::Expr,
        span: Span,
    ) {
        let Some(d) = self.bufs.get(&buffer.name).map(|b| b.dtype) else {
            self.err(buffer.span, format!("undefined buffer `{}`", buffer.name));
            return;
        };
        let Some(ty) = self.red_type(d, span) else {
            return;
        };
        let Some(v) = self.expr_as(value, d) else {
            return;
        };
        let v = self.in_reg(v, ptx_type(d).unwrap_or(ty));
        match self.address(&buffer.name, indices, span) {
            Some(Place::Mem(space, addr)) => self.b.emit(Op::RedAdd {
                space,
                ty,
                addr,
                srcs: vec![v.into()],
            }),
            Some(Place::Reg(_)) => self.err(
                buffer.span,
                "`T.atomic_add` into a register buffer: only global and shared buffers take atomics",
            ),
            None => {}
        }
    }

    /// `T.atomic_add_ret(old, dst, value)`: `atom.shared.add.T old, [dst], value` — the
    /// value loaded like any register element, the old value stored into `old` like a store.
    pub(super) fn atomic_add_ret(
        &mut self,
        (old, dst, value): (&tlc_ir::ElemRef, &tlc_ir::ElemRef, &tlc_ir::ElemRef),
        span: Span,
    ) {
        let Some(d) = self.bufs.get(&dst.buffer.name).map(|b| b.dtype) else {
            self.err(
                dst.buffer.span,
                format!("undefined buffer `{}`", dst.buffer.name),
            );
            return;
        };
        let Some(ty) = self.red_type(d, span) else {
            return;
        };
        let Some(reg_ty) = self.ty(d, span) else {
            return;
        };
        let load = tlc_ir::Expr::new(
            ExprKind::Load {
                buffer: value.buffer.name.clone(),
                indices: value.indices.clone(),
            },
            value.buffer.span,
        );
        let Some(v) = self.expr(&load, d) else {
            return;
        };
        let v = self.in_reg(v, reg_ty);
        let Some(Place::Mem(space, addr)) = self.address(&dst.buffer.name, &dst.indices, span)
        else {
            self.err(
                dst.buffer.span,
                "`T.atomic_add_ret` adds into a shared buffer; this one is not in memory",
            );
            return;
        };
        let got = self.b.new_reg(reg_ty);
        self.b.emit(Op::AtomAdd {
            space,
            ty,
            dst: got,
            addr,
            src: v.into(),
        });
        match self.address(&old.buffer.name, &old.indices, span) {
            Some(Place::Reg(r)) => {
                self.forget_packed(r);
                self.b.emit(Op::Mov {
                    ty: super::expr::mov_type(reg_ty),
                    dst: r,
                    src: got.into(),
                });
                self.refresh_word(&old.buffer.name, &old.indices);
            }
            Some(Place::Mem(space, addr)) => self.store_elem(space, addr, d, got.into()),
            None => {}
        }
    }

    /// Emits the loop `for v in T.vectorized(lanes): T.atomic_add(...)` as packed or vector
    /// `red`s where it qualifies (see the module summary), else as one `red` per lane, all in
    /// the enclosing value-numbering scope so the lanes share their index math; `false`
    /// (nothing emitted) when the body is not one atomic add.
    pub(super) fn try_vector_red(&mut self, f: &For, lanes: i64) -> bool {
        let v = f.var.name.as_str();
        let mut stmts = f
            .body
            .iter()
            .filter(|s| !matches!(s.kind, StmtKind::Note(_)));
        let (
            Some(tlc_ir::Stmt {
                kind:
                    StmtKind::AtomicAdd {
                        buffer,
                        indices,
                        value,
                    },
                span,
            }),
            None,
        ) = (stmts.next(), stmts.next())
        else {
            return false;
        };
        if !self.vector_red(v, (buffer, indices, value), lanes, *span) {
            for l in 0..lanes {
                self.vars.insert(v.to_string(), Bind::Const(l));
                self.atomic_add(buffer, indices, value, *span);
            }
        }
        true
    }

    /// [`Cg::try_vector_red`]'s packed or vector `red`s for the loop variable `v`'s add
    /// `buffer[indices] += value`; `false` (nothing emitted) when the loop does not qualify.
    fn vector_red(
        &mut self,
        v: &str,
        (buffer, indices, value): (&tlc_ir::Ident, &[tlc_ir::Expr], &tlc_ir::Expr),
        lanes: i64,
        span: Span,
    ) -> bool {
        let Some(buf) = self.bufs.get(&buffer.name) else {
            return false;
        };
        let d = buf.dtype;
        let desc = self.target.desc();
        let Some((ty, per_elem)) = vector_type(d, desc.vector_red, desc.bf16_atomic_add) else {
            return false;
        };
        // A value that reads the destination would see the earlier lanes' adds one by one.
        let mut reads_dst = false;
        tlc_ir::visit::for_each_subexpr(value, &mut |e| {
            reads_dst |= matches!(&e.kind, ExprKind::Load { buffer: b, .. } if *b == buffer.name);
        });
        if !matches!(buf.mem, Mem::Global(_))
            || !matches!(lanes, 2 | 4 | 8)
            || lanes % per_elem != 0
            || reads_dst
        {
            return false;
        }
        let Some(acc) = self.vector_access(&buffer.name, indices, v, lanes) else {
            return false;
        };
        let Some(lane_ty) = ptx_type(d) else {
            return false;
        };
        let mut vals = Vec::new();
        for l in 0..lanes {
            self.vars.insert(v.to_string(), Bind::Const(l));
            let Some(x) = self.expr_as(value, d) else {
                return true;
            };
            vals.push(self.in_reg(x, lane_ty));
        }
        // The elements of the `red`s: f32 lanes, or 16-bit lanes packed two to a word.
        let elems: Vec<Reg> = if per_elem == 1 {
            vals
        } else {
            vals.chunks(2)
                .map(|p| {
                    let lanes = p.iter().map(|r| Operand::Reg(*r)).collect();
                    self.b.pack(Type::B32, lanes)
                })
                .collect()
        };
        // At most 16 bytes a `red`, and one element each without vector `red`s.
        let per_red = if desc.vector_red { 4 } else { 1 };
        for (c, chunk) in elems.chunks(per_red).enumerate() {
            let first = c as i64 * per_red as i64 * per_elem;
            let mut idx = acc.at_base.clone();
            if let Some(last) = idx.pop() {
                idx.push(tlc_ir::Expr::binary(
                    tlc_ir::BinOp::Add,
                    last,
                    tlc_ir::Expr::int(first),
                    Span::DUMMY,
                ));
            }
            let Some(Place::Mem(Space::Global, addr)) = self.address(&buffer.name, &idx, span)
            else {
                return true;
            };
            self.b.emit(Op::RedAdd {
                space: Space::Global,
                ty,
                addr,
                srcs: chunk.iter().map(|r| Operand::Reg(*r)).collect(),
            });
        }
        true
    }
}
