//! S3-FIFO (Yang et al., SOSP'23): new items enter a small probation queue
//! (10% of the bytes); an item hit while on probation moves to main at the
//! tail, others are evicted and remembered in a ghost list; a ghost hit enters
//! main directly; main is FIFO with reinsertion while the 2-bit counter is
//! above zero. Scan-resistant: one-hit wonders never reach main.

use crate::ghost::Ghost;
use crate::{EvictionPolicy, HitAction, Queue, TailAction, MAX_FREQ};

#[derive(Debug)]
pub struct S3Fifo {
    /// Share of capacity for the probation queue, in percent.
    pub small_percent: u64,
    /// Hits needed on probation to be promoted to main.
    pub promote_threshold: u8,
    ghost: Ghost,
}

impl Default for S3Fifo {
    fn default() -> Self {
        S3Fifo {
            small_percent: 10,
            promote_threshold: 1,
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
        match queue {
            Queue::Probation => {
                if freq >= self.promote_threshold {
                    (TailAction::Reinsert(Queue::Main), 0)
                } else {
                    self.ghost.insert(key_hash);
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
        self.ghost.set_capacity(items.max(16));
    }
}
