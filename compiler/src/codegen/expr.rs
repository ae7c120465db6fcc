//! Expressions → registers: typing by `tlc_ir::types`, int32/int64 index math with floor
//! division, f16/bf16 arithmetic through f32, conversions, comparisons, selects, and loads.

use super::{ptx_type, Bind, Cg, Mem};
use crate::ptx::{
    AddrBase, Address, Cmp, CvtRound, FRound, FloatMode, FloatOp, Guard, IntOp, MulMode, Op,
    Operand, Reg, Space, Type, UnOp as PUn,
};
use tlc_ir::types::{infer, unify, Typed};
use tlc_ir::{BinOp, DType, Expr, ExprKind, UnOp};

/// Whether `e` reads global or shared memory (such reads must not run speculatively).
pub(super) fn reads_memory(cg: &Cg, e: &Expr) -> bool {
    let mut found = false;
    tlc_ir::visit::for_each_subexpr(e, &mut |sub| {
        if let ExprKind::Load { buffer, .. } = &sub.kind {
            if !matches!(cg.bufs.get(buffer).map(|b| &b.mem), Some(Mem::Local(_))) {
                found = true;
            }
        }
    });
    found
}

impl Cg {
    pub(super) fn typed(&mut self, e: &Expr) -> Option<Typed> {
        let vars = &self.vars;
        let bufs = &self.bufs;
        let r = infer(
            e,
            &|n| {
                vars.get(n).map(|b| match b {
                    Bind::Reg(_, d) => *d,
                    Bind::Const(_) => DType::Int32,
                })
            },
            &|n| bufs.get(n).map(|b| b.dtype),
        );
        match r {
            Ok(t) => Some(t),
            Err((at, msg)) => {
                let span = at.span;
                self.err(span, msg);
                None
            }
        }
    }

    /// The value of `e` when it is a constant (literals and unrolled loop variables).
    pub(super) fn const_eval(&self, e: &Expr) -> Option<i64> {
        match &e.kind {
            ExprKind::Int(v) => Some(*v),
            ExprKind::Var(n) => match self.vars.get(n) {
                Some(Bind::Const(v)) => Some(*v),
                _ => None,
            },
            ExprKind::Unary(UnOp::Neg, a) => self.const_eval(a)?.checked_neg(),
            ExprKind::Binary(op, a, b) => {
                let v = tlc_ir::fold_int(*op, self.const_eval(a)?, self.const_eval(b)?)?;
                i32::try_from(v).ok().map(i64::from)
            }
            _ => None,
        }
    }

    fn ty(&mut self, d: DType, span: tlc_ir::Span) -> Option<Type> {
        match ptx_type(d) {
            Some(t) => Some(t),
            None => {
                self.err(span, format!("codegen does not support {d} values yet"));
                None
            }
        }
    }

    /// A register holding `op` (immediates are moved into one).
    pub(super) fn in_reg(&mut self, op: Operand, ty: Type) -> Reg {
        match op {
            Operand::Reg(r) => r,
            other => self.b.mov(mov_type(ty), other),
        }
    }

    pub(super) fn zero(&mut self, ty: Type) -> Reg {
        match ty {
            Type::F32 => self.b.mov(Type::F32, Operand::F32(0.0)),
            Type::Pred => {
                let z = self.b.mov(Type::U32, Operand::Imm(0));
                self.b.setp(Cmp::Ne, Type::U32, z, 0)
            }
            t => self.b.mov(mov_type(t), Operand::Imm(0)),
        }
    }

    /// Evaluates `e` converted to `want`.
    pub(super) fn expr_as(&mut self, e: &Expr, want: DType) -> Option<Operand> {
        // Literals become immediates of the wanted type directly.
        match (&e.kind, want) {
            (ExprKind::Int(v), DType::Int32 | DType::UInt32 | DType::Int64) => {
                return Some(Operand::Imm(*v))
            }
            (ExprKind::Int(v), DType::Float32) => return Some(Operand::F32(*v as f32)),
            (ExprKind::Float(v), DType::Float32) => return Some(Operand::F32(*v as f32)),
            (ExprKind::Int(_) | ExprKind::Float(_), DType::Float16 | DType::BFloat16) => {
                let f = self.expr_as(e, DType::Float32)?;
                let f = self.in_reg(f, Type::F32);
                return Some(self.convert(f.into(), DType::Float32, want).into());
            }
            _ => {}
        }
        let t = self.typed(e)?;
        let v = self.expr(e, t.dtype)?;
        self.ty(want, e.span)?;
        Some(self.convert(v, t.dtype, want).into())
    }

    /// Evaluates `e` (whose dtype is `d`) into an operand.
    pub(super) fn expr(&mut self, e: &Expr, d: DType) -> Option<Operand> {
        let span = e.span;
        match &e.kind {
            ExprKind::Int(_) | ExprKind::Float(_) => self.expr_as(e, d),
            ExprKind::Bool(v) => {
                let z = self.b.mov(Type::U32, Operand::Imm(i64::from(*v)));
                Some(self.b.setp(Cmp::Ne, Type::U32, z, 0).into())
            }
            ExprKind::Var(n) => match self.vars.get(n) {
                Some(Bind::Reg(r, _)) => Some((*r).into()),
                Some(Bind::Const(v)) => Some(Operand::Imm(*v)),
                None => {
                    self.err(span, format!("undefined name `{n}`"));
                    None
                }
            },
            ExprKind::Load { buffer, indices } => self.load(buffer, indices, span),
            ExprKind::Cast(to, a) => self.expr_as(a, *to),
            ExprKind::Unary(UnOp::Not, a) => {
                let p = self.expr(a, DType::Bool)?;
                let p = self.in_reg(p, Type::Pred);
                Some(self.b.unary(PUn::Not, Type::Pred, p).into())
            }
            ExprKind::Unary(UnOp::Neg, a) => {
                let ty = self.ty(d, span)?;
                if is_half(d) {
                    let f = self.expr_as(a, DType::Float32)?;
                    let f = self.b.unary(PUn::Neg, Type::F32, f);
                    return Some(self.convert(f.into(), DType::Float32, d).into());
                }
                let v = self.expr_as(a, d)?;
                let v = self.in_reg(v, ty);
                Some(self.b.unary(PUn::Neg, ty, v).into())
            }
            ExprKind::Select(c, a, b) => self.select(c, a, b, d, span),
            ExprKind::Binary(op, a, b) => self.binary(*op, a, b, d, span),
        }
    }

    fn select(
        &mut self,
        c: &Expr,
        a: &Expr,
        b: &Expr,
        d: DType,
        span: tlc_ir::Span,
    ) -> Option<Operand> {
        let ty = self.ty(d, span)?;
        let p = self.expr(c, DType::Bool)?;
        let p = self.in_reg(p, Type::Pred);
        if d != DType::Bool && !reads_memory(self, a) && !reads_memory(self, b) {
            let x = self.expr_as(a, d)?;
            let x = self.in_reg(x, ty);
            let y = self.expr_as(b, d)?;
            return Some(self.b.selp(sel_type(ty), x, y, p).into());
        }
        // Only the taken arm runs: the other may read out of bounds.
        let out = self.b.new_reg(ty);
        let (else_l, end_l) = (self.b.label("sel_else"), self.b.label("sel_end"));
        self.b.bra_if(Guard::unless(p), &else_l);
        let x = self.expr_as(a, d)?;
        self.b.emit(Op::Mov {
            ty: mov_type(ty),
            dst: out,
            src: x,
        });
        self.b.bra(&end_l);
        self.b.place(&else_l);
        let y = self.expr_as(b, d)?;
        self.b.emit(Op::Mov {
            ty: mov_type(ty),
            dst: out,
            src: y,
        });
        self.b.place(&end_l);
        Some(out.into())
    }

    fn binary(
        &mut self,
        op: BinOp,
        a: &Expr,
        b: &Expr,
        d: DType,
        span: tlc_ir::Span,
    ) -> Option<Operand> {
        if op.is_logical() {
            let x = self.expr(a, DType::Bool)?;
            let x = self.in_reg(x, Type::Pred);
            if reads_memory(self, b) {
                // Short-circuit: the right side may be guarded by the left one.
                let out = self.b.new_reg(Type::Pred);
                self.b.emit(Op::Mov {
                    ty: Type::Pred,
                    dst: out,
                    src: x.into(),
                });
                let end_l = self.b.label("sc_end");
                let skip = if op == BinOp::And {
                    Guard::unless(out)
                } else {
                    Guard::when(out)
                };
                self.b.bra_if(skip, &end_l);
                let y = self.expr(b, DType::Bool)?;
                self.b.emit(Op::Mov {
                    ty: Type::Pred,
                    dst: out,
                    src: y,
                });
                self.b.place(&end_l);
                return Some(out.into());
            }
            let y = self.expr(b, DType::Bool)?;
            let iop = if op == BinOp::And {
                IntOp::And
            } else {
                IntOp::Or
            };
            return Some(self.b.int(iop, Type::Pred, x, y).into());
        }
        let (ta, tb) = (self.typed(a)?, self.typed(b)?);
        let common = match unify(ta, tb) {
            Ok(t) => t.dtype,
            Err(m) => {
                self.err(span, m);
                return None;
            }
        };
        // f16 / bf16 are computed in f32 and rounded back (the interpreter's semantics).
        let work = if is_half(common) {
            DType::Float32
        } else {
            common
        };
        let ty = self.ty(work, span)?;
        let x = self.expr_as(a, work)?;
        let x = self.in_reg(x, ty);
        let y = self.expr_as(b, work)?;
        if op.is_comparison() {
            let float = work == DType::Float32;
            let cmp = match op {
                BinOp::Lt => Cmp::Lt,
                BinOp::Le => Cmp::Le,
                BinOp::Gt => Cmp::Gt,
                BinOp::Ge => Cmp::Ge,
                BinOp::Eq => Cmp::Eq,
                _ if float => Cmp::Neu,
                _ => Cmp::Ne,
            };
            return Some(self.b.setp(cmp, ty, x, y).into());
        }
        let r = if work == DType::Float32 {
            let fop = match op {
                BinOp::Add => FloatOp::Add,
                BinOp::Sub => FloatOp::Sub,
                BinOp::Mul => FloatOp::Mul,
                BinOp::Div => FloatOp::Div,
                BinOp::Min => FloatOp::Min,
                BinOp::Max => FloatOp::Max,
                _ => {
                    self.err(span, format!("codegen does not support `{op:?}` on floats"));
                    return None;
                }
            };
            // An explicit .rn keeps ptxas from fusing mul+add into fma (the interpreter
            // rounds every operation).
            let mode = match fop {
                FloatOp::Min | FloatOp::Max => FloatMode::Default,
                _ => FloatMode::Round(FRound::Rn),
            };
            let dst = self.b.new_reg(Type::F32);
            self.b.emit(Op::Float {
                op: fop,
                mode,
                ftz: false,
                ty: Type::F32,
                dst,
                a: x.into(),
                b: y,
            });
            dst
        } else {
            self.int_op(op, ty, x, y, b, span)?
        };
        Some(self.convert(r.into(), work, d).into())
    }

    fn int_op(
        &mut self,
        op: BinOp,
        ty: Type,
        x: Reg,
        y: Operand,
        b: &Expr,
        span: tlc_ir::Span,
    ) -> Option<Reg> {
        let signed = ty.is_signed();
        let c = self.const_eval(b).filter(|v| *v > 0);
        let pow2 = c.filter(|v| (*v as u64).is_power_of_two());
        Some(match op {
            BinOp::Add => self.b.int(IntOp::Add, ty, x, y),
            BinOp::Sub => self.b.int(IntOp::Sub, ty, x, y),
            BinOp::Mul => self.b.int(IntOp::Mul(MulMode::Lo), ty, x, y),
            BinOp::Div => self.b.int(IntOp::Div, ty, x, y),
            BinOp::Min => self.b.int(IntOp::Min, ty, x, y),
            BinOp::Max => self.b.int(IntOp::Max, ty, x, y),
            BinOp::FloorDiv | BinOp::FloorMod if !signed => {
                let iop = if op == BinOp::FloorDiv {
                    IntOp::Div
                } else {
                    IntOp::Rem
                };
                self.b.int(iop, ty, x, y)
            }
            // Exactly floor semantics in two's complement for a positive power of two.
            BinOp::FloorDiv if pow2.is_some() => {
                let k = pow2.map_or(0, |v| v.trailing_zeros());
                self.b.int(IntOp::Shr, ty, x, Operand::Imm(i64::from(k)))
            }
            BinOp::FloorMod if pow2.is_some() => {
                let m = pow2.map_or(0, |v| v - 1);
                self.b.int(IntOp::And, bits(ty), x, Operand::Imm(m))
            }
            BinOp::FloorDiv | BinOp::FloorMod => self.floor_divmod(op == BinOp::FloorDiv, ty, x, y),
            BinOp::CeilDiv => {
                // ceildiv(a, b) = floordiv(a + b - 1, b), as the interpreter defines it.
                let yr = self.in_reg(y.clone(), ty);
                let bm1 = self.b.int(IntOp::Sub, ty, yr, Operand::Imm(1));
                let num = self.b.int(IntOp::Add, ty, x, bm1);
                if let Some(k) = pow2.map(|v| v.trailing_zeros()) {
                    self.b.int(IntOp::Shr, ty, num, Operand::Imm(i64::from(k)))
                } else {
                    self.floor_divmod(true, ty, num, y)
                }
            }
            _ => {
                self.err(span, format!("codegen does not support `{op:?}` here"));
                return None;
            }
        })
    }

    /// Floor division / modulo from C's truncating ones: when the remainder is non-zero and
    /// its sign differs from the divisor's, q -= 1 and r += b.
    fn floor_divmod(&mut self, div: bool, ty: Type, x: Reg, y: Operand) -> Reg {
        let y = self.in_reg(y, ty);
        let q = self.b.int(IntOp::Div, ty, x, y);
        let r = self.b.int(IntOp::Rem, ty, x, y);
        let sign = self.b.int(IntOp::Xor, bits(ty), r, y);
        let nz = self.b.setp(Cmp::Ne, ty, r, Operand::Imm(0));
        let p = self.b.setp_combined(
            Cmp::Lt,
            crate::ptx::BoolOp::And,
            ty,
            sign,
            Operand::Imm(0),
            Guard::when(nz),
        );
        if div {
            let one = self.b.selp(ty, Operand::Imm(1), Operand::Imm(0), p);
            self.b.int(IntOp::Sub, ty, q, one)
        } else {
            let adj = self.b.selp(ty, y, Operand::Imm(0), p);
            self.b.int(IntOp::Add, ty, r, adj)
        }
    }

    /// Converts `v` from `from` to `to` (docs/ir.md's conversion rules).
    pub(super) fn convert(&mut self, v: Operand, from: DType, to: DType) -> Reg {
        let (Some(ft), Some(tt)) = (ptx_type(from), ptx_type(to)) else {
            return self.b.new_reg(Type::B32);
        };
        if from == to || (from.is_int() && to.is_int() && ft.bytes() == tt.bytes()) {
            return self.in_reg(v, ft);
        }
        let v = self.in_reg(v, ft);
        if to == DType::Bool {
            return if from.is_float() {
                let f = self.convert(v.into(), from, DType::Float32);
                self.b.setp(Cmp::Neu, Type::F32, f, Operand::F32(0.0))
            } else {
                self.b.setp(Cmp::Ne, ft, v, Operand::Imm(0))
            };
        }
        if from == DType::Bool {
            if to.is_float() {
                let f = self
                    .b
                    .selp(Type::F32, Operand::F32(1.0), Operand::F32(0.0), v);
                return self.convert(f.into(), DType::Float32, to);
            }
            return self.b.selp(tt, Operand::Imm(1), Operand::Imm(0), v);
        }
        match (from.is_float(), to.is_float()) {
            (false, false) => self.b.cvt(tt, ft, v),
            (false, true) => {
                let f = self.b.cvt_with(Some(CvtRound::Rn), false, Type::F32, ft, v);
                if to == DType::Float32 {
                    f
                } else {
                    self.b.cvt_with(Some(CvtRound::Rn), false, tt, Type::F32, f)
                }
            }
            (true, false) => {
                let f = self.convert(v.into(), from, DType::Float32);
                self.b.cvt_with(Some(CvtRound::Rzi), true, tt, Type::F32, f)
            }
            (true, true) => {
                if from == DType::Float32 {
                    self.b.cvt_with(Some(CvtRound::Rn), false, tt, ft, v)
                } else {
                    let f = self.b.cvt_with(None, false, Type::F32, ft, v);
                    if to == DType::Float32 {
                        f
                    } else {
                        self.b.cvt_with(Some(CvtRound::Rn), false, tt, Type::F32, f)
                    }
                }
            }
        }
    }

    /// The address of `buffer[indices]`: (space, address), or a local register.
    pub(super) fn address(
        &mut self,
        buffer: &str,
        indices: &[Expr],
        span: tlc_ir::Span,
    ) -> Option<Place> {
        let Some(buf) = self.bufs.get(buffer).cloned() else {
            self.err(span, format!("undefined buffer `{buffer}`"));
            return None;
        };
        if indices.len() != buf.shape.len() {
            self.err(span, format!("`{buffer}` has {} dims", buf.shape.len()));
            return None;
        }
        let size = i64::from(buf.dtype.bytes());
        match &buf.mem {
            Mem::Local(regs) => {
                let flat = self.local_flat(buffer, indices, &buf.shape)?;
                regs.get(flat).copied().map(Place::Reg)
            }
            Mem::Shared(off) => {
                let flat = self.flat_index(indices, &buf.shape, Type::S32)?;
                let base = self.smem.unwrap_or(flat);
                let a = self
                    .b
                    .mad(MulMode::Lo, Type::S32, flat, Operand::Imm(size), base);
                Some(Place::Mem(
                    Space::Shared,
                    Address {
                        base: AddrBase::Reg(a),
                        offset: *off,
                    },
                ))
            }
            Mem::Global(base) => {
                let flat = self.flat_index(indices, &buf.shape, Type::S64)?;
                let a = self
                    .b
                    .mad(MulMode::Lo, Type::S64, flat, Operand::Imm(size), *base);
                Some(Place::Mem(Space::Global, Address::reg(a)))
            }
        }
    }

    /// The row-major position of a local array element: every index must be a constant in
    /// bounds (a spanned error otherwise).
    pub(super) fn local_flat(
        &mut self,
        buffer: &str,
        indices: &[Expr],
        shape: &[Expr],
    ) -> Option<usize> {
        let mut flat: i64 = 0;
        for (i, d) in indices.iter().zip(shape) {
            let (Some(iv), Some(dv)) = (self.const_eval(i), d.as_int()) else {
                self.err(
                    i.span,
                    format!(
                        "index of local array `{buffer}` is not a constant: unroll the loop (T.unroll) first"
                    ),
                );
                return None;
            };
            if iv < 0 || iv >= dv {
                self.err(
                    i.span,
                    format!("index {iv} is out of bounds of `{buffer}` (extent {dv})"),
                );
                return None;
            }
            flat = flat * dv + iv;
        }
        usize::try_from(flat).ok()
    }

    /// Row-major flattening of `indices` over `shape` in `ty` (s32 or s64).
    fn flat_index(&mut self, indices: &[Expr], shape: &[Expr], ty: Type) -> Option<Reg> {
        let mut acc: Option<Reg> = None;
        for (i, d) in indices.iter().zip(shape) {
            let iv = self.index(i, ty)?;
            acc = Some(match acc {
                None => self.in_reg(iv, ty),
                Some(a) => {
                    let dv = self.index(d, ty)?;
                    let iv = self.in_reg(iv, ty);
                    self.b.mad(MulMode::Lo, ty, a, dv, iv)
                }
            });
        }
        match acc {
            Some(a) => Some(a),
            None => Some(self.b.mov(ty, Operand::Imm(0))),
        }
    }

    /// An integer index (or extent) as an operand of type `ty` (s32, or s64 widened).
    fn index(&mut self, e: &Expr, ty: Type) -> Option<Operand> {
        if let Some(v) = self.const_eval(e) {
            return Some(Operand::Imm(v));
        }
        let t = self.typed(e)?;
        let v = self.expr(e, t.dtype)?;
        let want = if ty == Type::S64 {
            DType::Int64
        } else {
            DType::Int32
        };
        Some(self.convert(v, t.dtype, want).into())
    }

    fn load(&mut self, buffer: &str, indices: &[Expr], span: tlc_ir::Span) -> Option<Operand> {
        if let Some((_, _, regs)) = self
            .vec_loads
            .iter()
            .find(|(b, i, _)| b == buffer && i.as_slice() == indices)
        {
            return regs.get(self.lane).map(|r| (*r).into());
        }
        let dtype = self.bufs.get(buffer).map(|b| b.dtype);
        let place = self.address(buffer, indices, span)?;
        let ty = self.ty(dtype?, span)?;
        match place {
            Place::Reg(r) => Some(r.into()),
            Place::Mem(space, addr) => Some(self.b.ld(space, mem_type(ty), addr).into()),
        }
    }
}

/// Where an element lives.
pub(super) enum Place {
    Reg(Reg),
    Mem(Space, Address),
}

pub(super) fn is_half(d: DType) -> bool {
    matches!(d, DType::Float16 | DType::BFloat16)
}

/// The bit type of the same width (for and/xor).
fn bits(ty: Type) -> Type {
    match ty.bytes() {
        8 => Type::B64,
        2 => Type::B16,
        _ => Type::B32,
    }
}

/// The type `mov` uses for a register of `ty` (f16/bf16 registers are `.b16`).
pub(super) fn mov_type(ty: Type) -> Type {
    match ty {
        Type::F16 | Type::Bf16 => Type::B16,
        t => t,
    }
}

fn sel_type(ty: Type) -> Type {
    mov_type(ty)
}

/// The type of a memory access of an element of `ty`.
pub(super) fn mem_type(ty: Type) -> Type {
    mov_type(ty)
}
