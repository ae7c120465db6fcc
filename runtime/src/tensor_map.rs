//! TMA tensor maps at launch. For each `tensor_maps` entry of the manifest the runtime
//! computes the arguments of `cuTensorMapEncodeTiled` from the argument tensor (pure, checked,
//! tested without a GPU: `encode_args`), encodes them once per distinct argument set
//! (`TensorMapCache`) and passes the 128-byte result by value after the dims (`Kernel`'s
//! launch). A tensor TMA cannot describe is a `RuntimeError::TensorMap` naming the parameter,
//! never a driver failure, a hang or a wrong result.

use crate::driver::error_name;
use crate::error::{Result, RuntimeError};
use crate::manifest::{Manifest, OobFill, Swizzle, TensorMapDesc, TMA_GRANULE};
use cudarc::driver::result::DriverError;
use cudarc::driver::sys::{
    self, CUresult, CUtensorMapDataType, CUtensorMapFloatOOBfill, CUtensorMapInterleave,
    CUtensorMapL2promotion, CUtensorMapSwizzle,
};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use tlc_ir::intrinsic::MAX_TMA_DIM;
use tlc_ir::DType;

/// Largest global dimension a tlc tensor map takes (`tlc_ir::intrinsic::MAX_TMA_DIM`: the
/// box coordinates are 32-bit signed, below the driver's 2^32).
pub const MAX_GLOBAL_DIM: u64 = MAX_TMA_DIM as u64;

/// Global strides (bytes) must stay below 2^40.
pub const MAX_GLOBAL_STRIDE: u64 = 1 << 40;

/// Distinct maps a kernel keeps. A program that allocates fresh tensors for every launch
/// would otherwise grow the cache without end; past this the cache starts over, which costs
/// one encode (microseconds, no GPU work) per map.
pub const MAX_CACHED_MAPS: usize = 256;

/// A tensor map as the kernel receives it: 128 opaque bytes, declared in PTX as
/// `.param .align 64 .b8 NAME[128]`. Its own type rather than cudarc's `CUtensorMap`, whose
/// alignment differs between CUDA header versions (64 in 12.x, 128 in 13.x): the parameter
/// needs 64, and the driver's bytes are copied in after encoding.
#[repr(C, align(64))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorMap(pub [u64; 16]);

const _: () = assert!(std::mem::size_of::<TensorMap>() == 128);
const _: () = assert!(std::mem::size_of::<sys::CUtensorMap>() == 128);

/// The arguments of one `cuTensorMapEncodeTiled` call, every per-dimension list innermost
/// first (the driver's order, the reverse of the manifest's). Everything the encoded map
/// depends on is here, so it is also the cache key: equal arguments give an equal map, even
/// for a tensor freed and reallocated at the same address.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct EncodeArgs {
    /// The tensor's device address (16-byte aligned).
    pub address: u64,
    pub dtype: DType,
    /// `globalDim`: the shape reversed, each in 1..=MAX_GLOBAL_DIM.
    pub global_dim: Vec<u64>,
    /// `globalStrides`: the byte strides of dimensions 1.. (rank − 1 of them; the innermost
    /// dimension's stride is the element size and is not passed), each a multiple of 16.
    pub global_strides: Vec<u64>,
    /// `boxDim`: the manifest's box reversed.
    pub box_dim: Vec<u32>,
    pub swizzle: Swizzle,
    pub fill: OobFill,
}

impl EncodeArgs {
    pub fn rank(&self) -> usize {
        self.global_dim.len()
    }
}

/// The encode arguments for map `desc` over a contiguous row-major tensor of `dtype` with
/// `shape` (outermost first) at `address`, or the requirement the tensor breaks.
pub fn encode_args(
    desc: &TensorMapDesc,
    dtype: DType,
    shape: &[usize],
    address: u64,
) -> Result<EncodeArgs> {
    let fail = |message: String| {
        Err(RuntimeError::TensorMap {
            param: desc.param.clone(),
            message,
        })
    };
    if shape.len() != desc.box_dims.len() {
        return fail(format!(
            "the tensor has rank {} but its tensor map's box has {} entries",
            shape.len(),
            desc.box_dims.len()
        ));
    }
    let mut global_dim = Vec::with_capacity(shape.len());
    for (i, &size) in shape.iter().enumerate().rev() {
        match u64::try_from(size) {
            Ok(d) if (1..=MAX_GLOBAL_DIM).contains(&d) => global_dim.push(d),
            _ => {
                return fail(format!(
                    "TMA needs every dimension in 1..={MAX_GLOBAL_DIM} (32-bit box \
                     coordinates); dimension {i} is {size}"
                ))
            }
        }
    }
    if !address.is_multiple_of(TMA_GRANULE) {
        return fail(format!(
            "TMA needs a {TMA_GRANULE}-byte aligned global address; the tensor starts at \
             {address:#x}"
        ));
    }
    // Dimension i's stride is the product of the sizes inside it; the innermost one (the
    // element) is implicit, so the driver takes rank − 1 strides, innermost first.
    // Computed in u128: the loop stops at the first stride of 2^40 bytes or more, so the
    // product stays below 2^40 · 2^31 · 8 and cannot overflow.
    let elem = u128::from(dtype.bytes());
    let mut global_strides = Vec::with_capacity(shape.len().saturating_sub(1));
    let mut elems: u128 = 1;
    for (i, &inner) in global_dim
        .iter()
        .enumerate()
        .take(shape.len().saturating_sub(1))
    {
        let outer = shape.len() - 2 - i; // the dimension (outermost first) this stride steps
        elems = elems.saturating_mul(u128::from(inner));
        let bytes = elems.saturating_mul(elem);
        let Some(stride) = u64::try_from(bytes).ok().filter(|b| *b < MAX_GLOBAL_STRIDE) else {
            return fail(format!(
                "TMA needs every stride below 2^40 bytes; the stride of dimension {outer} is \
                 {bytes} bytes ({elems} {dtype})"
            ));
        };
        if !stride.is_multiple_of(TMA_GRANULE) {
            return fail(format!(
                "TMA needs every row stride to be a multiple of {TMA_GRANULE} bytes; the \
                 stride of dimension {outer} is {stride} bytes ({elems} {dtype})"
            ));
        }
        global_strides.push(stride);
    }
    Ok(EncodeArgs {
        address,
        dtype,
        global_dim,
        global_strides,
        box_dim: desc.box_dims.iter().rev().copied().collect(),
        swizzle: desc.swizzle,
        fill: desc.fill,
    })
}

/// The encode arguments of every map of `m`, in order, for the launch arguments given as
/// (shape, device address), one per parameter. The arguments passed `check_args` already.
pub fn map_args(m: &Manifest, args: &[(&[usize], u64)]) -> Result<Vec<EncodeArgs>> {
    m.tensor_maps
        .iter()
        .map(|desc| {
            // `args`: the parameters' tensors, then the launch's scratch tensors.
            let found = m
                .params
                .iter()
                .chain(&m.scratch)
                .zip(args)
                .find(|(p, _)| p.name == desc.param);
            let Some((p, (shape, address))) = found else {
                return Err(RuntimeError::BadManifest(format!(
                    "{desc} names no parameter with an argument"
                )));
            };
            encode_args(desc, p.dtype, shape, *address)
        })
        .collect()
}

/// Encoded maps of one kernel, by their arguments, so relaunching with the same tensors
/// does not call the driver again. `encodes` counts the encoder calls (misses).
#[derive(Debug, Default)]
pub struct TensorMapCache {
    maps: Mutex<HashMap<EncodeArgs, TensorMap>>,
    encodes: AtomicUsize,
}

impl TensorMapCache {
    /// The map for `args`: cached, or made by `encode` (the driver call, or a stand-in in
    /// tests) and remembered when it succeeds.
    pub fn get_or_encode(
        &self,
        args: &EncodeArgs,
        encode: impl FnOnce(&EncodeArgs) -> Result<TensorMap>,
    ) -> Result<TensorMap> {
        // A panic elsewhere while holding the lock cannot leave a half-inserted entry, so a
        // poisoned cache is still correct.
        let mut maps = self.maps.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(map) = maps.get(args) {
            return Ok(*map);
        }
        self.encodes.fetch_add(1, Ordering::Relaxed);
        let map = encode(args)?;
        if maps.len() >= MAX_CACHED_MAPS {
            maps.clear();
        }
        maps.insert(args.clone(), map);
        Ok(map)
    }

    /// How many maps were encoded (cache misses) so far.
    pub fn encodes(&self) -> usize {
        self.encodes.load(Ordering::Relaxed)
    }

    /// How many maps are cached now.
    pub fn len(&self) -> usize {
        self.maps.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The driver's element type for `dtype`. fp8 and int8 move as bytes: TMA copies bits, and
/// only the out-of-bounds zero fill depends on the type, which is all-zero bits in each.
pub fn data_type(dtype: DType) -> Option<CUtensorMapDataType> {
    use CUtensorMapDataType::*;
    Some(match dtype {
        DType::Float16 => CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
        DType::BFloat16 => CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
        DType::Float32 => CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
        DType::Float64 => CU_TENSOR_MAP_DATA_TYPE_FLOAT64,
        DType::Float8E4M3 | DType::Float8E5M2 | DType::Int8 | DType::UInt8 => {
            CU_TENSOR_MAP_DATA_TYPE_UINT8
        }
        DType::Int16 | DType::UInt16 => CU_TENSOR_MAP_DATA_TYPE_UINT16,
        DType::Int32 => CU_TENSOR_MAP_DATA_TYPE_INT32,
        DType::UInt32 => CU_TENSOR_MAP_DATA_TYPE_UINT32,
        DType::Int64 => CU_TENSOR_MAP_DATA_TYPE_INT64,
        // int4 is never compiled yet (and would move as its packed bytes).
        DType::Bool | DType::Int4 => return None,
    })
}

/// The driver's swizzle mode (its numbering is `Swizzle::tma_code`; a test holds them equal).
pub fn swizzle_mode(s: Swizzle) -> CUtensorMapSwizzle {
    match s {
        Swizzle::None => CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_NONE,
        Swizzle::B32 => CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_32B,
        Swizzle::B64 => CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_64B,
        Swizzle::B128 => CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
    }
}

/// The driver's out-of-bounds fill. `NONE` is the driver's name for filling with zeros;
/// the other mode (NaN) exists for floats only.
pub fn oob_fill(f: OobFill) -> CUtensorMapFloatOOBfill {
    match f {
        OobFill::Zero => CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
    }
}

/// Encodes one map with `cuTensorMapEncodeTiled`; `param` names it in errors. The caller
/// has a driver (the `Kernel` exists) and `args` came from `encode_args`.
pub(crate) fn encode_tiled(param: &str, args: &EncodeArgs) -> Result<TensorMap> {
    let fail = |message: String| RuntimeError::TensorMap {
        param: param.to_string(),
        message,
    };
    let data_type =
        data_type(args.dtype).ok_or_else(|| fail(format!("TMA cannot move {}", args.dtype)))?;
    let rank = u32::try_from(args.rank()).map_err(|_| fail("rank out of range".into()))?;
    // All ones: every element of the box is loaded (a stride > 1 would skip elements).
    let element_strides = vec![1u32; args.rank()];
    let mut raw = sys::CUtensorMap { opaque: [0; 16] };
    // SAFETY: `raw` is a properly aligned CUtensorMap; `global_dim`, `box_dim` and
    // `element_strides` hold `rank` entries and `global_strides` rank − 1, as the driver
    // reads; all outlive the call, which only writes `raw`. The driver validates the values
    // and reports bad ones as an error code.
    let status = unsafe {
        sys::cuTensorMapEncodeTiled(
            &mut raw,
            data_type,
            rank,
            args.address as *mut std::ffi::c_void,
            args.global_dim.as_ptr(),
            args.global_strides.as_ptr(),
            args.box_dim.as_ptr(),
            element_strides.as_ptr(),
            CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            swizzle_mode(args.swizzle),
            // Promote L2 fetches to 128-byte lines: a box row is at least one 16-byte
            // granule, and whole lines let the neighbouring rows (the next box, another
            // block's tile) hit L2 instead of going to DRAM again; 128 B is what CUTLASS
            // and Triton use for their TMA loads.
            CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
            oob_fill(args.fill),
        )
    };
    if status != CUresult::CUDA_SUCCESS {
        let e = DriverError(status);
        let why = e
            .error_string()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|_| "no description".to_string());
        return Err(fail(format!(
            "cuTensorMapEncodeTiled failed: {} ({why}) for {args:?}",
            error_name(&e)
        )));
    }
    Ok(TensorMap(raw.opaque))
}
