//! Whether optional work keeps paying for itself: a bounded running score
//! that outcomes move up (the work paid) or down (it was wasted). While the
//! score is not negative the work is always done; below zero only one try
//! in [`Credit::PROBE`] goes ahead, so a change of workload is still noticed
//! and the score can climb back.
//!
//! Used by a shard for reads before a store (do same-tag flash records
//! belong to other keys?) and for promotions of flash hits to RAM (do
//! promoted items get hit in RAM before they leave it?).

/// A bounded score of recent outcomes.
#[derive(Debug, Default, Clone, Copy)]
pub struct Credit {
    score: i32,
    tries: u32,
}

impl Credit {
    /// Lowest score: however long a run of wasted tries, paying outcomes
    /// worth this much in all bring the work back.
    pub const FLOOR: i32 = -256;
    /// Highest score: a run of paying tries buys this much patience.
    pub const CEILING: i32 = 64;
    /// While wasted, one try in this many still goes ahead.
    pub const PROBE: u32 = 64;

    /// Records an outcome: positive when the work paid, negative when not.
    pub fn score(&mut self, delta: i32) {
        self.score = (self.score + delta).clamp(Self::FLOOR, Self::CEILING);
    }

    /// Whether to do the work this time.
    pub fn allow(&mut self) -> bool {
        self.tries = self.tries.wrapping_add(1);
        self.score >= 0 || self.tries.is_multiple_of(Self::PROBE)
    }

    /// Whether the work is done every time (the score is not negative).
    #[cfg(test)]
    fn paying(&self) -> bool {
        self.score >= 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed(c: &mut Credit, tries: u32) -> u32 {
        (0..tries).filter(|_| c.allow()).count() as u32
    }

    #[test]
    fn allows_everything_until_work_is_wasted() {
        let mut c = Credit::default();
        assert_eq!(allowed(&mut c, 1000), 1000);
        c.score(-1);
        assert!(!c.paying());
        assert_eq!(allowed(&mut c, 64 * 10), 10, "one try in PROBE");
    }

    #[test]
    fn paying_outcomes_win_it_back_and_the_score_is_bounded() {
        let mut c = Credit::default();
        for _ in 0..10_000 {
            c.score(-1);
        }
        // The floor bounds the debt: 64 outcomes worth +4 repay it.
        for _ in 0..63 {
            c.score(4);
        }
        assert!(!c.paying());
        c.score(4);
        assert!(c.paying());
        for _ in 0..10_000 {
            c.score(4);
        }
        // The ceiling bounds the patience: 65 wasted tries exhaust it.
        for _ in 0..64 {
            c.score(-1);
        }
        assert!(c.paying());
        c.score(-1);
        assert!(!c.paying());
    }
}
