//! The admin requests of the memcached protocol that are not `stats`:
//! `version`, `verbosity`, `quit`, `shutdown`, `cache_memlimit`, `watch`,
//! `refresh_certs`, and `lru_crawler` (run in [`super::crawler`]).

use crate::commands::reply;
use crate::ctx::{Attempt, Ctx, Outcome};
use tiercache_proto::{reply, Reply, Request};

/// Runs an admin request ([`crate::protocol::execute`] routes them here).
pub fn execute(req: Request<'_>, out: &mut Vec<u8>, ctx: &Ctx<'_>, at: &Attempt<'_>) -> Outcome {
    match req {
        Request::Version => {
            reply::version(out, crate::VERSION.as_bytes());
        }
        Request::Verbosity { level, noreply } => {
            crate::logging::set_verbosity(level);
            reply(out, noreply, Reply::Ok)
        }
        Request::Quit => return Outcome::Close,
        Request::Stats(args) => super::stats::stats_command(args, out, ctx),
        Request::LruCrawler(c) => return super::crawler::lru_crawler(c, out, ctx, at),
        Request::Shutdown { .. } => {
            if !ctx.shared.config.server.enable_shutdown {
                Reply::ShutdownDisabled.encode(out);
            } else {
                return Outcome::Shutdown;
            }
        }
        Request::CacheMemlimit { megabytes, noreply } => {
            if megabytes < 8 {
                reply(out, noreply, Reply::MemlimitTooSmall);
            } else {
                match ctx.engine().set_memory_limit((megabytes as usize) << 20) {
                    Ok(()) => {
                        crate::logging::memlimit_set(megabytes);
                        reply(out, noreply, Reply::Ok);
                    }
                    Err(e) => {
                        crate::logging::memlimit_refused(megabytes, &e);
                        reply(out, noreply, Reply::MemlimitAdjustFailed);
                    }
                }
            }
        }
        Request::Watch { .. } if ctx.shared.config.server.disable_watch => {
            // -W, memcached's words.
            reply::line(out, b"CLIENT_ERROR watch commands not allowed");
        }
        Request::Watch { flags } => return Outcome::Watch(flags),
        Request::RefreshCerts { noreply } => refresh_certs(noreply, out, ctx),
        _ => unreachable!("data requests run in commands::execute (protocol::execute routes them)"),
    }
    Outcome::Continue
}

/// memcached's `refresh_certs`: `OK` (kept back by `noreply`), or the
/// error line, which memcached sends even with `noreply`.
fn refresh_certs(noreply: bool, out: &mut Vec<u8>, ctx: &Ctx<'_>) {
    let Some(tls) = &ctx.shared.tls else {
        out.extend_from_slice(b"Error TLS not enabled\r\n");
        return;
    };
    match tls.refresh(&ctx.shared.config.tls) {
        Ok(()) => reply(out, noreply, Reply::Ok),
        Err(e) => {
            tracing::warn!(error = %format!("{e:#}"), "refresh_certs: the certificates in use stay");
            let msg = format!("{e:#}").replace(['\r', '\n'], " ");
            out.extend_from_slice(msg.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
    }
}
