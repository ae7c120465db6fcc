//! Binding symbolic dimensions to constants (`-D M=4096`): every use of the dim becomes the
//! literal and integer subexpressions fold again, so a specialized kernel is the IR the user
//! would have written with the number in place.

use crate::diagnostic::Diagnostic;
use crate::ir::{
    compare_int, fold_int, BinOp, Expr, ExprKind, ForKind, Kernel, PrimFunc, Stmt, StmtKind, UnOp,
};
use crate::substitute::{substitute, Scope};
use crate::visit::{child_bodies_mut, map_expr};

/// Replaces each `(name, value)` dim of `func` with `value`. A name that is not a symbolic
/// dimension of the function is an error (a typo in `-D` should not pass silently).
pub fn specialize(func: &PrimFunc, bindings: &[(String, i64)]) -> Result<PrimFunc, Diagnostic> {
    let mut out = func.clone();
    for (name, _) in bindings {
        if !func.dims.iter().any(|d| &d.name == name) {
            let known: Vec<&str> = func.dims.iter().map(|d| d.name.as_str()).collect();
            let note = if known.is_empty() {
                "the kernel declares no symbolic dimensions".to_string()
            } else {
                format!("symbolic dimensions: {}", known.join(", "))
            };
            return Err(Diagnostic::error(
                func.name.span,
                format!(
                    "`-D {name}=…` names no symbolic dimension of `{}`",
                    func.name.name
                ),
            )
            .with_note(note));
        }
    }
    // Binding nothing changes nothing (`tlc fmt` without `-D` prints the kernel as parsed).
    if bindings.is_empty() {
        return Ok(out);
    }
    let value_of = |n: &str| bindings.iter().find(|(b, _)| b == n).map(|(_, v)| *v);
    for dim in &func.dims {
        if let Some(v) = value_of(&dim.name) {
            if dim.multiple_of > 1 && v % dim.multiple_of != 0 {
                return Err(Diagnostic::error(
                    dim.span,
                    format!(
                        "`-D {}={v}`: {}",
                        dim.name,
                        crate::ir::dim_range_error(&dim.name, dim.dtype, dim.multiple_of, v)
                            .unwrap_or_default()
                    ),
                ));
            }
        }
    }
    out.dims.retain(|d| value_of(&d.name).is_none());
    out.renumber_scalar_params();
    // A parameter's shape is a size: its type never matters.
    for param in &mut out.params {
        for dim in &mut param.shape {
            *dim = map_expr(dim, &mut |e| refold(e, &value_of));
        }
    }
    // The body's uses take literals where they mean the same (`substitute.rs`).
    substitute(&mut out.body, bindings, &mut Scope::of(func));
    fold_constant_branches(&mut out);
    Ok(out)
}

/// `func` with each `(name, m)` dim promising to be a multiple of `m` as well (its
/// `multiple_of` becomes the least common multiple): what `T.symbolic(name,
/// multiple_of=m)` would have declared, checked wherever the dim gets its value. A compile
/// for sizes known to be aligned (the Python layer's per-alignment variants) proves rows
/// 16-byte aligned with it. A name that is not a symbolic dim, or one that is a scalar
/// parameter, is an error.
pub fn declare_multiples(
    func: &PrimFunc,
    multiples: &[(String, i64)],
) -> Result<PrimFunc, Diagnostic> {
    let mut out = func.clone();
    for (name, m) in multiples {
        let Some(dim) = out
            .dims
            .iter_mut()
            .find(|d| &d.name == name && d.param.is_none())
        else {
            return Err(Diagnostic::error(
                func.name.span,
                format!(
                    "`{name}` is not a symbolic dimension of `{}` read off a tensor's shape: only those can be declared multiples",
                    func.name.name
                ),
            ));
        };
        if !(1..=crate::ir::MAX_MULTIPLE).contains(m) {
            return Err(Diagnostic::error(
                dim.span,
                format!(
                    "a multiple of {m} for `{name}`: it must lie in 1..={}",
                    crate::ir::MAX_MULTIPLE
                ),
            ));
        }
        if let Err(lcm) = dim.require_multiple(*m) {
            return Err(Diagnostic::error(
                dim.span,
                format!(
                    "`{name}` would have to be a multiple of {lcm}, more than the {} a dim may declare",
                    crate::ir::MAX_MULTIPLE
                ),
            ));
        }
    }
    Ok(out)
}

/// `e` (whose operands were already rewritten) with a variable `value_of` knows replaced by
/// its value, integer arithmetic on literals folded, and an `and` / `or` with a constant
/// side reduced (both sides are bool, rule T7).
pub fn refold(e: Expr, value_of: &dyn Fn(&str) -> Option<i64>) -> Expr {
    match &e.kind {
        ExprKind::Var(n) => match value_of(n) {
            Some(v) => Expr::new(ExprKind::Int(v), e.span),
            None => e,
        },
        ExprKind::Binary(op @ (BinOp::And | BinOp::Or), a, b) => {
            // `and` / `or` evaluate their left side first and stop when it decides: a
            // constant left side decides or leaves the right one; a constant right side
            // that does not decide leaves the left one. (`X and False` keeps X: evaluating
            // it may fault.)
            let and = *op == BinOp::And;
            match (constant_condition(a), constant_condition(b)) {
                (Some(v), _) if v != and => Expr::new(ExprKind::Bool(v), e.span),
                (Some(_), _) => (**b).clone(),
                (_, Some(v)) if v == and => (**a).clone(),
                _ => e,
            }
        }
        ExprKind::Binary(..) => match e.kind {
            // By value: the rebuilt operands move (no clone at every level).
            ExprKind::Binary(op, a, b) => Expr::binary(op, *a, *b, e.span),
            kind => Expr::new(kind, e.span),
        },
        // A negated literal is the literal the parser reads for `-4` (printed text parses
        // back to the same IR).
        ExprKind::Unary(UnOp::Neg, a) => match a.as_int().and_then(i64::checked_neg) {
            Some(v) => Expr::new(ExprKind::Int(v), e.span),
            None => e,
        },
        // A `T.if_then_else` is not folded: its type is its sides' common type, which the
        // chosen side alone (a weak literal) may not have.
        _ => e,
    }
}

/// Folds what binding dims and tunables made constant, in place: an `if` whose condition
/// is a constant becomes the statements of its taken side (`if split_k == 1:` at
/// `split_k = 1`), and a kernel's last grid axis of extent 1 goes (`drop_unit_grid_axes`).
/// The choice is made at compile time, so no pass lowers, and no kernel carries, the side
/// that never runs, and the schedule passes see the kernel as if written with the numbers
/// in place. What folding must not change is kept: a side that binds a name at its top
/// level (a let, whose scope would widen to the enclosing body) stays an `if`, and so does
/// every `if` directly in a `T.Pipelined` body with `order=` / `stage=` lists (they are
/// positional: one entry per statement of the body). Lets are not replaced by their
/// values: a let is strongly typed and a literal is not (`x = 100; A[i] + x` adds in int32
/// where `A[i] + 100` adds in A's dtype).
pub fn fold_constant_branches(func: &mut PrimFunc) {
    let mut scope = Scope::of(func);
    fold_body(&mut func.body, &mut scope);
}

/// [`fold_constant_branches`] on one body, which starts in `scope`.
fn fold_body(body: &mut Vec<Stmt>, scope: &mut Scope) {
    let mark = scope.mark();
    let mut out = Vec::with_capacity(body.len());
    for mut stmt in std::mem::take(body) {
        if let StmtKind::Kernel(k) = &mut stmt.kind {
            drop_unit_grid_axes(k, scope);
        }
        scope.enter(&stmt);
        let positional = matches!(
            &stmt.kind,
            StmtKind::For(f) if matches!(
                &f.kind,
                ForKind::Pipelined { order, stage, .. } if !order.is_empty() || !stage.is_empty()
            )
        );
        for child in child_bodies_mut(&mut stmt) {
            match positional {
                // Its own statements stay as they are; deeper bodies fold.
                true => {
                    let inner_mark = scope.mark();
                    for s in child.iter_mut() {
                        scope.enter(s);
                        for inner in child_bodies_mut(s) {
                            fold_body(inner, scope);
                        }
                    }
                    scope.restore(inner_mark);
                }
                false => fold_body(child, scope),
            }
        }
        match stmt.kind {
            StmtKind::If {
                cond,
                then_body,
                else_body,
            } => match constant_condition(&cond) {
                Some(true) if !binds_names(&then_body) => out.extend(then_body),
                Some(false) if !binds_names(&else_body) => out.extend(else_body),
                _ => out.push(Stmt {
                    kind: StmtKind::If {
                        cond,
                        then_body,
                        else_body,
                    },
                    ..stmt
                }),
            },
            _ => out.push(stmt),
        }
    }
    *body = out;
    scope.restore(mark);
}

/// Whether `body` binds a name at its top level (a let), which splicing it into the
/// enclosing body would put in scope after it.
fn binds_names(body: &[Stmt]) -> bool {
    body.iter().any(|s| matches!(s.kind, StmtKind::Let { .. }))
}

/// Drops a kernel's last grid axis while its extent is the constant 1 (`T.Kernel(nx, ny,
/// split_k)` at `split_k = 1`), its block variable becoming 0: the same blocks, and a grid
/// the schedule passes know (persistent tiles walk 1-D and 2-D grids). A rasterized kernel
/// keeps two axes (its panels are along y), a clustered one its cluster's. The block
/// variable is replaced as a bound dim is (`substitute.rs`): by the literal 0 where that
/// types alike, else by `T.cast(0, "int32")`.
fn drop_unit_grid_axes(k: &mut Kernel, scope: &Scope) {
    let keep = if k.swizzle.is_some() { 2 } else { 1 }.max(k.cluster.len());
    while k.grid.len() > keep && k.grid.last().and_then(Expr::as_int) == Some(1) {
        let Some(var) = k.block_vars.last().map(|v| v.name.clone()) else {
            return;
        };
        let mut inside = scope.clone();
        inside.enter_kernel(k);
        substitute(&mut k.body, &[(var, 0)], &mut inside);
        k.grid.pop();
        k.block_vars.pop();
    }
}

/// The value of a condition on untyped integer literals alone: comparisons of literals (and
/// of their folded arithmetic), `and`, `or`, `not`, boolean literals. Not the verifier's
/// `const_bool`, which sees through casts: `T.int8(100) < 200` compares in int8 (200 wraps)
/// in the interpreter, so a typed literal is left to it. `None` for anything else.
fn constant_condition(e: &Expr) -> Option<bool> {
    let int = |e: &Expr| -> Option<i64> {
        match &e.kind {
            ExprKind::Int(v) => Some(*v),
            ExprKind::Binary(op, a, b) => fold_int(*op, a.as_int()?, b.as_int()?),
            _ => None,
        }
    };
    match &e.kind {
        ExprKind::Bool(b) => Some(*b),
        ExprKind::Unary(UnOp::Not, a) => constant_condition(a).map(|v| !v),
        ExprKind::Binary(op, a, b) => match op {
            BinOp::And => match (constant_condition(a), constant_condition(b)) {
                (Some(false), _) | (_, Some(false)) => Some(false),
                (Some(true), Some(true)) => Some(true),
                _ => None,
            },
            BinOp::Or => match (constant_condition(a), constant_condition(b)) {
                (Some(true), _) | (_, Some(true)) => Some(true),
                (Some(false), Some(false)) => Some(false),
                _ => None,
            },
            _ => compare_int(*op, int(a)?, int(b)?),
        },
        _ => None,
    }
}

/// Parses one `NAME=VALUE` definition from the command line.
pub fn parse_define(text: &str) -> Result<(String, i64), String> {
    let (name, value) = text
        .split_once('=')
        .ok_or_else(|| format!("`-D {text}`: expected NAME=VALUE"))?;
    let value: i64 = value
        .trim()
        .parse()
        .map_err(|_| format!("`-D {text}`: `{value}` is not an integer"))?;
    Ok((name.trim().to_string(), value))
}

/// Parses `NAME=VALUE` definitions (`-D` flags, in order). A name given twice with
/// different values is an error naming both: which one the user meant cannot be guessed,
/// and taking either silently would compile a kernel for a size nobody asked for. The same
/// value twice is harmless and kept once.
pub fn parse_defines(texts: &[String]) -> Result<Vec<(String, i64)>, String> {
    let mut out: Vec<(String, i64)> = Vec::with_capacity(texts.len());
    for text in texts {
        let (name, value) = parse_define(text)?;
        match out.iter().find(|(n, _)| *n == name) {
            Some((_, first)) if *first != value => {
                return Err(format!(
                "`-D {name}={value}` conflicts with `-D {name}={first}`: `{name}` is bound twice"
            ))
            }
            Some(_) => {}
            None => out.push((name, value)),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::ir::{BinOp, BufferDecl, Ident, Scope};
    use crate::span::Span;

    fn func_with_dim() -> PrimFunc {
        let shape = vec![Expr::binary(
            BinOp::Mul,
            Expr::var("M"),
            Expr::int(2),
            Span::DUMMY,
        )];
        PrimFunc {
            name: Ident::new("f", Span::DUMMY),
            dims: vec![crate::Dim::int32("M", Span::DUMMY)],
            params: vec![BufferDecl {
                name: Ident::new("A", Span::DUMMY),
                dtype: DType::Float32,
                shape,
                scope: Scope::Global,
                span: Span::DUMMY,
            }],
            scratch: Vec::new(),
            body: Vec::new(),
            span: Span::DUMMY,
            space: Default::default(),
        }
    }

    #[test]
    fn declared_multiples_join_the_dims_own() {
        let mut f = func_with_dim();
        f.dims[0].multiple_of = 4;
        let out = declare_multiples(&f, &[("M".to_string(), 6)]).unwrap();
        assert_eq!(out.dims[0].multiple_of, 12);
        // The dim then refuses a value that is not a multiple at -D.
        assert!(specialize(&out, &[("M".to_string(), 18)]).is_err());
        assert!(specialize(&out, &[("M".to_string(), 24)]).is_ok());
        let unknown = declare_multiples(&f, &[("Q".to_string(), 8)]).unwrap_err();
        assert!(unknown.message.contains("`Q` is not a symbolic dimension"));
        let big = declare_multiples(&f, &[("M".to_string(), 1 << 20), ("M".to_string(), 3)]);
        assert!(big.unwrap_err().message.contains("more than the 1048576"));
        assert!(declare_multiples(&f, &[("M".to_string(), 0)]).is_err());
    }

    #[test]
    fn binds_and_folds() {
        let f = specialize(&func_with_dim(), &[("M".into(), 64)]).unwrap();
        assert!(f.dims.is_empty());
        assert_eq!(f.params[0].shape[0], Expr::int(128));
    }

    #[test]
    fn unknown_name_is_an_error() {
        let err = specialize(&func_with_dim(), &[("N".into(), 1)]).unwrap_err();
        assert!(err.message.contains("`-D N=…`"), "{}", err.message);
        assert!(parse_define("M").is_err());
        assert!(parse_define("M=x").is_err());
        assert_eq!(parse_define("M=12").unwrap(), ("M".to_string(), 12));
    }

    #[test]
    fn conflicting_defines_are_an_error() {
        let texts = |t: &[&str]| t.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let err = parse_defines(&texts(&["M=64", "N=8", "M=128"])).unwrap_err();
        assert_eq!(
            err,
            "`-D M=128` conflicts with `-D M=64`: `M` is bound twice"
        );
        assert_eq!(
            parse_defines(&texts(&["M=64", "M=64", "N=8"])).unwrap(),
            vec![("M".to_string(), 64), ("N".to_string(), 8)]
        );
    }

    /// `text` with `bindings` bound (tunables through `tuning::bind`, dims through
    /// `specialize`), printed.
    fn bound(text: &str, tunables: &[(&str, i64)], dims: &[(&str, i64)]) -> String {
        let own = |b: &[(&str, i64)]| b.iter().map(|(n, v)| (n.to_string(), *v)).collect();
        let f = crate::parse(text).unwrap_or_else(|d| panic!("{d:?}"));
        let f = crate::tuning::bind(&f, &own(tunables), &own(dims)).expect("bind");
        crate::printer::print_func(&specialize(&f, &own(dims)).expect("specialize"))
    }

    const SLICED: &str = r#"M = T.symbolic("M")
K = T.symbolic("K")
split_k = T.tunable([1, 2], default=1)

@T.prim_func
def f(A: T.Tensor((M, K), "float32"), C: T.Tensor((M,), "float32")):
    with T.Kernel(M * T.min(split_k - 1, 1), threads=32) as bx:
        C[bx] = T.float32(0)
    with T.Kernel(M, split_k, threads=32) as (bx, bz):
        for k in T.serial(T.min(T.ceildiv(K, split_k), K - bz * T.ceildiv(K, split_k))):
            if split_k == 1 and bx >= 0:
                C[bx] = A[bx, bz * T.ceildiv(K, split_k) + k]
            elif split_k == 1:
                C[bx] = T.if_then_else(split_k == 1, 1, A[bx, k])
            else:
                T.atomic_add(C[bx], A[bx, bz * T.ceildiv(K, split_k) + k])
"#;

    #[test]
    fn binding_folds_what_became_constant() {
        // One slice: the zeroing kernel's grid is empty, the slice axis goes (bz = 0), and
        // only the taken side of each decided `if` stays; the side whose condition reads
        // `bx` stays an `if`, and a `T.if_then_else` keeps its sides (its type is theirs).
        let one = bound(SLICED, &[("split_k", 1)], &[("K", 64), ("M", 8)]);
        assert!(one.contains("with T.Kernel(0, threads=32) as bx:"), "{one}");
        assert!(
            one.contains("with T.Kernel(8, threads=32) as bx_1:"),
            "{one}"
        );
        assert!(!one.contains("bz"), "{one}");
        assert!(one.contains("for k in T.serial(64):"), "{one}");
        assert!(one.contains("if bx_1 >= 0:"), "{one}");
        assert!(
            one.contains("T.if_then_else(1 == 1, 1, A[bx_1, k])"),
            "{one}"
        );
        assert!(!one.contains("atomic_add"), "{one}");
        // Two slices: everything that still depends on the slice stays.
        let two = bound(SLICED, &[("split_k", 2)], &[("K", 64), ("M", 8)]);
        assert!(two.contains("with T.Kernel(8, threads=32) as bx:"), "{two}");
        assert!(
            two.contains("with T.Kernel(8, 2, threads=32) as (bx_1, bz):"),
            "{two}"
        );
        assert!(
            two.contains("T.atomic_add") && !two.contains("if 2 == 1"),
            "{two}"
        );
        // The folded IR parses back to itself and verifies.
        let f = crate::parse(&one).unwrap_or_else(|d| panic!("{d:?}\n{one}"));
        assert_eq!(crate::printer::print_func(&f), one);
        crate::verifier::verify(&f).unwrap_or_else(|d| panic!("{d:?}\n{one}"));
    }

    /// What folding must not change: a let keeps its value's type (it is not replaced by a
    /// weak literal), a decided side that binds a let stays an `if` (its scope would widen),
    /// and the statements of a pipelined body with `order=` / `stage=` stay as many.
    #[test]
    fn binding_keeps_lets_scopes_and_positional_bodies() {
        let text = r#"S = T.tunable([2], default=2)

@T.prim_func
def f(A: T.Tensor((64,), "int8"), C: T.Tensor((64,), "int8")):
    with T.Kernel(1, threads=64) as bx:
        x = 100
        for i in T.Parallel(64):
            C[i] = A[i] + x
        if S == 2:
            y = 3
            C[0] = A[0] + y
        for k in T.Pipelined(2, num_stages=S, order=[0, 1], stage=[0, 1]):
            if S == 2:
                C[k] = A[k]
            C[k + 1] = A[k]
"#;
        let out = bound(text, &[], &[]);
        assert!(out.contains("x = 100") && out.contains("A[i] + x"), "{out}");
        assert!(out.contains("if 2 == 2:\n            y = 3"), "{out}");
        assert!(
            out.contains("            if 2 == 2:\n                C[k] = A[k]"),
            "{out}"
        );
    }

    #[test]
    fn unit_grid_axes_go_but_a_rasterized_kernel_keeps_two() {
        let text = |swizzle: &str| {
            format!(
                r#"@T.prim_func
def f(C: T.Tensor((64,), "float32")):
    with T.Kernel(2, 1, 1, threads=32) as (bx, by, bz):
{swizzle}        C[bx * 32 + by + bz] = T.float32(1)
"#
            )
        };
        let plain = bound(&text(""), &[], &[]);
        assert!(
            plain.contains("with T.Kernel(2, threads=32) as bx:"),
            "{plain}"
        );
        assert!(plain.contains("C[bx * 32 + 0 + 0]"), "{plain}");
        let panels = bound(&text("        T.use_swizzle(panel_size=2)\n"), &[], &[]);
        assert!(
            panels.contains("with T.Kernel(2, 1, threads=32) as (bx, by):"),
            "{panels}"
        );
        assert!(panels.contains("C[bx * 32 + by + 0]"), "{panels}");
    }

    /// A unit axis goes; its block variable becomes the untyped literal 0 where that types
    /// alike, and the typed `T.cast(0, "int32")` where it would not: next to an int8 load
    /// (`bz - A[i]` computes in int32, `0 - A[i]` would in int8), in a comparison with one,
    /// under a bitwise operator beside it, or as a side of a `T.if_then_else` with one.
    #[test]
    fn a_unit_axis_goes_and_its_zero_keeps_the_type_where_it_matters() {
        let text = |body: &str| {
            format!(
                r#"@T.prim_func
def f(A: T.Tensor((4,), "int8"), C: T.Tensor((4,), "int32")):
    with T.Kernel(1, 1, threads=4) as (bx, bz):
        for i in T.Parallel(4):
            {body}
"#
            )
        };
        for body in [
            "C[i] = bz - A[i]",
            "C[i] = T.cast(A[i] < bz + 200, \"int32\")",
            "C[i] = (bz | 3) + A[i]",
            "C[i] = T.if_then_else(i < 2, bz + 200, A[i])",
        ] {
            let out = bound(&text(body), &[], &[]);
            assert!(
                out.contains("with T.Kernel(1, threads=4) as bx:")
                    && out.contains("T.cast(0, \"int32\")"),
                "{body}: {out}"
            );
        }
        // As an index, in int32 arithmetic, or stored: the literal.
        for body in [
            "C[bz * 4 + i] = T.cast(A[i + bz], \"int32\")",
            "C[i] = bz * 4 + i",
        ] {
            let out = bound(&text(body), &[], &[]);
            assert!(
                out.contains("with T.Kernel(1, threads=4) as bx:") && !out.contains("T.cast(0"),
                "{body}: {out}"
            );
        }
    }
}
