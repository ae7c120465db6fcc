//! Waves: how many rounds of `slots` concurrent blocks a grid of `blocks` blocks takes, and
//! how full the last round is. The one definition of seed 004's wave arithmetic, used by
//! DeepGEMM's exact rules (`deepgemm`, slots = SMs) and by the ranking of any kernel's
//! tuning space (`space`, slots = SMs × blocks resident per SM).

use std::num::NonZeroU128;

/// A grid's waves on a GPU. `u128`: products of three `u32` grid extents cannot overflow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Waves {
    pub blocks: u128,
    /// Blocks that run at once (the seed: `num_sms`).
    pub slots: u128,
    /// `⌈blocks / slots⌉`.
    pub waves: u128,
    /// Blocks in the last wave: `blocks mod slots`, or `slots` when that is 0 (a full last
    /// wave; also for an empty grid, as the seed's formula gives).
    pub last_wave_util: u128,
}

impl Waves {
    pub fn of(blocks: u128, slots: NonZeroU128) -> Waves {
        let slots = slots.get();
        let rem = blocks % slots;
        Waves {
            blocks,
            slots,
            waves: blocks.div_ceil(slots),
            last_wave_util: if rem == 0 { slots } else { rem },
        }
    }

    /// Compares the last waves' fill as fractions of their slots (`util / slots`), exactly:
    /// with equal slots this is the seed's comparison of `util` counts.
    pub fn cmp_last_wave_fill(&self, other: &Waves) -> std::cmp::Ordering {
        (self.last_wave_util * other.slots).cmp(&(other.last_wave_util * self.slots))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(blocks: u128, slots: u128) -> Waves {
        Waves::of(
            blocks,
            NonZeroU128::new(slots).expect("test slots are positive"),
        )
    }

    #[test]
    fn waves_and_last_wave() {
        let w = of(512, 132);
        assert_eq!((w.waves, w.last_wave_util), (4, 116));
        let w = of(264, 132);
        assert_eq!((w.waves, w.last_wave_util), (2, 132));
        assert_eq!(of(1, 132).waves, 1);
        // 3/4 of 4 slots beats 5/8 of 8.
        assert!(of(3, 4).cmp_last_wave_fill(&of(5, 8)).is_gt());
        assert!(of(2, 4).cmp_last_wave_fill(&of(4, 8)).is_eq());
    }
}
