//! Binding a symbolic dimension (`-D M=4`) keeps the kernel's meaning: the interpreter gives
//! the same bits for the bound kernel as for the symbolic one run with `M = 4`. A dim is a
//! typed variable and a bare literal is not, so the uses where the two would type apart
//! (`M - A[i]` with an int8 `A`, a float product, a `T.if_then_else` side, a let that a
//! shift reads) keep a typed constant.

use std::collections::HashMap;
use tlc_ir::interp::{self, RunOptions, Tensor};
use tlc_ir::printer::print_func;
use tlc_ir::specialize::specialize;
use tlc_ir::{parse, PrimFunc};

const TYPED_USES: &str = r#"M = T.symbolic("M")
N = T.symbolic("N", "int64")

@T.prim_func
def typed_uses(
    A: T.Tensor((M,), "int8"),
    H: T.Tensor((M,), "float16"),
    C: T.Tensor((M,), "int32"),
    F: T.Tensor((M,), "float32"),
    S: T.Tensor((M,), "int32"),
    X: T.Tensor((4,), "int64"),
    Y: T.Tensor((N,), "int8"),
):
    with T.Kernel(T.ceildiv(M, 64), threads=64) as bx:
        for i in T.Parallel(64):
            if bx * 64 + i < M:
                C[bx * 64 + i] = M - A[bx * 64 + i]
                F[bx * 64 + i] = M * 0.5 * H[bx * 64 + i]
                S[bx * 64 + i] = T.if_then_else(i < 2, M, A[bx * 64 + i])
                if M - A[bx * 64 + i] > 100:
                    S[bx * 64 + i] = 7
        s = M * M
        X[0] = T.cast(s << 3, "int64")
        t = N
        X[1] = t << 40
        X[2] = T.cast(N - Y[0], "int64")
"#;

fn ok(src: &str) -> PrimFunc {
    parse(src).unwrap_or_else(|e| panic!("{e:#?}"))
}

/// Every parameter's values after a run, by name, as bits.
fn outputs(func: &PrimFunc, dims: &[(&str, i64)], seed: u64) -> HashMap<String, Vec<u64>> {
    outputs_with(func, dims, seed, HashMap::new())
}

/// [`outputs`] with some parameters given.
fn outputs_with(
    func: &PrimFunc,
    dims: &[(&str, i64)],
    seed: u64,
    inputs: HashMap<String, Tensor>,
) -> HashMap<String, Vec<u64>> {
    let dims: HashMap<String, i64> = dims.iter().map(|(n, v)| (n.to_string(), *v)).collect();
    let opts = RunOptions {
        seed,
        ..RunOptions::default()
    };
    let out = interp::run(func, &dims, inputs, &opts)
        .unwrap_or_else(|d| panic!("{}: {d:?}", print_func(func)));
    out.into_iter()
        .map(|(name, t)| (name, t.to_f64().iter().map(|v| v.to_bits()).collect()))
        .collect()
}

#[test]
fn binding_a_dim_keeps_every_value() {
    let symbolic = ok(TYPED_USES);
    // M = 200 does not fit int8; M = 65 536 makes M * M leave int32, where an untyped
    // literal is an int64 (and `s << 3` would shift at 64 bits, not 32).
    for (m, n) in [(200, 3), (65_536, 130)] {
        let dims = [("M", m), ("N", n)];
        let bindings: Vec<(String, i64)> = dims.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        let bound = specialize(&symbolic, &bindings).expect("specialize");
        assert!(bound.dims.is_empty());
        for seed in 0..3 {
            let want = outputs(&symbolic, &dims, seed);
            let got = outputs(&bound, &[], seed);
            for (name, values) in &want {
                assert_eq!(
                    got.get(name),
                    Some(values),
                    "`{name}` differs at M = {m}, N = {n}, seed {seed}, bound:\n{}",
                    print_func(&bound)
                );
            }
        }
    }
}

/// Where int32 and int64 part: beside a uint32 (`int32 + uint32` is int32 and wraps a
/// uint32 past 2^31; `int64 + uint32` keeps it), after a fold that makes an int64 literal,
/// and a negated dim (the printed `-4` parses back as one literal).
const WIDTHS: &str = r#"M = T.symbolic("M")
N = T.symbolic("N", "int64")

@T.prim_func
def widths(
    U: T.Tensor((4,), "uint32"),
    D: T.Tensor((M,), "int32"),
    E: T.Tensor((N,), "int32"),
    C: T.Tensor((4,), "int64"),
    W: T.Tensor((4,), "int64"),
    B: T.Tensor((4,), "bool"),
    S: T.Tensor((4,), "int64"),
):
    with T.Kernel(1, threads=4) as bx:
        for i in T.Parallel(4):
            C[i] = N + i + U[i]
            B[i] = N + i < U[i]
            W[i] = M * 65536 * 65536 + i + U[i]
            S[i] = -M * 65536 * 65536 >> 1
"#;

#[test]
fn binding_keeps_values_beside_uint32_and_past_int32() {
    let symbolic = ok(WIDTHS);
    for (m, n) in [(1, 4), (3, 2)] {
        let dims = [("M", m), ("N", n)];
        let bindings: Vec<(String, i64)> = dims.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        let bound = specialize(&symbolic, &bindings).expect("specialize");
        let text = print_func(&bound);
        let reparsed = ok(&text);
        // uint32 values past 2^31, where int32 and int64 part.
        let u = || {
            let values = [4_000_000_000, 1, 3_000_000_000, 7];
            let t = Tensor::from_i64(tlc_ir::DType::UInt32, &[4], &values).expect("tensor");
            HashMap::from([("U".to_string(), t)])
        };
        let want = outputs_with(&symbolic, &dims, 0, u());
        assert_eq!(outputs_with(&bound, &[], 0, u()), want, "M = {m}:\n{text}");
        assert_eq!(
            outputs_with(&reparsed, &[], 0, u()),
            want,
            "printed, M = {m}:\n{text}"
        );
    }
}

#[test]
fn sizes_indices_and_bounds_take_the_literal() {
    let bound =
        specialize(&ok(TYPED_USES), &[("M".into(), 200), ("N".into(), 3)]).expect("specialize");
    let text = print_func(&bound);
    // The grid, the shapes and the guard fold; the typed uses keep `T.cast(200, "int32")`.
    assert!(text.contains("T.Kernel(4, threads=64)"), "{text}");
    assert!(text.contains("A: T.Tensor((200,), \"int8\")"), "{text}");
    assert!(text.contains("if bx * 64 + i < 200:"), "{text}");
    assert!(
        text.contains("T.cast(200, \"int32\") - A[bx * 64 + i]"),
        "{text}"
    );
    assert!(text.contains("t = T.cast(3, \"int64\")"), "{text}");
    assert!(text.contains("Y: T.Tensor((3,), \"int8\")"), "{text}");
}

/// A grid axis of extent 1 goes when binding folds (its block variable becomes 0), and the
/// kernel computes the same: the uses where the literal 0 would type apart keep a typed 0.
const UNIT_AXIS: &str = r#"@T.prim_func
def unit_axis(
    A: T.Tensor((64,), "int8"),
    C: T.Tensor((64,), "int32"),
    S: T.Tensor((64,), "int32"),
    F: T.Tensor((64,), "float32"),
    H: T.Tensor((64,), "float16"),
):
    with T.Kernel(2, 1, threads=32) as (bx, bz):
        for i in T.Parallel(32):
            C[bx * 32 + i + bz] = bz - A[bx * 32 + i]
            S[bx * 32 + i] = T.cast(A[bx * 32 + i] < bz + 200, "int32") + (bz | 3)
            F[bx * 32 + i] = (bz + 1) * 0.5 * H[bx * 32 + i]
"#;

#[test]
fn dropping_a_unit_grid_axis_keeps_every_value() {
    let written = ok(UNIT_AXIS);
    let bound = tlc_ir::tuning::bind(&written, &Vec::new(), &Vec::new()).expect("bind");
    let text = print_func(&bound);
    assert!(text.contains("T.Kernel(2, threads=32) as bx:"), "{text}");
    for seed in 0..3 {
        let want = outputs(&written, &[], seed);
        let got = outputs(&bound, &[], seed);
        assert_eq!(got, want, "seed {seed}, bound:\n{text}");
    }
}
