//! S3-FIFO (Yang et al., SOSP'23): new items enter a small probation queue
//! (10% of the bytes); an item hit while on probation moves to main at the
//! tail, others are evicted and remembered in a ghost list; a ghost hit enters
//! main directly; main is FIFO with reinsertion while the 2-bit counter is
//! above zero. Scan-resistant: one-hit wonders never reach main.
//!
//! The ghost list holds as many keys as the cache holds items (the engine,
//! which tells the policy neither sizes nor capacity in bytes), or, once the
//! cache calls [`EvictionPolicy::set_capacity_bytes`] and passes sizes to
//! [`EvictionPolicy::on_tail_sized`] (the simulator's object-level cache),
//! `ghost_percent` (90) of the cache's bytes, each entry weighing its
//! object's size: libCacheSim's ghost FIFO.

use crate::ghost::Ghost;
use crate::{EvictionPolicy, HitAction, Queue, TailAction, MAX_FREQ};

#[derive(Debug)]
pub struct S3Fifo {
    /// Share of capacity for the probation queue, in percent.
    pub small_percent: u64,
    /// Hits needed on probation to be promoted to main.
    pub promote_threshold: u8,
    /// Ghost capacity as a share of the cache's bytes, in percent, when the
    /// cache gives the capacity in bytes.
    pub ghost_percent: u64,
    /// Whether the ghost is bounded in bytes (set by `set_capacity_bytes`).
    ghost_in_bytes: bool,
    ghost: Ghost,
}

impl Default for S3Fifo {
    fn default() -> Self {
        S3Fifo {
            small_percent: 10,
            promote_threshold: 1,
            ghost_percent: 90,
            ghost_in_bytes: false,
            ghost: Ghost::new(4096),
        }
    }
}

impl EvictionPolicy for S3Fifo {
    fn name(&self) -> &'static str {
        "s3fifo"
    }
    fn insert_queue(&mut self, key_hash: u64) -> Queue {
        if self.ghost.take(key_hash) {
            Queue::Main
        } else {
            Queue::Probation
        }
    }
    fn on_hit(&self, freq: u8) -> (u8, HitAction) {
        (freq.saturating_add(1).min(MAX_FREQ), HitAction::Stay)
    }
    fn victim_queue(&self, probation_bytes: u64, main_bytes: u64, capacity: u64) -> Queue {
        if main_bytes == 0 || probation_bytes * 100 >= capacity * self.small_percent {
            Queue::Probation
        } else {
            Queue::Main
        }
    }
    fn on_tail(&mut self, queue: Queue, key_hash: u64, freq: u8) -> (TailAction, u8) {
        self.on_tail_sized(queue, key_hash, freq, 1)
    }
    fn on_tail_sized(
        &mut self,
        queue: Queue,
        key_hash: u64,
        freq: u8,
        size: u64,
    ) -> (TailAction, u8) {
        match queue {
            Queue::Probation => {
                if freq >= self.promote_threshold {
                    (TailAction::Reinsert(Queue::Main), 0)
                } else {
                    let weight = if self.ghost_in_bytes { size } else { 1 };
                    self.ghost.insert_weighted(key_hash, weight);
                    (TailAction::Evict, 0)
                }
            }
            Queue::Main => {
                if freq > 0 {
                    (TailAction::Reinsert(Queue::Main), freq - 1)
                } else {
                    (TailAction::Evict, 0)
                }
            }
        }
    }
    fn set_capacity_items(&mut self, items: usize) {
        if !self.ghost_in_bytes {
            self.ghost.set_capacity(items.max(16));
        }
    }
    fn set_capacity_bytes(&mut self, bytes: u64) {
        self.ghost_in_bytes = true;
        self.ghost.set_capacity_weight(
            bytes / 100 * self.ghost_percent + bytes % 100 * self.ghost_percent / 100,
        );
    }
}
