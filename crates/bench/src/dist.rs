//! Workload distributions over the shared generator
//! ([`tiercache_policy::rng::Rng`], its wyrand stream): the key
//! choosers (uniform, zipf by rejection-inversion) and value-size
//! distributions (fixed, uniform range, weighted list).

use anyhow::{bail, Context, Result};
use tiercache_policy::rng::Rng;

/// How keys are chosen.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum KeyDist {
    Uniform,
    /// Zipf with the given skew (exponent) `s`: P(rank k) ∝ 1 / k^s.
    Zipf(f64),
}

impl KeyDist {
    pub fn parse(s: &str) -> Result<Self> {
        let s = s.trim();
        if s == "uniform" {
            return Ok(KeyDist::Uniform);
        }
        if s == "zipf" {
            return Ok(KeyDist::Zipf(0.99));
        }
        if let Some(v) = s.strip_prefix("zipf:") {
            let skew: f64 = v.parse().with_context(|| format!("bad zipf skew {v:?}"))?;
            if !(skew > 0.0 && skew.is_finite()) {
                bail!("zipf skew must be > 0, got {skew}");
            }
            return Ok(KeyDist::Zipf(skew));
        }
        bail!("unknown key distribution {s:?} (expected uniform or zipf:SKEW)")
    }

    pub fn describe(&self) -> String {
        match self {
            KeyDist::Uniform => "uniform".into(),
            KeyDist::Zipf(s) => format!("zipf:{s}"),
        }
    }
}

/// Zipf ranks 1..=n by rejection-inversion (Hörmann & Derflinger 1996), as in
/// Apache Commons' `RejectionInversionZipfSampler`: O(1) memory and time,
/// exact for any exponent > 0.
#[derive(Debug, Clone)]
pub struct Zipf {
    n: f64,
    s: f64,
    h_integral_x1: f64,
    h_integral_n: f64,
    sv: f64,
}

impl Zipf {
    pub fn new(n: u64, s: f64) -> Self {
        assert!(n >= 1 && s > 0.0);
        let mut z = Zipf {
            n: n as f64,
            s,
            h_integral_x1: 0.0,
            h_integral_n: 0.0,
            sv: 0.0,
        };
        z.h_integral_x1 = z.h_integral(1.5) - 1.0;
        z.h_integral_n = z.h_integral(z.n + 0.5);
        z.sv = 2.0 - z.h_integral_inv(z.h_integral(2.5) - z.h(2.0));
        z
    }

    /// A rank in `1..=n`; rank 1 is the most popular.
    pub fn sample(&self, rng: &mut Rng) -> u64 {
        loop {
            let u = self.h_integral_n + rng.unit() * (self.h_integral_x1 - self.h_integral_n);
            let x = self.h_integral_inv(u);
            let mut k = (x + 0.5) as u64;
            if k < 1 {
                k = 1;
            } else if k as f64 > self.n {
                k = self.n as u64;
            }
            let kf = k as f64;
            if kf - x <= self.sv || u >= self.h_integral(kf + 0.5) - self.h(kf) {
                return k;
            }
        }
    }

    fn h(&self, x: f64) -> f64 {
        (-self.s * x.ln()).exp()
    }

    fn h_integral(&self, x: f64) -> f64 {
        let log_x = x.ln();
        helper2((1.0 - self.s) * log_x) * log_x
    }

    fn h_integral_inv(&self, x: f64) -> f64 {
        let mut t = x * (1.0 - self.s);
        if t < -1.0 {
            t = -1.0;
        }
        (helper1(t) * x).exp()
    }
}

/// `ln(1+x)/x`, accurate near 0.
fn helper1(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.ln_1p() / x
    } else {
        1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x))
    }
}

/// `(e^x - 1)/x`, accurate near 0.
fn helper2(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + x * 0.5 * (1.0 + x * (1.0 / 3.0) * (1.0 + 0.25 * x))
    }
}

/// Chooses key indices in `[0, n)`. Zipf ranks are scattered over the key
/// space by multiplying with a constant coprime to n (a bijection), so that
/// the hot keys are not simply the first ones the preload wrote.
#[derive(Debug, Clone)]
pub struct KeyChooser {
    n: u64,
    zipf: Option<Zipf>,
    mult: u64,
}

impl KeyChooser {
    pub fn new(n: u64, dist: KeyDist) -> Self {
        assert!(n >= 1);
        let zipf = match dist {
            KeyDist::Uniform => None,
            KeyDist::Zipf(s) => Some(Zipf::new(n, s)),
        };
        let mut mult = 0x9E37_79B9_7F4A_7C15 % n;
        while n > 1 && (mult == 0 || gcd(mult, n) != 1) {
            mult = (mult + 1) % n;
        }
        KeyChooser { n, zipf, mult }
    }

    /// The key index for zipf rank `rank` (0-based).
    #[inline]
    pub fn scatter(&self, rank0: u64) -> u64 {
        ((u128::from(rank0) * u128::from(self.mult)) % u128::from(self.n)) as u64
    }

    #[inline]
    pub fn next(&self, rng: &mut Rng) -> u64 {
        match &self.zipf {
            None => rng.below_mul(self.n),
            Some(z) => self.scatter(z.sample(rng) - 1),
        }
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Value sizes in bytes.
#[derive(Debug, Clone, PartialEq)]
pub enum SizeDist {
    Fixed(usize),
    /// Uniform over `lo..=hi`.
    Uniform(usize, usize),
    /// `(size, cumulative weight)`, weights normalised so the last is 1.
    List(Vec<(usize, f64)>),
}

impl SizeDist {
    /// `32`, `uniform:16-1024`, or `list:100:0.5,1000:0.5`.
    pub fn parse(s: &str) -> Result<Self> {
        let s = s.trim();
        if let Some(r) = s.strip_prefix("uniform:") {
            let (lo, hi) = r
                .split_once('-')
                .with_context(|| format!("expected uniform:LO-HI, got {s:?}"))?;
            let lo: usize = lo.trim().parse().context("bad uniform low bound")?;
            let hi: usize = hi.trim().parse().context("bad uniform high bound")?;
            if lo > hi {
                bail!("uniform size range {lo}-{hi} is empty");
            }
            return Ok(SizeDist::Uniform(lo, hi));
        }
        if let Some(r) = s.strip_prefix("list:") {
            let mut items = Vec::new();
            let mut total = 0.0;
            for part in r.split(',') {
                let (size, w) = part
                    .split_once(':')
                    .with_context(|| format!("expected SIZE:WEIGHT, got {part:?}"))?;
                let size: usize = size.trim().parse().context("bad size in list")?;
                let w: f64 = w.trim().parse().context("bad weight in list")?;
                if !(w >= 0.0 && w.is_finite()) {
                    bail!("weights must be >= 0, got {w}");
                }
                total += w;
                items.push((size, total));
            }
            if items.is_empty() || total <= 0.0 {
                bail!("size list {s:?} needs at least one positive weight");
            }
            for it in &mut items {
                it.1 /= total;
            }
            return Ok(SizeDist::List(items));
        }
        let n: usize = s
            .parse()
            .with_context(|| format!("bad value size {s:?} (N, uniform:LO-HI or list:S:W,...)"))?;
        Ok(SizeDist::Fixed(n))
    }

    #[inline]
    pub fn sample(&self, rng: &mut Rng) -> usize {
        match self {
            SizeDist::Fixed(n) => *n,
            SizeDist::Uniform(lo, hi) => lo + rng.below_mul((hi - lo + 1) as u64) as usize,
            SizeDist::List(items) => {
                let u = rng.unit();
                for &(size, cum) in items {
                    if u < cum {
                        return size;
                    }
                }
                items[items.len() - 1].0
            }
        }
    }

    pub fn max(&self) -> usize {
        match self {
            SizeDist::Fixed(n) => *n,
            SizeDist::Uniform(_, hi) => *hi,
            SizeDist::List(items) => items.iter().map(|i| i.0).max().unwrap_or(0),
        }
    }

    pub fn mean(&self) -> f64 {
        match self {
            SizeDist::Fixed(n) => *n as f64,
            SizeDist::Uniform(lo, hi) => (*lo + *hi) as f64 / 2.0,
            SizeDist::List(items) => {
                let mut prev = 0.0;
                let mut m = 0.0;
                for &(size, cum) in items {
                    m += size as f64 * (cum - prev);
                    prev = cum;
                }
                m
            }
        }
    }

    pub fn describe(&self) -> String {
        match self {
            SizeDist::Fixed(n) => n.to_string(),
            SizeDist::Uniform(lo, hi) => format!("uniform:{lo}-{hi}"),
            SizeDist::List(items) => {
                let mut prev = 0.0;
                let parts: Vec<String> = items
                    .iter()
                    .map(|&(s, c)| {
                        let w = c - prev;
                        prev = c;
                        format!("{s}:{w:.3}")
                    })
                    .collect();
                format!("list:{}", parts.join(","))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn harmonic(n: u64, s: f64) -> f64 {
        (1..=n).map(|k| (k as f64).powf(-s)).sum()
    }

    #[test]
    fn zipf_head_mass_matches_theory() {
        for &(n, s) in &[(1000u64, 0.99), (10_000, 0.8), (100, 1.2), (50_000, 0.5)] {
            let z = Zipf::new(n, s);
            let mut rng = Rng::wyrand(42);
            let draws = 400_000;
            let head = (n / 100).max(1);
            let mut in_head = 0u64;
            let mut rank1 = 0u64;
            for _ in 0..draws {
                let r = z.sample(&mut rng);
                assert!((1..=n).contains(&r));
                if r <= head {
                    in_head += 1;
                }
                if r == 1 {
                    rank1 += 1;
                }
            }
            let total = harmonic(n, s);
            let want_head = harmonic(head, s) / total;
            let got_head = in_head as f64 / draws as f64;
            assert!(
                (got_head - want_head).abs() < 0.01,
                "n={n} s={s}: head mass {got_head} want {want_head}"
            );
            let want1 = 1.0 / total;
            let got1 = rank1 as f64 / draws as f64;
            assert!(
                (got1 - want1).abs() < 0.005 + want1 * 0.05,
                "n={n} s={s}: rank1 {got1} want {want1}"
            );
        }
    }

    #[test]
    fn zipf_chooser_scatters_bijectively() {
        for n in [1u64, 2, 10, 1000, 1024, 99_991] {
            let c = KeyChooser::new(n, KeyDist::Zipf(0.99));
            let mut seen = vec![false; n as usize];
            for r in 0..n {
                let k = c.scatter(r) as usize;
                assert!(!seen[k], "n={n}: collision at rank {r}");
                seen[k] = true;
            }
        }
    }

    #[test]
    fn uniform_keys_cover_the_space_evenly() {
        let n = 100;
        let c = KeyChooser::new(n, KeyDist::Uniform);
        let mut rng = Rng::wyrand(7);
        let mut counts = vec![0u32; n as usize];
        for _ in 0..200_000 {
            counts[c.next(&mut rng) as usize] += 1;
        }
        let (min, max) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
        assert!(*min > 1700 && *max < 2300, "min {min} max {max}");
    }

    #[test]
    fn size_distributions() {
        let mut rng = Rng::wyrand(1);
        assert_eq!(SizeDist::parse("32").unwrap(), SizeDist::Fixed(32));
        let u = SizeDist::parse("uniform:16-1024").unwrap();
        let mut sum = 0usize;
        let mut lo = usize::MAX;
        let mut hi = 0;
        for _ in 0..100_000 {
            let v = u.sample(&mut rng);
            lo = lo.min(v);
            hi = hi.max(v);
            sum += v;
        }
        assert_eq!((lo, hi), (16, 1024));
        let mean = sum as f64 / 100_000.0;
        assert!((mean - u.mean()).abs() < 5.0, "mean {mean}");

        let l = SizeDist::parse("list:100:0.25,1000:0.75").unwrap();
        assert_eq!(l.max(), 1000);
        assert!((l.mean() - 775.0).abs() < 1e-9);
        let n = 100_000;
        let big = (0..n).filter(|_| l.sample(&mut rng) == 1000).count();
        let frac = big as f64 / n as f64;
        assert!((frac - 0.75).abs() < 0.01, "frac {frac}");
        assert!(SizeDist::parse("uniform:10-5").is_err());
        assert!(SizeDist::parse("list:").is_err());
        assert!(SizeDist::parse("abc").is_err());
    }

    #[test]
    fn key_dist_parse() {
        assert_eq!(KeyDist::parse("uniform").unwrap(), KeyDist::Uniform);
        assert_eq!(KeyDist::parse("zipf:1.1").unwrap(), KeyDist::Zipf(1.1));
        assert_eq!(KeyDist::parse("zipf").unwrap(), KeyDist::Zipf(0.99));
        assert!(KeyDist::parse("zipf:-1").is_err());
        assert!(KeyDist::parse("normal").is_err());
    }
}
