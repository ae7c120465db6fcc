//! The manifest's `tensor_maps`: one TMA tensor map per entry, each describing how a
//! `cp.async.bulk.tensor` reads one tensor parameter (its box, swizzle and out-of-bounds
//! fill). The runtime encodes each with `cuTensorMapEncodeTiled` at launch
//! (`tlc_runtime::tensor_map`) and passes it by value after the dims. This file holds the JSON
//! shape and the checks that need no argument: supported dtypes, rank, box sizes, and the
//! inner box row against the 16-byte granule and the swizzle span.

use super::Param;
use serde::{Deserialize, Serialize};
use std::fmt;
use tlc_ir::target::AsyncCopy;
use tlc_ir::{DType, Target};

/// TMA describes tensors of 1 to 5 dimensions.
pub const MAX_TMA_RANK: usize = 5;

/// Largest box extent along any dimension (`boxDim[i] <= 256`).
pub const MAX_BOX: u32 = 256;

/// TMA moves whole 16-byte granules: the inner box row and every global row stride must be
/// multiples of this, and the global address aligned to it.
pub const TMA_GRANULE: u64 = 16;

/// How a tensor map swizzles the box in shared memory: the IR's swizzle (`tlc_ir::wgmma`,
/// the one definition of the modes, their spans and their TMA codes), written in the JSON
/// as its span in bytes (`0`, `32`, `64`, `128`) like the IR's `swizzle=`.
pub use tlc_ir::wgmma::Swizzle;

/// The JSON spelling of a [`Swizzle`]: its span in bytes.
mod swizzle_bytes {
    use super::Swizzle;
    use serde::de::Error;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(s: &Swizzle, ser: S) -> Result<S::Ok, S::Error> {
        ser.serialize_i64(s.bytes())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(de: D) -> Result<Swizzle, D::Error> {
        let bytes = u32::deserialize(de)?;
        Swizzle::from_bytes(i64::from(bytes)).ok_or_else(|| {
            D::Error::custom(format!(
                "swizzle {bytes} is not one of 0 (none), 32, 64, 128 (bytes)"
            ))
        })
    }
}

/// What a TMA load reads for box elements outside the tensor. Only `"zero"` exists; it is
/// spelled out so a later `"nan"` is a new value, not a new field.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OobFill {
    #[default]
    Zero,
}

/// One tensor map: a kernel parameter of 128 bytes (`.param .align 64 .b8 NAME[128]`),
/// passed after the dims, in the order of `Manifest::tensor_maps`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TensorMapDesc {
    /// The tensor parameter (a name in `params`) the map reads.
    pub param: String,
    /// The box in elements, one per dimension of the tensor, outermost first (the order of
    /// `shape`); each 1..=256.
    #[serde(rename = "box")]
    pub box_dims: Vec<u32>,
    #[serde(with = "swizzle_bytes")]
    pub swizzle: Swizzle,
    pub fill: OobFill,
}

impl fmt::Display for TensorMapDesc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "tensor map of `{}` (box {:?}, swizzle {})",
            self.param,
            self.box_dims,
            self.swizzle.bytes()
        )
    }
}

/// Whether TMA can move elements of `dtype` (it has no 1-byte bool type; fp8 and int8 move
/// as bytes; int4, not compiled yet, has no tensor maps: its boxes would count bytes).
pub fn tma_supports(dtype: DType) -> bool {
    !matches!(dtype, DType::Bool | DType::Int4)
}

/// The manifest-time checks of every tensor map: the target has TMA, the parameter exists
/// and has a TMA dtype, rank 1..=5, one box entry per dimension in 1..=256, and the inner
/// box row a whole number of 16-byte granules that fits the swizzle span.
pub(super) fn check(
    target: Target,
    params: &[Param],
    maps: &[TensorMapDesc],
) -> Result<(), String> {
    if !maps.is_empty() && !target.has_async_copy(AsyncCopy::BulkTensor) {
        return Err(format!(
            "`tensor_maps` needs a target with TMA (cp.async.bulk.tensor); {} has none",
            target.name()
        ));
    }
    for (i, m) in maps.iter().enumerate() {
        check_one(params, m).map_err(|msg| format!("tensor_maps[{i}] (`{}`): {msg}", m.param))?;
    }
    Ok(())
}

fn check_one(params: &[Param], m: &TensorMapDesc) -> Result<(), String> {
    let Some(p) = params.iter().find(|p| p.name == m.param) else {
        return Err("names no parameter in `params`".into());
    };
    if !tma_supports(p.dtype) {
        return Err(format!("TMA cannot move {} elements", p.dtype));
    }
    let rank = p.shape.len();
    if !(1..=MAX_TMA_RANK).contains(&rank) {
        return Err(format!(
            "the tensor has rank {rank}; TMA describes 1 to {MAX_TMA_RANK} dimensions"
        ));
    }
    if m.box_dims.len() != rank {
        return Err(format!(
            "box has {} entries but the tensor has rank {rank}",
            m.box_dims.len()
        ));
    }
    if let Some((i, b)) = m
        .box_dims
        .iter()
        .enumerate()
        .find(|(_, b)| !(1..=MAX_BOX).contains(*b))
    {
        return Err(format!("box[{i}] is {b}; each must lie in 1..={MAX_BOX}"));
    }
    let inner = m.box_dims.last().copied().unwrap_or(1);
    let row_bytes = u64::from(inner) * u64::from(p.dtype.bytes());
    if !row_bytes.is_multiple_of(TMA_GRANULE) {
        return Err(format!(
            "the inner box row is {inner} {} = {row_bytes} bytes; TMA needs a multiple of \
             {TMA_GRANULE} bytes",
            p.dtype
        ));
    }
    let span = m.swizzle.bytes().unsigned_abs();
    if span > 0 && row_bytes > span {
        return Err(format!(
            "the inner box row is {inner} {} = {row_bytes} bytes; a {span}-byte swizzle \
             allows at most {span} bytes ({} elements)",
            p.dtype,
            span / u64::from(p.dtype.bytes())
        ));
    }
    Ok(())
}
