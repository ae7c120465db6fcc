//! Lowering of expressions, dtypes and constant arguments, plus the shared helpers every
//! construct uses: call-argument binding and "did you mean" suggestions.

use crate::diagnostic::Diagnostic;
use crate::dtype::DType;
use crate::ir::{BinOp, Expr, ExprKind, MathFn, UnOp};
use crate::span::Span;
use crate::syntax::ast::{self, BinaryOp, BoolOp, CmpOp, UnaryOp};
use crate::syntax::lower::Lowerer;

/// Whether the front end understands `T.{rest}`: a construct of `KNOWN_T_NAMES`, a math
/// function of `crate::math` or an intrinsic of `crate::intrinsic`.
pub fn is_known_t_name(rest: &str) -> bool {
    KNOWN_T_NAMES.contains(&rest)
        || MathFn::parse(rest).is_some()
        || crate::intrinsic::lookup(&format!("T.{rest}")).is_some()
}

/// Every `T.*` name the front end understands (for "did you mean" notes).
pub fn known_t_names() -> Vec<&'static str> {
    let intrinsics = crate::intrinsic::all().map(|d| d.name.trim_start_matches("T."));
    let math = MathFn::ALL.iter().map(|f| f.name());
    KNOWN_T_NAMES
        .iter()
        .copied()
        .chain(math)
        .chain(intrinsics)
        .collect()
}

/// The `T.*` names of the front end's constructs, other than the intrinsics.
const KNOWN_T_NAMES: &[&str] = &[
    "prim_func",
    "symbolic",
    "Tensor",
    "Buffer",
    "reshape",
    "handle",
    "match_buffer",
    "Kernel",
    "ws",
    "WarpSpecialize",
    "alloc_barrier",
    "barrier_wait",
    "barrier_arrive",
    "mbarrier_wait_parity",
    "tma_copy",
    "alloc_shared",
    "alloc_fragment",
    "alloc_reducer",
    "finalize_reducer",
    "alloc_local",
    "alloc_var",
    "alloc_buffer",
    "sblock_alloc_buffer",
    "clear",
    "fill",
    "copy",
    "gemm",
    "GemmWarpPolicy",
    "Pipelined",
    "Parallel",
    "parallel",
    "serial",
    "Serial",
    "Persistent",
    "unroll",
    "thread_binding",
    "use_swizzle",
    "min_blocks_per_sm",
    "no_set_max_nreg",
    "disable_warp_group_reg_alloc",
    "annotate_layout",
    "shared_arena",
    "sync_threads",
    "sync_grid",
    "tvm_storage_sync",
    "note",
    "fresh",
    "print",
    "vectorized",
    "make_swizzled_layout",
    "make_padded_layout",
    "mma_accumulator_layout",
    "ceildiv",
    "floordiv",
    "floormod",
    "min",
    "max",
    "cast",
    "Cast",
    "if_then_else",
    "clamp",
    "atomic_add",
    "shfl_sync",
    "shfl_up",
    "tvm_warp_shuffle",
    "tvm_warp_shuffle_down",
    "tvm_warp_shuffle_up",
    "reduce_sum",
    "reduce_max",
    "reduce_min",
    "reduce_abssum",
    "reduce_absmax",
    "launch_thread",
    "launch_thread_idx",
    "get_thread_binding",
    "block",
    "sblock",
    "sblock_attr",
    "reads",
    "writes",
    "attr",
    "region",
    "tvm_access_ptr",
    "type_annotation",
    "tvm_tuple",
    "infinity",
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "float8_e4m3",
    "float8_e4m3fn",
    "float8_e5m2",
    "int8",
    "int32",
    "int64",
    "uint8",
    "uint32",
    "bool",
];

/// Levenshtein distance, for suggestions.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            let del = prev[j + 1] + 1;
            let ins = cur[j] + 1;
            cur.push(sub.min(del).min(ins));
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The candidate closest to `name`, if it is close enough to be a likely typo.
pub fn suggest<'c>(name: &str, candidates: &[&'c str]) -> Option<&'c str> {
    let limit = if name.chars().count() <= 4 { 1 } else { 2 };
    candidates
        .iter()
        .map(|c| {
            let d = if c.eq_ignore_ascii_case(name) {
                0
            } else {
                edit_distance(&name.to_ascii_lowercase(), &c.to_ascii_lowercase())
            };
            (d, *c)
        })
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// TileLang constructs tlc knows and does not support, with what to write instead: the
/// error names them as such, not as typos.
const DECLINED: &[(&str, &str, &str)] = &[
    (
        "set_max_nreg",
        "register reallocation by hand",
        "tlc's warp-specialize pass sets each role's registers (`T.setmaxnreg` at thread \
         level); `T.no_set_max_nreg()` turns that off",
    ),
    (
        "alloc_tmem",
        "Blackwell tensor memory (sm_100)",
        "tlc targets sm_80 and sm_90a; write the gemm with `T.gemm` into a fragment",
    ),
    (
        "import_source",
        "external CUDA source",
        "write the computation with tile ops or tlc's thread-level intrinsics",
    ),
    (
        "call_extern",
        "a call of external CUDA code",
        "write the computation with tile ops or tlc's thread-level intrinsics",
    ),
    (
        "Fragment",
        "a hand-written fragment layout",
        "tlc chooses fragment layouts (layout-inference): drop the annotation",
    ),
    (
        "view",
        "a reinterpreted tile",
        "for another shape of the same dtype write `T.reshape(buf, shape)`; for a global \
         tensor a buffer view `v = T.Tensor(shape, dtype, P.data)`",
    ),
    (
        "dp4a",
        "`dp4a`",
        "write the int8 dot product as int32 arithmetic in a `T.Parallel` nest",
    ),
];

/// The error for an unknown `T.name`.
pub fn unknown_construct(dotted: &str, span: Span) -> Diagnostic {
    if let Some((_, what, instead)) = dotted
        .strip_prefix("T.")
        .and_then(|rest| DECLINED.iter().find(|(n, _, _)| *n == rest))
    {
        return Diagnostic::error(span, format!("`{dotted}` ({what}) is not supported by tlc"))
            .with_note(*instead);
    }
    let mut d = Diagnostic::error(span, format!("unknown TileLang construct `{dotted}`"));
    if let Some(rest) = dotted.strip_prefix("T.") {
        if let Some(s) = suggest(rest, &known_t_names()) {
            d = d.with_note(format!("did you mean `T.{s}`?"));
        }
    }
    d
}

fn arith_op(op: BinaryOp) -> BinOp {
    match op {
        BinaryOp::Add => BinOp::Add,
        BinaryOp::Sub => BinOp::Sub,
        BinaryOp::Mul => BinOp::Mul,
        BinaryOp::Div => BinOp::Div,
        BinaryOp::FloorDiv => BinOp::FloorDiv,
        BinaryOp::Mod => BinOp::FloorMod,
        BinaryOp::BitAnd => BinOp::BitAnd,
        BinaryOp::BitOr => BinOp::BitOr,
        BinaryOp::BitXor => BinOp::BitXor,
        BinaryOp::Shl => BinOp::Shl,
        BinaryOp::Shr => BinOp::Shr,
    }
}

fn compare_op(op: CmpOp) -> BinOp {
    match op {
        CmpOp::Lt => BinOp::Lt,
        CmpOp::Le => BinOp::Le,
        CmpOp::Gt => BinOp::Gt,
        CmpOp::Ge => BinOp::Ge,
        CmpOp::Eq => BinOp::Eq,
        CmpOp::Ne => BinOp::Ne,
    }
}

/// Whether `e` spells a dtype: `"float16"` or `T.float16`.
fn spells_dtype(e: &ast::Expr) -> bool {
    match &e.kind {
        ast::ExprKind::Str(s) => DType::parse(s).is_some(),
        _ => e
            .dotted()
            .as_deref()
            .and_then(|d| d.strip_prefix("T."))
            .is_some_and(|d| DType::parse(d).is_some()),
    }
}

/// The error for a call that is not a scalar expression.
#[cold]
#[inline(never)]
fn call_error(name: &str, func_span: Span, span: Span) -> Diagnostic {
    match name.strip_prefix("T.") {
        Some(rest) if is_known_t_name(rest) => {
            Diagnostic::error(span, format!("`{name}` is not a scalar expression"))
        }
        Some(_) => unknown_construct(name, func_span),
        None => Diagnostic::error(func_span, format!("unsupported call `{name}`")),
    }
}

#[cold]
#[inline(never)]
fn expr_error(e: &ast::Expr, msg: &str) -> Diagnostic {
    Diagnostic::error(e.span, msg)
}

impl Lowerer {
    /// Binds a call's arguments to the parameter `names` (positional first, then by
    /// keyword). The first `required` names must be present. Reports every problem and
    /// returns `None` if there was any.
    pub fn bind<'a>(
        &mut self,
        what: &str,
        call_span: Span,
        args: &'a [ast::Arg],
        names: &[&str],
        required: usize,
    ) -> Option<Vec<Option<&'a ast::Expr>>> {
        let mut slots: Vec<Option<&'a ast::Expr>> = vec![None; names.len()];
        let mut ok = true;
        let mut seen_keyword = false;
        for (i, arg) in args.iter().enumerate() {
            match &arg.name {
                None => {
                    if seen_keyword {
                        self.error(Diagnostic::error(
                            arg.value.span,
                            "positional argument after a keyword argument",
                        ));
                        ok = false;
                    } else if let Some(slot) = slots.get_mut(i) {
                        *slot = Some(&arg.value);
                    } else {
                        self.error(Diagnostic::error(
                            arg.value.span,
                            format!(
                                "`{what}` takes at most {} positional argument{}",
                                names.len(),
                                if names.len() == 1 { "" } else { "s" }
                            ),
                        ));
                        ok = false;
                    }
                }
                Some(kw) => {
                    seen_keyword = true;
                    match names.iter().position(|n| *n == kw.name) {
                        Some(p) if slots.get(p).is_some_and(Option::is_some) => {
                            self.error(Diagnostic::error(
                                kw.span,
                                format!("argument `{}` of `{what}` given twice", kw.name),
                            ));
                            ok = false;
                        }
                        Some(p) => {
                            if let Some(slot) = slots.get_mut(p) {
                                *slot = Some(&arg.value);
                            }
                        }
                        None => {
                            let mut d = Diagnostic::error(
                                kw.span,
                                format!("unknown keyword argument `{}` for `{what}`", kw.name),
                            );
                            if let Some(s) = suggest(&kw.name, names) {
                                d = d.with_note(format!("did you mean `{s}`?"));
                            } else if !names.is_empty() {
                                d = d.with_note(format!("`{what}` takes: {}", names.join(", ")));
                            }
                            self.error(d);
                            ok = false;
                        }
                    }
                }
            }
        }
        for (name, slot) in names.iter().zip(&slots).take(required) {
            if slot.is_none() {
                self.error(Diagnostic::error(
                    call_span,
                    format!("`{what}` is missing its argument `{name}`"),
                ));
                ok = false;
            }
        }
        ok.then_some(slots)
    }

    /// Lowers a scalar expression.
    ///
    /// This is the recursive path of expression lowering (up to `MAX_EXPR_DEPTH` deep), so
    /// it only dispatches: the work, and above all the error formatting with its many
    /// temporaries, lives in out-of-line helpers, keeping each level's stack frame small.
    pub fn expr(&mut self, e: &ast::Expr) -> Option<Expr> {
        match &e.kind {
            ast::ExprKind::Binary(op, a, b) => self.expr_binary(arith_op(*op), a, b, e.span),
            ast::ExprKind::Compare(op, a, b) => self.expr_binary(compare_op(*op), a, b, e.span),
            ast::ExprKind::BoolOp(op, a, b) => {
                let op = if *op == BoolOp::And {
                    BinOp::And
                } else {
                    BinOp::Or
                };
                self.expr_bool_op(op, a, b, e.span)
            }
            ast::ExprKind::Unary(UnaryOp::Pos, a) => self.expr(a),
            ast::ExprKind::Unary(op, a) => self.expr_unary(*op, a, e.span),
            ast::ExprKind::Subscript(base, items) => self.expr_load(base, items, e.span),
            ast::ExprKind::Call(func, args) => self.call_expr(e.span, func, args),
            _ => self.expr_leaf(e),
        }
    }

    #[inline(never)]
    fn expr_binary(&mut self, op: BinOp, a: &ast::Expr, b: &ast::Expr, span: Span) -> Option<Expr> {
        let a = self.expr(a);
        let b = self.expr(b);
        Some(Expr::binary(op, a?, b?, span))
    }

    /// `a and b`, `a or b`: `b` is evaluated only when `a` does not decide.
    #[inline(never)]
    fn expr_bool_op(
        &mut self,
        op: BinOp,
        a: &ast::Expr,
        b: &ast::Expr,
        span: Span,
    ) -> Option<Expr> {
        let a = self.expr(a);
        let b = self.conditionally(|lw| lw.expr(b));
        Some(Expr::binary(op, a?, b?, span))
    }

    #[inline(never)]
    fn expr_unary(&mut self, op: UnaryOp, a: &ast::Expr, span: Span) -> Option<Expr> {
        let a = self.expr(a)?;
        let op = match op {
            UnaryOp::Neg => UnOp::Neg,
            UnaryOp::Invert => UnOp::BitNot,
            _ => UnOp::Not,
        };
        Some(Expr::new(ExprKind::Unary(op, Box::new(a)), span))
    }

    #[inline(never)]
    fn expr_load(&mut self, base: &ast::Expr, items: &[ast::Expr], span: Span) -> Option<Expr> {
        let ast::ExprKind::Name(buffer) = &base.kind else {
            return self.fail(expr_error(base, "only a buffer name can be indexed"));
        };
        let indices = self.indices(items)?;
        let dtype = self.elem_dtype(buffer);
        let (buffer, indices, inside) = self.logical_element_target(buffer, indices, base.span)?;
        let load = Expr::new(ExprKind::Load { buffer, indices }, span);
        Some(match (inside, dtype) {
            // Outside a view's (or a layout's) shape: 0, as legalize-safe-memory reads.
            (Some(c), Some(dtype)) => {
                let zero = Expr::new(ExprKind::Cast(dtype, Box::new(Expr::int(0))), span);
                Expr::new(
                    ExprKind::Select(Box::new(c), Box::new(load), Box::new(zero)),
                    span,
                )
            }
            _ => load,
        })
    }

    /// Leaves, and the expressions that are errors in scalar position.
    #[inline(never)]
    fn expr_leaf(&mut self, e: &ast::Expr) -> Option<Expr> {
        let span = e.span;
        let kind = match &e.kind {
            ast::ExprKind::Name(n) if self.is_var(n) => {
                return Some(crate::syntax::lower_var::element_load(n, span))
            }
            ast::ExprKind::Name(n) => ExprKind::Var(n.clone()),
            ast::ExprKind::Int(v) => ExprKind::Int(self.int_value(*v, span)?),
            ast::ExprKind::Float(v) => ExprKind::Float(*v),
            ast::ExprKind::Bool(b) => ExprKind::Bool(*b),
            ast::ExprKind::Attr(..) => {
                let dotted = e.dotted().unwrap_or_default();
                let msg = match dotted.strip_prefix("T.").and_then(DType::parse) {
                    Some(_) => Diagnostic::error(
                        span,
                        format!(
                            "`{dotted}` is a dtype, not a value; write `{dotted}(x)` to convert"
                        ),
                    ),
                    None if dotted.starts_with("T.")
                        && !is_known_t_name(dotted.get(2..).unwrap_or("")) =>
                    {
                        unknown_construct(&dotted, span)
                    }
                    None => Diagnostic::error(span, "expected a scalar expression"),
                };
                return self.fail(msg);
            }
            ast::ExprKind::Str(_) => {
                return self.fail(expr_error(e, "a string is not a value here"))
            }
            ast::ExprKind::None => return self.fail(expr_error(e, "`None` is not a value here")),
            ast::ExprKind::Slice(..) => {
                return self.fail(expr_error(
                    e,
                    "a slice is only allowed in a region of T.copy, T.fill or T.gemm",
                ))
            }
            ast::ExprKind::Lambda(..) => {
                return self.fail(expr_error(
                    e,
                    "`lambda` is only allowed as the combiner of `T.comm_reducer` (an all-reduce's scope)",
                ))
            }
            _ => return self.fail(expr_error(e, "expected a scalar expression")),
        };
        Some(Expr::new(kind, span))
    }

    /// Point indices `buf[i, j]` (slices are rejected).
    pub fn indices(&mut self, items: &[ast::Expr]) -> Option<Vec<Expr>> {
        let mut out = Vec::with_capacity(items.len());
        let mut ok = true;
        for item in items {
            match self.expr(item) {
                Some(e) => out.push(e),
                None => ok = false,
            }
        }
        ok.then_some(out)
    }

    /// An `i64` from a literal (whose negation was folded in by the grammar).
    pub fn int_value(&mut self, v: i128, span: Span) -> Option<i64> {
        match i64::try_from(v) {
            Ok(v) => Some(v),
            Err(_) => self.fail(
                Diagnostic::error(span, "integer literal too large")
                    .with_note("integers must fit in a signed 64-bit value"),
            ),
        }
    }

    /// Calls in expression position: intrinsics and typed literals. Like `expr`, a thin
    /// dispatcher on the recursive path.
    #[inline(never)]
    fn call_expr(&mut self, span: Span, func: &ast::Expr, args: &[ast::Arg]) -> Option<Expr> {
        // `x.astype("float16")` / `A[i, j].astype(T.float16)`: a conversion.
        if let ast::ExprKind::Attr(base, attr) = &func.kind {
            if attr.name == "astype" && base.dotted().is_none_or(|d| !d.starts_with("T.")) {
                return self.call_astype(base, span, args);
            }
        }
        let Some(name) = func.dotted() else {
            return self.fail(expr_error(func, "unsupported call"));
        };
        if let Some(f) = name.strip_prefix("T.").and_then(MathFn::parse) {
            return self.call_math(f, &name, span, args);
        }
        match name.as_str() {
            "T.clamp" => self.call_clamp(&name, span, args),
            "T.ceildiv" => self.call_binary(BinOp::CeilDiv, &name, span, args),
            "T.min" => self.call_binary(BinOp::Min, &name, span, args),
            "T.max" => self.call_binary(BinOp::Max, &name, span, args),
            "T.floordiv" => self.call_binary(BinOp::FloorDiv, &name, span, args),
            "T.floormod" => self.call_binary(BinOp::FloorMod, &name, span, args),
            "T.cast" => self.call_cast(&name, span, args, &["value", "dtype"], 1, 0),
            "T.Cast" => self.call_cast(&name, span, args, &["dtype", "value"], 0, 1),
            "T.reinterpret" => {
                // TVM's order is (dtype, value); TileLang's `T.reinterpret(value, dtype)`
                // is also written: a positional dtype spelling in second place means that.
                let second_is_dtype = args.len() == 2
                    && args.iter().all(|a| a.name.is_none())
                    && !spells_dtype(&args[0].value)
                    && spells_dtype(&args[1].value);
                let order: &[&str] = if second_is_dtype {
                    &["value", "dtype"]
                } else {
                    &["dtype", "value"]
                };
                let a = self.bind(&name, span, args, order, 2)?;
                let (dt_e, x_e) = if second_is_dtype {
                    (a[1]?, a[0]?)
                } else {
                    (a[0]?, a[1]?)
                };
                let dt = self.dtype(dt_e);
                let x = self.expr(x_e);
                Some(Expr::new(ExprKind::Reinterpret(dt?, Box::new(x?)), span))
            }
            "T.if_then_else" => self.call_select(&name, span, args),
            _ if crate::syntax::lower_value_call::is_value_call(&name) => {
                self.value_call(&name, span, args)
            }
            "T.infinity" => self.call_infinity(&name, span, args),
            "float" => self.call_float(span, args),
            _ => match name.strip_prefix("T.").and_then(DType::parse) {
                Some(dt) => self.call_typed_literal(dt, &name, span, args),
                None if self.macros.defs.contains_key(&name) => {
                    let m = self.macros.defs.get(&name).cloned()?;
                    let call = ast::Expr::new(
                        ast::ExprKind::Call(Box::new(func.clone()), args.to_vec()),
                        span,
                    );
                    self.macro_value_expr(&m, &call)
                }
                None => self.fail(call_error(&name, func.span, span)),
            },
        }
    }

    #[inline(never)]
    fn call_binary(
        &mut self,
        op: BinOp,
        name: &str,
        span: Span,
        args: &[ast::Arg],
    ) -> Option<Expr> {
        let a = self.bind(name, span, args, &["a", "b"], 2)?;
        let x = self.expr(a[0]?);
        let y = self.expr(a[1]?);
        Some(Expr::binary(op, x?, y?, span))
    }

    /// `T.exp(x)`, `T.pow(x, y)`, …: a math function (`math.rs`).
    #[inline(never)]
    fn call_math(&mut self, f: MathFn, name: &str, span: Span, args: &[ast::Arg]) -> Option<Expr> {
        let a = self.bind(name, span, args, f.params(), f.arity())?;
        let mut out = Vec::with_capacity(a.len());
        let mut ok = true;
        for arg in a {
            match arg.and_then(|e| self.expr(e)) {
                Some(e) => out.push(e),
                None => ok = false,
            }
        }
        ok.then(|| Expr::new(ExprKind::Math(f, out), span))
    }

    /// `T.clamp(x, lo, hi)`: `T.min(T.max(x, lo), hi)`, as TileLang defines it.
    #[inline(never)]
    fn call_clamp(&mut self, name: &str, span: Span, args: &[ast::Arg]) -> Option<Expr> {
        let a = self.bind(name, span, args, &["x", "lo", "hi"], 3)?;
        let x = self.expr(a[0]?);
        let lo = self.expr(a[1]?);
        let hi = self.expr(a[2]?);
        let low = Expr::binary(BinOp::Max, x?, lo?, span);
        Some(Expr::binary(BinOp::Min, low, hi?, span))
    }

    /// `x.astype(dtype)`: `T.cast(x, dtype)`.
    #[inline(never)]
    fn call_astype(&mut self, base: &ast::Expr, span: Span, args: &[ast::Arg]) -> Option<Expr> {
        let a = self.bind("astype", span, args, &["dtype"], 1)?;
        let dt = self.dtype(a[0]?);
        let x = self.expr(base);
        Some(Expr::new(ExprKind::Cast(dt?, Box::new(x?)), span))
    }

    /// `T.cast(x, dt)` / `T.Cast(dt, x)`: `dt_at` and `value_at` say which is where.
    #[inline(never)]
    fn call_cast(
        &mut self,
        name: &str,
        span: Span,
        args: &[ast::Arg],
        names: &[&str],
        dt_at: usize,
        value_at: usize,
    ) -> Option<Expr> {
        let a = self.bind(name, span, args, names, 2)?;
        let dt = self.dtype((*a.get(dt_at)?)?);
        let x = self.expr((*a.get(value_at)?)?);
        Some(Expr::new(ExprKind::Cast(dt?, Box::new(x?)), span))
    }

    #[inline(never)]
    fn call_select(&mut self, name: &str, span: Span, args: &[ast::Arg]) -> Option<Expr> {
        let a = self.bind(name, span, args, &["cond", "t", "f"], 3)?;
        let c = self.expr(a[0]?);
        let t = self.conditionally(|lw| lw.expr(a[1]?));
        let f = self.conditionally(|lw| lw.expr(a[2]?));
        Some(Expr::new(
            ExprKind::Select(Box::new(c?), Box::new(t?), Box::new(f?)),
            span,
        ))
    }

    /// `T.float32(0.5)` (TVMScript's typed literal) is a cast of the literal, marked so that
    /// `syntax::literals` can turn it into the plain literal where that means the same;
    /// `T.float32("inf")` / `"-inf"` / `"nan"` are the non-finite ones; `T.bool(True)` is
    /// the literal itself.
    #[inline(never)]
    fn call_typed_literal(
        &mut self,
        dt: DType,
        name: &str,
        span: Span,
        args: &[ast::Arg],
    ) -> Option<Expr> {
        let a = self.bind(name, span, args, &["value"], 1)?;
        let arg = a[0]?;
        let x = match &arg.kind {
            ast::ExprKind::Str(text) => {
                let v = self.special_float(text, arg.span, name)?;
                self.check_special_dtype(v, dt, name, span)?;
                Expr::new(ExprKind::Float(v), arg.span)
            }
            _ => self.expr(arg)?,
        };
        if dt == DType::Bool {
            if let ExprKind::Bool(b) = x.kind {
                return Some(Expr::new(ExprKind::Bool(b), span));
            }
        }
        if matches!(x.kind, ExprKind::Int(_) | ExprKind::Float(_)) {
            self.typed_literals.insert((span.start, span.end));
        }
        Some(Expr::new(ExprKind::Cast(dt, Box::new(x)), span))
    }

    /// `T.infinity("float32")`: TileLang's typed infinity, the same as `T.float32("inf")`.
    #[inline(never)]
    fn call_infinity(&mut self, name: &str, span: Span, args: &[ast::Arg]) -> Option<Expr> {
        let a = self.bind(name, span, args, &["dtype"], 1)?;
        let dt = self.dtype(a[0]?)?;
        self.check_special_dtype(f64::INFINITY, dt, name, span)?;
        self.typed_literals.insert((span.start, span.end));
        let inf = Expr::new(ExprKind::Float(f64::INFINITY), span);
        Some(Expr::new(ExprKind::Cast(dt, Box::new(inf)), span))
    }

    /// Python's `float("inf")`, `float("-inf")`, `float("nan")`: a plain float literal.
    #[inline(never)]
    fn call_float(&mut self, span: Span, args: &[ast::Arg]) -> Option<Expr> {
        let a = self.bind("float", span, args, &["x"], 1)?;
        let arg = a[0]?;
        let ast::ExprKind::Str(text) = &arg.kind else {
            return self.fail(
                Diagnostic::error(arg.span, "`float(...)` takes a string here")
                    .with_note("write `float(\"inf\")`, `float(\"-inf\")` or `float(\"nan\")`; a number needs no `float`"),
            );
        };
        let v = self.special_float(text, arg.span, "float")?;
        Some(Expr::new(ExprKind::Float(v), span))
    }

    /// The value of "inf", "-inf", "nan" (and Python's other spellings of them: "+inf",
    /// "infinity", any case).
    fn special_float(&mut self, text: &str, span: Span, what: &str) -> Option<f64> {
        let t = text.trim().to_ascii_lowercase();
        let (negative, body) = match t.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, t.strip_prefix('+').unwrap_or(&t)),
        };
        let v = match body {
            "inf" | "infinity" => f64::INFINITY,
            "nan" => return Some(f64::NAN),
            _ => {
                return self.fail(
                    Diagnostic::error(span, format!("`{what}` cannot read the string \"{text}\""))
                        .with_note("the strings it takes are \"inf\", \"-inf\" and \"nan\""),
                )
            }
        };
        Some(if negative { -v } else { v })
    }

    /// A non-finite value needs a float dtype that has it (fp8 E4M3 has no infinity).
    fn check_special_dtype(&mut self, v: f64, dt: DType, name: &str, span: Span) -> Option<()> {
        if !dt.is_float() {
            return self.fail(Diagnostic::error(
                span,
                format!("`{name}` needs a float dtype for an infinity or NaN, found {dt}"),
            ));
        }
        if v.is_infinite() && dt == DType::Float8E4M3 {
            return self.fail(
                Diagnostic::error(span, "float8_e4m3 has no infinity").with_note(
                    "its largest finite value is 448; converting an infinity to it saturates",
                ),
            );
        }
        Some(())
    }

    /// A dtype written as a string (`"float16"`) or as `T.float16`.
    pub fn dtype(&mut self, e: &ast::Expr) -> Option<DType> {
        // `A.dtype`: the dtype of buffer `A` (TileLang writes `-T.infinity(acc_s.dtype)`).
        if let ast::ExprKind::Attr(base, attr) = &e.kind {
            if let (ast::ExprKind::Name(buf), "dtype") = (&base.kind, attr.name.as_str()) {
                if let Some(info) = self.buffers.get(buf) {
                    return Some(info.dtype);
                }
            }
        }
        let text = match &e.kind {
            ast::ExprKind::Str(s) => s.clone(),
            _ => match e.dotted().as_deref().and_then(|d| d.strip_prefix("T.")) {
                Some(rest) => rest.to_string(),
                None => {
                    return self.fail(Diagnostic::error(
                        e.span,
                        "expected a dtype such as \"float16\" or T.float16",
                    ))
                }
            },
        };
        if let Some(dt) = DType::parse(&text) {
            return Some(dt);
        }
        let names: Vec<&str> = DType::ALL.iter().map(|d| d.name()).collect();
        let mut d = Diagnostic::error(e.span, format!("unknown dtype `{text}`"));
        if let Some(s) = suggest(&text, &names) {
            d = d.with_note(format!("did you mean `{s}`?"));
        }
        self.fail(d)
    }

    /// An integer that must be known at compile time (after folding; TVMScript's typed
    /// `T.int32(128)` is the constant 128).
    pub fn const_int(&mut self, e: &ast::Expr, what: &str) -> Option<i64> {
        let x = self.expr(e)?;
        match crate::verifier::const_int(&x) {
            Some(v) => Some(v),
            None => self.fail(Diagnostic::error(
                e.span,
                format!("{what} must be a constant integer"),
            )),
        }
    }

    /// A compile-time boolean: `True`/`False`, `T.bool(...)`, or the integers 0 and 1.
    pub fn const_bool(&mut self, e: &ast::Expr, what: &str) -> Option<bool> {
        let x = self.expr(e)?;
        match x.kind {
            ExprKind::Bool(b) => Some(b),
            ExprKind::Int(0) => Some(false),
            ExprKind::Int(1) => Some(true),
            _ => self.fail(Diagnostic::error(
                e.span,
                format!("{what} must be `True` or `False`"),
            )),
        }
    }

    /// A list (or tuple) of constant integers.
    pub fn const_int_list(&mut self, e: &ast::Expr, what: &str) -> Option<Vec<i64>> {
        let items = match &e.kind {
            ast::ExprKind::List(items) | ast::ExprKind::Tuple(items) => items,
            _ => {
                return self.fail(Diagnostic::error(
                    e.span,
                    format!("{what} must be a list of constant integers"),
                ))
            }
        };
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            out.push(self.const_int(item, what)?);
        }
        Some(out)
    }

    /// A string literal.
    pub fn string<'a>(&mut self, e: &'a ast::Expr, what: &str) -> Option<&'a str> {
        match &e.kind {
            ast::ExprKind::Str(s) => Some(s),
            _ => self.fail(Diagnostic::error(
                e.span,
                format!("{what} must be a string literal"),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions() {
        assert_eq!(suggest("Pipelind", &known_t_names()), Some("Pipelined"));
        assert_eq!(
            suggest("alloc_shard", &known_t_names()),
            Some("alloc_shared")
        );
        assert_eq!(suggest("pipelined", &known_t_names()), Some("Pipelined"));
        assert_eq!(suggest("zzzzzz", &known_t_names()), None);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
