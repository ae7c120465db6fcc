//! `Tensor`: a dense row-major array of one dtype — what goes into and comes out of a run,
//! and the storage of every buffer while it runs.

use crate::dtype::DType;
use crate::interp::scalar::{convert, Scalar};
use std::fmt;

/// Element storage. Floats of every format are kept as `f64` values that are exactly
/// representable in the tensor's dtype; integers of every width as `i64` values inside the
/// dtype's range; bools as `bool`. Every constructor enforces this.
#[derive(Clone, Debug)]
pub enum TensorData {
    Float(Vec<f64>),
    Int(Vec<i64>),
    Bool(Vec<bool>),
}

/// Equal values; every NaN equals every NaN (a run that gives NaN where another gives NaN
/// computed the same thing: the text form and the interpreter's conversions have one NaN).
impl PartialEq for TensorData {
    fn eq(&self, other: &TensorData) -> bool {
        match (self, other) {
            (TensorData::Float(a), TensorData::Float(b)) => {
                a.len() == b.len()
                    && a.iter()
                        .zip(b)
                        .all(|(x, y)| x == y || (x.is_nan() && y.is_nan()))
            }
            (TensorData::Int(a), TensorData::Int(b)) => a == b,
            (TensorData::Bool(a), TensorData::Bool(b)) => a == b,
            _ => false,
        }
    }
}

impl TensorData {
    /// `len` zeros of `dtype`.
    pub(crate) fn zeros(dtype: DType, len: usize) -> TensorData {
        if dtype.is_float() {
            TensorData::Float(vec![0.0; len])
        } else if dtype.is_int() {
            TensorData::Int(vec![0; len])
        } else {
            TensorData::Bool(vec![false; len])
        }
    }

    pub fn len(&self) -> usize {
        match self {
            TensorData::Float(v) => v.len(),
            TensorData::Int(v) => v.len(),
            TensorData::Bool(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element `i`, if in range.
    #[inline]
    pub fn get(&self, i: usize) -> Option<Scalar> {
        match self {
            TensorData::Float(v) => v.get(i).map(|&x| Scalar::Float(x)),
            TensorData::Int(v) => v.get(i).map(|&x| Scalar::Int(x)),
            TensorData::Bool(v) => v.get(i).map(|&x| Scalar::Bool(x)),
        }
    }

    /// Sets element `i` to `value`, which must already be of the storage's dtype (callers
    /// convert first); out-of-range indices are ignored (callers check bounds first).
    #[inline]
    pub(crate) fn set(&mut self, i: usize, value: Scalar) {
        match self {
            TensorData::Float(v) => {
                if let Some(slot) = v.get_mut(i) {
                    *slot = value.as_f64();
                }
            }
            TensorData::Int(v) => {
                if let Some(slot) = v.get_mut(i) {
                    *slot = value.as_i64();
                }
            }
            TensorData::Bool(v) => {
                if let Some(slot) = v.get_mut(i) {
                    *slot = value.as_bool();
                }
            }
        }
    }
}

/// A dense, row-major (C order) array.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    dtype: DType,
    shape: Vec<usize>,
    data: TensorData,
}

impl Tensor {
    /// A tensor of zeros; an error when the shape has more than `MAX_ELEMENTS` elements.
    pub fn zeros(dtype: DType, shape: &[usize]) -> Result<Tensor, String> {
        let len = checked_len(shape).ok_or_else(|| {
            format!(
                "shape {} has more than {MAX_ELEMENTS} elements",
                fmt_shape(shape)
            )
        })?;
        Ok(Tensor {
            dtype,
            shape: shape.to_vec(),
            data: TensorData::zeros(dtype, len),
        })
    }

    /// A tensor from scalar values in row-major order, each converted to `dtype` with the
    /// interpreter's conversion rule (`scalar::convert`: floats round to nearest even,
    /// integers wrap, float → int truncates and saturates).
    pub fn from_scalars(
        dtype: DType,
        shape: &[usize],
        values: impl IntoIterator<Item = Scalar>,
    ) -> Result<Tensor, String> {
        let mut t = Tensor::zeros(dtype, shape)?;
        let mut n = 0usize;
        for value in values {
            if n >= t.len() {
                return Err(format!("too many values for shape {}", fmt_shape(&t.shape)));
            }
            t.data.set(n, convert(value, dtype));
            n += 1;
        }
        if n != t.len() {
            return Err(format!(
                "{n} values given for shape {} ({} elements)",
                fmt_shape(&t.shape),
                t.len()
            ));
        }
        Ok(t)
    }

    /// A tensor from `f64` values in row-major order, rounded / converted to `dtype`.
    pub fn from_f64(dtype: DType, shape: &[usize], values: &[f64]) -> Result<Tensor, String> {
        Tensor::from_scalars(dtype, shape, values.iter().map(|&x| Scalar::Float(x)))
    }

    /// A tensor from `i64` values in row-major order, converted to `dtype`.
    pub fn from_i64(dtype: DType, shape: &[usize], values: &[i64]) -> Result<Tensor, String> {
        Tensor::from_scalars(dtype, shape, values.iter().map(|&x| Scalar::Int(x)))
    }

    /// A tensor of values already of `dtype` — decoded from their storage (a device
    /// download) — kept as they are: an e5m2 infinity stays infinite, where
    /// [`Tensor::from_scalars`] converts it (saturating). An error when `data` has the wrong
    /// kind or length for `dtype` and `shape`, or holds a value `dtype` cannot.
    pub fn from_stored(dtype: DType, shape: &[usize], data: TensorData) -> Result<Tensor, String> {
        let len = checked_len(shape).ok_or_else(|| {
            format!(
                "shape {} has more than {MAX_ELEMENTS} elements",
                fmt_shape(shape)
            )
        })?;
        if data.len() != len {
            return Err(format!(
                "{} values given for shape {}",
                data.len(),
                fmt_shape(shape)
            ));
        }
        let ok = match &data {
            TensorData::Float(v) => {
                dtype.is_float()
                    && v.iter().all(|&x| {
                        x.is_nan()
                            || crate::interp::scalar::round_float(dtype, x) == x
                            || (dtype == DType::Float8E5M2 && x.is_infinite())
                    })
            }
            TensorData::Int(v) => {
                dtype.is_int()
                    && v.iter()
                        .all(|&x| crate::interp::scalar::wrap_int(dtype, x) == x)
            }
            TensorData::Bool(_) => dtype.is_bool(),
        };
        if !ok {
            return Err(format!("the values are not all {dtype} values"));
        }
        Ok(Tensor::from_data(dtype, shape.to_vec(), data))
    }

    /// Builds a tensor from storage that already holds valid values of `dtype`.
    pub(crate) fn from_data(dtype: DType, shape: Vec<usize>, data: TensorData) -> Tensor {
        Tensor { dtype, shape, data }
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    pub fn data(&self) -> &TensorData {
        &self.data
    }

    /// The storage, without copying.
    pub(crate) fn into_data(self) -> TensorData {
        self.data
    }

    /// Element at flat (row-major) position `i`.
    pub fn get(&self, i: usize) -> Option<Scalar> {
        self.data.get(i)
    }

    /// Element at a multi-dimensional index.
    pub fn at(&self, index: &[usize]) -> Option<Scalar> {
        if index.len() != self.shape.len() {
            return None;
        }
        let mut flat = 0usize;
        for (&i, &n) in index.iter().zip(&self.shape) {
            if i >= n {
                return None;
            }
            flat = flat * n + i;
        }
        self.data.get(flat)
    }

    /// All values as `f64`, row-major (bools as 0 / 1).
    pub fn to_f64(&self) -> Vec<f64> {
        match &self.data {
            TensorData::Float(v) => v.clone(),
            TensorData::Int(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::Bool(v) => v.iter().map(|&b| f64::from(u8::from(b))).collect(),
        }
    }

    /// A short description like `float16 (128, 32)`, for messages.
    pub fn describe(&self) -> String {
        format!("{} {}", self.dtype, fmt_shape(&self.shape))
    }
}

impl fmt::Display for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

/// The most elements a tensor or buffer may have (2^28, 2 GiB of storage): a larger shape is an error rather
/// than an out-of-memory abort.
pub const MAX_ELEMENTS: usize = 1 << 28;

/// The number of elements of `shape`, if at most `MAX_ELEMENTS`.
pub fn checked_len(shape: &[usize]) -> Option<usize> {
    shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .filter(|&n| n <= MAX_ELEMENTS)
}

/// Python-style tuple text of a shape: `(128, 32)`, `(7,)`, `()`.
pub fn fmt_shape<T: fmt::Display>(shape: &[T]) -> String {
    match shape {
        [one] => format!("({one},)"),
        _ => {
            let parts: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
            format!("({})", parts.join(", "))
        }
    }
}
