//! One test per verifier rule (each rule of docs/ir.md), plus the seed kernel and `FuncInfo`.

use super::{verify, verify_with, FuncInfo, Requirements};
use crate::diagnostic::Diagnostic;
use crate::dtype::DType;
use crate::ir::*;
use crate::printer::testkit::*;
use crate::span::Span;
use crate::target::Target;

const F16: DType = DType::Float16;
const F32: DType = DType::Float32;

fn errors(f: &PrimFunc) -> Vec<Diagnostic> {
    match verify(f) {
        Ok(_) => Vec::new(),
        Err(d) => d,
    }
}

fn ok(f: &PrimFunc) -> FuncInfo {
    match verify(f) {
        Ok(info) => info,
        Err(d) => panic!("unexpected errors: {d:#?}"),
    }
}

/// Asserts exactly one error, whose message contains `needle`; returns it.
#[track_caller]
fn one(f: &PrimFunc, needle: &str) -> Diagnostic {
    let errs = errors(f);
    assert_eq!(
        errs.len(),
        1,
        "expected one error containing {needle:?}, got {errs:#?}"
    );
    assert!(
        errs[0].message.contains(needle),
        "expected {needle:?} in {:?}",
        errs[0].message
    );
    errs[0].clone()
}

/// `A: (64, 64) f16` and `C: (64, 64) f32` params, a 1-D grid `bx` with 128 threads, `allocs`
/// and `body` inside the kernel.
fn kern(allocs: Vec<BufferDecl>, body: Vec<Stmt>) -> PrimFunc {
    let mut k = kernel(&[2], &["bx"], &[128], allocs);
    k.body = body;
    func(
        "f",
        vec![param("A", &[64, 64], F16), param("C", &[64, 64], F32)],
        vec![stmt(StmtKind::Kernel(k))],
    )
}

fn shared(name: &str, shape: &[i64], dtype: DType) -> BufferDecl {
    decl(name, shape, dtype, Scope::Shared)
}

fn frag(name: &str, shape: &[i64], dtype: DType) -> BufferDecl {
    decl(name, shape, dtype, Scope::Fragment)
}

fn a_load(i: Expr, j: Expr) -> Expr {
    load("A", vec![i, j])
}

fn kernel_of(f: &mut PrimFunc) -> &mut Kernel {
    match f.body.first_mut().map(|s| &mut s.kind) {
        Some(StmtKind::Kernel(k)) => k,
        _ => panic!("no kernel"),
    }
}

// ---- valid programs ----

#[test]
fn seed_kernel_verifies_and_reports_facts() {
    let info = ok(&seed());
    assert_eq!(info.buffers.len(), 6);
    assert_eq!(
        info.buffer("C_local").map(|b| b.scope),
        Some(Scope::Fragment)
    );
    assert_eq!(info.var_dtype("ko"), Some(DType::Int32));
    assert_eq!(info.var_dtype("bx"), Some(DType::Int32));
    assert_eq!(info.kernels.len(), 1);
    assert_eq!(info.kernels[0].num_threads, 128);
    assert_eq!(info.kernels[0].threads, vec![128]);
    assert_eq!(info.kernels[0].block_vars, vec!["bx", "by"]);
    assert_eq!(
        info.kernels[0].allocs,
        vec!["A_shared", "B_shared", "C_local"]
    );
    assert_eq!(
        info.expr_dtype(&load("B_shared", vec![int(0), int(0)])),
        Some(F16)
    );
}

#[test]
fn lets_take_the_type_of_their_value_or_their_declaration() {
    let f = kern(
        Vec::new(),
        vec![
            let_("x", None, a_load(int(0), var("bx"))),
            let_("y", Some(F32), int(1)),
            let_("z", None, add(var("bx"), int(1))),
            store("C", vec![var("z"), int(0)], mul(var("x"), var("y"))),
        ],
    );
    let info = ok(&f);
    assert_eq!(info.var_dtype("x"), Some(F16));
    assert_eq!(info.var_dtype("y"), Some(F32));
    assert_eq!(info.var_dtype("z"), Some(DType::Int32));
}

#[test]
fn symbolic_shapes_and_global_to_global_copies_are_valid() {
    let mut f = func(
        "g",
        vec![
            BufferDecl {
                name: id("X"),
                dtype: F16,
                shape: vec![var("N"), int(64)],
                scope: Scope::Global,
                span: Span::DUMMY,
            },
            param("Y", &[64, 64], F32),
        ],
        Vec::new(),
    );
    f.dims = vec![dim("N")];
    let mut k = kernel(&[1], &["bx"], &[32, 4], Vec::new());
    k.body = vec![copy(
        region("X", vec![(var("bx"), int(64)), (int(0), int(64))]),
        whole("Y", &[64, 64]),
    )];
    k.grid = vec![bin(BinOp::CeilDiv, var("N"), int(64))];
    f.body = vec![stmt(StmtKind::Kernel(k))];
    let info = ok(&f);
    assert_eq!(info.dims, vec!["N"]);
    assert_eq!(info.kernels[0].num_threads, 128);
}

// ---- names ----

#[test]
fn undefined_variable_points_at_the_use() {
    let f = kern(
        Vec::new(),
        vec![store("C", vec![int(0), int(0)], at(var("q"), 40, 41))],
    );
    let d = one(&f, "cannot find value `q` in this scope");
    assert_eq!((d.span.start, d.span.end), (40, 41));
}

#[test]
fn undefined_buffers_in_loads_stores_regions_and_annotations() {
    let mut f = kern(
        Vec::new(),
        vec![
            let_("x", None, load("Nope", vec![int(0)])),
            store("Gone", vec![int(0)], int(1)),
            copy(whole("Missing", &[4]), whole("A", &[64, 64])),
        ],
    );
    kernel_of(&mut f).layouts = vec![LayoutAnnotation {
        buffer: id("Absent"),
        layout: Layout::Swizzled,
        span: Span::DUMMY,
    }];
    let msgs: Vec<String> = errors(&f).into_iter().map(|d| d.message).collect();
    for name in ["Absent", "Nope", "Gone", "Missing"] {
        let want = format!("cannot find buffer `{name}` in this scope");
        assert!(msgs.contains(&want), "{want:?} not in {msgs:?}");
    }
    assert_eq!(msgs.len(), 4, "{msgs:?}");
}

#[test]
fn a_name_defined_twice_is_an_error_with_a_note_at_the_first() {
    let f = kern(
        Vec::new(),
        vec![
            loop_("i", ForKind::Serial, 0, int(4), Vec::new()),
            stmt(StmtKind::For(For {
                var: id_at("i", 50),
                start: int(0),
                stop: int(4),
                kind: ForKind::Serial,
                body: Vec::new(),
            })),
        ],
    );
    let d = one(&f, "the name `i` is defined more than once");
    assert_eq!(d.span.start, 50);
    assert!(d.notes[0]
        .message
        .contains("first defined here, as a loop variable"));
}

#[test]
fn every_kind_of_definition_takes_part_in_redefinition() {
    // A let shadowing a loop variable, an allocation named like a parameter, a block variable
    // named like a dim, a duplicate parameter.
    let mut f = kern(
        vec![shared("A", &[4], F16)],
        vec![loop_(
            "i",
            ForKind::Serial,
            0,
            int(4),
            vec![let_("i", None, int(1))],
        )],
    );
    f.dims = vec![dim("bx")];
    f.params.push(param("C", &[1], F16));
    let errs = errors(&f);
    let names: Vec<&str> = errs
        .iter()
        .filter(|d| d.message.contains("defined more than once"))
        .map(|d| d.message.split('`').nth(1).unwrap_or(""))
        .collect();
    assert_eq!(names, ["C", "A", "bx", "i"], "{errs:#?}");
}

#[test]
fn let_used_before_its_definition() {
    let f = kern(
        Vec::new(),
        vec![
            store("C", vec![int(0), int(0)], var("late")),
            stmt(StmtKind::Let {
                var: id_at("late", 70),
                dtype: None,
                value: float(1.0),
            }),
        ],
    );
    let d = one(&f, "use of `late` before its definition");
    assert_eq!(d.notes[0].span.map(|s| s.start), Some(70));
}

#[test]
fn loop_variable_used_after_its_loop() {
    let f = kern(
        Vec::new(),
        vec![
            serial("i", 4, Vec::new()),
            store("C", vec![var("i"), int(0)], float(1.0)),
        ],
    );
    one(&f, "`i` is not in scope here");
}

#[test]
fn buffer_used_as_a_value() {
    let f = kern(Vec::new(), vec![store("C", vec![int(0), int(0)], var("A"))]);
    one(&f, "expected a scalar value, found `A`, which is a buffer");
}

// ---- typing ----

#[test]
fn indices_must_be_integers() {
    let f = kern(
        Vec::new(),
        vec![
            store("C", vec![float(1.0), int(0)], float(1.0)),
            let_("x", None, a_load(int(0), float(2.0))),
        ],
    );
    let msgs: Vec<String> = errors(&f).into_iter().map(|d| d.message).collect();
    assert_eq!(msgs.len(), 2, "{msgs:?}");
    assert!(msgs[0].contains("buffer index must be an integer, found float32"));
    assert!(msgs[1].contains("buffer index must be an integer, found float32"));
}

#[test]
fn conditions_must_be_bool() {
    let f = kern(
        Vec::new(),
        vec![stmt(StmtKind::If {
            cond: var("bx"),
            then_body: Vec::new(),
            else_body: Vec::new(),
        })],
    );
    one(&f, "`if` condition must be bool, found int32");
    let select = Expr::new(
        ExprKind::Select(Box::new(int(1)), Box::new(int(2)), Box::new(int(3))),
        Span::new(5, 9),
    );
    let f = kern(Vec::new(), vec![let_("s", None, select)]);
    one(&f, "condition must be bool, found int32");
}

#[test]
fn expressions_must_type_check() {
    let f = kern(
        Vec::new(),
        vec![let_("b", None, at(add(boolean(true), var("bx")), 10, 20))],
    );
    let d = one(&f, "arithmetic on bool");
    assert_eq!(d.span.start, 10);
}

#[test]
fn store_values_must_match_bool_ness() {
    let f = kern(
        vec![frag("M", &[4], DType::Bool)],
        vec![
            store("C", vec![int(0), int(0)], boolean(true)),
            store("M", vec![int(0)], float(1.0)),
            store("M", vec![int(1)], bin(BinOp::Lt, var("bx"), int(1))),
            store("C", vec![int(0), int(1)], var("bx")),
        ],
    );
    let msgs: Vec<String> = errors(&f).into_iter().map(|d| d.message).collect();
    assert_eq!(
        msgs,
        [
            "mismatched types: `C` holds float32 but the value is bool",
            "mismatched types: `M` holds bool but the value is float32",
        ]
    );
}

#[test]
fn loop_bounds_must_be_integers() {
    let f = kern(
        Vec::new(),
        vec![loop_("i", ForKind::Serial, 0, float(4.0), Vec::new())],
    );
    one(&f, "a loop bound must be an integer, found float32");
}

#[test]
fn declared_let_type_must_agree_in_bool_ness() {
    let f = kern(Vec::new(), vec![let_("x", Some(F32), boolean(true))]);
    one(&f, "`x` is declared float32 but its value is bool");
}

// ---- buffers ----

#[test]
fn ranks_of_loads_stores_and_regions() {
    let f = kern(
        Vec::new(),
        vec![
            let_("x", None, load("A", vec![int(0)])),
            store("C", vec![int(0), int(0), int(0)], float(0.0)),
            fill(region("C", vec![(int(0), int(4))]), int(0)),
        ],
    );
    let msgs: Vec<String> = errors(&f).into_iter().map(|d| d.message).collect();
    assert_eq!(
        msgs,
        [
            "buffer `A` has rank 2 but is indexed with 1 index",
            "buffer `C` has rank 2 but is indexed with 3 indices",
            "buffer `C` has rank 2 but the region has 1 dimension",
        ]
    );
}

#[test]
fn shapes_are_positive_integers_of_constants_and_dims() {
    let mut f = kern(
        vec![
            shared("Z", &[0, 4], F16),
            shared("E", &[], F16),
            BufferDecl {
                name: id("L"),
                dtype: F16,
                shape: vec![var("bx")],
                scope: Scope::Shared,
                span: Span::DUMMY,
            },
        ],
        Vec::new(),
    );
    f.params[0].shape[1] = float(2.0);
    let msgs: Vec<String> = errors(&f).into_iter().map(|d| d.message).collect();
    assert_eq!(msgs.len(), 4, "{msgs:?}");
    assert!(msgs[0].contains("a buffer dimension must be an integer, found float32"));
    assert!(msgs[1].contains("dimension of `Z` must be positive, found 0"));
    assert!(msgs[2].contains("buffer `E` must have at least one dimension"));
    assert_eq!(
        msgs[3],
        "the shape of `L` may only use constants and symbolic dimensions, found `bx`"
    );
}

#[test]
fn an_empty_allocation_is_one_error_at_its_shape() {
    // Every use of an empty buffer (whole-buffer regions, which copy its shape; regions and
    // indices inside it; gemm operands; intrinsic operands) is the same mistake: one error
    // per allocation, at its first dimension ≤ 0.
    let src = r#"
@T.prim_func
def f(A: T.Tensor((64, 32), "float16"), C: T.Tensor((64, 64), "float32")):
    with T.Kernel(1, threads=128) as bx:
        S = T.alloc_shared((0, 32), "float16")
        Z = T.alloc_shared((0, 0), "float16")
        F = T.alloc_fragment((64, -2), "float32")
        L = T.alloc_local((0,), "float32")
        T.copy(A[0, 0], S)
        T.copy(A[0:64, 0:32], S)
        T.copy(S, A[0:64, 0:32])
        T.clear(Z)
        T.fill(F[0:64, 0:2], 1.0)
        T.gemm(S, Z, F)
        T.copy(F, C)
        L[0] = 1.0
        L[3] = L[1] + 2.0
        for tx in T.thread_binding(128, thread="threadIdx.x"):
            T.cp_async(Z[0, 0], A[0, 0], 16)
            T.clear(S)
"#;
    let f = match crate::parse::parse(src) {
        Ok(f) => f,
        Err(d) => panic!("parse failed: {d:#?}"),
    };
    let errs = errors(&f);
    let found: Vec<(&str, &str)> = errs
        .iter()
        .map(|d| {
            (
                d.message.as_str(),
                src.get(d.span.start..d.span.end).unwrap_or("<bad span>"),
            )
        })
        .collect();
    assert_eq!(
        found,
        [
            ("dimension of `S` must be positive, found 0", "0"),
            ("dimension of `Z` must be positive, found 0", "0"),
            ("dimension of `F` must be positive, found -2", "-2"),
            ("dimension of `L` must be positive, found 0", "0"),
            // K9, a mistake of its own: a tile op inside a thread region.
            ("`T.fill` inside a thread region", "T.clear(S)"),
        ],
        "{errs:#?}"
    );
    assert_eq!(errs[0].span.start, src.find("(0, 32)").map_or(0, |i| i + 1));
    assert!(errs[0]
        .notes
        .iter()
        .any(|n| n.message == "a buffer cannot be empty"));
    // A mistake of its own in the same kernel is still reported.
    let src = src.replace("L[3] = L[1] + 2.0", "L[-1] = 2.0");
    let f = match crate::parse::parse(&src) {
        Ok(f) => f,
        Err(d) => panic!("parse failed: {d:#?}"),
    };
    let errs = errors(&f);
    assert_eq!(errs.len(), 6, "{errs:#?}");
    assert_eq!(
        errs[5].message,
        "index -1 is out of bounds for dimension 0 of `L`"
    );
}

#[test]
fn shapes_cannot_use_loop_variables() {
    let mut k = kernel(
        &[1],
        &["bx"],
        &[32],
        vec![BufferDecl {
            name: id("L"),
            dtype: F16,
            shape: vec![var("i")],
            scope: Scope::Local,
            span: Span::DUMMY,
        }],
    );
    k.body = Vec::new();
    let f = func(
        "f",
        Vec::new(),
        vec![
            stmt(StmtKind::Let {
                var: id("i"),
                dtype: None,
                value: int(2),
            }),
            stmt(StmtKind::Kernel(k)),
        ],
    );
    one(
        &f,
        "the shape of `L` may only use constants and symbolic dimensions, found `i`",
    );
}

#[test]
fn constant_indices_outside_the_buffer() {
    let f = kern(
        Vec::new(),
        vec![
            store("C", vec![int(64), int(0)], float(0.0)),
            let_("x", None, a_load(var("bx"), at(int(-1), 30, 32))),
        ],
    );
    let errs = errors(&f);
    assert_eq!(errs.len(), 2, "{errs:#?}");
    assert_eq!(
        errs[0].message,
        "index 64 is out of bounds for dimension 0 of `C` (extent 64)"
    );
    assert_eq!(
        errs[1].message,
        "index -1 is out of bounds for dimension 1 of `A` (extent 64)"
    );
    assert_eq!(errs[1].span.start, 30);
}

// ---- copy ----

#[test]
fn copy_shapes_must_agree_after_dropping_unit_dims() {
    let f = kern(
        vec![shared("S", &[32, 32], F16), shared("R", &[1, 64], F16)],
        vec![
            copy(
                region("A", vec![(var("bx"), int(16)), (int(0), int(32))]),
                whole("S", &[32, 32]),
            ),
            // 1x64 from a 64-wide row: fine.
            copy(
                region("A", vec![(var("bx"), int(1)), (int(0), int(64))]),
                whole("R", &[1, 64]),
            ),
            // A symbolic extent may be 1 at run time, so (bx, 64) against (64,) is accepted.
            copy(
                region("A", vec![(int(0), var("bx")), (int(0), int(64))]),
                whole("R", &[1, 64]),
            ),
        ],
    );
    let d = one(
        &f,
        "`T.copy` regions have different shapes: `A` is (16, 32), `S` is (32, 32)",
    );
    assert_eq!(d.notes.len(), 1);
    // Equal element counts are not enough.
    let f = kern(
        vec![shared("S", &[16, 32], F16)],
        vec![copy(
            region("A", vec![(var("bx"), int(32)), (int(0), int(16))]),
            whole("S", &[16, 32]),
        )],
    );
    one(&f, "`A` is (32, 16), `S` is (16, 32)");
}

#[test]
fn copy_regions_statically_outside_their_buffer() {
    let f = kern(
        vec![shared("S", &[32, 32], F16), shared("T", &[64, 32], F16)],
        vec![
            copy(
                region("A", vec![(int(64), int(32)), (int(0), int(32))]),
                whole("S", &[32, 32]),
            ),
            copy(
                region("A", vec![(int(-4), int(32)), (int(0), int(32))]),
                whole("S", &[32, 32]),
            ),
            copy(
                region("A", vec![(var("bx"), int(128)), (int(0), int(32))]),
                region("S", vec![(int(0), int(0)), (int(0), int(32))]),
            ),
            // Shared buffers are not masked tiles: their regions stay inside.
            copy(
                region("A", vec![(int(0), int(32)), (int(0), int(32))]),
                region("T", vec![(int(48), int(32)), (int(0), int(32))]),
            ),
            copy(
                region("A", vec![(int(0), int(128)), (int(0), int(32))]),
                region("T", vec![(var("bx"), int(128)), (int(0), int(32))]),
            ),
        ],
    );
    let msgs: Vec<String> = errors(&f).into_iter().map(|d| d.message).collect();
    assert_eq!(
        msgs,
        [
            "region of `A` starts at 64 in dimension 0, past its end (extent 64): the copy \
             moves nothing",
            "region of `A` starts at -4 in dimension 0, outside the buffer",
            "region extent must be positive, found 0 (dimension 0 of `S`)",
            "region 48..80 of dimension 0 of `T` is outside the buffer (extent 64)",
            "region extent 128 exceeds dimension 0 of `T` (extent 64)",
        ]
    );
}

/// `T.copy` masks its edges, so a region of a global tensor may reach past the tensor (a
/// partial tile): what a symbolic dim gives at run time is valid with the dim bound (`-D`).
#[test]
fn copy_regions_may_reach_past_a_global_tensor() {
    let f = kern(
        vec![shared("S", &[128, 32], F16), frag("F", &[128, 128], F32)],
        vec![
            copy(
                region("A", vec![(var("bx"), int(128)), (int(0), int(32))]),
                whole("S", &[128, 32]),
            ),
            copy(
                region("A", vec![(int(48), int(128)), (int(40), int(32))]),
                whole("S", &[128, 32]),
            ),
            copy(
                whole("F", &[128, 128]),
                region(
                    "C",
                    vec![(mul(var("bx"), int(128)), int(128)), (int(0), int(128))],
                ),
            ),
        ],
    );
    ok(&f);
    // A fill has no partial-tile rule.
    let f = kern(
        Vec::new(),
        vec![fill(
            region("C", vec![(var("bx"), int(128)), (int(0), int(64))]),
            int(0),
        )],
    );
    one(
        &f,
        "region extent 128 exceeds dimension 0 of `C` (extent 64)",
    );
}

#[test]
fn copy_between_bool_and_numbers() {
    let f = kern(
        vec![frag("M", &[64, 64], DType::Bool)],
        vec![copy(whole("M", &[64, 64]), whole("C", &[64, 64]))],
    );
    one(&f, "bool buffers copy only to and from bool buffers");
}

// ---- gemm ----

fn gemm_kernel(a: BufferDecl, b: BufferDecl, c: BufferDecl, g: impl FnOnce(&mut Gemm)) -> PrimFunc {
    let shape =
        |d: &BufferDecl| -> Vec<i64> { d.shape.iter().filter_map(|e| e.as_int()).collect() };
    let mut op = gemm(
        whole(&a.name.name, &shape(&a)),
        whole(&b.name.name, &shape(&b)),
        whole(&c.name.name, &shape(&c)),
    );
    g(&mut op);
    kern(vec![a, b, c], vec![stmt(StmtKind::Gemm(op))])
}

#[test]
fn gemm_shapes_with_transposes() {
    let f = gemm_kernel(
        shared("a", &[64, 32], F16),
        shared("b", &[32, 16], F16),
        frag("c", &[64, 16], F32),
        |_| {},
    );
    ok(&f);
    let f = gemm_kernel(
        shared("a", &[32, 64], F16),
        shared("b", &[16, 32], F16),
        frag("c", &[64, 16], F32),
        |g| {
            g.trans_a = true;
            g.trans_b = true;
        },
    );
    ok(&f);
    let f = gemm_kernel(
        shared("a", &[64, 32], F16),
        shared("b", &[64, 16], F16),
        frag("c", &[64, 16], F32),
        |_| {},
    );
    let d = one(&f, "gemm K mismatch: A gives K = 32 but B gives K = 64");
    assert_eq!(d.notes.len(), 1);
    let f = gemm_kernel(
        shared("a", &[64, 32], F16),
        shared("b", &[32, 16], F16),
        frag("c", &[32, 8], F32),
        |_| {},
    );
    let msgs: Vec<String> = errors(&f).into_iter().map(|d| d.message).collect();
    assert_eq!(
        msgs,
        [
            "gemm M mismatch: A gives M = 64 but C gives M = 32",
            "gemm N mismatch: B gives N = 16 but C gives N = 8",
        ]
    );
}

#[test]
fn gemm_operands_are_matrices() {
    // A whole 3-d buffer is not a matrix ...
    let f = gemm_kernel(
        shared("a", &[2, 64, 32], F16),
        shared("b", &[32, 16], F16),
        frag("c", &[64, 16], F32),
        |_| {},
    );
    one(
        &f,
        "gemm operand A (`a`) must be a matrix (rank 2, leading dimensions of extent 1), found rank 3",
    );
}

#[test]
fn gemm_operand_may_be_one_pipeline_stage() {
    // ... but one stage of it is (what inject-software-pipeline writes).
    let src = r#"
@T.prim_func
def f(C: T.Tensor((64, 16), "float32")):
    with T.Kernel(1, threads=128) as bx:
        a = T.alloc_shared((2, 64, 32), "float16")
        b = T.alloc_shared((32, 16), "float16")
        c = T.alloc_fragment((64, 16), "float32")
        T.clear(a)
        T.clear(b)
        T.gemm(a[1, 0:64, 0:32], b, c, clear_accum=True)
        T.copy(c, C)
"#;
    let f = match crate::parse::parse(src) {
        Ok(f) => f,
        Err(d) => panic!("parse failed: {d:#?}"),
    };
    ok(&f);
}

#[test]
fn gemm_operand_scopes() {
    let f = gemm_kernel(
        shared("a", &[64, 64], F16),
        frag("b", &[64, 64], F16),
        shared("c", &[64, 64], F32),
        |_| {},
    );
    one(
        &f,
        "gemm operand C (`c`) must be a fragment or local buffer, found shared",
    );
    let mut op = gemm(
        whole("A", &[64, 64]),
        whole("b", &[64, 64]),
        whole("c", &[64, 64]),
    );
    op.trans_b = false;
    let f = kern(
        vec![shared("b", &[64, 64], F16), frag("c", &[64, 64], F32)],
        vec![stmt(StmtKind::Gemm(op))],
    );
    one(
        &f,
        "gemm operand A (`A`) must be a shared or fragment buffer, found global",
    );
}

#[test]
fn gemm_dtypes() {
    let case = |a: DType, b: DType, c: DType| {
        errors(&gemm_kernel(
            shared("a", &[16, 16], a),
            shared("b", &[16, 16], b),
            frag("c", &[16, 16], c),
            |_| {},
        ))
        .into_iter()
        .map(|d| d.message)
        .collect::<Vec<_>>()
    };
    assert!(case(F16, F16, F32).is_empty());
    assert!(case(F16, F16, F16).is_empty());
    assert!(case(DType::BFloat16, DType::BFloat16, F32).is_empty());
    assert!(case(DType::Float8E4M3, DType::Float8E5M2, F32).is_empty());
    assert!(case(DType::Int8, DType::Int8, DType::Int32).is_empty());
    assert_eq!(
        case(F16, DType::BFloat16, F32),
        ["gemm inputs must have the same dtype (fp8 may mix e4m3 and e5m2): `a` is float16, `b` is bfloat16"]
    );
    assert_eq!(
        case(DType::BFloat16, DType::BFloat16, F16),
        ["gemm accumulator `c` is float16, but bfloat16 inputs accumulate in float32"]
    );
    assert_eq!(
        case(DType::Int8, DType::Int8, F32),
        ["gemm accumulator `c` is float32, but int8 inputs accumulate in int32"]
    );
    assert_eq!(
        case(F32, F32, F32),
        ["gemm inputs must be float16, bfloat16, float8_e4m3, float8_e5m2, int8 or int4; `a` is float32"]
    );
}

// ---- fill ----

#[test]
fn fill_region_in_bounds_and_value_kind() {
    let f = kern(
        vec![frag("M", &[4], DType::Bool)],
        vec![
            fill(
                region("C", vec![(int(60), int(8)), (int(0), int(64))]),
                int(0),
            ),
            fill(whole("C", &[64, 64]), boolean(false)),
            fill(whole("M", &[4]), boolean(false)),
        ],
    );
    let msgs: Vec<String> = errors(&f).into_iter().map(|d| d.message).collect();
    assert_eq!(
        msgs,
        [
            "region 60..68 of dimension 0 of `C` is outside the buffer (extent 64)",
            "mismatched types: `C` holds float32 but the value is bool",
        ]
    );
}

// ---- scopes ----

#[test]
fn kernels_do_not_nest() {
    let inner = stmt(StmtKind::Kernel(kernel(&[1], &["ix"], &[32], Vec::new())));
    let mut f = kern(Vec::new(), vec![inner]);
    f.body[0].span = Span::new(100, 200);
    let d = one(&f, "`T.Kernel` cannot be nested inside another `T.Kernel`");
    assert_eq!(d.notes[0].span.map(|s| s.start), Some(100));
}

#[test]
fn tile_ops_outside_a_kernel() {
    let f = func(
        "f",
        vec![param("A", &[4], F16), param("B", &[4], F16)],
        vec![
            copy(whole("A", &[4]), whole("B", &[4])),
            fill(whole("A", &[4]), int(0)),
            // A store to a global buffer runs on no thread outside a kernel either (K12).
            store("A", vec![int(0)], float(1.0)),
        ],
    );
    let msgs: Vec<String> = errors(&f).into_iter().map(|d| d.message).collect();
    assert_eq!(
        msgs,
        [
            "`T.copy` must be inside a `T.Kernel`",
            "`T.fill` must be inside a `T.Kernel`",
            "outside a `T.Kernel` a function holds only kernels and lets: this statement would \
             run on no GPU thread (put it inside `with T.Kernel(…)`)",
        ]
    );
    let f = func(
        "f",
        vec![param("A", &[4, 4], F16)],
        vec![stmt(StmtKind::Gemm(gemm(
            whole("A", &[4, 4]),
            whole("A", &[4, 4]),
            whole("A", &[4, 4]),
        )))],
    );
    assert!(errors(&f)[0]
        .message
        .contains("`T.gemm` must be inside a `T.Kernel`"));
}

#[test]
fn params_are_global_and_allocations_are_not() {
    let mut f = kern(vec![decl("G", &[4], F16, Scope::Global)], Vec::new());
    f.params[0].scope = Scope::Shared;
    f.body
        .insert(0, store("A", vec![int(0), int(0)], float(1.0)));
    let msgs: Vec<String> = errors(&f).into_iter().map(|d| d.message).collect();
    assert_eq!(
        msgs,
        [
            "parameter `A` is in shared memory; parameters must be global",
            "store to shared buffer `A` outside a `T.Kernel`",
            "`G` is allocated in global memory; only parameters are global",
        ]
    );
}

// ---- kernels ----

#[test]
fn grid_dimensions_and_block_variables() {
    let mut f = kern(Vec::new(), Vec::new());
    let k = kernel_of(&mut f);
    k.grid = vec![int(1), int(1), int(1), int(1)];
    k.block_vars = vec![id("a"), id("b"), id("c"), id("d")];
    one(&f, "a kernel has 1 to 3 grid dimensions, found 4");
    let mut f = kern(Vec::new(), Vec::new());
    kernel_of(&mut f).block_vars.push(id("by"));
    one(
        &f,
        "the kernel has 1 grid dimension but binds 2 block variables",
    );
    // An empty grid runs no block (split-K's zeroing kernel at one slice); a negative
    // extent is an error.
    let mut f = kern(Vec::new(), Vec::new());
    kernel_of(&mut f).grid = vec![int(0)];
    assert!(verify(&f).is_ok(), "an empty grid is valid");
    let mut f = kern(Vec::new(), Vec::new());
    kernel_of(&mut f).grid = vec![int(-1)];
    one(&f, "a grid extent is at least 0, found -1");
}

#[test]
fn thread_counts() {
    let with_threads = |t: Vec<Expr>| {
        let mut f = kern(Vec::new(), Vec::new());
        kernel_of(&mut f).threads = t;
        f
    };
    one(
        &with_threads(vec![int(64), int(32)]),
        "a thread block has at most 1024 threads, found 2048",
    );
    one(
        &with_threads(vec![int(0)]),
        "thread count must be ≥ 1, found 0",
    );
    one(
        &with_threads(vec![var("bx")]),
        "thread counts must be integer constants, found `bx`",
    );
    one(
        &with_threads(Vec::new()),
        "a thread block has 1 to 3 dimensions, found 0",
    );
    one(
        &with_threads(vec![int(1), int(8), int(128)]),
        "a thread block has at most 64 threads along z, found 128",
    );
    let info = ok(&with_threads(vec![int(32), int(4), int(8)]));
    assert_eq!(info.kernels[0].num_threads, 1024);
}

// ---- loops ----

#[test]
fn loop_extents_are_positive() {
    let f = kern(
        Vec::new(),
        vec![loop_("i", ForKind::Serial, 4, int(4), Vec::new())],
    );
    one(&f, "loop `i` has extent 0; extents must be positive");
}

#[test]
fn pipelined_loops() {
    let pipe = |num_stages: i64, order: Vec<i64>, stage: Vec<i64>| {
        kern(
            Vec::new(),
            vec![loop_(
                "ko",
                ForKind::Pipelined {
                    num_stages: Expr::int(num_stages),
                    order,
                    stage,
                },
                0,
                int(4),
                Vec::new(),
            )],
        )
    };
    one(
        &pipe(0, Vec::new(), Vec::new()),
        "`num_stages` must be ≥ 1, found 0",
    );
    one(
        &pipe(2, vec![0, 1, 2], vec![0, 1]),
        "pipelined loop `ko`: `order` has 3 entries but `stage` has 2",
    );
    ok(&pipe(2, vec![0, 1], vec![0, 1]));
}

#[test]
fn parallel_loops_start_at_zero() {
    let f = kern(
        Vec::new(),
        vec![loop_("i", ForKind::Parallel, 1, int(4), Vec::new())],
    );
    one(
        &f,
        "parallel loop `i` starts at `1`; parallel loops start at 0",
    );
}

#[test]
fn block_index_bindings_inside_a_kernel() {
    let f = kern(
        Vec::new(),
        vec![
            loop_(
                "t",
                ForKind::ThreadBinding(ThreadTag::ThreadX),
                0,
                int(128),
                Vec::new(),
            ),
            loop_(
                "b",
                ForKind::ThreadBinding(ThreadTag::BlockY),
                0,
                int(4),
                Vec::new(),
            ),
        ],
    );
    one(&f, "loop `b` is bound to `blockIdx.y` inside a `T.Kernel`");
}

// ---- thread level: vectorized loops, barriers, the shared arena ----

fn tx_loop(body: Vec<Stmt>) -> Stmt {
    loop_(
        "tx",
        ForKind::ThreadBinding(ThreadTag::ThreadX),
        0,
        int(128),
        body,
    )
}

fn vec_loop(start: i64, stop: Expr, body: Vec<Stmt>) -> Stmt {
    loop_("v", ForKind::Vectorized, start, stop, body)
}

fn barrier() -> Stmt {
    stmt(StmtKind::Barrier)
}

#[test]
fn thread_level_kernel_verifies() {
    let mut f = kern(
        vec![
            shared("S", &[64, 64], F16),
            shared("R", &[16], F32),
            decl("acc", &[8], F32, Scope::Local),
        ],
        vec![tx_loop(vec![
            vec_loop(0, int(8), vec![store("acc", vec![var("v")], float(0.0))]),
            barrier(),
            loop_(
                "k",
                ForKind::Serial,
                0,
                int(2),
                vec![if_then(bin(BinOp::Lt, var("tx"), int(4)), vec![barrier()])],
            ),
        ])],
    );
    kernel_of(&mut f).arena = Some(Arena {
        bytes: 8256,
        offsets: vec![(id("S"), 0), (id("R"), 8192)],
    });
    // (A barrier under `if` is valid IR; reaching it divergently is a run-time error.)
    let info = ok(&f);
    assert_eq!(info.kernels[0].arena_bytes, Some(8256));
    assert_eq!(
        ok(&kern(Vec::new(), Vec::new())).kernels[0].arena_bytes,
        None
    );
}

fn if_then(cond: Expr, then_body: Vec<Stmt>) -> Stmt {
    stmt(StmtKind::If {
        cond,
        then_body,
        else_body: Vec::new(),
    })
}

#[test]
fn vectorized_loops_have_constant_extents_inside_threads() {
    // L6: start 0, a constant extent (any count: a loop the back end vectorizes where it
    // can).
    let f = kern(
        Vec::new(),
        vec![tx_loop(vec![vec_loop(2, int(4), Vec::new())])],
    );
    one(
        &f,
        "vectorized loop `v` starts at `2`; vectorized loops start at 0",
    );
    let f = kern(
        Vec::new(),
        vec![tx_loop(vec![vec_loop(0, var("tx"), Vec::new())])],
    );
    one(
        &f,
        "vectorized loop `v` has extent `tx`; it must be a constant",
    );
    for n in [1, 2, 3, 4, 8, 16, 32, 100] {
        ok(&kern(
            Vec::new(),
            vec![tx_loop(vec![vec_loop(0, int(n), Vec::new())])],
        ));
    }
    // L7: inside a thread-binding loop.
    let f = kern(Vec::new(), vec![vec_loop(0, int(4), Vec::new())]);
    one(
        &f,
        "vectorized loop `v` is not inside a thread-binding loop",
    );
}

#[test]
fn barriers_only_inside_thread_loops() {
    let f = kern(Vec::new(), vec![barrier()]);
    one(&f, "`T.sync_threads()` outside a thread-binding loop");
    let f = kern(
        Vec::new(),
        vec![loop_("i", ForKind::Parallel, 0, int(4), vec![barrier()])],
    );
    one(&f, "`T.sync_threads()` outside a thread-binding loop");
    // Outside any kernel.
    let f = func("f", Vec::new(), vec![barrier()]);
    one(&f, "`T.sync_threads()` outside a thread-binding loop");
    let f = kern(
        Vec::new(),
        vec![tx_loop(vec![vec_loop(0, int(4), vec![barrier()])])],
    );
    one(&f, "`T.sync_threads()` inside a vectorized loop");
}

/// A kernel with shared S (64x64 f16 = 8192 B), shared R (16 f32 = 64 B), local acc, and
/// `arena`.
fn with_arena(bytes: i64, offsets: &[(&str, i64)]) -> PrimFunc {
    let mut f = kern(
        vec![
            shared("S", &[64, 64], F16),
            shared("R", &[16], F32),
            decl("acc", &[8], F32, Scope::Local),
        ],
        Vec::new(),
    );
    kernel_of(&mut f).arena = Some(Arena {
        bytes,
        offsets: offsets.iter().map(|&(n, o)| (id(n), o)).collect(),
    });
    f
}

#[test]
fn arena_rules() {
    // Overlapping buffers are allowed (their lifetimes may be disjoint).
    ok(&with_arena(8192, &[("S", 0), ("R", 0)]));
    ok(&with_arena(232_448, &[("S", 0), ("R", 8192)]));
    // A1: exactly one offset per shared allocation, and only for them.
    one(
        &with_arena(8256, &[("S", 0)]),
        "shared buffer `R` has no offset in the kernel's shared arena",
    );
    one(
        &with_arena(8256, &[("S", 0), ("R", 8192), ("S", 0)]),
        "`S` has two offsets in the shared arena",
    );
    one(
        &with_arena(8256, &[("S", 0), ("R", 8192), ("acc", 8224)]),
        "`acc` is a local buffer; only shared buffers live in the shared arena",
    );
    one(
        &with_arena(8256, &[("S", 0), ("R", 8192), ("Q", 0)]),
        "`Q` in the shared arena is not an allocation of this kernel",
    );
    // A2: aligned, non-negative offsets.
    one(
        &with_arena(8256, &[("S", 0), ("R", 8200)]),
        "`R` is at byte offset 8200; arena offsets are non-negative multiples of 16",
    );
    one(
        &with_arena(8256, &[("S", -16), ("R", 8192)]),
        "`S` is at byte offset -16",
    );
    // A3: inside the arena.
    one(
        &with_arena(8240, &[("S", 0), ("R", 8192)]),
        "`R` (64 bytes at offset 8192) ends at byte 8256, past the end of the 8240-byte shared arena",
    );
    // A4: at most the largest target's opt-in maximum (sm_90a's), or the given target's.
    one(
        &with_arena(232_448 + 16, &[("S", 0), ("R", 8192)]),
        "the shared arena has 232464 bytes; a block can have 0 to 232448 bytes",
    );
    let sm80 = Requirements {
        target: Some(Target::Sm80),
        ..Default::default()
    };
    let big = with_arena(166_912 + 16, &[("S", 0), ("R", 8192)]);
    assert!(verify(&big).is_ok());
    let errs = verify_with(&big, &sm80).expect_err("over sm_80's limit");
    assert_eq!(errs.len(), 1);
    assert!(
        errs[0].message.contains("0 to 166912 bytes")
            && errs[0].notes[0].message.contains("sm_80's opt-in maximum"),
        "{errs:?}"
    );
    assert!(verify_with(&with_arena(166_912, &[("S", 0), ("R", 8192)]), &sm80).is_ok());
    // A symbolic shape has no size to place.
    let mut f = with_arena(8256, &[("S", 0), ("R", 8192)]);
    f.dims = vec![dim("N")];
    f.params[0].shape[0] = var("N");
    kernel_of(&mut f).allocs[1].shape = vec![var("N")];
    one(&f, "`R` has a shape that is not constant");
}

// ---- what a launch can have (B5, B6, K3) ----

#[test]
fn a_dim_no_argument_gives_is_refused() {
    let mut f = kern(Vec::new(), Vec::new());
    f.dims = vec![dim("N"), dim("K")];
    // `N` is A's first extent; `K` only a part of C's that no launch solves (`K * K`).
    f.params[0].shape[0] = var("N");
    f.params[1].shape[0] = mul(var("K"), var("K"));
    one(
        &f,
        "symbolic dimension `K` is not the extent of any parameter's dimension, so a launch cannot read it off the arguments",
    );
    // `K * 2` (or `K + 1`) is solved at launch, as a whole extent is read.
    f.params[1].shape[0] = mul(var("K"), int(2));
    ok(&f);
    f.params[1].shape[0] = mul(var("K"), var("K"));
    f.params[1].shape[1] = var("K");
    ok(&f);
}

#[test]
fn buffers_and_grids_past_what_a_launch_can_have() {
    // 2^62 x 4 float16: 2^65 bytes.
    let mut f = kern(Vec::new(), Vec::new());
    f.params[0].shape = vec![int(1 << 62), int(4)];
    one(&f, "`A` has 18446744073709551616 elements (36893488147419103232 bytes), more than a buffer can hold");
    // 2^47 float16 elements are 2^48 bytes: the largest a buffer may be.
    f.params[0].shape = vec![int(1 << 47)];
    ok(&f);
    // A shared buffer past the target's shared memory.
    let f = kern(vec![shared("S", &[256, 256], F32)], Vec::new());
    one(&f, "shared buffer `S` needs 262144 bytes, more than the 232448 bytes of shared memory a block may have on any target");
    let f = kern(vec![shared("S", &[256, 192], F32)], Vec::new());
    ok(&f);
    let sm80 = Requirements {
        target: Some(Target::Sm80),
        ..Default::default()
    };
    let errs = verify_with(&f, &sm80).expect_err("over sm_80's limit");
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert_eq!(
        errs[0].message,
        "shared buffer `S` needs 196608 bytes, more than the 166912 bytes of shared memory a block may have on sm_80"
    );
    // Grids: 2^31 - 1 along x, 65535 along y and z.
    let grid = |g: Vec<i64>| {
        let vars: Vec<String> = (0..g.len()).map(|i| format!("b{i}")).collect();
        let names: Vec<&str> = vars.iter().map(String::as_str).collect();
        func(
            "f",
            vec![param("A", &[64], F16)],
            vec![stmt(StmtKind::Kernel(kernel(
                &g,
                &names,
                &[128],
                Vec::new(),
            )))],
        )
    };
    ok(&grid(vec![(1 << 31) - 1, 65535, 65535]));
    one(
        &grid(vec![1 << 31]),
        "a grid of 2147483648 blocks along x is more than a launch can have",
    );
    one(
        &grid(vec![1, 1, 65536]),
        "a grid of 65536 blocks along z is more than a launch can have",
    );
}

// ---- swizzle and layouts ----

#[test]
fn swizzle_panel_size() {
    let mut f = kern(Vec::new(), Vec::new());
    kernel_of(&mut f).swizzle = Some(Swizzle {
        panel_size: int(-1),
        order: RasterOrder::Row,
        span: Span::DUMMY,
    });
    one(&f, "`panel_size` must be ≥ 0, found -1");
    let mut f = kern(Vec::new(), Vec::new());
    kernel_of(&mut f).swizzle = Some(Swizzle {
        panel_size: var("bx"),
        order: RasterOrder::Column,
        span: Span::DUMMY,
    });
    one(&f, "`panel_size` must be an integer constant, found `bx`");
}

#[test]
fn layout_annotations_name_shared_buffers() {
    let mut f = kern(
        vec![shared("S", &[8, 8], F16), frag("R", &[8, 8], F32)],
        Vec::new(),
    );
    kernel_of(&mut f).layouts = ["S", "R"]
        .iter()
        .map(|n| LayoutAnnotation {
            buffer: id(n),
            layout: Layout::Swizzled,
            span: Span::DUMMY,
        })
        .collect();
    one(&f, "layout annotation on `R`, a fragment buffer");
}

// ---- collection ----

#[test]
fn all_errors_are_collected_in_program_order() {
    let f = kern(
        Vec::new(),
        vec![
            store("C", vec![var("u1"), int(0)], float(0.0)),
            loop_("i", ForKind::Serial, 0, int(0), Vec::new()),
            store("C", vec![int(0), var("u2")], float(0.0)),
        ],
    );
    let msgs: Vec<String> = errors(&f).into_iter().map(|d| d.message).collect();
    assert_eq!(msgs.len(), 3, "{msgs:?}");
    assert!(msgs[0].contains("`u1`"));
    assert!(msgs[1].contains("extent 0"));
    assert!(msgs[2].contains("`u2`"));
}

#[test]
fn dummy_spans_fall_back_to_the_statement() {
    let mut f = kern(Vec::new(), vec![store("C", vec![int(0), int(0)], var("q"))]);
    kernel_of(&mut f).body[0].span = Span::new(7, 19);
    let d = one(&f, "cannot find value `q`");
    assert_eq!((d.span.start, d.span.end), (7, 19));
}

// ---- intrinsics (I1–I6) and layouts (K7, K8) ----

/// A kernel with global `G` (64x64 f16), `G32` (64x64 f32), shared `S` (64x64 f16), `S32`
/// (16x16 f32), locals `F` (8 f16), `Fb` (8 bf16), `Acc` (4 f32), `Acc16` (4 f16), fragment
/// `R` (16x8 f32); `tile` is written at the kernel's top level, `thread` inside its
/// `threadIdx.x` loop of 32 threads.
fn intrinsic_src(tile: &str, thread: &str) -> String {
    let mut s = String::from(
        "@T.prim_func\ndef f(G: T.Tensor((64, 64), \"float16\"), G32: T.Tensor((64, 64), \"float32\")):\n    with T.Kernel(1, threads=32) as bx:\n        S = T.alloc_shared((64, 64), \"float16\")\n        S32 = T.alloc_shared((16, 16), \"float32\")\n        F = T.alloc_local((8,), \"float16\")\n        Fb = T.alloc_local((8,), \"bfloat16\")\n        Acc = T.alloc_local((4,), \"float32\")\n        Acc16 = T.alloc_local((4,), \"float16\")\n        R = T.alloc_fragment((16, 8), \"float32\")\n        S8 = T.alloc_shared((64, 64), \"int8\")\n        I8 = T.alloc_local((24,), \"int8\")\n        AccI = T.alloc_local((4,), \"int32\")\n",
    );
    for line in tile.lines() {
        s.push_str("        ");
        s.push_str(line);
        s.push('\n');
    }
    s.push_str("        for tx in T.thread_binding(32, thread=\"threadIdx.x\"):\n");
    for line in thread.lines() {
        s.push_str("            ");
        s.push_str(line);
        s.push('\n');
    }
    s.push_str("            pass\n");
    s
}

/// The verifier's messages for the kernel of `intrinsic_src`, each with the text its span
/// covers.
fn intrinsic_errors(tile: &str, thread: &str) -> Vec<(String, String)> {
    let src = intrinsic_src(tile, thread);
    let f = match crate::parse::parse(&src) {
        Ok(f) => f,
        Err(d) => panic!("parse failed: {d:#?}\n{src}"),
    };
    errors(&f)
        .into_iter()
        .map(|d| {
            let text = src.get(d.span.start..d.span.end).unwrap_or("<bad span>");
            (d.message, text.to_string())
        })
        .collect()
}

#[track_caller]
fn one_intrinsic_error(tile: &str, thread: &str, needle: &str, at: &str) {
    let errs = intrinsic_errors(tile, thread);
    assert_eq!(
        errs.len(),
        1,
        "expected one error containing {needle:?}: {errs:#?}"
    );
    assert!(
        errs[0].0.contains(needle),
        "expected {needle:?} in {:?}",
        errs[0].0
    );
    assert_eq!(errs[0].1, at, "span of {:?}", errs[0].0);
}

#[test]
fn valid_intrinsics_verify() {
    let errs = intrinsic_errors(
        "T.cp_async_commit()\nT.cp_async_wait(0)",
        "T.cp_async(S[tx, 0], G[tx, 8], 16)\nT.cp_async(S[tx, 8], G[tx, 8], 4, tx < 16)\nT.cp_async(S32[tx // 2, tx % 2 * 8], G32[tx, 0], 8)\nT.cp_async_commit()\nT.cp_async_wait(1)\nT.sync_threads()\nT.ldmatrix(F[0], S[tx, 0], num=4, trans=False)\nT.ldmatrix(F[4], S[tx % 16, 8], num=2, trans=True)\nT.ldmatrix(F[6], S[tx % 8, 16], num=1, trans=False)\nT.mma_sync(Acc[0], F[0], F[4])",
    );
    assert!(errs.is_empty(), "{errs:#?}");
    let errs = intrinsic_errors("", "T.mma_sync(Acc[0], Fb[0], Fb[4])");
    assert!(errs.is_empty(), "{errs:#?}");
    let errs = intrinsic_errors(
        "",
        "T.ldmatrix(I8[0], S8[tx, 0], num=4, trans=False)\nT.ldmatrix(I8[16], S8[tx % 16, 16], num=2, trans=False)\nT.mma_sync(AccI[0], I8[0], I8[16])\nT.mma_sync(AccI[0], I8[0], I8[16], packed_int4=True)",
    );
    assert!(errs.is_empty(), "{errs:#?}");
}

#[test]
fn intrinsics_need_their_level() {
    // Thread-level instructions need the thread loop.
    one_intrinsic_error(
        "T.cp_async(S[0, 0], G[0, 0], 16)",
        "",
        "`T.cp_async` outside a thread-binding loop",
        "T.cp_async(S[0, 0], G[0, 0], 16)",
    );
    one_intrinsic_error(
        "T.ldmatrix(F[0], S[0, 0], num=4, trans=False)",
        "",
        "`T.ldmatrix` outside a thread-binding loop",
        "T.ldmatrix(F[0], S[0, 0], num=4, trans=False)",
    );
    one_intrinsic_error(
        "T.mma_sync(Acc[0], F[0], F[4])",
        "",
        "`T.mma_sync` outside a thread-binding loop",
        "T.mma_sync(Acc[0], F[0], F[4])",
    );
    // Not inside a vectorized loop (one instruction).
    one_intrinsic_error(
        "",
        "for v in T.vectorized(2):\n    T.cp_async_commit()",
        "`T.cp_async_commit` inside a vectorized loop",
        "T.cp_async_commit()",
    );
    // Outside any kernel.
    let mut f = func(
        "f",
        Vec::new(),
        vec![stmt(StmtKind::Intrinsic(Intrinsic::WaitGroup { n: 0 }))],
    );
    f.body[0].span = Span::new(3, 9);
    let d = one(&f, "`T.cp_async_wait` must be inside a `T.Kernel`");
    assert_eq!((d.span.start, d.span.end), (3, 9));
}

#[test]
fn cp_async_rules() {
    one_intrinsic_error(
        "",
        "T.cp_async(S[tx, 0], G[tx, 0], 12)",
        "the byte count of `T.cp_async` (`bytes`) must be 4, 8 or 16, found 12",
        "T.cp_async(S[tx, 0], G[tx, 0], 12)",
    );
    one_intrinsic_error(
        "",
        "T.cp_async(F[0], G[tx, 0], 16)",
        "the destination of `T.cp_async` must be a shared buffer, but `F` is a local buffer",
        "F",
    );
    one_intrinsic_error(
        "",
        "T.cp_async(S[tx, 0], S[tx, 8], 16)",
        "the source of `T.cp_async` must be a global buffer, but `S` is a shared buffer",
        "S",
    );
    one_intrinsic_error(
        "",
        "T.cp_async(S[tx, 0], G32[tx, 0], 16)",
        "the destination and the source of `T.cp_async` must have one dtype: `S` is float16, `G32` is float32",
        "S",
    );
    one_intrinsic_error(
        "",
        "T.cp_async(S[tx, 0], G[tx, 0], 16, tx)",
        "the predicate of `T.cp_async` must be bool, found int32",
        "tx",
    );
    // Past the end of the buffer, with constant indices.
    one_intrinsic_error(
        "",
        "T.cp_async(S[63, 60], G[0, 0], 16)",
        "covers 8 elements from `S[63, 60]` (element 4092), past the end of `S` (4096 elements)",
        "S",
    );
    // Rank and integer indices.
    one_intrinsic_error(
        "",
        "T.cp_async(S[tx], G[tx, 0], 16)",
        "buffer `S` has rank 2 but is indexed with 1 index",
        "S",
    );
    one_intrinsic_error(
        "",
        "T.cp_async(S[tx, 0.5], G[tx, 0], 16)",
        "buffer index must be an integer, found float32",
        "0.5",
    );
    one_intrinsic_error(
        "",
        "T.cp_async(S[tx, 0], Nope[tx, 0], 16)",
        "cannot find buffer `Nope` in this scope",
        "Nope",
    );
}

#[test]
fn cp_async_bytes_hold_whole_elements() {
    // 4 bytes of float32 is one element: fine; a bool copy of 4 bytes is 4 elements.
    let errs = intrinsic_errors("", "T.cp_async(S32[0, tx], G32[0, tx], 4)");
    assert!(errs.is_empty(), "{errs:#?}");
    // The IR can hold any element size; 8-byte float64 in 4 bytes is not whole.
    let mut f = crate::parse::parse(&intrinsic_src("", "T.cp_async(S32[0, tx], G32[0, tx], 4)"))
        .unwrap_or_else(|d| panic!("{d:#?}"));
    for b in f.params.iter_mut().filter(|b| b.name.name == "G32") {
        b.dtype = DType::Float64;
    }
    kernel_of(&mut f)
        .allocs
        .iter_mut()
        .filter(|b| b.name.name == "S32")
        .for_each(|b| b.dtype = DType::Float64);
    one(
        &f,
        "`T.cp_async` of 4 bytes is not a whole number of float64 elements (8 bytes each)",
    );
}

#[test]
fn ldmatrix_rules() {
    one_intrinsic_error(
        "",
        "T.ldmatrix(F[0], S[tx, 0], num=3, trans=False)",
        "the matrix count of `T.ldmatrix` (`num`) must be 1, 2 or 4, found 3",
        "T.ldmatrix(F[0], S[tx, 0], num=3, trans=False)",
    );
    one_intrinsic_error(
        "",
        "T.ldmatrix(S[0, 0], S[tx, 0], num=4, trans=False)",
        "the destination of `T.ldmatrix` must be a local buffer, but `S` is a shared buffer",
        "S",
    );
    one_intrinsic_error(
        "",
        "T.ldmatrix(F[0], G[tx, 0], num=4, trans=False)",
        "the source of `T.ldmatrix` must be a shared buffer, but `G` is a global buffer",
        "G",
    );
    // 16-bit and int8 elements only, each operand reported at its buffer.
    let errs = intrinsic_errors(
        "",
        "T.ldmatrix(Acc[0], S32[tx % 16, 0], num=2, trans=False)",
    );
    assert_eq!(
        errs,
        [
            (
                "the destination of `T.ldmatrix` must be float16, bfloat16 or int8; `Acc` is float32"
                    .to_string(),
                "Acc".to_string()
            ),
            (
                "the source of `T.ldmatrix` must be float16, bfloat16 or int8; `S32` is float32"
                    .to_string(),
                "S32".to_string()
            )
        ]
    );
    one_intrinsic_error(
        "",
        "T.ldmatrix(Fb[0], S[tx, 0], num=4, trans=False)",
        "the destination and the source of `T.ldmatrix` must have one dtype: `Fb` is bfloat16, `S` is float16",
        "Fb",
    );
    // x4 needs 8 destination elements.
    one_intrinsic_error(
        "",
        "T.ldmatrix(F[4], S[tx, 0], num=4, trans=False)",
        "covers 8 elements from `F[4]` (element 4), past the end of `F` (8 elements)",
        "F",
    );
    // int8: 16-byte rows of 16 elements, 4 elements a lane per matrix (x4: 16 from
    // `I8[12]`, past its 24), untransposed only (`.trans` moves 16-bit units).
    one_intrinsic_error(
        "",
        "T.ldmatrix(I8[12], S8[tx, 0], num=4, trans=False)",
        "covers 16 elements from `I8[12]` (element 12), past the end of `I8` (24 elements)",
        "I8",
    );
    one_intrinsic_error(
        "",
        "T.ldmatrix(I8[0], S8[63, 56], num=1, trans=False)",
        "covers 16 elements from `S8[63, 56]`",
        "S8",
    );
    one_intrinsic_error(
        "",
        "T.ldmatrix(I8[0], S8[tx, 0], num=4, trans=True)",
        "`T.ldmatrix` with trans=True moves 16-bit elements; `I8` is int8",
        "I8",
    );
}

#[test]
fn mma_sync_rules() {
    one_intrinsic_error(
        "",
        "T.mma_sync(Fb[0], F[0], F[4])",
        "the accumulator of `T.mma_sync` must be float32, float16 or int32; `Fb` is bfloat16",
        "Fb",
    );
    // A float16 accumulator is the `.f16.f16.f16.f16` form: float16 operands only.
    assert!(intrinsic_errors("", "T.mma_sync(Acc16[0], F[0], F[4])").is_empty());
    one_intrinsic_error(
        "",
        "T.mma_sync(Acc16[0], Fb[0], Fb[4])",
        "a float16 accumulator of `T.mma_sync` (`Acc16`) needs float16 operands; `Fb` is bfloat16",
        "Acc16",
    );
    one_intrinsic_error(
        "",
        "T.mma_sync(Acc[0], F[0], Fb[4])",
        "the A operand and the B operand of `T.mma_sync` must have one dtype: `F` is float16, `Fb` is bfloat16",
        "F",
    );
    // A fragment named in a thread region is also K9's error.
    let errs = intrinsic_errors("", "T.mma_sync(R[0, 0], F[0], F[4])");
    let messages: Vec<&str> = errs.iter().map(|(m, _)| m.as_str()).collect();
    assert_eq!(
        messages,
        [
            "fragment `R` in a thread region",
            "the accumulator of `T.mma_sync` must be a local buffer, but `R` is a fragment buffer"
        ]
    );
    one_intrinsic_error(
        "",
        "T.mma_sync(Acc[0], S[0, 0], F[4])",
        "the A operand of `T.mma_sync` must be a local buffer, but `S` is a shared buffer",
        "S",
    );
    one_intrinsic_error(
        "",
        "T.mma_sync(Acc[0], F[4], F[4])",
        "covers 8 elements from `F[4]`",
        "F",
    );
    // int8 x int8 -> int32 (`m16n8k32`): A 16 elements, B 8, and only with each other.
    assert!(intrinsic_errors("", "T.mma_sync(AccI[0], I8[0], I8[16])").is_empty());
    one_intrinsic_error(
        "",
        "T.mma_sync(AccI[0], I8[16], I8[0])",
        "covers 16 elements from `I8[16]`",
        "I8",
    );
    one_intrinsic_error(
        "",
        "T.mma_sync(AccI[0], F[0], F[4])",
        "an int32 accumulator of `T.mma_sync` (`AccI`) needs int8 operands; `F` is float16",
        "AccI",
    );
    one_intrinsic_error(
        "",
        "T.mma_sync(Acc[0], I8[0], I8[16])",
        "a float32 accumulator of `T.mma_sync` (`Acc`) needs float16 or bfloat16 operands; `I8` is int8",
        "Acc",
    );
    // packed_int4 (m16n8k64 .s4): int8 bytes into an int32 accumulator only.
    one_intrinsic_error(
        "",
        "T.mma_sync(Acc[0], F[0], F[4], packed_int4=True)",
        "`T.mma_sync` with packed_int4=True multiplies int8 bytes (two int4 each) into an int32 accumulator; `Acc` is float32 and `F` is float16",
        "Acc",
    );
}

#[test]
fn commit_and_wait_rules() {
    // Both levels are fine.
    let errs = intrinsic_errors(
        "T.cp_async_commit()\nT.cp_async_wait(2)",
        "T.cp_async_commit()\nT.cp_async_wait(0)",
    );
    assert!(errs.is_empty(), "{errs:#?}");
    one_intrinsic_error(
        "T.cp_async_wait(-1)",
        "",
        "the group count of `T.cp_async_wait` (`n`) must be ≥ 0, found -1",
        "T.cp_async_wait(-1)",
    );
}

#[test]
fn all_intrinsic_errors_are_collected() {
    let errs = intrinsic_errors(
        "",
        "T.cp_async(F[0], G[tx, 0], 3)\nT.ldmatrix(F[0], S[tx, 0], num=8, trans=False)\nT.mma_sync(Fb[0], F[0], F[4])",
    );
    let msgs: Vec<&str> = errs.iter().map(|(m, _)| m.as_str()).collect();
    assert_eq!(msgs.len(), 4, "{msgs:#?}");
    assert!(msgs[0].contains("found 3"));
    assert!(msgs[1].contains("must be a shared buffer"));
    assert!(msgs[2].contains("found 8"));
    assert!(msgs[3].contains("must be float32, float16 or int32"));
}

#[test]
fn layout_rules() {
    let errs = |anns: &str| intrinsic_errors(&format!("T.annotate_layout({{{anns}}})"), "");
    assert!(errs("S: T.make_swizzled_layout(S, bytes=128), S32: T.make_padded_layout(S32, pad=4), R: T.mma_accumulator_layout(R, warps_m=1, warps_n=1)").is_empty());
    let check = |anns: &str, needle: &str, at: &str| {
        let e = errs(anns);
        assert_eq!(e.len(), 1, "{e:#?}");
        assert!(
            e[0].0.contains(needle),
            "expected {needle:?} in {:?}",
            e[0].0
        );
        assert_eq!(e[0].1, at);
    };
    check(
        "S: T.make_swizzled_layout(S, bytes=16)",
        "the swizzle of `S` is 32, 64 or 128 bytes wide, found 16",
        "S",
    );
    check(
        "F: T.make_swizzled_layout(F, bytes=64)",
        "layout annotation on `F`, a local buffer; only shared buffers take a swizzled layout",
        "F",
    );
    check(
        "S: T.make_padded_layout(S, pad=0)",
        "the padding of `S` must be positive, found 0",
        "S",
    );
    check(
        "R: T.make_padded_layout(R, pad=8)",
        "only shared buffers take a padded layout",
        "R",
    );
    check(
        "S: T.mma_accumulator_layout(S, warps_m=2, warps_n=2)",
        "`T.mma_accumulator_layout` on `S`, a shared buffer; it lays out fragments",
        "S",
    );
    check(
        "R: T.mma_accumulator_layout(R, warps_m=0, warps_n=2)",
        "the warp grid of `R` must be positive, found warps_m=0, warps_n=2",
        "R",
    );
    // After lower-tile-ops relocates a fragment to a local array, its annotation stays valid.
    assert!(errs("Acc: T.mma_accumulator_layout(Acc, warps_m=1, warps_n=1)").is_empty());
    // A swizzle wider than the row would move chunks into the next row.
    check(
        "S32: T.make_swizzled_layout(S32, bytes=128)",
        "the 128-byte swizzle of `S32` needs rows of a multiple of 128 bytes; its rows are 64 bytes",
        "S32",
    );
    assert!(errs(
        "S: T.make_wgmma_swizzled_layout(S, bytes=64), S32: T.make_wgmma_swizzled_layout(S32, bytes=64), R: T.wgmma_accumulator_layout(R, warpgroups_m=1, warpgroups_n=1)"
    )
    .is_empty());
    check(
        "S32: T.make_wgmma_swizzled_layout(S32, bytes=128)",
        "the 128-byte swizzle of `S32` needs rows of a multiple of 128 bytes; its rows are 64 bytes",
        "S32",
    );
    check(
        "S: T.wgmma_accumulator_layout(S, warpgroups_m=1, warpgroups_n=1)",
        "`T.wgmma_accumulator_layout` on `S`, a shared buffer; it lays out fragments",
        "S",
    );
    check(
        "R: T.wgmma_accumulator_layout(R, warpgroups_m=1, warpgroups_n=0)",
        "the warpgroup grid of `R` must be positive, found warpgroups_m=1, warpgroups_n=0",
        "R",
    );
}
