//! Multi-kernel manifests (version 2, a `kernels` list): round trip through the PTX header,
//! each version accepting only its own shape, per-kernel validation and launch planning.

use tlc_runtime::check::plan;
use tlc_runtime::{
    check_args, Access, DType, DimDecl, DimExpr, Dims, Launch, Manifest, Param, RuntimeError,
    Target,
};

const VADD: &str = include_str!("../examples/vadd.ptx");

fn launch(entry: &str, grid: DimExpr, block: u32, shared: i64) -> Launch {
    Launch {
        entry: entry.into(),
        grid: vec![grid],
        block: vec![block],
        shared_bytes: DimExpr::int(shared),
        cluster: Vec::new(),
        cooperative: false,
    }
}

/// `B = A * 2` then `C = B + 1`, over N elements: the second kernel reads the first's output.
fn chain() -> Manifest {
    let n = DimExpr::dim("N");
    let tensor = |name: &str, access| Param {
        name: name.into(),
        dtype: DType::Float32,
        shape: vec![n.clone()],
        access,
    };
    Manifest {
        target: Target::Sm80,
        scratch: Vec::new(),
        params: vec![
            tensor("A", Access::Read),
            tensor("B", Access::ReadWrite),
            tensor("C", Access::Write),
        ],
        dims: vec![DimDecl {
            name: "N".into(),
            dtype: DType::Int32,
            arg: None,
            multiple_of: None,
        }],
        kernels: vec![
            launch(
                "chain_k0",
                DimExpr::ceildiv(n.clone(), DimExpr::int(128)),
                128,
                0,
            ),
            launch("chain_k1", DimExpr::ceildiv(n, DimExpr::int(64)), 64, 65536),
        ],
        tensor_maps: Vec::new(),
    }
}

fn bad_manifest(json: &str) -> String {
    match Manifest::from_json(json) {
        Err(RuntimeError::BadManifest(msg)) => msg,
        other => panic!("expected BadManifest for {json}, got {other:?}"),
    }
}

#[test]
fn several_kernels_round_trip_as_version_2() {
    let m = chain();
    assert_eq!(m.version(), 2);
    let header = m.to_ptx_header();
    assert!(
        header.starts_with("// tlc-manifest: {\"version\":2,\"target\":\"sm_80\",\"params\":"),
        "{header}"
    );
    assert!(
        header.contains(
            "\"kernels\":[{\"entry\":\"chain_k0\",\"grid\":[{\"op\":\"ceildiv\",\"args\":\
             [{\"dim\":\"N\"},{\"int\":128}]}],\"block\":[128],\"shared_bytes\":{\"int\":0}},\
             {\"entry\":\"chain_k1\","
        ),
        "{header}"
    );
    // No top-level launch fields: they live in each kernel.
    for field in [
        "\"entry\":\"chain",
        "\"grid\"",
        "\"block\"",
        "\"shared_bytes\"",
    ] {
        let before_kernels = header.split("\"kernels\"").next().unwrap_or_default();
        assert!(!before_kernels.contains(field), "{field} in {header}");
    }
    assert_eq!(header.lines().count(), 1);
    let ptx = m.prepend_to(".version 8.0\n.target sm_80\n.address_size 64\n");
    assert_eq!(Manifest::from_ptx(&ptx).unwrap(), m);
    assert_eq!(m.entries(), "chain_k0, chain_k1");
}

#[test]
fn one_kernel_is_still_written_as_version_1() {
    let vadd = Manifest::from_ptx(VADD).unwrap();
    assert_eq!(vadd.version(), 1);
    assert_eq!(vadd.kernels.len(), 1);
    // A one-entry `kernels` list is a valid version 2 manifest and means the same kernel.
    let as_v2 = format!(
        "{{\"version\":2,\"target\":\"sm_80\",\"params\":{},\"dims\":{},\"kernels\":[{}]}}",
        serde_json::to_string(&vadd.params).unwrap(),
        serde_json::to_string(&vadd.dims).unwrap(),
        serde_json::to_string(&vadd.kernels[0]).unwrap(),
    );
    assert_eq!(Manifest::from_json(&as_v2).unwrap(), vadd);
}

#[test]
fn each_version_accepts_only_its_own_shape() {
    let v2 = serde_json::to_string(&chain()).unwrap();
    let v1 = serde_json::to_string(&Manifest::from_ptx(VADD).unwrap()).unwrap();

    let msg = bad_manifest(&v2.replace("\"version\":2", "\"version\":1"));
    assert!(
        msg.contains("no `kernels` list (that is version 2)"),
        "{msg}"
    );
    let msg = bad_manifest(&v1.replace("\"version\":1", "\"version\":2"));
    assert!(
        msg.contains("has `entry` inside each entry of `kernels`, not at the top level"),
        "{msg}"
    );
    let msg = bad_manifest(&v2.replace("\"dims\":", "\"shared_bytes\":{\"int\":0},\"dims\":"));
    assert!(msg.contains("`shared_bytes` inside each entry"), "{msg}");
    let no_kernels = v2
        .split(",\"kernels\"")
        .next()
        .unwrap_or_default()
        .to_string()
        + "}";
    let msg = bad_manifest(&no_kernels);
    assert!(msg.contains("missing field `kernels` (version 2)"), "{msg}");
    let msg = bad_manifest(&v1.replace(",\"grid\":", ",\"grids\":"));
    assert!(msg.contains("grids"), "{msg}");
    // Version 3 is version 2 plus tensor maps (`manifest_tensor_maps.rs`); 4 is unknown.
    let msg = bad_manifest(&v2.replace("\"version\":2", "\"version\":3"));
    assert!(
        msg.contains("missing field `tensor_maps` (version 3)"),
        "{msg}"
    );
    let msg = bad_manifest(&v2.replace("\"version\":2", "\"version\":4"));
    assert!(
        msg.contains("version 4 is not supported (this runtime reads versions 1 to 3)"),
        "{msg}"
    );
    let msg = bad_manifest(&v2.replace("\"block\":[64]", "\"threads\":[64]"));
    assert!(msg.contains("threads"), "{msg}");
    // The reader of a whole PTX file reports the same.
    let ptx = format!("// tlc-manifest: {}\n.version 8.0\n", no_kernels);
    assert!(matches!(
        Manifest::from_ptx(&ptx),
        Err(RuntimeError::BadManifest(_))
    ));
}

#[test]
fn validation_names_the_offending_kernel() {
    let check = |edit: &dyn Fn(&mut Manifest), want: &str| {
        let mut m = chain();
        edit(&mut m);
        match m.validate() {
            Err(RuntimeError::BadManifest(msg)) => assert!(msg.contains(want), "{msg} / {want}"),
            other => panic!("expected an error containing {want:?}, got {other:?}"),
        }
        assert!(Manifest::from_ptx(&m.to_ptx_header()).is_err());
    };
    check(&|m| m.kernels.clear(), "`kernels` is empty");
    check(
        &|m| m.kernels[1].entry = "chain_k0".into(),
        "entry `chain_k0` is repeated",
    );
    check(
        &|m| m.kernels[1].entry = "k 1".into(),
        "entry `k 1` is not a PTX identifier",
    );
    check(
        &|m| m.kernels[1].block = vec![64, 32],
        "kernel `chain_k1`: block has 2048 threads",
    );
    check(
        &|m| m.kernels[0].grid = vec![],
        "kernel `chain_k0`: grid has 0 entries",
    );
    check(
        &|m| m.kernels[1].grid[0] = DimExpr::dim("Q"),
        "grid.x of `chain_k1` uses dim `Q`",
    );
    check(
        &|m| m.kernels[1].shared_bytes = DimExpr::dim("S"),
        "shared_bytes of `chain_k1` uses dim `S`",
    );
}

#[test]
fn every_kernel_gets_its_own_launch_plan() {
    let m = chain();
    let f = DType::Float32;
    let n: &[usize] = &[1000];
    let p = check_args(&m, &[(f, n), (f, n), (f, n)]).unwrap();
    assert_eq!(p.dims.get("N"), Some(1000));
    assert_eq!(p.kernels.len(), 2);
    assert_eq!(p.kernels[0].entry, "chain_k0");
    assert_eq!(p.kernels[0].grid, [8, 1, 1]);
    assert_eq!(p.kernels[0].block, [128, 1, 1]);
    assert_eq!(p.kernels[0].shared_bytes, 0);
    assert_eq!(p.kernels[1].entry, "chain_k1");
    assert_eq!(p.kernels[1].grid, [16, 1, 1]);
    assert_eq!(p.kernels[1].block, [64, 1, 1]);
    assert_eq!(p.kernels[1].shared_bytes, 65536);

    let err = check_args(&m, &[(f, n), (f, n)]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "kernel `chain_k0, chain_k1` takes 3 argument(s) but 2 were given"
    );

    // A range error names the kernel whose grid is out of range.
    let mut m = chain();
    m.kernels[1].grid = vec![DimExpr::int(1), DimExpr::dim("N")];
    let err = plan(&m, Dims::from_pairs([("N", 70_000)])).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid launch configuration: kernel `chain_k1`: grid.y = N is 70000 with N = 70000; \
         it must lie in 0..=65535"
    );
}

/// A cluster shape rides in the launch (`cluster`, omitted without one, at the top level in
/// version 1); a grid that is not whole clusters along an axis is refused at launch, naming
/// the axis; a malformed cluster is a bad manifest.
#[test]
fn cluster_launches_round_trip_and_need_whole_clusters() {
    let mut one = chain();
    one.kernels.truncate(1);
    one.kernels[0].cluster = vec![2];
    let header = one.to_ptx_header();
    assert!(header.contains(",\"cluster\":[2]"), "{header}");
    let json = header.trim_start_matches("// tlc-manifest: ");
    assert_eq!(Manifest::from_json(json).unwrap(), one);
    assert!(!chain().to_ptx_header().contains("cluster"));

    let f = DType::Float32;
    // N = 1000: 8 blocks of 128, four clusters of two.
    let p = check_args(&one, &[(f, &[1000]), (f, &[1000]), (f, &[1000])]).unwrap();
    assert_eq!(p.kernels[0].grid, [8, 1, 1]);
    // N = 1100: 9 blocks.
    let err = plan(&one, Dims::from_pairs([("N", 1100)])).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid launch configuration: grid.x = ceildiv(N, 128) is 9 with N = 1100; the \
         kernel runs in clusters of 2 blocks along x, so it must be a multiple of 2"
    );

    let mut bad = chain();
    bad.kernels[1].cluster = vec![4, 4];
    let msg = bad_manifest(&serde_json::to_string(&bad).unwrap());
    assert!(
        msg.contains("cluster has 2 entries; at most 3, and no more than the grid's"),
        "{msg}"
    );
    bad.kernels[1].cluster = vec![16];
    let msg = bad_manifest(&serde_json::to_string(&bad).unwrap());
    assert!(
        msg.contains("cluster has 16 blocks; at most 8 are allowed"),
        "{msg}"
    );
}

/// A cooperative launch (`T.sync_grid()`) rides in the launch (`cooperative`, omitted when
/// false, at the top level in version 1, in each entry of `kernels` in version 2); a
/// cooperative kernel with a cluster is a bad manifest.
#[test]
fn cooperative_launches_round_trip() {
    let mut one = chain();
    one.kernels.truncate(1);
    one.kernels[0].cooperative = true;
    let header = one.to_ptx_header();
    assert!(header.contains(",\"cooperative\":true"), "{header}");
    let json = header.trim_start_matches("// tlc-manifest: ");
    assert_eq!(Manifest::from_json(json).unwrap(), one);
    assert!(!chain().to_ptx_header().contains("cooperative"));

    let mut two = chain();
    two.kernels[1].cooperative = true;
    let header = two.to_ptx_header();
    assert_eq!(
        header.matches("\"cooperative\":true").count(),
        1,
        "{header}"
    );
    let json = header.trim_start_matches("// tlc-manifest: ");
    assert_eq!(Manifest::from_json(json).unwrap(), two);

    two.kernels[1].cluster = vec![2];
    let msg = bad_manifest(&serde_json::to_string(&two).unwrap());
    assert!(msg.contains("a cooperative kernel has no cluster"), "{msg}");
}

/// `chain` with `B` as the function's own tensor (`T.alloc_global`): listed in `scratch`,
/// not in `params`, so a launch takes `A` and `C` only.
#[test]
fn scratch_tensors_round_trip_and_are_no_arguments() {
    let mut m = chain();
    let b = m.params.remove(1);
    m.scratch.push(b);
    m.validate().expect("a manifest with scratch validates");
    let header = m.to_ptx_header();
    assert!(
        header.contains(
            "\"scratch\":[{\"name\":\"B\",\"dtype\":\"float32\",\"shape\":[{\"dim\":\"N\"}],\
             \"access\":\"readwrite\"}]"
        ),
        "{header}"
    );
    let back = Manifest::from_ptx(&format!("{header}\n.version 8.0\n")).expect("reads back");
    assert_eq!(back, m);
    // The caller passes two tensors; three (B too) is the wrong count.
    let n = [100usize];
    let two = [(DType::Float32, &n[..]), (DType::Float32, &n[..])];
    assert!(check_args(&m, &two).is_ok());
    let three = [two[0], two[0], two[0]];
    assert!(matches!(
        check_args(&m, &three),
        Err(RuntimeError::ArgCount { .. })
    ));
    // One namespace for both lists; scratch shapes use declared dims only.
    let mut twice = m.clone();
    twice.scratch[0].name = "A".into();
    assert!(twice.validate().is_err());
    let mut undeclared = m.clone();
    undeclared.scratch[0].shape = vec![DimExpr::dim("K")];
    let msg = format!("{:?}", undeclared.validate());
    assert!(msg.contains("uses dim `K`"), "{msg}");
}
