//! Parser behaviour on whole requests, and a property test that no input makes
//! it panic or claim more bytes than it was given.

use proptest::prelude::*;
use tiercache_proto::{parse, ErrorReply, Limits, Parsed, Request, StoreMode};

fn req(buf: &[u8]) -> (Request<'_>, usize) {
    match parse(buf, &Limits::default()) {
        Parsed::Request { request, consumed } => (request, consumed),
        other => panic!("expected a request from {:?}, got {:?}", buf, other),
    }
}

fn err_line(buf: &[u8]) -> &'static [u8] {
    match req(buf).0 {
        Request::Error { reply, .. } => reply.line(),
        other => panic!("expected an error, got {other:?}"),
    }
}

#[test]
fn set_with_data() {
    let (r, n) = req(b"set k 5 0 3\r\nabc\r\nget k\r\n");
    assert_eq!(n, 18);
    match r {
        Request::Store(s) => {
            assert_eq!(s.mode, StoreMode::Set);
            assert_eq!(s.key, b"k");
            assert_eq!(s.flags, 5);
            assert_eq!(s.data, b"abc");
            assert!(!s.noreply);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn set_waits_for_whole_block() {
    assert_eq!(
        parse(b"set k 0 0 10\r\nabc", &Limits::default()),
        Parsed::Incomplete { need: Some(26) }
    );
    assert_eq!(
        parse(b"set k 0 0", &Limits::default()),
        Parsed::Incomplete { need: None }
    );
}

#[test]
fn bad_data_chunk_consumes_declared_length() {
    let (r, n) = req(b"set k 0 0 3\r\nabcdef\r\n");
    assert_eq!(n, 18);
    assert_eq!(
        r,
        Request::Error {
            reply: ErrorReply::Client("CLIENT_ERROR bad data chunk"),
            noreply: false
        }
    );
}

#[test]
fn too_large_is_swallowed() {
    let limits = Limits {
        item_size_max: 1024,
        ..Limits::default()
    };
    match parse(b"set k 0 0 5000 noreply\r\n", &limits) {
        Parsed::Swallow {
            request: Request::StoreRefused { noreply, .. },
            consumed,
            skip,
        } => {
            assert!(noreply);
            assert_eq!(consumed, 24);
            assert_eq!(skip, 5002);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn token_count_errors() {
    assert_eq!(err_line(b"set k 0 0\r\n"), b"ERROR");
    assert_eq!(err_line(b"get\r\n"), b"ERROR");
    assert_eq!(err_line(b"\r\n"), b"ERROR");
    assert_eq!(err_line(b"x\r\n"), b"ERROR");
    assert_eq!(err_line(b"bogus a b\r\n"), b"ERROR");
    assert_eq!(err_line(b"incr a\r\n"), b"ERROR");
}

#[test]
fn http_request_lines_hang_up_where_memcached_does() {
    for line in [
        &b"GET / HTTP/1.0\r\n"[..],
        b"HEAD / HTTP/1.1\r\n",
        b"mfoo HTTP/\r\n",
        b"foo HTTP/1.1\0x\r\n",
    ] {
        assert_eq!(req(line).0, Request::HttpHangup, "{line:?}");
    }
    // memcached's branches for these first letters, and commands with
    // replies of their own, come before its HTTP check.
    for line in [
        &b"gfoo HTTP/1.1\r\n"[..],
        b"tfoo HTTP/1.1\r\n",
        b"mx HTTP/1.1\r\n",
        b"lru_crawler HTTP/1.1\r\n",
        b"foo HTTP\r\n",
        b"foo HTTP/1.1 x\r\n",
    ] {
        assert_eq!(err_line(line), b"ERROR", "{line:?}");
    }
    assert!(matches!(req(b"get HTTP/1.1\r\n").0, Request::Get(_)));
}

#[test]
fn key_and_number_errors() {
    let long = format!("get {}\r\n", "a".repeat(251));
    assert_eq!(req(long.as_bytes()).0, Request::GetKeyTooLong);
    let ok = format!("get {}\r\n", "a".repeat(250));
    assert!(matches!(req(ok.as_bytes()).0, Request::Get(_)));
    assert_eq!(
        err_line(b"set k x 0 1\r\n"),
        b"CLIENT_ERROR bad command line format"
    );
    assert_eq!(
        err_line(b"incr k x\r\n"),
        b"CLIENT_ERROR invalid numeric delta argument"
    );
    assert_eq!(
        err_line(b"touch k x\r\n"),
        b"CLIENT_ERROR invalid exptime argument"
    );
}

#[test]
fn noreply_detected_before_validation() {
    assert_eq!(
        req(b"set k 0 0 noreply\r\n").0,
        Request::Error {
            reply: ErrorReply::Client("CLIENT_ERROR bad command line format"),
            noreply: true
        }
    );
}

#[test]
fn multiget_keys() {
    match req(b"gets a  bb ccc\r\n").0 {
        Request::Get(g) => {
            assert!(g.return_cas);
            let keys: Vec<&[u8]> = g.keys().collect();
            assert_eq!(keys, vec![&b"a"[..], b"bb", b"ccc"]);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn many_keys_beyond_token_limit() {
    let keys: Vec<String> = (0..100).map(|i| format!("k{i}")).collect();
    let line = format!("get {}\r\n", keys.join(" "));
    match req(line.as_bytes()).0 {
        Request::Get(g) => assert_eq!(g.keys().count(), 100),
        other => panic!("{other:?}"),
    }
}

#[test]
fn long_garbage_closes() {
    let junk = vec![b'x'; 3000];
    assert_eq!(parse(&junk, &Limits::default()), Parsed::Close);
    let mut get = b"get ".to_vec();
    get.extend(std::iter::repeat_n(b'a', 3000));
    assert_eq!(
        parse(&get, &Limits::default()),
        Parsed::Incomplete { need: None }
    );
}

#[test]
fn meta_set_and_errors() {
    match req(b"ms k 2 T10 F3 c\r\nhi\r\n").0 {
        Request::MetaSet { key, data, flags } => {
            assert_eq!(key.as_ref(), b"k");
            assert_eq!(data, b"hi");
            assert_eq!(flags.ttl, Some(10));
            assert_eq!(flags.client_flags, 3);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        err_line(b"ms k\r\n"),
        b"CLIENT_ERROR bad command line format"
    );
    match parse(b"ms k 2 MZ\r\nhi\r\n", &Limits::default()) {
        Parsed::Swallow { skip, .. } => assert_eq!(skip, 4),
        other => panic!("{other:?}"),
    }
    assert_eq!(err_line(b"mg k v v\r\n"), b"CLIENT_ERROR duplicate flag");
    assert_eq!(
        err_line(b"md k v v\r\n"),
        b"CLIENT_ERROR invalid or duplicate flag"
    );
    assert_eq!(req(b"mn\r\n").0, Request::MetaNoop);
}

proptest! {
    #[test]
    fn never_panics_or_overconsumes(buf in proptest::collection::vec(any::<u8>(), 0..600)) {
        match parse(&buf, &Limits::default()) {
            Parsed::Request { consumed, .. } => prop_assert!(consumed > 0 && consumed <= buf.len()),
            Parsed::Swallow { consumed, .. } => prop_assert!(consumed > 0 && consumed <= buf.len()),
            Parsed::Incomplete { need } => if let Some(n) = need { prop_assert!(n > buf.len()) },
            Parsed::Close => prop_assert!(buf.len() > 2048),
        }
    }

    #[test]
    fn commands_with_random_args(cmd in prop::sample::select(vec!["get","gets","gat","set","add","cas","incr","decr","touch","delete","flush_all","mg","ms","md","ma","me","verbosity","stats"]),
                                 args in proptest::collection::vec("[ -~]{0,12}", 0..8),
                                 tail in proptest::collection::vec(any::<u8>(), 0..40)) {
        let mut buf = format!("{} {}\r\n", cmd, args.join(" ")).into_bytes();
        buf.extend(tail);
        let _ = parse(&buf, &Limits::default());
    }
}
