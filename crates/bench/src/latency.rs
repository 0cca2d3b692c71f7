//! Open-loop latency mode. Requests go out on the fixed-rate [`Schedule`]
//! whether or not earlier replies have come back (they are pipelined on the
//! connection), and latency is measured from the *intended* send time, so a
//! server that stalls is charged for every request that should have been sent
//! during the stall (no coordinated omission). Each worker runs one event
//! loop; a `timerfd` wakes it at the next intended time with nanosecond
//! precision (epoll's own timeout is rounded to milliseconds). The gap between
//! intended and actual send is recorded as "send lag", so a client that
//! cannot keep up is visible instead of silently lowering the load.

use std::fs::File;
use std::io::Read;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use rustix::time::{
    timerfd_create, timerfd_settime, Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags,
    Timespec,
};

use crate::conn::{Conn, Pending};
use crate::record::Recorder;
use crate::schedule::Schedule;
use crate::throughput::{ns_since, sleep_until};
use crate::workload::{Protocol, Source};

const TIMER: Token = Token(usize::MAX);

/// What an open-loop worker needs besides its sockets and generators.
pub struct OpenParams {
    pub protocol: Protocol,
    /// Requests per second over all connections of the run.
    pub rate: f64,
    pub total_conns: u64,
    pub duration: Duration,
    pub drain: Duration,
    pub interval_ns: u64,
    pub sla_interval_ns: u64,
    pub keep_samples: bool,
}

/// A one-shot monotonic timer, armed relative to now.
struct Timer {
    file: File,
    armed_for: Option<u64>,
}

impl Timer {
    fn new() -> Result<Self> {
        let fd = timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
        )
        .context("timerfd_create")?;
        Ok(Timer {
            file: File::from(fd),
            armed_for: None,
        })
    }

    /// Arms the timer to fire at `due_ns` (run time) given that it is `now_ns`.
    fn arm(&mut self, due_ns: u64, now_ns: u64) -> Result<()> {
        if self.armed_for == Some(due_ns) {
            return Ok(());
        }
        let rel = due_ns.saturating_sub(now_ns).max(1);
        let spec = Itimerspec {
            it_interval: Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: Timespec {
                tv_sec: (rel / 1_000_000_000) as _,
                tv_nsec: (rel % 1_000_000_000) as _,
            },
        };
        timerfd_settime(self.file.as_fd(), TimerfdTimerFlags::empty(), &spec)
            .context("timerfd_settime")?;
        self.armed_for = Some(due_ns);
        Ok(())
    }

    fn fired(&mut self) {
        let mut b = [0u8; 8];
        let _ = self.file.read(&mut b);
        self.armed_for = None;
    }
}

/// One open-loop worker owning connections `first_conn ..` of the run.
pub fn open_worker<S: Source>(
    streams: Vec<std::net::TcpStream>,
    first_conn: u32,
    mut sources: Vec<S>,
    p: &OpenParams,
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
    let mut timer = Timer::new()?;
    poll.registry().register(
        &mut SourceFd(&timer.file.as_raw_fd()),
        TIMER,
        Interest::READABLE,
    )?;
    let mut rec = Recorder::new(p.interval_ns, p.sla_interval_ns, p.keep_samples);
    let mut sched = Schedule::new(p.rate, p.total_conns, u64::from(first_conn), n as u64);
    let end_ns = p.duration.as_nanos() as u64;
    let mut dirty = vec![false; n];
    let mut dirty_list: Vec<usize> = Vec::with_capacity(n);
    let mut events = Events::with_capacity(1024);
    let mut stopping = false;
    let mut drain_deadline = u64::MAX;
    sleep_until(t0);

    loop {
        let now = ns_since(t0);
        if !stopping {
            // send everything that is due, each at its intended time
            loop {
                let (lc, due) = sched.peek();
                if due >= end_ns || abort.load(Ordering::Relaxed) {
                    stopping = true;
                    drain_deadline = now.max(end_ns) + p.drain.as_nanos() as u64;
                    break;
                }
                if due > now {
                    break;
                }
                let c = &mut conns[lc];
                let op = sources[lc]
                    .next_op(c.wbuf())
                    .expect("the measured workload never runs dry");
                c.matcher.pending.push_back(Pending {
                    op,
                    intended_ns: due,
                    sent_ns: now,
                });
                rec.send_lag.saturating_record((now - due).max(1));
                if !dirty[lc] {
                    dirty[lc] = true;
                    dirty_list.push(lc);
                }
                sched.advance();
            }
            for &lc in &dirty_list {
                conns[lc].flush(poll.registry())?;
                dirty[lc] = false;
            }
            dirty_list.clear();
        }
        let timeout = if stopping {
            if conns.iter().all(|c| c.outstanding() == 0) {
                break;
            }
            let now = ns_since(t0);
            if now >= drain_deadline {
                for (i, c) in conns.iter_mut().enumerate() {
                    for pd in c.matcher.pending.drain(..) {
                        rec.record_unanswered(first_conn + i as u32, &pd, now);
                    }
                }
                break;
            }
            Duration::from_nanos(drain_deadline - now)
        } else {
            let (_, due) = sched.peek();
            let now = ns_since(t0);
            if due <= now {
                Duration::ZERO
            } else {
                timer.arm(due, now)?;
                // the timer wakes us; this is only a safety net
                Duration::from_millis(100)
            }
        };
        poll.poll(&mut events, Some(timeout))?;
        let now = ns_since(t0);
        for ev in events.iter() {
            if ev.token() == TIMER {
                timer.fired();
                continue;
            }
            let i = ev.token().0;
            let c = &mut conns[i];
            if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                let conn_id = first_conn + i as u32;
                let got = c.read(now, |d| rec.record(conn_id, d))?;
                progress.fetch_add(got as u64, Ordering::Relaxed);
            }
            if c.unsent() > 0 {
                c.flush(poll.registry())?;
            }
        }
    }
    for c in &mut conns {
        rec.absorb_conn(c);
        c.deregister(poll.registry());
    }
    Ok(rec)
}
