//! Human sizes: `134217728`, `128MiB`, `1GiB`, `1.5GB`, `64k`. Suffixes with
//! an `i` and the single letters `k m g t` are powers of 1024 (libCacheSim's
//! `1gb` style included: `kb mb gb tb` in lower case are binary as there);
//! `KB MB GB TB` in capitals are powers of 1000. A size may also be a share of
//! the trace's footprint: `10%`.

use anyhow::{bail, Context, Result};

/// A cache size as written on the command line.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SizeSpec {
    Bytes(u64),
    /// A fraction of the trace's distinct bytes (or objects).
    Fraction(f64),
}

impl SizeSpec {
    pub fn resolve(self, footprint: u64) -> u64 {
        match self {
            SizeSpec::Bytes(b) => b,
            SizeSpec::Fraction(f) => ((footprint as f64) * f).round().max(1.0) as u64,
        }
    }
}

/// Parses a size (see the module docs).
pub fn parse_size(s: &str) -> Result<SizeSpec> {
    let s = s.trim();
    if let Some(p) = s.strip_suffix('%') {
        let f: f64 = p
            .trim()
            .parse()
            .with_context(|| format!("'{s}': not a percentage"))?;
        if !(f > 0.0 && f <= 1000.0) {
            bail!("'{s}': a percentage of the footprint must be above 0");
        }
        return Ok(SizeSpec::Fraction(f / 100.0));
    }
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num.parse().with_context(|| format!("'{s}': not a size"))?;
    let mult: u64 = match unit.trim() {
        "" | "B" | "b" => 1,
        "k" | "K" | "kb" | "KiB" | "kib" | "Ki" => 1 << 10,
        "m" | "M" | "mb" | "MiB" | "mib" | "Mi" => 1 << 20,
        "g" | "G" | "gb" | "GiB" | "gib" | "Gi" => 1 << 30,
        "t" | "T" | "tb" | "TiB" | "tib" | "Ti" => 1 << 40,
        "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        u => bail!("'{s}': unknown unit '{u}' (use B, KiB, MiB, GiB, TiB, KB, MB, GB, TB or %)"),
    };
    let v = n * mult as f64;
    if v < 1.0 {
        bail!("'{s}': a size must be at least 1");
    }
    Ok(SizeSpec::Bytes(v.round() as u64))
}

/// Parses a comma-separated list of sizes.
pub fn parse_sizes(s: &str) -> Result<Vec<SizeSpec>> {
    s.split(',')
        .filter(|p| !p.trim().is_empty())
        .map(parse_size)
        .collect()
}

/// Formats bytes the short way: `128MiB`, `1GiB`, `1536KiB`, `1000`.
pub fn format_size(b: u64) -> String {
    for (unit, shift) in [("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)] {
        if b >= 1 << shift && b % (1 << shift) == 0 {
            return format!("{}{unit}", b >> shift);
        }
    }
    if b >= 10 << 20 {
        return format!("{:.1}MiB", b as f64 / (1u64 << 20) as f64);
    }
    b.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("134217728").unwrap(), SizeSpec::Bytes(134217728));
        assert_eq!(parse_size("128MiB").unwrap(), SizeSpec::Bytes(128 << 20));
        assert_eq!(parse_size("1gb").unwrap(), SizeSpec::Bytes(1 << 30));
        assert_eq!(parse_size("1.5GiB").unwrap(), SizeSpec::Bytes(3 << 29));
        assert_eq!(parse_size("2GB").unwrap(), SizeSpec::Bytes(2_000_000_000));
        assert_eq!(parse_size("10%").unwrap().resolve(1000), 100);
        assert!(parse_size("12 parsecs").is_err());
        assert!(parse_size("0").is_err());
        assert_eq!(parse_sizes("128MiB,1GiB").unwrap().len(), 2);
        assert_eq!(format_size(128 << 20), "128MiB");
        assert_eq!(format_size(3 << 29), "1536MiB");
        assert_eq!(format_size(1000), "1000");
    }
}
