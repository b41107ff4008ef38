//! The vault key kept by the OS keyring: an item of the Secret Service (over D-Bus, pure
//! Rust through zbus) on Linux and the BSDs, a generic password of the Keychain on macOS.
//! One key per `$SQUIDBOT_HOME`, made on first use and read afterwards; never replaced.

use std::path::Path;
use std::time::Duration;

use squidbot_core::random::{RandomSource, SystemRandom};

use super::{VAULT_KEY_BYTES, VaultKey, VaultKeySource, hex, unhex};
use crate::database::Database;
use crate::vault::{CHECK_META, SOURCE_META, VaultError};

/// What people see in their keyring for the key of `home`.
pub fn keyring_label(home: &str) -> String {
    format!("squidbot vault key ({home})")
}

/// `home` as the keyring item names it: absolute, so `./h` and `/srv/h` are one home.
fn home_name(home: &Path) -> String {
    std::path::absolute(home).unwrap_or_else(|_| home.to_path_buf()).display().to_string()
}

/// Whether the OS keyring answers within `timeout` and could keep a new key (onboard's
/// choice); the error says why not.
pub fn keyring_reachable(timeout: Duration) -> Result<(), String> {
    platform::reachable(timeout)
}

impl VaultKey {
    /// Reads the key the OS keyring keeps for `home`, or makes one there when the vault in
    /// `database` was never sealed. A vault sealed already whose key is not in the keyring
    /// is an error: a new key would not open it, and nothing is changed.
    pub fn load_or_create_keyring(database: &Database, home: &Path) -> Result<VaultKey, VaultError> {
        let home = home_name(home);
        let sealed_with = match database.meta(CHECK_META)? {
            Some(_) => Some(database.meta(SOURCE_META)?.unwrap_or_else(|| "different key".to_owned())),
            None => None,
        };
        let new_key = match sealed_with {
            Some(_) => None,
            None => {
                let mut bytes = [0_u8; VAULT_KEY_BYTES];
                SystemRandom.fill(&mut bytes);
                Some(hex(&bytes))
            }
        };
        let Some(text) = platform::load_or_create(&home, new_key.as_deref())? else {
            return Err(VaultError::KeyringKeyMissing {
                keyring: platform::NAME,
                home,
                sealed_with: sealed_with.unwrap_or_default(),
            });
        };
        let bytes: [u8; VAULT_KEY_BYTES] =
            unhex(text.trim()).and_then(|bytes| bytes.try_into().ok()).ok_or_else(|| VaultError::Keyring {
                keyring: platform::NAME,
                reason: format!(
                    "its item \"{}\" does not hold 64 hex digits; it was left as it is",
                    keyring_label(&home)
                ),
            })?;
        Ok(VaultKey { bytes, source: VaultKeySource::Keyring })
    }
}

/// The Secret Service over the session bus.
#[cfg(all(unix, not(target_os = "macos")))]
mod platform {
    use std::collections::HashMap;
    use std::future::Future;
    use std::time::Duration;

    use secret_service::{EncryptionType, Error, SecretService};

    use super::keyring_label;
    use crate::vault::VaultError;

    /// The keyring, as messages name it.
    pub const NAME: &str = "the Secret Service";

    /// How long the service has to answer before it counts as not reachable.
    const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

    /// How long an unlock prompt (the desktop asking for the login password) may take.
    const UNLOCK_TIMEOUT: Duration = Duration::from_secs(60);

    /// The attributes the key of `home` is found by: this application, this home.
    fn attributes(home: &str) -> HashMap<&str, &str> {
        HashMap::from([("application", "squidbot"), ("purpose", "vault-key"), ("home", home)])
    }

    fn unreachable(reason: impl Into<String>) -> VaultError {
        VaultError::KeyringUnreachable { keyring: NAME, reason: reason.into() }
    }

    /// Why talking to the service failed: a locked keyring or a missing bus is "not
    /// reachable" (use another key mode); anything else the service refused.
    fn failed(error: Error) -> VaultError {
        match error {
            Error::Locked | Error::Prompt | Error::PromptDisconnected => {
                unreachable("its keyring is locked and was not unlocked")
            }
            Error::Unavailable | Error::Zbus(_) | Error::ZbusFdo(_) => unreachable(bus_reason(&error)),
            error => VaultError::Keyring { keyring: NAME, reason: error.to_string() },
        }
    }

    fn bus_reason(error: &Error) -> String {
        if std::env::var_os("DBUS_SESSION_BUS_ADDRESS").is_none_or(|address| address.is_empty()) {
            "no session bus: DBUS_SESSION_BUS_ADDRESS is not set".to_owned()
        } else {
            error.to_string()
        }
    }

    /// Runs `talk` on a thread of its own with a runtime of its own, so a caller inside
    /// or outside an async runtime can wait for it.
    fn on_own_runtime<T: Send, F: Future<Output = Result<T, VaultError>>>(
        talk: impl FnOnce() -> F + Send,
    ) -> Result<T, VaultError> {
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .map_err(|error| unreachable(format!("can't start its client: {error}")))?;
                    runtime.block_on(talk())
                })
                .join()
                .unwrap_or_else(|_| {
                    Err(VaultError::Keyring { keyring: NAME, reason: "its client panicked".to_owned() })
                })
        })
    }

    async fn connect() -> Result<SecretService<'static>, VaultError> {
        match tokio::time::timeout(CONNECT_TIMEOUT, SecretService::connect(EncryptionType::Dh)).await {
            Ok(Ok(service)) => Ok(service),
            Ok(Err(error)) => Err(failed(error)),
            Err(_) => Err(unreachable(format!("no answer within {} s", CONNECT_TIMEOUT.as_secs()))),
        }
    }

    /// Waits for `unlock` (which may prompt on the desktop) up to [`UNLOCK_TIMEOUT`].
    async fn unlocked(unlock: impl Future<Output = Result<(), Error>>) -> Result<(), VaultError> {
        match tokio::time::timeout(UNLOCK_TIMEOUT, unlock).await {
            Ok(result) => result.map_err(failed),
            Err(_) => Err(unreachable(format!(
                "its keyring is locked and was not unlocked within {} s",
                UNLOCK_TIMEOUT.as_secs()
            ))),
        }
    }

    pub fn reachable(timeout: Duration) -> Result<(), String> {
        if std::env::var_os("DBUS_SESSION_BUS_ADDRESS").is_none_or(|address| address.is_empty()) {
            return Err("no session bus: DBUS_SESSION_BUS_ADDRESS is not set".to_owned());
        }
        let probed = on_own_runtime(|| async move {
            let probe = async {
                let service = connect().await?;
                service
                    .get_default_collection()
                    .await
                    .map_err(|error| unreachable(format!("it has no default keyring: {error}")))?;
                Ok(())
            };
            match tokio::time::timeout(timeout, probe).await {
                Ok(result) => result,
                Err(_) => Err(unreachable(format!("no answer within {} ms", timeout.as_millis()))),
            }
        });
        probed.map_err(|error| match error {
            VaultError::KeyringUnreachable { reason, .. } => reason,
            error => error.to_string(),
        })
    }

    /// The text of the item kept for `home`; when there is none, `new_key` stored as a new
    /// item of the default collection, or `None` without one.
    pub fn load_or_create(home: &str, new_key: Option<&str>) -> Result<Option<String>, VaultError> {
        on_own_runtime(|| async move {
            let service = connect().await?;
            let found = service.search_items(attributes(home)).await.map_err(failed)?;
            if let Some(item) = found.unlocked.first().or(found.locked.first()) {
                if item.is_locked().await.map_err(failed)? {
                    unlocked(item.unlock()).await?;
                }
                let secret = item.get_secret().await.map_err(failed)?;
                return String::from_utf8(secret).map(Some).map_err(|_| VaultError::Keyring {
                    keyring: NAME,
                    reason: format!("its item \"{}\" does not hold text; it was left as it is", keyring_label(home)),
                });
            }
            let Some(new_key) = new_key else { return Ok(None) };
            let collection = service
                .get_default_collection()
                .await
                .map_err(|error| unreachable(format!("it has no default keyring to keep the key in: {error}")))?;
            if collection.is_locked().await.map_err(failed)? {
                unlocked(collection.unlock()).await?;
            }
            collection
                .create_item(&keyring_label(home), attributes(home), new_key.as_bytes(), false, "text/plain")
                .await
                .map_err(failed)?;
            Ok(Some(new_key.to_owned()))
        })
    }
}

/// The Keychain: a generic password whose service is squidbot's and whose account is the
/// home. Not tested here (no macOS in CI); kept to the four calls it needs.
#[cfg(target_os = "macos")]
mod platform {
    use std::time::Duration;

    use security_framework::passwords::{get_generic_password, set_generic_password};

    use crate::vault::VaultError;

    /// The keyring, as messages name it.
    pub const NAME: &str = "the Keychain";

    /// The Keychain's service name of every squidbot vault key.
    const SERVICE: &str = "squidbot vault key";

    /// `errSecItemNotFound`.
    const ITEM_NOT_FOUND: i32 = -25300;

    pub fn reachable(_timeout: Duration) -> Result<(), String> {
        Err("onboard does not choose the Keychain by itself; set [vault] key = \"keyring\"".to_owned())
    }

    pub fn load_or_create(home: &str, new_key: Option<&str>) -> Result<Option<String>, VaultError> {
        match get_generic_password(SERVICE, home) {
            Ok(bytes) => String::from_utf8(bytes).map(Some).map_err(|_| VaultError::Keyring {
                keyring: NAME,
                reason: "its item does not hold text; it was left as it is".to_owned(),
            }),
            Err(error) if error.code() == ITEM_NOT_FOUND => {
                let Some(new_key) = new_key else { return Ok(None) };
                set_generic_password(SERVICE, home, new_key.as_bytes())
                    .map_err(|error| VaultError::KeyringUnreachable { keyring: NAME, reason: error.to_string() })?;
                Ok(Some(new_key.to_owned()))
            }
            Err(error) => Err(VaultError::KeyringUnreachable { keyring: NAME, reason: error.to_string() }),
        }
    }
}

/// No OS keyring this build knows of.
#[cfg(not(unix))]
mod platform {
    use std::time::Duration;

    use crate::vault::VaultError;

    /// The keyring, as messages name it.
    pub const NAME: &str = "the OS keyring";

    pub fn reachable(_timeout: Duration) -> Result<(), String> {
        Err("squidbot has no keyring client for this system".to_owned())
    }

    pub fn load_or_create(_home: &str, _new_key: Option<&str>) -> Result<Option<String>, VaultError> {
        Err(VaultError::KeyringUnreachable {
            keyring: NAME,
            reason: "squidbot has no keyring client for this system".to_owned(),
        })
    }
}
