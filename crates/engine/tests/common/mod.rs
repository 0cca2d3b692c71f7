//! Shared by the flash tests: performing a probe's device reads in place of
//! the server's asynchronous reader.

use tiercache_engine::flash::aligned::AlignedBuf;
use tiercache_engine::flash::{Fetched, FlashTier, ReadReq};

/// Reads every pending record (and any longer follow-up read) synchronously.
pub fn read_all(flash: &FlashTier, fetched: &mut Fetched, reads: &mut Vec<ReadReq>) {
    while let Some(r) = reads.pop() {
        let mut buf = AlignedBuf::new(r.len);
        let res = flash.devices()[r.dev]
            .read_at(buf.as_mut_slice(), r.offset)
            .map(|n| &buf.as_slice()[..n]);
        if let Some(more) = fetched.complete(r.slot, res, 8 << 20, &flash.stats) {
            reads.push(more);
        }
    }
}
