//! Flash devices: the [`BlockDevice`] trait every read and write goes
//! through, and [`FileDevice`], a regular file or a raw block device opened
//! with O_DIRECT. Opening checks everything that can be checked up front
//! (the path, free space, O_DIRECT support, that the device is ours or
//! empty) and says what to do when a check fails.

use super::aligned::{AlignedBuf, BLOCK};
use std::fs::{File, OpenOptions};
use std::io::{self, Seek, SeekFrom};
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
use std::os::unix::io::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A device the flash tier reads and writes. Offsets and lengths are
/// multiples of 4 KiB and buffers are 4 KiB aligned.
pub trait BlockDevice: Send + Sync {
    /// Path or description, for logs and errors.
    fn name(&self) -> &str;
    /// Usable bytes.
    fn size(&self) -> u64;
    /// Reads up to `buf.len()` bytes at `off`; returns how many were read.
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<usize>;
    /// Writes all of `buf` at `off`.
    fn write_at(&self, buf: &[u8], off: u64) -> io::Result<()>;
    /// Makes completed writes durable (through the device's volatile cache).
    fn sync(&self) -> io::Result<()> {
        Ok(())
    }
    /// Writes `buf` at `off` and returns once that write (at least) is
    /// durable. Devices that can make one write durable without flushing
    /// everything else (O_DSYNC, a FUA write) do so.
    fn write_durable(&self, buf: &[u8], off: u64) -> io::Result<()> {
        self.write_at(buf, off)?;
        self.sync()
    }
    /// The file descriptor, when reads may go straight to the kernel
    /// (io_uring). Devices that must see every read (fault injection) say None.
    fn raw_fd(&self) -> Option<RawFd> {
        None
    }
}

/// Why a device could not be opened, checked or formatted. `name` is the
/// device's path as given.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    #[error(
        "flash file {name}: directory {} does not exist; create it or choose another ext_path",
        .dir.display()
    )]
    NoDirectory { name: String, dir: PathBuf },
    #[error("flash file {name}: no size given; write ext_path={name}:SIZE, for example :4G")]
    NoSize { name: String },
    #[error("flash device {name}: cannot open: {error}; check the path")]
    NotFound { name: String, error: io::Error },
    #[error(
        "flash device {name}: cannot open: not writable ({error}); check permissions or run as a user who may write it"
    )]
    NotWritable { name: String, error: io::Error },
    /// The file system refused to open it with O_DIRECT.
    #[error(
        "flash device {name}: cannot open: the file system does not support O_DIRECT (tmpfs and some overlay file systems do not); put the flash file on ext4, xfs or a block device"
    )]
    NoDirectIo { name: String },
    /// It opened, but a direct read of its first block failed.
    #[error(
        "flash device {name}: a direct (O_DIRECT) read failed: {error}; the file system may not support direct I/O"
    )]
    DirectReadFailed { name: String, error: io::Error },
    /// Another process holds its lock (or the lock could not be taken).
    #[error(
        "flash device {name} is in use by another process (another tiercache?): {error}; give each server its own ext_path"
    )]
    InUse {
        name: String,
        error: rustix::io::Errno,
    },
    #[error(
        "flash file {name} was removed or replaced while it was being opened (another server starting on the same path?); start again"
    )]
    Replaced { name: String },
    /// The configured size is larger than the block device.
    #[error("flash device {name} holds {device_bytes} bytes, fewer than the {size} configured")]
    TooLarge {
        name: String,
        size: u64,
        device_bytes: u64,
    },
    #[error("flash device {name} ({size} bytes) is too small for one {segment_kib} KiB segment")]
    TooSmall {
        name: String,
        size: u64,
        segment_kib: usize,
    },
    /// The file system has too little free space for the flash file.
    #[error(
        "flash file {name}: not enough space for {} MiB (the file system has {} MiB free); choose a smaller size or another disk",
        .size >> 20,
        .free >> 20
    )]
    NoSpace { name: String, size: u64, free: u64 },
    #[error("flash file {name}: cannot reserve {size} bytes: {error}")]
    Reserve {
        name: String,
        size: u64,
        error: rustix::io::Errno,
    },
    #[error("flash file {name}: cannot grow to {size} bytes: {error}")]
    Grow {
        name: String,
        size: u64,
        error: io::Error,
    },
    #[error("flash file {name}: {error}")]
    Metadata { name: String, error: io::Error },
    /// It holds another version of the tiercache format.
    #[error(
        "flash device {name} holds tiercache format version {found}, this build reads version {expected}; start with -o ext_wipe to erase it"
    )]
    OtherVersion {
        name: String,
        found: u32,
        expected: u32,
    },
    /// It holds data that is not a tiercache flash file.
    #[error(
        "flash device {name} holds data that is not a tiercache flash file; refusing to overwrite it (start with -o ext_wipe to erase it, or choose another path)"
    )]
    Foreign { name: String },
    /// An operation on it failed: `action` is what (open, read, write,
    /// size it, read the journal).
    #[error("flash device {name}: cannot {action}: {error}")]
    Io {
        name: String,
        action: &'static str,
        error: io::Error,
    },
    #[cfg(test)]
    #[error("flash device {name}: refused by the test")]
    RefusedByTest { name: String },
}

impl DeviceError {
    /// [`DeviceError::Io`] for the device called `name`.
    pub fn io(name: &str, action: &'static str, error: io::Error) -> DeviceError {
        DeviceError::Io {
            name: name.to_string(),
            action,
            error,
        }
    }
}

/// A file or block device opened with O_DIRECT.
pub struct FileDevice {
    file: File,
    /// The same file opened with O_DSYNC too: the journal's small writes
    /// become durable alone (a FUA write where the device has it) rather
    /// than waiting for a flush of every segment write in the device cache.
    dsync: File,
    size: u64,
    name: String,
    path: PathBuf,
    was: Was,
}

impl FileDevice {
    /// Opens (creating a regular file if needed) `path` with `size` usable
    /// bytes; `size` 0 on a block device means the whole device.
    pub fn open(path: &Path, size: u64) -> Result<FileDevice, DeviceError> {
        Self::open_waiting(path, size, LOCK_WAIT)
    }

    /// [`open`](Self::open), waiting up to `lock_wait` for another process's
    /// lock on the device to go.
    pub fn open_waiting(
        path: &Path,
        size: u64,
        lock_wait: Duration,
    ) -> Result<FileDevice, DeviceError> {
        let name = path.display().to_string();
        let is_block = std::fs::metadata(path)
            .map(|m| m.file_type().is_block_device())
            .unwrap_or(false);
        if !is_block {
            let parent = match path.parent() {
                Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
                _ => PathBuf::from("."),
            };
            if !parent.is_dir() {
                return Err(DeviceError::NoDirectory { name, dir: parent });
            }
            if size == 0 {
                return Err(DeviceError::NoSize { name });
            }
        }
        let open = |create: bool, new: bool| {
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(create)
                .create_new(new)
                .custom_flags(libc::O_DIRECT)
                .open(path)
        };
        // A file this call creates is removed again if it is refused, so
        // that a failed start leaves nothing behind; one that was there
        // before (or a symlink, which O_EXCL never follows: its target is
        // opened, created if missing) is the operator's and is never removed.
        let (file, created) = match open(!is_block, !is_block) {
            Ok(f) => (f, !is_block),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                (open(true, false).map_err(|e| open_error(&name, e))?, false)
            }
            Err(e) => {
                // O_CREAT | O_EXCL created the file before the file system
                // refused O_DIRECT (EINVAL): it is this call's to remove (no
                // server can be using a file it cannot open).
                if !is_block && e.raw_os_error() == Some(libc::EINVAL) {
                    let _ = std::fs::remove_file(path);
                }
                return Err(open_error(&name, e));
            }
        };
        // A refused lock removes nothing: the file is another server's.
        lock_waiting(&file, &name, lock_wait)?;
        if !is_block && !names_file(path, &file) {
            return Err(DeviceError::Replaced { name });
        }
        let was = match (is_block, created) {
            (true, _) => Was::Device,
            (false, true) => Was::Absent,
            (false, false) => Was::File(file.metadata().map(|m| m.len()).unwrap_or(u64::MAX)),
        };
        match FileDevice::set_up(&file, path, &name, size, is_block) {
            Ok((size, dsync)) => Ok(FileDevice {
                file,
                dsync,
                size,
                name,
                path: path.to_path_buf(),
                was,
            }),
            Err(e) => {
                // Still locked by `file`: no other server has it.
                Undo {
                    path: path.to_path_buf(),
                    file,
                    was,
                }
                .run();
                Err(e)
            }
        }
    }

    /// What undoes this open if the start it is part of fails: it holds
    /// the device's lock until it is run or dropped.
    pub fn undo(&self) -> io::Result<Undo> {
        Ok(Undo {
            path: self.path.clone(),
            file: self.file.try_clone()?,
            was: self.was,
        })
    }

    /// Sizes and probes a freshly opened and locked device; returns its
    /// usable size and its O_DSYNC descriptor.
    fn set_up(
        file: &File,
        path: &Path,
        name: &str,
        size: u64,
        is_block: bool,
    ) -> Result<(u64, File), DeviceError> {
        let size = if is_block {
            let mut f = file;
            let dev = f
                .seek(SeekFrom::End(0))
                .map_err(|e| DeviceError::io(name, "size it", e))?;
            if size > dev {
                return Err(DeviceError::TooLarge {
                    name: name.to_string(),
                    size,
                    device_bytes: dev,
                });
            }
            if size == 0 {
                dev
            } else {
                size
            }
        } else {
            reserve_file(file, name, size)?;
            size
        };
        let size = size / BLOCK as u64 * BLOCK as u64;
        let dsync = OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_DIRECT | libc::O_DSYNC)
            .open(path)
            .map_err(|e| open_error(name, e))?;
        probe(file, name)?;
        #[cfg(test)]
        if tests::REFUSE.with(|r| r.get()) {
            return Err(DeviceError::RefusedByTest {
                name: name.to_string(),
            });
        }
        Ok((size, dsync))
    }
}

/// One aligned read of the first block proves that O_DIRECT I/O works.
fn probe(file: &File, name: &str) -> Result<(), DeviceError> {
    let mut b = AlignedBuf::new(BLOCK);
    pread(file, b.as_mut_slice(), 0).map_err(|error| DeviceError::DirectReadFailed {
        name: name.to_string(),
        error,
    })?;
    Ok(())
}

/// `read_at`, retried when a signal interrupts it.
fn pread(file: &File, buf: &mut [u8], off: u64) -> io::Result<usize> {
    loop {
        match file.read_at(buf, off) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => return r,
        }
    }
}

/// What was at a device's path before [`FileDevice::open`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Was {
    /// A block device: nothing to undo.
    Device,
    /// Nothing: the open created the file.
    Absent,
    /// A file of this many bytes (the open may have grown it).
    File(u64),
}

/// Undoes what [`FileDevice::open`] did to a path when the start fails: a
/// file it created is removed, one that was there is given back the length
/// it had. Holds the device's lock (a descriptor of its open file) so that
/// no other server can be using the file meanwhile.
pub struct Undo {
    path: PathBuf,
    file: File,
    was: Was,
}

impl Undo {
    pub fn run(self) {
        if !names_file(&self.path, &self.file) {
            return;
        }
        match self.was {
            Was::Device => {}
            Was::Absent => {
                let _ = std::fs::remove_file(&self.path);
            }
            Was::File(len) => {
                if self.file.metadata().is_ok_and(|m| m.len() > len) {
                    let _ = self.file.set_len(len);
                }
            }
        }
    }
}

/// Whether `path` names the open `file` (the same inode on the same device).
fn names_file(path: &Path, file: &File) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(path), file.metadata()) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// How long a start waits for another process's lock on a flash device.
/// A server killed with SIGKILL keeps its lock until the kernel has torn
/// down its io_uring ring and closed its files, which can take a moment
/// after the process is gone: a restart right away waits for that instead
/// of being refused.
pub const LOCK_WAIT: Duration = Duration::from_secs(10);

/// Takes the exclusive lock on an opened device, retrying for `wait`.
fn lock_waiting(file: &File, name: &str, wait: Duration) -> Result<(), DeviceError> {
    let deadline = Instant::now() + wait;
    let mut logged = false;
    loop {
        match rustix::fs::flock(file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {
                if logged {
                    tracing::info!(device = name, "got the flash device's lock");
                }
                return Ok(());
            }
            Err(e) if e == rustix::io::Errno::WOULDBLOCK && Instant::now() < deadline => {
                if !logged {
                    logged = true;
                    tracing::warn!(
                        device = name,
                        seconds = wait.as_secs_f64(),
                        "flash device locked by another process (a server that is still exiting?); waiting"
                    );
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(error) => {
                return Err(DeviceError::InUse {
                    name: name.to_string(),
                    error,
                })
            }
        }
    }
}

fn open_error(name: &str, error: io::Error) -> DeviceError {
    let name = name.to_string();
    match error.raw_os_error() {
        Some(libc::EINVAL) => DeviceError::NoDirectIo { name },
        Some(libc::EACCES) | Some(libc::EPERM) | Some(libc::EROFS) => {
            DeviceError::NotWritable { name, error }
        }
        Some(libc::ENOENT) => DeviceError::NotFound { name, error },
        _ => DeviceError::Io {
            name,
            action: "open",
            error,
        },
    }
}

/// Makes sure a regular file really has `size` bytes of space behind it.
fn reserve_file(file: &File, name: &str, size: u64) -> Result<(), DeviceError> {
    let have = file
        .metadata()
        .map_err(|error| DeviceError::Metadata {
            name: name.to_string(),
            error,
        })?
        .len();
    if have >= size {
        return Ok(());
    }
    let r = rustix::fs::fallocate(file, rustix::fs::FallocateFlags::empty(), 0, size);
    if matches!(&r, Err(e) if *e != rustix::io::Errno::OPNOTSUPP) {
        // A failed fallocate may keep what it allocated before it failed
        // (ext4 does): give it back, or the refused flash file would hold
        // the rest of the disk.
        let _ = file.set_len(have);
    }
    match r {
        Ok(()) => Ok(()),
        Err(rustix::io::Errno::NOSPC) => {
            let free = rustix::fs::fstatvfs(file)
                .map(|s| s.f_bavail * s.f_frsize)
                .unwrap_or(0);
            Err(DeviceError::NoSpace {
                name: name.to_string(),
                size,
                free: free + have,
            })
        }
        Err(rustix::io::Errno::OPNOTSUPP) => {
            file.set_len(size).map_err(|error| DeviceError::Grow {
                name: name.to_string(),
                size,
                error,
            })
        }
        Err(error) => Err(DeviceError::Reserve {
            name: name.to_string(),
            size,
            error,
        }),
    }
}

impl BlockDevice for FileDevice {
    fn name(&self) -> &str {
        &self.name
    }

    fn size(&self) -> u64 {
        self.size
    }

    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<usize> {
        pread(&self.file, buf, off)
    }

    fn write_at(&self, buf: &[u8], off: u64) -> io::Result<()> {
        self.file.write_all_at(buf, off)?;
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn write_durable(&self, buf: &[u8], off: u64) -> io::Result<()> {
        self.dsync.write_all_at(buf, off)
    }

    fn raw_fd(&self) -> Option<RawFd> {
        Some(self.file.as_raw_fd())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// A fresh directory for a test and the flash file path in it.
    fn scratch(tag: &str) -> (PathBuf, PathBuf) {
        let dir = std::env::temp_dir().join(format!("{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("flash");
        (dir, path)
    }

    /// Whether the file system refused direct I/O (tmpfs).
    fn no_direct_io(e: &DeviceError) -> bool {
        matches!(
            e,
            DeviceError::NoDirectIo { .. } | DeviceError::DirectReadFailed { .. }
        )
    }

    thread_local! {
        /// Makes `FileDevice::set_up` refuse the device once it is opened,
        /// sized and probed (a test's own thread only).
        pub(super) static REFUSE: Cell<bool> = const { Cell::new(false) };
    }

    #[test]
    fn open_write_read_and_errors() {
        let (dir, path) = scratch("tc-dev");
        match FileDevice::open(&path, 1 << 20) {
            Ok(dev) => {
                assert_eq!(dev.size(), 1 << 20);
                let mut w = AlignedBuf::new(BLOCK);
                w.as_mut_slice().fill(0xAB);
                dev.write_at(w.as_slice(), 8192).unwrap();
                let mut r = AlignedBuf::new(BLOCK);
                assert_eq!(dev.read_at(r.as_mut_slice(), 8192).unwrap(), BLOCK);
                assert_eq!(r.as_slice(), w.as_slice());
            }
            // tmpfs: the error must say why.
            Err(e) => {
                assert!(no_direct_io(&e), "{e}");
                assert!(e.to_string().contains("O_DIRECT"), "{e}");
            }
        }
        let e = FileDevice::open(&dir.join("missing/dir/flash"), 1 << 20)
            .err()
            .expect("missing directory");
        assert!(matches!(e, DeviceError::NoDirectory { .. }), "{e}");
        assert!(e.to_string().contains("does not exist"), "{e}");
        let e = FileDevice::open(&path, 0).err().expect("no size");
        assert!(matches!(e, DeviceError::NoSize { .. }), "{e}");
        assert!(e.to_string().contains("no size"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_refused_new_file_is_removed_and_an_existing_one_kept() {
        let (dir, path) = scratch("tc-dev-refused");
        REFUSE.with(|r| r.set(true));
        let e = FileDevice::open(&path, 1 << 20).err().expect("refused");
        assert!(matches!(e, DeviceError::RefusedByTest { .. }), "{e}");
        assert!(e.to_string().contains("flash"), "{e}");
        assert!(!path.exists(), "a refused new flash file stays behind");
        // A file that was there before is the operator's: kept as it was,
        // at its length (the open had grown it to 1 MiB).
        std::fs::write(&path, vec![7u8; 3 * BLOCK]).unwrap();
        assert!(FileDevice::open(&path, 1 << 20).is_err());
        REFUSE.with(|r| r.set(false));
        let kept = std::fs::read(&path).unwrap();
        assert!(kept == vec![7u8; 3 * BLOCK], "{} bytes", kept.len());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_lock_that_goes_while_the_start_waits_is_taken() {
        let (dir, path) = scratch("tc-dev-lock-wait");
        let first = match FileDevice::open(&path, 1 << 20) {
            Ok(d) => d,
            Err(e) if no_direct_io(&e) => return,
            Err(e) => panic!("{e}"),
        };
        // The previous holder exits 400 ms into the wait (as a killed
        // server's files close only once the kernel has torn it down).
        let holder = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(400));
            drop(first);
        });
        let t = Instant::now();
        let second = FileDevice::open_waiting(&path, 1 << 20, Duration::from_secs(10))
            .expect("the lock is taken once it goes");
        assert!(t.elapsed() >= Duration::from_millis(300));
        holder.join().unwrap();
        drop(second);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_file_in_use_is_refused_and_never_removed() {
        let (dir, path) = scratch("tc-dev-in-use");
        let first = match FileDevice::open(&path, 1 << 20) {
            Ok(d) => d,
            // tmpfs without O_DIRECT: nothing to lock here.
            Err(e) if no_direct_io(&e) => return,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(first.was, Was::Absent);
        let t = Instant::now();
        let e = FileDevice::open_waiting(&path, 1 << 20, Duration::from_millis(300))
            .err()
            .expect("in use");
        assert!(matches!(e, DeviceError::InUse { .. }), "{e}");
        assert!(e.to_string().contains("in use"), "{e}");
        assert!(t.elapsed() >= Duration::from_millis(300), "did not wait");
        assert!(
            path.exists(),
            "a refused lock removed the other server's file"
        );
        let mut w = AlignedBuf::new(BLOCK);
        w.as_mut_slice().fill(3);
        first.write_at(w.as_slice(), 0).unwrap();
        drop(first);
        // Free again, and not created this time.
        let again = FileDevice::open(&path, 1 << 20).unwrap();
        assert_eq!(again.was, Was::File(1 << 20));
        let mut r = AlignedBuf::new(BLOCK);
        again.read_at(r.as_mut_slice(), 0).unwrap();
        assert_eq!(r.as_slice(), w.as_slice());
        drop(again);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
