//! Comparing secrets (tokens, passwords, signatures, one-time codes) without letting the
//! time a comparison takes tell a guesser how much of a guess was right.

use subtle::ConstantTimeEq;

/// Whether `given` equals the secret `expected`, compared in constant time: the time
/// depends on the lengths only, never on where the first difference is. Every check of
/// a credential someone presents goes through here, never through `==`.
pub fn same(given: &[u8], expected: &[u8]) -> bool {
    given.ct_eq(expected).into()
}

#[cfg(test)]
mod tests {
    use super::same;

    #[test]
    fn only_identical_secrets_are_the_same() {
        assert!(same(b"s3cret", b"s3cret"));
        assert!(same(b"", b""));
        assert!(!same(b"s3cre", b"s3cret"));
        assert!(!same(b"s3cretx", b"s3cret"));
        assert!(!same(b"S3cret", b"s3cret"));
        assert!(!same(b"", b"s3cret"));
    }
}
