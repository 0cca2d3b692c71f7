//! Starting and stopping the server: binds the socket, builds the engine,
//! spawns the workers and the maintenance thread (expiry sweep, delayed
//! flush), and waits for shutdown.

use crate::config::Config;
use crate::shared::Shared;
use crate::stats::{ConnStats, WorkerStats};
use anyhow::{Context, Result};
use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tiercache_engine::clock::unix_now;
use tiercache_engine::flash::TierParams;
use tiercache_engine::{Engine, EngineConfig, FlashConfig};

/// A running server.
pub struct ServerHandle {
    pub addr: SocketAddr,
    pub shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl ServerHandle {
    /// Asks every thread to stop.
    pub fn shutdown(&self) {
        self.shared.shutdown.store(true, Ordering::Relaxed);
    }

    /// The flag that stops the server when set (for signal handlers).
    pub fn shutdown_flag(&self) -> Arc<AtomicBool> {
        self.shared.shutdown.clone()
    }

    /// Waits for all threads to finish, then writes the shutdown snapshot
    /// (with a flash tier) so that the next start comes back warm.
    pub fn wait(self) {
        for t in self.threads {
            let _ = t.join();
        }
        if self.shared.engine.flash().is_none() {
            return;
        }
        let started = Instant::now();
        match self.shared.engine.persist() {
            Ok((items, bytes)) => tracing::info!(
                items,
                bytes,
                seconds = format!("{:.3}", started.elapsed().as_secs_f64()),
                "wrote the shutdown snapshot; the next start restores it"
            ),
            Err(e) => tracing::error!(
                error = %e,
                "cannot write the shutdown snapshot; the next start will be empty"
            ),
        }
    }
}

/// Builds the engine from the configuration.
pub fn build_engine(cfg: &Config) -> Result<Engine> {
    let ec = EngineConfig {
        memory_limit: cfg.cache.memory_mb << 20,
        segment_size: cfg.effective_segment_size(),
        shards: cfg.cache.shards,
        hash_power: cfg.cache.hash_power,
        policy: cfg.cache.policy.clone(),
        flash: None,
    };
    let ec = EngineConfig {
        flash: if cfg.flash.paths.is_empty() {
            None
        } else {
            Some(FlashConfig {
                paths: cfg.flash_paths()?,
                params: TierParams {
                    segment_size: cfg.flash_page_size(),
                    write_buffers: cfg.flash.wbuf_count,
                    min_value_size: cfg.flash.item_size,
                    reinsert_hits: cfg.flash.reinsert,
                    write_budget: cfg.flash.write_budget,
                    wipe: cfg.flash.wipe,
                    low_ttl: cfg.flash.low_ttl,
                    promote: tiercache_engine::flash::tier::Promote::parse(&cfg.flash.promote)
                        .unwrap_or(tiercache_engine::flash::tier::Promote::Second),
                    crash_journal: cfg.flash.crash_safe,
                },
                read_threads: cfg.flash.threads,
                io: cfg.io_mode()?,
                avg_item_size: cfg.flash.avg_item_size,
                snapshot: cfg.snapshot_path()?,
                untrusted_marks: cfg
                    .flash_paths()?
                    .first()
                    .map(|(p, _)| tiercache_engine::flash::distrust::default_files(p))
                    .unwrap_or_default(),
            })
        },
        ..ec
    };
    Engine::new(ec).map_err(|e| anyhow::anyhow!("{e}"))
}

/// File descriptors the server uses besides its connections: stdio, the
/// listener and its copy per worker, each worker's epoll, waker and flash
/// reader (io_uring ring and eventfd), the flash devices and their journal
/// and snapshot, with room to spare. Measured: 17 with `-t 4` and no flash.
fn fd_headroom(cfg: &Config) -> u64 {
    32 + 8 * cfg.server.threads as u64 + 4 * cfg.flash.paths.len() as u64
}

/// Raises the soft RLIMIT_NOFILE to fit `-c` connections plus the server's
/// own descriptors ([`fd_headroom`]), up to the hard limit, as memcached
/// does at start, and says so in the log. memcached refuses to start when
/// the limit cannot be raised that far; tiercache says in the log how many
/// connections fit and runs: past the limit, accept fails with EMFILE and
/// the connections wait in the listen queue until descriptors are free.
fn raise_fd_limit(cfg: &Config) {
    let want = cfg.server.max_connections as u64 + fd_headroom(cfg);
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we own; no other effects.
    #[allow(unsafe_code)]
    let r = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
    if r != 0 {
        tracing::warn!(error = %std::io::Error::last_os_error(), "cannot read the open file limit");
        return;
    }
    let (soft, hard) = (lim.rlim_cur, lim.rlim_max);
    if soft >= want {
        tracing::debug!(soft, hard, want, "the open file limit fits -c");
        return;
    }
    let new = want.min(hard);
    if new > soft {
        lim.rlim_cur = new;
        // SAFETY: setrlimit reads the struct we own; raising the soft limit
        // up to the hard one needs no privilege.
        #[allow(unsafe_code)]
        let r = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) };
        if r != 0 {
            tracing::warn!(
                error = %std::io::Error::last_os_error(),
                soft,
                want,
                "cannot raise the open file limit"
            );
            return;
        }
        tracing::info!(
            from = soft,
            to = new,
            maxconns = cfg.server.max_connections,
            "raised the open file limit (RLIMIT_NOFILE) to fit -c"
        );
    }
    if new < want {
        let fit = new.saturating_sub(fd_headroom(cfg));
        tracing::warn!(
            limit = new,
            hard,
            want,
            maxconns = cfg.server.max_connections,
            fit,
            "the open file limit cannot fit -c: about {fit} connections fit; beyond them clients \
             wait in the listen queue until others close (raise the hard limit, ulimit -Hn, or lower -c)"
        );
    }
}

/// Fixes glibc's mmap threshold at 128 KiB (its default starting value).
/// glibc raises the threshold each time a large block is freed, after
/// which blocks of that size come from the heap and stay with the process
/// after they are freed: connection buffers of 100-300 KiB (a client that
/// does not read, a large value) kept 120 MiB of RSS after 480 such clients
/// had gone, against 8.5 MiB with the threshold fixed (bench/conn_soak.py,
/// MIX=noread:1), and 130 against 82 MiB while they were connected.
fn fix_mmap_threshold() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallopt only sets an allocator parameter; it is called
        // before the server's threads start.
        #[allow(unsafe_code)]
        let ok = unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024) };
        if ok != 1 {
            tracing::debug!("mallopt(M_MMAP_THRESHOLD) refused");
        }
    }
}

/// Starts the server and returns once it is accepting connections.
pub fn start(config: Config) -> Result<ServerHandle> {
    raise_fd_limit(&config);
    fix_mmap_threshold();
    let engine = build_engine(&config)?;
    let addr = (config.server.listen.as_str(), config.server.port)
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve listen address '{}'", config.server.listen))?
        .next()
        .with_context(|| format!("no address for '{}'", config.server.listen))?;
    let listener = TcpListener::bind(addr).with_context(|| {
        format!("cannot listen on {addr} (is another server using the port? choose one with -p)")
    })?;
    listener.set_nonblocking(true)?;
    let local = listener.local_addr()?;
    let workers: Vec<Arc<WorkerStats>> = (0..config.server.threads)
        .map(|_| Arc::new(WorkerStats::default()))
        .collect();
    let detail =
        crate::detail::Detail::new(config.server.detail_delimiter, config.server.detail_enabled);
    let shared = Arc::new(Shared {
        engine,
        config,
        conns: ConnStats::default(),
        workers: workers.clone(),
        started: Instant::now(),
        start_unix: u64::from(unix_now()),
        shutdown: Arc::new(AtomicBool::new(false)),
        detail,
    });
    let polls = workers
        .iter()
        .map(|_| mio::Poll::new())
        .collect::<std::io::Result<Vec<_>>>()?;
    let registries: Vec<_> = polls.iter().map(|p| p.registry()).collect();
    let dispatch = Arc::new(crate::worker::Dispatch::new(&registries)?);
    let mut threads = Vec::new();
    for (i, (stats, poll)) in workers.into_iter().zip(polls).enumerate() {
        let l = listener.try_clone()?;
        let sh = shared.clone();
        let d = dispatch.clone();
        threads.push(
            std::thread::Builder::new()
                .name(format!("worker-{i}"))
                .spawn(move || {
                    if let Err(e) = crate::worker::run(i, poll, l, sh.clone(), stats, d) {
                        tracing::error!(error = %e, "worker {i} failed; stopping the server");
                        sh.shutdown.store(true, Ordering::Relaxed);
                    }
                })?,
        );
    }
    let sh = shared.clone();
    threads.push(
        std::thread::Builder::new()
            .name("maintenance".into())
            .spawn(move || maintenance(sh))?,
    );
    Ok(ServerHandle {
        addr: local,
        shared,
        threads,
    })
}

/// Once a second: apply delayed flushes and free expired items' segments.
fn maintenance(shared: Arc<Shared>) {
    let mut last = Instant::now();
    while !shared.shutdown.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
        if last.elapsed() < Duration::from_secs(1) {
            continue;
        }
        last = Instant::now();
        let reclaimed = shared.engine.maintain(unix_now());
        if reclaimed > 0 {
            tracing::debug!(reclaimed, "expired items reclaimed");
        }
    }
}
