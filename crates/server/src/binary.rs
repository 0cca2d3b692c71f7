//! The binary protocol in the connection: a request with magic 0x80 is
//! translated by `tiercache_proto::binary` into the text or meta request
//! that does the same, which runs as any request does (flash reads and
//! waits included), and its reply is encoded back as the binary response.

use tiercache_proto::binary::{self as bin, BinParsed, Frame};
use tiercache_proto::{parse, Limits, Parsed};

pub use bin::{encode, REQ_MAGIC};

/// What to do with the binary request at the head of the input.
pub enum Step<'t> {
    /// Run this request (parsed from `text`); encode its reply for the frame.
    Parsed(Frame, Parsed<'t>),
    /// Wait until this many bytes are buffered.
    Need(usize),
    /// Answered already (an error response in the output): drop `consumed`
    /// bytes, and close after it when `close`.
    Answered { consumed: usize, close: bool },
}

/// Reads the binary request at the start of `buf`, its text form into
/// `text`; an error response goes straight to `out`.
pub fn translate<'t>(
    buf: &[u8],
    limits: &Limits,
    text: &'t mut Vec<u8>,
    out: &mut Vec<u8>,
) -> Step<'t> {
    // memcached's binary body: extras, key and a value up to the item limit.
    let max_body = limits.item_size_max + 512;
    match bin::translate(buf, max_body, text) {
        BinParsed::Incomplete { need } => Step::Need(need),
        BinParsed::Answer {
            frame,
            status,
            consumed,
            close,
        } => {
            bin::error(out, &frame, status);
            Step::Answered { consumed, close }
        }
        BinParsed::Text { frame, consumed } => {
            let text: &'t Vec<u8> = text;
            match parse(text, limits) {
                Parsed::Request { request, .. } | Parsed::Swallow { request, .. } => {
                    Step::Parsed(frame, Parsed::Request { request, consumed })
                }
                Parsed::Incomplete { .. } | Parsed::Close => {
                    bin::error(out, &frame, bin::status::INVALID);
                    Step::Answered {
                        consumed,
                        close: true,
                    }
                }
            }
        }
    }
}
