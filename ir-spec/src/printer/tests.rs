//! Printer tests on IR built in code (the parser is tested against the printer elsewhere).

use super::print_func;
use super::testkit::*;
use crate::dtype::DType;
use crate::ir::*;
use crate::span::Span;

const SEED: &str = r#"@T.prim_func
def gemm_schedule(
    A: T.Tensor((4096, 1024), "float16"),
    B: T.Tensor((1024, 2048), "float16"),
    C: T.Tensor((4096, 2048), "float16"),
):
    with T.Kernel(16, 32, threads=128) as (bx, by):
        T.use_swizzle(panel_size=10)
        A_shared = T.alloc_shared((128, 32), "float16")
        B_shared = T.alloc_shared((32, 128), "float16")
        C_local = T.alloc_fragment((128, 128), "float32")
        T.clear(C_local)
        for ko in T.Pipelined(32, num_stages=3):
            T.copy(A[by * 128, ko * 32], A_shared)
            for k, j in T.Parallel(32, 128):
                B_shared[k, j] = B[ko * 32 + k, bx * 128 + j]
            T.gemm(A_shared, B_shared, C_local)
        T.copy(C_local, C[by * 128, bx * 128])
"#;

#[test]
fn seed_kernel_prints_as_in_the_spec() {
    assert_eq!(print_func(&seed()), SEED);
}

/// A kernel with one grid dim and an empty body, inside a function with no params.
fn single_kernel(k: Kernel) -> PrimFunc {
    func("f", Vec::new(), vec![stmt(StmtKind::Kernel(k))])
}

#[test]
fn empty_bodies_print_pass() {
    assert_eq!(
        print_func(&func("f", Vec::new(), Vec::new())),
        "@T.prim_func\ndef f():\n    pass\n"
    );
    let k = kernel(&[4], &["bx"], &[32, 4], Vec::new());
    assert_eq!(
        print_func(&single_kernel(k)),
        "@T.prim_func\ndef f():\n    with T.Kernel(4, threads=(32, 4)) as bx:\n        pass\n"
    );
    // Allocations already fill the block: no `pass`.
    let k = kernel(
        &[4],
        &["bx"],
        &[32],
        vec![decl("s", &[8], DType::Float32, Scope::Local)],
    );
    assert_eq!(
        print_func(&single_kernel(k)),
        "@T.prim_func\ndef f():\n    with T.Kernel(4, threads=32) as bx:\n        s = T.alloc_local((8,), \"float32\")\n"
    );
}

#[test]
fn symbolic_dims_and_one_dimensional_shapes() {
    let mut f = func(
        "vec",
        vec![BufferDecl {
            name: id("X"),
            dtype: DType::BFloat16,
            shape: vec![var("N")],
            scope: Scope::Global,
            span: Span::DUMMY,
        }],
        vec![stmt(StmtKind::Kernel(kernel(
            &[1],
            &["b"],
            &[1],
            Vec::new(),
        )))],
    );
    f.dims = vec![dim("N"), dim("M")];
    assert_eq!(
        print_func(&f),
        "N = T.symbolic(\"N\")\nM = T.symbolic(\"M\")\n\n@T.prim_func\ndef vec(\n    X: T.Tensor((N,), \"bfloat16\"),\n):\n    with T.Kernel(1, threads=1) as b:\n        pass\n"
    );
}

#[test]
fn copy_region_forms() {
    let params = vec![
        param("A", &[64, 64], DType::Float16),
        param("D", &[4, 64, 64], DType::Float16),
    ];
    let allocs = vec![
        decl("S", &[16, 16], DType::Float16, Scope::Shared),
        decl("R", &[1, 16], DType::Float16, Scope::Shared),
        decl("T", &[32, 32], DType::Float16, Scope::Shared),
    ];
    let i = || var("bx");
    let body = vec![
        // Whole to whole.
        copy(whole("S", &[16, 16]), whole("S", &[16, 16])),
        // Corner source: extents match the whole destination.
        copy(
            region("A", vec![(i(), int(16)), (int(0), int(16))]),
            whole("S", &[16, 16]),
        ),
        // Both slices with matching extents: only the source becomes a corner.
        copy(
            region("A", vec![(i(), int(16)), (int(8), int(16))]),
            region("T", vec![(int(0), int(16)), (int(0), int(16))]),
        ),
        // The destination has a leading extent-1 dim: a lower-rank corner still fits.
        copy(
            region("A", vec![(int(3), int(16)), (int(0), int(16))]),
            region(
                "D",
                vec![(i(), int(1)), (int(3), int(16)), (int(0), int(16))],
            ),
        ),
        // A rank-3 corner opposite a whole rank-2 buffer: the corner pads with 1s.
        copy(
            whole("R", &[1, 16]),
            region(
                "D",
                vec![(int(0), int(1)), (int(2), int(1)), (i(), int(16))],
            ),
        ),
        // Extents differ: slices on both sides, all three slice spellings.
        copy(
            region(
                "A",
                vec![
                    (int(0), int(8)),
                    (int(4), int(8)),
                    (add(i(), int(1)), int(2)),
                ],
            ),
            region(
                "S",
                vec![(i(), bin(BinOp::Sub, var("n"), int(1))), (int(0), int(1))],
            ),
        ),
    ];
    let mut k = kernel(&[4], &["bx"], &[128], allocs);
    k.body = body;
    let text = print_func(&func("f", params, vec![stmt(StmtKind::Kernel(k))]));
    let lines: Vec<&str> = text.lines().filter(|l| l.contains("T.copy")).collect();
    assert_eq!(
        lines,
        [
            "        T.copy(S, S)",
            "        T.copy(A[bx, 0], S)",
            "        T.copy(A[bx, 8], T[0:16, 0:16])",
            "        T.copy(A[3, 0], D[bx:bx + 1, 3:19, 0:16])",
            "        T.copy(R, D[0, 2, bx])",
            "        T.copy(A[0:8, 4:12, bx + 1:bx + 3], S[bx:bx + (n - 1), 0:1])",
        ]
    );
}

#[test]
fn fill_gemm_and_options() {
    let allocs = vec![
        decl("a", &[64, 32], DType::Float16, Scope::Shared),
        decl("b", &[64, 32], DType::Float16, Scope::Shared),
        decl("c", &[32, 32], DType::Float32, Scope::Fragment),
    ];
    let mut g = gemm(
        whole("a", &[64, 32]),
        region("b", vec![(int(0), int(64)), (int(0), int(32))]),
        whole("c", &[32, 32]),
    );
    g.trans_a = true;
    g.trans_b = false;
    g.policy = WarpPolicy::FullRow;
    g.clear_accum = true;
    let mut g2 = g.clone();
    g2.trans_a = false;
    g2.trans_b = true;
    g2.policy = WarpPolicy::FullCol;
    g2.clear_accum = false;
    let mut k = kernel(&[1], &["bx"], &[128], allocs);
    k.body = vec![
        fill(whole("c", &[32, 32]), int(0)),
        fill(whole("c", &[32, 32]), float(0.0)),
        fill(
            region("c", vec![(int(0), int(16)), (var("bx"), int(32))]),
            int(-1),
        ),
        stmt(StmtKind::Gemm(g)),
        stmt(StmtKind::Gemm(g2)),
    ];
    let text = print_func(&single_kernel(k));
    let body: Vec<&str> = text.lines().skip(6).collect();
    assert_eq!(
        body,
        [
            "        T.clear(c)",
            "        T.fill(c, 0.0)",
            "        T.fill(c[0:16, bx:bx + 32], -1)",
            "        T.gemm(a, b, c, transpose_A=True, policy=T.GemmWarpPolicy.FullRow, clear_accum=True)",
            "        T.gemm(a, b, c, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)",
        ]
    );
}

/// Every loop kind, `if`/`elif`/`else`, lets, notes, layout annotations and column swizzle.
fn control_flow() -> PrimFunc {
    let allocs = vec![
        decl("S", &[32, 32], DType::Float16, Scope::Shared),
        decl("acc", &[4], DType::Float32, Scope::Local),
    ];
    let mut k = kernel(&[8, 4, 2], &["bx", "by", "bz"], &[32, 2, 2], allocs);
    k.swizzle = Some(Swizzle {
        panel_size: int(4),
        order: RasterOrder::Column,
        span: Span::DUMMY,
    });
    k.layouts = vec![LayoutAnnotation {
        buffer: id("S"),
        layout: Layout::Swizzled,
        span: Span::DUMMY,
    }];
    let cond = |a: &str, n: i64| bin(BinOp::Lt, var(a), int(n));
    let if_ = |c: Expr, t: Vec<Stmt>, e: Vec<Stmt>| {
        stmt(StmtKind::If {
            cond: c,
            then_body: t,
            else_body: e,
        })
    };
    let set = |i: Expr, v: Expr| store("acc", vec![i], v);
    k.body = vec![
        stmt(StmtKind::Note("tile level".into())),
        let_("base", None, mul(var("bx"), int(32))),
        let_("scale", Some(DType::Float32), float(0.5)),
        loop_(
            "ko",
            ForKind::Pipelined {
                num_stages: Expr::int(2),
                order: vec![0, 1],
                stage: vec![0, 1],
            },
            1,
            var("N"),
            vec![loop_(
                "u",
                ForKind::Unroll,
                0,
                int(4),
                vec![set(var("u"), float(1.0))],
            )],
        ),
        loop_(
            "tx",
            ForKind::ThreadBinding(ThreadTag::ThreadX),
            0,
            int(32),
            vec![loop_("w", ForKind::Serial, 2, int(6), Vec::new())],
        ),
        // A parallel loop whose body is not exactly one parallel loop is not merged.
        parallel(
            "i",
            32,
            vec![
                parallel("j", 32, vec![store("S", vec![var("i"), var("j")], int(0))]),
                let_("z", None, int(1)),
            ],
        ),
        parallel(
            "p",
            2,
            vec![parallel(
                "q",
                2,
                vec![parallel(
                    "r",
                    4,
                    vec![store(
                        "S",
                        vec![add(var("p"), var("q")), var("r")],
                        load("S", vec![var("r"), var("p")]),
                    )],
                )],
            )],
        ),
        if_(
            cond("bx", 1),
            vec![set(int(0), var("scale"))],
            vec![if_(
                cond("by", 2),
                Vec::new(),
                vec![if_(
                    bin(
                        BinOp::And,
                        cond("bz", 1),
                        Expr::new(
                            ExprKind::Unary(UnOp::Not, Box::new(boolean(false))),
                            Span::DUMMY,
                        ),
                    ),
                    vec![set(int(1), float(2.0))],
                    vec![
                        set(int(2), float(3.0)),
                        stmt(StmtKind::Note("in the last branch".into())),
                        set(int(3), float(4.0)),
                    ],
                )],
            )],
        ),
    ];
    let mut f = func(
        "control",
        vec![param("X", &[16], DType::Int8)],
        vec![stmt(StmtKind::Kernel(k))],
    );
    f.dims = vec![dim("N")];
    f
}

#[test]
fn control_flow_snapshot() {
    insta::assert_snapshot!(print_func(&control_flow()));
}

#[test]
fn seed_snapshot_with_symbolic_shapes() {
    // The seed with M, N, K symbolic, ragged grid expressions and a guarded epilogue.
    let mut f = seed();
    f.dims = vec![dim("M"), dim("N"), dim("K")];
    f.params[0].shape = vec![var("M"), var("K")];
    f.params[1].shape = vec![var("K"), var("N")];
    f.params[2].shape = vec![var("M"), var("N")];
    if let Some(Stmt {
        kind: StmtKind::Kernel(k),
        ..
    }) = f.body.first_mut()
    {
        k.grid = vec![
            bin(BinOp::CeilDiv, var("N"), int(128)),
            bin(BinOp::CeilDiv, var("M"), int(128)),
        ];
        if let Some(Stmt {
            kind: StmtKind::For(ko),
            ..
        }) = k.body.get_mut(1)
        {
            ko.stop = bin(BinOp::CeilDiv, var("K"), int(32));
        }
        k.body.push(stmt(StmtKind::If {
            cond: bin(
                BinOp::Or,
                bin(BinOp::Ge, mul(var("by"), int(128)), var("M")),
                bin(BinOp::Eq, bin(BinOp::FloorMod, var("N"), int(128)), int(0)),
            ),
            then_body: vec![fill(whole("C_local", &[128, 128]), float(-0.0))],
            else_body: Vec::new(),
        }));
    }
    insta::assert_snapshot!(print_func(&f));
}

#[test]
fn invalid_ir_still_prints_without_panicking() {
    // Unknown buffers, a global allocation, a parallel loop not starting at 0, no block
    // variables: the verifier rejects all of these, but a dump must still come out.
    let mut k = kernel(
        &[],
        &[],
        &[],
        vec![decl("G", &[4], DType::Int32, Scope::Global)],
    );
    k.body = vec![
        copy(
            whole("Nope", &[4]),
            region("Gone", vec![(var("i"), int(4))]),
        ),
        loop_("p", ForKind::Parallel, 2, int(8), Vec::new()),
    ];
    let text = print_func(&single_kernel(k));
    assert!(text.contains("with T.Kernel(threads=()):"), "{text}");
    assert!(
        text.contains("G = T.alloc_global((4,), \"int32\")"),
        "{text}"
    );
    assert!(text.contains("T.copy(Nope[0], Gone[i:i + 4])"), "{text}");
    assert!(text.contains("for p in T.Parallel(2, 8):"), "{text}");
    assert!(text.ends_with("pass\n"));
}

/// A thread-level kernel: thread binding, vectorized loops, barriers, a note, a shared arena
/// placed after the layout annotation.
fn thread_level() -> PrimFunc {
    let allocs = vec![
        decl("A_shared", &[128, 32], DType::Float16, Scope::Shared),
        decl("B_shared", &[32, 128], DType::Float16, Scope::Shared),
        decl("acc", &[8], DType::Float32, Scope::Local),
    ];
    let mut k = kernel(&[16, 32], &["bx", "by"], &[128], allocs);
    k.layouts = vec![LayoutAnnotation {
        buffer: id("A_shared"),
        layout: Layout::Swizzled,
        span: Span::DUMMY,
    }];
    k.arena = Some(Arena {
        bytes: 16384,
        offsets: vec![(id("A_shared"), 0), (id("B_shared"), 8192)],
    });
    // (tx + k * 128) // 4 and (tx + k * 128) % 4 * 8 + v.
    let flat = || add(var("tx"), mul(var("k"), int(128)));
    let row = || bin(BinOp::FloorDiv, flat(), int(4));
    let col = || add(mul(bin(BinOp::FloorMod, flat(), int(4)), int(8)), var("v"));
    k.body = vec![loop_(
        "tx",
        ForKind::ThreadBinding(ThreadTag::ThreadX),
        0,
        int(128),
        vec![
            serial(
                "k",
                4,
                vec![loop_(
                    "v",
                    ForKind::Vectorized,
                    0,
                    int(8),
                    vec![store(
                        "A_shared",
                        vec![row(), col()],
                        load("A", vec![add(mul(var("by"), int(128)), row()), col()]),
                    )],
                )],
            ),
            stmt(StmtKind::Barrier),
            stmt(StmtKind::Note("thread level: after the barrier".into())),
            loop_(
                "j",
                ForKind::Vectorized,
                0,
                int(8),
                vec![store("acc", vec![var("j")], float(0.0))],
            ),
        ],
    )];
    func(
        "thread_level",
        vec![param("A", &[4096, 32], DType::Float16)],
        vec![stmt(StmtKind::Kernel(k))],
    )
}

#[test]
fn thread_level_snapshot_round_trips() {
    let f = thread_level();
    let text = print_func(&f);
    match crate::parse::parse(&text) {
        Ok(back) => assert_eq!(back, f, "{text}"),
        Err(d) => panic!("{d:#?}\n{text}"),
    }
    insta::assert_snapshot!(text);
}

#[test]
fn empty_arena_prints_an_empty_dict() {
    let mut k = kernel(&[1], &["bx"], &[32], Vec::new());
    k.arena = Some(Arena {
        bytes: 0,
        offsets: Vec::new(),
    });
    assert_eq!(
        print_func(&single_kernel(k)),
        "@T.prim_func\ndef f():\n    with T.Kernel(1, threads=32) as bx:\n        T.shared_arena(bytes=0, offsets={})\n"
    );
}

fn elem(buffer: &str, indices: Vec<Expr>) -> ElemRef {
    ElemRef {
        buffer: id(buffer),
        indices,
    }
}

fn intrinsic(i: Intrinsic) -> Stmt {
    stmt(StmtKind::Intrinsic(i))
}

/// A thread-level kernel with every intrinsic and every layout: one warp of cp.async
/// copies (predicated and not), the commit / wait pair, ldmatrix (plain and transposed) and
/// an mma.
pub(crate) fn intrinsics_kernel() -> PrimFunc {
    let allocs = vec![
        decl("A_shared", &[2, 16, 16], DType::Float16, Scope::Shared),
        decl("B_shared", &[16, 8], DType::Float16, Scope::Shared),
        decl("A_frag", &[8], DType::Float16, Scope::Local),
        decl("B_frag", &[4], DType::Float16, Scope::Local),
        decl("C_frag", &[16, 8], DType::Float32, Scope::Fragment),
        decl("acc", &[4], DType::Float32, Scope::Local),
    ];
    let mut k = kernel(&[1], &["bx"], &[32], allocs);
    k.layouts = vec![
        LayoutAnnotation {
            buffer: id("A_shared"),
            layout: Layout::Swizzle { bytes: 32 },
            span: Span::DUMMY,
        },
        LayoutAnnotation {
            buffer: id("B_shared"),
            layout: Layout::Padded { pad: 8 },
            span: Span::DUMMY,
        },
        LayoutAnnotation {
            buffer: id("C_frag"),
            layout: Layout::MmaAccumulator {
                warps_m: 1,
                warps_n: 1,
            },
            span: Span::DUMMY,
        },
    ];
    let tx = || var("tx");
    let div = |a: Expr, b: i64| bin(BinOp::FloorDiv, a, int(b));
    let rem = |a: Expr, b: i64| bin(BinOp::FloorMod, a, int(b));
    let lane_row = || add(rem(tx(), 8), mul(rem(div(tx(), 16), 2), int(8)));
    let lane_col = || mul(rem(div(tx(), 8), 2), int(8));
    k.body = vec![loop_(
        "tx",
        ForKind::ThreadBinding(ThreadTag::ThreadX),
        0,
        int(32),
        vec![
            serial(
                "s",
                2,
                vec![
                    intrinsic(Intrinsic::CpAsync {
                        dst: elem(
                            "A_shared",
                            vec![var("s"), div(tx(), 2), mul(rem(tx(), 2), int(8))],
                        ),
                        src: elem("A", vec![div(tx(), 2), mul(rem(tx(), 2), int(8))]),
                        bytes: 16,
                        pred: None,
                    }),
                    intrinsic(Intrinsic::CommitGroup),
                ],
            ),
            intrinsic(Intrinsic::CpAsync {
                dst: elem("B_shared", vec![div(tx(), 2), mul(rem(tx(), 2), int(4))]),
                src: elem("B", vec![div(tx(), 2), mul(rem(tx(), 2), int(4))]),
                bytes: 8,
                pred: Some(bin(BinOp::Lt, tx(), int(32))),
            }),
            intrinsic(Intrinsic::CommitGroup),
            intrinsic(Intrinsic::WaitGroup { n: 0 }),
            stmt(StmtKind::Barrier),
            intrinsic(Intrinsic::Ldmatrix {
                dst: elem("A_frag", vec![int(0)]),
                src: elem("A_shared", vec![int(1), lane_row(), lane_col()]),
                num: 4,
                trans: false,
            }),
            intrinsic(Intrinsic::Ldmatrix {
                dst: elem("B_frag", vec![int(0)]),
                src: elem("B_shared", vec![rem(tx(), 16), int(0)]),
                num: 2,
                trans: true,
            }),
            intrinsic(Intrinsic::Mma {
                acc: elem("acc", vec![int(0)]),
                a: elem("A_frag", vec![int(0)]),
                b: elem("B_frag", vec![int(0)]),
                packed_int4: false,
            }),
        ],
    )];
    func(
        "intrinsics",
        vec![
            param("A", &[16, 16], DType::Float16),
            param("B", &[16, 8], DType::Float16),
        ],
        vec![stmt(StmtKind::Kernel(k))],
    )
}

#[test]
fn intrinsics_and_layouts_print_and_round_trip() {
    let f = intrinsics_kernel();
    let text = print_func(&f);
    for line in [
        "T.annotate_layout({A_shared: T.make_swizzled_layout(A_shared, bytes=32), B_shared: T.make_padded_layout(B_shared, pad=8), C_frag: T.mma_accumulator_layout(C_frag, warps_m=1, warps_n=1)})",
        "T.cp_async(A_shared[s, tx // 2, tx % 2 * 8], A[tx // 2, tx % 2 * 8], 16)",
        "T.cp_async(B_shared[tx // 2, tx % 2 * 4], B[tx // 2, tx % 2 * 4], 8, tx < 32)",
        "T.cp_async_commit()",
        "T.cp_async_wait(0)",
        "T.ldmatrix(A_frag[0], A_shared[1, tx % 8 + tx // 16 % 2 * 8, tx // 8 % 2 * 8], num=4, trans=False)",
        "T.ldmatrix(B_frag[0], B_shared[tx % 16, 0], num=2, trans=True)",
        "T.mma_sync(acc[0], A_frag[0], B_frag[0])",
    ] {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }
    match crate::parse::parse(&text) {
        Ok(back) => assert_eq!(back, f, "{text}"),
        Err(d) => panic!("{d:#?}\n{text}"),
    }
    if let Err(d) = crate::verifier::verify(&f) {
        panic!("{d:#?}\n{text}");
    }
    insta::assert_snapshot!(text);
}

#[test]
fn every_layout_round_trips() {
    for layout in [
        Layout::Swizzled,
        Layout::Swizzle { bytes: 128 },
        Layout::Swizzle { bytes: 64 },
        Layout::Padded { pad: 4 },
        Layout::MmaAccumulator {
            warps_m: 2,
            warps_n: 4,
        },
    ] {
        let scope = match layout {
            Layout::MmaAccumulator { .. } => Scope::Fragment,
            _ => Scope::Shared,
        };
        let mut k = kernel(
            &[1],
            &["bx"],
            &[256],
            vec![decl("X", &[64, 64], DType::Float16, scope)],
        );
        k.layouts = vec![LayoutAnnotation {
            buffer: id("X"),
            layout,
            span: Span::DUMMY,
        }];
        let f = single_kernel(k);
        let text = print_func(&f);
        match crate::parse::parse(&text) {
            Ok(back) => assert_eq!(back, f, "{text}"),
            Err(d) => panic!("{d:#?}\n{text}"),
        }
    }
}

#[test]
fn notes_print_escaped_and_parse_back_exactly() {
    let texts = [
        "plain",
        "",
        "\"quoted\" and 'single'",
        "a backslash \\ and \\n (not a newline)",
        "two\nlines\r\n\ttabbed",
        "control \u{0}\u{1}\u{1b}\u{7f}\u{85} characters",
        "K × 2 bytes — ≠ 16 → cp.async",
        "\\x41 is not \\x escaped",
    ];
    let mut k = kernel(&[1], &["bx"], &[32], Vec::new());
    let note = |t: &str| crate::build::note(t, Span::DUMMY);
    k.body = texts.iter().map(|t| note(t)).collect();
    let mut f = single_kernel(k);
    f.body.insert(0, note("outside the kernel"));
    let text = print_func(&f);
    assert!(
        text.contains(r#"T.note("two\nlines\r\n\ttabbed")"#),
        "{text}"
    );
    assert!(
        text.contains(r#"T.note("control \x00\x01\x1b\x7f\x85 characters")"#),
        "{text}"
    );
    assert!(
        text.contains(r#"T.note("\"quoted\" and 'single'")"#),
        "{text}"
    );
    assert!(
        text.contains("    T.note(\"outside the kernel\")\n"),
        "{text}"
    );
    // One line per note: no raw control character reaches the text.
    assert!(!text.chars().any(|c| c.is_control() && c != '\n'), "{text}");
    match crate::parse::parse(&text) {
        Ok(back) => assert_eq!(back, f, "{text}"),
        Err(d) => panic!("{d:#?}\n{text}"),
    }
    if let Err(d) = crate::verifier::verify(&f) {
        panic!("{d:#?}\n{text}");
    }
}
