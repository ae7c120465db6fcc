//! `widen-int4-gemm` (tile level, sm_90a): an int4 × int4 → int32 `T.gemm` runs on wgmma
//! as int8 × int8. Hopper's tensor cores have no int4 rate — wgmma has no `.s4` form and
//! sm_90 runs mma.sync's `m16n8k64 .s4` far below its int8 rate (H200, docs/perf.md: 3.14
//! ms for a 4096³ int4 GEMM against 0.15 ms for int8) — while every int4 value (−8..=7)
//! is an int8 value and every product and sum stays exact in int32.
//!
//! So each int4 shared operand `X` of such a gemm becomes int8 (one value per byte, the
//! shape unchanged), and every `T.copy(src, X[r])` filling it becomes a copy of the packed
//! bytes into a new int4 buffer `X_int4` of `X`'s shape (still a whole-byte copy:
//! cp.async or TMA after `pack-int4`) and a `T.Parallel` nest over `r` that widens each
//! element, `X[r] = X_int4[r]` (`pack-int4` turns the load into its nibble, sign-extended).
//!
//! Taken only where it is exact and wgmma can run it: both operands int4 shared buffers,
//! `C` int32, K-major operands (no `transpose_A`, `transpose_B`: wgmma reads 8-bit operands
//! K-major only), and every use of `X` a copy into it with constant extents or an operand
//! of such gemms. Elsewhere the gemm keeps its int4 form (mma.sync on both targets).

use crate::analysis::kernels::for_each_kernel;
use crate::context::PassContext;
use crate::names::NameSet;
use crate::pass::Pass;
use std::collections::{BTreeSet, HashMap};
use tlc_ir::build::{for_loop, load, store};
use tlc_ir::verifier::const_int;
use tlc_ir::visit::{child_bodies_mut, for_each_stmt, stmt_buffer_uses};
use tlc_ir::{
    BinOp, BufferDecl, DType, Diagnostic, Expr, ForKind, Ident, Kernel, PrimFunc, Region, Scope,
    Stmt, StmtKind, Target,
};

pub struct WidenInt4Gemm;

impl Pass for WidenInt4Gemm {
    fn name(&self) -> &'static str {
        "widen-int4-gemm"
    }

    fn description(&self) -> &'static str {
        "sm_90a: an int4 x int4 -> int32 gemm's shared operands become int8 (wgmma .s8), filled by widening copies of their packed bytes"
    }

    fn run(&self, mut func: PrimFunc, cx: &PassContext) -> Result<PrimFunc, Vec<Diagnostic>> {
        if cx.target() != Target::Sm90a {
            return Ok(func);
        }
        let mut names = NameSet::of(&func);
        for_each_kernel(&mut func.body, &mut |k, _| widen_kernel(k, &mut names));
        Ok(func)
    }
}

fn widen_kernel(k: &mut Kernel, names: &mut NameSet) {
    let operands = widened_operands(k);
    if operands.is_empty() {
        return;
    }
    let mut packed: HashMap<String, String> = HashMap::new();
    let mut new_allocs = Vec::new();
    for d in &mut k.allocs {
        if operands.contains(&d.name.name) {
            let p = names.fresh(&format!("{}_int4", d.name.name));
            new_allocs.push(BufferDecl {
                name: Ident::new(p.clone(), d.span),
                dtype: DType::Int4,
                shape: d.shape.clone(),
                scope: Scope::Shared,
                span: d.span,
            });
            packed.insert(d.name.name.clone(), p);
            d.dtype = DType::Int8;
        }
    }
    k.allocs.extend(new_allocs);
    rewrite_copies(&mut k.body, &packed, names);
}

/// The int4 shared buffers every use of which is a copy into them (constant extents) or
/// an operand of a gemm wgmma can run as int8 — only gemms both of whose operands are such.
fn widened_operands(k: &Kernel) -> BTreeSet<String> {
    let decl = |n: &str| k.allocs.iter().find(|b| b.name.name == n);
    let int4_shared =
        |n: &str| decl(n).is_some_and(|b| b.dtype == DType::Int4 && b.scope == Scope::Shared);
    let int32 = |n: &str| decl(n).is_some_and(|b| b.dtype == DType::Int32);
    let mut gemms: Vec<(String, String)> = Vec::new();
    let mut other_uses: BTreeSet<String> = BTreeSet::new();
    for_each_stmt(&k.body, &mut |s| match &s.kind {
        StmtKind::Gemm(g)
            if int4_shared(&g.a.buffer.name)
                && int4_shared(&g.b.buffer.name)
                && int32(&g.c.buffer.name)
                && !g.trans_a
                && g.trans_b =>
        {
            gemms.push((g.a.buffer.name.clone(), g.b.buffer.name.clone()));
        }
        StmtKind::Copy { src, dst }
            if int4_shared(&dst.buffer.name)
                && src.buffer.name != dst.buffer.name
                && constant_extents(dst) =>
        {
            // Everything else the copy names counts (its source, loads in its bounds).
            for (n, _) in stmt_buffer_uses(s) {
                if n != dst.buffer.name {
                    other_uses.insert(n.to_string());
                }
            }
        }
        _ => {
            for (n, _) in stmt_buffer_uses(s) {
                other_uses.insert(n.to_string());
            }
        }
    });
    // A gemm whose operands are used otherwise keeps int4; so does the other operand of a
    // gemm that keeps it.
    let mut keep: BTreeSet<String> = other_uses;
    loop {
        let before = keep.len();
        for (a, b) in &gemms {
            if keep.contains(a) || keep.contains(b) {
                keep.insert(a.clone());
                keep.insert(b.clone());
            }
        }
        if keep.len() == before {
            break;
        }
    }
    gemms
        .into_iter()
        .flat_map(|(a, b)| [a, b])
        .filter(|n| !keep.contains(n))
        .collect()
}

fn constant_extents(r: &Region) -> bool {
    !r.ranges.is_empty() && r.ranges.iter().all(|rg| const_int(&rg.extent).is_some())
}

/// `T.copy(src, X[r])` → `T.copy(src, X_int4[r])` and the widening nest over `r`.
fn rewrite_copies(body: &mut Vec<Stmt>, packed: &HashMap<String, String>, names: &mut NameSet) {
    let old = std::mem::take(body);
    for mut stmt in old {
        if let StmtKind::Copy { dst, .. } = &mut stmt.kind {
            if let Some(p) = packed.get(&dst.buffer.name) {
                let target = dst.clone();
                dst.buffer.name = p.clone();
                let span = stmt.span;
                body.push(stmt);
                body.push(widen_nest(&target, p, names, span));
                continue;
            }
        }
        for child in child_bodies_mut(&mut stmt) {
            rewrite_copies(child, packed, names);
        }
        body.push(stmt);
    }
}

/// `for v0, v1, … in T.Parallel(extents): X[s0 + v0, …] = X_int4[s0 + v0, …]` over the
/// region `r` of `X`.
fn widen_nest(r: &Region, packed: &str, names: &mut NameSet, span: tlc_ir::Span) -> Stmt {
    let vars: Vec<String> = (0..r.ranges.len())
        .map(|d| names.fresh(&format!("w{d}")))
        .collect();
    let at: Vec<Expr> = r
        .ranges
        .iter()
        .zip(&vars)
        .map(|(rg, v)| {
            let var = Expr::var(v);
            match const_int(&rg.start) {
                Some(0) => var,
                _ => Expr::binary(BinOp::Add, rg.start.clone(), var, span),
            }
        })
        .collect();
    let mut stmt = store(&r.buffer.name, at.clone(), load(packed, at, span), span);
    for (rg, v) in r.ranges.iter().zip(&vars).rev() {
        stmt = for_loop(v, rg.extent.clone(), ForKind::Parallel, vec![stmt], span);
    }
    stmt
}
