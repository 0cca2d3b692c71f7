//! FIFO: every item enters main and leaves in insertion order; hits change nothing.

use crate::{EvictionPolicy, HitAction, Queue, TailAction};

#[derive(Debug, Default, Clone, Copy)]
pub struct Fifo;

impl EvictionPolicy for Fifo {
    fn name(&self) -> &'static str {
        "fifo"
    }
    fn insert_queue(&mut self, _key_hash: u64) -> Queue {
        Queue::Main
    }
    fn on_hit(&self, freq: u8) -> (u8, HitAction) {
        (freq, HitAction::Stay)
    }
    fn victim_queue(&self, _p: u64, _m: u64, _c: u64) -> Queue {
        Queue::Main
    }
    fn on_tail(&mut self, _q: Queue, _h: u64, freq: u8) -> (TailAction, u8) {
        (TailAction::Evict, freq)
    }
}
