//! Whether the iterations of a `T.Parallel` nest touch each other's elements: one reads or
//! writes an element another writes. That is a race between iterations whatever the
//! values — a row that stores what it reads while other rows read it computes the same in
//! every order, so reversing the orders (`reverse.rs`) cannot see it, but the compiled
//! IR's interpreter reports the threads' race.
//!
//! Each nest with constant bounds and at most [`MAX_POINTS`] iterations is enumerated: its
//! stores' and loads' indices evaluated at every iteration (lets inside it followed, inner
//! serial loops at their first iteration, both arms of an `if`), with the variables from
//! outside the nest (block indices, outer loops, dims) at two sample values. A nest it
//! cannot evaluate (an index read from memory, a symbolic bound) conflicts when a buffer
//! is loaded at indices spelled otherwise than it is stored.

use std::collections::{HashMap, HashSet};
use tlc_ir::interval::{interval, Env, Interval};
use tlc_ir::visit::{for_each_stmt, for_each_subexpr, stmt_exprs};
use tlc_ir::{Expr, ExprKind, For, ForKind, PrimFunc, Stmt, StmtKind};

/// The most iterations of a nest enumerated.
const MAX_POINTS: i64 = 1 << 14;

/// Whether some `T.Parallel` nest of `func` has iterations that touch each other's
/// elements (module doc).
pub fn parallel_self_conflict(func: &PrimFunc) -> bool {
    // A reducer's updates combine over the nest's iterations: no race (docs/ir.md,
    // Reducers).
    let mut reducers = HashSet::new();
    for_each_stmt(&func.body, &mut |s| {
        if let StmtKind::Kernel(k) = &s.kind {
            reducers.extend(k.reducers.iter().map(|r| r.buffer.name.clone()));
        }
    });
    let mut found = false;
    let mut walk = |s: &Stmt| {
        if let StmtKind::For(f) = &s.kind {
            if f.kind == ForKind::Parallel && !found {
                found = nest_conflicts(f, &reducers);
            }
        }
    };
    for_each_stmt(&func.body, &mut walk);
    found
}

fn nest_conflicts(nest: &For, reducers: &HashSet<String>) -> bool {
    // The directly nested parallel loops: `for i, j in T.Parallel(a, b)`.
    let mut loops = vec![nest];
    while let [Stmt {
        kind: StmtKind::For(inner),
        ..
    }] = loops[loops.len() - 1].body.as_slice()
    {
        if inner.kind != ForKind::Parallel {
            break;
        }
        loops.push(inner);
    }
    let body = &loops[loops.len() - 1].body;
    let ranges: Option<Vec<(i64, i64)>> = loops
        .iter()
        .map(|l| Some((l.start.as_int()?, l.stop.as_int()?)))
        .collect();
    let points = ranges.as_ref().map(|r| {
        r.iter()
            .map(|(a, b)| (b - a).max(0))
            .try_fold(1i64, |n, e| n.checked_mul(e))
    });
    match (ranges, points) {
        (Some(ranges), Some(Some(n))) if n <= MAX_POINTS => [1, 7].into_iter().any(|outside| {
            let names: Vec<&str> = loops.iter().map(|l| l.var.name.as_str()).collect();
            enumerate(&names, &ranges, body, outside, reducers)
                .unwrap_or_else(|| spelled_apart(body, reducers))
        }),
        _ => spelled_apart(body, reducers),
    }
}

/// Point values of the variables; those from outside the nest at `outside`; `unknown` ones
/// (lets whose value could not be evaluated) have none.
struct Points {
    vars: HashMap<String, i64>,
    unknown: HashSet<String>,
    outside: i64,
}

impl Env for Points {
    fn range(&self, name: &str) -> Option<Interval> {
        if self.unknown.contains(name) {
            return None;
        }
        Some(Interval::point(
            self.vars.get(name).copied().unwrap_or(self.outside),
        ))
    }
}

/// Elements touched per iteration: (buffer, indices) → the iterations that store it,
/// and those that load it.
#[derive(Default)]
struct Touches {
    stores: HashMap<(String, Vec<i64>), HashSet<usize>>,
    loads: HashMap<(String, Vec<i64>), HashSet<usize>>,
}

/// Runs over every iteration; whether two iterations touch one element that one of them
/// stores. `None` when an index cannot be evaluated.
fn enumerate(
    names: &[&str],
    ranges: &[(i64, i64)],
    body: &[Stmt],
    outside: i64,
    reducers: &HashSet<String>,
) -> Option<bool> {
    let mut touches = Touches::default();
    let mut point: Vec<i64> = ranges.iter().map(|r| r.0).collect();
    if ranges.iter().any(|(a, b)| a >= b) {
        return Some(false);
    }
    let mut iteration = 0usize;
    loop {
        let mut env = Points {
            vars: names
                .iter()
                .map(|n| n.to_string())
                .zip(point.iter().copied())
                .collect(),
            unknown: HashSet::new(),
            outside,
        };
        walk(body, &mut env, iteration, &mut touches)?;
        iteration += 1;
        // The next point, the last variable fastest.
        let mut d = point.len();
        loop {
            if d == 0 {
                return Some(conflicts(&touches, reducers));
            }
            d -= 1;
            point[d] += 1;
            if point[d] < ranges[d].1 {
                break;
            }
            point[d] = ranges[d].0;
        }
    }
}

fn conflicts(t: &Touches, reducers: &HashSet<String>) -> bool {
    t.stores.iter().any(|(element, writers)| {
        !reducers.contains(&element.0) && writers.len() > 1
            || t.loads
                .get(element)
                .is_some_and(|readers| readers.iter().any(|r| !writers.contains(r)))
    })
}

fn walk(body: &[Stmt], env: &mut Points, iteration: usize, t: &mut Touches) -> Option<()> {
    for stmt in body {
        for e in stmt_exprs(stmt) {
            let mut bad = false;
            for_each_subexpr(e, &mut |x| {
                if let ExprKind::Load { buffer, indices } = &x.kind {
                    match evaluate(indices, env) {
                        Some(i) => {
                            t.loads
                                .entry((buffer.clone(), i))
                                .or_default()
                                .insert(iteration);
                        }
                        None => bad = true,
                    }
                }
            });
            if bad {
                return None;
            }
        }
        match &stmt.kind {
            StmtKind::Let { var, value, .. } => match interval(value, env).constant() {
                Some(v) => {
                    env.vars.insert(var.name.clone(), v);
                }
                None => {
                    env.unknown.insert(var.name.clone());
                }
            },
            StmtKind::Store {
                buffer, indices, ..
            } => {
                let i = evaluate(indices, env)?;
                t.stores
                    .entry((buffer.name.clone(), i))
                    .or_default()
                    .insert(iteration);
            }
            StmtKind::If {
                then_body,
                else_body,
                ..
            } => {
                walk(then_body, env, iteration, t)?;
                walk(else_body, env, iteration, t)?;
            }
            StmtKind::For(f) => {
                let first = interval(&f.start, env).constant()?;
                env.vars.insert(f.var.name.clone(), first);
                walk(&f.body, env, iteration, t)?;
            }
            StmtKind::While { body, .. } => walk(body, env, iteration, t)?,
            StmtKind::AtomicAdd { .. } | StmtKind::Note(_) => {}
            // Anything else in a nest is not enumerated.
            _ => return None,
        }
    }
    Some(())
}

fn evaluate(indices: &[Expr], env: &Points) -> Option<Vec<i64>> {
    indices
        .iter()
        .map(|e| interval(e, env).constant())
        .collect()
}

/// The fallback: a buffer loaded at indices spelled otherwise than it is stored.
fn spelled_apart(body: &[Stmt], reducers: &HashSet<String>) -> bool {
    let mut stores: Vec<(&str, &[Expr])> = Vec::new();
    let mut loads: Vec<(&str, &[Expr])> = Vec::new();
    for_each_stmt(body, &mut |s| {
        if let StmtKind::Store {
            buffer, indices, ..
        } = &s.kind
        {
            stores.push((buffer.name.as_str(), indices.as_slice()));
        }
        for e in stmt_exprs(s) {
            for_each_subexpr(e, &mut |x| {
                if let ExprKind::Load { buffer, indices } = &x.kind {
                    loads.push((buffer.as_str(), indices.as_slice()));
                }
            });
        }
    });
    stores
        .iter()
        .any(|(b, i)| !reducers.contains(*b) && loads.iter().any(|(c, j)| b == c && i != j))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(store: &str) -> PrimFunc {
        let text = format!(
            "@T.prim_func\ndef f(A: T.Tensor((16, 64), \"float32\"), I: T.Tensor((1024,), \"int32\")):\n    with T.Kernel(2, threads=128) as bx:\n        S = T.alloc_shared((16, 64), \"float32\")\n        T.copy(A, S)\n        for f in T.Parallel(1024):\n            {store}\n        T.copy(S, A)\n"
        );
        tlc_ir::parse(&text).expect("parses")
    }

    #[test]
    fn iterations_that_touch_each_others_elements_conflict() {
        // Found by the campaign: row 0 stores what it reads, the other rows read row 0.
        assert!(parallel_self_conflict(&kernel(
            "S[f // 64, f % 64] = S[f // 1024, f % 64]"
        )));
        // Every iteration stores one element.
        assert!(parallel_self_conflict(&kernel("S[0, 0] = 1.0")));
        // Spelled otherwise, the same element (tests/cases/valid/index_math.tir).
        assert!(!parallel_self_conflict(&kernel(
            "S[f // 64 * 1, f % 64 + 0] = S[(f * 4 + 2) // 4 // 64, (f + 128) % 64] * 2.0"
        )));
        // Through a let, and with a block index from outside the nest.
        assert!(!parallel_self_conflict(&kernel(
            "r = f // 64\n            S[r, f % 64] = S[r + bx - bx, f % 64] + 1.0"
        )));
        // An index read from memory: the spelling decides.
        assert!(parallel_self_conflict(&kernel(
            "S[f // 64, I[f] % 64] = S[f // 64, f % 64]"
        )));
        assert!(!parallel_self_conflict(&kernel(
            "S[f // 64, I[f] % 64] = S[f // 64, I[f] % 64] * 2.0"
        )));
    }
}
