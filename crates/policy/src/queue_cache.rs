//! An object-level cache with two queues driven by any [`EvictionPolicy`]:
//! capacity in bytes, no per-object overhead counted, insert on miss after
//! evicting until the object fits (libCacheSim's semantics). The engine runs the
//! same policies over segments; this cache runs them over objects, for the
//! conformance tests and for trace replay (`tiercache-sim`).
//!
//! Each queue is a doubly linked list threaded through one slab of nodes,
//! indexed by a hash map from object id to slot, so a hit, a move and an
//! eviction are O(1) and a replay allocates only while the cache grows.

use crate::{EvictionPolicy, Queue, TailAction};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

const NIL: u32 = u32::MAX;

/// Hashes a u64 object id with the splitmix64 finalizer: ids from traces are
/// often block numbers with zero low bits, so the bits must be mixed, and
/// SipHash would cost more than the rest of a request.
#[derive(Default)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        let mut z = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x100_0000_01b3);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// A hash map keyed by object id, with [`IdHasher`].
pub type IdMap<V> = HashMap<u64, V, BuildHasherDefault<IdHasher>>;

#[derive(Debug, Clone, Copy)]
struct Node {
    id: u64,
    size: u64,
    /// Towards the tail (the oldest item).
    older: u32,
    /// Towards the head (the newest item).
    newer: u32,
    freq: u8,
    queue: Queue,
}

#[derive(Debug, Clone, Copy)]
struct List {
    head: u32,
    tail: u32,
    bytes: u64,
    /// Where the next eviction looks, for in-place policies (NIL: the tail).
    hand: u32,
}

impl List {
    const EMPTY: List = List {
        head: NIL,
        tail: NIL,
        bytes: 0,
        hand: NIL,
    };
}

/// A byte-capacity cache over object ids.
pub struct QueueCache<P: EvictionPolicy> {
    policy: P,
    capacity: u64,
    map: IdMap<u32>,
    nodes: Vec<Node>,
    free: Vec<u32>,
    lists: [List; 2],
    in_place: bool,
    /// Objects evicted so far.
    pub evictions: u64,
}

impl<P: EvictionPolicy> QueueCache<P> {
    pub fn new(mut policy: P, capacity: u64) -> Self {
        let in_place = policy.reinsert_in_place();
        policy.set_capacity_bytes(capacity);
        QueueCache {
            policy,
            capacity,
            map: IdMap::default(),
            nodes: Vec::new(),
            free: Vec::new(),
            lists: [List::EMPTY; 2],
            in_place,
            evictions: 0,
        }
    }

    pub fn policy(&self) -> &P {
        &self.policy
    }

    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub fn used_bytes(&self) -> u64 {
        self.lists[0].bytes + self.lists[1].bytes
    }

    /// Bytes held by one queue.
    pub fn queue_bytes(&self, q: Queue) -> u64 {
        self.lists[q as usize].bytes
    }

    pub fn contains(&self, id: u64) -> bool {
        self.map.contains_key(&id)
    }

    /// A request: returns true on a hit; on a miss the object is inserted
    /// (unless it is larger than the whole cache). A hit does not change the
    /// stored size.
    #[inline]
    pub fn request(&mut self, id: u64, size: u64) -> bool {
        if let Some(&ix) = self.map.get(&id) {
            let n = &mut self.nodes[ix as usize];
            let (freq, to) = self.policy.on_hit_in(n.queue, n.freq);
            n.freq = freq;
            if let Some(to) = to {
                if !(n.queue == to && self.lists[to as usize].head == ix) {
                    self.unlink(ix);
                    self.link_head(ix, to);
                }
            }
            return true;
        }
        if size > self.capacity {
            return false;
        }
        // Ask where the object goes before evicting: eviction may push the
        // ghost entry that decides it out of the ghost list.
        let q = self.policy.insert_queue(id);
        while self.used_bytes() + size > self.capacity {
            if !self.evict_one() {
                break;
            }
        }
        let node = Node {
            id,
            size,
            older: NIL,
            newer: NIL,
            freq: 0,
            queue: q,
        };
        let ix = match self.free.pop() {
            Some(ix) => {
                self.nodes[ix as usize] = node;
                ix
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        };
        self.map.insert(id, ix);
        self.link_head(ix, q);
        self.policy.set_capacity_items(self.map.len());
        false
    }

    /// Removes an object (a delete); returns whether it was cached.
    pub fn remove(&mut self, id: u64) -> bool {
        match self.map.remove(&id) {
            Some(ix) => {
                self.unlink(ix);
                self.free.push(ix);
                true
            }
            None => false,
        }
    }

    fn link_head(&mut self, ix: u32, q: Queue) {
        let list = &mut self.lists[q as usize];
        let old_head = list.head;
        list.head = ix;
        if old_head == NIL {
            list.tail = ix;
        }
        let n = &mut self.nodes[ix as usize];
        list.bytes += n.size;
        n.queue = q;
        n.older = old_head;
        n.newer = NIL;
        if old_head != NIL {
            self.nodes[old_head as usize].newer = ix;
        }
    }

    fn unlink(&mut self, ix: u32) {
        let n = self.nodes[ix as usize];
        let list = &mut self.lists[n.queue as usize];
        list.bytes -= n.size;
        if list.hand == ix {
            list.hand = n.newer;
        }
        if n.older == NIL {
            list.tail = n.newer;
        } else {
            self.nodes[n.older as usize].newer = n.newer;
        }
        if n.newer == NIL {
            list.head = n.older;
        } else {
            self.nodes[n.newer as usize].older = n.older;
        }
    }

    /// Evicts one object (reinserting others as the policy says); false if empty.
    fn evict_one(&mut self) -> bool {
        loop {
            if self.map.is_empty() {
                return false;
            }
            let mut q =
                self.policy
                    .victim_queue(self.lists[0].bytes, self.lists[1].bytes, self.capacity);
            if self.lists[q as usize].tail == NIL {
                q = match q {
                    Queue::Main => Queue::Probation,
                    Queue::Probation => Queue::Main,
                };
            }
            let list = self.lists[q as usize];
            let ix = if list.hand != NIL {
                list.hand
            } else {
                list.tail
            };
            if ix == NIL {
                return false;
            }
            let n = self.nodes[ix as usize];
            match self.policy.on_tail_sized(q, n.id, n.freq, n.size) {
                (TailAction::Evict, _) => {
                    self.unlink(ix);
                    self.map.remove(&n.id);
                    self.free.push(ix);
                    self.evictions += 1;
                    return true;
                }
                (TailAction::Reinsert(to), freq) => {
                    self.nodes[ix as usize].freq = freq;
                    if self.in_place && to == q {
                        // The item keeps its place; the hand moves past it,
                        // to the oldest item after the newest (NIL).
                        self.lists[q as usize].hand = n.newer;
                    } else {
                        self.unlink(ix);
                        self.link_head(ix, to);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        clock::Clock, fifo::Fifo, lru::Lru, midpoint::MidpointLru, s3fifo::S3Fifo, sieve::Sieve,
        twoq::TwoQ,
    };

    /// Every policy: capacity holds, hits are hits, a repeated small working set stays.
    fn conformance<P: EvictionPolicy>(p: P) {
        let mut c = QueueCache::new(p, 100);
        for i in 0..1000u64 {
            c.request(i % 37, 1 + i % 7);
            assert!(c.used_bytes() <= 100, "{} over capacity", c.policy().name());
        }
        assert!(!c.request(5000, 10));
        assert!(
            c.request(5000, 10),
            "{}: just inserted must hit",
            c.policy().name()
        );
        assert!(
            !c.request(6000, 101),
            "larger than the cache is never stored"
        );
        assert!(!c.contains(6000));
        let mut small = QueueCache::new(Fifo, 10);
        for i in 0..5 {
            small.request(i, 2);
        }
        assert!((0..5).all(|i| small.contains(i)));
    }

    #[test]
    fn all_policies_conform() {
        conformance(Fifo);
        conformance(Lru);
        conformance(Clock);
        conformance(S3Fifo::default());
        conformance(Sieve);
        conformance(MidpointLru::default());
        conformance(MidpointLru::new(0));
        conformance(MidpointLru::new(100));
        conformance(TwoQ::default());
        for name in crate::POLICY_NAMES {
            conformance(crate::by_name(name).unwrap());
        }
    }

    #[test]
    fn fifo_evicts_oldest_even_if_hit() {
        let mut c = QueueCache::new(Fifo, 3);
        c.request(1, 1);
        c.request(2, 1);
        c.request(3, 1);
        c.request(1, 1);
        c.request(4, 1);
        assert!(!c.contains(1));
        assert!(c.contains(2));
    }

    #[test]
    fn lru_keeps_recently_used() {
        let mut c = QueueCache::new(Lru, 3);
        c.request(1, 1);
        c.request(2, 1);
        c.request(3, 1);
        c.request(1, 1);
        c.request(4, 1);
        assert!(c.contains(1));
        assert!(!c.contains(2));
    }

    #[test]
    fn clock_gives_a_second_chance() {
        let mut c = QueueCache::new(Clock, 3);
        c.request(1, 1);
        c.request(2, 1);
        c.request(3, 1);
        c.request(1, 1);
        c.request(4, 1);
        assert!(c.contains(1));
        assert!(!c.contains(2));
    }

    #[test]
    fn s3fifo_resists_a_scan() {
        let mut s3 = QueueCache::new(S3Fifo::default(), 100);
        let mut lru = QueueCache::new(Lru, 100);
        // A hot set of 50 keys, each used twice, then a scan of 1000 one-hit keys.
        for round in 0..3 {
            for k in 0..50 {
                s3.request(k, 1);
                lru.request(k, 1);
            }
            let _ = round;
        }
        for k in 1000..2000 {
            s3.request(k, 1);
            lru.request(k, 1);
        }
        let s3_hot = (0..50).filter(|&k| s3.contains(k)).count();
        let lru_hot = (0..50).filter(|&k| lru.contains(k)).count();
        assert_eq!(lru_hot, 0, "LRU loses the hot set to a scan");
        assert!(s3_hot >= 45, "S3-FIFO kept only {s3_hot} of 50 hot keys");
    }

    #[test]
    fn s3fifo_ghost_hit_goes_to_main() {
        let mut c = QueueCache::new(S3Fifo::default(), 20);
        for k in 0..40 {
            c.request(k, 1);
        }
        // Keys 0..20 were evicted from probation into the ghost, which keeps the
        // newest 18 bytes of them (90% of 20); key 5 comes back to main.
        assert!(!c.contains(5));
        c.request(5, 1);
        for k in 100..140 {
            c.request(k, 1);
        }
        assert!(
            c.contains(5),
            "a ghost hit enters main and survives new one-hit keys"
        );
    }

    /// A small deterministic pseudo-random request stream with skew and varied sizes.
    fn stream(n: usize) -> Vec<(u64, u64)> {
        let mut rng = crate::rng::Rng::xorshift(12345);
        (0..n)
            .map(|_| {
                let x = rng.next_u64();
                let id = (x % 500) * (x % 7) / 3;
                (id, 1 + id % 9)
            })
            .collect()
    }

    fn misses<P: EvictionPolicy>(p: P, cap: u64, reqs: &[(u64, u64)]) -> Vec<bool> {
        let mut c = QueueCache::new(p, cap);
        reqs.iter().map(|&(id, size)| c.request(id, size)).collect()
    }

    #[test]
    fn midpoint_at_zero_is_lru() {
        let reqs = stream(20_000);
        for cap in [10, 50, 200, 700] {
            let same = misses(MidpointLru::new(0), cap, &reqs) == misses(Lru, cap, &reqs);
            assert!(same, "capacity {cap}");
        }
    }

    #[test]
    fn midpoint_is_its_own_policy() {
        // On cloudPhysicsIO midlru and SIEVE happen to miss alike (hits are
        // rare there, and both keep what was hit and evict the rest in insertion
        // order); on a skewed stream they differ.
        let reqs = stream(20_000);
        let mid = misses(MidpointLru::default(), 60, &reqs);
        assert!(mid != misses(Sieve, 60, &reqs));
        assert!(mid != misses(MidpointLru::new(25), 60, &reqs));
    }

    #[test]
    fn midpoint_keeps_hit_items_through_a_scan() {
        let mut mid = QueueCache::new(MidpointLru::default(), 100);
        for _ in 0..2 {
            for k in 0..50 {
                mid.request(k, 1);
            }
        }
        for k in 1000..1200 {
            mid.request(k, 1);
        }
        let kept = (0..50).filter(|&k| mid.contains(k)).count();
        assert_eq!(kept, 50, "hit items sit above the insertion point");
    }

    #[test]
    fn twoq_a1in_hits_do_not_promote_but_ghost_hits_do() {
        let mut c = QueueCache::new(TwoQ::default(), 8);
        c.request(1, 1);
        c.request(1, 1);
        assert_eq!(
            c.queue_bytes(Queue::Main),
            0,
            "a hit in A1in changes nothing"
        );
        for k in 10..20 {
            c.request(k, 1);
        }
        assert!(!c.contains(1));
        c.request(1, 1);
        assert!(c.contains(1));
        assert_eq!(c.queue_bytes(Queue::Main), 1, "a ghost hit enters Am");
    }

    #[test]
    fn sieve_keeps_visited_items_in_place() {
        // Paper's example shape: the hand passes visited items without moving them.
        let mut c = QueueCache::new(Sieve, 4);
        for k in 1..=4 {
            c.request(k, 1);
        }
        c.request(1, 1);
        c.request(2, 1);
        c.request(5, 1); // hand clears 1 and 2, evicts 3, rests on 4
        assert!(!c.contains(3));
        c.request(6, 1); // 4 is unvisited: evicted
        assert!(!c.contains(4));
        // Now 1, 2, 5, 6 from oldest to newest, the hand on 5.
        c.request(5, 1);
        c.request(6, 1);
        c.request(1, 1);
        c.request(7, 1); // clears 5 and 6, wraps to the oldest, clears 1, evicts 2
        assert!(!c.contains(2));
        assert!([1, 5, 6, 7].iter().all(|&k| c.contains(k)));
        c.request(8, 1); // the hand rested after 2: 5 is next, unvisited now
        assert!(!c.contains(5) && c.contains(1));
    }

    #[test]
    fn boxed_policies_behave_as_the_concrete_ones() {
        let reqs = stream(5_000);
        for (name, cap) in [("lru", 60), ("sieve", 60), ("s3fifo", 60), ("2q", 60)] {
            let boxed = misses(crate::by_name(name).unwrap(), cap, &reqs);
            let concrete = match name {
                "lru" => misses(Lru, cap, &reqs),
                "sieve" => misses(Sieve, cap, &reqs),
                "s3fifo" => misses(S3Fifo::default(), cap, &reqs),
                _ => misses(TwoQ::default(), cap, &reqs),
            };
            assert!(boxed == concrete, "{name}");
        }
        assert!(crate::by_name("midlru:101").is_none());
        assert!(crate::by_name("lru:5").is_none());
        assert_eq!(crate::by_name("midlru:50").unwrap().name(), "midlru");
    }
}
