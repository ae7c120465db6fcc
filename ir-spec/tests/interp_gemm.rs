//! `T.gemm` through whole kernels, against an f64 loop nest computed here.
//!
//! Tolerance (float outputs): with `ref` the f64 result and `S = Σ_k |a_ik·b_kj|`,
//! `|C - ref| <= 2^-23·K·S` (f32 accumulation) `+ u·|ref|` (final rounding: u = 2^-11 for
//! float16, 2^-8 for bfloat16, 0 for float32) `+ 2^-24`. A separate test checks the exact
//! (bitwise) result of the documented f32, K-ordered summation.

use crate::interp_support;

use interp_support::*;
use tlc_ir::interp::{random_tensor, Tensor};
use tlc_ir::DType;

fn inputs(cfg: &GemmCfg, seed: u64) -> (Tensor, Tensor) {
    let (m, n, k) = (cfg.m as usize, cfg.n as usize, cfg.k as usize);
    let a_shape = if cfg.trans_a { [k, m] } else { [m, k] };
    let b_shape = if cfg.trans_b { [n, k] } else { [k, n] };
    (
        random_tensor("A", cfg.in_dtype, &a_shape, seed).unwrap(),
        random_tensor("B", cfg.in_dtype, &b_shape, seed).unwrap(),
    )
}

fn unit_roundoff(d: DType) -> f64 {
    match d {
        DType::Float16 => 2f64.powi(-11),
        DType::BFloat16 => 2f64.powi(-8),
        _ => 0.0,
    }
}

/// Runs the gemm kernel and checks C against the f64 reference within the tolerance above.
fn check_gemm(cfg: &GemmCfg, threads: usize) {
    let (a, b) = inputs(cfg, 42);
    let out = run_with(
        &gemm_kernel(cfg),
        &[],
        vec![("A", a.clone()), ("B", b.clone())],
        threads,
    );
    let c = out["C"].to_f64();
    assert_eq!(out["C"].shape(), &[cfg.m as usize, cfg.n as usize]);
    let reference = reference_gemm(&a, &b, cfg);
    // S = Σ|a·b| is the reference gemm of |A| and |B|.
    let abs = |t: &Tensor| {
        Tensor::from_f64(
            DType::Float64,
            t.shape(),
            &t.to_f64().iter().map(|x| x.abs()).collect::<Vec<_>>(),
        )
        .unwrap()
    };
    let s = reference_gemm(&abs(&a), &abs(&b), cfg);
    let u = unit_roundoff(cfg.out_dtype);
    let k = cfg.k as f64;
    for (i, ((&got, &want), &s)) in c.iter().zip(&reference).zip(&s).enumerate() {
        let tol = 2f64.powi(-23) * k * s + u * want.abs() + 2f64.powi(-24);
        assert!(
            (got - want).abs() <= tol,
            "{cfg:?}: C[{}, {}] = {got}, reference {want}, tolerance {tol}",
            i / cfg.n as usize,
            i % cfg.n as usize
        );
    }
}

#[test]
fn seed_kernel_matches_f64_reference() {
    check_gemm(&GemmCfg::seed(256, 256, 96), 1);
}

#[test]
fn ragged_edges_with_every_transpose() {
    for (trans_a, trans_b) in [(false, false), (true, false), (false, true), (true, true)] {
        let cfg = GemmCfg {
            bm: 32,
            bn: 32,
            bk: 32,
            b_parallel: false,
            trans_a,
            trans_b,
            ..GemmCfg::seed(100, 100, 70)
        };
        check_gemm(&cfg, 1);
    }
}

#[test]
fn clear_accum_discards_the_old_accumulator() {
    let cfg = GemmCfg {
        bm: 32,
        bn: 64,
        bk: 16,
        clear_accum: true,
        ..GemmCfg::seed(64, 128, 48)
    };
    check_gemm(&cfg, 1);
}

#[test]
fn float32_and_bfloat16_outputs() {
    let f32_out = GemmCfg {
        bm: 32,
        bn: 32,
        bk: 16,
        out_dtype: DType::Float32,
        b_parallel: false,
        ..GemmCfg::seed(50, 40, 33)
    };
    check_gemm(&f32_out, 1);
    let bf16 = GemmCfg {
        in_dtype: DType::BFloat16,
        out_dtype: DType::BFloat16,
        ..f32_out
    };
    check_gemm(&bf16, 1);
}

#[test]
fn int8_gemm_accumulates_exactly_in_int32() {
    let cfg = GemmCfg {
        bm: 16,
        bn: 16,
        bk: 16,
        in_dtype: DType::Int8,
        acc_dtype: DType::Int32,
        out_dtype: DType::Int32,
        b_parallel: false,
        ..GemmCfg::seed(20, 24, 40)
    };
    let (a, b) = inputs(&cfg, 3);
    let out = run_ok(&gemm_kernel(&cfg), vec![("A", a.clone()), ("B", b.clone())]);
    assert_eq!(out["C"].to_f64(), reference_gemm(&a, &b, &cfg));
}

/// The documented summation, bit for bit: per K tile an f32 sum in K order, added in f32 to
/// the f32 accumulator; the accumulator rounded to float16 at the end.
#[test]
fn summation_is_f32_in_k_order() {
    let cfg = GemmCfg {
        bm: 32,
        bn: 32,
        bk: 32,
        b_parallel: false,
        ..GemmCfg::seed(64, 64, 100)
    };
    let (a, b) = inputs(&cfg, 9);
    let out = run_ok(&gemm_kernel(&cfg), vec![("A", a.clone()), ("B", b.clone())]);
    let (av, bv) = (a.to_f64(), b.to_f64());
    let (m, n, k, bk) = (64, 64, 100, 32);
    let mut expected = Vec::new();
    for i in 0..m {
        for j in 0..n {
            let mut acc = 0f32;
            for k0 in (0..k).step_by(bk) {
                let mut s = 0f32;
                for kk in k0..(k0 + bk).min(k) {
                    s += av[i * k + kk] as f32 * bv[kk * n + j] as f32;
                }
                acc += s;
            }
            expected.push(f64::from(half::f16::from_f32(acc).to_f32()));
        }
    }
    assert_eq!(out["C"].to_f64(), expected);
}

#[test]
fn results_do_not_depend_on_host_threads() {
    let cfg = GemmCfg {
        bm: 32,
        bn: 32,
        bk: 32,
        b_parallel: false,
        ..GemmCfg::seed(100, 70, 40)
    };
    let f = gemm_kernel(&cfg);
    let one = run_with(&f, &[], vec![], 1);
    let four = run_with(&f, &[], vec![], 4);
    assert_eq!(one, four);
    // Random inputs are drawn per (seed, name): the same with any thread count.
    assert_eq!(
        one["A"],
        random_tensor("A", DType::Float16, &[100, 40], 1).unwrap()
    );
}

#[test]
fn symbolic_dims_come_from_inputs_or_are_given() {
    let cfg = GemmCfg {
        bm: 32,
        bn: 32,
        bk: 32,
        b_parallel: false,
        symbolic: true,
        ..GemmCfg::seed(40, 50, 60)
    };
    let f = gemm_kernel(&cfg);
    let (a, b) = inputs(&cfg, 5);
    let from_inputs = run_with(&f, &[], vec![("A", a.clone()), ("B", b.clone())], 1);
    assert_eq!(from_inputs["C"].shape(), &[40, 50]);
    // N appears only in B's and C's shapes: give A and N, draw B at random.
    let given = run_with(&f, &[("N", 50)], vec![("A", a.clone())], 1);
    assert_eq!(given["B"].shape(), &[60, 50]);
    let fixed = GemmCfg {
        symbolic: false,
        ..cfg.clone()
    };
    let out = run_ok(
        &gemm_kernel(&fixed),
        vec![("A", a), ("B", given["B"].clone())],
    );
    assert_eq!(out["C"], given["C"]);
}

/// float8 operands (e4m3 × e5m2 mixed, as the verifier allows) with a float32 accumulator,
/// ragged M, N, K: every product of two fp8 values is exact in f32 (4 × 3 significant
/// bits), so the result is, bit for bit, the documented f32 sum in K order per K tile
/// (elements past K read as zero and add nothing), and within `2^-23·K·S` of the f64 sum.
#[test]
fn float8_operands_multiply_exactly_and_sum_in_f32() {
    let text = r#"
M = T.symbolic("M")
N = T.symbolic("N")
K = T.symbolic("K")

@T.prim_func
def gemm_fp8_nt(
    A: T.Tensor((M, K), "float8_e4m3"),
    B: T.Tensor((N, K), "float8_e5m2"),
    C: T.Tensor((M, N), "float32"),
):
    with T.Kernel(T.ceildiv(N, 32), T.ceildiv(M, 32), threads=128) as (bx, by):
        A_shared = T.alloc_shared((32, 64), "float8_e4m3")
        B_shared = T.alloc_shared((32, 64), "float8_e5m2")
        C_local = T.alloc_fragment((32, 32), "float")
        T.clear(C_local)
        for ko in T.Pipelined(T.ceildiv(K, 64), num_stages=2):
            T.copy(A[by * 32, ko * 64], A_shared)
            T.copy(B[bx * 32, ko * 64], B_shared)
            T.gemm(A_shared, B_shared, C_local, transpose_B=True)
        T.copy(C_local, C[by * 32, bx * 32])
"#;
    let f = tlc_ir::parse(text).unwrap_or_else(|e| panic!("{e:?}"));
    let (m, n, k, bk) = (45, 37, 150, 64);
    let a = random_tensor("A", DType::Float8E4M3, &[m, k], 11).unwrap();
    let b = random_tensor("B", DType::Float8E5M2, &[n, k], 12).unwrap();
    let out = run_ok(&f, vec![("A", a.clone()), ("B", b.clone())]);
    let (av, bv) = (a.to_f64(), b.to_f64());
    let mut expected = Vec::new();
    for i in 0..m {
        for j in 0..n {
            let (mut acc, mut exact, mut s_abs) = (0f32, 0f64, 0f64);
            for k0 in (0..k).step_by(bk) {
                let mut s = 0f32;
                for kk in k0..(k0 + bk).min(k) {
                    let (x, y) = (av[i * k + kk], bv[j * k + kk]);
                    assert_eq!(f64::from(x as f32 * y as f32), x * y, "{x} * {y}");
                    s += x as f32 * y as f32;
                    exact += x * y;
                    s_abs += (x * y).abs();
                }
                acc += s;
            }
            let tol = 2f64.powi(-23) * k as f64 * s_abs;
            assert!((f64::from(acc) - exact).abs() <= tol, "C[{i}, {j}]");
            expected.push(f64::from(acc));
        }
    }
    assert_eq!(out["C"].shape(), &[m, n]);
    assert_eq!(out["C"].to_f64(), expected);
}
