//! The tuning space (docs/ir.md, "Tuning space"): its spellings, printing and parsing back,
//! its errors, the enumeration of configs under constraints, and binding.

use tlc_ir::printer::print_func;
use tlc_ir::tuning::{bind, describe, Config};
use tlc_ir::visit::for_each_stmt;
use tlc_ir::{parse, ForKind, PrimFunc, StmtKind};

/// Seed 002's space (tilus: num_warps 4 / 8, three (block_m, block_n), block_k 16 / 32,
/// 3 to 5 stages) on a pipelined GEMM, with a constraint.
const GEMM: &str = r#"M = T.symbolic("M")
N = T.symbolic("N")
K = T.symbolic("K")
threads = T.tunable([128, 256], default=256)
block_M, block_N = T.tunable([(128, 128), (128, 64), (64, 128)], default=(128, 128))
block_K = T.tunable([16, 32], default=32)
num_stages = T.tunable([3, 4, 5], default=3)
T.tune_constraint(block_M * block_N // threads <= 64)

@T.prim_func
def gemm(
    A: T.Tensor((M, K), "float16"),
    B: T.Tensor((K, N), "float16"),
    C: T.Tensor((M, N), "float16"),
):
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
        A_shared = T.alloc_shared((block_M, block_K), "float16")
        B_shared = T.alloc_shared((block_K, block_N), "float16")
        C_local = T.alloc_fragment((block_M, block_N), "float32")
        T.clear(C_local)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
            T.copy(A[by * block_M, k * block_K], A_shared)
            T.copy(B[k * block_K, bx * block_N], B_shared)
            T.gemm(A_shared, B_shared, C_local)
        T.copy(C_local, C[by * block_M, bx * block_N])
"#;

fn ok(src: &str) -> PrimFunc {
    parse(src).unwrap_or_else(|e| panic!("{e:#?}"))
}

fn err(src: &str) -> (String, String) {
    match parse(src) {
        Ok(_) => panic!("expected an error:\n{src}"),
        Err(e) => (
            e[0].message.clone(),
            src.get(e[0].span.start..e[0].span.end)
                .unwrap_or("<bad span>")
                .to_string(),
        ),
    }
}

fn config(pairs: &[(&str, i64)]) -> Config {
    pairs.iter().map(|(n, v)| (n.to_string(), *v)).collect()
}

#[test]
fn the_space_parses_prints_and_parses_back() {
    let f = ok(GEMM);
    let names: Vec<&str> = f.space.names().collect();
    assert_eq!(
        names,
        ["threads", "block_M", "block_N", "block_K", "num_stages"]
    );
    assert_eq!(f.space.tunables[1].candidates[1], [128, 64]);
    assert_eq!(f.space.constraints.len(), 1);
    let text = print_func(&f);
    assert!(
        text.contains(
            "block_M, block_N = T.tunable([(128, 128), (128, 64), (64, 128)], default=(128, 128))\n"
        ),
        "{text}"
    );
    assert!(text.contains("T.tune_constraint(block_M * block_N // threads <= 64)\n"));
    assert!(text.contains("num_stages=num_stages):"), "{text}");
    assert!(text.contains("threads=threads)"), "{text}");
    let again = ok(&text);
    assert_eq!(again, f);
    assert_eq!(print_func(&again), text);
    // An omitted default is the first candidate.
    let f = ok(&GEMM.replace(
        "block_K = T.tunable([16, 32], default=32)",
        "block_K = T.tunable([16, 32])",
    ));
    assert_eq!(f.space.tunables[2].default, [16]);
}

#[test]
fn configs_are_the_product_minus_the_constraints() {
    let f = ok(GEMM);
    assert_eq!(f.space.size(), 36);
    let all = f.space.configs(&Config::new()).expect("configs");
    // block_M * block_N / threads <= 64: (128, 128) needs 256 threads; the others fit both.
    assert_eq!(all.len(), 36 - 6);
    assert!(all.iter().all(|c| {
        let v = |n: &str| c.iter().find(|(k, _)| k == n).map(|(_, v)| *v).unwrap_or(0);
        v("block_M") * v("block_N") / v("threads") <= 64
    }));
    // The first group varies slowest, the candidates in the order written.
    assert_eq!(
        describe(&all[0]),
        "threads=128 block_M=128 block_N=64 block_K=16 num_stages=3"
    );
    assert_eq!(
        describe(&all[1]),
        "threads=128 block_M=128 block_N=64 block_K=16 num_stages=4"
    );
    assert_eq!(
        describe(all.last().expect("last")),
        "threads=256 block_M=64 block_N=128 block_K=32 num_stages=5"
    );
    assert_eq!(
        describe(&f.space.default_config()),
        "threads=256 block_M=128 block_N=128 block_K=32 num_stages=3"
    );
}

#[test]
fn constraints_on_dims_apply_once_the_dims_are_bound() {
    let f = ok(&GEMM.replace(
        "T.tune_constraint(block_M * block_N // threads <= 64)",
        "T.tune_constraint(block_K * 4 <= K)",
    ));
    assert_eq!(f.space.configs(&Config::new()).expect("unbound").len(), 36);
    let small_k = f.space.configs(&config(&[("K", 64)])).expect("K = 64");
    assert_eq!(small_k.len(), 18, "block_K = 32 needs K >= 128");
    let c = config(&[("block_K", 32)]);
    let e = bind(&f, &c, &config(&[("K", 64)])).expect_err("K = 64 breaks it");
    assert!(
        e.message.contains("breaks this constraint"),
        "{}",
        e.message
    );
    assert!(bind(&f, &c, &config(&[("K", 128)])).is_ok());
}

#[test]
fn binding_writes_the_numbers_in_place() {
    let f = ok(GEMM);
    let bound = bind(
        &f,
        &config(&[("block_M", 64), ("block_N", 128), ("num_stages", 4)]),
        &Config::new(),
    )
    .expect("bind");
    assert!(bound.space.is_empty());
    let text = print_func(&bound);
    assert!(text.contains("threads=256)"), "{text}");
    assert!(
        text.contains("T.alloc_shared((64, 32), \"float16\")"),
        "{text}"
    );
    assert!(text.contains("num_stages=4):"), "{text}");
    // The bound kernel is the IR written with the numbers: it verifies.
    tlc_ir::verifier::verify(&bound).expect("verifies");
    // Unbound, the verifier refuses it with one error at the space (TU1).
    let e = tlc_ir::verifier::verify(&f).expect_err("unbound");
    assert_eq!(e.len(), 1);
    assert_eq!(e[0].message, "this kernel's tuning space is not bound");
    // A value outside the candidates is allowed (a user's -D), a name outside the space not.
    assert!(bind(&f, &config(&[("block_K", 64)]), &Config::new()).is_ok());
    let e = bind(&f, &config(&[("block_Q", 64)]), &Config::new()).expect_err("unknown");
    assert_eq!(e.message, "`block_Q` is not a tunable of `gemm`");
    // A config that breaks a constraint is refused at the constraint.
    let e = bind(
        &f,
        &config(&[("threads", 128), ("block_M", 128), ("block_N", 128)]),
        &Config::new(),
    )
    .expect_err("breaks the constraint");
    assert_eq!(
        &GEMM[e.span.start..e.span.end],
        "block_M * block_N // threads <= 64"
    );
}

#[test]
fn zero_stages_bind_to_a_serial_loop() {
    let f = ok(&GEMM.replace(
        "num_stages = T.tunable([3, 4, 5], default=3)",
        "num_stages = T.tunable([0, 2], default=2)",
    ));
    let kinds = |f: &PrimFunc| {
        let mut out = Vec::new();
        for_each_stmt(&f.body, &mut |s| {
            if let StmtKind::For(l) = &s.kind {
                out.push(l.kind.clone());
            }
        });
        out
    };
    let zero = bind(&f, &config(&[("num_stages", 0)]), &Config::new()).expect("bind");
    assert!(kinds(&zero).contains(&ForKind::Serial));
    let two = bind(&f, &config(&[("num_stages", 2)]), &Config::new()).expect("bind");
    assert!(kinds(&two).iter().any(|k| k.num_stages() == Some(2)));
}

#[test]
fn mistakes_are_located() {
    let head = "M = T.symbolic(\"M\")\n";
    let kernel = "\n@T.prim_func\ndef f(A: T.Tensor((M,), \"float32\")):\n    with T.Kernel(1, threads=32) as bx:\n        pass\n";
    let cases: &[(&str, &str, &str)] = &[
        (
            "b = T.tunable([1, 2], default=3)",
            "the default is not one of the candidates",
            "3",
        ),
        ("b = T.tunable([])", "a tunable needs a candidate", "[]"),
        (
            "a, b = T.tunable([(1, 2), (3,)])",
            "this candidate has 1 values for 2 names",
            "(3,)",
        ),
        (
            "b = T.tunable([1, 1])",
            "this candidate is listed twice",
            "1",
        ),
        ("M = T.tunable([1, 2])", "`M` is already declared", "M"),
        (
            "b = T.tunable([1, 2])\nb = T.tunable([3])",
            "`b` is already declared",
            "b",
        ),
        (
            "b = T.tunable([1, 2])\nT.tune_constraint(b < c)",
            "`c` is neither a tunable nor a symbolic dimension",
            "c",
        ),
        (
            "b = T.tunable([1, x])",
            "a tunable's value must be a constant integer",
            "x",
        ),
    ];
    for (space, message, at) in cases {
        let src = format!("{head}{space}\n{kernel}");
        let (m, text) = err(&src);
        assert_eq!(&m, message, "{space}");
        assert_eq!(&text, at, "{space}");
    }
    // `num_stages=` and `threads=` take constants or tunables, not other names.
    let src = "M = T.symbolic(\"M\")\n\n@T.prim_func\ndef f(A: T.Tensor((M,), \"float32\")):\n    with T.Kernel(1, threads=M) as bx:\n        pass\n";
    let (m, text) = err(src);
    assert_eq!(m, "the thread count must be a constant integer");
    assert_eq!(text, "M");
}
