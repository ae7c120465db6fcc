//! Name bookkeeping: which names are in scope at a point of the walk, and where every name of
//! the function is defined (for "defined more than once" and "used before its definition").

use crate::dtype::DType;
use crate::ir::{BufferDecl, PrimFunc, StmtKind};
use crate::span::Span;
use crate::visit::for_each_stmt;
use std::collections::HashMap;
use std::fmt;

/// What kind of thing a name names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DefKind {
    Dim,
    Param,
    BlockVar,
    Alloc,
    LoopVar,
    Let,
}

impl fmt::Display for DefKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DefKind::Dim => "symbolic dimension",
            DefKind::Param => "parameter",
            DefKind::BlockVar => "block variable",
            DefKind::Alloc => "buffer",
            DefKind::LoopVar => "loop variable",
            DefKind::Let => "let variable",
        })
    }
}

/// One definition site.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Def {
    pub kind: DefKind,
    pub span: Span,
}

/// Every definition in `func`, first occurrence per name, in program order. Used to explain
/// a name that is not in scope where it is used.
pub(crate) fn all_definitions(func: &PrimFunc) -> HashMap<String, Def> {
    let mut defs: HashMap<String, Def> = HashMap::new();
    let mut add = |name: &str, kind: DefKind, span: Span| {
        defs.entry(name.to_string()).or_insert(Def { kind, span });
    };
    for dim in &func.dims {
        add(&dim.name, DefKind::Dim, dim.span);
    }
    for p in &func.params {
        add(&p.name.name, DefKind::Param, p.name.span);
    }
    for_each_stmt(&func.body, &mut |stmt| match &stmt.kind {
        StmtKind::Kernel(k) => {
            for v in &k.block_vars {
                add(&v.name, DefKind::BlockVar, v.span);
            }
            for a in &k.allocs {
                add(&a.name.name, DefKind::Alloc, a.name.span);
            }
        }
        StmtKind::For(f) => add(&f.var.name, DefKind::LoopVar, f.var.span),
        StmtKind::Let { var, .. } => add(&var.name, DefKind::Let, var.span),
        _ => {}
    });
    defs
}

/// A scalar variable in scope. `dtype` is `None` when its type could not be determined (its
/// defining expression had an error); uses of it are then not type-checked, to avoid
/// cascading errors.
#[derive(Clone, Copy, Debug)]
pub(crate) struct VarEntry {
    pub dtype: Option<DType>,
}

/// What is visible at the current point of the walk. Frames restore what a name meant before
/// they were opened, so a (rejected) shadowing definition does not hide the outer one after
/// its body ends.
#[derive(Default)]
pub(crate) struct Env<'f> {
    vars: HashMap<String, VarEntry>,
    buffers: HashMap<String, &'f BufferDecl>,
    frames: Vec<Vec<Undo<'f>>>,
}

enum Undo<'f> {
    Var(String, Option<VarEntry>),
    Buffer(String, Option<&'f BufferDecl>),
}

impl<'f> Env<'f> {
    pub fn push(&mut self) {
        self.frames.push(Vec::new());
    }

    pub fn pop(&mut self) {
        let Some(frame) = self.frames.pop() else {
            return;
        };
        for undo in frame.into_iter().rev() {
            match undo {
                Undo::Var(name, Some(old)) => {
                    self.vars.insert(name, old);
                }
                Undo::Var(name, None) => {
                    self.vars.remove(&name);
                }
                Undo::Buffer(name, Some(old)) => {
                    self.buffers.insert(name, old);
                }
                Undo::Buffer(name, None) => {
                    self.buffers.remove(&name);
                }
            }
        }
    }

    pub fn bind_var(&mut self, name: &str, dtype: Option<DType>) {
        let old = self.vars.insert(name.to_string(), VarEntry { dtype });
        if let Some(frame) = self.frames.last_mut() {
            frame.push(Undo::Var(name.to_string(), old));
        }
    }

    pub fn bind_buffer(&mut self, decl: &'f BufferDecl) {
        let name = decl.name.name.clone();
        let old = self.buffers.insert(name.clone(), decl);
        if let Some(frame) = self.frames.last_mut() {
            frame.push(Undo::Buffer(name, old));
        }
    }

    pub fn var(&self, name: &str) -> Option<VarEntry> {
        self.vars.get(name).copied()
    }

    pub fn buffer(&self, name: &str) -> Option<&'f BufferDecl> {
        self.buffers.get(name).copied()
    }
}
