//! When the crash journal fails: recording that the devices can no longer
//! be trusted after a crash, so that the next start does not recover from
//! them.
//!
//! Once the journal cannot be written, changes to keys that have records on
//! flash go ahead without a durable tombstone (the server keeps serving from
//! RAM). Their old records stay on the devices, so a later start must not
//! rebuild the index from them. That fact is recorded in two places, each
//! retried until it is written:
//! - every device's superblock (`journal_off`, as a run with
//!   `ext_crash_safe=0` leaves it): recovery then trusts nothing written
//!   before the next floor;
//! - mark files outside the device (next to the snapshot, and in the
//!   server's working directory), for a device that refuses every write
//!   until the process ends (a file system shut down under it). A start
//!   that finds one distrusts the devices the same way, then removes it.

use super::format::Superblock;
use crate::device::block::BlockDevice;
use parking_lot::Mutex;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often a failed mark is tried again.
const RETRY: Duration = Duration::from_millis(500);

#[derive(Default)]
struct Marks {
    /// Files to write when the journal fails (and to look for at start).
    files: Vec<PathBuf>,
    superblocks_written: bool,
    file_written: bool,
    last_try: Option<Instant>,
}

/// The journal-failure record of one flash tier.
#[derive(Default)]
pub struct Distrust {
    /// The previous run left a mark: recover nothing it wrote.
    previous_run: AtomicBool,
    marks: Mutex<Marks>,
}

impl Distrust {
    /// Where the mark files go (set by the engine from its configuration).
    pub fn set_files(&self, files: Vec<PathBuf>) {
        self.marks.lock().files = files;
    }

    /// Whether the previous run left a mark (see [`Self::found_marks`]).
    pub fn previous_run(&self) -> bool {
        self.previous_run.load(Ordering::Relaxed)
    }

    /// Looks for mark files a previous run left; true if any (the devices'
    /// contents must then not be recovered from).
    pub fn found_marks(&self) -> bool {
        let m = self.marks.lock();
        let found: Vec<&PathBuf> = m.files.iter().filter(|p| p.exists()).collect();
        if found.is_empty() {
            return false;
        }
        tracing::error!(
            marks = ?found,
            "an earlier run lost its crash journal (the flash device failed); nothing on the flash devices is trusted"
        );
        self.previous_run.store(true, Ordering::Relaxed);
        true
    }

    /// Removes the mark files once the distrust is durable on the devices.
    pub fn clear_files(&self) {
        for p in &self.marks.lock().files {
            match std::fs::remove_file(p) {
                Ok(()) => tracing::info!(path = %p.display(), "removed the journal-failure mark"),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    tracing::warn!(path = %p.display(), error = %e, "cannot remove the journal-failure mark")
                }
            }
        }
    }

    /// Whether every record is written (the superblocks, and a mark file
    /// if any is configured): nothing is left to retry.
    pub fn recorded_everywhere(&self) -> bool {
        let m = self.marks.lock();
        m.superblocks_written && (m.file_written || m.files.is_empty())
    }

    /// Whether the failure is recorded somewhere a later start looks.
    pub fn recorded(&self) -> bool {
        let m = self.marks.lock();
        m.superblocks_written || m.file_written
    }

    /// Records the journal's failure (at most every [`RETRY`] unless
    /// `now`): marks the superblocks and writes the mark files, each until
    /// it succeeds. Returns whether the superblocks are marked.
    pub fn record(
        &self,
        devices: &[Arc<dyn BlockDevice>],
        superblocks: &Mutex<Vec<Superblock>>,
        write: impl Fn(&dyn BlockDevice, &Superblock) -> Result<(), String>,
        now: bool,
    ) -> bool {
        let mut m = self.marks.lock();
        if m.superblocks_written && (m.file_written || m.files.is_empty()) {
            return true;
        }
        if !now && m.last_try.is_some_and(|t| t.elapsed() < RETRY) {
            return m.superblocks_written;
        }
        m.last_try = Some(Instant::now());
        if !m.superblocks_written {
            let mut sbs = superblocks.lock();
            let mut ok = true;
            for (d, sb) in devices.iter().zip(sbs.iter_mut()) {
                sb.journal_off = true;
                if let Err(e) = write(d.as_ref(), sb) {
                    ok = false;
                    tracing::debug!(device = d.name(), error = %e, "cannot mark the superblock yet");
                }
            }
            if ok {
                m.superblocks_written = true;
                tracing::warn!(
                    "the flash devices are marked: after a crash, nothing on them will be recovered"
                );
            }
        }
        if !m.file_written {
            for p in m.files.clone() {
                match write_mark(&p, devices) {
                    Ok(()) => {
                        m.file_written = true;
                        tracing::warn!(path = %p.display(), "wrote the journal-failure mark");
                    }
                    Err(e) => {
                        tracing::debug!(path = %p.display(), error = %e, "cannot write the journal-failure mark yet")
                    }
                }
            }
        }
        m.superblocks_written
    }
}

/// Writes a mark file durably (the file, then its directory).
fn write_mark(p: &Path, devices: &[Arc<dyn BlockDevice>]) -> std::io::Result<()> {
    use std::io::Write;
    let names: Vec<&str> = devices.iter().map(|d| d.name()).collect();
    let mut f = std::fs::File::create(p)?;
    writeln!(
        f,
        "tiercache: the crash journal of flash devices {names:?} failed; their contents are not \
         trusted at the next start. Remove this file only together with the devices' contents."
    )?;
    f.sync_all()?;
    if let Some(dir) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

/// The default mark files for a tier whose first device is `first`: next to
/// it (`<path>.untrusted`, beside the snapshot) and in the working
/// directory, named after the device's absolute path, for when the
/// device's own file system refuses every write.
pub fn default_files(first: &Path) -> Vec<PathBuf> {
    let mut beside = first.as_os_str().to_owned();
    beside.push(".untrusted");
    let mut files = vec![PathBuf::from(beside)];
    let abs = std::path::absolute(first).unwrap_or_else(|_| first.to_path_buf());
    let name = abs
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tag = xxhash_rust::xxh3::xxh3_64(abs.as_os_str().as_encoded_bytes());
    if let Ok(cwd) = std::env::current_dir() {
        let here = cwd.join(format!(".tiercache-{name}-{tag:016x}.untrusted"));
        if !files.contains(&here) {
            files.push(here);
        }
    }
    files
}
