//! Crash recovery: the segment table and the index rebuilt from the
//! devices' segment headers and records, the trust floor, and what a failed
//! journal leaves for the next start.

use super::*;

/// Segments crash recovery reads at once.
const RECOVERY_THREADS: usize = 4;

impl FlashTier {
    /// The crash journal failed: marks the devices untrusted for the next
    /// start (see [`super::distrust`]), retried by the flusher until it is
    /// written. `now`: try at once (at shutdown). Returns whether the
    /// failure is recorded where the next start looks.
    pub fn record_journal_failure(&self, now: bool) -> bool {
        self.distrust.record(
            &self.devices,
            &self.superblocks,
            |d, sb| write_superblock(d, sb).map_err(|e| e.to_string()),
            now,
        );
        self.distrust.recorded()
    }
}

/// Crash recovery: the segment table and the index from the devices.
impl FlashTier {
    /// Rebuilds the segment table from the segment headers on the devices
    /// and hands every record that may be served to `insert` (which returns
    /// whether it took it), oldest segment first. A record is dropped when
    /// its segment is at or below the journal's floor for the device class
    /// the segment was written for, a tombstone covers it, or it fails its
    /// checksum or sequence check (expired ones are
    /// indexed and expire on first access, as always). Call
    /// once, before anything is appended, and only after a crash (a
    /// snapshot from a graceful shutdown is exact; use it instead).
    pub fn recover(&self, insert: impl Fn(Loc, &[u8], u64) -> bool + Sync) -> Recovery {
        let mut report = Recovery::default();
        let mut rec = self.journal.take_recovered().unwrap_or_default();
        if !self.kept || !self.params.crash_journal {
            if !self.kept {
                // Nothing of the earlier run is on the devices any more.
                self.distrust.clear_files();
            }
            return report;
        }
        if self.prev_journal_off {
            rec.damaged = Some(
                "the previous run kept no crash journal (ext_crash_safe=0, or its journal failed)"
                    .into(),
            );
        }
        if self.distrust.previous_run() {
            rec.damaged =
                Some("an earlier run's crash journal failed (its mark file is there)".into());
        }
        let mut st = self.state.lock();
        let headers = self.read_headers(&st);
        report.bytes_read += (st.slots.len() * BLOCK) as u64;
        let moved_class = self.class_changes(&st, &headers);
        let mut found: Vec<(u64, u32, SegmentHeader)> = Vec::new();
        for (i, h) in headers {
            if rec.below_floor(h.seq, h.class) {
                report.untrusted_segments += 1;
                continue;
            }
            if h.journal_counter > rec.max_counter && rec.damaged.is_none() {
                rec.damaged = Some(format!(
                    "the crash journal on {} reads back older (write {}) than segment {i} sealed after it (write {})",
                    self.devices[0].name(),
                    rec.max_counter,
                    h.journal_counter
                ));
            }
            found.push((h.seq, i, h));
        }
        if let Some(why) = &rec.damaged {
            tracing::error!(
                "{why}: tombstones may be lost, so no flash item can be proven current; \
                 starting with an empty flash tier"
            );
            // Make the distrust durable: the floor over everything found.
            let top = found.iter().map(|f| f.0).max().unwrap_or(0);
            report.untrusted_segments += found.len() as u64;
            found.clear();
            st.next_seq = st.next_seq.max(top + 1);
            let t = self.journal.raise_floor(top);
            if self.journal.wait_durable(t, Duration::from_secs(60)) {
                if let Err(e) = self.journal.zero_blocks(&rec.invalid_blocks) {
                    tracing::error!(error = %e, "cannot clear the damaged journal blocks");
                }
                drop(st);
                self.covered();
                st = self.state.lock();
            }
        }
        found.sort_unstable_by_key(|f| f.0);
        let slots: Vec<(usize, u64)> = st.slots.iter().map(|s| (s.dev, s.dev_off)).collect();
        drop(st);
        // Several segments read at once (the device wants queue depth), each
        // parsed by the thread that read it; records may be indexed in any
        // order, since at most one live record of a key survives the journal.
        let next = AtomicUsize::new(0);
        let (dead, bytes) = (AtomicU64::new(0), AtomicU64::new(0));
        let items: Vec<AtomicU32> = found.iter().map(|_| AtomicU32::new(u32::MAX)).collect();
        let threads = RECOVERY_THREADS.min(found.len()).max(1);
        std::thread::scope(|sc| {
            for _ in 0..threads {
                sc.spawn(|| {
                    let mut scratch = AlignedBuf::new(self.params.segment_size);
                    loop {
                        let n = next.fetch_add(1, Ordering::Relaxed);
                        let Some(&(seq, slot, h)) = found.get(n) else {
                            return;
                        };
                        let (dev, off) = slots[slot as usize];
                        let len = round_up(BLOCK + h.data_len as usize, BLOCK);
                        let buf = &mut scratch.as_mut_slice()[..len];
                        if !self.devices[dev]
                            .read_at(buf, off)
                            .is_ok_and(|got| got == len)
                        {
                            tracing::warn!(
                                slot,
                                "cannot read a flash segment during recovery; its items are dropped"
                            );
                            continue;
                        }
                        bytes.fetch_add(len as u64, Ordering::Relaxed);
                        let mut kept = 0u32;
                        self.for_each_record(buf, seq, slot, |loc, item| {
                            let key = crate::item::key_of(item);
                            let hash = crate::hash::hash_key(key);
                            if rec.is_dead(hash, seq, h.class) {
                                dead.fetch_add(1, Ordering::Relaxed);
                            } else if insert(loc, item, hash) {
                                kept += 1;
                            }
                        });
                        items[n].store(kept, Ordering::Relaxed);
                    }
                });
            }
        });
        report.dead = dead.into_inner();
        report.bytes_read += bytes.into_inner();
        let mut st = self.state.lock();
        let mut max_seq = st.next_seq - 1;
        // The highest number of a segment that could not be read, by the
        // class it was written for.
        let mut unread: PerClass<u64> = Default::default();
        for (n, &(seq, slot, h)) in found.iter().enumerate() {
            max_seq = max_seq.max(seq);
            let kept = items[n].load(Ordering::Relaxed);
            if kept == u32::MAX {
                unread[h.class] = unread[h.class].max(seq);
                continue;
            }
            report.items += u64::from(kept);
            report.segments += 1;
            let s = &mut st.slots[slot as usize];
            s.seq = seq;
            s.data_len = h.data_len;
            s.items = kept;
            s.max_exptime = h.max_exptime;
            s.copies = true;
            s.state = SlotState::Sealed;
            let c = s.class;
            st.sealed[c].push_back(slot);
        }
        st.next_seq = max_seq + 1;
        self.max_seq.store(max_seq, Ordering::Release);
        st.rebuild_free();
        drop(st);
        // A segment that could not be read has no entries, and its slot is
        // free, but its records stay on the device above the floor until
        // the slot is rewritten: a change of one of its keys finds no entry
        // and asks for no tombstone, and a later crash, reading the segment
        // fine, brought the old value back (classes_crash_paths.rs). Its
        // class's floor covers it (and the older segments of that class,
        // served until the next crash). Its records' twins, where read, are
        // indexed and their changes ask for tombstones.
        for c in CLASSES {
            let seq = unread[c];
            if seq > 0 {
                self.wait_floor(self.journal.raise_class_floor(c, seq));
            }
        }
        self.settle_classes(moved_class);
        report
    }
}

/// The floor and the devices' "journal off" marks.
impl FlashTier {
    /// Whether a record in a segment numbered `seq` is at or below the floor
    /// of every class that has devices. Then so is every older record of its
    /// key, on either class, and a change of the key needs no tombstone for
    /// them. Below one class's floor alone is not enough: an older copy of
    /// the record may be on the other class.
    ///
    /// That holds for records written fresh, not for a record with the copy
    /// bit: a copy can land in an open segment numbered lower than the
    /// record it was copied from (the short-TTL stream's segment stays open
    /// while others roll), so a change of its key must ask for a tombstone
    /// even below the floors when its segment may hold copies
    /// ([`tombstone_horizon`](Self::tombstone_horizon)).
    pub fn below_floors(&self, seq: u64) -> bool {
        let floors = self.journal.floors();
        CLASSES
            .into_iter()
            .filter(|&c| self.present[c])
            .all(|c| seq <= floors[c])
    }

    /// The valid segment headers on the devices, by slot (a header that
    /// names another slot or more data than a segment holds is not one).
    fn read_headers(&self, st: &State) -> Vec<(u32, SegmentHeader)> {
        let mut block = AlignedBuf::new(BLOCK);
        let mut found = Vec::new();
        for (i, s) in st.slots.iter().enumerate() {
            if !self.devices[s.dev]
                .read_at(block.as_mut_slice(), s.dev_off)
                .is_ok_and(|n| n == BLOCK)
            {
                continue;
            }
            if let Some(h) = SegmentHeader::read(block.as_slice()).filter(|h| {
                h.slot == i as u32 && h.data_len as usize + BLOCK <= self.params.segment_size
            }) {
                found.push((i as u32, h));
            }
        }
        found
    }

    /// After a snapshot was restored: if the last run kept no crash journal,
    /// raises the floor over every segment on the devices, so that a crash
    /// from now on never trusts what that run wrote.
    pub fn after_restore(&self) {
        if !self.params.crash_journal || !(self.prev_journal_off || self.distrust.previous_run()) {
            return;
        }
        let st = self.state.lock();
        let top = self
            .read_headers(&st)
            .iter()
            .map(|(_, h)| h.seq)
            .fold(self.max_seq(), u64::max);
        drop(st);
        let t = self.journal.raise_floor(top);
        if self.journal.wait_durable(t, Duration::from_secs(60)) {
            self.covered();
        }
    }

    /// The highest sequence number of a segment written for another class
    /// than its device's now (a device whose class changed between runs),
    /// if any.
    pub(super) fn class_changes(
        &self,
        st: &State,
        headers: &[(u32, SegmentHeader)],
    ) -> Option<u64> {
        headers
            .iter()
            .filter(|(i, h)| h.class != st.slots[*i as usize].class)
            .map(|(_, h)| h.seq)
            .max()
    }

    /// A device changed class: its segments were judged (after a crash) by
    /// the floor of the class they were written for, but from now on its
    /// reclaims raise the other class's floor. Both floors are raised over
    /// them first, so a later crash recovers none of them (lost, never
    /// stale); their items are served until then.
    pub(super) fn settle_classes(&self, moved_class: Option<u64>) {
        let Some(top) = moved_class.filter(|_| self.params.crash_journal) else {
            return;
        };
        tracing::warn!(
            "a flash device's class changed since its segments were written: \
             a crash from now on will not recover them"
        );
        self.wait_floor(self.journal.raise_floor(top));
    }

    /// Waits (up to a minute) for a floor asked of the journal.
    pub(super) fn wait_floor(&self, ticket: u64) {
        if !self.journal.wait_durable(ticket, Duration::from_secs(60)) {
            tracing::error!("the crash journal did not commit the floor in 60 s");
        }
    }

    /// The floor covers everything written without the journal: clears the
    /// devices' "journal off" mark.
    fn covered(&self) {
        if self.distrust.previous_run() {
            self.distrust.clear_files();
        }
        let mut sbs = self.superblocks.lock();
        for (d, sb) in self.devices.iter().zip(sbs.iter_mut()) {
            if sb.journal_off {
                sb.journal_off = false;
                if let Err(e) = write_superblock(d.as_ref(), sb) {
                    tracing::error!(error = %e, "cannot update the superblock");
                }
            }
        }
    }
}
