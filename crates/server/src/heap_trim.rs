//! Giving freed heap back to the OS. glibc's malloc keeps one arena per
//! thread that allocated, and returns an arena's free pages only from its
//! top. Items that leave RAM for flash are built on the maintenance and
//! flusher threads and freed on the workers (and the other way round), so
//! the arenas fill with free chunks between live ones: with the small-object
//! store, about 28 MiB of RSS after 2 M sets into `-m 64` (bench/RESULTS.md,
//! "Heap given back"). `malloc_trim(0)` releases the free pages of every
//! arena (madvise), which is what this does every [`INTERVAL`].

use std::time::{Duration, Instant};

/// How often the maintenance thread trims. A trim holds each arena's lock
/// while it gives that arena's free pages back: 12.5 ms a trim on average
/// while 2 M small items streamed through `-m 64` into the small-object
/// store (`malloc_trim_us` / `malloc_trims`), under 1 ms on an idle heap.
/// Pages given back that are used again cost a page fault each, so not much
/// more often than this.
pub const INTERVAL: Duration = Duration::from_secs(5);

/// When the heap was last trimmed.
#[derive(Debug)]
pub struct HeapTrim {
    last: Instant,
}

impl Default for HeapTrim {
    fn default() -> Self {
        HeapTrim {
            last: Instant::now(),
        }
    }
}

impl HeapTrim {
    /// Trims when [`INTERVAL`] has passed since the last trim; returns the
    /// microseconds the trim took, or None when it was not time.
    pub fn maybe(&mut self, now: Instant) -> Option<u64> {
        if now.duration_since(self.last) < INTERVAL {
            return None;
        }
        self.last = now;
        let began = Instant::now();
        trim();
        Some(began.elapsed().as_micros() as u64)
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() {
    #[allow(unsafe_code)]
    // SAFETY: malloc_trim takes no pointers and only walks glibc's own
    // arenas under their locks; any thread may call it at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Other allocators (musl, macOS) return memory on their own.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_once_per_interval() {
        let mut t = HeapTrim::default();
        let start = t.last;
        assert!(t.maybe(start + INTERVAL / 2).is_none());
        assert!(t.maybe(start + INTERVAL).is_some());
        assert!(t.maybe(start + INTERVAL + INTERVAL / 2).is_none());
        assert!(t.maybe(start + INTERVAL * 2).is_some());
    }

    /// Freed memory scattered between live blocks of another thread's
    /// arena is given back: RSS after a trim is lower than before.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn a_trim_gives_back_freed_pages() {
        fn rss() -> usize {
            let s = std::fs::read_to_string("/proc/self/statm").unwrap();
            let pages: usize = s.split_whitespace().nth(1).unwrap().parse().unwrap();
            pages * 4096
        }
        // 64 MiB in 16 KiB blocks (below the mmap threshold) allocated on
        // another thread, every other one freed there: its arena keeps them.
        let kept = std::thread::spawn(|| {
            let mut blocks: Vec<Vec<u8>> = (0..4096).map(|_| vec![1u8; 16 << 10]).collect();
            let mut kept = Vec::new();
            for (i, b) in blocks.drain(..).enumerate() {
                if i % 2 == 0 {
                    kept.push(b);
                }
            }
            kept
        })
        .join()
        .unwrap();
        let before = rss();
        trim();
        let after = rss();
        assert!(
            before >= after + (16 << 20),
            "RSS {before} before the trim, {after} after: less than 16 MiB given back"
        );
        drop(kept);
    }
}
