//! Gateway authentication: a bearer token compared in constant time, a password checked
//! against an argon2id hash, or none.

use std::num::NonZero;
use std::sync::{Arc, OnceLock};

use argon2::{Algorithm, Argon2, Params, PasswordHash, PasswordHasher as _, PasswordVerifier as _, Version};
use axum::http::HeaderMap;
use blake2::Blake2bMac512;
use blake2::digest::{KeyInit, Mac};
use squidbot_core::random::{RandomSource, SystemRandom};
use squidbot_types::Secret;
use tokio::sync::Semaphore;

/// How clients prove who they are.
#[derive(Debug, Clone)]
pub enum Auth {
    /// `Authorization: Bearer <token>`.
    Token(Secret),
    /// `Authorization: Bearer <password>`, checked against an argon2id hash.
    Password(PasswordVerifier),
    /// No authentication (the binary allows it only on loopback).
    None,
}

impl Auth {
    /// Password mode from an argon2id PHC string; see [`PasswordVerifier::from_phc`].
    pub fn from_password_hash(phc: &str) -> Result<Self, String> {
        PasswordVerifier::from_phc(phc).map(Self::Password)
    }

    /// Hashes `password` for `gateway.auth.password_hash`; see
    /// [`PasswordVerifier::hash_password`].
    pub fn hash_password(password: &str) -> Result<String, String> {
        PasswordVerifier::hash_password(password)
    }

    /// True when the request's headers satisfy this mode.
    ///
    /// In password mode a candidate that is not the remembered accepted password costs a
    /// full argon2id verification on the calling thread; async handlers should prefer
    /// [`Auth::allows_async`].
    pub fn allows(&self, headers: &HeaderMap) -> bool {
        match self {
            Self::None => true,
            Self::Token(_) | Self::Password(_) => bearer(headers).is_some_and(|given| self.check_secret(given)),
        }
    }

    /// [`Auth::allows`] without blocking the async runtime on an argon2id verification.
    pub async fn allows_async(&self, headers: &HeaderMap) -> bool {
        match self {
            Self::None => true,
            Self::Token(_) | Self::Password(_) => match bearer(headers) {
                Some(given) => self.check_secret_async(given.to_owned()).await,
                None => false,
            },
        }
    }

    /// True only in token mode when `given` is the token (compared in constant time).
    pub fn check_token(&self, given: &str) -> bool {
        match self {
            Self::Token(token) => squidbot_core::secrets::same(given.as_bytes(), token.expose().as_bytes()),
            Self::Password(_) | Self::None => false,
        }
    }

    /// True only in password mode when `given` verifies against the argon2id hash.
    /// Blocks for a full verification unless `given` is the remembered accepted
    /// password; async callers should use [`Auth::check_secret_async`].
    pub fn check_password(&self, given: &str) -> bool {
        match self {
            Self::Password(verifier) => verifier.verify(given),
            Self::Token(_) | Self::None => false,
        }
    }

    /// The mode's secret check: the token in token mode, the password in password mode.
    /// Always false in `none` mode, which has no secret to match (use [`Auth::allows`]).
    pub fn check_secret(&self, given: &str) -> bool {
        match self {
            Self::Token(_) => self.check_token(given),
            Self::Password(_) => self.check_password(given),
            Self::None => false,
        }
    }

    /// [`Auth::check_secret`] that runs a password verification on the blocking pool, at
    /// most a few at a time, so neither the runtime's workers nor memory (argon2id holds
    /// its whole memory cost per verification) are exhausted by a burst of guesses.
    pub async fn check_secret_async(&self, given: String) -> bool {
        match self {
            Self::Password(verifier) => verifier.verify_async(given).await,
            Self::Token(_) | Self::None => self.check_secret(&given),
        }
    }

    /// `token`, `password` or `none`, as in `gateway.auth.mode`.
    pub fn mode_name(&self) -> &'static str {
        match self {
            Self::Token(_) => "token",
            Self::Password(_) => "password",
            Self::None => "none",
        }
    }
}

/// The credential of an `Authorization: Bearer …` header.
pub(crate) fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .map(str::trim)
}

/// Checks passwords against one argon2id hash. Cheap to clone: clones share the hash and
/// the memory of the accepted password.
#[derive(Clone)]
pub struct PasswordVerifier {
    state: Arc<VerifierState>,
}

struct VerifierState {
    /// The PHC string, validated at construction.
    phc: Secret,
    /// Random per process, so the remembered digest is useless outside it.
    digest_key: [u8; 64],
    /// Keyed digest of the password that last verified. Argon2id is slow on purpose;
    /// without this every request of a logged-in client would pay for it again.
    accepted: OnceLock<Vec<u8>>,
    /// Bounds concurrent verifications on the async path.
    verifications: Semaphore,
}

impl std::fmt::Debug for PasswordVerifier {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("PasswordVerifier").field("phc", &self.state.phc).finish_non_exhaustive()
    }
}

impl PasswordVerifier {
    /// A verifier for `phc`, an argon2id PHC string (`$argon2id$v=19$m=…,t=…,p=…$salt$hash`).
    /// Rejects anything else, including argon2i/argon2d hashes and strings without a
    /// salt or hash.
    pub fn from_phc(phc: &str) -> Result<Self, String> {
        let phc = phc.trim();
        let parsed = PasswordHash::new(phc).map_err(|error| format!("not a PHC hash string: {error}"))?;
        let algorithm = parsed.algorithm.as_str();
        if algorithm != Algorithm::Argon2id.as_str() {
            return Err(format!("the hash uses {algorithm}; only argon2id is accepted"));
        }
        if parsed.salt.is_none() || parsed.hash.is_none() {
            return Err("the hash string has no salt or no hash value".into());
        }
        if let Some(version) = parsed.version {
            Version::try_from(version).map_err(|error| format!("unsupported argon2 version {version}: {error}"))?;
        }
        Params::try_from(&parsed).map_err(|error| format!("invalid argon2id parameters: {error}"))?;
        let mut digest_key = [0_u8; 64];
        SystemRandom.fill(&mut digest_key);
        let parallel = std::thread::available_parallelism().map_or(2, NonZero::get);
        Ok(Self {
            state: Arc::new(VerifierState {
                phc: Secret::new(phc),
                digest_key,
                accepted: OnceLock::new(),
                verifications: Semaphore::new(parallel),
            }),
        })
    }

    /// Hashes `password` with argon2id, a random salt and the library's recommended
    /// parameters, as a PHC string.
    pub fn hash_password(password: &str) -> Result<String, String> {
        Argon2::default()
            .hash_password(password.as_bytes())
            .map(|hash| hash.to_string())
            .map_err(|error| format!("can't hash the password: {error}"))
    }

    /// True when `given` is the password. Blocks for a full argon2id verification unless
    /// `given` matches the remembered accepted password.
    pub fn verify(&self, given: &str) -> bool {
        if self.is_remembered(given) {
            return true;
        }
        let verified = match PasswordHash::new(self.state.phc.expose()) {
            Ok(hash) => Argon2::default().verify_password(given.as_bytes(), &hash).is_ok(),
            Err(error) => {
                tracing::error!(%error, "the validated password hash no longer parses");
                false
            }
        };
        if verified && let Some(digest) = self.digest(given) {
            self.state.accepted.get_or_init(|| digest);
        }
        verified
    }

    /// [`PasswordVerifier::verify`] off the async runtime's workers: a remembered password
    /// answers at once, anything else waits for a verification slot on the blocking pool.
    pub async fn verify_async(&self, given: String) -> bool {
        if self.is_remembered(&given) {
            return true;
        }
        let Ok(_slot) = self.state.verifications.acquire().await else {
            return false;
        };
        let verifier = self.clone();
        match tokio::task::spawn_blocking(move || verifier.verify(&given)).await {
            Ok(verified) => verified,
            Err(error) => {
                tracing::error!(%error, "the password verification task failed");
                false
            }
        }
    }

    /// Compares `given`'s keyed digest with the accepted one in constant time.
    fn is_remembered(&self, given: &str) -> bool {
        let Some(accepted) = self.state.accepted.get() else {
            return false;
        };
        self.mac(given).is_some_and(|mac| mac.verify_slice(accepted).is_ok())
    }

    fn digest(&self, given: &str) -> Option<Vec<u8>> {
        self.mac(given).map(|mac| mac.finalize().into_bytes().to_vec())
    }

    fn mac(&self, given: &str) -> Option<Blake2bMac512> {
        let mut mac = <Blake2bMac512 as KeyInit>::new_from_slice(&self.state.digest_key).ok()?;
        mac.update(given.as_bytes());
        Some(mac)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real argon2id hash with the smallest parameters, so tests stay fast.
    fn cheap_hash(password: &str) -> String {
        cheap_hasher(Algorithm::Argon2id).hash_password(password.as_bytes()).unwrap().to_string()
    }

    fn cheap_hasher(algorithm: Algorithm) -> Argon2<'static> {
        Argon2::new(algorithm, Version::V0x13, Params::new(Params::MIN_M_COST, 1, 1, None).unwrap())
    }

    fn with_bearer(credential: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert("authorization", format!("Bearer {credential}").parse().unwrap());
        headers
    }

    #[test]
    fn tokens_must_match_exactly() {
        let auth = Auth::Token(Secret::new("s3cret"));
        let mut headers = HeaderMap::new();
        assert!(!auth.allows(&headers));
        headers.insert("authorization", "Bearer s3cret".parse().unwrap());
        assert!(auth.allows(&headers));
        headers.insert("authorization", "Bearer s3cre".parse().unwrap());
        assert!(!auth.allows(&headers));
        headers.insert("authorization", "Bearer s3cretx".parse().unwrap());
        assert!(!auth.allows(&headers));
        assert!(Auth::None.allows(&HeaderMap::new()));
    }

    #[test]
    fn the_right_password_verifies_and_a_wrong_one_does_not() {
        let auth = Auth::from_password_hash(&cheap_hash("correct horse")).unwrap();
        assert_eq!(auth.mode_name(), "password");
        assert!(!auth.check_password("wrong horse"));
        assert!(!auth.check_password(""));
        assert!(auth.check_password("correct horse"));
        assert!(auth.check_secret("correct horse"));
        assert!(auth.allows(&with_bearer("correct horse")));
        assert!(!auth.allows(&with_bearer("correct horsex")));
        assert!(!auth.allows(&HeaderMap::new()));
    }

    #[test]
    fn a_remembered_password_still_rejects_wrong_ones() {
        let auth = Auth::from_password_hash(&cheap_hash("pass phrase")).unwrap();
        assert!(auth.check_password("pass phrase"), "the first success fills the memory");
        for wrong in ["pass phras", "pass phrase ", "Pass phrase", "", "pass phrasepass phrase"] {
            assert!(!auth.check_password(wrong), "{wrong:?}");
        }
        assert!(auth.check_password("pass phrase"), "and it still accepts the right one");
    }

    #[test]
    fn clones_share_the_remembered_password() {
        let auth = Auth::from_password_hash(&cheap_hash("shared")).unwrap();
        let Auth::Password(verifier) = &auth else { panic!("password mode") };
        assert!(!verifier.is_remembered("shared"));
        assert!(auth.clone().check_password("shared"));
        assert!(verifier.is_remembered("shared"));
        assert!(!verifier.is_remembered("other"));
    }

    #[test]
    fn token_mode_rejects_passwords_and_password_mode_rejects_tokens() {
        let token = Auth::Token(Secret::new("same-string"));
        assert!(token.check_token("same-string"));
        assert!(!token.check_password("same-string"));
        assert_eq!(token.mode_name(), "token");
        let password = Auth::from_password_hash(&cheap_hash("same-string")).unwrap();
        assert!(!password.check_token("same-string"));
        assert!(password.check_password("same-string"));
        assert!(!Auth::None.check_secret("same-string"));
        assert_eq!(Auth::None.mode_name(), "none");
    }

    #[test]
    fn only_well_formed_argon2id_hashes_are_accepted() {
        let argon2i = cheap_hasher(Algorithm::Argon2i).hash_password(b"x").unwrap().to_string();
        let error = PasswordVerifier::from_phc(&argon2i).unwrap_err();
        assert!(error.contains("argon2i"), "{error}");
        for garbage in ["", "hunter2", "$argon2id$", "$argon2id$v=19$m=8,t=1,p=1", "$2b$12$abcdefghijklmnopqrstuv"] {
            assert!(PasswordVerifier::from_phc(garbage).is_err(), "{garbage:?}");
        }
        let fine = cheap_hash("x");
        assert!(PasswordVerifier::from_phc(&format!("  {fine}\n")).is_ok(), "surrounding whitespace is trimmed");
    }

    #[test]
    fn hashing_uses_argon2id_and_a_fresh_salt() {
        let first = Auth::hash_password("pw").unwrap();
        let second = Auth::hash_password("pw").unwrap();
        assert!(first.starts_with("$argon2id$v=19$"), "{first}");
        assert_ne!(first, second);
        assert!(PasswordVerifier::from_phc(&first).unwrap().verify("pw"));
    }

    #[test]
    fn the_verifier_never_shows_its_hash() {
        let phc = cheap_hash("x");
        let auth = Auth::from_password_hash(&phc).unwrap();
        let shown = format!("{auth:?}");
        assert!(!shown.contains(&phc[20..]), "{shown}");
    }

    #[tokio::test]
    async fn the_async_check_verifies_off_the_runtime() {
        let auth = Auth::from_password_hash(&cheap_hash("async pw")).unwrap();
        assert!(!auth.check_secret_async("nope".into()).await);
        assert!(auth.check_secret_async("async pw".into()).await);
        assert!(auth.allows_async(&with_bearer("async pw")).await);
        assert!(!auth.allows_async(&with_bearer("async pwx")).await);
        let token = Auth::Token(Secret::new("t"));
        assert!(token.check_secret_async("t".into()).await);
        assert!(!token.check_secret_async("async pw".into()).await);
    }
}
