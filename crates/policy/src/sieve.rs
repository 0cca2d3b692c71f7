//! SIEVE (Zhang et al., NSDI'24): one FIFO queue and a hand. A hit sets a
//! visited bit and moves nothing. To evict, the hand walks from the oldest
//! item towards the newest: a visited item has its bit cleared and stays where
//! it is, the first unvisited one is evicted, and the hand rests there for the
//! next eviction, wrapping to the oldest item past the newest.
//!
//! The object-level cache keeps places ([`EvictionPolicy::reinsert_in_place`]).
//! The engine's segment log moves a kept item to the head instead, which makes
//! SIEVE behave as CLOCK there.

use crate::clock::Clock;
use crate::{EvictionPolicy, HitAction, Queue, TailAction};

/// SIEVE decides as CLOCK does (a hit sets the bit, a set bit at the hand is
/// cleared and the item kept); the difference is only where a kept item stays.
#[derive(Debug, Default, Clone, Copy)]
pub struct Sieve;

impl EvictionPolicy for Sieve {
    fn name(&self) -> &'static str {
        "sieve"
    }
    fn insert_queue(&mut self, key_hash: u64) -> Queue {
        Clock.insert_queue(key_hash)
    }
    fn on_hit(&self, freq: u8) -> (u8, HitAction) {
        Clock.on_hit(freq)
    }
    fn victim_queue(&self, p: u64, m: u64, c: u64) -> Queue {
        Clock.victim_queue(p, m, c)
    }
    fn on_tail(&mut self, q: Queue, h: u64, freq: u8) -> (TailAction, u8) {
        Clock.on_tail(q, h, freq)
    }
    fn reinsert_in_place(&self) -> bool {
        true
    }
}
