//! docs/COMPATIBILITY.md against the binary: every row's example is run
//! (flags and `-o` options through `--print-config`, commands and `stats`
//! groups against a running server) and must be refused where the table
//! says refused and accepted elsewhere, with the log note for "no effect".
//! With memcached installed, every flag and option `memcached -h` lists
//! must have a row, and every command row must be one memcached knows.

mod common;

use common::process::Proc;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const DOC: &str = include_str!("../../../docs/COMPATIBILITY.md");

/// One table row: the name cell, the example (backticks off), the status.
struct Row {
    name: String,
    example: String,
    status: String,
}

/// The rows of the table under `## {section}`.
fn rows(section: &str) -> Vec<Row> {
    let start = DOC
        .find(&format!("\n## {section}\n"))
        .unwrap_or_else(|| panic!("no section {section}"));
    let body = &DOC[start + 4 + section.len()..];
    let body = &body[..body.find("\n## ").unwrap_or(body.len())];
    let out: Vec<Row> = body
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split(" | ").map(str::trim).collect();
            assert_eq!(cells.len(), 4, "{section}: a row of 4 cells: {l}");
            let status = cells[2].to_string();
            assert!(
                ["same", "differs", "no effect", "refused"].contains(&status.as_str()),
                "{section}: status '{status}' in {l}"
            );
            Row {
                name: cells[0].to_string(),
                example: cells[1].trim_matches('`').to_string(),
                status,
            }
        })
        .collect();
    assert!(out.len() > 10, "{section}: {} rows", out.len());
    out
}

/// A `user:password` file for `-Y` and `-S` rows.
fn authfile() -> std::path::PathBuf {
    let f = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("compat-auth-{}", std::process::id()));
    std::fs::write(&f, "user:password\n").unwrap();
    f
}

/// Runs `tiercache -o ext_path=none <example> --print-config`: exit code
/// and stderr.
fn check_config(example: &str, auth: &std::path::Path) -> (Option<i32>, String) {
    let auth = auth.to_str().unwrap();
    let example = example.replace("AUTHFILE", auth);
    let out = Command::new(env!("CARGO_BIN_EXE_tiercache"))
        .args(common::as_root())
        .args(["-o", "ext_path=none"])
        .args(example.split_whitespace())
        .arg("--print-config")
        .env("MEMCACHED_SASL_PWDB", auth)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .expect("run tiercache");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The name a "no effect" note starts with: `-R` for a flag row, the
/// key for an option row.
fn note_name(row: &Row, flags: bool) -> String {
    let first = row.name.split(',').next().unwrap().trim_matches('`');
    if flags {
        first.to_string()
    } else {
        format!("-o {first}")
    }
}

fn check_rows(section: &str, flags: bool) {
    let auth = authfile();
    let mut wrong = Vec::new();
    for row in rows(section) {
        let (code, err) = check_config(&row.example, &auth);
        let name = note_name(&row, flags);
        let noted = err
            .lines()
            .any(|l| l.contains("note: ") && l.contains(&name) && l.contains("no effect"));
        let ok = match row.status.as_str() {
            "refused" => {
                code == Some(64)
                    && !err.contains("unknown flag")
                    && !err.contains("unknown extended option")
            }
            "no effect" => code == Some(0) && noted,
            _ => code == Some(0) && !noted,
        };
        if !ok {
            wrong.push(format!(
                "{} ({}): table says {}, the binary: exit {code:?}, {err}",
                row.name, row.example, row.status
            ));
        }
    }
    std::fs::remove_file(auth).unwrap();
    assert!(wrong.is_empty(), "{section}:\n{}", wrong.join("\n"));
}

#[test]
fn the_flag_table_matches_the_binary() {
    check_rows("Flags", true);
}

#[test]
fn the_option_table_matches_the_binary() {
    check_rows("-o options", false);
}

/// Every flag and `-o` option `memcached -h` lists has a row.
#[test]
fn every_flag_and_option_memcached_lists_has_a_row() {
    let Ok(out) = Command::new("/usr/bin/memcached").arg("-h").output() else {
        eprintln!("memcached not installed: the tables are checked against the binary only");
        return;
    };
    let help = String::from_utf8_lossy(&out.stdout);
    let flags: Vec<String> = rows("Flags").into_iter().map(|r| r.name).collect();
    let options: Vec<String> = rows("-o options").into_iter().map(|r| r.name).collect();
    let mut missing = Vec::new();
    for line in help.lines() {
        let b = line.as_bytes();
        if b.len() > 2 && b[0] == b'-' && b[1].is_ascii_alphabetic() && [b' ', b','].contains(&b[2])
        {
            let flag = format!("`-{}", b[1] as char);
            if !flags.iter().any(|n| n.starts_with(&flag)) {
                missing.push(line.to_string());
            }
        }
        if let Some(rest) = line.strip_prefix("   - ") {
            let key = rest.split(':').next().unwrap().trim();
            if key.chars().all(|c| c.is_ascii_lowercase() || c == '_')
                && !options.iter().any(|n| n == &format!("`{key}`"))
            {
                missing.push(line.to_string());
            }
        }
    }
    assert!(missing.is_empty(), "no row for:\n{}", missing.join("\n"));
}

/// Sends `req` and `mn`, and reads the reply up to `mn`'s `MN` (cut off),
/// or until the server closes, or half a second without bytes once some
/// came (after `watch` nothing more runs), or 10 s.
fn ask(addr: std::net::SocketAddr, req: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(req.replace("\\r\\n", "\r\n").as_bytes())
        .unwrap();
    s.write_all(b"\r\nmn\r\n").unwrap();
    let end = Instant::now() + Duration::from_secs(10);
    let mut got = Vec::new();
    let mut buf = [0u8; 65536];
    while let Some(left) = end.checked_duration_since(Instant::now()) {
        let idle = if got.is_empty() {
            left
        } else {
            left.min(Duration::from_millis(500))
        };
        s.set_read_timeout(Some(idle.max(Duration::from_millis(1))))
            .unwrap();
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
        if got.ends_with(b"MN\r\n") {
            got.truncate(got.len() - 4);
            break;
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

fn check_commands(section: &str) {
    let t = Proc::start(&[]);
    let mc = common::memcached::Memcached::start();
    let mut wrong = Vec::new();
    for row in rows(section) {
        let got = ask(t.addr, &row.example);
        let refused = got.starts_with("ERROR") || got.starts_with("CLIENT_ERROR");
        let ok = match row.status.as_str() {
            "refused" => refused,
            _ => got != "ERROR\r\n",
        };
        if !ok {
            wrong.push(format!(
                "{} ({}): table says {}, tiercache answers {got:?}",
                row.name, row.example, row.status
            ));
        }
        if let Some(m) = &mc {
            let theirs = ask(m.addr().parse().unwrap(), &row.example);
            if theirs == "ERROR\r\n" {
                wrong.push(format!("{}: memcached does not know it", row.example));
            }
        }
    }
    assert!(wrong.is_empty(), "{section}:\n{}", wrong.join("\n"));
}

#[test]
fn the_command_table_matches_the_server() {
    check_commands("Commands");
}

#[test]
fn the_stats_table_matches_the_server() {
    check_commands("stats groups");
}
