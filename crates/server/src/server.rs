//! Starting and stopping the server: binds the socket, builds the engine,
//! spawns the workers, the maintenance thread (expiry sweep, delayed
//! flush) and the evacuator (RAM segment evacuations), and waits for
//! shutdown.

use crate::config::Config;
use crate::shared::Shared;
use crate::stats::{ConnStats, WorkerStats};
use crate::transport::{Bound, Proto};
use anyhow::{Context, Result};
use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tiercache_engine::clock::unix_now;
use tiercache_engine::{Engine, EngineConfig};

/// A running server.
pub struct ServerHandle {
    /// The first TCP listening address (0.0.0.0:0 with `-s`: no TCP).
    pub addr: SocketAddr,
    /// Every TCP listening address (one per `-l` entry and resolved address).
    pub addrs: Vec<SocketAddr>,
    /// The unix socket (`-s`).
    pub unix_path: Option<std::path::PathBuf>,
    /// The metrics endpoint's address (`-o metrics_port`).
    pub metrics_addr: Option<SocketAddr>,
    /// The Redis (RESP) listeners' addresses (`-o redis_port`).
    pub redis_addrs: Vec<SocketAddr>,
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

    /// The flag that has the auth file (`-Y`) read again when set (SIGHUP,
    /// as memcached).
    pub fn reload_flag(&self) -> Arc<AtomicBool> {
        self.shared.reload.clone()
    }

    /// Waits for all threads to finish, then writes the shutdown snapshot
    /// (with a flash tier) so that the next start comes back warm.
    pub fn wait(self) {
        for t in self.threads {
            let _ = t.join();
        }
        // The metrics thread waits in accept: a connection wakes it to stop.
        if let Some(a) = self.metrics_addr {
            let _ = std::net::TcpStream::connect_timeout(&a, Duration::from_secs(1));
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

/// The default flash file (no `ext_path` given) fitted to `-m`: its write
/// buffers (four of 4 MiB) and its index come out of the memory limit.
/// Tries three buffers, then two (without `ext_low_ttl`, which needs
/// three), then the same with the file halved, down to 64 MiB: capacity is
/// kept before write buffers. If none fits, runs RAM-only. Says what it did
/// in the log.
/// A flash tier the operator gave is never changed (too little memory for
/// it is an error).
pub fn fit_default_flash(cfg: &mut Config) {
    if !cfg.flash_is_default || cfg.flash.paths.len() != 1 {
        return;
    }
    let Ok((path, asked)) = crate::config::parse_ext_path(&cfg.flash.paths[0]) else {
        return;
    };
    let fits = |c: &Config, bytes: u64| -> bool {
        let Ok(ec) = engine_config(c) else {
            return false;
        };
        tiercache_engine::engine::min_memory_mb(&ec, bytes)
            .is_some_and(|mb| mb <= c.cache.memory_mb)
    };
    if fits(cfg, asked) {
        return;
    }
    let mut sizes = Vec::new();
    let mut size = asked / 2;
    while size >= 64 << 20 {
        sizes.push(size);
        size /= 2;
    }
    for &bytes in std::iter::once(&asked).chain(&sizes) {
        let asked_tier = &cfg.flash.tier;
        for (wbufs, low_ttl) in [
            (asked_tier.write_buffers, asked_tier.low_ttl),
            (3, asked_tier.low_ttl),
            (2, 0),
        ] {
            let mut c = cfg.clone();
            c.flash.paths = vec![format!("{}:{}M", path.display(), bytes >> 20)];
            let t = &mut c.flash.tier;
            t.write_buffers = wbufs.min(asked_tier.write_buffers);
            t.low_ttl = low_ttl;
            if fits(&c, bytes) {
                tracing::warn!(
                    memory_mb = cfg.cache.memory_mb,
                    flash_mb = bytes >> 20,
                    ext_wbuf_count = c.flash.tier.write_buffers,
                    ext_low_ttl = c.flash.tier.low_ttl,
                    "-m is too small for the default flash file and its write buffers: fitted \
                     to -m (give -o ext_path=FILE:SIZE to choose, or ext_path=none for RAM only)"
                );
                *cfg = c;
                return;
            }
        }
    }
    tracing::warn!(
        memory_mb = cfg.cache.memory_mb,
        "-m is too small for any default flash file: running RAM-only \
         (give -o ext_path=FILE:SIZE and a larger -m for a flash tier)"
    );
    cfg.flash.paths.clear();
}

/// Builds the engine from the configuration, with what undoes its flash
/// devices' opens should the start fail later ([`Engine::new_undoable`]).
pub fn build_engine(cfg: &Config) -> Result<(Engine, Vec<tiercache_engine::device::Undo>)> {
    tiercache_engine::priority::set_nice(cfg.server.maintenance_nice);
    let (engine, undo) =
        Engine::new_undoable(engine_config(cfg)?).map_err(|e| anyhow::anyhow!("{e}"))?;
    // An append past -I is not stored, as in memcached.
    engine.set_item_size_max(cfg.cache.max_item_size);
    Ok((engine, undo))
}

/// The engine's configuration for `cfg`.
fn engine_config(cfg: &Config) -> Result<EngineConfig> {
    let ec = EngineConfig {
        memory_limit: cfg.cache.memory_mb << 20,
        segment_size: cfg.effective_segment_size(),
        shards: cfg.cache.shards,
        hash_power: cfg.cache.hash_power,
        policy: cfg.cache.policy.clone(),
        flash: cfg.engine_flash()?,
    };
    Ok(ec)
}

/// File descriptors the server uses besides its connections: stdio, the
/// listener and its copy per worker, each worker's epoll, waker and flash
/// reader (io_uring ring and eventfd), the flash devices and their journal
/// and snapshot, with room to spare. Measured: 17 with `-t 4` and no flash.
pub fn fd_headroom(cfg: &Config) -> u64 {
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

/// Binds every `-l` address (each may resolve to several), or with `-s`
/// the unix socket alone (as memcached: no TCP then).
fn bind_all(config: &Config) -> Result<Vec<Bound>> {
    let s = &config.server;
    if !s.unix_socket.is_empty() {
        let l = crate::transport::bind_unix(&s.unix_socket, s.unix_mask, s.backlog)
            .with_context(|| format!("cannot listen on the unix socket {} (-s)", s.unix_socket))?;
        return Ok(vec![l]);
    }
    let mut listeners: Vec<(TcpListener, bool)> = Vec::new();
    for (host, port, tls) in config.listen_addrs()? {
        let addrs: Vec<SocketAddr> = (host.as_str(), port)
            .to_socket_addrs()
            .with_context(|| format!("cannot resolve listen address '{host}'"))?
            .collect();
        if addrs.is_empty() {
            anyhow::bail!("no address for '{host}'");
        }
        for addr in addrs {
            if listeners
                .iter()
                .any(|(l, _)| l.local_addr().is_ok_and(|a| a == addr && port != 0))
            {
                continue;
            }
            let l = bind_one(addr, config.server.backlog).with_context(|| {
                format!("cannot listen on {addr} (is another server using the port? choose one with -p)")
            })?;
            listeners.push((l, tls));
        }
    }
    Ok(listeners
        .into_iter()
        .map(|(l, tls)| Bound::Tcp(l, tls))
        .collect())
}

/// A listening socket on `addr` with SO_REUSEADDR and a backlog of
/// `backlog` (`-b`); an IPv6 one takes only IPv6 (so that `-l 0.0.0.0,::`
/// binds both, as memcached does).
fn bind_one(addr: SocketAddr, backlog: i32) -> std::io::Result<TcpListener> {
    use std::os::fd::{AsRawFd, FromRawFd};
    let family = if addr.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    // SAFETY: socket() returns a new fd or -1; it is owned by the
    // TcpListener made from it right away, so it is closed on every path.
    #[allow(unsafe_code)]
    let l = unsafe {
        let fd = libc::socket(family, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        TcpListener::from_raw_fd(fd)
    };
    let fd = l.as_raw_fd();
    let one: libc::c_int = 1;
    let int_len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: a zeroed sockaddr_storage, large enough for either family,
    // filled as the family's struct below.
    #[allow(unsafe_code)]
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(*a.ip()).to_be(),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_in fits in sockaddr_storage (both repr(C)).
            #[allow(unsafe_code)]
            unsafe {
                std::ptr::write((&mut ss as *mut libc::sockaddr_storage).cast(), sin)
            };
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: sockaddr_in6 fits in sockaddr_storage (both repr(C)).
            #[allow(unsafe_code)]
            unsafe {
                std::ptr::write((&mut ss as *mut libc::sockaddr_storage).cast(), sin6)
            };
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    // SAFETY: a valid socket fd we own, int options with their size, and
    // the address filled above with its length.
    #[allow(unsafe_code)]
    unsafe {
        let opt = |level, name| {
            libc::setsockopt(
                fd,
                level,
                name,
                (&one as *const libc::c_int).cast(),
                int_len,
            )
        };
        if opt(libc::SOL_SOCKET, libc::SO_REUSEADDR) != 0
            || (family == libc::AF_INET6 && opt(libc::IPPROTO_IPV6, libc::IPV6_V6ONLY) != 0)
            || libc::bind(
                fd,
                (&ss as *const libc::sockaddr_storage).cast(),
                len as libc::socklen_t,
            ) != 0
            || libc::listen(fd, backlog) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(l)
}

/// The undo of the flash devices' opens ([`Engine::new_undoable`]), run
/// when the start returns an error after the engine was built.
struct UndoOnError(Vec<tiercache_engine::device::Undo>);

impl UndoOnError {
    /// The start succeeded: the files stay.
    fn disarm(mut self) {
        self.0.clear();
    }
}

impl Drop for UndoOnError {
    fn drop(&mut self) {
        self.0
            .drain(..)
            .for_each(tiercache_engine::device::Undo::run);
    }
}

/// The Prometheus endpoint's socket (`-o metrics_port`), on `metrics_addr`
/// or the first TCP listener's address.
fn bind_metrics(config: &Config, listeners: &[Bound]) -> Result<Option<TcpListener>> {
    let port = config.server.metrics_port;
    if port == 0 {
        return Ok(None);
    }
    let ip = match config.server.metrics_addr.parse() {
        Ok(ip) => ip,
        Err(_) => listeners
            .iter()
            .find_map(|l| match l.endpoint() {
                Ok(crate::transport::Endpoint::Tcp(a)) => Some(a.ip()),
                _ => None,
            })
            .unwrap_or_else(|| [127, 0, 0, 1].into()),
    };
    let l = TcpListener::bind(SocketAddr::new(ip, port))
        .with_context(|| format!("-o metrics_port: cannot listen on {ip}:{port}"))?;
    Ok(Some(l))
}

/// Starts the server and returns once it is accepting connections.
pub fn start(mut config: Config) -> Result<ServerHandle> {
    raise_fd_limit(&config);
    fix_mmap_threshold();
    fit_default_flash(&mut config);
    // Bind first: a port in use is the commonest start-up error, and
    // opening the flash devices first would leave their files behind.
    let listeners = bind_all(&config)?;
    // The metrics port too, before the flash files are made.
    let metrics_listener = bind_metrics(&config, &listeners)?;
    let redis_listeners = crate::conn::resp::bind(&config)?;
    let redis_addrs = redis_listeners
        .iter()
        .map(TcpListener::local_addr)
        .collect::<std::io::Result<Vec<_>>>()?;
    let tls = crate::transport::tls::TlsSetup::from_config(&config.tls)?;
    // -Y's file, or -S's (the two exclude each other).
    let auth_file = match config.server.sasl {
        true => config.server.sasl_pwdb.as_str(),
        false => config.server.auth_file.as_str(),
    };
    let auth = match auth_file {
        "" => None,
        f => Some(crate::transport::auth::Auth::load(std::path::Path::new(f))?),
    };
    let (engine, undo) = build_engine(&config)?;
    // A start that fails from here removes the flash files it made.
    let undo = UndoOnError(undo);
    tracing::info!("{}", config.data_summary());
    let mut infos = Vec::new();
    let mut addrs = Vec::new();
    for l in &listeners {
        l.set_nonblocking()?;
        let addr = l.endpoint()?;
        if let crate::transport::Endpoint::Tcp(a) = addr {
            addrs.push(a);
        }
        infos.push(crate::admin::registry::ListenerInfo {
            fd: l.raw_fd(),
            addr,
        });
    }
    let workers: Vec<Arc<WorkerStats>> = (0..config.server.threads)
        .map(|_| Arc::new(WorkerStats::default()))
        .collect();
    let detail = crate::admin::detail::Detail::new(
        config.server.detail_delimiter,
        config.server.detail_enabled,
    );
    let registry = crate::admin::registry::Registry::new(workers.len(), infos, unix_now());
    let reserved_fds = fd_headroom(&config);
    let config_metrics_port = config.server.metrics_port;
    let config_watch_buf = config.server.watcher_logbuf_size;
    let shared = Arc::new(Shared {
        engine,
        config,
        conns: ConnStats::default(),
        workers: workers.clone(),
        started: Instant::now(),
        start_unix: u64::from(unix_now()),
        shutdown: Arc::new(AtomicBool::new(false)),
        detail,
        registry,
        reserved_fds,
        crawler_enabled: AtomicBool::new(true),
        metrics: (config_metrics_port > 0).then(crate::admin::metrics::Metrics::new),
        sla: crate::admin::sla::Sla::new(workers.clone(), Duration::from_secs(60), Instant::now()),
        tls,
        auth,
        reload: Arc::new(AtomicBool::new(false)),
        watch: Arc::new(crate::admin::watch::Watch::new(config_watch_buf)),
    });
    // `watch evictions`: the engine reports each RAM eviction while a
    // watcher asks for them (one relaxed load per eviction otherwise).
    let _ = shared.engine.watch_evictions(shared.watch.clone());
    let metrics_addr = match metrics_listener {
        None => None,
        Some(l) => {
            let bound = crate::admin::endpoint::start(shared.clone(), l)?;
            tracing::info!(metrics = %bound, "Prometheus endpoint: GET /metrics");
            Some(bound)
        }
    };
    let polls = workers
        .iter()
        .map(|_| mio::Poll::new())
        .collect::<std::io::Result<Vec<_>>>()?;
    let registries: Vec<_> = polls.iter().map(|p| p.registry()).collect();
    let dispatch = Arc::new(crate::worker::Dispatch::new(&registries)?);
    // The RESP listeners are further listening sockets of every worker,
    // speaking TLS too with -Z.
    let tls_on = shared.tls.is_some();
    let listeners: Vec<(Bound, Proto)> = listeners
        .into_iter()
        .map(|b| (b, Proto::Memcached))
        .chain(
            redis_listeners
                .into_iter()
                .map(|l| (Bound::Tcp(l, tls_on), Proto::Redis)),
        )
        .collect();
    let resp_env = (!redis_addrs.is_empty()).then(|| {
        tracing::info!(redis = ?redis_addrs, "Redis (RESP) listener");
        Arc::new(crate::protocol::resp::Env::new(shared.clone()))
    });
    let mut threads = Vec::new();
    let nworkers = workers.len();
    // The last worker gets the sockets themselves, whose fds `stats conns`
    // names (closing them would let a connection reuse a listener's fd);
    // the others get copies.
    let mut originals = Some(listeners);
    for (i, (stats, poll)) in workers.into_iter().zip(polls).enumerate() {
        let ls = match &originals {
            Some(l) if i + 1 < nworkers => l
                .iter()
                .map(|(b, p)| Ok((b.try_clone()?, *p)))
                .collect::<std::io::Result<Vec<_>>>()?,
            _ => originals.take().unwrap_or_default(),
        };
        let sh = shared.clone();
        let d = dispatch.clone();
        let env = resp_env.clone();
        // The watch thread writes out, at a stop, what the workers log of
        // the connections they close: it waits for them.
        shared.watch.worker_started();
        threads.push(
            std::thread::Builder::new()
                .name(format!("worker-{i}"))
                .spawn(move || {
                    if let Err(e) = crate::worker::run(i, poll, ls, sh.clone(), stats, d, env) {
                        tracing::error!(error = %e, "worker {i} failed; stopping the server");
                        sh.shutdown.store(true, Ordering::Relaxed);
                    }
                    sh.watch.worker_stopped();
                })?,
        );
    }
    let sh = shared.clone();
    threads.push(
        std::thread::Builder::new()
            .name("maintenance".into())
            .spawn(move || {
                tiercache_engine::priority::background_lock_holder("maintenance");
                maintenance(sh)
            })?,
    );
    // RAM segment evacuations begun ahead run here, not in the sets on
    // the workers (memcached's LRU maintainer is its own thread too).
    let sh = shared.clone();
    threads.push(
        std::thread::Builder::new()
            .name("evacuator".into())
            .spawn(move || {
                tiercache_engine::priority::background_lock_holder("evacuator");
                sh.engine.run_evacuator(&sh.shutdown)
            })?,
    );
    let sh = shared.clone();
    threads.push(
        std::thread::Builder::new()
            .name("watch".into())
            .spawn(move || {
                crate::admin::watch::run(&sh.watch, &sh.shutdown, &sh.conns.curr_connections)
            })?,
    );
    let unix_path = (!shared.config.server.unix_socket.is_empty())
        .then(|| shared.config.server.unix_socket.clone().into());
    undo.disarm();
    Ok(ServerHandle {
        addr: addrs
            .first()
            .copied()
            .unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0))),
        addrs,
        unix_path,
        metrics_addr,
        redis_addrs,
        shared,
        threads,
    })
}

/// Once a second: apply delayed flushes and free expired items' segments.
/// Every 50 ms: close the SLA view's minute when it has ended. Every few
/// seconds: give freed heap back to the OS ([`crate::heap_trim`]).
fn maintenance(shared: Arc<Shared>) {
    let mut last = Instant::now();
    let mut heap = crate::heap_trim::HeapTrim::default();
    let mut last_sweep: Option<Instant> = None;
    while !shared.shutdown.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
        shared.sla.tick(Instant::now());
        if last.elapsed() < Duration::from_secs(1) {
            continue;
        }
        last = Instant::now();
        if shared.reload.swap(false, Ordering::Relaxed) {
            match &shared.auth {
                Some(a) => a.reload(),
                None => tracing::info!("SIGHUP: no auth file (-Y) to reload"),
            }
        }
        let sysevents = shared.watch.on(crate::admin::watch::SYSEVENTS);
        let examined = if sysevents { ram_items(&shared) } else { 0 };
        let began = Instant::now();
        let reclaimed = shared.engine.maintain(unix_now());
        let ended = Instant::now();
        crate::stats::bump(&shared.conns.crawler_starts);
        crate::stats::add(&shared.conns.crawler_reclaimed, reclaimed);
        if reclaimed > 0 {
            tracing::debug!(reclaimed, "expired items reclaimed");
        }
        if sysevents {
            shared.watch.swept(&crate::admin::watch::Sweep {
                examined,
                reclaimed,
                elapsed: (ended - began).as_secs(),
                since_run: last_sweep.map_or(0, |t| (began - t).as_secs()),
                next_run: 1,
            });
        }
        last_sweep = Some(ended);
        if let Some(us) = heap.maybe(Instant::now()) {
            crate::stats::bump(&shared.conns.malloc_trims);
            crate::stats::add(&shared.conns.malloc_trim_us, us);
        }
    }
}

/// The items in RAM segments, which the expiry sweep walks (`watch
/// sysevents`' `examined`): neither flash entries nor the small store's.
fn ram_items(shared: &Shared) -> u64 {
    let s = shared.engine.stats(unix_now());
    let small = s.small.map_or(0, |s| s.objects);
    s.shard
        .curr_items
        .saturating_sub(s.shard.flash_items)
        .saturating_sub(small)
}
