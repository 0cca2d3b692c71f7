//! Device classes end to end (issue 17): a fast and a capacity file, items
//! moved between them and promoted back (each promoted item keeps its
//! capacity record as a copy), then overwrites and deletes, `kill -9`, and
//! a restart: nothing deleted or overwritten comes back, with classic
//! caching (`ext_nhc=0`) and with the scheduler (`ext_nhc=1`).

mod common;

use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

fn value(i: usize) -> String {
    format!("{i:06}-").repeat(130)
}

use common::{connect_port as connect, tx_mn as tx};

fn stat(s: &mut TcpStream, key: &str) -> u64 {
    let all = tx(s, b"stats\r\n");
    common::stat_of(&all, key)
        .unwrap_or_else(|| panic!("no stat {key}"))
        .parse::<f64>()
        .unwrap() as u64
}

fn spawn(dir: &std::path::Path, port: u16, nhc: u8) -> Child {
    Command::new(env!("CARGO_BIN_EXE_tiercache"))
        .args(common::as_root())
        .args(["-p", &port.to_string(), "-m", "32", "-t", "2", "-o"])
        .arg(format!(
            "ext_path={}:48M:fast,ext_path={}:160M:compact,ext_nhc={nhc},ext_promote=never",
            dir.join("fast").display(),
            dir.join("capacity").display()
        ))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn run(nhc: u8) {
    let dir = std::env::temp_dir().join(format!("nhc-e2e-{nhc}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let port = 24100 + (std::process::id() % 40) as u16 * 2 + u16::from(nhc);
    let mut child = spawn(&dir, port, nhc);
    let mut s = connect(port);
    assert_eq!(stat(&mut s, "flash_fast_devices"), 1);
    assert_eq!(stat(&mut s, "flash_capacity_devices"), 1);
    assert_eq!(stat(&mut s, "flash_nhc"), u64::from(nhc));
    let set = |s: &mut TcpStream, k: &str, v: &str| {
        let r = tx(s, format!("set {k} 0 0 {}\r\n{v}\r\n", v.len()).as_bytes());
        assert_eq!(r, "STORED\r\n");
    };
    let n = 30_000;
    for i in 0..n {
        set(&mut s, &format!("a{i}"), &value(i));
    }
    for _ in 0..2 {
        for i in 0..n {
            tx(&mut s, format!("get a{i}\r\n").as_bytes());
        }
    }
    // The fast class fills and reclaims: the hit `a` keys move to capacity.
    for i in 0..60_000 {
        set(&mut s, &format!("b{i}"), &value(i));
    }
    assert!(stat(&mut s, "flash_class_moves") > 1_000);
    assert!(stat(&mut s, "flash_capacity_bytes_written") > 0);
    // Capacity hits: promoted into fast (classic caching always does).
    for i in 0..n {
        tx(&mut s, format!("get a{i}\r\n").as_bytes());
    }
    // The per-class latency sums behind the means (what the balance
    // feedback reads, and samplers difference).
    let all = tx(&mut s, b"stats\r\n");
    let of = |k: &str| common::stat_of(&all, k).unwrap_or_else(|| panic!("no stat {k}"));
    let sum: f64 = of("flash_capacity_read_latency_us_sum").parse().unwrap();
    let reads: f64 = of("flash_capacity_reads").parse().unwrap();
    let mean: f64 = of("flash_capacity_read_latency_us").parse().unwrap();
    assert!(reads > 0.0 && sum > 0.0, "{reads} reads, {sum} us");
    assert!(
        (sum / reads - mean).abs() <= 0.1,
        "{sum} / {reads} against {mean}"
    );
    // The time at the device is a part of it (the rest waited for a reader).
    let device: f64 = of("flash_capacity_device_us_sum").parse().unwrap();
    assert!(device > 0.0 && device <= sum, "device {device} us of {sum}");
    let feedback = if nhc == 1 { "balance" } else { "-" };
    assert_eq!(of("flash_nhc_feedback"), feedback);
    if nhc == 0 {
        assert!(stat(&mut s, "flash_class_promotions") > 1_000);
    }
    assert!(stat(&mut s, "flash_capacity_reads") > 1_000);
    // Overwrite and delete keys whose records may be on both classes.
    for i in 0..3_000 {
        set(&mut s, &format!("a{i}"), &format!("new{i:05}"));
        tx(&mut s, format!("delete a{}\r\n", 3_000 + i).as_bytes());
        tx(&mut s, format!("md a{}\r\n", 6_000 + i).as_bytes());
    }
    std::thread::sleep(Duration::from_millis(1500));
    child.kill().unwrap();
    child.wait().unwrap();
    let mut child = spawn(&dir, port, nhc);
    let mut s = connect(port);
    let mut back = 0;
    for i in 0..n {
        let got = tx(&mut s, format!("get a{i}\r\n").as_bytes());
        if got == "END\r\n" {
            continue;
        }
        match i {
            0..3_000 => assert_eq!(
                got,
                format!("VALUE a{i} 0 8\r\nnew{i:05}\r\nEND\r\n"),
                "a{i} came back with its old value after kill -9 (ext_nhc={nhc})"
            ),
            3_000..9_000 => panic!("a{i} was deleted before kill -9 and came back (ext_nhc={nhc})"),
            _ => {
                let v = value(i);
                assert_eq!(got, format!("VALUE a{i} 0 {}\r\n{v}\r\nEND\r\n", v.len()));
                back += 1;
            }
        }
    }
    eprintln!("ext_nhc={nhc}: {back} of {n} a-keys came back after kill -9");
    child.kill().unwrap();
    child.wait().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn kill_9_with_two_classes_classic() {
    run(0);
}

#[test]
fn kill_9_with_two_classes_nhc() {
    run(1);
}
