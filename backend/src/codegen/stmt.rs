//! Statements → PTX control flow: thread binding, serial loops (a register and two
//! branches), unrolled loops, if/else, lets, stores, barriers and (in `intrinsics.rs`) the
//! target intrinsics.

use super::expr::{mov_type, Place};
use super::{ptx_type, Bind, Cg};
use crate::ptx::{Cmp, Guard, IntOp, Op, Operand, SpecialReg, Type};
use tlc_ir::{DType, For, ForKind, Intrinsic, Stmt, StmtKind, ThreadTag};

/// Loops unrolled in codegen are limited to this many iterations.
const MAX_UNROLL: i64 = 1024;

/// `note: text` as one line of ASCII (ptxas rejects any other byte, comments included): the
/// printer's escapes for quotes, backslashes and control characters, `\u{…}` for the rest.
fn note_comment(text: &str) -> String {
    let mut escaped = String::new();
    tlc_ir::printer::escape_string(&mut escaped, text);
    let mut line = String::from("note: ");
    for c in escaped.chars() {
        if c.is_ascii() {
            line.push(c);
        } else {
            line.push_str(&format!("\\u{{{:04x}}}", u32::from(c)));
        }
    }
    line
}

impl Cg {
    /// A statement list, in a value-numbering scope of its own (`memo.rs`).
    pub(super) fn body(&mut self, body: &[Stmt]) {
        self.scoped(|cg| cg.body_stmts(body));
    }

    fn body_stmts(&mut self, body: &[Stmt]) {
        for (i, s) in body.iter().enumerate() {
            if !self.errors.is_empty() {
                return;
            }
            if matches!(s.kind, StmtKind::Intrinsic(Intrinsic::WgmmaFence)) {
                self.prepack_register_a(&body[i + 1..]);
            }
            let branches = Self::branches(s);
            if branches {
                self.packed.clear();
                self.packed_bytes.clear();
                self.last_half = None;
            }
            self.stmt(s);
            if branches {
                self.packed.clear();
                self.packed_bytes.clear();
                self.last_half = None;
            }
        }
    }

    fn stmt(&mut self, s: &Stmt) {
        let span = s.span;
        match &s.kind {
            StmtKind::Kernel(_) => self.err(span, "nested `T.Kernel` is not supported"),
            // `emit` checked the level: these are not reached.
            StmtKind::Copy { .. }
            | StmtKind::Fill { .. }
            | StmtKind::Gemm(_)
            | StmtKind::Reduce(_)
            | StmtKind::FinalizeReducer(_) => self.err(span, "tile op at the thread level"),
            StmtKind::AtomicAdd {
                buffer,
                indices,
                value,
            } => self.atomic_add(buffer, indices, value, span),
            StmtKind::Barrier => self.b.bar_sync(),
            StmtKind::GridSync => self.grid_sync(span),
            StmtKind::AllReduce(r) => self.allreduce(r, span),
            // No code: a comment line, once per note (not per unrolled copy).
            StmtKind::Note(_) if self.repeated => {}
            StmtKind::Note(text) => self.b.comment(&note_comment(text)),
            // A fact for the shared-memory plan (already made) and the interpreter: no code.
            StmtKind::Fresh(_) => {}
            StmtKind::Intrinsic(i) => self.intrinsic(i, span),
            StmtKind::Let { var, dtype, value } => {
                if dtype.is_none_or(|d| d == DType::Int32) {
                    if let Some(c) = self.const_eval(value).filter(|c| i32::try_from(*c).is_ok()) {
                        self.vars.insert(var.name.clone(), Bind::Const(c));
                        return;
                    }
                }
                let Some(d) = dtype.or_else(|| self.typed(value).map(|t| t.dtype)) else {
                    return;
                };
                let Some(ty) = ptx_type(d) else {
                    self.err(span, format!("codegen does not support {d} values yet"));
                    return;
                };
                let Some(v) = self.expr_as(value, d) else {
                    return;
                };
                // A fresh register per let: names are unique, and a let in a loop body is
                // re-evaluated into the same register every iteration.
                let r = self.b.new_reg(ty);
                self.b.emit(Op::Mov {
                    ty: mov_type(ty),
                    dst: r,
                    src: v,
                });
                self.vars.insert(var.name.clone(), Bind::Reg(r, d));
            }
            StmtKind::Store {
                buffer,
                indices,
                value,
            } => {
                let Some(d) = self.bufs.get(&buffer.name).map(|b| b.dtype) else {
                    self.err(buffer.span, format!("undefined buffer `{}`", buffer.name));
                    return;
                };
                let Some(ty) = ptx_type(d) else {
                    return;
                };
                if self.store_half((buffer, indices), value, d) {
                    return;
                }
                let Some(v) = self.expr_as(value, d) else {
                    return;
                };
                match self.address(&buffer.name, indices, span) {
                    Some(Place::Reg(r)) => {
                        self.forget_packed(r);
                        self.b.emit(Op::Mov {
                            ty: mov_type(ty),
                            dst: r,
                            src: v,
                        });
                        self.refresh_word(&buffer.name, indices);
                    }
                    Some(Place::Mem(space, addr)) => self.store_elem(space, addr, d, v),
                    None => {}
                }
            }
            StmtKind::If {
                cond,
                then_body,
                else_body,
            } => {
                let Some(p) = self.expr(cond, DType::Bool) else {
                    return;
                };
                let p = self.in_reg(p, Type::Pred);
                self.hoist_guarded_addresses(then_body);
                self.hoist_guarded_addresses(else_body);
                let else_l = self.b.label("else");
                let end_l = self.b.label("endif");
                self.b.bra_if(Guard::unless(p), &else_l);
                self.body(then_body);
                if !else_body.is_empty() {
                    self.b.bra(&end_l);
                }
                self.b.place(&else_l);
                if !else_body.is_empty() {
                    // What the then-arm packed is not in the registers of the threads
                    // that take the else-arm.
                    self.packed.clear();
                    self.packed_bytes.clear();
                    self.last_half = None;
                    self.body(else_body);
                    self.b.place(&end_l);
                }
            }
            StmtKind::For(f) => self.for_loop(f, s),
            StmtKind::While { cond, body } => self.while_loop(cond, body),
        }
    }

    /// `head: if !cond goto end; body; goto head; end:` — per thread, so threads whose
    /// condition differs leave at different iterations (a divergent loop; passes keep
    /// barriers out of loops whose condition may depend on the thread).
    fn while_loop(&mut self, cond: &tlc_ir::Expr, body: &[Stmt]) {
        let head = self.b.label("while");
        let end = self.b.label("while_end");
        self.b.place(&head);
        // The condition is evaluated afresh at every test: its values are not reused
        // outside it (a scope of its own).
        let p = self.scoped(|cg| {
            let p = cg.expr(cond, DType::Bool)?;
            Some(cg.in_reg(p, Type::Pred))
        });
        let Some(p) = p else {
            return;
        };
        self.b.bra_if(Guard::unless(p), &end);
        self.body(body);
        self.b.bra(&head);
        self.b.place(&end);
    }

    /// The addresses of an `if` arm made only of stores or atomic adds (a masked store, an
    /// epilogue's guarded element), or of one constant-bound vector loop of them (a guarded
    /// vector `red`, whose lane 0 stands for its vector: the other lanes differ by constants),
    /// computed before the branch as `select` does for its arms: pure index math, shared by
    /// neighbouring guarded elements. Arms with lets or other loops are left alone (their
    /// indices may name variables bound inside them).
    fn hoist_guarded_addresses(&mut self, body: &[Stmt]) {
        if let [Stmt {
            kind: StmtKind::For(f),
            ..
        }] = body
        {
            if matches!(f.kind, ForKind::Vectorized | ForKind::Unroll) {
                if let Some(start) = self.const_eval(&f.start) {
                    let saved = self.vars.insert(f.var.name.clone(), Bind::Const(start));
                    self.hoist_guarded_addresses(&f.body);
                    match saved {
                        Some(b) => self.vars.insert(f.var.name.clone(), b),
                        None => self.vars.remove(&f.var.name),
                    };
                }
            }
            return;
        }
        let writes: Vec<_> = body
            .iter()
            .map(|s| match &s.kind {
                StmtKind::Store {
                    buffer,
                    indices,
                    value,
                }
                | StmtKind::AtomicAdd {
                    buffer,
                    indices,
                    value,
                } => Some((buffer, indices, value)),
                _ => None,
            })
            .collect::<Option<_>>()
            .unwrap_or_default();
        for (buffer, indices, value) in writes {
            self.hoist_address(&buffer.name, indices, buffer.span);
            self.hoist_addresses(value);
        }
    }

    /// Statements that branch: packed words known before them are not known inside or
    /// after them.
    fn branches(s: &Stmt) -> bool {
        match &s.kind {
            StmtKind::If { .. } | StmtKind::While { .. } | StmtKind::GridSync => true,
            StmtKind::For(f) => matches!(f.kind, ForKind::Serial | ForKind::Pipelined { .. }),
            _ => false,
        }
    }

    fn for_loop(&mut self, f: &For, s: &Stmt) {
        match &f.kind {
            // `emit` checked the level: not reached.
            ForKind::Parallel => self.err(s.span, "T.Parallel loop at the thread level"),
            ForKind::ThreadBinding(tag) => self.thread_binding(f, *tag, s),
            ForKind::Unroll | ForKind::Vectorized => {
                let (Some(a), Some(z)) = (self.const_eval(&f.start), self.const_eval(&f.stop))
                else {
                    self.err(
                        f.stop.span,
                        "T.unroll / T.vectorized loops need constant bounds",
                    );
                    return;
                };
                if z - a > MAX_UNROLL {
                    self.err(
                        f.stop.span,
                        format!("loop of {} iterations is too long to unroll", z - a),
                    );
                    return;
                }
                if f.kind == ForKind::Vectorized
                    && a == 0
                    && (self.try_vectorize(f, z) || self.try_vector_red(f, z))
                {
                    return;
                }
                let outer = self.repeated;
                for i in a..z {
                    self.vars.insert(f.var.name.clone(), Bind::Const(i));
                    self.body(&f.body);
                    self.repeated = true;
                }
                self.repeated = outer;
            }
            ForKind::Serial | ForKind::Pipelined { .. } => self.serial(f),
        }
    }

    fn thread_binding(&mut self, f: &For, tag: ThreadTag, s: &Stmt) {
        let (special, axis) = match tag {
            ThreadTag::ThreadX => (SpecialReg::TidX, 0),
            ThreadTag::ThreadY => (SpecialReg::TidY, 1),
            ThreadTag::ThreadZ => (SpecialReg::TidZ, 2),
            _ => {
                self.err(
                    s.span,
                    "loops bound to blockIdx are not supported: use T.Kernel's grid",
                );
                return;
            }
        };
        let threads = i64::from(self.threads.get(axis).copied().unwrap_or(1));
        let start = self.const_eval(&f.start);
        let stop = self.const_eval(&f.stop);
        if start != Some(0) || stop != Some(threads) {
            self.err(
                f.stop.span,
                format!(
                    "the thread-binding loop must run over exactly the kernel's {threads} threads on {}",
                    tag.name()
                ),
            );
            return;
        }
        let r = self.b.special(special);
        self.vars
            .insert(f.var.name.clone(), Bind::Reg(r, DType::Int32));
        self.thread_axes.insert(f.var.name.clone(), axis);
        self.body(&f.body);
    }

    /// `i = start; head: if !(i < stop) goto end; body; i += 1; goto head; end:`.
    fn serial(&mut self, f: &For) {
        let Some(start) = self.expr_as(&f.start, DType::Int32) else {
            return;
        };
        let Some(stop) = self.expr_as(&f.stop, DType::Int32) else {
            return;
        };
        let stop = self.in_reg(stop, Type::S32);
        let i = self.b.new_reg(Type::S32);
        self.b.emit(Op::Mov {
            ty: Type::S32,
            dst: i,
            src: start,
        });
        self.vars
            .insert(f.var.name.clone(), Bind::Reg(i, DType::Int32));
        let head = self.b.label("loop");
        let end = self.b.label("loop_end");
        self.b.place(&head);
        let p = self.b.setp(Cmp::Ge, Type::S32, i, stop);
        self.b.bra_if(Guard::when(p), &end);
        self.body(&f.body);
        self.b.emit(Op::Int {
            op: IntOp::Add,
            ty: Type::S32,
            dst: i,
            a: i.into(),
            b: Operand::Imm(1),
        });
        self.b.bra(&head);
        self.b.place(&end);
    }
}
