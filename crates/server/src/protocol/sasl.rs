//! Binary protocol SASL (`-S`), mechanism PLAIN, as memcached 1.6.18
//! answers with it: SASL_LIST_MECHS (0x20) gives `PLAIN`; SASL_AUTH (0x21)
//! with the key `PLAIN` and the data `authzid\0user\0password` gives
//! `Authenticated` when `user:password` is a line of the password file
//! (the format of `-Y`'s, memcached's `MEMCACHED_SASL_PWDB`; the authzid
//! empty or the user), else status 0x20 `Auth failure.`; SASL_STEP (0x22)
//! always fails (PLAIN has one step). As memcached's libsasl session does,
//! every SASL command first undoes the connection's authentication, and a
//! connection authenticates once: a second SASL_AUTH after a success fails
//! (memcached: "attempting server step after doneflag"). Until a
//! connection authenticates,
//! every other request but VERSION gets `Auth failure.` and the connection
//! is closed. As in memcached, `-S` serves the binary protocol only: a
//! request without the 0x80 magic closes the connection, unanswered, once
//! a header's 24 bytes are in. `auth_cmds` and `auth_errors` count the
//! attempts and failures. memcached needs libsasl for this; tiercache
//! checks the file itself, and as memcached's password database it is
//! read at every authentication, so a user added or removed counts from
//! the next one without a SIGHUP.

use crate::protocol::binary::Step;
use crate::transport::auth::Auth;
use tiercache_proto::binary::{self as bin, status, Frame, HEADER_LEN, REQ_MAGIC};

const LIST_MECHS: u8 = 0x20;
const AUTH: u8 = 0x21;
const STEP: u8 = 0x22;
const VERSION: u8 = 0x0b;
/// memcached's MAX_SASL_MECH_LEN.
const MAX_MECH: usize = 32;
/// Longest SASL body waited for; a PLAIN token is a few hundred bytes.
const MAX_BODY: usize = 64 << 10;

/// A connection's SASL state.
#[derive(Debug, Default, Clone, Copy)]
pub struct Session {
    /// Its requests are served.
    pub authed: bool,
    /// It authenticated once: its SASL session is over.
    pub done: bool,
}

/// Runs the SASL commands at the head of the input and keeps out the
/// requests of a connection not authenticated yet. None: the request is
/// served as any binary request.
pub fn gate<'t>(buf: &[u8], out: &mut Vec<u8>, auth: &Auth, s: &mut Session) -> Option<Step<'t>> {
    if buf.len() < HEADER_LEN {
        return Some(Step::Need(HEADER_LEN));
    }
    let answered = |consumed: usize, close| {
        Some(Step::Answered {
            consumed,
            close,
            skip: 0,
        })
    };
    if buf[0] != REQ_MAGIC {
        return answered(buf.len(), true);
    }
    let opcode = buf[1];
    let klen = usize::from(u16::from_be_bytes([buf[2], buf[3]]));
    let elen = usize::from(buf[4]);
    let blen = u32::from_be_bytes([buf[8], buf[9], buf[10], buf[11]]) as usize;
    let frame = Frame {
        opcode,
        opaque: u32::from_be_bytes([buf[12], buf[13], buf[14], buf[15]]),
        key: Vec::new(),
    };
    match opcode {
        LIST_MECHS | AUTH | STEP => {}
        _ if s.authed || opcode == VERSION => return None,
        _ => {
            bin::error(out, &frame, status::AUTH_ERROR);
            return answered(buf.len(), true);
        }
    }
    if blen > MAX_BODY || klen + elen > blen {
        bin::error(out, &frame, status::INVALID);
        return answered(buf.len(), true);
    }
    let total = HEADER_LEN + blen;
    if buf.len() < total {
        return Some(Step::Need(total));
    }
    let key = &buf[HEADER_LEN + elen..HEADER_LEN + elen + klen];
    let data = &buf[HEADER_LEN + elen + klen..total];
    match opcode {
        LIST_MECHS if blen == 0 => {
            s.authed = false;
            bin::response(out, &frame, status::OK, 0, &[], &[], b"PLAIN")
        }
        AUTH | STEP if elen == 0 && klen > 0 && klen <= MAX_MECH => {
            s.authed = false;
            let ok = match opcode == AUTH && key == b"PLAIN" && !s.done {
                true => plain(data, auth),
                false => {
                    auth.failed();
                    false
                }
            };
            if ok {
                *s = Session {
                    authed: true,
                    done: true,
                };
                bin::response(out, &frame, status::OK, 0, &[], &[], b"Authenticated");
            } else {
                bin::error(out, &frame, status::AUTH_ERROR);
            }
        }
        AUTH | STEP if elen == 0 && klen > MAX_MECH => bin::error(out, &frame, status::INVALID),
        _ => {
            bin::error(out, &frame, status::INVALID);
            return answered(total, true);
        }
    }
    answered(total, false)
}

/// Checks a PLAIN token `authzid\0user\0password` against the file,
/// counting the attempt (and the failure).
fn plain(token: &[u8], auth: &Auth) -> bool {
    let mut parts = token.splitn(3, |&b| b == 0);
    match (parts.next(), parts.next(), parts.next()) {
        (Some(authz), Some(user), Some(pass)) if authz.is_empty() || authz == user => {
            auth.check_current(user, pass)
        }
        _ => {
            auth.failed();
            false
        }
    }
}
