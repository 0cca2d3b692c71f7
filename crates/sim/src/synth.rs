//! Synthetic traces written as oracleGeneral (`tiercache-sim synth`), for speed
//! measurements, smoke tests and comparisons where no real trace is at hand.
//!
//! By default a request picks a Zipf(`--alpha`) rank over `--objects` objects,
//! and every object has a fixed pseudo-random size in one range. Three options
//! make a *trace-like mix* of small objects instead, after what published
//! analyses of production in-memory caches report (Yang, Yue and Rashmi, "A
//! large scale analysis of hundreds of in-memory cache clusters at Twitter",
//! OSDI '20: objects are small, median 230 bytes, popularity is Zipf-like with
//! a large skew, and workloads change over time; the S3-FIFO work by the same
//! group: most objects of skewed workloads are requested once in a short window):
//!
//! - `--sizes` takes weighted ranges (`20..=200:0.7,200..=1000:0.3`): each object
//!   falls in one range, with the weights as odds, and has a fixed size in it;
//! - `--one-hit F`: that fraction of requests goes to a fresh object that is
//!   never requested again (a one-hit wonder);
//! - `--shift N` (with `--shift-by F`): every N requests the popularity ranks
//!   move, so the hot set drifts: each object gets F x `--objects` ranks colder,
//!   and the coldest F of the objects come round as the new hottest.
//!
//! Left at their defaults these options change nothing: the trace is byte for
//! byte what the generator wrote before they existed (a test keeps it so).
//! How much of each a real workload has varies from cluster to cluster; the
//! values of a run are a modelling choice, to be stated with its results.

use anyhow::{bail, Context, Result};
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use tiercache_policy::rng::Rng;

#[derive(clap::Args, Debug)]
pub struct SynthArgs {
    /// Output file (oracleGeneral, uncompressed).
    #[arg(long)]
    pub out: PathBuf,
    /// Distinct objects the Zipf ranks map to (one-hit objects come on top).
    #[arg(long, default_value_t = 1_000_000)]
    pub objects: u64,
    /// Requests.
    #[arg(long, default_value_t = 10_000_000)]
    pub requests: u64,
    /// Zipf skew (0 is uniform).
    #[arg(long, default_value_t = 1.0)]
    pub alpha: f64,
    /// Object sizes in bytes: MIN..=MAX, or weighted ranges
    /// MIN..=MAX:WEIGHT,... (`20..=200:0.7,200..=1000:0.3`; a range without a
    /// weight weighs 1). Every object gets a fixed pseudo-random size: a range
    /// drawn with the weights as odds, then a size in it.
    #[arg(long, default_value = "100..=10000")]
    pub sizes: String,
    /// Fraction of requests (0 to 1) that go to a fresh object, never
    /// requested again: one-hit wonders, on top of the Zipf objects.
    #[arg(long, default_value_t = 0.0)]
    pub one_hit: f64,
    /// Every N requests the Zipf ranks rotate by --shift-by, so that the hot
    /// set drifts (0: never).
    #[arg(long, default_value_t = 0)]
    pub shift: u64,
    /// With --shift: the fraction of --objects a shift moves every object's
    /// rank colder by; the coldest that many objects become the hottest.
    #[arg(long, default_value_t = 0.1)]
    pub shift_by: f64,
    /// Seed of the pseudo-random generator.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
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

/// One `MIN..=MAX` (or `MIN-MAX`) range.
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

/// The size mix of `--sizes`: ranges with the cumulative share of their
/// weights, the last at 1.
struct Sizes {
    ranges: Vec<(u32, u32, f64)>,
}

impl Sizes {
    fn parse(s: &str) -> Result<Sizes> {
        let mut ranges = Vec::new();
        let mut total = 0.0;
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (range, weight) = match part.split_once(':') {
                Some((r, w)) => (r, w.trim().parse::<f64>()?),
                None => (part, 1.0),
            };
            if !(weight > 0.0 && weight.is_finite()) {
                bail!("'{part}': a weight is a positive number");
            }
            let (lo, hi) = size_range(range)?;
            total += weight;
            ranges.push((lo, hi, total));
        }
        if ranges.is_empty() {
            bail!("'{s}': sizes are MIN..=MAX or MIN..=MAX:WEIGHT,...");
        }
        ranges.iter_mut().for_each(|r| r.2 /= total);
        Ok(Sizes { ranges })
    }

    /// The size of object `id`: the id's generator draws the size in its range
    /// first (so one range gives the sizes it always gave), then the range.
    fn of(&self, id: u64) -> u32 {
        let mut r = Rng::new(id);
        let x = r.next_u64();
        let (lo, hi, _) = match self.ranges.as_slice() {
            [one] => *one,
            all => {
                let u = r.unit();
                *all.iter().find(|c| u < c.2).unwrap_or(&all[all.len() - 1])
            }
        };
        lo + (x % (hi - lo + 1) as u64) as u32
    }
}

/// The requests of a [`SynthArgs`], in order: (time, object id, size).
pub struct Requests {
    zipf: Zipf,
    sizes: Sizes,
    rng: Rng,
    objects: u64,
    requests: u64,
    seed: u64,
    one_hit: f64,
    shift: u64,
    /// Ranks a shift moves objects by.
    shift_ranks: u64,
    /// Requests made so far.
    i: u64,
    /// One-hit objects made so far.
    fresh: u64,
}

impl Requests {
    pub fn new(a: &SynthArgs) -> Result<Requests> {
        if a.objects == 0 {
            bail!("--objects must be at least 1");
        }
        if !(0.0..=1.0).contains(&a.one_hit) {
            bail!("--one-hit is a fraction of requests, 0 to 1");
        }
        if !(a.shift_by > 0.0 && a.shift_by <= 1.0) {
            bail!("--shift-by is a fraction of --objects, above 0 and at most 1");
        }
        Ok(Requests {
            zipf: Zipf::new(a.objects, a.alpha),
            sizes: Sizes::parse(&a.sizes)?,
            rng: Rng::new(a.seed),
            objects: a.objects,
            requests: a.requests,
            seed: a.seed,
            one_hit: a.one_hit,
            shift: a.shift,
            shift_ranks: ((a.shift_by * a.objects as f64).round() as u64).max(1),
            i: 0,
            fresh: 0,
        })
    }

    /// The id of the object at place `p`: places are scattered over the id
    /// space so that hot ids are not small numbers. Places at or above
    /// `objects` are one-hit objects; the map is one to one, so their ids are
    /// never a Zipf object's.
    fn id(&self, p: u64) -> u64 {
        p.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ self.seed
    }
}

impl Iterator for Requests {
    type Item = (u32, u64, u32);

    fn next(&mut self) -> Option<(u32, u64, u32)> {
        if self.i == self.requests {
            return None;
        }
        let i = self.i;
        self.i += 1;
        // No draw for one-hit objects unless asked: the default stream stays
        // the one it always was.
        let place = if self.one_hit > 0.0 && self.rng.unit() < self.one_hit {
            self.fresh += 1;
            self.objects + self.fresh - 1
        } else {
            let rank = self.zipf.sample(&mut self.rng);
            // After e shifts the object at place p has rank p + e*K (mod n):
            // each shift makes every object K ranks colder.
            let moved = match self.shift {
                0 => 0,
                n => ((i / n) as u128 * self.shift_ranks as u128 % self.objects as u128) as u64,
            };
            (rank + self.objects - moved) % self.objects
        };
        let id = self.id(place);
        Some(((i / 1000) as u32, id, self.sizes.of(id)))
    }
}

pub fn run(a: &SynthArgs) -> Result<()> {
    let requests = Requests::new(a)?;
    let f = std::fs::File::create(&a.out)
        .with_context(|| format!("cannot create {}", a.out.display()))?;
    let mut w = BufWriter::with_capacity(1 << 20, f);
    for (time, id, size) in requests {
        w.write_all(&time.to_le_bytes())?;
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
    use std::collections::HashMap;

    fn args(objects: u64, requests: u64, alpha: f64, sizes: &str, seed: u64) -> SynthArgs {
        SynthArgs {
            out: PathBuf::new(),
            objects,
            requests,
            alpha,
            sizes: sizes.to_string(),
            one_hit: 0.0,
            shift: 0,
            shift_by: 0.1,
            seed,
        }
    }

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

    /// The generator's loop before --one-hit, --shift and weighted sizes, as it
    /// was: the defaults must give its records byte for byte.
    fn records_before(a: &SynthArgs) -> Vec<(u32, u64, u32)> {
        let (lo, hi) = size_range(&a.sizes).unwrap();
        let zipf = Zipf::new(a.objects, a.alpha);
        let mut rng = Rng::new(a.seed);
        (0..a.requests)
            .map(|i| {
                let rank = zipf.sample(&mut rng);
                let id = rank.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ a.seed;
                let size = lo + (Rng::new(id).next_u64() % (hi - lo + 1) as u64) as u32;
                ((i / 1000) as u32, id, size)
            })
            .collect()
    }

    #[test]
    fn defaults_unchanged() {
        for a in [
            args(1000, 20_000, 1.0, "100..=10000", 1),
            args(50_000, 30_000, 0.9, "90..=130", 7),
            args(10, 5_000, 0.0, "1-1", 3),
        ] {
            let now: Vec<_> = Requests::new(&a).unwrap().collect();
            assert_eq!(now, records_before(&a), "{a:?}");
        }
    }

    #[test]
    fn one_hit_fraction() {
        // 1,000 Zipf objects over 200,000 requests: each is requested tens of
        // times at least, so the ids seen once are the one-hit objects.
        let mut a = args(1000, 200_000, 0.9, "20..=200", 5);
        a.one_hit = 0.2;
        let mut seen: HashMap<u64, u32> = HashMap::new();
        for (_, id, _) in Requests::new(&a).unwrap() {
            *seen.entry(id).or_default() += 1;
        }
        let once = seen.values().filter(|&&n| n == 1).count() as f64 / 200_000.0;
        assert!((once - 0.2).abs() < 0.005, "one-hit share {once}");
        // The Zipf objects are all there, and only they repeat.
        assert_eq!(seen.values().filter(|&&n| n > 1).count(), 1000);
    }

    #[test]
    fn shift_moves_the_hot_set() {
        // 10,000 objects, Zipf 1.0, a shift of 1,000 ranks every 50,000 requests.
        let mut a = args(10_000, 200_000, 1.0, "20..=200", 9);
        a.shift = 50_000;
        a.shift_by = 0.1;
        let r = Requests::new(&a).unwrap();
        let place_id: HashMap<u64, u64> = (0..10_000).map(|p| (r.id(p), p)).collect();
        let all: Vec<_> = r.collect();
        let top = |epoch: usize, k: usize| -> Vec<u64> {
            let mut counts: HashMap<u64, u32> = HashMap::new();
            for (_, id, _) in &all[epoch * 50_000..(epoch + 1) * 50_000] {
                *counts.entry(*id).or_default() += 1;
            }
            let mut v: Vec<_> = counts.into_iter().collect();
            v.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
            v.iter().take(k).map(|(id, _)| place_id[id]).collect()
        };
        for epoch in 0..4 {
            // The hottest object after e shifts is the one at place -e*K.
            let hottest = (10_000 - epoch as u64 * 1000) % 10_000;
            assert_eq!(top(epoch, 1)[0], hottest, "epoch {epoch}");
        }
        // The 100 hottest of one period are at ranks 1,000-1,100 in the next:
        // the hot sets do not overlap.
        for epoch in 0..3 {
            let (a, b) = (top(epoch, 100), top(epoch + 1, 100));
            let common = a.iter().filter(|p| b.contains(p)).count();
            assert!(common <= 2, "epoch {epoch}: {common} in common");
        }
    }

    #[test]
    fn weighted_sizes() {
        let s = Sizes::parse("20..=200:0.7, 200..=1000:0.3").unwrap();
        let sizes: Vec<u32> = (0..100_000u64).map(|id| s.of(id * 7919)).collect();
        assert!(sizes.iter().all(|&z| (20..=1000).contains(&z)));
        let small = sizes.iter().filter(|&&z| z < 200).count() as f64 / 1e5;
        // 0.7 of objects in the first range, 1/181 of them at 200.
        assert!((small - 0.7).abs() < 0.01, "{small}");
        // A plain range, the old dash form, weights without a sum of 1.
        assert_eq!(
            Sizes::parse("90..=130").unwrap().ranges,
            vec![(90, 130, 1.0)]
        );
        assert_eq!(Sizes::parse("5-9").unwrap().ranges, vec![(5, 9, 1.0)]);
        let r = Sizes::parse("1..=2:1,3..=4:3").unwrap().ranges;
        assert_eq!(r, vec![(1, 2, 0.25), (3, 4, 1.0)]);
        for bad in [
            "",
            "1..=2:0",
            "1..=2:-1",
            "1..=2:x",
            "3..=2:1",
            "1..=2,0..=5",
        ] {
            assert!(Sizes::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn bad_options() {
        let mut a = args(100, 10, 1.0, "1..=2", 1);
        a.one_hit = 1.5;
        assert!(Requests::new(&a).is_err());
        a.one_hit = 0.1;
        a.shift_by = 0.0;
        assert!(Requests::new(&a).is_err());
        a.shift_by = 1.0;
        a.objects = 0;
        assert!(Requests::new(&a).is_err());
    }
}
