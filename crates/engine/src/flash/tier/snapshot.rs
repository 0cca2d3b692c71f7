//! Graceful shutdown: draining the write path and the segment table's part
//! of the snapshot (see persist.rs).

use super::*;

/// Snapshot (graceful restart) of the segment table: see persist.rs.
impl FlashTier {
    /// Seals the open buffer, waits until every queued segment is written
    /// and no reclaim runs, then stops the flusher. False on timeout.
    pub fn drain_and_stop(&self, timeout: Duration) -> bool {
        self.seal_open();
        let deadline = Instant::now() + timeout;
        loop {
            {
                let st = self.state.lock();
                let busy = !st.queued.is_empty()
                    || st
                        .slots
                        .iter()
                        .any(|s| matches!(s.state, SlotState::Writing(_) | SlotState::Reclaiming));
                if !busy {
                    self.stop.store(true, Ordering::Relaxed);
                    self.work.notify_all();
                    drop(st);
                    let t = self.journal.last_ticket();
                    let left = deadline.saturating_duration_since(Instant::now());
                    return self.journal.wait_durable(t, left);
                }
            }
            if Instant::now() > deadline {
                return false;
            }
            self.work.notify_all();
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    pub fn save<W: std::io::Write>(
        &self,
        w: &mut crate::persist::SnapWriter<W>,
    ) -> std::io::Result<()> {
        let st = self.state.lock();
        w.u64(st.next_seq)?;
        w.u32(st.slots.len() as u32)?;
        for s in &st.slots {
            w.u8(u8::from(matches!(s.state, SlotState::Sealed)))?;
            w.u64(s.seq)?;
            w.u32(s.data_len)?;
            w.u32(s.items)?;
            w.u32(s.max_exptime)?;
        }
        // One list, oldest first (the classes' FIFOs merged by sequence).
        let mut sealed: Vec<u32> = st.sealed.iter().flatten().copied().collect();
        sealed.sort_by_key(|&i| st.slots[i as usize].seq);
        w.list(sealed.into_iter())
    }

    /// Per slot, whether it holds a sealed segment (after
    /// [`load`](Self::load): the ones restored).
    pub fn sealed_slots(&self) -> Vec<bool> {
        let st = self.state.lock();
        st.slots
            .iter()
            .map(|s| matches!(s.state, SlotState::Sealed))
            .collect()
    }

    /// Loads the segment table; a sealed segment whose header on the device
    /// does not match is dropped (its index entries become misses). Returns
    /// the number of segments restored.
    pub fn load<R: std::io::Read>(
        &self,
        r: &mut crate::persist::SnapReader<R>,
    ) -> std::io::Result<usize> {
        use crate::persist::invalid;
        let mut st = self.state.lock();
        st.next_seq = r.u64()?.max(st.next_seq);
        self.max_seq.store(st.next_seq - 1, Ordering::Release);
        let n = r.u32()? as usize;
        if n != st.slots.len() {
            return Err(invalid("flash segment count differs from the devices"));
        }
        let mut sealed_flags = vec![false; n];
        for (i, s) in st.slots.iter_mut().enumerate() {
            sealed_flags[i] = r.u8()? == 1;
            s.seq = r.u64()?;
            s.data_len = r.u32()?;
            s.items = r.u32()?;
            s.max_exptime = r.u32()?;
            s.copies = true;
            s.state = SlotState::Free;
        }
        let order = r.list(n)?;
        let mut block = AlignedBuf::new(BLOCK);
        let mut restored = 0;
        let mut headers = Vec::new();
        for &i in &order {
            let i = i as usize;
            if i >= n || !sealed_flags[i] {
                return Err(invalid("sealed list names a free segment"));
            }
            let s = &st.slots[i];
            let ok = self.devices[s.dev]
                .read_at(block.as_mut_slice(), s.dev_off)
                .ok()
                .filter(|&got| got == BLOCK)
                .and_then(|_| SegmentHeader::read(block.as_slice()))
                .filter(|h| h.seq == s.seq && h.slot == i as u32);
            if let Some(h) = ok {
                headers.push((i as u32, h));
                st.slots[i].state = SlotState::Sealed;
                let c = st.slots[i].class;
                st.sealed[c].push_back(i as u32);
                restored += 1;
            } else {
                tracing::warn!(
                    slot = i,
                    "flash segment on the device does not match the snapshot; its items are dropped"
                );
            }
        }
        st.rebuild_free();
        let moved_class = self.class_changes(&st, &headers);
        drop(st);
        self.settle_classes(moved_class);
        Ok(restored)
    }
}
