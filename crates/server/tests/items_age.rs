//! `stats items` `age`: seconds since the last access of the least
//! recently accessed item the next RAM reclaims judge (memcached's LRU
//! tail age), which `memcached-tool display` shows as `Max_age`.

mod common;

use common::process::Proc;
use std::time::Duration;

fn items(p: &Proc) -> String {
    let r = common::process::roundtrip(p.addr, b"stats items\r\n", b"END\r\n").unwrap();
    String::from_utf8(r).unwrap()
}

fn age(p: &Proc) -> u64 {
    let s = items(p);
    common::stat_of(&s, "items:1:age")
        .unwrap_or_else(|| panic!("no items:1:age: {s}"))
        .parse()
        .unwrap()
}

#[test]
fn items_age_grows_while_nothing_is_read_and_drops_when_the_oldest_is() {
    let p = Proc::start(&[]);
    assert!(!items(&p).contains("items:1:"), "no class without items");
    let set = b"set a 0 0 1\r\nv\r\nset b 0 0 1\r\nv\r\n";
    common::process::roundtrip(p.addr, set, b"STORED\r\nSTORED\r\n").unwrap();
    assert!(age(&p) <= 1);
    std::thread::sleep(Duration::from_millis(2200));
    assert!((2..=4).contains(&age(&p)), "{}", items(&p));
    // Reading one leaves the other as old as it was.
    common::process::roundtrip(p.addr, b"get a\r\n", b"END\r\n").unwrap();
    assert!(age(&p) >= 2, "{}", items(&p));
    // Reading both: nothing has waited.
    common::process::roundtrip(p.addr, b"get b\r\n", b"END\r\n").unwrap();
    assert!(age(&p) <= 1, "{}", items(&p));
    // memcached-tool's display shows it as Max_age.
    let tool = "/usr/share/memcached/scripts/memcached-tool";
    if !std::path::Path::new(tool).exists() {
        eprintln!("memcached-tool not installed: display not checked");
        return;
    }
    std::thread::sleep(Duration::from_millis(2200));
    let out = std::process::Command::new("perl")
        .args([tool, &p.addr.to_string(), "display"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let row = text
        .lines()
        .find(|l| l.trim_start().starts_with("1 "))
        .unwrap_or_else(|| panic!("no class 1 in: {text}"));
    // `  #  Item_Size  Max_age   Pages   Count ...`: the third column.
    let max_age = row.split_whitespace().nth(2).unwrap();
    assert!(["2s", "3s", "4s"].contains(&max_age), "{row}\n{text}");
}
