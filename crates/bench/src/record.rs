//! Per-worker measurements: counters, one HDR histogram per operation and
//! outcome (every sample counted, none averaged away), a timeline of
//! per-interval histograms, the send lag of the open-loop schedule, and,
//! optionally, every raw sample.

use hdrhistogram::Histogram;

use crate::conn::{Conn, Done, Pending};
use crate::hist::{new_hist, new_small_hist};
use crate::workload::OpKind;

/// The latency categories kept apart.
/// `unanswered`: requests with no reply when the drain timeout ran out,
/// recorded at the lower bound of their latency (they are never dropped).
pub const CATEGORIES: [&str; 5] = ["get_hit", "get_miss", "set", "error", "unanswered"];
pub const UNANSWERED: usize = 4;

/// Which category a completed request falls in: a get is a hit only if every
/// key hit; any error makes it an error.
pub fn category(d: &Done) -> usize {
    if d.errors > 0 {
        3
    } else if d.op.kind == OpKind::Set {
        2
    } else if d.misses == 0 {
        0
    } else {
        1
    }
}

#[derive(Debug, Default, Clone, Copy)]
pub struct Counters {
    pub ops: u64,
    pub gets: u64,
    pub sets: u64,
    /// Keys asked for by gets.
    pub keys: u64,
    pub hits: u64,
    pub misses: u64,
    pub errors: u64,
    /// Requests still unanswered when the drain timeout ran out.
    pub unanswered: u64,
    pub value_bytes: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
}

impl Counters {
    pub fn add(&mut self, o: &Counters) {
        self.ops += o.ops;
        self.gets += o.gets;
        self.sets += o.sets;
        self.keys += o.keys;
        self.hits += o.hits;
        self.misses += o.misses;
        self.errors += o.errors;
        self.unanswered += o.unanswered;
        self.value_bytes += o.value_bytes;
        self.bytes_sent += o.bytes_sent;
        self.bytes_received += o.bytes_received;
    }
}

/// One timeline interval. Latency and hit counts are bucketed by intended
/// send time (a stall shows up where it was caused); `completed` by reply
/// time (a stall shows up as a dip in throughput).
pub struct Bucket {
    pub ops: u64,
    pub completed: u64,
    pub hits: u64,
    pub misses: u64,
    pub hist: Histogram<u32>,
}

/// One raw sample (`--samples`).
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub conn: u32,
    pub set: bool,
    pub hits: u32,
    pub misses: u32,
    pub errors: u32,
    pub intended_ns: u64,
    pub sent_ns: u64,
    pub done_ns: u64,
}

pub struct Recorder {
    pub counters: Counters,
    pub hists: Vec<Histogram<u64>>,
    /// Actual send time minus intended send time (open loop only).
    pub send_lag: Histogram<u64>,
    pub interval_ns: u64,
    pub timeline: Vec<Bucket>,
    /// Per-minute histograms for the SLA view.
    pub sla: crate::sla::Minutes,
    pub samples: Option<Vec<Sample>>,
    pub first_error: Option<String>,
}

impl Recorder {
    pub fn new(interval_ns: u64, sla_interval_ns: u64, keep_samples: bool) -> Self {
        Recorder {
            counters: Counters::default(),
            hists: CATEGORIES.iter().map(|_| new_hist()).collect(),
            send_lag: new_hist(),
            interval_ns: interval_ns.max(1),
            timeline: Vec::new(),
            sla: crate::sla::Minutes::new(sla_interval_ns),
            samples: keep_samples.then(Vec::new),
            first_error: None,
        }
    }

    /// Records one completed request. Latency is measured from the intended
    /// send time (equal to the actual send time in closed-loop mode).
    #[inline]
    pub fn record(&mut self, conn: u32, d: &Done) {
        let c = &mut self.counters;
        c.ops += 1;
        match d.op.kind {
            OpKind::Get => {
                c.gets += 1;
                c.keys += u64::from(d.op.nkeys);
            }
            OpKind::Set => c.sets += 1,
        }
        c.hits += u64::from(d.hits);
        c.misses += u64::from(d.misses);
        c.errors += u64::from(d.errors);
        c.value_bytes += d.value_bytes;
        let lat = d.done_ns.saturating_sub(d.intended_ns).max(1);
        self.hists[category(d)].saturating_record(lat);
        self.sla.record(d.intended_ns, lat);
        let b = (d.intended_ns / self.interval_ns) as usize;
        let bd = (d.done_ns / self.interval_ns) as usize;
        while self.timeline.len() <= b.max(bd) {
            self.timeline.push(Bucket {
                ops: 0,
                completed: 0,
                hits: 0,
                misses: 0,
                hist: new_small_hist(),
            });
        }
        let bucket = &mut self.timeline[b];
        bucket.ops += 1;
        bucket.hits += u64::from(d.hits);
        bucket.misses += u64::from(d.misses);
        bucket.hist.saturating_record(lat);
        self.timeline[bd].completed += 1;
        if let Some(s) = &mut self.samples {
            s.push(Sample {
                conn,
                set: d.op.kind == OpKind::Set,
                hits: d.hits,
                misses: d.misses,
                errors: d.errors,
                intended_ns: d.intended_ns,
                sent_ns: d.sent_ns,
                done_ns: d.done_ns,
            });
        }
    }

    /// Records a request that never got its reply: latency is at least
    /// `now - intended`, and that lower bound is what goes in the histogram.
    pub fn record_unanswered(&mut self, conn: u32, p: &Pending, now_ns: u64) {
        self.counters.unanswered += 1;
        let lat = now_ns.saturating_sub(p.intended_ns).max(1);
        self.hists[UNANSWERED].saturating_record(lat);
        self.sla.record(p.intended_ns, lat);
        if let Some(s) = &mut self.samples {
            s.push(Sample {
                conn,
                set: p.op.kind == OpKind::Set,
                hits: 0,
                misses: 0,
                errors: p.op.nkeys,
                intended_ns: p.intended_ns,
                sent_ns: p.sent_ns,
                done_ns: u64::MAX,
            });
        }
    }

    /// Takes a finished connection's byte counts and first error.
    pub fn absorb_conn(&mut self, c: &Conn) {
        self.counters.bytes_sent += c.bytes_sent;
        self.counters.bytes_received += c.bytes_received;
        if self.first_error.is_none() {
            self.first_error.clone_from(&c.matcher.first_error);
        }
    }

    /// Merges another worker's measurements into this one.
    pub fn merge(&mut self, o: Recorder) {
        self.counters.add(&o.counters);
        for (a, b) in self.hists.iter_mut().zip(&o.hists) {
            a.add(b).expect("same histogram bounds");
        }
        self.send_lag
            .add(&o.send_lag)
            .expect("same histogram bounds");
        if self.timeline.len() < o.timeline.len() {
            let extra = o.timeline.len() - self.timeline.len();
            for _ in 0..extra {
                self.timeline.push(Bucket {
                    ops: 0,
                    completed: 0,
                    hits: 0,
                    misses: 0,
                    hist: new_small_hist(),
                });
            }
        }
        self.sla.merge(&o.sla);
        for (a, b) in self.timeline.iter_mut().zip(o.timeline) {
            a.ops += b.ops;
            a.completed += b.completed;
            a.hits += b.hits;
            a.misses += b.misses;
            a.hist.add(&b.hist).expect("same histogram bounds");
        }
        match (&mut self.samples, o.samples) {
            (Some(a), Some(b)) => a.extend(b),
            (None, Some(b)) => self.samples = Some(b),
            _ => {}
        }
        if self.first_error.is_none() {
            self.first_error = o.first_error;
        }
    }

    /// All gets (hits and misses) together.
    pub fn gets_hist(&self) -> Histogram<u64> {
        let mut h = self.hists[0].clone();
        h.add(&self.hists[1]).expect("same bounds");
        h
    }

    /// Everything together.
    pub fn all_hist(&self) -> Histogram<u64> {
        let mut h = new_hist();
        for x in &self.hists {
            h.add(x).expect("same bounds");
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Op;

    fn done(kind: OpKind, hits: u32, misses: u32, intended: u64, done: u64) -> Done {
        Done {
            op: Op {
                kind,
                nkeys: hits + misses,
            },
            intended_ns: intended,
            sent_ns: intended + 5,
            done_ns: done,
            hits,
            misses,
            errors: 0,
            value_bytes: 0,
        }
    }

    #[test]
    fn latency_is_from_intended_time_and_nothing_is_dropped() {
        let mut r = Recorder::new(1_000_000, 2_000_000, true);
        r.record(0, &done(OpKind::Get, 2, 0, 0, 10_000));
        r.record(0, &done(OpKind::Get, 1, 1, 1_500_000, 1_520_000));
        r.record(1, &done(OpKind::Set, 0, 0, 2_000_000, 9_000_000_000));
        let mut o = Recorder::new(1_000_000, 2_000_000, true);
        o.record(2, &done(OpKind::Get, 1, 0, 100, 200));
        r.merge(o);
        assert_eq!(r.counters.ops, 4);
        assert_eq!(r.counters.hits, 4);
        assert_eq!(r.counters.misses, 1);
        assert_eq!(r.hists[0].len(), 2);
        assert_eq!(r.hists[1].len(), 1);
        assert_eq!(r.hists[2].len(), 1);
        // the 9 s outlier is kept at full size
        assert!(r.all_hist().max() >= 8_990_000_000);
        // latency by intended time, completions by reply time (the outlier
        // completes in the 9000th interval)
        assert_eq!(r.timeline.len(), 9001);
        assert_eq!(r.timeline[0].ops, 2);
        assert_eq!(r.timeline[2].ops, 1);
        assert_eq!(r.timeline[2].completed, 0);
        assert_eq!(r.timeline[9000].completed, 1);
        assert_eq!(r.samples.as_ref().unwrap().len(), 4);
        // SLA minutes of 2 ms: both workers' requests, by intended time.
        let sla: Vec<u64> = r.sla.hists.iter().map(|h| h.len()).collect();
        assert_eq!(sla, [3, 1]);
        assert_eq!(r.gets_hist().len(), 3);
    }
}
