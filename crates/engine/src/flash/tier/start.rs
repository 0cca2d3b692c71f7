//! Opening the flash tier: the slots laid out over the devices, what they
//! hold checked (superblocks), and then either recovered after a crash or
//! cleared for a fresh start.

use super::*;

impl FlashTier {
    /// Lays the slots out over the devices (round robin, so consecutive
    /// segments go to different devices) after checking what they hold.
    pub fn new(
        devices: Vec<Arc<dyn BlockDevice>>,
        params: TierParams,
    ) -> Result<FlashTier, ConfigError> {
        let seg = params.segment_size;
        if !seg.is_multiple_of(BLOCK) || !(64 << 10..=8 << 20).contains(&seg) {
            return Err(ConfigError::FlashSegmentSize { size: seg });
        }
        if devices.is_empty() {
            return Err(ConfigError::NoFlashDevice);
        }
        let mut per_dev = Vec::new();
        let mut kept = true;
        let mut prev_journal_off = false;
        let mut superblocks = Vec::new();
        let mut starts = Vec::new();
        for (no, d) in devices.iter().enumerate() {
            let journal = format::journal_bytes_for(d.size());
            let (sb, layout_kept, was_off) =
                check_and_stamp(d.as_ref(), no as u32, seg, journal, &params)?;
            kept &= layout_kept;
            prev_journal_off |= was_off;
            superblocks.push(sb);
            let start = format::segments_start(journal);
            starts.push(start);
            let n = d.size().saturating_sub(start) / seg as u64;
            if n == 0 {
                return Err(DeviceError::TooSmall {
                    name: d.name().to_string(),
                    size: d.size(),
                    segment_kib: seg >> 10,
                }
                .into());
            }
            per_dev.push(n);
        }
        let mut slots = Vec::new();
        let mut next = vec![0u64; devices.len()];
        loop {
            let before = slots.len();
            for (dev, n) in per_dev.iter().enumerate() {
                if next[dev] < *n {
                    slots.push(Slot {
                        dev,
                        class: params.class_of_device(dev),
                        dev_off: starts[dev] + next[dev] * seg as u64,
                        seq: 0,
                        data_len: 0,
                        items: 0,
                        max_exptime: 0,
                        copies: false,
                        state: SlotState::Free,
                    });
                    next[dev] += 1;
                }
            }
            if slots.len() == before || slots.len() >= MAX_SLOTS {
                break;
            }
        }
        slots.truncate(MAX_SLOTS);
        if params.low_ttl > 0 && params.write_buffers < 3 {
            return Err(ConfigError::TtlGroupsNeedBuffers {
                write_buffers: params.write_buffers,
            });
        }
        if slots.len() < FREE_SLOTS_LOW + params.write_buffers {
            return Err(ConfigError::TooFewFlashSegments {
                segments: slots.len(),
                segment_kib: seg >> 10,
                needed: FREE_SLOTS_LOW + params.write_buffers,
            });
        }
        let jbytes = format::journal_bytes_for(devices[0].size());
        if !kept {
            // A new, wiped or re-laid-out device: nothing on it may be
            // recovered, so no old journal block or segment header may remain.
            Self::clear_old_contents(&devices, &slots, jbytes)?;
        }
        let journal = Journal::open(devices[0].clone(), format::JOURNAL_START, jbytes)
            .map_err(|e| DeviceError::io(devices[0].name(), "read the journal", e))?;
        let mut present: PerClass<bool> = Default::default();
        let mut free: PerClass<VecDeque<u32>> = Default::default();
        for (i, s) in slots.iter().enumerate() {
            present[s.class] = true;
            free[s.class].push_back(i as u32);
        }
        // New items land on the first class (in CLASSES order) with devices.
        let new_class = CLASSES
            .into_iter()
            .find(|&c| present[c])
            .unwrap_or_default();
        let two = present[DeviceClass::Fast] && present[DeviceClass::Capacity];
        for c in CLASSES {
            if present[c] && free[c].len() < FREE_SLOTS_LOW + 1 {
                return Err(ConfigError::TooFewFlashSegments {
                    segments: free[c].len(),
                    segment_kib: seg >> 10,
                    needed: FREE_SLOTS_LOW + 1,
                });
            }
        }
        let spare = (0..params.write_buffers.max(2) + usize::from(two))
            .map(|_| AlignedBuf::new(seg))
            .collect();
        let first_seq = {
            let rec = journal.take_recovered().unwrap_or_default();
            let floor_and_horizon = rec.floors.into_iter().fold(rec.max_horizon, u64::max);
            *journal.recovered_slot() = Some(rec);
            floor_and_horizon + 1
        };
        let ndev = devices.len();
        Ok(FlashTier {
            devices,
            journal: Arc::new(journal),
            kept,
            prev_journal_off,
            superblocks: Mutex::new(superblocks),
            distrust: Default::default(),
            max_seq: AtomicU64::new(first_seq - 1),
            state: Mutex::new(State {
                slots,
                free,
                sealed: Default::default(),
                queued: VecDeque::new(),
                open: [None, None, None],
                spare,
                reserved: 0,
                next_seq: first_seq,
                budget_tokens: 0.0,
                budget_at: Instant::now(),
                consecutive_write_errors: 0,
            }),
            stats: TierStats {
                devs: (0..ndev).map(|_| DevStats::default()).collect(),
                ..TierStats::default()
            },
            present,
            new_class,
            nhc: (two && params.nhc).then(|| classes::NhcCtl::new(params.nhc_feedback)),
            params,
            work: Condvar::new(),
            degraded: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            clock: AtomicU32::new(0),
            wakers: Mutex::new(Vec::new()),
        })
    }

    /// Zeroes the journal and every slot's header block.
    fn clear_old_contents(
        devices: &[Arc<dyn BlockDevice>],
        slots: &[Slot],
        jbytes: u64,
    ) -> Result<(), DeviceError> {
        let err = |d: &dyn BlockDevice, e: std::io::Error| DeviceError::io(d.name(), "write", e);
        Journal::wipe(devices[0].as_ref(), format::JOURNAL_START, jbytes)
            .map_err(|e| err(devices[0].as_ref(), e))?;
        let zero = AlignedBuf::new(BLOCK);
        for s in slots {
            let d = devices[s.dev].as_ref();
            d.write_at(zero.as_slice(), s.dev_off)
                .map_err(|e| err(d, e))?;
        }
        for d in devices {
            d.sync().map_err(|e| err(d.as_ref(), e))?;
        }
        Ok(())
    }
}
