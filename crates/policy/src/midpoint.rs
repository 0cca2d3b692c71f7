//! Midpoint-insertion LRU (Flashcache, seed `004_*`): one LRU list in which a
//! new item enters not at the head but part of the way down, so that an item
//! used once is evicted before the items that were hit.
//!
//! The list is kept as two queues: *main*, the part above the insertion point
//! (`insert_percent` of the capacity), and *probation*, the part below it. A
//! new item enters the head of probation; a hit moves the item to the head of
//! main; when main holds more than its share, its oldest item is demoted to the
//! head of probation; the victim is the oldest item of probation.
//! `insert_percent` 0 is plain LRU (everything lives in main), 100 inserts at
//! the tail (LIP); Flashcache inserts at the 75th percentile. Demotion happens
//! when space is needed, before the victim is chosen, so the order of the list
//! is that of a single list with a fixed insertion point once the cache is full.
//!
//! On the engine's segment log, which cannot move a hit item across queues, a
//! hit marks the item and moves it to the head of its queue; a marked item at
//! the tail of probation is promoted to main instead of being evicted.

use crate::{EvictionPolicy, HitAction, Queue, TailAction};

/// Flashcache's insertion point: 75% of the way down the list.
pub const FLASHCACHE_INSERT_PERCENT: u64 = 75;

#[derive(Debug, Clone, Copy)]
pub struct MidpointLru {
    /// How far down the list (percent of capacity from the head) new items enter.
    pub insert_percent: u64,
}

impl MidpointLru {
    pub fn new(insert_percent: u64) -> MidpointLru {
        MidpointLru {
            insert_percent: insert_percent.min(100),
        }
    }
}

impl Default for MidpointLru {
    fn default() -> Self {
        MidpointLru::new(FLASHCACHE_INSERT_PERCENT)
    }
}

impl EvictionPolicy for MidpointLru {
    fn name(&self) -> &'static str {
        "midlru"
    }
    fn insert_queue(&mut self, _key_hash: u64) -> Queue {
        if self.insert_percent == 0 {
            Queue::Main
        } else {
            Queue::Probation
        }
    }
    fn on_hit(&self, _freq: u8) -> (u8, HitAction) {
        (1, HitAction::MoveToHead)
    }
    fn on_hit_in(&self, _queue: Queue, _freq: u8) -> (u8, Option<Queue>) {
        (0, Some(Queue::Main))
    }
    fn victim_queue(&self, _probation_bytes: u64, main_bytes: u64, capacity: u64) -> Queue {
        if main_bytes * 100 > capacity * self.insert_percent {
            Queue::Main
        } else {
            Queue::Probation
        }
    }
    fn on_tail(&mut self, queue: Queue, _h: u64, freq: u8) -> (TailAction, u8) {
        match queue {
            // Demotion: the oldest of main crosses the insertion point.
            Queue::Main if self.insert_percent == 0 => (TailAction::Evict, 0),
            Queue::Main => (TailAction::Reinsert(Queue::Probation), 0),
            Queue::Probation if freq > 0 => (TailAction::Reinsert(Queue::Main), 0),
            Queue::Probation => (TailAction::Evict, 0),
        }
    }
}
