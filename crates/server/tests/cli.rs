//! The binary's start-up errors: a clear message on stderr and the exit
//! code that says which kind of error, also when stderr cannot be written
//! (a full disk under the log file): never a panic (exit code 101).

mod common;

use std::fs::File;
use std::process::{Command, Output, Stdio};

fn tiercache(args: &[&str], stderr: Stdio) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tiercache"))
        .args(common::as_root())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .output()
        .expect("run tiercache")
}

fn full() -> Stdio {
    Stdio::from(File::create("/dev/full").expect("/dev/full"))
}

#[test]
fn a_bad_option_exits_64_with_a_message_even_when_stderr_is_full() {
    let args = ["-o", "no_such_option=1"];
    let out = tiercache(&args, Stdio::piped());
    assert_eq!(out.status.code(), Some(64));
    let msg = String::from_utf8_lossy(&out.stderr);
    assert!(
        msg.starts_with("tiercache: ") && msg.contains("no_such_option"),
        "{msg}"
    );
    assert_eq!(tiercache(&args, full()).status.code(), Some(64));
}

#[test]
fn a_flash_file_that_cannot_be_made_exits_71_even_when_stderr_is_full() {
    let port = (24000 + std::process::id() % 2000).to_string();
    let args = [
        "-p",
        &port,
        "-l",
        "127.0.0.1",
        "-o",
        "ext_path=/nonexistent-tiercache-dir/flash:16M",
    ];
    let out = tiercache(&args, Stdio::piped());
    assert_eq!(out.status.code(), Some(71));
    let msg = String::from_utf8_lossy(&out.stderr);
    assert!(msg.contains("does not exist"), "{msg}");
    assert_eq!(tiercache(&args, full()).status.code(), Some(71));
}

#[test]
fn a_refused_start_removes_the_flash_files_it_created_and_keeps_the_others() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("cli-refused-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let made = dir.join("made.flash");
    let kept = dir.join("kept.flash");
    std::fs::write(&kept, vec![9u8; 4096]).unwrap();
    let port = (26000 + std::process::id() % 2000).to_string();
    // The third device cannot be made: the start fails after the first two
    // were opened (the first created, the second there before).
    let ext = format!(
        "ext_path={}:16M,ext_path={}:16M,ext_path=/nonexistent-tiercache-dir/flash:16M",
        made.display(),
        kept.display()
    );
    let out = tiercache(
        &["-p", &port, "-l", "127.0.0.1", "-o", &ext],
        Stdio::piped(),
    );
    assert_eq!(out.status.code(), Some(71));
    assert!(!made.exists(), "the created flash file was left behind");
    // The operator's file is as it was (the start had grown it to 16 MiB).
    let k = std::fs::read(&kept).unwrap();
    assert!(k == vec![9u8; 4096], "{} bytes", k.len());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Starts the binary in `dir`; Ok with its log once it listens (then it is
/// killed), or Err with its exit code and stderr when it refuses to start.
fn starts(dir: &std::path::Path, args: &[&str]) -> Result<String, (Option<i32>, String)> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tiercache"));
    cmd.args(["-p", "0", "-l", "127.0.0.1"])
        .args(common::as_root())
        .args(args)
        .current_dir(dir);
    until_listening(cmd)
}

/// Spawns `cmd` (stderr piped) and reads its log: Ok with it once the
/// server listens (then it is killed), or Err with the exit code and log.
fn until_listening(mut cmd: Command) -> Result<String, (Option<i32>, String)> {
    use std::io::{BufRead, BufReader};
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run tiercache");
    let mut err = String::new();
    for line in BufReader::new(child.stderr.take().unwrap()).lines() {
        let line = line.unwrap_or_default();
        err.push_str(&line);
        err.push('\n');
        if line.contains("listening") {
            child.kill().unwrap();
            child.wait().unwrap();
            return Ok(err);
        }
    }
    let status = child.wait().unwrap();
    Err((status.code(), err))
}

#[test]
fn the_memory_minimum_the_error_names_is_the_real_one() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("cli-min-memory-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // RAM only: 4 MiB runs (1 MiB segments and the index), 3 does not.
    let (code, msg) = starts(&dir, &["-m", "3", "-o", "ext_path=none"]).unwrap_err();
    assert_eq!(code, Some(71), "{msg}");
    assert!(msg.contains("needs at least -m 4"), "{msg}");
    starts(&dir, &["-m", "4", "-o", "ext_path=none"]).expect("-m 4 without flash");
    // Larger items, larger segments, a larger minimum.
    let (_, msg) = starts(&dir, &["-m", "7", "-I", "2m", "-o", "ext_path=none"]).unwrap_err();
    assert!(msg.contains("needs at least -m 8"), "{msg}");
    starts(&dir, &["-m", "8", "-I", "2m", "-o", "ext_path=none"]).expect("-m 8 -I 2m");
    // With a 1 GiB flash file given: the write buffers and the index
    // sized for it come out of -m; the message names the minimum and the
    // RAM-only way out, and the minimum is the real one.
    // The minimum is read from the first refusal (it moves with the
    // index's design), then checked: one below is refused naming the same
    // minimum, the minimum itself starts.
    named_minimum_is_real(&dir, "ext_path=tiercache.flash:1G");
    // With the small-object store, its filters and buffers count too (the
    // minimum named was once below what the store needed at start).
    named_minimum_is_real(&dir, "ext_path=tiercache.flash:2G,ext_small_max=1024");
    // The default flash file (no ext_path) is made to fit a small -m
    // instead (`a_small_memory_limit_starts_with_a_fitted_default_flash_file`
    // in ops.rs); below what RAM alone needs the error names that minimum.
    let (code, msg) = starts(&dir, &["-m", "3"]).unwrap_err();
    assert_eq!(code, Some(71), "{msg}");
    assert!(msg.contains("needs at least -m 4"), "{msg}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// With the flash options `opts`, the minimum an error names for a too
/// small `-m` is the real one: one below is refused naming the same
/// minimum (and the file it made is removed), the minimum itself starts.
fn named_minimum_is_real(dir: &std::path::Path, opts: &str) {
    let given = ["-o", opts];
    let (code, msg) = starts(dir, &[&["-m", "3"][..], &given[..]].concat()).unwrap_err();
    assert_eq!(code, Some(71), "{msg}");
    let min: usize = msg
        .split("needs at least -m ")
        .nth(1)
        .and_then(|t| t.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no minimum named: {msg}"));
    assert!(min > 4, "{msg}");
    let below = (min - 1).to_string();
    for m in ["3", below.as_str()] {
        let (code, msg) = starts(dir, &[&["-m", m][..], &given[..]].concat()).unwrap_err();
        assert_eq!(code, Some(71), "{msg}");
        assert!(
            msg.contains(&format!("needs at least -m {min} "))
                && msg.contains("-o ext_path=none, which needs at least -m 4"),
            "{opts} -m {m}: {msg}"
        );
        assert!(
            !dir.join("tiercache.flash").exists(),
            "refused: file removed"
        );
    }
    starts(dir, &[&["-m", &min.to_string()][..], &given[..]].concat())
        .unwrap_or_else(|e| panic!("{opts}: the named minimum -m {min} did not start: {e:?}"));
    std::fs::remove_file(dir.join("tiercache.flash")).unwrap();
    let _ = std::fs::remove_file(dir.join("tiercache.flash.snapshot"));
}

/// Runs the binary with `args` (as root, with `-u root`); its exit code,
/// stdout and stderr.
fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tiercache"))
        .args(common::as_root())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run tiercache");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bad_flags_exit_64_naming_the_flag_and_why() {
    for (args, says) in [
        (&["-m", "abc"][..], "-m abc: not a number"),
        (&["-p", "99999"], "-p 99999: not a port number"),
        (&["-t", "x"], "-t x: not a number"),
        (&["-p"], "-p needs a value"),
        (&["-x"], "unknown flag '-x'"),
        (&["--no-such-flag"], "unknown flag '--no-such-flag'"),
        (&["-B", "foo"], "should be one of auto, binary, or ascii"),
        (
            &["-e", "/tmp/mem"],
            "-e /tmp/mem (memcached's restartable memory file) is not supported",
        ),
        (
            &["-M"],
            "-M (return errors instead of evicting) is not supported",
        ),
        (
            &["-N", "0"],
            "-N 0: the number of NAPI ids must be a number above 0",
        ),
        (&["-o", "ext_path=/tmp/x:1Z"], "'1Z' is not a size"),
    ] {
        let (code, _, err) = run(args);
        assert_eq!(code, Some(64), "{args:?}: {err}");
        assert!(
            err.starts_with("tiercache: ") && err.contains(says),
            "{args:?}: {err}"
        );
        assert!(
            !err.contains("unexpected argument") && !err.contains("Usage:"),
            "{args:?}: clap's bare error: {err}"
        );
    }
    let (_, _, err) = run(&["-o", "ext_path=/tmp/x:1Z"]);
    assert!(!err.contains("device class"), "{err}");
}

/// The effective configuration for `args` (`--print-config`).
fn print_config(args: &[&str]) -> String {
    let (code, out, err) = run(&[args, &["--print-config"][..]].concat());
    assert_eq!(code, Some(0), "{args:?}: {err}");
    out
}

#[test]
fn memcached_flags_are_taken_as_memcached_takes_them() {
    // -p given twice: the last counts; -l given twice: both.
    let c = print_config(&["-p", "1", "-p", "2", "-l", "127.0.0.1", "-l", "::1"]);
    assert!(c.contains("port = 2\n"), "{c}");
    assert!(c.contains("listen = \"127.0.0.1,::1\"\n"), "{c}");
    let c = print_config(&["-F", "-X", "-W", "--protocol=ascii", "--verbose", "-vv"]);
    for line in [
        "disable_flush_all = true\n",
        "disable_dumping = true\n",
        "disable_watch = true\n",
        "protocol = \"ascii\"\n",
        "verbosity = 3\n",
    ] {
        assert!(c.contains(line), "{line}: {c}");
    }
    let c = print_config(&["--disable-flush-all", "--disable-dumping", "-B", "binary"]);
    assert!(c.contains("disable_flush_all = true\n") && c.contains("protocol = \"binary\"\n"));
    // -N and the no-effect flags start, each named in the log with why
    // (checked in docs/COMPATIBILITY.md's test); -i prints the license.
    print_config(&["-N", "4", "-R", "20", "-f", "1.25", "-n", "48", "-L"]);
    let (code, out, _) = run(&["-i"]);
    assert_eq!(code, Some(0));
    assert!(out.contains("Apache License"), "{out}");
    let (code, out, _) = run(&["-V"]);
    assert_eq!(code, Some(0));
    assert!(out.starts_with("tiercache "), "{out}");
}

#[test]
fn print_config_writes_the_mask_in_octal_and_the_delimiter_as_a_character_and_reads_back() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("cli-print-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let first = print_config(&["-a", "660", "-D", "/", "-F", "-B", "ascii", "-p", "22199"]);
    assert!(first.contains("unix_mask = \"0660\"\n"), "{first}");
    assert!(first.contains("detail_delimiter = \"/\"\n"), "{first}");
    let defaults = print_config(&[]);
    assert!(defaults.contains("unix_mask = \"0700\"\n"), "{defaults}");
    assert!(
        defaults.contains("detail_delimiter = \":\"\n"),
        "{defaults}"
    );
    // What it prints is a config file that gives the same configuration.
    for (name, text) in [("first.toml", &first), ("defaults.toml", &defaults)] {
        let f = dir.join(name);
        std::fs::write(&f, text).unwrap();
        let again = print_config(&["--config", f.to_str().unwrap()]);
        assert_eq!(&again, text, "{name} read back");
    }
    // Files written before, with numbers, still load.
    let old = dir.join("old.toml");
    std::fs::write(&old, "[server]\nunix_mask = 448\ndetail_delimiter = 47\n").unwrap();
    let c = print_config(&["--config", old.to_str().unwrap()]);
    assert!(c.contains("unix_mask = \"0700\"\n") && c.contains("detail_delimiter = \"/\"\n"));
    // A mask that is not octal is refused.
    std::fs::write(&old, "[server]\nunix_mask = \"0800\"\n").unwrap();
    let (code, _, err) = run(&["--config", old.to_str().unwrap(), "--print-config"]);
    assert_eq!(code, Some(64));
    assert!(err.contains("an octal access mask"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The README's quick-start server command: what follows `--` on the
/// `cargo run` line of its first `sh` block.
fn readme_server_args() -> String {
    let readme = include_str!("../../../README.md");
    let line = readme
        .lines()
        .find(|l| l.starts_with("cargo run ") && l.contains("--bin tiercache --"))
        .expect("README: no `cargo run ... --bin tiercache --` line");
    let args = line.split(" -- ").nth(1).unwrap();
    args.split('#').next().unwrap().trim().to_string()
}

/// Runs `tiercache <args>` through `sh` (so `$(id -un)` expands) in `dir`,
/// as `uid` when given; Ok with its log once it listens (then it is
/// killed), or Err with its exit status and stderr.
fn starts_sh(dir: &std::path::Path, args: &str, uid: Option<u32>) -> Result<String, String> {
    let script = format!("exec {} {args}", env!("CARGO_BIN_EXE_tiercache"));
    let mut cmd = match uid {
        None => Command::new("sh"),
        Some(u) => {
            let mut c = Command::new("setpriv");
            c.args([
                &format!("--reuid={u}"),
                &format!("--regid={u}"),
                "--clear-groups",
                "--",
                "sh",
            ]);
            c
        }
    };
    cmd.args(["-c", &script]).current_dir(dir);
    until_listening(cmd).map_err(|(code, log)| format!("exit {code:?}: {log}"))
}

/// The quick start works as written, as root and as a normal user (the
/// port is swapped for a free one: 11211 may be taken on this machine).
#[test]
fn the_readme_quick_start_runs_as_root_and_as_a_user() {
    let args = readme_server_args();
    assert!(args.contains("-p 11211 "), "{args}");
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let args = args.replace("-p 11211 ", &format!("-p {port} "));
    let base = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("cli-quick-start-{}", std::process::id()));
    let me = base.join("me");
    std::fs::create_dir_all(&me).unwrap();
    starts_sh(&me, &args, None).unwrap_or_else(|e| panic!("as myself: {args}: {e}"));
    assert!(me.join("tiercache.flash").exists());
    if common::is_root() {
        // As root without -u it is refused, as memcached: the README's -u
        // is what makes it run.
        let bare = args.split(" -u ").next().unwrap();
        let e = starts_sh(&me, bare, None).unwrap_err();
        assert!(e.contains("can't run as root without the -u switch"), "{e}");
        // As nobody, in a directory nobody may write.
        let them = base.join("nobody");
        std::fs::create_dir_all(&them).unwrap();
        std::os::unix::fs::chown(&them, Some(65534), Some(65534)).unwrap();
        starts_sh(&them, &args, Some(65534)).unwrap_or_else(|e| panic!("as nobody: {args}: {e}"));
        use std::os::unix::fs::MetadataExt;
        let made = std::fs::metadata(them.join("tiercache.flash")).unwrap();
        assert_eq!(made.uid(), 65534, "the flash file is nobody's");
    } else {
        eprintln!("not root: ran the quick start as this user only");
    }
    std::fs::remove_dir_all(&base).unwrap();
}

/// A start refused for a busy port or metrics port leaves no default
/// flash file behind, and never touches one that was there.
#[test]
fn a_busy_port_leaves_no_flash_file_behind() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("cli-busy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port().to_string();
    let metrics = format!("metrics_port={port}");
    // `starts` gives -p 0 first; the later -p wins.
    for args in [&["-o", &metrics][..], &["-p", &port]] {
        let (code, msg) = starts(&dir, args).unwrap_err();
        assert_eq!(code, Some(71), "{args:?}: {msg}");
        assert!(msg.contains(&port), "{msg}");
        assert!(
            !dir.join("tiercache.flash").exists(),
            "{args:?}: the flash file made for the refused start was left behind"
        );
    }
    // An operator's file there before stays as it was.
    let f = dir.join("tiercache.flash");
    std::fs::write(&f, vec![7u8; 8192]).unwrap();
    starts(&dir, &["-o", &metrics]).unwrap_err();
    assert_eq!(std::fs::read(&f).unwrap(), vec![7u8; 8192]);
    drop(busy);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The start log says where the data goes and how large, at the default
/// verbosity: the flash file (as given and absolute), its size and class,
/// and the shutdown snapshot; or that there is no flash tier.
#[test]
fn the_start_log_says_where_the_data_goes() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("cli-data-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = starts(&dir, &[]).unwrap();
    let line = log
        .lines()
        .find(|l| l.contains(" data: "))
        .unwrap_or_else(|| panic!("no data line: {log}"));
    let abs = dir.join("tiercache.flash");
    let want = format!(
        "RAM 64 MiB (-m, index included); flash tiercache.flash ({}) 1 GiB fast; shutdown snapshot tiercache.flash.snapshot ({}.snapshot)",
        abs.display(),
        abs.display()
    );
    assert!(line.contains(&want), "{line}");
    assert!(line.contains(" INFO "), "{line}");
    let log = starts(&dir, &["-o", "ext_path=none", "-m", "32"]).unwrap();
    assert!(
        log.contains("data: RAM 32 MiB (-m, index included); no flash tier (ext_path=none)"),
        "{log}"
    );
    let big = format!(
        "ext_path={}:2G:capacity,ext_path=fast.flash:512M",
        abs.display()
    );
    let log = starts(&dir, &["-o", &big, "-m", "256"]).unwrap();
    assert!(
        log.contains(&format!(
            "flash {} 2 GiB capacity, fast.flash (",
            abs.display()
        )) && log.contains("fast.flash) 512 MiB fast;"),
        "{log}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--help`: flags grouped, defaults shown, memcached's accepted and
/// refused flags listed (none hidden), and every `-o` key.
#[test]
fn help_is_grouped_with_defaults_and_lists_the_extended_keys() {
    let (code, help, _) = run(&["--help"]);
    assert_eq!(code, Some(0));
    for heading in [
        "Network:",
        "Process:",
        "Memory and items:",
        "Security:",
        "Configuration:",
        "Accepted from memcached, no effect (logged at start):",
        "Refused (memcached's, with the reason):",
        "Extended options (-o key=value,key=value",
    ] {
        assert!(help.contains(heading), "{heading}: {help}");
    }
    // Each flag's entry (from its line to the next flag's) has its default.
    let entry = |flag: &str| -> String {
        let at = help
            .find(&format!("  {flag}, "))
            .or_else(|| help.find(&format!("  {flag} ")))
            .unwrap_or_else(|| panic!("{flag} is not in --help: {help}"));
        let rest = &help[at + 2..];
        let end = rest.find("\n  -").unwrap_or(rest.len());
        rest[..end].to_string()
    };
    for (flag, default) in [
        ("-p", "11211"),
        ("-t", "4"),
        ("-c", "1024"),
        ("-m", "64"),
        ("-I", "1m"),
        ("-b", "1024"),
        ("-B", "auto"),
    ] {
        let e = entry(flag);
        assert!(e.contains(&format!("[default: {default}]")), "{flag}: {e}");
    }
    for flag in [
        "-R", "-f", "-n", "-L", "-N", "-M", "-C", "-e", "-F", "-X", "-W", "-i", "-V", "-D", "-Y",
        "-S", "-Z", "-A", "-s", "-a", "-k", "-r", "-d", "-P", "-u", "-U", "-l", "-o", "-v",
    ] {
        entry(flag);
    }
    let listed: String = help[help.find("Extended options").unwrap()..].to_string();
    for (_, keys) in tiercache_server::config::OPTION_GROUPS {
        for k in *keys {
            assert!(
                listed.split_whitespace().any(|w| w == *k),
                "-o {k} is not listed: {listed}"
            );
        }
    }
    // -h is the short form: the same groups, without the -o keys.
    let (code, short, _) = run(&["-h"]);
    assert_eq!(code, Some(0));
    assert!(
        short.len() < help.len() && short.contains("Security:") && !short.contains("ext_small_log")
    );
}

/// Not started as root, `-u` has nothing to switch and is not looked up,
/// as memcached ("only when run as root"): a memcached command line's
/// `-u memcache` runs where that user does not exist; the log says so.
#[test]
fn dash_u_is_not_looked_up_when_not_root() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("cli-user-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::chown(&dir, Some(65534), Some(65534)).unwrap_or(());
    let uid = common::is_root().then_some(65534);
    let args = "-p 0 -l 127.0.0.1 -o ext_path=none -u no-such-user-cli";
    let log = starts_sh(&dir, args, uid).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        log.contains("not started as root: -u has nothing to switch user=no-such-user-cli"),
        "{log}"
    );
    if common::is_root() {
        // As root, the same line is refused: the user must exist.
        let e = starts_sh(&dir, args, None).unwrap_err();
        assert!(e.contains("can't find the user no-such-user-cli"), "{e}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
