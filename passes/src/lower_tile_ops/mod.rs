//! `lower-tile-ops`: every `T.copy`, `T.fill` / `T.clear` and every nest of `T.Parallel`
//! loops of a kernel becomes one SIMT region — a `T.thread_binding` loop over the block's
//! threads in which each thread does its share of the op's elements (docs/passes.md,
//! "lower-tile-ops"). Fragments become per-thread local
//! arrays. Scalar statements stay where they are; the notes of a `T.Parallel` nest go before
//! the region it becomes.
//!
//! Everything is written for the block's thread count `T` and one thread variable: a
//! 1-D block's `threadIdx.x`, or the linear index of a multi-dimensional block, whose
//! regions are thread nests (`analysis::block`; `region::thread_region` builds both).
//!
//! Files: `region.rs` (the thread mapping every region shares), `copy.rs`, `fill.rs`,
//! `parallel.rs` (the three ops), `fragment.rs` (fragment → local array), `vectorize.rs`
//! (when a region gets a `T.vectorized` loop), `gemm.rs` / `mma_layout.rs` (mma.sync and
//! wgmma), `reduce.rs` / `rows.rs`, `atomic.rs`, `swizzle.rs` (physical shared layouts),
//! `tma.rs` (sm_90a: software pipelines whose copies TMA can take, in the one-warpgroup
//! form the `warp-specialize` pass takes apart next).

mod atomic;
mod copy;
mod fill;
mod fragment;
mod gemm;
mod mma_layout;
mod parallel;
mod reduce;
mod region;
mod rows;
mod swizzle;
mod tma;
mod vectorize;

use crate::analysis::block::Block;
use crate::analysis::int::{self, Ranges};
use crate::analysis::kernels::{contains_tile_ops, for_each_kernel};
use crate::context::PassContext;
use crate::names::NameSet;
use crate::pass::Pass;
use fragment::Fragments;
use tlc_ir::verifier::Level;
use tlc_ir::visit::{child_bodies_mut, take_notes};
use tlc_ir::{
    BufferDecl, Diagnostic, ForKind, Kernel, Layout, LayoutAnnotation, PrimFunc, Span, Stmt,
    StmtKind, Target,
};

pub struct LowerTileOps;

impl Pass for LowerTileOps {
    fn name(&self) -> &'static str {
        "lower-tile-ops"
    }

    fn description(&self) -> &'static str {
        "T.copy / T.fill / T.Parallel nests -> one SIMT thread-binding region each; fragments -> per-thread arrays"
    }

    fn requires(&self) -> Level {
        Level::LaidOut
    }

    fn run(&self, mut func: PrimFunc, cx: &PassContext) -> Result<PrimFunc, Vec<Diagnostic>> {
        let mut names = NameSet::of(&func);
        let params = func.params.clone();
        let dims = int::dim_ranges(&func);
        let mut errors = Vec::new();
        let target = cx.target();
        for_each_kernel(&mut func.body, &mut |k, span| {
            lower_kernel(k, span, target, &params, &dims, &mut names, &mut errors)
        });
        if errors.is_empty() {
            Ok(func)
        } else {
            Err(errors)
        }
    }
}

/// What the op lowerings need to know about the kernel they are in.
pub(crate) struct Ctx<'a> {
    /// The target: what the copies may run on (TMA on sm_90a).
    pub target: Target,
    /// The block's shape; regions map onto its linear thread index (`analysis::block`).
    pub block: Block,
    /// Parameters and the kernel's allocations (fragments still as declared) by name (the
    /// first of a name): [`Ctx::buffer`] is asked at every access.
    pub by_name: std::collections::HashMap<&'a str, &'a BufferDecl>,
    pub fragments: &'a Fragments,
    /// The kernel's layout annotations.
    pub layouts: Vec<LayoutAnnotation>,
    /// Value ranges of the dims, the block indices and the loops around the op being
    /// lowered.
    pub bounds: std::cell::RefCell<Ranges>,
    /// Buffers the lowering adds to the kernel (gemm operand fragments, TMA mbarriers).
    pub new_allocs: std::cell::RefCell<Vec<BufferDecl>>,
    /// Which values of the kernel every thread agrees on (a TMA pipeline's loop start must).
    pub uniformity: crate::analysis::uniform::Uniformity,
}

impl Ctx<'_> {
    pub fn buffer(&self, name: &str) -> Option<&BufferDecl> {
        self.by_name.get(name).copied()
    }

    /// The layout annotated on buffer `name`.
    pub fn layout(&self, name: &str) -> Option<Layout> {
        self.layouts
            .iter()
            .find(|l| l.buffer.name == name)
            .map(|l| l.layout)
    }
}

fn lower_kernel(
    k: &mut Kernel,
    span: Span,
    target: Target,
    params: &[BufferDecl],
    dims: &Ranges,
    names: &mut NameSet,
    errors: &mut Vec<Diagnostic>,
) {
    // A kernel already written at the thread level has nothing to lower — unless it
    // allocates a fragment (tile-level storage, laid out here even when no tile op names
    // it; K9 keeps fragments out of its thread regions).
    let mut fragments = Fragments::of(&k.allocs, &k.layouts);
    if !contains_tile_ops(&k.body) && fragments.is_empty() {
        return;
    }
    let block = match Block::of(k, span) {
        Ok(b) => b,
        Err(mut e) => {
            errors.append(&mut e);
            return;
        }
    };
    let threads = block.threads();
    let before = errors.len();
    if let Err(mut e) = fragments.check_shapes(&k.allocs) {
        errors.append(&mut e);
        return;
    }
    let mut bad_layouts = fragments.check_layouts(threads, &k.allocs, span);
    bad_layouts.extend(fragments.read_rows(&k.allocs, &k.layouts, threads));
    if !bad_layouts.is_empty() {
        errors.append(&mut bad_layouts);
        return;
    }
    let uniformity = crate::analysis::uniform::Uniformity::of(k);
    let body = std::mem::take(&mut k.body);
    let new_body = {
        let buffers: Vec<&BufferDecl> = params.iter().chain(k.allocs.iter()).collect();
        let mut by_name = std::collections::HashMap::new();
        for b in &buffers {
            by_name.entry(b.name.name.as_str()).or_insert(*b);
        }
        let ctx = Ctx {
            target,
            block,
            by_name,
            fragments: &fragments,
            layouts: k.layouts.clone(),
            new_allocs: std::cell::RefCell::new(Vec::new()),
            uniformity,
            bounds: std::cell::RefCell::new({
                let mut ranges = dims.clone();
                int::enter_kernel(&mut ranges, k);
                ranges
            }),
        };
        // Pipelines on TMA first: the copies it takes become thread code here.
        let body = tma::rewrite(body, &ctx, names);
        let body = lower_body(body, &ctx, names, errors);
        (body, ctx.new_allocs.into_inner())
    };
    let (mut new_body, new_allocs) = new_body;
    k.allocs.extend(new_allocs);
    if errors.len() == before {
        fragments.relocate(&mut k.allocs, threads);
        swizzle::apply(&mut new_body, &k.allocs, &k.layouts);
        swizzle::pad_allocations(&mut k.allocs, &k.layouts);
        // Consumed: the accumulators are register arrays now and padded rows are in the
        // shapes. Swizzles stay, saying that the accesses are already physical (and
        // plan-shared-memory aligns those buffers for them).
        k.layouts.retain(|l| {
            matches!(
                l.layout,
                Layout::Swizzle { .. } | Layout::Swizzled | Layout::WgmmaSwizzle { .. }
            )
        });
    }
    k.body = new_body;
}

/// Lowers the ops of one statement list; everything else stays, recursively.
pub(crate) fn lower_body(
    body: Vec<Stmt>,
    ctx: &Ctx,
    names: &mut NameSet,
    errors: &mut Vec<Diagnostic>,
) -> Vec<Stmt> {
    let mut out = Vec::with_capacity(body.len());
    for mut stmt in body {
        let span = stmt.span;
        if let StmtKind::For(f) = &mut stmt.kind {
            if f.kind == ForKind::Parallel {
                // The notes of a parallel nest are said once, before the region it becomes.
                out.extend(take_notes(&mut f.body));
            }
        }
        let lowered = match &stmt.kind {
            StmtKind::Copy { src, dst } => Some(copy::lower(src, dst, span, ctx, names)),
            StmtKind::Fill { dst, value } => Some(fill::lower(dst, value, span, ctx, names)),
            StmtKind::For(f) if f.kind == ForKind::Parallel => {
                Some(parallel::lower(f, span, ctx, names))
            }
            StmtKind::Gemm(g) => Some(gemm::lower(g, span, ctx, names)),
            StmtKind::Reduce(r) => {
                match reduce::lower(r, span, ctx, names) {
                    Ok(regions) => out.extend(regions),
                    Err(mut e) => errors.append(&mut e),
                }
                continue;
            }
            // Thread code this pass already made (`tma.rs`): a kernel with the user's own
            // binding loops is not lowered at all.
            StmtKind::For(f) if matches!(f.kind, ForKind::ThreadBinding(_)) => {
                out.push(stmt);
                continue;
            }
            _ => None,
        };
        match lowered {
            Some(Ok(region)) => out.push(region),
            Some(Err(mut e)) => errors.append(&mut e),
            None => {
                ctx.fragments.check_scalar_use(&stmt, errors);
                // A loop's variable is bounded inside its body.
                let bound = match &stmt.kind {
                    StmtKind::For(f) => {
                        int::enter_loop(&mut ctx.bounds.borrow_mut(), f);
                        Some(f.var.name.clone())
                    }
                    _ => None,
                };
                for child in child_bodies_mut(&mut stmt) {
                    *child = lower_body(std::mem::take(child), ctx, names, errors);
                }
                if let Some(v) = bound {
                    ctx.bounds.borrow_mut().remove(&v);
                }
                // A let's variable holds its value's range for the rest of the list (names
                // are unique): `num_k_step = T.ceildiv(N, 512)` bounds a loop over it.
                if let StmtKind::Let { var, value, .. } = &stmt.kind {
                    let range = int::interval(value, &*ctx.bounds.borrow());
                    ctx.bounds.borrow_mut().insert(var.name.clone(), range);
                }
                out.push(stmt);
            }
        }
    }
    out
}
