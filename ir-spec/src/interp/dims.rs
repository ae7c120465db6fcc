//! Resolving the symbolic dimensions of a run and checking the given inputs against the
//! parameter declarations.
//!
//! A dim's value comes from `dims` (the CLI's `-D NAME=VALUE`) or, failing that, from the
//! first given input (in parameter order) whose declared shape has the bare dim (else a form
//! it solves from, `d + 1`, `d * 4`: `ir::solvable_extent`) at some
//! position. Then every declared shape is evaluated and each given input must match it
//! exactly (dtype and shape); any disagreement is an error naming both sides.

use crate::diagnostic::Diagnostic;
use crate::interp::tensor::{fmt_shape, Tensor};
use crate::ir::{fold_int, Expr, ExprKind, PrimFunc};
use std::collections::HashMap;

/// Dim values (in `PrimFunc::dims` order) and parameter shapes (in `params` order).
pub(crate) struct Resolved {
    pub dims: Vec<i64>,
    pub shapes: Vec<Vec<usize>>,
}

pub(crate) fn resolve(
    func: &PrimFunc,
    given: &HashMap<String, i64>,
    inputs: &HashMap<String, Tensor>,
) -> Result<Resolved, Diagnostic> {
    let dim_names: Vec<&str> = func.dims.iter().map(|d| d.name.as_str()).collect();
    let mut names: Vec<&String> = given.keys().collect();
    names.sort();
    for name in names {
        if !dim_names.contains(&name.as_str()) {
            return Err(Diagnostic::error(
                func.name.span,
                format!(
                    "`{name}` is not a symbolic dimension of `{}` ({})",
                    func.name.name,
                    list_or_none(&dim_names)
                ),
            ));
        }
    }
    let mut names: Vec<&String> = inputs.keys().collect();
    names.sort();
    for name in names {
        if !func.params.iter().any(|p| &p.name.name == name) {
            let params: Vec<&str> = func.params.iter().map(|p| p.name.name.as_str()).collect();
            return Err(Diagnostic::error(
                func.name.span,
                format!(
                    "`{name}` is not a parameter of `{}` ({})",
                    func.name.name,
                    list_or_none(&params)
                ),
            ));
        }
    }
    // Each dim: its value and where it came from (for messages).
    let mut known: Vec<Option<(i64, String)>> = dim_names
        .iter()
        .map(|n| given.get(*n).map(|&v| (v, "as given".to_string())))
        .collect();
    for param in &func.params {
        let Some(input) = inputs.get(&param.name.name) else {
            continue;
        };
        if input.dtype() != param.dtype || input.shape().len() != param.shape.len() {
            return Err(Diagnostic::error(
                param.span,
                format!(
                    "input `{}` is {}, but the parameter is declared as {} with {} dimension(s)",
                    param.name.name,
                    input.describe(),
                    param.dtype,
                    param.shape.len()
                ),
            ));
        }
        for (e, &n) in param.shape.iter().zip(input.shape()) {
            if let ExprKind::Var(v) = &e.kind {
                if let Some(i) = dim_names.iter().position(|d| d == v) {
                    if known[i].is_none() {
                        let from = format!("from the shape of input `{}`", param.name.name);
                        known[i] = Some((n as i64, from));
                    }
                }
            }
        }
    }
    // Then dims still unknown from extents a launch solves (`batch + 1`, `d * 4`).
    for param in &func.params {
        let Some(input) = inputs.get(&param.name.name) else {
            continue;
        };
        for (e, &n) in param.shape.iter().zip(input.shape()) {
            let Some((v, factor, offset)) = crate::ir::solvable_extent(e) else {
                continue;
            };
            let Some(i) = dim_names.iter().position(|d| *d == v) else {
                continue;
            };
            if known[i].is_some() {
                continue;
            }
            match crate::ir::solve_extent(factor, offset, n as i64) {
                Ok(value) => {
                    let from = format!("from the shape of input `{}` ({e})", param.name.name);
                    known[i] = Some((value, from));
                }
                Err(why) => {
                    return Err(Diagnostic::error(
                        param.span,
                        format!(
                            "input `{}` has extent {n} where the parameter declares `{e}`: {why}",
                            param.name.name
                        ),
                    ))
                }
            }
        }
    }
    // Inputs whose declared shapes are already known must match them: a conflict is a more
    // useful message than a dim that is still missing.
    let partial: HashMap<&str, i64> = dim_names
        .iter()
        .zip(&known)
        .filter_map(|(n, k)| k.as_ref().map(|(v, _)| (*n, *v)))
        .collect();
    for param in &func.params {
        let Some(input) = inputs.get(&param.name.name) else {
            continue;
        };
        let declared: Option<Vec<i64>> = param
            .shape
            .iter()
            .map(|e| eval_shape(e, &partial))
            .collect();
        let Some(declared) = declared else {
            continue;
        };
        if declared
            .iter()
            .zip(input.shape())
            .any(|(&d, &n)| d != n as i64)
        {
            let used: Vec<String> = dim_names
                .iter()
                .zip(&known)
                .filter_map(|(n, k)| k.as_ref().map(|(v, from)| format!("{n} = {v} {from}")))
                .collect();
            let note = if used.is_empty() {
                String::new()
            } else {
                format!(" ({})", used.join(", "))
            };
            return Err(Diagnostic::error(
                param.span,
                format!(
                    "input `{}` has shape {}, expected {}{note}",
                    param.name.name,
                    fmt_shape(input.shape()),
                    fmt_shape(&declared)
                ),
            ));
        }
    }
    let mut dims = Vec::with_capacity(known.len());
    for (i, k) in known.iter().enumerate() {
        let Some((v, from)) = k else {
            let name = &dim_names[i];
            let message = if func.dims[i].param.is_some() {
                format!("the scalar parameter `{name}` needs a value: give it (`-D {name}=VALUE`)")
            } else {
                format!(
                    "the value of dimension `{name}` is not known: give it (`-D {name}=VALUE`) or give an input whose shape uses it"
                )
            };
            return Err(Diagnostic::error(func.dims[i].span, message));
        };
        let dim = &func.dims[i];
        if let Some(why) = crate::ir::dim_range_error(&dim.name, dim.dtype, dim.multiple_of, *v) {
            return Err(Diagnostic::error(
                dim.span,
                format!("dimension `{}` = {v} ({from}) is {why}", dim.name),
            ));
        }
        dims.push(*v);
    }
    let env: HashMap<&str, i64> = dim_names
        .iter()
        .copied()
        .zip(dims.iter().copied())
        .collect();
    let mut shapes = Vec::with_capacity(func.params.len());
    for param in &func.params {
        let mut shape = Vec::with_capacity(param.shape.len());
        for e in &param.shape {
            let n = eval_shape(e, &env)
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| {
                    Diagnostic::error(
                        e.span,
                        format!(
                            "the shape of `{}` does not evaluate to a non-negative size",
                            param.name.name
                        ),
                    )
                })?;
            shape.push(n);
        }
        crate::interp::tensor::checked_len(&shape).ok_or_else(|| {
            Diagnostic::error(
                param.span,
                format!("`{}` is too large to interpret", param.name.name),
            )
        })?;
        shapes.push(shape);
    }
    Ok(Resolved { dims, shapes })
}

/// Integer value of a shape expression over the dims.
fn eval_shape(e: &Expr, env: &HashMap<&str, i64>) -> Option<i64> {
    match &e.kind {
        ExprKind::Int(v) => Some(*v),
        ExprKind::Var(name) => env.get(name.as_str()).copied(),
        ExprKind::Binary(op, a, b) => fold_int(*op, eval_shape(a, env)?, eval_shape(b, env)?),
        _ => None,
    }
}

fn list_or_none(names: &[&str]) -> String {
    if names.is_empty() {
        "it has none".to_string()
    } else {
        format!("it has {}", names.join(", "))
    }
}
