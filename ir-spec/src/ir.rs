//! The IR data model: one tree for the tile level and the thread level.
//!
//! **Names are identities.** Every variable and buffer name is unique within a `PrimFunc`
//! (the verifier rejects shadowing), so IR nodes refer to variables and buffers by name and
//! the printed text is the IR itself. Passes that introduce names take fresh ones.
//!
//! **Equality ignores spans** (see `span.rs`), so `==` means "same program".
//!
//! Levels: the *tile* level is what users write (tile ops such as `Copy`, `Gemm`, `Fill`,
//! `T.Parallel` loops). The *thread* level has no tile ops left; threads are explicit through
//! `ForKind::ThreadBinding` loops.

use crate::dtype::DType;
pub use crate::intrinsic::{ElemRef, Intrinsic};
pub use crate::math::MathFn;
use crate::span::Span;

/// A name with the place it was written.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Ident {
    pub name: String,
    pub span: Span,
}

impl Ident {
    pub fn new(name: impl Into<String>, span: Span) -> Ident {
        Ident {
            name: name.into(),
            span,
        }
    }
}

/// A symbolic dimension: `M = T.symbolic("M")` (int32) or `M = T.symbolic("M", "int64")`.
/// Its value is known only at launch time, and lies in `1..=dim.max()` — the range the
/// kernel's index math is compiled for (`widen-indices` proves 32-bit math safe, or widens
/// it, for exactly that range). The interpreter and the runtime refuse a bound value outside
/// it with an error, so a kernel never runs on sizes it was not compiled for.
#[derive(Clone, Debug, PartialEq)]
pub struct Dim {
    pub name: String,
    pub span: Span,
    /// `Int32` or `Int64`: the dim's type in expressions and as a kernel parameter.
    pub dtype: DType,
    /// A scalar parameter of the function (`max_seqlen_q: T.int32` in its signature): its
    /// position among the written parameters. The caller passes its value there instead of
    /// a launch reading it off a tensor's shape; it is a dim in every other way (same
    /// range, `-D` binds it).
    pub param: Option<usize>,
    /// Every value the dim may take is a multiple of this (1: any): `T.symbolic("L",
    /// multiple_of=8)`, or what a layout of a global tensor needs to be a bijection
    /// (`T.Layout(shape, lambda …)` splitting an index by 8). Checked wherever the dim gets
    /// its value: `-D`, the interpreter, the runtime at launch (the manifest's dim).
    pub multiple_of: i64,
}

/// One parameter of a function's written signature ([`PrimFunc::signature`]).
#[derive(Clone, Copy, Debug)]
pub enum SigParam<'a> {
    Tensor(&'a BufferDecl),
    Scalar(&'a Dim),
}

/// The largest value of an int32 symbolic dim: 2^30, so that index math near a dim
/// (`ko * 32 + k < K`, `ceildiv(N, 128) * 128`) stays inside int32 and 32-bit.
pub const MAX_DIM: i64 = 1 << 30;

/// The largest value of an int64 symbolic dim: 2^40 (a tensor dimension past it cannot fit
/// any GPU's memory), so that int64 index math over such dims never overflows int64.
pub const MAX_DIM_INT64: i64 = 1 << 40;

impl Dim {
    pub fn new(name: impl Into<String>, span: Span, dtype: DType) -> Dim {
        Dim {
            name: name.into(),
            span,
            dtype,
            param: None,
            multiple_of: 1,
        }
    }

    /// An int32 dim.
    pub fn int32(name: impl Into<String>, span: Span) -> Dim {
        Dim::new(name, span, DType::Int32)
    }

    pub fn ident(&self) -> Ident {
        Ident::new(self.name.clone(), self.span)
    }

    /// The largest value the dim may take.
    pub fn max(&self) -> i64 {
        dim_max(self.dtype)
    }

    /// The dim promising also to be a multiple of `m`: `multiple_of` becomes the least
    /// common multiple; `Err` with that multiple when it would pass [`MAX_MULTIPLE`].
    pub fn require_multiple(&mut self, m: i64) -> Result<(), i64> {
        let (mut x, mut y) = (self.multiple_of.max(1), m.max(1));
        while y != 0 {
            (x, y) = (y, x % y);
        }
        let lcm = (self.multiple_of.max(1) / x).saturating_mul(m.max(1));
        if lcm > MAX_MULTIPLE {
            return Err(lcm);
        }
        self.multiple_of = lcm;
        Ok(())
    }
}

/// The largest `multiple_of` a dim may declare (2^20): a dim is at most 2^30 (int32), and
/// the printed number must parse back.
pub const MAX_MULTIPLE: i64 = 1 << 20;

/// The largest value a symbolic dim of `dtype` may take.
pub fn dim_max(dtype: DType) -> i64 {
    if dtype == DType::Int64 {
        MAX_DIM_INT64
    } else {
        MAX_DIM
    }
}

/// Why `value` cannot be bound to the symbolic dim `name` of `dtype` (`None` when it can),
/// to follow "`name` = value is": the one wording of the range rule, used by the
/// interpreter and the runtime.
pub fn dim_range_error(name: &str, dtype: DType, multiple_of: i64, value: i64) -> Option<String> {
    let max = dim_max(dtype);
    if (0..=max).contains(&value) {
        if multiple_of > 1 && value % multiple_of != 0 {
            return Some(format!(
                "not a multiple of {multiple_of}, which the kernel requires of `{name}` \
                 (`multiple_of={multiple_of}`: declared by its `T.symbolic`, or needed by a \
                 `T.Layout` of a global tensor that splits an index over `{name}` by \
                 {multiple_of})"
            ));
        }
        return None;
    }
    let fix = if dtype == DType::Int64 || value < 0 {
        format!("specialize it with `-D {name}=VALUE`")
    } else {
        format!("declare it `T.symbolic(\"{name}\", \"int64\")` (up to {MAX_DIM_INT64}) or specialize it with `-D {name}={value}`")
    };
    Some(format!(
        "outside 0..={max}, the range of an {dtype} symbolic dim (the kernel's index math is compiled for that range): {fix}"
    ))
}

/// A tensor extent a launch can solve for a dim: `d`, `d + c`, `c + d`, `d - c`, `d * c` or
/// `c * d` (`c` a literal, a factor at least 1), as (dim, factor, offset): extent = factor
/// · d + offset. Varlen kernels size `cu_seqlens` as `batch + 1`. The runtime's manifest
/// recognizes the same forms (`tlc_abi::DimExpr::solvable`); [`solve_extent`] is the rule.
pub fn solvable_extent(e: &Expr) -> Option<(&str, i64, i64)> {
    let lit = |x: &Expr| x.as_int();
    match &e.kind {
        ExprKind::Var(d) => Some((d.as_str(), 1, 0)),
        ExprKind::Binary(op, a, b) => match (op, &a.kind, &b.kind) {
            (BinOp::Add, ExprKind::Var(d), _) => Some((d.as_str(), 1, lit(b)?)),
            (BinOp::Add, _, ExprKind::Var(d)) => Some((d.as_str(), 1, lit(a)?)),
            (BinOp::Sub, ExprKind::Var(d), _) => Some((d.as_str(), 1, lit(b)?.checked_neg()?)),
            (BinOp::Mul, ExprKind::Var(d), _) => Some((d.as_str(), lit(b).filter(|&c| c >= 1)?, 0)),
            (BinOp::Mul, _, ExprKind::Var(d)) => Some((d.as_str(), lit(a).filter(|&c| c >= 1)?, 0)),
            _ => None,
        },
        _ => None,
    }
}

/// The dim `d` with `factor · d + offset = extent`, or why there is none (not an integer,
/// negative).
pub fn solve_extent(factor: i64, offset: i64, extent: i64) -> Result<i64, String> {
    let rest = extent.checked_sub(offset).ok_or("overflows")?;
    if factor < 1 || rest < 0 || rest % factor != 0 {
        let form = match (factor, offset) {
            (1, o) if o >= 0 => format!("d + {o}"),
            (1, o) => format!("d - {}", -o),
            (f, _) => format!("{f} * d"),
        };
        return Err(format!("{extent} is not {form} for any size d >= 0"));
    }
    Ok(rest / factor)
}

/// One kernel: `@T.prim_func def name(params): body`.
#[derive(Clone, Debug, PartialEq)]
pub struct PrimFunc {
    pub name: Ident,
    /// Symbolic dimensions (`M = T.symbolic("M")` before the function), usable in buffer
    /// shapes and expressions.
    pub dims: Vec<Dim>,
    /// Buffer parameters, all in `Scope::Global`: the caller's tensors, then the function's
    /// own global tensors (`scratch`).
    pub params: Vec<BufferDecl>,
    /// The names of the trailing `params` that the function allocates itself (`x =
    /// T.alloc_global(shape, dtype)` in its body, before the kernels: TileLang's flash
    /// decoding passes partial results from one kernel to the next in them). The runtime
    /// allocates them for each launch, zero-filled, and the caller passes only the others.
    pub scratch: Vec<String>,
    pub body: Vec<Stmt>,
    pub span: Span,
    /// Tunables and constraints (`block_M = T.tunable([64, 128], default=128)` before the
    /// function); empty once bound (`tuning::bind`), which every stage after the parser needs.
    pub space: crate::tuning::TuningSpace,
}

/// Where a buffer lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Device memory; only function parameters.
    Global,
    /// Shared memory of a thread block (`T.alloc_shared`; TileLang's `shared` / `shared.dyn`).
    Shared,
    /// A tile distributed over the threads of a block (`T.alloc_fragment`, `local.fragment`).
    Fragment,
    /// Per-thread registers (`T.alloc_local`, `local`).
    Local,
}

impl Scope {
    pub fn name(self) -> &'static str {
        match self {
            Scope::Global => "global",
            Scope::Shared => "shared",
            Scope::Fragment => "fragment",
            Scope::Local => "local",
        }
    }
}

/// A buffer: a parameter or an allocation.
#[derive(Clone, Debug, PartialEq)]
pub struct BufferDecl {
    pub name: Ident,
    pub dtype: DType,
    /// Extents, outermost first; row-major, contiguous.
    pub shape: Vec<Expr>,
    pub scope: Scope,
    pub span: Span,
}

/// A statement with its span.
#[derive(Clone, Debug, PartialEq)]
pub struct Stmt {
    pub kind: StmtKind,
    pub span: Span,
}

impl Stmt {
    pub fn new(kind: StmtKind, span: Span) -> Stmt {
        Stmt { kind, span }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum StmtKind {
    /// `with T.Kernel(...) as (bx, by):` — a grid of thread blocks.
    Kernel(Kernel),
    For(For),
    /// `while cond: body`: runs `body` as long as `cond` (bool) holds, testing it before
    /// each iteration. In tile-level (block-level) code the condition must be the same for
    /// every thread of the block when SIMT regions or barriers are under it
    /// (`analysis::uniform`); in per-thread code it may differ per thread (a divergent loop).
    While {
        cond: Expr,
        body: Vec<Stmt>,
    },
    /// `if cond: … elif …: … else: …` (`elif` is an `If` alone in `else_body`).
    If {
        cond: Expr,
        then_body: Vec<Stmt>,
        else_body: Vec<Stmt>,
    },
    /// `x = value` or `x: T.int32 = value`; binds `var` for the rest of the enclosing body.
    Let {
        var: Ident,
        dtype: Option<DType>,
        value: Expr,
    },
    /// `buf[i, j] = value`.
    Store {
        buffer: Ident,
        indices: Vec<Expr>,
        value: Expr,
    },
    /// `T.atomic_add(buf[i, j], value)` (both levels): `buf[i, j] += value` as one
    /// indivisible read-modify-write — concurrent atomic adds to one element from any
    /// threads and blocks all count, in an unspecified order. `buf` is global or shared.
    AtomicAdd {
        buffer: Ident,
        indices: Vec<Expr>,
        value: Expr,
    },
    /// `T.copy(src, dst)`: element-wise copy between two regions of equal element count,
    /// converting dtypes.
    Copy {
        src: Region,
        dst: Region,
    },
    /// `T.gemm(A, B, C, ...)`: `C (+)= op(A) @ op(B)`.
    Gemm(Gemm),
    /// `T.fill(dst, value)`; `T.clear(dst)` is `Fill` with the integer literal 0.
    Fill {
        dst: Region,
        value: Expr,
    },
    /// `T.reduce_sum(src, dst, dim=1)` and the other reductions (tile level).
    Reduce(Reduce),
    /// `T.sync_threads()` (thread level): `bar.sync 0`. Every thread of the block waits until
    /// all have arrived; shared-memory writes before it are visible to every thread after it.
    Barrier,
    /// `T.sync_grid()` (both levels): a grid-wide barrier. Every block of the grid waits
    /// until all have arrived; global writes of any block before it are visible to every
    /// block after it (shared memory: as `T.sync_threads()`, which it includes). It sits
    /// directly in the kernel body (at the thread level: or directly in the body of the
    /// kernel's top-level thread-binding loop), so every block reaches it the same number of
    /// times. A kernel with one is launched cooperatively: its whole grid must be resident on
    /// the GPU at once (the runtime checks it).
    GridSync,
    /// `T.finalize_reducer(R)` (tile level): every update of reducer `R` before it has been
    /// combined; from here on `R` is an ordinary fragment holding the results. It sits
    /// directly in the kernel body, once per reducer.
    FinalizeReducer(Ident),
    /// `T.note("text")` (both levels): a compiler remark that lives in the printed IR, such
    /// as why a pass took a slower path. It has no meaning: the interpreter skips it, codegen
    /// writes it as a PTX comment, and every pass keeps it where it is.
    Note(String),
    /// `T.fresh(A, B)` (both levels): the contents of shared buffers `A` and `B` are
    /// discarded here. No read after it, by the thread that runs it, may observe a value
    /// written before it (the interpreter reports such a read). At the head of a loop body,
    /// with every use of a buffer inside the loop, it says that the buffer carries no value
    /// from one iteration to the next, so `plan-shared-memory` may give its bytes to another
    /// buffer between its uses in an iteration. It accesses no memory and generates no code.
    Fresh(Vec<Ident>),
    /// A target intrinsic of the thread level (`T.cp_async`, `T.ldmatrix`, `T.mma_sync`, …;
    /// `intrinsic.rs` describes each).
    Intrinsic(Intrinsic),
    /// `T.thread_allreduce("sum", value, dst[i], tx)` (thread level; TVM's
    /// `tvm_thread_allreduce` under a `T.comm_reducer` attribute): see [`AllReduce`].
    AllReduce(AllReduce),
}

/// An all-reduce of one value per thread over the threads of `threads` (thread variables of
/// the enclosing `threadIdx` loops, each naming a block axis whose extent is a power of
/// two): every thread of a group (the threads that differ only in those indices) gets the
/// combination of the group's values in its own `buffer[indices]` (a local buffer of the
/// value's dtype). The combination is a butterfly: numbering a group's `G` threads by
/// `t = Σ idx_a · Π_{named b < a} extent_b` over the named axes `a` (x before y before z),
/// `v_t ← v_t ⊕ v_{t xor o}` for `o = G/2, G/4, …, 1` — exactly the order of the steps it
/// lowers to ([`allreduce_steps`]: `shfl.sync.bfly` within a warp, else through `scratch`),
/// so every thread ends with the same bits. Every thread of the block must reach it.
#[derive(Clone, Debug, PartialEq)]
pub struct AllReduce {
    pub op: AllReduceOp,
    pub value: Expr,
    pub buffer: Ident,
    pub indices: Vec<Expr>,
    pub threads: Vec<Ident>,
    /// A shared buffer of the value's dtype, one element per thread of the block, through
    /// which the steps whose partners are not lanes of one warp exchange values (`None` when
    /// every step is a shuffle; `plan-allreduce-scratch` adds it where one is needed).
    pub scratch: Option<Ident>,
}

/// One butterfly step of an all-reduce: the partner's index on block axis `axis` differs in
/// bit `bit`. `lane_xor`: the partner's lane is the thread's lane xor this (a shuffle), when
/// the block's linear thread index flips exactly that bit within one warp of whole warps
/// (or of a block smaller than a warp); `None` when the exchange goes through shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AllReduceStep {
    pub axis: usize,
    pub bit: u32,
    pub lane_xor: Option<u32>,
}

/// The steps of an all-reduce over the block axes `axes` of a block of extents `shape`
/// (x first; missing axes have extent 1), in the butterfly's order (`o = G/2` first); `None`
/// when a named axis's extent is not a power of two (the butterfly would pair threads
/// outside the group). The one definition the verifier, the interpreter, the scratch pass
/// and codegen use.
pub fn allreduce_steps(shape: &[i64], axes: &[usize]) -> Option<Vec<AllReduceStep>> {
    let extent = |a: usize| shape.get(a).copied().unwrap_or(1);
    let total: i64 = shape.iter().product();
    let mut sorted = axes.to_vec();
    sorted.sort_unstable();
    let mut steps = Vec::new();
    for &axis in &sorted {
        let e = extent(axis);
        if e < 1 || e & (e - 1) != 0 {
            return None;
        }
        let stride: i64 = (0..axis).map(extent).product();
        for bit in 0..e.trailing_zeros() {
            let d = stride.checked_shl(bit).unwrap_or(i64::MAX);
            let in_warp = stride & (stride - 1) == 0
                && d < crate::target::WARP_SIZE
                && (total <= crate::target::WARP_SIZE || total % crate::target::WARP_SIZE == 0);
            steps.push(AllReduceStep {
                axis,
                bit,
                lane_xor: in_warp.then_some(d as u32),
            });
        }
    }
    // The butterfly goes from the highest bit of the group index down.
    steps.reverse();
    Some(steps)
}

/// The combiners an all-reduce lowers exactly (commutative, so the butterfly's partners agree).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AllReduceOp {
    Sum,
    Max,
    Min,
}

impl AllReduceOp {
    pub const ALL: [AllReduceOp; 3] = [AllReduceOp::Sum, AllReduceOp::Max, AllReduceOp::Min];

    pub fn name(self) -> &'static str {
        match self {
            AllReduceOp::Sum => "sum",
            AllReduceOp::Max => "max",
            AllReduceOp::Min => "min",
        }
    }

    pub fn parse(text: &str) -> Option<AllReduceOp> {
        Self::ALL.into_iter().find(|o| o.name() == text)
    }

    /// The binary operator it combines with.
    pub fn bin_op(self) -> BinOp {
        match self {
            AllReduceOp::Sum => BinOp::Add,
            AllReduceOp::Max => BinOp::Max,
            AllReduceOp::Min => BinOp::Min,
        }
    }
}

/// `with T.Kernel(grid..., threads=...) as block_vars:`.
///
/// Kernel-wide facts (rasterization, layout annotations, allocations) are fields rather than
/// statements: TileLang treats them as properties of the block wherever they are written, and
/// hoisting them makes every spelling of a kernel normalize to the same IR.
#[derive(Clone, Debug, PartialEq)]
pub struct Kernel {
    /// Grid extents, x first (1 to 3).
    pub grid: Vec<Expr>,
    /// One variable per grid dimension: `blockIdx.x`, `.y`, `.z`.
    pub block_vars: Vec<Ident>,
    /// Block shape, x first (1 to 3 constants; trailing 1s are dropped).
    pub threads: Vec<Expr>,
    /// `cluster_dims=(cx, cy, cz)`: blocks per thread-block cluster, x first (constants,
    /// trailing 1s dropped; empty: no cluster). The blocks of a cluster run at once on
    /// neighbouring SMs and may reach each other's shared memory (TMA multicast, remote
    /// mbarrier arrivals, `T.cluster_sync()`); block `(bx, by, bz)` has rank
    /// `bx % cx + cx * (by % cy + cy * (bz % cz))` in its cluster. See [`Kernel::cluster_size`].
    pub cluster: Vec<Expr>,
    /// `T.use_swizzle(panel_size=P, order=...)`.
    pub swizzle: Option<Swizzle>,
    /// `T.min_blocks_per_sm(B)`: the kernel is compiled so that `B` blocks fit on one SM
    /// at once (registers budgeted for it, PTX `.minnctapersm`); an integer constant.
    pub min_blocks_per_sm: Option<Expr>,
    /// `T.no_set_max_nreg()`: a warp-specialized schedule of this kernel keeps every
    /// thread's register count as compiled (no `setmaxnreg` rebalancing between the
    /// producer and the consumers).
    pub no_set_max_nreg: bool,
    /// `T.annotate_layout({...})`.
    pub layouts: Vec<LayoutAnnotation>,
    /// `R = T.alloc_reducer(...)` (tile level): which fragment allocations are reducers, and
    /// how they combine. `lower-reducers` turns them into plain fragments.
    pub reducers: Vec<Reducer>,
    /// Shared, fragment and local allocations of the block, in order of declaration.
    pub allocs: Vec<BufferDecl>,
    /// `T.shared_arena(bytes=N, offsets={...})` (thread level): where each shared allocation
    /// lives in the block's one dynamic shared-memory arena. `None` before shared memory is
    /// planned.
    pub arena: Option<Arena>,
    pub body: Vec<Stmt>,
}

impl Kernel {
    /// The cluster's extents `[cx, cy, cz]` when `cluster_dims` holds constants (`[1, 1, 1]`
    /// without one); `None` while one is still symbolic (a tunable).
    pub fn cluster_dims(&self) -> Option<[i64; 3]> {
        let mut dims = [1i64; 3];
        for (slot, e) in dims.iter_mut().zip(&self.cluster) {
            *slot = e.as_int()?;
        }
        Some(dims)
    }

    /// Blocks per cluster (1 without a cluster); `None` while a dimension is symbolic.
    pub fn cluster_size(&self) -> Option<i64> {
        self.cluster_dims()
            .map(|d| d.iter().fold(1i64, |a, &b| a.saturating_mul(b)))
    }
}

/// `R = T.alloc_reducer(shape, dtype, op="sum", replication="all")` (tile level; TileLang's
/// v1 reducer): `R` is a fragment allocation (in `Kernel::allocs`) that `T.Parallel` nests
/// update with `R[idx] = R[idx] op e` (`+=` for `"sum"`, `T.max` / `T.min`) where `idx` may
/// leave out some of the nest's variables: the update combines `e` over those variables, in
/// an unspecified order (not a race). `T.finalize_reducer(R)` ends the combining: `R` is read
/// only after it and updated only before it (docs/ir.md, "Reducers").
#[derive(Clone, Debug, PartialEq)]
pub struct Reducer {
    pub buffer: Ident,
    pub op: ReducerOp,
    pub replication: Replication,
    pub span: Span,
}

/// How a reducer combines its updates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReducerOp {
    Sum,
    Max,
    Min,
}

impl ReducerOp {
    pub const ALL: [ReducerOp; 3] = [ReducerOp::Sum, ReducerOp::Max, ReducerOp::Min];

    /// The spelling of `op=`.
    pub fn name(self) -> &'static str {
        match self {
            ReducerOp::Sum => "sum",
            ReducerOp::Max => "max",
            ReducerOp::Min => "min",
        }
    }

    pub fn parse(name: &str) -> Option<ReducerOp> {
        ReducerOp::ALL.iter().copied().find(|o| o.name() == name)
    }

    /// The operator of an update `R[idx] = R[idx] op e`.
    pub fn combine(self) -> BinOp {
        match self {
            ReducerOp::Sum => BinOp::Add,
            ReducerOp::Max => BinOp::Max,
            ReducerOp::Min => BinOp::Min,
        }
    }

    /// The tile reduction that folds the same way.
    pub fn reduce_kind(self) -> ReduceKind {
        match self {
            ReducerOp::Sum => ReduceKind::Sum,
            ReducerOp::Max => ReduceKind::Max,
            ReducerOp::Min => ReduceKind::Min,
        }
    }
}

/// `replication=` of a reducer: TileLang's hint whether every thread keeps a replica of the
/// whole reducer (`"all"`) or not (`"none"`). It does not change the meaning; tlc records it
/// and prints it back, and `lower-reducers` lowers both the same way.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Replication {
    All,
    None,
}

impl Replication {
    pub fn name(self) -> &'static str {
        match self {
            Replication::All => "all",
            Replication::None => "none",
        }
    }

    pub fn parse(name: &str) -> Option<Replication> {
        [Replication::All, Replication::None]
            .into_iter()
            .find(|r| r.name() == name)
    }
}

/// The block's dynamic shared memory: `bytes` bytes, each shared allocation at a byte offset.
/// Allocations whose lifetimes do not overlap may share bytes. The most a block may have is
/// its target's (`Target::max_shared_bytes`).
#[derive(Clone, Debug, PartialEq)]
pub struct Arena {
    pub bytes: i64,
    /// One entry per shared allocation: its name and byte offset.
    pub offsets: Vec<(Ident, i64)>,
}

impl Arena {
    /// Every offset is a multiple of this (the widest vector access, 16 bytes).
    pub const ALIGN: i64 = 16;

    /// The offset of allocation `name`, if it has one.
    pub fn offset(&self, name: &str) -> Option<i64> {
        self.offsets
            .iter()
            .find(|(n, _)| n.name == name)
            .map(|&(_, o)| o)
    }
}

/// L2 rasterization of the block grid.
#[derive(Clone, Debug, PartialEq)]
pub struct Swizzle {
    pub panel_size: Expr,
    pub order: RasterOrder,
    pub span: Span,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RasterOrder {
    Row,
    Column,
}

/// One entry of `T.annotate_layout({buf: layout})`.
#[derive(Clone, Debug, PartialEq)]
pub struct LayoutAnnotation {
    pub buffer: Ident,
    pub layout: Layout,
    pub span: Span,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layout {
    /// `T.make_swizzled_layout(buf)`: XOR-swizzled shared memory, width chosen from the
    /// inner dimension (`layout-inference` resolves it to `Swizzle`).
    Swizzled,
    /// `T.make_swizzled_layout(buf, bytes=B)` (B = 128, 64 or 32): the 16-byte chunk `c` of
    /// row `r` of the innermost two dimensions is stored at chunk `c ^ ((r % 8) / (128 / B))`
    /// within its group of `B / 16` chunks.
    Swizzle { bytes: i64 },
    /// `T.make_padded_layout(buf, pad=P)`: each row of the innermost dimension is followed by
    /// `P` unused elements.
    Padded { pad: i64 },
    /// `T.mma_accumulator_layout(buf, warps_m=WM, warps_n=WN)` (fragments): the m16n8k16
    /// accumulator layout over a `WM x WN` grid of warps (warp `w` owns warp tile
    /// `(w % WM, w / WM)`); docs/ir.md gives the element-to-(thread, slot) map.
    MmaAccumulator { warps_m: i64, warps_n: i64 },
    /// `T.make_wgmma_swizzled_layout(buf, bytes=B)` (B = 128, 64 or 32; shared buffers): the
    /// canonical layout TMA writes and `wgmma` reads. The innermost two dimensions (`R` rows
    /// of `C` columns, `W = B / element size` columns per panel) are split into column panels
    /// of `W`: panel `p` holds columns `p W .. p W + W` of every row, rows `B` bytes apart,
    /// and within a row the 16-byte chunk `q` is stored at chunk `q ^ ((r % 8) / (128 / B))`.
    /// Element `(r, c)` is at flat offset `(c / W) R W + r W + chunk' E + c % E` (`E`
    /// elements per chunk) of its `R x C` slice. With `C = W` it is `Swizzle { bytes }`.
    WgmmaSwizzle { bytes: i64 },
    /// `T.wgmma_accumulator_layout(buf, warpgroups_m=GM, warpgroups_n=GN)` (fragments): the
    /// wgmma m64nNk16 accumulator layout over a `GM x GN` grid of warpgroups (warpgroup `g`
    /// owns tile `(g % GM, g / GM)`); docs/ir.md gives the element-to-(thread, slot) map.
    WgmmaAccumulator {
        warpgroups_m: i64,
        warpgroups_n: i64,
    },
    /// A row vector (1-D fragments): element `r` of an `R`-element fragment is held, in
    /// one slot, by every thread that holds part of row `r` of an `R x N` fragment laid out
    /// as `RowsOf` says — so a `T.Parallel` nest over that fragment reads `V[i]` from a
    /// register, and a reduction along its rows combines registers with warp shuffles.
    /// docs/ir.md gives the row-to-(threads, slot) map of each kind.
    Rows(RowsOf),
}

/// The 2-D layout whose rows a [`Layout::Rows`] vector follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RowsOf {
    /// `T.rows_layout(buf, cols=N)`: rows of the default (flat) layout of an `R x N`
    /// fragment, for `N` a multiple of the thread count `T` (every thread holds every row)
    /// or a divisor of it (row `r` is held by the `N` threads `N (r mod T/N) …`).
    Flat { cols: i64 },
    /// `T.mma_rows_layout(buf, warps_m=WM, warps_n=WN)`: rows of
    /// `T.mma_accumulator_layout(…, warps_m=WM, warps_n=WN)`.
    Mma { warps_m: i64, warps_n: i64 },
    /// `T.wgmma_rows_layout(buf, warpgroups_m=GM, warpgroups_n=GN)`: rows of
    /// `T.wgmma_accumulator_layout(…, warpgroups_m=GM, warpgroups_n=GN)`.
    Wgmma {
        warpgroups_m: i64,
        warpgroups_n: i64,
    },
}

/// A loop `for var in KIND(start, stop)`; iterates `var = start, start + 1, …, stop - 1`.
#[derive(Clone, Debug, PartialEq)]
pub struct For {
    pub var: Ident,
    pub start: Expr,
    pub stop: Expr,
    pub kind: ForKind,
    pub body: Vec<Stmt>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ForKind {
    /// `T.serial(...)`, `range(...)`.
    Serial,
    /// `T.unroll(...)`: serial, to be fully unrolled.
    Unroll,
    /// `T.Parallel(...)`: iterations are independent and are spread over the threads.
    /// `for i, j in T.Parallel(a, b)` is two directly nested parallel loops.
    Parallel,
    /// `T.Pipelined(n, num_stages=s, order=[...], stage=[...])`.
    Pipelined {
        /// A constant once the kernel's tunables are bound (docs/ir.md, "Tuning space").
        num_stages: Expr,
        order: Vec<i64>,
        stage: Vec<i64>,
    },
    /// `T.thread_binding(n, thread="threadIdx.x")`: one iteration per thread.
    ThreadBinding(ThreadTag),
    /// `T.vectorized(n)` (thread level): a serial loop whose iterations the back end turns
    /// into one vector access.
    Vectorized,
}

impl ForKind {
    /// A pipelined loop's stage count, when it is a constant (always, once the kernel's
    /// tunables are bound: the verifier's rule L3).
    pub fn num_stages(&self) -> Option<i64> {
        match self {
            ForKind::Pipelined { num_stages, .. } => num_stages.as_int(),
            _ => None,
        }
    }
}

/// A hardware index a loop can be bound to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ThreadTag {
    ThreadX,
    ThreadY,
    ThreadZ,
    BlockX,
    BlockY,
    BlockZ,
}

impl ThreadTag {
    pub const ALL: [ThreadTag; 6] = [
        ThreadTag::ThreadX,
        ThreadTag::ThreadY,
        ThreadTag::ThreadZ,
        ThreadTag::BlockX,
        ThreadTag::BlockY,
        ThreadTag::BlockZ,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ThreadTag::ThreadX => "threadIdx.x",
            ThreadTag::ThreadY => "threadIdx.y",
            ThreadTag::ThreadZ => "threadIdx.z",
            ThreadTag::BlockX => "blockIdx.x",
            ThreadTag::BlockY => "blockIdx.y",
            ThreadTag::BlockZ => "blockIdx.z",
        }
    }

    pub fn parse(text: &str) -> Option<ThreadTag> {
        ThreadTag::ALL.iter().copied().find(|t| t.name() == text)
    }

    /// The block axis of a `threadIdx.*` tag (x = 0); `None` for `blockIdx.*`.
    pub fn thread_axis(self) -> Option<usize> {
        match self {
            ThreadTag::ThreadX => Some(0),
            ThreadTag::ThreadY => Some(1),
            ThreadTag::ThreadZ => Some(2),
            _ => None,
        }
    }
}

/// A rectangular region of a buffer: per dimension a start and an extent.
#[derive(Clone, Debug, PartialEq)]
pub struct Region {
    pub buffer: Ident,
    pub ranges: Vec<Range>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Range {
    pub start: Expr,
    pub extent: Expr,
}

/// `T.gemm(A, B, C, transpose_A=, transpose_B=, policy=, clear_accum=, packed_int4=)`.
#[derive(Clone, Debug, PartialEq)]
pub struct Gemm {
    pub a: Region,
    pub b: Region,
    pub c: Region,
    pub trans_a: bool,
    pub trans_b: bool,
    pub policy: WarpPolicy,
    pub clear_accum: bool,
    /// `A` and `B` are int8 buffers each of whose bytes holds two int4 elements along K (low
    /// nibble first): the gemm's K is twice the operands' byte extent (docs/ir.md, "int4").
    pub packed_int4: bool,
}

/// `T.reduce_sum(src, dst, dim=D, clear=True)` (and `_max`, `_min`, `_abssum`,
/// `_absmax`): `dst` (a whole buffer, `src`'s shape without dimension `D`) gets the
/// reduction of `src` (a whole buffer) along `D`; with `clear=False` it is combined with
/// what `dst` holds.
#[derive(Clone, Debug, PartialEq)]
pub struct Reduce {
    pub kind: ReduceKind,
    pub src: Ident,
    pub dst: Ident,
    /// As written: `-1` is the last dimension (`Reduce::axis` normalizes it).
    pub dim: i64,
    pub clear: bool,
}

impl Reduce {
    /// The reduced dimension of a `rank`-dimensional `src`, if `dim` names one.
    pub fn axis(&self, rank: usize) -> Option<usize> {
        let r = i64::try_from(rank).ok()?;
        let d = if self.dim < 0 { self.dim + r } else { self.dim };
        usize::try_from(d).ok().filter(|&d| d < rank)
    }
}

/// What a reduction computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceKind {
    Sum,
    Max,
    Min,
    /// `Σ |x|`.
    AbsSum,
    /// `max |x|`.
    AbsMax,
}

impl ReduceKind {
    pub const ALL: [ReduceKind; 5] = [
        ReduceKind::Sum,
        ReduceKind::Max,
        ReduceKind::Min,
        ReduceKind::AbsSum,
        ReduceKind::AbsMax,
    ];

    /// The function name: `T.reduce_sum`, ….
    pub fn name(self) -> &'static str {
        match self {
            ReduceKind::Sum => "T.reduce_sum",
            ReduceKind::Max => "T.reduce_max",
            ReduceKind::Min => "T.reduce_min",
            ReduceKind::AbsSum => "T.reduce_abssum",
            ReduceKind::AbsMax => "T.reduce_absmax",
        }
    }

    pub fn parse(name: &str) -> Option<ReduceKind> {
        ReduceKind::ALL.iter().copied().find(|k| k.name() == name)
    }

    /// Whether each element enters as its absolute value.
    pub fn takes_abs(self) -> bool {
        matches!(self, ReduceKind::AbsSum | ReduceKind::AbsMax)
    }

    /// The operator that folds an element into the running value.
    pub fn combine(self) -> BinOp {
        match self {
            ReduceKind::Sum | ReduceKind::AbsSum => BinOp::Add,
            ReduceKind::Max | ReduceKind::AbsMax => BinOp::Max,
            ReduceKind::Min => BinOp::Min,
        }
    }
}

/// How the warps of a block split a gemm tile (`T.GemmWarpPolicy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WarpPolicy {
    Square,
    FullRow,
    FullCol,
}

impl WarpPolicy {
    pub fn name(self) -> &'static str {
        match self {
            WarpPolicy::Square => "Square",
            WarpPolicy::FullRow => "FullRow",
            WarpPolicy::FullCol => "FullCol",
        }
    }

    /// TileLang's integer encoding in printed TVMScript.
    pub fn from_index(i: i64) -> Option<WarpPolicy> {
        match i {
            0 => Some(WarpPolicy::Square),
            1 => Some(WarpPolicy::FullRow),
            2 => Some(WarpPolicy::FullCol),
            _ => None,
        }
    }
}

/// An expression with its span.
#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

/// IR equality compares float literals by bits, except that every NaN equals every NaN
/// (see `float_lit_eq`), so a printed NaN or infinity parses back to an equal IR.
#[derive(Clone, Debug)]
pub enum ExprKind {
    /// An integer literal (int32 if it fits, else int64).
    Int(i64),
    /// A float literal (float32). May be infinite or NaN (printed `float("inf")`,
    /// `float("-inf")`, `float("nan")`).
    Float(f64),
    Bool(bool),
    /// A scalar variable: loop variable, block variable, let, or symbolic dimension.
    Var(String),
    /// `buf[i, j]`.
    Load {
        buffer: String,
        indices: Vec<Expr>,
    },
    Unary(UnOp, Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    /// `T.cast(x, "dtype")`.
    Cast(DType, Box<Expr>),
    /// `T.reinterpret("dtype", x)`: `x`'s bits read as a value of `dtype` (of the same
    /// width).
    Reinterpret(DType, Box<Expr>),
    /// `T.if_then_else(cond, a, b)`.
    Select(Box<Expr>, Box<Expr>, Box<Expr>),
    /// `T.exp(x)`, `T.pow(x, y)`, …: a math function (`math.rs`) of `arity()` arguments.
    Math(MathFn, Vec<Expr>),
}

impl PartialEq for ExprKind {
    fn eq(&self, other: &ExprKind) -> bool {
        use ExprKind as K;
        match (self, other) {
            (K::Int(a), K::Int(b)) => a == b,
            (K::Float(a), K::Float(b)) => float_lit_eq(*a, *b),
            (K::Bool(a), K::Bool(b)) => a == b,
            (K::Var(a), K::Var(b)) => a == b,
            (
                K::Load {
                    buffer: a,
                    indices: ai,
                },
                K::Load {
                    buffer: b,
                    indices: bi,
                },
            ) => a == b && ai == bi,
            (K::Unary(op, a), K::Unary(oq, b)) => op == oq && a == b,
            (K::Binary(op, a, x), K::Binary(oq, b, y)) => op == oq && a == b && x == y,
            (K::Cast(d, a), K::Cast(e, b)) => d == e && a == b,
            (K::Reinterpret(d, a), K::Reinterpret(e, b)) => d == e && a == b,
            (K::Select(c, a, x), K::Select(d, b, y)) => c == d && a == b && x == y,
            (K::Math(f, a), K::Math(g, b)) => f == g && a == b,
            _ => false,
        }
    }
}

/// Whether `T.atomic_add` takes elements of `dtype` (PTX `red.add` has these forms: `.f16`,
/// `.bf16`, `.f32`, `.f64`, `.s32`, `.u32`, `.u64` — int64 adds as `.u64`, the same bits).
pub fn atomic_add_dtype(dtype: DType) -> bool {
    matches!(
        dtype,
        DType::Float16
            | DType::BFloat16
            | DType::Float32
            | DType::Float64
            | DType::Int32
            | DType::UInt32
            | DType::Int64
    )
}

/// Equality of two float literals: the same bits (so `0.0 != -0.0`), or both NaN (the text
/// form has one NaN, `float("nan")`, and no payloads).
pub fn float_lit_eq(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnOp {
    Neg,
    /// `not x` (bool).
    Not,
    /// `~x` (integers): bitwise complement.
    BitNot,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    /// `/`: true division for floats, truncating division for integers.
    Div,
    /// `//`: floor division.
    FloorDiv,
    /// `%`: floor modulo (the result has the sign of the divisor).
    FloorMod,
    /// `T.ceildiv(a, b)`.
    CeilDiv,
    /// `T.min(a, b)`.
    Min,
    /// `T.max(a, b)`.
    Max,
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
    And,
    Or,
    /// `&`, `|`, `^` (integers and bools).
    BitAnd,
    BitOr,
    BitXor,
    /// `<<` (integers): the shift count taken modulo nothing — a count outside
    /// `0..bits` gives 0 (PTX `shl` clamps the count), see docs/ir.md.
    Shl,
    /// `>>` (integers): arithmetic for signed dtypes, logical for unsigned ones; a count of
    /// `bits` or more gives the sign fill (PTX `shr` clamps the count).
    Shr,
}

impl BinOp {
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::Eq | BinOp::Ne
        )
    }

    pub fn is_logical(self) -> bool {
        matches!(self, BinOp::And | BinOp::Or)
    }

    /// `& | ^ << >>`: integer operators on the bits.
    pub fn is_bitwise(self) -> bool {
        matches!(
            self,
            BinOp::BitAnd | BinOp::BitOr | BinOp::BitXor | BinOp::Shl | BinOp::Shr
        )
    }
}

impl Expr {
    pub fn new(kind: ExprKind, span: Span) -> Expr {
        Expr { kind, span }
    }

    pub fn int(value: i64) -> Expr {
        Expr::new(ExprKind::Int(value), Span::DUMMY)
    }

    pub fn var(name: impl Into<String>) -> Expr {
        Expr::new(ExprKind::Var(name.into()), Span::DUMMY)
    }

    /// The value of an integer literal.
    pub fn as_int(&self) -> Option<i64> {
        match self.kind {
            ExprKind::Int(v) => Some(v),
            _ => None,
        }
    }

    /// Builds `a op b`, folding it when both sides are integer literals and the result is
    /// defined (so `T.ceildiv(2048, 128)` and a printed `16` are the same IR).
    pub fn binary(op: BinOp, a: Expr, b: Expr, span: Span) -> Expr {
        if let (Some(x), Some(y)) = (a.as_int(), b.as_int()) {
            if let Some(v) = fold_int(op, x, y) {
                return Expr::new(ExprKind::Int(v), span);
            }
        }
        Expr::new(ExprKind::Binary(op, Box::new(a), Box::new(b)), span)
    }
}

/// Integer semantics of the arithmetic operators, shared by constant folding and the
/// interpreter. `None` for division by zero, overflow of i64, and non-arithmetic operators.
pub fn fold_int(op: BinOp, x: i64, y: i64) -> Option<i64> {
    match op {
        BinOp::Add => x.checked_add(y),
        BinOp::Sub => x.checked_sub(y),
        BinOp::Mul => x.checked_mul(y),
        BinOp::Div => x.checked_div(y),
        BinOp::FloorDiv => floor_div(x, y),
        BinOp::FloorMod => floor_mod(x, y),
        BinOp::CeilDiv => floor_div(x.checked_add(y.checked_sub(1)?)?, y).filter(|_| y > 0),
        BinOp::Min => Some(x.min(y)),
        BinOp::Max => Some(x.max(y)),
        _ => None,
    }
}

/// Integer semantics of the comparison operators, shared by constant folding and the
/// verifier's constant conditions. `None` for non-comparison operators.
pub fn compare_int(op: BinOp, x: i64, y: i64) -> Option<bool> {
    match op {
        BinOp::Lt => Some(x < y),
        BinOp::Le => Some(x <= y),
        BinOp::Gt => Some(x > y),
        BinOp::Ge => Some(x >= y),
        BinOp::Eq => Some(x == y),
        BinOp::Ne => Some(x != y),
        _ => None,
    }
}

/// Floor division: rounds toward negative infinity.
pub fn floor_div(x: i64, y: i64) -> Option<i64> {
    let q = x.checked_div(y)?;
    if (x % y != 0) && ((x < 0) != (y < 0)) {
        Some(q - 1)
    } else {
        Some(q)
    }
}

/// Floor modulo: the remainder has the sign of the divisor.
pub fn floor_mod(x: i64, y: i64) -> Option<i64> {
    let r = x.checked_rem(y)?;
    if r != 0 && ((r < 0) != (y < 0)) {
        Some(r + y)
    } else {
        Some(r)
    }
}

impl PrimFunc {
    /// Every buffer declaration of the function: parameters, then allocations in the order
    /// the kernels declare them.
    /// Whether parameter `name` is one the function allocates itself (`T.alloc_global`).
    pub fn is_scratch(&self, name: &str) -> bool {
        self.scratch.iter().any(|s| s == name)
    }

    /// The parameters the caller passes (every one but the scratch tensors), in order.
    pub fn inputs(&self) -> impl Iterator<Item = &BufferDecl> {
        self.params
            .iter()
            .filter(|p| !self.is_scratch(&p.name.name))
    }

    /// The written signature: the caller's tensors ([`PrimFunc::inputs`]) with the scalar
    /// parameters (dims with a `param` position) at their places, in order.
    pub fn signature(&self) -> Vec<SigParam<'_>> {
        let mut scalars: Vec<&Dim> = self.dims.iter().filter(|d| d.param.is_some()).collect();
        scalars.sort_by_key(|d| d.param);
        let mut tensors = self.inputs();
        let mut out = Vec::new();
        for s in scalars {
            while out.len() < s.param.unwrap_or(0) {
                match tensors.next() {
                    Some(t) => out.push(SigParam::Tensor(t)),
                    None => break,
                }
            }
            out.push(SigParam::Scalar(s));
        }
        out.extend(tensors.map(SigParam::Tensor));
        out
    }

    /// Renumbers the scalar parameters by their places in [`PrimFunc::signature`], as the
    /// parser numbers them (after `-D` removed some, the rest close up).
    pub fn renumber_scalar_params(&mut self) {
        let order: Vec<String> = self
            .signature()
            .iter()
            .map(|p| match p {
                SigParam::Tensor(t) => t.name.name.clone(),
                SigParam::Scalar(d) => d.name.clone(),
            })
            .collect();
        for d in &mut self.dims {
            if d.param.is_some() {
                d.param = order.iter().position(|n| *n == d.name);
            }
        }
    }

    pub fn buffers(&self) -> Vec<&BufferDecl> {
        let mut out: Vec<&BufferDecl> = self.params.iter().collect();
        crate::visit::for_each_stmt(&self.body, &mut |stmt| {
            if let StmtKind::Kernel(k) = &stmt.kind {
                out.extend(k.allocs.iter());
            }
        });
        out
    }

    /// The declaration of buffer `name`, if any.
    pub fn buffer(&self, name: &str) -> Option<&BufferDecl> {
        self.buffers().into_iter().find(|b| b.name.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floor_semantics() {
        assert_eq!(floor_div(7, 2), Some(3));
        assert_eq!(floor_div(-7, 2), Some(-4));
        assert_eq!(floor_div(7, -2), Some(-4));
        assert_eq!(floor_mod(-7, 2), Some(1));
        assert_eq!(floor_mod(7, -2), Some(-1));
        assert_eq!(floor_div(1, 0), None);
        assert_eq!(fold_int(BinOp::CeilDiv, 2048, 128), Some(16));
        assert_eq!(fold_int(BinOp::CeilDiv, 1000, 128), Some(8));
        assert_eq!(fold_int(BinOp::Div, -7, 2), Some(-3));
    }

    #[test]
    fn literal_folding_keeps_undefined_ops() {
        let e = Expr::binary(BinOp::FloorDiv, Expr::int(1), Expr::int(0), Span::DUMMY);
        assert!(matches!(e.kind, ExprKind::Binary(BinOp::FloorDiv, _, _)));
        let e = Expr::binary(
            BinOp::CeilDiv,
            Expr::int(2048),
            Expr::int(128),
            Span::new(3, 9),
        );
        assert_eq!(e, Expr::int(16));
    }
}
