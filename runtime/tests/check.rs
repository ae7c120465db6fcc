//! Argument checking and launch planning, the pure part of `Kernel::launch`.

use tlc_runtime::check::{plan, MAX_GRID};
use tlc_runtime::cublas::{check_gemm_operands, gemm_tflops};
use tlc_runtime::{check_args, median, DType, DimExpr, Dims, Manifest, Op, RuntimeError};

const VADD: &str = include_str!("../examples/vadd.ptx");

fn vadd() -> Manifest {
    Manifest::from_ptx(VADD).unwrap()
}

#[test]
fn good_arguments_give_the_launch_plan() {
    let n = [1_000_003usize];
    let f = DType::Float32;
    let p = check_args(&vadd(), &[(f, &n), (f, &n), (f, &n)]).unwrap();
    assert_eq!(p.kernels[0].grid, [3907, 1, 1]);
    assert_eq!(p.kernels[0].block, [256, 1, 1]);
    assert_eq!(p.kernels[0].shared_bytes, 0);
    assert_eq!(p.dims.get("N"), Some(1_000_003));
    assert!(!p.kernels[0].is_empty());
}

#[test]
fn argument_count_dtype_and_shape_errors_name_the_parameter() {
    let m = vadd();
    let (f, h) = (DType::Float32, DType::Float16);
    let n: &[usize] = &[1024];
    let err = check_args(&m, &[(f, n), (f, n)]).unwrap_err();
    assert_eq!(
        err,
        RuntimeError::ArgCount {
            entry: "vadd".into(),
            expected: 3,
            found: 2
        }
    );
    assert_eq!(
        err.to_string(),
        "kernel `vadd` takes 3 argument(s) but 2 were given"
    );
    let err = check_args(&m, &[(f, n), (h, n), (f, n)]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "parameter `B` expects dtype float32 but the argument is float16"
    );
    let err = check_args(&m, &[(f, &[1000]), (f, n), (f, n)]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "parameter `B` dim 0 is 1024 but N = 1000 from `A`"
    );
    let err = check_args(&m, &[(f, n), (f, n), (f, &[32, 32])]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "parameter `C` expects a tensor of rank 1 but the argument has rank 2"
    );
}

#[test]
fn an_empty_problem_plans_an_empty_grid() {
    let f = DType::Float32;
    let p = check_args(&vadd(), &[(f, &[0]), (f, &[0]), (f, &[0])]).unwrap();
    assert_eq!(p.kernels[0].grid, [0, 1, 1]);
    assert!(p.kernels[0].is_empty());
}

#[test]
fn grid_and_shared_memory_out_of_range_are_errors() {
    let mut m = vadd();
    m.kernels[0].grid = vec![DimExpr::int(1), DimExpr::dim("N")];
    let err = plan(&m, Dims::from_pairs([("N", 70_000)])).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid launch configuration: grid.y = N is 70000 with N = 70000; it must lie in 0..=65535"
    );
    m.kernels[0].grid = vec![DimExpr::op(Op::Sub, DimExpr::dim("N"), DimExpr::int(10))];
    let err = plan(&m, Dims::from_pairs([("N", 3)])).unwrap_err();
    assert!(
        err.to_string().contains("grid.x = sub(N, 10) is -7"),
        "{err}"
    );
    m.kernels[0].grid = vec![DimExpr::dim("N")];
    assert_eq!(
        plan(&m, Dims::from_pairs([("N", MAX_GRID[0])]))
            .unwrap()
            .kernels[0]
            .grid[0],
        i32::MAX as u32
    );
    m.kernels[0].shared_bytes = DimExpr::op(Op::Mul, DimExpr::dim("N"), DimExpr::int(-4));
    let err = plan(&m, Dims::from_pairs([("N", 3)])).unwrap_err();
    assert!(
        err.to_string().contains("shared_bytes = mul(N, -4) is -12"),
        "{err}"
    );
    m.kernels[0].shared_bytes = DimExpr::op(Op::Mul, DimExpr::dim("N"), DimExpr::int(4));
    assert_eq!(
        plan(&m, Dims::from_pairs([("N", 3)])).unwrap().kernels[0].shared_bytes,
        12
    );
    m.kernels[0].grid = vec![DimExpr::int(1)];
    let err = plan(&m, Dims::from_pairs([("N", i64::MAX)])).unwrap_err();
    assert!(matches!(err, RuntimeError::Eval(_)), "{err}");
}

#[test]
fn multi_axis_blocks_fill_with_ones() {
    let mut m = vadd();
    m.kernels[0].block = vec![32, 4];
    m.kernels[0].grid = vec![DimExpr::int(2), DimExpr::int(3), DimExpr::int(4)];
    let p = plan(&m, Dims::from_pairs([("N", 1)])).unwrap();
    assert_eq!(p.kernels[0].block, [32, 4, 1]);
    assert_eq!(p.kernels[0].grid, [2, 3, 4]);
}

#[test]
fn gemm_operands_are_checked() {
    let h = DType::Float16;
    let ok = check_gemm_operands((h, &[64, 32]), (h, &[32, 16]), (h, &[64, 16]), 64, 16, 32);
    assert!(ok.is_ok());
    let f32_out = check_gemm_operands(
        (h, &[64, 32]),
        (h, &[32, 16]),
        (DType::Float32, &[64, 16]),
        64,
        16,
        32,
    );
    assert!(f32_out.is_ok());
    let err = check_gemm_operands((h, &[64, 32]), (h, &[16, 32]), (h, &[64, 16]), 64, 16, 32)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "cuBLAS: B has shape [16, 32]; expected [32, 16]"
    );
    let err = check_gemm_operands(
        (DType::BFloat16, &[64, 32]),
        (h, &[32, 16]),
        (h, &[64, 16]),
        64,
        16,
        32,
    )
    .unwrap_err();
    assert_eq!(err.to_string(), "cuBLAS: A is bfloat16; expected float16");
    let err = check_gemm_operands(
        (h, &[64, 32]),
        (h, &[32, 16]),
        (DType::Int8, &[64, 16]),
        64,
        16,
        32,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "cuBLAS: C is int8; expected float16 or float32"
    );
    let err =
        check_gemm_operands((h, &[0, 32]), (h, &[32, 16]), (h, &[0, 16]), 0, 16, 32).unwrap_err();
    assert!(err.to_string().contains("m = 0 must lie in 1..="), "{err}");
}

#[test]
fn timing_helpers() {
    assert_eq!(median(&[]), None);
    assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
    assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
    // 4096³ in 0.2 ms is 687 TFLOP/s.
    let t = gemm_tflops(4096, 4096, 4096, 0.2);
    assert!((t - 687.19).abs() < 0.01, "{t}");
}

#[test]
fn raw_arguments_are_checked_for_layout_then_as_tensors() {
    use tlc_runtime::check::{check_raw_args, RawArg};
    let m = vadd();
    let n: &[usize] = &[1024];
    let arg = |ptr: u64, strides: Option<&'static [i64]>| RawArg {
        ptr,
        dtype: DType::Float32,
        shape: n,
        strides,
    };
    let good = [
        arg(0x1000, None),
        arg(0x2000, Some(&[1])),
        arg(0x3000, None),
    ];
    let p = check_raw_args(&m, &good).unwrap();
    assert_eq!(p.dims.get("N"), Some(1024));

    let err = check_raw_args(
        &m,
        &[arg(0x1000, None), arg(0x2004, None), arg(0x3000, None)],
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "parameter `B` needs an address aligned to 16 bytes, but the argument's is 0x2004 \
         (4 bytes past a 16-byte boundary)"
    );
    let err = check_raw_args(
        &m,
        &[
            arg(0x1000, None),
            arg(0x2000, None),
            arg(0x3000, Some(&[2])),
        ],
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "parameter `C` needs a C-contiguous tensor (strides (1)) but the argument has strides \
         (2) (dimension 0); pass `.contiguous()`"
    );
    // The layout is fine: the dtype check of `check_args` still runs.
    let mut half = good;
    half[0].dtype = DType::Float16;
    let err = check_raw_args(&m, &half).unwrap_err();
    assert_eq!(
        err.to_string(),
        "parameter `A` expects dtype float32 but the argument is float16"
    );
}

#[test]
fn a_dimension_of_extent_one_may_have_any_stride() {
    use tlc_runtime::check::{check_raw_args, RawArg};
    let m = vadd();
    // Rank mismatches are `check_args`' business; a 1-element tensor's stride is moot.
    let one: &[usize] = &[1];
    let a = RawArg {
        ptr: 0x1000,
        dtype: DType::Float32,
        shape: one,
        strides: Some(&[7]),
    };
    let p = check_raw_args(&m, &[a, a, a]).unwrap();
    assert_eq!(p.dims.get("N"), Some(1));
}
