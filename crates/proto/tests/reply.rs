//! The typed replies of `tiercache_proto::reply`: the exact bytes of each, as
//! memcached 1.6.18 sends them, and a property test that any reply (and any
//! pipeline of them) encodes and parses back equal.

use proptest::prelude::*;
use std::borrow::Cow;
use tiercache_proto::reply::{
    self, parse_reply, FlagList, MetaCode, MetaDebug, MetaFlag, MetaWriter, Reply,
};
use tiercache_proto::request::errors;
use tiercache_proto::{client, ErrorReply};

fn enc(r: &Reply<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    r.encode(&mut out);
    out
}

/// Encodes, checks the bytes, and checks that they parse back to `r`.
fn pin(r: Reply<'_>, bytes: &[u8]) {
    let out = enc(&r);
    assert_eq!(
        out,
        bytes,
        "{r:?}: {:?}",
        String::from_utf8_lossy(&out).into_owned()
    );
    let (back, used) = parse_reply(&out).unwrap().unwrap();
    assert_eq!(back, r);
    assert_eq!(used, out.len());
}

#[test]
fn classic_bytes() {
    pin(
        Reply::Value {
            key: b"foo",
            flags: 0,
            cas: None,
            data: b"bar",
        },
        b"VALUE foo 0 3\r\nbar\r\n",
    );
    pin(
        Reply::Value {
            key: b"k",
            flags: 5,
            cas: Some(9),
            data: b"ab\r\n",
        },
        b"VALUE k 5 4 9\r\nab\r\n\r\n",
    );
    pin(
        Reply::Value {
            key: b"e",
            flags: u32::MAX,
            cas: Some(0),
            data: b"",
        },
        b"VALUE e 4294967295 0 0\r\n\r\n",
    );
    pin(Reply::End, b"END\r\n");
    pin(Reply::Stored, b"STORED\r\n");
    pin(Reply::NotStored, b"NOT_STORED\r\n");
    pin(Reply::Exists, b"EXISTS\r\n");
    pin(Reply::NotFound, b"NOT_FOUND\r\n");
    pin(Reply::Deleted, b"DELETED\r\n");
    pin(Reply::Touched, b"TOUCHED\r\n");
    pin(Reply::Ok, b"OK\r\n");
    pin(Reply::Reset, b"RESET\r\n");
    pin(Reply::Error, b"ERROR\r\n");
    pin(Reply::ShutdownDisabled, b"ERROR: shutdown not enabled\r\n");
    pin(
        Reply::TooManyConnections,
        b"ERROR Too many open connections\r\n",
    );
    pin(
        Reply::MemlimitTooSmall,
        b"MEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m\r\n",
    );
    pin(
        Reply::MemlimitAdjustFailed,
        b"MEMLIMIT_ADJUST_FAILED out of bounds or unable to adjust\r\n",
    );
    pin(Reply::Number(0), b"0\r\n");
    pin(Reply::Number(u64::MAX), b"18446744073709551615\r\n");
    pin(Reply::Version(b"1.6.18"), b"VERSION 1.6.18\r\n");
    pin(
        Reply::ClientError(b"bad data chunk"),
        b"CLIENT_ERROR bad data chunk\r\n",
    );
    pin(
        Reply::ServerError(b"out of memory storing object"),
        b"SERVER_ERROR out of memory storing object\r\n",
    );
    pin(
        Reply::Stat {
            name: b"pid",
            value: b"1234",
        },
        b"STAT pid 1234\r\n",
    );
    pin(
        Reply::Stat {
            name: b"libevent",
            value: b"2.1.12-stable with spaces",
        },
        b"STAT libevent 2.1.12-stable with spaces\r\n",
    );
    pin(
        Reply::Prefix {
            prefix: b"a",
            get: 2,
            hit: 1,
            set: 1,
            del: 0,
        },
        b"PREFIX a get 2 hit 1 set 1 del 0\r\n",
    );
}

#[test]
fn free_encoders_match() {
    let mut out = Vec::new();
    reply::stat_u64(&mut out, b"curr_items", 42);
    reply::number(&mut out, 7);
    reply::value_header(&mut out, b"k", 1, 2, None);
    reply::data_block(&mut out, b"hi");
    reply::version(&mut out, b"1.6.18");
    reply::client_error(&mut out, b"line too long");
    reply::server_error(&mut out, b"out of memory");
    assert_eq!(
        out,
        &b"STAT curr_items 42\r\n7\r\nVALUE k 1 2\r\nhi\r\nVERSION 1.6.18\r\n\
           CLIENT_ERROR line too long\r\nSERVER_ERROR out of memory\r\n"[..]
    );
}

#[test]
fn parser_error_lines_convert() {
    let all = [
        errors::BAD_FORMAT,
        errors::BAD_CHUNK,
        errors::INVALID_EXPTIME,
        errors::INVALID_DELTA,
        errors::NON_NUMERIC,
        errors::DELETE_USAGE,
    ];
    for s in all {
        let e = ErrorReply::Client(s);
        let mut want = e.line().to_vec();
        want.extend_from_slice(b"\r\n");
        assert_eq!(enc(&Reply::from(e)), want);
    }
    for s in [errors::TOO_LARGE, errors::OUT_OF_MEMORY] {
        let e = ErrorReply::Server(s);
        assert!(matches!(Reply::from(e), Reply::ServerError(_)));
        let mut want = e.line().to_vec();
        want.extend_from_slice(b"\r\n");
        assert_eq!(enc(&Reply::from(e)), want);
    }
    assert_eq!(Reply::from(ErrorReply::Error), Reply::Error);
}

#[test]
fn meta_bytes() {
    pin(Reply::meta(MetaCode::Hd, &[]), b"HD\r\n");
    pin(Reply::meta(MetaCode::En, &[]), b"EN\r\n");
    pin(Reply::meta(MetaCode::Mn, &[]), b"MN\r\n");
    pin(
        Reply::meta(
            MetaCode::Ns,
            &[MetaFlag::Opaque(b"abc"), MetaFlag::key(b"foo", false)],
        ),
        b"NS Oabc kfoo\r\n",
    );
    pin(
        Reply::meta(MetaCode::Hd, &[MetaFlag::Cas(42)]),
        b"HD c42\r\n",
    );
    pin(
        Reply::meta(MetaCode::Ex, &[MetaFlag::Opaque(b"")]),
        b"EX O\r\n",
    );
    pin(
        Reply::meta(MetaCode::Nf, &[MetaFlag::key(b"foo", true)]),
        b"NF kZm9v b\r\n",
    );
    pin(
        Reply::meta(
            MetaCode::Hd,
            &[MetaFlag::TokenSent, MetaFlag::Stale, MetaFlag::Win],
        ),
        b"HD Z X W\r\n",
    );
    let flags = [
        MetaFlag::Size(3),
        MetaFlag::Ttl(None),
        MetaFlag::Cas(9),
        MetaFlag::Flags(5),
        MetaFlag::LastAccess(2),
        MetaFlag::Hit(false),
        MetaFlag::Opaque(b"q"),
        MetaFlag::key(b"foo", false),
    ];
    pin(
        Reply::MetaValue {
            flags: FlagList::Borrowed(&flags),
            data: b"bar",
        },
        b"VA 3 s3 t-1 c9 f5 l2 h0 Oq kfoo\r\nbar\r\n",
    );
    pin(
        Reply::MetaValue {
            flags: FlagList::Borrowed(&[MetaFlag::Ttl(Some(10)), MetaFlag::Hit(true)]),
            data: b"",
        },
        b"VA 0 t10 h1\r\n\r\n",
    );
    pin(
        Reply::MetaDebug(MetaDebug {
            key: b"foo",
            binary: false,
            exp: -1,
            la: 3,
            cas: 7,
            fetch: false,
            cls: 1,
            size: 70,
        }),
        b"ME foo exp=-1 la=3 cas=7 fetch=no cls=1 size=70\r\n",
    );
    pin(
        Reply::MetaDebug(MetaDebug {
            key: b"k",
            binary: false,
            exp: 12,
            la: 0,
            cas: 1,
            fetch: true,
            cls: 1,
            size: 60,
        }),
        b"ME k exp=12 la=0 cas=1 fetch=yes cls=1 size=60\r\n",
    );
}

#[test]
fn binary_meta_debug_key_is_base64_without_b() {
    let d = MetaDebug {
        key: b"foo",
        binary: true,
        exp: -1,
        la: 0,
        cas: 2,
        fetch: false,
        cls: 1,
        size: 64,
    };
    let out = enc(&Reply::MetaDebug(d.clone()));
    assert_eq!(out, b"ME Zm9v exp=-1 la=0 cas=2 fetch=no cls=1 size=64\r\n");
    let (back, _) = parse_reply(&out).unwrap().unwrap();
    assert_eq!(
        back,
        Reply::MetaDebug(MetaDebug {
            key: b"Zm9v",
            binary: false,
            ..d
        })
    );
}

#[test]
fn meta_writer_matches_the_typed_reply() {
    let mut out = Vec::new();
    let mut w = MetaWriter::value(&mut out, 2);
    w.flag(&MetaFlag::Flags(1))
        .flag(&MetaFlag::key(b"\x00\xff", true));
    w.finish_header();
    reply::data_block(&mut out, b"hi");
    let mut w = MetaWriter::new(&mut out, MetaCode::Hd);
    w.flag(&MetaFlag::Win);
    w.finish();
    assert_eq!(out, b"VA 2 f1 kAP8= b\r\nhi\r\nHD W\r\n");
}

#[test]
fn incomplete_and_malformed() {
    assert_eq!(parse_reply(b"").unwrap(), None);
    assert_eq!(parse_reply(b"END").unwrap(), None);
    assert_eq!(parse_reply(b"END\r").unwrap(), None);
    assert_eq!(parse_reply(b"VALUE a 1 3\r\nab").unwrap(), None);
    assert_eq!(parse_reply(b"VALUE a 1 3\r\nabc\r").unwrap(), None);
    assert_eq!(parse_reply(b"VA 3 f1\r\nabc").unwrap(), None);
    for bad in [
        &b"END\n"[..],
        b"BOGUS\r\n",
        b"VALUE a 1 3\r\nabcXY",
        b"VALUE a x 3\r\nabc\r\n",
        b"VALUE a 1 3 7 8\r\nabc\r\n",
        b"VA x\r\n",
        b"HD q\r\n",
        b"HD h2\r\n",
        b"HD t-2\r\n",
        b"HD Wx\r\n",
        b"HD \r\n",
        b"HDX\r\n",
        b"NF k\r\n",
        b"HD k!!! b\r\n",
        b"STAT novalue\r\n",
        b"PREFIX a get 1 hit 1 set 1\r\n",
        b"ME k exp=1 la=2\r\n",
        b"12a\r\n",
    ] {
        assert!(
            parse_reply(bad).is_err(),
            "{:?}",
            String::from_utf8_lossy(bad)
        );
    }
}

// ---- the property test ----

/// A reply with owned parts, to be borrowed as a `Reply`.
#[derive(Debug, Clone)]
enum Owned {
    Value {
        key: Vec<u8>,
        flags: u32,
        cas: Option<u64>,
        data: Vec<u8>,
    },
    Fixed(usize),
    Number(u64),
    Version(Vec<u8>),
    ClientError(Vec<u8>),
    ServerError(Vec<u8>),
    Stat(Vec<u8>, Vec<u8>),
    Prefix(Vec<u8>, [u64; 4]),
    Meta(MetaCode, Vec<OwnedFlag>),
    MetaValue(Vec<OwnedFlag>, Vec<u8>),
    Debug(Vec<u8>, i64, u64, u64, bool, u32, u64),
}

#[derive(Debug, Clone)]
enum OwnedFlag {
    Flag(MetaFlag<'static>),
    Opaque(Vec<u8>),
}

fn flags_of(f: &[OwnedFlag]) -> Vec<MetaFlag<'_>> {
    f.iter()
        .map(|f| match f {
            OwnedFlag::Flag(f) => f.clone(),
            OwnedFlag::Opaque(t) => MetaFlag::Opaque(t),
        })
        .collect()
}

fn borrow(o: &Owned) -> Reply<'_> {
    match o {
        Owned::Value {
            key,
            flags,
            cas,
            data,
        } => Reply::Value {
            key,
            flags: *flags,
            cas: *cas,
            data,
        },
        Owned::Fixed(i) => reply::fixed_replies()
            .into_iter()
            .nth(*i)
            .expect("in range"),
        Owned::Number(n) => Reply::Number(*n),
        Owned::Version(v) => Reply::Version(v),
        Owned::ClientError(m) => Reply::ClientError(m),
        Owned::ServerError(m) => Reply::ServerError(m),
        Owned::Stat(name, value) => Reply::Stat { name, value },
        Owned::Prefix(prefix, [get, hit, set, del]) => Reply::Prefix {
            prefix,
            get: *get,
            hit: *hit,
            set: *set,
            del: *del,
        },
        Owned::Meta(code, f) => Reply::Meta {
            code: *code,
            flags: FlagList::Owned(flags_of(f)),
        },
        Owned::MetaValue(f, data) => Reply::MetaValue {
            flags: FlagList::Owned(flags_of(f)),
            data,
        },
        Owned::Debug(key, exp, la, cas, fetch, cls, size) => Reply::MetaDebug(MetaDebug {
            key,
            binary: false,
            exp: *exp,
            la: *la,
            cas: *cas,
            fetch: *fetch,
            cls: *cls,
            size: *size,
        }),
    }
}

/// A key by memcached's rules: 1 to 250 bytes, no spaces or control characters.
fn key() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(prop_oneof![0x21u8..=0x7e, 0x80u8..=0xff], 1..=250)
}

/// The text of a line: anything but CR and LF.
fn text() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(
        any::<u8>().prop_filter("no CR or LF", |b| *b != b'\r' && *b != b'\n'),
        0..80,
    )
}

fn word(max: usize) -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(0x21u8..=0x7e, 1..=max)
}

fn meta_flag() -> impl Strategy<Value = OwnedFlag> {
    let flag = prop_oneof![
        any::<u64>().prop_map(MetaFlag::Cas),
        any::<u32>().prop_map(MetaFlag::Flags),
        any::<u64>().prop_map(MetaFlag::Size),
        proptest::option::of(any::<u64>()).prop_map(MetaFlag::Ttl),
        any::<u64>().prop_map(MetaFlag::LastAccess),
        any::<bool>().prop_map(MetaFlag::Hit),
        key().prop_map(|k| MetaFlag::Key {
            key: Cow::Owned(k),
            binary: false
        }),
        proptest::collection::vec(any::<u8>(), 1..=187).prop_map(|k| MetaFlag::Key {
            key: Cow::Owned(k),
            binary: true
        }),
        Just(MetaFlag::Win),
        Just(MetaFlag::Stale),
        Just(MetaFlag::TokenSent),
    ];
    prop_oneof![
        4 => flag.prop_map(OwnedFlag::Flag),
        1 => proptest::collection::vec(0x21u8..=0x7e, 0..=32).prop_map(OwnedFlag::Opaque),
    ]
}

fn owned() -> impl Strategy<Value = Owned> {
    let flags = || proptest::collection::vec(meta_flag(), 0..8);
    prop_oneof![
        (
            key(),
            any::<u32>(),
            proptest::option::of(any::<u64>()),
            proptest::collection::vec(any::<u8>(), 0..300)
        )
            .prop_map(|(key, flags, cas, data)| Owned::Value {
                key,
                flags,
                cas,
                data
            }),
        (0..reply::fixed_replies().len()).prop_map(Owned::Fixed),
        any::<u64>().prop_map(Owned::Number),
        text().prop_map(Owned::Version),
        text().prop_map(Owned::ClientError),
        text().prop_map(Owned::ServerError),
        (word(60), text()).prop_map(|(n, v)| Owned::Stat(n, v)),
        (key(), any::<[u64; 4]>()).prop_map(|(p, n)| Owned::Prefix(p, n)),
        (proptest::sample::select(MetaCode::ALL.to_vec()), flags())
            .prop_map(|(c, f)| Owned::Meta(c, f)),
        (flags(), proptest::collection::vec(any::<u8>(), 0..300))
            .prop_map(|(f, d)| Owned::MetaValue(f, d)),
        (
            key(),
            any::<i64>(),
            any::<u64>(),
            any::<u64>(),
            any::<bool>(),
            any::<u32>(),
            any::<u64>()
        )
            .prop_map(|(k, e, l, c, f, cl, s)| Owned::Debug(k, e, l, c, f, cl, s)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// One reply: encodes, parses back equal using every byte, and every
    /// strict prefix of its bytes asks for more.
    #[test]
    fn one_reply_round_trips(o in owned()) {
        let r = borrow(&o);
        let out = enc(&r);
        let (back, used) = parse_reply(&out).unwrap().unwrap();
        prop_assert_eq!(&back, &r);
        prop_assert_eq!(used, out.len());
        for cut in 0..out.len() {
            prop_assert_eq!(parse_reply(&out[..cut]).unwrap(), None, "cut at {}", cut);
        }
        // The loose client parser frames it the same way.
        let (_, client_used) = client::parse_reply(&out).unwrap().unwrap();
        prop_assert_eq!(client_used, out.len());
    }

    /// A pipeline of replies in one buffer parses back reply by reply.
    #[test]
    fn pipeline_round_trips(os in proptest::collection::vec(owned(), 1..10)) {
        let rs: Vec<Reply<'_>> = os.iter().map(borrow).collect();
        let mut out = Vec::new();
        for r in &rs {
            r.encode(&mut out);
        }
        let mut pos = 0;
        for r in &rs {
            let (back, used) = parse_reply(&out[pos..]).unwrap().unwrap();
            prop_assert_eq!(&back, r);
            pos += used;
        }
        prop_assert_eq!(pos, out.len());
        prop_assert_eq!(parse_reply(&out[pos..]).unwrap(), None);
    }

    /// The free meta encoders and the writer give the typed reply's bytes.
    #[test]
    fn meta_encoders_agree(f in proptest::collection::vec(meta_flag(), 0..8),
                           data in proptest::collection::vec(any::<u8>(), 0..50)) {
        let flags = flags_of(&f);
        let typed = enc(&Reply::MetaValue { flags: FlagList::Borrowed(&flags), data: &data });
        let mut free = Vec::new();
        reply::meta_value(&mut free, &flags, &data);
        prop_assert_eq!(&free, &typed);
        let mut w_out = Vec::new();
        let mut w = MetaWriter::value(&mut w_out, data.len());
        for fl in &flags {
            w.flag(fl);
        }
        w.finish_value(&data);
        prop_assert_eq!(&w_out, &typed);
    }
}
