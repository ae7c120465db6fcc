//! `PassContext`: what every pass receives besides the function — the target it compiles
//! for, and facts about the function that are expensive to derive (the verifier's
//! `FuncInfo`), cached between passes.
//!
//! **A cached fact describes the function the pass is given.** The pass manager keeps that
//! true: the `FuncInfo` of its verify-after-each-pass run is stored for the next pass, and
//! without verification a pass that does not `preserve_declarations` drops the cache. A pass
//! run by hand (a test) gets a fresh context, and `func_info` derives the facts on demand.

use std::borrow::Cow;
use tlc_ir::verifier::{verify, FuncInfo};
use tlc_ir::{Diagnostic, PrimFunc, Target};

/// The context of one pipeline run.
#[derive(Clone, Debug)]
pub struct PassContext {
    target: Target,
    info: Option<FuncInfo>,
    sms: i64,
    barriers_placed: bool,
}

impl PassContext {
    /// A context for `target` with nothing cached, sized for the target's usual SM count.
    pub fn new(target: Target) -> PassContext {
        PassContext {
            target,
            info: None,
            sms: target.desc().sm_count,
            barriers_placed: false,
        }
    }

    /// The context for a GPU of `sms` SMs (at least 1): persistent kernels launch that many
    /// blocks per `T.min_blocks_per_sm`.
    pub fn with_sms(mut self, sms: i64) -> PassContext {
        self.sms = sms.max(1);
        self
    }

    /// The context of a function whose per-thread code has its automatic barriers already
    /// (`tlc::frontend::finish` ran `thread_sync`, which is idempotent): the pipeline's
    /// `thread-sync` then passes its input on instead of placing them a second time.
    pub fn with_barriers_placed(mut self) -> PassContext {
        self.barriers_placed = true;
        self
    }

    /// Whether the function's automatic barriers are placed already.
    pub fn barriers_placed(&self) -> bool {
        self.barriers_placed
    }

    /// The SMs persistent kernels are sized for.
    pub fn sms(&self) -> i64 {
        self.sms
    }

    /// The target being compiled for: its limits and capabilities (`tlc_ir::target`).
    pub fn target(&self) -> Target {
        self.target
    }

    /// The context with `info` cached: the facts of the function the next pass is given
    /// (the frontend's verification of the input, say).
    pub fn with_info(mut self, info: FuncInfo) -> PassContext {
        self.info = Some(info);
        self
    }

    /// Facts about `func`: the cached ones, or a verification of `func` now.
    pub fn func_info(&self, func: &PrimFunc) -> Result<Cow<'_, FuncInfo>, Vec<Diagnostic>> {
        match &self.info {
            Some(info) => Ok(Cow::Borrowed(info)),
            None => verify(func).map(Cow::Owned),
        }
    }

    /// Replaces the cache (`None` forgets it). The pass manager's, after each pass.
    pub fn set_info(&mut self, info: Option<FuncInfo>) {
        self.info = info;
    }

    /// The cached facts, without deriving any.
    pub fn cached_info(&self) -> Option<&FuncInfo> {
        self.info.as_ref()
    }
}
