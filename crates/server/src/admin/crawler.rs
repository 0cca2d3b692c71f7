//! `lru_crawler` and `stats cachedump`: memcached's key dumps over the
//! engine's segment walk ([`Engine::dump_keys`]), streamed within the
//! connection's output bound.
//!
//! tiercache has no slab classes: `stats slabs` reports one class (1)
//! holding every item, so a dump of class 1 (or `all`, `hash`) lists every
//! item in RAM and other valid classes list none. Flash-resident items are
//! not listed (their keys are not in DRAM; see the engine's
//! `command/dump.rs`). Expired items are reclaimed by the maintenance
//! thread's once-a-second sweep, which is tiercache's crawler: `crawl`,
//! `tocrawl` and `sleep` answer `OK` and change nothing else.

use crate::ctx::{Attempt, Ctx, Outcome};
use std::sync::atomic::Ordering;
use tiercache_engine::command::DumpCursor;
use tiercache_proto::crawler::{Classes, Crawler};
use tiercache_proto::reply::{self, MetadumpItem};

/// The one class every item is in (as `stats slabs` says).
const CLASS: u32 = 1;

/// memcached's `stats cachedump` stops at 2 MB of reply.
const CACHEDUMP_MAX: usize = 2 << 20;

/// Runs an `lru_crawler` request; a metadump resumes at `at.resume`.
pub fn lru_crawler(c: Crawler, out: &mut Vec<u8>, ctx: &Ctx<'_>, at: &Attempt<'_>) -> Outcome {
    let enabled = &ctx.shared.crawler_enabled;
    match c {
        Crawler::Metadump(classes) => {
            if !enabled.load(Ordering::Relaxed) {
                reply::line(out, b"CLIENT_ERROR lru crawler disabled");
                return Outcome::Continue;
            }
            if ctx.shared.config.server.disable_dumping {
                // -X, memcached's words.
                reply::line(out, b"ERROR metadump not allowed");
                return Outcome::Continue;
            }
            return metadump(classes, out, ctx, at);
        }
        Crawler::Crawl(_) | Crawler::Tocrawl(_) | Crawler::Sleep(_) => {
            if matches!(c, Crawler::Crawl(_)) && !enabled.load(Ordering::Relaxed) {
                reply::line(out, b"CLIENT_ERROR lru crawler disabled");
                return Outcome::Continue;
            }
            reply::line(out, b"OK");
        }
        Crawler::Enable => {
            if enabled.swap(true, Ordering::Relaxed) {
                // memcached's answer when its crawler thread already runs.
                reply::line(out, b"ERROR failed to start lru crawler thread");
            } else {
                reply::line(out, b"OK");
            }
        }
        Crawler::Disable => {
            enabled.store(false, Ordering::Relaxed);
            reply::line(out, b"OK");
        }
        Crawler::Refused(r) => reply::line(out, r.line()),
    }
    Outcome::Continue
}

/// Item lines from `at.resume` until the walk ends (`END`) or the output
/// reaches its bound (stopped; the connection resumes it once drained).
fn metadump(classes: Classes, out: &mut Vec<u8>, ctx: &Ctx<'_>, at: &Attempt<'_>) -> Outcome {
    if classes.contains(CLASS) {
        let mut cursor = DumpCursor::from_raw(at.resume as u64);
        loop {
            let next = ctx.shared.engine.dump_keys(cursor, ctx.now, |k| {
                let item = MetadumpItem {
                    key: k.key(),
                    exptime: (k.exptime() != 0).then_some(k.exptime()),
                    last_access: k.last_access(),
                    cas: k.cas(),
                    fetched: k.fetched(),
                    class: CLASS,
                    size: k.stored_size() as u64,
                };
                reply::metadump_item(out, &item);
            });
            match next {
                None => break,
                Some(n) if out.len() >= at.out_limit => {
                    return Outcome::Stopped {
                        at: n.to_raw() as usize,
                        wait: None,
                    };
                }
                Some(n) => cursor = n,
            }
        }
    }
    reply::line(out, b"END");
    Outcome::Continue
}

/// `stats cachedump <class> <limit>` (the words after `cachedump`): the
/// keys of class 1, at most `limit` (0: all, up to 2 MB of reply).
pub fn cachedump(words: &[&[u8]], out: &mut Vec<u8>, ctx: &Ctx<'_>) {
    use tiercache_proto::number::parse_u32;
    let [class, limit] = words else {
        reply::line(out, b"CLIENT_ERROR bad command line");
        return;
    };
    let (Some(class), Some(limit)) = (parse_u32(class), parse_u32(limit)) else {
        reply::line(out, b"CLIENT_ERROR bad command line format");
        return;
    };
    if class > tiercache_proto::crawler::MAX_CLASS {
        reply::line(out, b"CLIENT_ERROR Illegal slab id");
        return;
    }
    if class == CLASS {
        let start = out.len();
        let mut left = if limit == 0 {
            u64::MAX
        } else {
            u64::from(limit)
        };
        let mut cursor = Some(DumpCursor::default());
        while let Some(c) = cursor.filter(|_| left > 0) {
            cursor = ctx.shared.engine.dump_keys(c, ctx.now, |k| {
                if left > 0 && out.len() - start < CACHEDUMP_MAX {
                    reply::cachedump_item(out, k.key(), k.value_len(), k.exptime());
                    left -= 1;
                }
            });
            if out.len() - start >= CACHEDUMP_MAX {
                break;
            }
        }
    }
    reply::line(out, b"END");
}
