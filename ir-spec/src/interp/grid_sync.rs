//! `T.sync_grid()` in the interpreter: a kernel's body in phases.
//!
//! A grid barrier sits directly in the kernel body, or (thread level) directly in the body
//! of the kernel's top-level thread-binding loops (verifier rule Y2). After compiling,
//! [`hoist`] splits each such loop at its barriers into loops that run one after another,
//! the later ones resuming the threads' registers (`resume`), so that every barrier sits
//! directly in the kernel body. The launch (`exec.rs`) then runs the body in phases: every
//! block runs up to the first barrier, the grid's global writes are applied (as at the end
//! of a grid without barriers, in block order), then every block continues, with its own
//! shared, fragment and local buffers and its registers as it left them — so a read after a
//! barrier sees what every block wrote before it.

use crate::interp::compile::{CStmt, CStmtKind};

/// The kernel body with every top-level thread loop that holds a grid barrier split at it
/// (nested thread loops too, so a barrier in a nest surfaces at the top).
pub(crate) fn hoist(body: Vec<CStmt>) -> Vec<CStmt> {
    let mut out = Vec::with_capacity(body.len());
    for s in body {
        out.extend(split_thread_loop(s));
    }
    out
}

/// `s` itself, or, for a thread loop whose body holds a grid barrier at its top (after
/// hoisting its own nested thread loops), one loop per stretch between barriers with the
/// barriers between them.
fn split_thread_loop(s: CStmt) -> Vec<CStmt> {
    let CStmt { kind, span } = s;
    let CStmtKind::Loop {
        var,
        start,
        stop,
        body,
        thread_axis: Some(axis),
        parallel,
        cost,
        prepaid,
        resume,
    } = kind
    else {
        return vec![CStmt { kind, span }];
    };
    let body = hoist(body);
    let mut parts: Vec<Vec<CStmt>> = vec![Vec::new()];
    for stmt in body {
        if matches!(stmt.kind, CStmtKind::GridSync) {
            parts.push(vec![stmt]);
            parts.push(Vec::new());
        } else if let Some(last) = parts.last_mut() {
            last.push(stmt);
        }
    }
    let mut out = Vec::new();
    let mut first = true;
    for part in parts {
        if let [one] = part.as_slice() {
            if matches!(one.kind, CStmtKind::GridSync) {
                out.extend(part);
                continue;
            }
        }
        out.push(CStmt {
            kind: CStmtKind::Loop {
                var,
                start: start.clone(),
                stop: stop.clone(),
                body: part,
                thread_axis: Some(axis),
                parallel: parallel.clone(),
                cost,
                prepaid,
                resume: resume || !first,
            },
            span,
        });
        first = false;
    }
    out
}

/// The kernel body's phases: the statements between its grid barriers.
pub(crate) fn phases(body: &[CStmt]) -> Vec<&[CStmt]> {
    body.split(|s| matches!(s.kind, CStmtKind::GridSync))
        .collect()
}
