//! Device classes: where a record goes (new items on the fast class, moves
//! from a fast reclaim to the capacity class, short TTLs stay on fast),
//! per-device read figures, and the non-hierarchical caching scheduler
//! (`tiercache_policy::nhc`) fed with them.

use super::*;
use tiercache_policy::nhc::{Measurement, Nhc, NhcParams, Objective};

/// Open streams: new long-TTL items, new short-TTL items, moves to capacity.
pub(super) const STREAMS: usize = 3;
/// The stream of records moved out of a fast reclaim and of replicas.
pub(super) const MOVE_STREAM: usize = 2;
/// The class that stream writes to (with both classes; the class a reclaim
/// moves its records to).
pub(super) const MOVE_CLASS: DeviceClass = DeviceClass::Capacity;

/// Why a record is appended, which decides its class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dest {
    /// An item leaving RAM: the class new items land on.
    New,
    /// A live record of a segment being reclaimed, from `from`: with both
    /// classes it moves to the capacity class unless it expires soon (those
    /// stay on the fast class).
    Moved { from: Loc },
    /// A capacity hit copied into the fast class; its capacity copy (in a
    /// segment with sequence number `from_seq`) is kept. Refused when the
    /// fast buffer is not newer than that segment.
    Promote { from_seq: u64 },
    /// A fast hit copied to the capacity class while copies pay
    /// (`Copies::copy_to_capacity`, `stores/copies.rs`); the new record becomes the entry and
    /// the fast record (in a segment with sequence number `from_seq`) is
    /// kept as its copy. Like a promotion, the new record must be newer:
    /// a capacity buffer not newer than that segment is sealed first when
    /// it is a quarter full or empty, else the copy is refused.
    Replica { from_seq: u64 },
}

/// Length of one scheduler interval.
const NHC_INTERVAL: Duration = Duration::from_millis(100);

/// The scheduler and the counters of its current interval.
pub(super) struct NhcCtl {
    sched: Mutex<(Nhc, Instant, [u64; 10])>,
    /// The scheduler's outputs, read without its lock: the effective
    /// load_admit (f64 bits), data_admit, state (1 or 2).
    load_admit: AtomicU64,
    data_admit: AtomicBool,
    state: AtomicU32,
    /// [`Nhc::copies_pay`] of the last interval.
    copies_pay: AtomicBool,
    /// Flash lookups, and those of them that found a fast copy.
    lookups: AtomicU64,
    fast_resident: AtomicU64,
    rng: AtomicU64,
    /// (data_admit, load_admit) pinned by [`FlashTier::pin_nhc`].
    pinned: Mutex<Option<(bool, f64)>>,
}

impl NhcCtl {
    pub(super) fn new(feedback: Objective) -> NhcCtl {
        let s = Nhc::new(NhcParams::default(), feedback);
        NhcCtl {
            load_admit: AtomicU64::new(s.effective_load_admit().to_bits()),
            data_admit: AtomicBool::new(s.data_admit()),
            copies_pay: AtomicBool::new(false),
            state: AtomicU32::new(u32::from(s.state().number())),
            sched: Mutex::new((s, Instant::now(), [0; 10])),
            lookups: AtomicU64::new(0),
            fast_resident: AtomicU64::new(0),
            rng: AtomicU64::new(0x9E37_79B9_7F4A_7C15),
            pinned: Mutex::new(None),
        }
    }
}

/// An unhit record the fast class reclaims that expires within this many
/// seconds is dropped rather than written to the capacity class.
pub const MOVE_HORIZON_SECS: u32 = 60;

/// Whether an item expires within [`MOVE_HORIZON_SECS`] of `now`.
fn expires_soon(exptime: u32, now: u32) -> bool {
    exptime != 0 && exptime <= now.saturating_add(MOVE_HORIZON_SECS)
}

impl FlashTier {
    /// Both classes have devices.
    pub fn two_classes(&self) -> bool {
        self.present[DeviceClass::Fast] && self.present[DeviceClass::Capacity]
    }

    /// The class a stream writes to.
    pub(super) fn stream_class(&self, stream: usize) -> DeviceClass {
        if stream == MOVE_STREAM {
            MOVE_CLASS
        } else {
            self.new_class
        }
    }

    /// The stream a record goes to.
    pub(super) fn stream_for(&self, ttl_class: usize, dest: Dest, exptime: u32, now: u32) -> usize {
        match dest {
            Dest::Moved { .. } if self.two_classes() && !expires_soon(exptime, now) => MOVE_STREAM,
            Dest::Replica { .. } => MOVE_STREAM,
            _ => ttl_class,
        }
    }

    /// The copy bit of a record (format.rs): set on a promotion into the
    /// fast class (its capacity record stays), else as the item's `bits`
    /// have it (an item promoted to RAM carries it, and a moved record
    /// keeps it). A record with the bit has its key tombstoned when a
    /// reclaim drops it (`Shard::reclaim_flash`): the older record it was
    /// copied from may be on the other class, below neither floor.
    pub(super) fn copy_bit(dest: Dest, bits: u8) -> bool {
        matches!(dest, Dest::Promote { .. } | Dest::Replica { .. })
            || bits & crate::item::FLASH_COPY != 0
    }

    /// Whether a live record the fast class reclaims at `loc` moves to the
    /// capacity class even if it was not hit: with both classes, the
    /// capacity class keeps what the fast one lets go (as extstore compacts
    /// to its compact bucket), except items that expire within
    /// [`MOVE_HORIZON_SECS`]. Not `ext_low_ttl` (an hour by default): an
    /// item with half an hour left is still read, and dropping it while
    /// the capacity class has room was a miss memcached does not give
    /// (tests/interop/flash_fuzz.py lost keys with 500 s left).
    pub fn moves_unhit(&self, loc: Loc, exptime: u32, now: u32) -> bool {
        self.two_classes()
            && !expires_soon(exptime, now)
            && self.class_at(loc) == Some(DeviceClass::Fast)
    }

    /// The class of the slot `loc` points into.
    pub fn class_at(&self, loc: Loc) -> Option<DeviceClass> {
        let st = self.state.lock();
        let s = st.slots.get((loc.seg - FLASH_SEG_BASE) as usize)?;
        Some(s.class)
    }

    /// Whether a capacity hit is copied into the fast class now: always in
    /// classic caching, while the scheduler admits data with NHC.
    pub fn data_admit(&self) -> bool {
        self.two_classes()
            && self
                .nhc
                .as_ref()
                .is_none_or(|n| n.data_admit.load(Ordering::Relaxed))
    }

    /// Whether a fast hit is copied to the capacity class now: both
    /// classes, NHC on, and the scheduler found the fast class queued with
    /// the capacity class having headroom ([`Nhc::copies_pay`]); or pinned
    /// so by [`pin_copies`](Self::pin_copies).
    pub fn copies_pay(&self) -> bool {
        self.two_classes()
            && self.nhc.as_ref().is_some_and(|n| {
                self.params
                    .nhc_copies
                    .unwrap_or_else(|| n.copies_pay.load(Ordering::Relaxed))
            })
    }

    /// Pins [`copies_pay`](Self::copies_pay) (tests): it holds until the
    /// scheduler's next interval unless the scheduler is pinned too
    /// ([`pin_nhc`](Self::pin_nhc)). No effect without NHC.
    pub fn pin_copies(&self, pay: bool) {
        if let Some(n) = &self.nhc {
            n.copies_pay.store(pay, Ordering::Relaxed);
        }
    }

    /// Counts a flash lookup for the fast hit ratio the scheduler watches.
    pub fn note_lookup(&self, fast_copy: bool) {
        if let Some(n) = &self.nhc {
            n.lookups.fetch_add(1, Ordering::Relaxed);
            if fast_copy {
                n.fast_resident.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Where a hit on an item with copies on both classes is read: true for
    /// the fast class (always without NHC).
    pub fn route_to_fast(&self) -> bool {
        let Some(n) = &self.nhc else {
            return true;
        };
        let la = f64::from_bits(n.load_admit.load(Ordering::Relaxed));
        if la >= 1.0 {
            return true;
        }
        // splitmix64 over a shared counter: cheap, and fine for a split.
        let mut z = n
            .rng
            .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed)
            .wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        let r = (z >> 11) as f64 / (1u64 << 53) as f64;
        let fast = r < la;
        let c = if fast {
            &self.stats.dual_fast_reads
        } else {
            &self.stats.dual_capacity_reads
        };
        c.fetch_add(1, Ordering::Relaxed);
        fast
    }

    /// Pins the scheduler's outputs (tests, and benchmarks that compare
    /// fixed splits): `Some((data_admit, load_admit))`, or None to let the
    /// scheduler decide again. No effect without NHC.
    pub fn pin_nhc(&self, pin: Option<(bool, f64)>) {
        let Some(n) = &self.nhc else {
            return;
        };
        *n.pinned.lock() = pin;
        if let Some((da, la)) = pin {
            n.data_admit.store(da, Ordering::Relaxed);
            n.load_admit
                .store(la.clamp(0.0, 1.0).to_bits(), Ordering::Relaxed);
        }
    }

    /// Closes the scheduler's interval when it is due (the flusher calls
    /// this every few milliseconds).
    pub(super) fn nhc_tick(&self) {
        let Some(n) = &self.nhc else {
            return;
        };
        if n.pinned.lock().is_some() {
            return;
        }
        let mut g = n.sched.lock();
        let (sched, since, prev) = &mut *g;
        let elapsed = since.elapsed();
        if elapsed < NHC_INTERVAL {
            return;
        }
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        // Reads, the sums of their latencies (submission to completion)
        // and of their time at the device (without the wait for a pread
        // thread with `ext_io=pool`, which reads of both classes share and
        // the balance leaves out: issue 35), per class.
        let mut class: PerClass<(u64, u64, u64)> = Default::default();
        for (dev, d) in self.stats.devs.iter().enumerate() {
            let c = &mut class[self.params.class_of_device(dev)];
            c.0 += l(&d.reads);
            c.1 += l(&d.latency_us);
            c.2 += l(&d.device_us);
        }
        let (fast, capacity) = (class[DeviceClass::Fast], class[DeviceClass::Capacity]);
        let now = [
            class.iter().map(|c| c.0).sum(),
            class.iter().map(|c| c.1).sum(),
            l(&n.lookups),
            l(&n.fast_resident),
            fast.0,
            fast.1,
            capacity.0,
            capacity.1,
            fast.2,
            capacity.2,
        ];
        let m = Measurement {
            secs: elapsed.as_secs_f64(),
            reads: now[0] - prev[0],
            latency_us: (now[1] - prev[1]) as f64,
            fast_resident: (now[3] - prev[3]).min(now[2] - prev[2]),
            class_reads: [now[4] - prev[4], now[6] - prev[6]],
            class_latency_us: [(now[5] - prev[5]) as f64, (now[7] - prev[7]) as f64],
            // The shared queue's part: latency minus time at the device.
            class_queued_us: [
                (now[5] - prev[5]).saturating_sub(now[8] - prev[8]) as f64,
                (now[7] - prev[7]).saturating_sub(now[9] - prev[9]) as f64,
            ],
        };
        // The hit ratio is of lookups, the throughput of device reads.
        let lookups = now[2] - prev[2];
        let m = Measurement {
            fast_resident: if lookups == 0 {
                0
            } else {
                (m.fast_resident as f64 / lookups as f64 * m.reads as f64) as u64
            },
            ..m
        };
        sched.interval(&m);
        *prev = now;
        *since = Instant::now();
        n.load_admit
            .store(sched.effective_load_admit().to_bits(), Ordering::Relaxed);
        n.data_admit.store(sched.data_admit(), Ordering::Relaxed);
        n.state
            .store(u32::from(sched.state().number()), Ordering::Relaxed);
        n.copies_pay.store(sched.copies_pay(), Ordering::Relaxed);
    }

    /// Per-class figures (devices' reads summed by class).
    pub fn class_stats(&self) -> PerClass<crate::flash::stats::ClassStats> {
        let mut out: PerClass<crate::flash::stats::ClassStats> = Default::default();
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        for (dev, d) in self.stats.devs.iter().enumerate() {
            let c = &mut out[self.params.class_of_device(dev)];
            c.devices += 1;
            c.reads += l(&d.reads);
            c.bytes_read += l(&d.bytes_read);
            c.bytes_written += l(&d.bytes_written);
            c.queue_depth += l(&d.in_flight);
            c.latency_us += l(&d.latency_us);
            c.device_us += l(&d.device_us);
            c.buffer_reads += l(&d.buffer_reads);
        }
        let st = self.state.lock();
        for s in &st.slots {
            out[s.class].segments += 1;
        }
        for c in CLASSES {
            out[c].segments_free = st.free[c].len() as u64;
        }
        out
    }

    /// The scheduler's figures for `stats`.
    pub fn nhc_stats(&self) -> NhcStats {
        let Some(n) = &self.nhc else {
            return NhcStats {
                enabled: false,
                state: 1,
                data_admit: self.two_classes(),
                load_admit: 1.0,
                ..NhcStats::default()
            };
        };
        let g = n.sched.lock();
        let (limits, floors_us) = g.0.learned();
        NhcStats {
            enabled: true,
            state: n.state.load(Ordering::Relaxed),
            data_admit: n.data_admit.load(Ordering::Relaxed),
            load_admit: g.0.load_admit(),
            entered_tune: g.0.entered_tune,
            left_tune: g.0.left_tune,
            load_admit_moves: g.0.moves,
            iterations: g.0.iterations,
            last_iteration: g.0.last_iteration().copied(),
            feedback: Some(g.0.objective()),
            copies_pay: self.copies_pay(),
            limits,
            floors_us,
        }
    }
}
