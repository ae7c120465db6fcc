//! Lowering of the surface AST to the IR: the module and function level and statements.
//! Loops live in `lower_loop.rs`, kernels in `lower_kernel.rs`, tile-op regions in
//! `lower_region.rs`, scalar expressions in `lower_expr.rs`.
//!
//! Three spellings of a kernel are accepted (TileLang DSL, TVMScript as TileLang 0.1.x and
//! 0.1.15 print it) and normalized here, so that they give equal IR. Lowering does not
//! resolve scalar names or check shapes (the verifier does); it knows buffers only as far as
//! regions need them.

use crate::diagnostic::Diagnostic;
use crate::dtype::DType;
use crate::ir::{
    BinOp, BufferDecl, Dim, Expr, ExprKind, Ident, PrimFunc, ReduceKind, Scope, Stmt, StmtKind,
};
use crate::span::Span;
use crate::syntax::ast;
use crate::syntax::lower_expr::unknown_construct;
use crate::syntax::lower_kernel::KernelState;
use crate::syntax::lower_var::element_store;
use std::collections::{HashMap, HashSet};

/// Deepest statement nesting the IR may get (loops, ifs including `elif` chains, kernels).
pub const MAX_STMT_DEPTH: usize = 120;

/// What lowering knows about a buffer: enough to expand whole-buffer and corner regions.
#[derive(Clone, Debug)]
pub struct BufInfo {
    pub shape: Vec<Expr>,
    pub dtype: DType,
}

/// The lowering state; errors are collected, not returned at the first one.
#[derive(Default)]
pub struct Lowerer {
    pub errors: Vec<Diagnostic>,
    pub buffers: HashMap<String, BufInfo>,
    /// Kernels being lowered, innermost last.
    pub kernels: Vec<KernelState>,
    /// Current statement nesting depth.
    pub depth: usize,
    /// The spans (start, end) of TVMScript typed literals (`T.float32(0.5)`), which
    /// `syntax::literals` normalizes.
    pub typed_literals: HashSet<(usize, usize)>,
    /// `T.alloc_var` variables: one-element local buffers whose name stands for their
    /// element (`lower_var.rs`).
    pub vars: HashSet<String>,
    /// The function's parameter names (buffer views can only view these).
    pub params: HashSet<String>,
    /// Buffer views (`syntax::lower_view`), by name.
    pub views: HashMap<String, crate::syntax::lower_view::View>,
    /// Reshapes of on-chip buffers (`syntax::lower_reshape`) of the kernel being lowered.
    pub reshapes: HashMap<String, crate::syntax::lower_reshape::Reshape>,
    /// While lowering `T.copy`'s operands: regions of views are allowed.
    pub view_regions: bool,
    /// The tunables declared so far (`syntax::lower_tunable`).
    pub tunables: HashSet<String>,
    /// Every identifier of the source: names lowering makes up avoid them
    /// (`syntax::generated_names`).
    pub source_names: HashSet<String>,
    /// `@T.macro` definitions and the expansion state (`syntax::lower_macro`).
    pub macros: crate::syntax::lower_macro::Macros,
    /// While an assignment is lowered: the statements its value-form calls (a warp shuffle
    /// written as a value) run before it (`syntax::lower_value_call`); `None` elsewhere,
    /// where such a call is an error.
    pub hoisted: Option<Vec<Stmt>>,
    /// How deep the expression being lowered is inside a conditionally evaluated part
    /// (`T.if_then_else`'s branches, the right side of `and` / `or`).
    pub conditional: usize,
    /// The buffers (and calls) of the atomic adds hoisted for the assignment being lowered
    /// (`syntax::lower_value_call`'s order rule).
    pub hoisted_atomics: Vec<(String, Span)>,
    /// Multiples that layouts of global tensors require of symbolic dims
    /// (`syntax::lower_global_layout`): dim, multiple, the layout part that needs it.
    pub dim_multiples: Vec<(String, i64, Span)>,
    /// The function's symbolic dims' names (what a size argument may be an expression of:
    /// `T.im2col`'s kernel size).
    pub dim_names: HashSet<String>,
    /// Dims declared `M = T.dynamic("m")`: lowered under the Python name, renamed after
    /// `uniquify` (`syntax::dim_alias`).
    pub dim_aliases: Vec<crate::syntax::dim_alias::DimAlias>,
}

/// What lowering gives: the function, and the spans (start, end) of its TVMScript typed
/// literals for `syntax::literals::normalize` (run once names are unique).
pub struct Lowered {
    pub func: PrimFunc,
    pub typed_literals: HashSet<(usize, usize)>,
    /// The dims to give their own names once binders are unique (`syntax::dim_alias`).
    pub dim_aliases: Vec<crate::syntax::dim_alias::DimAlias>,
}

/// Whether `e` is a call of the dotted name `name`.
fn is_call(e: &ast::Expr, name: &str) -> bool {
    matches!(&e.kind, ast::ExprKind::Call(f, _) if f.dotted().as_deref() == Some(name))
}

/// Lowers a parsed module (one `@T.prim_func`, optional symbolic dims and imports).
pub fn lower_module(module: &[ast::Stmt], src: &str) -> Result<Lowered, Vec<Diagnostic>> {
    let mut lw = Lowerer {
        source_names: crate::syntax::generated_names::source_names(src),
        ..Lowerer::default()
    };
    let mut dims = Vec::new();
    let mut space = crate::tuning::TuningSpace::default();
    let mut func: Option<&ast::FuncDef> = None;
    let mut func_span = Span::DUMMY;
    for stmt in module {
        match &stmt.kind {
            ast::StmtKind::Import | ast::StmtKind::Pass => {}
            // A docstring.
            ast::StmtKind::Expr(e) if matches!(e.kind, ast::ExprKind::Str(_)) => {}
            ast::StmtKind::Assign { target, value } if is_call(value, "T.tunable") => {
                if let Some(t) = lw.tunable(target, value, &dims) {
                    space.tunables.push(t);
                }
            }
            ast::StmtKind::Expr(e) if is_call(e, "T.tune_constraint") => {
                if let Some(c) = lw.tune_constraint(e, &dims) {
                    space.constraints.push(c);
                }
            }
            ast::StmtKind::Assign { target, value } => {
                for dim in lw.symbolic_dims(target, value, &dims) {
                    dims.push(dim);
                }
            }
            ast::StmtKind::FuncDef(f) if crate::syntax::lower_macro::is_macro(f) => {
                lw.define_macro(f);
            }
            ast::StmtKind::FuncDef(f) => {
                if func.is_some() {
                    lw.error(
                        Diagnostic::error(f.name.span, "a file holds exactly one `@T.prim_func`")
                            .with_note_at(func_span, "the first one is here"),
                    );
                } else {
                    func = Some(f);
                    func_span = f.name.span;
                }
            }
            _ => lw.error(
                Diagnostic::error(stmt.span, "unexpected statement at module level")
                    .with_note("a file holds `M = T.symbolic(\"M\")` lines and one `@T.prim_func`"),
            ),
        }
    }
    let Some(f) = func else {
        if lw.errors.is_empty() {
            let end = src.len();
            lw.error(
                Diagnostic::error(Span::new(end, end), "expected `@T.prim_func`").with_note(
                    "the file must define one kernel: `@T.prim_func` then `def name(...):`",
                ),
            );
        }
        return Err(lw.errors);
    };
    let span = module
        .first()
        .map_or(Span::DUMMY, |s| s.span)
        .to(module.last().map_or(Span::DUMMY, |s| s.span));
    let result = lw.func(f, dims, span);
    match result {
        Some(mut func) if lw.errors.is_empty() => Ok(Lowered {
            func: {
                func.space = space;
                func
            },
            typed_literals: lw.typed_literals,
            dim_aliases: lw.dim_aliases,
        }),
        _ => Err(lw.errors),
    }
}

impl Lowerer {
    pub fn error(&mut self, d: Diagnostic) {
        self.errors.push(d);
    }

    /// Records `d` and returns `None`, for `return self.fail(...)`.
    pub fn fail<T>(&mut self, d: Diagnostic) -> Option<T> {
        self.errors.push(d);
        None
    }

    /// `M, N = T.dynamic("M, N")` at module level (TileLang's spelling of several dims at
    /// once; with one name it is `T.symbolic`'s form): one dim per name, in order.
    fn symbolic_dims(&mut self, target: &ast::Expr, value: &ast::Expr, dims: &[Dim]) -> Vec<Dim> {
        let (ast::ExprKind::Tuple(items), ast::ExprKind::Call(func, args)) =
            (&target.kind, &value.kind)
        else {
            return self.symbolic_dim(target, value, dims).into_iter().collect();
        };
        if func.dotted().as_deref() != Some("T.dynamic") {
            self.error(module_level_error(value.span));
            return Vec::new();
        }
        let Some(a) = self.bind(
            "T.dynamic",
            value.span,
            args,
            &["name", "dtype", "multiple_of"],
            1,
        ) else {
            return Vec::new();
        };
        let Some(first) = a[0] else {
            return Vec::new();
        };
        let dtype_arg = a[1].cloned();
        let multiple_arg = a[2].cloned();
        let ast::ExprKind::Str(written) = &first.kind else {
            self.error(Diagnostic::error(
                first.span,
                "`T.dynamic` takes the names as one string: `M, N = T.dynamic(\"M, N\")`",
            ));
            return Vec::new();
        };
        let names: Vec<&str> = written.split(',').map(str::trim).collect();
        if names.len() != items.len() {
            self.error(Diagnostic::error(
                first.span,
                format!("{} names for {} targets", names.len(), items.len()),
            ));
            return Vec::new();
        }
        let mut out: Vec<Dim> = Vec::new();
        for (item, name) in items.iter().zip(names) {
            // The one-name form of the call, for this target.
            let mut one = vec![ast::Arg {
                name: None,
                value: ast::Expr::new(ast::ExprKind::Str(name.to_string()), first.span),
            }];
            one.extend(dtype_arg.iter().map(|d| ast::Arg {
                name: None,
                value: d.clone(),
            }));
            one.extend(multiple_arg.iter().map(|m| ast::Arg {
                name: Some(ast::Ident {
                    name: "multiple_of".to_string(),
                    span: m.span,
                }),
                value: m.clone(),
            }));
            let call = ast::Expr::new(ast::ExprKind::Call(func.clone(), one), value.span);
            let seen: Vec<Dim> = dims.iter().chain(out.iter()).cloned().collect();
            if let Some(d) = self.symbolic_dim(item, &call, &seen) {
                out.push(d);
            }
        }
        out
    }

    /// `M = T.symbolic("M")` (or TileLang's `T.dynamic("M")`) at module level; `dims`: the
    /// ones declared above it.
    fn symbolic_dim(&mut self, target: &ast::Expr, value: &ast::Expr, dims: &[Dim]) -> Option<Dim> {
        let ast::ExprKind::Call(func, args) = &value.kind else {
            return self.fail(module_level_error(value.span));
        };
        let callee = func.dotted().unwrap_or_default();
        if callee != "T.symbolic" && callee != "T.dynamic" {
            return self.fail(module_level_error(value.span));
        }
        let a = self.bind(
            &callee,
            value.span,
            args,
            &["name", "dtype", "multiple_of"],
            1,
        )?;
        let name = self.string(a[0]?, "the name of a symbolic dimension")?;
        let mut dtype = DType::Int32;
        if let Some(dt) = a[1] {
            dtype = self.dtype(dt)?;
            if !matches!(dtype, DType::Int32 | DType::Int64) {
                return self.fail(
                    Diagnostic::error(dt.span, "symbolic dimensions are int32 or int64").with_note(
                        "`T.symbolic(\"N\", \"int64\")` holds sizes up to 2^40; int32 up to 2^30",
                    ),
                );
            }
        }
        let ast::ExprKind::Name(var) = &target.kind else {
            return self.fail(Diagnostic::error(target.span, "expected a name"));
        };
        if var != name {
            // TileLang's `M = T.dynamic("m")`: the Python name stands for a dim named `m`.
            self.dim_alias(var, name, value.span)?;
        }
        // A second declaration would be a second launch parameter of the same name, and
        // `-D` could bind only one of them: one dim, one declaration.
        if let Some(first) = dims.iter().find(|d| d.name == *var) {
            return self.fail(
                Diagnostic::error(
                    target.span,
                    format!("the symbolic dimension `{var}` is declared twice"),
                )
                .with_note_at(first.span, format!("`{var}` is first declared here")),
            );
        }
        let mut dim = Dim::new(var.clone(), target.span, dtype);
        if let Some(m) = a[2] {
            let v = self.const_int(m, "`multiple_of`")?;
            if !(1..=crate::ir::MAX_MULTIPLE).contains(&v) {
                return self.fail(Diagnostic::error(
                    m.span,
                    format!("`multiple_of` is {v}; it must lie in 1..=1048576"),
                ));
            }
            dim.multiple_of = v;
        }
        Some(dim)
    }

    fn func(&mut self, f: &ast::FuncDef, mut dims: Vec<Dim>, span: Span) -> Option<PrimFunc> {
        self.dim_names = dims.iter().map(|d| d.name.clone()).collect();
        self.decorators(f);
        if let Some(r) = &f.returns {
            self.error(Diagnostic::error(r.span, "a prim_func returns nothing"));
        }
        // Parameters, by position; `T.handle` ones are filled in by `T.match_buffer`.
        let mut params: Vec<Option<BufferDecl>> = Vec::new();
        let mut handles: HashMap<String, (usize, Span)> = HashMap::new();
        for (i, p) in f.params.iter().enumerate() {
            params.push(None);
            if let Some(d) = &p.default {
                self.error(Diagnostic::error(
                    d.span,
                    "parameter defaults are not supported",
                ));
            }
            let Some(ann) = &p.annotation else {
                self.error(Diagnostic::error(
                    p.name.span,
                    format!(
                        "parameter `{}` needs a type, e.g. `{}: T.Tensor((M, N), \"float16\")`",
                        p.name.name, p.name.name
                    ),
                ));
                continue;
            };
            if ann.dotted().as_deref() == Some("T.handle") {
                handles.insert(p.name.name.clone(), (i, p.name.span));
                continue;
            }
            match self.scalar_param(&p.name, ann, i, &dims) {
                Some(Some(dim)) => {
                    dims.push(dim);
                    continue;
                }
                // A scalar type refused (reported).
                Some(None) => continue,
                None => {}
            }
            if let Some(decl) = self.param_decl(&p.name, ann, p.span) {
                if let Some(slot) = params.get_mut(i) {
                    *slot = Some(decl);
                }
            }
        }
        // `X = T.match_buffer(X_handle, ...)` statements bind handles to buffers;
        // `X = T.alloc_global(shape, dtype)` ones declare the function's own tensors.
        let mut body_stmts: Vec<&ast::Stmt> = Vec::new();
        let mut scratch: Vec<&ast::Stmt> = Vec::new();
        let mut kernel_seen: Option<Span> = None;
        for stmt in &f.body {
            if alloc_global_call(stmt).is_some() {
                // Python reads the body in order: a kernel written before the allocation
                // could not name it.
                if let Some(at) = kernel_seen {
                    self.error(
                        Diagnostic::error(
                            stmt.span,
                            "`T.alloc_global` after a kernel: write the function's own tensors before its kernels",
                        )
                        .with_note_at(at, "the first kernel is here"),
                    );
                }
                scratch.push(stmt);
                continue;
            }
            if kernel_seen.is_none() && matches!(stmt.kind, ast::StmtKind::With { .. }) {
                kernel_seen = Some(stmt.span);
            }
            match match_buffer_call(stmt) {
                Some((target, call_span, args)) => {
                    if let Some((handle, decl)) = self.match_buffer(target, call_span, args) {
                        match handles.remove(&handle.name) {
                            Some((i, _)) => {
                                if let Some(slot) = params.get_mut(i) {
                                    *slot = Some(decl);
                                }
                            }
                            None => self.error(Diagnostic::error(
                                handle.span,
                                format!("`{}` is not a `T.handle` parameter", handle.name),
                            )),
                        }
                    }
                }
                None => body_stmts.push(stmt),
            }
        }
        let mut leftover: Vec<(usize, Span, String)> = handles
            .into_iter()
            .map(|(name, (i, span))| (i, span, name))
            .collect();
        leftover.sort_by_key(|(i, _, _)| *i);
        for (_, span, name) in leftover {
            self.error(Diagnostic::error(
                span,
                format!("handle `{name}` has no `T.match_buffer`"),
            ));
        }
        let mut params: Vec<BufferDecl> = params.into_iter().flatten().collect();
        let mut scratch_names = Vec::new();
        for stmt in scratch {
            if let Some(decl) = self.alloc_global(stmt) {
                scratch_names.push(decl.name.name.clone());
                params.push(decl);
            }
        }
        self.params = self.buffers.keys().cloned().collect();
        let body = self.block_refs(&body_stmts);
        for (name, m, at) in std::mem::take(&mut self.dim_multiples) {
            match dims.iter_mut().find(|d| d.name == name) {
                Some(d) if d.param.is_none() => {
                    if let Err(lcm) = d.require_multiple(m) {
                        self.error(Diagnostic::error(
                            at,
                            format!(
                                "this layout needs `{name}` to be a multiple of {lcm}, more than the {} a dim may declare",
                                crate::ir::MAX_MULTIPLE
                            ),
                        ));
                    }
                }
                _ => self.error(Diagnostic::error(
                    at,
                    format!("this layout needs `{name}` to be a multiple of {m}, which only a symbolic dimension can promise"),
                )
                .with_note(format!("declare `{name} = T.symbolic(\"{name}\", multiple_of={m})` before the function"))),
            }
        }
        Some(PrimFunc {
            name: Ident::new(f.name.name.clone(), f.name.span),
            dims,
            params,
            scratch: scratch_names,
            body,
            span,
            space: crate::tuning::TuningSpace::default(),
        })
    }

    fn decorators(&mut self, f: &ast::FuncDef) {
        let mut found = false;
        for d in &f.decorators {
            let (target, args) = match &d.kind {
                ast::ExprKind::Call(func, args) => (&**func, args.as_slice()),
                _ => (d, &[][..]),
            };
            match target.dotted().as_deref() {
                Some("T.prim_func") => {
                    found = true;
                    // `@T.prim_func(private=True)` and the like change nothing for tlc.
                    let _ = self.bind(
                        "T.prim_func",
                        d.span,
                        args,
                        &["private", "check_well_formed"],
                        0,
                    );
                }
                Some(name) if name.starts_with("T.") => {
                    self.error(unknown_construct(name, target.span))
                }
                _ => self.error(Diagnostic::error(d.span, "unsupported decorator")),
            }
        }
        if !found {
            self.error(Diagnostic::error(
                f.name.span,
                "expected `@T.prim_func` before the kernel's `def`",
            ));
        }
    }

    /// A parameter `A: T.Tensor((M, N), "float16")` (or `T.Buffer`), or TileLang's
    /// subscript spelling `A: T.Tensor[(M, N), T.float16]` (the same two arguments).
    /// `n: T.int32` (or `T.int64`, or the dtype as a string) in the signature: a scalar
    /// parameter, which is a dim the caller passes at position `index`. `None` when `ann`
    /// is no scalar type (a tensor's); `Some(None)` after reporting another scalar dtype or
    /// a name a module-level dim has.
    fn scalar_param(
        &mut self,
        name: &ast::Ident,
        ann: &ast::Expr,
        index: usize,
        dims: &[Dim],
    ) -> Option<Option<Dim>> {
        let written = match &ann.kind {
            ast::ExprKind::Str(s) => s.clone(),
            _ => ann.dotted()?.strip_prefix("T.")?.to_string(),
        };
        let dtype = DType::parse(&written)?;
        if !matches!(dtype, DType::Int32 | DType::Int64) {
            return Some(
                self.fail(
                    Diagnostic::error(
                        ann.span,
                        format!("a scalar parameter is int32 or int64, not {dtype}"),
                    )
                    .with_note("pass other values in a one-element tensor (`T.Tensor((1,), …)`)"),
                ),
            );
        }
        if self.tunables.contains(&name.name) || name.name == "T" {
            let what = if name.name == "T" {
                "the language's `T.`"
            } else {
                "a tunable"
            };
            return Some(self.fail(Diagnostic::error(
                name.span,
                format!(
                    "the scalar parameter `{}` has the name of {what}",
                    name.name
                ),
            )));
        }
        if let Some(first) = dims.iter().find(|d| d.name == name.name) {
            return Some(
                self.fail(
                    Diagnostic::error(
                        name.span,
                        format!(
                            "`{}` is both a symbolic dimension and a scalar parameter",
                            name.name
                        ),
                    )
                    .with_note_at(first.span, "declared here"),
                ),
            );
        }
        let mut dim = Dim::new(name.name.clone(), name.span, dtype);
        dim.param = Some(index);
        Some(Some(dim))
    }

    fn param_decl(&mut self, name: &ast::Ident, ann: &ast::Expr, span: Span) -> Option<BufferDecl> {
        let subscript_args: Vec<ast::Arg>;
        let (func, args) = match &ann.kind {
            ast::ExprKind::Call(func, args) => (func, args),
            ast::ExprKind::Subscript(func, items)
                if matches!(func.dotted().as_deref(), Some("T.Tensor" | "T.Buffer")) =>
            {
                subscript_args = items
                    .iter()
                    .map(|e| ast::Arg {
                        name: None,
                        value: e.clone(),
                    })
                    .collect();
                (func, &subscript_args)
            }
            _ => {
                let msg = match ann.dotted().as_deref().and_then(|d| d.strip_prefix("T.")) {
                    Some(dt) if DType::parse(dt).is_some() => {
                        "a scalar parameter is int32 or int64 (`n: T.int32`)".to_string()
                    }
                    _ => "expected a buffer type `T.Tensor((d0, d1), \"dtype\")`".to_string(),
                };
                return self.fail(Diagnostic::error(ann.span, msg));
            }
        };
        let what = func.dotted().unwrap_or_default();
        if what != "T.Tensor" && what != "T.Buffer" {
            if what.starts_with("T.") && what != "T.handle" {
                return self.fail(unknown_construct(&what, func.span));
            }
            return self.fail(Diagnostic::error(
                ann.span,
                "expected a buffer type `T.Tensor((d0, d1), \"dtype\")`",
            ));
        }
        let a = self.bind(&what, ann.span, args, &["shape", "dtype"], 1)?;
        let shape = self.shape(a[0]?);
        let dtype = match a[1] {
            Some(d) => self.dtype(d),
            None => Some(DType::Float32),
        };
        self.declare(name, shape?, dtype?, Scope::Global, span)
    }

    /// `X = T.alloc_global(shape, dtype)` at function level: a global tensor of the
    /// function's own (`PrimFunc::scratch`).
    fn alloc_global(&mut self, stmt: &ast::Stmt) -> Option<BufferDecl> {
        let (target, call_span, args) = alloc_global_call(stmt)?;
        let ast::ExprKind::Name(name) = &target.kind else {
            return self.fail(Diagnostic::error(target.span, "expected a name"));
        };
        let a = self.bind("T.alloc_global", call_span, args, &["shape", "dtype"], 1)?;
        let shape = self.shape(a[0]?);
        let dtype = match a[1] {
            Some(d) => self.dtype(d),
            None => Some(DType::Float32),
        };
        let ident = ast::Ident {
            name: name.clone(),
            span: target.span,
        };
        self.declare(&ident, shape?, dtype?, Scope::Global, stmt.span)
    }

    /// A shape: a tuple or list of extents, or a single extent for 1-D.
    pub fn shape(&mut self, e: &ast::Expr) -> Option<Vec<Expr>> {
        match &e.kind {
            ast::ExprKind::Tuple(items) | ast::ExprKind::List(items) => {
                if items.is_empty() {
                    return self.fail(Diagnostic::error(
                        e.span,
                        "a shape needs at least one dimension",
                    ));
                }
                self.indices(items)
            }
            _ => Some(vec![self.expr(e)?]),
        }
    }

    /// Records a buffer and builds its declaration.
    pub fn declare(
        &mut self,
        name: &ast::Ident,
        shape: Vec<Expr>,
        dtype: DType,
        scope: Scope,
        span: Span,
    ) -> Option<BufferDecl> {
        if self.views.contains_key(&name.name) {
            return self.fail(Diagnostic::error(
                name.span,
                format!("`{}` is already a buffer view", name.name),
            ));
        }
        if self.reshapes.contains_key(&name.name) {
            return self.fail(Diagnostic::error(
                name.span,
                format!("`{}` is already a reshaped buffer", name.name),
            ));
        }
        self.buffers.insert(
            name.name.clone(),
            BufInfo {
                shape: shape.clone(),
                dtype,
            },
        );
        Some(BufferDecl {
            name: Ident::new(name.name.clone(), name.span),
            dtype,
            shape,
            scope,
            span,
        })
    }

    /// `X = T.match_buffer(X_handle, shape, dtype, strides=...)`: the handle and the buffer.
    fn match_buffer(
        &mut self,
        target: &ast::Expr,
        call_span: Span,
        args: &[ast::Arg],
    ) -> Option<(ast::Ident, BufferDecl)> {
        let a = self.bind(
            "T.match_buffer",
            call_span,
            args,
            &["data", "shape", "dtype", "strides"],
            2,
        )?;
        let data = a[0]?;
        let ast::ExprKind::Name(handle) = &data.kind else {
            return self.fail(Diagnostic::error(
                data.span,
                "expected a `T.handle` parameter name",
            ));
        };
        let ast::ExprKind::Name(name) = &target.kind else {
            return self.fail(Diagnostic::error(target.span, "expected a buffer name"));
        };
        let shape = self.shape(a[1]?)?;
        let dtype = match a[2] {
            Some(d) => self.dtype(d)?,
            None => DType::Float32,
        };
        if let Some(strides) = a[3] {
            self.check_contiguous(&shape, strides)?;
        }
        let ident = ast::Ident {
            name: name.clone(),
            span: target.span,
        };
        let decl = self.declare(&ident, shape, dtype, Scope::Global, call_span)?;
        Some((
            ast::Ident {
                name: handle.clone(),
                span: data.span,
            },
            decl,
        ))
    }

    /// Strides must be those of a contiguous row-major buffer.
    fn check_contiguous(&mut self, shape: &[Expr], strides: &ast::Expr) -> Option<()> {
        let given = self.shape(strides)?;
        let mut expected = vec![Expr::int(1); shape.len()];
        for i in (0..shape.len().saturating_sub(1)).rev() {
            if let (Some(next), Some(dim)) = (expected.get(i + 1).cloned(), shape.get(i + 1)) {
                if let Some(slot) = expected.get_mut(i) {
                    *slot = Expr::binary(BinOp::Mul, dim.clone(), next, Span::DUMMY);
                }
            }
        }
        let ok = given.len() == expected.len()
            && given.iter().zip(&expected).all(|(g, e)| {
                g == e
                    || matches!((&g.kind, &e.kind),
                        (ExprKind::Binary(BinOp::Mul, ga, gb), ExprKind::Binary(BinOp::Mul, ea, eb))
                            if ga == eb && gb == ea)
            });
        if ok {
            Some(())
        } else {
            self.fail(
                Diagnostic::error(
                    strides.span,
                    "only contiguous row-major buffers are supported",
                )
                .with_note("the strides must be the suffix products of the shape, ending in 1"),
            )
        }
    }

    /// Lowers a block of statements.
    pub fn block(&mut self, stmts: &[ast::Stmt]) -> Vec<Stmt> {
        let refs: Vec<&ast::Stmt> = stmts.iter().collect();
        self.block_refs(&refs)
    }

    pub fn block_refs(&mut self, stmts: &[&ast::Stmt]) -> Vec<Stmt> {
        let mut out = Vec::new();
        self.block_into(stmts, &mut out);
        out
    }

    /// Lowers `stmts`, appending to `out` (transparent blocks such as `with T.block(...)`
    /// append to their parent's list).
    pub fn block_into(&mut self, stmts: &[&ast::Stmt], out: &mut Vec<Stmt>) {
        for (i, stmt) in stmts.iter().enumerate() {
            // TileLang 0.1.x: `bx = T.launch_thread("blockIdx.x", n)` lines open a kernel
            // whose body is the rest of the block.
            if self.kernels.is_empty() && self.is_launch_thread(stmt) {
                let rest = stmts.get(i..).unwrap_or(&[]);
                if let Some(k) = self.launch_thread_kernel(rest) {
                    out.push(k);
                }
                return;
            }
            self.stmt(stmt, out);
        }
    }

    /// One statement. On the recursive path of nested bodies, so a thin dispatcher.
    fn stmt(&mut self, stmt: &ast::Stmt, out: &mut Vec<Stmt>) {
        let span = stmt.span;
        let lowered = match &stmt.kind {
            ast::StmtKind::Pass | ast::StmtKind::Return(None) => None,
            ast::StmtKind::Expr(e) if matches!(e.kind, ast::ExprKind::Str(_)) => None,
            ast::StmtKind::Expr(e) if is_call(e, "T.cumsum") => {
                self.cumsum(e, out);
                None
            }
            ast::StmtKind::Expr(e) if is_call(e, "T.print") => {
                self.print(e, out);
                None
            }
            ast::StmtKind::Expr(e) if is_call(e, "T.rng_init") => self.rng_init(e),
            ast::StmtKind::Expr(e) => match self.called_macro(e) {
                Some(m) => {
                    self.expand_macro(&m, e, out);
                    None
                }
                None => self.call_stmt(e),
            },
            ast::StmtKind::FuncDef(f) if crate::syntax::lower_macro::is_macro(f) => {
                self.define_macro(f);
                None
            }
            ast::StmtKind::Assign { target, value }
                if matches!(target.kind, ast::ExprKind::Tuple(_)) =>
            {
                self.tuple_assign(target, value, out);
                None
            }
            ast::StmtKind::Assign { target, value } => {
                self.hoisting(out, |lw| lw.assign(target, value, None, span));
                None
            }
            ast::StmtKind::AnnAssign {
                target,
                annotation,
                value: Some(value),
            } => {
                self.hoisting(out, |lw| lw.assign(target, value, Some(annotation), span));
                None
            }
            ast::StmtKind::AugAssign { target, op, value } => {
                self.hoisting(out, |lw| lw.aug_assign(target, *op, value, span));
                None
            }
            ast::StmtKind::For {
                targets,
                iter,
                body,
            } => match self.loop_with_jumps(stmt) {
                Some(stmts) => {
                    let refs: Vec<&ast::Stmt> = stmts.iter().collect();
                    self.block_into(&refs, out);
                    None
                }
                None => self.for_loop(targets, iter, body, span),
            },
            ast::StmtKind::If {
                branches,
                else_body,
            } => self.if_chain(branches, else_body.as_deref(), span),
            ast::StmtKind::While { cond, body } => match self.loop_with_jumps(stmt) {
                Some(stmts) => {
                    let refs: Vec<&ast::Stmt> = stmts.iter().collect();
                    self.block_into(&refs, out);
                    None
                }
                None => self.while_loop(cond, body, span),
            },
            ast::StmtKind::With { item, target, body } => {
                self.with_stmt(item, target.as_ref(), body, span, out);
                None
            }
            _ => self.fail(stmt_error(stmt)),
        };
        out.extend(lowered);
    }

    /// `while cond: body`.
    fn while_loop(&mut self, cond: &ast::Expr, body: &[ast::Stmt], span: Span) -> Option<Stmt> {
        let cond = self.expr(cond);
        let body = self.nested(1, span, |lw| lw.block(body))?;
        Some(Stmt::new(StmtKind::While { cond: cond?, body }, span))
    }

    /// Runs `f` one statement level deeper, refusing to nest beyond [`MAX_STMT_DEPTH`].
    pub fn nested<T>(
        &mut self,
        levels: usize,
        span: Span,
        f: impl FnOnce(&mut Self) -> T,
    ) -> Option<T> {
        if self.depth + levels > MAX_STMT_DEPTH {
            return self.fail(too_deep(span));
        }
        self.depth += levels;
        let r = f(self);
        self.depth -= levels;
        Some(r)
    }

    /// `x = e`, `x: T.int32 = e`, `buf[i] = e`, and the assignments that declare things
    /// (allocations, TVMScript thread launches).
    fn assign(
        &mut self,
        target: &ast::Expr,
        value: &ast::Expr,
        annotation: Option<&ast::Expr>,
        span: Span,
    ) -> Option<Stmt> {
        match &target.kind {
            ast::ExprKind::Name(name) => {
                let ident = ast::Ident {
                    name: name.clone(),
                    span: target.span,
                };
                if let ast::ExprKind::Call(func, args) = &value.kind {
                    let callee = func.dotted().unwrap_or_default();
                    match callee.as_str() {
                        "T.alloc_shared" | "T.alloc_fragment" | "T.alloc_local" | "T.alloc_buffer"
                        | "T.sblock_alloc_buffer" | "T.decl_buffer" => {
                            self.alloc(&ident, &callee, value.span, args, span);
                            return None;
                        }
                        "T.alloc_reducer" => {
                            self.alloc_reducer(&ident, value.span, args, span);
                            return None;
                        }
                        "T.alloc_barrier" => {
                            return self.alloc_barrier(&ident, value.span, args, span);
                        }
                        "T.Tensor" | "T.Buffer" => {
                            self.view(&ident, &callee, value.span, args);
                            return None;
                        }
                        "T.reshape" => {
                            self.reshape(&ident, value.span, args);
                            return None;
                        }
                        "T.alloc_var" => {
                            return self.alloc_var(&ident, value.span, args, span);
                        }
                        "T.launch_thread_idx" | "T.get_thread_binding" => {
                            return self.thread_var(&ident, &callee, value.span, args);
                        }
                        "T.thread_binding" => {
                            self.thread_binding_var(&ident, value.span, args);
                            return None;
                        }
                        "T.launch_thread" => {
                            return self.fail(Diagnostic::error(
                                value.span,
                                "`T.launch_thread` must come first in the function body, before any other statement",
                            ))
                        }
                        "T.match_buffer" => {
                            return self.fail(Diagnostic::error(
                                value.span,
                                "`T.match_buffer` belongs at the top of the function body",
                            ))
                        }
                        "T.alloc_global" => {
                            return self.fail(
                                Diagnostic::error(
                                    value.span,
                                    "`T.alloc_global` allocates a global tensor of the whole function: write it in the function body, outside every `T.Kernel`",
                                )
                                .with_note("the runtime allocates it (zero-filled) for each launch; every kernel of the function may read and write it"),
                            )
                        }
                        "T.symbolic" => {
                            return self.fail(Diagnostic::error(
                                value.span,
                                "`T.symbolic` belongs at module level, before `@T.prim_func`",
                            ))
                        }
                        _ => {}
                    }
                }
                if self.is_var(name) && annotation.is_none() {
                    let value = self.expr(value)?;
                    return Some(element_store(name, target.span, value, span));
                }
                let dtype = match annotation {
                    Some(a) => Some(self.dtype(a)?),
                    None => None,
                };
                let value = self.expr(value)?;
                Some(Stmt::new(
                    StmtKind::Let {
                        var: Ident::new(name.clone(), target.span),
                        dtype,
                        value,
                    },
                    span,
                ))
            }
            ast::ExprKind::Subscript(base, items) if annotation.is_none() => {
                let ast::ExprKind::Name(buffer) = &base.kind else {
                    return self.fail(Diagnostic::error(base.span, "expected a buffer name"));
                };
                if let Some(s) = items
                    .iter()
                    .find(|i| matches!(i.kind, ast::ExprKind::Slice(..)))
                {
                    return self.fail(
                        Diagnostic::error(
                            s.span,
                            "a store writes one element; slices are not allowed here",
                        )
                        .with_note("use `T.fill` or `T.copy` for regions"),
                    );
                }
                if self.is_shuffle_into(buffer, items, value) {
                    return self.shuffle_into((buffer, base.span), items, value, span);
                }
                let indices = self.indices(items);
                let value = self.expr(value);
                let (buffer, indices, inside) =
                    self.logical_element_target(buffer, indices?, base.span)?;
                let store = Stmt::new(
                    StmtKind::Store {
                        buffer: Ident::new(buffer, base.span),
                        indices,
                        value: value?,
                    },
                    span,
                );
                Some(crate::syntax::lower_view::only_if(inside, store, span))
            }
            _ => self.fail(Diagnostic::error(
                target.span,
                "can only assign to a name or to a buffer element",
            )),
        }
    }

    /// `a, b = x, y` (TileLang's `i_b, i_h = i_bh // H, i_bh % H`). Python reads every
    /// value before it assigns any target. When every target is a new name (a let), that is
    /// one let per pair in order — unless a value reads a target of an earlier pair, which
    /// Python would read as it was before the statement: refused. When a target is a buffer
    /// element or a `T.alloc_var` variable (memory, which a value may read through any name:
    /// `x, y = y, x`, a buffer view of the same tensor), every value goes into a temporary
    /// let first, then the targets are assigned from them.
    fn tuple_assign(&mut self, target: &ast::Expr, value: &ast::Expr, out: &mut Vec<Stmt>) {
        let ast::ExprKind::Tuple(targets) = &target.kind else {
            return;
        };
        let values = match &value.kind {
            ast::ExprKind::Tuple(values) | ast::ExprKind::List(values) => values,
            _ => {
                self.error(
                    Diagnostic::error(
                        value.span,
                        format!(
                            "expected {} values separated by commas to unpack into {} targets",
                            targets.len(),
                            targets.len()
                        ),
                    )
                    .with_note("tlc unpacks only a written tuple: `a, b = x, y`"),
                );
                return;
            }
        };
        if values.len() != targets.len() {
            self.error(Diagnostic::error(
                value.span,
                format!(
                    "{} targets but {} values: each target needs exactly one value",
                    targets.len(),
                    values.len()
                ),
            ));
            return;
        }
        if let Some(t) = targets
            .iter()
            .find(|t| matches!(t.kind, ast::ExprKind::Tuple(_)))
        {
            self.error(Diagnostic::error(
                t.span,
                "nested tuple targets are not supported: unpack one level at a time",
            ));
            return;
        }
        let lets_only = targets
            .iter()
            .all(|t| matches!(&t.kind, ast::ExprKind::Name(n) if !self.is_var(n)));
        if !lets_only {
            let temps: Vec<ast::Expr> = values
                .iter()
                .enumerate()
                .map(|(k, v)| {
                    let name = self.generated_name(&format!("tuple_v{k}"));
                    ast::Expr::new(ast::ExprKind::Name(name), v.span)
                })
                .collect();
            for (tmp, v) in temps.iter().zip(values) {
                self.hoisting(out, |lw| lw.assign(tmp, v, None, v.span));
            }
            for (t, tmp) in targets.iter().zip(&temps) {
                self.hoisting(out, |lw| lw.assign(t, tmp, None, t.span.to(tmp.span)));
            }
            return;
        }
        let written: Vec<(&str, Span)> = targets
            .iter()
            .filter_map(|t| match &t.kind {
                ast::ExprKind::Name(n) => Some((n.as_str(), t.span)),
                _ => None,
            })
            .collect();
        for (i, v) in values.iter().enumerate() {
            let mut clash = None;
            v.for_each_name(&mut |n| {
                if clash.is_none() {
                    clash = written[..i.min(written.len())]
                        .iter()
                        .find(|(w, _)| *w == n)
                        .copied();
                }
            });
            if let Some((name, at)) = clash {
                self.error(
                    Diagnostic::error(
                        v.span,
                        format!("this value reads `{name}`, which an earlier target of the same statement defines"),
                    )
                    .with_note_at(at, "defined here")
                    .with_note("Python reads every value before it assigns: write the statement as separate assignments"),
                );
                return;
            }
        }
        for (t, v) in targets.iter().zip(values) {
            let span = t.span.to(v.span);
            self.hoisting(out, |lw| lw.assign(t, v, None, span));
        }
    }

    /// `buf[i] op= value`: the store `buf[i] = buf[i] op (value)`. A name cannot be updated:
    /// scalars are immutable lets.
    fn aug_assign(
        &mut self,
        target: &ast::Expr,
        op: ast::BinaryOp,
        value: &ast::Expr,
        span: Span,
    ) -> Option<Stmt> {
        match &target.kind {
            ast::ExprKind::Subscript(..) => {
                let combined = ast::Expr::new(
                    ast::ExprKind::Binary(op, Box::new(target.clone()), Box::new(value.clone())),
                    span,
                );
                self.assign(target, &combined, None, span)
            }
            ast::ExprKind::Name(name) if self.is_var(name) => {
                let combined = ast::Expr::new(
                    ast::ExprKind::Binary(op, Box::new(target.clone()), Box::new(value.clone())),
                    span,
                );
                self.assign(target, &combined, None, span)
            }
            ast::ExprKind::Name(name) => self.fail(
                Diagnostic::error(
                    target.span,
                    format!("`{name}` is a scalar binding and cannot be updated in place"),
                )
                .with_note(format!(
                    "a name bound with `=` is an immutable value; keep a running value in a \
                     variable: `{name} = T.alloc_var(dtype)` and `{name} += …`"
                )),
            ),
            _ => self.fail(Diagnostic::error(
                target.span,
                "can only update a buffer element in place (`buf[i, j] += value`)",
            )),
        }
    }

    /// `T.sync_threads()`, or TVMScript's `T.tvm_storage_sync("shared")` (`tvm` is true):
    /// a block-wide barrier.
    fn barrier(&mut self, span: Span, args: &[ast::Arg], tvm: bool) -> Option<Stmt> {
        if tvm {
            let a = self.bind("T.tvm_storage_sync", span, args, &["scope"], 1)?;
            let scope_arg = a[0]?;
            match self.string(scope_arg, "the storage scope")? {
                "shared" | "shared.dyn" => {}
                other => {
                    return self.fail(
                        Diagnostic::error(
                            scope_arg.span,
                            format!("unsupported storage sync scope \"{other}\""),
                        )
                        .with_note("only \"shared\" (a block-wide barrier) is supported"),
                    )
                }
            }
        } else {
            // TileLang's `T.sync_threads(barrier_id, arrive_count)`: over the whole block it
            // is the block barrier (the id changes nothing then); over fewer threads, the
            // named barrier `T.bar_sync(id, count)` (thread level).
            let a = self.bind(
                "T.sync_threads",
                span,
                args,
                &["barrier_id", "arrive_count"],
                0,
            )?;
            if let (Some(id), Some(count)) = (a[0], a[1]) {
                let block: Option<i64> = self
                    .kernels
                    .last()
                    .and_then(|k| k.threads.as_ref())
                    .and_then(|t| t.iter().map(Expr::as_int).product());
                let count_value = self.const_int(count, "`arrive_count`")?;
                if block != Some(count_value) {
                    let positional: Vec<ast::Arg> = [id, count]
                        .into_iter()
                        .map(|e| ast::Arg {
                            name: None,
                            value: e.clone(),
                        })
                        .collect();
                    return self.intrinsic("T.bar_sync", span, &positional);
                }
            }
        }
        Some(Stmt::new(StmtKind::Barrier, span))
    }

    /// `T.note("text")`: a compiler remark; its one argument is a string literal (rule M1).
    fn note(&mut self, span: Span, args: &[ast::Arg]) -> Option<Stmt> {
        let a = self.bind("T.note", span, args, &["text"], 1)?;
        let arg = a[0]?;
        match &arg.kind {
            ast::ExprKind::Str(text) => Some(Stmt::new(StmtKind::Note(text.clone()), span)),
            _ => self.fail(
                Diagnostic::error(arg.span, "the text of `T.note` must be a string literal")
                    .with_note(
                        "a note is a fixed remark kept in the printed IR, such as \
                         `T.note(\"cp.async instead of TMA: unaligned rows\")`; it holds no value",
                    ),
            ),
        }
    }

    /// `T.fresh(A, B)`: the contents of the named shared buffers are discarded here. Its
    /// arguments are buffer names, at least one, positional (rule F0); the verifier checks
    /// what they name.
    fn fresh(&mut self, span: Span, args: &[ast::Arg]) -> Option<Stmt> {
        if args.is_empty() {
            return self.fail(
                Diagnostic::error(span, "`T.fresh` needs at least one buffer")
                    .with_note("name the shared buffers whose contents are discarded here: `T.fresh(A_shared, B_shared)`"),
            );
        }
        let mut names = Vec::with_capacity(args.len());
        let mut ok = true;
        for arg in args {
            match (&arg.name, &arg.value.kind) {
                (None, ast::ExprKind::Name(name)) => {
                    names.push(Ident::new(name.clone(), arg.value.span))
                }
                (Some(_), _) => {
                    self.error(Diagnostic::error(
                        arg.value.span,
                        "`T.fresh` takes no keyword arguments, only buffer names",
                    ));
                    ok = false;
                }
                (None, _) => {
                    self.error(Diagnostic::error(
                        arg.value.span,
                        "expected the name of a shared buffer (`T.fresh` discards whole buffers)",
                    ));
                    ok = false;
                }
            }
        }
        ok.then(|| Stmt::new(StmtKind::Fresh(names), span))
    }

    /// `if` / `elif` / `else`: each `elif` becomes an `If` alone in the else body.
    fn if_chain(
        &mut self,
        branches: &[(ast::Expr, Vec<ast::Stmt>)],
        else_body: Option<&[ast::Stmt]>,
        span: Span,
    ) -> Option<Stmt> {
        // Every `elif` nests one level deeper in the IR; bodies are lowered at the deepest
        // level (a conservative bound).
        self.nested(branches.len(), span, |lw| {
            let mut lowered = Vec::with_capacity(branches.len());
            for (cond, body) in branches {
                lowered.push((lw.expr(cond), lw.block(body), cond.span));
            }
            let mut else_part = else_body.map(|b| lw.block(b)).unwrap_or_default();
            let mut last: Option<Stmt> = None;
            for (cond, then_body, cond_span) in lowered.into_iter().rev() {
                let else_body = match last.take() {
                    Some(s) => vec![s],
                    None => std::mem::take(&mut else_part),
                };
                last = Some(Stmt::new(
                    StmtKind::If {
                        cond: cond?,
                        then_body,
                        else_body,
                    },
                    cond_span.to(span),
                ));
            }
            last
        })?
    }

    /// `with ...:` statements.
    fn with_stmt(
        &mut self,
        item: &ast::Expr,
        target: Option<&ast::Expr>,
        body: &[ast::Stmt],
        span: Span,
        out: &mut Vec<Stmt>,
    ) {
        let (name, args) = match &item.kind {
            ast::ExprKind::Call(func, args) => (func.dotted().unwrap_or_default(), args.as_slice()),
            _ => (String::new(), &[][..]),
        };
        match name.as_str() {
            "T.Kernel" => {
                if let Some(k) = self.dsl_kernel(item.span, args, target, body, span) {
                    out.push(k);
                }
            }
            "T.ws" | "T.WarpSpecialize" => {
                self.warp_specialize(item.span, args, target, body, span, out)
            }
            // Blocks are transparent: their reads/writes are informational.
            "T.block" | "T.sblock" => {
                if let Some(t) = target {
                    self.error(Diagnostic::error(t.span, "a block binds no name"));
                }
                let refs: Vec<&ast::Stmt> = body.iter().collect();
                self.block_into(&refs, out);
            }
            "T.attr" if is_comm_reducer(args) => {
                let key = args.get(1).map(|a| &a.value);
                let reducer = args.first().map(|a| &a.value);
                if let Some(r) = reducer.and_then(|r| self.comm_reducer_scope(r, key, body, span)) {
                    out.push(r);
                }
            }
            "T.attr" => {
                self.attr(item.span, args);
                let refs: Vec<&ast::Stmt> = body.iter().collect();
                self.block_into(&refs, out);
            }
            n if n.starts_with("T.")
                && !crate::syntax::lower_expr::is_known_t_name(n.get(2..).unwrap_or("")) =>
            {
                self.error(unknown_construct(n, item.span))
            }
            _ => self.error(Diagnostic::error(
                item.span,
                "expected `with T.Kernel(...) as ...:`",
            )),
        }
    }

    /// Expression statements: tile ops and kernel annotations.
    fn call_stmt(&mut self, e: &ast::Expr) -> Option<Stmt> {
        let ast::ExprKind::Call(func, args) = &e.kind else {
            return self.fail(not_a_call(e));
        };
        let name = func.dotted().unwrap_or_default();
        let span = e.span;
        match name.as_str() {
            "T.copy" => self.copy(span, args),
            "T.tma_copy" => self.tma_copy(span, args),
            "T.mbarrier_wait_parity" | "T.barrier_wait" | "T.barrier_arrive" => {
                self.barrier_call(&name, span, args)
            }
            "T.mbarrier_arrive" if Self::tilelang_arrive(args) => {
                self.barrier_call(&name, span, args)
            }
            "T.im2col" => self.im2col(span, args),
            "T.gemm" => self.gemm(span, args),
            "T.fill" => self.fill(span, args, false),
            "T.clear" => self.fill(span, args, true),
            "T.atomic_add" => self.atomic_add(span, args),
            "T.thread_allreduce" => self.thread_allreduce(span, args),
            n if ReduceKind::parse(n).is_some() => self.reduce(n, span, args),
            "T.use_swizzle" => {
                self.use_swizzle(span, args);
                None
            }
            "T.annotate_layout" => {
                self.annotate_layout(span, args);
                None
            }
            "T.min_blocks_per_sm" => {
                self.min_blocks_per_sm(span, args);
                None
            }
            "T.no_set_max_nreg" | "T.disable_warp_group_reg_alloc" => {
                self.no_set_max_nreg(&name, span, args);
                None
            }
            "T.shared_arena" => {
                self.shared_arena(span, args);
                None
            }
            "T.sync_threads" => self.barrier(span, args, false),
            "T.sync_grid" => match args.first() {
                Some(a) => self.fail(Diagnostic::error(
                    a.value.span,
                    "`T.sync_grid()` takes no arguments",
                )),
                None => Some(Stmt::new(StmtKind::GridSync, span)),
            },
            "T.tvm_storage_sync" => self.barrier(span, args, true),
            "T.note" => self.note(span, args),
            "T.fresh" => self.fresh(span, args),
            "T.finalize_reducer" => self.finalize_reducer(span, args),
            n if crate::intrinsic::lookup(n).is_some() => self.intrinsic(n, span, args),
            "T.attr" => {
                self.attr(span, args);
                None
            }
            "T.sblock_attr" => {
                self.sblock_attr(span, args);
                None
            }
            // Informational in TVMScript.
            "T.reads" | "T.writes" => None,
            n if n.starts_with("T.") => {
                let known = crate::syntax::lower_expr::is_known_t_name(n.get(2..).unwrap_or(""));
                if known {
                    self.fail(Diagnostic::error(
                        span,
                        format!("`{n}(...)` is not a statement"),
                    ))
                } else {
                    self.fail(unknown_construct(n, func.span))
                }
            }
            _ => self.fail(Diagnostic::error(
                func.span,
                format!("unsupported call `{name}`"),
            )),
        }
    }
}

#[cold]
#[inline(never)]
fn too_deep(span: Span) -> Diagnostic {
    Diagnostic::error(span, "statements nested too deeply").with_note(format!(
        "at most {MAX_STMT_DEPTH} levels of loops and ifs are allowed"
    ))
}

/// The statements that are errors inside a function.
#[cold]
#[inline(never)]
fn stmt_error(stmt: &ast::Stmt) -> Diagnostic {
    match &stmt.kind {
        ast::StmtKind::AnnAssign { target, .. } => Diagnostic::error(
            target.span,
            "a declaration needs a value: `x: T.int32 = ...`",
        ),
        ast::StmtKind::Return(Some(e)) => Diagnostic::error(e.span, "a prim_func returns nothing"),
        ast::StmtKind::FuncDef(f) => {
            Diagnostic::error(f.name.span, "nested functions are not supported")
        }
        ast::StmtKind::Import => Diagnostic::error(stmt.span, "imports belong at module level"),
        _ => Diagnostic::error(stmt.span, "unexpected statement"),
    }
}

/// An expression statement that is not a call. Python's `break` and `continue` are names to
/// this grammar (they are not tokens), so they land here when no serial loop or `while`
/// takes them (`syntax::lower_break`): their own message, not "does nothing".
fn not_a_call(e: &ast::Expr) -> Diagnostic {
    match &e.kind {
        ast::ExprKind::Name(n) if n == "break" || n == "continue" => Diagnostic::error(
            e.span,
            format!("`{n}` outside a serial loop or a `while` loop"),
        )
        .with_note(
            "`break` / `continue` stop a `T.serial` / `range` / `T.unroll` / `T.Pipelined` loop or a \
             `while`; a `T.Parallel` nest has no order to stop in: put the rest of its body under an `if`",
        ),
        _ => Diagnostic::error(e.span, "this expression does nothing"),
    }
}

fn module_level_error(span: Span) -> Diagnostic {
    Diagnostic::error(span, "unexpected statement at module level")
        .with_note("module level holds `M = T.symbolic(\"M\")` lines and one `@T.prim_func`")
}

/// `X = T.match_buffer(...)`: the target, the call's span and its arguments.
/// `target = T.alloc_global(args)` (or `target: T.Buffer = ...`): the target, the call's
/// span and its arguments.
fn alloc_global_call(stmt: &ast::Stmt) -> Option<(&ast::Expr, Span, &[ast::Arg])> {
    let (target, value) = match &stmt.kind {
        ast::StmtKind::Assign { target, value } => (target, value),
        ast::StmtKind::AnnAssign {
            target,
            value: Some(value),
            ..
        } => (target, value),
        _ => return None,
    };
    let ast::ExprKind::Call(func, args) = &value.kind else {
        return None;
    };
    (func.dotted().as_deref() == Some("T.alloc_global")).then_some((target, value.span, args))
}

fn match_buffer_call(stmt: &ast::Stmt) -> Option<(&ast::Expr, Span, &[ast::Arg])> {
    let ast::StmtKind::Assign { target, value } = &stmt.kind else {
        return None;
    };
    let ast::ExprKind::Call(func, args) = &value.kind else {
        return None;
    };
    (func.dotted().as_deref() == Some("T.match_buffer")).then_some((target, value.span, args))
}

/// Whether a `T.attr(...)`'s node is `T.comm_reducer(...)` (an all-reduce's scope).
fn is_comm_reducer(args: &[ast::Arg]) -> bool {
    args.first().is_some_and(|a| {
        matches!(&a.value.kind, ast::ExprKind::Call(f, _) if f.dotted().as_deref() == Some("T.comm_reducer"))
    })
}
