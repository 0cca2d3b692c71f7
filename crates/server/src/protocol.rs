//! The protocol floor: the wire codecs. Today the memcached protocol (text
//! and meta parsing live in tiercache-proto; [`binary`] translates binary
//! requests into their text equivalents, [`sasl`] runs binary SASL
//! authentication), and [`execute`], which routes a decoded request to the
//! admin commands ([`crate::admin`]) or the data commands
//! ([`crate::commands`]). The Redis protocol is [`resp`], its own codec
//! and commands over the same engine.

pub mod binary;
pub mod resp;
pub mod sasl;

use crate::ctx::{Attempt, Ctx, Outcome};
use tiercache_proto::Request;

/// Executes one request, appending its reply to `out`: an admin request in
/// [`crate::admin::control`], a data request in [`crate::commands`].
pub fn execute(req: Request<'_>, out: &mut Vec<u8>, ctx: &Ctx<'_>, at: &Attempt<'_>) -> Outcome {
    match req {
        Request::Version
        | Request::Verbosity { .. }
        | Request::Quit
        | Request::Stats(_)
        | Request::LruCrawler(_)
        | Request::Shutdown { .. }
        | Request::CacheMemlimit { .. }
        | Request::Watch { .. }
        | Request::RefreshCerts { .. } => crate::admin::control::execute(req, out, ctx, at),
        req => crate::commands::execute(req, out, ctx, at),
    }
}
