//! The `stats` command: every group (`stats`, `settings`, `items`,
//! `slabs`, `cachedump`, `sla`, `conns`, `detail`, `reset`...) read from
//! the shared state; the figures' lines are written by [`crate::stats`]
//! and the admin modules beside it.

use crate::ctx::Ctx;
use crate::stats::line::Sink;
use crate::stats::{self, StatsView};
use std::sync::atomic::Ordering;
use std::time::Instant;
use tiercache_proto::response as resp;

/// The general `stats` lines (the reply to `stats` without its `END`, and
/// what `/metrics` exports), each with its kind.
pub fn general(out: &mut dyn Sink, ctx: &Ctx<'_>) {
    let shared = ctx.shared;
    let view = StatsView {
        started: shared.started,
        start_unix: shared.start_unix,
        now: ctx.now,
        threads: shared.config.server.threads,
        max_connections: shared.config.server.max_connections,
        conns: &shared.conns,
        totals: shared.totals(),
        engine: shared.engine.stats(ctx.now),
        listeners: shared.registry.listeners.len(),
        reserved_fds: shared.reserved_fds,
        idle_timeout: shared.config.server.idle_timeout > 0,
    };
    stats::general(out, &view);
    crate::admin::access_stats::general(out, shared);
    shared.watch.stats(out);
    if let Some(f) = shared.engine.flash_stats() {
        stats::flash(out, &f, &view.engine);
    }
    shared.sla.general(out, Instant::now());
}

/// `stats [group]`.
pub fn stats_command(args: &[u8], out: &mut Vec<u8>, ctx: &Ctx<'_>) {
    let shared = ctx.shared;
    let mut words = args.split(|&b| b == b' ').filter(|w| !w.is_empty());
    let first = words.next();
    match first {
        None => general(out, ctx),
        Some(b"reset") => {
            for w in &shared.workers {
                w.reset();
            }
            shared.engine.reset_stats();
            shared.detail.clear();
            resp::line(out, b"RESET");
            return;
        }
        Some(b"settings") => {
            stats::settings(
                out,
                &shared.config,
                shared.engine.config().segment_size,
                crate::logging::verbosity(),
                shared.engine.memory_limit(),
            );
            crate::admin::access_stats::settings(out, &shared.config);
        }
        Some(g @ (b"items" | b"slabs")) => stats::items(
            out,
            &shared.engine.stats(ctx.now),
            &shared.totals(),
            shared.conns.crawler_reclaimed.load(Ordering::Relaxed),
            // Walks the oldest segments' headers: for `stats items` only.
            (g == b"items").then(|| shared.engine.oldest_item_age(ctx.now).unwrap_or(0)),
        ),
        Some(b"cachedump") if shared.config.server.disable_dumping => {
            resp::line(out, b"CLIENT_ERROR stats cachedump not allowed");
            return;
        }
        Some(b"cachedump") => {
            let rest: Vec<&[u8]> = words.collect();
            crate::admin::crawler::cachedump(&rest, out, ctx);
            return;
        }
        Some(b"sla") => shared.sla.group(out, Instant::now()),
        Some(b"locks") => {
            let e = shared.engine.stats(ctx.now);
            crate::stats::locks::group(out, &e.holds, &e.waits)
        }
        Some(b"sizes") => resp::line(out, b"STAT sizes_status disabled"),
        Some(b"conns") => crate::admin::registry::stats_conns(
            out,
            &shared.registry,
            crate::admin::registry::current_fd(),
            ctx.now,
        ),
        Some(b"detail") => {
            match words.next() {
                Some(b"on") => {
                    shared.detail.set_enabled(true);
                    resp::line(out, b"OK")
                }
                Some(b"off") => {
                    shared.detail.set_enabled(false);
                    resp::line(out, b"OK")
                }
                Some(b"dump") => shared.detail.dump(out),
                _ => resp::line(out, b"CLIENT_ERROR usage: stats detail on|off|dump"),
            }
            return;
        }
        Some(_) => {
            resp::line(out, b"ERROR");
            return;
        }
    }
    resp::line(out, b"END");
}
