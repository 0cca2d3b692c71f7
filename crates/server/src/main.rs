//! The `tiercache` binary: parse flags, start the server, stop on SIGTERM/SIGINT.

use clap::Parser;
use std::io::Write;
use tiercache_server::config::{Args, Config};
use tracing_subscriber::EnvFilter;

/// Says why the server cannot run and exits with `code`. The message is
/// written best effort: with stderr on a full disk (or closed) the exit
/// code still tells, where `eprintln!` would panic and exit with 101.
fn fail(code: i32, msg: impl std::fmt::Display) -> ! {
    let _ = writeln!(std::io::stderr(), "tiercache: {msg}");
    std::process::exit(code);
}

fn main() {
    let args = Args::parse();
    let config = match Config::load(&args) {
        Ok(c) => c,
        Err(e) => fail(64, format_args!("{e:#}")),
    };
    if args.print_config {
        if let Err(e) = std::io::stdout().write_all(config.to_toml().as_bytes()) {
            fail(74, format_args!("cannot print the configuration: {e}"));
        }
        return;
    }
    let level = match config.server.verbosity {
        0 => "info",
        1 => "debug",
        _ => "trace",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(level)),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let server = match tiercache_server::server::start(config.clone()) {
        Ok(s) => s,
        Err(e) => fail(71, format_args!("{e:#}")),
    };
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        if let Err(e) = signal_hook::flag::register(sig, server.shutdown_flag()) {
            fail(71, format_args!("cannot install signal handler: {e}"));
        }
    }
    tracing::info!(
        addr = %server.addr,
        threads = config.server.threads,
        memory_mb = config.cache.memory_mb,
        policy = %config.cache.policy,
        "tiercache {} listening",
        tiercache_server::VERSION
    );
    server.wait();
    tracing::info!("tiercache stopped");
}
