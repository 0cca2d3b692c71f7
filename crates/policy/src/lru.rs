//! LRU: a hit moves the item to the head; the tail is the least recently used.
//! On a segment log the move is a copy, so this policy is for comparison.

use crate::{EvictionPolicy, HitAction, Queue, TailAction};

#[derive(Debug, Default, Clone, Copy)]
pub struct Lru;

impl EvictionPolicy for Lru {
    fn name(&self) -> &'static str {
        "lru"
    }
    fn insert_queue(&mut self, _key_hash: u64) -> Queue {
        Queue::Main
    }
    fn on_hit(&self, freq: u8) -> (u8, HitAction) {
        (freq, HitAction::MoveToHead)
    }
    fn victim_queue(&self, _p: u64, _m: u64, _c: u64) -> Queue {
        Queue::Main
    }
    fn on_tail(&mut self, _q: Queue, _h: u64, freq: u8) -> (TailAction, u8) {
        (TailAction::Evict, freq)
    }
}
