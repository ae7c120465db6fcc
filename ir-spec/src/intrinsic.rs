//! Thread-level target intrinsics, described once.
//!
//! Each intrinsic is a variant of [`Intrinsic`] (typed fields, so the interpreter's
//! semantics and the PTX lowering match on it totally) and ONE [`IntrinsicDef`] in this
//! file: its text name, its parameters in order — element references with their scopes,
//! dtypes, element counts and effects; integer and boolean constants with their allowed
//! values and defaults; run-time predicates — who executes it together (a thread, a warp, a
//! warpgroup) and whether it may stand outside a thread loop. Everything generic derives
//! from the definition through [`Intrinsic::args`]:
//!
//! - the parser binds a call's arguments to the parameters (`syntax/lower_intrinsic.rs`)
//!   and the printer writes them back (`printer/mod.rs`);
//! - the verifier's operand rules (`verifier/intrinsics.rs`, rules I1–I3 of docs/ir.md);
//! - the visitors: every expression an intrinsic holds (`visit.rs`);
//! - the access model: which buffers it reads and writes, and which writes land later
//!   (`Intrinsic::accesses`), for the passes' dependence and barrier analyses.
//!
//! Only the interpreter's semantics (`interp/ops/intrinsics.rs`) and the PTX lowering
//! (`compiler/src/codegen/intrinsics.rs`) are per intrinsic. docs/ARCHITECTURE.md has the
//! checklist for adding one.

use crate::dtype::DType;
use crate::ir::{BufferDecl, Expr, Ident, Scope};

/// Where a multi-element intrinsic operand starts: `buf[i, j]`. The operand covers
/// consecutive elements of the buffer's row-major storage from there.
#[derive(Clone, Debug, PartialEq)]
pub struct ElemRef {
    pub buffer: Ident,
    pub indices: Vec<Expr>,
}

/// A thread-level target intrinsic call. Exact semantics: docs/ir.md, `interp/`.
#[derive(Clone, Debug, PartialEq)]
pub enum Intrinsic {
    /// `T.cp_async(dst, src, bytes)` / `T.cp_async(dst, src, bytes, pred)`: an asynchronous
    /// copy of `bytes` (4, 8 or 16) bytes from global `src` to shared `dst`, both aligned to
    /// `bytes`. When `pred` is false nothing is read and `dst` is filled with zeros (PTX's
    /// src-size 0 form). The copy lands when a later `T.cp_async_wait` of this thread retires
    /// its group; reading or writing `dst` before that is an error.
    CpAsync {
        dst: ElemRef,
        src: ElemRef,
        bytes: i64,
        pred: Option<Expr>,
    },
    /// `T.cp_async_commit()`: closes this thread's open group of `cp_async`s.
    CommitGroup,
    /// `T.cp_async_wait(n)`: waits until at most `n` of this thread's committed groups are
    /// still in flight.
    WaitGroup(i64),
    /// `T.ldmatrix(dst, src, num=4, trans=False)` (warp collective): loads `num` (1, 2 or 4)
    /// 8x8 matrices of 16-bit elements from shared memory. Lane `t` (for `t < 8 * num`)
    /// supplies the address `src` of row `t % 8` of matrix `t / 8`; every lane receives
    /// `2 * num` elements into `dst[..]` (2 per matrix: row `lane / 4`, columns
    /// `2 * (lane % 4)` and `+1`, or the transpose with `trans=True`).
    Ldmatrix {
        dst: ElemRef,
        src: ElemRef,
        num: i64,
        trans: bool,
    },
    /// `T.mma_sync(acc, a, b)` (warp collective): `mma.sync.aligned.m16n8k16.row.col`,
    /// `acc[0..4] += A(a[0..8]) @ B(b[0..4])` with the PTX ISA's fragment layouts; `a`, `b`
    /// are float16 or bfloat16 (both the same), `acc` float32.
    Mma {
        acc: ElemRef,
        a: ElemRef,
        b: ElemRef,
    },
}

/// Which intrinsic a definition describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IntrinsicOp {
    CpAsync,
    CommitGroup,
    WaitGroup,
    Ldmatrix,
    Mma,
}

/// Who executes an intrinsic together.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Collective {
    /// Each thread on its own.
    Thread,
    /// All 32 lanes of a warp at once (`crate::target::WARP_SIZE`).
    Warp,
    /// All four warps of a warpgroup at once (`Target::warpgroup_size`).
    Warpgroup,
}

/// What an intrinsic does to the elements an operand covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Effect {
    Read,
    Write,
    ReadWrite,
    /// Written asynchronously: at issue (ordering it after earlier uses of the bytes), and
    /// again when a later wait lands it (what readers must be ordered after).
    AsyncWrite,
}

impl Effect {
    pub fn reads(self) -> bool {
        matches!(self, Effect::Read | Effect::ReadWrite)
    }

    pub fn writes(self) -> bool {
        !matches!(self, Effect::Read)
    }
}

/// How many consecutive elements an element-reference operand covers (per thread).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Count {
    /// A fixed number of elements.
    Elems(i64),
    /// The byte count held by the named integer parameter, in elements of the operand's
    /// dtype (which must divide it).
    BytesOf(&'static str),
    /// The named integer parameter times a factor.
    Times(&'static str, i64),
}

/// An element-reference parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RefParam {
    /// The scopes its buffer may be in.
    pub scopes: &'static [Scope],
    /// The dtypes its buffer may have (empty: any).
    pub dtypes: &'static [DType],
    pub count: Count,
    pub effect: Effect,
}

/// The kind of one parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamKind {
    /// `buf[i, j]`: where the covered run of elements starts.
    Ref(RefParam),
    /// An integer constant: one of `allowed` (empty: any value ≥ 0); `default` when the call
    /// may leave it out.
    Int {
        allowed: &'static [i64],
        default: Option<i64>,
    },
    /// `True` / `False`; `default` when the call may leave it out.
    Bool { default: Option<bool> },
    /// A `bool` expression evaluated by each thread; may be left out (always true).
    Pred,
}

impl ParamKind {
    /// Whether an integer parameter of this kind may hold `v`.
    pub fn admits(&self, v: i64) -> bool {
        match self {
            ParamKind::Int { allowed: &[], .. } => v >= 0,
            ParamKind::Int { allowed, .. } => allowed.contains(&v),
            _ => false,
        }
    }
}

/// One parameter of an intrinsic, in call order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Param {
    /// The keyword name (`T.cp_async(dst=…)`).
    pub name: &'static str,
    /// What it is, for messages: "the destination of `T.cp_async`".
    pub role: &'static str,
    pub kind: ParamKind,
    /// The printer writes it as `name=value` rather than positionally.
    pub keyword: bool,
}

/// The description of one intrinsic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IntrinsicDef {
    pub op: IntrinsicOp,
    /// The name as written: `T.cp_async`.
    pub name: &'static str,
    pub params: &'static [Param],
    pub collective: Collective,
    /// It may stand outside a thread-binding loop (at the tile level, or in the block-level
    /// code of a thread-level kernel), where it acts for every thread of the block.
    pub block_level: bool,
    /// Parameter pairs whose buffers must have one dtype.
    pub same_dtype: &'static [(&'static str, &'static str)],
}

impl IntrinsicDef {
    /// The parameter called `name`.
    pub fn param(&self, name: &str) -> Option<&'static Param> {
        self.params.iter().find(|p| p.name == name)
    }

    /// How many parameters a call must give (the leading ones without a default).
    pub fn required(&self) -> usize {
        self.params
            .iter()
            .take_while(|p| match p.kind {
                ParamKind::Ref(_) => true,
                ParamKind::Int { default, .. } => default.is_none(),
                ParamKind::Bool { default } => default.is_none(),
                ParamKind::Pred => false,
            })
            .count()
    }
}

/// One argument of a call, borrowed from the intrinsic (one per parameter, in order).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Arg<'a> {
    Ref(&'a ElemRef),
    Int(i64),
    Bool(bool),
    /// A predicate; `None` when left out.
    Pred(Option<&'a Expr>),
}

/// One argument of a call, owned: what the parser builds an intrinsic from.
#[derive(Clone, Debug, PartialEq)]
pub enum ArgValue {
    Ref(ElemRef),
    Int(i64),
    Bool(bool),
    Pred(Option<Expr>),
}

const REGISTERS: &[Scope] = &[Scope::Local];
const SIXTEEN_BIT: &[DType] = &[DType::Float16, DType::BFloat16];

static CP_ASYNC: IntrinsicDef = IntrinsicDef {
    op: IntrinsicOp::CpAsync,
    name: "T.cp_async",
    params: &[
        Param {
            name: "dst",
            role: "destination",
            kind: ParamKind::Ref(RefParam {
                scopes: &[Scope::Shared],
                dtypes: &[],
                count: Count::BytesOf("bytes"),
                effect: Effect::AsyncWrite,
            }),
            keyword: false,
        },
        Param {
            name: "src",
            role: "source",
            kind: ParamKind::Ref(RefParam {
                scopes: &[Scope::Global],
                dtypes: &[],
                count: Count::BytesOf("bytes"),
                effect: Effect::Read,
            }),
            keyword: false,
        },
        Param {
            name: "bytes",
            role: "byte count",
            kind: ParamKind::Int {
                allowed: &[4, 8, 16],
                default: None,
            },
            keyword: false,
        },
        Param {
            name: "pred",
            role: "predicate",
            kind: ParamKind::Pred,
            keyword: false,
        },
    ],
    collective: Collective::Thread,
    block_level: false,
    same_dtype: &[("dst", "src")],
};

static COMMIT_GROUP: IntrinsicDef = IntrinsicDef {
    op: IntrinsicOp::CommitGroup,
    name: "T.cp_async_commit",
    params: &[],
    collective: Collective::Thread,
    block_level: true,
    same_dtype: &[],
};

static WAIT_GROUP: IntrinsicDef = IntrinsicDef {
    op: IntrinsicOp::WaitGroup,
    name: "T.cp_async_wait",
    params: &[Param {
        name: "n",
        role: "group count",
        kind: ParamKind::Int {
            allowed: &[],
            default: None,
        },
        keyword: false,
    }],
    collective: Collective::Thread,
    block_level: true,
    same_dtype: &[],
};

static LDMATRIX: IntrinsicDef = IntrinsicDef {
    op: IntrinsicOp::Ldmatrix,
    name: "T.ldmatrix",
    params: &[
        Param {
            name: "dst",
            role: "destination",
            kind: ParamKind::Ref(RefParam {
                scopes: REGISTERS,
                dtypes: SIXTEEN_BIT,
                count: Count::Times("num", 2),
                effect: Effect::Write,
            }),
            keyword: false,
        },
        Param {
            name: "src",
            role: "source",
            // Each lane's source address is one 8-element (16-byte) row.
            kind: ParamKind::Ref(RefParam {
                scopes: &[Scope::Shared],
                dtypes: SIXTEEN_BIT,
                count: Count::Elems(8),
                effect: Effect::Read,
            }),
            keyword: false,
        },
        Param {
            name: "num",
            role: "matrix count",
            kind: ParamKind::Int {
                allowed: &[1, 2, 4],
                default: Some(4),
            },
            keyword: true,
        },
        Param {
            name: "trans",
            role: "transpose flag",
            kind: ParamKind::Bool {
                default: Some(false),
            },
            keyword: true,
        },
    ],
    collective: Collective::Warp,
    block_level: false,
    same_dtype: &[("dst", "src")],
};

static MMA_SYNC: IntrinsicDef = IntrinsicDef {
    op: IntrinsicOp::Mma,
    name: "T.mma_sync",
    params: &[
        Param {
            name: "acc",
            role: "accumulator",
            kind: ParamKind::Ref(RefParam {
                scopes: REGISTERS,
                dtypes: &[DType::Float32],
                count: Count::Elems(4),
                effect: Effect::ReadWrite,
            }),
            keyword: false,
        },
        Param {
            name: "a",
            role: "A operand",
            kind: ParamKind::Ref(RefParam {
                scopes: REGISTERS,
                dtypes: SIXTEEN_BIT,
                count: Count::Elems(8),
                effect: Effect::Read,
            }),
            keyword: false,
        },
        Param {
            name: "b",
            role: "B operand",
            kind: ParamKind::Ref(RefParam {
                scopes: REGISTERS,
                dtypes: SIXTEEN_BIT,
                count: Count::Elems(4),
                effect: Effect::Read,
            }),
            keyword: false,
        },
    ],
    collective: Collective::Warp,
    block_level: false,
    same_dtype: &[("a", "b")],
};

/// Every intrinsic's definition.
pub fn all() -> [&'static IntrinsicDef; 5] {
    [&CP_ASYNC, &COMMIT_GROUP, &WAIT_GROUP, &LDMATRIX, &MMA_SYNC]
}

/// The definition of the intrinsic written `name` (`T.cp_async`).
pub fn lookup(name: &str) -> Option<&'static IntrinsicDef> {
    all().into_iter().find(|d| d.name == name)
}

/// One access an intrinsic makes: the operand, its parameter, and what it does there.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Access<'a> {
    pub operand: &'a ElemRef,
    pub param: &'static Param,
    pub effect: Effect,
}

impl Intrinsic {
    /// Its definition.
    pub fn def(&self) -> &'static IntrinsicDef {
        match self {
            Intrinsic::CpAsync { .. } => &CP_ASYNC,
            Intrinsic::CommitGroup => &COMMIT_GROUP,
            Intrinsic::WaitGroup(_) => &WAIT_GROUP,
            Intrinsic::Ldmatrix { .. } => &LDMATRIX,
            Intrinsic::Mma { .. } => &MMA_SYNC,
        }
    }

    pub fn op(&self) -> IntrinsicOp {
        self.def().op
    }

    /// The name as written: `T.cp_async`.
    pub fn name(&self) -> &'static str {
        self.def().name
    }

    /// The arguments, one per parameter of the definition, in order.
    pub fn args(&self) -> Vec<Arg<'_>> {
        match self {
            Intrinsic::CpAsync {
                dst,
                src,
                bytes,
                pred,
            } => vec![
                Arg::Ref(dst),
                Arg::Ref(src),
                Arg::Int(*bytes),
                Arg::Pred(pred.as_ref()),
            ],
            Intrinsic::CommitGroup => Vec::new(),
            Intrinsic::WaitGroup(n) => vec![Arg::Int(*n)],
            Intrinsic::Ldmatrix {
                dst,
                src,
                num,
                trans,
            } => vec![
                Arg::Ref(dst),
                Arg::Ref(src),
                Arg::Int(*num),
                Arg::Bool(*trans),
            ],
            Intrinsic::Mma { acc, a, b } => vec![Arg::Ref(acc), Arg::Ref(a), Arg::Ref(b)],
        }
    }

    /// The element references and the predicate, mutably, in parameter order: everything
    /// of the call that holds expressions.
    fn parts_mut(&mut self) -> (Vec<&mut ElemRef>, Option<&mut Expr>) {
        match self {
            Intrinsic::CpAsync { dst, src, pred, .. } => (vec![dst, src], pred.as_mut()),
            Intrinsic::Ldmatrix { dst, src, .. } => (vec![dst, src], None),
            Intrinsic::Mma { acc, a, b } => (vec![acc, a, b], None),
            Intrinsic::CommitGroup | Intrinsic::WaitGroup(_) => (Vec::new(), None),
        }
    }

    /// Builds the call of `def` from its arguments (one per parameter, in order, of the
    /// parameter's kind); `None` when they do not fit the definition.
    pub fn from_args(def: &IntrinsicDef, args: Vec<ArgValue>) -> Option<Intrinsic> {
        use ArgValue as V;
        let mut args = args.into_iter();
        let mut next = || args.next();
        let call = match def.op {
            IntrinsicOp::CpAsync => match (next()?, next()?, next()?, next()?) {
                (V::Ref(dst), V::Ref(src), V::Int(bytes), V::Pred(pred)) => Intrinsic::CpAsync {
                    dst,
                    src,
                    bytes,
                    pred,
                },
                _ => return None,
            },
            IntrinsicOp::CommitGroup => Intrinsic::CommitGroup,
            IntrinsicOp::WaitGroup => match next()? {
                V::Int(n) => Intrinsic::WaitGroup(n),
                _ => return None,
            },
            IntrinsicOp::Ldmatrix => match (next()?, next()?, next()?, next()?) {
                (V::Ref(dst), V::Ref(src), V::Int(num), V::Bool(trans)) => Intrinsic::Ldmatrix {
                    dst,
                    src,
                    num,
                    trans,
                },
                _ => return None,
            },
            IntrinsicOp::Mma => match (next()?, next()?, next()?) {
                (V::Ref(acc), V::Ref(a), V::Ref(b)) => Intrinsic::Mma { acc, a, b },
                _ => return None,
            },
        };
        next().is_none().then_some(call)
    }

    /// The element references, in parameter order.
    pub fn operands(&self) -> Vec<&ElemRef> {
        self.args()
            .into_iter()
            .filter_map(|a| match a {
                Arg::Ref(r) => Some(r),
                _ => None,
            })
            .collect()
    }

    pub fn operands_mut(&mut self) -> Vec<&mut ElemRef> {
        self.parts_mut().0
    }

    /// The predicate, when the call has one.
    pub fn pred(&self) -> Option<&Expr> {
        self.args().into_iter().find_map(|a| match a {
            Arg::Pred(p) => p,
            _ => None,
        })
    }

    /// Every expression the call holds directly: operand indices, then the predicate.
    pub fn exprs(&self) -> Vec<&Expr> {
        let mut out: Vec<&Expr> = Vec::new();
        for a in self.args() {
            match a {
                Arg::Ref(r) => out.extend(r.indices.iter()),
                Arg::Pred(Some(p)) => out.push(p),
                _ => {}
            }
        }
        out
    }

    /// [`Intrinsic::exprs`], mutably.
    pub fn exprs_mut(&mut self) -> Vec<&mut Expr> {
        let (refs, pred) = self.parts_mut();
        let mut out: Vec<&mut Expr> = Vec::new();
        for r in refs {
            out.extend(r.indices.iter_mut());
        }
        out.extend(pred);
        out
    }

    /// What the call does to each of its operands.
    pub fn accesses(&self) -> Vec<Access<'_>> {
        self.def()
            .params
            .iter()
            .zip(self.args())
            .filter_map(|(param, arg)| match (param.kind, arg) {
                (ParamKind::Ref(rule), Arg::Ref(operand)) => Some(Access {
                    operand,
                    param,
                    effect: rule.effect,
                }),
                _ => None,
            })
            .collect()
    }

    /// The value of integer parameter `name`.
    pub fn int_arg(&self, name: &str) -> Option<i64> {
        self.def()
            .params
            .iter()
            .zip(self.args())
            .find_map(|(p, a)| match a {
                Arg::Int(v) if p.name == name => Some(v),
                _ => None,
            })
    }

    /// The value of integer parameter `name` when it is one its definition allows.
    fn valid_int_arg(&self, name: &str) -> Option<i64> {
        let v = self.int_arg(name)?;
        self.def().param(name)?.kind.admits(v).then_some(v)
    }

    /// How many consecutive elements of an `elem_bytes`-byte dtype the operand of parameter
    /// `param` covers; `None` when the count is not a whole number of elements or depends on
    /// a constant the definition does not allow.
    pub fn count(&self, param: &Param, elem_bytes: i64) -> Option<i64> {
        let ParamKind::Ref(rule) = param.kind else {
            return None;
        };
        match rule.count {
            Count::Elems(n) => Some(n),
            Count::Times(p, k) => self.valid_int_arg(p)?.checked_mul(k),
            Count::BytesOf(p) => {
                let bytes = self.valid_int_arg(p)?;
                (elem_bytes > 0 && bytes % elem_bytes == 0).then(|| bytes / elem_bytes)
            }
        }
    }
}

/// A broken operand rule: the message, and the operand it is about (`None`: the call).
#[derive(Clone, Debug, PartialEq)]
pub struct Violation<'a> {
    pub at: Option<&'a ElemRef>,
    pub message: String,
}

/// `float16 or bfloat16`, `4, 8 or 16`.
fn one_of<T: std::fmt::Display>(items: &[T]) -> String {
    let words: Vec<String> = items.iter().map(ToString::to_string).collect();
    match words.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// What the operand rules need to know about a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufFacts<'a> {
    pub name: &'a str,
    pub scope: Scope,
    pub dtype: DType,
}

impl<'a> From<&'a BufferDecl> for BufFacts<'a> {
    fn from(d: &'a BufferDecl) -> BufFacts<'a> {
        BufFacts {
            name: &d.name.name,
            scope: d.scope,
            dtype: d.dtype,
        }
    }
}

/// The rules of the definition that need only the operands' buffers (`buf` looks one up;
/// an unknown one is skipped, the caller reports it): each constant among its allowed
/// values, each operand's scope and dtype, byte counts that are whole elements, one dtype
/// where the definition pairs operands. (Where the call may stand, and its operands' indices
/// and bounds, are the verifier's own walk: rules I1–I2 of docs/ir.md.) The verifier and the
/// interpreter both apply them.
pub fn check<'a, 'b>(
    i: &'a Intrinsic,
    buf: &dyn Fn(&str) -> Option<BufFacts<'b>>,
) -> Vec<Violation<'a>> {
    let def = i.def();
    let mut out = Vec::new();
    let mut typed: Vec<(&'static str, &'a ElemRef, BufFacts<'b>)> = Vec::new();
    let mut whole_reported = false;
    // The call's constants first, then its operands.
    let mut params: Vec<(&'static Param, Arg<'a>)> = def.params.iter().zip(i.args()).collect();
    params.sort_by_key(|(p, _)| matches!(p.kind, ParamKind::Ref(_)));
    for (param, arg) in params {
        let what = format!("the {} of `{}`", param.role, def.name);
        match (param.kind, arg) {
            (ParamKind::Int { allowed, .. }, Arg::Int(v)) if !param.kind.admits(v) => {
                let want = if allowed.is_empty() {
                    "≥ 0".to_string()
                } else {
                    one_of(allowed)
                };
                out.push(Violation {
                    at: None,
                    message: format!("{what} (`{}`) must be {want}, found {v}", param.name),
                });
            }
            (ParamKind::Ref(rule), Arg::Ref(r)) => {
                let Some(d) = buf(&r.buffer.name) else {
                    continue;
                };
                if !rule.scopes.contains(&d.scope) {
                    let scopes: Vec<&str> = rule.scopes.iter().map(|s| s.name()).collect();
                    out.push(Violation {
                        at: Some(r),
                        message: format!(
                            "{what} must be a {} buffer, but `{}` is a {} buffer",
                            one_of(&scopes),
                            d.name,
                            d.scope.name()
                        ),
                    });
                }
                if !rule.dtypes.is_empty() && !rule.dtypes.contains(&d.dtype) {
                    out.push(Violation {
                        at: Some(r),
                        message: format!(
                            "{what} must be {}; `{}` is {}",
                            one_of(rule.dtypes),
                            d.name,
                            d.dtype
                        ),
                    });
                }
                // A byte count must be whole elements (reported once per call).
                if let (Count::BytesOf(p), false) = (rule.count, whole_reported) {
                    let size = i64::from(d.dtype.bytes());
                    match i.valid_int_arg(p) {
                        Some(bytes) if size == 0 || bytes % size != 0 => {
                            whole_reported = true;
                            out.push(Violation {
                                at: Some(r),
                                message: format!(
                                    "`{}` of {bytes} bytes is not a whole number of {} elements \
                                     ({size} bytes each)",
                                    def.name, d.dtype
                                ),
                            });
                        }
                        _ => {}
                    }
                }
                typed.push((param.name, r, d));
            }
            _ => {}
        }
    }
    for (a, b) in def.same_dtype {
        let find = |n: &str| typed.iter().find(|(p, _, _)| *p == n);
        if let (Some((_, ra, da)), Some((_, _, db))) = (find(a), find(b)) {
            if da.dtype != db.dtype {
                let role = |n: &str| def.param(n).map_or("", |p| p.role);
                out.push(Violation {
                    at: Some(ra),
                    message: format!(
                        "the {} and the {} of `{}` must have one dtype: `{}` is {}, `{}` is {}",
                        role(a),
                        role(b),
                        def.name,
                        da.name,
                        da.dtype,
                        db.name,
                        db.dtype
                    ),
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::span::Span;

    fn r(name: &str) -> ElemRef {
        ElemRef {
            buffer: Ident::new(name, Span::DUMMY),
            indices: vec![Expr::var("i"), Expr::int(0)],
        }
    }

    fn samples() -> Vec<Intrinsic> {
        vec![
            Intrinsic::CpAsync {
                dst: r("S"),
                src: r("A"),
                bytes: 16,
                pred: Some(Expr::var("p")),
            },
            Intrinsic::CpAsync {
                dst: r("S"),
                src: r("A"),
                bytes: 4,
                pred: None,
            },
            Intrinsic::CommitGroup,
            Intrinsic::WaitGroup(2),
            Intrinsic::Ldmatrix {
                dst: r("F"),
                src: r("S"),
                num: 2,
                trans: true,
            },
            Intrinsic::Mma {
                acc: r("C"),
                a: r("A"),
                b: r("B"),
            },
        ]
    }

    fn owned(a: Arg<'_>) -> ArgValue {
        match a {
            Arg::Ref(r) => ArgValue::Ref(r.clone()),
            Arg::Int(v) => ArgValue::Int(v),
            Arg::Bool(b) => ArgValue::Bool(b),
            Arg::Pred(p) => ArgValue::Pred(p.cloned()),
        }
    }

    /// `args` follows the definition's parameters, and `from_args` inverts it.
    #[test]
    fn args_match_the_definition_and_build_back() {
        for i in samples() {
            let def = i.def();
            let args = i.args();
            assert_eq!(args.len(), def.params.len(), "{}", def.name);
            for (p, a) in def.params.iter().zip(&args) {
                let fits = matches!(
                    (p.kind, a),
                    (ParamKind::Ref(_), Arg::Ref(_))
                        | (ParamKind::Int { .. }, Arg::Int(_))
                        | (ParamKind::Bool { .. }, Arg::Bool(_))
                        | (ParamKind::Pred, Arg::Pred(_))
                );
                assert!(fits, "{} {}", def.name, p.name);
            }
            let values: Vec<ArgValue> = args.into_iter().map(owned).collect();
            assert_eq!(Intrinsic::from_args(def, values), Some(i.clone()));
            assert_eq!(lookup(def.name), Some(def));
            // Mutable and shared views see the same expressions.
            let n = i.exprs().len();
            let mut m = i.clone();
            assert_eq!(m.exprs_mut().len(), n);
            assert_eq!(m.operands_mut().len(), i.operands().len());
        }
        let defs = all();
        for (k, d) in defs.iter().enumerate() {
            assert!(defs[..k].iter().all(|e| e.name != d.name && e.op != d.op));
            for (a, b) in d.same_dtype {
                assert!(d.param(a).is_some() && d.param(b).is_some(), "{}", d.name);
            }
        }
        assert_eq!(
            Intrinsic::from_args(&LDMATRIX, vec![ArgValue::Int(4)]),
            None
        );
    }

    #[test]
    fn counts_and_effects() {
        let s = samples();
        let cp = &s[0];
        let dst = CP_ASYNC.params[0];
        assert_eq!(cp.count(&dst, 2), Some(8));
        assert_eq!(cp.count(&dst, 4), Some(4));
        assert_eq!(s[1].count(&dst, 8), None);
        let effects: Vec<Effect> = cp.accesses().iter().map(|a| a.effect).collect();
        assert_eq!(effects, [Effect::AsyncWrite, Effect::Read]);
        assert_eq!(s[4].count(&LDMATRIX.params[0], 2), Some(4));
        assert_eq!(s[4].count(&LDMATRIX.params[1], 2), Some(8));
        assert_eq!(CP_ASYNC.required(), 3);
        assert_eq!(LDMATRIX.required(), 2);
        assert_eq!(WAIT_GROUP.required(), 1);
        assert!(Effect::ReadWrite.reads() && Effect::ReadWrite.writes());
        assert!(!Effect::AsyncWrite.reads() && Effect::AsyncWrite.writes());
        assert_eq!(cp.pred(), Some(&Expr::var("p")));
        assert_eq!(s[5].exprs().len(), 6);
    }
}
