//! `Vault`: named secrets sealed at rest in the database with XChaCha20-Poly1305 under
//! the vault key, each name bound as associated data, decrypted values cached in memory
//! as redacting `Secret`s.

mod key;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::SystemTime;

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use rusqlite::OptionalExtension;
use squidbot_core::clock::unix_millis;
use squidbot_core::random::{RandomSource, SystemRandom};
use squidbot_core::sync::lock;
use squidbot_types::Secret;

pub use key::{VAULT_KEY_BYTES, VaultKey, VaultKeySource};
#[cfg(feature = "keyring")]
pub use key::{keyring_label, keyring_reachable};

use crate::database::{Database, DatabaseError};

/// Longest secret name, in bytes.
pub const MAX_SECRET_NAME_BYTES: usize = 64;

/// Bytes of a nonce: XChaCha's 24, enough that random nonces never repeat.
const NONCE_BYTES: usize = 24;

/// `last_used_ms` is written at most this often per secret, so reads stay reads.
const LAST_USED_EVERY_MS: i64 = 60_000;

/// `meta` key of the sealed check value that tells a wrong key at open.
pub(crate) const CHECK_META: &str = "vault.check";

/// `meta` key naming where the vault's key came from.
pub(crate) const SOURCE_META: &str = "vault.key_source";

/// Associated data of the check value; no secret name can be empty, so none collides.
const CHECK_NAME: &str = "";

/// What the check value seals.
const CHECK_PLAINTEXT: &[u8] = b"squidbot vault v1";

/// Why the vault could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum VaultError {
    /// A name outside `[A-Za-z0-9_.-]{1,64}`.
    #[error("can't use {name:?} as a secret name: {reason}")]
    InvalidName {
        /// The name given.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// No secret has that name.
    #[error("can't find the secret {name:?} in the vault")]
    NotFound {
        /// The name asked for.
        name: String,
    },
    /// The key does not open this vault.
    #[error(
        "can't unlock the vault: the key does not match (the vault was sealed with a {sealed_with}, this key is a \
         {given})"
    )]
    WrongKey {
        /// What the vault was sealed with (`key file`, `passphrase`).
        sealed_with: String,
        /// What was given.
        given: &'static str,
    },
    /// A stored value failed authentication: its row was altered or moved to another name.
    #[error("can't open the secret {name:?}: its stored value was altered or belongs to another name (refused)")]
    Tampered {
        /// The secret's name.
        name: String,
    },
    /// The key file could not be read or made.
    #[error("can't use the vault key {path}: {reason}")]
    KeyFile {
        /// The key file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// The OS keyring can't be reached, or was not unlocked.
    #[error(
        "can't unlock the vault: {keyring} is not reachable ({reason}); use [vault] key = \"file\" or \"passphrase\""
    )]
    KeyringUnreachable {
        /// Which keyring (`the Secret Service`, `the Keychain`).
        keyring: &'static str,
        /// Why.
        reason: String,
    },
    /// The keyring holds no key for this home, though the vault was sealed with one.
    #[error(
        "can't unlock the vault: {keyring} holds no vault key for {home}, and the vault was sealed with a \
         {sealed_with} (is this another login's keyring, or was the item deleted?); nothing was changed"
    )]
    KeyringKeyMissing {
        /// Which keyring.
        keyring: &'static str,
        /// The home whose key was looked for.
        home: String,
        /// What the vault was sealed with.
        sealed_with: String,
    },
    /// The keyring answered but refused, or keeps something that is not a key.
    #[error("can't use the vault key in {keyring}: {reason}")]
    Keyring {
        /// Which keyring.
        keyring: &'static str,
        /// What went wrong.
        reason: String,
    },
    /// No key could be derived from the passphrase.
    #[error("can't derive the vault key from the passphrase: {reason}")]
    Passphrase {
        /// What went wrong.
        reason: String,
    },
    /// The database failed.
    #[error(transparent)]
    Database(#[from] DatabaseError),
}

/// One secret as listed: its name and dates, never its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VaultEntry {
    /// The secret's name.
    pub name: String,
    /// When it was first stored (Unix milliseconds).
    pub created_ms: i64,
    /// When its value last changed.
    pub updated_ms: i64,
    /// When it was last read, to the minute; `None` until first read.
    pub last_used_ms: Option<i64>,
}

/// A decrypted value and when its use was last written.
struct Cached {
    secret: Secret,
    used_written_ms: i64,
}

/// The vault over the shared database, unlocked. Calls block.
pub struct Vault {
    database: Database,
    cipher: XChaCha20Poly1305,
    cache: Mutex<HashMap<String, Cached>>,
}

impl std::fmt::Debug for Vault {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Vault").field("database", &self.database).finish_non_exhaustive()
    }
}

/// Checks a secret name: `[A-Za-z0-9_.-]{1,64}`.
pub fn check_secret_name(name: &str) -> Result<(), VaultError> {
    let invalid = |reason: &str| Err(VaultError::InvalidName { name: name.to_owned(), reason: reason.to_owned() });
    if name.is_empty() {
        return invalid("it is empty");
    }
    if name.len() > MAX_SECRET_NAME_BYTES {
        return invalid("it is longer than 64 characters");
    }
    if !name.bytes().all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'.' | b'-')) {
        return invalid("only letters, digits, `_`, `.` and `-` are allowed");
    }
    Ok(())
}

fn now_ms() -> i64 {
    unix_millis(SystemTime::now())
}

impl Vault {
    /// Unlocks the vault in `database` with `key`. The first key used seals a check value;
    /// a later different key is refused here, before any secret is read.
    pub fn open(database: Database, key: &VaultKey) -> Result<Vault, VaultError> {
        let cipher = XChaCha20Poly1305::new(key.bytes().into());
        let vault = Vault { database, cipher, cache: Mutex::new(HashMap::new()) };
        match vault.database.meta(CHECK_META)? {
            Some(text) => {
                let opened = key::unhex(text.trim())
                    .filter(|sealed| sealed.len() > NONCE_BYTES)
                    .and_then(|sealed| vault.open_sealed(CHECK_NAME, &sealed[..NONCE_BYTES], &sealed[NONCE_BYTES..]));
                if opened.as_deref() != Some(CHECK_PLAINTEXT) {
                    let sealed_with = vault.database.meta(SOURCE_META)?.unwrap_or_else(|| "different key".to_owned());
                    return Err(VaultError::WrongKey { sealed_with, given: key.source().as_str() });
                }
            }
            None => {
                let (nonce, sealed) = vault.seal(CHECK_NAME, CHECK_PLAINTEXT)?;
                vault.database.set_meta(SOURCE_META, key.source().as_str())?;
                vault.database.set_meta(CHECK_META, &key::hex(&[nonce.as_slice(), &sealed].concat()))?;
            }
        }
        Ok(vault)
    }

    fn seal(&self, name: &str, value: &[u8]) -> Result<([u8; NONCE_BYTES], Vec<u8>), VaultError> {
        let mut nonce = [0_u8; NONCE_BYTES];
        SystemRandom.fill(&mut nonce);
        let sealed = self
            .cipher
            .encrypt(XNonce::from_slice(&nonce), Payload { msg: value, aad: &associated_data(name) })
            .map_err(|_| VaultError::Tampered { name: name.to_owned() })?;
        Ok((nonce, sealed))
    }

    fn open_sealed(&self, name: &str, nonce: &[u8], sealed: &[u8]) -> Option<Vec<u8>> {
        if nonce.len() != NONCE_BYTES {
            return None;
        }
        self.cipher.decrypt(XNonce::from_slice(nonce), Payload { msg: sealed, aad: &associated_data(name) }).ok()
    }

    /// Stores `value` under `name`, replacing any value it had.
    pub fn set(&self, name: &str, value: &str) -> Result<(), VaultError> {
        check_secret_name(name)?;
        let (nonce, sealed) = self.seal(name, value.as_bytes())?;
        let now = now_ms();
        self.database
            .with_connection(|connection| {
                connection
                    .prepare_cached(
                        "INSERT INTO vault_secrets (name, nonce, ciphertext, created_ms, updated_ms)
                         VALUES (?1, ?2, ?3, ?4, ?4)
                         ON CONFLICT (name) DO UPDATE SET nonce = excluded.nonce,
                             ciphertext = excluded.ciphertext, updated_ms = excluded.updated_ms",
                    )?
                    .execute(rusqlite::params![name, nonce.as_slice(), sealed, now])
            })
            .map_err(DatabaseError::query("store a secret"))?;
        lock(&self.cache).insert(name.to_owned(), Cached { secret: Secret::new(value), used_written_ms: i64::MIN });
        Ok(())
    }

    /// Replaces the value of an existing secret; [`VaultError::NotFound`] when there is none.
    pub fn rotate(&self, name: &str, value: &str) -> Result<(), VaultError> {
        check_secret_name(name)?;
        if !self.contains(name)? {
            return Err(VaultError::NotFound { name: name.to_owned() });
        }
        self.set(name, value)
    }

    /// True when a secret has that name.
    pub fn contains(&self, name: &str) -> Result<bool, VaultError> {
        let found = self
            .database
            .with_connection(|connection| {
                connection
                    .prepare_cached("SELECT 1 FROM vault_secrets WHERE name = ?1")?
                    .query_row([name], |_| Ok(()))
                    .optional()
            })
            .map_err(DatabaseError::query("look up a secret"))?;
        Ok(found.is_some())
    }

    /// The value of `name`, or `None`. After the first read it comes from memory; the
    /// time of use is written at most once a minute.
    pub fn get(&self, name: &str) -> Result<Option<Secret>, VaultError> {
        let now = now_ms();
        {
            let mut cache = lock(&self.cache);
            if let Some(cached) = cache.get_mut(name) {
                let secret = cached.secret.clone();
                if now.saturating_sub(cached.used_written_ms) < LAST_USED_EVERY_MS {
                    return Ok(Some(secret));
                }
                cached.used_written_ms = now;
                drop(cache);
                self.touch(name, now)?;
                return Ok(Some(secret));
            }
        }
        check_secret_name(name)?;
        let row = self
            .database
            .with_connection(|connection| {
                connection
                    .prepare_cached("SELECT nonce, ciphertext FROM vault_secrets WHERE name = ?1")?
                    .query_row([name], |row| Ok((row.get::<_, Vec<u8>>(0)?, row.get::<_, Vec<u8>>(1)?)))
                    .optional()
            })
            .map_err(DatabaseError::query("read a secret"))?;
        let Some((nonce, sealed)) = row else { return Ok(None) };
        let plain =
            self.open_sealed(name, &nonce, &sealed).ok_or_else(|| VaultError::Tampered { name: name.to_owned() })?;
        let value = String::from_utf8(plain).map_err(|_| VaultError::Tampered { name: name.to_owned() })?;
        let secret = Secret::new(value);
        self.touch(name, now)?;
        lock(&self.cache).insert(name.to_owned(), Cached { secret: secret.clone(), used_written_ms: now });
        Ok(Some(secret))
    }

    fn touch(&self, name: &str, now: i64) -> Result<(), VaultError> {
        self.database
            .with_connection(|connection| {
                connection
                    .prepare_cached("UPDATE vault_secrets SET last_used_ms = ?2 WHERE name = ?1")?
                    .execute(rusqlite::params![name, now])
            })
            .map_err(DatabaseError::query("note a secret's use"))?;
        Ok(())
    }

    /// Every secret's name and value, by name, for the leak scanner: knowing a value to
    /// redact it is not using it, so no time of use is written. A value that fails to open
    /// is an error naming it.
    pub fn values(&self) -> Result<Vec<(String, Secret)>, VaultError> {
        let rows = self
            .database
            .with_connection(|connection| {
                let mut statement =
                    connection.prepare_cached("SELECT name, nonce, ciphertext FROM vault_secrets ORDER BY name")?;
                let rows = statement.query_map([], |row| {
                    Ok((row.get::<_, String>(0)?, row.get::<_, Vec<u8>>(1)?, row.get::<_, Vec<u8>>(2)?))
                })?;
                rows.collect::<rusqlite::Result<Vec<_>>>()
            })
            .map_err(DatabaseError::query("read the secrets"))?;
        rows.into_iter()
            .map(|(name, nonce, sealed)| {
                let plain = self.open_sealed(&name, &nonce, &sealed).and_then(|plain| String::from_utf8(plain).ok());
                match plain {
                    Some(value) => Ok((name, Secret::new(value))),
                    None => Err(VaultError::Tampered { name }),
                }
            })
            .collect()
    }

    /// Every secret's name and dates, by name. Values never leave through here.
    pub fn list(&self) -> Result<Vec<VaultEntry>, VaultError> {
        let entries = self
            .database
            .with_connection(|connection| {
                let mut statement = connection.prepare_cached(
                    "SELECT name, created_ms, updated_ms, last_used_ms FROM vault_secrets ORDER BY name",
                )?;
                let rows = statement.query_map([], |row| {
                    Ok(VaultEntry {
                        name: row.get(0)?,
                        created_ms: row.get(1)?,
                        updated_ms: row.get(2)?,
                        last_used_ms: row.get(3)?,
                    })
                })?;
                rows.collect::<rusqlite::Result<Vec<_>>>()
            })
            .map_err(DatabaseError::query("list the secrets"))?;
        Ok(entries)
    }

    /// Deletes `name`; false when there was no such secret.
    pub fn remove(&self, name: &str) -> Result<bool, VaultError> {
        check_secret_name(name)?;
        let removed = self
            .database
            .with_connection(|connection| {
                connection.prepare_cached("DELETE FROM vault_secrets WHERE name = ?1")?.execute([name])
            })
            .map_err(DatabaseError::query("remove a secret"))?;
        lock(&self.cache).remove(name);
        Ok(removed > 0)
    }
}

/// What is authenticated beside each value: a version tag and the name, so a value moved
/// to another row fails to open.
fn associated_data(name: &str) -> Vec<u8> {
    [b"squidbot-vault-v1\0".as_slice(), name.as_bytes()].concat()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        for good in ["openai", "provider.openai.api_key", "A-b_c.9", &"x".repeat(64)] {
            assert!(check_secret_name(good).is_ok(), "{good}");
        }
        for bad in ["", "has space", "slash/y", "secret:x", &"x".repeat(65), "é"] {
            assert!(check_secret_name(bad).is_err(), "{bad}");
        }
    }
}
