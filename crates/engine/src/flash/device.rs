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

/// Why a device could not be opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceError(pub String);

impl std::fmt::Display for DeviceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DeviceError {}

/// A file or block device opened with O_DIRECT.
pub struct FileDevice {
    file: File,
    /// The same file opened with O_DSYNC too: the journal's small writes
    /// become durable alone (a FUA write where the device has it) rather
    /// than waiting for a flush of every segment write in the device cache.
    dsync: File,
    size: u64,
    name: String,
}

impl FileDevice {
    /// Opens (creating a regular file if needed) `path` with `size` usable
    /// bytes; `size` 0 on a block device means the whole device.
    pub fn open(path: &Path, size: u64) -> Result<FileDevice, DeviceError> {
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
                return Err(DeviceError(format!(
                    "flash file {name}: directory {} does not exist; create it or choose another ext_path",
                    parent.display()
                )));
            }
            if size == 0 {
                return Err(DeviceError(format!(
                    "flash file {name}: no size given; write ext_path={name}:SIZE, for example :4G"
                )));
            }
        }
        let open = |create_new: bool| {
            OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(create_new)
                .custom_flags(libc::O_DIRECT)
                .open(path)
        };
        // A file this call creates is removed again if it is refused, so
        // that a failed start leaves nothing behind.
        let (file, created) = match open(!is_block) {
            Ok(f) => (f, !is_block),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                (open(false).map_err(|e| open_error(&name, e))?, false)
            }
            Err(e) => {
                // O_CREAT | O_EXCL created the file before the file system
                // refused O_DIRECT (EINVAL): it is this call's to remove.
                if !is_block && e.raw_os_error() == Some(libc::EINVAL) {
                    let _ = std::fs::remove_file(path);
                }
                return Err(open_error(&name, e));
            }
        };
        let dev = FileDevice::set_up(file, path, name, size, is_block);
        if dev.is_err() && created {
            let _ = std::fs::remove_file(path);
        }
        dev
    }

    /// Locks, sizes and probes a freshly opened device.
    fn set_up(
        file: File,
        path: &Path,
        name: String,
        size: u64,
        is_block: bool,
    ) -> Result<FileDevice, DeviceError> {
        rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive).map_err(
            |e| {
                DeviceError(format!(
                    "flash device {name} is in use by another process (another tiercache?): {e}; give each server its own ext_path"
                ))
            },
        )?;
        let size = if is_block {
            let mut f = &file;
            let dev = f
                .seek(SeekFrom::End(0))
                .map_err(|e| DeviceError(format!("flash device {name}: cannot size it: {e}")))?;
            if size > dev {
                return Err(DeviceError(format!(
                    "flash device {name} holds {} bytes, fewer than the {size} configured",
                    dev
                )));
            }
            if size == 0 {
                dev
            } else {
                size
            }
        } else {
            reserve_file(&file, &name, size)?;
            size
        };
        let size = size / BLOCK as u64 * BLOCK as u64;
        let dsync = OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_DIRECT | libc::O_DSYNC)
            .open(path)
            .map_err(|e| open_error(&name, e))?;
        let dev = FileDevice {
            file,
            dsync,
            size,
            name,
        };
        dev.probe()?;
        Ok(dev)
    }

    /// One aligned read of the first block proves that O_DIRECT I/O works.
    fn probe(&self) -> Result<(), DeviceError> {
        let mut b = AlignedBuf::new(BLOCK);
        self.read_at(b.as_mut_slice(), 0).map_err(|e| {
            DeviceError(format!(
                "flash device {}: a direct (O_DIRECT) read failed: {e}; the file system may not support direct I/O",
                self.name
            ))
        })?;
        Ok(())
    }
}

fn open_error(name: &str, e: io::Error) -> DeviceError {
    let what = match e.raw_os_error() {
        Some(libc::EINVAL) => "the file system does not support O_DIRECT (tmpfs and some overlay file systems do not); put the flash file on ext4, xfs or a block device".to_string(),
        Some(libc::EACCES) | Some(libc::EPERM) | Some(libc::EROFS) => {
            format!("not writable ({e}); check permissions or run as a user who may write it")
        }
        Some(libc::ENOENT) => format!("{e}; check the path"),
        _ => e.to_string(),
    };
    DeviceError(format!("flash device {name}: cannot open: {what}"))
}

/// Makes sure a regular file really has `size` bytes of space behind it.
fn reserve_file(file: &File, name: &str, size: u64) -> Result<(), DeviceError> {
    let have = file
        .metadata()
        .map_err(|e| DeviceError(format!("flash file {name}: {e}")))?
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
            Err(DeviceError(format!(
                "flash file {name}: not enough space for {} MiB (the file system has {} MiB free); choose a smaller size or another disk",
                size >> 20,
                (free + have) >> 20
            )))
        }
        Err(rustix::io::Errno::OPNOTSUPP) => file.set_len(size).map_err(|e| {
            DeviceError(format!(
                "flash file {name}: cannot grow to {size} bytes: {e}"
            ))
        }),
        Err(e) => Err(DeviceError(format!(
            "flash file {name}: cannot reserve {size} bytes: {e}"
        ))),
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
        loop {
            match self.file.read_at(buf, off) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                r => return r,
            }
        }
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

    #[test]
    fn open_write_read_and_errors() {
        let dir = std::env::temp_dir().join(format!("tc-dev-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("flash");
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
            Err(e) => assert!(e.0.contains("O_DIRECT"), "{e}"),
        }
        let e = FileDevice::open(&dir.join("missing/dir/flash"), 1 << 20)
            .err()
            .expect("missing directory");
        assert!(e.0.contains("does not exist"), "{e}");
        let e = FileDevice::open(&path, 0).err().expect("no size");
        assert!(e.0.contains("no size"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_refused_new_file_is_removed_and_an_existing_one_kept() {
        let dir = std::env::temp_dir().join(format!("tc-dev-refused-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("flash");
        // Larger than any file system allows a file to be: fallocate fails
        // at once (EFBIG on ext4), or the open itself does (no O_DIRECT).
        let huge = (i64::MAX as u64) & !(BLOCK as u64 - 1);
        let e = FileDevice::open(&path, huge).err().expect("too large");
        assert!(e.0.contains("flash"), "{e}");
        assert!(!path.exists(), "a refused new flash file stays behind");
        // A file that was there before is the operator's: kept as it was.
        std::fs::write(&path, vec![7u8; 3 * BLOCK]).unwrap();
        assert!(FileDevice::open(&path, huge).is_err());
        assert_eq!(std::fs::read(&path).unwrap(), vec![7u8; 3 * BLOCK]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
