//! The `tiercache` binary: parse flags, start the server, stop on SIGTERM/SIGINT.
//!
//! As memcached: as root it refuses to start without `-u`; `-d` forks into
//! the background once the flags are read, and the foreground process
//! exits when the server listens (0) or with the start-up error; the pid
//! file (`-P`) is written after the sockets are bound and removed at a
//! clean exit; `-u` switches user after binding (see `daemon.rs`).

use std::io::Write;
use tiercache_server::config::{Args, Config};
use tiercache_server::daemon::{self, Ready};
use tracing_subscriber::prelude::*;
use tracing_subscriber::EnvFilter;

/// Says why the server cannot run and exits with `code`: to the waiting
/// parent with `-d`, else on stderr. The message is written best effort:
/// with stderr on a full disk (or closed) the exit code still tells, where
/// `eprintln!` would panic and exit with 101.
fn fail(ready: &mut Ready, code: i32, msg: impl std::fmt::Display) -> ! {
    let msg = msg.to_string();
    if !ready.fail(code, &msg) {
        let _ = writeln!(std::io::stderr(), "tiercache: {msg}");
    }
    std::process::exit(code);
}

fn main() {
    let mut ready = Ready::none();
    // Bad flags exit 64 (EX_USAGE) with the flag and why, as memcached;
    // --help, --version and -i print and exit 0.
    let args: Args = match tiercache_server::config::parse_args() {
        Ok(a) => a,
        Err(u) if u.code == 0 => {
            let _ = std::io::stdout().write_all(u.text.as_bytes());
            return;
        }
        Err(u) => fail(&mut ready, u.code, u.text),
    };
    let config = match Config::load(&args) {
        Ok(c) => c,
        Err(e) => fail(&mut ready, 64, format_args!("{e:#}")),
    };
    if args.print_config {
        // What a start would log about flags with no effect, on stderr
        // (stdout stays a config file).
        for note in &config.notes {
            let _ = writeln!(std::io::stderr(), "tiercache: note: {note}");
        }
        if let Err(e) = std::io::stdout().write_all(config.to_toml().as_bytes()) {
            fail(
                &mut ready,
                74,
                format_args!("cannot print the configuration: {e}"),
            );
        }
        return;
    }
    let user = match daemon::check_user(args.user.as_deref()) {
        Ok(u) => u,
        Err(r) => fail(&mut ready, r.code, r.msg),
    };
    if args.daemonize {
        ready = match daemon::daemonize(config.server.verbosity > 0) {
            Ok(r) => r,
            Err(r) => fail(&mut ready, r.code, r.msg),
        };
    }
    let verbosity = u32::from(config.server.verbosity);
    tiercache_server::logging::init(verbosity);
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(tiercache_server::logging::filter_for(verbosity)));
    let (filter, handle) = tracing_subscriber::reload::Layer::new(filter);
    tracing_subscriber::registry()
        .with(filter)
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr())),
        )
        .init();
    tiercache_server::logging::set_reloader(Box::new(move |f: &str| {
        handle.reload(EnvFilter::new(f)).map_err(|e| e.to_string())
    }));
    for note in &config.notes {
        tracing::warn!("{note}");
    }
    if config.server.coredumps {
        match daemon::raise_core_limit() {
            Ok(l) => tracing::info!(limit = l, "core file size limit raised (-r)"),
            Err(r) => fail(&mut ready, r.code, r.msg),
        }
    }
    if config.server.lock_memory {
        match daemon::lock_memory() {
            Ok(()) => tracing::info!("memory locked (-k)"),
            Err(r) => fail(&mut ready, r.code, r.msg),
        }
    }
    let server = match tiercache_server::server::start(config.clone()) {
        Ok(s) => s,
        Err(e) => fail(&mut ready, 71, format_args!("{e:#}")),
    };
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        if let Err(e) = signal_hook::flag::register(sig, server.shutdown_flag()) {
            fail(
                &mut ready,
                71,
                format_args!("cannot install signal handler: {e}"),
            );
        }
    }
    if let Err(e) = signal_hook::flag::register(signal_hook::consts::SIGHUP, server.reload_flag()) {
        fail(
            &mut ready,
            71,
            format_args!("cannot install the SIGHUP handler: {e}"),
        );
    }
    let pidfile = match args
        .pidfile
        .as_deref()
        .map(daemon::PidFile::write)
        .transpose()
    {
        Ok(p) => p,
        Err(r) => fail(&mut ready, r.code, r.msg),
    };
    if let Some(u) = &user {
        match daemon::drop_privileges(u) {
            Ok(true) => {
                tracing::info!(user = %u.name, uid = u.uid, gid = u.gid, "switched user (-u)");
                if let Ok(Some(snap)) = config.snapshot_path() {
                    daemon::check_snapshot_dir(u, &snap);
                }
            }
            Ok(false) => tracing::info!("staying root (-u root)"),
            Err(r) => fail(&mut ready, r.code, r.msg),
        }
    } else if let Some(name) = &args.user {
        tracing::info!(user = %name, "not started as root: -u has nothing to switch");
    }
    let addrs: Vec<String> = server.addrs.iter().map(ToString::to_string).collect();
    tracing::info!(
        addr = %server.addr,
        all = %addrs.join(","),
        unix_socket = ?server.unix_path,
        tls = config.tls.enabled,
        threads = config.server.threads,
        memory_mb = config.cache.memory_mb,
        policy = %config.cache.policy,
        "tiercache {} (memcached {}) listening",
        tiercache_server::TIERCACHE_VERSION,
        tiercache_server::VERSION
    );
    ready.ok();
    server.wait();
    if let Some(p) = pidfile {
        p.remove();
    }
    tracing::info!("tiercache stopped");
}
