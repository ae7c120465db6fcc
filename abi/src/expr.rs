//! Dim expressions of the launch manifest: a small JSON tree over integer constants, symbolic
//! dims and the integer ops tlc's index math uses, with a checked evaluator (floor semantics,
//! errors instead of overflow or division by zero).

use crate::error::{Result, RuntimeError};
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeSet;
use std::fmt;

/// A binary integer operation. Division and modulo use floor semantics (Python / TVM
/// `floordiv`/`floormod`), `ceildiv(a, b)` is `-floordiv(-a, b)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    Add,
    Sub,
    Mul,
    FloorDiv,
    FloorMod,
    CeilDiv,
    Min,
    Max,
}

impl Op {
    pub fn name(self) -> &'static str {
        match self {
            Op::Add => "add",
            Op::Sub => "sub",
            Op::Mul => "mul",
            Op::FloorDiv => "floordiv",
            Op::FloorMod => "floormod",
            Op::CeilDiv => "ceildiv",
            Op::Min => "min",
            Op::Max => "max",
        }
    }

    /// Applies the op with overflow and division-by-zero checks.
    pub fn apply(self, a: i64, b: i64) -> Result<i64> {
        let overflow = || RuntimeError::Eval(format!("{}({a}, {b}) overflows int64", self.name()));
        let by_zero = || RuntimeError::Eval(format!("{}({a}, {b}) divides by zero", self.name()));
        match self {
            Op::Add => a.checked_add(b).ok_or_else(overflow),
            Op::Sub => a.checked_sub(b).ok_or_else(overflow),
            Op::Mul => a.checked_mul(b).ok_or_else(overflow),
            Op::Min => Ok(a.min(b)),
            Op::Max => Ok(a.max(b)),
            Op::FloorDiv | Op::FloorMod | Op::CeilDiv if b == 0 => Err(by_zero()),
            Op::FloorDiv => floordiv(a, b).ok_or_else(overflow),
            Op::FloorMod => {
                let q = floordiv(a, b).ok_or_else(overflow)?;
                // a - q*b cannot overflow once q is representable.
                q.checked_mul(b)
                    .and_then(|qb| a.checked_sub(qb))
                    .ok_or_else(overflow)
            }
            Op::CeilDiv => a
                .checked_neg()
                .and_then(|na| floordiv(na, b))
                .and_then(i64::checked_neg)
                .ok_or_else(overflow),
        }
    }
}

fn floordiv(a: i64, b: i64) -> Option<i64> {
    let q = a.checked_div(b)?;
    let r = a.checked_rem(b)?;
    if r != 0 && ((r < 0) != (b < 0)) {
        q.checked_sub(1)
    } else {
        Some(q)
    }
}

/// A dim expression. JSON: `{"int": 128}`, `{"dim": "N"}`,
/// `{"op": "ceildiv", "args": [a, b]}`; a bare integer is read as `{"int": n}`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum DimExpr {
    Int(i64),
    Dim(String),
    Op(Op, Box<DimExpr>, Box<DimExpr>),
}

impl DimExpr {
    pub fn int(v: i64) -> DimExpr {
        DimExpr::Int(v)
    }

    pub fn dim(name: &str) -> DimExpr {
        DimExpr::Dim(name.to_string())
    }

    pub fn op(op: Op, a: DimExpr, b: DimExpr) -> DimExpr {
        DimExpr::Op(op, Box::new(a), Box::new(b))
    }

    /// `ceildiv(a, b)`, the usual grid size.
    pub fn ceildiv(a: DimExpr, b: DimExpr) -> DimExpr {
        DimExpr::op(Op::CeilDiv, a, b)
    }

    /// Evaluates with `lookup` giving the value of each dim.
    pub fn eval(&self, lookup: &dyn Fn(&str) -> Option<i64>) -> Result<i64> {
        match self {
            DimExpr::Int(v) => Ok(*v),
            DimExpr::Dim(name) => {
                lookup(name).ok_or_else(|| RuntimeError::Eval(format!("dim `{name}` has no value")))
            }
            DimExpr::Op(op, a, b) => op.apply(a.eval(lookup)?, b.eval(lookup)?),
        }
    }

    /// The dim this extent solves for at launch, as (dim, factor, offset) with extent =
    /// factor · dim + offset: `tlc_ir::solvable_extent`'s forms (`d`, `d + c`, `d - c`,
    /// `d * c`, either order), solved by `tlc_ir::solve_extent`.
    pub fn solvable(&self) -> Option<(&str, i64, i64)> {
        let lit = |x: &DimExpr| match x {
            DimExpr::Int(v) => Some(*v),
            _ => None,
        };
        match self {
            DimExpr::Dim(d) => Some((d.as_str(), 1, 0)),
            DimExpr::Op(op, a, b) => match (op, &**a, &**b) {
                (Op::Add, DimExpr::Dim(d), _) => Some((d.as_str(), 1, lit(b)?)),
                (Op::Add, _, DimExpr::Dim(d)) => Some((d.as_str(), 1, lit(a)?)),
                (Op::Sub, DimExpr::Dim(d), _) => Some((d.as_str(), 1, lit(b)?.checked_neg()?)),
                (Op::Mul, DimExpr::Dim(d), _) => Some((d.as_str(), lit(b).filter(|&c| c >= 1)?, 0)),
                (Op::Mul, _, DimExpr::Dim(d)) => Some((d.as_str(), lit(a).filter(|&c| c >= 1)?, 0)),
                _ => None,
            },
            DimExpr::Int(_) => None,
        }
    }

    /// Every dim name the expression mentions.
    pub fn dims(&self, out: &mut BTreeSet<String>) {
        match self {
            DimExpr::Int(_) => {}
            DimExpr::Dim(name) => {
                out.insert(name.clone());
            }
            DimExpr::Op(_, a, b) => {
                a.dims(out);
                b.dims(out);
            }
        }
    }
}

impl fmt::Display for DimExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DimExpr::Int(v) => write!(f, "{v}"),
            DimExpr::Dim(name) => f.write_str(name),
            DimExpr::Op(op, a, b) => write!(f, "{}({a}, {b})", op.name()),
        }
    }
}

/// The JSON shape a `DimExpr` is written as.
#[derive(Serialize)]
#[serde(untagged)]
enum Repr {
    Int { int: i64 },
    Dim { dim: String },
    Op { op: Op, args: Vec<DimExpr> },
}

impl Serialize for DimExpr {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let repr = match self {
            DimExpr::Int(v) => Repr::Int { int: *v },
            DimExpr::Dim(name) => Repr::Dim { dim: name.clone() },
            DimExpr::Op(op, a, b) => Repr::Op {
                op: *op,
                args: vec![(**a).clone(), (**b).clone()],
            },
        };
        repr.serialize(s)
    }
}

impl<'de> Deserialize<'de> for DimExpr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<DimExpr, D::Error> {
        // Untagged enums give poor messages, so read a JSON value and match it by hand.
        let value = serde_json::Value::deserialize(d)?;
        from_value(&value).map_err(D::Error::custom)
    }
}

const OPS: &str = "add, sub, mul, floordiv, floormod, ceildiv, min, max";

fn from_value(v: &serde_json::Value) -> std::result::Result<DimExpr, String> {
    use serde_json::Value;
    if let Some(n) = v.as_i64() {
        return Ok(DimExpr::Int(n));
    }
    let Value::Object(map) = v else {
        return Err(format!(
            "a dim expression is an integer, {{\"int\": n}}, {{\"dim\": \"NAME\"}} or \
             {{\"op\": OP, \"args\": [a, b]}}; found {v}"
        ));
    };
    let keys: Vec<&str> = map.keys().map(String::as_str).collect();
    match keys.as_slice() {
        ["int"] => map
            .get("int")
            .and_then(Value::as_i64)
            .map(DimExpr::Int)
            .ok_or_else(|| format!("`int` must be a 64-bit integer in {v}")),
        ["dim"] => match map.get("dim") {
            Some(Value::String(name)) if !name.is_empty() => Ok(DimExpr::Dim(name.clone())),
            _ => Err(format!("`dim` must be a non-empty string in {v}")),
        },
        ["args", "op"] | ["op", "args"] => {
            let op = match map.get("op") {
                Some(Value::String(s)) => parse_op(s)
                    .ok_or_else(|| format!("unknown op \"{s}\" (expected one of {OPS})"))?,
                _ => return Err(format!("`op` must be a string in {v}")),
            };
            let args = match map.get("args") {
                Some(Value::Array(args)) => args,
                _ => return Err(format!("`args` must be an array in {v}")),
            };
            match args.as_slice() {
                [a, b] => Ok(DimExpr::op(op, from_value(a)?, from_value(b)?)),
                _ => Err(format!(
                    "op \"{}\" takes 2 args, found {}",
                    op.name(),
                    args.len()
                )),
            }
        }
        _ => Err(format!(
            "a dim expression object has exactly the keys `int`, `dim`, or `op` + `args`; \
             found {v}"
        )),
    }
}

fn parse_op(s: &str) -> Option<Op> {
    [
        Op::Add,
        Op::Sub,
        Op::Mul,
        Op::FloorDiv,
        Op::FloorMod,
        Op::CeilDiv,
        Op::Min,
        Op::Max,
    ]
    .into_iter()
    .find(|op| op.name() == s)
}
