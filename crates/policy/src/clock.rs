//! CLOCK (FIFO with 1-bit reinsertion): a hit sets the bit; at the tail a set
//! bit is cleared and the item goes back to the head, else it is evicted.

use crate::{EvictionPolicy, HitAction, Queue, TailAction};

#[derive(Debug, Default, Clone, Copy)]
pub struct Clock;

impl EvictionPolicy for Clock {
    fn name(&self) -> &'static str {
        "clock"
    }
    fn insert_queue(&mut self, _key_hash: u64) -> Queue {
        Queue::Main
    }
    fn on_hit(&self, _freq: u8) -> (u8, HitAction) {
        (1, HitAction::Stay)
    }
    fn victim_queue(&self, _p: u64, _m: u64, _c: u64) -> Queue {
        Queue::Main
    }
    fn on_tail(&mut self, _q: Queue, _h: u64, freq: u8) -> (TailAction, u8) {
        if freq > 0 {
            (TailAction::Reinsert(Queue::Main), 0)
        } else {
            (TailAction::Evict, 0)
        }
    }
}
