//! `uniform` — which per-thread (`local`) buffers hold block-uniform values: the one
//! definition of "a scalar every thread of the block agrees on" for buffers.
//!
//! A local buffer is per thread, so reading one makes a value thread-dependent in general.
//! TileLang's scalar variables (`T.alloc_var`, or a `(1,)` local buffer as the stream-K
//! example writes `start_iter[0] = ...`) are local buffers too, yet written only by the
//! block-level scalar code that every thread runs alike. Such a buffer is **uniform**: every
//! thread holds the same values in it, so it may drive block-level control flow (loop
//! bounds, conditions around SIMT regions and barriers) and tile-op regions.
//!
//! The rule: a local buffer is uniform when it is written, and every write of it is a plain
//! store made in
//! block-level code (outside `T.Parallel` loops and SIMT regions, not by a tile op or an
//! intrinsic), whose indices and value are uniform, under block-level conditions and loop
//! bounds that are uniform. A value is uniform unless it mentions a thread variable (a
//! `T.Parallel` or thread-binding loop variable), a let bound to a non-uniform value, or a
//! load of a per-thread buffer (fragment, or local that is not uniform). Loads of global
//! and shared memory at uniform addresses are uniform (every thread reads the same element).
//! Computed as a greatest fixpoint: all candidates are assumed uniform, and a buffer with a
//! write that is not uniform under that assumption is dropped, until nothing changes — by
//! induction over the execution, the surviving buffers' values agree in every thread.

use crate::analysis::access::Access;
use std::collections::HashSet;
use tlc_ir::visit::for_each_subexpr;
use tlc_ir::{Expr, ExprKind, ForKind, Kernel, Scope, Stmt, StmtKind};

/// The per-thread buffers of kernel `k`: its fragments and local buffers.
pub fn private_buffers(k: &Kernel) -> HashSet<String> {
    k.allocs
        .iter()
        .filter(|a| matches!(a.scope, Scope::Local | Scope::Fragment))
        .map(|a| a.name.name.clone())
        .collect()
}

/// The uniform local buffers of kernel `k` (any level).
pub fn uniform_locals(k: &Kernel) -> HashSet<String> {
    let private = private_buffers(k);
    // A never-written buffer holds whatever each thread's registers held: not uniform.
    let written = Access::of_body(&k.body).writes;
    let mut uniform: HashSet<String> = k
        .allocs
        .iter()
        .filter(|a| a.scope == Scope::Local && written.contains(&a.name.name))
        .map(|a| a.name.name.clone())
        .collect();
    loop {
        let mut w = Walk {
            private: &private,
            uniform: &uniform,
            dependent: HashSet::new(),
            dropped: HashSet::new(),
        };
        w.body(&k.body, false);
        if w.dropped.is_empty() {
            return uniform;
        }
        for b in &w.dropped {
            uniform.remove(b);
        }
    }
}

/// What makes a value of kernel `k` block-uniform: its per-thread buffers, the uniform
/// ones among them, and the variables that may differ between threads.
pub struct Uniformity {
    private: HashSet<String>,
    uniform: HashSet<String>,
    dependent: HashSet<String>,
}

impl Uniformity {
    pub fn of(k: &Kernel) -> Uniformity {
        let private = private_buffers(k);
        let uniform = uniform_locals(k);
        // One more walk under the settled buffers collects the thread-dependent variables.
        let mut w = Walk {
            private: &private,
            uniform: &uniform,
            dependent: HashSet::new(),
            dropped: HashSet::new(),
        };
        w.body(&k.body, false);
        let dependent = w.dependent;
        Uniformity {
            private,
            uniform,
            dependent,
        }
    }

    /// Whether `e` has one value in every thread of the block ([`is_uniform`]).
    pub fn holds(&self, e: &Expr) -> bool {
        is_uniform(e, &self.private, &self.uniform, &self.dependent)
    }
}

/// Whether `e` is uniform, given the uniform local buffers and the thread-dependent
/// variables (`dependent`).
pub fn is_uniform(
    e: &Expr,
    private: &HashSet<String>,
    uniform: &HashSet<String>,
    dependent: &HashSet<String>,
) -> bool {
    let mut ok = true;
    for_each_subexpr(e, &mut |s| match &s.kind {
        ExprKind::Var(v) => ok &= !dependent.contains(v),
        ExprKind::Load { buffer, .. } => {
            ok &= !private.contains(buffer) || uniform.contains(buffer);
        }
        _ => {}
    });
    ok
}

struct Walk<'a> {
    private: &'a HashSet<String>,
    uniform: &'a HashSet<String>,
    /// Variables that may differ between threads: thread variables, and lets of such values.
    dependent: HashSet<String>,
    /// Uniform candidates with a write that is not uniform.
    dropped: HashSet<String>,
}

impl Walk<'_> {
    fn uniform(&self, e: &Expr) -> bool {
        is_uniform(e, self.private, self.uniform, &self.dependent)
    }

    /// `per_thread`: inside a `T.Parallel` loop or a SIMT region, or under a condition or
    /// loop bound that is not uniform.
    fn body(&mut self, body: &[Stmt], per_thread: bool) {
        for s in body {
            self.stmt(s, per_thread);
        }
    }

    fn stmt(&mut self, s: &Stmt, per_thread: bool) {
        match &s.kind {
            StmtKind::Store {
                buffer,
                indices,
                value,
            } => {
                let ok =
                    !per_thread && indices.iter().all(|i| self.uniform(i)) && self.uniform(value);
                if !ok && self.uniform.contains(&buffer.name) {
                    self.dropped.insert(buffer.name.clone());
                }
            }
            StmtKind::Let { var, value, .. } => {
                if per_thread || !self.uniform(value) {
                    self.dependent.insert(var.name.clone());
                }
            }
            StmtKind::For(f) => {
                let thread_loop = matches!(f.kind, ForKind::Parallel | ForKind::ThreadBinding(_));
                let inner =
                    per_thread || thread_loop || !self.uniform(&f.start) || !self.uniform(&f.stop);
                if inner {
                    self.dependent.insert(f.var.name.clone());
                }
                self.body(&f.body, inner);
            }
            StmtKind::If {
                cond,
                then_body,
                else_body,
            } => {
                let inner = per_thread || !self.uniform(cond);
                self.body(then_body, inner);
                self.body(else_body, inner);
            }
            StmtKind::Kernel(k) => self.body(&k.body, per_thread),
            _ => {
                // Tile ops, atomic adds and intrinsics: any local buffer they write is
                // written element by element per thread.
                let mut acc = Access::default();
                acc.add_stmt(s);
                for b in &acc.writes {
                    if self.uniform.contains(b) {
                        self.dropped.insert(b.clone());
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uniform_of(src: &str) -> Vec<String> {
        let f = tlc_ir::parse::parse(src).expect("parses");
        let StmtKind::Kernel(k) = &f.body[0].kind else {
            panic!("a kernel")
        };
        let mut v: Vec<String> = uniform_locals(k).into_iter().collect();
        v.sort();
        v
    }

    #[test]
    fn block_level_scalars_from_uniform_values_are_uniform() {
        let src = r#"
@T.prim_func
def f(A: T.Tensor((64,), "int32"), B: T.Tensor((64,), "float32")):
    with T.Kernel(4, threads=32) as bx:
        off = T.alloc_local((1,), "int32")
        cnt = T.alloc_local((1,), "int32")
        acc = T.alloc_local((1,), "float32")
        tid = T.alloc_local((1,), "int32")
        derived = T.alloc_local((1,), "int32")
        off[0] = 0
        for i in T.serial(bx):
            off[0] = off[0] + A[i]
        cnt[0] = off[0] * 2
        for j in T.Parallel(32):
            acc[0] = B[j]
            tid[0] = j
        derived[0] = tid[0] + 1
        for j2 in T.Parallel(32):
            B[off[0] + j2] = T.cast(cnt[0] + derived[0], "float32")
"#;
        assert_eq!(uniform_of(src), vec!["cnt".to_string(), "off".to_string()]);
    }

    #[test]
    fn a_store_under_a_thread_dependent_condition_is_not_uniform() {
        let src = r#"
@T.prim_func
def f(A: T.Tensor((64,), "int32")):
    with T.Kernel(4, threads=32) as bx:
        x = T.alloc_local((1,), "int32")
        y = T.alloc_local((1,), "int32")
        x[0] = 0
        for j in T.Parallel(32):
            x[0] = A[j]
        y[0] = 1
        if x[0] > 0:
            y[0] = 2
        for j2 in T.Parallel(32):
            A[j2] = y[0]
"#;
        assert_eq!(uniform_of(src), Vec::<String>::new());
    }

    #[test]
    fn lets_of_per_thread_values_are_not_uniform() {
        let src = r#"
@T.prim_func
def f(A: T.Tensor((64,), "int32")):
    with T.Kernel(4, threads=32) as bx:
        x = T.alloc_local((1,), "int32")
        x[0] = 0
        for j in T.Parallel(32):
            x[0] = A[j]
        lo = bx * 2 + A[bx]
        mine = x[0] + 1
        for j2 in T.Parallel(32):
            A[j2] = lo + mine
"#;
        let f = tlc_ir::parse::parse(src).expect("parses");
        let StmtKind::Kernel(k) = &f.body[0].kind else {
            panic!("a kernel")
        };
        let u = Uniformity::of(k);
        assert!(u.holds(&Expr::var("lo")));
        assert!(u.holds(&Expr::var("bx")));
        assert!(!u.holds(&Expr::var("mine")));
        assert!(!u.holds(&Expr::var("j2")));
    }
}
