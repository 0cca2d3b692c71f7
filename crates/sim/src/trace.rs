//! Trace readers. A trace is loaded whole into memory, column by column
//! (16 bytes per request, plus one per request when it has operations), so
//! that every (policy, size) job replays it from RAM, in parallel.
//!
//! Formats:
//! - `oracle-general`: libCacheSim's binary format, packed little-endian
//!   24-byte records `{u32 time; u64 id; u32 size; i64 next_access_vtime}`,
//!   plain or zstd-compressed (recognised by its magic number);
//! - `csv`: any delimited text, with the columns named by [`CsvColumns`]
//!   (1-based, as libCacheSim's `-t "obj-id-col=5,..."`), an optional header;
//! - `twitter`: Twitter's cache traces (`timestamp,key,key_size,value_size,
//!   client_id,op,ttl`), an object's size being key size + value size, as
//!   libCacheSim counts it.

use anyhow::{bail, Context, Result};
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

/// What a request does. Only replays that honour operations look at it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Op {
    Get = 0,
    Set = 1,
    Delete = 2,
}

impl Op {
    /// Reads memcached command names, Twitter's op names and SCSI opcodes
    /// (`28` read, `2a` write). Anything else reads as a get.
    pub fn parse(s: &str) -> Op {
        match s.trim().to_ascii_lowercase().as_str() {
            "set" | "add" | "replace" | "cas" | "append" | "prepend" | "incr" | "decr"
            | "write" | "w" | "2a" | "8a" | "0a" => Op::Set,
            "delete" | "del" | "d" => Op::Delete,
            _ => Op::Get,
        }
    }
}

/// A trace in memory, one entry per request in each column.
#[derive(Debug, Default, Clone)]
pub struct Trace {
    pub ids: Vec<u64>,
    pub sizes: Vec<u32>,
    /// Seconds, as the trace gives them.
    pub times: Vec<u32>,
    /// Empty when every request is a get.
    pub ops: Vec<Op>,
}

impl Trace {
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    fn push(&mut self, id: u64, size: u32, time: u32, op: Op) {
        if op != Op::Get || !self.ops.is_empty() {
            self.ops.resize(self.ids.len(), Op::Get);
            self.ops.push(op);
        }
        self.ids.push(id);
        self.sizes.push(size);
        self.times.push(time);
    }

    /// Makes every object one unit large (libCacheSim's `--ignore-obj-size`):
    /// sizes then count objects.
    pub fn ignore_sizes(&mut self) {
        self.sizes.iter_mut().for_each(|s| *s = 1);
    }

    /// Distinct objects and their bytes (each counted at its first size).
    pub fn footprint(&self) -> (u64, u64) {
        let mut seen = tiercache_policy::queue_cache::IdMap::default();
        let mut bytes = 0u64;
        for (&id, &size) in self.ids.iter().zip(&self.sizes) {
            seen.entry(id).or_insert_with(|| {
                bytes += size as u64;
            });
        }
        (seen.len() as u64, bytes)
    }

    /// Total bytes requested.
    pub fn request_bytes(&self) -> u64 {
        self.sizes.iter().map(|&s| s as u64).sum()
    }
}

/// The trace formats [`load`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    OracleGeneral,
    Csv,
    Twitter,
}

/// Where the fields are in a CSV trace: 1-based column numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsvColumns {
    pub key: usize,
    pub size: Option<usize>,
    pub time: Option<usize>,
    pub op: Option<usize>,
    pub ttl: Option<usize>,
    pub delimiter: u8,
    /// `None`: a first line whose key is not a number is taken as a header.
    pub header: Option<bool>,
}

impl Default for CsvColumns {
    fn default() -> Self {
        CsvColumns {
            key: 1,
            size: Some(2),
            time: None,
            op: None,
            ttl: None,
            delimiter: b',',
            header: None,
        }
    }
}

impl CsvColumns {
    /// Parses `key=5,size=4,time=2,op=3,ttl=6,delimiter=tab,header=true`
    /// (libCacheSim's `obj-id-col=` style names are accepted too).
    pub fn parse(spec: &str) -> Result<CsvColumns> {
        let mut c = CsvColumns {
            size: None,
            ..CsvColumns::default()
        };
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .with_context(|| format!("'{part}': expected name=value"))?;
            let col = || -> Result<usize> {
                let n: usize = v
                    .parse()
                    .with_context(|| format!("'{part}': not a column number"))?;
                if n == 0 {
                    bail!("'{part}': columns count from 1");
                }
                Ok(n)
            };
            match k {
                "key" | "id" | "obj-id-col" => c.key = col()?,
                "size" | "obj-size-col" => c.size = Some(col()?),
                "time" | "time-col" => c.time = Some(col()?),
                "op" | "op-col" => c.op = Some(col()?),
                "ttl" | "ttl-col" => c.ttl = Some(col()?),
                "delimiter" => {
                    c.delimiter = match v {
                        "tab" | "\\t" => b'\t',
                        "space" => b' ',
                        d if d.len() == 1 => d.as_bytes()[0],
                        _ => bail!("'{part}': the delimiter is one character, tab or space"),
                    }
                }
                "header" | "has-header" => c.header = Some(matches!(v, "true" | "1" | "yes")),
                _ => bail!(
                    "unknown CSV field '{k}': use key, size, time, op, ttl, delimiter, header"
                ),
            }
        }
        Ok(c)
    }
}

/// Hashes a string key to a 64-bit id (FNV-1a, then mixed).
pub fn hash_key(key: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^ (h >> 33)
}

/// A key as an id: a decimal number is taken as it is, anything else hashed.
fn key_id(key: &str) -> u64 {
    key.parse::<u64>()
        .unwrap_or_else(|_| hash_key(key.as_bytes()))
}

/// Opens a file, decompressing zstd when the file starts with its magic number.
pub fn open(path: &Path) -> Result<Box<dyn Read>> {
    let mut f =
        File::open(path).with_context(|| format!("cannot open trace {}", path.display()))?;
    let mut magic = [0u8; 4];
    let n = f.read(&mut magic)?;
    let f = std::io::Cursor::new(magic[..n].to_vec()).chain(f);
    if n == 4 && magic == [0x28, 0xb5, 0x2f, 0xfd] {
        Ok(Box::new(zstd::stream::read::Decoder::new(f)?))
    } else {
        Ok(Box::new(f))
    }
}

/// Loads a whole trace into memory.
pub fn load(path: &Path, format: Format, csv: &CsvColumns) -> Result<Trace> {
    let r = BufReader::with_capacity(1 << 20, open(path)?);
    match format {
        Format::OracleGeneral => read_oracle_general(r),
        Format::Csv => read_csv(r, csv),
        Format::Twitter => read_twitter(r),
    }
    .with_context(|| format!("reading {}", path.display()))
}

/// Reads oracleGeneral records until the end of the stream.
pub fn read_oracle_general(mut r: impl Read) -> Result<Trace> {
    let mut t = Trace::default();
    let mut buf = vec![0u8; 24 << 14];
    let mut filled = 0usize;
    loop {
        let n = r.read(&mut buf[filled..])?;
        filled += n;
        let whole = filled / 24 * 24;
        for rec in buf[..whole].chunks_exact(24) {
            let time = u32::from_le_bytes(rec[0..4].try_into().unwrap());
            let id = u64::from_le_bytes(rec[4..12].try_into().unwrap());
            let size = u32::from_le_bytes(rec[12..16].try_into().unwrap());
            t.ids.push(id);
            t.sizes.push(size);
            t.times.push(time);
        }
        buf.copy_within(whole..filled, 0);
        filled -= whole;
        if n == 0 {
            if filled != 0 {
                bail!("the trace ends inside a record ({filled} of 24 bytes): not oracleGeneral, or truncated");
            }
            return Ok(t);
        }
    }
}

fn field<'a>(fields: &[&'a str], col: usize, line: usize) -> Result<&'a str> {
    fields
        .get(col - 1)
        .map(|f| f.trim().trim_matches('"'))
        .with_context(|| format!("line {line}: no column {col} (it has {})", fields.len()))
}

fn number<T: std::str::FromStr>(s: &str, what: &str, line: usize) -> Result<T> {
    s.parse()
        .ok()
        .or_else(|| {
            s.parse::<f64>()
                .ok()
                .and_then(|f| f.to_string().parse().ok())
        })
        .with_context(|| format!("line {line}: {what} '{s}' is not a number"))
}

/// Reads a delimited trace with the given columns.
pub fn read_csv(r: impl BufRead, c: &CsvColumns) -> Result<Trace> {
    let mut t = Trace::default();
    let delim = c.delimiter as char;
    for (i, line) in r.lines().enumerate() {
        let line = line?;
        let n = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split(delim).collect();
        if i == 0 {
            let header = match c.header {
                Some(h) => h,
                None => match c.size {
                    Some(col) => field(&fields, col, n)?.parse::<f64>().is_err(),
                    None => false,
                },
            };
            if header {
                continue;
            }
        }
        let id = key_id(field(&fields, c.key, n)?);
        let size = match c.size {
            Some(col) => number::<u32>(field(&fields, col, n)?, "size", n)?,
            None => 1,
        };
        let time = match c.time {
            Some(col) => number::<f64>(field(&fields, col, n)?, "time", n)? as u32,
            None => 0,
        };
        let op = match c.op {
            Some(col) => Op::parse(field(&fields, col, n)?),
            None => Op::Get,
        };
        t.push(id, size, time, op);
    }
    Ok(t)
}

/// Reads Twitter's cache trace CSV (`timestamp,key,key_size,value_size,client_id,op,ttl`).
pub fn read_twitter(r: impl BufRead) -> Result<Trace> {
    let mut t = Trace::default();
    for (i, line) in r.lines().enumerate() {
        let line = line?;
        let n = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split(',').collect();
        if f.len() < 7 {
            bail!(
                "line {n}: a Twitter trace line has 7 fields, this one {}",
                f.len()
            );
        }
        let time: u32 = number(f[0].trim(), "timestamp", n)?;
        let key_size: u32 = number(f[2].trim(), "key size", n)?;
        let value_size: u32 = number(f[3].trim(), "value size", n)?;
        t.push(
            hash_key(f[1].as_bytes()),
            key_size + value_size,
            time,
            Op::parse(f[5]),
        );
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oracle_general_records() {
        let mut b = Vec::new();
        for (time, id, size) in [(1u32, 7u64, 100u32), (2, 8, 200), (3, 7, 100)] {
            b.extend_from_slice(&time.to_le_bytes());
            b.extend_from_slice(&id.to_le_bytes());
            b.extend_from_slice(&size.to_le_bytes());
            b.extend_from_slice(&(-1i64).to_le_bytes());
        }
        let t = read_oracle_general(&b[..]).unwrap();
        assert_eq!(t.ids, vec![7, 8, 7]);
        assert_eq!(t.sizes, vec![100, 200, 100]);
        assert_eq!(t.times, vec![1, 2, 3]);
        assert!(read_oracle_general(&b[..30]).is_err());
        let z = zstd::encode_all(&b[..], 3).unwrap();
        let dir = std::env::temp_dir().join(format!("tcsim-{}.zst", std::process::id()));
        std::fs::write(&dir, z).unwrap();
        let tz = load(&dir, Format::OracleGeneral, &CsvColumns::default()).unwrap();
        std::fs::remove_file(&dir).unwrap();
        assert_eq!(tz.ids, t.ids);
    }

    #[test]
    fn csv_columns_and_header() {
        let c = CsvColumns::parse("time=2,op=3,size=4,key=5").unwrap();
        let text = "version,time,op,size,lbn\n1,10,2a,512,42\n1,11,28,1024,43\n";
        let t = read_csv(text.as_bytes(), &c).unwrap();
        assert_eq!(t.ids, vec![42, 43]);
        assert_eq!(t.sizes, vec![512, 1024]);
        assert_eq!(t.times, vec![10, 11]);
        assert_eq!(t.ops, vec![Op::Set, Op::Get]);
        let tsv = CsvColumns::parse("key=1,delimiter=tab").unwrap();
        let t = read_csv("abc\nabc\n".as_bytes(), &tsv).unwrap();
        assert_eq!(t.ids[0], t.ids[1]);
        assert_eq!(t.sizes, vec![1, 1]);
        assert!(CsvColumns::parse("key=0").is_err());
        assert!(CsvColumns::parse("colour=3").is_err());
        assert!(read_csv(
            "1,x\n".as_bytes(),
            &CsvColumns {
                header: Some(false),
                ..Default::default()
            }
        )
        .is_err());
    }

    #[test]
    fn twitter_lines() {
        let text = "0,q:abc,9,100,1,get,0\n1,q:abc,9,120,1,set,3600\n2,q:zz,4,10,2,delete,0\n";
        let t = read_twitter(text.as_bytes()).unwrap();
        assert_eq!(t.sizes, vec![109, 129, 14]);
        assert_eq!(t.ids[0], t.ids[1]);
        assert_eq!(t.ops, vec![Op::Get, Op::Set, Op::Delete]);
        assert!(read_twitter("1,2,3\n".as_bytes()).is_err());
    }
}
