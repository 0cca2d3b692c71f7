//! A read-only view of one item, in RAM or fetched from flash, handed to a
//! front end while the engine holds it: the fields a reply shows, never the
//! item's internal bits.

use crate::item::{self, Header, HEADER};

/// One item as a reply sees it. Valid for the call it is handed to.
#[derive(Debug, Clone, Copy)]
pub struct ItemView<'a> {
    header: Header,
    value: &'a [u8],
}

impl<'a> ItemView<'a> {
    pub(crate) fn new(header: Header, value: &'a [u8]) -> ItemView<'a> {
        ItemView { header, value }
    }

    /// An item in the RAM layout (header, key, value), e.g. a flash record.
    pub(crate) fn of_bytes(item: &'a [u8]) -> ItemView<'a> {
        let header = Header::read(item);
        let at = HEADER + header.klen as usize;
        ItemView {
            header,
            value: &item[at..at + header.vlen as usize],
        }
    }

    /// The client's flags.
    pub fn flags(&self) -> u32 {
        self.header.flags
    }

    pub fn cas(&self) -> u64 {
        self.header.cas
    }

    /// Absolute unix seconds; 0 = never expires.
    pub fn exptime(&self) -> u32 {
        self.header.exptime
    }

    pub fn value(&self) -> &'a [u8] {
        self.value
    }

    /// Seconds since the item was last accessed (mod 65536, as stored).
    pub fn idle_seconds(&self, now: u32) -> u16 {
        (now as u16).wrapping_sub(self.header.atime)
    }

    /// Whether it was read since it was stored (meta `h`).
    pub fn fetched(&self) -> bool {
        self.header.bits & item::FETCHED != 0
    }

    /// Whether its key was given in base64 (meta `b`).
    pub fn binary_key(&self) -> bool {
        self.header.bits & item::KEY_BINARY != 0
    }

    /// Bytes the item occupies in RAM (`me`'s `size`).
    pub fn stored_size(&self) -> usize {
        self.header.size()
    }
}
