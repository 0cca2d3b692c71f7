//! A RESP connection's head request and the flash tier: the request runs
//! with the records read for it so far; when it stops for more
//! ([`crate::protocol::resp::db`]), every key it names is probed and the
//! reads go to the worker's asynchronous reader with tokens that route
//! their completions back here; once all completed, it runs again. After
//! [`MAX_REREADS`] runs that stopped for reads it runs without asking
//! (a key whose records keep moving is a miss, as on the memcached port).

use super::RespConn;
use crate::conn::reads::{complete, read_op};
use crate::conn::split_token;
use crate::ctx::Ctx;
use crate::protocol::resp::cmd::{dispatch, for_each_key};
use crate::protocol::resp::db::Run;
use std::io;
use tiercache_engine::command::Wait;
use tiercache_engine::device::aligned::AlignedBuf;
use tiercache_engine::flash::Fetched;

/// Runs of one request that may stop for reads.
const MAX_REREADS: u8 = 3;

impl RespConn {
    /// Runs the request at the head of the input. True when it is done
    /// (its reply is in the output); false when it waits for flash reads
    /// or for the flash tier (it runs again when they are done).
    pub(super) fn run_head(&mut self, args: &[&[u8]], ctx: &Ctx<'_>) -> bool {
        loop {
            let prev_end = self.prev_end.take();
            let started = *self.started.get_or_insert_with(|| {
                prev_end.unwrap_or_else(tiercache_engine::clock::Instant::now)
            });
            let mark = self.out.buf.len();
            let resp3 = self.out.resp3;
            let fetched = std::mem::take(&mut self.fetched);
            let asynch = ctx.reader.is_some();
            // A worker never waits: a command that has changed nothing
            // stops on any wait (reads arise only with a flash tier, whose
            // reader it has; an insert told to wait for the evacuator may
            // arise without one) and runs again.
            let mut run = Run::new(
                &fetched,
                asynch && self.reruns < MAX_REREADS,
                started,
                ctx.now,
            );
            run.probed = self.reruns > 0;
            dispatch(args, &mut self.out, &mut self.sess, &self.env, &run);
            let (stopped, finished) = (run.stopped(), run.finished());
            self.fetched = fetched;
            let Some(wait) = stopped else {
                self.prev_end = finished;
                self.head_done();
                return true;
            };
            // The run changed nothing: its reply goes, it runs again.
            self.out.buf.truncate(mark);
            self.out.resp3 = resp3;
            if wait == Wait::Busy {
                self.busy = true;
                ctx.parked.set(true);
                return false;
            }
            self.reruns += 1;
            if self.probe(args, ctx) {
                return false;
            }
            // The records were in write buffers: copied already.
        }
    }

    /// The head request is answered: its records and reads go.
    fn head_done(&mut self) {
        self.fetched = Fetched::default();
        self.reruns = 0;
        self.waiting = 0;
        self.flight = self.ahead.new_id(self.flight);
        self.started = None;
    }

    /// Probes every key of the head request; submits the reads it needs.
    /// True if it must wait for them.
    fn probe(&mut self, args: &[&[u8]], ctx: &Ctx<'_>) -> bool {
        let engine = &ctx.shared.engine;
        let (fetched, reads) = (&mut self.fetched, &mut self.reads);
        for_each_key(args, &self.sess, &mut |k| {
            engine.probe(k, ctx.now, fetched, reads)
        });
        let Some(reader) = ctx.reader else {
            self.reads.clear();
            return false;
        };
        if self.reads.is_empty() {
            return false;
        }
        let base = self.token_base | u64::from(self.flight) << 16;
        let mut r = reader.borrow_mut();
        for rr in self.reads.drain(..) {
            self.waiting += 1;
            r.submit(read_op(base, rr));
        }
        true
    }

    /// A flash read of this connection finished, after `queued_us`
    /// waiting for a reader.
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
        let (fetched, waiting) = if id == self.flight {
            (&mut self.fetched, &mut self.waiting)
        } else if let Some(f) = self.ahead.by_id(id) {
            // A get read ahead (see `ahead`).
            (&mut f.fetched, &mut f.waiting)
        } else {
            return;
        };
        if *waiting == 0 {
            return;
        }
        let base = self.token_base | u64::from(id) << 16;
        complete(fetched, waiting, base, slot, result, queued_us, ctx);
    }
}
