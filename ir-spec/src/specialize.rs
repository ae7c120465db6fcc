//! Binding symbolic dimensions to constants (`-D M=4096`): every use of the dim becomes the
//! literal and integer subexpressions fold again, so a specialized kernel is the IR the user
//! would have written with the number in place.

use crate::diagnostic::Diagnostic;
use crate::ir::{BinOp, Expr, ExprKind, ForKind, Kernel, PrimFunc, Stmt, StmtKind};
use crate::verifier::const_bool;
use crate::visit::{child_bodies_mut, map_body_exprs, map_expr};

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
    let value_of = |n: &str| bindings.iter().find(|(b, _)| b == n).map(|(_, v)| *v);
    let mut subst = |e: Expr| refold(e, &value_of);
    out.dims.retain(|d| value_of(&d.name).is_none());
    for param in &mut out.params {
        for dim in &mut param.shape {
            *dim = map_expr(dim, &mut subst);
        }
    }
    map_body_exprs(&mut out.body, &mut subst);
    // Binding nothing changes nothing (`tlc fmt` without `-D` prints the kernel as parsed).
    if !bindings.is_empty() {
        fold_constant_branches(&mut out.body);
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
            // A constant side decides the operator or leaves the other side (expressions
            // have no effects, so dropping one changes nothing else).
            let and = *op == BinOp::And;
            match (const_bool(a), const_bool(b)) {
                (Some(v), _) | (_, Some(v)) if v != and => Expr::new(ExprKind::Bool(v), e.span),
                (Some(_), _) => (**b).clone(),
                (_, Some(_)) => (**a).clone(),
                _ => e,
            }
        }
        ExprKind::Binary(op, a, b) => Expr::binary(*op, (**a).clone(), (**b).clone(), e.span),
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
pub fn fold_constant_branches(body: &mut Vec<Stmt>) {
    let mut out = Vec::with_capacity(body.len());
    for mut stmt in std::mem::take(body) {
        if let StmtKind::Kernel(k) = &mut stmt.kind {
            drop_unit_grid_axes(k);
        }
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
                    for s in child.iter_mut() {
                        for inner in child_bodies_mut(s) {
                            fold_constant_branches(inner);
                        }
                    }
                }
                false => fold_constant_branches(child),
            }
        }
        match stmt.kind {
            StmtKind::If {
                cond,
                then_body,
                else_body,
            } => match const_bool(&cond) {
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
}

/// Whether `body` binds a name at its top level (a let), which splicing it into the
/// enclosing body would put in scope after it.
fn binds_names(body: &[Stmt]) -> bool {
    body.iter().any(|s| matches!(s.kind, StmtKind::Let { .. }))
}

/// Drops a kernel's last grid axis while its extent is the constant 1 (`T.Kernel(nx, ny,
/// split_k)` at `split_k = 1`), its block variable becoming 0: the same blocks, and a grid
/// the schedule passes know (persistent tiles walk 1-D and 2-D grids). A rasterized kernel
/// keeps two axes (its panels are along y), a cluster its axes.
fn drop_unit_grid_axes(k: &mut Kernel) {
    let keep = if k.swizzle.is_some() { 2 } else { 1 }.max(k.cluster.len());
    while k.grid.len() > keep && k.grid.last().and_then(Expr::as_int) == Some(1) {
        k.grid.pop();
        let Some(var) = k.block_vars.pop() else {
            return;
        };
        let zero = |n: &str| (n == var.name).then_some(0);
        map_body_exprs(&mut k.body, &mut |e| refold(e, &zero));
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
            body: Vec::new(),
            span: Span::DUMMY,
            space: Default::default(),
        }
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
}
