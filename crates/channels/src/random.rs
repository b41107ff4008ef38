//! Where randomness comes from (restart jitter, pairing codes), passed in so tests can
//! seed it.

/// A source of random 64-bit numbers.
///
/// Any `FnMut() -> u64 + Send` closure is one, so a test can pass `|| 7`.
pub trait RandomSource: Send {
    /// The next random number.
    fn next_u64(&mut self) -> u64;
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
/// generator seeded by the operating system), for pairing codes: a guessable code
/// would let a stranger pair themselves.
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
    fn system_random_varies() {
        let mut source = SystemRandom;
        let values: std::collections::HashSet<u64> = (0..16).map(|_| source.next_u64()).collect();
        assert!(values.len() > 1);
    }
}
