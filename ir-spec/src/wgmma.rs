//! Hopper's shared-memory operand layouts, described once: the swizzle modes that TMA
//! writes with and wgmma reads with, the canonical layouts of a wgmma matrix descriptor
//! (CUTLASS's `make_gmma_desc`) and the descriptor's bit packing.
//!
//! The interpreter reads `T.wgmma`'s operands and writes `T.tma_load`'s box through these
//! functions; code generation packs the descriptors with [`SmemOperand::descriptor`]; the
//! verifier's alignment rules use [`Swizzle::tma_alignment`]. A layout fact lives here and
//! nowhere else, so TMA's writer and wgmma's reader cannot drift apart (the tests below
//! check that they agree).

use crate::dtype::DType;

/// The k of one `wgmma.mma_async` for shared operands of `dtype` (PTX ISA, "Matrix
/// shape"): 16 for float16 / bfloat16 (`m64nNk16`), 32 for float8_e4m3 / float8_e5m2
/// (`m64nNk32`, the two fp8 types may mix) and for int8 (`m64nNk32.s32.s8.s8`); `None` for
/// a dtype tlc does not give wgmma.
pub const fn instruction_k(dtype: DType) -> Option<i64> {
    match dtype {
        DType::Float16 | DType::BFloat16 => Some(16),
        DType::Float8E4M3 | DType::Float8E5M2 | DType::Int8 => Some(32),
        _ => None,
    }
}

/// Whether wgmma reads operands of `dtype` only K-major: its transpose flags
/// (`imm-trans-a` / `imm-trans-b`, MN-major operands) exist for float16 / bfloat16 only,
/// so an fp8 or int8 A must be stored (M, K) and B (N, K) (`transpose_B=True`).
pub const fn k_major_only(dtype: DType) -> bool {
    matches!(dtype, DType::Float8E4M3 | DType::Float8E5M2 | DType::Int8)
}

/// The accumulator dtype wgmma has for `operand` inputs: int32 for int8 (`.s32`, sums
/// wrap modulo 2^32 as the hardware's do without `.satfinite`), float32 for the rest.
pub const fn accumulator_dtype(operand: DType) -> DType {
    match operand {
        DType::Int8 => DType::Int32,
        _ => DType::Float32,
    }
}

/// The rule on a wgmma accumulator `(name, dtype)` for `operand` inputs
/// ([`accumulator_dtype`]).
pub fn accumulator_rule(acc: (&str, DType), operand: DType) -> Result<(), String> {
    let want = accumulator_dtype(operand);
    if acc.1 == want {
        Ok(())
    } else {
        Err(format!(
            "the accumulator `{}` of a wgmma on {operand} inputs must be {want}, not {}",
            acc.0, acc.1
        ))
    }
}

/// `T.wgmma`'s rule on its operands `(name, dtype)` and major flags: A and B have one dtype,
/// or are both fp8 (`.e4m3` and `.e5m2` mix: `wgmma.mma_async…f32.e4m3.e5m2`); an fp8
/// operand is read K-major ([`k_major_only`]), so its transpose flag is false.
pub fn operand_rule(
    a: (&str, DType),
    b: (&str, DType),
    trans_a: bool,
    trans_b: bool,
) -> Result<(), String> {
    if a.1 != b.1 && !(a.1.is_fp8() && b.1.is_fp8()) {
        return Err(format!(
            "the A operand and the B operand of `T.wgmma` must have one dtype (fp8 may mix \
             e4m3 and e5m2): `{}` is {}, `{}` is {}",
            a.0, a.1, b.0, b.1
        ));
    }
    for ((name, dtype), trans, flag) in [(a, trans_a, "trans_a"), (b, trans_b, "trans_b")] {
        if trans && k_major_only(dtype) {
            return Err(format!(
                "`T.wgmma` reads {dtype} operands K-major only: `{name}` cannot take \
                 `{flag}=True` (wgmma's transpose exists for float16 / bfloat16)"
            ));
        }
    }
    Ok(())
}

/// How an operand's elements are ordered in shared memory: K-major (consecutive `k` are
/// adjacent, PTX's default) or MN-major (consecutive `m` / `n` are adjacent, PTX
/// `tnspA` / `tnspB`, `T.wgmma(trans_a=True)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Major {
    K,
    MN,
}

impl Major {
    /// The major of `T.wgmma`'s `trans_a` / `trans_b` flag.
    pub fn from_trans(trans: bool) -> Major {
        if trans {
            Major::MN
        } else {
            Major::K
        }
    }
}

/// A shared-memory swizzle: the 16-byte chunks of each span-wide row are permuted by
/// XOR with the row's index within a group of eight 128-byte lines ([`swizzle_address`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Swizzle {
    None,
    B32,
    B64,
    B128,
}

impl Swizzle {
    /// The span in bytes (0 for none): the value of `swizzle=` in the IR.
    pub fn bytes(self) -> i64 {
        match self {
            Swizzle::None => 0,
            Swizzle::B32 => 32,
            Swizzle::B64 => 64,
            Swizzle::B128 => 128,
        }
    }

    /// The swizzle of span `bytes` (0: none); `None` for any other width.
    pub fn from_bytes(bytes: i64) -> Option<Swizzle> {
        match bytes {
            0 => Some(Swizzle::None),
            32 => Some(Swizzle::B32),
            64 => Some(Swizzle::B64),
            128 => Some(Swizzle::B128),
            _ => None,
        }
    }

    /// The layout-type field of a wgmma descriptor (bits 63–62): 0 none, 1 = 128B,
    /// 2 = 64B, 3 = 32B.
    pub fn descriptor_code(self) -> u64 {
        match self {
            Swizzle::None => 0,
            Swizzle::B128 => 1,
            Swizzle::B64 => 2,
            Swizzle::B32 => 3,
        }
    }

    /// The tensor map's `CUtensorMapSwizzle` value: 0 none, 1 = 32B, 2 = 64B, 3 = 128B.
    pub fn tma_code(self) -> u32 {
        match self {
            Swizzle::None => 0,
            Swizzle::B32 => 1,
            Swizzle::B64 => 2,
            Swizzle::B128 => 3,
        }
    }

    /// The byte alignment a TMA destination needs: 128, or with a swizzle the whole
    /// pattern of eight spans (256, 512, 1024), so that the pattern starts at its row 0.
    pub fn tma_alignment(self) -> i64 {
        match self {
            Swizzle::None => 128,
            s => 8 * s.bytes(),
        }
    }
}

/// The physical shared-memory byte address of logical address `addr` under `swizzle`:
/// bits 4.. of the 16-byte chunk XORed with bits 7.. (the 128-byte line), as many bits as
/// the span has chunks beyond the first (128B: 3, 64B: 2, 32B: 1). It acts on the absolute
/// address, which is why TMA destinations are aligned ([`Swizzle::tma_alignment`]).
pub fn swizzle_address(addr: u64, swizzle: Swizzle) -> u64 {
    let mask = match swizzle {
        Swizzle::None => return addr,
        Swizzle::B32 => 1,
        Swizzle::B64 => 3,
        Swizzle::B128 => 7,
    };
    addr ^ (((addr >> 7) & mask) << 4)
}

/// The layout of one wgmma shared-memory operand as its descriptor gives it: the major, the
/// swizzle, and the leading / stride byte offsets (multiples of 16).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SmemOperand {
    pub major: Major,
    pub swizzle: Swizzle,
    /// Leading dimension byte offset.
    pub lbo: i64,
    /// Stride dimension byte offset.
    pub sbo: i64,
}

impl SmemOperand {
    /// The byte offset from the descriptor's start address, before swizzling, of element
    /// (`mn`, `k`) of the operand (for A `mn` is the row m in 0..64, for B the column n in
    /// 0..N; `k` in 0..16), for elements of `elem_bytes` bytes (2 for f16 / bf16). The
    /// canonical layouts of CUTLASS's `make_gmma_desc`, with `T = 16 / elem_bytes` elements
    /// per 16-byte chunk:
    ///
    /// - K-major, no swizzle: 8 × T core matrices of 8 rows of 16 bytes;
    ///   `(mn % 8)·16 + (mn / 8)·SBO + (k / T)·LBO + (k % T)·esz`.
    /// - K-major, swizzle span S: rows of S bytes, 8 rows a pattern;
    ///   `(mn % 8)·S + (mn / 8)·SBO + k·esz` (LBO unused: k stays inside the span).
    /// - MN-major, no swizzle: `(mn % T)·esz + (mn / T)·SBO + (k % 8)·16 + (k / 8)·LBO`.
    /// - MN-major, swizzle span S, `W = S / esz`: `(mn % W)·esz + (mn / W)·LBO + (k % 8)·S
    ///   + (k / 8)·SBO`.
    pub fn offset(&self, elem_bytes: i64, mn: i64, k: i64) -> i64 {
        let esz = elem_bytes.max(1);
        let t = (16 / esz).max(1);
        let (lbo, sbo) = (self.lbo, self.sbo);
        match (self.major, self.swizzle) {
            (Major::K, Swizzle::None) => {
                (mn % 8) * 16 + (mn / 8) * sbo + (k / t) * lbo + (k % t) * esz
            }
            (Major::K, s) => (mn % 8) * s.bytes() + (mn / 8) * sbo + k * esz,
            (Major::MN, Swizzle::None) => {
                (mn % t) * esz + (mn / t) * sbo + (k % 8) * 16 + (k / 8) * lbo
            }
            (Major::MN, s) => {
                let w = (s.bytes() / esz).max(1);
                (mn % w) * esz + (mn / w) * lbo + (k % 8) * s.bytes() + (k / 8) * sbo
            }
        }
    }

    /// The physical byte address of element (`mn`, `k`) for a descriptor starting at
    /// `start`: [`swizzle_address`] of `start +` [`SmemOperand::offset`]. `None` when it
    /// would fall below address 0 or overflow.
    pub fn address(&self, start: u64, elem_bytes: i64, mn: i64, k: i64) -> Option<u64> {
        let offset = u64::try_from(self.offset(elem_bytes, mn, k)).ok()?;
        Some(swizzle_address(start.checked_add(offset)?, self.swizzle))
    }

    /// The 64-bit wgmma matrix descriptor for a start address `start_addr` (a shared-window
    /// byte address): bits 13–0 `start >> 4`, 29–16 `LBO >> 4`, 45–32 `SBO >> 4`, 51–49
    /// the base offset (0: swizzled operands start pattern-aligned), 63–62 the swizzle
    /// ([`Swizzle::descriptor_code`]). Each field keeps its low 14 bits.
    pub fn descriptor(&self, start_addr: u32) -> u64 {
        let field = |v: u64| (v >> 4) & 0x3fff;
        // lbo / sbo are verified to lie in 0..2^18; a negative one keeps its low bits only.
        let lbo = field(self.lbo as u64);
        let sbo = field(self.sbo as u64);
        field(u64::from(start_addr))
            | (lbo << 16)
            | (sbo << 32)
            | (self.swizzle.descriptor_code() << 62)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const F16: i64 = 2;

    fn op(major: Major, swizzle: Swizzle, lbo: i64, sbo: i64) -> SmemOperand {
        SmemOperand {
            major,
            swizzle,
            lbo,
            sbo,
        }
    }

    /// The instruction's k and the K-major rule per operand dtype (PTX ISA's shapes).
    #[test]
    fn instruction_k_and_majors_per_dtype() {
        assert_eq!(instruction_k(DType::Float16), Some(16));
        assert_eq!(instruction_k(DType::BFloat16), Some(16));
        assert_eq!(instruction_k(DType::Float8E4M3), Some(32));
        assert_eq!(instruction_k(DType::Float8E5M2), Some(32));
        assert_eq!(instruction_k(DType::Int8), Some(32));
        assert_eq!(instruction_k(DType::Int32), None);
        assert!(k_major_only(DType::Int8));
        assert_eq!(accumulator_dtype(DType::Int8), DType::Int32);
        assert!(operand_rule(("a", DType::Int8), ("b", DType::Float8E4M3), false, false).is_err());
        assert!(accumulator_rule(("c", DType::Float32), DType::Int8).is_err());
        assert!(k_major_only(DType::Float8E5M2));
        assert!(!k_major_only(DType::BFloat16));
    }

    /// Each canonical layout at hand-computed points (f16: T = 8 elements per chunk).
    #[test]
    fn offsets_of_the_canonical_layouts() {
        // K-major, interleaved core matrices: row 9 is row 1 of the second 8-row group,
        // k = 10 is element 2 of the second chunk.
        let k_none = op(Major::K, Swizzle::None, 128, 256);
        assert_eq!(k_none.offset(F16, 0, 0), 0);
        assert_eq!(k_none.offset(F16, 1, 0), 16);
        assert_eq!(k_none.offset(F16, 0, 7), 14);
        assert_eq!(k_none.offset(F16, 0, 8), 128);
        assert_eq!(k_none.offset(F16, 9, 10), 16 + 256 + 128 + 4);
        // K-major, 128B swizzle: 128-byte rows, 8-row groups SBO apart.
        let k_128 = op(Major::K, Swizzle::B128, 0, 1024);
        assert_eq!(k_128.offset(F16, 9, 10), 128 + 1024 + 20);
        assert_eq!(k_128.offset(F16, 63, 15), 7 * 128 + 7 * 1024 + 30);
        // K-major, 64B and 32B spans.
        assert_eq!(
            op(Major::K, Swizzle::B64, 0, 512).offset(F16, 9, 3),
            64 + 512 + 6
        );
        assert_eq!(
            op(Major::K, Swizzle::B32, 0, 256).offset(F16, 10, 3),
            64 + 256 + 6
        );
        // MN-major, no swizzle: 8 consecutive mn per chunk, 8 k rows of 16 bytes.
        let mn_none = op(Major::MN, Swizzle::None, 256, 128);
        assert_eq!(mn_none.offset(F16, 1, 0), 2);
        assert_eq!(mn_none.offset(F16, 0, 1), 16);
        assert_eq!(mn_none.offset(F16, 9, 10), 2 + 128 + 32 + 256);
        // MN-major, 128B swizzle: 64 mn per 128-byte row, panels LBO apart.
        let mn_128 = op(Major::MN, Swizzle::B128, 8192, 1024);
        assert_eq!(mn_128.offset(F16, 70, 10), 12 + 8192 + 256 + 1024);
        assert_eq!(mn_128.offset(F16, 63, 7), 126 + 7 * 128);
        // MN-major, 64B swizzle: 32 mn per row.
        let mn_64 = op(Major::MN, Swizzle::B64, 4096, 512);
        assert_eq!(mn_64.offset(F16, 33, 9), 2 + 4096 + 64 + 512);
    }

    #[test]
    fn swizzle_codes_and_addresses() {
        for s in [Swizzle::None, Swizzle::B32, Swizzle::B64, Swizzle::B128] {
            assert_eq!(Swizzle::from_bytes(s.bytes()), Some(s));
        }
        assert_eq!(Swizzle::from_bytes(16), None);
        assert_eq!(Swizzle::B128.descriptor_code(), 1);
        assert_eq!(Swizzle::B32.descriptor_code(), 3);
        assert_eq!(Swizzle::B128.tma_code(), 3);
        assert_eq!(Swizzle::B128.tma_alignment(), 1024);
        assert_eq!(Swizzle::B32.tma_alignment(), 256);
        assert_eq!(Swizzle::None.tma_alignment(), 128);
        // Line 3 of a 1024-byte pattern: chunk 0 goes to chunk 3.
        assert_eq!(swizzle_address(3 * 128, Swizzle::B128), 3 * 128 + 48);
        assert_eq!(swizzle_address(3 * 128 + 16, Swizzle::B128), 3 * 128 + 32);
        assert_eq!(swizzle_address(3 * 128 + 5, Swizzle::B64), 3 * 128 + 48 + 5);
        assert_eq!(swizzle_address(3 * 128, Swizzle::B32), 3 * 128 + 16);
        assert_eq!(swizzle_address(3 * 128 + 16, Swizzle::None), 3 * 128 + 16);
        // A swizzle permutes the chunks of each pattern.
        for s in [Swizzle::B32, Swizzle::B64, Swizzle::B128] {
            let mut seen: Vec<u64> = (0..2048).map(|a| swizzle_address(a, s)).collect();
            seen.sort_unstable();
            assert_eq!(seen, (0..2048).collect::<Vec<u64>>());
        }
    }

    #[test]
    fn descriptor_bits() {
        let d = op(Major::K, Swizzle::B128, 16, 1024).descriptor(0x1230);
        assert_eq!(d & 0x3fff, 0x123);
        assert_eq!((d >> 16) & 0x3fff, 1);
        assert_eq!((d >> 32) & 0x3fff, 64);
        assert_eq!((d >> 49) & 7, 0);
        assert_eq!(d >> 62, 1);
        assert_eq!(
            d,
            0x123 | (1 << 16) | (64 << 32) | (1 << 62),
            "no other bit is set"
        );
        let none = op(Major::MN, Swizzle::None, (1 << 18) - 16, 0).descriptor(0xfff0);
        assert_eq!(none, 0xfff | (0x3fff << 16));
    }

    /// Where TMA puts element (r, c) of a row-major box of `cols` f16 starting at `base`
    /// with `swizzle`: the byte offset in the box, swizzled on the absolute address.
    fn tma(base: u64, cols: u64, r: u64, c: u64, swizzle: Swizzle) -> u64 {
        swizzle_address(base + (r * cols + c) * 2, swizzle)
    }

    /// A 64x64 f16 tile that TMA writes with the 128B swizzle is read back by the
    /// K-major / 128B operand (SBO = 1024) at every k-step start `base + 32·j`.
    #[test]
    fn tma_writer_and_k_major_reader_agree() {
        let base = 3 * 1024;
        let a = op(Major::K, Swizzle::B128, 0, 1024);
        for j in 0..4 {
            let start = base + 32 * j;
            for m in 0..64 {
                for k in 0..16 {
                    let want = tma(base, 64, m, 16 * j + k, Swizzle::B128);
                    let got = a.address(start, F16, m as i64, k as i64);
                    assert_eq!(got, Some(want), "j={j} m={m} k={k}");
                }
            }
        }
    }

    /// An MN-major B of k = 32 rows and n = 128 columns, written by two TMA boxes of
    /// (32, 64) with the 128B swizzle, one 64-wide n panel each (4096 bytes apart), is read
    /// back by the MN-major / 128B operand with LBO = 4096 (the panel stride) and SBO = 1024
    /// (8 k rows) at both k-step starts `base + 2048·j`.
    #[test]
    fn tma_writer_and_mn_major_reader_agree() {
        let base = 8 * 1024;
        let b = op(Major::MN, Swizzle::B128, 4096, 1024);
        for j in 0..2 {
            let start = base + 2048 * j;
            for n in 0..128 {
                for k in 0..16 {
                    let panel = base + 4096 * (n / 64);
                    let want = tma(panel, 64, 16 * j + k, n % 64, Swizzle::B128);
                    let got = b.address(start, F16, n as i64, k as i64);
                    assert_eq!(got, Some(want), "j={j} n={n} k={k}");
                }
            }
        }
    }
}
