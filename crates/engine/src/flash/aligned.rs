//! Heap buffers aligned to 4 KiB, as O_DIRECT requires, without unsafe code:
//! the allocation is one block larger than asked and the buffer starts at the
//! first aligned byte inside it. A boxed slice never moves its heap memory, so
//! the alignment holds for the buffer's whole life.

/// The alignment (and I/O granularity) of every device access.
pub const BLOCK: usize = 4096;

/// A zeroed buffer whose start is 4 KiB aligned.
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
}
