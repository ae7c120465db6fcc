//! `mark-fresh-buffers` (tile level): writes down which shared buffers carry no value from
//! one iteration of a loop to the next, as `T.fresh(X, …)` at the head of the loop's body,
//! so that `plan-shared-memory` — which runs late, on per-thread code where the fact is no
//! longer visible — may let them share bytes within an iteration.
//!
//! The proof is `analysis::fresh::provably_fresh`: `X`'s loop is the outermost `serial` /
//! `unroll` / `while` loop holding all of its uses, and one iteration of its body writes
//! all of `X` (a whole-buffer `T.copy`, `T.fill` / `T.clear`, `T.gemm` with
//! `clear_accum=True`, reduction with `clear=True`, or `T.Parallel` store element for
//! element) before anything reads it. At the tile level that is a question about a few tile
//! ops; after lowering it would be one about sets of per-thread stores. Recording the fact
//! in the IR keeps it through the passes in between, and makes it checked: the interpreter
//! treats `T.fresh(X)` as discarding `X`'s contents, so every interpreter comparison of a
//! later pass's input and output is also a check that no value crosses an iteration
//! (`inject-software-pipeline`'s stages included: its prologue refills them in every
//! iteration of the loop around).
//!
//! The pass changes no meaning (the proof says nothing reads what `T.fresh` discards) and
//! is idempotent: a buffer a `T.fresh` at the loop's head already names is not named again.

use crate::analysis::fresh::{list_at_mut, provably_fresh};
use crate::analysis::kernels::for_each_kernel;
use crate::context::PassContext;
use crate::pass::Pass;
use tlc_ir::{Diagnostic, Ident, PrimFunc, Stmt, StmtKind};

pub struct MarkFreshBuffers;

impl Pass for MarkFreshBuffers {
    fn name(&self) -> &'static str {
        "mark-fresh-buffers"
    }

    fn description(&self) -> &'static str {
        "shared buffers wholly written before they are read in each iteration of the loop around their uses -> `T.fresh` at its head"
    }

    fn preserves_declarations(&self) -> bool {
        true
    }

    fn run(&self, mut func: PrimFunc, _cx: &PassContext) -> Result<PrimFunc, Vec<Diagnostic>> {
        for_each_kernel(&mut func.body, &mut |k, _| {
            let marks = provably_fresh(k);
            // Loops holding a mark never nest (each is the outermost around its buffers'
            // uses), so inserting at one's head moves no other; last first all the same.
            for ((path, index), names) in marks.into_iter().rev() {
                let Some(list) = list_at_mut(&mut k.body, &path) else {
                    continue;
                };
                let Some(body) = list.get_mut(index).and_then(loop_body_mut) else {
                    continue;
                };
                mark(body, &names);
            }
        });
        Ok(func)
    }
}

fn loop_body_mut(s: &mut Stmt) -> Option<&mut Vec<Stmt>> {
    match &mut s.kind {
        StmtKind::For(f) => Some(&mut f.body),
        StmtKind::While { body, .. } => Some(body),
        _ => None,
    }
}

/// Names `names` in a `T.fresh` at the head of `body`: the one there (without repeating a
/// name), or a new one.
fn mark(body: &mut Vec<Stmt>, names: &[String]) {
    let span = body.first().map_or(tlc_ir::Span::DUMMY, |s| s.span);
    if let Some(StmtKind::Fresh(bufs)) = body.first_mut().map(|s| &mut s.kind) {
        for n in names {
            if !bufs.iter().any(|b| &b.name == n) {
                bufs.push(Ident::new(n.clone(), span));
            }
        }
        return;
    }
    let bufs = names.iter().map(|n| Ident::new(n.clone(), span)).collect();
    body.insert(0, Stmt::new(StmtKind::Fresh(bufs), span));
}
