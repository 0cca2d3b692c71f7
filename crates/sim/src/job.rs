//! One replay job's options and figures, shared by the replay through the
//! policies' [`QueueCache`](tiercache_policy::queue_cache::QueueCache)
//! (`replay.rs`) and the replay through the server's engine
//! (`engine_replay.rs`): the reporting windows, the counts, the engine's
//! figures and a job's result.

use crate::trace::Trace;
use anyhow::{anyhow, Result};
use serde::Serialize;

/// How to cut the trace into reporting windows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    /// Every N requests.
    Requests(u64),
    /// Every N seconds of trace time.
    Seconds(u32),
}

impl std::str::FromStr for Window {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Window> {
        let bad = || anyhow!("'{s}': a window is a request count (100000) or seconds (3600s)");
        let w = match s.strip_suffix('s') {
            Some(secs) => Window::Seconds(secs.parse().map_err(|_| bad())?),
            None => Window::Requests(s.parse().map_err(|_| bad())?),
        };
        match w {
            Window::Requests(0) | Window::Seconds(0) => Err(bad()),
            w => Ok(w),
        }
    }
}

/// What a replay counts, for the whole trace or one window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub requests: u64,
    pub misses: u64,
    pub bytes: u64,
    pub miss_bytes: u64,
}

impl Counts {
    pub fn miss_ratio(&self) -> f64 {
        ratio(self.misses, self.requests)
    }
    pub fn byte_miss_ratio(&self) -> f64 {
        ratio(self.miss_bytes, self.bytes)
    }
    pub(crate) fn add(&mut self, o: &Counts) {
        self.requests += o.requests;
        self.misses += o.misses;
        self.bytes += o.bytes;
        self.miss_bytes += o.miss_bytes;
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// One window's counts.
#[derive(Debug, Clone, Serialize)]
pub struct WindowStats {
    /// Index of the window's first request in the trace.
    pub first_request: u64,
    /// Trace time of that request.
    pub start_time: u32,
    #[serde(flatten)]
    pub counts: Counts,
    pub miss_ratio: f64,
    pub byte_miss_ratio: f64,
    /// The engine's figures over the window (`tiercache` runs only).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub engine: Option<EngineFigures>,
}

/// The result of one (policy, size) job.
#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    pub policy: String,
    pub size: u64,
    #[serde(flatten)]
    pub counts: Counts,
    pub miss_ratio: f64,
    pub byte_miss_ratio: f64,
    pub evictions: u64,
    /// Objects in the cache at the end.
    pub objects: u64,
    pub seconds: f64,
    /// CPU time of the replaying thread: a speed
    /// figure that other load on the machine does not distort.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_seconds: Option<f64>,
    /// The engine's figures (`tiercache` runs only): flash bytes written,
    /// write amplification, DRAM per item.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub engine: Option<EngineFigures>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub windows: Vec<WindowStats>,
}

/// Options shared by every job of a run.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReplayOptions {
    pub window: Option<Window>,
    pub honor_ops: bool,
    /// Flash bytes for `tiercache` runs (None: RAM only); other policies ignore it.
    pub flash: Option<u64>,
    /// `ext_small_max` for `tiercache` runs with flash: items of at most
    /// this many bytes go to the small-object store (0: none).
    pub small_max: usize,
    /// Percent of the flash the small-object store takes (0: 50).
    pub small_share: u64,
    /// Log objects of one set the store needs to move them into it (0:
    /// the store's default).
    pub small_threshold: usize,
    /// Percent of the store's region its log takes (0: the store's default).
    pub small_log_percent: u64,
    /// Do not hint the index with the trace's average object size (the
    /// server's default: no `ext_avg_item_size`).
    pub no_index_hint: bool,
}

/// Ends of the windows (exclusive request indices), the last being the trace's end.
pub(crate) fn window_ends(trace: &Trace, window: Option<Window>) -> Vec<usize> {
    let n = trace.len();
    let mut ends = Vec::new();
    match window {
        None => {}
        Some(Window::Requests(w)) => {
            let w = w as usize;
            ends.extend((1..).map(|k| k * w).take_while(|&e| e < n));
        }
        Some(Window::Seconds(w)) => {
            if let Some(&t0) = trace.times.first() {
                let mut next = t0 as u64 + w as u64;
                for (i, &t) in trace.times.iter().enumerate() {
                    if t as u64 >= next {
                        ends.push(i);
                        while t as u64 >= next {
                            next += w as u64;
                        }
                    }
                }
            }
        }
    }
    ends.push(n);
    ends
}

/// What the engine and its flash tier did, for the whole run or one window.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct EngineFigures {
    /// Flash device size (0: RAM only).
    pub flash_size: u64,
    /// Requests served from flash.
    pub flash_hits: u64,
    /// Bytes the flash tier wrote to the device (whole segments).
    pub flash_bytes_written: u64,
    /// Bytes of items demoted from RAM and admitted to flash.
    pub flash_bytes_admitted: u64,
    /// flash_bytes_written / flash_bytes_admitted (0 when nothing was admitted).
    pub write_amplification: f64,
    /// Items cached (RAM and flash) at the end.
    pub items: u64,
    /// Of which on flash.
    pub flash_items: u64,
    /// DRAM of the index at the end (without the flash write buffers).
    pub index_bytes: u64,
    /// index_bytes / items.
    pub dram_index_bytes_per_item: f64,
    /// All DRAM the engine holds (index, RAM segments, flash write buffers) / items.
    pub dram_bytes_per_item: f64,
    /// Inserts retried because the flash tier was busy.
    pub busy_retries: u64,
}

impl EngineFigures {
    pub(crate) fn since(&self, before: &EngineFigures) -> EngineFigures {
        let mut d = *self;
        d.flash_hits -= before.flash_hits;
        d.flash_bytes_written -= before.flash_bytes_written;
        d.flash_bytes_admitted -= before.flash_bytes_admitted;
        d.busy_retries -= before.busy_retries;
        d.write_amplification = wa(d.flash_bytes_written, d.flash_bytes_admitted);
        d
    }
}

pub(crate) fn wa(written: u64, admitted: u64) -> f64 {
    if admitted == 0 {
        0.0
    } else {
        written as f64 / admitted as f64
    }
}
