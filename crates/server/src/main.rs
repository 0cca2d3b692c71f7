//! The `tiercache` binary: parse flags, start the server, stop on SIGTERM/SIGINT.

use clap::Parser;
use tiercache_server::config::{Args, Config};
use tracing_subscriber::EnvFilter;

fn main() {
    let args = Args::parse();
    let config = match Config::load(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("tiercache: {e:#}");
            std::process::exit(64);
        }
    };
    if args.print_config {
        print!("{}", config.to_toml());
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
        Err(e) => {
            eprintln!("tiercache: {e:#}");
            std::process::exit(71);
        }
    };
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        if let Err(e) = signal_hook::flag::register(sig, server.shutdown_flag()) {
            eprintln!("tiercache: cannot install signal handler: {e}");
            std::process::exit(71);
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
