//! `.npy` files in and out (through `npyz`).
//!
//! How each dtype is stored (always C order; little endian):
//!
//! | tlc dtype | `.npy` dtype | numpy |
//! |---|---|---|
//! | `float16` | `<f2` | `float16` |
//! | `bfloat16` | `<u2` | `uint16` holding the raw bfloat16 bits (`torch.bfloat16` viewed as `int16`/`uint16`; widen with `(a.astype(np.uint32) << 16).view(np.float32)`) |
//! | `float32` | `<f4` | `float32` |
//! | `float64` | `<f8` | `float64` |
//! | `float8_e4m3` | `\|u1` | `uint8` holding the raw OCP E4M3FN bits (`ml_dtypes.float8_e4m3fn` viewed as `uint8`) |
//! | `float8_e5m2` | `\|u1` | `uint8` holding the raw OCP E5M2 bits (`ml_dtypes.float8_e5m2` viewed as `uint8`) |
//! | `int8` / `int32` / `int64` | `\|i1` / `<i4` / `<i8` | `int8` / `int32` / `int64` |
//! | `uint8` / `uint32` | `\|u1` / `<u4` | `uint8` / `uint32` |
//! | `bool` | `\|b1` | `bool` |
//! | `int4` | `\|i1` | `int8`, packed: a tensor of shape `(…, n)` (n even) is the bytes of shape `(…, n / 2)`, element `2k` of a row in bits 0-3 of byte `k`, `2k + 1` in bits 4-7 (TileLang's `pack_int4`: `(hi << 4) \| (lo & 15)`) |
//!
//! Reading accepts exactly the `.npy` dtype of the expected tlc dtype (no silent casts);
//! Fortran-order files are accepted and reordered to C order.

use crate::dtype::DType;
use crate::interp::fp8;
use crate::interp::ops::gemm::nibble;
use crate::interp::scalar::Scalar;
use crate::interp::tensor::{checked_len, fmt_shape, Tensor, TensorData, MAX_ELEMENTS};
use half::{bf16, f16};
use npyz::{NpyFile, Order, TypeStr, WriterBuilder};
use std::collections::HashMap;
use std::path::Path;

/// The `.npy` dtype string that stores `dtype`.
pub fn npy_descr(dtype: DType) -> &'static str {
    match dtype {
        DType::Float16 => "<f2",
        DType::BFloat16 => "<u2",
        DType::Float32 => "<f4",
        DType::Float64 => "<f8",
        DType::Float8E4M3 | DType::Float8E5M2 | DType::UInt8 => "|u1",
        DType::Int4 | DType::Int8 => "|i1",
        DType::Int16 => "<i2",
        DType::UInt16 => "<u2",
        DType::Int32 => "<i4",
        DType::Int64 => "<i8",
        DType::UInt32 => "<u4",
        DType::Bool => "|b1",
    }
}

/// The largest `.npy` header read (numpy's own readers refuse headers past 10 000 bytes
/// by default): a corrupt length field must not make the reader allocate gigabytes.
pub const MAX_HEADER_BYTES: usize = 1 << 16;

/// Reads a `.npy` file that must hold an array of `expected`. The header is read and
/// checked first; then exactly the bytes its shape and dtype need (at most
/// [`MAX_ELEMENTS`] elements) are read, so neither a corrupt header nor a huge or endless
/// file makes the reader allocate or read more than the array.
pub fn read_npy_file(path: &Path, expected: DType) -> Result<Tensor, String> {
    use std::io::Read as _;
    let at = |e: String| format!("`{}`: {e}", path.display());
    let cannot = |e: std::io::Error| format!("cannot read `{}`: {e}", path.display());
    let mut file = std::fs::File::open(path).map_err(cannot)?;
    let mut bytes = Vec::new();
    // The fixed preamble, then the header it announces, then the data the header sizes.
    (&mut file)
        .take(PREAMBLE_V2 as u64)
        .read_to_end(&mut bytes)
        .map_err(cannot)?;
    let header_end = header_end(&bytes).map_err(at)?;
    let more = header_end.saturating_sub(bytes.len());
    (&mut file)
        .take(more as u64)
        .read_to_end(&mut bytes)
        .map_err(cannot)?;
    let (_, data_bytes) = header(&bytes, expected).map_err(at)?;
    let want = header_end + data_bytes;
    (&mut file)
        .take((want + 1).saturating_sub(bytes.len()) as u64)
        .read_to_end(&mut bytes)
        .map_err(cannot)?;
    read_npy(&bytes, expected).map_err(at)
}

/// `\x93NUMPY`, the version (2 bytes) and the header length: 2 bytes in version 1.0, 4 in
/// 2.0 and 3.0.
const PREAMBLE_V1: usize = 10;
const PREAMBLE_V2: usize = 12;

/// Where the header of a `.npy` file ends (where its data starts), from its preamble;
/// an error for a file that is not `.npy` or whose header is over [`MAX_HEADER_BYTES`].
fn header_end(bytes: &[u8]) -> Result<usize, String> {
    let bad = || "not a valid .npy file: no `\\x93NUMPY` preamble".to_string();
    if bytes.len() < PREAMBLE_V1 || !bytes.starts_with(b"\x93NUMPY") {
        return Err(bad());
    }
    let (len, preamble) = match bytes[6] {
        1 => (
            usize::from(u16::from_le_bytes([bytes[8], bytes[9]])),
            PREAMBLE_V1,
        ),
        2 | 3 if bytes.len() >= PREAMBLE_V2 => {
            let len = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
            (usize::try_from(len).unwrap_or(usize::MAX), PREAMBLE_V2)
        }
        v => return Err(format!("not a valid .npy file: unknown format version {v}")),
    };
    if len > MAX_HEADER_BYTES {
        return Err(format!(
            "the .npy header is {len} bytes, more than the {MAX_HEADER_BYTES} tlc reads"
        ));
    }
    Ok(preamble + len)
}

/// The shape of a `.npy` array of `expected` and its data's size in bytes, from the header:
/// the dtype must be `expected`'s and the array at most [`MAX_ELEMENTS`] elements.
fn header(bytes: &[u8], expected: DType) -> Result<(Vec<usize>, usize), String> {
    let end = header_end(bytes)?;
    let head = bytes.get(..end).ok_or("the .npy header is cut short")?;
    let npy = NpyFile::new(head).map_err(|e| format!("not a valid .npy file: {e}"))?;
    let want = npy_descr(expected);
    let found = match npy.dtype() {
        npyz::DType::Plain(ts) => ts.to_string(),
        other => other.descr(),
    };
    if found != want {
        return Err(format!(
            "expected dtype `{want}` ({expected}), found `{found}`"
        ));
    }
    let shape = npy
        .shape()
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| format!("dimension {d} is too large")))
        .collect::<Result<Vec<usize>, String>>()?;
    let len = checked_len(&shape).ok_or_else(|| {
        format!(
            "the header's shape {} has more than the {MAX_ELEMENTS} elements tlc reads",
            fmt_shape(&shape)
        )
    })?;
    // `expected.bytes()` is at most 8, and `len` at most 2^28: the product fits.
    Ok((shape, len * expected.bytes() as usize))
}

/// Reads `.npy` bytes that must hold an array of `expected` (see the module doc for the
/// storage of each dtype). Errors name what was expected and what was found. The data's
/// size is checked against the header's shape before anything is allocated for it.
pub fn read_npy(bytes: &[u8], expected: DType) -> Result<Tensor, String> {
    if expected == DType::Int4 {
        return read_npy(bytes, DType::Int8).map(|t| unpack_int4(&t));
    }
    let (shape, data_bytes) = header(bytes, expected)?;
    let held = bytes.len().saturating_sub(header_end(bytes)?);
    if held != data_bytes {
        let more = if held > data_bytes { " or more" } else { "" };
        return Err(format!(
            "the header says shape {} ({data_bytes} bytes of data) but the file holds {held} bytes{more}",
            fmt_shape(&shape)
        ));
    }
    let npy = NpyFile::new(bytes).map_err(|e| format!("not a valid .npy file: {e}"))?;
    let fortran = npy.order() == Order::Fortran;
    let bad = |e: std::io::Error| format!("cannot read the array data: {e}");
    let data = match expected {
        DType::Float16 => floats(npy.into_vec::<f16>().map_err(bad)?, f16::to_f64),
        DType::BFloat16 => floats(npy.into_vec::<u16>().map_err(bad)?, |b| {
            bf16::from_bits(b).to_f64()
        }),
        DType::Float32 => floats(npy.into_vec::<f32>().map_err(bad)?, f64::from),
        DType::Float64 => floats(npy.into_vec::<f64>().map_err(bad)?, |x| x),
        DType::Float8E4M3 => floats(npy.into_vec::<u8>().map_err(bad)?, |b| {
            fp8::decode(fp8::E4M3, b)
        }),
        DType::Float8E5M2 => floats(npy.into_vec::<u8>().map_err(bad)?, |b| {
            fp8::decode(fp8::E5M2, b)
        }),
        DType::Int8 => ints(npy.into_vec::<i8>().map_err(bad)?),
        // Read as int8 and unpacked above.
        DType::Int4 => return Err("int4 is read through int8".to_string()),
        DType::Int16 => ints(npy.into_vec::<i16>().map_err(bad)?),
        DType::UInt16 => ints(npy.into_vec::<u16>().map_err(bad)?),
        DType::Int32 => ints(npy.into_vec::<i32>().map_err(bad)?),
        DType::Int64 => ints(npy.into_vec::<i64>().map_err(bad)?),
        DType::UInt8 => ints(npy.into_vec::<u8>().map_err(bad)?),
        DType::UInt32 => ints(npy.into_vec::<u32>().map_err(bad)?),
        DType::Bool => TensorData::Bool(npy.into_vec::<bool>().map_err(bad)?),
    };
    let data = if fortran {
        reorder_fortran(data, &shape)
    } else {
        data
    };
    Ok(Tensor::from_data(expected, shape, data))
}

fn floats<T>(v: Vec<T>, f: impl Fn(T) -> f64) -> TensorData {
    TensorData::Float(v.into_iter().map(f).collect())
}

fn ints<T: Into<i64>>(v: Vec<T>) -> TensorData {
    TensorData::Int(v.into_iter().map(Into::into).collect())
}

/// Column-major data → row-major.
fn reorder_fortran(data: TensorData, shape: &[usize]) -> TensorData {
    fn go<T: Copy>(v: &[T], shape: &[usize]) -> Vec<T> {
        // Column-major stride of each dimension.
        let mut fstride = vec![1usize; shape.len()];
        for d in 1..shape.len() {
            fstride[d] = fstride[d - 1] * shape[d - 1];
        }
        let mut out = Vec::with_capacity(v.len());
        let mut index = vec![0usize; shape.len()];
        for _ in 0..v.len() {
            let f: usize = index.iter().zip(&fstride).map(|(i, s)| i * s).sum();
            if let Some(&x) = v.get(f) {
                out.push(x);
            }
            // Row-major odometer step.
            for d in (0..shape.len()).rev() {
                index[d] += 1;
                if index[d] < shape[d] {
                    break;
                }
                index[d] = 0;
            }
        }
        out
    }
    match data {
        TensorData::Float(v) => TensorData::Float(go(&v, shape)),
        TensorData::Int(v) => TensorData::Int(go(&v, shape)),
        TensorData::Bool(v) => TensorData::Bool(go(&v, shape)),
    }
}

/// Writes `tensor` as a `.npy` file.
pub fn write_npy_file(path: &Path, tensor: &Tensor) -> Result<(), String> {
    let bytes = write_npy(tensor)?;
    std::fs::write(path, bytes).map_err(|e| format!("cannot write `{}`: {e}", path.display()))
}

/// The `.npy` bytes of `tensor` (see the module doc for the storage of each dtype).
pub fn write_npy(tensor: &Tensor) -> Result<Vec<u8>, String> {
    let dtype = tensor.dtype();
    if dtype == DType::Int4 {
        return write_npy(&pack_int4(tensor)?);
    }
    let f = || match tensor.data() {
        TensorData::Float(v) => v.as_slice(),
        _ => &[],
    };
    let i = || match tensor.data() {
        TensorData::Int(v) => v.as_slice(),
        _ => &[],
    };
    let e = |e: std::io::Error| format!("cannot write .npy data: {e}");
    let shape: Vec<u64> = tensor.shape().iter().map(|&d| d as u64).collect();
    let descr = npy_descr(dtype);
    match dtype {
        DType::Float16 => write_rows(descr, &shape, f().iter().map(|&x| f16::from_f64(x))),
        DType::BFloat16 => write_rows(
            descr,
            &shape,
            f().iter().map(|&x| bf16::from_f64(x).to_bits()),
        ),
        DType::Float32 => write_rows(descr, &shape, f().iter().map(|&x| x as f32)),
        DType::Float64 => write_rows(descr, &shape, f().iter().copied()),
        DType::Float8E4M3 => {
            write_rows(descr, &shape, f().iter().map(|&x| fp8::bits(fp8::E4M3, x)))
        }
        DType::Float8E5M2 => {
            write_rows(descr, &shape, f().iter().map(|&x| fp8::bits(fp8::E5M2, x)))
        }
        // Stored integers are already inside their dtype's range, so `as` is exact.
        DType::Int8 => write_rows(descr, &shape, i().iter().map(|&x| x as i8)),
        // Packed into int8 above.
        DType::Int4 => return Err("int4 is written through int8".to_string()),
        DType::Int16 => write_rows(descr, &shape, i().iter().map(|&x| x as i16)),
        DType::UInt16 => write_rows(descr, &shape, i().iter().map(|&x| x as u16)),
        DType::Int32 => write_rows(descr, &shape, i().iter().map(|&x| x as i32)),
        DType::Int64 => write_rows(descr, &shape, i().iter().copied()),
        DType::UInt8 => write_rows(descr, &shape, i().iter().map(|&x| x as u8)),
        DType::UInt32 => write_rows(descr, &shape, i().iter().map(|&x| x as u32)),
        DType::Bool => {
            let b: &[bool] = match tensor.data() {
                TensorData::Bool(v) => v,
                _ => &[],
            };
            write_rows(descr, &shape, b.iter().copied())
        }
    }
    .map_err(e)
}

fn write_rows<T: npyz::Serialize>(
    descr: &str,
    shape: &[u64],
    rows: impl IntoIterator<Item = T>,
) -> std::io::Result<Vec<u8>> {
    let type_str: TypeStr = descr
        .parse()
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("{e}")))?;
    let mut out = Vec::new();
    let mut writer = npyz::WriteOptions::new()
        .dtype(npyz::DType::Plain(type_str))
        .shape(shape)
        .writer(&mut out)
        .begin_nd()?;
    writer.extend(rows)?;
    writer.finish()?;
    Ok(out)
}

/// An int4 tensor of shape `(…, n)` as the int8 tensor of its packed bytes, shape
/// `(…, n / 2)`: element `2k` of a row in bits 0-3 of byte `k`, `2k + 1` in bits 4-7 (the
/// device's layout). An odd innermost extent (or a scalar) is refused: a row would end
/// inside a byte.
pub fn pack_int4(t: &Tensor) -> Result<Tensor, String> {
    let shape = t.shape();
    let Some((&n, outer)) = shape.split_last() else {
        return Err("an int4 tensor needs at least one dimension".to_string());
    };
    if n % 2 != 0 {
        return Err(format!(
            "an int4 tensor of shape {} has an odd innermost extent: its rows do not fill whole bytes",
            fmt_shape(shape)
        ));
    }
    let vals: &[i64] = match t.data() {
        TensorData::Int(v) => v,
        _ => &[],
    };
    let bytes: Vec<i64> = vals
        .chunks_exact(2)
        .map(|p| i64::from(((p[1] << 4) | (p[0] & 15)) as u8 as i8))
        .collect();
    let mut packed = outer.to_vec();
    packed.push(n / 2);
    Tensor::from_i64(DType::Int8, &packed, &bytes)
}

/// `tensors` (named by parameter) as the parameters of a compiled function take them
/// (`dtype_of` gives a parameter's dtype there): an int4 tensor whose parameter is int8 —
/// an int4 parameter `pack-int4` turned into its bytes — becomes its packed bytes
/// ([`pack_int4`]); every other tensor stays as it is. What runs a compiled kernel on the
/// tensors of its source (`tlc run --device`, the pipeline differentials) passes through
/// here.
pub fn packed_for(
    dtype_of: &dyn Fn(&str) -> Option<DType>,
    tensors: HashMap<String, Tensor>,
) -> Result<HashMap<String, Tensor>, String> {
    tensors
        .into_iter()
        .map(|(name, t)| {
            if t.dtype() == DType::Int4 && dtype_of(&name) == Some(DType::Int8) {
                let packed = pack_int4(&t).map_err(|e| format!("`{name}`: {e}"))?;
                return Ok((name, packed));
            }
            Ok((name, t))
        })
        .collect()
}

/// [`packed_for`]'s inverse: an int8 tensor whose parameter of the source (`dtype_of`) is
/// int4 becomes the int4 tensor of its bytes ([`unpack_int4`]).
pub fn unpacked_for(
    dtype_of: &dyn Fn(&str) -> Option<DType>,
    tensors: HashMap<String, Tensor>,
) -> HashMap<String, Tensor> {
    tensors
        .into_iter()
        .map(|(name, t)| {
            if t.dtype() == DType::Int8 && dtype_of(&name) == Some(DType::Int4) {
                let unpacked = unpack_int4(&t);
                return (name, unpacked);
            }
            (name, t)
        })
        .collect()
}

/// The int4 tensor whose packed bytes are int8 tensor `t` ([`pack_int4`]'s inverse; shape
/// `(…, n)` → `(…, 2n)`).
pub fn unpack_int4(t: &Tensor) -> Tensor {
    let vals: &[i64] = match t.data() {
        TensorData::Int(v) => v,
        _ => &[],
    };
    let data: Vec<i64> = vals
        .iter()
        .flat_map(|&b| (0..2).map(move |h| nibble(Scalar::Int(b), h).as_i64()))
        .collect();
    let mut shape = t.shape().to_vec();
    if let Some(last) = shape.last_mut() {
        *last *= 2;
    } else {
        shape.push(2);
    }
    Tensor::from_data(DType::Int4, shape, TensorData::Int(data))
}

#[cfg(test)]
mod int4_tests {
    use super::*;

    #[test]
    fn int4_packs_low_nibble_first_and_round_trips() {
        let t = Tensor::from_i64(DType::Int4, &[2, 4], &[1, -2, 7, -8, 0, -1, 3, 5]).unwrap();
        let p = pack_int4(&t).unwrap();
        assert_eq!(p.shape(), &[2, 2]);
        // 1 | (-2 << 4) = 0xe1, 7 | (-8 << 4) = 0x87, 0 | (-1 << 4) = 0xf0, 3 | 5 << 4 = 0x53.
        assert_eq!(
            p.data(),
            &TensorData::Int(vec![0xe1u8 as i8 as i64, 0x87u8 as i8 as i64, -16, 0x53])
        );
        let back = read_npy(&write_npy(&t).unwrap(), DType::Int4).unwrap();
        assert_eq!(back.shape(), &[2, 4]);
        assert_eq!(back.data(), t.data());
        let odd = Tensor::from_i64(DType::Int4, &[3], &[1, 2, 3]).unwrap();
        assert!(pack_int4(&odd)
            .unwrap_err()
            .contains("odd innermost extent"));
    }
}
