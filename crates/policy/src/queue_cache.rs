//! An object-level cache with two FIFO queues driven by any [`EvictionPolicy`]:
//! capacity in bytes, no per-object overhead counted, insert on miss after
//! evicting until the object fits (libCacheSim's semantics). The engine runs the
//! same policies over segments; this cache runs them over objects, for the
//! conformance tests and for trace replay.

use crate::{EvictionPolicy, HitAction, Queue, TailAction};
use std::collections::{HashMap, VecDeque};

#[derive(Debug, Clone, Copy)]
struct Obj {
    size: u64,
    freq: u8,
    queue: Queue,
    seq: u64,
}

/// A byte-capacity cache over object ids.
pub struct QueueCache<P: EvictionPolicy> {
    policy: P,
    capacity: u64,
    objects: HashMap<u64, Obj>,
    queues: [VecDeque<(u64, u64)>; 2],
    bytes: [u64; 2],
    seq: u64,
    /// Objects evicted so far.
    pub evictions: u64,
}

impl<P: EvictionPolicy> QueueCache<P> {
    pub fn new(policy: P, capacity: u64) -> Self {
        QueueCache {
            policy,
            capacity,
            objects: HashMap::new(),
            queues: [VecDeque::new(), VecDeque::new()],
            bytes: [0, 0],
            seq: 0,
            evictions: 0,
        }
    }

    pub fn policy(&self) -> &P {
        &self.policy
    }

    pub fn len(&self) -> usize {
        self.objects.len()
    }

    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    pub fn used_bytes(&self) -> u64 {
        self.bytes[0] + self.bytes[1]
    }

    pub fn contains(&self, id: u64) -> bool {
        self.objects.contains_key(&id)
    }

    /// A request: returns true on a hit; on a miss the object is inserted.
    pub fn request(&mut self, id: u64, size: u64) -> bool {
        if let Some(o) = self.objects.get_mut(&id) {
            let (freq, action) = self.policy.on_hit(o.freq);
            o.freq = freq;
            if action == HitAction::MoveToHead {
                let q = o.queue;
                self.seq += 1;
                o.seq = self.seq;
                self.queues[q as usize].push_back((id, self.seq));
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
        self.push(id, size, 0, q);
        self.policy.set_capacity_items(self.objects.len());
        false
    }

    fn push(&mut self, id: u64, size: u64, freq: u8, queue: Queue) {
        self.seq += 1;
        self.objects.insert(
            id,
            Obj {
                size,
                freq,
                queue,
                seq: self.seq,
            },
        );
        self.queues[queue as usize].push_back((id, self.seq));
        self.bytes[queue as usize] += size;
    }

    /// Pops the live oldest entry of a queue.
    fn pop_live(&mut self, q: Queue) -> Option<(u64, Obj)> {
        while let Some((id, seq)) = self.queues[q as usize].pop_front() {
            if let Some(o) = self.objects.get(&id) {
                if o.seq == seq && o.queue == q {
                    let o = *o;
                    self.objects.remove(&id);
                    self.bytes[q as usize] -= o.size;
                    return Some((id, o));
                }
            }
        }
        None
    }

    /// Evicts one object (reinserting others as the policy says); false if empty.
    fn evict_one(&mut self) -> bool {
        loop {
            if self.objects.is_empty() {
                return false;
            }
            let mut q = self
                .policy
                .victim_queue(self.bytes[0], self.bytes[1], self.capacity);
            if self.bytes[q as usize] == 0 {
                q = if q == Queue::Main {
                    Queue::Probation
                } else {
                    Queue::Main
                };
            }
            let Some((id, o)) = self.pop_live(q) else {
                return false;
            };
            match self.policy.on_tail(q, id, o.freq) {
                (TailAction::Evict, _) => {
                    self.evictions += 1;
                    return true;
                }
                (TailAction::Reinsert(to), freq) => self.push(id, o.size, freq, to),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{clock::Clock, fifo::Fifo, lru::Lru, s3fifo::S3Fifo};

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
        // Key 0 was evicted from probation into the ghost; it comes back to main.
        assert!(!c.contains(0));
        c.request(0, 1);
        for k in 100..140 {
            c.request(k, 1);
        }
        assert!(
            c.contains(0),
            "a ghost hit enters main and survives new one-hit keys"
        );
    }
}
