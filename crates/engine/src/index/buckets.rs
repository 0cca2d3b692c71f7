//! The index tables' bucket arrays: zeroed anonymous mappings, so that a
//! new table costs one `mmap` and its pages are faulted in (zeroed by the
//! kernel) as entries arrive, not written whole at once.
//!
//! A `Vec` cannot give that for 64-byte aligned buckets: `vec![EMPTY; n]`
//! writes every bucket, and the allocator zeroes an over-aligned
//! allocation with a `memset` (only `calloc`, for alignments up to 16,
//! maps fresh zero pages). Measured, a table rebuild's new 512 KiB took
//! 160-280 us of a shard-lock hold on the CPU before its first entry
//! moved (issue 31). A mapping is page aligned, so every bucket is one
//! cache line, as the `Vec` of `align(64)` buckets was.

#![allow(unsafe_code)]

use super::Bucket;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// An owned array of zero-initialised buckets (see the module's doc).
pub(super) struct Buckets {
    ptr: NonNull<Bucket>,
    len: usize,
}

// SAFETY: `Buckets` owns its mapping alone, as a `Vec` owns its buffer, and
// a `Bucket` is plain bytes: moving or sharing it across threads is as safe
// as for `Vec<Bucket>`.
unsafe impl Send for Buckets {}
// SAFETY: as above; `&Buckets` gives only shared reads.
unsafe impl Sync for Buckets {}

impl Buckets {
    /// No buckets (no mapping).
    pub fn none() -> Buckets {
        Buckets {
            ptr: NonNull::dangling(),
            len: 0,
        }
    }

    /// `len` empty buckets.
    pub fn zeroed(len: usize) -> Buckets {
        if len == 0 {
            return Buckets::none();
        }
        let bytes = Self::bytes(len);
        // SAFETY: a new private anonymous mapping aliases no memory of the
        // process; the kernel zero-fills it (all-zero bytes are an empty
        // bucket) and aligns it to a page, a multiple of a bucket's 64-byte
        // alignment.
        let p = unsafe {
            rustix::mm::mmap_anonymous(
                std::ptr::null_mut(),
                bytes,
                rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
                rustix::mm::MapFlags::PRIVATE,
            )
        }
        .unwrap_or_else(|e| panic!("index: cannot map {bytes} bytes of buckets: {e}"));
        Buckets {
            ptr: NonNull::new(p.cast()).expect("mmap returns a non-null address"),
            len,
        }
    }

    fn bytes(len: usize) -> usize {
        len.checked_mul(std::mem::size_of::<Bucket>())
            .expect("bucket array size overflows")
    }
}

impl Deref for Buckets {
    type Target = [Bucket];
    #[inline]
    fn deref(&self) -> &[Bucket] {
        // SAFETY: `ptr` is the start of `len` initialised buckets (mapped
        // zeroed, and only whole buckets are written), valid while `self`
        // lives; for `len` 0 it is dangling but aligned, as a slice allows.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl DerefMut for Buckets {
    #[inline]
    fn deref_mut(&mut self) -> &mut [Bucket] {
        // SAFETY: as in `deref`; `&mut self` makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for Buckets {
    fn drop(&mut self) {
        if self.len == 0 {
            return;
        }
        // SAFETY: the mapping made by `zeroed`, of this length, unmapped once
        // (here); no reference into it outlives `self`.
        let _ = unsafe { rustix::mm::munmap(self.ptr.as_ptr().cast(), Self::bytes(self.len)) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_zeroed_aligned_and_writable() {
        for len in [0usize, 1, 63, 64, 8192] {
            let mut b = Buckets::zeroed(len);
            assert_eq!(b.len(), len);
            assert!(b.iter().all(|x| x.0 == [0; 64]));
            assert_eq!(b.as_ptr() as usize % 64, 0);
            if len > 0 {
                b[len - 1].0[7] = 9;
                assert_eq!(b[len - 1].0[7], 9);
            }
        }
    }
}
