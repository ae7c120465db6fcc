//! When a `T.gemm` runs on `wgmma` (sm_90a), and the shapes that follows from: ONE place
//! for the facts `layout-inference` chooses layouts by and `lower-tile-ops` builds the
//! instructions and their shared-memory descriptors from.
//!
//! A gemm takes the wgmma path when the target has `wgmma`, the block is whole warpgroups
//! (`threads % 128 == 0`), its operands are float16 / bfloat16 / float8 shared tiles that
//! are whole buffers in their last two dimensions (so every descriptor starts on a layout
//! atom), with a multiple of 8 rows and rows whose byte length one of the swizzle spans
//! 128 / 64 / 32 divides (the largest is taken), `K` is a multiple of the instruction's k
//! (16; 32 for fp8, [`k_step`]), and the warpgroups split the `M x N` accumulator into
//! tiles of `64 * i x N_w` with `N_w` a multiple of 8 up to 256 (one `m64nN_wkK` per 64
//! rows per k-step), and the accumulator is float32 (a float16 accumulator keeps mma.sync:
//! wgmma's `.f16` accumulator form is not built). fp8 operands (e4m3 and e5m2 may mix) must
//! be K-major — A stored `M x K`, B `N x K` (`transpose_B=True`): wgmma transposes 16-bit
//! operands only (`tlc_ir::wgmma::operand_rule`). Everything else keeps the mma.sync path,
//! which takes any gemm the sm_80 road takes (and refuses fp8 with the reason); so does a
//! packed int4 gemm (`packed_int4=True`: wgmma has no `.s4` form).
//!
//! A may instead be a float16 / bfloat16 fragment (`M x K`, no `transpose_A`) when the
//! warpgroups split M only: it is then read from registers (`T.wgmma_rs`) and laid out as
//! the wgmma accumulator of its `M x K` tile over the same warpgroups — the map register A
//! uses ([`AOperand::Registers`]). This is flash attention's `P @ V`: P, the converted
//! scores of the first gemm, has that layout already and never goes through shared memory.
//!
//! The operands are laid out `T.make_wgmma_swizzled_layout(X, bytes=B)` (`tlc_ir::Layout`):
//! the canonical layout both TMA (with swizzle `B`) and wgmma read. An operand stored with
//! K innermost is *K-major* (A as `M x K`, B as `N x K`), else *MN-major* (`trans` in PTX).

use crate::analysis::block::unit_grid;
use tlc_ir::verifier::const_int;
use tlc_ir::wgmma::{self, Major, SmemOperand, Swizzle};
use tlc_ir::{
    BufferDecl, DType, Diagnostic, Gemm, Layout, Region, Scope, Span, Target, WarpPolicy,
};

/// Rows of one wgmma (`m64`).
pub const M_STEP: i64 = 64;
/// The k-step of one wgmma on `dtype` operands: [`wgmma::instruction_k`]'s (16 for f16 /
/// bf16, 32 for fp8), the one table of each dtype's k.
pub fn k_step(dtype: DType) -> Option<i64> {
    wgmma::instruction_k(dtype)
}
/// The widest `N` of one wgmma.
pub const MAX_N: i64 = 256;
/// Threads of a warpgroup.
pub const WARPGROUP: i64 = 128;
/// Shared-memory alignment of a wgmma-swizzled buffer: the 128-byte swizzle pattern
/// repeats every 1024 bytes and is computed from the absolute address.
pub const ALIGN: i64 = 1024;

/// The warpgroup grid `GM x GN` of an `m x n` accumulator over `groups` warpgroups
/// (policies as in `layout-inference`'s warp partition): `m % (64 GM) == 0`, `n / GN` a
/// multiple of 8 up to 256.
pub fn warpgroup_partition(policy: WarpPolicy, groups: i64, m: i64, n: i64) -> Option<(i64, i64)> {
    unit_grid(policy, groups, (m, n), |gm, gn| {
        m % (M_STEP * gm) == 0 && n % gn == 0 && (n / gn) % 8 == 0 && n / gn <= MAX_N
    })
}

/// The last two dimensions of a buffer: `(rows, columns)`.
fn tile(buf: &BufferDecl) -> Option<(i64, i64)> {
    let n = buf.shape.len();
    if n < 2 {
        return None;
    }
    Some((const_int(&buf.shape[n - 2])?, const_int(&buf.shape[n - 1])?))
}

/// The swizzle span (bytes) of the wgmma layout of `buf`: the largest of 128, 64, 32 that
/// divides its row, when its rows are a multiple of 8.
pub fn swizzle_bytes(buf: &BufferDecl) -> Option<i64> {
    let (rows, cols) = tile(buf)?;
    let row = cols.checked_mul(i64::from(buf.dtype.bytes()))?;
    if rows <= 0 || rows % 8 != 0 || row <= 0 {
        return None;
    }
    [128, 64, 32].into_iter().find(|b| row % b == 0)
}

/// A buffer laid out `T.make_wgmma_swizzled_layout(X, bytes)`, seen through its last two
/// dimensions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Panels {
    pub rows: i64,
    pub cols: i64,
    pub bytes: i64,
    pub elem_bytes: i64,
}

impl Panels {
    pub fn of(buf: &BufferDecl, bytes: i64) -> Option<Panels> {
        let (rows, cols) = tile(buf)?;
        let elem_bytes = i64::from(buf.dtype.bytes());
        (elem_bytes > 0 && bytes % elem_bytes == 0 && (cols * elem_bytes) % bytes == 0).then_some(
            Panels {
                rows,
                cols,
                bytes,
                elem_bytes,
            },
        )
    }

    /// Columns per panel.
    pub fn width(&self) -> i64 {
        self.bytes / self.elem_bytes
    }

    /// The descriptor layout of an operand stored in these panels (`k_major`: its
    /// columns are K). K-major: rows `bytes` apart, groups of 8 rows `8 * bytes` apart
    /// (SBO), the k-step inside the span (LBO unused: 16, what CUTLASS writes). MN-major:
    /// the next panel of MN columns is `rows * bytes` away (LBO), groups of 8 k-rows
    /// `8 * bytes` (SBO).
    pub fn operand(&self, k_major: bool) -> Option<SmemOperand> {
        let swizzle = Swizzle::from_bytes(self.bytes)?;
        Some(if k_major {
            SmemOperand {
                major: Major::K,
                swizzle,
                lbo: 16,
                sbo: 8 * self.bytes,
            }
        } else {
            SmemOperand {
                major: Major::MN,
                swizzle,
                lbo: self.rows * self.bytes,
                sbo: 8 * self.bytes,
            }
        })
    }
}

/// The float8 dtype of `g`'s A or B operand, if either is float8 (`buffer` finds the
/// declarations).
pub fn fp8_operand(g: &Gemm, buffer: &dyn Fn(&str) -> Option<BufferDecl>) -> Option<DType> {
    [&g.a, &g.b]
        .into_iter()
        .filter_map(|r| buffer(&r.buffer.name).map(|b| b.dtype))
        .find(|&d| wgmma::k_major_only(d))
}

/// Whether an int8 gemm can take mma.sync's `m16n8k32.s32.s8.s8` form instead: its
/// fragments are loaded by untransposed `ldmatrix` (whose `.trans` moves 16-bit units, not
/// bytes), so both operands must be K-major — A stored (M, K), B stored (N, K).
pub fn int8_mma_sync(g: &Gemm) -> bool {
    !g.trans_a && g.trans_b
}

fn py_bool(b: bool) -> &'static str {
    if b {
        "True"
    } else {
        "False"
    }
}

/// The error of a float8 gemm that cannot run on wgmma, or of an int8 gemm that can run
/// neither on wgmma nor on mma.sync (`why`: [`plan`]'s reason): fp8 tensor-core math exists
/// only as wgmma (sm_90a); sm_80's mma.sync has no fp8 form, and its int8 form
/// (`m16n8k32.s32.s8.s8`) reads K-major operands only — so there is no fallback, never a
/// wrong result.
pub fn fp8_refusal(span: Span, fp8: DType, trans: (bool, bool), why: &str) -> Diagnostic {
    let k = wgmma::instruction_k(fp8).unwrap_or(32);
    let acc = wgmma::accumulator_dtype(fp8);
    if fp8 == DType::Int8 {
        // Only an int8 gemm stored otherwise gets here (`int8_mma_sync`); `why` is wgmma's.
        return Diagnostic::error(
            span,
            format!(
                "an int8 T.gemm needs both operands K-major: A as (M, K), B as (N, K) with \
                 transpose_B=True (k = {k} per instruction, an {acc} accumulator); this one has \
                 transpose_A={}, transpose_B={}",
                py_bool(trans.0),
                py_bool(trans.1)
            ),
        )
        .with_note(
            "tensor cores read int8 K-major only (wgmma's .s8 form; mma.sync's m16n8k32 through \
             ldmatrix, whose .trans moves 16-bit units): store the tiles K-major",
        );
    }
    Diagnostic::error(
        span,
        format!(
            "a {fp8} T.gemm runs on sm_90a's wgmma only (k = {k} per instruction, a {acc} \
             accumulator, both operands K-major: A as (M, K), B as (N, K) with \
             transpose_B=True), and this one cannot: {why}"
        ),
    )
    .with_note(
        "sm_80's mma.sync has no fp8 form: compile for sm_90a, or convert the tiles to float16 \
         or bfloat16 (T.copy converts) before T.gemm",
    )
}

/// How one gemm runs on wgmma.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    pub groups_m: i64,
    pub groups_n: i64,
    /// Where A comes from: shared memory in a wgmma swizzle of this span, or registers.
    pub a: AOperand,
    /// The swizzle span of B's layout.
    pub b_bytes: i64,
}

/// Where a wgmma gemm reads A.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AOperand {
    /// A shared tile laid out `T.make_wgmma_swizzled_layout(A, bytes)`.
    Shared { bytes: i64 },
    /// A float16 / bfloat16 fragment laid out as the wgmma accumulator of an `M x K` tile
    /// over the gemm's `groups_m x 1` warpgroups (`T.wgmma_rs`: each warpgroup's rows of
    /// A are in its own registers, in the accumulator's element-to-thread map, which is
    /// register A's map — flash attention's P, the converted scores, needs no shared round
    /// trip).
    Registers,
}

impl AOperand {
    /// The layout the plan gives A.
    pub fn layout(self, groups_m: i64) -> Layout {
        match self {
            AOperand::Shared { bytes } => Layout::WgmmaSwizzle { bytes },
            AOperand::Registers => Layout::WgmmaAccumulator {
                warpgroups_m: groups_m,
                warpgroups_n: 1,
            },
        }
    }
}

/// Whether A of `g` is a fragment that could be read from registers (`T.wgmma_rs`): float16
/// or bfloat16, stored `M x K` (no `transpose_A`), the whole fragment. [`plan`] decides.
pub(crate) fn register_a_candidate(g: &Gemm, a: &BufferDecl) -> bool {
    a.scope == Scope::Fragment
        && matches!(a.dtype, DType::Float16 | DType::BFloat16)
        && !g.trans_a
        && a.shape.len() == 2
        && whole_tile(&g.a, a)
}

/// Whether a region covers the last two dimensions of its buffer whole (leading
/// dimensions of extent 1).
fn whole_tile(r: &Region, buf: &BufferDecl) -> bool {
    let n = buf.shape.len();
    r.ranges.len() == n
        && n >= 2
        && r.ranges[..n - 2]
            .iter()
            .all(|range| const_int(&range.extent) == Some(1))
        && r.ranges[n - 2..]
            .iter()
            .zip(&buf.shape[n - 2..])
            .all(|(range, dim)| {
                const_int(&range.start) == Some(0)
                    && const_int(&range.extent).is_some()
                    && const_int(&range.extent) == const_int(dim)
            })
}

/// The wgmma plan of `g` (accumulator `m x n`, `threads` threads, `layouts` the layouts
/// chosen so far), or why it keeps the mma.sync path.
pub fn plan(
    g: &Gemm,
    target: Target,
    threads: i64,
    (m, n): (i64, i64),
    buffer: &dyn Fn(&str) -> Option<BufferDecl>,
    layout: &dyn Fn(&str) -> Option<Layout>,
) -> Result<Plan, String> {
    if !target.has_mma(tlc_ir::target::MmaFamily::Wgmma) {
        return Err(format!("{target} has no wgmma"));
    }
    if threads % WARPGROUP != 0 {
        return Err(format!("{threads} threads are not whole warpgroups"));
    }
    // wgmma has no int4 form (`.s8` / `.u8` are its integers): packed int4 bytes take
    // mma.sync's `m16n8k64.s32.s4.s4`.
    if g.packed_int4 {
        return Err("its operands are packed int4, which wgmma has no form for".into());
    }
    let (Some(a), Some(b)) = (buffer(&g.a.buffer.name), buffer(&g.b.buffer.name)) else {
        return Err("an operand is not a known buffer".into());
    };
    // wgmma's f16-accumulator form (`.f16.f16.f16`) is not built: such a gemm keeps
    // mma.sync's `.f16.f16.f16.f16` form. int8 accumulates in int32 (`.s32.s8.s8`).
    if let Some(c) = buffer(&g.c.buffer.name) {
        let want = wgmma::accumulator_dtype(a.dtype);
        if c.dtype != want {
            return Err(format!("the accumulator is not {want}"));
        }
    }
    let a_registers = register_a_candidate(g, &a);
    let mut spans = [0i64; 2];
    for (i, (slot, (r, buf))) in spans.iter_mut().zip([(&g.a, &a), (&g.b, &b)]).enumerate() {
        if i == 0 && a_registers {
            continue;
        }
        let name = &buf.name.name;
        if buf.scope != Scope::Shared || wgmma::instruction_k(buf.dtype).is_none() {
            return Err(format!(
                "`{name}` is not a float16 / bfloat16 / float8 / int8 shared tile"
            ));
        }
        if !whole_tile(r, buf) {
            return Err(format!(
                "the operand region of `{name}` is not its whole tile"
            ));
        }
        let Some(bytes) = swizzle_bytes(buf) else {
            return Err(format!(
                "`{name}` has no wgmma layout: rows must be a multiple of 8 and a multiple of 32 bytes long"
            ));
        };
        match layout(name) {
            None => {}
            Some(Layout::WgmmaSwizzle { bytes: b }) if b == bytes => {}
            Some(_) => return Err(format!("`{name}` already has another layout")),
        }
        *slot = bytes;
    }
    if a_registers && a.dtype != b.dtype {
        return Err(format!(
            "A (`{}`, in registers) is {} and B is {}: the register-A form takes one dtype",
            a.name.name, a.dtype, b.dtype
        ));
    }
    wgmma::operand_rule(
        (&a.name.name, a.dtype),
        (&b.name.name, b.dtype),
        g.trans_a,
        !g.trans_b,
    )?;
    let k_step = k_step(a.dtype).ok_or("A has no wgmma k")?;
    let (Some((ar, ac)), Some((br, bc))) = (tile(&a), tile(&b)) else {
        return Err("an operand has no constant tile".into());
    };
    let (am, ak) = if g.trans_a { (ac, ar) } else { (ar, ac) };
    let (bk, bn) = if g.trans_b { (bc, br) } else { (br, bc) };
    if am != m || bn != n || ak != bk || ak % k_step != 0 {
        return Err(format!(
            "shapes {am} x {ak} · {bk} x {bn} → {m} x {n} do not tile by 64 x N x {k_step}"
        ));
    }
    let Some((groups_m, groups_n)) = warpgroup_partition(g.policy, threads / WARPGROUP, m, n)
    else {
        return Err(format!(
            "{} warpgroups cannot split a {m} x {n} tile into 64-row tiles of at most 256 columns",
            threads / WARPGROUP
        ));
    };
    // An MN-major operand's descriptors must start on a panel. A's start at multiples of 64
    // rows, and a panel is at most 64 float16 wide; B's at multiples of N / GN.
    let b_width = spans[1] / i64::from(b.dtype.bytes());
    if !g.trans_b && groups_n > 1 && (n / groups_n) % b_width != 0 {
        return Err("B's warpgroup tiles do not start on a swizzle panel".into());
    }
    let a_operand = if a_registers {
        // Each warpgroup needs all of its rows' K columns: the warpgroups split M only,
        // and A's columns are one accumulator tile wide.
        let wanted = AOperand::Registers.layout(groups_m);
        if groups_n != 1 {
            return Err(format!(
                "A (`{}`) is in registers, and the warpgroups split N ({groups_m} x {groups_n})",
                a.name.name
            ));
        }
        if ak > MAX_N {
            return Err(format!(
                "A (`{}`) is in registers with K = {ak}, wider than one accumulator tile ({MAX_N})",
                a.name.name
            ));
        }
        match layout(&a.name.name) {
            None => {}
            Some(l) if l == wanted => {}
            Some(_) => return Err(format!("`{}` already has another layout", a.name.name)),
        }
        AOperand::Registers
    } else {
        AOperand::Shared { bytes: spans[0] }
    };
    Ok(Plan {
        groups_m,
        groups_n,
        a: a_operand,
        b_bytes: spans[1],
    })
}

/// Whether `g` will read its A fragment from registers (`T.wgmma_rs`): [`plan`] on the
/// accumulator's declared shape, with the layouts known so far (`layout`), and every other
/// gemm of the kernel (`gemms`) that accumulates into a fragment of A's shape — the
/// accumulator A is usually converted from (flash attention's scores) — laid out over the
/// same warpgroups (`groups_m x 1`): A then gets the layout it would get by propagation
/// anyway. What `stage-fragment-reads` asks before staging a fragment A through shared
/// memory.
pub fn reads_a_from_registers(
    g: &Gemm,
    gemms: &[Gemm],
    target: Target,
    threads: i64,
    buffer: &dyn Fn(&str) -> Option<BufferDecl>,
    layout: &dyn Fn(&str) -> Option<Layout>,
) -> bool {
    let shape_of = |name: &str| -> Option<(i64, i64)> {
        let b = buffer(name)?;
        let dims: Option<Vec<i64>> = b.shape.iter().map(const_int).collect();
        match dims?.as_slice() {
            [m, n] => Some((*m, *n)),
            _ => None,
        }
    };
    let Some(mn) = shape_of(&g.c.buffer.name) else {
        return false;
    };
    let Ok(p) = plan(g, target, threads, mn, buffer, layout) else {
        return false;
    };
    if p.a != AOperand::Registers {
        return false;
    }
    let a_shape = shape_of(&g.a.buffer.name);
    gemms
        .iter()
        .filter(|other| other.c.buffer.name != g.c.buffer.name)
        .filter_map(|other| Some((other, shape_of(&other.c.buffer.name)?)))
        .filter(|(_, shape)| Some(*shape) == a_shape)
        .all(|(other, shape)| {
            plan(other, target, threads, shape, buffer, layout)
                .is_ok_and(|q| (q.groups_m, q.groups_n) == (p.groups_m, 1))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions() {
        assert_eq!(
            warpgroup_partition(WarpPolicy::Square, 1, 128, 128),
            Some((1, 1))
        );
        // Two warpgroups on 128 x 256: 128 x 128 each (square) rather than 64 x 256.
        assert_eq!(
            warpgroup_partition(WarpPolicy::Square, 2, 128, 256),
            Some((1, 2))
        );
        assert_eq!(
            warpgroup_partition(WarpPolicy::FullRow, 2, 128, 256),
            Some((2, 1))
        );
        assert_eq!(
            warpgroup_partition(WarpPolicy::FullCol, 2, 64, 256),
            Some((1, 2))
        );
        // 64 rows cannot split over two warpgroups along M.
        assert_eq!(warpgroup_partition(WarpPolicy::FullRow, 2, 64, 128), None);
        // 512 columns on one warpgroup exceed one wgmma.
        assert_eq!(warpgroup_partition(WarpPolicy::Square, 1, 64, 512), None);
    }

    #[test]
    fn descriptors_from_panels() {
        // The seed's B tile: 32 k-rows of 128 float16 n-columns, MN-major, two 64-wide panels.
        let p = Panels {
            rows: 32,
            cols: 128,
            bytes: 128,
            elem_bytes: 2,
        };
        assert_eq!(p.width(), 64);
        let b = p.operand(false).unwrap();
        assert_eq!((b.major, b.lbo, b.sbo), (Major::MN, 4096, 1024));
        // The seed's A tile: 128 rows of 32 float16 (64-byte rows), K-major.
        let a = Panels {
            rows: 128,
            cols: 32,
            bytes: 64,
            elem_bytes: 2,
        }
        .operand(true)
        .unwrap();
        assert_eq!((a.major, a.sbo), (Major::K, 512));
        assert_eq!(a.swizzle, Swizzle::from_bytes(64).unwrap());
    }
}
