//! 2Q (Johnson and Shasha, VLDB'94, the full version): new items enter A1in,
//! a FIFO holding `a1in_percent` of the bytes (probation); hits there change
//! nothing. Items leaving A1in are evicted and remembered in A1out, a ghost
//! list of about half the cache's item count; a miss on a remembered key
//! enters Am (main), an LRU list. Moving the insertion point is moving
//! `a1in_percent`.
//!
//! On the engine's segment log, which cannot move items on a hit, Am is run as
//! CLOCK (a hit marks the item, a marked item at the tail is reinserted).

use crate::ghost::Ghost;
use crate::{EvictionPolicy, HitAction, Queue, TailAction};

/// The paper's recommended A1in size: 25% of the cache.
pub const DEFAULT_A1IN_PERCENT: u64 = 25;

#[derive(Debug)]
pub struct TwoQ {
    /// Share of the capacity, in percent, for A1in.
    pub a1in_percent: u64,
    ghost: Ghost,
}

impl TwoQ {
    pub fn new(a1in_percent: u64) -> TwoQ {
        TwoQ {
            a1in_percent: a1in_percent.min(100),
            ghost: Ghost::new(4096),
        }
    }
}

impl Default for TwoQ {
    fn default() -> Self {
        TwoQ::new(DEFAULT_A1IN_PERCENT)
    }
}

impl EvictionPolicy for TwoQ {
    fn name(&self) -> &'static str {
        "2q"
    }
    fn insert_queue(&mut self, key_hash: u64) -> Queue {
        if self.ghost.take(key_hash) {
            Queue::Main
        } else {
            Queue::Probation
        }
    }
    fn on_hit(&self, _freq: u8) -> (u8, HitAction) {
        (1, HitAction::Stay)
    }
    fn on_hit_in(&self, queue: Queue, freq: u8) -> (u8, Option<Queue>) {
        match queue {
            Queue::Probation => (freq, None),
            Queue::Main => (0, Some(Queue::Main)),
        }
    }
    fn victim_queue(&self, probation_bytes: u64, _main_bytes: u64, capacity: u64) -> Queue {
        if probation_bytes * 100 > capacity * self.a1in_percent {
            Queue::Probation
        } else {
            Queue::Main
        }
    }
    fn on_tail(&mut self, queue: Queue, key_hash: u64, freq: u8) -> (TailAction, u8) {
        match queue {
            Queue::Probation => {
                self.ghost.insert(key_hash);
                (TailAction::Evict, 0)
            }
            Queue::Main if freq > 0 => (TailAction::Reinsert(Queue::Main), 0),
            Queue::Main => (TailAction::Evict, 0),
        }
    }
    fn set_capacity_items(&mut self, items: usize) {
        self.ghost.set_capacity((items / 2).max(16));
    }
}
