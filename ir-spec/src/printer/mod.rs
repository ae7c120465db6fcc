//! The printer: one canonical text per IR, in the TileLang DSL spelling docs/ir.md gives as each construct's "Canonical" form.
//! The text parses back to an equal IR, which is what makes every stage's dump editable.
//!
//! `expr` prints expressions (precedence, parentheses), `region` the three region forms, and
//! this file the function, kernels and statements.

mod expr;
mod region;

#[cfg(test)]
pub(crate) mod testkit;
#[cfg(test)]
mod tests;

use crate::dtype::DType;
use crate::ir::{
    BufferDecl, For, ForKind, Gemm, Kernel, Layout, PrimFunc, RasterOrder, Reducer, RowsOf, Scope,
    Stmt, StmtKind, WarpPolicy,
};
use expr::{write_expr, write_list};
use region::{copy_forms, write_plain_region, write_region, Decls};
use std::collections::HashMap;
use std::fmt::{self, Write};

/// The canonical text of `func`, ending with a newline.
pub fn print_func(func: &PrimFunc) -> String {
    // A (non-verified) name declared twice is ambiguous: the parser resolves a whole-buffer
    // operand against the declaration in scope where it is written, which printing can
    // change (allocations print at the top of their kernel). Such a name has no entry here,
    // so its regions print with explicit ranges, which mean the same under either one.
    let mut count: HashMap<&str, usize> = HashMap::new();
    for decl in func.buffers() {
        *count.entry(decl.name.name.as_str()).or_insert(0) += 1;
    }
    let mut decls: Decls<'_> = Decls::new();
    for decl in func.buffers() {
        if count.get(decl.name.name.as_str()) == Some(&1) {
            decls.insert(decl.name.name.as_str(), decl);
        }
    }
    let mut printer = Printer {
        out: String::new(),
        decls,
    };
    // Writing into a `String` cannot fail.
    let _ = printer.func(func);
    printer.out
}

struct Printer<'f> {
    out: String,
    decls: Decls<'f>,
}

impl Printer<'_> {
    fn indent(&mut self, depth: usize) {
        for _ in 0..depth {
            self.out.push_str("    ");
        }
    }

    /// The tuning space (docs/ir.md, "Tuning space"): one `T.tunable` line per group, then
    /// the constraints, then a blank line.
    fn space(&mut self, space: &crate::tuning::TuningSpace) -> fmt::Result {
        let tuple = |values: &[i64]| match values {
            [one] => one.to_string(),
            _ => format!(
                "({})",
                values
                    .iter()
                    .map(i64::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        for t in &space.tunables {
            let names: Vec<&str> = t.names.iter().map(|n| n.name.as_str()).collect();
            let candidates: Vec<String> = t.candidates.iter().map(|c| tuple(c)).collect();
            writeln!(
                self.out,
                "{} = T.tunable([{}], default={})",
                names.join(", "),
                candidates.join(", "),
                tuple(&t.default)
            )?;
        }
        for c in &space.constraints {
            writeln!(self.out, "T.tune_constraint({c})")?;
        }
        if !space.is_empty() {
            self.out.push('\n');
        }
        Ok(())
    }

    fn func(&mut self, func: &PrimFunc) -> fmt::Result {
        let module_dims: Vec<&crate::ir::Dim> =
            func.dims.iter().filter(|d| d.param.is_none()).collect();
        for dim in &module_dims {
            write!(self.out, "{0} = T.symbolic(\"{0}\"", dim.name)?;
            if dim.dtype != DType::Int32 {
                write!(self.out, ", \"{}\"", dim.dtype)?;
            }
            if dim.multiple_of > 1 {
                write!(self.out, ", multiple_of={}", dim.multiple_of)?;
            }
            writeln!(self.out, ")")?;
        }
        if !module_dims.is_empty() {
            self.out.push('\n');
        }
        self.space(&func.space)?;
        self.out.push_str("@T.prim_func\n");
        let signature = func.signature();
        if signature.is_empty() {
            writeln!(self.out, "def {}():", func.name.name)?;
        } else {
            writeln!(self.out, "def {}(", func.name.name)?;
            for param in signature {
                self.indent(1);
                match param {
                    crate::ir::SigParam::Tensor(param) => {
                        write!(self.out, "{}: T.Tensor(", param.name.name)?;
                        self.shape(&param.shape)?;
                        writeln!(self.out, ", \"{}\"),", param.dtype)?;
                    }
                    crate::ir::SigParam::Scalar(d) => {
                        writeln!(self.out, "{}: T.{},", d.name, d.dtype)?;
                    }
                }
            }
            self.out.push_str("):\n");
        }
        // The function's own tensors, first in its body.
        for param in func.params.iter().filter(|p| func.is_scratch(&p.name.name)) {
            self.indent(1);
            write!(self.out, "{} = T.alloc_global(", param.name.name)?;
            self.shape(&param.shape)?;
            writeln!(self.out, ", \"{}\")", param.dtype)?;
        }
        if func.body.is_empty() && !func.scratch.is_empty() {
            return Ok(());
        }
        self.body(&func.body, 1)
    }

    /// `(a, b)`, or `(n,)` for one dimension.
    fn shape(&mut self, shape: &[crate::ir::Expr]) -> fmt::Result {
        self.out.push('(');
        write_list(&mut self.out, shape)?;
        if shape.len() == 1 {
            self.out.push(',');
        }
        self.out.push(')');
        Ok(())
    }

    /// A statement list; an empty one prints `pass`.
    fn body(&mut self, body: &[Stmt], depth: usize) -> fmt::Result {
        if body.is_empty() {
            self.indent(depth);
            self.out.push_str("pass\n");
        }
        for stmt in body {
            self.stmt(stmt, depth)?;
        }
        Ok(())
    }

    fn stmt(&mut self, stmt: &Stmt, depth: usize) -> fmt::Result {
        match &stmt.kind {
            StmtKind::Kernel(k) => return self.kernel(k, depth),
            StmtKind::For(f) => return self.for_loop(f, depth),
            StmtKind::If {
                cond,
                then_body,
                else_body,
            } => {
                self.indent(depth);
                self.out.push_str("if ");
                return self.if_chain(cond, then_body, else_body, depth);
            }
            StmtKind::While { cond, body } => {
                self.indent(depth);
                self.out.push_str("while ");
                write_expr(&mut self.out, cond)?;
                self.out.push_str(":\n");
                return self.body(body, depth + 1);
            }
            _ => {}
        }
        self.indent(depth);
        match &stmt.kind {
            StmtKind::Let { var, dtype, value } => {
                write!(self.out, "{}", var.name)?;
                if let Some(dtype) = dtype {
                    write!(self.out, ": T.{dtype}")?;
                }
                self.out.push_str(" = ");
                write_expr(&mut self.out, value)?;
            }
            StmtKind::Store {
                buffer,
                indices,
                value,
            } => {
                write!(self.out, "{}[", buffer.name)?;
                write_list(&mut self.out, indices)?;
                self.out.push_str("] = ");
                write_expr(&mut self.out, value)?;
            }
            StmtKind::AtomicAdd {
                buffer,
                indices,
                value,
            } => {
                write!(self.out, "T.atomic_add({}[", buffer.name)?;
                write_list(&mut self.out, indices)?;
                self.out.push_str("], ");
                write_expr(&mut self.out, value)?;
                self.out.push(')');
            }
            StmtKind::Copy { src, dst } => {
                let (fs, fd) = copy_forms(src, dst, &self.decls);
                self.out.push_str("T.copy(");
                write_region(&mut self.out, src, fs)?;
                self.out.push_str(", ");
                write_region(&mut self.out, dst, fd)?;
                self.out.push(')');
            }
            StmtKind::Gemm(g) => self.gemm(g)?,
            StmtKind::Fill { dst, value } => {
                if value.as_int() == Some(0) {
                    self.out.push_str("T.clear(");
                    write_plain_region(&mut self.out, dst, &self.decls)?;
                } else {
                    self.out.push_str("T.fill(");
                    write_plain_region(&mut self.out, dst, &self.decls)?;
                    self.out.push_str(", ");
                    write_expr(&mut self.out, value)?;
                }
                self.out.push(')');
            }
            StmtKind::Reduce(r) => {
                write!(
                    self.out,
                    "{}({}, {}, dim={}",
                    r.kind.name(),
                    r.src.name,
                    r.dst.name,
                    r.dim
                )?;
                if !r.clear {
                    self.out.push_str(", clear=False");
                }
                self.out.push(')');
            }
            StmtKind::Barrier => self.out.push_str("T.sync_threads()"),
            StmtKind::GridSync => self.out.push_str("T.sync_grid()"),
            StmtKind::FinalizeReducer(r) => {
                write!(self.out, "T.finalize_reducer({})", r.name)?;
            }
            StmtKind::Fresh(bufs) => {
                let names: Vec<&str> = bufs.iter().map(|b| b.name.as_str()).collect();
                write!(self.out, "T.fresh({})", names.join(", "))?;
            }
            StmtKind::AllReduce(r) => {
                write!(self.out, "T.thread_allreduce(\"{}\", ", r.op.name())?;
                write_expr(&mut self.out, &r.value)?;
                write!(self.out, ", {}[", r.buffer.name)?;
                write_list(&mut self.out, &r.indices)?;
                self.out.push(']');
                for t in &r.threads {
                    write!(self.out, ", {}", t.name)?;
                }
                if let Some(s) = &r.scratch {
                    write!(self.out, ", scratch={}", s.name)?;
                }
                self.out.push(')');
            }
            StmtKind::Note(text) => {
                self.out.push_str("T.note(");
                write_string(&mut self.out, text);
                self.out.push(')');
            }
            StmtKind::Intrinsic(i) => self.intrinsic(i)?,
            // Handled above.
            StmtKind::Kernel(_)
            | StmtKind::For(_)
            | StmtKind::If { .. }
            | StmtKind::While { .. } => {}
        }
        self.out.push('\n');
        Ok(())
    }

    /// `T.cp_async(S[i, j], A[k, l], 16)`, `T.ldmatrix(F[0], S[r, c], num=4, trans=False)`, …:
    /// the definition's name and every argument given, in parameter order, keyword
    /// parameters as `name=value` (a left-out predicate is not written).
    fn intrinsic(&mut self, i: &crate::ir::Intrinsic) -> fmt::Result {
        use crate::intrinsic::{Arg, ParamKind};
        let def = i.def();
        write!(self.out, "{}(", def.name)?;
        let mut first = true;
        for (param, arg) in def.params.iter().zip(i.args()) {
            if arg == Arg::Pred(None) {
                continue;
            }
            // A keyword range parameter at its default is left out (`multicast=0`), and so
            // are an unset flag (`packed_int4=False`) and a keyword run-time value that is
            // its default's literal (`width=32`).
            match (param.keyword, param.kind, arg) {
                (_, ParamKind::Flag, Arg::Bool(false)) => continue,
                (
                    true,
                    ParamKind::IntRange {
                        default: Some(d), ..
                    },
                    Arg::Int(v),
                ) if v == d => continue,
                (true, ParamKind::Value { default: Some(d) }, Arg::Value(e)) if matches!(e.kind, crate::ir::ExprKind::Int(v) if v == d) => {
                    continue
                }
                _ => {}
            }
            // A message left out stays out (`T.print_msg` always has one).
            if param.keyword && arg == Arg::Text("") {
                continue;
            }
            if !first {
                self.out.push_str(", ");
            }
            first = false;
            if param.keyword {
                write!(self.out, "{}=", param.name)?;
            }
            match arg {
                Arg::Ref(r) => self.elem_ref(r)?,
                Arg::Int(v) => write!(self.out, "{v}")?,
                Arg::Bool(b) => self.out.push_str(if b { "True" } else { "False" }),
                Arg::Pred(Some(p)) | Arg::Value(p) => write_expr(&mut self.out, p)?,
                Arg::Text(t) => write_string(&mut self.out, t),
                Arg::Pred(None) => {}
                // `(64,)`: a one-entry tuple keeps its comma, as in Python.
                Arg::Ints([v]) => write!(self.out, "({v},)")?,
                Arg::Ints(vs) => {
                    let items: Vec<String> = vs.iter().map(ToString::to_string).collect();
                    write!(self.out, "({})", items.join(", "))?;
                }
            }
        }
        self.out.push(')');
        Ok(())
    }

    fn elem_ref(&mut self, r: &crate::ir::ElemRef) -> fmt::Result {
        write!(self.out, "{}[", r.buffer.name)?;
        write_list(&mut self.out, &r.indices)?;
        self.out.push(']');
        Ok(())
    }

    /// Prints `cond:` and the bodies; the caller wrote the indentation and `if ` / `elif `.
    fn if_chain(
        &mut self,
        cond: &crate::ir::Expr,
        then_body: &[Stmt],
        else_body: &[Stmt],
        depth: usize,
    ) -> fmt::Result {
        write_expr(&mut self.out, cond)?;
        self.out.push_str(":\n");
        self.body(then_body, depth + 1)?;
        match else_body {
            [] => Ok(()),
            [Stmt {
                kind:
                    StmtKind::If {
                        cond,
                        then_body,
                        else_body,
                    },
                ..
            }] => {
                self.indent(depth);
                self.out.push_str("elif ");
                self.if_chain(cond, then_body, else_body, depth)
            }
            _ => {
                self.indent(depth);
                self.out.push_str("else:\n");
                self.body(else_body, depth + 1)
            }
        }
    }

    fn kernel(&mut self, k: &Kernel, depth: usize) -> fmt::Result {
        self.indent(depth);
        self.out.push_str("with T.Kernel(");
        write_list(&mut self.out, &k.grid)?;
        if !k.grid.is_empty() {
            self.out.push_str(", ");
        }
        self.out.push_str("threads=");
        if k.threads.len() == 1 {
            write_list(&mut self.out, &k.threads)?;
        } else {
            self.out.push('(');
            write_list(&mut self.out, &k.threads)?;
            self.out.push(')');
        }
        match k.cluster.as_slice() {
            [] => {}
            [one] => write!(self.out, ", cluster_dims={one}")?,
            many => {
                self.out.push_str(", cluster_dims=(");
                write_list(&mut self.out, many)?;
                self.out.push(')');
            }
        }
        self.out.push(')');
        match k.block_vars.as_slice() {
            [] => {}
            [one] => write!(self.out, " as {}", one.name)?,
            many => {
                let names: Vec<&str> = many.iter().map(|v| v.name.as_str()).collect();
                write!(self.out, " as ({})", names.join(", "))?;
            }
        }
        self.out.push_str(":\n");
        let inner = depth + 1;
        let mut wrote = false;
        if let Some(s) = &k.swizzle {
            self.indent(inner);
            self.out.push_str("T.use_swizzle(panel_size=");
            write_expr(&mut self.out, &s.panel_size)?;
            if s.order == RasterOrder::Column {
                self.out.push_str(", order=\"column\"");
            }
            self.out.push_str(")\n");
            wrote = true;
        }
        if let Some(b) = &k.min_blocks_per_sm {
            self.indent(inner);
            self.out.push_str("T.min_blocks_per_sm(");
            write_expr(&mut self.out, b)?;
            self.out.push_str(")\n");
            wrote = true;
        }
        if k.no_set_max_nreg {
            self.indent(inner);
            self.out.push_str("T.no_set_max_nreg()\n");
            wrote = true;
        }
        for alloc in &k.allocs {
            match k.reducers.iter().find(|r| r.buffer.name == alloc.name.name) {
                Some(r) => self.reducer(alloc, r, inner)?,
                None => self.alloc(alloc, inner)?,
            }
            wrote = true;
        }
        if !k.layouts.is_empty() {
            self.indent(inner);
            self.out.push_str("T.annotate_layout({");
            for (i, ann) in k.layouts.iter().enumerate() {
                if i > 0 {
                    self.out.push_str(", ");
                }
                let name = &ann.buffer.name;
                match ann.layout {
                    Layout::Swizzled => write!(self.out, "{name}: T.make_swizzled_layout({name})")?,
                    Layout::Swizzle { bytes } => write!(
                        self.out,
                        "{name}: T.make_swizzled_layout({name}, bytes={bytes})"
                    )?,
                    Layout::Padded { pad } => {
                        write!(self.out, "{name}: T.make_padded_layout({name}, pad={pad})")?
                    }
                    Layout::MmaAccumulator { warps_m, warps_n } => write!(
                        self.out,
                        "{name}: T.mma_accumulator_layout({name}, warps_m={warps_m}, warps_n={warps_n})"
                    )?,
                    Layout::WgmmaSwizzle { bytes } => write!(
                        self.out,
                        "{name}: T.make_wgmma_swizzled_layout({name}, bytes={bytes})"
                    )?,
                    Layout::WgmmaAccumulator {
                        warpgroups_m,
                        warpgroups_n,
                    } => write!(
                        self.out,
                        "{name}: T.wgmma_accumulator_layout({name}, warpgroups_m={warpgroups_m}, warpgroups_n={warpgroups_n})"
                    )?,
                    Layout::Rows(RowsOf::Flat { cols }) => {
                        write!(self.out, "{name}: T.rows_layout({name}, cols={cols})")?
                    }
                    Layout::Rows(RowsOf::Mma { warps_m, warps_n }) => write!(
                        self.out,
                        "{name}: T.mma_rows_layout({name}, warps_m={warps_m}, warps_n={warps_n})"
                    )?,
                    Layout::Rows(RowsOf::Wgmma {
                        warpgroups_m,
                        warpgroups_n,
                    }) => write!(
                        self.out,
                        "{name}: T.wgmma_rows_layout({name}, warpgroups_m={warpgroups_m}, warpgroups_n={warpgroups_n})"
                    )?,
                }
            }
            self.out.push_str("})\n");
            wrote = true;
        }
        if let Some(arena) = &k.arena {
            self.indent(inner);
            write!(self.out, "T.shared_arena(bytes={}, offsets={{", arena.bytes)?;
            for (i, (name, offset)) in arena.offsets.iter().enumerate() {
                if i > 0 {
                    self.out.push_str(", ");
                }
                write!(self.out, "{}: {offset}", name.name)?;
            }
            self.out.push_str("})\n");
            wrote = true;
        }
        if wrote && k.body.is_empty() {
            // The block already has statements; `pass` would be noise.
            return Ok(());
        }
        self.body(&k.body, inner)
    }

    fn alloc(&mut self, decl: &BufferDecl, depth: usize) -> fmt::Result {
        self.indent(depth);
        let func = match decl.scope {
            Scope::Shared => "alloc_shared",
            Scope::Fragment => "alloc_fragment",
            Scope::Local => "alloc_local",
            // Not valid IR (the verifier rejects it); printed so that the dump stays readable.
            Scope::Global => "alloc_global",
        };
        write!(self.out, "{} = T.{func}(", decl.name.name)?;
        self.shape(&decl.shape)?;
        writeln!(self.out, ", \"{}\")", decl.dtype)
    }

    /// `R = T.alloc_reducer(shape, "dtype", op="sum", replication="all")`: every argument
    /// spelled out.
    fn reducer(&mut self, decl: &BufferDecl, r: &Reducer, depth: usize) -> fmt::Result {
        self.indent(depth);
        write!(self.out, "{} = T.alloc_reducer(", decl.name.name)?;
        self.shape(&decl.shape)?;
        writeln!(
            self.out,
            ", \"{}\", op=\"{}\", replication=\"{}\")",
            decl.dtype,
            r.op.name(),
            r.replication.name()
        )
    }

    fn for_loop(&mut self, f: &For, depth: usize) -> fmt::Result {
        self.indent(depth);
        if f.kind == ForKind::Parallel {
            return self.parallel(f, depth);
        }
        write!(self.out, "for {} in ", f.var.name)?;
        let name = match &f.kind {
            ForKind::Serial => "T.serial",
            ForKind::Unroll => "T.unroll",
            ForKind::Pipelined { .. } => "T.Pipelined",
            ForKind::ThreadBinding(_) => "T.thread_binding",
            ForKind::Parallel => "T.Parallel",
            ForKind::Vectorized => "T.vectorized",
        };
        write!(self.out, "{name}(")?;
        self.bounds(f)?;
        match &f.kind {
            ForKind::Pipelined {
                num_stages,
                order,
                stage,
            } => {
                write!(self.out, ", num_stages={num_stages}")?;
                if !order.is_empty() {
                    write!(self.out, ", order={}", int_list(order))?;
                }
                if !stage.is_empty() {
                    write!(self.out, ", stage={}", int_list(stage))?;
                }
            }
            ForKind::ThreadBinding(tag) => write!(self.out, ", thread=\"{}\"", tag.name())?,
            _ => {}
        }
        self.out.push_str("):\n");
        self.body(&f.body, depth + 1)
    }

    /// `n` when the loop starts at the literal 0, else `a, b`.
    fn bounds(&mut self, f: &For) -> fmt::Result {
        if f.start.as_int() != Some(0) {
            write_expr(&mut self.out, &f.start)?;
            self.out.push_str(", ");
        }
        write_expr(&mut self.out, &f.stop)
    }

    /// `for i, j in T.Parallel(a, b):`, merging directly nested parallel loops.
    fn parallel(&mut self, f: &For, depth: usize) -> fmt::Result {
        let mut nest = vec![f];
        let mut innermost = f;
        while let [Stmt {
            kind: StmtKind::For(inner),
            ..
        }] = innermost.body.as_slice()
        {
            if inner.kind != ForKind::Parallel || !starts_at_zero(inner) {
                break;
            }
            nest.push(inner);
            innermost = inner;
        }
        if !starts_at_zero(f) {
            // Not valid IR (parallel loops start at 0); printed as one loop with both bounds so
            // the problem stays visible.
            nest.truncate(1);
            innermost = f;
            write!(self.out, "for {} in T.Parallel(", f.var.name)?;
            self.bounds(f)?;
        } else {
            let vars: Vec<&str> = nest.iter().map(|l| l.var.name.as_str()).collect();
            write!(self.out, "for {} in T.Parallel(", vars.join(", "))?;
            write_list(&mut self.out, nest.iter().map(|l| &l.stop))?;
        }
        self.out.push_str("):\n");
        self.body(&innermost.body, depth + 1)
    }

    fn gemm(&mut self, g: &Gemm) -> fmt::Result {
        self.out.push_str("T.gemm(");
        write_plain_region(&mut self.out, &g.a, &self.decls)?;
        self.out.push_str(", ");
        write_plain_region(&mut self.out, &g.b, &self.decls)?;
        self.out.push_str(", ");
        write_plain_region(&mut self.out, &g.c, &self.decls)?;
        if g.trans_a {
            self.out.push_str(", transpose_A=True");
        }
        if g.trans_b {
            self.out.push_str(", transpose_B=True");
        }
        if g.policy != WarpPolicy::Square {
            write!(self.out, ", policy=T.GemmWarpPolicy.{}", g.policy.name())?;
        }
        if g.clear_accum {
            self.out.push_str(", clear_accum=True");
        }
        if g.packed_int4 {
            self.out.push_str(", packed_int4=True");
        }
        self.out.push(')');
        Ok(())
    }
}

/// `text` as a double-quoted string literal that the lexer reads back to `text`.
/// An expression as the printer writes it (`T.print`'s default message quotes it).
pub fn expr_text(expr: &crate::ir::Expr) -> String {
    let mut out = String::new();
    let _ = write_expr(&mut out, expr);
    out
}

fn write_string(out: &mut String, text: &str) {
    out.push('"');
    escape_string(out, text);
    out.push('"');
}

/// Appends `text` with quotes and backslashes escaped, newlines, tabs and carriage returns
/// as `\n`, `\t`, `\r` and any other control character as `\xNN` (the lexer's escapes);
/// everything else as it is. The result holds no control character.
pub fn escape_string(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            // Control characters (Unicode's Cc) are all below U+0100: two hex digits.
            c if c.is_control() => {
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
}

fn starts_at_zero(f: &For) -> bool {
    f.start.as_int() == Some(0)
}

/// `[0, 1, 2]`.
fn int_list(values: &[i64]) -> String {
    let items: Vec<String> = values.iter().map(|v| v.to_string()).collect();
    format!("[{}]", items.join(", "))
}
