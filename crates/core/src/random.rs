//! Where randomness comes from (jitter, pairing codes, seeded schedule slots), passed in
//! so tests can seed it: the one random source the project uses.

/// A source of random 64-bit numbers.
///
/// Any `FnMut() -> u64 + Send` closure is one, so a test can pass `|| 7`.
pub trait RandomSource: Send {
    /// The next random number.
    fn next_u64(&mut self) -> u64;

    /// A number in `0..bound` (`0` when `bound` is 0), by multiply-shift, whose bias is
    /// negligible for small bounds.
    fn below(&mut self, bound: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(bound)) >> 64) as u64
    }

    /// Fills `bytes` with random bytes (keys, from [`SystemRandom`]).
    fn fill(&mut self, bytes: &mut [u8]) {
        for chunk in bytes.chunks_mut(8) {
            for (byte, random) in chunk.iter_mut().zip(self.next_u64().to_le_bytes()) {
                *byte = random;
            }
        }
    }
}

impl<F: FnMut() -> u64 + Send> RandomSource for F {
    fn next_u64(&mut self) -> u64 {
        self()
    }
}

/// A deterministic generator (SplitMix64) for tests and for jitter, where predictability
/// does no harm. Pairing codes in production should come from [`SystemRandom`].
#[derive(Debug, Clone)]
pub struct SeededRandom {
    state: u64,
}

impl SeededRandom {
    /// A generator whose sequence is fixed by `seed`.
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }
}

impl RandomSource for SeededRandom {
    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut mixed = self.state;
        mixed = (mixed ^ (mixed >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        mixed = (mixed ^ (mixed >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        mixed ^ (mixed >> 31)
    }
}

/// Unpredictable numbers (the random bits of v4 UUIDs, from a cryptographically secure
/// generator seeded by the operating system, the same source as [`crate::ids`]), for
/// pairing codes and keys, where a guessable value would open a door, and for jitter.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemRandom;

impl RandomSource for SystemRandom {
    fn next_u64(&mut self) -> u64 {
        // A v4 UUID fixes 4 version bits in the high half and 2 variant bits in the low
        // half; they sit at different positions, so the XOR has 64 random bits.
        let (high, low) = uuid::Uuid::new_v4().as_u64_pair();
        high ^ low
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_random_repeats_its_sequence_for_a_seed() {
        let mut first = SeededRandom::new(42);
        let mut second = SeededRandom::new(42);
        let mut other = SeededRandom::new(43);
        let first: Vec<u64> = (0..8).map(|_| first.next_u64()).collect();
        let second: Vec<u64> = (0..8).map(|_| second.next_u64()).collect();
        let other: Vec<u64> = (0..8).map(|_| other.next_u64()).collect();
        assert_eq!(first, second);
        assert_ne!(first, other);
    }

    #[test]
    fn closures_are_random_sources() {
        let mut counter = 0_u64;
        let mut source = move || {
            counter += 1;
            counter
        };
        assert_eq!(RandomSource::next_u64(&mut source), 1);
        assert_eq!(RandomSource::next_u64(&mut source), 2);
    }

    #[test]
    fn below_stays_under_its_bound() {
        let mut random = SeededRandom::new(5);
        assert!((0..1000).all(|_| random.below(7) < 7));
        assert_eq!(random.below(0), 0);
        assert_eq!((|| u64::MAX).below(60), 59);
    }

    #[test]
    fn fill_covers_every_byte() {
        let mut bytes = [0_u8; 13];
        (|| u64::MAX).fill(&mut bytes);
        assert_eq!(bytes, [0xFF; 13]);
        let mut key = [0_u8; 64];
        SystemRandom.fill(&mut key);
        assert!(key.iter().filter(|byte| **byte == 0).count() < 16, "{key:?}");
    }

    #[test]
    fn system_random_varies() {
        let mut source = SystemRandom;
        let values: std::collections::HashSet<u64> = (0..16).map(|_| source.next_u64()).collect();
        assert!(values.len() > 1);
    }
}
