//! Small IR builders for the printer's and verifier's unit tests (test builds only).

use crate::dtype::DType;
use crate::ir::*;
use crate::span::Span;

pub fn id(name: &str) -> Ident {
    Ident::new(name, Span::DUMMY)
}

/// An int32 symbolic dim.
pub fn dim(name: &str) -> Dim {
    Dim::int32(name, Span::DUMMY)
}

pub fn id_at(name: &str, start: usize) -> Ident {
    Ident::new(name, Span::new(start, start + name.len()))
}

pub fn int(v: i64) -> Expr {
    Expr::int(v)
}

pub fn var(name: &str) -> Expr {
    Expr::var(name)
}

pub fn float(v: f64) -> Expr {
    Expr::new(ExprKind::Float(v), Span::DUMMY)
}

pub fn boolean(v: bool) -> Expr {
    Expr::new(ExprKind::Bool(v), Span::DUMMY)
}

pub fn bin(op: BinOp, a: Expr, b: Expr) -> Expr {
    Expr::binary(op, a, b, Span::DUMMY)
}

pub fn add(a: Expr, b: Expr) -> Expr {
    bin(BinOp::Add, a, b)
}

pub fn mul(a: Expr, b: Expr) -> Expr {
    bin(BinOp::Mul, a, b)
}

pub fn load(buffer: &str, indices: Vec<Expr>) -> Expr {
    Expr::new(
        ExprKind::Load {
            buffer: buffer.into(),
            indices,
        },
        Span::DUMMY,
    )
}

pub fn at(mut e: Expr, start: usize, end: usize) -> Expr {
    e.span = Span::new(start, end);
    e
}

pub fn stmt(kind: StmtKind) -> Stmt {
    Stmt::new(kind, Span::DUMMY)
}

pub fn decl(name: &str, shape: &[i64], dtype: DType, scope: Scope) -> BufferDecl {
    BufferDecl {
        name: id(name),
        dtype,
        shape: shape.iter().map(|&d| int(d)).collect(),
        scope,
        span: Span::DUMMY,
    }
}

pub fn param(name: &str, shape: &[i64], dtype: DType) -> BufferDecl {
    decl(name, shape, dtype, Scope::Global)
}

/// A region from `(start, extent)` pairs.
pub fn region(buffer: &str, ranges: Vec<(Expr, Expr)>) -> Region {
    Region {
        buffer: id(buffer),
        ranges: ranges
            .into_iter()
            .map(|(start, extent)| Range { start, extent })
            .collect(),
        span: Span::DUMMY,
    }
}

/// The whole of a buffer with constant shape `shape`.
pub fn whole(buffer: &str, shape: &[i64]) -> Region {
    region(buffer, shape.iter().map(|&d| (int(0), int(d))).collect())
}

pub fn store(buffer: &str, indices: Vec<Expr>, value: Expr) -> Stmt {
    stmt(StmtKind::Store {
        buffer: id(buffer),
        indices,
        value,
    })
}

pub fn let_(name: &str, dtype: Option<DType>, value: Expr) -> Stmt {
    stmt(StmtKind::Let {
        var: id(name),
        dtype,
        value,
    })
}

pub fn copy(src: Region, dst: Region) -> Stmt {
    stmt(StmtKind::Copy { src, dst })
}

pub fn fill(dst: Region, value: Expr) -> Stmt {
    stmt(StmtKind::Fill { dst, value })
}

pub fn gemm(a: Region, b: Region, c: Region) -> Gemm {
    Gemm {
        a,
        b,
        c,
        trans_a: false,
        trans_b: false,
        policy: WarpPolicy::Square,
        clear_accum: false,
        packed_int4: false,
    }
}

pub fn loop_(name: &str, kind: ForKind, start: i64, stop: Expr, body: Vec<Stmt>) -> Stmt {
    stmt(StmtKind::For(For {
        var: id(name),
        start: int(start),
        stop,
        kind,
        body,
    }))
}

pub fn serial(name: &str, n: i64, body: Vec<Stmt>) -> Stmt {
    loop_(name, ForKind::Serial, 0, int(n), body)
}

pub fn parallel(name: &str, n: i64, body: Vec<Stmt>) -> Stmt {
    loop_(name, ForKind::Parallel, 0, int(n), body)
}

pub fn kernel(grid: &[i64], vars: &[&str], threads: &[i64], allocs: Vec<BufferDecl>) -> Kernel {
    Kernel {
        grid: grid.iter().map(|&g| int(g)).collect(),
        block_vars: vars.iter().map(|v| id(v)).collect(),
        threads: threads.iter().map(|&t| int(t)).collect(),
        swizzle: None,
        min_blocks_per_sm: None,
        no_set_max_nreg: false,
        cluster: Vec::new(),
        layouts: Vec::new(),
        reducers: Vec::new(),
        allocs,
        arena: None,
        body: Vec::new(),
    }
}

pub fn func(name: &str, params: Vec<BufferDecl>, body: Vec<Stmt>) -> PrimFunc {
    PrimFunc {
        name: id(name),
        dims: Vec::new(),
        params,
        scratch: Vec::new(),
        body,
        span: Span::DUMMY,
        space: Default::default(),
    }
}

/// The seed 000 kernel (`tests/cases/valid/seed000_dsl.tir`) built in code.
pub fn seed() -> PrimFunc {
    let f16 = DType::Float16;
    let mut k = kernel(
        &[16, 32],
        &["bx", "by"],
        &[128],
        vec![
            decl("A_shared", &[128, 32], f16, Scope::Shared),
            decl("B_shared", &[32, 128], f16, Scope::Shared),
            decl("C_local", &[128, 128], DType::Float32, Scope::Fragment),
        ],
    );
    k.swizzle = Some(Swizzle {
        panel_size: int(10),
        order: RasterOrder::Row,
        span: Span::DUMMY,
    });
    let pipelined = ForKind::Pipelined {
        num_stages: Expr::int(3),
        order: Vec::new(),
        stage: Vec::new(),
    };
    k.body = vec![
        fill(whole("C_local", &[128, 128]), int(0)),
        loop_(
            "ko",
            pipelined,
            0,
            int(32),
            vec![
                copy(
                    region(
                        "A",
                        vec![
                            (mul(var("by"), int(128)), int(128)),
                            (mul(var("ko"), int(32)), int(32)),
                        ],
                    ),
                    whole("A_shared", &[128, 32]),
                ),
                parallel(
                    "k",
                    32,
                    vec![parallel(
                        "j",
                        128,
                        vec![store(
                            "B_shared",
                            vec![var("k"), var("j")],
                            load(
                                "B",
                                vec![
                                    add(mul(var("ko"), int(32)), var("k")),
                                    add(mul(var("bx"), int(128)), var("j")),
                                ],
                            ),
                        )],
                    )],
                ),
                stmt(StmtKind::Gemm(gemm(
                    whole("A_shared", &[128, 32]),
                    whole("B_shared", &[32, 128]),
                    whole("C_local", &[128, 128]),
                ))),
            ],
        ),
        copy(
            whole("C_local", &[128, 128]),
            region(
                "C",
                vec![
                    (mul(var("by"), int(128)), int(128)),
                    (mul(var("bx"), int(128)), int(128)),
                ],
            ),
        ),
    ];
    func(
        "gemm_schedule",
        vec![
            param("A", &[4096, 1024], f16),
            param("B", &[1024, 2048], f16),
            param("C", &[4096, 2048], f16),
        ],
        vec![stmt(StmtKind::Kernel(k))],
    )
}
