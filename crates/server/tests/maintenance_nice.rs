//! The threads that hold shard locks in the background run at
//! `maintenance_nice` (default -10) when the process may raise a priority
//! (root), and the workers stay at the process's: read from
//! /proc/self/task/*/stat of the in-process server. Cost: under a second.

mod common;

use common::server_with;
use std::time::{Duration, Instant};

/// (thread name, nice value) of every thread of this process.
fn threads() -> Vec<(String, i32)> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| {
            let dir = t.ok()?.path();
            let comm = std::fs::read_to_string(dir.join("comm")).ok()?;
            let stat = std::fs::read_to_string(dir.join("stat")).ok()?;
            // Fields after the command name (in parentheses): the nice
            // value is the 19th field of the line, the 17th after it.
            let rest = &stat[stat.rfind(')')? + 2..];
            let nice = rest.split(' ').nth(16)?.parse().ok()?;
            Some((comm.trim().to_string(), nice))
        })
        .collect()
}

fn nice_of(name: &str) -> Option<i32> {
    threads()
        .into_iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v)
}

#[test]
fn the_background_lock_holders_take_the_maintenance_nice_value() {
    let root = common::is_root();
    let dir = common::tempdir("nice");
    let _h = server_with(|c| {
        c.flash.paths = vec![format!("{}:64M", dir.join("flash").display())];
    });
    let want = if root { -10 } else { 0 };
    let deadline = Instant::now() + Duration::from_secs(5);
    for name in ["evacuator", "maintenance", "flash-flusher"] {
        while nice_of(name) != Some(want) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(nice_of(name), Some(want), "{name}: {:?}", threads());
    }
    assert_eq!(
        nice_of("worker-0"),
        Some(0),
        "the workers keep the process's"
    );
}
