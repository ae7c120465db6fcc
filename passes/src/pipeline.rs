//! The registry of passes, pipeline text (`simplify,rasterize`) and the default pipeline of
//! each target.

use crate::inject_cp_async::InjectCpAsync;
use crate::inject_software_pipeline::InjectSoftwarePipeline;
use crate::layout_inference::LayoutInference;
use crate::legalize_safe_memory::LegalizeSafeMemory;
use crate::longest_first::LongestFirst;
use crate::lower_reducers::LowerReducers;
use crate::lower_reductions::LowerReductions;
use crate::lower_tile_ops::LowerTileOps;
use crate::mark_fresh_buffers::MarkFreshBuffers;
use crate::pack_int4::PackInt4;
use crate::pass::Pass;
use crate::persistent_tiles::PersistentTiles;
use crate::pipeline_planning::PipelinePlanning;
use crate::plan_allreduce_scratch::PlanAllreduceScratch;
use crate::plan_shared_memory::PlanSharedMemory;
use crate::prefetch_loads::PrefetchLoads;
use crate::rasterize::Rasterize;
use crate::simplify::Simplify;
use crate::sink_wgmma_wait::SinkWgmmaWait;
use crate::stage_fragment_reads::StageFragmentReads;
use crate::thread_binding::ThreadBinding;
use crate::thread_sync::ThreadSync;
use crate::tma_multicast::TmaMulticast;
use crate::unroll::Unroll;
use crate::version_masks::VersionMasks;
use crate::warp_specialize::WarpSpecialize;
use crate::widen_indices::WidenIndices;
use crate::widen_int4_gemm::WidenInt4Gemm;
use std::fmt;
use tlc_ir::Target;

/// An ordered list of passes.
pub type Pipeline = Vec<&'static dyn Pass>;

static LEGALIZE_SAFE_MEMORY: LegalizeSafeMemory = LegalizeSafeMemory;
static WIDEN_INT4_GEMM: WidenInt4Gemm = WidenInt4Gemm;
static PACK_INT4: PackInt4 = PackInt4;
static THREAD_SYNC: ThreadSync = ThreadSync;
static LOWER_REDUCERS: LowerReducers = LowerReducers;
static LOWER_REDUCTIONS: LowerReductions = LowerReductions;
static STAGE_FRAGMENT_READS: StageFragmentReads = StageFragmentReads;
static LONGEST_FIRST: LongestFirst = LongestFirst;
static VERSION_MASKS: VersionMasks = VersionMasks;
static PREFETCH_LOADS: PrefetchLoads = PrefetchLoads;
static MARK_FRESH_BUFFERS: MarkFreshBuffers = MarkFreshBuffers;
static LAYOUT_INFERENCE: LayoutInference = LayoutInference;
static PIPELINE_PLANNING: PipelinePlanning = PipelinePlanning;
static INJECT_SOFTWARE_PIPELINE: InjectSoftwarePipeline = InjectSoftwarePipeline;
static LOWER_TILE_OPS: LowerTileOps = LowerTileOps;
static WARP_SPECIALIZE: WarpSpecialize = WarpSpecialize;
static TMA_MULTICAST: TmaMulticast = TmaMulticast;
static PERSISTENT_TILES: PersistentTiles = PersistentTiles;
static INJECT_CP_ASYNC: InjectCpAsync = InjectCpAsync;
static SIMPLIFY: Simplify = Simplify;
static RASTERIZE: Rasterize = Rasterize;
static UNROLL: Unroll = Unroll;
static THREAD_BINDING: ThreadBinding = ThreadBinding;
static SINK_WGMMA_WAIT: SinkWgmmaWait = SinkWgmmaWait;
static PLAN_ALLREDUCE_SCRATCH: PlanAllreduceScratch = PlanAllreduceScratch;
static PLAN_SHARED_MEMORY: PlanSharedMemory = PlanSharedMemory;
static WIDEN_INDICES: WidenIndices = WidenIndices;

/// Every pass, in the order of the default pipeline (`legalize-safe-memory` first: the
/// front end runs it for every command, so the pipeline's input has its guards already;
/// `pack-int4` next, so that no later pass sees a sub-byte dtype):
/// tile-level rewrites first (reducers, reductions, staged fragment reads, the block order, masks versioned), the buffers fresh in each loop iteration
/// (before pipelining rewrites the loops), tile-level scheduling (layouts, pipelining), then the lowering to threads, then thread-level clean-up.
pub fn registry() -> &'static [&'static dyn Pass] {
    static ALL: [&dyn Pass; 27] = [
        &LEGALIZE_SAFE_MEMORY,
        &WIDEN_INT4_GEMM,
        &PACK_INT4,
        &THREAD_SYNC,
        &LOWER_REDUCERS,
        &LOWER_REDUCTIONS,
        &STAGE_FRAGMENT_READS,
        &LONGEST_FIRST,
        &VERSION_MASKS,
        &PREFETCH_LOADS,
        &MARK_FRESH_BUFFERS,
        &LAYOUT_INFERENCE,
        &PIPELINE_PLANNING,
        &INJECT_SOFTWARE_PIPELINE,
        &LOWER_TILE_OPS,
        &WARP_SPECIALIZE,
        &PERSISTENT_TILES,
        &TMA_MULTICAST,
        &INJECT_CP_ASYNC,
        &RASTERIZE,
        &THREAD_BINDING,
        &SINK_WGMMA_WAIT,
        &PLAN_ALLREDUCE_SCRATCH,
        &PLAN_SHARED_MEMORY,
        &UNROLL,
        &SIMPLIFY,
        &WIDEN_INDICES,
    ];
    &ALL
}

/// The pass called `name`.
pub fn lookup(name: &str) -> Option<&'static dyn Pass> {
    registry().iter().copied().find(|p| p.name() == name)
}

/// A pass name that is not in the registry, with the nearest known name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownPass {
    pub name: String,
    pub suggestion: Option<&'static str>,
}

impl fmt::Display for UnknownPass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown pass `{}`", self.name)?;
        match self.suggestion {
            Some(s) => write!(f, "; did you mean `{s}`?"),
            None => {
                let names: Vec<&str> = registry().iter().map(|p| p.name()).collect();
                write!(f, " (known passes: {})", names.join(", "))
            }
        }
    }
}

impl std::error::Error for UnknownPass {}

/// Looks `name` up, suggesting the closest registered name (edit distance ≤ 3, or a prefix)
/// when there is none.
pub fn resolve(name: &str) -> Result<&'static dyn Pass, UnknownPass> {
    lookup(name).ok_or_else(|| UnknownPass {
        name: name.to_string(),
        suggestion: suggest(name),
    })
}

fn suggest(name: &str) -> Option<&'static str> {
    registry()
        .iter()
        .map(|p| (strsim::damerau_levenshtein(name, p.name()), p.name()))
        .filter(|&(d, known)| d <= 3 || (!name.is_empty() && known.starts_with(name)))
        .min_by_key(|&(d, _)| d)
        .map(|(_, known)| known)
}

/// Parses `a,b,c` (spaces around names are ignored; empty entries are skipped, so an empty
/// text is the empty pipeline).
pub fn parse_pipeline(text: &str) -> Result<Pipeline, UnknownPass> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(resolve)
        .collect()
}

/// The passes `tlc compile` runs for `target`, in order: int4 packed into bytes before
/// anything else (laid-out IR has no int4, `tlc_ir::verifier::check_level`), layouts
/// before the pipelining that
/// copies buffers, pipelining before the lowering that turns copies into threads' code,
/// thread binding before the shared-memory plan that needs the merged thread loop, index
/// widths last (after the simplifier, which then never meets the int64 casts).
pub fn default_pipeline(target: Target) -> Pipeline {
    // sm_90a's tensor cores have no int4 rate: its int4 gemms run as int8 ones.
    let widen: &[&'static dyn Pass] = match target {
        Target::Sm80 => &[],
        Target::Sm90a => &[&WIDEN_INT4_GEMM],
    };
    let tile_level: [&'static dyn Pass; 13] = [
        &PACK_INT4,
        &THREAD_SYNC,
        &LOWER_REDUCERS,
        &LOWER_REDUCTIONS,
        &STAGE_FRAGMENT_READS,
        &LONGEST_FIRST,
        &VERSION_MASKS,
        &PREFETCH_LOADS,
        &MARK_FRESH_BUFFERS,
        &LAYOUT_INFERENCE,
        &PIPELINE_PLANNING,
        &INJECT_SOFTWARE_PIPELINE,
        &LOWER_TILE_OPS,
    ];
    // The Hopper schedule: right after the lowering (which puts pipelines on TMA where the
    // target has it, analysis/tma.rs, in their one-warpgroup form) and before rasterize (a
    // persistent kernel walks its tiles in the rasterized order itself).
    let schedule: &[&'static dyn Pass] = match target {
        Target::Sm80 => &[],
        Target::Sm90a => &[&WARP_SPECIALIZE, &PERSISTENT_TILES, &TMA_MULTICAST],
    };
    let thread_level: [&'static dyn Pass; 9] = [
        &INJECT_CP_ASYNC,
        &RASTERIZE,
        &THREAD_BINDING,
        &SINK_WGMMA_WAIT,
        &PLAN_ALLREDUCE_SCRATCH,
        &PLAN_SHARED_MEMORY,
        &UNROLL,
        &SIMPLIFY,
        &WIDEN_INDICES,
    ];
    widen
        .iter()
        .copied()
        .chain(tile_level)
        .chain(schedule.iter().copied())
        .chain(thread_level)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_suggests() {
        let p = parse_pipeline(" simplify, rasterize ,").unwrap();
        let names: Vec<&str> = p.iter().map(|p| p.name()).collect();
        assert_eq!(names, ["simplify", "rasterize"]);
        assert!(parse_pipeline("").unwrap().is_empty());
        let err = parse_pipeline("simplify,simplfy").err().unwrap();
        assert_eq!(err.suggestion, Some("simplify"));
        assert_eq!(
            err.to_string(),
            "unknown pass `simplfy`; did you mean `simplify`?"
        );
        let err = parse_pipeline("zzzzzzzzzz").err().unwrap();
        assert_eq!(err.suggestion, None);
        assert!(err.to_string().contains(
            "known passes: legalize-safe-memory, widen-int4-gemm, pack-int4, thread-sync, lower-reducers, lower-reductions, stage-fragment-reads, longest-first, version-masks, prefetch-loads, mark-fresh-buffers, layout-inference, pipeline-planning, inject-software-pipeline, lower-tile-ops, warp-specialize, persistent-tiles, tma-multicast, inject-cp-async, rasterize, thread-binding, sink-wgmma-wait, plan-allreduce-scratch, plan-shared-memory, unroll, simplify, widen-indices"
        ));
        assert_eq!(resolve("raster").map(|p| p.name()).ok(), None);
        assert_eq!(
            resolve("raster").err().unwrap().suggestion,
            Some("rasterize")
        );
    }

    #[test]
    fn registry_names_are_unique_kebab_case_with_descriptions() {
        let names: Vec<&str> = registry().iter().map(|p| p.name()).collect();
        for (i, n) in names.iter().enumerate() {
            assert!(!names[..i].contains(n), "{n} twice");
            // Digits are kebab-case too (`pack-int4`), but a name starts with a letter.
            let kebab = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
            assert!(n.chars().all(kebab), "{n}");
            assert!(n.starts_with(|c: char| c.is_ascii_lowercase()), "{n}");
        }
        for p in registry() {
            assert!(!p.description().is_empty() && !p.description().contains('\n'));
        }
        for t in [Target::Sm80, Target::Sm90a] {
            assert_eq!(Target::parse(t.name()), Some(t));
            assert!(!default_pipeline(t).is_empty());
        }
    }
}
