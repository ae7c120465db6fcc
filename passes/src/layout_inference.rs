//! `layout-inference`: chooses the layouts `lower-tile-ops` lays buffers out by, and
//! records them as `T.annotate_layout` entries of the kernel (so they print and can be
//! edited).
//!
//! Levels, as in TileLang: **strict** — what the user annotated is kept (an automatic
//! `T.make_swizzled_layout(X)` is resolved to a width); **gemm** — each `T.gemm` gives its
//! float32 or float16 accumulator fragment the mma.sync accumulator layout (one map of
//! elements to threads for both dtypes) over the warp partition of
//! its policy, and its shared operands an XOR swizzle chosen by the row width (128, 64 or
//! 32 bytes; rows of 16 bytes get 16 bytes of padding; anything else has no layout that
//! fits and is an error naming the buffer) — on sm_90a the wgmma layouts where
//! `analysis::wgmma::plan` allows (a fragment A that wgmma reads from registers gets the
//! accumulator layout of its own tile); **propagate** — the buffer/op graph (petgraph)
//! is walked breadth-first from every fragment with a layout: a fragment of the same shape
//! reached through a `T.copy` or a `T.Parallel` nest gets the same layout (the fragments a
//! row vector follows count as joined). Other fragments keep the default (flat) layout;
//! **rows** — each row vector (`analysis::rows`) gets the rows layout of the fragments it
//! follows (`T.rows_layout`, `T.mma_rows_layout`, `T.wgmma_rows_layout`).
//!
//! Warp partition (`T.GemmWarpPolicy`), for `W = threads / 32` warps (`threads` the block's
//! thread count, `X * Y * Z` for `threads=(X, Y, Z)`) and an `M x N` tile:
//! the candidates are `WM x WN = W` with `M % (16 WM) == 0` and `N % (16 WN) == 0`;
//! `Square` takes the one whose warp tile is closest to square (`|M/WM - N/WN|` smallest,
//! then the larger `WM`), `FullRow` needs `WM = W`, `FullCol` needs `WN = W`. 128 x 128 with
//! 4 warps gives 2 x 2 warps of 64 x 64. Only when the policy finds no candidate so are
//! warp tiles of 16 x 8 multiples considered (`N % (8 WN) == 0`, the mma tile itself, as
//! TileLang's partition): MLA's 64 x 64 scores over 8 warps `FullCol` are 8 warps of
//! 64 x 8. Kernels with a 16 x 16 partition keep it (a B `ldmatrix.x4` per two n-tiles).
//! Where `FullRow` (`FullCol`) still finds none, TileLang's fallback takes the most warps
//! along M (N) that fit and the rest along the other dimension
//! (`analysis::mma::one_dim_fallback`): sparse MLA's 64 x 64 scores over 8 warps `FullRow`
//! are 4 x 2 warps of 16 x 32.

use crate::analysis::access::element_accesses;
use crate::analysis::block::Block;
use crate::analysis::kernels::for_each_kernel;
use crate::analysis::mma;
use crate::analysis::rows::RowVectors;
use crate::analysis::wgmma;
use crate::context::PassContext;
use crate::pass::Pass;
use petgraph::graph::{NodeIndex, UnGraph};
use petgraph::visit::Bfs;
use std::collections::HashMap;
use tlc_ir::verifier::const_int;
use tlc_ir::visit::{child_bodies, for_each_stmt};
use tlc_ir::{
    BufferDecl, DType, Diagnostic, ForKind, Gemm, Ident, Kernel, Layout, LayoutAnnotation,
    PrimFunc, RowsOf, Scope, Span, Stmt, StmtKind, Target,
};

pub struct LayoutInference;

impl Pass for LayoutInference {
    fn name(&self) -> &'static str {
        "layout-inference"
    }

    fn description(&self) -> &'static str {
        "layouts for gemm fragments (mma accumulator) and shared operands (XOR swizzle), propagated through copies"
    }

    fn run(&self, mut func: PrimFunc, cx: &PassContext) -> Result<PrimFunc, Vec<Diagnostic>> {
        let mut errors = Vec::new();
        let target = cx.target();
        for_each_kernel(&mut func.body, &mut |k, span| {
            infer(k, span, target, &mut errors)
        });
        if errors.is_empty() {
            Ok(func)
        } else {
            Err(errors)
        }
    }
}

/// The layouts of one kernel while they are being inferred.
struct Layouts<'a> {
    allocs: &'a [BufferDecl],
    chosen: Vec<LayoutAnnotation>,
    errors: &'a mut Vec<Diagnostic>,
}

impl Layouts<'_> {
    fn get(&self, name: &str) -> Option<Layout> {
        self.chosen
            .iter()
            .find(|a| a.buffer.name == name)
            .map(|a| a.layout)
    }

    /// Records `layout` for `name`, or reports a conflict with the one it has.
    fn set(&mut self, name: &str, layout: Layout, span: Span, why: &str) -> bool {
        match self.get(name) {
            Some(old) if old == layout => true,
            Some(old) => {
                self.errors.push(
                    Diagnostic::error(
                        span,
                        format!(
                            "conflicting layouts for `{name}`: {why} needs {}",
                            describe(layout)
                        ),
                    )
                    .with_note(format!("`{name}` already has {}", describe(old))),
                );
                false
            }
            None => {
                let decl_span = self
                    .allocs
                    .iter()
                    .find(|b| b.name.name == name)
                    .map_or(span, |b| b.name.span);
                self.chosen.push(LayoutAnnotation {
                    buffer: Ident::new(name, decl_span),
                    layout,
                    span: decl_span,
                });
                true
            }
        }
    }
}

fn describe(l: Layout) -> String {
    match l {
        Layout::Swizzled => "an automatic swizzle".into(),
        Layout::Swizzle { bytes } => format!("a {bytes}-byte swizzle"),
        Layout::Padded { pad } => format!("{pad} elements of row padding"),
        Layout::WgmmaSwizzle { bytes } => format!("the {bytes}-byte wgmma swizzle"),
        Layout::WgmmaAccumulator {
            warpgroups_m,
            warpgroups_n,
        } => {
            format!("the wgmma accumulator layout over {warpgroups_m} x {warpgroups_n} warpgroups")
        }
        Layout::MmaAccumulator { warps_m, warps_n } => {
            format!("the mma accumulator layout over {warps_m} x {warps_n} warps")
        }
        Layout::Rows(RowsOf::Flat { cols }) => {
            format!("the rows of a flat fragment of {cols} columns")
        }
        Layout::Rows(RowsOf::Mma { warps_m, warps_n }) => {
            format!("the rows of the mma accumulator layout over {warps_m} x {warps_n} warps")
        }
        Layout::Rows(RowsOf::Wgmma {
            warpgroups_m,
            warpgroups_n,
        }) => format!(
            "the rows of the wgmma accumulator layout over {warpgroups_m} x {warpgroups_n} warpgroups"
        ),
    }
}

/// The shared layout for rows of `buf`: an XOR swizzle by row width, else padding.
fn shared_layout(buf: &BufferDecl) -> Result<Layout, String> {
    let size = i64::from(buf.dtype.bytes());
    let row = buf.shape.last().and_then(const_int).map(|n| n * size);
    match row {
        _ if buf.shape.len() < 2 => Err("it is not a matrix".into()),
        Some(r) if r > 0 && r % 128 == 0 => Ok(Layout::Swizzle { bytes: 128 }),
        Some(r) if r > 0 && r % 64 == 0 => Ok(Layout::Swizzle { bytes: 64 }),
        Some(r) if r > 0 && r % 32 == 0 => Ok(Layout::Swizzle { bytes: 32 }),
        Some(r) if r > 0 && r % 16 == 0 => Ok(Layout::Padded { pad: 16 / size }),
        Some(r) => Err(format!(
            "its rows are {r} bytes; ldmatrix needs rows of a multiple of 16 bytes"
        )),
        None => Err("its row length is not a constant".into()),
    }
}

/// The warp grid of a gemm on mma.sync (see the module summary); it lives with the
/// analyses, which `stage-fragment-reads` asks too.
pub use crate::analysis::mma::warp_partition;

fn infer(k: &mut Kernel, span: Span, target: Target, errors: &mut Vec<Diagnostic>) {
    // The linear thread count: warps are formed from consecutive linear thread ids
    // whatever the block's shape (analysis/block.rs).
    let threads = Block::of(k, span).ok().map(|b| b.threads());
    let mut gemms: Vec<(Gemm, Span)> = Vec::new();
    for_each_stmt(&k.body, &mut |s| {
        if let StmtKind::Gemm(g) = &s.kind {
            gemms.push((g.clone(), s.span));
        }
    });
    let allocs = k.allocs.clone();
    let mut layouts = Layouts {
        allocs: &allocs,
        chosen: Vec::new(),
        errors,
    };
    // Strict: the user's annotations, automatic swizzles resolved.
    for ann in &k.layouts {
        let layout = match (ann.layout, allocs.iter().find(|b| b.name == ann.buffer)) {
            (Layout::Swizzled, Some(b)) => match shared_layout(b) {
                Ok(l @ Layout::Swizzle { .. }) => l,
                _ => {
                    layouts.errors.push(Diagnostic::error(
                        ann.span,
                        format!(
                            "no XOR swizzle fits `{}`: its rows must be a multiple of 32 bytes",
                            ann.buffer.name
                        ),
                    ));
                    continue;
                }
            },
            (l, _) => l,
        };
        layouts.set(&ann.buffer.name, layout, ann.span, "the annotation");
    }
    // Gemm: accumulator and shared operands.
    let all_gemms: Vec<Gemm> = gemms.iter().map(|(g, _)| g.clone()).collect();
    for (g, gspan) in &gemms {
        let Some(c) = allocs.iter().find(|b| b.name.name == g.c.buffer.name) else {
            continue;
        };
        // int32 accumulates int8 inputs (wgmma's and mma.sync's `.s32` forms; the verifier
        // pairs the dtypes).
        if c.scope != Scope::Fragment
            || !matches!(c.dtype, DType::Float32 | DType::Float16 | DType::Int32)
        {
            layouts.errors.push(Diagnostic::error(
                g.c.span,
                format!(
                    "the T.gemm accumulator `{}` must be a float32, float16 (or, for int8 inputs, int32) T.alloc_fragment (it is {} {})",
                    c.name.name,
                    c.scope.name(),
                    c.dtype
                ),
            ));
            continue;
        }
        let shape: Option<Vec<i64>> = c.shape.iter().map(const_int).collect();
        let (Some([m, n]), Some(t)) = (shape.as_deref(), threads) else {
            layouts.errors.push(Diagnostic::error(
                g.c.span,
                format!("the T.gemm accumulator `{}` needs a constant 2-D shape and a constant thread count", c.name.name),
            ));
            continue;
        };
        // sm_90a: wgmma where the gemm allows (analysis/wgmma.rs), else mma.sync.
        let find = |name: &str| allocs.iter().find(|b| b.name.name == name).cloned();
        let chosen = |name: &str| layouts.get(name);
        let planned = wgmma::plan(g, target, t, (*m, *n), &find, &chosen);
        let register_a = mma::reads_a_from_registers(g, &all_gemms, target, t, &find, &chosen);
        // fp8 has no mma.sync form; int8 has one for K-major operands (m16n8k32).
        if let (Err(why), Some(fp8)) = (&planned, wgmma::fp8_operand(g, &find)) {
            if fp8 != DType::Int8 || !wgmma::int8_mma_sync(g) {
                layouts
                    .errors
                    .push(wgmma::fp8_refusal(*gspan, fp8, (g.trans_a, g.trans_b), why));
                continue;
            }
        }
        if let Ok(plan) = planned {
            layouts.set(
                &c.name.name,
                Layout::WgmmaAccumulator {
                    warpgroups_m: plan.groups_m,
                    warpgroups_n: plan.groups_n,
                },
                *gspan,
                "this T.gemm (wgmma)",
            );
            for (r, layout) in [
                (&g.a, plan.a.layout(plan.groups_m)),
                (
                    &g.b,
                    Layout::WgmmaSwizzle {
                        bytes: plan.b_bytes,
                    },
                ),
            ] {
                layouts.set(&r.buffer.name, layout, *gspan, "this T.gemm (wgmma)");
            }
            continue;
        }
        if t % target.warp_size() != 0 {
            layouts.errors.push(Diagnostic::error(
                *gspan,
                format!("T.gemm needs whole warps; the block has {t} threads"),
            ));
            continue;
        }
        match warp_partition(g.policy, t / target.warp_size(), *m, *n) {
            Some((warps_m, warps_n)) => {
                layouts.set(
                    &c.name.name,
                    Layout::MmaAccumulator { warps_m, warps_n },
                    *gspan,
                    "this T.gemm",
                );
                // A fragment A read from registers (`analysis::mma`) gets the accumulator
                // layout over the same warps, which makes it the mma's A fragment; the
                // scores it is copied from have it too (a conflict would be reported).
                if register_a {
                    layouts.set(
                        &g.a.buffer.name,
                        Layout::MmaAccumulator { warps_m, warps_n },
                        *gspan,
                        "this T.gemm (A from registers)",
                    );
                }
            }
            None => layouts.errors.push(
                Diagnostic::error(
                    g.c.span,
                    format!(
                        "no layout fits accumulator `{}`: {} warps ({} policy) cannot split a {m} x {n} tile into warp tiles of multiples of 16 x 8",
                        c.name.name,
                        t / target.warp_size(),
                        g.policy.name()
                    ),
                )
                .with_note("change the block tile, the thread count or the warp policy"),
            ),
        }
        for r in [&g.a, &g.b] {
            let Some(b) = allocs.iter().find(|b| b.name.name == r.buffer.name) else {
                continue;
            };
            if b.scope != Scope::Shared || layouts.get(&b.name.name).is_some() {
                continue;
            }
            match shared_layout(b) {
                Ok(l) => {
                    layouts.set(&b.name.name, l, *gspan, "this T.gemm");
                }
                Err(why) => layouts.errors.push(
                    Diagnostic::error(
                        r.span,
                        format!(
                            "no shared layout fits gemm operand `{}`: {why}",
                            b.name.name
                        ),
                    )
                    .with_note(format!("`{}` is declared here", b.name.name))
                    .with_note("give it a row length of a multiple of 16 bytes (8 float16)"),
                ),
            }
        }
    }
    let rows = threads.map_or_else(RowVectors::default, |t| {
        RowVectors::of(k, t, target.warp_size())
    });
    propagate(&k.body, &allocs, &rows, &mut layouts, span);
    row_layouts(&rows, &mut layouts, span);
    k.layouts = layouts.chosen;
}

/// Rows: every member of a row-vector class follows its anchors' layout (the flat one when
/// they have none).
fn row_layouts(rows: &RowVectors, layouts: &mut Layouts, span: Span) {
    for class in &rows.classes {
        let mut of: Vec<RowsOf> = class
            .anchors
            .iter()
            .map(|a| match layouts.get(a) {
                Some(Layout::MmaAccumulator { warps_m, warps_n }) => {
                    Some(RowsOf::Mma { warps_m, warps_n })
                }
                Some(Layout::WgmmaAccumulator {
                    warpgroups_m,
                    warpgroups_n,
                }) => Some(RowsOf::Wgmma {
                    warpgroups_m,
                    warpgroups_n,
                }),
                Some(_) => None,
                None => Some(RowsOf::Flat { cols: class.cols }),
            })
            .collect::<Option<Vec<_>>>()
            .unwrap_or_default();
        if class.flat_nests {
            of.push(RowsOf::Flat { cols: class.cols });
        }
        let mut distinct: Vec<RowsOf> = Vec::new();
        for o in of {
            if !distinct.contains(&o) {
                distinct.push(o);
            }
        }
        let of = distinct;
        let anchors = class
            .anchors
            .iter()
            .cloned()
            .collect::<Vec<_>>()
            .join("`, `");
        let [of] = of.as_slice() else {
            // An anchor that got no layout (an error already reported) reads as flat here:
            // that error is the cause, not this one.
            if !layouts.errors.is_empty() {
                continue;
            }
            layouts.errors.push(
                Diagnostic::error(
                    span,
                    format!(
                        "no register layout fits row vector `{}`: the fragments it follows \
                         (`{anchors}`) have different layouts",
                        class.members.iter().next().map_or("", String::as_str)
                    ),
                )
                .with_note("broadcast a row vector along fragments laid out alike"),
            );
            continue;
        };
        for m in &class.members {
            layouts.set(m, Layout::Rows(*of), span, "a row vector");
        }
    }
}

/// Walks the buffer/op graph from every fragment with a layout (see the module summary).
fn propagate(
    body: &[Stmt],
    allocs: &[BufferDecl],
    rows: &RowVectors,
    layouts: &mut Layouts,
    span: Span,
) {
    let fragments: Vec<&BufferDecl> = allocs
        .iter()
        .filter(|b| b.scope == Scope::Fragment)
        .collect();
    if fragments.is_empty() {
        return;
    }
    let mut graph: UnGraph<Option<&str>, ()> = UnGraph::new_undirected();
    let nodes: HashMap<&str, NodeIndex> = fragments
        .iter()
        .map(|b| {
            (
                b.name.name.as_str(),
                graph.add_node(Some(b.name.name.as_str())),
            )
        })
        .collect();
    // One op node per copy / parallel nest, joined to the fragments it touches.
    let mut ops: Vec<Vec<String>> = Vec::new();
    collect_ops(body, &mut ops);
    // A row vector joins the fragments whose rows it follows: they need one layout.
    ops.extend(
        rows.classes
            .iter()
            .map(|c| c.anchors.iter().cloned().collect()),
    );
    for touched in &ops {
        let op = graph.add_node(None);
        for name in touched {
            if let Some(&n) = nodes.get(name.as_str()) {
                graph.update_edge(op, n, ());
            }
        }
    }
    let shape = |name: &str| -> Option<Vec<i64>> {
        allocs
            .iter()
            .find(|b| b.name.name == name)
            .and_then(|b| b.shape.iter().map(const_int).collect())
    };
    let seeds: Vec<(String, Layout)> = fragments
        .iter()
        .filter_map(|b| Some((b.name.name.clone(), layouts.get(&b.name.name)?)))
        .collect();
    for (seed, layout) in seeds {
        let Some(&start) = nodes.get(seed.as_str()) else {
            continue;
        };
        let seed_shape = shape(&seed);
        let mut bfs = Bfs::new(&graph, start);
        while let Some(n) = bfs.next(&graph) {
            let Some(name) = graph[n] else {
                continue;
            };
            if name != seed && layouts.get(name).is_none() && shape(name) == seed_shape {
                layouts.set(name, layout, span, "propagation");
            }
        }
    }
}

/// The fragments each copy and each outermost parallel nest of `body` touch.
fn collect_ops(body: &[Stmt], out: &mut Vec<Vec<String>>) {
    for s in body {
        match &s.kind {
            StmtKind::Copy { src, dst } => {
                out.push(vec![src.buffer.name.clone(), dst.buffer.name.clone()]);
            }
            StmtKind::For(f) if f.kind == ForKind::Parallel => {
                let touched = element_accesses(std::slice::from_ref(s));
                out.push(touched.into_iter().map(|(b, _)| b).collect());
            }
            _ => {
                for c in child_bodies(s) {
                    collect_ops(c, out);
                }
            }
        }
    }
}
