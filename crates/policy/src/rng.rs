//! A deterministic, non-cryptographic pseudo-random generator for the tests,
//! the simulator and the load generator: the same seed gives the same
//! sequence on every machine and every run, so a failing seeded test or a
//! benchmark's workload can be replayed. Never use it where an attacker may
//! guess the output (it is not a source of secrets or of hash-flood keys).
//!
//! One type, [`Rng`], with a constructor per stream the code base has relied
//! on, each reproducing its sequence exactly (seeded tests keep their keys,
//! the simulator and the load generator their workloads):
//!
//! | constructor | generator | seeding | used by |
//! | --- | --- | --- | --- |
//! | [`Rng::new`] | xorshift64* | seed × golden ratio, low bit set (any seed) | simulator workloads; new code |
//! | [`Rng::from_state`] | xorshift64* | the state as given (not 0) | the crash tests' printed seeds |
//! | [`Rng::xorshift`] | xorshift64 (13, 7, 17), no output multiply | the state as given (not 0) | the engine's crash test |
//! | [`Rng::wyrand`] | wyrand | splitmix64 of the seed (nearby seeds give unrelated streams) | the load generator's workers |
//!
//! [`Rng::below`] maps a draw to `[0, n)` by the remainder (what the tests
//! use), [`Rng::below_mul`] by a multiply and shift, without a division (what
//! the load generator uses); the two give different numbers from the same
//! draw, so a caller keeps the one its figures were made with.

/// The golden ratio as a 64-bit fraction (the seed mix of [`Rng::new`] and
/// the first step of splitmix64 in [`Rng::wyrand`]).
const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// A deterministic pseudo-random generator (see the module's documentation
/// for its streams).
#[derive(Debug, Clone)]
pub struct Rng {
    state: u64,
    step: Step,
}

/// The step function of a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// xorshift64* (Vigna): shifts 12, 25, 27, then a multiply of the output.
    XorShiftStar,
    /// Marsaglia's xorshift64 with shifts 13, 7, 17; the state is the output.
    XorShift,
    /// wyrand (Wang Yi): a Weyl sequence mixed by a 128-bit multiply.
    WyRand,
}

impl Rng {
    /// xorshift64* seeded from any `seed` (0 included): the state is the seed
    /// times the golden ratio with its low bit set, so it is never 0.
    pub fn new(seed: u64) -> Rng {
        Rng::from_state(seed.wrapping_mul(GOLDEN) | 1)
    }

    /// xorshift64* starting at `state` as given. A state of 0 stays 0 (every
    /// draw is 0): callers pass a nonzero seed, or `seed | 1`.
    pub fn from_state(state: u64) -> Rng {
        Rng {
            state,
            step: Step::XorShiftStar,
        }
    }

    /// Marsaglia's xorshift64 (13, 7, 17) starting at `state` as given (not
    /// 0), its output the state itself: a weaker stream than the others,
    /// kept for the seeds recorded with it.
    pub fn xorshift(state: u64) -> Rng {
        Rng {
            state,
            step: Step::XorShift,
        }
    }

    /// wyrand seeded through splitmix64, so that nearby seeds (a run seed
    /// plus a worker's index) give unrelated streams.
    pub fn wyrand(seed: u64) -> Rng {
        let mut z = seed.wrapping_add(GOLDEN);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Rng {
            state: z ^ (z >> 31),
            step: Step::WyRand,
        }
    }

    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        match self.step {
            Step::XorShiftStar => {
                self.state ^= self.state >> 12;
                self.state ^= self.state << 25;
                self.state ^= self.state >> 27;
                self.state.wrapping_mul(0x2545_F491_4F6C_DD1D)
            }
            Step::XorShift => {
                self.state ^= self.state << 13;
                self.state ^= self.state >> 7;
                self.state ^= self.state << 17;
                self.state
            }
            Step::WyRand => {
                self.state = self.state.wrapping_add(0xA076_1D64_78BD_642F);
                let t = u128::from(self.state) * u128::from(self.state ^ 0xE703_7ED1_A0B4_28DB);
                ((t >> 64) as u64) ^ (t as u64)
            }
        }
    }

    /// Uniform in `[0, n)` by the remainder of the next draw (a bias below
    /// `n / 2^64`). `n` must not be 0.
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// Uniform in `[0, n)` by Lemire's multiply and shift: no division, a
    /// bias below `n / 2^64` as well. Not the same numbers as
    /// [`below`](Self::below) from the same draw.
    #[inline]
    pub fn below_mul(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in `[0, 1)`: the top 53 bits of the next draw.
    #[inline]
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Fills `buf` with random bytes, 8 per draw (little-endian; the last
    /// draw's extra bytes are dropped).
    pub fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let v = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Rng;

    // The first draws of each stream, as the copies this type replaced
    // produced them: seeded tests, simulations and benchmark workloads
    // depend on these sequences.

    #[test]
    fn xorshift_star_from_a_state() {
        let mut r = Rng::from_state(7);
        let draws: Vec<u64> = (0..3).map(|_| r.next_u64()).collect();
        assert_eq!(
            draws,
            [
                15_130_880_334_998_875_822,
                17_123_930_943_180_875_438,
                1_648_209_070_578_717_474
            ]
        );
        let below: Vec<u64> = (0..5).map(|_| r.below(1000)).collect();
        assert_eq!(below, [918, 41, 316, 75, 932]);
    }

    #[test]
    fn xorshift_star_from_a_mixed_seed() {
        let mut r = Rng::new(7);
        let draws: Vec<u64> = (0..3).map(|_| r.next_u64()).collect();
        assert_eq!(
            draws,
            [
                7_430_617_906_488_651_703,
                7_486_449_783_762_807_604,
                10_902_827_877_105_278_336
            ]
        );
        assert_eq!(r.unit(), 0.0638743865260113);
        assert_eq!(Rng::new(0).next_u64(), 5_180_492_295_206_395_165);
    }

    #[test]
    fn plain_xorshift() {
        let mut r = Rng::xorshift(7);
        let draws: Vec<u64> = (0..3).map(|_| r.next_u64()).collect();
        assert_eq!(
            draws,
            [
                7_575_888_327,
                8_070_950_887_952_051_652,
                13_931_920_357_059_763_743
            ]
        );
    }

    #[test]
    fn wyrand_from_a_splitmix_seed() {
        let mut r = Rng::wyrand(7);
        let draws: Vec<u64> = (0..3).map(|_| r.next_u64()).collect();
        assert_eq!(
            draws,
            [
                11_503_838_569_593_100_259,
                13_266_022_864_819_509_521,
                4_727_940_415_696_217_066
            ]
        );
        let below: Vec<u64> = (0..5).map(|_| r.below_mul(1000)).collect();
        assert_eq!(below, [884, 809, 696, 489, 330]);
        assert_eq!(r.unit(), 0.20955383218774648);
        let mut buf = [0u8; 11];
        r.fill(&mut buf);
        assert_eq!(buf, [81, 191, 51, 10, 95, 79, 215, 155, 125, 35, 51]);
    }

    #[test]
    fn unit_stays_below_one() {
        let mut r = Rng::new(1);
        assert!((0..10_000)
            .map(|_| r.unit())
            .all(|u| (0.0..1.0).contains(&u)));
    }
}
