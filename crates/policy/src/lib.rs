//! tiercache-policy: eviction policies as pure decision functions.
//!
//! A policy never stores items. The cache (the engine's segment log in the
//! server, or [`queue_cache::QueueCache`] in tests and the simulator) keeps items
//! in two FIFO queues, *probation* and *main*, and asks the policy:
//!
//! - where a new item goes ([`EvictionPolicy::insert_queue`]),
//! - what a hit does to the item's small frequency counter, and whether it
//!   moves to the head at once ([`EvictionPolicy::on_hit`], LRU only),
//! - which queue gives up its oldest item when space is needed
//!   ([`EvictionPolicy::victim_queue`]),
//! - whether that oldest item is evicted or reinserted ([`EvictionPolicy::on_tail`]).
//!
//! These four questions express FIFO, LRU, CLOCK (FIFO with reinsertion) and
//! S3-FIFO exactly, and map one-to-one onto a log of segments: reinsertion is a
//! copy to the head segment, so flash writes stay sequential.

pub mod clock;
pub mod fifo;
pub mod ghost;
pub mod lru;
pub mod queue_cache;
pub mod s3fifo;

/// The two queues a cache keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Queue {
    /// New items on probation (S3-FIFO's small queue). Unused by single-queue policies.
    Probation = 0,
    /// Items that proved themselves, or every item for single-queue policies.
    Main = 1,
}

/// What a hit does besides updating the frequency counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HitAction {
    Stay,
    /// Move the item to the head of its queue now (LRU).
    MoveToHead,
}

/// The fate of the oldest item of a queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TailAction {
    Evict,
    /// Copy to the head of this queue, with the returned frequency.
    Reinsert(Queue),
}

/// The largest frequency counter value a cache stores (2 bits).
pub const MAX_FREQ: u8 = 3;

/// An eviction policy. Implementations are small state machines; all item
/// state they need is the 2-bit frequency counter the cache stores per item
/// and the item's key hash.
pub trait EvictionPolicy: Send {
    /// Short name used on the command line and in stats (`fifo`, `lru`, `clock`, `s3fifo`).
    fn name(&self) -> &'static str;
    /// The queue a newly inserted item enters.
    fn insert_queue(&mut self, key_hash: u64) -> Queue;
    /// A hit: returns the new frequency counter and whether to move the item.
    fn on_hit(&self, freq: u8) -> (u8, HitAction);
    /// The queue whose oldest item should go next, given the bytes each holds
    /// and the cache's capacity in bytes.
    fn victim_queue(&self, probation_bytes: u64, main_bytes: u64, capacity: u64) -> Queue;
    /// The oldest item of `queue` is up for eviction: evict or reinsert it.
    /// Returns the action and the item's new frequency counter.
    fn on_tail(&mut self, queue: Queue, key_hash: u64, freq: u8) -> (TailAction, u8);
    /// Tells the policy roughly how many items the cache holds (sizes ghost lists).
    fn set_capacity_items(&mut self, _items: usize) {}
}

/// The policies available by name.
pub const POLICY_NAMES: &[&str] = &["s3fifo", "clock", "lru", "fifo"];

/// Builds a policy from its name (`s3fifo`, `clock`, `lru`, `fifo`).
pub fn by_name(name: &str) -> Option<Box<dyn EvictionPolicy>> {
    match name {
        "s3fifo" => Some(Box::new(s3fifo::S3Fifo::default())),
        "clock" => Some(Box::new(clock::Clock)),
        "lru" => Some(Box::new(lru::Lru)),
        "fifo" => Some(Box::new(fifo::Fifo)),
        _ => None,
    }
}
