//! Expressions → registers: typing by `tlc_ir::types`, int32/int64 index math with floor
//! division, int8/uint8 arithmetic wrapped to the width, f16/bf16/fp8 arithmetic through
//! f32, conversions, comparisons, selects, and loads.

use super::{elem_mem_type, ptx_type, Bind, Cg, Mem};
use crate::ptx::{
    AddrBase, Address, Cmp, CvtRound, FRound, FloatMode, FloatOp, Guard, IntOp, MulMode, Op,
    Operand, Reg, Space, Type, UnOp as PUn,
};
use tlc_ir::interp::{fp8, scalar, Scalar};
use tlc_ir::types::{comparison_dtype, infer, unify, Typed};
use tlc_ir::visit::has_load;
use tlc_ir::{BinOp, DType, Expr, ExprKind, UnOp};

/// Whether `e` reads global or shared memory (such reads must not run speculatively; local
/// arrays, in registers or in bounded local memory, never fault).
pub(super) fn reads_memory(cg: &Cg, e: &Expr) -> bool {
    let mut found = false;
    tlc_ir::visit::for_each_subexpr(e, &mut |sub| {
        if let ExprKind::Load { buffer, .. } = &sub.kind {
            if !matches!(
                cg.bufs.get(buffer).map(|b| &b.mem),
                Some(Mem::Local(_) | Mem::LocalMemory { .. })
            ) {
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

    pub(super) fn ty(&mut self, d: DType, span: tlc_ir::Span) -> Option<Type> {
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
            (ExprKind::Int(v), DType::Int8 | DType::UInt8 | DType::Int16 | DType::UInt16) => {
                return Some(Operand::Imm(scalar::wrap_int(want, *v)))
            }
            (ExprKind::Int(v), DType::Float32) => return Some(Operand::F32(*v as f32)),
            (ExprKind::Float(v), DType::Float32) => return Some(Operand::F32(*v as f32)),
            _ if is_narrow_float(want) => {
                if let Some(lit) = literal(e) {
                    // Rounded once, from the literal's exact value, as the interpreter
                    // does: the result is exact in f32.
                    let x = scalar::convert(lit, want).as_f64();
                    if let Some(format) = fp8_format(want) {
                        return Some(Operand::Imm(i64::from(fp8::encode(format, x))));
                    }
                    let f = self.b.mov(Type::F32, Operand::F32(x as f32));
                    return Some(self.convert(f.into(), DType::Float32, want).into());
                }
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
            ExprKind::Reinterpret(to, a) => self.reinterpret(a, *to, span),
            ExprKind::Unary(UnOp::Not, a) => {
                let p = self.expr(a, DType::Bool)?;
                let p = self.in_reg(p, Type::Pred);
                Some(self.b.unary(PUn::Not, Type::Pred, p).into())
            }
            ExprKind::Unary(UnOp::Neg, a) => {
                let ty = self.ty(d, span)?;
                if is_narrow_float(d) {
                    let v = self.expr_as(a, d)?;
                    let f = self.convert(v, d, DType::Float32);
                    let f = self.b.unary(PUn::Neg, Type::F32, f);
                    return Some(self.convert(f.into(), DType::Float32, d).into());
                }
                let v = self.expr_as(a, d)?;
                let v = self.in_reg(v, ty);
                let r = self.b.unary(PUn::Neg, ty, v);
                // -(-128) leaves int8; -x of a uint8 wraps.
                Some(self.wrap_byte(r, d).into())
            }
            ExprKind::Unary(UnOp::BitNot, a) => {
                let ty = self.ty(d, span)?;
                let v = self.expr_as(a, d)?;
                let v = self.in_reg(v, ty);
                let r = self.b.unary(PUn::Not, bits(ty), v);
                // ~x of a sign-extended int8 / int16 stays sign-extended; a uint8's or
                // uint16's upper bits flip.
                Some(
                    if is_narrow_int(d) && d.is_unsigned() {
                        self.wrap_byte(r, d)
                    } else {
                        r
                    }
                    .into(),
                )
            }
            ExprKind::Select(c, a, b) => self.select(c, a, b, d, span),
            ExprKind::Math(f, args) => {
                let key = self.memo_key(e, d);
                if let Some(r) = key.as_deref().and_then(|k| self.memo_get(k)) {
                    return Some(r.into());
                }
                let v = self.math(*f, args, d, span)?;
                if let (Some(key), Operand::Reg(r)) = (key, &v) {
                    self.memo_put(key, *r);
                }
                Some(v)
            }
            ExprKind::Binary(op, a, b) => {
                let key = self.memo_key(e, d);
                if let Some(r) = key.as_deref().and_then(|k| self.memo_get(k)) {
                    return Some(r.into());
                }
                let v = self.binary(*op, a, b, d, span)?;
                if let (Some(key), Operand::Reg(r)) = (key, &v) {
                    self.memo_put(key, *r);
                }
                Some(v)
            }
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
        // Only the taken arm runs: the other may read out of bounds. The arms' address math
        // is pure, so it is computed here, before the branch: the loads stay guarded, and
        // the addresses are value-numbered across arms and across neighbouring selects
        // (a masked copy's elements share one row address plus immediate offsets).
        self.hoist_addresses(a);
        self.hoist_addresses(b);
        let out = self.b.new_reg(ty);
        let (else_l, end_l) = (self.b.label("sel_else"), self.b.label("sel_end"));
        self.b.bra_if(Guard::unless(p), &else_l);
        // Each arm runs on one path only: what it computes is not reused after it.
        let x = self.scoped(|cg| cg.expr_as(a, d))?;
        self.b.emit(Op::Mov {
            ty: mov_type(ty),
            dst: out,
            src: x,
        });
        self.b.bra(&end_l);
        self.b.place(&else_l);
        let y = self.scoped(|cg| cg.expr_as(b, d))?;
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
                let y = self.scoped(|cg| cg.expr(b, DType::Bool))?;
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
        if op.is_bitwise() && d == DType::Bool {
            // `& | ^` on two bools: predicate logic (both sides evaluated, as in the
            // interpreter: no short circuit).
            let x = self.expr(a, DType::Bool)?;
            let x = self.in_reg(x, Type::Pred);
            let y = self.expr(b, DType::Bool)?;
            let iop = match op {
                BinOp::BitAnd => IntOp::And,
                BinOp::BitOr => IntOp::Or,
                _ => IntOp::Xor,
            };
            return Some(self.b.int(iop, Type::Pred, x, y).into());
        }
        let (ta, tb) = (self.typed(a)?, self.typed(b)?);
        let common = match unify(ta, tb) {
            // A shift computes in its own (the left operand's) dtype.
            Ok(_) if matches!(op, BinOp::Shl | BinOp::Shr) => d,
            _ if op.is_comparison() => match comparison_dtype(ta, tb) {
                Ok(c) => c,
                Err(m) => {
                    self.err(span, m);
                    return None;
                }
            },
            Ok(t) => t.dtype,
            Err(m) => {
                self.err(span, m);
                return None;
            }
        };
        // f16 / bf16 / fp8 are computed in f32 and rounded back (the interpreter's semantics).
        let work = if is_narrow_float(common) {
            DType::Float32
        } else {
            common
        };
        let ty = self.ty(work, span)?;
        let x = self.operand_in(a, common, work)?;
        let x = self.in_reg(x, ty);
        let y = self.operand_in(b, common, work)?;
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
            let r = self.int_op(op, ty, x, y, b, span)?;
            // int8 / uint8 wrap to their width; `& | ^`, min, max and `>>` of values in
            // range stay in range.
            match op {
                BinOp::BitAnd | BinOp::BitOr | BinOp::BitXor | BinOp::Min | BinOp::Max => r,
                BinOp::Shr => r,
                _ => self.wrap_byte(r, work),
            }
        };
        Some(self.convert(r.into(), work, d).into())
    }

    /// Operand `e` of an operation in dtype `common` computed in `work`: converted to
    /// `common` first (the interpreter's coercion: a literal, or an int32 next to a float16,
    /// rounds to `common`), then exactly widened to `work` (f32 for the narrow floats).
    fn operand_in(&mut self, e: &Expr, common: DType, work: DType) -> Option<Operand> {
        if common == work {
            return self.expr_as(e, work);
        }
        if let Some(lit) = literal(e) {
            let x = scalar::convert(lit, common).as_f64();
            return Some(Operand::F32(x as f32));
        }
        let v = self.expr_as(e, common)?;
        Some(self.convert(v, common, work).into())
    }

    /// `T.reinterpret(to, a)`: `a`'s bits read as a value of `to` (the verifier holds the
    /// widths equal). Through a 32-bit word that holds the bits in its low bits: an f32's
    /// register moved as is, a 16-bit float's (or an fp8's `.b16`) zero-extended, an
    /// integer's register itself (8- and 16-bit integers are sign- or zero-extended, so
    /// their low bits are their bits); then into `to`'s register form.
    fn reinterpret(&mut self, a: &Expr, to: DType, span: tlc_ir::Span) -> Option<Operand> {
        let from = self.typed(a)?.dtype;
        let (Some(fty), Some(tty)) = (ptx_type(from), ptx_type(to)) else {
            self.err(
                span,
                format!("codegen does not support `T.reinterpret` from {from} to {to}"),
            );
            return None;
        };
        let v = self.expr_as(a, from)?;
        let v = self.in_reg(v, fty);
        if from.bits() == 64 {
            // int64 ↔ int64 (float64 has no register form here).
            return Some(self.b.mov(tty, v).into());
        }
        let word = match fty {
            Type::F32 => self.b.mov(Type::B32, v),
            Type::F16 | Type::Bf16 | Type::B16 => self.b.cvt(Type::U32, Type::U16, v),
            _ => v,
        };
        let out = match to {
            DType::Float32 => {
                let dst = self.b.new_reg(Type::F32);
                self.b.emit(Op::Mov {
                    ty: Type::B32,
                    dst,
                    src: word.into(),
                });
                dst
            }
            DType::Float16 | DType::BFloat16 => self.b.cvt(Type::U16, Type::U32, word),
            DType::Float8E4M3 | DType::Float8E5M2 => {
                let byte = self.b.int(IntOp::And, Type::B32, word, Operand::Imm(0xFF));
                self.b.cvt(Type::U16, Type::U32, byte)
            }
            _ => self.wrap_byte(word, to),
        };
        Some(out.into())
    }

    /// `r` (a 32-bit register) wrapped to `d`'s width when `d` is an 8- or 16-bit integer
    /// (sign- or zero-extending its low bits); `r` itself otherwise.
    pub(super) fn wrap_byte(&mut self, r: Reg, d: DType) -> Reg {
        match narrow_type(d) {
            Some(t) if d.is_unsigned() => self.b.cvt(Type::U32, t, r),
            Some(t) => self.b.cvt(Type::S32, t, r),
            None => r,
        }
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
            BinOp::BitAnd => self.b.int(IntOp::And, bits(ty), x, y),
            BinOp::BitOr => self.b.int(IntOp::Or, bits(ty), x, y),
            BinOp::BitXor => self.b.int(IntOp::Xor, bits(ty), x, y),
            BinOp::Shl | BinOp::Shr => {
                let count = self.shift_count(ty, y);
                if op == BinOp::Shl {
                    self.b.int(IntOp::Shl, bits(ty), x, count)
                } else {
                    self.b.int(IntOp::Shr, ty, x, count)
                }
            }
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

    /// A shift count as PTX reads it (`.u32`, counts above the width clamped to it): the
    /// IR's count is the operand's bits read as unsigned (docs/ir.md), so a 64-bit count
    /// is clamped to 64 before it is narrowed (a count of 2^32 + 1 must not become 1).
    fn shift_count(&mut self, ty: Type, y: Operand) -> Operand {
        if let Operand::Imm(c) = y {
            let width = i64::from(ty.bytes() * 8);
            return Operand::Imm(if (0..width).contains(&c) { c } else { width });
        }
        if ty.bytes() == 8 {
            let y = self.in_reg(y, Type::U64);
            let clamped = self.b.int(IntOp::Min, Type::U64, y, Operand::Imm(64));
            return self.b.cvt(Type::U32, Type::U64, clamped).into();
        }
        y
    }

    /// Floor division / modulo from C's truncating ones: when the remainder is non-zero and
    /// its sign differs from the divisor's, q -= 1 and r += b.
    fn floor_divmod(&mut self, div: bool, ty: Type, x: Reg, y: Operand) -> Reg {
        if let Operand::Imm(c) = y {
            if c > 0 {
                return self.floor_divmod_by(div, ty, x, c);
            }
        }
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

    /// Floor division / modulo by a positive constant `c`, kept an immediate so ptxas
    /// turns it into a multiply-high: the remainder is negative exactly when the floor
    /// result needs the fix-up (q -= 1, r += c).
    fn floor_divmod_by(&mut self, div: bool, ty: Type, x: Reg, c: i64) -> Reg {
        if ty == Type::S32 {
            if let Some((m, shift)) = magic_u31(c) {
                // floor(x / c) = s ^ ((x ^ s) / c) with s = x >> 31 (all ones when x < 0):
                // for x < 0, floor(x / c) = -floor(~x / c) - 1 = ~floor(~x / c), and
                // ~x = x ^ s lies in [0, 2^31), where the multiply-high is exact.
                let s = self.b.int(IntOp::Shr, Type::S32, x, Operand::Imm(31));
                let y = self.b.int(IntOp::Xor, Type::B32, x, Operand::Reg(s));
                let hi = self
                    .b
                    .int(IntOp::Mul(MulMode::Hi), Type::U32, y, Operand::Imm(m));
                let uq = self.b.int(IntOp::Shr, Type::U32, hi, Operand::Imm(shift));
                let q = self.b.int(IntOp::Xor, Type::B32, uq, Operand::Reg(s));
                if div {
                    return q;
                }
                return self.b.mad(MulMode::Lo, Type::S32, q, Operand::Imm(-c), x);
            }
        }
        let r = self.b.int(IntOp::Rem, ty, x, Operand::Imm(c));
        let neg = self.b.setp(Cmp::Lt, ty, r, Operand::Imm(0));
        if div {
            let q = self.b.int(IntOp::Div, ty, x, Operand::Imm(c));
            let one = self.b.selp(ty, Operand::Imm(1), Operand::Imm(0), neg);
            self.b.int(IntOp::Sub, ty, q, one)
        } else {
            let adj = self.b.selp(ty, Operand::Imm(c), Operand::Imm(0), neg);
            self.b.int(IntOp::Add, ty, r, adj)
        }
    }

    /// Converts `v` from `from` to `to` (docs/ir.md's conversion rules).
    pub(super) fn convert(&mut self, v: Operand, from: DType, to: DType) -> Reg {
        let (Some(ft), Some(tt)) = (ptx_type(from), ptx_type(to)) else {
            return self.b.new_reg(Type::B32);
        };
        let same_register = from.is_int() && to.is_int() && ft.bytes() == tt.bytes();
        if from == to || (same_register && !is_narrow_int(to)) {
            return self.in_reg(v, ft);
        }
        let v = self.in_reg(v, ft);
        // fp8 goes through f32, both ways: decoding is exact, and every other dtype reaches
        // f32 exactly (integers past 2^24 round, but they saturate the fp8 range anyway), so
        // the one rounding is the encoder's.
        if is_fp8(from) {
            let f = self.fp8_decode(v, from);
            return self.convert(f.into(), DType::Float32, to);
        }
        if is_fp8(to) {
            let f = self.convert(v.into(), from, DType::Float32);
            return self.fp8_encode(f, to);
        }
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
            // Into int8 / uint8: the low byte, sign- or zero-extended (from any width).
            (false, false) if is_narrow_int(to) => match narrow_type(to) {
                Some(t) => self.b.cvt(tt, t, v),
                None => v,
            },
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
                let i = self.b.cvt_with(Some(CvtRound::Rzi), true, tt, Type::F32, f);
                // Truncated and saturated to 32 bits (NaN → 0), then to the byte's range.
                match to {
                    DType::Int8 => {
                        let lo = self.b.int(IntOp::Max, Type::S32, i, Operand::Imm(-128));
                        self.b.int(IntOp::Min, Type::S32, lo, Operand::Imm(127))
                    }
                    DType::UInt8 => self.b.int(IntOp::Min, Type::U32, i, Operand::Imm(255)),
                    DType::Int16 => {
                        let lo = self.b.int(IntOp::Max, Type::S32, i, Operand::Imm(-32768));
                        self.b.int(IntOp::Min, Type::S32, lo, Operand::Imm(32767))
                    }
                    DType::UInt16 => self.b.int(IntOp::Min, Type::U32, i, Operand::Imm(65535)),
                    _ => i,
                }
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

    /// Computes, in the current scope, the address of every global or shared load in `e`
    /// whose indices load nothing (what a later `address` of the same element reuses).
    /// Integer index math has no faults, so running it ahead of a guard is safe.
    pub(super) fn hoist_addresses(&mut self, e: &Expr) {
        let mut loads = Vec::new();
        tlc_ir::visit::for_each_subexpr(e, &mut |sub| {
            if let ExprKind::Load { buffer, indices } = &sub.kind {
                loads.push((buffer.clone(), indices.clone(), sub.span));
            }
        });
        for (buffer, indices, span) in loads {
            self.hoist_address(&buffer, &indices, span);
        }
    }

    /// `hoist_addresses` for one element: a global or shared `buffer[indices]` whose indices
    /// load nothing (and that no vector access of this loop already covers). Only
    /// buffers of constant strides: their elements that differ by constants share one
    /// register (`flat_index`), which is the point; with a symbolic stride every row has
    /// its own address, and computing it early only lengthens its life.
    pub(super) fn hoist_address(&mut self, buffer: &str, indices: &[Expr], span: tlc_ir::Span) {
        let in_memory = self.bufs.get(buffer).is_some_and(|b| {
            b.shape.len() == indices.len()
                && !matches!(b.mem, Mem::Local(_) | Mem::LocalMemory { .. })
                && b.shape.iter().skip(1).all(|d| self.const_eval(d).is_some())
        });
        let vector = self
            .vec_loads
            .iter()
            .any(|(b, i, _)| b == buffer && i.as_slice() == indices);
        // No load at all in the indices, local arrays included: such an address is not
        // worth computing ahead, and a local element may be rewritten inside the arm.
        if in_memory && !vector && !indices.iter().any(has_load) {
            // An optimization never reports: the guarded access itself reports whatever
            // is wrong with this address, once.
            let reported = self.errors.len();
            let _ = self.address(buffer, indices, span);
            self.errors.truncate(reported);
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
            Mem::LocalMemory { .. } => self.local_memory_address(buffer, indices, &buf),
            Mem::Shared(off) => {
                let (flat, konst) = self.flat_index(indices, &buf.shape, Type::S32)?;
                let base = self.smem.unwrap_or(flat);
                let a = self.scaled_base(Type::S32, flat, size, base);
                Some(Place::Mem(
                    Space::Shared,
                    Address {
                        base: AddrBase::Reg(a),
                        offset: off.checked_add(konst.checked_mul(size)?)?,
                    },
                ))
            }
            Mem::Global(base) => {
                let (flat, konst) = self.flat_index(indices, &buf.shape, Type::S64)?;
                let a = self.scaled_base(Type::S64, flat, size, *base);
                Some(Place::Mem(
                    Space::Global,
                    Address {
                        base: AddrBase::Reg(a),
                        offset: konst.checked_mul(size)?,
                    },
                ))
            }
        }
    }

    /// `base + flat * size`, computed once per (flat, size, base) on a path (`memo.rs`).
    pub(super) fn scaled_base(&mut self, ty: Type, flat: Reg, size: i64, base: Reg) -> Reg {
        let key = format!("addr:{ty:?}:{flat}*{size}+{base}");
        if let Some(r) = self.memo_get(&key) {
            return r;
        }
        let a = if size == 1 {
            self.b.add(ty, flat, base)
        } else {
            self.b.mad(MulMode::Lo, ty, flat, Operand::Imm(size), base)
        };
        self.memo_put(key, a);
        a
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

    /// Row-major flattening of `indices` over `shape` in `ty` (s32 or s64): a register and
    /// a constant number of elements to add to it. The constant parts of indices whose
    /// strides are constants are split off (`offset.rs`), so accesses that differ by
    /// constants share the register.
    pub(super) fn flat_index(
        &mut self,
        indices: &[Expr],
        shape: &[Expr],
        ty: Type,
    ) -> Option<(Reg, i64)> {
        // strides[k]: the product of the extents after k, when they are all constants.
        let mut strides = vec![None; shape.len()];
        let mut stride = Some(1i64);
        for k in (0..shape.len()).rev() {
            strides[k] = stride;
            stride = stride.and_then(|s| s.checked_mul(self.const_eval(&shape[k])?));
        }
        let mut acc: Option<Reg> = None;
        let mut konst = 0i64;
        for ((i, d), stride) in indices.iter().zip(shape).zip(strides) {
            let split = stride.and_then(|st| {
                let (var, c) = self.split_const(i);
                Some((var, konst.checked_add(c.checked_mul(st)?)?))
            });
            let var = match split {
                Some((var, k)) => {
                    konst = k;
                    var
                }
                None => Some(i.clone()),
            };
            let iv = match &var {
                Some(v) => self.index(v, ty)?,
                None => Operand::Imm(0),
            };
            acc = match acc {
                None if iv == Operand::Imm(0) => None,
                None => Some(self.in_reg(iv, ty)),
                Some(a) => {
                    let dv = self.index(d, ty)?;
                    let key = format!("mad:{ty:?}:{a}*{dv:?}+{iv:?}");
                    Some(match self.memo_get(&key) {
                        Some(r) => r,
                        None => {
                            let r = self.b.mad(MulMode::Lo, ty, a, dv, iv);
                            self.memo_put(key, r);
                            r
                        }
                    })
                }
            };
        }
        let flat = match acc {
            Some(a) => a,
            None => self.b.mov(ty, Operand::Imm(0)),
        };
        Some((flat, konst))
    }

    /// An integer index (or extent) as an operand of type `ty` (s32, or s64 widened).
    fn index(&mut self, e: &Expr, ty: Type) -> Option<Operand> {
        if let Some(v) = self.const_eval(e) {
            return Some(Operand::Imm(v));
        }
        let t = self.typed(e)?;
        let want = if ty == Type::S64 {
            DType::Int64
        } else {
            DType::Int32
        };
        // The widened value is value-numbered too (an index is widened once per path).
        let key = (t.dtype != want)
            .then(|| self.memo_key(e, t.dtype))
            .flatten()
            .map(|k| format!("{want}<-{k}"));
        if let Some(r) = key.as_deref().and_then(|k| self.memo_get(k)) {
            return Some(r.into());
        }
        let v = self.expr(e, t.dtype)?;
        let mut r = self.convert(v, t.dtype, want);
        if has_load(e) {
            // An index read from a local array may be that element's own register, which a
            // later store rewrites: address keys (`mad:`, `addr:`) must name a copy.
            r = self.b.mov(ty, r);
        }
        if let Some(k) = key {
            self.memo_put(k, r);
        }
        Some(r.into())
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
        let dtype = dtype?;
        self.ty(dtype, span)?;
        match place {
            Place::Reg(r) => Some(r.into()),
            Place::Mem(space, addr) => self.load_elem(space, addr, dtype).map(Operand::Reg),
        }
    }

    /// One element of dtype `d` loaded from memory into its register (`ptx_type`): 8-bit
    /// integers sign- / zero-extended into 32 bits, a bool byte compared with 0, fp8 bits
    /// into the low byte of a `.b16`.
    pub(super) fn load_elem(&mut self, space: Space, addr: Address, d: DType) -> Option<Reg> {
        let (ty, mt) = (ptx_type(d)?, elem_mem_type(d)?);
        Some(match d {
            DType::Bool => {
                let byte = self.b.ld_widened(space, mt, Type::U32, addr);
                self.b.setp(Cmp::Ne, Type::U32, byte, Operand::Imm(0))
            }
            _ if is_narrow_int(d) => self.b.ld_widened(space, mt, ty, addr),
            _ => self.b.ld(space, mt, addr),
        })
    }

    /// Stores `v` (a value of dtype `d`) as one element: a bool as the byte 1 or 0, 8-bit
    /// values as their register's low byte.
    pub(super) fn store_elem(&mut self, space: Space, addr: Address, d: DType, v: Operand) {
        let (Some(ty), Some(mt)) = (ptx_type(d), elem_mem_type(d)) else {
            return;
        };
        let mut v = self.in_reg(v, ty);
        if d == DType::Bool {
            v = self.b.selp(Type::U32, Operand::Imm(1), Operand::Imm(0), v);
        }
        self.b.st(space, mt, addr, vec![v.into()]);
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

pub(super) fn is_fp8(d: DType) -> bool {
    matches!(d, DType::Float8E4M3 | DType::Float8E5M2)
}

/// The float dtypes computed in f32 and rounded back: f16, bf16 and the fp8 formats.
pub(super) fn is_narrow_float(d: DType) -> bool {
    is_half(d) || is_fp8(d)
}

/// 8- and 16-bit integers: 32-bit registers, wrapped to their width after arithmetic.
pub(super) fn is_narrow_int(d: DType) -> bool {
    narrow_type(d).is_some()
}

/// The `cvt` source type that reads a register's low bits as the 8- or 16-bit integer `d`.
fn narrow_type(d: DType) -> Option<Type> {
    match d {
        DType::Int8 => Some(Type::S8),
        DType::UInt8 => Some(Type::U8),
        DType::Int16 => Some(Type::S16),
        DType::UInt16 => Some(Type::U16),
        _ => None,
    }
}

/// The interpreter's format of an fp8 dtype.
pub(super) fn fp8_format(d: DType) -> Option<fp8::Fp8Format> {
    match d {
        DType::Float8E4M3 => Some(fp8::E4M3),
        DType::Float8E5M2 => Some(fp8::E5M2),
        _ => None,
    }
}

/// The value of a literal (`3`, `0.5`), as the interpreter reads it before converting it.
fn literal(e: &Expr) -> Option<Scalar> {
    match e.kind {
        ExprKind::Int(v) => Some(Scalar::Int(v)),
        ExprKind::Float(x) => Some(Scalar::Float(x)),
        _ => None,
    }
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

/// `(m, shift)` with `n / c = mulhi(n, m) >> shift` for every `0 <= n < 2^31` (unsigned
/// multiply-high of 32-bit words): `m = ceil(2^(31 + l) / c)`, `l = ceil(log2 c)`, which
/// fits 32 bits and errs by less than `c <= 2^l` (Granlund & Montgomery, 1994). `None`
/// for `c < 3` or powers of two (a shift does those) and divisors past 2^31.
pub(super) fn magic_u31(c: i64) -> Option<(i64, i64)> {
    if !(3..=1 << 31).contains(&c) || (c & (c - 1)) == 0 {
        return None;
    }
    let c = c as u64;
    let l = 64 - u64::from((c - 1).leading_zeros());
    let m = (1u64 << (31 + l)).div_ceil(c);
    if m >= 1 << 32 {
        return None;
    }
    Some((m as i64, l as i64 - 1))
}

#[cfg(test)]
mod tests {
    use super::magic_u31;

    /// The emitted sequence, step for step, in Rust.
    fn floor_div(x: i32, m: i64, shift: i64) -> i32 {
        let s = x >> 31;
        let y = (x ^ s) as u32;
        let hi = ((u64::from(y) * m as u64) >> 32) as u32;
        ((hi >> shift) as i32) ^ s
    }

    #[test]
    fn magic_division_is_floor_division() {
        let edges = [0, 1, 2, 3, 5, 7, 100, 1 << 20, i32::MAX - 1, i32::MAX];
        for c in [
            3i64,
            5,
            6,
            7,
            9,
            10,
            12,
            25,
            100,
            160,
            320,
            641,
            1000,
            4095,
            65_537,
            1 << 30 | 1,
        ] {
            let (m, shift) = magic_u31(c).expect("a magic number");
            let mut xs: Vec<i32> = edges
                .iter()
                .flat_map(|&e| [e, -e, e.wrapping_neg() - 1])
                .collect();
            xs.push(i32::MIN);
            for k in -40i64..40 {
                for d in -2..=2 {
                    if let Ok(x) = i32::try_from(k * c + d) {
                        xs.push(x);
                    }
                }
            }
            let mut seed = 0x9e37_79b9_u32;
            for _ in 0..2000 {
                seed ^= seed << 13;
                seed ^= seed >> 17;
                seed ^= seed << 5;
                xs.push(seed as i32);
            }
            for x in xs {
                let want = i64::from(x).div_euclid(c) as i32;
                assert_eq!(floor_div(x, m, shift), want, "{x} // {c}");
                let r = i64::from(x) - i64::from(floor_div(x, m, shift)) * c;
                assert!((0..c).contains(&r), "{x} % {c} = {r}");
            }
        }
        assert_eq!(magic_u31(8), None);
        assert_eq!(magic_u31(2), None);
    }
}
