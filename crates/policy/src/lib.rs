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
//!
//! Two optional questions, with defaults that keep the four above unchanged,
//! let an object-level cache run policies that a segment log can only
//! approximate:
//!
//! - [`EvictionPolicy::on_hit_in`]: a hit that depends on the item's queue or
//!   moves it to another queue at once (midpoint-insertion LRU, 2Q);
//! - [`EvictionPolicy::reinsert_in_place`]: a reinsertion that keeps the item
//!   where it is and moves an eviction hand past it (SIEVE).
//!
//! The engine's segment log calls only the four core methods; there SIEVE acts
//! as CLOCK (keeping a place would need a copy anyway), and midpoint LRU and 2Q
//! promote a hit item when it reaches the tail of its queue rather than at once.
//!
//! Two more pure decisions shared by several front ends live here: [`nhc`]
//! (where a hit is served from, when the fast tier is loaded) and [`sla`]
//! (which minutes count as unavailable under seed `002_*`'s latency tiers,
//! for the server's `stats sla` and `tiercache-bench`).
//!
//! [`rng`] is the one deterministic pseudo-random generator of the tests, the
//! simulator and the load generator (every crate that needs one depends on
//! this one).

pub mod clock;
pub mod fifo;
pub mod ghost;
pub mod lru;
pub mod midpoint;
pub mod nhc;
pub mod queue_cache;
pub mod rng;
pub mod s3fifo;
pub mod sieve;
pub mod sla;
pub mod twoq;

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
    /// Tells the policy the cache's capacity in bytes, for a cache that knows
    /// each item's size and passes it to [`on_tail_sized`](Self::on_tail_sized)
    /// (the object-level [`QueueCache`](queue_cache::QueueCache)). S3-FIFO then
    /// sizes its ghost list in bytes, as libCacheSim does. The engine does not
    /// call it, and keeps ghost lists counted in items.
    fn set_capacity_bytes(&mut self, _bytes: u64) {}
    /// [`on_tail`](Self::on_tail) with the item's size in bytes. The default
    /// ignores the size.
    fn on_tail_sized(
        &mut self,
        queue: Queue,
        key_hash: u64,
        freq: u8,
        _size: u64,
    ) -> (TailAction, u8) {
        self.on_tail(queue, key_hash, freq)
    }
    /// A hit on an item that sits in `queue`, for a cache that can move an
    /// item to any queue at once (the object-level
    /// [`QueueCache`](queue_cache::QueueCache)): returns the new frequency
    /// counter and the queue to whose head the item moves now (`None`: it
    /// stays where it is). The default is [`on_hit`](Self::on_hit), moving
    /// within the item's own queue.
    fn on_hit_in(&self, queue: Queue, freq: u8) -> (u8, Option<Queue>) {
        let (freq, action) = self.on_hit(freq);
        (freq, (action == HitAction::MoveToHead).then_some(queue))
    }
    /// Whether a [`TailAction::Reinsert`] into the item's own queue keeps the
    /// item in place and moves the queue's eviction hand past it (SIEVE),
    /// rather than moving it to the head (CLOCK). A segment log cannot keep a
    /// place without a copy, so the engine always moves it.
    fn reinsert_in_place(&self) -> bool {
        false
    }
}

/// The policies available by name. Some take a parameter after a colon
/// (`midlru:75`, `2q:25`, `s3fifo:10`, `s3fifo:10:2`); see [`by_name`].
pub const POLICY_NAMES: &[&str] = &["s3fifo", "clock", "lru", "fifo", "sieve", "midlru", "2q"];

/// Builds a policy from its name (`s3fifo`, `clock`, `lru`, `fifo`, `sieve`,
/// `midlru`, `2q`), optionally followed by `:N`, a percentage:
/// `midlru:N` inserts new items N% of the way down the LRU list (default 75,
/// Flashcache's midpoint; 0 is plain LRU), `2q:N` gives the A1in FIFO N% of
/// the bytes (default 25), `s3fifo:N` gives the small queue N% (default 10)
/// and `s3fifo:N:T` also sets the hits needed to leave it (default 1).
pub fn by_name(spec: &str) -> Option<Box<dyn EvictionPolicy>> {
    let mut parts = spec.split(':');
    let name = parts.next()?;
    let mut params = parts.map(|p| p.parse::<u64>().ok().filter(|&p| p <= 100));
    let param = match params.next() {
        Some(p) => Some(p?),
        None => None,
    };
    let second = match params.next() {
        Some(p) => Some(p?),
        None => None,
    };
    if params.next().is_some() || (second.is_some() && name != "s3fifo") {
        return None;
    }
    let plain = |p: Box<dyn EvictionPolicy>| param.is_none().then_some(p);
    match name {
        "s3fifo" => {
            let mut p = s3fifo::S3Fifo::default();
            p.small_percent = param.unwrap_or(p.small_percent);
            p.promote_threshold =
                second.map_or(p.promote_threshold, |t| t.min(MAX_FREQ as u64) as u8);
            Some(Box::new(p))
        }
        "clock" => plain(Box::new(clock::Clock)),
        "lru" => plain(Box::new(lru::Lru)),
        "fifo" => plain(Box::new(fifo::Fifo)),
        "sieve" => plain(Box::new(sieve::Sieve)),
        "midlru" => Some(Box::new(midpoint::MidpointLru::new(
            param.unwrap_or(midpoint::FLASHCACHE_INSERT_PERCENT),
        ))),
        "2q" => Some(Box::new(twoq::TwoQ::new(
            param.unwrap_or(twoq::DEFAULT_A1IN_PERCENT),
        ))),
        _ => None,
    }
}

impl<P: EvictionPolicy + ?Sized> EvictionPolicy for Box<P> {
    fn name(&self) -> &'static str {
        (**self).name()
    }
    fn insert_queue(&mut self, key_hash: u64) -> Queue {
        (**self).insert_queue(key_hash)
    }
    fn on_hit(&self, freq: u8) -> (u8, HitAction) {
        (**self).on_hit(freq)
    }
    fn victim_queue(&self, probation_bytes: u64, main_bytes: u64, capacity: u64) -> Queue {
        (**self).victim_queue(probation_bytes, main_bytes, capacity)
    }
    fn on_tail(&mut self, queue: Queue, key_hash: u64, freq: u8) -> (TailAction, u8) {
        (**self).on_tail(queue, key_hash, freq)
    }
    fn set_capacity_items(&mut self, items: usize) {
        (**self).set_capacity_items(items)
    }
    fn set_capacity_bytes(&mut self, bytes: u64) {
        (**self).set_capacity_bytes(bytes)
    }
    fn on_tail_sized(
        &mut self,
        queue: Queue,
        key_hash: u64,
        freq: u8,
        size: u64,
    ) -> (TailAction, u8) {
        (**self).on_tail_sized(queue, key_hash, freq, size)
    }
    fn on_hit_in(&self, queue: Queue, freq: u8) -> (u8, Option<Queue>) {
        (**self).on_hit_in(queue, freq)
    }
    fn reinsert_in_place(&self) -> bool {
        (**self).reinsert_in_place()
    }
}
