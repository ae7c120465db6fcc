//! Where the `T.alloc_local` arrays of thread-level code live. An array whose every access
//! (store, load, intrinsic operand) has constant indices once `T.unroll` / `T.vectorized`
//! loop variables and lets of constants are substituted lives in **registers**, one per
//! element; any other is **indexed at run time** and lives in per-thread local memory. For
//! the run-time indexed arrays, which index lists are provably in bounds (`int::interval`
//! under the ranges of dims, block, thread and loop variables and of integer lets), so code
//! generation bounds only the others.
//!
//! "Constant" is code generation's rule (`codegen::expr::const_eval`): literals, constant
//! variables, negation and the binary operators `tlc_ir::fold_int` folds, of constants.

use super::int::{dim_ranges, enter_kernel, enter_loop, interval, Ranges};
use std::collections::{BTreeSet, HashMap, HashSet};
use tlc_ir::visit::{for_each_subexpr, stmt_exprs};
use tlc_ir::{BinOp, DType, Expr, ExprKind, ForKind, PrimFunc, Scope, Stmt, StmtKind, UnOp};

/// The placement of every local array of a function (names are unique in a function).
#[derive(Clone, Debug, Default)]
pub struct LocalArrays {
    /// Local arrays some access indexes with a value known only at run time.
    runtime_indexed: BTreeSet<String>,
    /// Per run-time indexed array: the index lists proven to lie inside its shape.
    in_bounds: HashMap<String, Vec<Vec<Expr>>>,
    /// Register arrays of 16-bit floats that a `T.wgmma_rs` reads as A and that nothing
    /// but plain stores (outside `T.vectorized` loops) writes: code generation keeps each
    /// (even, odd) pair of them packed in a register of its own as well.
    packed: BTreeSet<String>,
}

impl LocalArrays {
    /// Whether local array `name` is indexed at run time somewhere (it lives in memory).
    pub fn runtime_indexed(&self, name: &str) -> bool {
        self.runtime_indexed.contains(name)
    }

    /// Whether register array `name` keeps its (even, odd) pairs packed (`packed`).
    pub fn packed(&self, name: &str) -> bool {
        self.packed.contains(name)
    }

    /// The run-time indexed local arrays, by name.
    pub fn runtime_indexed_names(&self) -> impl Iterator<Item = &str> {
        self.runtime_indexed.iter().map(String::as_str)
    }

    /// Whether `name[indices]` is proven in bounds (every index within its extent for
    /// every value of its variables). Known only for run-time indexed arrays.
    pub fn in_bounds(&self, name: &str, indices: &[Expr]) -> bool {
        self.in_bounds
            .get(name)
            .is_some_and(|all| all.iter().any(|i| i.as_slice() == indices))
    }
}

/// The local arrays of `func`'s kernels and where they live.
pub fn local_arrays(func: &PrimFunc) -> LocalArrays {
    let mut walk = Walk {
        extents: HashMap::new(),
        consts: HashSet::new(),
        ranges: dim_ranges(func),
        accesses: Vec::new(),
    };
    for s in &func.body {
        if let StmtKind::Kernel(k) = &s.kind {
            enter_kernel(&mut walk.ranges, k);
            for a in k.allocs.iter().filter(|a| a.scope == Scope::Local) {
                let shape = a.shape.iter().map(Expr::as_int).collect();
                walk.extents.insert(a.name.name.clone(), shape);
            }
            walk.body(&k.body);
        }
    }
    let mut out = LocalArrays::default();
    let (mut register_a, mut other_writes) = (BTreeSet::new(), BTreeSet::new());
    for s in &func.body {
        if let StmtKind::Kernel(k) = &s.kind {
            writers(&k.body, false, (&mut register_a, &mut other_writes));
            for a in &k.allocs {
                let half = matches!(a.dtype, DType::Float16 | DType::BFloat16);
                if !(half && a.scope == Scope::Local) {
                    other_writes.insert(a.name.name.clone());
                }
            }
        }
    }
    out.packed = register_a.difference(&other_writes).cloned().collect();
    for (name, _, constant) in &walk.accesses {
        if !constant {
            out.runtime_indexed.insert(name.clone());
        }
    }
    for name in &out.runtime_indexed {
        out.packed.remove(name);
    }
    for (name, indices, _) in walk.accesses {
        if !out.runtime_indexed.contains(&name) {
            continue;
        }
        let proven = walk.extents.get(&name).is_some_and(|shape| {
            shape.len() == indices.len()
                && indices.iter().zip(shape).all(|(i, d)| {
                    let r = interval(i, &walk.ranges);
                    d.is_some_and(|d| r.lo >= 0 && r.hi < d)
                })
        });
        let known = out.in_bounds.entry(name).or_default();
        if proven && !known.contains(&indices) {
            known.push(indices);
        }
    }
    out
}

/// Collects the buffers `T.wgmma_rs` reads as A (`register_a`) and those written otherwise
/// than by a plain store outside `T.vectorized` loops (`other`), in `body` (`vectorized`:
/// inside such a loop).
fn writers(body: &[Stmt], vectorized: bool, sets: (&mut BTreeSet<String>, &mut BTreeSet<String>)) {
    let (register_a, other) = sets;
    for s in body {
        match &s.kind {
            StmtKind::Store { buffer, .. } if vectorized => {
                other.insert(buffer.name.clone());
            }
            StmtKind::AtomicAdd { buffer, .. } => {
                other.insert(buffer.name.clone());
            }
            StmtKind::AllReduce(r) => {
                other.insert(r.buffer.name.clone());
            }
            StmtKind::Intrinsic(i) => {
                if let tlc_ir::Intrinsic::WgmmaRs { a, .. } = i {
                    register_a.insert(a.buffer.name.clone());
                }
                for a in i.accesses() {
                    if a.effect.writes() {
                        other.insert(a.operand.buffer.name.clone());
                    }
                }
            }
            _ => {}
        }
        let inner =
            vectorized || matches!(&s.kind, StmtKind::For(f) if f.kind == ForKind::Vectorized);
        for child in tlc_ir::visit::child_bodies(s) {
            writers(child, inner, (&mut *register_a, &mut *other));
        }
    }
}

/// The state of the walk over a kernel body.
struct Walk {
    /// Each local array's extents (`None`: not a constant).
    extents: HashMap<String, Vec<Option<i64>>>,
    /// Variables that are constants once unrolled loops are unrolled.
    consts: HashSet<String>,
    /// Ranges of integer variables (names are unique: no scoping needed).
    ranges: Ranges,
    /// Every local array access: name, indices, whether all indices are constant.
    accesses: Vec<(String, Vec<Expr>, bool)>,
}

impl Walk {
    fn body(&mut self, body: &[Stmt]) {
        for s in body {
            self.stmt(s);
        }
    }

    fn stmt(&mut self, s: &Stmt) {
        for e in stmt_exprs(s) {
            self.loads(e);
        }
        match &s.kind {
            StmtKind::Store {
                buffer, indices, ..
            }
            | StmtKind::AtomicAdd {
                buffer, indices, ..
            } => self.access(&buffer.name, indices),
            StmtKind::AllReduce(r) => self.access(&r.buffer.name, &r.indices),
            StmtKind::Intrinsic(i) => {
                for op in i.operands() {
                    self.access(&op.buffer.name, &op.indices);
                }
            }
            StmtKind::Let { var, dtype, value } => {
                if dtype.is_none_or(|d| d == DType::Int32) && self.constant(value) {
                    self.consts.insert(var.name.clone());
                }
                let r = interval(value, &self.ranges);
                self.ranges.insert(var.name.clone(), r);
            }
            StmtKind::For(f) => {
                let unrolled = matches!(f.kind, ForKind::Unroll | ForKind::Vectorized);
                if unrolled && self.constant(&f.start) && self.constant(&f.stop) {
                    self.consts.insert(f.var.name.clone());
                }
                enter_loop(&mut self.ranges, f);
                self.body(&f.body);
            }
            StmtKind::If {
                then_body,
                else_body,
                ..
            } => {
                self.body(then_body);
                self.body(else_body);
            }
            StmtKind::While { body, .. } => self.body(body),
            StmtKind::Kernel(k) => self.body(&k.body),
            StmtKind::Copy { .. }
            | StmtKind::Fill { .. }
            | StmtKind::Gemm(_)
            | StmtKind::Reduce(_)
            | StmtKind::Barrier
            | StmtKind::GridSync
            | StmtKind::Note(_)
            | StmtKind::Fresh(_)
            | StmtKind::FinalizeReducer(_) => {}
        }
    }

    /// Records the local array loads anywhere in `e` (nested ones included).
    fn loads(&mut self, e: &Expr) {
        let mut found = Vec::new();
        for_each_subexpr(e, &mut |x| {
            if let ExprKind::Load { buffer, indices } = &x.kind {
                found.push((buffer.clone(), indices.clone()));
            }
        });
        for (buffer, indices) in found {
            self.access(&buffer, &indices);
        }
    }

    fn access(&mut self, buffer: &str, indices: &[Expr]) {
        if self.extents.contains_key(buffer) {
            let constant = indices.iter().all(|i| self.constant(i));
            self.accesses
                .push((buffer.to_string(), indices.to_vec(), constant));
        }
    }

    /// Whether `e` is a constant once unrolled loop variables are substituted.
    fn constant(&self, e: &Expr) -> bool {
        match &e.kind {
            ExprKind::Int(_) => true,
            ExprKind::Var(n) => self.consts.contains(n),
            ExprKind::Unary(UnOp::Neg, a) => self.constant(a),
            ExprKind::Binary(op, a, b) => folds(*op) && self.constant(a) && self.constant(b),
            _ => false,
        }
    }
}

/// The operators `tlc_ir::fold_int` folds.
fn folds(op: BinOp) -> bool {
    matches!(
        op,
        BinOp::Add
            | BinOp::Sub
            | BinOp::Mul
            | BinOp::Div
            | BinOp::FloorDiv
            | BinOp::FloorMod
            | BinOp::CeilDiv
            | BinOp::Min
            | BinOp::Max
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn analyze(body: &str) -> LocalArrays {
        let src = format!(
            "@T.prim_func\ndef f(A: T.Tensor((64,), \"int32\"), B: T.Tensor((64,), \"float32\")):\n    with T.Kernel(2, threads=32) as bx:\n        acc = T.alloc_local((4,), \"float32\")\n        m = T.alloc_local((2, 3), \"float32\")\n{body}"
        );
        let func = tlc_ir::parse(&src).unwrap_or_else(|d| panic!("{d:?}"));
        local_arrays(&func)
    }

    fn idx(text: &[&str]) -> Vec<Expr> {
        text.iter()
            .map(|t| {
                let src = format!(
                    "@T.prim_func\ndef g(A: T.Tensor((64,), \"int32\")):\n    with T.Kernel(1, threads=1) as bx:\n        A[0] = {t}\n"
                );
                let func = tlc_ir::parse(&src).unwrap_or_else(|d| panic!("{d:?}"));
                let mut out = None;
                tlc_ir::visit::for_each_stmt(&func.body, &mut |s| {
                    if let StmtKind::Store { value, .. } = &s.kind {
                        out = Some(value.clone());
                    }
                });
                out.unwrap_or_else(|| Expr::int(-1))
            })
            .collect()
    }

    #[test]
    fn constant_indices_after_unrolling_stay_in_registers() {
        let a = analyze(
            "        for u in T.unroll(4):\n            acc[u] = 0.0\n        for r in T.unroll(1, 3):\n            k = r - 1\n            for c in T.unroll(r):\n                m[k, c + 1] = acc[c * 2 // 2]\n",
        );
        assert!(!a.runtime_indexed("acc"));
        assert!(!a.runtime_indexed("m"));
        assert_eq!(a.runtime_indexed_names().count(), 0);
    }

    #[test]
    fn one_runtime_index_puts_the_whole_array_in_memory() {
        let a = analyze(
            "        for u in T.unroll(4):\n            acc[u] = 0.0\n        for i in T.serial(4):\n            B[i] = acc[i]\n        m[0, 0] = 1.0\n",
        );
        assert!(a.runtime_indexed("acc"));
        assert!(!a.runtime_indexed("m"));
        // `i` lies in [0, 4) and `u` in [0, 3]: both in bounds; `m` is not in memory.
        assert!(a.in_bounds("acc", &idx(&["i"])));
        assert!(a.in_bounds("acc", &idx(&["u"])));
        assert!(!a.in_bounds("m", &idx(&["0", "0"])));
    }

    #[test]
    fn indices_that_may_leave_the_array_are_not_in_bounds() {
        let a = analyze(
            "        for i in T.serial(5):\n            acc[i] = 0.0\n        for t in T.thread_binding(32, thread=\"threadIdx.x\"):\n            m[t // 16, A[t] % 3] = acc[t % 4]\n            B[t] = m[1, t - 30]\n",
        );
        assert!(a.runtime_indexed("acc"));
        assert!(a.runtime_indexed("m"));
        assert!(!a.in_bounds("acc", &idx(&["i"])));
        assert!(a.in_bounds("acc", &idx(&["t % 4"])));
        // A load's value is unknown, but `% 3` bounds it; `t // 16` is 0 or 1.
        assert!(a.in_bounds("m", &idx(&["t // 16", "A[t] % 3"])));
        assert!(!a.in_bounds("m", &idx(&["1", "t - 30"])));
    }

    #[test]
    fn lets_of_constants_are_constants_and_others_are_not() {
        let a = analyze(
            "        j = 2\n        acc[j + 1] = 0.0\n        n: T.int32 = bx\n        m[0, n] = 0.0\n",
        );
        assert!(!a.runtime_indexed("acc"));
        assert!(a.runtime_indexed("m"));
        // bx lies in [0, 2): in bounds of the extent 3.
        assert!(a.in_bounds("m", &idx(&["0", "n"])));
    }
}
