//! `tiercache-sim small`: a Zipf workload of small objects replayed through
//! the engine's small-object store (`tiercache_engine::small`, the code the
//! tests drive) on an in-memory device, cache-aside (a get that misses
//! inserts the object). Reports the miss ratio, the store's DRAM per object
//! (filters, log index, segment buffer, from the structures' sizes) and the
//! application-level write amplification (device bytes written / key and
//! value bytes admitted), over the second half of the requests (the first
//! half warms the store up).

use crate::synth::Zipf;
use crate::units;
use anyhow::{bail, Result};
use clap::Args;
use serde::Serialize;
use std::sync::Arc;
use tiercache_engine::device::fault::MemDevice;
use tiercache_engine::small::{Obj, SmallConfig, SmallStore};
use tiercache_policy::rng::Rng;

#[derive(Args, Debug)]
pub struct SmallArgs {
    /// Device bytes for the store (log and sets).
    #[arg(long, default_value = "64MiB")]
    pub flash: String,
    /// Distinct objects (keys).
    #[arg(long, default_value_t = 2_000_000)]
    pub objects: u64,
    /// Requests (gets; a miss inserts).
    #[arg(long, default_value_t = 4_000_000)]
    pub requests: u64,
    /// Zipf exponent.
    #[arg(long, default_value_t = 0.9)]
    pub alpha: f64,
    /// Key bytes.
    #[arg(long, default_value_t = 32)]
    pub key_len: usize,
    /// Value bytes: N, or MIN..=MAX (uniform per key).
    #[arg(long, default_value = "100")]
    pub value: String,
    /// Percent of the device for the log.
    #[arg(long, default_value_t = 5)]
    pub log_percent: u64,
    /// Log objects of one set needed to move them to it (1: every set is
    /// written whenever its first log object leaves the log).
    #[arg(long, default_value_t = 2)]
    pub threshold: usize,
    /// Bloom filter bits per set.
    #[arg(long, default_value_t = 128)]
    pub filter_bits: usize,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// One run's figures (the second half of the requests).
#[derive(Debug, Serialize)]
pub struct SmallFigures {
    pub flash_bytes: u64,
    pub sets: usize,
    pub log_pages: usize,
    pub requests: u64,
    pub miss_ratio: f64,
    pub objects_held: u64,
    /// Share of set payload bytes in use at the end.
    pub set_fill: f64,
    pub dram_bytes: u64,
    pub dram_bits_per_object: f64,
    /// Of which per-set filters, hit bits and generations; the log index; the rest.
    pub dram_bits_per_object_sets: f64,
    pub dram_bits_per_object_log_index: f64,
    pub dram_bits_per_object_other: f64,
    /// Device bytes written / key+value bytes admitted.
    pub write_amplification: f64,
    pub log_share_of_writes: f64,
    pub objects_per_set_write: f64,
    /// Device reads per get that found nothing (filter false positives).
    pub false_positive_reads_per_miss: f64,
    pub reads_per_set_or_log_hit: f64,
}

fn value_range(s: &str) -> Result<(usize, usize)> {
    let r = match s.split_once("..=") {
        Some((a, b)) => (a.trim().parse()?, b.trim().parse()?),
        None => {
            let v = s.trim().parse()?;
            (v, v)
        }
    };
    if r.0 > r.1 {
        bail!("--value {s}: MIN above MAX");
    }
    Ok(r)
}

pub fn simulate(a: &SmallArgs) -> Result<SmallFigures> {
    let bytes = units::parse_size(&a.flash)?.resolve(0);
    let (vmin, vmax) = value_range(&a.value)?;
    let cfg = SmallConfig {
        move_threshold: a.threshold.max(1),
        filter_bits: a.filter_bits,
        ..SmallConfig::for_region(bytes, a.log_percent)
    };
    let dev = Arc::new(MemDevice::new(cfg.region_bytes() as usize));
    let mut st = SmallStore::format(dev, 0, cfg)?;
    let zipf = Zipf::new(a.objects, a.alpha);
    let mut rng = Rng::new(a.seed);
    let key = |id: u64| {
        let mut k = format!("{id:016x}").into_bytes();
        k.resize(a.key_len.max(16), b'k');
        k
    };
    let vlen = |id: u64| vmin + (id.wrapping_mul(0x9e37_79b9) as usize) % (vmax - vmin + 1);
    let half = a.requests / 2;
    let mut misses = 0u64;
    let mut base = st.stats;
    for i in 0..a.requests {
        if i == half {
            base = st.stats;
            misses = 0;
        }
        let id = zipf.sample(&mut rng);
        let k = key(id);
        if st.get(&k, 1).is_none() {
            misses += 1;
            st.insert(Obj {
                key: k,
                value: vec![b'v'; vlen(id)],
                ..Obj::default()
            })?;
        }
    }
    let s = st.stats;
    let measured = a.requests - half;
    let written = (s.log_bytes_written + s.set_bytes_written)
        - (base.log_bytes_written + base.set_bytes_written);
    let admitted = s.bytes_admitted - base.bytes_admitted;
    let sets_written = s.sets_written - base.sets_written;
    let held = st.objects();
    let parts = st.dram_parts();
    let avg_obj = 20 + a.key_len + (vmin + vmax) / 2;
    let set_objects = held as f64;
    let ratio = |x: u64, y: u64| if y == 0 { 0.0 } else { x as f64 / y as f64 };
    let hits_flash = (s.hits_log + s.hits_set) - (base.hits_log + base.hits_set);
    Ok(SmallFigures {
        flash_bytes: cfg.region_bytes(),
        sets: cfg.sets,
        log_pages: cfg.log_pages(),
        requests: measured,
        miss_ratio: ratio(misses, measured),
        objects_held: held,
        set_fill: (set_objects * avg_obj as f64 / ((cfg.sets + cfg.log_pages()) as f64 * 4072.0))
            .min(1.0),
        dram_bytes: st.dram_bytes(),
        dram_bits_per_object: ratio(st.dram_bytes() * 8, held),
        dram_bits_per_object_sets: ratio(parts.0 * 8, held),
        dram_bits_per_object_log_index: ratio(parts.1 * 8, held),
        dram_bits_per_object_other: ratio(parts.2 * 8, held),
        write_amplification: ratio(written, admitted),
        log_share_of_writes: ratio(s.log_bytes_written - base.log_bytes_written, written),
        objects_per_set_write: ratio(s.moved - base.moved, sets_written),
        false_positive_reads_per_miss: ratio(
            s.false_positive_reads - base.false_positive_reads,
            misses,
        ),
        reads_per_set_or_log_hit: ratio(s.reads - base.reads, hits_flash),
    })
}

pub fn run(a: &SmallArgs) -> Result<()> {
    let f = simulate(a)?;
    println!("{}", serde_json::to_string_pretty(&f)?);
    Ok(())
}
