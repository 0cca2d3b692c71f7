//! Start and stop: the shutdown snapshot written and read back (a graceful
//! restart), and the index rebuilt from the devices after a crash or when
//! the snapshot does not match the configuration.

use super::*;

impl Engine {
    /// Reads the snapshot a graceful shutdown left, then deletes it.
    pub(super) fn restore_if_any(&self) -> Result<(), ConfigError> {
        let Some(fc) = &self.config.flash else {
            return Ok(());
        };
        let Some(path) = fc.snapshot.as_ref().filter(|p| p.exists()) else {
            self.recover_after_crash();
            return Ok(());
        };
        let refuse = |error: SnapshotError| ConfigError::Snapshot {
            path: path.clone(),
            error,
        };
        if fc.params.wipe {
            tracing::warn!(path = %path.display(), "ext_wipe: discarding the snapshot");
            let _ = std::fs::remove_file(path);
            return Ok(());
        }
        let started = std::time::Instant::now();
        // Another -m, -t or shard count, or another build's snapshot format,
        // is routine: the flash devices do not depend on it, so recover from
        // them as after a crash (RAM items are not kept).
        let other = match self.open_snapshot(path) {
            Err(SnapshotError::OtherConfiguration {
                setting,
                found,
                expected,
            }) => {
                let what = [
                    "RAM segment size",
                    "shard count",
                    "flash segment size",
                    "flash slots",
                    "memory limit (-m, now lower)",
                ]
                .get(setting)
                .copied()
                .unwrap_or("geometry");
                format!("another configuration ({what}: {found}, now {expected})")
            }
            Err(SnapshotError::OtherVersion { found, expected }) => {
                format!("another format version ({found}, this build reads {expected})")
            }
            r => {
                let r = r.map_err(refuse)?;
                return self.restore_from(path, r, started);
            }
        };
        tracing::warn!(
            path = %path.display(),
            "the shutdown snapshot was written with {other}; \
             recovering the flash items from the devices instead (RAM items are not kept)"
        );
        std::fs::remove_file(path).map_err(|e| refuse(SnapshotError::Remove(e)))?;
        self.recover_after_crash();
        Ok(())
    }

    /// Reads the rest of the snapshot at `path` that
    /// [`open_snapshot`](Self::open_snapshot) opened as `r`, then deletes it.
    fn restore_from(
        &self,
        path: &std::path::Path,
        r: SnapFile,
        started: std::time::Instant,
    ) -> Result<(), ConfigError> {
        let refuse = |error: SnapshotError| ConfigError::Snapshot {
            path: path.to_path_buf(),
            error,
        };
        if let Some(f) = &self.flash {
            // The snapshot's index is exact: the journal's facts are not needed.
            f.journal().take_recovered();
        }
        let (items, segments) = self.restore(r).map_err(refuse)?;
        if let Some(f) = &self.flash {
            f.after_restore();
        }
        // Before anything is served: a later crash must not restore this again.
        std::fs::remove_file(path).map_err(|e| refuse(SnapshotError::Remove(e)))?;
        let secs = started.elapsed().as_secs_f64();
        tracing::info!(
            items,
            flash_segments = segments,
            seconds = format!("{secs:.3}"),
            items_per_second = format!("{:.0}", items as f64 / secs.max(1e-9)),
            "restored the cache from the shutdown snapshot"
        );
        Ok(())
    }

    /// Without a snapshot: rebuilds the flash items' index entries from the
    /// devices (see FlashTier::recover for what is kept and dropped).
    fn recover_after_crash(&self) {
        let Some(f) = &self.flash else {
            return;
        };
        let started = std::time::Instant::now();
        let shards = &self.shards;
        let shared_tags = Mutex::new(Vec::new());
        let mut r = f.recover(|loc, _item, hash| {
            if shards.of(hash).lock().recover_flash(hash, loc) {
                shared_tags.lock().push(hash);
            }
            true
        });
        // A key may have left more than one record (see
        // Shard::recover_flash): keep only its newest.
        let mut shared_tags = shared_tags.into_inner();
        shared_tags.sort_unstable();
        shared_tags.dedup();
        for hash in shared_tags {
            let dropped = shards.of(hash).lock().dedupe_recovered(hash);
            r.items -= dropped;
            r.duplicates += dropped;
        }
        let secs = started.elapsed().as_secs_f64();
        if r.segments > 0 || r.untrusted_segments > 0 {
            tracing::info!(
                items = r.items,
                flash_segments = r.segments,
                dropped_by_tombstones = r.dead,
                older_copies_dropped = r.duplicates,
                untrusted_segments = r.untrusted_segments,
                bytes_read = r.bytes_read,
                seconds = format!("{secs:.3}"),
                mb_per_second = format!("{:.0}", r.bytes_read as f64 / 1e6 / secs.max(1e-9)),
                "recovered flash items after an unclean shutdown"
            );
        }
        *self.last_recovery.lock() = Some(r);
    }

    /// What the crash recovery at start found (None after a graceful restart
    /// or without flash).
    pub fn last_recovery(&self) -> Option<crate::flash::tier::Recovery> {
        *self.last_recovery.lock()
    }

    fn fingerprint(&self) -> [u64; 4] {
        let f = self.flash.as_ref();
        [
            self.shared.pool.seg_size() as u64,
            self.shards.list.len() as u64,
            f.map_or(0, |f| f.segment_size() as u64),
            f.map_or(0, |f| f.slot_count() as u64),
        ]
    }

    /// Opens a snapshot and checks its magic, version and configuration.
    fn open_snapshot(&self, path: &std::path::Path) -> Result<SnapFile, SnapshotError> {
        use crate::persist::{SnapReader, MAGIC, VERSION};
        let file = std::fs::File::open(path)?;
        let mut r = SnapReader::new(std::io::BufReader::with_capacity(1 << 20, file));
        let mut magic = [0u8; 8];
        r.bytes_into(&mut magic)?;
        if &magic != MAGIC {
            return Err(SnapshotError::NotASnapshot);
        }
        let v = r.u32()?;
        if v != VERSION {
            return Err(SnapshotError::OtherVersion {
                found: v,
                expected: VERSION,
            });
        }
        for (i, want) in self.fingerprint().into_iter().enumerate() {
            let got = r.u64()?;
            if got != want {
                return Err(SnapshotError::OtherConfiguration {
                    setting: i,
                    found: got,
                    expected: want,
                });
            }
        }
        // A lower -m: the snapshot's RAM may not fit, and the shard count
        // (64 for any large -m) need not change with it. Recovered from the
        // devices as for another configuration; a higher -m reads it.
        let limit = self.config.memory_limit as u64;
        let was = r.u64()?;
        if was > limit {
            return Err(SnapshotError::OtherConfiguration {
                setting: 4,
                found: was,
                expected: limit,
            });
        }
        Ok(r)
    }

    /// Loads the rest of a snapshot [`open_snapshot`](Self::open_snapshot)
    /// opened.
    fn restore(&self, mut r: SnapFile) -> Result<(u64, usize), SnapshotError> {
        self.shared.cas.store(r.u64()?, Ordering::Relaxed);
        let segments = match &self.flash {
            Some(f) => f.load(&mut r)?,
            None => 0,
        };
        let sealed = self.flash.as_ref().map(|f| f.sealed_slots());
        let (mut items, mut dropped) = (0, 0);
        for s in &self.shards.list {
            let mut g = s.lock();
            g.load(&mut r)?;
            if let Some(sealed) = &sealed {
                dropped += g.drop_unrestored_flash_entries(sealed);
            }
            items += g.stats.curr_items;
        }
        r.finish()?;
        if dropped > 0 {
            tracing::warn!(
                entries = dropped,
                "the snapshot indexed flash items in segments the devices no longer hold: their entries are dropped"
            );
        }
        Ok((items, segments))
    }

    /// Graceful shutdown: writes everything to flash and the snapshot (call
    /// once no request runs any more). Returns items saved and bytes written.
    pub fn persist(&self) -> std::io::Result<(u64, u64)> {
        use crate::persist::{SnapWriter, MAGIC, VERSION};
        if let Some(f) = self.flash.as_ref().filter(|f| f.journal().failed()) {
            if !f.record_journal_failure(true) {
                tracing::error!(
                    "the crash journal failed and neither the flash devices nor a mark file could record it: \
                     start the next run with -o ext_wipe, or it may serve values deleted or overwritten in this run"
                );
            }
        }
        // The small-object store's open segment: its objects survive the stop.
        for s in &self.shards.list {
            let mut g = s.lock();
            // Before the flash tier drains and is saved: finishing a
            // rebuild may evict flash entries (releases and tombstones).
            g.finish_index_resizes();
            g.write_small_buffer()?;
        }
        let Some(path) = self.config.flash.as_ref().and_then(|f| f.snapshot.clone()) else {
            return Ok((0, 0));
        };
        if let Some(f) = &self.flash {
            if !f.drain_and_stop(Duration::from_secs(60)) {
                return Err(std::io::Error::other(
                    "the flash flusher did not finish its writes in 60 s",
                ));
            }
        }
        let tmp = path.with_extension("snapshot-tmp");
        let file = std::fs::File::create(&tmp)?;
        let mut w = SnapWriter::new(std::io::BufWriter::with_capacity(1 << 20, file));
        w.bytes_of(MAGIC)?;
        w.u32(VERSION)?;
        for v in self.fingerprint() {
            w.u64(v)?;
        }
        w.u64(self.config.memory_limit as u64)?;
        w.u64(self.shared.cas.load(Ordering::Relaxed))?;
        if let Some(f) = &self.flash {
            f.save(&mut w)?;
        }
        let mut items = 0;
        let mut guards: Vec<_> = self.shards.list.iter().map(|s| s.lock()).collect();
        for g in &mut guards {
            // A flush's set-aside segments are not saved as items. (Index
            // rebuilds were finished before the tier was drained.)
            g.finish_flush();
            g.save(&mut w)?;
            items += g.stats.curr_items;
        }
        let bytes = w.bytes;
        let file = w.finish()?.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        std::fs::rename(&tmp, &path)?;
        Ok((items, bytes))
    }
}
