//! A bounded FIFO set of key hashes: remembers what was recently evicted from
//! probation, so that a returning key goes straight to main (S3-FIFO's ghost queue).

use std::collections::{HashMap, VecDeque};

#[derive(Debug, Default)]
pub struct Ghost {
    order: VecDeque<(u64, u64)>,
    members: HashMap<u64, u64>,
    seq: u64,
    capacity: usize,
}

impl Ghost {
    pub fn new(capacity: usize) -> Ghost {
        Ghost {
            capacity,
            ..Default::default()
        }
    }

    pub fn set_capacity(&mut self, capacity: usize) {
        self.capacity = capacity;
        self.trim();
    }

    pub fn len(&self) -> usize {
        self.members.len()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    pub fn insert(&mut self, hash: u64) {
        self.seq += 1;
        self.members.insert(hash, self.seq);
        self.order.push_back((hash, self.seq));
        self.trim();
    }

    /// Removes and reports whether the hash was present.
    pub fn take(&mut self, hash: u64) -> bool {
        self.members.remove(&hash).is_some()
    }

    fn trim(&mut self) {
        while self.members.len() > self.capacity || self.order.len() > 2 * self.capacity + 16 {
            match self.order.pop_front() {
                Some((h, s)) => {
                    if self.members.get(&h) == Some(&s) {
                        self.members.remove(&h);
                    }
                }
                None => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_and_fifo() {
        let mut g = Ghost::new(2);
        g.insert(1);
        g.insert(2);
        g.insert(3);
        assert!(!g.take(1));
        assert!(g.take(3));
        assert!(!g.take(3));
        assert_eq!(g.len(), 1);
    }
}
