//! Fragments (`T.alloc_fragment`) become per-thread local arrays: the element with flat
//! (row-major) index `f` lives in thread `f % T` at slot `f / T`, so the allocation becomes
//! `T.alloc_local((ceil(numel / T),), dtype)`. A region touching a fragment iterates the
//! fragment's whole flat index space with `f = it * T + tx` and no vectors, so the slot of
//! the element it touches is `it`. A fragment annotated with
//! `T.mma_accumulator_layout` is laid out as `mma_layout.rs` says instead. Any other use of
//! a fragment is an error.

use super::mma_layout::MmaLayout;
use super::rows::RowsLayout;
use tlc_ir::verifier::const_int;
use tlc_ir::visit::{for_each_subexpr, stmt_exprs};
use tlc_ir::{
    BufferDecl, Diagnostic, Expr, ExprKind, Layout, LayoutAnnotation, Region, Scope, Stmt, StmtKind,
};

/// The fragments of one kernel.
#[derive(Default)]
pub(crate) struct Fragments {
    /// A set: asked at every access.
    names: std::collections::BTreeSet<String>,
    /// Fragments with the mma accumulator layout.
    mma: Vec<(String, MmaLayout)>,
    /// Row vectors (`rows.rs`).
    rows: Vec<(String, RowsLayout)>,
}

impl Fragments {
    pub fn of(allocs: &[BufferDecl], layouts: &[LayoutAnnotation]) -> Fragments {
        let names: std::collections::BTreeSet<String> = allocs
            .iter()
            .filter(|b| b.scope == Scope::Fragment)
            .map(|b| b.name.name.clone())
            .collect();
        let mma = layouts
            .iter()
            .filter_map(|ann| match ann.layout {
                Layout::MmaAccumulator { warps_m, warps_n } => {
                    let [m, n] = two_d(allocs, &ann.buffer.name)?;
                    Some((
                        ann.buffer.name.clone(),
                        MmaLayout {
                            m,
                            n,
                            warps_m,
                            warps_n,
                            wgmma: false,
                        },
                    ))
                }
                Layout::WgmmaAccumulator {
                    warpgroups_m,
                    warpgroups_n,
                } => {
                    let [m, n] = two_d(allocs, &ann.buffer.name)?;
                    Some((
                        ann.buffer.name.clone(),
                        MmaLayout::wgmma(m, n, warpgroups_m, warpgroups_n),
                    ))
                }
                _ => None,
            })
            .collect();
        Fragments {
            names,
            mma,
            rows: Vec::new(),
        }
    }

    /// Reads the rows layouts of the row vectors, for a block of `threads` threads; an
    /// error for each that does not fit.
    pub fn read_rows(
        &mut self,
        allocs: &[BufferDecl],
        layouts: &[LayoutAnnotation],
        threads: i64,
    ) -> Vec<Diagnostic> {
        let mut errors = Vec::new();
        for ann in layouts {
            let Layout::Rows(of) = ann.layout else {
                continue;
            };
            let Some(b) = allocs.iter().find(|b| b.name == ann.buffer) else {
                continue;
            };
            let len = match shape(b).as_deref() {
                Some([r]) => *r,
                _ => 0,
            };
            match RowsLayout::new(of, len, threads) {
                Ok(l) => self.rows.push((ann.buffer.name.clone(), l)),
                Err(why) => errors.push(Diagnostic::error(
                    b.span,
                    format!("the rows layout of `{}` does not fit: {why}", b.name.name),
                )),
            }
        }
        errors
    }

    /// The rows layout of row vector `name`, if it is one.
    pub fn rows(&self, name: &str) -> Option<RowsLayout> {
        self.rows.iter().find(|(n, _)| n == name).map(|&(_, l)| l)
    }

    /// The accumulator layout of fragment `name`, if it has one.
    pub fn mma(&self, name: &str) -> Option<MmaLayout> {
        self.mma.iter().find(|(n, _)| n == name).map(|&(_, l)| l)
    }

    /// Checks each accumulator layout against the block's thread count; an error points at
    /// the fragment's allocation (else at `kernel`, the kernel's statement).
    pub fn check_layouts(
        &self,
        threads: i64,
        allocs: &[BufferDecl],
        kernel: tlc_ir::Span,
    ) -> Vec<Diagnostic> {
        self.mma
            .iter()
            .filter_map(|(name, l)| {
                let msg = l.check(threads).err()?;
                let span = allocs
                    .iter()
                    .find(|b| &b.name.name == name)
                    .map_or(kernel, |b| b.span);
                Some(Diagnostic::error(
                    span,
                    format!("the mma accumulator layout of `{name}` does not fit: {msg}"),
                ))
            })
            .collect()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    pub fn contains(&self, name: &str) -> bool {
        self.names.contains(name)
    }

    /// Fragments must have constant shapes (their per-thread size is fixed).
    pub fn check_shapes(&self, allocs: &[BufferDecl]) -> Result<(), Vec<Diagnostic>> {
        let errors: Vec<Diagnostic> = allocs
            .iter()
            .filter(|b| self.contains(&b.name.name) && shape(b).is_none())
            .map(|b| {
                Diagnostic::error(
                    b.span,
                    format!("fragment `{}` needs a constant shape", b.name.name),
                )
            })
            .collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }

    /// Rewrites the fragment allocations into per-thread local arrays.
    pub fn relocate(&self, allocs: &mut [BufferDecl], threads: i64) {
        for b in allocs
            .iter_mut()
            .filter(|b| self.names.contains(&b.name.name))
        {
            let slots = self.slots(b, threads);
            b.scope = Scope::Local;
            b.shape = vec![Expr::new(ExprKind::Int(slots.max(1)), b.span)];
        }
    }

    /// The registers one thread holds of fragment `b` once relocated.
    pub fn slots(&self, b: &BufferDecl, threads: i64) -> i64 {
        let numel: i64 = shape(b).map_or(0, |s| s.iter().product());
        match (self.mma(&b.name.name), self.rows(&b.name.name)) {
            (Some(l), _) => l.slots(),
            (None, Some(r)) => r.slots(),
            (None, None) => (numel + threads - 1) / threads,
        }
    }

    /// Reports a fragment read or written by a statement that is not lowered to a region.
    pub fn check_scalar_use(&self, stmt: &Stmt, errors: &mut Vec<Diagnostic>) {
        let mut used: Option<String> = None;
        if let StmtKind::Store { buffer, .. } = &stmt.kind {
            if self.contains(&buffer.name) {
                used = Some(buffer.name.clone());
            }
        }
        for e in stmt_exprs(stmt) {
            for_each_subexpr(e, &mut |x| {
                if let ExprKind::Load { buffer, .. } = &x.kind {
                    if self.contains(buffer) && used.is_none() {
                        used = Some(buffer.clone());
                    }
                }
            });
        }
        if let Some(name) = used {
            errors.push(
                Diagnostic::error(
                    stmt.span,
                    format!("fragment `{name}` is used outside a tile op or T.Parallel loop"),
                )
                .with_note("a fragment is distributed over the threads; only T.copy, T.fill and T.Parallel loops over its whole shape can touch it"),
            );
        }
    }
}

/// The constant 2-D shape of the buffer called `name`.
fn two_d(allocs: &[BufferDecl], name: &str) -> Option<[i64; 2]> {
    let b = allocs.iter().find(|b| b.name.name == name)?;
    let s = shape(b)?;
    <[i64; 2]>::try_from(s.as_slice()).ok()
}

/// The constant shape of a buffer.
pub(crate) fn shape(b: &BufferDecl) -> Option<Vec<i64>> {
    b.shape.iter().map(const_int).collect()
}

/// Whether `r` is the whole of buffer `b` (every start 0, every extent the shape).
pub(crate) fn is_whole(r: &Region, b: &BufferDecl) -> bool {
    r.ranges.len() == b.shape.len()
        && r.ranges.iter().zip(&b.shape).all(|(range, dim)| {
            const_int(&range.start) == Some(0)
                && const_int(&range.extent).is_some()
                && const_int(&range.extent) == const_int(dim)
        })
}

/// The error for a region whose element space is not a fragment's whole flat index space.
pub(crate) fn mismatch(name: &str, span: tlc_ir::Span) -> Diagnostic {
    Diagnostic::error(
        span,
        format!("this op covers part of fragment `{name}`, which is not lowered yet"),
    )
    .with_note(
        "a fragment's element f lives in thread f % threads, so every op touching it must \
         cover its whole shape, element for element",
    )
}
