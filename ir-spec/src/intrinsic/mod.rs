//! Thread-level target intrinsics, described once.
//!
//! Each intrinsic is one line of the table below (`intrinsic_table!`, `generate.rs`: its
//! variant of [`Intrinsic`] with typed fields, so the interpreter's semantics and the PTX
//! lowering match on it totally; the enum, `IntrinsicOp`, [`all`] and the argument access
//! are generated from it) and ONE [`IntrinsicDef`] in this file: its text name, its parameters in order — element references with their scopes,
//! dtypes, element counts and effects; integer and boolean constants with their allowed
//! values and defaults; run-time predicates — who executes it together (a thread, a warp, a
//! warpgroup) and whether it may stand outside a thread loop. Everything generic derives
//! from the definition through [`Intrinsic::args`]:
//!
//! - the parser binds a call's arguments to the parameters (`syntax/lower_intrinsic.rs`)
//!   and the printer writes them back (`printer/mod.rs`);
//! - the verifier's operand rules (`verifier/intrinsics.rs`, rules I1–I3 of docs/ir.md);
//! - the visitors: every expression an intrinsic holds (`visit.rs`);
//! - the access model: which buffers it reads and writes, and which writes land later
//!   (`Intrinsic::accesses`), for the passes' dependence and barrier analyses.
//!
//! Only the interpreter's semantics (`interp/compile.rs`, `interp/lockstep.rs` or
//! `interp/ops/`) and the PTX lowering (`backend/src/codegen/intrinsics.rs`) are per
//! intrinsic, each an exhaustive `match`. docs/ARCHITECTURE.md has the checklist for adding
//! one.

#[macro_use]
mod generate;
pub mod shuffle;

pub use shuffle::{Shuffle, ShuffleMode};

use crate::dtype::DType;
use crate::ir::{BufferDecl, Expr, Ident, Scope};
use crate::target::{AsyncCopy, MmaFamily, Target};
use crate::wgmma::{Major, SmemOperand, Swizzle};

/// Where a multi-element intrinsic operand starts: `buf[i, j]`. The operand covers
/// consecutive elements of the buffer's row-major storage from there.
#[derive(Clone, Debug, PartialEq)]
pub struct ElemRef {
    pub buffer: Ident,
    pub indices: Vec<Expr>,
}

intrinsic_table! {
    /// `T.cp_async(dst, src, bytes)` / `T.cp_async(dst, src, bytes, pred)`: an asynchronous
    /// copy of `bytes` (4, 8 or 16) bytes from global `src` to shared `dst`, both aligned to
    /// `bytes`. When `pred` is false nothing is read and `dst` is filled with zeros (PTX's
    /// src-size 0 form). The copy lands when a later `T.cp_async_wait` of this thread retires
    /// its group; reading or writing `dst` before that is an error.
    CpAsync { dst: Ref, src: Ref, bytes: Int, pred: Pred } => CP_ASYNC,
    /// `T.cp_async_commit()`: closes this thread's open group of `cp_async`s.
    CommitGroup => COMMIT_GROUP,
    /// `T.cp_async_wait(n)`: waits until at most `n` of this thread's committed groups are
    /// still in flight.
    WaitGroup { n: Int } => WAIT_GROUP,
    /// `T.ldmatrix(dst, src, num=4, trans=False)` (warp collective): loads `num` (1, 2 or 4)
    /// 8x8 matrices of 16-bit elements from shared memory. Lane `t` (for `t < 8 * num`)
    /// supplies the address `src` of row `t % 8` of matrix `t / 8`; every lane receives
    /// `2 * num` elements into `dst[..]` (2 per matrix: row `lane / 4`, columns
    /// `2 * (lane % 4)` and `+1`, or the transpose with `trans=True`).
    Ldmatrix { dst: Ref, src: Ref, num: Int, trans: Bool } => LDMATRIX,
    /// `T.mma_sync(acc, a, b)` (warp collective): `mma.sync.aligned.m16n8k16.row.col`,
    /// `acc[0..4] += A(a[0..8]) @ B(b[0..4])` with the PTX ISA's fragment layouts; `a`, `b`
    /// are float16 or bfloat16 (both the same), `acc` float32 — or float16 when `a` and `b`
    /// are float16 (the `.f16.f16.f16.f16` form; same element-to-lane map). int8 `a`, `b`
    /// with an int32 `acc` are `m16n8k32.s32.s8.s8` — or, with `packed_int4=True`, each
    /// byte two int4 along K (low nibble first) and the `m16n8k64.s32.s4.s4` form (docs/ir.md,
    /// "int4"): the same bytes in the same registers.
    Mma { acc: Ref, a: Ref, b: Ref, packed_int4: Bool } => MMA_SYNC,
    /// `T.mbarrier_init(bar, count)`: the mbarrier `bar` (one element of a shared int64
    /// buffer) starts in phase 0 expecting `count` (1..=1024) arrivals and no transaction
    /// bytes.
    MbarrierInit { bar: Ref, count: Int } => MBARRIER_INIT,
    /// `T.mbarrier_arrive(bar)`: one arrival of this thread on `bar`. When no arrival and no
    /// transaction byte is pending any more, the phase completes.
    MbarrierArrive { bar: Ref } => MBARRIER_ARRIVE,
    /// `T.mbarrier_arrive_expect_tx(bar, bytes)`: adds `bytes` (0..2^20) to the pending
    /// transaction bytes of `bar`, then arrives (PTX `mbarrier.arrive.expect_tx`).
    MbarrierArriveExpectTx { bar: Ref, bytes: Int } => MBARRIER_ARRIVE_EXPECT_TX,
    /// `T.mbarrier_wait(bar, parity)`: waits until the phase of `bar` with the parity of
    /// `parity` (a run-time integer; only its low bit counts) has completed, that is until the
    /// barrier's current phase has the other parity (PTX `mbarrier.try_wait.parity` in a loop).
    MbarrierWait { bar: Ref, parity: Value } => MBARRIER_WAIT,
    /// `T.fence_proxy_async()`: `fence.proxy.async.shared::cta`, orders this thread's earlier
    /// shared-memory writes before later reads by the async proxy (TMA, wgmma).
    FenceProxyAsync => FENCE_PROXY_ASYNC,
    /// `T.tma_load(dst, src, bar, box=(b0, …), swizzle=0, multicast=0)`: one elected thread
    /// copies the box of global `src` whose origin is `src`'s indices (outside the buffer:
    /// zeros) into shared memory from `dst` on, row-major and swizzled
    /// (`crate::wgmma::swizzle_address`), and the copy completes its bytes on the mbarrier
    /// `bar` (`cp.async.bulk.tensor`). With `multicast=MASK` (a kernel with `cluster_dims`)
    /// the box lands at `dst`'s offset in the shared memory of every block of the cluster
    /// whose rank's bit is set in MASK (the issuer's own only if its bit is), and completes
    /// its bytes on the mbarrier at `bar`'s offset in each of them (`.multicast::cluster`).
    TmaLoad { dst: Ref, src: Ref, bar: Ref, box_dims: Ints, swizzle: Int, multicast: Int } => TMA_LOAD,
    /// `T.mbarrier_arrive_cluster(bar, rank)`: one arrival of this thread on the mbarrier at
    /// `bar`'s offset in the shared memory of block `rank` of its cluster (`mapa` +
    /// `mbarrier.arrive.shared::cluster`); `rank` may be the thread's own block. It releases
    /// the thread's earlier accesses to whoever waits on that barrier.
    MbarrierArriveCluster { bar: Ref, rank: Value } => MBARRIER_ARRIVE_CLUSTER,
    /// `T.cluster_sync()`: every thread of every block of the cluster arrives and waits for
    /// all of them (`barrier.cluster.arrive.release` + `barrier.cluster.wait.acquire`); the
    /// accesses before it happen before the accesses after it, across the cluster. Needed
    /// after initializing mbarriers other blocks will use, and before a block exits while
    /// others may still reach its shared memory.
    ClusterSync => CLUSTER_SYNC,
    /// `T.wgmma_fence()` (warpgroup collective): `wgmma.fence.sync.aligned`, orders earlier
    /// register writes of the accumulators before the next `T.wgmma`.
    WgmmaFence => WGMMA_FENCE,
    /// `T.wgmma_commit()` (warpgroup collective): closes the warpgroup's open group of
    /// `T.wgmma`s (`wgmma.commit_group.sync.aligned`).
    WgmmaCommit => WGMMA_COMMIT,
    /// `T.wgmma_wait(n)` (warpgroup collective): waits until at most `n` (0..=7) committed
    /// groups are pending (`wgmma.wait_group.sync.aligned n`).
    WgmmaWait { n: Int } => WGMMA_WAIT,
    /// `T.wgmma(acc, a, b, n=N, …)` (warpgroup collective):
    /// `wgmma.mma_async.sync.aligned.m64nNk16.f32.{f16|bf16}.{f16|bf16}`. `a` and `b` give the
    /// shared start addresses of the descriptors, whose layouts are the constants
    /// (`crate::wgmma::SmemOperand`); `acc` is each thread's `n / 2` float32 registers;
    /// `accumulate` false ignores the old accumulator (PTX scale-d 0).
    Wgmma {
        acc: Ref, a: Ref, b: Ref, n: Int, trans_a: Bool, trans_b: Bool,
        a_swizzle: Int, a_lbo: Int, a_sbo: Int, b_swizzle: Int, b_lbo: Int, b_sbo: Int,
        accumulate: Pred,
    } => WGMMA_MMA,
    /// `T.wgmma_rs(acc, a, b, n=N, …)` (warpgroup collective): `T.wgmma` with A from
    /// registers — `wgmma.mma_async.sync.aligned.m64nNk16.f32.{f16|bf16}.{f16|bf16}` in its
    /// register-A form. Each thread's 8 elements from `a` on (a local array) hold its part
    /// of the 64 x 16 A tile in the accumulator's element-to-thread map: element `j` of
    /// thread `l` of warp `w` is A's row `16 w + l / 4 + 8 ((j / 2) % 2)`, column
    /// `8 (j / 4) + 2 (l % 4) + j % 2`. `b` and its constants as in `T.wgmma`.
    WgmmaRs {
        acc: Ref, a: Ref, b: Ref, n: Int, trans_b: Bool,
        b_swizzle: Int, b_lbo: Int, b_sbo: Int, accumulate: Pred,
    } => WGMMA_RS,
    /// `T.setmaxnreg(n, inc=True)` (warpgroup collective): `setmaxnreg.{inc|dec}.sync.aligned
    /// .u32 n`, a register-allocation hint (n a multiple of 8 in 24..=256); no effect on
    /// values.
    SetMaxNReg { n: Int, inc: Bool } => SETMAXNREG,
    /// `T.shfl_xor(dst, src, offset)` (warp collective): `shfl.sync.bfly.b32` over the whole
    /// warp — every lane `l` writes to `dst` the value `src` holds in lane `l ^ offset`
    /// (`offset` 1, 2, 4, 8 or 16). One element of a 32- or 16-bit dtype (a 16-bit value
    /// travels in the low half of the 32-bit register).
    ShflXor { dst: Ref, src: Ref, offset: Int } => SHFL_XOR,
    /// `T.shfl_down(dst, src, offset)` (warp collective): `shfl.sync.down.b32` over the
    /// whole warp — lane `l` writes to `dst` the value `src` holds in lane `l + offset`, or
    /// its own `src` when `l + offset > 31` (`offset` in 1..=31). One element of a 32- or
    /// 16-bit dtype, as `T.shfl_xor`.
    ShflDown { dst: Ref, src: Ref, offset: Int } => SHFL_DOWN,
    /// `T.shfl_sync_idx(dst, src, lane, width=32, mask=0xffffffff)` (warp collective over
    /// the lanes of `mask`): `shfl.sync.idx.b32` — each lane writes to `dst` the `src` of
    /// lane `lane` (a run-time integer, taken modulo `width`) of its own segment of `width`
    /// lanes, CUDA's `__shfl_sync(mask, v, lane, width)`. The lanes that take part and the
    /// lane each reads are `shuffle.rs`'s (PTX's rule); one element of any dtype but bool.
    ShflSyncIdx { dst: Ref, src: Ref, lane: Value, width: Value, mask: Value } => SHFL_SYNC_IDX,
    /// `T.shfl_sync_bfly(dst, src, lane_mask, width=32, mask=0xffffffff)`:
    /// `shfl.sync.bfly.b32`, lane `l` reads lane `l ^ lane_mask` (a run-time integer), or
    /// keeps its own value past the end of its segment — CUDA's `__shfl_xor_sync`.
    ShflSyncBfly { dst: Ref, src: Ref, lane_mask: Value, width: Value, mask: Value } => SHFL_SYNC_BFLY,
    /// `T.shfl_sync_down(dst, src, delta, width=32, mask=0xffffffff)`: `shfl.sync.down.b32`,
    /// lane `l` reads lane `l + delta` of its segment, or keeps its own past the segment's
    /// end — CUDA's `__shfl_down_sync`.
    ShflSyncDown { dst: Ref, src: Ref, delta: Value, width: Value, mask: Value } => SHFL_SYNC_DOWN,
    /// `T.shfl_sync_up(dst, src, delta, width=32, mask=0xffffffff)`: `shfl.sync.up.b32`, lane
    /// `l` reads lane `l - delta` of its segment, or keeps its own before the segment's
    /// start — CUDA's `__shfl_up_sync`.
    ShflSyncUp { dst: Ref, src: Ref, delta: Value, width: Value, mask: Value } => SHFL_SYNC_UP,
    /// `T.atomic_add_ret(old, dst, value)`: `atom.shared.add` — the thread adds its `value`
    /// (a register element of `dst`'s dtype) to the shared element `dst` as one indivisible
    /// read-modify-write, as `T.atomic_add` does, and receives the element's value before
    /// its add in the register element `old` (TileLang's `T.atomic_add(dst, value,
    /// return_prev=True)`).
    AtomicAddRet { old: Ref, dst: Ref, value: Ref } => ATOMIC_ADD_RET,
    /// `T.bar_sync(id, count)`: the named barrier `id` (1..=15; 0 is `T.sync_threads()`'s)
    /// over `count` threads (a multiple of 32) — `bar.sync id, count`. The reaching warps
    /// arrive and wait until `count` threads in all have arrived (here, elsewhere, or by
    /// `T.bar_arrive`). When the `count` threads reach it together, their shared-memory
    /// accesses before it happen before their accesses after it; threads outside are not
    /// ordered by it, and neither is a phase completed by arrivals from several places
    /// (the interpreter orders nothing it cannot prove).
    BarSync { id: Int, count: Int } => BAR_SYNC,
    /// `T.bar_arrive(id, count)`: `bar.arrive id, count` — the reaching warps count towards
    /// the phase of named barrier `id` over `count` threads without waiting (a producer
    /// signalling a consumer's `T.bar_sync`; the ping-pong of warp-specialized consumers).
    /// It orders no memory access.
    BarArrive { id: Int, count: Int } => BAR_ARRIVE,
    /// `T.print_value(value, msg="…")` (any level outside `T.Parallel`; TileLang's
    /// `T.print(value)`, `syntax/lower_print.rs`): every thread that runs it
    /// prints one line with `value` (a scalar of any dtype), its block and thread indices
    /// (`print.rs` has the line). Nothing it prints is read back.
    Print { value: Value, msg: Text } => PRINT,
    /// `T.print_msg(msg="…")`: every thread that runs it prints the message and its block
    /// and thread indices.
    PrintMsg { msg: Text } => PRINT_MSG,
    /// `T.print_elem(buf[i, j], index, msg="…", lane=0)`: the block's thread `lane` (its
    /// linear index; -1: every thread) prints the element `buf[i, j]` of a shared or global
    /// buffer, labelled with the buffer's name and `index` (the front end's expansion of
    /// `T.print(buf)` passes the element's flat index).
    PrintElem { elem: Ref, index: Value, msg: Text, lane: Int } => PRINT_ELEM,
    /// `T.philox_init(state[0], seed, seq, offset)`: curand's `curand_init(seed, seq,
    /// offset, &state)` for Philox4x32-10 into the thread's seven-word uint32 local
    /// `state` (`rng.rs`); the three values are run-time integers taken as C's `unsigned
    /// long long` (a negative one sign-extends).
    PhiloxInit { state: Ref, seed: Value, seq: Value, offset: Value } => PHILOX_INIT,
    /// `T.philox_rand(dst[0], state[0])`: `dst = curand(&state)`, the next uint32 of the
    /// stream; the state steps one draw.
    PhiloxRand { dst: Ref, state: Ref } => PHILOX_RAND,
    /// `T.philox_uniform(dst[0], state[0])`: `dst = curand_uniform(&state)`, a float32 in
    /// (0, 1] from the next draw.
    PhiloxUniform { dst: Ref, state: Ref } => PHILOX_UNIFORM,
}

mod print;

pub use print::{elem_tail, line_parts, Format, Printed, EVERY_LANE};
use print::{PRINT, PRINT_ELEM, PRINT_MSG};

pub mod rng;

use rng::{PHILOX_INIT, PHILOX_RAND, PHILOX_UNIFORM};

/// Who executes an intrinsic together.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Collective {
    /// Each thread on its own.
    Thread,
    /// All 32 lanes of a warp at once (`crate::target::WARP_SIZE`).
    Warp,
    /// All four warps of a warpgroup at once (`Target::warpgroup_size`).
    Warpgroup,
}

/// What an intrinsic does to the elements an operand covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Effect {
    Read,
    Write,
    ReadWrite,
    /// Written asynchronously: at issue (ordering it after earlier uses of the bytes), and
    /// again when a later wait lands it (what readers must be ordered after).
    AsyncWrite,
    /// Written by the async proxy (TMA), completing on an mbarrier: at issue (ordering it
    /// after earlier uses of the bytes); a reader observes the bytes by waiting on that
    /// mbarrier, which no block barrier replaces or needs to add to.
    BulkWrite,
    /// An mbarrier operation after its init (arrive, wait, a TMA's completion): atomic on the
    /// barrier object and ordered by it, so two of them never need a block barrier between
    /// them; it reads and updates the object, and must come after the init (a barrier
    /// placement counts it as a read).
    Sync,
}

impl Effect {
    pub fn reads(self) -> bool {
        matches!(self, Effect::Read | Effect::ReadWrite | Effect::Sync)
    }

    pub fn writes(self) -> bool {
        !matches!(self, Effect::Read)
    }

    /// Reads and writes that block barriers must order (`Sync` operations order
    /// themselves): `(reads, writes)`.
    pub fn ordered_by_barriers(self) -> (bool, bool) {
        match self {
            Effect::Sync => (true, false),
            e => (e.reads(), e.writes()),
        }
    }
}

/// How many consecutive elements an element-reference operand covers (per thread).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Count {
    /// A fixed number of elements.
    Elems(i64),
    /// The byte count held by the named integer parameter, in elements of the operand's
    /// dtype (which must divide it).
    BytesOf(&'static str),
    /// The named integer parameter times a factor.
    Times(&'static str, i64),
    /// A fixed number of bytes, in elements of the operand's dtype (which must divide it):
    /// `T.mma_sync`'s A is 16 bytes a lane, 8 float16 or 16 int8 elements.
    Bytes(i64),
    /// The named integer parameter times a number of bytes, in elements of the operand's
    /// dtype (`T.ldmatrix`'s destination: 4 bytes a lane per matrix).
    BytesTimes(&'static str, i64),
    /// The named integer parameter divided by a factor (which divides every allowed value).
    Per(&'static str, i64),
    /// The product of the named integer tuple: a box stored row-major from the operand on.
    Product(&'static str),
    /// A box of the named integer tuple's extents whose origin is the operand's indices:
    /// coordinates, which may lie partly or wholly outside the buffer (TMA reads zeros
    /// there). Neither the indices nor the box are bounds-checked.
    Box(&'static str),
}

/// An element-reference parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RefParam {
    /// The scopes its buffer may be in.
    pub scopes: &'static [Scope],
    /// The dtypes its buffer may have (empty: any).
    pub dtypes: &'static [DType],
    pub count: Count,
    pub effect: Effect,
}

/// The kind of one parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamKind {
    /// `buf[i, j]`: where the covered run of elements starts.
    Ref(RefParam),
    /// An integer constant: one of `allowed` (empty: any value ≥ 0); `default` when the call
    /// may leave it out.
    Int {
        allowed: &'static [i64],
        default: Option<i64>,
    },
    /// `True` / `False`; `default` when the call may leave it out.
    Bool { default: Option<bool> },
    /// A keyword `True` / `False` that is `False` when left out and written only when
    /// `True`: an opt-in form of an intrinsic (`packed_int4=True`), so that the plain form
    /// prints as it always has.
    Flag,
    /// A `bool` expression evaluated by each thread; may be left out (always true).
    Pred,
    /// An integer constant: a multiple of `step` in `min..=max`; `default` when the call may
    /// leave it out.
    IntRange {
        min: i64,
        max: i64,
        step: i64,
        default: Option<i64>,
    },
    /// A tuple of integer constants `(a, b, …)`, each in `min..=max`, one per dimension of
    /// the buffer of the element-reference parameter `rank_of`.
    IntTuple {
        min: i64,
        max: i64,
        rank_of: &'static str,
    },
    /// An integer expression evaluated by each thread at run time; `default` (a literal)
    /// when the call may leave it out.
    Value { default: Option<i64> },
    /// A string literal (`msg="…"`); empty when the call leaves it out.
    Text,
    /// An expression of any scalar dtype evaluated by each thread at run time (what
    /// `T.print` prints).
    Scalar,
}

impl ParamKind {
    /// Whether an integer parameter of this kind (or an entry of an integer tuple) may hold
    /// `v`.
    pub fn admits(&self, v: i64) -> bool {
        match *self {
            ParamKind::Int { allowed: &[], .. } => v >= 0,
            ParamKind::Int { allowed, .. } => allowed.contains(&v),
            ParamKind::IntRange { min, max, step, .. } => {
                (min..=max).contains(&v) && step > 0 && (v - min) % step == 0
            }
            ParamKind::IntTuple { min, max, .. } => (min..=max).contains(&v),
            _ => false,
        }
    }

    /// What [`ParamKind::admits`] admits, for messages: `4, 8 or 16`, `a multiple of 8 in
    /// 8..=256`.
    pub fn allowed_text(&self) -> String {
        match *self {
            ParamKind::Int { allowed: &[], .. } => "≥ 0".to_string(),
            ParamKind::Int { allowed, .. } => one_of(allowed),
            ParamKind::IntRange { min, max, step, .. } if step > 1 => {
                format!("a multiple of {step} in {min}..={max}")
            }
            ParamKind::IntRange { min, max, .. } | ParamKind::IntTuple { min, max, .. } => {
                format!("in {min}..={max}")
            }
            _ => String::new(),
        }
    }
}

/// What a target must have for an intrinsic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Needs {
    /// Every target has it.
    Nothing,
    AsyncCopy(AsyncCopy),
    Mma(MmaFamily),
    /// Thread-block clusters (`TargetDesc::max_cluster_size` > 1).
    Clusters,
}

impl Needs {
    /// Whether `target` has what is needed.
    pub fn met_by(self, target: Target) -> bool {
        match self {
            Needs::Nothing => true,
            Needs::AsyncCopy(k) => target.has_async_copy(k),
            Needs::Mma(f) => target.has_mma(f),
            Needs::Clusters => target.desc().max_cluster_size > 1,
        }
    }

    /// The requirement, for messages: "bulk tensor copies (TMA) and mbarriers".
    pub fn describe(self) -> &'static str {
        match self {
            Needs::Nothing => "nothing",
            Needs::AsyncCopy(AsyncCopy::CpAsync) => "`cp.async`",
            Needs::AsyncCopy(AsyncCopy::BulkTensor) => {
                "bulk tensor copies (TMA) with mbarriers and the async proxy"
            }
            Needs::Mma(MmaFamily::MmaSync) => "`mma.sync`",
            Needs::Mma(MmaFamily::Wgmma) => "warpgroup MMA (`wgmma`)",
            Needs::Clusters => "thread-block clusters",
        }
    }
}

/// One parameter of an intrinsic, in call order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Param {
    /// The keyword name (`T.cp_async(dst=…)`).
    pub name: &'static str,
    /// What it is, for messages: "the destination of `T.cp_async`".
    pub role: &'static str,
    pub kind: ParamKind,
    /// The printer writes it as `name=value` rather than positionally.
    pub keyword: bool,
}

/// The description of one intrinsic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IntrinsicDef {
    pub op: IntrinsicOp,
    /// The name as written: `T.cp_async`.
    pub name: &'static str,
    pub params: &'static [Param],
    pub collective: Collective,
    /// It may stand outside a thread-binding loop (at the tile level, or in the block-level
    /// code of a thread-level kernel), where it acts for every thread of the block.
    pub block_level: bool,
    /// Parameter pairs whose buffers must have one dtype.
    pub same_dtype: &'static [(&'static str, &'static str)],
    /// What the target must have (the verifier's target rule I4).
    pub needs: Needs,
}

impl IntrinsicDef {
    /// The parameter called `name`.
    pub fn param(&self, name: &str) -> Option<&'static Param> {
        self.params.iter().find(|p| p.name == name)
    }

    /// How many parameters a call must give (the leading ones without a default).
    pub fn required(&self) -> usize {
        self.params
            .iter()
            .take_while(|p| match p.kind {
                ParamKind::Ref(_) => true,
                ParamKind::Int { default, .. } => default.is_none(),
                ParamKind::IntRange { default, .. } => default.is_none(),
                ParamKind::Bool { default } => default.is_none(),
                ParamKind::Flag => false,
                ParamKind::IntTuple { .. } => true,
                ParamKind::Value { default } => default.is_none(),
                ParamKind::Pred => false,
                ParamKind::Scalar => true,
                ParamKind::Text => false,
            })
            .count()
    }
}

/// One argument of a call, borrowed from the intrinsic (one per parameter, in order).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Arg<'a> {
    Ref(&'a ElemRef),
    Int(i64),
    Bool(bool),
    /// A predicate; `None` when left out.
    Pred(Option<&'a Expr>),
    /// An integer tuple.
    Ints(&'a [i64]),
    /// A run-time value.
    Value(&'a Expr),
    /// A string literal.
    Text(&'a str),
}

/// One argument of a call, owned: what the parser builds an intrinsic from.
#[derive(Clone, Debug, PartialEq)]
pub enum ArgValue {
    Ref(ElemRef),
    Int(i64),
    Bool(bool),
    Pred(Option<Expr>),
    Ints(Vec<i64>),
    Value(Expr),
    Text(String),
}

const REGISTERS: &[Scope] = &[Scope::Local];
const SIXTEEN_BIT: &[DType] = &[DType::Float16, DType::BFloat16];
/// What `T.ldmatrix` moves and `T.mma_sync` multiplies: 16-bit floats (`m16n8k16`) and
/// int8 (`m16n8k32.s32.s8.s8`; ldmatrix moves its bytes as the b16 pairs they are).
const MMA_OPERAND: &[DType] = &[DType::Float16, DType::BFloat16, DType::Int8];
/// `T.wgmma`'s operand dtypes: the ones `wgmma::instruction_k` gives a k.
const WGMMA_OPERAND: &[DType] = &[
    DType::Float16,
    DType::BFloat16,
    DType::Float8E4M3,
    DType::Float8E5M2,
    DType::Int8,
];

static CP_ASYNC: IntrinsicDef = IntrinsicDef {
    op: IntrinsicOp::CpAsync,
    name: "T.cp_async",
    params: &[
        Param {
            name: "dst",
            role: "destination",
            kind: ParamKind::Ref(RefParam {
                scopes: &[Scope::Shared],
                dtypes: &[],
                count: Count::BytesOf("bytes"),
                effect: Effect::AsyncWrite,
            }),
            keyword: false,
        },
        Param {
            name: "src",
            role: "source",
            kind: ParamKind::Ref(RefParam {
                scopes: &[Scope::Global],
                dtypes: &[],
                count: Count::BytesOf("bytes"),
                effect: Effect::Read,
            }),
            keyword: false,
        },
        Param {
            name: "bytes",
            role: "byte count",
            kind: ParamKind::Int {
                allowed: &[4, 8, 16],
                default: None,
            },
            keyword: false,
        },
        Param {
            name: "pred",
            role: "predicate",
            kind: ParamKind::Pred,
            keyword: false,
        },
    ],
    collective: Collective::Thread,
    block_level: false,
    same_dtype: &[("dst", "src")],
    needs: Needs::AsyncCopy(AsyncCopy::CpAsync),
};

static COMMIT_GROUP: IntrinsicDef = IntrinsicDef {
    op: IntrinsicOp::CommitGroup,
    name: "T.cp_async_commit",
    params: &[],
    collective: Collective::Thread,
    block_level: true,
    same_dtype: &[],
    needs: Needs::AsyncCopy(AsyncCopy::CpAsync),
};

static WAIT_GROUP: IntrinsicDef = IntrinsicDef {
    op: IntrinsicOp::WaitGroup,
    name: "T.cp_async_wait",
    params: &[Param {
        name: "n",
        role: "group count",
        kind: ParamKind::Int {
            allowed: &[],
            default: None,
        },
        keyword: false,
    }],
    collective: Collective::Thread,
    block_level: true,
    same_dtype: &[],
    needs: Needs::AsyncCopy(AsyncCopy::CpAsync),
};

static LDMATRIX: IntrinsicDef = IntrinsicDef {
    op: IntrinsicOp::Ldmatrix,
    name: "T.ldmatrix",
    params: &[
        Param {
            name: "dst",
            role: "destination",
            // 4 bytes a lane per matrix: 2 16-bit elements or 4 int8 ones.
            kind: ParamKind::Ref(RefParam {
                scopes: REGISTERS,
                dtypes: MMA_OPERAND,
                count: Count::BytesTimes("num", 4),
                effect: Effect::Write,
            }),
            keyword: false,
        },
        Param {
            name: "src",
            role: "source",
            // Each lane's source address is one 16-byte row (8 16-bit or 16 int8 elements).
            kind: ParamKind::Ref(RefParam {
                scopes: &[Scope::Shared],
                dtypes: MMA_OPERAND,
                count: Count::Bytes(16),
                effect: Effect::Read,
            }),
            keyword: false,
        },
        Param {
            name: "num",
            role: "matrix count",
            kind: ParamKind::Int {
                allowed: &[1, 2, 4],
                default: Some(4),
            },
            keyword: true,
        },
        Param {
            name: "trans",
            role: "transpose flag",
            kind: ParamKind::Bool {
                default: Some(false),
            },
            keyword: true,
        },
    ],
    collective: Collective::Warp,
    block_level: false,
    same_dtype: &[("dst", "src")],
    needs: Needs::Nothing,
};

/// The accumulator dtypes of `T.mma_sync`; a float16 one takes float16 operands only, an
/// int32 one int8 operands only ([`mma_accumulator_rule`]).
const MMA_ACCUMULATORS: &[DType] = &[DType::Float32, DType::Float16, DType::Int32];

/// `T.mma_sync`'s A: each lane's 16 bytes of the 16 x k tile (8 16-bit elements of
/// `m16n8k16`, 16 int8 of `m16n8k32`).
const MMA_A: Param = Param {
    name: "a",
    role: "A operand",
    kind: ParamKind::Ref(RefParam {
        scopes: REGISTERS,
        dtypes: MMA_OPERAND,
        count: Count::Bytes(16),
        effect: Effect::Read,
    }),
    keyword: false,
};

static MMA_SYNC: IntrinsicDef = IntrinsicDef {
    op: IntrinsicOp::Mma,
    name: "T.mma_sync",
    params: &[
        Param {
            name: "acc",
            role: "accumulator",
            kind: ParamKind::Ref(RefParam {
                scopes: REGISTERS,
                dtypes: MMA_ACCUMULATORS,
                count: Count::Elems(4),
                effect: Effect::ReadWrite,
            }),
            keyword: false,
        },
        MMA_A,
        Param {
            name: "b",
            role: "B operand",
            kind: ParamKind::Ref(RefParam {
                scopes: REGISTERS,
                dtypes: MMA_OPERAND,
                // 8 bytes a lane: 4 16-bit elements or 8 int8 ones.
                count: Count::Bytes(8),
                effect: Effect::Read,
            }),
            keyword: false,
        },
        Param {
            name: "packed_int4",
            role: "packed int4 flag",
            kind: ParamKind::Flag,
            keyword: true,
        },
    ],
    collective: Collective::Warp,
    block_level: false,
    same_dtype: &[("a", "b")],
    needs: Needs::Mma(MmaFamily::MmaSync),
};

const BARRIER: &[DType] = &[DType::Int64];

/// The mbarrier operand: one element of a shared int64 buffer (an mbarrier is an 8-byte
/// shared-memory object).
const fn barrier(effect: Effect) -> Param {
    Param {
        name: "bar",
        role: "mbarrier",
        kind: ParamKind::Ref(RefParam {
            scopes: &[Scope::Shared],
            dtypes: BARRIER,
            count: Count::Elems(1),
            effect,
        }),
        keyword: false,
    }
}

const TMA: Needs = Needs::AsyncCopy(AsyncCopy::BulkTensor);
const WGMMA: Needs = Needs::Mma(MmaFamily::Wgmma);

static MBARRIER_INIT: IntrinsicDef = IntrinsicDef {
    op: IntrinsicOp::MbarrierInit,
    name: "T.mbarrier_init",
    params: &[
        barrier(Effect::Write),
        Param {
            name: "count",
            role: "arrival count",
            kind: ParamKind::IntRange {
                min: 1,
                max: 1024,
                step: 1,
                default: None,
            },
            keyword: false,
        },
    ],
    collective: Collective::Thread,
    block_level: false,
    same_dtype: &[],
    needs: TMA,
};

static MBARRIER_ARRIVE: IntrinsicDef = IntrinsicDef {
    op: IntrinsicOp::MbarrierArrive,
    name: "T.mbarrier_arrive",
    params: &[barrier(Effect::Sync)],
    collective: Collective::Thread,
    block_level: false,
    same_dtype: &[],
    needs: TMA,
};

/// PTX's limit on an mbarrier's transaction count is 2^20 - 1.
pub const MAX_TX_BYTES: i64 = (1 << 20) - 1;

static MBARRIER_ARRIVE_EXPECT_TX: IntrinsicDef = IntrinsicDef {
    op: IntrinsicOp::MbarrierArriveExpectTx,
    name: "T.mbarrier_arrive_expect_tx",
    params: &[
        barrier(Effect::Sync),
        Param {
            name: "bytes",
            role: "transaction byte count",
            kind: ParamKind::IntRange {
                min: 0,
                max: MAX_TX_BYTES,
                step: 1,
                default: None,
            },
            keyword: false,
        },
    ],
    collective: Collective::Thread,
    block_level: false,
    same_dtype: &[],
    needs: TMA,
};

static MBARRIER_WAIT: IntrinsicDef = IntrinsicDef {
    op: IntrinsicOp::MbarrierWait,
    name: "T.mbarrier_wait",
    params: &[
        barrier(Effect::Sync),
        Param {
            name: "parity",
            role: "phase parity",
            kind: ParamKind::Value { default: None },
            keyword: false,
        },
    ],
    collective: Collective::Thread,
    block_level: false,
    same_dtype: &[],
    needs: TMA,
};

static FENCE_PROXY_ASYNC: IntrinsicDef = IntrinsicDef {
    op: IntrinsicOp::FenceProxyAsync,
    name: "T.fence_proxy_async",
    params: &[],
    collective: Collective::Thread,
    block_level: true,
    same_dtype: &[],
    needs: TMA,
};

/// The swizzle widths in bytes of TMA and of wgmma descriptors (0: none);
/// `crate::wgmma::Swizzle` is their meaning.
const SWIZZLES: &[i64] = &[0, 32, 64, 128];

/// The largest extent of one box dimension of a TMA copy.
pub const MAX_BOX_DIM: i64 = 256;

/// The largest dimension of a tensor `T.tma_load` reads through a tensor map. The driver
/// takes 2^32, but a box origin is a `.s32` coordinate: every origin up to one box past
/// the end (`dim + MAX_BOX_DIM`) must stay below 2^31.
pub const MAX_TMA_DIM: i64 = (1 << 31) - 1 - MAX_BOX_DIM;

static TMA_LOAD: IntrinsicDef = IntrinsicDef {
    op: IntrinsicOp::TmaLoad,
    name: "T.tma_load",
    params: &[
        Param {
            name: "dst",
            role: "destination",
            kind: ParamKind::Ref(RefParam {
                scopes: &[Scope::Shared],
                dtypes: &[],
                count: Count::Product("box"),
                effect: Effect::BulkWrite,
            }),
            keyword: false,
        },
        Param {
            name: "src",
            role: "source",
            kind: ParamKind::Ref(RefParam {
                scopes: &[Scope::Global],
                dtypes: &[],
                count: Count::Box("box"),
                effect: Effect::Read,
            }),
            keyword: false,
        },
        Param {
            name: "bar",
            role: "mbarrier",
            kind: ParamKind::Ref(RefParam {
                scopes: &[Scope::Shared],
                dtypes: BARRIER,
                count: Count::Elems(1),
                effect: Effect::Sync,
            }),
            keyword: false,
        },
        Param {
            name: "box",
            role: "box",
            kind: ParamKind::IntTuple {
                min: 1,
                max: MAX_BOX_DIM,
                rank_of: "src",
            },
            keyword: true,
        },
        Param {
            name: "swizzle",
            role: "swizzle",
            kind: ParamKind::Int {
                allowed: SWIZZLES,
                default: Some(0),
            },
            keyword: true,
        },
        Param {
            name: "multicast",
            role: "multicast mask",
            kind: ParamKind::IntRange {
                min: 0,
                max: MAX_CLUSTER_MASK,
                step: 1,
                default: Some(0),
            },
            keyword: true,
        },
    ],
    collective: Collective::Thread,
    block_level: false,
    same_dtype: &[("dst", "src")],
    needs: TMA,
};

/// A multicast mask has one bit per block of the cluster (PTX's 16-bit `ctaMask`).
pub const MAX_CLUSTER_MASK: i64 = 0xFFFF;

static MBARRIER_ARRIVE_CLUSTER: IntrinsicDef = IntrinsicDef {
    op: IntrinsicOp::MbarrierArriveCluster,
    name: "T.mbarrier_arrive_cluster",
    params: &[
        barrier(Effect::Sync),
        Param {
            name: "rank",
            role: "block rank in the cluster",
            kind: ParamKind::Value { default: None },
            keyword: false,
        },
    ],
    collective: Collective::Thread,
    block_level: false,
    same_dtype: &[],
    needs: Needs::Clusters,
};

static CLUSTER_SYNC: IntrinsicDef = IntrinsicDef {
    op: IntrinsicOp::ClusterSync,
    name: "T.cluster_sync",
    params: &[],
    collective: Collective::Thread,
    block_level: false,
    same_dtype: &[],
    needs: Needs::Clusters,
};

static WGMMA_FENCE: IntrinsicDef = IntrinsicDef {
    op: IntrinsicOp::WgmmaFence,
    name: "T.wgmma_fence",
    params: &[],
    collective: Collective::Warpgroup,
    block_level: false,
    same_dtype: &[],
    needs: WGMMA,
};

static WGMMA_COMMIT: IntrinsicDef = IntrinsicDef {
    op: IntrinsicOp::WgmmaCommit,
    name: "T.wgmma_commit",
    params: &[],
    collective: Collective::Warpgroup,
    block_level: false,
    same_dtype: &[],
    needs: WGMMA,
};

static WGMMA_WAIT: IntrinsicDef = IntrinsicDef {
    op: IntrinsicOp::WgmmaWait,
    name: "T.wgmma_wait",
    params: &[Param {
        name: "n",
        role: "group count",
        kind: ParamKind::IntRange {
            min: 0,
            max: 7,
            step: 1,
            default: None,
        },
        keyword: false,
    }],
    collective: Collective::Warpgroup,
    block_level: false,
    same_dtype: &[],
    needs: WGMMA,
};

/// A wgmma descriptor's leading / stride byte offset: 14 bits of 16-byte units.
const DESC_OFFSET: ParamKind = ParamKind::IntRange {
    min: 0,
    max: (1 << 18) - 16,
    step: 16,
    default: None,
};

/// A keyword constant of `T.wgmma`.
const fn wgmma_const(name: &'static str, role: &'static str, kind: ParamKind) -> Param {
    Param {
        name,
        role,
        kind,
        keyword: true,
    }
}

const SWIZZLE_PARAM: ParamKind = ParamKind::Int {
    allowed: SWIZZLES,
    default: Some(0),
};

/// The accumulator of `T.wgmma` and `T.wgmma_rs`: each thread's `n / 2` float32 registers.
const WGMMA_ACC: Param = Param {
    name: "acc",
    role: "accumulator",
    kind: ParamKind::Ref(RefParam {
        scopes: REGISTERS,
        // int32 for int8 operands (`crate::wgmma::accumulator_rule`).
        dtypes: &[DType::Float32, DType::Int32],
        count: Count::Per("n", 2),
        effect: Effect::ReadWrite,
    }),
    keyword: false,
};

/// B of `T.wgmma` and `T.wgmma_rs`: its descriptor's start address (the layout is the
/// call's constants), so one element is named.
const WGMMA_B: Param = Param {
    name: "b",
    role: "B operand",
    kind: ParamKind::Ref(RefParam {
        scopes: &[Scope::Shared],
        dtypes: WGMMA_OPERAND,
        count: Count::Elems(1),
        effect: Effect::Read,
    }),
    keyword: false,
};

/// A in registers: each thread's 8 16-bit elements (`T.mma_sync`'s 16 x 16 tile, one k-step
/// of `T.wgmma_rs`'s 64 x 16).
const REGISTER_A: Param = Param {
    name: "a",
    role: "A operand",
    kind: ParamKind::Ref(RefParam {
        scopes: REGISTERS,
        dtypes: SIXTEEN_BIT,
        count: Count::Elems(8),
        effect: Effect::Read,
    }),
    keyword: false,
};

static WGMMA_MMA: IntrinsicDef = IntrinsicDef {
    op: IntrinsicOp::Wgmma,
    name: "T.wgmma",
    params: &[
        WGMMA_ACC,
        // The operands give the descriptors' start addresses; their layouts are the
        // constants below (`crate::wgmma::SmemOperand`), so one element is named here.
        Param {
            name: "a",
            role: "A operand",
            kind: ParamKind::Ref(RefParam {
                scopes: &[Scope::Shared],
                dtypes: WGMMA_OPERAND,
                count: Count::Elems(1),
                effect: Effect::Read,
            }),
            keyword: false,
        },
        WGMMA_B,
        wgmma_const(
            "n",
            "N extent",
            ParamKind::IntRange {
                min: 8,
                max: 256,
                step: 8,
                default: None,
            },
        ),
        wgmma_const(
            "trans_a",
            "A major flag",
            ParamKind::Bool {
                default: Some(false),
            },
        ),
        wgmma_const(
            "trans_b",
            "B major flag",
            ParamKind::Bool {
                default: Some(false),
            },
        ),
        wgmma_const("a_swizzle", "A swizzle", SWIZZLE_PARAM),
        wgmma_const("a_lbo", "A leading byte offset", DESC_OFFSET),
        wgmma_const("a_sbo", "A stride byte offset", DESC_OFFSET),
        wgmma_const("b_swizzle", "B swizzle", SWIZZLE_PARAM),
        wgmma_const("b_lbo", "B leading byte offset", DESC_OFFSET),
        wgmma_const("b_sbo", "B stride byte offset", DESC_OFFSET),
        wgmma_const("accumulate", "accumulate predicate", ParamKind::Pred),
    ],
    collective: Collective::Warpgroup,
    block_level: false,
    // One dtype, or e4m3 with e5m2: `wgmma::operand_rule`, checked with the major flags.
    same_dtype: &[],
    needs: WGMMA,
};

static WGMMA_RS: IntrinsicDef = IntrinsicDef {
    op: IntrinsicOp::WgmmaRs,
    name: "T.wgmma_rs",
    params: &[
        WGMMA_ACC,
        REGISTER_A,
        WGMMA_B,
        wgmma_const(
            "n",
            "N extent",
            ParamKind::IntRange {
                min: 8,
                max: 256,
                step: 8,
                default: None,
            },
        ),
        wgmma_const(
            "trans_b",
            "B major flag",
            ParamKind::Bool {
                default: Some(false),
            },
        ),
        wgmma_const("b_swizzle", "B swizzle", SWIZZLE_PARAM),
        wgmma_const("b_lbo", "B leading byte offset", DESC_OFFSET),
        wgmma_const("b_sbo", "B stride byte offset", DESC_OFFSET),
        wgmma_const("accumulate", "accumulate predicate", ParamKind::Pred),
    ],
    collective: Collective::Warpgroup,
    block_level: false,
    // A and B one 16-bit dtype (register A has no fp8 form here).
    same_dtype: &[("a", "b")],
    needs: WGMMA,
};

static SETMAXNREG: IntrinsicDef = IntrinsicDef {
    op: IntrinsicOp::SetMaxNReg,
    name: "T.setmaxnreg",
    params: &[
        Param {
            name: "n",
            role: "register count",
            kind: ParamKind::IntRange {
                min: 24,
                max: 256,
                step: 8,
                default: None,
            },
            keyword: false,
        },
        Param {
            name: "inc",
            role: "increase flag",
            kind: ParamKind::Bool {
                default: Some(true),
            },
            keyword: true,
        },
    ],
    collective: Collective::Warpgroup,
    block_level: false,
    same_dtype: &[],
    needs: WGMMA,
};

/// Shuffles move one register of at most 32 bits.
const SHUFFLED: &[DType] = &[
    DType::Float32,
    DType::Int32,
    DType::UInt32,
    DType::Float16,
    DType::BFloat16,
];

/// A shuffle's operands: one register element written, one read.
const SHUFFLE_DST: Param = Param {
    name: "dst",
    role: "destination",
    kind: ParamKind::Ref(RefParam {
        scopes: REGISTERS,
        dtypes: SHUFFLED,
        count: Count::Elems(1),
        effect: Effect::Write,
    }),
    keyword: false,
};
const SHUFFLE_SRC: Param = Param {
    name: "src",
    role: "source",
    kind: ParamKind::Ref(RefParam {
        scopes: REGISTERS,
        dtypes: SHUFFLED,
        count: Count::Elems(1),
        effect: Effect::Read,
    }),
    keyword: false,
};

static SHFL_DOWN: IntrinsicDef = IntrinsicDef {
    op: IntrinsicOp::ShflDown,
    name: "T.shfl_down",
    params: &[
        SHUFFLE_DST,
        SHUFFLE_SRC,
        Param {
            name: "offset",
            role: "lane offset",
            kind: ParamKind::IntRange {
                min: 1,
                max: 31,
                step: 1,
                default: None,
            },
            keyword: true,
        },
    ],
    collective: Collective::Warp,
    block_level: false,
    same_dtype: &[("dst", "src")],
    needs: Needs::Nothing,
};

/// What a run-time shuffle moves: one element of any dtype but bool (PTX moves 32 bits;
/// narrower values travel in the low bits of the word, 64-bit ones as two words).
const SHUFFLED_ANY: &[DType] = &[
    DType::Float16,
    DType::BFloat16,
    DType::Float32,
    DType::Float64,
    DType::Float8E4M3,
    DType::Float8E5M2,
    DType::Int8,
    DType::Int16,
    DType::Int32,
    DType::Int64,
    DType::UInt8,
    DType::UInt16,
    DType::UInt32,
];

/// The operands of the run-time shuffles (`T.shfl_sync_*`): `dst` and `src` one register
/// element each, the lane operand (`value` is its name and role), the segment width and
/// the member mask.
macro_rules! shfl_sync_params {
    ($value:literal, $role:literal) => {
        &[
            Param {
                name: "dst",
                role: "destination",
                kind: ParamKind::Ref(RefParam {
                    scopes: REGISTERS,
                    dtypes: SHUFFLED_ANY,
                    count: Count::Elems(1),
                    effect: Effect::Write,
                }),
                keyword: false,
            },
            Param {
                name: "src",
                role: "source",
                kind: ParamKind::Ref(RefParam {
                    scopes: REGISTERS,
                    dtypes: SHUFFLED_ANY,
                    count: Count::Elems(1),
                    effect: Effect::Read,
                }),
                keyword: false,
            },
            Param {
                name: $value,
                role: $role,
                kind: ParamKind::Value { default: None },
                keyword: false,
            },
            Param {
                name: "width",
                role: "segment width",
                // A power of two in 1..=32 (`shuffle::constant_rules`, and the interpreter
                // at run time).
                kind: ParamKind::Value { default: Some(32) },
                keyword: true,
            },
            Param {
                name: "mask",
                role: "member mask",
                // Its low 32 bits, PTX's `.b32` operand.
                kind: ParamKind::Value {
                    default: Some(0xFFFF_FFFF),
                },
                keyword: true,
            },
        ]
    };
}

/// A run-time shuffle's definition: `$name` with its lane operand.
macro_rules! shfl_sync_def {
    ($op:ident, $name:literal, $value:literal, $role:literal) => {
        IntrinsicDef {
            op: IntrinsicOp::$op,
            name: $name,
            params: shfl_sync_params!($value, $role),
            // The lanes of the mask, together (the interpreter's rule: `shuffle.rs`).
            collective: Collective::Warp,
            block_level: false,
            same_dtype: &[("dst", "src")],
            needs: Needs::Nothing,
        }
    };
}

static SHFL_SYNC_IDX: IntrinsicDef =
    shfl_sync_def!(ShflSyncIdx, "T.shfl_sync_idx", "lane", "source lane");
static SHFL_SYNC_BFLY: IntrinsicDef =
    shfl_sync_def!(ShflSyncBfly, "T.shfl_sync_bfly", "lane_mask", "lane mask");
static SHFL_SYNC_DOWN: IntrinsicDef =
    shfl_sync_def!(ShflSyncDown, "T.shfl_sync_down", "delta", "lane offset");
static SHFL_SYNC_UP: IntrinsicDef =
    shfl_sync_def!(ShflSyncUp, "T.shfl_sync_up", "delta", "lane offset");

/// What `T.atomic_add_ret` adds: the dtypes of PTX's `atom.shared.add` (int64 as `.u64`).
const ATOMIC_RET: &[DType] = &[
    DType::Int32,
    DType::UInt32,
    DType::Int64,
    DType::Float32,
    DType::Float64,
];

static ATOMIC_ADD_RET: IntrinsicDef = IntrinsicDef {
    op: IntrinsicOp::AtomicAddRet,
    name: "T.atomic_add_ret",
    params: &[
        Param {
            name: "old",
            role: "old value",
            kind: ParamKind::Ref(RefParam {
                scopes: REGISTERS,
                dtypes: ATOMIC_RET,
                count: Count::Elems(1),
                effect: Effect::Write,
            }),
            keyword: false,
        },
        Param {
            name: "dst",
            role: "destination",
            // Shared memory only: the interpreter orders the adds of a block's threads, not
            // those of several blocks (docs/ir.md).
            kind: ParamKind::Ref(RefParam {
                scopes: &[Scope::Shared],
                dtypes: ATOMIC_RET,
                count: Count::Elems(1),
                effect: Effect::ReadWrite,
            }),
            keyword: false,
        },
        Param {
            name: "value",
            role: "added value",
            kind: ParamKind::Ref(RefParam {
                scopes: REGISTERS,
                dtypes: ATOMIC_RET,
                count: Count::Elems(1),
                effect: Effect::Read,
            }),
            keyword: false,
        },
    ],
    collective: Collective::Thread,
    block_level: false,
    same_dtype: &[("old", "dst"), ("value", "dst")],
    needs: Needs::Nothing,
};

/// A named barrier's operands (`T.bar_sync`, `T.bar_arrive`): its id (0 is
/// `T.sync_threads()`'s) and its thread count, whole warps.
const NAMED_BARRIER_PARAMS: &[Param] = &[
    Param {
        name: "id",
        role: "barrier id",
        kind: ParamKind::IntRange {
            min: 1,
            max: 15,
            step: 1,
            default: None,
        },
        keyword: false,
    },
    Param {
        name: "count",
        role: "thread count",
        kind: ParamKind::IntRange {
            min: 32,
            max: 1024,
            step: 32,
            default: None,
        },
        keyword: false,
    },
];

static BAR_SYNC: IntrinsicDef = IntrinsicDef {
    op: IntrinsicOp::BarSync,
    name: "T.bar_sync",
    params: NAMED_BARRIER_PARAMS,
    // Whole warps take part (`bar.sync` is `.aligned`); the interpreter checks the count.
    collective: Collective::Warp,
    block_level: false,
    same_dtype: &[],
    needs: Needs::Nothing,
};

static BAR_ARRIVE: IntrinsicDef = IntrinsicDef {
    op: IntrinsicOp::BarArrive,
    name: "T.bar_arrive",
    params: NAMED_BARRIER_PARAMS,
    // Whole warps take part (`bar.arrive` is `.aligned`).
    collective: Collective::Warp,
    block_level: false,
    same_dtype: &[],
    needs: Needs::Nothing,
};

static SHFL_XOR: IntrinsicDef = IntrinsicDef {
    op: IntrinsicOp::ShflXor,
    name: "T.shfl_xor",
    params: &[
        SHUFFLE_DST,
        SHUFFLE_SRC,
        Param {
            name: "offset",
            role: "lane offset",
            kind: ParamKind::Int {
                allowed: &[1, 2, 4, 8, 16],
                default: None,
            },
            keyword: true,
        },
    ],
    collective: Collective::Warp,
    block_level: false,
    same_dtype: &[("dst", "src")],
    needs: Needs::Nothing,
};

/// The definition of the intrinsic written `name` (`T.cp_async`).
pub fn lookup(name: &str) -> Option<&'static IntrinsicDef> {
    all().into_iter().find(|d| d.name == name)
}

/// One access an intrinsic makes: the operand, its parameter, and what it does there.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Access<'a> {
    pub operand: &'a ElemRef,
    pub param: &'static Param,
    pub effect: Effect,
}

impl Intrinsic {
    pub fn op(&self) -> IntrinsicOp {
        self.def().op
    }

    /// The name as written: `T.cp_async`.
    pub fn name(&self) -> &'static str {
        self.def().name
    }

    /// The element references of the call, mutably, in parameter order.
    pub fn refs_mut(&mut self) -> Vec<&mut ElemRef> {
        self.parts_mut().0
    }

    /// The element references, in parameter order.
    pub fn operands(&self) -> Vec<&ElemRef> {
        self.args()
            .into_iter()
            .filter_map(|a| match a {
                Arg::Ref(r) => Some(r),
                _ => None,
            })
            .collect()
    }

    pub fn operands_mut(&mut self) -> Vec<&mut ElemRef> {
        self.parts_mut().0
    }

    /// The predicate, when the call has one.
    pub fn pred(&self) -> Option<&Expr> {
        self.args().into_iter().find_map(|a| match a {
            Arg::Pred(p) => p,
            _ => None,
        })
    }

    /// Every expression the call holds directly: operand indices, then the predicate or
    /// run-time value.
    pub fn exprs(&self) -> Vec<&Expr> {
        let mut out: Vec<&Expr> = Vec::new();
        for a in self.args() {
            match a {
                Arg::Ref(r) => out.extend(r.indices.iter()),
                Arg::Pred(Some(p)) | Arg::Value(p) => out.push(p),
                _ => {}
            }
        }
        out
    }

    /// [`Intrinsic::exprs`], mutably.
    pub fn exprs_mut(&mut self) -> Vec<&mut Expr> {
        let (refs, values) = self.parts_mut();
        let mut out: Vec<&mut Expr> = Vec::new();
        for r in refs {
            out.extend(r.indices.iter_mut());
        }
        out.extend(values);
        out
    }

    /// What the call does to each of its operands.
    pub fn accesses(&self) -> Vec<Access<'_>> {
        self.def()
            .params
            .iter()
            .zip(self.args())
            .filter_map(|(param, arg)| match (param.kind, arg) {
                (ParamKind::Ref(rule), Arg::Ref(operand)) => Some(Access {
                    operand,
                    param,
                    effect: rule.effect,
                }),
                _ => None,
            })
            .collect()
    }

    /// The shared-memory layouts a `T.wgmma`'s or `T.wgmma_rs`'s constants describe: A's
    /// (`None` for `T.wgmma_rs`, whose A is in registers) and B's (`None` for another
    /// intrinsic, or a swizzle the verifier rejects) — what the interpreter reads the
    /// operands by and codegen packs into the descriptors.
    pub fn wgmma_layouts(&self) -> Option<(Option<SmemOperand>, SmemOperand)> {
        let layout = |trans: bool, swizzle: i64, lbo: i64, sbo: i64| {
            Some(SmemOperand {
                major: Major::from_trans(trans),
                swizzle: Swizzle::from_bytes(swizzle)?,
                lbo,
                sbo,
            })
        };
        match self {
            Intrinsic::Wgmma {
                trans_a,
                trans_b,
                a_swizzle,
                a_lbo,
                a_sbo,
                b_swizzle,
                b_lbo,
                b_sbo,
                ..
            } => Some((
                Some(layout(*trans_a, *a_swizzle, *a_lbo, *a_sbo)?),
                layout(*trans_b, *b_swizzle, *b_lbo, *b_sbo)?,
            )),
            Intrinsic::WgmmaRs {
                trans_b,
                b_swizzle,
                b_lbo,
                b_sbo,
                ..
            } => Some((None, layout(*trans_b, *b_swizzle, *b_lbo, *b_sbo)?)),
            _ => None,
        }
    }

    /// The accumulator of a `T.wgmma` or `T.wgmma_rs` and its `n` (each thread's `n / 2`
    /// registers from the reference on).
    pub fn wgmma_accumulator(&self) -> Option<(&ElemRef, i64)> {
        match self {
            Intrinsic::Wgmma { acc, n, .. } | Intrinsic::WgmmaRs { acc, n, .. } => Some((acc, *n)),
            _ => None,
        }
    }

    /// The value of integer parameter `name`.
    pub fn int_arg(&self, name: &str) -> Option<i64> {
        self.def()
            .params
            .iter()
            .zip(self.args())
            .find_map(|(p, a)| match a {
                Arg::Int(v) if p.name == name => Some(v),
                _ => None,
            })
    }

    /// The value of integer-tuple parameter `name`.
    pub fn ints_arg(&self, name: &str) -> Option<&[i64]> {
        self.def()
            .params
            .iter()
            .zip(self.args())
            .find_map(|(p, a)| match a {
                Arg::Ints(v) if p.name == name => Some(v),
                _ => None,
            })
    }

    /// The integer tuple `name` when every entry is one its definition allows.
    fn valid_ints_arg(&self, name: &str) -> Option<&[i64]> {
        let v = self.ints_arg(name)?;
        let kind = self.def().param(name)?.kind;
        v.iter().all(|&x| kind.admits(x)).then_some(v)
    }

    /// The value of integer parameter `name` when it is one its definition allows.
    fn valid_int_arg(&self, name: &str) -> Option<i64> {
        let v = self.int_arg(name)?;
        self.def().param(name)?.kind.admits(v).then_some(v)
    }

    /// How many consecutive elements of an `elem_bytes`-byte dtype the operand of parameter
    /// `param` covers; `None` when the count is not a whole number of elements or depends on
    /// a constant the definition does not allow.
    pub fn count(&self, param: &Param, elem_bytes: i64) -> Option<i64> {
        let ParamKind::Ref(rule) = param.kind else {
            return None;
        };
        match rule.count {
            Count::Elems(n) => Some(n),
            Count::Times(p, k) => self.valid_int_arg(p)?.checked_mul(k),
            Count::Per(p, k) => {
                let v = self.valid_int_arg(p)?;
                (k > 0 && v % k == 0).then(|| v / k)
            }
            Count::Product(p) | Count::Box(p) => self
                .valid_ints_arg(p)?
                .iter()
                .try_fold(1i64, |n, &d| n.checked_mul(d)),
            Count::BytesOf(p) => {
                let bytes = self.valid_int_arg(p)?;
                (elem_bytes > 0 && bytes % elem_bytes == 0).then(|| bytes / elem_bytes)
            }
            Count::Bytes(bytes) => {
                (elem_bytes > 0 && bytes % elem_bytes == 0).then(|| bytes / elem_bytes)
            }
            Count::BytesTimes(p, k) => {
                let bytes = self.valid_int_arg(p)?.checked_mul(k)?;
                (elem_bytes > 0 && bytes % elem_bytes == 0).then(|| bytes / elem_bytes)
            }
        }
    }
}

/// A broken operand rule: the message, and the operand it is about (`None`: the call).
#[derive(Clone, Debug, PartialEq)]
pub struct Violation<'a> {
    pub at: Option<&'a ElemRef>,
    pub message: String,
}

/// `float16 or bfloat16`, `4, 8 or 16`.
fn one_of<T: std::fmt::Display>(items: &[T]) -> String {
    let words: Vec<String> = items.iter().map(ToString::to_string).collect();
    match words.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// What the operand rules need to know about a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufFacts<'a> {
    pub name: &'a str,
    pub scope: Scope,
    pub dtype: DType,
    /// How many dimensions it has.
    pub rank: usize,
}

impl<'a> From<&'a BufferDecl> for BufFacts<'a> {
    fn from(d: &'a BufferDecl) -> BufFacts<'a> {
        BufFacts {
            name: &d.name.name,
            scope: d.scope,
            dtype: d.dtype,
            rank: d.shape.len(),
        }
    }
}

/// The rules of the definition that need only the operands' buffers (`buf` looks one up;
/// an unknown one is skipped, the caller reports it): each constant among its allowed
/// values, each operand's scope and dtype, byte counts that are whole elements, one dtype
/// where the definition pairs operands. (Where the call may stand, and its operands' indices
/// and bounds, are the verifier's own walk: rules I1–I2 of docs/ir.md.) The verifier and the
/// interpreter both apply them.
pub fn check<'a, 'b>(
    i: &'a Intrinsic,
    buf: &dyn Fn(&str) -> Option<BufFacts<'b>>,
) -> Vec<Violation<'a>> {
    let def = i.def();
    let mut out = Vec::new();
    let mut typed: Vec<(&'static str, &'a ElemRef, BufFacts<'b>)> = Vec::new();
    let mut whole_reported = false;
    // The call's constants first, then its operands.
    let mut params: Vec<(&'static Param, Arg<'a>)> = def.params.iter().zip(i.args()).collect();
    params.sort_by_key(|(p, _)| matches!(p.kind, ParamKind::Ref(_)));
    for (param, arg) in params {
        let what = format!("the {} of `{}`", param.role, def.name);
        match (param.kind, arg) {
            (ParamKind::Int { .. } | ParamKind::IntRange { .. }, Arg::Int(v))
                if !param.kind.admits(v) =>
            {
                out.push(Violation {
                    at: None,
                    message: format!(
                        "{what} (`{}`) must be {}, found {v}",
                        param.name,
                        param.kind.allowed_text()
                    ),
                });
            }
            (ParamKind::IntTuple { rank_of, .. }, Arg::Ints(vs)) => {
                if let Some(&v) = vs.iter().find(|&&v| !param.kind.admits(v)) {
                    out.push(Violation {
                        at: None,
                        message: format!(
                            "each entry of {what} (`{}`) must be {}, found {v}",
                            param.name,
                            param.kind.allowed_text()
                        ),
                    });
                }
                let operand = def.params.iter().zip(i.args()).find_map(|(p, a)| match a {
                    Arg::Ref(r) if p.name == rank_of => Some(r),
                    _ => None,
                });
                if let Some(d) = operand.and_then(|r| buf(&r.buffer.name)) {
                    if d.rank != vs.len() {
                        out.push(Violation {
                            at: operand,
                            message: format!(
                                "{what} (`{}`) has {} entries, one per dimension of `{}`, \
                                 which has {}",
                                param.name,
                                vs.len(),
                                d.name,
                                d.rank
                            ),
                        });
                    }
                }
            }
            (ParamKind::Ref(rule), Arg::Ref(r)) => {
                let Some(d) = buf(&r.buffer.name) else {
                    continue;
                };
                if !rule.scopes.contains(&d.scope) {
                    let scopes: Vec<&str> = rule.scopes.iter().map(|s| s.name()).collect();
                    out.push(Violation {
                        at: Some(r),
                        message: format!(
                            "{what} must be a {} buffer, but `{}` is a {} buffer",
                            one_of(&scopes),
                            d.name,
                            d.scope.name()
                        ),
                    });
                }
                if !rule.dtypes.is_empty() && !rule.dtypes.contains(&d.dtype) {
                    out.push(Violation {
                        at: Some(r),
                        message: format!(
                            "{what} must be {}; `{}` is {}",
                            one_of(rule.dtypes),
                            d.name,
                            d.dtype
                        ),
                    });
                }
                // A byte count must be whole elements (reported once per call).
                if let (Count::BytesOf(p), false) = (rule.count, whole_reported) {
                    let size = i64::from(d.dtype.bytes());
                    match i.valid_int_arg(p) {
                        Some(bytes) if size == 0 || bytes % size != 0 => {
                            whole_reported = true;
                            out.push(Violation {
                                at: Some(r),
                                message: format!(
                                    "`{}` of {bytes} bytes is not a whole number of {} elements \
                                     ({size} bytes each)",
                                    def.name, d.dtype
                                ),
                            });
                        }
                        _ => {}
                    }
                }
                typed.push((param.name, r, d));
            }
            _ => {}
        }
    }
    for (a, b) in def.same_dtype {
        let find = |n: &str| typed.iter().find(|(p, _, _)| *p == n);
        if let (Some((_, ra, da)), Some((_, _, db))) = (find(a), find(b)) {
            if da.dtype != db.dtype {
                let role = |n: &str| def.param(n).map_or("", |p| p.role);
                out.push(Violation {
                    at: Some(ra),
                    message: format!(
                        "the {} and the {} of `{}` must have one dtype: `{}` is {}, `{}` is {}",
                        role(a),
                        role(b),
                        def.name,
                        da.name,
                        da.dtype,
                        db.name,
                        db.dtype
                    ),
                });
            }
        }
    }
    // mma.sync: the f16-accumulator form multiplies f16 only (PTX has no bf16 x bf16 -> f16).
    if let Intrinsic::Mma { packed_int4, .. } = i {
        let find = |n: &str| typed.iter().find(|(p, _, _)| *p == n);
        if let (Some((_, r, acc)), Some((_, _, a))) = (find("acc"), find("a")) {
            if let Err(message) = mma_accumulator_rule(acc, a, *packed_int4) {
                out.push(Violation {
                    at: Some(r),
                    message,
                });
            }
        }
    }
    // ldmatrix's `.trans` transposes 16-bit units: on int8 it would swap byte pairs, not
    // elements, so an int8 (K-major) fragment is loaded untransposed only.
    if let Intrinsic::Ldmatrix { trans: true, .. } = i {
        if let Some((_, r, d)) = typed.iter().find(|(p, _, _)| *p == "dst") {
            if d.dtype.bytes() == 1 {
                out.push(Violation {
                    at: Some(r),
                    message: format!(
                        "`T.ldmatrix` with trans=True moves 16-bit elements; `{}` is {} \
                         (load int8 tiles K-major, untransposed)",
                        d.name, d.dtype
                    ),
                });
            }
        }
    }
    // A shuffle's constant width and mask (others are checked as they run).
    if let Some(s) = i.shuffle() {
        for message in shuffle::constant_rules(&s) {
            out.push(Violation { at: None, message });
        }
    }
    // wgmma's operands: one dtype or two fp8s, fp8 and int8 read K-major only; the
    // accumulator is int32 for int8 inputs, float32 otherwise.
    if let Intrinsic::Wgmma {
        trans_a, trans_b, ..
    } = i
    {
        let find = |n: &str| typed.iter().find(|(p, _, _)| *p == n);
        if let (Some((_, r, a)), Some((_, _, b))) = (find("a"), find("b")) {
            if let Err(message) =
                crate::wgmma::operand_rule((a.name, a.dtype), (b.name, b.dtype), *trans_a, *trans_b)
            {
                out.push(Violation {
                    at: Some(r),
                    message,
                });
            }
        }
    }
    if let Intrinsic::Wgmma { .. } | Intrinsic::WgmmaRs { .. } = i {
        let find = |n: &str| typed.iter().find(|(p, _, _)| *p == n);
        // (An accumulator of neither dtype is already reported by its parameter's rule.)
        let paired = find("acc")
            .zip(find("a"))
            .filter(|((_, _, acc), _)| matches!(acc.dtype, DType::Float32 | DType::Int32));
        if let Some(((_, r, acc), (_, _, a))) = paired {
            if let Err(message) = crate::wgmma::accumulator_rule((acc.name, acc.dtype), a.dtype) {
                out.push(Violation {
                    at: Some(r),
                    message,
                });
            }
        }
    }
    // The box's shape, once its entries and the swizzle are valid (else reported above).
    if let (Intrinsic::TmaLoad { .. }, Some(box_dims), Some(swizzle)) =
        (i, i.valid_ints_arg("box"), i.valid_int_arg("swizzle"))
    {
        let dst = typed.iter().find(|(p, _, _)| *p == "dst");
        if let Some((_, r, d)) = dst {
            if let Err(message) = tma_box_rule(box_dims, swizzle, i64::from(d.dtype.bytes())) {
                out.push(Violation {
                    at: Some(r),
                    message,
                });
            }
        }
    }
    out
}

/// `T.mma_sync`'s accumulator and A operand agree: a float16 accumulator takes float16
/// operands (`mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16`), an int32 one int8
/// operands (`…m16n8k32.row.col.s32.s8.s8.s32`), a float32 one 16-bit floats; packed int4
/// (`…m16n8k64.row.col.s32.s4.s4.s32`) is int8 bytes into an int32 accumulator only.
fn mma_accumulator_rule(acc: &BufFacts, a: &BufFacts, packed_int4: bool) -> Result<(), String> {
    if packed_int4 && (acc.dtype, a.dtype) != (DType::Int32, DType::Int8) {
        return Err(format!(
            "`T.mma_sync` with packed_int4=True multiplies int8 bytes (two int4 each) into an \
             int32 accumulator; `{}` is {} and `{}` is {}",
            acc.name, acc.dtype, a.name, a.dtype
        ));
    }
    // The PTX forms: f32 += f16·f16 / bf16·bf16, f16 += f16·f16, s32 += s8·s8.
    let ok = match acc.dtype {
        DType::Float32 => matches!(a.dtype, DType::Float16 | DType::BFloat16),
        DType::Float16 => a.dtype == DType::Float16,
        DType::Int32 => a.dtype == DType::Int8,
        _ => true,
    };
    if ok {
        return Ok(());
    }
    let needs = match acc.dtype {
        DType::Int32 => "int8",
        DType::Float16 => "float16",
        _ => "float16 or bfloat16",
    };
    let article = if acc.dtype == DType::Int32 { "an" } else { "a" };
    Err(format!(
        "{article} {} accumulator of `T.mma_sync` (`{}`) needs {needs} operands; `{}` is {}",
        acc.dtype, acc.name, a.name, a.dtype
    ))
}

/// The most dimensions a TMA box has (`cp.async.bulk.tensor.1d` … `.5d`).
pub const MAX_BOX_RANK: usize = 5;

/// The rules of a TMA box on its shape (the entries' range is the parameter's): one to
/// [`MAX_BOX_RANK`] dimensions; its innermost row (`box[last] × elem_bytes`) a multiple of
/// 16 bytes and, with a swizzle, at most the swizzle span. One definition for the verifier,
/// the interpreter and codegen.
pub fn tma_box_rule(box_dims: &[i64], swizzle: i64, elem_bytes: i64) -> Result<(), String> {
    let Some(&inner) = box_dims.last() else {
        return Err("a `T.tma_load` box has at least one dimension".to_string());
    };
    if box_dims.len() > MAX_BOX_RANK {
        return Err(format!(
            "a `T.tma_load` box has at most {MAX_BOX_RANK} dimensions, found {}",
            box_dims.len()
        ));
    }
    let row = inner.saturating_mul(elem_bytes);
    if row % 16 != 0 {
        return Err(format!(
            "the innermost box dimension of `T.tma_load` must span a multiple of 16 bytes: \
             {inner} elements of {elem_bytes} bytes are {row} bytes"
        ));
    }
    if swizzle > 0 && row > swizzle {
        return Err(format!(
            "with swizzle={swizzle} the innermost box dimension of `T.tma_load` spans at most \
             {swizzle} bytes: {inner} elements of {elem_bytes} bytes are {row} bytes"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::span::Span;

    fn r(name: &str) -> ElemRef {
        ElemRef {
            buffer: Ident::new(name, Span::DUMMY),
            indices: vec![Expr::var("i"), Expr::int(0)],
        }
    }

    fn samples() -> Vec<Intrinsic> {
        vec![
            Intrinsic::CpAsync {
                dst: r("S"),
                src: r("A"),
                bytes: 16,
                pred: Some(Expr::var("p")),
            },
            Intrinsic::CpAsync {
                dst: r("S"),
                src: r("A"),
                bytes: 4,
                pred: None,
            },
            Intrinsic::CommitGroup,
            Intrinsic::WaitGroup { n: 2 },
            Intrinsic::Ldmatrix {
                dst: r("F"),
                src: r("S"),
                num: 2,
                trans: true,
            },
            Intrinsic::Mma {
                acc: r("C"),
                a: r("A"),
                b: r("B"),
                packed_int4: false,
            },
            Intrinsic::MbarrierInit {
                bar: r("bar"),
                count: 128,
            },
            Intrinsic::MbarrierArrive { bar: r("bar") },
            Intrinsic::MbarrierArriveExpectTx {
                bar: r("bar"),
                bytes: 8192,
            },
            Intrinsic::MbarrierWait {
                bar: r("bar"),
                parity: Expr::var("phase"),
            },
            Intrinsic::FenceProxyAsync,
            Intrinsic::TmaLoad {
                dst: r("S"),
                src: r("A"),
                bar: r("bar"),
                box_dims: vec![64, 64],
                swizzle: 128,
                multicast: 0,
            },
            Intrinsic::WgmmaFence,
            Intrinsic::WgmmaCommit,
            Intrinsic::WgmmaWait { n: 1 },
            Intrinsic::Wgmma {
                acc: r("C"),
                a: r("SA"),
                b: r("SB"),
                n: 128,
                trans_a: false,
                trans_b: true,
                a_swizzle: 128,
                a_lbo: 0,
                a_sbo: 1024,
                b_swizzle: 128,
                b_lbo: 8192,
                b_sbo: 1024,
                accumulate: Some(Expr::var("p")),
            },
            Intrinsic::SetMaxNReg { n: 240, inc: true },
            Intrinsic::ShflXor {
                dst: r("t"),
                src: r("acc"),
                offset: 16,
            },
            Intrinsic::ShflDown {
                dst: r("t"),
                src: r("acc"),
                offset: 3,
            },
            Intrinsic::ShflSyncIdx {
                dst: r("t"),
                src: r("acc"),
                lane: Expr::var("l"),
                width: Expr::int(8),
                mask: Expr::int(0xFFFF_FFFF),
            },
            Intrinsic::ShflSyncBfly {
                dst: r("t"),
                src: r("acc"),
                lane_mask: Expr::int(4),
                width: Expr::var("w"),
                mask: Expr::int(0xFF),
            },
            Intrinsic::ShflSyncDown {
                dst: r("t"),
                src: r("acc"),
                delta: Expr::var("d"),
                width: Expr::int(32),
                mask: Expr::var("m"),
            },
            Intrinsic::ShflSyncUp {
                dst: r("t"),
                src: r("acc"),
                delta: Expr::int(1),
                width: Expr::int(16),
                mask: Expr::int(-1),
            },
            Intrinsic::AtomicAddRet {
                old: r("t"),
                dst: r("hist"),
                value: r("acc"),
            },
            Intrinsic::BarSync { id: 1, count: 256 },
            Intrinsic::BarArrive { id: 2, count: 256 },
            Intrinsic::WgmmaRs {
                acc: r("C"),
                a: r("P"),
                b: r("SB"),
                n: 128,
                trans_b: false,
                b_swizzle: 128,
                b_lbo: 8192,
                b_sbo: 1024,
                accumulate: None,
            },
            // The cluster forms, last: the tests index the ones above.
            Intrinsic::TmaLoad {
                dst: r("S"),
                src: r("A"),
                bar: r("bar"),
                box_dims: vec![32, 64],
                swizzle: 128,
                multicast: 3,
            },
            Intrinsic::MbarrierArriveCluster {
                bar: r("bar"),
                rank: Expr::var("peer"),
            },
            Intrinsic::ClusterSync,
            // The prints, appended.
            Intrinsic::Print {
                value: Expr::var("x"),
                msg: "x is".to_string(),
            },
            Intrinsic::PrintMsg { msg: String::new() },
            Intrinsic::PrintElem {
                elem: r("S"),
                index: Expr::var("i"),
                msg: "tile".to_string(),
                lane: 0,
            },
            Intrinsic::PhiloxInit {
                state: r("rng"),
                seed: Expr::int(42),
                seq: Expr::var("tx"),
                offset: Expr::int(-5),
            },
            Intrinsic::PhiloxRand {
                dst: r("t"),
                state: r("rng"),
            },
            Intrinsic::PhiloxUniform {
                dst: r("u"),
                state: r("rng"),
            },
        ]
    }

    fn owned(a: Arg<'_>) -> ArgValue {
        match a {
            Arg::Ref(r) => ArgValue::Ref(r.clone()),
            Arg::Int(v) => ArgValue::Int(v),
            Arg::Bool(b) => ArgValue::Bool(b),
            Arg::Pred(p) => ArgValue::Pred(p.cloned()),
            Arg::Ints(v) => ArgValue::Ints(v.to_vec()),
            Arg::Value(e) => ArgValue::Value(e.clone()),
            Arg::Text(t) => ArgValue::Text(t.to_string()),
        }
    }

    /// `args` follows the definition's parameters, and `from_args` inverts it.
    #[test]
    fn args_match_the_definition_and_build_back() {
        for i in samples() {
            let def = i.def();
            let args = i.args();
            assert_eq!(args.len(), def.params.len(), "{}", def.name);
            for (p, a) in def.params.iter().zip(&args) {
                let fits = matches!(
                    (p.kind, a),
                    (ParamKind::Ref(_), Arg::Ref(_))
                        | (ParamKind::Int { .. }, Arg::Int(_))
                        | (ParamKind::Bool { .. } | ParamKind::Flag, Arg::Bool(_))
                        | (ParamKind::Pred, Arg::Pred(_))
                        | (ParamKind::IntRange { .. }, Arg::Int(_))
                        | (ParamKind::IntTuple { .. }, Arg::Ints(_))
                        | (ParamKind::Value { .. }, Arg::Value(_))
                        | (ParamKind::Scalar, Arg::Value(_))
                        | (ParamKind::Text, Arg::Text(_))
                );
                assert!(fits, "{} {}", def.name, p.name);
            }
            let values: Vec<ArgValue> = args.into_iter().map(owned).collect();
            assert_eq!(Intrinsic::from_args(def, values), Some(i.clone()));
            assert_eq!(lookup(def.name), Some(def));
            // Mutable and shared views see the same expressions.
            let n = i.exprs().len();
            let mut m = i.clone();
            assert_eq!(m.exprs_mut().len(), n);
            assert_eq!(m.operands_mut().len(), i.operands().len());
        }
        let defs = all();
        // Every intrinsic is sampled, so the round trips above cover the whole table.
        let sampled: Vec<IntrinsicOp> = samples().iter().map(Intrinsic::op).collect();
        for d in &defs {
            assert!(sampled.contains(&d.op), "{} has no sample", d.name);
        }
        for (k, d) in defs.iter().enumerate() {
            assert!(defs[..k].iter().all(|e| e.name != d.name && e.op != d.op));
            for (a, b) in d.same_dtype {
                assert!(d.param(a).is_some() && d.param(b).is_some(), "{}", d.name);
            }
        }
        assert_eq!(
            Intrinsic::from_args(&LDMATRIX, vec![ArgValue::Int(4)]),
            None
        );
    }

    #[test]
    fn counts_and_effects() {
        let s = samples();
        let cp = &s[0];
        let dst = CP_ASYNC.params[0];
        assert_eq!(cp.count(&dst, 2), Some(8));
        assert_eq!(cp.count(&dst, 4), Some(4));
        assert_eq!(s[1].count(&dst, 8), None);
        let effects: Vec<Effect> = cp.accesses().iter().map(|a| a.effect).collect();
        assert_eq!(effects, [Effect::AsyncWrite, Effect::Read]);
        assert_eq!(s[4].count(&LDMATRIX.params[0], 2), Some(4));
        assert_eq!(s[4].count(&LDMATRIX.params[1], 2), Some(8));
        assert_eq!(CP_ASYNC.required(), 3);
        assert_eq!(LDMATRIX.required(), 2);
        assert_eq!(WAIT_GROUP.required(), 1);
        assert!(Effect::ReadWrite.reads() && Effect::ReadWrite.writes());
        assert!(!Effect::AsyncWrite.reads() && Effect::AsyncWrite.writes());
        assert_eq!(cp.pred(), Some(&Expr::var("p")));
        assert_eq!(s[5].exprs().len(), 6);
        // The Hopper intrinsics.
        let tma = &s[11];
        assert_eq!(tma.count(&TMA_LOAD.params[0], 2), Some(4096));
        assert_eq!(tma.count(&TMA_LOAD.params[1], 2), Some(4096));
        assert_eq!(tma.ints_arg("box"), Some(&[64, 64][..]));
        let effects: Vec<Effect> = tma.accesses().iter().map(|a| a.effect).collect();
        assert_eq!(effects, [Effect::BulkWrite, Effect::Read, Effect::Sync]);
        let wgmma = &s[15];
        assert_eq!(wgmma.count(&WGMMA_MMA.params[0], 4), Some(64));
        assert_eq!(wgmma.pred(), Some(&Expr::var("p")));
        assert_eq!(WGMMA_MMA.required(), 4);
        assert_eq!(TMA_LOAD.required(), 4);
        // The parity is an expression of the call (visitors see it), not a predicate.
        let wait = &s[9];
        assert_eq!(wait.exprs().last(), Some(&&Expr::var("phase")));
        assert_eq!(wait.pred(), None);
        assert!(DESC_OFFSET.admits(1024) && !DESC_OFFSET.admits(8) && !DESC_OFFSET.admits(1 << 18));
        assert_eq!(
            WGMMA_MMA.params[3].kind.allowed_text(),
            "a multiple of 8 in 8..=256"
        );
        assert!(TMA.met_by(Target::Sm90a) && !TMA.met_by(Target::Sm80));
        assert!(!WGMMA.met_by(Target::Sm80));
    }

    fn facts(name: &str, scope: Scope, dtype: DType, rank: usize) -> BufFacts<'_> {
        BufFacts {
            name,
            scope,
            dtype,
            rank,
        }
    }

    /// The table's rules on the Hopper intrinsics' operands and constants.
    #[test]
    fn hopper_operand_rules() {
        let s = samples();
        let bufs = |n: &str| -> Option<BufFacts<'static>> {
            match n {
                "S" => Some(facts("S", Scope::Shared, DType::Float16, 2)),
                "SA" => Some(facts("SA", Scope::Shared, DType::Float16, 2)),
                "SB" => Some(facts("SB", Scope::Shared, DType::Float16, 2)),
                "A" => Some(facts("A", Scope::Global, DType::Float16, 2)),
                "bar" => Some(facts("bar", Scope::Shared, DType::Int64, 1)),
                "C" => Some(facts("C", Scope::Local, DType::Float32, 1)),
                "CI" => Some(facts("CI", Scope::Local, DType::Int32, 1)),
                "SI" => Some(facts("SI", Scope::Shared, DType::Int8, 2)),
                _ => None,
            }
        };
        // The samples of the new intrinsics (from the first mbarrier on) keep every rule.
        for i in &s[6..] {
            assert_eq!(check(i, &bufs), Vec::new(), "{}", i.name());
        }
        let messages = |i: &Intrinsic| -> Vec<String> {
            check(i, &bufs).into_iter().map(|v| v.message).collect()
        };
        let tma = |box_dims: Vec<i64>, swizzle: i64| Intrinsic::TmaLoad {
            dst: r("S"),
            src: r("A"),
            bar: r("bar"),
            box_dims,
            swizzle,
            multicast: 0,
        };
        assert_eq!(
            messages(&tma(vec![64], 0)),
            ["the box of `T.tma_load` (`box`) has 1 entries, one per dimension of `A`, which has 2"]
        );
        assert_eq!(
            messages(&tma(vec![64, 0], 0)),
            ["each entry of the box of `T.tma_load` (`box`) must be in 1..=256, found 0"]
        );
        assert_eq!(
            messages(&tma(vec![64, 4], 0)),
            [
                "the innermost box dimension of `T.tma_load` must span a multiple of 16 bytes: \
              4 elements of 2 bytes are 8 bytes"
            ]
        );
        assert_eq!(
            messages(&tma(vec![8, 64], 64)),
            [
                "with swizzle=64 the innermost box dimension of `T.tma_load` spans at most 64 \
              bytes: 64 elements of 2 bytes are 128 bytes"
            ]
        );
        assert_eq!(
            messages(&tma(vec![8, 64], 16)),
            ["the swizzle of `T.tma_load` (`swizzle`) must be 0, 32, 64 or 128, found 16"]
        );
        let bad_bar = Intrinsic::MbarrierArrive { bar: r("S") };
        assert_eq!(
            messages(&bad_bar),
            ["the mbarrier of `T.mbarrier_arrive` must be int64; `S` is float16"]
        );
        let init = Intrinsic::MbarrierInit {
            bar: r("bar"),
            count: 0,
        };
        assert_eq!(
            messages(&init),
            ["the arrival count of `T.mbarrier_init` (`count`) must be in 1..=1024, found 0"]
        );
        let Intrinsic::Wgmma { .. } = &s[15] else {
            panic!()
        };
        let mut w = s[15].clone();
        if let Intrinsic::Wgmma { n, a_sbo, acc, .. } = &mut w {
            *n = 12;
            *a_sbo = 1000;
            *acc = r("S");
        }
        assert_eq!(
            messages(&w),
            [
                "the N extent of `T.wgmma` (`n`) must be a multiple of 8 in 8..=256, found 12",
                "the A stride byte offset of `T.wgmma` (`a_sbo`) must be a multiple of 16 in \
                 0..=262128, found 1000",
                "the accumulator of `T.wgmma` must be a local buffer, but `S` is a shared buffer",
                "the accumulator of `T.wgmma` must be float32 or int32; `S` is float16"
            ]
        );
        // The accumulator's dtype follows the operands': int32 for int8, float32 otherwise.
        let with = |acc: &str, ab: &str| {
            let mut w = s[15].clone();
            if let Intrinsic::Wgmma {
                acc: c,
                a,
                b,
                trans_a,
                trans_b,
                ..
            } = &mut w
            {
                *c = r(acc);
                *a = r(ab);
                *b = r(ab);
                *trans_a = false;
                *trans_b = false;
            }
            messages(&w)
        };
        assert_eq!(with("CI", "SI"), Vec::<String>::new());
        assert_eq!(
            with("CI", "SA"),
            ["the accumulator `CI` of a wgmma on float16 inputs must be float32, not int32"]
        );
        assert_eq!(
            with("C", "SI"),
            ["the accumulator `C` of a wgmma on int8 inputs must be int32, not float32"]
        );
        // Register A: 16-bit registers of B's dtype.
        let rs = s
            .iter()
            .find(|i| matches!(i, Intrinsic::WgmmaRs { .. }))
            .cloned()
            .unwrap_or(Intrinsic::WgmmaFence);
        let Intrinsic::WgmmaRs { .. } = &rs else {
            panic!()
        };
        let mut bad_rs = rs.clone();
        if let Intrinsic::WgmmaRs { a, .. } = &mut bad_rs {
            *a = r("S");
        }
        assert_eq!(
            messages(&bad_rs),
            ["the A operand of `T.wgmma_rs` must be a local buffer, but `S` is a shared buffer"]
        );
        let reg = Intrinsic::SetMaxNReg { n: 20, inc: true };
        assert_eq!(
            messages(&reg),
            [
                "the register count of `T.setmaxnreg` (`n`) must be a multiple of 8 in 24..=256, \
              found 20"
            ]
        );
        assert_eq!(
            messages(&Intrinsic::WgmmaWait { n: 8 }),
            ["the group count of `T.wgmma_wait` (`n`) must be in 0..=7, found 8"]
        );
    }
}
