//! Heap buffers aligned to 4 KiB, as O_DIRECT requires, without unsafe code:
//! the allocation is one block larger than asked and the buffer starts at the
//! first aligned byte inside it. A boxed slice never moves its heap memory, so
//! the alignment holds for the buffer's whole life.
//!
//! One-block buffers are recycled per thread: with io_uring a flash read's
//! buffer is taken and given back on the same worker (at completion, or once
//! the record served from it is done with), so the worker's next read takes
//! one it dropped ([`AlignedBuf::for_read`]) instead of allocating and
//! zeroing a new one. (With the pread pool, buffers are made on the pool's
//! threads and dropped on the workers: they are not recycled.)

use std::cell::RefCell;

/// The alignment (and I/O granularity) of every device access.
pub const BLOCK: usize = 4096;

/// Freed one-block buffers a thread keeps for its next reads.
const SPARE_MAX: usize = 256;

thread_local! {
    static SPARE: RefCell<Vec<Box<[u8]>>> = const { RefCell::new(Vec::new()) };
}

/// A buffer whose start is 4 KiB aligned; zeroed when made with
/// [`AlignedBuf::new`].
pub struct AlignedBuf {
    raw: Box<[u8]>,
    start: usize,
    len: usize,
}

impl AlignedBuf {
    /// A buffer of `len` bytes (rounded up to a whole number of blocks).
    pub fn new(len: usize) -> AlignedBuf {
        let len = round_up(len.max(1), BLOCK);
        let raw = vec![0u8; len + BLOCK].into_boxed_slice();
        let start = raw.as_ptr().align_offset(BLOCK);
        AlignedBuf { raw, start, len }
    }

    /// A buffer to read `len` bytes into: a one-block buffer this thread
    /// freed earlier when there is one (its contents are stale; a read
    /// overwrites the bytes it returns, and only those may be looked at),
    /// else a new one.
    pub fn for_read(len: usize) -> AlignedBuf {
        let len = round_up(len.max(1), BLOCK);
        if len == BLOCK {
            if let Some(raw) = SPARE.try_with(|s| s.borrow_mut().pop()).ok().flatten() {
                let start = raw.as_ptr().align_offset(BLOCK);
                return AlignedBuf { raw, start, len };
            }
        }
        AlignedBuf::new(len)
    }

    /// A buffer of no bytes, to stand in for one moved out.
    pub fn empty() -> AlignedBuf {
        AlignedBuf {
            raw: Box::default(),
            start: 0,
            len: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn as_slice(&self) -> &[u8] {
        &self.raw[self.start..self.start + self.len]
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.raw[self.start..self.start + self.len]
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if self.len == BLOCK && self.raw.len() == 2 * BLOCK {
            let raw = std::mem::take(&mut self.raw);
            // After the thread's locals are gone (thread exit) it is freed.
            let _ = SPARE.try_with(|s| {
                let mut s = s.borrow_mut();
                if s.len() < SPARE_MAX {
                    s.push(raw);
                }
            });
        }
    }
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AlignedBuf({} bytes)", self.len)
    }
}

#[inline]
pub fn round_up(n: usize, to: usize) -> usize {
    n.div_ceil(to) * to
}

#[inline]
pub fn round_down(n: u64, to: u64) -> u64 {
    n / to * to
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_and_sized() {
        for len in [1, 4096, 5000, 1 << 20] {
            let mut b = AlignedBuf::new(len);
            assert_eq!(b.as_slice().as_ptr() as usize % BLOCK, 0);
            assert_eq!(b.len() % BLOCK, 0);
            assert!(b.len() >= len);
            b.as_mut_slice()[len - 1] = 7;
            assert_eq!(b.as_slice()[len - 1], 7);
        }
    }

    #[test]
    fn read_buffers_are_reused_and_new_ones_stay_zeroed() {
        let mut a = AlignedBuf::for_read(BLOCK);
        a.as_mut_slice().fill(0xAB);
        let at = a.as_slice().as_ptr();
        drop(a);
        // The next read on this thread gets the same memory back, aligned.
        let b = AlignedBuf::for_read(100);
        assert_eq!(b.as_slice().as_ptr(), at);
        assert_eq!(b.len(), BLOCK);
        assert_eq!(at as usize % BLOCK, 0);
        drop(b);
        // `new` never hands out a recycled buffer: it is zeroed.
        let c = AlignedBuf::new(BLOCK);
        assert!(c.as_slice().iter().all(|&x| x == 0));
        assert_ne!(c.as_slice().as_ptr(), at);
        // Larger buffers are not kept; at most SPARE_MAX one-block ones are.
        let spare = || SPARE.with(|s| s.borrow().len());
        let before = spare();
        drop(AlignedBuf::for_read(3 * BLOCK));
        assert_eq!(spare(), before);
        let many: Vec<_> = (0..SPARE_MAX + 10)
            .map(|_| AlignedBuf::new(BLOCK))
            .collect();
        drop(many);
        assert_eq!(spare(), SPARE_MAX);
    }
}
