//! The run-time shuffles `T.shfl_sync_*` over one task's active threads, warp by warp (the
//! linear thread index / 32), all at one program point — what PTX's `shfl.sync` does, with
//! every case PTX leaves undefined an error:
//!
//! - the lanes taking part are the warp's lanes in `mask` that exist (a block of 8 threads
//!   has lanes 0..8; PTX waits only for the non-exited lanes of the mask, and lanes past
//!   the block's last thread never run);
//! - every active lane must be in `mask` ("undefined if the executing thread is not in the
//!   membermask"), and every lane taking part must be active here (a lane of the mask that
//!   took another branch, or has not arrived, is an error: on the GPU the shuffle waits for
//!   it or reads an undefined value);
//! - each lane evaluates its operands: a width that is no power of two in 1..=32 is an
//!   error, and so are lanes with different masks (only the mask's low 32 bits count); each
//!   computes the lane it reads from its own lane operand and width
//!   (`intrinsic::ShuffleMode::source`); reading a lane that does not take part is an error;
//!   a lane past its segment keeps its own value;
//! - every lane reads before any lane writes (`dst` may be `src`), and only the lanes read
//!   are read (an element no one reads may be unwritten).

use super::{Lockstep, WARP_SIZE};
use crate::interp::compile::{CExpr, CRef};
use crate::interp::eval::{fault, Res};
use crate::intrinsic::shuffle::{member_mask, valid_width};
use crate::intrinsic::ShuffleMode;
use crate::span::Span;

/// A compiled run-time shuffle's operands.
pub(crate) struct ShuffleCall<'c> {
    pub name: &'static str,
    pub mode: ShuffleMode,
    pub dst: &'c CRef,
    pub src: &'c CRef,
    pub lane: &'c CExpr,
    pub width: &'c CExpr,
    pub mask: &'c CExpr,
}

impl Lockstep<'_, '_> {
    /// Runs the shuffle `s` for the active threads (in thread order), one warp at a time.
    pub(super) fn shfl_sync(
        &mut self,
        s: &ShuffleCall<'_>,
        span: Span,
        active: &[usize],
    ) -> Res<()> {
        let warp = usize::try_from(WARP_SIZE).unwrap_or(32).max(1);
        let mut rest = active;
        while let Some(&first) = rest.first() {
            let base = first / warp * warp;
            let n = rest
                .iter()
                .take_while(|&&t| t / warp == first / warp)
                .count();
            let (lanes, tail) = rest.split_at(n);
            self.shfl_warp(s, base, lanes, span)?;
            rest = tail;
        }
        Ok(())
    }

    /// One warp's shuffle: `base` its first thread, `lanes` its active threads.
    fn shfl_warp(
        &mut self,
        s: &ShuffleCall<'_>,
        base: usize,
        lanes: &[usize],
        span: Span,
    ) -> Res<()> {
        let warp = base / 32;
        let op = s.name;
        // Each lane's operands, as it evaluates them: (lane operand, c, mask).
        let mut operands = Vec::with_capacity(lanes.len());
        for &t in lanes {
            let (b, w, m) = self.on_thread(t, span, |f| {
                Ok((
                    f.eval(s.lane)?.as_i64(),
                    f.eval(s.width)?.as_i64(),
                    f.eval(s.mask)?.as_i64(),
                ))
            })?;
            if !valid_width(w) {
                return self.named(
                    t,
                    fault(
                        span,
                        format!(
                            "`{op}` with a segment width of {w}: it must be 1, 2, 4, 8, 16 or \
                             32 (CUDA leaves other widths undefined)"
                        ),
                    ),
                );
            }
            // `valid_width` holds: 1..=32.
            let c = s.mode.c_operand(w as u32);
            operands.push((b, c, member_mask(m)));
        }
        let Some(&(_, _, mask)) = operands.first() else {
            return Ok(());
        };
        if let Some((&t, &(_, _, other))) = lanes
            .iter()
            .zip(&operands)
            .find(|(_, &(_, _, m))| m != mask)
        {
            return self.named(
                t,
                fault(
                    span,
                    format!(
                        "lanes of warp {warp} execute `{op}` with different masks ({mask:#010x} \
                         and {other:#010x}): PTX leaves it undefined"
                    ),
                ),
            );
        }
        // The lanes that exist: a block whose size is not a multiple of 32 has a short last
        // warp (a cluster's blocks are whole warps, K14, so warps never straddle blocks).
        let block_n = self.st.block_n.max(1);
        let exists = (block_n - base % block_n).min(32);
        let exist_mask: u32 = if exists >= 32 {
            u32::MAX
        } else {
            (1u32 << exists) - 1
        };
        let members = mask & exist_mask;
        let bit = |t: usize| 1u32 << ((t - base) & 31);
        let here: u32 = lanes.iter().fold(0, |m, &t| m | bit(t));
        if let Some(&t) = lanes.iter().find(|&&t| mask & bit(t) == 0) {
            return self.named(
                t,
                fault(
                    span,
                    format!(
                        "lane {} of warp {warp} executes `{op}`, but its mask {mask:#010x} leaves \
                         that lane out (PTX leaves the result undefined)",
                        t - base
                    ),
                ),
            );
        }
        let missing = members & !here;
        if missing != 0 {
            return fault(
                span,
                format!(
                    "`{op}` with mask {mask:#010x} reached by lanes {} of warp {warp}, without \
                     lanes {} of its mask (every lane of the mask that the block has must \
                     execute it together; on the GPU it would wait for them or read undefined \
                     values)",
                    lane_list(here),
                    lane_list(missing)
                ),
            );
        }
        // Each lane's source lane, from its own operands.
        let mut from = Vec::with_capacity(lanes.len());
        for (&t, &(b, c, _)) in lanes.iter().zip(&operands) {
            // Only the low five bits of the lane operand count: its low 32 bits keep them.
            let j = s.mode.source((t - base) as u32, b as u32, c);
            if members & (1u32 << (j & 31)) == 0 {
                let why = if j as usize >= exists {
                    format!("the block has no thread there (its warp {warp} has {exists} lanes)")
                } else {
                    format!("it is not in the mask {mask:#010x}")
                };
                return self.named(
                    t,
                    fault(
                        span,
                        format!(
                            "lane {} of warp {warp} reads lane {j} in `{op}` (lane operand {b}), \
                             but {why}: PTX leaves the value undefined",
                            t - base
                        ),
                    ),
                );
            }
            from.push(j as usize);
        }
        // Read every source first: `dst` may be `src`.
        let what = format!("`{op}`");
        let mut values = Vec::with_capacity(lanes.len());
        for &j in &from {
            values.push(self.on_thread(base + j, span, |f| f.shfl_read(s.src, span, &what))?);
        }
        for (&t, v) in lanes.iter().zip(values) {
            self.on_thread(t, span, |f| f.shfl_write(s.dst, v, span, &what))?;
        }
        Ok(())
    }

    /// `r` with the fault, if any, naming thread `t`.
    fn named<T>(&self, t: usize, r: Res<T>) -> Res<T> {
        r.map_err(|mut e| {
            if e.thread.is_none() {
                e.thread = Some(self.st.name(t));
            }
            e
        })
    }
}

/// The lanes of a mask, for messages: `0..8`, `3, 5`, `0..4, 9`.
fn lane_list(mask: u32) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut lane = 0u32;
    while lane < 32 {
        if mask & (1 << lane) == 0 {
            lane += 1;
            continue;
        }
        let start = lane;
        while lane < 32 && mask & (1 << lane) != 0 {
            lane += 1;
        }
        parts.push(match lane - start {
            1 => format!("{start}"),
            _ => format!("{start}..{lane}"),
        });
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::lane_list;

    #[test]
    fn lane_lists_read_as_ranges() {
        assert_eq!(lane_list(0xff), "0..8");
        assert_eq!(lane_list(0b101000), "3, 5");
        assert_eq!(lane_list(0x20f), "0..4, 9");
        assert_eq!(lane_list(u32::MAX), "0..32");
    }
}
