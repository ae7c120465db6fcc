//! Layouts of global tensors, `T.annotate_layout({P: T.Layout(P.shape, lambda i, j, …:
//! [e0, e1, …])})` in a kernel, for a parameter `P` (TileLang's flash-attention backward
//! stores its float32 `dQ` accumulator so: `lambda b, l, h, d: [b, l // 8, h, d // 8, d % 2,
//! 4 * (l % 8) + (d % 8) // 2]`). The layout says where element `(i, j, …)` of `P` lives in
//! `P`'s memory: at the row-major position of `(e0, e1, …)` in the *physical* box whose
//! extents are those of the `e`s. Like a buffer view (`lower_view.rs`) it exists only
//! here: in that kernel every element access `P[i, j, …]` becomes an access of `P` at that
//! position (delinearized with `P`'s declared shape), and a `T.copy` or tile `T.atomic_add`
//! with a region of `P` becomes its nest of element accesses. The passes and back ends see
//! ordinary accesses; the caller's tensor keeps its declared shape.
//!
//! **Only bijections are accepted**, proved from the form of the `e`s, so that no two
//! elements share memory and none leaves the tensor. Each index `v` (extent `E`) is cut into
//! digits — `v % c`, `(v // c) % c'`, `(v % c) // c'`, `v // c` — that must tile it exactly
//! (place values `1 = p0 | p1 | … | pk`, the last digit `v // pk` of extent `E / pk`); each
//! `e` is a mixed-radix number of digits (`d0 + r0·d1 + r0·r1·d2 …`, constant factors in that
//! order, only its highest digit of a symbolic extent); every digit is used once. When `E`
//! is a symbolic dim that a digit divides (`l // 8` with `l < seq_len`), the dim must be a
//! multiple of it: the function's `T.symbolic` gets `multiple_of=8`, which `-D`, the
//! interpreter and the runtime check whenever the dim gets a value — never an access past
//! the tensor. Anything else is a located error.

use crate::diagnostic::Diagnostic;
use crate::ir::{BinOp, Expr};
use crate::span::Span;
use crate::syntax::ast;
use crate::syntax::lower::Lowerer;
use crate::syntax::lower_view::arith;

/// The largest place value a layout digit may have (and so the largest multiple it may
/// require of a dim: `T.symbolic`'s `multiple_of` bound).
const MAX_PLACE: i64 = 1 << 20;

/// A global tensor's layout in one kernel.
#[derive(Clone, Debug)]
pub struct GlobalLayout {
    /// Per physical dimension: its digits, lowest place first.
    outputs: Vec<Vec<Digit>>,
    /// Per physical dimension: its extent.
    extents: Vec<Expr>,
    /// The parameter's declared shape.
    shape: Vec<Expr>,
    pub span: Span,
}

/// `(v // lo) % (hi / lo)` of index `var` (`v // lo` when `hi` is `None`), times `coef`.
#[derive(Clone, Debug, PartialEq)]
struct Digit {
    var: usize,
    lo: i64,
    hi: Option<i64>,
    coef: i64,
    span: Span,
}

impl GlobalLayout {
    /// How many indices an element access gives: the parameter's declared rank.
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// The indices of `P`'s declared shape at which element `indices` lives (`indices`:
    /// [`GlobalLayout::rank`] of them; the caller checked).
    pub fn access(&self, indices: &[Expr], span: Span) -> Vec<Expr> {
        let mut offset: Option<Expr> = None;
        for (digits, extent) in self.outputs.iter().zip(&self.extents) {
            let mut value: Option<Expr> = None;
            for d in digits {
                let v = indices[d.var].clone();
                let mut x = arith(BinOp::FloorDiv, v, Expr::int(d.lo), span);
                if let Some(hi) = d.hi {
                    x = Expr::binary(BinOp::FloorMod, x, Expr::int(hi / d.lo), span);
                }
                let term = arith(BinOp::Mul, x, Expr::int(d.coef), span);
                value = Some(match value {
                    None => term,
                    Some(s) => arith(BinOp::Add, s, term, span),
                });
            }
            let value = value.unwrap_or_else(|| Expr::int(0));
            offset = Some(match offset {
                None => value,
                Some(o) => arith(
                    BinOp::Add,
                    arith(BinOp::Mul, o, extent.clone(), span),
                    value,
                    span,
                ),
            });
        }
        let offset = offset.unwrap_or_else(|| Expr::int(0));
        let count = self
            .shape
            .iter()
            .cloned()
            .reduce(|a, b| arith(BinOp::Mul, a, b, span))
            .unwrap_or_else(|| Expr::int(1));
        crate::syntax::lower_view::remap(&[offset], &[count], &self.shape, span)
    }
}

impl Lowerer {
    /// Whether `name` has a global layout in the kernel being lowered.
    pub fn global_layout_of(&self, name: &str) -> Option<&GlobalLayout> {
        self.kernels
            .iter()
            .rev()
            .find_map(|k| k.global_layouts.get(name))
    }

    /// Notes that the kernel being lowered uses parameter `name` (a layout given after a
    /// use would change what that use meant).
    pub fn touch(&mut self, name: &str) {
        if self.params.contains(name) {
            if let Some(k) = self.kernels.last_mut() {
                k.touched.insert(name.to_string());
            }
        }
    }

    /// `P: T.Layout(shape, lambda …: […])` in `T.annotate_layout`, `P` a parameter.
    pub fn global_layout(&mut self, buf: &str, v: &ast::Expr, span: Span) {
        let before = self.errors.len();
        let Some(layout) = self.build_global_layout(buf, v) else {
            if self.errors.len() == before {
                self.error(Diagnostic::error(
                    span,
                    format!("tlc cannot build the layout of `{buf}`"),
                ));
            }
            return;
        };
        let Some(kernel) = self.kernels.last_mut() else {
            self.error(Diagnostic::error(
                span,
                "`T.annotate_layout` belongs inside a kernel",
            ));
            return;
        };
        if kernel.touched.contains(buf) {
            self.error(
                Diagnostic::error(
                    span,
                    format!("the layout of `{buf}` is given after the kernel uses `{buf}`"),
                )
                .with_note("annotate the layout at the top of the kernel, before any use"),
            );
            return;
        }
        if let Some(prev) = kernel.global_layouts.get(buf) {
            let prev = prev.span;
            self.error(
                Diagnostic::error(span, format!("`{buf}` already has a layout in this kernel"))
                    .with_note_at(prev, "given here"),
            );
            return;
        }
        kernel.global_layouts.insert(buf.to_string(), layout);
    }

    fn build_global_layout(&mut self, buf: &str, v: &ast::Expr) -> Option<GlobalLayout> {
        let ast::ExprKind::Call(_, args) = &v.kind else {
            return None;
        };
        let a = self.bind("T.Layout", v.span, args, &["shape", "forward_fn"], 2)?;
        let (shape_e, fn_e) = (a[0]?, a[1]?);
        let shape = self.buffers.get(buf)?.shape.clone();
        let shape_ok = match &shape_e.kind {
            ast::ExprKind::Attr(base, attr) => {
                attr.name == "shape" && matches!(&base.kind, ast::ExprKind::Name(n) if n == buf)
            }
            _ => self.shape(shape_e).is_some_and(|s| s == shape),
        };
        if !shape_ok {
            return self.fail(
                Diagnostic::error(
                    shape_e.span,
                    format!("the layout of `{buf}` must be over its own shape"),
                )
                .with_note(format!("write `T.Layout({buf}.shape, lambda …: […])`")),
            );
        }
        let ast::ExprKind::Lambda(vars, body) = &fn_e.kind else {
            return self.fail(Diagnostic::error(
                fn_e.span,
                "a layout's map is a lambda over the tensor's indices: `lambda i, j: [i // 8, j, i % 8]`",
            ));
        };
        for (k, v) in vars.iter().enumerate() {
            if let Some(first) = vars[..k].iter().find(|w| w.name == v.name) {
                return self.fail(
                    Diagnostic::error(v.span, format!("the lambda names `{}` twice", v.name))
                        .with_note_at(first.span, "first here"),
                );
            }
        }
        if vars.len() != shape.len() {
            return self.fail(Diagnostic::error(
                fn_e.span,
                format!(
                    "the lambda takes {} indices; `{buf}` has {} dimensions",
                    vars.len(),
                    shape.len()
                ),
            ));
        }
        let items = match &body.kind {
            ast::ExprKind::List(items) | ast::ExprKind::Tuple(items) => items.clone(),
            _ => vec![(**body).clone()],
        };
        let names: Vec<&str> = vars.iter().map(|v| v.name.as_str()).collect();
        let mut outputs = Vec::with_capacity(items.len());
        for item in &items {
            outputs.push(self.layout_terms(item, &names)?);
        }
        // Each index's digits, with the output that holds each.
        let mut radices: Vec<Vec<(i64, Option<i64>, Span)>> = vec![Vec::new(); vars.len()];
        for digits in &outputs {
            for d in digits {
                radices[d.var].push((d.lo, d.hi, d.span));
            }
        }
        // The extent of each digit: constant, or the top digit of a symbolic extent.
        let mut top_extent: Vec<Option<Expr>> = vec![None; vars.len()];
        for (k, digits) in radices.iter_mut().enumerate() {
            digits.sort_by_key(|d| d.0);
            let var = &vars[k].name;
            for w in digits.windows(2) {
                if w[0].0 == w[1].0 {
                    return self.fail(
                        Diagnostic::error(
                            w[1].2,
                            format!(
                                "this part of `{var}` is used twice: the layout is not one-to-one"
                            ),
                        )
                        .with_note_at(w[0].2, "also used here"),
                    );
                }
            }
            let mut place = 1;
            for (lo, hi, span) in digits.iter() {
                if *lo != place {
                    let msg = if place != 0 && *lo > place {
                        let part = if place == 1 {
                            format!("{var} % {lo}")
                        } else {
                            format!("{var} // {place} % {}", lo / place)
                        };
                        format!("the layout drops `{part}`: it is not one-to-one")
                    } else {
                        format!(
                            "this part of `{var}` overlaps another: the layout is not one-to-one"
                        )
                    };
                    return self.fail(Diagnostic::error(*span, msg));
                }
                place = match hi {
                    Some(h) => *h,
                    None => 0,
                };
            }
            let extent = shape[k].clone();
            let last_span = digits.last().map_or(fn_e.span, |d| d.2);
            match (place, extent.as_int()) {
                // Ends with `v // p`: the extent must be a multiple of p.
                (0, Some(e)) => {
                    let p = digits.last().map_or(1, |d| d.0);
                    if e % p != 0 {
                        return self.fail(Diagnostic::error(
                            last_span,
                            format!("`{var}` has extent {e}, not a multiple of {p}: this layout is not one-to-one over it"),
                        ));
                    }
                    top_extent[k] = Some(Expr::int(e / p));
                }
                (0, None) => {
                    let p = digits.last().map_or(1, |d| d.0);
                    if p == 1 {
                        top_extent[k] = Some(extent.clone());
                    } else if let crate::ir::ExprKind::Var(dim) = &extent.kind {
                        self.dim_multiples.push((dim.clone(), p, last_span));
                        top_extent[k] = Some(arith(
                            BinOp::FloorDiv,
                            extent.clone(),
                            Expr::int(p),
                            last_span,
                        ));
                    } else {
                        return self.fail(Diagnostic::error(
                            last_span,
                            format!("`{var}` has extent `{extent}`, which tlc cannot prove is a multiple of {p}"),
                        )
                        .with_note("a layout may split an index whose extent is a constant or a symbolic dim"));
                    }
                }
                // Ends with a digit below a place: it must reach the extent exactly.
                (h, e) => {
                    let covers = if digits.is_empty() {
                        e == Some(1)
                    } else {
                        e == Some(h)
                    };
                    if !covers {
                        let what = if digits.is_empty() {
                            format!("the layout does not use `{var}`")
                        } else {
                            format!("the layout keeps `{var}` only below {h}")
                        };
                        return self.fail(Diagnostic::error(
                            last_span,
                            format!("{what} (extent `{extent}`): it is not one-to-one"),
                        ));
                    }
                }
            }
        }
        // Each output: a mixed-radix number of its digits.
        let mut extents = Vec::with_capacity(outputs.len());
        for (digits, item) in outputs.iter_mut().zip(&items) {
            digits.sort_by_key(|d| d.coef);
            let mut next = 1i64;
            let mut extent = Expr::int(1);
            for (i, d) in digits.iter().enumerate() {
                if d.coef != next {
                    return self.fail(Diagnostic::error(
                        item.span,
                        format!(
                            "this layout index is not a mixed-radix number of its parts: the part `{}` has factor {} where {next} is needed",
                            vars[d.var].name, d.coef
                        ),
                    )
                    .with_note("write each index as `a + A * b + A * B * c …` where `a < A`, `b < B`"));
                }
                let radix = match d.hi {
                    Some(h) => Expr::int(h / d.lo),
                    None => top_extent[d.var].clone().unwrap_or_else(|| Expr::int(1)),
                };
                let last = i + 1 == digits.len();
                match radix.as_int() {
                    Some(r) => {
                        next = next.saturating_mul(r);
                        extent = Expr::int(next);
                    }
                    None if last => {
                        extent = arith(BinOp::Mul, radix, Expr::int(next), item.span);
                    }
                    None => {
                        return self.fail(Diagnostic::error(
                            d.span,
                            format!("a part of symbolic extent (`{radix}`) must be the highest of its layout index"),
                        ));
                    }
                }
            }
            extents.push(extent);
        }
        Some(GlobalLayout {
            outputs,
            extents,
            shape,
            span: v.span,
        })
    }

    /// The digits of one layout index: a sum of digits, each times a constant.
    fn layout_terms(&mut self, e: &ast::Expr, vars: &[&str]) -> Option<Vec<Digit>> {
        if !mentions(e, vars) {
            return match self.const_int(e, "a layout index without an index variable")? {
                0 => Some(Vec::new()),
                c => self.fail(Diagnostic::error(
                    e.span,
                    format!(
                        "a layout index adds the constant {c}: the layout would not start at 0"
                    ),
                )),
            };
        }
        match &e.kind {
            ast::ExprKind::Binary(ast::BinaryOp::Add, a, b) => {
                let mut out = self.layout_terms(a, vars)?;
                out.extend(self.layout_terms(b, vars)?);
                Some(out)
            }
            ast::ExprKind::Binary(ast::BinaryOp::Mul, a, b)
                if !mentions(a, vars) || !mentions(b, vars) =>
            {
                let (c, x) = if mentions(a, vars) { (b, a) } else { (a, b) };
                let c = self.const_int(c, "a layout index's factor")?;
                if c <= 0 {
                    return self.fail(Diagnostic::error(
                        e.span,
                        format!("a layout index's factor is {c}; it must be positive"),
                    ));
                }
                let mut out = self.layout_terms(x, vars)?;
                for d in &mut out {
                    d.coef = d.coef.saturating_mul(c);
                }
                Some(out)
            }
            _ => {
                let (var, lo, hi) = self.layout_digit(e, vars)?;
                Some(vec![Digit {
                    var,
                    lo,
                    hi,
                    coef: 1,
                    span: e.span,
                }])
            }
        }
    }

    /// One digit: `v`, `x // c` or `x % c` of a digit `x`.
    fn layout_digit(&mut self, e: &ast::Expr, vars: &[&str]) -> Option<(usize, i64, Option<i64>)> {
        let form = || {
            Diagnostic::error(
                e.span,
                "a layout index is built from the lambda's indices with `// c`, `% c`, `* c` and `+` (constants c)",
            )
            .with_note("e.g. `lambda i, j: [i // 8, j, 4 * (i % 8) + j % 4]`")
        };
        match &e.kind {
            ast::ExprKind::Name(n) => match vars.iter().position(|v| v == n) {
                Some(k) => Some((k, 1, None)),
                None => self.fail(form()),
            },
            ast::ExprKind::Binary(op @ (ast::BinaryOp::FloorDiv | ast::BinaryOp::Mod), x, c)
                if !mentions(c, vars) =>
            {
                let (var, lo, hi) = self.layout_digit(x, vars)?;
                let c = self.const_int(c, "a layout index's divisor")?;
                if c <= 0 {
                    return self.fail(Diagnostic::error(
                        e.span,
                        format!("a layout index divides by {c}; it must be positive"),
                    ));
                }
                // The digit has place value `lo` and radix `hi / lo` (unbounded when `hi` is
                // None); a divisor must divide a bounded radix.
                if let Some(h) = hi {
                    if (h / lo) % c != 0 {
                        return self.fail(Diagnostic::error(
                            e.span,
                            format!("{c} does not divide {}: this part of the index cannot be split by it", h / lo),
                        ));
                    }
                }
                let Some(place) = lo.checked_mul(c).filter(|&p| p <= MAX_PLACE) else {
                    return self.fail(Diagnostic::error(
                        e.span,
                        format!("this part of the index divides by more than {MAX_PLACE}"),
                    ));
                };
                Some(match op {
                    ast::BinaryOp::FloorDiv => (var, place, hi),
                    _ => (var, lo, Some(place)),
                })
            }
            _ => self.fail(form()),
        }
    }
}

/// Whether `e` names one of `vars`.
fn mentions(e: &ast::Expr, vars: &[&str]) -> bool {
    match &e.kind {
        ast::ExprKind::Name(n) => vars.contains(&n.as_str()),
        ast::ExprKind::Binary(_, a, b)
        | ast::ExprKind::Compare(_, a, b)
        | ast::ExprKind::BoolOp(_, a, b) => mentions(a, vars) || mentions(b, vars),
        ast::ExprKind::Unary(_, a) | ast::ExprKind::Attr(a, _) => mentions(a, vars),
        ast::ExprKind::Call(f, args) => {
            mentions(f, vars) || args.iter().any(|a| mentions(&a.value, vars))
        }
        ast::ExprKind::Subscript(b, items) => {
            mentions(b, vars) || items.iter().any(|i| mentions(i, vars))
        }
        ast::ExprKind::Tuple(items) | ast::ExprKind::List(items) => {
            items.iter().any(|i| mentions(i, vars))
        }
        _ => false,
    }
}
