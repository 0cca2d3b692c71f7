//! memcached's flags that are not about addresses, memory or access:
//! applied (`-F`, `-X`, `-W`, `-B`), accepted with a note in the log that
//! says why they have no effect (`-R`, `-f`, `-n`, `-L`, `-N`), or refused
//! with the reason (`-M`, `-C`, `-e`); never ignored silently.
//! docs/COMPATIBILITY.md lists every flag.

use super::{Args, Config};
use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

/// Which protocols a connection may speak (memcached's `-B`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// Text, meta and binary, told apart by a request's first byte.
    #[default]
    Auto,
    /// Text and meta only: a 0x80 byte starts a text line (as with `-Y`).
    Ascii,
    /// Binary only: a request without the 0x80 magic closes the connection.
    Binary,
}

impl Protocol {
    fn parse(v: &str) -> Result<Protocol> {
        Ok(match v {
            "auto" => Protocol::Auto,
            "ascii" => Protocol::Ascii,
            "binary" => Protocol::Binary,
            _ => bail!("-B {v}: invalid binding protocol; should be one of auto, binary, or ascii"),
        })
    }

    /// memcached's `stats settings` `binding_protocol`.
    pub fn stats_name(self) -> &'static str {
        match self {
            Protocol::Auto => "auto-negotiate",
            Protocol::Ascii => "ascii",
            Protocol::Binary => "binary",
        }
    }
}

impl Config {
    /// The flags of this module, from the command line.
    pub(super) fn apply_memcached_flags(&mut self, args: &Args) -> Result<()> {
        let s = &mut self.server;
        s.disable_flush_all |= args.disable_flush_all;
        s.disable_dumping |= args.disable_dumping;
        s.disable_watch |= args.disable_watch;
        if let Some(p) = &args.protocol {
            s.protocol = Protocol::parse(p)?;
            // memcached refuses -B with the other protocol's authentication
            // (its words), -B auto included.
            if args.enable_sasl && s.protocol != Protocol::Binary {
                bail!("-B {p} with -S: you cannot allow the ASCII protocol while using SASL (-S serves the binary protocol only)");
            }
            if args.auth_file.is_some() && s.protocol != Protocol::Ascii {
                bail!("-B {p} with -Y: you cannot allow the BINARY protocol while using ascii authentication tokens");
            }
        }
        if args.no_evictions {
            bail!("-M (return errors instead of evicting) is not supported: tiercache always evicts, a cache never refuses a set for want of memory; remove -M");
        }
        if args.no_cas {
            bail!("-C (no CAS) is not supported: tiercache keeps a CAS value for every item (gets, cas and the meta commands use it); remove -C");
        }
        if let Some(f) = &args.memory_file {
            bail!(
                "-e {} (memcached's restartable memory file) is not supported: tiercache keeps its items across a restart with the snapshot a clean stop writes next to the flash file (SIGTERM, SIGINT or shutdown; README, Restarts); remove -e",
                f.display()
            );
        }
        let mut notes = Vec::new();
        if let Some(r) = args.reqs_per_event {
            notes.push(format!("-R {r} has no effect: tiercache runs every request a read brought before the next connection's (no per-event limit)"));
        }
        if let Some(f) = args.growth_factor {
            notes.push(format!("-f {f} has no effect: tiercache has no slab classes (items of every size share segments)"));
        }
        if let Some(n) = args.slab_min_size {
            notes.push(format!("-n {n} has no effect: tiercache has no slab classes (items take their own size, 8-byte aligned)"));
        }
        if args.large_pages {
            notes.push(
                "-L has no effect: tiercache does not preallocate its memory in large pages".into(),
            );
        }
        if let Some(n) = &args.napi_ids {
            if n.parse::<u32>().map_or(true, |n| n == 0) {
                bail!("-N {n}: the number of NAPI ids must be a number above 0");
            }
            notes.push(format!("-N {n} has no effect: tiercache's workers share the listening socket and do not pick connections by NAPI id"));
        }
        self.notes.extend(notes);
        Ok(())
    }

    /// The protocols connections may speak: `-B`, or binary only with
    /// `-S` and text only with `-Y`, as memcached.
    pub fn binding_protocol(&self) -> Protocol {
        if self.server.sasl {
            Protocol::Binary
        } else if !self.server.auth_file.is_empty() {
            Protocol::Ascii
        } else {
            self.server.protocol
        }
    }

    /// A file's `protocol` against its authentication settings.
    pub(super) fn validate_protocol(&self) -> Result<()> {
        let s = &self.server;
        match s.protocol {
            Protocol::Ascii if s.sasl => {
                bail!("protocol = \"ascii\" with -S (sasl): -S serves the binary protocol only")
            }
            Protocol::Binary if !s.auth_file.is_empty() => bail!(
                "protocol = \"binary\" with -Y (auth_file): ASCII authentication serves the text protocol only"
            ),
            _ => Ok(()),
        }
    }
}
