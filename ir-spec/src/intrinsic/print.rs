//! The device-print intrinsics (TileLang's `T.print`; the front end's forms are
//! `syntax/lower_print.rs`): `T.print_value(value, msg="…")`, `T.print_msg(msg="…")` and
//! `T.print_elem(buf[i, j], index, msg="…", lane=0)` — each its own name, so the printed IR
//! reads back as it was whatever the names mean (`T.print(F)` is a buffer's print when `F`
//! is a buffer). Each prints one line per thread that
//! runs it, in TileLang's format (`line` below), with the thread's block and thread
//! indices: the interpreter writes the lines (`interp/print.rs`), code generation calls
//! CUDA's `vprintf` (`backend/src/codegen/print.rs`). They write nothing the kernel reads.

use super::{
    Collective, Count, Effect, IntrinsicDef, IntrinsicOp, Needs, Param, ParamKind, RefParam,
};
use crate::dtype::DType;
use crate::ir::Scope;

const MSG: Param = Param {
    name: "msg",
    role: "message",
    kind: ParamKind::Text,
    keyword: true,
};

pub(super) static PRINT: IntrinsicDef = IntrinsicDef {
    op: IntrinsicOp::Print,
    name: "T.print_value",
    params: &[
        Param {
            name: "value",
            role: "printed value",
            kind: ParamKind::Scalar,
            keyword: false,
        },
        MSG,
    ],
    collective: Collective::Thread,
    block_level: true,
    same_dtype: &[],
    needs: Needs::Nothing,
};

pub(super) static PRINT_MSG: IntrinsicDef = IntrinsicDef {
    op: IntrinsicOp::PrintMsg,
    name: "T.print_msg",
    params: &[MSG],
    collective: Collective::Thread,
    block_level: true,
    same_dtype: &[],
    needs: Needs::Nothing,
};

/// The thread that prints a buffer's elements: its linear index in the block, or every
/// thread (`EVERY_LANE`).
pub const EVERY_LANE: i64 = -1;

pub(super) static PRINT_ELEM: IntrinsicDef = IntrinsicDef {
    op: IntrinsicOp::PrintElem,
    name: "T.print_elem",
    params: &[
        Param {
            name: "elem",
            role: "printed element",
            kind: ParamKind::Ref(RefParam {
                scopes: &[Scope::Shared, Scope::Global],
                dtypes: &[],
                count: Count::Elems(1),
                effect: Effect::Read,
            }),
            keyword: false,
        },
        Param {
            name: "index",
            role: "element index",
            kind: ParamKind::Value { default: None },
            keyword: false,
        },
        MSG,
        Param {
            name: "lane",
            role: "printing thread",
            kind: ParamKind::IntRange {
                min: EVERY_LANE,
                max: 1023,
                step: 1,
                default: Some(0),
            },
            keyword: true,
        },
    ],
    collective: Collective::Thread,
    block_level: true,
    same_dtype: &[],
    needs: Needs::Nothing,
};

/// What one print writes, before the thread's indices are known.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Printed<'a> {
    /// `T.print_msg`.
    Msg,
    /// `T.print`: a value of a dtype.
    Value(DType),
    /// `T.print_elem`: element `index` of buffer `name`, of a dtype.
    Elem { buffer: &'a str, dtype: DType },
}

/// The parts of a printed line around the run-time values, so that the interpreter and
/// `vprintf` write the same bytes: `head`, then `BlockIdx=(x, y, z), ThreadIdx=(x, y,
/// z)`, then `middle` (with the element index after it for an element), then the value.
///
/// The line is TileLang's (`tl_templates/cuda/debug.h`), its dtype names tlc's:
/// `msg='M' BlockIdx=(bx, by, bz), ThreadIdx=(tx, ty, tz): dtype=float32 value=V`; an
/// element's `…: buffer=B, index=I, dtype=… value=V`; a message alone ends after the
/// thread indices.
pub fn line_parts(msg: &str, printed: Printed<'_>) -> (String, String) {
    let head = format!("msg='{msg}' ");
    let middle = match printed {
        Printed::Msg => String::new(),
        Printed::Value(dtype) => format!(": dtype={dtype} value="),
        Printed::Elem { buffer, .. } => format!(": buffer={buffer}, index="),
    };
    (head, middle)
}

/// What follows an element's index: `, dtype=float32 value=`.
pub fn elem_tail(dtype: DType) -> String {
    format!(", dtype={dtype} value=")
}

/// How a value of `dtype` is formatted: C's `printf` conversion the back end passes to
/// `vprintf`, which the interpreter reproduces (`interp/print.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `%f` of the value as a double (float16, bfloat16, float8 and float32 widen exactly).
    Float,
    /// `%d`: a signed integer of at most 32 bits, widened to 32.
    Int,
    /// `%u`: an unsigned integer of at most 32 bits, widened to 32.
    UInt,
    /// `%lld`: a 64-bit integer.
    Int64,
    /// `true` / `false`.
    Bool,
}

impl Format {
    pub fn of(dtype: DType) -> Format {
        match dtype {
            DType::Bool => Format::Bool,
            DType::Int64 => Format::Int64,
            d if d.is_float() => Format::Float,
            d if d.is_unsigned() => Format::UInt,
            _ => Format::Int,
        }
    }
}
