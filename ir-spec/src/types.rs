//! Typing rules of scalar expressions, shared by the verifier (static) and the interpreter
//! (dynamic), so that both agree on what `a + b` means.
//!
//! Rules:
//! - An integer literal is `int32` if it fits, else `int64`; a float literal is `float32`;
//!   loop and block variables and symbolic dims are `int32`; a let without a declared type
//!   takes its value's dtype.
//! - Literals are *weak*: a literal operand adopts the dtype of a non-literal operand it meets
//!   (an int literal next to a `float16` value is a `float16`; a float literal next to an
//!   integer value makes the result `float32`).
//! - Two non-literal operands: equal dtypes give that dtype; two integers give the wider
//!   (on equal width the signed one); an integer and a float give the float; two floats give
//!   the wider, and two different 16-bit or 8-bit floats give `float32`.
//! - Comparisons give `bool`; `and`, `or`, `not` and conditions take `bool`.
//! - `bool` never takes part in arithmetic; `& | ^` on two bools are logical. A comparison
//!   reads a `bool` beside an integer as that integer's 0 or 1 (TVM's `mask[k] != 0`), and
//!   two bools as int32 0 / 1.
//! - `& | ^ << >> ~` take integers (unified as for arithmetic); `<<` / `>>` give the left
//!   operand's dtype (the count is converted to it), unless the left is a literal.
//! - A math function (`math.rs`) gives its argument's dtype (`T.pow`: the unified one), and
//!   takes only the dtypes `MathFn::takes` allows.
//! - `T.reinterpret("d", x)` gives `d`, for an `x` of the same width (`reinterpret_ok`).

use crate::dtype::DType;
use crate::ir::{BinOp, Expr, ExprKind, MathFn, UnOp};

/// A dtype together with whether it came from a bare literal (and so may adapt).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Typed {
    pub dtype: DType,
    pub weak: bool,
}

impl Typed {
    pub fn strong(dtype: DType) -> Typed {
        Typed { dtype, weak: false }
    }
}

/// The dtype of an integer literal.
pub fn int_literal_dtype(value: i64) -> DType {
    if i32::try_from(value).is_ok() {
        DType::Int32
    } else {
        DType::Int64
    }
}

/// The common dtype two arithmetic operands are converted to, or why there is none.
pub fn unify(a: Typed, b: Typed) -> Result<Typed, String> {
    if a.dtype.is_bool() || b.dtype.is_bool() {
        return Err(format!(
            "arithmetic on bool (operands are {} and {})",
            a.dtype, b.dtype
        ));
    }
    let weak = a.weak && b.weak;
    let pick = |d: DType| Ok(Typed { dtype: d, weak });
    if a.dtype == b.dtype {
        return pick(a.dtype);
    }
    // A weak literal adapts to the other side, except that a float literal never becomes an
    // integer.
    if a.weak != b.weak {
        let (lit, other) = if a.weak { (a, b) } else { (b, a) };
        if lit.dtype.is_float() && other.dtype.is_int() {
            return pick(DType::Float32);
        }
        // An integer literal too wide for int32 (typed int64) keeps its value: it does not
        // narrow to the other side's int32 (`i < 3000000000` compares in int64).
        if lit.dtype == DType::Int64 && other.dtype == DType::Int32 {
            return pick(DType::Int64);
        }
        return pick(other.dtype);
    }
    match (a.dtype.is_int(), b.dtype.is_int()) {
        (true, true) => {
            let wider = if a.dtype.bits() != b.dtype.bits() {
                if a.dtype.bits() > b.dtype.bits() {
                    a.dtype
                } else {
                    b.dtype
                }
            } else if a.dtype.is_unsigned() {
                b.dtype
            } else {
                a.dtype
            };
            pick(wider)
        }
        (true, false) => pick(b.dtype),
        (false, true) => pick(a.dtype),
        (false, false) => {
            if a.dtype.bits() == b.dtype.bits() {
                pick(DType::Float32.max_by_bits(a.dtype))
            } else if a.dtype.bits() > b.dtype.bits() {
                pick(a.dtype)
            } else {
                pick(b.dtype)
            }
        }
    }
}

impl DType {
    /// The wider of `self` and `other` by bit width (`self` on ties).
    fn max_by_bits(self, other: DType) -> DType {
        if other.bits() > self.bits() {
            other
        } else {
            self
        }
    }
}

/// The dtype both operands of a comparison are converted to before they compare: their
/// common dtype, except that a `bool` beside an integer reads as that integer (0 or 1), and
/// two bools as int32.
pub fn comparison_dtype(a: Typed, b: Typed) -> Result<DType, String> {
    match (a.dtype.is_bool(), b.dtype.is_bool()) {
        (false, false) => Ok(unify(a, b)?.dtype),
        (true, true) => Ok(DType::Int32),
        (true, false) | (false, true) => {
            let other = if a.dtype.is_bool() { b } else { a };
            if other.dtype.is_int() {
                // A bare literal is int32, or int64 when it does not fit: its own dtype.
                Ok(other.dtype)
            } else {
                Err(format!(
                    "a bool compares only with a bool or an integer, found {} and {}",
                    a.dtype, b.dtype
                ))
            }
        }
    }
}

/// The result type of `a op b`, or why the operands do not fit the operator.
pub fn binary_result(op: BinOp, a: Typed, b: Typed) -> Result<Typed, String> {
    if op.is_logical() {
        if a.dtype.is_bool() && b.dtype.is_bool() {
            return Ok(Typed::strong(DType::Bool));
        }
        return Err(format!(
            "`and`/`or` take bool operands, found {} and {}",
            a.dtype, b.dtype
        ));
    }
    if op.is_bitwise() {
        if a.dtype.is_bool() && b.dtype.is_bool() && !matches!(op, BinOp::Shl | BinOp::Shr) {
            return Ok(Typed::strong(DType::Bool));
        }
        if !a.dtype.is_int() || !b.dtype.is_int() {
            return Err(format!(
                "`{}` takes integers, found {} and {}",
                bit_op_text(op),
                a.dtype,
                b.dtype
            ));
        }
        // A shift has its left operand's dtype (C's rule: `u >> i` stays unsigned), widened
        // to a wider non-literal count's (TVM's and C's promotion: `int8 >> int32` is int32,
        // which TileLang's int4 decoding relies on); a weak literal on the left adopts the
        // other side's.
        if matches!(op, BinOp::Shl | BinOp::Shr) && !a.weak {
            if !b.weak && b.dtype.bits() > a.dtype.bits() {
                return unify(a, b);
            }
            return Ok(a);
        }
        return unify(a, b);
    }
    if op.is_comparison() {
        comparison_dtype(a, b)?;
        return Ok(Typed::strong(DType::Bool));
    }
    let common = unify(a, b)?;
    if op == BinOp::CeilDiv && !common.dtype.is_int() {
        return Err(format!("T.ceildiv takes integers, found {}", common.dtype));
    }
    Ok(common)
}

/// Whether `T.reinterpret` may read the bits of a `from` value as a `to` value: two
/// non-bool dtypes of one width (a literal operand has its literal dtype: `T.reinterpret(
/// "float32", 1065353216)` reads an int32).
pub fn reinterpret_ok(from: DType, to: DType) -> Result<(), String> {
    if from.is_bool() || to.is_bool() {
        return Err(format!(
            "`T.reinterpret` takes no bool (from {from} to {to}): a bool has no bit pattern of its own"
        ));
    }
    if from.bits() != to.bits() {
        return Err(format!(
            "`T.reinterpret` keeps the bits, so both dtypes need one width: {from} has {} bits, {to} {}",
            from.bits(),
            to.bits()
        ));
    }
    Ok(())
}

/// The result type of a unary operator.
pub fn unary_result(op: UnOp, a: Typed) -> Result<Typed, String> {
    match op {
        UnOp::Not if a.dtype.is_bool() => Ok(a),
        UnOp::Not => Err(format!("`not` takes a bool, found {}", a.dtype)),
        UnOp::Neg if a.dtype.is_bool() => Err("cannot negate a bool".to_string()),
        UnOp::Neg => Ok(a),
        UnOp::BitNot if a.dtype.is_int() => Ok(a),
        UnOp::BitNot => Err(format!("`~` takes an integer, found {}", a.dtype)),
    }
}

/// The text of a bitwise operator, for messages.
fn bit_op_text(op: BinOp) -> &'static str {
    match op {
        BinOp::BitAnd => "&",
        BinOp::BitOr => "|",
        BinOp::BitXor => "^",
        BinOp::Shl => "<<",
        _ => ">>",
    }
}

/// The result type of math function `f` on arguments of types `args`.
pub fn math_result(f: MathFn, args: &[Typed]) -> Result<Typed, String> {
    let t = match args {
        [x] => *x,
        [x, y] => unify(*x, *y)?,
        [x, y, z] => unify(unify(*x, *y)?, *z)?,
        _ => return Err(format!("T.{} takes {} arguments", f.name(), f.arity())),
    };
    if args.len() != f.arity() {
        return Err(format!("T.{} takes {} arguments", f.name(), f.arity()));
    }
    if f.takes(t.dtype) {
        return Ok(t);
    }
    let hint = if f == MathFn::Fma {
        " (`T.fma` is float32 only; convert to float32 first)"
    } else if t.dtype == DType::Float64 {
        " (PTX has no float64 form of it; convert to float32 first)"
    } else if t.dtype.is_int() || t.dtype.is_bool() {
        " (convert to a float first: `T.cast(x, \"float32\")`)"
    } else {
        " (convert to float32 or float16 first)"
    };
    Err(format!("T.{} does not take {}{hint}", f.name(), t.dtype))
}

/// Infers the type of `expr`. `var` gives the dtype of a scalar variable, `buffer` the dtype
/// of a buffer; each returns `None` for an unknown name. Errors carry the offending
/// sub-expression.
pub fn infer<'e>(
    expr: &'e Expr,
    var: &dyn Fn(&str) -> Option<DType>,
    buffer: &dyn Fn(&str) -> Option<DType>,
) -> Result<Typed, (&'e Expr, String)> {
    let sub = |e: &'e Expr| infer(e, var, buffer);
    match &expr.kind {
        ExprKind::Int(v) => Ok(Typed {
            dtype: int_literal_dtype(*v),
            weak: true,
        }),
        ExprKind::Float(_) => Ok(Typed {
            dtype: DType::Float32,
            weak: true,
        }),
        ExprKind::Bool(_) => Ok(Typed::strong(DType::Bool)),
        ExprKind::Var(name) => var(name)
            .map(Typed::strong)
            .ok_or_else(|| (expr, format!("undefined name `{name}`"))),
        ExprKind::Load {
            buffer: name,
            indices,
        } => {
            for index in indices {
                let t = sub(index)?;
                if !t.dtype.is_int() {
                    return Err((
                        index,
                        format!("buffer index must be an integer, found {}", t.dtype),
                    ));
                }
            }
            // An int4 element loads as an int32 (sign-extended): int4 is a storage dtype
            // only (docs/ir.md, rule H5).
            buffer(name)
                .map(|d| if d == DType::Int4 { DType::Int32 } else { d })
                .map(Typed::strong)
                .ok_or_else(|| (expr, format!("undefined buffer `{name}`")))
        }
        ExprKind::Unary(op, a) => unary_result(*op, sub(a)?).map_err(|m| (expr, m)),
        ExprKind::Binary(op, a, b) => {
            let (ta, tb) = (sub(a)?, sub(b)?);
            let t = binary_result(*op, ta, tb).map_err(|m| (expr, m))?;
            // Rule T6: the IR writes a float32 multiply-add as `T.fma` (the parser contracts
            // every one, `syntax/contract.rs`), so that a printed IR parses back equal and
            // every stage computes the same roundings.
            let product = |e: &Expr, t: Typed| {
                t.dtype == DType::Float32 && matches!(e.kind, ExprKind::Binary(BinOp::Mul, ..))
            };
            if matches!(op, BinOp::Add | BinOp::Sub)
                && t.dtype == DType::Float32
                && (product(a, ta) || product(b, tb))
            {
                return Err((
                    expr,
                    "a float32 sum with a product operand is written `T.fma(a, b, c)` in the \
                     IR (the parser contracts every one it reads)"
                        .to_string(),
                ));
            }
            Ok(t)
        }
        ExprKind::Cast(dtype, a) => {
            sub(a)?;
            Ok(Typed::strong(*dtype))
        }
        ExprKind::Reinterpret(dtype, a) => {
            let from = sub(a)?.dtype;
            reinterpret_ok(from, *dtype).map_err(|m| (expr, m))?;
            Ok(Typed::strong(*dtype))
        }
        ExprKind::Select(c, a, b) => {
            let tc = sub(c)?;
            if !tc.dtype.is_bool() {
                return Err((c, format!("condition must be bool, found {}", tc.dtype)));
            }
            let (ta, tb) = (sub(a)?, sub(b)?);
            if ta.dtype.is_bool() && tb.dtype.is_bool() {
                return Ok(Typed::strong(DType::Bool));
            }
            unify(ta, tb).map_err(|m| (expr, m))
        }
        ExprKind::Math(f, args) => {
            let mut types = Vec::with_capacity(args.len());
            for a in args {
                types.push(sub(a)?);
            }
            math_result(*f, &types).map_err(|m| (expr, m))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(d: DType) -> Typed {
        Typed::strong(d)
    }
    fn w(d: DType) -> Typed {
        Typed {
            dtype: d,
            weak: true,
        }
    }

    #[test]
    fn literals_adapt() {
        assert_eq!(
            unify(s(DType::Float16), w(DType::Float32)).unwrap(),
            s(DType::Float16)
        );
        assert_eq!(
            unify(w(DType::Int32), s(DType::Float16)).unwrap(),
            s(DType::Float16)
        );
        assert_eq!(
            unify(w(DType::Float32), s(DType::Int32)).unwrap(),
            s(DType::Float32)
        );
        assert_eq!(
            unify(w(DType::Int32), s(DType::Int64)).unwrap(),
            s(DType::Int64)
        );
    }

    #[test]
    fn strong_operands_promote() {
        assert_eq!(
            unify(s(DType::Int32), s(DType::Int64)).unwrap().dtype,
            DType::Int64
        );
        assert_eq!(
            unify(s(DType::Float16), s(DType::Float32)).unwrap().dtype,
            DType::Float32
        );
        assert_eq!(
            unify(s(DType::Float16), s(DType::BFloat16)).unwrap().dtype,
            DType::Float32
        );
        assert_eq!(
            unify(s(DType::Int32), s(DType::Float16)).unwrap().dtype,
            DType::Float16
        );
        assert!(unify(s(DType::Bool), s(DType::Int32)).is_err());
    }

    #[test]
    fn operators() {
        assert_eq!(
            binary_result(BinOp::Lt, s(DType::Int32), w(DType::Int32))
                .unwrap()
                .dtype,
            DType::Bool
        );
        assert!(binary_result(BinOp::And, s(DType::Int32), s(DType::Bool)).is_err());
        assert!(binary_result(BinOp::CeilDiv, s(DType::Float32), w(DType::Int32)).is_err());
        assert!(unary_result(UnOp::Not, s(DType::Int32)).is_err());
    }

    #[test]
    fn bool_in_comparisons() {
        // `mask[k] != 0`: the bool reads as the integer's 0 / 1.
        assert_eq!(
            comparison_dtype(s(DType::Bool), w(DType::Int32)),
            Ok(DType::Int32)
        );
        assert_eq!(
            comparison_dtype(s(DType::UInt8), s(DType::Bool)),
            Ok(DType::UInt8)
        );
        assert_eq!(
            comparison_dtype(s(DType::Bool), w(DType::Int64)),
            Ok(DType::Int64)
        );
        assert_eq!(
            comparison_dtype(s(DType::Bool), s(DType::Bool)),
            Ok(DType::Int32)
        );
        assert!(comparison_dtype(s(DType::Bool), s(DType::Float32)).is_err());
        assert!(comparison_dtype(w(DType::Float32), s(DType::Bool)).is_err());
        assert!(binary_result(BinOp::Ne, s(DType::Bool), w(DType::Int32)).is_ok());
        // Arithmetic still refuses it.
        assert!(binary_result(BinOp::Add, s(DType::Bool), w(DType::Int32)).is_err());
    }
}
