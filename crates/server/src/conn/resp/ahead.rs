//! Reading ahead on a RESP connection, as the memcached port does
//! (`conn/flights.rs`): while the head request waits for its flash reads,
//! the GETs and MGETs pipelined behind it have their keys' records read
//! too, each request into a flight of its own (keyed by its offset in the
//! input stream), so that a pipelined client keeps many reads in flight.
//! When such a request comes to the head it takes its flight's records
//! (and waits for any still in flight). Reading ahead is only a hint: the
//! request runs against the index as it is then, and a record that is no
//! longer its key's current one is ignored there and read again.

use super::RespConn;
use crate::conn::flights::{MAX_AHEAD, MAX_READS};
use crate::conn::reads::read_op;
use crate::ctx::Ctx;
use crate::protocol::resp::cmd::{for_each_key, lookup};
use crate::protocol::resp::codec::{parse_into, Parsed};
use crate::stats::add;
use std::collections::VecDeque;
use tiercache_engine::flash::Fetched;

/// One request read ahead.
#[derive(Debug, Default)]
pub struct Flight {
    /// Input stream offset of the request.
    at: u64,
    /// Carried in its read tokens.
    pub id: u8,
    pub fetched: Fetched,
    /// Reads still in flight.
    pub waiting: usize,
}

/// A connection's flights ahead of the head, in input order.
#[derive(Debug, Default)]
pub struct Ahead {
    flights: VecDeque<Flight>,
    /// Input stream offset up to which requests were looked at.
    to: u64,
    next_id: u8,
}

impl Ahead {
    /// A read-token id for the head or a flight, neither `head` (the head
    /// request's) nor any flight's: completions find their flight by it.
    /// The counter alone does not ensure that: every head request answered
    /// takes an id, so a get read ahead behind 256 pipelined SETs would
    /// share its id with the head, and its read, credited to the head, was
    /// lost (the memcached port's stall, `Flights::make`). At most
    /// MAX_AHEAD + 1 ids are in use, far fewer than 256.
    pub fn new_id(&mut self, head: u8) -> u8 {
        loop {
            self.next_id = self.next_id.wrapping_add(1);
            let id = self.next_id;
            if id != head && !self.flights.iter().any(|f| f.id == id) {
                return id;
            }
        }
    }

    /// The flight of the request at stream offset `at`, if it was read
    /// ahead (taken out); flights of requests before it are dropped.
    pub fn take(&mut self, at: u64) -> Option<Flight> {
        while self.flights.front().is_some_and(|f| f.at < at) {
            self.flights.pop_front();
        }
        match self.flights.front() {
            Some(f) if f.at == at => self.flights.pop_front(),
            _ => None,
        }
    }

    /// The flight a read token's id names.
    pub fn by_id(&mut self, id: u8) -> Option<&mut Flight> {
        self.flights.iter_mut().find(|f| f.id == id)
    }

    fn may_read_ahead(&self) -> bool {
        self.flights.len() < MAX_AHEAD
            && self.flights.iter().map(|f| f.waiting).sum::<usize>() < MAX_READS
    }
}

/// Whether the request is one whose records are read ahead (GET, MGET).
fn reads_ahead(args: &[&[u8]]) -> bool {
    args.first()
        .and_then(|n| lookup(n))
        .is_some_and(|s| matches!(s.name, "get" | "mget"))
}

impl RespConn {
    /// The head request, at stream offset `self.pos`, takes the records
    /// read ahead for it, if any. True if it did.
    pub(super) fn adopt_ahead(&mut self) -> bool {
        if self.started.is_some() {
            return false;
        }
        let Some(f) = self.ahead.take(self.pos) else {
            return false;
        };
        self.fetched = f.fetched;
        self.waiting = f.waiting;
        self.flight = f.id;
        true
    }

    /// The head waits for flash reads: reads ahead the records of the gets
    /// pipelined behind it. `from` is the head's end in `rbuf`.
    pub(super) fn read_ahead(&mut self, rbuf: &[u8], from: usize, ctx: &Ctx<'_>, max_bulk: usize) {
        let Some(reader) = ctx.reader else {
            return;
        };
        if !self.sess.authed || self.sess.multi.is_some() {
            return;
        }
        let engine = &ctx.shared.engine;
        let mut at = self.ahead.to.max(self.pos + (from - self.rpos) as u64);
        let mut args: Vec<&[u8]> = Vec::new();
        while self.ahead.may_read_ahead() {
            let start = self.rpos + (at - self.pos) as usize;
            if start >= self.rend {
                break;
            }
            let consumed = match parse_into(&rbuf[start..self.rend], max_bulk, false, &mut args) {
                Parsed::Command { consumed } => consumed,
                // Inline commands are run, not read ahead.
                Parsed::Inline { consumed, .. } => {
                    args.clear();
                    consumed
                }
                Parsed::Incomplete | Parsed::Error(_) => break,
            };
            if reads_ahead(&args) {
                let mut fetched = Fetched::default();
                for_each_key(&args, &self.sess, &mut |k| {
                    engine.probe(k, ctx.now, &mut fetched, &mut self.reads)
                });
                if !self.reads.is_empty() {
                    let id = self.ahead.new_id(self.flight);
                    let base = self.token_base | u64::from(id) << 16;
                    let waiting = self.reads.len();
                    let mut r = reader.borrow_mut();
                    for rr in self.reads.drain(..) {
                        r.submit(read_op(base, rr));
                    }
                    add(&self.sess.stats.flash_reads_ahead, waiting as u64);
                    self.ahead.flights.push_back(Flight {
                        at,
                        id,
                        fetched,
                        waiting,
                    });
                }
            }
            at += consumed as u64;
        }
        self.ahead.to = at;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flight_is_taken_once_by_its_request_and_earlier_ones_go() {
        let mut a = Ahead::default();
        for at in [10, 20, 30] {
            let id = a.new_id(0);
            a.flights.push_back(Flight {
                at,
                id,
                ..Flight::default()
            });
        }
        assert!(a.take(5).is_none(), "no flight of its own");
        let id20 = a.flights[1].id;
        assert!(a.by_id(id20).is_some());
        let f = a.take(20).expect("read ahead");
        assert_eq!((f.at, f.id), (20, id20));
        assert!(a.by_id(id20).is_none(), "taken");
        assert!(a.take(20).is_none());
        assert_eq!(a.flights.len(), 1, "10 dropped, 30 left");
        assert!(reads_ahead(&[b"mget", b"a"]) && reads_ahead(&[b"GET", b"a"]));
        assert!(!reads_ahead(&[b"SET", b"a", b"b"]) && !reads_ahead(&[]));
    }

    #[test]
    fn ids_stay_unique_while_a_flight_waits_past_256_heads() {
        let mut a = Ahead::default();
        let mut head = a.new_id(0);
        let id = a.new_id(head);
        a.flights.push_back(Flight {
            at: 10,
            id,
            waiting: 1,
            ..Flight::default()
        });
        // Heads answered one after another (pipelined SETs) take an id each.
        for _ in 0..1000 {
            head = a.new_id(head);
            assert_ne!(head, id, "the head took the id of a flight read ahead");
        }
        let later = a.new_id(head);
        assert!(later != head && later != id);
    }
}
