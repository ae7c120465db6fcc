//! The GPU targets tlc compiles for. Each has ONE description ([`TargetDesc`]) that holds
//! every architectural fact the compiler and the runtime use — shared memory a block may
//! have, registers, the asynchronous-copy and matrix-multiply families the hardware has, the
//! warpgroup size, the PTX ISA version — and [`Target::for_capability`] is the one mapping
//! from a device's compute capability to a target.
//!
//! Passes ask a target what it *has* (`target.has_mma(MmaFamily::Wgmma)`,
//! `target.max_shared_bytes()`), never which one it *is*: a new target (sm_100) is a new
//! variant and a new description here, and the passes that do not care about it stay as
//! they are. The default pipeline of each target is `tlc_passes::default_pipeline`.

use std::fmt;

/// Threads in a warp on every target tlc has: each `TargetDesc::warp_size`, and what the
/// target-independent stages (the interpreter's warp collectives, the verifier without a
/// target) use. Passes read their target's (`Target::warp_size`).
pub const WARP_SIZE: i64 = 32;

/// Threads in a warpgroup (the unit of `wgmma`), on every target that has warpgroups.
pub const WARPGROUP_SIZE: i64 = 128;

/// Threads in a block, at most, on every target.
pub const MAX_THREADS_PER_BLOCK: i64 = 1024;

/// Threads resident on one SM, at most, on every target (the limit `T.min_blocks_per_sm`
/// is checked against).
pub const MAX_THREADS_PER_SM: i64 = 2048;

/// Blocks resident on one SM, at most, on every target (compute capabilities 8.0 and 9.0).
pub const MAX_BLOCKS_PER_SM: i64 = 32;

/// 32-bit registers of one SM, on every target.
pub const REGISTERS_PER_SM: i64 = 65_536;

/// 32-bit registers one thread may have, at most, on every target (PTX's `maxnreg` bound).
pub const MAX_REGISTERS_PER_THREAD: i64 = 255;

/// Shared memory the hardware keeps for itself per resident block, on every target.
pub const RESERVED_SHARED_BYTES_PER_BLOCK: i64 = 1024;

/// Threads along each block dimension (`threadIdx.x`, `.y`, `.z`), at most, on every target.
pub const MAX_BLOCK_DIMS: [i64; 3] = [1024, 1024, 64];

/// Blocks along each grid dimension (`blockIdx.x`, `.y`, `.z`), at most, on every target
/// (the CUDA programming guide's limits for compute capability 3.0 and later).
pub const MAX_GRID_DIMS: [i64; 3] = [(1 << 31) - 1, 65_535, 65_535];

/// The bytes of one tensor or buffer, at most (2^48 = 256 TiB: beyond any GPU's memory):
/// its byte offsets, and so every linear index into it, fit int64 with room to spare.
pub const MAX_TENSOR_BYTES: i64 = 1 << 48;

/// A compilation target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Target {
    /// Ampere (A100) and every later GPU through the driver's JIT: `cp.async`, `ldmatrix`,
    /// `mma.sync`.
    Sm80,
    /// Hopper (H100, H200) with the architecture-specific features (`wgmma`, `setmaxnreg`);
    /// runs on compute capability 9.0 only.
    Sm90a,
}

/// An asynchronous global → shared copy mechanism.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AsyncCopy {
    /// `cp.async` (4, 8 or 16 bytes per thread, commit / wait groups): sm_80 and later.
    CpAsync,
    /// `cp.async.bulk.tensor` through a tensor map, completing on an mbarrier (TMA): sm_90.
    BulkTensor,
}

/// A tensor-core matrix-multiply family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MmaFamily {
    /// `mma.sync.aligned.m16n8k16` (warp collective, register operands): sm_80 and later.
    MmaSync,
    /// `wgmma.mma_async` (warpgroup collective, shared-memory descriptors): sm_90a only.
    Wgmma,
}

/// Everything tlc knows about one target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TargetDesc {
    /// The name in `--target`, the PTX `.target` line and the manifest: `sm_80`.
    pub name: &'static str,
    /// The compute capability the target is built for.
    pub capability: (i32, i32),
    /// Architecture-specific (the `a` suffix): runs on exactly `capability`, not later GPUs.
    pub arch_specific: bool,
    /// The PTX ISA version of the `.version` line.
    pub ptx_isa: (u32, u32),
    /// Dynamic shared memory one block may use (the opt-in maximum, in bytes).
    pub max_shared_bytes: i64,
    /// Shared memory of one SM, shared by its resident blocks (each also costs
    /// `RESERVED_SHARED_BYTES_PER_BLOCK`).
    pub shared_bytes_per_sm: i64,
    /// The SMs of the GPU the target's persistent kernels are sized for (one block per SM
    /// per `T.min_blocks_per_sm`), unless the compile says otherwise: a GPU with fewer runs
    /// them correctly, in more waves.
    pub sm_count: i64,
    /// Registers one thread may use.
    pub max_registers_per_thread: u32,
    /// Threads in a warp: the unit of the warp collectives (`T.shfl_xor`, `mma.sync`,
    /// `ldmatrix`) and of the passes' warp and lane arithmetic.
    pub warp_size: i64,
    /// Threads in a warpgroup (the unit of `wgmma`), where the target has warpgroup
    /// collectives.
    pub warpgroup_size: Option<i64>,
    pub async_copies: &'static [AsyncCopy],
    pub mma: &'static [MmaFamily],
    /// Whether `T.atomic_add` has a bfloat16 form (`red.add.noftz.bf16`: sm_90 and later).
    pub bf16_atomic_add: bool,
    /// Whether `red` has vector forms (`red.global.add.v2.f32`, `.v4.f32`,
    /// `.noftz.v2.f16x2`, …: sm_90 and PTX ISA 8.1, which a module using them declares).
    /// Without them codegen adds a vector's elements one `red` each (16-bit floats two to a
    /// packed `.f16x2` / `.bf16x2` word, which sm_80 has for float16).
    pub vector_red: bool,
    /// The fp8 conversions `cvt.rn.satfinite.{e4m3x2|e5m2x2}.f32` and
    /// `cvt.rn.f16x2.{e4m3x2|e5m2x2}` (PTX ISA 7.8, sm_89 and later). Without them codegen
    /// converts fp8 with integer and f32 instructions (`backend/src/codegen/fp8.rs`).
    pub fp8_convert: bool,
    /// The most blocks one thread-block cluster may have (`cluster_dims`; 1: the target has
    /// no clusters). 8 is CUDA's portable limit on sm_90 (16 needs a non-portable launch
    /// attribute, which tlc does not set).
    pub max_cluster_size: i64,
}

/// CUDA's portable limit on blocks per cluster (sm_90): the largest `cluster_dims` any
/// target takes.
pub const MAX_CLUSTER_SIZE: i64 = 8;

static SM80: TargetDesc = TargetDesc {
    name: "sm_80",
    capability: (8, 0),
    arch_specific: false,
    // PTX 8.0 (CUDA 12.0) is the lowest ISA with sm_90a; it covers everything the sm_80
    // path emits (cp.async, ldmatrix and mma.sync need 7.0), so both targets print one.
    ptx_isa: (8, 0),
    // 163 KiB: an A100's opt-in maximum per block.
    max_shared_bytes: 166_912,
    // 164 KiB.
    shared_bytes_per_sm: 167_936,
    // An A100 SXM.
    sm_count: 108,
    max_registers_per_thread: 255,
    warp_size: WARP_SIZE,
    warpgroup_size: None,
    async_copies: &[AsyncCopy::CpAsync],
    mma: &[MmaFamily::MmaSync],
    bf16_atomic_add: false,
    vector_red: false,
    fp8_convert: false,
    max_cluster_size: 1,
};

static SM90A: TargetDesc = TargetDesc {
    name: "sm_90a",
    capability: (9, 0),
    arch_specific: true,
    ptx_isa: (8, 0),
    // 227 KiB: an H100's opt-in maximum per block.
    max_shared_bytes: 232_448,
    // 228 KiB.
    shared_bytes_per_sm: 233_472,
    // An H100 SXM or an H200.
    sm_count: 132,
    max_registers_per_thread: 255,
    warp_size: WARP_SIZE,
    warpgroup_size: Some(WARPGROUP_SIZE),
    async_copies: &[AsyncCopy::CpAsync, AsyncCopy::BulkTensor],
    mma: &[MmaFamily::MmaSync, MmaFamily::Wgmma],
    bf16_atomic_add: true,
    vector_red: true,
    fp8_convert: true,
    max_cluster_size: MAX_CLUSTER_SIZE,
};

impl Target {
    /// Every target, oldest first.
    pub const ALL: [Target; 2] = [Target::Sm80, Target::Sm90a];

    /// The target's description.
    pub fn desc(self) -> &'static TargetDesc {
        match self {
            Target::Sm80 => &SM80,
            Target::Sm90a => &SM90A,
        }
    }

    pub fn name(self) -> &'static str {
        self.desc().name
    }

    /// The target called `text` (`sm_80`, `sm_90a`).
    pub fn parse(text: &str) -> Option<Target> {
        Target::ALL.into_iter().find(|t| t.name() == text)
    }

    /// `sm_80, sm_90a`: for "known targets" notes.
    pub fn names() -> String {
        let names: Vec<&str> = Target::ALL.iter().map(|t| t.name()).collect();
        names.join(", ")
    }

    /// The target to compile for on a device of compute capability `(major, minor)`: the
    /// newest one that runs there (sm_90a on 9.0, sm_80 on every other 8.x and later GPU);
    /// `None` for GPUs older than every target.
    pub fn for_capability(capability: (i32, i32)) -> Option<Target> {
        Target::ALL
            .into_iter()
            .rev()
            .find(|t| t.runs_on(capability))
    }

    /// Whether a GPU of compute capability `(major, minor)` runs PTX for this target: PTX for
    /// a plain target is JIT-compiled for any later GPU; an architecture-specific one runs
    /// on its own capability only.
    pub fn runs_on(self, capability: (i32, i32)) -> bool {
        let d = self.desc();
        if d.arch_specific {
            capability == d.capability
        } else {
            capability >= d.capability
        }
    }

    /// Dynamic shared memory one block may use, in bytes.
    pub fn max_shared_bytes(self) -> i64 {
        self.desc().max_shared_bytes
    }

    /// How many blocks of `shared_bytes` of dynamic shared memory fit on one SM at once, as
    /// far as shared memory goes.
    pub fn blocks_per_sm_by_shared(self, shared_bytes: i64) -> i64 {
        shared_bytes
            .max(0)
            .checked_add(RESERVED_SHARED_BYTES_PER_BLOCK)
            .map_or(0, |per_block| self.desc().shared_bytes_per_sm / per_block)
    }

    pub fn max_registers_per_thread(self) -> u32 {
        self.desc().max_registers_per_thread
    }

    pub fn warp_size(self) -> i64 {
        self.desc().warp_size
    }

    pub fn warpgroup_size(self) -> Option<i64> {
        self.desc().warpgroup_size
    }

    pub fn has_async_copy(self, kind: AsyncCopy) -> bool {
        self.desc().async_copies.contains(&kind)
    }

    pub fn has_mma(self, family: MmaFamily) -> bool {
        self.desc().mma.contains(&family)
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back() {
        for t in Target::ALL {
            assert_eq!(Target::parse(t.name()), Some(t));
            assert_eq!(t.to_string(), t.name());
        }
        assert_eq!(Target::parse("sm_90"), None);
        assert_eq!(Target::names(), "sm_80, sm_90a");
    }

    #[test]
    fn capability_picks_the_newest_target_that_runs() {
        assert_eq!(Target::for_capability((9, 0)), Some(Target::Sm90a));
        assert_eq!(Target::for_capability((8, 0)), Some(Target::Sm80));
        assert_eq!(Target::for_capability((8, 9)), Some(Target::Sm80));
        assert_eq!(Target::for_capability((10, 0)), Some(Target::Sm80));
        assert_eq!(Target::for_capability((7, 5)), None);
        assert!(Target::Sm80.runs_on((9, 0)));
        assert!(!Target::Sm90a.runs_on((10, 0)));
        assert!(!Target::Sm90a.runs_on((8, 0)));
    }

    #[test]
    fn descriptions_hold_the_limits() {
        assert_eq!(Target::Sm80.max_shared_bytes(), 163 * 1024);
        assert_eq!(Target::Sm90a.max_shared_bytes(), 227 * 1024);
        assert!(Target::Sm90a.has_mma(MmaFamily::Wgmma));
        assert!(!Target::Sm80.has_mma(MmaFamily::Wgmma));
        assert!(Target::Sm80.has_async_copy(AsyncCopy::CpAsync));
        assert!(!Target::Sm80.has_async_copy(AsyncCopy::BulkTensor));
        assert_eq!(Target::Sm90a.warpgroup_size(), Some(128));
    }
}
