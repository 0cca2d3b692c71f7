//! Shared by the flash tests: performing a probe's device reads in place of
//! the server's asynchronous reader, and requests as the server runs them
//! (through the crash journal's gate, retrying while it or the flusher is
//! behind). Each test binary uses part of it.
#![allow(dead_code)]

use std::time::{Duration, Instant};
use tiercache_engine::flash::TierParams;
use tiercache_engine::flash::{Fetched, FlashTier, ReadReq};
use tiercache_engine::shard::{InsertError, Probe, Shard};
use tiercache_engine::{Engine, EngineConfig, FlashConfig, NewItem};

/// The tests' clock.
pub const NOW: u32 = 1_000_000;

/// The flash tests' engine: `memory` bytes of RAM in `ram_segment`-byte
/// segments over 2 shards, flash segments of `flash_segment` bytes with 3
/// write buffers, the index sized for 1 KiB items; tests adjust the rest.
pub fn flash_config(memory: usize, ram_segment: usize, flash_segment: usize) -> EngineConfig {
    EngineConfig {
        memory_limit: memory,
        segment_size: ram_segment,
        shards: 2,
        hash_power: 0,
        policy: "s3fifo".into(),
        flash: Some(FlashConfig {
            paths: vec![],
            params: TierParams {
                segment_size: flash_segment,
                write_buffers: 3,
                ..TierParams::default()
            },
            read_threads: 1,
            avg_item_size: 1024,
            snapshot: None,
            untrusted_marks: Vec::new(),
            io: Default::default(),
        }),
    }
}

/// Reads every pending record (and any longer follow-up read) synchronously.
pub fn read_all(flash: &FlashTier, fetched: &mut Fetched, reads: &mut Vec<ReadReq>) {
    flash.read_blocking(fetched, reads);
}

/// Runs `change` on the key's shard once the crash journal allows it,
/// retrying through journal waits and flash back-pressure (as the server
/// does). `change` returns None for "busy, retry".
pub fn mutate<R>(e: &Engine, k: &[u8], mut change: impl FnMut(&mut Shard, u64) -> Option<R>) -> R {
    let hash = Engine::hash(k);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        assert!(Instant::now() < deadline, "mutation never allowed");
        let mut s = e.lock(hash, NOW);
        if s.journal_gate(k, hash).is_some() {
            if let Some(r) = change(&mut s, hash) {
                return r;
            }
        }
        drop(s);
        std::thread::sleep(Duration::from_micros(200));
    }
}

pub fn set(e: &Engine, k: &[u8], v: &[u8]) {
    mutate(e, k, |s, hash| {
        match s.insert(k, hash, NewItem::default(), &[v]) {
            Ok(_) => Some(()),
            Err(InsertError::Busy) => None,
            Err(err) => panic!("insert: {err:?}"),
        }
    })
}

/// Probes until the key is found (in RAM or in a fetched flash record) or
/// absent, then runs `found` on it in the same lock hold.
pub fn with_item<R>(
    e: &Engine,
    k: &[u8],
    mut found: impl FnMut(&mut Shard, u64, &Fetched, Probe) -> Option<R>,
) -> R {
    let hash = Engine::hash(k);
    let flash = e.flash().unwrap().clone();
    let mut fetched = Fetched::default();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        assert!(Instant::now() < deadline, "probe never settled");
        let mut reads = Vec::new();
        let mut s = e.lock(hash, NOW);
        let p = s.probe(k, hash, NOW, &mut fetched, &mut reads);
        if p != Probe::Need {
            if let Some(r) = found(&mut s, hash, &fetched, p) {
                return r;
            }
            drop(s);
            std::thread::sleep(Duration::from_micros(200));
            continue;
        }
        drop(s);
        read_all(&flash, &mut fetched, &mut reads);
    }
}

/// A get; `promote` lets the hit count (toward promotion, too) as a server
/// get does; without it, a peek.
pub fn get(e: &Engine, k: &[u8], promote: bool) -> Option<Vec<u8>> {
    e.get_blocking(k, NOW, promote, |_, _, v| v.to_vec())
}

pub fn delete(e: &Engine, k: &[u8]) -> bool {
    with_item(e, k, |s, hash, _, p| {
        if p == Probe::Absent {
            return Some(false);
        }
        let ok = s.journal_gate(k, hash)?;
        Some(match p {
            Probe::Flash(loc) => {
                s.unlink_flash(hash, loc, &ok);
                true
            }
            _ => s.remove_key(k, hash, NOW, &ok),
        })
    })
}
