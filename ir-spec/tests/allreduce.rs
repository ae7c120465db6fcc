//! `T.thread_allreduce` (TVM's `tvm_thread_allreduce` under a `T.comm_reducer` scope): its
//! two spellings parse to one statement that prints back, the front end's and the
//! verifier's refusals are located, and the interpreter computes the butterfly of
//! `ir.rs`'s `AllReduce` on random inputs (compared here with a direct fold in f64 where the
//! arithmetic is exact, and with the butterfly's own float16 order where it is not).

use std::collections::HashMap;
use tlc_ir::interp::scalar::round_float;
use tlc_ir::interp::{run, RunOptions, Tensor};
use tlc_ir::printer::print_func;
use tlc_ir::DType;
use tlc_ir::{parse, AllReduceOp, Diagnostic, PrimFunc, StmtKind};

/// A (4, 32) float32 kernel with block (32, 4): `stmts` at the per-thread level, `acc` a
/// local (1,) buffer of `dtype`, thread variables `tx`, `ty`.
fn kernel(dtype: &str, block: &str, stmts: &str) -> String {
    let mut s = format!(
        "@T.prim_func\ndef f(A: T.Tensor((4, 32), \"{dtype}\"), C: T.Tensor((4, 32), \"{dtype}\")):\n    with T.Kernel(1, threads={block}) as bx:\n        acc = T.alloc_local((1,), \"{dtype}\")\n        tx = T.thread_binding(0, 32, thread=\"threadIdx.x\")\n        ty = T.get_thread_binding(1)\n"
    );
    for line in stmts.lines() {
        s.push_str("        ");
        s.push_str(line);
        s.push('\n');
    }
    s
}

fn ok(src: &str) -> PrimFunc {
    let f = parse(src).unwrap_or_else(|d| panic!("does not parse: {d:#?}\n{src}"));
    if let Err(d) = tlc_ir::verifier::verify(&f) {
        panic!("does not verify: {d:#?}\n{src}");
    }
    f
}

/// The first error of `src` (parse, else verify) and the text it points at.
fn first_error(src: &str) -> (String, String) {
    let diags: Vec<Diagnostic> = match parse(src) {
        Err(d) => d,
        Ok(f) => tlc_ir::verifier::verify(&f).expect_err("expected an error"),
    };
    let d = &diags[0];
    (
        d.message.clone(),
        src.get(d.span.start..d.span.end)
            .unwrap_or("<bad span>")
            .to_string(),
    )
}

const TVM_SUM: &str = "with T.attr(T.comm_reducer(lambda x, y: x + y, [T.float32(0)]), \"reduce_scope\", T.reinterpret(T.uint64(0), dtype=\"handle\")):\n    T.evaluate(T.tvm_thread_allreduce(T.uint32(1), A[ty, tx], True, acc[0], tx, dtype=\"handle\"))\nC[ty, tx] = acc[0]";

#[test]
fn tvm_spelling_is_the_dsl_statement_and_prints_back() {
    let tvm = ok(&kernel("float32", "(32, 4)", TVM_SUM));
    let dsl = ok(&kernel(
        "float32",
        "(32, 4)",
        "T.thread_allreduce(\"sum\", A[ty, tx], acc[0], tx)\nC[ty, tx] = acc[0]",
    ));
    assert_eq!(tvm, dsl);
    let printed = print_func(&tvm);
    assert!(
        printed.contains("T.thread_allreduce(\"sum\", A[ty, tx], acc[0], tx)"),
        "{printed}"
    );
    assert_eq!(ok(&printed), tvm, "{printed}");
    // max / min, either operand order.
    for (lambda, identity, op) in [
        ("T.max(x, y)", "-T.infinity(\"float32\")", AllReduceOp::Max),
        ("T.min(y, x)", "T.infinity(\"float32\")", AllReduceOp::Min),
        ("y + x", "0", AllReduceOp::Sum),
    ] {
        let src = kernel(
            "float32",
            "(32, 4)",
            &TVM_SUM
                .replace("x + y", lambda)
                .replace("T.float32(0)", identity),
        );
        let f = ok(&src);
        let mut found = None;
        tlc_ir::visit::for_each_stmt(&f.body, &mut |s| {
            if let StmtKind::AllReduce(r) = &s.kind {
                found = Some(r.op);
            }
        });
        assert_eq!(found, Some(op), "{lambda}");
    }
}

#[test]
fn front_end_refusals_are_located() {
    let cases: &[(&str, &str, &str)] = &[
        ("x + y", "x * y", "x * y"),
        ("[T.float32(0)]", "[T.float32(1)]", "T.float32(1)"),
        ("T.uint32(1), A", "T.uint32(2), A", "T.uint32(2)"),
        ("True, acc", "tx < 3, acc", "tx < 3"),
        ("\"reduce_scope\"", "\"pragma\"", "\"pragma\""),
        ("lambda x, y", "lambda x", "lambda x: x + y"),
    ];
    for (from, to, at) in cases {
        let src = kernel("float32", "(32, 4)", &TVM_SUM.replace(from, to));
        let (msg, text) = first_error(&src);
        assert_eq!(text, *at, "{to}: {msg}");
    }
    let (msg, text) = first_error(&kernel(
        "float32",
        "(32, 4)",
        "T.thread_allreduce(\"prod\", A[ty, tx], acc[0], tx)",
    ));
    assert!(msg.contains("unknown all-reduce operation"), "{msg}");
    assert_eq!(text, "\"prod\"");
}

#[test]
fn verifier_refusals_are_located() {
    let reduce =
        |threads: &str| format!("T.thread_allreduce(\"sum\", A[ty, tx], acc[0], {threads})");
    // Under a thread-dependent condition: every thread must arrive.
    let src = kernel(
        "float32",
        "(32, 4)",
        &format!("if ty < 2:\n    {}", reduce("tx")),
    );
    let (msg, text) = first_error(&src);
    assert!(
        msg.contains("not every thread of the block may arrive"),
        "{msg}"
    );
    assert!(text.starts_with("T.thread_allreduce"), "{text}");
    // Not a thread variable.
    let (msg, text) = first_error(&kernel("float32", "(32, 4)", &reduce("bx")));
    assert!(
        msg.contains("not the variable of an enclosing `threadIdx` loop"),
        "{msg}"
    );
    assert_eq!(text, "bx");
    // An axis whose extent is not a power of two: the butterfly would leave the group.
    let (msg, text) = first_error(&kernel("float32", "(32, 3)", &reduce("ty")));
    assert!(msg.contains("must be a power of two"), "{msg}");
    assert!(text.starts_with("T.thread_allreduce"), "{text}");
    // A scratch that is not shared memory of the result's dtype, one element per thread.
    for (decl, what) in [
        ("sc = T.alloc_local((128,), \"float32\")", "local"),
        ("sc = T.alloc_shared((128,), \"int32\")", "int32"),
        ("sc = T.alloc_shared((64,), \"float32\")", "of 64"),
    ] {
        let src = kernel(
            "float32",
            "(32, 4)",
            &format!("{decl}\nT.thread_allreduce(\"sum\", A[ty, tx], acc[0], ty, scratch=sc)"),
        );
        let (msg, text) = first_error(&src);
        assert!(
            msg.contains("scratch is a shared buffer") && msg.contains(what),
            "{msg}"
        );
        assert_eq!(text, "sc");
    }
    // A result in shared memory.
    let src = kernel(
        "float32",
        "(32, 4)",
        "s = T.alloc_shared((1,), \"float32\")\nT.thread_allreduce(\"sum\", A[ty, tx], s[0], tx)",
    );
    let (msg, text) = first_error(&src);
    assert!(msg.contains("local buffer"), "{msg}");
    assert_eq!(text, "s");
    // A dtype one shuffle does not carry.
    let (msg, _) = first_error(&kernel("float64", "(32, 4)", &reduce("tx")));
    assert!(msg.contains("not float64"), "{msg}");
}

fn outputs(src: &str, seed: u64) -> HashMap<String, Tensor> {
    let opts = RunOptions { seed, threads: 0 };
    run(&ok(src), &HashMap::new(), HashMap::new(), &opts)
        .unwrap_or_else(|d| panic!("run failed: {d:#?}"))
}

#[test]
fn interpreter_folds_each_warp_row() {
    // float32 max / min are exact; int32 sums too: compare with a direct fold.
    for (dtype, op) in [("float32", "max"), ("float32", "min"), ("int32", "sum")] {
        let src = kernel(
            dtype,
            "(32, 4)",
            &format!("T.thread_allreduce(\"{op}\", A[ty, tx], acc[0], tx)\nC[ty, tx] = acc[0]"),
        );
        for seed in 0..3 {
            let out = outputs(&src, seed);
            let (a, c) = (out["A"].to_f64(), out["C"].to_f64());
            for row in 0..4 {
                let vals = &a[row * 32..row * 32 + 32];
                let want = match op {
                    "max" => vals.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                    "min" => vals.iter().copied().fold(f64::INFINITY, f64::min),
                    _ => vals.iter().sum(),
                };
                for (i, &got) in c[row * 32..row * 32 + 32].iter().enumerate() {
                    assert_eq!(got, want, "{dtype} {op} seed {seed}: row {row} thread {i}");
                }
            }
        }
    }
}

/// float16 sums round at every step: the result is the butterfly's, in its order
/// (`v_t ← v_t ⊕ v_{t xor o}`, o = 16, …, 1; every thread ends with the same bits), which
/// differs from an in-order fold for some inputs.
#[test]
fn interpreter_float16_sum_is_the_butterfly() {
    let src = kernel(
        "float16",
        "(32, 4)",
        "T.thread_allreduce(\"sum\", A[ty, tx], acc[0], tx)\nC[ty, tx] = acc[0]",
    );
    let f16 = |x: f64| round_float(DType::Float16, x);
    let mut differs = false;
    for seed in 0..8 {
        let out = outputs(&src, seed);
        let (a, c) = (out["A"].to_f64(), out["C"].to_f64());
        for row in 0..4 {
            let mut v: Vec<f64> = a[row * 32..row * 32 + 32].to_vec();
            let mut off = 16;
            while off >= 1 {
                let prev = v.clone();
                for t in 0..32 {
                    v[t] = f16(prev[t] + prev[t ^ off]);
                }
                off /= 2;
            }
            let in_order = a[row * 32..row * 32 + 32]
                .iter()
                .fold(0.0, |s, &x| f16(s + x));
            differs |= in_order != v[0];
            for t in 0..32 {
                assert_eq!(c[row * 32 + t], v[t], "seed {seed} row {row} thread {t}");
            }
        }
    }
    assert!(differs, "no input told the butterfly from an in-order fold");
}

/// A group of 16 threads (block (16, 8)): two groups per warp.
#[test]
fn interpreter_groups_smaller_than_a_warp() {
    let src = "@T.prim_func\ndef f(A: T.Tensor((8, 16), \"int32\"), C: T.Tensor((8, 16), \"int32\")):\n    with T.Kernel(1, threads=(16, 8)) as bx:\n        acc = T.alloc_local((1,), \"int32\")\n        tx = T.thread_binding(0, 16, thread=\"threadIdx.x\")\n        ty = T.thread_binding(0, 8, thread=\"threadIdx.y\")\n        T.thread_allreduce(\"sum\", A[ty, tx] * (tx + 1), acc[0], tx)\n        C[ty, tx] = acc[0]\n";
    let out = outputs(src, 5);
    let (a, c) = (out["A"].to_f64(), out["C"].to_f64());
    for row in 0..8 {
        let want: f64 = (0..16).map(|i| a[row * 16 + i] * (i + 1) as f64).sum();
        for i in 0..16 {
            assert_eq!(c[row * 16 + i], want, "row {row} thread {i}");
        }
    }
}

/// The butterfly over any thread axes: `t` numbers a group's threads over the named axes
/// (x before y), partners differ in one bit of `t`. Integer sums of distinct weights are
/// exact, so a direct fold checks the grouping; y alone, x and y (across warps), y with a
/// non-power-of-two x below it (no lane xor reaches it), z alone.
#[test]
fn interpreter_reduces_over_any_axes() {
    let cases: [(&str, [usize; 3], &str, &[usize]); 5] = [
        ("(2, 32)", [2, 32, 1], "ty", &[1]),
        ("(4, 16)", [4, 16, 1], "ty", &[1]),
        ("(32, 4)", [32, 4, 1], "tx, ty", &[0, 1]),
        ("(3, 8)", [3, 8, 1], "ty", &[1]),
        ("(4, 2, 8)", [4, 2, 8], "tz, tx", &[2, 0]),
    ];
    for (block, shape, threads, axes) in cases {
        let n: usize = shape.iter().product();
        let src = format!(
            "@T.prim_func\ndef f(A: T.Tensor(({n},), \"int32\"), C: T.Tensor(({n},), \"int32\")):\n    with T.Kernel(1, threads={block}) as bx:\n        acc = T.alloc_local((1,), \"int32\")\n        tx = T.get_thread_binding(0)\n        ty = T.get_thread_binding(1)\n        tz = T.get_thread_binding(2)\n        l = tx + {x} * (ty + {y} * tz)\n        T.thread_allreduce(\"sum\", A[l] * (l + 1), acc[0], {threads})\n        C[l] = acc[0]\n",
            x = shape[0],
            y = shape[1],
        );
        let out = outputs(&src, 9);
        let (a, c) = (out["A"].to_f64(), out["C"].to_f64());
        let coords = |l: usize| {
            [
                l % shape[0],
                (l / shape[0]) % shape[1],
                l / (shape[0] * shape[1]),
            ]
        };
        for (l, &got) in c.iter().enumerate() {
            let same_group =
                |m: usize| (0..3).all(|ax| axes.contains(&ax) || coords(m)[ax] == coords(l)[ax]);
            let want: f64 = (0..n)
                .filter(|&m| same_group(m))
                .map(|m| a[m] * (m + 1) as f64)
                .sum();
            assert_eq!(got, want, "block {block} over {threads}: thread {l}");
        }
    }
}

/// `scratch=` (what `plan-allreduce-scratch` adds) prints and parses back: compiled IR read
/// again keeps its scratch.
#[test]
fn scratch_prints_and_parses_back() {
    let src = kernel(
        "float32",
        "(32, 4)",
        "sc = T.alloc_shared((128,), \"float32\")\nT.thread_allreduce(\"sum\", A[ty, tx], acc[0], ty, scratch=sc)\nC[ty, tx] = acc[0]",
    );
    let f = ok(&src);
    let printed = print_func(&f);
    assert!(
        printed.contains("T.thread_allreduce(\"sum\", A[ty, tx], acc[0], ty, scratch=sc)"),
        "{printed}"
    );
    assert_eq!(ok(&printed), f);
}
