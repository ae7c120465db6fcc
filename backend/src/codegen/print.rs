//! The print intrinsics (`T.print`, `T.print_msg`, `T.print_elem`) → CUDA's `vprintf`.
//!
//! The line (`tlc_ir::intrinsic::line_parts`) is one format string in global memory with
//! the message, buffer name and dtype written into it (`%` doubled), so the only run-time
//! arguments are numbers: the block's `%ctaid.{x,y,z}` and the thread's `%tid.{x,y,z}`
//! (`%d`), an element's index (`%d`) and the value — `%f` of a double (floats widen
//! exactly), `%d` / `%u` of 32 bits, `%lld` of 64, or `%s` of the string `true` / `false`.
//! They are stored in a per-kernel `.local` buffer at offsets aligned to their sizes, as
//! `vprintf` reads them, and its generic address is the call's second argument. An
//! element's printing thread (`lane`) is the only one that calls: the others branch past.
//! The interpreter writes the same bytes (`tlc_ir::interp`, `print.rs`).

use super::Cg;
use crate::ptx::{Address, Cmp, Guard, IntOp, MulMode, Operand, Reg, Space, SpecialReg, Type};
use tlc_ir::intrinsic::{elem_tail, line_parts, Format, Printed, EVERY_LANE};
use tlc_ir::{DType, Expr, ExprKind, Intrinsic, Span};

/// The argument buffer's bytes: six `u32` indices, an index, then an 8-byte value.
const ARGS_BYTES: u32 = 40;
const ARGS_SYMBOL: &str = "__tlc_print_args";

impl Cg {
    /// One print intrinsic (the caller matched one).
    pub(super) fn print(&mut self, i: &Intrinsic, span: Span) {
        let (msg, value, index, lane, buffer) = match i {
            Intrinsic::Print { value, msg } => (msg, Some(value.clone()), None, EVERY_LANE, None),
            Intrinsic::PrintMsg { msg } => (msg, None, None, EVERY_LANE, None),
            Intrinsic::PrintElem {
                elem,
                index,
                msg,
                lane,
            } => {
                let load = Expr::new(
                    ExprKind::Load {
                        buffer: elem.buffer.name.clone(),
                        indices: elem.indices.clone(),
                    },
                    elem.buffer.span,
                );
                (
                    msg,
                    Some(load),
                    Some(index),
                    *lane,
                    Some(elem.buffer.name.as_str()),
                )
            }
            _ => return,
        };
        let skip = self.b.label("print_skip");
        if lane != EVERY_LANE {
            let linear = self.linear_thread_index();
            let other = self.b.setp(Cmp::Ne, Type::U32, linear, Operand::Imm(lane));
            self.b.bra_if(Guard::when(other), &skip);
        }
        let typed = match &value {
            Some(v) => match self.typed(v) {
                Some(t) => Some((v, t.dtype)),
                None => return,
            },
            None => None,
        };
        let printed = match (typed, buffer) {
            (None, _) => Printed::Msg,
            (Some((_, dtype)), Some(buffer)) => Printed::Elem { buffer, dtype },
            (Some((_, dtype)), None) => Printed::Value(dtype),
        };
        let (head, middle) = line_parts(msg, printed);
        let mut format = escape(&head);
        format.push_str("BlockIdx=(%d, %d, %d), ThreadIdx=(%d, %d, %d)");
        format.push_str(&escape(&middle));
        let args = self.print_args();
        let specials = [
            SpecialReg::CtaidX,
            SpecialReg::CtaidY,
            SpecialReg::CtaidZ,
            SpecialReg::TidX,
            SpecialReg::TidY,
            SpecialReg::TidZ,
        ];
        let mut offset = 0i64;
        for s in specials {
            let r = self.b.special(s);
            self.store_arg(Type::U32, r.into(), offset);
            offset += 4;
        }
        if let (Some(index), Some((_, dtype))) = (index, typed) {
            let Some(i) = self.expr_as(index, DType::Int32) else {
                return;
            };
            self.store_arg(Type::U32, i, offset);
            offset += 4;
            format.push_str("%d");
            format.push_str(&escape(&elem_tail(dtype)));
        }
        if let Some((v, dtype)) = typed {
            let Some(value) = self.expr(v, dtype) else {
                return;
            };
            offset = (offset + 7) / 8 * 8;
            match Format::of(dtype) {
                Format::Float => {
                    let f = self.convert(value, dtype, DType::Float32);
                    let d = self.b.cvt(Type::F64, Type::F32, f);
                    self.store_arg(Type::F64, d.into(), offset);
                    format.push_str("%f");
                }
                Format::Int | Format::UInt => {
                    let unsigned = Format::of(dtype) == Format::UInt;
                    let to = if unsigned {
                        DType::UInt32
                    } else {
                        DType::Int32
                    };
                    let w = self.convert(value, dtype, to);
                    self.store_arg(Type::U32, w.into(), offset);
                    format.push_str(if unsigned { "%u" } else { "%d" });
                }
                Format::Int64 => {
                    self.store_arg(Type::U64, value, offset);
                    format.push_str("%lld");
                }
                Format::Bool => {
                    let t = self.b.global_string("true");
                    let f = self.b.global_string("false");
                    let (ta, fa) = (
                        self.b.generic_address(&t, Space::Global),
                        self.b.generic_address(&f, Space::Global),
                    );
                    let p = self.convert(value, dtype, DType::Bool);
                    let s = self.b.selp(Type::U64, ta, fa, p);
                    self.store_arg(Type::U64, s.into(), offset);
                    format.push_str("%s");
                }
            }
        }
        format.push('\n');
        let symbol = self.b.global_string(&format);
        let format_addr = self.b.generic_address(&symbol, Space::Global);
        self.b.emit(crate::ptx::Op::Vprintf {
            format: format_addr,
            args,
        });
        self.b.place(&skip);
        let _ = span;
    }

    /// The generic address of the kernel's argument buffer (declared on first use).
    fn print_args(&mut self) -> Reg {
        if !self.b.has_local(ARGS_SYMBOL) {
            self.b.local_array(ARGS_SYMBOL, 8, ARGS_BYTES);
        }
        self.b.generic_address(ARGS_SYMBOL, Space::Local)
    }

    fn store_arg(&mut self, ty: Type, v: Operand, offset: i64) {
        self.b.st(
            Space::Local,
            ty,
            Address {
                base: crate::ptx::AddrBase::Symbol(ARGS_SYMBOL.to_string()),
                offset,
            },
            vec![v],
        );
    }

    /// The thread's linear index in its block: `tid.x + X * (tid.y + Y * tid.z)`.
    pub(super) fn linear_thread_index(&mut self) -> Reg {
        let x = self.threads.first().copied().unwrap_or(1);
        let y = self.threads.get(1).copied().unwrap_or(1);
        let tx = self.b.special(SpecialReg::TidX);
        if self.threads.len() <= 1 {
            return tx;
        }
        let ty = self.b.special(SpecialReg::TidY);
        let tz = self.b.special(SpecialReg::TidZ);
        let lo = IntOp::Mul(MulMode::Lo);
        let yz = self.b.int(lo, Type::U32, tz, Operand::Imm(i64::from(y)));
        let yz = self.b.int(IntOp::Add, Type::U32, yz, ty);
        let off = self.b.int(lo, Type::U32, yz, Operand::Imm(i64::from(x)));
        self.b.int(IntOp::Add, Type::U32, off, tx)
    }
}

/// Text written into a format string as it is: `%` doubled.
fn escape(text: &str) -> String {
    text.replace('%', "%%")
}
