//! The binary protocol in the connection: a request with magic 0x80 is
//! translated by `tiercache_proto::binary` into the text or meta request
//! that does the same, which runs as any request does (flash reads and
//! waits included), and its reply is encoded back as the binary response.

use crate::ctx::{Attempt, Ctx};
use crate::protocol::execute;
use tiercache_proto::binary::{self as bin, BinParsed, Frame};
use tiercache_proto::{parse, Limits, Parsed};

pub use bin::{encode, HEADER_LEN, REQ_MAGIC};

/// What to do with the binary request at the head of the input.
pub enum Step<'t> {
    /// Run this request (parsed from `text`); encode its reply for the frame.
    Parsed(Frame, Parsed<'t>),
    /// Wait until this many bytes are buffered.
    Need(usize),
    /// Answered already (its response is in the output): drop `consumed`
    /// bytes and `skip` more still to come, and close after it when `close`.
    Answered {
        consumed: usize,
        close: bool,
        skip: usize,
    },
}

/// Reads the binary request at the start of `buf`, its text form into
/// `text`; an error response goes straight to `out`.
pub fn translate<'t>(
    buf: &[u8],
    limits: &Limits,
    text: &'t mut Vec<u8>,
    out: &mut Vec<u8>,
    ctx: &Ctx<'_>,
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
            skip,
        } => {
            bin::error(out, &frame, status);
            Step::Answered {
                consumed,
                close,
                skip,
            }
        }
        BinParsed::Refused {
            frame,
            consumed,
            skip,
        } => {
            // The text parser refuses the store as too large (and says
            // whether the key's old item goes, as memcached decides).
            match parse(text, limits) {
                Parsed::Swallow { request, .. } => {
                    let mut reply = Vec::new();
                    execute(request, &mut reply, ctx, &Attempt::plain());
                    bin::encode(out, &frame, &reply);
                }
                _ => bin::error(out, &frame, bin::status::TOO_LARGE),
            }
            Step::Answered {
                consumed,
                close: false,
                skip,
            }
        }
        BinParsed::Text { frame, consumed } => {
            let text: &'t Vec<u8> = text;
            match parse(text, limits) {
                // -F: memcached answers a binary flush "Auth failure.".
                Parsed::Request {
                    request: tiercache_proto::Request::FlushAll { .. },
                    ..
                } if ctx.shared.config.server.disable_flush_all => {
                    bin::error(out, &frame, bin::status::AUTH_ERROR);
                    Step::Answered {
                        consumed,
                        close: false,
                        skip: 0,
                    }
                }
                Parsed::Request { request, .. } | Parsed::Swallow { request, .. } => {
                    Step::Parsed(frame, Parsed::Request { request, consumed })
                }
                Parsed::Incomplete { .. } | Parsed::Close => {
                    bin::error(out, &frame, bin::status::INVALID);
                    Step::Answered {
                        consumed,
                        close: true,
                        skip: 0,
                    }
                }
            }
        }
    }
}
