//! The Redis port on the workers' event loops: CLIENT KILL of another
//! connection, the connection limit, gets served from flash to many
//! connections at once (the worker waits for no read), MULTI/EXEC on one
//! shard and on two, MSET and MSETNX atomic across shards. Real sockets to
//! an in-process server.

mod common;

use common::resp::{cmd, is, pipeline, redis, server_with, tx};
use std::io::{Read, Write};
use std::time::Duration;
use tiercache_server::server::ServerHandle;

#[test]
fn client_kill_closes_another_connection() {
    let h = server_with(|_| {});
    let mut victim = redis(&h);
    is(&mut victim, &["CLIENT", "SETNAME", "victim"], "+OK\r\n");
    tx(&mut victim, &cmd(&["CLIENT", "ID"]), b":");
    let mut id = Vec::new();
    let mut b = [0u8; 1];
    while b[0] != b'\n' {
        victim.read_exact(&mut b).unwrap();
        id.push(b[0]);
    }
    let id = String::from_utf8_lossy(&id).trim().to_string();
    let mut killer = redis(&h);
    is(&mut killer, &["CLIENT", "KILL", "ID", &id], ":1\r\n");
    // The victim is closed without a reply, while it waits in a read.
    let mut rest = Vec::new();
    let n = victim.read_to_end(&mut rest).unwrap_or(0);
    assert_eq!(n, 0, "got {:?}", String::from_utf8_lossy(&rest));
    is(&mut killer, &["PING"], "+PONG\r\n");
    // Gone from the client list.
    let list = pipeline(&mut killer, &[cmd(&["CLIENT", "LIST"])]);
    assert!(!String::from_utf8_lossy(&list[0]).contains("name=victim"));
    // QUIT still answers, then closes.
    tx(&mut killer, &cmd(&["QUIT"]), b"+OK\r\n");
    assert_eq!(killer.read(&mut [0u8; 8]).unwrap(), 0);
}

#[test]
fn connections_over_the_limit_get_redis_error() {
    let h = server_with(|c| c.server.max_connections = 3);
    let mut held: Vec<_> = (0..3).map(|_| redis(&h)).collect();
    for s in &mut held {
        is(s, &["PING"], "+PONG\r\n");
    }
    let mut over = redis(&h);
    let mut got = Vec::new();
    let _ = over.read_to_end(&mut got);
    assert_eq!(
        String::from_utf8_lossy(&got),
        "-ERR max number of clients reached\r\n"
    );
    drop(held.pop());
    // The slot is free again once the server saw the close.
    let ok = (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(20));
        let mut s = redis(&h);
        s.write_all(&cmd(&["PING"])).unwrap();
        let mut r = [0u8; 7];
        s.read_exact(&mut r).is_ok() && &r == b"+PONG\r\n"
    });
    assert!(ok, "no connection accepted after one closed");
}

fn value(i: usize) -> String {
    format!("{i:06}:{}", "f".repeat(1000 + i % 300))
}

/// A server with `-m 48`, `threads` workers and a flash file in a new
/// directory `name`, holding `k0`..`k59999` set to `value(i)` (the oldest
/// on flash by then); a RESP connection to it.
fn flash_server_loaded(
    name: &str,
    threads: usize,
) -> (ServerHandle, std::path::PathBuf, std::net::TcpStream) {
    let dir = common::tempdir(name);
    let path = dir.join("flash");
    let h = server_with(|c| {
        c.cache.memory_mb = 48;
        c.server.threads = threads;
        c.flash.paths = vec![format!("{}:256M", path.display())];
    });
    let mut s = redis(&h);
    for from in (0..60_000).step_by(1000) {
        let cmds: Vec<_> = (from..from + 1000)
            .map(|i| cmd(&["SET", &format!("k{i}"), &value(i)]))
            .collect();
        assert!(pipeline(&mut s, &cmds).iter().all(|r| r == b"+OK"));
    }
    (h, dir, s)
}

#[test]
fn gets_from_flash_on_many_connections() {
    let (h, dir, mut s) = flash_server_loaded("resp-loop-flash", 2);
    // 16 clients read the oldest keys (on flash by now), unpipelined and
    // pipelined, and check every value.
    let clients: Vec<_> = (0..16)
        .map(|t| {
            let mut c = redis(&h);
            std::thread::spawn(move || {
                let mut good = 0;
                for i in (t * 300..t * 300 + 300).step_by(3) {
                    let got = pipeline(&mut c, &[cmd(&["GET", &format!("k{i}")])]);
                    good += usize::from(got[0] == value(i).into_bytes());
                }
                let keys: Vec<String> = (0..100)
                    .map(|j| format!("k{}", 5000 + t * 100 + j))
                    .collect();
                let cmds: Vec<_> = keys.iter().map(|k| cmd(&["GET", k])).collect();
                let got = pipeline(&mut c, &cmds);
                for (j, g) in got.iter().enumerate() {
                    good += usize::from(*g == value(5000 + t * 100 + j).into_bytes());
                }
                let mut args = vec!["MGET".to_string()];
                args.extend((0..20).map(|j| format!("k{}", 7000 + t * 20 + j)));
                let a: Vec<&str> = args.iter().map(String::as_str).collect();
                c.write_all(&cmd(&a)).unwrap();
                let mut head = [0u8; 5];
                c.read_exact(&mut head).unwrap();
                assert_eq!(&head, b"*20\r\n");
                good
            })
        })
        .collect();
    let good: usize = clients.into_iter().map(|c| c.join().unwrap()).sum();
    // Reclaim may have dropped a few of the oldest; nearly all come back.
    assert!(
        good > 16 * 200 * 9 / 10,
        "only {good} of {} values",
        16 * 200
    );
    let info = pipeline(&mut s, &[cmd(&["INFO", "tiercache"])]);
    let info = String::from_utf8_lossy(&info[0]).to_string();
    let hits: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("flash_hits:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no flash_hits in {info}"));
    assert!(hits > 1000, "flash_hits {hits}");
    is(&mut s, &["PING"], "+PONG\r\n");
    // A transaction over old keys of one shard: read from flash first,
    // then run under the shard's hold.
    let e = &h.shared.engine;
    let shard = e.shard_of(b"k10");
    let keys: Vec<usize> = (11..4000)
        .filter(|i| e.shard_of(format!("k{i}").as_bytes()) == shard)
        .take(5)
        .chain([10])
        .collect();
    let mut cmds: Vec<_> = keys
        .iter()
        .map(|i| cmd(&["GET", &format!("k{i}")]))
        .collect();
    cmds.push(cmd(&["APPEND", "k10", "+"]));
    let got = transaction(&mut s, &cmds);
    assert_eq!(got[1 + cmds.len()], format!("*{}", cmds.len()).into_bytes());
    let values = &got[2 + cmds.len()..];
    let good = keys
        .iter()
        .zip(values)
        .filter(|(i, v)| **v == value(**i).into_bytes())
        .count();
    assert!(good >= 5, "{good} of 6 values read back in EXEC");
    let want = format!("{}+", value(10));
    let got = pipeline(&mut s, &[cmd(&["GET", "k10"])]);
    assert_eq!(got[0], want.into_bytes());
    h.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Two keys `{prefix}N` in one engine shard, and one in another.
fn same_and_other(
    h: &tiercache_server::server::ServerHandle,
    prefix: &str,
) -> (String, String, String) {
    let e = &h.shared.engine;
    let a = format!("{prefix}0");
    let shard = e.shard_of(a.as_bytes());
    let find = |same: bool| {
        (1..100_000)
            .map(|i| format!("{prefix}{i}"))
            .find(|k| (e.shard_of(k.as_bytes()) == shard) == same)
            .expect("a key")
    };
    (a, find(true), find(false))
}

/// MULTI, the commands, EXEC: the replies (EXEC's array's elements
/// after its header), `n` of them after the header.
fn transaction(s: &mut std::net::TcpStream, cmds: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut all = vec![cmd(&["MULTI"])];
    all.extend(cmds.iter().cloned());
    all.push(cmd(&["EXEC"]));
    // Each EXEC element is read as one more item.
    all.extend(cmds.iter().map(|_| Vec::new()));
    pipeline(s, &all)
}

/// Counters `a` and `b` incremented together in 2,000 transactions on one
/// connection, while another connection's transactions read them (in the
/// order given by `read`): the reader never sees one moved without the
/// other. `w` is the writer's connection.
fn counters_move_together(
    h: &tiercache_server::server::ServerHandle,
    w: &mut std::net::TcpStream,
    (a, b): (&str, &str),
    read: [String; 2],
) {
    is(w, &["MSET", a, "0", b, "0"], "+OK\r\n");
    let mut r = redis(h);
    let reader = std::thread::spawn(move || {
        for _ in 0..2000 {
            let got = transaction(&mut r, &[cmd(&["GET", &read[0]]), cmd(&["GET", &read[1]])]);
            assert_eq!(got[3], b"*2");
            assert_eq!(got[4], got[5], "a transaction saw half of another");
        }
    });
    for i in 1..=2000 {
        let got = transaction(w, &[cmd(&["INCR", a]), cmd(&["INCR", b])]);
        assert_eq!(got[..4], [&b"+OK"[..], b"+QUEUED", b"+QUEUED", b"*2"]);
        assert_eq!(got[4], format!(":{i}").into_bytes());
        assert_eq!(got[5], format!(":{i}").into_bytes());
    }
    reader.join().unwrap();
}

/// Keys of two shards in one transaction (redis-py's default pipeline is
/// one): EXEC holds both shards, and a reader's transactions over the two
/// never see one counter moved without the other.
#[test]
fn exec_over_two_shards_is_isolated() {
    let h = server_with(|c| c.server.threads = 2);
    let (a, _, other) = same_and_other(&h, "tx2");
    let mut w = redis(&h);
    // The reader names them reversed: the shards are locked in one order.
    counters_move_together(&h, &mut w, (&a, &other), [other.clone(), a.clone()]);
    let got = transaction(&mut w, &[cmd(&["GET", &a]), cmd(&["GET", &other])]);
    assert_eq!(got[3..], [&b"*2"[..], b"2000", b"2000"]);
}

#[test]
fn exec_on_one_shard_is_isolated() {
    let h = server_with(|c| c.server.threads = 2);
    let (a, b, other) = same_and_other(&h, "tx");
    let mut w = redis(&h);
    counters_move_together(&h, &mut w, (&a, &b), [a.clone(), b.clone()]);
    // A command on every shard: refused when queued, then EXECABORT.
    let got = pipeline(
        &mut w,
        &[
            cmd(&["MULTI"]),
            cmd(&["SET", &a, "x"]),
            cmd(&["SET", &other, "y"]),
            cmd(&["DBSIZE"]),
            cmd(&["EXEC"]),
            cmd(&["GET", &a]),
        ],
    );
    assert_eq!(got[..3], [&b"+OK"[..], b"+QUEUED", b"+QUEUED"]);
    assert_eq!(
        got[3],
        b"-CROSSSHARD 'dbsize' works on every shard and cannot run in a MULTI/EXEC transaction"
    );
    assert_eq!(
        got[4],
        b"-EXECABORT Transaction discarded because of previous errors."
    );
    assert_eq!(got[5], b"2000", "nothing of the aborted transaction ran");
    // A transaction of keyless commands, and one key's.
    let got = transaction(&mut w, &[cmd(&["PING"]), cmd(&["SET", &other, "1"])]);
    assert_eq!(got[3..], [&b"*2"[..], b"+PONG", b"+OK"]);
}

/// MSET over keys of two shards holds both while it stores: a reader's
/// transactions (which hold them too, so they read all keys at one
/// moment) never see some of one MSET's keys without the others.
#[test]
fn mset_across_shards_is_atomic() {
    let h = server_with(|c| c.server.threads = 2);
    let (a, b, other) = same_and_other(&h, "ms");
    assert_ne!(
        h.shared.engine.shard_of(a.as_bytes()),
        h.shared.engine.shard_of(other.as_bytes())
    );
    let keys = [a, other, b];
    let mut w = redis(&h);
    is(
        &mut w,
        &["MSET", &keys[0], "0", &keys[1], "0", &keys[2], "0"],
        "+OK\r\n",
    );
    let mut r = redis(&h);
    let read = keys.clone();
    let reader = std::thread::spawn(move || {
        let gets: Vec<Vec<u8>> = read.iter().map(|k| cmd(&["GET", k])).collect();
        for _ in 0..2000 {
            let got = transaction(&mut r, &gets);
            assert_eq!(got[4], b"*3");
            assert!(
                got[5] == got[6] && got[6] == got[7],
                "a reader saw part of an MSET: {:?}",
                &got[5..]
            );
        }
    });
    for i in 1..=2000 {
        let v = i.to_string();
        is(
            &mut w,
            &["MSET", &keys[0], &v, &keys[1], &v, &keys[2], &v],
            "+OK\r\n",
        );
    }
    reader.join().unwrap();
}

/// MSETNX's check and its stores are one step: of two clients racing with
/// the same ten keys (of several shards), exactly one stores, and every
/// key holds its value.
#[test]
fn msetnx_races_have_one_winner() {
    let h = server_with(|c| c.server.threads = 2);
    let rounds = 1000;
    let sets: Vec<Vec<String>> = (0..rounds)
        .map(|i| (0..10).map(|j| format!("nx{i}_{j}")).collect())
        .collect();
    let sets = std::sync::Arc::new(sets);
    let go = std::sync::Arc::new(std::sync::Barrier::new(2));
    let racer = |me: &'static str| {
        let (sets, go, mut s) = (sets.clone(), go.clone(), redis(&h));
        std::thread::spawn(move || {
            let mut won = Vec::new();
            for keys in sets.iter() {
                let mut args = vec!["MSETNX"];
                for k in keys {
                    args.extend([k.as_str(), me]);
                }
                go.wait();
                won.push(pipeline(&mut s, &[cmd(&args)])[0] == b":1");
            }
            won
        })
    };
    let (x, y) = (racer("x"), racer("y"));
    let (x, y) = (x.join().unwrap(), y.join().unwrap());
    let mut s = redis(&h);
    for (i, keys) in sets.iter().enumerate() {
        assert!(x[i] != y[i], "round {i}: x won {}, y won {}", x[i], y[i]);
        let want = if x[i] { "x" } else { "y" };
        let gets: Vec<Vec<u8>> = keys.iter().map(|k| cmd(&["GET", k])).collect();
        let got = pipeline(&mut s, &gets);
        assert!(
            got.iter().all(|v| v == want.as_bytes()),
            "round {i}: {got:?}"
        );
    }
}

/// INCR changes the digits in place (one engine call for both ports):
/// from many RESP connections (pipelined, and inside MULTI/EXEC, which
/// holds the shard) and memcached's `incr` at once, no increment is lost;
/// the item's memcached flags stay.
#[test]
fn increments_from_many_connections_and_both_ports_lose_nothing() {
    let h = server_with(|_| {});
    let mut first = redis(&h);
    is(&mut first, &["SET", "n", "5"], "+OK\r\n");
    let (rounds, per) = (10, 100);
    let mut threads = Vec::new();
    for c in 0..3 {
        let mut s = redis(&h);
        threads.push(std::thread::spawn(move || {
            for _ in 0..rounds {
                let cmds: Vec<_> = (0..per)
                    .map(|i| match (c + i) % 2 {
                        0 => cmd(&["INCR", "n"]),
                        _ => cmd(&["INCRBY", "n", "1"]),
                    })
                    .collect();
                for r in pipeline(&mut s, &cmds) {
                    assert!(r.starts_with(b":"), "{}", String::from_utf8_lossy(&r));
                }
            }
        }));
    }
    let mut s = redis(&h);
    threads.push(std::thread::spawn(move || {
        for _ in 0..rounds * per / 4 {
            let cmds = [
                cmd(&["MULTI"]),
                cmd(&["INCR", "n"]),
                cmd(&["DECRBY", "n", "-3"]),
                cmd(&["EXEC"]),
            ];
            let r = pipeline(&mut s, &cmds);
            assert_eq!(r[3], b"*2", "{:?}", String::from_utf8_lossy(&r[3]));
        }
    }));
    let mut mc = common::Client::new(&h);
    threads.push(std::thread::spawn(move || {
        for _ in 0..rounds * per {
            let r = mc.tx_str(b"incr n 1\r\n");
            assert!(r.trim_end().parse::<u64>().is_ok(), "{r}");
        }
    }));
    for t in threads {
        t.join().unwrap();
    }
    // 5, 3 RESP connections' and memcached's 1 each, EXEC's 4 per round.
    let want = 5 + 3 * rounds * per + rounds * per + rounds * per / 4 * 4;
    is(
        &mut first,
        &["GET", "n"],
        &format!("${}\r\n{want}\r\n", want.to_string().len()),
    );
    let mut mc = common::Client::new(&h);
    assert_eq!(mc.tx_str(b"set f 5 0 2\r\n41\r\n"), "STORED\r\n");
    is(&mut first, &["INCR", "f"], ":42\r\n");
    is(&mut first, &["INCRBY", "f", "958"], ":1000\r\n");
    assert_eq!(mc.tx_str(b"get f\r\n"), "VALUE f 5 4\r\n1000\r\nEND\r\n");
    h.shutdown();
}

/// GETs and MGETs pipelined behind one that waits for flash have their
/// records read ahead (`flash_reads_ahead` counts them), and every reply
/// is the value, in order.
#[test]
fn pipelined_gets_on_flash_are_read_ahead() {
    let (h, dir, mut s) = flash_server_loaded("resp-ahead", 1);
    let ahead = |mc: &mut common::Client| -> u64 {
        let text = mc.tx_str(b"stats\r\n");
        common::stat_of(&text, "flash_reads_ahead")
            .expect("flash_reads_ahead")
            .parse()
            .unwrap()
    };
    let mut mc = common::Client::new(&h);
    let before = ahead(&mut mc);
    // The oldest keys, on flash by now: 300 GETs in one write, with an
    // MGET of three among them every 10.
    let mut cmds = Vec::new();
    let mut want = Vec::new();
    for i in 0..300 {
        cmds.push(cmd(&["GET", &format!("k{i}")]));
        want.push(vec![value(i).into_bytes()]);
        if i % 10 == 9 {
            let keys: Vec<String> = (0..3).map(|j| format!("k{}", 1000 + i * 3 + j)).collect();
            let mut a = vec!["MGET"];
            a.extend(keys.iter().map(String::as_str));
            cmds.push(cmd(&a));
            want.push(
                (0..3)
                    .map(|j| value(1000 + i * 3 + j).into_bytes())
                    .collect(),
            );
        }
    }
    s.write_all(&cmds.concat()).unwrap();
    let mut r = std::io::BufReader::new(s.try_clone().unwrap());
    let mut missing = 0;
    for w in &want {
        for (g, e) in read_bulks(&mut r).iter().zip(w) {
            match g {
                None => missing += 1,
                Some(g) => assert_eq!(g, e, "a value out of order or wrong"),
            }
        }
    }
    // Reclaim may have dropped a few of the oldest.
    assert!(missing < 30, "{missing} of 390 missing");
    let read_ahead = ahead(&mut mc) - before;
    assert!(read_ahead > 50, "only {read_ahead} reads ahead");
    h.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
}

/// One reply: a bulk string, or an array of them (None: a nil).
fn read_bulks(r: &mut impl std::io::BufRead) -> Vec<Option<Vec<u8>>> {
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let (count, mut head) = match line.strip_prefix('*') {
        Some(c) => (c.trim().parse().unwrap(), None),
        None => (1, Some(line.clone())),
    };
    (0..count)
        .map(|_| {
            let line = head.take().unwrap_or_else(|| {
                let mut l = String::new();
                r.read_line(&mut l).unwrap();
                l
            });
            let len: i64 = line.trim_end()[1..].parse().unwrap();
            if len < 0 {
                return None;
            }
            let mut v = vec![0u8; len as usize + 2];
            r.read_exact(&mut v).unwrap();
            v.truncate(len as usize);
            Some(v)
        })
        .collect()
}
