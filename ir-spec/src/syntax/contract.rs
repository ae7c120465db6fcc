//! Contraction: every float32 `a * b + c`, `c + a * b`, `a * b - c` and `c - a * b` of the
//! source becomes one `T.fma` (`a · b ± c` rounded once), as nvcc contracts CUDA — and so
//! TileLang kernels — by default. The rule is C's `FP_CONTRACT ON`: within one expression,
//! where the sum's operand *is* the product (`p = a * b` then `p + c` stays two roundings;
//! so does a product or sum of another dtype, or one behind a `T.cast`). The product on the
//! left is taken first (`a * b + c * d` is `T.fma(a, b, c * d)`), and a difference negates
//! exactly (`a * b - c` is `T.fma(a, b, -c)`, `c - a * b` is `T.fma(-a, b, c)`).
//!
//! Run once by the parser on the whole function (names are unique by then). Every later
//! stage keeps the form: `types::infer` refuses a float32 sum with a float32 product
//! operand (rule E7 of docs/ir.md), so the verifier after every pass catches a pass that
//! builds one, and a printed IR parses back to an equal IR. Why it matters: the FP8 GEMM's
//! promotion `acc += c_block * scale` is one FFMA per element instead of FMUL + FADD.

use crate::dtype::DType;
use crate::ir::{BinOp, Expr, ExprKind, MathFn, PrimFunc, ReducerOp, Stmt, StmtKind, UnOp};
use crate::types::{infer, unify};
use crate::visit::{child_bodies_mut, for_each_stmt, map_body_exprs, map_expr};
use std::collections::HashMap;

/// The dtypes of the function's names, as far as the walk has seen them.
#[derive(Default)]
struct Env {
    vars: HashMap<String, DType>,
    buffers: HashMap<String, DType>,
}

impl Env {
    fn dtype(&self, e: &Expr) -> Option<crate::types::Typed> {
        let var = |n: &str| self.vars.get(n).copied();
        let buf = |n: &str| self.buffers.get(n).copied();
        infer(e, &var, &buf).ok()
    }

    /// `e` with its float32 multiply-adds contracted (bottom-up: an operand is already in
    /// contracted form, so it types).
    fn contract(&self, e: &Expr) -> Expr {
        map_expr(e, &mut |node| self.fuse(node))
    }

    fn fuse(&self, node: Expr) -> Expr {
        let ExprKind::Binary(op @ (BinOp::Add | BinOp::Sub), a, b) = &node.kind else {
            return node;
        };
        let (Some(ta), Some(tb)) = (self.dtype(a), self.dtype(b)) else {
            return node;
        };
        if unify(ta, tb).map(|t| t.dtype) != Ok(DType::Float32) {
            return node;
        }
        let product = |e: &Expr, t: crate::types::Typed| match &e.kind {
            ExprKind::Binary(BinOp::Mul, x, y) if t.dtype == DType::Float32 => {
                Some(((**x).clone(), (**y).clone()))
            }
            _ => None,
        };
        let (x, y, c) = match (product(a, ta), product(b, tb)) {
            (Some((x, y)), _) => {
                let c = (**b).clone();
                let c = if *op == BinOp::Sub {
                    self.negated(c)
                } else {
                    c
                };
                (x, y, c)
            }
            (None, Some((x, y))) => {
                let x = if *op == BinOp::Sub {
                    self.negated(x)
                } else {
                    x
                };
                (x, y, (**a).clone())
            }
            (None, None) => return node,
        };
        Expr::new(ExprKind::Math(MathFn::Fma, vec![x, y, c]), node.span)
    }

    /// `-e` as the float32 value the sum subtracts, exactly. The source converts an operand
    /// to float32 before it subtracts, so an integer (or a narrower float) is converted
    /// first (`-T.cast(u, "float32")`: negated in its own dtype, an unsigned value or int8's
    /// -128 would wrap). A literal float32 holds exactly is negated in place, as the parser
    /// reads `-1.0` (an int `0` becomes `-0.0`, the float the subtraction used); a `T.fma`
    /// by negating its first factor and its addend (round-to-nearest is symmetric), so a
    /// chain of differences does not nest a `-` per level; `-(-x)` of a float32 is `x`.
    fn negated(&self, e: Expr) -> Expr {
        let span = e.span;
        let float32 = |e: &Expr| self.dtype(e).is_some_and(|t| t.dtype == DType::Float32);
        let neg = |e: Expr| Expr::new(ExprKind::Unary(UnOp::Neg, Box::new(e)), span);
        match e.kind {
            ExprKind::Float(v) => Expr::new(ExprKind::Float(-v), span),
            ExprKind::Int(v) if v.unsigned_abs() <= 1 << 24 => {
                Expr::new(ExprKind::Float(-(v as f64)), span)
            }
            ExprKind::Math(MathFn::Fma, args) => match <[Expr; 3]>::try_from(args) {
                Ok([p, q, r]) => {
                    let args = vec![self.negated(p), q, self.negated(r)];
                    Expr::new(ExprKind::Math(MathFn::Fma, args), span)
                }
                Err(args) => neg(Expr::new(ExprKind::Math(MathFn::Fma, args), span)),
            },
            ExprKind::Unary(UnOp::Neg, x) if float32(&x) => *x,
            kind => {
                let e = Expr::new(kind, span);
                if float32(&e) {
                    neg(e)
                } else {
                    neg(Expr::new(ExprKind::Cast(DType::Float32, Box::new(e)), span))
                }
            }
        }
    }
}

/// Contracts every float32 multiply-add of `func` into `T.fma` (see the module doc).
pub fn contract(func: &mut PrimFunc) {
    let mut env = Env::default();
    // Dims and tunables are int32 (as the verifier types them once bound).
    for d in &func.dims {
        env.vars.insert(d.name.clone(), DType::Int32);
    }
    for t in &func.space.tunables {
        for n in &t.names {
            env.vars.insert(n.name.clone(), DType::Int32);
        }
    }
    for p in &func.params {
        env.buffers.insert(p.name.name.clone(), p.dtype);
    }
    // The names' dtypes, in program order: a let's value is typed in its contracted form
    // (its source form may be a float32 sum of a product, which no longer types).
    for_each_stmt(&func.body, &mut |s| match &s.kind {
        StmtKind::Kernel(k) => {
            for a in &k.allocs {
                env.buffers.insert(a.name.name.clone(), a.dtype);
            }
            for v in &k.block_vars {
                env.vars.insert(v.name.clone(), DType::Int32);
            }
        }
        StmtKind::For(f) => {
            env.vars.insert(f.var.name.clone(), DType::Int32);
        }
        StmtKind::Let { var, dtype, value } => {
            let dt = dtype.or_else(|| env.dtype(&env.contract(value)).map(|t| t.dtype));
            if let Some(dt) = dt {
                env.vars.insert(var.name.clone(), dt);
            }
        }
        _ => {}
    });
    map_body_exprs(&mut func.body, &mut |node| env.fuse(node));
    keep_reducer_sums(&mut func.body, &[]);
}

/// Undoes the contraction of the top-level sum of every sum reducer's update
/// `r[idx] = r[idx] + a * b` (`lower-reducers` sums the updates in its own order: the sum
/// is the reducer's combine, not an operation of the element; rule T6 exempts it).
fn keep_reducer_sums(body: &mut [Stmt], sums: &[String]) {
    for stmt in body {
        if let StmtKind::Kernel(k) = &stmt.kind {
            let sums: Vec<String> = k
                .reducers
                .iter()
                .filter(|r| r.op == ReducerOp::Sum)
                .map(|r| r.buffer.name.clone())
                .collect();
            for child in child_bodies_mut(stmt) {
                keep_reducer_sums(child, &sums);
            }
            continue;
        }
        if let StmtKind::Store {
            buffer,
            indices,
            value,
        } = &mut stmt.kind
        {
            if sums.contains(&buffer.name) {
                if let ExprKind::Math(MathFn::Fma, args) = &value.kind {
                    let own = |x: &Expr| {
                        matches!(&x.kind, ExprKind::Load { buffer: n, indices: ix }
                            if *n == buffer.name && ix == indices)
                    };
                    if let [x, y, c] = args.as_slice() {
                        if own(c) {
                            let span = value.span;
                            let product = Expr::binary(BinOp::Mul, x.clone(), y.clone(), span);
                            *value = Expr::binary(BinOp::Add, c.clone(), product, span);
                        }
                    }
                }
            }
        }
        for child in child_bodies_mut(stmt) {
            keep_reducer_sums(child, sums);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::parse::parse;
    use crate::printer::print_func;

    fn body_of(src: &str) -> String {
        let func = match parse(src) {
            Ok(f) => f,
            Err(d) => panic!("parse failed: {d:?}"),
        };
        print_func(&func)
    }

    const HEAD: &str = "import tilelang.language as T\n\n@T.prim_func\ndef f(\n    A: T.Tensor((16,), \"float32\"),\n    B: T.Tensor((16,), \"float32\"),\n    H: T.Tensor((16,), \"float16\"),\n    I: T.Tensor((16,), \"int32\"),\n):\n    with T.Kernel(1, threads=16) as bx:\n        for i in T.Parallel(16):\n";

    fn kernel(line: &str) -> String {
        body_of(&format!("{HEAD}            {line}\n"))
    }

    #[test]
    fn float32_multiply_adds_become_fma() {
        assert!(kernel("A[i] += A[i] * B[i]").contains("A[i] = T.fma(A[i], B[i], A[i])"));
        assert!(kernel("A[i] = B[i] + A[i] * 2.0").contains("T.fma(A[i], 2.0, B[i])"));
        assert!(kernel("A[i] = A[i] * B[i] - 1.0").contains("T.fma(A[i], B[i], -1.0)"));
        assert!(kernel("A[i] -= A[i] * B[i]").contains("T.fma(-A[i], B[i], A[i])"));
        // The left product first; the other stays a product.
        assert!(
            kernel("A[i] = A[i] * B[i] + B[i] * B[i]").contains("T.fma(A[i], B[i], B[i] * B[i])")
        );
    }

    #[test]
    fn other_forms_keep_their_roundings() {
        // Integers, float16, a product behind a cast, a product bound to a name.
        assert!(!kernel("I[i] = I[i] * 3 + 1").contains("fma"));
        assert!(!kernel("H[i] = H[i] * H[i] + H[i]").contains("fma"));
        assert!(!kernel("A[i] = T.cast(H[i] * H[i], \"float32\") + A[i]").contains("fma"));
        let two = body_of(&format!(
            "{HEAD}            p = A[i] * B[i]\n            A[i] = p + 1.0\n"
        ));
        assert!(!two.contains("fma"), "{two}");
    }

    #[test]
    fn a_let_typed_through_its_contracted_value() {
        let text = body_of(&format!(
            "{HEAD}            s = A[i] * B[i] + 1.0\n            A[i] = s * 2.0 + B[i]\n"
        ));
        assert!(text.contains("s = T.fma(A[i], B[i], 1.0)"), "{text}");
        assert!(text.contains("A[i] = T.fma(s, 2.0, B[i])"), "{text}");
    }

    #[test]
    fn negations_convert_integers_and_sink_into_fma() {
        let uints = "import tilelang.language as T\n\n@T.prim_func\ndef f(A: T.Tensor((16,), \"float32\"), U: T.Tensor((16,), \"uint32\")):\n    with T.Kernel(1, threads=16) as bx:\n        for i in T.Parallel(16):\n";
        let text = body_of(&format!("{uints}            A[i] = A[i] * A[i] - U[i]\n"));
        assert!(
            text.contains("T.fma(A[i], A[i], -T.cast(U[i], \"float32\"))"),
            "{text}"
        );
        let text = body_of(&format!("{uints}            A[i] = 1.0 - U[i] * A[i]\n"));
        assert!(
            text.contains("T.fma(-T.cast(U[i], \"float32\"), A[i], 1.0)"),
            "{text}"
        );
        // An int literal: its float32 value negated (0 becomes -0.0); one past float32's
        // exact integers, converted first.
        assert!(kernel("A[i] = A[i] * B[i] - 0").contains("T.fma(A[i], B[i], -0.0)"));
        assert!(kernel("A[i] = A[i] * B[i] - 16777217").contains("-T.cast(16777217, \"float32\")"));
        // A chain of differences: the negation sinks into the inner fma, no `-` per level.
        let text = kernel("A[i] = A[i] * B[i] - (B[i] * B[i] - (A[i] * A[i] - B[i]))");
        assert!(
            text.contains("T.fma(A[i], B[i], T.fma(-B[i], B[i], T.fma(A[i], A[i], -B[i])))"),
            "{text}"
        );
    }

    #[test]
    fn contracted_text_parses_back_equal() {
        for line in [
            "A[i] = B[i] - A[i] * B[i] * 0.5",
            "A[i] = A[i] * B[i] - 1.0",
            "A[i] = A[i] * B[i] - 2",
            "A[i] = A[i] * 3.0 - B[i] * 0.5",
            "A[i] = A[i] - (-9223372036854775808) * B[i]",
            "A[i] = A[i] * B[i] - I[i]",
        ] {
            let text = kernel(line);
            assert!(text.contains("T.fma"), "{text}");
            assert_eq!(text, body_of(&text), "{line}");
        }
    }
}
