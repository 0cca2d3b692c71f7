//! Synthetic traces: Zipf-distributed object ids written as oracleGeneral, for
//! speed measurements and smoke tests where no real trace is at hand.

use anyhow::{bail, Context, Result};
use std::io::{BufWriter, Write};
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct SynthArgs {
    /// Output file (oracleGeneral, uncompressed).
    #[arg(long)]
    pub out: PathBuf,
    /// Distinct objects.
    #[arg(long, default_value_t = 1_000_000)]
    pub objects: u64,
    /// Requests.
    #[arg(long, default_value_t = 10_000_000)]
    pub requests: u64,
    /// Zipf skew (0 is uniform).
    #[arg(long, default_value_t = 1.0)]
    pub alpha: f64,
    /// Object sizes: every object gets a fixed pseudo-random size in MIN..=MAX bytes.
    #[arg(long, default_value = "100..=10000")]
    pub sizes: String,
    /// Seed of the pseudo-random generator.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// xorshift64*: small, fast, good enough for workload generation.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Zipf(alpha) over ranks 0..n by inverse CDF (binary search in a table).
pub struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    pub fn new(n: u64, alpha: f64) -> Zipf {
        let mut cdf = Vec::with_capacity(n as usize);
        let mut sum = 0.0;
        for k in 1..=n {
            sum += 1.0 / (k as f64).powf(alpha);
            cdf.push(sum);
        }
        cdf.iter_mut().for_each(|c| *c /= sum);
        Zipf { cdf }
    }
    pub fn sample(&self, rng: &mut Rng) -> u64 {
        let u = rng.unit();
        self.cdf.partition_point(|&c| c < u).min(self.cdf.len() - 1) as u64
    }
}

fn size_range(s: &str) -> Result<(u32, u32)> {
    let (a, b) = s
        .split_once("..=")
        .or_else(|| s.split_once('-'))
        .with_context(|| format!("'{s}': sizes are MIN..=MAX"))?;
    let (a, b): (u32, u32) = (a.trim().parse()?, b.trim().parse()?);
    if a == 0 || a > b {
        bail!("'{s}': need 1 <= MIN <= MAX");
    }
    Ok((a, b))
}

pub fn run(a: &SynthArgs) -> Result<()> {
    if a.objects == 0 {
        bail!("--objects must be at least 1");
    }
    let (lo, hi) = size_range(&a.sizes)?;
    let zipf = Zipf::new(a.objects, a.alpha);
    let mut rng = Rng::new(a.seed);
    let f = std::fs::File::create(&a.out)
        .with_context(|| format!("cannot create {}", a.out.display()))?;
    let mut w = BufWriter::with_capacity(1 << 20, f);
    for i in 0..a.requests {
        // Scatter ranks over the id space so that hot ids are not small numbers.
        let rank = zipf.sample(&mut rng);
        let id = rank.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ a.seed;
        let size = lo + (Rng::new(id).next_u64() % (hi - lo + 1) as u64) as u32;
        w.write_all(&((i / 1000) as u32).to_le_bytes())?;
        w.write_all(&id.to_le_bytes())?;
        w.write_all(&size.to_le_bytes())?;
        w.write_all(&(-1i64).to_le_bytes())?;
    }
    w.flush()?;
    eprintln!(
        "wrote {} requests over {} objects to {}",
        a.requests,
        a.objects,
        a.out.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zipf_is_skewed_and_in_range() {
        let z = Zipf::new(1000, 1.0);
        let mut r = Rng::new(7);
        let samples: Vec<u64> = (0..100_000).map(|_| z.sample(&mut r)).collect();
        assert!(samples.iter().all(|&s| s < 1000));
        let top = samples.iter().filter(|&&s| s < 10).count() as f64 / 1e5;
        // H(10)/H(1000) = 2.93/7.49 = 0.39
        assert!((top - 0.39).abs() < 0.02, "{top}");
        assert!(size_range("5..=1").is_err());
    }
}
