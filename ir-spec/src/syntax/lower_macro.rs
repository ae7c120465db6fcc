//! `@T.macro` functions: TileLang's statement macros (TVMScript's `T.macro`), expanded in
//! the front end where they are called, so that no later stage knows they existed.
//!
//! A macro is a `def` decorated `@T.macro` (or `@T.macro(hygienic=…)`), at module level or
//! among a function's statements (from there on). A statement `name(args)` — positional or
//! keyword arguments, the definition's defaults for the rest — lowers the macro's body in its
//! place, with each parameter replaced by its argument's expression (a buffer name, a
//! region, a value: the argument's text stands where the parameter is written, as a
//! TVMScript macro substitutes it). Annotations on parameters (`T.SharedBuffer(…)`,
//! `T.int32`) are documentation here; the lowered body is checked as any other code.
//!
//! **Names.** A name the body binds — a loop variable, an allocation, a `with … as` target,
//! or a let (an assignment to a name that is not a parameter and not a buffer or
//! `T.alloc_var` of the call site) — is renamed per expansion (`x` → `x_1`, `x_2`, …, the
//! first the source does not have), so two calls never collide; an assignment to a
//! call-site `T.alloc_var` (or to a parameter whose argument is one) writes it, as in
//! TileLang. Other free names mean what they mean at the call site (module-level dims, the
//! kernel's buffers and variables).
//!
//! **Limits.** A macro may call macros defined before the call; expansion is refused past
//! [`MAX_MACRO_DEPTH`] nested calls (recursion) and past [`MAX_MACRO_STMTS`] expanded
//! statements in all (a located error, never a runaway).

use crate::diagnostic::Diagnostic;
use crate::ir::Stmt;
use crate::span::Span;
use crate::syntax::ast::{self, MAX_EXPR_DEPTH};
use crate::syntax::lower::Lowerer;
use std::collections::{HashMap, HashSet};

/// Deepest nesting of macro calls inside macro bodies.
pub const MAX_MACRO_DEPTH: usize = 16;

/// Most statements all macro expansions of one function may produce.
pub const MAX_MACRO_STMTS: usize = 100_000;

/// Most expression nodes all macro expansions of one function may produce (an argument
/// standing in an argument doubles the text at each level; this stops it early).
pub const MAX_MACRO_NODES: usize = 2_000_000;

/// One expansion under way: its parameters' arguments and its renamed names.
#[derive(Clone, Debug, Default)]
pub struct Scope {
    params: HashMap<String, ast::Expr>,
    renames: HashMap<String, String>,
}

/// A defined macro: its `def`, as parsed.
#[derive(Clone, Debug)]
pub struct Macro {
    pub def: ast::FuncDef,
}

/// The expansion state of a function's lowering.
#[derive(Default)]
pub struct Macros {
    pub defs: HashMap<String, Macro>,
    /// Nesting of the expansions under way.
    depth: usize,
    /// Expansions so far (numbers the renamed names).
    count: usize,
    /// Statements expanded so far.
    stmts: usize,
    /// Expression nodes the expansions' substitutions made so far.
    nodes: usize,
    /// The expansions under way, innermost last: what their bodies' names stand for.
    scopes: Vec<Scope>,
    /// Names made up for expansions (kept apart from the source's and each other).
    made: HashSet<String>,
}

/// Whether `f` is decorated `@T.macro` or `@T.macro(...)`.
pub fn is_macro(f: &ast::FuncDef) -> bool {
    f.decorators.iter().any(|d| {
        let callee = match &d.kind {
            ast::ExprKind::Call(func, _) => func,
            _ => d,
        };
        callee.dotted().as_deref() == Some("T.macro")
    })
}

impl Lowerer {
    /// Records the macro `f` (module level, or a statement of the function).
    pub fn define_macro(&mut self, f: &ast::FuncDef) {
        let name = &f.name.name;
        if let Some(first) = self.macros.defs.get(name) {
            let first = first.def.name.span;
            self.error(
                Diagnostic::error(f.name.span, format!("the macro `{name}` is defined twice"))
                    .with_note_at(first, "first defined here"),
            );
            return;
        }
        for p in &f.params {
            if p.name.name == "T" {
                self.error(Diagnostic::error(
                    p.name.span,
                    "a macro parameter cannot be named `T` (it would hide the language's `T.`)",
                ));
                return;
            }
        }
        self.macros
            .defs
            .insert(name.clone(), Macro { def: f.clone() });
    }

    /// The macro that the expression statement `e` calls, if it calls one.
    pub fn called_macro(&self, e: &ast::Expr) -> Option<Macro> {
        let ast::ExprKind::Call(func, _) = &e.kind else {
            return None;
        };
        let ast::ExprKind::Name(n) = &func.kind else {
            return None;
        };
        self.macros.defs.get(n).cloned()
    }

    /// Expands the call `e` of macro `m` into `out`.
    pub fn expand_macro(&mut self, m: &Macro, e: &ast::Expr, out: &mut Vec<Stmt>) {
        let ast::ExprKind::Call(_, args) = &e.kind else {
            return;
        };
        let def = &m.def;
        let name = &def.name.name;
        if self.macros.depth >= MAX_MACRO_DEPTH {
            self.error(
                Diagnostic::error(
                    e.span,
                    format!(
                        "macro calls nest more than {MAX_MACRO_DEPTH} deep (does `{name}` call itself?)"
                    ),
                )
                .with_note_at(def.name.span, "the macro is defined here"),
            );
            return;
        }
        let Some(subst) = self.macro_arguments(def, e.span, args) else {
            return;
        };
        self.macros.count += 1;
        let count = self.macros.count;
        let mut renames = HashSet::new();
        let mut bad: Vec<Diagnostic> = Vec::new();
        self.collect_bound(&def.body, &subst, &mut renames, &mut bad);
        if !bad.is_empty() {
            for d in bad {
                self.error(d.with_note_at(e.span, "in this call"));
            }
            return;
        }
        let renames: HashMap<String, String> = {
            let mut names: Vec<String> = renames.into_iter().collect();
            names.sort();
            names
                .into_iter()
                .map(|n| {
                    let fresh = self.macro_name(&n, count);
                    (n, fresh)
                })
                .collect()
        };
        let sub = Subst {
            params: &subst,
            renames: &renames,
            enclosing: &self.macros.scopes,
            budget: std::cell::Cell::new(MAX_MACRO_NODES.saturating_sub(self.macros.nodes)),
        };
        let body: Vec<ast::Stmt> = def.body.iter().map(|s| sub.stmt(s)).collect();
        let left = sub.budget.get();
        if left == 0 {
            self.error(Diagnostic::error(
                e.span,
                format!(
                    "macro expansions exceed {MAX_MACRO_NODES} expression nodes in all (arguments copied into arguments grow the text exponentially)"
                ),
            ));
            return;
        }
        self.macros.nodes = MAX_MACRO_NODES - left;
        if let Some(deep) = body.iter().find_map(too_deep) {
            self.error(
                Diagnostic::error(
                    deep,
                    format!(
                        "this expression is nested more than {MAX_EXPR_DEPTH} deep once `{name}`'s arguments stand in it"
                    ),
                )
                .with_note_at(e.span, "in this call"),
            );
            return;
        }
        self.macros.stmts += count_stmts(&body);
        if self.macros.stmts > MAX_MACRO_STMTS {
            self.error(Diagnostic::error(
                e.span,
                format!("macro expansions exceed {MAX_MACRO_STMTS} statements in all"),
            ));
            return;
        }
        let errors_before = self.errors.len();
        self.macros.depth += 1;
        // Macros called in this body resolve their free names here, as if written here.
        self.macros.scopes.push(Scope {
            params: subst,
            renames,
        });
        let refs: Vec<&ast::Stmt> = body.iter().collect();
        self.block_into(&refs, out);
        self.macros.scopes.pop();
        self.macros.depth -= 1;
        // Errors inside the body point into the macro; say which call expanded it.
        // (Once per call: a recursive macro's calls share one span.)
        for d in self.errors.iter_mut().skip(errors_before) {
            // (`Span`'s `==` ignores positions: compare them.)
            let here = |s: Span| (s.start, s.end) == (e.span.start, e.span.end);
            if !here(d.span) && !d.notes.iter().any(|n| n.span.is_some_and(here)) {
                *d = d
                    .clone()
                    .with_note_at(e.span, format!("in this expansion of the macro `{name}`"));
            }
        }
    }

    /// Each parameter of `def` with its argument's expression in the call `args` (the
    /// default where none is given), parenthesized as it will stand in the body.
    fn macro_arguments(
        &mut self,
        def: &ast::FuncDef,
        span: Span,
        args: &[ast::Arg],
    ) -> Option<HashMap<String, ast::Expr>> {
        let name = &def.name.name;
        let params: Vec<&str> = def.params.iter().map(|p| p.name.name.as_str()).collect();
        let required = def
            .params
            .iter()
            .position(|p| p.default.is_some())
            .unwrap_or(params.len());
        let bound = self.bind(name, span, args, &params, required)?;
        let mut subst: HashMap<String, ast::Expr> = HashMap::new();
        for (p, arg) in def.params.iter().zip(bound) {
            let Some(value) = arg.or(p.default.as_ref()) else {
                return self.fail(Diagnostic::error(
                    span,
                    format!("`{name}` needs its argument `{}`", p.name.name),
                ));
            };
            let mut value = value.clone();
            value.parens = true;
            subst.insert(p.name.name.clone(), value);
        }
        Some(subst)
    }

    /// The value of the call `e` of macro `m` in an expression (TileLang's helper macros
    /// that `return` a value, such as fp4 → bf16 conversions): its body must be
    /// assignments to new names, each a let, and a final `return value`; the value, with
    /// every parameter replaced by its argument's expression and every let by its value,
    /// is the call's expression (each argument and let is evaluated where it is used —
    /// pure expressions mean the same either way).
    pub fn macro_value(&mut self, m: &Macro, e: &ast::Expr) -> Option<ast::Expr> {
        let ast::ExprKind::Call(_, args) = &e.kind else {
            return None;
        };
        let def = &m.def;
        let name = &def.name.name;
        if self.macros.depth >= MAX_MACRO_DEPTH {
            return self.fail(
                Diagnostic::error(
                    e.span,
                    format!(
                        "macro calls nest more than {MAX_MACRO_DEPTH} deep (does `{name}` call itself?)"
                    ),
                )
                .with_note_at(def.name.span, "the macro is defined here"),
            );
        }
        let mut params = self.macro_arguments(def, e.span, args)?;
        let body: Vec<&ast::Stmt> = def
            .body
            .iter()
            .filter(|s| {
                !matches!(&s.kind, ast::StmtKind::Pass)
                    && !matches!(&s.kind, ast::StmtKind::Expr(x) if matches!(x.kind, ast::ExprKind::Str(_)))
            })
            .collect();
        let shape_error = |at: Span| {
            Diagnostic::error(
                e.span,
                format!("the macro `{name}` is used as a value, but its body is not assignments and a `return`"),
            )
            .with_note_at(at, "a macro used as a value may only assign new names and end with `return value`; call other macros on a line of their own")
        };
        let Some((last, lets)) = body.split_last() else {
            return self.fail(shape_error(def.name.span));
        };
        let ast::StmtKind::Return(Some(value)) = &last.kind else {
            return self.fail(shape_error(last.span));
        };
        let no_renames = HashMap::new();
        let mut nodes_left = MAX_MACRO_NODES.saturating_sub(self.macros.nodes);
        let mut substitute = |params: &HashMap<String, ast::Expr>, x: &ast::Expr| {
            let sub = Subst {
                params,
                renames: &no_renames,
                enclosing: &self.macros.scopes,
                budget: std::cell::Cell::new(nodes_left),
            };
            let out = sub.expr(x, &HashSet::new());
            nodes_left = sub.budget.get();
            out
        };
        for s in lets {
            let ast::StmtKind::Assign { target, value } = &s.kind else {
                return self.fail(shape_error(s.span));
            };
            let ast::ExprKind::Name(n) = &target.kind else {
                return self.fail(shape_error(s.span));
            };
            // As a statement, such an assignment writes the call site's variable; as a value
            // it would be a let: refuse rather than mean something else.
            if self.is_var(n) || self.buffers.contains_key(n) {
                return self.fail(
                    Diagnostic::error(
                        e.span,
                        format!("the macro `{name}` is used as a value, but it assigns `{n}`, a variable of the call site"),
                    )
                    .with_note_at(s.span, "call it as a statement to write the variable"),
                );
            }
            let mut v = substitute(&params, value);
            v.parens = true;
            params.insert(n.clone(), v);
        }
        let out = substitute(&params, value);
        if nodes_left == 0 {
            return self.fail(Diagnostic::error(
                e.span,
                format!(
                    "macro expansions exceed {MAX_MACRO_NODES} expression nodes in all (arguments copied into arguments grow the text exponentially)"
                ),
            ));
        }
        self.macros.nodes = MAX_MACRO_NODES - nodes_left;
        Some(out)
    }

    /// The call `e` of macro `m` as a value ([`Self::macro_value`]), lowered.
    pub fn macro_value_expr(&mut self, m: &Macro, e: &ast::Expr) -> Option<crate::ir::Expr> {
        let value = self.macro_value(m, e)?;
        let name = &m.def.name.name;
        self.macros.depth += 1;
        let before = self.errors.len();
        let lowered = self.expr(&value);
        self.macros.depth -= 1;
        let here = |s: Span| (s.start, s.end) == (e.span.start, e.span.end);
        for d in self.errors.iter_mut().skip(before) {
            if !here(d.span) && !d.notes.iter().any(|n| n.span.is_some_and(here)) {
                *d = d
                    .clone()
                    .with_note_at(e.span, format!("in this expansion of the macro `{name}`"));
            }
        }
        lowered
    }

    /// A name for `base` in expansion `count`: `base_count`, or the first variant no source
    /// identifier and no earlier expansion has.
    fn macro_name(&mut self, base: &str, count: usize) -> String {
        let mut candidate = self.generated_name(&format!("{base}_{count}"));
        let mut k = 1;
        while self.macros.made.contains(&candidate) || self.buffers.contains_key(&candidate) {
            candidate = self.generated_name(&format!("{base}_{count}_{k}"));
            k += 1;
        }
        self.macros.made.insert(candidate.clone());
        candidate
    }

    /// The names `stmts` bind that each expansion renames; `bad` gets the assignments to a
    /// parameter whose argument is not a name.
    fn collect_bound(
        &self,
        stmts: &[ast::Stmt],
        params: &HashMap<String, ast::Expr>,
        out: &mut HashSet<String>,
        bad: &mut Vec<Diagnostic>,
    ) {
        let target =
            |t: &ast::Expr, alloc: bool, out: &mut HashSet<String>, bad: &mut Vec<Diagnostic>| {
                self.bound_target(t, alloc, params, out, bad)
            };
        for s in stmts {
            match &s.kind {
                ast::StmtKind::Assign { target: t, value } => {
                    target(t, is_allocation(value), out, bad)
                }
                ast::StmtKind::AnnAssign { target: t, .. } => target(t, true, out, bad),
                ast::StmtKind::For { targets, body, .. } => {
                    for t in targets {
                        if params.contains_key(&t.name) {
                            bad.push(
                                Diagnostic::error(
                                    t.span,
                                    format!(
                                        "the macro's parameter `{}` is also its loop variable here",
                                        t.name
                                    ),
                                )
                                .with_note("rename the loop variable or the parameter"),
                            );
                        } else {
                            out.insert(t.name.clone());
                        }
                    }
                    self.collect_bound(body, params, out, bad);
                }
                ast::StmtKind::While { body, .. } => self.collect_bound(body, params, out, bad),
                ast::StmtKind::If {
                    branches,
                    else_body,
                } => {
                    for (_, b) in branches {
                        self.collect_bound(b, params, out, bad);
                    }
                    if let Some(b) = else_body {
                        self.collect_bound(b, params, out, bad);
                    }
                }
                ast::StmtKind::With {
                    target: t, body, ..
                } => {
                    if let Some(t) = t {
                        target(t, true, out, bad);
                    }
                    self.collect_bound(body, params, out, bad);
                }
                ast::StmtKind::FuncDef(f) => bad.push(
                    Diagnostic::error(
                        f.name.span,
                        format!("`{}` is defined inside a macro's body", f.name.name),
                    )
                    .with_note("define macros at module level or among the kernel's statements"),
                ),
                ast::StmtKind::Import
                | ast::StmtKind::AugAssign { .. }
                | ast::StmtKind::Expr(_)
                | ast::StmtKind::Pass
                | ast::StmtKind::Return(_) => {}
            }
        }
    }
}

impl Lowerer {
    /// The names an assignment target binds (see [`Lowerer::collect_bound`]).
    fn bound_target(
        &self,
        t: &ast::Expr,
        alloc: bool,
        params: &HashMap<String, ast::Expr>,
        out: &mut HashSet<String>,
        bad: &mut Vec<Diagnostic>,
    ) {
        let names: Vec<&ast::Expr> = match &t.kind {
            ast::ExprKind::Tuple(items) | ast::ExprKind::List(items) => items.iter().collect(),
            _ => vec![t],
        };
        for t in names {
            let ast::ExprKind::Name(n) = &t.kind else {
                continue;
            };
            if let Some(arg) = params.get(n) {
                if !matches!(arg.kind, ast::ExprKind::Name(_)) {
                    bad.push(
                        Diagnostic::error(
                            t.span,
                            format!(
                                "the macro assigns to its parameter `{n}`, whose argument is not a name"
                            ),
                        )
                        .with_note(
                            "pass a `T.alloc_var` (or a buffer element) for a parameter the macro writes",
                        ),
                    );
                }
            } else if alloc || !(self.is_var(n) || self.buffers.contains_key(n)) {
                out.insert(n.clone());
            }
        }
    }
}

/// Whether `value` allocates (its target is a new buffer, never a call-site one).
fn is_allocation(value: &ast::Expr) -> bool {
    let ast::ExprKind::Call(func, _) = &value.kind else {
        return false;
    };
    func.dotted().is_some_and(|n| {
        n.starts_with("T.alloc_")
            || matches!(
                n.as_str(),
                "T.decl_buffer" | "T.sblock_alloc_buffer" | "T.Tensor" | "T.Buffer"
            )
    })
}

/// The nodes of an expression tree.
fn nodes(e: &ast::Expr) -> usize {
    use ast::ExprKind as E;
    let all = |items: &[ast::Expr]| items.iter().map(nodes).sum::<usize>();
    1 + match &e.kind {
        E::Name(_) | E::Int(_) | E::Float(_) | E::Str(_) | E::Bool(_) | E::None => 0,
        E::Attr(x, _) | E::Unary(_, x) | E::Lambda(_, x) => nodes(x),
        E::Call(f, args) => nodes(f) + args.iter().map(|a| nodes(&a.value)).sum::<usize>(),
        E::Subscript(x, items) => nodes(x) + all(items),
        E::Slice(a, b, c) => [a, b, c].into_iter().flatten().map(|x| nodes(x)).sum(),
        E::Tuple(items) | E::List(items) => all(items),
        E::Dict(items) => items.iter().map(|(k, v)| nodes(k) + nodes(v)).sum(),
        E::Binary(_, a, b) | E::Compare(_, a, b) | E::BoolOp(_, a, b) => nodes(a) + nodes(b),
    }
}

/// The span of an expression of `s` deeper than the grammar allows, if any.
fn too_deep(s: &ast::Stmt) -> Option<Span> {
    let mut found = None;
    visit_exprs(s, &mut |e| {
        if e.depth > MAX_EXPR_DEPTH && found.is_none() {
            found = Some(e.span);
        }
    });
    found
}

fn count_stmts(stmts: &[ast::Stmt]) -> usize {
    stmts
        .iter()
        .map(|s| {
            1 + match &s.kind {
                ast::StmtKind::For { body, .. }
                | ast::StmtKind::While { body, .. }
                | ast::StmtKind::With { body, .. } => count_stmts(body),
                ast::StmtKind::If {
                    branches,
                    else_body,
                } => {
                    branches.iter().map(|(_, b)| count_stmts(b)).sum::<usize>()
                        + else_body.as_deref().map_or(0, count_stmts)
                }
                _ => 0,
            }
        })
        .sum()
}

/// Calls `f` on every top-level expression of `s` and its nested statements.
fn visit_exprs(s: &ast::Stmt, f: &mut dyn FnMut(&ast::Expr)) {
    match &s.kind {
        ast::StmtKind::Assign { target, value }
        | ast::StmtKind::AugAssign { target, value, .. } => {
            f(target);
            f(value);
        }
        ast::StmtKind::AnnAssign {
            target,
            annotation,
            value,
        } => {
            f(target);
            f(annotation);
            if let Some(v) = value {
                f(v);
            }
        }
        ast::StmtKind::For { iter, body, .. } => {
            f(iter);
            body.iter().for_each(|s| visit_exprs(s, f));
        }
        ast::StmtKind::While { cond, body } => {
            f(cond);
            body.iter().for_each(|s| visit_exprs(s, f));
        }
        ast::StmtKind::If {
            branches,
            else_body,
        } => {
            for (c, b) in branches {
                f(c);
                b.iter().for_each(|s| visit_exprs(s, f));
            }
            for s in else_body.iter().flatten() {
                visit_exprs(s, f);
            }
        }
        ast::StmtKind::With { item, target, body } => {
            f(item);
            if let Some(t) = target {
                f(t);
            }
            body.iter().for_each(|s| visit_exprs(s, f));
        }
        ast::StmtKind::Expr(e) | ast::StmtKind::Return(Some(e)) => f(e),
        ast::StmtKind::FuncDef(_)
        | ast::StmtKind::Import
        | ast::StmtKind::Pass
        | ast::StmtKind::Return(None) => {}
    }
}

/// One expansion's substitution: parameters by their arguments, bound names by fresh ones.
struct Subst<'a> {
    params: &'a HashMap<String, ast::Expr>,
    renames: &'a HashMap<String, String>,
    /// The enclosing expansions (innermost last): a name neither of the above stands for
    /// what it stands for at the call, inside those bodies.
    enclosing: &'a [Scope],
    /// Expression nodes this substitution may still make.
    budget: std::cell::Cell<usize>,
}

impl Subst<'_> {
    fn ident(&self, i: &ast::Ident) -> ast::Ident {
        match self.renames.get(&i.name) {
            Some(n) => ast::Ident {
                name: n.clone(),
                span: i.span,
            },
            None => i.clone(),
        }
    }

    fn stmts(&self, b: &[ast::Stmt]) -> Vec<ast::Stmt> {
        b.iter().map(|s| self.stmt(s)).collect()
    }

    fn stmt(&self, s: &ast::Stmt) -> ast::Stmt {
        use ast::StmtKind as K;
        let kind = match &s.kind {
            K::Assign { target, value } => K::Assign {
                target: self.expr(target, &HashSet::new()),
                value: self.expr(value, &HashSet::new()),
            },
            K::AugAssign { target, op, value } => K::AugAssign {
                target: self.expr(target, &HashSet::new()),
                op: *op,
                value: self.expr(value, &HashSet::new()),
            },
            K::AnnAssign {
                target,
                annotation,
                value,
            } => K::AnnAssign {
                target: self.expr(target, &HashSet::new()),
                annotation: self.expr(annotation, &HashSet::new()),
                value: value.as_ref().map(|v| self.expr(v, &HashSet::new())),
            },
            K::For {
                targets,
                iter,
                body,
            } => K::For {
                targets: targets.iter().map(|t| self.ident(t)).collect(),
                iter: self.expr(iter, &HashSet::new()),
                body: self.stmts(body),
            },
            K::While { cond, body } => K::While {
                cond: self.expr(cond, &HashSet::new()),
                body: self.stmts(body),
            },
            K::If {
                branches,
                else_body,
            } => K::If {
                branches: branches
                    .iter()
                    .map(|(c, b)| (self.expr(c, &HashSet::new()), self.stmts(b)))
                    .collect(),
                else_body: else_body.as_ref().map(|b| self.stmts(b)),
            },
            K::With { item, target, body } => K::With {
                item: self.expr(item, &HashSet::new()),
                target: target.as_ref().map(|t| self.expr(t, &HashSet::new())),
                body: self.stmts(body),
            },
            K::Expr(e) => K::Expr(self.expr(e, &HashSet::new())),
            K::Return(e) => K::Return(e.as_ref().map(|e| self.expr(e, &HashSet::new()))),
            K::FuncDef(f) => K::FuncDef(f.clone()),
            K::Import => K::Import,
            K::Pass => K::Pass,
        };
        ast::Stmt { kind, span: s.span }
    }

    /// A copy of the argument `arg`, paid from the budget (a leaf once it is spent).
    fn spend_on(&self, arg: &ast::Expr) -> ast::Expr {
        let size = nodes(arg);
        let left = self.budget.get();
        if size > left {
            self.budget.set(0);
            return ast::Expr::new(ast::ExprKind::None, arg.span);
        }
        self.budget.set(left - size);
        arg.clone()
    }

    /// `e` with the substitution applied, except to the names `bound` (a lambda's).
    fn expr(&self, e: &ast::Expr, bound: &HashSet<String>) -> ast::Expr {
        use ast::ExprKind as E;
        if self.budget.get() == 0 {
            return ast::Expr::new(E::None, e.span);
        }
        self.budget.set(self.budget.get() - 1);
        let sub = |x: &ast::Expr| Box::new(self.expr(x, bound));
        let kind = match &e.kind {
            E::Name(n) if !bound.contains(n) => {
                if let Some(arg) = self.params.get(n) {
                    return self.spend_on(arg);
                }
                if let Some(r) = self.renames.get(n) {
                    E::Name(r.clone())
                } else {
                    match self.enclosing.iter().rev().find_map(|s| {
                        s.renames
                            .get(n)
                            .map(|r| Err(r.clone()))
                            .or_else(|| s.params.get(n).map(Ok))
                    }) {
                        Some(Ok(arg)) => return self.spend_on(arg),
                        Some(Err(r)) => E::Name(r),
                        None => E::Name(n.clone()),
                    }
                }
            }
            E::Name(_) | E::Int(_) | E::Float(_) | E::Str(_) | E::Bool(_) | E::None => {
                return e.clone()
            }
            E::Attr(base, attr) => E::Attr(sub(base), attr.clone()),
            E::Call(func, args) => E::Call(
                sub(func),
                args.iter()
                    .map(|a| ast::Arg {
                        name: a.name.clone(),
                        value: self.expr(&a.value, bound),
                    })
                    .collect(),
            ),
            E::Subscript(base, items) => E::Subscript(
                sub(base),
                items.iter().map(|i| self.expr(i, bound)).collect(),
            ),
            E::Slice(a, b, c) => E::Slice(
                a.as_deref().map(sub),
                b.as_deref().map(sub),
                c.as_deref().map(sub),
            ),
            E::Tuple(items) => E::Tuple(items.iter().map(|i| self.expr(i, bound)).collect()),
            E::List(items) => E::List(items.iter().map(|i| self.expr(i, bound)).collect()),
            E::Dict(items) => E::Dict(
                items
                    .iter()
                    .map(|(k, v)| (self.expr(k, bound), self.expr(v, bound)))
                    .collect(),
            ),
            E::Unary(op, x) => E::Unary(*op, sub(x)),
            E::Binary(op, a, b) => E::Binary(*op, sub(a), sub(b)),
            E::Compare(op, a, b) => E::Compare(*op, sub(a), sub(b)),
            E::BoolOp(op, a, b) => E::BoolOp(*op, sub(a), sub(b)),
            E::Lambda(ps, body) => {
                let mut inner = bound.clone();
                inner.extend(ps.iter().map(|p| p.name.clone()));
                E::Lambda(ps.clone(), Box::new(self.expr(body, &inner)))
            }
        };
        let mut out = ast::Expr::new(kind, e.span);
        out.parens = e.parens;
        out
    }
}

/// Where a macro is defined and called in a source text: what an error found after
/// lowering (verifier, passes, code generation), located in a macro's body, is shown with.
#[derive(Clone, Debug)]
pub struct MacroSite {
    pub name: String,
    /// The whole `def` (decorators and body).
    pub def: Span,
    /// Every statement that calls it, in source order.
    pub calls: Vec<Span>,
}

/// The macros of `src` and their calls (none when it does not parse).
pub fn macro_sites(src: &str) -> Vec<MacroSite> {
    let Ok(module) = crate::syntax::parse_module(src) else {
        return Vec::new();
    };
    let mut sites: Vec<MacroSite> = Vec::new();
    let mut calls: Vec<(String, Span)> = Vec::new();
    walk_sites(&module, &mut sites, &mut calls);
    for (name, span) in calls {
        if let Some(site) = sites.iter_mut().find(|s| s.name == name) {
            site.calls.push(span);
        }
    }
    sites
}

fn walk_sites(stmts: &[ast::Stmt], sites: &mut Vec<MacroSite>, calls: &mut Vec<(String, Span)>) {
    for s in stmts {
        match &s.kind {
            ast::StmtKind::FuncDef(f) => {
                if is_macro(f) {
                    sites.push(MacroSite {
                        name: f.name.name.clone(),
                        def: s.span,
                        calls: Vec::new(),
                    });
                }
                walk_sites(&f.body, sites, calls);
            }
            ast::StmtKind::Expr(e) => {
                if let ast::ExprKind::Call(func, _) = &e.kind {
                    if let ast::ExprKind::Name(n) = &func.kind {
                        calls.push((n.clone(), e.span));
                    }
                }
            }
            ast::StmtKind::For { body, .. }
            | ast::StmtKind::While { body, .. }
            | ast::StmtKind::With { body, .. } => walk_sites(body, sites, calls),
            ast::StmtKind::If {
                branches,
                else_body,
            } => {
                for (_, b) in branches {
                    walk_sites(b, sites, calls);
                }
                if let Some(b) = else_body {
                    walk_sites(b, sites, calls);
                }
            }
            _ => {}
        }
    }
}
