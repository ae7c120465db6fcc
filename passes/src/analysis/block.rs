//! The thread block of a kernel as the tile-level lowering sees it: its shape
//! (`threads=(X, Y, Z)`), its thread count `T = X * Y * Z`, and the LINEAR thread index
//! `t = tx + X * ty + X * Y * tz` that every SIMT region of a multi-dimensional block is
//! written over. One place for these facts: `layout-inference`, `lower-tile-ops` and
//! `thread-binding` all read the block through [`Block`].
//!
//! Why the linear index: it is CUDA's own order of the threads of a block (the order warps
//! are formed in: warp `w` is linear ids `32w .. 32w + 31`, whatever `X` is), so a mapping
//! written for `T` flat threads — element `f` to thread `f % T`, warp `t / 32` issuing an
//! `mma.sync` — means the same on a `(32, 4)` or `(16, 8)` block as on `threads=128`.
//!
//! A region of a 1-D block is one `for tx in T.thread_binding(T, thread="threadIdx.x")`
//! loop, as it always was. A region of a multi-dimensional block is the *thread nest*
//!
//! ```python
//! for tx in T.thread_binding(X, thread="threadIdx.x"):
//!     for ty in T.thread_binding(Y, thread="threadIdx.y"):
//!         t = tx + ty * X
//!         ...                      # the region's body, over `t` only
//! ```
//!
//! (a `threadIdx.z` loop innermost for 3-D blocks, `t = tx + ty * X + tz * (X * Y)`): every
//! binding loop runs over its whole axis, as code generation requires, and the let gives the
//! later passes the range `0 .. T` of `t` (lets are ranged like loops).

use tlc_ir::build::{bin, for_loop};
use tlc_ir::verifier::const_int;
use tlc_ir::{
    BinOp, Diagnostic, Expr, ExprKind, For, ForKind, Ident, Kernel, Span, Stmt, StmtKind,
    ThreadTag, WarpPolicy,
};

/// The hardware index of each block axis, in nesting order.
const AXES: [ThreadTag; 3] = [ThreadTag::ThreadX, ThreadTag::ThreadY, ThreadTag::ThreadZ];

/// Base names of the nest's axis variables (fresh names are derived from them).
pub const AXIS_NAMES: [&str; 3] = ["tx", "ty", "tz"];

/// A kernel's block shape, every extent a positive constant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Block {
    dims: Vec<i64>,
}

/// A thread nest taken apart: its axis variables, the linear index and the body after the
/// let.
pub struct Nest<'a> {
    pub axes: Vec<&'a Ident>,
    pub index: &'a Ident,
    pub body: &'a [Stmt],
}

impl Block {
    /// The block of `k`: each entry of `threads=` a positive constant (located errors
    /// otherwise). The number of entries and the thread limits are the verifier's rules.
    pub fn of(k: &Kernel, span: Span) -> Result<Block, Vec<Diagnostic>> {
        if k.threads.is_empty() || k.threads.len() > AXES.len() {
            return Err(vec![Diagnostic::error(
                span,
                format!(
                    "a thread block has 1 to 3 dimensions, found {}",
                    k.threads.len()
                ),
            )]);
        }
        let mut dims = Vec::with_capacity(k.threads.len());
        let mut errors = Vec::new();
        for t in &k.threads {
            match const_int(t) {
                Some(v) if v > 0 => dims.push(v),
                _ => errors.push(Diagnostic::error(
                    t.span,
                    "the thread count must be a positive constant",
                )),
            }
        }
        if errors.is_empty() {
            Ok(Block { dims })
        } else {
            Err(errors)
        }
    }

    /// A 1-D block of `threads` threads.
    pub fn flat(threads: i64) -> Block {
        Block {
            dims: vec![threads],
        }
    }

    /// The extents, `threadIdx.x` first.
    pub fn dims(&self) -> &[i64] {
        &self.dims
    }

    /// Threads per block: the product of the extents (saturating; the verifier bounds it).
    pub fn threads(&self) -> i64 {
        self.dims.iter().fold(1i64, |a, &d| a.saturating_mul(d))
    }

    /// The shape as written: `(32, 4)`, or `128` for a 1-D block.
    pub fn shape_text(&self) -> String {
        match self.dims.as_slice() {
            [t] => t.to_string(),
            dims => {
                let d: Vec<String> = dims.iter().map(i64::to_string).collect();
                format!("({})", d.join(", "))
            }
        }
    }

    /// One dimension: regions are plain `threadIdx.x` loops.
    pub fn is_flat(&self) -> bool {
        self.dims.len() == 1
    }

    /// The base name of a region's thread variable: `tx` for a 1-D block (it IS
    /// `threadIdx.x`), `t` for the linear index of a multi-dimensional one.
    pub fn index_base(&self) -> &'static str {
        if self.is_flat() {
            AXIS_NAMES[0]
        } else {
            "t"
        }
    }

    /// `tx + ty * X + tz * (X * Y)` over the axis variables `axes`.
    pub fn linear(&self, axes: &[String], span: Span) -> Expr {
        let mut stride = 1i64;
        let mut sum: Option<Expr> = None;
        for (a, &d) in axes.iter().zip(&self.dims) {
            let term = bin(
                BinOp::Mul,
                Expr::new(ExprKind::Var(a.clone()), span),
                Expr::int(stride),
            );
            sum = Some(match sum {
                Some(s) => bin(BinOp::Add, s, term),
                None => term,
            });
            stride = stride.saturating_mul(d);
        }
        let mut e = sum.unwrap_or_else(|| Expr::int(0));
        e.span = span;
        e
    }

    /// The region over thread variable `index` running `body` on every thread of the
    /// block: the `threadIdx.x` loop of a 1-D block, else the thread nest over `axes` (one
    /// name per dimension) defining `index`.
    pub fn region(&self, index: &str, axes: &[String], body: Vec<Stmt>, span: Span) -> Stmt {
        if self.is_flat() {
            return for_loop(
                index,
                Expr::int(self.threads()),
                ForKind::ThreadBinding(ThreadTag::ThreadX),
                body,
                span,
            );
        }
        // A missing name (a caller's slip) falls back to the base name.
        let names: Vec<String> = (0..self.dims.len())
            .map(|i| {
                axes.get(i)
                    .map_or(AXIS_NAMES[i.min(2)], String::as_str)
                    .to_string()
            })
            .collect();
        let mut inner = Vec::with_capacity(body.len() + 1);
        inner.push(Stmt::new(
            StmtKind::Let {
                var: Ident::new(index, span),
                dtype: None,
                value: self.linear(&names, span),
            },
            span,
        ));
        inner.extend(body);
        let axis = |i: usize, body: Vec<Stmt>| {
            let tag = AXES[i.min(2)];
            for_loop(
                &names[i],
                Expr::int(self.dims[i]),
                ForKind::ThreadBinding(tag),
                body,
                span,
            )
        };
        // Innermost axis first.
        let last = self.dims.len() - 1;
        let mut nest = axis(last, inner);
        for i in (0..last).rev() {
            nest = axis(i, vec![nest]);
        }
        nest
    }

    /// [`Block::region`] over fresh axis variables (`tx`, `ty`, `tz` as `names` allows) for
    /// a multi-dimensional block: what a pass that writes a new region calls.
    pub fn fresh_region(
        &self,
        index: &str,
        body: Vec<Stmt>,
        span: Span,
        names: &mut crate::names::NameSet,
    ) -> Stmt {
        let axes: Vec<String> = if self.is_flat() {
            Vec::new()
        } else {
            AXIS_NAMES
                .iter()
                .take(self.dims.len())
                .map(|a| names.fresh(a))
                .collect()
        };
        self.region(index, &axes, body, span)
    }

    /// Takes apart a thread nest of this (multi-dimensional) block: binding loops over each
    /// axis in order, each over its whole extent, the innermost body starting with the let
    /// of the linear index of those loops' variables. `None` for anything else.
    pub fn open<'a>(&self, f: &'a For) -> Option<Nest<'a>> {
        if self.is_flat() {
            return None;
        }
        let mut axes = Vec::with_capacity(self.dims.len());
        let mut f = f;
        loop {
            let i = axes.len();
            let whole = AXES
                .get(i)
                .is_some_and(|&t| f.kind == ForKind::ThreadBinding(t))
                && const_int(&f.start) == Some(0)
                && const_int(&f.stop) == self.dims.get(i).copied();
            if !whole {
                return None;
            }
            axes.push(&f.var);
            if axes.len() == self.dims.len() {
                break;
            }
            match f.body.as_slice() {
                [Stmt {
                    kind: StmtKind::For(inner),
                    ..
                }] => f = inner,
                _ => return None,
            }
        }
        let (first, body) = f.body.split_first()?;
        let StmtKind::Let {
            var: index, value, ..
        } = &first.kind
        else {
            return None;
        };
        let names: Vec<String> = axes.iter().map(|a| a.name.clone()).collect();
        // Spans compare equal: this compares the structure of the value.
        (*value == self.linear(&names, value.span)).then_some(Nest { axes, index, body })
    }
}

/// The grid `UM x UN` of `units` (warps, warpgroups) over an `m x n` tile that a
/// `T.GemmWarpPolicy` picks among those `fits(um, un)` admits: `FullRow` needs
/// `UM = units`, `FullCol` `UN = units`, `Square` takes the most square unit tile
/// (`|m / UM - n / UN|` smallest, then the larger `UM`). One rule for the mma.sync warp
/// grid and the wgmma warpgroup grid.
pub fn unit_grid(
    policy: WarpPolicy,
    units: i64,
    (m, n): (i64, i64),
    fits: impl Fn(i64, i64) -> bool,
) -> Option<(i64, i64)> {
    let ok = |um: i64| um > 0 && units % um == 0 && fits(um, units / um);
    match policy {
        WarpPolicy::FullRow => ok(units).then_some((units, 1)),
        WarpPolicy::FullCol => ok(1).then_some((1, units)),
        WarpPolicy::Square => (1..=units)
            .filter(|&um| ok(um))
            .min_by_key(|&um| ((m / um - n / (units / um)).abs(), -um))
            .map(|um| (um, units / um)),
    }
}
