//! Levels: what a stage of the pipeline may assume about its input beyond the rules every IR
//! obeys. A pass declares the level it needs (`tlc_passes::Pass::requires`), the pass manager
//! checks it before running the pass, and code generation checks `Planned` before emitting:
//! this module is the one place where "run X first" is decided and worded.
//!
//! The levels are ordered; each includes the ones before it.

use crate::diagnostic::Diagnostic;
use crate::ir::{ForKind, Kernel, Layout, PrimFunc, Scope, Stmt, StmtKind};
use crate::visit::for_each_stmt;
use std::fmt;

/// How far a function has been lowered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// Anything the IR reference allows: tile ops, `T.Parallel` loops, fragments.
    #[default]
    Tile,
    /// Tile level, every fragment that a `T.gemm` accumulates into has an mma
    /// accumulator layout (layout-inference produces it), and the only reductions left are
    /// into row vectors (`Layout::Rows`; lower-reductions lowers the others): what
    /// lower-tile-ops takes.
    LaidOut,
    /// Thread level: no tile op (`T.copy`, `T.fill`, `T.gemm`), no `T.Parallel` loop, no
    /// fragment buffer (lower-tile-ops produces it).
    Thread,
    /// Thread level, and every kernel that allocates shared memory places it in a
    /// `T.shared_arena` (plan-shared-memory produces it): what code generation takes.
    Planned,
}

impl Level {
    pub fn name(self) -> &'static str {
        match self {
            Level::Tile => "tile-level",
            Level::LaidOut => "laid-out tile-level",
            Level::Thread => "thread-level",
            Level::Planned => "planned thread-level",
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why `stmt` alone (not its children; for a kernel, its allocations and gemms) keeps a
/// function below `level`, if it does: the one wording of every "run X first".
pub fn violation(stmt: &Stmt, level: Level) -> Vec<Diagnostic> {
    if let StmtKind::Reduce(r) = &stmt.kind {
        // Laid out, a reduction into a row vector stays for lower-tile-ops (the kernel's
        // check below, which knows the layouts).
        if level >= Level::Thread {
            return vec![Diagnostic::error(
                stmt.span,
                format!(
                    "`{}` remains, and {level} IR has none: run lower-reductions (and, for \
                     a row vector, lower-tile-ops) first",
                    r.kind.name()
                ),
            )];
        }
    }
    if level >= Level::LaidOut {
        let remains = match &stmt.kind {
            StmtKind::FinalizeReducer(r) => Some((stmt.span, r.name.as_str())),
            StmtKind::Kernel(k) => k.reducers.first().map(|r| (r.span, r.buffer.name.as_str())),
            _ => None,
        };
        if let Some((span, name)) = remains {
            return vec![Diagnostic::error(
                span,
                format!(
                    "reducer `{name}` remains, and {level} IR has none: run lower-reducers first"
                ),
            )];
        }
    }
    if level == Level::LaidOut {
        return match &stmt.kind {
            StmtKind::Kernel(k) => {
                let mut errors = unlaid_accumulators(k, level);
                errors.extend(unlaid_reductions(k, level));
                errors
            }
            _ => Vec::new(),
        };
    }
    if level == Level::Tile {
        return Vec::new();
    }
    let lowered = "lower-tile-ops";
    let message = match &stmt.kind {
        StmtKind::Copy { .. } | StmtKind::Fill { .. } => {
            format!("a tile op remains, and {level} IR has none: run {lowered} first")
        }
        StmtKind::Gemm(_) => format!(
            "`T.gemm` remains, and {level} IR has none: run layout-inference and {lowered} first"
        ),
        StmtKind::For(f) if f.kind == ForKind::Parallel => {
            format!("a `T.Parallel` loop remains, and {level} IR has none: run {lowered} first")
        }
        StmtKind::Kernel(k) => {
            if let Some(frag) = k.allocs.iter().find(|a| a.scope == Scope::Fragment) {
                return vec![Diagnostic::error(
                    frag.span,
                    format!(
                        "fragment `{}` remains, and {level} IR has none: run {lowered} first",
                        frag.name.name
                    ),
                )];
            }
            let Some(shared) = k.allocs.iter().find(|a| a.scope == Scope::Shared) else {
                return Vec::new();
            };
            if level < Level::Planned || k.arena.is_some() {
                return Vec::new();
            }
            format!(
                "shared buffer `{}` has no place in a shared arena, and {level} IR gives every \
                 shared buffer one: run plan-shared-memory first",
                shared.name.name
            )
        }
        _ => return Vec::new(),
    };
    vec![Diagnostic::error(stmt.span, message)]
}

/// The `T.gemm`s of kernel `k` whose fragment accumulator has no mma accumulator layout.
fn unlaid_accumulators(k: &Kernel, level: Level) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for_each_stmt(&k.body, &mut |stmt| {
        let StmtKind::Gemm(g) = &stmt.kind else {
            return;
        };
        let name = &g.c.buffer.name;
        let fragment = k
            .allocs
            .iter()
            .any(|a| &a.name.name == name && a.scope == Scope::Fragment);
        let laid_out = k.layouts.iter().any(|l| {
            &l.buffer.name == name
                && matches!(
                    l.layout,
                    Layout::MmaAccumulator { .. } | Layout::WgmmaAccumulator { .. }
                )
        });
        if fragment && !laid_out {
            out.push(Diagnostic::error(
                g.c.span,
                format!(
                    "the accumulator `{name}` has no mma layout, and {level} IR gives every \
                     gemm accumulator one: run layout-inference first"
                ),
            ));
        }
    });
    out
}

/// The reductions of kernel `k` left at the laid-out level whose destination is not a row
/// vector (`Layout::Rows`): only those reduce in registers in lower-tile-ops.
fn unlaid_reductions(k: &Kernel, level: Level) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for_each_stmt(&k.body, &mut |stmt| {
        let StmtKind::Reduce(r) = &stmt.kind else {
            return;
        };
        let rows = k
            .layouts
            .iter()
            .any(|l| l.buffer.name == r.dst.name && matches!(l.layout, Layout::Rows(_)));
        if !rows {
            out.push(Diagnostic::error(
                stmt.span,
                format!(
                    "`{}` remains, and {level} IR has none but reductions into row vectors: \
                     run lower-reductions first",
                    r.kind.name()
                ),
            ));
        }
    });
    out
}

/// Everything that keeps `func` below `level`, in program order (empty: `func` is at
/// `level`).
pub fn check_level(func: &PrimFunc, level: Level) -> Vec<Diagnostic> {
    let mut out = super::int4::remaining(func, level);
    for_each_stmt(&func.body, &mut |stmt| out.extend(violation(stmt, level)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::parse;

    fn func(src: &str) -> PrimFunc {
        match parse(src) {
            Ok(f) => f,
            Err(e) => panic!("{e:?}"),
        }
    }

    const TILE: &str = r#"
@T.prim_func
def f(A: T.Tensor((128,), "float32")):
    with T.Kernel(1, threads=128) as bx:
        S = T.alloc_shared((128,), "float32")
        F = T.alloc_fragment((128,), "float32")
        T.copy(A, S)
        for i in T.Parallel(128):
            F[i] = S[i]
"#;

    const THREAD: &str = r#"
@T.prim_func
def f(A: T.Tensor((128,), "float32")):
    with T.Kernel(1, threads=128) as bx:
        S = T.alloc_shared((128,), "float32")
        for tx in T.thread_binding(128, thread="threadIdx.x"):
            S[tx] = A[tx]
"#;

    #[test]
    fn every_level_names_what_keeps_a_function_below_it() {
        let tile = func(TILE);
        assert!(check_level(&tile, Level::Tile).is_empty());
        let msgs: Vec<String> = check_level(&tile, Level::Thread)
            .into_iter()
            .map(|d| d.message)
            .collect();
        assert_eq!(msgs.len(), 3, "{msgs:?}");
        assert!(msgs[0].starts_with("fragment `F` remains"), "{msgs:?}");
        assert!(msgs[1].starts_with("a tile op remains"), "{msgs:?}");
        assert!(
            msgs[2].starts_with("a `T.Parallel` loop remains"),
            "{msgs:?}"
        );
        assert!(msgs.iter().all(|m| m.ends_with("run lower-tile-ops first")));

        // A gemm into a fragment needs its accumulator layout before lower-tile-ops.
        let gemm = func(
            r#"
@T.prim_func
def g(A: T.Tensor((16, 16), "float16")):
    with T.Kernel(1, threads=32) as bx:
        S = T.alloc_shared((16, 16), "float16")
        C = T.alloc_fragment((16, 16), "float32")
        T.copy(A, S)
        T.gemm(S, S, C)
"#,
        );
        let unlaid = check_level(&gemm, Level::LaidOut);
        assert_eq!(unlaid.len(), 1, "{unlaid:?}");
        assert!(unlaid[0].message.contains("run layout-inference first"));
        assert!(check_level(&tile, Level::LaidOut).is_empty());

        let thread = func(THREAD);
        assert!(check_level(&thread, Level::Thread).is_empty());
        let planned = check_level(&thread, Level::Planned);
        assert_eq!(planned.len(), 1);
        assert!(planned[0].message.contains("run plan-shared-memory first"));
        assert!(Level::Tile < Level::LaidOut && Level::LaidOut < Level::Thread);
        assert!(Level::Thread < Level::Planned);
    }
}
