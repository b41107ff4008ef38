//! `"secret:NAME"` config values: unlocking the vault with the key `[vault]` chooses and
//! replacing every credential that references it with the secret's value after loading,
//! so every consumer sees the real value; and every value in the vault, read once per
//! process, for the leak scanner and for the `addons.env` variables of skills.

use std::collections::BTreeMap;
use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use anyhow::{Context as _, Result, anyhow, bail};
use squidbot_store::{Database, Vault, VaultKey, check_secret_name};
use squidbot_types::Secret;
use squidbot_types::config::{Config, VaultKeyMode};

use crate::paths::Paths;

/// How a config value refers to the vault: `"secret:NAME"`.
pub const SECRET_PREFIX: &str = "secret:";

/// Environment variable whose passphrase unlocks the vault (it wins over `[vault] key`).
pub const PASSPHRASE_VARIABLE: &str = "SQUIDBOT_VAULT_PASSPHRASE";

/// The key file in `$SQUIDBOT_HOME`, hidden from every command by the sandbox.
pub fn key_path(home: &Path) -> PathBuf {
    home.join("vault.key")
}

/// Unlocks the vault in `database`: with `SQUIDBOT_VAULT_PASSPHRASE` when set, else the
/// key file, the OS keyring or a passphrase asked on the terminal, as `mode` says. A
/// keyring that can't be reached is an error, never a silent fall back to a key file.
pub fn open(home: &Path, database: Database, mode: VaultKeyMode) -> Result<Vault> {
    let passphrase = std::env::var(PASSPHRASE_VARIABLE).ok().filter(|passphrase| !passphrase.is_empty());
    let key = match (passphrase, mode) {
        (Some(passphrase), _) => VaultKey::from_passphrase(&database, &passphrase)?,
        (None, VaultKeyMode::File) => VaultKey::load_or_create_file(&key_path(home))?,
        (None, VaultKeyMode::Keyring) => keyring_key(&database, home)?,
        (None, VaultKeyMode::Passphrase) => {
            if !std::io::stdin().is_terminal() {
                bail!(
                    "can't unlock the vault: [vault] key is \"passphrase\" and there is no terminal to ask on; set \
                     {PASSPHRASE_VARIABLE}"
                );
            }
            VaultKey::from_passphrase(&database, &read_hidden_line("vault passphrase: ")?)?
        }
    };
    Ok(Vault::open(database, &key)?)
}

#[cfg(feature = "keyring")]
fn keyring_key(database: &Database, home: &Path) -> Result<VaultKey> {
    Ok(VaultKey::load_or_create_keyring(database, home)?)
}

#[cfg(not(feature = "keyring"))]
fn keyring_key(_database: &Database, _home: &Path) -> Result<VaultKey> {
    bail!(
        "can't unlock the vault: [vault] key is \"keyring\", but this squidbot was built without its `keyring` \
         feature; use [vault] key = \"file\" or \"passphrase\""
    )
}

/// Every value in the vault, read once per process: by [`resolve`] when the config refers
/// to the vault (so a passphrase asked for is asked once), else the first time the leak
/// scanner or a skill needs them. A process-wide cell because every scanner is built from
/// the config alone (`secret_values`), in many places.
static KNOWN: OnceLock<Arc<KnownSecrets>> = OnceLock::new();

/// The vault's secrets as this process knows them.
#[derive(Debug, Default)]
pub struct KnownSecrets {
    /// Every secret by name; empty when the vault could not be read.
    values: BTreeMap<String, Secret>,
    /// Why the vault was not read, if it was not (no key without asking, an error).
    unread: Option<String>,
}

impl KnownSecrets {
    /// The value of the secret `name`.
    pub fn get(&self, name: &str) -> Option<&Secret> {
        self.values.get(name)
    }

    /// Every value, for the leak scanner.
    pub fn values(&self) -> impl Iterator<Item = &Secret> {
        self.values.values()
    }

    /// Why the vault's secrets are not known, when they are not.
    pub fn unread(&self) -> Option<&str> {
        self.unread.as_deref()
    }

    fn read(vault: &Vault) -> Self {
        match vault.values() {
            Ok(values) => Self { values: values.into_iter().collect(), unread: None },
            Err(error) => Self { values: BTreeMap::new(), unread: Some(error.to_string()) },
        }
    }

    fn not_read(reason: impl Into<String>) -> Self {
        Self { values: BTreeMap::new(), unread: Some(reason.into()) }
    }
}

/// The vault's secrets, read the first time they are asked for. The vault is opened only
/// when that needs no question: with `SQUIDBOT_VAULT_PASSPHRASE`, the key file when `mode`
/// is `file` and the file exists, or the keyring; never with a passphrase asked for, and
/// no key file is made here.
pub fn known_secrets(mode: VaultKeyMode) -> Arc<KnownSecrets> {
    KNOWN.get_or_init(|| Arc::new(read_without_asking(mode))).clone()
}

fn read_without_asking(mode: VaultKeyMode) -> KnownSecrets {
    let paths = match Paths::from_env() {
        Ok(paths) => paths,
        Err(error) => return KnownSecrets::not_read(format!("can't find squidbot's home: {error}")),
    };
    if !paths.database().exists() {
        return KnownSecrets::default();
    }
    let has_passphrase = std::env::var_os(PASSPHRASE_VARIABLE).is_some_and(|passphrase| !passphrase.is_empty());
    // The keyring answers without a question (a locked one is an error, kept as the reason).
    let openable = has_passphrase
        || match mode {
            VaultKeyMode::File => key_path(&paths.home).exists(),
            VaultKeyMode::Keyring => true,
            VaultKeyMode::Passphrase => false,
        };
    if !openable {
        return KnownSecrets::not_read(format!(
            "the vault is locked: its key is asked for on a terminal; set {PASSPHRASE_VARIABLE}"
        ));
    }
    let opened = Database::open(&paths.database())
        .map_err(anyhow::Error::from)
        .and_then(|database| open(&paths.home, database, mode));
    match opened {
        Ok(vault) => KnownSecrets::read(&vault),
        Err(error) => KnownSecrets::not_read(format!("can't read the vault: {error:#}")),
    }
}

/// A credential the config holds: a `Secret`, or plain text (MCP server `env` values).
enum Slot<'a> {
    Secret(&'a mut Secret),
    Text(&'a mut String),
}

impl Slot<'_> {
    fn text(&self) -> &str {
        match self {
            Slot::Secret(secret) => secret.expose(),
            Slot::Text(text) => text,
        }
    }

    fn set(&mut self, value: Secret) {
        match self {
            Slot::Secret(secret) => **secret = value,
            Slot::Text(text) => value.expose().clone_into(text),
        }
    }
}

/// Every value of the config that takes a credential, by dotted key.
fn credential_slots(config: &mut Config) -> Vec<(String, Slot<'_>)> {
    let mut slots = Vec::new();
    for (name, provider) in &mut config.providers {
        if let Some(key) = &mut provider.api_key {
            slots.push((format!("providers.{name}.api_key"), Slot::Secret(key)));
        }
        for (header, value) in &mut provider.headers {
            slots.push((format!("providers.{name}.headers.{header}"), Slot::Secret(value)));
        }
    }
    for (name, channel) in &mut config.channels {
        let fields = [
            ("token", &mut channel.token),
            ("app_token", &mut channel.app_token),
            ("password", &mut channel.password),
            ("secret", &mut channel.secret),
        ];
        for (field, value) in fields {
            if let Some(value) = value {
                slots.push((format!("channels.{name}.{field}"), Slot::Secret(value)));
            }
        }
    }
    let auth = &mut config.gateway.auth;
    if let Some(token) = &mut auth.token {
        slots.push(("gateway.auth.token".to_owned(), Slot::Secret(token)));
    }
    if let Some(hash) = &mut auth.password_hash {
        slots.push(("gateway.auth.password_hash".to_owned(), Slot::Secret(hash)));
    }
    for (name, server) in &mut config.mcp.servers {
        for (header, value) in &mut server.headers {
            slots.push((format!("mcp.servers.{name}.headers.{header}"), Slot::Secret(value)));
        }
        for (variable, value) in &mut server.env {
            slots.push((format!("mcp.servers.{name}.env.{variable}"), Slot::Text(value)));
        }
    }
    if let Some(key) = &mut config.tools.web.brave_api_key {
        slots.push(("tools.web.brave_api_key".to_owned(), Slot::Secret(key)));
    }
    slots
}

/// Replaces every `"secret:NAME"` credential of `config` (loaded from `path`) with the
/// secret's value. The vault is opened only when something refers to it; a missing or
/// malformed name is an error naming the key and the secret.
pub fn resolve(config: &mut Config, path: &Path) -> Result<()> {
    let mode = config.vault.key;
    let mut slots: Vec<(String, Slot<'_>)> =
        credential_slots(config).into_iter().filter(|(_, slot)| slot.text().starts_with(SECRET_PREFIX)).collect();
    if slots.is_empty() {
        return Ok(());
    }
    let shown = path.display();
    let paths = Paths::from_env()?;
    let database = Database::open(&paths.database())?;
    let vault =
        open(&paths.home, database, mode).with_context(|| format!("can't read the secrets {shown} refers to"))?;
    KNOWN.get_or_init(|| Arc::new(KnownSecrets::read(&vault)));
    for (key, slot) in &mut slots {
        let name = slot.text().trim_start_matches(SECRET_PREFIX).to_owned();
        check_secret_name(&name).map_err(|error| anyhow!("invalid config {shown}: {key}: {error}"))?;
        let value = vault.get(&name).with_context(|| format!("invalid config {shown}: {key}"))?.ok_or_else(|| {
            anyhow!(
                "invalid config {shown}: {key} refers to secret:{name}, which is not in the vault (store it with \
                 `squidbot secrets set {name}`)"
            )
        })?;
        slot.set(value);
    }
    Ok(())
}

/// Reads one line from standard input: with echo off when it is a terminal (after
/// `prompt` on standard error), else as piped.
pub fn read_secret_value(prompt: &str) -> Result<String> {
    let value = if std::io::stdin().is_terminal() {
        read_hidden_line(prompt)?
    } else {
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line).context("can't read the value from standard input")?;
        without_line_end(line)
    };
    if value.is_empty() {
        bail!("can't store an empty value: type it at the prompt or give one line on standard input");
    }
    Ok(value)
}

fn without_line_end(mut line: String) -> String {
    if line.ends_with('\n') {
        line.pop();
        if line.ends_with('\r') {
            line.pop();
        }
    }
    line
}

/// Reads a line from the terminal with echo off, restoring the terminal afterwards.
#[cfg(unix)]
#[allow(unsafe_code)]
fn read_hidden_line(prompt: &str) -> Result<String> {
    eprint!("{prompt}");
    std::io::stderr().flush().context("can't write the prompt")?;
    let descriptor = libc::STDIN_FILENO;
    let mut saved = std::mem::MaybeUninit::<libc::termios>::uninit();
    // SAFETY: tcgetattr writes a whole termios into the pointer on success, checked below.
    if unsafe { libc::tcgetattr(descriptor, saved.as_mut_ptr()) } != 0 {
        bail!("can't turn off the terminal's echo: {}", std::io::Error::last_os_error());
    }
    // SAFETY: initialised by the successful tcgetattr above.
    let saved = unsafe { saved.assume_init() };
    let mut hidden = saved;
    hidden.c_lflag &= !libc::ECHO;
    hidden.c_lflag |= libc::ECHONL;
    // SAFETY: a valid termios for the descriptor tcgetattr just read.
    if unsafe { libc::tcsetattr(descriptor, libc::TCSANOW, &hidden) } != 0 {
        bail!("can't turn off the terminal's echo: {}", std::io::Error::last_os_error());
    }
    let mut line = String::new();
    let read = std::io::stdin().lock().read_line(&mut line);
    // SAFETY: restores the settings read above.
    let restored = unsafe { libc::tcsetattr(descriptor, libc::TCSANOW, &saved) };
    read.context("can't read from the terminal")?;
    if restored != 0 {
        tracing::warn!("can't restore the terminal's echo; run `stty echo`");
    }
    Ok(without_line_end(line))
}

#[cfg(not(unix))]
fn read_hidden_line(prompt: &str) -> Result<String> {
    eprint!("{prompt}(typed text is visible) ");
    std::io::stderr().flush().context("can't write the prompt")?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).context("can't read from the terminal")?;
    Ok(without_line_end(line))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_credential_field_is_a_slot() {
        let text = r#"
            [providers.openai]
            api_key = "a"
            headers = { "X-Key" = "b" }
            [channels.slack]
            token = "c"
            app_token = "d"
            [channels.mail]
            password = "e"
            [channels.hook]
            secret = "f"
            [gateway.auth]
            token = "g"
            password_hash = "h"
            [mcp.servers.github]
            url = "http://127.0.0.1:9/mcp"
            headers = { Authorization = "i" }
            env = { MODE = "j" }
            [tools.web]
            brave_api_key = "k"
        "#;
        let mut config: Config = toml::from_str(text).unwrap();
        let mut keys: Vec<String> = credential_slots(&mut config).into_iter().map(|(key, _)| key).collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                "channels.hook.secret",
                "channels.mail.password",
                "channels.slack.app_token",
                "channels.slack.token",
                "gateway.auth.password_hash",
                "gateway.auth.token",
                "mcp.servers.github.env.MODE",
                "mcp.servers.github.headers.Authorization",
                "providers.openai.api_key",
                "providers.openai.headers.X-Key",
                "tools.web.brave_api_key",
            ]
        );
    }

    #[test]
    fn line_ends_are_cut_once() {
        assert_eq!(without_line_end("abc\r\n".into()), "abc");
        assert_eq!(without_line_end("abc".into()), "abc");
        assert_eq!(without_line_end(" a b \n".into()), " a b ");
    }
}
