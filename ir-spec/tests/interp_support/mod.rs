//! Builds IR in code for the interpreter tests and benchmark (the parser lives elsewhere):
//! small constructors, and whole kernels — the seed gemm, an elementwise kernel, a tiled copy.
#![allow(dead_code)]

use std::collections::HashMap;
use tlc_ir::interp::{self, RunOptions, Tensor};
use tlc_ir::*;

/// A span `start..end`, so that tests can check where a diagnostic points.
pub fn sp(start: usize, end: usize) -> Span {
    Span::new(start, end)
}

pub fn int(v: i64) -> Expr {
    Expr::int(v)
}

pub fn float(v: f64) -> Expr {
    Expr::new(ExprKind::Float(v), Span::DUMMY)
}

pub fn var(name: &str) -> Expr {
    Expr::var(name)
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

pub fn lt(a: Expr, b: Expr) -> Expr {
    bin(BinOp::Lt, a, b)
}

pub fn ceildiv(a: Expr, b: Expr) -> Expr {
    bin(BinOp::CeilDiv, a, b)
}

pub fn cast(dtype: DType, a: Expr) -> Expr {
    Expr::new(ExprKind::Cast(dtype, Box::new(a)), Span::DUMMY)
}

pub fn select(c: Expr, a: Expr, b: Expr) -> Expr {
    Expr::new(
        ExprKind::Select(Box::new(c), Box::new(a), Box::new(b)),
        Span::DUMMY,
    )
}

pub fn load(buf: &str, indices: Vec<Expr>) -> Expr {
    Expr::new(
        ExprKind::Load {
            buffer: buf.to_string(),
            indices,
        },
        Span::DUMMY,
    )
}

/// Gives an expression a span.
pub fn at(mut e: Expr, span: Span) -> Expr {
    e.span = span;
    e
}

pub fn id(name: &str) -> Ident {
    Ident::new(name, Span::DUMMY)
}

pub fn param(name: &str, shape: Vec<Expr>, dtype: DType) -> BufferDecl {
    BufferDecl {
        name: id(name),
        dtype,
        shape,
        scope: Scope::Global,
        span: Span::DUMMY,
    }
}

pub fn alloc(name: &str, shape: &[i64], dtype: DType, scope: Scope) -> BufferDecl {
    BufferDecl {
        name: id(name),
        dtype,
        shape: shape.iter().map(|&d| int(d)).collect(),
        scope,
        span: Span::DUMMY,
    }
}

pub fn stmt(kind: StmtKind) -> Stmt {
    Stmt::new(kind, Span::DUMMY)
}

/// Gives a statement a span.
pub fn stmt_at(kind: StmtKind, span: Span) -> Stmt {
    Stmt::new(kind, span)
}

pub fn kernel(grid: Vec<Expr>, vars: &[&str], allocs: Vec<BufferDecl>, body: Vec<Stmt>) -> Stmt {
    stmt(StmtKind::Kernel(Kernel {
        grid,
        block_vars: vars.iter().map(|v| id(v)).collect(),
        threads: vec![int(128)],
        swizzle: None,
        min_blocks_per_sm: None,
        no_set_max_nreg: false,
        cluster: Vec::new(),
        layouts: Vec::new(),
        reducers: Vec::new(),
        allocs,
        arena: None,
        body,
    }))
}

pub fn for_kind(v: &str, stop: Expr, kind: ForKind, body: Vec<Stmt>) -> Stmt {
    stmt(StmtKind::For(For {
        var: id(v),
        start: int(0),
        stop,
        kind,
        body,
    }))
}

pub fn serial(v: &str, stop: Expr, body: Vec<Stmt>) -> Stmt {
    for_kind(v, stop, ForKind::Serial, body)
}

/// `for a, b in T.Parallel(x, y)` as two nested parallel loops.
pub fn parallel2(a: &str, x: i64, b: &str, y: i64, body: Vec<Stmt>) -> Stmt {
    for_kind(
        a,
        int(x),
        ForKind::Parallel,
        vec![for_kind(b, int(y), ForKind::Parallel, body)],
    )
}

pub fn pipelined(v: &str, stop: Expr, stages: i64, body: Vec<Stmt>) -> Stmt {
    for_kind(
        v,
        stop,
        ForKind::Pipelined {
            num_stages: Expr::int(stages),
            order: Vec::new(),
            stage: Vec::new(),
        },
        body,
    )
}

pub fn store(buf: &str, indices: Vec<Expr>, value: Expr) -> Stmt {
    stmt(StmtKind::Store {
        buffer: id(buf),
        indices,
        value,
    })
}

pub fn if_(cond: Expr, then_body: Vec<Stmt>, else_body: Vec<Stmt>) -> Stmt {
    stmt(StmtKind::If {
        cond,
        then_body,
        else_body,
    })
}

pub fn let_(v: &str, dtype: Option<DType>, value: Expr) -> Stmt {
    stmt(StmtKind::Let {
        var: id(v),
        dtype,
        value,
    })
}

/// A region `buf[starts .. starts + extents]`.
pub fn region(buf: &str, starts: Vec<Expr>, extents: Vec<Expr>) -> Region {
    Region {
        buffer: id(buf),
        ranges: starts
            .into_iter()
            .zip(extents)
            .map(|(start, extent)| Range { start, extent })
            .collect(),
        span: Span::DUMMY,
    }
}

/// The whole of a buffer with a constant shape.
pub fn whole(buf: &str, shape: &[i64]) -> Region {
    region(
        buf,
        shape.iter().map(|_| int(0)).collect(),
        shape.iter().map(|&d| int(d)).collect(),
    )
}

pub fn copy(src: Region, dst: Region) -> Stmt {
    stmt(StmtKind::Copy { src, dst })
}

pub fn gemm(a: Region, b: Region, c: Region, trans_a: bool, trans_b: bool, clear: bool) -> Stmt {
    stmt(StmtKind::Gemm(Gemm {
        a,
        b,
        c,
        trans_a,
        trans_b,
        policy: WarpPolicy::Square,
        clear_accum: clear,
        packed_int4: false,
    }))
}

pub fn fill(dst: Region, value: Expr) -> Stmt {
    stmt(StmtKind::Fill { dst, value })
}

pub fn func(name: &str, dims: &[&str], params: Vec<BufferDecl>, body: Vec<Stmt>) -> PrimFunc {
    PrimFunc {
        name: id(name),
        dims: dims
            .iter()
            .map(|d| tlc_ir::Dim::int32(*d, Span::DUMMY))
            .collect(),
        params,
        scratch: Vec::new(),
        body,
        space: Default::default(),
        span: Span::DUMMY,
    }
}

/// How a gemm kernel is built.
#[derive(Clone, Debug)]
pub struct GemmCfg {
    pub m: i64,
    pub n: i64,
    pub k: i64,
    pub bm: i64,
    pub bn: i64,
    pub bk: i64,
    pub in_dtype: DType,
    pub acc_dtype: DType,
    pub out_dtype: DType,
    pub trans_a: bool,
    pub trans_b: bool,
    /// Load B with the seed's `T.Parallel` store loop (needs tiles that divide the sizes)
    /// instead of `T.copy`.
    pub b_parallel: bool,
    /// Instead of `T.clear`, fill the accumulator with garbage and use `clear_accum=True` on
    /// the first K tile (inside an `if`).
    pub clear_accum: bool,
    /// Declare M, N, K as symbolic dims.
    pub symbolic: bool,
}

impl GemmCfg {
    /// The seed kernel (128x128x32 tiles, 3 stages, fp16 in, fp32 accumulate, fp16 out).
    pub fn seed(m: i64, n: i64, k: i64) -> GemmCfg {
        GemmCfg {
            m,
            n,
            k,
            bm: 128,
            bn: 128,
            bk: 32,
            in_dtype: DType::Float16,
            acc_dtype: DType::Float32,
            out_dtype: DType::Float16,
            trans_a: false,
            trans_b: false,
            b_parallel: true,
            clear_accum: false,
            symbolic: false,
        }
    }

    /// A dimension: the literal, or the dim's name when symbolic.
    fn dim(&self, name: &str, v: i64) -> Expr {
        if self.symbolic {
            var(name)
        } else {
            int(v)
        }
    }
}

/// `C = op(A) @ op(B)` in the seed kernel's shape (A stored K×M when `trans_a`, B stored N×K
/// when `trans_b`).
pub fn gemm_kernel(c: &GemmCfg) -> PrimFunc {
    let (m, n, k) = (c.dim("M", c.m), c.dim("N", c.n), c.dim("K", c.k));
    let (bm, bn, bk) = (c.bm, c.bn, c.bk);
    let a_shape = if c.trans_a {
        vec![k.clone(), m.clone()]
    } else {
        vec![m.clone(), k.clone()]
    };
    let b_shape = if c.trans_b {
        vec![n.clone(), k.clone()]
    } else {
        vec![k.clone(), n.clone()]
    };
    let a_tile = if c.trans_a { [bk, bm] } else { [bm, bk] };
    let b_tile = if c.trans_b { [bn, bk] } else { [bk, bn] };
    let row0 = mul(var("by"), int(bm));
    let col0 = mul(var("bx"), int(bn));
    let k0 = mul(var("ko"), int(bk));
    let a_start = if c.trans_a {
        vec![k0.clone(), row0.clone()]
    } else {
        vec![row0.clone(), k0.clone()]
    };
    let b_start = if c.trans_b {
        vec![col0.clone(), k0.clone()]
    } else {
        vec![k0.clone(), col0.clone()]
    };
    let load_a = copy(
        region("A", a_start, a_tile.iter().map(|&d| int(d)).collect()),
        whole("A_shared", &a_tile),
    );
    let load_b = if c.b_parallel && !c.trans_b {
        parallel2(
            "k",
            bk,
            "j",
            bn,
            vec![store(
                "B_shared",
                vec![var("k"), var("j")],
                load(
                    "B",
                    vec![add(k0.clone(), var("k")), add(col0.clone(), var("j"))],
                ),
            )],
        )
    } else {
        copy(
            region("B", b_start, b_tile.iter().map(|&d| int(d)).collect()),
            whole("B_shared", &b_tile),
        )
    };
    let g = |clear| {
        gemm(
            whole("A_shared", &a_tile),
            whole("B_shared", &b_tile),
            whole("C_local", &[bm, bn]),
            c.trans_a,
            c.trans_b,
            clear,
        )
    };
    let (init, mma) = if c.clear_accum {
        (
            fill(whole("C_local", &[bm, bn]), float(12345.0)),
            if_(
                bin(BinOp::Eq, var("ko"), int(0)),
                vec![g(true)],
                vec![g(false)],
            ),
        )
    } else {
        (fill(whole("C_local", &[bm, bn]), int(0)), g(false))
    };
    let body = vec![kernel(
        vec![ceildiv(n.clone(), int(bn)), ceildiv(m.clone(), int(bm))],
        &["bx", "by"],
        vec![
            alloc("A_shared", &a_tile, c.in_dtype, Scope::Shared),
            alloc("B_shared", &b_tile, c.in_dtype, Scope::Shared),
            alloc("C_local", &[bm, bn], c.acc_dtype, Scope::Fragment),
        ],
        vec![
            init,
            pipelined(
                "ko",
                ceildiv(k.clone(), int(bk)),
                3,
                vec![load_a, load_b, mma],
            ),
            copy(
                whole("C_local", &[bm, bn]),
                region("C", vec![row0, col0], vec![int(bm), int(bn)]),
            ),
        ],
    )];
    let dims: &[&str] = if c.symbolic { &["M", "N", "K"] } else { &[] };
    func(
        "gemm",
        dims,
        vec![
            param("A", a_shape, c.in_dtype),
            param("B", b_shape, c.in_dtype),
            param("C", vec![m, n], c.out_dtype),
        ],
        body,
    )
}

/// Runs with no dims, the given inputs and one host thread; panics with the diagnostic on
/// error (tests only).
pub fn run_ok(f: &PrimFunc, inputs: Vec<(&str, Tensor)>) -> HashMap<String, Tensor> {
    run_with(f, &[], inputs, 1)
}

pub fn run_with(
    f: &PrimFunc,
    dims: &[(&str, i64)],
    inputs: Vec<(&str, Tensor)>,
    threads: usize,
) -> HashMap<String, Tensor> {
    match try_run(f, dims, inputs, threads) {
        Ok(out) => out,
        Err(d) => panic!("run failed: {d}"),
    }
}

pub fn try_run(
    f: &PrimFunc,
    dims: &[(&str, i64)],
    inputs: Vec<(&str, Tensor)>,
    threads: usize,
) -> Result<HashMap<String, Tensor>, Diagnostic> {
    let dims = dims.iter().map(|&(n, v)| (n.to_string(), v)).collect();
    let inputs = inputs
        .into_iter()
        .map(|(n, t)| (n.to_string(), t))
        .collect();
    interp::run(f, &dims, inputs, &RunOptions { seed: 1, threads })
}

/// The f64 reference `op(A) @ op(B)`, row-major M×N.
pub fn reference_gemm(a: &Tensor, b: &Tensor, cfg: &GemmCfg) -> Vec<f64> {
    let (m, n, k) = (cfg.m as usize, cfg.n as usize, cfg.k as usize);
    let (av, bv) = (a.to_f64(), b.to_f64());
    let mut out = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            let mut s = 0.0;
            for kk in 0..k {
                let x = if cfg.trans_a {
                    av[kk * m + i]
                } else {
                    av[i * k + kk]
                };
                let y = if cfg.trans_b {
                    bv[j * k + kk]
                } else {
                    bv[kk * n + j]
                };
                s += x * y;
            }
            out[i * n + j] = s;
        }
    }
    out
}
