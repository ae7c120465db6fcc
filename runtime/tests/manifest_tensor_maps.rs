//! Manifests with TMA tensor maps (version 3): round trip through the PTX header, the
//! version rules (maps only in version 3, version 3 only with maps), and rejection of every
//! malformed map entry.

use tlc_runtime::{
    Access, DType, DimDecl, DimExpr, Launch, Manifest, OobFill, Param, RuntimeError, Swizzle,
    Target, TensorMapDesc,
};

/// C[M, N] = A[M, K] · B[K, N] in float16, one kernel, A and B read through tensor maps.
fn tma_gemm() -> Manifest {
    let (m, n, k) = (DimExpr::dim("M"), DimExpr::dim("N"), DimExpr::dim("K"));
    let tensor = |name: &str, shape: Vec<DimExpr>, access| Param {
        name: name.into(),
        dtype: DType::Float16,
        shape,
        access,
    };
    Manifest {
        target: Target::Sm90a,
        scratch: Vec::new(),
        params: vec![
            tensor("A", vec![m.clone(), k.clone()], Access::Read),
            tensor("B", vec![k.clone(), n.clone()], Access::Read),
            tensor("C", vec![m.clone(), n.clone()], Access::Write),
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
            entry: "gemm".into(),
            grid: vec![
                DimExpr::ceildiv(n, DimExpr::int(128)),
                DimExpr::ceildiv(m, DimExpr::int(128)),
            ],
            block: vec![128],
            shared_bytes: DimExpr::int(65536),
            cluster: Vec::new(),
            cooperative: false,
        }],
        tensor_maps: vec![
            map("A", &[128, 64], Swizzle::B128),
            map("B", &[64, 128], Swizzle::None),
        ],
    }
}

fn map(param: &str, box_dims: &[u32], swizzle: Swizzle) -> TensorMapDesc {
    TensorMapDesc {
        param: param.into(),
        box_dims: box_dims.to_vec(),
        swizzle,
        fill: OobFill::Zero,
    }
}

/// The validation message of a manifest, which must be rejected.
fn rejected(m: &Manifest) -> String {
    match m.validate() {
        Err(RuntimeError::BadManifest(msg)) => msg,
        other => panic!("expected BadManifest, got {other:?}"),
    }
}

fn bad_json(json: &str) -> String {
    match Manifest::from_json(json) {
        Err(RuntimeError::BadManifest(msg)) => msg,
        other => panic!("expected BadManifest for {json}, got {other:?}"),
    }
}

const V3_TAIL: &str = r#""target":"sm_90a","params":[{"name":"A","dtype":"float16","shape":[{"int":64},{"int":64}],"access":"read"}],"dims":[],"kernels":[{"entry":"k","grid":[{"int":1}],"block":[128],"shared_bytes":{"int":0}}]"#;

#[test]
fn tensor_maps_round_trip_as_version_3() {
    let m = tma_gemm();
    assert_eq!(m.version(), 3);
    let header = m.to_ptx_header();
    // Version 3 always has a `kernels` list, even for one kernel, and the maps come last.
    assert!(
        header.starts_with(
            "// tlc-manifest: {\"version\":3,\"target\":\"sm_90a\",\"params\":[{\"name\":\"A\""
        ),
        "{header}"
    );
    assert!(
        !header.contains("\"entry\":\"gemm\",\"target\""),
        "{header}"
    );
    assert!(
        header.ends_with(
            "\"tensor_maps\":[{\"param\":\"A\",\"box\":[128,64],\"swizzle\":128,\"fill\":\"zero\"},\
             {\"param\":\"B\",\"box\":[64,128],\"swizzle\":0,\"fill\":\"zero\"}]}\n"
        ),
        "{header}"
    );
    let ptx = m.prepend_to(".version 8.0\n.target sm_90a\n.address_size 64\n");
    assert_eq!(Manifest::from_ptx(&ptx).unwrap(), m);
}

#[test]
fn manifests_without_maps_print_exactly_as_before() {
    // The pinned lines of the version 1 and version 2 shapes, byte for byte.
    let vadd = include_str!("../examples/vadd.ptx");
    let v1 = Manifest::from_ptx(vadd).unwrap();
    assert!(v1.tensor_maps.is_empty());
    let first = vadd.lines().next().unwrap();
    assert_eq!(v1.to_ptx_header(), format!("{first}\n"));

    let mut one = tma_gemm();
    one.tensor_maps.clear();
    assert_eq!(one.version(), 1);
    let header = one.to_ptx_header();
    assert!(header.starts_with("// tlc-manifest: {\"version\":1,\"entry\":\"gemm\","));
    assert!(!header.contains("tensor_maps"), "{header}");

    let mut two = one.clone();
    let mut second = two.kernels[0].clone();
    second.entry = "gemm_k1".into();
    two.kernels.push(second);
    assert_eq!(two.version(), 2);
    let header = two.to_ptx_header();
    assert!(header.starts_with("// tlc-manifest: {\"version\":2,\"target\""));
    assert!(!header.contains("tensor_maps"), "{header}");
}

#[test]
fn several_kernels_with_maps_are_version_3() {
    let mut m = tma_gemm();
    let mut second = m.kernels[0].clone();
    second.entry = "gemm_k1".into();
    m.kernels.push(second);
    assert_eq!(m.version(), 3);
    let back = Manifest::from_ptx(&m.prepend_to(".version 8.0\n")).unwrap();
    assert_eq!(back, m);
}

#[test]
fn versions_1_and_2_have_no_maps_and_3_needs_them() {
    let maps = r#""tensor_maps":[{"param":"A","box":[64,64],"swizzle":128,"fill":"zero"}]"#;
    let v3 = format!("{{\"version\":3,{V3_TAIL},{maps}}}");
    let parsed = Manifest::from_json(&v3).unwrap();
    assert_eq!(parsed.tensor_maps, vec![map("A", &[64, 64], Swizzle::B128)]);

    let v2 = format!("{{\"version\":2,{V3_TAIL},{maps}}}");
    assert!(bad_json(&v2).contains("version 2 manifest has no `tensor_maps`"));
    let v1 = format!(
        r#"{{"version":1,"entry":"k","target":"sm_90a","params":[{{"name":"A","dtype":"float16","shape":[{{"int":64}},{{"int":64}}],"access":"read"}}],"dims":[],"grid":[{{"int":1}}],"block":[128],"shared_bytes":{{"int":0}},{maps}}}"#
    );
    assert!(bad_json(&v1).contains("version 1 manifest has no `tensor_maps`"));

    let without = format!("{{\"version\":3,{V3_TAIL}}}");
    assert!(bad_json(&without).contains("missing field `tensor_maps` (version 3)"));
    let empty = format!("{{\"version\":3,{V3_TAIL},\"tensor_maps\":[]}}");
    assert!(bad_json(&empty).contains("at least one entry in `tensor_maps`"));
    let top_level = format!("{{\"version\":3,\"entry\":\"k\",{V3_TAIL},{maps}}}");
    assert!(bad_json(&top_level).contains("`entry` inside each entry of `kernels`"));
    let v4 = format!("{{\"version\":4,{V3_TAIL},{maps}}}");
    assert!(bad_json(&v4).contains("reads versions 1 to 3"));
}

#[test]
fn malformed_map_json_is_rejected() {
    let with = |entry: &str| format!("{{\"version\":3,{V3_TAIL},\"tensor_maps\":[{entry}]}}");
    let swizzle = bad_json(&with(
        r#"{"param":"A","box":[64,64],"swizzle":48,"fill":"zero"}"#,
    ));
    assert!(
        swizzle.contains("swizzle 48 is not one of 0 (none), 32, 64, 128"),
        "{swizzle}"
    );
    let fill = bad_json(&with(
        r#"{"param":"A","box":[64,64],"swizzle":0,"fill":"nan"}"#,
    ));
    assert!(fill.contains("unknown variant `nan`"), "{fill}");
    let unknown = bad_json(&with(
        r#"{"param":"A","box":[64,64],"swizzle":0,"fill":"zero","stride":1}"#,
    ));
    assert!(unknown.contains("unknown field `stride`"), "{unknown}");
    let missing = bad_json(&with(r#"{"param":"A","box":[64,64],"swizzle":0}"#));
    assert!(missing.contains("missing field `fill`"), "{missing}");
}

#[test]
fn map_entries_are_validated_against_their_parameter() {
    let with_map = |t: TensorMapDesc| {
        let mut m = tma_gemm();
        m.tensor_maps = vec![t];
        m
    };
    let unknown = rejected(&with_map(map("D", &[64, 64], Swizzle::None)));
    assert_eq!(
        unknown,
        "tensor_maps[0] (`D`): names no parameter in `params`"
    );

    let too_big = rejected(&with_map(map("A", &[512, 64], Swizzle::None)));
    assert_eq!(
        too_big,
        "tensor_maps[0] (`A`): box[0] is 512; each must lie in 1..=256"
    );
    let zero = rejected(&with_map(map("A", &[0, 64], Swizzle::None)));
    assert!(zero.contains("box[0] is 0"), "{zero}");
    let rank = rejected(&with_map(map("A", &[64], Swizzle::None)));
    assert!(
        rank.contains("box has 1 entries but the tensor has rank 2"),
        "{rank}"
    );

    // 12 float16 = 24 bytes: not whole 16-byte granules.
    let granule = rejected(&with_map(map("A", &[64, 12], Swizzle::None)));
    assert_eq!(
        granule,
        "tensor_maps[0] (`A`): the inner box row is 12 float16 = 24 bytes; TMA needs a \
         multiple of 16 bytes"
    );
    // 128 float16 = 256 bytes: wider than the 128-byte swizzle span (64 float16 fit).
    let span = rejected(&with_map(map("A", &[64, 128], Swizzle::B128)));
    assert_eq!(
        span,
        "tensor_maps[0] (`A`): the inner box row is 128 float16 = 256 bytes; a 128-byte \
         swizzle allows at most 128 bytes (64 elements)"
    );
    assert!(with_map(map("A", &[64, 64], Swizzle::B128))
        .validate()
        .is_ok());
    let span32 = rejected(&with_map(map("A", &[64, 32], Swizzle::B32)));
    assert!(span32.contains("a 32-byte swizzle allows at most 32 bytes (16 elements)"));
    // Without a swizzle a row may be as wide as the box allows.
    assert!(with_map(map("A", &[8, 256], Swizzle::None))
        .validate()
        .is_ok());
}

#[test]
fn dtype_rank_and_target_limits() {
    let mut m = tma_gemm();
    m.params[0].dtype = DType::Bool;
    m.tensor_maps = vec![map("A", &[64, 64], Swizzle::None)];
    assert!(rejected(&m).contains("TMA cannot move bool elements"));

    // Every other dtype is a TMA type; 16 elements of 8 bytes fit a 128-byte swizzle.
    m.params[0].dtype = DType::Int4;
    assert!(rejected(&m).contains("TMA cannot move int4 elements"));
    for dtype in DType::ALL
        .into_iter()
        .filter(|d| !matches!(d, DType::Bool | DType::Int4))
    {
        let mut m = tma_gemm();
        m.params[0].dtype = dtype;
        let inner = 128 / dtype.bytes();
        m.tensor_maps = vec![map("A", &[8, inner], Swizzle::B128)];
        assert!(m.validate().is_ok(), "{dtype}: {:?}", m.validate());
    }

    let mut six = tma_gemm();
    six.params[0].shape = (0..6).map(|_| DimExpr::int(2)).collect();
    six.tensor_maps = vec![map("A", &[2, 2, 2, 2, 2, 8], Swizzle::None)];
    assert!(rejected(&six).contains("rank 6; TMA describes 1 to 5 dimensions"));

    let mut ampere = tma_gemm();
    ampere.target = Target::Sm80;
    assert!(rejected(&ampere).contains("needs a target with TMA"));
}
