//! Code generation: a verified thread-level `PrimFunc` → a PTX `Module` and its launch
//! `Manifest` (`docs/manifest.md`).
//!
//! Conventions of the generated kernel:
//! - Entries: one `.visible .entry` per top-level `T.Kernel`, in program order, named after
//!   the function when there is one and `<func>_k0`, `<func>_k1`, … when there are several
//!   (`manifest::entry_name`); the runtime launches them in that order on one stream.
//!   Statements outside the kernels are refused (nothing runs on the host).
//! - Parameters: one `.u64` per tensor parameter in declaration order, then one `.u32` per
//!   symbolic dim (int32), in declaration order, then one `.param .align 64 .b8
//!   <entry>_tmap<i>[128]` per TMA tensor map of the manifest (`manifest::tensor_map`)
//!   (`KernelBuilder::params_from_manifest`); every entry of a multi-kernel function takes
//!   the whole list, used or not. Tensor pointers are loaded once and `cvta.to.global`'d;
//!   dims are loaded once into `%r`; the generic address of each tensor map the kernel uses
//!   is taken once (`mov` + `cvta.param`). A module with tensor maps is PTX 8.3
//!   (`PtxVersion::TENSOR_MAPS`).
//! - Registers (virtual, never reused; ptxas allocates): int32 / uint32 values and shared
//!   addresses in `%r`, int64 values and global addresses in `%rd`, float32 in `%f`,
//!   float16 / bfloat16 in `%h` (arithmetic on them is done in f32 and rounded back with
//!   `cvt.rn`, as the interpreter does), bool in `%p`.
//! - Block variables are `%ctaid.x/y/z`, the thread-binding variables `%tid.x/y/z`; lets and
//!   serial-loop variables are registers; `T.unroll` / `T.vectorized` loops are unrolled with
//!   their variable bound to a constant.
//! - Global accesses: element offset computed in 64 bits (`cvt.s64.s32` of each index, row-major
//!   flattening), times the element size, added to the global base. Shared accesses: 32-bit
//!   address `smem + arena offset + flat * size` in the one `.extern .shared` arena.
//! - `T.alloc_local` arrays live in registers when every index is a constant once unrolled
//!   loop variables are substituted, and in per-thread local memory otherwise (`local.rs`;
//!   the analysis `local_arrays` decides per array, once).
//! - `T.if_then_else`, `and`, `or` whose deferred side reads global or shared memory are
//!   lowered with a branch (only the taken side runs); otherwise with `selp` / predicate ops.
//!   The addresses behind a `T.if_then_else` branch, and those of an `if` arm made only of
//!   stores, are computed before the branch (constant-stride buffers), so neighbouring
//!   masked elements share one address register plus immediate offsets.
//! - Supported dtypes: every one but float64. int8 / uint8 live in 32-bit registers, kept
//!   sign- / zero-extended (arithmetic that may leave the width wraps back with `cvt.s32.s8` /
//!   `cvt.u32.u8`) and are loaded with `ld.s8` / `ld.u8`, stored as their low byte; bool
//!   tensors and buffers hold one byte, 0 or 1 (a loaded byte is true when non-zero); fp8
//!   values are their bits in a `.b16` register, converted through f32 by `fp8.rs`.
//!   float → int casts are `cvt.rzi.sat` from f32 (then clamped to an 8-bit range);
//!   int → f16/bf16/fp8 goes through f32.
//! - Intrinsics (`intrinsics.rs`): `T.cp_async` → `cp.async.{cg|ca}.shared.global` (src-size
//!   0 under a false predicate), commit / wait groups, `T.ldmatrix` → `ldmatrix.sync` split
//!   into the local f16/bf16 registers, `T.mma_sync` → `mma.sync.m16n8k16` on packed pairs,
//!   accumulating in place into the f32 local registers. The sm_90a ones (mbarriers, TMA,
//!   wgmma, fences, setmaxnreg) are `hopper.rs`.
//! - `T.vectorized` loops become `.v2`/`.v4` accesses where `vector.rs` proves them aligned
//!   and contiguous; otherwise they are unrolled into scalar accesses.

mod allreduce;
mod atomic;
mod expr;
mod fp8;
mod grid_sync;
mod hopper;
mod intrinsics;
mod local;
mod manifest;
mod math;
mod memo;
mod offset;
mod print;
mod rng;
mod shuffle;
mod stmt;
mod vector;

use crate::ptx::{self, check_manifest, KernelBuilder, Module, PtxVersion, Reg, SpecialReg, Type};
use std::collections::HashMap;
use tlc_abi::manifest::{Launch, Manifest, TensorMapDesc};
use tlc_ir::verifier::{check_level, FuncInfo, Level};
use tlc_ir::wgmma::Swizzle;
use tlc_ir::Target;
use tlc_ir::{visit, DType, Diagnostic, Intrinsic, Kernel, PrimFunc, Scope, Span, StmtKind};
use tlc_passes::analysis::local_arrays::{local_arrays, LocalArrays};

/// Compiles `func` for `target`, given the verifier's facts about it (`info`: what
/// `tlc_ir::verifier::verify` returned for this very function — the driver passes the pass
/// manager's last verification). `func` must be at the planned thread level (checked first,
/// with the verifier's one wording of what is missing). Each top-level `T.Kernel` becomes
/// one `.entry` (named by `manifest::entry_name`), all with the same parameter list,
/// launched in program order (`docs/manifest.md`); its block shape and shared memory are the
/// facts' (`KernelInfo::threads`, `arena_bytes`), not derived again.
pub fn emit(
    func: &PrimFunc,
    info: &FuncInfo,
    target: Target,
) -> Result<(Module, Manifest), Vec<Diagnostic>> {
    let unready = check_level(func, Level::Planned);
    if !unready.is_empty() {
        return Err(unready);
    }
    let mut kernels = Vec::new();
    let mut errors = Vec::new();
    for s in &func.body {
        match &s.kind {
            StmtKind::Kernel(k) => kernels.push((k, s.span)),
            // A note means nothing; outside a kernel it has nowhere to go in the PTX.
            StmtKind::Note(_) => {}
            // The host side of a prim_func is only its kernels, launched in order: anything
            // else (a let, a loop around kernels) would have to run on the CPU.
            _ => errors.push(Diagnostic::error(
                s.span,
                "only `T.Kernel` blocks run on the GPU, and this statement is outside every \
                 one: move it into the kernels that need it",
            )),
        }
    }
    if kernels.is_empty() {
        errors.push(Diagnostic::error(
            func.span,
            "the function has no `T.Kernel`",
        ));
        return Err(errors);
    }
    let manifest = manifest::build(func, info, &kernels, target, &mut errors);
    if !errors.is_empty() {
        return Err(errors);
    }
    let Some(manifest) = manifest else {
        return Err(errors);
    };
    let mut module = Module::new(target);
    if !manifest.tensor_maps.is_empty() {
        module.version = module.version.max(PtxVersion::TENSOR_MAPS);
    }
    for (index, ((kernel, kspan), launch)) in kernels.iter().zip(&manifest.kernels).enumerate() {
        match emit_kernel(func, (kernel, *kspan, index), launch, &manifest) {
            Ok(k) => module.kernels.push(k),
            Err(e) => errors.extend(e),
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    if module.kernels.iter().any(has_vector_red) {
        module.version = module.version.max(PtxVersion::VECTOR_RED);
    }
    if let Err(e) = check_manifest(&module, &manifest) {
        return Err(vec![Diagnostic::error(
            func.span,
            format!("internal error: the kernel disagrees with its manifest: {e}"),
        )]);
    }
    Ok((module, manifest))
}

/// Whether `k` adds a vector with one `red` (a PTX ISA 8.1 form).
fn has_vector_red(k: &ptx::Kernel) -> bool {
    k.body.iter().any(|s| {
        matches!(s, ptx::Stmt::Inst(ptx::Inst { op: ptx::Op::RedAdd { srcs, .. }, .. }) if srcs.len() > 1)
    })
}

/// One `T.Kernel` as the entry `launch.entry`: every tensor and dim parameter of `manifest`
/// (loaded up front, whether or not this kernel uses them), then the body.
fn emit_kernel(
    func: &PrimFunc,
    (kernel, kspan, index): (&Kernel, Span, usize),
    launch: &Launch,
    manifest: &Manifest,
) -> Result<ptx::Kernel, Vec<Diagnostic>> {
    let mut b = KernelBuilder::new(&launch.entry);
    let (tensor_params, dim_params) = b.params_from_manifest(manifest);
    if let [x, rest @ ..] = launch.block.as_slice() {
        let y = rest.first().copied().unwrap_or(1);
        let z = rest.get(1).copied().unwrap_or(1);
        b.reqntid([*x, y, z]);
    }
    // The verifier checked it (K10): a constant in 1..=2048.
    if let Some(n) = kernel
        .min_blocks_per_sm
        .as_ref()
        .and_then(tlc_ir::verifier::const_int)
        .and_then(|n| u32::try_from(n).ok())
    {
        b.minnctapersm(n);
    }
    if let [x, rest @ ..] = launch.cluster.as_slice() {
        let y = rest.first().copied().unwrap_or(1);
        let z = rest.get(1).copied().unwrap_or(1);
        b.reqnctapercluster([*x, y, z]);
    }
    let mut cg = Cg {
        b,
        vars: HashMap::new(),
        bufs: HashMap::new(),
        errors: Vec::new(),
        smem: None,
        smem_align: arena_alignment(kernel),
        in_cluster: !launch.cluster.is_empty(),
        threads: launch.block.clone(),
        thread_axes: HashMap::new(),
        vec_loads: Vec::new(),
        lane: 0,
        packed: HashMap::new(),
        packed_bytes: HashMap::new(),
        last_half: None,
        words: HashMap::new(),
        memo: HashMap::new(),
        memo_log: Vec::new(),
        locals: local_arrays(func),
        local_bytes: 0,
        tensor_maps: Vec::new(),
        repeated: false,
        grid_barrier: None,
        grid_syncs: 0,
        target: manifest.target,
        dim_multiples: func
            .dims
            .iter()
            .map(|d| (d.name.clone(), d.multiple_of))
            .collect(),
    };
    for (p, decl) in tensor_params.iter().zip(&func.params) {
        let base = cg.b.global_ptr(p);
        cg.bufs.insert(
            decl.name.name.clone(),
            Buf {
                dtype: decl.dtype,
                shape: decl.shape.clone(),
                mem: Mem::Global(base),
            },
        );
    }
    // A cooperative kernel's grid barriers count on its element of the counter that follows
    // the function's own tensors (`manifest::GRID_BARRIER`).
    if launch.cooperative {
        let counter = manifest
            .scratch
            .iter()
            .position(|p| p.name == manifest::GRID_BARRIER)
            .and_then(|i| tensor_params.get(manifest.params.len() + i));
        match (counter, u32::try_from(index)) {
            (Some(p), Ok(slot)) => {
                let base = cg.b.global_ptr(p);
                cg.grid_barrier = Some((base, slot));
            }
            _ => cg.errors.push(Diagnostic::error(
                kspan,
                "internal error: a cooperative kernel without its grid barrier's counter",
            )),
        }
    }
    for (p, d) in dim_params.iter().zip(&func.dims) {
        let r = cg.b.ld_param(p);
        cg.vars.insert(d.name.clone(), Bind::Reg(r, d.dtype));
    }
    // The generic address of every tensor map this kernel loads through, in manifest order.
    for (index, desc) in manifest.tensor_maps.iter().enumerate() {
        if uses_tensor_map(func, kernel, desc) {
            let symbol = cg.b.tensor_map_symbol(index);
            let generic = cg.b.param_generic_address(&symbol);
            cg.tensor_maps.push((desc.clone(), generic));
        }
    }
    let ctaid = [SpecialReg::CtaidX, SpecialReg::CtaidY, SpecialReg::CtaidZ];
    for (v, s) in kernel.block_vars.iter().zip(ctaid) {
        let r = cg.b.special(s);
        cg.vars.insert(v.name.clone(), Bind::Reg(r, DType::Int32));
    }
    // Each buffer's arena offset by name (the first, as `Arena::offset` finds): searching the
    // offsets for every allocation was quadratic in a kernel's buffers.
    let offsets = kernel.arena.as_ref().map(|arena| {
        let mut by_name: HashMap<&str, i64> = HashMap::new();
        for (name, offset) in &arena.offsets {
            by_name.entry(name.name.as_str()).or_insert(*offset);
        }
        by_name
    });
    for alloc in &kernel.allocs {
        cg.declare_alloc(alloc, offsets.as_ref(), kspan);
    }
    if kernel.allocs.iter().any(|a| a.scope == Scope::Shared) {
        // The arena's address is taken once at the top so every path sees it.
        cg.smem_base();
    }
    if cg.errors.is_empty() {
        cg.body(&kernel.body);
    }
    if !cg.errors.is_empty() {
        return Err(cg.errors);
    }
    cg.b.ret();
    Ok(cg.b.finish())
}

/// The dynamic shared arena's alignment: what the kernel's swizzles need, since they act on
/// absolute shared addresses — 1024 for a wgmma operand layout, `Swizzle::tma_alignment`
/// for each `T.tma_load` destination — and at least 16.
fn arena_alignment(kernel: &Kernel) -> u32 {
    let mut align: i64 = 16;
    if kernel
        .layouts
        .iter()
        .any(|l| matches!(l.layout, tlc_ir::Layout::WgmmaSwizzle { .. }))
    {
        align = 1024;
    }
    visit::for_each_stmt(&kernel.body, &mut |s| {
        if let StmtKind::Intrinsic(Intrinsic::TmaLoad { swizzle, .. }) = &s.kind {
            let need = Swizzle::from_bytes(*swizzle).map_or(1024, Swizzle::tma_alignment);
            align = align.max(need);
        }
    });
    u32::try_from(align).unwrap_or(1024)
}

/// Whether a `T.tma_load` of `kernel` reads through the tensor map `desc`.
fn uses_tensor_map(func: &PrimFunc, kernel: &Kernel, desc: &TensorMapDesc) -> bool {
    let mut used = false;
    visit::for_each_stmt(&kernel.body, &mut |s| {
        if let StmtKind::Intrinsic(i) = &s.kind {
            used |= matches!(manifest::tensor_map(func, i, s.span), Some(Ok(d)) if &d == desc);
        }
    });
    used
}

/// What a scalar name stands for.
#[derive(Clone, Copy, Debug)]
enum Bind {
    Reg(Reg, DType),
    /// An unrolled loop variable (or a let of a constant): an int32 constant.
    Const(i64),
}

/// Where a buffer's elements live.
#[derive(Clone, Debug)]
enum Mem {
    /// The global base address (`%rd`, cvta'd).
    Global(Reg),
    /// Byte offset in the shared arena.
    Shared(i64),
    /// One register per element (row-major), zeroed at the kernel's start.
    Local(Vec<Reg>),
    /// A per-thread `.local` array of `len` elements (`local.rs`): its symbol, and its
    /// address in a register.
    LocalMemory { symbol: String, base: Reg, len: i64 },
}

#[derive(Clone, Debug)]
struct Buf {
    dtype: DType,
    shape: Vec<tlc_ir::Expr>,
    mem: Mem,
}

/// The codegen state of one kernel.
struct Cg {
    b: KernelBuilder,
    vars: HashMap<String, Bind>,
    bufs: HashMap<String, Buf>,
    errors: Vec<Diagnostic>,
    /// `mov.u32 %r, smem` (the arena's shared address), made on first use.
    smem: Option<Reg>,
    /// The arena's alignment: 1024 when a buffer has the wgmma / TMA swizzle, which is
    /// computed from absolute shared addresses; else 16.
    smem_align: u32,
    /// The kernel runs in thread-block clusters: its shared::cta addresses carry the block's
    /// rank above bit 23 (block `r`'s window starts at `r << 24`).
    in_cluster: bool,
    threads: Vec<u32>,
    /// The variables of the enclosing `threadIdx.*` loops, with their axes.
    thread_axes: HashMap<String, usize>,
    /// Inside a vectorized loop: the lanes of each vector-loaded `buffer[indices]`.
    vec_loads: Vec<(String, Vec<tlc_ir::Expr>, Vec<Reg>)>,
    /// The lane being computed inside a vectorized loop.
    lane: usize,
    /// 16-bit local elements `(lo, hi)` whose packed b32 word an ldmatrix left in a
    /// register: mma_sync uses the word instead of re-packing, so the halves die and a
    /// fragment costs one register per pair. Forgotten when either element is written
    /// and at every branch or loop boundary (the word is only known on straight-line code).
    packed: HashMap<(Reg, Reg), Reg>,
    /// The same for int8 elements four to a word (`[b0, b1, b2, b3]`, `b0` the low byte):
    /// the b32 words an int8 ldmatrix loaded, which `T.mma_sync`'s `.s8` form takes as they
    /// are. Forgotten as `packed` is.
    packed_bytes: HashMap<[Reg; 4], Reg>,
    /// The last 16-bit register-array element stored from an f32 value (`store_half`):
    /// its array, flat index, register and the value (in a register of its own).
    last_half: Option<(String, usize, Reg, Reg)>,
    /// The packed pairs of the register arrays `LocalArrays::packed` names: word `j` holds
    /// elements `2j` (low half) and `2j + 1`, kept equal to them by every store
    /// (`store_half`, `refresh_word`), so `T.wgmma_rs` reads its A words from here — in a
    /// loop too, where `packed` knows nothing of the previous iteration's stores.
    words: HashMap<String, Vec<Reg>>,
    /// Index math already in a register (`memo.rs`): key -> register.
    memo: HashMap<String, Reg>,
    /// The keys of `memo` in insertion order, so a scope can drop what it added.
    memo_log: Vec<String>,
    /// Which local arrays are indexed at run time, and which of their accesses are in
    /// bounds (`analysis::local_arrays`).
    locals: LocalArrays,
    /// Local memory declared so far, in bytes per thread.
    local_bytes: i64,
    /// The tensor maps this kernel loads through, with their generic addresses (`%rd`,
    /// taken at the kernel's start).
    tensor_maps: Vec<(TensorMapDesc, Reg)>,
    /// Inside the second or a later copy of a loop codegen unrolls: notes are not
    /// written again.
    repeated: bool,
    /// A cooperative kernel's grid-barrier counter: the counter tensor's global address and
    /// this kernel's element of it (`grid_sync.rs`).
    grid_barrier: Option<(Reg, u32)>,
    /// The grid barriers emitted so far.
    grid_syncs: u32,
    /// The target compiled for (its `TargetDesc` facts).
    target: Target,
    /// The symbolic dims' declared `multiple_of` (checked at launch), for the vector
    /// check's `multiple_of` — the same facts `analysis::int::dim_ranges` gives the passes.
    dim_multiples: HashMap<String, i64>,
}

/// The PTX register type of a dtype's values, or `None` for dtypes codegen does not handle
/// (float64). 8- and 16-bit integers live in 32-bit registers, sign- / zero-extended (every
/// operation that may leave the width wraps back, as the interpreter does); fp8 values are
/// their bits in the low byte of a `.b16` register (`fp8.rs` converts them); bools are
/// predicates.
fn ptx_type(d: DType) -> Option<Type> {
    Some(match d {
        DType::Int8 | DType::Int16 | DType::Int32 => Type::S32,
        DType::UInt8 | DType::UInt16 | DType::UInt32 => Type::U32,
        DType::Int64 => Type::S64,
        DType::Float32 => Type::F32,
        DType::Float16 => Type::F16,
        DType::BFloat16 => Type::Bf16,
        DType::Float8E4M3 | DType::Float8E5M2 => Type::B16,
        DType::Bool => Type::Pred,
        // int4 never reaches codegen (the pipeline refuses it before lowering).
        DType::Float64 | DType::Int4 => return None,
    })
}

/// The type of a memory access of one element of `d`: `.s8` / `.s16` for int8 / int16 (a
/// load sign-extends into the 32-bit register), `.u8` for uint8, fp8 and bool (one byte,
/// 0 / 1 for a bool), `.u16` for uint16, `.b16` for f16 / bf16, the register type otherwise.
fn elem_mem_type(d: DType) -> Option<Type> {
    Some(match d {
        DType::Int8 => Type::S8,
        DType::Int16 => Type::S16,
        DType::UInt16 => Type::U16,
        DType::UInt8 | DType::Bool | DType::Float8E4M3 | DType::Float8E5M2 => Type::U8,
        _ => expr::mov_type(ptx_type(d)?),
    })
}

impl Cg {
    fn err(&mut self, span: Span, msg: impl Into<String>) {
        self.errors.push(Diagnostic::error(span, msg));
    }

    /// `arena`: the kernel's shared-arena offsets by buffer name, when it has an arena.
    fn declare_alloc(
        &mut self,
        alloc: &tlc_ir::BufferDecl,
        arena: Option<&HashMap<&str, i64>>,
        kspan: Span,
    ) {
        let name = &alloc.name.name;
        if ptx_type(alloc.dtype).is_none() {
            self.err(
                alloc.span,
                format!("codegen does not support {} buffers yet", alloc.dtype),
            );
            return;
        }
        let mem = match alloc.scope {
            Scope::Shared => {
                // `emit` checked the level: a kernel with shared buffers has an arena.
                let Some(arena) = arena else {
                    self.err(kspan, format!("shared buffer `{name}` has no arena"));
                    return;
                };
                let Some(&off) = arena.get(name.as_str()) else {
                    self.err(
                        alloc.span,
                        format!("shared buffer `{name}` is missing from `T.shared_arena`"),
                    );
                    return;
                };
                Mem::Shared(off)
            }
            Scope::Local => {
                let mut n: i64 = 1;
                for d in &alloc.shape {
                    match d.as_int() {
                        Some(v) if v >= 0 => n = n.saturating_mul(v),
                        _ => {
                            self.err(d.span, "local arrays need constant shapes");
                            return;
                        }
                    }
                }
                if self.locals.runtime_indexed(name) {
                    let Some(mem) = self.declare_local_memory(alloc, n) else {
                        return;
                    };
                    mem
                } else if n > 1024 {
                    self.err(
                        alloc.span,
                        format!(
                            "local array `{name}` has {n} elements; registers hold at most 1024"
                        ),
                    );
                    return;
                } else {
                    let Some(ty) = ptx_type(alloc.dtype) else {
                        return;
                    };
                    if self.locals.packed(name) && n % 2 == 0 {
                        let words = (0..n / 2).map(|_| self.zero(Type::B32)).collect();
                        self.words.insert(name.clone(), words);
                    }
                    Mem::Local((0..n).map(|_| self.zero(ty)).collect())
                }
            }
            Scope::Fragment => {
                // `emit` checked the level: there are no fragments.
                self.err(alloc.span, format!("fragment `{name}` at the thread level"));
                return;
            }
            Scope::Global => {
                self.err(
                    alloc.span,
                    "global allocations inside a kernel are not supported",
                );
                return;
            }
        };
        self.bufs.insert(
            name.clone(),
            Buf {
                dtype: alloc.dtype,
                shape: alloc.shape.clone(),
                mem,
            },
        );
    }

    fn smem_base(&mut self) -> Reg {
        if let Some(r) = self.smem {
            return r;
        }
        let sym = self.b.dynamic_shared("smem", self.smem_align);
        let r = self.b.mov(Type::U32, crate::ptx::Operand::Symbol(sym));
        self.smem = Some(r);
        r
    }
}
