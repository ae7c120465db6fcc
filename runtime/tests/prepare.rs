//! `prepare_launch`: a launch signature checked once, with outputs left for the caller to
//! allocate (Python's `out_idx`) and dims given by name.

use tlc_runtime::{prepare_launch, ArgSpec, DType, Manifest, RuntimeError};

/// A (M, K) x B (K, N) -> C (M, N), and a scratch S (M - 1) that only exists to test a
/// shape that can go negative.
fn gemm() -> Manifest {
    let dim = |n: &str| format!(r#"{{"dim":"{n}"}}"#);
    let json = format!(
        r#"{{"version":1,"entry":"gemm","target":"sm_80","params":[
        {{"name":"A","dtype":"float16","shape":[{m},{k}],"access":"read"}},
        {{"name":"B","dtype":"float16","shape":[{k},{n}],"access":"read"}},
        {{"name":"C","dtype":"float32","shape":[{m},{n}],"access":"write"}},
        {{"name":"S","dtype":"float32","shape":[{{"op":"sub","args":[{m},{{"int":1}}]}}],"access":"readwrite"}}],
        "dims":[{{"name":"M","dtype":"int32"}},{{"name":"N","dtype":"int32"}},{{"name":"K","dtype":"int32"}}],
        "grid":[{{"op":"ceildiv","args":[{n},{{"int":128}}]}},{{"op":"ceildiv","args":[{m},{{"int":128}}]}}],
        "block":[128],"shared_bytes":{{"int":49152}}}}"#,
        m = dim("M"),
        n = dim("N"),
        k = dim("K"),
    )
    .replace('\n', "");
    Manifest::from_json(&json).unwrap()
}

fn spec(dtype: DType, shape: &[usize]) -> Option<ArgSpec<'_>> {
    Some(ArgSpec {
        dtype,
        shape,
        strides: None,
    })
}

const H: DType = DType::Float16;
const F: DType = DType::Float32;

#[test]
fn outputs_to_allocate_get_their_shapes_from_the_inputs() {
    let m = gemm();
    let p = prepare_launch(
        &m,
        &[spec(H, &[300, 64]), spec(H, &[64, 200]), None, None],
        &[],
    )
    .unwrap();
    assert_eq!(p.to_allocate, vec![2, 3]);
    assert_eq!(
        p.shapes,
        vec![vec![300, 64], vec![64, 200], vec![300, 200], vec![299]]
    );
    assert_eq!(p.plan.kernels[0].grid, [2, 3, 1]);
    assert_eq!(p.plan.dims.get("K"), Some(64));
}

#[test]
fn a_dim_only_an_output_binds_must_be_given_by_name() {
    let m = gemm();
    let err = prepare_launch(&m, &[spec(H, &[300, 64]), None, None, None], &[]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "dim `N` is set only by the shape of `B`, `C`, `S` to allocate; give it by name \
         (N=...) or pass the output"
    );
    let p = prepare_launch(&m, &[spec(H, &[300, 64]), None, None, None], &[("N", 7)]).unwrap();
    assert_eq!(p.shapes[1], vec![64, 7]);
    assert_eq!(p.shapes[2], vec![300, 7]);
}

#[test]
fn dims_given_by_name_must_agree_with_the_shapes() {
    let m = gemm();
    let args = [
        spec(H, &[300, 64]),
        spec(H, &[64, 200]),
        spec(F, &[300, 200]),
        spec(F, &[299]),
    ];
    assert!(prepare_launch(&m, &args, &[("N", 200)]).is_ok());
    let err = prepare_launch(&m, &args, &[("N", 7)]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "parameter `B` dim 1 is 200 but N = 7 was given"
    );
    let err = prepare_launch(&m, &args, &[("Q", 7)]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the kernel has no symbolic dim `Q` (its dims: M, N, K)"
    );
    let err = prepare_launch(&m, &args, &[("N", 200), ("N", 201)]).unwrap_err();
    assert_eq!(err.to_string(), "dim `N` is given twice, as 200 and 201");
    // int32 dims: a given value out of range is refused before anything is allocated.
    let err = prepare_launch(
        &m,
        &[spec(H, &[300, 64]), None, None, None],
        &[("N", 1 << 40)],
    )
    .unwrap_err();
    assert!(matches!(err, RuntimeError::Dim(_)), "{err:?}");
    assert!(
        err.to_string().starts_with("N = 1099511627776 was given, "),
        "{err}"
    );
}

#[test]
fn an_output_shape_below_zero_is_refused_naming_it() {
    let m = gemm();
    let err =
        prepare_launch(&m, &[spec(H, &[0, 64]), spec(H, &[64, 8]), None, None], &[]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "parameter `S` would have dim 0 = sub(M, 1) = -1 with M = 0, N = 8, K = 64; it must be at \
         least 0"
    );
}

#[test]
fn given_arguments_are_still_checked_for_dtype_and_layout() {
    let m = gemm();
    let err =
        prepare_launch(&m, &[spec(F, &[300, 64]), None, None, None], &[("N", 7)]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "parameter `A` expects dtype float16 but the argument is float32"
    );
    let strided = Some(ArgSpec {
        dtype: H,
        shape: &[300, 64],
        strides: Some(&[1, 300]),
    });
    let err = prepare_launch(&m, &[strided, None, None, None], &[("N", 7)]).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("parameter `A` needs a C-contiguous tensor"),
        "{err}"
    );
    let err = prepare_launch(&m, &[None, None], &[]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "kernel `gemm` takes 4 argument(s) but 2 were given"
    );
}
