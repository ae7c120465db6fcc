//! `rasterize`: snapshots, meaning preserved, and the block mapping checked against
//! TileLang's `rasterization2DRow` / `rasterization2DColumn` and for being a bijection.

use crate::common;

use common::{assert_same_meaning, case, corpus};
use std::collections::HashMap;
use tlc_ir::printer::print_func;
use tlc_ir::{fold_int, BinOp, Expr, ExprKind, PrimFunc, StmtKind};
use tlc_passes::rasterize::Rasterize;
use tlc_passes::Pass;

fn rasterized(func: PrimFunc) -> PrimFunc {
    let out = Rasterize.run(func, &common::cx()).expect("rasterize");
    tlc_ir::verifier::verify(&out).expect("rasterized IR verifies");
    out
}

#[test]
fn snapshot_swizzle_panels() {
    insta::assert_snapshot!(print_func(&rasterized(case("swizzle_panels"))));
}

#[test]
fn snapshot_gemm_seed000() {
    insta::assert_snapshot!(print_func(&rasterized(case("gemm_seed000"))));
}

#[test]
fn rasterize_keeps_meaning_on_every_case() {
    let mut compared = 0;
    for (name, func) in corpus() {
        let out = rasterized(func.clone());
        compared += assert_same_meaning(&name, &func, &out);
    }
    assert!(compared >= 60, "only {compared} runs compared");
}

fn kernel_src(gx: i64, gy: i64, panel: i64, column: bool) -> String {
    let order = if column { ", order=\"column\"" } else { "" };
    format!(
        "@T.prim_func\ndef f(O: T.Tensor(({gy}, {gx}), \"int32\")):\n    with T.Kernel({gx}, {gy}, threads=32) as (bx, by):\n        T.use_swizzle(panel_size={panel}{order})\n        O[by, bx] = bx\n"
    )
}

#[test]
fn panel_size_zero_only_drops_the_swizzle() {
    let func = tlc_ir::parse(&kernel_src(4, 3, 0, false)).unwrap();
    let out = rasterized(func.clone());
    let mut expected = func;
    for s in &mut expected.body {
        if let StmtKind::Kernel(k) = &mut s.kind {
            k.swizzle = None;
        }
    }
    assert_eq!(out, expected);
}

/// TileLang's mapping, transcribed from `threadblock_swizzle.h` (unsigned arithmetic).
fn tilelang(bx: i64, by: i64, gx: i64, gy: i64, p: i64, column: bool) -> (i64, i64) {
    let block = bx + by * gx;
    let grid = gx * gy;
    let (g_major, _) = if column { (gy, gx) } else { (gx, gy) };
    let panel_size = p * g_major;
    let offset = block % panel_size;
    let panel = block / panel_size;
    let total = (grid + panel_size - 1) / panel_size;
    let stride = if panel + 1 < total {
        p
    } else {
        (grid - panel * panel_size) / g_major
    };
    let snake = if panel & 1 == 1 {
        g_major - 1 - offset / stride
    } else {
        offset / stride
    };
    let across = offset % stride + panel * p;
    if column {
        (across, snake)
    } else {
        (snake, across)
    }
}

fn eval(e: &Expr, env: &HashMap<String, i64>) -> i64 {
    match &e.kind {
        ExprKind::Int(v) => *v,
        ExprKind::Bool(b) => i64::from(*b),
        ExprKind::Var(n) => env[n],
        ExprKind::Binary(op, a, b) => {
            let (x, y) = (eval(a, env), eval(b, env));
            match op {
                BinOp::Eq => i64::from(x == y),
                BinOp::Lt => i64::from(x < y),
                _ => fold_int(*op, x, y).expect("defined"),
            }
        }
        ExprKind::Select(c, a, b) => {
            if eval(c, env) != 0 {
                eval(a, env)
            } else {
                eval(b, env)
            }
        }
        other => panic!("unexpected {other:?}"),
    }
}

/// The block each block of the grid plays, by evaluating the lets the pass wrote.
fn mapping(func: &PrimFunc) -> Vec<((i64, i64), (i64, i64))> {
    let StmtKind::Kernel(k) = &func.body[0].kind else {
        panic!("no kernel")
    };
    let (gx, gy) = (k.grid[0].as_int().unwrap(), k.grid[1].as_int().unwrap());
    let StmtKind::Store { indices, .. } = &k.body.last().unwrap().kind else {
        panic!("no store")
    };
    let mut out = Vec::new();
    for by in 0..gy {
        for bx in 0..gx {
            let mut env = HashMap::from([("bx".to_string(), bx), ("by".to_string(), by)]);
            for stmt in &k.body {
                if let StmtKind::Let { var, value, .. } = &stmt.kind {
                    let v = eval(value, &env);
                    env.insert(var.name.clone(), v);
                }
            }
            out.push(((bx, by), (eval(&indices[1], &env), eval(&indices[0], &env))));
        }
    }
    out
}

#[test]
fn mapping_is_tilelangs_and_a_bijection_for_many_grids() {
    let mut checked = 0;
    for gx in 1..=9 {
        for gy in 1..=9 {
            for panel in [1, 2, 3, 4, 5, 8, 10, 16] {
                for column in [false, true] {
                    let func = tlc_ir::parse(&kernel_src(gx, gy, panel, column)).unwrap();
                    let map = mapping(&rasterized(func));
                    let mut seen = vec![false; (gx * gy) as usize];
                    for ((bx, by), (x, y)) in map {
                        assert_eq!(
                            (x, y),
                            tilelang(bx, by, gx, gy, panel, column),
                            "grid {gx}x{gy} panel {panel} column {column} block ({bx}, {by})"
                        );
                        assert!((0..gx).contains(&x) && (0..gy).contains(&y));
                        let slot = &mut seen[(y * gx + x) as usize];
                        assert!(!*slot, "({x}, {y}) played twice in {gx}x{gy} panel {panel}");
                        *slot = true;
                        checked += 1;
                    }
                }
            }
        }
    }
    assert!(checked > 20_000);
}

/// In clusters the clusters are rasterized (TileLang's mapping on the grid of clusters) and
/// a block keeps its place in its cluster: still a bijection of the grid, and the blocks of
/// one cluster play the blocks of one cluster — neighbours that share what they load.
#[test]
fn clusters_are_rasterized_whole() {
    let mut checked = 0;
    for (cx, cy) in [(2, 1), (1, 2), (2, 2), (4, 1)] {
        for ux in 1..=5 {
            for uy in 1..=5 {
                for panel in [1, 2, 3, 10] {
                    for column in [false, true] {
                        let (gx, gy) = (ux * cx, uy * cy);
                        let src = kernel_src(gx, gy, panel, column).replace(
                            "threads=32)",
                            &format!("threads=32, cluster_dims=({cx}, {cy}))"),
                        );
                        let func = tlc_ir::parse(&src).unwrap();
                        let map = mapping(&rasterized(func));
                        let mut seen = vec![false; (gx * gy) as usize];
                        for ((bx, by), (x, y)) in map {
                            let unit = tilelang(bx / cx, by / cy, ux, uy, panel, column);
                            assert_eq!(
                                (x, y),
                                (unit.0 * cx + bx % cx, unit.1 * cy + by % cy),
                                "grid {gx}x{gy} cluster {cx}x{cy} panel {panel} block ({bx}, {by})"
                            );
                            let slot = &mut seen[(y * gx + x) as usize];
                            assert!(!*slot, "({x}, {y}) played twice");
                            *slot = true;
                            checked += 1;
                        }
                    }
                }
            }
        }
    }
    assert!(checked > 5_000);
}
