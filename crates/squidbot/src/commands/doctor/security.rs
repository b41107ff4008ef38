//! `squidbot doctor --security`: a review of what could expose the installation, each
//! finding with its severity, the key it concerns and how to fix it. Exits 1 when a
//! finding is critical.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context as _, Result, anyhow};
use serde_json::json;
use squidbot_core::people::Directory as _;
use squidbot_sandbox::Active;
use squidbot_types::config::{Config, GatewayAuthMode, VaultKeyMode};
use squidbot_types::hooks::HookEvent;
use squidbot_types::sandbox::SandboxBackend;

use super::exposed_paths;
use crate::config::vault::SECRET_PREFIX;
use crate::wiring::Environment;

/// How serious a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Severity {
    /// Checked, nothing to do.
    Ok,
    /// Worth knowing, nothing wrong.
    Info,
    /// Worth fixing.
    Warning,
    /// Fix it now: `doctor --security` exits 1.
    Critical,
}

impl Severity {
    fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Info => "info",
            Self::Warning => "warning",
            Self::Critical => "critical",
        }
    }

    /// The four-letter column of the text report.
    fn label(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Info => "info",
            Self::Warning => "warn",
            Self::Critical => "CRIT",
        }
    }
}

/// One finding: its severity, the config key or file it is about, and a sentence saying
/// what is wrong and how to fix it.
#[derive(Debug)]
struct Finding {
    severity: Severity,
    key: String,
    detail: String,
}

impl Finding {
    fn new(severity: Severity, key: impl Into<String>, detail: impl Into<String>) -> Self {
        Self { severity, key: key.into(), detail: detail.into() }
    }
}

/// Runs every security check and prints the findings.
pub fn run(as_json: bool) -> Result<ExitCode> {
    let environment = Environment::load()?;
    let config = environment.config();
    let mut findings = Vec::new();
    findings.extend(credential_findings(&environment.paths.config)?);
    findings.extend(file_findings(&environment));
    findings.push(vault_key_finding(&environment));
    findings.extend(gateway_findings(config));
    findings.push(sandbox_finding(&environment)?);
    findings.extend(channel_findings(config));
    findings.extend(skill_findings(
        &environment.paths.logs().join("skills-install.jsonl"),
        &environment.paths.user_skills(),
    ));
    findings.extend(hook_findings(config));
    Ok(finish(&findings, as_json))
}

fn finish(findings: &[Finding], as_json: bool) -> ExitCode {
    let critical = findings.iter().filter(|finding| finding.severity == Severity::Critical).count();
    let warnings = findings.iter().filter(|finding| finding.severity == Severity::Warning).count();
    if as_json {
        let list: Vec<_> = findings
            .iter()
            .map(|finding| json!({"severity": finding.severity.as_str(), "key": finding.key, "detail": finding.detail}))
            .collect();
        println!("{}", json!({"ok": critical == 0, "critical": critical, "warnings": warnings, "findings": list}));
    } else {
        for finding in findings {
            println!("{:<4} {:<28} {}", finding.severity.label(), finding.key, finding.detail);
        }
        println!("{critical} critical, {warnings} warning(s)");
    }
    if critical > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS }
}

// --- plaintext credentials -------------------------------------------------------------

/// Credential fields of config.toml as written (before env overrides and the vault)
/// holding a literal value instead of `"secret:NAME"` or an `*_env` variable.
fn credential_findings(path: &Path) -> Result<Vec<Finding>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Ok(vec![Finding::new(Severity::Ok, "credentials", format!("{} does not exist", path.display()))]);
        }
        Err(error) => return Err(anyhow!("can't read config {}: {error}", path.display())),
    };
    let table: toml::Table = toml::from_str(&text).with_context(|| format!("can't read config {}", path.display()))?;
    let mut findings = plaintext_credentials(&table);
    if findings.is_empty() {
        findings.push(Finding::new(
            Severity::Ok,
            "credentials",
            format!("{} holds no credential in clear", path.display()),
        ));
    }
    Ok(findings)
}

const IMPORT_HINT: &str = "run `squidbot secrets import-config` to move it into the vault";

fn plaintext_credentials(table: &toml::Table) -> Vec<Finding> {
    let mut findings = Vec::new();
    let mut env_findings = Vec::new();
    let mut flag = |severity: Severity, key: String, value: Option<&toml::Value>| {
        if value.and_then(toml::Value::as_str).is_some_and(|text| !text.is_empty() && !text.starts_with(SECRET_PREFIX))
        {
            let detail = if severity == Severity::Warning {
                format!("a credential in clear: {IMPORT_HINT}")
            } else {
                format!("a password hash in clear (not the password, but it can be guessed offline): {IMPORT_HINT}")
            };
            findings.push(Finding::new(severity, key, detail));
        }
    };
    for (provider, entry) in tables(table.get("providers")) {
        flag(Severity::Warning, format!("providers.{provider}.api_key"), entry.get("api_key"));
        for (header, value) in tables_or_values(entry.get("headers")) {
            flag(Severity::Warning, format!("providers.{provider}.headers.{header}"), Some(value));
        }
    }
    for (channel, entry) in tables(table.get("channels")) {
        for credential in ["token", "app_token", "password", "secret"] {
            flag(Severity::Warning, format!("channels.{channel}.{credential}"), entry.get(credential));
        }
    }
    if let Some(auth) = table.get("gateway").and_then(|gateway| gateway.get("auth")) {
        flag(Severity::Warning, "gateway.auth.token".to_owned(), auth.get("token"));
        flag(Severity::Info, "gateway.auth.password_hash".to_owned(), auth.get("password_hash"));
    }
    let servers = table.get("mcp").and_then(|mcp| mcp.get("servers"));
    for (server, entry) in tables(servers) {
        for (header, value) in tables_or_values(entry.get("headers")) {
            flag(Severity::Warning, format!("mcp.servers.{server}.headers.{header}"), Some(value));
        }
        // `env` mostly holds settings; only variables named like a credential count.
        for (variable, value) in tables_or_values(entry.get("env")) {
            let literal = value.as_str().is_some_and(|text| !text.is_empty() && !text.starts_with(SECRET_PREFIX));
            if literal && looks_like_credential(variable) {
                env_findings.push(Finding::new(
                    Severity::Warning,
                    format!("mcp.servers.{server}.env.{variable}"),
                    format!(
                        "looks like a credential in clear: store it with `squidbot secrets set NAME` and write \
                         \"{SECRET_PREFIX}NAME\" instead"
                    ),
                ));
            }
        }
    }
    if let Some(web) = table.get("tools").and_then(|tools| tools.get("web")) {
        flag(Severity::Warning, "tools.web.brave_api_key".to_owned(), web.get("brave_api_key"));
    }
    findings.extend(env_findings);
    findings
}

/// The sub-tables of a table (`[providers.<name>]`), by name.
fn tables(value: Option<&toml::Value>) -> impl Iterator<Item = (&String, &toml::Table)> {
    value
        .and_then(toml::Value::as_table)
        .into_iter()
        .flatten()
        .filter_map(|(name, entry)| Some((name, entry.as_table()?)))
}

/// The entries of a table (`headers = { … }`), by name.
fn tables_or_values(value: Option<&toml::Value>) -> impl Iterator<Item = (&String, &toml::Value)> {
    value.and_then(toml::Value::as_table).into_iter().flatten()
}

fn looks_like_credential(variable: &str) -> bool {
    let upper = variable.to_ascii_uppercase();
    let words = ["KEY", "PAT", "AUTH", "PASS"];
    let fragments = ["TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "APIKEY"];
    upper.split(|c: char| !c.is_ascii_alphanumeric()).any(|part| words.contains(&part))
        || fragments.iter().any(|fragment| upper.contains(fragment))
}

// --- file modes --------------------------------------------------------------------------

/// Modes of the home and what it keeps: keys and the database readable by others are
/// critical, the rest a warning.
fn file_findings(environment: &Environment) -> Vec<Finding> {
    let home = &environment.paths.home;
    let secret_files = [environment.paths.database(), home.join("audit.key"), home.join("vault.key")];
    let exposed = exposed_paths(environment);
    if exposed.is_empty() {
        return vec![Finding::new(
            Severity::Ok,
            "files",
            format!("{} and what squidbot keeps there are private", home.display()),
        )];
    }
    exposed
        .into_iter()
        .map(|(path, mode)| {
            let severity = if secret_files.contains(&path) { Severity::Critical } else { Severity::Warning };
            let wanted = if path.is_dir() { "700" } else { "600" };
            Finding::new(
                severity,
                path.display().to_string(),
                format!(
                    "is {mode:o}, open to the group or others: `chmod {wanted} {}` (or `chmod -R go-rwx {}`)",
                    path.display(),
                    home.display()
                ),
            )
        })
        .collect()
}

// --- vault key ----------------------------------------------------------------------------

/// Where the vault key is: the OS keyring, the key file (with its mode) or a passphrase.
fn vault_key_finding(environment: &Environment) -> Finding {
    let key_file = crate::config::vault::key_path(&environment.paths.home);
    let passphrase_variable = crate::config::vault::PASSPHRASE_VARIABLE;
    if std::env::var_os(passphrase_variable).is_some_and(|passphrase| !passphrase.is_empty()) {
        return Finding::new(
            Severity::Info,
            "vault.key",
            format!(
                "derived from the passphrase in {passphrase_variable} (it wins over [vault] key); processes of the \
                 same user can read a process's environment"
            ),
        );
    }
    match environment.config().vault.key {
        VaultKeyMode::File => {
            let detail = match std::fs::metadata(&key_file) {
                Ok(metadata) => format!(
                    "the key file {} (mode {}): a copied squidbot.db alone is safe, a copy of the whole home is \
                     not; on a desktop [vault] key = \"keyring\" keeps the key out of the home",
                    key_file.display(),
                    file_mode(&metadata)
                ),
                Err(_) => format!("the key file {}, made on first use", key_file.display()),
            };
            Finding::new(Severity::Info, "vault.key", detail)
        }
        VaultKeyMode::Keyring => keyring_finding(environment),
        VaultKeyMode::Passphrase => Finding::new(
            Severity::Ok,
            "vault.key",
            "derived from a passphrase (argon2id) asked at every start, kept nowhere",
        ),
    }
}

#[cfg(unix)]
fn file_mode(metadata: &std::fs::Metadata) -> String {
    use std::os::unix::fs::PermissionsExt;
    format!("{:o}", metadata.permissions().mode() & 0o777)
}

#[cfg(not(unix))]
fn file_mode(_metadata: &std::fs::Metadata) -> String {
    "not checked on this system".to_owned()
}

#[cfg(feature = "keyring")]
fn keyring_finding(environment: &Environment) -> Finding {
    let home = std::path::absolute(&environment.paths.home).unwrap_or_else(|_| environment.paths.home.clone());
    Finding::new(
        Severity::Ok,
        "vault.key",
        format!(
            "in the OS keyring, item \"{}\" (the Secret Service, or the Keychain on macOS); not in the home",
            squidbot_store::keyring_label(&home.display().to_string())
        ),
    )
}

#[cfg(not(feature = "keyring"))]
fn keyring_finding(_environment: &Environment) -> Finding {
    Finding::new(
        Severity::Critical,
        "vault.key",
        "\"keyring\", but this squidbot was built without its `keyring` feature, so the vault can't be opened; \
         use [vault] key = \"file\" or \"passphrase\"",
    )
}

// --- gateway ------------------------------------------------------------------------------

fn is_loopback(bind: &str) -> bool {
    let host = bind.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost") || host.parse::<IpAddr>().is_ok_and(|address| address.is_loopback())
}

fn gateway_findings(config: &Config) -> Vec<Finding> {
    let gateway = &config.gateway;
    let bind = &gateway.bind;
    let loopback = is_loopback(bind);
    let auth = match gateway.auth.mode {
        GatewayAuthMode::None if loopback => Finding::new(
            Severity::Warning,
            "gateway.auth.mode",
            format!(
                "`none` on {bind}: every local user and process may use the gateway; set mode = \"token\" and a \
                 token"
            ),
        ),
        GatewayAuthMode::None => Finding::new(
            Severity::Critical,
            "gateway.auth.mode",
            format!(
                "`none` while bound to {bind}, off loopback: anyone who reaches the port may use the gateway; set \
                 mode = \"token\" and a token, or bind = \"127.0.0.1\""
            ),
        ),
        GatewayAuthMode::Token => Finding::new(Severity::Ok, "gateway.auth.mode", format!("token on {bind}")),
        GatewayAuthMode::Password => Finding::new(Severity::Ok, "gateway.auth.mode", format!("password on {bind}")),
    };
    vec![auth, tls_finding(gateway, loopback)]
}

/// TLS on or off; off is only worth a warning off loopback, where the token and the
/// conversations cross the network in clear.
fn tls_finding(gateway: &squidbot_types::config::GatewayConfig, loopback: bool) -> Finding {
    let bind = &gateway.bind;
    match (&gateway.tls.cert, &gateway.tls.key) {
        (Some(cert), Some(_)) => Finding::new(Severity::Ok, "gateway.tls", format!("on, with the certificate {cert}")),
        (Some(_), None) | (None, Some(_)) => Finding::new(
            Severity::Warning,
            "gateway.tls",
            "only one of cert and key is set: `squidbot gateway` refuses to start; set both or neither",
        ),
        (None, None) if loopback => {
            Finding::new(Severity::Info, "gateway.tls", format!("off; fine on {bind}, which is loopback"))
        }
        (None, None) => Finding::new(
            Severity::Warning,
            "gateway.tls",
            format!(
                "off while bound to {bind}: credentials and conversations cross the network in clear; set \
                 [gateway.tls] cert and key, put a TLS proxy in front, or bind to loopback"
            ),
        ),
    }
}

// --- sandbox ------------------------------------------------------------------------------

/// The backend in force; `none` is critical when someone whose people's role may run
/// `exec` is not an admin (the gateway refuses to start then).
fn sandbox_finding(environment: &Environment) -> Result<Finding> {
    let report = environment.sandbox().report();
    let selection = &report.selection;
    Ok(match &selection.active {
        Active::Landlock | Active::Bubblewrap(_) => Finding::new(
            Severity::Ok,
            "sandbox",
            format!("{} confines commands ({})", selection.active.name(), selection.reason),
        ),
        Active::Unavailable { backend, reason } => Finding::new(
            Severity::Info,
            "sandbox",
            format!("{} is configured but does not work here, so exec refuses to run: {reason}", backend.as_str()),
        ),
        Active::None => {
            let people = crate::people::open(environment)?;
            let users = people.directory.users().map_err(|error| anyhow!(error))?;
            let problems = crate::people::unconfined_exec(environment.config(), SandboxBackend::None, &users);
            if problems.is_empty() {
                Finding::new(
                    Severity::Warning,
                    "sandbox",
                    format!(
                        "none: commands run unconfined ({}); use a kernel with Landlock or install bubblewrap",
                        selection.reason
                    ),
                )
            } else {
                Finding::new(
                    Severity::Critical,
                    "sandbox",
                    format!(
                        "none, while people who are not admins may run exec: {}; use a kernel with Landlock or \
                         install bubblewrap, or take exec from their roles",
                        problems.join("; ")
                    ),
                )
            }
        }
    })
}

// --- channels -----------------------------------------------------------------------------

fn channel_findings(config: &Config) -> Vec<Finding> {
    let mut findings = Vec::new();
    for (name, channel) in config.channels.iter().filter(|(_, channel)| channel.enabled) {
        if channel.policy == "open" {
            findings.push(Finding::new(
                Severity::Warning,
                format!("channels.{name}.policy"),
                format!("`open`: the {name} channel answers anyone who writes to it; use \"pairing\" or \"allowlist\""),
            ));
        }
        if channel.groups == "always" {
            findings.push(Finding::new(
                Severity::Info,
                format!("channels.{name}.groups"),
                format!(
                    "`always`: the {name} channel answers every message in its groups, not only mentions; use \
                     \"mention\" or \"allowlist\" to narrow it"
                ),
            ));
        }
    }
    findings
}

// --- skills -------------------------------------------------------------------------------

/// Whether `skills install` fetched `source` from another machine (a git URL other than
/// `file://`, or `user@host:path`) rather than a local path.
fn is_remote(source: &str) -> bool {
    let source = source.trim();
    if let Some((scheme, _)) = source.split_once("://") {
        return scheme != "file";
    }
    // scp-like `host:path`: a colon before any slash.
    source.find(':').is_some_and(|colon| source.find('/').is_none_or(|slash| colon < slash))
}

/// Installed skills and where they came from, from the install log (the last successful
/// install of each name wins); skills no longer under `skills_root` are left out.
fn skill_findings(log: &Path, skills_root: &Path) -> Vec<Finding> {
    let Ok(text) = std::fs::read_to_string(log) else { return Vec::new() };
    let mut sources: BTreeMap<String, String> = BTreeMap::new();
    for line in text.lines() {
        let Ok(entry) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        let installed = matches!(entry["result"].as_str(), Some("installed" | "replaced"));
        if let (true, Some(name), Some(source)) = (installed, entry["name"].as_str(), entry["source"].as_str()) {
            sources.insert(name.to_owned(), source.to_owned());
        }
    }
    sources
        .into_iter()
        .filter(|(name, source)| skills_root.join(name).is_dir() && is_remote(source))
        .map(|(name, source)| {
            Finding::new(
                Severity::Warning,
                format!("skills.{name}"),
                format!(
                    "installed from {source}; review it (its instructions reach the model), or remove {}",
                    skills_root.join(&name).display()
                ),
            )
        })
        .collect()
}

// --- hooks --------------------------------------------------------------------------------

fn hook_findings(config: &Config) -> Vec<Finding> {
    config
        .hooks
        .iter()
        .enumerate()
        .filter(|(_, hook)| HookEvent::from_name(&hook.event).is_some_and(HookEvent::decides) && hook.fail_open)
        .map(|(index, hook)| {
            Finding::new(
                Severity::Warning,
                format!("hooks[{index}].fail_open"),
                format!(
                    "the {} hook `{}` fails open: what it checks goes through unchecked when it fails or times out; \
                     remove fail_open unless the hook only observes",
                    hook.event,
                    hook.command.join(" ")
                ),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_credentials_are_named_and_references_are_not() {
        let table: toml::Table = toml::from_str(
            "[providers.a]\napi_key = \"sk-1\"\nheaders = { X-Key = \"k\" }\n[providers.b]\napi_key = \"secret:b\"\n\
             [channels.t]\ntoken = \"t\"\ntoken_env = \"T\"\n[gateway.auth]\npassword_hash = \"$argon2id$x\"\n\
             [mcp.servers.gh]\nheaders = { Authorization = \"Bearer x\" }\nenv = { MODE = \"j\", GH_TOKEN = \"g\" }\n\
             [tools.web]\nbrave_api_key = \"secret:brave\"\n",
        )
        .unwrap();
        let found: Vec<(Severity, String)> =
            plaintext_credentials(&table).into_iter().map(|finding| (finding.severity, finding.key)).collect();
        assert_eq!(
            found,
            [
                (Severity::Warning, "providers.a.api_key".to_owned()),
                (Severity::Warning, "providers.a.headers.X-Key".to_owned()),
                (Severity::Warning, "channels.t.token".to_owned()),
                (Severity::Info, "gateway.auth.password_hash".to_owned()),
                (Severity::Warning, "mcp.servers.gh.headers.Authorization".to_owned()),
                (Severity::Warning, "mcp.servers.gh.env.GH_TOKEN".to_owned()),
            ]
        );
    }

    #[test]
    fn loopback_and_remote_sources_are_told_apart() {
        assert!(is_loopback("127.0.0.1") && is_loopback("::1") && is_loopback("[::1]") && is_loopback("localhost"));
        assert!(!is_loopback("0.0.0.0") && !is_loopback("192.168.1.2"));
        assert!(is_remote("https://example.org/skills.git") && is_remote("git@example.org:me/skill.git"));
        assert!(!is_remote("/home/me/skill") && !is_remote("./skill") && !is_remote("file:///srv/skill"));
    }

    #[test]
    fn tls_off_beyond_loopback_is_a_warning_and_on_is_ok() {
        let mut gateway = squidbot_types::config::GatewayConfig { bind: "0.0.0.0".into(), ..Default::default() };
        assert_eq!(tls_finding(&gateway, false).severity, Severity::Warning);
        assert_eq!(tls_finding(&gateway, true).severity, Severity::Info);
        gateway.tls.cert = Some("tls/cert.pem".into());
        assert_eq!(tls_finding(&gateway, false).severity, Severity::Warning, "a cert without a key");
        gateway.tls.key = Some("tls/key.pem".into());
        let on = tls_finding(&gateway, false);
        assert!(on.severity == Severity::Ok && on.detail.starts_with("on"), "{on:?}");
    }
}
