//! `break` and `continue` in serial loops and `while` loops, written out here in the front end
//! as what they mean over a flag — so the IR, the passes and the back ends keep loops that
//! always run their whole range (docs/ir.md, "Loops").
//!
//! A loop whose body breaks or continues (at its own level: in the body or its `if`s, not in
//! an inner loop, which handles its own) gets a `T.alloc_var` flag `brk` (0 running, 1
//! continuing, 2 broken), set to 0 just before the loop. In the body, `break` is `brk = 2`
//! and `continue` is `brk = 1`, and the statements after one that may have set it run under
//! `if brk == 0:`; a body that continues first resets a `1` left by the previous iteration.
//! A serial loop runs its remaining iterations with the body skipped (`if brk == 0:` around
//! it); a `while` loop stops: its condition becomes `brk != 2 and (cond)`. This is Python's
//! meaning exactly. The flag is a scalar variable, so where the body is per-thread code the
//! flag is per thread, and where it is block-level code it is the block's (TileLang's
//! `if l_new_topk <= 0: break` on a uniform value).

use crate::span::Span;
use crate::syntax::ast::{self, BoolOp, CmpOp};
use crate::syntax::lower::Lowerer;

/// Which jumps a statement list holds at its loop's level.
#[derive(Clone, Copy, Default)]
struct Jumps {
    brk: bool,
    cont: bool,
}

fn jump_of(s: &ast::Stmt) -> Option<&str> {
    match &s.kind {
        ast::StmtKind::Expr(e) => match &e.kind {
            ast::ExprKind::Name(n) if n == "break" || n == "continue" => Some(n.as_str()),
            _ => None,
        },
        _ => None,
    }
}

fn jumps(stmts: &[ast::Stmt]) -> Jumps {
    let mut j = Jumps::default();
    for s in stmts {
        match jump_of(s) {
            Some("break") => j.brk = true,
            Some(_) => j.cont = true,
            None => {}
        }
        let inner = match &s.kind {
            ast::StmtKind::If {
                branches,
                else_body,
            } => branches
                .iter()
                .map(|(_, b)| jumps(b))
                .chain(else_body.iter().map(|b| jumps(b)))
                .fold(Jumps::default(), |a, b| Jumps {
                    brk: a.brk || b.brk,
                    cont: a.cont || b.cont,
                }),
            ast::StmtKind::With { body, .. } => jumps(body),
            _ => Jumps::default(),
        };
        j.brk |= inner.brk;
        j.cont |= inner.cont;
    }
    j
}

fn iter_callee(iter: &ast::Expr) -> Option<String> {
    match &iter.kind {
        ast::ExprKind::Call(f, _) => f.dotted(),
        _ => None,
    }
}

fn name(n: &str, span: Span) -> ast::Expr {
    ast::Expr::new(ast::ExprKind::Name(n.to_string()), span)
}

fn int(v: i128, span: Span) -> ast::Expr {
    ast::Expr::new(ast::ExprKind::Int(v), span)
}

fn assign(flag: &str, v: i128, span: Span) -> ast::Stmt {
    ast::Stmt {
        kind: ast::StmtKind::Assign {
            target: name(flag, span),
            value: int(v, span),
        },
        span,
    }
}

fn cmp(flag: &str, op: CmpOp, v: i128, span: Span) -> ast::Expr {
    ast::Expr::new(
        ast::ExprKind::Compare(op, Box::new(name(flag, span)), Box::new(int(v, span))),
        span,
    )
}

fn if_then(cond: ast::Expr, body: Vec<ast::Stmt>, span: Span) -> ast::Stmt {
    ast::Stmt {
        kind: ast::StmtKind::If {
            branches: vec![(cond, body)],
            else_body: None,
        },
        span,
    }
}

/// `stmts` with the jumps turned into flag writes and what follows a possible jump guarded.
fn guard(stmts: &[ast::Stmt], flag: &str) -> Vec<ast::Stmt> {
    let mut out = Vec::new();
    for (i, s) in stmts.iter().enumerate() {
        match jump_of(s) {
            Some("break") => {
                out.push(assign(flag, 2, s.span));
                return out;
            }
            Some(_) => {
                out.push(assign(flag, 1, s.span));
                return out;
            }
            None => {}
        }
        let j = jumps(std::slice::from_ref(s));
        if !(j.brk || j.cont) {
            out.push(s.clone());
            continue;
        }
        let kind = match &s.kind {
            ast::StmtKind::If {
                branches,
                else_body,
            } => ast::StmtKind::If {
                branches: branches
                    .iter()
                    .map(|(c, b)| (c.clone(), guard(b, flag)))
                    .collect(),
                else_body: else_body.as_ref().map(|b| guard(b, flag)),
            },
            ast::StmtKind::With { item, target, body } => ast::StmtKind::With {
                item: item.clone(),
                target: target.clone(),
                body: guard(body, flag),
            },
            other => other.clone(),
        };
        out.push(ast::Stmt { kind, span: s.span });
        let rest = &stmts[i + 1..];
        if !rest.is_empty() {
            let span = rest[0].span;
            out.push(if_then(
                cmp(flag, CmpOp::Eq, 0, span),
                guard(rest, flag),
                span,
            ));
        }
        return out;
    }
    out
}

impl Lowerer {
    /// The statements a loop `s` (a `for` or a `while`) stands for when its body breaks or
    /// continues: the flag, its reset and the rewritten loop; `None` when it does neither.
    pub fn loop_with_jumps(&mut self, s: &ast::Stmt) -> Option<Vec<ast::Stmt>> {
        let body = match &s.kind {
            // Loops over the block's threads or elements have no order to stop in.
            ast::StmtKind::For { iter, .. }
                if matches!(
                    iter_callee(iter).as_deref(),
                    Some(
                        "T.Parallel"
                            | "T.thread_binding"
                            | "T.vectorized"
                            | "T.Persistent"
                            | "T.grid"
                    )
                ) =>
            {
                return None
            }
            ast::StmtKind::For { body, .. } | ast::StmtKind::While { body, .. } => body,
            _ => return None,
        };
        let j = jumps(body);
        if !(j.brk || j.cont) {
            return None;
        }
        let span = s.span;
        let flag = self.generated_name("brk");
        // Each loop its own flag: a later loop's `brk` is another name (uniquify would
        // otherwise see one variable declared twice).
        self.source_names.insert(flag.clone());
        let mut new_body = Vec::new();
        if j.cont {
            new_body.push(if_then(
                cmp(&flag, CmpOp::Eq, 1, span),
                vec![assign(&flag, 0, span)],
                span,
            ));
        }
        new_body.push(if_then(
            cmp(&flag, CmpOp::Eq, 0, span),
            guard(body, &flag),
            span,
        ));
        let kind = match &s.kind {
            ast::StmtKind::For { targets, iter, .. } => ast::StmtKind::For {
                targets: targets.clone(),
                iter: iter.clone(),
                body: new_body,
            },
            ast::StmtKind::While { cond, .. } => {
                let mut cond = cond.clone();
                cond.parens = true;
                ast::StmtKind::While {
                    cond: ast::Expr::new(
                        ast::ExprKind::BoolOp(
                            BoolOp::And,
                            Box::new(cmp(&flag, CmpOp::Ne, 2, span)),
                            Box::new(cond),
                        ),
                        span,
                    ),
                    body: new_body,
                }
            }
            _ => return None,
        };
        let alloc = ast::Stmt {
            kind: ast::StmtKind::Assign {
                target: name(&flag, span),
                value: ast::Expr::new(
                    ast::ExprKind::Call(
                        Box::new(ast::Expr::new(
                            ast::ExprKind::Attr(
                                Box::new(name("T", span)),
                                ast::Ident {
                                    name: "alloc_var".into(),
                                    span,
                                },
                            ),
                            span,
                        )),
                        vec![ast::Arg {
                            name: None,
                            value: ast::Expr::new(ast::ExprKind::Str("int32".into()), span),
                        }],
                    ),
                    span,
                ),
            },
            span,
        };
        Some(vec![
            alloc,
            assign(&flag, 0, span),
            ast::Stmt { kind, span },
        ])
    }
}
