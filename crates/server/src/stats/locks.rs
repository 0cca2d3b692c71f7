//! The shard-lock holds by cause (the engine's `shard::hold`): in `stats`,
//! the longest hold overall and per cause and the count; in `stats locks`,
//! the histogram per cause; in `/metrics`, the histogram
//! `tiercache_shard_lock_hold_seconds{cause}`. A request waits behind at
//! most the longest hold, so these bound what maintenance adds to it.
//! Maintenance holds are also timed on the CPU (`_cpu_max_us`, and in
//! `stats locks` the count over the engine's bound): a wall time far above
//! its CPU time is a holder the machine descheduled, not work to slice.
//!
//! The waits for the locks, by the waiter's cause (a take that found the
//! lock free is not one): in `stats`, `shard_lock_waits_command` and the
//! longest (`shard_lock_wait_command_max_us`); in `stats locks`, per cause
//! the count, the sum, the longest and the histogram
//! (`shard_lock_wait_<cause>_le_<µs>`); in `/metrics`,
//! `tiercache_shard_lock_wait_seconds{cause}`. A request's wait is what
//! the holds before it cost it, inside the server.

use super::line::{counter, stat, Sink};
use std::fmt::Write;
use tiercache_engine::{
    hold_bucket_bound_us, HoldCause, HoldStats, CPU_BOUND_US, HOLD_BUCKETS, HOLD_CAUSES,
};

/// The causes whose holds are timed on the CPU too: maintenance.
fn maintenance() -> impl Iterator<Item = HoldCause> {
    HOLD_CAUSES.into_iter().filter(|&c| c > HoldCause::Command)
}

/// The general `stats` lines: `shard_lock_holds` (every hold),
/// `shard_lock_hold_max_us` (the longest of any cause but `stats` reading
/// the shards), `shard_lock_hold_<cause>_max_us`, and for maintenance
/// `shard_lock_hold_cpu_max_us` and `shard_lock_hold_<cause>_cpu_max_us`.
pub fn general(out: &mut dyn Sink, h: &HoldStats) {
    let holds: u64 = HOLD_CAUSES.iter().map(|&c| h.count(c)).sum();
    counter(out, "shard_lock_holds", holds);
    let max = HOLD_CAUSES
        .iter()
        .filter(|c| c.name() != "stats")
        .map(|&c| h.max_ns[c as usize])
        .max()
        .unwrap_or(0);
    stat(out, "shard_lock_hold_max_us", max / 1000);
    for c in HOLD_CAUSES {
        let name = format!("shard_lock_hold_{}_max_us", c.name());
        stat(out, &name, h.max_ns[c as usize] / 1000);
    }
    let cpu = maintenance().map(|c| h.cpu_max_ns[c as usize]).max();
    stat(out, "shard_lock_hold_cpu_max_us", cpu.unwrap_or(0) / 1000);
    for c in maintenance() {
        let name = format!("shard_lock_hold_{}_cpu_max_us", c.name());
        stat(out, &name, h.cpu_max_ns[c as usize] / 1000);
    }
}

/// The general `stats` lines of the waits: `shard_lock_waits_command`
/// (requests that found a shard's lock held), their total and their
/// longest wait.
pub fn general_waits(out: &mut dyn Sink, w: &HoldStats) {
    let c = HoldCause::Command;
    counter(out, "shard_lock_waits_command", w.count(c));
    counter(
        out,
        "shard_lock_wait_command_us",
        w.sum_ns[c as usize] / 1000,
    );
    stat(
        out,
        "shard_lock_wait_command_max_us",
        w.max_ns[c as usize] / 1000,
    );
}

/// `stats locks`: per cause its count, the sum and the longest, and the
/// holds in each bucket (`shard_lock_hold_<cause>_le_<µs>`; `_le_inf` the
/// rest), not cumulative; for maintenance, the longest on the CPU and the
/// holds over the bound there (`shard_lock_holds_<cause>_cpu_over_256us`);
/// then the waits the same way (`shard_lock_waits_<cause>`,
/// `shard_lock_wait_<cause>_le_<µs>`).
pub fn group(out: &mut Vec<u8>, h: &HoldStats, w: &HoldStats) {
    for c in HOLD_CAUSES {
        let (i, n) = (c as usize, c.name());
        histogram_lines(out, "hold", h, c);
        if c > HoldCause::Command {
            stat(
                out,
                &format!("shard_lock_hold_{n}_cpu_max_us"),
                h.cpu_max_ns[i] / 1000,
            );
            stat(
                out,
                &format!("shard_lock_holds_{n}_cpu_over_{CPU_BOUND_US}us"),
                h.cpu_over_bound[i],
            );
        }
    }
    for c in HOLD_CAUSES {
        histogram_lines(out, "wait", w, c);
    }
}

/// `shard_lock_<what>s_<cause>`, `shard_lock_<what>_<cause>_us` (the sum),
/// `_max_us` and the buckets `_le_<µs>` of `h`'s cause `c`.
fn histogram_lines(out: &mut Vec<u8>, what: &str, h: &HoldStats, c: HoldCause) {
    let (i, n) = (c as usize, c.name());
    stat(out, &format!("shard_lock_{what}s_{n}"), h.count(c));
    stat(
        out,
        &format!("shard_lock_{what}_{n}_us"),
        h.sum_ns[i] / 1000,
    );
    stat(
        out,
        &format!("shard_lock_{what}_{n}_max_us"),
        h.max_ns[i] / 1000,
    );
    for b in 0..HOLD_BUCKETS {
        let le = hold_bucket_bound_us(b).map_or("inf".to_string(), |u| u.to_string());
        stat(
            out,
            &format!("shard_lock_{what}_{n}_le_{le}"),
            h.buckets[i][b],
        );
    }
}

/// The Prometheus histograms, in the text format, cumulative as it wants:
/// the holds and the waits by cause.
pub fn metrics_text(h: &HoldStats, w: &HoldStats) -> String {
    let mut s = String::new();
    histogram(
        &mut s,
        "tiercache_shard_lock_hold_seconds",
        "How long a shard's lock was held, by what it was held for.",
        h,
    );
    histogram(
        &mut s,
        "tiercache_shard_lock_wait_seconds",
        "How long a taker of a shard's lock waited for it (takes that found it free are not counted), by what it took it for.",
        w,
    );
    // The longest on the CPU is exported from `stats` as
    // `tiercache_shard_lock_hold_<cause>_cpu_max_seconds`.
    let over = "tiercache_shard_lock_holds_cpu_over_bound_total";
    let _ = writeln!(
        s,
        "# HELP {over} Maintenance holds of a shard's lock over {CPU_BOUND_US} microseconds on the CPU, by cause."
    );
    let _ = writeln!(s, "# TYPE {over} counter");
    for c in maintenance() {
        let v = h.cpu_over_bound[c as usize];
        let _ = writeln!(s, "{over}{{cause=\"{}\"}} {v}", c.name());
    }
    s
}

/// One histogram of `h` by cause, named `name`.
fn histogram(s: &mut String, name: &str, help: &str, h: &HoldStats) {
    let _ = writeln!(s, "# HELP {name} {help}");
    let _ = writeln!(s, "# TYPE {name} histogram");
    for c in HOLD_CAUSES {
        let i = c as usize;
        let mut acc = 0;
        for b in 0..HOLD_BUCKETS {
            acc += h.buckets[i][b];
            let le = hold_bucket_bound_us(b)
                .map_or("+Inf".to_string(), |u| format!("{}", u as f64 / 1e6));
            let _ = writeln!(
                s,
                "{name}_bucket{{cause=\"{}\",le=\"{le}\"}} {acc}",
                c.name()
            );
        }
        let _ = writeln!(
            s,
            "{name}_sum{{cause=\"{}\"}} {}",
            c.name(),
            h.sum_ns[i] as f64 / 1e9
        );
        let _ = writeln!(s, "{name}_count{{cause=\"{}\"}} {acc}", c.name());
    }
}
