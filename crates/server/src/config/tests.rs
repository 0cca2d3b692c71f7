//! Flags, options and TOML parsed as memcached users write them.

use super::*;

fn load(argv: &[&str]) -> Result<Config> {
    let mut full = vec!["tiercache"];
    full.extend_from_slice(argv);
    Config::load(&Args::try_parse_from(full)?)
}

#[test]
fn memcached_command_line_works() {
    let c = load(&[
        "-p",
        "22122",
        "-l",
        "0.0.0.0",
        "-t",
        "8",
        "-c",
        "4096",
        "-m",
        "1024",
        "-I",
        "2m",
        "-v",
        "-U",
        "0",
        "-o",
        "hashpower=20,modern",
    ])
    .unwrap();
    assert_eq!(c.server.port, 22122);
    assert_eq!(c.server.listen, "0.0.0.0");
    assert_eq!(c.server.threads, 8);
    assert_eq!(c.server.max_connections, 4096);
    assert_eq!(c.cache.memory_mb, 1024);
    assert_eq!(c.cache.max_item_size, 2 << 20);
    assert_eq!(c.cache.hash_power, 20);
    assert_eq!(c.server.verbosity, 1);
}

#[test]
fn bad_values_are_explained() {
    let e = load(&["-I", "lots"]).unwrap_err().to_string();
    assert!(e.contains("not a size"), "{e}");
    let e = load(&["-o", "frobnicate=1"]).unwrap_err().to_string();
    assert!(e.contains("unknown extended option"), "{e}");
    let e = load(&["-t", "0"]).unwrap_err().to_string();
    assert!(e.contains("-t must be"), "{e}");
    assert!(load(&["-U", "11211"]).is_err());
    let e = load(&["-o", "ext_io=aio"]).unwrap_err().to_string();
    assert!(e.contains("ext_io=aio: choose auto, uring or pool"), "{e}");
}

#[test]
fn dash_d_sets_the_detail_delimiter() {
    let c = load(&[]).unwrap();
    assert!(!c.server.detail_enabled);
    assert_eq!(c.server.detail_delimiter, b':');
    let c = load(&["-D", "/"]).unwrap();
    assert!(c.server.detail_enabled);
    assert_eq!(c.server.detail_delimiter, b'/');
    assert!(load(&["-D", ""]).is_err());
}

#[test]
fn flash_reader_choice() {
    use tiercache_engine::device::io::IoMode;
    assert_eq!(load(&[]).unwrap().io_mode().unwrap(), IoMode::Auto);
    let c = load(&["-o", "ext_io=pool"]).unwrap();
    assert_eq!(c.io_mode().unwrap(), IoMode::Pool);
    let c = load(&["-o", "ext_io=uring"]).unwrap();
    assert_eq!(c.io_mode().unwrap(), IoMode::Uring);
    let c: Config = toml::from_str("[flash]\nio = \"pool\"\n").unwrap();
    assert_eq!(c.io_mode().unwrap(), IoMode::Pool);
}

#[test]
fn toml_round_trip() {
    let c = load(&["-m", "128"]).unwrap();
    let back: Config = toml::from_str(&c.to_toml()).unwrap();
    assert_eq!(back.cache.memory_mb, 128);
    assert!(toml::from_str::<Config>("[cache]\nbogus = 1\n").is_err());
}

/// `[flash]` is one section read into the engine's own settings: its keys
/// land in `TierParams` and `FlashConfig`, a key of neither is refused, and
/// the engine's flash settings are the section's with what its spelled
/// settings name.
#[test]
fn the_flash_section_fills_the_engines_settings() {
    let c: Config = toml::from_str(
        "[flash]\nwbuf_count = 3\nmax_write_wait = 25\nthreads = 2\nsmall_share = 40\npromote = \"never\"\n",
    )
    .unwrap();
    assert_eq!(c.flash.tier.write_buffers, 3);
    assert_eq!(
        c.flash.tier.max_write_wait,
        std::time::Duration::from_millis(25)
    );
    assert_eq!(
        (c.flash.engine.read_threads, c.flash.engine.small_percent),
        (2, 40)
    );
    assert_eq!(c.flash.tier.low_ttl, 3600, "the rest keep their defaults");
    assert!(toml::from_str::<Config>("[flash]\nbogus = 1\n").is_err());
    // From a file, the error names the keys [flash] takes (serde cannot
    // list a flattened section's).
    let dir = std::env::temp_dir().join(format!("tc-bad-flash-key-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("bad.toml");
    std::fs::write(&file, "[flash]\nbogus = 1\n").unwrap();
    let e = format!(
        "{:#}",
        load(&["--config", file.to_str().unwrap()]).unwrap_err()
    );
    assert!(
        e.contains("unknown field `bogus`") && e.contains("max_write_wait, nhc,"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(
        c.engine_flash().unwrap().is_none(),
        "no device, no flash tier"
    );
    let c = load(&[
        "-o",
        "ext_path=/tmp/sec-a:1G:capacity,ext_promote=never,ext_wbuf_count=3",
    ])
    .unwrap();
    let f = c.engine_flash().unwrap().unwrap();
    assert_eq!(f.paths, [("/tmp/sec-a".into(), 1 << 30)]);
    assert_eq!(f.params.classes, [DeviceClass::Capacity]);
    assert_eq!(f.params.promote, Promote::Never);
    assert_eq!(f.params.write_buffers, 3);
    assert_eq!(f.params.segment_size, c.flash_page_size());
    assert_eq!(f.snapshot, Some("/tmp/sec-a.snapshot".into()));
}

#[test]
fn sizes() {
    assert_eq!(parse_size("1m").unwrap(), 1 << 20);
    assert_eq!(parse_size("512k").unwrap(), 512 << 10);
    assert_eq!(parse_size("4MiB").unwrap(), 4 << 20);
    assert_eq!(parse_size("100").unwrap(), 100);
    assert!(parse_size("x").is_err());
}

#[test]
fn ext_path_takes_a_device_class_and_memcached_bucket_names() {
    let c = load(&[
        "-o",
        "ext_path=/tmp/nhc-a:64m:fast,ext_path=/tmp/nhc-b:1G:compact,ext_path=/tmp/nhc-c:1G",
        "-o",
        "ext_path=/tmp/nhc-d:2G:old,ext_nhc=0",
    ])
    .unwrap();
    assert_eq!(
        c.flash_classes().unwrap(),
        [
            DeviceClass::Fast,
            DeviceClass::Capacity,
            DeviceClass::Fast,
            DeviceClass::Capacity
        ]
    );
    let paths = c.flash_paths().unwrap();
    assert_eq!(paths[1], ("/tmp/nhc-b".into(), 1 << 30));
    assert_eq!(paths[3], ("/tmp/nhc-d".into(), 2 << 30));
    assert!(!c.flash.tier.nhc);
    // --print-config shows the classes, and the TOML reads them back.
    let toml = c.to_toml();
    assert!(toml.contains("/tmp/nhc-b:1G:compact"), "{toml}");
    assert!(toml.contains("nhc = false"), "{toml}");
    let back: Config = toml::from_str(&toml).unwrap();
    assert_eq!(back.flash_classes().unwrap(), c.flash_classes().unwrap());
    let e = load(&["-o", "ext_path=/tmp/nhc-e:1G:slow"]).unwrap_err();
    assert!(
        format!("{e:#}").contains("'slow' is not a device class"),
        "{e:#}"
    );
    let e = load(&["-o", "ext_nhc=2"]).unwrap_err().to_string();
    assert!(e.contains("ext_nhc takes 1 or 0"), "{e}");
    assert!(load(&[]).unwrap().flash.tier.nhc);
    // The scheduler's feedback: balance by default, throughput on request,
    // in the TOML too; anything else is refused at start with the choices.
    assert_eq!(c.nhc_feedback().unwrap().name(), "balance");
    assert!(toml.contains("nhc_feedback = \"balance\""), "{toml}");
    let t = load(&["-o", "ext_path=/tmp/nhc-f:1G,ext_nhc_feedback=throughput"]).unwrap();
    assert_eq!(t.nhc_feedback().unwrap().name(), "throughput");
    let e = load(&["-o", "ext_path=/tmp/nhc-g:1G,ext_nhc_feedback=fast"]).unwrap_err();
    assert!(
        format!("{e:#}").contains("ext_nhc_feedback=fast: choose balance or throughput"),
        "{e:#}"
    );
}

#[test]
fn access_flags_parse_as_memcached_writes_them() {
    let c = load(&[
        "-Z",
        "-o",
        "ssl_chain_cert=/c.pem,ssl_key=/k.pem,ssl_ca_cert=/ca.pem,ssl_verify_mode=2,ssl_min_version=3,ssl_wbuf_size=32,ssl_session_cache",
        "-l",
        "127.0.0.1:1,notls:127.0.0.1:2",
    ])
    .unwrap();
    let t = &c.tls;
    assert!(t.enabled && t.session_cache);
    assert_eq!(
        (t.chain_cert.as_str(), t.key.as_str()),
        ("/c.pem", "/k.pem")
    );
    assert_eq!(
        (t.verify_mode, t.min_version, t.wbuf_size),
        (2, 3, 32 << 10)
    );
    let l = c.listen_addrs().unwrap();
    assert_eq!(
        l,
        [
            ("127.0.0.1".into(), 1, true),
            ("127.0.0.1".into(), 2, false)
        ]
    );
    let c = load(&["-s", "/tmp/x.sock", "-a", "0660"]).unwrap();
    assert_eq!(c.server.unix_socket, "/tmp/x.sock");
    assert_eq!(c.server.unix_mask, 0o660);
    assert!(c.listen_addrs().unwrap().is_empty(), "-s: no TCP");
}

#[test]
fn access_flags_not_implemented_or_inconsistent_are_refused() {
    let err = |argv: &[&str]| format!("{:#}", load(argv).unwrap_err());
    let ssl = "ssl_chain_cert=/c.pem";
    for (argv, says) in [
        (vec!["-Z"], "ssl_chain_cert"),
        (vec!["-l", "notls:127.0.0.1"], "only when SSL is enabled"),
        (
            vec!["-Z", "-o", ssl, "-o", "ssl_ciphers=HIGH"],
            "ssl_ciphers is not supported",
        ),
        (
            vec!["-Z", "-o", ssl, "-o", "ssl_kernel_tls"],
            "not supported",
        ),
        (
            vec!["-Z", "-o", ssl, "-o", "ssl_min_version=1"],
            "TLS 1.0 and 1.1",
        ),
        (
            vec!["-Z", "-o", ssl, "-o", "ssl_verify_mode=4"],
            "valid values",
        ),
        (
            vec!["-Z", "-o", ssl, "-o", "ssl_verify_mode=1"],
            "ssl_ca_cert",
        ),
        (vec!["-Z", "-o", ssl, "-o", "ssl_keyformat=2"], "PEM"),
        (vec!["-o", ssl], "add -Z"),
        (
            vec!["-Z", "-o", ssl, "-s", "/tmp/x.sock"],
            "-s disables TCP",
        ),
        (vec!["-S"], "MEMCACHED_SASL_PWDB"),
        (vec!["-S", "-Y", "/nonexistent/auth"], "-S with -Y"),
        (vec!["-Y", "/nonexistent/auth"], "Could not open authfile"),
        (vec!["-s", "/tmp/x.sock", "-a", "999"], "octal"),
    ] {
        let e = err(&argv);
        assert!(e.contains(says), "{argv:?}: {e}");
    }
}

#[test]
fn the_read_depth_is_set_and_checked() {
    assert_eq!(
        load(&[]).unwrap().flash.engine.read_depth,
        64,
        "the default"
    );
    let c = load(&["-o", "ext_read_depth=8", "-t", "3"]).unwrap();
    assert_eq!(c.flash.engine.read_depth, 8);
    let f = c.engine_flash().unwrap().expect("the default flash file");
    assert_eq!(f.read_depth, 8, "handed to the engine");
    assert_eq!(f.readers, 3, "shared by the workers' rings");
    assert_eq!(
        tiercache_engine::device::uring::per_ring(f.read_depth, f.readers),
        3,
        "8 over 3 rings: 3 each"
    );
    let c: Config = toml::from_str("[flash]\nread_depth = 96\n").unwrap();
    assert_eq!(c.flash.engine.read_depth, 96);
    for bad in ["ext_read_depth=0", "ext_read_depth=4097"] {
        let e = format!("{:#}", load(&["-o", bad]).unwrap_err());
        assert!(e.contains("1 to 4096"), "{bad}: {e}");
    }
}

#[test]
fn small_store_options_are_checked() {
    let c = load(&[
        "-o",
        "ext_small_max=512,ext_small_share=80,ext_small_threshold=3",
    ])
    .unwrap();
    assert_eq!(
        (
            c.flash.engine.small_max,
            c.flash.engine.small_percent,
            c.flash.engine.small_threshold
        ),
        (512, 80, 3)
    );
    assert_eq!(
        load(&[]).unwrap().flash.engine.small_threshold,
        2,
        "the default"
    );
    let err = |argv: &[&str]| format!("{:#}", load(argv).unwrap_err());
    for (opt, says) in [
        ("ext_small_threshold=0", "1 to 8"),
        ("ext_small_threshold=9", "1 to 8"),
        ("ext_small_threshold=x", "ext_small_threshold"),
        ("ext_small_share=95", "1 to 90"),
        ("ext_small_log=0", "1 to 50"),
        ("ext_small_log=60", "1 to 50"),
        ("ext_small_max=5000", "4 KiB set"),
    ] {
        let e = err(&["-o", opt]);
        assert!(e.contains(says), "{opt}: {e}");
    }
}

#[test]
fn item_size_limit_up_to_a_gigabyte_as_memcached() {
    // Items above the segment size get a jumbo segment each: -I goes to 1g.
    let c = load(&["-m", "2048", "-I", "1g", "-o", "ext_path=none"]).unwrap();
    assert_eq!(c.cache.max_item_size, 1 << 30);
    assert_eq!(c.effective_segment_size(), MAX_SEGMENT);
    let e = load(&["-m", "4096", "-I", "2g"]).unwrap_err().to_string();
    assert!(e.contains("between 1k and 1g"), "{e}");
    let e = load(&["-I", "512"]).unwrap_err().to_string();
    assert!(e.contains("between 1k and 1g"), "{e}");
    // memcached: "Cannot set item size limit higher than 1/2 of memory max."
    let e = load(&["-m", "16", "-I", "16m", "-o", "ext_path=none"])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("more than half of -m 16") && e.contains("at least 32"),
        "{e}"
    );
    // With a flash tier, RAM segments stay at most 3 MiB (a flash segment
    // holds two): larger items are kept in RAM only.
    let c = load(&["-m", "64", "-I", "16m"]).unwrap();
    assert_eq!(c.effective_segment_size(), MAX_SEGMENT_WITH_FLASH);
    assert_eq!(c.flash_page_size(), 8 << 20);
    let c = load(&["-m", "64", "-I", "2m"]).unwrap();
    assert_eq!(c.effective_segment_size(), 2 << 20, "as before");
    let e = load(&["-o", "segment_size=16m"]).unwrap_err().to_string();
    assert!(e.contains("segment_size must be at most 8m"), "{e}");
}

#[test]
fn every_key_help_lists_is_matched() {
    for (_, keys) in super::OPTION_GROUPS {
        for k in *keys {
            let mut c = Config::default();
            if let Err(e) = c.apply_extended(&format!("{k}=1")) {
                assert!(
                    !format!("{e:#}").contains("unknown extended option"),
                    "{k}: {e:#}"
                );
            }
        }
    }
    let mut c = Config::default();
    let e = c.apply_extended("no_such_key=1").unwrap_err();
    assert!(format!("{e:#}").contains("ext_small_log"), "{e:#}");
}

#[test]
fn the_maintenance_nice_value_is_set_and_checked() {
    assert_eq!(
        load(&[]).unwrap().server.maintenance_nice,
        -10,
        "the default"
    );
    let c = load(&["-o", "maintenance_nice=0"]).unwrap();
    assert_eq!(c.server.maintenance_nice, 0);
    let c: Config = toml::from_str("[server]\nmaintenance_nice = -5\n").unwrap();
    assert_eq!(c.server.maintenance_nice, -5);
    for bad in ["maintenance_nice=20", "maintenance_nice=-21"] {
        let e = format!("{:#}", load(&["-o", bad]).unwrap_err());
        assert!(e.contains("-20 to 19"), "{bad}: {e}");
    }
    let e = format!("{:#}", load(&["-o", "maintenance_nice=high"]).unwrap_err());
    assert!(e.contains("not a nice value"), "{e}");
}
