//! One test per accepted construct: what it parses to, and which spellings are equal.

use tlc_ir::{
    parse, printer::print_func, BinOp, DType, ElemRef, Expr, ExprKind, ForKind, Intrinsic, Kernel,
    Layout, PrimFunc, RasterOrder, Region, Scope, Span, Stmt, StmtKind, ThreadTag, UnOp,
    WarpPolicy,
};

fn ok(src: &str) -> PrimFunc {
    match parse(src) {
        Ok(f) => f,
        Err(errors) => {
            let msgs: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
            panic!("failed to parse:\n{src}\n{}", msgs.join("\n"))
        }
    }
}

/// A function with buffers A (128x64 fp16), B (64x128 fp16), C (128x128 fp32) and one
/// kernel whose body is `body` (written at 8 spaces).
fn wrap(body: &str) -> String {
    let mut s = String::from(
        "@T.prim_func\ndef f(\n    A: T.Tensor((128, 64), \"float16\"),\n    B: T.Tensor((64, 128), \"float16\"),\n    C: T.Tensor((128, 128), \"float32\"),\n):\n    with T.Kernel(4, 2, threads=128) as (bx, by):\n",
    );
    for line in body.lines() {
        s.push_str("        ");
        s.push_str(line);
        s.push('\n');
    }
    s
}

fn kernel(f: &PrimFunc) -> &Kernel {
    match f.body.first().map(|s| &s.kind) {
        Some(StmtKind::Kernel(k)) => k,
        other => panic!("expected a kernel, got {other:?}"),
    }
}

fn body(src: &str) -> Vec<Stmt> {
    kernel(&ok(&wrap(src))).body.clone()
}

fn same(a: &str, b: &str) {
    assert_eq!(ok(&wrap(a)), ok(&wrap(b)), "\n{a}\n  vs\n{b}");
}

fn d() -> Span {
    Span::DUMMY
}

fn bin(op: BinOp, a: Expr, b: Expr) -> Expr {
    Expr::new(ExprKind::Binary(op, Box::new(a), Box::new(b)), d())
}

/// The expression of `x = <e>`.
fn expr(e: &str) -> Expr {
    match body(&format!("x = {e}")).as_slice() {
        [Stmt {
            kind: StmtKind::Let { value, .. },
            ..
        }] => value.clone(),
        other => panic!("{other:?}"),
    }
}

fn region(stmt: &Stmt) -> (&Region, &Region) {
    match &stmt.kind {
        StmtKind::Copy { src, dst } => (src, dst),
        other => panic!("expected copy, got {other:?}"),
    }
}

fn ranges(r: &Region) -> Vec<(Expr, Expr)> {
    r.ranges
        .iter()
        .map(|x| (x.start.clone(), x.extent.clone()))
        .collect()
}

#[test]
fn symbolic_dims_and_params() {
    let f = ok("import tilelang.language as T\nfrom tvm.script import tir as T\n\nM = T.symbolic(\"M\")\nN = T.symbolic(\"N\")\n\n@T.prim_func\ndef g(A: T.Tensor((M, 128), \"bfloat16\"), X: T.Buffer([N], T.int8)):\n    with T.Kernel(T.ceildiv(M, 128), threads=256) as bx:\n        pass\n");
    let dims: Vec<&str> = f.dims.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(dims, ["M", "N"]);
    assert_eq!(f.params[0].shape, vec![Expr::var("M"), Expr::int(128)]);
    assert_eq!(f.params[0].dtype, DType::BFloat16);
    assert_eq!(f.params[1].shape, vec![Expr::var("N")]);
    assert_eq!(f.params[1].dtype, DType::Int8);
    let k = kernel(&f);
    assert_eq!(
        k.grid,
        vec![bin(BinOp::CeilDiv, Expr::var("M"), Expr::int(128))]
    );
    assert!(k.body.is_empty());
}

/// An int64 dim: its dtype is kept, typed into expressions, and printed back.
#[test]
fn int64_symbolic_dims_round_trip() {
    let src = "M = T.symbolic(\"M\")\nN = T.symbolic(\"N\", \"int64\")\n\n@T.prim_func\ndef g(\n    A: T.Tensor((M, N), \"float32\"),\n):\n    with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:\n        for i in T.Parallel(128):\n            if bx * 128 + i < N:\n                A[0, bx * 128 + i] = 0.0\n";
    let f = ok(src);
    let dtypes: Vec<DType> = f.dims.iter().map(|d| d.dtype).collect();
    assert_eq!(dtypes, [DType::Int32, DType::Int64]);
    let info = tlc_ir::verifier::verify(&f).expect("verifies");
    assert_eq!(info.vars.get("N"), Some(&DType::Int64));
    assert_eq!(tlc_ir::printer::print_func(&f), src);
}

/// `multiple_of=` on a symbolic dim (also through `T.dynamic`, several names at once) is
/// printed after the dtype and parses back equal; `-D` of another value is refused.
#[test]
fn symbolic_dims_with_multiples_round_trip() {
    let src = "M = T.symbolic(\"M\", multiple_of=8)\nN = T.symbolic(\"N\", \"int64\", multiple_of=4)\n\n@T.prim_func\ndef g(\n    A: T.Tensor((M, N), \"float32\"),\n):\n    with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:\n        for i in T.Parallel(128):\n            if bx * 128 + i < N:\n                A[0, bx * 128 + i] = 0.0\n";
    let f = ok(src);
    let multiples: Vec<i64> = f.dims.iter().map(|d| d.multiple_of).collect();
    assert_eq!(multiples, [8, 4]);
    assert_eq!(tlc_ir::printer::print_func(&f), src);
    let dynamic = src.replace(
        "M = T.symbolic(\"M\", multiple_of=8)\nN = T.symbolic(\"N\", \"int64\", multiple_of=4)",
        "M = T.symbolic(\"M\", multiple_of=8)\nN = T.dynamic(\"N\", \"int64\", multiple_of=4)",
    );
    assert_eq!(ok(&dynamic), f);
    assert!(tlc_ir::specialize::specialize(&f, &[("M".to_string(), 16)]).is_ok());
    let err = tlc_ir::specialize::specialize(&f, &[("M".to_string(), 12)]).unwrap_err();
    assert!(err.to_string().contains("not a multiple of 8"), "{err}");
}

/// `T.copy(..., disable_tma=True)` with a global side is the element nest it means (never
/// TMA); `False`, or a copy between on-chip buffers, stays a `T.copy`.
#[test]
fn copies_without_tma_are_their_element_nests() {
    let b = body(
        "A_s = T.alloc_shared((128, 64), \"float16\")\nT.copy(A, A_s, disable_tma=True)\nT.copy(A, A_s, disable_tma=False)\nT.copy(A_s, A_s, disable_tma=True)",
    );
    assert!(matches!(b[0].kind, StmtKind::For(_)), "{:?}", b[0].kind);
    assert!(matches!(b[1].kind, StmtKind::Copy { .. }));
    assert!(matches!(b[2].kind, StmtKind::Copy { .. }));
}

/// A macro whose body is lets and a `return` is a value where it is called: its value with
/// the arguments and lets substituted (nested value macros too).
#[test]
fn value_macros_are_their_substituted_expressions() {
    let macros = "@T.macro\ndef half(x):\n    return x // 2\n\n@T.macro\ndef mix(a, b) -> T.int32:\n    s = a + b\n    t = s * 3\n    return half(t) - a\n\n";
    let kernel = "@T.prim_func\ndef f(A: T.Tensor((64,), \"int32\")):\n    with T.Kernel(1, threads=64) as bx:\n        for i in T.Parallel(64):\n            A[i] = mix(A[i], i + 1)\n";
    let expanded = "@T.prim_func\ndef f(A: T.Tensor((64,), \"int32\")):\n    with T.Kernel(1, threads=64) as bx:\n        for i in T.Parallel(64):\n            A[i] = ((A[i] + (i + 1)) * 3) // 2 - A[i]\n";
    assert_eq!(ok(&format!("{macros}{kernel}")), ok(expanded));
}

/// `T.reinterpret` in TVM's order (dtype, value) and TileLang's (value, dtype) is one IR.
#[test]
fn reinterpret_takes_either_argument_order() {
    same(
        "x = T.reinterpret(T.float32(1.5), \"uint32\")",
        "x = T.reinterpret(\"uint32\", T.float32(1.5))",
    );
    same(
        "x = T.reinterpret(T.float32(1.5), T.uint32)",
        "x = T.reinterpret(T.uint32, T.float32(1.5))",
    );
}

/// `T.clear(v)` / `T.fill(v, x)` on a `T.alloc_var` scalar is the assignment `v = 0` /
/// `v = x` (TileLang's combine kernels clear their scalars so).
#[test]
fn fills_of_scalar_variables_are_assignments() {
    same(
        "v = T.alloc_var(\"float32\")\nw = T.alloc_var(\"int32\")\nT.clear(v)\nT.fill(w, 3)",
        "v = T.alloc_var(\"float32\")\nw = T.alloc_var(\"int32\")\nv = 0\nw = 3",
    );
}

/// Python's conditional expression is `T.if_then_else` (right-associative, as in Python).
#[test]
fn conditional_expressions_are_if_then_else() {
    same(
        "x = 1.0 if bx < 2 else 2.0 if by < 1 else 3.0",
        "x = T.if_then_else(bx < 2, 1.0, T.if_then_else(by < 1, 2.0, 3.0))",
    );
}

#[test]
fn function_without_params() {
    let f = ok("@T.prim_func\ndef g():\n    with T.Kernel(1) as bx:\n        pass\n");
    assert!(f.params.is_empty());
    // TileLang's default block: 128 threads.
    assert_eq!(kernel(&f).threads, vec![Expr::int(128)]);
}

#[test]
fn kernel_shapes() {
    let f = ok("@T.prim_func\ndef g():\n    with T.Kernel(2, 3, 4, threads=(32, 4)) as (x, y, z):\n        pass\n");
    let k = kernel(&f);
    assert_eq!(k.grid, vec![Expr::int(2), Expr::int(3), Expr::int(4)]);
    assert_eq!(k.threads, vec![Expr::int(32), Expr::int(4)]);
    let f2 = ok("@T.prim_func\ndef g():\n    with T.Kernel(2, 3, 4, threads=[32, 4, 1]) as (x, y, z,):\n        pass\n");
    assert_eq!(f, f2);
}

#[test]
fn allocations_are_hoisted_in_order() {
    let f = ok(&wrap(
        "S = T.alloc_shared((128, 64), \"float16\")\nfor i in T.serial(2):\n    L = T.alloc_local((4,))\n    F = T.alloc_fragment([16, 16], T.float32)\n",
    ));
    let k = kernel(&f);
    let allocs: Vec<(&str, Scope, DType, usize)> = k
        .allocs
        .iter()
        .map(|a| (a.name.name.as_str(), a.scope, a.dtype, a.shape.len()))
        .collect();
    assert_eq!(
        allocs,
        [
            ("S", Scope::Shared, DType::Float16, 2),
            ("L", Scope::Local, DType::Float32, 1),
            ("F", Scope::Fragment, DType::Float32, 2),
        ]
    );
    // The loop remains, with an empty body.
    assert!(matches!(&k.body[0].kind, StmtKind::For(l) if l.body.is_empty()));
}

#[test]
fn fill_and_clear() {
    let b = body("T.clear(C)\nT.fill(C, 1.5)\nT.fill(C[0:64, :], T.float32(0))");
    assert!(matches!(&b[0].kind, StmtKind::Fill { value, .. } if *value == Expr::int(0)));
    let StmtKind::Fill { dst, value } = &b[1].kind else {
        panic!()
    };
    assert_eq!(*value, Expr::new(ExprKind::Float(1.5), d()));
    assert_eq!(
        ranges(dst),
        vec![
            (Expr::int(0), Expr::int(128)),
            (Expr::int(0), Expr::int(128))
        ]
    );
    let StmtKind::Fill { dst, value } = &b[2].kind else {
        panic!()
    };
    assert_eq!(
        ranges(dst),
        vec![
            (Expr::int(0), Expr::int(64)),
            (Expr::int(0), Expr::int(128))
        ]
    );
    // TVMScript's typed literal of the buffer's dtype is the plain literal.
    assert_eq!(*value, Expr::int(0));
    same("T.clear(C)", "T.fill(C, 0)");
    same("T.fill(C, T.float32(1.5))", "T.fill(C, 1.5)");
}

#[test]
fn copy_whole_corner_and_slice_forms() {
    let b = body("S = T.alloc_shared((32, 64), \"float16\")\nT.copy(A[bx * 32, 0], S)\nT.copy(S, A[bx * 32, 0])");
    let (src, dst) = region(&b[0]);
    assert_eq!(
        ranges(src),
        vec![
            (
                bin(BinOp::Mul, Expr::var("bx"), Expr::int(32)),
                Expr::int(32)
            ),
            (Expr::int(0), Expr::int(64))
        ]
    );
    assert_eq!(
        ranges(dst),
        vec![(Expr::int(0), Expr::int(32)), (Expr::int(0), Expr::int(64))]
    );
    let (_, dst) = region(&b[1]);
    assert_eq!(dst.buffer.name, "A");
    assert_eq!(ranges(dst)[0].1, Expr::int(32));
    // The corner form equals the slice forms.
    same(
        "S = T.alloc_shared((32, 64), \"float16\")\nT.copy(A[bx * 32, 0], S)",
        "S = T.alloc_shared((32, 64), \"float16\")\nT.copy(A[bx * 32:bx * 32 + 32, 0:64], S[0:32, 0:64])",
    );
    same(
        "S = T.alloc_shared((32, 64), \"float16\")\nT.copy(A[0, 0], S)",
        "S = T.alloc_shared((32, 64), \"float16\")\nT.copy(A[:32, :], S)",
    );
}

#[test]
fn slice_extent_rule() {
    let b = body("T.copy(A[bx:by, 3:10], C[0:by - bx, 0:7])");
    let (src, _) = region(&b[0]);
    assert_eq!(
        ranges(src),
        vec![
            (
                Expr::var("bx"),
                bin(BinOp::Sub, Expr::var("by"), Expr::var("bx"))
            ),
            (Expr::int(3), Expr::int(7)),
        ]
    );
}

#[test]
fn corner_rule_alignment() {
    // A 1-D corner of a 2-D region whose leading extent is 1 takes the trailing extent.
    let b = body(
        "L = T.alloc_local((64,), \"float16\")\nT.copy(A[bx, 0:64], L[0])\nT.copy(L, A[bx, 0])",
    );
    let (_, dst) = region(&b[0]);
    assert_eq!(ranges(dst), vec![(Expr::int(0), Expr::int(64))]);
    // A 2-D corner of a 1-D operand gets a leading 1.
    let (_, dst) = region(&b[1]);
    assert_eq!(
        ranges(dst),
        vec![
            (Expr::var("bx"), Expr::int(1)),
            (Expr::int(0), Expr::int(64))
        ]
    );
}

#[test]
fn gemm_keyword_forms() {
    let b = body("T.gemm(A, B, C, transpose_A=True, policy=T.GemmWarpPolicy.FullRow, clear_accum=True, k_pack=2, wg_wait=-1)\nT.gemm(A, B, C, False, True, T.GemmWarpPolicy.FullCol)");
    let StmtKind::Gemm(g) = &b[0].kind else {
        panic!()
    };
    assert_eq!(
        (g.trans_a, g.trans_b, g.policy, g.clear_accum),
        (true, false, WarpPolicy::FullRow, true)
    );
    let StmtKind::Gemm(g) = &b[1].kind else {
        panic!()
    };
    assert_eq!(
        (g.trans_a, g.trans_b, g.policy, g.clear_accum),
        (false, true, WarpPolicy::FullCol, false)
    );
}

#[test]
fn tvmscript_positional_gemm() {
    same(
        "T.gemm(A, B, C, policy=T.GemmWarpPolicy.FullRow, clear_accum=True)",
        "T.gemm(T.region(A[0, 0], 1, 128, 64), T.region(B[0, 0], 1, 64, 128), T.region(C[0, 0], 3, 128, 128), T.bool(False), T.bool(False), 128, 128, 64, 1, T.bool(True), 0, 0, 0)",
    );
    // Transposed operands: A is read as [K, M].
    same(
        "T.gemm(B, B, C, transpose_A=True)",
        "T.gemm(T.region(B[0, 0], 1, 64, 128), B, C, True, False, 128, 128, 64, 0, False, 1, 0)",
    );
}

#[test]
fn loops() {
    let b = body("for i in T.serial(8):\n    pass\nfor i in T.serial(2, 8):\n    pass\nfor i in range(8):\n    pass\nfor i in range(2, 8):\n    pass\nfor i in T.unroll(4):\n    pass\nfor t in T.thread_binding(128, thread=\"threadIdx.x\"):\n    pass\nfor k in T.Pipelined(1, 9, num_stages=2, order=[0, 1], stage=[0, 1]):\n    pass\nfor k in T.serial(16, annotations={\"num_stages\": 4}):\n    pass");
    let loops: Vec<(Expr, Expr, ForKind)> = b
        .iter()
        .map(|s| match &s.kind {
            StmtKind::For(l) => (l.start.clone(), l.stop.clone(), l.kind.clone()),
            other => panic!("{other:?}"),
        })
        .collect();
    let i = Expr::int;
    assert_eq!(
        loops,
        vec![
            (i(0), i(8), ForKind::Serial),
            (i(2), i(8), ForKind::Serial),
            (i(0), i(8), ForKind::Serial),
            (i(2), i(8), ForKind::Serial),
            (i(0), i(4), ForKind::Unroll),
            (i(0), i(128), ForKind::ThreadBinding(ThreadTag::ThreadX)),
            (
                i(1),
                i(9),
                ForKind::Pipelined {
                    num_stages: Expr::int(2),
                    order: vec![0, 1],
                    stage: vec![0, 1]
                }
            ),
            (
                i(0),
                i(16),
                ForKind::Pipelined {
                    num_stages: Expr::int(4),
                    order: vec![],
                    stage: vec![]
                }
            ),
        ]
    );
}

#[test]
fn pipelined_range_as_a_tuple() {
    same(
        "for k in T.Pipelined((1, 9), num_stages=2):\n    pass",
        "for k in T.Pipelined(1, 9, num_stages=2):\n    pass",
    );
}

#[test]
fn parallel_nests() {
    same(
        "for i, j, k in T.Parallel(2, 4, 8):\n    C[i, j] = 0",
        "for i in T.parallel(2):\n    for j in T.parallel(4):\n        for k in T.parallel(8):\n            C[i, j] = 0",
    );
    same(
        "for (i, j) in T.Parallel(2, 4):\n    pass",
        "for i, j in T.Parallel(2, 4):\n    pass",
    );
}

#[test]
fn if_elif_else() {
    let b = body("if bx < 2:\n    x = 1\nelif bx == 2:\n    x = 2\nelse:\n    x = 3");
    let StmtKind::If {
        cond,
        then_body,
        else_body,
    } = &b[0].kind
    else {
        panic!()
    };
    assert_eq!(*cond, bin(BinOp::Lt, Expr::var("bx"), Expr::int(2)));
    assert_eq!(then_body.len(), 1);
    let [Stmt {
        kind: StmtKind::If {
            else_body: inner_else,
            ..
        },
        ..
    }] = else_body.as_slice()
    else {
        panic!("elif must be an If alone in the else body: {else_body:?}")
    };
    assert_eq!(inner_else.len(), 1);
    same(
        "if bx < 2:\n    pass\nelif by < 1:\n    pass",
        "if bx < 2:\n    pass\nelse:\n    if by < 1:\n        pass",
    );
}

#[test]
fn lets_and_stores() {
    let b = body("x = bx * 2\ny: T.int64 = x + 1\nC[x, 0] = T.float32(y)");
    assert!(matches!(&b[0].kind, StmtKind::Let { var, dtype: None, .. } if var.name == "x"));
    assert!(matches!(
        &b[1].kind,
        StmtKind::Let {
            dtype: Some(DType::Int64),
            ..
        }
    ));
    let StmtKind::Store {
        buffer,
        indices,
        value,
    } = &b[2].kind
    else {
        panic!()
    };
    assert_eq!(buffer.name, "C");
    assert_eq!(indices, &vec![Expr::var("x"), Expr::int(0)]);
    assert_eq!(
        *value,
        Expr::new(
            ExprKind::Cast(DType::Float32, Box::new(Expr::var("y"))),
            d()
        )
    );
}

#[test]
fn swizzle_and_layouts() {
    let f = ok(&wrap(
        "S = T.alloc_shared((32, 64), \"float16\")\nT.use_swizzle(8, \"column\")\nT.annotate_layout({S: T.make_swizzled_layout(S)})",
    ));
    let k = kernel(&f);
    let sw = k.swizzle.as_ref().unwrap();
    assert_eq!(
        (sw.panel_size.clone(), sw.order),
        (Expr::int(8), RasterOrder::Column)
    );
    assert_eq!(k.layouts.len(), 1);
    assert_eq!(
        (k.layouts[0].buffer.name.as_str(), k.layouts[0].layout),
        ("S", Layout::Swizzled)
    );
    same(
        "S = T.alloc_shared((32, 64), \"float16\")\nT.use_swizzle(panel_size=8, order=\"column\")\nT.annotate_layout({S: make_swizzled_layout(S)})",
        "S = T.alloc_shared((32, 64), \"float16\")\nT.use_swizzle(8, \"column\")\nT.annotate_layout({S: T.make_swizzled_layout(S)})",
    );
    same(
        "T.use_swizzle(panel_size=10)",
        "T.attr(None, \"threadblock_swizzle_pattern\", \"tl::rasterization2DRow<10>\")",
    );
    same(
        "T.use_swizzle(panel_size=4, order=\"column\")",
        "T.attr(None, \"threadblock_swizzle_pattern\", T.tvm_tuple(\"rasterization2DColumn\", 4))",
    );
}

#[test]
fn min_blocks_per_sm() {
    let f = ok(&wrap("T.min_blocks_per_sm(2)"));
    assert_eq!(kernel(&f).min_blocks_per_sm, Some(Expr::int(2)));
    same("T.min_blocks_per_sm(2)", "T.min_blocks_per_sm(blocks=2)");
    assert_eq!(kernel(&ok(&wrap("pass"))).min_blocks_per_sm, None);
    // A symbolic count takes the value `-D` binds.
    let text = "B = T.symbolic(\"B\")\n\n@T.prim_func\ndef f(A: T.Tensor((B, 64), \"float16\")):\n    with T.Kernel(1, threads=128) as bx:\n        T.min_blocks_per_sm(B)\n";
    let bound = tlc_ir::specialize::specialize(&ok(text), &[("B".to_string(), 2)]).expect("bind");
    assert_eq!(kernel(&bound).min_blocks_per_sm, Some(Expr::int(2)));
}

#[test]
fn expressions() {
    let (a, b, c) = (Expr::var("a"), Expr::var("b"), Expr::var("c"));
    assert_eq!(
        expr("a + b * c"),
        bin(BinOp::Add, a.clone(), bin(BinOp::Mul, b.clone(), c.clone()))
    );
    assert_eq!(
        expr("(a + b) * c"),
        bin(BinOp::Mul, bin(BinOp::Add, a.clone(), b.clone()), c.clone())
    );
    assert_eq!(
        expr("a - b - c"),
        bin(BinOp::Sub, bin(BinOp::Sub, a.clone(), b.clone()), c.clone())
    );
    assert_eq!(
        expr("-a * b"),
        bin(
            BinOp::Mul,
            Expr::new(ExprKind::Unary(UnOp::Neg, Box::new(a.clone())), d()),
            b.clone()
        )
    );
    assert_eq!(expr("-5"), Expr::int(-5));
    assert_eq!(expr("-9223372036854775808"), Expr::int(i64::MIN));
    assert_eq!(expr("-2.5"), Expr::new(ExprKind::Float(-2.5), d()));
    assert_eq!(
        expr("-(5)"),
        Expr::new(ExprKind::Unary(UnOp::Neg, Box::new(Expr::int(5))), d())
    );
    assert_eq!(expr("a + -1"), bin(BinOp::Add, a.clone(), Expr::int(-1)));
    assert_eq!(expr("T.ceildiv(2048, 128)"), Expr::int(16));
    assert_eq!(expr("2 * 3 + 4 // 3 - 7 % 4"), Expr::int(4));
    assert_eq!(expr("a // b"), bin(BinOp::FloorDiv, a.clone(), b.clone()));
    assert_eq!(expr("a % b"), bin(BinOp::FloorMod, a.clone(), b.clone()));
    assert_eq!(expr("a / b"), bin(BinOp::Div, a.clone(), b.clone()));
    assert_eq!(expr("T.min(a, b)"), bin(BinOp::Min, a.clone(), b.clone()));
    assert_eq!(
        expr("T.max(a, 3)"),
        bin(BinOp::Max, a.clone(), Expr::int(3))
    );
    assert_eq!(
        expr("T.cast(a, \"float16\")"),
        expr("T.Cast(\"float16\", a)")
    );
    assert_eq!(expr("T.cast(a, T.float16)"), expr("T.Cast(\"float16\", a)"));
    assert_eq!(
        expr("T.if_then_else(a < b, a, b)"),
        Expr::new(
            ExprKind::Select(
                Box::new(bin(BinOp::Lt, a.clone(), b.clone())),
                Box::new(a.clone()),
                Box::new(b.clone())
            ),
            d()
        )
    );
    // A typed literal of the literal's own dtype is the literal; another dtype is a cast.
    assert_eq!(expr("T.int32(5)"), Expr::int(5));
    assert_eq!(
        expr("T.int64(5)"),
        Expr::new(ExprKind::Cast(DType::Int64, Box::new(Expr::int(5))), d())
    );
    assert_eq!(expr("T.bool(False)"), Expr::new(ExprKind::Bool(false), d()));
    assert_eq!(
        expr("not a < b and c >= 1 or True"),
        bin(
            BinOp::Or,
            bin(
                BinOp::And,
                Expr::new(
                    ExprKind::Unary(UnOp::Not, Box::new(bin(BinOp::Lt, a.clone(), b.clone()))),
                    d()
                ),
                bin(BinOp::Ge, c.clone(), Expr::int(1))
            ),
            Expr::new(ExprKind::Bool(true), d())
        )
    );
    // A parenthesized comparison may be compared.
    assert_eq!(
        expr("(a < b) == (b != c)"),
        bin(
            BinOp::Eq,
            bin(BinOp::Lt, a.clone(), b.clone()),
            bin(BinOp::Ne, b.clone(), c.clone())
        )
    );
    assert_eq!(
        expr("A[a, b + 1]"),
        Expr::new(
            ExprKind::Load {
                buffer: "A".into(),
                indices: vec![a.clone(), bin(BinOp::Add, b.clone(), Expr::int(1))]
            },
            d()
        )
    );
    assert_eq!(expr("1e-5"), Expr::new(ExprKind::Float(1e-5), d()));
    assert_eq!(expr(".5 + 1."), expr("0.5 + 1.0"));
}

#[test]
fn comments_blank_lines_and_continuations() {
    same(
        "# a comment\nx = (1 +\n     2)  # trailing\n\n   # odd comment indentation\ny = x",
        "x = 3\ny = x",
    );
    same("x = 1 + \\\n    2", "x = 3");
}

#[test]
fn tvmscript_0_1_x_launches() {
    let f = ok("@T.prim_func\ndef g(A: T.Buffer((64,), \"float32\")):\n    bx = T.launch_thread(\"blockIdx.x\", 4)\n    by = T.launch_thread(\"blockIdx.y\", 2)\n    tx = T.launch_thread(\"threadIdx.x\", 32)\n    ty = T.launch_thread(\"threadIdx.y\", 4)\n    tz = T.launch_thread(\"threadIdx.z\", 1)\n    with T.block(\"root\"):\n        T.reads(A[0:64])\n        T.writes()\n        L = T.alloc_buffer((4,), scope=\"local\")\n        T.fill(T.tvm_access_ptr(T.type_annotation(\"float32\"), L.data, 0, 4, 2), 0)\n");
    let g = ok("@T.prim_func\ndef g(A: T.Tensor((64,), \"float32\")):\n    with T.Kernel(4, 2, threads=(32, 4)) as (bx, by):\n        L = T.alloc_local((4,), \"float32\")\n        T.clear(L)\n");
    assert_eq!(f, g);
}

#[test]
fn tvmscript_0_1_15_kernel() {
    let f = ok("# from tvm.script import tirx as T\n\n@T.prim_func\ndef g(A_handle: T.handle):\n    A = T.match_buffer(A_handle, (64, 32), \"float16\", strides=(32, 1))\n    for bx in T.thread_binding(4, thread=\"blockIdx.x\"):\n        tx: T.int32 = T.launch_thread_idx(0)\n        with T.sblock(\"tilelang_root\"):\n            T.sblock_attr({\"tl.launch_threads\": [64, 2, 1]})\n            S = T.sblock_alloc_buffer((16, 32), \"float16\", scope=\"shared\")\n            T.copy(T.region(A[bx * 16, 0], 1, 16, 32), T.region(S[0, 0], 2, 16, 32))\n");
    let g = ok("@T.prim_func\ndef g(A: T.Tensor((64, 32), \"float16\")):\n    with T.Kernel(4, threads=(64, 2)) as bx:\n        S = T.alloc_shared((16, 32), \"float16\")\n        T.copy(A[bx * 16, 0], S)\n");
    assert_eq!(f, g);
}

#[test]
fn thread_variables_make_per_thread_code() {
    // TileLang runs a kernel's statements on every thread: a body that uses a thread
    // variable (and has no tile-level code) is the thread level, one binding loop per axis
    // used. The three spellings of a thread variable, and the explicit loops, are one IR.
    let explicit = ok("@T.prim_func\ndef g(A: T.Tensor((128,), \"float32\")):\n    with T.Kernel(2, threads=(32, 2)) as bx:\n        for tx in T.thread_binding(32, thread=\"threadIdx.x\"):\n            for ty in T.thread_binding(2, thread=\"threadIdx.y\"):\n                A[bx * 64 + ty * 32 + tx] = 1.0\n");
    let tvm_0_1_x = ok("@T.prim_func\ndef g(A: T.Buffer((128,), \"float32\")):\n    bx = T.launch_thread(\"blockIdx.x\", 2)\n    tx = T.launch_thread(\"threadIdx.x\", 32)\n    ty = T.launch_thread(\"threadIdx.y\", 2)\n    tz = T.launch_thread(\"threadIdx.z\", 1)\n    with T.block(\"tilelang_root\"):\n        A[bx * 64 + ty * 32 + tx] = T.float32(1.0)\n");
    let tvm_0_1_15 = ok("@T.prim_func\ndef g(A_handle: T.handle):\n    A = T.match_buffer(A_handle, (128,), \"float32\", strides=(1,))\n    for bx in T.thread_binding(2, thread=\"blockIdx.x\"):\n        tx: T.int32 = T.launch_thread_idx(0)\n        ty: T.int32 = T.launch_thread_idx(1)\n        tz: T.int32 = T.launch_thread_idx(2)\n        with T.sblock(\"tilelang_root\"):\n            T.sblock_attr({\"tl.launch_threads\": [32, 2, 1]})\n            A[bx * 64 + ty * 32 + tx] = T.float32(1.0)\n");
    let dsl = ok("@T.prim_func\ndef g(A: T.Tensor((128,), \"float32\")):\n    with T.Kernel(2, threads=(32, 2)) as bx:\n        tx = T.get_thread_binding()\n        ty = T.get_thread_binding(1)\n        A[bx * 64 + ty * 32 + tx] = 1.0\n");
    assert_eq!(tvm_0_1_x, explicit);
    assert_eq!(tvm_0_1_15, explicit);
    assert_eq!(dsl, explicit);
    // Only the axes used get a loop: `tx` alone is one loop over threadIdx.x.
    let f = ok("@T.prim_func\ndef g(A: T.Tensor((64,), \"float32\")):\n    with T.Kernel(1, threads=64) as bx:\n        tx = T.get_thread_binding(0)\n        ty = T.get_thread_binding(1)\n        A[tx] = 0.0\n");
    let k = kernel(&f);
    assert!(matches!(
        k.body.as_slice(),
        [Stmt { kind: StmtKind::For(l), .. }]
            if l.kind == ForKind::ThreadBinding(ThreadTag::ThreadX)
                && l.var.name == "tx"
                && l.stop == Expr::int(64)
                && matches!(l.body.as_slice(), [Stmt { kind: StmtKind::Store { .. }, .. }])
    ));
}

#[test]
fn thread_binding_outside_kernel_stays_a_loop() {
    // Without a thread launch inside, a blockIdx loop is an ordinary thread-bound loop.
    let f = ok("@T.prim_func\ndef g():\n    for b in T.thread_binding(4, thread=\"blockIdx.x\"):\n        pass\n");
    assert!(matches!(
        &f.body[0].kind,
        StmtKind::For(l) if l.kind == ForKind::ThreadBinding(ThreadTag::BlockX)
    ));
}

#[test]
fn thread_level_constructs() {
    // `T.vectorized(n)` / `(a, b)`, both barrier spellings.
    let b = body("for tx in T.thread_binding(128, thread=\"threadIdx.x\"):\n    for v in T.vectorized(8):\n        pass\n    for v2 in T.vectorized(4, 8):\n        pass\n    T.sync_threads()\n    T.tvm_storage_sync(\"shared\")");
    let [Stmt {
        kind: StmtKind::For(tx),
        ..
    }] = b.as_slice()
    else {
        panic!("{b:?}")
    };
    match tx.body.as_slice() {
        [Stmt {
            kind: StmtKind::For(v),
            ..
        }, Stmt {
            kind: StmtKind::For(v2),
            ..
        }, Stmt {
            kind: StmtKind::Barrier,
            ..
        }, Stmt {
            kind: StmtKind::Barrier,
            ..
        }] => {
            assert_eq!(
                (v.kind.clone(), v.start.clone(), v.stop.clone()),
                (ForKind::Vectorized, Expr::int(0), Expr::int(8))
            );
            assert_eq!((v2.start.as_int(), v2.stop.as_int()), (Some(4), Some(8)));
        }
        other => panic!("{other:?}"),
    }
    same("T.sync_threads()", "T.tvm_storage_sync(\"shared\")");
}

#[test]
fn shared_arena_is_a_kernel_field() {
    let f = ok(&wrap("S = T.alloc_shared((64, 64), \"float16\")\nR = T.alloc_shared((64,), \"float32\")\nT.shared_arena(bytes=8448, offsets={S: 0, R: 8192})\npass"));
    let arena = kernel(&f)
        .arena
        .clone()
        .unwrap_or_else(|| panic!("no arena"));
    assert_eq!(arena.bytes, 8448);
    let offsets: Vec<(&str, i64)> = arena
        .offsets
        .iter()
        .map(|(n, o)| (n.name.as_str(), *o))
        .collect();
    assert_eq!(offsets, [("S", 0), ("R", 8192)]);
    assert_eq!(arena.offset("R"), Some(8192));
    // Written anywhere in the kernel, it is the same IR.
    same(
        "S = T.alloc_shared((64,), \"float32\")\nT.shared_arena(bytes=256, offsets={S: 0})\nS[0] = 1.0",
        "S = T.alloc_shared((64,), \"float32\")\nS[0] = 1.0\nT.shared_arena(bytes=256, offsets={S: 0})",
    );
    assert_eq!(kernel(&ok(&wrap("pass"))).arena, None);
}

#[test]
fn thread_level_spelling_errors() {
    let err = |body: &str| -> String {
        match parse(&wrap(body)) {
            Ok(_) => panic!("accepted:\n{body}"),
            Err(d) => d
                .iter()
                .map(|e| e.message.clone())
                .collect::<Vec<_>>()
                .join("\n"),
        }
    };
    assert_eq!(
        err("T.tvm_storage_sync(\"global\")"),
        "unsupported storage sync scope \"global\""
    );
    // TileLang's `T.sync_threads(barrier_id, arrive_count)` takes two at most.
    assert_eq!(
        err("T.sync_threads(1, 128, 3)"),
        "`T.sync_threads` takes at most 2 positional arguments"
    );
    assert_eq!(
        err("T.shared_arena(bytes=16, offsets={})\nT.shared_arena(bytes=16, offsets={})"),
        "a kernel has one shared arena"
    );
    assert_eq!(
        err("T.shared_arena(bytes=16, offsets={\"S\": 0})"),
        "expected a buffer name"
    );
    assert_eq!(
        err("T.shared_arena(bytes=n, offsets={})"),
        "the arena size must be a constant integer"
    );
    assert_eq!(
        err("T.shared_arena(16)"),
        "`T.shared_arena` is missing its argument `offsets`"
    );
}

#[test]
fn notes() {
    let note = |t: &str| Stmt::new(StmtKind::Note(t.into()), d());
    // Positional or by keyword, either quote, escapes resolved; at any level and outside the
    // kernel.
    assert_eq!(
        body("T.note(\"a \\\"b\\\"\\n\")\nT.note(text='c\\'d')"),
        vec![note("a \"b\"\n"), note("c'd")]
    );
    match body("for tx in T.thread_binding(128, thread=\"threadIdx.x\"):\n    T.sync_threads()\n    T.note(\"thread level\")").as_slice() {
        [Stmt {
            kind: StmtKind::For(tx),
            ..
        }] => assert_eq!(tx.body[1], note("thread level")),
        other => panic!("{other:?}"),
    }
    let f = ok("@T.prim_func\ndef f():\n    T.note(\"outside\")\n    with T.Kernel(1, threads=32) as bx:\n        T.note(\"inside\")\n");
    match f.body.as_slice() {
        [outside, Stmt {
            kind: StmtKind::Kernel(k),
            ..
        }] => {
            assert_eq!(outside, &note("outside"));
            assert_eq!(k.body, vec![note("inside")]);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(ok(&print_func(&f)), f);
    let err = |body: &str| -> String {
        match parse(&wrap(body)) {
            Ok(_) => panic!("accepted:\n{body}"),
            Err(d) => d
                .iter()
                .map(|e| e.message.clone())
                .collect::<Vec<_>>()
                .join("\n"),
        }
    };
    assert_eq!(
        err("T.note(1)"),
        "the text of `T.note` must be a string literal"
    );
    assert_eq!(
        err("T.note(bx)"),
        "the text of `T.note` must be a string literal"
    );
    assert_eq!(err("T.note()"), "`T.note` is missing its argument `text`");
    assert_eq!(
        err("T.note(\"a\", \"b\")"),
        "`T.note` takes at most 1 positional argument"
    );
    assert_eq!(
        err("x = T.note(\"a\")"),
        "`T.note` is not a scalar expression"
    );
}

/// The intrinsics of a thread loop's body (written at 4 more spaces).
fn intrinsics(src: &str) -> Vec<Intrinsic> {
    let mut text = String::from("for tx in T.thread_binding(128, thread=\"threadIdx.x\"):\n");
    for line in src.lines() {
        text.push_str("    ");
        text.push_str(line);
        text.push('\n');
    }
    let b = body(&format!(
        "S = T.alloc_shared((64, 64), \"float16\")\nF = T.alloc_local((8,), \"float16\")\nacc = T.alloc_local((4,), \"float32\")\n{text}"
    ));
    let [Stmt {
        kind: StmtKind::For(tx),
        ..
    }] = b.as_slice()
    else {
        panic!("{b:?}")
    };
    tx.body
        .iter()
        .map(|s| match &s.kind {
            StmtKind::Intrinsic(i) => i.clone(),
            other => panic!("not an intrinsic: {other:?}"),
        })
        .collect()
}

fn eref(buffer: &str, indices: Vec<Expr>) -> ElemRef {
    ElemRef {
        buffer: tlc_ir::Ident::new(buffer, d()),
        indices,
    }
}

#[test]
fn intrinsic_statements() {
    let got = intrinsics(
        "T.cp_async(S[tx, 0], A[tx, 8], 16)\nT.cp_async(S[tx, 8], A[tx, 0], 8, tx < 64)\nT.cp_async_commit()\nT.cp_async_wait(1)\nT.ldmatrix(F[0], S[tx % 32, 0], num=4, trans=False)\nT.ldmatrix(F[4], S[tx % 16, 8], num=2, trans=True)\nT.mma_sync(acc[0], F[0], F[4])",
    );
    let tx = || Expr::var("tx");
    let expected = vec![
        Intrinsic::CpAsync {
            dst: eref("S", vec![tx(), Expr::int(0)]),
            src: eref("A", vec![tx(), Expr::int(8)]),
            bytes: 16,
            pred: None,
        },
        Intrinsic::CpAsync {
            dst: eref("S", vec![tx(), Expr::int(8)]),
            src: eref("A", vec![tx(), Expr::int(0)]),
            bytes: 8,
            pred: Some(bin(BinOp::Lt, tx(), Expr::int(64))),
        },
        Intrinsic::CommitGroup,
        Intrinsic::WaitGroup { n: 1 },
        Intrinsic::Ldmatrix {
            dst: eref("F", vec![Expr::int(0)]),
            src: eref(
                "S",
                vec![bin(BinOp::FloorMod, tx(), Expr::int(32)), Expr::int(0)],
            ),
            num: 4,
            trans: false,
        },
        Intrinsic::Ldmatrix {
            dst: eref("F", vec![Expr::int(4)]),
            src: eref(
                "S",
                vec![bin(BinOp::FloorMod, tx(), Expr::int(16)), Expr::int(8)],
            ),
            num: 2,
            trans: true,
        },
        Intrinsic::Mma {
            acc: eref("acc", vec![Expr::int(0)]),
            a: eref("F", vec![Expr::int(0)]),
            b: eref("F", vec![Expr::int(4)]),
            packed_int4: false,
        },
    ];
    assert_eq!(got, expected);
    // Keyword arguments and the defaults of `T.ldmatrix` (num=4, trans=False) name the same IR.
    assert_eq!(
        intrinsics("T.ldmatrix(F[0], S[tx % 32, 0])\nT.cp_async(dst=S[tx, 0], src=A[tx, 8], bytes=16)\nT.cp_async_wait(n=0)"),
        intrinsics("T.ldmatrix(F[0], S[tx % 32, 0], num=4, trans=False)\nT.cp_async(S[tx, 0], A[tx, 8], 16)\nT.cp_async_wait(0)"),
    );
    // Constant arguments fold.
    assert_eq!(
        intrinsics("T.cp_async(S[tx, 0], A[tx, 8], 8 * 2)\nT.cp_async_wait(3 - 1)"),
        intrinsics("T.cp_async(S[tx, 0], A[tx, 8], 16)\nT.cp_async_wait(2)"),
    );
    // At the tile level too, commit / wait are statements.
    let b = body("T.cp_async_commit()\nT.cp_async_wait(0)");
    assert!(matches!(
        b.as_slice(),
        [
            Stmt {
                kind: StmtKind::Intrinsic(Intrinsic::CommitGroup),
                ..
            },
            Stmt {
                kind: StmtKind::Intrinsic(Intrinsic::WaitGroup { n: 0 }),
                ..
            }
        ]
    ));
}

#[test]
fn resolved_layouts() {
    let f = ok(&wrap(
        "S = T.alloc_shared((32, 64), \"float16\")\nP = T.alloc_shared((32, 32), \"float16\")\nR = T.alloc_fragment((64, 64), \"float32\")\nT.annotate_layout({S: T.make_swizzled_layout(S, bytes=64), P: T.make_padded_layout(P, pad=8), R: T.mma_accumulator_layout(R, warps_m=2, warps_n=2)})",
    ));
    let layouts: Vec<(&str, Layout)> = kernel(&f)
        .layouts
        .iter()
        .map(|a| (a.buffer.name.as_str(), a.layout))
        .collect();
    assert_eq!(
        layouts,
        [
            ("S", Layout::Swizzle { bytes: 64 }),
            ("P", Layout::Padded { pad: 8 }),
            (
                "R",
                Layout::MmaAccumulator {
                    warps_m: 2,
                    warps_n: 2
                }
            ),
        ]
    );
    // Keyword spelling of the buffer, and the print, give the same IR.
    same(
        "S = T.alloc_shared((32, 64), \"float16\")\nT.annotate_layout({S: T.make_swizzled_layout(buffer=S, bytes=128)})",
        "S = T.alloc_shared((32, 64), \"float16\")\nT.annotate_layout({S: T.make_swizzled_layout(S, bytes=128)})",
    );
    assert_eq!(ok(&print_func(&f)), f);
}

#[test]
fn intrinsic_kernel_round_trips_through_the_printer() {
    let src = wrap(
        "S = T.alloc_shared((2, 64, 64), \"float16\")\nF = T.alloc_local((8,), \"float16\")\nacc = T.alloc_local((4,), \"float32\")\nT.annotate_layout({S: T.make_swizzled_layout(S, bytes=128)})\nfor tx in T.thread_binding(128, thread=\"threadIdx.x\"):\n    for ko in T.serial(2):\n        T.cp_async(S[ko, tx // 2, tx % 2 * 8], A[tx // 2, (tx % 2 + ko) * 8], 16, ko * 64 + tx < 100)\n        T.cp_async_commit()\n    T.cp_async_wait(0)\n    T.sync_threads()\n    T.ldmatrix(F[0], S[1, tx % 32, 0], num=4, trans=True)\n    T.mma_sync(acc[0], F[0], F[4])",
    );
    let f = ok(&src);
    let printed = print_func(&f);
    assert_eq!(ok(&printed), f, "{printed}");
    assert_eq!(print_func(&ok(&printed)), printed);
}

#[test]
fn tensor_subscript_annotation_is_the_call_spelling() {
    assert_eq!(
        ok("@T.prim_func\ndef f(A: T.Tensor[(128, 64), T.float16], B: T.Buffer[(8,), \"int8\"]):\n    with T.Kernel(4, threads=128) as bx:\n        T.clear(A[0:128, 0:64])\n"),
        ok("@T.prim_func\ndef f(A: T.Tensor((128, 64), \"float16\"), B: T.Tensor((8,), \"int8\")):\n    with T.Kernel(4, threads=128) as bx:\n        T.clear(A[0:128, 0:64])\n"),
    );
}

#[test]
fn thread_binding_statement_is_a_thread_variable() {
    let head = "@T.prim_func\ndef f(A: T.Tensor((4, 32), \"float32\")):\n    with T.Kernel(1, threads=(32, 4)) as bx:\n";
    let binding = format!(
        "{head}        tx = T.thread_binding(0, 32, thread=\"threadIdx.x\")\n        ty = T.thread_binding(4, thread=\"threadIdx.y\")\n        A[ty, tx] = 1.0\n"
    );
    let getter = format!(
        "{head}        tx = T.get_thread_binding(0)\n        ty = T.get_thread_binding(1)\n        A[ty, tx] = 1.0\n"
    );
    assert_eq!(ok(&binding), ok(&getter));
    let f = ok(&binding);
    let k = kernel(&f);
    assert!(matches!(
        &k.body[0].kind,
        StmtKind::For(l) if l.var.name == "tx" && l.kind == ForKind::ThreadBinding(ThreadTag::ThreadX)
    ));
}

/// `while` and `T.alloc_var`: the variable is a one-element local buffer read and written by
/// name, and the printed IR (the buffer form) parses back to the same IR.
#[test]
fn while_loops_and_alloc_var_round_trip() {
    let src = "@T.prim_func\ndef w(A: T.Tensor((64,), \"int32\")):\n    with T.Kernel(2, threads=32) as bx:\n        n = T.alloc_var(T.int32, bx)\n        m = T.alloc_var(dtype=T.int32)\n        m = 0\n        while n < 5 and m < 64:\n            A[m] = n\n            n += 1\n            m = m + 2\n";
    let f = tlc_ir::parse(src).unwrap_or_else(|d| panic!("{d:?}"));
    let text = tlc_ir::printer::print_func(&f);
    assert!(
        text.contains("n = T.alloc_local((1,), \"int32\")"),
        "{text}"
    );
    assert!(text.contains("n[0] = bx\n"), "{text}");
    assert!(text.contains("while n[0] < 5 and m[0] < 64:"), "{text}");
    assert!(text.contains("n[0] = n[0] + 1"), "{text}");
    assert_eq!(tlc_ir::parse(&text).unwrap_or_else(|d| panic!("{d:?}")), f);
    let bad = "@T.prim_func\ndef w(A: T.Tensor((64,), \"int32\")):\n    with T.Kernel(2, threads=32) as bx:\n        n = T.alloc_var(T.int32, scope=\"shared\")\n";
    let e = tlc_ir::parse(bad).expect_err("a shared variable");
    assert!(e[0].message.contains("unsupported scope"), "{e:?}");
}

#[test]
fn tuple_assignment_is_one_assignment_per_pair() {
    same(
        "i_b, i_h = bx // 2, bx % 2\nC[i_b, i_h] = 1.0",
        "i_b = bx // 2\ni_h = bx % 2\nC[i_b, i_h] = 1.0",
    );
    // Element stores (parenthesized targets too): the values are read first, into
    // temporaries, then stored (`C[0, 0], C[0, 1] = C[0, 1], C[0, 0]` swaps).
    same(
        "(C[0, 0], C[0, 1]) = (C[0, 1], 2.0)",
        "tuple_v0 = C[0, 1]\ntuple_v1 = 2.0\nC[0, 0] = tuple_v0\nC[0, 1] = tuple_v1",
    );
}

#[test]
fn a_loop_variable_may_shadow_one_in_scope() {
    // TVMScript's scoping: each inner `i` binds its own body; the outer `i` is back after it.
    let shadowed =
        "for i in T.serial(2):\n    for i in T.serial(3):\n        for i in T.serial(4):\n            C[i, 0] = 1.0\n        C[i, 1] = 2.0\n    C[i, 2] = 3.0";
    let renamed =
        "for i in T.serial(2):\n    for i_1 in T.serial(3):\n        for i_2 in T.serial(4):\n            C[i_2, 0] = 1.0\n        C[i_1, 1] = 2.0\n    C[i, 2] = 3.0";
    same(shadowed, renamed);
}

#[test]
fn a_shadowing_loop_after_a_sibling_of_the_same_name_binds_its_own_uses() {
    // The second outer `i` is renamed as a sibling of the first; its uses stop at the inner
    // `i`, which binds its own (a sibling rename once renamed through it, and the inner
    // loop then wrote nothing it should).
    let shadowed = "for i in T.serial(2):\n    C[i, 0] = 1.0\nfor i in T.serial(2):\n    for i in T.serial(5):\n        C[i, 1] = 2.0\n    C[i, 2] = 3.0";
    let renamed = "for i in T.serial(2):\n    C[i, 0] = 1.0\nfor i_1 in T.serial(2):\n    for i_2 in T.serial(5):\n        C[i_2, 1] = 2.0\n    C[i_1, 2] = 3.0";
    same(shadowed, renamed);
}

#[test]
fn sync_threads_with_a_barrier_id_over_the_whole_block_is_the_block_barrier() {
    // `wrap`'s kernel has 128 threads.
    same("T.sync_threads(1)", "T.sync_threads()");
    same("T.sync_threads(3, 128)", "T.sync_threads()");
    same(
        "for tx in T.thread_binding(128, thread=\"threadIdx.x\"):\n    if tx < 64:\n        T.sync_threads(1, 64)",
        "for tx in T.thread_binding(128, thread=\"threadIdx.x\"):\n    if tx < 64:\n        T.bar_sync(1, 64)",
    );
}

#[test]
fn scalar_parameters_are_dims_at_their_places() {
    let f = ok("M = T.symbolic(\"M\")\n\n@T.prim_func\ndef f(\n    A: T.Tensor((M,), \"float32\"),\n    n: T.int32,\n    B: T.Tensor((M,), \"float32\"),\n    big: \"int64\",\n):\n    with T.Kernel(1, threads=32) as bx:\n        A[0] = B[n + big]\n");
    let dims: Vec<(&str, DType, Option<usize>)> = f
        .dims
        .iter()
        .map(|d| (d.name.as_str(), d.dtype, d.param))
        .collect();
    assert_eq!(
        dims,
        [
            ("M", DType::Int32, None),
            ("n", DType::Int32, Some(1)),
            ("big", DType::Int64, Some(3)),
        ]
    );
    // The printed signature keeps the places; binding one closes the others up.
    let text = tlc_ir::printer::print_func(&f);
    assert!(
        text.contains("    A: T.Tensor((M,), \"float32\"),\n    n: T.int32,\n    B: T.Tensor((M,), \"float32\"),\n    big: T.int64,\n"),
        "{text}"
    );
    let bound = tlc_ir::specialize::specialize(&f, &[("n".to_string(), 4)]).expect("bind n");
    assert_eq!(
        bound
            .dims
            .iter()
            .find(|d| d.name == "big")
            .and_then(|d| d.param),
        Some(2)
    );
    assert_eq!(
        tlc_ir::parse(&tlc_ir::printer::print_func(&bound)).ok(),
        Some(bound)
    );
}

#[test]
fn t_dynamic_declares_dims_one_or_several_at_a_time() {
    let f = ok("total = T.dynamic(\"total\")\nB, H = T.dynamic(\"B, H\", \"int64\")\n\n@T.prim_func\ndef f(A: T.Tensor((total, H), \"float32\"), C: T.Tensor((B, H), \"float32\")):\n    with T.Kernel(1, threads=32) as bx:\n        C[0, 0] = A[0, 0]\n");
    let dims: Vec<(&str, DType)> = f.dims.iter().map(|d| (d.name.as_str(), d.dtype)).collect();
    assert_eq!(
        dims,
        [
            ("total", DType::Int32),
            ("B", DType::Int64),
            ("H", DType::Int64)
        ]
    );
}

/// `K = T.dynamic("k")` (TileLang's example_dynamic.py): the dim is named `k`, the file
/// writes it `K`; the loop variable the file calls `k` is another variable (renamed `k_1`
/// with its uses), and the kernel equals the one written with the dims' own names.
#[test]
fn a_dim_may_have_a_python_name_of_its_own() {
    let aliased = "M = T.dynamic(\"m\")\nK = T.dynamic(\"k\")\n\n@T.prim_func\ndef f(A: T.Tensor((M, K), \"float32\"), C: T.Tensor((M,), \"float32\")):\n    with T.Kernel(T.ceildiv(M, 32), threads=32) as bx:\n        for k in T.serial(T.ceildiv(K, 4)):\n            for i in T.Parallel(32):\n                C[bx * 32 + i] = A[bx * 32 + i, k * 4] + K\n";
    let own = "m = T.symbolic(\"m\")\nk = T.symbolic(\"k\")\n\n@T.prim_func\ndef f(A: T.Tensor((m, k), \"float32\"), C: T.Tensor((m,), \"float32\")):\n    with T.Kernel(T.ceildiv(m, 32), threads=32) as bx:\n        for k_1 in T.serial(T.ceildiv(k, 4)):\n            for i in T.Parallel(32):\n                C[bx * 32 + i] = A[bx * 32 + i, k_1 * 4] + k\n";
    let f = ok(aliased);
    let dims: Vec<&str> = f.dims.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(dims, ["m", "k"]);
    assert_eq!(f, ok(own));
    let printed = print_func(&f);
    assert!(printed.contains("k = T.symbolic(\"k\")"), "{printed}");
    assert_eq!(ok(&printed), f);
}

/// A let rebinding a let of its own statement list is a new variable from there on (its
/// value reads the old one); a let in a loop body naming an outer let stays an error.
#[test]
fn a_let_may_rebind_a_name_of_its_own_statement_list() {
    let head = "@T.prim_func\ndef f(C: T.Tensor((8,), \"int32\")):\n    with T.Kernel(1, threads=1) as bx:\n";
    let rebound = format!("{head}        w = 2\n        C[0] = w\n        w = w + 3\n        C[1] = w\n        for i in T.serial(w):\n            C[i] = w\n");
    let renamed = format!("{head}        w = 2\n        C[0] = w\n        w_1 = w + 3\n        C[1] = w_1\n        for i in T.serial(w_1):\n            C[i] = w_1\n");
    let f = ok(&rebound);
    assert_eq!(f, ok(&renamed));
    assert!(tlc_ir::verifier::verify(&f).is_ok());
    let nested = format!("{head}        w = 2\n        for i in T.serial(3):\n            w = w + 1\n        C[0] = w\n");
    let errors = tlc_ir::verifier::verify(&ok(&nested)).expect_err("a let naming an outer let");
    assert!(
        errors
            .iter()
            .any(|d| d.message.contains("the name `w` is defined more than once")),
        "{errors:#?}"
    );
}

/// Triple-quoted docstrings (module, function, macro; spanning lines) mean nothing.
#[test]
fn triple_quoted_docstrings_are_ignored() {
    let with = "\"\"\"A module.\n\nTwo lines.\"\"\"\n@T.macro\ndef one(A):\n    '''A macro's\n    docstring.'''\n    A[0] = 1.0\n\n@T.prim_func\ndef f(A: T.Tensor((4,), \"float32\")):\n    \"\"\"The kernel's \"docstring\".\"\"\"\n    with T.Kernel(1, threads=1) as bx:\n        one(A)\n";
    let without = "@T.prim_func\ndef f(A: T.Tensor((4,), \"float32\")):\n    with T.Kernel(1, threads=1) as bx:\n        A[0] = 1.0\n";
    assert_eq!(ok(with), ok(without));
}

#[test]
fn a_macro_called_in_a_macro_reads_the_callers_names() {
    // `inner`'s free `c` is what `c` means where it is called: `outer`'s own `c` (renamed
    // for the expansion), not the kernel's.
    let macros = "@T.macro\ndef inner(A):\n    A[0] = c\n\n@T.macro\ndef outer(A, v):\n    c = v\n    inner(A)\n\n";
    let kernel = "@T.prim_func\ndef f(B: T.Tensor((4,), \"int32\")):\n    with T.Kernel(1, threads=1) as bx:\n        c = 3\n        outer(B, 7)\n";
    let expanded = "@T.prim_func\ndef f(B: T.Tensor((4,), \"int32\")):\n    with T.Kernel(1, threads=1) as bx:\n        c = 3\n        c_1 = 7\n        B[0] = c_1\n";
    assert_eq!(ok(&format!("{macros}{kernel}")), ok(expanded));
}
