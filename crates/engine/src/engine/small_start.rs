//! The small-object store's start-up: its region carved from the first
//! device, each shard's part opened, and the background flusher threads.

use super::{EngineConfig, FlashConfig, Shards};
use crate::error::ConfigError;
use crate::flash::BlockDevice;
use crate::shard::hold::ShardLock;
use std::sync::Arc;
use std::thread::JoinHandle;

/// Where the small-object store lives: the tail of the first device, one
/// equal part per shard (`(device, base, part bytes)`).
pub(super) struct SmallRegion {
    dev: Arc<dyn BlockDevice>,
    base: u64,
    part: u64,
}

/// With `ext_small_max`, takes `ext_small_share` percent of the first
/// device for the small-object store: the flash tier sees the device
/// shorter ([`Truncated`](crate::device::truncated::Truncated)).
pub(super) fn carve_small_region(
    config: &EngineConfig,
    devices: &mut [Arc<dyn BlockDevice>],
) -> Option<SmallRegion> {
    use crate::device::aligned::BLOCK;
    let fc = config.flash.as_ref().filter(|fc| fc.small_max > 0)?;
    let dev = devices.first()?.clone();
    let part = super::sizing::small_part_bytes(fc, config.shards, dev.size());
    let base = (dev.size() - part * config.shards as u64) / BLOCK as u64 * BLOCK as u64;
    devices[0] = Arc::new(crate::device::truncated::Truncated::new(dev.clone(), base));
    Some(SmallRegion { dev, base, part })
}

/// Where the stores tell of sealed jobs, and the threads that run them.
pub(super) type SmallFlushers = (Option<crossbeam_channel::Sender<u32>>, Vec<JoinHandle<()>>);

/// Threads running the small-object store's segment flushes, for all
/// shards. One: each flush already issues its set reads and writes in
/// parallel, and more flushes at once held more blocks in DRAM (with 4, the
/// server's RSS after small_fit.py's fill was 22 MiB above the inline
/// flushes', beyond what its store counts).
const SMALL_FLUSHERS: usize = 1;

/// What tells a small-object flusher thread to stop (not a shard number).
pub(super) const SMALL_STOP: u32 = u32::MAX;

/// With `small_background`, threads that run the small-object store's
/// segment flushes ([`SMALL_FLUSHERS`]), told of each sealed job by
/// its shard's number; the stores are told where to send it.
pub(super) fn start_small_flushers(
    shards: &Arc<Shards>,
    config: &EngineConfig,
) -> Result<SmallFlushers, ConfigError> {
    let on = config.flash.as_ref().is_some_and(|f| f.small_background)
        && shards.list.iter().any(|s| s.lock().has_small());
    if !on {
        return Ok((None, Vec::new()));
    }
    let (tx, rx) = crossbeam_channel::unbounded::<u32>();
    for s in &shards.list {
        s.lock().small_background(tx.clone());
    }
    let mut threads = Vec::new();
    for n in 0..SMALL_FLUSHERS {
        let (rx, shards) = (rx.clone(), shards.clone());
        let t = std::thread::Builder::new()
            .name(format!("small-flush-{n}"))
            .spawn(move || small_flusher(&rx, &shards))
            .map_err(|error| ConfigError::Thread {
                thread: "the small-object store's flusher",
                error,
            })?;
        threads.push(t);
    }
    Ok((Some(tx), threads))
}

/// A small-object flusher thread: runs the job of each shard it is told
/// of; a shard whose next flush the duty holds back is run again when its
/// wait ends, while the other shards' jobs (their changes' invalidations
/// among them) run meanwhile.
fn small_flusher(rx: &crossbeam_channel::Receiver<u32>, shards: &Shards) {
    use crate::small::flush::{run_job, Ran};
    use std::time::{Duration, Instant};
    let mut later: Vec<(Instant, u32)> = Vec::new();
    loop {
        let next = later.iter().map(|&(t, _)| t).min();
        let msg = match next {
            None => rx.recv().map_err(|_| ()),
            Some(t) => match rx.recv_timeout(t.saturating_duration_since(Instant::now())) {
                Ok(i) => Ok(i),
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                    let now = Instant::now();
                    let due = later.iter().position(|&(t, _)| t <= now);
                    match due {
                        Some(k) => Ok(later.swap_remove(k).1),
                        None => continue,
                    }
                }
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => Err(()),
            },
        };
        let Ok(i) = msg else {
            break;
        };
        let Some(shard) = shards.list.get(i as usize) else {
            break;
        };
        match run_job(&|f| shard.lock().with_small_store(f)) {
            Ran::Later(d) => {
                if !later.iter().any(|&(_, p)| p == i) {
                    later.push((Instant::now() + d.max(Duration::from_micros(100)), i));
                }
            }
            Ran::Invalidation => {
                // Changes that waited for the invalidation go ahead.
                let flash = shard.lock().flash_tier();
                if let Some(f) = flash {
                    f.wake_all();
                }
            }
            Ran::Flush => {}
        }
    }
}

/// Opens (recovers, or formats) each shard's part of the small-object store.
pub(super) fn attach_small(
    region: &SmallRegion,
    shards: &mut [ShardLock],
    fc: &FlashConfig,
) -> Result<(), ConfigError> {
    use crate::small::{SmallConfig, SmallStore};
    let (max, flush_duty) = (fc.small_max, fc.small_flush_duty);
    let mut cfg = SmallConfig::for_region(region.part, super::sizing::small_log_percent(fc));
    if fc.small_threshold > 0 {
        cfg.move_threshold = fc.small_threshold;
    }
    let n = shards.len() as u32;
    let now = crate::clock::unix_now();
    let mut found = crate::small::Recovered::default();
    let mut formatted = 0;
    for (i, s) in shards.iter_mut().enumerate() {
        let base = region.base + i as u64 * region.part;
        // Changes of held keys are made durable by the crash journal's
        // tombstones (docs/SMALL.md, "Changes of held keys"); those of the
        // last run are read whether this one keeps a journal or not.
        let tier = s.get_mut().flash_tier();
        let tombs = tier
            .as_ref()
            .map_or_else(Vec::new, |f| f.journal().small_tombstones(i as u32));
        let trusted = tier.as_ref().is_none_or(|f| f.journal().small_trusted());
        let io =
            |e| crate::flash::DeviceError::io(region.dev.name(), "open the small-object store", e);
        let (mut store, rec) = match trusted {
            true => SmallStore::attach(region.dev.clone(), base, cfg, (i as u32, n), now, &tombs)
                .map_err(io)?,
            false => {
                // A damaged journal may have lost a tombstone: an old value
                // could come back. The region starts empty.
                tracing::warn!(
                    part = i,
                    "the crash journal is damaged: the small-object store's region is dropped"
                );
                (
                    SmallStore::format_part(region.dev.clone(), base, cfg, i as u32, n)
                        .map_err(io)?,
                    None,
                )
            }
        };
        match tier.filter(|f| f.params().crash_journal) {
            Some(f) => store.set_journal(f.journal().clone()),
            // No journal to keep them: their sets are rewritten now.
            None => store.settle_tombs().map_err(io)?,
        }
        match rec {
            Some(r) => {
                found.set_objects += r.set_objects;
                found.log_objects += r.log_objects;
                found.corrupt_sets += r.corrupt_sets;
                found.corrupt_pages += r.corrupt_pages;
            }
            None => formatted += 1,
        }
        store.set_flush_duty(flush_duty);
        s.get_mut().attach_small(store, max, fc.small_first);
    }
    tracing::info!(
        parts = n,
        part_mib = region.part >> 20,
        sets = cfg.sets,
        formatted,
        recovered_objects = found.set_objects + found.log_objects,
        corrupt_blocks = found.corrupt_sets + found.corrupt_pages,
        "small-object store: items of at most {max} bytes of key and value"
    );
    Ok(())
}
