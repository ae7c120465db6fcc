//! What a launch can have (docs/ir.md, rules B5 and B6), checked where the kernel says it,
//! so that `tlc check` refuses what no launch could run instead of a later stage failing
//! somewhere else:
//!
//! - **B5**: every symbolic dim is the extent of some parameter's dimension — whole, or in a
//!   form a launch solves (`d + 1`, `d * 4`: `ir::solvable_extent`). A launch
//!   reads dims off its arguments' shapes (`-D` binds the others before verification); a
//!   dim used only inside an expression (`(M * 4,)`), a grid or a loop bound could be
//!   read off nothing, and codegen's launch manifest would be refused — located at another
//!   line.
//! - **B6**: a buffer whose shape is constant holds at most 2^48 bytes
//!   (`target::MAX_TENSOR_BYTES`: its byte offsets fit int64 with room to spare), and a
//!   shared buffer at most a block's shared memory on the target (the largest of any
//!   target without one). A `-D` value makes a shape constant, so a binding that makes a
//!   tensor too large is refused here too; shapes that stay symbolic are checked by the
//!   interpreter and the runtime, which see the real sizes.

use super::consts::eval_int;
use crate::diagnostic::Diagnostic;
use crate::ir::{BufferDecl, PrimFunc, Scope, StmtKind};
use crate::target::{Target, MAX_TENSOR_BYTES};
use crate::visit::for_each_stmt;

pub(super) fn check(func: &PrimFunc, target: Option<Target>) -> Vec<Diagnostic> {
    let mut diags = launchable_dims(func);
    // (buffer, the shared-memory limit applies): a kernel with a `T.shared_arena` has its
    // shared buffers checked against the arena (A3) and the arena against the target (A4).
    let mut buffers: Vec<(&BufferDecl, bool)> = func.params.iter().map(|p| (p, false)).collect();
    for_each_stmt(&func.body, &mut |s| {
        if let StmtKind::Kernel(k) = &s.kind {
            buffers.extend(k.allocs.iter().map(|a| (a, k.arena.is_none())));
        }
    });
    for (b, shared_limit) in buffers {
        diags.extend(size(b, shared_limit.then_some(target)));
    }
    diags
}

/// B5: each dim is some parameter's whole extent — of a parameter the caller passes (the
/// function's own `T.alloc_global` tensors are sized from the dims, not the other way).
fn launchable_dims(func: &PrimFunc) -> Vec<Diagnostic> {
    let mut diags = Vec::new();
    // A scalar parameter is passed by the caller, not read off a shape.
    for d in func.dims.iter().filter(|d| d.param.is_none()) {
        let bound = func.inputs().any(|p| {
            p.shape
                .iter()
                .any(|e| crate::ir::solvable_extent(e).is_some_and(|(v, _, _)| v == d.name))
        });
        if !bound {
            diags.push(
                Diagnostic::error(
                    d.span,
                    format!(
                        "symbolic dimension `{}` is not the extent of any parameter's dimension, \
                         so a launch cannot read it off the arguments",
                        d.name
                    ),
                )
                .with_note(format!(
                    "use `{0}` as an extent of a parameter (`T.Tensor(({0}, …), …)`, or `{0} + 1`, \
                     `{0} * 4`: a launch solves those), or bind it with `-D {0}=VALUE`",
                    d.name
                )),
            );
        }
    }
    diags
}

/// B6: a constant-shaped buffer's bytes fit a tensor, and a shared one a block of
/// `shared_limit`'s target (`Some(None)`: of any target; `None`: not checked here).
fn size(b: &BufferDecl, shared_limit: Option<Option<Target>>) -> Option<Diagnostic> {
    let extents: Option<Vec<i64>> = b.shape.iter().map(|e| eval_int(e, &|_| None)).collect();
    // Symbolic shapes are checked at launch; an extent ≤ 0 is B4's error.
    let extents = extents.filter(|x| x.iter().all(|&n| n > 0))?;
    let elements = extents
        .iter()
        .try_fold(1i128, |acc, &n| acc.checked_mul(i128::from(n)))?;
    // Packed: int4's two elements share a byte.
    let bytes = (elements.saturating_mul(i128::from(b.dtype.bits())) + 7) / 8;
    let name = &b.name.name;
    let at = if b.name.span.is_dummy() {
        b.span
    } else {
        b.name.span
    };
    if bytes > i128::from(MAX_TENSOR_BYTES) {
        return Some(
            Diagnostic::error(
                at,
                format!(
                    "`{name}` has {elements} elements ({bytes} bytes), more than a buffer can hold"
                ),
            )
            .with_note(format!(
                "a buffer holds at most {MAX_TENSOR_BYTES} bytes (2^48), so that every byte \
                 offset into it fits int64"
            )),
        );
    }
    let target = shared_limit.filter(|_| b.scope == Scope::Shared)?;
    let (max, whose) = match target {
        Some(t) => (t.max_shared_bytes(), format!("on {t}")),
        None => (
            Target::ALL
                .iter()
                .map(|t| t.max_shared_bytes())
                .max()
                .unwrap_or(0),
            "on any target".to_string(),
        ),
    };
    (bytes > i128::from(max)).then(|| {
        Diagnostic::error(
            at,
            format!(
                "shared buffer `{name}` needs {bytes} bytes, more than the {max} bytes of shared \
                 memory a block may have {whose}"
            ),
        )
    })
}
