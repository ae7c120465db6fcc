//! Calls that are values but act: TileLang's warp shuffles written as values
//! (`T.shfl_sync(v, lane)`, `T.shfl_xor(v, mask)`, `T.shfl_down` / `T.shfl_up(v, delta)`,
//! each with `width=` and `mask=`, and TVM's `T.tvm_warp_shuffle(mask, v, lane, width,
//! warp_size)` with its `_down` / `_up` forms), and `T.atomic_add(dst, value,
//! return_prev=True)`, the atomic add that returns the element's old value.
//!
//! tlc's IR has no expression with an effect: a shuffle is the thread-level statement
//! `T.shfl_sync_{idx|bfly|down|up}(dst, src, lane, width=W, mask=M)` (docs/ir.md), and the
//! atomic add `T.atomic_add_ret(old, dst, value)`, each writing one register element. A
//! value-form call is therefore **hoisted**: it becomes that statement, placed before the
//! statement being lowered and writing a fresh one-element local buffer, and the
//! expression reads the buffer's element. That is exact where the
//! statement evaluates its expression once, unconditionally, before it does anything else —
//! the value of an assignment (`x = …`, `buf[i] = …`, `x += …`), the only place hoisting is
//! open (`Lowerer::hoisted`). Anywhere else (a loop bound or a condition, evaluated again
//! or not at all; an index outside an assignment) and inside `T.if_then_else`'s branches or
//! the right side of `and` / `or` (which run only for some threads: a shuffle there would
//! run for all) the call is a located error. Where an assignment stores the shuffle as it
//! is into a register element of the value's dtype, the shuffle writes that element itself
//! (`buf[j] = T.tvm_warp_shuffle(…)`, Hadamard's exchange). An atomic add changes memory,
//! so the rest of its statement must not read the buffer it adds to (Python may read it
//! before the add), and one statement holds at most one: both located errors.
//!
//! The lane, `width` and `mask` operands are any integer expressions, evaluated by each lane
//! as it runs (CUDA's are run-time values too). TVM's `warp_size` argument only matters to
//! TVM's warp-memory lowering; its CUDA code is `__shfl_sync(mask, v, lane, width)` without
//! it, and so is tlc's.

use crate::diagnostic::Diagnostic;
use crate::dtype::DType;
use crate::intrinsic::ShuffleMode;
use crate::ir::{ElemRef, Expr, ExprKind, Ident, Intrinsic, Scope, Stmt, StmtKind};
use crate::span::Span;
use crate::syntax::ast;
use crate::syntax::lower::Lowerer;

/// How a value-form shuffle's arguments are written.
#[derive(Clone, Copy)]
enum Spelling {
    /// TileLang's `T.shfl_*(value, lane, width=32, mask=0xffffffff)`.
    TileLang,
    /// TVM's `T.tvm_warp_shuffle*(mask, value, lane, width, warp_size)`.
    Tvm,
}

/// The shuffle a value-form call name spells, if it is one.
fn shuffle_spelling(name: &str) -> Option<(ShuffleMode, Spelling)> {
    Some(match name {
        "T.shfl_sync" => (ShuffleMode::Idx, Spelling::TileLang),
        "T.shfl_xor" => (ShuffleMode::Bfly, Spelling::TileLang),
        "T.shfl_down" => (ShuffleMode::Down, Spelling::TileLang),
        "T.shfl_up" => (ShuffleMode::Up, Spelling::TileLang),
        "T.tvm_warp_shuffle" => (ShuffleMode::Idx, Spelling::Tvm),
        "T.tvm_warp_shuffle_down" => (ShuffleMode::Down, Spelling::Tvm),
        "T.tvm_warp_shuffle_up" => (ShuffleMode::Up, Spelling::Tvm),
        _ => return None,
    })
}

/// Whether `name` is a call this file lowers as a value.
pub fn is_value_call(name: &str) -> bool {
    shuffle_spelling(name).is_some()
        || name == "T.atomic_add"
        || crate::syntax::lower_rng::is_draw(name)
}

/// A value-form shuffle's arguments, lowered.
struct ShuffleArgs {
    mode: ShuffleMode,
    value: Expr,
    lane: Expr,
    width: Expr,
    mask: Expr,
}

impl Lowerer {
    /// Lowers an assignment with hoisting open: the statements its value calls need come
    /// first in `out`, then the assignment itself.
    pub fn hoisting(&mut self, out: &mut Vec<Stmt>, lower: impl FnOnce(&mut Self) -> Option<Stmt>) {
        let outer = self.hoisted.replace(Vec::new());
        let outer_cond = std::mem::take(&mut self.conditional);
        let outer_atomics = std::mem::take(&mut self.hoisted_atomics);
        let stmt = lower(self);
        let before = std::mem::replace(&mut self.hoisted, outer).unwrap_or_default();
        let atomics = std::mem::replace(&mut self.hoisted_atomics, outer_atomics);
        self.conditional = outer_cond;
        if let (Some(s), false) = (&stmt, atomics.is_empty()) {
            self.atomic_order(s, &atomics);
        }
        out.extend(before);
        out.extend(stmt);
    }

    /// Runs `f` where an expression is evaluated only by some threads (`T.if_then_else`'s
    /// branches, the right side of `and` / `or`).
    pub fn conditionally<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> T {
        self.conditional += 1;
        let r = f(self);
        self.conditional -= 1;
        r
    }

    /// A value-form call (`is_value_call`) in an expression: hoisted, read back.
    pub fn value_call(&mut self, name: &str, span: Span, args: &[ast::Arg]) -> Option<Expr> {
        if name == "T.atomic_add" {
            return self.atomic_value(span, args);
        }
        if crate::syntax::lower_rng::is_draw(name) {
            return self.rng_draw(name, span, args);
        }
        let (mode, spelling) = shuffle_spelling(name)?;
        self.hoist_open(name, span)?;
        let a = self.shuffle_args(name, mode, spelling, span, args)?;
        let dtype = self.value_dtype(&a.value, name)?;
        let src = self.register_operand(a.value, (dtype, "shfl_src"), span)?;
        let dst = self.temp(dtype, "shfl_v", span)?;
        let call = Intrinsic::shuffle_of(a.mode, (dst.clone(), src), a.lane, a.width, a.mask);
        self.hoist(Stmt::new(StmtKind::Intrinsic(call), span));
        Some(Expr::new(
            ExprKind::Load {
                buffer: dst.buffer.name,
                indices: dst.indices,
            },
            span,
        ))
    }

    /// Whether `buf[i] = value` is a value-form shuffle stored as it is into an element of
    /// the kernel's local buffer `buf` (`shuffle_into` lowers it).
    pub fn is_shuffle_into(&self, buffer: &str, items: &[ast::Expr], value: &ast::Expr) -> bool {
        let ast::ExprKind::Call(func, _) = &value.kind else {
            return false;
        };
        func.dotted()
            .is_some_and(|n| shuffle_spelling(&n).is_some())
            && self.local_dtype(buffer).is_some()
            && !self.views.contains_key(buffer)
            && !items
                .iter()
                .any(|i| matches!(i.kind, ast::ExprKind::Slice(..)))
    }

    /// `buf[i] = <value-form shuffle>` (`is_shuffle_into`): the shuffle itself writes
    /// `buf[i]` when `buf` has the value's dtype (no temporary); otherwise it writes a
    /// temporary that the store converts.
    pub fn shuffle_into(
        &mut self,
        (buffer, target_span): (&str, Span),
        items: &[ast::Expr],
        value: &ast::Expr,
        span: Span,
    ) -> Option<Stmt> {
        let ast::ExprKind::Call(func, args) = &value.kind else {
            return None;
        };
        let name = func.dotted()?;
        let (mode, spelling) = shuffle_spelling(&name)?;
        let target = self.local_dtype(buffer)?;
        let a = self.shuffle_args(&name, mode, spelling, value.span, args);
        let dtype = a.as_ref().and_then(|a| self.value_dtype(&a.value, &name));
        let indices = self.indices(items);
        let (a, dtype, indices) = (a?, dtype?, indices?);
        let dst = ElemRef {
            buffer: Ident::new(buffer.to_string(), target_span),
            indices,
        };
        let src = self.register_operand(a.value, (dtype, "shfl_src"), value.span)?;
        if dtype == target {
            let call = Intrinsic::shuffle_of(a.mode, (dst, src), a.lane, a.width, a.mask);
            return Some(Stmt::new(StmtKind::Intrinsic(call), span));
        }
        // A conversion on the way: the shuffle writes a temporary, the store converts.
        let tmp = self.temp(dtype, "shfl_v", value.span)?;
        let call = Intrinsic::shuffle_of(a.mode, (tmp.clone(), src), a.lane, a.width, a.mask);
        self.hoist(Stmt::new(StmtKind::Intrinsic(call), value.span));
        let read = Expr::new(
            ExprKind::Load {
                buffer: tmp.buffer.name,
                indices: tmp.indices,
            },
            value.span,
        );
        Some(Stmt::new(
            StmtKind::Store {
                buffer: dst.buffer,
                indices: dst.indices,
                value: read,
            },
            span,
        ))
    }

    /// `T.atomic_add(dst, value, return_prev=True)` as a value: `T.atomic_add_ret(old,
    /// dst, value)` hoisted, `old` read back. The value is converted to `dst`'s dtype on its
    /// way into a register, as `T.atomic_add` converts it.
    fn atomic_value(&mut self, span: Span, args: &[ast::Arg]) -> Option<Expr> {
        const NAME: &str = "T.atomic_add";
        let names = ["dst", "value", "memory_order", "return_prev"];
        let a = self.bind(NAME, span, args, &names, 2)?;
        let returns = match a[3] {
            Some(e) => self.const_bool(e, "`return_prev`")?,
            None => false,
        };
        if !returns {
            return self.fail(
                Diagnostic::error(
                    span,
                    "`T.atomic_add` is a value only with `return_prev=True`",
                )
                .with_note(
                    "without it the add returns nothing: write it as a statement, \
                         `T.atomic_add(dst[i], value)`",
                ),
            );
        }
        self.hoist_open("`T.atomic_add(..., return_prev=True)`", span)?;
        if let Some(order) = a[2] {
            self.relaxed_order(order)?;
        }
        let (dst, value) = (a[0]?, a[1]?);
        let ast::ExprKind::Subscript(base, items) = &dst.kind else {
            return self.fail(Diagnostic::error(
                dst.span,
                "`T.atomic_add(..., return_prev=True)` adds into one buffer element `buf[i]`",
            ));
        };
        let ast::ExprKind::Name(buffer) = &base.kind else {
            return self.fail(Diagnostic::error(base.span, "expected a buffer name"));
        };
        if let Some(s) = items
            .iter()
            .find(|i| matches!(i.kind, ast::ExprKind::Slice(..)))
        {
            return self.fail(Diagnostic::error(
                s.span,
                "`T.atomic_add(..., return_prev=True)` adds into one element; slices return no \
                 one value",
            ));
        }
        let indices = self.indices(items);
        let value = self.expr(value);
        let (buffer, indices) = self.element_target(buffer, indices?, base.span)?;
        let value = value?;
        let Some(dtype) = self.buffers.get(&buffer).map(|b| b.dtype) else {
            return self.fail(Diagnostic::error(
                base.span,
                format!("undefined buffer `{buffer}`"),
            ));
        };
        let src = self.register_operand(value, (dtype, "atomic_v"), span)?;
        let old = self.temp(dtype, "atomic_prev", span)?;
        self.hoisted_atomics.push((buffer.clone(), span));
        let dst = ElemRef {
            buffer: Ident::new(buffer, base.span),
            indices,
        };
        let call = Intrinsic::AtomicAddRet {
            old: old.clone(),
            dst,
            value: src,
        };
        self.hoist(Stmt::new(StmtKind::Intrinsic(call), span));
        Some(Expr::new(
            ExprKind::Load {
                buffer: old.buffer.name,
                indices: old.indices,
            },
            span,
        ))
    }

    /// The order rule of hoisted atomic adds: the statement `stmt` (lowered) runs after its
    /// atomics, where Python may have read their buffers first (`h[0] + T.atomic_add(h[i],
    /// …)`), and two atomics of one statement would run in the order hoisting gives them —
    /// both located errors.
    fn atomic_order(&mut self, stmt: &Stmt, atomics: &[(String, Span)]) {
        if let Some((_, second)) = atomics.get(1) {
            self.error(
                Diagnostic::error(
                    *second,
                    "a second `T.atomic_add(..., return_prev=True)` in one statement",
                )
                .with_note("write each in an assignment of its own, in the order they must run"),
            );
        }
        for (buffer, at) in atomics {
            let mut read = None;
            for e in crate::visit::stmt_exprs(stmt) {
                crate::visit::for_each_subexpr(e, &mut |x| {
                    if let ExprKind::Load { buffer: b, .. } = &x.kind {
                        if b == buffer && read.is_none() {
                            read = Some(x.span);
                        }
                    }
                });
            }
            if let Some(r) = read {
                self.error(
                    Diagnostic::error(
                        r,
                        format!(
                            "this statement reads `{buffer}`, which its `T.atomic_add(..., \
                             return_prev=True)` changes"
                        ),
                    )
                    .with_note_at(*at, "the atomic add runs before the rest of the statement")
                    .with_note("read it in a statement of its own, before or after the add"),
                );
            }
        }
    }

    /// Binds and lowers a value-form shuffle's arguments.
    fn shuffle_args(
        &mut self,
        name: &str,
        mode: ShuffleMode,
        spelling: Spelling,
        span: Span,
        args: &[ast::Arg],
    ) -> Option<ShuffleArgs> {
        let lane_name = match (mode, spelling) {
            (ShuffleMode::Idx, Spelling::TileLang) => "srcLane",
            (_, Spelling::TileLang) => "delta",
            (ShuffleMode::Idx, Spelling::Tvm) => "lane",
            (_, Spelling::Tvm) => "offset",
        };
        let (value, lane, width, mask, warp_size) = match spelling {
            Spelling::TileLang => {
                let a = self.bind(name, span, args, &["value", lane_name, "width", "mask"], 2)?;
                (a[0]?, a[1]?, a[2], a[3], None)
            }
            Spelling::Tvm => {
                let names = ["mask", "value", lane_name, "width", "warp_size"];
                let a = self.bind(name, span, args, &names, 5)?;
                (a[1]?, a[2]?, a[3], a[0], a[4])
            }
        };
        let mut operand = |e: Option<&ast::Expr>, default: i64| match e {
            Some(e) => self.expr(e),
            None => Some(Expr::int(default)),
        };
        let value = operand(Some(value), 0);
        let lane = operand(Some(lane), 0);
        let width = operand(width, 32);
        let mask = operand(mask, 0xFFFF_FFFF);
        // Only TVM's warp-memory lowering reads `warp_size` (module doc): lowered for its
        // errors, then dropped.
        let warp_size = operand(warp_size, 32);
        warp_size?;
        Some(ShuffleArgs {
            mode,
            value: value?,
            lane: lane?,
            width: width?,
            mask: mask?,
        })
    }

    /// A value-form call may stand here only where hoisting is open (module doc).
    fn hoist_open(&mut self, name: &str, span: Span) -> Option<()> {
        if self.hoisted.is_none() {
            return self.fail(
                Diagnostic::error(
                    span,
                    format!("`{name}` as a value is supported only in the value of an assignment"),
                )
                .with_note(
                    "tlc runs it as a statement before the assignment that uses its value; \
                     assign it to a name first (`v = …`) and use the name here",
                ),
            );
        }
        if self.conditional > 0 {
            return self.fail(
                Diagnostic::error(
                    span,
                    format!(
                        "`{name}` inside a conditional expression (`T.if_then_else`'s branches, \
                         the right side of `and` / `or`)"
                    ),
                )
                .with_note(
                    "there it would run only for some threads, and a shuffle needs every lane \
                     of its mask; assign it to a name before the statement and use the name",
                ),
            );
        }
        Some(())
    }

    /// The dtype of a shuffled value: known from its buffer, a conversion or its literal;
    /// a value whose dtype the front end cannot see (a `let` name, a loop variable) is a
    /// located error.
    fn value_dtype(&mut self, value: &Expr, name: &str) -> Option<DType> {
        let buffer = |n: &str| self.buffers.get(n).map(|b| b.dtype);
        // A load's dtype is its buffer's whatever its indices (the verifier types those).
        match crate::types::infer(&without_indices(value), &|_| None, &buffer) {
            Ok(t) if t.dtype != DType::Bool => Some(t.dtype),
            Ok(_) => self.fail(Diagnostic::error(
                value.span,
                format!("`{name}` moves numbers; this value is a bool"),
            )),
            Err(_) => self.fail(
                Diagnostic::error(
                    value.span,
                    format!("the dtype of the value `{name}` moves is not known here"),
                )
                .with_note(
                    "write the value into a local element first (`v = T.alloc_var(\"float32\")`, \
                     `v = …`), or convert it: `T.cast(x, \"float32\")`",
                ),
            ),
        }
    }

    /// `value` as a register operand of `dtype`: the element itself when it is one of a
    /// local buffer of that dtype, else a fresh element that the value is stored into first.
    fn register_operand(
        &mut self,
        value: Expr,
        (dtype, base): (DType, &str),
        span: Span,
    ) -> Option<ElemRef> {
        if let ExprKind::Load { buffer, indices } = &value.kind {
            if self.local_dtype(buffer) == Some(dtype) {
                return Some(ElemRef {
                    buffer: Ident::new(buffer.clone(), value.span),
                    indices: indices.clone(),
                });
            }
        }
        let tmp = self.temp(dtype, base, span)?;
        self.hoist(Stmt::new(
            StmtKind::Store {
                buffer: tmp.buffer.clone(),
                indices: tmp.indices.clone(),
                value,
            },
            span,
        ));
        Some(tmp)
    }

    /// The dtype of `name` when it is a local buffer of the kernel being lowered.
    fn local_dtype(&self, name: &str) -> Option<DType> {
        let k = self.kernels.last()?;
        k.allocs
            .iter()
            .rev()
            .find(|b| b.name.name == name)
            .filter(|b| b.scope == Scope::Local)
            .map(|b| b.dtype)
    }

    /// A fresh one-element local buffer of `dtype` (named from `base`), as its element.
    pub(crate) fn temp(&mut self, dtype: DType, base: &str, span: Span) -> Option<ElemRef> {
        let mut name = self.generated_name(base);
        let mut k = 1;
        while self.buffers.contains_key(&name) {
            name = self.generated_name(&format!("{base}_{k}"));
            k += 1;
        }
        let ident = ast::Ident {
            name: name.clone(),
            span,
        };
        self.open_kernel(span, "a warp shuffle")?;
        let decl = self.declare(&ident, vec![Expr::int(1)], dtype, Scope::Local, span)?;
        if let Some(k) = self.kernels.last_mut() {
            k.allocs.push(decl);
        }
        Some(ElemRef {
            buffer: Ident::new(name, span),
            indices: vec![Expr::int(0)],
        })
    }

    /// Puts `stmt` before the statement being lowered.
    fn hoist(&mut self, stmt: Stmt) {
        if let Some(h) = &mut self.hoisted {
            h.push(stmt);
        }
    }
}

/// `e` with every load's indices replaced by 0, for typing it where the names in the indices
/// (loop variables, lets) have no dtype yet.
fn without_indices(e: &Expr) -> Expr {
    let kind = match &e.kind {
        ExprKind::Load { buffer, indices } => ExprKind::Load {
            buffer: buffer.clone(),
            indices: indices.iter().map(|_| Expr::int(0)).collect(),
        },
        ExprKind::Unary(op, a) => ExprKind::Unary(*op, Box::new(without_indices(a))),
        ExprKind::Binary(op, a, b) => ExprKind::Binary(
            *op,
            Box::new(without_indices(a)),
            Box::new(without_indices(b)),
        ),
        ExprKind::Cast(d, a) => ExprKind::Cast(*d, Box::new(without_indices(a))),
        ExprKind::Reinterpret(d, a) => ExprKind::Reinterpret(*d, Box::new(without_indices(a))),
        ExprKind::Select(c, a, b) => ExprKind::Select(
            Box::new(without_indices(c)),
            Box::new(without_indices(a)),
            Box::new(without_indices(b)),
        ),
        ExprKind::Math(f, args) => ExprKind::Math(*f, args.iter().map(without_indices).collect()),
        k @ (ExprKind::Int(_) | ExprKind::Float(_) | ExprKind::Bool(_) | ExprKind::Var(_)) => {
            k.clone()
        }
    };
    Expr::new(kind, e.span)
}
