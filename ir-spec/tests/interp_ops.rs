//! Copy, fill, loops, lets, ifs and scalar expressions, each against a formula computed here.
//! Every comparison in this file is exact: the expected values are computed with the
//! documented rounding (f32 arithmetic rounded to the dtype), so no tolerance is needed.

use crate::interp_support;

use half::f16;
use interp_support::*;
use tlc_ir::interp::{random_tensor, Tensor};
use tlc_ir::{BinOp, DType, Scope};

/// `C[i] = A[i] * 2.0 + B[i]` over a 1-D grid of 64-wide blocks with a tail guard.
fn elementwise() -> tlc_ir::PrimFunc {
    let n = var("N");
    func(
        "axpb",
        &["N"],
        vec![
            param("A", vec![n.clone()], DType::Float16),
            param("B", vec![n.clone()], DType::Float16),
            param("C", vec![n.clone()], DType::Float16),
        ],
        vec![kernel(
            vec![ceildiv(n.clone(), int(64))],
            &["bx"],
            vec![],
            vec![for_kind(
                "i",
                int(64),
                tlc_ir::ForKind::Parallel,
                vec![
                    let_("g", None, add(mul(var("bx"), int(64)), var("i"))),
                    if_(
                        lt(var("g"), n.clone()),
                        vec![store(
                            "C",
                            vec![var("g")],
                            add(
                                mul(load("A", vec![var("g")]), float(2.0)),
                                load("B", vec![var("g")]),
                            ),
                        )],
                        vec![],
                    ),
                ],
            )],
        )],
    )
}

#[test]
fn elementwise_with_ragged_tail() {
    let a = random_tensor("A", DType::Float16, &[1000], 7).unwrap();
    let b = random_tensor("B", DType::Float16, &[1000], 8).unwrap();
    let out = run_with(
        &elementwise(),
        &[],
        vec![("A", a.clone()), ("B", b.clone())],
        3,
    );
    let expected: Vec<f64> = a
        .to_f64()
        .iter()
        .zip(b.to_f64())
        .map(|(&x, y)| {
            let twice = f16::from_f32(x as f32 * 2.0).to_f32();
            f64::from(f16::from_f32(twice + y as f32).to_f32())
        })
        .collect();
    assert_eq!(out["C"].to_f64(), expected);
}

/// One block that evaluates many expressions and stores each into `O[slot]` (float64, so
/// every stored value is exact).
fn expressions_kernel(exprs: Vec<tlc_ir::Expr>, setup: Vec<tlc_ir::Stmt>) -> tlc_ir::PrimFunc {
    let n = exprs.len() as i64;
    let mut body = setup;
    for (i, e) in exprs.into_iter().enumerate() {
        body.push(store("O", vec![int(i as i64)], e));
    }
    func(
        "exprs",
        &[],
        vec![
            param("A", vec![int(4)], DType::Float32),
            param("O", vec![int(n)], DType::Float64),
        ],
        vec![kernel(vec![int(1)], &["bx"], vec![], body)],
    )
}

#[test]
fn scalar_expression_semantics() {
    let setup = vec![
        let_("x", Some(DType::Int32), int(-7)),
        let_("big", Some(DType::Int32), int(i32::MAX as i64)),
        let_("h", Some(DType::Float16), int(2048)),
        let_("u", Some(DType::UInt8), int(250)),
    ];
    let cases: Vec<(tlc_ir::Expr, f64)> = vec![
        (bin(BinOp::FloorDiv, var("x"), int(2)), -4.0),
        (bin(BinOp::Div, var("x"), int(2)), -3.0),
        (bin(BinOp::FloorMod, var("x"), int(2)), 1.0),
        (bin(BinOp::FloorMod, var("x"), int(-2)), -1.0),
        (bin(BinOp::CeilDiv, var("x"), int(2)), -3.0),
        (bin(BinOp::Min, var("x"), int(3)), -7.0),
        (bin(BinOp::Max, var("x"), int(3)), 3.0),
        // int32 arithmetic is exact: it wraps only when converted (docs/ir.md).
        (add(var("big"), int(1)), i32::MAX as f64 + 1.0),
        (cast(DType::Int8, add(var("big"), int(1))), 0.0),
        // uint8 wraps: 250 + 10 = 4.
        (add(var("u"), int(10)), 4.0),
        // float16 arithmetic rounds: 2048 + 1 is not a float16.
        (add(var("h"), int(1)), 2048.0),
        // A float literal meeting float16 becomes float16: 0.1 rounds to 0.0999755859375.
        (
            mul(var("h"), float(0.1)),
            f64::from(f16::from_f32(2048.0 * f16::from_f64(0.1).to_f32()).to_f32()),
        ),
        // int / float mixes become float32.
        (bin(BinOp::Div, var("x"), float(2.0)), -3.5),
        (cast(DType::Int32, load("A", vec![int(1)])), -2.0),
        (cast(DType::UInt8, load("A", vec![int(1)])), 0.0),
        (cast(DType::Float16, float(1.0e5)), f64::INFINITY),
        (cast(DType::Float8E4M3, float(1.0e5)), 448.0),
        // Only the taken branch is evaluated: A[100] would be out of bounds.
        (
            select(
                lt(var("x"), int(0)),
                load("A", vec![int(0)]),
                load("A", vec![int(100)]),
            ),
            0.5,
        ),
        (
            select(bin(BinOp::Gt, var("x"), int(0)), float(1.0), float(-1.0)),
            -1.0,
        ),
        // `and` short-circuits past the out-of-bounds load.
        (
            select(
                bin(
                    BinOp::And,
                    lt(int(5), var("x")),
                    bin(BinOp::Gt, load("A", vec![int(100)]), float(0.0)),
                ),
                float(1.0),
                float(2.0),
            ),
            2.0,
        ),
        (
            select(
                bin(
                    BinOp::Or,
                    lt(var("x"), int(5)),
                    bin(BinOp::Gt, load("A", vec![int(100)]), float(0.0)),
                ),
                float(1.0),
                float(2.0),
            ),
            1.0,
        ),
        (
            cast(
                DType::Float64,
                bin(BinOp::Ne, load("A", vec![int(3)]), load("A", vec![int(3)])),
            ),
            1.0,
        ),
        (
            tlc_ir::Expr::new(
                tlc_ir::ExprKind::Unary(tlc_ir::UnOp::Neg, Box::new(var("x"))),
                tlc_ir::Span::DUMMY,
            ),
            7.0,
        ),
    ];
    let (exprs, expected): (Vec<_>, Vec<f64>) = cases.into_iter().unzip();
    let a = Tensor::from_f64(DType::Float32, &[4], &[0.5, -2.75, 3.0, f64::NAN]).unwrap();
    let out = run_ok(&expressions_kernel(exprs, setup), vec![("A", a)]);
    let got = out["O"].to_f64();
    for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
        assert!(
            g == e || (g.is_nan() && e.is_nan()),
            "case {i}: got {g}, expected {e}"
        );
    }
}

/// A 100x100 float32 array copied through 32x32 float16 shared tiles: partial tiles read
/// zeros past the edge and drop writes past the edge.
#[test]
fn tiled_copy_with_ragged_edges_and_conversion() {
    let f = func(
        "tiled_copy",
        &[],
        vec![
            param("A", vec![int(100), int(100)], DType::Float32),
            param("B", vec![int(100), int(100)], DType::Float32),
            param("Corner", vec![int(32), int(32)], DType::Float32),
        ],
        vec![kernel(
            vec![int(4), int(4)],
            &["bx", "by"],
            vec![alloc("S", &[32, 32], DType::Float16, Scope::Shared)],
            vec![
                copy(
                    region(
                        "A",
                        vec![mul(var("by"), int(32)), mul(var("bx"), int(32))],
                        vec![int(32), int(32)],
                    ),
                    whole("S", &[32, 32]),
                ),
                copy(
                    whole("S", &[32, 32]),
                    region(
                        "B",
                        vec![mul(var("by"), int(32)), mul(var("bx"), int(32))],
                        vec![int(32), int(32)],
                    ),
                ),
                if_(
                    bin(
                        BinOp::And,
                        bin(BinOp::Eq, var("bx"), int(3)),
                        bin(BinOp::Eq, var("by"), int(3)),
                    ),
                    vec![copy(whole("S", &[32, 32]), whole("Corner", &[32, 32]))],
                    vec![],
                ),
            ],
        )],
    );
    let a = random_tensor("A", DType::Float32, &[100, 100], 3).unwrap();
    let out = run_with(&f, &[], vec![("A", a.clone())], 2);
    let av = a.to_f64();
    let rounded: Vec<f64> = av
        .iter()
        .map(|&x| f64::from(f16::from_f64(x).to_f32()))
        .collect();
    assert_eq!(out["B"].to_f64(), rounded);
    let corner = out["Corner"].to_f64();
    for i in 0..32 {
        for j in 0..32 {
            let (r, c) = (96 + i, 96 + j);
            let want = if r < 100 && c < 100 {
                rounded[r * 100 + c]
            } else {
                0.0
            };
            assert_eq!(corner[i * 32 + j], want, "Corner[{i}, {j}]");
        }
    }
}

#[test]
fn copy_matches_shapes_up_to_unit_dims_and_converts_to_fp8() {
    // Row 1 of X (shape (2, 4), region (1, 4)) into Y (shape (4,)), converting to fp8.
    let f = func(
        "row",
        &[],
        vec![
            param("X", vec![int(2), int(4)], DType::Float32),
            param("Y", vec![int(4)], DType::Float8E4M3),
            param("Z", vec![int(4)], DType::Float8E5M2),
        ],
        vec![kernel(
            vec![int(1)],
            &["bx"],
            vec![],
            vec![
                copy(
                    region("X", vec![int(1), int(0)], vec![int(1), int(4)]),
                    whole("Y", &[4]),
                ),
                copy(
                    region("X", vec![int(1), int(0)], vec![int(1), int(4)]),
                    whole("Z", &[4]),
                ),
            ],
        )],
    );
    let x = Tensor::from_f64(
        DType::Float32,
        &[2, 4],
        &[9.0, 9.0, 9.0, 9.0, 1.0625, -0.3, 500.0, 1.1875],
    )
    .unwrap();
    let out = run_ok(&f, vec![("X", x)]);
    assert_eq!(out["Y"].to_f64(), vec![1.0, -0.3125, 448.0, 1.25]);
    assert_eq!(out["Z"].to_f64(), vec![1.0, -0.3125, 512.0, 1.25]);
}

#[test]
fn fill_and_clear_write_converted_values_to_a_region() {
    let f = func(
        "fills",
        &[],
        vec![param("O", vec![int(4), int(6)], DType::Int32)],
        vec![kernel(
            vec![int(1)],
            &["bx"],
            vec![alloc("F", &[4, 6], DType::Int32, Scope::Fragment)],
            vec![
                tlc_ir::Stmt::new(
                    tlc_ir::StmtKind::Fill {
                        dst: whole("F", &[4, 6]),
                        value: int(0),
                    },
                    tlc_ir::Span::DUMMY,
                ),
                // 2.75 converts to int32 by truncation.
                fill(
                    region("F", vec![int(1), int(2)], vec![int(2), int(3)]),
                    float(2.75),
                ),
                copy(whole("F", &[4, 6]), whole("O", &[4, 6])),
            ],
        )],
    );
    let out = run_ok(&f, vec![]);
    let mut expected = vec![0.0; 24];
    for i in 1..3 {
        for j in 2..5 {
            expected[i * 6 + j] = 2.0;
        }
    }
    assert_eq!(out["O"].to_f64(), expected);
}

#[test]
fn blocks_see_their_own_writes_and_apply_in_block_order() {
    // Every block writes O[0] = bx (a race: the last block in linear order wins), writes
    // P[bx] = bx + 1 and reads it back into Q[bx].
    let f = func(
        "blocks",
        &[],
        vec![
            param("O", vec![int(1)], DType::Int32),
            param("P", vec![int(8)], DType::Int32),
            param("Q", vec![int(8)], DType::Int32),
        ],
        vec![
            let_("one", None, int(1)),
            kernel(
                vec![int(8)],
                &["bx"],
                vec![],
                vec![
                    store("O", vec![int(0)], var("bx")),
                    store("P", vec![var("bx")], add(var("bx"), var("one"))),
                    store("Q", vec![var("bx")], load("P", vec![var("bx")])),
                ],
            ),
        ],
    );
    for threads in [1, 3, 8] {
        let out = run_with(&f, &[], vec![], threads);
        assert_eq!(out["O"].to_f64(), vec![7.0]);
        let want: Vec<f64> = (1..=8).map(f64::from).collect();
        assert_eq!(out["P"].to_f64(), want);
        assert_eq!(out["Q"].to_f64(), want);
    }
}

#[test]
fn serial_unroll_and_nested_loops_accumulate_in_a_local() {
    // acc = Σ_{i<5} Σ_{j<3} (i * 3 + j) computed in a local buffer.
    let f = func(
        "loops",
        &[],
        vec![param("O", vec![int(1)], DType::Int64)],
        vec![kernel(
            vec![int(1)],
            &["bx"],
            vec![alloc("acc", &[1], DType::Int64, Scope::Local)],
            vec![
                store("acc", vec![int(0)], int(0)),
                serial(
                    "i",
                    int(5),
                    vec![for_kind(
                        "j",
                        int(3),
                        tlc_ir::ForKind::Unroll,
                        vec![store(
                            "acc",
                            vec![int(0)],
                            add(
                                load("acc", vec![int(0)]),
                                add(mul(var("i"), int(3)), var("j")),
                            ),
                        )],
                    )],
                ),
                store("O", vec![int(0)], load("acc", vec![int(0)])),
            ],
        )],
    );
    assert_eq!(run_ok(&f, vec![])["O"].to_f64(), vec![105.0]);
}
