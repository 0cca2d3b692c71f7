//! Replay through the server's real configuration: tiercache's engine
//! (`crates/engine`), with its segment log in RAM, its compact index and, given
//! a flash size, its flash tier on an in-memory device (admission, write
//! buffers, the background flusher, reclaim with reinsertion of hit items,
//! promotion on the second flash hit, all at the server's defaults).
//!
//! Requests go through the engine's command API, as the server's do: a get
//! is `Engine::get_blocking` (the server's `get_with`, the probe and the
//! device reads it asks for done on this thread where the server hands them
//! to its asynchronous reader, then a RAM hit or a flash hit with its
//! promotion); a miss stores the object with `Engine::store` (cache-aside,
//! as libCacheSim does), a value of zeros of the object's size (capped to
//! what fits a segment) under an 8-byte key (the object id); a store the
//! flash tier answers `Wait::Busy` (its flusher is behind) is retried after
//! a short sleep, as a server's client would wait; a delete is
//! `Engine::delete`.
//!
//! Unlike the object-level replay, the engine counts its own overhead: every
//! item carries a 24-byte header and its key, the index and the flash write
//! buffers come out of the RAM size, and an object larger than a segment is
//! never stored. The flusher runs on its own thread, so two runs can differ
//! by a few requests.

use crate::job::{wa, window_ends, Counts, EngineFigures, ReplayOptions, RunResult, WindowStats};
use crate::trace::{Op, Trace};
use anyhow::{anyhow, Result};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tiercache_engine::command::{Found, Mode, Store, StoreResult};
use tiercache_engine::device::fault::MemDevice;
use tiercache_engine::flash::{BlockDevice, Fetched, TierParams};
use tiercache_engine::{Engine, EngineConfig, FlashConfig};

/// The policy name that selects the engine: `tiercache` (the server's default
/// policy) or `tiercache:POLICY` (`tiercache:lru`).
pub const NAME: &str = "tiercache";

/// `now` when the trace has no times.
const CONSTANT_NOW: u32 = 1_000_000;

/// The engine's policy for a `tiercache[:POLICY]` spec; None if `spec` is not one.
pub fn engine_policy(spec: &str) -> Option<&str> {
    match spec.strip_prefix(NAME)? {
        "" => Some("s3fifo"),
        rest => rest.strip_prefix(':'),
    }
}

fn per_item(bytes: u64, items: u64) -> f64 {
    if items == 0 {
        0.0
    } else {
        bytes as f64 / items as f64
    }
}

/// The engine of a run: `ram` bytes of memory (`-m`), `flash` bytes of device.
fn build(
    policy: &str,
    ram: u64,
    flash: u64,
    avg_item_size: usize,
    opts: &ReplayOptions,
) -> Result<Engine> {
    let flash_cfg = (flash > 0).then(|| FlashConfig {
        paths: vec![],
        // A fresh in-memory device: nothing to recover after a crash.
        params: TierParams {
            crash_journal: false,
            ..TierParams::default()
        },
        read_threads: 1,
        read_depth: FlashConfig::default().read_depth,
        readers: 1,
        io: Default::default(),
        avg_item_size,
        small_max: opts.small_max,
        small_percent: if opts.small_share == 0 {
            50
        } else {
            opts.small_share
        },
        // Replays are not timed: flushes never wait.
        small_flush_duty: 0,
        // Replays are deterministic: flushes run on the replaying thread.
        small_background: false,
        small_first: true,
        small_threshold: opts.small_threshold,
        small_log_percent: opts.small_log_percent,
        snapshot: None,
        untrusted_marks: Vec::new(),
    });
    let config = EngineConfig {
        memory_limit: ram as usize,
        policy: policy.to_string(),
        flash: flash_cfg,
        ..EngineConfig::default()
    };
    let devices: Vec<Arc<dyn BlockDevice>> = if flash > 0 {
        vec![Arc::new(MemDevice::new(flash as usize))]
    } else {
        vec![]
    };
    Engine::with_devices(config, devices).map_err(|e| anyhow!("tiercache engine: {e}"))
}

struct Client<'a> {
    engine: &'a Engine,
    zeros: Vec<u8>,
    max_value: usize,
    flash_hits: u64,
    busy_retries: u64,
}

impl Client<'_> {
    /// A get: true on a hit (RAM or flash).
    fn get(&mut self, key: &[u8], now: u32) -> bool {
        match self.engine.get_blocking(key, now, true, |found, _| found) {
            Some(Found::Flash) => {
                self.flash_hits += 1;
                true
            }
            Some(Found::Ram) => true,
            None => false,
        }
    }

    /// A set of `size` bytes of zeros (capped to a segment); false if not stored.
    fn set(&mut self, key: &[u8], size: u32, now: u32) -> bool {
        let vlen = (size as usize).min(self.max_value);
        let deadline = Instant::now() + Duration::from_secs(30);
        let set = Store {
            mode: Mode::Set,
            key,
            flags: 0,
            exptime: 0,
            data: &self.zeros[..vlen],
            compare_cas: 0,
            set_stale: false,
            binary_key: false,
        };
        let none = Fetched::default();
        loop {
            match self.engine.store(&set, now, &none, false) {
                Ok(r) => return matches!(r, StoreResult::Stored { .. }),
                Err(_) if Instant::now() < deadline => {
                    self.busy_retries += 1;
                    std::thread::sleep(Duration::from_micros(200));
                }
                Err(_) => return false,
            }
        }
    }

    fn figures(&self, flash_size: u64, now: u32) -> EngineFigures {
        let st = self.engine.stats(now);
        let flash = self.engine.flash_stats();
        let buffers = flash.as_ref().map_or(0, |f| f.buffer_bytes);
        let index = st.index_bytes.saturating_sub(buffers);
        let items = st.shard.curr_items;
        let dram = st.index_bytes + st.segments_allocated * st.segment_size;
        let (mut written, mut admitted) =
            flash.map_or((0, 0), |f| (f.bytes_written, f.bytes_admitted));
        // The small-object store's writes and admissions count as the device's.
        if let Some(s) = &st.small {
            written += s.stats.log_bytes_written + s.stats.set_bytes_written;
            admitted += s.stats.bytes_admitted;
        }
        EngineFigures {
            flash_size,
            flash_hits: self.flash_hits,
            flash_bytes_written: written,
            flash_bytes_admitted: admitted,
            write_amplification: wa(written, admitted),
            items,
            flash_items: st.shard.flash_items,
            index_bytes: index,
            dram_index_bytes_per_item: per_item(index, items),
            dram_bytes_per_item: per_item(dram, items),
            busy_retries: self.busy_retries,
        }
    }
}

/// Replays the trace through the engine with `ram` bytes of memory and
/// `opts.flash` bytes of flash (none: RAM only).
pub fn replay_engine(
    trace: &Trace,
    spec: &str,
    ram: u64,
    opts: ReplayOptions,
    progress: &AtomicU64,
) -> Result<RunResult> {
    let policy =
        engine_policy(spec).ok_or_else(|| anyhow!("'{spec}' is not tiercache[:POLICY]"))?;
    let started = Instant::now();
    let flash_size = opts.flash.unwrap_or(0);
    let (objects, bytes) = trace.footprint();
    let avg = if opts.no_index_hint {
        0
    } else {
        (bytes / objects.max(1)).max(64) as usize
    };
    let engine = build(policy, ram, flash_size, avg, &opts)?;
    let seg = engine.stats(CONSTANT_NOW).segment_size as usize;
    let max_value = (0..seg).rev().find(|&v| engine.fits(8, v)).unwrap_or(0);
    let mut c = Client {
        engine: &engine,
        zeros: vec![0; max_value],
        max_value,
        flash_hits: 0,
        busy_retries: 0,
    };
    let timed = trace.times.iter().any(|&t| t != 0);
    let now_of = |i: usize| if timed { trace.times[i] } else { CONSTANT_NOW };
    let mut total = Counts::default();
    let mut windows = Vec::new();
    let mut start = 0usize;
    let mut before = c.figures(
        flash_size,
        if trace.is_empty() {
            CONSTANT_NOW
        } else {
            now_of(0)
        },
    );
    for end in window_ends(trace, opts.window) {
        let mut w = Counts::default();
        for i in start..end {
            let id = trace.ids[i];
            let size = trace.sizes[i];
            let now = now_of(i);
            let key = id.to_le_bytes();
            let op = trace.ops.get(i).copied().unwrap_or(Op::Get);
            match op {
                Op::Set if opts.honor_ops => {
                    c.set(&key, size, now);
                }
                Op::Delete if opts.honor_ops => {
                    // Nothing read: the key's flash entries all go.
                    engine
                        .delete(&key, now, &Fetched::default(), false)
                        .expect("the replay keeps no crash journal: no change waits for it");
                }
                _ => {
                    let hit = c.get(&key, now);
                    if !hit {
                        c.set(&key, size, now);
                    }
                    w.requests += 1;
                    w.bytes += size as u64;
                    if !hit {
                        w.misses += 1;
                        w.miss_bytes += size as u64;
                    }
                }
            }
            if i % 4096 == 4095 {
                progress.fetch_add(4096, Ordering::Relaxed);
            }
        }
        let now = if end > 0 {
            now_of(end - 1)
        } else {
            CONSTANT_NOW
        };
        let after = c.figures(flash_size, now);
        if opts.window.is_some() && end > start {
            windows.push(WindowStats {
                first_request: start as u64,
                start_time: trace.times[start],
                counts: w,
                miss_ratio: w.miss_ratio(),
                byte_miss_ratio: w.byte_miss_ratio(),
                engine: Some(after.since(&before)),
            });
        }
        before = after;
        total.add(&w);
        start = end;
    }
    progress.fetch_add((trace.len() % 4096) as u64, Ordering::Relaxed);
    let last = if trace.is_empty() {
        CONSTANT_NOW
    } else {
        now_of(trace.len() - 1)
    };
    let fig = c.figures(flash_size, last);
    let st = engine.stats(last);
    Ok(RunResult {
        policy: spec.to_string(),
        size: ram,
        counts: total,
        miss_ratio: total.miss_ratio(),
        byte_miss_ratio: total.byte_miss_ratio(),
        evictions: st.shard.evictions,
        objects: st.shard.curr_items,
        seconds: started.elapsed().as_secs_f64(),
        cpu_seconds: None,
        windows,
        engine: Some(fig),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace(n: u64, objects: u64, size: u32) -> Trace {
        let mut t = Trace::default();
        let mut rng = tiercache_policy::rng::Rng::xorshift(88172645463325252);
        for i in 0..n {
            let x = rng.next_u64();
            // Skewed: half the requests go to a tenth of the objects.
            let id = if x % 2 == 0 {
                x % (objects / 10)
            } else {
                x % objects
            };
            t.ids.push(id);
            t.sizes.push(size);
            t.times.push(1000 + (i / 100) as u32);
        }
        t
    }

    #[test]
    fn names() {
        assert_eq!(engine_policy("tiercache"), Some("s3fifo"));
        assert_eq!(engine_policy("tiercache:lru"), Some("lru"));
        assert_eq!(engine_policy("lru"), None);
        assert_eq!(engine_policy("tiercachex"), None);
    }

    #[test]
    fn flash_holds_what_ram_cannot() {
        // 40,000 objects of 4 KiB (160 MiB) against 32 MiB of RAM (16 MiB of
        // which are the flash write buffers), with and
        // without 256 MiB of flash.
        let t = trace(120_000, 40_000, 4096);
        let p = AtomicU64::new(0);
        let ram = 32 << 20;
        let opts = |flash| ReplayOptions {
            window: Some(crate::job::Window::Requests(40_000)),
            flash,
            ..ReplayOptions::default()
        };
        let only = replay_engine(&t, "tiercache", ram, opts(None), &p).unwrap();
        let both = replay_engine(&t, "tiercache", ram, opts(Some(256 << 20)), &p).unwrap();
        let e = both.engine.unwrap();
        assert!(
            both.miss_ratio + 0.2 < only.miss_ratio,
            "flash: {} RAM only: {}",
            both.miss_ratio,
            only.miss_ratio
        );
        assert!(e.flash_hits > 0 && e.flash_items > 0);
        assert!(e.flash_bytes_written > 0);
        // Whole segments are written: at least what was admitted (a little
        // less only while the last open buffer is unwritten); reinsertion of
        // hit items on reclaim adds more.
        assert!(e.write_amplification >= 0.8, "{e:?}");
        assert!(e.dram_index_bytes_per_item > 0.0);
        assert_eq!(only.engine.unwrap().flash_bytes_written, 0);
        assert_eq!(both.windows.len(), 3);
        let sum: u64 = both.windows.iter().map(|w| w.counts.misses).sum();
        assert_eq!(sum, both.counts.misses);
        let written: u64 = both
            .windows
            .iter()
            .map(|w| w.engine.unwrap().flash_bytes_written)
            .sum();
        assert_eq!(written, e.flash_bytes_written);
    }
}
