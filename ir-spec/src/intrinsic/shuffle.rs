//! The run-time warp shuffles (`T.shfl_sync_idx`, `_bfly`, `_down`, `_up`): which lane each
//! lane reads, written once from PTX's definition of `shfl.sync` so that the interpreter
//! (`interp/lockstep.rs`) and code generation (the `c` operand) agree by construction.
//!
//! PTX ISA, `shfl.sync.{mode}.b32 d, a, b, c, membermask`, for the executing lane `lane`:
//!
//! ```text
//! bval = b[4:0]; cval = c[4:0]; segmask = c[12:8]
//! maxLane = (lane & segmask) | (cval & ~segmask);  minLane = lane & segmask
//! up:   j = lane - bval;                   pval = j >= maxLane
//! down: j = lane + bval;                   pval = j <= maxLane
//! bfly: j = lane ^ bval;                   pval = j <= maxLane
//! idx:  j = minLane | (bval & ~segmask);   pval = j <= maxLane
//! if !pval: j = lane            (the lane keeps its own value)
//! d = a of lane j               (undefined if lane j is inactive or not in membermask)
//! ```
//!
//! CUDA's `__shfl*_sync(mask, v, b, width)` passes `c = ((32 - width) << 8) | 31` (`up`:
//! `(32 - width) << 8`), so a segment is `width` consecutive lanes. Quirks kept on purpose:
//! only `b`'s low five bits count (a lane of 33 is lane 1); `bfly` may read a lane of an
//! *earlier* segment (lane 11 with `lane_mask` 8 and width 8 reads lane 3), never a later one.

use super::Intrinsic;
use crate::ir::{ElemRef, Expr};

/// Which lane a shuffle reads (PTX's `.mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ShuffleMode {
    Idx,
    Bfly,
    Down,
    Up,
}

impl ShuffleMode {
    /// PTX's mode suffix: `idx`, `bfly`, `down`, `up`.
    pub fn name(self) -> &'static str {
        match self {
            ShuffleMode::Idx => "idx",
            ShuffleMode::Bfly => "bfly",
            ShuffleMode::Down => "down",
            ShuffleMode::Up => "up",
        }
    }

    /// The `c` operand of a shuffle over segments of `width` lanes (a power of two in
    /// 1..=32): the segment mask in bits 12:8 and the clamp lane in bits 4:0 (the segment's
    /// last lane, or its first for `up`), as CUDA's intrinsics pass it.
    pub fn c_operand(self, width: u32) -> u32 {
        let segmask = 32u32.saturating_sub(width) << 8;
        match self {
            ShuffleMode::Up => segmask,
            _ => segmask | 31,
        }
    }

    /// The lane that lane `lane` (0..32) reads with the lane operand `b` (only its low five
    /// bits count) and the `c` operand `c`: PTX's rule (module doc); its own lane when the
    /// computed one lies outside its segment's range.
    pub fn source(self, lane: u32, b: u32, c: u32) -> u32 {
        let lane = lane & 31;
        let bval = b & 31;
        let cval = c & 31;
        let segmask = (c >> 8) & 31;
        let max_lane = (lane & segmask) | (cval & !segmask & 31);
        let min_lane = lane & segmask;
        let (j, ok) = match self {
            ShuffleMode::Up => {
                let j = i64::from(lane) - i64::from(bval);
                (j, j >= i64::from(max_lane))
            }
            ShuffleMode::Down => {
                let j = i64::from(lane) + i64::from(bval);
                (j, j <= i64::from(max_lane))
            }
            ShuffleMode::Bfly => {
                let j = i64::from(lane ^ bval);
                (j, j <= i64::from(max_lane))
            }
            ShuffleMode::Idx => {
                let j = i64::from(min_lane | (bval & !segmask & 31));
                (j, j <= i64::from(max_lane))
            }
        };
        match u32::try_from(j) {
            Ok(j) if ok => j,
            _ => lane,
        }
    }
}

/// A run-time shuffle call, borrowed: what the interpreter and code generation take.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shuffle<'a> {
    pub mode: ShuffleMode,
    pub dst: &'a ElemRef,
    pub src: &'a ElemRef,
    /// The lane operand (PTX's `b`): a lane, a lane mask or a lane offset.
    pub lane: &'a Expr,
    /// The segment width: a power of two in 1..=32.
    pub width: &'a Expr,
    /// The member mask: its low 32 bits ([`member_mask`]).
    pub mask: &'a Expr,
}

impl Intrinsic {
    /// The call as a run-time shuffle, when it is one of `T.shfl_sync_*`.
    pub fn shuffle(&self) -> Option<Shuffle<'_>> {
        let (mode, dst, src, lane, width, mask) = match self {
            Intrinsic::ShflSyncIdx {
                dst,
                src,
                lane,
                width,
                mask,
            } => (ShuffleMode::Idx, dst, src, lane, width, mask),
            Intrinsic::ShflSyncBfly {
                dst,
                src,
                lane_mask,
                width,
                mask,
            } => (ShuffleMode::Bfly, dst, src, lane_mask, width, mask),
            Intrinsic::ShflSyncDown {
                dst,
                src,
                delta,
                width,
                mask,
            } => (ShuffleMode::Down, dst, src, delta, width, mask),
            Intrinsic::ShflSyncUp {
                dst,
                src,
                delta,
                width,
                mask,
            } => (ShuffleMode::Up, dst, src, delta, width, mask),
            _ => return None,
        };
        Some(Shuffle {
            mode,
            dst,
            src,
            lane,
            width,
            mask,
        })
    }

    /// Whether the call is a warp shuffle (`T.shfl_xor`, `T.shfl_down`, `T.shfl_sync_*`):
    /// lanes exchange registers and nothing else — no memory, no ordering of other threads'
    /// accesses.
    pub fn is_register_exchange(&self) -> bool {
        matches!(self, Intrinsic::ShflXor { .. } | Intrinsic::ShflDown { .. })
            || self.shuffle().is_some()
    }

    /// The run-time shuffle of `mode` from its operands.
    pub fn shuffle_of(
        mode: ShuffleMode,
        (dst, src): (ElemRef, ElemRef),
        lane: Expr,
        width: Expr,
        mask: Expr,
    ) -> Intrinsic {
        match mode {
            ShuffleMode::Idx => Intrinsic::ShflSyncIdx {
                dst,
                src,
                lane,
                width,
                mask,
            },
            ShuffleMode::Bfly => Intrinsic::ShflSyncBfly {
                dst,
                src,
                lane_mask: lane,
                width,
                mask,
            },
            ShuffleMode::Down => Intrinsic::ShflSyncDown {
                dst,
                src,
                delta: lane,
                width,
                mask,
            },
            ShuffleMode::Up => Intrinsic::ShflSyncUp {
                dst,
                src,
                delta: lane,
                width,
                mask,
            },
        }
    }
}

/// The member mask a mask operand's value names: its low 32 bits (PTX's `.b32` operand; a
/// mask written `-1` is every lane).
pub fn member_mask(v: i64) -> u32 {
    (v & 0xFFFF_FFFF) as u32
}

/// Whether `w` is a segment width: a power of two in 1..=32.
pub fn valid_width(w: i64) -> bool {
    (1..=32).contains(&w) && w & (w - 1) == 0
}

/// The rules a shuffle's constant operands break (the others are the interpreter's, as it
/// runs): a width that is no power of two in 1..=32, a mask with no lane.
pub(super) fn constant_rules(s: &Shuffle<'_>) -> Vec<String> {
    let mut out = Vec::new();
    let name = |m: ShuffleMode| format!("T.shfl_sync_{}", m.name());
    if let Some(w) = crate::verifier::const_int(s.width).filter(|&w| !valid_width(w)) {
        out.push(format!(
            "the segment width (`width`) of `{}` must be 1, 2, 4, 8, 16 or 32, found {w}",
            name(s.mode)
        ));
    }
    if crate::verifier::const_int(s.mask).is_some_and(|m| member_mask(m) == 0) {
        out.push(format!(
            "the member mask (`mask`) of `{}` names no lane (its low 32 bits are 0)",
            name(s.mode)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CUDA's documented behaviour of each intrinsic, lane by lane.
    #[test]
    fn sources_follow_cuda() {
        for width in [1u32, 2, 4, 8, 16, 32] {
            let c = |m: ShuffleMode| m.c_operand(width);
            for lane in 0..32u32 {
                let seg = lane / width * width;
                for b in 0..64u32 {
                    // __shfl_sync: lane b modulo width of the caller's segment.
                    let idx = ShuffleMode::Idx.source(lane, b, c(ShuffleMode::Idx));
                    assert_eq!(idx, seg + (b & 31) % width, "idx w{width} l{lane} b{b}");
                    let d = b & 31;
                    // __shfl_down_sync: lane + d, unless past the segment's end.
                    let down = ShuffleMode::Down.source(lane, b, c(ShuffleMode::Down));
                    let want = if lane + d < seg + width {
                        lane + d
                    } else {
                        lane
                    };
                    assert_eq!(down, want, "down w{width} l{lane} b{b}");
                    // __shfl_up_sync: lane - d, unless before the segment's start.
                    let up = ShuffleMode::Up.source(lane, b, c(ShuffleMode::Up));
                    let want = if lane >= seg + d { lane - d } else { lane };
                    assert_eq!(up, want, "up w{width} l{lane} b{b}");
                    // __shfl_xor_sync: lane ^ d, unless it lies in a later segment.
                    let x = ShuffleMode::Bfly.source(lane, b, c(ShuffleMode::Bfly));
                    let want = if lane ^ d < seg + width {
                        lane ^ d
                    } else {
                        lane
                    };
                    assert_eq!(x, want, "bfly w{width} l{lane} b{b}");
                }
            }
        }
        // The earlier-segment quirk, as CUDA documents it.
        assert_eq!(
            ShuffleMode::Bfly.source(11, 8, ShuffleMode::Bfly.c_operand(8)),
            3
        );
        assert_eq!(
            ShuffleMode::Bfly.source(3, 8, ShuffleMode::Bfly.c_operand(8)),
            3
        );
    }

    /// The verifier's rules on constant operands (`intrinsic::check`): a width that is no
    /// power of two, a mask with no lane; run-time ones are the interpreter's.
    #[test]
    fn constant_widths_and_masks_are_checked() {
        let e = |name: &str| ElemRef {
            buffer: crate::ir::Ident::new(name.to_string(), crate::span::Span::DUMMY),
            indices: vec![Expr::int(0)],
        };
        let call = |width: Expr, mask: Expr| {
            Intrinsic::shuffle_of(
                ShuffleMode::Down,
                (e("t"), e("v")),
                Expr::int(1),
                width,
                mask,
            )
        };
        let messages = |i: &Intrinsic| -> Vec<String> {
            super::super::check(i, &|_| None)
                .into_iter()
                .map(|v| v.message)
                .collect()
        };
        assert_eq!(
            messages(&call(Expr::int(8), Expr::int(0xFF))),
            Vec::<String>::new()
        );
        assert_eq!(
            messages(&call(Expr::var("w"), Expr::var("m"))),
            Vec::<String>::new()
        );
        assert_eq!(
            messages(&call(Expr::int(12), Expr::int(-1))),
            ["the segment width (`width`) of `T.shfl_sync_down` must be 1, 2, 4, 8, 16 or 32, found 12"]
        );
        assert_eq!(
            messages(&call(Expr::int(32), Expr::int(0x1_0000_0000))),
            ["the member mask (`mask`) of `T.shfl_sync_down` names no lane (its low 32 bits are 0)"]
        );
    }

    #[test]
    fn widths_are_powers_of_two_and_masks_32_bits() {
        for w in [1, 2, 4, 8, 16, 32] {
            assert!(valid_width(w));
        }
        for w in [0, 3, 6, 12, 24, 31, 64, -32] {
            assert!(!valid_width(w));
        }
        assert_eq!(member_mask(-1), u32::MAX);
        assert_eq!(member_mask(0xFFFF_FFFF), u32::MAX);
        assert_eq!(member_mask(0x1_0000_0000), 0);
    }
}
