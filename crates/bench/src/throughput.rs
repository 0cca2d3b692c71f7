//! Closed-loop mode, as fast as possible (like mc-crusher): each worker
//! thread drives its connections from one event loop, and every connection
//! keeps `pipeline` requests in flight, topping up as soon as replies arrive
//! (one write per batch of refills). Also runs the preload. Latencies here
//! are service times measured from the actual send (closed loop), which
//! hides queueing: use latency mode for latency claims.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Result;
use mio::{Events, Poll, Token};

use crate::conn::{Conn, Pending};
use crate::record::Recorder;
use crate::workload::{Protocol, Source};

/// What a closed-loop worker needs besides its sockets and sources.
pub struct ClosedParams {
    pub protocol: Protocol,
    pub pipeline: usize,
    /// Stop issuing after this long; `None` runs until the sources run dry.
    pub duration: Option<Duration>,
    /// How long to wait for outstanding replies once issuing stops.
    pub drain: Duration,
    pub interval_ns: u64,
    pub sla_interval_ns: u64,
    pub keep_samples: bool,
}

/// Nanoseconds since `t0` (0 before it).
#[inline]
pub fn ns_since(t0: Instant) -> u64 {
    Instant::now().saturating_duration_since(t0).as_nanos() as u64
}

/// Sleeps until `t` (the common start of all workers).
pub fn sleep_until(t: Instant) {
    let now = Instant::now();
    if t > now {
        std::thread::sleep(t - now);
    }
}

/// One closed-loop worker. `first_conn` numbers its connections in the
/// samples; `sources[i]` feeds connection `i`.
#[allow(clippy::too_many_arguments)]
pub fn closed_worker<S: Source>(
    streams: Vec<std::net::TcpStream>,
    first_conn: u32,
    mut sources: Vec<S>,
    p: &ClosedParams,
    t0: Instant,
    progress: &AtomicU64,
    abort: &AtomicBool,
) -> Result<Recorder> {
    let mut poll = Poll::new()?;
    let mut conns = Vec::with_capacity(streams.len());
    for (i, s) in streams.into_iter().enumerate() {
        conns.push(Conn::from_std(s, Token(i), poll.registry(), p.protocol)?);
    }
    let n = conns.len();
    let mut rec = Recorder::new(p.interval_ns, p.sla_interval_ns, p.keep_samples);
    let mut exhausted = vec![false; n];
    let end_ns = p.duration.map(|d| d.as_nanos() as u64);
    let pipeline = p.pipeline.max(1);
    sleep_until(t0);

    let fill = |c: &mut Conn, src: &mut S, exhausted: &mut bool, now: u64| {
        while c.outstanding() < pipeline {
            match src.next_op(c.wbuf()) {
                Some(op) => c.matcher.pending.push_back(Pending {
                    op,
                    intended_ns: now,
                    sent_ns: now,
                }),
                None => {
                    *exhausted = true;
                    break;
                }
            }
        }
    };
    let now = ns_since(t0);
    for i in 0..n {
        fill(&mut conns[i], &mut sources[i], &mut exhausted[i], now);
        conns[i].flush(poll.registry())?;
    }

    let mut events = Events::with_capacity(1024);
    let mut stopping = false;
    let mut drain_deadline = u64::MAX;
    loop {
        let now = ns_since(t0);
        if !stopping && (end_ns.is_some_and(|e| now >= e) || abort.load(Ordering::Relaxed)) {
            stopping = true;
            drain_deadline = now + p.drain.as_nanos() as u64;
        }
        let finished = conns
            .iter()
            .zip(&exhausted)
            .all(|(c, &ex)| (stopping || ex) && c.outstanding() == 0);
        if finished {
            break;
        }
        if stopping && now >= drain_deadline {
            for (i, c) in conns.iter_mut().enumerate() {
                for pd in c.matcher.pending.drain(..) {
                    rec.record_unanswered(first_conn + i as u32, &pd, now);
                }
            }
            break;
        }
        let timeout = if stopping {
            drain_deadline - now
        } else {
            end_ns.map_or(100_000_000, |e| e.saturating_sub(now).min(100_000_000))
        };
        poll.poll(&mut events, Some(Duration::from_nanos(timeout.max(1))))?;
        let now = ns_since(t0);
        for ev in events.iter() {
            let i = ev.token().0;
            let c = &mut conns[i];
            if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                let conn_id = first_conn + i as u32;
                let got = c.read(now, |d| rec.record(conn_id, d))?;
                progress.fetch_add(got as u64, Ordering::Relaxed);
            }
            if !stopping && !exhausted[i] {
                let t = ns_since(t0);
                fill(c, &mut sources[i], &mut exhausted[i], t);
            }
            c.flush(poll.registry())?;
        }
    }
    for c in &mut conns {
        rec.absorb_conn(c);
        c.deregister(poll.registry());
    }
    Ok(rec)
}
