//! The vault key: 32 bytes from a key file beside the database (made once, mode 0600,
//! never replaced), kept by the OS keyring (`keyring` feature), or derived with argon2id
//! from a passphrase and a salt kept in the database.

#[cfg(feature = "keyring")]
mod keyring;

use std::path::Path;

use argon2::{Algorithm, Argon2, Params, Version};
use squidbot_core::random::{RandomSource, SystemRandom};

use super::VaultError;
use crate::database::Database;
use crate::key_file::KeyFile;

#[cfg(feature = "keyring")]
pub use keyring::{keyring_label, keyring_reachable};

/// Bytes of a key.
pub const VAULT_KEY_BYTES: usize = 32;

/// Bytes of the passphrase salt.
const SALT_BYTES: usize = 16;

/// `meta` key of the passphrase salt (hex).
const SALT_META: &str = "vault.salt";

/// Argon2id cost: 64 MiB and three passes, a fraction of a second once per start.
const ARGON2_MEMORY_KIB: u32 = 64 * 1024;
const ARGON2_PASSES: u32 = 3;

/// Where a key came from; the vault records it so a wrong kind of key is named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VaultKeySource {
    /// `$SQUIDBOT_HOME/vault.key`.
    KeyFile,
    /// argon2id of a passphrase.
    Passphrase,
    /// The OS keyring (Secret Service, Keychain).
    Keyring,
    /// Raw bytes handed in (tests, tools).
    Bytes,
}

impl VaultKeySource {
    /// The name stored in `meta` (`vault.key_source`).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            VaultKeySource::KeyFile => "key file",
            VaultKeySource::Passphrase => "passphrase",
            VaultKeySource::Keyring => "keyring",
            VaultKeySource::Bytes => "raw key",
        }
    }
}

/// The key that seals the vault. Never printed.
#[derive(Clone)]
pub struct VaultKey {
    bytes: [u8; VAULT_KEY_BYTES],
    source: VaultKeySource,
}

impl std::fmt::Debug for VaultKey {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("VaultKey").field("source", &self.source).finish_non_exhaustive()
    }
}

impl VaultKey {
    /// A key of the given bytes.
    pub fn from_bytes(bytes: [u8; VAULT_KEY_BYTES]) -> VaultKey {
        VaultKey { bytes, source: VaultKeySource::Bytes }
    }

    /// Where the key came from.
    pub fn source(&self) -> VaultKeySource {
        self.source
    }

    pub(crate) fn bytes(&self) -> &[u8; VAULT_KEY_BYTES] {
        &self.bytes
    }

    /// Reads the key kept in `path`, or makes one there (mode 0600) when the file does not
    /// exist. A file that does not hold a key is an error and is left as it is.
    pub fn load_or_create_file(path: &Path) -> Result<VaultKey, VaultError> {
        let key = KeyFile {
            path,
            length: VAULT_KEY_BYTES,
            what: "the vault key",
            if_lost: "restore it from a backup: without the key the secrets in the vault can't be read",
        }
        .load_or_create()
        .map_err(|reason| VaultError::KeyFile { path: path.to_path_buf(), reason })?;
        let bytes: [u8; VAULT_KEY_BYTES] = key.try_into().map_err(|_| VaultError::KeyFile {
            path: path.to_path_buf(),
            reason: "it is not 32 bytes long".to_owned(),
        })?;
        Ok(VaultKey { bytes, source: VaultKeySource::KeyFile })
    }

    /// argon2id of `passphrase` with the vault's salt (made and stored in `database` on
    /// first use).
    pub fn from_passphrase(database: &Database, passphrase: &str) -> Result<VaultKey, VaultError> {
        if passphrase.is_empty() {
            return Err(VaultError::Passphrase { reason: "it is empty".to_owned() });
        }
        let salt = match database.meta(SALT_META)?.map(|text| unhex(text.trim())) {
            Some(Some(salt)) if salt.len() == SALT_BYTES => salt,
            Some(_) => {
                return Err(VaultError::Passphrase {
                    reason: format!("the database's {SALT_META} setting is damaged, so no key can be derived"),
                });
            }
            None => {
                let mut salt = vec![0_u8; SALT_BYTES];
                SystemRandom.fill(&mut salt);
                database.set_meta(SALT_META, &hex(&salt))?;
                salt
            }
        };
        let params = Params::new(ARGON2_MEMORY_KIB, ARGON2_PASSES, 1, Some(VAULT_KEY_BYTES))
            .map_err(|error| VaultError::Passphrase { reason: error.to_string() })?;
        let mut bytes = [0_u8; VAULT_KEY_BYTES];
        Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
            .hash_password_into(passphrase.as_bytes(), &salt, &mut bytes)
            .map_err(|error| VaultError::Passphrase { reason: error.to_string() })?;
        Ok(VaultKey { bytes, source: VaultKeySource::Passphrase })
    }
}

pub(crate) use crate::key_file::{hex, unhex};

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    #[test]
    fn a_new_key_file_is_private_and_read_back_unchanged() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("home").join("vault.key");
        let made = VaultKey::load_or_create_file(&path).unwrap();
        let again = VaultKey::load_or_create_file(&path).unwrap();
        assert_eq!(made.bytes(), again.bytes());
        assert_eq!(again.source(), VaultKeySource::KeyFile);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        }
        assert!(!format!("{made:?}").contains(&hex(made.bytes())), "the key never prints");
    }

    #[test]
    fn a_key_file_with_bad_content_is_refused_and_kept() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("vault.key");
        for garbage in ["", "abc", &"zz".repeat(32), &"ab".repeat(33)] {
            fs::write(&path, garbage).unwrap();
            let error = VaultKey::load_or_create_file(&path).unwrap_err().to_string();
            assert!(error.contains("left as it is") && error.contains("vault key"), "{error}");
            assert_eq!(fs::read_to_string(&path).unwrap(), garbage, "never replaced");
        }
        fs::write(&path, [0xFF_u8; 64]).unwrap();
        assert!(VaultKey::load_or_create_file(&path).unwrap_err().to_string().contains("not text"));
    }

    #[test]
    fn a_passphrase_gives_the_same_key_with_the_stored_salt() {
        let directory = tempfile::tempdir().unwrap();
        let database = Database::open(&directory.path().join("squidbot.db")).unwrap();
        let first = VaultKey::from_passphrase(&database, "correct horse").unwrap();
        let second = VaultKey::from_passphrase(&database, "correct horse").unwrap();
        let other = VaultKey::from_passphrase(&database, "wrong horse").unwrap();
        assert_eq!(first.bytes(), second.bytes());
        assert_ne!(first.bytes(), other.bytes());
        assert!(VaultKey::from_passphrase(&database, "").is_err());
    }
}
