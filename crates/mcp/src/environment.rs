//! The environment a stdio server starts with: empty but for a few harmless variables
//! (none carrying a known secret in its value), a fixed `PATH` and the server's configured
//! `env`, which may never carry credentials by name or change how programs are loaded.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;

use squidbot_core::leaks::LeakScanner;

/// Variables passed through from the gateway when set (plus every `LC_*`).
pub const INHERITED_NAMES: [&str; 5] = ["HOME", "LANG", "TERM", "TZ", "USER"];

/// The `PATH` every stdio server gets, before the directory of an absolute `command`.
pub const SAFE_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Why a configured variable name is refused, or `None` when it may be passed.
pub fn refusal(name: &str) -> Option<&'static str> {
    if name.is_empty() || name.contains(['=', '\0']) {
        return Some("is not a valid environment variable name");
    }
    let upper = name.to_ascii_uppercase();
    if upper.starts_with("SQUIDBOT_") {
        return Some("belongs to squidbot's own configuration, which servers never see");
    }
    if looks_secret(&upper) {
        return Some("looks like a credential; squidbot never hands secrets to MCP servers");
    }
    if upper.starts_with("LD_") || upper.starts_with("DYLD_") {
        return Some("changes how programs are loaded and is never passed to MCP servers");
    }
    if upper == "PATH" {
        return Some("is fixed to a safe value; give `command` as an absolute path instead");
    }
    None
}

/// True for names such as `OPENAI_API_KEY`, `GITHUB_TOKEN`, `CLIENT_SECRET`, `DB_PASSWORD`.
fn looks_secret(upper: &str) -> bool {
    ["KEY", "TOKEN", "SECRET"].iter().any(|marker| upper == *marker || upper.ends_with(&format!("_{marker}")))
        || upper.contains("PASSWORD")
        || upper.contains("PASSWD")
}

/// True for variables inherited from the gateway.
fn inherited(name: &str) -> bool {
    INHERITED_NAMES.contains(&name) || name.starts_with("LC_")
}

/// The full environment of a stdio server: the inherited names found in `parent` (minus
/// any whose value carries a secret `withheld` knows), the safe `PATH` (with the directory
/// of `command` first when it is absolute), then `configured` minus anything [`refusal`]
/// rejects (configuration checks report those as errors first). A configured value from
/// the vault is the server's own: it declared it.
pub fn server_environment(
    command: &str,
    configured: &BTreeMap<String, String>,
    parent: impl IntoIterator<Item = (OsString, OsString)>,
    withheld: &LeakScanner,
) -> Vec<(OsString, OsString)> {
    let mut environment: Vec<(OsString, OsString)> = parent
        .into_iter()
        .filter(|(name, _)| name.to_str().is_some_and(inherited))
        .filter(|(name, value)| {
            let carries_secret = !withheld.scan(&value.to_string_lossy()).is_empty();
            if carries_secret {
                tracing::warn!(variable = ?name, "not passing a variable to an MCP server: its value carries a secret");
            }
            !carries_secret
        })
        .collect();
    let path = match Path::new(command).parent() {
        Some(directory) if Path::new(command).is_absolute() => {
            let mut path = directory.as_os_str().to_owned();
            path.push(":");
            path.push(SAFE_PATH);
            path
        }
        _ => OsString::from(SAFE_PATH),
    };
    environment.push((OsString::from("PATH"), path));
    for (name, value) in configured {
        if refusal(name).is_none() {
            environment.retain(|(existing, _)| existing.to_str() != Some(name.as_str()));
            environment.push((OsString::from(name), OsString::from(value)));
        }
    }
    environment
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_and_loader_tricks_are_refused() {
        for name in [
            "OPENAI_API_KEY",
            "GITHUB_TOKEN",
            "client_secret",
            "DB_PASSWORD",
            "SQUIDBOT__PROVIDERS__LOCAL__API_KEY",
            "LD_PRELOAD",
            "LD_LIBRARY_PATH",
            "DYLD_INSERT_LIBRARIES",
            "PATH",
            "A=B",
            "",
        ] {
            assert!(refusal(name).is_some(), "{name} should be refused");
        }
        for name in ["NODE_OPTIONS_X", "KEYBOARD", "ALLOWED_DIRS", "DEBUG", "TOKENIZERS_PARALLELISM"] {
            assert_eq!(refusal(name), None, "{name} should pass");
        }
    }

    #[test]
    fn only_safe_variables_are_inherited() {
        let parent = [
            ("HOME", "/home/me"),
            ("LC_ALL", "C.UTF-8"),
            ("OPENAI_API_KEY", "sk-secret"),
            ("LD_PRELOAD", "/tmp/evil.so"),
            ("PATH", "/tmp/evil:/usr/bin"),
        ]
        .map(|(name, value)| (OsString::from(name), OsString::from(value)));
        let configured =
            BTreeMap::from([("ROOT".to_owned(), "/srv".to_owned()), ("GITHUB_TOKEN".to_owned(), "ghp_x".to_owned())]);
        let environment = server_environment("/opt/node/bin/npx", &configured, parent, &LeakScanner::default());
        let names: Vec<&str> = environment.iter().filter_map(|(name, _)| name.to_str()).collect();
        assert_eq!(names, ["HOME", "LC_ALL", "PATH", "ROOT"]);
        let path = &environment[2].1;
        assert_eq!(path, "/opt/node/bin:/usr/local/bin:/usr/bin:/bin");
        let relative = server_environment("npx", &BTreeMap::new(), [], &LeakScanner::default());
        assert_eq!(relative, [(OsString::from("PATH"), OsString::from(SAFE_PATH))]);
    }

    #[test]
    fn an_inherited_variable_carrying_a_secret_is_withheld_but_the_servers_own_env_is_kept() {
        let vault_value = "correct-horse-battery-staple";
        let parent = [("USER", vault_value), ("LANG", "C.UTF-8")]
            .map(|(name, value)| (OsString::from(name), OsString::from(value)));
        let configured = BTreeMap::from([("MODE".to_owned(), vault_value.to_owned())]);
        let withheld = LeakScanner::new([vault_value.to_owned()]);
        let environment = server_environment("npx", &configured, parent, &withheld);
        let names: Vec<&str> = environment.iter().filter_map(|(name, _)| name.to_str()).collect();
        assert_eq!(names, ["LANG", "PATH", "MODE"], "USER carried the vault value; MODE is the server's own");
    }
}
