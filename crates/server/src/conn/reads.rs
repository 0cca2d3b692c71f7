//! The connection's flash reads: the tokens that route a completed read
//! back to its connection and flight, the reads ahead for the gets
//! pipelined behind a waiting head request, the head's re-runs, and the
//! wait for the flash tier (back-pressure), which asks the crash journal
//! for the tombstones of the changes queued behind it.

use super::multiget::get_chunk;
use super::{Conn, GET_CHUNK_FLASH};
use crate::conn::prefetch::read_ahead;
use crate::ctx::Ctx;
use crate::stats::add;
use std::io;
use tiercache_engine::device::aligned::AlignedBuf;
use tiercache_engine::device::io::ReadOp;
use tiercache_engine::flash::ReadReq;
use tiercache_proto::{parse, Limits, Parsed, Request};

/// Read tokens: connection slot (24 bits), serial (16 bits), flight id
/// (8 bits), fetch slot (16 bits).
pub fn token_base(slot: usize, serial: u64) -> u64 {
    ((slot as u64) << 40) | ((serial & 0xFFFF) << 24)
}

/// A read token's connection slot, connection base, flight id and fetch slot.
pub fn split_token(token: u64) -> (usize, u64, u8, usize) {
    (
        (token >> 40) as usize,
        token & !0xFF_FFFF,
        (token >> 16) as u8,
        (token & 0xFFFF) as usize,
    )
}

impl Conn {
    /// The head request waits for flash: reads the records of the gets
    /// pipelined behind it, each into its own flight, so that they are
    /// here when their turn comes. `from` is the head's end in `rbuf`.
    pub(super) fn read_ahead(&mut self, rbuf: &[u8], ctx: &Ctx<'_>, limits: &Limits, from: usize) {
        let Some(reader) = ctx.reader else {
            return;
        };
        let from_at = self.pos + (from - self.rpos) as u64;
        let mut at = self.flights.ahead_to.max(from_at);
        while self.flights.may_read_ahead() {
            let start = self.rpos + (at - self.pos) as usize;
            let Parsed::Request { request, consumed } = parse(&rbuf[start..self.rend], limits)
            else {
                break;
            };
            // Of a multiget, the keys it answers first (see `process`).
            let request = match request {
                Request::Get(g) => Request::Get(get_chunk(&g, 0, GET_CHUNK_FLASH).0),
                r => r,
            };
            let flight = self.flights.push(at);
            read_ahead(&request, ctx, &mut flight.fetched, &mut self.reads);
            let mut r = reader.borrow_mut();
            for rr in self.reads.drain(..) {
                flight.waiting += 1;
                r.submit(read_op(self.token_base | u64::from(flight.id) << 16, rr));
            }
            drop(r);
            add(&ctx.stats.flash_reads_ahead, flight.waiting as u64);
            self.flights.pop_unneeded();
            at += consumed as u64;
        }
        self.flights.ahead_to = at;
    }

    /// The head request ran once more for its keys' flash records.
    pub(super) fn count_rerun(&mut self, head: u64) {
        let f = self.flights.head(head);
        f.reruns = f.reruns.saturating_add(1);
    }

    /// The head request waits for the flash tier (back-pressure): ask the
    /// crash journal now for the tombstones of the changes pipelined behind
    /// it (once per waiting request).
    pub(super) fn wait_busy(
        &mut self,
        rbuf: &[u8],
        ctx: &Ctx<'_>,
        limits: &Limits,
        consumed: usize,
    ) {
        self.busy = true;
        ctx.parked.set(true);
        if ctx.reader.is_some() && self.journal_ahead_at != Some(self.rpos) {
            self.journal_ahead_at = Some(self.rpos);
            let rest = &rbuf[self.rpos + consumed..self.rend];
            crate::conn::prefetch::journal_ahead(rest, limits, ctx);
        }
    }

    /// A flash read of this connection finished, after `queued_us` waiting
    /// for a reader.
    pub fn complete_read(
        &mut self,
        token: u64,
        result: io::Result<(AlignedBuf, usize)>,
        queued_us: u64,
        ctx: &Ctx<'_>,
    ) {
        let (_, base, id, slot) = split_token(token);
        if base != self.token_base {
            return;
        }
        let Some(flight) = self.flights.by_id(id) else {
            return;
        };
        if flight.waiting == 0 {
            return;
        }
        let flight_base = self.token_base | u64::from(id) << 16;
        complete(
            &mut flight.fetched,
            &mut flight.waiting,
            flight_base,
            slot,
            result,
            queued_us,
            ctx,
        );
    }
}

/// A read for `fetched`'s entry `slot` finished: its record is kept, or
/// the further read it needs is submitted (tokens from `flight_base`);
/// `waiting` counts down when the entry is done. Both protocols' connections.
pub(super) fn complete(
    fetched: &mut tiercache_engine::flash::Fetched,
    waiting: &mut usize,
    flight_base: u64,
    slot: usize,
    result: io::Result<(AlignedBuf, usize)>,
    queued_us: u64,
    ctx: &Ctx<'_>,
) {
    let engine = &ctx.shared.engine;
    if engine.flash().is_none() {
        return;
    }
    match engine.complete_read(fetched, slot, result, queued_us) {
        Some(more) => {
            if let Some(r) = ctx.reader {
                r.borrow_mut().submit(read_op(flight_base, more));
            }
        }
        None => *waiting -= 1,
    }
}

pub(super) fn read_op(base: u64, r: ReadReq) -> ReadOp {
    ReadOp {
        token: base | r.slot as u64,
        dev: r.dev,
        offset: r.offset,
        len: r.len,
    }
}
