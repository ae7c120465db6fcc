//! Every class of interpreter error: its exact message and the span it points at.

use crate::interp_support;

use interp_support::*;
use tlc_ir::interp::{random_tensor, Tensor};
use tlc_ir::{BinOp, DType, Diagnostic, Scope, StmtKind};

fn err(f: &tlc_ir::PrimFunc, dims: &[(&str, i64)], inputs: Vec<(&str, Tensor)>) -> Diagnostic {
    // The same error with one thread and with several.
    let one = try_run(f, dims, inputs.clone(), 1).expect_err("the run should fail");
    let many = try_run(f, dims, inputs, 4).expect_err("the run should fail");
    assert_eq!(one.message, many.message);
    assert_eq!(
        (one.span.start, one.span.end),
        (many.span.start, many.span.end)
    );
    one
}

fn span_of(d: &Diagnostic) -> (usize, usize) {
    (d.span.start, d.span.end)
}

#[test]
fn out_of_bounds_store() {
    // A_shared[bx * 65 + 65, 4] = 1.0: fine in block (0, 0), row 130 in block (1, 0).
    let f = func(
        "oob_store",
        &[],
        vec![],
        vec![kernel(
            vec![int(2), int(1)],
            &["bx", "by"],
            vec![alloc("A_shared", &[128, 32], DType::Float16, Scope::Shared)],
            vec![stmt_at(
                StmtKind::Store {
                    buffer: id("A_shared"),
                    indices: vec![add(mul(var("bx"), int(65)), int(65)), int(4)],
                    value: float(1.0),
                },
                sp(10, 40),
            )],
        )],
    );
    let d = err(&f, &[], vec![]);
    assert_eq!(
        d.message,
        "index [130, 4] is out of bounds for `A_shared` with shape (128, 32) (block (1, 0))"
    );
    assert_eq!(span_of(&d), (10, 40));
}

#[test]
fn out_of_bounds_load() {
    // O[i] = A[bx * 4 + i + 1] reads A[8] in block 1.
    let f = func(
        "oob_load",
        &[],
        vec![
            param("A", vec![int(8)], DType::Float32),
            param("O", vec![int(8)], DType::Float32),
        ],
        vec![kernel(
            vec![int(2)],
            &["bx"],
            vec![],
            vec![for_kind(
                "i",
                int(4),
                tlc_ir::ForKind::Parallel,
                vec![store(
                    "O",
                    vec![add(mul(var("bx"), int(4)), var("i"))],
                    at(
                        load(
                            "A",
                            vec![add(add(mul(var("bx"), int(4)), var("i")), int(1))],
                        ),
                        sp(50, 70),
                    ),
                )],
            )],
        )],
    );
    let d = err(&f, &[], vec![]);
    assert_eq!(
        d.message,
        "index [8] is out of bounds for `A` with shape (8,) (block 1)"
    );
    assert_eq!(span_of(&d), (50, 70));
}

#[test]
fn seed_kernel_on_ragged_sizes_reads_past_b() {
    // The seed kernel's B loop has no mask: N = 100 is not a multiple of 128.
    let f = gemm_kernel(&GemmCfg::seed(128, 100, 64));
    let d = err(&f, &[], vec![]);
    assert_eq!(
        d.message,
        "index [0, 100] is out of bounds for `B` with shape (64, 100) (block (0, 0))"
    );
}

#[test]
fn read_of_a_never_written_fragment_element() {
    let f = func(
        "unwritten",
        &[],
        vec![param("O", vec![int(1)], DType::Float32)],
        vec![kernel(
            vec![int(1)],
            &["bx"],
            vec![alloc("C_local", &[4], DType::Float32, Scope::Fragment)],
            vec![
                store("C_local", vec![int(0)], float(1.0)),
                store(
                    "O",
                    vec![int(0)],
                    at(load("C_local", vec![int(2)]), sp(5, 15)),
                ),
            ],
        )],
    );
    let d = err(&f, &[], vec![]);
    assert_eq!(
        d.message,
        "`C_local[2]` is read but was never written (block 0)"
    );
    assert_eq!(span_of(&d), (5, 15));
}

#[test]
fn gemm_and_copy_of_never_written_elements() {
    // No T.clear before accumulating.
    let mut cfg = GemmCfg::seed(128, 128, 32);
    cfg.b_parallel = false;
    let mut f = gemm_kernel(&cfg);
    if let StmtKind::Kernel(k) = &mut f.body[0].kind {
        k.body.remove(0);
        k.body[0].span = sp(100, 200); // the pipelined loop; its gemm has a dummy span
        if let StmtKind::For(l) = &mut k.body[0].kind {
            l.body[2].span = sp(150, 180);
        }
    }
    let d = err(&f, &[], vec![]);
    assert_eq!(
        d.message,
        "T.gemm reads `C_local[0, 0]`, which was never written (block (0, 0))"
    );
    assert_eq!(span_of(&d), (150, 180));

    let f = func(
        "copy_unwritten",
        &[],
        vec![param("O", vec![int(4)], DType::Float32)],
        vec![kernel(
            vec![int(1)],
            &["bx"],
            vec![alloc("S", &[4], DType::Float32, Scope::Shared)],
            vec![
                store("S", vec![int(0)], float(1.0)),
                stmt_at(
                    StmtKind::Copy {
                        src: whole("S", &[4]),
                        dst: whole("O", &[4]),
                    },
                    sp(7, 9),
                ),
            ],
        )],
    );
    let d = err(&f, &[], vec![]);
    assert_eq!(
        d.message,
        "T.copy reads `S[1]`, which was never written (block 0)"
    );
    assert_eq!(span_of(&d), (7, 9));
}

#[test]
fn integer_division_by_zero() {
    let f = func(
        "div0",
        &[],
        vec![param("O", vec![int(1)], DType::Int32)],
        vec![kernel(
            vec![int(3)],
            &["bx"],
            vec![],
            vec![
                let_("d", None, bin(BinOp::Sub, var("bx"), int(2))),
                store(
                    "O",
                    vec![int(0)],
                    at(bin(BinOp::FloorMod, int(10), var("d")), sp(30, 36)),
                ),
            ],
        )],
    );
    let d = err(&f, &[], vec![]);
    assert_eq!(d.message, "integer division by zero (block 2)");
    assert_eq!(span_of(&d), (30, 36));
}

#[test]
fn tile_op_shape_and_bounds_errors() {
    let body = |op: tlc_ir::Stmt| {
        func(
            "ops",
            &[],
            vec![param("X", vec![int(4), int(8)], DType::Float32)],
            vec![kernel(
                vec![int(1)],
                &["bx"],
                vec![alloc("S", &[8, 4], DType::Float32, Scope::Shared)],
                vec![op],
            )],
        )
    };
    let copy_op = stmt_at(
        StmtKind::Copy {
            src: whole("X", &[4, 8]),
            dst: whole("S", &[8, 4]),
        },
        sp(1, 2),
    );
    let d = err(&body(copy_op), &[], vec![]);
    assert_eq!(
        d.message,
        "T.copy: the source region has shape (4, 8) but the destination has shape (8, 4) (block 0)"
    );
    assert_eq!(span_of(&d), (1, 2));

    let fill_op = stmt_at(
        StmtKind::Fill {
            dst: region("S", vec![int(6), int(0)], vec![int(4), int(4)]),
            value: int(0),
        },
        sp(3, 4),
    );
    let d = err(&body(fill_op), &[], vec![]);
    assert_eq!(
        d.message,
        "T.fill: region `S[6:10, 0:4]` is out of bounds for `S` with shape (8, 4) (block 0)"
    );
    assert_eq!(span_of(&d), (3, 4));

    let gemm_op = stmt_at(
        StmtKind::Gemm(tlc_ir::Gemm {
            a: whole("X", &[4, 8]),
            b: whole("X", &[4, 8]),
            c: whole("S", &[8, 4]),
            trans_a: false,
            trans_b: false,
            policy: tlc_ir::WarpPolicy::Square,
            clear_accum: true,
            packed_int4: false,
        }),
        sp(5, 6),
    );
    let d = err(&body(gemm_op), &[], vec![]);
    assert_eq!(
        d.message,
        "T.gemm: shapes do not agree: op(A) is 4x8, op(B) is 4x8, C is 8x4 (block 0)"
    );
}

#[test]
fn compile_errors_point_at_the_expression() {
    let f = func(
        "bad",
        &[],
        vec![param("O", vec![int(1)], DType::Float32)],
        vec![kernel(
            vec![int(1)],
            &["bx"],
            vec![],
            vec![store("O", vec![int(0)], at(var("nope"), sp(3, 7)))],
        )],
    );
    let d = err(&f, &[], vec![]);
    assert_eq!(d.message, "undefined name `nope`");
    assert_eq!(span_of(&d), (3, 7));

    let f = func(
        "bad",
        &[],
        vec![param("O", vec![int(1)], DType::Float32)],
        vec![kernel(
            vec![int(1)],
            &["bx"],
            vec![],
            vec![store(
                "O",
                vec![at(load("O", vec![int(0)]), sp(8, 12))],
                float(0.0),
            )],
        )],
    );
    let d = err(&f, &[], vec![]);
    assert_eq!(d.message, "expected an integer expression, found float32");
    assert_eq!(span_of(&d), (8, 12));
}

#[test]
fn input_and_dim_errors() {
    let cfg = GemmCfg {
        bm: 32,
        bn: 32,
        bk: 32,
        b_parallel: false,
        symbolic: true,
        ..GemmCfg::seed(40, 50, 60)
    };
    let f = gemm_kernel(&cfg);
    let a = random_tensor("A", DType::Float16, &[40, 60], 0).unwrap();
    let b_bad = random_tensor("B", DType::Float16, &[70, 50], 0).unwrap();
    let d = err(&f, &[], vec![("A", a.clone()), ("B", b_bad)]);
    assert_eq!(
        d.message,
        "input `B` has shape (70, 50), expected (60, 50) (M = 40 from the shape of input `A`, \
         N = 50 from the shape of input `B`, K = 60 from the shape of input `A`)"
    );
    let d = err(&f, &[("M", 32)], vec![("A", a.clone())]);
    assert_eq!(
        d.message,
        "input `A` has shape (40, 60), expected (32, 60) (M = 32 as given, K = 60 from the shape of input `A`)"
    );
    let d = err(&f, &[], vec![("A", a.clone())]);
    assert_eq!(
        d.message,
        "the value of dimension `N` is not known: give it (`-D N=VALUE`) or give an input whose shape uses it"
    );
    let a32 = random_tensor("A", DType::Float32, &[40, 60], 0).unwrap();
    let d = err(&f, &[], vec![("A", a32)]);
    assert_eq!(
        d.message,
        "input `A` is float32 (40, 60), but the parameter is declared as float16 with 2 dimension(s)"
    );
    let d = err(&f, &[("Q", 1)], vec![]);
    assert_eq!(
        d.message,
        "`Q` is not a symbolic dimension of `gemm` (it has M, N, K)"
    );
    let d = err(&f, &[], vec![("D", a)]);
    assert_eq!(
        d.message,
        "`D` is not a parameter of `gemm` (it has A, B, C)"
    );
}

#[test]
fn huge_shapes_and_grids_are_errors_not_aborts() {
    let cfg = GemmCfg {
        symbolic: true,
        ..GemmCfg::seed(40, 50, 60)
    };
    let f = gemm_kernel(&cfg);
    let d = err(&f, &[("M", 1 << 30), ("N", 1 << 20), ("K", 64)], vec![]);
    assert_eq!(d.message, "`A` is too large to interpret");
    // An int32 dim past its range is refused with the fix, not run on wrapped indices.
    let d = err(
        &f,
        &[("M", i32::MAX as i64), ("N", 1 << 20), ("K", 64)],
        vec![],
    );
    assert!(
        d.message.starts_with(
            "dimension `M` = 2147483647 (as given) is outside 0..=1073741824, the range of an int32 symbolic dim"
        ),
        "{}",
        d.message
    );
    let grid = func(
        "grid",
        &["M"],
        vec![],
        vec![kernel(
            vec![var("M"), var("M")],
            &["bx", "by"],
            vec![],
            vec![],
        )],
    );
    let d = err(&grid, &[("M", 1 << 13)], vec![]);
    assert_eq!(
        d.message,
        "a grid of 67108864 blocks is more than the interpreter runs (at most 16777216)"
    );
}

/// What a GPU launch cannot have, the interpreter does not run either, with the extent or
/// the allocation located: CUDA's grid limits (past 65535 along y here), a shared buffer
/// past every target's shared memory, a buffer past the interpreter's element count (each
/// with its own message: a 1 GiB shared buffer was once "extent 16384 is negative").
#[test]
fn launches_past_the_hardware_are_located_errors() {
    let src = |alloc: &str, grid: &str| {
        format!(
            "N = T.symbolic(\"N\")\n\n@T.prim_func\ndef f(A: T.Tensor((N,), \"float32\")):\n    with T.Kernel({grid}, threads=1) as (bx, by):\n        {alloc}\n        L[0, 0] = A[0]\n        A[0] = L[0, 0]\n"
        )
    };
    let text = |s: &str, d: &Diagnostic| s[d.span.start..d.span.end].to_string();
    let s = src("L = T.alloc_local((1, 1), \"float32\")", "1, N");
    let d = err(&tlc_ir::parse(&s).unwrap(), &[("N", 70_000)], vec![]);
    assert_eq!(
        d.message,
        "a grid of 70000 blocks along y is more than a launch can have"
    );
    assert_eq!(text(&s, &d), "N");
    let s = src("L = T.alloc_local((1, 1), \"float32\")", "1, N - 5");
    let d = err(&tlc_ir::parse(&s).unwrap(), &[("N", 2)], vec![]);
    assert_eq!(d.message, "grid extent -3 along y is negative");
    let s = src("L = T.alloc_shared((N, 16384), \"float32\")", "1, 1");
    let d = err(&tlc_ir::parse(&s).unwrap(), &[("N", 16384)], vec![]);
    assert_eq!(
        d.message,
        "shared buffer `L` needs 1073741824 bytes, more than the 232448 bytes of shared memory a block may have on any target (block (0, 0))"
    );
    assert_eq!(text(&s, &d), "N");
    let s = src("L = T.alloc_local((N, N), \"float32\")", "1, 1");
    let d = err(&tlc_ir::parse(&s).unwrap(), &[("N", 70_000)], vec![]);
    assert_eq!(
        d.message,
        "cannot allocate `L`: its shape (70000, 70000) has more than the 268435456 elements the interpreter holds in one buffer (block (0, 0))"
    );
    let s = src("L = T.alloc_local((N - 3, 1), \"float32\")", "1, 1");
    let d = err(&tlc_ir::parse(&s).unwrap(), &[("N", 1)], vec![]);
    assert_eq!(
        d.message,
        "cannot allocate `L`: extent -2 is negative (block (0, 0))"
    );
    assert_eq!(text(&s, &d), "N - 3");
}

/// Dims a launch solves from extents of other forms (`batch + 1`, `H * 2`: a varlen
/// kernel's `cu_seqlens`): read off the inputs; an extent no size solves is a located
/// error naming the form.
#[test]
fn dims_solved_from_offset_and_scaled_extents() {
    let src = "batch = T.symbolic(\"batch\")\nH = T.symbolic(\"H\")\n\n@T.prim_func\ndef f(\n    cu: T.Tensor((batch + 1,), \"int32\"),\n    X: T.Tensor((H * 2, 4), \"float32\"),\n    Out: T.Tensor((batch + 1, H * 2), \"float32\"),\n):\n    with T.Kernel(batch, threads=32) as b:\n        for h in T.Parallel(32):\n            if h < H * 2:\n                Out[b, h] = T.cast(cu[b + 1] - cu[b], \"float32\") * X[h, 0]\n";
    let f = tlc_ir::parse(src).expect("parses");
    tlc_ir::verifier::verify(&f).expect("B5 accepts dims solved from `batch + 1`, `H * 2`");
    let cu = Tensor::from_i64(DType::Int32, &[5], &[0, 3, 4, 9, 9]).unwrap();
    let x = random_tensor("X", DType::Float32, &[6, 4], 0).unwrap();
    let out = try_run(&f, &[], vec![("cu", cu), ("X", x.clone())], 1).expect("runs");
    assert_eq!(out["Out"].shape(), &[5, 6]);
    let (o, xv) = (out["Out"].to_f64(), x.to_f64());
    assert_eq!(
        o[6 + 2],
        1.0 * xv[2 * 4],
        "Out[1, 2] = (cu[2] - cu[1]) * X[2, 0]"
    );
    let empty = Tensor::from_i64(DType::Int32, &[0], &[]).unwrap();
    let d = err(&f, &[], vec![("cu", empty), ("X", x)]);
    assert!(
        d.message
            .contains("extent 0 where the parameter declares `batch + 1`")
            && d.message.contains("is not d + 1 for any size"),
        "{}",
        d.message
    );
    let odd = random_tensor("X", DType::Float32, &[7, 4], 0).unwrap();
    let cu = Tensor::from_i64(DType::Int32, &[2], &[0, 1]).unwrap();
    let d = err(&f, &[], vec![("cu", cu), ("X", odd)]);
    assert!(d.message.contains("7 is not 2 * d"), "{}", d.message);
}
