//! Element types of buffers and scalars.

use std::fmt;
use std::str::FromStr;

/// Every element type the IR knows. The text spelling is the TVM one (`"float16"`, …);
/// `"float"` is accepted as an alias of `float32` and `"float8_e4m3fn"` (torch's and
/// TileLang's name of the same OCP E4M3FN format) of `float8_e4m3`; the `…fnuz` spellings
/// are not (they name other formats: no negative zero, another bias).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    Float16,
    BFloat16,
    Float32,
    Float64,
    Float8E4M3,
    Float8E5M2,
    /// Signed 4-bit integer (-8..=7), stored two to a byte, low nibble first: element 2k in
    /// bits 0-3 of byte k, element 2k + 1 in bits 4-7 (TileLang's and CUTLASS's packing).
    /// Global and shared buffers and gemm operands only (docs/ir.md, "int4").
    Int4,
    Int8,
    Int16,
    Int32,
    Int64,
    UInt8,
    UInt16,
    UInt32,
    Bool,
}

impl DType {
    pub const ALL: [DType; 15] = [
        DType::Float16,
        DType::BFloat16,
        DType::Float32,
        DType::Float64,
        DType::Float8E4M3,
        DType::Float8E5M2,
        DType::Int4,
        DType::Int8,
        DType::Int16,
        DType::Int32,
        DType::Int64,
        DType::UInt8,
        DType::UInt16,
        DType::UInt32,
        DType::Bool,
    ];

    /// The canonical text spelling.
    pub fn name(self) -> &'static str {
        match self {
            DType::Float16 => "float16",
            DType::BFloat16 => "bfloat16",
            DType::Float32 => "float32",
            DType::Float64 => "float64",
            DType::Float8E4M3 => "float8_e4m3",
            DType::Float8E5M2 => "float8_e5m2",
            DType::Int4 => "int4",
            DType::Int8 => "int8",
            DType::Int16 => "int16",
            DType::Int32 => "int32",
            DType::Int64 => "int64",
            DType::UInt8 => "uint8",
            DType::UInt16 => "uint16",
            DType::UInt32 => "uint32",
            DType::Bool => "bool",
        }
    }

    /// Parses a dtype spelling, aliases included.
    pub fn parse(text: &str) -> Option<DType> {
        match text {
            "float" => return Some(DType::Float32),
            // torch's / TileLang's name of the same OCP format (finite-only e4m3).
            "float8_e4m3fn" => return Some(DType::Float8E4M3),
            _ => {}
        }
        DType::ALL.iter().copied().find(|d| d.name() == text)
    }

    /// Storage size in bits (`bool` is stored as one byte, `int4` in half of one).
    pub fn bits(self) -> u32 {
        match self {
            DType::Int4 => 4,
            DType::Float8E4M3 | DType::Float8E5M2 | DType::Int8 | DType::UInt8 | DType::Bool => 8,
            DType::Float16 | DType::BFloat16 | DType::Int16 | DType::UInt16 => 16,
            DType::Float32 | DType::Int32 | DType::UInt32 => 32,
            DType::Float64 | DType::Int64 => 64,
        }
    }

    /// Bytes one element takes when it is stored alone: `int4`'s is 1 (the interpreter's
    /// element storage; in memory two share a byte, [`DType::packed_bytes`]). Passes and
    /// codegen never see an `int4` buffer's layout through this: the pipeline refuses `int4`
    /// before lowering (`tlc_passes`' entry, a located error).
    pub fn bytes(self) -> u32 {
        self.bits().div_ceil(8)
    }

    /// Bytes `n` elements take in memory, packed (`int4`: two to a byte, rounded up).
    pub fn packed_bytes(self, n: u64) -> u64 {
        (n.saturating_mul(u64::from(self.bits()))).div_ceil(8)
    }

    /// Whether elements are narrower than a byte (`int4`).
    pub fn is_sub_byte(self) -> bool {
        self.bits() < 8
    }

    pub fn is_float(self) -> bool {
        matches!(
            self,
            DType::Float16
                | DType::BFloat16
                | DType::Float32
                | DType::Float64
                | DType::Float8E4M3
                | DType::Float8E5M2
        )
    }

    /// The 8-bit floats (`float8_e4m3`, `float8_e5m2`).
    pub fn is_fp8(self) -> bool {
        matches!(self, DType::Float8E4M3 | DType::Float8E5M2)
    }

    pub fn is_int(self) -> bool {
        matches!(
            self,
            DType::Int4
                | DType::Int8
                | DType::Int16
                | DType::Int32
                | DType::Int64
                | DType::UInt8
                | DType::UInt16
                | DType::UInt32
        )
    }

    /// The smallest and largest value of this integer dtype (`None` for floats and bool).
    pub fn int_range(self) -> Option<(i64, i64)> {
        Some(match self {
            DType::Int4 => (-8, 7),
            DType::Int8 => (i8::MIN.into(), i8::MAX.into()),
            DType::Int16 => (i16::MIN.into(), i16::MAX.into()),
            DType::Int32 => (i32::MIN.into(), i32::MAX.into()),
            DType::Int64 => (i64::MIN, i64::MAX),
            DType::UInt8 => (0, u8::MAX.into()),
            DType::UInt16 => (0, u16::MAX.into()),
            DType::UInt32 => (0, u32::MAX.into()),
            _ => return None,
        })
    }

    /// Whether this is an unsigned integer dtype.
    pub fn is_unsigned(self) -> bool {
        matches!(self, DType::UInt8 | DType::UInt16 | DType::UInt32)
    }

    /// Whether integer `v` is a value of this integer dtype (false for non-integer dtypes).
    pub fn holds_int(self, v: i64) -> bool {
        match self {
            DType::Int4 => (-8..=7).contains(&v),
            DType::Int8 => i8::try_from(v).is_ok(),
            DType::Int16 => i16::try_from(v).is_ok(),
            DType::Int32 => i32::try_from(v).is_ok(),
            DType::Int64 => true,
            DType::UInt8 => u8::try_from(v).is_ok(),
            DType::UInt16 => u16::try_from(v).is_ok(),
            DType::UInt32 => u32::try_from(v).is_ok(),
            _ => false,
        }
    }

    pub fn is_bool(self) -> bool {
        self == DType::Bool
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DType {
    type Err = String;
    fn from_str(s: &str) -> Result<DType, String> {
        DType::parse(s).ok_or_else(|| format!("unknown dtype \"{s}\""))
    }
}
