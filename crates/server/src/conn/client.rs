//! A worker's connection of either protocol: a memcached [`Conn`] or a
//! Redis [`RespConn`]. The worker drives both the same way (socket
//! events, flash read completions, the flash tier's wake-ups) through
//! this one type.

use super::resp::RespConn;
use super::{Conn, State};
use crate::ctx::Ctx;
use crate::transport::Stream;
use std::io;
use tiercache_engine::device::aligned::AlignedBuf;
use tiercache_proto::Limits;

pub enum Client {
    Memcached(Conn),
    Redis(RespConn),
}

impl Client {
    /// Whether its head request waits for the flash tier to catch up.
    pub fn busy(&self) -> bool {
        match self {
            Client::Memcached(c) => c.busy,
            Client::Redis(c) => c.busy,
        }
    }

    /// Clears the wait for the flash tier; true if it was waiting.
    pub fn take_busy(&mut self) -> bool {
        let b = match self {
            Client::Memcached(c) => &mut c.busy,
            Client::Redis(c) => &mut c.busy,
        };
        std::mem::take(b)
    }

    /// Why it closed (`watch connevents`).
    pub fn close_reason(&self) -> &'static str {
        match self {
            Client::Memcached(c) => c.close_reason,
            Client::Redis(c) => c.close_reason,
        }
    }

    pub fn stream(&mut self) -> &mut Stream {
        match self {
            Client::Memcached(c) => &mut c.stream,
            Client::Redis(c) => &mut c.stream,
        }
    }

    /// See [`Conn::drive`] and [`RespConn::drive`].
    pub fn drive(
        &mut self,
        ctx: &Ctx<'_>,
        limits: &Limits,
        max_pending: usize,
        readable: bool,
        hup: bool,
    ) -> State {
        match self {
            Client::Memcached(c) => c.drive(ctx, limits, max_pending, readable, hup),
            Client::Redis(c) => c.drive(ctx, readable, hup),
        }
    }

    /// A flash read it asked for finished.
    pub fn complete_read(
        &mut self,
        token: u64,
        result: io::Result<(AlignedBuf, usize)>,
        queued_us: u64,
        ctx: &Ctx<'_>,
    ) {
        match self {
            Client::Memcached(c) => c.complete_read(token, result, queued_us, ctx),
            Client::Redis(c) => c.complete_read(token, result, queued_us, ctx),
        }
    }

    /// A memcached connection that sent `watch`: its watcher and socket.
    pub fn into_watcher(self) -> Option<(std::sync::Arc<crate::admin::watch::Watcher>, Stream)> {
        match self {
            Client::Memcached(c) => c.into_watcher(),
            Client::Redis(_) => None,
        }
    }
}
