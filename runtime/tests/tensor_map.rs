//! TMA tensor maps at launch, the CPU side: the `cuTensorMapEncodeTiled` arguments computed
//! from an argument tensor (reversed dims, byte strides, box), every requirement a tensor can
//! break with its message, the driver enums, and the cache that encodes each distinct
//! argument set once (observed through a stand-in encoder).

use std::cell::Cell;
use tlc_runtime::tensor_map::{data_type, oob_fill, swizzle_mode, MAX_CACHED_MAPS};
use tlc_runtime::{
    encode_args, map_args, DType, EncodeArgs, Manifest, OobFill, RuntimeError, Swizzle, TensorMap,
    TensorMapCache, TensorMapDesc,
};

use cudarc::driver::sys::{CUtensorMapDataType, CUtensorMapFloatOOBfill, CUtensorMapSwizzle};

fn desc(param: &str, box_dims: &[u32], swizzle: Swizzle) -> TensorMapDesc {
    TensorMapDesc {
        param: param.into(),
        box_dims: box_dims.to_vec(),
        swizzle,
        fill: OobFill::Zero,
    }
}

/// The message of a `TensorMap` error for parameter `param`.
fn refused(r: Result<EncodeArgs, RuntimeError>, param: &str) -> String {
    match r {
        Err(e @ RuntimeError::TensorMap { .. }) => {
            let RuntimeError::TensorMap { param: p, .. } = &e else {
                unreachable!()
            };
            assert_eq!(p, param);
            e.to_string()
        }
        other => panic!("expected a TensorMap error, got {other:?}"),
    }
}

#[test]
fn arguments_are_the_driver_order_innermost_first() {
    // A (M, K) = (512, 1024) float16 tensor, read in 128 × 64 boxes.
    let a = encode_args(
        &desc("A", &[128, 64], Swizzle::B128),
        DType::Float16,
        &[512, 1024],
        0x7f00_0000_0000,
    )
    .unwrap();
    assert_eq!(a.rank(), 2);
    assert_eq!(a.global_dim, vec![1024, 512]);
    assert_eq!(a.global_strides, vec![1024 * 2]);
    assert_eq!(a.box_dim, vec![64, 128]);
    assert_eq!(a.address, 0x7f00_0000_0000);
    assert_eq!(
        (a.dtype, a.swizzle, a.fill),
        (DType::Float16, Swizzle::B128, OobFill::Zero)
    );

    // Rank 3 float32 (B, M, N) = (3, 5, 8): strides of dims 1 and 0, innermost first.
    let b = encode_args(
        &desc("X", &[1, 4, 8], Swizzle::None),
        DType::Float32,
        &[3, 5, 8],
        256,
    )
    .unwrap();
    assert_eq!(b.global_dim, vec![8, 5, 3]);
    assert_eq!(b.global_strides, vec![8 * 4, 5 * 8 * 4]);
    assert_eq!(b.box_dim, vec![8, 4, 1]);

    // Rank 1 has no strides to pass.
    let v = encode_args(&desc("V", &[64], Swizzle::None), DType::Int8, &[1000], 0).unwrap();
    assert_eq!(v.global_dim, vec![1000]);
    assert!(v.global_strides.is_empty());
}

#[test]
fn a_row_stride_off_the_granule_is_refused_with_its_value() {
    // (1000, 1023) float16: rows of 2046 bytes.
    let r = encode_args(
        &desc("B", &[64, 64], Swizzle::B128),
        DType::Float16,
        &[1000, 1023],
        0,
    );
    assert_eq!(
        refused(r, "B"),
        "parameter `B`: TMA needs every row stride to be a multiple of 16 bytes; the stride \
         of dimension 0 is 2046 bytes (1023 float16)"
    );
    // Each outer stride is a multiple of the one inside it, so the innermost row stride
    // is the one that fails; in rank 3 it is dimension 1's.
    let r = encode_args(
        &desc("G", &[1, 1, 16], Swizzle::None),
        DType::Int8,
        &[2, 3, 17],
        0,
    );
    assert_eq!(
        refused(r, "G"),
        "parameter `G`: TMA needs every row stride to be a multiple of 16 bytes; the stride \
         of dimension 1 is 17 bytes (17 int8)"
    );
    // 16-byte rows and 48-byte planes are whole granules.
    let ok = encode_args(
        &desc("E", &[1, 1, 8], Swizzle::None),
        DType::Float16,
        &[2, 3, 8],
        0,
    );
    assert_eq!(ok.unwrap().global_strides, vec![16, 48]);
}

#[test]
fn alignment_and_dimension_limits_are_refused() {
    let d = desc("A", &[64, 64], Swizzle::None);
    let r = encode_args(&d, DType::Float16, &[128, 128], 0x1008);
    assert_eq!(
        refused(r, "A"),
        "parameter `A`: TMA needs a 16-byte aligned global address; the tensor starts at 0x1008"
    );
    let r = encode_args(&d, DType::Float16, &[0, 128], 0);
    assert_eq!(
        refused(r, "A"),
        "parameter `A`: TMA needs every dimension in 1..=2147483391 (32-bit box coordinates); \
         dimension 0 is 0"
    );
    // A box origin past the end must fit a .s32 coordinate: 2^31 - 257 is the largest
    // dimension, one more is refused.
    let r = encode_args(&d, DType::Float16, &[1, 1usize << 31], 0);
    assert!(refused(r, "A").contains("dimension 1 is 2147483648"));
    let r = encode_args(&d, DType::Float16, &[1, (1usize << 31) - 256], 0);
    assert!(refused(r, "A").contains("dimension 1 is 2147483392"));
    let r = encode_args(&d, DType::Float16, &[(1usize << 31) - 257, 64], 0);
    assert_eq!(r.unwrap().global_dim, vec![64, (1u64 << 31) - 257]);
    // A stride of 2^40 bytes or more is refused: (2, 2^30, 512) float16 planes are 2^40.
    let r = encode_args(
        &desc("A", &[1, 64, 64], Swizzle::None),
        DType::Float16,
        &[2, 1usize << 30, 512],
        0,
    );
    assert_eq!(
        refused(r, "A"),
        "parameter `A`: TMA needs every stride below 2^40 bytes; the stride of dimension 0 \
         is 1099511627776 bytes (549755813888 float16)"
    );
    // A box of another rank than the tensor (the manifest's check bypassed) is refused too.
    let r = encode_args(&d, DType::Float16, &[2, 4, 128], 0);
    assert!(refused(r, "A").contains("rank 3 but its tensor map's box has 2 entries"));
}

#[test]
fn map_args_follow_the_manifest_order_and_dtypes() {
    let m = Manifest::from_json(
        r#"{"version":3,"target":"sm_90a",
            "params":[{"name":"A","dtype":"bfloat16","shape":[{"dim":"M"},{"dim":"K"}],"access":"read"},
                      {"name":"B","dtype":"float32","shape":[{"dim":"K"},{"int":32}],"access":"read"}],
            "dims":[{"name":"M","dtype":"int32"},{"name":"K","dtype":"int32"}],
            "kernels":[{"entry":"k","grid":[{"int":1}],"block":[128],"shared_bytes":{"int":0}}],
            "tensor_maps":[{"param":"B","box":[16,32],"swizzle":128,"fill":"zero"},
                           {"param":"A","box":[64,64],"swizzle":128,"fill":"zero"}]}"#,
    )
    .unwrap();
    let (a, b): (&[usize], &[usize]) = (&[100, 256], &[256, 32]);
    let all = map_args(&m, &[(a, 0x1000), (b, 0x2000)]).unwrap();
    assert_eq!(all.len(), 2);
    assert_eq!((all[0].address, all[0].dtype), (0x2000, DType::Float32));
    assert_eq!(all[0].global_dim, vec![32, 256]);
    assert_eq!(all[0].global_strides, vec![128]);
    assert_eq!((all[1].address, all[1].dtype), (0x1000, DType::BFloat16));
    assert_eq!(all[1].global_dim, vec![256, 100]);
    assert_eq!(all[1].box_dim, vec![64, 64]);
    // A bad argument names its parameter.
    let odd: &[usize] = &[100, 36];
    let err = map_args(&m, &[(odd, 0x1000), (b, 0x2000)]).unwrap_err();
    assert!(err
        .to_string()
        .starts_with("parameter `A`: TMA needs every row stride"));
}

#[test]
fn the_cache_encodes_each_argument_set_once() {
    let cache = TensorMapCache::default();
    let calls = Cell::new(0u64);
    // A stand-in for the driver: a map whose first word says which call made it.
    let encode = |_: &EncodeArgs| {
        calls.set(calls.get() + 1);
        let mut words = [0u64; 16];
        words[0] = calls.get();
        Ok(TensorMap(words))
    };
    let d = desc("A", &[64, 64], Swizzle::B128);
    let args = encode_args(&d, DType::Float16, &[256, 256], 0x10000).unwrap();
    let first = cache.get_or_encode(&args, encode).unwrap();
    let again = cache.get_or_encode(&args, encode).unwrap();
    assert_eq!(first, again);
    assert_eq!((cache.encodes(), calls.get(), cache.len()), (1, 1, 1));

    // Another pointer, shape, dtype, box or swizzle is another map.
    let others = [
        encode_args(&d, DType::Float16, &[256, 256], 0x20000),
        encode_args(&d, DType::Float16, &[128, 256], 0x10000),
        encode_args(&d, DType::BFloat16, &[256, 256], 0x10000),
        encode_args(
            &desc("A", &[32, 64], Swizzle::B128),
            DType::Float16,
            &[256, 256],
            0x10000,
        ),
        encode_args(
            &desc("A", &[64, 64], Swizzle::None),
            DType::Float16,
            &[256, 256],
            0x10000,
        ),
    ];
    for o in &others {
        let map = cache.get_or_encode(o.as_ref().unwrap(), encode).unwrap();
        assert_ne!(map, first);
    }
    assert_eq!(cache.encodes(), 6);
    // Relaunching with all of them hits every time.
    for o in &others {
        cache.get_or_encode(o.as_ref().unwrap(), encode).unwrap();
    }
    assert_eq!((cache.encodes(), calls.get(), cache.len()), (6, 6, 6));

    // A failed encode is not cached: the next launch tries again.
    let failing = TensorMapCache::default();
    let err = failing.get_or_encode(&args, |_| {
        Err(RuntimeError::TensorMap {
            param: "A".into(),
            message: "cuTensorMapEncodeTiled failed".into(),
        })
    });
    assert!(err.is_err());
    assert!(failing.is_empty());
    assert_eq!(failing.encodes(), 1);
}

#[test]
fn the_cache_is_bounded() {
    let cache = TensorMapCache::default();
    let d = desc("A", &[8, 8], Swizzle::None);
    for i in 0..(MAX_CACHED_MAPS as u64 + 10) {
        let args = encode_args(&d, DType::Float16, &[8, 8], 16 * (i + 1)).unwrap();
        cache
            .get_or_encode(&args, |_| Ok(TensorMap([i; 16])))
            .unwrap();
        assert!(cache.len() <= MAX_CACHED_MAPS);
    }
    assert_eq!(cache.encodes(), MAX_CACHED_MAPS + 10);
    assert_eq!(cache.len(), 10);
}

#[test]
fn driver_enums_and_layout() {
    assert_eq!(std::mem::size_of::<TensorMap>(), 128);
    assert_eq!(std::mem::align_of::<TensorMap>(), 64);
    use CUtensorMapDataType::*;
    assert_eq!(
        data_type(DType::Float16),
        Some(CU_TENSOR_MAP_DATA_TYPE_FLOAT16)
    );
    assert_eq!(
        data_type(DType::BFloat16),
        Some(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16)
    );
    assert_eq!(
        data_type(DType::Float32),
        Some(CU_TENSOR_MAP_DATA_TYPE_FLOAT32)
    );
    assert_eq!(
        data_type(DType::Float64),
        Some(CU_TENSOR_MAP_DATA_TYPE_FLOAT64)
    );
    for byte in [
        DType::Float8E4M3,
        DType::Float8E5M2,
        DType::Int8,
        DType::UInt8,
    ] {
        assert_eq!(data_type(byte), Some(CU_TENSOR_MAP_DATA_TYPE_UINT8));
    }
    assert_eq!(data_type(DType::Int32), Some(CU_TENSOR_MAP_DATA_TYPE_INT32));
    assert_eq!(
        data_type(DType::UInt32),
        Some(CU_TENSOR_MAP_DATA_TYPE_UINT32)
    );
    assert_eq!(data_type(DType::Int64), Some(CU_TENSOR_MAP_DATA_TYPE_INT64));
    assert_eq!(data_type(DType::Bool), None);
    // The manifest accepts exactly the dtypes the driver mapping has.
    for d in DType::ALL {
        assert_eq!(
            tlc_runtime::manifest::tma_supports(d),
            data_type(d).is_some()
        );
    }
    assert_eq!(
        swizzle_mode(Swizzle::None),
        CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_NONE
    );
    assert_eq!(
        swizzle_mode(Swizzle::B32),
        CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_32B
    );
    assert_eq!(
        swizzle_mode(Swizzle::B64),
        CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_64B
    );
    assert_eq!(
        swizzle_mode(Swizzle::B128),
        CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B
    );
    // The driver's numbering is the IR's TMA code (`tlc_ir::wgmma::Swizzle::tma_code`).
    for s in [Swizzle::None, Swizzle::B32, Swizzle::B64, Swizzle::B128] {
        assert_eq!(swizzle_mode(s) as u32, s.tma_code());
    }
    assert_eq!(
        oob_fill(OobFill::Zero),
        CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE
    );
}
