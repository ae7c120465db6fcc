//! TileLang's `T.Persistent` tile walk (written out as a serial loop of waves) and
//! `T.clear` / `T.fill` of a per-thread buffer in per-thread code (each thread's own loop):
//! what they parse to, and that they mean what TileLang means, under the interpreter.

use std::collections::HashMap;
use tlc_ir::interp::{self, RunOptions, Tensor};
use tlc_ir::{parse, printer::print_func, DType};

fn ok(src: &str) -> tlc_ir::PrimFunc {
    let f = parse(src).unwrap_or_else(|e| panic!("{e:?}\n{src}"));
    tlc_ir::verifier::verify(&f).unwrap_or_else(|e| panic!("{e:?}\n{src}"));
    f
}

/// Every block of a persistent grid counts the tiles it visits into `Hits[bx, by]`.
fn persistent(domain: &str, vars: &str, grid: i64, group: &str) -> String {
    format!(
        r#"M = T.symbolic("M")
N = T.symbolic("N")

@T.prim_func
def walk(Hits: T.Tensor((M, N), "int32"), Who: T.Tensor((M, N), "int32")):
    with T.Kernel({grid}, threads=32) as block_id:
        for {vars} in T.Persistent({domain}, {grid}, block_id{group}):
            T.atomic_add(Hits[{idx}], 1)
            Who[{idx}] = block_id
"#,
        idx = if vars.contains(',') {
            "bx, by"
        } else {
            "bx, 0"
        }
    )
}

fn run(src: &str, m: i64, n: i64) -> (Vec<f64>, Vec<f64>) {
    let f = ok(src);
    let dims: HashMap<String, i64> = [("M".to_string(), m), ("N".to_string(), n)].into();
    let zeros = vec![0.0; (m * n) as usize];
    let inputs: HashMap<String, Tensor> = [(
        "Hits".to_string(),
        Tensor::from_f64(DType::Int32, &[m as usize, n as usize], &zeros).expect("Hits"),
    )]
    .into();
    let out = interp::run(
        &f,
        &dims,
        inputs,
        &RunOptions {
            seed: 1,
            threads: 2,
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    (out["Hits"].to_f64(), out["Who"].to_f64())
}

#[test]
fn the_persistent_walk_visits_every_tile_exactly_once() {
    // Group widths 8 (default), 3, and more than the columns; more tiles than blocks,
    // fewer, and a column count that is not a multiple of the group.
    for (m, n, grid, group) in [
        (7, 10, 4, ""),
        (5, 13, 6, ", group_size=3"),
        (9, 2, 32, ""),
        (3, 17, 5, ", group_size=1"),
    ] {
        let (hits, who) = run(&persistent("[M, N]", "bx, by", grid, group), m, n);
        assert!(
            hits.iter().all(|&h| h == 1.0),
            "{m}x{n} grid {grid}{group}: {hits:?}"
        );
        // TileLang's order: tile r = w * grid + b is (bx, by) = (i1, i0 * g + i2) for
        // r = (i0 * M + i1) * g + i2, g = max(1, min(group, N)).
        let g = match group {
            "" => 8.min(n).max(1),
            s => s
                .trim_start_matches(", group_size=")
                .parse::<i64>()
                .expect("g")
                .min(n)
                .max(1),
        };
        for bx in 0..m {
            for by in 0..n {
                let r = ((by / g) * m + bx) * g + by % g;
                assert_eq!(
                    who[(bx * n + by) as usize],
                    (r % grid) as f64,
                    "tile ({bx}, {by})"
                );
            }
        }
    }
    let (hits, _) = run(&persistent("[M]", "bx", 3, ""), 10, 1);
    assert!(hits.iter().all(|&h| h == 1.0), "{hits:?}");
}

#[test]
fn the_persistent_walk_prints_as_waves_and_parses_back() {
    let f = ok(&persistent("[M, N]", "bx, by", 4, ""));
    let text = print_func(&f);
    for line in [
        "for bx_wave in T.serial(T.ceildiv(T.ceildiv(N, T.max(1, T.min(8, N))) * M * T.max(1, T.min(8, N)), 4)):",
        "bx_tile = bx_wave * 4 + block_id",
        "bx = bx_tile // T.max(1, T.min(8, N)) % M",
        "if by < N:",
    ] {
        assert!(text.contains(line), "missing `{line}` in\n{text}");
    }
    assert_eq!(parse(&text).expect("reparses"), f);
    let bad = persistent("M", "bx", 4, "");
    let err = parse(&bad).expect_err("domain must be a list");
    assert!(
        err[0].message.contains("takes its domain as a list"),
        "{:?}",
        err[0].message
    );
}

#[test]
fn a_per_thread_clear_is_each_threads_loop() {
    let src = r#"@T.prim_func
def k(Y: T.Tensor((64,), "float32")):
    with T.Kernel(1, threads=64) as bx:
        tx = T.get_thread_binding(0)
        acc = T.alloc_local((4,), "float32")
        T.clear(acc)
        for k in T.serial(4):
            acc[k] += T.cast(tx * k, "float32")
        Y[tx] = acc[0] + acc[1] + acc[2] + acc[3]
"#;
    let f = ok(src);
    let text = print_func(&f);
    assert!(
        text.contains("for acc_fill0 in T.serial(4):\n                acc[acc_fill0] = 0"),
        "{text}"
    );
    let out = interp::run(
        &f,
        &HashMap::new(),
        HashMap::new(),
        &RunOptions {
            seed: 1,
            threads: 1,
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    for (t, y) in out["Y"].to_f64().iter().enumerate() {
        assert_eq!(*y, (6 * t) as f64, "Y[{t}]");
    }
}
