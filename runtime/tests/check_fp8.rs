//! Launch-time validation of DeepGEMM's FP8 block-scaled GEMM signature (issue 17, item 4):
//! `A (M, K)` and `B (N, K)` float8_e4m3, `C (M, N)` bfloat16, `scales_a (M, ⌈K/128⌉)` and
//! `scales_b (⌈N/128⌉, ⌈K/128⌉)` float32, A and B read through TMA. Every wrong dtype, rank,
//! shape, derived scale shape, row stride or address is an error naming the parameter with
//! the expected and the found value — all decided before the driver is touched, so tested
//! without a GPU. Also the operand checks of the two cuBLAS-side references.

use tlc_runtime::cublas::check_gemm_nt_f32_operands;
use tlc_runtime::cublaslt::fp8_gemm_dims;
use tlc_runtime::{
    check_args, map_args, Access, DType, DimDecl, DimExpr, Launch, Manifest, OobFill, Param,
    RuntimeError, Swizzle, Target, TensorMapDesc,
};

const E4M3: DType = DType::Float8E4M3;
const BF16: DType = DType::BFloat16;
const F32: DType = DType::Float32;

fn fp8_gemm() -> Manifest {
    let (m, n, k) = (DimExpr::dim("M"), DimExpr::dim("N"), DimExpr::dim("K"));
    let blocks = |e: &DimExpr| DimExpr::ceildiv(e.clone(), DimExpr::int(128));
    let param = |name: &str, dtype, shape, access| Param {
        name: name.into(),
        dtype,
        shape,
        access,
    };
    let m = Manifest {
        target: Target::Sm90a,
        scratch: Vec::new(),
        params: vec![
            param("A", E4M3, vec![m.clone(), k.clone()], Access::Read),
            param("B", E4M3, vec![n.clone(), k.clone()], Access::Read),
            param("C", BF16, vec![m.clone(), n.clone()], Access::Write),
            param("scales_a", F32, vec![m.clone(), blocks(&k)], Access::Read),
            param("scales_b", F32, vec![blocks(&n), blocks(&k)], Access::Read),
        ],
        dims: ["M", "N", "K"]
            .iter()
            .map(|d| DimDecl {
                name: d.to_string(),
                dtype: DType::Int32,
                arg: None,
                multiple_of: None,
            })
            .collect(),
        kernels: vec![Launch {
            entry: "gemm_fp8".into(),
            grid: vec![blocks(&n), blocks(&m)],
            block: vec![384],
            shared_bytes: DimExpr::int(200_000),
            cluster: Vec::new(),
            cooperative: false,
        }],
        tensor_maps: ["A", "B"]
            .iter()
            .map(|p| TensorMapDesc {
                param: p.to_string(),
                box_dims: vec![128, 128],
                swizzle: Swizzle::B128,
                fill: OobFill::Zero,
            })
            .collect(),
    };
    m.validate().unwrap();
    m
}

/// The arguments of shape (m, n, k), correct unless changed.
fn args(m: usize, n: usize, k: usize) -> Vec<(DType, Vec<usize>)> {
    let (nb, kb) = (n.div_ceil(128), k.div_ceil(128));
    vec![
        (E4M3, vec![m, k]),
        (E4M3, vec![n, k]),
        (BF16, vec![m, n]),
        (F32, vec![m, kb]),
        (F32, vec![nb, kb]),
    ]
}

fn check(a: &[(DType, Vec<usize>)]) -> Result<tlc_runtime::LaunchPlan, RuntimeError> {
    let described: Vec<(DType, &[usize])> = a.iter().map(|(d, s)| (*d, s.as_slice())).collect();
    check_args(&fp8_gemm(), &described)
}

fn message(a: &[(DType, Vec<usize>)]) -> String {
    match check(a) {
        Ok(p) => panic!("accepted: {p:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn good_arguments_bind_m_n_k_including_ragged_k() {
    let p = check(&args(4096, 7168, 16384)).unwrap();
    assert_eq!(
        (p.dims.get("M"), p.dims.get("N"), p.dims.get("K")),
        (Some(4096), Some(7168), Some(16384))
    );
    assert_eq!(p.kernels[0].grid, [56, 32, 1]);
    // K = 7000: ⌈7000/128⌉ = 55 scale columns; M = 100, N = 200: ragged blocks.
    let p = check(&args(100, 200, 7000)).unwrap();
    assert_eq!(p.dims.get("K"), Some(7000));
    assert_eq!(p.kernels[0].grid, [2, 1, 1]);
}

#[test]
fn every_wrong_dtype_names_the_parameter_expected_and_found() {
    let cases = [
        (
            0,
            DType::Float8E5M2,
            "parameter `A` expects dtype float8_e4m3 but the argument is float8_e5m2",
        ),
        (
            1,
            DType::Int8,
            "parameter `B` expects dtype float8_e4m3 but the argument is int8",
        ),
        (
            2,
            F32,
            "parameter `C` expects dtype bfloat16 but the argument is float32",
        ),
        (
            2,
            DType::Float16,
            "parameter `C` expects dtype bfloat16 but the argument is float16",
        ),
        (
            3,
            BF16,
            "parameter `scales_a` expects dtype float32 but the argument is bfloat16",
        ),
        (
            4,
            DType::Float64,
            "parameter `scales_b` expects dtype float32 but the argument is float64",
        ),
    ];
    for (i, dtype, says) in cases {
        let mut a = args(256, 256, 512);
        a[i].0 = dtype;
        assert_eq!(message(&a), says);
    }
}

#[test]
fn operand_shapes_must_agree_on_m_n_k() {
    // B's K differs from A's.
    let mut a = args(256, 384, 512);
    a[1].1 = vec![384, 640];
    assert_eq!(
        message(&a),
        "parameter `B` dim 1 is 640 but K = 512 from `A`"
    );
    // C transposed.
    let mut a = args(256, 384, 512);
    a[2].1 = vec![384, 256];
    assert_eq!(
        message(&a),
        "parameter `C` dim 0 is 384 but M = 256 from `A`"
    );
    // A scale matrix of rank 1.
    let mut a = args(256, 384, 512);
    a[3].1 = vec![256 * 4];
    assert_eq!(
        message(&a),
        "parameter `scales_a` expects a tensor of rank 2 but the argument has rank 1"
    );
    // Argument count.
    let mut a = args(256, 384, 512);
    a.pop();
    assert_eq!(
        message(&a),
        "kernel `gemm_fp8` takes 5 argument(s) but 4 were given"
    );
}

#[test]
fn scale_shapes_derived_from_k_and_n_are_checked() {
    // scales_a with one column too many for K = 7168 (56 blocks).
    let mut a = args(4096, 7168, 7168);
    a[3].1 = vec![4096, 57];
    let msg = message(&a);
    assert!(
        msg.starts_with(
            "parameter `scales_a` dim 1 is 57 but the kernel needs ceildiv(K, 128) = 56"
        ),
        "{msg}"
    );
    assert!(msg.contains("K = 7168"), "{msg}");
    // scales_a sized for a K that is not A's (floor instead of ceil at a ragged K).
    let mut a = args(128, 256, 7000);
    a[3].1 = vec![128, 7000 / 128];
    let msg = message(&a);
    assert!(msg.contains("`scales_a` dim 1 is 54 but"), "{msg}");
    assert!(msg.contains("= 55 with"), "{msg}");
    // scales_b per row of B instead of per 128 rows.
    let mut a = args(128, 256, 512);
    a[4].1 = vec![256, 4];
    let msg = message(&a);
    assert!(
        msg.starts_with(
            "parameter `scales_b` dim 0 is 256 but the kernel needs ceildiv(N, 128) = 2"
        ),
        "{msg}"
    );
    // scales_b transposed (K blocks first): caught although the element count matches.
    let mut a = args(128, 256, 512);
    a[4].1 = vec![4, 2];
    let msg = message(&a);
    assert!(
        msg.starts_with("parameter `scales_b` dim 0 is 4 but"),
        "{msg}"
    );
    // DeepGEMM's per-token scales sized by M: an M that disagrees with A.
    let mut a = args(128, 256, 512);
    a[3].1 = vec![64, 4];
    assert_eq!(
        message(&a),
        "parameter `scales_a` dim 0 is 64 but M = 128 from `A`"
    );
}

#[test]
fn tma_operands_need_16_byte_rows_and_addresses() {
    let m = fp8_gemm();
    let shapes = |k: usize| {
        [
            vec![128, k],
            vec![256, k],
            vec![128, 256],
            vec![128, k.div_ceil(128)],
            vec![2, k.div_ceil(128)],
        ]
    };
    let map = |k: usize, addr_a: u64| {
        let s = shapes(k);
        let described: Vec<(&[usize], u64)> = s
            .iter()
            .zip([addr_a, 0x20000, 0x30000, 0x40000, 0x50000])
            .map(|(s, a)| (s.as_slice(), a))
            .collect();
        map_args(&m, &described)
    };
    let ok = map(7008, 0x10000).unwrap();
    assert_eq!(ok.len(), 2);
    assert_eq!(ok[0].global_strides, vec![7008]);
    // K = 7000 fp8 elements: a 7000-byte row stride, not a multiple of 16.
    let err = map(7000, 0x10000).unwrap_err();
    assert_eq!(
        err.to_string(),
        "parameter `A`: TMA needs every row stride to be a multiple of 16 bytes; the stride of \
         dimension 0 is 7000 bytes (7000 float8_e4m3)"
    );
    // A tensor starting off the 16-byte granule (e.g. a view at an odd offset).
    let err = map(7008, 0x10008).unwrap_err();
    assert_eq!(
        err.to_string(),
        "parameter `A`: TMA needs a 16-byte aligned global address; the tensor starts at 0x10008"
    );
}

#[test]
fn reference_operand_checks() {
    // cuBLASLt's FP8 GEMM: (m, n, k) from A (m, k) and B (n, k).
    let dims = fp8_gemm_dims(
        (E4M3, &[64, 512]),
        (E4M3, &[2112, 512]),
        (BF16, &[64, 2112]),
    );
    assert_eq!(dims.unwrap(), (64, 2112, 512));
    for (a, b, d, says) in [
        (
            (DType::Float8E5M2, &[64usize, 512][..]),
            (E4M3, &[32usize, 512][..]),
            (BF16, &[64usize, 32][..]),
            "A is float8_e5m2; expected float8_e4m3",
        ),
        (
            (E4M3, &[64, 512]),
            (E4M3, &[512, 32]),
            (BF16, &[64, 32]),
            "B has shape [512, 32]; expected [512, 512] (K = 512 from A)",
        ),
        (
            (E4M3, &[64, 512]),
            (E4M3, &[32, 512]),
            (F32, &[64, 32]),
            "D is float32; expected bfloat16",
        ),
        (
            (E4M3, &[64, 512]),
            (E4M3, &[32, 512]),
            (BF16, &[32, 64]),
            "D has shape [32, 64]; expected [64, 32]",
        ),
        (
            (E4M3, &[64]),
            (E4M3, &[32, 512]),
            (BF16, &[64, 32]),
            "A has shape [64]; expected a matrix",
        ),
        (
            (E4M3, &[0, 512]),
            (E4M3, &[32, 512]),
            (BF16, &[0, 32]),
            "m = 0 must lie in 1..=",
        ),
    ] {
        let err = fp8_gemm_dims(a, b, d).unwrap_err();
        assert!(
            err.to_string().starts_with(&format!("cuBLASLt: {says}")),
            "{err}"
        );
    }
    // The float32 NT reference GEMM of the dequantized operands.
    let ok = check_gemm_nt_f32_operands(
        (F32, &[64, 512]),
        (F32, &[32, 512]),
        (F32, &[64, 32]),
        64,
        32,
        512,
    );
    assert!(ok.is_ok());
    let err = check_gemm_nt_f32_operands(
        (F32, &[64, 512]),
        (F32, &[512, 32]),
        (F32, &[64, 32]),
        64,
        32,
        512,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "cuBLAS: B has shape [512, 32]; expected [32, 512]"
    );
    let err = check_gemm_nt_f32_operands(
        (E4M3, &[64, 512]),
        (F32, &[32, 512]),
        (F32, &[64, 32]),
        64,
        32,
        512,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "cuBLAS: A is float8_e4m3; expected float32"
    );
}
