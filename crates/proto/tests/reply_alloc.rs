//! The reply encoders allocate nothing: with the output buffer's room
//! reserved, encoding every kind of reply (binary keys included) makes no
//! heap allocation on this thread. A counting global allocator checks it.
#![allow(unsafe_code)] // the counting allocator below; test code only

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use tiercache_proto::reply::{self, FlagList, MetaCode, MetaDebug, MetaFlag, MetaWriter, Reply};

struct Counting;

thread_local! {
    static ALLOCS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: the caller's contract is passed on as is.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocs() -> usize {
    ALLOCS.with(Cell::get)
}

#[test]
fn encoding_does_not_allocate() {
    let flags = [
        MetaFlag::Size(3),
        MetaFlag::Ttl(None),
        MetaFlag::Ttl(Some(99)),
        MetaFlag::Cas(u64::MAX),
        MetaFlag::Flags(5),
        MetaFlag::LastAccess(2),
        MetaFlag::Hit(true),
        MetaFlag::Opaque(b"opaque"),
        MetaFlag::key(b"text-key", false),
        MetaFlag::key(&[0u8, 1, 2, 255, 254], true),
        MetaFlag::TokenSent,
        MetaFlag::Stale,
        MetaFlag::Win,
    ];
    let replies = [
        Reply::Value {
            key: b"k",
            flags: 1,
            cas: Some(2),
            data: b"value",
        },
        Reply::End,
        Reply::MemlimitAdjustFailed,
        Reply::Number(12345),
        Reply::Version(b"1.6.18"),
        Reply::ClientError(b"bad data chunk"),
        Reply::ServerError(b"out of memory"),
        Reply::Stat {
            name: b"pid",
            value: b"1",
        },
        Reply::Prefix {
            prefix: b"p",
            get: 1,
            hit: 2,
            set: 3,
            del: 4,
        },
        Reply::meta(MetaCode::Hd, &flags),
        Reply::MetaValue {
            flags: FlagList::Borrowed(&flags),
            data: b"data",
        },
        Reply::MetaDebug(MetaDebug {
            key: &[0xff, 0],
            binary: true,
            exp: -1,
            la: 1,
            cas: 2,
            fetch: true,
            cls: 1,
            size: 70,
        }),
    ];
    let mut out = Vec::with_capacity(64 * 1024);
    let before = allocs();
    for r in &replies {
        r.encode(&mut out);
    }
    reply::value_header(&mut out, b"key", 0, 10, None);
    reply::stat_u64(&mut out, b"curr_items", 7);
    reply::meta(&mut out, MetaCode::En, &flags[7..9]);
    let mut w = MetaWriter::value(&mut out, 2);
    for f in &flags {
        w.flag(f);
    }
    w.finish_value(b"hi");
    tiercache_proto::response::meta_key(&mut out, b"\x00bin", true);
    let after = allocs();
    assert!(out.len() < out.capacity());
    assert_eq!(after - before, 0, "encoders allocated");
}
