//! `squidbot secrets …`: store, list, remove and rotate the vault's secrets, and move the
//! plaintext credentials of config.toml into it. Values never come from arguments and
//! are never printed or audited.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context as _, Result, anyhow, bail};
use serde_json::json;
use squidbot_core::people::People;
use squidbot_store::{Database, MAX_SECRET_NAME_BYTES, Vault, check_secret_name};
use squidbot_types::people::AuditKind;
use toml_edit::{DocumentMut, Item, TableLike};

use crate::cli::SecretsAction;
use crate::config::vault::{self as config_vault, SECRET_PREFIX};
use crate::config::{self as config_loader};
use crate::paths::Paths;

/// Runs one `secrets` action. The config is read without resolving its references, so a
/// secret it names can be stored after the reference was written.
pub fn run(action: SecretsAction) -> Result<()> {
    let paths = Paths::from_env()?;
    let loaded = config_loader::load_unresolved(&paths.config)?;
    let database = Database::open(&paths.database())?;
    let vault = config_vault::open(&paths.home, database.clone(), loaded.config.vault.key)?;
    let people = crate::people::open_at(&paths.home, database)?.policy(&loaded.config);
    let audit = |name: &str, detail: serde_json::Value| {
        people.audit_as(AuditKind::ConfigChange, "cli", &format!("secret:{name}"), true, detail);
    };
    match action {
        SecretsAction::Set { name } => {
            check_secret_name(&name)?;
            let replaced = vault.contains(&name)?;
            let value = config_vault::read_secret_value(&format!("value of {name}: "))?;
            vault.set(&name, &value)?;
            audit(&name, json!({"action": "secrets set", "replaced": replaced}));
            let verb = if replaced { "replaced" } else { "stored" };
            println!("{verb} secret {name}; reference it in config.toml as \"{SECRET_PREFIX}{name}\"");
        }
        SecretsAction::List(flags) => {
            let entries = vault.list()?;
            people.audit_as(
                AuditKind::ConfigChange,
                "cli",
                "vault",
                true,
                json!({"action": "secrets list", "count": entries.len()}),
            );
            if flags.json {
                let rows: Vec<serde_json::Value> = entries
                    .iter()
                    .map(|entry| {
                        json!({
                            "name": entry.name,
                            "created_ms": entry.created_ms,
                            "updated_ms": entry.updated_ms,
                            "last_used_ms": entry.last_used_ms,
                        })
                    })
                    .collect();
                println!("{}", serde_json::to_string_pretty(&rows)?);
            } else if entries.is_empty() {
                println!("no secrets (add one with `squidbot secrets set NAME`)");
            } else {
                let width = entries.iter().map(|entry| entry.name.len()).max().unwrap_or(4).max(4);
                println!("{:<width$}  {:<20}  {:<20}  LAST USED", "NAME", "CREATED", "UPDATED");
                for entry in &entries {
                    println!(
                        "{:<width$}  {:<20}  {:<20}  {}",
                        entry.name,
                        time(Some(entry.created_ms)),
                        time(Some(entry.updated_ms)),
                        time(entry.last_used_ms)
                    );
                }
            }
        }
        SecretsAction::Rm { name } => {
            if !vault.remove(&name)? {
                bail!("can't remove the secret {name}: there is no secret of that name (`squidbot secrets list`)");
            }
            audit(&name, json!({"action": "secrets rm"}));
            println!("removed secret {name}");
            if std::fs::read_to_string(&paths.config)
                .is_ok_and(|text| text.contains(&format!("\"{SECRET_PREFIX}{name}\"")))
            {
                eprintln!("warning: {} still refers to {SECRET_PREFIX}{name}", paths.config.display());
            }
        }
        SecretsAction::Rotate { name } => {
            check_secret_name(&name)?;
            if !vault.contains(&name)? {
                bail!("can't rotate the secret {name}: there is no secret of that name (store it with `secrets set`)");
            }
            let value = config_vault::read_secret_value(&format!("new value of {name}: "))?;
            vault.rotate(&name, &value)?;
            audit(&name, json!({"action": "secrets rotate"}));
            println!("rotated secret {name}; restart a running gateway to use the new value");
        }
        SecretsAction::ImportConfig => import_config(&paths.config, &vault, &people)?,
    }
    Ok(())
}

/// A Unix-millisecond time as `2025-01-31 12:00:00` (UTC), or `never`.
fn time(milliseconds: Option<i64>) -> String {
    milliseconds
        .and_then(|milliseconds| jiff::Timestamp::from_millisecond(milliseconds).ok())
        .map_or_else(|| "never".to_owned(), |time| time.strftime("%Y-%m-%d %H:%M:%S").to_string())
}

/// One plaintext credential of the config file.
struct Plaintext {
    /// Dotted config key (`providers.openai.api_key`).
    key: String,
    /// The secret name it moves to (`provider.openai.api_key`).
    name: String,
    /// Its value.
    value: String,
}

/// `secrets import-config`: stores every plaintext credential of `path` in the vault,
/// then rewrites the file to reference them. Values already written `secret:…` stay.
fn import_config(path: &Path, vault: &Vault, people: &People) -> Result<()> {
    let shown = path.display();
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            println!("nothing to move: {shown} does not exist");
            return Ok(());
        }
        Err(error) => return Err(anyhow!("can't read config {shown}: {error}")),
    };
    let mut document: DocumentMut = text.parse().map_err(|error| anyhow!("can't read config {shown}: {error}"))?;
    let mut found = Vec::new();
    visit_credentials(&mut document, &mut |key, name, value| {
        if let Some(text) = value.as_str().filter(|text| !text.is_empty() && !text.starts_with(SECRET_PREFIX)) {
            found.push(Plaintext { key, name, value: text.to_owned() });
        }
    });
    if found.is_empty() {
        println!("nothing to move: {shown} holds no plaintext credentials");
        return Ok(());
    }
    // Check every name before storing any, so a conflict stores nothing.
    for plaintext in &found {
        check_secret_name(&plaintext.name)?;
        if let Some(existing) = vault.get(&plaintext.name)?
            && existing.expose() != plaintext.value
        {
            bail!(
                "can't move {}: the vault already holds a different secret {} (remove or rename it first)",
                plaintext.key,
                plaintext.name
            );
        }
    }
    for plaintext in &found {
        vault.set(&plaintext.name, &plaintext.value)?;
    }
    let moved: BTreeMap<&str, &str> =
        found.iter().map(|plaintext| (plaintext.key.as_str(), plaintext.name.as_str())).collect();
    visit_credentials(&mut document, &mut |key, _, value| {
        if let Some(name) = moved.get(key.as_str()) {
            let decor = value.decor().clone();
            *value = toml_edit::Value::from(format!("{SECRET_PREFIX}{name}"));
            *value.decor_mut() = decor;
        }
    });
    write_config(path, &document.to_string())?;
    people.audit_as(
        AuditKind::ConfigChange,
        "cli",
        &shown.to_string(),
        true,
        json!({"action": "secrets import-config", "moved": moved}),
    );
    for (key, name) in &moved {
        println!("moved {key} -> {SECRET_PREFIX}{name}");
    }
    println!("{} credential(s) now live in the vault; {shown} refers to them", moved.len());
    Ok(())
}

/// Replaces the file through a temporary one beside it, readable by its owner only.
fn write_config(path: &Path, text: &str) -> Result<()> {
    let temporary = path.with_extension("toml.tmp");
    std::fs::write(&temporary, text).with_context(|| format!("can't write {}", temporary.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&temporary, std::fs::Permissions::from_mode(0o600))
            .with_context(|| format!("can't restrict permissions of {}", temporary.display()))?;
    }
    std::fs::rename(&temporary, path).with_context(|| format!("can't write {}", path.display()))
}

/// The secret name of a credential: dotted parts, characters a name can't hold as `_`,
/// cut to the longest name.
fn secret_name(parts: &[&str]) -> String {
    let joined = parts.join(".");
    let mut name: String =
        joined
            .chars()
            .map(|character| {
                if character.is_ascii_alphanumeric() || matches!(character, '_' | '.' | '-') { character } else { '_' }
            })
            .collect();
    name.truncate(MAX_SECRET_NAME_BYTES);
    name
}

/// Calls `visit(config key, secret name, value)` for every string credential of the
/// document: the same fields `"secret:NAME"` is resolved in (MCP `env` aside: it never
/// holds credentials).
fn visit_credentials(document: &mut DocumentMut, visit: &mut dyn FnMut(String, String, &mut toml_edit::Value)) {
    let mut field = |table: &mut dyn TableLike, field: &str, key: String, name: String| {
        if let Some(value) = table.get_mut(field).and_then(Item::as_value_mut)
            && value.is_str()
        {
            visit(key, name, value);
        }
    };
    if let Some(providers) = document.get_mut("providers").and_then(Item::as_table_like_mut) {
        for (provider, table) in providers.iter_mut() {
            let provider = provider.get().to_owned();
            let Some(table) = table.as_table_like_mut() else { continue };
            field(
                table,
                "api_key",
                format!("providers.{provider}.api_key"),
                secret_name(&["provider", &provider, "api_key"]),
            );
            if let Some(headers) = table.get_mut("headers").and_then(Item::as_table_like_mut) {
                let names: Vec<String> = headers.iter().map(|(header, _)| header.to_owned()).collect();
                for header in names {
                    field(
                        headers,
                        &header,
                        format!("providers.{provider}.headers.{header}"),
                        secret_name(&["provider", &provider, "headers", &header]),
                    );
                }
            }
        }
    }
    if let Some(channels) = document.get_mut("channels").and_then(Item::as_table_like_mut) {
        for (channel, table) in channels.iter_mut() {
            let channel = channel.get().to_owned();
            let Some(table) = table.as_table_like_mut() else { continue };
            for credential in ["token", "app_token", "password", "secret"] {
                field(
                    table,
                    credential,
                    format!("channels.{channel}.{credential}"),
                    secret_name(&["channel", &channel, credential]),
                );
            }
        }
    }
    if let Some(auth) = document
        .get_mut("gateway")
        .and_then(Item::as_table_like_mut)
        .and_then(|gateway| gateway.get_mut("auth"))
        .and_then(Item::as_table_like_mut)
    {
        for credential in ["token", "password_hash"] {
            field(
                auth,
                credential,
                format!("gateway.auth.{credential}"),
                secret_name(&["gateway", "auth", credential]),
            );
        }
    }
    if let Some(servers) = document
        .get_mut("mcp")
        .and_then(Item::as_table_like_mut)
        .and_then(|mcp| mcp.get_mut("servers"))
        .and_then(Item::as_table_like_mut)
    {
        for (server, table) in servers.iter_mut() {
            let server = server.get().to_owned();
            let Some(headers) =
                table.as_table_like_mut().and_then(|table| table.get_mut("headers")).and_then(Item::as_table_like_mut)
            else {
                continue;
            };
            let names: Vec<String> = headers.iter().map(|(header, _)| header.to_owned()).collect();
            for header in names {
                field(
                    headers,
                    &header,
                    format!("mcp.servers.{server}.headers.{header}"),
                    secret_name(&["mcp", &server, "headers", &header]),
                );
            }
        }
    }
    if let Some(web) = document
        .get_mut("tools")
        .and_then(Item::as_table_like_mut)
        .and_then(|tools| tools.get_mut("web"))
        .and_then(Item::as_table_like_mut)
    {
        field(web, "brave_api_key", "tools.web.brave_api_key".to_owned(), "tools.web.brave_api_key".to_owned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_found_with_their_names_and_comments_survive_a_rewrite() {
        let text = "# top comment\n[providers.openai]\napi_key = \"sk-1\" # the key\nkind = \"openai\"\n\n\
                    [providers.local]\napi_key = \"secret:local\"\n\n[channels.\"my bot\"]\ntoken = \"t-1\"\n\n\
                    [mcp.servers.gh]\nheaders = { Authorization = \"Bearer x\" }\n";
        let mut document: DocumentMut = text.parse().unwrap();
        let mut seen = Vec::new();
        visit_credentials(&mut document, &mut |key, name, value| {
            seen.push((key, name, value.as_str().unwrap_or_default().to_owned()));
            if value.as_str() == Some("sk-1") {
                let decor = value.decor().clone();
                *value = toml_edit::Value::from("secret:provider.openai.api_key");
                *value.decor_mut() = decor;
            }
        });
        let names: Vec<&str> = seen.iter().map(|(_, name, _)| name.as_str()).collect();
        assert_eq!(
            names,
            [
                "provider.openai.api_key",
                "provider.local.api_key",
                "channel.my_bot.token",
                "mcp.gh.headers.Authorization"
            ]
        );
        let written = document.to_string();
        assert!(written.contains("# top comment"), "{written}");
        assert!(written.contains("api_key = \"secret:provider.openai.api_key\" # the key"), "{written}");
    }

    #[test]
    fn long_names_are_cut_to_the_limit() {
        let name = secret_name(&["provider", &"x".repeat(100), "api_key"]);
        assert_eq!(name.len(), MAX_SECRET_NAME_BYTES);
        assert!(check_secret_name(&name).is_ok());
    }
}
