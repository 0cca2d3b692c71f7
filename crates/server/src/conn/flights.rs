//! The flash reads of one connection's pipelined requests. Requests still
//! run one at a time, in order; but while the request at the head of the
//! input waits for its records, the gets queued behind it have theirs read
//! already (each request its own [`Fetched`], keyed by its position in the
//! input stream), so a pipelined connection keeps many reads in flight and
//! its replies still leave in request order.
//!
//! Reading ahead is only a hint: a request runs against the index as it is
//! when its turn comes, and a record fetched early that is no longer the
//! key's current one is ignored there (`Shard::still_valid`) and read again.

use std::collections::VecDeque;
use tiercache_engine::flash::Fetched;

/// Requests read ahead of the head, at most.
pub const MAX_AHEAD: usize = 32;
/// Reads in flight for one connection beyond which it stops reading ahead.
pub const MAX_READS: usize = 128;

/// One request's records.
#[derive(Debug, Default)]
pub struct Flight {
    /// Input stream offset of the request.
    pub at: u64,
    /// Carried in its read tokens.
    pub id: u8,
    pub fetched: Fetched,
    /// Reads still in flight.
    pub waiting: usize,
    /// Times the request ran and asked for its records to be read (again):
    /// bounds the reruns of a delete whose key keeps moving to flash.
    pub reruns: u8,
}

/// A connection's flights, in input order.
#[derive(Debug, Default)]
pub struct Flights {
    queue: VecDeque<Flight>,
    next_id: u8,
    /// Input stream offset up to which requests were already looked at.
    pub ahead_to: u64,
}

impl Flights {
    /// A new, empty flight for the request at `at`, with an id no other
    /// flight has: completions find their flight by it ([`by_id`](Self::by_id)).
    /// The counter alone does not ensure that: every request read ahead
    /// takes an id, the sets dropped at once among them, so a get read
    /// ahead behind hundreds of pipelined sets was still waiting when the
    /// counter came round to its id; the read of the newer flight was then
    /// credited to it, and the newer one waited forever (one connection
    /// stalled after about 380,000 sets of 100 new keys per `mg`). The ids
    /// of live flights are skipped: at most MAX_AHEAD + 2 exist, far fewer
    /// than 256, and none is dropped with reads in flight.
    fn make(&mut self, at: u64) -> Flight {
        self.next_id = self.next_id.wrapping_add(1);
        while self.queue.iter().any(|f| f.id == self.next_id) {
            self.next_id = self.next_id.wrapping_add(1);
        }
        Flight {
            at,
            id: self.next_id,
            ..Flight::default()
        }
    }

    /// The flight of the request at input offset `at` (the head), made
    /// if it has none; flights of requests before it are gone.
    pub fn head(&mut self, at: u64) -> &mut Flight {
        while self.queue.front().is_some_and(|f| f.at < at) {
            self.queue.pop_front();
        }
        if self.queue.front().is_none_or(|f| f.at != at) {
            let f = self.make(at);
            self.queue.push_front(f);
        }
        self.queue.front_mut().expect("just made")
    }

    /// Reads the head request at `at` still waits for.
    pub fn head_waiting(&self, at: u64) -> usize {
        match self.queue.front() {
            Some(f) if f.at == at => f.waiting,
            _ => 0,
        }
    }

    /// The head request at `at` ran: its records are dropped.
    pub fn done(&mut self, at: u64) {
        if self.queue.front().is_some_and(|f| f.at == at) {
            self.queue.pop_front();
        }
    }

    /// Whether another request may be read ahead.
    pub fn may_read_ahead(&self) -> bool {
        self.queue.len() <= MAX_AHEAD
            && self.queue.iter().map(|f| f.waiting).sum::<usize>() < MAX_READS
    }

    /// Adds the flight of a request read ahead at `at` (after every
    /// existing one); the caller fills it and counts its reads.
    pub fn push(&mut self, at: u64) -> &mut Flight {
        let f = self.make(at);
        self.queue.push_back(f);
        self.queue.back_mut().expect("just pushed")
    }

    /// Drops a flight that turned out to need no reads (the last pushed).
    pub fn pop_unneeded(&mut self) {
        if self.queue.back().is_some_and(|f| f.waiting == 0) {
            self.queue.pop_back();
        }
    }

    /// The flight a read token's id names.
    pub fn by_id(&mut self, id: u8) -> Option<&mut Flight> {
        self.queue.iter_mut().find(|f| f.id == id)
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_is_made_once_and_earlier_flights_go() {
        let mut f = Flights::default();
        f.push(10).waiting = 2;
        f.push(20).waiting = 1;
        // The head at 5 comes before both: a new flight in front.
        let id5 = f.head(5).id;
        assert_eq!(f.head(5).id, id5, "same flight on a second call");
        assert_eq!(f.head_waiting(5), 0);
        f.done(5);
        // Now the flight read ahead at 10 is the head, with its reads.
        assert_eq!(f.head_waiting(10), 2);
        let id10 = f.head(10).id;
        assert_ne!(id10, id5);
        assert_eq!(f.by_id(id10).map(|x| x.at), Some(10));
        // Skipping to 20 drops the flight at 10.
        assert_eq!(f.head_waiting(20), 0, "10 is still in front");
        assert_eq!(f.head(20).waiting, 1);
        assert!(f.by_id(id10).is_none());
        f.done(20);
        assert!(f.is_empty());
    }

    #[test]
    fn ids_stay_unique_while_a_flight_waits_past_256_others() {
        let mut f = Flights::default();
        let head = f.head(0).id;
        f.queue[0].waiting = 1;
        let early = f.push(10_000);
        early.waiting = 1;
        let early = early.id;
        // Requests read ahead that need no reads take an id each.
        for at in 10_001..11_000 {
            let id = f.push(at).id;
            assert!(id != head && id != early, "id {id} reused at {at}");
            f.pop_unneeded();
        }
        let late = f.push(11_000);
        late.waiting = 1;
        let late = late.id;
        assert!(late != head && late != early);
        assert_eq!(f.by_id(early).map(|x| x.at), Some(10_000));
        assert_eq!(f.by_id(late).map(|x| x.at), Some(11_000));
        // New head flights (each request's, before the ones read ahead)
        // skip the ids in use too.
        f.done(0);
        for at in 1..1000 {
            let id = f.head(at).id;
            assert!(id != early && id != late, "head id {id} reused at {at}");
        }
    }

    #[test]
    fn read_ahead_is_bounded() {
        let mut f = Flights::default();
        let mut at = 0;
        while f.may_read_ahead() {
            at += 1;
            f.push(at).waiting = 1;
        }
        assert_eq!(f.queue.len(), MAX_AHEAD + 1);
        let mut g = Flights::default();
        g.push(1).waiting = MAX_READS;
        assert!(!g.may_read_ahead());
    }

    #[test]
    fn unneeded_flight_is_dropped_but_not_one_with_reads() {
        let mut f = Flights::default();
        f.push(1).waiting = 1;
        f.push(2);
        f.pop_unneeded();
        f.pop_unneeded();
        assert_eq!(f.queue.len(), 1);
        assert_eq!(f.queue[0].at, 1);
    }
}
