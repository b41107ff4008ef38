//! Gateway tokens of people: random, shown once, kept only as a hash.

use sha2::{Digest, Sha256};

use crate::random::RandomSource;

/// What every person's gateway token starts with (tells it apart from the gateway's own).
pub const TOKEN_PREFIX: &str = "sqb_";

/// A new token: the prefix and 32 random bytes in hex.
pub fn new_token(random: &mut dyn RandomSource) -> String {
    let mut bytes = [0_u8; 32];
    random.fill(&mut bytes);
    let hex: String = bytes.iter().map(|byte| format!("{byte:02x}")).collect();
    format!("{TOKEN_PREFIX}{hex}")
}

/// The hash a token is kept and looked up as (SHA-256, hex): tokens are long random
/// strings, so a plain hash is enough and a lookup costs microseconds.
pub fn token_hash(token: &str) -> String {
    Sha256::digest(token.as_bytes()).iter().map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::random::SeededRandom;

    #[test]
    fn tokens_are_long_random_and_hashed_stably() {
        let mut random = SeededRandom::new(1);
        let first = new_token(&mut random);
        let second = new_token(&mut random);
        assert_ne!(first, second);
        assert!(first.starts_with(TOKEN_PREFIX) && first.len() == TOKEN_PREFIX.len() + 64);
        assert_eq!(token_hash(&first), token_hash(&first));
        assert_eq!(token_hash("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }
}
