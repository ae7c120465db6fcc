//! Binding symbolic dimensions to constants (`-D M=4096`): every use of the dim becomes the
//! literal and integer subexpressions fold again, so a specialized kernel is the IR the user
//! would have written with the number in place.

use crate::diagnostic::Diagnostic;
use crate::ir::{Expr, ExprKind, PrimFunc};
use crate::visit::{map_body_exprs, map_expr};

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
    let mut subst = |e: Expr| match &e.kind {
        ExprKind::Var(n) => match value_of(n) {
            Some(v) => Expr::new(ExprKind::Int(v), e.span),
            None => e,
        },
        ExprKind::Binary(op, a, b) => Expr::binary(*op, (**a).clone(), (**b).clone(), e.span),
        _ => e,
    };
    out.dims.retain(|d| value_of(&d.name).is_none());
    for param in &mut out.params {
        for dim in &mut param.shape {
            *dim = map_expr(dim, &mut subst);
        }
    }
    map_body_exprs(&mut out.body, &mut subst);
    Ok(out)
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
}
